/*
 * Misfire marking: Quartz's misfire of a trigger whose job still runs, as
 * ElasticJob 2.1.5's JobTriggerListener does it. A cron fire time that
 * passes while a normal run of this job is going on marks EVERY local
 * sharding item misfire (not only the items of the run: after a failover
 * or a resharding the instance may own items the run did not start), and
 * the run's misfire loop re-runs them when it is done.
 *
 * The loop and the markers meet in the "misfire window": open from the
 * start of a normal run until its loop has seen every mark. A marker that
 * finds the window closed marks nothing and leaves the fire time to the
 * scheduler's misfired callback (it runs late rather than not at all);
 * the loop closes the window only after every marker in flight is done
 * and no mark came since it last looked.
 *
 * The loop itself (ej__misfire_loop_run) is here too, after the marking:
 * it re-runs the marked items through the fire's batch (fire_batch.c).
 */
#include <stdlib.h>
#include <string.h>

#include "common/util.h"
#include "coord/internal.h"
#include "ejob/cron.h"
#include "ejob/event.h"
#include "ejob/job.h"
#include "runtime/fire_impl.h"
#include "runtime/internal.h"
#include "schedule/internal.h"

#define MOD "job"

struct marker {
    struct ej_job *job;
    uint64_t gen;
    int64_t due;
};

/* Whose the view says an item is: 1 this instance's, 0 no one's (a leader
 * rewriting the instance nodes, as Java 2.1.5's does), -1 another's or
 * gone. */
static int owned_here(struct ej_job *job, int item)
{
    struct ej__view_item it;
    if (ej__view_get(ej__coord_view(job->coord), item, &it) != 0)
        return -1;
    int r = it.owner == NULL                                           ? 0
            : strcmp(it.owner, ej__coord_instance_id(job->coord)) == 0 ? 1
                                                                       : -1;
    ej__view_item_fini(&it);
    return r;
}

bool ej__misfire_run_unowned(struct ej_job *job)
{
    pthread_mutex_lock(&job->mu);
    size_t n = job->run_nitems;
    int *run = n ? malloc(n * sizeof *run) : NULL;
    if (run)
        memcpy(run, job->run_items, n * sizeof *run);
    pthread_mutex_unlock(&job->mu);
    bool any = false;
    for (size_t i = 0; run && i < n && !any; i++)
        any = owned_here(job, run[i]) == 0;
    free(run);
    return any;
}

/* The local items, and those of the run the view shows as no one's (a
 * leader rewriting the instance nodes): the union, without repeats. An
 * item of the run that another instance owns now is not marked: its fire
 * times are its new owner's, who would re-run a mark of ours after every
 * one of its own runs. */
static int *items_to_mark(struct ej_job *job, const int *run, size_t nrun, size_t *n)
{
    struct ej__fire_request req = {.want = EJ__PLAN_WANT_OWN};
    struct ej__fire_plan plan;
    if (ej__coord_fire_plan(job->coord, &req, &plan) != 0)
        memset(&plan, 0, sizeof plan);
    int *local = plan.own; /* ours now */
    size_t nlocal = plan.nown;
    plan.own = NULL;
    ej__fire_plan_fini(&plan);
    int *all = malloc((nlocal + nrun + 1) * sizeof *all);
    if (all == NULL) {
        free(local);
        *n = 0;
        return NULL;
    }
    size_t k = 0;
    for (size_t i = 0; i < nlocal + nrun; i++) {
        int it = i < nlocal ? local[i] : run[i - nlocal];
        if (i >= nlocal && owned_here(job, it) < 0)
            continue;
        bool seen = false;
        for (size_t j = 0; j < k && !seen; j++)
            seen = all[j] == it;
        if (!seen)
            all[k++] = it;
    }
    free(local);
    *n = k;
    return all;
}

static void mark(struct ej_job *job, const int *items, size_t n, bool *marked)
{
    *marked = n == 0; /* nothing of this instance's to run: nothing lost */
    if (n == 0 || ej__running_set_misfire(job->coord, items, n) != 0)
        return;
    *marked = true;
    char *its = ej_event_items_string(items, n);
    EJ_LOG(EJ_LOG_INFO, MOD, 0,
           "job %s: fire missed while the job still runs: items %s run again (misfire) when done",
           job->name, its ? its : "");
    ej__rt_post_status(job, "", items, n, EJ_TASK_FINISHED,
                       "Previous job '%s' - shardingItems '%s' is still running, "
                       "misfired job will start after previous job completed.",
                       job->name, its ? its : "");
    free(its);
}

static void marker_work(void *user)
{
    struct marker *m = user;
    struct ej_job *job = m->job;
    pthread_mutex_lock(&job->mu);
    bool busy = job->firing && job->fire_gen == m->gen && job->state == EJ__JOB_STARTED &&
                job->misfire_window;
    const char *overlap = job->settings ? job->settings->cfg.overlap_policy : "QUEUE";
    bool skip = strcmp(overlap, "SKIP") == 0, replace = strcmp(overlap, "REPLACE") == 0;
    bool misfire =
        job->settings && (ej_job_config_misfire(&job->settings->cfg) || replace) && !skip;
    int *run = NULL;
    size_t nrun = 0;
    if (busy) {
        job->marker_inflight++;
        run = job->run_nitems ? malloc(job->run_nitems * sizeof *run) : NULL;
        if (run) {
            memcpy(run, job->run_items, job->run_nitems * sizeof *run);
            nrun = job->run_nitems;
        }
    }
    pthread_mutex_unlock(&job->mu);
    if (busy) {
        bool marked = !misfire; /* a job without misfire drops the fire (reported) */
        if (skip)
            ej__rt_not_run_overlap(job, m->due);
        if (replace) /* the old run ends now; the misfire loop starts the new one */
            ej__kill_items(job, -1, "overlapPolicy REPLACE");
        if (misfire) {
            size_t n = 0;
            int *items = items_to_mark(job, run, nrun, &n);
            if (items != NULL || n == 0)
                mark(job, items, n, &marked);
            free(items);
        }
        pthread_mutex_lock(&job->mu);
        if (marked) {
            if (job->misfire_handled_until < m->due)
                job->misfire_handled_until = m->due;
            job->misfire_marks++;
        }
        job->marker_inflight--;
        pthread_cond_broadcast(&job->cv);
        pthread_mutex_unlock(&job->mu);
        if (marked)
            ej__misfire_arm(job, m->gen, m->due);
    }
    free(run);
    ej__job_unref(job);
    free(m);
}

/* On the registry's dispatch thread: hand the work to a pool thread (it
 * writes to ZooKeeper, which must not hold up connection events). */
static void marker_task(ej_registry *reg, void *user)
{
    (void)reg;
    struct marker *m = user;
    if (ej__sched_post(m->job->sched, NULL, marker_work, m) != 0) {
        ej__job_unref(m->job);
        free(m);
    }
}

void ej__misfire_arm(struct ej_job *job, uint64_t gen, int64_t after)
{
    pthread_mutex_lock(&job->mu);
    int64_t next = 0;
    int64_t now = ej__now_ms();
    /* Fire times that passed while the process could not act (stopped,
     * starved) are one misfire, not one each. */
    if (after < now - 1000)
        after = now - 1000;
    bool ok = job->cron != NULL && ej_cron_next(job->cron, job->tz, after, &next) == 0;
    pthread_mutex_unlock(&job->mu);
    if (!ok)
        return;
    struct marker *m = malloc(sizeof *m);
    if (m == NULL)
        return;
    m->job = job;
    m->gen = gen;
    m->due = next;
    ej__job_ref(job);
    int64_t delay = next - now;
    if (delay < 0)
        delay = 0;
    /* A little after the fire time, so the scheduler's own view of the
     * missed fire is settled first. */
    if (ej_registry_post_after(job->reg, (int)(delay + 20), marker_task, m) != 0) {
        ej__job_unref(job);
        free(m);
    }
}

/* Why a mark on an item of ours stands for no run of ours, or NULL. */
static const char *stale_reason(const struct ej__view_item *it, bool misfire_on)
{
    if (it->misfire <= 0)
        return NULL;
    if (!misfire_on)
        return "misfire is off for this job";
    if (it->disabled > 0)
        return "the item is disabled";
    if (!it->misfire_mine)
        return "not this instance's: left by the item's previous owner, whose fire time it "
               "stood for; this fire runs the item";
    return NULL;
}

/* Clear the marks on items of ours that stand for no run of ours, saying
 * why, so that no misfire node outlives the run it stood for. Before the
 * window opens: no marker of this job is working then. */
static void clear_stale_marks(struct ej_job *job)
{
    pthread_mutex_lock(&job->mu);
    bool misfire_on = job->settings && job->settings->cfg.misfire;
    pthread_mutex_unlock(&job->mu);
    ej__view *v = ej__coord_view(job->coord);
    int *own = NULL;
    size_t n = 0;
    if (ej__view_items_of(v, ej__coord_instance_id(job->coord), &own, &n) != 0 || n == 0) {
        free(own);
        return;
    }
    for (int pass = 0; pass < 3; pass++) { /* one clear per reason */
        const char *why = NULL;
        size_t k = 0;
        int *stale = malloc(n * sizeof *stale);
        for (size_t i = 0; stale && i < n; i++) {
            struct ej__view_item it;
            if (ej__view_get(v, own[i], &it) != 0)
                continue;
            const char *r = stale_reason(&it, misfire_on);
            ej__view_item_fini(&it);
            if (r != NULL && (why == NULL || strcmp(r, why) == 0)) {
                why = r;
                stale[k++] = own[i];
            }
        }
        if (k > 0 && ej__running_clear_misfire(job->coord, stale, k) == 0) {
            char *its = ej_event_items_string(stale, k);
            EJ_LOG(EJ_LOG_INFO, MOD, 0, "job %s: misfire marks of items %s cleared: %s", job->name,
                   its ? its : "", why);
            free(its);
        }
        free(stale);
        if (k == 0)
            break;
    }
    free(own);
}

void ej__misfire_open(struct ej_job *job, const int *items, size_t n)
{
    clear_stale_marks(job);
    pthread_mutex_lock(&job->mu);
    free(job->run_items);
    job->run_items = n ? malloc(n * sizeof *items) : NULL;
    job->run_nitems = job->run_items ? n : 0;
    if (job->run_items)
        memcpy(job->run_items, items, n * sizeof *items);
    job->misfire_window = true;
    pthread_mutex_unlock(&job->mu);
}

uint64_t ej__misfire_marks(struct ej_job *job)
{
    pthread_mutex_lock(&job->mu);
    uint64_t marks = job->misfire_marks;
    pthread_mutex_unlock(&job->mu);
    return marks;
}

bool ej__misfire_close(struct ej_job *job, uint64_t marks_seen, bool force)
{
    pthread_mutex_lock(&job->mu);
    while (job->marker_inflight > 0)
        pthread_cond_wait(&job->cv, &job->mu);
    bool closed = force || job->misfire_marks == marks_seen;
    if (closed) {
        job->misfire_window = false;
        free(job->run_items);
        job->run_items = NULL;
        job->run_nitems = 0;
    }
    pthread_mutex_unlock(&job->mu);
    return closed;
}

/* ------------------------------------------------------------------------ */
/* The misfire loop                                                           */

/* The misfired items still this instance's (one that moved is its new
 * owner's to re-run: the misfire node stays with the item). 0: none. */
static size_t own_misfired(struct ej__coord *c, int **mis)
{
    struct ej__fire_request req = {.want = EJ__PLAN_WANT_MISFIRED};
    struct ej__fire_plan plan;
    *mis = NULL;
    if (ej__coord_fire_plan(c, &req, &plan) != 0)
        return 0;
    size_t n = plan.nmisfired;
    if (n > 0) { /* callers free *mis only when there is something in it */
        *mis = plan.misfired;
        plan.misfired = NULL;
    }
    ej__fire_plan_fini(&plan);
    return n;
}

/* ElasticJob's `while (isExecuteMisfired) { clearMisfire; execute(MISFIRE) }`
 * over every local item marked misfire (the markers above mark them all), until
 * none is left and no marker marked more meanwhile. */
void ej__misfire_loop_run(struct ej_job *job, const struct ej__rt_settings *s, bool abort_run)
{
    struct ej__coord *c = job->coord;
    bool stop = !ej_job_config_misfire(&s->cfg) || abort_run;
    int reshards = 0;
    for (int round = 0; !stop && round < 1000; round++) {
        uint64_t seen = ej__misfire_marks(job);
        int *mis = NULL;
        size_t k = own_misfired(c, &mis);
        if (k == 0 && ej__coord_necessary(c) && ej__misfire_run_unowned(job) &&
            ++reshards <= 3) {
            /* A leader is rewriting the instance nodes (Java 2.1.5's
             * deletes every one first): the marks of items briefly no
             * one's are looked at again once it is done. */
            if (ej__shard_if_necessary(c) != 0)
                break;
            continue;
        }
        if (k == 0) {
            if (ej__misfire_close(job, seen, false))
                return;
            continue; /* a marker marked after we looked */
        }
        pthread_mutex_lock(&job->mu);
        bool go = job->state == EJ__JOB_STARTED && !job->stopped;
        pthread_mutex_unlock(&job->mu);
        if (!go || !ej__coord_may_start(c, atomic_load(&job->fire_session)) ||
            atomic_load(&job->cancel)) {
            free(mis);
            break;
        }
        if (ej__coord_necessary(c)) {
            /* A resharding waits (an instance joined or left meanwhile):
             * do it first, as a fire's start would (the leader reshards
             * now that its items are done; a follower waits for it,
             * bounded), then re-run what is still ours. 2.1.5's
             * isEligibleForJobRunning gives up here and leaves the
             * re-runs to after the next fire's run, a period late, and
             * the leader reshards only at a fire's start: a run that
             * overruns its period then kept the job unsharded. */
            free(mis);
            if (++reshards > 3 || ej__shard_if_necessary(c) != 0)
                break;
            continue;
        }
        ej__running_clear_misfire(c, mis, k);
        size_t started = 0;
        stop = ej__rt_run_batch(job, s, mis, k, NULL, EJ_EXEC_MISFIRE, NULL, &started);
        free(mis);
        /* Nothing could start (running elsewhere: marked misfire again for
         * a later fire): stop here rather than spin. */
        if (started == 0)
            break;
    }
    ej__misfire_close(job, 0, true);
}
