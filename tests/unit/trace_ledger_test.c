/*
 * The fire ledger on a real SQLite file (EJOB_FIRE_LEDGER): one row per
 * job, fire time and item whatever order and however often instances
 * write it (ran over a not-run reason over missed), the start-up scan's
 * only-after-the-last-row rows, the read API with the run's result, and
 * retention.
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

static void post_fire(ej_trace_store *s, int64_t at, int item, const char *outcome,
                      const char *instance, const char *exec_id, bool only_after_last)
{
    ej_event ev = {.type = EJ_EVENT_FIRE};
    ej_fire_event *f = &ev.u.fire;
    f->job_name = "job";
    f->fire_time_ms = at;
    f->sharding_item = item;
    f->outcome = outcome;
    f->instance_id = instance;
    f->only_after_last = only_after_last;
    f->recorded_time_ms = at + 5;
    if (exec_id)
        snprintf(f->execution_id, sizeof f->execution_id, "%s", exec_id);
    assert_int_equal(ej_trace_store_post(s, &ev), 0);
}

static void flush_and_close(ej_trace_store *s)
{
    assert_int_equal(ej_trace_store_flush(s, 5000), 0);
    struct ej_trace_stats st;
    ej_trace_store_stats(s, &st);
    assert_int_equal(st.rejected, 0);
    ej_trace_store_destroy(s);
}

static struct ej_trace_fire_list query(const char *db, const struct ej_trace_fire_query *q)
{
    struct ej_trace_target t = {.kind = EJ_TRACE_SQLITE, .url = db};
    ej_trace_reader *r = NULL;
    char err[256] = "";
    assert_int_equal(ej_trace_reader_open(&t, &r, err, sizeof err), 0);
    struct ej_trace_fire_list l;
    int rc = ej_trace_query_fires(r, q, &l);
    if (rc != 0)
        fprintf(stderr, "query: %s\n", ej_trace_reader_errmsg(r));
    assert_int_equal(rc, 0);
    ej_trace_reader_close(r);
    return l;
}

/* "fire_ms/item/outcome/instance/result" of every row, space separated. */
static void assert_rows(const char *db, const struct ej_trace_fire_query *q, const char *want)
{
    struct ej_trace_fire_list l = query(db, q);
    char got[4096] = "";
    size_t n = 0;
    for (size_t i = 0; i < l.count; i++)
        n += (size_t)snprintf(got + n, sizeof got - n, "%s%lld/%d/%s/%s/%s", i ? " " : "",
                              (long long)l.rows[i].fire_time_ms, l.rows[i].sharding_item,
                              l.rows[i].outcome, l.rows[i].instance_id, l.rows[i].result);
    ej_trace_fire_list_fini(&l);
    if (strcmp(got, want) != 0)
        fprintf(stderr, "got  %s\nwant %s\n", got, want);
    assert_string_equal(got, want);
}

static const struct ej_trace_fire_query all = {.item = -1};

/* Whatever the order, a run beats a reason, a reason beats missed, and a
 * second report of the same thing changes nothing. */
static void test_one_row_per_fire_and_item(void **state)
{
    (void)state;
    const char *db = path_in("rank.db");
    ej_trace_store *s = open_store(db, 0);
    ej_execution_event e = {.job_name = "job",
                            .task_id = "job@-@0@-@READY@-@a@-@1",
                            .hostname = "h",
                            .ip = "a",
                            .sharding_item = 0,
                            .is_success = true,
                            .start_time_ms = 1000,
                            .complete_time_ms = 1500};
    ej_event_new_id(e.id);
    ej_event ev = {.type = EJ_EVENT_EXECUTION};
    ev.u.execution = e;
    assert_int_equal(ej_trace_store_post(s, &ev), 0);
    /* Item 0 at 1000: missed, then a reason, then the run, then a late
     * reason from another instance (ignored). */
    post_fire(s, 1000, 0, "missed", "", NULL, false);
    post_fire(s, 1000, 0, "paused", "b", NULL, false);
    post_fire(s, 1000, 0, "ran", "a", e.id, false);
    post_fire(s, 1000, 0, "leader-wait", "c", NULL, false);
    /* Item 1 at 1000: the run first; missed and a reason after it lose. */
    post_fire(s, 1000, 1, "ran", "b", "no-such-execution", false);
    post_fire(s, 1000, 1, "missed", "", NULL, false);
    post_fire(s, 1000, 1, "fenced", "c", NULL, false);
    /* 2000, every item: two reasons (the first stays), missed loses. */
    post_fire(s, 2000, -1, "paused", "b", NULL, false);
    post_fire(s, 2000, -1, "stopped", "c", NULL, false);
    post_fire(s, 2000, -1, "missed", "", NULL, false);
    flush_and_close(s);
    assert_rows(db, &all, "1000/0/ran/a/succeeded 1000/1/ran/b/unknown 2000/-1/paused/b/");
    /* Item 1 only, with the job-wide rows; a time window. */
    struct ej_trace_fire_query q = {.item = 1};
    assert_rows(db, &q, "1000/1/ran/b/unknown 2000/-1/paused/b/");
    q = (struct ej_trace_fire_query){.item = -1, .since_ms = 1500, .until_ms = 2001};
    assert_rows(db, &q, "2000/-1/paused/b/");
    q = (struct ej_trace_fire_query){.item = -1, .job_name = "other"};
    assert_rows(db, &q, "");
    /* The limit keeps the newest, still oldest first. */
    q = (struct ej_trace_fire_query){.item = -1, .limit = 2};
    assert_rows(db, &q, "1000/1/ran/b/unknown 2000/-1/paused/b/");
}

/* The start-up scan's rows land only after the job's last row, once. */
static void test_scan_rows_only_after_the_last_row(void **state)
{
    (void)state;
    const char *db = path_in("scan.db");
    ej_trace_store *s = open_store(db, 0);
    /* A job with no ledger yet: nothing to extend, nothing missed. */
    post_fire(s, 5000, -1, "missed", "", NULL, true);
    assert_int_equal(ej_trace_store_flush(s, 5000), 0);
    post_fire(s, 10000, 0, "ran", "a", "x", false);
    /* Down from 10000: 12000, 14000, 16000 missed (12000 twice: two
     * instances scanned), 9000 is before the last row. */
    post_fire(s, 9000, -1, "missed", "", NULL, true);
    post_fire(s, 12000, -1, "missed", "", NULL, true);
    post_fire(s, 12000, -1, "missed", "", NULL, true);
    post_fire(s, 14000, -1, "missed", "", NULL, true);
    post_fire(s, 16000, -1, "missed", "", NULL, true);
    /* The second instance's scan, after the first's rows: nothing new. */
    post_fire(s, 14000, -1, "missed", "", NULL, true);
    post_fire(s, 18000, 1, "ran", "a", "y", false);
    post_fire(s, 16000, -1, "missed", "", NULL, true);
    flush_and_close(s);
    assert_rows(db, &all,
                "10000/0/ran/a/unknown 12000/-1/missed// 14000/-1/missed// 16000/-1/missed// "
                "18000/1/ran/a/unknown");
}

static void test_retention_purges_the_ledger(void **state)
{
    (void)state;
    const char *db = path_in("purge.db");
    ej_trace_store *s = open_store(db, 1);
    int64_t now = ej__now_ms();
    post_fire(s, now - 3 * 86400000LL, -1, "paused", "a", NULL, false);
    post_fire(s, now - 2 * 86400000LL, 0, "ran", "a", "x", false);
    post_fire(s, now - 1000, 0, "ran", "a", "y", false);
    assert_int_equal(ej_trace_store_flush(s, 5000), 0);
    assert_int_equal(ej_trace_store_purge(s, 5000), 0);
    flush_and_close(s);
    struct ej_trace_fire_list l = query(db, &all);
    assert_int_equal(l.count, 1);
    assert_int_equal(l.rows[0].fire_time_ms, now - 1000);
    ej_trace_fire_list_fini(&l);
}

/* A store an older ejob wrote has no ledger: a clear "not found". */
static void test_store_without_ledger(void **state)
{
    (void)state;
    const char *db = path_in("old.db");
    sqlite3 *h = NULL;
    assert_int_equal(sqlite3_open(db, &h), SQLITE_OK);
    assert_int_equal(sqlite3_exec(h,
                                  "CREATE TABLE JOB_EXECUTION_LOG (id VARCHAR(40) NOT NULL, "
                                  "PRIMARY KEY (id))",
                                  NULL, NULL, NULL),
                     SQLITE_OK);
    sqlite3_close(h);
    struct ej_trace_target t = {.kind = EJ_TRACE_SQLITE, .url = db};
    ej_trace_reader *r = NULL;
    char err[256] = "";
    assert_int_equal(ej_trace_reader_open(&t, &r, err, sizeof err), 0);
    struct ej_trace_fire_list l;
    assert_int_equal(ej_trace_query_fires(r, NULL, &l), EJ_ENOTFOUND);
    assert_int_equal(l.count, 0);
    ej_trace_reader_close(r);
}

int main(void)
{
    snprintf(dir, sizeof dir, "/tmp/ejob-ledger-test-XXXXXX");
    if (mkdtemp(dir) == NULL)
        return 1;
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_one_row_per_fire_and_item),
        cmocka_unit_test(test_scan_rows_only_after_the_last_row),
        cmocka_unit_test(test_retention_purges_the_ledger),
        cmocka_unit_test(test_store_without_ledger),
    };
    int rc = cmocka_run_group_tests(tests, NULL, NULL);
    char cmd[300];
    snprintf(cmd, sizeof cmd, "rm -rf '%s'", dir);
    if (system(cmd) != 0)
        fprintf(stderr, "could not remove %s\n", dir);
    return rc;
}
