/*
 * Failover (SPEC 4 "Failover"). When an instance's node disappears, the
 * items it was RUNNING -- those whose running or failover node its
 * session's close deleted, told by the children zxid of sharding/{n},
 * since those nodes vanish with the session -- are recorded under
 * leader/failover/items, under
 * leader/failover/latch. Idle items are left to the resharding at the next
 * fire. Live idle instances take recorded items one at a time; an idle
 * recorder takes one crashed item itself, under the latch it holds, in
 * place of its record (failover_take.c).
 *
 * Every instance may record (as every Java 2.1.5 instance does), so a
 * crash fails over whoever leads -- a Java leader that skips the crash
 * (EJ#669) included -- but one records at once (the first recorder) and
 * the others only after a session timeout, what the caches do not show
 * recorded or taken by then (a fleet's crash is recorded once, not by
 * every member in turn at the latch). The creates are idempotent, and an instance that sees the crash
 * late must not record an item again after another instance took it and
 * finished: under the latch, an item is recorded only while the children
 * zxid (pzxid) of sharding/{n} is still that of the crashed session's close
 * (taking an item creates sharding/{n}/failover, running it creates
 * sharding/{n}/running: either changes it).
 */
#include <inttypes.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "common/util.h"
#include "coord/failover_impl.h"
#include "coord/internal.h"
#include "ejob/config.h"
#include "ejob/error.h"
#include "ejob/log.h"

#define MOD "coord"
/* How long a crash not recorded yet (no session, latch not acquired) is
 * kept for another try. */
#define CRASH_MEMORY_MS 30000

_Atomic int ej__failover_check_faults;
_Atomic int ej__failover_retry_ms = CRASH_MEMORY_MS;

/* How long a departure's check or a crash's record is tried again. */
static int64_t retry_window_ms(void)
{
    return atomic_load(&ej__failover_retry_ms);
}

/* A crash whose items will not be failed over after all (its check or its
 * record could not be written in the retry window): a warning naming them,
 * and the job's "fire not run (failover-lost)" for them (ledger, metric,
 * alert), so that the run the crash cut short is not lost silently. Not
 * under s->mu: the hook reaches the job runtime. */
static void tell_lost(ej__coord *c, const char *id, int64_t at_ms, const int *items, size_t n,
                      const char *what, int rc)
{
    ej_buf list;
    ej__buf_init(&list);
    for (size_t i = 0; i < n; i++)
        ej__buf_printf(&list, "%s%d", i ? "," : "", items[i]);
    EJ_LOG(EJ_LOG_WARN, MOD, rc,
           "job %s: instance %s left %" PRId64 " ms ago and %s since: items [%s] are not failed "
           "over (they run at their next fire)",
           ej__coord_job_name(c), id, ej__now_ms() - at_ms, what, list.data ? list.data : "");
    ej__buf_fini(&list);
    ej__coord_tell_failover_lost(c, items, n, at_ms);
}

struct ej__failover_state *ej__failover_state_new(void)
{
    struct ej__failover_state *s = calloc(1, sizeof *s);
    if (s)
        pthread_mutex_init(&s->mu, NULL);
    return s;
}

void ej__failover_state_free(struct ej__failover_state *s)
{
    if (s == NULL)
        return;
    for (size_t i = 0; i < s->ncrash; i++) {
        free(s->crashes[i].id);
        free(s->crashes[i].items);
    }
    free(s->crashes);
    for (size_t i = 0; i < s->nchecks; i++) {
        free(s->checks[i].id);
        free(s->checks[i].cand);
    }
    free(s->checks);
    free(s->mine);
    ej__latch_wait_put(s->inflight_wait);
    pthread_mutex_destroy(&s->mu);
    free(s);
}

static void crash_task(ej__coord *c, void *arg)
{
    EJ_ASSERT_SERIAL(c);
    (void)arg;
    ej__failover_process_pending(c);
}

/*
 * The zxid of the close of the departed instance's session, or 0 when no
 * session of it has closed (it left cleanly: its session's node is still
 * there), from the stats of its container (box) and of instances/ (inst;
 * ex*: whether each exists). An ejob instance holds
 * ejob/members/{id}/{session} (membership.c), which nothing but the close
 * deletes, in a container of its own: the container's children zxid is
 * that close, whatever other instances' sessions closed after it. Java
 * instances, ejob instances older than the container, and a container the
 * server already removed (a minute after it emptied) fall back on
 * instances/: its children zxid is the close of the last session that
 * closed, which is this one's only when no other closed since.
 */
static int64_t session_close_zxid(bool exbox, const struct ej_node_stat *box, bool exinst,
                                  const struct ej_node_stat *inst)
{
    if (exbox && box->num_children > 0)
        return 0; /* live is there: the session did not close */
    if (exbox && box->cversion >= 2)
        return box->pzxid; /* live was created, then closed with it */
    return exinst ? inst->pzxid : 0;
}

/*
 * The items the departed instance (id) was running when its session
 * closed. Candidates (cand, taken) are the items the view shows it may
 * have run (ej__view_departed_items: assigned to it, or run as failover).
 * Their running and failover nodes, if it ran them, vanished in the
 * session's close transaction, so the children zxid (pzxid) of
 * sharding/{item} is that close's zxid -- unless the instance deleted them
 * itself before leaving cleanly, which leaves earlier zxids and nothing to
 * fail over; an idle item's is older too. The container, instances/ and
 * the candidates' sharding/{item} are read together: one round trip, where
 * one read after the other was 2 or more on the way from a crash to its
 * failover.
 */
static int crashed_items(ej__coord *c, const char *id, const int *cand, size_t n, int **out,
                         size_t *nout, int64_t *close_zxid)
{
    *out = NULL;
    *nout = 0;
    *close_zxid = 0;
    const char *job = ej__coord_job_name(c);
    if (n == 0)
        return 0;
    int faults = atomic_load(&ej__failover_check_faults);
    while (faults > 0 &&
           !atomic_compare_exchange_weak(&ej__failover_check_faults, &faults, faults - 1)) {
    }
    if (faults > 0)
        return EJ_ECONNLOSS;
    struct ej_reg_read *rd = calloc(n + 2, sizeof *rd);
    int *kept = malloc(n * sizeof *kept);
    int rc = rd && kept ? 0 : EJ_ENOMEM;
    if (rc == 0) {
        rd[0].path = ej_layout_path_dup(job, EJ_LAYOUT_NODE_EJOB_MEMBER, 0, id);
        rd[1].path = ej_layout_path_dup(job, EJ_LAYOUT_NODE_INSTANCES, 0, NULL);
        for (size_t i = 0; i < n; i++)
            rd[i + 2].path = ej_layout_path_dup(job, EJ_LAYOUT_NODE_ITEM, cand[i], NULL);
        for (size_t i = 0; i < n + 2 && rc == 0; i++)
            rc = rd[i].path ? 0 : EJ_ENOMEM;
    }
    if (rc == 0)
        rc = ej_registry_read_many(ej__coord_registry(c), rd, n + 2, false);
    for (size_t i = 0; rc == 0 && i < 2; i++)
        if (rd[i].result != 0 && rd[i].result != EJ_ENONODE)
            rc = rd[i].result;
    int64_t closed_at = rc == 0 ? session_close_zxid(rd[0].result == 0, &rd[0].stat,
                                                     rd[1].result == 0, &rd[1].stat)
                                : 0;
    size_t k = 0;
    for (size_t i = 0; closed_at != 0 && i < n; i++)
        if (rd[i + 2].result == 0 && rd[i + 2].stat.pzxid == closed_at)
            kept[k++] = cand[i];
    for (size_t i = 0; rd != NULL && i < n + 2; i++)
        free((char *)rd[i].path);
    free(rd);
    if (k == 0) {
        free(kept);
        return rc;
    }
    *out = kept;
    *nout = k;
    *close_zxid = closed_at;
    return 0;
}

/* Adds a crash to the records (takes items). */
static void add_crash(struct ej__failover_state *s, const char *id, int64_t at_ms, int *items,
                      size_t nitems, int64_t close_zxid)
{
    pthread_mutex_lock(&s->mu);
    if (s->ncrash == s->capcrash) {
        size_t nc = s->capcrash ? s->capcrash * 2 : 4;
        struct crash *n = realloc(s->crashes, nc * sizeof *n);
        if (n == NULL) {
            pthread_mutex_unlock(&s->mu);
            free(items);
            return;
        }
        s->crashes = n;
        s->capcrash = nc;
    }
    char *dup = strdup(id);
    if (dup == NULL) {
        pthread_mutex_unlock(&s->mu);
        free(items);
        return;
    }
    s->crashes[s->ncrash++] = (struct crash){dup, at_ms, items, nitems, close_zxid};
    pthread_mutex_unlock(&s->mu);
}

/* Checks a departure in ZooKeeper, and adds its crash to the records when
 * it crashed while running items. 1 added, 0 nothing to fail over, or the
 * error that kept the check from being read. */
static int check_departure(ej__coord *c, struct ej__failover_state *s, const char *id,
                           int64_t at_ms, const int *cand, size_t ncand)
{
    int *items = NULL;
    size_t nitems = 0;
    int64_t close_zxid = 0;
    int rc = crashed_items(c, id, cand, ncand, &items, &nitems, &close_zxid);
    if (rc != 0 || nitems == 0) {
        free(items);
        return rc < 0 ? rc : 0;
    }
    add_crash(s, id, at_ms, items, nitems, close_zxid);
    return 1;
}

/* Keeps a departure whose check could not be read for another try (takes
 * cand); true when kept, false when too old (then told, and freed). */
static bool keep_check(ej__coord *c, struct ej__failover_state *s, char *id, int64_t at_ms,
                       int *cand, size_t n, int rc)
{
    if (ej__now_ms() - at_ms > retry_window_ms()) {
        /* Its candidates: what it may have been running. */
        tell_lost(c, id, at_ms, cand, n, "what it was running could not be read from ZooKeeper",
                  rc);
        free(id);
        free(cand);
        return false;
    }
    pthread_mutex_lock(&s->mu);
    if (s->nchecks == s->capchecks) {
        size_t nc = s->capchecks ? s->capchecks * 2 : 4;
        struct departure_check *p = realloc(s->checks, nc * sizeof *p);
        if (p != NULL) {
            s->checks = p;
            s->capchecks = nc;
        }
    }
    bool kept = s->nchecks < s->capchecks;
    if (kept)
        s->checks[s->nchecks++] = (struct departure_check){id, at_ms, cand, n};
    pthread_mutex_unlock(&s->mu);
    if (!kept) {
        free(id);
        free(cand);
    }
    return kept;
}

#define CHECK_RETRY_MS 500

/* The departures whose check could not be read: read again (serial
 * queue). */
static void recheck_departures(ej__coord *c, struct ej__failover_state *s)
{
    pthread_mutex_lock(&s->mu);
    struct departure_check *all = s->checks;
    size_t n = s->nchecks;
    s->checks = NULL;
    s->nchecks = s->capchecks = 0;
    pthread_mutex_unlock(&s->mu);
    bool again = false;
    for (size_t i = 0; i < n; i++) {
        struct departure_check *d = &all[i];
        int rc = check_departure(c, s, d->id, d->at_ms, d->cand, d->n);
        if (rc >= 0) {
            if (rc > 0)
                EJ_LOG(EJ_LOG_INFO, MOD, 0,
                       "job %s: what instance %s was running when it left read at last",
                       ej__coord_job_name(c), d->id);
            free(d->id);
            free(d->cand);
        } else {
            again |= keep_check(c, s, d->id, d->at_ms, d->cand, d->n, rc);
        }
    }
    free(all);
    if (again && !ej__coord_stopped(c))
        ej__coord_post_after(c, CHECK_RETRY_MS, crash_task, NULL);
}

void ej__failover_on_instance_removed(ej__coord *c, const char *id, int64_t at_ms, int *cand,
                                      size_t ncand)
{
    EJ_ASSERT_SERIAL(c);
    struct ej__failover_state *s = ej__coord_failover_state(c);
    if (s == NULL || !ej__coord_failover_on(c)) {
        free(cand);
        return;
    }
    int rc = check_departure(c, s, id, at_ms, cand, ncand);
    if (rc < 0) {
        /* Not forgotten: a member that cannot read now (ZooKeeper out of
         * reach past the registry's retries) is often the only one left
         * to record the crash. */
        EJ_LOG(EJ_LOG_WARN, MOD, rc,
               "job %s: cannot read what instance %s was running when it left: %s; will retry",
               ej__coord_job_name(c), id, ej_registry_errmsg(ej__coord_registry(c)));
        char *dup = strdup(id);
        if (dup != NULL && keep_check(c, s, dup, at_ms, cand, ncand, rc) &&
            !ej__coord_stopped(c))
            ej__coord_post_after(c, CHECK_RETRY_MS, crash_task, NULL);
        else if (dup == NULL)
            free(cand);
        return;
    }
    free(cand);
    if (rc == 0) { /* idle, or left cleanly: the resharding moves its items */
        ej__failover_recorder_changed(c);
        return;
    }
    /* At once, not in a task of its own: that task would wait behind
     * everything queued meanwhile (a burst of departures brings each
     * member of the job its events, the flag for the resharding, an
     * election), seconds in a loaded fleet. A recording already under way
     * takes this one up when it ends. */
    ej__failover_process_pending(c);
}

void ej__failover_recorder_changed(ej__coord *c)
{
    struct ej__failover_state *s = ej__coord_failover_state(c);
    if (s == NULL)
        return;
    pthread_mutex_lock(&s->mu);
    bool any = s->ncrash > 0;
    pthread_mutex_unlock(&s->mu);
    if (any)
        ej__coord_post(c, crash_task, NULL);
}

/* The sharding/{n} paths of the crashes' items, read behind the failover
 * latch's first create and look (ej__latch_acquire_async_r): when the
 * latch is free, the check below costs no round trip of its own (on the
 * way from a crash to its failover, 300 ms each in a fleet's expiry
 * burst). NULL with *n 0 when there is no memory: read under the latch. */
static char **item_paths(ej__coord *c, const struct crash *cr, size_t ncr, size_t *n)
{
    size_t k = 0;
    for (size_t i = 0; i < ncr; i++)
        k += cr[i].n;
    char **paths = k ? calloc(k, sizeof *paths) : NULL;
    *n = 0;
    for (size_t i = 0; paths != NULL && i < ncr; i++)
        for (size_t j = 0; j < cr[i].n; j++) {
            paths[*n] = ej_layout_path_dup(ej__coord_job_name(c), EJ_LAYOUT_NODE_ITEM,
                                           cr[i].items[j], NULL);
            if (paths[*n] != NULL)
                (*n)++;
        }
    return paths;
}

/* Still the state the crash left? (under the failover latch; from the
 * reads made behind its acquisition when they were made holding it) */
static bool item_untouched_since(ej__coord *c, const ej__latch *latch, int item,
                                 int64_t close_zxid)
{
    char *p = ej_layout_path_dup(ej__coord_job_name(c), EJ_LAYOUT_NODE_ITEM, item, NULL);
    if (p == NULL)
        return false;
    const struct ej_reg_read *pre = NULL;
    size_t npre = 0;
    ej__latch_first_reads(latch, &pre, &npre);
    for (size_t i = 0; i < npre; i++)
        if (strcmp(pre[i].path, p) == 0 && (pre[i].result == 0 || pre[i].result == EJ_ENONODE)) {
            free(p);
            return pre[i].result == 0 && pre[i].stat.pzxid == close_zxid;
        }
    struct ej_node_stat st;
    bool e = false;
    bool same = ej_registry_exists(ej__coord_registry(c), p, &e, &st) == 0 && e &&
                st.pzxid == close_zxid;
    free(p);
    return same;
}

static bool item_handled(ej__coord *c, int item, int64_t close_zxid);

/* Of the crashed items still as their crash left them, the one an idle
 * recorder takes itself: the greatest as a string (Java's order of
 * takes), or -1. Its sharding/{n} is checked again by the caller. */
static int item_to_take(ej__coord *c, const struct crash *cr, size_t ncr)
{
    if (ej__coord_busy(c) || !ej__failover_may_take(c))
        return -1;
    int count = ej__coord_total_count(c);
    int best = -1;
    char bs[16] = "", s[16];
    for (size_t k = 0; k < ncr; k++)
        for (size_t i = 0; i < cr[k].n; i++) {
            int item = cr[k].items[i];
            snprintf(s, sizeof s, "%d", item);
            if (item < count && strcmp(s, bs) > 0 && !item_handled(c, item, cr[k].close_zxid)) {
                best = item;
                memcpy(bs, s, sizeof bs);
            }
        }
    return best;
}

/* Record the items of crashed instances (under the failover latch). An
 * item the caches show recorded or taken costs no request: a turn at the
 * latch after another recorder's is then over at once. An idle recorder
 * takes one item itself instead of recording it (*taken, else -1): a
 * record wakes every member of the job to queue at the latch for it, the
 * recorder among them (in a loaded fleet 1.5 s from record to take at the
 * median, and most of the latch's contenders). */
static void record_latched(ej__coord *c, const ej__latch *latch, const struct crash *cr,
                           size_t ncr, int *taken)
{
    ej_registry *reg = ej__coord_registry(c);
    const char *job = ej__coord_job_name(c);
    int count = ej__coord_total_count(c);
    int take = item_to_take(c, cr, ncr);
    *taken = -1;
    for (size_t k = 0; k < ncr; k++) {
        size_t nrec = 0, nalready = 0;
        ej_buf list;
        ej__buf_init(&list);
        for (size_t i = 0; i < cr[k].n; i++) {
            int item = cr[k].items[i];
            if (item >= count)
                continue;
            if (item_handled(c, item, cr[k].close_zxid) ||
                !item_untouched_since(c, latch, item, cr[k].close_zxid))
                continue;
            int crc = EJ_ENOMEM;
            if (item == take && *taken < 0 && ej__failover_take_crashed(c, item) == 1) {
                *taken = item;
                crc = 0;
            } else {
                char *p = ej_layout_path_dup(job, EJ_LAYOUT_NODE_FAILOVER_ITEM, item, NULL);
                if (p != NULL)
                    crc = ej_registry_create_node(reg, p, NULL, 0, EJ_REG_PERSISTENT,
                                                  EJ_REG_CREATE_PARENTS, NULL);
                free(p);
            }
            if (crc == 0) {
                ej__buf_printf(&list, "%s%d", nrec ? "," : "", item);
                nrec++;
            } else if (crc == EJ_ENODEEXISTS) { /* the caches had not shown it yet */
                nalready++;
            } else {
                EJ_LOG(EJ_LOG_WARN, MOD, crc, "job %s: cannot record failover item %d: %s", job,
                       item, ej_registry_errmsg(reg));
            }
        }
        if (nrec)
            EJ_LOG(EJ_LOG_INFO, MOD, 0,
                   "job %s: instance %s is gone while running items [%s]: failing them over "
                   "(seen gone %" PRId64 " ms ago)",
                   job, cr[k].id, list.data ? list.data : "", ej__now_ms() - cr[k].at_ms);
        else if (nalready)
            EJ_LOG(EJ_LOG_INFO, MOD, 0,
                   "job %s: instance %s is gone; its items were recorded already by another "
                   "instance", job, cr[k].id);
        else
            EJ_LOG(EJ_LOG_DEBUG, MOD, 0,
                   "job %s: instance %s is gone; no item of it to fail over (idle, or taken "
                   "already; its items move at the next resharding)",
                   job, cr[k].id);
        ej__buf_fini(&list);
    }
}

static void free_crashes(struct crash *cr, size_t n)
{
    for (size_t i = 0; i < n; i++) {
        free(cr[i].id);
        free(cr[i].items);
    }
    free(cr);
}

/* Records and checks taken out of the state for good. */
struct expired {
    struct crash *crashes;
    size_t ncrash;
    struct departure_check *checks;
    size_t nchecks;
};

/* Takes out the records and checks of departures seen before `before`
 * (all with INT64_MAX). s->mu held. */
static struct expired take_expired(struct ej__failover_state *s, int64_t before)
{
    struct expired x = {0};
    x.crashes = s->ncrash ? malloc(s->ncrash * sizeof *x.crashes) : NULL;
    x.checks = s->nchecks ? malloc(s->nchecks * sizeof *x.checks) : NULL;
    size_t j = 0;
    for (size_t i = 0; i < s->ncrash; i++) {
        struct crash *cr = &s->crashes[i];
        if (cr->at_ms >= before)
            s->crashes[j++] = *cr;
        else if (x.crashes != NULL)
            x.crashes[x.ncrash++] = *cr;
        else
            free(cr->id), free(cr->items);
    }
    s->ncrash = j;
    j = 0;
    for (size_t i = 0; i < s->nchecks; i++) {
        struct departure_check *d = &s->checks[i];
        if (d->at_ms >= before)
            s->checks[j++] = *d;
        else if (x.checks != NULL)
            x.checks[x.nchecks++] = *d;
        else
            free(d->id), free(d->cand);
    }
    s->nchecks = j;
    return x;
}

/* Tells (when tell) and frees what take_expired took. */
static void tell_expired(ej__coord *c, struct expired *x, bool tell)
{
    for (size_t i = 0; tell && i < x->ncrash; i++)
        tell_lost(c, x->crashes[i].id, x->crashes[i].at_ms, x->crashes[i].items, x->crashes[i].n,
                  "its running items could not be recorded for failover", 0);
    free_crashes(x->crashes, x->ncrash);
    for (size_t i = 0; i < x->nchecks; i++) {
        struct departure_check *d = &x->checks[i];
        if (tell)
            tell_lost(c, d->id, d->at_ms, d->cand, d->n,
                      "what it was running could not be read from ZooKeeper", 0);
        free(d->id);
        free(d->cand);
    }
    free(x->checks);
}

/* Keep a record for another try, for a while: true when kept, false when
 * too old or no memory (then the caller still holds it). s->mu held. */
static bool keep_one(struct ej__failover_state *s, struct crash *cr, int64_t now)
{
    bool young = now - cr->at_ms <= retry_window_ms();
    if (young && s->ncrash == s->capcrash) {
        size_t nc = s->capcrash ? s->capcrash * 2 : 4;
        struct crash *p = realloc(s->crashes, nc * sizeof *p);
        if (p != NULL) {
            s->crashes = p;
            s->capcrash = nc;
        }
    }
    if (young && s->ncrash < s->capcrash) {
        s->crashes[s->ncrash++] = *cr;
        return true;
    }
    return false;
}

/* Keep records that could not be written for another try; those too old
 * are told lost (rc: why the last try failed). Frees cr. */
static void keep_for_retry(ej__coord *c, struct ej__failover_state *s, struct crash *cr, size_t n,
                           int64_t now, int rc)
{
    size_t lost = 0;
    pthread_mutex_lock(&s->mu);
    for (size_t i = 0; i < n; i++)
        if (!keep_one(s, &cr[i], now))
            cr[lost++] = cr[i];
    pthread_mutex_unlock(&s->mu);
    for (size_t i = 0; i < lost; i++)
        tell_lost(c, cr[i].id, cr[i].at_ms, cr[i].items, cr[i].n,
                  "its running items could not be recorded for failover", rc);
    free_crashes(cr, lost);
}

struct pending_record {
    ej__coord *c;
    struct crash *cr;
    size_t n;
    int64_t now;
};

/* The failover latch's answer (ej__latch_acquire_async): on the serial
 * queue, or (the coordinator closed) on the dispatch thread, which only
 * lets go. */
static void record_done(void *arg, ej__latch *latch, int rc)
{
    struct pending_record *r = arg;
    ej__coord *c = r->c;
    struct ej__failover_state *s = ej__coord_failover_state(c);
    pthread_mutex_lock(&s->mu);
    ej__latch_wait *w = s->inflight == r ? s->inflight_wait : NULL;
    if (s->inflight == r) {
        s->inflight = NULL;
        s->inflight_wait = NULL;
    }
    bool more = s->ncrash > 0;
    pthread_mutex_unlock(&s->mu);
    ej__latch_wait_put(w);
    if (!ej__coord_on_serial(c)) {
        free_crashes(r->cr, r->n);
    } else if (rc == EJ_EAGAIN) {
        /* Cancelled: another instance recorded or took every item. */
        free_crashes(r->cr, r->n);
        if (more && !ej__coord_stopped(c))
            ej__coord_post(c, crash_task, NULL);
    } else if (latch != NULL) {
        int taken = -1;
        record_latched(c, latch, r->cr, r->n, &taken);
        ej__latch_release(latch);
        if (taken >= 0)
            ej__failover_took(c, taken);
        free_crashes(r->cr, r->n);
        if (more && !ej__coord_stopped(c))
            ej__coord_post(c, crash_task, NULL);
    } else {
        EJ_LOG(EJ_LOG_WARN, MOD, rc, "job %s: failover items not recorded; will retry",
               ej__coord_job_name(c));
        keep_for_retry(c, ej__coord_failover_state(c), r->cr, r->n, r->now, rc);
        /* Another try a little later (no busy loop on errors, no sleep on
         * the queue). */
        if (!ej__coord_stopped(c))
            ej__coord_post_after(c, 200, crash_task, NULL);
    }
    free(r);
    ej__coord_release(c);
}

/* Does this instance record the crash of crashed_id as soon as it sees
 * it? The leader does; when the leader is the crashed instance (its node
 * may still be in the leader cache: the two caches learn of the close one
 * after the other), or no live leader is known, the first available
 * instance other than the crashed one, in ElasticJob order. The others
 * wait (defer_or_prune). */
static bool records_first(ej__coord *c, const char *crashed_id)
{
    char *leader = ej__coord_leader_id(c, NULL);
    bool leader_live = leader != NULL && strcmp(leader, crashed_id) != 0 &&
                       ej__coord_instance_listed(c, leader);
    bool me = leader != NULL && strcmp(leader, ej__coord_instance_id(c)) == 0;
    free(leader);
    if (leader_live)
        return me;
    char **ids = NULL;
    size_t n = 0;
    bool first = false;
    if (ej__coord_available_instances(c, &ids, &n) == 0)
        for (size_t i = 0; i < n; i++)
            if (strcmp(ids[i], crashed_id) != 0) {
                first = strcmp(ids[i], ej__coord_instance_id(c)) == 0;
                break;
            }
    ej_registry_free_names(ids);
    return first;
}

/* Recorded or taken already, as the caches show it? */
static bool item_handled(ej__coord *c, int item, int64_t close_zxid)
{
    struct ej__view_item it;
    bool taken = false;
    if (ej__view_get(ej__coord_view(c), item, &it) == 0) {
        /* A failover node made after the crash, there still or gone since
         * (its run ended): taken over since. Its creation moved the pzxid
         * of sharding/{n}, so the check under the latch would refuse the
         * item anyway; known from the view, it costs the instances that
         * deferred to the first recorder no turn at the latch (a
         * departure's every member but one: 5 requests each a job). */
        taken = it.failover_last_czxid > close_zxid;
        ej__view_item_fini(&it);
    }
    char *p = ej_layout_path_dup(ej__coord_job_name(c), EJ_LAYOUT_NODE_FAILOVER_ITEM, item, NULL);
    bool recorded = p && ej_tree_cache_exists(ej__coord_cache(c, "leader"), p, NULL);
    free(p);
    return taken || recorded;
}

/* The instances other than the first recorder give it a session timeout
 * (at least FAILOVER_DEFER_MIN_MS), then record only the items nobody
 * recorded or took meanwhile. Every instance recording at once would queue
 * a job's N instances on the failover latch one after the other, with the
 * instances that take the items over waiting behind them (a loaded
 * member's turn at the latch waits for its queue: seconds in a fleet);
 * deferred, they still record when the first one could not (it died too,
 * or lost its session). Keeps back in s the records whose time has not
 * come (and asks for a task then), drops the handled items, and leaves in
 * *cr what to record now. */
#define FAILOVER_DEFER_MIN_MS 1500

static int64_t defer_ms(ej__coord *c)
{
    int t = ej_registry_negotiated_timeout_ms(ej__coord_registry(c));
    return t > FAILOVER_DEFER_MIN_MS ? t : FAILOVER_DEFER_MIN_MS;
}

static void defer_or_prune(ej__coord *c, struct ej__failover_state *s, struct crash **cr,
                           size_t *n, int64_t now)
{
    struct crash *all = *cr;
    size_t k = 0;
    int64_t next = 0, defer = defer_ms(c);
    for (size_t i = 0; i < *n; i++) {
        struct crash *x = &all[i];
        if (records_first(c, x->id)) {
            all[k++] = *x;
            continue;
        }
        if (now - x->at_ms < defer) {
            int64_t due = x->at_ms + defer - now;
            next = next == 0 || due < next ? due : next;
            pthread_mutex_lock(&s->mu);
            bool kept = keep_one(s, x, now);
            pthread_mutex_unlock(&s->mu);
            if (!kept) { /* no memory: deferred no more */
                free(x->id);
                free(x->items);
            }
            continue;
        }
        size_t m = 0;
        for (size_t j = 0; j < x->n; j++)
            if (!item_handled(c, x->items[j], x->close_zxid))
                x->items[m++] = x->items[j];
        x->n = m;
        if (m == 0) {
            free(x->id);
            free(x->items);
            continue;
        }
        all[k++] = *x;
    }
    *n = k;
    if (next > 0 && !ej__coord_stopped(c))
        ej__coord_post_after(c, (int)next, crash_task, NULL);
}

/* Record the crashes seen so far (the first recorder at once, the others
 * later: defer_or_prune), under leader/failover/latch, whose wait is a
 * watch: the queue goes on meanwhile and record_done runs when the latch
 * is ours. */
void ej__failover_process_pending(ej__coord *c)
{
    EJ_ASSERT_SERIAL(c);
    struct ej__failover_state *s = ej__coord_failover_state(c);
    if (s == NULL)
        return;
    bool failover = ej__coord_failover_on(c);
    bool go = failover && !ej__coord_stopped(c) && ej__coord_registered(c);
    if (go)
        recheck_departures(c, s);
    int64_t now = ej__now_ms();
    pthread_mutex_lock(&s->mu);
    if (go && s->inflight != NULL) {
        /* One recording at a time: its end asks for another task. */
        pthread_mutex_unlock(&s->mu);
        return;
    }
    struct crash *mine = NULL;
    size_t nmine = 0;
    struct expired old = {0};
    if (go) {
        mine = s->crashes;
        nmine = s->ncrash;
        s->crashes = NULL;
        s->ncrash = s->capcrash = 0;
    } else {
        /* Not now (e.g. between sessions): keep records a while. */
        old = take_expired(s, failover ? now - retry_window_ms() : INT64_MAX);
    }
    /* Departures to check again once registered (no request meanwhile). */
    bool recheck = !go && s->nchecks > 0;
    pthread_mutex_unlock(&s->mu);
    tell_expired(c, &old, failover && !ej__coord_stopped(c));
    if (recheck && !ej__coord_stopped(c))
        ej__coord_post_after(c, CHECK_RETRY_MS, crash_task, NULL);
    if (nmine > 0)
        defer_or_prune(c, s, &mine, &nmine, now);
    if (nmine == 0) {
        free(mine);
        return;
    }
    struct pending_record *r = malloc(sizeof *r);
    char *latch_path =
        ej_layout_path_dup(ej__coord_job_name(c), EJ_LAYOUT_NODE_FAILOVER_LATCH, 0, NULL);
    int rc = EJ_ENOMEM;
    if (r != NULL && latch_path != NULL) {
        *r = (struct pending_record){ej__coord_hold(c), mine, nmine, now};
        /* In flight before the first step: its result is posted, so it
         * cannot come before this is set. */
        pthread_mutex_lock(&s->mu);
        s->inflight = r;
        pthread_mutex_unlock(&s->mu);
        ej__latch_wait *w = NULL;
        size_t nread = 0;
        char **reads = item_paths(c, mine, nmine, &nread);
        rc = ej__latch_acquire_async_r(ej__coord_registry(c), latch_path, ej__coord_wait_bound(c),
                                       ej__coord_latch_post, c, record_done, r, &w, reads, nread);
        pthread_mutex_lock(&s->mu);
        if (rc != 0)
            s->inflight = NULL;
        else if (s->inflight == r)
            s->inflight_wait = w, w = NULL;
        pthread_mutex_unlock(&s->mu);
        ej__latch_wait_put(w);
        if (rc != 0)
            ej__coord_release(c);
    }
    free(latch_path);
    if (rc != 0) {
        free(r);
        EJ_LOG(EJ_LOG_WARN, MOD, rc, "job %s: failover items not recorded; will retry",
               ej__coord_job_name(c));
        keep_for_retry(c, s, mine, nmine, now, rc);
        if (!ej__coord_stopped(c))
            ej__coord_post_after(c, 200, crash_task, NULL);
    }
}

void ej__failover_items_changed(ej__coord *c)
{
    EJ_ASSERT_SERIAL(c);
    struct ej__failover_state *s = ej__coord_failover_state(c);
    if (s == NULL)
        return;
    pthread_mutex_lock(&s->mu);
    struct pending_record *r = s->inflight;
    bool handled = r != NULL && s->inflight_wait != NULL;
    for (size_t k = 0; handled && k < r->n; k++)
        for (size_t i = 0; handled && i < r->cr[k].n; i++)
            handled = item_handled(c, r->cr[k].items[i], r->cr[k].close_zxid);
    ej__latch_wait *w = NULL;
    if (handled) {
        w = s->inflight_wait;
        s->inflight_wait = NULL;
    }
    pthread_mutex_unlock(&s->mu);
    /* Outside the lock: a cancel refused by a closing queue ends the
     * acquisition here, in record_done, which takes it. */
    ej__latch_wait_cancel(w);
    ej__latch_wait_put(w);
}
