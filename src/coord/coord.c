/*
 * The per-job coordinator: registration, leader election, console
 * operations, configuration changes, connection states and reconcile.
 *
 * State comes from four tree caches (config, servers, instances, leader:
 * subtrees that change only on membership, leadership or operator action)
 * and from the sharding view (view.c). Listeners run on the registry's
 * dispatch thread; anything that waits for ZooKeeper events (an election
 * waits for its latch predecessor's watch, delivered on that same thread)
 * or writes to ZooKeeper is handed to a control task: the job's serial
 * queue in the scheduler, so one job's tasks run one at a time, in order.
 */
#include <inttypes.h>
#include <pthread.h>
#include <stdarg.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "common/util.h"
#include "coord/coord_impl.h"
#include "ejob/config.h"
#include "ejob/cron.h"
#include "ejob/error.h"
#include "ejob/log.h"
#include "ejob/sharding.h"
#include "reg/internal.h"
#include "schedule/internal.h"

#define MOD "coord"

/* Listeners and tasks run between ej__coord_enter() and ej__coord_done();
 * destroy waits until none is running, and none starts once the coordinator
 * is closed. The count goes up before closed is read, and destroy sets
 * closed before it reads the count (both sequentially consistent): either
 * the listener sees closed, or destroy sees it inside. */
bool ej__coord_enter(ej__coord *c)
{
    atomic_fetch_add(&c->inflight, 1);
    if (!atomic_load(&c->closed))
        return true;
    ej__coord_done(c);
    return false;
}

void ej__coord_done(ej__coord *c)
{
    if (atomic_fetch_sub(&c->inflight, 1) == 1 && atomic_load(&c->closed))
        ej__coord_changed(c);
}

/* ------------------------------------------------------------------------ */
/* Small helpers                                                             */

uint64_t ej__coord_change_seq(ej__coord *c)
{
    pthread_mutex_lock(&c->change_mu);
    uint64_t n = c->changes;
    pthread_mutex_unlock(&c->change_mu);
    return n;
}

void ej__coord_changed(ej__coord *c)
{
    pthread_mutex_lock(&c->change_mu);
    c->changes++;
    pthread_cond_broadcast(&c->change_cv);
    pthread_mutex_unlock(&c->change_mu);
}

bool ej__coord_wait_change(ej__coord *c, uint64_t *seq, int64_t deadline_ms)
{
    int64_t left = deadline_ms - ej__mono_ms();
    if (left <= 0)
        return false;
    if (left > 200)
        left = 200; /* re-check periodically: some conditions have no event */
    struct timespec ts = ej__mono_timespec_in(left);
    pthread_mutex_lock(&c->change_mu);
    while (c->changes == *seq) {
        if (pthread_cond_timedwait(&c->change_cv, &c->change_mu, &ts) != 0)
            break;
    }
    *seq = c->changes;
    pthread_mutex_unlock(&c->change_mu);
    return ej__mono_ms() < deadline_ms;
}

struct error_msg {
    char text[1024];
    bool is_config;
};

static void set_error_task(ej__coord *c, void *arg)
{
    EJ_ASSERT_SERIAL(c);
    struct error_msg *m = arg;
    snprintf(c->err, sizeof c->err, "%s", m->text);
    c->err_is_config = m->is_config;
    free(m);
}

/* The last error is the serial queue's: another thread's is posted to it. */
void ej__coord_set_error(ej__coord *c, const char *fmt, ...)
{
    struct error_msg *m = malloc(sizeof *m);
    if (m == NULL)
        return;
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(m->text, sizeof m->text, fmt, ap);
    va_end(ap);
    m->is_config = false;
    if (ej__coord_on_serial(c))
        set_error_task(c, m);
    else if (ej__coord_post(c, set_error_task, m) != 0)
        free(m);
}

const char *ej__coord_instance_id(const ej__coord *c)
{
    return c->me;
}

const char *ej__coord_job_name(const ej__coord *c)
{
    return c->job;
}

const char *ej__coord_ip(const ej__coord *c)
{
    return c->ip;
}

ej_registry *ej__coord_registry(const ej__coord *c)
{
    return c->reg;
}

ej__view *ej__coord_view(const ej__coord *c)
{
    return c->view;
}

ej_tree_cache *ej__coord_cache(const ej__coord *c, const char *which)
{
    if (strcmp(which, "config") == 0)
        return c->c_config;
    if (strcmp(which, "servers") == 0)
        return c->c_servers;
    if (strcmp(which, "instances") == 0)
        return c->c_instances;
    if (strcmp(which, "leader") == 0)
        return c->c_leader;
    return NULL;
}

int ej__coord_wait_bound(const ej__coord *c)
{
    return c->bound_ms;
}

struct ej__failover_state *ej__coord_failover_state(ej__coord *c)
{
    return c->fo;
}

struct ej__running_state *ej__coord_exec_state(ej__coord *c)
{
    return c->ex;
}

bool ej__coord_necessary(ej__coord *c)
{
    return ej_tree_cache_exists(c->c_leader, c->p_necessary, NULL);
}

bool ej__coord_shard_flag_new(ej__coord *c, int64_t *czxid)
{
    EJ_ASSERT_HELD(&c->shard_mu);
    struct ej_node_stat st;
    bool there = ej_tree_cache_exists(c->c_leader, c->p_necessary, &st);
    *czxid = there ? st.czxid : 0;
    return there && st.czxid != c->shard_consumed_czxid;
}

void ej__coord_shard_flag_consumed(ej__coord *c, int64_t czxid)
{
    EJ_ASSERT_HELD(&c->shard_mu);
    c->shard_consumed_czxid = czxid;
}

bool ej__coord_processing(ej__coord *c)
{
    return ej_tree_cache_exists(c->c_leader, c->p_processing, NULL);
}

/* The leader's id from the cache, or NULL. Caller frees. */
char *ej__coord_leader_id(ej__coord *c, int64_t *owner)
{
    char *data = NULL;
    struct ej_node_stat st;
    if (c->c_leader == NULL ||
        ej_tree_cache_get(c->c_leader, c->p_leader_inst, &data, NULL, &st) != 0)
        return NULL;
    if (owner)
        *owner = st.ephemeral_owner;
    return data;
}

char *ej__coord_leader(ej__coord *c)
{
    return ej__coord_leader_id(c, NULL);
}

bool ej__coord_leader_known(ej__coord *c)
{
    char *id = ej__coord_leader_id(c, NULL);
    bool known = id != NULL;
    free(id);
    return known;
}

bool ej__coord_is_leader(ej__coord *c)
{
    int64_t owner = 0;
    char *id = ej__coord_leader_id(c, &owner);
    bool me = id != NULL && strcmp(id, c->me) == 0 && owner == ej_registry_session_id(c->reg) &&
              owner != 0;
    free(id);
    return me;
}

static bool server_disabled_ip(ej__coord *c, const char *ip)
{
    char *p = ej_layout_path_dup(c->job, EJ_LAYOUT_NODE_SERVER, 0, ip);
    char *data = NULL;
    bool dis = false;
    if (p && c->c_servers && ej_tree_cache_get(c->c_servers, p, &data, NULL, NULL) == 0)
        dis = strcmp(data, EJ_LAYOUT_SERVER_DISABLED) == 0;
    free(data);
    free(p);
    return dis;
}

bool ej__coord_server_disabled(ej__coord *c)
{
    return server_disabled_ip(c, c->ip);
}

void ej__coord_notify_failover_taken(ej__coord *c)
{
    if (c->hooks.on_failover_taken && !ej__coord_stopped(c))
        c->hooks.on_failover_taken(c->hooks.user);
}

void ej__coord_set_busy(ej__coord *c, bool busy)
{
    atomic_store(&c->busy, busy);
    ej__coord_changed(c);
    /* A fire that runs no resharding (a failover run) must not keep one
     * waiting for its end. */
    if (busy)
        ej__shard_when_busy(c);
}

void ej__coord_shard_lock(ej__coord *c)
{
    ej__mutex_lock(&c->shard_mu);
}

void ej__coord_shard_unlock(ej__coord *c)
{
    ej__mutex_unlock(&c->shard_mu);
}

bool ej__coord_shard_claim(ej__coord *c)
{
    return !atomic_exchange(&c->shard_posted, true);
}

void ej__coord_shard_unclaim(ej__coord *c)
{
    atomic_store(&c->shard_posted, false);
}

void ej__coord_count_reshard(ej__coord *c)
{
    atomic_fetch_add(&c->reshards, 1);
}

int ej__coord_available_instances(ej__coord *c, char ***ids, size_t *n)
{
    *ids = NULL;
    *n = 0;
    char **names = NULL;
    size_t k = 0;
    int rc = ej_tree_cache_children(c->c_instances, c->p_instances, EJ_REG_UNSORTED, &names, &k);
    if (rc == EJ_ENONODE)
        return 0;
    if (rc != 0)
        return rc;
    size_t j = 0;
    for (size_t i = 0; i < k; i++) {
        char ip[EJ__IP_MAX];
        if (ej_layout_instance_ip(names[i], ip, sizeof ip) != 0 || server_disabled_ip(c, ip)) {
            free(names[i]);
            continue;
        }
        names[j++] = names[i];
    }
    names[j] = NULL;
    ej_sharding_instances_order(names, j);
    *ids = names;
    *n = j;
    return 0;
}

int64_t ej__coord_instance_session(ej__coord *c, const char *id)
{
    char *p = ej_layout_path_dup(c->job, EJ_LAYOUT_NODE_INSTANCE, 0, id);
    struct ej_node_stat st;
    int64_t s = 0;
    if (p && ej_tree_cache_exists(c->c_instances, p, &st))
        s = st.ephemeral_owner;
    free(p);
    return s;
}

/* ------------------------------------------------------------------------ */
/* Control tasks                                                             */

struct ctask {
    ej__coord *c;
    void (*fn)(ej__coord *c, void *arg);
    void *arg;
    void (*step)(void *task); /* a latch's continuation: runs even when closed */
};

static void ctask_run(void *p)
{
    struct ctask *t = p;
    if (t->step != NULL) {
        t->step(t->arg);
        ej__coord_publish(t->c);
    } else if (ej__coord_enter(t->c)) {
        t->fn(t->c, t->arg);
        /* A serial task may have changed the state; a pool task
         * (ej__coord_post_pool) writes none of it. */
        if (ej__coord_on_serial(t->c))
            ej__coord_publish(t->c);
        ej__coord_done(t->c);
    }
    ej__coord_unref(t->c);
    free(t);
}

static int post_to(ej__coord *c, ej__sched_job *queue, void (*fn)(ej__coord *c, void *arg),
                   void *arg)
{
    struct ctask *t = malloc(sizeof *t);
    if (t == NULL)
        return EJ_ENOMEM;
    t->c = c;
    t->fn = fn;
    t->arg = arg;
    t->step = NULL;
    atomic_fetch_add(&c->refs, 1);
    int rc = ej__sched_post(c->sched, queue, ctask_run, t);
    if (rc != 0) {
        ej__coord_unref(c);
        free(t);
        EJ_LOG(EJ_LOG_ERROR, MOD, rc, "job %s: cannot queue a coordination task", c->job);
    }
    return rc;
}

bool ej__coord_on_serial(ej__coord *c)
{
    return ej__sched_job_is_current(c->serial);
}

bool ej__coord_on_dispatch(ej__coord *c)
{
    return ej_registry_on_dispatch_thread(c->reg);
}

int ej__coord_post(ej__coord *c, void (*fn)(ej__coord *c, void *arg), void *arg)
{
    return post_to(c, c->serial, fn, arg);
}

int ej__coord_post_pool(ej__coord *c, void (*fn)(ej__coord *c, void *arg), void *arg)
{
    return post_to(c, NULL, fn, arg);
}

/* The latch's continuations (ej__latch_acquire_async) run on the serial
 * queue; once accepted they run even if the coordinator closes meanwhile
 * (the latch must end: release its node, call its done). Refused once
 * closed: the latch then deletes its node itself. */
int ej__coord_latch_post(void *post_arg, void (*fn)(void *task), void *task)
{
    ej__coord *c = post_arg;
    if (!ej__coord_enter(c))
        return EJ_ECLOSED;
    struct ctask *t = malloc(sizeof *t);
    int rc = EJ_ENOMEM;
    if (t != NULL) {
        *t = (struct ctask){.c = c, .arg = task, .step = fn};
        atomic_fetch_add(&c->refs, 1);
        rc = ej__sched_post(c->sched, c->serial, ctask_run, t);
        if (rc != 0) {
            ej__coord_unref(c);
            free(t);
        }
    }
    ej__coord_done(c);
    return rc;
}

struct event_copy {
    struct ej_tree_event ev;
    struct ej_node_stat stat;
    void (*fn)(ej__coord *c, const struct ej_tree_event *ev);
};

static void event_task(ej__coord *c, void *arg)
{
    EJ_ASSERT_SERIAL(c);
    struct event_copy *e = arg;
    e->fn(c, &e->ev);
    free((char *)e->ev.path);
    free((char *)e->ev.data);
    free(e);
}

int ej__coord_post_event(ej__coord *c, const struct ej_tree_event *ev,
                         void (*fn)(ej__coord *c, const struct ej_tree_event *ev))
{
    struct event_copy *e = calloc(1, sizeof *e);
    if (e == NULL)
        return EJ_ENOMEM;
    e->fn = fn;
    e->ev.type = ev->type;
    e->ev.len = ev->len;
    e->ev.path = strdup(ev->path ? ev->path : "");
    char *data = malloc(ev->len + 1);
    if (data != NULL) {
        if (ev->len > 0)
            memcpy(data, ev->data, ev->len);
        data[ev->len] = '\0';
    }
    e->ev.data = data;
    if (ev->stat != NULL) {
        e->stat = *ev->stat;
        e->ev.stat = &e->stat;
    }
    int rc = e->ev.path && data ? ej__coord_post(c, event_task, e) : EJ_ENOMEM;
    if (rc != 0) {
        EJ_LOG(EJ_LOG_ERROR, MOD, rc, "job %s: cannot queue the event of %s", c->job,
               ev->path ? ev->path : "?");
        free((char *)e->ev.path);
        free(data);
        free(e);
    }
    return rc;
}

bool ej__coord_listening(ej__coord *c)
{
    struct ej__coord_snap *s = ej__coord_snap_get(c);
    bool on = s->started && !s->stopped;
    ej__coord_snap_unref(s);
    return on && !atomic_load(&c->closed);
}

struct call {
    ej__coord *c;
    void (*fn)(ej__coord *c, void *arg);
    void *arg;
};

static void call_run(void *p)
{
    struct call *k = p;
    EJ_ASSERT_SERIAL(k->c);
    k->fn(k->c, k->arg);
    ej__coord_publish(k->c);
}

void ej__coord_call(ej__coord *c, void (*fn)(ej__coord *c, void *arg), void *arg)
{
    if (ej__coord_on_serial(c)) {
        fn(c, arg);
        return;
    }
    struct call k = {c, fn, arg};
    void *args[1] = {&k};
    ej__sched_run_all(c->serial, call_run, args, 1);
}

void ej__coord_on_view_change(void *user, int item, int kind)
{
    (void)item;
    (void)kind;
    /* The view stops calling this before ej__view_destroy returns. */
    ej__coord_changed((ej__coord *)user);
}

/* ------------------------------------------------------------------------ */
/* Lifecycle                                                                  */

/* What the caches read (reg/internal.h, EJ__TREE_*). The coordinator
 * looks at the data of config, servers/{ip}, instances/{id} and the leader
 * node and flags, and at the children of servers/, instances/ and the
 * failover items; nothing else. Every watch more costs every instance a
 * read at each change: the latches' contenders come and go at every
 * election, and their nodes are read by the latch itself when it needs
 * them. */
static int config_shape(const char *path, size_t depth, void *user)
{
    (void)path;
    (void)depth;
    (void)user;
    return EJ__TREE_DATA;
}

static int members_shape(const char *path, size_t depth, void *user)
{
    (void)path;
    (void)user;
    return depth == 0 ? EJ__TREE_CHILDREN : EJ__TREE_DATA;
}

static int leader_shape(const char *path, size_t depth, void *user)
{
    const ej__coord *c = user;
    if (strcmp(path, c->p_el_latch) == 0 || strcmp(path, c->p_fo_latch) == 0)
        return EJ__TREE_SKIP;
    if (depth >= 3 || strcmp(path, c->p_leader_inst) == 0 || strcmp(path, c->p_necessary) == 0 ||
        strcmp(path, c->p_processing) == 0)
        return EJ__TREE_DATA;
    if (depth <= 1 || strcmp(path, c->p_fo_items) == 0)
        return EJ__TREE_CHILDREN;
    return EJ__TREE_ALL;
}

static int set_cache_shapes(ej__coord *c)
{
    int rc = ej__tree_cache_set_shape(c->c_config, config_shape, c);
    if (rc == 0)
        rc = ej__tree_cache_set_shape(c->c_servers, members_shape, c);
    if (rc == 0)
        rc = ej__tree_cache_set_shape(c->c_instances, members_shape, c);
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
        rc = ej_tree_cache_create(c->reg, c->p_servers, ej__coord_on_servers_event, c,
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
    for (size_t i = 0; i < 4; i++) {
        rc = ej_tree_cache_wait_initialized(caches[i], c->bound_ms);
        if (rc != 0) {
            snprintf(err, errlen, "job %s: the cache of %s did not load in %d ms", c->job,
                     ej_tree_cache_root(caches[i]), c->bound_ms);
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
     * session (a second create would only fail on the server). */
    bool flagged = c->necessary_session != 0 && c->necessary_session == c->reg_session;
    rc = flagged ? 0 : ej__coord_set_necessary(c);
    if (rc != 0)
        goto reg_error;
    ej__coord_post_reconcile(c);
    EJ_LOG(EJ_LOG_INFO, MOD, 0, "job %s: instance %s registered (%s)", c->job, c->me,
           ej__coord_is_leader(c) ? "leader" : "follower");
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

void ej__coord_unref(ej__coord *c)
{
    if (atomic_fetch_sub(&c->refs, 1) != 1)
        return;
    if (c->have_cfg)
        ej_job_config_fini(&c->cfg);
    ej__failover_state_free(c->fo);
    ej__running_state_free(c->ex);
    char *paths[] = {
        c->p_root,        c->p_config,      c->p_servers,   c->p_instances,  c->p_leader,
        c->p_leader_inst, c->p_el_latch,    c->p_necessary, c->p_processing, c->p_fo_items,
        c->p_my_server,   c->p_my_instance, c->job,         c->me,           c->ip,
        c->p_fo_latch};
    for (size_t i = 0; i < sizeof paths / sizeof paths[0]; i++)
        free(paths[i]);
    if (c->snap != NULL)
        ej__coord_snap_fini(c);
    ej__mutex_destroy(&c->shard_mu);
    pthread_mutex_destroy(&c->change_mu);
    pthread_cond_destroy(&c->change_cv);
    free(c);
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
    ej__coord_unref(c);
}
