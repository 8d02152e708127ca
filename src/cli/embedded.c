#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <poll.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>
#include <arpa/inet.h>
#include <netinet/in.h>
#include <sys/file.h>
#include <sys/prctl.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/sysmacros.h>
#include <sys/wait.h>

#include "ejob/error.h"
#include "common/util.h"
#include "cli/embedded.h"

#define JOIN_TIMEOUT_MS 60000
#define START_TIMEOUT_MS 45000
#define STOP_TIMEOUT_MS 10000

struct ejcli_embedded {
    char *state_dir;
    int users_fd;
    char address[64];
};

/* ------------------------------------------------------------- helpers */

char *ejcli_state_dir(const char *explicit_dir)
{
    if (explicit_dir != NULL && explicit_dir[0] != '\0')
        return strdup(explicit_dir);
    const char *env = getenv("EJOB_STATE_DIR");
    if (env != NULL && env[0] != '\0')
        return strdup(env);
    env = getenv("XDG_RUNTIME_DIR");
    if (env != NULL && env[0] != '\0')
        return ej__asprintf("%s/ejob", env);
    return ej__asprintf("/tmp/ejob-%u", (unsigned)getuid());
}

static char *state_path(const char *dir, const char *name)
{
    return ej__asprintf("%s/%s", dir, name);
}

static int mkdir_p(const char *path, mode_t mode)
{
    char buf[PATH_MAX];
    if (snprintf(buf, sizeof(buf), "%s", path) >= (int)sizeof(buf))
        return -ENAMETOOLONG;
    for (char *p = buf + 1; *p != '\0'; p++) {
        if (*p != '/')
            continue;
        *p = '\0';
        if (mkdir(buf, mode) != 0 && errno != EEXIST)
            return -errno;
        *p = '/';
    }
    if (mkdir(buf, mode) != 0 && errno != EEXIST)
        return -errno;
    return 0;
}

static int open_in(const char *dir, const char *name, int flags)
{
    char *path = state_path(dir, name);
    if (path == NULL)
        return -ENOMEM;
    int fd = open(path, flags | O_CLOEXEC, 0600);
    int err = errno;
    free(path);
    return fd < 0 ? -err : fd;
}

/* Take flock(op) on fd, polling until timeout_ms. Returns 0 or -errno. */
static int flock_bounded(int fd, int op, int timeout_ms)
{
    int64_t deadline = ej__mono_ms() + timeout_ms;
    for (;;) {
        if (flock(fd, op | LOCK_NB) == 0)
            return 0;
        if (errno != EWOULDBLOCK && errno != EINTR)
            return -errno;
        if (ej__mono_ms() >= deadline)
            return -ETIMEDOUT;
        ej__sleep_ms(20);
    }
}

/* The state lock: serialises every start, join and stop. */
static int lock_state(const char *dir, int timeout_ms)
{
    int fd = open_in(dir, "lock", O_RDWR | O_CREAT);
    if (fd < 0)
        return fd;
    int rc = flock_bounded(fd, LOCK_EX, timeout_ms);
    if (rc != 0) {
        close(fd);
        return rc;
    }
    return fd;
}

static int read_small_file(const char *dir, const char *name, char *out, size_t len)
{
    int fd = open_in(dir, name, O_RDONLY);
    if (fd < 0)
        return fd;
    ssize_t n = read(fd, out, len - 1);
    int err = errno;
    close(fd);
    if (n < 0)
        return -err;
    out[n] = '\0';
    while (n > 0 && (out[n - 1] == '\n' || out[n - 1] == ' '))
        out[--n] = '\0';
    return 0;
}

static pid_t read_pid_file(const char *dir, const char *name)
{
    char buf[32];
    if (read_small_file(dir, name, buf, sizeof(buf)) != 0)
        return 0;
    long v = strtol(buf, NULL, 10);
    return v > 0 && v < INT_MAX ? (pid_t)v : 0;
}

/* Write dir/name atomically (temporary file + rename). */
static int write_file_atomic(const char *dir, const char *name, const char *text)
{
    char *tmp = ej__asprintf("%s/.%s.tmp", dir, name);
    char *path = state_path(dir, name);
    int rc = 0;
    if (tmp == NULL || path == NULL) {
        rc = -ENOMEM;
        goto out;
    }
    int fd = open(tmp, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0600);
    if (fd < 0) {
        rc = -errno;
        goto out;
    }
    size_t len = strlen(text);
    if (write(fd, text, len) != (ssize_t)len)
        rc = -EIO;
    if (close(fd) != 0 && rc == 0)
        rc = -errno;
    if (rc == 0 && rename(tmp, path) != 0)
        rc = -errno;
    if (rc != 0)
        unlink(tmp);
out:
    free(tmp);
    free(path);
    return rc;
}

static void unlink_in(const char *dir, const char *name)
{
    char *path = state_path(dir, name);
    if (path != NULL)
        unlink(path);
    free(path);
}

static bool pid_alive(pid_t pid)
{
    return pid > 0 && (kill(pid, 0) == 0 || errno == EPERM);
}

/* True when /proc/PID/cmdline contains both needles: guards against killing
 * an unrelated process that reused a recorded pid. */
static bool pid_matches(pid_t pid, const char *needle1, const char *needle2)
{
    char path[64], buf[8192];
    snprintf(path, sizeof(path), "/proc/%d/cmdline", (int)pid);
    int fd = open(path, O_RDONLY | O_CLOEXEC);
    if (fd < 0)
        return false;
    ssize_t n = read(fd, buf, sizeof(buf) - 1);
    close(fd);
    if (n <= 0)
        return false;
    for (ssize_t i = 0; i < n; i++)
        if (buf[i] == '\0')
            buf[i] = ' ';
    buf[n] = '\0';
    return strstr(buf, needle1) != NULL && (needle2 == NULL || strstr(buf, needle2) != NULL);
}

/* Kill pid (not our child) and wait until it is gone, bounded. */
static void kill_and_wait(pid_t pid, int sig, int timeout_ms)
{
    if (!pid_alive(pid))
        return;
    kill(pid, sig);
    int64_t deadline = ej__mono_ms() + timeout_ms;
    while (pid_alive(pid) && ej__mono_ms() < deadline)
        ej__sleep_ms(20);
    if (pid_alive(pid)) {
        kill(pid, SIGKILL);
        deadline = ej__mono_ms() + 2000;
        while (pid_alive(pid) && ej__mono_ms() < deadline)
            ej__sleep_ms(20);
    }
}

/* Send a four-letter word and read the reply into out (NUL-terminated).
 * Returns false when the exchange failed. */
static bool four_letter(const char *hostport, const char *word, int timeout_ms, char *reply,
                        size_t cap)
{
    char host[64];
    const char *colon = strrchr(hostport, ':');
    if (colon == NULL || (size_t)(colon - hostport) >= sizeof(host))
        return false;
    memcpy(host, hostport, (size_t)(colon - hostport));
    host[colon - hostport] = '\0';
    struct sockaddr_in sa = {.sin_family = AF_INET, .sin_port = htons((uint16_t)atoi(colon + 1))};
    if (inet_pton(AF_INET, host, &sa.sin_addr) != 1)
        return false;
    int fd = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC | SOCK_NONBLOCK, 0);
    if (fd < 0)
        return false;
    reply[0] = '\0';
    bool ok = false;
    int64_t deadline = ej__mono_ms() + timeout_ms;
    if (connect(fd, (struct sockaddr *)&sa, sizeof(sa)) != 0 && errno != EINPROGRESS)
        goto out;
    struct pollfd p = {.fd = fd, .events = POLLOUT};
    if (poll(&p, 1, timeout_ms) != 1)
        goto out;
    int soerr = 0;
    socklen_t sl = sizeof(soerr);
    if (getsockopt(fd, SOL_SOCKET, SO_ERROR, &soerr, &sl) != 0 || soerr != 0)
        goto out;
    if (send(fd, word, 4, MSG_NOSIGNAL) != 4)
        goto out;
    size_t got = 0;
    while (got < cap - 1) {
        int left = (int)(deadline - ej__mono_ms());
        if (left <= 0)
            break;
        p.events = POLLIN;
        if (poll(&p, 1, left) != 1)
            break;
        ssize_t n = recv(fd, reply + got, cap - 1 - got, 0);
        if (n <= 0)
            break;
        got += (size_t)n;
    }
    reply[got] = '\0';
    ok = true;
out:
    close(fd);
    return ok;
}

bool ejcli_zk_ruok(const char *hostport, int timeout_ms)
{
    char reply[16];
    return four_letter(hostport, "ruok", timeout_ms, reply, sizeof(reply)) &&
           strcmp(reply, "imok") == 0;
}

/* "ruok" answers as soon as the port is open; "srvr" names the mode only
 * once the server has loaded its data and serves sessions. */
static bool zk_serving(const char *hostport, int timeout_ms)
{
    char reply[1024];
    return four_letter(hostport, "srvr", timeout_ms, reply, sizeof(reply)) &&
           strstr(reply, "Mode: ") != NULL;
}

static int free_port(void)
{
    int fd = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
    if (fd < 0)
        return -errno;
    struct sockaddr_in sa = {.sin_family = AF_INET, .sin_port = 0};
    sa.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    socklen_t sl = sizeof(sa);
    int port = -EADDRNOTAVAIL;
    if (bind(fd, (struct sockaddr *)&sa, sizeof(sa)) == 0 &&
        getsockname(fd, (struct sockaddr *)&sa, &sl) == 0)
        port = ntohs(sa.sin_port);
    close(fd);
    return port;
}

int ejcli_embedded_read_address(const char *state_dir, char *addr, size_t len)
{
    int rc = read_small_file(state_dir, "registry", addr, len);
    if (rc != 0) {
        addr[0] = '\0';
        return rc == -ENOENT ? EJ_ENOTFOUND : rc;
    }
    return addr[0] != '\0' ? 0 : EJ_ENOTFOUND;
}

/* Remove every trace of a server that no longer works. The caller holds the
 * state lock. */
static void clean_stale(const char *dir)
{
    char cfg_needle[PATH_MAX];
    snprintf(cfg_needle, sizeof(cfg_needle), "%s/zk/zoo.cfg", dir);
    pid_t sup = read_pid_file(dir, "supervisor.pid");
    pid_t srv = read_pid_file(dir, "server.pid");
    if (sup > 0 && pid_matches(sup, "supervise", dir))
        kill_and_wait(sup, SIGKILL, 2000);
    if (srv > 0 && pid_matches(srv, "ZooKeeperServerMain", cfg_needle))
        kill_and_wait(srv, SIGKILL, 2000);
    unlink_in(dir, "registry");
    unlink_in(dir, "server.pid");
    unlink_in(dir, "supervisor.pid");
}

/* True when the recorded server is up: address file, live pid and "imok". */
static bool server_healthy(const char *dir, char *addr, size_t len)
{
    if (ejcli_embedded_read_address(dir, addr, len) != 0)
        return false;
    pid_t srv = read_pid_file(dir, "server.pid");
    return pid_alive(srv) && ejcli_zk_ruok(addr, 2000);
}

/* Start the supervisor in its own session and wait for its verdict. The
 * caller holds the state lock and a users lock. */
static int spawn_supervisor(const char *dir, char *err, size_t errlen)
{
    int p[2];
    if (pipe2(p, O_CLOEXEC) != 0) {
        snprintf(err, errlen, "pipe: %s", strerror(errno));
        return -errno;
    }
    char fdarg[16];
    snprintf(fdarg, sizeof(fdarg), "%d", p[1]);
    char *logpath = ej__asprintf("%s/zk/supervisor.log", dir);
    if (logpath == NULL) {
        close(p[0]);
        close(p[1]);
        return -ENOMEM;
    }
    pid_t child = fork();
    if (child < 0) {
        int e = errno;
        snprintf(err, errlen, "fork: %s", strerror(e));
        close(p[0]);
        close(p[1]);
        free(logpath);
        return -e;
    }
    if (child == 0) {
        /* Only async-signal-safe calls from here to exec. The daemon blocks
         * its signals for its signalfd: the supervisor starts clean. */
        sigset_t none;
        sigemptyset(&none);
        sigprocmask(SIG_SETMASK, &none, NULL);
        signal(SIGPIPE, SIG_DFL);
        setsid();
        pid_t grandchild = fork();
        if (grandchild != 0)
            _exit(grandchild < 0 ? 1 : 0);
        fcntl(p[1], F_SETFD, 0);
        int nul = open("/dev/null", O_RDONLY);
        int log = open(logpath, O_WRONLY | O_CREAT | O_APPEND, 0600);
        if (nul >= 0)
            dup2(nul, 0);
        if (log >= 0) {
            dup2(log, 1);
            dup2(log, 2);
        }
        execl("/proc/self/exe", "ejob", "registry", "supervise", "--state-dir", dir, "--ready-fd",
              fdarg, (char *)NULL);
        _exit(127);
    }
    free(logpath);
    close(p[1]);
    int status;
    while (waitpid(child, &status, 0) < 0 && errno == EINTR)
        ;

    char reply[512];
    size_t got = 0;
    int64_t deadline = ej__mono_ms() + START_TIMEOUT_MS;
    for (;;) {
        int left = (int)(deadline - ej__mono_ms());
        if (left <= 0)
            break;
        struct pollfd pf = {.fd = p[0], .events = POLLIN};
        int r = poll(&pf, 1, left);
        if (r < 0 && errno == EINTR)
            continue;
        if (r <= 0)
            break;
        ssize_t n = read(p[0], reply + got, sizeof(reply) - 1 - got);
        if (n < 0 && errno == EINTR)
            continue;
        if (n <= 0)
            break;
        got += (size_t)n;
        if (memchr(reply, '\n', got) != NULL || got == sizeof(reply) - 1)
            break;
    }
    close(p[0]);
    reply[got] = '\0';
    char *nl = strchr(reply, '\n');
    if (nl != NULL)
        *nl = '\0';
    if (strcmp(reply, "OK") == 0)
        return 0;
    if (strncmp(reply, "ERR ", 4) == 0)
        snprintf(err, errlen, "embedded ZooKeeper did not start: %s", reply + 4);
    else if (got == 0)
        snprintf(err, errlen,
                 "embedded ZooKeeper did not start within %d s (see %s/zk/zookeeper.log)",
                 START_TIMEOUT_MS / 1000, dir);
    else
        snprintf(err, errlen, "embedded ZooKeeper supervisor said: %s", reply);
    clean_stale(dir);
    return EJ_ETIMEDOUT;
}

/* --------------------------------------------------------------- join */

int ejcli_embedded_join(const char *state_dir, ejcli_embedded **out, char *err, size_t errlen)
{
    *out = NULL;
    int rc = mkdir_p(state_dir, 0700);
    if (rc != 0) {
        snprintf(err, errlen, "cannot create state directory %s: %s", state_dir, strerror(-rc));
        return rc;
    }
    char *zkdir = ej__asprintf("%s/zk", state_dir);
    if (zkdir == NULL)
        return EJ_ENOMEM;
    mkdir(zkdir, 0700);
    free(zkdir);

    int64_t deadline = ej__mono_ms() + JOIN_TIMEOUT_MS;
    for (;;) {
        int left = (int)(deadline - ej__mono_ms());
        if (left <= 0) {
            snprintf(err, errlen, "timed out waiting for the state lock %s/lock", state_dir);
            return EJ_ETIMEDOUT;
        }
        int lock_fd = lock_state(state_dir, left);
        if (lock_fd < 0) {
            snprintf(err, errlen, "cannot lock %s/lock: %s", state_dir,
                     lock_fd == -ETIMEDOUT ? "timed out" : strerror(-lock_fd));
            return lock_fd;
        }
        int users_fd = open_in(state_dir, "users", O_RDWR | O_CREAT);
        if (users_fd < 0) {
            snprintf(err, errlen, "cannot open %s/users: %s", state_dir, strerror(-users_fd));
            close(lock_fd);
            return users_fd;
        }
        if (flock(users_fd, LOCK_SH | LOCK_NB) != 0) {
            /* The supervisor holds the users lock exclusively: it is stopping
             * the server because its last user left. Let it finish. */
            close(users_fd);
            close(lock_fd);
            ej__sleep_ms(100);
            continue;
        }
        ejcli_embedded *e = calloc(1, sizeof(*e));
        if (e == NULL || (e->state_dir = strdup(state_dir)) == NULL) {
            free(e);
            close(users_fd);
            close(lock_fd);
            return EJ_ENOMEM;
        }
        e->users_fd = users_fd;
        if (!server_healthy(state_dir, e->address, sizeof(e->address))) {
            clean_stale(state_dir);
            rc = spawn_supervisor(state_dir, err, errlen);
            if (rc == 0 &&
                ejcli_embedded_read_address(state_dir, e->address, sizeof(e->address)) != 0) {
                snprintf(err, errlen, "embedded ZooKeeper started but %s/registry is missing",
                         state_dir);
                rc = EJ_ENOTFOUND;
            }
            if (rc != 0) {
                close(users_fd);
                free(e->state_dir);
                free(e);
                close(lock_fd);
                return rc;
            }
        }
        close(lock_fd);
        *out = e;
        return 0;
    }
}

const char *ejcli_embedded_address(const ejcli_embedded *e)
{
    return e->address;
}

void ejcli_embedded_leave(ejcli_embedded *e, int wait_ms)
{
    if (e == NULL)
        return;
    pid_t srv = read_pid_file(e->state_dir, "server.pid");
    close(e->users_fd);
    /* Were we the last user? Then the supervisor stops the server within a
     * fraction of a second; wait for that so our caller can rely on it. */
    int probe = open_in(e->state_dir, "users", O_RDWR);
    bool last = false;
    if (probe >= 0) {
        if (flock(probe, LOCK_EX | LOCK_NB) == 0) {
            last = true;
            flock(probe, LOCK_UN);
        } else {
            /* Either another daemon still uses it or the supervisor already
             * holds the lock to stop it: look at the readers. */
            struct ejcli_embedded_status st;
            last = ejcli_embedded_status(e->state_dir, &st) == 0 && st.user_count == 0;
        }
        close(probe);
    }
    if (last && srv > 0) {
        int64_t deadline = ej__mono_ms() + wait_ms;
        while (pid_alive(srv) && ej__mono_ms() < deadline)
            ej__sleep_ms(25);
    }
    free(e->state_dir);
    free(e);
}

/* -------------------------------------------------------------- status */

/* Pids holding a shared flock on the file (from /proc/locks). */
static size_t lock_readers(const char *path, pid_t *pids, size_t max)
{
    struct stat st;
    if (stat(path, &st) != 0)
        return 0;
    FILE *f = fopen("/proc/locks", "re");
    if (f == NULL)
        return 0;
    char line[256];
    size_t n = 0;
    while (fgets(line, sizeof(line), f) != NULL) {
        char kind[16], adv[16], mode[16];
        int pid;
        unsigned maj, min;
        unsigned long ino;
        if (strstr(line, "->") != NULL)
            continue; /* a waiter, not a holder */
        if (sscanf(line, "%*d: %15s %15s %15s %d %x:%x:%lu", kind, adv, mode, &pid, &maj, &min,
                   &ino) != 7)
            continue;
        if (strcmp(kind, "FLOCK") != 0 || strcmp(mode, "READ") != 0)
            continue;
        if (ino != (unsigned long)st.st_ino || maj != major(st.st_dev) || min != minor(st.st_dev))
            continue;
        if (n < max)
            pids[n] = (pid_t)pid;
        n++;
    }
    fclose(f);
    return n;
}

int ejcli_embedded_status(const char *state_dir, struct ejcli_embedded_status *st)
{
    memset(st, 0, sizeof(*st));
    struct stat sb;
    if (stat(state_dir, &sb) != 0)
        return -errno;
    ejcli_embedded_read_address(state_dir, st->address, sizeof(st->address));
    st->server_pid = read_pid_file(state_dir, "server.pid");
    st->supervisor_pid = read_pid_file(state_dir, "supervisor.pid");
    if (st->address[0] != '\0') {
        st->running = pid_alive(st->server_pid) && ejcli_zk_ruok(st->address, 2000);
        st->stale = !st->running;
    }
    char *users = state_path(state_dir, "users");
    if (users != NULL)
        st->user_count = lock_readers(users, st->users, sizeof(st->users) / sizeof(st->users[0]));
    free(users);
    return 0;
}

int ejcli_embedded_stop(const char *state_dir, bool force, char *err, size_t errlen)
{
    struct stat sb;
    if (stat(state_dir, &sb) != 0)
        return 0;
    struct ejcli_embedded_status st;
    ejcli_embedded_status(state_dir, &st);
    if (st.user_count > 0 && !force) {
        snprintf(err, errlen,
                 "%zu daemon(s) still use the embedded registry (pid %d%s); "
                 "stop them first or pass --force",
                 st.user_count, (int)st.users[0], st.user_count > 1 ? ", ..." : "");
        return EJ_EBUSY;
    }
    char cfg_needle[PATH_MAX];
    snprintf(cfg_needle, sizeof(cfg_needle), "%s/zk/zoo.cfg", state_dir);
    /* The supervisor stops its server gracefully on SIGTERM and removes the
     * state files (it takes the state lock for that, so we do not hold it
     * yet); whatever is left afterwards is removed here. */
    pid_t sup = read_pid_file(state_dir, "supervisor.pid");
    if (sup > 0 && pid_matches(sup, "supervise", state_dir))
        kill_and_wait(sup, SIGTERM, STOP_TIMEOUT_MS + 5000);
    int lock_fd = lock_state(state_dir, 30000);
    if (lock_fd < 0) {
        snprintf(err, errlen, "cannot lock %s/lock: %s", state_dir, strerror(-lock_fd));
        return lock_fd;
    }
    pid_t srv = read_pid_file(state_dir, "server.pid");
    if (srv > 0 && pid_matches(srv, "ZooKeeperServerMain", cfg_needle))
        kill_and_wait(srv, SIGTERM, STOP_TIMEOUT_MS);
    unlink_in(state_dir, "registry");
    unlink_in(state_dir, "server.pid");
    unlink_in(state_dir, "supervisor.pid");
    close(lock_fd);
    return 0;
}

/* ---------------------------------------------------------- supervisor */

static void say(int fd, const char *fmt, ...) EJ_PRINTF(2, 3);
static void say(int fd, const char *fmt, ...)
{
    if (fd < 0)
        return;
    char buf[480];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(buf, sizeof(buf) - 1, fmt, ap);
    va_end(ap);
    strcat(buf, "\n");
    ssize_t n = write(fd, buf, strlen(buf));
    (void)n;
}

static pid_t spawn_java(const char *dir, const char *cfg, const sigset_t *orig_mask)
{
    char *logpath = ej__asprintf("%s/zk/zookeeper.log", dir);
    const char *java = getenv("EJOB_JAVA");
    const char *cp = getenv("EJOB_ZK_CLASSPATH");
    if (java == NULL || java[0] == '\0')
        java = "java";
    if (cp == NULL || cp[0] == '\0')
        cp = "/usr/share/java/zookeeper.jar:/usr/share/java/slf4j-simple.jar";
    if (logpath == NULL)
        return -ENOMEM;
    pid_t parent = getpid();
    pid_t pid = fork();
    if (pid < 0) {
        free(logpath);
        return -errno;
    }
    if (pid == 0) {
        /* The server must not outlive its supervisor: the supervisor is what
         * stops it and cleans the state directory. */
        prctl(PR_SET_PDEATHSIG, SIGKILL);
        if (getppid() != parent)
            _exit(1);
        sigprocmask(SIG_SETMASK, orig_mask, NULL);
        int nul = open("/dev/null", O_RDONLY);
        int log = open(logpath, O_WRONLY | O_CREAT | O_APPEND, 0600);
        if (nul >= 0)
            dup2(nul, 0);
        if (log >= 0) {
            dup2(log, 1);
            dup2(log, 2);
        }
        execlp(java, java, "-Xmx256m", "-XX:+UseSerialGC", "-XX:TieredStopAtLevel=1",
               "-Dzookeeper.admin.enableServer=false", "-cp", cp,
               "org.apache.zookeeper.server.ZooKeeperServerMain", cfg, (char *)NULL);
        _exit(127);
    }
    free(logpath);
    return pid;
}

static bool reap(pid_t pid, int *status)
{
    pid_t r;
    while ((r = waitpid(pid, status, WNOHANG)) < 0 && errno == EINTR)
        ;
    return r == pid;
}

static void stop_java(pid_t java)
{
    int status;
    if (reap(java, &status))
        return;
    kill(java, SIGTERM);
    int64_t deadline = ej__mono_ms() + STOP_TIMEOUT_MS;
    while (ej__mono_ms() < deadline) {
        if (reap(java, &status))
            return;
        ej__sleep_ms(20);
    }
    kill(java, SIGKILL);
    while (waitpid(java, &status, 0) < 0 && errno == EINTR)
        ;
}

int ejcli_embedded_supervise(const char *dir, int ready_fd)
{
    sigset_t mask, orig;
    sigemptyset(&mask);
    sigaddset(&mask, SIGTERM);
    sigaddset(&mask, SIGINT);
    sigprocmask(SIG_BLOCK, &mask, &orig);
    signal(SIGHUP, SIG_IGN);
    signal(SIGPIPE, SIG_IGN);

    char cfg[PATH_MAX], data[PATH_MAX];
    snprintf(cfg, sizeof(cfg), "%s/zk/zoo.cfg", dir);
    snprintf(data, sizeof(data), "%s/zk/data", dir);
    int rc = mkdir_p(data, 0700);
    if (rc != 0) {
        say(ready_fd, "ERR cannot create %s: %s", data, strerror(-rc));
        return 1;
    }
    int port = free_port();
    if (port < 0) {
        say(ready_fd, "ERR no free port on 127.0.0.1: %s", strerror(-port));
        return 1;
    }
    char *text = ej__asprintf("tickTime=500\n"
                              "minSessionTimeout=1000\n"
                              "maxSessionTimeout=120000\n"
                              "dataDir=%s\n"
                              "clientPort=%d\n"
                              "clientPortAddress=127.0.0.1\n"
                              "admin.enableServer=false\n"
                              "4lw.commands.whitelist=ruok,mntr,stat,srvr,cons\n"
                              "maxClientCnxns=0\n",
                              data, port);
    char *zkdir = ej__asprintf("%s/zk", dir);
    rc = text != NULL && zkdir != NULL ? write_file_atomic(zkdir, "zoo.cfg", text) : -ENOMEM;
    free(text);
    free(zkdir);
    if (rc != 0) {
        say(ready_fd, "ERR cannot write %s: %s", cfg, strerror(-rc));
        return 1;
    }
    pid_t java = spawn_java(dir, cfg, &orig);
    if (java < 0) {
        say(ready_fd, "ERR cannot start java: %s", strerror(-java));
        return 1;
    }
    char addr[64];
    snprintf(addr, sizeof(addr), "127.0.0.1:%d", port);
    int64_t deadline = ej__mono_ms() + START_TIMEOUT_MS - 2000;
    int status;
    for (;;) {
        if (reap(java, &status)) {
            say(ready_fd, "ERR the server exited with status %d (see %s/zk/zookeeper.log)",
                WIFEXITED(status) ? WEXITSTATUS(status) : 128 + WTERMSIG(status), dir);
            return 1;
        }
        if (zk_serving(addr, 500))
            break;
        if (ej__mono_ms() >= deadline) {
            stop_java(java);
            say(ready_fd, "ERR the server did not answer on %s (see %s/zk/zookeeper.log)", addr,
                dir);
            return 1;
        }
        ej__sleep_ms(50);
    }
    char pidtext[32];
    snprintf(pidtext, sizeof(pidtext), "%d\n", (int)java);
    rc = write_file_atomic(dir, "server.pid", pidtext);
    snprintf(pidtext, sizeof(pidtext), "%d\n", (int)getpid());
    if (rc == 0)
        rc = write_file_atomic(dir, "supervisor.pid", pidtext);
    char addrline[80];
    snprintf(addrline, sizeof(addrline), "%s\n", addr);
    if (rc == 0)
        rc = write_file_atomic(dir, "registry", addrline);
    if (rc != 0) {
        stop_java(java);
        say(ready_fd, "ERR cannot write state files in %s: %s", dir, strerror(-rc));
        return 1;
    }
    say(ready_fd, "OK");
    close(ready_fd);
    fprintf(stderr, "ejob registry: ZooKeeper pid %d serving %s\n", (int)java, addr);

    int users_fd = open_in(dir, "users", O_RDWR | O_CREAT);
    const char *why = "its last user left";
    for (;;) {
        struct timespec ts = {.tv_sec = 0, .tv_nsec = 200 * 1000000L};
        int sig = sigtimedwait(&mask, NULL, &ts);
        if (sig > 0) {
            why = "a signal";
            break;
        }
        if (reap(java, &status)) {
            java = 0;
            why = "the server exited";
            break;
        }
        if (users_fd >= 0 && flock(users_fd, LOCK_EX | LOCK_NB) == 0)
            break;
    }
    /* Holding the users lock exclusively keeps new daemons out until the
     * state files are gone; they then start a fresh server. */
    int lock_fd = lock_state(dir, 30000);
    if (java > 0)
        stop_java(java);
    pid_t recorded = read_pid_file(dir, "supervisor.pid");
    if (recorded == getpid()) {
        unlink_in(dir, "registry");
        unlink_in(dir, "server.pid");
        unlink_in(dir, "supervisor.pid");
    }
    fprintf(stderr, "ejob registry: stopped (%s)\n", why);
    if (lock_fd >= 0)
        close(lock_fd);
    if (users_fd >= 0)
        close(users_fd);
    return 0;
}
