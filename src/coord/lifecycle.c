/*
 * A coordinator's life: creating it (paths, caches and their shapes, the
 * view), the start-up (config, caches, registration, election, the
 * resharding flag), the leave and the destroy. The start and the leave run
 * as tasks of the job's serial queue, which owns the state they write.
 */
#include <inttypes.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "common/util.h"
#include "coord/coord_impl.h"
#include "ejob/config.h"
#include "ejob/error.h"
#include "ejob/log.h"
#include "reg/internal.h"
#include "schedule/internal.h"

#define MOD "coord"

/* ------------------------------------------------------------------------ */
/* Lifecycle                                                                  */

/* What the caches read (reg/internal.h, EJ__TREE_*). The coordinator
 * looks at the data of config, its own servers/{ip}, its own
 * instances/{id}, the leader node and the resharding flag, and at the
 * names of the other instances, of the processing flag and of the failover
 * items; nothing else. Other
 * servers' nodes are read by the leader when it shards: watched by every
 * member, each new IP would cost every member two reads. Every watch more
 * costs every instance a read at each change: the latches' contenders come
 * and go at every election, and their nodes are read by the latch itself
 * when it needs them. */
static int leaf_shape(const char *path, size_t depth, void *user)
{
    (void)path;
    (void)depth;
    (void)user;
    return EJ__TREE_DATA;
}

/* Other instances by name only: their data is the console's trigger of
 * them, and their sessions are found when needed (membership.c
 * on_departed); reading each would cost every member a read per member. */
static int instances_shape(const char *path, size_t depth, void *user)
{
    const ej__coord *c = user;
    if (depth == 0)
        return EJ__TREE_CHILDREN;
    return strcmp(path, c->p_my_instance) == 0 ? EJ__TREE_DATA : EJ__TREE_NAME;
}

/* The sharding's processing flag and the failover records matter by their
 * presence only (empty nodes, written and deleted by whichever instance
 * shards or records): by name, the listing of their parent tells both.
 * Read, each would cost every member a read at every sharding and every
 * crash. The resharding flag is read: the leader tells a new flag from one
 * it consumed by its czxid (ej__coord_shard_flag_new). */
static int leader_shape(const char *path, size_t depth, void *user)
{
    const ej__coord *c = user;
    if (strcmp(path, c->p_el_latch) == 0 || strcmp(path, c->p_fo_latch) == 0)
        return EJ__TREE_SKIP;
    size_t flen = strlen(c->p_fo_items);
    if (strcmp(path, c->p_processing) == 0 ||
        (strncmp(path, c->p_fo_items, flen) == 0 && path[flen] == '/'))
        return EJ__TREE_NAME;
    if (depth >= 3 || strcmp(path, c->p_leader_inst) == 0 || strcmp(path, c->p_necessary) == 0)
        return EJ__TREE_DATA;
    if (depth <= 1 || strcmp(path, c->p_fo_items) == 0)
        return EJ__TREE_CHILDREN;
    return EJ__TREE_ALL;
}

static int set_cache_shapes(ej__coord *c)
{
    int rc = ej__tree_cache_set_shape(c->c_config, leaf_shape, c);
    if (rc == 0)
        rc = ej__tree_cache_set_shape(c->c_servers, leaf_shape, c);
    if (rc == 0)
        rc = ej__tree_cache_set_shape(c->c_instances, instances_shape, c);
    if (rc == 0)
        rc = ej__tree_cache_set_shape(c->c_leader, leader_shape, c);
    return rc;
}

int ej__coord_create(const struct ej__coord_opts *o, ej__coord **out)
{
    if (o == NULL || out == NULL || o->reg == NULL || o->job_name == NULL ||
        o->instance_id == NULL || o->ip == NULL)
        return EJ_EINVAL;
    /* What the path table refuses (so a NULL path below is no memory). */
    if (!ej_layout_is_job_name(o->job_name) || !ej_layout_is_segment(o->ip) ||
        !ej_layout_is_segment(o->instance_id))
        return EJ_EINVAL;
    ej__coord *c = calloc(1, sizeof *c);
    if (c == NULL)
        return EJ_ENOMEM;
    c->reg = o->reg;
    c->job = strdup(o->job_name);
    c->me = strdup(o->instance_id);
    c->ip = strdup(o->ip);
    c->sched = o->sched ? o->sched : ej__sched_default();
    c->hooks = o->hooks;
    c->reconcile_override_ms = o->reconcile_ms;
    int sess = ej_registry_negotiated_timeout_ms(o->reg);
    c->bound_ms = o->wait_bound_ms > 0 ? o->wait_bound_ms : (sess > 0 ? 2 * sess + 2000 : 20000);
    ej__mutex_init(&c->shard_mu);
    pthread_mutex_init(&c->change_mu, NULL);
    pthread_condattr_t ca;
    pthread_condattr_init(&ca);
    pthread_condattr_setclock(&ca, CLOCK_MONOTONIC);
    pthread_cond_init(&c->change_cv, &ca);
    pthread_condattr_destroy(&ca);
    atomic_init(&c->refs, 1);
    atomic_init(&c->inflight, 0);
    atomic_init(&c->closed, false);
    atomic_init(&c->busy, false);
    atomic_init(&c->reshards, 0);
    atomic_init(&c->takeover_hold_until, 0);
    atomic_init(&c->fence_told, -1);
    atomic_init(&c->connected, ej_registry_is_connected(o->reg));
    ej__coord_snap_init(c);
    const char *j = o->job_name;
    c->p_root = ej_layout_path_dup(j, EJ_LAYOUT_NODE_JOB, 0, NULL);
    c->p_config = ej_layout_path_dup(j, EJ_LAYOUT_NODE_CONFIG, 0, NULL);
    c->p_servers = ej_layout_path_dup(j, EJ_LAYOUT_NODE_SERVERS, 0, NULL);
    c->p_instances = ej_layout_path_dup(j, EJ_LAYOUT_NODE_INSTANCES, 0, NULL);
    c->p_leader = ej_layout_path_dup(j, EJ_LAYOUT_NODE_LEADER, 0, NULL);
    c->p_leader_inst = ej_layout_path_dup(j, EJ_LAYOUT_NODE_ELECTION_INSTANCE, 0, NULL);
    c->p_el_latch = ej_layout_path_dup(j, EJ_LAYOUT_NODE_ELECTION_LATCH, 0, NULL);
    c->p_necessary = ej_layout_path_dup(j, EJ_LAYOUT_NODE_SHARDING_NECESSARY, 0, NULL);
    c->p_processing = ej_layout_path_dup(j, EJ_LAYOUT_NODE_SHARDING_PROCESSING, 0, NULL);
    c->p_fo_items = ej_layout_path_dup(j, EJ_LAYOUT_NODE_FAILOVER_ITEMS, 0, NULL);
    c->p_fo_latch = ej_layout_path_dup(j, EJ_LAYOUT_NODE_FAILOVER_LATCH, 0, NULL);
    c->p_my_server = ej_layout_path_dup(j, EJ_LAYOUT_NODE_SERVER, 0, o->ip);
    c->p_my_instance = ej_layout_path_dup(j, EJ_LAYOUT_NODE_INSTANCE, 0, o->instance_id);
    if (!c->job || !c->me || !c->ip || !c->p_root || !c->p_config || !c->p_servers ||
        !c->p_instances || !c->p_leader || !c->p_leader_inst || !c->p_el_latch || !c->p_necessary ||
        !c->p_processing || !c->p_fo_items || !c->p_fo_latch || !c->p_my_server ||
        !c->p_my_instance) {
        ej__coord_unref(c);
        return EJ_ENOMEM;
    }
    int rc = ej__sched_job_create(c->sched, c->job, 1, &c->serial);
    if (rc == 0)
        rc = ej_tree_cache_create(c->reg, c->p_config, ej__coord_on_config_event, c, &c->c_config);
    if (rc == 0)
        rc = ej_tree_cache_create(c->reg, c->p_my_server, ej__coord_on_servers_event, c,
                                  &c->c_servers);
    if (rc == 0)
        rc = ej_tree_cache_create(c->reg, c->p_instances, ej__coord_on_instances_event, c,
                                  &c->c_instances);
    if (rc == 0)
        rc = ej_tree_cache_create(c->reg, c->p_leader, ej__coord_on_leader_event, c, &c->c_leader);
    if (rc == 0)
        rc = set_cache_shapes(c);
    if (rc == 0)
        rc = ej__view_create(c->reg, j, c->me, ej__coord_on_view_change, c, &c->view);
    if (rc == 0) {
        c->fo = ej__failover_state_new();
        c->ex = ej__running_state_new();
        if (c->fo == NULL || c->ex == NULL)
            rc = EJ_ENOMEM;
    }
    if (rc != 0) {
        ej__coord_destroy(c);
        return rc;
    }
    *out = c;
    return 0;
}

/* Won an election in this session (the leader cache may not show it yet). */
/* How many wait bounds the caches may take to load while the connection
 * stays up. */
#define LOAD_PATIENCE 5

/*
 * Waits for a cache's first load; the four caches load together, from
 * `since`. On a live connection a slow load is not a failure: its reads
 * are queued behind the others this process and the fleet sent (a fleet
 * starting at once puts seconds of work before them), and ZooKeeper
 * answers them in order. Giving up and starting the job again would send
 * the same reads to the back of that queue and load the server more. So
 * past the wait bound the wait goes on while the registry is connected, up
 * to LOAD_PATIENCE bounds from `since`; without a connection it ends at the
 * bound (the job is tried again: daemon_retry.c). *waited: ms since `since`.
 */
static int wait_cache_loaded(ej__coord *c, ej_tree_cache *cache, int64_t since, int64_t *waited)
{
    int64_t hard = since + (int64_t)LOAD_PATIENCE * c->bound_ms;
    int64_t left = since + c->bound_ms - ej__mono_ms();
    int rc = ej_tree_cache_wait_initialized(cache, left > 0 ? (int)left : 0);
    bool told = false;
    while (rc == EJ_ETIMEDOUT && ej_registry_is_connected(c->reg) && ej__mono_ms() < hard &&
           !atomic_load(&c->closed)) {
        if (!told) {
            told = true;
            EJ_LOG(EJ_LOG_INFO, MOD, 0,
                   "job %s: the cache of %s is still loading after %" PRId64
                   " ms on a live connection; waiting up to %d ms",
                   c->job, ej_tree_cache_root(cache), ej__mono_ms() - since,
                   LOAD_PATIENCE * c->bound_ms);
        }
        left = hard - ej__mono_ms();
        rc = ej_tree_cache_wait_initialized(cache, left < 500 ? (int)left : 500);
    }
    *waited = ej__mono_ms() - since;
    return rc;
}

static bool won_now(const ej__coord *c)
{
    return c->won_session != 0 && c->won_session == c->reg_session;
}

/* The start-up, as a task of the serial queue: it writes the state. */
static int start_steps(ej__coord *c, const struct ej_job_config *local,
                       struct ej_job_config *effective, char *err, size_t errlen)
{
    EJ_ASSERT_SERIAL(c);
    ej_registry *reg = c->reg;
    int rc;
    /* 1. The config: persist when absent or overwrite, then always run
     * with what ZooKeeper holds. */
    char *data = NULL;
    size_t len = 0;
    bool fresh = false;
    rc = ej__coord_config_sync(c, local, &data, &len, &fresh);
    if (rc == EJ_ENOMEM)
        return rc;
    if (rc != 0)
        goto reg_error;
    struct ej_job_config zk;
    char why[512] = "";
    rc = ej__coord_parse_config(data, len, &zk, why, sizeof why);
    free(data);
    if (rc != 0) {
        snprintf(err, errlen, "config of job %s in ZooKeeper (%s) is invalid: %s", c->job,
                 c->p_config, why);
        ej__coord_set_error(c, "%s", err);
        return rc;
    }
    if (zk.job_type != local->job_type) {
        snprintf(err, errlen,
                 "jobType: ZooKeeper's config of job %s says %s, this job is %s (set overwrite "
                 "to replace it)",
                 c->job, ej_job_type_name(zk.job_type), ej_job_type_name(local->job_type));
        ej__coord_set_error(c, "%s", err);
        ej_job_config_fini(&zk);
        return EJ_ECONFIG;
    }
    rc = ej_job_config_copy(effective, &zk);
    if (rc != 0) {
        ej_job_config_fini(&zk);
        return rc;
    }
    if (c->have_cfg)
        ej_job_config_fini(&c->cfg);
    c->cfg = zk;
    c->have_cfg = true;
    c->cfg_gen++;
    bool failover = zk.failover, disabled = zk.disabled, overwrite = local->overwrite;

    /* 2. Caches, view and listeners. */
    rc = ej_registry_add_listener(reg, ej__coord_on_state, c);
    if (rc != 0)
        goto reg_error;
    c->listener_added = true;
    rc = ej_registry_add_fence_listener(reg, ej__coord_on_fence, c);
    if (rc != 0)
        goto reg_error;
    c->fence_added = true;
    ej_tree_cache *caches[] = {c->c_config, c->c_servers, c->c_instances, c->c_leader};
    for (size_t i = 0; i < 4; i++) {
        rc = ej_tree_cache_start(caches[i]);
        if (rc != 0)
            goto reg_error;
    }
    int64_t load_start = ej__mono_ms();
    for (size_t i = 0; i < 4; i++) {
        int64_t waited = 0;
        rc = wait_cache_loaded(c, caches[i], load_start, &waited);
        if (rc != 0) {
            snprintf(err, errlen, "job %s: the cache of %s did not load in %" PRId64 " ms%s",
                     c->job, ej_tree_cache_root(caches[i]), waited,
                     ej_registry_is_connected(c->reg) ? "" : " (not connected)");
            ej__coord_set_error(c, "%s", err);
            return rc;
        }
    }
    ej__view_set_failover(c->view, failover);
    if (fresh)
        ej__view_expect_absent(c->view);
    rc = ej__view_start(c->view);
    if (rc != 0)
        goto reg_error;

    /* 3. Server, instance, election, resharding flag. The server and
     * instance nodes come first so this instance counts as available when
     * the election below looks for candidates. */
    rc = ej__coord_persist_server(c, disabled, overwrite);
    if (rc != 0)
        goto reg_error;
    rc = ej__coord_register_instance(c);
    if (rc != 0)
        goto reg_error;
    c->started = true;
    c->last_reconcile_ms = ej__mono_ms();
    /* Listeners drop what they saw before the start (it is what the
     * start itself reads): they look at the snapshot. */
    ej__coord_publish(c);
    if (!ej__coord_server_disabled(c) && !ej__coord_leader_known(c))
        ej__coord_elect(c);
    /* 6. Unless this instance, just elected, set the flag already in this
     * session (a second create would only fail on the server). Set even
     * when the cache shows it: a leader's sharding that began before this
     * registration may be about to delete it (a Java leader does not look
     * at the instances again). */
    bool flagged = c->necessary_session != 0 && c->necessary_session == c->reg_session;
    rc = flagged ? 0 : ej__coord_set_necessary(c);
    if (rc != 0)
        goto reg_error;
    ej__coord_post_reconcile(c);
    EJ_LOG(EJ_LOG_INFO, MOD, 0, "job %s: instance %s registered (%s)", c->job, c->me,
           won_now(c) || ej__coord_is_leader(c) ? "leader" : "follower");
    return 0;

reg_error:
    snprintf(err, errlen, "job %s: %s", c->job, ej_registry_errmsg(reg));
    ej__coord_set_error(c, "%s", err);
    return rc;
}

struct start_args {
    const struct ej_job_config *local;
    struct ej_job_config *effective;
    char *err;
    size_t errlen;
    int rc;
};

static void start_task(ej__coord *c, void *arg)
{
    struct start_args *a = arg;
    a->rc = start_steps(c, a->local, a->effective, a->err, a->errlen);
}

int ej__coord_start(ej__coord *c, const struct ej_job_config *local,
                    struct ej_job_config *effective, char *err, size_t errlen)
{
    if (c == NULL || local == NULL || effective == NULL)
        return EJ_EINVAL;
    char none[1];
    if (err == NULL || errlen == 0) {
        err = none;
        errlen = sizeof none;
    }
    err[0] = '\0';
    struct start_args a = {local, effective, err, errlen, 0};
    ej__coord_call(c, start_task, &a);
    return a.rc;
}

/* Leaving, on the serial queue: give up leadership and delete the
 * instance node of the session it was registered in. */
static void leave_task(ej__coord *c, void *arg)
{
    (void)arg;
    EJ_ASSERT_SERIAL(c);
    int64_t sess = c->reg_session;
    if (!ej_registry_is_connected(c->reg))
        return;
    ej__coord_abdicate(c);
    if (sess != 0 && sess == ej_registry_session_id(c->reg)) {
        int rc = ej_registry_delete(c->reg, c->p_my_instance, -1);
        if (rc != 0 && rc != EJ_ENONODE)
            EJ_LOG(EJ_LOG_WARN, MOD, rc, "job %s: cannot delete %s: %s", c->job, c->p_my_instance,
                   ej_registry_errmsg(c->reg));
        /* The marker goes with the instance node (membership.c). */
        char *marker = ej_layout_marker_path_dup(c->job, c->me);
        if (marker)
            ej_registry_delete(c->reg, marker, -1);
        free(marker);
    }
}

void ej__coord_leave(ej__coord *c)
{
    if (c == NULL)
        return;
    if (atomic_exchange(&c->closed, true))
        return;
    ej__coord_changed(c);
    if (c->listener_added) {
        ej_registry_remove_listener(c->reg, ej__coord_on_state, c);
        c->listener_added = false;
    }
    if (c->fence_added) {
        ej_registry_remove_fence_listener(c->reg, ej__coord_on_fence, c);
        c->fence_added = false;
    }
    ej__coord_call(c, leave_task, NULL);
    EJ_LOG(EJ_LOG_INFO, MOD, 0, "job %s: instance %s left", c->job, c->me);
}

void ej__coord_destroy(ej__coord *c)
{
    if (c == NULL)
        return;
    atomic_store(&c->closed, true);
    ej__coord_changed(c);
    /* Wait for listeners and tasks already inside (bounded by their own
     * bounded waits). */
    uint64_t seq = ej__coord_change_seq(c);
    while (atomic_load(&c->inflight) > 0)
        ej__coord_wait_change(c, &seq, ej__mono_ms() + 1000);
    if (c->listener_added) {
        ej_registry_remove_listener(c->reg, ej__coord_on_state, c);
        c->listener_added = false;
    }
    if (c->fence_added) {
        ej_registry_remove_fence_listener(c->reg, ej__coord_on_fence, c);
        c->fence_added = false;
    }
    /* After these return, no listener of ours runs again. */
    ej_tree_cache_destroy(c->c_config);
    ej_tree_cache_destroy(c->c_servers);
    ej_tree_cache_destroy(c->c_instances);
    ej_tree_cache_destroy(c->c_leader);
    c->c_config = c->c_servers = c->c_instances = c->c_leader = NULL;
    ej__view_destroy(c->view);
    c->view = NULL;
    /* Tasks still queued find the coordinator closed and only let go of
     * it; this returns once they have. */
    ej__sched_job_destroy(c->serial);
    c->serial = NULL;
    /* Nothing reaches them now: the listeners, the view and the queue are
     * gone, and what still holds a reference (a latch's wait, a delayed
     * task) finds the coordinator closed. */
    ej__failover_state_free(c->fo);
    ej__running_state_free(c->ex);
    c->fo = NULL;
    c->ex = NULL;
    ej__coord_unref(c);
}
