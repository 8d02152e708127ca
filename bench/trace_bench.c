/*
 * History store benchmark.
 *
 * 1. Throughput: events per second sustained into each store (SQLite file,
 *    PostgreSQL server started here): N events posted as fast as possible,
 *    timed until the last one is committed.
 * 2. Fire lateness: 200 jobs firing every second on the scheduler, each
 *    fire posting what a real fire posts (3 status events, an execution
 *    start and an end with 1 KiB of output) through the event bus to the
 *    store; p50/p99/max of how late the fires ran and of how long a fire
 *    spent posting, with no store, the store up, slow (SQLite locked by
 *    another connection; PostgreSQL processes stopped with SIGSTOP) and
 *    down (PostgreSQL killed).
 *
 *   trace_bench [seconds per scenario]   (default 5)
 */
#include <pthread.h>
#include <signal.h>
#include <sqlite3.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "../tests/integration/trace_pg_fixture.h"
#include "common/util.h"
#include "ejob/cron.h"
#include "ejob/event.h"
#include "ejob/log.h"
#include "ejob/trace.h"
#include "schedule/internal.h"

#define JOBS 200

static int64_t *late_us, *post_us;
static atomic_size_t nsamples;
static size_t max_samples;
static ej_event_bus *bus;
static char output[1024];

static int64_t now_us(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_REALTIME, &ts);
    return (int64_t)ts.tv_sec * 1000000 + ts.tv_nsec / 1000;
}

static int cmp64(const void *a, const void *b)
{
    int64_t x = *(const int64_t *)a, y = *(const int64_t *)b;
    return x < y ? -1 : x > y;
}

/* What one fire of one item posts. */
static void post_fire(int item, int64_t now_ms)
{
    char task[64];
    snprintf(task, sizeof task, "bench@-@%d@-@READY@-@10.0.0.7@-@1", item);
    ej_status_event st = {.job_name = "bench",
                          .task_id = task,
                          .slave_id = "10.0.0.7",
                          .sharding_item = "[0]",
                          .creation_time_ms = now_ms};
    ej_event_new_id(st.id);
    st.state = EJ_TASK_STAGING;
    ej_event_bus_post_status(bus, &st);
    ej_event_new_id(st.id);
    st.state = EJ_TASK_RUNNING;
    ej_event_bus_post_status(bus, &st);
    ej_execution_event ex = {.job_name = "bench",
                             .task_id = task,
                             .hostname = "h",
                             .ip = "10.0.0.7",
                             .sharding_item = item,
                             .start_time_ms = now_ms};
    ej_event_new_id(ex.id);
    ej_event_bus_post_execution(bus, &ex);
    ex.complete_time_ms = now_ms + 1;
    ex.is_success = true;
    ex.output = output;
    ex.output_len = sizeof output;
    ej_event_bus_post_execution(bus, &ex);
    ej_event_new_id(st.id);
    st.state = EJ_TASK_FINISHED;
    ej_event_bus_post_status(bus, &st);
}

static void on_fire(const ej__fire *f, void *arg)
{
    int64_t t0 = now_us();
    post_fire((int)(intptr_t)arg, f->scheduled_ms);
    int64_t t1 = now_us();
    size_t i = atomic_fetch_add(&nsamples, 1);
    if (i < max_samples) {
        late_us[i] = t0 - f->scheduled_ms * 1000;
        post_us[i] = t1 - t0;
    }
}

static void report(const char *name, ej_trace_store *store)
{
    size_t n = atomic_load(&nsamples);
    if (n > max_samples)
        n = max_samples;
    qsort(late_us, n, sizeof *late_us, cmp64);
    qsort(post_us, n, sizeof *post_us, cmp64);
    struct ej_trace_stats st;
    ej_trace_store_stats(store, &st);
    if (n == 0)
        return;
    printf("%-22s %6zu fires  lateness ms p50 %6.2f p99 %6.2f max %7.2f  post us p99 %6lld "
           "max %6lld  store: queued %zu written %llu dropped %llu\n",
           name, n, late_us[n / 2] / 1000.0, late_us[n * 99 / 100] / 1000.0,
           late_us[n - 1] / 1000.0, (long long)post_us[n * 99 / 100], (long long)post_us[n - 1],
           st.queued, (unsigned long long)st.written, (unsigned long long)st.dropped);
    fflush(stdout);
}

/* Runs the 200 jobs for seconds, then reports. */
static void lateness(const char *name, ej_trace_store *store, int seconds, void (*during)(void *),
                     void *arg)
{
    struct ej_event_bus_opts bo = {.name = "bench-bus"};
    ej_event_bus_create(&bo, &bus);
    if (store)
        ej_event_bus_add_sink(bus, ej_trace_sink, store);
    atomic_store(&nsamples, 0);
    ej__sched *s;
    if (ej__sched_create(NULL, &s) != 0)
        exit(1);
    static ej__sched_job *jobs[JOBS];
    ej_cron *c = NULL;
    char err[128];
    ej_cron_parse("0/1 * * * * ?", &c, err, sizeof err);
    for (int i = 0; i < JOBS; i++) {
        char jn[32];
        snprintf(jn, sizeof jn, "bench-%d", i);
        ej__trigger *t;
        ej__sched_job_create(s, jn, 2, &jobs[i]);
        ej_cron *cc = NULL;
        ej_cron_parse("0/1 * * * * ?", &cc, err, sizeof err);
        ej__sched_cron_add(jobs[i], cc, NULL, false, on_fire, (void *)(intptr_t)i, &t);
    }
    ej_cron_free(c);
    if (during)
        during(arg);
    ej__sleep_ms(seconds * 1000);
    for (int i = 0; i < JOBS; i++)
        ej__sched_job_destroy(jobs[i]);
    ej__sched_destroy(s);
    report(name, store);
    ej_event_bus_destroy(bus); /* into the store's queue */
    bus = NULL;
}

/* Events per second into a store: n events, timed to the last commit. */
static void throughput(const char *name, ej_trace_store *store, int n)
{
    struct ej_event_bus_opts bo = {.capacity = (size_t)n + 16, .name = "bench-bus"};
    ej_event_bus_create(&bo, &bus);
    ej_event_bus_add_sink(bus, ej_trace_sink, store);
    struct ej_trace_stats before;
    ej_trace_store_stats(store, &before);
    int64_t t0 = ej__mono_ms();
    for (int i = 0; i < n / 5; i++)
        post_fire(i % 100, ej__now_ms());
    ej_event_bus_flush(bus, -1);
    ej_trace_store_flush(store, -1);
    int64_t ms = ej__mono_ms() - t0;
    struct ej_trace_stats st;
    ej_trace_store_stats(store, &st);
    uint64_t w = st.written - before.written;
    printf("%-22s %llu events in %lld ms: %.0f events/s (%llu transactions, %llu dropped)\n", name,
           (unsigned long long)w, (long long)ms, ms ? w * 1000.0 / (double)ms : 0.0,
           (unsigned long long)(st.batches - before.batches), (unsigned long long)st.dropped);
    fflush(stdout);
    ej_event_bus_destroy(bus);
    bus = NULL;
}

static ej_trace_store *sqlite_store(const char *path)
{
    struct ej_trace_store_opts o = {.target = {.kind = EJ_TRACE_SQLITE, .url = path},
                                    .retention_days = 0,
                                    .busy_timeout_ms = 1000,
                                    .retry_max_ms = 1000,
                                    .flush_timeout_ms = 30000};
    ej_trace_store *s = NULL;
    if (ej_trace_store_create(&o, &s) != 0)
        exit(1);
    return s;
}

static ej_trace_store *pg_store(struct pgf *pg)
{
    struct ej_trace_store_opts o = {
        .target = {.kind = EJ_TRACE_POSTGRESQL, .url = pg->url, .password = PGF_PASSWORD},
        .retention_days = 0,
        .op_timeout_ms = 2000,
        .retry_max_ms = 1000,
        .flush_timeout_ms = 30000};
    ej_trace_store *s = NULL;
    if (ej_trace_store_create(&o, &s) != 0)
        exit(1);
    return s;
}

/* SIGSTOP / SIGCONT the server and its backends ("slow": answers nothing
 * until continued). */
static void signal_pg(struct pgf *pg, int sig)
{
    DIR *d = opendir("/proc");
    struct dirent *e;
    while (d && (e = readdir(d)) != NULL) {
        char path[300], buf[512];
        snprintf(path, sizeof path, "/proc/%s/stat", e->d_name);
        FILE *f = fopen(path, "r");
        if (f == NULL)
            continue;
        size_t len = fread(buf, 1, sizeof buf - 1, f);
        fclose(f);
        buf[len] = '\0';
        char *rp = strrchr(buf, ')');
        int ppid = 0;
        if (rp && sscanf(rp + 2, "%*c %d", &ppid) == 1 && ppid == pg->pid)
            kill(atoi(e->d_name), sig);
    }
    if (d)
        closedir(d);
    kill(pg->pid, sig);
}

static void stop_pg(void *arg)
{
    signal_pg(arg, SIGSTOP);
}

static void kill_pg(void *arg)
{
    pgf_kill(arg);
}

static void lock_sqlite(void *arg)
{
    /* Wait for the store's own transaction, then hold the lock. */
    sqlite3_busy_timeout(arg, 10000);
    if (sqlite3_exec(arg, "BEGIN IMMEDIATE", NULL, NULL, NULL) != SQLITE_OK)
        fprintf(stderr, "could not lock the SQLite file: %s\n", sqlite3_errmsg(arg));
}

int main(int argc, char **argv)
{
    int seconds = argc > 1 ? atoi(argv[1]) : 5;
    if (seconds < 2)
        seconds = 2;
    ej_log_set_level(EJ_LOG_ERROR);
    memset(output, 'o', sizeof output);
    max_samples = (size_t)JOBS * (size_t)(seconds + 2);
    late_us = calloc(max_samples, sizeof *late_us);
    post_us = calloc(max_samples, sizeof *post_us);
    char dir[] = "/tmp/ejob-trace-bench-XXXXXX";
    if (mkdtemp(dir) == NULL)
        return 1;
    char db[300];
    snprintf(db, sizeof db, "%s/history.db", dir);

    printf("== throughput (events: 3 status + 2 execution per fire, 1 KiB output)\n");
    ej_trace_store *lite = sqlite_store(db);
    throughput("SQLite", lite, 50000);
    struct pgf pg;
    bool have_pg = pgf_init(&pg) == 0;
    ej_trace_store *pgs = NULL;
    if (have_pg) {
        pgf_start(&pg);
        pgs = pg_store(&pg);
        throughput("PostgreSQL", pgs, 50000);
    }

    printf("== fire lateness: %d jobs x '0/1 * * * * ?', %d s each\n", JOBS, seconds);
    lateness("no store", NULL, seconds, NULL, NULL);
    lateness("SQLite up", lite, seconds, NULL, NULL);
    sqlite3 *other = NULL;
    sqlite3_open(db, &other);
    lateness("SQLite locked", lite, seconds, lock_sqlite, other);
    sqlite3_exec(other, "COMMIT", NULL, NULL, NULL);
    sqlite3_close(other);
    ej_trace_store_flush(lite, 30000);
    if (have_pg) {
        lateness("PostgreSQL up", pgs, seconds, NULL, NULL);
        lateness("PostgreSQL stopped", pgs, seconds, stop_pg, &pg);
        signal_pg(&pg, SIGCONT);
        ej_trace_store_flush(pgs, 30000);
        lateness("PostgreSQL killed", pgs, seconds, kill_pg, &pg);
        pgf_start(&pg);
        int64_t t0 = ej__mono_ms();
        ej_trace_store_flush(pgs, 60000);
        struct ej_trace_stats st;
        ej_trace_store_stats(pgs, &st);
        printf("PostgreSQL back: buffered events written in %lld ms; written %llu, dropped %llu\n",
               (long long)(ej__mono_ms() - t0), (unsigned long long)st.written,
               (unsigned long long)st.dropped);
    } else {
        printf("PostgreSQL: skipped (no server binaries)\n");
    }
    ej_trace_store_destroy(lite);
    if (have_pg) {
        ej_trace_store_destroy(pgs);
        pgf_fini(&pg);
    }
    char cmd[400];
    snprintf(cmd, sizeof cmd, "rm -rf '%s'", dir);
    return system(cmd) == 0 ? 0 : 1;
}
