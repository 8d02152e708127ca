/*
 * Checked invariants, on in every build type (the default RelWithDebInfo
 * build passes -DNDEBUG, which compiles assert() out; these stay, as Redis's
 * serverAssert does). Internal: not part of the public API.
 *
 * EJ_ASSERT(cond)               cond false: log "file:line: assertion failed:
 *                               cond" to stderr and the log, then abort().
 * EJ_ASSERT_MSG(cond, fmt, ...) the same with a printf-style explanation.
 *
 * A state that only a lock's holder may touch is guarded by an ej__mutex,
 * which records its holder: EJ_ASSERT_HELD(&m) checks that the calling thread
 * holds it (a "_locked" function's precondition). A state that only one
 * thread may touch records that thread in an ej__owner: EJ_ASSERT_OWNER(&o).
 */
#ifndef EJ_COMMON_CHECK_H
#define EJ_COMMON_CHECK_H

#include <pthread.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stdint.h>
#include <time.h>

#include "ejob/common.h"

#define EJ_ASSERT(cond)                                                                            \
    ((cond) ? (void)0 : ej__assert_fail(__FILE__, __LINE__, #cond, NULL))
#define EJ_ASSERT_MSG(cond, ...)                                                                   \
    ((cond) ? (void)0 : ej__assert_fail(__FILE__, __LINE__, #cond, __VA_ARGS__))

/* Reports the failed check (and the message when fmt is not NULL) and
 * aborts. Called by the macros; never returns. */
_Noreturn void ej__assert_fail(const char *file, int line, const char *expr, const char *fmt, ...)
    EJ_PRINTF(4, 5);

/* A small number naming the calling thread for its whole life, never 0 (a
 * pthread_t has no such value and cannot be compared atomically). */
uint64_t ej__thread_id(void);

/* A mutex that knows its holder. Lock and unlock as a pthread mutex; wait
 * on a condition with ej__mutex_wait / ej__mutex_timedwait so the holder
 * stays right across the wait. Unlocking a mutex the caller does not hold
 * is a failed check. */
typedef struct ej__mutex {
    pthread_mutex_t m;
    _Atomic uint64_t holder; /* ej__thread_id of the holder, 0 when free */
} ej__mutex;

/* A static ej__mutex: static ej__mutex mu = EJ__MUTEX_INITIALIZER; */
#define EJ__MUTEX_INITIALIZER                                                                      \
    {                                                                                              \
        .m = PTHREAD_MUTEX_INITIALIZER, .holder = 0                                                \
    }

void ej__mutex_init(ej__mutex *mu);
/* The same with attributes (a mutex type, e.g. PTHREAD_MUTEX_ADAPTIVE_NP). */
void ej__mutex_init_attr(ej__mutex *mu, const pthread_mutexattr_t *attr);
void ej__mutex_destroy(ej__mutex *mu);
void ej__mutex_lock(ej__mutex *mu);
void ej__mutex_unlock(ej__mutex *mu);
/* pthread_cond_wait / pthread_cond_timedwait (abs deadline on the clock
 * the condition was created with) with mu held; returns as they do. */
int ej__mutex_wait(ej__mutex *mu, pthread_cond_t *cv);
int ej__mutex_timedwait(ej__mutex *mu, pthread_cond_t *cv, const struct timespec *abs);
/* True when the calling thread holds mu. */
bool ej__mutex_is_held(const ej__mutex *mu);

#define EJ_ASSERT_HELD(mu) EJ_ASSERT_MSG(ej__mutex_is_held(mu), "%s not held by this thread", #mu)

/* The thread that owns a state, recorded by that thread once it runs
 * (ej__owner_set) and cleared when it ends (ej__owner_clear). */
typedef struct ej__owner {
    _Atomic uint64_t thread; /* 0: no owner recorded */
} ej__owner;

static inline void ej__owner_set(ej__owner *o)
{
    atomic_store_explicit(&o->thread, ej__thread_id(), memory_order_relaxed);
}
static inline void ej__owner_clear(ej__owner *o)
{
    atomic_store_explicit(&o->thread, 0, memory_order_relaxed);
}
static inline bool ej__owner_is_current(ej__owner *o)
{
    return atomic_load_explicit(&o->thread, memory_order_relaxed) == ej__thread_id();
}

#define EJ_ASSERT_OWNER(o) EJ_ASSERT_MSG(ej__owner_is_current(o), "not on the owner thread of %s", #o)

#endif
