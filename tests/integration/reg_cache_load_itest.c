/* A tree cache that starts while its subtree keeps changing (a fleet
 * registering: every arrival adds a child to instances/) is initialized
 * once its initial load is read, not when the changes stop: the reads
 * that the changes' watches ask for do not count. Before, every such read
 * counted, and a job's start waited for a quiet moment that a starting
 * fleet did not give (its bound is 2 session timeouts + 2 s, after which
 * the start failed and was retried). */
#include <pthread.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stdatomic.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>
#include <cmocka.h>

#include "ejob/registry.h"
#include "reg_open.h"
#include "zk_fixture.h"

#define CHURN_MS 12000

static int64_t now_ms(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (int64_t)ts.tv_sec * 1000 + ts.tv_nsec / 1000000;
}

struct churn {
    ej_registry *reg;
    atomic_bool stop;
    atomic_bool ended; /* ran its whole time: the changes stopped by themselves */
    atomic_int made;
};

/* Adds children to /churn, 20 per transaction, without a pause. */
static void *churn_main(void *arg)
{
    struct churn *ch = arg;
    int64_t end = now_ms() + CHURN_MS;
    char paths[20][64];
    struct ej_reg_op ops[20];
    for (int round = 0; now_ms() < end && !atomic_load(&ch->stop); round++) {
        for (int i = 0; i < 20; i++) {
            snprintf(paths[i], sizeof paths[i], "/churn/c%06d-%02d", round, i);
            ops[i] = (struct ej_reg_op){.type = EJ_REG_OP_CREATE, .path = paths[i], .data = "x",
                                        .len = 1, .mode = EJ_REG_PERSISTENT};
        }
        if (ej_registry_multi(ch->reg, ops, 20, NULL) == 0)
            atomic_fetch_add(&ch->made, 20);
    }
    if (!atomic_load(&ch->stop))
        atomic_store(&ch->ended, true);
    return NULL;
}

static void noop(ej_tree_cache *c, const struct ej_tree_event *ev, void *user)
{
    (void)c;
    (void)ev;
    (void)user;
}

static void test_load_ends_while_children_change(void **state)
{
    (void)state;
    char *ns = zkf_unique_namespace("cacheload");
    ej_registry *writer = reg_open(ns, NULL);
    ej_registry *reader = reg_open(ns, NULL);
    assert_int_equal(ej_registry_create_node(writer, "/churn", NULL, 0, EJ_REG_PERSISTENT, 0, NULL),
                     0);
    struct churn ch = {.reg = writer};
    pthread_t th;
    assert_int_equal(pthread_create(&th, NULL, churn_main, &ch), 0);
    usleep(300 * 1000);
    ej_tree_cache *cache = NULL;
    assert_int_equal(ej_tree_cache_create(reader, "/churn", noop, NULL, &cache), 0);
    int64_t t0 = now_ms();
    assert_int_equal(ej_tree_cache_start(cache), 0);
    int rc = ej_tree_cache_wait_initialized(cache, CHURN_MS + 4000);
    int64_t took = now_ms() - t0;
    bool still_changing = !atomic_load(&ch.ended);
    int made = atomic_load(&ch.made);
    atomic_store(&ch.stop, true);
    pthread_join(th, NULL);
    fprintf(stderr, "initialized in %lld ms (rc %d), %d children added meanwhile, %s\n",
            (long long)took, rc, made, still_changing ? "still adding" : "the adding had ended");
    assert_int_equal(rc, 0);
    assert_true(still_changing);
    /* And the cache converges once the changes stop. */
    int want = atomic_load(&ch.made);
    int64_t end = now_ms() + 10000;
    size_t have = 0;
    while (now_ms() < end) {
        have = ej_tree_cache_size(cache);
        if (have >= (size_t)want + 1)
            break;
        usleep(50 * 1000);
    }
    assert_true(have >= (size_t)want + 1);
    ej_tree_cache_destroy(cache);
    ej_registry_destroy(reader);
    ej_registry_destroy(writer);
    free(ns);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_load_ends_while_children_change),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
