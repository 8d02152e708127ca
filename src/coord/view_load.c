/*
 * Loading the sharding view: arming every wanted watch at once, at
 * start-up, after a new session, at a repair and when failover is switched
 * on or off. The loads run on the registry's dispatch thread (posted there
 * when asked from another thread); a load of many items shares the work
 * with loader threads ("ej-view-load") that it joins before it returns.
 * Threads: view.c's opening comment.
 */
#include <pthread.h>
#include <stdatomic.h>
#include <stdlib.h>

#include "coord/view_impl.h"
#include "ejob/error.h"

/* Arming many items one request at a time is slow (a synchronous round
 * trip each); a few threads pipeline them on the one connection. The
 * dispatch thread waits for them, so events still apply in order. */
struct bulk {
    struct ej__view *v;
    const int *items; /* NULL: every present item below n */
    size_t n;
    atomic_size_t next;
};

static void arm_one(struct ej__view *v, int item)
{
    ej__mutex_lock(&v->mu);
    uint8_t todo = 0;
    if ((size_t)item < v->cap && v->items[item].present && !v->closed) {
        v->items[item].want = ej__view_want_locked(v, &v->items[item]);
        ej__view_drop_unwanted_locked(v, &v->items[item], v->items[item].want);
        todo = (uint8_t)(v->items[item].want & ~v->items[item].armed);
    }
    ej__mutex_unlock(&v->mu);
    for (int k = 0; k < EJ__VK_COUNT; k++)
        if (todo & (1u << k))
            ej__view_refresh_item(v, item, k);
}

/* Arms items by the shared index until none is left. The dispatch thread
 * runs it too, beside the loaders. */
static void arm_shared(struct bulk *b)
{
    size_t i;
    while ((i = atomic_fetch_add(&b->next, 1)) < b->n)
        arm_one(b->v, b->items ? b->items[i] : (int)i);
}

static void *loader_main(void *p)
{
    pthread_setname_np(pthread_self(), "ej-view-load");
    arm_shared(p);
    return NULL;
}

/* At most BULK_THREADS - 1 loaders beside the dispatch thread, one for
 * each BULK_MIN items. */
#define BULK_THREADS 8
#define BULK_MIN 256

void ej__view_arm_bulk(struct ej__view *v, const int *items, size_t n)
{
    struct bulk b = {.v = v, .items = items, .n = n};
    atomic_init(&b.next, 0);
    pthread_t th[BULK_THREADS];
    int nth = 0;
    if (n >= BULK_MIN)
        for (; nth < BULK_THREADS - 1 && (size_t)(nth + 1) * BULK_MIN <= n; nth++)
            if (pthread_create(&th[nth], NULL, loader_main, &b) != 0)
                break;
    arm_shared(&b);
    for (int i = 0; i < nth; i++)
        pthread_join(th[i], NULL);
}

/* Arm every wanted path that has no watch. Dispatch thread. */
static void rearm_all(struct ej__view *v)
{
    ej__view_refresh_sharding(v);
    ej__mutex_lock(&v->mu);
    size_t cap = v->cap;
    ej__mutex_unlock(&v->mu);
    ej__view_arm_bulk(v, NULL, cap);
}

static void repair_task(ej_registry *reg, void *user)
{
    (void)reg;
    struct ej__view *v = user;
    ej__mutex_lock(&v->mu);
    v->repair_posted = false;
    ej__mutex_unlock(&v->mu);
    if (ej__view_enter(v)) {
        if (ej_registry_is_connected(v->reg))
            rearm_all(v);
        else
            ej__view_schedule_repair(v);
        ej__view_done(v);
    }
    ej__view_unref(v);
}

void ej__view_schedule_repair(struct ej__view *v)
{
    ej__mutex_lock(&v->mu);
    bool post = !v->closed && !v->repair_posted;
    if (post)
        v->repair_posted = true;
    ej__mutex_unlock(&v->mu);
    if (!post)
        return;
    atomic_fetch_add(&v->refs, 1);
    if (ej_registry_post_after(v->reg, 1000, repair_task, v) != 0) {
        ej__mutex_lock(&v->mu);
        v->repair_posted = false;
        ej__mutex_unlock(&v->mu);
        ej__view_unref(v);
    }
}

struct sync_task {
    struct ej__view *v;
    int what; /* 0 load, 1 failover on, 2 failover off, 3 new session */
};

static void view_task(ej_registry *reg, void *user)
{
    (void)reg;
    struct sync_task *st = user;
    struct ej__view *v = st->v;
    if (ej__view_enter(v)) {
        ej__mutex_lock(&v->mu);
        if (st->what == 1 || st->what == 2)
            v->failover = st->what == 1;
        ej__mutex_unlock(&v->mu);
        rearm_all(v);
        ej__view_done(v);
    }
    free(st);
    ej__view_unref(v);
}

static int post_task(struct ej__view *v, int what)
{
    struct sync_task *st = malloc(sizeof *st);
    if (st == NULL)
        return EJ_ENOMEM;
    st->v = v;
    st->what = what;
    atomic_fetch_add(&v->refs, 1);
    int rc = ej_registry_post(v->reg, view_task, st);
    if (rc != 0) {
        free(st);
        ej__view_unref(v);
    }
    return rc;
}

int ej__view_start(ej__view *v)
{
    if (v == NULL)
        return EJ_EINVAL;
    if (ej_registry_on_dispatch_thread(v->reg)) {
        if (ej__view_enter(v)) {
            rearm_all(v);
            ej__view_done(v);
        }
        return 0;
    }
    int rc = post_task(v, 0);
    if (rc != 0)
        return rc;
    /* The load runs on the dispatch thread; wait for it (a large job may
     * take a while: one read per item). */
    for (;;) {
        rc = ej_registry_barrier(v->reg, 10000);
        if (rc != EJ_ETIMEDOUT)
            return rc;
    }
}

void ej__view_expect_absent(ej__view *v)
{
    if (v == NULL)
        return;
    ej__mutex_lock(&v->mu);
    v->expect_absent = true;
    ej__mutex_unlock(&v->mu);
}

void ej__view_set_failover(ej__view *v, bool on)
{
    if (v == NULL)
        return;
    ej__mutex_lock(&v->mu);
    bool same = v->failover == on;
    ej__mutex_unlock(&v->mu);
    if (!same)
        post_task(v, on ? 1 : 2);
}

void ej__view_on_new_session(ej__view *v)
{
    if (v == NULL)
        return;
    atomic_store(&v->offline_until, 0);
    ej__mutex_lock(&v->mu);
    v->gen++;
    v->sharding_armed = false;
    v->needs_reload = false;
    for (size_t i = 0; i < v->cap; i++)
        v->items[i].armed = 0;
    ej__mutex_unlock(&v->mu);
    if (ej_registry_on_dispatch_thread(v->reg) && ej__view_enter(v)) {
        rearm_all(v);
        ej__view_done(v);
    } else if (!ej_registry_on_dispatch_thread(v->reg)) {
        post_task(v, 3);
    }
}

void ej__view_repair(ej__view *v)
{
    if (v == NULL)
        return;
    ej__mutex_lock(&v->mu);
    bool reload = v->needs_reload;
    ej__mutex_unlock(&v->mu);
    if (reload) {
        ej__view_on_new_session(v);
        return;
    }
    if (ej_registry_on_dispatch_thread(v->reg) && ej__view_enter(v)) {
        rearm_all(v);
        ej__view_done(v);
    } else if (!ej_registry_on_dispatch_thread(v->reg)) {
        post_task(v, 0);
    }
}
