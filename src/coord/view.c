/*
 * A view of /{job}/sharding kept current by one-shot watches on exactly the
 * paths the protocol needs, so that firing reads nothing from ZooKeeper.
 *
 * Why not a tree cache: a tree cache watches the children of every
 * sharding/{n}, so each running node created and deleted around an item run
 * costs every instance three reads (children of the parent twice, the new
 * node's data once). Here:
 *   - sharding/             children watch: the set of items;
 *   - sharding/{n}/instance data watch (exists watch while absent), all items;
 *   - sharding/{n}/failover exists watch, all items, when failover is on;
 *   - sharding/{n}/misfire, sharding/{n}/disabled: exists watches, own items.
 * No instance watches running nodes: a crash's running items are told by
 * the children zxid of sharding/{n} (failover.c), so a steady fire costs
 * the fleet only its owner's writes, whatever the number of members.
 *
 * This file: the item table (struct ej__view, view_impl.h) and what a read
 * value means for it, the view's lifetime, and the queries. Reading with a
 * watch: view_watch.c; loading every watch at once: view_load.c.
 *
 * Threads, and what each writes (mu is held for every read and write of
 * the table, by all of them):
 *   - The registry's dispatch thread applies every watch event (view_watch.c
 *     token_cb) and runs every load (view_load.c: the tasks posted there,
 *     and the start, a new session and a repair when called there), in
 *     the order ZooKeeper produced the changes. It alone lists sharding/,
 *     so it alone grows the table (items, cap) and marks items present or
 *     gone (present, count, the tombstones of an item gone); it alone
 *     writes sharding_armed, sharding_broken, needs_reload and failover
 *     (ej__view_set_failover posts the change to it). It writes each item's
 *     tracked values (owner and previous owner, failover, misfire, disabled) and its
 *     armed, want and broken bits.
 *   - The loaders ("ej-view-load", view_load.c, arming in bulk): up to
 *     seven short-lived threads that a load of many items (256 or more)
 *     starts; the dispatch thread arms items beside them and joins them
 *     before it goes on, so no event is applied while they run and events
 *     still apply in order. A loader takes items by an atomic index and
 *     writes, for those items only, what the dispatch thread writes for one
 *     item (tracked values; armed, want, broken bits; a repair to post). It
 *     never lists sharding/: the table does not grow or move while loaders
 *     run. The change function (fn) is called from the dispatch thread or
 *     from a loader, never under mu.
 *   - Fire threads, the job's serial queue and API threads read through the
 *     queries below (ej__view_items*, _get, _departed_items, _size,
 *     _unarmed, _matches); the fire path writes the misfire marks of its
 *     own items (running.c's ej__running_set/clear_misfire:
 *     ej__view_note_misfire, _claim_misfire write misfire, misfire_mine).
 *     The coordinator's start-up thread sets expect_absent before the
 *     start, and ej__view_destroy sets closed on the thread that destroys
 *     the coordinator. ej__view_on_new_session bumps gen and clears every
 *     armed bit on the thread that calls it (the connection-state
 *     listener: dispatch).
 *   - mu guards the whole table (items, cap, count, every field of every
 *     item) and the flags (inflight, closed, gen, failover, sharding_armed,
 *     sharding_broken, needs_reload, repair_posted, expect_absent). It is
 *     held only to read or write them, never across a ZooKeeper call or the
 *     change function; cv is signalled when inflight goes down. Outside mu:
 *     refs and offline_until (atomics), and what ej__view_create sets once
 *     (reg, job, me, sharding_path, fn, user).
 */
#include <inttypes.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "common/check.h"
#include "common/util.h"
#include "coord/view_impl.h"
#include "ejob/error.h"
#include "ejob/log.h"

#define MOD "coord"
#define MAX_ITEM 4000000 /* items beyond this are ignored (logged) */

void ej__view_unref(struct ej__view *v)
{
    if (atomic_fetch_sub(&v->refs, 1) != 1)
        return;
    for (size_t i = 0; i < v->cap; i++) {
        free(v->items[i].owner);
        free(v->items[i].prev_owner);
    }
    free(v->items);
    free(v->job);
    free(v->me);
    free(v->sharding_path);
    ej__mutex_destroy(&v->mu);
    pthread_cond_destroy(&v->cv);
    free(v);
}

static void item_init(struct vitem *it)
{
    memset(it, 0, sizeof *it);
    it->fo_owner = -1;
    it->misfire = it->disabled = -1;
}

/* Grow items to hold item. */
static int ensure_cap(struct ej__view *v, int item)
{
    EJ_ASSERT_HELD(&v->mu);
    if ((size_t)item < v->cap)
        return 0;
    size_t ncap = v->cap ? v->cap : 16;
    while (ncap <= (size_t)item)
        ncap *= 2;
    struct vitem *n = realloc(v->items, ncap * sizeof *n);
    if (n == NULL)
        return EJ_ENOMEM;
    for (size_t i = v->cap; i < ncap; i++)
        item_init(&n[i]);
    v->items = n;
    v->cap = ncap;
    return 0;
}

/* Which kinds an item needs tracked. */
uint8_t ej__view_want_locked(const struct ej__view *v, const struct vitem *it)
{
    EJ_ASSERT_HELD(&v->mu);
    uint8_t w = 1u << EJ__VK_INSTANCE;
    bool mine = it->owner != NULL && strcmp(it->owner, v->me) == 0;
    if (mine)
        w |= (1u << EJ__VK_MISFIRE) | (1u << EJ__VK_DISABLED);
    if (v->failover)
        w |= 1u << EJ__VK_FAILOVER;
    return w;
}

/* Forget the tracked value of one kind (locked). */
void ej__view_forget_locked(const struct ej__view *v, struct vitem *it, int kind)
{
    EJ_ASSERT_HELD(&v->mu);
    switch (kind) {
    case EJ__VK_FAILOVER:
        it->fo_owner = -1;
        break;
    case EJ__VK_MISFIRE:
        it->misfire = -1;
        break;
    case EJ__VK_DISABLED:
        it->disabled = -1;
        break;
    }
}

/* Kinds whose value is kept while their watch is pending, even when no
 * longer wanted: the own-item kinds. */
#define KEPT_WHILE_ARMED ((1u << EJ__VK_MISFIRE) | (1u << EJ__VK_DISABLED))

/* Forget the tracked value of kinds no longer wanted (locked), except an
 * own-item kind whose watch is still pending: its value stays exact (any
 * change fires the watch, which forgets it then), and an item that is ours
 * again has it at once. Java 2.1.5's leader deletes every
 * sharding/N/instance and writes them again when it reshards: an item of
 * ours is briefly no one's, and its misfire mark (a fact in ZooKeeper)
 * must not be lost from the view on the way; the watch set for it then
 * still stands, so it would not have been read again. */
void ej__view_drop_unwanted_locked(const struct ej__view *v, struct vitem *it, uint8_t want)
{
    EJ_ASSERT_HELD(&v->mu);
    for (int k = 0; k < EJ__VK_COUNT; k++) {
        unsigned bit = 1u << k;
        if (k != EJ__VK_INSTANCE && !(want & bit) && !(it->armed & bit & KEPT_WHILE_ARMED))
            ej__view_forget_locked(v, it, k);
    }
}

bool ej__view_enter(struct ej__view *v)
{
    ej__mutex_lock(&v->mu);
    bool ok = !v->closed;
    if (ok)
        v->inflight++;
    ej__mutex_unlock(&v->mu);
    return ok;
}

void ej__view_done(struct ej__view *v)
{
    ej__mutex_lock(&v->mu);
    v->inflight--;
    pthread_cond_broadcast(&v->cv);
    ej__mutex_unlock(&v->mu);
}

/* Takes the value read into the item. Returns whether it changed; *newly:
 * kinds the item needs tracked from now on (its owner changed). */
bool ej__view_apply_value_locked(struct ej__view *v, int item, int kind, bool exists,
                                 const char *data, const struct ej_node_stat *st, uint8_t *newly)
{
    EJ_ASSERT_HELD(&v->mu);
    struct vitem *it = &v->items[item];
    it->broken &= (uint8_t) ~(1u << kind);
    int64_t now = ej__now_ms();
    bool changed = false;
    switch (kind) {
    case EJ__VK_INSTANCE: {
        const char *nv = exists ? (data ? data : "") : NULL;
        if ((nv == NULL) != (it->owner == NULL) || (nv && strcmp(nv, it->owner) != 0)) {
            changed = true;
            if (nv != NULL && strcmp(nv, v->me) != 0)
                it->misfire_mine = false;
            /* Java's leader deletes every instance node before writing
             * the new ones: the owner before that gap is the one kept. */
            if (it->owner != NULL) {
                free(it->prev_owner);
                it->prev_owner = it->owner;
            } else if (nv != NULL && it->prev_owner != NULL && strcmp(nv, it->prev_owner) == 0) {
                free(it->prev_owner); /* back to the same owner */
                it->prev_owner = NULL;
            } else {
                free(it->owner);
            }
            it->owner = nv ? strdup(nv) : NULL;
            uint8_t w = ej__view_want_locked(v, it);
            *newly = (uint8_t)(w & ~it->want);
            it->want = w;
            ej__view_drop_unwanted_locked(v, it, w);
        }
        break;
    }
    case EJ__VK_FAILOVER: {
        int64_t o = exists ? st->ephemeral_owner : 0;
        if (o != it->fo_owner) {
            changed = true;
            if (it->fo_owner > 0 && o == 0) {
                it->fo_gone_owner = it->fo_owner;
                it->fo_gone_at = now;
            }
            it->fo_owner = o;
            it->fo_czxid = exists ? st->czxid : 0;
            if (exists && st->czxid > it->fo_last_czxid)
                it->fo_last_czxid = st->czxid;
        }
        break;
    }
    case EJ__VK_MISFIRE:
        if (!exists)
            it->misfire_mine = false;
        if (it->misfire != (int8_t)exists) {
            changed = true;
            it->misfire = (int8_t)exists;
        }
        break;
    case EJ__VK_DISABLED:
        if (it->disabled != (int8_t)exists) {
            changed = true;
            it->disabled = (int8_t)exists;
        }
        break;
    }
    return changed;
}

/* An item no longer listed: gone with its whole subtree. Pending watches
 * stay registered and are ignored when they fire for an absent item. */
static void item_gone(struct ej__view *v, struct vitem *it)
{
    EJ_ASSERT_HELD(&v->mu);
    if (it->fo_owner > 0) {
        it->fo_gone_owner = it->fo_owner;
        it->fo_gone_at = ej__now_ms();
    }
    it->present = false;
    v->count--;
    free(it->owner);
    it->owner = NULL;
    free(it->prev_owner);
    it->prev_owner = NULL;
    it->fo_owner = -1;
    it->misfire = it->disabled = -1;
    it->misfire_mine = false;
    it->want = 0;
}

/* Marks the listed items present (their numbers into added, which has room
 * for n) and those not listed gone. Returns whether any went. */
bool ej__view_apply_listing_locked(struct ej__view *v, char **names, size_t n, int *added,
                                   size_t *nadded)
{
    EJ_ASSERT_HELD(&v->mu);
    bool removed_any = false;
    v->sharding_broken = false;
    bool *seen = calloc(v->cap + 1, 1);
    size_t seen_cap = v->cap;
    for (size_t i = 0; i < n; i++) {
        int item;
        if (ej__layout_parse_item(names[i], &item) != 0)
            continue; /* not an item: ignore it as ElasticJob would fail on it */
        if (item > MAX_ITEM) {
            EJ_LOG(EJ_LOG_WARN, MOD, 0, "view: ignoring item %d of job %s (above %d)", item, v->job,
                   MAX_ITEM);
            continue;
        }
        if (ensure_cap(v, item) != 0)
            continue;
        if ((size_t)item < seen_cap && seen)
            seen[item] = true;
        struct vitem *it = &v->items[item];
        if (!it->present) {
            it->present = true;
            v->count++;
            it->want = ej__view_want_locked(v, it);
            if (added)
                added[(*nadded)++] = item;
        }
    }
    for (size_t i = 0; i < seen_cap && seen; i++) {
        if (v->items[i].present && !seen[i]) {
            item_gone(v, &v->items[i]);
            removed_any = true;
        }
    }
    free(seen);
    return removed_any;
}

/* ------------------------------------------------------------------------ */

int ej__view_create(ej_registry *reg, const char *job, const char *instance_id,
                    ej__view_change_fn fn, void *user, ej__view **out)
{
    if (reg == NULL || job == NULL || instance_id == NULL || out == NULL)
        return EJ_EINVAL;
    struct ej__view *v = calloc(1, sizeof *v);
    if (v == NULL)
        return EJ_ENOMEM;
    v->reg = reg;
    v->job = strdup(job);
    v->me = strdup(instance_id);
    v->sharding_path = ej_layout_path_dup(job, EJ_LAYOUT_NODE_SHARDING, 0, NULL);
    v->fn = fn;
    v->user = user;
    ej__mutex_init(&v->mu);
    pthread_cond_init(&v->cv, NULL);
    atomic_init(&v->offline_until, 0);
    atomic_init(&v->refs, 1);
    v->gen = 1;
    if (v->job == NULL || v->me == NULL || v->sharding_path == NULL) {
        ej__view_unref(v);
        return EJ_ENOMEM;
    }
    *out = v;
    return 0;
}

void ej__view_destroy(ej__view *v)
{
    if (v == NULL)
        return;
    ej__mutex_lock(&v->mu);
    v->closed = true;
    if (!ej_registry_on_dispatch_thread(v->reg))
        while (v->inflight > 0)
            ej__mutex_wait(&v->mu, &v->cv);
    ej__mutex_unlock(&v->mu);
    ej__view_unref(v);
}

/* ------------------------------------------------------------------------ */
/* Queries                                                                   */

static int collect(ej__view *v, bool (*pred)(const struct vitem *, const void *), const void *arg,
                   int **items, size_t *n)
{
    *items = NULL;
    *n = 0;
    ej__mutex_lock(&v->mu);
    size_t k = 0;
    for (size_t i = 0; i < v->cap; i++)
        if (v->items[i].present && (pred == NULL || pred(&v->items[i], arg)))
            k++;
    int *out = k ? malloc(k * sizeof *out) : NULL;
    if (k && out == NULL) {
        ej__mutex_unlock(&v->mu);
        return EJ_ENOMEM;
    }
    size_t j = 0;
    for (size_t i = 0; i < v->cap && j < k; i++)
        if (v->items[i].present && (pred == NULL || pred(&v->items[i], arg)))
            out[j++] = (int)i;
    ej__mutex_unlock(&v->mu);
    *items = out;
    *n = j;
    return 0;
}

int ej__view_items(ej__view *v, int **items, size_t *n)
{
    if (v == NULL || items == NULL || n == NULL)
        return EJ_EINVAL;
    return collect(v, NULL, NULL, items, n);
}

static bool owned_by(const struct vitem *it, const void *arg)
{
    return it->owner != NULL && strcmp(it->owner, (const char *)arg) == 0;
}

int ej__view_items_of(ej__view *v, const char *owner, int **items, size_t *n)
{
    if (v == NULL || owner == NULL || items == NULL || n == NULL)
        return EJ_EINVAL;
    return collect(v, owned_by, owner, items, n);
}

int ej__view_get(ej__view *v, int item, struct ej__view_item *out)
{
    if (v == NULL || out == NULL || item < 0)
        return EJ_EINVAL;
    memset(out, 0, sizeof *out);
    ej__mutex_lock(&v->mu);
    if ((size_t)item >= v->cap || !v->items[item].present) {
        ej__mutex_unlock(&v->mu);
        return EJ_ENOTFOUND;
    }
    const struct vitem *it = &v->items[item];
    out->item = item;
    out->owner = it->owner ? strdup(it->owner) : NULL;
    out->failover_owner = it->fo_owner;
    out->failover_czxid = it->fo_czxid;
    out->failover_last_czxid = it->fo_last_czxid;
    out->misfire = it->misfire;
    out->misfire_mine = it->misfire_mine;
    out->disabled = it->disabled;
    ej__mutex_unlock(&v->mu);
    return 0;
}

void ej__view_item_fini(struct ej__view_item *it)
{
    if (it == NULL)
        return;
    free(it->owner);
    it->owner = NULL;
}

struct departed_arg {
    const char *id;
    int64_t since;
};

static bool departed_may_run(const struct vitem *it, const void *arg)
{
    const struct departed_arg *a = arg;
    return (it->owner != NULL && strcmp(it->owner, a->id) == 0) ||
           (it->prev_owner != NULL && strcmp(it->prev_owner, a->id) == 0) || it->fo_owner > 0 ||
           (it->fo_gone_owner > 0 && it->fo_gone_at >= a->since);
}

int ej__view_departed_items(ej__view *v, const char *id, int64_t recent_ms, int **items, size_t *n)
{
    if (v == NULL || id == NULL || items == NULL || n == NULL)
        return EJ_EINVAL;
    struct departed_arg a = {id, ej__now_ms() - recent_ms};
    return collect(v, departed_may_run, &a, items, n);
}

size_t ej__view_size(ej__view *v)
{
    if (v == NULL)
        return 0;
    ej__mutex_lock(&v->mu);
    size_t n = v->count;
    ej__mutex_unlock(&v->mu);
    return n;
}

size_t ej__view_unarmed(ej__view *v)
{
    if (v == NULL)
        return 0;
    size_t k = 0;
    ej__mutex_lock(&v->mu);
    if (v->sharding_broken || v->needs_reload)
        k++;
    for (size_t i = 0; i < v->cap; i++)
        if (v->items[i].present && v->items[i].broken)
            k++;
    ej__mutex_unlock(&v->mu);
    return k;
}

bool ej__view_matches(ej__view *v, const char *const *owners, int count)
{
    if (v == NULL)
        return false;
    ej__mutex_lock(&v->mu);
    bool ok = v->count == (size_t)count && (size_t)count <= v->cap;
    for (int i = 0; ok && i < count; i++) {
        const struct vitem *it = &v->items[i];
        const char *want = owners[i];
        ok = it->present && ((want == NULL && it->owner == NULL) ||
                             (want && it->owner && strcmp(want, it->owner) == 0));
    }
    ej__mutex_unlock(&v->mu);
    return ok;
}

void ej__view_note_misfire(ej__view *v, int item, bool set)
{
    if (v == NULL || item < 0)
        return;
    ej__mutex_lock(&v->mu);
    if ((size_t)item < v->cap && v->items[item].present && v->items[item].misfire >= 0)
        v->items[item].misfire = set;
    if ((size_t)item < v->cap && !set)
        v->items[item].misfire_mine = false;
    ej__mutex_unlock(&v->mu);
}

void ej__view_claim_misfire(ej__view *v, int item)
{
    if (v == NULL || item < 0)
        return;
    ej__mutex_lock(&v->mu);
    if ((size_t)item < v->cap && v->items[item].present)
        v->items[item].misfire_mine = true;
    ej__mutex_unlock(&v->mu);
}
