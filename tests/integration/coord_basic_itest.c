/*
 * Coordination with several instances as separate processes against one
 * real ZooKeeper: registration, election, sharding, a joining instance, a
 * config change by another client (count 9 -> 5, new cron).
 */
#include "coord_harness_itest.c"

static const char *JOB = "basicJob";

/* Rewrite the job's config node as another client (the console) would. */
static void rewrite_config(ej_registry *reg, const char *job, int count, const char *cron)
{
    char path[256];
    snprintf(path, sizeof path, "/%s/config", job);
    char *data = NULL;
    size_t len = 0;
    REQUIRE(ej_registry_get(reg, path, &data, &len, NULL) == 0, "read config");
    struct ej_job_config cfg;
    ej_job_config_init(&cfg);
    char err[256];
    REQUIRE(ej_job_config_from_json(data, len, &cfg, err, sizeof err) == 0, "parse: %s", err);
    free(data);
    cfg.sharding_total_count = count;
    ej_job_config_set_str(&cfg.cron, cron);
    char *json = ej_job_config_to_json(&cfg);
    REQUIRE(ej_registry_set(reg, path, json, strlen(json), -1, NULL) == 0, "write config");
    free(json);
    ej_job_config_fini(&cfg);
}

/* Wait until the job is sharded and each of the n nodes idx[] owns lo..hi
 * of the count items: an instance that registers while the leader shards
 * is given items only at the resharding that follows. */
static bool wait_spread(ej_registry *reg, int count, const int *idx, int n, int lo, int hi,
                        int timeout_ms)
{
    int64_t deadline = ej__mono_ms() + timeout_ms;
    char *owners[16] = {0};
    bool ok = false;
    while (!ok && ej__mono_ms() < deadline) {
        ok = wait_sharded(reg, JOB, count, (int)(deadline - ej__mono_ms()));
        zk_owners(reg, JOB, count, owners);
        for (int i = 0; i < n && ok; i++) {
            int k = count_owned(owners, count, nodes[idx[i]].id);
            ok = k >= lo && k <= hi;
        }
        free_owners(owners, count);
        if (!ok)
            ej__sleep_ms(100);
    }
    return ok;
}

int main(void)
{
    harness_init();
    zkf_server *zk = zkf_shared();
    REQUIRE(zk != NULL, "zookeeper");
    const char *servers = zkf_connect_string(zk);
    char *ns = zkf_unique_namespace("basic");
    char *log = tmp_log("basic");
    ej_registry *reg = zk_connect(servers, ns);

    /* 1. Three instances, nine items: three each, one leader. */
    const char *ips[] = {"127.0.0.11", "127.0.0.12", "127.0.0.13", "127.0.0.14"};
    int n[4];
    for (int i = 0; i < 3; i++) {
        n[i] = node_start(servers, ns, JOB, log, ips[i], "--count", "9", "--cron", "* * * * * ?",
                          "--item-ms", "100", NULL);
        REQUIRE(n[i] >= 0, "node %d", i);
    }
    REQUIRE(wait_spread(reg, 9, n, 3, 3, 3, 15000), "sharding of 9 items over 3 instances");
    char *owners[9] = {0};
    zk_owners(reg, JOB, 9, owners);
    for (int i = 0; i < 3; i++)
        CHECK(count_owned(owners, 9, nodes[n[i]].id) == 3, "%s owns %d items", nodes[n[i]].id,
              count_owned(owners, 9, nodes[n[i]].id));
    /* Average over instances in reverse order of ids: .13 gets 0,1,2. */
    CHECK(owners[0] && strcmp(owners[0], nodes[n[2]].id) == 0, "item 0 owner %s", owners[0]);
    CHECK(owners[8] && strcmp(owners[8], nodes[n[0]].id) == 0, "item 8 owner %s", owners[8]);
    free_owners(owners, 9);
    char *leader = leader_of(reg, JOB);
    CHECK(leader != NULL && node_index(leader) >= 0, "leader %s", leader ? leader : "(none)");
    say("leader is %s", leader ? leader : "(none)");
    free(leader);
    char **lat = NULL;
    size_t nlat = zk_children(reg, &lat, "/%s/leader/election/latch", JOB);
    CHECK(nlat == 0, "%zu latch nodes left behind", nlat);
    ej_registry_free_names(lat);

    int64_t t0 = ej__now_ms();
    ej__sleep_ms(3500);
    int64_t t1 = ej__now_ms();
    struct xlog xl;
    xlog_read(log, &xl);
    CHECK(check_all_ran(&xl, 9, t0, t1) == 0, "all items ran");
    for (int item = 0; item < 9; item++)
        CHECK(runs_of(&xl, item, t0, t1, NULL) >= 2, "item %d ran %d times in 3.5 s", item,
              runs_of(&xl, item, t0, t1, NULL));
    CHECK(check_no_overlap(&xl) == 0, "no overlap");
    xlog_free(&xl);

    /* 2. A fourth instance joins: resharded at the next fire. */
    n[3] = node_start(servers, ns, JOB, log, ips[3], "--count", "9", "--cron", "* * * * * ?",
                      "--item-ms", "100", NULL);
    REQUIRE(n[3] >= 0, "node 3");
    REQUIRE(wait_spread(reg, 9, n, 4, 2, 3, 15000), "resharding after a join");
    zk_owners(reg, JOB, 9, owners);
    int total = 0;
    for (int i = 0; i < 4; i++) {
        int k = count_owned(owners, 9, nodes[n[i]].id);
        CHECK(k == 2 || k == 3, "%s owns %d of 9 items over 4", nodes[n[i]].id, k);
        total += k;
    }
    CHECK(total == 9, "owned %d", total);
    free_owners(owners, 9);
    t0 = ej__now_ms();
    ej__sleep_ms(2500);
    t1 = ej__now_ms();
    xlog_read(log, &xl);
    CHECK(check_all_ran(&xl, 9, t0, t1) == 0, "all items ran with 4 instances");
    int by_new = 0;
    for (size_t i = 0; i < xl.n; i++)
        if (xl.runs[i].start >= t0 && strcmp(xl.runs[i].inst, nodes[n[3]].id) == 0)
            by_new++;
    CHECK(by_new > 0, "the new instance ran nothing");
    CHECK(check_no_overlap(&xl) == 0, "no overlap");
    xlog_free(&xl);

    /* 3. Another client changes the config: 5 items, a cron every 3 s. */
    rewrite_config(reg, JOB, 5, "0/3 * * * * ?");
    int64_t changed = ej__now_ms();
    bool gone = false;
    for (int k = 0; k < 150 && !gone; k++) {
        char **items = NULL;
        size_t ni = zk_children(reg, &items, "/%s/sharding", JOB);
        gone = ni == 5 && wait_sharded(reg, JOB, 5, 100);
        ej_registry_free_names(items);
        if (!gone)
            ej__sleep_ms(100);
    }
    CHECK(gone, "items 5..8 not removed");
    for (int item = 5; item < 9; item++)
        CHECK(!zk_exists(reg, "/%s/sharding/%d", JOB, item), "item %d still there", item);
    ej__sleep_ms(7000);
    int64_t t2 = ej__now_ms();
    xlog_read(log, &xl);
    int normal_after = 0;
    for (size_t i = 0; i < xl.n; i++) {
        struct run *r = &xl.runs[i];
        if (r->start < changed + 3100 || strcmp(r->src, "NORMAL_TRIGGER") != 0)
            continue;
        normal_after++;
        CHECK(r->item < 5, "item %d ran after the count went to 5", r->item);
        int sec = (int)((r->start / 1000) % 60);
        CHECK(sec % 3 == 0, "item %d started at second %d under cron 0/3", r->item, sec);
    }
    CHECK(normal_after >= 5, "only %d runs under the new config", normal_after);
    CHECK(check_all_ran(&xl, 5, changed + 3100, t2) == 0, "items 0..4 ran under the new cron");
    CHECK(check_no_overlap(&xl) == 0, "no overlap");
    xlog_free(&xl);

    for (int i = 0; i < 4; i++)
        node_stop(n[i]);
    /* A clean stop leaves no instance and no leader behind. */
    char **inst = NULL;
    size_t ninst = zk_children(reg, &inst, "/%s/instances", JOB);
    CHECK(ninst == 0, "%zu instance nodes left after a clean stop", ninst);
    ej_registry_free_names(inst);
    CHECK(!zk_exists(reg, "/%s/leader/election/instance", JOB), "leader node left");
    ej_registry_destroy(reg);
    unlink(log);
    free(log);
    free(ns);
    if (failures) {
        fprintf(stderr, "%d check(s) failed\n", failures);
        return 1;
    }
    fprintf(stderr, "coord_basic: all checks passed\n");
    return 0;
}
