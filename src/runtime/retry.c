/*
 * Retries of a failed item run (the job's retry: settings, docs/execution.md
 * "Retries"). The attempt runs on the pool thread of the run it follows,
 * which keeps the item's running node through the back-off: no other
 * instance can start the item meanwhile, and if this instance loses its
 * session the node goes, failover may run the item elsewhere, and the
 * retry is abandoned (the fence below). The next cron fire wins over a
 * retry that would not start before it.
 */
#include <inttypes.h>
#include <stdlib.h>
#include <string.h>

#include "common/util.h"
#include "coord/internal.h"
#include "ejob/log.h"
#include "runtime/internal.h"
#include "schedule/internal.h"

#define MOD "job"
#define SLICE_MS 20

int64_t ej__retry_delay_ms(const struct ej_retry_config *r, int failed_attempt, uint64_t *seed)
{
    if (r->max_attempts <= 1 || failed_attempt >= r->max_attempts)
        return -1;
    double s = r->initial_backoff_seconds;
    for (int i = 1; i < failed_attempt && s < r->max_backoff_seconds; i++)
        s *= r->multiplier;
    if (s > r->max_backoff_seconds)
        s = r->max_backoff_seconds;
    double ms = s * 1000.0;
    if (r->jitter_percent > 0) {
        /* xorshift64: spread, not secrecy. */
        uint64_t x = *seed ? *seed : 0x9e3779b97f4a7c15ULL;
        x ^= x << 13;
        x ^= x >> 7;
        x ^= x << 17;
        *seed = x;
        double u = (double)(x >> 11) / (double)(1ULL << 53); /* [0, 1) */
        ms *= 1.0 + (2.0 * u - 1.0) * r->jitter_percent / 100.0;
    }
    return (int64_t)ms;
}

static bool holds(const int *items, size_t n, int item)
{
    for (size_t i = 0; i < n; i++)
        if (items[i] == item)
            return true;
    return false;
}

/* Why the attempt may not start now; NULL when it may. */
static const char *blocked(struct ej_job *job, int64_t fire_session, int item)
{
    pthread_mutex_lock(&job->mu);
    bool go = job->state == EJ__JOB_STARTED && !job->stopped;
    pthread_mutex_unlock(&job->mu);
    if (!go || atomic_load(&job->cancel))
        return "the job is stopping";
    if (!ej__coord_may_start(job->coord, fire_session))
        return "fenced: not registered in this fire's session, or no recent contact with "
               "ZooKeeper";
    /* Its own by sharding (not taken away by a failover), or taken over
     * here: the failover node, like the running node, stays this
     * instance's until the failover run and its retries end. */
    struct ej__fire_request req = {.want = EJ__PLAN_WANT_OWN | EJ__PLAN_WANT_FAILOVER};
    struct ej__fire_plan plan;
    bool mine = ej__coord_fire_plan(job->coord, &req, &plan) == 0 &&
                (holds(plan.own, plan.nown, item) || holds(plan.failover, plan.nfailover, item));
    ej__fire_plan_fini(&plan);
    return mine ? NULL : "the item moved to another instance";
}

bool ej__retry_wait(struct ej_job *job, const atomic_bool *kill, int64_t fire_session, int item,
                    int64_t delay_ms, int next_attempt, const char *task_id)
{
    int64_t start_at = ej__now_ms() + delay_ms;
    ej__trigger *t = ej__rt_trigger_get(job);
    int64_t next_fire = t ? ej__sched_trigger_next(t) : 0;
    ej__rt_trigger_put(job, t);
    const char *why = NULL;
    if (next_fire > 0 && start_at >= next_fire) {
        why = "the next fire comes first";
    } else {
        int64_t end = ej__mono_ms() + delay_ms;
        while (why == NULL && ej__mono_ms() < end) {
            if (atomic_load(kill))
                why = "killed";
            else if (atomic_load(&job->cancel))
                why = "the job is stopping";
            else {
                int64_t left = end - ej__mono_ms();
                ej__sleep_ms(left < SLICE_MS ? (left > 0 ? left : 0) : SLICE_MS);
            }
        }
        if (why == NULL)
            why = blocked(job, fire_session, item);
    }
    if (why == NULL) {
        EJ_LOG(EJ_LOG_INFO, MOD, 0, "job %s: item %d attempt %d after %" PRId64 " ms", job->name,
               item, next_attempt, delay_ms);
        return true;
    }
    ej__rt_post_status(job, task_id, &item, 1, EJ_TASK_ERROR,
                       "Job '%s' item %d retry abandoned (attempt %d not run): %s", job->name, item,
                       next_attempt, why);
    EJ_LOG(EJ_LOG_WARN, MOD, 0, "job %s: item %d attempt %d not run: %s", job->name, item,
           next_attempt, why);
    return false;
}
