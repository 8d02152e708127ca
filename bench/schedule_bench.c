/*
 * Scheduler benchmark: 1,000 jobs firing every second in one process
 * (lateness of the callbacks, threads, memory), then 10,000 idle jobs
 * (memory, threads).
 *
 *   schedule_bench [seconds]   (default 10)
 */
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "common/util.h"
#include "ejob/cron.h"
#include "ejob/log.h"
#include "schedule/internal.h"

#define BUSY_JOBS 1000
#define IDLE_JOBS 10000

static int64_t *samples_us;
static atomic_size_t nsamples;
static size_t max_samples;

static int64_t now_us(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_REALTIME, &ts);
    return (int64_t)ts.tv_sec * 1000000 + ts.tv_nsec / 1000;
}

static void on_fire(const ej__fire *f, void *arg)
{
    (void)arg;
    int64_t late = now_us() - f->scheduled_ms * 1000;
    size_t i = atomic_fetch_add(&nsamples, 1);
    if (i < max_samples)
        samples_us[i] = late;
}

static long proc_status_kb(const char *key)
{
    FILE *f = fopen("/proc/self/status", "r");
    if (f == NULL)
        return -1;
    char line[256];
    long v = -1;
    size_t kl = strlen(key);
    while (fgets(line, sizeof line, f)) {
        if (strncmp(line, key, kl) == 0 && line[kl] == ':') {
            v = strtol(line + kl + 1, NULL, 10);
            break;
        }
    }
    fclose(f);
    return v;
}

static int cmp64(const void *a, const void *b)
{
    int64_t x = *(const int64_t *)a, y = *(const int64_t *)b;
    return x < y ? -1 : x > y;
}

static ej_cron *parse(const char *expr)
{
    ej_cron *c = NULL;
    char err[128];
    if (ej_cron_parse(expr, &c, err, sizeof err) != 0) {
        fprintf(stderr, "cron '%s': %s\n", expr, err);
        exit(1);
    }
    return c;
}

int main(int argc, char **argv)
{
    int seconds = argc > 1 ? atoi(argv[1]) : 10;
    if (seconds < 2)
        seconds = 2;
    ej_log_set_level(EJ_LOG_WARN);
    max_samples = (size_t)BUSY_JOBS * (size_t)(seconds + 2);
    samples_us = calloc(max_samples, sizeof *samples_us);

    long rss0 = proc_status_kb("VmRSS");
    long thr0 = proc_status_kb("Threads");
    ej__sched *s;
    if (ej__sched_create(NULL, &s) != 0)
        return 1;
    static ej__sched_job *jobs[BUSY_JOBS];
    char name[32];
    for (int i = 0; i < BUSY_JOBS; i++) {
        snprintf(name, sizeof name, "busy-%d", i);
        ej__trigger *t;
        if (ej__sched_job_create(s, name, 2, &jobs[i]) != 0 ||
            ej__sched_cron_add(jobs[i], parse("0/1 * * * * ?"), NULL, false, on_fire, NULL, &t) !=
                0) {
            fprintf(stderr, "cannot add job %d\n", i);
            return 1;
        }
    }
    long peak_threads = 0;
    for (int k = 0; k < seconds * 10; k++) {
        ej__sleep_ms(100);
        long th = proc_status_kb("Threads");
        peak_threads = th > peak_threads ? th : peak_threads;
    }
    size_t n = atomic_load(&nsamples);
    if (n > max_samples)
        n = max_samples;
    qsort(samples_us, n, sizeof *samples_us, cmp64);
    struct ej__sched_stats st;
    ej__sched_get_stats(s, &st);
    printf("busy: %d jobs x '0/1 * * * * ?' for %d s: %zu fires, %llu misfired\n", BUSY_JOBS,
           seconds, n, (unsigned long long)st.misfires);
    if (n > 0)
        printf("busy: lateness ms p50 %.3f p99 %.3f max %.3f\n", samples_us[n / 2] / 1000.0,
               samples_us[(n * 99) / 100] / 1000.0, samples_us[n - 1] / 1000.0);
    printf("busy: threads %ld (peak %ld; process had %ld before; pool %d), RSS %ld KiB (+%ld "
           "KiB)\n",
           proc_status_kb("Threads"), peak_threads, thr0, st.threads, proc_status_kb("VmRSS"),
           proc_status_kb("VmRSS") - rss0);
    for (int i = 0; i < BUSY_JOBS; i++)
        ej__sched_job_destroy(jobs[i]);
    ej__sched_destroy(s);

    /* 10,000 idle jobs. */
    long rss1 = proc_status_kb("VmRSS");
    if (ej__sched_create(NULL, &s) != 0)
        return 1;
    ej__sched_job **idle = calloc(IDLE_JOBS, sizeof *idle);
    for (int i = 0; i < IDLE_JOBS; i++) {
        snprintf(name, sizeof name, "idle-%d", i);
        ej__trigger *t;
        if (ej__sched_job_create(s, name, 2, &idle[i]) != 0 ||
            ej__sched_cron_add(idle[i], parse("0 0 3 1 1 ? 2099"), NULL, false, on_fire, NULL,
                               &t) != 0) {
            fprintf(stderr, "cannot add idle job %d\n", i);
            return 1;
        }
    }
    ej__sleep_ms(1000);
    ej__sched_get_stats(s, &st);
    long rss2 = proc_status_kb("VmRSS");
    printf("idle: %d jobs: threads %ld (pool %d), RSS %ld KiB (+%ld KiB, %.0f bytes/job)\n",
           IDLE_JOBS, proc_status_kb("Threads"), st.threads, rss2, rss2 - rss1,
           (rss2 - rss1) * 1024.0 / IDLE_JOBS);
    for (int i = 0; i < IDLE_JOBS; i++)
        ej__sched_job_destroy(idle[i]);
    free(idle);
    ej__sched_destroy(s);
    free(samples_us);
    return 0;
}
