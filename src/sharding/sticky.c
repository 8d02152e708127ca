/* Sticky sharding: move the fewest items on a membership change while every
 * instance holds floor(total/n) or ceil(total/n) items.
 *
 * With q = total / n and r = total % n, exactly r instances hold q+1 items
 * and the others q. Let kept_i be the number of items instance i owned
 * before. Whatever the capacities c_i, instance i can keep at most
 * min(kept_i, c_i) of its items, so the items that must move are
 * sum(max(0, kept_i - c_i)). That sum is smallest when the r larger
 * capacities go to the instances that owned the most items before, which is
 * what this does (ties: earlier instance first). Each instance keeps its
 * lowest-numbered items up to its capacity; the rest, with the items of
 * instances that are gone and items nobody owned, fill the remaining room in
 * item order, instances in input order. */
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "ejob/error.h"
#include "ejob/sharding.h"
#include "sharding/internal.h"

struct rank {
    size_t kept;
    size_t idx;
};

static int by_kept_desc(const void *a, const void *b)
{
    const struct rank *x = a, *y = b;
    if (x->kept != y->kept)
        return x->kept > y->kept ? -1 : 1;
    return (x->idx > y->idx) - (x->idx < y->idx);
}

static uint64_t str_hash(const char *s)
{
    return ej__sharding_mix64(ej__sharding_fnv_more(EJ__FNV64_OFFSET, s, strlen(s)));
}

/* An open-addressing table from instance id to its first index. */
struct id_map {
    int *slot; /* -1 = empty */
    size_t mask;
    const char *const *ids;
};

static int map_lookup(const struct id_map *m, const char *id)
{
    for (size_t s = (size_t)str_hash(id) & m->mask;; s = (s + 1) & m->mask) {
        int i = m->slot[s];
        if (i < 0 || strcmp(m->ids[i], id) == 0)
            return i;
    }
}

static void map_insert(struct id_map *m, int idx)
{
    for (size_t s = (size_t)str_hash(m->ids[idx]) & m->mask;; s = (s + 1) & m->mask) {
        int i = m->slot[s];
        if (i < 0) {
            m->slot[s] = idx;
            return;
        }
        if (strcmp(m->ids[i], m->ids[idx]) == 0)
            return; /* a duplicate id: the first index answers for it */
    }
}

int ej_sharding_sticky(const char *const *instances, size_t n_instances, const char *job_name,
                       int total_count, const char *const *previous_owner, int *owner_out,
                       void *user)
{
    int rc = ej__sharding_check_args(instances, n_instances, job_name, total_count, owner_out);
    if (rc != 0)
        return rc;
    if (n_instances == 0 || total_count == 0 || previous_owner == NULL)
        return ej_sharding_average(instances, n_instances, job_name, total_count, NULL, owner_out,
                                   user);
    for (size_t i = 0; i < n_instances; i++)
        if (instances[i] == NULL)
            return EJ_EINVAL;

    size_t n = n_instances;
    size_t map_cap = 4;
    while (map_cap < 2 * n)
        map_cap *= 2;
    int *slots = malloc(map_cap * sizeof(*slots));
    size_t *counts = calloc(3 * n, sizeof(*counts)); /* kept, capacity, assigned */
    struct rank *ranks = malloc(n * sizeof(*ranks));
    if (slots == NULL || counts == NULL || ranks == NULL) {
        rc = EJ_ENOMEM;
        goto out_free;
    }
    size_t *kept = counts, *capacity = counts + n, *assigned = counts + 2 * n;
    struct id_map map = {slots, map_cap - 1, instances};
    for (size_t s = 0; s < map_cap; s++)
        slots[s] = -1;
    for (size_t i = 0; i < n; i++)
        map_insert(&map, (int)i);

    /* owner_out first holds each item's previous owner, if still present. */
    size_t total = (size_t)total_count, any_kept = 0;
    for (size_t item = 0; item < total; item++) {
        int prev = previous_owner[item] ? map_lookup(&map, previous_owner[item]) : -1;
        owner_out[item] = prev;
        if (prev >= 0) {
            kept[prev]++;
            any_kept++;
        }
    }
    if (any_kept == 0) {
        /* Nothing to keep: the plain average layout, as ElasticJob would. */
        ej__sharding_average_fill(n, total_count, 0, 0, owner_out);
        goto out_free;
    }

    size_t q = total / n, r = total % n;
    for (size_t i = 0; i < n; i++) {
        ranks[i].kept = kept[i];
        ranks[i].idx = i;
    }
    qsort(ranks, n, sizeof(*ranks), by_kept_desc);
    for (size_t k = 0; k < n; k++)
        capacity[ranks[k].idx] = q + (k < r ? 1 : 0);

    for (size_t item = 0; item < total; item++) {
        int prev = owner_out[item];
        if (prev >= 0 && assigned[prev] < capacity[prev])
            assigned[prev]++;
        else
            owner_out[item] = -1;
    }
    /* The capacities add up to total, so every free item finds room. */
    size_t next = 0;
    for (size_t item = 0; item < total; item++) {
        if (owner_out[item] >= 0)
            continue;
        while (assigned[next] >= capacity[next])
            next++;
        owner_out[item] = (int)next;
        assigned[next]++;
    }

out_free:
    free(ranks);
    free(counts);
    free(slots);
    return rc;
}
