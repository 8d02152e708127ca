/* BALANCED: spread items over instances counting the items each instance
 * holds of every BALANCED job of the namespace (or a load given by the
 * caller), moving few items when instances come and go.
 *
 * A plan places the items of a list of jobs (in job-name order, items in
 * ascending order) on the union of their instances:
 *
 *  1. Capacities: the water level M is the lowest total any assignment can
 *     reach: the smallest M with sum(max(0, M - base_i)) >= items to place
 *     (base_i: a load that stays where it is). Instances below M - 1 are
 *     filled up to M - 1, and the R items left give +1 to R instances at
 *     M - 1: first those that owned more items before (so fewer move), then
 *     in preference order. Totals then differ by at most one between
 *     instances that run the same jobs.
 *  2. Keep: an item stays with its previous owner while that instance is
 *     one of the job's instances, is under its capacity, and holds fewer
 *     than ceil(items / instances) of this job (a job still spreads over its
 *     instances; not applied when the caller gives a load).
 *  3. Fill: every other item goes to the job's instance that is under its
 *     capacity, then holds fewer than that share of the job, then owned the
 *     item before, then has the lowest total, then comes first in the job's
 *     preference order.
 *
 * Preference order: by a hash of (job name, instance id), then by id
 * (rendezvous hashing). Without a load (a caller that cannot read the
 * namespace) one-item jobs then spread over instances instead of all
 * landing on the same one. Everything depends on the set of jobs and
 * instances, never on the order they are given in, and a plan applied and
 * computed again gives the same plan. */
#include <limits.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "ejob/error.h"
#include "ejob/sharding.h"
#include "sharding/internal.h"

struct id_ref {
    const char *id;
    size_t idx;
};

static int by_id(const void *a, const void *b)
{
    const struct id_ref *x = a, *y = b;
    int c = strcmp(x->id, y->id);
    return c ? c : (x->idx > y->idx) - (x->idx < y->idx);
}

/* Index of id in sorted refs, or -1. */
static long find_id(const struct id_ref *refs, size_t n, const char *id)
{
    size_t lo = 0, hi = n;
    while (lo < hi) {
        size_t mid = lo + (hi - lo) / 2;
        int c = strcmp(refs[mid].id, id);
        if (c == 0)
            return (long)mid;
        if (c < 0)
            lo = mid + 1;
        else
            hi = mid;
    }
    return -1;
}

/* The lowest level M with sum(max(0, M - base_i)) >= total (total >= 1). */
static long water_level(const long *base, size_t n, long total)
{
    long lo = LONG_MAX;
    for (size_t i = 0; i < n; i++)
        if (base[i] < lo)
            lo = base[i];
    long a = lo + 1, b = lo + total; /* the sum at b is >= total */
    while (a < b) {
        long m = a + (b - a) / 2;
        long sum = 0;
        for (size_t i = 0; i < n && sum < total; i++)
            if (m > base[i])
                sum += m - base[i];
        if (sum >= total)
            b = m;
        else
            a = m + 1;
    }
    return a;
}

struct pref {
    uint64_t hash;
    const char *id;
    size_t idx;
};

static int by_pref(const void *a, const void *b)
{
    const struct pref *x = a, *y = b;
    if (x->hash != y->hash)
        return x->hash < y->hash ? -1 : 1;
    int c = strcmp(x->id, y->id);
    return c ? c : (x->idx > y->idx) - (x->idx < y->idx);
}

/* rank[i]: position of instance i in the job's preference order. */
static int preference_ranks(const char *const *instances, size_t n, const char *job_name,
                            size_t *rank)
{
    struct pref *p = malloc(n * sizeof *p);
    if (p == NULL)
        return EJ_ENOMEM;
    uint64_t job_h = ej__sharding_fnv_more(EJ__FNV64_OFFSET, job_name, strlen(job_name));
    for (size_t i = 0; i < n; i++) {
        uint64_t h = ej__sharding_fnv_more(job_h, "\0", 1);
        h = ej__sharding_fnv_more(h, instances[i], strlen(instances[i]));
        p[i] = (struct pref){ej__sharding_mix64(h), instances[i], i};
    }
    qsort(p, n, sizeof *p, by_pref);
    for (size_t r = 0; r < n; r++)
        rank[p[r].idx] = r;
    free(p);
    return 0;
}

struct extra {
    long prio; /* items kept above the base count if chosen */
    size_t rank;
    size_t idx;
};

static int by_prio(const void *a, const void *b)
{
    const struct extra *x = a, *y = b;
    if (x->prio != y->prio)
        return x->prio > y->prio ? -1 : 1;
    return (x->rank > y->rank) - (x->rank < y->rank);
}

/* Step 1: cap[i] = base[i] + the items instance i takes (total >= 1). */
static int capacities(const long *base, size_t n, long total, const size_t *rank, const long *kept,
                      long *cap)
{
    long level = water_level(base, n, total);
    long left = total;
    size_t n_extra = 0;
    struct extra *extra = malloc(n * sizeof *extra);
    if (extra == NULL)
        return EJ_ENOMEM;
    for (size_t i = 0; i < n; i++) {
        long count = base[i] < level - 1 ? level - 1 - base[i] : 0;
        cap[i] = base[i] + count;
        left -= count;
        if (base[i] <= level - 1)
            extra[n_extra++] = (struct extra){kept[i] - count, rank[i], i};
    }
    /* 0 < left <= n_extra by the choice of level. */
    qsort(extra, n_extra, sizeof *extra, by_prio);
    for (size_t k = 0; k < n_extra && left > 0; k++, left--)
        cap[extra[k].idx]++;
    free(extra);
    return 0;
}

/* One job of a plan. Arrays are per instance of the job (local index)
 * unless said otherwise. */
struct pjob {
    const ej_sharding_balanced_job *b;
    size_t *gidx; /* index in the plan's instances */
    size_t *rank; /* preference rank */
    long *count;  /* items of this job placed on it */
    int *owner;   /* per item: local index, -1 */
    int *prev;    /* per item: local index of the previous owner, -1 */
    long share;   /* most items kept on one instance */
};

struct plan {
    struct pjob *jobs; /* in job-name order */
    size_t n_jobs;
    struct id_ref *ids; /* every instance, sorted by id; idx = position */
    size_t n_ids;
    long *base, *cap, *total, *kept; /* per plan instance */
    size_t *id_rank;
};

static void plan_free(struct plan *p)
{
    for (size_t j = 0; p->jobs && j < p->n_jobs; j++) {
        free(p->jobs[j].gidx);
        free(p->jobs[j].owner);
    }
    free(p->jobs);
    free(p->ids);
    free(p->base);
    free(p->id_rank);
}

/* Local index of each item's previous owner among the job's instances. */
static int previous_local(struct pjob *pj, const struct plan *p)
{
    const ej_sharding_balanced_job *b = pj->b;
    struct id_ref *refs = malloc((b->n_instances ? b->n_instances : 1) * sizeof *refs);
    if (refs == NULL)
        return EJ_ENOMEM;
    for (size_t k = 0; k < b->n_instances; k++)
        refs[k] = (struct id_ref){b->instances[k], k};
    qsort(refs, b->n_instances, sizeof *refs, by_id);
    for (int item = 0; item < b->total_count; item++) {
        const char *prev = b->previous_owner ? b->previous_owner[item] : NULL;
        long r = prev ? find_id(refs, b->n_instances, prev) : -1;
        pj->owner[item] = pj->prev[item] = r >= 0 ? (int)refs[r].idx : -1;
        if (r >= 0)
            p->kept[pj->gidx[refs[r].idx]]++;
    }
    free(refs);
    return 0;
}

static int pjob_init(struct pjob *pj, const ej_sharding_balanced_job *b, struct plan *p,
                     bool loaded)
{
    size_t n = b->n_instances, t = (size_t)b->total_count;
    pj->b = b;
    pj->gidx = malloc((n ? 3 * n : 1) * sizeof(size_t));
    pj->owner = malloc((t ? 2 * t : 1) * sizeof *pj->owner);
    pj->prev = pj->owner + t;
    if (pj->gidx == NULL || pj->owner == NULL)
        return EJ_ENOMEM;
    pj->rank = pj->gidx + n;
    pj->count = (long *)(pj->rank + n);
    memset(pj->count, 0, n * sizeof *pj->count);
    for (size_t k = 0; k < n; k++)
        pj->gidx[k] = (size_t)find_id(p->ids, p->n_ids, b->instances[k]);
    pj->share = loaded || n == 0 ? b->total_count : (b->total_count + (long)n - 1) / (long)n;
    if (n > 0 && preference_ranks(b->instances, n, b->job_name, pj->rank) != 0)
        return EJ_ENOMEM;
    return previous_local(pj, p);
}

/* Step 2: previous owners keep items within capacity and share. */
static void plan_keep(struct plan *p)
{
    for (size_t j = 0; j < p->n_jobs; j++) {
        struct pjob *pj = &p->jobs[j];
        for (int item = 0; item < pj->b->total_count; item++) {
            int k = pj->owner[item];
            if (k < 0)
                continue;
            size_t g = pj->gidx[k];
            if (p->total[g] < p->cap[g] && pj->count[k] < pj->share) {
                p->total[g]++;
                pj->count[k]++;
            } else {
                pj->owner[item] = -1;
            }
        }
    }
}

/* Step 3: the other items, one by one, to the best instance of the job:
 * under capacity, under the job's share, the previous owner (an item kept
 * over the share last time returns to it), lowest total, preferred. */
static void plan_fill(struct plan *p)
{
    for (size_t j = 0; j < p->n_jobs; j++) {
        struct pjob *pj = &p->jobs[j];
        size_t n = pj->b->n_instances;
        for (int item = 0; n > 0 && item < pj->b->total_count; item++) {
            if (pj->owner[item] >= 0)
                continue;
            size_t best = 0;
            long best_key[5] = {0};
            for (size_t k = 0; k < n; k++) {
                size_t g = pj->gidx[k];
                long key[5] = {p->total[g] >= p->cap[g], pj->count[k] >= pj->share,
                               pj->prev[item] != (int)k, p->total[g], (long)pj->rank[k]};
                int c = 0;
                for (int f = 0; f < 5 && c == 0; f++)
                    c = (key[f] > best_key[f]) - (key[f] < best_key[f]);
                if (k == 0 || c < 0) {
                    best = k;
                    memcpy(best_key, key, sizeof key);
                }
            }
            pj->owner[item] = (int)best;
            pj->count[best]++;
            p->total[pj->gidx[best]]++;
        }
    }
}

struct job_ref {
    const char *name;
    size_t idx;
};

static int by_job_name(const void *a, const void *b)
{
    const struct job_ref *x = a, *y = b;
    return strcmp(x->name, y->name);
}

/* Every instance id of every job, sorted, duplicates removed. */
static int all_instances(const ej_sharding_balanced_job *jobs, size_t n_jobs, struct id_ref **out,
                         size_t *n_out)
{
    size_t n = 0;
    for (size_t j = 0; j < n_jobs; j++)
        n += jobs[j].n_instances;
    struct id_ref *refs = malloc((n ? n : 1) * sizeof *refs);
    if (refs == NULL)
        return EJ_ENOMEM;
    size_t k = 0;
    for (size_t j = 0; j < n_jobs; j++)
        for (size_t i = 0; i < jobs[j].n_instances; i++)
            refs[k++] = (struct id_ref){jobs[j].instances[i], 0};
    qsort(refs, n, sizeof *refs, by_id);
    size_t u = 0;
    for (size_t i = 0; i < n; i++) {
        if (u == 0 || strcmp(refs[u - 1].id, refs[i].id) != 0) {
            refs[u] = (struct id_ref){refs[i].id, u};
            u++;
        }
    }
    *out = refs;
    *n_out = u;
    return 0;
}

/* Jobs in name order (EJ_EINVAL for a name given twice). */
static int plan_jobs(struct plan *p, const ej_sharding_balanced_job *jobs, size_t n_jobs,
                     bool loaded)
{
    struct job_ref *order = malloc(n_jobs * sizeof *order);
    p->jobs = calloc(n_jobs, sizeof *p->jobs);
    int rc = order && p->jobs ? 0 : EJ_ENOMEM;
    for (size_t j = 0; rc == 0 && j < n_jobs; j++)
        order[j] = (struct job_ref){jobs[j].job_name, j};
    if (rc == 0)
        qsort(order, n_jobs, sizeof *order, by_job_name);
    for (size_t k = 1; rc == 0 && k < n_jobs; k++)
        if (strcmp(order[k - 1].name, order[k].name) == 0)
            rc = EJ_EINVAL;
    for (size_t k = 0; rc == 0 && k < n_jobs; k++) {
        p->n_jobs = k + 1;
        rc = pjob_init(&p->jobs[k], &jobs[order[k].idx], p, loaded);
    }
    free(order);
    return rc;
}

/* Places every job; load: NULL, or a load per instance of jobs[0]. */
static int plan_run(struct plan *p, const ej_sharding_balanced_job *jobs, size_t n_jobs,
                    const long *load)
{
    int rc = all_instances(jobs, n_jobs, &p->ids, &p->n_ids);
    if (rc != 0)
        return rc;
    size_t n = p->n_ids ? p->n_ids : 1;
    p->base = calloc(4 * n, sizeof *p->base);
    p->id_rank = malloc(n * sizeof *p->id_rank);
    if (p->base == NULL || p->id_rank == NULL)
        return EJ_ENOMEM;
    p->cap = p->base + n;
    p->total = p->base + 2 * n;
    p->kept = p->base + 3 * n;
    for (size_t i = 0; load && i < jobs[0].n_instances; i++)
        p->base[find_id(p->ids, p->n_ids, jobs[0].instances[i])] = load[i];
    rc = plan_jobs(p, jobs, n_jobs, load != NULL);
    if (rc != 0)
        return rc;
    long items = 0;
    for (size_t j = 0; j < n_jobs; j++)
        items += jobs[j].n_instances ? jobs[j].total_count : 0;
    if (items == 0 || p->n_ids == 0)
        return 0;
    /* Ties for the extra capacity: a lone job's own preference (so that
     * one-item jobs spread without a load), else instance id. */
    for (size_t i = 0; i < p->n_ids; i++)
        p->id_rank[i] = i;
    for (size_t k = 0; n_jobs == 1 && k < jobs[0].n_instances; k++)
        p->id_rank[p->jobs[0].gidx[k]] = p->jobs[0].rank[k];
    rc = capacities(p->base, p->n_ids, items, p->id_rank, p->kept, p->cap);
    if (rc != 0)
        return rc;
    memcpy(p->total, p->base, p->n_ids * sizeof *p->total);
    plan_keep(p);
    plan_fill(p);
    return 0;
}

static int check_jobs(const ej_sharding_balanced_job *jobs, size_t n_jobs, size_t target,
                      const int *owner_out)
{
    static const int any_output; /* other jobs' owners go to the plan's memory */
    if (jobs == NULL || target >= n_jobs)
        return EJ_EINVAL;
    for (size_t j = 0; j < n_jobs; j++) {
        const ej_sharding_balanced_job *b = &jobs[j];
        if (ej__sharding_check_args(b->instances, b->n_instances, b->job_name, b->total_count,
                                    j == target ? owner_out : &any_output) != 0)
            return EJ_EINVAL;
        for (size_t i = 0; i < b->n_instances; i++)
            if (b->instances[i] == NULL)
                return EJ_EINVAL;
    }
    return 0;
}

static int plan_one(const ej_sharding_balanced_job *jobs, size_t n_jobs, size_t target,
                    const long *load, int *owner_out)
{
    int rc = check_jobs(jobs, n_jobs, target, owner_out);
    if (rc != 0)
        return rc;
    struct plan p = {0};
    rc = plan_run(&p, jobs, n_jobs, load);
    for (size_t j = 0; rc == 0 && j < p.n_jobs; j++)
        if (p.jobs[j].b == &jobs[target])
            memcpy(owner_out, p.jobs[j].owner, (size_t)jobs[target].total_count * sizeof(int));
    plan_free(&p);
    return rc;
}

int ej_sharding_balanced_loaded(const char *const *instances, size_t n_instances,
                                const char *job_name, int total_count,
                                const char *const *previous_owner, const long *load, int *owner_out)
{
    for (size_t i = 0; load && i < n_instances; i++)
        if (load[i] < 0)
            return EJ_EINVAL;
    ej_sharding_balanced_job job = {job_name, instances, n_instances, total_count, previous_owner};
    return plan_one(&job, 1, 0, load, owner_out);
}

int ej_sharding_balanced(const char *const *instances, size_t n_instances, const char *job_name,
                         int total_count, const char *const *previous_owner, int *owner_out,
                         void *user)
{
    (void)user;
    return ej_sharding_balanced_loaded(instances, n_instances, job_name, total_count,
                                       previous_owner, NULL, owner_out);
}

int ej_sharding_balanced_namespace(const ej_sharding_balanced_job *jobs, size_t n_jobs,
                                   size_t target, int *owner_out)
{
    return plan_one(jobs, n_jobs, target, NULL, owner_out);
}
