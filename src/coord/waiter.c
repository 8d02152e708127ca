/*
 * The one-shot watch waiter shared by the latch (a predecessor's release)
 * and the distribute-once listeners (the winner's delete of
 * guarantee/{phase}): a thread sets a watch and waits, bounded, for it to
 * fire. The watch may fire after the waiter gave up, so the waiter is
 * reference counted: one reference for the thread, one for the watch.
 */
#include <pthread.h>
#include <stdatomic.h>
#include <stdlib.h>
#include <time.h>

#include "common/util.h"
#include "coord/internal.h"

struct ej__waiter {
    pthread_mutex_t mu;
    pthread_cond_t cv;
    bool fired;
    atomic_int refs;
};

ej__waiter *ej__waiter_new(void)
{
    ej__waiter *w = calloc(1, sizeof *w);
    if (w == NULL)
        return NULL;
    pthread_mutex_init(&w->mu, NULL);
    pthread_condattr_t ca;
    pthread_condattr_init(&ca);
    pthread_condattr_setclock(&ca, CLOCK_MONOTONIC);
    pthread_cond_init(&w->cv, &ca);
    pthread_condattr_destroy(&ca);
    atomic_init(&w->refs, 2);
    return w;
}

void ej__waiter_unref(ej__waiter *w)
{
    if (w == NULL || atomic_fetch_sub(&w->refs, 1) != 1)
        return;
    pthread_mutex_destroy(&w->mu);
    pthread_cond_destroy(&w->cv);
    free(w);
}

void ej__waiter_watch(ej_registry *reg, ej_reg_watch_event ev, const char *path, void *user)
{
    (void)reg;
    (void)ev;
    (void)path;
    ej__waiter *w = user;
    pthread_mutex_lock(&w->mu);
    w->fired = true;
    pthread_cond_broadcast(&w->cv);
    pthread_mutex_unlock(&w->mu);
    ej__waiter_unref(w);
}

bool ej__waiter_wait(ej__waiter *w, int64_t deadline_ms)
{
    pthread_mutex_lock(&w->mu);
    while (!w->fired) {
        int64_t left = deadline_ms - ej__mono_ms();
        if (left <= 0)
            break;
        struct timespec ts = ej__mono_timespec_in(left);
        pthread_cond_timedwait(&w->cv, &w->mu, &ts);
    }
    bool fired = w->fired;
    pthread_mutex_unlock(&w->mu);
    return fired;
}
