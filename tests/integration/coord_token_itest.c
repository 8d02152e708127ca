/*
 * The fencing token of an item run (ctx->fencing_token) is the czxid of
 * its sharding/{item}/running node, read from the transaction that created
 * the node (a set of that node in the same multi: src/coord/execution.c),
 * not by a separate read. In-process job with 3 items, monitorExecution on,
 * a fire a second: while each item runs, a second client reads the running
 * node and compares. The items of one fire share the token; later fires
 * have greater ones. Then a running node of the job's own session is made
 * by hand (as a transaction whose answer was lost leaves it): the next fire
 * adopts it, its czxid the item's token.
 */
#include <inttypes.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "common/util.h"
#include "ejob/ejob.h"
#include "itest_check.h"
#include "zk_fixture.h"

#define ITEMS 3
#define MAX_RUNS 256

struct run {
    int item;
    int64_t token, czxid, owner;
    int64_t version;
};

static ej_registry *peek;
static pthread_mutex_t mu = PTHREAD_MUTEX_INITIALIZER;
static struct run runs[MAX_RUNS];
static size_t nruns;

static int item_fn(const ej_shard_context *ctx, void *user)
{
    (void)user;
    char path[128];
    snprintf(path, sizeof path, "/tokenJob/sharding/%d/running", ctx->sharding_item);
    struct ej_node_stat st;
    bool ex = false;
    struct run r = {.item = ctx->sharding_item, .token = ctx->fencing_token, .czxid = -1};
    if (ej_registry_exists(peek, path, &ex, &st) == 0 && ex) {
        r.czxid = st.czxid;
        r.owner = st.ephemeral_owner;
        r.version = st.version;
    }
    pthread_mutex_lock(&mu);
    if (nruns < MAX_RUNS)
        runs[nruns++] = r;
    pthread_mutex_unlock(&mu);
    return 0;
}

/* Create sharding/1/running in the job's own session between two runs of
 * the item; returns its czxid, or 0. */
static int64_t adopt_one(ej_registry *reg)
{
    const char *path = "/tokenJob/sharding/1/running";
    for (int tries = 0; tries < 100; tries++) {
        int rc = ej_registry_create_node(reg, path, NULL, 0, EJ_REG_EPHEMERAL, 0, NULL);
        if (rc == 0) {
            struct ej_node_stat st;
            bool ex = false;
            if (ej_registry_exists(reg, path, &ex, &st) == 0 && ex)
                return st.czxid;
            return 0;
        }
        ej__sleep_ms(20); /* the item is running now */
    }
    return 0;
}

int main(void)
{
    /* A fire stuck in its ZooKeeper requests would hang the shutdown. */
    alarm(120);
    zkf_server *zk = zkf_shared();
    REQUIRE(zk != NULL, "zookeeper");
    char *ns = zkf_unique_namespace("token");
    struct ej_registry_opts o = itest_registry_opts(zk, ns, 4000);
    ej_registry *reg = NULL;
    REQUIRE(ej_registry_create(&reg, &o) == 0, "connect: %s", ej_registry_errmsg(NULL));
    REQUIRE(ej_registry_create(&peek, &o) == 0, "connect: %s", ej_registry_errmsg(NULL));

    struct ej_job_config cfg;
    ej_job_config_init(&cfg);
    ej_job_config_set_str(&cfg.job_name, "tokenJob");
    ej_job_config_set_str(&cfg.cron, "* * * * * ?");
    cfg.sharding_total_count = ITEMS;
    cfg.job_type = EJ_JOB_TYPE_SIMPLE;
    cfg.monitor_execution = true;
    struct ej_job_def def = {.type = EJ_JOB_TYPE_SIMPLE, .simple = item_fn};
    struct ej_job_opts opts = {.def = &def, .ip = "127.0.6.1"};
    ej_job *job = NULL;
    REQUIRE(ej_job_create(reg, &cfg, &opts, &job) == 0, "create");
    REQUIRE(ej_job_start(job) == 0, "start: %s", ej_job_last_error(job, (char[512]){0}, 512));
    ej__sleep_ms(4500);
    pthread_mutex_lock(&mu);
    size_t n = nruns;
    pthread_mutex_unlock(&mu);

    /* A running node of the job's own session already there (left by a
     * transaction whose answer was lost): the next fire adopts it, with
     * its czxid as the item's token, and deletes it after the run. */
    int64_t adopted = adopt_one(reg);
    ej__sleep_ms(2500);
    ej_job_shutdown(job);
    ej_job_destroy(job);
    CHECK(adopted > 0, "no running node of the job's session could be made");
    bool adopted_ran = false, others_ran = false;
    pthread_mutex_lock(&mu);
    for (size_t i = n; i < nruns; i++) {
        if (runs[i].item == 1 && runs[i].token == adopted)
            adopted_ran = true;
        else if (runs[i].item != 1 && runs[i].token > adopted)
            others_ran = true;
    }
    pthread_mutex_unlock(&mu);
    CHECK(adopted_ran, "item 1 never ran with the adopted node's token %" PRId64, adopted);
    CHECK(others_ran, "items 0 and 2 did not run after the adoption");
    struct ej_node_stat ast;
    bool aex = false;
    CHECK(ej_registry_exists(peek, "/tokenJob/sharding/1/running", &aex, &ast) == 0 &&
              (!aex || ast.czxid != adopted),
          "the adopted running node was left behind");

    int64_t session = ej_registry_session_id(reg);
    CHECK(n >= 2 * ITEMS, "only %zu item runs", n);
    int64_t last = 0;
    size_t tokens = 0;
    for (size_t i = 0; i < n; i++) {
        const struct run *r = &runs[i];
        CHECK(r->token > 0, "item %d ran with token %" PRId64, r->item, r->token);
        CHECK(r->token == r->czxid, "item %d: token %" PRId64 ", running node's czxid %" PRId64,
              r->item, r->token, r->czxid);
        CHECK(r->owner == session, "item %d: running node of session %" PRIx64, r->item, r->owner);
        if (r->token != last) {
            CHECK(r->token > last, "token %" PRId64 " after %" PRId64, r->token, last);
            last = r->token;
            tokens++;
        }
    }
    /* One transaction, hence one token, per fire of the 3 items. */
    CHECK(tokens >= 2 && tokens <= n / ITEMS + 1, "%zu distinct tokens over %zu runs", tokens, n);

    ej_job_config_fini(&cfg);
    ej_registry_destroy(peek);
    ej_registry_destroy(reg);
    free(ns);
    if (failures) {
        fprintf(stderr, "%d check(s) failed\n", failures);
        return 1;
    }
    fprintf(stderr, "coord_token: %zu runs, %zu tokens, all checks passed\n", n, tokens);
    return 0;
}
