/*
 * The coordination module: what makes an ejob instance an ElasticJob-Lite
 * 2.1.5 peer in ZooKeeper. Internal API used by the runtime module.
 *
 *   waiter.c     waiting, bounded, for a one-shot watch (latch, guarantee)
 *   latch.c      a Curator-LeaderLatch-compatible mutex (bounded waits;
 *                blocking, or continued on an owner's queue)
 *   view.c       a watch-based view of /{job}/sharding that costs no reads
 *                in steady state (see docs/coordination.md): the item table,
 *                queries; view_watch.c its watches, view_load.c its loads
 *                (view_impl.h)
 *   coord.c      the per-job coordinator: state, tree caches of config,
 *                servers, instances and leader, control tasks, start-up
 *   election.c   election, the leader cache, healing a stale leader
 *   config_watch.c  the config node
 *   membership.c servers/instances (console operations), registration,
 *                connection states, the fence
 *   reconcile.c  ElasticJob's ReconcileService
 *   shard.c      the sharding service (lazy resharding by the leader, in
 *                chunked transactions)
 *   failover.c   crash detection, failover items, taking them over
 *   running.c    running / misfire / failover nodes around item runs,
 *                clock-skew check
 *   guarantee.c  distribute-once listener bookkeeping (guarantee/ nodes)
 *   fire_plan.c  which items a fire runs, or why none: a pure function
 *                (fire_plan.h)
 *   fire_request.c  a fire's requests: the plan's one look at the state,
 *                the start of a batch, the end of a failover run
 *   snapshot.c   what other threads read of a coordinator: a published,
 *                immutable snapshot (the getters below read it, lock-free
 *                of the coordinator's state lock)
 *
 * Threads. Every ZooKeeper callback arrives on the registry's dispatch
 * thread; handlers there only update state, do short ZooKeeper writes and
 * hand longer work (elections, which wait for watches delivered on that same
 * thread) to control tasks of the scheduler. Waiting functions below
 * (marked "blocks") must never run on the dispatch thread; they return
 * EJ_EINVAL there. All other functions are thread-safe.
 */
#ifndef EJ_COORD_INTERNAL_H
#define EJ_COORD_INTERNAL_H

#include <stdarg.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "ejob/common.h"
#include "common/check.h"
#include "ejob/registry.h"
#include "coord/fire_plan.h"
#include "layout/internal.h"

struct ej_job_config; /* ejob/config.h */

/* ------------------------------------------------------------------------ */
/* waiter.c: wait, bounded, for a one-shot watch                              */

typedef struct ej__waiter ej__waiter;

/* A waiter with two references: the caller's and the watch's. Pass
 * ej__waiter_watch with the waiter as the watch callback; when setting the
 * watch fails, unref twice. NULL on allocation failure. */
ej__waiter *ej__waiter_new(void);
void ej__waiter_watch(ej_registry *reg, ej_reg_watch_event ev, const char *path, void *user);
/* Wait until the watch fired or deadline_ms (mono). True when it fired. */
bool ej__waiter_wait(ej__waiter *w, int64_t deadline_ms);
void ej__waiter_unref(ej__waiter *w);

/* ------------------------------------------------------------------------ */
/* latch.c                                                                   */

typedef struct ej__latch ej__latch;

/*
 * Acquire the latch at latch_path (namespace-relative, e.g.
 * "/job/leader/election/latch"), as Curator's LeaderLatch start()+await():
 * an ephemeral sequential child "_c_{uuid}-latch-{seq}" (parents created as
 * containers; NONODE on a parent the server reaped is handled), the lowest
 * sequence holds it, others watch their immediate predecessor with getData.
 * Latch children that are not ephemeral (left by something that is not a
 * latch client) can never be released: they are deleted with a warning.
 *
 * Waits at most timeout_ms (logging what it waits for, at WARN once it has
 * waited longer than 2 s). Blocks; not on the dispatch thread.
 * Returns 0 and *out (release with ej__latch_release); EJ_ETIMEDOUT (own
 * node deleted again); EJ_EINVAL; EJ_ECLOSED; registry errors.
 */
int ej__latch_acquire(ej_registry *reg, const char *latch_path, int timeout_ms, ej__latch **out);
/* ej__latch_acquire that, while it waits, asks unneeded(arg) every 50 ms
 * (from the caller's thread, so it must not block) and gives up with
 * EJ_EAGAIN, its own node deleted, when it says true. */
int ej__latch_acquire_unless(ej_registry *reg, const char *latch_path, int timeout_ms,
                             bool (*unneeded)(void *), void *arg, ej__latch **out);

/* Release: delete the own node (retried) and free. NULL ok. Any thread but
 * the dispatch thread. */
void ej__latch_release(ej__latch *l);

/* The result of ej__latch_acquire_async, called exactly once: latch
 * (acquired; release it with ej__latch_release) and rc 0, or latch NULL
 * and rc != 0 (own node deleted): EJ_ETIMEDOUT, EJ_ECLOSED (post refused a
 * continuation), or the registry's error. */
typedef void (*ej__latch_done_fn)(void *arg, ej__latch *latch, int rc);

/* Queue fn(task) on the owner's thread (for a coordinator: its serial
 * queue). Returns 0, after which fn(task) must run exactly once (an owner
 * that closes runs or drains what it accepted), or an error (fn is never
 * called). Called on the acquiring thread and on the dispatch thread: it
 * must not block. */
typedef int (*ej__latch_post_fn)(void *post_arg, void (*fn)(void *task), void *task);

/*
 * The same latch, same protocol and same nodes as ej__latch_acquire, without
 * blocking a thread while it waits. The first step (create the node, look
 * at the children, set the watch on the predecessor) runs on the calling
 * thread, which must not be the dispatch thread; then it returns. A wait is
 * a one-shot watch on the predecessor plus one timer at the deadline
 * (ej_registry_post_after); whichever wakes first posts the next step
 * with post, and that step runs on the owner's thread (look again; acquire,
 * wait again or give up). The dispatch thread makes no synchronous
 * registry call for it, except the one delete below when the owner closed.
 *
 * Threads of done: always through post, on the owner's thread, never
 * before this returns (also when the latch was free at once); except
 * EJ_ECLOSED: when post refuses a continuation, the dispatch thread that
 * woke deletes the own node (one synchronous delete there: the registry
 * has no asynchronous one) and calls done(arg, NULL, EJ_ECLOSED) itself;
 * done must then return quickly and make no synchronous registry call.
 *
 * Returns 0: done will be called exactly once. Otherwise done is never
 * called and no node is left: EJ_EINVAL (an argument NULL, or called on
 * the dispatch thread), EJ_ENOMEM, EJ_ECLOSED (post refused the first
 * step's result). reg must outlive the acquisition: close the owner (post
 * refuses) before destroying reg; the pending watch and timer then end it
 * with EJ_ECLOSED during the destroy.
 */
int ej__latch_acquire_async(ej_registry *reg, const char *latch_path, int timeout_ms,
                            ej__latch_post_fn post, void *post_arg, ej__latch_done_fn done,
                            void *arg);

/* An acquisition under way, for its owner to cancel (one reference). */
typedef struct latch_async ej__latch_wait;

/* ej__latch_acquire_async, and when it returns 0 and wait is not NULL, a
 * reference to the acquisition in *wait (give it back with
 * ej__latch_wait_put, at any time). */
int ej__latch_acquire_async_w(ej_registry *reg, const char *latch_path, int timeout_ms,
                              ej__latch_post_fn post, void *post_arg, ej__latch_done_fn done,
                              void *arg, ej__latch_wait **wait);

/* ej__latch_acquire_async_w with reads sent right behind the first create
 * and look (read_paths: nreads namespace-relative paths, taken over and
 * freed by the latch, also on an error): when the first look finds the
 * latch free, they were read while this contender held it, and cost no
 * round trip of their own (ej__latch_first_reads). */
int ej__latch_acquire_async_r(ej_registry *reg, const char *latch_path, int timeout_ms,
                              ej__latch_post_fn post, void *post_arg, ej__latch_done_fn done,
                              void *arg, ej__latch_wait **wait, char **read_paths, size_t nreads);
/* The reads of ej__latch_acquire_async_r (stat only: exists), when they
 * were made while l was held (borrowed until l is released); else false
 * with *n 0 (read them again under the latch). */
bool ej__latch_first_reads(const ej__latch *l, const struct ej_reg_read **reads, size_t *n);

/* The owner no longer needs the latch (what it wanted done is done, by
 * another): a wait ends at once, its own node deleted, and done gets
 * EJ_EAGAIN (latch NULL), through post as ever. A cancel that comes after
 * the latch was acquired, or after done, changes nothing. Any thread. A
 * contender that leaves spares the ones behind it a turn each: a job's
 * members queued on a latch otherwise pass it on one by one. */
void ej__latch_wait_cancel(ej__latch_wait *w);
void ej__latch_wait_put(ej__latch_wait *w);

/* The own node's path (namespace-relative), borrowed. */
const char *ej__latch_node(const ej__latch *l);

/* ------------------------------------------------------------------------ */
/* view.c: watch-based view of /{job}/sharding                               */

typedef struct ej__view ej__view;

/* What the view tracks per item (bits). */
enum {
    EJ__VK_INSTANCE = 0, /* sharding/N/instance: always, with data */
    EJ__VK_FAILOVER = 1, /* sharding/N/failover: all items, when failover is on */
    EJ__VK_MISFIRE = 2,  /* sharding/N/misfire: own items */
    EJ__VK_DISABLED = 3, /* sharding/N/disabled: own items */
    EJ__VK_COUNT = 4,
};

/* Called after the view changed (under no lock): on the dispatch thread, or
 * on a view loader ("ej-view-load") while the dispatch thread waits for it. */
typedef void (*ej__view_change_fn)(void *user, int item, int kind);

/* One item as the view knows it. */
struct ej__view_item {
    int item;
    char *owner;            /* sharding/N/instance data; NULL when absent */
    int64_t failover_owner; /* session owning failover; 0 none; -1 not tracked */
    int64_t failover_czxid; /* czxid of failover when tracked */
    /* czxid of the latest failover node the view saw, kept after it is
     * gone (0: none seen): an item taken over since a crash stays known
     * as such after its failover run ended. */
    int64_t failover_last_czxid;
    int misfire;            /* 1 / 0; -1 not tracked */
    bool misfire_mine;      /* the mark is this instance's (ej__view_claim_misfire) */
    int disabled;           /* 1 / 0; -1 not tracked */
};

int ej__view_create(ej_registry *reg, const char *job, const char *instance_id,
                    ej__view_change_fn fn, void *user, ej__view **out);
/* Arm the watches (loads everything; blocks the caller for the reads). */
int ej__view_start(ej__view *v);
/* The job was just created (sharding/ most likely absent): the view's
 * first load asks whether sharding/ exists before reading its children
 * (one request instead of two; correct either way). Before ej__view_start. */
void ej__view_expect_absent(ej__view *v);
/* Whether failover tracking (running of others' items, failover of all)
 * is wanted. Re-arms as needed. Call from any thread but the dispatch one
 * or from it (it does ZooKeeper reads). */
void ej__view_set_failover(ej__view *v, bool on);
/* The registry gave us a new session: every watch is gone; reload. Dispatch
 * thread (or before start). */
void ej__view_on_new_session(ej__view *v);
/* Re-arm paths whose watch could not be set (connection loss). */
void ej__view_repair(ej__view *v);
/* Stop delivering changes; free once the last pending watch is gone. */
void ej__view_destroy(ej__view *v);

/* Items present under sharding/ (sorted ascending). Caller frees *items. */
int ej__view_items(ej__view *v, int **items, size_t *n);
/* Items whose instance node names owner (ascending). */
int ej__view_items_of(ej__view *v, const char *owner, int **items, size_t *n);
/* A copy of one item (caller frees owner via ej__view_item_fini).
 * EJ_ENOTFOUND when the item is not present. */
int ej__view_get(ej__view *v, int item, struct ej__view_item *out);
void ej__view_item_fini(struct ej__view_item *it);
/* The items an instance that left (id) may have been running: those
 * assigned to it or, by the assignment before, to it (the leader reshards
 * after waiting at most a bound for running items: an item may still run
 * on its previous owner), and every item with a failover node (present, or
 * removed within recent_ms before now: a failover run's instance is not
 * the item's owner). A superset: which of them its session's close really
 * ended, the caller checks in ZooKeeper (failover.c). None of them needs a
 * watch on other instances' running nodes, which cost every member two
 * reads per fire of every other member. Ascending; caller frees. */
int ej__view_departed_items(ej__view *v, const char *id, int64_t recent_ms, int **items,
                            size_t *n);
/* Number of items present. */
size_t ej__view_size(ej__view *v);
/* Paths that still need their watch (non-zero means the view may be stale). */
size_t ej__view_unarmed(ej__view *v);
/* True when items 0..count-1 (and no others) are present with exactly
 * these owners (owners[i] NULL: none). */
bool ej__view_matches(ej__view *v, const char *const *owners, int count);
/* Apply a locally known change without waiting for the watch (own writes). */
void ej__view_note_misfire(ej__view *v, int item, bool set);
/* This instance is about to mark item misfire (before the write, so that
 * the watch seeing the node never finds it someone else's). */
void ej__view_claim_misfire(ej__view *v, int item);

/* ------------------------------------------------------------------------ */
/* coord.c: the per-job coordinator                                          */

typedef struct ej__coord ej__coord;

/* Why the coordinator stops a job. */
enum {
    EJ__STOP_OPERATOR = 1, /* own instances/{id} deleted by an operator */
    EJ__STOP_REMOVED = 2,  /* the job's root node was deleted */
};

/* What a new config changed (bits for on_config). */
enum {
    EJ__CFG_CRON = 1u << 0,
    EJ__CFG_COUNT = 1u << 1,
    EJ__CFG_FAILOVER = 1u << 2,
    EJ__CFG_OTHER = 1u << 3,
};

struct ej__coord_hooks {
    void *user;
    /* All hooks run on the dispatch thread or a control task, never with a
     * coordinator lock held, and must return quickly. */
    void (*on_trigger)(void *user);          /* console TRIGGER for this instance */
    void (*on_failover_taken)(void *user);   /* run the failover items taken */
    void (*on_failover_pending)(void *user); /* failover items wait to be taken */
    /* A crashed instance's items that will not be failed over after all
     * (what it ran could not be read, or not recorded, within the retry
     * window): gone_ms is when its departure was seen (epoch ms). */
    void (*on_failover_lost)(void *user, const int *items, size_t n, int64_t gone_ms);
    /* A new valid config is in force (cfg borrowed for the call). */
    void (*on_config)(void *user, const struct ej_job_config *cfg, unsigned changed);
    void (*on_stop)(void *user, int why); /* EJ__STOP_* */
    /* After the coordinator handled a connection state. */
    void (*on_conn)(void *user, ej_reg_state state, bool new_session);
    /* The fence of this instance's registered session changed (an
     * ej_reg_fence value). Runs on the registry's watchdog thread, so that
     * it is never late behind the dispatch thread: set flags only. */
    void (*on_fence)(void *user, int level);
};

struct ej__coord_opts {
    ej_registry *reg; /* borrowed; must outlive the coordinator */
    const char *job_name;
    const char *instance_id; /* "{ip}@-@{pid}" */
    const char *ip;
    void *sched;          /* ej__sched * for control tasks (NULL: default) */
    int wait_bound_ms;    /* bound of every wait; 0: derived from the session */
    int64_t reconcile_ms; /* override of reconcileIntervalMinutes (tests); 0: none */
    struct ej__coord_hooks hooks;
};

int ej__coord_create(const struct ej__coord_opts *opts, ej__coord **out);

/*
 * Start-up (SPEC 4 "Start"): persist the config (if absent or overwrite),
 * read it back, validate it (the read-back config is the one in force,
 * copied to *effective); start the caches and the sharding view; elect a
 * leader; persist servers/{ip}; create instances/{id}; set necessary;
 * start the reconcile timer. Blocks. err names what failed.
 * Returns 0; EJ_ECONFIG (invalid config in ZooKeeper or a type clash);
 * registry errors.
 */
int ej__coord_start(ej__coord *c, const struct ej_job_config *local,
                    struct ej_job_config *effective, char *err, size_t errlen);

/* Leave ZooKeeper cleanly: stop reacting, give up leadership, delete the
 * own instance node. Blocks (bounded). */
void ej__coord_leave(ej__coord *c);

/* Free (after leave, or without: the session's end cleans up). NULL ok. */
void ej__coord_destroy(ej__coord *c);

/* Accessors. */
const char *ej__coord_instance_id(const ej__coord *c);
const char *ej__coord_job_name(const ej__coord *c);
const char *ej__coord_ip(const ej__coord *c);
ej_registry *ej__coord_registry(const ej__coord *c);
ej_tree_cache *ej__coord_cache(const ej__coord *c, const char *which);
ej__view *ej__coord_view(const ej__coord *c);
int ej__coord_wait_bound(const ej__coord *c);
/* A copy of the config in force. Caller finalises. */
int ej__coord_config(ej__coord *c, struct ej_job_config *out);
/* The last error (invalid config, failed registration ...), "" when none;
 * copied into buf. */
void ej__coord_last_error(ej__coord *c, char *buf, size_t len);
void ej__coord_set_error(ej__coord *c, const char *fmt, ...) EJ_PRINTF(2, 3);

/* State queries, all from caches (no ZooKeeper reads). */
bool ej__coord_is_leader(ej__coord *c);
bool ej__coord_server_disabled(ej__coord *c);
bool ej__coord_registered(ej__coord *c); /* own instance node present (this session) */
bool ej__coord_connected(ej__coord *c);  /* not suspended / lost */
bool ej__coord_stopped(ej__coord *c);    /* operator shutdown or job removed */
/* The session this instance registered in (its instance node's owner), 0
 * while not registered. A fire keeps the session it began in. */
int64_t ej__coord_session(ej__coord *c);
/* Wall-clock ms of the latest registration (start, or again after a new
 * session); 0 before. A cron fire scheduled before it is not run. */
int64_t ej__coord_registered_at(ej__coord *c);
/* New sharding assignments this instance wrote as leader since created. */
uint64_t ej__coord_reshards(ej__coord *c);
void ej__coord_count_reshard(ej__coord *c);
/* May work begun in session start now? Registered in that very session,
 * connected, not stopped, and the registry's fence of the session OPEN
 * (contact with the server within half the session timeout). Asked before
 * every item starts. */
bool ej__coord_may_start(ej__coord *c, int64_t session);

/* The takeover margin: after another instance's session expired, items of
 * this instance start only this long after its node was seen removed. The
 * expired owner fences itself at 0.6 of the session timeout after its last
 * answer when its threads run on time; a scheduling stall (a CPU quota, a
 * noisy neighbour) delays that by up to the stall, and the margin covers
 * it (docs/coordination.md). Its length is the registry's
 * (ej_registry_takeover_margin_ms: regCenter.takeoverMarginMilliseconds). */

/* Blocks until the takeover margin of the last expiry seen is over (at
 * once when there is none). Called before each item starts, off the
 * dispatch thread. */
void ej__coord_takeover_wait(ej__coord *c);
/* Live instances, in ElasticJob order (reverse lexicographic), without
 * this instance's own IP's when its server is DISABLED; other servers'
 * state is not cached (read by the leader when it shards:
 * ej__coord_shard_instances). From the caches, no request. Caller frees
 * with ej_registry_free_names. */
int ej__coord_available_instances(ej__coord *c, char ***ids, size_t *n);
/* The leader's list for sharding: the live instances on enabled servers,
 * each server's state read from ZooKeeper (one read per distinct IP). */
int ej__coord_shard_instances(ej__coord *c, char ***ids, size_t *n);
/* Drop from ids (NULL-terminated, *n of them, in place) the ids whose
 * servers/{ip} of job says DISABLED, or whose IP does not parse; one read
 * per distinct IP (a missing node counts as enabled). On an error nothing
 * is dropped; why (may be NULL) describes it. */
int ej__servers_drop_disabled(ej_registry *reg, const char *job, char **ids, size_t *n, char *why,
                              size_t whylen);
/* Is the instance's node in the instances cache? (Other instances' nodes
 * are known there by name only, so their sessions are not: see
 * ej__view_departed_items.) */
bool ej__coord_instance_listed(ej__coord *c, const char *id);

/* True when the cache shows a leader node. */
bool ej__coord_leader_known(ej__coord *c);
/* The leader's id as the cache shows it, or NULL. Caller frees. */
char *ej__coord_leader(ej__coord *c);
/* The same, with the leader node's ephemeral owner (its session) in
 * *owner (may be NULL). */
char *ej__coord_leader_id(ej__coord *c, int64_t *owner);
/* Blocks until a leader is known (electing if needed), at most timeout_ms.
 * Returns true when this instance is the leader. */
bool ej__coord_is_leader_until_block(ej__coord *c, int timeout_ms);
/* Run an election now (blocks, bounded). */
int ej__coord_elect(ej__coord *c);
/* Tests only (NULL in production, where it costs one atomic load per
 * election): called by an election right after it acquired the latch,
 * before it reads or writes the leader node. */
typedef void (*ej__election_hook_fn)(ej__coord *c);
extern _Atomic(ej__election_hook_fn) ej__election_after_latch_hook;
/* Tests only (0 in production): this many of the next crash checks
 * (failover.c) fail as a read that found no server would. */
extern _Atomic int ej__failover_check_faults;
/* How long a crash check or record that cannot be done is tried again
 * before its items are told lost (30000; tests shorten it). */
extern _Atomic int ej__failover_retry_ms;
/* True when the cache shows a leader node whose data names no live instance
 * (no node under instances/). */
bool ej__coord_leader_stale(ej__coord *c);
/* Heal a stale leader: under the election latch, delete the leader node by
 * its version if ZooKeeper confirms it names no live instance, and elect.
 * Blocks (bounded). */
int ej__coord_heal_leader(ej__coord *c);
/* Create leader/sharding/necessary (idempotent). */
int ej__coord_set_necessary(ej__coord *c);
/* Tell the runtime that failover items were taken (its hook). */
void ej__coord_notify_failover_taken(ej__coord *c);
/* Tell the runtime that a crash's items will not be failed over (its hook;
 * items borrowed for the call). Serial queue, no lock held. */
void ej__coord_tell_failover_lost(ej__coord *c, const int *items, size_t n, int64_t gone_ms);
/* Mark the job busy / idle locally (for failover takeover and TRIGGER;
 * shard.c: a busy leader reshards at once). The fire's thread. */
void ej__coord_set_busy(ej__coord *c, bool busy);
/* The busy flag alone (coord.c). */
void ej__coord_note_busy(ej__coord *c, bool busy);
bool ej__coord_busy(ej__coord *c);

/* The thread checks of the coordinator: a control task runs on the job's
 * serial queue (ej__coord_post); a cache or connection listener on the
 * registry's dispatch thread. */
bool ej__coord_on_serial(ej__coord *c);
bool ej__coord_on_dispatch(ej__coord *c);
#define EJ_ASSERT_SERIAL(c) EJ_ASSERT_MSG(ej__coord_on_serial(c), "not on the job's serial queue")
#define EJ_ASSERT_DISPATCH(c) EJ_ASSERT_MSG(ej__coord_on_dispatch(c), "not on the dispatch thread")

/* Internal to the module (coord.c <-> shard.c / failover.c). */
/* Run fn(c, arg) as a task of the job's serial queue (the owner of the
 * coordination state) and return when it has run: at once when called
 * from that queue, else after the tasks queued before it. Blocks. */
void ej__coord_call(ej__coord *c, void (*fn)(ej__coord *c, void *arg), void *arg);
/* Waiting on another thread for something the coordinator sees (a
 * leader, flags gone, items ended): take the change count before looking,
 * then ej__coord_wait_change, which returns once the count moved (*seq
 * updated), at most 200 ms later (some conditions have no event), or
 * false at deadline (mono ms). ej__coord_changed moves it. */
uint64_t ej__coord_change_seq(ej__coord *c);
bool ej__coord_wait_change(ej__coord *c, uint64_t *seq, int64_t deadline_ms);
void ej__coord_changed(ej__coord *c);
/* fn(arg) on the serial queue no sooner than delay_ms from now (the delay
 * on the registry's dispatch thread; nothing runs once closed). */
int ej__coord_post_after(ej__coord *c, int delay_ms, void (*fn)(ej__coord *c, void *arg),
                         void *arg);
/* A reference on the coordinator (for work that outlives the caller's:
 * a latch's wait); ej__coord_release lets it go. */
ej__coord *ej__coord_hold(ej__coord *c);
void ej__coord_release(ej__coord *c);
/* ej__latch_post_fn for ej__latch_acquire_async with post_arg the
 * coordinator: continuations run on its serial queue, also once it
 * closed (the latch must end); refused after. */
int ej__coord_latch_post(void *post_arg, void (*fn)(void *task), void *task);
/* Post fn(arg) as a control task holding a coordinator reference. */
int ej__coord_post(ej__coord *c, void (*fn)(ej__coord *c, void *arg), void *arg);
/* The same for an arg that the task owns: drop(arg) frees it when fn does
 * not run (the coordinator closed first). */
int ej__coord_post_owned(ej__coord *c, void (*fn)(ej__coord *c, void *arg), void *arg,
                         void (*drop)(void *arg));
/* The same on the shared pool instead of the job's serial queue: for work
 * that may wait long (a leader's resharding waits, bounded, for items
 * running elsewhere) and must hold up neither elections nor crash
 * handling. */
int ej__coord_post_pool(ej__coord *c, void (*fn)(ej__coord *c, void *arg), void *arg);
/* One leader resharding at a time (shard.c). */
void ej__coord_shard_lock(ej__coord *c);
void ej__coord_shard_unlock(ej__coord *c);
/* Is leader/sharding/necessary in the cache and not the flag this leader
 * last resharded for (ej__coord_shard_flag_consumed)? *czxid: the flag's
 * czxid (0: none). Both with the shard lock held (checked). */
bool ej__coord_shard_flag_new(ej__coord *c, int64_t *czxid);
void ej__coord_shard_flag_consumed(ej__coord *c, int64_t czxid);
/* Claims the one queued resharding task of a busy leader: true when none
 * was queued (the caller posts it); ej__coord_shard_unclaim when it runs. */
bool ej__coord_shard_claim(ej__coord *c);
void ej__coord_shard_unclaim(ej__coord *c);
/* The resharding flags, from the leader cache. Any thread. */
bool ej__coord_necessary(ej__coord *c);
bool ej__coord_processing(ej__coord *c);
bool ej__coord_failover_on(ej__coord *c);
int ej__coord_total_count(ej__coord *c);
/* The sharding strategy name of the config in force. Caller frees. */
char *ej__coord_strategy_name(ej__coord *c);

/* ------------------------------------------------------------------------ */
/* shard.c                                                                    */

/*
 * ElasticJob's shardingIfNecessary (SPEC 4 "Sharding"): when necessary is
 * set, the leader reshards; others wait (bounded) until neither necessary
 * nor processing exists. Blocks.
 * Returns 0 (sharded, nothing to do, or the leader finished); EJ_ETIMEDOUT
 * (waited in vain: the caller skips this fire); registry errors.
 */
int ej__shard_if_necessary(ej__coord *c);

/*
 * A leader whose trigger is busy (its own items, a failover run) reshards
 * now, on a pool thread, instead of at its next fire: followers wait for
 * the resharding at their fires, bounded, and would skip them
 * (leader-wait) behind a long run. Does nothing unless this instance is
 * the leader, busy, and leader/sharding/necessary is set. Any thread
 * (dispatch included: it only posts).
 */
void ej__shard_when_busy(ej__coord *c);

/*
 * The leader's writer: reset sharding/ for count items and store owners
 * (owners[i] is an instance id or NULL for unassigned) in transactions of at
 * most max_bytes (0: 512 KiB) each; the LAST one also deletes
 * leader/sharding/necessary and leader/sharding/processing. Exposed for
 * tests (100,000 items). Blocks.
 */
int ej__shard_write(ej__coord *c, int count, const char *const *owners, size_t max_bytes);

/* Run the strategy named name (unknown: AVERAGE with a warning) over ids.
 * owners_out[i] borrows from ids. Returns 0 or an error (message logged). */
int ej__shard_assign(const char *name, const char *job, char *const *ids, size_t n, int count,
                     const char *const *previous, const char **owners_out);

/* balance_ns.c: BALANCED over the namespace (blocks; the leader resharding).
 * Reads the namespace's children and, for each other job whose valid
 * config resolves to a strategy with namespace_load, its instances on
 * servers not DISABLED, shardingTotalCount and sharding/N/instance; a job
 * that cannot be read is left out (debug line). Then
 * ej_sharding_balanced_namespace with job (ids: its available instances,
 * previous: NULL or count entries) as the target: owner_out gets count
 * indexes into ids (-1: unassigned). Other BALANCED jobs on the same
 * instances whose owners differ from the plan get leader/sharding/necessary
 * (so the namespace converges). Returns 0; EJ_EINVAL; EJ_ENOMEM; the
 * registry's error when the namespace cannot be listed (the caller then
 * shards the job alone). */
int ej__balance_ns_assign(ej_registry *reg, const char *job, char *const *ids, size_t n, int count,
                          const char *const *previous, int *owner_out);

/* ------------------------------------------------------------------------ */
/* failover.c                                                                 */

/* An instance node (id) disappeared. On the serial queue, with the items
 * the view showed it may have run at the event (cand: ej__view_departed_
 * items, taken; none when failover is off): which of them its session's
 * close took (ZooKeeper), remembered and, as the first recorder, recorded
 * under leader/failover/latch. at_ms: the event's wall time. */
void ej__failover_on_instance_removed(ej__coord *c, const char *id, int64_t at_ms, int *cand,
                                      size_t ncand);
/* Failover turned off: delete every failover node and pending item. */
void ej__failover_clear_all(ej__coord *c);
/*
 * Take ONE pending failover item under leader/failover/latch (greatest item
 * string first), when this instance is idle: creates
 * sharding/{item}/failover = own id and deletes the pending node in one
 * transaction. Blocks. Returns 1 when an item was taken (the on_failover_taken
 * hook has been called), 0 when none, or an error.
 */
int ej__failover_take(ej__coord *c);
/* The items this instance took over in the session now (any order), with
 * their tokens, for the fire plan; forgets those of earlier sessions.
 * Caller frees *out. */
int ej__failover_taken(ej__coord *c, struct ej__plan_taken **out, size_t *n);
/* The failover runs of items finished: delete their failover nodes. */
void ej__failover_done(ej__coord *c, const int *items, size_t n);
/* Who records a crash first may have changed (serial queue): a leader
 * appeared or left, or an instance left without items to fail over (it
 * may have been the one chosen). Crash records waiting for the first
 * recorder are looked at again: this instance may be it now. */
void ej__failover_recorder_changed(ej__coord *c);
/* Process crash records left for a leader (after an election). */
void ej__failover_process_pending(ej__coord *c);
/* leader/failover/items changed (serial queue): a recording still waiting
 * for the latch is cancelled when every item it would record is recorded
 * or taken by another instance. */
void ej__failover_items_changed(ej__coord *c);

/* Module-private state kept in the coordinator. */
struct ej__failover_state;
struct ej__failover_state *ej__coord_failover_state(ej__coord *c);
struct ej__failover_state *ej__failover_state_new(void);
void ej__failover_state_free(struct ej__failover_state *s);

/* ------------------------------------------------------------------------ */
/* running.c: running, misfire and failover nodes around item runs          */

/*
 * Before running items (monitorExecution): create sharding/{item}/running
 * for every item, conditionally, in as few transactions as possible. An item
 * whose running node exists already is not started: its misfire node is
 * created and ok[i] is false. tokens[i] receives the running node's czxid
 * (the fencing token). Returns 0 (some items may be skipped) or an error
 * (no item may run: e.g. connection loss).
 */
int ej__running_begin(ej__coord *c, const int *items, size_t n, int64_t fired_ms, bool *ok,
                      int64_t *tokens, int64_t *session_out);
/* fired_ms > 0: the same transaction sets each started item's sharding/{n}
 * to "fired MS by ID" (the latest cron fire time the run covers, this
 * instance): the fire record a takeover reads. */
/* The fire record of an item: 0 with *fired_ms and by (its writer's id);
 * EJ_ENOTFOUND when sharding/{n} holds none (never run by ejob with
 * monitorExecution, or Java's ""); registry errors. One read. */
int ej__running_read_fired(ej__coord *c, int item, int64_t *fired_ms, char *by, size_t bylen);
/* An instance node other than ours was removed (dispatch thread): kept
 * (24 h, the latest 64) so that a takeover of its items can tell fire
 * times it lost from those a live owner had to account for. */
void ej__running_note_departed(ej__coord *c, const char *id);
bool ej__running_departed(ej__coord *c, const char *id);
bool ej__running_any_departed(ej__coord *c);
/* After running: delete the running nodes created by ej__running_begin in
 * session (nothing when the session has changed since: the nodes went with
 * it, and a delete by path could hit the node of an instance that took the
 * item over). */
void ej__running_complete(ej__coord *c, const int *items, size_t n, int64_t session);
/* The same for one item (deleted as soon as that item is done, so that a
 * crash fails over only the items really running). */
void ej__running_complete_one(ej__coord *c, int item, int64_t session);
/* Delete running nodes a lost request may have left (see running.c);
 * cheap when there are none. Call at the start of a fire. */
void ej__running_cleanup(ej__coord *c);
struct ej__running_state;
struct ej__running_state *ej__coord_exec_state(ej__coord *c);
struct ej__running_state *ej__running_state_new(void);
void ej__running_state_free(struct ej__running_state *s);
/* When monitorExecution is off: prove the session is alive and the instance
 * registered (one request) before starting items. 0 or an error. */
int ej__running_check_alive(ej__coord *c);
/* Create / delete misfire nodes of items. */
int ej__running_set_misfire(ej__coord *c, const int *items, size_t n);
int ej__running_clear_misfire(ej__coord *c, const int *items, size_t n);
/* Clock skew (maxTimeDiffSeconds >= 0): touches systemTime/current and
 * compares its mtime with the local clock. Returns 0, EJ_ECONFIG with msg
 * when the skew exceeds max_seconds, or a registry error. */
int ej__running_check_time_diff(ej__coord *c, int max_seconds, char *msg, size_t msglen);
/* The items the view shows this instance owning (ascending), as the fire
 * plan reads them: a disabled mark the view has not loaded yet is read
 * from ZooKeeper (an error reads as disabled), and with want_misfire so is
 * an unloaded misfire mark of an item that may run. Items taken away by a
 * failover (failover_on) are not resolved. Caller frees *out. */
int ej__running_plan_items(ej__coord *c, bool failover_on, bool want_misfire,
                           struct ej__plan_item **out, size_t *n);

/* ------------------------------------------------------------------------ */
/* fire_request.c: a fire's requests to its coordinator                       */

/* What a fire asks to have planned. */
struct ej__fire_request {
    unsigned want;             /* EJ__PLAN_WANT_* */
    int64_t fire_session;      /* the session the fire began in (WANT_GATE) */
    bool cron;                 /* a cron fire */
    int64_t scheduled_ms;      /* its fire time; 0: none */
    int max_time_diff_seconds; /* maxTimeDiffSeconds; < 0: no clock check */
};

/*
 * The plan for a fire (fire_plan.h), from one look at the coordinator's
 * state. With EJ__PLAN_WANT_GATE, once the checks that need no request
 * pass, it deletes running nodes a lost request left and checks the clock
 * skew (one request each, the first only when there are any). Blocks (the
 * ZooKeeper reads of marks the view has not loaded). Returns 0 (out
 * filled: free with ej__fire_plan_fini) or an error (out zeroed).
 */
int ej__coord_fire_plan(ej__coord *c, const struct ej__fire_request *req,
                        struct ej__fire_plan *out);

/* The start of a batch of items. */
struct ej__fire_begin {
    const int *items;
    size_t n;
    int64_t fire_session;
    int64_t fired_ms; /* the fire record's time (ej__running_begin) */
    bool monitor_execution;
    const int64_t *failover_tokens; /* a failover run: the plan's tokens of items; else NULL */
};

enum ej__begin_result {
    EJ__BEGIN_STARTED,         /* ok[i]: items[i] may start with tokens[i] */
    EJ__BEGIN_FENCED,          /* not registered in the fire's session, or fenced: nothing */
    EJ__BEGIN_FAILED,          /* the start could not be registered (*err): nothing */
    EJ__BEGIN_SESSION_CHANGED, /* the fire is from an older session: nothing (nodes removed) */
};

/*
 * Register the start of b's items: with monitorExecution their running
 * nodes in one transaction (an item running elsewhere gets ok false and a
 * misfire mark), else a proof that the session is alive. tokens[i]: the
 * fencing token (ej__fire_plan_token). *session_out: the session the
 * running nodes belong to (0 without them). Blocks.
 */
enum ej__begin_result ej__coord_fire_begin(ej__coord *c, const struct ej__fire_begin *b, bool *ok,
                                           int64_t *tokens, int64_t *session_out, int *err);

/* What a fire's run changed, for the coordinator. */
struct ej__fire_done {
    const int *failover; /* failover items whose run ended */
    size_t nfailover;
};

/* The fire's items ran: delete the failover nodes of the failover items.
 * (Running nodes go per item as each ends: ej__running_complete_one.) */
void ej__coord_fire_done(ej__coord *c, const struct ej__fire_done *d);

/* ------------------------------------------------------------------------ */
/* guarantee.c: distribute-once listeners                                     */

/*
 * ElasticJob's AbstractDistributeOnceElasticJobListener bookkeeping: create
 * guarantee/{started|completed}/{item} for items; if all total items are
 * there, claim the run (exactly one instance wins, by a conditional write on
 * guarantee/{phase}) and return 1: the caller runs the callback, then calls
 * ej__guarantee_finish. Otherwise wait (at most timeout_ms; <= 0 means the
 * coordinator's bound) until the winner deletes guarantee/{phase} and return
 * 0. EJ_ETIMEDOUT: the node is deleted and the listener failed. Blocks.
 */
int ej__guarantee_enter(ej__coord *c, bool completed, const int *items, size_t n, int total,
                        int64_t timeout_ms);
/* The winner's callback ran: delete guarantee/{phase} (wakes the others). */
void ej__guarantee_finish(ej__coord *c, bool completed);

#endif
