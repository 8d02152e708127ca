/*
 * The per-job coordinator's core: its state's accessors and its serial
 * queue (posting, calling, copied events, delayed tasks, the change
 * counter waiters sleep on). The queue owns the state (coord_impl.h).
 *
 * State comes from four tree caches (config, servers, instances, leader:
 * subtrees that change only on membership, leadership or operator action)
 * and from the sharding view (view.c). Listeners run on the registry's
 * dispatch thread and post their events to the job's serial queue in the
 * scheduler, so one job's tasks run one at a time, in order. Its life
 * (create, start, leave, destroy) is lifecycle.c.
 */
#include <inttypes.h>
#include <pthread.h>
#include <stdarg.h>
#include <stdatomic.h>
#include <stdint.h>
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
    else if (ej__coord_post_owned(c, set_error_task, m, free) != 0)
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

/* The servers cache holds this instance's own servers/{ip} only: every
 * instance watching every server's node would cost each arrival a read by
 * every member of the job (docs/coordination.md, "What each instance
 * watches"). */
static bool own_server_disabled(ej__coord *c)
{
    char *data = NULL;
    bool dis = false;
    if (c->c_servers && ej_tree_cache_get(c->c_servers, c->p_my_server, &data, NULL, NULL) == 0)
        dis = strcmp(data, EJ_LAYOUT_SERVER_DISABLED) == 0;
    free(data);
    return dis;
}

bool ej__coord_server_disabled(ej__coord *c)
{
    return own_server_disabled(c);
}

void ej__coord_notify_failover_taken(ej__coord *c)
{
    if (c->hooks.on_failover_taken && !ej__coord_stopped(c))
        c->hooks.on_failover_taken(c->hooks.user);
}

void ej__coord_tell_failover_lost(ej__coord *c, const int *items, size_t n, int64_t gone_ms)
{
    if (c->hooks.on_failover_lost)
        c->hooks.on_failover_lost(c->hooks.user, items, n, gone_ms);
}

void ej__coord_note_busy(ej__coord *c, bool busy)
{
    atomic_store(&c->busy, busy);
    ej__coord_changed(c);
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
    bool own_off = own_server_disabled(c);
    size_t j = 0;
    for (size_t i = 0; i < k; i++) {
        char ip[EJ__IP_MAX];
        if (ej_layout_instance_ip(names[i], ip, sizeof ip) != 0 ||
            (own_off && strcmp(ip, c->ip) == 0)) {
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

int ej__coord_shard_instances(ej__coord *c, char ***ids, size_t *n)
{
    int rc = ej__coord_available_instances(c, ids, n);
    if (rc == 0)
        rc = ej__servers_drop_disabled(c->reg, c->job, *ids, n, NULL, 0);
    if (rc != 0) {
        ej_registry_free_names(*ids);
        *ids = NULL;
        *n = 0;
    }
    return rc;
}

/* The servers/{ip} node of each distinct IP of ids (first[i]: the index of
 * the first id on the same IP), read together: one round trip however
 * many servers, where one read after the other made a leader's sharding
 * in a 30-daemon fleet 25 round trips. */
static int read_servers(ej_registry *reg, const char *job, char **ids, size_t k, size_t *first,
                        struct ej_reg_read *reads, size_t *nreads)
{
    char(*ips)[EJ__IP_MAX] = calloc(k, sizeof *ips);
    if (ips == NULL)
        return EJ_ENOMEM;
    int rc = 0;
    *nreads = 0;
    for (size_t i = 0; rc == 0 && i < k; i++) {
        first[i] = SIZE_MAX; /* an id without an IP: dropped */
        if (ej_layout_instance_ip(ids[i], ips[i], sizeof ips[i]) != 0)
            continue;
        size_t s = 0;
        while (s < i && strcmp(ips[s], ips[i]) != 0)
            s++;
        if (s < i) {
            first[i] = first[s];
            continue;
        }
        first[i] = *nreads;
        reads[*nreads].path = ej_layout_path_dup(job, EJ_LAYOUT_NODE_SERVER, 0, ips[i]);
        rc = reads[(*nreads)++].path ? 0 : EJ_ENOMEM;
    }
    free(ips);
    if (rc == 0)
        rc = ej_registry_read_many(reg, reads, *nreads, true);
    return rc;
}

int ej__servers_drop_disabled(ej_registry *reg, const char *job, char **ids, size_t *n, char *why,
                              size_t whylen)
{
    size_t k = *n;
    if (k == 0)
        return 0;
    size_t *first = calloc(k, sizeof *first);
    struct ej_reg_read *reads = calloc(k, sizeof *reads);
    size_t nreads = 0;
    int rc = first && reads ? read_servers(reg, job, ids, k, first, reads, &nreads) : EJ_ENOMEM;
    if (rc != 0 && why != NULL)
        snprintf(why, whylen, "reading servers/{ip}: %s", ej_strerror(rc));
    /* A missing servers/{ip} counts as enabled, as in Java. On a failed
     * read nothing is dropped. */
    for (size_t r = 0; rc == 0 && r < nreads; r++) {
        if (reads[r].result != 0 && reads[r].result != EJ_ENONODE) {
            rc = reads[r].result;
            if (why != NULL)
                snprintf(why, whylen, "reading %s: %s", reads[r].path, ej_strerror(rc));
        }
    }
    if (rc == 0) {
        size_t j = 0;
        for (size_t i = 0; i < k; i++) {
            const struct ej_reg_read *r = first[i] == SIZE_MAX ? NULL : &reads[first[i]];
            if (r != NULL &&
                (r->result == EJ_ENONODE || strcmp(r->data, EJ_LAYOUT_SERVER_DISABLED) != 0))
                ids[j++] = ids[i];
            else
                free(ids[i]);
        }
        ids[j] = NULL;
        *n = j;
    }
    for (size_t r = 0; reads != NULL && r < nreads; r++)
        free((char *)reads[r].path);
    ej_registry_reads_fini(reads, nreads);
    free(reads);
    free(first);
    return rc;
}

bool ej__coord_instance_listed(ej__coord *c, const char *id)
{
    char *p = ej_layout_path_dup(c->job, EJ_LAYOUT_NODE_INSTANCE, 0, id);
    bool listed = p && ej_tree_cache_exists(c->c_instances, p, NULL);
    free(p);
    return listed;
}

/* ------------------------------------------------------------------------ */
/* Control tasks                                                             */

struct ctask {
    ej__coord *c;
    void (*fn)(ej__coord *c, void *arg);
    void *arg;
    void (*step)(void *task); /* a latch's continuation: runs even when closed */
    void (*drop)(void *arg);  /* frees arg when fn does not run (closed) */
};

static void ctask_run(void *p)
{
    struct ctask *t = p;
    if (t->step != NULL) {
        t->step(t->arg);
        ej__coord_publish(t->c);
    } else if (!ej__coord_enter(t->c)) {
        if (t->drop != NULL)
            t->drop(t->arg);
    } else {
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
                   void *arg, void (*drop)(void *arg))
{
    struct ctask *t = malloc(sizeof *t);
    if (t == NULL)
        return EJ_ENOMEM;
    t->c = c;
    t->fn = fn;
    t->arg = arg;
    t->step = NULL;
    t->drop = drop;
    atomic_fetch_add(&c->refs, 1);
    int rc = ej__sched_post(c->sched, queue, ctask_run, t);
    if (rc != 0) {
        ej__coord_unref(c);
        free(t);
        EJ_LOG(EJ_LOG_ERROR, MOD, rc, "job %s: cannot queue a coordination task", c->job);
    }
    return rc;
}

ej__coord *ej__coord_hold(ej__coord *c)
{
    atomic_fetch_add(&c->refs, 1);
    return c;
}

void ej__coord_release(ej__coord *c)
{
    ej__coord_unref(c);
}

struct delayed {
    ej__coord *c;
    void (*fn)(ej__coord *c, void *arg);
    void *arg;
};

/* The delay runs on the dispatch thread; the task on the serial queue. */
static void delayed_fire(ej_registry *reg, void *user)
{
    (void)reg;
    struct delayed *d = user;
    if (ej__coord_enter(d->c)) {
        ej__coord_post(d->c, d->fn, d->arg);
        ej__coord_done(d->c);
    }
    ej__coord_unref(d->c);
    free(d);
}

int ej__coord_post_after(ej__coord *c, int delay_ms, void (*fn)(ej__coord *c, void *arg), void *arg)
{
    struct delayed *d = malloc(sizeof *d);
    if (d == NULL)
        return EJ_ENOMEM;
    *d = (struct delayed){ej__coord_hold(c), fn, arg};
    int rc = ej_registry_post_after(c->reg, delay_ms, delayed_fire, d);
    if (rc != 0) {
        ej__coord_unref(c);
        free(d);
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
    return post_to(c, c->serial, fn, arg, NULL);
}

int ej__coord_post_owned(ej__coord *c, void (*fn)(ej__coord *c, void *arg), void *arg,
                         void (*drop)(void *arg))
{
    return post_to(c, c->serial, fn, arg, drop);
}

int ej__coord_post_pool(ej__coord *c, void (*fn)(ej__coord *c, void *arg), void *arg)
{
    return post_to(c, NULL, fn, arg, NULL);
}

/* The latch's continuations (ej__latch_acquire_async) run on the serial
 * queue, before the tasks queued there: a latch held or queued for is
 * waited for by other members, and its step (the record of a crash, the
 * take of its item, an election's leader node) waited seconds behind a
 * burst of events in a loaded fleet. Once accepted they run even if the
 * coordinator closes meanwhile (the latch must end: release its node, call
 * its done). Refused once closed: the latch then deletes its node itself. */
int ej__coord_latch_post(void *post_arg, void (*fn)(void *task), void *task)
{
    ej__coord *c = post_arg;
    if (!ej__coord_enter(c))
        return EJ_ECLOSED;
    struct ctask *t = malloc(sizeof *t);
    int rc = EJ_ENOMEM;
    if (t != NULL) {
        *t = (struct ctask){.c = c, .arg = task, .step = fn, .drop = NULL};
        atomic_fetch_add(&c->refs, 1);
        rc = ej__sched_post_first(c->serial, ctask_run, t);
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

static void event_free(void *arg)
{
    struct event_copy *e = arg;
    free((char *)e->ev.path);
    free((char *)e->ev.data);
    free(e);
}

static void event_task(ej__coord *c, void *arg)
{
    EJ_ASSERT_SERIAL(c);
    struct event_copy *e = arg;
    e->fn(c, &e->ev);
    event_free(e);
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
    e->ev.noticed_mono_ms = ev->noticed_mono_ms;
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
    int rc = e->ev.path && data ? ej__coord_post_owned(c, event_task, e, event_free) : EJ_ENOMEM;
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

void ej__coord_unref(ej__coord *c)
{
    if (atomic_fetch_sub(&c->refs, 1) != 1)
        return;
    if (c->have_cfg)
        ej_job_config_fini(&c->cfg);
    /* An election's wait whose end the dispatch thread saw (closed). */
    ej__latch_wait_put(c->elect_wait);
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
