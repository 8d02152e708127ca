/*
 * The HTTP endpoint: /metrics, /healthz, /readyz.
 *
 * Why its own loop. The endpoint must stay answerable while hostile or
 * broken clients hold connections open (a liveness probe that times out
 * restarts a healthy daemon). One thread polls the listening socket and
 * every connection, all non-blocking, so no client can stall another. Each
 * connection has a deadline: its whole request header within
 * EJ_METRICS_HEADER_TIMEOUT_MS of connecting (or of the previous answer on
 * a kept-alive connection), however slowly it trickles in; its answer
 * delivered within EJ_METRICS_WRITE_TIMEOUT_MS. Request bodies are never
 * read (a request announcing one is refused). When a new connection finds
 * its address at EJ_METRICS_PER_ADDRESS_LIMIT connections, or the server at
 * EJ_METRICS_CONNECTION_LIMIT, the oldest connection still waiting for its
 * request (of that address, else of the address holding the most; failing
 * that, the oldest one whose answer is not being read) is closed to make
 * room: a flood of idle connections only ever evicts itself, and a probe
 * that sends its request at once is answered before its turn to be evicted
 * comes.
 */
#include <errno.h>
#include <fcntl.h>
#include <poll.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <time.h>
#include <unistd.h>
#include <arpa/inet.h>
#include <netinet/in.h>
#include <sys/socket.h>

#include "ejob/error.h"
#include "metrics/internal.h"

#define REASON_LEN 256
#define HEADER_MAX 8192
#define LISTEN_BACKLOG 128

enum conn_state { READING, WRITING };

struct conn {
    int fd;
    struct sockaddr_in6 peer; /* either family; compared by address only */
    enum conn_state state;
    int64_t since_ms;    /* accepted, or the previous answer sent */
    int64_t deadline_ms; /* header complete (READING) or answer sent (WRITING) */
    bool close_after;    /* after this answer */
    size_t inlen;
    char in[HEADER_MAX];
    char *out;
    size_t outlen, outpos;
};

struct ej_metrics_server {
    struct ej_metrics_server_opts opts;
    int listen_fd;
    int wake[2]; /* stop: a byte on wake[1] */
    int port;
    pthread_t thread;
    struct conn *conns[EJ_METRICS_CONNECTION_LIMIT];
    size_t nconns;
};

static int64_t now_ms(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (int64_t)ts.tv_sec * 1000 + ts.tv_nsec / 1000000;
}

/* ------------------------------------------------------------ answers */

static const char *status_text(unsigned status)
{
    switch (status) {
    case 200:
        return "OK";
    case 400:
        return "Bad Request";
    case 404:
        return "Not Found";
    case 405:
        return "Method Not Allowed";
    case 413:
        return "Content Too Large";
    case 421:
        return "Misdirected Request";
    case 431:
        return "Request Header Fields Too Large";
    case 500:
        return "Internal Server Error";
    case 503:
        return "Service Unavailable";
    default:
        return "Error";
    }
}

/* Queues the answer on c (body consumed: freed here). head: no body sent. */
static void answer(struct conn *c, unsigned status, const char *type, char *body, bool head)
{
    size_t blen = body != NULL ? strlen(body) : 0;
    char *h = ej__asprintf("HTTP/1.1 %u %s\r\nContent-Type: %s\r\nContent-Length: %zu\r\n"
                           "Cache-Control: no-store\r\n%s%s\r\n",
                           status, status_text(status), type, blen,
                           status == 405 ? "Allow: GET, HEAD\r\n" : "",
                           c->close_after ? "Connection: close\r\n" : "");
    char *out = NULL;
    if (h != NULL)
        out = head || body == NULL ? h : ej__asprintf("%s%s", h, body);
    if (out != h)
        free(h);
    free(body);
    free(c->out);
    c->out = out;
    c->outlen = out != NULL ? strlen(out) : 0;
    c->outpos = 0;
    if (out == NULL)
        c->close_after = true; /* out of memory: nothing to say */
    c->state = WRITING;
    c->deadline_ms = now_ms() + EJ_METRICS_WRITE_TIMEOUT_MS;
}

/* A one-line text/plain answer: first, then rest, then a newline. */
static void text(struct conn *c, unsigned status, const char *first, const char *rest, bool head)
{
    answer(c, status, "text/plain; charset=utf-8", ej__asprintf("%s%s\n", first, rest), head);
}

static void check(struct conn *c, ej_metrics_check_fn fn, void *user, const char *ok,
                  const char *fail, bool head)
{
    char why[REASON_LEN] = "";
    bool good = fn == NULL || fn(why, sizeof why, user);
    /* One line, whatever the check wrote. */
    for (char *p = why; *p != '\0'; p++)
        if (*p == '\n' || *p == '\r')
            *p = ' ';
    if (good)
        text(c, 200, ok, "", head);
    else
        text(c, 503, fail, why[0] ? why : "no reason given", head);
}

/* ------------------------------------------------------------ requests */

/* The value of header name in the header block hdr (after the request
 * line), trimmed, or NULL; *len its length. */
static const char *header(const char *hdr, const char *end, const char *name, size_t *len)
{
    size_t nlen = strlen(name);
    for (const char *line = hdr; line < end;) {
        const char *eol = memchr(line, '\n', (size_t)(end - line));
        if (eol == NULL)
            eol = end;
        if ((size_t)(eol - line) > nlen && line[nlen] == ':' &&
            strncasecmp(line, name, nlen) == 0) {
            const char *v = line + nlen + 1;
            const char *ve = eol;
            while (v < ve && (*v == ' ' || *v == '\t'))
                v++;
            while (ve > v && (ve[-1] == '\r' || ve[-1] == ' ' || ve[-1] == '\t'))
                ve--;
            *len = (size_t)(ve - v);
            return v;
        }
        line = eol + 1;
    }
    return NULL;
}

bool ej__metrics_host_allowed(const char *host, size_t len)
{
    char h[INET6_ADDRSTRLEN + 8];
    if (len == 0 || len >= sizeof h)
        return false;
    memcpy(h, host, len);
    h[len] = '\0';
    unsigned char addr[sizeof(struct in6_addr)];
    if (h[0] == '[') {
        char *close = strchr(h, ']');
        if (close == NULL || (close[1] != '\0' && close[1] != ':'))
            return false;
        *close = '\0';
        return inet_pton(AF_INET6, h + 1, addr) == 1;
    }
    char *colon = strchr(h, ':');
    if (colon != NULL)
        *colon = '\0';
    /* A browser reaches an address only through a name, so a name is what
     * DNS rebinding forges: an address literal is always what was asked. */
    return strcasecmp(h, "localhost") == 0 || inet_pton(AF_INET, h, addr) == 1;
}

/* Answers the complete request header in c->in[0..hlen). */
static void serve(struct ej_metrics_server *srv, struct conn *c, size_t hlen)
{
    const char *req = c->in, *end = c->in + hlen;
    const char *eol = memchr(req, '\n', hlen);
    const char *sp1 = memchr(req, ' ', (size_t)(eol - req));
    const char *sp2 = sp1 != NULL ? memchr(sp1 + 1, ' ', (size_t)(eol - sp1 - 1)) : NULL;
    c->close_after = true;
    if (sp1 == NULL || sp2 == NULL || strncmp(sp2 + 1, "HTTP/1.", 7) != 0) {
        text(c, 400, "bad request line", "", false);
        return;
    }
    bool v11 = sp2[8] != '0';
    size_t vlen;
    const char *conn = header(eol + 1, end, "Connection", &vlen);
    c->close_after = !v11 || (conn != NULL && vlen == 5 && strncasecmp(conn, "close", 5) == 0);
    size_t mlen = (size_t)(sp1 - req);
    bool head = mlen == 4 && memcmp(req, "HEAD", 4) == 0;
    bool get = mlen == 3 && memcmp(req, "GET", 3) == 0;
    const char *host = header(eol + 1, end, "Host", &vlen);
    if (host == NULL && v11) {
        c->close_after = true;
        text(c, 400, "an HTTP/1.1 request needs a Host header", "", head);
        return;
    }
    if (host != NULL && !ej__metrics_host_allowed(host, vlen)) {
        c->close_after = true;
        text(c, 421, "unknown Host: name this endpoint by localhost or an address", "", head);
        return;
    }
    const char *cl = header(eol + 1, end, "Content-Length", &vlen);
    bool body = header(eol + 1, end, "Transfer-Encoding", &vlen) != NULL ||
                (cl != NULL && !(vlen == 1 && cl[0] == '0'));
    if (!get && !head) {
        char method[16];
        snprintf(method, sizeof method, "%.*s", (int)(mlen < 15 ? mlen : 15), req);
        c->close_after = c->close_after || body;
        text(c, 405, method, " not allowed: GET or HEAD", false);
        return;
    }
    if (body) {
        c->close_after = true; /* the body is not read: the connection cannot go on */
        text(c, 413, "request bodies are not accepted", "", head);
        return;
    }
    char path[256];
    size_t plen = strcspn(sp1 + 1, "? ");
    snprintf(path, sizeof path, "%.*s", (int)(plen < 255 ? plen : 255), sp1 + 1);
    if (strcmp(path, "/metrics") == 0) {
        char *out = NULL;
        if (ej_metrics_render(srv->opts.metrics, &out, NULL) != 0)
            text(c, 500, "out of memory", "", head);
        else
            answer(c, 200, EJ_METRICS_CONTENT_TYPE, out, head);
    } else if (strcmp(path, "/healthz") == 0) {
        check(c, srv->opts.healthz, srv->opts.user, "ok", "unhealthy: ", head);
    } else if (strcmp(path, "/readyz") == 0) {
        check(c, srv->opts.readyz, srv->opts.user, "ready", "not ready: ", head);
    } else {
        for (char *p = path; *p != '\0'; p++)
            if ((unsigned char)*p < 0x20 || *p == 0x7f)
                *p = '?';
        text(c, 404, path, ": not found (try /metrics, /healthz, /readyz)", head);
    }
}

/* The length of the header block in c->in (through its blank line), or 0
 * while incomplete. */
static size_t header_end(const struct conn *c)
{
    for (size_t i = 0; i + 1 < c->inlen; i++) {
        if (c->in[i] != '\n')
            continue;
        if (c->in[i + 1] == '\n')
            return i + 2;
        if (c->in[i + 1] == '\r' && i + 2 < c->inlen && c->in[i + 2] == '\n')
            return i + 3;
    }
    return 0;
}

/* --------------------------------------------------------- connections */

static void conn_close(struct ej_metrics_server *srv, size_t i)
{
    struct conn *c = srv->conns[i];
    close(c->fd);
    free(c->out);
    free(c);
    srv->conns[i] = srv->conns[--srv->nconns];
}

static bool same_address(const struct sockaddr_in6 *a, const struct sockaddr_in6 *b)
{
    if (a->sin6_family != b->sin6_family)
        return false;
    if (a->sin6_family == AF_INET)
        return ((const struct sockaddr_in *)a)->sin_addr.s_addr ==
               ((const struct sockaddr_in *)b)->sin_addr.s_addr;
    return memcmp(&a->sin6_addr, &b->sin6_addr, sizeof a->sin6_addr) == 0;
}

static size_t count_address(const struct ej_metrics_server *srv, const struct sockaddr_in6 *a)
{
    size_t n = 0;
    for (size_t i = 0; i < srv->nconns; i++)
        n += same_address(&srv->conns[i]->peer, a);
    return n;
}

/* The oldest connection of address a (NULL: of any address), only among
 * those waiting for their request when waiting is set; -1 when none. */
static long oldest(const struct ej_metrics_server *srv, const struct sockaddr_in6 *a, bool waiting)
{
    long best = -1;
    for (size_t i = 0; i < srv->nconns; i++) {
        const struct conn *c = srv->conns[i];
        if ((waiting && c->state != READING) || (a != NULL && !same_address(&c->peer, a)))
            continue;
        if (best < 0 || c->since_ms < srv->conns[best]->since_ms)
            best = (long)i;
    }
    return best;
}

/* The connection to close for a new one from peer, or -1 when none has to
 * be. One waiting for its request goes first: a probe's answer is sent
 * within a round, so only a client that does not read its answer is
 * closed as an answered one. */
static long victim_for(const struct ej_metrics_server *srv, const struct sockaddr_in6 *peer)
{
    if (count_address(srv, peer) >= EJ_METRICS_PER_ADDRESS_LIMIT) {
        long v = oldest(srv, peer, true);
        return v >= 0 ? v : oldest(srv, peer, false);
    }
    if (srv->nconns < EJ_METRICS_CONNECTION_LIMIT)
        return -1;
    /* The address holding the most connections gives one up. */
    long victim = -1;
    size_t most = 0;
    for (size_t i = 0; i < srv->nconns; i++) {
        size_t n = count_address(srv, &srv->conns[i]->peer);
        long v = n > most ? oldest(srv, &srv->conns[i]->peer, true) : -1;
        if (v >= 0) {
            most = n;
            victim = v;
        }
    }
    return victim >= 0 ? victim : oldest(srv, NULL, false);
}

static void accept_all(struct ej_metrics_server *srv, int64_t now)
{
    /* At most a table's worth per round, so answering is never starved. */
    for (int round = 0; round < EJ_METRICS_CONNECTION_LIMIT; round++) {
        struct sockaddr_in6 peer;
        socklen_t plen = sizeof peer;
        memset(&peer, 0, sizeof peer);
        int fd =
            accept4(srv->listen_fd, (struct sockaddr *)&peer, &plen, SOCK_NONBLOCK | SOCK_CLOEXEC);
        if (fd < 0)
            return; /* EAGAIN, or a connection that went away: poll again */
        long victim = victim_for(srv, &peer);
        if (victim >= 0)
            conn_close(srv, (size_t)victim);
        struct conn *c = srv->nconns < EJ_METRICS_CONNECTION_LIMIT ? malloc(sizeof *c) : NULL;
        if (c == NULL) {
            close(fd);
            continue;
        }
        c->fd = fd;
        c->peer = peer;
        c->state = READING;
        c->since_ms = now;
        c->deadline_ms = now + EJ_METRICS_HEADER_TIMEOUT_MS;
        c->close_after = false;
        c->inlen = 0;
        c->out = NULL;
        c->outlen = c->outpos = 0;
        srv->conns[srv->nconns++] = c;
    }
}

/* Reads what c has sent; answers once its header is complete. Returns
 * false when c is done with. */
static bool on_readable(struct ej_metrics_server *srv, struct conn *c)
{
    ssize_t n = read(c->fd, c->in + c->inlen, sizeof c->in - c->inlen);
    if (n == 0 || (n < 0 && errno != EAGAIN && errno != EINTR))
        return false;
    if (n > 0)
        c->inlen += (size_t)n;
    size_t hlen = header_end(c);
    if (hlen > 0) {
        serve(srv, c, hlen);
        /* A pipelined request waits for this answer to be sent. */
        memmove(c->in, c->in + hlen, c->inlen - hlen);
        c->inlen -= hlen;
    } else if (c->inlen == sizeof c->in) {
        c->close_after = true;
        text(c, 431, "request header too large", "", false);
        c->inlen = 0;
    }
    return true;
}

/* Sends what it can of c's answer. Returns false when c is done with. */
static bool on_writable(struct ej_metrics_server *srv, struct conn *c, int64_t now)
{
    ssize_t n = send(c->fd, c->out + c->outpos, c->outlen - c->outpos, MSG_NOSIGNAL);
    if (n < 0)
        return errno == EAGAIN || errno == EINTR;
    c->outpos += (size_t)n;
    if (c->outpos < c->outlen)
        return true;
    if (c->close_after || c->out == NULL)
        return false;
    free(c->out);
    c->out = NULL;
    c->state = READING;
    c->since_ms = now;
    c->deadline_ms = now + EJ_METRICS_HEADER_TIMEOUT_MS;
    size_t hlen = header_end(c);
    if (hlen > 0) {
        serve(srv, c, hlen);
        memmove(c->in, c->in + hlen, c->inlen - hlen);
        c->inlen -= hlen;
    }
    return true;
}

static void *server_main(void *arg)
{
    struct ej_metrics_server *srv = arg;
    struct pollfd fds[EJ_METRICS_CONNECTION_LIMIT + 2];
    for (;;) {
        int64_t now = now_ms();
        int timeout = -1;
        fds[0] = (struct pollfd){.fd = srv->wake[0], .events = POLLIN};
        fds[1] = (struct pollfd){.fd = srv->listen_fd, .events = POLLIN};
        for (size_t i = 0; i < srv->nconns; i++) {
            struct conn *c = srv->conns[i];
            fds[i + 2] =
                (struct pollfd){.fd = c->fd, .events = c->state == READING ? POLLIN : POLLOUT};
            int64_t left = c->deadline_ms > now ? c->deadline_ms - now : 0;
            if (timeout < 0 || left < timeout)
                timeout = (int)left;
        }
        size_t n = srv->nconns;
        if (poll(fds, n + 2, timeout) < 0 && errno != EINTR)
            break;
        if (fds[0].revents != 0)
            break;
        now = now_ms();
        /* Connections first, from the last so a close (which moves the last
         * one into its slot) never skips one; then new ones. */
        for (size_t i = n; i-- > 0;) {
            struct conn *c = srv->conns[i];
            bool keep = true;
            if (fds[i + 2].revents & (POLLERR | POLLNVAL))
                keep = false;
            else if (c->state == READING && (fds[i + 2].revents & (POLLIN | POLLHUP)))
                keep = on_readable(srv, c);
            else if (c->state == WRITING && (fds[i + 2].revents & (POLLOUT | POLLHUP)))
                keep = on_writable(srv, c, now);
            if (keep && srv->conns[i]->deadline_ms <= now)
                keep = false;
            if (!keep)
                conn_close(srv, i);
        }
        if (fds[1].revents & POLLIN)
            accept_all(srv, now);
    }
    return NULL;
}

/* -------------------------------------------------------------- start */

static int bind_socket(const struct ej_metrics_server_opts *opts, int *out, int *port, char *err,
                       size_t errlen)
{
    struct sockaddr_in6 addr; /* large enough for either family */
    size_t len = 0;
    int rc = ej_metrics_parse_listen(opts->listen, &addr, &len, err, errlen);
    if (rc != 0)
        return rc;
    const struct sockaddr *sa = (const struct sockaddr *)&addr;
    int fd = socket(sa->sa_family, SOCK_STREAM | SOCK_CLOEXEC | SOCK_NONBLOCK, 0);
    if (fd < 0) {
        rc = -errno;
        snprintf(err, errlen, "%s: socket: %s", opts->listen, strerror(errno));
        return rc;
    }
    int one = 1;
    setsockopt(fd, SOL_SOCKET, SO_REUSEADDR, &one, sizeof one);
    if (bind(fd, sa, (socklen_t)len) != 0 || listen(fd, LISTEN_BACKLOG) != 0) {
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
    srv->opts.listen = NULL; /* borrowed only for the call */
    int rc = bind_socket(opts, &srv->listen_fd, &srv->port, err, errlen);
    if (rc != 0)
        goto out_free;
    if (pipe2(srv->wake, O_CLOEXEC) != 0) {
        rc = -errno;
        snprintf(err, errlen, "%s: pipe: %s", opts->listen, strerror(errno));
        goto out_close;
    }
    rc = -pthread_create(&srv->thread, NULL, server_main, srv);
    if (rc != 0) {
        snprintf(err, errlen, "%s: cannot start the HTTP thread: %s", opts->listen, strerror(-rc));
        goto out_pipe;
    }
    pthread_setname_np(srv->thread, "ej-metrics-http");
    *out = srv;
    return 0;

out_pipe:
    close(srv->wake[0]);
    close(srv->wake[1]);
out_close:
    close(srv->listen_fd);
out_free:
    free(srv);
    return rc;
}

int ej_metrics_server_port(const ej_metrics_server *srv)
{
    return srv != NULL ? srv->port : -1;
}

void ej_metrics_server_stop(ej_metrics_server *srv)
{
    if (srv == NULL)
        return;
    char b = 1;
    while (write(srv->wake[1], &b, 1) < 0 && errno == EINTR)
        ;
    pthread_join(srv->thread, NULL);
    while (srv->nconns > 0)
        conn_close(srv, srv->nconns - 1);
    close(srv->listen_fd);
    close(srv->wake[0]);
    close(srv->wake[1]);
    free(srv);
}
