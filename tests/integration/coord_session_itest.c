/*
 * Sessions: an expired session is not an operator's shutdown (EJ#1857,
 * EJ#2383): the instance registers again under the same id. A zombie
 * (SIGSTOP longer than the session timeout, then SIGCONT; EJ#114, EJ#507)
 * starts nothing while cut off, its running item is told to stop, it
 * rejoins cleanly, runs no fire from before it registered again, and no
 * item ever runs on two instances at once.
 */
#include "coord_harness_itest.c"

#define SESSION_MS 2000

static int64_t instance_ctime(ej_registry *reg, const char *job, const char *id)
{
    char path[512];
    snprintf(path, sizeof path, "/%s/instances/%s", job, id);
    struct ej_node_stat st;
    bool ex = false;
    if (ej_registry_exists(reg, path, &ex, &st) != 0 || !ex)
        return 0;
    return st.ctime;
}

static int64_t instance_owner(ej_registry *reg, const char *job, const char *id)
{
    char path[512];
    snprintf(path, sizeof path, "/%s/instances/%s", job, id);
    struct ej_node_stat st;
    bool ex = false;
    if (ej_registry_exists(reg, path, &ex, &st) != 0 || !ex)
        return 0;
    return st.ephemeral_owner;
}

int main(void)
{
    harness_init();
    zkf_server *zk = zkf_shared();
    REQUIRE(zk != NULL, "zookeeper");
    const char *servers = zkf_connect_string(zk);
    char *ns = zkf_unique_namespace("session");
    ej_registry *reg = zk_connect(servers, ns);
    char sess[16];
    snprintf(sess, sizeof sess, "%d", SESSION_MS);

    /* ---- forced expiry ---- */
    const char *J1 = "expireJob";
    char *log1 = tmp_log("expire");
    int a = node_start(servers, ns, J1, log1, "127.0.4.61", "--count", "4", "--cron", "* * * * * ?",
                       "--item-ms", "100", "--failover", "--session-ms", sess, NULL);
    int b = node_start(servers, ns, J1, log1, "127.0.4.62", "--count", "4", "--cron", "* * * * * ?",
                       "--item-ms", "100", "--failover", "--session-ms", sess, NULL);
    REQUIRE(a >= 0 && b >= 0, "nodes");
    REQUIRE(wait_sharded(reg, J1, 4, 10000), "sharding");
    int64_t old = nodes[b].session;
    REQUIRE(instance_owner(reg, J1, nodes[b].id) == old, "instance node of b");
    /* The fixture expires a session by taking it over with a second
     * connection and closing that; if the instance's client reconnects in
     * between, the close misses and the session lives on: try again. */
    int64_t expired = 0, back = 0;
    for (int attempt = 0; attempt < 3 && !back; attempt++) {
        if (attempt > 0 && instance_owner(reg, J1, nodes[b].id) != old)
            break; /* the session did go; the instance did not come back */
        say("expiring session %" PRIx64 " of %s", (uint64_t)old, nodes[b].id);
        int erc = zkf_expire_session(zk, old, nodes[b].passwd, EJ_REG_PASSWD_LEN);
        REQUIRE(erc == 0 || attempt > 0, "expire");
        expired = ej__now_ms();
        while (ej__now_ms() < expired + 6000 && !back) {
            int64_t o = instance_owner(reg, J1, nodes[b].id);
            if (o != 0 && o != old)
                back = ej__now_ms();
            else
                ej__sleep_ms(50);
        }
    }
    CHECK(back, "%s did not register again after its session expired", nodes[b].id);
    say("re-registered %" PRId64 " ms after the expiry", back - expired);
    CHECK(node_session(b) && nodes[b].session != old, "session not renewed");
    char st[512];
    CHECK(node_status(b, st, sizeof st) && strstr(st, "stopped=0"), "status: %s", st);
    REQUIRE(wait_sharded(reg, J1, 4, 20000), "sharding after re-registration");
    ej__sleep_ms(1500);
    int64_t t0 = ej__now_ms();
    ej__sleep_ms(3000);
    int64_t t1 = ej__now_ms();
    struct xlog xl;
    xlog_read(log1, &xl);
    CHECK(check_all_ran(&xl, 4, t0, t1) == 0, "items after the expiry");
    int by_b = 0;
    for (size_t i = 0; i < xl.n; i++)
        by_b += xl.runs[i].start >= t0 && strcmp(xl.runs[i].inst, nodes[b].id) == 0;
    CHECK(by_b > 0, "the re-registered instance runs nothing");
    CHECK(check_no_overlap(&xl) == 0, "overlap");
    xlog_free(&xl);
    node_stop(a);
    node_stop(b);
    unlink(log1);
    free(log1);

    /* ---- zombie ---- */
    const char *J2 = "zombieJob";
    char *log2 = tmp_log("zombie");
    /* d starts first and leads; z's first long item runs 6 s. */
    int d = node_start(servers, ns, J2, log2, "127.0.4.71", "--count", "4", "--cron", "* * * * * ?",
                       "--item-ms", "100", "--failover", "--session-ms", sess, NULL);
    int z = node_start(servers, ns, J2, log2, "127.0.4.72", "--count", "4", "--cron", "* * * * * ?",
                       "--item-ms", "100", "--long-item", "0,1,2,3:6000", "--long-first",
                       "--failover", "--session-ms", sess, NULL);
    REQUIRE(d >= 0 && z >= 0, "nodes");
    REQUIRE(wait_sharded(reg, J2, 4, 10000), "sharding");
    /* Wait for z's long run, then stop z 800 ms into it. */
    int long_item = -1;
    for (int k = 0; k < 200 && long_item < 0; k++) {
        xlog_read(log2, &xl);
        for (size_t i = 0; i < xl.n; i++)
            if (strcmp(xl.runs[i].inst, nodes[z].id) == 0 && xl.runs[i].end == INT64_MAX &&
                ej__now_ms() - xl.runs[i].start > 300)
                long_item = xl.runs[i].item;
        xlog_free(&xl);
        if (long_item < 0)
            ej__sleep_ms(50);
    }
    REQUIRE(long_item >= 0, "z's long item never ran");
    ej__sleep_ms(500);
    int64_t zold = nodes[z].session;
    kill(nodes[z].pid, SIGSTOP);
    int64_t stopped = ej__now_ms();
    say("z stopped while running item %d", long_item);
    ej__sleep_ms(2 * SESSION_MS + 500);
    kill(nodes[z].pid, SIGCONT);
    int64_t resumed = ej__now_ms();
    say("z resumed after %" PRId64 " ms", resumed - stopped);
    int64_t rejoined = 0;
    while (ej__now_ms() < resumed + 10000 && !rejoined) {
        int64_t o = instance_owner(reg, J2, nodes[z].id);
        if (o != 0 && o != zold)
            rejoined = instance_ctime(reg, J2, nodes[z].id);
        else
            ej__sleep_ms(50);
    }
    CHECK(rejoined, "the zombie did not rejoin");
    say("z rejoined %" PRId64 " ms after it resumed", rejoined - resumed);
    REQUIRE(wait_sharded(reg, J2, 4, 10000), "sharding after the zombie rejoined");
    ej__sleep_ms(3000);
    int64_t end = ej__now_ms();
    xlog_read(log2, &xl);
    bool saw_frozen = false;
    for (size_t i = 0; i < xl.n; i++) {
        struct run *r = &xl.runs[i];
        if (strcmp(r->inst, nodes[z].id) == 0 && r->item == long_item && r->start < stopped) {
            saw_frozen = true;
            CHECK(strcmp(r->status, "FROZEN_CANCELLED") == 0,
                  "the zombie's item ended %s, not told to stop", r->status);
        }
        /* Nothing started by the zombie from the stop until it rejoined. */
        if (strcmp(r->inst, nodes[z].id) == 0)
            CHECK(r->start < stopped || r->start >= rejoined,
                  "zombie started item %d at %+" PRId64 " ms after resuming (rejoined %+" PRId64
                  ")",
                  r->item, r->start - resumed, rejoined - resumed);
        /* Nor a fire due before it registered again (cron every second:
         * the fire of a run is at most the whole second it started in). */
        if (strcmp(r->inst, nodes[z].id) == 0 && r->start >= rejoined &&
            strcmp(r->src, "NORMAL_TRIGGER") == 0)
            CHECK(r->start / 1000 * 1000 >= rejoined,
                  "the rejoined zombie ran item %d of the fire of %" PRId64
                  " (from before it registered again at %" PRId64 ")",
                  r->item, r->start / 1000 * 1000 % 100000, rejoined % 100000);
    }
    CHECK(saw_frozen, "no record of the zombie's long run");
    CHECK(runs_of(&xl, long_item, stopped, resumed, "FAILOVER") == 1,
          "item %d failed over %d times while z was stopped", long_item,
          runs_of(&xl, long_item, stopped, resumed, "FAILOVER"));
    CHECK(check_all_ran(&xl, 4, end - 2500, end) == 0, "items after the zombie rejoined");
    int by_z = 0;
    for (size_t i = 0; i < xl.n; i++)
        by_z += xl.runs[i].start >= end - 2500 && strcmp(xl.runs[i].inst, nodes[z].id) == 0;
    CHECK(by_z > 0, "the rejoined zombie runs nothing");
    CHECK(check_no_overlap(&xl) == 0, "overlap");
    xlog_free(&xl);
    node_stop(d);
    node_stop(z);
    unlink(log2);
    free(log2);

    ej_registry_destroy(reg);
    free(ns);
    if (failures) {
        fprintf(stderr, "%d check(s) failed\n", failures);
        return 1;
    }
    fprintf(stderr, "coord_session: all checks passed\n");
    return 0;
}
