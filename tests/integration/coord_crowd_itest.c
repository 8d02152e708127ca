/*
 * A crash in a crowd: six instances of one job, one killed -9 while it
 * runs its item. Its item must run once as FAILOVER on a survivor before
 * the next fire, without overlap, and recorded by one survivor: the first
 * recorder (the leader) records at once and the others give it time; being
 * idle, it takes the item itself under the same latch, so it is the only
 * contender there. When every survivor recorded, each held the failover
 * latch in turn, for nothing but the first, and a fleet's failover waited
 * for the whole queue. The instances' logs (their stderr, a file here)
 * tell who recorded. Then the leader is killed: the survivors elect in
 * turn, so one or two of them come to the election latch, not all; and
 * again with an election that takes seconds (the test holds the latch).
 */
#include "coord_harness_itest.c"

static const char *JOB = "crowdJob";
#define SESSION_MS 2000
#define NODES 6

/* A leader other than old, within 10 s, or NULL. Caller frees. */
static char *new_leader(ej_registry *reg, const char *old)
{
    for (int k = 0; k < 200; k++) {
        ej__sleep_ms(50);
        char *nl = leader_of(reg, JOB);
        if (nl && strcmp(nl, old) != 0)
            return nl;
        free(nl);
    }
    return NULL;
}

/* How long until margin_ms after the next fire of a cron that fires every
 * period_ms from each minute's start (0/8: seconds 0, 8, ..., 56). */
static int past_next_fire_ms(int period_ms, int margin_ms)
{
    struct timespec ts;
    clock_gettime(CLOCK_REALTIME, &ts);
    int in_minute = (int)(ts.tv_sec % 60) * 1000 + (int)(ts.tv_nsec / 1000000);
    int next = (in_minute / period_ms + 1) * period_ms;
    if (next > 60000)
        next = 60000;
    return next - in_minute + margin_ms;
}

int main(void)
{
    harness_init();
    zkf_server *zk = zkf_shared();
    REQUIRE(zk != NULL, "zookeeper");
    const char *servers = zkf_connect_string(zk);
    char *ns = zkf_unique_namespace("crowd");
    char *log = tmp_log("crowd");
    ej_registry *reg = zk_connect(servers, ns);
    char sess[16];
    snprintf(sess, sizeof sess, "%d", SESSION_MS);

    /* The instances' logs go to a file (they inherit stderr). */
    char *nlog = tmp_log("crowd-nodes");
    int saved = dup(2);
    int lfd = open(nlog, O_WRONLY | O_CREAT | O_TRUNC, 0600);
    REQUIRE(saved >= 0 && lfd >= 0 && dup2(lfd, 2) == 2, "node log %s", nlog);
    close(lfd);
    /* One item each; every item runs 1 s of an 8 s period. */
    int n[NODES];
    for (int i = 0; i < NODES; i++) {
        char ip[32];
        snprintf(ip, sizeof ip, "127.0.1.%d", 41 + i);
        n[i] = node_start(servers, ns, JOB, log, ip, "--count", "6", "--cron", "0/8 * * * * ?",
                          "--item-ms", "1000", "--failover", "--session-ms", sess, NULL);
        if (n[i] < 0)
            dup2(saved, 2);
        REQUIRE(n[i] >= 0, "node %d", i);
    }
    dup2(saved, 2);
    close(saved);
    REQUIRE(wait_sharded(reg, JOB, NODES, 20000), "initial sharding");
    char *leader = leader_of(reg, JOB);
    char *owners[NODES] = {0};
    zk_owners(reg, JOB, NODES, owners);
    int victim = -1, vitem = -1;
    for (int it = 0; it < NODES && victim < 0; it++) {
        int idx = owners[it] ? node_index(owners[it]) : -1;
        if (idx >= 0 && leader != NULL && strcmp(owners[it], leader) != 0) {
            victim = idx;
            vitem = it;
        }
    }
    free_owners(owners, NODES);
    REQUIRE(victim >= 0, "a non-leader owner (leader %s)", leader ? leader : "(none)");

    /* Kill it 300 ms into a run of its item. */
    bool seen = false;
    for (int k = 0; k < 400 && !seen; k++) {
        struct xlog xl;
        xlog_read(log, &xl);
        for (size_t i = 0; i < xl.n; i++) {
            struct run *r = &xl.runs[i];
            if (r->item == vitem && strcmp(r->inst, nodes[victim].id) == 0 &&
                r->end == INT64_MAX && ej__now_ms() - r->start < 200)
                seen = true;
        }
        xlog_free(&xl);
        if (!seen)
            ej__sleep_ms(30);
    }
    REQUIRE(seen, "the victim's item never ran");
    ej__sleep_ms(300);
    char latch[128];
    snprintf(latch, sizeof latch, "/%s/leader/failover/latch", JOB);
    struct ej_node_stat st0 = {0};
    bool ex0 = false;
    REQUIRE(ej_registry_exists(reg, latch, &ex0, &st0) == 0, "latch before");
    kill(nodes[victim].pid, SIGKILL);
    node_kill9(victim);
    int64_t killed = nodes[victim].killed_at;

    /* Its item runs again as FAILOVER before the next fire (7.5 s after
     * the kill): session, the takeover margin and the recording fit. */
    ej__sleep_ms(6500);
    int64_t end = killed + 6500;
    struct xlog xl;
    xlog_read(log, &xl);
    int fo = runs_of(&xl, vitem, killed, end, "FAILOVER");
    CHECK(fo == 1, "item %d: %d failover run(s) before the next fire (want 1)", vitem, fo);
    say_failovers(&xl, vitem, killed);
    CHECK(check_no_overlap(&xl) == 0, "overlapping runs");
    xlog_free(&xl);
    struct ej_node_stat st1 = {0};
    bool ex1 = false;
    REQUIRE(ej_registry_exists(reg, latch, &ex1, &st1) == 0 && ex1, "latch after");
    int acquisitions = (st1.cversion - (ex0 ? st0.cversion : 0)) / 2;
    say("%d contender(s) at the failover latch (recorders and takers)", acquisitions);
    char line[1024];
    int recorded = 0, took = 0;
    FILE *f = fopen(nlog, "r");
    REQUIRE(f != NULL, "node log");
    while (fgets(line, sizeof line, f)) {
        bool rec = strstr(line, "is gone while running items") != NULL ||
                   strstr(line, "were recorded already") != NULL;
        if (rec || strstr(line, "took over failover")) {
            fputs(line, stderr);
            recorded += rec;
            took += strstr(line, "took over failover") != NULL;
        }
    }
    fclose(f);
    CHECK(recorded == 1, "the crash was recorded by %d of the %d survivors (want 1)", recorded,
          NODES - 1);
    CHECK(took == 1, "the item was taken %d time(s)", took);
    /* The recorder, idle, takes the item itself under the latch it holds:
     * no record wakes the others to queue for it. */
    CHECK(acquisitions == 1, "%d contenders at the failover latch (want 1: the recorder took it)",
          acquisitions);

    /* The leader killed: the survivors elect one after the other, in
     * their rank's turn, and those after the winner's never write. When
     * all four elected at once, each created and deleted a latch node. */
    char el[128];
    snprintf(el, sizeof el, "/%s/leader/election/latch", JOB);
    struct ej_node_stat e0 = {0}, e1 = {0};
    bool eex0 = false, eex1 = false;
    REQUIRE(ej_registry_exists(reg, el, &eex0, &e0) == 0, "election latch before");
    int li = node_index(leader);
    REQUIRE(li >= 0 && li != victim, "leader");
    node_kill9(li);
    char *nl = new_leader(reg, leader);
    CHECK(nl != NULL, "no new leader 10 s after the leader's kill");
    say("new leader %s, %" PRId64 " ms after the kill", nl ? nl : "-",
        ej__now_ms() - nodes[li].killed_at);
    free(nl);
    ej__sleep_ms(1500); /* the later ranks' turns are over */
    REQUIRE(ej_registry_exists(reg, el, &eex1, &e1) == 0, "election latch after");
    int electors = eex1 ? (e1.cversion - (eex0 ? e0.cversion : 0)) / 2 : 0;
    say("%d of the %d survivors at the election latch", electors, NODES - 2);
    CHECK(electors <= 2, "%d of the %d survivors elected (want the first one or two)", electors,
          NODES - 2);

    /* A slow election (the test holds the latch for 2.5 s, longer than
     * every turn, as a loaded fleet's election takes seconds): the new
     * leader killed, the survivors whose turn comes find a member at the
     * latch and hold back; the first in turn elects when the test lets go.
     * When they did not look, all three queued at the latch. The hold
     * spans a fire, which finds no leader: when a fire elected at once,
     * all three queued again. */
    char *leader2 = leader_of(reg, JOB);
    int l2 = leader2 ? node_index(leader2) : -1;
    REQUIRE(l2 >= 0 && l2 != li && l2 != victim, "second leader");
    char hold[256];
    snprintf(hold, sizeof hold, "%s/_c_00000000-0000-4000-8000-000000000000-latch-", el);
    char *held = NULL;
    REQUIRE(ej_registry_create_node(reg, hold, NULL, 0, EJ_REG_EPHEMERAL_SEQUENTIAL, 0, &held) ==
                0,
            "hold the election latch");
    REQUIRE(ej_registry_exists(reg, el, &eex0, &e0) == 0 && eex0, "election latch before");
    node_kill9(l2);
    int64_t gone2 = wait_gone(reg, JOB, nodes[l2].id, 10000);
    REQUIRE(gone2, "the second leader's node went");
    int hold_ms = past_next_fire_ms(8000, 1000);
    ej__sleep_ms(hold_ms > 2500 ? hold_ms : 2500);
    REQUIRE(ej_registry_delete(reg, held, -1) == 0, "let go of the election latch");
    free(held);
    nl = new_leader(reg, leader2);
    CHECK(nl != NULL, "no third leader 10 s after the latch was let go");
    free(nl);
    ej__sleep_ms(1500);
    REQUIRE(ej_registry_exists(reg, el, &eex1, &e1) == 0 && eex1, "election latch after");
    /* cversion: the test's delete, then 2 per contender. */
    electors = (e1.cversion - e0.cversion - 1) / 2;
    say("slow election: %d of the %d survivors at the election latch", electors, NODES - 3);
    CHECK(electors <= 2, "slow election: %d of the %d survivors queued at the latch (want the "
                         "first one or two)",
          electors, NODES - 3);
    free(leader2);

    for (int i = 0; i < NODES; i++)
        node_stop(n[i]);
    free(leader);
    ej_registry_destroy(reg);
    unlink(log);
    free(log);
    unlink(nlog);
    free(nlog);
    free(ns);
    if (failures) {
        fprintf(stderr, "%d check(s) failed\n", failures);
        return 1;
    }
    fprintf(stderr, "coord_crowd: all checks passed\n");
    return 0;
}
