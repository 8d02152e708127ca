/*
 * What the fire ledger costs: N one-item C jobs firing every second
 * (`0/1 * * * * ?`, in this process, against a private ZooKeeper), their
 * events written to a SQLite history store, measured three ways in turn:
 *
 *   none    no history at all;
 *   runs    the history of runs (JOB_EXECUTION_LOG, JOB_STATUS_TRACE_LOG,
 *           EJOB_EXECUTION_DETAIL), the ledger's events dropped by the sink;
 *   ledger  the same plus the fire ledger (EJOB_FIRE_LEDGER).
 *
 * For each: fires run in the window, fire lateness (item start minus its
 * whole second) p50/p99/max, the store's events and transactions, and for
 * the ledger its rows per fire and bytes per row (SQLite's dbstat over the
 * table and its two indexes).
 *
 * Usage: ledger_bench [--jobs N] [--window S]   (defaults 1000, 20)
 */
#include <getopt.h>
#include <inttypes.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include <sqlite3.h>

#include "ejob/ejob.h"
#include "ejob/event.h"
#include "ejob/jobs.h"
#include "ejob/trace.h"
#include "zk_fixture.h"

#define CRON "0/1 * * * * ?"

static int64_t epoch_ms(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_REALTIME, &ts);
    return (int64_t)ts.tv_sec * 1000 + ts.tv_nsec / 1000000;
}

static void sleep_ms(int64_t ms)
{
    if (ms > 0)
        nanosleep(&(struct timespec){.tv_sec = ms / 1000, .tv_nsec = (ms % 1000) * 1000000}, NULL);
}

/* Item starts in the window: their lateness, ms past the whole second. */
static struct {
    pthread_mutex_t mu;
    int64_t w0, w1;
    int64_t *late;
    size_t n, cap;
} runs = {.mu = PTHREAD_MUTEX_INITIALIZER};

static int item(const ej_shard_context *ctx, void *user)
{
    (void)ctx;
    (void)user;
    int64_t now = epoch_ms();
    pthread_mutex_lock(&runs.mu);
    if (now >= runs.w0 && now < runs.w1 && runs.n < runs.cap)
        runs.late[runs.n++] = now % 1000;
    pthread_mutex_unlock(&runs.mu);
    return 0;
}

enum mode { NONE, RUNS, LEDGER };
static const char *const mode_name[] = {"none", "runs", "ledger"};

struct sink {
    ej_trace_store *store;
    bool ledger;
};

static void sink_fn(const ej_event *ev, void *user)
{
    struct sink *s = user;
    if (ev->type == EJ_EVENT_FIRE && !s->ledger)
        return;
    ej_trace_store_post(s->store, ev);
}

static int cmp_i64(const void *a, const void *b)
{
    int64_t x = *(const int64_t *)a, y = *(const int64_t *)b;
    return x < y ? -1 : x > y;
}

static int64_t sql_int(sqlite3 *db, const char *sql)
{
    sqlite3_stmt *st = NULL;
    int64_t v = -1;
    if (sqlite3_prepare_v2(db, sql, -1, &st, NULL) == SQLITE_OK && sqlite3_step(st) == SQLITE_ROW)
        v = sqlite3_column_int64(st, 0);
    sqlite3_finalize(st);
    return v;
}

/* Ledger rows in the window and bytes per row (table and indexes). */
static void ledger_cost(const char *path, int64_t w0, int64_t w1, long fires)
{
    sqlite3 *db = NULL;
    if (sqlite3_open_v2(path, &db, SQLITE_OPEN_READONLY, NULL) != SQLITE_OK) {
        sqlite3_close(db);
        return;
    }
    char q[256];
    snprintf(q, sizeof q,
             "SELECT count(*) FROM EJOB_FIRE_LEDGER WHERE fire_time_ms >= %" PRId64
             " AND fire_time_ms < %" PRId64,
             w0, w1);
    int64_t rows = sql_int(db, q);
    snprintf(q, sizeof q,
             "SELECT count(*) FROM EJOB_FIRE_LEDGER WHERE outcome = 'ran' AND fire_time_ms >= "
             "%" PRId64 " AND fire_time_ms < %" PRId64,
             w0, w1);
    int64_t ran = sql_int(db, q);
    int64_t all = sql_int(db, "SELECT count(*) FROM EJOB_FIRE_LEDGER");
    int64_t bytes = sql_int(db, "SELECT sum(pgsize) FROM dbstat WHERE name IN "
                                "('EJOB_FIRE_LEDGER', 'sqlite_autoindex_EJOB_FIRE_LEDGER_1', "
                                "'EJOB_LEDGER_FIRE_INDEX')");
    int64_t payload = sql_int(db, "SELECT sum(payload) FROM dbstat WHERE name = "
                                  "'EJOB_FIRE_LEDGER'");
    int64_t file = sql_int(db, "SELECT sum(pgsize) FROM dbstat");
    printf("  ledger: %" PRId64 " rows for the window's fire times (%" PRId64 " ran, %" PRId64
           " not run), %.2f per run; %" PRId64 " rows in all take %" PRId64
           " bytes with their indexes (%.0f a row; payload %.0f), "
           "%.1f%% of the file\n",
           rows, ran, rows - ran, fires ? (double)rows / (double)fires : 0.0, all, bytes,
           all > 0 ? (double)bytes / (double)all : 0.0,
           all > 0 ? (double)payload / (double)all : 0.0,
           file > 0 ? 100.0 * (double)bytes / (double)file : 0.0);
    sqlite3_close(db);
}

static int measure(const zkf_server *zk, enum mode m, int njobs, int window_s)
{
    char ns[32], db[128];
    snprintf(ns, sizeof ns, "ledger_%s", mode_name[m]);
    snprintf(db, sizeof db, "/tmp/ejob-ledger-bench-%d-%s.db", (int)getpid(), mode_name[m]);
    unlink(db);
    ej_registry *reg = NULL;
    struct ej_registry_opts ro = {.servers = zkf_connect_string(zk),
                                  .namespace_ = ns,
                                  .session_timeout_ms = 15000,
                                  .connection_timeout_ms = 15000};
    if (ej_registry_create(&reg, &ro) != 0)
        return -1;
    ej_event_bus *bus = NULL;
    struct sink sink = {.ledger = m == LEDGER};
    if (m != NONE) {
        struct ej_event_bus_opts bo = {.capacity = 100000};
        struct ej_trace_store_opts so = {.target = {.kind = EJ_TRACE_SQLITE, .url = db}};
        if (ej_event_bus_create(&bo, &bus) != 0 || ej_trace_store_create(&so, &sink.store) != 0)
            return -1;
        ej_event_bus_add_sink(bus, sink_fn, &sink);
    }
    struct ej_job_def def = {.type = EJ_JOB_TYPE_SIMPLE, .simple = item};
    struct ej_job_opts jo = {.def = &def, .ip = "127.0.9.3", .events = bus};
    ej_job **jobs = calloc((size_t)njobs, sizeof *jobs);
    for (int j = 0; jobs && j < njobs; j++) {
        char name[32];
        snprintf(name, sizeof name, "j%d", j);
        struct ej_job_config cfg;
        ej_job_config_init(&cfg);
        ej_job_config_set_str(&cfg.job_name, name);
        ej_job_config_set_str(&cfg.cron, CRON);
        cfg.sharding_total_count = 1;
        cfg.overwrite = true;
        cfg.job_type = EJ_JOB_TYPE_SIMPLE;
        if (ej_job_create(reg, &cfg, &jo, &jobs[j]) != 0)
            return -1;
        ej_job_config_fini(&cfg);
    }
    if (jobs == NULL || ej_jobs_start(jobs, (size_t)njobs, NULL) != 0)
        return -1;
    sleep_ms(3000); /* past the start-up's first fires */
    int64_t w0 = (epoch_ms() / 1000 + 1) * 1000;
    pthread_mutex_lock(&runs.mu);
    runs.n = 0;
    runs.w0 = w0;
    runs.w1 = w0 + (int64_t)window_s * 1000;
    pthread_mutex_unlock(&runs.mu);
    struct ej_trace_stats st0 = {0}, st1 = {0};
    sleep_ms(w0 - epoch_ms());
    if (sink.store)
        ej_trace_store_stats(sink.store, &st0);
    sleep_ms(runs.w1 - epoch_ms());
    if (sink.store)
        ej_trace_store_stats(sink.store, &st1);
    sleep_ms(1500);
    ej_jobs_destroy(jobs, (size_t)njobs);
    free(jobs);
    ej_event_bus_destroy(bus);
    ej_trace_store_destroy(sink.store);
    ej_registry_destroy(reg);

    pthread_mutex_lock(&runs.mu);
    size_t n = runs.n;
    qsort(runs.late, n, sizeof *runs.late, cmp_i64);
    long expected = (long)njobs * window_s;
    printf("history %s: %d jobs x 1 fire/s, window %d s: %zu runs of %ld fires (%.1f%%)\n",
           mode_name[m], njobs, window_s, n, expected, 100.0 * (double)n / (double)expected);
    if (n > 0)
        printf("  lateness (ms): p50 %" PRId64 ", p99 %" PRId64 ", max %" PRId64 "\n",
               runs.late[n / 2], runs.late[n * 99 / 100], runs.late[n - 1]);
    pthread_mutex_unlock(&runs.mu);
    if (m != NONE) {
        uint64_t ev = st1.written - st0.written, tx = st1.batches - st0.batches;
        printf("  store: %.0f events/s written, %.1f a fire, %.0f transactions/s; dropped %" PRIu64
               ", rejected %" PRIu64 "\n",
               (double)ev / window_s, n ? (double)ev / (double)n : 0.0, (double)tx / window_s,
               st1.dropped, st1.rejected);
    }
    if (m == LEDGER)
        ledger_cost(db, w0, runs.w1, (long)n);
    fflush(stdout);
    unlink(db);
    char wal[160];
    snprintf(wal, sizeof wal, "%s-wal", db);
    unlink(wal);
    snprintf(wal, sizeof wal, "%s-shm", db);
    unlink(wal);
    return 0;
}

int main(int argc, char **argv)
{
    int njobs = 1000, window_s = 20;
    static const struct option lo[] = {
        {"jobs", required_argument, 0, 'j'}, {"window", required_argument, 0, 'w'}, {0, 0, 0, 0}};
    int ch;
    while ((ch = getopt_long(argc, argv, "", lo, NULL)) != -1) {
        if (ch == 'j')
            njobs = atoi(optarg);
        else if (ch == 'w')
            window_s = atoi(optarg);
        else {
            fprintf(stderr, "usage: ledger_bench [--jobs N] [--window S]\n");
            return 2;
        }
    }
    if (njobs < 1 || window_s < 1) {
        fprintf(stderr, "ledger_bench: bad --jobs or --window\n");
        return 2;
    }
    ej_log_set_level(EJ_LOG_WARN); /* a line per job at start and stop otherwise */
    runs.cap = (size_t)njobs * (size_t)window_s * 2;
    runs.late = malloc(runs.cap * sizeof *runs.late);
    zkf_server *zk = NULL;
    zkf_opts zo = {.tick_ms = 1000};
    if (runs.late == NULL || zkf_start(&zk, &zo) != 0) {
        fprintf(stderr, "ledger_bench: cannot start ZooKeeper\n");
        return 1;
    }
    int rc = 0;
    for (int m = NONE; m <= LEDGER && rc == 0; m++)
        if (measure(zk, (enum mode)m, njobs, window_s) != 0) {
            fprintf(stderr, "ledger_bench: the %s run failed\n", mode_name[m]);
            rc = 1;
        }
    zkf_destroy(zk);
    free(runs.late);
    return rc;
}
