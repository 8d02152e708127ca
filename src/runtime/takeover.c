/*
 * Fire times lost while an item's owner was gone (docs/coordination.md
 * "Takeover"). Between an owner's death and the expiry of its session the
 * others still see its items as its own, and fires in that window run
 * nowhere; failover covers only the run going on at the death. The item's
 * next owner (after the resharding) finds them from the item's fire
 * record, sharding/{n} = "fired MS by ID", which every run writes in the
 * transaction that creates its running nodes: every cron fire time after
 * MS was never started by ID, since a start and its record are one
 * transaction, which fails once ID's session is gone. So a catch-up never
 * repeats a fire its owner began, even one a partitioned owner began
 * before it fenced.
 *
 * Only owners this instance saw leave count (ej__running_departed): a record
 * of an owner still alive is that owner's to account for (it ran the fire
 * times after it, or reported them not run), and a record older than this
 * instance's memory (the whole cluster was down) is left alone.
 */
#include <inttypes.h>
#include <stdlib.h>
#include <string.h>

#include "common/util.h"
#include "coord/internal.h"
#include "ejob/cron.h"
#include "ejob/event.h"
#include "runtime/internal.h"

#define MOD "job"
/* Fire times counted at most for one item (as the scheduler's misfires). */
#define LOST_MAX 10000

static bool contains(const int *v, size_t n, int x)
{
    for (size_t i = 0; i < n; i++)
        if (v[i] == x)
            return true;
    return false;
}

/* Cron fire times t with after < t < before: how many (at most LOST_MAX),
 * the first and the last. */
static uint32_t lost_times(struct ej_job *job, int64_t after, int64_t before, int64_t *first,
                           int64_t *last)
{
    uint32_t k = 0;
    *first = *last = 0;
    pthread_mutex_lock(&job->mu);
    int64_t t = after;
    while (job->cron != NULL && k < LOST_MAX) {
        int64_t next = 0;
        if (ej_cron_next(job->cron, job->tz, t, &next) != 0 || next >= before)
            break;
        if (k++ == 0)
            *first = next;
        *last = t = next;
    }
    pthread_mutex_unlock(&job->mu);
    return k;
}

/* The range a MISFIRE run of item will catch up (one entry an item). */
static void remember_catchup(struct ej_job *job, int item, int64_t first, int64_t last, uint32_t k)
{
    size_t i = 0;
    while (i < job->ncatchups && job->catchups[i].item != item)
        i++;
    if (i == job->ncatchups) {
        struct ej__catchup *more = realloc(job->catchups, (i + 1) * sizeof *more);
        if (more == NULL)
            return; /* the run still happens; the ledger shows it at its start only */
        job->catchups = more;
        job->ncatchups++;
    }
    job->catchups[i] = (struct ej__catchup){.item = item, .first_ms = first, .last_ms = last,
                                            .count = k};
}

bool ej__takeover_take_catchup(struct ej_job *job, int item, struct ej__catchup *out)
{
    for (size_t i = 0; i < job->ncatchups; i++) {
        if (job->catchups[i].item != item)
            continue;
        *out = job->catchups[i];
        job->catchups[i] = job->catchups[--job->ncatchups];
        return true;
    }
    return false;
}

/* The item's owner was gone: its fire times after its record, up to
 * before_ms, are caught up once or reported missed. */
static void take_over(struct ej_job *job, const struct ej__rt_settings *s, int item,
                      int64_t before_ms)
{
    struct ej__coord *c = job->coord;
    int64_t fired = 0;
    char by[EJ__ID_MAX];
    if (ej__running_read_fired(c, item, &fired, by, sizeof by) != 0 || strcmp(by, job->me) == 0 ||
        !ej__running_departed(c, by) || ej__coord_instance_listed(c, by))
        return;
    int64_t first = 0, last = 0;
    uint32_t k = lost_times(job, fired, before_ms, &first, &last);
    if (k == 0)
        return;
    if (s->cfg.misfire && ej__running_set_misfire(c, &item, 1) == 0) {
        remember_catchup(job, item, first, last, k);
        EJ_LOG(EJ_LOG_INFO, MOD, 0,
               "job %s: item %d taken over from %s, gone since its fire of %" PRId64
               ": %u fire time(s) from %" PRId64 " to %" PRId64
               " run once (misfire) after this fire's run",
               job->name, item, by, fired, (unsigned)k, first, last);
        return;
    }
    ej__rt_count_not_run(job, EJ__NOT_RUN_MISSED, &item, 1, k, first, last);
    EJ_LOG(EJ_LOG_WARN, MOD, 0,
           "job %s: item %d taken over from %s, gone since its fire of %" PRId64 ": %u fire "
           "time(s) from %" PRId64 " to %" PRId64 " not run (missed)%s",
           job->name, item, by, fired, (unsigned)k, first, last,
           s->cfg.misfire ? " (the misfire mark could not be written)" : " (misfire is off)");
}

void ej__takeover_check(struct ej_job *job, const struct ej__rt_settings *s, const int *items,
                        size_t n, int64_t before_ms)
{
    struct ej__coord *c = job->coord;
    int64_t session = ej__coord_session(c);
    bool known = job->owned_session == session && session != 0;
    int *gained = n ? malloc(n * sizeof *gained) : NULL;
    size_t ngained = 0;
    for (size_t i = 0; gained != NULL && i < n; i++)
        if (!known || !contains(job->owned_items, job->nowned, items[i]))
            gained[ngained++] = items[i];
    int *keep = n ? malloc(n * sizeof *keep) : NULL;
    free(job->owned_items);
    job->owned_items = keep;
    job->nowned = keep ? n : 0;
    job->owned_session = keep || n == 0 ? session : 0;
    if (keep)
        memcpy(keep, items, n * sizeof *keep);
    /* Steady state, and every fire while nobody left: no read. */
    if (ngained > 0 && ej__running_any_departed(c))
        for (size_t i = 0; i < ngained; i++)
            take_over(job, s, gained[i], before_ms);
    free(gained);
}
