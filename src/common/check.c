/* Checked invariants and the mutex that knows its holder (common/check.h). */
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "common/check.h"
#include "ejob/log.h"

static _Atomic uint64_t next_thread_id = 1;
static _Thread_local uint64_t my_thread_id;
/* A failed check inside the logger must not recurse into it. */
static _Thread_local bool failing;

uint64_t ej__thread_id(void)
{
    if (my_thread_id == 0)
        my_thread_id = atomic_fetch_add_explicit(&next_thread_id, 1, memory_order_relaxed);
    return my_thread_id;
}

void ej__assert_fail(const char *file, int line, const char *expr, const char *fmt, ...)
{
    char why[512] = "";
    if (fmt != NULL) {
        va_list ap;
        va_start(ap, fmt);
        vsnprintf(why, sizeof why, fmt, ap);
        va_end(ap);
    }
    char msg[1024];
    int n = snprintf(msg, sizeof msg, "%s:%d: assertion failed: %s%s%s\n", file, line, expr,
                     why[0] ? ": " : "", why);
    if (n < 0)
        n = 0;
    if ((size_t)n >= sizeof msg)
        n = (int)sizeof msg - 1;
    /* stderr first: it works even when the log is what broke. */
    ssize_t w = write(STDERR_FILENO, msg, (size_t)n);
    (void)w;
    if (!failing) {
        failing = true;
        msg[n > 0 ? n - 1 : 0] = '\0';
        EJ_LOG(EJ_LOG_ERROR, "assert", 0, "%s", msg);
    }
    abort();
}

void ej__mutex_init(ej__mutex *mu)
{
    ej__mutex_init_attr(mu, NULL);
}

void ej__mutex_init_attr(ej__mutex *mu, const pthread_mutexattr_t *attr)
{
    pthread_mutex_init(&mu->m, attr);
    atomic_init(&mu->holder, 0);
}

void ej__mutex_destroy(ej__mutex *mu)
{
    EJ_ASSERT(atomic_load_explicit(&mu->holder, memory_order_relaxed) == 0);
    pthread_mutex_destroy(&mu->m);
}

void ej__mutex_lock(ej__mutex *mu)
{
    uint64_t me = ej__thread_id();
    /* A default mutex locked twice by one thread deadlocks silently. */
    EJ_ASSERT_MSG(atomic_load_explicit(&mu->holder, memory_order_relaxed) != me,
                  "mutex locked twice by one thread");
    pthread_mutex_lock(&mu->m);
    atomic_store_explicit(&mu->holder, me, memory_order_relaxed);
}

void ej__mutex_unlock(ej__mutex *mu)
{
    EJ_ASSERT_MSG(ej__mutex_is_held(mu), "unlock of a mutex this thread does not hold");
    atomic_store_explicit(&mu->holder, 0, memory_order_relaxed);
    pthread_mutex_unlock(&mu->m);
}

int ej__mutex_wait(ej__mutex *mu, pthread_cond_t *cv)
{
    EJ_ASSERT_HELD(mu);
    uint64_t me = ej__thread_id();
    atomic_store_explicit(&mu->holder, 0, memory_order_relaxed);
    int rc = pthread_cond_wait(cv, &mu->m);
    atomic_store_explicit(&mu->holder, me, memory_order_relaxed);
    return rc;
}

int ej__mutex_timedwait(ej__mutex *mu, pthread_cond_t *cv, const struct timespec *abs)
{
    EJ_ASSERT_HELD(mu);
    uint64_t me = ej__thread_id();
    atomic_store_explicit(&mu->holder, 0, memory_order_relaxed);
    int rc = pthread_cond_timedwait(cv, &mu->m, abs);
    atomic_store_explicit(&mu->holder, me, memory_order_relaxed);
    return rc;
}

bool ej__mutex_is_held(const ej__mutex *mu)
{
    return atomic_load_explicit(&mu->holder, memory_order_relaxed) == ej__thread_id();
}
