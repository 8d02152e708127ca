/* The ZooKeeper layout: every node's path, names refused rather than
 * truncated, instance-id parts (one behaviour for every caller). */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>

#include "ejob/error.h"
#include "ejob/layout.h"
#include "layout/internal.h"

static void expect_path(ej_layout_node node, int item, const char *name, const char *want)
{
    char buf[256];
    int n = ej_layout_path(buf, sizeof buf, "demoJob", node, item, name);
    assert_int_equal(n, (int)strlen(want));
    assert_string_equal(buf, want);
}

static void test_every_node(void **state)
{
    (void)state;
    expect_path(EJ_LAYOUT_NODE_JOB, 0, NULL, "/demoJob");
    expect_path(EJ_LAYOUT_NODE_CONFIG, 0, NULL, "/demoJob/config");
    expect_path(EJ_LAYOUT_NODE_SERVERS, 0, NULL, "/demoJob/servers");
    expect_path(EJ_LAYOUT_NODE_SERVER, 0, "10.0.0.7", "/demoJob/servers/10.0.0.7");
    expect_path(EJ_LAYOUT_NODE_INSTANCES, 0, NULL, "/demoJob/instances");
    expect_path(EJ_LAYOUT_NODE_INSTANCE, 0, "10.0.0.7@-@42", "/demoJob/instances/10.0.0.7@-@42");
    expect_path(EJ_LAYOUT_NODE_SHARDING, 0, NULL, "/demoJob/sharding");
    expect_path(EJ_LAYOUT_NODE_ITEM, 3, NULL, "/demoJob/sharding/3");
    expect_path(EJ_LAYOUT_NODE_ITEM_INSTANCE, 3, NULL, "/demoJob/sharding/3/instance");
    expect_path(EJ_LAYOUT_NODE_ITEM_RUNNING, 0, NULL, "/demoJob/sharding/0/running");
    expect_path(EJ_LAYOUT_NODE_ITEM_FAILOVER, 12, NULL, "/demoJob/sharding/12/failover");
    expect_path(EJ_LAYOUT_NODE_ITEM_MISFIRE, 1, NULL, "/demoJob/sharding/1/misfire");
    expect_path(EJ_LAYOUT_NODE_ITEM_DISABLED, 999999, NULL, "/demoJob/sharding/999999/disabled");
    expect_path(EJ_LAYOUT_NODE_LEADER, 0, NULL, "/demoJob/leader");
    expect_path(EJ_LAYOUT_NODE_ELECTION_LATCH, 0, NULL, "/demoJob/leader/election/latch");
    expect_path(EJ_LAYOUT_NODE_ELECTION_INSTANCE, 0, NULL, "/demoJob/leader/election/instance");
    expect_path(EJ_LAYOUT_NODE_SHARDING_NECESSARY, 0, NULL, "/demoJob/leader/sharding/necessary");
    expect_path(EJ_LAYOUT_NODE_SHARDING_PROCESSING, 0, NULL,
                "/demoJob/leader/sharding/processing");
    expect_path(EJ_LAYOUT_NODE_FAILOVER_ITEMS, 0, NULL, "/demoJob/leader/failover/items");
    expect_path(EJ_LAYOUT_NODE_FAILOVER_ITEM, 4, NULL, "/demoJob/leader/failover/items/4");
    expect_path(EJ_LAYOUT_NODE_FAILOVER_LATCH, 0, NULL, "/demoJob/leader/failover/latch");
    expect_path(EJ_LAYOUT_NODE_GUARANTEE_STARTED, 0, NULL, "/demoJob/guarantee/started");
    expect_path(EJ_LAYOUT_NODE_GUARANTEE_STARTED_ITEM, 2, NULL, "/demoJob/guarantee/started/2");
    expect_path(EJ_LAYOUT_NODE_GUARANTEE_COMPLETED, 0, NULL, "/demoJob/guarantee/completed");
    expect_path(EJ_LAYOUT_NODE_GUARANTEE_COMPLETED_ITEM, 2, NULL,
                "/demoJob/guarantee/completed/2");
    expect_path(EJ_LAYOUT_NODE_SYSTEM_TIME, 0, NULL, "/demoJob/systemTime/current");
    expect_path(EJ_LAYOUT_NODE_KILLS, 0, NULL, "/demoJob/kills");
    expect_path(EJ_LAYOUT_NODE_EJOB_INSTANCES, 0, NULL, "/demoJob/ejob/instances");
    expect_path(EJ_LAYOUT_NODE_EJOB_INSTANCE, 0, "10.0.0.1@-@7",
                "/demoJob/ejob/instances/10.0.0.1@-@7");
    expect_path(EJ_LAYOUT_NODE_EJOB_MEMBERS, 0, NULL, "/demoJob/ejob/members");
    expect_path(EJ_LAYOUT_NODE_EJOB_MEMBER, 0, "10.0.0.1@-@7", "/demoJob/ejob/members/10.0.0.1@-@7");
    char *live = ej_layout_member_live_path_dup("demoJob", "10.0.0.1@-@7", 0x1000a2b3c4d0005);
    assert_string_equal(live, "/demoJob/ejob/members/10.0.0.1@-@7/1000a2b3c4d0005");
    free(live);
    assert_null(ej_layout_member_live_path_dup("demoJob", "10.0.0.1@-@7", 0));
    assert_null(ej_layout_member_live_path_dup("demoJob", "a/b", 5));
    char *marker = ej_layout_marker_path_dup("demoJob", "10.0.0.1@-@7");
    assert_string_equal(marker, "/demoJob/ejob/instances/10.0.0.1@-@7");
    free(marker);
    assert_null(ej_layout_marker_path_dup("demoJob", "a/b"));
}

static void test_bad_arguments(void **state)
{
    (void)state;
    char buf[64];
    assert_int_equal(ej_layout_path(buf, sizeof buf, "a/b", EJ_LAYOUT_NODE_CONFIG, 0, NULL),
                     EJ_EINVAL);
    assert_string_equal(buf, "");
    assert_int_equal(ej_layout_path(buf, sizeof buf, "..", EJ_LAYOUT_NODE_JOB, 0, NULL),
                     EJ_EINVAL);
    assert_int_equal(ej_layout_path(buf, sizeof buf, "", EJ_LAYOUT_NODE_JOB, 0, NULL), EJ_EINVAL);
    assert_int_equal(ej_layout_path(buf, sizeof buf, "j", EJ_LAYOUT_NODE_ITEM, -1, NULL),
                     EJ_EINVAL);
    assert_int_equal(ej_layout_path(buf, sizeof buf, "j", EJ_LAYOUT_NODE_SERVER, 0, NULL),
                     EJ_EINVAL);
    assert_int_equal(ej_layout_path(buf, sizeof buf, "j", EJ_LAYOUT_NODE_SERVER, 0, "../x"),
                     EJ_EINVAL);
    assert_int_equal(ej_layout_path(buf, sizeof buf, "j", EJ_LAYOUT_NODE_INSTANCE, 0, "a\nb"),
                     EJ_EINVAL);
    assert_int_equal(ej_layout_path(buf, sizeof buf, "j", EJ_LAYOUT_NODE_COUNT_, 0, NULL),
                     EJ_EINVAL);
    /* Too small a buffer: refused, not truncated. */
    char small[10];
    assert_int_equal(
        ej_layout_path(small, sizeof small, "demoJob", EJ_LAYOUT_NODE_CONFIG, 0, NULL),
        EJ_EINVAL);
    assert_string_equal(small, "");
    char name[300];
    memset(name, 'a', 256);
    name[256] = '\0';
    assert_false(ej_layout_is_job_name(name));
    name[255] = '\0';
    assert_true(ej_layout_is_job_name(name));
    char *p = ej_layout_path_dup("j", EJ_LAYOUT_NODE_ITEM_FAILOVER, 7, NULL);
    assert_non_null(p);
    assert_string_equal(p, "/j/sharding/7/failover");
    free(p);
    assert_null(ej_layout_path_dup("j/k", EJ_LAYOUT_NODE_JOB, 0, NULL));
}

static void test_instance_ids(void **state)
{
    (void)state;
    char ip[32];
    assert_int_equal(ej_layout_instance_ip("10.0.0.7@-@4123", ip, sizeof ip), 0);
    assert_string_equal(ip, "10.0.0.7");
    assert_int_equal(ej_layout_instance_ip("noseparator", ip, sizeof ip), 0);
    assert_string_equal(ip, "noseparator");
    /* Too small: refused, never truncated ("10." would name another server). */
    assert_int_equal(ej_layout_instance_ip("10.0.0.7@-@4123", ip, 4), EJ_EINVAL);
    assert_string_equal(ip, "");
    assert_true(ej_layout_instance_on_server("10.0.0.7@-@4123", "10.0.0.7"));
    assert_false(ej_layout_instance_on_server("10.0.0.70@-@4123", "10.0.0.7"));
    assert_false(ej_layout_instance_on_server("10.0.0.7@-@4123", ""));
    assert_false(ej_layout_instance_on_server(NULL, "10.0.0.7"));
}

/* ej_layout_instance_ip replaced two copies that disagreed: the console's
 * truncated an IP that did not fit, the coordinator's refused it. Every
 * caller now gets EJ_EINVAL and an empty buffer. */
static void test_instance_ip_refuses_overflow(void **state)
{
    (void)state;
    char ip[EJ__IP_MAX];
    char id[EJ__ID_MAX];
    memset(ip, 'x', sizeof ip);
    char longip[EJ__IP_MAX + 1];
    memset(longip, '1', EJ__IP_MAX);
    longip[EJ__IP_MAX] = '\0';
    snprintf(id, sizeof id, "%s@-@1", longip);
    assert_int_equal(ej_layout_instance_ip(id, ip, sizeof ip), EJ_EINVAL);
    assert_string_equal(ip, "");
    /* One byte shorter fits exactly. */
    snprintf(id, sizeof id, "%.*s@-@1", EJ__IP_MAX - 1, longip);
    assert_int_equal(ej_layout_instance_ip(id, ip, sizeof ip), 0);
    assert_int_equal((int)strlen(ip), EJ__IP_MAX - 1);
    assert_int_equal(ej_layout_instance_ip(NULL, ip, sizeof ip), EJ_EINVAL);
    assert_string_equal(ip, "");
    assert_int_equal(ej_layout_instance_ip("a@-@1", NULL, 8), EJ_EINVAL);
    assert_int_equal(ej_layout_instance_ip("a@-@1", ip, 0), EJ_EINVAL);
    /* The id ej__layout_make_instance_id builds parses back. */
    assert_int_equal(ej__layout_make_instance_id("10.1.2.3", 77, id, sizeof id), 0);
    assert_int_equal(ej_layout_instance_ip(id, ip, sizeof ip), 0);
    assert_string_equal(ip, "10.1.2.3");
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_every_node),
        cmocka_unit_test(test_bad_arguments),
        cmocka_unit_test(test_instance_ids),
        cmocka_unit_test(test_instance_ip_refuses_overflow),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
