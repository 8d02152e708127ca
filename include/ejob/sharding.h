/*
 * Sharding strategies: split a job's items 0..total_count-1 among the live
 * instances of that job.
 *
 * A strategy receives the instances in ZooKeeper order (the children of
 * `instances/`, reverse lexicographic, see ej_sharding_instances_order) and
 * fills owner_out[item] with an index into that array, or -1 to leave an item
 * unassigned. The built-ins are pure functions of their arguments: the same
 * input always gives the same output, on every machine.
 *
 * Built-in strategies (names are matched case-insensitively):
 *   AVERAGE          ElasticJob's AverageAllocationJobShardingStrategy, the
 *                    default. Also "AVG_ALLOCATION", "" and NULL.
 *   ODEVITY          OdevitySortByNameJobShardingStrategy.
 *   ROTATE           RotateServerByNameJobShardingStrategy (3.x ROUND_ROBIN,
 *                    also accepted as "ROUND_ROBIN").
 *   CONSISTENT_HASH  virtual nodes on a 2^32 ring: few items move when an
 *                    instance comes or goes.
 *   STICKY           keeps items where they were, moving the fewest items
 *                    while every instance holds floor or ceil of the average.
 *   BALANCED         spreads items over instances counting the items of every
 *                    job of the namespace that uses BALANCED, not only this
 *                    job's (see ej_sharding_balanced_namespace). Also
 *                    "io.ejob.sharding.BalancedShardingStrategy".
 * The Java class names of the first three, as Java instances write them into
 * jobShardingStrategyClass (com.dangdang.ddframe.job.lite.api.strategy.impl.
 * <Class> in 2.1.5, io.elasticjob.lite.api.strategy.impl.<Class> in later
 * releases; matched exactly), resolve to the same strategies.
 *
 * Thread safety: every function here may be called from any thread. The
 * registry of custom strategies is protected by a lock.
 */
#ifndef EJOB_SHARDING_H
#define EJOB_SHARDING_H

#include <stdbool.h>
#include <stddef.h>

#include "ejob/common.h"

/*
 * A sharding strategy.
 *
 * instances:      n_instances instance ids ("10.0.0.7@-@4123"), in ZooKeeper
 *                 order. Borrowed for the call. NULL only when n_instances == 0.
 * n_instances:    may be 0: then every item is left unassigned (-1).
 * job_name:       the job's name, never NULL.
 * total_count:    the number of items (shardingTotalCount), >= 0.
 * previous_owner: NULL, or total_count entries: the instance id that owned
 *                 each item before (sharding/{item}/instance), or NULL for an
 *                 item nobody owned. Ids need not be among instances (the
 *                 owner may be gone). Only STICKY looks at it.
 * owner_out:      total_count entries to fill: for each item, an index into
 *                 instances, or -1 for "unassigned". ej_sharding_run sets
 *                 every entry to -1 before calling the strategy.
 * user:           the pointer given at registration (NULL for built-ins).
 *
 * Returns 0, or a negative error code (the built-ins: EJ_EINVAL for bad
 * arguments, EJ_ENOMEM when memory runs out). owner_out is unspecified after
 * an error.
 * A strategy must not keep any pointer it was given.
 */
typedef int (*ej_sharding_fn)(const char *const *instances, size_t n_instances,
                              const char *job_name, int total_count,
                              const char *const *previous_owner, int *owner_out, void *user);

/* Longest strategy name, including the terminating NUL. */
#define EJ_SHARDING_NAME_MAX 128

/* A resolved strategy, returned by value by ej_sharding_find. */
typedef struct ej_sharding_strategy {
    /* Canonical name: "AVERAGE", "ODEVITY", "ROTATE", "CONSISTENT_HASH",
     * "STICKY", or the name a custom strategy was registered under. */
    char name[EJ_SHARDING_NAME_MAX];
    ej_sharding_fn fn;
    void *user;   /* passed to fn */
    bool builtin; /* true for the built-ins */
    /* true for BALANCED: the coordinator must give it the namespace's load
     * (ej_sharding_balanced_namespace); fn alone sees only this job. */
    bool namespace_load;
} ej_sharding_strategy;

/* The built-in strategies, callable directly (user is ignored). See the
 * ej_sharding_fn contract for arguments and return codes. */
EJ_EXTERN int ej_sharding_average(const char *const *instances, size_t n_instances,
                                  const char *job_name, int total_count,
                                  const char *const *previous_owner, int *owner_out, void *user);
EJ_EXTERN int ej_sharding_odevity(const char *const *instances, size_t n_instances,
                                  const char *job_name, int total_count,
                                  const char *const *previous_owner, int *owner_out, void *user);
/* ElasticJob's rotation with one deliberate difference: when the job name's
 * Java hashCode is Integer.MIN_VALUE (e.g. "polygenelubricants"), Java throws
 * IndexOutOfBoundsException for most instance counts; ejob uses offset 0
 * (no rotation) instead. */
EJ_EXTERN int ej_sharding_rotate(const char *const *instances, size_t n_instances,
                                 const char *job_name, int total_count,
                                 const char *const *previous_owner, int *owner_out, void *user);
/* Each instance gets 160 virtual nodes on a 2^32 ring; an item goes to the
 * first virtual node at or after its own position. The result does not
 * depend on the order of instances. */
EJ_EXTERN int ej_sharding_consistent_hash(const char *const *instances, size_t n_instances,
                                          const char *job_name, int total_count,
                                          const char *const *previous_owner, int *owner_out,
                                          void *user);
/* Every instance gets floor(total/n) or ceil(total/n) items, and among all
 * such assignments this one moves the fewest items away from a previous
 * owner that is still present. Without any present previous owner it is
 * exactly AVERAGE. */
EJ_EXTERN int ej_sharding_sticky(const char *const *instances, size_t n_instances,
                                 const char *job_name, int total_count,
                                 const char *const *previous_owner, int *owner_out, void *user);

/* ------------------------------------------------------------- BALANCED */

/*
 * BALANCED for one job, given a load per instance.
 *
 * load: NULL (all 0) or n_instances entries >= 0: the items each instance
 *       already holds of other jobs, which stay where they are.
 * Capacities first: the water level M is the lowest highest-total any
 * assignment can reach; instances below M - 1 are filled to M - 1 and the
 * items left give one more to instances at M - 1, first to those that owned
 * more of the job's items before, then in the job's preference order (a
 * hash of job name and instance id, then the id). Each item then stays with
 * its previous owner (previous_owner, as in ej_sharding_fn) while that
 * instance is under its capacity; the others go to the instance under its
 * capacity with the lowest total. So totals (load + items) are as even as
 * they can be, the fewest items move for that, and the result depends on
 * the set of instances, not on their order. Without load, one-item jobs
 * spread over instances by the hash instead of all going to one instance.
 * Returns 0; EJ_EINVAL (bad arguments, a negative load); EJ_ENOMEM.
 */
EJ_EXTERN int ej_sharding_balanced_loaded(const char *const *instances, size_t n_instances,
                                          const char *job_name, int total_count,
                                          const char *const *previous_owner, const long *load,
                                          int *owner_out);

/* The ej_sharding_fn of BALANCED: ej_sharding_balanced_loaded without load. */
EJ_EXTERN int ej_sharding_balanced(const char *const *instances, size_t n_instances,
                                   const char *job_name, int total_count,
                                   const char *const *previous_owner, int *owner_out, void *user);

/*
 * One job of the namespace that uses BALANCED, as read from ZooKeeper:
 *   job_name        the job's node name under the namespace;
 *   instances       the instances that may take its items: children of
 *                   /{job}/instances whose /{job}/servers/{ip} is not
 *                   DISABLED (the list the job's own sharding would use);
 *   total_count     shardingTotalCount from /{job}/config;
 *   previous_owner  NULL or total_count entries: /{job}/sharding/{i}/instance
 *                   (NULL where missing).
 */
typedef struct ej_sharding_balanced_job {
    const char *job_name;
    const char *const *instances;
    size_t n_instances;
    int total_count;
    const char *const *previous_owner;
} ej_sharding_balanced_job;

/*
 * BALANCED over a namespace: the assignment of jobs[target]'s items
 * (owner_out: total_count entries, indexes into jobs[target].instances).
 *
 * One plan places every job given (sorted by job name, items in order) on
 * the union of their instances, with the capacities above computed over all
 * the jobs' items; an item stays with its previous owner while that owner
 * is one of the job's instances, is under its capacity and holds fewer than
 * ceil(total_count / n_instances) items of the job (jobs still spread over
 * their instances); other items go to the job's instance that is under its
 * capacity, then under that share, then owned the item before, then has the
 * lowest total, then is preferred. The plan is a pure function of the set
 * of jobs given, so every leader that reads the same ZooKeeper state
 * computes the same plan, and leaders of different jobs resharding at the
 * same moment do not all pick the same idle instance (as each would if it
 * only counted the others' current items).
 *
 * When every job runs on the same instances: totals differ by at most one
 * item between instances, only the items of a leaving instance move (plus
 * what its departure forces for balance), a joining instance receives the
 * fewest items balance needs, and a plan applied and computed again is the
 * same plan. When jobs run on different sets of instances the plan is still
 * deterministic but greedy: a resharding may move a few items again.
 *
 * Returns 0; EJ_EINVAL (NULL arrays, target out of range, two jobs with the
 * same name, bad job arguments); EJ_ENOMEM.
 */
EJ_EXTERN int ej_sharding_balanced_namespace(const ej_sharding_balanced_job *jobs, size_t n_jobs,
                                             size_t target, int *owner_out);

/*
 * Resolve a strategy name (a built-in name, a Java class name or a registered
 * custom name; NULL and "" mean AVERAGE) into *out.
 *
 * err, err_len: optional (NULL, 0) buffer for a message naming the problem,
 *               e.g. `unknown sharding strategy "Foo"`.
 * Returns 0; EJ_ENOTFOUND when no strategy has that name (*out untouched);
 * EJ_EINVAL when out is NULL. ElasticJob falls back to nothing in this case;
 * ejob's coordinator falls back to AVERAGE with a warning.
 */
EJ_EXTERN int ej_sharding_find(const char *name, ej_sharding_strategy *out, char *err,
                               size_t err_len);

/*
 * Register a custom strategy under name (case-sensitive, 1 to
 * EJ_SHARDING_NAME_MAX-1 bytes). Registering a name again replaces the
 * previous function and user pointer. name is copied; user is kept until the
 * strategy is replaced or unregistered and must stay valid that long.
 *
 * Returns 0; EJ_EINVAL when name or fn is NULL, name is empty or too long, or
 * name is one a built-in answers to (built-ins cannot be overridden);
 * EJ_ENOMEM when memory runs out.
 */
EJ_EXTERN int ej_sharding_register(const char *name, ej_sharding_fn fn, void *user);

/* Remove a custom strategy. Returns 0, EJ_ENOTFOUND when none has that name,
 * EJ_EINVAL when name is NULL. A strategy already returned by
 * ej_sharding_find stays callable: the caller must keep its user data alive
 * for as long as it may still call it. */
EJ_EXTERN int ej_sharding_unregister(const char *name);

/*
 * Run a resolved strategy with checks around it: validates the arguments
 * (no NULL or duplicate instance ids, total_count >= 0), pre-fills owner_out
 * with -1, calls s->fn, then verifies every owner_out entry is -1 or a valid
 * instance index.
 *
 * Returns 0; EJ_EINVAL for bad arguments (err names which); EJ_ENOMEM when
 * the duplicate check runs out of memory; EJ_ESHARDING when the strategy
 * returned an error (its code is named in err) or an out-of-range owner (err
 * names the item). err/err_len as in ej_sharding_find. owner_out is
 * unspecified after an error.
 */
EJ_EXTERN int ej_sharding_run(const ej_sharding_strategy *s, const char *const *instances,
                              size_t n_instances, const char *job_name, int total_count,
                              const char *const *previous_owner, int *owner_out, char *err,
                              size_t err_len);

/*
 * Turn per-item owners into per-instance item lists without allocating.
 *
 * owner:   total_count entries, each -1 or in [0, n_instances).
 * offsets: n_instances + 1 entries to fill.
 * items:   total_count entries to fill (may be NULL when total_count == 0).
 * Afterwards instance k owns items[offsets[k]] .. items[offsets[k+1]-1], in
 * ascending order; offsets[n_instances] is the number of assigned items.
 * Returns 0, or EJ_EINVAL for NULL arrays, a negative total_count or an owner
 * out of range.
 */
EJ_EXTERN int ej_sharding_group(const int *owner, int total_count, size_t n_instances,
                                size_t *offsets, int *items);

/*
 * Sort instance ids into the order ElasticJob's registry returns children:
 * reverse lexicographic by Java String.compareTo (UTF-16 code units), so
 * "192.168.1.9@-@1" comes before "192.168.1.10@-@1". Sorts the pointers in
 * place; the strings are not touched. NULL entries sort last.
 */
EJ_EXTERN void ej_sharding_instances_order(char **ids, size_t n);

#endif
