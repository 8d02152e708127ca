/*
 * The PostgreSQL store against a real server (Debian's, started by the
 * test): ElasticJob's DDL as PostgreSQL sees it, a round trip with binary
 * output, the server killed while events keep coming (they are buffered
 * and written when it is back), a full buffer counted exactly, live output
 * pieces and a job's own retention.
 */
#include <pthread.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stdatomic.h>
#include <stddef.h>
#include <stdint.h>

#include <cmocka.h>

#include "common/util.h"
#include "ejob/error.h"
#include "ejob/trace.h"
#include "trace_pg_fixture.h"

static struct pgf pg;

static ej_trace_store *open_store(size_t capacity)
{
    struct ej_trace_store_opts o = {
        .target = {.kind = EJ_TRACE_POSTGRESQL, .url = pg.url, .password = PGF_PASSWORD},
        .retention_days = 0,
        .queue_capacity = capacity,
        .retry_max_ms = 300,
        .op_timeout_ms = 3000,
    };
    ej_trace_store *s = NULL;
    assert_int_equal(ej_trace_store_create(&o, &s), 0);
    return s;
}

static ej_execution_event exec_event(const char *job, int item, int64_t start, int64_t end)
{
    static char task[256];
    snprintf(task, sizeof task, "%s@-@%d@-@READY@-@10.0.0.7@-@77", job, item);
    ej_execution_event e = {
        .job_name = job,
        .task_id = task,
        .hostname = "host-a",
        .ip = "10.0.0.7",
        .sharding_item = item,
        .execution_source = EJ_EXEC_FAILOVER,
        .is_success = end != 0,
        .start_time_ms = start,
        .complete_time_ms = end,
    };
    ej_event_new_id(e.id);
    return e;
}

static int post(ej_trace_store *s, const ej_execution_event *e)
{
    ej_event ev = {.type = EJ_EVENT_EXECUTION};
    ev.u.execution = *e;
    return ej_trace_store_post(s, &ev);
}

static void assert_pg(const char *sql, const char *want)
{
    char *got = pgf_query(&pg, sql);
    assert_non_null(got);
    if (strcmp(got, want) != 0)
        fprintf(stderr, "%s\n  got  %s\n  want %s\n", sql, got, want);
    assert_string_equal(got, want);
    free(got);
}

static void test_pg_schema_is_elasticjobs(void **state)
{
    (void)state;
    ej_trace_store *s = open_store(0);
    ej_execution_event e = exec_event("schema", 0, ej__now_ms(), 0);
    assert_int_equal(post(s, &e), 0);
    assert_int_equal(ej_trace_store_flush(s, 10000), 0);
    ej_trace_store_destroy(s);
    static const char cols[] =
        "SELECT string_agg(column_name || ':' || data_type || coalesce('(' || "
        "character_maximum_length || ')', '') || ':' || is_nullable, ' ' ORDER BY "
        "ordinal_position) FROM information_schema.columns WHERE table_name = '%s'";
    char q[600];
    snprintf(q, sizeof q, cols, "job_execution_log");
    assert_pg(q, "id:character varying(40):NO job_name:character varying(100):NO "
                 "task_id:character varying(255):NO hostname:character varying(255):NO "
                 "ip:character varying(50):NO sharding_item:integer:NO "
                 "execution_source:character varying(20):NO "
                 "failure_cause:character varying(4000):YES is_success:integer:NO "
                 "start_time:timestamp without time zone:YES "
                 "complete_time:timestamp without time zone:YES");
    snprintf(q, sizeof q, cols, "job_status_trace_log");
    assert_pg(q, "id:character varying(40):NO job_name:character varying(100):NO "
                 "original_task_id:character varying(255):NO task_id:character varying(255):NO "
                 "slave_id:character varying(50):NO source:character varying(50):NO "
                 "execution_type:character varying(20):NO sharding_item:character varying(100):NO "
                 "state:character varying(20):NO message:character varying(4000):YES "
                 "creation_time:timestamp without time zone:YES");
    assert_pg("SELECT indexdef FROM pg_indexes WHERE indexname = 'task_id_state_index'",
              "CREATE INDEX task_id_state_index ON public.job_status_trace_log USING btree "
              "(task_id, state)");
    assert_pg("SELECT string_agg(a.attname, ',') FROM pg_index i JOIN pg_attribute a ON "
              "a.attrelid = i.indrelid AND a.attnum = ANY(i.indkey) WHERE i.indrelid = "
              "'job_execution_log'::regclass AND i.indisprimary",
              "id");
    /* ElasticJob's own unquoted SQL reads what ejob wrote. */
    char sel[300];
    snprintf(sel, sizeof sel, "SELECT execution_source FROM JOB_EXECUTION_LOG WHERE id = '%s'",
             e.id);
    assert_pg(sel, "FAILOVER");
}

static void test_pg_round_trip(void **state)
{
    (void)state;
    ej_trace_store *s = open_store(0);
    int64_t t0 = ej__now_ms();
    ej_execution_event e = exec_event("rt", 2, t0, 0);
    assert_int_equal(post(s, &e), 0);
    static const char out[] = "x\0y\xfe\xff";
    ej_execution_event end = e;
    end.complete_time_ms = t0 + 42;
    end.is_success = false;
    end.failure_cause = "Execute script failure: exited with code 3";
    end.output = out;
    end.output_len = sizeof out - 1;
    end.error_output = "oops\n";
    end.error_output_truncated = true;
    end.has_exit_code = true;
    end.exit_code = 3;
    end.fencing_token = 99;
    assert_int_equal(post(s, &end), 0);
    /* An end whose start never came: the whole row is inserted. */
    ej_execution_event lone = exec_event("rt", 3, t0, t0 + 7);
    lone.failure_cause = "lost start";
    lone.is_success = false;
    assert_int_equal(post(s, &lone), 0);
    assert_int_equal(ej_trace_store_flush(s, 10000), 0);
    ej_trace_store_destroy(s);
    char sql[300];
    snprintf(sql, sizeof sql,
             "SELECT sharding_item || '|' || is_success || '|' || failure_cause || '|' || "
             "execution_source FROM job_execution_log WHERE id = '%s'",
             lone.id);
    assert_pg(sql, "3|0|lost start|FAILOVER");

    struct ej_trace_target t = {
        .kind = EJ_TRACE_POSTGRESQL, .url = pg.url, .password = PGF_PASSWORD};
    ej_trace_reader *r = NULL;
    char err[256];
    assert_int_equal(ej_trace_reader_open(&t, &r, err, sizeof err), 0);
    struct ej_trace_execution_detail d;
    assert_int_equal(ej_trace_get_execution(r, e.id, &d), 0);
    assert_true(d.execution.completed);
    assert_false(d.execution.is_success);
    assert_int_equal(d.execution.start_ms, t0);
    assert_int_equal(d.execution.complete_ms, t0 + 42);
    assert_int_equal(d.execution.out_len, sizeof out - 1);
    assert_memory_equal(d.execution.out, out, sizeof out - 1);
    assert_string_equal((char *)d.execution.err, "oops\n");
    assert_true(d.execution.err_truncated);
    assert_int_equal(d.execution.exit_code, 3);
    assert_int_equal(d.execution.fencing_token, 99);
    assert_string_equal(d.execution.failure_cause, end.failure_cause);
    ej_trace_execution_detail_fini(&d);
    struct ej_trace_query q = {.job_name = "rt", .item = 2, .failed_only = true};
    struct ej_trace_execution_list l;
    assert_int_equal(ej_trace_query_executions(r, &q, &l), 0);
    assert_int_equal(l.count, 1);
    assert_string_equal(l.rows[0].execution_source, "FAILOVER");
    assert_true(l.rows[0].utc_offset_known);
    ej_trace_execution_list_fini(&l);
    /* Output search (bytes in BYTEA) and a cursor page (the instant key). */
    struct ej_trace_query found = {.job_name = "rt", .item = -1, .output_text = "oops"};
    assert_int_equal(ej_trace_query_executions(r, &found, &l), 0);
    assert_int_equal(l.count, 1);
    assert_string_equal(l.rows[0].id, e.id);
    ej_trace_execution_list_fini(&l);
    struct ej_trace_query all = {.job_name = "rt", .item = -1, .limit = 1};
    assert_int_equal(ej_trace_query_executions(r, &all, &l), 0);
    assert_int_equal(l.count, 1);
    struct ej_trace_query older = {.job_name = "rt", .item = -1, .limit = 5, .page = -1,
                                   .cursor_ms = l.rows[0].sort_ms, .cursor_id = l.rows[0].id};
    struct ej_trace_execution_list rest;
    assert_int_equal(ej_trace_query_executions(r, &older, &rest), 0);
    assert_int_equal(rest.count, 1); /* the other run of "rt" */
    assert_string_not_equal(rest.rows[0].id, l.rows[0].id);
    ej_trace_execution_list_fini(&rest);
    ej_trace_execution_list_fini(&l);
    ej_trace_reader_close(r);
}

/* A "fire" thread: one start and one end event every 10 ms, measuring how
 * long each post takes. */
struct firer {
    ej_trace_store *s;
    atomic_bool stop;
    int runs;
    int refused;
    int64_t worst_us;
};

static void *fire_loop(void *arg)
{
    struct firer *f = arg;
    while (!atomic_load(&f->stop)) {
        int64_t now = ej__now_ms();
        ej_execution_event e = exec_event("killed", f->runs % 4, now, 0);
        struct timespec a, b;
        clock_gettime(CLOCK_MONOTONIC, &a);
        int rc1 = post(f->s, &e);
        e.complete_time_ms = now + 1;
        e.is_success = true;
        int rc2 = post(f->s, &e);
        clock_gettime(CLOCK_MONOTONIC, &b);
        int64_t us = (b.tv_sec - a.tv_sec) * 1000000 + (b.tv_nsec - a.tv_nsec) / 1000;
        f->worst_us = us > f->worst_us ? us : f->worst_us;
        f->refused += (rc1 != 0) + (rc2 != 0);
        f->runs++;
        ej__sleep_ms(10);
    }
    return NULL;
}

static void test_pg_killed_during_run(void **state)
{
    (void)state;
    ej_trace_store *s = open_store(0);
    struct firer f = {.s = s};
    atomic_init(&f.stop, false);
    pthread_t th;
    assert_int_equal(pthread_create(&th, NULL, fire_loop, &f), 0);
    ej__sleep_ms(1000);
    pgf_kill(&pg);
    ej__sleep_ms(2500);
    struct ej_trace_stats down;
    ej_trace_store_stats(s, &down);
    pgf_start(&pg);
    ej__sleep_ms(1000);
    atomic_store(&f.stop, true);
    pthread_join(th, NULL);
    assert_int_equal(ej_trace_store_flush(s, 30000), 0);
    struct ej_trace_stats st;
    ej_trace_store_stats(s, &st);
    fprintf(stderr,
            "killed: %d runs, worst post %lld us; while down: connected %d, queued %zu, "
            "failures %llu (%s); after: written %llu, reconnects %llu\n",
            f.runs, (long long)f.worst_us, down.connected, down.queued,
            (unsigned long long)down.failures, down.last_error, (unsigned long long)st.written,
            (unsigned long long)st.reconnects);
    ej_trace_store_destroy(s);
    assert_false(down.connected);
    assert_true(down.queued > 50);
    assert_true(st.reconnects >= 1);
    assert_int_equal(f.refused, 0);
    assert_int_equal(st.dropped, 0);
    assert_int_equal(st.written, (uint64_t)f.runs * 2);
    /* Fires went on: about 100 a second throughout. */
    assert_true(f.runs > 100);
    assert_true(f.worst_us < 500000);
    char q[200];
    snprintf(q, sizeof q,
             "SELECT count(*) || ':' || sum(is_success) FROM job_execution_log WHERE job_name = "
             "'killed'");
    char want[64];
    snprintf(want, sizeof want, "%d:%d", f.runs, f.runs);
    assert_pg(q, want);
}

static void test_pg_full_buffer_counted(void **state)
{
    (void)state;
    ej_trace_store *s = open_store(50);
    pgf_kill(&pg);
    int refused = 0;
    for (int i = 0; i < 200; i++) {
        ej_execution_event e = exec_event("overflow", i, ej__now_ms(), ej__now_ms() + 1);
        if (post(s, &e) == EJ_EAGAIN)
            refused++;
    }
    struct ej_trace_stats st;
    ej_trace_store_stats(s, &st);
    assert_int_equal(refused, 150);
    assert_int_equal(st.accepted, 50);
    assert_int_equal(st.dropped, 150);
    pgf_start(&pg);
    assert_int_equal(ej_trace_store_flush(s, 30000), 0);
    ej_trace_store_stats(s, &st);
    assert_int_equal(st.written, 50);
    ej_trace_store_destroy(s);
    assert_pg("SELECT count(*) FROM job_execution_log WHERE job_name = 'overflow'", "50");
}

static void post_fire(ej_trace_store *s, int64_t at, int item, const char *outcome,
                      const char *exec_id, bool only_after_last)
{
    ej_event ev = {.type = EJ_EVENT_FIRE};
    ej_fire_event *f = &ev.u.fire;
    f->job_name = "ledger";
    f->fire_time_ms = at;
    f->sharding_item = item;
    f->outcome = outcome;
    f->instance_id = "10.0.0.7@-@77";
    f->only_after_last = only_after_last;
    f->recorded_time_ms = at;
    if (exec_id)
        snprintf(f->execution_id, sizeof f->execution_id, "%s", exec_id);
    assert_int_equal(ej_trace_store_post(s, &ev), 0);
}

/* The ledger's ranked upsert and the scan's only-after-last insert are
 * PostgreSQL SQL too (one pipelined transaction). */
static void test_pg_fire_ledger(void **state)
{
    (void)state;
    ej_trace_store *s = open_store(0);
    ej_execution_event e = exec_event("ledger", 0, 1000, 1400);
    assert_int_equal(post(s, &e), 0);
    post_fire(s, 1000, 0, "missed", NULL, false);
    post_fire(s, 1000, 0, "paused", NULL, false);
    post_fire(s, 1000, 0, "ran", e.id, false);
    post_fire(s, 1000, 0, "fenced", NULL, false);
    post_fire(s, 3000, -1, "missed", NULL, true);
    post_fire(s, 500, -1, "missed", NULL, true);
    post_fire(s, 3000, -1, "missed", NULL, true);
    assert_int_equal(ej_trace_store_flush(s, 10000), 0);
    struct ej_trace_stats st;
    ej_trace_store_stats(s, &st);
    assert_int_equal(st.rejected, 0);
    ej_trace_store_destroy(s);
    assert_pg("SELECT string_agg(fire_time_ms || '/' || sharding_item || '/' || outcome, ' ' "
              "ORDER BY fire_time_ms) FROM ejob_fire_ledger WHERE job_name = 'ledger'",
              "1000/0/ran 3000/-1/missed");
    struct ej_trace_target t = {.kind = EJ_TRACE_POSTGRESQL, .url = pg.url,
                                .password = PGF_PASSWORD};
    ej_trace_reader *r = NULL;
    char err[256] = "";
    assert_int_equal(ej_trace_reader_open(&t, &r, err, sizeof err), 0);
    struct ej_trace_fire_query q = {.job_name = "ledger", .item = 0};
    struct ej_trace_fire_list l;
    assert_int_equal(ej_trace_query_fires(r, &q, &l), 0);
    assert_int_equal(l.count, 2);
    assert_string_equal(l.rows[0].result, "succeeded");
    assert_string_equal(l.rows[1].outcome, "missed");
    ej_trace_fire_list_fini(&l);
    ej_trace_reader_close(r);
}

static void post_piece(ej_trace_store *s, const char *id, int64_t off, const char *data)
{
    ej_event ev = {.type = EJ_EVENT_OUTPUT};
    snprintf(ev.u.output.execution_id, sizeof ev.u.output.execution_id, "%s", id);
    ev.u.output.job_name = "liveJob";
    ev.u.output.stream = EJ_OUTPUT_STDOUT;
    ev.u.output.offset = off;
    ev.u.output.data = data;
    ev.u.output.len = strlen(data);
    ev.u.output.time_ms = ej__now_ms();
    assert_int_equal(ej_trace_store_post(s, &ev), 0);
}

/* Live pieces read back by offset, replaced by the detail at the end; a
 * job's own retention over the store's 7 days. */
static void test_pg_live_output_and_job_retention(void **state)
{
    (void)state;
    struct ej_trace_store_opts o = {
        .target = {.kind = EJ_TRACE_POSTGRESQL, .url = pg.url, .password = PGF_PASSWORD},
        .retention_days = 7,
        .retry_max_ms = 300,
        .op_timeout_ms = 3000,
    };
    ej_trace_store *s = NULL;
    assert_int_equal(ej_trace_store_create(&o, &s), 0);
    int64_t now = ej__now_ms();
    ej_execution_event e = exec_event("liveJob", 0, now, 0);
    assert_int_equal(post(s, &e), 0);
    post_piece(s, e.id, 0, "a\xff");
    post_piece(s, e.id, 2, "b\n");
    assert_int_equal(ej_trace_store_flush(s, 10000), 0);
    struct ej_trace_target t = {
        .kind = EJ_TRACE_POSTGRESQL, .url = pg.url, .password = PGF_PASSWORD};
    ej_trace_reader *r = NULL;
    char err[256] = "";
    assert_int_equal(ej_trace_reader_open(&t, &r, err, sizeof err), 0);
    struct ej_trace_output out;
    assert_int_equal(ej_trace_read_output(r, e.id, 1, 0, &out), 0);
    assert_false(out.completed);
    assert_int_equal(out.out_len, 3);
    assert_memory_equal(out.out,
                        "\xff"
                        "b\n",
                        3);
    assert_int_equal(out.out_next, 4);
    ej_trace_output_fini(&out);
    e.complete_time_ms = now + 10;
    e.output = "a\xff"
               "b\n";
    assert_int_equal(post(s, &e), 0);
    assert_int_equal(ej_trace_store_set_job_retention(s, "keepJob", 30, -1), 0);
    ej_execution_event keep10 =
        exec_event("keepJob", 0, now - 10 * 86400000LL, now - 10 * 86400000LL + 5);
    assert_int_equal(post(s, &keep10), 0);
    ej_execution_event keep40 =
        exec_event("keepJob", 0, now - 40 * 86400000LL, now - 40 * 86400000LL + 5);
    assert_int_equal(post(s, &keep40), 0);
    ej_execution_event other10 =
        exec_event("otherJob", 0, now - 10 * 86400000LL, now - 10 * 86400000LL + 5);
    assert_int_equal(post(s, &other10), 0);
    assert_int_equal(ej_trace_store_flush(s, 10000), 0);
    assert_int_equal(ej_trace_store_purge(s, 10000), 0);
    struct ej_trace_stats st;
    ej_trace_store_stats(s, &st);
    assert_int_equal(st.rejected, 0);
    ej_trace_store_destroy(s);
    assert_int_equal(ej_trace_read_output(r, e.id, 1, 0, &out), 0);
    assert_true(out.completed);
    assert_int_equal(out.out_len, 3);
    ej_trace_output_fini(&out);
    ej_trace_reader_close(r);
    assert_pg("SELECT count(*) FROM ejob_execution_output", "0");
    char sql[300];
    snprintf(sql, sizeof sql,
             "SELECT string_agg(job_name, ' ' ORDER BY job_name) FROM job_execution_log WHERE "
             "id IN ('%s', '%s', '%s')",
             keep10.id, keep40.id, other10.id);
    assert_pg(sql, "keepJob");
    assert_pg("SELECT job_name || '=' || retention_days FROM ejob_job_retention", "keepJob=30");
}

int main(void)
{
    if (pgf_init(&pg) != 0) {
        printf("SKIP: PostgreSQL server binaries not installed\n");
        return 77;
    }
    pgf_start(&pg);
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_pg_schema_is_elasticjobs),
        cmocka_unit_test(test_pg_round_trip),
        cmocka_unit_test(test_pg_killed_during_run),
        cmocka_unit_test(test_pg_full_buffer_counted),
        cmocka_unit_test(test_pg_fire_ledger),
        cmocka_unit_test(test_pg_live_output_and_job_retention),
    };
    int rc = cmocka_run_group_tests(tests, NULL, NULL);
    pgf_fini(&pg);
    return rc;
}
