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

#include "ejob/console.h"
#include "ejob/trace.h"

#define EJ__CONSOLE_DEFAULT_LISTEN "127.0.0.1:8899"
#define EJ__CONSOLE_TOKEN_HEX 64 /* 32 random bytes */
#define EJ__CONSOLE_MAX_SESSIONS 1024
#define EJ__CONSOLE_MAX_BODY (EJ_CONFIG_MAX_JSON + 4096)

struct ej__console_session {
    char token[EJ__CONSOLE_TOKEN_HEX + 1];
    char csrf[EJ__CONSOLE_TOKEN_HEX + 1];
    char user[128];
    ej_console_role role;
    int64_t expires_ms; /* monotonic; extended on each use */
};

struct ej__console_backend {
    const struct ej_console_registry *def; /* in web->settings */
    ej_registry *reg;
    ej_console *con; /* cached reads */
};

/* The execution history store, when one is configured. */
struct ej__console_history {
    bool configured;
    struct ej_trace_target target; /* url points into settings.history_store */
    char *password;                /* from the password file, or NULL */
    pthread_mutex_t mu;            /* a reader serves one query at a time */
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
    pthread_mutex_t mu;       /* sessions and the audit log */
    struct ej__console_session sessions[EJ__CONSOLE_MAX_SESSIONS];
    char no_auth_csrf[EJ__CONSOLE_TOKEN_HEX + 1];
    FILE *audit;
    struct ej__console_history history;
};

/* What a request is, once authenticated. */
struct ej__console_request {
    ej_console_web *web;
    const char *method;
    const char *url;
    const char *remote;
    struct MHD_Connection *conn; /* for query arguments */
    json_t *body;                /* parsed JSON body of a write, NULL when none */
    char user[128];              /* "" before login */
    ej_console_role role;
    bool write; /* POST, PUT or DELETE */
    /* the response */
    unsigned status;
    json_t *reply;
    char *set_cookie; /* Set-Cookie header value, or NULL */
    char audit_detail[512];
};

/* web_auth.c */
int ej__console_random_hex(char *out, size_t hex_len);
bool ej__console_token_equal(const char *a, const char *b);
/* New session for user; copies its tokens out. EJ_EBUSY when full. */
int ej__console_session_new(ej_console_web *web, const char *user, ej_console_role role,
                            struct ej__console_session *out);
/* Look up a live session by token (extends it); false when none. */
bool ej__console_session_find(ej_console_web *web, const char *token,
                              struct ej__console_session *out);
void ej__console_session_end(ej_console_web *web, const char *token);
const struct ej_console_account *ej__console_account(const ej_console_web *web, const char *name);

/* web_api.c: fill req->status / reply for an authenticated API request. */
void ej__console_api(struct ej__console_request *req);
/* web_history.c: set up / tear down the history store; the history routes
 * (seg: what follows "/api/history/"; job: a job's history, or NULL). */
int ej__console_history_init(ej_console_web *web, char *err, size_t errlen);
void ej__console_history_fini(ej_console_web *web);
void ej__console_api_history(struct ej__console_request *req, const char *job, const char *id);
/* Shared with web_fires.c. False, with a 404 reply, when no store is
 * configured. */
bool ej__console_history_configured(struct ej__console_request *req);
/* With history.mu held: the reader, opened when it is not. NULL with the
 * reply set when the store cannot be read. */
ej_trace_reader *ej__console_history_reader_locked(struct ej__console_request *req);
/* With history.mu held: a failed query, said as the database said it; the
 * reader is reopened by the next request (a lost connection, a new file). */
void ej__console_history_failed_locked(struct ej__console_request *req, int rc);
/* A URL query argument, NULL when absent or empty. */
const char *ej__console_query_arg(const struct ej__console_request *req, const char *name);
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
int ej__console_parse_listen(const char *listen, struct sockaddr_in *out);
int ej__console_settings_parse(const char *text, size_t len, const char *name,
                               struct ej_console_settings *s, char *err, size_t errlen);

#endif
