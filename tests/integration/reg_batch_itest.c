/* Reads sent together (ej_registry_read_many) against a real ZooKeeper:
 * what each read finds, the errors, the requests counted, and that n reads
 * take one round trip. For the last, the client talks to the server through
 * a link that holds every answer back DELAY_MS (tests/support/slow_link): n
 * reads one after the other take n delays, n reads together one. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>
#include <cmocka.h>

#include "ejob/log.h"
#include "ejob/registry.h"
#include "slow_link.h"
#include "zk_fixture.h"

#define DELAY_MS 150
#define NODES 8

static int64_t now_ms(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (int64_t)ts.tv_sec * 1000 + ts.tv_nsec / 1000000;
}

static ej_registry *open_at(const char *servers, const char *ns)
{
    struct ej_registry_opts o = {0};
    o.servers = servers;
    o.namespace_ = ns;
    o.session_timeout_ms = 6000;
    o.connection_timeout_ms = 5000;
    ej_registry *reg = NULL;
    if (ej_registry_create(&reg, &o) != 0)
        fail_msg("create: %s", ej_registry_errmsg(NULL));
    assert_int_equal(ej_registry_wait_connected(reg, 5000), 0);
    return reg;
}

static void make_nodes(ej_registry *reg)
{
    char path[32];
    for (int i = 0; i < NODES; i++) {
        snprintf(path, sizeof path, "/n%d", i);
        assert_int_equal(ej_registry_create_node(reg, path, path + 1, strlen(path + 1),
                                                 EJ_REG_PERSISTENT, 0, NULL),
                         0);
    }
}

/* Each read finds what a read of its own would: data, stat, no node. */
static void test_values(void **state)
{
    (void)state;
    char *ns = zkf_unique_namespace("batch");
    ej_registry *reg = open_at(zkf_connect_string(zkf_shared()), ns);
    assert_int_equal(ej_registry_create_node(reg, "/a", "hello", 5, EJ_REG_PERSISTENT, 0, NULL), 0);
    assert_int_equal(ej_registry_create_node(reg, "/a/b", NULL, 0, EJ_REG_PERSISTENT, 0, NULL), 0);
    assert_int_equal(ej_registry_set(reg, "/a", "hello!", 6, -1, NULL), 0);
    assert_int_equal(ej_registry_create_node(reg, "/c", NULL, 0, EJ_REG_PERSISTENT, 0, NULL), 0);
    struct ej_reg_read rd[4] = {
        {.path = "/a"}, {.path = "/missing"}, {.path = "/c"}, {.path = "/a/b"}};
    uint64_t req0 = ej_registry_request_count(reg);
    assert_int_equal(ej_registry_read_many(reg, rd, 4, true), 0);
    assert_int_equal(ej_registry_request_count(reg) - req0, 4);
    assert_int_equal(rd[0].result, 0);
    assert_string_equal(rd[0].data, "hello!");
    assert_int_equal(rd[0].len, 6);
    assert_int_equal(rd[0].stat.version, 1);
    assert_int_equal(rd[0].stat.num_children, 1);
    assert_int_equal(rd[1].result, EJ_ENONODE);
    assert_null(rd[1].data);
    assert_int_equal(rd[2].result, 0);
    assert_string_equal(rd[2].data, "");
    assert_int_equal(rd[2].len, 0);
    assert_int_equal(rd[3].result, 0);
    struct ej_node_stat st;
    bool ex = false;
    assert_int_equal(ej_registry_exists(reg, "/a", &ex, &st), 0);
    assert_true(ex);
    assert_int_equal(rd[0].stat.pzxid, st.pzxid);
    assert_int_equal(rd[0].stat.mzxid, st.mzxid);
    ej_registry_reads_fini(rd, 4);
    assert_null(rd[0].data);

    /* Without data: the stats only. */
    struct ej_reg_read ex2[2] = {{.path = "/a/b"}, {.path = "/nope"}};
    assert_int_equal(ej_registry_read_many(reg, ex2, 2, false), 0);
    assert_int_equal(ex2[0].result, 0);
    assert_null(ex2[0].data);
    assert_int_equal(ex2[0].stat.num_children, 0);
    assert_int_equal(ex2[1].result, EJ_ENONODE);
    ej_registry_destroy(reg);
    free(ns);
}

/* Bad input is refused before anything is sent. */
static void test_bad_input(void **state)
{
    (void)state;
    char *ns = zkf_unique_namespace("batchbad");
    ej_registry *reg = open_at(zkf_connect_string(zkf_shared()), ns);
    assert_int_equal(ej_registry_read_many(reg, NULL, 0, true), 0);
    assert_int_equal(ej_registry_read_many(reg, NULL, 2, true), EJ_EINVAL);
    struct ej_reg_read rd[3] = {{.path = "/a"}, {.path = "no-slash"}, {.path = "/b"}};
    uint64_t req0 = ej_registry_request_count(reg);
    assert_int_equal(ej_registry_read_many(reg, rd, 3, false), EJ_EBADPATH);
    assert_non_null(strstr(ej_registry_errmsg(reg), "no-slash"));
    assert_int_equal(ej_registry_request_count(reg) - req0, 0);
    ej_registry_destroy(reg);
    free(ns);
}

/* NODES reads together cost one round trip of the slow link; one after the
 * other they cost NODES. */
static void test_one_round_trip(void **state)
{
    (void)state;
    char *ns = zkf_unique_namespace("batchrtt");
    slow_link l;
    assert_int_equal(slow_link_start(&l, DELAY_MS), 0);
    char servers[64];
    snprintf(servers, sizeof servers, "127.0.0.1:%d", l.port);
    ej_registry *reg = open_at(servers, ns);
    make_nodes(reg);
    struct ej_reg_read rd[NODES];
    char paths[NODES][16];
    for (int i = 0; i < NODES; i++) {
        snprintf(paths[i], sizeof paths[i], "/n%d", i);
        rd[i] = (struct ej_reg_read){.path = paths[i]};
    }
    int64_t t0 = now_ms();
    for (int i = 0; i < NODES; i++) {
        bool ex = false;
        assert_int_equal(ej_registry_exists(reg, paths[i], &ex, NULL), 0);
        assert_true(ex);
    }
    int64_t serial = now_ms() - t0;
    t0 = now_ms();
    assert_int_equal(ej_registry_read_many(reg, rd, NODES, true), 0);
    int64_t together = now_ms() - t0;
    for (int i = 0; i < NODES; i++) {
        assert_int_equal(rd[i].result, 0);
        assert_string_equal(rd[i].data, paths[i] + 1);
    }
    ej_registry_reads_fini(rd, NODES);
    print_message("%d reads: %lld ms one after the other, %lld ms together (answers held %d ms)\n",
                  NODES, (long long)serial, (long long)together, DELAY_MS);
    assert_true(serial >= (NODES - 1) * DELAY_MS);
    assert_true(together < 3 * DELAY_MS);
    ej_registry_destroy(reg);
    slow_link_stop(&l);
    free(ns);
}

int main(void)
{
    if (!getenv("EJOB_LOG_LEVEL"))
        ej_log_set_level(EJ_LOG_WARN);
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_values),
        cmocka_unit_test(test_bad_input),
        cmocka_unit_test(test_one_round_trip),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
