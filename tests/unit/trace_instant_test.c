/*
 * The history's instants (EJOB_EXECUTION_INSTANT): a run written by a
 * process in one zone reads as the same instant in any other, rows without
 * instants (Java's) read as local time of the reader; the order, cursor
 * paging and output search of ej_trace_query_executions.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include <cmocka.h>
#include <sqlite3.h>

#include "common/util.h"
#include "ejob/error.h"
#include "ejob/trace.h"

static char dir[256];

static void set_zone(const char *tz)
{
    setenv("TZ", tz, 1);
    tzset();
}

static char *path_in(const char *name)
{
    static char buf[400];
    snprintf(buf, sizeof buf, "%s/%s", dir, name);
    return buf;
}

static ej_trace_store *open_store(const char *path)
{
    struct ej_trace_store_opts o = {
        .target = {.kind = EJ_TRACE_SQLITE, .url = path},
        .retention_days = 0,
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

static void post_run(ej_trace_store *s, const char *id, int item, int64_t start, int64_t end,
                     const char *out)
{
    char task[128];
    snprintf(task, sizeof task, "job@-@%d@-@READY@-@10.0.0.7@-@1", item);
    ej_event ev = {.type = EJ_EVENT_EXECUTION};
    ej_execution_event *e = &ev.u.execution;
    snprintf(e->id, sizeof e->id, "%s", id);
    e->job_name = "job";
    e->task_id = task;
    e->hostname = "host-a";
    e->ip = "10.0.0.7";
    e->sharding_item = item;
    e->execution_source = EJ_EXEC_NORMAL_TRIGGER;
    e->is_success = true;
    e->start_time_ms = start;
    e->complete_time_ms = end;
    e->output = out;
    e->output_len = out ? strlen(out) : 0;
    assert_int_equal(ej_trace_store_post(s, &ev), 0);
}

static void post_status(ej_trace_store *s, int64_t when)
{
    ej_event ev = {.type = EJ_EVENT_STATUS};
    ej_status_event *e = &ev.u.status;
    ej_event_new_id(e->id);
    e->job_name = "job";
    e->task_id = "job@-@0@-@READY@-@10.0.0.7@-@1";
    e->slave_id = "10.0.0.7";
    e->sharding_item = "[0]";
    e->state = EJ_TASK_STAGING;
    e->creation_time_ms = when;
    assert_int_equal(ej_trace_store_post(s, &ev), 0);
}

static void run_sql(const char *path, const char *sql)
{
    sqlite3 *db = NULL;
    assert_int_equal(sqlite3_open(path, &db), SQLITE_OK);
    char *err = NULL;
    int rc = sqlite3_exec(db, sql, NULL, NULL, &err);
    if (rc != SQLITE_OK)
        fprintf(stderr, "%s: %s\n", sql, err);
    sqlite3_free(err);
    sqlite3_close(db);
    assert_int_equal(rc, SQLITE_OK);
}

/* A daemon in Asia/Shanghai (UTC+8) writes; a reader in UTC and one in
 * America/New_York read the same instants, and the status trail too. */
static void test_instants_whatever_the_zones(void **state)
{
    (void)state;
    const char *db = path_in("zones.db");
    const int64_t start = 1795000000123LL, end = start + 4500;
    set_zone("Asia/Shanghai");
    ej_trace_store *s = open_store(db);
    post_run(s, "a1", 0, start, 0, NULL);
    post_status(s, start - 10);
    assert_int_equal(ej_trace_store_flush(s, 5000), 0);
    post_run(s, "a1", 0, start, end, "done");
    assert_int_equal(ej_trace_store_flush(s, 5000), 0);
    ej_trace_store_destroy(s);
    static const char *const zones[] = {"UTC", "America/New_York", "Asia/Shanghai"};
    for (size_t z = 0; z < 3; z++) {
        set_zone(zones[z]);
        ej_trace_reader *r = open_reader(db);
        struct ej_trace_execution_list l;
        assert_int_equal(ej_trace_query_executions(r, NULL, &l), 0);
        assert_int_equal(l.count, 1);
        assert_true(l.rows[0].utc_offset_known);
        assert_int_equal(l.rows[0].utc_offset_s, 8 * 3600);
        assert_int_equal(l.rows[0].start_ms, start);
        assert_int_equal(l.rows[0].complete_ms, end);
        ej_trace_execution_list_fini(&l);
        struct ej_trace_execution_detail d;
        assert_int_equal(ej_trace_get_execution(r, "a1", &d), 0);
        assert_int_equal(d.execution.start_ms, start);
        assert_int_equal(d.trail_count, 1);
        assert_int_equal(d.trail[0].creation_ms, start - 10);
        ej_trace_execution_detail_fini(&d);
        ej_trace_reader_close(r);
    }
    set_zone("UTC");
}

/* Rows without instants (as Java writes them) are local time of the
 * reader, and sort among ejob's rows by that instant. */
static void test_java_rows_read_as_local_time(void **state)
{
    (void)state;
    const char *db = path_in("java.db");
    set_zone("UTC");
    ej_trace_store *s = open_store(db);
    post_run(s, "ej-early", 0, 1795000000000LL, 1795000001000LL, NULL);
    post_run(s, "ej-late", 0, 1795000020000LL, 1795000021000LL, NULL);
    assert_int_equal(ej_trace_store_flush(s, 5000), 0);
    ej_trace_store_destroy(s);
    /* 1795000010000 is 2026-11-18 11:06:50 UTC, 19:06:50 in Shanghai. */
    run_sql(db, "INSERT INTO JOB_EXECUTION_LOG (id, job_name, task_id, hostname, ip, "
                "sharding_item, execution_source, is_success, start_time, complete_time) VALUES "
                "('java', 'job', 'job@-@0@-@READY@-@10.0.0.8@-@9', 'h', '10.0.0.8', 0, "
                "'NORMAL_TRIGGER', 1, '2026-11-18 19:06:50.000', '2026-11-18 19:06:51.000')");
    set_zone("Asia/Shanghai");
    ej_trace_reader *r = open_reader(db);
    struct ej_trace_execution_list l;
    assert_int_equal(ej_trace_query_executions(r, NULL, &l), 0);
    assert_int_equal(l.count, 3);
    assert_string_equal(l.rows[0].id, "ej-late");
    assert_string_equal(l.rows[1].id, "java");
    assert_false(l.rows[1].utc_offset_known);
    assert_int_equal(l.rows[1].start_ms, 1795000010000LL);
    assert_string_equal(l.rows[2].id, "ej-early");
    ej_trace_execution_list_fini(&l);
    ej_trace_reader_close(r);
    set_zone("UTC");
}

static void page(ej_trace_reader *r, int dir_, const struct ej_trace_execution *at, size_t limit,
                 struct ej_trace_execution_list *l)
{
    struct ej_trace_query q = {.item = -1, .limit = limit, .page = dir_};
    if (at != NULL) {
        q.cursor_ms = at->sort_ms;
        q.cursor_id = at->id;
    }
    assert_int_equal(ej_trace_query_executions(r, &q, l), 0);
}

/* 25 runs, two of them at the same instant: older pages by cursor reach
 * each run once, newer pages come back to the same rows. */
static void test_cursor_paging(void **state)
{
    (void)state;
    const char *db = path_in("pages.db");
    set_zone("UTC");
    ej_trace_store *s = open_store(db);
    char id[16];
    for (int i = 0; i < 25; i++) {
        snprintf(id, sizeof id, "r%02d", i);
        int64_t t = 1795000000000LL + (i == 13 ? 12 : i) * 1000LL;
        post_run(s, id, i % 3, t, t + 10, NULL);
    }
    assert_int_equal(ej_trace_store_flush(s, 5000), 0);
    ej_trace_store_destroy(s);
    ej_trace_reader *r = open_reader(db);
    char seen[25] = {0};
    struct ej_trace_execution_list pages[3];
    page(r, 0, NULL, 10, &pages[0]);
    page(r, -1, &pages[0].rows[9], 10, &pages[1]);
    page(r, -1, &pages[1].rows[9], 10, &pages[2]);
    size_t counts[3] = {10, 10, 5};
    for (int p = 0; p < 3; p++) {
        assert_int_equal(pages[p].count, counts[p]);
        for (size_t i = 0; i < pages[p].count; i++) {
            int n = atoi(pages[p].rows[i].id + 1);
            assert_int_equal(seen[n], 0);
            seen[n] = 1;
            if (i > 0)
                assert_true(pages[p].rows[i].sort_ms <= pages[p].rows[i - 1].sort_ms);
        }
    }
    assert_string_equal(pages[0].rows[0].id, "r24");
    struct ej_trace_execution_list back;
    page(r, +1, &pages[2].rows[0], 10, &back);
    assert_int_equal(back.count, 10);
    for (size_t i = 0; i < 10; i++)
        assert_string_equal(back.rows[i].id, pages[1].rows[i].id);
    ej_trace_execution_list_fini(&back);
    for (int p = 0; p < 3; p++)
        ej_trace_execution_list_fini(&pages[p]);
    ej_trace_reader_close(r);
}

static void test_output_search(void **state)
{
    (void)state;
    const char *db = path_in("search.db");
    ej_trace_store *s = open_store(db);
    post_run(s, "o1", 0, 1795000000000LL, 1795000000100LL, "processed 12 orders\n");
    post_run(s, "o2", 0, 1795000001000LL, 1795000001100LL, "nothing to do 100%\n");
    post_run(s, "o3", 0, 1795000002000LL, 1795000002100LL, NULL);
    assert_int_equal(ej_trace_store_flush(s, 5000), 0);
    ej_trace_store_destroy(s);
    ej_trace_reader *r = open_reader(db);
    static const struct {
        const char *text, *want;
    } cases[] = {{"Orders", "o1"}, {"100%", "o2"}, {"_", ""}, {"absent", ""}};
    for (size_t i = 0; i < 4; i++) {
        struct ej_trace_query q = {.item = -1, .output_text = cases[i].text};
        struct ej_trace_execution_list l;
        assert_int_equal(ej_trace_query_executions(r, &q, &l), 0);
        assert_int_equal(l.count, cases[i].want[0] ? 1 : 0);
        if (l.count)
            assert_string_equal(l.rows[0].id, cases[i].want);
        ej_trace_execution_list_fini(&l);
    }
    ej_trace_reader_close(r);
}

int main(void)
{
    snprintf(dir, sizeof dir, "/tmp/ejob-trace-instant-XXXXXX");
    if (mkdtemp(dir) == NULL)
        return 1;
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_instants_whatever_the_zones),
        cmocka_unit_test(test_java_rows_read_as_local_time),
        cmocka_unit_test(test_cursor_paging),
        cmocka_unit_test(test_output_search),
    };
    int rc = cmocka_run_group_tests(tests, NULL, NULL);
    char cmd[300];
    snprintf(cmd, sizeof cmd, "rm -rf '%s'", dir);
    if (system(cmd) != 0)
        fprintf(stderr, "could not remove %s\n", dir);
    return rc;
}
