/*
 * One supervising process for every script item of this process.
 *
 * supervise.c's first design forks a supervisor per item from the daemon.
 * A daemon of 1,000 jobs is a large, threaded process: each fork copies its
 * page tables and makes every page it writes afterwards fault again, and
 * 1,000 items a second spent most of the daemon's time there. Here one
 * process is forked once (the "zygote"); the daemon sends it each item
 * (program, argv, envp, the three standard descriptors) over a socket, and
 * it starts the item with vfork()+execve() (no copy of anything) as the
 * leader of a new process group. The zygote is then what the per-item
 * supervisor was:
 *
 *   - it knows the group before the item runs (it made it);
 *   - each item has its own socket to the daemon (close-on-exec, held only
 *     by the daemon): EOF on it before the item ended means the daemon
 *     died (kill -9, crash) or gave the item up; the group gets SIGTERM at
 *     once and SIGKILL after the item's grace;
 *   - while it has items it looks at the daemon's state every
 *     STOP_POLL_MS: a daemon stopped (SIGSTOP, a debugger) for
 *     STOPPED_LIMIT_MS has every group ended the same way;
 *   - it reports the item's wait status on the item's socket when the item
 *     exits, and reaps it only once the daemon closed that socket: until
 *     then the zombie keeps the group id from being reused, so the daemon
 *     may still signal the group (stragglers after a timeout).
 *
 * The zygote is forked from a threaded process: it calls only
 * async-signal-safe functions (system calls), keeps its state in static
 * tables, and never returns into ejob's code.
 */
#include <errno.h>
#include <fcntl.h>
#include <poll.h>
#include <pthread.h>
#include <signal.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/syscall.h>
#include <sys/types.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "common/check.h"
#include "exec/internal.h"

#define CTL_FD 3
#define STAT_FD 4
#define STOP_POLL_MS 100
#define STOPPED_LIMIT_MS 1000 /* as supervise.c, for the same reason */
#define ZMAX 4096             /* items at once; more: the next one is refused */
#define PAYLOAD_MAX (1 << 20)
#define STRS_MAX 16384

/* What the zygote sends back on an item's socket: 'P' pid, 'E' errno (not
 * started), 'X' wait status. */
struct zmsg {
    int32_t kind;
    int32_t val;
};

/* The request's fixed part, then path, argv and envp as NUL-terminated
 * strings. */
struct zhdr {
    uint32_t len; /* bytes of strings that follow */
    uint32_t argc, envc;
    int64_t grace_ms;
};

/* ------------------------------------------------------------- zygote */

struct zitem {
    pid_t pid;       /* 0: free slot */
    int sock;        /* -1 once the daemon closed it */
    int pidfd;       /* -1 once exited */
    bool exited;     /* zombie, status sent */
    int64_t kill_at; /* 0: not being ended; else SIGKILL time */
    int64_t grace_ms;
};

static struct zitem zt[ZMAX];
static size_t znum, zhi; /* slots in use; slots at or above zhi are free */
static char zbuf[PAYLOAD_MAX];
static char *zstrs[STRS_MAX];
static struct pollfd zpfd[1 + 2 * ZMAX];
static int zwho[1 + 2 * ZMAX]; /* slot of each pollfd; -1 ctl */

static int64_t z_mono_ms(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (int64_t)ts.tv_sec * 1000 + ts.tv_nsec / 1000000;
}

static bool read_full(int fd, void *buf, size_t n)
{
    char *p = buf;
    while (n > 0) {
        ssize_t r = read(fd, p, n);
        if (r < 0 && errno == EINTR)
            continue;
        if (r <= 0)
            return false;
        p += r;
        n -= (size_t)r;
    }
    return true;
}

static void reply(int sock, int32_t kind, int32_t val)
{
    struct zmsg m = {kind, val};
    while (send(sock, &m, sizeof m, MSG_NOSIGNAL) < 0 && errno == EINTR) {
    }
}

/* The child's write end of the exec-error pipe, at 3 or above so that the
 * dup2s onto 0-2 cannot clobber it. */
static int high_cloexec(int fd)
{
    if (fd >= 3)
        return fd;
    int h = fcntl(fd, F_DUPFD_CLOEXEC, 3);
    close(fd);
    return h;
}

/* Start the item of one request in a new group; the child's descriptors
 * are in, out, err. Returns its pid, or -errno. A failed exec is told on
 * a close-on-exec pipe (EOF: the exec happened), which works whether
 * vfork() shares our memory or, as under ThreadSanitizer, is a fork. */
static pid_t z_start(const char *path, char **argv, char **envp, int in, int out, int err)
{
    int ep[2];
    if (pipe2(ep, O_CLOEXEC) != 0)
        return -errno;
    ep[1] = high_cloexec(ep[1]);
    if (ep[1] < 0) {
        int e = errno;
        close(ep[0]);
        return -e;
    }
    pid_t pid = vfork();
    if (pid == 0) {
        sigset_t none;
        sigemptyset(&none);
        setpgid(0, 0);
        int e = 0;
        if (dup2(in, 0) < 0 || dup2(out, 1) < 0 || dup2(err, 2) < 0) {
            e = errno;
        } else {
            if (ep[1] > 3)
                syscall(SYS_close_range, 3U, (unsigned)ep[1] - 1, 0U);
            syscall(SYS_close_range, (unsigned)ep[1] + 1, ~0U, 0U);
            sigprocmask(SIG_SETMASK, &none, NULL);
            execve(path, argv, envp);
            e = errno;
        }
        while (write(ep[1], &e, sizeof e) < 0 && errno == EINTR) {
        }
        _exit(127);
    }
    int fork_errno = errno;
    close(ep[1]);
    if (pid < 0) {
        close(ep[0]);
        return -fork_errno;
    }
    int e = 0;
    ssize_t r;
    while ((r = read(ep[0], &e, sizeof e)) < 0 && errno == EINTR) {
    }
    close(ep[0]);
    if (r == (ssize_t)sizeof e && e != 0) {
        while (waitpid(pid, NULL, 0) < 0 && errno == EINTR) {
        }
        return -e;
    }
    return pid;
}

/* One request from the control socket: a message carrying the item's
 * socket and its three descriptors. Returns false on EOF (daemon gone). */
static bool z_request(void)
{
    char c;
    int fds[4] = {-1, -1, -1, -1};
    union {
        char buf[CMSG_SPACE(sizeof fds)];
        struct cmsghdr align;
    } u;
    struct iovec iov = {.iov_base = &c, .iov_len = 1};
    struct msghdr mh = {
        .msg_iov = &iov, .msg_iovlen = 1, .msg_control = u.buf, .msg_controllen = sizeof u.buf};
    ssize_t r = recvmsg(CTL_FD, &mh, MSG_CMSG_CLOEXEC);
    if (r == 0)
        return false;
    if (r < 0)
        return errno == EINTR || errno == EAGAIN;
    struct cmsghdr *cm = CMSG_FIRSTHDR(&mh);
    if (cm == NULL || cm->cmsg_type != SCM_RIGHTS || cm->cmsg_len != CMSG_LEN(sizeof fds))
        return true;
    memcpy(fds, CMSG_DATA(cm), sizeof fds);
    int sock = fds[0];
    struct zhdr h = {0};
    int32_t err = 0;
    if (!read_full(sock, &h, sizeof h) || h.len > PAYLOAD_MAX || h.argc < 1 ||
        (size_t)h.argc + h.envc + 3 > STRS_MAX || !read_full(sock, zbuf, h.len))
        err = EPROTO;
    /* Split the strings: path, argv[argc], envp[envc]. */
    size_t want = 1 + (size_t)h.argc + h.envc, k = 0, off = 0;
    while (err == 0 && k < want && off < h.len) {
        zstrs[k++] = zbuf + off;
        while (off < h.len && zbuf[off] != '\0')
            off++;
        off++;
    }
    if (err == 0 && (k != want || off != h.len))
        err = EPROTO;
    size_t slot = 0;
    while (err == 0 && slot < ZMAX && zt[slot].pid != 0)
        slot++;
    if (err == 0 && slot < ZMAX && slot >= zhi)
        zhi = slot + 1;
    if (err == 0 && slot == ZMAX)
        err = EAGAIN;
    if (err == 0) {
        /* argv and envp as arrays: zstrs = path, argv..., NULL, envp..., NULL */
        memmove(&zstrs[1 + h.argc + 1], &zstrs[1 + h.argc], h.envc * sizeof zstrs[0]);
        zstrs[1 + h.argc] = NULL;
        zstrs[1 + h.argc + 1 + h.envc] = NULL;
        pid_t pid = z_start(zstrs[0], &zstrs[1], &zstrs[1 + h.argc + 1], fds[1], fds[2], fds[3]);
        if (pid < 0) {
            err = -pid;
        } else {
            int pfd = (int)syscall(SYS_pidfd_open, pid, 0);
            zt[slot] =
                (struct zitem){.pid = pid, .sock = sock, .pidfd = pfd, .grace_ms = h.grace_ms};
            znum++;
            reply(sock, 'P', pid);
            if (pfd < 0) { /* cannot watch it: end it now, as if the daemon died */
                zt[slot].kill_at = z_mono_ms() + zt[slot].grace_ms;
                kill(-pid, SIGTERM);
            }
            sock = -1;
        }
    }
    if (err != 0 && sock >= 0)
        reply(sock, 'E', err);
    if (sock >= 0)
        close(sock);
    for (int i = 1; i < 4; i++)
        if (fds[i] >= 0)
            close(fds[i]);
    return true;
}

static void z_end_group(struct zitem *it, int64_t now)
{
    if (it->kill_at != 0)
        return;
    kill(-it->pid, SIGTERM);
    it->kill_at = now + (it->grace_ms > 0 ? it->grace_ms : 0);
}

/* The slot is done with: the daemon closed its socket, the item exited,
 * and its group had its SIGKILL if it was being ended. */
static void z_maybe_free(struct zitem *it, int64_t now)
{
    if (it->sock >= 0 || !it->exited)
        return;
    if (it->kill_at != 0) {
        if (now < it->kill_at)
            return;
        kill(-it->pid, SIGKILL); /* stragglers; the zombie still holds the id */
    }
    while (waitpid(it->pid, NULL, 0) < 0 && errno == EINTR) {
    }
    it->pid = 0;
    znum--;
    while (zhi > 0 && zt[zhi - 1].pid == 0)
        zhi--;
}

static void z_on_exit(struct zitem *it)
{
    siginfo_t si;
    memset(&si, 0, sizeof si);
    if (waitid(P_PID, (id_t)it->pid, &si, WEXITED | WNOHANG | WNOWAIT) != 0 || si.si_pid == 0)
        return;
    int status = si.si_code == CLD_EXITED ? (si.si_status & 0xff) << 8 : si.si_status & 0x7f;
    if (it->sock >= 0)
        reply(it->sock, 'X', status);
    it->exited = true;
    close(it->pidfd);
    it->pidfd = -1;
}

static int z_timeout(int64_t now, bool have_stat)
{
    int64_t t = -1;
    for (size_t i = 0; i < zhi; i++)
        if (zt[i].pid != 0 && zt[i].kill_at != 0) {
            int64_t left = zt[i].kill_at > now ? zt[i].kill_at - now : 0;
            if (t < 0 || left < t)
                t = left;
        }
    if (znum > 0 && have_stat && (t < 0 || t > STOP_POLL_MS))
        t = STOP_POLL_MS;
    return (int)t;
}

static _Noreturn void zygote_main(int ctl, int statfd)
{
    sigset_t all;
    sigfillset(&all);
    sigprocmask(SIG_SETMASK, &all, NULL);
    /* Items start with every signal at its default (an ignored SIGPIPE of
     * the daemon would survive their execve). */
    struct sigaction dfl;
    memset(&dfl, 0, sizeof dfl);
    dfl.sa_handler = SIG_DFL;
    for (int sig = 1; sig < NSIG; sig++)
        if (sig != SIGKILL && sig != SIGSTOP)
            sigaction(sig, &dfl, NULL);
    setpgid(0, 0);
    int devnull = open("/dev/null", O_RDWR);
    if (devnull >= 0) {
        dup2(devnull, 0);
        dup2(devnull, 1);
        dup2(devnull, 2);
    }
    if (ctl != CTL_FD)
        dup2(ctl, CTL_FD);
    if (statfd >= 0)
        dup2(statfd, STAT_FD);
    syscall(SYS_close_range, (unsigned)STAT_FD + 1, ~0U, 0U);
    bool have_ctl = true, have_stat = statfd >= 0;
    int64_t stopped_since = -1;
    for (;;) {
        nfds_t n = 0;
        if (have_ctl) {
            zpfd[n] = (struct pollfd){.fd = CTL_FD, .events = POLLIN};
            zwho[n++] = -1;
        }
        for (size_t i = 0; i < zhi; i++) {
            if (zt[i].pid == 0)
                continue;
            if (zt[i].sock >= 0) {
                zpfd[n] = (struct pollfd){.fd = zt[i].sock, .events = POLLIN};
                zwho[n++] = (int)i;
            }
            if (zt[i].pidfd >= 0) {
                zpfd[n] = (struct pollfd){.fd = zt[i].pidfd, .events = POLLIN};
                zwho[n++] = (int)i;
            }
        }
        if (!have_ctl && znum == 0)
            _exit(0);
        int64_t now = z_mono_ms();
        int r = poll(zpfd, n, z_timeout(now, have_stat));
        now = z_mono_ms();
        for (nfds_t p = 0; r > 0 && p < n; p++) {
            if (zpfd[p].revents == 0)
                continue;
            if (zwho[p] < 0) {
                have_ctl = z_request();
                continue;
            }
            struct zitem *it = &zt[zwho[p]];
            if (zpfd[p].fd == it->pidfd) {
                z_on_exit(it);
            } else if (zpfd[p].fd == it->sock) {
                char b[16];
                ssize_t k = read(it->sock, b, sizeof b);
                if (k == 0 || (k < 0 && errno != EINTR && errno != EAGAIN)) {
                    close(it->sock);
                    it->sock = -1;
                    if (!it->exited)
                        z_end_group(it, now); /* the daemon died or gave it up */
                }
            }
        }
        /* A daemon gone or frozen cannot stop its items: end them. */
        bool frozen = false;
        if (have_stat && znum > 0) {
            if (!ej__process_stopped(STAT_FD))
                stopped_since = -1;
            else if (stopped_since < 0)
                stopped_since = now;
            else if (now - stopped_since >= STOPPED_LIMIT_MS)
                frozen = true;
        }
        for (size_t i = 0; i < zhi; i++) {
            if (zt[i].pid == 0)
                continue;
            if ((!have_ctl || frozen) && !zt[i].exited)
                z_end_group(&zt[i], now);
            if (zt[i].kill_at != 0 && now >= zt[i].kill_at && !zt[i].exited)
                kill(-zt[i].pid, SIGKILL);
            z_maybe_free(&zt[i], now);
        }
    }
}

/* ------------------------------------------------------------- daemon */

static ej__mutex zmu = EJ__MUTEX_INITIALIZER;
static int zctl = -1;     /* the daemon's end of the control socket */
static pid_t zowner = -1; /* the process that started it */
static bool zdisabled;    /* EJOB_ZYGOTE=0, or it could not be started */

/* Under zmu. The zygote is forked twice over, so that it is nobody's
 * child here (a process that waits for all its children is not kept
 * waiting by it; an orphan goes to init or the nearest subreaper). */
static int zygote_start_locked(void)
{
    EJ_ASSERT_HELD(&zmu);
    int sv[2];
    if (socketpair(AF_UNIX, SOCK_SEQPACKET | SOCK_CLOEXEC, 0, sv) != 0)
        return errno;
    int statfd = open("/proc/self/stat", O_RDONLY | O_CLOEXEC);
    pid_t mid = fork();
    if (mid == 0) {
        pid_t z = fork();
        if (z == 0)
            zygote_main(sv[1], statfd);
        _exit(z < 0 ? 1 : 0);
    }
    int e = errno;
    close(sv[1]);
    if (statfd >= 0)
        close(statfd);
    int status = 1;
    if (mid > 0)
        while (waitpid(mid, &status, 0) < 0 && errno == EINTR) {
        }
    if (mid < 0 || !WIFEXITED(status) || WEXITSTATUS(status) != 0) {
        close(sv[0]);
        return mid < 0 ? e : EAGAIN;
    }
    zctl = sv[0];
    zowner = getpid();
    return 0;
}

/* The zygote refused a request (gone, or broken): let it go. Closing the
 * socket ends it once its items are over. Under zmu. */
static void zygote_lost_locked(int fd)
{
    EJ_ASSERT_HELD(&zmu);
    if (zctl != fd)
        return; /* another thread already did */
    close(zctl);
    zctl = -1;
}

/* The control socket, the zygote started if needed; -1 when there is none
 * (then the caller supervises the item itself). */
static int zygote_fd(void)
{
    ej__mutex_lock(&zmu);
    if (zctl >= 0 && zowner != getpid()) {
        /* A child forked from the zygote's owner: that zygote watches the
         * parent, not this process. Start one of its own. */
        close(zctl);
        zctl = -1;
    }
    if (zctl < 0 && !zdisabled) {
        const char *env = getenv("EJOB_ZYGOTE");
        if ((env != NULL && strcmp(env, "0") == 0) || zygote_start_locked() != 0)
            zdisabled = true;
    }
    int fd = zctl;
    ej__mutex_unlock(&zmu);
    return fd;
}

static int send_fds(int ctl, const int fds[4])
{
    char c = 'S';
    union {
        char buf[CMSG_SPACE(4 * sizeof(int))];
        struct cmsghdr align;
    } u;
    memset(&u, 0, sizeof u);
    struct iovec iov = {.iov_base = &c, .iov_len = 1};
    struct msghdr mh = {
        .msg_iov = &iov, .msg_iovlen = 1, .msg_control = u.buf, .msg_controllen = sizeof u.buf};
    struct cmsghdr *cm = CMSG_FIRSTHDR(&mh);
    cm->cmsg_level = SOL_SOCKET;
    cm->cmsg_type = SCM_RIGHTS;
    cm->cmsg_len = CMSG_LEN(4 * sizeof(int));
    memcpy(CMSG_DATA(cm), fds, 4 * sizeof(int));
    while (sendmsg(ctl, &mh, MSG_NOSIGNAL) < 0) {
        if (errno != EINTR)
            return errno;
    }
    return 0;
}

static int write_full(int fd, const void *buf, size_t n)
{
    const char *p = buf;
    while (n > 0) {
        ssize_t w = send(fd, p, n, MSG_NOSIGNAL);
        if (w < 0 && errno == EINTR)
            continue;
        if (w < 0)
            return errno;
        p += w;
        n -= (size_t)w;
    }
    return 0;
}

/* path, argv and envp packed after a header. Caller frees. */
static char *pack(const char *path, char *const argv[], char *const envp[], int64_t grace_ms,
                  size_t *len)
{
    struct zhdr h = {.grace_ms = grace_ms};
    size_t total = strlen(path) + 1;
    for (; argv[h.argc]; h.argc++)
        total += strlen(argv[h.argc]) + 1;
    for (; envp && envp[h.envc]; h.envc++)
        total += strlen(envp[h.envc]) + 1;
    if (total > PAYLOAD_MAX || (size_t)h.argc + h.envc + 3 > STRS_MAX)
        return NULL;
    h.len = (uint32_t)total;
    char *buf = malloc(sizeof h + total);
    if (buf == NULL)
        return NULL;
    memcpy(buf, &h, sizeof h);
    char *p = buf + sizeof h;
    size_t l = strlen(path) + 1;
    memcpy(p, path, l);
    p += l;
    for (uint32_t i = 0; i < h.argc; i++, p += l)
        memcpy(p, argv[i], l = strlen(argv[i]) + 1);
    for (uint32_t i = 0; i < h.envc; i++, p += l)
        memcpy(p, envp[i], l = strlen(envp[i]) + 1);
    *len = sizeof h + total;
    return buf;
}

int ej__zygote_spawn(int *sock_out, pid_t *pid, const char *path, char *const argv[],
                     char *const envp[], const int stdfds[3], int64_t grace_ms)
{
    *sock_out = -1;
    *pid = -1;
    size_t len = 0;
    char *msg = pack(path, argv, envp, grace_ms, &len);
    if (msg == NULL)
        return E2BIG;
    int rc = ENOSYS;
    for (int attempt = 0; attempt < 2 && rc == ENOSYS; attempt++) {
        int ctl = zygote_fd();
        if (ctl < 0)
            break;
        int sv[2];
        if (socketpair(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0, sv) != 0) {
            rc = errno;
            break;
        }
        int fds[4] = {sv[1], stdfds[0], stdfds[1], stdfds[2]};
        int e = send_fds(ctl, fds);
        close(sv[1]);
        if (e != 0) {
            close(sv[0]);
            ej__mutex_lock(&zmu);
            zygote_lost_locked(ctl);
            ej__mutex_unlock(&zmu);
            continue; /* once more with a new zygote */
        }
        struct zmsg m = {0, 0};
        e = write_full(sv[0], msg, len);
        if (e == 0 && !read_full(sv[0], &m, sizeof m))
            e = EPIPE;
        if (e == 0 && m.kind == 'P') {
            *sock_out = sv[0];
            *pid = m.val;
            rc = 0;
        } else {
            close(sv[0]);
            rc = e != 0 ? e : (m.kind == 'E' && m.val > 0 ? m.val : EPROTO);
        }
    }
    free(msg);
    return rc;
}

int ej__zygote_wait(int sock, int *status)
{
    struct zmsg m;
    ssize_t r;
    while ((r = recv(sock, &m, sizeof m, MSG_DONTWAIT)) < 0 && errno == EINTR) {
    }
    if (r < 0 && (errno == EAGAIN || errno == EWOULDBLOCK))
        return 0;
    if (r == (ssize_t)sizeof m && m.kind == 'X') {
        *status = m.val;
        return 1;
    }
    return -1; /* the zygote is gone: the item's end is unknown */
}
