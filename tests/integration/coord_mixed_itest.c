/*
 * Peers that are not ejob instances.
 *
 * 1. A leader node that names no live instance (left by hand, or by a
 *    process whose instance node is gone while its session lives on) is
 *    healed: removed by version under the election latch and elected again;
 *    the job runs. (It used to stall every fire: "waited ... for the leader
 *    to reshard; skipping this fire".)
 *
 * 2. A mixed cluster whose leader records no failover. Java 2.1.5's crash
 *    listener skips an instance that was alone on its IP (EJ#669:
 *    JobCrashedJobListener looks the crashed instance up by IP among the
 *    live ones), so with a Java leader nobody recorded the running items of
 *    a crashed ejob instance. Here the leader is a plain registry client
 *    that holds leader/election/instance, shards when asked and records
 *    nothing. An ejob instance alone on its IP is killed -9 while its item
 *    runs: the other ejob instance must record the failover and run the item.
 */
#include <pthread.h>
#include <stdatomic.h>

#include "coord_harness_itest.c"

#define SESSION_MS 2000

/* ---- the fake leader ---- */

struct fake_leader {
    ej_registry *reg;
    const char *job;
    const char *self;
    int count;
    atomic_bool stop;
    atomic_int shardings;
};

/* Shard like a leader that knows nothing of failover: on necessary, the
 * live instances but itself, ascending, item i to instance i mod n. */
static void fake_shard(struct fake_leader *f)
{
    char **ids = NULL;
    size_t n = zk_children(f->reg, &ids, "/%s/instances", f->job);
    const char *others[64];
    size_t k = 0;
    for (size_t i = 0; i < n && k < 64; i++)
        if (strcmp(ids[i], f->self) != 0)
            others[k++] = ids[i];
    if (k > 0) {
        for (int item = 0; item < f->count; item++) {
            char path[512];
            snprintf(path, sizeof path, "/%s/sharding/%d/instance", f->job, item);
            const char *owner = others[(size_t)item % k];
            ej_registry_persist(f->reg, path, owner, strlen(owner));
        }
        char path[512];
        snprintf(path, sizeof path, "/%s/leader/sharding/necessary", f->job);
        ej_registry_delete(f->reg, path, -1);
        atomic_fetch_add(&f->shardings, 1);
        /* An instance that joined after the listing found the flag set and
         * did not set it again: the delete above lost its request (a real
         * leader compares its instances after sharding). Set it back. */
        char **now = NULL;
        if (zk_children(f->reg, &now, "/%s/instances", f->job) != n)
            ej_registry_create_node(f->reg, path, NULL, 0, EJ_REG_PERSISTENT, EJ_REG_CREATE_PARENTS,
                                    NULL);
        ej_registry_free_names(now);
    }
    ej_registry_free_names(ids);
}

static void *fake_leader_main(void *arg)
{
    struct fake_leader *f = arg;
    while (!atomic_load(&f->stop)) {
        if (zk_exists(f->reg, "/%s/leader/sharding/necessary", f->job))
            fake_shard(f);
        ej__sleep_ms(50);
    }
    return NULL;
}

static void test_stale_leader_healed(const char *servers, const char *ns, ej_registry *reg)
{
    const char *J = "healJob";
    char *log = tmp_log("heal");
    /* A leader node naming no instance, held by a live session (ours). */
    const char *ghost = "127.0.8.99@-@1";
    char path[256];
    snprintf(path, sizeof path, "/%s/leader/election/instance", J);
    REQUIRE(ej_registry_create_node(reg, path, ghost, strlen(ghost), EJ_REG_EPHEMERAL,
                                    EJ_REG_CREATE_PARENTS, NULL) == 0,
            "ghost leader: %s", ej_registry_errmsg(reg));
    char sess[16];
    snprintf(sess, sizeof sess, "%d", SESSION_MS);
    int a = node_start(servers, ns, J, log, "127.0.8.1", "--count", "4", "--cron", "* * * * * ?",
                       "--item-ms", "50", "--session-ms", sess, NULL);
    int b = node_start(servers, ns, J, log, "127.0.8.2", "--count", "4", "--cron", "* * * * * ?",
                       "--item-ms", "50", "--session-ms", sess, NULL);
    REQUIRE(a >= 0 && b >= 0, "nodes");
    int64_t started = ej__now_ms();
    CHECK(wait_sharded(reg, J, 4, 20000), "the job stayed stalled behind the ghost leader");
    char *leader = leader_of(reg, J);
    CHECK(leader && node_index(leader) >= 0, "leader is %s, not one of the instances",
          leader ? leader : "(none)");
    say("leader %s, sharded %" PRId64 " ms after the instances started", leader ? leader : "(none)",
        ej__now_ms() - started);
    free(leader);
    ej__sleep_ms(2500);
    int64_t t1 = ej__now_ms();
    struct xlog xl;
    xlog_read(log, &xl);
    CHECK(check_all_ran(&xl, 4, t1 - 2000, t1) == 0, "items after the healing");
    CHECK(check_no_overlap(&xl) == 0, "overlap");
    xlog_free(&xl);
    node_stop(a);
    node_stop(b);
    unlink(log);
    free(log);
}

static void test_fake_leader_failover(const char *servers, const char *ns)
{
    const char *J = "mixedJob";
    char *log = tmp_log("mixed");
    struct fake_leader f = {.job = J, .self = "127.0.9.1@-@1", .count = 2};
    f.reg = zk_connect(servers, ns);
    char path[256];
    snprintf(path, sizeof path, "/%s/servers/127.0.9.1", J);
    REQUIRE(ej_registry_persist(f.reg, path, "", 0) == 0, "fake server");
    snprintf(path, sizeof path, "/%s/instances/%s", J, f.self);
    REQUIRE(ej_registry_create_node(f.reg, path, NULL, 0, EJ_REG_EPHEMERAL, EJ_REG_CREATE_PARENTS,
                                    NULL) == 0,
            "fake instance");
    snprintf(path, sizeof path, "/%s/leader/election/instance", J);
    REQUIRE(ej_registry_create_node(f.reg, path, f.self, strlen(f.self), EJ_REG_EPHEMERAL,
                                    EJ_REG_CREATE_PARENTS, NULL) == 0,
            "fake leader");
    pthread_t th;
    REQUIRE(pthread_create(&th, NULL, fake_leader_main, &f) == 0, "thread");

    char sess[16];
    snprintf(sess, sizeof sess, "%d", SESSION_MS);
    /* Alone on their IPs. Ascending ids: item 0 to a, item 1 to b. */
    int a = node_start(servers, ns, J, log, "127.0.9.2", "--count", "2", "--cron", "* * * * * ?",
                       "--item-ms", "100", "--failover", "--session-ms", sess, NULL);
    int b = node_start(servers, ns, J, log, "127.0.9.3", "--count", "2", "--cron", "* * * * * ?",
                       "--item-ms", "100", "--failover", "--session-ms", sess, "--long-item",
                       "1:8000", "--long-first", NULL);
    REQUIRE(a >= 0 && b >= 0, "nodes");
    REQUIRE(wait_sharded(f.reg, J, 2, 15000), "sharding by the fake leader");
    char *o1 = NULL;
    for (int k = 0; k < 200; k++) {
        free(o1);
        o1 = zk_get(f.reg, "/%s/sharding/1/instance", J);
        if (o1 && strcmp(o1, nodes[b].id) == 0)
            break;
        ej__sleep_ms(50);
    }
    REQUIRE(o1 && strcmp(o1, nodes[b].id) == 0, "item 1 is %s's", o1 ? o1 : "(none)");
    free(o1);
    /* Wait for b's long run of item 1. */
    bool running = false;
    struct xlog xl;
    for (int k = 0; k < 300 && !running; k++) {
        xlog_read(log, &xl);
        for (size_t i = 0; i < xl.n; i++)
            if (strcmp(xl.runs[i].inst, nodes[b].id) == 0 && xl.runs[i].item == 1 &&
                xl.runs[i].end == INT64_MAX && ej__now_ms() - xl.runs[i].start > 300)
                running = true;
        xlog_free(&xl);
        if (!running)
            ej__sleep_ms(50);
    }
    REQUIRE(running, "b's long item never ran");
    node_kill9(b);
    int64_t killed = nodes[b].killed_at;
    int64_t ran_at = 0;
    while (ej__now_ms() < killed + SESSION_MS + 8000 && !ran_at) {
        xlog_read(log, &xl);
        for (size_t i = 0; i < xl.n; i++)
            if (strcmp(xl.runs[i].inst, nodes[a].id) == 0 && xl.runs[i].item == 1 &&
                strcmp(xl.runs[i].src, "FAILOVER") == 0 && xl.runs[i].start >= killed)
                ran_at = xl.runs[i].start;
        xlog_free(&xl);
        if (!ran_at)
            ej__sleep_ms(50);
    }
    CHECK(ran_at, "item 1 of the crashed instance was not failed over within %d ms",
          SESSION_MS + 8000);
    if (ran_at)
        say("item 1 failed over to %s %" PRId64 " ms after the kill (session %d ms)", nodes[a].id,
            ran_at - killed, SESSION_MS);
    CHECK(!ran_at || ran_at - killed <= SESSION_MS + 3000, "failover %" PRId64 " ms after the kill",
          ran_at - killed);
    xlog_read(log, &xl);
    CHECK(check_no_overlap(&xl) == 0, "overlap");
    xlog_free(&xl);
    atomic_store(&f.stop, true);
    pthread_join(th, NULL);
    node_stop(a);
    ej_registry_destroy(f.reg);
    unlink(log);
    free(log);
}

int main(void)
{
    harness_init();
    zkf_server *zk = zkf_shared();
    REQUIRE(zk != NULL, "zookeeper");
    const char *servers = zkf_connect_string(zk);
    char *ns = zkf_unique_namespace("mixed");
    ej_registry *reg = zk_connect(servers, ns);
    test_stale_leader_healed(servers, ns, reg);
    test_fake_leader_failover(servers, ns);
    ej_registry_destroy(reg);
    free(ns);
    if (failures) {
        fprintf(stderr, "%d check(s) failed\n", failures);
        return 1;
    }
    fprintf(stderr, "coord_mixed: all checks passed\n");
    return 0;
}
