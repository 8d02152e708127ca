/*
 * misfirePolicy CATCH_UP (docs/execution.md "Misfires"): the cron fire times
 * the scheduler could not deliver (the process was stopped or starved, its
 * timer late) are each run, oldest first, when they are within
 * catchUpWindowSeconds of the late fire's start; at most
 * EJ_CONFIG_CATCH_UP_MAX of them.
 */
#include <string.h>

#include "ejob/cron.h"
#include "runtime/internal.h"
#include "schedule/internal.h"

size_t ej__policy_catch_up_times(struct ej_job *job, const struct ej__rt_settings *s,
                                 const struct ej__fire *f, int64_t *times, size_t max)
{
    if (strcmp(s->cfg.misfire_policy, "CATCH_UP") != 0 || job->cron == NULL)
        return 0;
    int64_t from = f->started_ms - (int64_t)s->cfg.catch_up_window_seconds * 1000;
    size_t n = 0;
    /* The newest max within the window: walk them all, keep a ring. */
    size_t seen = 0;
    for (int64_t t = f->scheduled_ms; t > 0 && t <= f->last_scheduled_ms;) {
        if (t >= from) {
            times[seen % max] = t;
            seen++;
        }
        int64_t next = 0;
        if (ej_cron_next(job->cron, job->tz, t, &next) != 0 || next <= t)
            break;
        t = next;
    }
    n = seen < max ? seen : max;
    if (seen > max) { /* oldest first: rotate the ring */
        int64_t tmp[EJ_CONFIG_CATCH_UP_MAX];
        for (size_t i = 0; i < max; i++)
            tmp[i] = times[(seen + i) % max];
        for (size_t i = 0; i < max; i++)
            times[i] = tmp[i];
    }
    return n;
}
