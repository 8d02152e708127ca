/*
 * A job whose caches load slower than its wait bound on a live connection
 * starts, where it used to fail with "the cache of ... did not load in N ms"
 * and be started again from nothing (lifecycle.c wait_cache_loaded). The
 * slow load is made by holding the registry's dispatch thread, where the
 * caches' reads are answered: the connection stays up meanwhile, as it does
 * when a fleet starting at once puts seconds of reads before a job's. A
 * load that outlasts the patience (5 wait bounds) still fails, naming the
 * cache.
 */
#include <inttypes.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "common/util.h"
#include "ejob/ejob.h"
#include "ejob/log.h"
#include "itest_check.h"
#include "zk_fixture.h"

#define SESSION_MS 4000
#define BOUND_MS 400

static atomic_int still_loading_lines;

static void log_sink(ej_log_level level, const char *module, int err, const char *msg, void *user)
{
    (void)user;
    (void)err;
    fprintf(stderr, "[%" PRId64 "] %d [%s] %s\n", ej__now_ms() % 100000, (int)level, module, msg);
    if (strstr(msg, "is still loading after") != NULL)
        atomic_fetch_add(&still_loading_lines, 1);
}

static int item_fn(const ej_shard_context *ctx, void *user)
{
    (void)ctx;
    (void)user;
    return 0;
}

static void hold_dispatch(ej_registry *reg, void *user)
{
    (void)reg;
    ej__sleep_ms(*(int *)user);
}

static ej_job *new_job(ej_registry *reg, const char *name, const char *ip)
{
    struct ej_job_config cfg;
    ej_job_config_init(&cfg);
    ej_job_config_set_str(&cfg.job_name, name);
    ej_job_config_set_str(&cfg.cron, "0 0 0 * * ?");
    cfg.sharding_total_count = 1;
    cfg.job_type = EJ_JOB_TYPE_SIMPLE;
    static struct ej_job_def def = {.type = EJ_JOB_TYPE_SIMPLE, .simple = item_fn};
    struct ej_job_opts jo = {
        .def = &def, .ip = ip, .wait_bound_ms = BOUND_MS, .drain_timeout_ms = 2000};
    ej_job *job = NULL;
    int rc = ej_job_create(reg, &cfg, &jo, &job);
    ej_job_config_fini(&cfg);
    REQUIRE(rc == 0, "create %s: %s", name, ej_strerror(rc));
    return job;
}

/* Starts a job while the dispatch thread is held hold_ms; returns the
 * start's result, its error text in err and how long it took in *took. */
static int start_held(ej_registry *reg, const char *name, int hold_ms, char *err, size_t len,
                      int64_t *took)
{
    ej_job *job = new_job(reg, name, "127.0.0.31");
    static int hold;
    hold = hold_ms;
    REQUIRE(ej_registry_post(reg, hold_dispatch, &hold) == 0, "post");
    ej__sleep_ms(50); /* the dispatch thread is in the hold */
    int64_t t0 = ej__mono_ms();
    int rc = ej_job_start(job);
    *took = ej__mono_ms() - t0;
    err[0] = '\0';
    if (rc != 0)
        ej_job_last_error(job, err, len);
    fprintf(stderr, "%s: start after %" PRId64 " ms with the dispatch thread held %d ms: %s%s\n",
            name, *took, hold_ms, rc == 0 ? "started" : "failed: ", err);
    ej_job_shutdown(job);
    ej_job_destroy(job);
    return rc;
}

int main(void)
{
    setvbuf(stderr, NULL, _IOLBF, 0);
    ej_log_set_sink(log_sink, NULL);
    zkf_server *zk = zkf_shared();
    REQUIRE(zk != NULL, "zookeeper");
    char *ns = zkf_unique_namespace("slowload");
    struct ej_registry_opts ro = itest_registry_opts(zk, ns, SESSION_MS);
    ej_registry *reg = NULL;
    REQUIRE(ej_registry_create(&reg, &ro) == 0, "registry: %s", ej_registry_errmsg(NULL));
    REQUIRE(ej_registry_wait_connected(reg, 20000) == 0, "connected");
    char err[512];
    int64_t took = 0;

    /* 1. Three bounds of hold: the load is slow but the connection lives. */
    int rc = start_held(reg, "slowLoad", 3 * BOUND_MS, err, sizeof err, &took);
    CHECK(rc == 0, "a load slower than the bound on a live connection failed the start: %s",
          err);
    CHECK(took >= 3 * BOUND_MS - 100, "the start took %" PRId64 " ms: the hold did not slow it",
          took);
    CHECK(atomic_load(&still_loading_lines) >= 1, "no 'is still loading' line");
    CHECK(ej_registry_is_connected(reg), "the registry lost its connection");

    /* 2. Past the patience (5 bounds): the start fails, naming the cache. */
    rc = start_held(reg, "stuckLoad", 5 * BOUND_MS + 1500, err, sizeof err, &took);
    CHECK(rc != 0, "a load held past 5 bounds did not fail the start");
    CHECK(strstr(err, "the cache of /stuckLoad/") != NULL && strstr(err, "did not load in") != NULL,
          "the error does not name the cache: %s", err);
    const char *in = strstr(err, "did not load in ");
    long waited = in ? strtol(in + strlen("did not load in "), NULL, 10) : -1;
    CHECK(waited >= 5 * BOUND_MS - 50 && waited < 5 * BOUND_MS + 600,
          "the cache was given %ld ms, not 5 bounds (%d ms)", waited, 5 * BOUND_MS);
    ej__sleep_ms(1500); /* the hold ends before the registry goes */

    ej_registry_destroy(reg);
    ej_log_set_sink(NULL, NULL);
    free(ns);
    if (failures) {
        fprintf(stderr, "%d check(s) failed\n", failures);
        return 1;
    }
    fprintf(stderr, "coord_slowload: all checks passed\n");
    return 0;
}
