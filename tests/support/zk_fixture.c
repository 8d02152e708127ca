#include <arpa/inet.h>
#include <errno.h>
#include <fcntl.h>
#include <ftw.h>
#include <netinet/in.h>
#include <pthread.h>
#include <signal.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/prctl.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>
#include <zookeeper/zookeeper.h>

#include "zk_fixture.h"

#define ZKF_MAX_SERVERS 16

struct zkf_server {
    pid_t pid;
    int port;
    char dir[256];
    char connect[64];
    zkf_opts opts;
};

static zkf_server *live_servers[ZKF_MAX_SERVERS];
static pthread_mutex_t live_lock = PTHREAD_MUTEX_INITIALIZER;
static bool atexit_installed;

static void track(zkf_server *zk, bool add)
{
    pthread_mutex_lock(&live_lock);
    for (int i = 0; i < ZKF_MAX_SERVERS; i++) {
        if (add && live_servers[i] == NULL) {
            live_servers[i] = zk;
            break;
        }
        if (!add && live_servers[i] == zk) {
            live_servers[i] = NULL;
            break;
        }
    }
    pthread_mutex_unlock(&live_lock);
}

static void kill_all_at_exit(void)
{
    for (int i = 0; i < ZKF_MAX_SERVERS; i++)
        if (live_servers[i] != NULL)
            zkf_destroy(live_servers[i]);
}

static void fatal_signal(int sig)
{
    /* Only async-signal-safe calls: kill the servers by pid, then die. */
    for (int i = 0; i < ZKF_MAX_SERVERS; i++)
        if (live_servers[i] != NULL && live_servers[i]->pid > 0)
            kill(live_servers[i]->pid, SIGKILL);
    signal(sig, SIG_DFL);
    raise(sig);
}

static int free_port(void)
{
    int fd = socket(AF_INET, SOCK_STREAM, 0);
    if (fd < 0)
        return -errno;
    struct sockaddr_in a = {.sin_family = AF_INET, .sin_port = 0};
    a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    socklen_t len = sizeof(a);
    if (bind(fd, (struct sockaddr *)&a, sizeof(a)) != 0 ||
        getsockname(fd, (struct sockaddr *)&a, &len) != 0) {
        int err = -errno;
        close(fd);
        return err;
    }
    close(fd);
    return ntohs(a.sin_port);
}

static char *send_word(int port, const char *word)
{
    int fd = socket(AF_INET, SOCK_STREAM, 0);
    if (fd < 0)
        return NULL;
    struct sockaddr_in a = {.sin_family = AF_INET, .sin_port = htons((uint16_t)port)};
    a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    struct timeval tv = {.tv_sec = 5};
    setsockopt(fd, SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof(tv));
    if (connect(fd, (struct sockaddr *)&a, sizeof(a)) != 0) {
        close(fd);
        return NULL;
    }
    if (write(fd, word, strlen(word)) < 0) {
        close(fd);
        return NULL;
    }
    size_t cap = 4096, len = 0;
    char *buf = malloc(cap);
    for (;;) {
        if (len + 1024 > cap) {
            cap *= 2;
            char *p = realloc(buf, cap);
            if (p == NULL)
                break;
            buf = p;
        }
        ssize_t n = read(fd, buf + len, cap - len - 1);
        if (n <= 0)
            break;
        len += (size_t)n;
    }
    close(fd);
    buf[len] = '\0';
    return buf;
}

char *zkf_four_letter(const zkf_server *zk, const char *word)
{
    return send_word(zk->port, word);
}

long long zkf_mntr_value(const zkf_server *zk, const char *key)
{
    char *out = send_word(zk->port, "mntr");
    if (out == NULL)
        return -1;
    long long v = -1;
    size_t klen = strlen(key);
    for (char *line = out; line && *line;) {
        char *nl = strchr(line, '\n');
        if (strncmp(line, key, klen) == 0 && line[klen] == '\t') {
            v = strtoll(line + klen + 1, NULL, 10);
            break;
        }
        line = nl ? nl + 1 : NULL;
    }
    free(out);
    return v;
}

static int write_config(zkf_server *zk)
{
    char path[320];
    snprintf(path, sizeof(path), "%s/zoo.cfg", zk->dir);
    FILE *f = fopen(path, "w");
    if (f == NULL)
        return -errno;
    fprintf(f,
            "tickTime=%d\ndataDir=%s/data\nclientPort=%d\nclientPortAddress=127.0.0.1\n"
            "maxSessionTimeout=%d\nadmin.enableServer=false\n4lw.commands.whitelist=*\n"
            "maxClientCnxns=0\n%s\n",
            zk->opts.tick_ms, zk->dir, zk->port, zk->opts.max_session_ms,
            zk->opts.extra_config ? zk->opts.extra_config : "");
    fclose(f);
    return 0;
}

static int spawn(zkf_server *zk)
{
    char cfg[320], log[320];
    snprintf(cfg, sizeof(cfg), "%s/zoo.cfg", zk->dir);
    snprintf(log, sizeof(log), "%s/zookeeper.log", zk->dir);
    pid_t parent = getpid();
    pid_t pid = fork();
    if (pid < 0)
        return -errno;
    if (pid == 0) {
        prctl(PR_SET_PDEATHSIG, SIGKILL);
        if (getppid() != parent)
            _exit(127);
        int fd = open(log, O_WRONLY | O_CREAT | O_APPEND, 0644);
        if (fd >= 0) {
            dup2(fd, 1);
            dup2(fd, 2);
            close(fd);
        }
        int devnull = open("/dev/null", O_RDONLY);
        if (devnull >= 0)
            dup2(devnull, 0);
        char reaper[64] = "-Dznode.container.checkIntervalMs=60000";
        if (zk->opts.container_check_ms > 0)
            snprintf(reaper, sizeof reaper, "-Dznode.container.checkIntervalMs=%d",
                     zk->opts.container_check_ms);
        execlp("java", "java", "-Xmx256m", "-XX:+UseSerialGC", "-XX:TieredStopAtLevel=1",
               "-Dzookeeper.admin.enableServer=false", reaper, "-cp",
               "/usr/share/java/zookeeper.jar:/usr/share/java/slf4j-simple.jar",
               "org.apache.zookeeper.server.ZooKeeperServerMain", cfg, (char *)NULL);
        _exit(127);
    }
    zk->pid = pid;
    /* The JVM takes about a second; allow for a slow, loaded machine. */
    for (int i = 0; i < 600; i++) {
        int status;
        if (waitpid(pid, &status, WNOHANG) == pid) {
            zk->pid = 0;
            fprintf(stderr, "zk_fixture: server exited early, see %s\n", log);
            return -ECHILD;
        }
        char *r = send_word(zk->port, "ruok");
        bool ok = r != NULL && strcmp(r, "imok") == 0;
        free(r);
        if (ok)
            return 0;
        usleep(50 * 1000);
    }
    fprintf(stderr, "zk_fixture: server did not answer within 30 s, see %s\n", log);
    kill(pid, SIGKILL);
    waitpid(pid, NULL, 0);
    zk->pid = 0;
    return -ETIMEDOUT;
}

int zkf_start(zkf_server **out, const zkf_opts *opts)
{
    *out = NULL;
    zkf_server *zk = calloc(1, sizeof(*zk));
    if (zk == NULL)
        return -ENOMEM;
    if (opts != NULL)
        zk->opts = *opts;
    if (zk->opts.tick_ms <= 0)
        zk->opts.tick_ms = 200;
    if (zk->opts.max_session_ms <= 0)
        zk->opts.max_session_ms = 20 * zk->opts.tick_ms;
    const char *tmp = getenv("TMPDIR");
    snprintf(zk->dir, sizeof(zk->dir), "%s/ejob-zk-XXXXXX", tmp && *tmp ? tmp : "/tmp");
    if (mkdtemp(zk->dir) == NULL) {
        free(zk);
        return -errno;
    }
    char data[300];
    snprintf(data, sizeof(data), "%s/data", zk->dir);
    mkdir(data, 0755);

    pthread_mutex_lock(&live_lock);
    if (!atexit_installed) {
        atexit_installed = true;
        atexit(kill_all_at_exit);
        signal(SIGABRT, fatal_signal);
        signal(SIGSEGV, fatal_signal);
        signal(SIGTERM, fatal_signal);
        signal(SIGINT, fatal_signal);
    }
    pthread_mutex_unlock(&live_lock);

    int err = 0;
    for (int attempt = 0; attempt < 5; attempt++) {
        zk->port = free_port();
        if (zk->port < 0) {
            err = zk->port;
            continue;
        }
        snprintf(zk->connect, sizeof(zk->connect), "127.0.0.1:%d", zk->port);
        err = write_config(zk);
        if (err == 0) {
            track(zk, true);
            err = spawn(zk);
            if (err == 0)
                break;
            track(zk, false);
        }
    }
    if (err != 0) {
        zkf_destroy(zk);
        return err;
    }
    *out = zk;
    return 0;
}

const char *zkf_connect_string(const zkf_server *zk)
{
    return zk->connect;
}

int zkf_port(const zkf_server *zk)
{
    return zk->port;
}

pid_t zkf_pid(const zkf_server *zk)
{
    return zk->pid;
}

int zkf_stop(zkf_server *zk)
{
    if (zk->pid > 0) {
        kill(zk->pid, SIGKILL);
        waitpid(zk->pid, NULL, 0);
        zk->pid = 0;
    }
    return 0;
}

int zkf_restart(zkf_server *zk)
{
    if (zk->pid > 0)
        return -EBUSY;
    int err = 0;
    /* The port may sit in TIME_WAIT for a moment; the server retries bind
     * poorly, so retry the whole start. */
    for (int attempt = 0; attempt < 5; attempt++) {
        err = spawn(zk);
        if (err == 0)
            return 0;
        usleep(200 * 1000);
    }
    return err;
}

static void expire_watcher(zhandle_t *zh, int type, int state, const char *path, void *ctx)
{
    (void)zh;
    (void)type;
    (void)path;
    if (state == ZOO_CONNECTED_STATE)
        atomic_store((atomic_int *)ctx, 1);
    else if (state == ZOO_EXPIRED_SESSION_STATE)
        atomic_store((atomic_int *)ctx, -1);
}

/* One connection with the session's credentials: 1 when it attached to the
 * session (and was then closed, which closes the session unless the owner's
 * own reconnection kicked this connection off first), -1 when the server
 * answered that the session is expired, 0 when neither came in 5 s. */
static int attach_and_close(zkf_server *zk, const clientid_t *id)
{
    static atomic_int connected;
    atomic_store(&connected, 0);
    zhandle_t *zh = zookeeper_init(zk->connect, expire_watcher, 4000, id, &connected, 0);
    if (zh == NULL)
        return 0;
    for (int i = 0; i < 200 && atomic_load(&connected) == 0; i++)
        usleep(25 * 1000);
    int state = atomic_load(&connected);
    zookeeper_close(zh);
    return state;
}

int zkf_expire_session(zkf_server *zk, int64_t session_id, const char *passwd, int passwd_len)
{
    clientid_t id;
    memset(&id, 0, sizeof(id));
    id.client_id = session_id;
    if (passwd_len > (int)sizeof(id.passwd))
        passwd_len = (int)sizeof(id.passwd);
    memcpy(id.passwd, passwd, (size_t)passwd_len);
    zoo_set_debug_level(ZOO_LOG_LEVEL_ERROR);
    /* Attaching kicks the owner's connection off, and the owner reconnects
     * at once: under load its reconnection can kick this one off before
     * the close is sent, and the session lives on. So attach again until
     * the server says the session is expired. */
    for (int attempt = 0; attempt < 10; attempt++) {
        int state = attach_and_close(zk, &id);
        if (state == -1)
            return 0;
        if (state == 0)
            return -ETIMEDOUT;
        usleep(50 * 1000);
    }
    return -ETIMEDOUT;
}

static int rm_entry(const char *path, const struct stat *sb, int flag, struct FTW *ftw)
{
    (void)sb;
    (void)flag;
    (void)ftw;
    remove(path);
    return 0;
}

void zkf_destroy(zkf_server *zk)
{
    if (zk == NULL)
        return;
    zkf_stop(zk);
    track(zk, false);
    if (zk->dir[0] != '\0' && getenv("ZKF_KEEP_DATA") == NULL)
        nftw(zk->dir, rm_entry, 16, FTW_DEPTH | FTW_PHYS);
    free(zk);
}

static zkf_server *shared_server;
static pthread_once_t shared_once = PTHREAD_ONCE_INIT;

static void start_shared(void)
{
    if (zkf_start(&shared_server, NULL) != 0)
        shared_server = NULL;
}

zkf_server *zkf_shared(void)
{
    pthread_once(&shared_once, start_shared);
    return shared_server;
}

char *zkf_unique_namespace(const char *tag)
{
    static atomic_int counter;
    char *out = NULL;
    if (asprintf(&out, "t%d_%d_%s", (int)getpid(), atomic_fetch_add(&counter, 1) + 1,
                 tag ? tag : "ns") < 0)
        return NULL;
    return out;
}
