/*
 * Fire times lost while an owner was dead but its session not yet expired
 * (docs/coordination.md "Takeover"). Three instances, 4 items of 1.5 s,
 * cron every 10 s, session 3000 ms; the owner of some items is killed with
 * -9 8 s into a period. The next fire comes 2 s after the kill, before the
 * server expires the dead session: the others still see those items as the
 * dead instance's and nobody runs them. Expected, for every fire time of a
 * dead instance's item that no instance started: with misfire on, exactly
 * one MISFIRE run of the item after the kill (the catch-up, by its new
 * owner); with misfire off, a "fire not run (missed)" event naming the item
 * and a range holding that fire time. None is silent; a fire time the dead
 * instance did start is not run again; no item runs twice at once.
 *
 * Rounds alternate: misfire on with a follower killed (it owns 2 items),
 * misfire off with the leader killed. Two rounds by default (CI);
 * EJ_TAKEOVER_ROUNDS=5 (or --rounds 5) for the full check.
 */
#include "coord_harness_itest.c"

static const char *JOB = "takeJob";
#define PERIOD_MS 10000
#define COUNT 4

static int64_t next_period(int64_t t, int64_t offset)
{
    return next_multiple(t, PERIOD_MS, offset);
}

struct totals {
    int lost, caught, reported;
};

static int round_run(zkf_server *zk, int round, void *user)
{
    struct totals *tot = user;
    bool misfire = round % 2 == 1;
    struct round_env e;
    round_begin(zk, "take", round, &e);
    const char *servers = e.servers, *ns = e.ns, *log = e.log;
    ej_registry *reg = e.reg;

    /* Node 0 starts first and leads; ids sort in reverse: node 2 gets items
     * 0 and 3, node 1 item 1, node 0 (the leader) item 2. */
    const char *ips[] = {"127.0.1.51", "127.0.1.52", "127.0.1.53"};
    int n[3];
    for (int i = 0; i < 3; i++) {
        n[i] = node_start(servers, ns, JOB, log, ips[i], "--count", "4", "--cron", "0/10 * * * * ?",
                          "--item-ms", "1500", "--failover", "--session-ms", "3000",
                          misfire ? NULL : "--no-misfire", NULL);
        REQUIRE(n[i] >= 0, "node %d", i);
    }
    REQUIRE(wait_sharded(reg, JOB, COUNT, 15000), "initial sharding");
    int victim = misfire ? n[2] : n[0];
    char *leader = leader_of(reg, JOB);
    REQUIRE(leader && node_index(leader) == n[0], "leader %s is not node 0",
            leader ? leader : "(none)");
    free(leader);
    char *owners[COUNT] = {0};
    zk_owners(reg, JOB, COUNT, owners);
    bool dead_item[COUNT] = {false};
    int ndead = 0;
    for (int i = 0; i < COUNT; i++)
        if (owners[i] && strcmp(owners[i], nodes[victim].id) == 0) {
            dead_item[i] = true;
            ndead++;
        }
    free_owners(owners, COUNT);
    REQUIRE(ndead > 0, "the victim owns no item");

    /* A full period first, then the kill 8 s into the next one (its
     * items of 1.5 s are done by then: nothing to fail over). */
    sleep_until_wall(next_period(next_period(ej__now_ms(), 0), 8000));
    node_kill9(victim);
    int64_t killed = nodes[victim].killed_at;
    int64_t first_fire = next_period(killed, 0);
    int64_t end = first_fire + 3 * PERIOD_MS + 4000;
    sleep_until_wall(end);

    struct xlog xl;
    xlog_read(log, &xl);
    CHECK(check_no_overlap(&xl) == 0, "round %d: overlapping runs", round);
    for (int item = 0; item < COUNT; item++) {
        if (!dead_item[item])
            continue;
        int lost = 0;
        for (int p = 0; p < 3; p++) {
            int64_t t = first_fire + p * PERIOD_MS;
            if (runs_of(&xl, item, t, t + PERIOD_MS, "NORMAL_TRIGGER") > 0)
                continue;
            lost++;
            int rep = notrun_lines(log, "missed", killed, item, t);
            say("round %d: item %d, fire +%" PRId64 " ms after the kill: not started; %d "
                "'missed' report(s)",
                round, item, t - killed, rep);
            if (!misfire)
                CHECK(rep == 1,
                      "round %d: item %d's fire at +%" PRId64 " ms after the kill: %d "
                      "'missed' reports (want 1)",
                      round, item, t - killed, rep);
            tot->reported += rep;
        }
        int catchups = runs_of(&xl, item, killed, end, "MISFIRE");
        say("round %d: item %d: %d fire time(s) lost, %d MISFIRE run(s)", round, item, lost,
            catchups);
        CHECK(lost >= 1, "round %d: item %d lost no fire time: the case did not happen", round,
              item);
        if (misfire)
            CHECK(catchups == (lost > 0 ? 1 : 0),
                  "round %d: item %d: %d MISFIRE runs for %d lost fire time(s) (want one)", round,
                  item, catchups, lost);
        else
            CHECK(catchups == 0, "round %d: item %d: %d MISFIRE runs with misfire off", round, item,
                  catchups);
        tot->lost += lost;
        tot->caught += catchups;
    }
    if (misfire)
        CHECK(notrun_lines(log, "missed", 0, -1, 0) == 0,
              "round %d: 'missed' reported with misfire on", round);
    xlog_free(&xl);
    return round_end(&e, round);
}

int main(int argc, char **argv)
{
    struct totals tot = {0};
    int rc = run_rounds(argc, argv, 2, "coord_takeover", round_run, &tot);
    say("fire times lost: %d, caught up (MISFIRE): %d, reported missed: %d", tot.lost, tot.caught,
        tot.reported);
    return rc;
}
