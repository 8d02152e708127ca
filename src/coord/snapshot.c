/*
 * The coordinator's snapshot: what threads other than the state's owner,
 * the job's serial queue, read (the fire's checks, the job API's getters,
 * the listeners' "started yet?"). The queue publishes a new immutable copy
 * after every task that changed what it holds (coord.c's task runners, for
 * posted and for called tasks); readers take a reference under snap_mu, which guards
 * the pointer alone, so a reader never waits for the queue's ZooKeeper
 * requests or an election. The few facts with another owner (connected,
 * busy, the reshard count, the takeover hold, closed) are atomics, read
 * here directly.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "common/util.h"
#include "coord/coord_impl.h"
#include "schedule/internal.h"
#include "ejob/log.h"

#define MOD "coord"

static void fill(const ej__coord *c, struct ej__coord_snap *s)
{
    s->reg_session = c->reg_session;
    s->reg_at_ms = c->reg_at_ms;
    s->started = c->started;
    s->stopped = c->stopped;
    s->closed = atomic_load(&c->closed);
    s->failover_on = c->have_cfg && c->cfg.failover;
    s->total_count = c->have_cfg ? c->cfg.sharding_total_count : 0;
    s->cfg_gen = c->cfg_gen;
    s->have_cfg = c->have_cfg;
}

/* Whether the state a (err: its last error) is what the snapshot b holds. */
static bool same(const struct ej__coord_snap *a, const char *err, const struct ej__coord_snap *b)
{
    return a->reg_session == b->reg_session && a->reg_at_ms == b->reg_at_ms &&
           a->started == b->started && a->stopped == b->stopped && a->closed == b->closed &&
           a->failover_on == b->failover_on && a->total_count == b->total_count &&
           a->cfg_gen == b->cfg_gen && a->have_cfg == b->have_cfg && strcmp(b->err, err) == 0;
}

static struct ej__coord_snap *snap_new(const ej__coord *c)
{
    struct ej__coord_snap *s = calloc(1, sizeof *s);
    EJ_ASSERT_MSG(s != NULL, "out of memory publishing the coordinator's state of job %s", c->job);
    atomic_init(&s->refs, 1);
    fill(c, s);
    if (s->have_cfg)
        EJ_ASSERT_MSG(ej_job_config_copy(&s->cfg, &c->cfg) == 0,
                      "out of memory publishing the config of job %s", c->job);
    snprintf(s->err, sizeof s->err, "%s", c->err);
    return s;
}

void ej__coord_snap_init(ej__coord *c)
{
    pthread_mutex_init(&c->snap_mu, NULL);
    c->snap = snap_new(c);
}

void ej__coord_snap_fini(ej__coord *c)
{
    ej__coord_snap_unref(c->snap);
    c->snap = NULL;
    pthread_mutex_destroy(&c->snap_mu);
}

void ej__coord_publish(ej__coord *c)
{
    EJ_ASSERT_MSG(ej__sched_job_is_current(c->serial), "not on the job's serial queue");
    struct ej__coord_snap now = {0};
    fill(c, &now);
    /* Only the serial queue replaces the pointer: reading it here needs no
     * snap_mu. */
    if (same(&now, c->err, c->snap))
        return;
    struct ej__coord_snap *s = snap_new(c);
    pthread_mutex_lock(&c->snap_mu);
    struct ej__coord_snap *old = c->snap;
    c->snap = s;
    pthread_mutex_unlock(&c->snap_mu);
    ej__coord_snap_unref(old);
    ej__coord_changed(c);
}

struct ej__coord_snap *ej__coord_snap_get(ej__coord *c)
{
    pthread_mutex_lock(&c->snap_mu);
    struct ej__coord_snap *s = c->snap;
    atomic_fetch_add_explicit(&s->refs, 1, memory_order_relaxed);
    pthread_mutex_unlock(&c->snap_mu);
    return s;
}

void ej__coord_snap_unref(struct ej__coord_snap *s)
{
    if (s != NULL && atomic_fetch_sub_explicit(&s->refs, 1, memory_order_acq_rel) == 1) {
        if (s->have_cfg)
            ej_job_config_fini(&s->cfg);
        free(s);
    }
}

/* Waiters on other threads (a fire waiting for a leader or for the
 * resharding flags, destroy waiting for the tasks inside) sleep on a
 * change counter that every event and every publication moves. */
uint64_t ej__coord_change_seq(ej__coord *c)
{
    pthread_mutex_lock(&c->change_mu);
    uint64_t n = c->changes;
    pthread_mutex_unlock(&c->change_mu);
    return n;
}

void ej__coord_changed(ej__coord *c)
{
    pthread_mutex_lock(&c->change_mu);
    c->changes++;
    pthread_cond_broadcast(&c->change_cv);
    pthread_mutex_unlock(&c->change_mu);
}

bool ej__coord_wait_change(ej__coord *c, uint64_t *seq, int64_t deadline_ms)
{
    int64_t left = deadline_ms - ej__mono_ms();
    if (left <= 0)
        return false;
    if (left > 200)
        left = 200; /* re-check periodically: some conditions have no event */
    struct timespec ts = ej__mono_timespec_in(left);
    pthread_mutex_lock(&c->change_mu);
    while (c->changes == *seq) {
        if (pthread_cond_timedwait(&c->change_cv, &c->change_mu, &ts) != 0)
            break;
    }
    *seq = c->changes;
    pthread_mutex_unlock(&c->change_mu);
    return ej__mono_ms() < deadline_ms;
}

/* ------------------------------------------------------------------------ */
/* Readers                                                                    */

void ej__coord_last_error(ej__coord *c, char *buf, size_t len)
{
    if (len == 0)
        return;
    struct ej__coord_snap *s = ej__coord_snap_get(c);
    snprintf(buf, len, "%s", s->err);
    ej__coord_snap_unref(s);
}

bool ej__coord_failover_on(ej__coord *c)
{
    struct ej__coord_snap *s = ej__coord_snap_get(c);
    bool on = s->failover_on;
    ej__coord_snap_unref(s);
    return on;
}

int ej__coord_total_count(ej__coord *c)
{
    struct ej__coord_snap *s = ej__coord_snap_get(c);
    int n = s->total_count;
    ej__coord_snap_unref(s);
    return n;
}

bool ej__coord_registered(ej__coord *c)
{
    struct ej__coord_snap *s = ej__coord_snap_get(c);
    bool r = s->reg_session != 0 && s->reg_session == ej_registry_session_id(c->reg) && !s->stopped;
    ej__coord_snap_unref(s);
    return r;
}

bool ej__coord_connected(ej__coord *c)
{
    return atomic_load(&c->connected);
}

bool ej__coord_stopped(ej__coord *c)
{
    if (atomic_load(&c->closed))
        return true;
    struct ej__coord_snap *s = ej__coord_snap_get(c);
    bool r = s->stopped;
    ej__coord_snap_unref(s);
    return r;
}

uint64_t ej__coord_reshards(ej__coord *c)
{
    return atomic_load(&c->reshards);
}

bool ej__coord_busy(ej__coord *c)
{
    return atomic_load(&c->busy);
}

int ej__coord_config(ej__coord *c, struct ej_job_config *out)
{
    struct ej__coord_snap *s = ej__coord_snap_get(c);
    int rc = s->have_cfg ? ej_job_config_copy(out, &s->cfg) : EJ_ENOTFOUND;
    ej__coord_snap_unref(s);
    return rc;
}

char *ej__coord_strategy_name(ej__coord *c)
{
    struct ej__coord_snap *s = ej__coord_snap_get(c);
    char *name = strdup(s->have_cfg && s->cfg.job_sharding_strategy_class
                            ? s->cfg.job_sharding_strategy_class
                            : "");
    ej__coord_snap_unref(s);
    return name;
}

int64_t ej__coord_session(ej__coord *c)
{
    if (atomic_load(&c->closed))
        return 0;
    struct ej__coord_snap *s = ej__coord_snap_get(c);
    int64_t sess = s->stopped ? 0 : s->reg_session;
    ej__coord_snap_unref(s);
    return sess;
}

int64_t ej__coord_registered_at(ej__coord *c)
{
    struct ej__coord_snap *s = ej__coord_snap_get(c);
    int64_t at = s->reg_at_ms;
    ej__coord_snap_unref(s);
    return at;
}

bool ej__coord_may_start(ej__coord *c, int64_t session)
{
    struct ej__coord_snap *s = ej__coord_snap_get(c);
    bool ok = session != 0 && s->reg_session == session && s->started && !s->stopped &&
              !atomic_load(&c->closed) && atomic_load(&c->connected);
    ej__coord_snap_unref(s);
    return ok && ej_registry_fence(c->reg, session) == EJ_REG_FENCE_OPEN;
}

void ej__coord_takeover_wait(ej__coord *c)
{
    int64_t until = atomic_load(&c->takeover_hold_until);
    int64_t left = until - ej__mono_ms();
    if (left <= 0)
        return;
    EJ_LOG(EJ_LOG_DEBUG, MOD, 0,
           "job %s: an instance's session expired: items start after the takeover margin "
           "(%lld ms left)",
           c->job, (long long)left);
    ej__sleep_ms(left);
}
