/*
 * Failover when several instances die at once: kill -9 two of four
 * instances while each runs its item. Their sessions expire in one tick of
 * the server, as two close transactions one after the other, and a
 * survivor reads instances/ only after both: its children zxid is the
 * second close. Each crashed item must still run once, as FAILOVER, on a
 * survivor, and no item ever runs on two instances at once. (Compared with
 * instances/ alone, the item of the session that closed first was never
 * failed over: it waited for the next fire.)
 */
#include "coord_harness_itest.c"

static const char *JOB = "mcJob";
#define SESSION_MS 2000
#define ITEMS 4

int main(void)
{
    harness_init();
    zkf_server *zk = zkf_shared();
    REQUIRE(zk != NULL, "zookeeper");
    const char *servers = zkf_connect_string(zk);
    char *ns = zkf_unique_namespace("multicrash");
    char *log = tmp_log("multicrash");
    ej_registry *reg = zk_connect(servers, ns);
    char sess[16];
    snprintf(sess, sizeof sess, "%d", SESSION_MS);

    /* One item each; every item runs 1.5 s of a 6 s period. */
    const char *ips[] = {"127.0.1.31", "127.0.1.32", "127.0.1.33", "127.0.1.34"};
    int n[4];
    for (int i = 0; i < 4; i++) {
        n[i] = node_start(servers, ns, JOB, log, ips[i], "--count", "4", "--cron",
                          "0/6 * * * * ?", "--item-ms", "1500", "--failover", "--session-ms", sess,
                          NULL);
        REQUIRE(n[i] >= 0, "node %d", i);
    }
    REQUIRE(wait_sharded(reg, JOB, ITEMS, 15000), "initial sharding");
    char *leader = leader_of(reg, JOB);
    char *owners[ITEMS] = {0};
    zk_owners(reg, JOB, ITEMS, owners);
    /* The victims: two instances that are not the leader (an election is
     * not what this test is about), with their items. */
    int victims[2], vitem[2], nv = 0;
    for (int it = 0; it < ITEMS && nv < 2; it++) {
        int idx = owners[it] ? node_index(owners[it]) : -1;
        if (idx >= 0 && leader != NULL && strcmp(owners[it], leader) != 0) {
            victims[nv] = idx;
            vitem[nv] = it;
            nv++;
        }
    }
    free_owners(owners, ITEMS);
    REQUIRE(nv == 2, "two non-leader owners (leader %s)", leader ? leader : "(none)");

    /* Kill both 400 ms into a fire in which both items started. */
    bool seen = false;
    for (int k = 0; k < 200 && !seen; k++) {
        struct xlog xl;
        xlog_read(log, &xl);
        int open = 0;
        for (size_t i = 0; i < xl.n; i++) {
            struct run *r = &xl.runs[i];
            for (int v = 0; v < 2; v++)
                if (r->item == vitem[v] && strcmp(r->inst, nodes[victims[v]].id) == 0 &&
                    r->end == INT64_MAX && ej__now_ms() - r->start < 300)
                    open++;
        }
        xlog_free(&xl);
        seen = open == 2;
        if (!seen)
            ej__sleep_ms(30);
    }
    REQUIRE(seen, "the victims' items never ran together");
    ej__sleep_ms(400);
    kill(nodes[victims[0]].pid, SIGKILL);
    kill(nodes[victims[1]].pid, SIGKILL);
    node_kill9(victims[0]);
    node_kill9(victims[1]);
    int64_t killed = nodes[victims[1]].killed_at;

    /* Both items run again as FAILOVER before the next fire (6 s period:
     * the next one is 5.2 s after the kill); session + margin + the
     * survivors' own 1.5 s items fit. */
    ej__sleep_ms(5000);
    int64_t end = killed + 5000;
    struct xlog xl;
    xlog_read(log, &xl);
    for (int v = 0; v < 2; v++) {
        int fo = runs_of(&xl, vitem[v], killed, end, "FAILOVER");
        CHECK(fo == 1, "item %d of %s: %d failover run(s) before the next fire (want 1)", vitem[v],
              nodes[victims[v]].id, fo);
        say_failovers(&xl, vitem[v], killed);
    }
    CHECK(check_no_overlap(&xl) == 0, "overlapping runs");
    xlog_free(&xl);

    for (int i = 0; i < 4; i++)
        node_stop(n[i]);
    free(leader);
    ej_registry_destroy(reg);
    unlink(log);
    free(log);
    free(ns);
    if (failures) {
        fprintf(stderr, "%d check(s) failed\n", failures);
        return 1;
    }
    fprintf(stderr, "coord_multicrash: all checks passed\n");
    return 0;
}
