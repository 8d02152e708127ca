/*
 * The first recorder of a crash dies too. Five instances of one job; the
 * owner of an item is killed -9 while it runs it, and the leader, idle,
 * is frozen 1.5 s later (its session ends after the owner's). The
 * survivors see the owner's crash while the leader's node is still there:
 * the leader is to record it, and they wait (a session timeout). When the
 * leader's node goes, a survivor must record at once, not when its wait
 * ends. The election that follows is held up here (the test holds the
 * election latch, as a fleet's loaded election does for seconds): before,
 * only a new leader's arrival ended the wait, and a fleet whose killed
 * daemons led most jobs recorded their crashes a session timeout late.
 */
#include "coord_harness_itest.c"

static const char *JOB = "recorderJob";
#define SESSION_MS 4000
#define NODES 5

/* The wall ms of a node log line ("2026-11-27T21:02:46.600Z ..."), or 0. */
static int64_t line_ms(const char *line)
{
    struct tm tm;
    int ms = 0;
    memset(&tm, 0, sizeof tm);
    if (sscanf(line, "%4d-%2d-%2dT%2d:%2d:%2d.%3dZ", &tm.tm_year, &tm.tm_mon, &tm.tm_mday,
               &tm.tm_hour, &tm.tm_min, &tm.tm_sec, &ms) != 7)
        return 0;
    tm.tm_year -= 1900;
    tm.tm_mon -= 1;
    return (int64_t)timegm(&tm) * 1000 + ms;
}

/* Start the nodes, their logs into nlog; the leader (node 0, alone at
 * first) runs its items 200 ms, node 1 (the victim) 8 s. */
static void start_nodes(const char *servers, const char *ns, const char *log, const char *nlog)
{
    char sess[16];
    snprintf(sess, sizeof sess, "%d", SESSION_MS);
    int saved = dup(2);
    int lfd = open(nlog, O_WRONLY | O_CREAT | O_TRUNC, 0600);
    REQUIRE(saved >= 0 && lfd >= 0 && dup2(lfd, 2) == 2, "node log %s", nlog);
    close(lfd);
    for (int i = 0; i < NODES; i++) {
        char ip[32];
        snprintf(ip, sizeof ip, "127.0.1.%d", 61 + i);
        int k = node_start(servers, ns, JOB, log, ip, "--count", "5", "--cron", "0/10 * * * * ?",
                           "--item-ms", i == 1 ? "8000" : "200", "--failover", "--session-ms",
                           sess, NULL);
        if (k < 0)
            dup2(saved, 2);
        REQUIRE(k == i, "node %d", i);
    }
    dup2(saved, 2);
    close(saved);
}

int main(void)
{
    harness_init();
    zkf_server *zk = zkf_shared();
    REQUIRE(zk != NULL, "zookeeper");
    char *ns = zkf_unique_namespace("recorder");
    char *log = tmp_log("recorder");
    char *nlog = tmp_log("recorder-nodes");
    ej_registry *reg = zk_connect(zkf_connect_string(zk), ns);
    start_nodes(zkf_connect_string(zk), ns, log, nlog);
    REQUIRE(wait_sharded(reg, JOB, 5, 20000), "initial sharding");
    char *leader = leader_of(reg, JOB);
    REQUIRE(leader != NULL && node_index(leader) == 0, "node 0 leads (%s)", leader ? leader : "-");
    char *owners[5] = {0};
    zk_owners(reg, JOB, 5, owners);
    int vitem = -1;
    for (int it = 0; it < 5 && vitem < 0; it++)
        if (owners[it] && node_index(owners[it]) == 1)
            vitem = it;
    free_owners(owners, 5);
    REQUIRE(vitem >= 0, "node 1 owns an item");

    /* The test holds the election latch: no new leader for now. */
    char *held = NULL;
    char latch[160];
    snprintf(latch, sizeof latch,
             "/%s/leader/election/latch/_c_00000000-0000-4000-8000-000000000000-latch-", JOB);
    REQUIRE(ej_registry_create_node(reg, latch, NULL, 0, EJ_REG_EPHEMERAL_SEQUENTIAL,
                                    EJ_REG_CREATE_PARENTS, &held) == 0,
            "hold the election latch");

    /* Kill node 1 1 s into a fire (its item runs 8 s), freeze node 0 (idle
     * since 200 ms into the fire) 1.5 s later. */
    sleep_until_wall(next_multiple(ej__now_ms() + 500, 10000, 0) + 1000);
    node_kill9(1);
    int64_t killed = nodes[1].killed_at;
    ej__sleep_ms(1500);
    kill(nodes[0].pid, SIGSTOP);
    int64_t owner_gone = wait_gone(reg, JOB, nodes[1].id, 10000);
    int64_t leader_gone = wait_gone(reg, JOB, nodes[0].id, 10000);
    REQUIRE(owner_gone && leader_gone, "the nodes of the killed and the frozen instance went");
    say("owner's node gone %" PRId64 " ms after the kill, the leader's %" PRId64 " ms",
        owner_gone - killed, leader_gone - killed);
    REQUIRE(leader_gone > owner_gone && leader_gone < owner_gone + SESSION_MS - 1000,
            "the leader's node went after the owner's, well before the wait's end");
    ej__sleep_ms(SESSION_MS + 1000);

    int64_t recorded_at = 0;
    int recorded = 0, again = 0;
    char line[1024];
    FILE *f = fopen(nlog, "r");
    REQUIRE(f != NULL, "node log");
    while (fgets(line, sizeof line, f)) {
        if (strstr(line, "were recorded already") && line_ms(line) >= killed)
            again++; /* a turn at the latch for nothing: allowed, counted */
        if (strstr(line, "is gone while running items") && line_ms(line) >= killed) {
            fputs(line, stderr);
            recorded++;
            if (recorded_at == 0)
                recorded_at = line_ms(line);
        }
    }
    fclose(f);
    say("recorded %" PRId64 " ms after the leader's node went; %d survivor(s) found the items "
        "recorded already",
        recorded_at ? recorded_at - leader_gone : -1, again);
    CHECK(recorded == 1, "the crash was recorded %d time(s) (want 1)", recorded);
    CHECK(recorded_at != 0 && recorded_at < leader_gone + 800,
          "recorded %" PRId64 " ms after the leader's node went (want < 800; the survivors' "
          "wait ended %" PRId64 " ms after it)",
          recorded_at ? recorded_at - leader_gone : -1, owner_gone + SESSION_MS - leader_gone);
    struct xlog xl;
    xlog_read(log, &xl);
    CHECK(check_no_overlap(&xl) == 0, "overlapping runs");
    xlog_free(&xl);

    ej_registry_delete(reg, held, -1);
    free(held);
    kill(nodes[0].pid, SIGCONT);
    for (int i = 0; i < NODES; i++)
        node_stop(i);
    free(leader);
    ej_registry_destroy(reg);
    unlink(log);
    unlink(nlog);
    free(log);
    free(nlog);
    free(ns);
    if (failures) {
        fprintf(stderr, "%d check(s) failed\n", failures);
        return 1;
    }
    fprintf(stderr, "coord_recorder: all checks passed\n");
    return 0;
}
