/*
 * A crash seen while ZooKeeper cannot be read. Two instances of one job;
 * the owner of an item is killed -9 while it runs it, and the survivor's
 * first crash checks fail as reads past the registry's retries would
 * (testnode --fail-crash-checks: a connection lost for seconds, as while
 * an ensemble elects). The survivor is the only one left to record the
 * crash: it must read again until it can, and run the item as FAILOVER
 * before the next fire. (Before, a check that could not be read dropped
 * the departure: the item was never failed over, and nothing said so.)
 */
#include "coord_harness_itest.c"

static const char *JOB = "recheckJob";
#define SESSION_MS 2000
#define ITEMS 2
#define FAULTS "3"

int main(void)
{
    harness_init();
    zkf_server *zk = zkf_shared();
    REQUIRE(zk != NULL, "zookeeper");
    const char *servers = zkf_connect_string(zk);
    char *ns = zkf_unique_namespace("recheck");
    char *log = tmp_log("recheck");
    ej_registry *reg = zk_connect(servers, ns);
    char sess[16];
    snprintf(sess, sizeof sess, "%d", SESSION_MS);

    /* The survivor runs its item 200 ms, the victim 7 s of a 10 s period. */
    int survivor = node_start(servers, ns, JOB, log, "127.0.1.71", "--count", "2", "--cron",
                              "0/10 * * * * ?", "--item-ms", "200", "--failover", "--session-ms",
                              sess, "--fail-crash-checks", FAULTS, NULL);
    REQUIRE(survivor >= 0, "survivor");
    int victim = node_start(servers, ns, JOB, log, "127.0.1.72", "--count", "2", "--cron",
                            "0/10 * * * * ?", "--item-ms", "7000", "--failover", "--session-ms",
                            sess, NULL);
    REQUIRE(victim >= 0, "victim");
    REQUIRE(wait_sharded(reg, JOB, ITEMS, 15000), "initial sharding");
    char *owners[ITEMS] = {0};
    zk_owners(reg, JOB, ITEMS, owners);
    int vitem = -1;
    for (int it = 0; it < ITEMS && vitem < 0; it++)
        if (owners[it] && node_index(owners[it]) == victim)
            vitem = it;
    free_owners(owners, ITEMS);
    REQUIRE(vitem >= 0, "the victim owns an item");

    /* Kill the victim 400 ms into a run of its item. */
    bool seen = false;
    for (int k = 0; k < 800 && !seen; k++) {
        struct xlog xl;
        xlog_read(log, &xl);
        for (size_t i = 0; i < xl.n && !seen; i++) {
            struct run *r = &xl.runs[i];
            seen = r->item == vitem && strcmp(r->inst, nodes[victim].id) == 0 &&
                   r->end == INT64_MAX && ej__now_ms() - r->start < 300;
        }
        xlog_free(&xl);
        if (!seen)
            ej__sleep_ms(30);
    }
    REQUIRE(seen, "the victim's item never ran");
    ej__sleep_ms(400);
    node_kill9(victim);
    int64_t killed = nodes[victim].killed_at;

    /* The next fire is about 9.3 s after the kill: the FAILOVER run comes
     * before it, after the session's expiry and the failed checks (read
     * again every 500 ms). */
    ej__sleep_ms(8500);
    int64_t end = killed + 8500;
    struct xlog xl;
    xlog_read(log, &xl);
    int fo = runs_of(&xl, vitem, killed, end, "FAILOVER");
    CHECK(fo == 1, "item %d: %d failover run(s) before the next fire (want 1)", vitem, fo);
    say_failovers(&xl, vitem, killed);
    CHECK(check_no_overlap(&xl) == 0, "overlapping runs");
    xlog_free(&xl);

    node_stop(survivor);
    ej_registry_destroy(reg);
    unlink(log);
    free(log);
    free(ns);
    if (failures) {
        fprintf(stderr, "%d check(s) failed\n", failures);
        return 1;
    }
    fprintf(stderr, "coord_recheck: all checks passed\n");
    return 0;
}
