/*
 * A mutex compatible with Curator's LeaderLatch as ElasticJob uses it
 * (reference section 3): a new latch per critical section, released right
 * after it. Java and ejob contenders on the same latch path serialise.
 *
 * Two ways to wait for it, one protocol: ej__latch_acquire blocks its
 * thread on a one-shot watch (waiter.c); ej__latch_acquire_async
 * returns at once and continues on its owner's queue when
 * the watch or its timer fires. Both run the same steps below: look at the
 * children (latch_look), give up at the deadline (latch_past_deadline),
 * watch the predecessor (latch_watch_pred).
 */
#include <inttypes.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "common/util.h"
#include "coord/internal.h"
#include "reg/internal.h"
#include "ejob/error.h"
#include "ejob/log.h"

#define MOD "coord"

struct ej__latch {
    ej_registry *reg;
    char *dir;  /* latch path */
    char *node; /* own node path */
    char uuid[37];
    int64_t start;    /* ej__mono_ms when the acquisition began */
    int64_t deadline; /* ej__mono_ms when it gives up */
    bool warned;      /* the "waited longer than 2 s" warning is out */
    /* The children listed right behind the create of the own node
     * (create_node_listed), for the first look; NULL once used. */
    char **listed;
    size_t nlisted;
    /* Reads sent behind that listing (paths owned), and whether they were
     * made while this contender held the latch (its node the lowest in
     * that listing): ej__latch_first_reads. */
    struct ej_reg_read *pre;
    size_t npre;
    bool pre_held;
};

/* The outcomes of the shared steps (errors are negative). */
enum {
    LATCH_HELD = 1,   /* latch_look: the own node is the lowest */
    LATCH_BEHIND = 2, /* latch_look: *pred is the node to wait for */
    PRED_WATCHED = 3, /* latch_watch_pred: wait for the watch */
    PRED_GONE = 4,    /* latch_watch_pred: no watch set; look again */
    PRED_REMOVED = 5, /* latch_watch_pred: watch set, node deleted; look again */
};

/* The path the own node is created at: the latch's, then the protection
 * prefix with its UUID (the server appends the sequence). Caller frees. */
static char *own_prefix_path(const struct ej__latch *l)
{
    char prefix[EJ__LATCH_PREFIX_LEN + 1];
    ej__layout_latch_node_prefix(l->uuid, prefix, sizeof prefix);
    return ej__asprintf("%s/%s", l->dir, prefix);
}

/* Create the own node (Curator: withProtection, EPHEMERAL_SEQUENTIAL).
 * Missing parents are made persistent, where Curator's
 * creatingParentContainersIfNeeded makes containers: the server reaps an
 * empty container within a minute, so every election and every failover
 * after a quiet minute paid a refused create and the parents again (2 to
 * 4 writes more on the way from a crash to its failover, each 300 ms in a
 * fleet's expiry burst). Either kind serves Java contenders alike. After a
 * connection loss the node may exist: protection finds it by its UUID. */
static int create_node(struct ej__latch *l)
{
    char *path = own_prefix_path(l);
    if (path == NULL)
        return EJ_ENOMEM;
    int rc = EJ_ECONNLOSS;
    for (int attempt = 0; attempt < 5; attempt++) {
        char *actual = NULL;
        rc = ej_registry_create_node(l->reg, path, NULL, 0, EJ_REG_EPHEMERAL_SEQUENTIAL,
                                     EJ_REG_CREATE_PARENTS, &actual);
        if (rc == 0) {
            free(l->node);
            l->node = actual;
            break;
        }
        if (rc == EJ_ENONODE)
            continue; /* a parent deleted meanwhile (a job being removed, say) */
        if (rc != EJ_ECONNLOSS)
            break;
        char **names = NULL;
        size_t n = 0;
        if (ej_registry_children(l->reg, l->dir, EJ_REG_UNSORTED, &names, &n) == 0) {
            long i = ej__layout_latch_find(names, n, l->uuid);
            if (i >= 0) {
                free(l->node);
                l->node = ej__asprintf("%s/%s", l->dir, names[i]);
                ej_registry_free_names(names);
                rc = l->node ? 0 : EJ_ENOMEM;
                break;
            }
            ej_registry_free_names(names);
        }
    }
    free(path);
    return rc;
}

/* The own node found by its UUID after a create's answer was lost: 0 with
 * l->node set, EJ_ENONODE when the create did not happen, or an error. */
static int find_own(struct ej__latch *l)
{
    char **names = NULL;
    size_t n = 0;
    int rc = ej_registry_children(l->reg, l->dir, EJ_REG_UNSORTED, &names, &n);
    if (rc != 0)
        return rc;
    long i = ej__layout_latch_find(names, n, l->uuid);
    rc = EJ_ENONODE;
    if (i >= 0) {
        free(l->node);
        l->node = ej__asprintf("%s/%s", l->dir, names[i]);
        rc = l->node ? 0 : EJ_ENOMEM;
    }
    ej_registry_free_names(names);
    return rc;
}

/* The first create of the own node, with the latch's children listed right
 * behind it (one round trip where the create and the first look took two:
 * the way from a crash to its failover, and every election, pass this
 * latch; a missing parent is created, the nearest first, and the two are
 * sent again). After a lost answer, protection finds the node, or
 * create_node makes it. */
static int create_node_listed(struct ej__latch *l)
{
    char *path = own_prefix_path(l);
    if (path == NULL)
        return EJ_ENOMEM;
    char *actual = NULL;
    int rc = ej__reg_create_then_list(l->reg, path, EJ_REG_EPHEMERAL_SEQUENTIAL, l->dir, true,
                                      &actual, &l->listed, &l->nlisted, l->pre, l->npre);
    free(path);
    if (actual != NULL) { /* created; a failed listing is done again by the look */
        free(l->node);
        l->node = actual;
        return 0;
    }
    if (rc == EJ_ECONNLOSS && (rc = find_own(l)) != EJ_ENONODE)
        return rc;
    return rc == EJ_ENONODE ? create_node(l) : rc;
}

static void delete_node(struct ej__latch *l)
{
    if (l->node == NULL)
        return;
    /* Curator's delete().guaranteed(): retried until it succeeds; ours is
     * retried by the registry, and the session's end removes it anyway. */
    int rc = ej_registry_delete(l->reg, l->node, -1);
    if (rc != 0 && rc != EJ_ENONODE)
        EJ_LOG(EJ_LOG_WARN, MOD, rc, "latch: cannot delete %s: %s", l->node,
               ej_registry_errmsg(l->reg));
    free(l->node);
    l->node = NULL;
}

static struct ej__latch *latch_new(ej_registry *reg, const char *latch_path, int timeout_ms)
{
    struct ej__latch *l = calloc(1, sizeof *l);
    if (l == NULL)
        return NULL;
    l->reg = reg;
    l->dir = strdup(latch_path);
    if (l->dir == NULL) {
        free(l);
        return NULL;
    }
    ej__layout_uuid4(l->uuid);
    l->start = ej__mono_ms();
    l->deadline = l->start + (timeout_ms > 0 ? timeout_ms : 0);
    return l;
}

/* Delete the own node (if any) and free. */
static void latch_free(struct ej__latch *l)
{
    delete_node(l);
    ej_registry_free_names(l->listed);
    for (size_t i = 0; i < l->npre; i++)
        free((char *)l->pre[i].path);
    ej_registry_reads_fini(l->pre, l->npre);
    free(l->pre);
    free(l->dir);
    free(l);
}

bool ej__latch_first_reads(const ej__latch *l, const struct ej_reg_read **reads, size_t *n)
{
    *reads = l && l->pre_held ? l->pre : NULL;
    *n = l && l->pre_held ? l->npre : 0;
    return l && l->pre_held;
}

/* One look at the children: LATCH_HELD when the own node is the lowest;
 * LATCH_BEHIND with *pred the path of its immediate predecessor (caller
 * frees); or an error. A parent gone (a job removed), or an own node gone (a
 * replaced session), creates the node again (Curator's reset()). */
static int latch_look(struct ej__latch *l, char **pred)
{
    *pred = NULL;
    for (;;) {
        char **names = l->listed;
        size_t n = l->nlisted;
        bool first = names != NULL && l->node != NULL && !l->pre_held;
        int rc = 0;
        l->listed = NULL;
        if (names == NULL)
            rc = ej_registry_children(l->reg, l->dir, EJ_REG_UNSORTED, &names, &n);
        if (rc == EJ_ENONODE) {
            /* The parent is gone, so our node is too: start over. */
            rc = create_node(l);
            if (rc != 0)
                return rc;
            continue;
        }
        if (rc != 0)
            return rc;
        ej__layout_latch_sort(names, n);
        const char *own = strrchr(l->node, '/') + 1;
        long idx = -1;
        for (size_t i = 0; i < n; i++)
            if (strcmp(names[i], own) == 0)
                idx = (long)i;
        if (idx < 0) {
            ej_registry_free_names(names);
            rc = create_node(l);
            if (rc != 0)
                return rc;
            continue;
        }
        if (idx == 0) {
            l->pre_held = first; /* the reads behind the listing are the holder's */
            ej_registry_free_names(names);
            EJ_LOG(EJ_LOG_DEBUG, MOD, 0, "latch %s acquired as %s after %" PRId64 " ms", l->dir,
                   own, ej__mono_ms() - l->start);
            return LATCH_HELD;
        }
        *pred = ej__asprintf("%s/%s", l->dir, names[idx - 1]);
        ej_registry_free_names(names);
        return *pred != NULL ? LATCH_BEHIND : EJ_ENOMEM;
    }
}

/* True (and logged) when the deadline passed or `expired` says the timer
 * ran: the acquisition gives up instead of waiting for pred. */
static bool latch_past_deadline(const struct ej__latch *l, const char *pred, bool expired)
{
    int64_t now = ej__mono_ms();
    if (!expired && now < l->deadline)
        return false;
    EJ_LOG(EJ_LOG_WARN, MOD, EJ_ETIMEDOUT,
           "latch %s: gave up after %" PRId64 " ms waiting for %s to be released", l->dir,
           now - l->start, pred);
    return true;
}

/* Watch pred's release with fn(user) (Curator: getData with a watcher).
 * PRED_WATCHED: wait for the watch; PRED_GONE: pred vanished, no watch was
 * set (Curator: NONODE from getData -> getChildren again); PRED_REMOVED:
 * pred was persistent and is deleted, the watch is set and will fire; or an
 * error (no watch set). */
static int latch_watch_pred(struct ej__latch *l, const char *pred, ej_reg_watch_fn fn, void *user)
{
    struct ej_node_stat st;
    int rc = ej_registry_get_watch(l->reg, pred, fn, user, NULL, NULL, &st);
    if (rc == EJ_ENONODE)
        return PRED_GONE;
    if (rc != 0)
        return rc;
    if (st.ephemeral_owner == 0) {
        /* A persistent node can never be released by a latch client:
         * something that is not a contender left it (EJ#730). */
        EJ_LOG(EJ_LOG_WARN, MOD, 0,
               "latch %s: deleting %s, a persistent node no contender can release", l->dir, pred);
        ej_registry_delete(l->reg, pred, -1);
        return PRED_REMOVED;
    }
    int64_t waited = ej__mono_ms() - l->start;
    if (!l->warned && waited > 2000) {
        l->warned = true;
        EJ_LOG(EJ_LOG_WARN, MOD, 0,
               "latch %s: waited %" PRId64 " ms for %s (session 0x%" PRIx64 ") to release it",
               l->dir, waited, pred, (uint64_t)st.ephemeral_owner);
    } else {
        EJ_LOG(EJ_LOG_DEBUG, MOD, 0, "latch %s: waiting for %s", l->dir, pred);
    }
    return PRED_WATCHED;
}

int ej__latch_acquire(ej_registry *reg, const char *latch_path, int timeout_ms, ej__latch **out)
{
    return ej__latch_acquire_unless(reg, latch_path, timeout_ms, NULL, NULL, out);
}

/* How often a blocked acquisition asks whether it is still needed. */
#define LATCH_UNNEEDED_POLL_MS 50

/* Wait for the predecessor's watch; false when unneeded(arg) said the
 * latch is no longer wanted. */
static bool wait_pred(struct ej__latch *l, ej__waiter *w, bool (*unneeded)(void *), void *arg)
{
    if (unneeded == NULL) {
        ej__waiter_wait(w, l->deadline);
        return true;
    }
    for (;;) {
        int64_t until = ej__mono_ms() + LATCH_UNNEEDED_POLL_MS;
        if (ej__waiter_wait(w, until < l->deadline ? until : l->deadline))
            return true;
        if (unneeded(arg))
            return false;
        if (ej__mono_ms() >= l->deadline)
            return true;
    }
}

int ej__latch_acquire_unless(ej_registry *reg, const char *latch_path, int timeout_ms,
                             bool (*unneeded)(void *), void *arg, ej__latch **out)
{
    if (reg == NULL || latch_path == NULL || out == NULL)
        return EJ_EINVAL;
    *out = NULL;
    if (ej_registry_on_dispatch_thread(reg))
        return EJ_EINVAL;
    struct ej__latch *l = latch_new(reg, latch_path, timeout_ms);
    if (l == NULL)
        return EJ_ENOMEM;
    int rc = create_node_listed(l);
    while (rc == 0) {
        char *pred = NULL;
        rc = latch_look(l, &pred);
        if (rc == LATCH_HELD) {
            *out = l;
            return 0;
        }
        if (rc < 0)
            break;
        if (latch_past_deadline(l, pred, false)) {
            free(pred);
            rc = EJ_ETIMEDOUT;
            break;
        }
        ej__waiter *w = ej__waiter_new();
        if (w == NULL) {
            free(pred);
            rc = EJ_ENOMEM;
            break;
        }
        rc = latch_watch_pred(l, pred, ej__waiter_watch, w);
        free(pred);
        if (rc == PRED_GONE || rc < 0)
            ej__waiter_unref(w); /* no watch was set: its reference goes too */
        else if (rc == PRED_WATCHED && !wait_pred(l, w, unneeded, arg))
            rc = EJ_EAGAIN; /* not wanted any more: the own node goes */
        ej__waiter_unref(w);
        if (rc > 0)
            rc = 0; /* look again */
    }
    latch_free(l);
    return rc;
}

void ej__latch_release(ej__latch *l)
{
    if (l != NULL)
        latch_free(l);
}

const char *ej__latch_node(const ej__latch *l)
{
    return l ? l->node : NULL;
}

/* ------------------------------------------------------------------------ */
/* The acquisition that does not block: a wait is a watch and a timer, and
 * what follows runs as a continuation on the owner's queue.
 *
 * Who may touch what. The thread running a step (the caller for the first,
 * the owner for the others) owns the non-atomic fields until it publishes
 * a wait (async_publish). From then on a wake-up (watch or timer, on the
 * dispatch thread) claims the wait by swapping `waiting` from its
 * generation to 0 (one CAS, so exactly one of them continues a step; a
 * stale one does nothing) and posts the next step, which owns the fields
 * again. The publishing thread touches only atomics after publishing. */

struct latch_async {
    ej_registry *reg;
    struct ej__latch *l; /* NULL once handed to done */
    ej__latch_post_fn post;
    void *post_arg;
    ej__latch_done_fn done;
    void *arg;
    int result;       /* a first step's result, for async_deliver */
    uint64_t gen;     /* the last wait step's generation (step owner) */
    bool timer_armed; /* (step owner) */
    /* The running step, each pending watch, the timer and a posted
     * continuation hold one reference each. */
    atomic_int refs;
    _Atomic uint64_t waiting; /* the published wait step, 0 when none */
    _Atomic uint64_t fired;   /* the greatest generation whose watch fired */
    atomic_bool expired;      /* the timer ran */
    atomic_bool cancelled;    /* ej__latch_wait_cancel was called */
    atomic_bool finished;     /* done was called */
};

/* One watch's reference: which wait step it wakes. */
struct latch_wake {
    struct latch_async *a;
    uint64_t gen;
};

static void async_ref(struct latch_async *a)
{
    atomic_fetch_add(&a->refs, 1);
}

static void async_unref(struct latch_async *a)
{
    if (atomic_fetch_sub(&a->refs, 1) != 1)
        return;
    EJ_ASSERT(atomic_load(&a->finished) && a->l == NULL);
    free(a);
}

/* Hand the result to done, exactly once. rc != 0 deletes the own node. */
static void async_finish(struct latch_async *a, int rc)
{
    EJ_ASSERT_MSG(!atomic_exchange(&a->finished, true), "latch %s: done called twice",
                  a->l ? a->l->dir : "?");
    struct ej__latch *l = a->l;
    a->l = NULL;
    if (rc != 0) {
        latch_free(l);
        l = NULL;
    }
    a->done(a->arg, l, rc);
}

static void async_continue(void *task);

/* Dispatch thread: a wake-up for wait step gen. Claims it (or does nothing
 * when another wake-up did, or the step is stale) and posts the next step.
 * When post refuses, the owner is closing: the acquisition ends here. */
static void async_claim(struct latch_async *a, uint64_t gen)
{
    if (gen == 0 || !atomic_compare_exchange_strong(&a->waiting, &gen, 0))
        return;
    async_ref(a);
    if (a->post(a->post_arg, async_continue, a) == 0)
        return;
    atomic_fetch_sub(&a->refs, 1); /* never posted; the wake-up's own still holds */
    EJ_LOG(EJ_LOG_DEBUG, MOD, EJ_ECLOSED, "latch %s: the owner refused the wait's continuation",
           a->l->dir);
    /* The one synchronous call on the dispatch thread: the registry has no
     * asynchronous delete, and the own node must not block the other
     * contenders until the session ends. One delete, only when closing. */
    async_finish(a, EJ_ECLOSED);
}

static void async_watch(ej_registry *reg, ej_reg_watch_event ev, const char *path, void *user)
{
    (void)reg;
    (void)ev;
    (void)path;
    struct latch_wake *wk = user;
    struct latch_async *a = wk->a;
    uint64_t seen = atomic_load(&a->fired);
    while (seen < wk->gen && !atomic_compare_exchange_weak(&a->fired, &seen, wk->gen))
        ;
    async_claim(a, wk->gen);
    free(wk);
    async_unref(a);
}

static void async_timer(ej_registry *reg, void *user)
{
    (void)reg;
    struct latch_async *a = user;
    atomic_store(&a->expired, true);
    async_claim(a, atomic_load(&a->waiting));
    async_unref(a);
}

/* Publish wait step gen: true when a wake-up now owns what follows (the
 * caller returns at once); false when its watch fired or the timer ran
 * before the publication could be seen, and the caller goes on. Each side
 * writes its own flag before reading the other's (sequentially consistent
 * atomics), so a wake-up that came early is never lost. */
static bool async_publish(struct latch_async *a, uint64_t gen)
{
    atomic_store(&a->waiting, gen);
    if (atomic_load(&a->fired) < gen && !atomic_load(&a->expired) &&
        !atomic_load(&a->cancelled))
        return true;
    return !atomic_compare_exchange_strong(&a->waiting, &gen, 0);
}

/* The timer that ends the wait at the deadline even when no watch fires:
 * one per acquisition, armed at its first wait. */
static int async_arm_timer(struct latch_async *a)
{
    int64_t left = a->l->deadline - ej__mono_ms();
    async_ref(a);
    int rc = ej_registry_post_after(a->reg, left > 0 ? (int)left : 0, async_timer, a);
    if (rc != 0) {
        atomic_fetch_sub(&a->refs, 1);
        return rc;
    }
    a->timer_armed = true;
    return 0;
}

/* Run the protocol until it ends (true, *result set; the caller delivers
 * it) or waits (false: a wake-up continues; touch nothing of a). */
static bool async_step(struct latch_async *a, int *result)
{
    struct ej__latch *l = a->l;
    for (;;) {
        if (atomic_load(&a->cancelled)) {
            *result = EJ_EAGAIN; /* not wanted any more: the own node goes */
            return true;
        }
        char *pred = NULL;
        int rc = latch_look(l, &pred);
        if (rc == LATCH_HELD || rc < 0) {
            *result = rc < 0 ? rc : 0;
            return true;
        }
        if (latch_past_deadline(l, pred, atomic_load(&a->expired))) {
            free(pred);
            *result = EJ_ETIMEDOUT;
            return true;
        }
        rc = a->timer_armed ? 0 : async_arm_timer(a);
        struct latch_wake *wk = rc == 0 ? malloc(sizeof *wk) : NULL;
        if (wk == NULL) {
            free(pred);
            *result = rc != 0 ? rc : EJ_ENOMEM;
            return true;
        }
        *wk = (struct latch_wake){a, ++a->gen};
        async_ref(a);
        rc = latch_watch_pred(l, pred, async_watch, wk);
        free(pred);
        if (rc == PRED_GONE || rc < 0) {
            free(wk); /* no watch was set */
            atomic_fetch_sub(&a->refs, 1);
        }
        if (rc < 0) {
            *result = rc;
            return true;
        }
        if (rc == PRED_WATCHED && async_publish(a, a->gen))
            return false;
    }
}

/* Owner thread: the step after a wake-up. */
static void async_continue(void *task)
{
    struct latch_async *a = task;
    EJ_ASSERT_MSG(!ej_registry_on_dispatch_thread(a->reg),
                  "a latch continuation must run on its owner's thread");
    int result = 0;
    if (async_step(a, &result))
        async_finish(a, result);
    async_unref(a);
}

/* Owner thread: a first step's result. */
static void async_deliver(void *task)
{
    struct latch_async *a = task;
    async_finish(a, a->result);
    async_unref(a);
}

int ej__latch_acquire_async(ej_registry *reg, const char *latch_path, int timeout_ms,
                            ej__latch_post_fn post, void *post_arg, ej__latch_done_fn done,
                            void *arg)
{
    return ej__latch_acquire_async_w(reg, latch_path, timeout_ms, post, post_arg, done, arg, NULL);
}

void ej__latch_wait_cancel(ej__latch_wait *w)
{
    if (w == NULL)
        return;
    atomic_store(&w->cancelled, true);
    async_claim(w, atomic_load(&w->waiting));
}

void ej__latch_wait_put(ej__latch_wait *w)
{
    if (w != NULL)
        async_unref(w);
}

int ej__latch_acquire_async_w(ej_registry *reg, const char *latch_path, int timeout_ms,
                              ej__latch_post_fn post, void *post_arg, ej__latch_done_fn done,
                              void *arg, ej__latch_wait **wait)
{
    return ej__latch_acquire_async_r(reg, latch_path, timeout_ms, post, post_arg, done, arg, wait,
                                     NULL, 0);
}

/* Frees n paths and their array. */
static void free_paths(char **paths, size_t n)
{
    for (size_t i = 0; paths != NULL && i < n; i++)
        free(paths[i]);
    free(paths);
}

int ej__latch_acquire_async_r(ej_registry *reg, const char *latch_path, int timeout_ms,
                              ej__latch_post_fn post, void *post_arg, ej__latch_done_fn done,
                              void *arg, ej__latch_wait **wait, char **read_paths, size_t nreads)
{
    if (wait != NULL)
        *wait = NULL;
    if (reg == NULL || latch_path == NULL || post == NULL || done == NULL ||
        ej_registry_on_dispatch_thread(reg)) {
        free_paths(read_paths, nreads);
        return EJ_EINVAL;
    }
    struct latch_async *a = calloc(1, sizeof *a);
    struct ej_reg_read *pre = nreads ? calloc(nreads, sizeof *pre) : NULL;
    if (a == NULL || (nreads && pre == NULL)) {
        free(a);
        free(pre);
        free_paths(read_paths, nreads);
        return EJ_ENOMEM;
    }
    a->reg = reg;
    a->post = post;
    a->post_arg = post_arg;
    a->done = done;
    a->arg = arg;
    atomic_init(&a->refs, 1); /* the first step's */
    a->l = latch_new(reg, latch_path, timeout_ms);
    if (a->l == NULL) {
        free(a);
        free(pre);
        free_paths(read_paths, nreads);
        return EJ_ENOMEM;
    }
    for (size_t i = 0; i < nreads; i++)
        pre[i].path = read_paths[i]; /* the latch frees them */
    free(read_paths);
    a->l->pre = pre;
    a->l->npre = nreads;
    int rc = create_node_listed(a->l);
    bool ended = rc != 0 || async_step(a, &rc);
    if (ended) {
        a->result = rc;
        async_ref(a);
        if (post(post_arg, async_deliver, a) != 0) {
            /* Nothing was started for the caller: no done. */
            atomic_fetch_sub(&a->refs, 1);
            atomic_store(&a->finished, true);
            latch_free(a->l);
            a->l = NULL;
            async_unref(a);
            return EJ_ECLOSED;
        }
    }
    if (wait != NULL) {
        async_ref(a);
        *wait = a;
    }
    async_unref(a);
    return 0;
}
