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
    return (t / PERIOD_MS + 1) * PERIOD_MS + offset;
}

static void sleep_until(int64_t wall_ms)
{
    int64_t d = wall_ms - ej__now_ms();
    if (d > 0)
        ej__sleep_ms(d);
}

/* A NOTRUN line (testnode.c) of reason missed naming item and holding t. */
static int missed_reports(const char *log, int item, int64_t t)
{
    FILE *f = fopen(log, "r");
    if (f == NULL)
        return 0;
    char line[1024];
    int k = 0;
    while (fgets(line, sizeof line, f)) {
        char inst[128], r[32], items[256];
        long long at = 0, first = 0, last = 0;
        unsigned count = 0;
        if (sscanf(line, "NOTRUN %lld %127s %31s %u %lld %lld %255s", &at, inst, r, &count, &first,
                   &last, items) != 7 ||
            strcmp(r, "missed") != 0 || t < first || t > last)
            continue;
        char want[16];
        snprintf(want, sizeof want, "%d", item);
        /* items as "[0,3]" */
        for (char *p = strtok(items, "[],"); p; p = strtok(NULL, "[],"))
            if (strcmp(p, want) == 0)
                k++;
    }
    fclose(f);
    return k;
}

static int notrun_lines(const char *log, const char *reason)
{
    FILE *f = fopen(log, "r");
    if (f == NULL)
        return 0;
    char line[1024];
    int k = 0;
    while (fgets(line, sizeof line, f)) {
        char inst[128], r[32];
        long long at = 0;
        if (sscanf(line, "NOTRUN %lld %127s %31s", &at, inst, r) == 3 && strcmp(r, reason) == 0)
            k++;
    }
    fclose(f);
    return k;
}

static int round_run(zkf_server *zk, int round, int *lost_total, int *caught, int *reported)
{
    bool misfire = round % 2 == 1;
    const char *servers = zkf_connect_string(zk);
    char tag[32];
    snprintf(tag, sizeof tag, "take%d", round);
    char *ns = zkf_unique_namespace(tag);
    char *log = tmp_log(tag);
    ej_registry *reg = zk_connect(servers, ns);
    int before = failures;
    nnodes = 0;

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
    sleep_until(next_period(next_period(ej__now_ms(), 0), 8000));
    node_kill9(victim);
    int64_t killed = nodes[victim].killed_at;
    int64_t first_fire = next_period(killed, 0);
    int64_t end = first_fire + 3 * PERIOD_MS + 4000;
    sleep_until(end);

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
            int rep = missed_reports(log, item, t);
            say("round %d: item %d, fire +%" PRId64 " ms after the kill: not started; %d "
                "'missed' report(s)",
                round, item, t - killed, rep);
            if (!misfire)
                CHECK(rep == 1,
                      "round %d: item %d's fire at +%" PRId64 " ms after the kill: %d "
                      "'missed' reports (want 1)",
                      round, item, t - killed, rep);
            *reported += rep;
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
        *lost_total += lost;
        *caught += catchups;
    }
    if (misfire)
        CHECK(notrun_lines(log, "missed") == 0, "round %d: 'missed' reported with misfire on",
              round);
    xlog_free(&xl);

    for (int i = 0; i < 3; i++)
        node_stop(n[i]);
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
    int rounds = getenv("EJ_TAKEOVER_ROUNDS") ? atoi(getenv("EJ_TAKEOVER_ROUNDS")) : 2;
    if (argc == 3 && strcmp(argv[1], "--rounds") == 0)
        rounds = atoi(argv[2]);
    if (rounds < 1)
        rounds = 1;
    zkf_server *zk = zkf_shared();
    REQUIRE(zk != NULL, "zookeeper");
    int bad = 0, lost = 0, caught = 0, reported = 0;
    for (int r = 1; r <= rounds; r++) {
        int rc = round_run(zk, r, &lost, &caught, &reported);
        bad += rc;
        say("round %d of %d (misfire %s): %s", r, rounds, r % 2 ? "on" : "off",
            rc ? "FAILED" : "passed");
    }
    say("%d round(s): %d fire time(s) lost, %d caught up (MISFIRE), %d reported missed", rounds,
        lost, caught, reported);
    if (failures) {
        fprintf(stderr, "%d check(s) failed in %d of %d round(s)\n", failures, bad, rounds);
        return 1;
    }
    fprintf(stderr, "coord_takeover: all checks passed in %d round(s)\n", rounds);
    return 0;
}
