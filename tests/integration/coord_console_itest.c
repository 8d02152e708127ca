/*
 * Console operations written straight into ZooKeeper, as the Java console
 * (JobOperateAPI, ShardingOperateAPI, JobSettingsAPI) and zkCli write them:
 * TRIGGER, disable/enable a server, disable an item, shutdown an instance,
 * failover turned off, an invalid config, removing the job.
 */
#include "coord_harness_itest.c"

static const char *JOB = "consoleJob";

/* Runs of inst (NULL: any) starting in [from, to). */
static int runs_by(const struct xlog *l, const char *inst, int64_t from, int64_t to)
{
    int k = 0;
    for (size_t i = 0; i < l->n; i++)
        if (l->runs[i].start >= from && l->runs[i].start < to &&
            (inst == NULL || strcmp(l->runs[i].inst, inst) == 0))
            k++;
    return k;
}

/* Sleep until ms past a multiple of 5 s (the job's cron). */
static void align5(int ms)
{
    int64_t now = ej__now_ms();
    int64_t t = (now / 5000) * 5000 + ms;
    if (t <= now)
        t += 5000;
    ej__sleep_ms(t - now);
}

static void set_config_field(ej_registry *reg, bool failover, const char *cron)
{
    char path[128];
    snprintf(path, sizeof path, "/%s/config", JOB);
    char *data = NULL;
    size_t len = 0;
    REQUIRE(ej_registry_get(reg, path, &data, &len, NULL) == 0, "read config");
    struct ej_job_config cfg;
    ej_job_config_init(&cfg);
    char err[256];
    REQUIRE(ej_job_config_from_json(data, len, &cfg, err, sizeof err) == 0, "parse: %s", err);
    free(data);
    cfg.failover = failover;
    ej_job_config_set_str(&cfg.cron, cron);
    char *json = ej_job_config_to_json(&cfg);
    REQUIRE(ej_registry_set(reg, path, json, strlen(json), -1, NULL) == 0, "write config");
    free(json);
    ej_job_config_fini(&cfg);
}

int main(void)
{
    harness_init();
    zkf_server *zk = zkf_shared();
    REQUIRE(zk != NULL, "zookeeper");
    const char *servers = zkf_connect_string(zk);
    char *ns = zkf_unique_namespace("console");
    char *log = tmp_log("console");
    ej_registry *reg = zk_connect(servers, ns);
    const char *ips[] = {"127.0.2.31", "127.0.2.32", "127.0.2.33"};
    int n[3];
    for (int i = 0; i < 3; i++) {
        n[i] = node_start(servers, ns, JOB, log, ips[i], "--count", "6", "--cron", "0/5 * * * * ?",
                          "--item-ms", "100", "--failover", NULL);
        REQUIRE(n[i] >= 0, "node %d", i);
    }
    align5(300);
    REQUIRE(wait_sharded(reg, JOB, 6, 12000), "sharding");
    struct xlog xl;

    /* TRIGGER into one instance node: it runs its items once now (and
     * resets the node), nobody else does. */
    align5(1500);
    int64_t t0 = ej__now_ms();
    char path[256];
    snprintf(path, sizeof path, "/%s/instances/%s", JOB, nodes[n[1]].id);
    REQUIRE(ej_registry_set(reg, path, "TRIGGER", 7, -1, NULL) == 0, "write TRIGGER");
    ej__sleep_ms(1500);
    int64_t t1 = ej__now_ms();
    xlog_read(log, &xl);
    CHECK(runs_by(&xl, nodes[n[1]].id, t0, t1) == 2, "triggered instance ran %d items",
          runs_by(&xl, nodes[n[1]].id, t0, t1));
    CHECK(runs_by(&xl, NULL, t0, t1) == 2, "%d runs after a TRIGGER of one instance",
          runs_by(&xl, NULL, t0, t1));
    xlog_free(&xl);
    char *d = zk_get(reg, "%s", path);
    CHECK(d && d[0] == '\0', "instance node not reset: \"%s\"", d ? d : "(none)");
    free(d);

    /* Disable a server: its items move at the next fire, it runs nothing;
     * enable it again: it gets items back. */
    snprintf(path, sizeof path, "/%s/servers/%s", JOB, ips[2]);
    REQUIRE(ej_registry_set(reg, path, "DISABLED", 8, -1, NULL) == 0, "disable");
    align5(1500);
    REQUIRE(wait_sharded(reg, JOB, 6, 8000), "resharding after disable");
    char *owners[6] = {0};
    zk_owners(reg, JOB, 6, owners);
    CHECK(count_owned(owners, 6, nodes[n[2]].id) == 0, "disabled server owns %d items",
          count_owned(owners, 6, nodes[n[2]].id));
    free_owners(owners, 6);
    char st[512];
    CHECK(node_status(n[2], st, sizeof st) && strstr(st, "disabled=1") != NULL, "status: %s", st);
    t0 = ej__now_ms();
    align5(1000);
    ej__sleep_ms(5000);
    t1 = ej__now_ms();
    xlog_read(log, &xl);
    CHECK(runs_by(&xl, nodes[n[2]].id, t0, t1) == 0, "disabled server ran %d items",
          runs_by(&xl, nodes[n[2]].id, t0, t1));
    CHECK(check_all_ran(&xl, 6, t0, t1) == 0, "all items ran while a server was disabled");
    xlog_free(&xl);
    REQUIRE(ej_registry_set(reg, path, "", 0, -1, NULL) == 0, "enable");
    align5(1500);
    REQUIRE(wait_sharded(reg, JOB, 6, 8000), "resharding after enable");
    zk_owners(reg, JOB, 6, owners);
    CHECK(count_owned(owners, 6, nodes[n[2]].id) == 2, "enabled server owns %d items",
          count_owned(owners, 6, nodes[n[2]].id));
    free_owners(owners, 6);

    /* Disable item 4: never runs; enable: runs again. */
    snprintf(path, sizeof path, "/%s/sharding/4/disabled", JOB);
    REQUIRE(ej_registry_create_node(reg, path, NULL, 0, EJ_REG_PERSISTENT, 0, NULL) == 0,
            "disable item");
    ej__sleep_ms(300);
    t0 = ej__now_ms();
    align5(1000);
    ej__sleep_ms(5000);
    t1 = ej__now_ms();
    xlog_read(log, &xl);
    CHECK(runs_of(&xl, 4, t0, t1, NULL) == 0, "disabled item 4 ran");
    CHECK(runs_of(&xl, 3, t0, t1, NULL) >= 1, "item 3 did not run");
    xlog_free(&xl);
    REQUIRE(ej_registry_delete(reg, path, -1) == 0, "enable item");
    ej__sleep_ms(300);
    t0 = ej__now_ms();
    align5(1000);
    t1 = ej__now_ms();
    xlog_read(log, &xl);
    CHECK(runs_of(&xl, 4, t0, t1, NULL) >= 1, "enabled item 4 did not run");
    xlog_free(&xl);

    /* Failover turned off: failover nodes are removed. */
    snprintf(path, sizeof path, "/%s/sharding/0/failover", JOB);
    REQUIRE(ej_registry_create_node(reg, path, "someone", 7, EJ_REG_EPHEMERAL, 0, NULL) == 0,
            "fake failover node");
    set_config_field(reg, false, "0/5 * * * * ?");
    bool removed = false;
    for (int k = 0; k < 50 && !removed; k++) {
        removed = !zk_exists(reg, "%s", path);
        if (!removed)
            ej__sleep_ms(100);
    }
    CHECK(removed, "failover node kept after failover was turned off");

    /* An invalid config is not applied; the error names the field. */
    set_config_field(reg, false, "0/5 * * * * ? bad");
    ej__sleep_ms(500);
    CHECK(node_status(n[0], st, sizeof st) && strstr(st, "error=") && strstr(st, "cron") != NULL &&
              strstr(st, "cron=0/5 * * * * ?") != NULL,
          "status after an invalid config: %s", st);
    t0 = ej__now_ms();
    align5(1000);
    t1 = ej__now_ms();
    xlog_read(log, &xl);
    CHECK(check_all_ran(&xl, 6, t0, t1) == 0, "the last good config stopped working");
    xlog_free(&xl);
    set_config_field(reg, false, "0/5 * * * * ?");
    ej__sleep_ms(500);
    bool got = node_status(n[0], st, sizeof st);
    const char *e = strstr(st, "error=");
    CHECK(got && e && e[6] == '\0', "status after a good config again: %s", st);

    /* Shutdown of one instance by deleting its node: it stops firing and
     * gives up leadership, the process stays up; its items move. */
    char *leader = leader_of(reg, JOB);
    int li = node_index(leader);
    REQUIRE(li >= 0, "leader");
    snprintf(path, sizeof path, "/%s/instances/%s", JOB, nodes[li].id);
    REQUIRE(ej_registry_delete(reg, path, -1) == 0, "shutdown");
    ej__sleep_ms(500);
    char *nl = leader_of(reg, JOB);
    CHECK(nl && strcmp(nl, leader) != 0, "leader still %s after its shutdown", nl ? nl : "-");
    free(nl);
    CHECK(node_status(li, st, sizeof st) && strstr(st, "stopped=1"), "status: %s", st);
    nodes[li].alive = true; /* the process lives on */
    align5(1500);
    t0 = ej__now_ms();
    align5(1000);
    ej__sleep_ms(5000);
    t1 = ej__now_ms();
    xlog_read(log, &xl);
    CHECK(runs_by(&xl, nodes[li].id, t0, t1) == 0, "shut down instance ran %d items",
          runs_by(&xl, nodes[li].id, t0, t1));
    CHECK(check_all_ran(&xl, 6, t0, t1) == 0, "items of the shut down instance moved");
    CHECK(!zk_exists(reg, "%s", path), "the shut down instance registered again");
    CHECK(check_no_overlap(&xl) == 0, "overlap");
    xlog_free(&xl);
    free(leader);

    /* Removing the job: every instance stops. */
    snprintf(path, sizeof path, "/%s", JOB);
    /* Instances that see the leader go while the tree is deleted may write
     * again for a moment: retry, as a console would. */
    int drc = -1;
    for (int k = 0; k < 10 && drc != 0; k++) {
        drc = ej_registry_delete_recursive(reg, path);
        if (drc != 0)
            ej__sleep_ms(200);
    }
    REQUIRE(drc == 0, "remove job: %s", ej_strerror(drc));
    ej__sleep_ms(500);
    CHECK(!zk_exists(reg, "%s", path), "the job came back after its removal");
    ej__sleep_ms(1000);
    t0 = ej__now_ms();
    ej__sleep_ms(5500);
    t1 = ej__now_ms();
    xlog_read(log, &xl);
    CHECK(runs_by(&xl, NULL, t0, t1) == 0, "%d runs after the job was removed",
          runs_by(&xl, NULL, t0, t1));
    xlog_free(&xl);
    char **names = NULL;
    size_t ninst = zk_children(reg, &names, "/%s/instances", JOB);
    ej_registry_free_names(names);
    CHECK(ninst == 0, "%zu instances registered again after removal", ninst);

    for (int i = 0; i < 3; i++)
        node_stop(n[i]);
    ej_registry_destroy(reg);
    unlink(log);
    free(log);
    free(ns);
    if (failures) {
        fprintf(stderr, "%d check(s) failed\n", failures);
        return 1;
    }
    fprintf(stderr, "coord_console: all checks passed\n");
    return 0;
}
