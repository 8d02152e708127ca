/*
 * The sharding view's reads: one path read with a one-shot watch, and the
 * watch callbacks that re-read it when it changes. A watch's token names
 * the view's generation, the item and the kind; a token of an older
 * generation (a session gone) is ignored. Threads: view.c's opening
 * comment.
 */
#include <stdatomic.h>
#include <stdlib.h>
#include <string.h>

#include "common/util.h"
#include "coord/view_impl.h"
#include "ejob/error.h"
#include "ejob/log.h"

#define MOD "coord"
#define KIND_SHARDING (-1) /* a token's kind: the children of sharding/ */

struct vtoken {
    struct ej__view *v;
    uint64_t gen;
    int item;
    int kind;
};

static void refresh(struct ej__view *v, int item, int kind);

static ej_layout_node kind_node(int kind)
{
    switch (kind) {
    case EJ__VK_INSTANCE:
        return EJ_LAYOUT_NODE_ITEM_INSTANCE;
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
        ej__view_done(v);
    }
    ej__view_unref(v);
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
    ej__view_unref(v);
}

static void notify(struct ej__view *v, int item, int kind)
{
    if (v->fn)
        v->fn(v->user, item, kind);
}

/* The call failed for want of a connection (not because of the path). */
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
        ej__view_schedule_repair(v);
        return false;
    }
    ej__mutex_lock(&v->mu);
    if (v->closed || (size_t)item >= v->cap || !v->items[item].present ||
        !(v->items[item].want & (1u << kind)) || (v->items[item].armed & (1u << kind))) {
        /* A watch of a kind no longer wanted fired: its value is no more
         * known. */
        if (!v->closed && (size_t)item < v->cap && !(v->items[item].want & (1u << kind)) &&
            !(v->items[item].armed & (1u << kind)))
            ej__view_forget_locked(v, &v->items[item], kind);
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
    ej__view_schedule_repair(v);
}

/* (Re)reads one kind of one item with a watch, and tells the listener
 * when its value changed. */
void ej__view_refresh_item(struct ej__view *v, int item, int kind)
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
    bool changed = ej__view_apply_value_locked(v, item, kind, exists, data, &st, &newly);
    ej__mutex_unlock(&v->mu);
    free(data);
    for (int k = 0; k < EJ__VK_COUNT; k++)
        if (newly & (1u << k))
            ej__view_refresh_item(v, item, k);
    if (changed)
        notify(v, item, kind);
}

/* Marks the sharding/ watch as armed, when it is to be read now: false
 * when offline (repair scheduled), closed or already armed. */
static bool arm_sharding(struct ej__view *v, uint64_t *gen, bool *absent_first)
{
    if (offline(v)) {
        ej__mutex_lock(&v->mu);
        v->sharding_broken = true;
        ej__mutex_unlock(&v->mu);
        ej__view_schedule_repair(v);
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

/* (Re)lists sharding/ with a watch, arms the new items' watches, and
 * tells the listener when items came or went. */
void ej__view_refresh_sharding(struct ej__view *v)
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
        ej__view_schedule_repair(v);
        return;
    }
    int *added = n ? malloc(n * sizeof *added) : NULL;
    size_t nadded = 0;
    ej__mutex_lock(&v->mu);
    bool removed_any = ej__view_apply_listing_locked(v, names, n, added, &nadded);
    ej__mutex_unlock(&v->mu);
    ej_registry_free_names(names);
    ej__view_arm_bulk(v, added, nadded);
    free(added);
    if (nadded || removed_any)
        notify(v, -1, KIND_SHARDING);
}

static void refresh(struct ej__view *v, int item, int kind)
{
    if (kind == KIND_SHARDING)
        ej__view_refresh_sharding(v);
    else
        ej__view_refresh_item(v, item, kind);
}
