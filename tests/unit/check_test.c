/* Checked invariants (common/check.h): on in release builds, a message
 * naming file:line:expression, abort; mutexes that know their holder. */
#include <pthread.h>
#include <setjmp.h>
#include <signal.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include <cmocka.h>

#include "common/check.h"

/* Runs fn in a child process; returns what it wrote to stderr (static) and
 * whether it died of SIGABRT. */
static const char *run_child(void (*fn)(void *), void *arg, bool *aborted)
{
    static char out[2048];
    int p[2];
    assert_int_equal(pipe(p), 0);
    fflush(NULL);
    pid_t pid = fork();
    assert_true(pid >= 0);
    if (pid == 0) {
        dup2(p[1], STDERR_FILENO);
        close(p[0]);
        fn(arg);
        _exit(0);
    }
    close(p[1]);
    size_t n = 0;
    ssize_t r;
    while (n < sizeof out - 1 && (r = read(p[0], out + n, sizeof out - 1 - n)) > 0)
        n += (size_t)r;
    out[n] = '\0';
    close(p[0]);
    int st = 0;
    assert_int_equal(waitpid(pid, &st, 0), pid);
    *aborted = WIFSIGNALED(st) && WTERMSIG(st) == SIGABRT;
    return out;
}

static void fail_plain(void *arg)
{
    int two = *(int *)arg;
    EJ_ASSERT(two + 1 == 4);
}

static void fail_with_msg(void *arg)
{
    int two = *(int *)arg;
    EJ_ASSERT_MSG(two == 3, "two is %d", two);
}

static void pass_both(void *arg)
{
    int two = *(int *)arg;
    EJ_ASSERT(two == 2);
    EJ_ASSERT_MSG(two == 2, "two is %d", two);
}

static void test_assert_on_in_every_build(void **state)
{
    (void)state;
    int two = 2;
    bool aborted = false;
    const char *err = run_child(fail_plain, &two, &aborted);
    assert_true(aborted);
    assert_non_null(strstr(err, "check_test.c:"));
    assert_non_null(strstr(err, ": assertion failed: two + 1 == 4"));
    err = run_child(fail_with_msg, &two, &aborted);
    assert_true(aborted);
    assert_non_null(strstr(err, "assertion failed: two == 3: two is 2"));
    err = run_child(pass_both, &two, &aborted);
    assert_false(aborted);
    assert_string_equal(err, "");
}

struct probe {
    ej__mutex *mu;
    bool held_there;
};

static void *probe_main(void *arg)
{
    struct probe *p = arg;
    p->held_there = ej__mutex_is_held(p->mu);
    return NULL;
}

static void test_mutex_knows_its_holder(void **state)
{
    (void)state;
    ej__mutex mu;
    ej__mutex_init(&mu);
    assert_false(ej__mutex_is_held(&mu));
    ej__mutex_lock(&mu);
    assert_true(ej__mutex_is_held(&mu));
    /* Held by this thread: another thread does not hold it. */
    struct probe p = {.mu = &mu, .held_there = true};
    pthread_t t;
    assert_int_equal(pthread_create(&t, NULL, probe_main, &p), 0);
    pthread_join(t, NULL);
    assert_false(p.held_there);
    /* A timed wait gives the mutex up and takes it back. */
    pthread_cond_t cv;
    pthread_cond_init(&cv, NULL);
    struct timespec ts;
    clock_gettime(CLOCK_REALTIME, &ts);
    ts.tv_nsec += 1000000;
    if (ts.tv_nsec >= 1000000000L) {
        ts.tv_sec++;
        ts.tv_nsec -= 1000000000L;
    }
    ej__mutex_timedwait(&mu, &cv, &ts);
    assert_true(ej__mutex_is_held(&mu));
    ej__mutex_unlock(&mu);
    assert_false(ej__mutex_is_held(&mu));
    pthread_cond_destroy(&cv);
    ej__mutex_destroy(&mu);
}

static void held_without_lock(void *arg);

/* A static mutex (EJ__MUTEX_INITIALIZER) knows its holder as one made by
 * ej__mutex_init does. */
static ej__mutex static_mu = EJ__MUTEX_INITIALIZER;

static void test_static_mutex(void **state)
{
    (void)state;
    assert_false(ej__mutex_is_held(&static_mu));
    ej__mutex_lock(&static_mu);
    assert_true(ej__mutex_is_held(&static_mu));
    EJ_ASSERT_HELD(&static_mu);
    ej__mutex_unlock(&static_mu);
    assert_false(ej__mutex_is_held(&static_mu));
    bool aborted = false;
    const char *err = run_child(held_without_lock, &static_mu, &aborted);
    assert_true(aborted);
    assert_non_null(strstr(err, "not held by this thread"));
}

static void held_without_lock(void *arg)
{
    ej__mutex *mu = arg;
    EJ_ASSERT_HELD(mu);
}

static void unlock_without_lock(void *arg)
{
    ej__mutex_unlock(arg);
}

static void lock_twice(void *arg)
{
    ej__mutex_lock(arg);
    ej__mutex_lock(arg);
}

static void test_mutex_misuse_aborts(void **state)
{
    (void)state;
    ej__mutex mu;
    ej__mutex_init(&mu);
    bool aborted = false;
    const char *err = run_child(held_without_lock, &mu, &aborted);
    assert_true(aborted);
    assert_non_null(strstr(err, "mu not held by this thread"));
    err = run_child(unlock_without_lock, &mu, &aborted);
    assert_true(aborted);
    assert_non_null(strstr(err, "unlock of a mutex this thread does not hold"));
    err = run_child(lock_twice, &mu, &aborted);
    assert_true(aborted);
    assert_non_null(strstr(err, "mutex locked twice by one thread"));
    ej__mutex_destroy(&mu);
}

struct owned {
    ej__owner owner;
    bool current_there;
};

static void *owner_main(void *arg)
{
    struct owned *o = arg;
    ej__owner_set(&o->owner);
    o->current_there = ej__owner_is_current(&o->owner);
    return NULL;
}

static void test_owner_thread(void **state)
{
    (void)state;
    struct owned o = {0};
    assert_false(ej__owner_is_current(&o.owner));
    pthread_t t;
    assert_int_equal(pthread_create(&t, NULL, owner_main, &o), 0);
    pthread_join(t, NULL);
    assert_true(o.current_there);
    /* Recorded by the other thread: not this one. */
    assert_false(ej__owner_is_current(&o.owner));
    ej__owner_set(&o.owner);
    assert_true(ej__owner_is_current(&o.owner));
    ej__owner_clear(&o.owner);
    assert_false(ej__owner_is_current(&o.owner));
    assert_true(ej__thread_id() != 0);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_assert_on_in_every_build),
        cmocka_unit_test(test_mutex_knows_its_holder),
        cmocka_unit_test(test_mutex_misuse_aborts),
        cmocka_unit_test(test_static_mutex),
        cmocka_unit_test(test_owner_thread),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
