/*
 * The view remembers the czxid of the latest failover node it saw for an
 * item after the node is gone: an item taken over since a crash (its
 * failover run may have ended already) is then known as such without a
 * request, and the instances that deferred recording the crash to the
 * first recorder take no turn at the failover latch for it
 * (failover.c item_handled). Against the real ZooKeeper, one view.
 */
#include "coord/internal.h"
#include "coord_harness_itest.c"

static const char *JOB = "viewFoJob";

/* The view's item 0 once cond(it) holds, within 5 s; false otherwise. */
static bool wait_item(ej__view *v, bool (*cond)(const struct ej__view_item *),
                      struct ej__view_item *out)
{
    for (int k = 0; k < 500; k++) {
        if (ej__view_get(v, 0, out) == 0) {
            if (cond(out))
                return true;
            ej__view_item_fini(out);
        }
        ej__sleep_ms(10);
    }
    return false;
}

static bool fo_present(const struct ej__view_item *it) { return it->failover_owner > 0; }
static bool fo_gone(const struct ej__view_item *it) { return it->failover_owner == 0; }

int main(void)
{
    harness_init();
    zkf_server *zk = zkf_shared();
    REQUIRE(zk != NULL, "zookeeper");
    char *ns = zkf_unique_namespace("viewfo");
    ej_registry *reg = zk_connect(zkf_connect_string(zk), ns);
    char path[128];
    snprintf(path, sizeof path, "/%s/sharding/0/instance", JOB);
    REQUIRE(ej_registry_create_node(reg, path, "127.0.0.9@-@1", 13, EJ_REG_PERSISTENT,
                                    EJ_REG_CREATE_PARENTS, NULL) == 0,
            "item 0");
    ej__view *v = NULL;
    REQUIRE(ej__view_create(reg, JOB, "127.0.0.8@-@2", NULL, NULL, &v) == 0, "view");
    ej__view_set_failover(v, true);
    REQUIRE(ej__view_start(v) == 0, "view start");

    struct ej__view_item it;
    REQUIRE(ej__view_get(v, 0, &it) == 0, "item 0 in the view");
    CHECK(it.failover_last_czxid == 0, "no failover seen yet: %" PRId64, it.failover_last_czxid);
    ej__view_item_fini(&it);

    /* Taken over: the failover node appears, then goes (the run ended). */
    snprintf(path, sizeof path, "/%s/sharding/0/failover", JOB);
    REQUIRE(ej_registry_create_node(reg, path, "127.0.0.7@-@3", 13, EJ_REG_EPHEMERAL, 0, NULL) ==
                0,
            "failover node");
    struct ej_node_stat st = {0};
    bool e = false;
    REQUIRE(ej_registry_exists(reg, path, &e, &st) == 0 && e, "failover stat");
    REQUIRE(wait_item(v, fo_present, &it), "the view shows the failover node");
    CHECK(it.failover_czxid == st.czxid && it.failover_last_czxid == st.czxid,
          "czxid %" PRId64 " / last %" PRId64 ", want %" PRId64, it.failover_czxid,
          it.failover_last_czxid, st.czxid);
    ej__view_item_fini(&it);
    REQUIRE(ej_registry_delete(reg, path, -1) == 0, "failover node deleted");
    REQUIRE(wait_item(v, fo_gone, &it), "the view shows the failover node gone");
    CHECK(it.failover_last_czxid == st.czxid,
          "after the node went: last czxid %" PRId64 ", want %" PRId64, it.failover_last_czxid,
          st.czxid);
    say("failover node czxid %" PRId64 " kept after it went", it.failover_last_czxid);
    ej__view_item_fini(&it);

    ej__view_destroy(v);
    ej_registry_delete_recursive(reg, "/");
    ej_registry_destroy(reg);
    free(ns);
    if (failures) {
        fprintf(stderr, "%d check(s) failed\n", failures);
        return 1;
    }
    fprintf(stderr, "coord_view_failover: all checks passed\n");
    return 0;
}
