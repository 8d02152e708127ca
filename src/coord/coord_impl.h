/*
 * The coordinator's state, shared by the files of the coordinator:
 *
 *   coord.c         accessors and the serial queue (posting, calls, copied
 *                   events, delayed tasks)
 *   lifecycle.c     the caches' shapes, create, start-up, leave, destroy
 *   election.c      leader election, the latch's parents of a new job, the
 *                   leader cache, healing a stale leader
 *   config_watch.c  the config node: start-up's write, parse, validate,
 *                   apply changes
 *   membership.c    servers/ and instances/, registration, connection
 *                   states and the fence
 *   reconcile.c     ElasticJob's ReconcileService
 *   snapshot.c      the published snapshot, the getters that read it and
 *                   the change counter waiters sleep on
 *
 * Not part of the module's internal API (internal.h): only these files.
 */
#ifndef EJ_COORD_IMPL_H
#define EJ_COORD_IMPL_H

#include <pthread.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stdint.h>

#include "common/check.h"
#include "coord/internal.h"
#include "ejob/config.h"
#include "schedule/internal.h"

struct ej__coord {
    ej_registry *reg;
    char *job, *me, *ip;
    ej__sched *sched;
    /* The job's control tasks (ej__coord_post) run here one at a time, in
     * the order posted: election, crash handling, re-registration and
     * operator checks of one job never race each other. */
    ej__sched_job *serial;
    int bound_ms;
    int64_t reconcile_override_ms;
    struct ej__coord_hooks hooks;

    /* Paths (namespace-relative). */
    char *p_root, *p_config, *p_servers, *p_instances, *p_leader, *p_leader_inst, *p_el_latch,
        *p_necessary, *p_processing, *p_fo_items, *p_fo_latch, *p_my_server, *p_my_instance;

    /* What other threads read of the state below: an immutable snapshot,
     * republished by the serial queue after every task that changed what
     * it holds (snapshot.c). snap_mu guards the pointer only. */
    pthread_mutex_t snap_mu;
    struct ej__coord_snap *snap;

    /* Lifecycle, any thread: listeners and tasks count themselves in
     * (ej__coord_enter) unless closed; destroy waits for none inside. */
    atomic_int refs;
    atomic_int inflight;
    atomic_bool closed; /* leave/destroy began: no more reactions */

    /* Waking waiters on other threads (a fire waiting for a leader or a
     * resharding, destroy waiting for the tasks inside): a change counter
     * bumped at every event and published state. change_mu guards the
     * counter alone, never the state. */
    pthread_mutex_t change_mu;
    pthread_cond_t change_cv;
    uint64_t changes;

    /* Owned by the registry's dispatch thread (its only writer: the
     * connection and instances listeners, which must change them at the
     * event, not when the queue gets to it); read anywhere. */
    atomic_bool connected;
    /* Mono ms before which no item starts here: another instance's session
     * expired (its node removed) less than the takeover margin ago, and a
     * starved owner may still be ending the copy it ran (membership.c). */
    _Atomic int64_t takeover_hold_until;

    /* Owned by the fire that runs the job (runtime/fire.c, set_busy) and
     * by the resharding (shard.c); read anywhere. */
    atomic_bool busy;
    _Atomic uint64_t reshards; /* assignments written as leader (shard.c) */

    /* Fence level last told to the runtime; -1 none. Atomic: the fence
     * listener runs on the registry's watchdog thread and must reach the
     * runtime whatever the queue is doing (docs/coordination.md, the
     * fence's bounds), so it reads the snapshot and this. */
    atomic_int fence_told;

    /* One leader resharding at a time: a fire's and a busy leader's
     * (shard.c, ej__shard_when_busy). */
    ej__mutex shard_mu;
    /* The czxid of the leader/sharding/necessary flag this leader last
     * resharded for: the cache may still show that flag for a moment after
     * the resharding deleted it, and a second resharding (a fire's and a
     * busy leader's task, one after the other) must not take it for a new
     * one. Under shard_mu. */
    int64_t shard_consumed_czxid;
    atomic_bool shard_posted; /* a busy leader's resharding task is queued */

    /* The coordination state. Owned by the job's serial queue: written and
     * read only by its tasks (ej__coord_post, ej__coord_call; checked by
     * EJ_ASSERT_SERIAL in every writer). Other threads read the snapshot. */
    bool started; /* start-up finished */
    bool stopped; /* operator shutdown or job removed */
    bool electing;
    bool elect_recheck; /* the election in progress re-checks the job's nodes (election.c) */
    /* When the election's planned turn or next look at the latch is due
     * (mono ms), 0 when none is planned: one plan at a time (election.c). */
    int64_t elect_look_due;
    /* The election's latch wait, cancelled when a leader appears (the
     * acquisition's reference; NULL when none is under way). */
    ej__latch_wait *elect_wait;
    int64_t won_session; /* session in which this instance last won an election */
    int64_t reg_session; /* session that created our instance node; 0 none */
    int64_t reg_at_ms;   /* wall ms of that registration */
    /* The session in which this instance last set the resharding flag
     * (created it or found it there). Only a leader sets it before step 6
     * of the start (an election won in the start), and step 6 is then
     * done. */
    int64_t necessary_session;
    bool necessary_posted; /* a task to set the flag is queued (election.c) */
    int64_t last_reconcile_ms;
    char err[1024];
    bool err_is_config;
    struct ej_job_config cfg;
    bool have_cfg;
    uint64_t cfg_gen; /* bumped at every change of cfg (the snapshot copies it) */
    bool fence_added; /* our fence listener is on the registry */
    bool listener_added;

    ej_tree_cache *c_config, *c_servers, *c_instances, *c_leader;
    ej__view *view;
    struct ej__failover_state *fo;
    struct ej__running_state *ex;
};

/* snapshot.c: what other threads read of the coordinator, published by
 * the thread that changed it. Immutable once published; reference-counted
 * so that a reader keeps its copy while newer ones replace it. */
struct ej__coord_snap {
    atomic_int refs;
    int64_t reg_session; /* the session our instance node was created in; 0 none */
    int64_t reg_at_ms;   /* wall ms of that registration */
    bool started, stopped, closed;
    bool failover_on; /* the config in force has failover */
    int total_count;  /* its shardingTotalCount; 0 none */
    uint64_t cfg_gen; /* which config cfg is */
    bool have_cfg;
    struct ej_job_config cfg; /* the config in force (have_cfg) */
    char err[1024];           /* the last error */
};

/* Publish the state's snapshot when it changed (on the serial queue,
 * checked). Every serial task ends with it. Aborts when out of memory: a
 * reader must never see a stale state. */
void ej__coord_publish(ej__coord *c);
/* The snapshot now (a reference: ej__coord_snap_unref). Never NULL once
 * created. Any thread; takes no coordinator lock. */
struct ej__coord_snap *ej__coord_snap_get(ej__coord *c);
void ej__coord_snap_unref(struct ej__coord_snap *s);
/* Set up and tear down (create, unref). */
void ej__coord_snap_init(ej__coord *c);
void ej__coord_snap_fini(ej__coord *c);

/* Listeners and tasks run between ej__coord_enter() (false: closed, do
 * nothing) and ej__coord_done(). */
bool ej__coord_enter(ej__coord *c);
void ej__coord_done(ej__coord *c);
void ej__coord_unref(ej__coord *c);

/* coord.c */
/* Listeners: copy a cache event and queue fn(c, copy) on the serial queue
 * (the event's path, data and stat are copied). 0 or EJ_ENOMEM / the
 * queue's error (logged). */
int ej__coord_post_event(ej__coord *c, const struct ej_tree_event *ev,
                         void (*fn)(ej__coord *c, const struct ej_tree_event *ev));
/* Does the coordinator react to events now (started, not stopped, not
 * closed; from the snapshot)? Events before the start are what the start
 * itself reads, and started means every cache had loaded (the start waits
 * for them), so the caches' INITIALIZED events are not posted. Any
 * thread. */
bool ej__coord_listening(ej__coord *c);

void ej__coord_on_view_change(void *user, int item, int kind);

/* election.c */
void ej__coord_leader_set_necessary(ej__coord *c);
/* The same once for a burst of events: in a task posted now, unless one is
 * queued already. Serial queue. */
void ej__coord_leader_set_necessary_soon(ej__coord *c);
bool ej__coord_eligible(ej__coord *c);
void ej__coord_post_election(ej__coord *c);
/* On the serial queue: begin an election whose latch wait is a watch (the
 * queue goes on meanwhile); its result lands in a later task. */
void ej__coord_elect_async(ej__coord *c);
void ej__coord_abdicate(ej__coord *c);
void ej__coord_on_leader_event(ej_tree_cache *cache, const struct ej_tree_event *ev, void *user);

/* config_watch.c */
int ej__coord_config_sync(ej__coord *c, const struct ej_job_config *local, char **data, size_t *len,
                          bool *fresh);
int ej__coord_parse_config(const char *data, size_t len, struct ej_job_config *out, char *err,
                           size_t errlen);
void ej__coord_on_config_event(ej_tree_cache *cache, const struct ej_tree_event *ev, void *user);

/* membership.c */
void ej__coord_stop_job(ej__coord *c, int why);
/* Is the job's root, or its config node, gone? (serial queue) */
void ej__coord_root_check(ej__coord *c, void *arg);
int ej__coord_persist_server(ej__coord *c, bool cfg_disabled, bool overwrite);
int ej__coord_register_instance(ej__coord *c);
void ej__coord_on_state(ej_registry *reg, ej_reg_state st, bool new_session, void *user);
void ej__coord_on_servers_event(ej_tree_cache *cache, const struct ej_tree_event *ev, void *user);
void ej__coord_on_fence(ej_registry *reg, ej_reg_fence level, int64_t session, void *user);
void ej__coord_on_instances_event(ej_tree_cache *cache, const struct ej_tree_event *ev, void *user);

/* reconcile.c */
void ej__coord_post_reconcile(ej__coord *c);

#endif
