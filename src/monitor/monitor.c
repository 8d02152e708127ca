#include <errno.h>
#include <fcntl.h>
#include <netdb.h>
#include <poll.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>
#include <netinet/in.h>
#include <sys/socket.h>

#include "ejob/error.h"
#include "ejob/log.h"
#include "ejob/monitor.h"
#include "common/util.h"
#include "monitor/internal.h"

#define MAX_REPLY (64u * 1024 * 1024)
#define WRITE_TIMEOUT_MS 10000

struct ej_monitor {
    ej_registry *reg;
    ej_tree_cache *cache;
    char *job;
    int listen_fd;
    int wake[2]; /* written once by ej_monitor_stop */
    int port;
    pthread_t thread;
    atomic_ulong served;
};

static bool valid_job_name(const char *job)
{
    return job != NULL && job[0] != '\0' && strchr(job, '/') == NULL &&
           strlen(job) < EJ_REG_MAX_PATH_LEN;
}

/* ---------------------------------------------------------------- dump */

static void dump_line(ej_buf *b, const char *path, const char *value, size_t value_len,
                      ej_tree_cache *cache)
{
    ej__buf_puts(b, path);
    ej__buf_puts(b, " | ");
    ej__buf_append(b, value, value_len);
    if (cache == NULL) {
        ej__buf_puts(b, "\n");
        return;
    }
    char *cached = NULL;
    size_t cached_len = 0;
    bool in_cache = ej_tree_cache_get(cache, path, &cached, &cached_len, NULL) == 0;
    if (!in_cache || cached_len != value_len || memcmp(cached, value, value_len) != 0) {
        ej__buf_puts(b, " | ");
        if (in_cache) {
            ej__buf_puts(b, path);
            ej__buf_puts(b, " | ");
            ej__buf_append(b, cached, cached_len);
        } else {
            ej__buf_puts(b, " | ");
        }
    }
    free(cached);
    ej__buf_puts(b, "\n");
}

static int dump_walk(ej_registry *reg, ej_tree_cache *cache, const char *path, ej_buf *b)
{
    char **names = NULL;
    size_t count = 0;
    int rc = ej_registry_children(reg, path, EJ_REG_SORT_DESC, &names, &count);
    if (rc == EJ_ENONODE)
        return 0; /* vanished meanwhile: nothing below it */
    if (rc != 0)
        return rc;
    for (size_t i = 0; i < count && rc == 0; i++) {
        char *child = ej__asprintf("%s/%s", path, names[i]);
        if (child == NULL) {
            rc = EJ_ENOMEM;
            break;
        }
        char *data = NULL;
        size_t len = 0;
        rc = ej_registry_get(reg, child, &data, &len, NULL);
        if (rc == EJ_ENONODE)
            rc = 0;
        if (rc == 0) {
            dump_line(b, child, data != NULL ? data : "", data != NULL ? len : 0, cache);
            rc = dump_walk(reg, cache, child, b);
        }
        free(data);
        free(child);
    }
    ej_registry_free_names(names);
    if (rc == 0 && b->failed)
        rc = EJ_ENOMEM;
    return rc;
}

int ej_monitor_dump(ej_registry *reg, ej_tree_cache *cache, const char *job, char **out)
{
    if (out != NULL)
        *out = NULL;
    if (reg == NULL || out == NULL || !valid_job_name(job))
        return EJ_EINVAL;
    char *root = ej__asprintf("/%s", job);
    if (root == NULL)
        return EJ_ENOMEM;
    ej_buf b;
    ej__buf_init(&b);
    int rc = dump_walk(reg, cache, root, &b);
    free(root);
    if (rc == 0 && b.failed)
        rc = EJ_ENOMEM;
    if (rc == 0)
        rc = ej_monitor_mask_ips(b.data != NULL ? b.data : "", out);
    ej__buf_fini(&b);
    return rc;
}

/* -------------------------------------------------------------- server */

/* Wait for fd to be ready for `events`, or for the stop pipe, up to
 * timeout_ms. Returns 1 ready, 0 timeout or stop, -1 error. */
static int wait_fd(ej_monitor *m, int fd, short events, int timeout_ms)
{
    struct pollfd p[2] = {{.fd = fd, .events = events}, {.fd = m->wake[0], .events = POLLIN}};
    for (;;) {
        int r = poll(p, 2, timeout_ms);
        if (r < 0 && errno == EINTR)
            continue;
        if (r <= 0)
            return r < 0 ? -1 : 0;
        if (p[1].revents != 0)
            return 0;
        return 1;
    }
}

/* Read one line as Java's BufferedReader.readLine: ended by "\n", "\r",
 * "\r\n" or end of input. Returns its length, or -1 when nothing arrived
 * (end of input right away, timeout, error, or a line too long). */
static ssize_t read_line(ej_monitor *m, int fd, char *line, size_t cap)
{
    size_t len = 0;
    int64_t deadline = ej__mono_ms() + EJ_MONITOR_READ_TIMEOUT_MS;
    for (;;) {
        int left = (int)(deadline - ej__mono_ms());
        if (left <= 0 || wait_fd(m, fd, POLLIN, left) != 1)
            return -1;
        char chunk[256];
        ssize_t n = recv(fd, chunk, sizeof(chunk), 0);
        if (n < 0 && (errno == EINTR || errno == EAGAIN))
            continue;
        if (n < 0)
            return -1;
        if (n == 0)
            return len > 0 ? (ssize_t)len : -1;
        for (ssize_t i = 0; i < n; i++) {
            if (chunk[i] == '\n' || chunk[i] == '\r')
                return (ssize_t)len;
            if (len + 1 >= cap)
                return -1;
            line[len++] = chunk[i];
        }
    }
}

static void write_all(ej_monitor *m, int fd, const char *data, size_t len)
{
    while (len > 0) {
        if (wait_fd(m, fd, POLLOUT, WRITE_TIMEOUT_MS) != 1)
            return;
        ssize_t n = send(fd, data, len, MSG_NOSIGNAL);
        if (n < 0 && (errno == EINTR || errno == EAGAIN))
            continue;
        if (n <= 0)
            return;
        data += n;
        len -= (size_t)n;
    }
}

static void serve(ej_monitor *m, int fd)
{
    char line[EJ_MONITOR_MAX_LINE];
    ssize_t len = read_line(m, fd, line, sizeof(line));
    if (len < 0 || !ej__monitor_is_dump_command(line, (size_t)len))
        return;
    char *dump = NULL;
    int rc = ej_monitor_dump(m->reg, m->cache, m->job, &dump);
    if (rc != 0) {
        EJ_LOG(EJ_LOG_WARN, "monitor", rc, "job %s: dump failed: %s", m->job,
               ej_registry_errmsg(m->reg));
        return;
    }
    write_all(m, fd, dump, strlen(dump));
    free(dump);
}

static void *monitor_thread(void *arg)
{
    ej_monitor *m = arg;
    pthread_setname_np(pthread_self(), "ej-monitor");
    for (;;) {
        if (wait_fd(m, m->listen_fd, POLLIN, -1) != 1)
            break;
        int fd = accept4(m->listen_fd, NULL, NULL, SOCK_CLOEXEC | SOCK_NONBLOCK);
        if (fd < 0) {
            if (errno == EINTR || errno == EAGAIN || errno == ECONNABORTED)
                continue;
            if (errno == EMFILE || errno == ENFILE || errno == ENOBUFS || errno == ENOMEM) {
                /* Out of descriptors: back off instead of spinning. */
                EJ_LOG(EJ_LOG_WARN, "monitor", -errno, "job %s: accept failed", m->job);
                ej__sleep_ms(100);
                continue;
            }
            EJ_LOG(EJ_LOG_ERROR, "monitor", -errno, "job %s: accept failed, monitor stops", m->job);
            break;
        }
        serve(m, fd);
        /* Counted before the close the client waits for. */
        atomic_fetch_add(&m->served, 1);
        close(fd);
    }
    return NULL;
}

int ej_monitor_start(ej_registry *reg, ej_tree_cache *cache, const char *job, const char *bind_addr,
                     int port, ej_monitor **out)
{
    if (out != NULL)
        *out = NULL;
    if (reg == NULL || out == NULL || !valid_job_name(job) || port < 0 || port > 65535)
        return EJ_EINVAL;
    if (bind_addr == NULL || bind_addr[0] == '\0')
        bind_addr = "127.0.0.1";
    char portstr[8];
    snprintf(portstr, sizeof(portstr), "%d", port);
    struct addrinfo hints = {.ai_family = AF_UNSPEC,
                             .ai_socktype = SOCK_STREAM,
                             .ai_flags = AI_NUMERICHOST | AI_NUMERICSERV | AI_PASSIVE};
    struct addrinfo *ai = NULL;
    if (getaddrinfo(bind_addr, portstr, &hints, &ai) != 0 || ai == NULL)
        return EJ_EINVAL;

    int rc = 0;
    ej_monitor *m = calloc(1, sizeof(*m));
    if (m == NULL || (m->job = strdup(job)) == NULL) {
        rc = EJ_ENOMEM;
        goto out_free;
    }
    m->reg = reg;
    m->cache = cache;
    m->wake[0] = m->wake[1] = -1;
    m->listen_fd = socket(ai->ai_family, SOCK_STREAM | SOCK_CLOEXEC | SOCK_NONBLOCK, 0);
    if (m->listen_fd < 0) {
        rc = -errno;
        goto out_free;
    }
    int one = 1;
    setsockopt(m->listen_fd, SOL_SOCKET, SO_REUSEADDR, &one, sizeof(one));
    if (bind(m->listen_fd, ai->ai_addr, ai->ai_addrlen) != 0 || listen(m->listen_fd, 16) != 0) {
        rc = -errno;
        goto out_close;
    }
    struct sockaddr_storage ss;
    socklen_t sl = sizeof(ss);
    if (getsockname(m->listen_fd, (struct sockaddr *)&ss, &sl) != 0) {
        rc = -errno;
        goto out_close;
    }
    m->port = ss.ss_family == AF_INET6 ? ntohs(((struct sockaddr_in6 *)&ss)->sin6_port)
                                       : ntohs(((struct sockaddr_in *)&ss)->sin_port);
    if (pipe2(m->wake, O_CLOEXEC) != 0) {
        rc = -errno;
        goto out_close;
    }
    rc = -pthread_create(&m->thread, NULL, monitor_thread, m);
    if (rc != 0)
        goto out_pipe;
    freeaddrinfo(ai);
    EJ_LOG(EJ_LOG_INFO, "monitor", 0, "job %s: monitor port listening on %s:%d", job, bind_addr,
           m->port);
    *out = m;
    return 0;

out_pipe:
    close(m->wake[0]);
    close(m->wake[1]);
out_close:
    close(m->listen_fd);
out_free:
    if (m != NULL)
        free(m->job);
    free(m);
    freeaddrinfo(ai);
    return rc;
}

int ej_monitor_port(const ej_monitor *mon)
{
    return mon != NULL ? mon->port : -1;
}

unsigned long ej_monitor_served(const ej_monitor *mon)
{
    return mon != NULL ? atomic_load(&((ej_monitor *)mon)->served) : 0;
}

void ej_monitor_stop(ej_monitor *mon)
{
    if (mon == NULL)
        return;
    ssize_t n = write(mon->wake[1], "x", 1);
    (void)n;
    pthread_join(mon->thread, NULL);
    close(mon->listen_fd);
    close(mon->wake[0]);
    close(mon->wake[1]);
    free(mon->job);
    free(mon);
}

/* -------------------------------------------------------------- client */

int ej_monitor_query(const char *host, int port, const char *command, int timeout_ms, char **out)
{
    if (out != NULL)
        *out = NULL;
    if (host == NULL || command == NULL || out == NULL || port <= 0 || port > 65535 ||
        timeout_ms <= 0)
        return EJ_EINVAL;
    char portstr[8];
    snprintf(portstr, sizeof(portstr), "%d", port);
    struct addrinfo hints = {
        .ai_family = AF_UNSPEC, .ai_socktype = SOCK_STREAM, .ai_flags = AI_NUMERICSERV};
    struct addrinfo *ai = NULL;
    if (getaddrinfo(host, portstr, &hints, &ai) != 0 || ai == NULL)
        return EJ_ENOTFOUND;
    int64_t deadline = ej__mono_ms() + timeout_ms;
    int fd = socket(ai->ai_family, SOCK_STREAM | SOCK_CLOEXEC | SOCK_NONBLOCK, 0);
    int rc = 0;
    ej_buf b;
    ej__buf_init(&b);
    if (fd < 0) {
        rc = -errno;
        goto out;
    }
    if (connect(fd, ai->ai_addr, ai->ai_addrlen) != 0 && errno != EINPROGRESS) {
        rc = -errno;
        goto out;
    }
    struct pollfd p = {.fd = fd, .events = POLLOUT};
    int r = poll(&p, 1, timeout_ms);
    if (r <= 0) {
        rc = r == 0 ? EJ_ETIMEDOUT : -errno;
        goto out;
    }
    int soerr = 0;
    socklen_t sl = sizeof(soerr);
    getsockopt(fd, SOL_SOCKET, SO_ERROR, &soerr, &sl);
    if (soerr != 0) {
        rc = -soerr;
        goto out;
    }
    char *line = ej__asprintf("%s\n", command);
    if (line == NULL) {
        rc = EJ_ENOMEM;
        goto out;
    }
    size_t len = strlen(line), sent = 0;
    while (sent < len && rc == 0) {
        int left = (int)(deadline - ej__mono_ms());
        p.events = POLLOUT;
        if (left <= 0 || poll(&p, 1, left) <= 0) {
            rc = EJ_ETIMEDOUT;
            break;
        }
        ssize_t n = send(fd, line + sent, len - sent, MSG_NOSIGNAL);
        if (n < 0 && errno != EINTR && errno != EAGAIN)
            rc = -errno;
        else if (n > 0)
            sent += (size_t)n;
    }
    free(line);
    while (rc == 0) {
        int left = (int)(deadline - ej__mono_ms());
        p.events = POLLIN;
        if (left <= 0 || poll(&p, 1, left) <= 0) {
            rc = EJ_ETIMEDOUT;
            break;
        }
        char chunk[8192];
        ssize_t n = recv(fd, chunk, sizeof(chunk), 0);
        if (n < 0 && (errno == EINTR || errno == EAGAIN))
            continue;
        if (n < 0) {
            /* A reset after the reply was read counts as its end. */
            rc = errno == ECONNRESET ? 0 : -errno;
            break;
        }
        if (n == 0)
            break;
        if (b.len + (size_t)n > MAX_REPLY) {
            rc = EJ_ETOOBIG;
            break;
        }
        ej__buf_append(&b, chunk, (size_t)n);
        if (b.failed)
            rc = EJ_ENOMEM;
    }
    if (rc == 0) {
        *out = ej__buf_steal(&b);
        if (*out == NULL)
            rc = EJ_ENOMEM;
    }
out:
    if (fd >= 0)
        close(fd);
    ej__buf_fini(&b);
    freeaddrinfo(ai);
    return rc;
}
