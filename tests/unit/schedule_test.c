/* The scheduler: cron triggers on one timer thread, misfire collapse, and
 * the shared pool with per-job limits. */
#include <pthread.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stdatomic.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <cmocka.h>

#include "common/util.h"
#include "ejob/cron.h"
#include "ejob/error.h"
#include "ejob/log.h"
#include "schedule/internal.h"

#define MAX_FIRES 64

/* The scheduler of the running test: destroyed by the teardown when the
 * test fails half-way, so its callbacks do not run into the next test. */
static ej__sched *g_sched;

static void sched_done(ej__sched *s)
{
    ej__sched_destroy(s);
    g_sched = NULL;
}

static int teardown_sched(void **state)
{
    (void)state;
    if (g_sched)
        ej__sched_destroy(g_sched);
    g_sched = NULL;
    return 0;
}

struct rec {
    pthread_mutex_t mu;
    pthread_cond_t cv;
    int n;
    ej__fire fires[MAX_FIRES];
    int64_t ended_ms[MAX_FIRES];
    int64_t sleep_first_ms; /* the first callback sleeps this long */
    bool remove_self;       /* the callback removes its own trigger */
};

static void rec_init(struct rec *r)
{
    memset(r, 0, sizeof *r);
    pthread_mutex_init(&r->mu, NULL);
    pthread_cond_init(&r->cv, NULL);
}

static void rec_fini(struct rec *r)
{
    pthread_mutex_destroy(&r->mu);
    pthread_cond_destroy(&r->cv);
}

static void on_fire(const ej__fire *f, void *arg)
{
    struct rec *r = arg;
    pthread_mutex_lock(&r->mu);
    int i = r->n;
    int64_t sleep = i == 0 ? r->sleep_first_ms : 0;
    bool rm = r->remove_self;
    pthread_mutex_unlock(&r->mu);
    if (sleep)
        ej__sleep_ms(sleep);
    if (rm)
        ej__sched_trigger_remove(f->trigger);
    pthread_mutex_lock(&r->mu);
    if (r->n < MAX_FIRES) {
        r->fires[r->n] = *f;
        r->ended_ms[r->n] = ej__now_ms();
        r->n++;
    }
    pthread_cond_broadcast(&r->cv);
    pthread_mutex_unlock(&r->mu);
}

/* Waits until at least n fires were recorded; false on timeout. */
static bool wait_fires(struct rec *r, int n, int64_t timeout_ms)
{
    int64_t until = ej__mono_ms() + timeout_ms;
    pthread_mutex_lock(&r->mu);
    while (r->n < n) {
        int64_t left = until - ej__mono_ms();
        if (left <= 0)
            break;
        pthread_mutex_unlock(&r->mu);
        ej__sleep_ms(left < 10 ? left : 10);
        pthread_mutex_lock(&r->mu);
    }
    bool ok = r->n >= n;
    pthread_mutex_unlock(&r->mu);
    return ok;
}

static int fires_count(struct rec *r)
{
    pthread_mutex_lock(&r->mu);
    int n = r->n;
    pthread_mutex_unlock(&r->mu);
    return n;
}

static ej_cron *cron(const char *expr)
{
    ej_cron *c = NULL;
    char err[128];
    assert_int_equal(ej_cron_parse(expr, &c, err, sizeof err), 0);
    return c;
}

/* Sleeps until just after the next whole second, so tests start at a
 * known phase. */
static void align_to_second(int64_t after_ms)
{
    int64_t now = ej__now_ms();
    ej__sleep_ms(1000 - now % 1000 + after_ms);
}

static void test_fires_on_the_second(void **state)
{
    (void)state;
    ej__sched *s;
    assert_int_equal(ej__sched_create(NULL, &s), 0);
    g_sched = s;
    ej__sched_job *j;
    assert_int_equal(ej__sched_job_create(s, "every-second", 2, &j), 0);
    static struct rec r;
    rec_init(&r);
    ej__trigger *t;
    assert_int_equal(ej__sched_cron_add(j, cron("0/1 * * * * ?"), NULL, false, on_fire, &r, &t), 0);
    int64_t next = ej__sched_trigger_next(t);
    assert_true(next > ej__now_ms() && next % 1000 == 0);
    assert_true(wait_fires(&r, 5, 6500));
    int on_time = 0;
    for (int i = 0; i < 5; i++) {
        const ej__fire *f = &r.fires[i];
        int64_t late = f->started_ms - f->scheduled_ms;
        assert_true(late >= 0);
        /* Under 50 ms late; a loaded test machine may delay one or two
         * wake-ups, so the majority must be. */
        on_time += late < 50;
        assert_true(late < 1000);
        assert_int_equal(f->scheduled_ms % 1000, 0);
        assert_false(f->misfired);
        assert_int_equal(f->missed_count, 1);
        assert_true(f->cron_due);
        assert_int_equal(f->now_reasons, 0);
        assert_ptr_equal(f->trigger, t);
        if (i > 0) {
            assert_int_equal(f->scheduled_ms - r.fires[i - 1].scheduled_ms, 1000);
            assert_int_equal(f->prev_scheduled_ms, r.fires[i - 1].scheduled_ms);
        }
    }
    assert_true(on_time >= 3);
    ej__sched_trigger_remove(t);
    int n = fires_count(&r);
    ej__sleep_ms(1300);
    assert_int_equal(fires_count(&r), n); /* removed: no more fires */
    ej__sched_job_destroy(j);
    sched_done(s);
    rec_fini(&r);
}

static void test_reschedule_pause_resume(void **state)
{
    (void)state;
    ej__sched *s;
    assert_int_equal(ej__sched_create(NULL, &s), 0);
    g_sched = s;
    ej__sched_job *j;
    assert_int_equal(ej__sched_job_create(s, "resched", 1, &j), 0);
    static struct rec r;
    rec_init(&r);
    ej__trigger *t;
    assert_int_equal(ej__sched_cron_add(j, cron("0 0 0 1 1 ? 2099"), NULL, false, on_fire, &r, &t),
                     0);
    assert_true(ej__sched_trigger_next(t) > ej__now_ms() + 86400000LL * 365);
    /* A cron with no future time is refused, and the caller keeps it. */
    ej_cron *past = cron("0 0 0 1 1 ? 2001");
    assert_int_equal(ej__sched_trigger_reschedule(t, past, NULL), EJ_ENOTFOUND);
    ej_cron_free(past);
    assert_int_equal(ej__sched_trigger_reschedule(t, cron("0/1 * * * * ?"), NULL), 0);
    assert_true(ej__sched_trigger_next(t) <= ej__now_ms() + 1000);
    assert_true(wait_fires(&r, 1, 2500));
    assert_false(r.fires[0].misfired);

    /* Pause across at least two fire times: nothing fires; resume reports
     * them as one misfire. */
    align_to_second(100);
    ej__sched_trigger_pause(t);
    assert_true(ej__sched_trigger_is_paused(t));
    assert_int_equal(ej__sched_trigger_next(t), 0);
    int n = fires_count(&r);
    ej__sleep_ms(2500);
    assert_int_equal(fires_count(&r), n);
    int64_t resumed = ej__now_ms();
    ej__sched_trigger_resume(t);
    assert_false(ej__sched_trigger_is_paused(t));
    assert_true(wait_fires(&r, n + 1, 1000));
    const ej__fire *f = &r.fires[n];
    assert_true(f->misfired);
    assert_true(f->missed_count >= 2);
    assert_true(f->missed_count <= 3);
    assert_true(f->scheduled_ms < resumed - 1000);
    assert_true(f->last_scheduled_ms <= resumed);
    assert_int_equal(f->last_scheduled_ms - f->scheduled_ms, 1000 * (f->missed_count - 1));
    assert_true(f->started_ms - resumed < 500);
    assert_int_equal(f->missed_by[EJ__MISS_PAUSED], f->missed_count);
    /* Then the schedule goes on normally. */
    assert_true(wait_fires(&r, n + 2, 1500));
    assert_false(r.fires[n + 1].misfired);
    ej__sched_job_destroy(j); /* removes the trigger too */
    sched_done(s);
    rec_fini(&r);
}

static void test_misfire_when_timer_stalled(void **state)
{
    (void)state;
    struct ej__sched_opts o = {.misfire_threshold_ms = 500};
    ej__sched *s;
    assert_int_equal(ej__sched_create(&o, &s), 0);
    g_sched = s;
    ej__sched_job *j;
    assert_int_equal(ej__sched_job_create(s, "stalled", 1, &j), 0);
    static struct rec r;
    rec_init(&r);
    ej__trigger *t;
    assert_int_equal(ej__sched_cron_add(j, cron("0/1 * * * * ?"), NULL, false, on_fire, &r, &t), 0);
    assert_true(wait_fires(&r, 1, 2500));
    /* Just after a fire, the timer thread is kept from running for 2.6 s:
     * fire times T+1, T+2 (and perhaps T+3) pass unseen. */
    int64_t stall_at = ej__now_ms();
    ej__sched_debug_stall_timer(s, 2600);
    assert_true(wait_fires(&r, 2, 4000));
    const ej__fire *f = &r.fires[1];
    assert_true(f->misfired);
    assert_true(f->missed_count >= 2);
    assert_int_equal(f->scheduled_ms, r.fires[0].scheduled_ms + 1000);
    assert_int_equal(f->last_scheduled_ms - f->scheduled_ms, 1000 * (f->missed_count - 1));
    assert_true(f->started_ms >= stall_at + 2500);
    assert_int_equal(f->missed_by[EJ__MISS_TIMER_LATE], f->missed_count);
    struct ej__sched_stats st;
    ej__sched_get_stats(s, &st);
    assert_true(st.misfires >= 1);
    assert_true(st.missed_by[EJ__MISS_TIMER_LATE] >= f->missed_count);
    /* After the collapse, normal fires again. */
    assert_true(wait_fires(&r, 3, 2000));
    assert_false(r.fires[2].misfired);
    ej__sched_job_destroy(j);
    sched_done(s);
    rec_fini(&r);
}

static void test_misfire_when_callback_slow(void **state)
{
    (void)state;
    ej__sched *s;
    assert_int_equal(ej__sched_create(NULL, &s), 0);
    g_sched = s;
    ej__sched_job *j;
    assert_int_equal(ej__sched_job_create(s, "slow", 1, &j), 0);
    static struct rec r;
    rec_init(&r);
    r.sleep_first_ms = 2600; /* spans two or three fire times */
    ej__trigger *t;
    assert_int_equal(ej__sched_cron_add(j, cron("0/1 * * * * ?"), NULL, false, on_fire, &r, &t), 0);
    assert_true(wait_fires(&r, 2, 6000));
    const ej__fire *first = &r.fires[0];
    const ej__fire *f = &r.fires[1];
    assert_false(first->misfired);
    assert_true(f->misfired);
    assert_true(f->missed_count >= 2 && f->missed_count <= 3);
    assert_int_equal(f->missed_by[EJ__MISS_RUNNING], f->missed_count);
    assert_int_equal(f->scheduled_ms, first->scheduled_ms + 1000);
    /* Delivered right after the slow callback returned, never overlapping. */
    assert_true(f->started_ms >= r.ended_ms[0]);
    assert_true(f->started_ms - r.ended_ms[0] < 500);
    ej__sched_job_destroy(j);
    sched_done(s);
    rec_fini(&r);
}

static void test_fire_now_and_remove_self(void **state)
{
    (void)state;
    ej__sched *s;
    assert_int_equal(ej__sched_create(NULL, &s), 0);
    g_sched = s;
    ej__sched_job *j;
    assert_int_equal(ej__sched_job_create(s, "manual", 1, &j), 0);
    static struct rec r;
    rec_init(&r);
    r.sleep_first_ms = 300;
    ej__trigger *t;
    assert_int_equal(ej__sched_manual_add(j, on_fire, &r, &t), 0);
    assert_int_equal(ej__sched_trigger_next(t), 0);
    assert_int_equal(ej__sched_trigger_fire_now(t, 0), EJ_EINVAL);
    assert_int_equal(ej__sched_trigger_fire_now(t, 1), 0);
    ej__sleep_ms(100);
    assert_true(ej__sched_trigger_is_busy(t));
    /* Two requests while it runs: one callback after it, both reasons. */
    assert_int_equal(ej__sched_trigger_fire_now(t, 2), 0);
    assert_int_equal(ej__sched_trigger_fire_now(t, 4), 0);
    assert_true(wait_fires(&r, 2, 2000));
    ej__sleep_ms(100);
    assert_int_equal(fires_count(&r), 2);
    assert_int_equal(r.fires[0].now_reasons, 1);
    assert_false(r.fires[0].cron_due);
    assert_int_equal(r.fires[1].now_reasons, 6);
    assert_false(r.fires[1].misfired);

    /* A callback that removes its own trigger does not deadlock, and the
     * trigger never fires again. */
    r.remove_self = true;
    assert_int_equal(ej__sched_trigger_fire_now(t, 8), 0);
    assert_true(wait_fires(&r, 3, 2000));
    ej__sleep_ms(50);
    struct ej__sched_stats st;
    ej__sched_get_stats(s, &st);
    assert_int_equal(st.triggers, 0);
    ej__sched_job_destroy(j);
    sched_done(s);
    rec_fini(&r);
}

static void test_clock_steps(void **state)
{
    (void)state;
    ej__sched *s;
    assert_int_equal(ej__sched_create(NULL, &s), 0);
    g_sched = s;
    ej__sched_job *j;
    assert_int_equal(ej__sched_job_create(s, "clock", 1, &j), 0);
    static struct rec r;
    rec_init(&r);
    ej__trigger *t;
    assert_int_equal(ej__sched_cron_add(j, cron("0/1 * * * * ?"), NULL, false, on_fire, &r, &t), 0);
    assert_true(wait_fires(&r, 1, 2500));
    /* The clock goes back an hour: without re-arming, the next fire would
     * be an hour away. */
    align_to_second(100);
    ej__sched_debug_shift_clock(s, -3600000);
    int n = fires_count(&r);
    assert_true(wait_fires(&r, n + 1, 1500));
    const ej__fire *f = &r.fires[n];
    assert_false(f->misfired);
    assert_true(f->scheduled_ms < ej__now_ms() - 3500000);
    assert_true(f->started_ms - f->scheduled_ms < 500);
    struct ej__sched_stats st;
    ej__sched_get_stats(s, &st);
    assert_true(st.clock_jumps >= 1);

    /* The clock jumps 10 s forward: the fire times it skipped are one
     * misfire, delivered at once. */
    align_to_second(100);
    n = fires_count(&r);
    int64_t before = ej__now_ms();
    ej__sched_debug_shift_clock(s, 10000);
    assert_true(wait_fires(&r, n + 1, 900));
    f = &r.fires[n];
    assert_true(f->misfired);
    assert_true(f->missed_count >= 9 && f->missed_count <= 11);
    assert_int_equal(f->missed_by[EJ__MISS_CLOCK_STEP], f->missed_count);
    assert_true(ej__now_ms() - before < 900);
    assert_true(wait_fires(&r, n + 2, 1500));
    assert_false(r.fires[n + 1].misfired);
    ej__sched_job_destroy(j);
    sched_done(s);
    rec_fini(&r);
}

/* Misses told to the hook and warnings logged by the scheduler. */
static struct {
    pthread_mutex_t mu;
    uint32_t by[EJ__MISS_REASONS];
    int calls;
    char warning[512];
    int warnings;
} g_miss = {.mu = PTHREAD_MUTEX_INITIALIZER};

static void on_miss(const ej__miss *m, void *arg)
{
    (void)arg;
    pthread_mutex_lock(&g_miss.mu);
    g_miss.by[m->reason] += m->count;
    g_miss.calls++;
    assert_true(m->count >= 1 && m->first_ms <= m->last_ms);
    pthread_mutex_unlock(&g_miss.mu);
}

static void capture_warning(ej_log_level level, const char *module, int err, const char *msg,
                            void *user)
{
    (void)err;
    (void)user;
    if (level != EJ_LOG_WARN || strcmp(module, "sched") != 0)
        return;
    pthread_mutex_lock(&g_miss.mu);
    snprintf(g_miss.warning, sizeof g_miss.warning, "%s", msg);
    g_miss.warnings++;
    pthread_mutex_unlock(&g_miss.mu);
}

static void test_miss_reasons_pool_saturated(void **state)
{
    (void)state;
    /* One pool thread: while trigger A's slow callback holds it, trigger
     * B's on-time fire waits in the queue (it then starts late) and B's
     * next fire times collapse behind it. Every one of them is reported
     * with its reason, to the hook, in the stats and in one warning. */
    ej_log_set_sink(capture_warning, NULL);
    ej_log_set_level(EJ_LOG_WARN);
    struct ej__sched_opts o = {.max_threads = 1, .misfire_threshold_ms = 500};
    ej__sched *s;
    assert_int_equal(ej__sched_create(&o, &s), 0);
    g_sched = s;
    ej__sched_job *j;
    assert_int_equal(ej__sched_job_create(s, "saturated", 1, &j), 0);
    static struct rec a, b;
    rec_init(&a);
    rec_init(&b);
    a.sleep_first_ms = 2700;
    align_to_second(300);
    ej__trigger *ta, *tb;
    assert_int_equal(ej__sched_cron_add(j, cron("0/1 * * * * ?"), NULL, false, on_fire, &a, &ta),
                     0);
    assert_int_equal(ej__sched_cron_add(j, cron("0/1 * * * * ?"), NULL, false, on_fire, &b, &tb),
                     0);
    ej__sched_trigger_set_miss_fn(tb, on_miss);
    assert_true(wait_fires(&b, 2, 6000));
    /* B's first callback: due on time, started more than 500 ms late. */
    const ej__fire *late = &b.fires[0], *collapsed = &b.fires[1];
    assert_true(late->started_ms - late->scheduled_ms > 500);
    assert_true(late->misfired);
    assert_int_equal(late->missed_count, 1);
    /* (timer-late only if the timer thread itself was held up that long) */
    assert_int_equal(late->missed_by[EJ__MISS_LATE_START] + late->missed_by[EJ__MISS_TIMER_LATE],
                     1);
    /* Then the fire times that passed while it was queued. */
    assert_true(collapsed->misfired);
    assert_true(collapsed->missed_count >= 2);
    assert_int_equal(collapsed->missed_by[EJ__MISS_QUEUED] + collapsed->missed_by[EJ__MISS_RUNNING],
                     collapsed->missed_count);
    assert_true(collapsed->missed_by[EJ__MISS_QUEUED] >= 1);
    ej__sched_trigger_set_miss_fn(tb, NULL);
    ej__sched_job_destroy(j);
    struct ej__sched_stats st;
    ej__sched_get_stats(s, &st);
    sched_done(s);
    pthread_mutex_lock(&g_miss.mu);
    uint32_t told = 0, expected = 0;
    for (int r = 0; r < EJ__MISS_REASONS; r++) {
        told += g_miss.by[r];
        expected += collapsed->missed_by[r] + late->missed_by[r];
    }
    assert_true(told >= expected); /* the hook heard every misfire of B */
    assert_true(g_miss.by[EJ__MISS_QUEUED] >= 1);
    assert_true(st.missed_by[EJ__MISS_QUEUED] >= collapsed->missed_by[EJ__MISS_QUEUED]);
    /* The first misfire is logged at once, with its reason and job. */
    assert_true(g_miss.warnings >= 1);
    assert_non_null(strstr(g_miss.warning, "missed"));
    assert_non_null(strstr(g_miss.warning, "misfired callback(s) (at most one run each: "));
    assert_non_null(strstr(g_miss.warning, "first job 'saturated'"));
    pthread_mutex_unlock(&g_miss.mu);
    assert_string_equal(ej__miss_reason_name(EJ__MISS_QUEUED), "queued");
    assert_string_equal(ej__miss_reason_name(EJ__MISS_REASONS), "unknown");
    ej_log_set_sink(NULL, NULL);
    ej_log_set_level(EJ_LOG_ERROR);
    rec_fini(&a);
    rec_fini(&b);
}

static void miss_reset(void)
{
    pthread_mutex_lock(&g_miss.mu);
    memset(g_miss.by, 0, sizeof g_miss.by);
    g_miss.calls = 0;
    pthread_mutex_unlock(&g_miss.mu);
}

static uint32_t missed_told(ej__miss_reason r)
{
    pthread_mutex_lock(&g_miss.mu);
    uint32_t n = g_miss.by[r];
    pthread_mutex_unlock(&g_miss.mu);
    return n;
}

static void test_remove_tells_undelivered(void **state)
{
    (void)state;
    /* A trigger removed never delivers what it holds: the fire times that
     * passed while it was paused, those collected behind its running
     * callback, and a cron fire queued for a pool thread. Each goes to the
     * miss hook before the remove returns. */
    struct ej__sched_opts o = {.max_threads = 1, .misfire_threshold_ms = 500};
    ej__sched *s;
    assert_int_equal(ej__sched_create(&o, &s), 0);
    g_sched = s;
    ej__sched_job *j;
    assert_int_equal(ej__sched_job_create(s, "removed", 1, &j), 0);
    static struct rec p, r, a, q;
    rec_init(&p);
    rec_init(&r);
    rec_init(&a);
    rec_init(&q);

    /* Paused across two fire times or more, then removed. */
    miss_reset();
    align_to_second(100);
    ej__trigger *tp;
    assert_int_equal(ej__sched_cron_add(j, cron("0/1 * * * * ?"), NULL, false, on_fire, &p, &tp),
                     0);
    ej__sched_trigger_set_miss_fn(tp, on_miss);
    ej__sched_trigger_pause(tp);
    ej__sleep_ms(2500);
    ej__sched_trigger_remove(tp);
    assert_int_equal(fires_count(&p), 0);
    assert_true(missed_told(EJ__MISS_PAUSED) >= 2 && missed_told(EJ__MISS_PAUSED) <= 3);

    /* Removed while its slow first callback runs: the fire times that
     * passed meanwhile. */
    miss_reset();
    r.sleep_first_ms = 2500;
    align_to_second(100);
    ej__trigger *tr;
    assert_int_equal(ej__sched_cron_add(j, cron("0/1 * * * * ?"), NULL, false, on_fire, &r, &tr),
                     0);
    ej__sched_trigger_set_miss_fn(tr, on_miss);
    ej__sleep_ms(2600); /* the first fire at +0.9 s runs until +3.4 s */
    ej__sched_trigger_remove(tr);
    assert_int_equal(fires_count(&r), 1);
    assert_true(missed_told(EJ__MISS_RUNNING) >= 1);

    /* A cron fire queued behind another trigger's callback (the one pool
     * thread is busy), removed before it starts. */
    miss_reset();
    a.sleep_first_ms = 2000;
    align_to_second(300);
    ej__trigger *ta, *tq;
    assert_int_equal(ej__sched_cron_add(j, cron("0/1 * * * * ?"), NULL, false, on_fire, &a, &ta),
                     0);
    assert_int_equal(ej__sched_cron_add(j, cron("0/1 * * * * ?"), NULL, false, on_fire, &q, &tq),
                     0);
    ej__sched_trigger_set_miss_fn(tq, on_miss);
    ej__sleep_ms(1000); /* A's first callback holds the thread; Q's waits */
    assert_true(ej__sched_trigger_is_busy(tq));
    ej__sched_trigger_remove(tq);
    assert_int_equal(fires_count(&q), 0);
    assert_int_equal(missed_told(EJ__MISS_QUEUED), 1);
    struct ej__sched_stats st;
    ej__sched_get_stats(s, &st);
    assert_true(st.missed_by[EJ__MISS_PAUSED] >= 2);
    assert_true(st.missed_by[EJ__MISS_QUEUED] >= 1);

    /* Without a hook nothing is told. */
    miss_reset();
    ej__sched_trigger_pause(ta);
    ej__sleep_ms(1200);
    ej__sched_job_destroy(j);
    pthread_mutex_lock(&g_miss.mu);
    assert_int_equal(g_miss.calls, 0);
    pthread_mutex_unlock(&g_miss.mu);
    sched_done(s);
    rec_fini(&p);
    rec_fini(&r);
    rec_fini(&a);
    rec_fini(&q);
}

static void test_retire_stops_counting(void **state)
{
    (void)state;
    /* A job that stops retires its trigger: the fire times it missed while
     * paused before are still told at the remove, those after the retire
     * are not (the instance leaves; it does not fail to run them). */
    struct ej__sched_opts o = {.max_threads = 1, .misfire_threshold_ms = 500};
    ej__sched *s;
    assert_int_equal(ej__sched_create(&o, &s), 0);
    g_sched = s;
    ej__sched_job *j;
    assert_int_equal(ej__sched_job_create(s, "retired", 1, &j), 0);
    static struct rec p, r;
    rec_init(&p);
    rec_init(&r);

    /* Paused across two or three fire times, retired, two more pass. */
    miss_reset();
    align_to_second(100);
    ej__trigger *tp;
    assert_int_equal(ej__sched_cron_add(j, cron("0/1 * * * * ?"), NULL, false, on_fire, &p, &tp),
                     0);
    ej__sched_trigger_set_miss_fn(tp, on_miss);
    ej__sched_trigger_pause(tp);
    ej__sleep_ms(2500);
    ej__sched_trigger_retire(tp);
    ej__sleep_ms(2000);
    ej__sched_trigger_remove(tp);
    assert_int_equal(fires_count(&p), 0);
    uint32_t before = missed_told(EJ__MISS_PAUSED);
    assert_true(before >= 2 && before <= 3);

    /* Retired while running on time: nothing missed, nothing fires. */
    miss_reset();
    align_to_second(100);
    ej__trigger *tr;
    assert_int_equal(ej__sched_cron_add(j, cron("0/1 * * * * ?"), NULL, false, on_fire, &r, &tr),
                     0);
    ej__sched_trigger_set_miss_fn(tr, on_miss);
    ej__sched_trigger_retire(tr);
    assert_true(ej__sched_trigger_is_paused(tr));
    ej__sleep_ms(2500);
    ej__sched_trigger_remove(tr);
    assert_int_equal(fires_count(&r), 0);
    pthread_mutex_lock(&g_miss.mu);
    assert_int_equal(g_miss.calls, 0);
    pthread_mutex_unlock(&g_miss.mu);
    ej__sched_job_destroy(j);
    sched_done(s);
    rec_fini(&p);
    rec_fini(&r);
}

/* ------------------------------------------------------------------ pool */

struct conc {
    atomic_int now, max, done;
    ej__sched_job *job;
    int64_t sleep_ms;
};

static void conc_task(void *arg)
{
    struct conc *c = arg;
    int n = atomic_fetch_add(&c->now, 1) + 1;
    int m = atomic_load(&c->max);
    while (n > m && !atomic_compare_exchange_weak(&c->max, &m, n)) {
    }
    ej__sleep_ms(c->sleep_ms);
    atomic_fetch_sub(&c->now, 1);
    atomic_fetch_add(&c->done, 1);
}

static void test_pool_job_limit(void **state)
{
    (void)state;
    ej__sched *s;
    assert_int_equal(ej__sched_create(NULL, &s), 0);
    g_sched = s;
    ej__sched_job *j;
    assert_int_equal(ej__sched_job_create(s, "limited", 2, &j), 0);
    struct conc c = {.sleep_ms = 40};
    void *args[8];
    for (int i = 0; i < 8; i++)
        args[i] = &c;
    int64_t t0 = ej__mono_ms();
    assert_int_equal(ej__sched_run_all(j, conc_task, args, 8), 0);
    int64_t took = ej__mono_ms() - t0;
    assert_int_equal(atomic_load(&c.done), 8);
    assert_int_equal(atomic_load(&c.max), 2);
    assert_true(took >= 160); /* 8 tasks x 40 ms, two at a time */
    /* A larger limit runs more at once. */
    ej__sched_job_set_concurrency(j, 8);
    c = (struct conc){.sleep_ms = 100};
    t0 = ej__mono_ms();
    assert_int_equal(ej__sched_run_all(j, conc_task, args, 8), 0);
    assert_true(atomic_load(&c.max) >= 4);
    assert_true(ej__mono_ms() - t0 < 500);
    assert_int_equal(ej__sched_run_all(j, conc_task, NULL, 0), 0);
    assert_int_equal(ej__sched_run_all(j, conc_task, NULL, 2), EJ_EINVAL);
    ej__sched_job_destroy(j);
    sched_done(s);
}

struct nest {
    ej__sched_job *job;
    atomic_int leaves;
    atomic_int fires_done;
};

static void nest_leaf(void *arg)
{
    struct nest *n = arg;
    ej__sleep_ms(5);
    atomic_fetch_add(&n->leaves, 1);
}

static void nest_mid(void *arg)
{
    struct nest *n = arg;
    void *a[2] = {n, n};
    /* A task of the job waits for more tasks of the same job (limit 1). */
    ej__sched_run_all(n->job, nest_leaf, a, 2);
}

static void nest_fire(void *arg)
{
    struct nest *n = arg;
    void *a[3] = {n, n, n};
    ej__sched_run_all(n->job, nest_mid, a, 3);
    atomic_fetch_add(&n->fires_done, 1);
}

static void test_pool_nested_waits_no_deadlock(void **state)
{
    (void)state;
    /* Two pool threads, four "fire flows" that each wait for their items,
     * whose items wait for sub-items: every waiting thread must help. */
    struct ej__sched_opts o = {.max_threads = 2};
    ej__sched *s;
    assert_int_equal(ej__sched_create(&o, &s), 0);
    g_sched = s;
    ej__sched_job *j;
    assert_int_equal(ej__sched_job_create(s, "nested", 1, &j), 0);
    struct nest n = {.job = j};
    for (int i = 0; i < 4; i++)
        assert_int_equal(ej__sched_post(s, NULL, nest_fire, &n), 0);
    int64_t until = ej__mono_ms() + 10000;
    while (atomic_load(&n.fires_done) < 4 && ej__mono_ms() < until)
        ej__sleep_ms(10);
    assert_int_equal(atomic_load(&n.fires_done), 4);
    assert_int_equal(atomic_load(&n.leaves), 4 * 3 * 2);
    struct ej__sched_stats st;
    ej__sched_get_stats(s, &st);
    assert_true(st.threads <= 2);
    ej__sched_job_destroy(j);
    sched_done(s);
}

static void count_task(void *arg)
{
    atomic_fetch_add((atomic_int *)arg, 1);
}

static void test_pool_post_and_idle_reap(void **state)
{
    (void)state;
    struct ej__sched_opts o = {.idle_ms = 200, .max_queued = 4};
    ej__sched *s;
    assert_int_equal(ej__sched_create(&o, &s), 0);
    g_sched = s;
    ej__sched_job *j;
    assert_int_equal(ej__sched_job_create(s, "posted", 3, &j), 0);
    atomic_int count = 0;
    for (int i = 0; i < 4; i++) {
        assert_int_equal(ej__sched_post(NULL, j, count_task, &count), 0);
    }
    assert_int_equal(ej__sched_post(s, NULL, NULL, NULL), EJ_EINVAL);
    int64_t until = ej__mono_ms() + 2000;
    while (atomic_load(&count) < 4 && ej__mono_ms() < until)
        ej__sleep_ms(5);
    assert_int_equal(atomic_load(&count), 4);
    /* More tasks than max_queued in one run_all: the rest run inline. */
    void *args[10];
    for (int i = 0; i < 10; i++)
        args[i] = &count;
    assert_int_equal(ej__sched_run_all(j, count_task, args, 10), 0);
    assert_int_equal(atomic_load(&count), 14);
    /* Idle threads go away. */
    until = ej__mono_ms() + 3000;
    struct ej__sched_stats st;
    do {
        ej__sleep_ms(50);
        ej__sched_get_stats(s, &st);
    } while (st.threads > 0 && ej__mono_ms() < until);
    assert_int_equal(st.threads, 0);
    /* And come back on demand. */
    assert_int_equal(ej__sched_post(s, NULL, count_task, &count), 0);
    until = ej__mono_ms() + 2000;
    while (atomic_load(&count) < 15 && ej__mono_ms() < until)
        ej__sleep_ms(5);
    assert_int_equal(atomic_load(&count), 15);
    ej__sched_job_destroy(j);
    assert_int_equal(ej__sched_post(NULL, NULL, count_task, &count), EJ_EINVAL);
    sched_done(s);
}

/* ej__sched_post_first: a job task that goes before the queued ones (a
 * latch's continuation ahead of a burst of events). */
struct order_rec {
    atomic_int gate, started, n, done;
    char seen[8];
};
struct order_arg {
    struct order_rec *r;
    char name;
};

static void order_task(void *arg)
{
    struct order_arg *a = arg;
    atomic_store(&a->r->started, 1);
    while (a->name == 'X' && !atomic_load(&a->r->gate))
        ej__sleep_ms(1);
    int i = atomic_fetch_add(&a->r->n, 1);
    if (i < 8)
        a->r->seen[i] = a->name;
    atomic_fetch_add(&a->r->done, 1); /* seen[i] is written before it counts */
}

static void test_post_first(void **state)
{
    (void)state;
    ej__sched *s;
    assert_int_equal(ej__sched_create(NULL, &s), 0);
    g_sched = s;
    ej__sched_job *j;
    assert_int_equal(ej__sched_job_create(s, "first", 1, &j), 0);
    static struct order_rec r;
    struct order_arg x = {&r, 'X'}, a = {&r, 'A'}, b = {&r, 'B'}, f = {&r, 'F'};
    assert_int_equal(ej__sched_post(NULL, j, order_task, &x), 0);
    int64_t until = ej__mono_ms() + 2000;
    while (!atomic_load(&r.started) && ej__mono_ms() < until)
        ej__sleep_ms(1);
    assert_int_equal(ej__sched_post(NULL, j, order_task, &a), 0);
    assert_int_equal(ej__sched_post(NULL, j, order_task, &b), 0);
    assert_int_equal(ej__sched_post_first(j, order_task, &f), 0);
    assert_int_equal(ej__sched_post_first(NULL, order_task, &f), EJ_EINVAL);
    atomic_store(&r.gate, 1);
    until = ej__mono_ms() + 2000;
    while (atomic_load(&r.done) < 4 && ej__mono_ms() < until)
        ej__sleep_ms(2);
    assert_int_equal(atomic_load(&r.done), 4);
    assert_memory_equal(r.seen, "XFAB", 4);
    ej__sched_job_destroy(j);
    sched_done(s);
}

static void test_many_jobs_few_threads(void **state)
{
    (void)state;
    ej__sched *s;
    struct ej__sched_opts o = {.max_threads = 8};
    assert_int_equal(ej__sched_create(&o, &s), 0);
    g_sched = s;
    enum { N = 300 };
    static ej__sched_job *jobs[N];
    static struct rec recs[N];
    char name[32];
    for (int i = 0; i < N; i++) {
        snprintf(name, sizeof name, "job-%d", i);
        assert_int_equal(ej__sched_job_create(s, name, 2, &jobs[i]), 0);
        rec_init(&recs[i]);
        ej__trigger *t;
        assert_int_equal(
            ej__sched_cron_add(jobs[i], cron("0/1 * * * * ?"), NULL, false, on_fire, &recs[i], &t),
            0);
    }
    ej__sleep_ms(2300);
    struct ej__sched_stats st;
    ej__sched_get_stats(s, &st);
    assert_int_equal(st.triggers, N);
    assert_int_equal(st.jobs, N);
    assert_true(st.threads <= 8);
    int64_t worst = 0;
    for (int i = 0; i < N; i++) {
        assert_true(fires_count(&recs[i]) >= 2);
        for (int k = 0; k < recs[i].n; k++) {
            int64_t late = recs[i].fires[k].started_ms - recs[i].fires[k].scheduled_ms;
            worst = late > worst ? late : worst;
        }
    }
    assert_true(worst < 1000); /* none missed its second */
    /* Destroying the scheduler destroys the jobs left. */
    sched_done(s);
    for (int i = 0; i < N; i++)
        rec_fini(&recs[i]);
}

static void destroy_job_from_callback(const ej__fire *f, void *arg)
{
    (void)f;
    ej__sched_job *j = *(ej__sched_job **)arg;
    ej__sched_job_destroy(j);
    *(ej__sched_job **)arg = NULL;
}

static void test_job_destroy_from_own_callback(void **state)
{
    (void)state;
    ej__sched *s;
    assert_int_equal(ej__sched_create(NULL, &s), 0);
    g_sched = s;
    ej__sched_job *j;
    assert_int_equal(ej__sched_job_create(s, "selfdestruct", 1, &j), 0);
    ej__sched_job *slot = j;
    ej__trigger *t;
    assert_int_equal(ej__sched_manual_add(j, destroy_job_from_callback, &slot, &t), 0);
    assert_int_equal(ej__sched_trigger_fire_now(t, 1), 0);
    int64_t until = ej__mono_ms() + 2000;
    struct ej__sched_stats st;
    do {
        ej__sleep_ms(10);
        ej__sched_get_stats(s, &st);
    } while (st.jobs > 0 && ej__mono_ms() < until);
    assert_int_equal(st.jobs, 0);
    assert_int_equal(st.triggers, 0);
    assert_null(slot);
    sched_done(s);
}

static void test_default_and_errors(void **state)
{
    (void)state;
    ej__sched *d = ej__sched_default();
    assert_non_null(d);
    assert_ptr_equal(ej__sched_default(), d);
    assert_int_equal(ej__sched_create(NULL, NULL), EJ_EINVAL);
    ej__sched_job *j;
    assert_int_equal(ej__sched_job_create(d, NULL, 1, &j), EJ_EINVAL);
    assert_int_equal(ej__sched_job_create(d, "x", 0, &j), 0);
    assert_ptr_equal(ej__sched_job_scheduler(j), d);
    ej__trigger *t;
    ej_cron *c = cron("0 0 0 1 1 ? 2001");
    assert_int_equal(ej__sched_cron_add(j, c, NULL, false, on_fire, NULL, &t), EJ_ENOTFOUND);
    ej_cron_free(c);
    assert_int_equal(ej__sched_cron_add(j, NULL, NULL, false, on_fire, NULL, &t), EJ_EINVAL);
    /* A trigger created paused fires only after resume. */
    static struct rec r;
    rec_init(&r);
    assert_int_equal(ej__sched_cron_add(j, cron("* * * * * ?"), NULL, true, on_fire, &r, &t), 0);
    assert_true(ej__sched_trigger_is_paused(t));
    ej__sleep_ms(1200);
    assert_int_equal(fires_count(&r), 0);
    ej__sched_trigger_resume(t);
    assert_true(wait_fires(&r, 1, 1500));
    assert_false(r.fires[0].misfired);
    ej__sched_job_destroy(j);
    rec_fini(&r);
    ej__sched_job_destroy(NULL);
    ej__sched_trigger_remove(NULL);
    ej__sched_destroy(NULL);
}

int main(void)
{
    ej_log_set_level(EJ_LOG_ERROR);
    const struct CMUnitTest tests[] = {
        cmocka_unit_test_teardown(test_fires_on_the_second, teardown_sched),
        cmocka_unit_test_teardown(test_reschedule_pause_resume, teardown_sched),
        cmocka_unit_test_teardown(test_misfire_when_timer_stalled, teardown_sched),
        cmocka_unit_test_teardown(test_misfire_when_callback_slow, teardown_sched),
        cmocka_unit_test_teardown(test_fire_now_and_remove_self, teardown_sched),
        cmocka_unit_test_teardown(test_clock_steps, teardown_sched),
        cmocka_unit_test_teardown(test_miss_reasons_pool_saturated, teardown_sched),
        cmocka_unit_test_teardown(test_remove_tells_undelivered, teardown_sched),
        cmocka_unit_test_teardown(test_retire_stops_counting, teardown_sched),
        cmocka_unit_test_teardown(test_pool_job_limit, teardown_sched),
        cmocka_unit_test_teardown(test_pool_nested_waits_no_deadlock, teardown_sched),
        cmocka_unit_test_teardown(test_pool_post_and_idle_reap, teardown_sched),
        cmocka_unit_test_teardown(test_many_jobs_few_threads, teardown_sched),
        cmocka_unit_test_teardown(test_post_first, teardown_sched),
        cmocka_unit_test_teardown(test_job_destroy_from_own_callback, teardown_sched),
        cmocka_unit_test_teardown(test_default_and_errors, teardown_sched),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
