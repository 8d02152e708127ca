/* The daemon's jobs through the library API (see daemon.h). */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "alert/alert.h"
#include "config/daemon_file.h"
#include "ejob/config.h"
#include "ejob/ejob.h"
#include "ejob/error.h"
#include "ejob/jobs.h"
#include "ejob/log.h"
#include "cli/daemon.h"
#include "cli/daemon_events.h"
#include "cli/daemon_metrics.h"
#include "cli/daemon_restart.h"
#include "cli/daemon_retry.h"

struct ejd_job {
    ej_job *job;
    struct ej_job_config cfg; /* as the daemon file last gave it */
    struct ej_job_def def;    /* output caps (tracing.outputMaxBytes) when not the default */
    bool failed;              /* a batch that did not start: not in the metrics */
};

/* How long a stop waits for alerts still queued. */
#define ALERT_STOP_DRAIN_MS 5000

static struct ej_event_bus *bus;
static int drain_timeout_ms = 30000;
static size_t output_cap = EJ_JOB_OUTPUT_CAP_DEFAULT;

int ejd_init(const struct ej_tracing_config *tracing, const char *config_file,
             const char *state_dir, int drain_ms, char *err, size_t errlen)
{
    /* 0 asks for no wait at all; the library reads 0 as its default. */
    drain_timeout_ms = drain_ms > 0 ? drain_ms : 1;
    if (tracing != NULL && tracing->output_max_bytes > 0)
        output_cap = (size_t)tracing->output_max_bytes;
    struct ejd_trace_where where;
    int rc = ejd_trace_where(tracing, config_file, state_dir, &where, err, errlen);
    if (rc != 0)
        return rc;
    rc = ejd_events_create(&bus, &where,
                           tracing ? tracing->retention_days : EJ_TRACING_RETENTION_DAYS_DEFAULT,
                           drain_timeout_ms, err, errlen);
    ejd_trace_where_fini(&where);
    if (rc == 0)
        ejd_metrics_watch_bus(bus);
    return rc;
}

/* A definition carrying the output cap, for a cap other than the default
 * (all else, the error handler and executor too, is the job's config). */
static const struct ej_job_def *def_with_cap(ejd_job *d, const struct ej_job_config *cfg)
{
    if (output_cap == EJ_JOB_OUTPUT_CAP_DEFAULT)
        return NULL;
    d->def.type = cfg->job_type;
    d->def.script.output_cap = output_cap;
    d->def.http.output_cap = output_cap;
    return &d->def;
}

int ejd_alerts_start(struct ej_daemon_config *cfg)
{
    int rc = ej_alert_start(cfg);
    if (rc == 0 && ej_alert_is_running())
        rc = ej_event_bus_add_sink(bus, ej_alert_event_sink, NULL);
    return rc;
}

void ejd_fini(void)
{
    ejd_metrics_watch_bus(NULL);
    ejd_events_destroy(bus);
    bus = NULL;
    /* After the bus: its last events may still make alerts. */
    ej_alert_stop(drain_timeout_ms < ALERT_STOP_DRAIN_MS ? drain_timeout_ms : ALERT_STOP_DRAIN_MS);
}

/* The daemon's job for cfg, created but not started. */
static int job_create(ej_registry *reg, const struct ej_job_config *cfg, ejd_job **out, char *err,
                      size_t errlen)
{
    *out = NULL;
    ejd_job *d = calloc(1, sizeof(*d));
    if (d == NULL || ej_job_config_copy(&d->cfg, cfg) != 0) {
        free(d);
        snprintf(err, errlen, "out of memory");
        return EJ_ENOMEM;
    }
    struct ej_job_opts opts = {.events = bus,
                               .drain_timeout_ms = drain_timeout_ms,
                               .def = def_with_cap(d, cfg),
                               .on_stopped = ejd_restart_on_stopped};
    int rc = ej_job_create(reg, cfg, &opts, &d->job);
    if (rc == 0)
        ejd_events_job_retention(cfg->job_name, cfg->tracing.retention_days,
                                 cfg->tracing.failed_retention_days);
    if (rc != 0) {
        snprintf(err, errlen, "%s", ej_strerror(rc));
        ej_job_config_fini(&d->cfg);
        free(d);
        return rc;
    }
    *out = d;
    return 0;
}

static void job_free(ejd_job *d)
{
    ej_job_destroy(d->job);
    ej_job_config_fini(&d->cfg);
    free(d);
}

static void start_error(ejd_job *d, int rc, char *err, size_t errlen)
{
    const char *why = ej_job_last_error(d->job, (char[512]){0}, 512);
    snprintf(err, errlen, "%s", why != NULL && why[0] != '\0' ? why : ej_strerror(rc));
}

int ejd_job_start(ej_registry *reg, const struct ej_job_config *cfg, ejd_job **out, char *err,
                  size_t errlen)
{
    ejd_job *d = NULL;
    int rc = job_create(reg, cfg, &d, err, errlen);
    if (rc != 0)
        return rc;
    rc = ej_job_start(d->job);
    if (rc != 0) {
        start_error(d, rc, err, errlen);
        job_free(d);
        return rc;
    }
    ejd_metrics_job_started(d->job);
    *out = d;
    return 0;
}

int ejd_jobs_start(ej_registry *reg, const struct ej_job_config *cfgs, size_t n, ejd_job **out)
{
    int first = 0;
    ej_job **jobs = calloc(n ? n : 1, sizeof(*jobs));
    int *rcs = calloc(n ? n : 1, sizeof(*rcs));
    if (jobs == NULL || rcs == NULL) {
        free(jobs);
        free(rcs);
        EJ_LOG(EJ_LOG_ERROR, "daemon", EJ_ENOMEM, "cannot start %zu job(s): out of memory", n);
        return EJ_ENOMEM;
    }
    /* Created one by one (local work), started all at once: their
     * registrations' ZooKeeper requests are in flight together. */
    for (size_t i = 0; i < n; i++) {
        char err[512] = "";
        out[i] = NULL;
        int rc = job_create(reg, &cfgs[i], &out[i], err, sizeof(err));
        if (rc != 0) {
            EJ_LOG(EJ_LOG_ERROR, "daemon", rc, "job %s: cannot start: %s", cfgs[i].job_name, err);
            if (first == 0)
                first = rc;
            continue;
        }
        jobs[i] = out[i]->job;
    }
    if (first == 0) {
        ej_jobs_start(jobs, n, rcs);
        /* Only what a retry cannot fix stops the daemon: a job whose
         * start met a transient (a cache slow to load while a fleet
         * starts) is started again later, while the others run. */
        for (size_t i = 0; i < n && first == 0; i++)
            if (rcs[i] != 0 && !ejd_retry_is_transient(rcs[i]))
                first = rcs[i];
    }
    for (size_t i = 0; i < n; i++) {
        if (out[i] == NULL)
            continue;
        if (rcs[i] == 0 && jobs[i] != NULL && first == 0) {
            ejd_metrics_job_started(out[i]->job);
            continue;
        }
        if (rcs[i] != 0) {
            char err[512];
            start_error(out[i], rcs[i], err, sizeof(err));
            if (first == 0) {
                ejd_retry_add(&cfgs[i], rcs[i], err);
                job_free(out[i]);
                out[i] = NULL;
                continue;
            }
            EJ_LOG(EJ_LOG_ERROR, "daemon", rcs[i], "job %s: cannot start: %s", cfgs[i].job_name,
                   err);
        }
        out[i]->failed = true;
    }
    free(jobs);
    free(rcs);
    return first;
}

const struct ej_job_config *ejd_job_config(const ejd_job *job)
{
    return &job->cfg;
}

int ejd_job_update(ejd_job *job, const struct ej_job_config *cfg, char *err, size_t errlen)
{
    struct ej_job_config copy;
    if (ej_job_config_copy(&copy, cfg) != 0) {
        snprintf(err, errlen, "out of memory");
        return EJ_ENOMEM;
    }
    int rc = ej_job_update_config(job->job, cfg);
    if (rc != 0 && rc != EJ_ETIMEDOUT) {
        const char *why = ej_job_last_error(job->job, (char[512]){0}, 512);
        snprintf(err, errlen, "%s", why != NULL && why[0] != '\0' ? why : ej_strerror(rc));
        ej_job_config_fini(&copy);
        return rc;
    }
    if (rc == EJ_ETIMEDOUT)
        EJ_LOG(EJ_LOG_WARN, "daemon", rc, "job %s: new config written, not applied yet",
               cfg->job_name);
    ejd_events_job_retention(cfg->job_name, cfg->tracing.retention_days,
                             cfg->tracing.failed_retention_days);
    ej_job_config_fini(&job->cfg);
    job->cfg = copy;
    return 0;
}

bool ejd_job_is_stopped(const ejd_job *job)
{
    struct ej_job_status st;
    if (ej_job_status(job->job, &st) != 0)
        return false;
    bool stopped = st.started && st.stopped;
    ej_job_status_fini(&st);
    return stopped;
}

void ejd_job_pause(ejd_job *job)
{
    if (job != NULL)
        ej_job_pause(job->job);
}

void ejd_jobs_stop(ejd_job **jobs, size_t n)
{
    ej_job **all = calloc(n ? n : 1, sizeof(*all));
    if (all == NULL) {
        /* One by one then (each still bounded by the drain time). */
        for (size_t i = 0; i < n; i++) {
            ejd_job_pause(jobs[i]);
            ej_job_shutdown(jobs[i]->job);
        }
    } else {
        for (size_t i = 0; i < n; i++)
            all[i] = jobs[i]->job;
        /* Every schedule stops first, so no job fires while another
         * drains; the shutdowns then run together. */
        if (ej_jobs_shutdown(all, n) == EJ_ETIMEDOUT)
            EJ_LOG(EJ_LOG_WARN, "daemon", EJ_ETIMEDOUT,
                   "items still running after the drain timeout were abandoned");
    }
    for (size_t i = 0; i < n; i++)
        if (!jobs[i]->failed)
            ejd_metrics_job_stopped(jobs[i]->job);
    if (all != NULL)
        ej_jobs_destroy(all, n);
    for (size_t i = 0; i < n; i++) {
        if (all == NULL)
            ej_job_destroy(jobs[i]->job);
        ej_job_config_fini(&jobs[i]->cfg);
        free(jobs[i]);
    }
    free(all);
}
