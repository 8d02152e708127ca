/*
 * Events into facts: the event bus delivers every job's execution, status
 * and fire-ledger events here (ej_alert_event_sink), on the bus thread.
 */
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "alert/internal.h"
#include "ejob/event.h"

/* ElasticJob's task id "JOB@-@ITEMS@-@TYPE@-@IP@-@PID": the instance is
 * its last two parts. NULL when it has no such shape. */
static const char *instance_of(const char *task_id)
{
    if (task_id == NULL)
        return NULL;
    const char *p = task_id;
    for (int i = 0; i < 3; i++) {
        p = strstr(p, "@-@");
        if (p == NULL)
            return NULL;
        p += 3;
    }
    return *p != '\0' ? p : NULL;
}

/* The cron fire time of the runs that started lately, from the fire
 * ledger's "ran" rows (posted when an item starts, so before its end on
 * the same bus). Only the bus thread, the one caller of the sink, reads
 * and writes it. A run not found (no ledger event, or pushed out by 256
 * later starts) is told with its start time. */
#define RECENT_FIRES 256
static struct {
    char execution_id[EJ_EVENT_ID_LEN];
    int64_t fire_ms;
} recent[RECENT_FIRES];
static size_t recent_next;

static void remember_fire(const ej_fire_event *f)
{
    if (f->execution_id[0] == '\0' || f->fire_time_ms <= 0)
        return;
    snprintf(recent[recent_next].execution_id, EJ_EVENT_ID_LEN, "%s", f->execution_id);
    recent[recent_next].fire_ms = f->fire_time_ms;
    recent_next = (recent_next + 1) % RECENT_FIRES;
}

static int64_t fire_time_of(const ej_execution_event *e)
{
    for (size_t i = 0; i < RECENT_FIRES; i++)
        if (strcmp(recent[i].execution_id, e->id) == 0)
            return recent[i].fire_ms;
    return e->start_time_ms;
}

static void from_execution(const ej_execution_event *e)
{
    if (e->complete_time_ms == 0 || e->job_name == NULL)
        return; /* the start of a run */
    struct ej_alert_fact f = {
        .kind = strcmp(ej_execution_result(e), EJ_RUN_TIMEOUT) == 0 ? EJ_ALERT_TIMEOUT
                                                                    : EJ_ALERT_FAILED,
        .succeeded = e->is_success,
        .job = e->job_name,
        .item = e->sharding_item,
        .fire_ms = fire_time_of(e),
        .instance = instance_of(e->task_id),
        .reason = e->failure_cause,
        .execution_id = e->id,
        .has_exit_code = e->has_exit_code,
        .exit_code = e->exit_code,
        .term_signal = e->term_signal,
        .http_status = e->http_status,
        .stderr_text = e->error_output,
        .stderr_len = e->error_output_len,
    };
    ej__alert_post(&f);
}

/* "Job 'J' fire not run (REASON): N fire time(s) from A to B" (runtime's
 * count_not_run). */
static void from_status(const ej_status_event *s)
{
    if (s->state != EJ_TASK_ERROR || s->message == NULL || s->job_name == NULL)
        return;
    const char *p = strstr(s->message, "' fire not run (");
    if (p == NULL)
        return;
    p += strlen("' fire not run (");
    const char *end = strstr(p, "): ");
    if (end == NULL || end - p > 64)
        return;
    char reason[72];
    snprintf(reason, sizeof reason, "%.*s", (int)(end - p), p);
    if (strcmp(reason, EJ_FIRE_MISSED) == 0)
        return; /* its ledger rows (from_fire) tell it, as missed */
    unsigned count = 1;
    long long first = 0, last = 0;
    if (sscanf(end, "): %u fire time(s) from %lld to %lld", &count, &first, &last) < 1)
        count = 1;
    struct ej_alert_fact f = {
        .kind = EJ_ALERT_NOT_RUN,
        .job = s->job_name,
        .item = -1,
        .fire_ms = first,
        .fire_count = count,
        .instance = instance_of(s->task_id),
        .reason = reason,
    };
    ej__alert_post(&f);
}

/* A fire time no live instance owned (the fire ledger's "missed" row):
 * posted by the instance that records it, so once for the cluster. */
static void from_fire(const ej_fire_event *f)
{
    if (f->outcome != NULL && strcmp(f->outcome, EJ_FIRE_RAN) == 0)
        remember_fire(f);
    if (f->job_name == NULL || f->outcome == NULL || strcmp(f->outcome, EJ_FIRE_MISSED) != 0)
        return;
    struct ej_alert_fact fact = {
        .kind = EJ_ALERT_MISSED,
        .job = f->job_name,
        .item = f->sharding_item,
        .fire_ms = f->fire_time_ms,
        .fire_count = 1,
        .instance = NULL,
        .reason = "no live instance owned the item at its fire time",
    };
    ej__alert_post(&fact);
}

void ej_alert_event_sink(const struct ej_event *ev, void *user)
{
    (void)user;
    if (ev == NULL || !ej_alert_is_running())
        return;
    if (ev->type == EJ_EVENT_EXECUTION)
        from_execution(&ev->u.execution);
    else if (ev->type == EJ_EVENT_STATUS)
        from_status(&ev->u.status);
    else if (ev->type == EJ_EVENT_FIRE)
        from_fire(&ev->u.fire);
}
