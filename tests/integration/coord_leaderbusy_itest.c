/*
 * A leader busy with its own items still reshards when it must (issue:
 * a 45 s job, cron every minute, 3 items on 3 instances; after a kill -9
 * the leader ran the dead instance's item as a failover and the followers
 * logged "fire not run (leader-wait)" at the next two fires).
 *
 * Scaled down: 3 items of 8 s (the leader's own item 6 s, so that it is
 * the one idle first and takes the failover item), cron every 10 s, session
 * 3000 ms, wait bound 3000 ms (8 s runs against a 3 s bound: the 45 s runs
 * against the 10 s bound of the issue). A follower is killed 2 s into a
 * period while its item runs; the leader takes that item over at +6 and
 * runs it until +14, past the follower's next fire at +10. Expected: no
 * fire of anyone is "not run (leader-wait)", every item runs after the
 * kill, and no item ever runs on two instances at once.
 *
 * One round by default (CI); EJ_TAKEOVER_ROUNDS=5 (or --rounds 5) for the
 * full check.
 */
#include "coord_harness_itest.c"

static const char *JOB = "busyJob";
#define SESSION_MS 3000
#define PERIOD_MS 10000

static int64_t next_period(int64_t t, int64_t offset)
{
    return next_multiple(t, PERIOD_MS, offset);
}

static int round_run(zkf_server *zk, int round, void *user)
{
    (void)user;
    struct round_env e;
    round_begin(zk, "busy", round, &e);
    const char *servers = e.servers, *ns = e.ns, *log = e.log;
    ej_registry *reg = e.reg;

    /* Node 0 starts first and leads; ids sort in reverse, so the node of
     * the highest IP gets item 0, the lowest (the leader) item 2. */
    const char *ips[] = {"127.0.1.41", "127.0.1.42", "127.0.1.43"};
    int n[3];
    for (int i = 0; i < 3; i++) {
        n[i] = node_start(servers, ns, JOB, log, ips[i], "--count", "3", "--cron", "0/10 * * * * ?",
                          "--item-ms", "8000", "--long-item", "2:6000", "--failover",
                          "--session-ms", "3000", "--wait-bound-ms", "3000", NULL);
        REQUIRE(n[i] >= 0, "node %d", i);
    }
    REQUIRE(wait_sharded(reg, JOB, 3, 15000), "initial sharding");
    char *leader = leader_of(reg, JOB);
    REQUIRE(leader && node_index(leader) == n[0], "leader %s is not node 0",
            leader ? leader : "(none)");
    free(leader);
    char *owners[3] = {0};
    zk_owners(reg, JOB, 3, owners);
    REQUIRE(owners[2] && strcmp(owners[2], nodes[n[0]].id) == 0, "item 2 is not the leader's");
    REQUIRE(owners[1] && strcmp(owners[1], nodes[n[1]].id) == 0, "item 1 is not node 1's");
    free_owners(owners, 3);

    /* Let one full period run, then kill node 1 2 s into the next one,
     * while its item 1 runs. */
    sleep_until_wall(next_period(next_period(ej__now_ms(), 0), 2000));
    node_kill9(n[1]);
    int64_t killed = nodes[n[1]].killed_at;
    int64_t end = next_period(killed, 0) + 3 * PERIOD_MS + 9000;
    sleep_until_wall(end);

    CHECK(notrun_lines(log, "leader-wait", killed, -1, 0) == 0,
          "round %d: fires not run for leader-wait after the kill", round);
    struct xlog xl;
    xlog_read(log, &xl);
    /* Every item runs in each of the three periods after the one of the
     * kill (a late start counts for its period: runs can be delayed by
     * the failover run, never skipped). */
    for (int p = 1; p <= 3; p++) {
        int64_t from = next_period(killed, 0) + (p - 1) * PERIOD_MS;
        for (int item = 0; item < 3; item++)
            CHECK(runs_of(&xl, item, from, from + PERIOD_MS + 8000, NULL) >= 1,
                  "round %d: item %d did not run for the fire at +%" PRId64 " ms after the kill",
                  round, item, from - killed);
    }
    CHECK(check_no_overlap(&xl) == 0, "round %d: overlapping runs", round);
    int fo = runs_of(&xl, 1, killed, end, "FAILOVER");
    say("round %d: %d failover run(s) of item 1", round, fo);
    CHECK(fo == 1, "round %d: %d failover runs of item 1 (want 1)", round, fo);
    xlog_free(&xl);
    return round_end(&e, round);
}

int main(int argc, char **argv)
{
    return run_rounds(argc, argv, 1, "coord_leaderbusy", round_run, NULL);
}
