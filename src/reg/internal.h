/* Internal interfaces of the registry module (src/reg). Not public. */
#ifndef EJ_REG_INTERNAL_H
#define EJ_REG_INTERNAL_H

#include <pthread.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <zookeeper/zookeeper.h>

#include "common/check.h"
#include "common/listeners.h"
#include "ejob/registry.h"

/* The shortest time between two routine resolutions of the server list
 * by the ZooKeeper client (registry.c); a DNS change is seen within it, a
 * lost connection resolves again at once. */
#define EJ_REG_RESOLVE_DELAY_MS 30000

/* ------------------------------------------------------------------------ */
/* Pure helpers (reg_util.c), unit-tested.                                   */

/* 0 when path is a valid namespace-relative path (ZooKeeper's rules; a
 * sequential create may end with '/'), else EJ_EBADPATH with *why set to a
 * static reason (why may be NULL). */
int ej__reg_check_path(const char *path, bool sequential, const char **why);

/* Translate a ZooKeeper return code into an ejob code (ZOK -> 0). */
int ej__reg_from_zk(int zrc);

/* True for ZooKeeper codes that mean "no answer": the request may be retried
 * once connected again. */
bool ej__reg_zk_is_connloss(int zrc);

/* Curator ExponentialBackoffRetry.getSleepTimeMs: base * max(1, rnd % (1 <<
 * (retry + 1))), capped at max_ms. retry counts from 0. */
int ej__reg_backoff_ms(int base_ms, int max_ms, int retry, uint32_t rnd);

/* Sort n names in place as sort says. */
void ej__reg_sort_names(char **names, size_t n, ej_reg_sort sort);

/* A NULL-terminated copy of n strings; NULL on allocation failure. */
char **ej__reg_copy_names(char *const *src, size_t n);

/* Copy a ZooKeeper Stat. */
void ej__reg_stat_from_zk(struct ej_node_stat *out, const struct Stat *in);

/* Record the calling thread's last error message and return err. */
int ej__reg_fail(int err, const char *fmt, ...) EJ_PRINTF(2, 3);

/* The fence after silence_ms without an answer (the send time of the last
 * answered probe to now), for a session timeout of timeout_ms; up: the
 * client reports the connection up; same_session: the session asked about
 * is the one of that answer. */
ej_reg_fence ej__reg_fence_level(int64_t silence_ms, int64_t timeout_ms, bool up,
                                 bool same_session);

/* A thread-local pseudo-random number (for back-off jitter). */
uint32_t ej__reg_rand(void);

/* ------------------------------------------------------------------------ */
/* The dispatch queue.                                                        */

struct ej__reg_item;
/* Runs on the dispatch thread and owns the item: it must free it. */
typedef void (*ej__reg_item_fn)(ej_registry *reg, struct ej__reg_item *item);

struct ej__reg_item {
    struct ej__reg_item *next;
    ej__reg_item_fn run;
};

/* The context of one ZooKeeper handle (zookeeper_init's context): callbacks
 * of ZooKeeper's threads find the registry and the handle's generation here.
 * Freed only after zookeeper_close() returned. */
struct ej__reg_session {
    ej_registry *reg;
    uint64_t gen;
};

/* A pending one-shot watch (ops.c). */
struct ej__reg_watch;

/* A tree cache entry of the registry's cache table. */
struct ej__reg_cache_slot {
    uint64_t id;
    ej_tree_cache *cache;
};

struct ej__reg_delayed {
    struct ej__reg_delayed *next;
    int64_t due_ms;
    uint64_t seq;
    ej_reg_task_fn fn;
    void *user;
};

struct ej_registry {
    /* Options, fixed after create. */
    char *servers;
    char *ns;     /* "" or "a/b" */
    char *prefix; /* "" or "/a/b" */
    size_t prefix_len;
    int session_timeout_ms;
    int connection_timeout_ms;
    int base_sleep_ms;
    int max_sleep_ms;
    int max_retries;
    char *digest;
    bool use_creator_acl;

    /* The current handle. Written only by the dispatch thread (and by create
     * before the thread starts) under the write lock; other threads use it
     * under the read lock, the dispatch thread may read it without. */
    pthread_rwlock_t zh_lock;
    zhandle_t *zh;
    struct ej__reg_session *sess;

    ej__mutex mu;           /* everything below up to "dispatch-only" */
    pthread_cond_t wake;    /* the dispatch thread's wake-up */
    pthread_cond_t changed; /* connection, barrier and cache progress */
    struct ej__reg_item *head, *tail;
    uint64_t enq_seq, done_seq;
    struct ej__reg_delayed *delayed;
    uint64_t delayed_seq;
    bool closing; /* no new posts; the thread drains and exits */
    /* Tree cache reads sent and not answered yet (cache.c). At shutdown
     * the dispatch thread stops sending new ones (quiescing) and waits for
     * these before it closes the handle: libzookeeper_mt leaks the
     * completion of a request still in flight at zookeeper_close. */
    atomic_long cache_reads_inflight;
    bool quiescing; /* dispatch thread only */
    bool thread_started;
    pthread_t thread;
    bool connected;
    bool auth_failed;
    int64_t session_id;
    char passwd[EJ_REG_PASSWD_LEN];
    int negotiated_ms;
    ej__listeners listeners; /* ej_reg_state_fn */
    struct ej__reg_watch *watches; /* doubly linked */
    struct ej__reg_cache_slot *caches;
    size_t ncaches, capcaches;
    uint64_t next_cache_id;

    _Atomic int state; /* ej_reg_state last delivered */
    _Atomic uint64_t requests;
    atomic_bool ns_ok;

    /* Liveness (liveness.c). live_mu is a leaf lock held for moments only,
     * also on ZooKeeper's completion thread; nothing is called under it. */
    ej__mutex live_mu;
    pthread_cond_t live_cv;
    pthread_t live_thread;
    ej__owner live_owner; /* the watchdog thread, while it runs */
    bool live_started, live_stop;
    int64_t contact_ms;      /* mono ms: send time of the latest answered probe */
    int64_t contact_session; /* the session of that answer; 0: none or expired */
    int takeover_margin_ms;  /* resolved at create, read-only after */
    int contact_timeout_ms;  /* negotiated timeout of that session */
    bool zk_up;              /* the client's own view: connected */
    bool probe_now;          /* a connection came: probe at once */
    uint64_t probe_seq, probe_answered;
    int64_t probe_sent_ms;
    int fence_told; /* level last told to fence listeners; -1 none */
    int64_t fence_told_session;
    bool fence_telling; /* fence listeners are being called */
    ej__listeners fence_fns; /* ej_reg_fence_fn, under live_mu */

    /* dispatch-only */
    uint64_t cur_gen;
    int phase; /* 0 before the first connection, else an ej_reg_state */
    bool ever_connected;
    int64_t last_session_id;
    int64_t disconnected_at; /* mono ms, while SUSPENDED */
    int64_t reopen_at;       /* mono ms, 0 = none: open a handle then */
};

/* Queue an item. Unless force, fails with EJ_ECLOSED once the registry is
 * closing (and the item is not taken). Thread-safe, never blocks for long. */
int ej__reg_enqueue(ej_registry *reg, struct ej__reg_item *item, bool force);

/* The ZooKeeper path for a namespace-relative path. Caller frees; NULL on
 * allocation failure. */
char *ej__reg_full_path(const ej_registry *reg, const char *rel);

/* The namespace-relative part of a ZooKeeper path (pointer into full, or
 * "/"), or NULL when full is outside the namespace. */
const char *ej__reg_rel_path(const ej_registry *reg, const char *full);

/* The ACL new nodes get. */
const struct ACL_vector *ej__reg_acl(const ej_registry *reg);

/* ZooKeeper create flags for a mode, or -1 when unknown. */
int ej__reg_zk_mode(ej_reg_mode mode);

/* ops.c: one attempt of an operation on a connected handle; returns a Z
 * code. */
typedef int (*ej__reg_attempt_fn)(ej_registry *reg, zhandle_t *zh, void *arg);

/* ops.c: run fn until it succeeds, fails for a reason other than a lost
 * connection, or the retries are used up (counts one request per attempt;
 * an attempt that sends more counts the rest itself). Only when retry is an
 * attempt whose answer was lost sent again; *sent_lost (may be NULL) tells
 * it happened. Returns a Z code. */
int ej__reg_run_zk(ej_registry *reg, bool retry, ej__reg_attempt_fn fn, void *arg,
                   bool *sent_lost);

/* ops.c: validate a namespace-relative path and make it absolute (*full,
 * caller frees); an error is recorded as the thread's last message. */
int ej__reg_resolve(ej_registry *reg, const char *op, const char *path, bool sequential,
                    char **full);

/* ops.c: create the missing ancestors of the absolute path full (CONTAINER
 * or PERSISTENT), the nearest first; returns a Z code. */
int ej__reg_make_parents(ej_registry *reg, const char *full, bool container);

/* ops.c: record the message of a failed operation; returns its ejob code. */
int ej__reg_op_fail(ej_registry *reg, const char *op, const char *path, int zrc);

/* batch.c: creates path (data empty; with container_parents, missing
 * parents as CONTAINER nodes, the nearest first, then the two again) and
 * lists dir's children
 * right behind it, both sent before either answer is waited for: one round
 * trip where a create and then a listing take two (the server answers in
 * order, so the listing shows the new node). On 0: *actual (caller frees;
 * namespace-relative) and *names / *count as ej_registry_children,
 * unsorted. The create's error otherwise, with *actual NULL (a sequential
 * create's lost answer is not repeated: EJ_ECONNLOSS leaves it unknown
 * whether the node was made); the listing's error with *actual set when
 * only the listing failed. With make_parents, a create refused for want
 * of a parent makes the missing ones (persistent) and sends the two again.
 * after (nafter of them, may be NULL): exists reads sent right behind the
 * listing, answered after it (a latch contender whose node is the lowest
 * in the listing held the latch for them); each result EJ_ECONNLOSS unless
 * read on the attempt that created the node. */
int ej__reg_create_then_list(ej_registry *reg, const char *path, ej_reg_mode mode, const char *dir,
                             bool make_parents, char **actual, char ***names, size_t *count,
                             struct ej_reg_read *after, size_t nafter);

/* Count one request sent. */
static inline void ej__reg_count(ej_registry *reg)
{
    atomic_fetch_add_explicit(&reg->requests, 1, memory_order_relaxed);
}

/* ops.c: deliver EJ_REG_WATCH_CANCELLED to every one-shot watch registered on
 * a handle of generation <= gen (all when gen is UINT64_MAX). Dispatch
 * thread. */
void ej__reg_cancel_watches(ej_registry *reg, uint64_t gen);

/* liveness.c: init / start the watchdog (create), stop it (destroy, before
 * the handle is closed), free. */
void ej__reg_live_init(ej_registry *reg);
int ej__reg_live_start(ej_registry *reg);
void ej__reg_live_stop(ej_registry *reg);
void ej__reg_live_fini(ej_registry *reg);
/* liveness.c: a session event of the current handle (ZooKeeper's completion
 * thread: only records it and wakes the watchdog). */
void ej__reg_live_on_session_event(ej_registry *reg, int zk_state);
/* liveness.c: wait until the first contact of the current connection,
 * at most timeout_ms. */
void ej__reg_live_wait_contact(ej_registry *reg, int timeout_ms);

/* cache.c: what a tree cache reads of a node (Curator's TreeCache reads
 * everything; its setMaxDepth is a coarse form of this). Every watch costs
 * a read at the load and another after each change it reports, on the
 * server and here: a cache need not watch what its user never looks at. */
enum {
    EJ__TREE_ALL = 0,  /* data and children, both watched */
    EJ__TREE_DATA,     /* data only: a leaf; its children neither read nor watched */
    EJ__TREE_CHILDREN, /* children only: its data is neither read (the cache
                        * shows "") nor watched; its children watch still
                        * tells its deletion */
    EJ__TREE_SKIP,     /* not cached at all (not for the root) */
    EJ__TREE_NAME,     /* known by name only, for a child of a node whose
                        * children are read (ALL, CHILDREN): it costs no
                        * request and no watch. A listing of the parent
                        * that names it puts it in the cache at once, live,
                        * data "" and stat all zero (ADDED carries that
                        * too); the first listing that no longer names it
                        * removes it. One deleted and created again between
                        * two listings is caught by the parent's stat: when
                        * its cversion grew by more than the names added and
                        * removed, each NAME child named by both listings
                        * gets one stat read without a watch, and a czxid
                        * above the parent's pzxid at the listing before is
                        * reported as REMOVED then ADDED (that one with the
                        * read's stat). Its own children are never read; as
                        * the root it is read as ALL. */
};
/* The shape of the node at path (namespace-relative), depth levels below
 * the cache's root. Runs on the dispatch thread; must not block or call
 * the registry. */
typedef int (*ej__tree_cache_shape_fn)(const char *path, size_t depth, void *user);

/* Give a cache not yet started a shape function (NULL: EJ__TREE_ALL for
 * every node). user must outlive the cache. Returns 0 or EJ_EINVAL. Not
 * thread-safe: call before ej_tree_cache_start. */
int ej__tree_cache_set_shape(ej_tree_cache *c, ej__tree_cache_shape_fn fn, void *user);

/* cache.c: a connection came back (same or new session). Dispatch thread. */
void ej__tree_cache_on_session(ej_registry *reg, bool new_session);
/* cache.c: free every cache left at registry destroy. Dispatch thread. */
void ej__tree_cache_free_all(ej_registry *reg);

#endif
