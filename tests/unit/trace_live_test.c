/*
 * Live output and per-job retention on a real SQLite file: a running run's
 * pieces (EJOB_EXECUTION_OUTPUT) read back from byte offsets, a gap a full
 * queue left stepped over, the pieces replaced by the detail at the run's
 * end; each job's own retention (EJOB_JOB_RETENTION) with failed runs kept
 * longer, honoured also by a store that never set the rule (another
 * daemon sharing the database), while other jobs keep the store's.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <cmocka.h>
#include <sqlite3.h>

#include "common/util.h"
#include "ejob/error.h"
#include "ejob/trace.h"

#define DAY (86400 * 1000LL)

static char dir[256];

static const char *path_in(const char *name)
{
    static char buf[400];
    snprintf(buf, sizeof buf, "%s/%s", dir, name);
    return buf;
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
    assert_int_equal(ej_trace_reader_open(&t, &r, err, sizeof err), 0);
    return r;
}

static ej_execution_event run(const char *job, int64_t start_ms, int64_t end_ms, bool ok)
{
    ej_execution_event e = {
        .job_name = job,
        .task_id = "t@-@0@-@READY@-@10.0.0.7@-@1",
        .hostname = "h",
        .ip = "10.0.0.7",
        .execution_source = EJ_EXEC_NORMAL_TRIGGER,
        .is_success = ok,
        .start_time_ms = start_ms,
        .complete_time_ms = end_ms,
    };
    ej_event_new_id(e.id);
    return e;
}

static void post_run(ej_trace_store *s, const ej_execution_event *e)
{
    ej_event ev = {.type = EJ_EVENT_EXECUTION};
    ev.u.execution = *e;
    assert_int_equal(ej_trace_store_post(s, &ev), 0);
}

static void post_piece(ej_trace_store *s, const char *id, int stream, int64_t off, const char *data)
{
    ej_event ev = {.type = EJ_EVENT_OUTPUT};
    ej_output_event *o = &ev.u.output;
    snprintf(o->execution_id, sizeof o->execution_id, "%s", id);
    o->job_name = "liveJob";
    o->stream = stream;
    o->offset = off;
    o->data = data;
    o->len = strlen(data);
    o->time_ms = ej__now_ms();
    assert_int_equal(ej_trace_store_post(s, &ev), 0);
}

static int count(const char *db, const char *sql)
{
    sqlite3 *h = NULL;
    assert_int_equal(sqlite3_open_v2(db, &h, SQLITE_OPEN_READONLY, NULL), SQLITE_OK);
    sqlite3_stmt *st = NULL;
    assert_int_equal(sqlite3_prepare_v2(h, sql, -1, &st, NULL), SQLITE_OK);
    int n = sqlite3_step(st) == SQLITE_ROW ? sqlite3_column_int(st, 0) : -1;
    sqlite3_finalize(st);
    sqlite3_close(h);
    return n;
}

static void expect_bytes(const unsigned char *got, size_t len, const char *want)
{
    if (len != strlen(want) || (len && memcmp(got, want, len) != 0))
        fprintf(stderr, "got \"%.*s\", want \"%s\"\n", (int)len, got ? (const char *)got : "",
                want);
    assert_int_equal(len, strlen(want));
    if (len)
        assert_memory_equal(got, want, len);
}

static void test_live_pieces_then_the_detail(void **state)
{
    (void)state;
    const char *db = path_in("live.db");
    ej_trace_store *s = open_store(db, 7);
    int64_t now = ej__now_ms();
    ej_execution_event e = run("liveJob", now, 0, false);
    post_run(s, &e);
    post_piece(s, e.id, EJ_OUTPUT_STDOUT, 0, "one\n");
    post_piece(s, e.id, EJ_OUTPUT_STDOUT, 4, "two\n");
    post_piece(s, e.id, EJ_OUTPUT_STDERR, 0, "err\n");
    /* 8..11 dropped by a full queue: the reader steps over the gap. */
    post_piece(s, e.id, EJ_OUTPUT_STDOUT, 12, "four\n");
    assert_int_equal(ej_trace_store_flush(s, 5000), 0);

    ej_trace_reader *r = open_reader(db);
    struct ej_trace_output o;
    assert_int_equal(ej_trace_read_output(r, e.id, 0, 0, &o), 0);
    assert_false(o.completed);
    expect_bytes(o.out, o.out_len, "one\ntwo\nfour\n");
    assert_int_equal(o.out_next, 17);
    expect_bytes(o.err, o.err_len, "err\n");
    assert_int_equal(o.err_next, 4);
    ej_trace_output_fini(&o);
    /* From the middle of a piece. */
    assert_int_equal(ej_trace_read_output(r, e.id, 6, 4, &o), 0);
    expect_bytes(o.out, o.out_len, "o\nfour\n");
    assert_null(o.err);
    assert_int_equal(o.err_next, 4);
    ej_trace_output_fini(&o);
    /* history show of a running run has what is stored so far. */
    struct ej_trace_execution_detail d;
    assert_int_equal(ej_trace_get_execution(r, e.id, &d), 0);
    expect_bytes(d.execution.out, d.execution.out_len, "one\ntwo\nfour\n");
    ej_trace_execution_detail_fini(&d);

    /* The end: the detail is the record and the pieces go. */
    e.complete_time_ms = now + 1000;
    e.is_success = true;
    e.output = "one\ntwo\nthree\nfour\n";
    e.error_output = "err\n";
    post_run(s, &e);
    assert_int_equal(ej_trace_store_flush(s, 5000), 0);
    assert_int_equal(count(db, "SELECT count(*) FROM EJOB_EXECUTION_OUTPUT"), 0);
    assert_int_equal(ej_trace_read_output(r, e.id, 17, 0, &o), 0);
    assert_true(o.completed);
    assert_true(o.is_success);
    expect_bytes(o.out, o.out_len, "r\n"); /* the whole output, 19 bytes, from 17 */
    assert_int_equal(o.out_next, 19);
    expect_bytes(o.err, o.err_len, "err\n");
    ej_trace_output_fini(&o);
    assert_int_equal(ej_trace_read_output(r, "no-such-run", 0, 0, &o), EJ_ENOTFOUND);
    ej_trace_reader_close(r);
    ej_trace_store_destroy(s);
}

/* A run of job that started days ago (ended a second later, ok or not). */
static ej_execution_event old_run(ej_trace_store *s, const char *job, double days, bool ok)
{
    int64_t start = ej__now_ms() - (int64_t)(days * DAY);
    ej_execution_event e = run(job, start, start + 1000, ok);
    post_run(s, &e);
    return e;
}

static bool kept(const char *db, const ej_execution_event *e)
{
    char sql[200];
    snprintf(sql, sizeof sql, "SELECT count(*) FROM JOB_EXECUTION_LOG WHERE id = '%s'", e->id);
    return count(db, sql) == 1;
}

static void test_job_retention(void **state)
{
    (void)state;
    const char *db = path_in("retention.db");
    ej_trace_store *s = open_store(db, 7);
    assert_int_equal(ej_trace_store_set_job_retention(s, "keepJob", 30, -1), 0);
    assert_int_equal(ej_trace_store_set_job_retention(s, "shortJob", 1, 10), 0);
    assert_int_equal(ej_trace_store_set_job_retention(s, "foreverJob", 0, -1), 0);
    assert_int_equal(ej_trace_store_set_job_retention(s, "droppedJob", 1, -1), 0);
    assert_int_equal(ej_trace_store_set_job_retention(s, "droppedJob", -1, -1), 0);
    assert_int_equal(ej_trace_store_set_job_retention(s, NULL, 1, 1), EJ_EINVAL);
    ej_execution_event keep8 = old_run(s, "keepJob", 8, true);
    ej_execution_event keep40 = old_run(s, "keepJob", 40, true);
    ej_execution_event short2 = old_run(s, "shortJob", 2, true);
    ej_execution_event short2f = old_run(s, "shortJob", 2, false);
    ej_execution_event short11f = old_run(s, "shortJob", 11, false);
    ej_execution_event forever = old_run(s, "foreverJob", 100, true);
    ej_execution_event other8 = old_run(s, "otherJob", 8, false);
    ej_execution_event other6 = old_run(s, "otherJob", 6, true);
    ej_execution_event dropped8 = old_run(s, "droppedJob", 8, true);
    assert_int_equal(ej_trace_store_flush(s, 5000), 0);
    assert_int_equal(ej_trace_store_purge(s, 5000), 0);
    ej_trace_store_destroy(s);
    assert_true(kept(db, &keep8)); /* its own 30 days, not the store's 7 */
    assert_false(kept(db, &keep40));
    assert_false(kept(db, &short2)); /* 1 day */
    assert_true(kept(db, &short2f)); /* failed: 10 days */
    assert_false(kept(db, &short11f));
    assert_true(kept(db, &forever)); /* 0: forever */
    assert_false(kept(db, &other8)); /* no rule: the store's 7 */
    assert_true(kept(db, &other6));
    assert_false(kept(db, &dropped8)); /* its rule dropped: the store's */
    assert_int_equal(count(db, "SELECT count(*) FROM EJOB_EXECUTION_DETAIL"), 4);
    assert_int_equal(count(db, "SELECT count(*) FROM EJOB_EXECUTION_DETAIL d LEFT JOIN "
                               "JOB_EXECUTION_LOG e ON e.id = d.id WHERE e.id IS NULL"),
                     0);
    assert_int_equal(count(db, "SELECT count(*) FROM EJOB_JOB_RETENTION"), 3);

    /* Another daemon on the same database, without rules and keeping rows
     * forever itself: the jobs' rules still hold. */
    s = open_store(db, 0);
    ej_execution_event keep31 = old_run(s, "keepJob", 31, true);
    ej_execution_event other100 = old_run(s, "otherJob", 100, true);
    assert_int_equal(ej_trace_store_flush(s, 5000), 0);
    assert_int_equal(ej_trace_store_purge(s, 5000), 0);
    ej_trace_store_destroy(s);
    assert_false(kept(db, &keep31));
    assert_true(kept(db, &keep8));
    assert_true(kept(db, &other100)); /* this store keeps forever */
}

/* A store an older ejob made (no EJOB_EXECUTION_OUTPUT): a running run
 * reads as no output yet, not as an error. */
static void test_store_without_pieces(void **state)
{
    (void)state;
    const char *db = path_in("old.db");
    sqlite3 *h = NULL;
    assert_int_equal(sqlite3_open(db, &h), SQLITE_OK);
    assert_int_equal(
        sqlite3_exec(h,
                     "CREATE TABLE JOB_EXECUTION_LOG (id VARCHAR(40) NOT NULL, job_name "
                     "VARCHAR(100) NOT NULL, task_id VARCHAR(255) NOT NULL, hostname VARCHAR(255) "
                     "NOT NULL, ip VARCHAR(50) NOT NULL, sharding_item INT NOT NULL, "
                     "execution_source VARCHAR(20) NOT NULL, failure_cause VARCHAR(4000) NULL, "
                     "is_success INT NOT NULL, start_time TIMESTAMP NULL, complete_time TIMESTAMP "
                     "NULL, PRIMARY KEY (id));"
                     "CREATE TABLE EJOB_EXECUTION_DETAIL (id VARCHAR(40) NOT NULL, instance_id "
                     "VARCHAR(255) NOT NULL, start_time TIMESTAMP NULL, duration_ms BIGINT NULL, "
                     "fencing_token BIGINT NOT NULL, exit_code INT NULL, term_signal INT NULL, "
                     "http_status INT NULL, stdout BLOB NULL, stdout_truncated INT NOT NULL, "
                     "stderr BLOB NULL, stderr_truncated INT NOT NULL, failure_cause_truncated "
                     "INT NOT NULL, PRIMARY KEY (id));"
                     "INSERT INTO JOB_EXECUTION_LOG VALUES ('run-1', 'oldJob', 't', 'h', "
                     "'127.0.0.1', 0, 'NORMAL_TRIGGER', NULL, 0, '2026-01-01 10:00:00.000', "
                     "NULL);",
                     NULL, NULL, NULL),
        SQLITE_OK);
    sqlite3_close(h);
    ej_trace_reader *r = open_reader(db);
    struct ej_trace_output o;
    assert_int_equal(ej_trace_read_output(r, "run-1", 0, 0, &o), 0);
    assert_false(o.completed);
    assert_null(o.out);
    assert_int_equal(o.out_next, 0);
    ej_trace_output_fini(&o);
    ej_trace_reader_close(r);
}

int main(void)
{
    snprintf(dir, sizeof dir, "/tmp/ejob-trace-live-test-XXXXXX");
    if (mkdtemp(dir) == NULL)
        return 1;
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_live_pieces_then_the_detail),
        cmocka_unit_test(test_job_retention),
        cmocka_unit_test(test_store_without_pieces),
    };
    int rc = cmocka_run_group_tests(tests, NULL, NULL);
    char cmd[300];
    snprintf(cmd, sizeof cmd, "rm -rf '%s'", dir);
    if (system(cmd) != 0)
        fprintf(stderr, "could not remove %s\n", dir);
    return rc;
}
