/* The registry handle: options, the ZooKeeper session and its replacement,
 * the dispatch thread (queue, delayed tasks, connection-state listeners). */
#include <errno.h>
#include <inttypes.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "common/util.h"
#include "ejob/log.h"
#include "reg/internal.h"

/* ------------------------------------------------------------------------ */
/* ZooKeeper's log, routed into ours.                                        */

/* While a server is down the C client logs the same error every few tens of
 * milliseconds. Each distinct message (digits ignored) is let through at
 * most once per ZK_LOG_QUIET_MS, with a count of those held back. */
#define ZK_LOG_QUIET_MS 10000
#define ZK_LOG_SLOTS 16

static pthread_mutex_t zk_log_mu = PTHREAD_MUTEX_INITIALIZER;
static struct {
    uint64_t hash;
    int64_t last_ms;
    unsigned held;
} zk_log_seen[ZK_LOG_SLOTS];

/* Returns false to drop the message; *held gets the count held back. */
static bool zk_log_admit(const char *body, size_t n, unsigned *held)
{
    uint64_t h = 1469598103934665603ull;
    for (size_t i = 0; i < n; i++) {
        unsigned char ch = (unsigned char)body[i];
        if (ch >= '0' && ch <= '9')
            continue;
        h = (h ^ ch) * 1099511628211ull;
    }
    int64_t now = ej__mono_ms();
    bool admit = true;
    *held = 0;
    pthread_mutex_lock(&zk_log_mu);
    size_t slot = 0;
    for (size_t i = 0; i < ZK_LOG_SLOTS; i++) {
        if (zk_log_seen[i].hash == h) {
            slot = i;
            goto found;
        }
        if (zk_log_seen[i].last_ms < zk_log_seen[slot].last_ms)
            slot = i;
    }
    zk_log_seen[slot].hash = h;
    zk_log_seen[slot].last_ms = now;
    zk_log_seen[slot].held = 0;
    goto out_unlock;
found:
    if (now - zk_log_seen[slot].last_ms < ZK_LOG_QUIET_MS) {
        zk_log_seen[slot].held++;
        admit = false;
    } else {
        *held = zk_log_seen[slot].held;
        zk_log_seen[slot].held = 0;
        zk_log_seen[slot].last_ms = now;
    }
out_unlock:
    pthread_mutex_unlock(&zk_log_mu);
    return admit;
}

static void zk_log(const char *message)
{
    ej_log_level level = EJ_LOG_INFO;
    const char *body = message;
    const char *tag = strstr(message, ":ZOO_");
    if (tag) {
        if (strncmp(tag + 5, "ERROR", 5) == 0)
            level = EJ_LOG_ERROR;
        else if (strncmp(tag + 5, "WARN", 4) == 0)
            level = EJ_LOG_WARN;
        else if (strncmp(tag + 5, "DEBUG", 5) == 0)
            level = EJ_LOG_DEBUG;
        body = tag + 1;
    }
    size_t n = strlen(body);
    while (n > 0 && (body[n - 1] == '\n' || body[n - 1] == '\r'))
        n--;
    if (level < ej_log_get_level())
        return;
    unsigned held = 0;
    if (level >= EJ_LOG_WARN && !zk_log_admit(body, n, &held))
        return;
    if (held)
        EJ_LOG(level, "zk", 0, "%.*s (and %u more like it)", (int)n, body, held);
    else
        EJ_LOG(level, "zk", 0, "%.*s", (int)n, body);
}

static pthread_once_t zk_log_once = PTHREAD_ONCE_INIT;

static void zk_log_init(void)
{
    /* ZooKeeper's INFO is chatty (several lines per connection): below our
     * debug level only its warnings and errors are let through. */
    ej_log_level l = ej_log_get_level();
    if (l <= EJ_LOG_DEBUG)
        zoo_set_debug_level(ZOO_LOG_LEVEL_DEBUG);
    else if (l <= EJ_LOG_WARN)
        zoo_set_debug_level(ZOO_LOG_LEVEL_WARN);
    else
        zoo_set_debug_level(ZOO_LOG_LEVEL_ERROR);
}

/* ------------------------------------------------------------------------ */
/* Paths                                                                     */

char *ej__reg_full_path(const ej_registry *reg, const char *rel)
{
    if (strcmp(rel, "/") == 0)
        return strdup(reg->prefix_len ? reg->prefix : "/");
    return ej__asprintf("%s%s", reg->prefix, rel);
}

const char *ej__reg_rel_path(const ej_registry *reg, const char *full)
{
    if (reg->prefix_len == 0)
        return full;
    if (strncmp(full, reg->prefix, reg->prefix_len) != 0)
        return NULL;
    const char *rest = full + reg->prefix_len;
    if (*rest == '\0')
        return "/";
    return *rest == '/' ? rest : NULL;
}

const struct ACL_vector *ej__reg_acl(const ej_registry *reg)
{
    return reg->use_creator_acl ? &ZOO_CREATOR_ALL_ACL : &ZOO_OPEN_ACL_UNSAFE;
}

int ej__reg_zk_mode(ej_reg_mode mode)
{
    switch (mode) {
    case EJ_REG_PERSISTENT:
        return ZOO_PERSISTENT;
    case EJ_REG_EPHEMERAL:
        return ZOO_EPHEMERAL;
    case EJ_REG_PERSISTENT_SEQUENTIAL:
        return ZOO_PERSISTENT_SEQUENTIAL;
    case EJ_REG_EPHEMERAL_SEQUENTIAL:
        return ZOO_EPHEMERAL_SEQUENTIAL;
    case EJ_REG_CONTAINER:
        return ZOO_CONTAINER;
    }
    return -1;
}

/* ------------------------------------------------------------------------ */
/* Queue                                                                     */

int ej__reg_enqueue(ej_registry *reg, struct ej__reg_item *item, bool force)
{
    ej__mutex_lock(&reg->mu);
    if (reg->closing && !force) {
        ej__mutex_unlock(&reg->mu);
        return EJ_ECLOSED;
    }
    item->next = NULL;
    if (reg->tail)
        reg->tail->next = item;
    else
        reg->head = item;
    reg->tail = item;
    reg->enq_seq++;
    pthread_cond_signal(&reg->wake);
    ej__mutex_unlock(&reg->mu);
    return 0;
}

static void cond_init_mono(pthread_cond_t *c)
{
    pthread_condattr_t a;
    pthread_condattr_init(&a);
    pthread_condattr_setclock(&a, CLOCK_MONOTONIC);
    pthread_cond_init(c, &a);
    pthread_condattr_destroy(&a);
}

/* ------------------------------------------------------------------------ */
/* Connection-state listeners                                                */

static void emit_state(ej_registry *reg, ej_reg_state state, bool new_session)
{
    atomic_store(&reg->state, (int)state);
    static const char *const names[] = {"?", "CONNECTED", "SUSPENDED", "RECONNECTED", "LOST"};
    EJ_LOG(state == EJ_REG_LOST ? EJ_LOG_WARN : EJ_LOG_INFO, "reg", 0, "connection to %s: %s%s",
           reg->servers, names[state],
           state == EJ_REG_RECONNECTED ? (new_session ? " (new session)" : " (same session)") : "");
    /* Listeners may add or remove listeners: call a snapshot. */
    ej__mutex_lock(&reg->mu);
    struct ej__listener *snap = NULL;
    size_t n = ej__listeners_snapshot(&reg->listeners, &snap);
    ej__mutex_unlock(&reg->mu);
    for (size_t i = 0; i < n; i++) {
        /* Skip one removed by an earlier listener of this round. */
        ej__mutex_lock(&reg->mu);
        bool still = ej__listeners_has(&reg->listeners, snap[i].fn, snap[i].user);
        ej__mutex_unlock(&reg->mu);
        if (still)
            ((ej_reg_state_fn)snap[i].fn)(reg, state, new_session, snap[i].user);
    }
    free(snap);
}

int ej_registry_add_listener(ej_registry *reg, ej_reg_state_fn fn, void *user)
{
    if (!reg || !fn)
        return ej__reg_fail(EJ_EINVAL, "add_listener: registry or callback is NULL");
    ej__mutex_lock(&reg->mu);
    int rc = ej__listeners_add(&reg->listeners, (ej__listener_fn)fn, user);
    ej__mutex_unlock(&reg->mu);
    if (rc == -EEXIST)
        return ej__reg_fail(EJ_EINVAL, "add_listener: this listener is already added");
    if (rc != 0)
        return ej__reg_fail(rc, "add_listener: out of memory");
    return 0;
}

int ej_registry_remove_listener(ej_registry *reg, ej_reg_state_fn fn, void *user)
{
    if (!reg)
        return ej__reg_fail(EJ_EINVAL, "remove_listener: registry is NULL");
    ej__mutex_lock(&reg->mu);
    bool found = ej__listeners_remove(&reg->listeners, (ej__listener_fn)fn, user);
    ej__mutex_unlock(&reg->mu);
    if (!found)
        return ej__reg_fail(EJ_ENOTFOUND, "remove_listener: no such listener");
    /* A state change being delivered right now may still be calling it:
     * wait until that is over. */
    if (!ej_registry_on_dispatch_thread(reg))
        (void)ej_registry_barrier(reg, -1);
    return 0;
}

/* ------------------------------------------------------------------------ */
/* Sessions                                                                  */

struct session_item {
    struct ej__reg_item it;
    uint64_t gen;
    int state;
};

static void on_session_item(ej_registry *reg, struct ej__reg_item *item);

/* ZooKeeper's default watcher: only session events arrive here (no default
 * watches are ever set). Runs on ZooKeeper's completion thread: copy and
 * enqueue, nothing else. */
static void session_watcher(zhandle_t *zh, int type, int state, const char *path, void *ctx)
{
    (void)zh;
    (void)path;
    struct ej__reg_session *s = ctx;
    if (type != ZOO_SESSION_EVENT || !s)
        return;
    struct session_item *it = malloc(sizeof(*it));
    if (!it) {
        EJ_LOG(EJ_LOG_ERROR, "reg", -ENOMEM, "session event %d dropped: out of memory", state);
        return;
    }
    /* The watchdog hears of it at once, even while the dispatch thread is
     * busy. */
    ej__reg_live_on_session_event(s->reg, state);
    it->it.run = on_session_item;
    it->gen = s->gen;
    it->state = state;
    ej__reg_enqueue(s->reg, &it->it, true);
}

static void auth_done(int rc, const void *data)
{
    const struct ej__reg_session *s = data;
    if (rc != ZOK)
        EJ_LOG(EJ_LOG_ERROR, "reg", ej__reg_from_zk(rc), "digest authentication to %s failed: %s",
               s->reg->servers, zerror(rc));
}

/* Open a new handle (create, or the dispatch thread after closing one). */
static int open_handle(ej_registry *reg)
{
    struct ej__reg_session *s = malloc(sizeof(*s));
    if (!s)
        return -ENOMEM;
    s->reg = reg;
    s->gen = ++reg->cur_gen;
    errno = 0;
    zhandle_t *zh =
        zookeeper_init2(reg->servers, session_watcher, reg->session_timeout_ms, NULL, s, 0, zk_log);
    if (!zh) {
        int err = errno ? -errno : EJ_EZOOKEEPER;
        free(s);
        return err;
    }
    /* By default the client resolves the server list again each time its
     * I/O thread checks the sockets, that is for every answer: with
     * AI_ADDRCONFIG each resolution is a netlink dump of the host's
     * addresses, and a fleet starting at once spent more CPU there than in
     * everything else. Routine resolutions at most every
     * EJ_REG_RESOLVE_DELAY_MS; a lost connection still resolves at once. */
    zoo_set_servers_resolution_delay(zh, EJ_REG_RESOLVE_DELAY_MS);
    if (reg->digest) {
        int rc = zoo_add_auth(zh, "digest", reg->digest, (int)strlen(reg->digest), auth_done, s);
        if (rc != ZOK)
            EJ_LOG(EJ_LOG_ERROR, "reg", ej__reg_from_zk(rc), "cannot add digest auth: %s",
                   zerror(rc));
    }
    pthread_rwlock_wrlock(&reg->zh_lock);
    reg->zh = zh;
    reg->sess = s;
    pthread_rwlock_unlock(&reg->zh_lock);
    return 0;
}

struct cancel_item {
    struct ej__reg_item it;
    uint64_t gen;
};

static void on_cancel_item(ej_registry *reg, struct ej__reg_item *item)
{
    struct cancel_item *c = (struct cancel_item *)item;
    ej__reg_cancel_watches(reg, c->gen);
    free(c);
}

/* Close the current handle (dispatch thread). Everything ZooKeeper's threads
 * queued for it is in the queue when this returns; the watches it carried
 * are cancelled after those. */
static void close_handle(ej_registry *reg)
{
    pthread_rwlock_wrlock(&reg->zh_lock);
    zhandle_t *zh = reg->zh;
    struct ej__reg_session *s = reg->sess;
    reg->zh = NULL;
    reg->sess = NULL;
    pthread_rwlock_unlock(&reg->zh_lock);
    ej__mutex_lock(&reg->mu);
    reg->connected = false;
    reg->session_id = 0;
    pthread_cond_broadcast(&reg->changed);
    ej__mutex_unlock(&reg->mu);
    if (!zh)
        return;
    int rc = zookeeper_close(zh);
    if (rc != ZOK)
        EJ_LOG(EJ_LOG_DEBUG, "reg", ej__reg_from_zk(rc), "closing the ZooKeeper handle: %s",
               zerror(rc));
    /* Every answer of the closed handle has run by now or never will (the
     * leak quiesce avoids at shutdown): none of its reads is in flight. */
    atomic_store(&reg->cache_reads_inflight, 0);
    struct cancel_item *c = malloc(sizeof(*c));
    if (c) {
        c->it.run = on_cancel_item;
        c->gen = s->gen;
        ej__reg_enqueue(reg, &c->it, true);
    } else {
        ej__reg_cancel_watches(reg, s->gen);
    }
    free(s);
}

static void replace_session(ej_registry *reg, int delay_ms)
{
    close_handle(reg);
    if (delay_ms > 0) {
        reg->reopen_at = ej__mono_ms() + delay_ms;
        return;
    }
    int rc = open_handle(reg);
    if (rc != 0) {
        EJ_LOG(EJ_LOG_ERROR, "reg", rc, "cannot open a new ZooKeeper session to %s; retrying",
               reg->servers);
        reg->reopen_at = ej__mono_ms() + reg->max_sleep_ms;
    }
}

static void ns_created(int rc, const char *value, const void *data)
{
    (void)value;
    ej_registry *reg = (ej_registry *)data;
    if (rc == ZOK || rc == ZNODEEXISTS)
        atomic_store(&reg->ns_ok, true);
}

static void ns_step_done(int rc, const char *value, const void *data)
{
    (void)rc;
    (void)value;
    (void)data;
}

/* Create the namespace node (and its parents) without blocking: the
 * requests go out before any other request of this session. */
static void ensure_namespace(ej_registry *reg)
{
    if (reg->prefix_len == 0 || atomic_load(&reg->ns_ok))
        return;
    char *p = strdup(reg->prefix);
    if (!p)
        return;
    for (char *s = strchr(p + 1, '/');; s = strchr(s + 1, '/')) {
        if (s)
            *s = '\0';
        int rc = zoo_acreate(reg->zh, p, "", 0, ej__reg_acl(reg), ZOO_PERSISTENT,
                             s ? ns_step_done : ns_created, reg);
        if (rc == ZOK)
            ej__reg_count(reg);
        if (!s)
            break;
        *s = '/';
    }
    free(p);
}

static void on_connected(ej_registry *reg)
{
    const clientid_t *cid = zoo_client_id(reg->zh);
    int64_t sid = cid->client_id;
    bool new_session = sid != reg->last_session_id;
    int prev = reg->phase;
    reg->phase = EJ_REG_CONNECTED;
    ensure_namespace(reg);
    ej__mutex_lock(&reg->mu);
    reg->connected = true;
    reg->session_id = sid;
    memcpy(reg->passwd, cid->passwd, EJ_REG_PASSWD_LEN);
    reg->negotiated_ms = zoo_recv_timeout(reg->zh);
    pthread_cond_broadcast(&reg->changed);
    ej__mutex_unlock(&reg->mu);
    reg->last_session_id = sid;
    EJ_LOG(EJ_LOG_DEBUG, "reg", 0, "session 0x%" PRIx64 " on %s, timeout %d ms", (uint64_t)sid,
           reg->servers, zoo_recv_timeout(reg->zh));
    if (!reg->ever_connected) {
        reg->ever_connected = true;
        emit_state(reg, EJ_REG_CONNECTED, false);
        return;
    }
    if (prev == EJ_REG_CONNECTED)
        return;
    ej__tree_cache_on_session(reg, new_session);
    emit_state(reg, EJ_REG_RECONNECTED, new_session);
}

static void on_disconnected(ej_registry *reg)
{
    ej__mutex_lock(&reg->mu);
    reg->connected = false;
    pthread_cond_broadcast(&reg->changed);
    ej__mutex_unlock(&reg->mu);
    if (reg->phase != EJ_REG_CONNECTED)
        return;
    reg->phase = EJ_REG_SUSPENDED;
    reg->disconnected_at = ej__mono_ms();
    emit_state(reg, EJ_REG_SUSPENDED, false);
}

static void on_dead_session(ej_registry *reg, bool auth_failed)
{
    ej__mutex_lock(&reg->mu);
    reg->connected = false;
    reg->session_id = 0;
    if (auth_failed)
        reg->auth_failed = true;
    pthread_cond_broadcast(&reg->changed);
    ej__mutex_unlock(&reg->mu);
    if (auth_failed)
        EJ_LOG(EJ_LOG_ERROR, "reg", EJ_EAUTHFAILED, "ZooKeeper at %s refused authentication",
               reg->servers);
    bool announce = reg->ever_connected && reg->phase != EJ_REG_LOST;
    reg->phase = EJ_REG_LOST;
    /* The new session is on its way before listeners hear of the loss, so
     * operations they make wait for it rather than for the dead one. An
     * authentication failure would repeat at once: back off. */
    replace_session(reg, auth_failed ? reg->max_sleep_ms : 0);
    if (announce)
        emit_state(reg, EJ_REG_LOST, false);
}

static void on_session_item(ej_registry *reg, struct ej__reg_item *item)
{
    struct session_item *it = (struct session_item *)item;
    uint64_t gen = it->gen;
    int st = it->state;
    free(it);
    if (gen != reg->cur_gen || !reg->zh)
        return; /* from a handle already closed */
    if (st == ZOO_CONNECTED_STATE || st == ZOO_READONLY_STATE)
        on_connected(reg);
    else if (st == ZOO_CONNECTING_STATE || st == ZOO_ASSOCIATING_STATE ||
             st == ZOO_NOTCONNECTED_STATE)
        on_disconnected(reg);
    else if (st == ZOO_EXPIRED_SESSION_STATE)
        on_dead_session(reg, false);
    else if (st == ZOO_AUTH_FAILED_STATE)
        on_dead_session(reg, true);
}

/* The dispatch thread's own timers; returns the next deadline (mono ms) or
 * INT64_MAX. */
static int64_t run_timers(ej_registry *reg)
{
    int64_t now = ej__mono_ms();
    int64_t next = INT64_MAX;
    if (reg->phase == EJ_REG_SUSPENDED) {
        int timeout = reg->negotiated_ms > 0 ? reg->negotiated_ms : reg->session_timeout_ms;
        int64_t due = reg->disconnected_at + timeout;
        if (now >= due) {
            /* As Curator does: a client cut off for the whole session timeout
             * must assume the server has expired its session. Start a new one. */
            EJ_LOG(EJ_LOG_WARN, "reg", EJ_ECONNLOSS,
                   "disconnected from %s for %d ms (the session timeout): session lost",
                   reg->servers, timeout);
            reg->phase = EJ_REG_LOST;
            replace_session(reg, 0);
            emit_state(reg, EJ_REG_LOST, false);
        } else {
            next = due;
        }
    }
    if (reg->reopen_at) {
        if (now >= reg->reopen_at) {
            reg->reopen_at = 0;
            int rc = open_handle(reg);
            if (rc != 0) {
                EJ_LOG(EJ_LOG_ERROR, "reg", rc, "cannot open a ZooKeeper session to %s",
                       reg->servers);
                reg->reopen_at = now + reg->max_sleep_ms;
            }
        }
        if (reg->reopen_at && reg->reopen_at < next)
            next = reg->reopen_at;
    }
    return next;
}

/* ------------------------------------------------------------------------ */
/* The dispatch thread                                                       */

static _Thread_local const ej_registry *tl_dispatch_of;

bool ej_registry_on_dispatch_thread(const ej_registry *reg)
{
    return reg && tl_dispatch_of == reg;
}

struct task_item {
    struct ej__reg_item it;
    ej_reg_task_fn fn;
    void *user;
};

static void on_task_item(ej_registry *reg, struct ej__reg_item *item)
{
    struct task_item *t = (struct task_item *)item;
    ej_reg_task_fn fn = t->fn;
    void *user = t->user;
    free(t);
    fn(reg, user);
}

/* Run everything queued, on the dispatch thread. Called with mu held;
 * returns with mu held. Both checked. */
static void drain(ej_registry *reg)
{
    EJ_ASSERT_HELD(&reg->mu);
    EJ_ASSERT(ej_registry_on_dispatch_thread(reg));
    while (reg->head) {
        struct ej__reg_item *batch = reg->head;
        reg->head = reg->tail = NULL;
        ej__mutex_unlock(&reg->mu);
        uint64_t n = 0;
        while (batch) {
            struct ej__reg_item *next = batch->next;
            batch->run(reg, batch);
            batch = next;
            n++;
        }
        ej__mutex_lock(&reg->mu);
        reg->done_seq += n;
        pthread_cond_broadcast(&reg->changed);
    }
}

/* Move due delayed tasks (all of them when all) into the queue. mu held
 * (checked). */
static void move_delayed(ej_registry *reg, bool all)
{
    EJ_ASSERT_HELD(&reg->mu);
    int64_t now = ej__mono_ms();
    while (reg->delayed && (all || reg->delayed->due_ms <= now)) {
        struct ej__reg_delayed *d = reg->delayed;
        reg->delayed = d->next;
        struct task_item *t = malloc(sizeof(*t));
        if (!t) {
            /* Run it here rather than lose it. */
            ej__mutex_unlock(&reg->mu);
            d->fn(reg, d->user);
            ej__mutex_lock(&reg->mu);
        } else {
            t->it.run = on_task_item;
            t->fn = d->fn;
            t->user = d->user;
            t->it.next = NULL;
            if (reg->tail)
                reg->tail->next = &t->it;
            else
                reg->head = &t->it;
            reg->tail = &t->it;
            reg->enq_seq++;
        }
        free(d);
    }
}

/* How long shutdown waits for the tree caches' reads in flight: they are
 * answered within a round trip while connected, and fail at once when the
 * connection goes. */
#define QUIESCE_MS 1000

/* Dispatch thread, at shutdown: answer the caches' reads in flight (each
 * answer may not send another) until none is left or QUIESCE_MS passed. */
static void quiesce(ej_registry *reg)
{
    reg->quiescing = true;
    int64_t deadline = ej__mono_ms() + QUIESCE_MS;
    ej__mutex_lock(&reg->mu);
    while (atomic_load(&reg->cache_reads_inflight) > 0 || reg->head) {
        if (reg->head) {
            drain(reg);
            continue;
        }
        if (ej__mono_ms() >= deadline)
            break;
        struct timespec ts;
        ts = ej__mono_timespec(ej__mono_ms() + 5);
        ej__mutex_timedwait(&reg->mu, &reg->wake, &ts);
    }
    ej__mutex_unlock(&reg->mu);
}

static void *dispatch_main(void *arg)
{
    ej_registry *reg = arg;
    tl_dispatch_of = reg;
    pthread_setname_np(pthread_self(), "ej-reg");
    ej__mutex_lock(&reg->mu);
    for (;;) {
        move_delayed(reg, reg->closing);
        if (reg->head) {
            drain(reg);
            continue;
        }
        if (reg->closing)
            break;
        ej__mutex_unlock(&reg->mu);
        int64_t next = run_timers(reg);
        ej__mutex_lock(&reg->mu);
        if (reg->head || reg->closing)
            continue;
        if (reg->delayed && reg->delayed->due_ms < next)
            next = reg->delayed->due_ms;
        if (next == INT64_MAX) {
            ej__mutex_wait(&reg->mu, &reg->wake);
        } else {
            struct timespec ts;
            ts = ej__mono_timespec(next);
            ej__mutex_timedwait(&reg->mu, &reg->wake, &ts);
        }
    }
    ej__mutex_unlock(&reg->mu);

    /* Shutdown: let the tree caches' reads in flight be answered (no new
     * ones are sent) so that none is pending when the handle closes, then
     * close the session (ephemeral nodes go now), deliver what it produced
     * and the cancellation of the watches left, free the caches. */
    quiesce(reg);
    close_handle(reg);
    ej__mutex_lock(&reg->mu);
    drain(reg);
    ej__mutex_unlock(&reg->mu);
    ej__reg_cancel_watches(reg, UINT64_MAX);
    ej__tree_cache_free_all(reg);
    ej__mutex_lock(&reg->mu);
    drain(reg);
    ej__mutex_unlock(&reg->mu);
    tl_dispatch_of = NULL;
    return NULL;
}

int ej_registry_post(ej_registry *reg, ej_reg_task_fn fn, void *user)
{
    if (!reg || !fn)
        return ej__reg_fail(EJ_EINVAL, "post: registry or function is NULL");
    struct task_item *t = malloc(sizeof(*t));
    if (!t)
        return ej__reg_fail(-ENOMEM, "post: out of memory");
    t->it.run = on_task_item;
    t->fn = fn;
    t->user = user;
    int rc = ej__reg_enqueue(reg, &t->it, false);
    if (rc != 0) {
        free(t);
        return ej__reg_fail(rc, "post: the registry is closing");
    }
    return 0;
}

int ej_registry_post_after(ej_registry *reg, int delay_ms, ej_reg_task_fn fn, void *user)
{
    if (!reg || !fn)
        return ej__reg_fail(EJ_EINVAL, "post_after: registry or function is NULL");
    if (delay_ms <= 0)
        return ej_registry_post(reg, fn, user);
    struct ej__reg_delayed *d = malloc(sizeof(*d));
    if (!d)
        return ej__reg_fail(-ENOMEM, "post_after: out of memory");
    d->due_ms = ej__mono_ms() + delay_ms;
    d->fn = fn;
    d->user = user;
    ej__mutex_lock(&reg->mu);
    if (reg->closing) {
        ej__mutex_unlock(&reg->mu);
        free(d);
        return ej__reg_fail(EJ_ECLOSED, "post_after: the registry is closing");
    }
    d->seq = reg->delayed_seq++;
    struct ej__reg_delayed **pp = &reg->delayed;
    while (*pp && (*pp)->due_ms <= d->due_ms)
        pp = &(*pp)->next;
    d->next = *pp;
    *pp = d;
    pthread_cond_signal(&reg->wake);
    ej__mutex_unlock(&reg->mu);
    return 0;
}

int ej_registry_barrier(ej_registry *reg, int timeout_ms)
{
    if (!reg)
        return ej__reg_fail(EJ_EINVAL, "barrier: registry is NULL");
    if (ej_registry_on_dispatch_thread(reg))
        return ej__reg_fail(EJ_EINVAL, "barrier: called on the dispatch thread");
    int rc = 0;
    int64_t deadline = timeout_ms < 0 ? INT64_MAX : ej__mono_ms() + timeout_ms;
    struct timespec ts;
    ts = ej__mono_timespec(deadline == INT64_MAX ? 0 : deadline);
    ej__mutex_lock(&reg->mu);
    uint64_t target = reg->enq_seq;
    while (reg->done_seq < target) {
        if (!reg->thread_started) {
            rc = ej__reg_fail(EJ_ECLOSED, "barrier: the registry is closed");
            break;
        }
        if (deadline == INT64_MAX) {
            ej__mutex_wait(&reg->mu, &reg->changed);
        } else if (ej__mutex_timedwait(&reg->mu, &reg->changed, &ts) == ETIMEDOUT &&
                   reg->done_seq < target) {
            rc = ej__reg_fail(EJ_ETIMEDOUT, "barrier: not reached within %d ms", timeout_ms);
            break;
        }
    }
    ej__mutex_unlock(&reg->mu);
    return rc;
}

/* ------------------------------------------------------------------------ */
/* Create / destroy                                                          */

static void free_registry(ej_registry *reg)
{
    while (reg->delayed) {
        struct ej__reg_delayed *d = reg->delayed;
        reg->delayed = d->next;
        free(d);
    }
    ej__reg_live_fini(reg);
    ej__listeners_fini(&reg->listeners);
    free(reg->caches);
    free(reg->servers);
    free(reg->ns);
    free(reg->prefix);
    free(reg->digest);
    pthread_rwlock_destroy(&reg->zh_lock);
    ej__mutex_destroy(&reg->mu);
    pthread_cond_destroy(&reg->wake);
    pthread_cond_destroy(&reg->changed);
    free(reg);
}

void ej_registry_destroy(ej_registry *reg)
{
    if (!reg)
        return;
    if (ej_registry_on_dispatch_thread(reg)) {
        EJ_LOG(EJ_LOG_ERROR, "reg", EJ_EINVAL,
               "ej_registry_destroy called on the registry's own dispatch thread: ignored");
        return;
    }
    ej__reg_live_stop(reg);
    ej__mutex_lock(&reg->mu);
    reg->closing = true;
    bool started = reg->thread_started;
    pthread_cond_signal(&reg->wake);
    ej__mutex_unlock(&reg->mu);
    if (started) {
        pthread_join(reg->thread, NULL);
        ej__mutex_lock(&reg->mu);
        reg->thread_started = false;
        pthread_cond_broadcast(&reg->changed);
        ej__mutex_unlock(&reg->mu);
    } else {
        close_handle(reg);
        /* Nothing ran the queue: free what is in it without running it
         * (only ZooKeeper-produced items can be there). */
        struct ej__reg_item *it = reg->head;
        reg->head = reg->tail = NULL;
        while (it) {
            struct ej__reg_item *next = it->next;
            it->run(reg, it);
            it = next;
        }
        ej__reg_cancel_watches(reg, UINT64_MAX);
        ej__tree_cache_free_all(reg);
    }
    free_registry(reg);
}

static int dup_opt(char **dst, const char *src)
{
    if (!src) {
        *dst = NULL;
        return 0;
    }
    *dst = strdup(src);
    return *dst ? 0 : -ENOMEM;
}

/* opts.takeover_margin_ms: 0 is the default, which the environment's
 * EJOB_TAKEOVER_MARGIN_MS (a decimal >= 0) overrides; negative is none. */
static int resolve_takeover_margin(int asked)
{
    if (asked != 0)
        return asked > 0 ? asked : 0;
    const char *env = getenv("EJOB_TAKEOVER_MARGIN_MS");
    char *end = NULL;
    long v = env != NULL ? strtol(env, &end, 10) : -1;
    if (env != NULL && end != env && *end == '\0' && v >= 0 && v <= EJ_REG_TAKEOVER_MARGIN_MAX_MS)
        return (int)v;
    return EJ_REG_TAKEOVER_MARGIN_DEFAULT_MS;
}

int ej_registry_create(ej_registry **out, const struct ej_registry_opts *opts)
{
    if (!out)
        return ej__reg_fail(EJ_EINVAL, "registry create: out is NULL");
    *out = NULL;
    if (!opts)
        return ej__reg_fail(EJ_EINVAL, "registry create: opts is NULL");
    if (!opts->servers || !opts->servers[0])
        return ej__reg_fail(EJ_EINVAL, "registry create: servers is empty");
    if (opts->session_timeout_ms < 0 || opts->connection_timeout_ms < 0 ||
        opts->base_sleep_ms < 0 || opts->max_sleep_ms < 0)
        return ej__reg_fail(EJ_EINVAL, "registry create: negative timeout or sleep for %s",
                            opts->servers);
    if (opts->digest && !strchr(opts->digest, ':'))
        return ej__reg_fail(EJ_EINVAL, "registry create: digest must be \"user:password\"");
    const char *ns = opts->namespace_ ? opts->namespace_ : "";
    if (ns[0]) {
        const char *why = NULL;
        char *p = ej__asprintf("/%s", ns);
        if (!p)
            return ej__reg_fail(-ENOMEM, "registry create: out of memory");
        int rc = ns[0] == '/' ? EJ_EBADPATH : ej__reg_check_path(p, false, &why);
        free(p);
        if (rc != 0)
            return ej__reg_fail(EJ_EBADPATH, "registry create: bad namespace \"%s\": %s", ns,
                                why ? why : "must not start with '/'");
    }

    pthread_once(&zk_log_once, zk_log_init);

    ej_registry *reg = calloc(1, sizeof(*reg));
    if (!reg)
        return ej__reg_fail(-ENOMEM, "registry create: out of memory");
    pthread_rwlockattr_t ra;
    pthread_rwlockattr_init(&ra);
    /* Session replacement must not starve behind a stream of operations. */
    pthread_rwlockattr_setkind_np(&ra, PTHREAD_RWLOCK_PREFER_WRITER_NONRECURSIVE_NP);
    pthread_rwlock_init(&reg->zh_lock, &ra);
    pthread_rwlockattr_destroy(&ra);
    ej__mutex_init(&reg->mu);
    ej__reg_live_init(reg);
    cond_init_mono(&reg->wake);
    cond_init_mono(&reg->changed);
    reg->session_timeout_ms = opts->session_timeout_ms ? opts->session_timeout_ms : 60000;
    reg->connection_timeout_ms = opts->connection_timeout_ms ? opts->connection_timeout_ms : 15000;
    reg->base_sleep_ms = opts->base_sleep_ms ? opts->base_sleep_ms : 1000;
    reg->max_sleep_ms = opts->max_sleep_ms ? opts->max_sleep_ms : 3000;
    reg->max_retries = opts->max_retries == 0 ? 3 : (opts->max_retries < 0 ? 0 : opts->max_retries);
    reg->takeover_margin_ms = resolve_takeover_margin(opts->takeover_margin_ms);
    reg->use_creator_acl = opts->digest != NULL;
    reg->next_cache_id = 1;
    atomic_init(&reg->state, 0);
    atomic_init(&reg->requests, 0);
    atomic_init(&reg->ns_ok, false);
    int rc = 0;
    if (dup_opt(&reg->servers, opts->servers) || dup_opt(&reg->ns, ns) ||
        dup_opt(&reg->digest, opts->digest) ||
        !(reg->prefix = ns[0] ? ej__asprintf("/%s", ns) : strdup(""))) {
        rc = ej__reg_fail(-ENOMEM, "registry create: out of memory");
        goto out_free;
    }
    reg->prefix_len = strlen(reg->prefix);
    if (opts->on_state && (rc = ej_registry_add_listener(reg, opts->on_state, opts->on_state_user)))
        goto out_free;

    rc = open_handle(reg);
    if (rc != 0) {
        rc = ej__reg_fail(rc == -EINVAL ? EJ_EINVAL : rc,
                          "registry create: cannot start a ZooKeeper client for \"%s\": %s",
                          reg->servers, ej_strerror(rc));
        goto out_free;
    }
    int err = pthread_create(&reg->thread, NULL, dispatch_main, reg);
    if (err) {
        rc = ej__reg_fail(-err, "registry create: cannot start the dispatch thread");
        goto out_destroy;
    }
    reg->thread_started = true;
    err = ej__reg_live_start(reg);
    if (err) {
        rc = ej__reg_fail(err, "registry create: cannot start the watchdog thread");
        goto out_destroy;
    }

    int64_t deadline = ej__mono_ms() + reg->connection_timeout_ms;
    struct timespec ts;
    ts = ej__mono_timespec(deadline);
    ej__mutex_lock(&reg->mu);
    while (!reg->connected && !reg->auth_failed) {
        if (ej__mutex_timedwait(&reg->mu, &reg->changed, &ts) == ETIMEDOUT)
            break;
    }
    bool ok = reg->connected;
    bool auth = reg->auth_failed;
    ej__mutex_unlock(&reg->mu);
    if (!ok) {
        if (auth)
            rc = ej__reg_fail(EJ_EAUTHFAILED,
                              "registry create: ZooKeeper at %s refused the digest credentials",
                              reg->servers);
        else
            rc = ej__reg_fail(EJ_ETIMEDOUT,
                              "registry create: could not connect to ZooKeeper at %s within %d ms",
                              reg->servers, reg->connection_timeout_ms);
        goto out_destroy;
    }
    /* The fence opens with the first answered probe: a few milliseconds. */
    ej__reg_live_wait_contact(reg, (int)(deadline - ej__mono_ms()));
    *out = reg;
    return 0;

out_destroy : {
    /* Keep the message: destroy may overwrite the thread's error text. */
    char msg[1024];
    snprintf(msg, sizeof(msg), "%s", ej_registry_errmsg(NULL));
    ej_registry_destroy(reg);
    ej__reg_fail(rc, "%s", msg);
    return rc;
}
out_free:
    free_registry(reg);
    return rc;
}

/* ------------------------------------------------------------------------ */
/* Queries                                                                   */

int64_t ej_registry_session_id(const ej_registry *reg)
{
    ej_registry *r = (ej_registry *)reg;
    ej__mutex_lock(&r->mu);
    int64_t id = r->session_id;
    ej__mutex_unlock(&r->mu);
    return id;
}

int ej_registry_session_credentials(const ej_registry *reg, int64_t *session_id,
                                    char passwd[EJ_REG_PASSWD_LEN])
{
    ej_registry *r = (ej_registry *)reg;
    int rc = 0;
    ej__mutex_lock(&r->mu);
    if (r->session_id == 0) {
        rc = EJ_ECONNLOSS;
    } else {
        if (session_id)
            *session_id = r->session_id;
        if (passwd)
            memcpy(passwd, r->passwd, EJ_REG_PASSWD_LEN);
    }
    ej__mutex_unlock(&r->mu);
    if (rc)
        return ej__reg_fail(rc, "session_credentials: no session established with %s",
                            reg->servers);
    return 0;
}

int ej_registry_takeover_margin_ms(const ej_registry *reg)
{
    return reg != NULL ? reg->takeover_margin_ms : 0;
}

int ej_registry_negotiated_timeout_ms(const ej_registry *reg)
{
    ej_registry *r = (ej_registry *)reg;
    ej__mutex_lock(&r->mu);
    int ms = r->negotiated_ms;
    ej__mutex_unlock(&r->mu);
    return ms;
}

const char *ej_registry_namespace(const ej_registry *reg)
{
    return reg->ns;
}

bool ej_registry_is_connected(const ej_registry *reg)
{
    ej_registry *r = (ej_registry *)reg;
    ej__mutex_lock(&r->mu);
    bool c = r->connected;
    ej__mutex_unlock(&r->mu);
    return c;
}

ej_reg_state ej_registry_state(const ej_registry *reg)
{
    return (ej_reg_state)atomic_load(&((ej_registry *)reg)->state);
}

int ej_registry_wait_connected(ej_registry *reg, int timeout_ms)
{
    int64_t deadline = ej__mono_ms() + (timeout_ms < 0 ? 0 : timeout_ms);
    struct timespec ts;
    ts = ej__mono_timespec(deadline);
    int rc = 0;
    ej__mutex_lock(&reg->mu);
    while (!reg->connected) {
        if (reg->closing) {
            rc = EJ_ECLOSED;
            break;
        }
        if (ej__mutex_timedwait(&reg->mu, &reg->changed, &ts) == ETIMEDOUT && !reg->connected) {
            rc = EJ_ETIMEDOUT;
            break;
        }
    }
    ej__mutex_unlock(&reg->mu);
    if (rc == EJ_ETIMEDOUT)
        return ej__reg_fail(rc, "not connected to ZooKeeper at %s within %d ms", reg->servers,
                            timeout_ms);
    if (rc)
        return ej__reg_fail(rc, "the registry is closing");
    return 0;
}

uint64_t ej_registry_request_count(const ej_registry *reg)
{
    return atomic_load(&((ej_registry *)reg)->requests);
}
