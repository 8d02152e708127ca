/*
 * BALANCED over the namespace: what the leader of a BALANCED job reads from
 * ZooKeeper so that ej_sharding_balanced_namespace can place its items
 * counting the items of every other BALANCED job of the namespace.
 *
 * Each other job costs one read of its config, one of its instances, one
 * per distinct IP among those instances (servers/{ip}, the DISABLED rule
 * of ej__coord_shard_instances) and one per item (sharding/N/instance),
 * all synchronous on the resharding thread. A job that cannot be read, or
 * whose config is invalid, is left out with a debug line: another job's
 * trouble never fails this job's resharding. Other BALANCED jobs on the
 * same instances that the plan places differently are asked to reshard
 * (ask_to_converge).
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "coord/internal.h"
#include "ejob/config.h"
#include "ejob/error.h"
#include "ejob/log.h"
#include "ejob/sharding.h"

#define MOD "coord"

/* One other job as read; every pointer owned. */
struct ns_job {
    char *name;
    char **ids; /* from ej_registry_children, filtered in place */
    size_t n;
    int count;
    char **prev; /* count entries, NULL where missing */
};

static void ns_job_fini(struct ns_job *j)
{
    free(j->name);
    ej_registry_free_names(j->ids);
    if (j->prev != NULL)
        for (int i = 0; i < j->count; i++)
            free(j->prev[i]);
    free(j->prev);
    memset(j, 0, sizeof *j);
}

/* err, errlen: where a failure is described, for the debug line. */
struct why {
    char *buf;
    size_t len;
};

/* Read a node's data; EJ_ENONODE passes through (not described). */
static int get_node(ej_registry *reg, const char *job, ej_layout_node node, int item,
                    const char *name, char **data, size_t *len, struct why *w)
{
    char *p = ej_layout_path_dup(job, node, item, name);
    if (p == NULL)
        return EJ_ENOMEM;
    int rc = ej_registry_get(reg, p, data, len, NULL);
    if (rc != 0 && rc != EJ_ENONODE)
        snprintf(w->buf, w->len, "reading %s: %s", p, ej_strerror(rc));
    free(p);
    return rc;
}

/* Keep the instances whose server is not DISABLED, in ElasticJob order
 * (the list ej__coord_shard_instances gives the job's own leader). One
 * read per distinct IP. */
static int live_instances(ej_registry *reg, struct ns_job *j, struct why *w)
{
    char *p = ej_layout_path_dup(j->name, EJ_LAYOUT_NODE_INSTANCES, 0, NULL);
    if (p == NULL)
        return EJ_ENOMEM;
    size_t k = 0;
    int rc = ej_registry_children(reg, p, EJ_REG_UNSORTED, &j->ids, &k);
    if (rc != 0 && rc != EJ_ENONODE)
        snprintf(w->buf, w->len, "listing %s: %s", p, ej_strerror(rc));
    free(p);
    if (rc == EJ_ENONODE)
        return 0;
    if (rc != 0)
        return rc;
    rc = ej__servers_drop_disabled(reg, j->name, j->ids, &k, w->buf, w->len);
    if (rc != 0)
        return rc;
    j->n = k;
    ej_sharding_instances_order(j->ids, k);
    return 0;
}

/* Current owners: sharding/N/instance for N < count, NULL where missing. */
static int current_owners(ej_registry *reg, struct ns_job *j, struct why *w)
{
    j->prev = j->count > 0 ? calloc((size_t)j->count, sizeof *j->prev) : NULL;
    if (j->count > 0 && j->prev == NULL)
        return EJ_ENOMEM;
    for (int i = 0; i < j->count; i++) {
        int rc =
            get_node(reg, j->name, EJ_LAYOUT_NODE_ITEM_INSTANCE, i, NULL, &j->prev[i], NULL, w);
        if (rc == EJ_ENONODE)
            continue;
        if (rc != 0)
            return rc;
        if (j->prev[i][0] == '\0') {
            free(j->prev[i]);
            j->prev[i] = NULL;
        }
    }
    return 0;
}

/* Read one other job. Returns 0 (a BALANCED job with live instances, *j
 * filled), 1 (not one to count: not a job, another strategy, no live
 * instance) or an error described in w (*j cleared but on 0). */
static int read_job(ej_registry *reg, const char *name, struct ns_job *j, struct why *w)
{
    memset(j, 0, sizeof *j);
    if (!ej_layout_is_job_name(name))
        return 1;
    char *data = NULL;
    size_t len = 0;
    int rc = get_node(reg, name, EJ_LAYOUT_NODE_CONFIG, 0, NULL, &data, &len, w);
    if (rc == EJ_ENONODE)
        return 1;
    if (rc != 0)
        return rc;
    /* Valid as the job's own instances judge their config node. */
    struct ej_job_config cfg;
    rc = ej_job_config_init(&cfg);
    if (rc == 0) {
        rc = ej_job_config_parse(data, len, &cfg, w->buf, w->len);
        if (rc != 0)
            ej_job_config_fini(&cfg);
    }
    free(data);
    if (rc != 0)
        return rc;
    /* Resolved as shard.c resolves a job's own strategy; an unknown name is
     * AVERAGE there, so not BALANCED here. */
    ej_sharding_strategy s;
    bool balanced =
        ej_sharding_find(cfg.job_sharding_strategy_class, &s, NULL, 0) == 0 && s.namespace_load;
    j->count = cfg.sharding_total_count;
    ej_job_config_fini(&cfg);
    if (!balanced)
        return 1;
    j->name = strdup(name);
    if (j->name == NULL)
        return EJ_ENOMEM;
    rc = live_instances(reg, j, w);
    if (rc == 0 && j->n == 0)
        rc = 1;
    if (rc == 0)
        rc = current_owners(reg, j, w);
    if (rc != 0)
        ns_job_fini(j);
    return rc;
}

/* Do the two jobs run on the same instances? Both lists are in ZooKeeper
 * order (ej_sharding_instances_order). */
static bool same_instances(const ej_sharding_balanced_job *a, const ej_sharding_balanced_job *b)
{
    if (a->n_instances != b->n_instances)
        return false;
    for (size_t i = 0; i < a->n_instances; i++)
        if (strcmp(a->instances[i], b->instances[i]) != 0)
            return false;
    return true;
}

/*
 * The plan places every job, but only this job's items are written: another
 * job resharded a moment ago from another view of the namespace (leaders of
 * jobs that start together reshard together) keeps items the plan would
 * place elsewhere, and nothing would reshard it again. Ask the leader of
 * each such job to reshard (leader/sharding/necessary): it computes the
 * same plan from the same state, so the namespace converges on it. Only
 * jobs on the same instances as this one are asked: there a plan applied
 * and computed again is the same plan; across different instance sets the
 * plan is greedy and asking could make jobs move items back and forth.
 */
static void ask_to_converge(ej_registry *reg, const ej_sharding_balanced_job *jobs, size_t m)
{
    for (size_t t = 1; t < m; t++) {
        const ej_sharding_balanced_job *o = &jobs[t];
        if (o->total_count == 0 || !same_instances(&jobs[0], o))
            continue;
        int *plan = malloc((size_t)o->total_count * sizeof *plan);
        if (plan == NULL)
            return;
        int moves = 0;
        if (ej_sharding_balanced_namespace(jobs, m, t, plan) == 0)
            for (int i = 0; i < o->total_count; i++) {
                const char *want = plan[i] >= 0 ? o->instances[plan[i]] : NULL;
                const char *has = o->previous_owner[i];
                if ((want == NULL) != (has == NULL) || (want && strcmp(want, has) != 0))
                    moves++;
            }
        free(plan);
        if (moves == 0)
            continue;
        char *p = ej_layout_path_dup(o->job_name, EJ_LAYOUT_NODE_SHARDING_NECESSARY, 0, NULL);
        int rc = p ? ej_registry_create_node(reg, p, NULL, 0, EJ_REG_PERSISTENT,
                                             EJ_REG_CREATE_PARENTS, NULL)
                   : EJ_ENOMEM;
        free(p);
        if (rc == 0)
            EJ_LOG(EJ_LOG_INFO, MOD, 0,
                   "job %s: the BALANCED plan places %d item(s) of job %s elsewhere; asked it to "
                   "reshard",
                   jobs[0].job_name, moves, o->job_name);
        else if (rc != EJ_ENODEEXISTS)
            EJ_LOG(EJ_LOG_DEBUG, MOD, rc, "job %s: cannot ask job %s to reshard: %s",
                   jobs[0].job_name, o->job_name, ej_strerror(rc));
    }
}

int ej__balance_ns_assign(ej_registry *reg, const char *job, char *const *ids, size_t n, int count,
                          const char *const *previous, int *owner_out)
{
    if (reg == NULL || job == NULL || (n > 0 && ids == NULL) || count < 0 ||
        (count > 0 && owner_out == NULL))
        return EJ_EINVAL;
    char **names = NULL;
    size_t k = 0, m = 1, left_out = 0;
    int rc = ej_registry_children(reg, "/", EJ_REG_UNSORTED, &names, &k);
    if (rc != 0)
        return rc;
    struct ns_job *others = calloc(k + 1, sizeof *others);
    ej_sharding_balanced_job *jobs = calloc(k + 1, sizeof *jobs);
    if (others == NULL || jobs == NULL) {
        rc = EJ_ENOMEM;
        goto out;
    }
    /* This job as its leader sees it (the caches it shards from), target 0. */
    jobs[0] = (ej_sharding_balanced_job){.job_name = job,
                                         .instances = (const char *const *)ids,
                                         .n_instances = n,
                                         .total_count = count,
                                         .previous_owner = previous};
    for (size_t i = 0; i < k; i++) {
        if (strcmp(names[i], job) == 0)
            continue;
        struct ns_job *o = &others[m - 1];
        char err[256] = "";
        struct why w = {err, sizeof err};
        int r = read_job(reg, names[i], o, &w);
        if (r == 1)
            continue;
        if (r != 0) {
            if (r == EJ_ENOMEM) {
                rc = r;
                goto out;
            }
            EJ_LOG(EJ_LOG_DEBUG, MOD, r, "job %s: job %s left out of the BALANCED namespace: %s",
                   job, names[i], err[0] ? err : ej_strerror(r));
            left_out++;
            continue;
        }
        jobs[m] = (ej_sharding_balanced_job){.job_name = o->name,
                                             .instances = (const char *const *)o->ids,
                                             .n_instances = o->n,
                                             .total_count = o->count,
                                             .previous_owner = (const char *const *)o->prev};
        m++;
    }
    rc = ej_sharding_balanced_namespace(jobs, m, 0, owner_out);
    if (rc == 0)
        ask_to_converge(reg, jobs, m);
    if (rc == 0)
        EJ_LOG(EJ_LOG_DEBUG, MOD, 0,
               "job %s: BALANCED over %zu jobs of the namespace (%zu left out)", job, m, left_out);
out:
    if (others != NULL)
        for (size_t i = 0; i + 1 < m; i++)
            ns_job_fini(&others[i]);
    free(others);
    free(jobs);
    ej_registry_free_names(names);
    return rc;
}
