/*
 * Liveness and self-fencing: the registry's own proof that the server still
 * hears this client (see registry.h "Liveness and self-fencing").
 *
 * The ZooKeeper C client pings a server every third of the session timeout
 * when idle and reports a disconnection only after two thirds of it without
 * an answer; a client cut off learns of its expiry only when it reconnects.
 * Counting from those reports, an instance would fence itself long after
 * the server gave its items to someone else. So a watchdog thread sends its
 * own small read every T/6 and keeps the SEND time of the latest answered
 * one: the server heard the client at or after that moment and cannot expire
 * the session before it + T. (Those reads replace the client's pings: it
 * pings only when it has sent nothing for T/3.)
 *
 * The watchdog also tells fence listeners, on its own thread, when the level
 * changes. It never waits for the dispatch thread, so a view retrying reads
 * there cannot delay a fence.
 */
#include <errno.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "common/util.h"
#include "ejob/log.h"
#include "reg/internal.h"

/* The shortest probe period, whatever the session timeout. */
#define MIN_PERIOD_MS 20
/* Probes in flight at most. A slow server answers each late, but in order:
 * with probes every period, the silence stays under its answer time plus
 * one period instead of twice the answer time. */
#define MAX_INFLIGHT 4

struct probe {
    ej_registry *reg;
    uint64_t seq;
    int64_t sent_ms;
    int64_t session;
    int timeout_ms;
};

static void cond_init_mono(pthread_cond_t *c)
{
    pthread_condattr_t a;
    pthread_condattr_init(&a);
    pthread_condattr_setclock(&a, CLOCK_MONOTONIC);
    pthread_cond_init(c, &a);
    pthread_condattr_destroy(&a);
}

void ej__reg_live_init(ej_registry *reg)
{
    ej__mutex_init(&reg->live_mu);
    cond_init_mono(&reg->live_cv);
    reg->fence_told = -1;
}

void ej__reg_live_fini(ej_registry *reg)
{
    ej__listeners_fini(&reg->fence_fns);
    ej__mutex_destroy(&reg->live_mu);
    pthread_cond_destroy(&reg->live_cv);
}

static int timeout_locked(const ej_registry *reg)
{
    EJ_ASSERT_HELD(&reg->live_mu);
    return reg->contact_timeout_ms > 0 ? reg->contact_timeout_ms : reg->session_timeout_ms;
}

/* The level of session at now (live_mu held: checked). */
static ej_reg_fence level_locked(const ej_registry *reg, int64_t session, int64_t now)
{
    EJ_ASSERT_HELD(&reg->live_mu);
    bool same = reg->contact_session != 0 && (session == 0 || session == reg->contact_session);
    return ej__reg_fence_level(now - reg->contact_ms, timeout_locked(reg), reg->zk_up, same);
}

ej_reg_fence ej_registry_fence(const ej_registry *reg, int64_t session)
{
    ej_registry *r = (ej_registry *)reg;
    if (!r)
        return EJ_REG_FENCE_CANCEL;
    ej__mutex_lock(&r->live_mu);
    ej_reg_fence lvl = level_locked(r, session, ej__mono_ms());
    ej__mutex_unlock(&r->live_mu);
    return lvl;
}

int64_t ej_registry_last_contact_ms(const ej_registry *reg, int64_t *session)
{
    ej_registry *r = (ej_registry *)reg;
    ej__mutex_lock(&r->live_mu);
    int64_t at = r->contact_ms;
    if (session)
        *session = r->contact_session;
    ej__mutex_unlock(&r->live_mu);
    return at;
}

void ej__reg_live_on_session_event(ej_registry *reg, int zk_state)
{
    ej__mutex_lock(&reg->live_mu);
    if (zk_state == ZOO_CONNECTED_STATE || zk_state == ZOO_READONLY_STATE) {
        reg->zk_up = true;
        reg->probe_now = true;
    } else if (zk_state == ZOO_EXPIRED_SESSION_STATE || zk_state == ZOO_AUTH_FAILED_STATE) {
        reg->zk_up = false;
        reg->contact_session = 0;
    } else {
        reg->zk_up = false;
    }
    pthread_cond_broadcast(&reg->live_cv);
    ej__mutex_unlock(&reg->live_mu);
}

/* ZooKeeper's completion thread: record the answer, nothing else. */
static void probe_done(int rc, const struct Stat *stat, const void *data)
{
    (void)stat;
    struct probe *p = (struct probe *)data;
    ej_registry *reg = p->reg;
    ej__mutex_lock(&reg->live_mu);
    if (rc == ZOK || rc == ZNONODE) {
        if (p->session != reg->contact_session || p->sent_ms > reg->contact_ms) {
            reg->contact_ms = p->sent_ms;
            reg->contact_session = p->session;
            reg->contact_timeout_ms = p->timeout_ms;
        }
    }
    if (p->seq > reg->probe_answered)
        reg->probe_answered = p->seq;
    pthread_cond_broadcast(&reg->live_cv);
    ej__mutex_unlock(&reg->live_mu);
    free(p);
}

/* Send one probe on the current handle when it is connected (live_mu NOT
 * held: the read lock on the handle is taken). */
static void send_probe(ej_registry *reg, uint64_t seq, int64_t now)
{
    struct probe *p = malloc(sizeof(*p));
    if (!p)
        return;
    p->reg = reg;
    p->seq = seq;
    p->sent_ms = now;
    int rc = ZINVALIDSTATE;
    pthread_rwlock_rdlock(&reg->zh_lock);
    zhandle_t *zh = reg->zh;
    if (zh && zoo_state(zh) == ZOO_CONNECTED_STATE) {
        const clientid_t *cid = zoo_client_id(zh);
        p->session = cid ? cid->client_id : 0;
        p->timeout_ms = zoo_recv_timeout(zh);
        if (p->session != 0) {
            rc = zoo_aexists(zh, reg->prefix_len ? reg->prefix : "/", 0, probe_done, p);
        }
    }
    pthread_rwlock_unlock(&reg->zh_lock);
    if (rc != ZOK) {
        free(p);
        ej__mutex_lock(&reg->live_mu);
        if (seq > reg->probe_answered)
            reg->probe_answered = seq; /* nothing in flight */
        ej__mutex_unlock(&reg->live_mu);
    }
}

/* Call the fence listeners with (level, session) on the watchdog thread;
 * live_mu held on entry and on return (released meanwhile). Both checked. */
static void tell_locked(ej_registry *reg, ej_reg_fence level, int64_t session)
{
    EJ_ASSERT_HELD(&reg->live_mu);
    EJ_ASSERT_OWNER(&reg->live_owner);
    struct ej__listener *snap = NULL;
    size_t n = ej__listeners_snapshot(&reg->fence_fns, &snap);
    if (!snap)
        return;
    reg->fence_telling = true;
    int64_t silence = reg->contact_ms ? ej__mono_ms() - reg->contact_ms : -1;
    int timeout = timeout_locked(reg);
    ej__mutex_unlock(&reg->live_mu);
    static const char *const names[] = {"open", "hold (start nothing)", "cancel (stop items)"};
    EJ_LOG(level == EJ_REG_FENCE_OPEN ? EJ_LOG_INFO : EJ_LOG_WARN, "reg", 0,
           "fence of session 0x%llx: %s (last answer %lld ms ago, session timeout %d ms)",
           (unsigned long long)session, names[level], (long long)silence, timeout);
    for (size_t i = 0; i < n; i++) {
        ej__mutex_lock(&reg->live_mu);
        bool still = ej__listeners_has(&reg->fence_fns, snap[i].fn, snap[i].user);
        ej__mutex_unlock(&reg->live_mu);
        if (still)
            ((ej_reg_fence_fn)snap[i].fn)(reg, level, session, snap[i].user);
    }
    free(snap);
    ej__mutex_lock(&reg->live_mu);
    reg->fence_telling = false;
    pthread_cond_broadcast(&reg->live_cv);
}

/* The next moment (mono ms) the level of the contact's session can change
 * by itself, or INT64_MAX. live_mu held (checked). */
static int64_t next_threshold_locked(const ej_registry *reg, int64_t now)
{
    EJ_ASSERT_HELD(&reg->live_mu);
    if (reg->contact_session == 0)
        return INT64_MAX;
    int64_t t = timeout_locked(reg);
    int64_t hold = reg->contact_ms + t * EJ_REG_FENCE_HOLD_PERMILLE / 1000;
    int64_t cancel = reg->contact_ms + t * EJ_REG_FENCE_CANCEL_PERMILLE / 1000;
    if (hold > now)
        return hold;
    if (cancel > now)
        return cancel;
    return INT64_MAX;
}

static void wait_until_locked(ej_registry *reg, int64_t due)
{
    EJ_ASSERT_HELD(&reg->live_mu);
    if (due == INT64_MAX) {
        ej__mutex_wait(&reg->live_mu, &reg->live_cv);
        return;
    }
    struct timespec ts = ej__mono_timespec(due);
    ej__mutex_timedwait(&reg->live_mu, &reg->live_cv, &ts);
}

static void *live_main(void *arg)
{
    ej_registry *reg = arg;
    pthread_setname_np(pthread_self(), "ej-reg-live");
    ej__owner_set(&reg->live_owner);
    int64_t last_sent = 0;
    ej__mutex_lock(&reg->live_mu);
    while (!reg->live_stop) {
        int64_t now = ej__mono_ms();
        int64_t t = timeout_locked(reg);
        int64_t period = t / 6 > MIN_PERIOD_MS ? t / 6 : MIN_PERIOD_MS;
        bool room = reg->probe_seq - reg->probe_answered < MAX_INFLIGHT;
        /* Probes unanswered for a whole timeout are given up on. */
        bool due = reg->zk_up && (reg->probe_now || now - last_sent >= period) &&
                   (room || now - reg->probe_sent_ms >= t);
        if (due) {
            uint64_t seq = ++reg->probe_seq;
            reg->probe_sent_ms = now;
            reg->probe_now = false;
            last_sent = now;
            ej__mutex_unlock(&reg->live_mu);
            send_probe(reg, seq, now);
            ej__mutex_lock(&reg->live_mu);
            continue;
        }
        ej_reg_fence lvl = level_locked(reg, 0, now);
        int64_t sess = reg->contact_session;
        if ((int)lvl != reg->fence_told || sess != reg->fence_told_session) {
            reg->fence_told = (int)lvl;
            reg->fence_told_session = sess;
            tell_locked(reg, lvl, sess);
            continue;
        }
        int64_t next = next_threshold_locked(reg, now);
        /* Without room, the next probe waits for an answer (which wakes
         * this thread) or for the oldest to be given up on. */
        int64_t probe_at = room ? last_sent + period : reg->probe_sent_ms + t;
        if (reg->zk_up && probe_at < next)
            next = probe_at;
        wait_until_locked(reg, next);
    }
    ej__mutex_unlock(&reg->live_mu);
    ej__owner_clear(&reg->live_owner);
    return NULL;
}

int ej__reg_live_start(ej_registry *reg)
{
    int err = pthread_create(&reg->live_thread, NULL, live_main, reg);
    if (err)
        return -err;
    reg->live_started = true;
    return 0;
}

void ej__reg_live_stop(ej_registry *reg)
{
    if (!reg->live_started)
        return;
    ej__mutex_lock(&reg->live_mu);
    reg->live_stop = true;
    pthread_cond_broadcast(&reg->live_cv);
    ej__mutex_unlock(&reg->live_mu);
    pthread_join(reg->live_thread, NULL);
    reg->live_started = false;
}

void ej__reg_live_wait_contact(ej_registry *reg, int timeout_ms)
{
    int64_t deadline = ej__mono_ms() + timeout_ms;
    ej__mutex_lock(&reg->live_mu);
    while (level_locked(reg, 0, ej__mono_ms()) != EJ_REG_FENCE_OPEN && !reg->live_stop &&
           ej__mono_ms() < deadline)
        wait_until_locked(reg, ej__mono_ms() + 20 < deadline ? ej__mono_ms() + 20 : deadline);
    ej__mutex_unlock(&reg->live_mu);
}

int ej_registry_add_fence_listener(ej_registry *reg, ej_reg_fence_fn fn, void *user)
{
    if (!reg || !fn)
        return ej__reg_fail(EJ_EINVAL, "add_fence_listener: registry or callback is NULL");
    ej__mutex_lock(&reg->live_mu);
    int rc = ej__listeners_add(&reg->fence_fns, (ej__listener_fn)fn, user);
    ej__mutex_unlock(&reg->live_mu);
    if (rc == -EEXIST)
        return ej__reg_fail(EJ_EINVAL, "add_fence_listener: this listener is already added");
    if (rc != 0)
        return ej__reg_fail(rc, "add_fence_listener: out of memory");
    return 0;
}

int ej_registry_remove_fence_listener(ej_registry *reg, ej_reg_fence_fn fn, void *user)
{
    if (!reg)
        return ej__reg_fail(EJ_EINVAL, "remove_fence_listener: registry is NULL");
    ej__mutex_lock(&reg->live_mu);
    bool found = ej__listeners_remove(&reg->fence_fns, (ej__listener_fn)fn, user);
    /* A call being made right now may still be running it. */
    if (found && !(reg->live_started && pthread_equal(pthread_self(), reg->live_thread)))
        while (reg->fence_telling)
            ej__mutex_wait(&reg->live_mu, &reg->live_cv);
    ej__mutex_unlock(&reg->live_mu);
    return found ? 0 : ej__reg_fail(EJ_ENOTFOUND, "remove_fence_listener: no such listener");
}
