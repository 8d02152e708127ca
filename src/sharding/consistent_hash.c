/* Consistent hashing: each instance owns 160 points (virtual nodes) on a
 * 2^32 ring, an item belongs to the first point at or after its own.
 *
 * Positions are the high 32 bits of murmur3's 64-bit finaliser applied to the
 * 64-bit FNV-1a hash of a key: "<instance id>#<vnode>" (vnode 0..159) for an
 * instance, "<job name>#<item>" for an item. When an instance joins, it takes
 * only the arcs its points cut off; when one leaves, only its items move. */
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "ejob/error.h"
#include "ejob/sharding.h"
#include "sharding/internal.h"

#define VNODES 160

struct point {
    uint32_t pos;
    uint32_t vnode;
    int inst;
    const char *id;
};

/* The position of "<prefix>#<n>", given prefix_hash, the FNV-1a state after
 * hashing prefix: the prefix is hashed once per instance or job, not once
 * per point or item. */
static uint32_t ring_pos(uint64_t prefix_hash, unsigned long n)
{
    char num[24];
    size_t len = sizeof(num);
    do {
        num[--len] = (char)('0' + n % 10);
        n /= 10;
    } while (n > 0);
    num[--len] = '#';
    uint64_t h = ej__sharding_fnv_more(prefix_hash, num + len, sizeof(num) - len);
    return (uint32_t)(ej__sharding_mix64(h) >> 32);
}

static uint64_t prefix_hash(const char *s)
{
    return ej__sharding_fnv_more(EJ__FNV64_OFFSET, s, strlen(s));
}

/* Ties on a position are broken by id, then vnode: the ring is the same
 * whatever order the instances come in. */
static int by_position(const void *a, const void *b)
{
    const struct point *x = a, *y = b;
    if (x->pos != y->pos)
        return x->pos < y->pos ? -1 : 1;
    int c = strcmp(x->id, y->id);
    if (c != 0)
        return c;
    if (x->vnode != y->vnode)
        return x->vnode < y->vnode ? -1 : 1;
    return (x->inst > y->inst) - (x->inst < y->inst);
}

int ej_sharding_consistent_hash(const char *const *instances, size_t n_instances,
                                const char *job_name, int total_count,
                                const char *const *previous_owner, int *owner_out, void *user)
{
    (void)previous_owner;
    (void)user;
    int rc = ej__sharding_check_args(instances, n_instances, job_name, total_count, owner_out);
    if (rc != 0)
        return rc;
    if (n_instances == 0) {
        for (int i = 0; i < total_count; i++)
            owner_out[i] = -1;
        return 0;
    }
    if (total_count == 0)
        return 0;
    for (size_t i = 0; i < n_instances; i++)
        if (instances[i] == NULL)
            return EJ_EINVAL;
    if (n_instances > SIZE_MAX / VNODES / sizeof(struct point))
        return EJ_ENOMEM;
    size_t n_points = n_instances * VNODES;
    struct point *ring = malloc(n_points * sizeof(*ring));
    if (ring == NULL)
        return EJ_ENOMEM;
    for (size_t i = 0; i < n_instances; i++) {
        uint64_t ih = prefix_hash(instances[i]);
        for (uint32_t v = 0; v < VNODES; v++) {
            struct point *p = &ring[i * VNODES + v];
            p->pos = ring_pos(ih, v);
            p->vnode = v;
            p->inst = (int)i;
            p->id = instances[i];
        }
    }
    qsort(ring, n_points, sizeof(*ring), by_position);
    /* Search a packed array of positions: it stays in cache. */
    uint32_t *pos_of = malloc(n_points * sizeof(*pos_of));
    if (pos_of == NULL) {
        free(ring);
        return EJ_ENOMEM;
    }
    for (size_t k = 0; k < n_points; k++)
        pos_of[k] = ring[k].pos;
    uint64_t jh = prefix_hash(job_name);
    for (int item = 0; item < total_count; item++) {
        uint32_t pos = ring_pos(jh, (unsigned long)item);
        /* The first point with position >= pos; past the end wraps to 0. */
        size_t lo = 0, hi = n_points;
        while (lo < hi) {
            size_t mid = lo + (hi - lo) / 2;
            if (pos_of[mid] < pos)
                lo = mid + 1;
            else
                hi = mid;
        }
        owner_out[item] = ring[lo == n_points ? 0 : lo].inst;
    }
    free(pos_of);
    free(ring);
    return 0;
}
