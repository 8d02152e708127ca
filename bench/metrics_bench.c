/*
 * Cost of the metrics library on the paths that matter: an increment and a
 * histogram observation (one thread, and two threads on the same series),
 * a series lookup among 1,000, and a render of the daemon's per-job
 * families for 1,000 jobs. Prints figures in CPU time of the process (the
 * machine may be shared), per operation.
 */
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <time.h>

#include "ejob/metrics.h"

#define OPS 10000000L
#define JOBS 1000

static double now_ns(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_PROCESS_CPUTIME_ID, &ts);
    return (double)ts.tv_sec * 1e9 + (double)ts.tv_nsec;
}

struct arg {
    ej_metric_series *s;
    bool observe;
};

static void *loop(void *p)
{
    struct arg *a = p;
    for (long i = 0; i < OPS; i++) {
        if (a->observe)
            ej_metric_observe(a->s, (double)(i & 1023) / 1000.0);
        else
            ej_metric_inc(a->s);
    }
    return NULL;
}

static double per_op(struct arg *a, int threads)
{
    pthread_t t[2];
    double t0 = now_ns();
    for (int i = 0; i < threads; i++)
        pthread_create(&t[i], NULL, loop, a);
    for (int i = 0; i < threads; i++)
        pthread_join(t[i], NULL);
    return (now_ns() - t0) / (double)OPS / threads; /* CPU per operation */
}

int main(void)
{
    ej_metrics *m;
    ej_metrics_create(&m);
    const struct ej_metric_desc table[] = {
        {"ejob_item_runs_total", EJ_METRIC_COUNTER, "Runs.", {"ejob_job", "result"}, NULL, 0},
        {"ejob_item_run_duration_seconds", EJ_METRIC_HISTOGRAM, "D.", {"ejob_job"}, NULL, 0},
        {"ejob_job_fires_total", EJ_METRIC_COUNTER, "Fires.", {"ejob_job"}, NULL, 0},
        {"ejob_job_leader", EJ_METRIC_GAUGE, "Leader.", {"ejob_job"}, NULL, 0},
        {"ejob_job_shard_items", EJ_METRIC_GAUGE, "Items.", {"ejob_job"}, NULL, 0},
    };
    ej_metric *f[5];
    if (ej_metrics_register_table(m, table, 5, f, NULL, 0) != 0)
        return 1;
    struct arg inc = {ej_metric_get2(f[0], "bench", "success"), false};
    struct arg obs = {ej_metric_get1(f[1], "bench"), true};
    printf("counter increment, 1 thread:             %6.1f ns\n", per_op(&inc, 1));
    printf("counter increment, 2 threads, one series:  %6.1f ns\n", per_op(&inc, 2));
    printf("histogram observe (16 buckets), 1 thread: %6.1f ns\n", per_op(&obs, 1));
    printf("histogram observe, 2 threads, one series:  %6.1f ns\n", per_op(&obs, 2));

    char job[32];
    for (int j = 0; j < JOBS; j++) {
        snprintf(job, sizeof job, "job%04d", j);
        ej_metric_inc(ej_metric_get2(f[0], job, "success"));
        ej_metric_observe(ej_metric_get1(f[1], job), 0.2);
        ej_metric_set(ej_metric_get1(f[2], job), 5);
        ej_metric_set(ej_metric_get1(f[3], job), 1);
        ej_metric_set(ej_metric_get1(f[4], job), 3);
    }
    double t0 = now_ns();
    long lookups = 1000000;
    for (long i = 0; i < lookups; i++) {
        snprintf(job, sizeof job, "job%04ld", i % JOBS);
        ej_metric_inc(ej_metric_get2(f[0], job, "success"));
    }
    printf("series lookup + increment among %d jobs:  %6.1f ns (label formatting included)\n", JOBS,
           (now_ns() - t0) / (double)lookups);
    char *out = NULL;
    size_t len = 0;
    int renders = 20;
    t0 = now_ns();
    for (int i = 0; i < renders; i++) {
        free(out);
        ej_metrics_render(m, &out, &len);
    }
    printf("render of %d jobs (5 families, 1 histogram): %.2f ms, %zu bytes\n", JOBS,
           (now_ns() - t0) / renders / 1e6, len);
    free(out);
    ej_metrics_destroy(m);
    return 0;
}
