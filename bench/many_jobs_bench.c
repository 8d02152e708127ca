/*
 * Many jobs in one process: N one-item jobs firing every second
 * (`0/1 * * * * ?`) against a private ZooKeeper, as C jobs (this program
 * re-executed as the job process) and as script jobs (`ejob run` with a
 * generated YAML, script /bin/true). For each it prints:
 *
 *   - start-up: process start to every job registered and scheduled;
 *   - fires expected (N x window seconds) and fires run in the steady-state
 *     window, normal and MISFIRE re-runs;
 *   - lines of the process's log about fires that did not run (misfire,
 *     missed, skipped, dropped, queue full), grouped by message;
 *   - lateness: item start minus the last whole second before it (the fire
 *     time of a one-second cron when the run is less than a second late),
 *     p50/p99/max;
 *   - CPU% of the process (of one core), ZooKeeper requests a second and
 *     per run (server-side zk_packets_received from mntr), RSS, threads;
 *   - SIGTERM to exit under that load.
 * Then, with idle jobs (a cron that does not fire): start-up, RSS, threads
 * and the server's watches (wchs) for --idle-jobs jobs, and the SIGTERM time
 * for --term-jobs jobs. The idle jobs of a run live in a namespace named for
 * their number: with --idle-jobs equal to --term-jobs the second run starts
 * the jobs the first left in ZooKeeper (a restart).
 *
 * Usage: many_jobs_bench [--jobs N] [--window S] [--mode c|script|both]
 *                        [--idle-jobs N] [--term-jobs N] [--ejob PATH]
 * Defaults: 1000 jobs, 60 s, both, no idle run (--idle-jobs 10000 takes
 * about a minute on 2 cores), 1000 for SIGTERM. --term-jobs 0 skips that. --footprint first prints
 * what the resident memory of one idle C job is made of (smaps). --keep-logs
 * keeps the job processes' logs (the script run writes about 100 MB).
 */
#include <errno.h>
#include <fcntl.h>
#include <getopt.h>
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

#include "ejob/ejob.h"
#include "ejob/jobs.h"
#include "bench_child.h"
#include "zk_fixture.h"

#define FIRE_CRON "0/1 * * * * ?"
#define IDLE_CRON "0 0 0 1 1 ? 2099"




static int64_t mono_ms(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (int64_t)ts.tv_sec * 1000 + ts.tv_nsec / 1000000;
}

static int64_t epoch_ms(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_REALTIME, &ts);
    return (int64_t)ts.tv_sec * 1000 + ts.tv_nsec / 1000000;
}

static void sleep_ms(int64_t ms)
{
    struct timespec ts = {.tv_sec = ms / 1000, .tv_nsec = (ms % 1000) * 1000000};
    while (nanosleep(&ts, &ts) != 0 && errno == EINTR) {
    }
}

/* ------------------------------------------------------------------ child */

static int run_fd = -1;
static volatile sig_atomic_t child_stop;

static void child_on_term(int sig)
{
    (void)sig;
    child_stop = 1;
}

/* One line per item start: "S <job> <epoch_ms> <source>". */
static int child_item(const ej_shard_context *ctx, void *user)
{
    char line[160];
    int n = snprintf(line, sizeof line, "S %s %" PRId64 " %s\n", ctx->job_name, epoch_ms(),
                     ej_execution_source_name(ctx->execution_source));
    (void)user;
    if (n > 0 && write(run_fd, line, (size_t)n) < 0)
        return -1;
    return 0;
}

/* The C-job process: N jobs in one process, READY on stdout when all are
 * started, clean shutdown on SIGTERM. */
static int child_main(const char *zk, const char *ns, int njobs, const char *cron,
                      const char *runlog)
{
    run_fd = open(runlog, O_WRONLY | O_CREAT | O_APPEND | O_CLOEXEC, 0644);
    if (run_fd < 0) {
        perror(runlog);
        return 1;
    }
    struct sigaction sa = {.sa_handler = child_on_term};
    sigaction(SIGTERM, &sa, NULL);
    ej_registry *reg = NULL;
    struct ej_registry_opts ro = {.servers = zk,
                                  .namespace_ = ns,
                                  .session_timeout_ms = 15000,
                                  .connection_timeout_ms = 15000};
    if (ej_registry_create(&reg, &ro) != 0) {
        fprintf(stderr, "many_jobs_bench: registry: %s\n", ej_registry_errmsg(NULL));
        return 1;
    }
    struct ej_job_def def = {.type = EJ_JOB_TYPE_SIMPLE, .simple = child_item};
    struct ej_job_opts jo = {.def = &def, .ip = "127.0.9.1"};
    ej_job **jobs = calloc((size_t)njobs, sizeof *jobs);
    if (jobs == NULL)
        return 1;
    for (int j = 0; j < njobs; j++) {
        char name[32];
        snprintf(name, sizeof name, "j%d", j);
        struct ej_job_config cfg;
        ej_job_config_init(&cfg);
        ej_job_config_set_str(&cfg.job_name, name);
        ej_job_config_set_str(&cfg.cron, cron);
        cfg.sharding_total_count = 1;
        cfg.overwrite = true;
        cfg.job_type = EJ_JOB_TYPE_SIMPLE;
        int rc = ej_job_create(reg, &cfg, &jo, &jobs[j]);
        ej_job_config_fini(&cfg);
        if (rc != 0) {
            fprintf(stderr, "many_jobs_bench: job %s: %s\n", name, ej_strerror(rc));
            return 1;
        }
    }
    /* All at once: their ZooKeeper requests pipelined (ejob/jobs.h). */
    int rc = ej_jobs_start(jobs, (size_t)njobs, NULL);
    if (rc != 0) {
        fprintf(stderr, "many_jobs_bench: start: %s\n", ej_strerror(rc));
        return 1;
    }
    printf("READY\n");
    fflush(stdout);
    while (!child_stop)
        sleep_ms(20);
    ej_jobs_destroy(jobs, (size_t)njobs);
    free(jobs);
    ej_registry_destroy(reg);
    return 0;
}

/* ------------------------------------------------------------ measuring */

struct opts {
    int jobs, window_s, idle_jobs, term_jobs;
    bool keep_logs, footprint;
    const char *mode;
    char ejob[PATH_MAX];
    char self[PATH_MAX];
};

static long long proc_cpu_ticks(pid_t pid)
{
    char path[64], buf[1024];
    snprintf(path, sizeof path, "/proc/%d/stat", (int)pid);
    FILE *f = fopen(path, "r");
    if (f == NULL)
        return -1;
    size_t n = fread(buf, 1, sizeof buf - 1, f);
    fclose(f);
    buf[n] = '\0';
    char *p = strrchr(buf, ')');
    if (p == NULL)
        return -1;
    unsigned long long ut = 0, st = 0;
    /* after ")": state(3) ... utime is field 14, stime 15 */
    if (sscanf(p + 2, "%*c %*d %*d %*d %*d %*d %*u %*u %*u %*u %*u %llu %llu", &ut, &st) != 2)
        return -1;
    return (long long)(ut + st);
}

static void proc_status(pid_t pid, long *rss_kb, long *threads)
{
    char path[64];
    snprintf(path, sizeof path, "/proc/%d/status", (int)pid);
    FILE *f = fopen(path, "r");
    *rss_kb = *threads = -1;
    if (f == NULL)
        return;
    char line[256];
    while (fgets(line, sizeof line, f)) {
        if (strncmp(line, "VmRSS:", 6) == 0)
            *rss_kb = strtol(line + 6, NULL, 10);
        else if (strncmp(line, "Threads:", 8) == 0)
            *threads = strtol(line + 8, NULL, 10);
    }
    fclose(f);
}

/* Total watches from "wchs" ("... Total watches:N"), or -1. */
static long long server_watches(const zkf_server *zk)
{
    char *r = zkf_four_letter(zk, "wchs");
    long long v = -1;
    const char *p = r ? strstr(r, "Total watches:") : NULL;
    if (p)
        v = strtoll(p + 14, NULL, 10);
    free(r);
    return v;
}

/* Starts the process of one run; its stdout (C mode) comes back on *out_fd. */
static pid_t spawn(const struct opts *o, bool script, const zkf_server *zk, const char *ns,
                   int njobs, const char *cron, const char *runlog, const char *yaml,
                   const char *errlog, int *out_fd)
{
    int pfd[2];
    if (pipe(pfd) != 0)
        return -1;
    char n[16];
    snprintf(n, sizeof n, "%d", njobs);
    pid_t parent = getpid();
    pid_t pid = fork();
    if (pid == 0) {
        prctl(PR_SET_PDEATHSIG, SIGKILL);
        if (getppid() != parent)
            _exit(1);
        dup2(pfd[1], 1);
        close(pfd[0]);
        int err = open(errlog, O_WRONLY | O_CREAT | O_TRUNC, 0644);
        if (err >= 0)
            dup2(err, 2);
        if (script) {
            setenv("EJOB_IP", "127.0.9.2", 1);
            execl(o->ejob, o->ejob, "run", "-c", yaml, (char *)NULL);
        } else {
            execl(o->self, o->self, "--child", zkf_connect_string(zk), ns, n, cron, runlog,
                  (char *)NULL);
        }
        _exit(127);
    }
    close(pfd[1]);
    *out_fd = pfd[0];
    return pid;
}

/* Waits for a line starting with `what` on fd (C mode) or in file errlog
 * (script mode). Returns 0 or -1 after timeout_ms or when the child died. */
static int wait_ready(int fd, const char *errlog, const char *what, int64_t timeout_ms)
{
    int64_t end = mono_ms() + timeout_ms;
    char buf[4096];
    size_t k = 0;
    long off = 0;
    while (mono_ms() < end) {
        if (waitpid(child, NULL, WNOHANG) == child) {
            child = 0;
            return -1;
        }
        if (errlog == NULL) {
            struct pollfd p = {.fd = fd, .events = POLLIN};
            if (poll(&p, 1, 200) <= 0)
                continue;
            char c;
            if (read(fd, &c, 1) != 1)
                return -1;
            if (c != '\n') {
                if (k + 1 < sizeof buf)
                    buf[k++] = c;
                continue;
            }
            buf[k] = '\0';
            k = 0;
            if (strncmp(buf, what, strlen(what)) == 0)
                return 0;
            continue;
        }
        FILE *f = fopen(errlog, "r");
        if (f) {
            fseek(f, off, SEEK_SET);
            while (fgets(buf, sizeof buf, f)) {
                if (buf[strlen(buf) - 1] != '\n')
                    break;
                off = ftell(f);
                if (strstr(buf, what)) {
                    fclose(f);
                    return 0;
                }
            }
            fclose(f);
        }
        sleep_ms(100);
    }
    return -1;
}

/* SIGTERM to exit, ms (-1: did not exit within 120 s, killed). */
static int64_t term_child(void)
{
    int64_t t0 = mono_ms();
    kill(child, SIGTERM);
    while (mono_ms() - t0 < 120000) {
        if (waitpid(child, NULL, WNOHANG) == child) {
            child = 0;
            return mono_ms() - t0;
        }
        sleep_ms(5);
    }
    kill_child();
    return -1;
}

static int cmp_i64(const void *a, const void *b)
{
    int64_t x = *(const int64_t *)a, y = *(const int64_t *)b;
    return x < y ? -1 : x > y;
}

/* "2026-11-22T00:41:08.031Z" at the start of s, as epoch ms; -1 if not. */
static int64_t parse_iso_ms(const char *s)
{
    struct tm tm = {0};
    int ms = 0;
    if (sscanf(s, "%4d-%2d-%2dT%2d:%2d:%2d.%3dZ", &tm.tm_year, &tm.tm_mon, &tm.tm_mday, &tm.tm_hour,
               &tm.tm_min, &tm.tm_sec, &ms) != 7)
        return -1;
    tm.tm_year -= 1900;
    tm.tm_mon -= 1;
    return (int64_t)timegm(&tm) * 1000 + ms;
}

struct runs {
    int64_t *late; /* lateness of normal runs in the window */
    size_t nlate, cap;
    long normal, misfire, other, before, after;
};

static void runs_add(struct runs *r, int64_t ms, const char *source, int64_t w0, int64_t w1)
{
    if (ms < w0) {
        r->before++;
        return;
    }
    if (ms >= w1) {
        r->after++;
        return;
    }
    if (strcmp(source, "NORMAL_TRIGGER") == 0) {
        r->normal++;
        if (r->nlate == r->cap) {
            r->cap = r->cap ? 2 * r->cap : 4096;
            r->late = realloc(r->late, r->cap * sizeof *r->late);
            if (r->late == NULL)
                abort();
        }
        r->late[r->nlate++] = ms % 1000;
    } else if (strcmp(source, "MISFIRE") == 0) {
        r->misfire++;
    } else {
        r->other++;
    }
}

/* Runs from the C child's run log ("S job ms source"). */
static void read_c_runs(const char *runlog, struct runs *r, int64_t w0, int64_t w1)
{
    FILE *f = fopen(runlog, "r");
    if (f == NULL)
        return;
    char line[256], job[64], src[32];
    long long ms;
    while (fgets(line, sizeof line, f))
        if (sscanf(line, "S %63s %lld %31s", job, &ms, src) == 3)
            runs_add(r, ms, src, w0, w1);
    fclose(f);
}

/* Runs from the daemon log, one line per item run at the default level:
 * "<ts> info  [event] execution ... source=X ...: succeeded in N ms" (or
 * "failed in N ms"). The run started at ts - N: the line is written when
 * the event bus delivers the end, so a busy daemon makes the start look
 * later, never earlier. */
static void read_script_runs(const char *errlog, struct runs *r, int64_t w0, int64_t w1)
{
    FILE *f = fopen(errlog, "r");
    if (f == NULL)
        return;
    char line[2048];
    while (fgets(line, sizeof line, f)) {
        size_t n = strlen(line);
        if (n < 10 || strstr(line, "[event] execution ") == NULL)
            continue;
        const char *end = strstr(line, ": succeeded in ");
        if (end == NULL)
            end = strstr(line, ": failed in ");
        if (end == NULL)
            continue;
        long long took = 0;
        if (sscanf(strstr(end, " in ") + 4, "%lld ms", &took) != 1)
            continue;
        const char *s = strstr(line, " source=");
        char src[32] = "";
        if (s)
            sscanf(s + 8, "%31s", src);
        runs_add(r, parse_iso_ms(line) - took, src, w0, w1);
    }
    fclose(f);
}

/* Log lines about fires that did not run, grouped by their text with
 * digits, timestamps and job names taken out. Prints the groups. */
static void print_loss_lines(const char *errlog, int64_t w0, int64_t w1)
{
    static const char *const reasons[] = {"running",    "queued",     "paused",
                                          "timer-late", "clock-step", "late-start"};
    long long by_reason[sizeof reasons / sizeof reasons[0]] = {0}, never_run = 0;
    static const char *const words[] = {"misfire",    "missed",  "skip", "dropped",
                                        "queue full", "refused", "late"};
    enum { MAXG = 12 };
    char key[MAXG][160];
    long count[MAXG];
    int ng = 0;
    long total = 0;
    FILE *f = fopen(errlog, "r");
    if (f == NULL)
        return;
    char line[2048];
    while (fgets(line, sizeof line, f)) {
        bool hit = false;
        for (size_t i = 0; i < sizeof words / sizeof words[0] && !hit; i++)
            hit = strcasestr(line, words[i]) != NULL;
        if (!hit)
            continue;
        total++;
        /* The scheduler's warning: "N cron fire time(s) missed in M ms,
         * ... each): running A queued B ...; first job 'j7'". */
        const char *each = strstr(line, "at most one run each");
        int64_t ts = parse_iso_ms(line);
        if (each && strstr(line, "[sched]") && ts >= w0 && ts <= w1) {
            const char *nr = strstr(each, "each: ");
            if (nr)
                never_run += strtoll(nr + 6, NULL, 10);
            for (size_t r = 0; r < sizeof reasons / sizeof reasons[0]; r++) {
                char pat[32];
                snprintf(pat, sizeof pat, " %s ", reasons[r]);
                const char *at = strstr(each, pat);
                if (at)
                    by_reason[r] += strtoll(at + strlen(pat), NULL, 10);
            }
        }
        /* Key: the text after the timestamp, digits as '#', job names "j#". */
        const char *p = strchr(line, ' ');
        p = p ? p + 1 : line;
        char k[160];
        size_t kn = 0;
        for (; *p && *p != '\n' && kn + 1 < sizeof k; p++)
            if (!(*p >= '0' && *p <= '9') || kn == 0 || k[kn - 1] != '#')
                k[kn++] = (*p >= '0' && *p <= '9') ? '#' : *p;
        k[kn] = '\0';
        int g = 0;
        while (g < ng && strcmp(key[g], k) != 0)
            g++;
        if (g == ng && ng < MAXG) {
            snprintf(key[ng], sizeof key[ng], "%s", k);
            count[ng++] = 0;
        }
        if (g < ng)
            count[g]++;
    }
    fclose(f);
    printf("  log lines about fires not run: %ld\n", total);
    printf("  fire times missed (not run on time), from the scheduler's warnings logged in the "
           "window:");
    for (size_t r = 0; r < sizeof reasons / sizeof reasons[0]; r++)
        printf(" %s %lld", reasons[r], by_reason[r]);
    printf("; of them never run (collapsed): %lld\n", never_run);
    for (int g = 0; g < ng; g++)
        printf("    %6ld x %.150s\n", count[g], key[g]);
}

static void write_yaml(const char *path, const zkf_server *zk, const char *ns, int njobs)
{
    FILE *f = fopen(path, "w");
    if (f == NULL) {
        perror(path);
        exit(1);
    }
    fprintf(f,
            "regCenter:\n  serverLists: %s\n  namespace: %s\n"
            "  sessionTimeoutMilliseconds: 15000\njobs:\n",
            zkf_connect_string(zk), ns);
    for (int j = 0; j < njobs; j++)
        fprintf(f,
                "  j%d:\n    elasticJobType: SCRIPT\n    cron: \"%s\"\n"
                "    shardingTotalCount: 1\n    overwrite: true\n"
                "    props:\n      script.command.line: /bin/true\n",
                j, FIRE_CRON);
    fclose(f);
}

/* One steady-state measurement (C or script jobs). */
static int measure_firing(const struct opts *o, zkf_server *zk, bool script)
{
    const char *kind = script ? "script" : "c";
    char ns[64], runlog[128], yaml[128], errlog[128];
    snprintf(ns, sizeof ns, "many_%s", kind);
    snprintf(runlog, sizeof runlog, "/tmp/ejob-many-%d-%s.runs", (int)getpid(), kind);
    snprintf(yaml, sizeof yaml, "/tmp/ejob-many-%d.yaml", (int)getpid());
    snprintf(errlog, sizeof errlog, "/tmp/ejob-many-%d-%s.log", (int)getpid(), kind);
    unlink(runlog);
    if (script)
        write_yaml(yaml, zk, ns, o->jobs);
    int fd = -1;
    long long pk_start = zkf_mntr_value(zk, "zk_packets_received");
    int64_t t0 = mono_ms();
    child = spawn(o, script, zk, ns, o->jobs, FIRE_CRON, runlog, yaml, errlog, &fd);
    char ready[64];
    snprintf(ready, sizeof ready, "running %d job(s)", o->jobs);
    int rc = wait_ready(fd, script ? errlog : NULL, script ? ready : "READY", 3600000);
    int64_t startup = mono_ms() - t0;
    long long pk_ready = zkf_mntr_value(zk, "zk_packets_received");
    close(fd);
    if (rc != 0) {
        fprintf(stderr, "many_jobs_bench: %s jobs did not start (log %s)\n", kind, errlog);
        kill_child();
        return -1;
    }
    printf("%d %s jobs, cron \"%s\", 1 item each\n", o->jobs, script ? "script (/bin/true)" : "C",
           FIRE_CRON);
    printf("  start-up to all registered and scheduled: %" PRId64 " ms, %lld ZooKeeper requests "
           "(%.1f a job; fires included once the first jobs run)\n",
           startup, pk_ready - pk_start, (double)(pk_ready - pk_start) / o->jobs);
    sleep_ms(2000);
    int64_t w0 = (epoch_ms() / 1000 + 1) * 1000;
    sleep_ms(w0 - epoch_ms());
    long long cpu0 = proc_cpu_ticks(child);
    long long pk0 = zkf_mntr_value(zk, "zk_packets_received");
    int64_t m0 = mono_ms();
    int64_t w1 = w0 + (int64_t)o->window_s * 1000;
    sleep_ms(w1 - epoch_ms());
    long long cpu1 = proc_cpu_ticks(child);
    long long pk1 = zkf_mntr_value(zk, "zk_packets_received");
    double secs = (double)(mono_ms() - m0) / 1000.0;
    long rss, thr;
    proc_status(child, &rss, &thr);
    long long watches = server_watches(zk);
    sleep_ms(3000); /* runs started in the window finish logging */
    int64_t term = term_child();

    struct runs r = {0};
    if (script)
        read_script_runs(errlog, &r, w0, w1);
    else
        read_c_runs(runlog, &r, w0, w1);
    long expected = (long)o->jobs * o->window_s;
    printf("  window %d s: fires expected %ld, run %ld (%.1f%%) + %ld MISFIRE re-runs "
           "(%.1f%% with them)%s\n",
           o->window_s, expected, r.normal, 100.0 * (double)r.normal / (double)expected, r.misfire,
           100.0 * (double)(r.normal + r.misfire) / (double)expected,
           r.other ? " + other sources" : "");
    print_loss_lines(errlog, w0, w1);
    if (r.nlate > 0) {
        qsort(r.late, r.nlate, sizeof *r.late, cmp_i64);
        printf("  lateness fire time -> item start (ms): p50 %" PRId64 ", p99 %" PRId64
               ", max %" PRId64 " (of %zu normal runs; a run > 1 s late counts from the "
               "last whole second)\n",
               r.late[r.nlate / 2], r.late[r.nlate * 99 / 100], r.late[r.nlate - 1], r.nlate);
    }
    long hz = sysconf(_SC_CLK_TCK);
    printf("  CPU %.1f%% of one core\n", 100.0 * (double)(cpu1 - cpu0) / (double)hz / secs);
    double req = (double)(pk1 - pk0);
    printf("  ZooKeeper requests: %.0f /s, %.2f per run\n", req / secs,
           r.normal + r.misfire ? req / (double)(r.normal + r.misfire) : 0.0);
    printf("  RSS %ld kB, %ld threads, server watches %lld\n", rss, thr, watches);
    printf("  SIGTERM to exit while firing: %" PRId64 " ms\n", term);
    fflush(stdout);
    free(r.late);
    unlink(runlog);
    unlink(yaml);
    if (o->keep_logs)
        printf("  process log kept: %s\n", errlog);
    else
        unlink(errlog);
    return 0;
}

/* What the resident memory of a process is made of, from its smaps. */
struct mem {
    long rss, pss, private_kb;
    long libc, own_libs, curl_libs, program, heap, stacks, other_anon;
};

static bool is_own_lib(const char *name)
{
    static const char *const own[] = {"ld-linux", "libzookeeper_mt", "libyaml", "libjansson"};
    for (size_t i = 0; i < sizeof own / sizeof own[0]; i++)
        if (strstr(name, own[i]))
            return true;
    return false;
}

static void classify(struct mem *m, const char *name, long size_kb, long rss, const char *exe)
{
    if (strstr(name, "/libc.so"))
        m->libc += rss;
    else if (name[0] == '/' && strcmp(name, exe) == 0)
        m->program += rss;
    else if (name[0] == '/' && is_own_lib(name))
        m->own_libs += rss;
    else if (name[0] == '/')
        m->curl_libs += rss; /* every other library is loaded for libcurl */
    else if (strcmp(name, "[heap]") == 0)
        m->heap += rss;
    else if (name[0] == '\0' && size_kb >= 8000 && size_kb <= 8200)
        m->stacks += rss; /* 8 MiB thread stacks */
    else
        m->other_anon += rss;
}

static int read_smaps(pid_t pid, struct mem *m)
{
    char path[64], exe[PATH_MAX] = "", line[PATH_MAX + 128], name[PATH_MAX] = "";
    snprintf(path, sizeof path, "/proc/%d/exe", (int)pid);
    ssize_t n = readlink(path, exe, sizeof exe - 1);
    exe[n > 0 ? n : 0] = '\0';
    snprintf(path, sizeof path, "/proc/%d/smaps", (int)pid);
    FILE *f = fopen(path, "r");
    if (f == NULL)
        return -1;
    memset(m, 0, sizeof *m);
    long size_kb = 0, v;
    while (fgets(line, sizeof line, f)) {
        unsigned long a, b;
        int off = 0;
        if (sscanf(line, "%lx-%lx %*s %*s %*s %*s%n", &a, &b, &off) == 2 && off > 0) {
            const char *p = line + off;
            while (*p == ' ')
                p++;
            snprintf(name, sizeof name, "%s", p);
            name[strcspn(name, "\n")] = '\0';
            size_kb = (long)((b - a) / 1024);
        } else if (sscanf(line, "Rss: %ld", &v) == 1) {
            m->rss += v;
            classify(m, name, size_kb, v, exe);
        } else if (sscanf(line, "Pss: %ld", &v) == 1) {
            m->pss += v;
        } else if (sscanf(line, "Private_Clean: %ld", &v) == 1 ||
                   sscanf(line, "Private_Dirty: %ld", &v) == 1) {
            m->private_kb += v;
        }
    }
    fclose(f);
    return 0;
}

/* One idle job: what its resident memory is made of. */
static int measure_footprint(const struct opts *o, zkf_server *zk)
{
    char runlog[128], errlog[128];
    snprintf(runlog, sizeof runlog, "/tmp/ejob-many-%d-fp.runs", (int)getpid());
    snprintf(errlog, sizeof errlog, "/tmp/ejob-many-%d-fp.log", (int)getpid());
    int fd = -1;
    child = spawn(o, false, zk, "footprint_1", 1, IDLE_CRON, runlog, NULL, errlog, &fd);
    int rc = wait_ready(fd, NULL, "READY", 120000);
    close(fd);
    unlink(runlog);
    unlink(errlog);
    if (rc != 0) {
        kill_child();
        return -1;
    }
    sleep_ms(2000);
    struct mem m;
    long rss, thr;
    proc_status(child, &rss, &thr);
    if (read_smaps(child, &m) != 0) {
        kill_child();
        return -1;
    }
    term_child();
    printf("1 idle C job: RSS %ld kB (PSS %ld kB, private %ld kB), %ld threads\n", m.rss, m.pss,
           m.private_kb, thr);
    printf("  resident: libcurl and the libraries it loads %ld kB, libc %ld kB, ld.so + "
           "libzookeeper_mt + libyaml + libjansson %ld kB, program %ld kB,\n"
           "  heap %ld kB, thread stacks %ld kB, other anonymous %ld kB\n",
           m.curl_libs, m.libc, m.own_libs, m.program, m.heap, m.stacks, m.other_anon);
    fflush(stdout);
    return 0;
}

/* Idle jobs: start-up, RSS, threads, watches, SIGTERM time. */
static int measure_idle(const struct opts *o, zkf_server *zk, int njobs)
{
    char ns[64], runlog[128], errlog[128];
    snprintf(ns, sizeof ns, "idle_%d", njobs);
    snprintf(runlog, sizeof runlog, "/tmp/ejob-many-%d-idle.runs", (int)getpid());
    snprintf(errlog, sizeof errlog, "/tmp/ejob-many-%d-idle.log", (int)getpid());
    long long wch0 = server_watches(zk);
    long long pk_start = zkf_mntr_value(zk, "zk_packets_received");
    int fd = -1;
    int64_t t0 = mono_ms();
    child = spawn(o, false, zk, ns, njobs, IDLE_CRON, runlog, NULL, errlog, &fd);
    int rc = wait_ready(fd, NULL, "READY", 1800000);
    int64_t startup = mono_ms() - t0;
    long long pk_ready = zkf_mntr_value(zk, "zk_packets_received");
    close(fd);
    if (rc != 0) {
        fprintf(stderr, "many_jobs_bench: %d idle jobs did not start (log %s)\n", njobs, errlog);
        kill_child();
        return -1;
    }
    sleep_ms(3000);
    long rss, thr;
    proc_status(child, &rss, &thr);
    long long wch = server_watches(zk);
    int64_t term = term_child();
    printf("%d idle C jobs: start-up %" PRId64 " ms (%.1f ZooKeeper requests a job), RSS %ld kB, "
           "%ld threads, server watches %lld; SIGTERM to exit %" PRId64 " ms\n",
           njobs, startup, (double)(pk_ready - pk_start) / njobs, rss, thr,
           wch >= 0 && wch0 >= 0 ? wch - wch0 : -1, term);
    fflush(stdout);
    unlink(runlog);
    unlink(errlog);
    return 0;
}

static void default_paths(struct opts *o)
{
    ssize_t n = readlink("/proc/self/exe", o->self, sizeof o->self - 1);
    if (n < 0)
        n = 0;
    o->self[n] = '\0';
    char *slash = strrchr(o->self, '/');
    size_t dirlen = slash ? (size_t)(slash - o->self) : 0;
    if (dirlen > sizeof o->ejob - 16)
        dirlen = sizeof o->ejob - 16;
    memcpy(o->ejob, o->self, dirlen);
    memcpy(o->ejob + dirlen, "/../ejob", 9);
}

int main(int argc, char **argv)
{
    if (argc == 7 && strcmp(argv[1], "--child") == 0)
        return child_main(argv[2], argv[3], atoi(argv[4]), argv[5], argv[6]);
    struct opts o = {
        .jobs = 1000, .window_s = 60, .idle_jobs = 0, .term_jobs = 1000, .mode = "both"};
    default_paths(&o);
    static const struct option lo[] = {{"jobs", required_argument, 0, 'j'},
                                       {"window", required_argument, 0, 'w'},
                                       {"mode", required_argument, 0, 'm'},
                                       {"idle-jobs", required_argument, 0, 'i'},
                                       {"term-jobs", required_argument, 0, 't'},
                                       {"ejob", required_argument, 0, 'e'},
                                       {"keep-logs", no_argument, 0, 'k'},
                                       {"footprint", no_argument, 0, 'f'},
                                       {0, 0, 0, 0}};
    int ch;
    while ((ch = getopt_long(argc, argv, "", lo, NULL)) != -1) {
        switch (ch) {
        case 'j':
            o.jobs = atoi(optarg);
            break;
        case 'w':
            o.window_s = atoi(optarg);
            break;
        case 'm':
            o.mode = optarg;
            break;
        case 'i':
            o.idle_jobs = atoi(optarg);
            break;
        case 't':
            o.term_jobs = atoi(optarg);
            break;
        case 'e':
            snprintf(o.ejob, sizeof o.ejob, "%s", optarg);
            break;
        case 'k':
            o.keep_logs = true;
            break;
        case 'f':
            o.footprint = true;
            break;
        default:
            fprintf(stderr, "usage: many_jobs_bench [--jobs N] [--window S] "
                            "[--mode c|script|both] [--idle-jobs N] [--term-jobs N] "
                            "[--ejob PATH] [--keep-logs] [--footprint]\n");
            return 2;
        }
    }
    bool do_c = strcmp(o.mode, "c") == 0 || strcmp(o.mode, "both") == 0;
    bool do_script = strcmp(o.mode, "script") == 0 || strcmp(o.mode, "both") == 0;
    if (o.jobs < 1 || o.window_s < 1 || (!do_c && !do_script)) {
        fprintf(stderr, "many_jobs_bench: bad --jobs, --window or --mode\n");
        return 2;
    }
    if (do_script && access(o.ejob, X_OK) != 0) {
        fprintf(stderr, "many_jobs_bench: no ejob binary at %s (--ejob PATH)\n", o.ejob);
        return 1;
    }
    bench_child_guard();
    zkf_server *zk = NULL;
    zkf_opts zo = {.tick_ms = 1000};
    if (zkf_start(&zk, &zo) != 0) {
        fprintf(stderr, "many_jobs_bench: cannot start ZooKeeper\n");
        return 1;
    }
    long cores = sysconf(_SC_NPROCESSORS_ONLN);
    printf("many_jobs_bench: %ld online CPUs, load average at start: ", cores);
    FILE *la = fopen("/proc/loadavg", "r");
    char lbuf[64] = "?";
    if (la && fgets(lbuf, sizeof lbuf, la))
        lbuf[strcspn(lbuf, "\n")] = '\0';
    if (la)
        fclose(la);
    printf("%s\n", lbuf);
    int rc = 0;
    if (o.footprint && measure_footprint(&o, zk) != 0)
        rc = 1;
    if (do_c && measure_firing(&o, zk, false) != 0)
        rc = 1;
    if (do_script && measure_firing(&o, zk, true) != 0)
        rc = 1;
    if (o.term_jobs > 0 && measure_idle(&o, zk, o.term_jobs) != 0)
        rc = 1;
    if (o.idle_jobs > 0 && measure_idle(&o, zk, o.idle_jobs) != 0)
        rc = 1;
    zkf_destroy(zk);
    return rc;
}
