/* The HTTP endpoint: /metrics, /healthz, /readyz over libmicrohttpd. */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>
#include <netinet/in.h>
#include <sys/socket.h>

#include <microhttpd.h>

#include "ejob/error.h"
#include "metrics/internal.h"

/* Slow or idle clients are dropped after this long; a scrape is small. */
#define CONNECTION_TIMEOUT_S 10
/* Concurrent connections at most: a few scrapers and probes. */
#define CONNECTION_LIMIT 32
#define REASON_LEN 256

struct ej_metrics_server {
    struct ej_metrics_server_opts opts;
    struct MHD_Daemon *mhd;
    int port;
};

static enum MHD_Result reply(struct MHD_Connection *conn, unsigned status, char *body,
                             const char *type, bool allow)
{
    struct MHD_Response *r =
        MHD_create_response_from_buffer(strlen(body), body, MHD_RESPMEM_MUST_FREE);
    if (r == NULL) {
        free(body);
        return MHD_NO;
    }
    MHD_add_response_header(r, MHD_HTTP_HEADER_CONTENT_TYPE, type);
    MHD_add_response_header(r, MHD_HTTP_HEADER_CACHE_CONTROL, "no-store");
    if (allow)
        MHD_add_response_header(r, MHD_HTTP_HEADER_ALLOW, "GET, HEAD");
    enum MHD_Result rc = MHD_queue_response(conn, status, r);
    MHD_destroy_response(r);
    return rc;
}

/* A one-line text/plain answer: first, then rest, then a newline. */
static enum MHD_Result text(struct MHD_Connection *conn, unsigned status, const char *first,
                            const char *rest)
{
    char *body = ej__asprintf("%s%s\n", first, rest);
    if (body == NULL)
        return MHD_NO;
    return reply(conn, status, body, "text/plain; charset=utf-8", status == 405);
}

static enum MHD_Result check(struct MHD_Connection *conn, ej_metrics_check_fn fn, void *user,
                             const char *ok, const char *fail)
{
    char why[REASON_LEN] = "";
    bool good = fn == NULL || fn(why, sizeof why, user);
    /* One line, whatever the check wrote. */
    for (char *p = why; *p != '\0'; p++)
        if (*p == '\n' || *p == '\r')
            *p = ' ';
    if (good)
        return text(conn, MHD_HTTP_OK, ok, "");
    return text(conn, MHD_HTTP_SERVICE_UNAVAILABLE, fail, why[0] ? why : "no reason given");
}

static enum MHD_Result handle(void *cls, struct MHD_Connection *conn, const char *url,
                              const char *method, const char *version, const char *upload_data,
                              size_t *upload_data_size, void **con_cls)
{
    (void)version;
    (void)upload_data;
    (void)upload_data_size;
    (void)con_cls;
    struct ej_metrics_server *srv = cls;
    if (strcmp(method, MHD_HTTP_METHOD_GET) != 0 && strcmp(method, MHD_HTTP_METHOD_HEAD) != 0)
        return text(conn, MHD_HTTP_METHOD_NOT_ALLOWED, method, " not allowed: GET or HEAD");
    if (strcmp(url, "/metrics") == 0) {
        char *body = NULL;
        if (ej_metrics_render(srv->opts.metrics, &body, NULL) != 0)
            return text(conn, MHD_HTTP_INTERNAL_SERVER_ERROR, "out of memory", "");
        return reply(conn, MHD_HTTP_OK, body, EJ_METRICS_CONTENT_TYPE, false);
    }
    if (strcmp(url, "/healthz") == 0)
        return check(conn, srv->opts.healthz, srv->opts.user, "ok", "unhealthy: ");
    if (strcmp(url, "/readyz") == 0)
        return check(conn, srv->opts.readyz, srv->opts.user, "ready", "not ready: ");
    return text(conn, MHD_HTTP_NOT_FOUND, url, ": not found (try /metrics, /healthz, /readyz)");
}

static int bind_socket(const struct ej_metrics_server_opts *opts, int *out, int *port, char *err,
                       size_t errlen)
{
    struct sockaddr_in6 addr; /* large enough for either family */
    size_t len = 0;
    int rc = ej_metrics_parse_listen(opts->listen, &addr, &len, err, errlen);
    if (rc != 0)
        return rc;
    const struct sockaddr *sa = (const struct sockaddr *)&addr;
    int fd = socket(sa->sa_family, SOCK_STREAM | SOCK_CLOEXEC, 0);
    if (fd < 0) {
        rc = -errno;
        snprintf(err, errlen, "%s: socket: %s", opts->listen, strerror(errno));
        return rc;
    }
    int one = 1;
    setsockopt(fd, SOL_SOCKET, SO_REUSEADDR, &one, sizeof one);
    if (bind(fd, sa, (socklen_t)len) != 0 || listen(fd, 64) != 0) {
        rc = -errno;
        snprintf(err, errlen, "%s: cannot listen: %s", opts->listen, strerror(errno));
        close(fd);
        return rc;
    }
    struct sockaddr_in6 bound;
    socklen_t blen = sizeof bound;
    getsockname(fd, (struct sockaddr *)&bound, &blen);
    *port = ntohs(bound.sin6_family == AF_INET6 ? bound.sin6_port
                                                : ((struct sockaddr_in *)&bound)->sin_port);
    *out = fd;
    return 0;
}

int ej_metrics_server_start(const struct ej_metrics_server_opts *opts, ej_metrics_server **out,
                            char *err, size_t errlen)
{
    char scratch[1];
    if (err == NULL || errlen == 0) {
        err = scratch;
        errlen = sizeof scratch;
    }
    err[0] = '\0';
    if (out == NULL || opts == NULL || opts->listen == NULL || opts->metrics == NULL) {
        snprintf(err, errlen, "metrics server: listen address and metrics are required");
        return EJ_EINVAL;
    }
    *out = NULL;
    struct ej_metrics_server *srv = calloc(1, sizeof *srv);
    if (srv == NULL)
        return EJ_ENOMEM;
    srv->opts = *opts;
    int fd = -1;
    int rc = bind_socket(opts, &fd, &srv->port, err, errlen);
    if (rc != 0) {
        free(srv);
        return rc;
    }
    srv->opts.listen = NULL; /* borrowed only for the call */
    srv->mhd = MHD_start_daemon(MHD_USE_AUTO_INTERNAL_THREAD, 0, NULL, NULL, handle, srv,
                                MHD_OPTION_LISTEN_SOCKET, fd, MHD_OPTION_CONNECTION_TIMEOUT,
                                (unsigned)CONNECTION_TIMEOUT_S, MHD_OPTION_CONNECTION_LIMIT,
                                (unsigned)CONNECTION_LIMIT, MHD_OPTION_END);
    if (srv->mhd == NULL) {
        snprintf(err, errlen, "%s: cannot start the HTTP server", opts->listen);
        close(fd);
        free(srv);
        return EJ_ENOMEM;
    }
    *out = srv;
    return 0;
}

int ej_metrics_server_port(const ej_metrics_server *srv)
{
    return srv != NULL ? srv->port : -1;
}

void ej_metrics_server_stop(ej_metrics_server *srv)
{
    if (srv == NULL)
        return;
    MHD_stop_daemon(srv->mhd); /* closes the listening socket too */
    free(srv);
}
