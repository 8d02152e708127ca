/*
 * Fills a namespace with many jobs fast, for the console's tests and
 * bench/console_poll_bench.sh: each job laid out as a running ElasticJob
 * job is (config, a server, an instance, a leader, its items owned), in
 * ZooKeeper transactions of many nodes.
 *
 * Usage: ej_zkfill SERVERS NAMESPACE COUNT [PREFIX [FULL]]
 * Job i is PREFIX%05d (default "job"); only the first FULL jobs (default
 * all) get servers, instance, leader and items, the others their config
 * alone (a job never started: fewer nodes for the console to load). Every
 * 7th job's cron fires daily at
 * 03:00 in America/New_York, the others every 5 s in Asia/Shanghai; one job
 * in 10 has its server DISABLED and one in 10 an item waiting for failover
 * (its owner gone).
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "ejob/console.h"
#include "ejob/error.h"
#include "ejob/log.h"
#include "ejob/registry.h"

#define OPS_MAX 600
#define NODE_MAX 16

struct batch {
    struct ej_reg_op ops[OPS_MAX];
    char paths[OPS_MAX][256];
    char data[OPS_MAX][512];
    int n;
};

static void add(struct batch *b, const char *job, ej_layout_node node, int item, const char *name,
                const char *data)
{
    ej_layout_path(b->paths[b->n], sizeof b->paths[b->n], job, node, item, name);
    snprintf(b->data[b->n], sizeof b->data[b->n], "%s", data);
    b->ops[b->n] = (struct ej_reg_op){.type = EJ_REG_OP_CREATE,
                                      .path = b->paths[b->n],
                                      .data = b->data[b->n],
                                      .len = strlen(b->data[b->n]),
                                      .mode = EJ_REG_PERSISTENT};
    b->n++;
}

static void add_raw(struct batch *b, const char *path)
{
    snprintf(b->paths[b->n], sizeof b->paths[b->n], "%s", path);
    b->data[b->n][0] = '\0';
    b->ops[b->n] = (struct ej_reg_op){
        .type = EJ_REG_OP_CREATE, .path = b->paths[b->n], .mode = EJ_REG_PERSISTENT};
    b->n++;
}

static int flush(ej_registry *reg, struct batch *b)
{
    if (b->n == 0)
        return 0;
    int rc = ej_registry_multi(reg, b->ops, (size_t)b->n, NULL);
    if (rc != 0)
        fprintf(stderr, "ej_zkfill: %s\n", ej_strerror(rc));
    b->n = 0;
    return rc;
}

static void add_job(struct batch *b, const char *job, int i, bool full)
{
    bool daily = i % 7 == 0;
    char cfg[512], dir[200];
    snprintf(cfg, sizeof cfg,
             "{\"jobName\":\"%s\",\"jobClass\":\"com.dangdang.ddframe.job.api.script.ScriptJob\","
             "\"jobType\":\"SCRIPT\",\"cron\":\"%s\",\"shardingTotalCount\":2,"
             "\"description\":\"filled job %d\",\"timeZone\":\"%s\","
             "\"scriptCommandLine\":\"/bin/true\"}",
             job, daily ? "0 0 3 * * ?" : "0/5 * * * * ?", i,
             daily ? "America/New_York" : "Asia/Shanghai");
    const char *id = "10.0.0.1@-@100";
    snprintf(dir, sizeof dir, "/%s", job);
    add_raw(b, dir);
    add(b, job, EJ_LAYOUT_NODE_CONFIG, 0, NULL, cfg);
    if (!full)
        return;
    snprintf(dir, sizeof dir, "/%s/servers", job);
    add_raw(b, dir);
    add(b, job, EJ_LAYOUT_NODE_SERVER, 0, "10.0.0.1", i % 10 == 3 ? "DISABLED" : "");
    snprintf(dir, sizeof dir, "/%s/instances", job);
    add_raw(b, dir);
    add(b, job, EJ_LAYOUT_NODE_INSTANCE, 0, id, "");
    snprintf(dir, sizeof dir, "/%s/leader", job);
    add_raw(b, dir);
    snprintf(dir, sizeof dir, "/%s/leader/election", job);
    add_raw(b, dir);
    add(b, job, EJ_LAYOUT_NODE_ELECTION_INSTANCE, 0, NULL, id);
    snprintf(dir, sizeof dir, "/%s/sharding", job);
    add_raw(b, dir);
    for (int item = 0; item < 2; item++) {
        snprintf(dir, sizeof dir, "/%s/sharding/%d", job, item);
        add_raw(b, dir);
        bool gone = i % 10 == 5 && item == 1;
        add(b, job, EJ_LAYOUT_NODE_ITEM_INSTANCE, item, NULL, gone ? "10.0.0.9@-@999" : id);
    }
    if (i % 10 == 5) {
        snprintf(dir, sizeof dir, "/%s/leader/failover", job);
        add_raw(b, dir);
        snprintf(dir, sizeof dir, "/%s/leader/failover/items", job);
        add_raw(b, dir);
        snprintf(dir, sizeof dir, "/%s/leader/failover/items/1", job);
        add_raw(b, dir);
    }
}

int main(int argc, char **argv)
{
    if (argc < 4) {
        fprintf(stderr, "usage: ej_zkfill SERVERS NAMESPACE COUNT [PREFIX]\n");
        return 2;
    }
    int count = atoi(argv[3]);
    const char *prefix = argc > 4 ? argv[4] : "job";
    int full = argc > 5 ? atoi(argv[5]) : count;
    ej_log_set_level(EJ_LOG_WARN);
    struct ej_registry_opts o = {.servers = argv[1],
                                 .namespace_ = argv[2],
                                 .session_timeout_ms = 10000,
                                 .connection_timeout_ms = 15000};
    ej_registry *reg = NULL;
    if (ej_registry_create(&reg, &o) != 0) {
        fprintf(stderr, "ej_zkfill: cannot connect to %s\n", argv[1]);
        return 1;
    }
    /* The namespace node itself (a transaction creates no parents). */
    ej_registry_create_node(reg, "/zkfill", "", 0, EJ_REG_PERSISTENT, EJ_REG_CREATE_PARENTS,
                            NULL);
    ej_registry_delete(reg, "/zkfill", -1);
    struct batch *b = calloc(1, sizeof *b);
    int rc = b != NULL ? 0 : 1;
    for (int i = 0; i < count && rc == 0; i++) {
        char job[64];
        snprintf(job, sizeof job, "%s%05d", prefix, i);
        if (b->n + NODE_MAX + 8 > OPS_MAX)
            rc = flush(reg, b);
        add_job(b, job, i, i < full);
    }
    if (rc == 0)
        rc = flush(reg, b);
    free(b);
    ej_registry_destroy(reg);
    return rc == 0 ? 0 : 1;
}
