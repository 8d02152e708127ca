/* The job set of `ejob run` and its reloads: jobs started, paused and
 * stopped together, and a SIGHUP's reload read and applied on a thread of
 * its own (daemon_run.h). */
#include <errno.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>
#include <sys/eventfd.h>

#include "common/check.h"
#include "ejob/error.h"
#include "ejob/log.h"
#include "alert/alert.h"
#include "cli/daemon_notify.h"
#include "cli/daemon_restart.h"
#include "cli/daemon_retry.h"
#include "cli/daemon_run.h"

static void reload_apply(struct daemon *d, struct reload *rl);

static void reload_free(struct reload *r)
{
    if (r->rc == 0 && !r->taken && !r->restarts_only)
        ej_daemon_config_fini(&r->next);
    ej_config_errors_fini(&r->errs);
    close(r->efd);
    free(r);
}

/* The main loop is done with a reload: join its thread, or leave a thread
 * still reading to free it. Accepts NULL. */
void ejd_run_reload_finish(struct reload *r)
{
    if (r == NULL)
        return;
    int reading = RELOAD_READING;
    if (atomic_compare_exchange_strong(&r->phase, &reading, RELOAD_ABANDONED)) {
        EJ_LOG(EJ_LOG_INFO, "daemon", 0, "the reload still reading %s is abandoned", r->file);
        pthread_detach(r->thread);
        return;
    }
    pthread_join(r->thread, NULL);
    reload_free(r);
}

static void *reload_main(void *arg)
{
    struct reload *r = arg;
    ej_config_errors_init(&r->errs);
    r->rc = r->restarts_only ? 0 : ej_daemon_config_load_file(r->file, &r->next, &r->errs);
    int reading = RELOAD_READING;
    if (!atomic_compare_exchange_strong(&r->phase, &reading, RELOAD_APPLYING)) {
        reload_free(r); /* abandoned: the daemon may be gone */
        return NULL;
    }
    if (atomic_load(&r->d->stopping)) {
        EJ_LOG(EJ_LOG_INFO, "daemon", 0, "reload: not applied, the daemon is stopping");
        snprintf(r->outcome, sizeof r->outcome, "reload not applied (stopping)");
    } else {
        reload_apply(r->d, r);
    }
    uint64_t one = 1;
    if (write(r->efd, &one, sizeof(one)) != (ssize_t)sizeof(one))
        EJ_LOG(EJ_LOG_ERROR, "daemon", -errno, "reload: cannot signal the main loop");
    return NULL;
}

/* Start reading the file for a reload (or, restarts_only, the restarts
 * asked). Returns 0 or an error (logged). */
static int reload_start(struct daemon *d, bool restarts_only)
{
    struct reload *r = calloc(1, sizeof(*r));
    if (r == NULL)
        return EJ_ENOMEM;
    r->d = d;
    r->restarts_only = restarts_only;
    r->file = d->file;
    atomic_init(&r->phase, RELOAD_READING);
    r->efd = eventfd(0, EFD_CLOEXEC | EFD_NONBLOCK);
    if (r->efd < 0) {
        int e = -errno;
        free(r);
        EJ_LOG(EJ_LOG_ERROR, "daemon", e, "reload: eventfd failed");
        return e;
    }
    int e = pthread_create(&r->thread, NULL, reload_main, r);
    if (e != 0) {
        close(r->efd);
        free(r);
        EJ_LOG(EJ_LOG_ERROR, "daemon", -e, "reload: cannot start its thread");
        return -e;
    }
    d->reload = r;
    return 0;
}

static void log_warnings(const struct ej_config_errors *w, const char *prefix)
{
    for (size_t i = 0; i < w->count; i++)
        EJ_LOG(EJ_LOG_WARN, "daemon", 0, "%s%s", prefix, w->messages[i]);
}

void ejd_run_print_errors(const struct ej_config_errors *errs, const char *file, int rc)
{
    if (errs->count == 0)
        fprintf(stderr, "%s: %s\n", file, ej_strerror(rc));
    for (size_t i = 0; i < errs->count; i++)
        fprintf(stderr, "%s\n", errs->messages[i]);
}

static void log_errors(const struct ej_config_errors *errs, const char *file, int rc)
{
    if (errs->count == 0)
        EJ_LOG(EJ_LOG_ERROR, "daemon", rc, "reload: %s: %s", file, ej_strerror(rc));
    for (size_t i = 0; i < errs->count; i++)
        EJ_LOG(EJ_LOG_ERROR, "daemon", 0, "reload: %s", errs->messages[i]);
}

/* The running job of that name, or NULL. */
static ejd_job *find_job(struct daemon *d, const char *name)
{
    ejd_job *job = NULL;
    ej__mutex_lock(&d->jobs_mu);
    for (size_t i = 0; i < d->njobs && job == NULL; i++)
        if (strcmp(d->jobs[i].name, name) == 0)
            job = d->jobs[i].job;
    ej__mutex_unlock(&d->jobs_mu);
    return job;
}

/* Under jobs_mu. A job added while the daemon stops is paused at once
 * (the main loop paused the others). */
static int add_running(struct daemon *d, const char *name, ejd_job *job)
{
    EJ_ASSERT_HELD(&d->jobs_mu);
    if (atomic_load(&d->stopping))
        ejd_job_pause(job);
    if (d->njobs == d->cap) {
        size_t cap = d->cap ? d->cap * 2 : 8;
        struct running *n = realloc(d->jobs, cap * sizeof(*n));
        if (n == NULL)
            return EJ_ENOMEM;
        d->jobs = n;
        d->cap = cap;
    }
    char *copy = strdup(name);
    if (copy == NULL)
        return EJ_ENOMEM;
    d->jobs[d->njobs].name = copy;
    d->jobs[d->njobs].job = job;
    d->njobs++;
    return 0;
}

static int start_job(struct daemon *d, const struct ej_job_config *cfg)
{
    char err[512] = "";
    ejd_job *job = NULL;
    int rc = ejd_job_start(d->reg, cfg, &job, err, sizeof(err));
    if (rc != 0 && ejd_retry_is_transient(rc) && !atomic_load(&d->stopping)) {
        ejd_retry_add(cfg, rc, err);
        return rc;
    }
    if (rc != 0) {
        EJ_LOG(EJ_LOG_ERROR, "daemon", rc, "job %s: cannot start: %s", cfg->job_name,
               err[0] ? err : ej_strerror(rc));
        return rc;
    }
    ej__mutex_lock(&d->jobs_mu);
    rc = add_running(d, cfg->job_name, job);
    ej__mutex_unlock(&d->jobs_mu);
    if (rc != 0) {
        ejd_jobs_stop(&job, 1);
        return rc;
    }
    EJ_LOG(EJ_LOG_INFO, "daemon", 0, "job %s: started (%s, cron \"%s\", %d items)", cfg->job_name,
           ej_job_type_name(cfg->job_type), cfg->cron, cfg->sharding_total_count);
    return 0;
}

static int retry_start(void *arg, const struct ej_job_config *cfg)
{
    struct daemon *d = arg;
    if (atomic_load(&d->stopping))
        return EJ_ECLOSED;
    int rc = start_job(d, cfg);
    if (rc == 0)
        EJ_LOG(EJ_LOG_INFO, "daemon", 0, "job %s: started after a retry; %zu job(s) still waiting",
               cfg->job_name, ejd_retry_pending() - 1);
    return rc;
}

/* The file's jobs at start-up, all at once. On failure the jobs that
 * exist are in the running set (out_jobs stops them). */
int ejd_run_start_all(struct daemon *d)
{
    size_t n = d->cfg.job_count;
    ejd_retry_init(retry_start, d);
    ejd_job **jobs = calloc(n ? n : 1, sizeof(*jobs));
    if (jobs == NULL)
        return EJ_ENOMEM;
    int rc = ejd_jobs_start(d->reg, d->cfg.jobs, n, jobs);
    ej__mutex_lock(&d->jobs_mu);
    for (size_t i = 0; i < n; i++) {
        if (jobs[i] == NULL)
            continue;
        int arc = add_running(d, d->cfg.jobs[i].job_name, jobs[i]);
        if (arc != 0) {
            ejd_jobs_stop(&jobs[i], 1);
            rc = rc != 0 ? rc : arc;
        }
    }
    ej__mutex_unlock(&d->jobs_mu);
    free(jobs);
    size_t waiting = ejd_retry_pending();
    if (rc == 0 && waiting == 0)
        EJ_LOG(EJ_LOG_INFO, "daemon", 0, "%zu job(s) started", n);
    else if (rc == 0)
        EJ_LOG(EJ_LOG_WARN, "daemon", 0,
               "%zu of %zu job(s) started; %zu will be tried again (/readyz names them)",
               n - waiting, n, waiting);
    return rc;
}

static void stop_job_at(struct daemon *d, size_t i)
{
    EJ_LOG(EJ_LOG_INFO, "daemon", 0, "job %s: stopping", d->jobs[i].name);
    ejd_jobs_stop(&d->jobs[i].job, 1);
    EJ_LOG(EJ_LOG_INFO, "daemon", 0, "job %s: stopped", d->jobs[i].name);
    free(d->jobs[i].name);
    d->jobs[i] = d->jobs[--d->njobs];
}

static const struct ej_job_config *find_cfg(const struct ej_daemon_config *c, const char *name)
{
    for (size_t i = 0; i < c->job_count; i++)
        if (strcmp(c->jobs[i].job_name, name) == 0)
            return &c->jobs[i];
    return NULL;
}

/* SIGTERM: no job fires from now on, whatever a reload is doing. */
void ejd_run_pause_all(struct daemon *d)
{
    atomic_store(&d->stopping, true);
    ejd_retry_pause();
    ej__mutex_lock(&d->jobs_mu);
    for (size_t i = 0; i < d->njobs; i++)
        ejd_job_pause(d->jobs[i].job);
    ej__mutex_unlock(&d->jobs_mu);
}

/* The reload thread: take the jobs the new file no longer has out of the
 * running set, then stop them together (their items drain meanwhile). */
static size_t stop_removed(struct daemon *d, const struct ej_daemon_config *next)
{
    ej__mutex_lock(&d->jobs_mu);
    ejd_job **gone = calloc(d->njobs ? d->njobs : 1, sizeof(*gone));
    size_t n = 0;
    for (size_t i = 0; gone != NULL && i < d->njobs;) {
        if (find_cfg(next, d->jobs[i].name) != NULL) {
            i++;
            continue;
        }
        EJ_LOG(EJ_LOG_INFO, "daemon", 0, "job %s: stopping (removed from the file)",
               d->jobs[i].name);
        gone[n++] = d->jobs[i].job;
        free(d->jobs[i].name);
        d->jobs[i] = d->jobs[--d->njobs];
    }
    ej__mutex_unlock(&d->jobs_mu);
    if (gone == NULL) {
        EJ_LOG(EJ_LOG_ERROR, "daemon", EJ_ENOMEM, "reload: out of memory; no job removed");
        return 0;
    }
    ejd_jobs_stop(gone, n);
    free(gone);
    return n;
}

/* Stop every job at once (the drain bound holds for all together). */
void ejd_run_stop_all(struct daemon *d)
{
    ejd_retry_stop(); /* first: no job is added to the set while it stops */
    ejd_job **all = calloc(d->njobs ? d->njobs : 1, sizeof(*all));
    if (all == NULL) {
        while (d->njobs > 0)
            stop_job_at(d, d->njobs - 1);
    } else {
        for (size_t i = 0; i < d->njobs; i++)
            all[i] = d->jobs[i].job;
        if (d->njobs > 0)
            EJ_LOG(EJ_LOG_INFO, "daemon", 0, "stopping %zu job(s)", d->njobs);
        ejd_jobs_stop(all, d->njobs);
        for (size_t i = 0; i < d->njobs; i++)
            free(d->jobs[i].name);
        d->njobs = 0;
        free(all);
    }
    free(d->jobs);
    d->jobs = NULL;
}

static bool same_str(const char *a, const char *b)
{
    return strcmp(a != NULL ? a : "", b != NULL ? b : "") == 0;
}

/* The file's log section, unless the command line set the same. A level
 * or format the file no longer gives goes back to what it was before. */
void ejd_run_apply_log_config(const struct daemon *d, const struct ej_log_config *lc)
{
    int level = lc->level >= 0 ? lc->level : d->base_level;
    int format = lc->format >= 0 ? lc->format : d->base_format;
    if (!d->format_fixed)
        ej_log_set_format((ej_log_format)format);
    if (!d->level_fixed && level != (int)ej_log_get_level()) {
        ej_log_set_level((ej_log_level)level);
        EJ_LOG(EJ_LOG_INFO, "daemon", 0, "log level %s", ej_log_level_name(level));
    }
}

/* Start again, with cfg (copied first), a job of the running set that
 * stopped on its own (an operator's shutdown): the stopped job leaves the
 * set and ZooKeeper (its marker goes with it), a new one registers. */
static int restart_job(struct daemon *d, const struct ej_job_config *cfg)
{
    struct ej_job_config copy;
    if (ej_job_config_copy(&copy, cfg) != 0)
        return EJ_ENOMEM;
    ejd_job *old = NULL;
    ej__mutex_lock(&d->jobs_mu);
    for (size_t i = 0; i < d->njobs && old == NULL; i++) {
        if (strcmp(d->jobs[i].name, copy.job_name) != 0 || !ejd_job_is_stopped(d->jobs[i].job))
            continue;
        old = d->jobs[i].job;
        free(d->jobs[i].name);
        d->jobs[i] = d->jobs[--d->njobs];
    }
    ej__mutex_unlock(&d->jobs_mu);
    int rc = EJ_ENOTFOUND;
    if (old != NULL) {
        EJ_LOG(EJ_LOG_INFO, "daemon", 0, "job %s: starting again (it was shut down)",
               copy.job_name);
        ejd_jobs_stop(&old, 1);
        rc = start_job(d, &copy);
    }
    ej_job_config_fini(&copy);
    return rc;
}

/* The restarts asked through ZooKeeper, with the config each job runs with. */
static void apply_restarts(struct daemon *d, struct reload *rl)
{
    char **names = ejd_restart_take();
    size_t done = 0, asked = 0;
    for (size_t i = 0; names != NULL && names[i] != NULL && !atomic_load(&d->stopping); i++) {
        asked++;
        const struct ej_job_config *cfg = find_cfg(&d->cfg, names[i]);
        int rc = cfg != NULL ? restart_job(d, cfg) : EJ_ENOTFOUND;
        if (rc == 0)
            done++;
        else
            EJ_LOG(EJ_LOG_WARN, "daemon", rc, "job %s: restart asked, not done: %s", names[i],
                   rc == EJ_ENOTFOUND ? "it is not a shut-down job of this daemon"
                                      : ej_strerror(rc));
    }
    ej_registry_free_names(names);
    snprintf(rl->outcome, sizeof rl->outcome, "restarted %zu of %zu job(s) on request", done,
             asked);
}

/* Apply a reload (on its thread) once its file is read. Stops between
 * steps when the daemon is told to stop. */
static void reload_apply(struct daemon *d, struct reload *rl)
{
    if (rl->restarts_only)
        return apply_restarts(d, rl);
    int rc = rl->rc;
    if (rc != 0) {
        log_errors(&rl->errs, d->file, rc);
        EJ_LOG(EJ_LOG_WARN, "daemon", 0,
               "reload: %s has errors; the running configuration is "
               "kept",
               d->file);
        snprintf(rl->outcome, sizeof rl->outcome, "reload refused: the file has errors");
        return;
    }
    struct ej_daemon_config next = rl->next;
    log_warnings(&next.warnings, "reload: ");
    ejd_run_apply_log_config(d, &next.log);
    const struct ej_reg_center_config *a = &d->cfg.reg_center, *b = &next.reg_center;
    if (a->embedded != b->embedded || !same_str(a->server_lists, b->server_lists) ||
        !same_str(a->name_space, b->name_space) || !same_str(a->digest, b->digest) ||
        a->session_timeout_ms != b->session_timeout_ms ||
        a->takeover_margin_ms != b->takeover_margin_ms)
        EJ_LOG(EJ_LOG_WARN, "daemon", 0,
               "reload: regCenter changes take effect only after a restart; ignored");
    if (d->cfg.tracing.type != next.tracing.type || d->cfg.tracing.off != next.tracing.off ||
        !same_str(d->cfg.tracing.url, next.tracing.url))
        EJ_LOG(EJ_LOG_WARN, "daemon", 0,
               "reload: tracing changes take effect only after a restart; ignored");
    /* The endpoint keeps its socket: moving it would leave scrapers and
     * probes pointed at a port that no longer answers mid-run. */
    if (d->metrics_flag != NULL && !same_str(d->cfg.metrics.listen, next.metrics.listen))
        EJ_LOG(EJ_LOG_WARN, "daemon", 0,
               "reload: metrics.listen is overridden by --metrics-listen %s; ignored",
               d->metrics_flag);
    else if (d->metrics_flag == NULL && !same_str(d->metrics_now, next.metrics.listen))
        EJ_LOG(EJ_LOG_WARN, "daemon", 0,
               "reload: metrics.listen changes take effect only after a restart; the "
               "endpoint stays %s",
               d->metrics_now != NULL ? d->metrics_now : "off");
    if (next.alerts.configured || ej_alert_is_running())
        EJ_LOG(EJ_LOG_INFO, "daemon", 0,
               "reload: alerts are read at start only: a change to alerts: or a job's alerts, "
               "and alerts for added jobs, take a restart");

    /* Jobs waiting for another start are the file's again: the loop below
     * starts those it still has (and queues them again if they fail). */
    ejd_retry_clear();
    size_t removed = stop_removed(d, &next), added = 0, changed = 0, unchanged = 0, restarted = 0;
    for (size_t i = 0; i < next.job_count; i++) {
        if (atomic_load(&d->stopping)) {
            EJ_LOG(EJ_LOG_INFO, "daemon", 0,
                   "reload: stopped after %zu of %zu job(s): the daemon is stopping", i,
                   next.job_count);
            snprintf(rl->outcome, sizeof rl->outcome, "reload stopped part-way (stopping)");
            return; /* next is freed with the reload */
        }
        const struct ej_job_config *cfg = &next.jobs[i];
        ejd_job *job = find_job(d, cfg->job_name);
        if (job == NULL) {
            if (start_job(d, cfg) == 0)
                added++;
            continue;
        }
        /* A job an operator shut down starts again, with the file's config. */
        if (ejd_job_is_stopped(job)) {
            if (restart_job(d, cfg) == 0)
                restarted++;
            continue;
        }
        if (ej_job_config_equal(ejd_job_config(job), cfg)) {
            unchanged++;
            continue;
        }
        char err[512] = "";
        rc = ejd_job_update(job, cfg, err, sizeof(err));
        if (rc != 0) {
            EJ_LOG(EJ_LOG_ERROR, "daemon", rc, "job %s: new config not applied: %s", cfg->job_name,
                   err[0] ? err : ej_strerror(rc));
            continue;
        }
        EJ_LOG(EJ_LOG_INFO, "daemon", 0, "job %s: config updated (cron \"%s\", %d items)",
               cfg->job_name, cfg->cron, cfg->sharding_total_count);
        changed++;
    }
    rl->taken = true;
    ej_daemon_config_fini(&d->cfg);
    d->cfg = next;
    EJ_LOG(EJ_LOG_INFO, "daemon", 0,
           "reload done: %zu added, %zu removed, %zu changed, %zu unchanged, %zu restarted", added,
           removed, changed, unchanged, restarted);
    snprintf(rl->outcome, sizeof rl->outcome,
             "last reload: %zu added, %zu removed, %zu changed, %zu unchanged, %zu restarted",
             added, removed, changed, unchanged, restarted);
}

/* A SIGHUP acted on: systemd hears of the reload, and of its end at once
 * when it cannot even start. */
void ejd_run_begin_reload(struct daemon *d)
{
    EJ_LOG(EJ_LOG_INFO, "daemon", 0, "SIGHUP: reloading %s", d->file);
    ejd_notify_reloading(d->file);
    if (reload_start(d, false) != 0)
        ejd_notify_ready(d->njobs, d->file, "the reload could not start");
}

void ejd_run_begin_restarts(struct daemon *d)
{
    if (reload_start(d, true) != 0)
        EJ_LOG(EJ_LOG_ERROR, "daemon", 0, "the restarts asked could not start; SIGHUP does them");
}
