/*
 * The trace module on a real SQLite file: ElasticJob's DDL, the
 * insert-then-update semantics and its out-of-order fallback, 4000
 * character cuts, binary output, the read API, retention, and the store
 * staying out of the way when the file is full or read-only.
 */
#include <errno.h>
#include <setjmp.h>
#include <signal.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sched.h>
#include <sys/mount.h>
#include <sys/resource.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include <cmocka.h>
#include <sqlite3.h>

#include "common/util.h"
#include "config/daemon_file.h"
#include "ejob/config.h"
#include "ejob/error.h"
#include "ejob/trace.h"
#include "trace/internal.h"

static char dir[256];
/* A tmpfs of our own (private mount namespace) when running as root, for
 * the read-only case; "" when not available. */
static char tmpfs_dir[300];

static char *path_in(const char *name)
{
    static char buf[4][400];
    static int k;
    char *b = buf[k++ % 4];
    snprintf(b, 400, "%s/%s", dir, name);
    return b;
}

static ej_trace_store *open_store(const char *path, int retention)
{
    struct ej_trace_store_opts o = {
        .target = {.kind = EJ_TRACE_SQLITE, .url = path},
        .retention_days = retention,
        .retry_max_ms = 200,
    };
    ej_trace_store *s = NULL;
    assert_int_equal(ej_trace_store_create(&o, &s), 0);
    return s;
}

static ej_trace_reader *open_reader(const char *path)
{
    struct ej_trace_target t = {.kind = EJ_TRACE_SQLITE, .url = path};
    ej_trace_reader *r = NULL;
    char err[256] = "";
    int rc = ej_trace_reader_open(&t, &r, err, sizeof err);
    if (rc != 0)
        fprintf(stderr, "reader: %s\n", err);
    assert_int_equal(rc, 0);
    return r;
}

static ej_execution_event exec_event(const char *job, int item, const char *instance,
                                     int64_t start_ms, int64_t end_ms, bool ok)
{
    static char task[8][256];
    static int k;
    char *t = task[k++ % 8];
    snprintf(t, 256, "%s@-@%d@-@READY@-@%s", job, item, instance);
    ej_execution_event e = {
        .job_name = job,
        .task_id = t,
        .hostname = "host-a",
        .ip = "10.0.0.7",
        .sharding_item = item,
        .execution_source = EJ_EXEC_NORMAL_TRIGGER,
        .is_success = ok,
        .start_time_ms = start_ms,
        .complete_time_ms = end_ms,
    };
    ej_event_new_id(e.id);
    return e;
}

static void post_exec(ej_trace_store *s, const ej_execution_event *e)
{
    ej_event ev = {.type = EJ_EVENT_EXECUTION};
    ev.u.execution = *e;
    assert_int_equal(ej_trace_store_post(s, &ev), 0);
}

static void post_status(ej_trace_store *s, const char *task, ej_task_state st, int64_t when,
                        const char *msg)
{
    ej_event ev = {.type = EJ_EVENT_STATUS};
    ej_status_event *e = &ev.u.status;
    ej_event_new_id(e->id);
    e->job_name = "job";
    e->task_id = task;
    e->slave_id = "10.0.0.7";
    e->sharding_item = "[0, 1]";
    e->state = st;
    e->message = msg;
    e->creation_time_ms = when;
    assert_int_equal(ej_trace_store_post(s, &ev), 0);
}

/* One value of a SQL query on the file, as text ("" for NULL). */
static char *sql1(const char *path, const char *sql)
{
    sqlite3 *db = NULL;
    assert_int_equal(sqlite3_open_v2(path, &db, SQLITE_OPEN_READONLY, NULL), SQLITE_OK);
    sqlite3_stmt *st = NULL;
    assert_int_equal(sqlite3_prepare_v2(db, sql, -1, &st, NULL), SQLITE_OK);
    char *out = NULL;
    if (sqlite3_step(st) == SQLITE_ROW) {
        const unsigned char *t = sqlite3_column_text(st, 0);
        out = strdup(t ? (const char *)t : "");
    }
    sqlite3_finalize(st);
    sqlite3_close(db);
    return out ? out : strdup("<no row>");
}

static void assert_sql(const char *path, const char *sql, const char *want)
{
    char *got = sql1(path, sql);
    if (strcmp(got, want) != 0)
        fprintf(stderr, "%s\n  got  %s\n  want %s\n", sql, got, want);
    assert_string_equal(got, want);
    free(got);
}

/* ------------------------------------------------------------- schema */

static void test_schema_is_elasticjobs(void **state)
{
    (void)state;
    const char *db = path_in("schema.db");
    ej_trace_store *s = open_store(db, 7);
    ej_execution_event e = exec_event("job", 0, "10.0.0.7@-@1", ej__now_ms(), 0, false);
    post_exec(s, &e);
    assert_int_equal(ej_trace_store_flush(s, 5000), 0);
    ej_trace_store_destroy(s);
    /* name:type:notnull:pk, in order, as JobEventRdbStorage 2.1.5 creates
     * them. */
    assert_sql(db,
               "SELECT group_concat(name || ':' || type || ':' || \"notnull\" || ':' || pk, ' ') "
               "FROM pragma_table_info('JOB_EXECUTION_LOG')",
               "id:VARCHAR(40):1:1 job_name:VARCHAR(100):1:0 task_id:VARCHAR(255):1:0 "
               "hostname:VARCHAR(255):1:0 ip:VARCHAR(50):1:0 sharding_item:INT:1:0 "
               "execution_source:VARCHAR(20):1:0 failure_cause:VARCHAR(4000):0:0 "
               "is_success:INT:1:0 start_time:TIMESTAMP:0:0 complete_time:TIMESTAMP:0:0");
    assert_sql(db,
               "SELECT group_concat(name || ':' || type || ':' || \"notnull\" || ':' || pk, ' ') "
               "FROM pragma_table_info('JOB_STATUS_TRACE_LOG')",
               "id:VARCHAR(40):1:1 job_name:VARCHAR(100):1:0 original_task_id:VARCHAR(255):1:0 "
               "task_id:VARCHAR(255):1:0 slave_id:VARCHAR(50):1:0 source:VARCHAR(50):1:0 "
               "execution_type:VARCHAR(20):1:0 sharding_item:VARCHAR(100):1:0 "
               "state:VARCHAR(20):1:0 message:VARCHAR(4000):0:0 creation_time:TIMESTAMP:0:0");
    assert_sql(db, "SELECT group_concat(name, ',') FROM pragma_index_info('TASK_ID_STATE_INDEX')",
               "task_id,state");
    assert_sql(db, "PRAGMA journal_mode", "wal");
}

/* ------------------------------------------------------- write semantics */

static void test_start_then_end_and_out_of_order(void **state)
{
    (void)state;
    const char *db = path_in("order.db");
    ej_trace_store *s = open_store(db, 0);
    int64_t t0 = 1767261600123; /* 2026-01-01 10:00:00.123 UTC */
    ej_execution_event start = exec_event("job", 3, "10.0.0.7@-@42", t0, 0, false);
    post_exec(s, &start);
    ej_execution_event end = start;
    end.complete_time_ms = t0 + 812;
    end.is_success = true;
    post_exec(s, &end);
    /* An end whose start never came, then its late start (ignored). */
    ej_execution_event lone = exec_event("job", 4, "10.0.0.7@-@42", t0, t0 + 5, false);
    lone.failure_cause = "boom";
    post_exec(s, &lone);
    ej_execution_event late = lone;
    late.complete_time_ms = 0;
    late.failure_cause = NULL;
    late.start_time_ms = t0 - 1000;
    post_exec(s, &late);
    assert_int_equal(ej_trace_store_flush(s, 5000), 0);
    struct ej_trace_stats st;
    ej_trace_store_stats(s, &st);
    assert_int_equal(st.written, 4);
    assert_int_equal(st.rejected, 0);
    ej_trace_store_destroy(s);

    char want[200], t[32], t2[32];
    ej__trace_format_time(t0, t);
    ej__trace_format_time(t0 + 812, t2);
    assert_int_equal(strlen(t), 23); /* YYYY-MM-DD HH:MM:SS.mmm */
    snprintf(want, sizeof want, "3|1|%s|%s|NORMAL_TRIGGER|", t, t2);
    char q[300];
    snprintf(q, sizeof q,
             "SELECT sharding_item || '|' || is_success || '|' || start_time || '|' || "
             "complete_time || '|' || execution_source || '|' || ifnull(failure_cause, '') FROM "
             "JOB_EXECUTION_LOG WHERE id = '%s'",
             start.id);
    assert_sql(db, q, want);
    snprintf(q, sizeof q,
             "SELECT is_success || '|' || start_time || '|' || failure_cause FROM "
             "JOB_EXECUTION_LOG WHERE id = '%s'",
             lone.id);
    snprintf(want, sizeof want, "0|%s|boom", t);
    assert_sql(db, q, want);
    assert_sql(db, "SELECT count(*) FROM JOB_EXECUTION_LOG", "2");
    snprintf(q, sizeof q,
             "SELECT duration_ms || '|' || instance_id FROM EJOB_EXECUTION_DETAIL WHERE id = '%s'",
             start.id);
    assert_sql(db, q, "812|10.0.0.7@-@42");
}

static void test_text_cut_and_cleaned(void **state)
{
    (void)state;
    const char *db = path_in("cut.db");
    ej_trace_store *s = open_store(db, 0);
    /* 5000 two-byte characters and a byte that is not UTF-8. */
    char *cause = malloc(10000 + 2);
    for (int i = 0; i < 5000; i++)
        memcpy(cause + 2 * i, "\xc3\xa9", 2);
    memcpy(cause, "\xff", 1);
    cause[1] = 'x';
    cause[10000] = '\0';
    ej_execution_event e = exec_event("job", 0, "10.0.0.7@-@1", ej__now_ms(), ej__now_ms(), false);
    e.failure_cause = cause;
    post_exec(s, &e);
    /* A status message of 4001 characters, and an item list longer than
     * the 100 characters of sharding_item. */
    char *msg = malloc(4002);
    memset(msg, 'm', 4001);
    msg[4001] = '\0';
    post_status(s, "t@-@0@-@READY@-@10.0.0.7@-@1", EJ_TASK_ERROR, ej__now_ms(), msg);
    assert_int_equal(ej_trace_store_flush(s, 5000), 0);
    ej_trace_store_destroy(s);
    assert_sql(db, "SELECT length(failure_cause) FROM JOB_EXECUTION_LOG", "4000");
    assert_sql(db, "SELECT substr(failure_cause, 1, 2) FROM JOB_EXECUTION_LOG", "\xef\xbf\xbdx");
    assert_sql(db, "SELECT failure_cause_truncated FROM EJOB_EXECUTION_DETAIL", "1");
    assert_sql(db, "SELECT length(message) || state FROM JOB_STATUS_TRACE_LOG", "4000TASK_ERROR");
    assert_sql(db,
               "SELECT original_task_id || '|' || source || '|' || execution_type || '|' || "
               "sharding_item FROM JOB_STATUS_TRACE_LOG",
               "|LITE_EXECUTOR|READY|[0, 1]");
    free(cause);
    free(msg);
}

static void test_binary_output_round_trip(void **state)
{
    (void)state;
    const char *db = path_in("bin.db");
    ej_trace_store *s = open_store(db, 0);
    static const char out[] = "a\0b\xff\x01\n";
    ej_execution_event e =
        exec_event("job", 1, "10.0.0.7@-@1", ej__now_ms(), ej__now_ms() + 3, true);
    e.output = out;
    e.output_len = sizeof out - 1;
    e.output_truncated = true;
    e.error_output = "err\n";
    e.has_exit_code = true;
    e.exit_code = 0;
    e.fencing_token = 4294967342LL;
    e.http_status = 503;
    post_exec(s, &e);
    assert_int_equal(ej_trace_store_flush(s, 5000), 0);
    ej_trace_store_destroy(s);
    assert_sql(db, "SELECT typeof(stdout) || length(stdout) FROM EJOB_EXECUTION_DETAIL", "blob6");

    ej_trace_reader *r = open_reader(db);
    struct ej_trace_execution_detail d;
    char prefix[9];
    snprintf(prefix, sizeof prefix, "%.8s", e.id);
    assert_int_equal(ej_trace_get_execution(r, prefix, &d), 0);
    assert_string_equal(d.execution.id, e.id);
    assert_int_equal(d.execution.out_len, sizeof out - 1);
    assert_memory_equal(d.execution.out, out, sizeof out - 1);
    assert_true(d.execution.out_truncated);
    assert_string_equal((char *)d.execution.err, "err\n");
    assert_false(d.execution.err_truncated);
    assert_int_equal(d.execution.exit_code, 0);
    assert_int_equal(d.execution.fencing_token, 4294967342LL);
    assert_int_equal(d.execution.duration_ms, 3);
    assert_int_equal(d.execution.http_status, 503);
    ej_trace_execution_detail_fini(&d);
    assert_int_equal(ej_trace_get_execution(r, "ffffffff-no", &d), EJ_ENOTFOUND);
    ej_trace_reader_close(r);
}

/* ----------------------------------------------------------- reading */

static void test_query_filters(void **state)
{
    (void)state;
    const char *db = path_in("query.db");
    ej_trace_store *s = open_store(db, 0);
    int64_t now = ej__now_ms();
    /* a: items 0..3 at now-4h..now-1h on two instances; item 2 failed;
     * b: item 0 now, unfinished. */
    char ids[4][EJ_EVENT_ID_LEN];
    for (int i = 0; i < 4; i++) {
        ej_execution_event e =
            exec_event("a", i, i % 2 ? "10.0.0.8@-@9" : "10.0.0.7@-@1", now - (4 - i) * 3600000LL,
                       now - (4 - i) * 3600000LL + 10, i != 2);
        if (i == 3)
            e.execution_source = EJ_EXEC_FAILOVER;
        memcpy(ids[i], e.id, sizeof e.id);
        post_exec(s, &e);
    }
    ej_execution_event b = exec_event("b", 0, "10.0.0.7@-@1", now, 0, false);
    post_exec(s, &b);
    assert_int_equal(ej_trace_store_flush(s, 5000), 0);
    ej_trace_store_destroy(s);

    ej_trace_reader *r = open_reader(db);
    struct ej_trace_execution_list l;
    assert_int_equal(ej_trace_query_executions(r, NULL, &l), 0);
    assert_int_equal(l.count, 5);
    assert_string_equal(l.rows[0].job_name, "b"); /* newest first */
    assert_false(l.rows[0].completed);
    assert_string_equal(l.rows[1].id, ids[3]);
    assert_string_equal(l.rows[1].execution_source, "FAILOVER");
    assert_string_equal(l.rows[1].instance_id, "10.0.0.8@-@9");
    ej_trace_execution_list_fini(&l);

    struct ej_trace_query q = {.job_name = "a", .item = -1};
    assert_int_equal(ej_trace_query_executions(r, &q, &l), 0);
    assert_int_equal(l.count, 4);
    ej_trace_execution_list_fini(&l);
    q.failed_only = true;
    assert_int_equal(ej_trace_query_executions(r, &q, &l), 0);
    assert_int_equal(l.count, 1);
    assert_string_equal(l.rows[0].id, ids[2]);
    ej_trace_execution_list_fini(&l);
    q = (struct ej_trace_query){.item = 1};
    assert_int_equal(ej_trace_query_executions(r, &q, &l), 0);
    assert_int_equal(l.count, 1);
    assert_string_equal(l.rows[0].id, ids[1]);
    ej_trace_execution_list_fini(&l);
    q = (struct ej_trace_query){.item = -1, .instance_id = "10.0.0.8@-@9"};
    assert_int_equal(ej_trace_query_executions(r, &q, &l), 0);
    assert_int_equal(l.count, 2);
    ej_trace_execution_list_fini(&l);
    /* since 2.5 h ago, until 30 min ago: items 2 and 3. */
    q = (struct ej_trace_query){.item = -1, .since_ms = now - 9000000, .until_ms = now - 1800000};
    assert_int_equal(ej_trace_query_executions(r, &q, &l), 0);
    assert_int_equal(l.count, 2);
    assert_string_equal(l.rows[0].id, ids[3]);
    assert_string_equal(l.rows[1].id, ids[2]);
    ej_trace_execution_list_fini(&l);
    q = (struct ej_trace_query){.item = -1, .limit = 2};
    assert_int_equal(ej_trace_query_executions(r, &q, &l), 0);
    assert_int_equal(l.count, 2);
    ej_trace_execution_list_fini(&l);
    ej_trace_reader_close(r);
}

static void test_status_trail_of_one_fire(void **state)
{
    (void)state;
    const char *db = path_in("trail.db");
    ej_trace_store *s = open_store(db, 0);
    const char *task = "job@-@0,1@-@READY@-@10.0.0.7@-@1";
    int64_t t = 1767261600000;
    /* Two fires of the same task id, 2 s apart. */
    ej_execution_event second;
    for (int f = 0; f < 2; f++) {
        int64_t b = t + f * 2000;
        post_status(s, task, EJ_TASK_STAGING, b, "Job 'job' execute begin.");
        post_status(s, task, EJ_TASK_RUNNING, b + 5, NULL);
        ej_execution_event e = exec_event("job", 0, "10.0.0.7@-@1", b + 6, b + 500, true);
        e.task_id = task;
        post_exec(s, &e);
        post_status(s, task, EJ_TASK_FINISHED, b + 501, NULL);
        second = e;
    }
    assert_int_equal(ej_trace_store_flush(s, 5000), 0);
    ej_trace_store_destroy(s);
    ej_trace_reader *r = open_reader(db);
    struct ej_trace_execution_detail d;
    assert_int_equal(ej_trace_get_execution(r, second.id, &d), 0);
    assert_int_equal(d.trail_count, 3);
    assert_string_equal(d.trail[0].state, "TASK_STAGING");
    assert_int_equal(d.trail[0].creation_ms, t + 2000);
    assert_string_equal(d.trail[0].message, "Job 'job' execute begin.");
    assert_string_equal(d.trail[2].state, "TASK_FINISHED");
    assert_int_equal(d.trail[2].creation_ms, t + 2501);
    ej_trace_execution_detail_fini(&d);
    ej_trace_reader_close(r);
}

static void test_retention_purges_old_rows(void **state)
{
    (void)state;
    const char *db = path_in("retention.db");
    ej_trace_store *s = open_store(db, 7);
    int64_t now = ej__now_ms();
    ej_execution_event old =
        exec_event("job", 0, "10.0.0.7@-@1", now - 8 * 86400000LL, now - 8 * 86400000LL + 1, true);
    ej_execution_event young =
        exec_event("job", 0, "10.0.0.7@-@1", now - 6 * 86400000LL, now - 6 * 86400000LL + 1, true);
    post_exec(s, &old);
    post_exec(s, &young);
    post_status(s, "t", EJ_TASK_STAGING, now - 8 * 86400000LL, NULL);
    post_status(s, "t", EJ_TASK_STAGING, now, NULL);
    assert_int_equal(ej_trace_store_flush(s, 5000), 0);
    assert_int_equal(ej_trace_store_purge(s, 5000), 0);
    struct ej_trace_stats st;
    ej_trace_store_stats(s, &st);
    assert_int_equal(st.purged, 5); /* execution, its detail, result and instants, one status */
    ej_trace_store_destroy(s);
    char q[200];
    snprintf(q, sizeof q, "SELECT group_concat(id) FROM JOB_EXECUTION_LOG");
    assert_sql(db, q, young.id);
    assert_sql(db, "SELECT count(*) FROM JOB_STATUS_TRACE_LOG", "1");
    assert_sql(db, "SELECT count(*) FROM EJOB_EXECUTION_DETAIL", "1");
}

/* ------------------------------------------------------------- faults */

/* Posts n events with big outputs; each post must return at once. */
static void post_many(ej_trace_store *s, int n, size_t out_bytes, int64_t *worst_us)
{
    char *out = malloc(out_bytes);
    memset(out, 'o', out_bytes);
    for (int i = 0; i < n; i++) {
        ej_execution_event e =
            exec_event("full", i, "10.0.0.7@-@1", ej__now_ms(), ej__now_ms(), true);
        e.output = out;
        e.output_len = out_bytes;
        struct timespec a, b;
        clock_gettime(CLOCK_MONOTONIC, &a);
        post_exec(s, &e);
        clock_gettime(CLOCK_MONOTONIC, &b);
        int64_t us = (b.tv_sec - a.tv_sec) * 1000000 + (b.tv_nsec - a.tv_nsec) / 1000;
        if (us > *worst_us)
            *worst_us = us;
    }
    free(out);
}

static bool wait_stat(ej_trace_store *s, bool (*ok)(const struct ej_trace_stats *), int secs)
{
    for (int i = 0; i < secs * 20; i++) {
        struct ej_trace_stats st;
        ej_trace_store_stats(s, &st);
        if (ok(&st))
            return true;
        ej__sleep_ms(50);
    }
    return false;
}

static bool failing(const struct ej_trace_stats *st)
{
    return st->failures >= 2 && !st->connected;
}

static void test_disk_full_keeps_events(void **state)
{
    (void)state;
    const char *db = path_in("full.db");
    ej_trace_store *s = open_store(db, 0);
    ej_execution_event e = exec_event("full", 0, "10.0.0.7@-@1", ej__now_ms(), ej__now_ms(), true);
    post_exec(s, &e);
    assert_int_equal(ej_trace_store_flush(s, 5000), 0);
    /* The file may not grow past 64 KiB more than it is now. */
    struct stat sb;
    assert_int_equal(stat(db, &sb), 0);
    struct rlimit old, lim;
    getrlimit(RLIMIT_FSIZE, &old);
    lim = old;
    lim.rlim_cur = (rlim_t)sb.st_size + 65536;
    signal(SIGXFSZ, SIG_IGN);
    assert_int_equal(setrlimit(RLIMIT_FSIZE, &lim), 0);
    int64_t worst = 0;
    post_many(s, 40, 100000, &worst);
    assert_true(wait_stat(s, failing, 10));
    struct ej_trace_stats st;
    ej_trace_store_stats(s, &st);
    assert_int_equal(st.written, 1);
    assert_int_equal(st.queued, 40);
    assert_int_equal(st.dropped, 0);
    assert_true(strlen(st.last_error) > 0);
    fprintf(stderr, "disk full: \"%s\", worst post %lld us\n", st.last_error, (long long)worst);
    /* Posting never waited for the database (a generous bound: the
     * machine may be loaded; the locked case below has a sharper one). */
    assert_true(worst < 1000000);
    /* Room again: everything buffered is written. */
    assert_int_equal(setrlimit(RLIMIT_FSIZE, &old), 0);
    assert_int_equal(ej_trace_store_flush(s, 10000), 0);
    ej_trace_store_stats(s, &st);
    assert_int_equal(st.written, 41);
    assert_int_equal(st.queued, 0);
    ej_trace_store_destroy(s);
    assert_sql(db, "SELECT count(*) FROM EJOB_EXECUTION_DETAIL WHERE length(stdout) = 100000",
               "40");
}

/* Makes the file's directory read-only (a private tmpfs remounted
 * read-only when root, whom modes do not stop) or writable again. */
static void set_read_only(const char *db, bool ro)
{
    if (getuid() == 0) {
        assert_int_equal(mount(NULL, tmpfs_dir, NULL, MS_REMOUNT | (ro ? MS_RDONLY : 0), "size=4m"),
                         0);
        return;
    }
    char wal[420];
    snprintf(wal, sizeof wal, "%s-wal", db);
    chmod(db, ro ? 0444 : 0644);
    chmod(wal, ro ? 0444 : 0644);
    chmod(dir, ro ? 0555 : 0755);
}

static void test_read_only_file_keeps_events(void **state)
{
    (void)state;
    if (getuid() == 0 && tmpfs_dir[0] == '\0') {
        fprintf(stderr, "SKIP read-only: root, and no private tmpfs to make read-only\n");
        skip();
    }
    char db[400];
    snprintf(db, sizeof db, "%s/ro.db", getuid() == 0 ? tmpfs_dir : dir);
    ej_trace_store *s = open_store(db, 0);
    ej_execution_event e = exec_event("ro", 0, "10.0.0.7@-@1", ej__now_ms(), 0, false);
    post_exec(s, &e);
    assert_int_equal(ej_trace_store_flush(s, 5000), 0);
    ej_trace_store_destroy(s);
    /* A daemon starting on a file it cannot write. */
    set_read_only(db, true);
    s = open_store(db, 0);
    int64_t worst = 0;
    for (int i = 0; i < 20; i++) {
        ej_execution_event x =
            exec_event("ro", i, "10.0.0.7@-@1", ej__now_ms(), ej__now_ms(), true);
        struct timespec a, b;
        clock_gettime(CLOCK_MONOTONIC, &a);
        post_exec(s, &x);
        clock_gettime(CLOCK_MONOTONIC, &b);
        int64_t us = (b.tv_sec - a.tv_sec) * 1000000 + (b.tv_nsec - a.tv_nsec) / 1000;
        worst = us > worst ? us : worst;
    }
    assert_true(wait_stat(s, failing, 10));
    struct ej_trace_stats st;
    ej_trace_store_stats(s, &st);
    fprintf(stderr, "read-only: \"%s\"\n", st.last_error);
    assert_int_equal(st.written, 0);
    assert_int_equal(st.queued, 20);
    assert_true(worst < 1000000);
    set_read_only(db, false);
    assert_int_equal(ej_trace_store_flush(s, 10000), 0);
    ej_trace_store_stats(s, &st);
    assert_int_equal(st.written, 20);
    ej_trace_store_destroy(s);
    assert_sql(db, "SELECT count(*) FROM JOB_EXECUTION_LOG", "21");
}

/* Another process's writer holds the file's lock for 3 s while events
 * come: the store waits for it (busy timeout), posting does not. */
static void test_locked_database_does_not_block_posts(void **state)
{
    (void)state;
    const char *db = path_in("locked.db");
    struct ej_trace_store_opts o = {
        .target = {.kind = EJ_TRACE_SQLITE, .url = db},
        .busy_timeout_ms = 2500,
        .retry_max_ms = 200,
    };
    ej_trace_store *s = NULL;
    assert_int_equal(ej_trace_store_create(&o, &s), 0);
    ej_execution_event e = exec_event("lock", 0, "10.0.0.7@-@1", ej__now_ms(), 0, false);
    post_exec(s, &e);
    assert_int_equal(ej_trace_store_flush(s, 5000), 0);
    sqlite3 *other = NULL;
    assert_int_equal(sqlite3_open(db, &other), SQLITE_OK);
    assert_int_equal(sqlite3_exec(other, "BEGIN IMMEDIATE", NULL, NULL, NULL), SQLITE_OK);
    int64_t t0 = ej__mono_ms(), worst = 0;
    int n = 0;
    while (ej__mono_ms() - t0 < 3000) {
        int64_t w = 0;
        post_many(s, 1, 1000, &w);
        worst = w > worst ? w : worst;
        n++;
        ej__sleep_ms(20);
    }
    struct ej_trace_stats st;
    ej_trace_store_stats(s, &st);
    assert_int_equal(st.written, 1); /* nothing got past the lock */
    sqlite3_exec(other, "COMMIT", NULL, NULL, NULL);
    sqlite3_close(other);
    fprintf(stderr, "locked: %d posts, worst %lld us, store: %s\n", n, (long long)worst,
            st.last_error);
    /* The store waited 2.5 s at a time for the lock; no post waited for it. */
    assert_true(worst < 500000);
    assert_int_equal(ej_trace_store_flush(s, 10000), 0);
    ej_trace_store_stats(s, &st);
    assert_int_equal(st.written, (uint64_t)n + 1);
    ej_trace_store_destroy(s);
}

static void test_full_queue_is_counted(void **state)
{
    (void)state;
    /* A database that cannot be opened: its directory does not exist. */
    struct ej_trace_store_opts o = {
        .target = {.kind = EJ_TRACE_SQLITE, .url = "/nonexistent-ejob-dir/x.db"},
        .queue_capacity = 10,
        .flush_timeout_ms = 300,
    };
    ej_trace_store *s = NULL;
    assert_int_equal(ej_trace_store_create(&o, &s), 0);
    int refused = 0;
    for (int i = 0; i < 25; i++) {
        ej_execution_event e = exec_event("q", i, "10.0.0.7@-@1", ej__now_ms(), 0, false);
        ej_event ev = {.type = EJ_EVENT_EXECUTION};
        ev.u.execution = e;
        if (ej_trace_store_post(s, &ev) == EJ_EAGAIN)
            refused++;
    }
    assert_int_equal(refused, 15);
    struct ej_trace_stats st;
    ej_trace_store_stats(s, &st);
    assert_int_equal(st.accepted, 10);
    assert_int_equal(st.dropped, 15);
    assert_int_equal(st.queued, 10);
    assert_int_equal(ej_trace_store_flush(s, 200), EJ_ETIMEDOUT);
    int64_t t0 = ej__mono_ms();
    ej_trace_store_destroy(s); /* gives up after flush_timeout_ms */
    assert_true(ej__mono_ms() - t0 < 3000);
}

static void test_output_over_memory_budget_is_stripped(void **state)
{
    (void)state;
    const char *db = path_in("budget.db");
    struct ej_trace_store_opts o = {
        .target = {.kind = EJ_TRACE_SQLITE, .url = "/nonexistent-ejob-dir/x.db"},
        .queue_bytes = 250000,
        .flush_timeout_ms = 100,
    };
    (void)db;
    ej_trace_store *s = NULL;
    assert_int_equal(ej_trace_store_create(&o, &s), 0);
    int64_t worst = 0;
    post_many(s, 5, 100000, &worst);
    struct ej_trace_stats st;
    ej_trace_store_stats(s, &st);
    assert_int_equal(st.accepted, 5);
    assert_int_equal(st.output_stripped, 3);
    assert_int_equal(st.queued_bytes, 200000);
    ej_trace_store_destroy(s);
}

/* ------------------------------------------------------------ config */

static void test_target_parse(void **state)
{
    (void)state;
    struct ej_trace_target t;
    char err[256];
    assert_int_equal(ej_trace_target_parse("sqlite:/tmp/x.db", &t, err, sizeof err), 0);
    assert_int_equal(t.kind, EJ_TRACE_SQLITE);
    assert_string_equal(t.url, "/tmp/x.db");
    assert_int_equal(ej_trace_target_parse("./h.db", &t, err, sizeof err), 0);
    assert_int_equal(t.kind, EJ_TRACE_SQLITE);
    assert_int_equal(ej_trace_target_parse("postgresql://ejob@db:5432/x", &t, err, sizeof err), 0);
    assert_int_equal(t.kind, EJ_TRACE_POSTGRESQL);
    assert_int_equal(ej_trace_target_parse("postgresql://ejob:pw@db/x", &t, err, sizeof err),
                     EJ_EINVAL);
    assert_non_null(strstr(err, "password"));
    assert_int_equal(ej_trace_target_parse("mysql://db/x", &t, err, sizeof err), EJ_EINVAL);
    assert_non_null(strstr(err, "mysql"));
    assert_int_equal(ej_trace_target_parse("", &t, err, sizeof err), EJ_EINVAL);

    /* libpq's keyword form is PostgreSQL, not a SQLite path, and its
     * password is refused with the URI's words. */
    char uri_err[256];
    assert_int_equal(ej_trace_target_parse("postgres://ejob:pw@db/x", &t, uri_err, sizeof uri_err),
                     EJ_EINVAL);
    assert_int_equal(ej_trace_target_parse("host=db user=ejob dbname=jobs", &t, err, sizeof err),
                     0);
    assert_int_equal(t.kind, EJ_TRACE_POSTGRESQL);
    assert_string_equal(t.url, "host=db user=ejob dbname=jobs");
    assert_int_equal(ej_trace_target_parse(" host = db  port=5432", &t, err, sizeof err), 0);
    assert_int_equal(t.kind, EJ_TRACE_POSTGRESQL);
    assert_int_equal(
        ej_trace_target_parse("host=db user=ejob password=s3cret dbname=jobs", &t, err, sizeof err),
        EJ_EINVAL);
    assert_string_equal(err, uri_err);
    assert_null(strstr(err, "s3cret"));
    assert_int_equal(
        ej_trace_target_parse("host=db password='a b' dbname=jobs", &t, err, sizeof err),
        EJ_EINVAL);
    assert_string_equal(err, uri_err);
    assert_int_equal(
        ej_trace_target_parse("postgresql://db/x?password=s3cret", &t, err, sizeof err), EJ_EINVAL);
    assert_string_equal(err, uri_err);
    assert_int_equal(ej_trace_target_parse("host=db sslpassword=k", &t, err, sizeof err),
                     EJ_EINVAL);
    assert_string_equal(err, uri_err);
    /* A keyword libpq does not know: its words, not a SQLite file. */
    assert_int_equal(ej_trace_target_parse("history=1.db", &t, err, sizeof err), EJ_EINVAL);
    assert_non_null(strstr(err, "bad PostgreSQL connection string"));
    assert_non_null(strstr(err, "history"));
    assert_int_equal(ej_trace_target_parse("host='db", &t, err, sizeof err), EJ_EINVAL);
    /* Such a file is still reachable. */
    assert_int_equal(ej_trace_target_parse("./history=1.db", &t, err, sizeof err), 0);
    assert_int_equal(t.kind, EJ_TRACE_SQLITE);
    assert_int_equal(ej_trace_target_parse("sqlite:history=1.db", &t, err, sizeof err), 0);
    assert_int_equal(t.kind, EJ_TRACE_SQLITE);

    /* The display form never carries a secret, whatever the form. */
    struct ej_trace_target shown = {EJ_TRACE_POSTGRESQL,
                                    "host=db port=5432 user=ejob dbname=jobs "
                                    "password=s3cret sslpassword=k",
                                    NULL};
    char *d = ej_trace_target_display(&shown);
    assert_string_equal(d, "postgresql: host=db port=5432 dbname=jobs user=ejob");
    free(d);
    shown.url = "postgresql://ejob:s3cret@db:5433/my%20jobs?password=again";
    d = ej_trace_target_display(&shown);
    assert_string_equal(d, "postgresql: host=db port=5433 dbname='my jobs' user=ejob");
    free(d);
    shown.url = "host='unterminated password=s3cret";
    d = ej_trace_target_display(&shown);
    assert_string_equal(d, "postgresql:");
    free(d);
    shown.kind = EJ_TRACE_SQLITE;
    shown.url = "/var/lib/ejob/h.db";
    d = ej_trace_target_display(&shown);
    assert_string_equal(d, "sqlite:/var/lib/ejob/h.db");
    free(d);
    assert_null(ej_trace_target_display(NULL));

    char *pw = NULL;
    FILE *f = fopen(path_in("pw"), "w");
    fputs("s3cret\n", f);
    fclose(f);
    assert_int_equal(ej_trace_read_password_file(path_in("pw"), &pw, err, sizeof err), 0);
    assert_string_equal(pw, "s3cret");
    free(pw);
    assert_int_equal(ej_trace_read_password_file(path_in("nope"), &pw, err, sizeof err), -ENOENT);
    assert_non_null(strstr(err, "nope"));
    /* A secret anyone may rewrite is refused, with the fix; the password
     * never shows in the message. */
    assert_int_equal(chmod(path_in("pw"), 0666), 0);
    assert_int_equal(ej_trace_read_password_file(path_in("pw"), &pw, err, sizeof err), EJ_ECONFIG);
    assert_null(pw);
    assert_non_null(strstr(err, "world-writable (mode 666): refused; chmod go-w"));
    assert_null(strstr(err, "s3cret"));
    assert_int_equal(chmod(path_in("pw"), 0620), 0);
    assert_int_equal(ej_trace_read_password_file(path_in("pw"), &pw, err, sizeof err), EJ_ECONFIG);
    assert_non_null(strstr(err, "group-writable"));
    assert_int_equal(chmod(path_in("pw"), 0600), 0);
    assert_int_equal(ej_trace_read_password_file(path_in("pw"), &pw, err, sizeof err), 0);
    free(pw);
}

static int load(const char *yaml, struct ej_daemon_config *d, char *first_err, size_t len)
{
    struct ej_config_errors errs;
    ej_config_errors_init(&errs);
    int rc = ej_daemon_config_load_string(yaml, "jobs.yaml", d, &errs);
    first_err[0] = '\0';
    if (errs.count > 0)
        snprintf(first_err, len, "%s", errs.messages[0]);
    ej_config_errors_fini(&errs);
    return rc;
}

static void test_yaml_tracing_keys(void **state)
{
    (void)state;
    struct ej_daemon_config d;
    char err[512];
    assert_int_equal(load("regCenter: {namespace: n}\n", &d, err, sizeof err), 0);
    assert_int_equal(d.tracing.type, EJ_TRACING_NONE);
    assert_false(d.tracing.off);
    assert_int_equal(d.tracing.retention_days, 7);
    assert_int_equal(d.tracing.output_max_bytes, 65536);
    ej_daemon_config_fini(&d);
    assert_int_equal(
        load("regCenter: {namespace: n}\ntracing: {type: NONE}\n", &d, err, sizeof err), 0);
    assert_true(d.tracing.off);
    ej_daemon_config_fini(&d);
    assert_int_equal(load("regCenter: {namespace: n}\ntracing:\n  type: POSTGRESQL\n  url: "
                          "postgresql://ejob@db/x\n  passwordFile: /etc/ejob/pw\n  "
                          "retentionDays: 0\n  outputMaxBytes: 1024\n",
                          &d, err, sizeof err),
                     0);
    assert_int_equal(d.tracing.type, EJ_TRACING_POSTGRESQL);
    assert_string_equal(d.tracing.password_file, "/etc/ejob/pw");
    assert_int_equal(d.tracing.retention_days, 0);
    assert_int_equal(d.tracing.output_max_bytes, 1024);
    ej_daemon_config_fini(&d);
    assert_int_equal(load("regCenter: {namespace: n}\ntracing:\n  type: SQLITE\n  "
                          "retentionDays: -1\n",
                          &d, err, sizeof err),
                     EJ_ECONFIG);
    assert_string_equal(err, "jobs.yaml:4:18: tracing.retentionDays: must be >= 0 (0 keeps "
                             "forever), got -1");
    ej_daemon_config_fini(&d);
    assert_int_equal(load("regCenter: {namespace: n}\ntracing:\n  type: SQLITE\n  "
                          "outputMaxBytes: 0\n",
                          &d, err, sizeof err),
                     EJ_ECONFIG);
    assert_string_equal(err, "jobs.yaml:4:19: tracing.outputMaxBytes: must be 1..67108864, got 0");
    ej_daemon_config_fini(&d);
}

static int setup_tmpfs(void)
{
    if (getuid() != 0)
        return 0;
    /* Before any thread: unshare(CLONE_NEWNS) refuses a threaded process. */
    snprintf(tmpfs_dir, sizeof tmpfs_dir, "%s/tmpfs", dir);
    if (mkdir(tmpfs_dir, 0755) != 0 || unshare(CLONE_NEWNS) != 0 ||
        mount(NULL, "/", NULL, MS_REC | MS_PRIVATE, NULL) != 0 ||
        mount("ejob-trace-test", tmpfs_dir, "tmpfs", 0, "size=4m") != 0) {
        fprintf(stderr, "no private tmpfs: %s\n", strerror(errno));
        tmpfs_dir[0] = '\0';
    }
    return 0;
}

int main(void)
{
    snprintf(dir, sizeof dir, "/tmp/ejob-trace-test-XXXXXX");
    if (mkdtemp(dir) == NULL)
        return 1;
    setup_tmpfs();
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_schema_is_elasticjobs),
        cmocka_unit_test(test_start_then_end_and_out_of_order),
        cmocka_unit_test(test_text_cut_and_cleaned),
        cmocka_unit_test(test_binary_output_round_trip),
        cmocka_unit_test(test_query_filters),
        cmocka_unit_test(test_status_trail_of_one_fire),
        cmocka_unit_test(test_retention_purges_old_rows),
        cmocka_unit_test(test_disk_full_keeps_events),
        cmocka_unit_test(test_read_only_file_keeps_events),
        cmocka_unit_test(test_locked_database_does_not_block_posts),
        cmocka_unit_test(test_full_queue_is_counted),
        cmocka_unit_test(test_output_over_memory_budget_is_stripped),
        cmocka_unit_test(test_target_parse),
        cmocka_unit_test(test_yaml_tracing_keys),
    };
    int rc = cmocka_run_group_tests(tests, NULL, NULL);
    if (tmpfs_dir[0])
        umount2(tmpfs_dir, MNT_DETACH);
    char cmd[300];
    snprintf(cmd, sizeof cmd, "rm -rf '%s'", dir);
    if (system(cmd) != 0)
        fprintf(stderr, "could not remove %s\n", dir);
    return rc;
}
