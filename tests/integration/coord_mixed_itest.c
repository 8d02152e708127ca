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
 *
 * 3. Misfire marks survive a Java leader's resharding. Java 2.1.5's leader
 *    reshards by deleting every sharding/N/instance, one at a time, and
 *    writing them all again in one transaction with the flags' deletes. A
 *    fake leader does exactly that while the items of an ejob instance are
 *    marked misfire (its first run overran a fire time), giving it the same
 *    items again. The promised re-runs must happen (source MISFIRE, after
 *    the resharding) and the misfire nodes must go with them. (The view
 *    forgot the marks of items that were briefly no one's: nothing ran as
 *    MISFIRE and the nodes stayed for good.)
 *
 * 4. A BALANCED job under a Java leader. 2.1.5 loads the strategy from
 *    jobShardingStrategyClass and throws on a class it cannot load, after
 *    it deleted every instance node and with processing still held: no
 *    instance of either kind ran anything. ejob keeps a strategy Java
 *    cannot load out of that key (Java's default "" there, ejob's choice in
 *    jobShardingStrategyType), so the Java leader shards with
 *    AverageAllocation and the job runs.
 *
 * 5. A mark inherited with an item. A Java instance marks its item
 *    misfire and stops; the Java leader gives the item to an ejob
 *    instance. The mark stood for the Java instance's fire time: the new
 *    owner clears it (saying why) and runs the item at its fire, instead
 *    of re-running it as MISFIRE right after that run.
 */
#include <pthread.h>
#include <stdatomic.h>

#include "coord_harness_itest.c"
#include "ejob/console.h"

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

/* ---- a leader that reshards the way Java 2.1.5 does ---- */

struct java_leader {
    ej_registry *reg;
    const char *job;
    const char *self;
    int count;
    atomic_bool stop;
    atomic_int shardings;
    atomic_int pause_ms; /* between the deletes and the transaction */
    atomic_llong last_done_ms;
    atomic_int strategy_errors;
};

/* jobShardingStrategyClass of the config node, the one key of it Java's
 * reader takes the strategy from. NULL when there is none. Caller frees. */
static char *java_strategy_class(struct java_leader *f)
{
    char *cfg = zk_get(f->reg, "/%s/config", f->job);
    const char *key = "\"jobShardingStrategyClass\":\"";
    char *at = cfg ? strstr(cfg, key) : NULL;
    char *cls = NULL;
    if (at) {
        at += strlen(key);
        char *end = strchr(at, '"');
        cls = end ? strndup(at, (size_t)(end - at)) : NULL;
    }
    free(cfg);
    return cls;
}

/* What 2.1.5's JobShardingStrategyFactory loads: "" (AverageAllocation)
 * or one of its strategy classes (no other is on a plain Java instance's
 * class path). */
static bool java_loads_strategy(const char *cls)
{
    static const char *const classes[] = {"AverageAllocationJobShardingStrategy",
                                          "OdevitySortByNameJobShardingStrategy",
                                          "RotateServerByNameJobShardingStrategy"};
    const char *pkg = "com.dangdang.ddframe.job.lite.api.strategy.impl.";
    if (cls[0] == '\0')
        return true;
    for (size_t i = 0; i < 3; i++)
        if (strncmp(cls, pkg, strlen(pkg)) == 0 && strcmp(cls + strlen(pkg), classes[i]) == 0)
            return true;
    return false;
}

/* ShardingService.shardingIfNecessary of 2.1.5, as leader: wait for no
 * running item, processing (ephemeral), resetShardingInfo (delete every
 * sharding/N/instance, create sharding/N where missing), the strategy
 * (AverageAllocation over the live instances but itself, which runs
 * nothing), then one multi: check("/"), the instance nodes, delete
 * necessary, delete processing. */
static void java_reshard(struct java_leader *f)
{
    char path[512];
    for (int k = 0; k < 200; k++) {
        bool running = false;
        for (int item = 0; item < f->count && !running; item++)
            running = zk_exists(f->reg, "/%s/sharding/%d/running", f->job, item);
        if (!running)
            break;
        ej__sleep_ms(100);
    }
    snprintf(path, sizeof path, "/%s/leader/sharding/processing", f->job);
    ej_registry_create_node(f->reg, path, NULL, 0, EJ_REG_EPHEMERAL, EJ_REG_CREATE_PARENTS, NULL);
    for (int item = 0; item < f->count; item++) {
        snprintf(path, sizeof path, "/%s/sharding/%d/instance", f->job, item);
        ej_registry_delete(f->reg, path, -1);
        snprintf(path, sizeof path, "/%s/sharding/%d", f->job, item);
        ej_registry_create_node(f->reg, path, NULL, 0, EJ_REG_PERSISTENT, EJ_REG_CREATE_PARENTS,
                                NULL);
    }
    /* JobShardingStrategyFactory.getStrategy: a class it cannot load throws,
     * leaving processing and necessary as they are (the job stalls). */
    char *cls = java_strategy_class(f);
    bool loads = cls && java_loads_strategy(cls);
    if (!loads) {
        say("java leader: JobConfigurationException: Sharding strategy class '%s' config error",
            cls ? cls : "(no config)");
        atomic_fetch_add(&f->strategy_errors, 1);
        free(cls);
        return;
    }
    free(cls);
    char **ids = NULL;
    size_t n = zk_children(f->reg, &ids, "/%s/instances", f->job);
    const char *others[64];
    size_t k = 0;
    for (size_t i = n; i-- > 0 && k < 64;) /* reverse lexicographic, as Java */
        if (strcmp(ids[i], f->self) != 0)
            others[k++] = ids[i];
    ej__sleep_ms(atomic_load(&f->pause_ms));
    struct ej_reg_op ops[3 + 64];
    char paths[64][128];
    size_t nops = 0;
    ops[nops++] = (struct ej_reg_op){.type = EJ_REG_OP_CHECK, .path = "/", .version = -1};
    size_t per = k ? (size_t)f->count / k : 0;
    for (int item = 0; item < f->count && k > 0 && item < 64; item++) {
        /* AverageAllocation: count / k each, in order; the rest one each. */
        size_t idx = per ? (size_t)item / per : 0;
        if (idx >= k)
            idx = (size_t)item - per * k;
        snprintf(paths[item], sizeof paths[item], "/%s/sharding/%d/instance", f->job, item);
        ops[nops++] = (struct ej_reg_op){.type = EJ_REG_OP_CREATE,
                                         .path = paths[item],
                                         .data = others[idx],
                                         .len = strlen(others[idx]),
                                         .mode = EJ_REG_PERSISTENT,
                                         .version = -1};
    }
    char necessary[256], processing[256];
    snprintf(necessary, sizeof necessary, "/%s/leader/sharding/necessary", f->job);
    snprintf(processing, sizeof processing, "/%s/leader/sharding/processing", f->job);
    ops[nops++] = (struct ej_reg_op){.type = EJ_REG_OP_DELETE, .path = necessary, .version = -1};
    ops[nops++] = (struct ej_reg_op){.type = EJ_REG_OP_DELETE, .path = processing, .version = -1};
    if (ej_registry_multi(f->reg, ops, nops, NULL) != 0)
        say("java leader: sharding transaction failed: %s", ej_registry_errmsg(f->reg));
    atomic_store(&f->last_done_ms, ej__now_ms());
    atomic_fetch_add(&f->shardings, 1);
    ej_registry_free_names(ids);
}

static void *java_leader_main(void *arg)
{
    struct java_leader *f = arg;
    while (!atomic_load(&f->stop)) {
        if (zk_exists(f->reg, "/%s/leader/sharding/necessary", f->job))
            java_reshard(f);
        ej__sleep_ms(50);
    }
    return NULL;
}

/* A registry client registered as an instance on its own server, holding
 * the leader node when lead. */
static ej_registry *fake_peer(const char *servers, const char *ns, const char *job, const char *ip,
                              const char *id, bool lead)
{
    ej_registry *reg = zk_connect(servers, ns);
    char path[256];
    snprintf(path, sizeof path, "/%s/servers/%s", job, ip);
    REQUIRE(ej_registry_persist(reg, path, "", 0) == 0, "fake server");
    snprintf(path, sizeof path, "/%s/instances/%s", job, id);
    REQUIRE(ej_registry_create_node(reg, path, NULL, 0, EJ_REG_EPHEMERAL, EJ_REG_CREATE_PARENTS,
                                    NULL) == 0,
            "fake instance");
    if (lead) {
        snprintf(path, sizeof path, "/%s/leader/election/instance", job);
        REQUIRE(ej_registry_create_node(reg, path, id, strlen(id), EJ_REG_EPHEMERAL,
                                        EJ_REG_CREATE_PARENTS, NULL) == 0,
                "fake leader");
    }
    return reg;
}

/* The first MISFIRE run of item 0 and of item 1 that started at or after
 * since (0: none yet), waiting up to ms. */
static void wait_misfire_runs(const char *log, int64_t since, int ms, int64_t ran[2])
{
    ran[0] = ran[1] = 0;
    struct xlog xl;
    for (int64_t end = ej__now_ms() + ms; ej__now_ms() < end && !(ran[0] && ran[1]);) {
        xlog_read(log, &xl);
        for (size_t i = 0; i < xl.n; i++) {
            const struct run *r = &xl.runs[i];
            if (strcmp(r->src, "MISFIRE") == 0 && r->start >= since && r->item >= 0 &&
                r->item < 2 && !ran[r->item])
                ran[r->item] = r->start;
        }
        xlog_free(&xl);
        ej__sleep_ms(50);
    }
}

static void test_misfire_survives_java_reshard(const char *servers, const char *ns)
{
    const char *J = "misfireJavaJob";
    char *log = tmp_log("mfjava");
    struct java_leader f = {.job = J, .self = "127.0.11.1@-@1", .count = 2};
    f.reg = fake_peer(servers, ns, J, "127.0.11.1", f.self, true);
    pthread_t th;
    REQUIRE(pthread_create(&th, NULL, java_leader_main, &f) == 0, "thread");
    char sess[16];
    snprintf(sess, sizeof sess, "%d", SESSION_MS);
    /* Item 0's first run overruns two fire times: both items get marked. */
    int a = node_start(servers, ns, J, log, "127.0.11.2", "--count", "2", "--cron", "* * * * * ?",
                       "--item-ms", "100", "--long-item", "0:2600", "--long-first", "--session-ms",
                       sess, NULL);
    REQUIRE(a >= 0, "node");
    REQUIRE(wait_sharded(f.reg, J, 2, 15000), "sharding by the java leader");
    bool marked = false;
    for (int k = 0; k < 300 && !marked; k++) {
        marked = zk_exists(f.reg, "/%s/sharding/0/misfire", J) &&
                 zk_exists(f.reg, "/%s/sharding/1/misfire", J);
        if (!marked)
            ej__sleep_ms(20);
    }
    REQUIRE(marked, "the items were never marked misfire");
    /* A resharding now, with a window between the deletes and the
     * transaction as long as a slow Java leader's (GC, a big namespace). */
    atomic_store(&f.pause_ms, 400);
    int before = atomic_load(&f.shardings);
    char necessary[256];
    snprintf(necessary, sizeof necessary, "/%s/leader/sharding/necessary", J);
    REQUIRE(ej_registry_create_node(f.reg, necessary, NULL, 0, EJ_REG_PERSISTENT,
                                    EJ_REG_CREATE_PARENTS, NULL) == 0,
            "necessary");
    for (int k = 0; k < 200 && atomic_load(&f.shardings) == before; k++)
        ej__sleep_ms(50);
    REQUIRE(atomic_load(&f.shardings) > before, "the java leader did not reshard");
    atomic_store(&f.pause_ms, 0);
    int64_t resharded = atomic_load(&f.last_done_ms);
    char *o0 = zk_get(f.reg, "/%s/sharding/0/instance", J);
    char *o1 = zk_get(f.reg, "/%s/sharding/1/instance", J);
    CHECK(o0 && o1 && strcmp(o0, nodes[a].id) == 0 && strcmp(o1, nodes[a].id) == 0,
          "the items are %s and %s's, not %s's again", o0 ? o0 : "(none)", o1 ? o1 : "(none)",
          nodes[a].id);
    free(o0);
    free(o1);
    /* The promised re-runs, and the marks gone with them. */
    int64_t ran[2];
    wait_misfire_runs(log, resharded, 6000, ran);
    CHECK(ran[0] && ran[1], "promised misfire re-runs after the resharding: item 0 %s, item 1 %s",
          ran[0] ? "ran" : "never", ran[1] ? "ran" : "never");
    if (ran[0] && ran[1])
        say("misfire re-runs %" PRId64 " and %" PRId64 " ms after the java resharding",
            ran[0] - resharded, ran[1] - resharded);
    ej__sleep_ms(1500);
    for (int item = 0; item < 2; item++)
        CHECK(!zk_exists(f.reg, "/%s/sharding/%d/misfire", J, item),
              "sharding/%d/misfire outlives the run it stood for", item);
    struct xlog xl;
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

static void test_balanced_under_java_leader(const char *servers, const char *ns)
{
    const char *J = "balancedJavaJob";
    char *log = tmp_log("baljava");
    struct java_leader f = {.job = J, .self = "127.0.12.1@-@1", .count = 2};
    f.reg = fake_peer(servers, ns, J, "127.0.12.1", f.self, true);
    pthread_t th;
    REQUIRE(pthread_create(&th, NULL, java_leader_main, &f) == 0, "thread");
    char sess[16];
    snprintf(sess, sizeof sess, "%d", SESSION_MS);
    int a = node_start(servers, ns, J, log, "127.0.12.2", "--count", "2", "--cron", "* * * * * ?",
                       "--item-ms", "50", "--strategy", "BALANCED", "--session-ms", sess, NULL);
    REQUIRE(a >= 0, "node");
    bool sharded = wait_sharded(f.reg, J, 2, 10000);
    CHECK(sharded, "the java leader never sharded the BALANCED job (%d strategy errors)",
          atomic_load(&f.strategy_errors));
    char *cls = java_strategy_class(&f);
    char *cfg = zk_get(f.reg, "/%s/config", J);
    CHECK(cls && cls[0] == '\0', "jobShardingStrategyClass is \"%s\", not Java's default",
          cls ? cls : "(none)");
    CHECK(cfg && strstr(cfg, "\"jobShardingStrategyType\":\"BALANCED\""),
          "ejob's choice is not in jobShardingStrategyType: %s", cfg ? cfg : "(no config)");
    free(cls);
    free(cfg);
    /* `ejob status` and the console flag the Java instance, which ignores
     * the strategy: the fake (no ejob marker), not the ejob instance. */
    ej_console *con = NULL;
    REQUIRE(ej_console_create(f.reg, NULL, &con) == 0, "console");
    struct ej_console_job cj;
    REQUIRE(ej_console_job_load(con, J, true, &cj) == 0, "job load");
    const char *keys[4];
    size_t nkeys = ej_job_config_java_ignored(&cj.cfg, keys, 4);
    CHECK(nkeys == 1 && strcmp(keys[0], "jobShardingStrategyType") == 0,
          "%zu settings Java ignores, first %s", nkeys, nkeys ? keys[0] : "(none)");
    char **java = NULL;
    size_t njava = 0;
    CHECK(ej_console_job_java_instances(con, J, &java, &njava) == 0, "java instances");
    CHECK(njava == 1 && strcmp(java[0], f.self) == 0, "%zu java instances, first %s", njava,
          njava ? java[0] : "(none)");
    ej_registry_free_names(java);
    ej_console_job_fini(&cj);
    ej_console_destroy(con);
    if (sharded) {
        ej__sleep_ms(2500);
        int64_t t1 = ej__now_ms();
        struct xlog xl;
        xlog_read(log, &xl);
        CHECK(check_all_ran(&xl, 2, t1 - 2000, t1) == 0, "items under the java leader");
        xlog_free(&xl);
    }
    atomic_store(&f.stop, true);
    pthread_join(th, NULL);
    node_stop(a);
    ej_registry_destroy(f.reg);
    unlink(log);
    free(log);
}

static void test_inherited_mark_cleared(const char *servers, const char *ns)
{
    const char *J = "inheritJob";
    char *log = tmp_log("inherit");
    struct java_leader f = {.job = J, .self = "127.0.13.1@-@1", .count = 2};
    f.reg = fake_peer(servers, ns, J, "127.0.13.1", f.self, true);
    /* A Java instance that sorts before A: item 0 is its. */
    const char *java = "127.0.13.9@-@1";
    ej_registry *jreg = fake_peer(servers, ns, J, "127.0.13.9", java, false);
    pthread_t th;
    REQUIRE(pthread_create(&th, NULL, java_leader_main, &f) == 0, "thread");
    char sess[16];
    snprintf(sess, sizeof sess, "%d", SESSION_MS);
    int a = node_start(servers, ns, J, log, "127.0.13.2", "--count", "2", "--cron", "* * * * * ?",
                       "--item-ms", "50", "--session-ms", sess, NULL);
    REQUIRE(a >= 0, "node");
    char *o0 = NULL;
    for (int k = 0; k < 200; k++) {
        free(o0);
        o0 = zk_get(f.reg, "/%s/sharding/0/instance", J);
        if (o0 && strcmp(o0, java) == 0 && !zk_exists(f.reg, "/%s/leader/sharding/necessary", J))
            break;
        ej__sleep_ms(50);
    }
    REQUIRE(o0 && strcmp(o0, java) == 0, "item 0 is %s's, not the java instance's",
            o0 ? o0 : "(none)");
    free(o0);
    /* The Java instance's run overran a fire time (its triggerMisfired
     * marked item 0), then it stopped; any 2.1.5 instance sets necessary
     * when one leaves, and the leader gives item 0 to A. */
    char path[256];
    snprintf(path, sizeof path, "/%s/sharding/0/misfire", J);
    REQUIRE(ej_registry_persist(jreg, path, "", 0) == 0, "java's mark");
    ej_registry_destroy(jreg);
    int before = atomic_load(&f.shardings);
    snprintf(path, sizeof path, "/%s/leader/sharding/necessary", J);
    REQUIRE(ej_registry_create_node(f.reg, path, NULL, 0, EJ_REG_PERSISTENT, EJ_REG_CREATE_PARENTS,
                                    NULL) == 0,
            "necessary");
    for (int k = 0; k < 200 && atomic_load(&f.shardings) == before; k++)
        ej__sleep_ms(50);
    REQUIRE(atomic_load(&f.shardings) > before, "the java leader did not reshard");
    int64_t resharded = atomic_load(&f.last_done_ms);
    ej__sleep_ms(3000);
    CHECK(!zk_exists(f.reg, "/%s/sharding/0/misfire", J),
          "the java instance's mark on item 0 outlives the run it stood for");
    struct xlog xl;
    xlog_read(log, &xl);
    int normal = runs_of(&xl, 0, resharded, INT64_MAX, "NORMAL_TRIGGER");
    int misfire = runs_of(&xl, 0, resharded, INT64_MAX, "MISFIRE");
    say("item 0 after it became A's: %d normal, %d misfire runs", normal, misfire);
    CHECK(normal >= 1, "A never ran item 0");
    CHECK(misfire == 0, "A re-ran the previous owner's mark as MISFIRE %d time(s)", misfire);
    CHECK(check_no_overlap(&xl) == 0, "overlap");
    xlog_free(&xl);
    atomic_store(&f.stop, true);
    pthread_join(th, NULL);
    node_stop(a);
    ej_registry_destroy(f.reg);
    unlink(log);
    free(log);
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
    test_misfire_survives_java_reshard(servers, ns);
    test_balanced_under_java_leader(servers, ns);
    test_inherited_mark_cleared(servers, ns);
    ej_registry_destroy(reg);
    free(ns);
    if (failures) {
        fprintf(stderr, "%d check(s) failed\n", failures);
        return 1;
    }
    fprintf(stderr, "coord_mixed: all checks passed\n");
    return 0;
}
