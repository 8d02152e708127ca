/*
 * Latency of the console's job list for many jobs. Creates N job configs
 * (default 1,000) in a private ZooKeeper, each laid out as a running job is
 * (config, a server, an instance, a leader, 2 owned items), then times:
 *   - the job list read straight from ZooKeeper (what `ejob jobs` does);
 *   - GET /api/registries/bench/jobs of `ejob console` (reads from its
 *     watched copy of the namespace), over HTTP with libcurl, p50 / p99;
 *   - GET of one job's detail.
 *
 * Usage: console_bench [jobs] [requests]   (default 1000 200)
 */
#include <curl/curl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "ejob/console.h"
#include "ejob/error.h"
#include "ejob/log.h"
#include "ejob/registry.h"
#include "zk_fixture.h"

static double now_ms(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec * 1000.0 + (double)ts.tv_nsec / 1e6;
}

static int cmp_double(const void *a, const void *b)
{
    double x = *(const double *)a, y = *(const double *)b;
    return (x > y) - (x < y);
}

static double pct(double *v, int n, double p)
{
    qsort(v, (size_t)n, sizeof(double), cmp_double);
    int i = (int)(p * (n - 1) + 0.5);
    return v[i];
}

static int put(ej_registry *reg, const char *job, ej_layout_node node, int item, const char *name,
               const char *data)
{
    char path[512];
    ej_layout_path(path, sizeof path, job, node, item, name);
    return ej_registry_create_node(reg, path, data, strlen(data), EJ_REG_PERSISTENT,
                                   EJ_REG_CREATE_PARENTS, NULL);
}

static int create_jobs(ej_registry *reg, int n)
{
    for (int i = 0; i < n; i++) {
        char job[64], cfg[512];
        snprintf(job, sizeof job, "benchJob%04d", i);
        snprintf(cfg, sizeof cfg,
                 "{\"jobName\":\"%s\",\"jobClass\":\"com.dangdang.ddframe.job.api.script."
                 "ScriptJob\",\"jobType\":\"SCRIPT\",\"cron\":\"0/5 * * * * ?\","
                 "\"shardingTotalCount\":2,\"scriptCommandLine\":\"/bin/true\"}",
                 job);
        const char *id = "10.0.0.1@-@100";
        if (put(reg, job, EJ_LAYOUT_NODE_CONFIG, 0, NULL, cfg) != 0 ||
            put(reg, job, EJ_LAYOUT_NODE_SERVER, 0, "10.0.0.1", "") != 0 ||
            put(reg, job, EJ_LAYOUT_NODE_INSTANCE, 0, id, "") != 0 ||
            put(reg, job, EJ_LAYOUT_NODE_ELECTION_INSTANCE, 0, NULL, id) != 0 ||
            put(reg, job, EJ_LAYOUT_NODE_ITEM_INSTANCE, 0, NULL, id) != 0 ||
            put(reg, job, EJ_LAYOUT_NODE_ITEM_INSTANCE, 1, NULL, id) != 0)
            return -1;
    }
    return 0;
}

static size_t sink(char *p, size_t size, size_t n, void *user)
{
    (void)p;
    *(size_t *)user += size * n;
    return size * n;
}

static int time_get(const char *url, int requests, const char *what)
{
    CURL *c = curl_easy_init();
    double *t = calloc((size_t)requests, sizeof(double));
    size_t bytes = 0;
    curl_easy_setopt(c, CURLOPT_URL, url);
    curl_easy_setopt(c, CURLOPT_WRITEFUNCTION, sink);
    curl_easy_setopt(c, CURLOPT_WRITEDATA, &bytes);
    for (int i = 0; i < requests; i++) {
        double t0 = now_ms();
        long code = 0;
        if (curl_easy_perform(c) != CURLE_OK ||
            curl_easy_getinfo(c, CURLINFO_RESPONSE_CODE, &code) != CURLE_OK || code != 200) {
            fprintf(stderr, "GET %s failed (HTTP %ld)\n", url, code);
            free(t);
            curl_easy_cleanup(c);
            return -1;
        }
        t[i] = now_ms() - t0;
    }
    printf("%-34s p50 %7.2f ms  p99 %7.2f ms  (%d requests, %zu bytes each)\n", what,
           pct(t, requests, 0.5), pct(t, requests, 0.99), requests, bytes / (size_t)requests);
    free(t);
    curl_easy_cleanup(c);
    return 0;
}

int main(int argc, char **argv)
{
    int njobs = argc > 1 ? atoi(argv[1]) : 1000;
    int requests = argc > 2 ? atoi(argv[2]) : 200;
    ej_log_set_level(EJ_LOG_WARN);
    zkf_server *zk;
    if (zkf_start(&zk, NULL) != 0)
        return 1;
    struct ej_registry_opts o = {.servers = zkf_connect_string(zk),
                                 .namespace_ = "bench",
                                 .session_timeout_ms = 4000,
                                 .connection_timeout_ms = 10000,
                                 .base_sleep_ms = 100,
                                 .max_sleep_ms = 1000,
                                 .max_retries = 3};
    ej_registry *reg;
    if (ej_registry_create(&reg, &o) != 0)
        return 1;
    double t0 = now_ms();
    if (create_jobs(reg, njobs) != 0)
        return 1;
    printf("created %d jobs (6 nodes each) in %.0f ms\n", njobs, now_ms() - t0);

    ej_console *direct;
    ej_console_create(reg, NULL, &direct);
    double d[5];
    for (int i = 0; i < 5; i++) {
        struct ej_console_job *jobs;
        size_t n;
        double s = now_ms();
        if (ej_console_jobs(direct, &jobs, &n) != 0 || n != (size_t)njobs)
            return 1;
        d[i] = now_ms() - s;
        ej_console_jobs_free(jobs, n);
    }
    printf("%-34s p50 %7.2f ms  (5 runs, straight from ZooKeeper)\n", "job list, direct reads",
           pct(d, 5, 0.5));
    ej_console_destroy(direct);

    ej_console *cached;
    struct ej_console_opts co = {.cached = true, .cache_wait_ms = 60000};
    if (ej_console_create(reg, &co, &cached) != 0)
        return 1;
    double c[20];
    for (int i = 0; i < 20; i++) {
        struct ej_console_job *jobs;
        size_t n;
        double st = now_ms();
        if (ej_console_jobs(cached, &jobs, &n) != 0 || n != (size_t)njobs)
            return 1;
        c[i] = now_ms() - st;
        ej_console_jobs_free(jobs, n);
    }
    printf("%-34s p50 %7.2f ms  (20 runs, library call on the watched copy)\n",
           "job list, cached reads", pct(c, 20, 0.5));
    ej_console_destroy(cached);

    struct ej_console_settings s;
    ej_console_settings_init(&s);
    s.no_auth = true;
    s.listen = strdup("127.0.0.1:0");
    ej_console_settings_add_registry(&s, "bench", zkf_connect_string(zk), "bench", NULL);
    ej_console_web *web;
    char err[512];
    t0 = now_ms();
    if (ej_console_web_start(&s, &web, err, sizeof err) != 0) {
        fprintf(stderr, "console: %s\n", err);
        return 1;
    }
    printf("console started (tree of %d jobs loaded) in %.0f ms\n", njobs, now_ms() - t0);
    char url[256];
    snprintf(url, sizeof url, "http://127.0.0.1:%d/api/registries/bench/jobs",
             ej_console_web_port(web));
    curl_global_init(CURL_GLOBAL_DEFAULT);
    int rc = time_get(url, requests, "GET /api/.../jobs");
    snprintf(url, sizeof url, "http://127.0.0.1:%d/api/registries/bench/jobs/benchJob%04d",
             ej_console_web_port(web), njobs / 2);
    if (rc == 0)
        rc = time_get(url, requests, "GET /api/.../jobs/ONE_JOB");
    ej_console_web_stop(web);
    ej_console_settings_fini(&s);
    ej_registry_destroy(reg);
    zkf_destroy(zk);
    return rc == 0 ? 0 : 1;
}
