/* The bounded queue with a consumer thread (common/bqueue.h). */
#include <errno.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "common/bqueue.h"
#include "common/check.h"
#include "common/util.h"
#include "ejob/error.h"
#include "ejob/log.h"

struct ej__bqueue {
    struct ej__bqueue_opts o;
    ej__mutex mu;
    pthread_cond_t wake;    /* the consumer waits for work */
    pthread_cond_t done_cv; /* flushers wait for progress */
    void **ring;
    size_t head, count;
    uint64_t pushed, done, dropped, abandoned;
    uint64_t drop_logged;
    int64_t drop_logged_ms;
    bool woken;   /* a push or wake since the consumer last looked */
    bool closing; /* no new items */
    bool stop;    /* the thread exits once the queue is empty */
    bool abandon; /* the thread exits now */
    bool joined;
    ej__owner consumer;
    pthread_t th;
};

static void note_drop_locked(ej__bqueue *q, const char *why)
{
    EJ_ASSERT_HELD(&q->mu);
    q->dropped++;
    int64_t now = ej__mono_ms();
    if (q->drop_logged_ms != 0 && now - q->drop_logged_ms < q->o.drop_log_ms)
        return;
    char detail[600] = "";
    if (q->o.drop_detail)
        q->o.drop_detail(q->o.user, detail, sizeof detail);
    EJ_LOG(EJ_LOG_WARN, q->o.log_module, EJ_EAGAIN,
           "%s not kept (%s): %llu in all, %llu since the last report; %zu queued (capacity "
           "%zu)%s",
           q->o.what, why, (unsigned long long)q->dropped,
           (unsigned long long)(q->dropped - q->drop_logged), q->count, q->o.capacity, detail);
    q->drop_logged_ms = now;
    q->drop_logged = q->dropped;
}

static void *consumer_main(void *arg)
{
    ej__bqueue *q = arg;
    if (q->o.thread_name)
        pthread_setname_np(pthread_self(), q->o.thread_name);
    ej__owner_set(&q->consumer);
    ej__mutex_lock(&q->mu);
    int64_t sleep_ms = 0;
    for (;;) {
        if (q->abandon || (q->stop && q->count == 0))
            break;
        if (sleep_ms != 0 && !q->woken) {
            if (sleep_ms < 0) {
                ej__mutex_wait(&q->mu, &q->wake);
            } else {
                struct timespec ts = ej__mono_timespec_in(sleep_ms);
                ej__mutex_timedwait(&q->mu, &q->wake, &ts);
            }
            sleep_ms = 0;
            continue;
        }
        q->woken = false;
        ej__mutex_unlock(&q->mu);
        sleep_ms = q->o.step(q, q->o.user);
        ej__mutex_lock(&q->mu);
        /* Items queued and the step made progress: go again at once. */
        if (q->count > 0 && sleep_ms == 0)
            continue;
    }
    ej__mutex_unlock(&q->mu);
    ej__owner_clear(&q->consumer);
    return NULL;
}

int ej__bqueue_create(const struct ej__bqueue_opts *o, ej__bqueue **out)
{
    if (out == NULL)
        return EJ_EINVAL;
    *out = NULL;
    if (o == NULL || o->capacity == 0 || o->step == NULL || o->free_item == NULL)
        return EJ_EINVAL;
    ej__bqueue *q = calloc(1, sizeof *q);
    void **ring = calloc(o->capacity, sizeof *ring);
    if (q == NULL || ring == NULL) {
        free(q);
        free(ring);
        return EJ_ENOMEM;
    }
    q->o = *o;
    if (q->o.log_module == NULL)
        q->o.log_module = "queue";
    if (q->o.what == NULL)
        q->o.what = "item";
    q->ring = ring;
    ej__mutex_init(&q->mu);
    pthread_condattr_t a;
    pthread_condattr_init(&a);
    pthread_condattr_setclock(&a, CLOCK_MONOTONIC);
    pthread_cond_init(&q->wake, &a);
    pthread_cond_init(&q->done_cv, &a);
    pthread_condattr_destroy(&a);
    int rc = pthread_create(&q->th, NULL, consumer_main, q);
    if (rc != 0) {
        pthread_cond_destroy(&q->wake);
        pthread_cond_destroy(&q->done_cv);
        ej__mutex_destroy(&q->mu);
        free(q->ring);
        free(q);
        return -rc;
    }
    *out = q;
    return 0;
}

int ej__bqueue_push(ej__bqueue *q, void *item)
{
    if (q == NULL || item == NULL)
        return EJ_EINVAL;
    int rc = 0;
    ej__mutex_lock(&q->mu);
    if (q->closing) {
        rc = EJ_ECLOSED;
        note_drop_locked(q, "closing");
    } else if (q->count == q->o.capacity) {
        rc = EJ_EAGAIN;
        note_drop_locked(q, "queue full");
    } else {
        q->ring[(q->head + q->count) % q->o.capacity] = item;
        q->count++;
        q->pushed++;
        q->woken = true;
        pthread_cond_signal(&q->wake);
    }
    ej__mutex_unlock(&q->mu);
    return rc;
}

void ej__bqueue_note_drop(ej__bqueue *q, const char *why)
{
    ej__mutex_lock(&q->mu);
    note_drop_locked(q, why);
    ej__mutex_unlock(&q->mu);
}

size_t ej__bqueue_peek(ej__bqueue *q, void **items, size_t max)
{
    EJ_ASSERT_OWNER(&q->consumer);
    ej__mutex_lock(&q->mu);
    size_t n = q->count < max ? q->count : max;
    for (size_t i = 0; i < n; i++)
        items[i] = q->ring[(q->head + i) % q->o.capacity];
    ej__mutex_unlock(&q->mu);
    return n;
}

void ej__bqueue_pop(ej__bqueue *q, size_t n)
{
    EJ_ASSERT_OWNER(&q->consumer);
    void *gone[64];
    while (n > 0) {
        size_t k = n < 64 ? n : 64;
        ej__mutex_lock(&q->mu);
        EJ_ASSERT_MSG(k <= q->count, "pop of %zu with %zu queued", k, q->count);
        for (size_t i = 0; i < k; i++) {
            gone[i] = q->ring[q->head];
            q->ring[q->head] = NULL;
            q->head = (q->head + 1) % q->o.capacity;
        }
        q->count -= k;
        q->done += k;
        pthread_cond_broadcast(&q->done_cv);
        ej__mutex_unlock(&q->mu);
        for (size_t i = 0; i < k; i++)
            q->o.free_item(gone[i]);
        n -= k;
    }
}

void ej__bqueue_wake(ej__bqueue *q)
{
    ej__mutex_lock(&q->mu);
    q->woken = true;
    pthread_cond_signal(&q->wake);
    ej__mutex_unlock(&q->mu);
}

bool ej__bqueue_closing(ej__bqueue *q)
{
    ej__mutex_lock(&q->mu);
    bool c = q->closing;
    ej__mutex_unlock(&q->mu);
    return c;
}

/* Waits until done + abandoned reaches target, or the deadline. */
static int wait_done_locked(ej__bqueue *q, uint64_t target, int64_t timeout_ms)
{
    EJ_ASSERT_HELD(&q->mu);
    struct timespec ts = ej__mono_timespec_in(timeout_ms);
    while (q->done + q->abandoned < target) {
        if (timeout_ms < 0) {
            ej__mutex_wait(&q->mu, &q->done_cv);
        } else if (ej__mutex_timedwait(&q->mu, &q->done_cv, &ts) == ETIMEDOUT &&
                   q->done + q->abandoned < target) {
            return EJ_ETIMEDOUT;
        }
    }
    return 0;
}

int ej__bqueue_flush(ej__bqueue *q, int64_t timeout_ms)
{
    if (q == NULL)
        return EJ_EINVAL;
    /* The consumer would wait for itself. */
    EJ_ASSERT(!ej__owner_is_current(&q->consumer));
    ej__mutex_lock(&q->mu);
    int rc = wait_done_locked(q, q->pushed, timeout_ms);
    ej__mutex_unlock(&q->mu);
    return rc;
}

void ej__bqueue_stats(ej__bqueue *q, struct ej__bqueue_stats *out)
{
    memset(out, 0, sizeof *out);
    if (q == NULL)
        return;
    ej__mutex_lock(&q->mu);
    out->pushed = q->pushed;
    out->done = q->done;
    out->dropped = q->dropped;
    out->abandoned = q->abandoned;
    out->queued = q->count;
    ej__mutex_unlock(&q->mu);
}

size_t ej__bqueue_close(ej__bqueue *q, int64_t flush_ms)
{
    if (q == NULL || q->joined)
        return 0;
    EJ_ASSERT(!ej__owner_is_current(&q->consumer));
    ej__mutex_lock(&q->mu);
    q->closing = true;
    q->woken = true;
    pthread_cond_signal(&q->wake);
    if (wait_done_locked(q, q->pushed, flush_ms) != 0)
        q->abandon = true;
    q->stop = true;
    q->woken = true;
    pthread_cond_signal(&q->wake);
    ej__mutex_unlock(&q->mu);
    /* A step in progress ends by itself (its own timeouts). */
    pthread_join(q->th, NULL);
    q->joined = true;
    size_t left = q->count;
    while (q->count > 0) {
        q->o.free_item(q->ring[q->head]);
        q->ring[q->head] = NULL;
        q->head = (q->head + 1) % q->o.capacity;
        q->count--;
    }
    q->abandoned += left;
    q->dropped += left;
    return left;
}

void ej__bqueue_destroy(ej__bqueue *q)
{
    if (q == NULL)
        return;
    ej__bqueue_close(q, 0);
    pthread_cond_destroy(&q->wake);
    pthread_cond_destroy(&q->done_cv);
    ej__mutex_destroy(&q->mu);
    free(q->ring);
    free(q);
}
