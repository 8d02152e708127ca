/* The daemon's jobs through the library API (see daemon.h). */
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "ejob/config.h"
#include "ejob/ejob.h"
#include "ejob/error.h"
#include "ejob/log.h"
#include "cli/daemon.h"
#include "cli/daemon_events.h"

struct ejd_job {
    ej_job *job;
    struct ej_job_config cfg; /* as the daemon file last gave it */
};

static struct ej_event_bus *bus;
static int drain_timeout_ms = 30000;

int ejd_init(const struct ej_tracing_config *tracing, int drain_ms, char *err, size_t errlen)
{
    /* 0 asks for no wait at all; the library reads 0 as its default. */
    drain_timeout_ms = drain_ms > 0 ? drain_ms : 1;
    if (tracing != NULL && tracing->type != EJ_TRACING_NONE)
        EJ_LOG(EJ_LOG_WARN, "daemon", 0,
               "tracing (%s) is not available in this build; events are logged only",
               tracing->type == EJ_TRACING_SQLITE ? "SQLITE" : "POSTGRESQL");
    int rc = ejd_events_create(&bus);
    if (rc != 0)
        snprintf(err, errlen, "cannot start the event bus: %s", ej_strerror(rc));
    return rc;
}

void ejd_fini(void)
{
    ejd_events_destroy(bus);
    bus = NULL;
}

int ejd_job_start(ej_registry *reg, const struct ej_job_config *cfg, ejd_job **out, char *err,
                  size_t errlen)
{
    *out = NULL;
    ejd_job *d = calloc(1, sizeof(*d));
    if (d == NULL || ej_job_config_copy(&d->cfg, cfg) != 0) {
        free(d);
        snprintf(err, errlen, "out of memory");
        return EJ_ENOMEM;
    }
    struct ej_job_opts opts = {.events = bus, .drain_timeout_ms = drain_timeout_ms};
    int rc = ej_job_create(reg, cfg, &opts, &d->job);
    if (rc != 0) {
        snprintf(err, errlen, "%s", ej_strerror(rc));
        goto fail;
    }
    rc = ej_job_start(d->job);
    if (rc != 0) {
        const char *why = ej_job_last_error(d->job, (char[512]){0}, 512);
        snprintf(err, errlen, "%s", why != NULL && why[0] != '\0' ? why : ej_strerror(rc));
        goto fail;
    }
    *out = d;
    return 0;
fail:
    ej_job_destroy(d->job);
    ej_job_config_fini(&d->cfg);
    free(d);
    return rc;
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
    ej_job_config_fini(&job->cfg);
    job->cfg = copy;
    return 0;
}

void ejd_job_pause(ejd_job *job)
{
    if (job != NULL)
        ej_job_pause(job->job);
}

static void *stop_one(void *arg)
{
    ejd_job *d = arg;
    if (ej_job_shutdown(d->job) == EJ_ETIMEDOUT)
        EJ_LOG(EJ_LOG_WARN, "daemon", EJ_ETIMEDOUT,
               "job %s: items still running after the drain timeout were abandoned",
               ej_job_name(d->job));
    return NULL;
}

void ejd_jobs_stop(ejd_job **jobs, size_t n)
{
    /* Stop every schedule first, so no job fires while another drains. */
    for (size_t i = 0; i < n; i++)
        ejd_job_pause(jobs[i]);
    pthread_t *threads = calloc(n ? n : 1, sizeof(pthread_t));
    bool *started = calloc(n ? n : 1, sizeof(bool));
    for (size_t i = 0; i < n; i++) {
        if (threads != NULL && started != NULL &&
            pthread_create(&threads[i], NULL, stop_one, jobs[i]) == 0)
            started[i] = true;
        else
            stop_one(jobs[i]);
    }
    for (size_t i = 0; i < n; i++)
        if (started != NULL && started[i])
            pthread_join(threads[i], NULL);
    for (size_t i = 0; i < n; i++) {
        ej_job_destroy(jobs[i]->job);
        ej_job_config_fini(&jobs[i]->cfg);
        free(jobs[i]);
    }
    free(threads);
    free(started);
}
