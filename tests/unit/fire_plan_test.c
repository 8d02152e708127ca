/* The fire plan (coord/fire_plan.c): which items a fire runs, with which
 * tokens, or why it runs nothing, as a pure function of its input. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <string.h>

#include <cmocka.h>

#include "coord/fire_plan.h"
#include "ejob/error.h"

#define SESSION 0x1234

/* A registered, connected instance with the fence open, fired in its
 * session, owning items 0..3 (all enabled, none marked). */
static struct ej__plan_item items[4];

static struct ej__fire_plan_in healthy(unsigned want)
{
    for (int i = 0; i < 4; i++)
        items[i] = (struct ej__plan_item){.item = i, .owned = true};
    return (struct ej__fire_plan_in){
        .want = want,
        .fire_session = SESSION,
        .cron = true,
        .scheduled_ms = 2000,
        .reg_session = SESSION,
        .session = SESSION,
        .started = true,
        .connected = true,
        .fence_open = true,
        .registered_at_ms = 1000,
        .failover_on = true,
        .items = items,
        .nitems = 4,
    };
}

static void assert_items(const int *got, size_t n, const int *want, size_t nwant)
{
    assert_int_equal(n, nwant);
    for (size_t i = 0; i < n; i++)
        assert_int_equal(got[i], want[i]);
}

static void test_healthy_runs_own_items(void **state)
{
    (void)state;
    struct ej__fire_plan_in in = healthy(EJ__PLAN_WANT_GATE | EJ__PLAN_WANT_OWN);
    struct ej__fire_plan p;
    assert_int_equal(ej__fire_plan_make(&in, &p), 0);
    assert_int_equal(p.verdict, EJ__PLAN_RUN);
    assert_items(p.own, p.nown, (int[]){0, 1, 2, 3}, 4);
    assert_int_equal(p.nfailover, 0);
    ej__fire_plan_fini(&p);
}

/* Each way the instance may not start anything is FENCED, and nothing is
 * listed even when asked for. */
static void test_fenced(void **state)
{
    (void)state;
    for (int c = 0; c < 7; c++) {
        struct ej__fire_plan_in in =
            healthy(EJ__PLAN_WANT_GATE | EJ__PLAN_WANT_OWN | EJ__PLAN_WANT_FAILOVER);
        switch (c) {
        case 0:
            in.fence_open = false;
            break;
        case 1:
            in.connected = false;
            break;
        case 2:
            in.stopped = true;
            break;
        case 3:
            in.closed = true;
            break;
        case 4:
            in.started = false;
            break;
        case 5:
            in.reg_session = SESSION + 1;
            break; /* registered again since the fire began */
        case 6:
            in.fire_session = 0;
            in.reg_session = 0;
            break;
        }
        struct ej__fire_plan p;
        assert_int_equal(ej__fire_plan_make(&in, &p), 0);
        assert_int_equal(p.verdict, EJ__PLAN_FENCED);
        assert_int_equal(p.nown, 0);
        assert_null(p.own);
        assert_false(ej__fire_plan_may_start(&in));
        ej__fire_plan_fini(&p);
    }
}

/* The checks come in ElasticJob's order: fenced before registration before
 * clock before disabled. */
static void test_not_run_reasons_in_order(void **state)
{
    (void)state;
    struct ej__fire_plan_in in = healthy(EJ__PLAN_WANT_GATE | EJ__PLAN_WANT_OWN);
    in.server_disabled = true;
    in.time_diff_rc = EJ_ECONFIG;
    in.time_diff_msg = "exceeds 5 seconds";
    in.scheduled_ms = 500; /* before the registration at 1000 */
    struct ej__fire_plan p;
    assert_int_equal(ej__fire_plan_make(&in, &p), 0);
    assert_int_equal(p.verdict, EJ__PLAN_BEFORE_REGISTRATION);
    assert_int_equal(p.registered_at_ms, 1000);
    assert_int_equal(p.nown, 0);
    /* A trigger has no fire time to compare. */
    in.cron = false;
    assert_int_equal(ej__fire_plan_make(&in, &p), 0);
    assert_int_equal(p.verdict, EJ__PLAN_TIME_DIFF);
    assert_string_equal(p.msg, "exceeds 5 seconds");
    in.time_diff_rc = EJ_ETIMEDOUT;
    in.time_diff_msg = NULL;
    assert_int_equal(ej__fire_plan_make(&in, &p), 0);
    assert_int_equal(p.verdict, EJ__PLAN_TIME_DIFF_FAILED);
    assert_string_equal(p.msg, ej_strerror(EJ_ETIMEDOUT));
    in.time_diff_rc = 0;
    assert_int_equal(ej__fire_plan_make(&in, &p), 0);
    assert_int_equal(p.verdict, EJ__PLAN_DISABLED);
    assert_int_equal(p.nown, 0);
    in.server_disabled = false;
    in.fence_open = false;
    in.cron = true;
    assert_int_equal(ej__fire_plan_make(&in, &p), 0);
    assert_int_equal(p.verdict, EJ__PLAN_FENCED);
}

/* Disabled items do not run; an item whose mark is not known counts as
 * disabled; items not ours do not run. */
static void test_disabled_items(void **state)
{
    (void)state;
    struct ej__fire_plan_in in = healthy(EJ__PLAN_WANT_OWN);
    items[1].disabled = 1;
    items[2].disabled = -1;
    items[3].owned = false;
    struct ej__fire_plan p;
    assert_int_equal(ej__fire_plan_make(&in, &p), 0);
    assert_items(p.own, p.nown, (int[]){0}, 1);
    ej__fire_plan_fini(&p);
}

/* Items taken over: only this session's, ascending, with their tokens; an
 * own item failed over to someone else does not run here while failover
 * is on. */
static void test_failover(void **state)
{
    (void)state;
    struct ej__fire_plan_in in = healthy(EJ__PLAN_WANT_FAILOVER | EJ__PLAN_WANT_OWN);
    struct ej__plan_taken taken[] = {
        {.item = 7, .session = SESSION, .czxid = 70},
        {.item = 5, .session = SESSION, .czxid = 50},
        {.item = 6, .session = SESSION - 1, .czxid = 60}, /* gone with its session */
    };
    in.taken = taken;
    in.ntaken = 3;
    items[2].taken_away = true;
    struct ej__fire_plan p;
    assert_int_equal(ej__fire_plan_make(&in, &p), 0);
    assert_items(p.failover, p.nfailover, (int[]){5, 7}, 2);
    assert_int_equal(p.failover_tokens[0], 50);
    assert_int_equal(p.failover_tokens[1], 70);
    assert_items(p.own, p.nown, (int[]){0, 1, 3}, 3);
    ej__fire_plan_fini(&p);
    /* Failover off: a failover node of an own item does not take it away. */
    in.failover_on = false;
    assert_int_equal(ej__fire_plan_make(&in, &p), 0);
    assert_items(p.own, p.nown, (int[]){0, 1, 2, 3}, 4);
    ej__fire_plan_fini(&p);
    /* Not asked for: not listed. */
    in.want = EJ__PLAN_WANT_OWN;
    assert_int_equal(ej__fire_plan_make(&in, &p), 0);
    assert_int_equal(p.nfailover, 0);
    assert_null(p.failover);
    ej__fire_plan_fini(&p);
}

/* Misfired: own items marked misfire (an unknown mark counts as marked),
 * never a disabled one or one taken away. */
static void test_misfire(void **state)
{
    (void)state;
    struct ej__fire_plan_in in = healthy(EJ__PLAN_WANT_MISFIRED);
    items[0].misfire = 1;
    items[1].misfire = -1;
    items[2].misfire = 1;
    items[2].disabled = 1;
    items[3].misfire = 1;
    items[3].taken_away = true;
    struct ej__fire_plan p;
    assert_int_equal(ej__fire_plan_make(&in, &p), 0);
    assert_items(p.misfired, p.nmisfired, (int[]){0, 1}, 2);
    assert_int_equal(p.nown, 0);
    ej__fire_plan_fini(&p);
}

/* The token: the running node's czxid; a failover run's is the failover
 * node's, unless the running node is newer (monitorExecution). */
static void test_token(void **state)
{
    (void)state;
    assert_int_equal(ej__fire_plan_token(false, 50, 80, true), 80);
    assert_int_equal(ej__fire_plan_token(true, 50, 80, true), 80);
    assert_int_equal(ej__fire_plan_token(true, 90, 80, true), 90);
    assert_int_equal(ej__fire_plan_token(true, 50, 0, false), 50);
    assert_int_equal(ej__fire_plan_token(true, 0, 80, true), 80);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_healthy_runs_own_items),
        cmocka_unit_test(test_fenced),
        cmocka_unit_test(test_not_run_reasons_in_order),
        cmocka_unit_test(test_disabled_items),
        cmocka_unit_test(test_failover),
        cmocka_unit_test(test_misfire),
        cmocka_unit_test(test_token),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
