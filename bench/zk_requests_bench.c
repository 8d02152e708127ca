/*
 * ZooKeeper requests per fire, counted by the server (zk_packets_received
 * from "mntr"), for a steady job with monitorExecution, failover and
 * misfire on, a fire every second and short items:
 *   - one instance with 4 items (ElasticJob-Lite 2.1.5: 78 per fire);
 *   - two instances with 2 items each (ElasticJob: 58 per instance).
 * The instances are test instance processes (tests/integration/testnode.c:
 * $EJ_TESTNODE, else ../src/runtime/ej_testnode next to this program).
 * Each also reports its own count (requests sent, pings excluded): 2 per
 * fire for one instance (the transaction creating the running nodes, which
 * also gives the fencing token, and the one deleting them), and 2 per
 * instance for two: no instance watches the other's running nodes (6 while
 * they did; 3 and 7 while the token took an `exists` of its own).
 *
 * Usage: zk_requests_bench [fires]   (default 20)
 */
#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <limits.h>
#include <poll.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/prctl.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "zk_fixture.h"

static pid_t pids[4];
static int outs[4];
static int npids;

static int64_t now_ms(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_REALTIME, &ts);
    return (int64_t)ts.tv_sec * 1000 + ts.tv_nsec / 1000000;
}

static void kill_nodes(void)
{
    for (int i = 0; i < npids; i++)
        if (pids[i] > 0) {
            kill(pids[i], SIGKILL);
            waitpid(pids[i], NULL, 0);
            pids[i] = 0;
        }
}

static void on_signal(int sig)
{
    for (int i = 0; i < npids; i++)
        if (pids[i] > 0)
            kill(pids[i], SIGKILL);
    signal(sig, SIG_DFL);
    raise(sig);
}

static char testnode[PATH_MAX];

static void find_testnode(void)
{
    const char *env = getenv("EJ_TESTNODE");
    if (env) {
        snprintf(testnode, sizeof testnode, "%s", env);
        return;
    }
    char self[PATH_MAX - 64];
    ssize_t n = readlink("/proc/self/exe", self, sizeof self - 1);
    if (n < 0)
        n = 0;
    self[n] = '\0';
    char *slash = strrchr(self, '/');
    if (slash)
        *slash = '\0';
    snprintf(testnode, sizeof testnode, "%s/../src/runtime/ej_testnode", self);
}

/* Read one line from fd (bounded wait). */
static int read_line(int fd, char *buf, size_t len, int timeout_ms)
{
    size_t k = 0;
    int64_t deadline = now_ms() + timeout_ms;
    while (k + 1 < len) {
        struct pollfd p = {.fd = fd, .events = POLLIN};
        int left = (int)(deadline - now_ms());
        if (left <= 0 || poll(&p, 1, left) <= 0)
            return -1;
        char c;
        if (read(fd, &c, 1) != 1)
            return -1;
        if (c == '\n')
            break;
        buf[k++] = c;
    }
    buf[k] = '\0';
    return 0;
}

static int start_node(const char *zk, const char *ns, const char *ip, const char *log)
{
    int pfd[2];
    if (pipe(pfd) != 0)
        return -1;
    pid_t parent = getpid();
    pid_t pid = fork();
    if (pid == 0) {
        prctl(PR_SET_PDEATHSIG, SIGKILL);
        if (getppid() != parent)
            _exit(1);
        dup2(pfd[1], 1);
        close(pfd[0]);
        int null = open("/dev/null", O_WRONLY);
        if (null >= 0)
            dup2(null, 2);
        execl(testnode, testnode, "--zk", zk, "--ns", ns, "--job", "benchJob", "--log", log, "--ip",
              ip, "--count", "4", "--cron", "* * * * * ?", "--item-ms", "10", "--failover",
              "--session-ms", "10000", (char *)NULL);
        _exit(127);
    }
    close(pfd[1]);
    pids[npids] = pid;
    outs[npids] = pfd[0];
    npids++;
    char line[512];
    if (read_line(pfd[0], line, sizeof line, 30000) != 0 || strncmp(line, "READY", 5) != 0) {
        fprintf(stderr, "zk_requests_bench: %s did not start\n", testnode);
        return -1;
    }
    return npids - 1;
}

/* The node's own request count and fires (STATUS line). */
static int node_counts(int i, uint64_t *requests, uint64_t *fires)
{
    kill(pids[i], SIGUSR2);
    char line[1024];
    while (read_line(outs[i], line, sizeof line, 5000) == 0) {
        if (strncmp(line, "STATUS", 6) != 0)
            continue;
        const char *r = strstr(line, "requests=");
        const char *f = strstr(line, "fires=");
        if (!r || !f)
            return -1;
        *requests = strtoull(r + 9, NULL, 10);
        *fires = strtoull(f + 6, NULL, 10);
        return 0;
    }
    return -1;
}

static void measure(zkf_server *zk, int nodes, int fires)
{
    /* Let the job settle: registration, sharding, the first fires. */
    sleep(4);
    uint64_t r0[4], f0[4], r1[4], f1[4];
    /* Start just after a fire's requests are done. */
    int64_t t = now_ms();
    usleep((useconds_t)((1000 - t % 1000 + 500) % 1000) * 1000);
    for (int i = 0; i < nodes; i++)
        node_counts(i, &r0[i], &f0[i]);
    long long p0 = zkf_mntr_value(zk, "zk_packets_received");
    sleep((unsigned)fires);
    long long p1 = zkf_mntr_value(zk, "zk_packets_received");
    for (int i = 0; i < nodes; i++)
        node_counts(i, &r1[i], &f1[i]);
    uint64_t nf = f1[0] - f0[0];
    if (nf == 0)
        nf = 1;
    printf("%d instance(s), %d items each: %.1f requests per fire per instance (server count, "
           "pings included), %llu packets over %" PRIu64 " fires\n",
           nodes, 4 / nodes, (double)(p1 - p0) / (double)nf / nodes, p1 - p0, nf);
    for (int i = 0; i < nodes; i++)
        printf("  instance %d: %.1f requests per fire (its own count, pings excluded)\n", i,
               (double)(r1[i] - r0[i]) / (double)(f1[i] - f0[i] ? f1[i] - f0[i] : 1));
}

int main(int argc, char **argv)
{
    int fires = argc > 1 ? atoi(argv[1]) : 20;
    if (fires < 2)
        fires = 2;
    find_testnode();
    if (access(testnode, X_OK) != 0) {
        fprintf(stderr, "zk_requests_bench: no test instance program at %s (set EJ_TESTNODE)\n",
                testnode);
        return 1;
    }
    atexit(kill_nodes);
    signal(SIGINT, on_signal);
    signal(SIGTERM, on_signal);
    zkf_server *zk = NULL;
    zkf_opts zo = {.tick_ms = 500};
    if (zkf_start(&zk, &zo) != 0) {
        fprintf(stderr, "zk_requests_bench: cannot start ZooKeeper\n");
        return 1;
    }
    char log[256];
    snprintf(log, sizeof log, "/tmp/ejob-zkbench-%d.log", (int)getpid());
    printf("ZooKeeper requests per fire: monitorExecution, failover and misfire on, a fire "
           "every second, session timeout 10 s\n");
    printf("ElasticJob-Lite 2.1.5 (reference section 9): 78 for one instance with 4 items, "
           "58 per instance for two with 2 items each; ejob: 2 and 2 (2 and 6 while the members "
           "watched each other's running nodes; 3 and 7 before the fencing token came from "
           "the creating transaction)\n");
    if (start_node(zkf_connect_string(zk), "zkbench1", "127.0.9.1", log) < 0)
        return 1;
    measure(zk, 1, fires);
    kill_nodes();
    npids = 0;
    if (start_node(zkf_connect_string(zk), "zkbench2", "127.0.9.1", log) < 0 ||
        start_node(zkf_connect_string(zk), "zkbench2", "127.0.9.2", log) < 0)
        return 1;
    measure(zk, 2, fires);
    kill_nodes();
    unlink(log);
    zkf_destroy(zk);
    return 0;
}
