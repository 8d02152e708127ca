/*
 * Embedding ejob: a simple job and a dataflow job in one program, both
 * coordinated through ZooKeeper with every other instance of them (run the
 * program twice, or next to Java ElasticJob-Lite 2.1.5 instances of the
 * same jobs, and the items are split between the instances).
 *
 *   embed HOST:PORT [NAMESPACE [SECONDS]]
 *
 * Build: part of the ejob build (examples/CMakeLists.txt). Against an
 * installed ejob (README, "Install"):
 *
 *   cc -o embed embed.c $(pkg-config --cflags --libs ejob)
 *
 * or from CMake, find_package(ejob 1.0 REQUIRED) and link ejob::ejob.
 */
#include <signal.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "ejob/ejob.h"

static volatile sig_atomic_t stop;

static void on_signal(int sig)
{
    (void)sig;
    stop = 1;
}

/* The simple job: called once per shard item this instance owns. */
static int print_item(const ej_shard_context *ctx, void *user)
{
    (void)user;
    printf("simple job %s: item %d of %d (parameter %s, source %s, fencing token %lld)\n",
           ctx->job_name, ctx->sharding_item, ctx->sharding_total_count,
           ctx->sharding_parameter ? ctx->sharding_parameter : "-",
           ej_execution_source_name(ctx->execution_source), (long long)ctx->fencing_token);
    fflush(stdout);
    return 0;
}

/* The dataflow job: fetch a batch of records for the item, then process
 * it. Here a batch is just a counter. */
static atomic_int pending = 3;

static long fetch(const ej_shard_context *ctx, void **batch, void *user)
{
    (void)ctx;
    (void)user;
    int left = atomic_load(&pending);
    if (left <= 0) {
        atomic_store(&pending, 3); /* the next fire finds new work */
        return 0;
    }
    atomic_fetch_sub(&pending, 1);
    int *records = malloc(sizeof *records);
    if (records == NULL)
        return -1;
    *records = left;
    *batch = records;
    return 1;
}

static int process(const ej_shard_context *ctx, void *batch, long count, void *user)
{
    (void)user;
    int *records = batch;
    printf("dataflow job %s: item %d processed %ld record(s) (#%d)\n", ctx->job_name,
           ctx->sharding_item, count, *records);
    fflush(stdout);
    free(records);
    return 0;
}

static int make_config(struct ej_job_config *cfg, const char *name, ej_job_type type, int count,
                       const char *cron, const char *params)
{
    int rc = ej_job_config_init(cfg);
    if (rc == 0)
        rc = ej_job_config_set_str(&cfg->job_name, name);
    if (rc == 0)
        rc = ej_job_config_set_str(&cfg->cron, cron);
    if (rc == 0)
        rc = ej_job_config_set_str(&cfg->sharding_item_parameters, params);
    cfg->job_type = type;
    cfg->sharding_total_count = count;
    cfg->failover = true;
    cfg->overwrite = true; /* this program's config wins over ZooKeeper's */
    return rc;
}

int main(int argc, char **argv)
{
    if (argc < 2) {
        fprintf(stderr, "usage: %s HOST:PORT [NAMESPACE [SECONDS]]\n", argv[0]);
        return 2;
    }
    const char *ns = argc > 2 ? argv[2] : "ejob-embed";
    int seconds = argc > 3 ? atoi(argv[3]) : 20;
    signal(SIGINT, on_signal);
    signal(SIGTERM, on_signal);

    ej_registry *reg = NULL;
    struct ej_registry_opts ro = {
        .servers = argv[1], .namespace_ = ns, .session_timeout_ms = 10000};
    int rc = ej_registry_create(&reg, &ro);
    if (rc != 0) {
        fprintf(stderr, "cannot connect to %s: %s\n", argv[1], ej_registry_errmsg(NULL));
        return 1;
    }

    struct ej_job_config simple_cfg, flow_cfg;
    struct ej_job_def simple_def = {.type = EJ_JOB_TYPE_SIMPLE, .simple = print_item};
    struct ej_job_def flow_def = {.type = EJ_JOB_TYPE_DATAFLOW,
                                  .dataflow = {.fetch = fetch, .process = process}};
    struct ej_job_opts simple_opts = {.def = &simple_def};
    struct ej_job_opts flow_opts = {.def = &flow_def};
    ej_job *simple = NULL, *flow = NULL;
    if (make_config(&simple_cfg, "embedSimple", EJ_JOB_TYPE_SIMPLE, 3, "0/2 * * * * ?",
                    "0=Beijing,1=Shanghai,2=Guangzhou") != 0 ||
        make_config(&flow_cfg, "embedFlow", EJ_JOB_TYPE_DATAFLOW, 2, "0/5 * * * * ?", "") != 0) {
        fprintf(stderr, "out of memory\n");
        return 1;
    }
    rc = ej_job_create(reg, &simple_cfg, &simple_opts, &simple);
    if (rc == 0)
        rc = ej_job_create(reg, &flow_cfg, &flow_opts, &flow);
    if (rc != 0) {
        fprintf(stderr, "cannot create the jobs: %s\n", ej_strerror(rc));
        return 1;
    }
    /* One log line per execution and status event. */
    ej_job_subscribe(simple, ej_event_log_sink, NULL);
    if ((rc = ej_job_start(simple)) != 0 || (rc = ej_job_start(flow)) != 0) {
        fprintf(stderr, "cannot start: %s: %s %s\n", ej_strerror(rc),
                ej_job_last_error(simple, (char[512]){0}, 512),
                ej_job_last_error(flow, (char[512]){0}, 512));
        return 1;
    }
    for (int i = 0; i < seconds * 10 && !stop; i++) {
        struct timespec ts = {0, 100000000L};
        nanosleep(&ts, NULL);
    }
    struct ej_job_status st;
    if (ej_job_status(simple, &st) == 0) {
        printf("%s as %s: leader %s, %zu item(s), %llu fire(s)\n", st.job_name, st.instance_id,
               st.leader ? "yes" : "no", st.item_count, (unsigned long long)st.fires);
        ej_job_status_fini(&st);
    }
    /* Leave ZooKeeper cleanly: other instances take the items at once. */
    ej_job_shutdown(simple);
    ej_job_shutdown(flow);
    ej_job_destroy(simple);
    ej_job_destroy(flow);
    ej_job_config_fini(&simple_cfg);
    ej_job_config_fini(&flow_cfg);
    ej_registry_destroy(reg);
    return 0;
}
