/*
 * Failover of a failover run: kill -9 the owner of a one-item job while
 * the item runs; once it runs again as FAILOVER on a survivor (the taker),
 * kill -9 the taker too. The taker is not the item's owner (the sharding
 * still names the dead one until the next fire), so its session is found
 * from the item's failover and running nodes, not from its owner. The
 * item must run a third time, as FAILOVER, on one of the two instances
 * left, before the next fire; no two runs of it ever overlap.
 */
#include "coord_harness_itest.c"

static const char *JOB = "refoJob";
#define SESSION_MS 2000
#define PERIOD_MS 20000

/* The open run of item 0 on instance id started less than 300 ms ago
 * (wait up to timeout_ms); its start, or 0. src: "" for any source. */
static int64_t wait_fresh_run(const char *log, const char *id, const char *src, int timeout_ms)
{
    int64_t until = ej__now_ms() + timeout_ms;
    while (ej__now_ms() < until) {
        struct xlog xl;
        xlog_read(log, &xl);
        int64_t start = 0;
        for (size_t i = 0; i < xl.n; i++) {
            struct run *r = &xl.runs[i];
            if (r->item == 0 && r->end == INT64_MAX && strcmp(r->inst, id) == 0 &&
                (src[0] == '\0' || strcmp(r->src, src) == 0) && ej__now_ms() - r->start < 300)
                start = r->start;
        }
        xlog_free(&xl);
        if (start)
            return start;
        ej__sleep_ms(20);
    }
    return 0;
}

/* The first instance that ran item 0 as FAILOVER, started after `after`
 * (wait up to timeout_ms): its node index (*start: when), or -1. */
static int wait_failover_run(const char *log, int64_t after, int timeout_ms, int64_t *start)
{
    int64_t until = ej__now_ms() + timeout_ms;
    while (ej__now_ms() < until) {
        struct xlog xl;
        xlog_read(log, &xl);
        int who = -1;
        for (size_t i = 0; i < xl.n && who < 0; i++) {
            struct run *r = &xl.runs[i];
            if (r->item == 0 && strcmp(r->src, "FAILOVER") == 0 && r->start > after) {
                who = node_index(r->inst);
                *start = r->start;
            }
        }
        xlog_free(&xl);
        if (who >= 0)
            return who;
        ej__sleep_ms(20);
    }
    return -1;
}

int main(void)
{
    harness_init();
    zkf_server *zk = zkf_shared();
    REQUIRE(zk != NULL, "zookeeper");
    const char *servers = zkf_connect_string(zk);
    char *ns = zkf_unique_namespace("refailover");
    char *log = tmp_log("refailover");
    ej_registry *reg = zk_connect(servers, ns);
    char sess[16];
    snprintf(sess, sizeof sess, "%d", SESSION_MS);

    /* One item of 4 s every 20 s: both crashes and both failovers fit
     * between two fires. */
    const char *ips[] = {"127.0.1.41", "127.0.1.42", "127.0.1.43", "127.0.1.44"};
    int n[4];
    for (int i = 0; i < 4; i++) {
        n[i] = node_start(servers, ns, JOB, log, ips[i], "--count", "1", "--cron", "0/20 * * * * ?",
                          "--item-ms", "4000", "--failover", "--session-ms", sess, NULL);
        REQUIRE(n[i] >= 0, "node %d", i);
    }
    REQUIRE(wait_sharded(reg, JOB, 1, PERIOD_MS + 10000), "initial sharding");
    char *owners[1] = {0};
    zk_owners(reg, JOB, 1, owners);
    int a = owners[0] ? node_index(owners[0]) : -1;
    free_owners(owners, 1);
    REQUIRE(a >= 0, "an owner of item 0");

    /* The owner dies 400 ms into its run. */
    int64_t fired = wait_fresh_run(log, nodes[a].id, "", PERIOD_MS + 5000);
    REQUIRE(fired, "the owner's run never started");
    int64_t next_fire = next_multiple(fired, PERIOD_MS, 0);
    if (next_fire - fired < 1000)
        next_fire += PERIOD_MS;
    ej__sleep_ms(400);
    node_kill9(a);
    int64_t killed_a = nodes[a].killed_at;

    /* A survivor takes it over; it dies 400 ms into that run. */
    int64_t fo1 = 0;
    int t = wait_failover_run(log, killed_a, SESSION_MS + 5000, &fo1);
    REQUIRE(t >= 0 && t != a, "no failover run after the owner's crash");
    say("item 0 failed over to %s %" PRId64 " ms after the owner's kill", nodes[t].id,
        fo1 - killed_a);
    ej__sleep_ms(400);
    node_kill9(t);
    int64_t killed_t = nodes[t].killed_at;

    /* It runs again, as FAILOVER, on one of the two left, before the next
     * fire. */
    int64_t fo2 = 0;
    int u = wait_failover_run(log, killed_t, (int)(next_fire - ej__now_ms() - 200), &fo2);
    CHECK(u >= 0, "the taker's failover run was not failed over before the next fire");
    if (u >= 0) {
        CHECK(u != a && u != t, "second failover run on a dead instance %s", nodes[u].id);
        CHECK(fo2 < next_fire, "second failover run at the next fire");
        say("item 0 failed over again to %s %" PRId64 " ms after the taker's kill", nodes[u].id,
            fo2 - killed_t);
    }
    ej__sleep_ms(500);
    struct xlog xl;
    xlog_read(log, &xl);
    CHECK(runs_of(&xl, 0, killed_t, next_fire, "FAILOVER") == 1,
          "failover runs after the taker's kill (want exactly 1)");
    CHECK(check_no_overlap(&xl) == 0, "overlapping runs");
    xlog_free(&xl);

    for (int i = 0; i < 4; i++)
        node_stop(n[i]);
    ej_registry_destroy(reg);
    unlink(log);
    free(log);
    free(ns);
    if (failures) {
        fprintf(stderr, "%d check(s) failed\n", failures);
        return 1;
    }
    fprintf(stderr, "coord_refailover: all checks passed\n");
    return 0;
}
