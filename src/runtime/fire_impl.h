/*
 * The fire flow's shared declarations, for its files only:
 *
 *   fire.c         the scheduler's callback: deadline and catch-up, the
 *                  coordinator's plan, failover items, own items, a
 *                  failover take; the job's definition and its schedule
 *   fire_batch.c   a batch of items run once: their start registered,
 *                  each item (and its retries) on a pool thread, running
 *                  nodes deleted, the batch reported
 *   misfire.c      misfire marks, and the misfire loop after a normal run
 *   fire_events.c  the event bus, status events, fires not run
 *   fire_hooks.c   the trigger's users and the coordinator's hooks
 *
 * Not part of the module's internal API (internal.h): only these files.
 */
#ifndef EJ_RUNTIME_FIRE_IMPL_H
#define EJ_RUNTIME_FIRE_IMPL_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "ejob/common.h"
#include "ejob/event.h"
#include "ejob/job.h"
#include "runtime/internal.h"

/* A fire the scheduler delivered, as far as counting it goes. */
struct fire_ref {
    int64_t at;        /* its cron fire time, or when the fire-now request was made */
    int64_t last;      /* with count > 1: the last fire time it covers */
    uint32_t count;    /* fire times it covers, when more than at alone */
    bool off_schedule; /* a fire-now request only (no cron fire time) */
    bool catch_up;     /* a missed fire time run late (CATCH_UP): arms no misfire marker */
    enum {
        FIRE_PENDING,  /* not counted yet */
        FIRE_REPORTED, /* counted: by ej__rt_not_run, or by the miss hook for a
                        * misfired cron fire (its fire times, under the
                        * scheduler's reason) */
        FIRE_FAILOVER, /* only failover items taken over: not a fire of the job's
                        * own (the items stay this instance's for its next fire) */
    } state;
};

static inline const struct ej_job_def *def_of(const struct ej__rt_settings *s)
{
    return s->def;
}

static inline const char *param_of(const struct ej__rt_settings *s, int item)
{
    return ej_sharding_params_get(&s->params, item);
}

/* fire_events.c */

/* The job's event bus (read under job->mu), or NULL. */
ej_event_bus *ej__rt_bus_of(struct ej_job *job);
/* fr does not run, for reason r: counted and posted once, logged
 * rate-limited. */
void ej__rt_not_run(struct ej_job *job, struct fire_ref *fr, enum ej__not_run_reason r,
                    const char *why, ...) EJ_PRINTF(4, 5);
/* The one place fires not run are counted and posted, under reason (any
 * name: the scheduler's miss reasons too) and kind ("CRON", "TRIGGER"). */
void ej__rt_count_not_run_named(struct ej_job *job, const char *reason, const int *items,
                                size_t n, uint32_t count, int64_t first_ms, int64_t last_ms,
                                const char *kind);

/* fire_batch.c */

/* Run items once with source; true when the error handler asked to fail
 * the whole run. */
bool ej__rt_run_batch(struct ej_job *job, const struct ej__rt_settings *s, const int *items,
                      size_t n, const int64_t *failover_tokens, ej_execution_source source,
                      struct fire_ref *fr, size_t *started);

#endif
