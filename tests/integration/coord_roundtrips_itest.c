/* Round trips on the coordinator's critical paths, counted by time over a
 * link that holds every ZooKeeper answer back DELAY_MS
 * (tests/support/slow_link): a loaded fleet's round trip is hundreds of
 * milliseconds, and a path of k round trips takes k of them.
 *   - a contender alone at a latch holds it after one round trip (the
 *     create and the first look sent together; they were two);
 *   - the leader reads the state of every server it shards over in one
 *     round trip (one read per server, one after the other, before);
 *   - a member's removal is noticed when the watch on instances/ fires,
 *     a round trip before the listing that names it (the takeover margin
 *     runs from then, membership.c). */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdatomic.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <cmocka.h>

#include "common/util.h"
#include "coord/internal.h"
#include "reg/internal.h"
#include "ejob/layout.h"
#include "ejob/log.h"
#include "ejob/registry.h"
#include "slow_link.h"
#include "zk_fixture.h"

#define DELAY_MS 400
#define SERVERS 8

static int64_t now_ms(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (int64_t)ts.tv_sec * 1000 + ts.tv_nsec / 1000000;
}

struct fixture {
    slow_link link;
    ej_registry *reg;
    char *ns;
};

static int setup(void **state)
{
    struct fixture *f = calloc(1, sizeof *f);
    assert_non_null(f);
    assert_int_equal(slow_link_start(&f->link, DELAY_MS), 0);
    char servers[64];
    snprintf(servers, sizeof servers, "127.0.0.1:%d", f->link.port);
    f->ns = zkf_unique_namespace("roundtrips");
    struct ej_registry_opts o = {0};
    o.servers = servers;
    o.namespace_ = f->ns;
    o.session_timeout_ms = 8000;
    o.connection_timeout_ms = 8000;
    if (ej_registry_create(&f->reg, &o) != 0)
        fail_msg("create: %s", ej_registry_errmsg(NULL));
    *state = f;
    return 0;
}

static int teardown(void **state)
{
    struct fixture *f = *state;
    ej_registry_destroy(f->reg);
    slow_link_stop(&f->link);
    free(f->ns);
    free(f);
    return 0;
}

static void test_latch_alone(void **state)
{
    struct fixture *f = *state;
    const char *latch = "/job/leader/failover/latch";
    assert_int_equal(ej_registry_create_node(f->reg, latch, NULL, 0, EJ_REG_PERSISTENT,
                                             EJ_REG_CREATE_PARENTS, NULL),
                     0);
    for (int round = 0; round < 3; round++) {
        ej__latch *l = NULL;
        int64_t t0 = now_ms();
        assert_int_equal(ej__latch_acquire(f->reg, latch, 10000, &l), 0);
        int64_t took = now_ms() - t0;
        print_message("latch held after %lld ms (answers held %d ms)\n", (long long)took, DELAY_MS);
        assert_non_null(l);
        ej__latch_release(l);
        /* Two round trips would be at least 2 delays. */
        assert_true(took < DELAY_MS * 7 / 4);
    }
}

static void test_servers_read_together(void **state)
{
    struct fixture *f = *state;
    char *ids[SERVERS + 1] = {0};
    for (int i = 0; i < SERVERS; i++) {
        char ip[32], id[64];
        snprintf(ip, sizeof ip, "127.0.0.%d", i + 1);
        snprintf(id, sizeof id, "%s@-@%d", ip, 100 + i);
        char *p = ej_layout_path_dup("job", EJ_LAYOUT_NODE_SERVER, 0, ip);
        const char *v = i == 3 ? EJ_LAYOUT_SERVER_DISABLED : EJ_LAYOUT_SERVER_ENABLED;
        if (i != 5) /* a missing servers/{ip} counts as enabled */
            assert_int_equal(ej_registry_create_node(f->reg, p, v, strlen(v), EJ_REG_PERSISTENT,
                                                     EJ_REG_CREATE_PARENTS, NULL),
                             0);
        free(p);
        ids[i] = strdup(id);
    }
    /* Two instances on one IP: read once, both dropped with it. */
    free(ids[7]);
    ids[7] = strdup("127.0.0.4@-@999");
    size_t n = SERVERS;
    char why[256] = "";
    int64_t t0 = now_ms();
    assert_int_equal(ej__servers_drop_disabled(f->reg, "job", ids, &n, why, sizeof why), 0);
    int64_t took = now_ms() - t0;
    print_message("%d servers' states read in %lld ms (answers held %d ms)\n", SERVERS,
                  (long long)took, DELAY_MS);
    assert_int_equal(n, SERVERS - 2);
    for (size_t i = 0; i < n; i++)
        assert_null(strstr(ids[i], "127.0.0.4@"));
    assert_null(ids[n]);
    assert_true(took < DELAY_MS * 7 / 4);
    for (size_t i = 0; i < n; i++)
        free(ids[i]);
}

struct removal {
    atomic_llong noticed, at; /* mono ms; 0 until the REMOVED event */
};

static void on_instance_event(ej_tree_cache *cache, const struct ej_tree_event *ev, void *user)
{
    (void)cache;
    struct removal *r = user;
    if (ev->type == EJ_TREE_NODE_REMOVED && strstr(ev->path, "@-@") != NULL) {
        atomic_store(&r->noticed, ev->noticed_mono_ms);
        atomic_store(&r->at, now_ms());
    }
}

/* As the coordinator's instances cache: instances/ by its children, the
 * other instances by name only (no watch of their own: their removal is
 * learnt from a listing of instances/). */
static int instances_shape(const char *path, size_t depth, void *user)
{
    (void)path;
    (void)user;
    return depth == 0 ? EJ__TREE_CHILDREN : EJ__TREE_NAME;
}

static void test_removal_noticed(void **state)
{
    struct fixture *f = *state;
    struct ej_registry_opts o = {0};
    o.servers = zkf_connect_string(zkf_shared());
    o.namespace_ = f->ns;
    o.session_timeout_ms = 4000;
    o.connection_timeout_ms = 5000;
    ej_registry *direct = NULL;
    assert_int_equal(ej_registry_create(&direct, &o), 0);
    const char *node = "/job/instances/127.0.0.9@-@1";
    assert_int_equal(ej_registry_create_node(direct, node, NULL, 0, EJ_REG_PERSISTENT,
                                             EJ_REG_CREATE_PARENTS, NULL),
                     0);
    static struct removal r;
    ej_tree_cache *cache = NULL;
    assert_int_equal(ej_tree_cache_create(f->reg, "/job/instances", on_instance_event, &r, &cache),
                     0);
    assert_int_equal(ej__tree_cache_set_shape(cache, instances_shape, NULL), 0);
    assert_int_equal(ej_tree_cache_start(cache), 0);
    assert_int_equal(ej_tree_cache_wait_initialized(cache, 10000), 0);
    assert_true(ej_tree_cache_exists(cache, node, NULL));
    int64_t deleted = now_ms();
    assert_int_equal(ej_registry_delete(direct, node, -1), 0);
    int64_t until = now_ms() + 10000;
    while (atomic_load(&r.at) == 0 && now_ms() < until)
        ej__sleep_ms(10);
    int64_t noticed = atomic_load(&r.noticed), at = atomic_load(&r.at);
    print_message("removed at +0 ms: noticed +%lld ms, reported +%lld ms (answers held %d ms)\n",
                  (long long)(noticed - deleted), (long long)(at - deleted), DELAY_MS);
    assert_true(at > 0);
    /* The watch's notice came through the link (one delay), the listing's
     * answer one delay after it. */
    assert_true(noticed >= deleted + DELAY_MS * 3 / 4);
    assert_true(at - noticed >= DELAY_MS * 3 / 4);
    ej_tree_cache_destroy(cache);
    ej_registry_destroy(direct);
}

int main(void)
{
    if (!getenv("EJOB_LOG_LEVEL"))
        ej_log_set_level(EJ_LOG_WARN);
    const struct CMUnitTest tests[] = {
        cmocka_unit_test_setup_teardown(test_latch_alone, setup, teardown),
        cmocka_unit_test_setup_teardown(test_servers_read_together, setup, teardown),
        cmocka_unit_test_setup_teardown(test_removal_noticed, setup, teardown),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
