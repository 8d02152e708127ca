/*
 * The public job API (include/ejob/ejob.h), in-process: argument and config
 * errors, start, status, events, pause/resume, trigger, trigger_all, config
 * updates (good and invalid), the monitor port, reconcile, a dataflow job,
 * shutdown; the requests a new job's start costs, a new job whose config
 * says disabled.
 */
#include <stdatomic.h>

#include "coord_harness_itest.c"

/* Cron fires counted by lateness (all buckets). */
static uint64_t lateness_count(const struct ej_job_status *st)
{
    uint64_t n = 0;
    for (size_t i = 0; i <= EJ_FIRE_LATENESS_BUCKETS; i++)
        n += st->fire_lateness[i];
    return n;
}

static atomic_int simple_runs;
static atomic_int item_seen[8];
static atomic_int events_seen;
static atomic_int flow_fetched, flow_processed;

static int simple_fn(const ej_shard_context *ctx, void *user)
{
    (void)user;
    atomic_fetch_add(&simple_runs, 1);
    if (ctx->sharding_item >= 0 && ctx->sharding_item < 8)
        atomic_fetch_add(&item_seen[ctx->sharding_item], 1);
    return 0;
}

static long flow_fetch(const ej_shard_context *ctx, void **batch, void *user)
{
    (void)ctx;
    (void)user;
    /* Two batches per run, then nothing. */
    int n = atomic_fetch_add(&flow_fetched, 1);
    if (n % 3 == 2)
        return 0;
    *batch = (void *)(intptr_t)(n + 1);
    return 1;
}

static int flow_process(const ej_shard_context *ctx, void *batch, long count, void *user)
{
    (void)ctx;
    (void)user;
    (void)batch;
    atomic_fetch_add(&flow_processed, (int)count);
    return 0;
}

static atomic_int missed_paused_events;

static void on_event(const struct ej_event *ev, void *user)
{
    (void)user;
    atomic_fetch_add(&events_seen, 1);
    if (ev->type == EJ_EVENT_STATUS && ev->u.status.message != NULL &&
        strstr(ev->u.status.message, "fire not run (paused)") != NULL)
        atomic_fetch_add(&missed_paused_events, 1);
}

static void base_config(struct ej_job_config *cfg, const char *name, int count, const char *cron)
{
    ej_job_config_init(cfg);
    ej_job_config_set_str(&cfg->job_name, name);
    ej_job_config_set_str(&cfg->cron, cron);
    cfg->sharding_total_count = count;
    cfg->job_type = EJ_JOB_TYPE_SIMPLE;
}

static int runs_now(void)
{
    return atomic_load(&simple_runs);
}

int main(void)
{
    harness_init();
    zkf_server *zk = zkf_shared();
    REQUIRE(zk != NULL, "zookeeper");
    const char *servers = zkf_connect_string(zk);
    char *ns = zkf_unique_namespace("api");
    ej_registry *reg = zk_connect(servers, ns);
    ej_registry *peek = zk_connect(servers, ns);
    struct ej_job_config cfg;
    struct ej_job_def def = {.type = EJ_JOB_TYPE_SIMPLE, .simple = simple_fn};
    struct ej_job_opts opts = {.def = &def, .ip = "127.0.5.1", .reconcile_interval_ms = 500};
    ej_job *job = NULL;

    /* Errors. */
    base_config(&cfg, "apiJob", 0, "* * * * * ?");
    CHECK(ej_job_create(reg, &cfg, &opts, &job) == EJ_ECONFIG, "count 0 accepted");
    ej_job_config_fini(&cfg);
    base_config(&cfg, "apiJob", 2, "* * * * *");
    CHECK(ej_job_create(reg, &cfg, &opts, &job) == EJ_ECONFIG, "5-field cron accepted");
    ej_job_config_fini(&cfg);
    base_config(&cfg, "apiJob", 2, "* * * * * ?");
    CHECK(ej_job_create(reg, &cfg, NULL, &job) == EJ_EINVAL, "SIMPLE without def");
    struct ej_job_def wrong = {.type = EJ_JOB_TYPE_DATAFLOW,
                               .dataflow = {.fetch = flow_fetch, .process = flow_process}};
    struct ej_job_opts wopts = {.def = &wrong};
    CHECK(ej_job_create(reg, &cfg, &wopts, &job) == EJ_EINVAL, "type mismatch accepted");
    CHECK(ej_job_create(NULL, &cfg, &opts, &job) == EJ_EINVAL, "NULL registry");
    CHECK(ej_job_trigger(NULL) == EJ_EINVAL, "trigger NULL");
    ej_job_destroy(NULL);

    /* Start, status, events. */
    cfg.monitor_port = 0; /* any free port */
    REQUIRE(ej_job_create(reg, &cfg, &opts, &job) == 0, "create");
    CHECK(ej_job_trigger(job) == EJ_ESTOPPED, "trigger before start");
    REQUIRE(ej_job_subscribe(job, on_event, NULL) == 0, "subscribe");
    /* Started just after a fire time, so that the next one (the cron fires
     * every second) rarely falls in the start; each that does is allowed
     * for below. */
    while (ej__now_ms() % 1000 > 50)
        ej__sleep_ms(5);
    uint64_t req0 = ej_registry_request_count(reg);
    REQUIRE(ej_job_start(job) == 0, "start: %s", ej_job_last_error(job, (char[512]){0}, 512));
    /* A job new to ZooKeeper: its nodes in one transaction before the
     * caches load, caches that read only what the coordinator looks at
     * (25 requests; 51 when every write came after the caches and they
     * read everything), and the cache of the job's kills/ node (2: its
     * exists watch and children). A cron fire may have begun meanwhile: up
     * to 7 more (the first fire of a new owner also asks ZooKeeper for each
     * item's misfire mark its view has not loaded yet: one exists a item).
     * And the instance's container under ejob/members with its parents and
     * its session's node (failover tells a crash from a clean leave by it):
     * 7 on a job new to ejob, 1 after. The latches' parents ride in the
     * creating transaction (3 creates of their own before): 29-31 with no
     * fire in the start. 7 more for each fire that began in the start (a
     * fire counts itself as it begins). */
    uint64_t reqs = ej_registry_request_count(reg) - req0;
    struct ej_job_status st0;
    REQUIRE(ej_job_status(job, &st0) == 0, "status");
    uint64_t fires0 = st0.fires;
    ej_job_status_fini(&st0);
    say("a new job's start cost %" PRIu64 " requests (%" PRIu64 " fires in it)", reqs, fires0);
    CHECK(reqs <= 40 + 7 * fires0, "%" PRIu64 " requests to start a new job (%" PRIu64 " fires)",
          reqs, fires0);
    char *val = NULL;
    CHECK(ej_registry_get(peek, "/apiJob/servers/127.0.5.1", &val, NULL, NULL) == 0 &&
              strcmp(val, "") == 0,
          "servers/{ip} \"%s\"", val ? val : "(none)");
    free(val);
    val = NULL;
    CHECK(ej_registry_get(peek, "/apiJob/leader/election/instance", &val, NULL, NULL) == 0 &&
              strcmp(val, ej_job_instance_id(job)) == 0,
          "leader \"%s\"", val ? val : "(none)");
    free(val);
    CHECK(ej_job_start(job) == EJ_EBUSY, "second start");
    ej__sleep_ms(2500);
    CHECK(atomic_load(&item_seen[0]) > 0 && atomic_load(&item_seen[1]) > 0, "items ran");
    struct ej_job_status st;
    REQUIRE(ej_job_status(job, &st) == 0, "status");
    CHECK(st.started && !st.stopped && st.leader && st.connected, "status flags");
    CHECK(st.item_count == 2 && st.items[0] == 0 && st.items[1] == 1, "items %zu", st.item_count);
    CHECK(strcmp(st.instance_id, ej_job_instance_id(job)) == 0, "instance id");
    CHECK(strncmp(st.instance_id, "127.0.5.1@-@", 12) == 0, "instance id %s", st.instance_id);
    CHECK(st.next_fire_ms > ej__now_ms() - 100, "next fire %" PRId64, st.next_fire_ms);
    CHECK(st.fires >= 2 && st.items_run >= 4, "fires %" PRIu64 " items %" PRIu64, st.fires,
          st.items_run);
    CHECK(st.monitor_port > 0, "monitor port %d", st.monitor_port);
    /* The only instance leads: it wrote the first assignment. Every fire
     * so far was a cron fire, each counted once by its lateness. */
    CHECK(st.reshards >= 1, "reshards %" PRIu64, st.reshards);
    CHECK(lateness_count(&st) == st.fires, "lateness count %" PRIu64 ", fires %" PRIu64,
          lateness_count(&st), st.fires);
    CHECK(st.fire_lateness_sum >= 0, "lateness sum %f", st.fire_lateness_sum);
    int port = st.monitor_port;
    ej_job_status_fini(&st);
    ej__sleep_ms(300);
    CHECK(atomic_load(&events_seen) > 4, "%d events", atomic_load(&events_seen));

    /* The monitor port answers "dump" with the job's nodes. */
    char *dump = NULL;
    CHECK(ej_monitor_query("127.0.0.1", port, "dump", 5000, &dump) == 0 && dump &&
              strstr(dump, "/apiJob/config | ") != NULL &&
              strstr(dump, "/apiJob/sharding/1/instance | ") != NULL,
          "dump: %.200s", dump ? dump : "(none)");
    free(dump);

    /* Pause: no runs; a trigger still runs; resume: runs again. */
    CHECK(ej_job_pause(job) == 0, "pause");
    ej__sleep_ms(300);
    int before = runs_now();
    ej__sleep_ms(2200);
    CHECK(runs_now() == before, "%d runs while paused", runs_now() - before);
    CHECK(ej_job_trigger(job) == 0, "trigger");
    ej__sleep_ms(500);
    CHECK(runs_now() == before + 2, "trigger while paused ran %d items", runs_now() - before);
    CHECK(ej_job_resume(job) == 0, "resume");
    before = runs_now();
    ej__sleep_ms(2200);
    CHECK(runs_now() >= before + 4, "%d runs after resume", runs_now() - before);
    /* The fire times passed while paused were not run: each is counted and
     * reported with its reason, never dropped without a word. */
    REQUIRE(ej_job_status(job, &st) == 0, "status");
    CHECK(st.fires_missed >= 2, "%" PRIu64 " fire times missed while paused", st.fires_missed);
    ej_job_status_fini(&st);
    CHECK(atomic_load(&missed_paused_events) >= 1, "no 'fire not run (paused)' status event");

    /* trigger_all writes TRIGGER into every instance node. */
    before = runs_now();
    ej__sleep_ms(1000 - ej__now_ms() % 1000 + 400);
    CHECK(ej_job_trigger_all(job) == 0, "trigger_all");
    ej__sleep_ms(300);
    CHECK(runs_now() >= before + 2, "trigger_all ran %d", runs_now() - before);

    /* A good config update applies (count 3, new cron); an invalid one is
     * refused naming the field. */
    struct ej_job_config upd;
    base_config(&upd, "apiJob", 3, "0/2 * * * * ?");
    upd.monitor_port = 0;
    CHECK(ej_job_update_config(job, &upd) == 0, "update: %s",
          ej_job_last_error(job, (char[512]){0}, 512));
    ej__sleep_ms(2500);
    REQUIRE(ej_job_status(job, &st) == 0, "status");
    CHECK(st.sharding_total_count == 3 && strcmp(st.cron, "0/2 * * * * ?") == 0, "count %d cron %s",
          st.sharding_total_count, st.cron);
    CHECK(st.item_count == 3, "%zu items after the update", st.item_count);
    /* The new count was a new assignment; the trigger_all fire (600 ms off
     * the cron's) is not a cron fire: not counted by lateness. */
    CHECK(st.reshards >= 2, "reshards %" PRIu64 " after the count changed", st.reshards);
    CHECK(lateness_count(&st) < st.fires, "lateness count %" PRIu64 ", fires %" PRIu64,
          lateness_count(&st), st.fires);
    ej_job_status_fini(&st);
    ej_job_config_set_str(&upd.cron, "0/2 * * * * ? nope");
    CHECK(ej_job_update_config(job, &upd) == EJ_ECONFIG, "invalid update accepted");
    CHECK(strstr(ej_job_last_error(job, (char[512]){0}, 512), "cron") != NULL, "error: %s",
          ej_job_last_error(job, (char[512]){0}, 512));
    char *cfgnode = zk_get(peek, "/apiJob/config");
    CHECK(cfgnode && strstr(cfgnode, "nope") == NULL, "invalid config written");
    free(cfgnode);
    ej_job_config_fini(&upd);

    /* Reconcile: an owner that is not a live instance makes the leader
     * reshard. */
    REQUIRE(ej_registry_set(peek, "/apiJob/sharding/2/instance", "10.9.9.9@-@1", 12, -1, NULL) == 0,
            "bogus owner");
    bool fixed = false;
    for (int k = 0; k < 60 && !fixed; k++) {
        ej__sleep_ms(100);
        char *o = zk_get(peek, "/apiJob/sharding/2/instance");
        fixed = o && strcmp(o, ej_job_instance_id(job)) == 0;
        free(o);
    }
    CHECK(fixed, "reconcile did not reshard a stale owner");

    /* A dataflow job in the same process and registry. */
    struct ej_job_def flow = {
        .type = EJ_JOB_TYPE_DATAFLOW,
        .dataflow = {.fetch = flow_fetch, .process = flow_process}};
    char path[256];
    struct ej_job_config fcfg;
    base_config(&fcfg, "apiFlow", 1, "* * * * * ?");
    fcfg.job_type = EJ_JOB_TYPE_DATAFLOW;
    fcfg.streaming_process = true;
    struct ej_job_opts fopts = {.def = &flow, .ip = "127.0.5.1"};
    ej_job *fj = NULL;
    REQUIRE(ej_job_create(reg, &fcfg, &fopts, &fj) == 0, "create dataflow");
    REQUIRE(ej_job_start(fj) == 0, "start dataflow: %s",
            ej_job_last_error(fj, (char[512]){0}, 512));
    ej__sleep_ms(2500);
    CHECK(atomic_load(&flow_processed) >= 4, "dataflow processed %d", atomic_load(&flow_processed));
    ej_job_destroy(fj);
    ej_job_config_fini(&fcfg);

    /* A new job whose config says disabled: step 1's transaction writes
     * its server node DISABLED, and a disabled server takes no part in the
     * election. */
    struct ej_job_config dcfg;
    base_config(&dcfg, "apiOff", 1, "* * * * * ?");
    dcfg.disabled = true;
    ej_job *dj = NULL;
    REQUIRE(ej_job_create(reg, &dcfg, &opts, &dj) == 0, "create disabled");
    REQUIRE(ej_job_start(dj) == 0, "start disabled: %s",
            ej_job_last_error(dj, (char[512]){0}, 512));
    char *dval = zk_get(peek, "/apiOff/servers/127.0.5.1");
    CHECK(dval && strcmp(dval, "DISABLED") == 0, "disabled job's server \"%s\"",
          dval ? dval : "(none)");
    free(dval);
    CHECK(!zk_exists(peek, "/apiOff/leader/election/instance"), "a disabled server leads");
    snprintf(path, sizeof path, "/apiOff/instances/%s", ej_job_instance_id(dj));
    CHECK(zk_exists(peek, "%s", path), "disabled job's instance node");
    ej_job_destroy(dj);
    ej_job_config_fini(&dcfg);

    /* A job started again in ZooKeeper as its first start left it (the
     * cron never fired: the resharding flag is still there), on a registry
     * of its own so that nothing else is counted: 23 requests, and 2 for
     * the watch on the job's kills/ node (ejob kill), and 1 for the
     * instance's container (there already: the first start made it), and
     * 1 for the transaction sent again without the session's node in it
     * (there too: the same session made it). The
     * flag the new leader found counts as step 6 (one more when step 6
     * asked to create it once more, only for the server to refuse). */
    ej_registry *again = zk_connect(servers, ns);
    struct ej_job_config acfg;
    base_config(&acfg, "apiAgain", 1, "0 0 0 1 1 ? 2099");
    struct ej_job_opts aopts = {.def = &def, .ip = "127.0.5.1"};
    ej_job *aj = NULL;
    REQUIRE(ej_job_create(again, &acfg, &aopts, &aj) == 0, "create apiAgain");
    REQUIRE(ej_job_start(aj) == 0, "start apiAgain: %s",
            ej_job_last_error(aj, (char[512]){0}, 512));
    ej_job_destroy(aj);
    CHECK(zk_exists(peek, "/apiAgain/leader/sharding/necessary"), "flag left by the first start");
    REQUIRE(ej_job_create(again, &acfg, &aopts, &aj) == 0, "create apiAgain again");
    uint64_t again0 = ej_registry_request_count(again);
    REQUIRE(ej_job_start(aj) == 0, "start apiAgain again: %s",
            ej_job_last_error(aj, (char[512]){0}, 512));
    ej__sleep_ms(300); /* the caches' reads after the start's own nodes */
    REQUIRE(ej_registry_barrier(again, 2000) == 0, "barrier");
    reqs = ej_registry_request_count(again) - again0;
    CHECK(reqs <= 27, "%" PRIu64 " requests to start an existing job", reqs);
    ej_job_destroy(aj);
    ej_job_config_fini(&acfg);
    ej_registry_destroy(again);

    /* Arrivals: what another instance's arrival on a new IP costs a member
     * (here the leader). It reads the instances/ list and sets the flag:
     * 2. Other instances' nodes are known by name only (a departure finds
     * the session from the items): 3 when each new node was read. The
     * servers/ node of another IP is not watched (the leader reads the
     * servers' state when it shards): 5 when it was. */
    ej_registry *member = zk_connect(servers, ns);
    base_config(&acfg, "apiArrivals", 1, "0 0 0 1 1 ? 2099");
    REQUIRE(ej_job_create(member, &acfg, &aopts, &aj) == 0, "create apiArrivals");
    REQUIRE(ej_job_start(aj) == 0, "start apiArrivals: %s",
            ej_job_last_error(aj, (char[512]){0}, 512));
    ej__sleep_ms(300);
    REQUIRE(ej_registry_barrier(member, 2000) == 0, "barrier");
    uint64_t arr0 = ej_registry_request_count(member);
    const int arrivals = 10;
    for (int k = 0; k < arrivals; k++) {
        snprintf(path, sizeof path, "/apiArrivals/servers/127.0.6.%d", k + 1);
        REQUIRE(ej_registry_persist(peek, path, "", 0) == 0, "server %d", k);
        snprintf(path, sizeof path, "/apiArrivals/instances/127.0.6.%d@-@1", k + 1);
        REQUIRE(ej_registry_create_node(peek, path, NULL, 0, EJ_REG_EPHEMERAL, 0, NULL) == 0,
                "instance %d", k);
        ej__sleep_ms(150); /* one arrival at a time: no re-list covers two */
    }
    ej__sleep_ms(300);
    REQUIRE(ej_registry_barrier(member, 2000) == 0, "barrier");
    reqs = ej_registry_request_count(member) - arr0;
    say("%d arrivals cost a member %" PRIu64 " requests", arrivals, reqs);
    CHECK(reqs <= (uint64_t)(2 * arrivals + 2), "%" PRIu64 " requests for %d arrivals", reqs,
          arrivals);

    /* Departures in a burst (daemons killed together): the ten leave in
     * one transaction, and the leader lists instances/ once and sets the
     * resharding flag once for them all: 2. When it set the flag at each
     * departure (the later writes refused, the flag being there), 11, and
     * every task of the job waited behind those writes. */
    struct ej_reg_op gone[10];
    char gpaths[10][96];
    for (int k = 0; k < arrivals; k++) {
        snprintf(gpaths[k], sizeof gpaths[k], "/apiArrivals/instances/127.0.6.%d@-@1", k + 1);
        gone[k] = (struct ej_reg_op){.type = EJ_REG_OP_DELETE, .path = gpaths[k], .version = -1};
    }
    REQUIRE(ej_registry_barrier(member, 2000) == 0, "barrier");
    uint64_t dep0 = ej_registry_request_count(member);
    REQUIRE(ej_registry_multi(peek, gone, (size_t)arrivals, NULL) == 0, "the burst of departures");
    ej__sleep_ms(500);
    REQUIRE(ej_registry_barrier(member, 2000) == 0, "barrier");
    reqs = ej_registry_request_count(member) - dep0;
    say("%d departures at once cost a member %" PRIu64 " requests", arrivals, reqs);
    CHECK(reqs <= 3, "%" PRIu64 " requests for %d departures at once", reqs, arrivals);

    /* The sharding's processing flag and a failover record, each written
     * and deleted by another instance, cost a member a listing of their
     * parent each time (4): by name only. 6 when each new node was read. */
    snprintf(path, sizeof path, "/apiArrivals/leader/failover/items");
    REQUIRE(ej_registry_create_node(peek, path, NULL, 0, EJ_REG_PERSISTENT,
                                    EJ_REG_CREATE_PARENTS, NULL) == 0 ||
                zk_exists(peek, "%s", path),
            "failover items node");
    ej__sleep_ms(300);
    REQUIRE(ej_registry_barrier(member, 2000) == 0, "barrier");
    uint64_t flags0 = ej_registry_request_count(member);
    const char *flagged[] = {"/apiArrivals/leader/sharding/processing",
                             "/apiArrivals/leader/failover/items/0"};
    for (int k = 0; k < 2; k++) {
        REQUIRE(ej_registry_create_node(peek, flagged[k], NULL, 0, EJ_REG_PERSISTENT, 0, NULL) == 0,
                "create %s", flagged[k]);
        ej__sleep_ms(150);
        REQUIRE(ej_registry_delete(peek, flagged[k], -1) == 0, "delete %s", flagged[k]);
        ej__sleep_ms(150);
    }
    ej__sleep_ms(300);
    REQUIRE(ej_registry_barrier(member, 2000) == 0, "barrier");
    reqs = ej_registry_request_count(member) - flags0;
    say("a processing flag and a failover record, each set and cleared, cost a member %" PRIu64
        " requests",
        reqs);
    CHECK(reqs <= 4, "%" PRIu64 " requests for 2 flags set and cleared", reqs);
    ej_job_destroy(aj);
    ej_job_config_fini(&acfg);

    /* A start with overwrite whose config is already there, byte for byte,
     * does not write it (each member's cache would read it again). */
    base_config(&acfg, "apiOverwrite", 1, "0 0 0 1 1 ? 2099");
    acfg.overwrite = true;
    for (int k = 0; k < 2; k++) {
        REQUIRE(ej_job_create(member, &acfg, &aopts, &aj) == 0, "create apiOverwrite");
        REQUIRE(ej_job_start(aj) == 0, "start apiOverwrite: %s",
                ej_job_last_error(aj, (char[512]){0}, 512));
        ej_job_destroy(aj);
    }
    struct ej_node_stat cst;
    bool cex = false;
    REQUIRE(ej_registry_exists(peek, "/apiOverwrite/config", &cex, &cst) == 0 && cex, "config");
    CHECK(cst.version == 0, "config written %d time(s) more by starts of the same config",
          cst.version);
    ej_job_config_fini(&acfg);

    /* Another instance's runs cost a member nothing, failover on: no
     * member watches the running nodes of other instances' items (a crash
     * tells its running items by the children zxid of sharding/{n}). When
     * every member watched them, 2 requests a run (the exists read again
     * after the create and after the delete): in a fleet of 50 daemons a
     * fire cost about 110. */
    base_config(&acfg, "apiRuns", 1, "0 0 0 1 1 ? 2099");
    acfg.failover = true;
    REQUIRE(ej_job_create(member, &acfg, &aopts, &aj) == 0, "create apiRuns");
    REQUIRE(ej_job_start(aj) == 0, "start apiRuns: %s", ej_job_last_error(aj, (char[512]){0}, 512));
    const char *other = "127.0.6.50@-@1";
    REQUIRE(ej_registry_create_node(peek, "/apiRuns/instances/127.0.6.50@-@1", NULL, 0,
                                    EJ_REG_EPHEMERAL, 0, NULL) == 0,
            "the other instance");
    REQUIRE(ej_registry_create_node(peek, "/apiRuns/sharding/0/instance", other, strlen(other),
                                    EJ_REG_PERSISTENT, EJ_REG_CREATE_PARENTS, NULL) == 0,
            "item 0 the other's");
    ej__sleep_ms(300);
    REQUIRE(ej_registry_barrier(member, 2000) == 0, "barrier");
    uint64_t runs0 = ej_registry_request_count(member);
    const int others_runs = 5;
    for (int k = 0; k < others_runs; k++) {
        REQUIRE(ej_registry_create_node(peek, "/apiRuns/sharding/0/running", NULL, 0,
                                        EJ_REG_EPHEMERAL, 0, NULL) == 0,
                "run %d begins", k);
        ej__sleep_ms(100);
        REQUIRE(ej_registry_delete(peek, "/apiRuns/sharding/0/running", -1) == 0, "run %d ends", k);
        ej__sleep_ms(100);
    }
    ej__sleep_ms(300);
    REQUIRE(ej_registry_barrier(member, 2000) == 0, "barrier");
    reqs = ej_registry_request_count(member) - runs0;
    say("%d runs of another instance's item cost a member %" PRIu64 " requests", others_runs, reqs);
    CHECK(reqs == 0, "%" PRIu64 " requests for %d runs of another instance", reqs, others_runs);
    ej_job_destroy(aj);
    ej_job_config_fini(&acfg);
    ej_registry_destroy(member);

    /* Shutdown leaves ZooKeeper cleanly. */
    snprintf(path, sizeof path, "/apiJob/instances/%s", ej_job_instance_id(job));
    CHECK(zk_exists(peek, "%s", path), "instance node before shutdown");
    CHECK(ej_job_shutdown(job) == 0, "shutdown");
    CHECK(!zk_exists(peek, "%s", path), "instance node after shutdown");
    CHECK(!zk_exists(peek, "/apiJob/leader/election/instance"), "leader node after shutdown");
    CHECK(ej_job_trigger(job) == EJ_ESTOPPED, "trigger after shutdown");
    before = runs_now();
    ej__sleep_ms(1500);
    CHECK(runs_now() == before, "ran after shutdown");
    ej_job_destroy(job);
    ej_job_config_fini(&cfg);
    ej_registry_destroy(peek);
    ej_registry_destroy(reg);
    free(ns);
    if (failures) {
        fprintf(stderr, "%d check(s) failed\n", failures);
        return 1;
    }
    fprintf(stderr, "coord_api: all checks passed\n");
    return 0;
}
