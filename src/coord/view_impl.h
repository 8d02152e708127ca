/*
 * The sharding view's state, shared by the files of the view:
 *
 *   view.c        the item table and its lock: what a value read means for
 *                 an item, the listing of sharding/, lifetime, queries
 *   view_watch.c  one path read with a one-shot watch, the watch callbacks
 *                 and what they re-read (an item's kind, sharding/)
 *   view_load.c   arming every watch at once (start-up, a new session, a
 *                 repair, failover switched): the loader threads
 *                 ("ej-view-load") and the tasks posted to the dispatch
 *                 thread
 *
 * Which thread writes what, and what mu guards: view.c's opening comment.
 * Not part of the module's internal API (internal.h): only these files.
 */
#ifndef EJ_COORD_VIEW_IMPL_H
#define EJ_COORD_VIEW_IMPL_H

#include <pthread.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "common/check.h"
#include "coord/internal.h"

struct vitem {
    bool present;
    char *owner;
    /* The owner before the last change of owner (NULL: none): it may
     * still run the item (ej__view_departed_items). */
    char *prev_owner;
    int64_t fo_owner; /* -1 untracked */
    int64_t fo_czxid;
    int64_t fo_gone_owner, fo_gone_at; /* last removed failover (tombstone) */
    int64_t fo_last_czxid;             /* czxid of the latest failover seen, kept */
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
    /* Set by ej__view_create, read-only after. */
    ej_registry *reg;
    char *job;
    char *me;
    char *sharding_path;
    ej__view_change_fn fn;
    void *user;

    ej__mutex mu;      /* everything below but the atomics (view.c) */
    pthread_cond_t cv; /* inflight went down (ej__view_destroy waits) */
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

/* ---- view.c: the item table (every _locked function: v->mu held,
 * checked) ---- */

/* Drops a reference; the last one frees the view. */
void ej__view_unref(struct ej__view *v);
/* Work on the view happens between ej__view_enter() (false: closed, do
 * nothing) and ej__view_done(); ej__view_destroy waits for it, and none
 * starts after. */
bool ej__view_enter(struct ej__view *v);
void ej__view_done(struct ej__view *v);
/* Which kinds an item needs tracked (bits of EJ__VK_*). */
uint8_t ej__view_want_locked(const struct ej__view *v, const struct vitem *it);
/* Forgets the tracked value of one kind. */
void ej__view_forget_locked(const struct ej__view *v, struct vitem *it, int kind);
/* Forgets the tracked value of the kinds not in want, except an own-item
 * kind whose watch is still pending. */
void ej__view_drop_unwanted_locked(const struct ej__view *v, struct vitem *it, uint8_t want);
/* Takes a value read (exists, data: the instance node's, st) into the
 * item's kind. Returns whether it changed; *newly: kinds the item needs
 * tracked from now on (its owner changed). */
bool ej__view_apply_value_locked(struct ej__view *v, int item, int kind, bool exists,
                                 const char *data, const struct ej_node_stat *st, uint8_t *newly);
/* Takes the listing of sharding/ (names, n): marks the listed items present
 * (their numbers into added, which has room for n; may be NULL) and those
 * not listed gone. Returns whether any went. */
bool ej__view_apply_listing_locked(struct ej__view *v, char **names, size_t n, int *added,
                                   size_t *nadded);

/* ---- view_watch.c: reading with a watch (no lock held on entry) ---- */

/* (Re)reads one kind of one item with a watch, and tells the change
 * function when its value changed. */
void ej__view_refresh_item(struct ej__view *v, int item, int kind);
/* (Re)lists sharding/ with a watch, arms the new items' watches, and tells
 * the change function when items came or went. Dispatch thread. */
void ej__view_refresh_sharding(struct ej__view *v);

/* ---- view_load.c: arming many watches ---- */

/* Arms the wanted, unarmed watches of items (n of them; items NULL: every
 * present item below n), on the calling thread and, when there are many,
 * on loader threads too; returns when all are done. Dispatch thread. */
void ej__view_arm_bulk(struct ej__view *v, const int *items, size_t n);
/* Posts, once, a task that re-arms what is broken in a second. */
void ej__view_schedule_repair(struct ej__view *v);

#endif
