/* The bounded queue (common/bqueue.h): delivery in order, drops counted
 * when full or closing, flush waits, close abandons what a stuck consumer
 * left, the consumer-only calls are checked. */
#include <pthread.h>
#include <setjmp.h>
#include <signal.h>
#include <stdarg.h>
#include <stdatomic.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cmocka.h>

#include "common/bqueue.h"
#include "common/util.h"
#include "ejob/error.h"

struct consumer {
    pthread_mutex_t mu;
    pthread_cond_t cv;
    bool gate_open;
    int seen[64];
    size_t nseen;
    atomic_int freed;
    atomic_int steps;
};

static struct consumer cons;

static void free_item(void *item)
{
    atomic_fetch_add(&cons.freed, 1);
    free(item);
}

static int64_t step(ej__bqueue *q, void *user)
{
    struct consumer *c = user;
    atomic_fetch_add(&c->steps, 1);
    pthread_mutex_lock(&c->mu);
    while (!c->gate_open)
        pthread_cond_wait(&c->cv, &c->mu);
    pthread_mutex_unlock(&c->mu);
    void *items[8];
    size_t n = ej__bqueue_peek(q, items, 8);
    if (n == 0)
        return -1;
    pthread_mutex_lock(&c->mu);
    for (size_t i = 0; i < n && c->nseen < 64; i++)
        c->seen[c->nseen++] = *(int *)items[i];
    pthread_mutex_unlock(&c->mu);
    ej__bqueue_pop(q, n);
    return 0;
}

static void set_gate(bool open)
{
    pthread_mutex_lock(&cons.mu);
    cons.gate_open = open;
    pthread_cond_broadcast(&cons.cv);
    pthread_mutex_unlock(&cons.mu);
}

static ej__bqueue *make(size_t cap, bool open)
{
    memset(cons.seen, 0, sizeof cons.seen);
    cons.nseen = 0;
    atomic_store(&cons.freed, 0);
    atomic_store(&cons.steps, 0);
    set_gate(open);
    struct ej__bqueue_opts o = {.capacity = cap,
                                .thread_name = "ej-bq-test",
                                .log_module = "test",
                                .what = "test item",
                                .drop_log_ms = 1000,
                                .step = step,
                                .free_item = free_item,
                                .user = &cons};
    ej__bqueue *q = NULL;
    assert_int_equal(ej__bqueue_create(&o, &q), 0);
    return q;
}

static int *item(int v)
{
    int *p = malloc(sizeof *p);
    assert_non_null(p);
    *p = v;
    return p;
}

static void test_delivers_in_order_and_flushes(void **state)
{
    (void)state;
    ej__bqueue *q = make(16, true);
    for (int i = 0; i < 40; i++) {
        int *p = item(i);
        /* A consumer as fast as this loop keeps the 16 slots free. */
        while (ej__bqueue_push(q, p) == EJ_EAGAIN)
            ej__bqueue_flush(q, 1000);
    }
    assert_int_equal(ej__bqueue_flush(q, 5000), 0);
    struct ej__bqueue_stats st;
    ej__bqueue_stats(q, &st);
    assert_int_equal(st.pushed, 40);
    assert_int_equal(st.done, 40);
    assert_int_equal(st.queued, 0);
    pthread_mutex_lock(&cons.mu);
    size_t n = cons.nseen;
    pthread_mutex_unlock(&cons.mu);
    assert_int_equal(n, 40);
    for (int i = 0; i < 40; i++)
        assert_int_equal(cons.seen[i], i);
    /* Freed after they count as done: certain once the thread is joined. */
    assert_int_equal(ej__bqueue_close(q, 1000), 0);
    assert_int_equal(atomic_load(&cons.freed), 40);
    ej__bqueue_destroy(q);
}

static void test_full_and_closing_are_drops(void **state)
{
    (void)state;
    ej__bqueue *q = make(4, false); /* the consumer is stuck */
    for (int i = 0; i < 4; i++)
        assert_int_equal(ej__bqueue_push(q, item(i)), 0);
    int *extra = item(99);
    assert_int_equal(ej__bqueue_push(q, extra), EJ_EAGAIN); /* caller keeps it */
    ej__bqueue_note_drop(q, "out of memory");
    assert_int_equal(ej__bqueue_flush(q, 50), EJ_ETIMEDOUT);
    struct ej__bqueue_stats st;
    ej__bqueue_stats(q, &st);
    assert_int_equal(st.pushed, 4);
    assert_int_equal(st.dropped, 2);
    assert_int_equal(st.queued, 4);
    /* Opened during close: the flush inside close delivers everything. */
    set_gate(true);
    assert_int_equal(ej__bqueue_close(q, 5000), 0);
    assert_int_equal(ej__bqueue_push(q, extra), EJ_ECLOSED);
    free(extra);
    ej__bqueue_stats(q, &st);
    assert_int_equal(st.done, 4);
    assert_int_equal(st.dropped, 3);
    ej__bqueue_destroy(q);
}

static void *open_later(void *arg)
{
    (void)arg;
    ej__sleep_ms(300);
    set_gate(true);
    return NULL;
}

static void test_close_abandons_what_is_left(void **state)
{
    (void)state;
    ej__bqueue *q = make(8, false);
    for (int i = 0; i < 5; i++)
        assert_int_equal(ej__bqueue_push(q, item(i)), 0);
    /* The step is stuck past the close's 50 ms: the 5 are abandoned
     * (freed once the step returns and the thread ends). */
    pthread_t t;
    assert_int_equal(pthread_create(&t, NULL, open_later, NULL), 0);
    int64_t t0 = ej__mono_ms();
    size_t left = ej__bqueue_close(q, 50);
    pthread_join(t, NULL);
    assert_true(ej__mono_ms() - t0 >= 50);
    struct ej__bqueue_stats st;
    ej__bqueue_stats(q, &st);
    /* The step woke at 300 ms and may have taken some before exiting. */
    assert_int_equal(st.done + left, 5);
    assert_int_equal(st.abandoned, left);
    assert_int_equal(st.dropped, left);
    assert_int_equal(atomic_load(&cons.freed), 5);
    ej__bqueue_destroy(q);
}

static void peek_elsewhere(ej__bqueue *q)
{
    void *items[1];
    ej__bqueue_peek(q, items, 1);
}

static void test_consumer_only_calls_are_checked(void **state)
{
    (void)state;
    ej__bqueue *q = make(4, true);
    fflush(NULL);
    pid_t pid = fork();
    assert_true(pid >= 0);
    if (pid == 0) {
        int devnull[2];
        if (pipe(devnull) == 0)
            dup2(devnull[1], STDERR_FILENO);
        peek_elsewhere(q);
        _exit(0);
    }
    int st = 0;
    assert_int_equal(waitpid(pid, &st, 0), pid);
    assert_true(WIFSIGNALED(st) && WTERMSIG(st) == SIGABRT);
    ej__bqueue_destroy(q);
}

int main(void)
{
    pthread_mutex_init(&cons.mu, NULL);
    pthread_cond_init(&cons.cv, NULL);
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_delivers_in_order_and_flushes),
        cmocka_unit_test(test_full_and_closing_are_drops),
        cmocka_unit_test(test_close_abandons_what_is_left),
        cmocka_unit_test(test_consumer_only_calls_are_checked),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
