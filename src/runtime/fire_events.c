/*
 * What a fire tells: the job's event bus and its status events, and fires
 * not run. Every fire the scheduler delivered and the runtime did not run
 * is counted and posted here (ej__rt_not_run), as is every cron fire time
 * the scheduler could not deliver (its miss hook, fire.c).
 */
#include <inttypes.h>
#include <pthread.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>

#include "common/check.h"
#include "common/util.h"
#include "ejob/event.h"
#include "runtime/fire_impl.h"
#include "runtime/internal.h"

#define MOD "job"

/* ------------------------------------------------------------------------ */
/* Events                                                                    */

int ej__rt_subscribe(struct ej_job *job, void (*fn)(const struct ej_event *ev, void *user),
                     void *user)
{
    pthread_mutex_lock(&job->mu);
    if (job->bus == NULL) {
        struct ej_event_bus_opts o = {.name = "ej-events"};
        int rc = ej_event_bus_create(&o, &job->bus);
        if (rc != 0) {
            pthread_mutex_unlock(&job->mu);
            return rc;
        }
        job->own_bus = true;
    }
    ej_event_bus *bus = job->bus;
    pthread_mutex_unlock(&job->mu);
    return ej_event_bus_add_sink(bus, fn, user);
}

void ej__rt_bus_destroy(struct ej_job *job)
{
    if (job->own_bus) {
        ej_event_bus_destroy(job->bus);
        job->bus = NULL;
        job->own_bus = false;
    }
}

ej_event_bus *ej__rt_bus_of(struct ej_job *job)
{
    pthread_mutex_lock(&job->mu);
    ej_event_bus *b = job->bus;
    pthread_mutex_unlock(&job->mu);
    return b;
}

void ej__rt_post_status(struct ej_job *job, const char *task_id, const int *items, size_t n,
                        int state, const char *fmt, ...)
{
    ej_event_bus *bus = ej__rt_bus_of(job);
    if (bus == NULL)
        return;
    char msg[1024] = "";
    if (fmt) {
        va_list ap;
        va_start(ap, fmt);
        vsnprintf(msg, sizeof msg, fmt, ap);
        va_end(ap);
    }
    char *its = ej_event_items_string(items, n);
    ej_status_event ev = {
        .job_name = job->name,
        .original_task_id = "",
        .task_id = task_id ? task_id : "",
        .slave_id = job->ip,
        .source = "LITE_EXECUTOR",
        .execution_type = "READY",
        .sharding_item = its ? its : "[]",
        .state = (ej_task_state)state,
        .message = msg,
        .creation_time_ms = ej__now_ms(),
    };
    ej_event_new_id(ev.id);
    ej_event_bus_post_status(bus, &ev);
    free(its);
}

/* ------------------------------------------------------------------------ */
/* Fires not run                                                              */

/*
 * A fire that does not run is never lost silently: every one is added to
 * fires_missed and posted as a TASK_ERROR status event "Job 'j' fire not run
 * (REASON): N fire time(s) from A to B" (the daemon's /metrics counts these
 * by reason). The scheduler reports the cron fire times it could not
 * deliver on time through its miss hook (on_miss); the fire flow reports the
 * fires it was given and did not run (ej__rt_not_run).
 */

/* At most one warning line per job and reason this often. */
#define NOT_RUN_LOG_EVERY_MS 5000

static const struct {
    const char *name;
    ej_log_level level; /* of the rate-limited line */
} not_run_kinds[EJ__NOT_RUN_REASONS] = {
    [EJ__NOT_RUN_FENCED] = {"fenced", EJ_LOG_WARN},
    [EJ__NOT_RUN_BEFORE_REGISTRATION] = {"before-registration", EJ_LOG_WARN},
    [EJ__NOT_RUN_LEADER_WAIT] = {"leader-wait", EJ_LOG_WARN},
    [EJ__NOT_RUN_SHARDING_FAILED] = {"sharding-failed", EJ_LOG_WARN},
    [EJ__NOT_RUN_TIME_DIFF] = {"time-diff", EJ_LOG_WARN},
    [EJ__NOT_RUN_START_FAILED] = {"start-failed", EJ_LOG_WARN},
    [EJ__NOT_RUN_DEADLINE] = {"deadline", EJ_LOG_WARN},
    [EJ__NOT_RUN_MISSED] = {"missed", EJ_LOG_WARN},
    [EJ__NOT_RUN_FAILOVER_LOST] = {"failover-lost", EJ_LOG_WARN},
    /* overlapPolicy SKIP: the job's own choice. */
    [EJ__NOT_RUN_OVERLAP] = {"overlap", EJ_LOG_INFO},
    /* An operator's decisions, expected: each fire at debug level. */
    [EJ__NOT_RUN_DISABLED] = {"disabled", EJ_LOG_DEBUG},
    [EJ__NOT_RUN_STOPPED] = {"stopped", EJ_LOG_DEBUG},
    /* ElasticJob ignores a console trigger while the job runs. */
    [EJ__NOT_RUN_RUNNING] = {"running", EJ_LOG_INFO},
};

const char *ej__not_run_reason_name(enum ej__not_run_reason r)
{
    return (unsigned)r < EJ__NOT_RUN_REASONS ? not_run_kinds[r].name : "unknown";
}

/* The one place fires not run are counted and posted: on_miss (fire.c),
 * ej__rt_not_run and ej__rt_count_not_run. */
void ej__rt_count_not_run_named(struct ej_job *job, const char *reason, const int *items, size_t n,
                                uint32_t count, int64_t first_ms, int64_t last_ms, const char *kind)
{
    ej__rt_ledger_not_run(job, reason, kind, items, n, first_ms, last_ms, count);
    pthread_mutex_lock(&job->mu);
    job->fires_missed += count;
    pthread_mutex_unlock(&job->mu);
    ej__rt_post_status(job, "", items, n, EJ_TASK_ERROR,
                       "Job '%s' fire not run (%s): %u fire time(s) from %lld to %lld", job->name,
                       reason, (unsigned)count, (long long)first_ms, (long long)last_ms);
}

void ej__rt_not_run_overlap(struct ej_job *job, int64_t due)
{
    EJ_LOG(EJ_LOG_INFO, MOD, 0,
           "job %s: fire of %lld not run (overlap): the job's items still run (overlapPolicy "
           "SKIP)",
           job->name, (long long)due);
    ej__rt_count_not_run_named(job, "overlap", NULL, 0, 1, due, due, "CRON");
}

void ej__rt_count_not_run(struct ej_job *job, enum ej__not_run_reason r, const int *items, size_t n,
                          uint32_t count, int64_t first_ms, int64_t last_ms)
{
    ej__rt_count_not_run_named(job, ej__not_run_reason_name(r), items, n, count, first_ms, last_ms,
                               "CRON");
}

/* fr does not run, for reason r (why: printf-style, for the log only).
 * Counts and posts it unless that was done, then logs a line at most every
 * NOT_RUN_LOG_EVERY_MS per job and reason, saying how many went without
 * one (a warning; debug or info for the reasons an operator chose). */
void ej__rt_not_run(struct ej_job *job, struct fire_ref *fr, enum ej__not_run_reason r,
                    const char *why, ...)
{
    EJ_ASSERT((unsigned)r < EJ__NOT_RUN_REASONS);
    ej_log_level level = not_run_kinds[r].level;
    const char *note = "";
    if (fr->state == FIRE_PENDING) {
        fr->state = FIRE_REPORTED;
        ej__rt_count_not_run_named(
            job, not_run_kinds[r].name, NULL, 0, fr->count > 1 ? fr->count : 1, fr->at,
            fr->count > 1 ? fr->last : fr->at, fr->off_schedule ? "TRIGGER" : "CRON");
    } else {
        level = EJ_LOG_DEBUG;
        note = fr->state == FIRE_FAILOVER ? " [a failover fire: the items wait for the next fire]"
                                          : " [its fire time(s) were reported already]";
    }
    uint64_t quiet = 0;
    if (level >= EJ_LOG_WARN) {
        int64_t now = ej__mono_ms();
        pthread_mutex_lock(&job->mu);
        bool say = job->not_run_log[r].last_ms == 0 ||
                   now - job->not_run_log[r].last_ms >= NOT_RUN_LOG_EVERY_MS;
        if (say) {
            quiet = job->not_run_log[r].suppressed;
            job->not_run_log[r].suppressed = 0;
            job->not_run_log[r].last_ms = now;
        } else {
            job->not_run_log[r].suppressed++;
        }
        pthread_mutex_unlock(&job->mu);
        if (!say)
            return;
    }
    if (level < ej_log_get_level())
        return;
    char msg[512];
    va_list ap;
    va_start(ap, why);
    vsnprintf(msg, sizeof msg, why, ap);
    va_end(ap);
    char more[96] = "";
    if (quiet > 0)
        snprintf(more, sizeof more, " (and %" PRIu64 " more not run so since the last such line)",
                 quiet);
    EJ_LOG(level, MOD, 0, "job %s: fire of %" PRId64 " not run (%s): %s%s%s", job->name, fr->at,
           not_run_kinds[r].name, msg, note, more);
}
