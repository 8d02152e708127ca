/*
 * Leader election (SPEC 4 "Leader election"): the latch-held creation of
 * leader/election/instance, abdication, the leader cache's events, and the
 * "am I the leader" question with its bounded wait.
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

/* ------------------------------------------------------------------------ */
/* Leadership                                                                */

/* Create leader/sharding/necessary. When the leader cache shows leader/
 * but no leader/sharding (a job new to ZooKeeper), both in one
 * transaction, instead of a create failing for want of its parent, the
 * parents one by one and the create again; anything unexpected goes the
 * general way. */
int ej__coord_set_necessary(ej__coord *c)
{
    int rc = EJ_EAGAIN;
    const char *slash = strrchr(c->p_necessary, '/');
    char *flags = ej__asprintf("%.*s", (int)(slash - c->p_necessary), c->p_necessary);
    if (flags != NULL && ej_tree_cache_exists(c->c_leader, c->p_leader, NULL) &&
        !ej_tree_cache_exists(c->c_leader, flags, NULL)) {
        struct ej_reg_op ops[2] = {
            {.type = EJ_REG_OP_CREATE, .path = flags, .mode = EJ_REG_PERSISTENT},
            {.type = EJ_REG_OP_CREATE, .path = c->p_necessary, .mode = EJ_REG_PERSISTENT},
        };
        rc = ej_registry_multi(c->reg, ops, 2, NULL);
    }
    free(flags);
    if (rc != 0)
        rc = ej_registry_create_node(c->reg, c->p_necessary, NULL, 0, EJ_REG_PERSISTENT,
                                     EJ_REG_CREATE_PARENTS, NULL);
    if (rc == EJ_ENODEEXISTS)
        rc = 0;
    /* Remembered for the start's step 6 (the start and the elections run
     * on the serial queue); a fire's resharding sets the flag too and has
     * nothing to remember. */
    if (rc == 0 && ej__coord_on_serial(c))
        c->necessary_session = ej_registry_session_id(c->reg);
    if (rc != 0)
        EJ_LOG(EJ_LOG_WARN, MOD, rc, "job %s: cannot set the resharding flag: %s", c->job,
               ej_registry_errmsg(c->reg));
    return rc;
}

/* Set necessary when this instance leads (3.x: only the leader sets it). */
void ej__coord_leader_set_necessary(ej__coord *c)
{
    /* Not skipped when the cache shows the flag: the leader may be about to
     * delete it at the end of a sharding that did not see this change (the
     * leader also compares its instances after sharding, see shard.c). */
    if (ej__coord_is_leader(c))
        ej__coord_set_necessary(c);
}

static void set_necessary_task(ej__coord *c, void *arg)
{
    (void)arg;
    EJ_ASSERT_SERIAL(c);
    c->necessary_posted = false;
    ej__coord_leader_set_necessary(c);
}

/* The members' arrivals and departures come in bursts (a fleet's start,
 * daemons killed together): the leader writes the flag once for a burst,
 * in a task after its events, where it wrote it at each event (one write
 * each, the later ones refused, and every task behind them waited,
 * the failover of a crashed member's running items among them). */
void ej__coord_leader_set_necessary_soon(ej__coord *c)
{
    EJ_ASSERT_SERIAL(c);
    if (c->necessary_posted || !ej__coord_is_leader(c))
        return;
    if (ej__coord_post(c, set_necessary_task, NULL) == 0)
        c->necessary_posted = true;
    else
        ej__coord_leader_set_necessary(c);
}

/* Can this instance take part in an election? */
bool ej__coord_eligible(ej__coord *c)
{
    EJ_ASSERT_SERIAL(c);
    return c->started && !atomic_load(&c->closed) && !c->stopped && atomic_load(&c->connected) &&
           c->reg_session != 0 &&
           c->reg_session == ej_registry_session_id(c->reg);
}

/* Under the election latch: a leader node naming no live instance (read
 * from ZooKeeper, not the cache) is deleted by its version. Every elector,
 * ejob or Java, creates the leader node only under this latch, so the node
 * read is the node deleted. Returns true when it was deleted. */
static bool remove_stale_leader_latched(ej__coord *c)
{
    char *id = NULL;
    struct ej_node_stat st;
    if (ej_registry_get(c->reg, c->p_leader_inst, &id, NULL, &st) != 0)
        return false;
    bool live = false;
    char *p = ej_layout_path_dup(c->job, EJ_LAYOUT_NODE_INSTANCE, 0, id); /* NULL: not an id */
    if (p && ej_registry_exists(c->reg, p, &live, NULL) != 0)
        live = true; /* cannot tell: leave it */
    free(p);
    bool removed = false;
    if (!live) {
        int rc = ej_registry_delete(c->reg, c->p_leader_inst, st.version);
        removed = rc == 0 || rc == EJ_ENONODE;
        EJ_LOG(EJ_LOG_WARN, MOD, rc,
               "job %s: the leader node %s names \"%s\", which is no live instance: %s", c->job,
               c->p_leader_inst, id, removed ? "removed; electing again" : "cannot remove it");
    }
    free(id);
    return removed;
}

static int elect(ej__coord *c, bool heal);

_Atomic(ej__election_hook_fn) ej__election_after_latch_hook;

/* Create the leader node only while our server is as the servers cache
 * shows it, enabled: one transaction checks servers/{ip}'s version and
 * creates the node, so that a disable written meanwhile (while this
 * election waited for the latch, or between the latch and this write)
 * leaves the node unwritten, at no request more than the create. A missing
 * servers/{ip} counts as enabled (as in Java) and is not checked. Returns
 * 0 (created), EJ_EBUSY (disabled), or the registry's error. */
static int create_leader_if_enabled(ej__coord *c)
{
    char *data = NULL;
    struct ej_node_stat st;
    bool known = ej_tree_cache_get(c->c_servers, c->p_my_server, &data, NULL, &st) == 0;
    bool disabled = known && strcmp(data, EJ_LAYOUT_SERVER_DISABLED) == 0;
    free(data);
    if (disabled)
        return EJ_EBUSY;
    if (!known)
        return ej_registry_create_node(c->reg, c->p_leader_inst, c->me, strlen(c->me),
                                       EJ_REG_EPHEMERAL, EJ_REG_CREATE_PARENTS, NULL);
    struct ej_reg_op ops[2] = {
        {.type = EJ_REG_OP_CHECK, .path = c->p_my_server, .version = st.version},
        {.type = EJ_REG_OP_CREATE,
         .path = c->p_leader_inst,
         .data = c->me,
         .len = strlen(c->me),
         .mode = EJ_REG_EPHEMERAL},
    };
    size_t failed = 0;
    int rc = ej_registry_multi(c->reg, ops, 2, &failed);
    if (rc != 0 && failed == 0)
        return EJ_EBUSY; /* servers/{ip} changed since the cache saw it */
    return rc;
}

/* Delete the leader node if ZooKeeper shows it is this instance's, in this
 * session (by its version: never another's node). True when it was. */
static bool drop_own_leader_node(ej__coord *c)
{
    char *id = NULL;
    struct ej_node_stat st;
    if (ej_registry_get(c->reg, c->p_leader_inst, &id, NULL, &st) != 0)
        return false;
    int64_t sess = ej_registry_session_id(c->reg);
    bool mine = strcmp(id, c->me) == 0 && sess != 0 && st.ephemeral_owner == sess;
    free(id);
    if (!mine)
        return false;
    int rc = ej_registry_delete(c->reg, c->p_leader_inst, st.version);
    if (rc != 0 && rc != EJ_ENONODE) {
        EJ_LOG(EJ_LOG_WARN, MOD, rc, "job %s: cannot give up leadership: %s", c->job,
               ej_registry_errmsg(c->reg));
        return false;
    }
    return true;
}

struct elect_call {
    bool heal;
    int rc;
};

static void elect_call_task(ej__coord *c, void *arg)
{
    struct elect_call *e = arg;
    e->rc = elect(c, e->heal);
}

/* Elections run on the serial queue, which owns what they write (won,
 * electing); from another thread (a fire waiting for a leader) they are
 * called onto it. */
int ej__coord_elect(ej__coord *c)
{
    struct elect_call e = {false, 0};
    ej__coord_call(c, elect_call_task, &e);
    return e.rc;
}

bool ej__coord_leader_stale(ej__coord *c)
{
    char *id = ej__coord_leader_id(c, NULL);
    bool stale = id != NULL && !ej__coord_instance_listed(c, id);
    free(id);
    return stale;
}

int ej__coord_heal_leader(ej__coord *c)
{
    struct elect_call e = {true, 0};
    ej__coord_call(c, elect_call_task, &e);
    return e.rc;
}

/* Under the election latch: the latch holder creates the leader node if
 * absent (read directly: the cache may lag behind a leader that just
 * left). A server disabled while this election waited for the latch takes
 * no leadership. */
static int elect_latched(ej__coord *c, bool heal, bool *won)
{
    EJ_ASSERT_SERIAL(c);
    ej__election_hook_fn hook = atomic_load(&ej__election_after_latch_hook);
    if (hook)
        hook(c);
    bool exists = false;
    int rc = ej_registry_exists(c->reg, c->p_leader_inst, &exists, NULL);
    if (rc == 0 && exists && heal && remove_stale_leader_latched(c))
        exists = false;
    if (rc != 0 || exists)
        return rc;
    rc = create_leader_if_enabled(c);
    if (rc == 0) {
        *won = true;
        c->won_session = ej_registry_session_id(c->reg);
    } else if (rc == EJ_ENODEEXISTS) {
        rc = 0;
    } else if (rc == EJ_EBUSY) {
        EJ_LOG(EJ_LOG_INFO, MOD, 0, "job %s: server %s disabled while electing: not leading",
               c->job, c->ip);
    }
    return rc;
}

/* The end of every election. */
static void elect_finish(ej__coord *c, bool won)
{
    EJ_ASSERT_SERIAL(c);
    c->electing = false;
    if (won) {
        EJ_LOG(EJ_LOG_INFO, MOD, 0, "job %s: %s is the leader", c->job, c->me);
        /* A new leader reshards at the next fire and handles the crashes
         * its predecessor could not. */
        ej__coord_set_necessary(c);
        ej__failover_process_pending(c);
    }
}

/* May an election begin? (and mark it begun) */
static bool elect_begin(ej__coord *c)
{
    EJ_ASSERT_SERIAL(c);
    if (atomic_load(&c->closed) || c->stopped || c->electing)
        return false;
    c->electing = true;
    return true;
}

/* A start's election waiting for the latch stops when the leader cache
 * shows a leader: a fleet starting at once would otherwise pass the
 * latch to every member of the job in turn, each start waiting for it.
 * (Not a heal: the leader it replaces is still in the cache.) */
static bool leader_now_known(void *arg)
{
    return ej__coord_leader_known(arg);
}

/* The election that waits on the queue: the start's (its next step needs
 * the result) and a fire's heal of a stale leader. */
static int elect(ej__coord *c, bool heal)
{
    if (!elect_begin(c))
        return 0;
    bool won = false;
    int rc = EJ_EBUSY;
    ej__latch *latch = NULL;
    if (!ej__coord_server_disabled(c)) {
        rc = ej__latch_acquire_unless(c->reg, c->p_el_latch, c->bound_ms,
                                      heal ? NULL : leader_now_known, c, &latch);
        if (rc == EJ_EAGAIN)
            EJ_LOG(EJ_LOG_DEBUG, MOD, 0, "job %s: a leader was elected while waiting for %s",
                   c->job, c->p_el_latch);
        else if (rc != 0)
            EJ_LOG(EJ_LOG_WARN, MOD, rc, "job %s: election latch %s not acquired", c->job,
                   c->p_el_latch);
    }
    if (latch != NULL) {
        rc = elect_latched(c, heal, &won);
        ej__latch_release(latch);
    }
    elect_finish(c, won);
    return rc;
}

/* The latch's answer to elect_async: on the serial queue, or (the
 * coordinator closed: EJ_ECLOSED) on the dispatch thread, which touches
 * nothing but the reference. */
static void elect_async_done(void *arg, ej__latch *latch, int rc)
{
    ej__coord *c = arg;
    if (!ej__coord_on_serial(c)) {
        EJ_ASSERT(latch == NULL);
        ej__coord_unref(c);
        return;
    }
    ej__latch_wait_put(c->elect_wait);
    c->elect_wait = NULL;
    bool won = false;
    /* An election begun for a job whose nodes were all there: if its
     * config or our instance node went while it waited (the job being
     * removed), it must not create them again. */
    bool removed = c->elect_recheck &&
                   (!ej_tree_cache_exists(c->c_config, c->p_config, NULL) ||
                    !ej_tree_cache_exists(c->c_instances, c->p_my_instance, NULL));
    if (latch != NULL && !atomic_load(&c->closed) && !c->stopped && !removed)
        rc = elect_latched(c, false, &won);
    else if (rc == EJ_EAGAIN)
        EJ_LOG(EJ_LOG_DEBUG, MOD, 0, "job %s: a leader was elected while waiting for %s", c->job,
               c->p_el_latch);
    else if (rc != 0)
        EJ_LOG(EJ_LOG_WARN, MOD, rc, "job %s: election latch %s not acquired", c->job,
               c->p_el_latch);
    ej__latch_release(latch);
    elect_finish(c, won);
    ej__coord_unref(c);
}

/* The election of a running job (its leader left, its server enabled, a
 * new session, a fire finding no leader): the latch's wait is a watch, and
 * the queue goes on with other events meanwhile; the rest of the election
 * runs when the latch is ours (elect_async_done). */
static void elect_async(ej__coord *c, bool recheck)
{
    if (!elect_begin(c))
        return;
    c->elect_recheck = recheck;
    if (ej__coord_server_disabled(c)) {
        elect_finish(c, false);
        return;
    }
    atomic_fetch_add(&c->refs, 1);
    EJ_ASSERT(c->elect_wait == NULL);
    int rc = ej__latch_acquire_async_w(c->reg, c->p_el_latch, c->bound_ms, ej__coord_latch_post,
                                       c, elect_async_done, c, &c->elect_wait);
    if (rc != 0) {
        EJ_LOG(EJ_LOG_WARN, MOD, rc, "job %s: election latch %s not acquired", c->job,
               c->p_el_latch);
        ej__coord_unref(c);
        elect_finish(c, false);
    }
}

void ej__coord_elect_async(ej__coord *c)
{
    elect_async(c, false);
}

/* When a leader leaves, every member of the job elects at once; each
 * creates a latch node, and all but the winner delete theirs when the
 * winner's node shows: in a fleet whose killed daemon led every job, 25
 * members x 100 jobs of writes, in the seconds when the survivors most
 * need ZooKeeper. Members wait their turn instead: the one ranked r among
 * the live instances (ElasticJob order) waits r x ELECT_STEP_MS (at most
 * ELECT_WAIT_MAX_MS) and elects only if no leader showed meanwhile. The
 * latch decides as before; a Java member elects at once, which changes
 * nothing but who wins.
 *
 * Under load a turn of 100 ms is shorter than an election (a latch node,
 * its children, the leader node, and the others' caches learning of it:
 * four round trips, each 300-500 ms when a fleet's survivors all react to
 * a crash at once), so the turns came and a dozen members of each job
 * still queued at the latch. So a member whose turn came first reads the
 * latch's children (one read, no write): while another member is at the
 * latch it looks again later (500 ms, then 1 s, then every 2 s). A member
 * at the latch either elects or leaves it, and one whose session is dying
 * keeps its node until the session ends, which the latch would wait for
 * as well: holding back never makes the election later than queueing
 * would, but a bound on the looks (ELECT_LOOKS_MAX, about 40 s) keeps
 * anything unforeseen from holding it back for ever. A cap that had every
 * member elect after 3 s brought the crowd back in the slowest elections,
 * the ones it mattered for. */
#define ELECT_STEP_MS 100
#define ELECT_WAIT_MAX_MS 1000
#define ELECT_LOOK_MS 500
#define ELECT_LOOK_MAX_MS 2000
#define ELECT_LOOKS_MAX 20

/* This member's turn: its rank among the available instances x
 * ELECT_STEP_MS, at most ELECT_WAIT_MAX_MS. From the caches, no request. */
static int elect_turn_ms(ej__coord *c)
{
    char **ids = NULL;
    size_t n = 0;
    size_t rank = 0;
    if (ej__coord_available_instances(c, &ids, &n) == 0)
        for (size_t i = 0; i < n; i++)
            if (strcmp(ids[i], c->me) == 0) {
                rank = i;
                break;
            }
    ej_registry_free_names(ids);
    return rank * ELECT_STEP_MS < ELECT_WAIT_MAX_MS ? (int)rank * ELECT_STEP_MS
                                                    : ELECT_WAIT_MAX_MS;
}

/* Is another member at the election latch? A failed read says no: the
 * latch decides anyway. */
static bool someone_electing(ej__coord *c)
{
    char **names = NULL;
    size_t n = 0;
    bool busy = ej_registry_children(c->reg, c->p_el_latch, EJ_REG_UNSORTED, &names, &n) == 0 &&
                n > 0;
    ej_registry_free_names(names);
    return busy;
}

/* A plan due this long ago is taken as lost (its task dropped). */
#define ELECT_PLAN_LOST_MS 10000

/* Plan elect_task(looks) in delay_ms. Returns 0 when planned. */
static int elect_plan(ej__coord *c, int delay_ms, intptr_t looks);

/* arg: NULL at an event (the leader left, a fire found none); then 1 +
 * the number of looks at the latch. An event while a turn or a look is
 * planned, or while this member is at the latch, changes nothing: a fire
 * that found no leader once elected at once, and in a slow election
 * every member's fire queued at the latch the turns kept them from. */
static void elect_task(ej__coord *c, void *arg)
{
    EJ_ASSERT_SERIAL(c);
    intptr_t looks = (intptr_t)arg;
    if (looks == 0 &&
        (c->electing ||
         (c->elect_look_due != 0 && ej__mono_ms() < c->elect_look_due + ELECT_PLAN_LOST_MS)))
        return;
    c->elect_look_due = 0;
    bool go = ej__coord_eligible(c);
    /* A job being removed (its config or our instance node already gone)
     * must not have its nodes created again by an election. */
    if (go && (!ej_tree_cache_exists(c->c_config, c->p_config, NULL) ||
               !ej_tree_cache_exists(c->c_instances, c->p_my_instance, NULL)))
        go = false;
    if (!go || ej__coord_leader_known(c))
        return;
    int wait = looks ? 0 : elect_turn_ms(c);
    if (wait > 0 && elect_plan(c, wait, 1) == 0)
        return;
    int again = looks > 0 && looks < 3 ? ELECT_LOOK_MS << (looks - 1) : ELECT_LOOK_MAX_MS;
    if (looks > 0 && looks <= ELECT_LOOKS_MAX && someone_electing(c) &&
        elect_plan(c, again, looks + 1) == 0)
        return;
    elect_async(c, true);
}

static int elect_plan(ej__coord *c, int delay_ms, intptr_t looks)
{
    int rc = ej__coord_post_after(c, delay_ms, elect_task, (void *)looks);
    if (rc == 0)
        c->elect_look_due = ej__mono_ms() + delay_ms;
    return rc;
}

void ej__coord_post_election(ej__coord *c)
{
    ej__coord_post(c, elect_task, NULL);
}

/* A fire waiting for a leader elects, on the serial queue, when this
 * instance may: in its turn, as when the leader leaves. */
static void elect_if_eligible_task(ej__coord *c, void *arg)
{
    (void)arg;
    if (!ej__coord_server_disabled(c))
        elect_task(c, NULL);
}

bool ej__coord_is_leader_until_block(ej__coord *c, int timeout_ms)
{
    int64_t start = ej__mono_ms();
    int64_t deadline = start + timeout_ms;
    bool logged = false;
    uint64_t seq = ej__coord_change_seq(c);
    for (;;) {
        char *id = ej__coord_leader_id(c, NULL);
        if (id != NULL) {
            free(id);
            return ej__coord_is_leader(c);
        }
        char **ids = NULL;
        size_t n = 0;
        ej__coord_available_instances(c, &ids, &n);
        ej_registry_free_names(ids);
        if (n == 0 || ej__coord_stopped(c))
            return false;
        ej__coord_call(c, elect_if_eligible_task, NULL);
        /* The cache shows the result a moment later. */
        if (!logged && ej__mono_ms() - start > 1000) {
            logged = true;
            EJ_LOG(EJ_LOG_INFO, MOD, 0, "job %s: waiting for a leader (%s)", c->job,
                   c->p_leader_inst);
        }
        if (!ej__coord_wait_change(c, &seq, deadline)) {
            id = ej__coord_leader_id(c, NULL);
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

/* Give up leadership (own server disabled, shutdown). ZooKeeper is asked,
 * not the leader cache: a leader node this instance created a moment ago
 * may not be in the cache yet (an election that won while the server was
 * being disabled), and it must go all the same. */
void ej__coord_abdicate(ej__coord *c)
{
    EJ_ASSERT_SERIAL(c);
    /* Asked only of an instance that may lead: the cache says so, or it won
     * an election in this session (the cache may not show it yet). */
    bool won = c->won_session != 0 && c->won_session == ej_registry_session_id(c->reg);
    if (!won && !ej__coord_is_leader(c))
        return;
    if (drop_own_leader_node(c))
        EJ_LOG(EJ_LOG_INFO, MOD, 0, "job %s: %s gave up leadership", c->job, c->me);
}

/* On the serial queue (posted by the listener below). */
static void on_leader_event_body(ej__coord *c, const struct ej_tree_event *ev)
{
    bool go = c->started && !atomic_load(&c->closed) && !c->stopped;
    if (!go)
        return;
    if (strcmp(ev->path, c->p_leader_inst) == 0 && ev->type != EJ_TREE_NODE_REMOVED) {
        /* Elected: our wait for the latch, if any, is for nothing (the
         * winner of a fleet's election otherwise passes the latch on to
         * every member of the job in turn). */
        ej__latch_wait_cancel(c->elect_wait);
        /* Leadership follows availability, whatever the order in which an
         * election, a disable and a reconnection were seen. */
        if (strcmp(ev->data, c->me) == 0 && ej__coord_server_disabled(c))
            ej__coord_abdicate(c);
        ej__failover_recorder_changed(c);
        ej__shard_when_busy(c); /* a new leader busy with its own run */
        return;
    }
    if (strcmp(ev->path, c->p_necessary) == 0 && ev->type == EJ_TREE_NODE_ADDED)
        ej__shard_when_busy(c);
    if (strcmp(ev->path, c->p_leader_inst) == 0 && ev->type == EJ_TREE_NODE_REMOVED) {
        EJ_LOG(EJ_LOG_INFO, MOD, 0, "job %s: leader %s left; electing", c->job, ev->data);
        if (!ej__coord_server_disabled(c))
            ej__coord_post_election(c);
        ej__failover_recorder_changed(c);
        return;
    }
    size_t flen = strlen(c->p_fo_items);
    bool fo_item = ev->type == EJ_TREE_NODE_ADDED && strncmp(ev->path, c->p_fo_items, flen) == 0 &&
                   ev->path[flen] == '/';
    if (fo_item)
        ej__failover_items_changed(c);
    if (fo_item && c->hooks.on_failover_pending && ej__coord_failover_on(c))
        c->hooks.on_failover_pending(c->hooks.user);
}

/* The leader cache's listener (dispatch thread): wakes the waiters (a
 * fire waiting for a leader or for the resharding flags) and queues the
 * event for the serial queue. */
void ej__coord_on_leader_event(ej_tree_cache *cache, const struct ej_tree_event *ev, void *user)
{
    (void)cache;
    ej__coord *c = user;
    EJ_ASSERT_DISPATCH(c);
    if (!ej__coord_enter(c))
        return;
    ej__coord_changed(c);
    if (ev->type != EJ_TREE_INITIALIZED && ej__coord_listening(c))
        ej__coord_post_event(c, ev, on_leader_event_body);
    ej__coord_done(c);
}
