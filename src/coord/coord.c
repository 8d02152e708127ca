/*
 * The per-job coordinator: registration, leader election, console
 * operations, configuration changes, connection states and reconcile.
 *
 * State comes from four tree caches (config, servers, instances, leader:
 * subtrees that change only on membership, leadership or operator action)
 * and from the sharding view (view.c). Listeners run on the registry's
 * dispatch thread; anything that waits for ZooKeeper events (an election
 * waits for its latch predecessor's watch, delivered on that same thread)
 * is handed to a control task of the scheduler.
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
#include "coord/internal.h"
#include "ejob/config.h"
#include "ejob/cron.h"
#include "ejob/error.h"
#include "ejob/log.h"
#include "ejob/sharding.h"
#include "schedule/internal.h"

#define MOD "coord"

struct ej__coord {
    ej_registry *reg;
    char *job, *me, *ip;
    ej__sched *sched;
    int bound_ms;
    int64_t reconcile_override_ms;
    struct ej__coord_hooks hooks;

    /* Paths (namespace-relative). */
    char *p_root, *p_config, *p_servers, *p_instances, *p_leader, *p_leader_inst, *p_el_latch,
        *p_necessary, *p_processing, *p_fo_items, *p_my_server, *p_my_instance;

    pthread_mutex_t mu;
    pthread_cond_t cv;
    atomic_int refs;
    int inflight; /* listeners and tasks working on the coordinator now */
    bool closed;  /* leave/destroy began: no more reactions */
    bool started; /* start-up finished */
    bool stopped; /* operator shutdown or job removed */
    bool connected;
    bool electing;
    bool busy;
    bool reconcile_posted;
    int64_t reg_session; /* session that created our instance node; 0 none */
    int64_t last_reconcile_ms;
    char err[1024];
    bool err_is_config;
    struct ej_job_config cfg;
    bool have_cfg;
    bool init_servers, init_instances, init_leader, init_config;

    ej_tree_cache *c_config, *c_servers, *c_instances, *c_leader;
    ej__view *view;
    bool listener_added;
    struct ej__failover_state *fo;
    struct ej__exec_state *ex;
};

static void coord_unref(ej__coord *c);

/* Listeners and tasks run between enter() and done(); destroy waits until
 * none is running, and none starts once the coordinator is closed. */
static bool enter(ej__coord *c)
{
    pthread_mutex_lock(&c->mu);
    bool ok = !c->closed;
    if (ok)
        c->inflight++;
    pthread_mutex_unlock(&c->mu);
    return ok;
}

static void done(ej__coord *c)
{
    pthread_mutex_lock(&c->mu);
    c->inflight--;
    pthread_cond_broadcast(&c->cv);
    pthread_mutex_unlock(&c->mu);
}

/* ------------------------------------------------------------------------ */
/* Small helpers                                                             */

void ej__coord_lock(ej__coord *c)
{
    pthread_mutex_lock(&c->mu);
}

void ej__coord_unlock(ej__coord *c)
{
    pthread_mutex_unlock(&c->mu);
}

void ej__coord_broadcast(ej__coord *c)
{
    pthread_mutex_lock(&c->mu);
    pthread_cond_broadcast(&c->cv);
    pthread_mutex_unlock(&c->mu);
}

bool ej__coord_wait_locked(ej__coord *c, int64_t deadline_ms)
{
    int64_t left = deadline_ms - ej__mono_ms();
    if (left <= 0)
        return false;
    if (left > 200)
        left = 200; /* re-check periodically: some conditions have no event */
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    ts.tv_sec += left / 1000;
    ts.tv_nsec += (left % 1000) * 1000000L;
    if (ts.tv_nsec >= 1000000000L) {
        ts.tv_sec++;
        ts.tv_nsec -= 1000000000L;
    }
    pthread_cond_timedwait(&c->cv, &c->mu, &ts);
    return ej__mono_ms() < deadline_ms;
}

void ej__coord_set_error(ej__coord *c, const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    pthread_mutex_lock(&c->mu);
    vsnprintf(c->err, sizeof c->err, fmt, ap);
    c->err_is_config = false;
    pthread_mutex_unlock(&c->mu);
    va_end(ap);
}

void ej__coord_last_error(ej__coord *c, char *buf, size_t len)
{
    if (len == 0)
        return;
    pthread_mutex_lock(&c->mu);
    snprintf(buf, len, "%s", c->err);
    pthread_mutex_unlock(&c->mu);
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

struct ej__exec_state *ej__coord_exec_state(ej__coord *c)
{
    return c->ex;
}

int ej__coord_config(ej__coord *c, struct ej_job_config *out)
{
    pthread_mutex_lock(&c->mu);
    int rc = c->have_cfg ? ej_job_config_copy(out, &c->cfg) : EJ_ENOTFOUND;
    pthread_mutex_unlock(&c->mu);
    return rc;
}

bool ej__coord_failover_on(ej__coord *c)
{
    pthread_mutex_lock(&c->mu);
    bool on = c->have_cfg && c->cfg.failover;
    pthread_mutex_unlock(&c->mu);
    return on;
}

int ej__coord_total_count(ej__coord *c)
{
    pthread_mutex_lock(&c->mu);
    int n = c->have_cfg ? c->cfg.sharding_total_count : 0;
    pthread_mutex_unlock(&c->mu);
    return n;
}

char *ej__coord_strategy_name(ej__coord *c)
{
    pthread_mutex_lock(&c->mu);
    char *s = strdup(c->have_cfg && c->cfg.job_sharding_strategy_class
                         ? c->cfg.job_sharding_strategy_class
                         : "");
    pthread_mutex_unlock(&c->mu);
    return s;
}

bool ej__coord_necessary_locked(ej__coord *c)
{
    return ej_tree_cache_exists(c->c_leader, c->p_necessary, NULL);
}

bool ej__coord_processing_locked(ej__coord *c)
{
    return ej_tree_cache_exists(c->c_leader, c->p_processing, NULL);
}

/* The leader's id from the cache, or NULL. Caller frees. */
static char *leader_id(ej__coord *c, int64_t *owner)
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
    return leader_id(c, NULL);
}

bool ej__coord_leader_known(ej__coord *c)
{
    char *id = leader_id(c, NULL);
    bool known = id != NULL;
    free(id);
    return known;
}

bool ej__coord_is_leader(ej__coord *c)
{
    int64_t owner = 0;
    char *id = leader_id(c, &owner);
    bool me = id != NULL && strcmp(id, c->me) == 0 && owner == ej_registry_session_id(c->reg) &&
              owner != 0;
    free(id);
    return me;
}

static bool server_disabled_ip(ej__coord *c, const char *ip)
{
    char *p = ej__asprintf("%s/%s", c->p_servers, ip);
    char *data = NULL;
    bool dis = false;
    if (p && c->c_servers && ej_tree_cache_get(c->c_servers, p, &data, NULL, NULL) == 0)
        dis = strcmp(data, EJ__DISABLED) == 0;
    free(data);
    free(p);
    return dis;
}

bool ej__coord_server_disabled(ej__coord *c)
{
    return server_disabled_ip(c, c->ip);
}

bool ej__coord_registered(ej__coord *c)
{
    pthread_mutex_lock(&c->mu);
    bool r = c->reg_session != 0 && c->reg_session == ej_registry_session_id(c->reg) && !c->stopped;
    pthread_mutex_unlock(&c->mu);
    return r;
}

bool ej__coord_connected(ej__coord *c)
{
    pthread_mutex_lock(&c->mu);
    bool r = c->connected;
    pthread_mutex_unlock(&c->mu);
    return r;
}

bool ej__coord_stopped(ej__coord *c)
{
    pthread_mutex_lock(&c->mu);
    bool r = c->stopped || c->closed;
    pthread_mutex_unlock(&c->mu);
    return r;
}

void ej__coord_notify_failover_taken(ej__coord *c)
{
    if (c->hooks.on_failover_taken && !ej__coord_stopped(c))
        c->hooks.on_failover_taken(c->hooks.user);
}

void ej__coord_set_busy(ej__coord *c, bool busy)
{
    pthread_mutex_lock(&c->mu);
    c->busy = busy;
    pthread_cond_broadcast(&c->cv);
    pthread_mutex_unlock(&c->mu);
}

bool ej__coord_busy(ej__coord *c)
{
    pthread_mutex_lock(&c->mu);
    bool b = c->busy;
    pthread_mutex_unlock(&c->mu);
    return b;
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
        if (ej__coord_instance_ip(names[i], ip, sizeof ip) != 0 || server_disabled_ip(c, ip)) {
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
    char *p = ej__asprintf("%s/%s", c->p_instances, id);
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
};

static void ctask_run(void *p)
{
    struct ctask *t = p;
    if (enter(t->c)) {
        t->fn(t->c, t->arg);
        done(t->c);
    }
    coord_unref(t->c);
    free(t);
}

int ej__coord_post(ej__coord *c, void (*fn)(ej__coord *c, void *arg), void *arg)
{
    struct ctask *t = malloc(sizeof *t);
    if (t == NULL)
        return EJ_ENOMEM;
    t->c = c;
    t->fn = fn;
    t->arg = arg;
    atomic_fetch_add(&c->refs, 1);
    int rc = ej__sched_post(c->sched, NULL, ctask_run, t);
    if (rc != 0) {
        coord_unref(c);
        free(t);
        EJ_LOG(EJ_LOG_ERROR, MOD, rc, "job %s: cannot queue a coordination task", c->job);
    }
    return rc;
}

/* ------------------------------------------------------------------------ */
/* Leadership                                                                */

int ej__coord_set_necessary(ej__coord *c)
{
    int rc = ej_registry_create_node(c->reg, c->p_necessary, NULL, 0, EJ_REG_PERSISTENT,
                                     EJ_REG_CREATE_PARENTS, NULL);
    if (rc == EJ_ENODEEXISTS)
        rc = 0;
    if (rc != 0)
        EJ_LOG(EJ_LOG_WARN, MOD, rc, "job %s: cannot set the resharding flag: %s", c->job,
               ej_registry_errmsg(c->reg));
    return rc;
}

/* Set necessary when this instance leads (3.x: only the leader sets it). */
static void leader_set_necessary(ej__coord *c)
{
    /* Not skipped when the cache shows the flag: the leader may be about to
     * delete it at the end of a sharding that did not see this change (the
     * leader also compares its instances after sharding, see shard.c). */
    if (ej__coord_is_leader(c))
        ej__coord_set_necessary(c);
}

/* Can this instance take part in an election? (locked) */
static bool eligible_locked(ej__coord *c)
{
    return c->started && !c->closed && !c->stopped && c->connected && c->reg_session != 0 &&
           c->reg_session == ej_registry_session_id(c->reg);
}

int ej__coord_elect(ej__coord *c)
{
    pthread_mutex_lock(&c->mu);
    if (c->closed || c->stopped || c->electing) {
        pthread_mutex_unlock(&c->mu);
        return 0;
    }
    c->electing = true;
    pthread_mutex_unlock(&c->mu);

    bool won = false;
    int rc = 0;
    if (ej__coord_server_disabled(c)) {
        rc = EJ_EBUSY;
        goto out;
    }
    ej__latch *latch = NULL;
    rc = ej__latch_acquire(c->reg, c->p_el_latch, c->bound_ms, &latch);
    if (rc != 0) {
        EJ_LOG(EJ_LOG_WARN, MOD, rc, "job %s: election latch %s not acquired", c->job,
               c->p_el_latch);
        goto out;
    }
    /* The latch holder creates the leader node if absent (read directly:
     * the cache may lag behind a leader that just left). */
    bool exists = false;
    rc = ej_registry_exists(c->reg, c->p_leader_inst, &exists, NULL);
    if (rc == 0 && !exists) {
        rc = ej_registry_create_node(c->reg, c->p_leader_inst, c->me, strlen(c->me),
                                     EJ_REG_EPHEMERAL, EJ_REG_CREATE_PARENTS, NULL);
        if (rc == 0)
            won = true;
        else if (rc == EJ_ENODEEXISTS)
            rc = 0;
    }
    ej__latch_release(latch);
out:
    pthread_mutex_lock(&c->mu);
    c->electing = false;
    pthread_cond_broadcast(&c->cv);
    pthread_mutex_unlock(&c->mu);
    if (won) {
        EJ_LOG(EJ_LOG_INFO, MOD, 0, "job %s: %s is the leader", c->job, c->me);
        /* A new leader reshards at the next fire and handles the crashes
         * its predecessor could not. */
        ej__coord_set_necessary(c);
        ej__failover_process_pending(c);
    }
    return rc;
}

static void elect_task(ej__coord *c, void *arg)
{
    (void)arg;
    pthread_mutex_lock(&c->mu);
    bool go = eligible_locked(c);
    pthread_mutex_unlock(&c->mu);
    /* A job being removed (its config or our instance node already gone)
     * must not have its nodes created again by an election. */
    if (go && (!ej_tree_cache_exists(c->c_config, c->p_config, NULL) ||
               !ej_tree_cache_exists(c->c_instances, c->p_my_instance, NULL)))
        go = false;
    if (go && !ej__coord_leader_known(c))
        ej__coord_elect(c);
}

static void post_election(ej__coord *c)
{
    ej__coord_post(c, elect_task, NULL);
}

bool ej__coord_is_leader_until_block(ej__coord *c, int timeout_ms)
{
    int64_t start = ej__mono_ms();
    int64_t deadline = start + timeout_ms;
    bool logged = false;
    for (;;) {
        char *id = leader_id(c, NULL);
        if (id != NULL) {
            free(id);
            return ej__coord_is_leader(c);
        }
        char **ids = NULL;
        size_t n = 0;
        ej__coord_available_instances(c, &ids, &n);
        ej_registry_free_names(ids);
        if (n == 0)
            return false;
        pthread_mutex_lock(&c->mu);
        if (c->closed || c->stopped) {
            pthread_mutex_unlock(&c->mu);
            return false;
        }
        bool run = eligible_locked(c) && !c->electing;
        pthread_mutex_unlock(&c->mu);
        if (run && !ej__coord_server_disabled(c)) {
            ej__coord_elect(c);
            /* The cache shows the result a moment later. */
        }
        if (!logged && ej__mono_ms() - start > 1000) {
            logged = true;
            EJ_LOG(EJ_LOG_INFO, MOD, 0, "job %s: waiting for a leader (%s)", c->job,
                   c->p_leader_inst);
        }
        pthread_mutex_lock(&c->mu);
        bool more = ej__coord_wait_locked(c, deadline);
        pthread_mutex_unlock(&c->mu);
        if (!more) {
            id = leader_id(c, NULL);
            if (id != NULL) {
                free(id);
                return ej__coord_is_leader(c);
            }
            EJ_LOG(EJ_LOG_WARN, MOD, EJ_ETIMEDOUT, "job %s: no leader after %d ms (waiting for %s)",
                   c->job, timeout_ms, c->p_leader_inst);
            return false;
        }
    }
}

/* Give up leadership (own server disabled, shutdown). */
static void abdicate(ej__coord *c)
{
    if (!ej__coord_is_leader(c))
        return;
    int rc = ej_registry_delete(c->reg, c->p_leader_inst, -1);
    if (rc != 0 && rc != EJ_ENONODE)
        EJ_LOG(EJ_LOG_WARN, MOD, rc, "job %s: cannot give up leadership: %s", c->job,
               ej_registry_errmsg(c->reg));
    else
        EJ_LOG(EJ_LOG_INFO, MOD, 0, "job %s: %s gave up leadership", c->job, c->me);
}

/* ------------------------------------------------------------------------ */
/* Configuration                                                             */

static int check_cron(const struct ej_job_config *cfg, char *err, size_t errlen)
{
    ej_tz *tz = NULL;
    if (ej_tz_load(cfg->time_zone && cfg->time_zone[0] ? cfg->time_zone : NULL, &tz) != 0) {
        snprintf(err, errlen, "timeZone: unknown time zone \"%s\"", cfg->time_zone);
        return EJ_ECONFIG;
    }
    char why[256] = "";
    if (ej_cron_parse(cfg->cron, NULL, why, sizeof why) != 0) {
        snprintf(err, errlen, "cron: %s", why);
        return EJ_ECONFIG;
    }
    return 0;
}

/* Parse, validate and check a config node's bytes. */
static int parse_config(const char *data, size_t len, struct ej_job_config *out, char *err,
                        size_t errlen)
{
    int rc = ej_job_config_init(out);
    if (rc != 0)
        return rc;
    rc = ej_job_config_from_json(data, len, out, err, errlen);
    if (rc == 0)
        rc = ej_job_config_validate(out, err, errlen);
    if (rc == 0)
        rc = check_cron(out, err, errlen);
    if (rc != 0) {
        ej_job_config_fini(out);
        return rc == EJ_ENOMEM ? rc : EJ_ECONFIG;
    }
    return 0;
}

static void clear_failover_task(ej__coord *c, void *arg)
{
    (void)arg;
    ej__failover_clear_all(c);
}

static void apply_config(ej__coord *c, const char *data, size_t len)
{
    struct ej_job_config n;
    char err[512] = "";
    int rc = parse_config(data, len, &n, err, sizeof err);
    if (rc != 0) {
        EJ_LOG(EJ_LOG_ERROR, MOD, rc,
               "job %s: the config in ZooKeeper is invalid and is not applied (keeping the last "
               "good one): %s",
               c->job, err);
        pthread_mutex_lock(&c->mu);
        snprintf(c->err, sizeof c->err, "invalid config in ZooKeeper, not applied: %s", err);
        c->err_is_config = true;
        pthread_mutex_unlock(&c->mu);
        return;
    }
    unsigned changed = 0;
    pthread_mutex_lock(&c->mu);
    if (c->err_is_config) {
        c->err[0] = '\0';
        c->err_is_config = false;
    }
    if (c->have_cfg) {
        if (n.job_name && c->cfg.job_name && strcmp(n.job_name, c->cfg.job_name) != 0) {
            pthread_mutex_unlock(&c->mu);
            EJ_LOG(EJ_LOG_ERROR, MOD, EJ_ECONFIG, "job %s: config names job \"%s\"; not applied",
                   c->job, n.job_name);
            ej_job_config_fini(&n);
            return;
        }
        if (strcmp(n.cron, c->cfg.cron) != 0 ||
            strcmp(n.time_zone ? n.time_zone : "", c->cfg.time_zone ? c->cfg.time_zone : "") != 0)
            changed |= EJ__CFG_CRON;
        if (n.sharding_total_count != c->cfg.sharding_total_count)
            changed |= EJ__CFG_COUNT;
        if (n.failover != c->cfg.failover)
            changed |= EJ__CFG_FAILOVER;
        if (!ej_job_config_equal(&n, &c->cfg))
            changed |= EJ__CFG_OTHER;
        if (n.job_type != c->cfg.job_type) {
            EJ_LOG(EJ_LOG_WARN, MOD, 0,
                   "job %s: jobType changed to %s in ZooKeeper; this instance keeps %s", c->job,
                   ej_job_type_name(n.job_type), ej_job_type_name(c->cfg.job_type));
            n.job_type = c->cfg.job_type;
        }
        ej_job_config_fini(&c->cfg);
    } else {
        changed = EJ__CFG_CRON | EJ__CFG_COUNT | EJ__CFG_FAILOVER | EJ__CFG_OTHER;
    }
    c->cfg = n;
    c->have_cfg = true;
    bool started = c->started && !c->closed && !c->stopped;
    bool failover = n.failover;
    pthread_cond_broadcast(&c->cv);
    pthread_mutex_unlock(&c->mu);
    if (!started || changed == 0)
        return;
    EJ_LOG(EJ_LOG_INFO, MOD, 0, "job %s: new config applied (cron \"%s\", %d items%s)", c->job,
           n.cron, n.sharding_total_count, failover ? ", failover" : "");
    ej__view_set_failover(c->view, failover);
    if (changed & EJ__CFG_COUNT)
        leader_set_necessary(c);
    if ((changed & EJ__CFG_FAILOVER) && !failover)
        ej__coord_post(c, clear_failover_task, NULL);
    if (c->hooks.on_config) {
        struct ej_job_config copy;
        if (ej__coord_config(c, &copy) == 0) {
            c->hooks.on_config(c->hooks.user, &copy, changed);
            ej_job_config_fini(&copy);
        }
    }
}

static void stop_job(ej__coord *c, int why)
{
    pthread_mutex_lock(&c->mu);
    bool first = !c->stopped && !c->closed;
    c->stopped = true;
    pthread_cond_broadcast(&c->cv);
    pthread_mutex_unlock(&c->mu);
    if (!first)
        return;
    if (why == EJ__STOP_OPERATOR)
        EJ_LOG(EJ_LOG_WARN, MOD, 0,
               "job %s: instance node %s deleted by an operator: this instance stops the job",
               c->job, c->p_my_instance);
    else
        EJ_LOG(EJ_LOG_WARN, MOD, 0, "job %s: job removed from ZooKeeper: stopping", c->job);
    abdicate(c);
    if (c->hooks.on_stop)
        c->hooks.on_stop(c->hooks.user, why);
}

/* Our instance node was deleted while our session seemed alive: if the
 * session still answers (the same one), an operator deleted it; if not, it
 * went with the session, and the reconnection registers again. */
static void operator_check_task(ej__coord *c, void *arg)
{
    int64_t sess = *(int64_t *)arg;
    free(arg);
    bool ex = false;
    int rc = ej_registry_exists(c->reg, c->p_my_instance, &ex, NULL);
    pthread_mutex_lock(&c->mu);
    bool same = c->reg_session == sess;
    pthread_mutex_unlock(&c->mu);
    if (rc == 0 && !ex && same && ej_registry_session_id(c->reg) == sess)
        stop_job(c, EJ__STOP_OPERATOR);
    else
        EJ_LOG(EJ_LOG_INFO, MOD, 0,
               "job %s: instance node %s went with the ZooKeeper session; registering again "
               "after the reconnection",
               c->job, c->p_my_instance);
}

static void root_check_task(ej_registry *reg, void *user)
{
    (void)reg;
    ej__coord *c = user;
    if (enter(c)) {
        bool root = true, cfg = true;
        if (ej_registry_exists(c->reg, c->p_root, &root, NULL) == 0 && !root) {
            stop_job(c, EJ__STOP_REMOVED);
        } else if (ej_registry_exists(c->reg, c->p_config, &cfg, NULL) == 0 && !cfg) {
            ej__coord_set_error(c, "config node %s is missing; running with the last good one",
                                c->p_config);
            EJ_LOG(EJ_LOG_ERROR, MOD, EJ_ENONODE, "job %s: config node %s is missing", c->job,
                   c->p_config);
        }
        done(c);
    }
    coord_unref(c);
}

/* ------------------------------------------------------------------------ */
/* Cache listeners (dispatch thread)                                          */

static void on_config_event_body(ej_tree_cache *cache, const struct ej_tree_event *ev, void *user)
{
    (void)cache;
    ej__coord *c = user;
    if (ev->type == EJ_TREE_INITIALIZED) {
        c->init_config = true;
        return;
    }
    if (strcmp(ev->path, c->p_config) != 0)
        return;
    if (ev->type == EJ_TREE_NODE_REMOVED) {
        atomic_fetch_add(&c->refs, 1);
        if (ej_registry_post_after(c->reg, 300, root_check_task, c) != 0)
            coord_unref(c);
        return;
    }
    pthread_mutex_lock(&c->mu);
    bool go = c->started && !c->closed;
    pthread_mutex_unlock(&c->mu);
    if (go)
        apply_config(c, ev->data, ev->len);
}

static void on_config_event(ej_tree_cache *cache, const struct ej_tree_event *ev, void *user)
{
    ej__coord *c = user;
    if (!enter(c))
        return;
    on_config_event_body(cache, ev, user);
    done(c);
}

static void on_servers_event_body(ej_tree_cache *cache, const struct ej_tree_event *ev, void *user)
{
    (void)cache;
    ej__coord *c = user;
    if (ev->type == EJ_TREE_INITIALIZED) {
        c->init_servers = true;
        ej__coord_broadcast(c);
        return;
    }
    ej__coord_broadcast(c);
    pthread_mutex_lock(&c->mu);
    bool go = c->started && !c->closed && !c->stopped && c->init_servers;
    pthread_mutex_unlock(&c->mu);
    if (!go || strncmp(ev->path, c->p_servers, strlen(c->p_servers)) != 0 ||
        ev->path[strlen(c->p_servers)] != '/')
        return;
    /* Any server change reshards (ElasticJob: all servers events). */
    leader_set_necessary(c);
    if (strcmp(ev->path, c->p_my_server) != 0)
        return;
    bool disabled = ev->type != EJ_TREE_NODE_REMOVED && strcmp(ev->data, EJ__DISABLED) == 0;
    if (disabled) {
        EJ_LOG(EJ_LOG_INFO, MOD, 0, "job %s: server %s disabled", c->job, c->ip);
        abdicate(c);
    } else {
        if (ev->type == EJ_TREE_NODE_UPDATED)
            EJ_LOG(EJ_LOG_INFO, MOD, 0, "job %s: server %s enabled", c->job, c->ip);
        if (!ej__coord_leader_known(c))
            post_election(c);
    }
}

static void on_servers_event(ej_tree_cache *cache, const struct ej_tree_event *ev, void *user)
{
    ej__coord *c = user;
    if (!enter(c))
        return;
    on_servers_event_body(cache, ev, user);
    done(c);
}

static void on_instances_event_body(ej_tree_cache *cache, const struct ej_tree_event *ev,
                                    void *user)
{
    (void)cache;
    ej__coord *c = user;
    if (ev->type == EJ_TREE_INITIALIZED) {
        c->init_instances = true;
        ej__coord_broadcast(c);
        return;
    }
    ej__coord_broadcast(c);
    size_t plen = strlen(c->p_instances);
    if (strncmp(ev->path, c->p_instances, plen) != 0 || ev->path[plen] != '/')
        return;
    const char *id = ev->path + plen + 1;
    if (strchr(id, '/') != NULL)
        return;
    pthread_mutex_lock(&c->mu);
    bool go = c->started && !c->closed && !c->stopped;
    bool init = c->init_instances;
    bool connected = c->connected;
    int64_t my_sess = c->reg_session;
    pthread_mutex_unlock(&c->mu);
    if (!go)
        return;
    bool mine = strcmp(id, c->me) == 0;
    if (ev->type == EJ_TREE_NODE_REMOVED) {
        if (mine) {
            /* Session expiry is not an operator's shutdown (EJ#1857,
             * EJ#2383): only a delete of the node of our live session is.
             * The client may learn of its expiry after the node's removal,
             * so the session is proved alive first (off this thread). */
            int64_t cur = ej_registry_session_id(c->reg);
            if (ev->stat && ev->stat->ephemeral_owner == cur && cur != 0 && connected &&
                my_sess == cur) {
                int64_t *arg = malloc(sizeof *arg);
                if (arg) {
                    *arg = cur;
                    if (ej__coord_post(c, operator_check_task, arg) != 0)
                        free(arg);
                }
            }
            return;
        }
        if (init)
            leader_set_necessary(c);
        if (ev->stat && ev->stat->ephemeral_owner != 0)
            ej__failover_on_instance_removed(c, id, ev->stat->ephemeral_owner);
        return;
    }
    if (ev->type == EJ_TREE_NODE_ADDED && !mine && init)
        leader_set_necessary(c);
    if (mine && ev->len == strlen(EJ__TRIGGER) && strcmp(ev->data, EJ__TRIGGER) == 0) {
        /* The console's trigger: reset the node, run once now. */
        ej_registry_set(c->reg, c->p_my_instance, "", 0, -1, NULL);
        EJ_LOG(EJ_LOG_INFO, MOD, 0, "job %s: triggered by the console", c->job);
        if (c->hooks.on_trigger)
            c->hooks.on_trigger(c->hooks.user);
    }
}

static void on_instances_event(ej_tree_cache *cache, const struct ej_tree_event *ev, void *user)
{
    ej__coord *c = user;
    if (!enter(c))
        return;
    on_instances_event_body(cache, ev, user);
    done(c);
}

static void on_leader_event_body(ej_tree_cache *cache, const struct ej_tree_event *ev, void *user)
{
    (void)cache;
    ej__coord *c = user;
    if (ev->type == EJ_TREE_INITIALIZED) {
        c->init_leader = true;
        ej__coord_broadcast(c);
        return;
    }
    ej__coord_broadcast(c);
    pthread_mutex_lock(&c->mu);
    bool go = c->started && !c->closed && !c->stopped && c->init_leader;
    pthread_mutex_unlock(&c->mu);
    if (!go)
        return;
    if (strcmp(ev->path, c->p_leader_inst) == 0 && ev->type != EJ_TREE_NODE_REMOVED) {
        ej__failover_leader_seen(c, ev->data);
        return;
    }
    if (strcmp(ev->path, c->p_leader_inst) == 0 && ev->type == EJ_TREE_NODE_REMOVED) {
        EJ_LOG(EJ_LOG_INFO, MOD, 0, "job %s: leader %s left; electing", c->job, ev->data);
        if (!ej__coord_server_disabled(c))
            post_election(c);
        return;
    }
    size_t flen = strlen(c->p_fo_items);
    if (ev->type == EJ_TREE_NODE_ADDED && strncmp(ev->path, c->p_fo_items, flen) == 0 &&
        ev->path[flen] == '/' && c->hooks.on_failover_pending && ej__coord_failover_on(c))
        c->hooks.on_failover_pending(c->hooks.user);
}

static void on_leader_event(ej_tree_cache *cache, const struct ej_tree_event *ev, void *user)
{
    ej__coord *c = user;
    if (!enter(c))
        return;
    on_leader_event_body(cache, ev, user);
    done(c);
}

static void on_view_change(void *user, int item, int kind)
{
    (void)item;
    (void)kind;
    /* The view stops calling this before ej__view_destroy returns. */
    ej__coord_broadcast((ej__coord *)user);
}

/* ------------------------------------------------------------------------ */
/* Registration                                                              */

/* servers/{ip}: DISABLED when the config says so; an operator's DISABLED
 * survives a restart unless the config overwrites (ElasticJob rewrites "" on
 * every start). */
static int persist_server(ej__coord *c, bool cfg_disabled, bool overwrite)
{
    const char *val = "";
    if (cfg_disabled) {
        val = EJ__DISABLED;
    } else {
        char *cur = NULL;
        if (ej_registry_get(c->reg, c->p_my_server, &cur, NULL, NULL) == 0 &&
            strcmp(cur, EJ__DISABLED) == 0 && !overwrite) {
            EJ_LOG(EJ_LOG_INFO, MOD, 0, "job %s: server %s stays DISABLED (set by an operator)",
                   c->job, c->ip);
            val = EJ__DISABLED;
        }
        free(cur);
    }
    int rc = ej_registry_persist(c->reg, c->p_my_server, val, strlen(val));
    if (rc != 0)
        ej__coord_set_error(c, "cannot write %s: %s", c->p_my_server, ej_registry_errmsg(c->reg));
    return rc;
}

/* Create our ephemeral instance node (same id after a new session). */
static int register_instance(ej__coord *c)
{
    int64_t sess = ej_registry_session_id(c->reg);
    int rc = ej_registry_create_node(c->reg, c->p_my_instance, NULL, 0, EJ_REG_EPHEMERAL,
                                     EJ_REG_CREATE_PARENTS, NULL);
    if (rc == EJ_ENODEEXISTS) {
        struct ej_node_stat st;
        bool exists = false;
        rc = ej_registry_exists(c->reg, c->p_my_instance, &exists, &st);
        if (rc == 0 && exists && st.ephemeral_owner == sess) {
            rc = 0;
        } else if (rc == 0) {
            /* A node of a previous session of ours (or of a process that
             * had our id): replace it, as ElasticJob's persistEphemeral. */
            ej_registry_delete(c->reg, c->p_my_instance, -1);
            rc = ej_registry_create_node(c->reg, c->p_my_instance, NULL, 0, EJ_REG_EPHEMERAL,
                                         EJ_REG_CREATE_PARENTS, NULL);
        }
    }
    if (rc == 0) {
        pthread_mutex_lock(&c->mu);
        c->reg_session = sess;
        pthread_cond_broadcast(&c->cv);
        pthread_mutex_unlock(&c->mu);
    } else {
        ej__coord_set_error(c, "cannot create %s: %s", c->p_my_instance,
                            ej_registry_errmsg(c->reg));
    }
    return rc;
}

static void reregister_task(ej__coord *c, void *arg)
{
    (void)arg;
    pthread_mutex_lock(&c->mu);
    bool go = c->started && !c->closed && !c->stopped && c->connected;
    bool dis = c->have_cfg && c->cfg.disabled;
    pthread_mutex_unlock(&c->mu);
    if (!go)
        return;
    EJ_LOG(EJ_LOG_INFO, MOD, 0, "job %s: new ZooKeeper session: registering %s again", c->job,
           c->me);
    /* Keep the server's state (an operator's DISABLED included). */
    persist_server(c, dis, false);
    if (register_instance(c) != 0)
        return;
    /* The cache may still show a leader of the old session: the election
     * checks ZooKeeper itself under the latch. */
    if (!ej__coord_server_disabled(c))
        ej__coord_elect(c);
    leader_set_necessary(c);
    if (c->hooks.on_conn)
        c->hooks.on_conn(c->hooks.user, EJ_REG_RECONNECTED, true);
}

/* ------------------------------------------------------------------------ */
/* Connection states (dispatch thread)                                        */

static void on_state_body(ej_registry *reg, ej_reg_state st, bool new_session, void *user)
{
    (void)reg;
    ej__coord *c = user;
    pthread_mutex_lock(&c->mu);
    bool closed = c->closed;
    switch (st) {
    case EJ_REG_CONNECTED:
    case EJ_REG_RECONNECTED:
        c->connected = true;
        break;
    case EJ_REG_SUSPENDED:
    case EJ_REG_LOST:
        c->connected = false;
        break;
    }
    if (st == EJ_REG_LOST || (st == EJ_REG_RECONNECTED && new_session))
        c->reg_session = 0; /* our ephemeral nodes are gone (or will be) */
    bool started = c->started && !c->stopped;
    pthread_cond_broadcast(&c->cv);
    pthread_mutex_unlock(&c->mu);
    if (closed)
        return;
    if (st == EJ_REG_SUSPENDED)
        EJ_LOG(EJ_LOG_WARN, MOD, 0, "job %s: ZooKeeper connection suspended: not firing", c->job);
    else if (st == EJ_REG_LOST)
        EJ_LOG(EJ_LOG_WARN, MOD, 0,
               "job %s: ZooKeeper session lost: not firing, asking running items to stop", c->job);
    else if (st == EJ_REG_RECONNECTED)
        EJ_LOG(EJ_LOG_INFO, MOD, 0, "job %s: ZooKeeper reconnected (%s session)", c->job,
               new_session ? "new" : "same");
    if (st == EJ_REG_RECONNECTED && new_session)
        ej__view_on_new_session(c->view);
    else if (st == EJ_REG_RECONNECTED)
        ej__view_repair(c->view);
    if (st == EJ_REG_RECONNECTED && started) {
        pthread_mutex_lock(&c->mu);
        bool lost_registration = c->reg_session == 0;
        pthread_mutex_unlock(&c->mu);
        if (lost_registration) {
            /* New session (or one reported lost that survived): register
             * again; on_conn follows the re-registration. */
            ej__coord_post(c, reregister_task, NULL);
            return;
        }
    }
    if (c->hooks.on_conn && started)
        c->hooks.on_conn(c->hooks.user, st, new_session);
}

static void on_state(ej_registry *reg, ej_reg_state st, bool new_session, void *user)
{
    ej__coord *c = user;
    if (!enter(c))
        return;
    on_state_body(reg, st, new_session, user);
    done(c);
}

/* ------------------------------------------------------------------------ */
/* Reconcile (ElasticJob's ReconcileService)                                  */

static void reconcile_task(ej_registry *reg, void *user);

static int64_t reconcile_interval(ej__coord *c)
{
    if (c->reconcile_override_ms > 0)
        return c->reconcile_override_ms;
    pthread_mutex_lock(&c->mu);
    int m = c->have_cfg ? c->cfg.reconcile_interval_minutes : 0;
    pthread_mutex_unlock(&c->mu);
    return m >= 1 ? (int64_t)m * 60000 : 0;
}

static void post_reconcile(ej__coord *c)
{
    int64_t iv = reconcile_interval(c);
    /* Checked at least every minute, as ElasticJob does, so an interval
     * turned on by a config change takes effect. */
    int64_t delay = iv > 0 && iv < 60000 ? iv : 60000;
    atomic_fetch_add(&c->refs, 1);
    if (ej_registry_post_after(c->reg, (int)delay, reconcile_task, c) != 0)
        coord_unref(c);
}

static void reconcile_task(ej_registry *reg, void *user)
{
    (void)reg;
    ej__coord *c = user;
    if (!enter(c)) {
        coord_unref(c);
        return;
    }
    pthread_mutex_lock(&c->mu);
    bool go = c->started && !c->closed && !c->stopped && c->connected;
    bool alive = !c->closed;
    pthread_mutex_unlock(&c->mu);
    int64_t iv = reconcile_interval(c);
    int64_t now = ej__mono_ms();
    if (go && iv > 0 && now - c->last_reconcile_ms >= iv - 50) {
        c->last_reconcile_ms = now;
        if (ej__coord_is_leader(c) && !ej_tree_cache_exists(c->c_leader, c->p_necessary, NULL)) {
            int *items = NULL;
            size_t n = 0;
            bool stale = false;
            ej__view_items(c->view, &items, &n);
            for (size_t i = 0; i < n && !stale; i++) {
                struct ej__view_item it;
                if (ej__view_get(c->view, items[i], &it) != 0)
                    continue;
                if (it.owner == NULL || ej__coord_instance_session(c, it.owner) == 0)
                    stale = true;
                ej__view_item_fini(&it);
            }
            free(items);
            if (stale) {
                EJ_LOG(EJ_LOG_INFO, MOD, 0,
                       "job %s: sharding names instances that are gone: start reconciling", c->job);
                ej__coord_set_necessary(c);
            }
        }
    }
    if (alive)
        post_reconcile(c);
    done(c);
    coord_unref(c);
}

/* ------------------------------------------------------------------------ */
/* Lifecycle                                                                  */

int ej__coord_create(const struct ej__coord_opts *o, ej__coord **out)
{
    if (o == NULL || out == NULL || o->reg == NULL || o->job_name == NULL ||
        o->instance_id == NULL || o->ip == NULL)
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
    pthread_mutex_init(&c->mu, NULL);
    pthread_condattr_t ca;
    pthread_condattr_init(&ca);
    pthread_condattr_setclock(&ca, CLOCK_MONOTONIC);
    pthread_cond_init(&c->cv, &ca);
    pthread_condattr_destroy(&ca);
    atomic_init(&c->refs, 1);
    c->connected = ej_registry_is_connected(o->reg);
    const char *j = o->job_name;
    c->p_root = ej__coord_path(j, "%s", "");
    c->p_config = ej__coord_path(j, "config");
    c->p_servers = ej__coord_path(j, "servers");
    c->p_instances = ej__coord_path(j, "instances");
    c->p_leader = ej__coord_path(j, "leader");
    c->p_leader_inst = ej__coord_path(j, "leader/election/instance");
    c->p_el_latch = ej__coord_path(j, "leader/election/latch");
    c->p_necessary = ej__coord_path(j, "leader/sharding/necessary");
    c->p_processing = ej__coord_path(j, "leader/sharding/processing");
    c->p_fo_items = ej__coord_path(j, "leader/failover/items");
    c->p_my_server = ej__coord_path(j, "servers/%s", o->ip);
    c->p_my_instance = ej__coord_path(j, "instances/%s", o->instance_id);
    if (!c->job || !c->me || !c->ip || !c->p_root || !c->p_config || !c->p_servers ||
        !c->p_instances || !c->p_leader || !c->p_leader_inst || !c->p_el_latch || !c->p_necessary ||
        !c->p_processing || !c->p_fo_items || !c->p_my_server || !c->p_my_instance) {
        coord_unref(c);
        return EJ_ENOMEM;
    }
    int rc = ej_tree_cache_create(c->reg, c->p_config, on_config_event, c, &c->c_config);
    if (rc == 0)
        rc = ej_tree_cache_create(c->reg, c->p_servers, on_servers_event, c, &c->c_servers);
    if (rc == 0)
        rc = ej_tree_cache_create(c->reg, c->p_instances, on_instances_event, c, &c->c_instances);
    if (rc == 0)
        rc = ej_tree_cache_create(c->reg, c->p_leader, on_leader_event, c, &c->c_leader);
    if (rc == 0)
        rc = ej__view_create(c->reg, j, c->me, on_view_change, c, &c->view);
    if (rc == 0) {
        c->fo = ej__failover_state_new();
        c->ex = ej__exec_state_new();
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

int ej__coord_start(ej__coord *c, const struct ej_job_config *local,
                    struct ej_job_config *effective, char *err, size_t errlen)
{
    if (c == NULL || local == NULL || effective == NULL)
        return EJ_EINVAL;
    if (err && errlen)
        err[0] = '\0';
    ej_registry *reg = c->reg;
    int rc;
    /* 1. The config: persist when absent or overwrite, then always run
     * with what ZooKeeper holds. */
    bool exists = false;
    rc = ej_registry_exists(reg, c->p_config, &exists, NULL);
    if (rc != 0)
        goto reg_error;
    if (!exists || local->overwrite) {
        char *json = ej_job_config_to_json(local);
        if (json == NULL)
            return EJ_ENOMEM;
        rc = ej_registry_persist(reg, c->p_config, json, strlen(json));
        free(json);
        if (rc != 0)
            goto reg_error;
    }
    char *data = NULL;
    size_t len = 0;
    rc = ej_registry_get(reg, c->p_config, &data, &len, NULL);
    if (rc != 0)
        goto reg_error;
    struct ej_job_config zk;
    char why[512] = "";
    rc = parse_config(data, len, &zk, why, sizeof why);
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
    pthread_mutex_lock(&c->mu);
    if (c->have_cfg)
        ej_job_config_fini(&c->cfg);
    c->cfg = zk;
    c->have_cfg = true;
    bool failover = zk.failover, disabled = zk.disabled, overwrite = local->overwrite;
    pthread_mutex_unlock(&c->mu);

    /* 2. Caches, view and listeners. */
    rc = ej_registry_add_listener(reg, on_state, c);
    if (rc != 0)
        goto reg_error;
    c->listener_added = true;
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
    rc = ej__view_start(c->view);
    if (rc != 0)
        goto reg_error;

    /* 3. Server, instance, election, resharding flag. The server and
     * instance nodes come first so this instance counts as available when
     * the election below looks for candidates. */
    rc = persist_server(c, disabled, overwrite);
    if (rc != 0)
        goto reg_error;
    rc = register_instance(c);
    if (rc != 0)
        goto reg_error;
    pthread_mutex_lock(&c->mu);
    c->started = true;
    c->last_reconcile_ms = ej__mono_ms();
    pthread_mutex_unlock(&c->mu);
    if (!ej__coord_server_disabled(c) && !ej__coord_leader_known(c))
        ej__coord_elect(c);
    rc = ej__coord_set_necessary(c);
    if (rc != 0)
        goto reg_error;
    post_reconcile(c);
    EJ_LOG(EJ_LOG_INFO, MOD, 0, "job %s: instance %s registered (%s)", c->job, c->me,
           ej__coord_is_leader(c) ? "leader" : "follower");
    return 0;

reg_error:
    snprintf(err, errlen, "job %s: %s", c->job, ej_registry_errmsg(reg));
    ej__coord_set_error(c, "%s", err);
    return rc;
}

void ej__coord_leave(ej__coord *c)
{
    if (c == NULL)
        return;
    pthread_mutex_lock(&c->mu);
    bool was = c->closed;
    c->closed = true;
    int64_t sess = c->reg_session;
    pthread_cond_broadcast(&c->cv);
    pthread_mutex_unlock(&c->mu);
    if (was)
        return;
    if (c->listener_added) {
        ej_registry_remove_listener(c->reg, on_state, c);
        c->listener_added = false;
    }
    if (!ej_registry_is_connected(c->reg))
        return;
    abdicate(c);
    if (sess != 0 && sess == ej_registry_session_id(c->reg)) {
        int rc = ej_registry_delete(c->reg, c->p_my_instance, -1);
        if (rc != 0 && rc != EJ_ENONODE)
            EJ_LOG(EJ_LOG_WARN, MOD, rc, "job %s: cannot delete %s: %s", c->job, c->p_my_instance,
                   ej_registry_errmsg(c->reg));
    }
    EJ_LOG(EJ_LOG_INFO, MOD, 0, "job %s: instance %s left", c->job, c->me);
}

static void coord_unref(ej__coord *c)
{
    if (atomic_fetch_sub(&c->refs, 1) != 1)
        return;
    if (c->have_cfg)
        ej_job_config_fini(&c->cfg);
    ej__failover_state_free(c->fo);
    ej__exec_state_free(c->ex);
    char *paths[] = {
        c->p_root,        c->p_config,      c->p_servers,   c->p_instances,  c->p_leader,
        c->p_leader_inst, c->p_el_latch,    c->p_necessary, c->p_processing, c->p_fo_items,
        c->p_my_server,   c->p_my_instance, c->job,         c->me,           c->ip};
    for (size_t i = 0; i < sizeof paths / sizeof paths[0]; i++)
        free(paths[i]);
    pthread_mutex_destroy(&c->mu);
    pthread_cond_destroy(&c->cv);
    free(c);
}

void ej__coord_destroy(ej__coord *c)
{
    if (c == NULL)
        return;
    pthread_mutex_lock(&c->mu);
    c->closed = true;
    pthread_cond_broadcast(&c->cv);
    /* Wait for listeners and tasks already inside (bounded by their own
     * bounded waits). */
    while (c->inflight > 0)
        pthread_cond_wait(&c->cv, &c->mu);
    pthread_mutex_unlock(&c->mu);
    if (c->listener_added) {
        ej_registry_remove_listener(c->reg, on_state, c);
        c->listener_added = false;
    }
    /* After these return, no listener of ours runs again. */
    ej_tree_cache_destroy(c->c_config);
    ej_tree_cache_destroy(c->c_servers);
    ej_tree_cache_destroy(c->c_instances);
    ej_tree_cache_destroy(c->c_leader);
    c->c_config = c->c_servers = c->c_instances = c->c_leader = NULL;
    ej__view_destroy(c->view);
    c->view = NULL;
    coord_unref(c);
}
