/* Pure logic of the coordination module: paths, ids, latch names. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>

#include "coord/internal.h"
#include "ejob/error.h"

/* The coordinator builds its paths with the console library's table: the
 * bytes it writes are these. */
static void test_paths(void **state)
{
    (void)state;
    char *p = ej_layout_path_dup("myJob", EJ_LAYOUT_NODE_ITEM_INSTANCE, 3, NULL);
    assert_string_equal(p, "/myJob/sharding/3/instance");
    free(p);
    p = ej_layout_path_dup("myJob", EJ_LAYOUT_NODE_JOB, 0, NULL);
    assert_string_equal(p, "/myJob");
    free(p);
    p = ej_layout_path_dup("j", EJ_LAYOUT_NODE_ELECTION_INSTANCE, 0, NULL);
    assert_string_equal(p, "/j/leader/election/instance");
    free(p);
    p = ej_layout_path_dup("j", EJ_LAYOUT_NODE_INSTANCE, 0, "10.0.0.7@-@4123");
    assert_string_equal(p, "/j/instances/10.0.0.7@-@4123");
    free(p);
    p = ej_layout_path_dup("j", EJ_LAYOUT_NODE_GUARANTEE_COMPLETED_ITEM, 12, NULL);
    assert_string_equal(p, "/j/guarantee/completed/12");
    free(p);
    assert_null(ej_layout_path_dup(NULL, EJ_LAYOUT_NODE_CONFIG, 0, NULL));
}

static void test_instance_ids(void **state)
{
    (void)state;
    char id[EJ__ID_MAX];
    assert_int_equal(ej__layout_make_instance_id("10.0.0.7", 4123, id, sizeof id), 0);
    assert_string_equal(id, "10.0.0.7@-@4123");
    assert_int_equal(ej__layout_make_instance_id("", 1, id, sizeof id), EJ_EINVAL);
    assert_int_equal(ej__layout_make_instance_id("a/b", 1, id, sizeof id), EJ_EINVAL);
    assert_int_equal(ej__layout_make_instance_id("a@-@b", 1, id, sizeof id), EJ_EINVAL);
    char small[8];
    assert_int_equal(ej__layout_make_instance_id("10.0.0.7", 4123, small, sizeof small), EJ_EINVAL);

    char ip[EJ__IP_MAX];
    assert_int_equal(ej_layout_instance_ip("10.0.0.7@-@4123", ip, sizeof ip), 0);
    assert_string_equal(ip, "10.0.0.7");
    assert_int_equal(ej_layout_instance_ip("nohost", ip, sizeof ip), 0);
    assert_string_equal(ip, "nohost");
    /* The IP ends at the FIRST separator. */
    assert_int_equal(ej_layout_instance_ip("1.2.3.4@-@5@-@6", ip, sizeof ip), 0);
    assert_string_equal(ip, "1.2.3.4");
    char tiny[4];
    assert_int_equal(ej_layout_instance_ip("1.2.3.4@-@5", tiny, sizeof tiny), EJ_EINVAL);
}

static void test_exact_ip_match(void **state)
{
    (void)state;
    /* EJ#2226: a plain prefix match lets 10.0.0.1 claim 10.0.0.17's ids. */
    assert_true(ej_layout_instance_on_server("10.0.0.1@-@42", "10.0.0.1"));
    assert_false(ej_layout_instance_on_server("10.0.0.17@-@42", "10.0.0.1"));
    assert_false(ej_layout_instance_on_server("172.28.3.87@-@1", "172.28.3.8"));
    assert_false(ej_layout_instance_on_server("10.0.0.1", "10.0.0.1"));
    assert_false(ej_layout_instance_on_server("10.0.0.1@-@1", ""));
    assert_false(ej_layout_instance_on_server(NULL, "1"));
}

static void test_parse_item(void **state)
{
    (void)state;
    int v = -1;
    assert_int_equal(ej__layout_parse_item("0", &v), 0);
    assert_int_equal(v, 0);
    assert_int_equal(ej__layout_parse_item("99999", &v), 0);
    assert_int_equal(v, 99999);
    assert_int_equal(ej__layout_parse_item("2147483647", &v), 0);
    assert_int_equal(v, 2147483647);
    assert_int_equal(ej__layout_parse_item("2147483648", &v), EJ_EINVAL);
    assert_int_equal(ej__layout_parse_item("", &v), EJ_EINVAL);
    assert_int_equal(ej__layout_parse_item("-1", &v), EJ_EINVAL);
    assert_int_equal(ej__layout_parse_item("01", &v), EJ_EINVAL);
    assert_int_equal(ej__layout_parse_item("1a", &v), EJ_EINVAL);
    assert_int_equal(ej__layout_parse_item(" 1", &v), EJ_EINVAL);
    assert_int_equal(ej__layout_parse_item("instance", &v), EJ_EINVAL);
}

static void test_latch_names(void **state)
{
    (void)state;
    char uuid[37];
    ej__layout_uuid4(uuid);
    assert_int_equal(strlen(uuid), 36);
    assert_int_equal(uuid[8], '-');
    assert_int_equal(uuid[13], '-');
    assert_int_equal(uuid[14], '4'); /* version 4 */
    assert_true(strchr("89ab", uuid[19]) != NULL);
    char other[37];
    ej__layout_uuid4(other);
    assert_string_not_equal(uuid, other);

    char prefix[EJ__LATCH_PREFIX_LEN + 1];
    assert_int_equal(
        ej__layout_latch_node_prefix("bccccdcc-1134-4e0a-bb52-59a13836434a", prefix, sizeof prefix), 0);
    /* As in the ElasticJob FAQ: 40 characters of protection prefix. */
    assert_string_equal(prefix, "_c_bccccdcc-1134-4e0a-bb52-59a13836434a-latch-");
    assert_int_equal(strlen("_c_bccccdcc-1134-4e0a-bb52-59a13836434a-"), 40);
    assert_int_equal(ej__layout_latch_node_prefix("short", prefix, sizeof prefix), EJ_EINVAL);

    assert_string_equal(ej__layout_latch_sort_key("_c_x-latch-0000000047"), "0000000047");
    /* The LAST "latch-": a UUID can never contain it, but a name may. */
    assert_string_equal(ej__layout_latch_sort_key("latch-a-latch-0000000003"), "0000000003");
    assert_string_equal(ej__layout_latch_sort_key("plain"), "plain");

    char *names[] = {
        strdup("_c_ffffffff-0000-4000-8000-000000000000-latch-0000000012"),
        strdup("_c_00000000-0000-4000-8000-000000000000-latch-0000000047"),
        strdup("_c_aaaaaaaa-0000-4000-8000-000000000000-latch-0000000003"),
        strdup("_c_bbbbbbbb-0000-4000-8000-000000000000-latch-0000000100"),
    };
    ej__layout_latch_sort(names, 4);
    /* By sequence, not by UUID. */
    assert_string_equal(ej__layout_latch_sort_key(names[0]), "0000000003");
    assert_string_equal(ej__layout_latch_sort_key(names[1]), "0000000012");
    assert_string_equal(ej__layout_latch_sort_key(names[2]), "0000000047");
    assert_string_equal(ej__layout_latch_sort_key(names[3]), "0000000100");
    assert_int_equal(ej__layout_latch_find(names, 4, "bbbbbbbb-0000-4000-8000-000000000000"), 3);
    assert_int_equal(ej__layout_latch_find(names, 4, "cccccccc-0000-4000-8000-000000000000"), -1);
    for (int i = 0; i < 4; i++)
        free(names[i]);
}

static void test_failover_item_order(void **state)
{
    (void)state;
    /* ElasticJob takes the greatest item STRING first: "9" before "10". */
    int items[] = {10, 9, 2, 100, 1};
    ej__layout_items_sort_desc(items, 5);
    int want[] = {9, 2, 100, 10, 1};
    assert_memory_equal(items, want, sizeof want);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_paths),          cmocka_unit_test(test_instance_ids),
        cmocka_unit_test(test_exact_ip_match), cmocka_unit_test(test_parse_item),
        cmocka_unit_test(test_latch_names),    cmocka_unit_test(test_failover_item_order),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
