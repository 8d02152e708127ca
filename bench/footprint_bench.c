/*
 * Footprint of many jobs in one process: resident memory of an idle
 * process with 100 jobs, and its thread count with 1,000 jobs (ElasticJob
 * 2.x: a Quartz scheduler, a worker and a cache thread per job; users
 * report 20,000 threads for 7,000 jobs, EJ#510). The jobs are registered
 * in a private ZooKeeper, one item each, with a cron that does not fire
 * during the measurement.
 *
 * The process is this program run again as the job process: N jobs in one
 * registry, started together (ej_jobs_start, as `ejob run` starts the jobs
 * of its file), READY on stdout once all are started.
 *
 * Usage: footprint_bench [jobs_for_rss [jobs_for_threads]]  (100, 1000)
 */
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

#include "ejob/ejob.h"
#include "ejob/jobs.h"
#include "bench_child.h"
#include "zk_fixture.h"




static char self[PATH_MAX];

static void find_self(void)
{
    ssize_t n = readlink("/proc/self/exe", self, sizeof self - 1);
    self[n > 0 ? n : 0] = '\0';
}

static volatile sig_atomic_t child_stop;

static void child_on_term(int sig)
{
    (void)sig;
    child_stop = 1;
}

static int noop_item(const ej_shard_context *ctx, void *user)
{
    (void)ctx;
    (void)user;
    return 0;
}

/* The job process: n idle one-item jobs, started together. */
static int child_main(const char *zk, const char *ns, int n)
{
    struct sigaction sa = {.sa_handler = child_on_term};
    sigaction(SIGTERM, &sa, NULL);
    ej_registry *reg = NULL;
    struct ej_registry_opts ro = {.servers = zk, .namespace_ = ns, .session_timeout_ms = 10000};
    if (ej_registry_create(&reg, &ro) != 0)
        return 1;
    struct ej_job_def def = {.type = EJ_JOB_TYPE_SIMPLE, .simple = noop_item};
    struct ej_job_opts jo = {.def = &def, .ip = "127.0.8.1"};
    ej_job **jobs = calloc((size_t)n, sizeof *jobs);
    if (jobs == NULL)
        return 1;
    for (int j = 0; j < n; j++) {
        char name[32];
        snprintf(name, sizeof name, "fp%d", j);
        struct ej_job_config cfg;
        ej_job_config_init(&cfg);
        ej_job_config_set_str(&cfg.job_name, name);
        ej_job_config_set_str(&cfg.cron, "0 0 0 1 1 ? 2099");
        cfg.sharding_total_count = 1;
        cfg.job_type = EJ_JOB_TYPE_SIMPLE;
        int rc = ej_job_create(reg, &cfg, &jo, &jobs[j]);
        ej_job_config_fini(&cfg);
        if (rc != 0)
            return 1;
    }
    if (ej_jobs_start(jobs, (size_t)n, NULL) != 0)
        return 1;
    printf("READY\n");
    fflush(stdout);
    while (!child_stop)
        pause();
    ej_jobs_destroy(jobs, (size_t)n);
    free(jobs);
    ej_registry_destroy(reg);
    return 0;
}

static int64_t mono_ms(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (int64_t)ts.tv_sec * 1000 + ts.tv_nsec / 1000000;
}

/* VmRSS (kB) and Threads of a process. */
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

/* Start N jobs in one process; returns the start-up time in ms or -1. */
static int64_t run_jobs(zkf_server *zk, int jobs, const char *ns)
{
    int pfd[2];
    if (pipe(pfd) != 0)
        return -1;
    char n[16];
    snprintf(n, sizeof n, "%d", jobs);
    int64_t t0 = mono_ms();
    pid_t parent = getpid();
    child = fork();
    if (child == 0) {
        prctl(PR_SET_PDEATHSIG, SIGKILL);
        if (getppid() != parent)
            _exit(1);
        dup2(pfd[1], 1);
        close(pfd[0]);
        int null = open("/dev/null", O_WRONLY);
        if (null >= 0)
            dup2(null, 2);
        execl(self, self, "--child", zkf_connect_string(zk), ns, n, (char *)NULL);
        _exit(127);
    }
    close(pfd[1]);
    char buf[256];
    size_t k = 0;
    for (;;) {
        struct pollfd p = {.fd = pfd[0], .events = POLLIN};
        if (poll(&p, 1, 600000) <= 0)
            break;
        char c;
        if (read(pfd[0], &c, 1) != 1)
            break;
        if (c == '\n')
            break;
        if (k + 1 < sizeof buf)
            buf[k++] = c;
    }
    buf[k] = '\0';
    close(pfd[0]);
    if (strncmp(buf, "READY", 5) != 0) {
        fprintf(stderr, "footprint_bench: %d jobs did not start\n", jobs);
        return -1;
    }
    return mono_ms() - t0;
}

int main(int argc, char **argv)
{
    if (argc == 5 && strcmp(argv[1], "--child") == 0)
        return child_main(argv[2], argv[3], atoi(argv[4]));
    int rss_jobs = argc > 1 ? atoi(argv[1]) : 100;
    int thr_jobs = argc > 2 ? atoi(argv[2]) : 1000;
    find_self();
    bench_child_guard();
    zkf_server *zk = NULL;
    zkf_opts zo = {.tick_ms = 500};
    if (zkf_start(&zk, &zo) != 0) {
        fprintf(stderr, "footprint_bench: cannot start ZooKeeper\n");
        return 1;
    }
    long rss, thr;
    int64_t ms = run_jobs(zk, 1, "fp1");
    if (ms < 0)
        return 1;
    sleep(2);
    proc_status(child, &rss, &thr);
    printf("1 job: %ld kB resident, %ld threads\n", rss, thr);
    kill_child();

    ms = run_jobs(zk, rss_jobs, "fp100");
    if (ms < 0)
        return 1;
    sleep(3);
    proc_status(child, &rss, &thr);
    printf("%d idle jobs: %ld kB resident, %ld threads (started in %" PRId64 " ms)\n", rss_jobs,
           rss, thr, ms);
    kill_child();

    ms = run_jobs(zk, thr_jobs, "fp1000");
    if (ms < 0)
        return 1;
    sleep(3);
    proc_status(child, &rss, &thr);
    printf("%d idle jobs: %ld kB resident, %ld threads (started in %" PRId64 " ms)\n", thr_jobs,
           rss, thr, ms);
    printf("(ElasticJob-Lite 2.1.5: an idle instance of one job is about 79 MB; threads grow by "
           "about 3 per job)\n");
    kill_child();
    zkf_destroy(zk);
    return 0;
}
