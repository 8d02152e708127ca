/*
 * The job object and its public API (include/ejob/ejob.h): creation,
 * start-up, configuration changes, shutdown, status. The fire flow is in
 * fire.c and the files runtime/fire_impl.h lists.
 */
#include <inttypes.h>
#include <pthread.h>
#include <stdarg.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "common/check.h"
#include "common/util.h"
#include "coord/internal.h"
#include "ejob/config.h"
#include "ejob/console.h"
#include "ejob/cron.h"
#include "ejob/jobs.h"
#include "ejob/monitor.h"
#include "runtime/internal.h"
#include "schedule/internal.h"

#define MOD "job"

/* ------------------------------------------------------------------------ */
/* Settings snapshots                                                        */

void ej__rt_settings_ref(struct ej__rt_settings *s)
{
    if (s) {
        int was = atomic_fetch_add(&s->refs, 1);
        EJ_ASSERT(was >= 1); /* a snapshot already freed */
    }
}

void ej__rt_settings_unref(struct ej__rt_settings *s)
{
    if (s == NULL)
        return;
    int was = atomic_fetch_sub(&s->refs, 1);
    EJ_ASSERT(was >= 1); /* an unref without its ref */
    if (was != 1)
        return;
    free(s->def);
    ej_sharding_params_fini(&s->params);
    ej_job_config_fini(&s->cfg);
    free(s);
}

/* A snapshot of cfg (validated by the caller). */
static struct ej__rt_settings *settings_from(const struct ej_job_config *cfg)
{
    struct ej__rt_settings *s = calloc(1, sizeof *s);
    if (s == NULL)
        return NULL;
    atomic_init(&s->refs, 1);
    if (ej_job_config_copy(&s->cfg, cfg) != 0) { /* a NULL string becomes "" */
        ej__rt_settings_unref(s);
        return NULL;
    }
    /* Validated: the parameters parse (a failure here is out of memory,
     * and a fire then runs without them rather than not at all). */
    char err[256];
    if (ej_sharding_params_parse(s->cfg.sharding_item_parameters, &s->params, err, sizeof err) != 0)
        memset(&s->params, 0, sizeof s->params);
    return s;
}

struct ej__rt_settings *ej__job_settings(struct ej_job *job)
{
    pthread_mutex_lock(&job->mu);
    struct ej__rt_settings *s = job->settings;
    ej__rt_settings_ref(s);
    pthread_mutex_unlock(&job->mu);
    return s;
}

/* Install a new snapshot built from cfg. */
static int install_settings(struct ej_job *job, const struct ej_job_config *cfg)
{
    struct ej__rt_settings *s = settings_from(cfg);
    if (s == NULL)
        return EJ_ENOMEM;
    int rc = ej__rt_build_def(s, job->user_def);
    if (rc != 0) {
        ej__rt_settings_unref(s);
        return rc;
    }
    pthread_mutex_lock(&job->mu);
    struct ej__rt_settings *old = job->settings;
    job->settings = s;
    pthread_mutex_unlock(&job->mu);
    ej__rt_settings_unref(old);
    if (job->sj)
        ej__sched_job_set_concurrency(job->sj, ej__rt_concurrency(s, job->user_def));
    return 0;
}

/* ------------------------------------------------------------------------ */
/* Job object                                                                 */

void ej__job_ref(struct ej_job *job)
{
    int was = atomic_fetch_add(&job->refs, 1);
    EJ_ASSERT(was >= 1); /* a job already freed */
}

void ej__job_unref(struct ej_job *job)
{
    int was = atomic_fetch_sub(&job->refs, 1);
    EJ_ASSERT(was >= 1);
    if (was != 1)
        return;
    ej__rt_settings_unref(job->settings);
    ej_job_config_fini(&job->local_cfg);
    free(job->run_items);
    free(job->owned_items);
    free(job->catchups);
    ej_cron_free(job->cron);
    free(job->name);
    pthread_mutex_destroy(&job->mu);
    pthread_mutex_destroy(&job->kill_mu);
    pthread_cond_destroy(&job->cv);
    free(job);
}

void ej__job_set_error(struct ej_job *job, const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    pthread_mutex_lock(&job->mu);
    vsnprintf(job->last_error, sizeof job->last_error, fmt, ap);
    pthread_mutex_unlock(&job->mu);
    va_end(ap);
}

static void on_config_hook(void *user, const struct ej_job_config *cfg, unsigned changed)
{
    struct ej_job *job = user;
    /* A job being shut down keeps its trigger only until ej_job_destroy
     * removes it: rescheduling it now could touch a removed trigger. */
    pthread_mutex_lock(&job->mu);
    bool running = job->state == EJ__JOB_STARTED;
    pthread_mutex_unlock(&job->mu);
    if (!running)
        return;
    if (install_settings(job, cfg) != 0) {
        EJ_LOG(EJ_LOG_ERROR, MOD, EJ_ENOMEM, "job %s: cannot apply the new config", job->name);
        return;
    }
    if ((changed & EJ__CFG_CRON) && !job->manual) {
        struct ej__rt_settings *s = ej__job_settings(job);
        int rc = ej__rt_schedule(job, s, true);
        if (rc != 0)
            ej__job_set_error(job, "cron \"%s\" not scheduled: %s", s->cfg.cron, ej_strerror(rc));
        else
            EJ_LOG(EJ_LOG_INFO, MOD, 0, "job %s: rescheduled with cron \"%s\"%s%s", job->name,
                   s->cfg.cron, s->cfg.time_zone[0] ? " in " : "", s->cfg.time_zone);
        ej__rt_settings_unref(s);
    }
}

int ej_job_create(ej_registry *reg, const struct ej_job_config *cfg, const struct ej_job_opts *opts,
                  ej_job **out)
{
    static struct ej_job_opts none;
    if (reg == NULL || cfg == NULL || out == NULL)
        return EJ_EINVAL;
    *out = NULL;
    if (opts == NULL)
        opts = &none;
    char err[512] = "";
    /* The one validator (cron with a fire time ahead, zone, ...). */
    int rc = ej_job_config_validate(cfg, err, sizeof err);
    if (rc != 0) {
        EJ_LOG(EJ_LOG_ERROR, MOD, EJ_ECONFIG, "job %s: invalid config: %s",
               cfg->job_name ? cfg->job_name : "?", err);
        return EJ_ECONFIG;
    }
    bool needs_def = cfg->job_type == EJ_JOB_TYPE_SIMPLE || cfg->job_type == EJ_JOB_TYPE_DATAFLOW;
    if (needs_def && opts->def == NULL) {
        EJ_LOG(EJ_LOG_ERROR, MOD, EJ_EINVAL, "job %s: a %s job needs opts->def", cfg->job_name,
               ej_job_type_name(cfg->job_type));
        return EJ_EINVAL;
    }
    if (opts->def != NULL) {
        if (ej__rt_def_type(opts->def) != (int)cfg->job_type) {
            EJ_LOG(EJ_LOG_ERROR, MOD, EJ_EINVAL, "job %s: def->type does not match jobType %s",
                   cfg->job_name, ej_job_type_name(cfg->job_type));
            return EJ_EINVAL;
        }
        if (needs_def && ej__rt_def_validate(opts->def, err, sizeof err) != 0) {
            EJ_LOG(EJ_LOG_ERROR, MOD, EJ_ECONFIG, "job %s: invalid definition: %s", cfg->job_name,
                   err);
            return EJ_ECONFIG;
        }
    }
    struct ej_job *job = calloc(1, sizeof *job);
    if (job == NULL)
        return EJ_ENOMEM;
    pthread_mutex_init(&job->mu, NULL);
    pthread_mutex_init(&job->kill_mu, NULL);
    pthread_condattr_t ca;
    pthread_condattr_init(&ca);
    pthread_condattr_setclock(&ca, CLOCK_MONOTONIC);
    pthread_cond_init(&job->cv, &ca);
    pthread_condattr_destroy(&ca);
    atomic_init(&job->refs, 1);
    atomic_init(&job->cancel, false);
    job->reg = reg;
    job->user_def = opts->def;
    job->once = opts->once_listener;
    job->bus = opts->events;
    job->drain_timeout_ms = opts->drain_timeout_ms > 0 ? opts->drain_timeout_ms : 30000;
    job->keep_running_on_lost = opts->keep_running_on_lost;
    job->manual = opts->manual;
    job->wait_bound_ms = opts->wait_bound_ms;
    job->reconcile_ms = opts->reconcile_interval_ms;
    job->on_stopped = opts->on_stopped;
    job->on_stopped_user = opts->on_stopped_user;
    job->state = EJ__JOB_CREATED;
    job->name = strdup(cfg->job_name);
    /* A failed copy leaves local_cfg safe to finalise (ej__job_unref). */
    if (job->name == NULL || ej_job_config_copy(&job->local_cfg, cfg) != 0) {
        ej__job_unref(job);
        return EJ_ENOMEM;
    }
    if (opts->ip && opts->ip[0])
        snprintf(job->ip, sizeof job->ip, "%s", opts->ip);
    else
        ej__local_ip(job->ip, sizeof job->ip);
    if (opts->instance_id && opts->instance_id[0]) {
        snprintf(job->me, sizeof job->me, "%s", opts->instance_id);
        char ip[EJ__IP_MAX];
        if (ej_layout_instance_ip(job->me, ip, sizeof ip) == 0 && (!opts->ip || !opts->ip[0]))
            snprintf(job->ip, sizeof job->ip, "%s", ip);
    } else if (ej__layout_make_instance_id(job->ip, (long)getpid(), job->me, sizeof job->me) != 0) {
        EJ_LOG(EJ_LOG_ERROR, MOD, EJ_EINVAL, "job %s: cannot make an instance id from IP \"%s\"",
               cfg->job_name, job->ip);
        ej__job_unref(job);
        return EJ_EINVAL;
    }
    if (gethostname(job->hostname, sizeof job->hostname - 1) != 0)
        snprintf(job->hostname, sizeof job->hostname, "unknown");
    rc = install_settings(job, cfg);
    if (rc != 0) {
        ej__job_unref(job);
        return rc;
    }
    job->sched = ej__sched_default();
    if (job->sched == NULL) {
        ej__job_unref(job);
        return EJ_ENOMEM;
    }
    rc = ej__sched_job_create(job->sched, job->name,
                              ej__rt_concurrency(job->settings, job->user_def), &job->sj);
    if (rc != 0) {
        ej__job_unref(job);
        return rc;
    }
    struct ej__coord_opts co = {
        .reg = reg,
        .job_name = job->name,
        .instance_id = job->me,
        .ip = job->ip,
        .sched = job->sched,
        .wait_bound_ms = opts->wait_bound_ms,
        .reconcile_ms = opts->reconcile_interval_ms,
        .hooks =
            {
                .user = job,
                .on_trigger = ej__rt_on_trigger,
                .on_failover_taken = ej__rt_on_failover_taken,
                .on_failover_pending = ej__rt_on_failover_pending,
                .on_failover_lost = ej__rt_on_failover_lost,
                .on_config = on_config_hook,
                .on_stop = ej__rt_on_stop,
                .on_conn = ej__rt_on_conn,
                .on_fence = ej__rt_on_fence,
            },
    };
    rc = ej__coord_create(&co, &job->coord);
    if (rc != 0) {
        ej__sched_job_destroy(job->sj);
        ej__job_unref(job);
        return rc;
    }
    *out = job;
    return 0;
}

int ej_job_start(ej_job *job)
{
    if (job == NULL)
        return EJ_EINVAL;
    pthread_mutex_lock(&job->mu);
    if (job->state != EJ__JOB_CREATED) {
        pthread_mutex_unlock(&job->mu);
        return EJ_EBUSY;
    }
    job->state = EJ__JOB_STARTED;
    pthread_mutex_unlock(&job->mu);
    struct ej_job_config eff;
    memset(&eff, 0, sizeof eff);
    char err[1024] = "";
    int rc = ej__coord_start(job->coord, &job->local_cfg, &eff, err, sizeof err);
    if (rc != 0) {
        ej__job_set_error(job, "%s", err);
        EJ_LOG(EJ_LOG_ERROR, MOD, rc, "job %s: start failed: %s", job->name, err);
        goto fail;
    }
    rc = install_settings(job, &eff);
    if (rc != 0)
        goto fail;
    if (ej__kill_watch_start(job) != 0)
        EJ_LOG(EJ_LOG_WARN, MOD, 0, "job %s: kill requests not watched", job->name);
    if (eff.monitor_port >= 0) {
        ej_monitor *mon = NULL;
        int mrc = ej_monitor_start(job->reg, NULL, job->name, NULL, eff.monitor_port, &mon);
        pthread_mutex_lock(&job->mu);
        job->monitor = mon;
        pthread_mutex_unlock(&job->mu);
        if (mrc != 0) {
            ej__job_set_error(job, "monitor port %d: %s", eff.monitor_port, ej_strerror(mrc));
            EJ_LOG(EJ_LOG_WARN, MOD, mrc, "job %s: monitor port %d not started", job->name,
                   eff.monitor_port);
        }
    }
    /* The cron trigger (or, for a manual job, a trigger that fires only
     * when asked). */
    struct ej__rt_settings *s = ej__job_settings(job);
    /* Fires missed while no instance was alive: posted before the first
     * fire's rows can be (the bus keeps the order). */
    if (!job->manual)
        ej__rt_ledger_scan_down(job, s->cfg.cron, s->cfg.time_zone);
    rc = ej__rt_schedule(job, s, false);
    ej__rt_settings_unref(s);
    if (rc != 0) {
        ej__job_set_error(job, "cron \"%s\" has no fire time ahead or cannot be scheduled",
                          eff.cron);
        goto fail;
    }
    ej_job_config_fini(&eff);
    EJ_LOG(EJ_LOG_INFO, MOD, 0, "job %s started as %s", job->name, job->me);
    return 0;
fail:
    ej_job_config_fini(&eff);
    ej__coord_leave(job->coord);
    pthread_mutex_lock(&job->mu);
    job->state = EJ__JOB_DONE;
    ej_monitor *mon = job->monitor;
    job->monitor = NULL;
    pthread_mutex_unlock(&job->mu);
    ej_monitor_stop(mon);
    return rc;
}

static bool active(struct ej_job *job)
{
    pthread_mutex_lock(&job->mu);
    bool a = job->state == EJ__JOB_STARTED && !job->stopped;
    pthread_mutex_unlock(&job->mu);
    return a;
}

int ej_job_trigger(ej_job *job)
{
    if (job == NULL)
        return EJ_EINVAL;
    ej__trigger *t = ej__rt_trigger_get(job);
    int rc =
        !active(job) || t == NULL ? EJ_ESTOPPED : ej__sched_trigger_fire_now(t, EJ__FIRE_TRIGGER);
    ej__rt_trigger_put(job, t);
    return rc;
}

int ej_job_trigger_all(ej_job *job)
{
    if (job == NULL)
        return EJ_EINVAL;
    /* The console's trigger, the one place that writes the marker. */
    ej_console *con = NULL;
    int rc = ej_console_create(job->reg, NULL, &con);
    if (rc != 0)
        return rc;
    rc = ej_console_trigger(con, job->name, NULL, NULL, NULL, NULL, 0);
    if (rc == EJ_ENOTFOUND) {
        /* No live instance: nothing to run (0), unless the job has no
         * instances node at all (EJ_ENONODE, as a listing of it says). */
        char dir[EJ_REG_MAX_PATH_LEN + 1];
        bool exists = false;
        rc = ej_layout_path(dir, sizeof dir, job->name, EJ_LAYOUT_NODE_INSTANCES, 0, NULL);
        if (rc >= 0)
            rc = ej_registry_exists(job->reg, dir, &exists, NULL);
        if (rc == 0 && !exists)
            rc = EJ_ENONODE;
    }
    ej_console_destroy(con);
    return rc;
}

int ej_job_pause(ej_job *job)
{
    if (job == NULL)
        return EJ_EINVAL;
    ej__trigger *t = ej__rt_trigger_get(job);
    if (!active(job) || t == NULL) {
        ej__rt_trigger_put(job, t);
        return EJ_ESTOPPED;
    }
    pthread_mutex_lock(&job->mu);
    job->user_paused = true;
    pthread_mutex_unlock(&job->mu);
    ej__sched_trigger_pause(t);
    ej__rt_trigger_put(job, t);
    return 0;
}

int ej_job_resume(ej_job *job)
{
    if (job == NULL)
        return EJ_EINVAL;
    ej__trigger *t = ej__rt_trigger_get(job);
    if (!active(job) || t == NULL) {
        ej__rt_trigger_put(job, t);
        return EJ_ESTOPPED;
    }
    pthread_mutex_lock(&job->mu);
    job->user_paused = false;
    bool conn = job->conn_paused;
    pthread_mutex_unlock(&job->mu);
    if (!conn && !job->manual)
        ej__sched_trigger_resume(t);
    ej__rt_trigger_put(job, t);
    return 0;
}

int ej_job_update_config(ej_job *job, const struct ej_job_config *cfg)
{
    if (job == NULL || cfg == NULL)
        return EJ_EINVAL;
    char err[512] = "";
    if (cfg->job_name == NULL || strcmp(cfg->job_name, job->name) != 0) {
        ej__job_set_error(job, "jobName: must stay \"%s\"", job->name);
        return EJ_EINVAL;
    }
    int rc = ej_job_config_validate(cfg, err, sizeof err);
    if (rc != 0) {
        ej__job_set_error(job, "new config rejected: %s", err);
        return EJ_ECONFIG;
    }
    char *json = ej_job_config_to_json(cfg);
    char *path = ej_layout_path_dup(job->name, EJ_LAYOUT_NODE_CONFIG, 0, NULL);
    if (json == NULL || path == NULL) {
        free(json);
        free(path);
        return EJ_ENOMEM;
    }
    rc = ej_registry_persist(job->reg, path, json, strlen(json));
    free(path);
    free(json);
    if (rc != 0)
        return rc;
    /* Also the local copy, so an overwrite at a later start writes this. */
    struct ej_job_config copy;
    if (ej_job_config_copy(&copy, cfg) == 0) {
        pthread_mutex_lock(&job->mu);
        ej_job_config_fini(&job->local_cfg);
        job->local_cfg = copy;
        pthread_mutex_unlock(&job->mu);
    }
    if (!active(job))
        return 0;
    int64_t deadline = ej__mono_ms() + 5000;
    while (ej__mono_ms() < deadline) {
        struct ej_job_config cur;
        if (ej__coord_config(job->coord, &cur) == 0) {
            bool same = ej_job_config_equal(&cur, cfg);
            ej_job_config_fini(&cur);
            if (same)
                return 0;
        }
        ej__sleep_ms(20);
    }
    return EJ_ETIMEDOUT;
}

/* A stopping job's fire times from now on are not this instance's to run:
 * none is reported as not run (those missed before still are). */
static void retire_trigger(ej_job *job)
{
    ej__trigger *t = ej__rt_trigger_get(job);
    if (t)
        ej__sched_trigger_retire(t);
    ej__rt_trigger_put(job, t);
}

int ej_job_shutdown(ej_job *job)
{
    if (job == NULL)
        return EJ_EINVAL;
    pthread_mutex_lock(&job->mu);
    int st = job->state;
    if (st == EJ__JOB_STOPPING || st == EJ__JOB_DONE) {
        pthread_mutex_unlock(&job->mu);
        return 0;
    }
    job->state = EJ__JOB_STOPPING;
    pthread_cond_broadcast(&job->cv);
    pthread_mutex_unlock(&job->mu);
    int rc = 0;
    if (st == EJ__JOB_STARTED) {
        retire_trigger(job);
        if (!ej__rt_wait_idle(job, job->drain_timeout_ms)) {
            EJ_LOG(EJ_LOG_WARN, MOD, 0,
                   "job %s: items still running after %" PRId64 " ms: asking them to stop",
                   job->name, job->drain_timeout_ms);
            atomic_store(&job->cancel, true);
            if (!ej__rt_wait_idle(job, 5000)) {
                EJ_LOG(EJ_LOG_WARN, MOD, EJ_ETIMEDOUT,
                       "job %s: items did not stop; leaving them behind", job->name);
                rc = EJ_ETIMEDOUT;
            }
        }
        pthread_mutex_lock(&job->mu);
        ej_monitor *mon = job->monitor;
        job->monitor = NULL;
        pthread_mutex_unlock(&job->mu);
        ej_monitor_stop(mon);
        ej__coord_leave(job->coord);
    }
    pthread_mutex_lock(&job->mu);
    job->state = EJ__JOB_DONE;
    pthread_mutex_unlock(&job->mu);
    return rc;
}

void ej_job_destroy(ej_job *job)
{
    if (job == NULL)
        return;
    ej_job_shutdown(job);
    /* Coordinator hooks entered before the coordinator closed and API calls
     * on other threads may still hold the trigger: detaching waits for
     * them. The trigger's callback may still run (drain timed out):
     * removing it waits for that callback. */
    ej__trigger *t = ej__rt_trigger_detach(job);
    if (t)
        ej__sched_trigger_remove(t);
    ej__kill_watch_stop(job);
    ej__coord_destroy(job->coord);
    job->coord = NULL;
    ej__sched_job_destroy(job->sj);
    job->sj = NULL;
    ej__rt_bus_destroy(job);
    ej__job_unref(job);
}

int ej_job_status(ej_job *job, struct ej_job_status *st)
{
    if (job == NULL || st == NULL)
        return EJ_EINVAL;
    memset(st, 0, sizeof *st);
    pthread_mutex_lock(&job->mu);
    st->started = job->state == EJ__JOB_STARTED;
    st->stopped = job->state >= EJ__JOB_STOPPING || job->stopped;
    st->paused = job->user_paused;
    st->running = job->firing;
    st->last_fire_ms = job->last_fire_ms;
    st->fires = job->fires;
    st->items_run = job->items_run;
    st->items_failed = job->items_failed;
    st->fires_missed = job->fires_missed;
    memcpy(st->fire_lateness, job->fire_lateness, sizeof st->fire_lateness);
    st->fire_lateness_sum = job->fire_lateness_sum;
    st->monitor_port = job->monitor ? ej_monitor_port(job->monitor) : -1;
    st->last_error = strdup(job->last_error);
    st->cron = strdup(job->settings->cfg.cron);
    st->sharding_total_count = job->settings->cfg.sharding_total_count;
    pthread_mutex_unlock(&job->mu);
    st->job_name = strdup(job->name);
    st->instance_id = strdup(job->me);
    if (st->started && !st->stopped) {
        st->leader = ej__coord_is_leader(job->coord);
        st->connected = ej__coord_connected(job->coord);
        st->server_disabled = ej__coord_server_disabled(job->coord);
        st->reshards = ej__coord_reshards(job->coord);
        ej__view_items_of(ej__coord_view(job->coord), job->me, &st->items, &st->item_count);
        ej__trigger *t = ej__rt_trigger_get(job);
        if (t)
            st->next_fire_ms = ej__sched_trigger_next(t);
        ej__rt_trigger_put(job, t);
        char cerr[1024] = "";
        ej__coord_last_error(job->coord, cerr, sizeof cerr);
        if (cerr[0] && st->last_error && st->last_error[0] == '\0') {
            free(st->last_error);
            st->last_error = strdup(cerr);
        }
    }
    if (!st->job_name || !st->instance_id || !st->last_error || !st->cron) {
        ej_job_status_fini(st);
        return EJ_ENOMEM;
    }
    return 0;
}

const char *ej_fire_not_run_reason(size_t i)
{
    if (i < EJ__MISS_REASONS)
        return ej__miss_reason_name((ej__miss_reason)i);
    /* The fire flow's reasons after the scheduler's, those of the same name
     * ("running") left out: a consumer sees each name once. */
    i -= EJ__MISS_REASONS;
    for (int r = 0; r < EJ__NOT_RUN_REASONS; r++) {
        const char *name = ej__not_run_reason_name((enum ej__not_run_reason)r);
        bool seen = false;
        for (int m = 0; m < EJ__MISS_REASONS && !seen; m++)
            seen = strcmp(name, ej__miss_reason_name((ej__miss_reason)m)) == 0;
        if (!seen && i-- == 0)
            return name;
    }
    return NULL;
}

void ej_job_status_fini(struct ej_job_status *st)
{
    if (st == NULL)
        return;
    free(st->job_name);
    free(st->instance_id);
    free(st->items);
    free(st->cron);
    free(st->last_error);
    memset(st, 0, sizeof *st);
}

const char *ej_job_last_error(ej_job *job, char *buf, size_t len)
{
    if (buf == NULL || len == 0)
        return "";
    buf[0] = '\0';
    if (job == NULL)
        return buf;
    char cerr[1024] = "";
    if (job->coord)
        ej__coord_last_error(job->coord, cerr, sizeof cerr);
    pthread_mutex_lock(&job->mu);
    snprintf(buf, len, "%s", job->last_error[0] ? job->last_error : cerr);
    pthread_mutex_unlock(&job->mu);
    return buf;
}

int ej_job_subscribe(ej_job *job, void (*fn)(const struct ej_event *ev, void *user), void *user)
{
    if (job == NULL || fn == NULL)
        return EJ_EINVAL;
    return ej__rt_subscribe(job, fn, user);
}

ej_registry *ej_job_registry(const ej_job *job)
{
    return job ? job->reg : NULL;
}

const char *ej_job_name(const ej_job *job)
{
    return job ? job->name : NULL;
}

const char *ej_job_instance_id(const ej_job *job)
{
    return job ? job->me : NULL;
}

/* ------------------------------------------------------------------------ */
/* Many jobs at once (ejob/jobs.h)                                           */

/* fn(jobs[i], i, arg) for every i, on up to EJ_JOBS_PARALLEL threads that
 * take the next index until none is left: the blocking ZooKeeper calls of
 * different jobs are in flight together. */
struct jobs_par {
    ej_job *const *jobs;
    size_t n;
    atomic_size_t next;
    void (*fn)(ej_job *job, size_t i, void *arg);
    void *arg;
};

static void *jobs_par_worker(void *p)
{
    struct jobs_par *jp = p;
    for (;;) {
        size_t i = atomic_fetch_add(&jp->next, 1);
        if (i >= jp->n)
            return NULL;
        jp->fn(jp->jobs[i], i, jp->arg);
    }
}

static void jobs_parallel(ej_job *const *jobs, size_t n,
                          void (*fn)(ej_job *job, size_t i, void *arg), void *arg)
{
    struct jobs_par jp = {.jobs = jobs, .n = n, .fn = fn, .arg = arg};
    atomic_init(&jp.next, 0);
    size_t nt = n < EJ_JOBS_PARALLEL ? n : EJ_JOBS_PARALLEL;
    pthread_t th[EJ_JOBS_PARALLEL];
    size_t started = 0;
    pthread_attr_t attr;
    pthread_attr_init(&attr);
    pthread_attr_setstacksize(&attr, 512 * 1024);
    /* One job at a time on this thread needs none. */
    for (size_t t = 0; nt > 1 && t < nt; t++) {
        if (pthread_create(&th[started], &attr, jobs_par_worker, &jp) != 0)
            break; /* fewer threads: this one works too */
        started++;
    }
    pthread_attr_destroy(&attr);
    jobs_par_worker(&jp);
    for (size_t t = 0; t < started; t++)
        pthread_join(th[t], NULL);
}

static void start_one(ej_job *job, size_t i, void *arg)
{
    int *rcs = arg;
    rcs[i] = ej_job_start(job);
}

int ej_jobs_start(ej_job *const *jobs, size_t n, int *rcs)
{
    if (n > 0 && jobs == NULL)
        return EJ_EINVAL;
    int *own = rcs;
    if (own == NULL && n > 0 && (own = calloc(n, sizeof *own)) == NULL)
        return EJ_ENOMEM;
    int64_t t0 = ej__mono_ms();
    jobs_parallel(jobs, n, start_one, own);
    int rc = 0;
    size_t ok = 0;
    for (size_t i = 0; i < n; i++) {
        if (own[i] == 0)
            ok++;
        else if (rc == 0)
            rc = own[i];
    }
    if (own != rcs)
        free(own);
    EJ_LOG(EJ_LOG_INFO, MOD, rc, "%zu of %zu job(s) started in %" PRId64 " ms", ok, n,
           ej__mono_ms() - t0);
    return rc;
}

static void shutdown_one(ej_job *job, size_t i, void *arg)
{
    atomic_bool *late = arg;
    (void)i;
    if (job != NULL && ej_job_shutdown(job) == EJ_ETIMEDOUT)
        atomic_store(late, true);
}

int ej_jobs_shutdown(ej_job *const *jobs, size_t n)
{
    if (n > 0 && jobs == NULL)
        return EJ_EINVAL;
    for (size_t i = 0; i < n; i++) {
        if (jobs[i] != NULL) {
            retire_trigger(jobs[i]);
            ej_job_pause(jobs[i]);
        }
    }
    atomic_bool late;
    atomic_init(&late, false);
    jobs_parallel(jobs, n, shutdown_one, &late);
    return atomic_load(&late) ? EJ_ETIMEDOUT : 0;
}

static void destroy_one(ej_job *job, size_t i, void *arg)
{
    (void)i;
    (void)arg;
    ej_job_destroy(job);
}

void ej_jobs_destroy(ej_job *const *jobs, size_t n)
{
    if (n == 0 || jobs == NULL)
        return;
    ej_jobs_shutdown(jobs, n);
    jobs_parallel(jobs, n, destroy_one, NULL);
}
