/*
 * Shared harness of the coordination integration tests, #included by each
 * coord_*_itest.c (not a test of its own): test instances as separate
 * processes (testnode), the execution log checker, ZooKeeper helpers.
 *
 * Every process started is killed by pid at exit, also when a check fails
 * (atexit) or the test is killed (signal handler; PR_SET_PDEATHSIG in the
 * children covers SIGKILL of the test).
 */
/* Each test uses part of the harness. */
#pragma GCC diagnostic ignored "-Wunused-function"

#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <poll.h>
#include <signal.h>
#include <stdarg.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/prctl.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "common/util.h"
#include "ejob/ejob.h"
#include "zk_fixture.h"
#include "itest_check.h"

#ifndef EJ_TESTNODE_PATH
#error "EJ_TESTNODE_PATH must name the testnode executable"
#endif

#define MAX_NODES 32

struct node {
    pid_t pid;
    int out_fd;
    char id[256];
    char ip[64];
    int64_t session;
    char passwd[EJ_REG_PASSWD_LEN];
    bool alive;
    int64_t killed_at; /* epoch ms of a SIGKILL, 0 otherwise */
    char buf[4096];
    size_t blen;
};

static struct node nodes[MAX_NODES];
static int nnodes;

static void say(const char *fmt, ...) EJ_PRINTF(1, 2);
static void say(const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    fprintf(stderr, "[%" PRId64 "] ", ej__now_ms() % 100000);
    vfprintf(stderr, fmt, ap);
    fprintf(stderr, "\n");
    va_end(ap);
}

static void kill_all_nodes(void)
{
    for (int i = 0; i < nnodes; i++)
        if (nodes[i].pid > 0 && nodes[i].alive)
            kill(nodes[i].pid, SIGKILL);
    for (int i = 0; i < nnodes; i++)
        if (nodes[i].pid > 0 && nodes[i].alive) {
            waitpid(nodes[i].pid, NULL, 0);
            nodes[i].alive = false;
        }
}

static void on_fatal(int sig)
{
    for (int i = 0; i < nnodes; i++)
        if (nodes[i].pid > 0 && nodes[i].alive)
            kill(nodes[i].pid, SIGKILL);
    signal(sig, SIG_DFL);
    raise(sig);
}

static void harness_init(void)
{
    static bool done;
    if (done)
        return;
    done = true;
    atexit(kill_all_nodes);
    signal(SIGTERM, on_fatal);
    signal(SIGINT, on_fatal);
    signal(SIGABRT, on_fatal);
    signal(SIGSEGV, on_fatal);
    signal(SIGPIPE, SIG_IGN);
    setvbuf(stderr, NULL, _IOLBF, 0);
}

/* Read a line from a node's stdout (bounded). Returns true with line. */
static bool node_read_line(struct node *n, char *line, size_t len, int timeout_ms)
{
    int64_t deadline = ej__mono_ms() + timeout_ms;
    for (;;) {
        char *nl = memchr(n->buf, '\n', n->blen);
        if (nl) {
            size_t l = (size_t)(nl - n->buf);
            size_t c = l < len - 1 ? l : len - 1;
            memcpy(line, n->buf, c);
            line[c] = '\0';
            memmove(n->buf, nl + 1, n->blen - l - 1);
            n->blen -= l + 1;
            return true;
        }
        int left = (int)(deadline - ej__mono_ms());
        if (left <= 0)
            return false;
        struct pollfd p = {.fd = n->out_fd, .events = POLLIN};
        if (poll(&p, 1, left) <= 0)
            continue;
        ssize_t r = read(n->out_fd, n->buf + n->blen, sizeof n->buf - n->blen - 1);
        if (r <= 0)
            return false;
        n->blen += (size_t)r;
    }
}

static void parse_session(struct node *n, const char *line)
{
    char what[32], id[256], sid[32], pw[64];
    if (sscanf(line, "%31s %255s %31s %63s", what, id, sid, pw) != 4)
        return;
    snprintf(n->id, sizeof n->id, "%s", id);
    n->session = (int64_t)strtoull(sid, NULL, 16);
    for (int i = 0; i < EJ_REG_PASSWD_LEN && pw[2 * i]; i++) {
        char h[3] = {pw[2 * i], pw[2 * i + 1], 0};
        n->passwd[i] = (char)strtoul(h, NULL, 16);
    }
}

/*
 * Start a testnode with the common options and extra ones (NULL-terminated
 * list). Waits for READY (20 s). Returns the node index, or -1.
 */
static int node_start(const char *zk, const char *ns, const char *job, const char *log,
                      const char *ip, ...)
{
    harness_init();
    REQUIRE(nnodes < MAX_NODES, "too many nodes");
    const char *argv[64];
    int a = 0;
    argv[a++] = EJ_TESTNODE_PATH;
    argv[a++] = "--zk";
    argv[a++] = zk;
    argv[a++] = "--ns";
    argv[a++] = ns;
    argv[a++] = "--job";
    argv[a++] = job;
    argv[a++] = "--log";
    argv[a++] = log;
    argv[a++] = "--ip";
    argv[a++] = ip;
    va_list ap;
    va_start(ap, ip);
    const char *x;
    while ((x = va_arg(ap, const char *)) != NULL && a < 62)
        argv[a++] = x;
    va_end(ap);
    argv[a] = NULL;
    int pfd[2];
    REQUIRE(pipe2(pfd, O_CLOEXEC) == 0, "pipe");
    pid_t parent = getpid();
    pid_t pid = fork();
    REQUIRE(pid >= 0, "fork");
    if (pid == 0) {
        prctl(PR_SET_PDEATHSIG, SIGKILL);
        if (getppid() != parent)
            _exit(1);
        dup2(pfd[1], 1);
        execv(argv[0], (char *const *)argv);
        _exit(127);
    }
    close(pfd[1]);
    struct node *n = &nodes[nnodes];
    memset(n, 0, sizeof *n);
    n->pid = pid;
    n->out_fd = pfd[0];
    n->alive = true;
    snprintf(n->ip, sizeof n->ip, "%s", ip);
    int idx = nnodes++;
    char line[512];
    if (!node_read_line(n, line, sizeof line, 20000) || strncmp(line, "READY ", 6) != 0) {
        say("node %d (%s) did not start", idx, ip);
        return -1;
    }
    parse_session(n, line);
    say("node %d started: %s pid %d session %" PRIx64, idx, n->id, (int)pid, (uint64_t)n->session);
    return idx;
}

static void node_kill9(int i)
{
    if (!nodes[i].alive)
        return;
    kill(nodes[i].pid, SIGKILL);
    nodes[i].killed_at = ej__now_ms();
    waitpid(nodes[i].pid, NULL, 0);
    nodes[i].alive = false;
    say("node %d (%s) killed -9", i, nodes[i].id);
}

/* SIGTERM and wait (bounded), then SIGKILL. */
static void node_stop(int i)
{
    if (!nodes[i].alive)
        return;
    kill(nodes[i].pid, SIGTERM);
    for (int k = 0; k < 400; k++) {
        if (waitpid(nodes[i].pid, NULL, WNOHANG) == nodes[i].pid) {
            nodes[i].alive = false;
            return;
        }
        ej__sleep_ms(25);
    }
    node_kill9(i);
}

/* Refresh the node's session (after a re-registration). */
static bool node_session(int i)
{
    kill(nodes[i].pid, SIGUSR1);
    char line[512];
    while (node_read_line(&nodes[i], line, sizeof line, 5000)) {
        if (strncmp(line, "SESSION ", 8) == 0) {
            parse_session(&nodes[i], line);
            return true;
        }
    }
    return false;
}

/* The node's "STATUS ..." line (ej_job_status), or false. */
static bool node_status(int i, char *line, size_t len)
{
    kill(nodes[i].pid, SIGUSR2);
    while (node_read_line(&nodes[i], line, len, 5000))
        if (strncmp(line, "STATUS ", 7) == 0)
            return true;
    return false;
}

/* ------------------------------------------------------------------------ */
/* Execution log                                                              */

struct run {
    int64_t start, end; /* end INT64_MAX while open */
    char inst[128];
    int item;
    char src[20];
    char status[32];
    int64_t token;
    int64_t woke;
};

struct xlog {
    struct run *runs;
    size_t n;
    int64_t *once_before, *once_after; /* times */
    size_t nbefore, nafter;
};

static void xlog_free(struct xlog *l)
{
    free(l->runs);
    free(l->once_before);
    free(l->once_after);
    memset(l, 0, sizeof *l);
}

static void xlog_read(const char *path, struct xlog *l)
{
    memset(l, 0, sizeof *l);
    FILE *f = fopen(path, "r");
    if (f == NULL)
        return;
    char line[1024];
    size_t cap = 0, cb = 0, ca = 0;
    while (fgets(line, sizeof line, f)) {
        char kind[32], inst[128], src[20], st[32] = "";
        int64_t t;
        int item;
        if (sscanf(line, "ONCE_BEFORE %" SCNd64, &t) == 1) {
            if (l->nbefore == cb) {
                cb = cb ? cb * 2 : 16;
                l->once_before = realloc(l->once_before, cb * sizeof(int64_t));
            }
            l->once_before[l->nbefore++] = t;
            continue;
        }
        if (sscanf(line, "ONCE_AFTER %" SCNd64, &t) == 1) {
            if (l->nafter == ca) {
                ca = ca ? ca * 2 : 16;
                l->once_after = realloc(l->once_after, ca * sizeof(int64_t));
            }
            l->once_after[l->nafter++] = t;
            continue;
        }
        if (sscanf(line, "%31s %" SCNd64 " %127s %d %19s %31s", kind, &t, inst, &item, src, st) < 5)
            continue;
        if (strcmp(kind, "START") == 0) {
            if (l->n == cap) {
                cap = cap ? cap * 2 : 64;
                l->runs = realloc(l->runs, cap * sizeof *l->runs);
            }
            struct run *r = &l->runs[l->n++];
            memset(r, 0, sizeof *r);
            r->start = t;
            r->end = INT64_MAX;
            snprintf(r->inst, sizeof r->inst, "%s", inst);
            r->item = item;
            snprintf(r->src, sizeof r->src, "%s", src);
            r->token = strtoll(st, NULL, 10);
        } else if (strcmp(kind, "END") == 0) {
            for (size_t i = l->n; i-- > 0;) {
                struct run *r = &l->runs[i];
                if (r->end == INT64_MAX && r->item == item && strcmp(r->inst, inst) == 0) {
                    r->end = t;
                    snprintf(r->status, sizeof r->status, "%s", st);
                    const char *w = strstr(line, "woke=");
                    if (w)
                        r->woke = strtoll(w + 5, NULL, 10);
                    break;
                }
            }
        }
    }
    fclose(f);
}

/* The end of an open run: the kill time of its instance, else "now". */
static int64_t run_end(const struct run *r)
{
    if (r->end != INT64_MAX)
        return r->end;
    for (int i = 0; i < nnodes; i++)
        if (strcmp(nodes[i].id, r->inst) == 0 && nodes[i].killed_at)
            return nodes[i].killed_at;
    return INT64_MAX;
}

/* No item ever ran on two instances at overlapping times. Returns the
 * number of overlaps (each reported). */
static int check_no_overlap(const struct xlog *l)
{
    int bad = 0;
    for (size_t i = 0; i < l->n; i++)
        for (size_t j = i + 1; j < l->n; j++) {
            const struct run *a = &l->runs[i], *b = &l->runs[j];
            if (a->item != b->item)
                continue;
            if (a->start < run_end(b) && b->start < run_end(a)) {
                say("OVERLAP item %d: %s [%" PRId64 ", %" PRId64 "] %s and %s [%" PRId64
                    ", %" PRId64 "] %s",
                    a->item, a->inst, a->start, run_end(a), a->src, b->inst, b->start, run_end(b),
                    b->src);
                bad++;
            }
        }
    return bad;
}

/* Runs of item that started in [from, to). */
static int runs_of(const struct xlog *l, int item, int64_t from, int64_t to, const char *src)
{
    int k = 0;
    for (size_t i = 0; i < l->n; i++)
        if (l->runs[i].item == item && l->runs[i].start >= from && l->runs[i].start < to &&
            (src == NULL || strcmp(l->runs[i].src, src) == 0))
            k++;
    return k;
}

/* Says each FAILOVER run of item that started at or after killed, and how
 * long after the kill. */
static void say_failovers(const struct xlog *l, int item, int64_t killed)
{
    for (size_t i = 0; i < l->n; i++) {
        const struct run *r = &l->runs[i];
        if (r->item == item && strcmp(r->src, "FAILOVER") == 0 && r->start >= killed)
            say("item %d failed over to %s %" PRId64 " ms after the kill", r->item, r->inst,
                r->start - killed);
    }
}

/* Every item 0..count-1 started at least once in [from, to). */
static int check_all_ran(const struct xlog *l, int count, int64_t from, int64_t to)
{
    int missing = 0;
    for (int item = 0; item < count; item++)
        if (runs_of(l, item, from, to, NULL) == 0) {
            say("item %d did not run between %" PRId64 " and %" PRId64, item, from % 100000,
                to % 100000);
            missing++;
        }
    return missing;
}

/* ------------------------------------------------------------------------ */
/* ZooKeeper helpers                                                          */

static ej_registry *zk_connect(const char *servers, const char *ns)
{
    ej_registry *reg = NULL;
    struct ej_registry_opts o = {.servers = servers,
                                 .namespace_ = ns,
                                 .session_timeout_ms = 4000,
                                 .base_sleep_ms = 100,
                                 .max_sleep_ms = 500};
    REQUIRE(ej_registry_create(&reg, &o) == 0, "connect %s: %s", servers, ej_registry_errmsg(NULL));
    return reg;
}

/* Data of a node, or NULL. Caller frees. */
static char *zk_get(ej_registry *reg, const char *fmt, ...) EJ_PRINTF(2, 3);
static char *zk_get(ej_registry *reg, const char *fmt, ...)
{
    char path[1024];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(path, sizeof path, fmt, ap);
    va_end(ap);
    char *d = NULL;
    if (ej_registry_get(reg, path, &d, NULL, NULL) != 0)
        return NULL;
    return d;
}

static bool zk_exists(ej_registry *reg, const char *fmt, ...) EJ_PRINTF(2, 3);
static bool zk_exists(ej_registry *reg, const char *fmt, ...)
{
    char path[1024];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(path, sizeof path, fmt, ap);
    va_end(ap);
    bool ex = false;
    ej_registry_exists(reg, path, &ex, NULL);
    return ex;
}

static size_t zk_children(ej_registry *reg, char ***names, const char *fmt, ...) EJ_PRINTF(3, 4);
static size_t zk_children(ej_registry *reg, char ***names, const char *fmt, ...)
{
    char path[1024];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(path, sizeof path, fmt, ap);
    va_end(ap);
    size_t n = 0;
    *names = NULL;
    if (ej_registry_children(reg, path, EJ_REG_SORT_ASC, names, &n) != 0)
        return 0;
    return n;
}

/* Owners of items 0..count-1 (owners[i] caller-freed, NULL when absent). */
static void zk_owners(ej_registry *reg, const char *job, int count, char **owners)
{
    for (int i = 0; i < count; i++)
        owners[i] = zk_get(reg, "/%s/sharding/%d/instance", job, i);
}

static int count_owned(char **owners, int count, const char *id)
{
    int k = 0;
    for (int i = 0; i < count; i++)
        if (owners[i] && strcmp(owners[i], id) == 0)
            k++;
    return k;
}

static void free_owners(char **owners, int count)
{
    for (int i = 0; i < count; i++) {
        free(owners[i]);
        owners[i] = NULL;
    }
}

/* Wait until the sharding flags are gone and every item 0..count-1 is
 * owned by one of the live nodes. */
static bool wait_sharded(ej_registry *reg, const char *job, int count, int timeout_ms)
{
    int64_t deadline = ej__mono_ms() + timeout_ms;
    char **owners = calloc((size_t)count, sizeof *owners);
    bool ok = false;
    while (ej__mono_ms() < deadline && !ok) {
        ok = !zk_exists(reg, "/%s/leader/sharding/necessary", job) &&
             !zk_exists(reg, "/%s/leader/sharding/processing", job);
        zk_owners(reg, job, count, owners);
        for (int i = 0; i < count && ok; i++) {
            bool live = false;
            for (int k = 0; k < nnodes && owners[i]; k++)
                if (nodes[k].alive && strcmp(nodes[k].id, owners[i]) == 0)
                    live = true;
            ok = live;
        }
        free_owners(owners, count);
        if (!ok)
            ej__sleep_ms(100);
    }
    if (!ok) {
        /* Say why, for the log of a failed test. */
        say("not sharded: necessary %d, processing %d, leader %s",
            zk_exists(reg, "/%s/leader/sharding/necessary", job),
            zk_exists(reg, "/%s/leader/sharding/processing", job),
            zk_exists(reg, "/%s/leader/election/instance", job) ? "present" : "none");
        zk_owners(reg, job, count, owners);
        for (int i = 0; i < count && i < 16; i++)
            say("  item %d: %s", i, owners[i] ? owners[i] : "(none)");
        free_owners(owners, count);
    }
    free(owners);
    return ok;
}

/* When instance id's node of job is seen gone (polled), or 0 within
 * timeout. */
static int64_t wait_gone(ej_registry *reg, const char *job, const char *id, int timeout_ms)
{
    int64_t end = ej__now_ms() + timeout_ms;
    while (ej__now_ms() < end) {
        if (!zk_exists(reg, "/%s/instances/%s", job, id))
            return ej__now_ms();
        ej__sleep_ms(20);
    }
    return 0;
}

static char *leader_of(ej_registry *reg, const char *job)
{
    return zk_get(reg, "/%s/leader/election/instance", job);
}

static int node_index(const char *id)
{
    for (int i = 0; i < nnodes; i++)
        if (id && strcmp(nodes[i].id, id) == 0)
            return i;
    return -1;
}

static char *tmp_log(const char *tag)
{
    char *p = ej__asprintf("%s/ejob-%s-%d.log", getenv("TMPDIR") ? getenv("TMPDIR") : "/tmp", tag,
                           (int)getpid());
    unlink(p);
    return p;
}

/* ------------------------------------------------------------------------ */
/* Fire times and rounds                                                      */

/* The first multiple of period after t (epoch ms), plus offset. */
static int64_t next_multiple(int64_t t, int64_t period, int64_t offset)
{
    return (t / period + 1) * period + offset;
}

static void sleep_until_wall(int64_t wall_ms)
{
    int64_t d = wall_ms - ej__now_ms();
    if (d > 0)
        ej__sleep_ms(d);
}

/* NOTRUN lines (testnode.c) of reason logged at or after from; with
 * item >= 0 only those naming item whose range holds fire time t. */
static int notrun_lines(const char *log, const char *reason, int64_t from, int item, int64_t t)
{
    FILE *f = fopen(log, "r");
    if (f == NULL)
        return 0;
    char line[1024];
    int k = 0;
    while (fgets(line, sizeof line, f)) {
        char inst[128], r[32], items[256];
        long long at = 0, first = 0, last = 0;
        unsigned count = 0;
        if (sscanf(line, "NOTRUN %lld %127s %31s %u %lld %lld %255s", &at, inst, r, &count, &first,
                   &last, items) != 7 ||
            strcmp(r, reason) != 0 || at < from)
            continue;
        if (item < 0) {
            say("NOTRUN %s %s at +%lld ms: %u fire time(s) from %lld to %lld %s", inst, r,
                at - from, count, first, last, items);
            k++;
            continue;
        }
        if (t < first || t > last)
            continue;
        char want[16];
        snprintf(want, sizeof want, "%d", item);
        for (char *p = strtok(items, "[],"); p; p = strtok(NULL, "[],")) /* "[0,3]" */
            if (strcmp(p, want) == 0)
                k++;
    }
    fclose(f);
    return k;
}

/* Runs round(zk, r, user) for r = 1..N: N from --rounds N, else the
 * environment's EJ_TAKEOVER_ROUNDS, else dflt. Returns main's exit code. */
static int run_rounds(int argc, char **argv, int dflt, const char *name,
                      int (*round)(zkf_server *zk, int r, void *user), void *user)
{
    harness_init();
    int rounds = getenv("EJ_TAKEOVER_ROUNDS") ? atoi(getenv("EJ_TAKEOVER_ROUNDS")) : dflt;
    if (argc == 3 && strcmp(argv[1], "--rounds") == 0)
        rounds = atoi(argv[2]);
    if (rounds < 1)
        rounds = 1;
    zkf_server *zk = zkf_shared();
    REQUIRE(zk != NULL, "zookeeper");
    int bad = 0;
    for (int r = 1; r <= rounds; r++) {
        int rc = round(zk, r, user);
        bad += rc != 0;
        say("round %d of %d: %s", r, rounds, rc ? "FAILED" : "passed");
    }
    if (failures) {
        fprintf(stderr, "%d check(s) failed in %d of %d round(s)\n", failures, bad, rounds);
        return 1;
    }
    fprintf(stderr, "%s: all checks passed in %d round(s)\n", name, rounds);
    return 0;
}

/* One round of a test that runs several: its own namespace, log and
 * client; nodes are started afresh (the previous round's are stopped). */
struct round_env {
    char *ns, *log;
    const char *servers;
    ej_registry *reg;
    int failures_before;
};

static void round_begin(zkf_server *zk, const char *tag, int round, struct round_env *e)
{
    char t[64];
    snprintf(t, sizeof t, "%s%d", tag, round);
    e->servers = zkf_connect_string(zk);
    e->ns = zkf_unique_namespace(t);
    e->log = tmp_log(t);
    e->reg = zk_connect(e->servers, e->ns);
    e->failures_before = failures;
    nnodes = 0;
}

/* Stops the round's nodes; keeps the log of a failed round. Returns 0
 * when the round's checks passed, else 1. */
static int round_end(struct round_env *e, int round)
{
    for (int i = 0; i < nnodes; i++)
        node_stop(i);
    ej_registry_destroy(e->reg);
    bool ok = failures == e->failures_before;
    if (ok)
        unlink(e->log);
    else
        say("round %d failed: log kept in %s", round, e->log);
    free(e->log);
    free(e->ns);
    return ok ? 0 : 1;
}
