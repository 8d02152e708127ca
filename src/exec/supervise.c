/*
 * Item process groups that never outlive their daemon.
 *
 * Items are started through the zygote (zygote.c: one supervising process
 * for all items) when it runs. Without it (EJOB_ZYGOTE=0, or it could not
 * be started) each item gets a supervisor of its own, as below.
 *
 * Before a script item is spawned, a small supervising process is forked
 * from the daemon. It leads a new process group, and the item is spawned
 * into that group, so the group is there, and known to the supervisor,
 * before the item runs: there is no moment at which the item runs
 * unsupervised. The supervisor holds one end of a socket pair whose other
 * end only the daemon holds (close-on-exec, and every other descriptor is
 * closed in the supervisor). When the item ends normally the daemon says so
 * and the supervisor exits quietly. When the daemon dies (kill -9, crash,
 * exit with the item still running) the kernel closes the daemon's end: the
 * supervisor reads EOF at once and gives the group SIGTERM, then SIGKILL
 * after the item's kill grace, which ends the supervisor too. The same
 * happens when the daemon has been stopped (SIGSTOP, a debugger) for
 * STOPPED_LIMIT_MS: a frozen daemon can neither stop its items nor keep its
 * session, and another instance may take them over.
 *
 * A socket rather than PR_SET_PDEATHSIG: the death signal follows the
 * creating thread, not the process, and items run on pool threads.
 *
 * The supervisor runs in a child forked from a threaded process: it calls
 * only async-signal-safe functions and never returns into ejob's code.
 */
#include <errno.h>
#include <fcntl.h>
#include <poll.h>
#include <stdbool.h>
#include <signal.h>
#include <spawn.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>
#include <stdlib.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <sys/types.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "exec/internal.h"

#define LIFELINE_FD 3
#define ITEM_DONE 'd'
#define STAT_FD 4
#define STOP_POLL_MS 100
/* A daemon stopped this long has its items stopped: it cannot fence them
 * itself, and its registry session runs out meanwhile (sessions of a few
 * seconds at least; an item gone within a third of the shortest is gone
 * before the server can hand it to another instance). */
#define STOPPED_LIMIT_MS 1000

static void sleep_ms(int64_t ms)
{
    struct timespec ts = {.tv_sec = (time_t)(ms / 1000), .tv_nsec = (long)(ms % 1000) * 1000000L};
    while (nanosleep(&ts, &ts) != 0 && errno == EINTR) {
    }
}

bool ej__process_stopped(int statfd)
{
    char buf[512];
    ssize_t n = pread(statfd, buf, sizeof buf - 1, 0);
    if (n <= 0)
        return false;
    /* "pid (comm) S ...": comm may hold anything, the state follows the
     * last ')'. */
    ssize_t i = n - 1;
    while (i >= 0 && buf[i] != ')')
        i--;
    return i >= 0 && i + 2 < n && (buf[i + 2] == 'T' || buf[i + 2] == 't');
}

static int64_t mono_ms(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (int64_t)ts.tv_sec * 1000 + ts.tv_nsec / 1000000;
}

/* Waits until the item is over (true) or its group must go (false): the
 * daemon died, or has been stopped for STOPPED_LIMIT_MS. */
static bool wait_item(int statfd)
{
    int64_t stopped_since = -1;
    for (;;) {
        struct pollfd p = {.fd = LIFELINE_FD, .events = POLLIN};
        int r = poll(&p, 1, statfd >= 0 ? STOP_POLL_MS : -1);
        if (r > 0) {
            char b = 0;
            ssize_t n = read(LIFELINE_FD, &b, 1);
            if (n == 1 && b == ITEM_DONE)
                return true;
            if (n == 0 || (n < 0 && errno != EINTR && errno != EAGAIN))
                return false; /* EOF: the daemon is gone */
        } else if (r < 0 && errno != EINTR) {
            return false;
        }
        if (statfd < 0)
            continue;
        if (!ej__process_stopped(statfd)) {
            stopped_since = -1;
        } else if (stopped_since < 0) {
            stopped_since = mono_ms();
        } else if (mono_ms() - stopped_since >= STOPPED_LIMIT_MS) {
            return false;
        }
    }
}

/* SIGTERM to the item's group now, SIGKILL grace_ms later. */
static _Noreturn void end_group(int64_t grace_ms)
{
    /* SIGTERM stays blocked here: it is for the item. The leader cannot
     * see its group empty out (it is a member), so it waits the grace. */
    kill(0, SIGTERM);
    sleep_ms(grace_ms);
    kill(0, SIGKILL); /* ends this process too */
    _exit(0);
}

/* The supervising process: never returns. */
static _Noreturn void supervise(int lifeline, int statfd, int devnull, int64_t grace_ms)
{
    /* Signals meant for the item's group (a timeout's SIGTERM) or for the
     * daemon's (a terminal's SIGINT) are not for the supervisor: only
     * SIGKILL ends it from outside. */
    sigset_t all;
    sigfillset(&all);
    sigprocmask(SIG_SETMASK, &all, NULL);
    setpgid(0, 0); /* the daemon does it too: whoever runs first */
    dup2(devnull, 0);
    dup2(devnull, 1);
    dup2(devnull, 2);
    if (lifeline != LIFELINE_FD)
        dup2(lifeline, LIFELINE_FD);
    if (statfd >= 0 && statfd != STAT_FD) {
        dup2(statfd, STAT_FD);
        statfd = STAT_FD;
    }
    /* Other items' lifelines, the daemon's sockets and listeners: a copy
     * kept here would hide the daemon's death from other supervisors. */
    close_range(STAT_FD + 1, ~0U, 0);
    if (wait_item(statfd))
        _exit(0);
    end_group(grace_ms);
}

/* A supervising process of the item's own: forked from this process. */
static int spawn_forked(struct ej__supervisor *sup, pid_t *pid, const char *file,
                        const posix_spawn_file_actions_t *fa, posix_spawnattr_t *attr,
                        char *const argv[], char *const envp[], int64_t grace_ms)
{
    int sv[2];
    if (socketpair(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0, sv) != 0)
        return errno;
    int devnull = open("/dev/null", O_RDWR | O_CLOEXEC);
    if (devnull < 0) {
        int e = errno;
        close(sv[0]);
        close(sv[1]);
        return e;
    }
    /* Opened here: /proc/self is this process (the supervisor watches it
     * for a stop). -1 without /proc: only death is watched then. */
    int statfd = open("/proc/self/stat", O_RDONLY | O_CLOEXEC);
    pid_t child = fork();
    if (child == 0)
        supervise(sv[1], statfd, devnull, grace_ms);
    int e = errno;
    close(sv[1]);
    close(devnull);
    if (statfd >= 0)
        close(statfd);
    if (child < 0) {
        close(sv[0]);
        return e;
    }
    sup->pid = child;
    sup->sup = child;
    sup->fd = sv[0];
    /* The group must exist before the item joins it: make it here too,
     * in case the supervisor has not run yet (a no-op if it has). */
    setpgid(child, child);
    int rc = posix_spawnattr_setpgroup(attr, child);
    if (rc == 0)
        rc = posix_spawnp(pid, file, fa, attr, argv, envp);
    if (rc != 0) {
        *pid = -1;
        ej__supervise_end(sup);
        return rc;
    }
    return 0;
}

/* file as posix_spawnp finds it: in this process's PATH unless it names a
 * path. Returns 0 with out set, or ENOENT/EACCES/ENAMETOOLONG. */
static int find_program(const char *file, char *out, size_t outlen)
{
    if (strchr(file, '/') != NULL) {
        if (strlen(file) >= outlen)
            return ENAMETOOLONG;
        memcpy(out, file, strlen(file) + 1);
        return 0;
    }
    const char *path = getenv("PATH");
    if (path == NULL)
        path = "/bin:/usr/bin";
    int rc = ENOENT;
    for (const char *p = path;; p++) {
        const char *end = strchr(p, ':');
        size_t dl = end ? (size_t)(end - p) : strlen(p);
        int n = snprintf(out, outlen, "%.*s%s%s", (int)dl, p, dl ? "/" : "", file);
        if (n > 0 && (size_t)n < outlen) {
            if (access(out, X_OK) == 0) {
                struct stat st;
                if (stat(out, &st) == 0 && S_ISREG(st.st_mode))
                    return 0;
            } else if (errno == EACCES) {
                rc = EACCES;
            }
        }
        if (end == NULL)
            break;
        p = end;
    }
    return rc;
}

int ej__supervise_spawn(struct ej__supervisor *sup, pid_t *pid, const char *file,
                        const posix_spawn_file_actions_t *fa, posix_spawnattr_t *attr,
                        char *const argv[], char *const envp[], const int stdfds[3],
                        int64_t grace_ms)
{
    *sup = (struct ej__supervisor){.pid = -1, .fd = -1, .sup = -1, .leader = -1};
    *pid = -1;
    char path[4096];
    int rc = find_program(file, path, sizeof path);
    if (rc != 0)
        return rc;
    int sock = -1;
    rc = ej__zygote_spawn(&sock, pid, path, argv, envp, stdfds, grace_ms);
    if (rc == 0) {
        sup->pid = *pid;
        sup->fd = sock;
        sup->zygote = true;
        /* The zygote reaps the item only once sock is closed, so this is
         * the item's process and not a reuse of its id: it lets this
         * process follow the item should the zygote die (OOM killer). */
        sup->leader = (int)syscall(SYS_pidfd_open, *pid, 0);
        return 0;
    }
    /* No zygote, a request too large for it, or all its slots taken: this
     * item gets a supervisor of its own. */
    if (rc != ENOSYS && rc != E2BIG && rc != EAGAIN)
        return rc;
    return spawn_forked(sup, pid, file, fa, attr, argv, envp, grace_ms);
}

int ej__supervise_exit_fd(struct ej__supervisor *sup, pid_t pid)
{
    if (sup->zygote)
        return sup->fd;
    if (sup->leader < 0 && !sup->lost)
        sup->leader = (int)syscall(SYS_pidfd_open, pid, 0);
    return sup->leader;
}

/* The item's first process has exited (it may be reaped by now: after the
 * zygote's death its parent is init or a subreaper). */
static bool leader_gone(const struct ej__supervisor *sup, pid_t pid)
{
    if (sup->leader < 0)
        return kill(pid, 0) != 0 && errno == ESRCH;
    struct pollfd p = {.fd = sup->leader, .events = POLLIN};
    return poll(&p, 1, 0) > 0;
}

int ej__supervise_check(struct ej__supervisor *sup, pid_t pid, int *status)
{
    if (sup->zygote) {
        int r = ej__zygote_wait(sup->fd, status);
        if (r >= 0)
            return r;
        /* The zygote is gone: what it told of the item came before the EOF,
         * so the item has not been reported as exited. */
        sup->zygote = false;
        sup->lost = true;
        close(sup->fd);
        sup->fd = -1;
        return leader_gone(sup, pid) ? -1 : EJ__SPAWNER_LOST;
    }
    if (sup->lost)
        return leader_gone(sup, pid) ? -1 : 0;
    siginfo_t si;
    memset(&si, 0, sizeof si);
    if (waitid(P_PID, (id_t)pid, &si, WEXITED | WNOHANG | WNOWAIT) != 0)
        return -1; /* ECHILD: someone else reaped it (SIGCHLD ignored) */
    if (si.si_pid != pid)
        return 0;
    while (waitpid(pid, status, 0) < 0) {
        if (errno != EINTR)
            return -1;
    }
    return 1;
}

void ej__supervise_end(struct ej__supervisor *sup)
{
    if (sup->fd >= 0) {
        /* The zygote reaps the item once this socket closes; an own
         * supervisor is told the item ended normally. */
        char b = ITEM_DONE;
        if (!sup->zygote)
            while (send(sup->fd, &b, 1, MSG_NOSIGNAL) < 0 && errno == EINTR) {
            }
        close(sup->fd);
        sup->fd = -1;
    }
    if (sup->sup > 0) {
        while (waitpid(sup->sup, NULL, 0) < 0 && errno == EINTR) {
        }
        sup->sup = -1;
    }
    if (sup->leader >= 0) {
        close(sup->leader);
        sup->leader = -1;
    }
    sup->pid = -1;
}
