/*
 * The fire ledger's rows (docs/tracing.md "The fire ledger"): what became
 * of each item at each cron fire time, posted on the job's bus as
 * ej_fire_event for the history store (EJOB_FIRE_LEDGER). Three sources:
 *
 *   - a run: the item started (fire_batch.c item_task), one row per item with
 *     its execution id;
 *   - a fire not run: fire_events.c ej__rt_count_not_run_named, the one
 *     place fires not run are counted, posts one row per fire time under
 *     its reason (any reason name, the scheduler's and the runtime's
 *     alike), item -1: the fire did not get as far as items;
 *   - missed while no instance was alive: the start-up scan below.
 *
 * The store keeps one row per job, fire time and item for the cluster: a
 * ran row beats a not-run one, which beats "missed" (src/trace/schema.c).
 */
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "common/util.h"
#include "coord/internal.h"
#include "ejob/cron.h"
#include "ejob/event.h"
#include "runtime/internal.h"

#define MOD "job"

static ej_event_bus *ledger_bus(struct ej_job *job)
{
    pthread_mutex_lock(&job->mu);
    ej_event_bus *b = job->bus;
    pthread_mutex_unlock(&job->mu);
    return b;
}

static void post_row(struct ej_job *job, int64_t fire_ms, int item, const char *outcome,
                     const char *kind, const char *execution_id, bool only_after_last,
                     const char *instance)
{
    ej_event_bus *bus = ledger_bus(job);
    if (bus == NULL)
        return;
    ej_fire_event ev = {
        .job_name = job->name,
        .fire_time_ms = fire_ms,
        .sharding_item = item,
        .outcome = outcome,
        .kind = kind,
        .instance_id = instance,
        .only_after_last = only_after_last,
        .recorded_time_ms = ej__now_ms(),
    };
    if (execution_id)
        snprintf(ev.execution_id, sizeof ev.execution_id, "%s", execution_id);
    ej_event_bus_post_fire(bus, &ev);
}

const char *ej__rt_ledger_kind(ej_execution_source source, bool cron)
{
    if (source == EJ_EXEC_FAILOVER)
        return "FAILOVER";
    if (source == EJ_EXEC_MISFIRE)
        return "MISFIRE";
    return cron ? "CRON" : "TRIGGER";
}

void ej__rt_ledger_ran(struct ej_job *job, int64_t fire_ms, const char *kind, int item,
                       const char *execution_id)
{
    post_row(job, fire_ms, item, EJ_FIRE_RAN, kind, execution_id, false, job->me);
}

/* One fire time not run, a row per item (one row for every item, -1, when
 * the fire did not get as far as items): "missed" goes through the one
 * place that records missed fires. */
static void not_run_row(struct ej_job *job, int64_t fire_ms, const char *reason, const char *kind,
                        const int *items, size_t n)
{
    for (size_t i = 0; i < (n == 0 ? 1 : n); i++) {
        int item = n == 0 ? -1 : items[i];
        if (strcmp(reason, EJ_FIRE_MISSED) == 0)
            ej__rt_ledger_missed(job, fire_ms, item, false);
        else
            post_row(job, fire_ms, item, reason, kind, NULL, false, job->me);
    }
}

void ej__rt_ledger_not_run(struct ej_job *job, const char *reason, const char *kind,
                           const int *items, size_t n, int64_t first_ms, int64_t last_ms,
                           uint32_t count)
{
    not_run_row(job, first_ms, reason, kind, items, n);
    if (count <= 1 || strcmp(kind, "CRON") != 0)
        return;
    /* The range's other fire times, from the cron in force (read under
     * job->mu, as the misfire marker does: a reschedule replaces it). */
    uint32_t cap = count < EJ__LEDGER_SCAN_MAX ? count : EJ__LEDGER_SCAN_MAX;
    int64_t *times = malloc(cap * sizeof *times);
    if (times == NULL)
        return;
    uint32_t k = 0;
    int64_t t = first_ms;
    pthread_mutex_lock(&job->mu);
    while (job->cron != NULL && k + 1 < cap && ej_cron_next(job->cron, job->tz, t, &t) == 0 &&
           t <= last_ms)
        times[k++] = t;
    pthread_mutex_unlock(&job->mu);
    for (uint32_t i = 0; i < k; i++)
        not_run_row(job, times[i], reason, kind, items, n);
    free(times);
}

void ej__rt_ledger_caught_up(struct ej_job *job, int item, int64_t first_ms, int64_t last_ms,
                             uint32_t count, const char *execution_id)
{
    uint32_t k = 0;
    int64_t t = first_ms;
    while (k < count && k < EJ__LEDGER_SCAN_MAX && t <= last_ms) {
        post_row(job, t, item, EJ_FIRE_RAN, "CATCHUP", execution_id, false, job->me);
        k++;
        pthread_mutex_lock(&job->mu);
        int rc = job->cron != NULL ? ej_cron_next(job->cron, job->tz, t, &t) : -1;
        pthread_mutex_unlock(&job->mu);
        if (rc != 0)
            break;
    }
}

void ej__rt_ledger_missed(struct ej_job *job, int64_t fire_ms, int item, bool only_after_last)
{
    /* No instance to name: none owned the item then. */
    post_row(job, fire_ms, item, EJ_FIRE_MISSED, "CRON", NULL, only_after_last, "");
}

/* The newest (at most cap) fire times t of cron with from <= t < to into
 * out, ascending; *more says whether older ones were left out. Returns
 * how many. */
static size_t newest_fire_times(const ej_cron *cron, const ej_tz *tz, int64_t from, int64_t to,
                                int64_t *out, size_t cap, bool *more)
{
    size_t seen = 0;
    int64_t t = from - 1; /* ej_cron_next is strictly after, in seconds */
    while (ej_cron_next(cron, tz, t, &t) == 0 && t < to)
        out[seen++ % cap] = t; /* a ring: the oldest is overwritten */
    *more = seen > cap;
    if (!*more)
        return seen;
    /* Rotate the ring so that the oldest kept comes first. */
    size_t head = seen % cap;
    int64_t *tmp = malloc(cap * sizeof *tmp);
    if (tmp == NULL)
        return 0;
    for (size_t i = 0; i < cap; i++)
        tmp[i] = out[(head + i) % cap];
    memcpy(out, tmp, cap * sizeof *tmp);
    free(tmp);
    return cap;
}

/* Who tells the scan the ledger's last fire time of a job (the daemon,
 * through its history store); NULL: nobody, no scan. */
static pthread_mutex_t last_fire_mu = PTHREAD_MUTEX_INITIALIZER;
static ej__ledger_last_fire_fn last_fire_fn;
static void *last_fire_arg;

void ej__rt_ledger_set_last_fire_fn(ej__ledger_last_fire_fn fn, void *arg)
{
    pthread_mutex_lock(&last_fire_mu);
    last_fire_fn = fn;
    last_fire_arg = arg;
    pthread_mutex_unlock(&last_fire_mu);
}

/* True when no other instance of the job is live now: every instance was
 * down before this one came (else they recorded their fires). */
static bool alone(struct ej_job *job)
{
    char **ids = NULL;
    size_t n = 0;
    if (ej__coord_available_instances(job->coord, &ids, &n) != 0)
        return false;
    bool only_me = true;
    for (size_t i = 0; i < n; i++)
        only_me = only_me && strcmp(ids[i], job->me) == 0;
    ej_registry_free_names(ids);
    return only_me;
}

/* The ledger's last fire time of the job, 0 when it has none or nobody
 * can tell. Blocks on the store (bounded by its reader). */
static int64_t ledger_last_fire(struct ej_job *job)
{
    int64_t last = 0;
    pthread_mutex_lock(&last_fire_mu);
    if (last_fire_fn != NULL && last_fire_fn(job->name, &last, last_fire_arg) != 0)
        last = 0;
    pthread_mutex_unlock(&last_fire_mu);
    return last;
}

void ej__rt_ledger_scan_down(struct ej_job *job, const char *cron_expr, const char *time_zone)
{
    int64_t reg = ej__coord_registered_at(job->coord);
    /* Only the instance that is alone does it: the first one up after
     * every instance was down. Not "the leader": the election may end
     * after this start returns, and the scan must come before this
     * instance's first rows. Two instances starting together, each alone
     * in its own view, write the same rows; the store keeps them once. */
    if (reg <= 0 || !alone(job))
        return;
    int64_t last = ledger_last_fire(job);
    if (last <= 0 || last >= reg)
        return; /* a new job (no ledger), or nobody can tell */
    ej_tz *tz = NULL;
    ej_cron *cron = NULL;
    char err[256];
    if (ej_tz_load(time_zone && time_zone[0] ? time_zone : NULL, &tz) != 0)
        return; /* scheduling the job reports it */
    if (ej_cron_parse(cron_expr, &cron, err, sizeof err) != 0) {
        ej_tz_free(tz);
        return;
    }
    int64_t *times = malloc(EJ__LEDGER_SCAN_MAX * sizeof *times);
    if (times == NULL)
        goto out;
    /* The newest EJ__LEDGER_SCAN_MAX fire times before the registration,
     * after the ledger's last one, within the window: look back 1 minute,
     * then 4 times as far, until the cap, the last row or the window (a 1 s cron costs a few
     * thousand cron steps, not the window's 86,400). */
    size_t n = 0;
    bool more = false;
    int64_t oldest = reg - EJ__LEDGER_WINDOW_MS > last + 1 ? reg - EJ__LEDGER_WINDOW_MS : last + 1;
    for (int64_t back = 60000; !more; back *= 4) {
        bool whole = reg - back <= oldest;
        int64_t from = whole ? oldest : reg - back;
        n = newest_fire_times(cron, tz, from, reg, times, EJ__LEDGER_SCAN_MAX, &more);
        if (whole)
            break;
    }
    for (size_t i = 0; i < n; i++)
        ej__rt_ledger_missed(job, times[i], -1, true);
    if (n > 0)
        EJ_LOG(EJ_LOG_DEBUG, MOD, 0,
               "job %s: %zu fire time(s) before this start checked for fires missed while no "
               "instance was alive",
               job->name, n);
    free(times);
out:
    ej_cron_free(cron);
    ej_tz_free(tz);
}
