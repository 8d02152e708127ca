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
 *   - sharding/{n}/running  exists watch, only items owned by OTHER instances
 *                           and only when failover is on (crash detection);
 *   - sharding/{n}/failover exists watch, all items, when failover is on;
 *   - sharding/{n}/misfire, sharding/{n}/disabled: exists watches, own items.
 * An instance never watches the running nodes of its own items (it knows
 * them), so a steady fire costs it only its own writes, plus two cheap
 * exists calls per item of another instance when failover is on.
 *
 * Every watch callback and every (re)load runs on the registry's dispatch
 * thread, in the order ZooKeeper produced the changes, so the view applies
 * them in order; readers on other threads take the mutex.
 */
#include <inttypes.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "common/check.h"
#include "common/util.h"
#include "coord/internal.h"
#include "ejob/error.h"
#include "ejob/log.h"

#define MOD "coord"
#define MAX_ITEM 4000000 /* items beyond this are ignored (logged) */
#define KIND_SHARDING (-1)

struct vitem {
    bool present;
    char *owner;
    int64_t run_owner, fo_owner; /* -1 untracked */
    int64_t run_czxid, fo_czxid;
    int64_t run_gone_owner, run_gone_at; /* last removed running (tombstone) */
    int64_t fo_gone_owner, fo_gone_at;
    int8_t misfire, disabled; /* -1 untracked */
    /* The misfire mark is this instance's own (ej__view_claim_misfire):
     * it stands for a fire time of ours. Dropped when the node goes or
     * the item becomes another instance's (a mark found on an item that
     * became ours is its previous owner's). */
    bool misfire_mine;
    uint8_t armed;  /* a watch is pending (bit per kind) */
    uint8_t want;   /* kinds tracked now */
    uint8_t broken; /* arming failed; repair later */
};

struct ej__view {
    ej_registry *reg;
    char *job;
    char *me;
    char *sharding_path;
    ej__view_change_fn fn;
    void *user;

    ej__mutex mu;
    pthread_cond_t cv;
    atomic_int refs;
    int inflight; /* callbacks and tasks working now */
    bool closed;
    bool failover;
    uint64_t gen;
    bool sharding_armed, sharding_broken, needs_reload, repair_posted;
    bool expect_absent; /* ej__view_expect_absent: ask exists first, once */
    /* After a call fails for want of a connection, others are not tried
     * until this time (mono ms): each would block the dispatch thread for
     * the registry's retries, and the dispatch thread is the one that
     * re-establishes the session. The repair task tries again. */
    atomic_llong offline_until;
    struct vitem *items;
    size_t cap;   /* items has cap entries */
    size_t count; /* items present */
};

struct vtoken {
    struct ej__view *v;
    uint64_t gen;
    int item;
    int kind;
};

static void view_unref(struct ej__view *v)
{
    if (atomic_fetch_sub(&v->refs, 1) != 1)
        return;
    for (size_t i = 0; i < v->cap; i++)
        free(v->items[i].owner);
    free(v->items);
    free(v->job);
    free(v->me);
    free(v->sharding_path);
    ej__mutex_destroy(&v->mu);
    pthread_cond_destroy(&v->cv);
    free(v);
}

static ej_layout_node kind_node(int kind)
{
    switch (kind) {
    case EJ__VK_INSTANCE:
        return EJ_LAYOUT_NODE_ITEM_INSTANCE;
    case EJ__VK_RUNNING:
        return EJ_LAYOUT_NODE_ITEM_RUNNING;
    case EJ__VK_FAILOVER:
        return EJ_LAYOUT_NODE_ITEM_FAILOVER;
    case EJ__VK_MISFIRE:
        return EJ_LAYOUT_NODE_ITEM_MISFIRE;
    case EJ__VK_DISABLED:
        return EJ_LAYOUT_NODE_ITEM_DISABLED;
    default:
        return EJ_LAYOUT_NODE_COUNT_; /* no path */
    }
}

static void item_init(struct vitem *it)
{
    memset(it, 0, sizeof *it);
    it->run_owner = it->fo_owner = -1;
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
static uint8_t want_of(const struct ej__view *v, const struct vitem *it)
{
    EJ_ASSERT_HELD(&v->mu);
    uint8_t w = 1u << EJ__VK_INSTANCE;
    bool mine = it->owner != NULL && strcmp(it->owner, v->me) == 0;
    if (mine)
        w |= (1u << EJ__VK_MISFIRE) | (1u << EJ__VK_DISABLED);
    if (v->failover) {
        w |= 1u << EJ__VK_FAILOVER;
        if (!mine)
            w |= 1u << EJ__VK_RUNNING;
    }
    return w;
}

/* Forget the tracked value of one kind (locked). */
static void forget(struct vitem *it, int kind)
{
    switch (kind) {
    case EJ__VK_RUNNING:
        it->run_owner = -1;
        break;
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
static void drop_unwanted(struct vitem *it, uint8_t want)
{
    for (int k = 0; k < EJ__VK_COUNT; k++) {
        unsigned bit = 1u << k;
        if (k != EJ__VK_INSTANCE && !(want & bit) && !(it->armed & bit & KEPT_WHILE_ARMED))
            forget(it, k);
    }
}

static void schedule_repair(struct ej__view *v);
static void refresh(struct ej__view *v, int item, int kind);

/* Work on the view happens between view_enter() and view_done();
 * ej__view_destroy waits for it, and none starts after. */
static bool view_enter(struct ej__view *v)
{
    ej__mutex_lock(&v->mu);
    bool ok = !v->closed;
    if (ok)
        v->inflight++;
    ej__mutex_unlock(&v->mu);
    return ok;
}

static void view_done(struct ej__view *v)
{
    ej__mutex_lock(&v->mu);
    v->inflight--;
    pthread_cond_broadcast(&v->cv);
    ej__mutex_unlock(&v->mu);
}

static void token_cb(ej_registry *reg, ej_reg_watch_event ev, const char *path, void *user)
{
    (void)reg;
    (void)path;
    struct vtoken *t = user;
    struct ej__view *v = t->v;
    int item = t->item, kind = t->kind;
    bool act = false;
    ej__mutex_lock(&v->mu);
    if (!v->closed && t->gen == v->gen) {
        if (kind == KIND_SHARDING)
            v->sharding_armed = false;
        else if ((size_t)item < v->cap)
            v->items[item].armed &= (uint8_t) ~(1u << kind);
        if (ev == EJ_REG_WATCH_CANCELLED) {
            v->needs_reload = true; /* the new session reloads everything */
        } else {
            act = true;
            v->inflight++;
        }
    }
    ej__mutex_unlock(&v->mu);
    free(t);
    if (act) {
        refresh(v, item, kind);
        view_done(v);
    }
    view_unref(v);
}

static struct vtoken *token_new(struct ej__view *v, uint64_t gen, int item, int kind)
{
    struct vtoken *t = malloc(sizeof *t);
    if (t == NULL)
        return NULL;
    t->v = v;
    t->gen = gen;
    t->item = item;
    t->kind = kind;
    atomic_fetch_add(&v->refs, 1);
    return t;
}

/* A token whose watch was not set. */
static void token_drop(struct vtoken *t)
{
    struct ej__view *v = t->v;
    free(t);
    view_unref(v);
}

static void notify(struct ej__view *v, int item, int kind)
{
    if (v->fn)
        v->fn(v->user, item, kind);
}

/* Read one item path and leave a watch. Dispatch thread. */
static bool conn_error(int rc)
{
    return rc == EJ_ECONNLOSS || rc == EJ_ESESSIONEXPIRED || rc == EJ_ECLOSED || rc == EJ_ETIMEDOUT;
}

static bool offline(struct ej__view *v)
{
    return ej__mono_ms() < atomic_load(&v->offline_until);
}

/* Marks the kind's watch of an item as armed, when it is to be read now:
 * false when offline (repair scheduled), closed, not wanted or already
 * armed. *gen: the view's generation the watch belongs to. */
static bool arm_item(struct ej__view *v, int item, int kind, uint64_t *gen)
{
    if (offline(v)) {
        ej__mutex_lock(&v->mu);
        if ((size_t)item < v->cap)
            v->items[item].broken |= (uint8_t)(1u << kind);
        ej__mutex_unlock(&v->mu);
        schedule_repair(v);
        return false;
    }
    ej__mutex_lock(&v->mu);
    if (v->closed || (size_t)item >= v->cap || !v->items[item].present ||
        !(v->items[item].want & (1u << kind)) || (v->items[item].armed & (1u << kind))) {
        /* A watch of a kind no longer wanted fired: its value is no more
         * known. */
        if (!v->closed && (size_t)item < v->cap && !(v->items[item].want & (1u << kind)) &&
            !(v->items[item].armed & (1u << kind)))
            forget(&v->items[item], kind);
        ej__mutex_unlock(&v->mu);
        return false;
    }
    v->items[item].armed |= (uint8_t)(1u << kind);
    *gen = v->gen;
    ej__mutex_unlock(&v->mu);
    return true;
}

/* Reads the node with a watch (token t): the instance node's data, the
 * other kinds' existence and stat. */
static int read_watched(struct ej__view *v, const char *path, int kind, struct vtoken *t,
                        bool *exists, char **data, struct ej_node_stat *st)
{
    if (kind != EJ__VK_INSTANCE)
        return ej_registry_exists_watch(v->reg, path, token_cb, t, exists, st);
    int rc = ej_registry_get_watch(v->reg, path, token_cb, t, data, NULL, st);
    if (rc == 0) {
        *exists = true;
    } else if (rc == EJ_ENONODE) {
        rc = ej_registry_exists_watch(v->reg, path, token_cb, t, exists, st);
        if (rc == 0 && *exists) {
            /* Created in between: the exists watch now covers changes;
             * read the data without another watch. */
            int grc = ej_registry_get(v->reg, path, data, NULL, st);
            if (grc == EJ_ENONODE)
                *exists = false; /* the watch reports the delete */
        }
    }
    return rc;
}

/* The watch could not be set: the item's kind is broken until the repair. */
static void watch_failed(struct ej__view *v, int item, int kind, int rc, const char *path)
{
    ej__mutex_lock(&v->mu);
    if ((size_t)item < v->cap) {
        v->items[item].armed &= (uint8_t) ~(1u << kind);
        v->items[item].broken |= (uint8_t)(1u << kind);
    }
    ej__mutex_unlock(&v->mu);
    if (conn_error(rc))
        atomic_store(&v->offline_until, ej__mono_ms() + 1000);
    EJ_LOG(EJ_LOG_WARN, MOD, rc, "view: cannot watch %s: %s", path ? path : "?",
           ej_registry_errmsg(v->reg));
    schedule_repair(v);
}

/* Takes the value read into the item. Returns whether it changed; *newly:
 * kinds the item needs tracked from now on (its owner changed). */
static bool apply_value(struct ej__view *v, int item, int kind, bool exists, const char *data,
                        const struct ej_node_stat *st, uint8_t *newly)
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
            free(it->owner);
            it->owner = nv ? strdup(nv) : NULL;
            uint8_t w = want_of(v, it);
            *newly = (uint8_t)(w & ~it->want);
            it->want = w;
            drop_unwanted(it, w);
        }
        break;
    }
    case EJ__VK_RUNNING: {
        int64_t o = exists ? st->ephemeral_owner : 0;
        if (o != it->run_owner) {
            changed = true;
            if (it->run_owner > 0 && o == 0) {
                it->run_gone_owner = it->run_owner;
                it->run_gone_at = now;
            }
            EJ_LOG(EJ_LOG_DEBUG, MOD, 0, "view %s: item %d running 0x%" PRIx64 " -> 0x%" PRIx64,
                   v->job, item, (uint64_t)it->run_owner, (uint64_t)o);
            it->run_owner = o;
            it->run_czxid = exists ? st->czxid : 0;
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

/* (Re)reads one kind of one item with a watch, and tells the listener
 * when its value changed. */
static void refresh_item(struct ej__view *v, int item, int kind)
{
    uint64_t gen = 0;
    if (!arm_item(v, item, kind, &gen))
        return;
    char *path = ej_layout_path_dup(v->job, kind_node(kind), item, NULL);
    struct vtoken *t = token_new(v, gen, item, kind);
    bool exists = false;
    char *data = NULL;
    struct ej_node_stat st;
    memset(&st, 0, sizeof st);
    int rc = (path && t) ? read_watched(v, path, kind, t, &exists, &data, &st) : EJ_ENOMEM;
    if (rc != 0) {
        if (t)
            token_drop(t);
        watch_failed(v, item, kind, rc, path);
        free(path);
        return;
    }
    free(path);
    uint8_t newly = 0;
    ej__mutex_lock(&v->mu);
    bool changed = apply_value(v, item, kind, exists, data, &st, &newly);
    ej__mutex_unlock(&v->mu);
    free(data);
    for (int k = 0; k < EJ__VK_COUNT; k++)
        if (newly & (1u << k))
            refresh_item(v, item, k);
    if (changed)
        notify(v, item, kind);
}

/* Arming many items one request at a time is slow (a synchronous round
 * trip each); a few threads pipeline them on the one connection. The
 * dispatch thread waits for them, so events still apply in order. */
struct bulk {
    struct ej__view *v;
    const int *items; /* NULL: every present item below n */
    size_t n;
    atomic_size_t next;
};

static void arm_one(struct ej__view *v, int item)
{
    ej__mutex_lock(&v->mu);
    uint8_t todo = 0;
    if ((size_t)item < v->cap && v->items[item].present && !v->closed) {
        v->items[item].want = want_of(v, &v->items[item]);
        drop_unwanted(&v->items[item], v->items[item].want);
        todo = (uint8_t)(v->items[item].want & ~v->items[item].armed);
    }
    ej__mutex_unlock(&v->mu);
    for (int k = 0; k < EJ__VK_COUNT; k++)
        if (todo & (1u << k))
            refresh_item(v, item, k);
}

static void *bulk_worker(void *p)
{
    struct bulk *b = p;
    size_t i;
    while ((i = atomic_fetch_add(&b->next, 1)) < b->n)
        arm_one(b->v, b->items ? b->items[i] : (int)i);
    return NULL;
}

#define BULK_THREADS 8
#define BULK_MIN 256

static void arm_bulk(struct ej__view *v, const int *items, size_t n)
{
    struct bulk b = {.v = v, .items = items, .n = n};
    atomic_init(&b.next, 0);
    pthread_t th[BULK_THREADS];
    int nth = 0;
    if (n >= BULK_MIN)
        for (; nth < BULK_THREADS - 1 && (size_t)(nth + 1) * BULK_MIN <= n; nth++)
            if (pthread_create(&th[nth], NULL, bulk_worker, &b) != 0)
                break;
    bulk_worker(&b);
    for (int i = 0; i < nth; i++)
        pthread_join(th[i], NULL);
}

/* Read the item set and leave a children watch. Dispatch thread. */
/* Marks the sharding/ watch as armed, when it is to be read now: false
 * when offline (repair scheduled), closed or already armed. */
static bool arm_sharding(struct ej__view *v, uint64_t *gen, bool *absent_first)
{
    if (offline(v)) {
        ej__mutex_lock(&v->mu);
        v->sharding_broken = true;
        ej__mutex_unlock(&v->mu);
        schedule_repair(v);
        return false;
    }
    ej__mutex_lock(&v->mu);
    if (v->closed || v->sharding_armed) {
        ej__mutex_unlock(&v->mu);
        return false;
    }
    v->sharding_armed = true;
    *gen = v->gen;
    *absent_first = v->expect_absent;
    v->expect_absent = false;
    ej__mutex_unlock(&v->mu);
    return true;
}

/* Lists sharding/ with a watch (children, or exists while it is missing).
 * On success *names (caller frees; NULL when missing). */
static int list_sharding(struct ej__view *v, uint64_t gen, bool absent_first, char ***names,
                         size_t *n)
{
    int rc = EJ_ECONNLOSS;
    struct vtoken *t = NULL; /* a token no watch holds yet */
    for (int attempt = 0; attempt < 5; attempt++) {
        t = token_new(v, gen, 0, KIND_SHARDING);
        if (t == NULL) {
            rc = EJ_ENOMEM;
            break;
        }
        /* A job new to ZooKeeper has no sharding/ yet: the exists watch
         * alone then does, without a children read failing first. */
        if (!absent_first || attempt > 0) {
            rc = ej_registry_children_watch(v->reg, v->sharding_path, token_cb, t, EJ_REG_UNSORTED,
                                            names, n);
            if (rc == 0) {
                t = NULL;
                break;
            }
            if (rc != EJ_ENONODE)
                break;
        }
        bool exists = false;
        rc = ej_registry_exists_watch(v->reg, v->sharding_path, token_cb, t, &exists, NULL);
        if (rc != 0)
            break;
        t = NULL; /* the exists watch holds it */
        if (!exists) {
            *names = NULL;
            *n = 0;
            break;
        }
        /* Created in between: set the children watch too (a second pending
         * watch for this path only costs one extra read when it fires). */
        rc = EJ_ECONNLOSS;
    }
    if (t)
        token_drop(t);
    return rc;
}

/* An item no longer listed: gone with its whole subtree. Pending watches
 * stay registered and are ignored when they fire for an absent item. */
static void item_gone(struct ej__view *v, struct vitem *it)
{
    EJ_ASSERT_HELD(&v->mu);
    if (it->run_owner > 0) {
        it->run_gone_owner = it->run_owner;
        it->run_gone_at = ej__now_ms();
    }
    if (it->fo_owner > 0) {
        it->fo_gone_owner = it->fo_owner;
        it->fo_gone_at = ej__now_ms();
    }
    it->present = false;
    v->count--;
    free(it->owner);
    it->owner = NULL;
    it->run_owner = it->fo_owner = -1;
    it->misfire = it->disabled = -1;
    it->misfire_mine = false;
    it->want = 0;
}

/* Marks the listed items present (their numbers into added, which has room
 * for n) and those not listed gone. Returns whether any went. */
static bool apply_listing(struct ej__view *v, char **names, size_t n, int *added, size_t *nadded)
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
            it->want = want_of(v, it);
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

/* (Re)lists sharding/ with a watch, arms the new items' watches, and
 * tells the listener when items came or went. */
static void refresh_sharding(struct ej__view *v)
{
    uint64_t gen = 0;
    bool absent_first = false;
    if (!arm_sharding(v, &gen, &absent_first))
        return;
    char **names = NULL;
    size_t n = 0;
    int rc = list_sharding(v, gen, absent_first, &names, &n);
    if (rc != 0) {
        ej__mutex_lock(&v->mu);
        v->sharding_armed = false;
        v->sharding_broken = true;
        ej__mutex_unlock(&v->mu);
        if (conn_error(rc))
            atomic_store(&v->offline_until, ej__mono_ms() + 1000);
        EJ_LOG(EJ_LOG_WARN, MOD, rc, "view: cannot watch %s: %s", v->sharding_path,
               ej_registry_errmsg(v->reg));
        schedule_repair(v);
        return;
    }
    int *added = n ? malloc(n * sizeof *added) : NULL;
    size_t nadded = 0;
    ej__mutex_lock(&v->mu);
    bool removed_any = apply_listing(v, names, n, added, &nadded);
    ej__mutex_unlock(&v->mu);
    ej_registry_free_names(names);
    arm_bulk(v, added, nadded);
    free(added);
    if (nadded || removed_any)
        notify(v, -1, KIND_SHARDING);
}

static void refresh(struct ej__view *v, int item, int kind)
{
    if (kind == KIND_SHARDING)
        refresh_sharding(v);
    else
        refresh_item(v, item, kind);
}

/* Arm every wanted path that has no watch. Dispatch thread. */
static void rearm_all(struct ej__view *v)
{
    refresh_sharding(v);
    ej__mutex_lock(&v->mu);
    size_t cap = v->cap;
    ej__mutex_unlock(&v->mu);
    arm_bulk(v, NULL, cap);
}

static void repair_task(ej_registry *reg, void *user)
{
    (void)reg;
    struct ej__view *v = user;
    ej__mutex_lock(&v->mu);
    v->repair_posted = false;
    ej__mutex_unlock(&v->mu);
    if (view_enter(v)) {
        if (ej_registry_is_connected(v->reg))
            rearm_all(v);
        else
            schedule_repair(v);
        view_done(v);
    }
    view_unref(v);
}

static void schedule_repair(struct ej__view *v)
{
    ej__mutex_lock(&v->mu);
    bool post = !v->closed && !v->repair_posted;
    if (post)
        v->repair_posted = true;
    ej__mutex_unlock(&v->mu);
    if (!post)
        return;
    atomic_fetch_add(&v->refs, 1);
    if (ej_registry_post_after(v->reg, 1000, repair_task, v) != 0) {
        ej__mutex_lock(&v->mu);
        v->repair_posted = false;
        ej__mutex_unlock(&v->mu);
        view_unref(v);
    }
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
        view_unref(v);
        return EJ_ENOMEM;
    }
    *out = v;
    return 0;
}

struct sync_task {
    struct ej__view *v;
    int what; /* 0 load, 1 failover on, 2 failover off, 3 new session */
};

static void view_task(ej_registry *reg, void *user)
{
    (void)reg;
    struct sync_task *st = user;
    struct ej__view *v = st->v;
    if (view_enter(v)) {
        ej__mutex_lock(&v->mu);
        if (st->what == 1 || st->what == 2)
            v->failover = st->what == 1;
        ej__mutex_unlock(&v->mu);
        rearm_all(v);
        view_done(v);
    }
    free(st);
    view_unref(v);
}

static int post_task(struct ej__view *v, int what)
{
    struct sync_task *st = malloc(sizeof *st);
    if (st == NULL)
        return EJ_ENOMEM;
    st->v = v;
    st->what = what;
    atomic_fetch_add(&v->refs, 1);
    int rc = ej_registry_post(v->reg, view_task, st);
    if (rc != 0) {
        free(st);
        view_unref(v);
    }
    return rc;
}

int ej__view_start(ej__view *v)
{
    if (v == NULL)
        return EJ_EINVAL;
    if (ej_registry_on_dispatch_thread(v->reg)) {
        if (view_enter(v)) {
            rearm_all(v);
            view_done(v);
        }
        return 0;
    }
    int rc = post_task(v, 0);
    if (rc != 0)
        return rc;
    /* The load runs on the dispatch thread; wait for it (a large job may
     * take a while: one read per item). */
    for (;;) {
        rc = ej_registry_barrier(v->reg, 10000);
        if (rc != EJ_ETIMEDOUT)
            return rc;
    }
}

void ej__view_expect_absent(ej__view *v)
{
    if (v == NULL)
        return;
    ej__mutex_lock(&v->mu);
    v->expect_absent = true;
    ej__mutex_unlock(&v->mu);
}

void ej__view_set_failover(ej__view *v, bool on)
{
    if (v == NULL)
        return;
    ej__mutex_lock(&v->mu);
    bool same = v->failover == on;
    ej__mutex_unlock(&v->mu);
    if (!same)
        post_task(v, on ? 1 : 2);
}

void ej__view_on_new_session(ej__view *v)
{
    if (v == NULL)
        return;
    atomic_store(&v->offline_until, 0);
    ej__mutex_lock(&v->mu);
    v->gen++;
    v->sharding_armed = false;
    v->needs_reload = false;
    for (size_t i = 0; i < v->cap; i++)
        v->items[i].armed = 0;
    ej__mutex_unlock(&v->mu);
    if (ej_registry_on_dispatch_thread(v->reg) && view_enter(v)) {
        rearm_all(v);
        view_done(v);
    } else if (!ej_registry_on_dispatch_thread(v->reg)) {
        post_task(v, 3);
    }
}

void ej__view_repair(ej__view *v)
{
    if (v == NULL)
        return;
    ej__mutex_lock(&v->mu);
    bool reload = v->needs_reload;
    ej__mutex_unlock(&v->mu);
    if (reload) {
        ej__view_on_new_session(v);
        return;
    }
    if (ej_registry_on_dispatch_thread(v->reg) && view_enter(v)) {
        rearm_all(v);
        view_done(v);
    } else if (!ej_registry_on_dispatch_thread(v->reg)) {
        post_task(v, 0);
    }
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
    view_unref(v);
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
    out->running_owner = it->run_owner;
    out->failover_owner = it->fo_owner;
    out->running_czxid = it->run_czxid;
    out->failover_czxid = it->fo_czxid;
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

struct sess_arg {
    int64_t session;
    int64_t since;
};

static bool of_session(const struct vitem *it, const void *arg)
{
    const struct sess_arg *a = arg;
    return it->run_owner == a->session || it->fo_owner == a->session ||
           (it->run_gone_owner == a->session && it->run_gone_at >= a->since) ||
           (it->fo_gone_owner == a->session && it->fo_gone_at >= a->since);
}

int ej__view_items_of_session(ej__view *v, int64_t session, int64_t recent_ms, int **items,
                              size_t *n)
{
    if (v == NULL || items == NULL || n == NULL || session <= 0)
        return EJ_EINVAL;
    struct sess_arg a = {session, ej__now_ms() - recent_ms};
    return collect(v, of_session, &a, items, n);
}

size_t ej__view_running_count(ej__view *v, int64_t own_session)
{
    if (v == NULL)
        return 0;
    size_t k = 0;
    ej__mutex_lock(&v->mu);
    for (size_t i = 0; i < v->cap; i++)
        if (v->items[i].present && v->items[i].run_owner > 0 &&
            v->items[i].run_owner != own_session)
            k++;
    ej__mutex_unlock(&v->mu);
    return k;
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
