/*
 * `ejob console`'s HTTP server (libmicrohttpd, TLS through GnuTLS): the
 * page's files, and the REST API behind a login (sessions in an HttpOnly,
 * SameSite=Strict cookie whose Max-Age follows the session, a CSRF token
 * header on every write of a session, or an API token as a Bearer header),
 * with an audit line per write. Host and Origin checks, login throttling
 * and the audit log are in web_guard.c; roles per route in web_api.c.
 */
#include <arpa/inet.h>
#include <errno.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <strings.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include <microhttpd.h>

#include "common/check.h"
#include "common/util.h"
#include "console/internal.h"
#include "console/web.h"
#include "ejob/error.h"
#include "ejob/log.h"

#define COOKIE "ejob_session"
#define CSRF_HEADER "X-CSRF-Token"

/* Per connection: the body being received. */
struct upload {
    int64_t started_ms; /* monotonic, when the headers were in */
    ej_buf body;
    bool too_big;
    bool refused; /* answered 421 already */
};

static void add_common_headers(struct MHD_Response *r, bool api)
{
    MHD_add_response_header(r, "X-Content-Type-Options", "nosniff");
    MHD_add_response_header(r, "X-Frame-Options", "DENY");
    MHD_add_response_header(r, "Referrer-Policy", "no-referrer");
    MHD_add_response_header(r, "Content-Security-Policy",
                            "default-src 'self'; frame-ancestors 'none'; form-action 'self'");
    MHD_add_response_header(r, "Cache-Control", api ? "no-store" : "no-cache");
}

/* The extra headers of a reply: cookie, Allow, Retry-After, ETag. */
struct reply_headers {
    const char *cookie, *allow;
    unsigned retry_after;
    const char *etag;
};

static enum MHD_Result queue(struct MHD_Connection *c, ej_console_web *web, unsigned status,
                             struct MHD_Response *r, bool api, const struct reply_headers *h)
{
    add_common_headers(r, api);
    if (web->tls)
        MHD_add_response_header(r, "Strict-Transport-Security", "max-age=31536000");
    if (h != NULL && h->cookie != NULL)
        MHD_add_response_header(r, "Set-Cookie", h->cookie);
    if (h != NULL && h->allow != NULL)
        MHD_add_response_header(r, "Allow", h->allow);
    if (h != NULL && h->etag != NULL && h->etag[0] != '\0')
        MHD_add_response_header(r, "ETag", h->etag);
    char retry[16];
    if (h != NULL && h->retry_after > 0) {
        snprintf(retry, sizeof retry, "%u", h->retry_after);
        MHD_add_response_header(r, "Retry-After", retry);
    }
    enum MHD_Result ret = MHD_queue_response(c, status, r);
    MHD_destroy_response(r);
    return ret;
}

static enum MHD_Result send_json(struct MHD_Connection *c, ej_console_web *web, unsigned status,
                                 json_t *v, const struct reply_headers *h)
{
    char *text = json_dumps(v, JSON_COMPACT | JSON_ENCODE_ANY);
    if (text == NULL)
        return MHD_NO;
    struct MHD_Response *r =
        MHD_create_response_from_buffer(strlen(text), text, MHD_RESPMEM_MUST_FREE);
    if (r == NULL) {
        free(text);
        return MHD_NO;
    }
    MHD_add_response_header(r, "Content-Type", "application/json; charset=utf-8");
    return queue(c, web, status, r, true, h);
}

static enum MHD_Result send_error(struct MHD_Connection *c, ej_console_web *web, unsigned status,
                                  const char *msg, const struct reply_headers *h)
{
    json_t *e = json_pack("{s:s}", "error", msg);
    enum MHD_Result ret = send_json(c, web, status, e, h);
    json_decref(e);
    return ret;
}

static enum MHD_Result send_asset(struct MHD_Connection *c, ej_console_web *web, const char *url)
{
    const struct ej__console_asset *a =
        ej__console_asset_find(strcmp(url, "/") == 0 ? "/index.html" : url);
    if (a == NULL)
        return send_error(c, web, MHD_HTTP_NOT_FOUND, "no such page", NULL);
    struct MHD_Response *r =
        MHD_create_response_from_buffer(a->len, (void *)a->data, MHD_RESPMEM_PERSISTENT);
    if (r == NULL)
        return MHD_NO;
    MHD_add_response_header(r, "Content-Type", a->type);
    return queue(c, web, MHD_HTTP_OK, r, false, NULL);
}

static void remote_of(struct MHD_Connection *c, char *buf, size_t len)
{
    const union MHD_ConnectionInfo *ci =
        MHD_get_connection_info(c, MHD_CONNECTION_INFO_CLIENT_ADDRESS);
    snprintf(buf, len, "?");
    if (ci == NULL || ci->client_addr == NULL)
        return;
    if (ci->client_addr->sa_family == AF_INET)
        inet_ntop(AF_INET, &((const struct sockaddr_in *)(const void *)ci->client_addr)->sin_addr,
                  buf, (socklen_t)len);
}

void ej__console_reply_error(struct ej__console_request *req, unsigned status, const char *fmt, ...)
{
    char msg[1200];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(msg, sizeof msg, fmt, ap);
    va_end(ap);
    json_decref(req->reply);
    req->status = status;
    req->reply = json_pack("{s:s}", "error", msg);
}

static char *session_cookie(const ej_console_web *web, const char *token)
{
    return ej__asprintf(COOKIE "=%s; Path=/; HttpOnly; SameSite=Strict; Max-Age=%d%s", token,
                        web->settings.session_ttl_seconds, web->tls ? "; Secure" : "");
}

static void account_principal(const struct ej_console_account *a, struct ej__console_principal *w)
{
    snprintf(w->name, sizeof w->name, "%s", a->name);
    w->role = a->role;
    w->grants = a->grants;
    w->grant_count = a->grant_count;
}

static void session_reply(struct ej__console_request *req, const char *csrf)
{
    req->status = MHD_HTTP_OK;
    req->reply = json_pack("{s:s,s:s,s:o,s:s,s:b,s:s}", "user", req->who.name, "role",
                           ej_console_role_name(req->who.role), "roles",
                           ej__console_roles_json(req->web, &req->who), "csrfToken", csrf, "noAuth",
                           req->web->settings.no_auth, "auth", req->who.kind);
}

/* A hash to check unknown names against, so that timing does not tell
 * names apart: made once, with the same algorithm as new hashes. */
static char dummy[256];
static void make_dummy(void)
{
    if (ej_console_hash_password("no such user, no such password", dummy, sizeof dummy) != 0)
        dummy[0] = '\0';
}

static void login(struct ej__console_request *req, struct MHD_Connection *c)
{
    ej_console_web *web = req->web;
    const char *ctype = MHD_lookup_connection_value(c, MHD_HEADER_KIND, "Content-Type");
    if (ctype == NULL || strncasecmp(ctype, "application/json", 16) != 0 ||
        (ctype[16] != '\0' && ctype[16] != ';'))
        return ej__console_reply_error(req, MHD_HTTP_UNSUPPORTED_MEDIA_TYPE,
                                       "a login is a JSON body (Content-Type: application/json)");
    const char *user = json_string_value(json_object_get(req->body, "user"));
    const char *password = json_string_value(json_object_get(req->body, "password"));
    snprintf(req->who.name, sizeof req->who.name, "%s", user != NULL ? user : "");
    const struct ej_console_account *a = ej__console_account(web, user);
    if (a != NULL) {
        account_principal(a, &req->who);
        req->who.kind = "login";
    }
    unsigned wait = ej__console_login_wait(web, req->remote, user);
    if (wait > 0) {
        req->retry_after = wait;
        return ej__console_reply_error(req, MHD_HTTP_TOO_MANY_REQUESTS,
                                       "too many failed logins; try again in %u s", wait);
    }
    static pthread_once_t once = PTHREAD_ONCE_INIT;
    pthread_once(&once, make_dummy);
    bool ok = ej_console_check_password(password != NULL ? password : "",
                                        a != NULL ? a->password_hash : dummy);
    ok = ok && a != NULL;
    ej__console_login_result(web, req->remote, user, ok);
    if (!ok)
        return ej__console_reply_error(req, MHD_HTTP_UNAUTHORIZED, "wrong user name or password");
    struct ej__console_session s;
    int rc = ej__console_session_new(web, a->name, &s);
    if (rc != 0)
        return ej__console_reply_error(req, MHD_HTTP_SERVICE_UNAVAILABLE,
                                       "cannot open a session: %s", ej_strerror(rc));
    req->who.kind = "session";
    req->set_cookie = session_cookie(web, s.token);
    session_reply(req, s.csrf);
}

/* Who is asking: fills req->who; returns the CSRF token expected of their
 * writes ("" for a bearer token: a browser never sends one by itself), or
 * NULL when not logged in. */
static const char *authenticate(struct ej__console_request *req, struct MHD_Connection *c,
                                struct ej__console_session *s)
{
    ej_console_web *web = req->web;
    if (web->settings.no_auth) {
        snprintf(req->who.name, sizeof req->who.name, "anonymous");
        req->who.kind = "no-auth";
        req->who.role = EJ_CONSOLE_ROLE_ADMIN;
        return web->no_auth_csrf;
    }
    const char *authz = MHD_lookup_connection_value(c, MHD_HEADER_KIND, "Authorization");
    if (authz != NULL) {
        if (strncasecmp(authz, "Bearer ", 7) != 0 ||
            !ej__console_token_auth(web, authz + 7, &req->who))
            return NULL;
        req->who.kind = "token";
        req->bearer = true;
        return "";
    }
    const char *token = MHD_lookup_connection_value(c, MHD_COOKIE_KIND, COOKIE);
    if (!ej__console_session_find(web, token, s))
        return NULL;
    const struct ej_console_account *a = ej__console_account(web, s->user);
    if (a == NULL)
        return NULL;
    account_principal(a, &req->who);
    req->who.kind = "session";
    /* The cookie lives as long as the session: each use extends both. */
    req->set_cookie = session_cookie(web, s->token);
    return s->csrf;
}

static bool parse_body(struct ej__console_request *req, struct upload *up)
{
    if (up == NULL || up->body.len == 0)
        return true;
    json_error_t jerr;
    req->body = json_loadb(up->body.data, up->body.len, 0, &jerr);
    if (req->body == NULL || !json_is_object(req->body)) {
        ej__console_reply_error(req, MHD_HTTP_BAD_REQUEST,
                                "the request body must be a JSON object (%s)", jerr.text);
        return false;
    }
    return true;
}

static void status(struct ej__console_request *req)
{
    ej_console_web *web = req->web;
    ej__mutex_lock(&web->mu);
    json_t *o = json_pack("{s:I,s:I,s:I}", "loginsFailed", (json_int_t)web->logins_failed,
                          "loginsThrottled", (json_int_t)web->logins_throttled, "hostsRefused",
                          (json_int_t)web->hosts_refused);
    ej__mutex_unlock(&web->mu);
    req->status = MHD_HTTP_OK;
    req->reply = o;
}

/* Routes of the session itself, outside the route table; true when url
 * is one of them. */
static bool session_route(struct ej__console_request *req, struct MHD_Connection *c,
                          const char *csrf)
{
    const char *allow = NULL;
    if (strcmp(req->url, "/api/logout") == 0) {
        if (strcmp(req->method, "POST") != 0) {
            allow = "POST";
        } else {
            ej__console_session_end(req->web,
                                    MHD_lookup_connection_value(c, MHD_COOKIE_KIND, COOKIE));
            free(req->set_cookie);
            req->set_cookie = strdup(COOKIE "=; Path=/; HttpOnly; SameSite=Strict; Max-Age=0");
            req->status = MHD_HTTP_OK;
            req->reply = json_pack("{s:b}", "ok", 1);
        }
    } else if (strcmp(req->url, "/api/session") == 0 || strcmp(req->url, "/api/status") == 0) {
        if (strcmp(req->method, "GET") != 0 && strcmp(req->method, "HEAD") != 0)
            allow = "GET, HEAD";
        else if (strcmp(req->url, "/api/session") == 0)
            session_reply(req, csrf);
        else
            status(req);
    } else {
        return false;
    }
    if (allow != NULL) {
        req->allow = strdup(allow);
        ej__console_reply_error(req, MHD_HTTP_METHOD_NOT_ALLOWED, "use %s", allow);
    }
    return true;
}

/* The body is only looked at once the caller is known (login aside). */
static void handle_api(struct ej__console_request *req, struct MHD_Connection *c, struct upload *up)
{
    const char *origin = MHD_lookup_connection_value(c, MHD_HEADER_KIND, "Origin");
    bool login_url = strcmp(req->url, "/api/login") == 0;
    if ((req->write || login_url) && !ej__console_origin_allowed(req->web, origin))
        return ej__console_reply_error(req, MHD_HTTP_FORBIDDEN,
                                       "requests from another site (Origin) are refused");
    if (login_url) {
        if (strcmp(req->method, "POST") != 0) {
            req->allow = strdup("POST");
            ej__console_reply_error(req, MHD_HTTP_METHOD_NOT_ALLOWED, "use POST");
        } else if (req->web->settings.no_auth) {
            ej__console_reply_error(req, MHD_HTTP_BAD_REQUEST, "this console runs without login");
        } else if (parse_body(req, up)) {
            login(req, c);
        }
        return;
    }
    struct ej__console_session s;
    const char *csrf = authenticate(req, c, &s);
    if (csrf == NULL)
        return ej__console_reply_error(req, MHD_HTTP_UNAUTHORIZED, "log in first");
    if (req->write && !req->bearer) {
        const char *sent = MHD_lookup_connection_value(c, MHD_HEADER_KIND, CSRF_HEADER);
        if (!ej__console_token_equal(sent, csrf))
            return ej__console_reply_error(req, MHD_HTTP_FORBIDDEN,
                                           "missing or wrong " CSRF_HEADER " header");
    }
    if (!parse_body(req, up) || session_route(req, c, csrf))
        return;
    ej__console_api(req);
}

static enum MHD_Result refuse_host(struct MHD_Connection *c, ej_console_web *web)
{
    ej__mutex_lock(&web->mu);
    web->hosts_refused++;
    ej__mutex_unlock(&web->mu);
    struct reply_headers h = {0};
    /* 421: this server does not answer for that name (DNS rebinding). */
    return send_error(c, web, 421, "this console does not answer for that Host name", &h);
}

static enum MHD_Result serve_api(struct MHD_Connection *c, ej_console_web *web, const char *url,
                                 const char *method, struct upload *up)
{
    struct ej__console_request req = {.web = web, .method = method, .url = url, .conn = c};
    req.write = strcmp(method, "POST") == 0 || strcmp(method, "PUT") == 0 ||
                strcmp(method, "DELETE") == 0 || strcmp(method, "PATCH") == 0;
    char remote[64];
    remote_of(c, remote, sizeof remote);
    req.remote = remote;
    if (up->too_big || up->body.failed)
        ej__console_reply_error(&req, MHD_HTTP_CONTENT_TOO_LARGE, "request body over %d bytes",
                                EJ__CONSOLE_MAX_BODY);
    else
        handle_api(&req, c, up);
    bool unchanged = req.status == MHD_HTTP_NOT_MODIFIED && req.reply == NULL;
    if (req.reply == NULL && !unchanged)
        ej__console_reply_error(&req, MHD_HTTP_INTERNAL_SERVER_ERROR, "out of memory");
    if (req.write)
        ej__console_audit(web, &req);
    struct reply_headers h = {req.set_cookie, req.allow, req.retry_after, req.etag};
    enum MHD_Result ret;
    if (unchanged) {
        struct MHD_Response *r = MHD_create_response_from_buffer(0, "", MHD_RESPMEM_PERSISTENT);
        ret = r != NULL ? queue(c, web, MHD_HTTP_NOT_MODIFIED, r, true, &h) : MHD_NO;
    } else {
        ret = send_json(c, web, req.status, req.reply, &h);
    }
    json_decref(req.reply);
    json_decref(req.body);
    json_decref(req.audit_extra);
    free(req.set_cookie);
    free(req.allow);
    return ret;
}

enum MHD_Result ej__console_on_request(void *cls, struct MHD_Connection *c, const char *url,
                                       const char *method, const char *version,
                                       const char *upload_data, size_t *upload_size, void **con_cls)
{
    (void)version;
    ej_console_web *web = cls;
    if (*con_cls == NULL) {
        struct upload *up = calloc(1, sizeof(*up));
        if (up == NULL)
            return MHD_NO;
        ej__buf_init(&up->body);
        up->started_ms = ej__mono_ms();
        *con_cls = up;
        /* Before any body is read: a foreign Host gets nothing. */
        if (!ej__console_host_allowed(
                web, MHD_lookup_connection_value(c, MHD_HEADER_KIND, MHD_HTTP_HEADER_HOST))) {
            up->refused = true;
            return refuse_host(c, web);
        }
        return MHD_YES;
    }
    struct upload *up = *con_cls;
    if (up->refused) {
        *upload_size = 0;
        return MHD_YES;
    }
    if (*upload_size > 0) {
        /* A body trickled in slowly ties up a connection: cut it off. */
        if (ej__mono_ms() - up->started_ms > (int64_t)web->settings.request_timeout_seconds * 1000)
            return MHD_NO;
        if (up->body.len + *upload_size > EJ__CONSOLE_MAX_BODY)
            up->too_big = true;
        else
            ej__buf_append(&up->body, upload_data, *upload_size);
        *upload_size = 0;
        return MHD_YES;
    }
    if (strncmp(url, "/api/", 5) == 0)
        return serve_api(c, web, url, method, up);
    if (strcmp(method, "GET") != 0 && strcmp(method, "HEAD") != 0) {
        struct reply_headers h = {.allow = "GET, HEAD"};
        return send_error(c, web, MHD_HTTP_METHOD_NOT_ALLOWED, "use GET", &h);
    }
    return send_asset(c, web, url);
}

void ej__console_on_completed(void *cls, struct MHD_Connection *c, void **con_cls,
                              enum MHD_RequestTerminationCode toe)
{
    (void)cls;
    (void)c;
    (void)toe;
    struct upload *up = *con_cls;
    if (up != NULL) {
        ej__buf_fini(&up->body);
        free(up);
    }
    *con_cls = NULL;
}
