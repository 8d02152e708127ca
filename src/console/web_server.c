/*
 * `ejob console`'s HTTP server (libmicrohttpd, TLS through GnuTLS): the
 * page's files, and the REST API behind a login (sessions in an HttpOnly,
 * SameSite=Strict cookie, a CSRF token header on every write, roles checked
 * on every route) with an audit line per write.
 */
#include <arpa/inet.h>
#include <errno.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include <microhttpd.h>

#include "common/util.h"
#include "console/internal.h"
#include "console/web.h"
#include "ejob/error.h"
#include "ejob/log.h"

#define COOKIE "ejob_session"
#define CSRF_HEADER "X-CSRF-Token"

/* Per connection: the body being received. */
struct upload {
    ej_buf body;
    bool too_big;
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

static enum MHD_Result send_json(struct MHD_Connection *c, unsigned status, json_t *v,
                                 const char *cookie)
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
    add_common_headers(r, true);
    if (cookie != NULL)
        MHD_add_response_header(r, "Set-Cookie", cookie);
    enum MHD_Result ret = MHD_queue_response(c, status, r);
    MHD_destroy_response(r);
    return ret;
}

static enum MHD_Result send_asset(struct MHD_Connection *c, const char *url)
{
    const struct ej__console_asset *a =
        ej__console_asset_find(strcmp(url, "/") == 0 ? "/index.html" : url);
    if (a == NULL) {
        json_t *e = json_pack("{s:s}", "error", "no such page");
        enum MHD_Result ret = send_json(c, MHD_HTTP_NOT_FOUND, e, NULL);
        json_decref(e);
        return ret;
    }
    struct MHD_Response *r =
        MHD_create_response_from_buffer(a->len, (void *)a->data, MHD_RESPMEM_PERSISTENT);
    if (r == NULL)
        return MHD_NO;
    MHD_add_response_header(r, "Content-Type", a->type);
    add_common_headers(r, false);
    enum MHD_Result ret = MHD_queue_response(c, MHD_HTTP_OK, r);
    MHD_destroy_response(r);
    return ret;
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

/* One line per write (and per login): who, what, result. */
static void audit(ej_console_web *web, const struct ej__console_request *req)
{
    char ts[32];
    time_t now = time(NULL);
    struct tm tm;
    gmtime_r(&now, &tm);
    strftime(ts, sizeof ts, "%Y-%m-%dT%H:%M:%SZ", &tm);
    const char *err = NULL;
    json_t *e = req->reply != NULL ? json_object_get(req->reply, "error") : NULL;
    if (json_is_string(e))
        err = json_string_value(e);
    pthread_mutex_lock(&web->mu);
    FILE *out = web->audit != NULL ? web->audit : stderr;
    fprintf(out,
            "%s ejob-console audit user=%s role=%s remote=%s action=\"%s %s\" result=%u%s%s%s%s\n",
            ts, req->user[0] ? req->user : "-",
            req->user[0] ? (req->role == EJ_CONSOLE_ROLE_ADMIN ? "admin" : "guest") : "-",
            req->remote, req->method, req->url, req->status, err ? " error=\"" : "", err ? err : "",
            err ? "\"" : "", req->audit_detail[0] ? req->audit_detail : "");
    fflush(out);
    pthread_mutex_unlock(&web->mu);
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

static void login(struct ej__console_request *req)
{
    ej_console_web *web = req->web;
    const char *user = json_string_value(json_object_get(req->body, "user"));
    const char *password = json_string_value(json_object_get(req->body, "password"));
    snprintf(req->user, sizeof req->user, "%s", user != NULL ? user : "");
    const struct ej_console_account *a = ej__console_account(web, user);
    /* Hash even for an unknown name, so timing does not tell names apart. */
    bool ok = ej_console_check_password(password != NULL ? password : "",
                                        a != NULL ? a->password_hash
                                                  : "$6$ejobnosuchuser$"
                                                    "0000000000000000000000000000000000000000000"
                                                    "0000000000000000000000000000000000000000000");
    if (a == NULL || !ok) {
        usleep(300 * 1000); /* slows password guessing */
        ej__console_reply_error(req, MHD_HTTP_UNAUTHORIZED, "wrong user name or password");
        return;
    }
    req->role = a->role;
    struct ej__console_session s;
    int rc = ej__console_session_new(web, a->name, a->role, &s);
    if (rc != 0) {
        ej__console_reply_error(req, MHD_HTTP_SERVICE_UNAVAILABLE, "cannot open a session: %s",
                                ej_strerror(rc));
        return;
    }
    req->set_cookie =
        ej__asprintf(COOKIE "=%s; Path=/; HttpOnly; SameSite=Strict; Max-Age=%d%s", s.token,
                     web->settings.session_ttl_seconds, web->tls ? "; Secure" : "");
    req->status = MHD_HTTP_OK;
    req->reply =
        json_pack("{s:s,s:s,s:s}", "user", s.user, "role",
                  s.role == EJ_CONSOLE_ROLE_ADMIN ? "admin" : "guest", "csrfToken", s.csrf);
}

/* Who is asking: fills req->user/role; returns the CSRF token expected of
 * their writes, or NULL when not logged in. */
static const char *authenticate(struct ej__console_request *req, struct MHD_Connection *c,
                                struct ej__console_session *s)
{
    ej_console_web *web = req->web;
    if (web->settings.no_auth) {
        snprintf(req->user, sizeof req->user, "anonymous");
        req->role = EJ_CONSOLE_ROLE_ADMIN;
        return web->no_auth_csrf;
    }
    const char *token = MHD_lookup_connection_value(c, MHD_COOKIE_KIND, COOKIE);
    if (!ej__console_session_find(web, token, s))
        return NULL;
    snprintf(req->user, sizeof req->user, "%s", s->user);
    req->role = s->role;
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

/* The body is only looked at once the caller is known (login aside). */
static void handle_api(struct ej__console_request *req, struct MHD_Connection *c, struct upload *up)
{
    if (strcmp(req->url, "/api/login") == 0) {
        if (!parse_body(req, up))
            return;
        if (strcmp(req->method, "POST") != 0)
            ej__console_reply_error(req, MHD_HTTP_METHOD_NOT_ALLOWED, "use POST");
        else if (req->web->settings.no_auth)
            ej__console_reply_error(req, MHD_HTTP_BAD_REQUEST, "this console runs without login");
        else
            login(req);
        return;
    }
    struct ej__console_session s;
    const char *csrf = authenticate(req, c, &s);
    if (csrf == NULL) {
        ej__console_reply_error(req, MHD_HTTP_UNAUTHORIZED, "log in first");
        return;
    }
    if (req->write) {
        const char *sent = MHD_lookup_connection_value(c, MHD_HEADER_KIND, CSRF_HEADER);
        if (!ej__console_token_equal(sent, csrf)) {
            ej__console_reply_error(req, MHD_HTTP_FORBIDDEN,
                                    "missing or wrong " CSRF_HEADER " header");
            return;
        }
    }
    if (!parse_body(req, up))
        return;
    if (strcmp(req->url, "/api/logout") == 0 && req->write) {
        ej__console_session_end(req->web, MHD_lookup_connection_value(c, MHD_COOKIE_KIND, COOKIE));
        req->set_cookie = strdup(COOKIE "=; Path=/; HttpOnly; SameSite=Strict; Max-Age=0");
        req->status = MHD_HTTP_OK;
        req->reply = json_pack("{s:b}", "ok", 1);
        return;
    }
    if (strcmp(req->url, "/api/session") == 0) {
        req->status = MHD_HTTP_OK;
        req->reply = json_pack("{s:s,s:s,s:s,s:b}", "user", req->user, "role",
                               req->role == EJ_CONSOLE_ROLE_ADMIN ? "admin" : "guest", "csrfToken",
                               csrf, "noAuth", req->web->settings.no_auth);
        return;
    }
    if (req->write && req->role != EJ_CONSOLE_ROLE_ADMIN) {
        ej__console_reply_error(req, MHD_HTTP_FORBIDDEN, "user \"%s\" may only read (role guest)",
                                req->user);
        return;
    }
    ej__console_api(req);
}

enum MHD_Result ej__console_on_request(void *cls, struct MHD_Connection *c, const char *url,
                                       const char *method, const char *version,
                                       const char *upload_data, size_t *upload_size, void **con_cls)
{
    (void)version;
    ej_console_web *web = cls;
    bool write =
        strcmp(method, "POST") == 0 || strcmp(method, "PUT") == 0 || strcmp(method, "DELETE") == 0;
    if (*con_cls == NULL) {
        struct upload *up = calloc(1, sizeof(*up));
        if (up == NULL)
            return MHD_NO;
        ej__buf_init(&up->body);
        *con_cls = up;
        return MHD_YES;
    }
    struct upload *up = *con_cls;
    if (*upload_size > 0) {
        if (up->body.len + *upload_size > EJ__CONSOLE_MAX_BODY)
            up->too_big = true;
        else
            ej__buf_append(&up->body, upload_data, *upload_size);
        *upload_size = 0;
        return MHD_YES;
    }
    if (strncmp(url, "/api/", 5) != 0) {
        if (strcmp(method, "GET") != 0 && strcmp(method, "HEAD") != 0) {
            json_t *e = json_pack("{s:s}", "error", "use GET");
            enum MHD_Result ret = send_json(c, MHD_HTTP_METHOD_NOT_ALLOWED, e, NULL);
            json_decref(e);
            return ret;
        }
        return send_asset(c, url);
    }
    struct ej__console_request req = {
        .web = web, .method = method, .url = url, .conn = c, .write = write};
    char remote[64];
    remote_of(c, remote, sizeof remote);
    req.remote = remote;
    if (up->too_big || up->body.failed)
        ej__console_reply_error(&req, MHD_HTTP_CONTENT_TOO_LARGE, "request body over %d bytes",
                                EJ__CONSOLE_MAX_BODY);
    else
        handle_api(&req, c, up);
    if (req.reply == NULL)
        ej__console_reply_error(&req, MHD_HTTP_INTERNAL_SERVER_ERROR, "out of memory");
    if (write)
        audit(web, &req);
    enum MHD_Result ret = send_json(c, req.status, req.reply, req.set_cookie);
    json_decref(req.reply);
    json_decref(req.body);
    free(req.set_cookie);
    return ret;
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
