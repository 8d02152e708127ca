/*
 * Misfire marking against a real ZooKeeper (src/runtime/misfire.c): a cron
 * fire time that passes while a normal run still goes on marks EVERY local
 * item misfire, as ElasticJob 2.1.5's JobTriggerListener does, and the run's
 * misfire loop re-runs them when it is done.
 *
 * The case that tells it apart: a 2-item job owned by one instance, item 1
 * disabled, item 0 running 2.5 s under a cron of every second. While item 0
 * runs, an operator enables item 1. The fire time that passes next must be
 * re-run for item 1 too, in the same fire's misfire loop: item 1's first
 * run after the enable has source MISFIRE. (Marking only the items of the
 * run left item 1 out: that fire time was dropped for it, and its first run
 * came from the next cron fire.)
 *
 * On the way: item 1 must not run while disabled, also at the first fire,
 * right after the resharding gave it to the instance (the view had not yet
 * loaded its disabled node then, and ran it once in about 1 of 8 runs).
 */
#include <inttypes.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "common/util.h"
#include "ejob/console.h"
#include "ejob/ejob.h"
#include "ejob/log.h"
#include "zk_fixture.h"
#include "itest_check.h"

#define SESSION_MS 4000
#define JOB "misfireJob"

static atomic_int item0_ms = 2500;
static atomic_int item0_runs;
static atomic_bool enabled;       /* item 1 enabled by the operator */
static atomic_int item1_first_source = -1; /* of its first run after the enable */
static atomic_int item1_runs_after;
static atomic_int item1_runs_before; /* while disabled: must stay 0 */

static int item_fn(const ej_shard_context *ctx, void *user)
{
    (void)user;
    if (ctx->sharding_item == 0) {
        atomic_fetch_add(&item0_runs, 1);
        int ms = atomic_load(&item0_ms);
        if (ms > 0)
            ej__sleep_ms(ms);
        return 0;
    }
    if (atomic_load(&enabled)) {
        int unset = -1;
        atomic_compare_exchange_strong(&item1_first_source, &unset, (int)ctx->execution_source);
        atomic_fetch_add(&item1_runs_after, 1);
    } else {
        atomic_fetch_add(&item1_runs_before, 1);
    }
    return 0;
}

static bool wait_for(atomic_int *v, int at_least, int64_t ms)
{
    int64_t end = ej__mono_ms() + ms;
    while (atomic_load(v) < at_least && ej__mono_ms() < end)
        ej__sleep_ms(20);
    return atomic_load(v) >= at_least;
}

static ej_job *start_job(ej_registry *reg)
{
    struct ej_job_config cfg;
    ej_job_config_init(&cfg);
    ej_job_config_set_str(&cfg.job_name, JOB);
    ej_job_config_set_str(&cfg.cron, "* * * * * ?");
    cfg.sharding_total_count = 2;
    cfg.job_type = EJ_JOB_TYPE_SIMPLE;
    cfg.misfire = true;
    static struct ej_job_def def = {.type = EJ_JOB_TYPE_SIMPLE, .simple = item_fn};
    struct ej_job_opts jo = {.def = &def, .ip = "127.0.0.1", .drain_timeout_ms = 10000};
    ej_job *job = NULL;
    int rc = ej_job_create(reg, &cfg, &jo, &job);
    ej_job_config_fini(&cfg);
    REQUIRE(rc == 0, "create: %s", ej_strerror(rc));
    rc = ej_job_start(job);
    REQUIRE(rc == 0, "start: %s", ej_job_last_error(job, (char[512]){0}, 512));
    return job;
}

int main(void)
{
    setvbuf(stderr, NULL, _IOLBF, 0);
    zkf_server *zk = NULL;
    zkf_opts zo = {.tick_ms = 200};
    REQUIRE(zkf_start(&zk, &zo) == 0, "zookeeper");
    char *ns = zkf_unique_namespace("misfire");
    struct ej_registry_opts ro = itest_registry_opts(zk, ns, SESSION_MS);
    ej_registry *reg = NULL;
    REQUIRE(ej_registry_create(&reg, &ro) == 0, "registry: %s", ej_registry_errmsg(NULL));

    char *disabled = ej_layout_path_dup(JOB, EJ_LAYOUT_NODE_ITEM_DISABLED, 1, NULL);
    REQUIRE(disabled != NULL, "path");
    REQUIRE(ej_registry_persist(reg, disabled, "", 0) == 0, "disable item 1: %s",
            ej_registry_errmsg(reg));
    ej_job *job = start_job(reg);

    /* Into a run of item 0 (the first may have begun before the sharding
     * settled: take the second), then enable item 1. */
    REQUIRE(wait_for(&item0_runs, 2, 15000), "item 0 ran %d times", atomic_load(&item0_runs));
    ej__sleep_ms(300);
    atomic_store(&enabled, true);
    REQUIRE(ej_registry_delete(reg, disabled, -1) == 0, "enable item 1: %s",
            ej_registry_errmsg(reg));
    int64_t t0 = ej__mono_ms();
    CHECK(atomic_load(&item1_runs_before) == 0, "disabled item 1 ran %d times",
          atomic_load(&item1_runs_before));
    CHECK(wait_for(&item1_runs_after, 1, 10000), "item 1 never ran after the enable");
    int src = atomic_load(&item1_first_source);
    fprintf(stderr, "item 1's first run %" PRId64 " ms after the enable: %s\n",
            ej__mono_ms() - t0, src < 0 ? "none" : ej_execution_source_name(src));
    CHECK(src == EJ_EXEC_MISFIRE,
          "item 1's first run after the enable is %s, not MISFIRE: the fire time that passed "
          "while item 0 ran was not marked for it",
          src < 0 ? "none" : ej_execution_source_name(src));

    atomic_store(&item0_ms, 0);
    ej_job_shutdown(job);
    ej_job_destroy(job);
    free(disabled);
    ej_registry_destroy(reg);
    zkf_destroy(zk);
    free(ns);
    if (failures) {
        fprintf(stderr, "%d check(s) failed\n", failures);
        return 1;
    }
    fprintf(stderr, "coord_misfire: all checks passed\n");
    return 0;
}
