/*
 * The daemon's /metrics (src/cli/daemon_metrics.c) for a job that has just
 * started, against a real ZooKeeper: before anything happened, every series
 * of its event-fed families is there at 0 (each result of
 * ejob_item_runs_total, each reason of ejob_fires_not_run_total, the
 * runtime's list ej_fire_not_run_reason() and "busy", failovers, misfire
 * runs, the duration histogram), so Prometheus's rate() and increase() see
 * the first event; the job's label is ejob_job, never job (Prometheus's
 * own); ejob_ready is 1. Then the job's first item run fails: failed goes
 * from 0 to 1, success stays at 0.
 */
#include <stdatomic.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "cli/daemon_metrics.h"
#include "ejob/ejob.h"
#include "ejob/error.h"
#include "ejob/event.h"
#include "ejob/log.h"
#include "zk_fixture.h"
#include "itest_check.h"

#define JOB_NAME "zeroJob"

static atomic_int item_runs;

static int failing_item(const ej_shard_context *ctx, void *user)
{
    (void)ctx;
    (void)user;
    atomic_fetch_add(&item_runs, 1);
    return -1;
}

/* The value of the series (its whole text up to the value) in the
 * rendering; -1 when absent. */
static double value_of(const char *text, const char *series)
{
    size_t n = strlen(series);
    for (const char *p = text; p != NULL && *p != '\0'; p = strchr(p, '\n'), p = p ? p + 1 : p)
        if (strncmp(p, series, n) == 0 && p[n] == ' ')
            return strtod(p + n + 1, NULL);
    return -1;
}

static char *render(void)
{
    char *text = NULL;
    int rc = ejd_metrics_render(&text, NULL);
    REQUIRE(rc == 0, "render: %s", ej_strerror(rc));
    return text;
}

static void expect(const char *text, const char *series, double want)
{
    double v = value_of(text, series);
    CHECK(v == want, "%s is %g (-1: absent), want %g", series, v, want);
}

static void expect_reason(const char *text, const char *reason, double want)
{
    char series[160];
    snprintf(series, sizeof series,
             "ejob_fires_not_run_total{ejob_job=\"" JOB_NAME "\",reason=\"%s\"}", reason);
    expect(text, series, want);
}

/* The runtime's reasons: each once, the documented ones among them. */
static size_t check_reason_list(void)
{
    static const char *const documented[] = {
        "running",     "queued",          "paused",    "timer-late",
        "clock-step",  "late-start",      "fenced",    "before-registration",
        "leader-wait", "sharding-failed", "time-diff", "disabled",
        "stopped",     "start-failed"};
    size_t n = 0;
    for (; ej_fire_not_run_reason(n) != NULL; n++)
        for (size_t j = 0; j < n; j++)
            CHECK(strcmp(ej_fire_not_run_reason(n), ej_fire_not_run_reason(j)) != 0,
                  "reason %s listed twice", ej_fire_not_run_reason(n));
    for (size_t d = 0; d < sizeof documented / sizeof documented[0]; d++) {
        bool found = false;
        for (size_t i = 0; i < n && !found; i++)
            found = strcmp(documented[d], ej_fire_not_run_reason(i)) == 0;
        CHECK(found, "documented reason %s not in ej_fire_not_run_reason()", documented[d]);
    }
    return n;
}

static void check_all_zero(const char *text, size_t reasons)
{
    expect(text, "ejob_item_runs_total{ejob_job=\"" JOB_NAME "\",result=\"success\"}", 0);
    expect(text, "ejob_item_runs_total{ejob_job=\"" JOB_NAME "\",result=\"failed\"}", 0);
    expect(text, "ejob_item_runs_total{ejob_job=\"" JOB_NAME "\",result=\"timeout\"}", 0);
    expect(text, "ejob_item_runs_total{ejob_job=\"" JOB_NAME "\",result=\"killed\"}", 0);
    expect_reason(text, "busy", 0);
    for (size_t i = 0; i < reasons; i++)
        expect_reason(text, ej_fire_not_run_reason(i), 0);
    expect(text, "ejob_failovers_total{ejob_job=\"" JOB_NAME "\"}", 0);
    expect(text, "ejob_misfire_runs_total{ejob_job=\"" JOB_NAME "\"}", 0);
    expect(text, "ejob_item_run_duration_seconds_count{ejob_job=\"" JOB_NAME "\"}", 0);
    expect(text, "ejob_item_run_duration_seconds_bucket{ejob_job=\"" JOB_NAME "\",le=\"+Inf\"}", 0);
    expect(text, "ejob_job_fires_total{ejob_job=\"" JOB_NAME "\"}", 0);
    expect(text, "ejob_reshards_total{ejob_job=\"" JOB_NAME "\"}", 0);
    expect(text, "ejob_fire_lateness_seconds_count{ejob_job=\"" JOB_NAME "\"}", 0);
    expect(text, "ejob_ready", 1);
    CHECK(strstr(text, "{job=") == NULL && strstr(text, ",job=") == NULL,
          "a series labelled job: %s", strstr(text, "job=\""));
}

static ej_job *start_job(ej_registry *reg, ej_event_bus *bus)
{
    struct ej_job_config cfg;
    ej_job_config_init(&cfg);
    ej_job_config_set_str(&cfg.job_name, JOB_NAME);
    /* Manual: no cron fire during the test, only the trigger below. */
    ej_job_config_set_str(&cfg.cron, "* * * * * ?");
    cfg.sharding_total_count = 1;
    cfg.job_type = EJ_JOB_TYPE_SIMPLE;
    static const struct ej_job_def def = {.type = EJ_JOB_TYPE_SIMPLE, .simple = failing_item};
    struct ej_job_opts jo = {
        .def = &def, .events = bus, .drain_timeout_ms = 5000, .manual = true, .ip = "127.0.0.1"};
    ej_job *job = NULL;
    int rc = ej_job_create(reg, &cfg, &jo, &job);
    ej_job_config_fini(&cfg);
    REQUIRE(rc == 0, "create: %s", ej_strerror(rc));
    rc = ej_job_start(job);
    REQUIRE(rc == 0, "start: %s", ej_job_last_error(job, (char[512]){0}, 512));
    return job;
}

static bool failed_counted(void)
{
    char *text = render();
    bool yes =
        value_of(text, "ejob_item_runs_total{ejob_job=\"" JOB_NAME "\",result=\"failed\"}") == 1;
    free(text);
    return yes;
}

int main(void)
{
    setvbuf(stderr, NULL, _IOLBF, 0);
    if (getenv("EJ_TEST_DEBUG"))
        ej_log_set_level(EJ_LOG_DEBUG);
    size_t reasons = check_reason_list();
    CHECK(reasons >= 14, "%zu reasons", reasons);

    zkf_server *zk = NULL;
    zkf_opts zo = {.tick_ms = 200};
    REQUIRE(zkf_start(&zk, &zo) == 0, "zookeeper");
    char err[256] = "";
    REQUIRE(ejd_metrics_start("127.0.0.1:0", 1, err, sizeof err) == 0, "metrics: %s", err);
    char *ns = zkf_unique_namespace("dmetrics");
    struct ej_registry_opts ro = itest_registry_opts(zk, ns, 4000);
    ro.on_state = ejd_metrics_registry_state;
    ej_registry *reg = NULL;
    REQUIRE(ej_registry_create(&reg, &ro) == 0, "registry: %s", ej_registry_errmsg(NULL));
    ej_event_bus *bus = NULL;
    REQUIRE(ej_event_bus_create(NULL, &bus) == 0, "event bus");
    ejd_metrics_watch_bus(bus);

    ej_job *job = start_job(reg, bus);
    ejd_metrics_job_started(job);
    char *text = render();
    check_all_zero(text, reasons);
    size_t series = 0, bytes = 0;
    for (const char *p = strstr(text, "ejob_job=\"" JOB_NAME "\""); p != NULL;
         p = strstr(p + 1, "ejob_job=\"" JOB_NAME "\"")) {
        const char *bol = p, *eol = strchr(p, '\n');
        while (bol > text && bol[-1] != '\n')
            bol--;
        series++;
        bytes += (size_t)(eol != NULL ? eol + 1 - bol : (ptrdiff_t)strlen(bol));
    }
    printf("a just-started job: %zu series, %zu bytes of /metrics\n", series, bytes);
    free(text);

    /* The first event: a rise from the 0 already exposed. */
    /* A trigger within a millisecond of the start ran no item here (and
     * reported nothing) for 10 s: give the new job a second first. */
    sleep(1);
    REQUIRE(ej_job_trigger(job) == 0, "trigger");
    bool counted = false;
    for (int i = 0; i < 200 && !counted; i++) {
        counted = failed_counted();
        if (!counted)
            usleep(50 * 1000);
    }
    CHECK(counted, "the failed run was not counted within 10 s (%d item run(s))",
          atomic_load(&item_runs));
    text = render();
    expect(text, "ejob_item_runs_total{ejob_job=\"" JOB_NAME "\",result=\"success\"}", 0);
    expect(text, "ejob_item_run_duration_seconds_count{ejob_job=\"" JOB_NAME "\"}", 1);
    free(text);

    ejd_metrics_job_stopped(job);
    ej_job_destroy(job);
    ejd_metrics_watch_bus(NULL);
    ej_event_bus_destroy(bus);
    ej_registry_destroy(reg);
    ejd_metrics_stop();
    zkf_destroy(zk);
    free(ns);
    if (failures) {
        fprintf(stderr, "%d check(s) failed\n", failures);
        return 1;
    }
    printf("daemon_metrics: every series of a just-started job at 0 (%zu reasons); "
           "the first failure counted from it\n",
           reasons);
    return 0;
}
