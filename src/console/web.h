/* Inside `ejob console`: the web server's state shared by its files. */
#ifndef EJ_CONSOLE_WEB_H
#define EJ_CONSOLE_WEB_H

#include <netinet/in.h>
#include <pthread.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>

#include <jansson.h>
#include <microhttpd.h>

#include "common/check.h"
#include "ejob/console.h"
#include "ejob/trace.h"

#define EJ__CONSOLE_DEFAULT_LISTEN "127.0.0.1:8899"
#define EJ__CONSOLE_TOKEN_HEX 64 /* 32 random bytes */
#define EJ__CONSOLE_MAX_SESSIONS 1024
/* Live sessions one account may hold: its oldest ends when it opens more,
 * and no other account's logins can end it. */
#define EJ__CONSOLE_SESSIONS_PER_ACCOUNT 8
/* Registries a token may have a role of its own on. */
#define EJ__CONSOLE_TOKEN_GRANTS 16
/* Addresses and accounts whose failed logins are counted (web_guard.c). */
#define EJ__CONSOLE_THROTTLE_SLOTS 512
#define EJ__CONSOLE_MAX_BODY (EJ_CONFIG_MAX_JSON + 4096)

struct ej__console_session {
    char token[EJ__CONSOLE_TOKEN_HEX + 1];
    char csrf[EJ__CONSOLE_TOKEN_HEX + 1];
    char user[128];
    int64_t created_ms; /* monotonic */
    int64_t expires_ms; /* monotonic; extended on each use */
};

/* Failed logins of one address or account: the next attempt is refused
 * (429) until not_before_ms. */
struct ej__console_throttle {
    char key[136]; /* "a:ADDRESS" or "u:NAME"; "" free */
    unsigned failures;
    int64_t last_ms, not_before_ms;
};

#define EJ__CONSOLE_ETAG_MAX 32
#define EJ__CONSOLE_LIST_ETAGS 8

/* The ETag a job list query last got, and until when its times hold
 * (web_jobs.c). */
struct ej__console_list_etag {
    char key[640]; /* the query with the tree cache's generation; "" free */
    char etag[EJ__CONSOLE_ETAG_MAX];
    int64_t valid_until_ms;
};

struct ej__console_backend {
    const struct ej_console_registry *def; /* in web->settings */
    ej_registry *reg;
    ej_console *con; /* cached reads */
    struct ej__console_list_etag list_etags[EJ__CONSOLE_LIST_ETAGS]; /* under web->mu */
    unsigned list_etag_next;
    /* The jobs as last loaded, while the tree cache's generation is
     * list_gen: a list that only has to show times anew reuses them. */
    ej__mutex list_mu;
    bool list_mu_ready;
    bool list_loaded;
    uint64_t list_gen;
    struct ej_console_job *list_jobs;
    size_t list_count;
};

/* The execution history store, when one is configured. */
struct ej__console_history {
    bool configured;
    struct ej_trace_target target; /* url points into settings.history_store */
    char *password;                /* from the password file, or NULL */
    ej__mutex mu;                  /* a reader serves one query at a time */
    ej_trace_reader *reader;       /* opened on first use, again after an error */
};

struct ej_console_web {
    struct ej_console_settings settings;
    struct ej__console_backend *backends;
    size_t backend_count;
    struct MHD_Daemon *mhd;
    int port;
    bool tls;
    char *tls_cert, *tls_key; /* PEM contents */
    ej__mutex mu;             /* sessions and the audit log */
    struct ej__console_session sessions[EJ__CONSOLE_MAX_SESSIONS];
    char no_auth_csrf[EJ__CONSOLE_TOKEN_HEX + 1];
    FILE *audit;
    struct ej__console_history history;
    char listen_host[64]; /* the host of settings.listen, for Host checks */
    struct ej__console_throttle throttle[EJ__CONSOLE_THROTTLE_SLOTS]; /* under mu */
    uint64_t logins_throttled, logins_failed, hosts_refused;          /* under mu */
    ej__mutex tokens_mu; /* the tokens file, read again when it changes */
    struct ej__console_tokens *tokens;
};

/* Who a request is from: an account, a token, or everyone (--no-auth). */
struct ej__console_principal {
    char name[128];                  /* "" before login */
    const char *kind;                /* "session", "token", "no-auth", "login"; NULL: nobody */
    ej_console_role role;            /* on registries without a grant */
    struct ej_console_grant *grants; /* into settings, or token_grants */
    size_t grant_count;
    /* A token's roles per registry, copied (the tokens file may be read
     * again while the request runs). */
    struct ej_console_grant token_grants[EJ__CONSOLE_TOKEN_GRANTS];
    char token_registries[EJ__CONSOLE_TOKEN_GRANTS][128];
};

/* What a request is, once authenticated. */
struct ej__console_request {
    ej_console_web *web;
    const char *method;
    const char *url;
    const char *remote;
    struct MHD_Connection *conn; /* for query arguments */
    json_t *body;                /* parsed JSON body of a write, NULL when none */
    struct ej__console_principal who;
    bool write;           /* POST, PUT or DELETE */
    bool bearer;          /* authenticated by an API token */
    const char *registry; /* the route's registry, for the audit line */
    const char *action;   /* the path's last segment */
    /* the response */
    unsigned status;
    json_t *reply;
    char *set_cookie;     /* Set-Cookie header value, or NULL */
    char *allow;          /* Allow header of a 405, or NULL */
    char etag[EJ__CONSOLE_ETAG_MAX]; /* ETag of the reply (304: no body); "" none */
    unsigned retry_after; /* seconds, for a 429; 0: none */
    json_t *audit_extra;  /* fields added to the audit line, or NULL */
};

/* A REST route: METHOD and a path under /api/ whose ":x" segments are
 * arguments (":r" a registry name), the least role it needs, and what
 * serves it. Routes are listed in one table (web_api.c). */
typedef void (*ej__console_handler)(struct ej__console_request *req, ej_console *con, char **args);
struct ej__console_route {
    const char *method;
    const char *path;
    ej_console_role need;
    ej__console_handler handler;
};

/* web_auth.c */
int ej__console_random_hex(char *out, size_t hex_len);
bool ej__console_token_equal(const char *a, const char *b);
/* New session for user; copies its tokens out. Ends the user's oldest
 * session beyond EJ__CONSOLE_SESSIONS_PER_ACCOUNT; EJ_EBUSY when every slot
 * holds another account's live session. */
int ej__console_session_new(ej_console_web *web, const char *user, struct ej__console_session *out);
/* Look up a live session by token (extends it); false when none. */
bool ej__console_session_find(ej_console_web *web, const char *token,
                              struct ej__console_session *out);
void ej__console_session_end(ej_console_web *web, const char *token);
const struct ej_console_account *ej__console_account(const ej_console_web *web, const char *name);
/* The role of who on registry (NULL: the role outside any registry). */
ej_console_role ej__console_role_on(const struct ej__console_principal *who, const char *registry);
/* {"registry": "role", ...} for every registry the console shows. */
json_t *ej__console_roles_json(const ej_console_web *web, const struct ej__console_principal *who);

/* web_guard.c: checks before any route, login throttling, the audit log. */
/* Host header allowed (loopback names, the listen host, allowedHosts)? */
bool ej__console_host_allowed(const ej_console_web *web, const char *host);
/* An Origin header, when sent, names an allowed host of this console. */
bool ej__console_origin_allowed(const ej_console_web *web, const char *origin);
/* Seconds before remote/user may try a login again; 0: now. */
unsigned ej__console_login_wait(ej_console_web *web, const char *remote, const char *user);
/* Count a failed (ok false) or good login of remote/user. */
void ej__console_login_result(ej_console_web *web, const char *remote, const char *user, bool ok);
/* Add key: value (stolen) to the request's audit line. */
void ej__console_audit_field(struct ej__console_request *req, const char *key, json_t *value);
/* One JSON line per write, login and refused request. */
void ej__console_audit(ej_console_web *web, const struct ej__console_request *req);

/* web_tokens.c: API tokens in settings.tokens_file. */
/* Fill who from "Authorization: Bearer TOKEN"; false when unknown, revoked
 * or expired. Notes its last use. */
bool ej__console_token_auth(ej_console_web *web, const char *token,
                            struct ej__console_principal *who);
void ej__console_tokens_free(struct ej__console_tokens *t);
/* web_api.c: fill req->status / reply for an authenticated API request:
 * the route, 404 / 405 with Allow, the role, then its handler. */
void ej__console_api(struct ej__console_request *req);
/* The route table and its length (for tests and the docs). */
const struct ej__console_route *ej__console_routes(size_t *count);
/* web_history.c: set up / tear down the history store; the history routes
 * (seg: what follows "/api/history/"; job: a job's history, or NULL). */
int ej__console_history_init(ej_console_web *web, char *err, size_t errlen);
void ej__console_history_fini(ej_console_web *web);
void ej__console_api_history(struct ej__console_request *req, ej_console *con, const char *job,
                             const char *id);
/* GET /api/history/ID/output?out=N&err=N: a run's output from byte offsets,
 * for the run page to follow it live (web_history.c). */
void ej__console_api_history_output(struct ej__console_request *req, const char *id);
/* Shared with web_fires.c. False, with a 404 reply, when no store is
 * configured. */
bool ej__console_history_configured(struct ej__console_request *req);
/* The newest fire of job in the fire ledger into *ms; false when there is
 * none or no store to ask (never replies). */
bool ej__console_last_fire(ej_console_web *web, const char *job, int64_t *ms);

/* web_jobs.c: the job list route; a job's zone, next fires (count: 1 sets
 * nextFire, more nextFires) and last fire into o; returns its next fire
 * (epoch ms, 0: none). */
void ej__console_api_jobs(struct ej__console_request *req, ej_console *con);
int64_t ej__console_job_times(ej_console_web *web, const struct ej_console_job *j, int count,
                              json_t *o);
/* web_api.c: a job as the job list shows it. */
json_t *ej__console_job_brief_json(const struct ej_console_job *j);
/* With history.mu held: the reader, opened when it is not. NULL with the
 * reply set when the store cannot be read. */
ej_trace_reader *ej__console_history_reader_locked(struct ej__console_request *req);
/* With history.mu held: a failed query, said as the database said it; the
 * reader is reopened by the next request (a lost connection, a new file). */
void ej__console_history_failed_locked(struct ej__console_request *req, int rc);
/* A URL query argument, NULL when absent or empty. */
const char *ej__console_query_arg(const struct ej__console_request *req, const char *name);
/* A history cursor "START_MS:ID" (a reply's older / newer): START_MS a
 * decimal in 0..EJ_CONSOLE_CURSOR_MS_MAX, ID 1..36 letters, digits and '-'. True
 * with *ms and *id (pointing into text); false otherwise. Pure. */
#define EJ_CONSOLE_CURSOR_MS_MAX 253402300799999LL /* 9999-12-31T23:59:59.999Z */
bool ej__console_parse_cursor(const char *text, int64_t *ms, const char **id);
/* s as a decimal in min..max into *out; false otherwise. */
bool ej__console_parse_long(const char *s, long min, long max, long *out);
/* since / until from the URL (a duration back from now or a local time;
 * since_default when since is absent, NULL: none) as epoch ms (0: no
 * bound); false with a 400 reply naming the bad one. */
bool ej__console_parse_window(struct ej__console_request *req, const char *since_default,
                              int64_t *since_ms, int64_t *until_ms);
/* The URL argument name in min..max into *out (left as it is when absent);
 * false with a 400 reply. */
bool ej__console_parse_arg_long(struct ej__console_request *req, const char *name, long min,
                                long max, long *out);
/* web_fires.c: GET /api/registries/R/jobs/J/fires, the job's fire ledger. */
void ej__console_api_fires(struct ej__console_request *req, const char *job);
/* web_config.c: GET / PUT of a job's config. */
void ej__console_api_config(struct ej__console_request *req, ej_console *con, const char *job);
/* Set an error reply. */
void ej__console_reply_error(struct ej__console_request *req, unsigned status, const char *fmt, ...)
    EJ_PRINTF(3, 4);

/* web_assets.c (generated): the page's files. */
struct ej__console_asset {
    const char *path; /* "/index.html" */
    const char *type; /* Content-Type */
    const unsigned char *data;
    size_t len;
};
const struct ej__console_asset *ej__console_asset_find(const char *path);

/* web_server.c: libmicrohttpd's callbacks. */
enum MHD_Result ej__console_on_request(void *cls, struct MHD_Connection *c, const char *url,
                                       const char *method, const char *version,
                                       const char *upload_data, size_t *upload_size,
                                       void **con_cls);
void ej__console_on_completed(void *cls, struct MHD_Connection *c, void **con_cls,
                              enum MHD_RequestTerminationCode toe);

/* web_settings.c */
void ej__console_account_fini(struct ej_console_account *a);
/* Deep copy; on error dst holds what was copied (free with _fini). */
int ej__console_account_copy(struct ej_console_account *dst, const struct ej_console_account *src);
int ej__console_parse_listen(const char *listen, struct sockaddr_in *out);
int ej__console_settings_parse(const char *text, size_t len, const char *name,
                               struct ej_console_settings *s, char *err, size_t errlen);
/* The same with the file's mode and directory (for digestFile, tokensFile
 * and the inline digest check); mode 0: not a file. */
int ej__console_settings_parse_file(const char *text, size_t len, const char *name, unsigned mode,
                                    struct ej_console_settings *s, char *err, size_t errlen);

#endif
