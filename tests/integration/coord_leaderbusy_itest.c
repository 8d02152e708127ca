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

/* Wall ms of the next multiple of PERIOD_MS after t, plus offset. */
static int64_t next_period(int64_t t, int64_t offset)
{
    return (t / PERIOD_MS + 1) * PERIOD_MS + offset;
}

static void sleep_until(int64_t wall_ms)
{
    int64_t d = wall_ms - ej__now_ms();
    if (d > 0)
        ej__sleep_ms(d);
}

/* NOTRUN lines of reason in the log (see testnode.c). */
static int notrun_count(const char *log, const char *reason, int64_t from)
{
    FILE *f = fopen(log, "r");
    if (f == NULL)
        return 0;
    char line[1024];
    int k = 0;
    while (fgets(line, sizeof line, f)) {
        char inst[128], r[32];
        long long t = 0;
        if (sscanf(line, "NOTRUN %lld %127s %31s", &t, inst, r) == 3 && strcmp(r, reason) == 0 &&
            t >= from) {
            say("NOTRUN %s at +%lld ms: %s", inst, t - from, line);
            k++;
        }
    }
    fclose(f);
    return k;
}

static int round_run(zkf_server *zk, int round)
{
    const char *servers = zkf_connect_string(zk);
    char tag[32];
    snprintf(tag, sizeof tag, "busy%d", round);
    char *ns = zkf_unique_namespace(tag);
    char *log = tmp_log(tag);
    ej_registry *reg = zk_connect(servers, ns);
    int before = failures;
    nnodes = 0;

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
    char *owners[3] = {0};
    zk_owners(reg, JOB, 3, owners);
    REQUIRE(owners[2] && strcmp(owners[2], nodes[n[0]].id) == 0, "item 2 is not the leader's");
    REQUIRE(owners[1] && strcmp(owners[1], nodes[n[1]].id) == 0, "item 1 is not node 1's");
    free_owners(owners, 3);

    /* Let one full period run, then kill node 1 2 s into the next one,
     * while its item 1 runs. */
    sleep_until(next_period(next_period(ej__now_ms(), 0), 2000));
    node_kill9(n[1]);
    int64_t killed = nodes[n[1]].killed_at;
    int64_t end = next_period(killed, 0) + 3 * PERIOD_MS + 9000;
    sleep_until(end);

    CHECK(notrun_count(log, "leader-wait", killed) == 0,
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

    for (int i = 0; i < 3; i++)
        node_stop(n[i]);
    free(leader);
    ej_registry_destroy(reg);
    if (failures == before)
        unlink(log);
    else
        say("round %d failed: log kept in %s", round, log);
    free(log);
    free(ns);
    return failures == before ? 0 : 1;
}

int main(int argc, char **argv)
{
    harness_init();
    int rounds = getenv("EJ_TAKEOVER_ROUNDS") ? atoi(getenv("EJ_TAKEOVER_ROUNDS")) : 1;
    if (argc == 3 && strcmp(argv[1], "--rounds") == 0)
        rounds = atoi(argv[2]);
    if (rounds < 1)
        rounds = 1;
    zkf_server *zk = zkf_shared();
    REQUIRE(zk != NULL, "zookeeper");
    int bad = 0;
    for (int r = 1; r <= rounds; r++) {
        int rc = round_run(zk, r);
        bad += rc;
        say("round %d of %d: %s", r, rounds, rc ? "FAILED" : "passed");
    }
    if (failures) {
        fprintf(stderr, "%d check(s) failed in %d of %d round(s)\n", failures, bad, rounds);
        return 1;
    }
    fprintf(stderr, "coord_leaderbusy: all checks passed in %d round(s)\n", rounds);
    return 0;
}
