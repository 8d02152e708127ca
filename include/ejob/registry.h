/*
 * The ZooKeeper registry: a session to a ZooKeeper ensemble rooted at a
 * namespace, with retries, connection-state events, one-shot watches and a
 * local tree cache of a subtree.
 *
 * Paths. Every path given to or returned by this API is relative to the
 * namespace: with namespace "ejob-demo", "/myJob/config" is the ZooKeeper
 * node "/ejob-demo/myJob/config", and "/" is the namespace node itself. A
 * path must start with '/', must not end with '/' (except "/" itself, and a
 * sequential create, see ej_registry_create_node), has no empty, "." or ".."
 * segments, is valid UTF-8 without control characters (ZooKeeper's own
 * rules), and is at most EJ_REG_MAX_PATH_LEN bytes. A bad path fails with
 * EJ_EBADPATH before anything is sent.
 *
 * Errors. Every call returning int returns 0 or a negative ejob code
 * (error.h); ZooKeeper's Z* codes never leave this module:
 *   EJ_ENONODE, EJ_ENODEEXISTS, EJ_EBADVERSION, EJ_ENOTEMPTY, EJ_ENOAUTH,
 *   EJ_ENOCHILDREN (parent is ephemeral), EJ_ECONNLOSS (no connection after
 *   the retries), EJ_ESESSIONEXPIRED, EJ_EAUTHFAILED, EJ_ETIMEDOUT,
 *   EJ_EBADPATH, EJ_ETOOBIG, EJ_EINVAL, EJ_ENOMEM, EJ_ECLOSED (registry being
 *   destroyed), EJ_EZOOKEEPER (any other server error).
 * ej_registry_errmsg() then says what failed, naming the path.
 *
 * Threads. A registry may be used from any number of threads at once. It
 * owns one "dispatch" thread that delivers every callback of this API
 * (connection states, watches, tree-cache events, posted tasks), one at a
 * time, in order; never on ZooKeeper's own threads. Callbacks may call the
 * synchronous operations below (they block only the dispatch thread, and
 * other callbacks wait meanwhile), but must not call ej_registry_destroy().
 *
 * Sessions. When a session expires (or the connection has been down for
 * longer than the negotiated session timeout), the dispatch thread emits
 * EJ_REG_LOST, closes the dead ZooKeeper handle, opens a new session and
 * emits EJ_REG_RECONNECTED with new_session = true once it is connected.
 * Tree caches then rebuild themselves; one-shot watches of the old session
 * are reported as EJ_REG_WATCH_CANCELLED.
 */
#ifndef EJOB_REGISTRY_H
#define EJOB_REGISTRY_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "ejob/common.h"
#include "ejob/error.h"

/* The largest node data accepted (and the largest total of data and paths in
 * one transaction). ZooKeeper's default jute.maxbuffer is 1 MiB per request;
 * larger requests make the server drop the connection, so they fail with
 * EJ_ETOOBIG before being sent. */
#define EJ_REG_MAX_DATA_LEN 1000000
/* The longest path accepted, in bytes, namespace not included. */
#define EJ_REG_MAX_PATH_LEN 4096
/* Length of a session password (ZooKeeper's clientid_t.passwd). */
#define EJ_REG_PASSWD_LEN 16

typedef struct ej_registry ej_registry;
typedef struct ej_tree_cache ej_tree_cache;

/* Connection states, as Curator names them. */
typedef enum {
    EJ_REG_CONNECTED = 1,   /* the first connection of the registry */
    EJ_REG_SUSPENDED = 2,   /* connection lost; the session may still live */
    EJ_REG_RECONNECTED = 3, /* connected again (same session or a new one) */
    EJ_REG_LOST = 4,        /* session expired, or disconnected longer than its timeout */
} ej_reg_state;

/* A connection-state callback. new_session is meaningful for
 * EJ_REG_RECONNECTED only: true when the old session is gone (its ephemeral
 * nodes and watches with it) and this is a fresh one. Runs on the dispatch
 * thread. */
typedef void (*ej_reg_state_fn)(ej_registry *reg, ej_reg_state state, bool new_session, void *user);

/* A task run on the dispatch thread (ej_registry_post). */
typedef void (*ej_reg_task_fn)(ej_registry *reg, void *user);

/* The takeover margin's default and largest value (ms). */
#define EJ_REG_TAKEOVER_MARGIN_DEFAULT_MS 1000
#define EJ_REG_TAKEOVER_MARGIN_MAX_MS 600000

struct ej_registry_opts {
    const char *servers;       /* "host:port[,host:port...]", required */
    const char *namespace_;    /* without leading '/', e.g. "ejob-demo"; NULL or "" = root */
    int session_timeout_ms;    /* 0 = 60000; the server clamps it to [2, 20] x tickTime */
    int connection_timeout_ms; /* 0 = 15000: how long ej_registry_create waits to connect */
    int base_sleep_ms;         /* 0 = 1000: retry back-off base */
    int max_sleep_ms;          /* 0 = 3000: retry back-off cap */
    int max_retries;           /* 0 = 3; negative = no retries */
    const char *digest;        /* "user:password" for digest auth, or NULL */
    /* Optional first connection-state listener, registered before connecting
     * so it sees EJ_REG_CONNECTED. Same rules as ej_registry_add_listener. */
    ej_reg_state_fn on_state;
    void *on_state_user;
    /* How long no item of a job starts after another instance's node went
     * (docs/coordination.md, "takeover margin"): 0 = the default, 1000 ms
     * (or EJOB_TAKEOVER_MARGIN_MS from the environment); > 0 that many ms;
     * negative = none. */
    int takeover_margin_ms;
};

/* Node metadata (ZooKeeper's Stat). Times are ms since the epoch. */
struct ej_node_stat {
    int64_t czxid;           /* zxid of the create */
    int64_t mzxid;           /* zxid of the last data change */
    int64_t ctime;           /* create time */
    int64_t mtime;           /* last data change time */
    int32_t version;         /* data version */
    int32_t cversion;        /* children version */
    int64_t ephemeral_owner; /* session id owning an ephemeral node, else 0 */
    int32_t num_children;
    int32_t data_length;
    int64_t pzxid;    /* zxid of the last children change */
    int32_t aversion; /* ACL version */
};

/* How a node is created. */
typedef enum {
    EJ_REG_PERSISTENT = 0,
    EJ_REG_EPHEMERAL = 1,
    EJ_REG_PERSISTENT_SEQUENTIAL = 2,
    EJ_REG_EPHEMERAL_SEQUENTIAL = 3,
    EJ_REG_CONTAINER = 4, /* deleted by the server once it had children and is empty */
} ej_reg_mode;

/* Flags of ej_registry_create_node. */
#define EJ_REG_CREATE_PARENTS 0x1u    /* create missing parents as persistent nodes, data "" */
#define EJ_REG_CONTAINER_PARENTS 0x2u /* create missing parents as containers (implies PARENTS) */

/* Order of child names. */
typedef enum {
    EJ_REG_UNSORTED = 0,  /* as the server returned them */
    EJ_REG_SORT_ASC = 1,  /* byte-wise ascending (strcmp) */
    EJ_REG_SORT_DESC = 2, /* byte-wise descending: what ElasticJob's getChildrenKeys returns */
} ej_reg_sort;

/* ------------------------------------------------------------------------ */
/* Lifecycle                                                                 */

/* Connect and wait until the session is established, up to
 * connection_timeout_ms. opts is copied (strings too).
 * Returns 0 and *out, or: EJ_EINVAL (opts NULL, servers missing, negative
 * timeouts, digest without ':'), EJ_EBADPATH (bad namespace), EJ_ETIMEDOUT
 * (no connection in time; the message names the servers), EJ_EAUTHFAILED,
 * -ENOMEM, -errno (threads). On error *out is NULL and nothing is left
 * running; ej_registry_errmsg(NULL) has the reason. The caller owns *out. */
EJ_EXTERN int ej_registry_create(ej_registry **out, const struct ej_registry_opts *opts);

/* Close the session (its ephemeral nodes vanish at once), stop the dispatch
 * thread and free everything. Tasks already posted still run; pending watches
 * get EJ_REG_WATCH_CANCELLED; tree caches not yet destroyed are destroyed
 * (without further events). Accepts NULL. Must not be called on the dispatch
 * thread (from a callback). */
EJ_EXTERN void ej_registry_destroy(ej_registry *reg);

/* The message of the last failed call made by the calling thread on any
 * registry (thread-local; reg may be NULL, it is only for symmetry). Names
 * the operation, the path (namespace-relative) and the reason. "" when the
 * thread has seen no failure. Borrowed until the thread's next registry
 * call. */
EJ_EXTERN const char *ej_registry_errmsg(const ej_registry *reg);

/* The current session id. It stays while EJ_REG_SUSPENDED (the session may
 * still live); 0 from EJ_REG_LOST until the next session is established.
 * Thread-safe. */
EJ_EXTERN int64_t ej_registry_session_id(const ej_registry *reg);

/* The current session id and password (for tools and tests that need to act
 * on the session, e.g. force its expiry). passwd receives EJ_REG_PASSWD_LEN
 * bytes. Returns 0, or EJ_ECONNLOSS when there is no session (as for
 * ej_registry_session_id). */
EJ_EXTERN int ej_registry_session_credentials(const ej_registry *reg, int64_t *session_id,
                                              char passwd[EJ_REG_PASSWD_LEN]);

/* The session timeout the server granted (zoo_recv_timeout), in ms; 0 before
 * the first connection. Thread-safe. */
EJ_EXTERN int ej_registry_negotiated_timeout_ms(const ej_registry *reg);

/* The takeover margin of this registry's jobs in ms (opts.takeover_margin_ms
 * resolved: 0 when none). Thread-safe. */
EJ_EXTERN int ej_registry_takeover_margin_ms(const ej_registry *reg);

/* The namespace without leading '/' ("" for none). Borrowed for the
 * registry's lifetime. */
EJ_EXTERN const char *ej_registry_namespace(const ej_registry *reg);

/* True while connected (a session established and the connection up). */
EJ_EXTERN bool ej_registry_is_connected(const ej_registry *reg);

/* The last connection state delivered (or being delivered) to listeners. */
EJ_EXTERN ej_reg_state ej_registry_state(const ej_registry *reg);

/* Block until connected or timeout_ms passes. 0, EJ_ETIMEDOUT, EJ_ECLOSED. */
EJ_EXTERN int ej_registry_wait_connected(ej_registry *reg, int timeout_ms);

/* Requests this registry has sent to ZooKeeper so far (every attempt of every
 * operation, tree-cache reads included; not pings). Thread-safe (atomic). */
EJ_EXTERN uint64_t ej_registry_request_count(const ej_registry *reg);

/* ------------------------------------------------------------------------ */
/* Liveness and self-fencing                                                 */

/*
 * A ZooKeeper server expires a session once it has heard nothing from its
 * client for the negotiated session timeout T; the client learns of that
 * only when it reaches a server again. So the registry keeps its own proof
 * of contact: a watchdog thread ("ej-reg-live") sends a tiny read (an
 * exists on the namespace node) every T/6 and, when it is answered, takes
 * the moment it was SENT as the last contact (the server heard the client
 * at or after that moment, so it cannot expire the session before last
 * contact + T). From the silence since then:
 *
 *   silence <  T/2         EJ_REG_FENCE_OPEN    work may start
 *   silence >= T/2         EJ_REG_FENCE_HOLD    start nothing new
 *   silence >= 6/10 x T    EJ_REG_FENCE_CANCEL  stop what runs, so that it
 *                                               is gone before T
 *
 * A connection the client reports down is at least HOLD; an expired or
 * replaced session is CANCEL. The fence opens again only on an answer in
 * the same session (a new session is a different session: whoever fenced on
 * the old one must register again in the new one).
 */
typedef enum {
    EJ_REG_FENCE_OPEN = 0,
    EJ_REG_FENCE_HOLD = 1,
    EJ_REG_FENCE_CANCEL = 2,
} ej_reg_fence;

/* The thresholds above, in thousandths of the negotiated session timeout. */
#define EJ_REG_FENCE_HOLD_PERMILLE 500
#define EJ_REG_FENCE_CANCEL_PERMILLE 600

/* The fence of session (0: the session of the last contact). Any session
 * other than the one of the last contact is EJ_REG_FENCE_CANCEL. Thread-safe,
 * never blocks, costs no request. */
EJ_EXTERN ej_reg_fence ej_registry_fence(const ej_registry *reg, int64_t session);

/* The last contact: CLOCK_MONOTONIC milliseconds (ej__mono_ms) of the send
 * time of the latest answered request of the watchdog, or 0 when none yet;
 * *session (may be NULL) the session it was on. Thread-safe. */
EJ_EXTERN int64_t ej_registry_last_contact_ms(const ej_registry *reg, int64_t *session);

/* A fence callback: the fence of the last contact's session changed (level,
 * session as ej_registry_fence would return them now). Runs on the
 * registry's watchdog thread, never on the dispatch thread, so it is never
 * held up by operations that wait there; it must return quickly (set flags,
 * signal) and must not call synchronous operations. */
typedef void (*ej_reg_fence_fn)(ej_registry *reg, ej_reg_fence level, int64_t session, void *user);

/* Add / remove a fence callback. The same (fn, user) may be added once.
 * When remove returns (on any thread but the watchdog's), fn is not running
 * and will not run again. 0, EJ_EINVAL, EJ_ENOTFOUND, -ENOMEM. */
EJ_EXTERN int ej_registry_add_fence_listener(ej_registry *reg, ej_reg_fence_fn fn, void *user);
EJ_EXTERN int ej_registry_remove_fence_listener(ej_registry *reg, ej_reg_fence_fn fn, void *user);

/* ------------------------------------------------------------------------ */
/* Dispatch thread                                                           */

/* Add a connection-state listener. Called on the dispatch thread for every
 * state change after this call returns. The same (fn, user) pair may be
 * added once. Returns 0, EJ_EINVAL (fn NULL or pair already added),
 * -ENOMEM. */
EJ_EXTERN int ej_registry_add_listener(ej_registry *reg, ej_reg_state_fn fn, void *user);

/* Remove a listener added with (fn, user). When this returns (on any thread),
 * the listener is not running and will not be called again. Returns 0 or
 * EJ_ENOTFOUND. */
EJ_EXTERN int ej_registry_remove_listener(ej_registry *reg, ej_reg_state_fn fn, void *user);

/* Run fn(reg, user) on the dispatch thread, after everything queued before.
 * Returns 0 (fn will run exactly once, even when the registry is being
 * destroyed), EJ_ECLOSED (registry being destroyed: fn never runs), -ENOMEM.
 * Thread-safe; may be called from callbacks. */
EJ_EXTERN int ej_registry_post(ej_registry *reg, ej_reg_task_fn fn, void *user);

/* As ej_registry_post, but run no sooner than delay_ms from now. Delayed
 * tasks still pending at destroy run then (early). */
EJ_EXTERN int ej_registry_post_after(ej_registry *reg, int delay_ms, ej_reg_task_fn fn, void *user);

/* Wait until everything posted to the dispatch thread before this call
 * (events and tasks; not delayed tasks) has run. Returns 0, EJ_ETIMEDOUT,
 * EJ_EINVAL (called on the dispatch thread), EJ_ECLOSED. */
EJ_EXTERN int ej_registry_barrier(ej_registry *reg, int timeout_ms);

/* True when called on reg's dispatch thread. */
EJ_EXTERN bool ej_registry_on_dispatch_thread(const ej_registry *reg);

/* ------------------------------------------------------------------------ */
/* Synchronous operations. Thread-safe; they block the caller. Reads and the
 * writes marked "retried" are retried on connection loss with Curator's
 * ExponentialBackoffRetry (see docs/registry.md); while not connected, an
 * attempt waits for the connection within the same back-off. */

/* Read a node. On 0: *data (if data is not NULL) is a new NUL-terminated
 * buffer the caller frees (empty node: "" with *len 0), *len its length
 * (len may be NULL), *stat filled (may be NULL). Retried. Errors:
 * EJ_ENONODE, EJ_ENOAUTH, EJ_ECONNLOSS, EJ_EBADPATH, ... */
EJ_EXTERN int ej_registry_get(ej_registry *reg, const char *path, char **data, size_t *len,
                              struct ej_node_stat *stat);

/* Does the node exist? On 0: *exists set; *stat filled when it exists (stat
 * may be NULL). Always a server round trip. Retried. */
EJ_EXTERN int ej_registry_exists(ej_registry *reg, const char *path, bool *exists,
                                 struct ej_node_stat *stat);

/* The names (not paths) of a node's children. On 0: *names is a new
 * NULL-terminated array of new strings (free with ej_registry_free_names),
 * *count its length (count may be NULL). Retried. EJ_ENONODE when the node
 * is missing. */
EJ_EXTERN int ej_registry_children(ej_registry *reg, const char *path, ej_reg_sort sort,
                                   char ***names, size_t *count);

/* Free an array from ej_registry_children / ej_tree_cache_children. NULL ok. */
EJ_EXTERN void ej_registry_free_names(char **names);

/* Create a node with data (len bytes; data may be NULL when len is 0).
 * For sequential modes the path may end with '/' (the name is then just the
 * sequence number). flags: EJ_REG_CREATE_PARENTS / EJ_REG_CONTAINER_PARENTS.
 * With a digest the node gets CREATOR_ALL_ACL, else OPEN_ACL_UNSAFE.
 * On 0 and actual_path not NULL: *actual_path is the created path
 * (namespace-relative, with the sequence suffix); the caller frees it.
 * Non-sequential creates are retried (an ephemeral node found to exist and
 * owned by this session after a lost reply counts as created); sequential
 * ones are not (EJ_ECONNLOSS: the node may or may not have been created).
 * Errors: EJ_ENODEEXISTS, EJ_ENONODE (parent missing, no PARENTS flag),
 * EJ_ENOCHILDREN, EJ_ETOOBIG, EJ_EBADPATH, EJ_EINVAL (mode), EJ_ENOAUTH,
 * EJ_ECONNLOSS ... */
EJ_EXTERN int ej_registry_create_node(ej_registry *reg, const char *path, const void *data,
                                      size_t len, ej_reg_mode mode, unsigned flags,
                                      char **actual_path);

/* Replace a node's data if its version is `version` (-1: any version).
 * stat (may be NULL) receives the new stat. Retried when version is -1.
 * Errors: EJ_ENONODE, EJ_EBADVERSION, EJ_ETOOBIG, EJ_ENOAUTH, ... */
EJ_EXTERN int ej_registry_set(ej_registry *reg, const char *path, const void *data, size_t len,
                              int version, struct ej_node_stat *stat);

/* Delete a node (without children) if its version is `version` (-1: any).
 * Retried when version is -1 (a node found gone after a lost reply counts as
 * deleted). Errors: EJ_ENONODE, EJ_EBADVERSION, EJ_ENOTEMPTY, ... */
EJ_EXTERN int ej_registry_delete(ej_registry *reg, const char *path, int version);

/* Delete a node and everything below it (ElasticJob's remove). Children
 * created meanwhile by others are deleted too (a few rounds). Retried.
 * Returns 0 also when the node is already gone. A subtree that cannot go
 * (written again after every round: EJ_ENOTEMPTY; or forbidden by its
 * ACL: EJ_ENOAUTH) stays, with the nodes above it; everything else is
 * deleted all the same, and its error is returned after. */
EJ_EXTERN int ej_registry_delete_recursive(ej_registry *reg, const char *path);

/* ElasticJob's persist: create the node (persistent, creating parents) when
 * missing, else set its data (any version). Retried. */
EJ_EXTERN int ej_registry_persist(ej_registry *reg, const char *path, const void *data, size_t len);

/* ElasticJob's persistEphemeral: delete the node (with children) when it
 * exists, then create it ephemeral (creating persistent parents). Retried. */
EJ_EXTERN int ej_registry_persist_ephemeral(ej_registry *reg, const char *path, const void *data,
                                            size_t len);

/* ------------------------------------------------------------------------ */
/* Transactions (ZooKeeper multi)                                            */

typedef enum {
    EJ_REG_OP_CREATE = 1, /* path, data, len, mode, out_path */
    EJ_REG_OP_DELETE = 2, /* path, version */
    EJ_REG_OP_SET = 3,    /* path, data, len, version */
    EJ_REG_OP_CHECK = 4,  /* path, version (-1: the node just has to exist) */
} ej_reg_op_type;

struct ej_reg_op {
    ej_reg_op_type type;
    const char *path;
    const void *data; /* create, set (may be NULL when len is 0) */
    size_t len;
    ej_reg_mode mode; /* create */
    int version;      /* delete, set, check; -1 = any */
    /* Output: this op's result, 0 on success. When the transaction fails,
     * the op that made it fail has its error and the others EJ_EAGAIN (rolled
     * back or not run). */
    int result;
    /* Output, create only, optional: when not NULL and the transaction
     * succeeded, receives the created path (namespace-relative); the caller
     * frees it. Set to NULL otherwise. */
    char **out_path;
    /* Output, set only, optional: when not NULL and the transaction
     * succeeded, receives the node's stat after the set. A set on a node
     * created earlier in the same transaction gives that node's czxid, the
     * transaction's zxid: the only way the C client returns a created node's
     * stat from a multi (it sends no CREATE2 inside one). */
    struct ej_node_stat *out_stat;
};

/* Run ops (n >= 1) atomically: all succeed or nothing is written. Not
 * retried (EJ_ECONNLOSS: it may or may not have been applied). Returns 0, or
 * the failing op's error with *failed_index (may be NULL) its index and the
 * message naming op and path. Input is validated first (EJ_EBADPATH,
 * EJ_ETOOBIG for the total, EJ_EINVAL; *failed_index names the op, or n for
 * the total). */
EJ_EXTERN int ej_registry_multi(ej_registry *reg, struct ej_reg_op *ops, size_t n,
                                size_t *failed_index);

/* One read of ej_registry_read_many. */
struct ej_reg_read {
    const char *path; /* input: namespace-relative */
    /* Output: 0 (read), EJ_ENONODE (no such node), or the error of this
     * read (EJ_ENOAUTH, EJ_EBADPATH, ...). */
    int result;
    char *data;               /* output, with data: NUL-terminated (caller frees), else NULL */
    size_t len;               /* output, with data: its length */
    struct ej_node_stat stat; /* output: filled when result is 0 */
};

/* Reads n nodes (their stat, and with data their data too), every request
 * sent before any answer is waited for: one round trip for all of them
 * where n calls of ej_registry_get or _exists wait for n, one after the
 * other (the server answers a session's requests in the order sent). Each
 * read's result says what it found. Retried as a whole on connection loss.
 * Returns 0 when every read was answered (whatever each found), else the
 * error that kept them from being answered (EJ_ECONNLOSS after the
 * retries, EJ_EINVAL, EJ_ENOMEM); results are then not set. */
EJ_EXTERN int ej_registry_read_many(ej_registry *reg, struct ej_reg_read *reads, size_t n,
                                    bool data);

/* Frees the data of n reads of ej_registry_read_many (NULL ok). */
EJ_EXTERN void ej_registry_reads_fini(struct ej_reg_read *reads, size_t n);

/* ------------------------------------------------------------------------ */
/* One-shot watches                                                          */

typedef enum {
    EJ_REG_WATCH_CREATED = 1,   /* exists-watch: the node was created */
    EJ_REG_WATCH_DELETED = 2,   /* the node was deleted */
    EJ_REG_WATCH_CHANGED = 3,   /* its data changed */
    EJ_REG_WATCH_CHILDREN = 4,  /* its children changed */
    EJ_REG_WATCH_CANCELLED = 5, /* the session was replaced or the registry destroyed: the
                                   watch will never fire */
} ej_reg_watch_event;

/* Called once per successful watch registration, on the dispatch thread.
 * path (namespace-relative) lives during the call. */
typedef void (*ej_reg_watch_fn)(ej_registry *reg, ej_reg_watch_event event, const char *path,
                                void *user);

/* As ej_registry_get, leaving a watch for the node's data change or deletion.
 * The watch is set only when 0 is returned. */
EJ_EXTERN int ej_registry_get_watch(ej_registry *reg, const char *path, ej_reg_watch_fn fn,
                                    void *user, char **data, size_t *len,
                                    struct ej_node_stat *stat);

/* As ej_registry_exists, leaving a watch for creation (if absent) or data
 * change / deletion (if present). Set whenever 0 is returned. */
EJ_EXTERN int ej_registry_exists_watch(ej_registry *reg, const char *path, ej_reg_watch_fn fn,
                                       void *user, bool *exists, struct ej_node_stat *stat);

/* As ej_registry_children, leaving a watch for the children change or the
 * node's deletion. Set only when 0 is returned. */
EJ_EXTERN int ej_registry_children_watch(ej_registry *reg, const char *path, ej_reg_watch_fn fn,
                                         void *user, ej_reg_sort sort, char ***names,
                                         size_t *count);

/* ------------------------------------------------------------------------ */
/* Tree cache (like Curator's TreeCache)                                     */

typedef enum {
    EJ_TREE_NODE_ADDED = 1,
    EJ_TREE_NODE_UPDATED = 2,
    EJ_TREE_NODE_REMOVED = 3, /* data and stat are the last ones known */
    EJ_TREE_INITIALIZED = 4,  /* initial load done, or rebuild after a new session done;
                                 path, data, stat are NULL */
} ej_tree_event_type;

struct ej_tree_event {
    ej_tree_event_type type;
    const char *path;                /* namespace-relative */
    const char *data;                /* NUL-terminated; "" when empty */
    size_t len;                      /* data length */
    const struct ej_node_stat *stat; /* stat of the node (last known for REMOVED) */
    /* When the cache learnt of the change (CLOCK_MONOTONIC ms): the time
     * the watch that told it fired, which for a child removed is a round
     * trip (its parent's listing) before the event; 0 when not known. */
    int64_t noticed_mono_ms;
};

/* A tree-cache listener. The event and everything it points to live during
 * the call. Runs on the dispatch thread; events of one cache come in the
 * order ZooKeeper produced the changes, the cache already showing the
 * change. */
typedef void (*ej_tree_cache_fn)(ej_tree_cache *cache, const struct ej_tree_event *event,
                                 void *user);

/* Make a cache of the subtree at root (namespace-relative, e.g. "/myJob";
 * the root may not exist yet). listener may be NULL. Nothing happens until
 * ej_tree_cache_start. Returns 0 and *out (caller owns, destroy before the
 * registry), EJ_EBADPATH, EJ_EINVAL, -ENOMEM. */
EJ_EXTERN int ej_tree_cache_create(ej_registry *reg, const char *root, ej_tree_cache_fn listener,
                                   void *user, ej_tree_cache **out);

/* Start loading the subtree and watching it. Every node found is reported
 * as EJ_TREE_NODE_ADDED, then EJ_TREE_INITIALIZED once. After a new session
 * the cache reloads everything it knows, reports the differences as events
 * (removed ephemeral nodes of the old session among them) and then
 * EJ_TREE_INITIALIZED again. Starting a started cache does nothing.
 * Returns 0, EJ_EINVAL (cache NULL), EJ_ECLOSED. */
EJ_EXTERN int ej_tree_cache_start(ej_tree_cache *cache);

/* Stop and free the cache. After it returns the listener is not running and
 * is never called again (when called from the cache's own listener: once
 * that call returns). NULL ok. */
EJ_EXTERN void ej_tree_cache_destroy(ej_tree_cache *cache);

/* Wait for the first EJ_TREE_INITIALIZED (0), up to timeout_ms
 * (EJ_ETIMEDOUT). Must not be called on the dispatch thread (EJ_EINVAL). */
EJ_EXTERN int ej_tree_cache_wait_initialized(ej_tree_cache *cache, int timeout_ms);

/* True once the first load has completed. */
EJ_EXTERN bool ej_tree_cache_is_initialized(const ej_tree_cache *cache);

/* The registry the cache belongs to, and its root path (borrowed). */
EJ_EXTERN ej_registry *ej_tree_cache_registry(const ej_tree_cache *cache);
EJ_EXTERN const char *ej_tree_cache_root(const ej_tree_cache *cache);

/* Cached read, no server round trip; same conventions as ej_registry_get.
 * EJ_ENONODE when the node is not in the cache (or outside its root).
 * Thread-safe. */
EJ_EXTERN int ej_tree_cache_get(ej_tree_cache *cache, const char *path, char **data, size_t *len,
                                struct ej_node_stat *stat);

/* Is the node in the cache? stat (may be NULL) filled when it is. */
EJ_EXTERN bool ej_tree_cache_exists(ej_tree_cache *cache, const char *path,
                                    struct ej_node_stat *stat);

/* Cached children names, as ej_registry_children (free with
 * ej_registry_free_names; EJ_REG_UNSORTED gives ascending order).
 * EJ_ENONODE when the node is not cached. */
EJ_EXTERN int ej_tree_cache_children(ej_tree_cache *cache, const char *path, ej_reg_sort sort,
                                     char ***names, size_t *count);

/* Number of nodes in the cache (root included when present). */
EJ_EXTERN size_t ej_tree_cache_size(ej_tree_cache *cache);

#endif
