/*
 * Failover: kill -9 the leader while it runs an item. Each instance is
 * alone on its (simulated) IP, the case ElasticJob 2.1.5 never fails over
 * (EJ#669). Expected: a new leader within the session timeout + 1 s; the
 * crashed instance's RUNNING item runs once, as FAILOVER, within that
 * bound; its idle items run at the next fire after resharding; afterwards
 * every item has exactly one live owner; no item ever runs on two instances
 * at once.
 */
#include "coord_harness_itest.c"

static const char *JOB = "foJob";
#define SESSION_MS 2000

int main(void)
{
    harness_init();
    zkf_server *zk = zkf_shared();
    REQUIRE(zk != NULL, "zookeeper");
    const char *servers = zkf_connect_string(zk);
    char *ns = zkf_unique_namespace("failover");
    char *log = tmp_log("failover");
    ej_registry *reg = zk_connect(servers, ns);
    char sess[16];
    snprintf(sess, sizeof sess, "%d", SESSION_MS);

    /* The first instance becomes the leader and, with the lowest id, gets
     * items 6, 7, 8 (average over ids in reverse order). Its item 7 takes
     * 1.6 s, every other item 100 ms: 300 ms after a fire, item 7 is the
     * only one running, and the survivors are idle, free to take it. */
    const char *ips[] = {"127.0.1.21", "127.0.1.22", "127.0.1.23"};
    int n[3];
    for (int i = 0; i < 3; i++) {
        n[i] = node_start(servers, ns, JOB, log, ips[i], "--count", "9", "--cron", "0/2 * * * * ?",
                          "--item-ms", "100", "--long-item", i == 0 ? "7:1600" : "99:0",
                          "--failover", "--session-ms", sess, NULL);
        REQUIRE(n[i] >= 0, "node %d", i);
    }
    REQUIRE(wait_sharded(reg, JOB, 9, 15000), "initial sharding");
    char *leader = leader_of(reg, JOB);
    int li = node_index(leader);
    REQUIRE(li >= 0, "leader %s", leader ? leader : "(none)");
    char *owners[9] = {0};
    zk_owners(reg, JOB, 9, owners);
    int mine[9], nmine = 0, long_item = -1;
    for (int i = 0; i < 9; i++)
        if (owners[i] && strcmp(owners[i], leader) == 0) {
            mine[nmine++] = i;
            if (i == 7)
                long_item = i;
        }
    free_owners(owners, 9);
    REQUIRE(li == n[0] && nmine == 3 && long_item >= 0, "leader %s owns %d items", leader, nmine);
    say("leader %s owns %d,%d,%d; long item %d", leader, mine[0], mine[1], mine[2], long_item);

    /* Wait for a fire in which the leader's long item started, then kill
     * it while that item runs (its short items are done by then). */
    int64_t seen_start = 0;
    for (int k = 0; k < 100 && !seen_start; k++) {
        struct xlog xl;
        xlog_read(log, &xl);
        for (size_t i = 0; i < xl.n; i++)
            if (xl.runs[i].item == long_item && strcmp(xl.runs[i].inst, leader) == 0 &&
                xl.runs[i].end == INT64_MAX && ej__now_ms() - xl.runs[i].start < 400)
                seen_start = xl.runs[i].start;
        xlog_free(&xl);
        if (!seen_start)
            ej__sleep_ms(50);
    }
    REQUIRE(seen_start, "the leader's long item never started");
    ej__sleep_ms(400);
    node_kill9(li);
    int64_t killed = nodes[li].killed_at;

    /* A new leader within the session timeout + 1 s. */
    int64_t new_leader_at = 0;
    char *nl = NULL;
    while (ej__now_ms() < killed + SESSION_MS + 3000) {
        nl = leader_of(reg, JOB);
        if (nl && strcmp(nl, leader) != 0 && node_index(nl) >= 0) {
            new_leader_at = ej__now_ms();
            break;
        }
        free(nl);
        nl = NULL;
        ej__sleep_ms(20);
    }
    CHECK(new_leader_at > 0, "no new leader");
    say("new leader %s after %" PRId64 " ms", nl ? nl : "(none)", new_leader_at - killed);
    /* The server may expire a session up to one tick (200 ms) late. */
    CHECK(new_leader_at - killed <= SESSION_MS + 1000 + 200, "new leader after %" PRId64 " ms",
          new_leader_at - killed);
    free(nl);

    ej__sleep_ms(6000);
    REQUIRE(wait_sharded(reg, JOB, 9, 10000), "resharding after the crash");
    int64_t settled = ej__now_ms();
    ej__sleep_ms(4500);
    int64_t end = ej__now_ms();

    struct xlog xl;
    xlog_read(log, &xl);
    /* The running item ran once as FAILOVER, within session + 1 s. */
    int fo_runs = 0;
    for (size_t i = 0; i < xl.n; i++) {
        struct run *r = &xl.runs[i];
        if (strcmp(r->src, "FAILOVER") != 0)
            continue;
        fo_runs++;
        CHECK(r->item == long_item, "item %d failed over, but it was not running", r->item);
        CHECK(r->start - killed <= SESSION_MS + 1000 + 200,
              "failover run %" PRId64 " ms after the kill", r->start - killed);
        CHECK(strcmp(r->inst, leader) != 0, "failover run on the dead instance");
        say("failover run of item %d on %s %" PRId64 " ms after the kill", r->item, r->inst,
            r->start - killed);
    }
    CHECK(fo_runs == 1, "%d failover runs (want exactly 1)", fo_runs);
    CHECK(runs_of(&xl, long_item, killed, end, "FAILOVER") == 1, "item %d failover runs",
          long_item);
    /* The idle items of the dead instance run again at a fire after the
     * resharding; every item runs once settled. */
    for (int k = 0; k < 3; k++) {
        if (mine[k] == long_item)
            continue;
        CHECK(runs_of(&xl, mine[k], killed, end, "NORMAL_TRIGGER") >= 1,
              "idle item %d of the dead instance never ran again", mine[k]);
        CHECK(runs_of(&xl, mine[k], killed, end, "FAILOVER") == 0, "idle item %d was failed over",
              mine[k]);
    }
    CHECK(check_all_ran(&xl, 9, settled, end) == 0, "all items ran after resharding");
    CHECK(check_no_overlap(&xl) == 0, "overlapping runs");
    xlog_free(&xl);

    /* Exactly one live owner per item; no failover leftovers. */
    zk_owners(reg, JOB, 9, owners);
    for (int i = 0; i < 9; i++) {
        CHECK(owners[i] && node_index(owners[i]) >= 0 && nodes[node_index(owners[i])].alive,
              "item %d owned by %s", i, owners[i] ? owners[i] : "(none)");
        CHECK(!zk_exists(reg, "/%s/sharding/%d/failover", JOB, i), "failover node of item %d", i);
    }
    free_owners(owners, 9);
    char **fi = NULL;
    size_t nfi = zk_children(reg, &fi, "/%s/leader/failover/items", JOB);
    CHECK(nfi == 0, "%zu failover items left", nfi);
    ej_registry_free_names(fi);

    for (int i = 0; i < 3; i++)
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
    fprintf(stderr, "coord_failover: all checks passed\n");
    return 0;
}
