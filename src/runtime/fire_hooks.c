/*
 * What reaches a job's fires from outside its cron schedule: the users of
 * its trigger (a fire now, a pause, a resume, a reschedule, waiting for the
 * fire to end) and the coordinator's hooks (a console trigger, a failover
 * taken or pending, a stop, the connection's states, the fence).
 */
#include <pthread.h>
#include <stdio.h>

#include "common/check.h"
#include "common/util.h"
#include "coord/internal.h"
#include "runtime/fire_impl.h"
#include "runtime/internal.h"
#include "schedule/internal.h"

#define MOD "job"

/* ------------------------------------------------------------------------ */
/* The trigger's users                                                        */

void (*ej__rt_trigger_use_hook)(struct ej_job *job);

ej__trigger *ej__rt_trigger_get(struct ej_job *job)
{
    pthread_mutex_lock(&job->mu);
    ej__trigger *t = job->trigger;
    if (t != NULL)
        job->trigger_uses++;
    pthread_mutex_unlock(&job->mu);
    if (t != NULL && ej__rt_trigger_use_hook != NULL)
        ej__rt_trigger_use_hook(job);
    return t;
}

void ej__rt_trigger_put(struct ej_job *job, ej__trigger *t)
{
    if (t == NULL)
        return;
    pthread_mutex_lock(&job->mu);
    EJ_ASSERT(job->trigger_uses > 0); /* a put without its get */
    if (--job->trigger_uses == 0)
        pthread_cond_broadcast(&job->cv);
    pthread_mutex_unlock(&job->mu);
}

/* The uses are short (pause, resume, fire now, reschedule: none waits for
 * the trigger's callback), so the wait is too. */
ej__trigger *ej__rt_trigger_detach(struct ej_job *job)
{
    pthread_mutex_lock(&job->mu);
    ej__trigger *t = job->trigger;
    job->trigger = NULL;
    while (job->trigger_uses > 0)
        pthread_cond_wait(&job->cv, &job->mu);
    pthread_mutex_unlock(&job->mu);
    return t;
}

bool ej__rt_wait_idle(struct ej_job *job, int64_t ms)
{
    int64_t deadline = ej__mono_ms() + ms;
    for (;;) {
        pthread_mutex_lock(&job->mu);
        bool firing = job->firing;
        pthread_mutex_unlock(&job->mu);
        ej__trigger *t = ej__rt_trigger_get(job);
        bool busy = firing || (t && ej__sched_trigger_is_busy(t));
        ej__rt_trigger_put(job, t);
        if (!busy)
            return true;
        if (ej__mono_ms() >= deadline)
            return false;
        ej__sleep_ms(10);
    }
}

/* ------------------------------------------------------------------------ */
/* Coordinator hooks                                                          */

void ej__rt_on_trigger(void *user)
{
    struct ej_job *job = user;
    pthread_mutex_lock(&job->mu);
    bool firing = job->firing;
    bool ok = job->state == EJ__JOB_STARTED && !job->stopped;
    pthread_mutex_unlock(&job->mu);
    struct fire_ref fr = {.at = ej__now_ms(), .off_schedule = true, .state = FIRE_PENDING};
    if (!ok) {
        ej__rt_not_run(job, &fr, EJ__NOT_RUN_STOPPED, "a console trigger after the job stopped");
        return;
    }
    if (firing) {
        /* ElasticJob runs a trigger only when the job is not running. */
        ej__rt_not_run(job, &fr, EJ__NOT_RUN_RUNNING,
                       "a console trigger while the job runs is ignored");
        return;
    }
    /* The job may be shut down from here on: the trigger stays until put. */
    ej__trigger *t = ej__rt_trigger_get(job);
    if (t)
        ej__sched_trigger_fire_now(t, EJ__FIRE_TRIGGER);
    ej__rt_trigger_put(job, t);
}

void ej__rt_on_failover_taken(void *user)
{
    struct ej_job *job = user;
    ej__trigger *t = ej__rt_trigger_get(job);
    if (t)
        ej__sched_trigger_fire_now(t, EJ__FIRE_FAILOVER);
    ej__rt_trigger_put(job, t);
}

static void take_task(struct ej__coord *c, void *arg)
{
    (void)arg;
    if (!ej__coord_busy(c))
        ej__failover_take(c);
}

void ej__rt_on_failover_pending(void *user)
{
    struct ej_job *job = user;
    pthread_mutex_lock(&job->mu);
    bool go = job->state == EJ__JOB_STARTED && !job->stopped && !job->firing;
    pthread_mutex_unlock(&job->mu);
    /* A busy instance takes pending items when its run ends. The take
     * waits for leader/failover/latch: on the pool, not the job's serial
     * queue, which must go on with the job's events (the latch's holder
     * may be this instance's own crash recording, whose continuation is
     * queued there). It writes no coordination state. */
    if (go)
        ej__coord_post_pool(job->coord, take_task, NULL);
}

/* The run a crash cut short will not be failed over (the coordinator
 * logged why): one fire not run, at the time the departure was seen (the
 * fire it belonged to is the crashed instance's to know). */
void ej__rt_on_failover_lost(void *user, const int *items, size_t n, int64_t gone_ms)
{
    struct ej_job *job = user;
    ej__rt_count_not_run(job, EJ__NOT_RUN_FAILOVER_LOST, items, n, 1, gone_ms, gone_ms);
}

void ej__rt_on_stop(void *user, int why)
{
    struct ej_job *job = user;
    pthread_mutex_lock(&job->mu);
    job->stopped = true;
    snprintf(job->last_error, sizeof job->last_error, "%s",
             why == EJ__STOP_OPERATOR ? "stopped: the instance node was deleted by an operator"
                                      : "stopped: the job was removed from ZooKeeper");
    pthread_mutex_unlock(&job->mu);
    ej__trigger *t = ej__rt_trigger_get(job);
    if (t)
        ej__sched_trigger_pause(t);
    ej__rt_trigger_put(job, t);
    if (job->on_stopped != NULL)
        job->on_stopped(job, why == EJ__STOP_OPERATOR, job->on_stopped_user);
}

void ej__rt_on_conn(void *user, ej_reg_state state, bool new_session)
{
    (void)new_session;
    struct ej_job *job = user;
    ej__trigger *t = ej__rt_trigger_get(job);
    pthread_mutex_lock(&job->mu);
    bool firing = job->firing;
    if (state == EJ_REG_SUSPENDED || state == EJ_REG_LOST)
        job->conn_paused = true;
    else
        job->conn_paused = false;
    bool resume = !job->conn_paused && !job->user_paused && !job->stopped &&
                  job->state == EJ__JOB_STARTED && !job->manual;
    pthread_mutex_unlock(&job->mu);
    if (t == NULL)
        return;
    if (state == EJ_REG_SUSPENDED || state == EJ_REG_LOST)
        ej__sched_trigger_pause(t);
    if (state == EJ_REG_LOST && firing && !job->keep_running_on_lost) {
        EJ_LOG(EJ_LOG_WARN, MOD, 0,
               "job %s: session lost while items run: asking them to stop (another instance "
               "may take them over)",
               job->name);
        atomic_store(&job->cancel, true);
    }
    if (resume)
        ej__sched_trigger_resume(t);
    ej__rt_trigger_put(job, t);
}

void ej__rt_on_fence(void *user, int level)
{
    struct ej_job *job = user;
    if (level != EJ_REG_FENCE_CANCEL)
        return; /* HOLD: ej__coord_may_start refuses every start */
    pthread_mutex_lock(&job->mu);
    bool firing = job->firing;
    pthread_mutex_unlock(&job->mu);
    if (!firing || job->keep_running_on_lost)
        return;
    EJ_LOG(EJ_LOG_WARN, MOD, 0,
           "job %s: fenced (ZooKeeper may expire the session soon): asking running items to "
           "stop (another instance may take them over)",
           job->name);
    atomic_store(&job->cancel, true);
}
