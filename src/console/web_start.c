/* Starting and stopping `ejob console`: registries, TLS files, the daemon. */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <microhttpd.h>
#include <netinet/tcp.h>
#include <sys/socket.h>
#include <unistd.h>

#include "common/check.h"
#include "common/util.h"
#include "console/internal.h"
#include "console/web.h"
#include "ejob/error.h"

static char *read_pem(const char *path, char *err, size_t errlen)
{
    FILE *f = fopen(path, "rb");
    if (f == NULL) {
        ej__console_err(-errno, err, errlen, "cannot read %s: %s", path, strerror(errno));
        return NULL;
    }
    ej_buf b;
    ej__buf_init(&b);
    char chunk[4096];
    size_t n;
    while ((n = fread(chunk, 1, sizeof chunk, f)) > 0 && b.len < 1024 * 1024)
        ej__buf_append(&b, chunk, n);
    fclose(f);
    if (b.failed || b.len == 0) {
        ej__console_err(EJ_EINVAL, err, errlen, "%s is empty or unreadable", path);
        ej__buf_fini(&b);
        return NULL;
    }
    return ej__buf_steal(&b);
}

static int copy_settings(struct ej_console_settings *dst, const struct ej_console_settings *src)
{
    ej_console_settings_init(dst);
    dst->session_ttl_seconds = src->session_ttl_seconds;
    dst->connect_timeout_ms = src->connect_timeout_ms;
    dst->idle_timeout_seconds = src->idle_timeout_seconds;
    dst->request_timeout_seconds = src->request_timeout_seconds;
    dst->no_auth = src->no_auth;
    dst->listen = strdup(src->listen != NULL ? src->listen : EJ__CONSOLE_DEFAULT_LISTEN);
    dst->tls_cert_file = src->tls_cert_file ? strdup(src->tls_cert_file) : NULL;
    dst->tls_key_file = src->tls_key_file ? strdup(src->tls_key_file) : NULL;
    dst->audit_log = src->audit_log ? strdup(src->audit_log) : NULL;
    dst->history_store = src->history_store ? strdup(src->history_store) : NULL;
    dst->history_password_file =
        src->history_password_file ? strdup(src->history_password_file) : NULL;
    int rc = dst->listen != NULL && (src->history_store == NULL) == (dst->history_store == NULL) &&
                     (src->history_password_file == NULL) == (dst->history_password_file == NULL)
                 ? 0
                 : EJ_ENOMEM;
    for (size_t i = 0; i < src->registry_count && rc == 0; i++)
        rc = ej_console_settings_add_registry(
            dst, src->registries[i].name, src->registries[i].servers, src->registries[i].namespace_,
            src->registries[i].digest);
    if (rc == 0 && src->account_count > 0) {
        dst->accounts = calloc(src->account_count, sizeof(*dst->accounts));
        if (dst->accounts == NULL)
            return EJ_ENOMEM;
        for (size_t i = 0; i < src->account_count && rc == 0; i++)
            rc = ej__console_account_copy(&dst->accounts[dst->account_count++], &src->accounts[i]);
    }
    if (rc == 0 && src->allowed_host_count > 0) {
        dst->allowed_hosts = calloc(src->allowed_host_count, sizeof(char *));
        if (dst->allowed_hosts == NULL)
            return EJ_ENOMEM;
        for (size_t i = 0; i < src->allowed_host_count && rc == 0; i++)
            if ((dst->allowed_hosts[dst->allowed_host_count++] = strdup(src->allowed_hosts[i])) ==
                NULL)
                rc = EJ_ENOMEM;
    }
    if (rc == 0 && src->tokens_file != NULL &&
        (dst->tokens_file = strdup(src->tokens_file)) == NULL)
        rc = EJ_ENOMEM;
    return rc;
}

static int connect_backends(ej_console_web *web, char *err, size_t errlen)
{
    const struct ej_console_settings *s = &web->settings;
    web->backends = calloc(s->registry_count, sizeof(*web->backends));
    if (web->backends == NULL)
        return EJ_ENOMEM;
    for (size_t i = 0; i < s->registry_count; i++) {
        struct ej__console_backend *b = &web->backends[web->backend_count++];
        b->def = &s->registries[i];
        ej__mutex_init(&b->list_mu);
        b->list_mu_ready = true;
        struct ej_registry_opts opts = {
            .servers = b->def->servers,
            .namespace_ = b->def->namespace_,
            .session_timeout_ms = 30000,
            .connection_timeout_ms = s->connect_timeout_ms,
            .base_sleep_ms = 500,
            .max_sleep_ms = 3000,
            .max_retries = 3,
            .digest = b->def->digest,
        };
        int rc = ej_registry_create(&b->reg, &opts);
        if (rc != 0)
            return ej__console_err(rc, err, errlen, "registry \"%s\" (%s/%s): %s", b->def->name,
                                   b->def->servers, b->def->namespace_,
                                   ej_registry_errmsg(NULL)[0] ? ej_registry_errmsg(NULL)
                                                               : ej_strerror(rc));
        struct ej_console_opts copts = {.cached = true, .cache_wait_ms = s->connect_timeout_ms};
        rc = ej_console_create(b->reg, &copts, &b->con);
        if (rc != 0)
            return ej__console_err(rc, err, errlen, "registry \"%s\": cannot load its tree: %s",
                                   b->def->name, ej_strerror(rc));
    }
    return 0;
}

/* The listening socket, with TCP_NODELAY (inherited by accepted sockets) so
 * that a reply larger than one segment is not held back by Nagle's algorithm
 * waiting for the client's delayed ACK (40 ms per request otherwise). */
static int listen_socket(const struct sockaddr_in *sa, char *err, size_t errlen,
                         const char *listen_text)
{
    int fd = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
    if (fd < 0)
        return ej__console_err(-errno, err, errlen, "socket: %s", strerror(errno));
    int on = 1;
    setsockopt(fd, SOL_SOCKET, SO_REUSEADDR, &on, sizeof on);
    setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &on, sizeof on);
    if (bind(fd, (const struct sockaddr *)sa, sizeof *sa) != 0 || listen(fd, 128) != 0) {
        int e = errno;
        close(fd);
        return ej__console_err(-e, err, errlen, "cannot listen on %s: %s", listen_text,
                               strerror(e));
    }
    return fd;
}

/* TLS 1.3 first, then 1.2, and only key exchanges with forward secrecy
 * (ECDHE, DHE): no static RSA, no TLS 1.0/1.1, no CBC-SHA1 suites. */
#define TLS_PRIORITIES                                                                             \
    "SECURE256:+SECURE128:-VERS-ALL:+VERS-TLS1.3:+VERS-TLS1.2:-RSA:-VERS-SSL3.0:-SHA1:-AES-128-"   \
    "CBC:"                                                                                         \
    "-AES-256-CBC:-CAMELLIA-128-CBC:-CAMELLIA-256-CBC:%SERVER_PRECEDENCE"

/* Slow clients: a connection that sends nothing for idleTimeoutSeconds is
 * closed, and one whose body is not in within requestTimeoutSeconds
 * (web_server.c); one address holds at most PER_ADDRESS of the
 * CONNECTIONS, and the requests are served by POOL threads (each polling
 * its own connections). */
#define CONNECTIONS 1024
#define PER_ADDRESS 32
#define POOL 4

static int start_daemon(ej_console_web *web, char *err, size_t errlen)
{
    struct sockaddr_in sa;
    ej__console_parse_listen(web->settings.listen, &sa);
    snprintf(web->listen_host, sizeof web->listen_host, "%s", web->settings.listen);
    web->listen_host[strcspn(web->listen_host, ":")] = '\0';

    unsigned flags = MHD_USE_INTERNAL_POLLING_THREAD | MHD_USE_EPOLL | MHD_USE_ERROR_LOG;
    web->tls = web->settings.tls_cert_file != NULL;
    if (web->tls) {
        if ((web->tls_cert = read_pem(web->settings.tls_cert_file, err, errlen)) == NULL ||
            (web->tls_key = read_pem(web->settings.tls_key_file, err, errlen)) == NULL)
            return EJ_EINVAL;
        flags |= MHD_USE_TLS;
    }
    int fd = listen_socket(&sa, err, errlen, web->settings.listen);
    if (fd < 0)
        return fd;
    struct MHD_OptionItem tls_opts[] = {
        {MHD_OPTION_HTTPS_MEM_CERT, 0, web->tls_cert},
        {MHD_OPTION_HTTPS_MEM_KEY, 0, web->tls_key},
        {MHD_OPTION_HTTPS_PRIORITIES, 0, (void *)TLS_PRIORITIES},
        {MHD_OPTION_END, 0, NULL},
    };
    web->mhd = MHD_start_daemon(
        flags, 0, NULL, NULL, ej__console_on_request, web, MHD_OPTION_LISTEN_SOCKET, fd,
        MHD_OPTION_THREAD_POOL_SIZE, (unsigned)POOL, MHD_OPTION_CONNECTION_TIMEOUT,
        (unsigned)web->settings.idle_timeout_seconds, MHD_OPTION_CONNECTION_LIMIT,
        (unsigned)CONNECTIONS, MHD_OPTION_PER_IP_CONNECTION_LIMIT, (unsigned)PER_ADDRESS,
        MHD_OPTION_NOTIFY_COMPLETED, ej__console_on_completed, web, MHD_OPTION_ARRAY,
        web->tls ? tls_opts : &tls_opts[3], MHD_OPTION_END);
    if (web->mhd == NULL) {
        close(fd);
        return ej__console_err(EJ_EINVAL, err, errlen, "cannot serve on %s%s", web->settings.listen,
                               web->tls ? " (bad TLS cert or key?)" : "");
    }
    const union MHD_DaemonInfo *info = MHD_get_daemon_info(web->mhd, MHD_DAEMON_INFO_BIND_PORT);
    web->port = info != NULL ? info->port : ntohs(sa.sin_port);
    return 0;
}

int ej_console_web_start(const struct ej_console_settings *settings, ej_console_web **out,
                         char *err, size_t errlen)
{
    if (settings == NULL || out == NULL)
        return EJ_EINVAL;
    *out = NULL;
    int rc = ej_console_settings_check(settings, err, errlen);
    if (rc != 0)
        return rc;
    ej_console_web *web = calloc(1, sizeof(*web));
    if (web == NULL)
        return EJ_ENOMEM;
    ej__mutex_init(&web->mu);
    ej__mutex_init(&web->history.mu);
    ej__mutex_init(&web->tokens_mu);
    rc = copy_settings(&web->settings, settings);
    if (rc == 0 && web->settings.no_auth)
        rc = ej__console_random_hex(web->no_auth_csrf, EJ__CONSOLE_TOKEN_HEX);
    if (rc == 0 && web->settings.audit_log != NULL &&
        (web->audit = fopen(web->settings.audit_log, "ae")) == NULL)
        rc = ej__console_err(-errno, err, errlen, "audit log %s: %s", web->settings.audit_log,
                             strerror(errno));
    if (rc == 0)
        rc = ej__console_history_init(web, err, errlen);
    if (rc == 0)
        rc = connect_backends(web, err, errlen);
    if (rc == 0)
        rc = start_daemon(web, err, errlen);
    if (rc != 0) {
        if (rc == EJ_ENOMEM && err != NULL && err[0] == '\0')
            ej__console_err(rc, err, errlen, "out of memory");
        ej_console_web_stop(web);
        return rc;
    }
    *out = web;
    return 0;
}

int ej_console_web_port(const ej_console_web *web)
{
    return web != NULL ? web->port : -1;
}

void ej_console_web_stop(ej_console_web *web)
{
    if (web == NULL)
        return;
    if (web->mhd != NULL)
        MHD_stop_daemon(web->mhd);
    for (size_t i = 0; i < web->backend_count; i++) {
        struct ej__console_backend *b = &web->backends[i];
        ej_console_jobs_free(b->list_jobs, b->list_count);
        if (b->list_mu_ready)
            ej__mutex_destroy(&b->list_mu);
        ej_console_destroy(b->con);
        ej_registry_destroy(b->reg);
    }
    free(web->backends);
    ej__console_history_fini(web);
    if (web->audit != NULL)
        fclose(web->audit);
    free(web->tls_cert);
    if (web->tls_key != NULL) {
        explicit_bzero(web->tls_key, strlen(web->tls_key));
        free(web->tls_key);
    }
    ej_console_settings_fini(&web->settings);
    ej__mutex_destroy(&web->mu);
    ej__mutex_destroy(&web->tokens_mu);
    ej__console_tokens_free(web->tokens);
    explicit_bzero(web->sessions, sizeof(web->sessions));
    free(web);
}
