/*
 * Membership and connection state: servers/{ip} and instances/{id} (console
 * operations, crashes of others), the registration of this instance (again
 * after a new session), and what the coordinator does on connection states.
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
#include "schedule/internal.h"

#define MOD "coord"

void ej__coord_stop_job(ej__coord *c, int why)
{
    EJ_ASSERT_SERIAL(c);
    bool first = !c->stopped && !atomic_load(&c->closed);
    c->stopped = true;
    ej__coord_publish(c);
    if (!first)
        return;
    const char *ns = ej_registry_namespace(c->reg);
    if (why == EJ__STOP_OPERATOR)
        EJ_LOG(EJ_LOG_WARN, MOD, 0,
               "job %s: instance node %s%s%s deleted by an operator: this instance stops the job",
               c->job, ns[0] ? "/" : "", ns, c->p_my_instance);
    else
        EJ_LOG(EJ_LOG_WARN, MOD, 0, "job %s: job removed from ZooKeeper: stopping", c->job);
    ej__coord_abdicate(c);
    if (c->hooks.on_stop)
        c->hooks.on_stop(c->hooks.user, why);
}

/* Our instance node was deleted while our session seemed alive: if the
 * session still answers (the same one), an operator deleted it; if not, it
 * went with the session, and the reconnection registers again. */
static void operator_check(ej__coord *c, void *arg)
{
    EJ_ASSERT_SERIAL(c);
    int64_t sess = *(int64_t *)arg;
    bool ex = false;
    int rc = ej_registry_exists(c->reg, c->p_my_instance, &ex, NULL);
    bool same = c->reg_session == sess;
    if (rc == 0 && !ex && same && ej_registry_session_id(c->reg) == sess)
        ej__coord_stop_job(c, EJ__STOP_OPERATOR);
    else
        EJ_LOG(EJ_LOG_INFO, MOD, 0,
               "job %s: instance node %s went with the ZooKeeper session; registering again "
               "after the reconnection",
               c->job, c->p_my_instance);
}

void ej__coord_root_check(ej__coord *c, void *arg)
{
    EJ_ASSERT_SERIAL(c);
    (void)arg;
    bool root = true, cfg = true;
    if (ej_registry_exists(c->reg, c->p_root, &root, NULL) == 0 && !root) {
        ej__coord_stop_job(c, EJ__STOP_REMOVED);
    } else if (ej_registry_exists(c->reg, c->p_config, &cfg, NULL) == 0 && !cfg) {
        ej__coord_set_error(c, "config node %s is missing; running with the last good one",
                            c->p_config);
        EJ_LOG(EJ_LOG_ERROR, MOD, EJ_ENONODE, "job %s: config node %s is missing", c->job,
               c->p_config);
    }
}

/* On the serial queue (posted by the listener below). The servers cache
 * holds our own servers/{ip} only. */
static void on_servers_event_body(ej__coord *c, const struct ej_tree_event *ev)
{
    bool go = c->started && !atomic_load(&c->closed) && !c->stopped;
    if (!go || strcmp(ev->path, c->p_my_server) != 0)
        return;
    /* A change of our server reshards. The leader does not watch the
     * other servers' nodes, so the server's own instances set the flag,
     * leader or not (ElasticJob 2.1.5: every instance, for every server).
     * Not at the node's creation: it comes with a registration (ours, or
     * another instance's on this IP), which sets the flag itself (the
     * start's step 6, a re-registration), and the event may be handled
     * after the start, a request for nothing. */
    if (ev->type != EJ_TREE_NODE_ADDED)
        ej__coord_set_necessary(c);
    bool disabled =
        ev->type != EJ_TREE_NODE_REMOVED && strcmp(ev->data, EJ_LAYOUT_SERVER_DISABLED) == 0;
    if (disabled) {
        EJ_LOG(EJ_LOG_INFO, MOD, 0, "job %s: server %s disabled", c->job, c->ip);
        ej__coord_abdicate(c);
    } else {
        if (ev->type == EJ_TREE_NODE_UPDATED)
            EJ_LOG(EJ_LOG_INFO, MOD, 0, "job %s: server %s enabled", c->job, c->ip);
        if (!ej__coord_leader_known(c))
            ej__coord_post_election(c);
    }
}

/* The servers cache's listener (dispatch thread): wakes the waiters and
 * queues the event. */
void ej__coord_on_servers_event(ej_tree_cache *cache, const struct ej_tree_event *ev, void *user)
{
    (void)cache;
    ej__coord *c = user;
    EJ_ASSERT_DISPATCH(c);
    if (!ej__coord_enter(c))
        return;
    ej__coord_changed(c);
    if (ev->type != EJ_TREE_INITIALIZED && ej__coord_listening(c))
        ej__coord_post_event(c, ev, on_servers_event_body);
    ej__coord_done(c);
}

/* On the serial queue (posted by the listener below). */
static void on_instances_event_body(ej__coord *c, const struct ej_tree_event *ev)
{
    const char *id = ev->path + strlen(c->p_instances) + 1;
    if (!c->started || atomic_load(&c->closed) || c->stopped)
        return;
    bool mine = strcmp(id, c->me) == 0;
    if (ev->type == EJ_TREE_NODE_REMOVED) {
        if (mine) {
            /* Session expiry is not an operator's shutdown (EJ#1857,
             * EJ#2383): only a delete of the node of our live session is.
             * The client may learn of its expiry after the node's removal,
             * so the session is proved alive first. */
            int64_t cur = ej_registry_session_id(c->reg);
            if (ev->stat && ev->stat->ephemeral_owner == cur && cur != 0 &&
                atomic_load(&c->connected) && c->reg_session == cur)
                operator_check(c, &cur);
            return;
        }
        ej__coord_leader_set_necessary_soon(c);
        ej__running_note_departed(c, id);
        return;
    }
    if (ev->type == EJ_TREE_NODE_ADDED && !mine)
        ej__coord_leader_set_necessary_soon(c);
    if (mine && ev->len == strlen(EJ_LAYOUT_INSTANCE_TRIGGER) &&
        strcmp(ev->data, EJ_LAYOUT_INSTANCE_TRIGGER) == 0) {
        /* The console's trigger: reset the node, run once now. */
        ej_registry_set(c->reg, c->p_my_instance, "", 0, -1, NULL);
        EJ_LOG(EJ_LOG_INFO, MOD, 0, "job %s: triggered by the console", c->job);
        if (c->hooks.on_trigger)
            c->hooks.on_trigger(c->hooks.user);
    }
}

/* Another instance's node went: the items the view showed it may have
 * run, taken at the event (a failover node's tombstone ages). */
struct departed {
    char *id;
    int64_t at_ms;
    int *cand;
    size_t n;
};

static void departed_free(void *arg)
{
    struct departed *d = arg;
    free(d->cand);
    free(d->id);
    free(d);
}

static void departed_task(ej__coord *c, void *arg)
{
    struct departed *d = arg;
    if (c->started && !c->stopped) {
        ej__failover_on_instance_removed(c, d->id, d->at_ms, d->cand, d->n);
        d->cand = NULL; /* taken */
    }
    departed_free(d);
}

/* Queues the failover of what the departed instance ran (no candidates:
 * nothing to fail over, but the waiting records are looked at again: the
 * recorder may have changed). */
static void post_departed(ej__coord *c, const char *id, int64_t at_ms)
{
    struct departed *d = calloc(1, sizeof *d);
    if (d == NULL)
        return;
    d->id = strdup(id);
    d->at_ms = at_ms;
    if (ej__coord_failover_on(c)) {
        int64_t recent = 2 * (int64_t)ej_registry_negotiated_timeout_ms(c->reg);
        ej__view_departed_items(c->view, id, recent < 10000 ? 10000 : recent, &d->cand, &d->n);
    }
    if (d->id == NULL || ej__coord_post_owned(c, departed_task, d, departed_free) != 0)
        departed_free(d);
}

/* At the removal of another instance's node (dispatch thread): the
 * takeover hold starts now, not when the queue gets to the event, and the
 * items it may have run are read from the view before they go. The
 * instances cache knows other instances by name only (one read per
 * instance and member would make a job's start cost the square of its
 * members); the instance's own container (ejob/members/{id}) tells its
 * session's close, and the items' children zxids which of them that close
 * ended (failover.c crashed_items). */
static void on_departed(ej__coord *c, const char *id, int64_t noticed)
{
    /* The hold runs from when the removal was noticed (the watch on
     * instances/ fired: after the server closed the session), not from the
     * listing that named it, a round trip later (hundreds of ms when a
     * fleet's survivors all list at once). */
    int64_t now = ej__mono_ms();
    int64_t seen = noticed > 0 && noticed <= now ? noticed : now;
    int64_t hold = seen + ej_registry_takeover_margin_ms(c->reg);
    int64_t cur = atomic_load(&c->takeover_hold_until);
    while (hold > cur && !atomic_compare_exchange_weak(&c->takeover_hold_until, &cur, hold)) {
    }
    post_departed(c, id, ej__now_ms());
}

/* The instances cache's listener (dispatch thread). */
void ej__coord_on_instances_event(ej_tree_cache *cache, const struct ej_tree_event *ev, void *user)
{
    (void)cache;
    ej__coord *c = user;
    EJ_ASSERT_DISPATCH(c);
    if (!ej__coord_enter(c))
        return;
    ej__coord_changed(c);
    size_t plen = strlen(c->p_instances);
    bool child = ev->type != EJ_TREE_INITIALIZED && strncmp(ev->path, c->p_instances, plen) == 0 &&
                 ev->path[plen] == '/' && strchr(ev->path + plen + 1, '/') == NULL;
    if (child && ej__coord_listening(c)) {
        ej__coord_post_event(c, ev, on_instances_event_body);
        const char *id = ev->path + plen + 1;
        if (child && ev->type == EJ_TREE_NODE_REMOVED && strcmp(id, c->me) != 0)
            on_departed(c, id, ev->noticed_mono_ms);
    }
    ej__coord_done(c);
}

/* ------------------------------------------------------------------------ */
/* Registration                                                              */

/* At start-up of a job new to ZooKeeper (the caches, just loaded, show
 * neither servers/ nor instances/): servers/, servers/{ip} = val and
 * instances/ in one transaction, instead of a create that fails for want
 * of a parent, the parents one by one and the create again, for each.
 * (Only persistent nodes: a CONTAINER create inside a transaction is
 * answered with a result the C client 3.8 misreads, which can abort the
 * process in its deserialize_multi.) Returns 0 when written; anything
 * else leaves it to the general path. */
static int create_fresh(ej__coord *c, const char *val)
{
    EJ_ASSERT_SERIAL(c);
    if (c->started || ej_tree_cache_exists(c->c_servers, c->p_my_server, NULL) ||
        ej_tree_cache_exists(c->c_instances, c->p_instances, NULL) ||
        !ej_tree_cache_exists(c->c_config, c->p_config, NULL))
        return EJ_EAGAIN;
    /* With the parents of the instance's ejob marker (membership's
     * register_instance), so that it costs no request of its own. */
    char *marker = ej_layout_marker_path_dup(c->job, c->me);
    if (marker == NULL)
        return EJ_ENOMEM;
    char *markers = ej__asprintf("%.*s", (int)(strrchr(marker, '/') - marker), marker);
    char *ejob =
        markers ? ej__asprintf("%.*s", (int)(strrchr(markers, '/') - markers), markers) : NULL;
    int rc = EJ_ENOMEM;
    if (ejob != NULL) {
        struct ej_reg_op ops[5] = {
            {.type = EJ_REG_OP_CREATE, .path = c->p_servers, .mode = EJ_REG_PERSISTENT},
            {.type = EJ_REG_OP_CREATE,
             .path = c->p_my_server,
             .data = val,
             .len = strlen(val),
             .mode = EJ_REG_PERSISTENT},
            {.type = EJ_REG_OP_CREATE, .path = c->p_instances, .mode = EJ_REG_PERSISTENT},
            {.type = EJ_REG_OP_CREATE, .path = ejob, .mode = EJ_REG_PERSISTENT},
            {.type = EJ_REG_OP_CREATE, .path = markers, .mode = EJ_REG_PERSISTENT},
        };
        rc = ej_registry_multi(c->reg, ops, 5, NULL);
    }
    free(ejob);
    free(markers);
    free(marker);
    return rc;
}

/* servers/{ip}: DISABLED when the config says so; an operator's DISABLED
 * survives a restart unless the config overwrites (ElasticJob rewrites "" on
 * every start). At start-up the servers cache, loaded just before, tells
 * what the node holds; on a new session ZooKeeper is asked. */
int ej__coord_persist_server(ej__coord *c, bool cfg_disabled, bool overwrite)
{
    EJ_ASSERT_SERIAL(c);
    const char *val = EJ_LAYOUT_SERVER_ENABLED;
    bool at_start = !c->started;
    char *cur = NULL;
    int grc = at_start ? ej_tree_cache_get(c->c_servers, c->p_my_server, &cur, NULL, NULL)
                       : ej_registry_get(c->reg, c->p_my_server, &cur, NULL, NULL);
    if (cfg_disabled) {
        val = EJ_LAYOUT_SERVER_DISABLED;
    } else if (grc == 0 && strcmp(cur, EJ_LAYOUT_SERVER_DISABLED) == 0 && !overwrite) {
        EJ_LOG(EJ_LOG_INFO, MOD, 0, "job %s: server %s stays DISABLED (set by an operator)", c->job,
               c->ip);
        val = EJ_LAYOUT_SERVER_DISABLED;
    }
    bool same = grc == 0 && strcmp(cur, val) == 0;
    free(cur);
    int rc = EJ_EAGAIN;
    if (at_start && grc == 0) {
        /* Known to exist: one write, or none when it already says so (it
         * then still counts as written: ElasticJob's rewrite of the same
         * data changes nothing but the version). */
        rc = same ? 0 : ej_registry_set(c->reg, c->p_my_server, val, strlen(val), -1, NULL);
    } else if (at_start) {
        rc = create_fresh(c, val);
        if (rc == EJ_EAGAIN) /* the job is there, not yet our server: one create */
            rc = ej_registry_create_node(c->reg, c->p_my_server, val, strlen(val),
                                         EJ_REG_PERSISTENT, EJ_REG_CREATE_PARENTS, NULL);
    }
    if (rc != 0)
        rc = ej_registry_persist(c->reg, c->p_my_server, val, strlen(val));
    if (rc != 0)
        ej__coord_set_error(c, "cannot write %s: %s", c->p_my_server, ej_registry_errmsg(c->reg));
    return rc;
}

/* The marker that tells this instance apart from a Java one (console.h,
 * ej_layout_marker_path_dup): ephemeral, of this session. Best
 * effort: without it the console takes the instance for a Java one. */
static void register_marker(ej__coord *c, int64_t sess)
{
    char *p = ej_layout_marker_path_dup(c->job, c->me);
    if (p == NULL)
        return;
    int rc =
        ej_registry_create_node(c->reg, p, NULL, 0, EJ_REG_EPHEMERAL, EJ_REG_CREATE_PARENTS, NULL);
    if (rc == EJ_ENODEEXISTS) {
        struct ej_node_stat st;
        bool exists = false;
        rc = ej_registry_exists(c->reg, p, &exists, &st);
        if (rc == 0 && exists && st.ephemeral_owner != sess) {
            ej_registry_delete(c->reg, p, st.version);
            rc = ej_registry_create_node(c->reg, p, NULL, 0, EJ_REG_EPHEMERAL,
                                         EJ_REG_CREATE_PARENTS, NULL);
        }
    }
    if (rc != 0)
        EJ_LOG(EJ_LOG_DEBUG, MOD, rc, "job %s: cannot create %s: %s", c->job, p,
               ej_registry_errmsg(c->reg));
    free(p);
}

/* Create our ephemeral instance node (same id after a new session). */
int ej__coord_register_instance(ej__coord *c)
{
    EJ_ASSERT_SERIAL(c);
    int64_t sess = ej_registry_session_id(c->reg);
    /* The instance's container, then the instance node, the marker and the
     * session's live node in one request (their parents exist unless the
     * job is new to ejob); anything else goes the long way. The container
     * is created on its own: the C client cannot read the answer to a
     * transaction that creates one (it aborts). */
    char *marker = ej_layout_marker_path_dup(c->job, c->me);
    char *box = ej_layout_path_dup(c->job, EJ_LAYOUT_NODE_EJOB_MEMBER, 0, c->me);
    char *live = ej_layout_member_live_path_dup(c->job, c->me, sess);
    int rc = EJ_ENOMEM;
    bool boxed = false;
    if (marker != NULL && box != NULL && live != NULL) {
        /* There already: this instance registered before (each session
         * has a node of its own in it, which only its close deletes). */
        rc = ej_registry_create_node(c->reg, box, NULL, 0, EJ_REG_CONTAINER, EJ_REG_CREATE_PARENTS,
                                     NULL);
        boxed = rc == 0 || rc == EJ_ENODEEXISTS;
        struct ej_reg_op ops[3] = {
            {.type = EJ_REG_OP_CREATE, .path = c->p_my_instance, .mode = EJ_REG_EPHEMERAL},
            {.type = EJ_REG_OP_CREATE, .path = marker, .mode = EJ_REG_EPHEMERAL},
            {.type = EJ_REG_OP_CREATE, .path = live, .mode = EJ_REG_EPHEMERAL},
        };
        size_t failed = 0;
        rc = ej_registry_multi(c->reg, ops, boxed ? 3 : 2, &failed);
        /* This session's node is there already: the job started before in
         * this session (a restart of the job in the same process). */
        if (rc == EJ_ENODEEXISTS && boxed && failed == 2)
            rc = ej_registry_multi(c->reg, ops, 2, NULL);
    }
    free(marker);
    free(box);
    bool marked = rc == 0;
    if (rc != 0)
        rc = ej_registry_create_node(c->reg, c->p_my_instance, NULL, 0, EJ_REG_EPHEMERAL,
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
    if (rc == 0 && !marked) {
        register_marker(c, sess);
        if (boxed && live != NULL)
            ej_registry_create_node(c->reg, live, NULL, 0, EJ_REG_EPHEMERAL, 0, NULL);
    }
    free(live);
    if (rc == 0) {
        c->reg_session = sess;
        c->reg_at_ms = ej__now_ms();
        atomic_store(&c->fence_told, -1);
        ej__coord_publish(c);
    } else {
        ej__coord_set_error(c, "cannot create %s: %s", c->p_my_instance,
                            ej_registry_errmsg(c->reg));
    }
    return rc;
}

static void reregister(ej__coord *c)
{
    EJ_ASSERT_SERIAL(c);
    bool go = c->started && !atomic_load(&c->closed) && !c->stopped && atomic_load(&c->connected);
    bool dis = c->have_cfg && c->cfg.disabled;
    if (!go)
        return;
    EJ_LOG(EJ_LOG_INFO, MOD, 0, "job %s: new ZooKeeper session: registering %s again", c->job,
           c->me);
    /* Keep the server's state (an operator's DISABLED included). */
    ej__coord_persist_server(c, dis, false);
    if (ej__coord_register_instance(c) != 0)
        return;
    /* The cache may still show a leader of the old session: the election
     * checks ZooKeeper itself under the latch. */
    if (!ej__coord_server_disabled(c))
        ej__coord_elect_async(c);
    ej__coord_leader_set_necessary(c);
    /* Crashes seen while this instance had no session. */
    ej__failover_process_pending(c);
    if (c->hooks.on_conn)
        c->hooks.on_conn(c->hooks.user, EJ_REG_RECONNECTED, true);
}

/* ------------------------------------------------------------------------ */
/* Connection states (dispatch thread)                                        */

/* On the serial queue (posted by the listener below), after the
 * listener set connected. */
static void on_state_body(ej__coord *c, ej_reg_state st, bool new_session)
{
    EJ_ASSERT_SERIAL(c);
    if (st == EJ_REG_LOST || (st == EJ_REG_RECONNECTED && new_session))
        c->reg_session = 0; /* our ephemeral nodes are gone (or will be) */
    ej__coord_publish(c);
    if (atomic_load(&c->closed))
        return;
    bool started = c->started && !c->stopped;
    if (st == EJ_REG_SUSPENDED)
        EJ_LOG(EJ_LOG_WARN, MOD, 0, "job %s: ZooKeeper connection suspended: not firing", c->job);
    else if (st == EJ_REG_LOST)
        EJ_LOG(EJ_LOG_WARN, MOD, 0,
               "job %s: ZooKeeper session lost: not firing, asking running items to stop", c->job);
    else if (st == EJ_REG_RECONNECTED)
        EJ_LOG(EJ_LOG_INFO, MOD, 0, "job %s: ZooKeeper reconnected (%s session)", c->job,
               new_session ? "new" : "same");
    if (st == EJ_REG_RECONNECTED && started && c->reg_session == 0) {
        /* New session (or one reported lost that survived): register
         * again; on_conn follows the re-registration. */
        reregister(c);
        return;
    }
    if (c->hooks.on_conn && started)
        c->hooks.on_conn(c->hooks.user, st, new_session);
}

struct state_change {
    ej_reg_state st;
    bool new_session;
};

static void state_task(ej__coord *c, void *arg)
{
    struct state_change *m = arg;
    on_state_body(c, m->st, m->new_session);
    free(m);
}

/* The connection listener (dispatch thread): connected is the dispatch
 * thread's (the fire's checks read it at once); the view follows the
 * session here, as the caches do; the rest is queued. */
void ej__coord_on_state(ej_registry *reg, ej_reg_state st, bool new_session, void *user)
{
    (void)reg;
    ej__coord *c = user;
    EJ_ASSERT_DISPATCH(c);
    if (!ej__coord_enter(c))
        return;
    atomic_store(&c->connected, st == EJ_REG_CONNECTED || st == EJ_REG_RECONNECTED);
    ej__coord_changed(c);
    if (st == EJ_REG_RECONNECTED && new_session)
        ej__view_on_new_session(c->view);
    else if (st == EJ_REG_RECONNECTED)
        ej__view_repair(c->view);
    struct state_change *m = malloc(sizeof *m);
    if (m != NULL) {
        *m = (struct state_change){st, new_session};
        if (ej__coord_post_owned(c, state_task, m, free) != 0)
            free(m);
    }
    ej__coord_done(c);
}

/* ------------------------------------------------------------------------ */
/* The fence (registry watchdog thread)                                      */

/* The registry's fence changed. What counts is the fence of the session we
 * registered in: a new session is CANCEL for us until we registered in it. */
void ej__coord_on_fence(ej_registry *reg, ej_reg_fence level, int64_t session, void *user)
{
    (void)level;
    (void)session;
    ej__coord *c = user;
    /* The registry's watchdog thread, never the dispatch thread: a fence
     * must reach the runtime while the dispatch thread is stuck. */
    EJ_ASSERT(!ej__coord_on_dispatch(c));
    if (!ej__coord_enter(c))
        return;
    struct ej__coord_snap *snap = ej__coord_snap_get(c);
    int64_t mine = snap->reg_session;
    bool started = snap->started && !snap->stopped;
    ej__coord_snap_unref(snap);
    int lvl = mine ? (int)ej_registry_fence(reg, mine) : (int)EJ_REG_FENCE_CANCEL;
    /* Told once per change, whichever thread sees it first. */
    bool tell = false;
    int told = atomic_load(&c->fence_told);
    while (started && told != lvl && !tell)
        tell = atomic_compare_exchange_weak(&c->fence_told, &told, lvl);
    if (tell && lvl != EJ_REG_FENCE_OPEN) {
        int64_t sess = 0;
        int64_t last = ej_registry_last_contact_ms(reg, &sess);
        EJ_LOG(EJ_LOG_DEBUG, MOD, 0,
               "job %s: no answer from ZooKeeper for %" PRId64 " ms (session timeout %d ms): %s",
               c->job, ej__mono_ms() - last, ej_registry_negotiated_timeout_ms(reg),
               lvl == EJ_REG_FENCE_HOLD ? "starting nothing" : "stopping running items");
    }
    if (tell && c->hooks.on_fence)
        c->hooks.on_fence(c->hooks.user, lvl);
    ej__coord_done(c);
}
