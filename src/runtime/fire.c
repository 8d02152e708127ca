/*
 * Each fire (SPEC 4 "Each fire", ElasticJob 2.1.5's
 * AbstractElasticJobExecutor.execute): the scheduler's callback, its
 * startingDeadlineSeconds and CATCH_UP decisions, then the coordinator's
 * plan (clock-skew check, disabled server, fencing), the failover items
 * first, else shard if necessary and run the own items, then a failover
 * take. Also the job's definition and its schedule (the cron trigger and
 * the scheduler's miss hook).
 *
 * The rest of a fire: fire_batch.c runs a batch of items, misfire.c the
 * misfire loop after a normal run, fire_events.c posts the events and
 * counts fires not run, fire_hooks.c holds the coordinator's hooks.
 */
#include <inttypes.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "common/check.h"
#include "common/util.h"
#include "coord/internal.h"
#include "ejob/cron.h"
#include "ejob/event.h"
#include "ejob/job.h"
#include "exec/internal.h"
#include "runtime/fire_impl.h"
#include "runtime/internal.h"
#include "schedule/internal.h"

#define MOD "job"

/* ------------------------------------------------------------------------ */
/* Definitions                                                               */

int ej__rt_def_type(const struct ej_job_def *def)
{
    return def ? (int)def->type : -1;
}

int ej__rt_def_validate(const struct ej_job_def *def, char *err, size_t errlen)
{
    return ej_job_def_validate(def, err, errlen);
}

int ej__rt_concurrency(const struct ej__rt_settings *s, const struct ej_job_def *user_def)
{
    /* A program's definition chooses only a FIXED executor; anything else
     * is the configuration's executorServiceHandler, as ej__rt_build_def. */
    if (user_def != NULL && user_def->executor == EJ_EXECUTOR_FIXED)
        return ej_executor_concurrency(EJ_EXECUTOR_FIXED, user_def->executor_threads);
    ej_executor_kind k = EJ_EXECUTOR_CPU;
    if (s && ej_executor_kind_parse(s->cfg.executor_service_handler, &k) != 0)
        k = EJ_EXECUTOR_CPU;
    return ej_executor_concurrency(k, 0);
}

int ej__rt_build_def(struct ej__rt_settings *s, const struct ej_job_def *user)
{
    /* What the program gave (callbacks, listeners, a custom handler, a
     * fixed executor, env, headers, caps), checked by its one rule; all
     * else is the configuration's, read by the runners through config_. */
    char err[256];
    if (user != NULL && ej_job_def_validate(user, err, sizeof err) != 0) {
        EJ_LOG(EJ_LOG_ERROR, MOD, EJ_ECONFIG, "job %s: invalid definition: %s", s->cfg.job_name,
               err);
        return EJ_ECONFIG;
    }
    struct ej_job_def *d = calloc(1, sizeof *d);
    if (d == NULL)
        return EJ_ENOMEM;
    if (user != NULL)
        *d = *user;
    d->type = (ej_job_type)s->cfg.job_type;
    d->config_ = &s->cfg;
    if (d->error_handler.kind != EJ_ERROR_HANDLER_CUSTOM &&
        ej_error_handler_parse(s->cfg.job_exception_handler, &d->error_handler.kind) != 0) {
        EJ_LOG(EJ_LOG_WARN, MOD, EJ_ECONFIG,
               "job %s: job_exception_handler \"%s\" is not known; logging errors instead",
               s->cfg.job_name, s->cfg.job_exception_handler);
        d->error_handler.kind = EJ_ERROR_HANDLER_LOG;
    }
    if (d->executor != EJ_EXECUTOR_FIXED &&
        ej_executor_kind_parse(s->cfg.executor_service_handler, &d->executor) != 0) {
        EJ_LOG(EJ_LOG_WARN, MOD, EJ_ECONFIG,
               "job %s: executor_service_handler \"%s\" is not known; using CPU",
               s->cfg.job_name, s->cfg.executor_service_handler);
        d->executor = EJ_EXECUTOR_CPU;
    }
    d->script.timeout_ms = ej_job_config_timeout_ms(&s->cfg);
    d->script.kill_grace_ms = ej_job_config_grace_ms(&s->cfg);
    free(s->def);
    s->def = d;
    return 0;
}

/* ------------------------------------------------------------------------ */
/* The fire                                                                   */

static struct fire_ref fire_ref_of(const struct ej__fire *f)
{
    struct fire_ref fr = {
        .at = f->scheduled_ms, .off_schedule = !f->cron_due, .state = FIRE_PENDING};
    if ((f->now_reasons & EJ__FIRE_TRIGGER) == 0) {
        if (f->cron_due && f->misfired)
            fr.state = FIRE_REPORTED;
        else if (!f->cron_due)
            fr.state = FIRE_FAILOVER;
    }
    return fr;
}

static void fill_info(ej_shard_contexts_info *info, const struct ej__rt_settings *s,
                      const char *task_id, const int *items, size_t n, const char **params,
                      ej_execution_source source)
{
    for (size_t i = 0; i < n; i++)
        params[i] = param_of(s, items[i]);
    *info = (ej_shard_contexts_info){
        .job_name = s->cfg.job_name,
        .task_id = task_id,
        .sharding_total_count = s->cfg.sharding_total_count,
        .job_parameter = s->cfg.job_parameter,
        .items = items,
        .item_count = n,
        .item_parameters = n ? params : NULL,
        .execution_source = source,
    };
}

/* One execute() of ElasticJob: listeners around the run and, for normal
 * runs, the misfire loop. fr: the fire these items are of (see
 * ej__rt_run_batch), or NULL. */
static void execute(struct ej_job *job, const struct ej__rt_settings *s, const int *items, size_t n,
                    const int64_t *failover_tokens, ej_execution_source source, bool misfire_loop,
                    struct fire_ref *fr)
{
    struct ej__coord *c = job->coord;
    const struct ej_job_def *def = def_of(s);
    char *task_id = ej__exec_task_id(s->cfg.job_name, items, n, job->me);
    const char **params = n ? calloc(n, sizeof *params) : NULL;
    ej_shard_contexts_info info;
    fill_info(&info, s, task_id ? task_id : "", items, n, params, source);
    ej__rt_post_status(job, task_id, items, n, EJ_TASK_STAGING, "Job '%s' execute begin.",
                       s->cfg.job_name);
    ej__exec_listeners_before(def, &info);
    const struct ej_distribute_once_listener *once = job->once;
    if (once && once->before_last) {
        int r = ej__guarantee_enter(c, false, items, n, s->cfg.sharding_total_count,
                                    once->started_timeout_ms);
        if (r == 1) {
            once->before_last(&info, once->user);
            ej__guarantee_finish(c, false);
        } else if (r < 0) {
            ej__exec_handle_error(def, s->cfg.job_name, -1,
                                  "distribute-once listener: not every "
                                  "item started in time");
        }
    }
    bool abort_run = ej__rt_run_batch(job, s, items, n, failover_tokens, source, fr, NULL);
    if (misfire_loop)
        ej__misfire_loop_run(job, s, abort_run);
    if (once && once->after_last) {
        int r = ej__guarantee_enter(c, true, items, n, s->cfg.sharding_total_count,
                                    once->completed_timeout_ms);
        if (r == 1) {
            once->after_last(&info, once->user);
            ej__guarantee_finish(c, true);
        } else if (r < 0) {
            ej__exec_handle_error(def, s->cfg.job_name, -1,
                                  "distribute-once listener: not every "
                                  "item completed in time");
        }
    }
    ej__exec_listeners_after(def, &info);
    free(params);
    free(task_id);
}

/* A plan's verdict other than RUN, counted and logged as fr's not-run
 * reason. */
static void plan_not_run(struct ej_job *job, const struct ej__rt_settings *s, struct fire_ref *fr,
                         const struct ej__fire_plan *plan)
{
    switch (plan->verdict) {
    case EJ__PLAN_RUN:
        return;
    case EJ__PLAN_FENCED:
        ej__rt_not_run(
            job, fr, EJ__NOT_RUN_FENCED,
            "not registered in ZooKeeper now, or fenced (no recent contact with ZooKeeper)");
        return;
    case EJ__PLAN_BEFORE_REGISTRATION:
        /* Its items belonged to others then, who ran them or will re-run
         * them as misfires. */
        ej__rt_not_run(job, fr, EJ__NOT_RUN_BEFORE_REGISTRATION,
                       "due before this instance registered at %" PRId64
                       " (its items were others' then)",
                       plan->registered_at_ms);
        return;
    case EJ__PLAN_TIME_DIFF:
        /* Logged by ej__rt_not_run (rate-limited) and by the error handler. */
        ej__job_set_error(job, "%s", plan->msg);
        ej__rt_post_status(job, "", NULL, 0, EJ_TASK_ERROR, "%s", plan->msg);
        ej__exec_handle_error(def_of(s), s->cfg.job_name, -1, plan->msg);
        ej__rt_not_run(job, fr, EJ__NOT_RUN_TIME_DIFF, "%s", plan->msg);
        return;
    case EJ__PLAN_TIME_DIFF_FAILED:
        ej__rt_not_run(job, fr, EJ__NOT_RUN_TIME_DIFF, "%s", plan->msg);
        return;
    case EJ__PLAN_DISABLED:
        ej__rt_not_run(job, fr, EJ__NOT_RUN_DISABLED, "server %s is disabled", job->ip);
        return;
    }
}

/* The fire's own items: resharding first when it is due (the leader
 * reshards, a follower waits, bounded), then the plan of this instance's
 * items, run with the misfire loop. */
static void run_own(struct ej_job *job, const struct ej__rt_settings *s, uint64_t gen, bool cron,
                    int64_t scheduled_ms, struct fire_ref *fr)
{
    struct ej__coord *c = job->coord;
    int rc = ej__shard_if_necessary(c);
    if (rc == EJ_ETIMEDOUT)
        ej__rt_not_run(job, fr, EJ__NOT_RUN_LEADER_WAIT,
                       "the leader did not reshard within %d ms (leader/sharding/necessary or "
                       "processing still there)",
                       ej__coord_wait_bound(c));
    else if (rc == EJ_ESTOPPED)
        ej__rt_not_run(job, fr, EJ__NOT_RUN_STOPPED, "the job stopped while it waited to reshard");
    else if (rc != 0 && rc != EJ_EBUSY)
        ej__rt_not_run(job, fr, EJ__NOT_RUN_SHARDING_FAILED, "sharding failed: %s",
                       ej_strerror(rc));
    if (rc != 0 && rc != EJ_EBUSY)
        return;
    struct ej__fire_request req = {.want = EJ__PLAN_WANT_OWN};
    struct ej__fire_plan plan;
    if (ej__coord_fire_plan(c, &req, &plan) != 0)
        memset(&plan, 0, sizeof plan);
    ej__takeover_check(job, s, plan.own, plan.nown, cron ? scheduled_ms : ej__now_ms());
    if (plan.nown == 0) {
        ej__rt_post_status(job, "", NULL, 0, EJ_TASK_FINISHED,
                           "Sharding item for job '%s' is empty.", s->cfg.job_name);
    } else {
        ej__misfire_open(job, plan.own, plan.nown);
        /* From the newest fire time this fire covers: armed from the
         * oldest of collapsed ones, the newest counted again as missed
         * while this ran (a second run at once). */
        int64_t covers = job->fire_covers_ms > scheduled_ms ? job->fire_covers_ms : scheduled_ms;
        if (cron && !job->manual && !(fr && fr->catch_up))
            ej__misfire_arm(job, gen, covers > 0 ? covers : ej__now_ms());
        execute(job, s, plan.own, plan.nown, NULL, EJ_EXEC_NORMAL_TRIGGER, true, fr);
    }
    ej__fire_plan_fini(&plan);
}

/* One fire: the coordinator's plan (its checks, then the items taken over,
 * which run first), the own items, then a failover take. */
static void do_fire(struct ej_job *job, const struct ej__rt_settings *s, uint64_t gen,
                    unsigned reasons, bool cron, int64_t scheduled_ms, struct fire_ref *fr)
{
    struct ej__coord *c = job->coord;
    struct ej__fire_request req = {
        .want = EJ__PLAN_WANT_GATE | (s->cfg.failover ? EJ__PLAN_WANT_FAILOVER : 0),
        .fire_session = atomic_load(&job->fire_session),
        .cron = cron,
        .scheduled_ms = scheduled_ms,
        .max_time_diff_seconds = s->cfg.max_time_diff_seconds,
    };
    struct ej__fire_plan plan;
    int rc = ej__coord_fire_plan(c, &req, &plan);
    if (rc != 0) {
        ej__rt_not_run(job, fr, EJ__NOT_RUN_START_FAILED, "its plan could not be made: %s",
                       ej_strerror(rc));
        return;
    }
    if (plan.verdict != EJ__PLAN_RUN) {
        plan_not_run(job, s, fr, &plan);
        ej__fire_plan_fini(&plan);
        return;
    }
    EJ_LOG(EJ_LOG_DEBUG, MOD, 0, "job %s: %zu failover items of this instance", job->name,
           plan.nfailover);
    if (plan.nfailover) {
        execute(job, s, plan.failover, plan.nfailover, plan.failover_tokens, EJ_EXEC_FAILOVER,
                false, NULL);
        ej__coord_fire_done(
            c, &(struct ej__fire_done){.failover = plan.failover, .nfailover = plan.nfailover});
    }
    ej__fire_plan_fini(&plan);
    if (cron || (reasons & EJ__FIRE_TRIGGER))
        run_own(job, s, gen, cron, scheduled_ms, fr);
    if (s->cfg.failover)
        ej__failover_take(c); /* triggers a FAILOVER fire through the hook */
}

/* Sub-millisecond to minutes: a healthy scheduler starts a fire within a
 * few ms; seconds mean a busy pool, minutes a pause or a stall. */
const double ej_fire_lateness_bounds[EJ_FIRE_LATENESS_BUCKETS] = {
    0.001, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 60, 300};

/* Under job->mu. */
static void count_lateness(struct ej_job *job, int64_t late_ms)
{
    double late = late_ms > 0 ? (double)late_ms / 1000.0 : 0;
    size_t i = 0;
    while (i < EJ_FIRE_LATENESS_BUCKETS && late > ej_fire_lateness_bounds[i])
        i++;
    job->fire_lateness[i]++;
    job->fire_lateness_sum += late;
}

/* The latest cron fire time f covers (the last of collapsed ones); a
 * trigger's time; 0 for a fire that only runs failover items. */
static int64_t fire_covers(const struct ej__fire *f)
{
    if (f->cron_due)
        return f->last_scheduled_ms > f->scheduled_ms ? f->last_scheduled_ms : f->scheduled_ms;
    return (f->now_reasons & EJ__FIRE_TRIGGER) ? f->scheduled_ms : 0;
}

/*
 * startingDeadlineSeconds: whether the cron fire f, begun more than the
 * deadline after its newest fire time (Kubernetes: the latest missed
 * schedule), is dropped for it, with all it covers. Not a misfired
 * fire that is dropped anyway (misfire off, its fire times re-run by the
 * misfire loop already) or whose fire times CATCH_UP runs. Under job->mu.
 */
static bool past_deadline(struct ej_job *job, const struct ej__rt_settings *s,
                          const struct ej__fire *f)
{
    int deadline_s = s->cfg.starting_deadline_seconds;
    if (!f->cron_due || deadline_s <= 0 || f->scheduled_ms <= 0 ||
        f->started_ms - fire_covers(f) <= (int64_t)deadline_s * 1000)
        return false;
    if (!f->misfired || f->now_reasons != 0)
        return true;
    if (f->last_scheduled_ms <= job->misfire_handled_until || !ej_job_config_misfire(&s->cfg))
        return false;
    int64_t times[EJ_CONFIG_CATCH_UP_MAX];
    return ej__policy_catch_up_times(job, s, f, times, EJ_CONFIG_CATCH_UP_MAX) == 0;
}

void ej__fire_cb(const struct ej__fire *f, void *arg)
{
    struct ej_job *job = arg;
    unsigned reasons = f->now_reasons;
    bool cron = f->cron_due;
    struct fire_ref fr = fire_ref_of(f);
    pthread_mutex_lock(&job->mu);
    if (job->state != EJ__JOB_STARTED || job->stopped) {
        bool stopped = job->stopped;
        pthread_mutex_unlock(&job->mu);
        ej__rt_not_run(job, &fr, EJ__NOT_RUN_STOPPED, "%s",
                       stopped ? "stopped by an operator, or the job was removed"
                               : "the job is shutting down");
        return;
    }
    struct ej__rt_settings *s = job->settings;
    ej__rt_settings_ref(s);
    /* Decided by the miss hook for a misfired fire (it left the fire
     * times to this, to be counted under "deadline"), here otherwise. */
    bool deadline =
        f->misfired ? job->deadline_fire_ms == f->scheduled_ms : past_deadline(job, s, f);
    job->deadline_fire_ms = 0;
    if (deadline) {
        pthread_mutex_unlock(&job->mu);
        fr.state = FIRE_PENDING;
        fr.count = f->missed_count;
        fr.last = f->last_scheduled_ms;
        ej__rt_not_run(job, &fr, EJ__NOT_RUN_DEADLINE,
                       "started %" PRId64 " ms after its (newest) fire time, past "
                       "startingDeadlineSeconds %d",
                       f->started_ms - fire_covers(f), s->cfg.starting_deadline_seconds);
        ej__rt_settings_unref(s);
        return;
    }
    if (cron && f->misfired && reasons == 0) {
        /* Fire times that passed while this job ran were marked misfire
         * and re-run already; others (paused, stalled) run now, once, if
         * the job wants misfires. Not silent when dropped here: the
         * scheduler's miss hook (on_miss) counted and posted every one of
         * them, under its reason, right before this callback. */
        if (f->last_scheduled_ms <= job->misfire_handled_until || !ej_job_config_misfire(&s->cfg)) {
            pthread_mutex_unlock(&job->mu);
            ej__rt_settings_unref(s);
            return;
        }
    }
    int64_t catch_up[EJ_CONFIG_CATCH_UP_MAX];
    size_t ncatch = cron && f->misfired && reasons == 0
                        ? ej__policy_catch_up_times(job, s, f, catch_up, EJ_CONFIG_CATCH_UP_MAX)
                        : 0;
    EJ_LOG(EJ_LOG_DEBUG, MOD, 0,
           "job %s: fire (cron %d, misfired %d, missed %u, reasons 0x%x, late %" PRId64 " ms)",
           job->name, cron, f->misfired, f->missed_count, reasons, f->started_ms - f->scheduled_ms);
    job->firing = true;
    uint64_t gen = ++job->fire_gen;
    job->fires++;
    job->last_fire_ms = ej__now_ms();
    if (cron)
        count_lateness(job, f->started_ms - f->scheduled_ms);
    pthread_mutex_unlock(&job->mu);
    job->fire_covers_ms = fire_covers(f);
    int64_t session = ej__coord_session(job->coord);
    atomic_store(&job->fire_session, session);
    if (ej__coord_may_start(job->coord, session))
        atomic_store(&job->cancel, false);
    ej__coord_set_busy(job->coord, true);
    if (ncatch > 0) {
        EJ_LOG(EJ_LOG_INFO, MOD, 0,
               "job %s: catching up %zu missed fire time(s) within catchUpWindowSeconds %d",
               job->name, ncatch, s->cfg.catch_up_window_seconds);
        for (size_t i = 0; i < ncatch; i++) {
            struct fire_ref one = fr;
            one.at = catch_up[i];
            one.catch_up = true;
            do_fire(job, s, gen, reasons, cron, catch_up[i], &one);
        }
    } else {
        do_fire(job, s, gen, reasons, cron, cron ? f->scheduled_ms : 0, &fr);
    }
    ej__coord_set_busy(job->coord, false);
    pthread_mutex_lock(&job->mu);
    while (job->marker_inflight > 0)
        pthread_cond_wait(&job->cv, &job->mu);
    job->firing = false;
    pthread_cond_broadcast(&job->cv);
    pthread_mutex_unlock(&job->mu);
    ej__rt_settings_unref(s);
}

/* ------------------------------------------------------------------------ */
/* Schedule                                                                   */

/* The scheduler's miss hook: every cron fire time that was not delivered on
 * time is counted on the job and reported as a status event naming the
 * reason, so that no fire goes unrun without a word (the scheduler also
 * logs a rate-limited warning). Runs on a pool thread. */
static void on_miss(const ej__miss *miss, void *arg)
{
    struct ej_job *job = arg;
    if (miss->fire != NULL) {
        /* A misfired fire its startingDeadlineSeconds drops: the callback
         * that comes next counts its fire times under "deadline". */
        pthread_mutex_lock(&job->mu);
        bool deadline = job->deadline_fire_ms == miss->fire->scheduled_ms ||
                        past_deadline(job, job->settings, miss->fire);
        if (deadline)
            job->deadline_fire_ms = miss->fire->scheduled_ms;
        pthread_mutex_unlock(&job->mu);
        if (deadline)
            return;
    }
    ej__rt_count_not_run_named(arg, ej__miss_reason_name(miss->reason), NULL, 0, miss->count,
                               miss->first_ms, miss->last_ms, "CRON");
}

int ej__rt_schedule(struct ej_job *job, const struct ej__rt_settings *s, bool reschedule)
{
    if (job->manual) {
        pthread_mutex_lock(&job->mu);
        bool have = job->trigger != NULL;
        pthread_mutex_unlock(&job->mu);
        if (reschedule || have)
            return 0;
        ej__trigger *t = NULL;
        int mrc = ej__sched_manual_add(job->sj, ej__fire_cb, job, &t);
        if (mrc == 0) {
            pthread_mutex_lock(&job->mu);
            job->trigger = t;
            pthread_mutex_unlock(&job->mu);
        }
        return mrc;
    }
    ej_tz *tz = NULL;
    int rc = ej_tz_load(s->cfg.time_zone[0] ? s->cfg.time_zone : NULL, &tz);
    if (rc != 0)
        return rc;
    ej_cron *cron = NULL, *copy = NULL;
    char err[256];
    rc = ej_cron_parse(s->cfg.cron, &cron, err, sizeof err);
    if (rc == 0)
        rc = ej_cron_parse(s->cfg.cron, &copy, err, sizeof err);
    if (rc != 0) {
        ej_cron_free(cron);
        EJ_LOG(EJ_LOG_ERROR, MOD, rc, "job %s: cron \"%s\": %s", job->name, s->cfg.cron, err);
        return rc;
    }
    ej__trigger *t = NULL;
    if (reschedule) {
        /* A config change seen while the job is destroyed: its trigger is
         * gone or held here until the new cron is in. */
        t = ej__rt_trigger_get(job);
        rc = t ? ej__sched_trigger_reschedule(t, cron, tz) : EJ_ESTOPPED;
    } else {
        rc = ej__sched_cron_add(job->sj, cron, tz, false, ej__fire_cb, job, &t);
        if (rc == 0)
            ej__sched_trigger_set_miss_fn(t, on_miss);
    }
    if (rc != 0) {
        ej__rt_trigger_put(job, reschedule ? t : NULL);
        ej_cron_free(cron);
        ej_cron_free(copy);
        return rc;
    }
    pthread_mutex_lock(&job->mu);
    if (!reschedule)
        job->trigger = t;
    ej_cron *old = job->cron;
    job->cron = copy;
    job->tz = tz;
    bool paused = job->user_paused || job->conn_paused || job->stopped;
    pthread_mutex_unlock(&job->mu);
    ej_cron_free(old);
    if (paused)
        ej__sched_trigger_pause(t);
    if (reschedule)
        ej__rt_trigger_put(job, t);
    return 0;
}
