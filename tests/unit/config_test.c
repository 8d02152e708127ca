/* Unit tests of the config module: the job model, validation, the JSON of
 * the `config` node, sharding item parameters and the daemon YAML file. */
#include <errno.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>
#include <cmocka.h>
#include <jansson.h>

#include "config/internal.h" /* the field table */
#include "config/daemon_file.h"
#include "ejob/config.h"
#include "ejob/error.h"
#include "ejob/log.h"

#ifndef EJ_CONFIG_TEST_DATA
#define EJ_CONFIG_TEST_DATA "tests/data/config"
#endif

#define JOB_PROPS_JSON                                                                             \
    "\"jobProperties\":{\"job_exception_handler\":\"com.dangdang.ddframe.job.executor.handler."    \
    "impl.DefaultJobExceptionHandler\",\"executor_service_handler\":\"com.dangdang.ddframe.job."   \
    "executor.handler.impl.DefaultExecutorServiceHandler\"}"

/* Expected strings of LiteJobConfigurationGsonFactoryTest (reference 2.2). */
static const char dataflow_json[] =
    "{\"jobName\":\"test_job\",\"jobClass\":\"com.dangdang.ddframe.job.lite.fixture."
    "TestDataflowJob\",\"jobType\":\"DATAFLOW\",\"cron\":\"0/1 * * * * "
    "?\",\"shardingTotalCount\":3,\"shardingItemParameters\":\"\",\"jobParameter\":\"\","
    "\"failover\":false,\"misfire\":true,\"description\":\"\"," JOB_PROPS_JSON
    ",\"streamingProcess\":true,\"monitorExecution\":true,\"maxTimeDiffSeconds\":-1,"
    "\"monitorPort\":-1,\"jobShardingStrategyClass\":\"\",\"reconcileIntervalMinutes\":10,"
    "\"disabled\":false,\"overwrite\":false}";

static const char script_json[] =
    "{\"jobName\":\"test_job\",\"jobClass\":\"com.dangdang.ddframe.job.api.script.ScriptJob\","
    "\"jobType\":\"SCRIPT\",\"cron\":\"0/1 * * * * "
    "?\",\"shardingTotalCount\":3,\"shardingItemParameters\":\"\",\"jobParameter\":\"\","
    "\"failover\":false,\"misfire\":true,\"description\":\"\"," JOB_PROPS_JSON
    ",\"scriptCommandLine\":\"test.sh\",\"monitorExecution\":true,\"maxTimeDiffSeconds\":-1,"
    "\"monitorPort\":-1,\"jobShardingStrategyClass\":\"\",\"reconcileIntervalMinutes\":10,"
    "\"disabled\":false,\"overwrite\":false}";

/* Reference section 9, the node a running Java 2.1.5 wrote; its 674 bytes
 * are with a 29-character command path. */
#define PEER_JSON_WITH(cmd)                                                                        \
    "{\"jobName\":\"peerJob\",\"jobClass\":\"com.dangdang.ddframe.job.api.script.ScriptJob\","     \
    "\"jobType\":\"SCRIPT\",\"cron\":\"0/2 * * * * "                                               \
    "?\",\"shardingTotalCount\":4,\"shardingItemParameters\":\"\",\"jobParameter\":\"\","          \
    "\"failover\":true,\"misfire\":true,\"description\":\"\"," JOB_PROPS_JSON                      \
    ",\"scriptCommandLine\":\"" cmd "\",\"monitorExecution\":true,\"maxTimeDiffSeconds\":-1,"      \
    "\"monitorPort\":-1,\"jobShardingStrategyClass\":\"\",\"reconcileIntervalMinutes\":10,"        \
    "\"disabled\":false,\"overwrite\":true}"

/* ------------------------------------------------------------------------ */
/* helpers                                                                   */
/* ------------------------------------------------------------------------ */

static char *read_data_file(const char *name, size_t *len)
{
    char path[512];
    snprintf(path, sizeof(path), "%s/%s", EJ_CONFIG_TEST_DATA, name);
    FILE *f = fopen(path, "rb");
    assert_non_null(f);
    char *buf = malloc(1 << 20);
    assert_non_null(buf);
    size_t n = fread(buf, 1, (1 << 20) - 1, f);
    fclose(f);
    buf[n] = '\0';
    if (len)
        *len = n;
    return buf;
}

static int64_t mono_ms(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (int64_t)ts.tv_sec * 1000 + ts.tv_nsec / 1000000;
}

static void make_script_job(struct ej_job_config *c, const char *name, const char *cron, int count,
                            const char *cmd)
{
    assert_int_equal(ej_job_config_init(c), 0);
    assert_int_equal(ej_job_config_set_str(&c->job_name, name), 0);
    assert_int_equal(ej_job_config_set_str(&c->cron, cron), 0);
    c->sharding_total_count = count;
    c->job_type = EJ_JOB_TYPE_SCRIPT;
    assert_int_equal(ej_job_config_set_str(&c->script_command_line, cmd), 0);
}

static void assert_json(const struct ej_job_config *c, const char *expected)
{
    char *json = ej_job_config_to_json(c);
    assert_non_null(json);
    assert_string_equal(json, expected);
    free(json);
}

/* Parse, re-serialise, compare bytes. */
static void assert_round_trip(const char *json)
{
    struct ej_job_config c;
    char err[256];
    assert_int_equal(ej_job_config_init(&c), 0);
    int rc = ej_job_config_from_json(json, strlen(json), &c, err, sizeof(err));
    if (rc != 0)
        fail_msg("from_json: %s", err);
    assert_json(&c, json);
    ej_job_config_fini(&c);
}

static int from_json_err(const char *json, char *err, size_t errlen)
{
    struct ej_job_config c;
    assert_int_equal(ej_job_config_init(&c), 0);
    int rc = ej_job_config_from_json(json, strlen(json), &c, err, errlen);
    ej_job_config_fini(&c);
    return rc;
}

static void assert_json_error(const char *json, const char *expected)
{
    char err[512];
    assert_int_equal(from_json_err(json, err, sizeof(err)), EJ_EPARSE);
    assert_string_equal(err, expected);
}

/* Validation of a valid SCRIPT job with one change applied by fn. */
static void assert_invalid(void (*mutate)(struct ej_job_config *), const char *expected)
{
    struct ej_job_config c;
    char err[512];
    make_script_job(&c, "job", "0/5 * * * * ?", 3, "/bin/true");
    assert_int_equal(ej_job_config_validate(&c, err, sizeof(err)), 0);
    mutate(&c);
    assert_int_equal(ej_job_config_validate(&c, err, sizeof(err)), EJ_ECONFIG);
    assert_string_equal(err, expected);
    ej_job_config_fini(&c);
}

static bool has_message(const struct ej_config_errors *e, const char *msg)
{
    for (size_t i = 0; i < e->count; i++) {
        if (strcmp(e->messages[i], msg) == 0)
            return true;
    }
    return false;
}

static void dump_errors(const struct ej_config_errors *e)
{
    for (size_t i = 0; i < e->count; i++)
        print_message("  [%zu] %s\n", i, e->messages[i]);
}

#define assert_has_message(e, msg)                                                                 \
    do {                                                                                           \
        if (!has_message((e), (msg))) {                                                            \
            dump_errors(e);                                                                        \
            fail_msg("missing message: %s", (msg));                                                \
        }                                                                                          \
    } while (0)

static int load_yaml(const char *text, struct ej_daemon_config *d, struct ej_config_errors *e)
{
    ej_config_errors_init(e);
    return ej_daemon_config_load_string(text, "jobs.yaml", d, e);
}

/* Loading must fail with exactly one message, msg. */
static void assert_yaml_error(const char *text, const char *msg)
{
    struct ej_daemon_config d;
    struct ej_config_errors e;
    int rc = load_yaml(text, &d, &e);
    if (rc != EJ_ECONFIG || e.count != 1 || strcmp(e.messages[0], msg) != 0) {
        dump_errors(&e);
        fail_msg("rc %d, expected only: %s", rc, msg);
    }
    ej_daemon_config_fini(&d);
    ej_config_errors_fini(&e);
}

#define YAML_HEAD "regCenter:\n  namespace: ns\njobs:\n  j:\n"

/* ------------------------------------------------------------------------ */
/* model                                                                     */
/* ------------------------------------------------------------------------ */

static void test_init_defaults(void **state)
{
    (void)state;
    struct ej_job_config c;
    assert_int_equal(ej_job_config_init(&c), 0);
    assert_string_equal(c.job_name, "");
    assert_string_equal(c.cron, "");
    assert_int_equal(c.sharding_total_count, 1);
    assert_string_equal(c.sharding_item_parameters, "");
    assert_string_equal(c.job_parameter, "");
    assert_false(c.failover);
    assert_true(c.misfire);
    assert_string_equal(c.description, "");
    assert_string_equal(c.job_exception_handler, EJ_CONFIG_DEFAULT_JOB_EXCEPTION_HANDLER);
    assert_string_equal(c.executor_service_handler, EJ_CONFIG_DEFAULT_EXECUTOR_SERVICE_HANDLER);
    assert_null(c.job_properties_extra);
    assert_int_equal(c.job_type, EJ_JOB_TYPE_SIMPLE);
    assert_string_equal(c.job_class, "");
    assert_false(c.streaming_process);
    assert_string_equal(c.script_command_line, "");
    assert_true(c.monitor_execution);
    assert_int_equal(c.max_time_diff_seconds, -1);
    assert_int_equal(c.monitor_port, -1);
    assert_string_equal(c.job_sharding_strategy_class, "");
    assert_int_equal(c.reconcile_interval_minutes, 10);
    assert_false(c.disabled);
    assert_false(c.overwrite);
    assert_string_equal(c.time_zone, "");
    assert_int_equal(c.script_timeout_ms, 0);
    assert_string_equal(c.http.uri, "");
    assert_string_equal(c.http.method, "GET");
    assert_string_equal(c.http.data, "");
    assert_int_equal(c.http.connect_timeout_ms, 3000);
    assert_int_equal(c.http.read_timeout_ms, 5000);
    assert_string_equal(c.http.content_type, "");
    assert_null(c.extra_json);
    ej_job_config_fini(&c);
    ej_job_config_fini(&c); /* twice is safe */
    ej_job_config_fini(NULL);
    assert_int_equal(ej_job_config_init(NULL), EJ_EINVAL);
}

static void test_copy_equal(void **state)
{
    (void)state;
    struct ej_job_config a, b;
    make_script_job(&a, "job", "0 * * * * ?", 2, "x.sh");
    a.extra_json = strdup("{\"k\":1}");
    a.job_properties_extra = strdup("{\"p\":\"v\"}");
    assert_int_equal(ej_job_config_copy(&b, &a), 0);
    assert_true(ej_job_config_equal(&a, &b));
    assert_ptr_not_equal(a.cron, b.cron);
    assert_string_equal(b.extra_json, "{\"k\":1}");

    b.failover = true;
    assert_false(ej_job_config_equal(&a, &b));
    b.failover = false;
    assert_int_equal(ej_job_config_set_str(&b.script_command_line, "y.sh"), 0);
    assert_false(ej_job_config_equal(&a, &b));
    assert_int_equal(ej_job_config_set_str(&b.script_command_line, "x.sh"), 0);
    assert_true(ej_job_config_equal(&a, &b));
    /* Fields of other types and a SCRIPT job's class do not count. */
    assert_int_equal(ej_job_config_set_str(&b.http.uri, "http://x"), 0);
    b.streaming_process = true;
    assert_int_equal(ej_job_config_set_str(&b.job_class, "Other"), 0);
    assert_true(ej_job_config_equal(&a, &b));
    a.job_type = b.job_type = EJ_JOB_TYPE_HTTP;
    assert_false(ej_job_config_equal(&a, &b));
    assert_int_equal(ej_job_config_set_str(&a.http.uri, "http://x"), 0);
    assert_false(ej_job_config_equal(&a, &b)); /* job_class now counts */
    assert_int_equal(ej_job_config_set_str(&a.job_class, "Other"), 0);
    assert_true(ej_job_config_equal(&a, &b));
    a.job_type = b.job_type = EJ_JOB_TYPE_DATAFLOW;
    assert_false(ej_job_config_equal(&a, &b));
    b.streaming_process = false;
    assert_true(ej_job_config_equal(&a, &b));
    b.job_type = EJ_JOB_TYPE_SIMPLE;
    assert_false(ej_job_config_equal(&a, &b));
    a.job_type = b.job_type = EJ_JOB_TYPE_HTTP;
    /* A NULL string equals "", a NULL extra equals "{}". */
    free(b.description);
    b.description = NULL;
    free(b.extra_json);
    b.extra_json = NULL;
    free(a.extra_json);
    a.extra_json = strdup("{}");
    assert_true(ej_job_config_equal(&a, &b));
    b.http.read_timeout_ms = 1;
    assert_false(ej_job_config_equal(&a, &b));
    b.http.read_timeout_ms = a.http.read_timeout_ms;
    b.sharding_total_count = 9;
    assert_false(ej_job_config_equal(&a, &b));
    assert_true(ej_job_config_equal(&a, &a));
    assert_false(ej_job_config_equal(&a, NULL));
    assert_int_equal(ej_job_config_copy(NULL, &a), EJ_EINVAL);
    assert_int_equal(ej_job_config_set_str(NULL, "x"), EJ_EINVAL);
    ej_job_config_fini(&a);
    ej_job_config_fini(&b);
}

static void test_job_type_names(void **state)
{
    (void)state;
    ej_job_type t;
    assert_string_equal(ej_job_type_name(EJ_JOB_TYPE_SIMPLE), "SIMPLE");
    assert_string_equal(ej_job_type_name(EJ_JOB_TYPE_DATAFLOW), "DATAFLOW");
    assert_string_equal(ej_job_type_name(EJ_JOB_TYPE_SCRIPT), "SCRIPT");
    assert_string_equal(ej_job_type_name(EJ_JOB_TYPE_HTTP), "HTTP");
    assert_string_equal(ej_job_type_name((ej_job_type)9), "UNKNOWN");
    assert_int_equal(ej_job_type_parse("HTTP", &t), 0);
    assert_int_equal(t, EJ_JOB_TYPE_HTTP);
    assert_int_equal(ej_job_type_parse("script", &t), EJ_EINVAL);
    assert_int_equal(ej_job_type_parse(NULL, &t), EJ_EINVAL);
}

/* ------------------------------------------------------------------------ */
/* JSON writing                                                              */
/* ------------------------------------------------------------------------ */

static void test_json_dataflow_vector(void **state)
{
    (void)state;
    struct ej_job_config c;
    assert_int_equal(ej_job_config_init(&c), 0);
    ej_job_config_set_str(&c.job_name, "test_job");
    ej_job_config_set_str(&c.cron, "0/1 * * * * ?");
    ej_job_config_set_str(&c.job_class, "com.dangdang.ddframe.job.lite.fixture.TestDataflowJob");
    c.sharding_total_count = 3;
    c.job_type = EJ_JOB_TYPE_DATAFLOW;
    c.streaming_process = true;
    assert_json(&c, dataflow_json);
    ej_job_config_fini(&c);
}

static void test_json_script_vector(void **state)
{
    (void)state;
    struct ej_job_config c;
    make_script_job(&c, "test_job", "0/1 * * * * ?", 3, "test.sh");
    /* A SCRIPT job's class is always ScriptJob, whatever was set. */
    ej_job_config_set_str(&c.job_class, "ignored");
    assert_json(&c, script_json);
    ej_job_config_fini(&c);
}

static void test_json_peer_job_674_bytes(void **state)
{
    (void)state;
    static const char expected[] = PEER_JSON_WITH("/opt/ejob/jobs/log-item-01.sh");
    assert_int_equal(strlen("/opt/ejob/jobs/log-item-01.sh"), 29);
    assert_int_equal(strlen(expected), 674);
    struct ej_job_config c;
    make_script_job(&c, "peerJob", "0/2 * * * * ?", 4, "/opt/ejob/jobs/log-item-01.sh");
    c.failover = true;
    c.overwrite = true;
    char *json = ej_job_config_to_json(&c);
    assert_non_null(json);
    assert_int_equal(strlen(json), 674);
    assert_string_equal(json, expected);
    free(json);

    /* With a strategy. */
    ej_job_config_set_str(
        &c.job_sharding_strategy_class,
        "com.dangdang.ddframe.job.lite.api.strategy.impl.RotateServerByNameJobShardingStrategy");
    json = ej_job_config_to_json(&c);
    assert_non_null(strstr(json, ",\"jobShardingStrategyClass\":\"com.dangdang.ddframe.job.lite."
                                 "api.strategy.impl.RotateServerByNameJobShardingStrategy\","));
    free(json);
    ej_job_config_fini(&c);

    /* The node as observed, read from the fixture file. */
    size_t len;
    char *file = read_data_file("peer_job.json", &len);
    assert_string_equal(file, PEER_JSON_WITH("/opt/jobs/log-item.sh"));
    assert_int_equal(len, 666);
    assert_round_trip(file);
    free(file);
}

static void test_json_gson_escaping(void **state)
{
    (void)state;
    struct ej_job_config c;
    make_script_job(&c, "j", "0 * * * * ?", 3, "a.sh 'x' <y> & z");
    ej_job_config_set_str(&c.sharding_item_parameters, "0=A,1=B,2=C");
    ej_job_config_set_str(&c.description,
                          "line\nbreak \"q\" \\ tab\t\x01 \xe2\x80\xa8 \xe2\x80\xa9 "
                          "\xe4\xb8\xad");
    char *json = ej_job_config_to_json(&c);
    assert_non_null(strstr(json, "\"shardingItemParameters\":\"0\\u003dA,1\\u003dB,2\\u003dC\""));
    assert_non_null(strstr(json, "\"scriptCommandLine\":\"a.sh \\u0027x\\u0027 \\u003cy\\u003e "
                                 "\\u0026 z\""));
    assert_non_null(strstr(json, "\"description\":\"line\\nbreak \\\"q\\\" \\\\ tab\\t\\u0001 "
                                 "\\u2028 \\u2029 \xe4\xb8\xad\""));
    /* And it reads back to the same strings. */
    struct ej_job_config d;
    char err[256];
    assert_int_equal(ej_job_config_init(&d), 0);
    assert_int_equal(ej_job_config_from_json(json, strlen(json), &d, err, sizeof(err)), 0);
    assert_true(ej_job_config_equal(&c, &d));
    free(json);
    ej_job_config_fini(&c);
    ej_job_config_fini(&d);
}

/* A strategy Java 2.1.5 cannot load is stored so that Java reads one it
 * can ("", AverageAllocation), ejob's choice in jobShardingStrategyType;
 * nodes of earlier ejob versions (the name in jobShardingStrategyClass)
 * and values Java wrote later (a class in jobShardingStrategyClass) read
 * as before. */
static void test_json_strategy_java_cannot_load(void **state)
{
    (void)state;
    struct ej_job_config c, d;
    char err[256];
    make_script_job(&c, "j", "0 * * * * ?", 1, "a.sh");
    assert_int_equal(ej_job_config_java_ignored(&c, NULL, 0), 0);
    ej_job_config_set_str(&c.job_sharding_strategy_class, "BALANCED");
    ej_job_config_set_str(&c.time_zone, "Asia/Shanghai");
    const char *ignored[4];
    assert_int_equal(ej_job_config_java_ignored(&c, ignored, 1), 2);
    assert_int_equal(ej_job_config_java_ignored(&c, ignored, 4), 2);
    assert_string_equal(ignored[0], "jobShardingStrategyType");
    assert_string_equal(ignored[1], "timeZone");
    ej_job_config_set_str(&c.time_zone, "");
    char *json = ej_job_config_to_json(&c);
    assert_non_null(strstr(json, "\"jobShardingStrategyClass\":\"\","));
    const char *tail = "\"overwrite\":false,\"jobShardingStrategyType\":\"BALANCED\"}";
    assert_string_equal(json + strlen(json) - strlen(tail), tail);
    assert_int_equal(ej_job_config_init(&d), 0);
    assert_int_equal(ej_job_config_from_json(json, strlen(json), &d, err, sizeof(err)), 0);
    assert_string_equal(d.job_sharding_strategy_class, "BALANCED");
    assert_true(d.extra_json == NULL || strstr(d.extra_json, "jobShardingStrategyType") == NULL);
    assert_true(ej_job_config_equal(&c, &d));
    free(json);

    /* Java-loadable values are written where Java reads them. */
    static const char *const loadable[] = {
        "",
        "com.dangdang.ddframe.job.lite.api.strategy.impl.RotateServerByNameJobShardingStrategy"};
    for (size_t i = 0; i < 2; i++) {
        ej_job_config_set_str(&c.job_sharding_strategy_class, loadable[i]);
        json = ej_job_config_to_json(&c);
        assert_null(strstr(json, "jobShardingStrategyType"));
        free(json);
    }
    static const char *const ejob_only[] = {"STICKY", "AVERAGE",
                                            "io.ejob.sharding.BalancedShardingStrategy"};
    for (size_t i = 0; i < 3; i++) {
        ej_job_config_set_str(&c.job_sharding_strategy_class, ejob_only[i]);
        json = ej_job_config_to_json(&c);
        assert_non_null(strstr(json, "\"jobShardingStrategyClass\":\"\","));
        assert_non_null(strstr(json, "\"jobShardingStrategyType\":"));
        free(json);
    }

    /* An earlier ejob's node: the name in the Java key. */
    static const char old_node[] =
        "{\"jobName\":\"j\",\"jobType\":\"SIMPLE\",\"cron\":\"0 * * * * ?\","
        "\"shardingTotalCount\":1,\"jobShardingStrategyClass\":\"BALANCED\"}";
    assert_int_equal(ej_job_config_from_json(old_node, strlen(old_node), &d, err, sizeof(err)), 0);
    assert_string_equal(d.job_sharding_strategy_class, "BALANCED");
    /* Java's console set a class after: the Java key wins. */
    static const char java_later[] =
        "{\"jobName\":\"j\",\"jobType\":\"SIMPLE\",\"cron\":\"0 * * * * ?\","
        "\"shardingTotalCount\":1,\"jobShardingStrategyClass\":\"com.x.Mine\","
        "\"jobShardingStrategyType\":\"BALANCED\"}";
    assert_int_equal(ej_job_config_from_json(java_later, strlen(java_later), &d, err, sizeof(err)),
                     0);
    assert_string_equal(d.job_sharding_strategy_class, "com.x.Mine");
    static const char bad[] =
        "{\"jobName\":\"j\",\"jobType\":\"SIMPLE\",\"jobShardingStrategyType\":5}";
    assert_int_not_equal(ej_job_config_from_json(bad, strlen(bad), &d, err, sizeof(err)), 0);
    assert_string_equal(err, "jobShardingStrategyType: expected a string, got 5");
    ej_job_config_fini(&d);
    ej_job_config_fini(&c);
}

static void test_json_ejob_extensions(void **state)
{
    (void)state;
    struct ej_job_config c, d;
    char err[256];
    make_script_job(&c, "j", "0 * * * * ?", 1, "a.sh");
    ej_job_config_set_str(&c.time_zone, "Asia/Shanghai");
    c.script_timeout_ms = 60000;
    char *json = ej_job_config_to_json(&c);
    const char *tail = "\"overwrite\":false,\"timeZone\":\"Asia/Shanghai\","
                       "\"scriptTimeoutMilliseconds\":60000}";
    assert_string_equal(json + strlen(json) - strlen(tail), tail);
    assert_int_equal(ej_job_config_init(&d), 0);
    assert_int_equal(ej_job_config_from_json(json, strlen(json), &d, err, sizeof(err)), 0);
    assert_true(ej_job_config_equal(&c, &d));
    free(json);
    ej_job_config_fini(&d);

    /* HTTP: jobType "HTTP" and the http keys after the Java ones. */
    c.job_type = EJ_JOB_TYPE_HTTP;
    ej_job_config_set_str(&c.time_zone, "");
    ej_job_config_set_str(&c.job_class, "");
    ej_job_config_set_str(&c.script_command_line, "");
    c.script_timeout_ms = 0;
    ej_job_config_set_str(&c.http.uri, "http://127.0.0.1:8080/run?a=b");
    ej_job_config_set_str(&c.http.method, "POST");
    ej_job_config_set_str(&c.http.data, "{\"x\":1}");
    ej_job_config_set_str(&c.http.content_type, "application/json");
    json = ej_job_config_to_json(&c);
    static const char http_expected[] =
        "{\"jobName\":\"j\",\"jobClass\":\"\",\"jobType\":\"HTTP\",\"cron\":\"0 * * * * "
        "?\",\"shardingTotalCount\":1,\"shardingItemParameters\":\"\",\"jobParameter\":\"\","
        "\"failover\":false,\"misfire\":true,\"description\":\"\"," JOB_PROPS_JSON
        ",\"monitorExecution\":true,\"maxTimeDiffSeconds\":-1,\"monitorPort\":-1,"
        "\"jobShardingStrategyClass\":\"\",\"reconcileIntervalMinutes\":10,\"disabled\":false,"
        "\"overwrite\":false,\"httpUri\":\"http://127.0.0.1:8080/run?a\\u003db\","
        "\"httpMethod\":\"POST\",\"httpData\":\"{\\\"x\\\":1}\","
        "\"httpConnectTimeoutMilliseconds\":3000,\"httpReadTimeoutMilliseconds\":5000,"
        "\"httpContentType\":\"application/json\"}";
    assert_string_equal(json, http_expected);
    assert_int_equal(ej_job_config_init(&d), 0);
    assert_int_equal(ej_job_config_from_json(json, strlen(json), &d, err, sizeof(err)), 0);
    assert_true(ej_job_config_equal(&c, &d));
    free(json);
    ej_job_config_fini(&d);
    ej_job_config_fini(&c);
    assert_null(ej_job_config_to_json(NULL));
}

/* ------------------------------------------------------------------------ */
/* JSON reading                                                              */
/* ------------------------------------------------------------------------ */

static void test_json_round_trip_vectors(void **state)
{
    (void)state;
    assert_round_trip(dataflow_json);
    assert_round_trip(script_json);
    assert_round_trip(PEER_JSON_WITH("/opt/ejob/jobs/log-item-01.sh"));
    char *file = read_data_file("lite_dataflow.json", NULL);
    assert_string_equal(file, dataflow_json);
    free(file);
    file = read_data_file("lite_script.json", NULL);
    assert_string_equal(file, script_json);
    free(file);

    struct ej_job_config c;
    char err[256];
    assert_int_equal(ej_job_config_init(&c), 0);
    assert_int_equal(
        ej_job_config_from_json(dataflow_json, strlen(dataflow_json), &c, err, sizeof(err)), 0);
    assert_string_equal(c.job_name, "test_job");
    assert_string_equal(c.job_class, "com.dangdang.ddframe.job.lite.fixture.TestDataflowJob");
    assert_int_equal(c.job_type, EJ_JOB_TYPE_DATAFLOW);
    assert_string_equal(c.cron, "0/1 * * * * ?");
    assert_int_equal(c.sharding_total_count, 3);
    assert_true(c.streaming_process);
    assert_true(c.misfire);
    assert_true(c.monitor_execution);
    assert_null(c.extra_json);
    assert_null(c.job_properties_extra);
    assert_int_equal(ej_job_config_validate(&c, err, sizeof(err)), 0);
    ej_job_config_fini(&c);
}

static void test_json_console_shape(void **state)
{
    (void)state;
    struct ej_job_config c;
    char err[256];
    size_t len;
    char *json = read_data_file("console_settings.json", &len);
    assert_int_equal(ej_job_config_init(&c), 0);
    c.disabled = true; /* replaced wholesale: the console drops disabled */
    assert_int_equal(ej_job_config_from_json(json, len, &c, err, sizeof(err)), 0);
    assert_string_equal(c.job_name, "peerJob");
    assert_int_equal(c.job_type, EJ_JOB_TYPE_SCRIPT);
    assert_string_equal(c.cron, "0/10 * * * * ?");
    assert_int_equal(c.sharding_total_count, 2);
    assert_string_equal(c.sharding_item_parameters, "0=Beijing,1=Shanghai");
    assert_string_equal(c.job_parameter, "p&q");
    assert_false(c.monitor_execution);
    assert_int_equal(c.max_time_diff_seconds, 60);
    assert_int_equal(c.monitor_port, 9888);
    assert_true(c.failover);
    assert_true(c.misfire);
    assert_string_equal(
        c.job_sharding_strategy_class,
        "com.dangdang.ddframe.job.lite.api.strategy.impl.RotateServerByNameJobShardingStrategy");
    assert_string_equal(c.description, "edited in the console");
    assert_string_equal(c.job_exception_handler, "com.example.MyHandler");
    assert_string_equal(c.executor_service_handler, EJ_CONFIG_DEFAULT_EXECUTOR_SERVICE_HANDLER);
    assert_string_equal(c.script_command_line, "/opt/jobs/log-item.sh");
    assert_int_equal(c.reconcile_interval_minutes, 5);
    assert_false(c.disabled);
    assert_false(c.overwrite);
    assert_null(c.extra_json);
    assert_int_equal(ej_job_config_validate(&c, err, sizeof(err)), 0);
    /* Written back in the Lite adapter's shape and order. */
    char *out = ej_job_config_to_json(&c);
    assert_non_null(strstr(out, "{\"jobName\":\"peerJob\",\"jobClass\":\"com.dangdang.ddframe.job."
                                "api.script.ScriptJob\",\"jobType\":\"SCRIPT\","));
    assert_non_null(strstr(out, "\"jobProperties\":{\"job_exception_handler\":\"com.example."
                                "MyHandler\",\"executor_service_handler\""));
    assert_non_null(strstr(out, "\"disabled\":false,\"overwrite\":false}"));
    free(out);
    free(json);
    ej_job_config_fini(&c);
}

static void test_json_missing_keys_java_defaults(void **state)
{
    (void)state;
    struct ej_job_config c;
    char err[256];
    const char *json = "{\"jobType\":\"SIMPLE\"}";
    assert_int_equal(ej_job_config_init(&c), 0);
    assert_int_equal(ej_job_config_from_json(json, strlen(json), &c, err, sizeof(err)), 0);
    assert_string_equal(c.job_name, "");
    assert_string_equal(c.cron, "");
    assert_int_equal(c.sharding_total_count, 0);
    assert_false(c.misfire); /* Java's reader: missing misfire is false */
    assert_false(c.failover);
    assert_true(c.monitor_execution);
    assert_int_equal(c.max_time_diff_seconds, -1);
    assert_int_equal(c.monitor_port, -1);
    assert_int_equal(c.reconcile_interval_minutes, 10);
    assert_string_equal(c.job_exception_handler, EJ_CONFIG_DEFAULT_JOB_EXCEPTION_HANDLER);
    assert_string_equal(c.executor_service_handler, EJ_CONFIG_DEFAULT_EXECUTOR_SERVICE_HANDLER);
    /* Not valid as a job, which validation says. */
    assert_int_equal(ej_job_config_validate(&c, err, sizeof(err)), EJ_ECONFIG);
    assert_string_equal(err, "jobName: is required");

    /* Nulls read as missing; the handler keys too. */
    json = "{\"jobType\":\"SIMPLE\",\"misfire\":null,\"jobName\":null,"
           "\"jobProperties\":{\"job_exception_handler\":null}}";
    assert_int_equal(ej_job_config_from_json(json, strlen(json), &c, err, sizeof(err)), 0);
    assert_false(c.misfire);
    assert_string_equal(c.job_exception_handler, EJ_CONFIG_DEFAULT_JOB_EXCEPTION_HANDLER);

    /* Keys in any order, a space before the last one (LiteJsonConstants). */
    json = "{\"reconcileIntervalMinutes\":3,\"overwrite\":true,\"jobType\":\"SCRIPT\","
           "\"jobName\":\"a\", \"misfire\":true}";
    assert_int_equal(ej_job_config_from_json(json, strlen(json), &c, err, sizeof(err)), 0);
    assert_int_equal(c.reconcile_interval_minutes, 3);
    assert_true(c.overwrite);
    assert_true(c.misfire);
    assert_string_equal(c.job_name, "a");
    ej_job_config_fini(&c);
}

static void test_json_unknown_keys_preserved(void **state)
{
    (void)state;
    struct ej_job_config c;
    char err[256];
    const char *json =
        "{\"zeta\":{\"a\":[1,2.5,\"x=y\",true,null,-3e-7]},\"jobName\":\"j\",\"jobType\":"
        "\"SIMPLE\","
        "\"jobProperties\":{\"custom\":\"v<\",\"executor_service_handler\":\"E\",\"n\":7},"
        "\"cron\":\"0 * * * * ?\",\"shardingTotalCount\":1,\"label\":\"blue\"}";
    assert_int_equal(ej_job_config_init(&c), 0);
    assert_int_equal(ej_job_config_from_json(json, strlen(json), &c, err, sizeof(err)), 0);
    assert_string_equal(c.extra_json, "{\"zeta\":{\"a\":[1,2.5,\"x\\u003dy\",true,null,-3e-07]},"
                                      "\"label\":\"blue\"}");
    assert_string_equal(c.job_properties_extra, "{\"custom\":\"v\\u003c\",\"n\":7}");
    assert_string_equal(c.executor_service_handler, "E");
    char *out = ej_job_config_to_json(&c);
    assert_non_null(strstr(
        out,
        "\"jobProperties\":{\"job_exception_handler\":\"" EJ_CONFIG_DEFAULT_JOB_EXCEPTION_HANDLER
        "\",\"executor_service_handler\":\"E\",\"custom\":\"v\\u003c\","
        "\"n\":7}"));
    const char *tail =
        "\"overwrite\":false,\"zeta\":{\"a\":[1,2.5,\"x\\u003dy\",true,null,-3e-07]},"
        "\"label\":\"blue\"}";
    assert_string_equal(out + strlen(out) - strlen(tail), tail);
    /* Idempotent: reading what was written gives the same bytes. */
    assert_round_trip(out);
    free(out);

    /* Unknown keys that collide with known ones are never written twice,
     * and extras that are not an object are ignored by the writer. */
    free(c.extra_json);
    c.extra_json = strdup("{\"cron\":\"bad\",\"ok\":1}");
    out = ej_job_config_to_json(&c);
    assert_non_null(strstr(out, "\"cron\":\"0 * * * * ?\""));
    assert_null(strstr(out, "bad"));
    assert_non_null(strstr(out, ",\"ok\":1}"));
    free(out);
    free(c.extra_json);
    c.extra_json = strdup("[1]");
    out = ej_job_config_to_json(&c);
    assert_non_null(strstr(out, "\"overwrite\":false}"));
    free(out);
    assert_int_equal(ej_job_config_validate(&c, err, sizeof(err)), EJ_ECONFIG);
    assert_string_equal(err, "(unknown keys): extra keys are not a JSON object");
    free(c.extra_json);
    c.extra_json = NULL;
    free(c.job_properties_extra);
    c.job_properties_extra = strdup("nope");
    assert_int_equal(ej_job_config_validate(&c, err, sizeof(err)), EJ_ECONFIG);
    assert_string_equal(err, "jobProperties: extra properties are not a JSON object");
    ej_job_config_fini(&c);
}

static void test_json_gson_lenient_numbers_and_strings(void **state)
{
    (void)state;
    struct ej_job_config c;
    char err[256];
    const char *json =
        "{\"jobType\":\"SIMPLE\",\"shardingTotalCount\":\"3\","
        "\"monitorPort\":9000.0,\"maxTimeDiffSeconds\":\" 5 \","
        "\"jobParameter\":42,\"description\":1.5,\"scriptTimeoutMilliseconds\":\"1e3\"}";
    assert_int_equal(ej_job_config_init(&c), 0);
    assert_int_equal(ej_job_config_from_json(json, strlen(json), &c, err, sizeof(err)), 0);
    assert_int_equal(c.sharding_total_count, 3);
    assert_int_equal(c.monitor_port, 9000);
    assert_int_equal(c.max_time_diff_seconds, 5);
    assert_string_equal(c.job_parameter, "42");
    assert_string_equal(c.description, "1.5");
    assert_int_equal(c.script_timeout_ms, 1000);
    ej_job_config_fini(&c);
}

static void test_json_type_errors(void **state)
{
    (void)state;
    assert_json_error("{\"jobType\":\"SIMPLE\",\"shardingTotalCount\":\"x\"}",
                      "shardingTotalCount: expected an integer, got \"x\"");
    assert_json_error("{\"jobType\":\"SIMPLE\",\"shardingTotalCount\":1.5}",
                      "shardingTotalCount: expected an integer, got 1.5");
    assert_json_error("{\"jobType\":\"SIMPLE\",\"shardingTotalCount\":true}",
                      "shardingTotalCount: expected an integer, got true");
    assert_json_error("{\"jobType\":\"SIMPLE\",\"monitorPort\":4294967296}",
                      "monitorPort: expected an integer, got 4294967296");
    assert_json_error("{\"jobType\":\"SIMPLE\",\"monitorPort\":\"0x10\"}",
                      "monitorPort: expected an integer, got \"0x10\"");
    assert_json_error("{\"jobType\":\"SIMPLE\",\"reconcileIntervalMinutes\":[1]}",
                      "reconcileIntervalMinutes: expected an integer, got [1]");
    assert_json_error("{\"jobType\":\"SIMPLE\",\"scriptTimeoutMilliseconds\":1e30}",
                      "scriptTimeoutMilliseconds: expected an integer, got 1e30");
    assert_json_error("{\"jobType\":\"SIMPLE\",\"failover\":\"yes\"}",
                      "failover: expected true or false, got \"yes\"");
    assert_json_error("{\"jobType\":\"SIMPLE\",\"misfire\":1}",
                      "misfire: expected true or false, got 1");
    assert_json_error("{\"jobType\":\"SIMPLE\",\"cron\":{\"a\":1}}",
                      "cron: expected a string, got {\"a\":1}");
    assert_json_error("{\"jobType\":\"SIMPLE\",\"jobName\":false}",
                      "jobName: expected a string, got false");
    assert_json_error("{\"jobType\":\"SIMPLE\",\"jobProperties\":\"x\"}",
                      "jobProperties: expected an object, got \"x\"");
    assert_json_error("{\"jobType\":\"SIMPLE\",\"jobProperties\":{\"job_exception_handler\":[]}}",
                      "jobProperties.job_exception_handler: expected a string, got []");
    assert_json_error(
        "{\"jobType\":\"SIMPLE\",\"jobProperties\":{\"executor_service_handler\":{}}}",
        "jobProperties.executor_service_handler: expected a string, got {}");
    assert_json_error("{\"jobType\":\"FOO\"}", "jobType: unknown job type \"FOO\"");
    assert_json_error("{\"jobType\":\"script\"}", "jobType: unknown job type \"script\"");
    assert_json_error("{\"jobType\":3}", "jobType: expected a string, got 3");
    assert_json_error("{\"jobName\":\"x\"}", "jobType: is required");
    assert_json_error("{}", "jobType: is required");
    assert_json_error("[1]", "config: expected a JSON object, got [1]");
    assert_json_error("\"str\"", "config: expected a JSON object, got \"str\"");
    /* A long value is cut in the message. */
    assert_json_error(
        "{\"jobType\":\"SIMPLE\",\"shardingTotalCount\":\"aaaaaaaaaaaaaaaaaaaaaaaaaaaaaaa"
        "aaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaa\"}",
        "shardingTotalCount: expected an integer, got \"aaaaaaaaaaaaaaaaaaaaaaaaaaaaaaa"
        "aaaaaaaaaaaaaaaaaaaaaaaaaaaaa...\"");
}

static void test_json_syntax_errors(void **state)
{
    (void)state;
    char err[512];
    assert_int_equal(from_json_err("{\n  \"jobName\": \"a\",\n  \"cron\": \n}", err, sizeof(err)),
                     EJ_EPARSE);
    assert_string_equal(err, "JSON syntax error at line 4, column 1: unexpected token near '}'");
    assert_int_equal(from_json_err("{\"a\":1} x", err, sizeof(err)), EJ_EPARSE);
    assert_true(strncmp(err, "JSON syntax error at line 1, column ", 35) == 0);
    assert_int_equal(from_json_err("", err, sizeof(err)), EJ_EPARSE);
    assert_string_equal(err, "JSON syntax error at line 1, column 1: unexpected token near end "
                             "of file");
    assert_int_equal(from_json_err("{\"jobType\":\"SIM\xff\"}", err, sizeof(err)), EJ_EPARSE);
    assert_int_equal(from_json_err("{\"jobType\":\"\\u0000\"}", err, sizeof(err)), EJ_EPARSE);

    /* Every truncation of a valid node fails cleanly and leaves cfg alone. */
    struct ej_job_config c;
    make_script_job(&c, "keep", "0 * * * * ?", 1, "k.sh");
    for (size_t n = 0; n < strlen(script_json); n++) {
        assert_int_equal(ej_job_config_from_json(script_json, n, &c, err, sizeof(err)), EJ_EPARSE);
        assert_string_equal(c.job_name, "keep");
    }
    /* Failure after partial reading leaves cfg alone too. */
    const char *bad = "{\"jobName\":\"changed\",\"jobType\":\"SIMPLE\",\"failover\":3}";
    assert_int_equal(ej_job_config_from_json(bad, strlen(bad), &c, err, sizeof(err)), EJ_EPARSE);
    assert_string_equal(c.job_name, "keep");
    ej_job_config_fini(&c);
}

static void test_json_huge_and_hostile_input(void **state)
{
    (void)state;
    char err[512];
    struct ej_job_config c;
    assert_int_equal(ej_job_config_init(&c), 0);
    size_t big = EJ_CONFIG_MAX_JSON + 1;
    char *buf = malloc(big + 1);
    memset(buf, ' ', big);
    buf[big] = '\0';
    assert_int_equal(ej_job_config_from_json(buf, big, &c, err, sizeof(err)), EJ_EPARSE);
    assert_string_equal(err, "config: JSON is 1048577 bytes, larger than the limit of 1048576");

    /* Deep nesting in an unknown key. */
    size_t depth = 100000;
    size_t n = 0;
    n += (size_t)sprintf(buf, "{\"jobType\":\"SIMPLE\",\"x\":");
    for (size_t i = 0; i < depth; i++)
        buf[n++] = '[';
    for (size_t i = 0; i < depth; i++)
        buf[n++] = ']';
    buf[n++] = '}';
    assert_int_equal(ej_job_config_from_json(buf, n, &c, err, sizeof(err)), EJ_EPARSE);
    /* Not NUL-terminated input: only len bytes are read. */
    const char *j = "{\"jobType\":\"SIMPLE\"}garbage";
    assert_int_equal(ej_job_config_from_json(j, 20, &c, err, sizeof(err)), 0);
    assert_int_equal(ej_job_config_from_json(NULL, 5, &c, err, sizeof(err)), EJ_EINVAL);
    assert_int_equal(ej_job_config_from_json(j, 20, NULL, err, sizeof(err)), EJ_EINVAL);
    /* A NULL or zero-sized err buffer is fine. */
    assert_int_equal(ej_job_config_from_json("[", 1, &c, NULL, 0), EJ_EPARSE);
    free(buf);
    ej_job_config_fini(&c);
}

/* ------------------------------------------------------------------------ */
/* validation                                                                */
/* ------------------------------------------------------------------------ */

static void m_count0(struct ej_job_config *c)
{
    c->sharding_total_count = 0;
}
static void m_count_huge(struct ej_job_config *c)
{
    c->sharding_total_count = EJ_CONFIG_MAX_SHARDING_TOTAL_COUNT + 1;
}
static void m_name_space(struct ej_job_config *c)
{
    ej_job_config_set_str(&c->job_name, "a b");
}
static void m_name_empty(struct ej_job_config *c)
{
    ej_job_config_set_str(&c->job_name, "");
}
static void m_name_dotdot(struct ej_job_config *c)
{
    ej_job_config_set_str(&c->job_name, "..");
}
static void m_name_long(struct ej_job_config *c)
{
    char name[300];
    memset(name, 'a', 256);
    name[256] = '\0';
    ej_job_config_set_str(&c->job_name, name);
}
static void m_cron_empty(struct ej_job_config *c)
{
    ej_job_config_set_str(&c->cron, "  ");
}
static void m_cron_null(struct ej_job_config *c)
{
    free(c->cron);
    c->cron = NULL;
}
static void m_cron_long(struct ej_job_config *c)
{
    char *s = malloc(EJ_CONFIG_MAX_SHORT + 2);
    memset(s, '*', EJ_CONFIG_MAX_SHORT + 1);
    s[EJ_CONFIG_MAX_SHORT + 1] = '\0';
    free(c->cron);
    c->cron = s;
}
static void m_script_empty(struct ej_job_config *c)
{
    ej_job_config_set_str(&c->script_command_line, "");
}
static void m_port(struct ej_job_config *c)
{
    c->monitor_port = 70000;
}
static void m_port_neg(struct ej_job_config *c)
{
    c->monitor_port = -2;
}
static void m_param_range(struct ej_job_config *c)
{
    ej_job_config_set_str(&c->sharding_item_parameters, "0=a,5=b");
}
static void m_param_negative(struct ej_job_config *c)
{
    ej_job_config_set_str(&c->sharding_item_parameters, "-1=a");
}
static void m_param_format(struct ej_job_config *c)
{
    ej_job_config_set_str(&c->sharding_item_parameters, "0=a,b");
}
static void m_desc_long(struct ej_job_config *c)
{
    char *s = malloc(70001);
    memset(s, 'd', 70000);
    s[70000] = '\0';
    free(c->description);
    c->description = s;
}
static void m_param_long(struct ej_job_config *c)
{
    char *s = malloc(EJ_CONFIG_MAX_TEXT + 2);
    memset(s, ' ', EJ_CONFIG_MAX_TEXT + 1);
    s[EJ_CONFIG_MAX_TEXT + 1] = '\0';
    free(c->sharding_item_parameters);
    c->sharding_item_parameters = s;
}
static void m_jobparam_utf8(struct ej_job_config *c)
{
    ej_job_config_set_str(&c->job_parameter, "bad \xc0\xaf overlong");
}
static void m_desc_surrogate(struct ej_job_config *c)
{
    ej_job_config_set_str(&c->description, "\xed\xa0\x80");
}
static void m_tz_mars(struct ej_job_config *c)
{
    ej_job_config_set_str(&c->time_zone, "Mars/Base");
}
static void m_tz_dotdot(struct ej_job_config *c)
{
    ej_job_config_set_str(&c->time_zone, "../zoneinfo/UTC");
}
static void m_tz_abs(struct ej_job_config *c)
{
    ej_job_config_set_str(&c->time_zone, "/usr/share/zoneinfo/UTC");
}
static void m_tz_not_tzif(struct ej_job_config *c)
{
    ej_job_config_set_str(&c->time_zone, "zone.tab");
}
static void m_tz_dir(struct ej_job_config *c)
{
    ej_job_config_set_str(&c->time_zone, "Asia");
}
static void m_tz_gmt(struct ej_job_config *c)
{
    ej_job_config_set_str(&c->time_zone, "GMT+99:00");
}
static void m_time_diff(struct ej_job_config *c)
{
    c->max_time_diff_seconds = -5;
}
static void m_script_timeout(struct ej_job_config *c)
{
    c->script_timeout_ms = -1;
}
static void m_type(struct ej_job_config *c)
{
    c->job_type = (ej_job_type)7;
}
static void m_class_long(struct ej_job_config *c)
{
    char *s = malloc(EJ_CONFIG_MAX_SHORT + 2);
    memset(s, 'c', EJ_CONFIG_MAX_SHORT + 1);
    s[EJ_CONFIG_MAX_SHORT + 1] = '\0';
    free(c->job_class);
    c->job_class = s;
}
static void m_handler_long(struct ej_job_config *c)
{
    char *s = malloc(EJ_CONFIG_MAX_SHORT + 2);
    memset(s, 'h', EJ_CONFIG_MAX_SHORT + 1);
    s[EJ_CONFIG_MAX_SHORT + 1] = '\0';
    free(c->executor_service_handler);
    c->executor_service_handler = s;
}
static void m_http_no_uri(struct ej_job_config *c)
{
    c->job_type = EJ_JOB_TYPE_HTTP;
}
static void http_base(struct ej_job_config *c)
{
    c->job_type = EJ_JOB_TYPE_HTTP;
    ej_job_config_set_str(&c->http.uri, "https://example.com/x");
}
static void m_http_scheme(struct ej_job_config *c)
{
    http_base(c);
    ej_job_config_set_str(&c->http.uri, "ftp://x");
}
static void m_http_space(struct ej_job_config *c)
{
    http_base(c);
    ej_job_config_set_str(&c->http.uri, "http://x/a b");
}
static void m_http_method(struct ej_job_config *c)
{
    http_base(c);
    ej_job_config_set_str(&c->http.method, "FETCH");
}
static void m_http_connect(struct ej_job_config *c)
{
    http_base(c);
    c->http.connect_timeout_ms = 0;
}
static void m_http_read(struct ej_job_config *c)
{
    http_base(c);
    c->http.read_timeout_ms = -3;
}
static void m_http_ctype(struct ej_job_config *c)
{
    http_base(c);
    ej_job_config_set_str(&c->http.content_type, "text/plain\r\nX-Evil: 1");
}
static void m_http_data_long(struct ej_job_config *c)
{
    http_base(c);
    char *s = malloc(EJ_CONFIG_MAX_TEXT + 2);
    memset(s, 'x', EJ_CONFIG_MAX_TEXT + 1);
    s[EJ_CONFIG_MAX_TEXT + 1] = '\0';
    free(c->http.data);
    c->http.data = s;
}
static void m_http_uri_long(struct ej_job_config *c)
{
    http_base(c);
    char *s = malloc(EJ_CONFIG_MAX_URI + 2);
    memset(s, 'x', EJ_CONFIG_MAX_URI + 1);
    memcpy(s, "http://", 7);
    s[EJ_CONFIG_MAX_URI + 1] = '\0';
    free(c->http.uri);
    c->http.uri = s;
}

static void test_validate_messages(void **state)
{
    (void)state;
    assert_invalid(m_count0, "shardingTotalCount: must be >= 1, got 0");
    assert_invalid(m_count_huge, "shardingTotalCount: must be <= 1000000, got 1000001");
    assert_invalid(m_name_space, "jobName: must match [A-Za-z0-9_.-]+, got \"a b\"");
    assert_invalid(m_name_empty, "jobName: is required");
    assert_invalid(m_name_dotdot, "jobName: must not be \".\" or \"..\"");
    assert_invalid(m_name_long, "jobName: is 256 bytes, longer than the limit of 255");
    assert_invalid(m_cron_empty, "cron: is required");
    assert_invalid(m_cron_null, "cron: is required");
    assert_invalid(m_cron_long, "cron: is 1025 bytes, longer than the limit of 1024");
    assert_invalid(m_script_empty, "scriptCommandLine: is required for SCRIPT jobs");
    assert_invalid(m_port, "monitorPort: must be -1 or 0..65535, got 70000");
    assert_invalid(m_port_neg, "monitorPort: must be -1 or 0..65535, got -2");
    assert_invalid(m_param_range, "shardingItemParameters: item 5 >= shardingTotalCount 3");
    assert_invalid(m_param_negative, "shardingItemParameters: item -1 is negative");
    assert_invalid(m_param_format, "shardingItemParameters: Sharding item parameters '0=a,b' "
                                   "format error, should be int=xx,int=xx");
    assert_invalid(m_param_long,
                   "shardingItemParameters: is 65537 bytes, longer than the limit of 65536");
    assert_invalid(m_desc_long, "description: is 70000 bytes, longer than the limit of 65536");
    assert_invalid(m_jobparam_utf8, "jobParameter: must be valid UTF-8");
    assert_invalid(m_desc_surrogate, "description: must be valid UTF-8");
    assert_invalid(m_tz_mars, "timeZone: unknown time zone \"Mars/Base\"");
    assert_invalid(m_tz_dotdot, "timeZone: invalid time zone name \"../zoneinfo/UTC\"");
    assert_invalid(m_tz_abs, "timeZone: invalid time zone name \"/usr/share/zoneinfo/UTC\"");
    assert_invalid(m_tz_not_tzif, "timeZone: unknown time zone \"zone.tab\"");
    assert_invalid(m_tz_dir, "timeZone: unknown time zone \"Asia\"");
    assert_invalid(m_tz_gmt, "timeZone: invalid time zone name \"GMT+99:00\"");
    assert_invalid(m_time_diff, "maxTimeDiffSeconds: must be -1 or >= 0, got -5");
    assert_invalid(m_script_timeout, "scriptTimeoutMilliseconds: must be >= 0, got -1");
    assert_invalid(m_type, "jobType: unknown job type 7");
    assert_invalid(m_class_long, "jobClass: is 1025 bytes, longer than the limit of 1024");
    assert_invalid(m_handler_long, "jobProperties.executor_service_handler: is 1025 bytes, "
                                   "longer than the limit of 1024");
    assert_invalid(m_http_no_uri, "httpUri: is required for HTTP jobs");
    assert_invalid(m_http_scheme, "httpUri: must start with http:// or https://, got \"ftp://x\"");
    assert_invalid(m_http_space,
                   "httpUri: must not contain spaces or control characters, got \"http://x/a b\"");
    assert_invalid(m_http_method, "httpMethod: must be one of GET, POST, PUT, DELETE, PATCH, "
                                  "HEAD, OPTIONS, got \"FETCH\"");
    assert_invalid(m_http_connect, "httpConnectTimeoutMilliseconds: must be >= 1, got 0");
    assert_invalid(m_http_read, "httpReadTimeoutMilliseconds: must be >= 1, got -3");
    assert_invalid(m_http_ctype, "httpContentType: must not contain control characters");
    assert_invalid(m_http_data_long, "httpData: is 65537 bytes, longer than the limit of 65536");
    assert_invalid(m_http_uri_long, "httpUri: is 8193 bytes, longer than the limit of 8192");
}

static void test_validate_valid_and_all(void **state)
{
    (void)state;
    struct ej_job_config c;
    char err[256];
    struct ej_config_errors e;
    make_script_job(&c, "a-Z_0.9", "0 * * * * ?", 3, "x");
    ej_job_config_set_str(&c.time_zone, "Asia/Shanghai");
    ej_job_config_set_str(&c.sharding_item_parameters, "0=a,1=b,2=c");
    c.monitor_port = 65535;
    c.max_time_diff_seconds = 0;
    assert_int_equal(ej_job_config_validate(&c, err, sizeof(err)), 0);
    assert_string_equal(err, "");
    assert_int_equal(ej_job_config_validate(&c, NULL, 0), 0);
    ej_job_config_set_str(&c.time_zone, "UTC");
    assert_int_equal(ej_job_config_validate(&c, err, sizeof(err)), 0);

    /* validate_all reports every problem. */
    c.sharding_total_count = 0;
    c.monitor_port = 99999;
    ej_job_config_set_str(&c.cron, "");
    ej_job_config_set_str(&c.time_zone, "Nowhere/City");
    ej_config_errors_init(&e);
    assert_int_equal(ej_job_config_validate_all(&c, &e), EJ_ECONFIG);
    assert_int_equal(e.count, 4);
    assert_string_equal(e.messages[0], "cron: is required");
    assert_string_equal(e.messages[1], "shardingTotalCount: must be >= 1, got 0");
    assert_string_equal(e.messages[2], "monitorPort: must be -1 or 0..65535, got 99999");
    assert_string_equal(e.messages[3], "timeZone: unknown time zone \"Nowhere/City\"");
    ej_config_errors_fini(&e);
    assert_int_equal(e.count, 0);
    /* A small err buffer is truncated, not overrun. */
    char small[8];
    assert_int_equal(ej_job_config_validate(&c, small, sizeof(small)), EJ_ECONFIG);
    assert_string_equal(small, "cron: i");
    assert_int_equal(ej_job_config_validate(NULL, err, sizeof(err)), EJ_EINVAL);
    assert_int_equal(ej_job_config_validate_all(NULL, &e), EJ_EINVAL);
    ej_job_config_fini(&c);
}

/* One cron rule: syntax, zone and a fire time ahead. */
static void test_validate_cron_rule(void **state)
{
    (void)state;
    struct ej_job_config c;
    char err[256];
    make_script_job(&c, "j", "bad", 1, "x");
    assert_int_equal(ej_job_config_validate(&c, err, sizeof(err)), EJ_ECONFIG);
    assert_memory_equal(err, "cron: ", 6);
    static const char *const never[] = {"0 0 0 30 2 ?", "0 0 0 1 1 ? 2001", "0 0 0 31 4 ?"};
    for (size_t i = 0; i < sizeof(never) / sizeof(never[0]); i++) {
        ej_job_config_set_str(&c.cron, never[i]);
        assert_int_equal(ej_job_config_validate(&c, err, sizeof(err)), EJ_ECONFIG);
        assert_string_equal(err, "cron: has no fire time ahead");
        assert_int_equal(ej_config_check_cron(never[i], "", err, sizeof(err)), EJ_ECONFIG);
        assert_string_equal(err, "cron: has no fire time ahead");
    }
    ej_job_config_set_str(&c.cron, "0 * * * * ?");
    assert_int_equal(ej_job_config_validate(&c, err, sizeof(err)), 0);
    /* One zone rule: Java's custom ids load, so they are valid. */
    ej_job_config_set_str(&c.time_zone, "GMT+08:00");
    assert_int_equal(ej_job_config_validate(&c, err, sizeof(err)), 0);
    assert_int_equal(ej_config_check_cron("0 * * * * ?", "GMT+08:00", err, sizeof(err)), 0);
    ej_job_config_set_str(&c.time_zone, "Mars/Base");
    assert_int_equal(ej_job_config_validate(&c, err, sizeof(err)), EJ_ECONFIG);
    assert_string_equal(err, "timeZone: unknown time zone \"Mars/Base\"");
    assert_int_equal(ej_config_check_cron("0 * * * * ?", "Mars/Base", err, sizeof(err)),
                     EJ_ECONFIG);
    assert_string_equal(err, "timeZone: unknown time zone \"Mars/Base\"");
    ej_job_config_fini(&c);
}

/* Every problem of a config node at once: a value of the wrong type does
 * not hide the rules, nor a bad zone the cron. */
static void test_check_json_all_errors(void **state)
{
    (void)state;
    struct ej_job_config c;
    struct ej_config_errors e;
    ej_job_config_init(&c);
    ej_config_errors_init(&e);
    static const char three[] =
        "{\"jobName\":\"j\",\"jobType\":\"SCRIPT\",\"scriptCommandLine\":\"/bin/true\","
        "\"cron\":\"0 0 0 1 1 ? 2001\",\"shardingTotalCount\":\"abc\",\"timeZone\":\"Mars/Base\"}";
    assert_int_equal(ej_job_config_check_json(three, strlen(three), "j", &c, &e), EJ_ECONFIG);
    assert_int_equal(e.count, 3);
    assert_string_equal(e.messages[0], "shardingTotalCount: expected an integer, got \"abc\"");
    assert_string_equal(e.messages[1], "cron: has no fire time ahead");
    assert_string_equal(e.messages[2], "timeZone: unknown time zone \"Mars/Base\"");
    ej_config_errors_fini(&e);

    /* Two values of the wrong type, a bad syntax cron: all named; the
     * missing jobName comes from the job, a different one is a problem. */
    static const char more[] = "{\"jobType\":\"SCRIPT\",\"scriptCommandLine\":\"x\","
                               "\"cron\":\"bad\",\"shardingTotalCount\":3,\"failover\":\"yes\","
                               "\"monitorPort\":[1]}";
    assert_int_equal(ej_job_config_check_json(more, strlen(more), "j", &c, &e), EJ_ECONFIG);
    assert_int_equal(e.count, 3);
    assert_string_equal(e.messages[0], "failover: expected true or false, got \"yes\"");
    assert_string_equal(e.messages[1], "monitorPort: expected an integer, got [1]");
    assert_memory_equal(e.messages[2], "cron: ", 6);
    assert_string_equal(c.job_name, "j");
    assert_int_equal(c.sharding_total_count, 3);
    ej_config_errors_fini(&e);
    assert_int_equal(ej_job_config_check_json(three, strlen(three), "k", &c, &e), EJ_ECONFIG);
    assert_int_equal(e.count, 4);
    assert_string_equal(e.messages[1], "jobName: is \"j\" but the job is \"k\"");
    ej_config_errors_fini(&e);

    /* JSON that is not usable at all: its one message. */
    assert_int_equal(ej_job_config_check_json("{", 1, NULL, &c, &e), EJ_EPARSE);
    assert_int_equal(e.count, 1);
    assert_memory_equal(e.messages[0], "JSON syntax error", 17);
    ej_config_errors_fini(&e);
    static const char good[] = "{\"jobName\":\"j\",\"jobType\":\"SCRIPT\",\"scriptCommandLine\":"
                               "\"x\",\"cron\":\"0 * * * * ?\",\"shardingTotalCount\":2}";
    assert_int_equal(ej_job_config_check_json(good, strlen(good), NULL, &c, &e), 0);
    assert_int_equal(e.count, 0);
    assert_int_equal(ej_job_config_check_json(good, strlen(good), NULL, NULL, &e), EJ_EINVAL);

    /* The one-message check keeps its order: syntax, zone, fire time. */
    char err[256];
    assert_int_equal(ej_config_check_cron("0 0 0 1 1 ? 2001", "Mars/Base", err, sizeof err),
                     EJ_ECONFIG);
    assert_string_equal(err, "timeZone: unknown time zone \"Mars/Base\"");
    assert_int_equal(ej_config_check_cron("bad", "Mars/Base", err, sizeof err), EJ_ECONFIG);
    assert_memory_equal(err, "cron: ", 6);
    ej_job_config_fini(&c);
}

/* The form's view of the field table: every row but the unknown keys, in
 * the table's order, with its type, group, choices and help line. */
static void test_fields_json(void **state)
{
    (void)state;
    char *text = ej_config_fields_json();
    assert_non_null(text);
    json_t *all = json_loads(text, 0, NULL);
    free(text);
    assert_true(json_is_array(all));
    size_t i;
    json_t *f;
    int seen = 0;
    json_array_foreach(all, i, f)
    {
        const char *name = json_string_value(json_object_get(f, "name"));
        const char *help = json_string_value(json_object_get(f, "help"));
        assert_non_null(name);
        assert_true(help != NULL && strlen(help) > 10);
        if (strcmp(name, "jobType") == 0) {
            assert_string_equal(json_string_value(json_object_get(f, "type")), "enum");
            assert_int_equal(json_array_size(json_object_get(f, "choices")), 4);
            assert_string_equal(json_string_value(json_object_get(f, "default")), "SIMPLE");
            seen++;
        } else if (strcmp(name, "httpMethod") == 0) {
            assert_string_equal(json_string_value(json_object_get(f, "type")), "enum");
            assert_string_equal(json_string_value(json_object_get(f, "scope")), "HTTP");
            assert_int_equal(json_array_size(json_object_get(f, "choices")), 7);
            seen++;
        } else if (strcmp(name, "shardingTotalCount") == 0) {
            assert_string_equal(json_string_value(json_object_get(f, "type")), "integer");
            assert_string_equal(json_string_value(json_object_get(f, "form")), "main");
            seen++;
        } else if (strcmp(name, "monitorPort") == 0 || strcmp(name, "jobClass") == 0) {
            assert_string_equal(json_string_value(json_object_get(f, "form")), "java");
            seen++;
        } else if (strcmp(name, "jobProperties.job_exception_handler") == 0) {
            assert_true(json_is_true(json_object_get(f, "inProps")));
            seen++;
        } else if (strcmp(name, "timeZone") == 0) {
            assert_true(json_is_true(json_object_get(f, "timeZone")));
            assert_string_equal(json_string_value(json_object_get(f, "type")), "string");
            seen++;
        }
        assert_string_not_equal(name, "(unknown keys)");
    }
    assert_int_equal(seen, 7);
    json_decref(all);
}

/* A command line the executor cannot split is refused at validation. */
static void test_validate_command_line(void **state)
{
    (void)state;
    struct ej_job_config c;
    char err[256];
    make_script_job(&c, "j", "0 * * * * ?", 1, "/bin/echo 'unbalanced");
    assert_int_equal(ej_job_config_validate(&c, err, sizeof(err)), EJ_ECONFIG);
    assert_string_equal(err, "scriptCommandLine: unbalanced quotes in '/bin/echo 'unbalanced'");
    ej_job_config_set_str(&c.script_command_line, "'' x");
    assert_int_equal(ej_job_config_validate(&c, err, sizeof(err)), EJ_ECONFIG);
    assert_string_equal(err, "scriptCommandLine: no program in '\'\' x'");
    ej_job_config_fini(&c);
}

static void test_time_zone_check(void **state)
{
    (void)state;
    char err[256];
    assert_int_equal(ej_config_check_time_zone(NULL, err, sizeof(err)), 0);
    assert_int_equal(ej_config_check_time_zone("", err, sizeof(err)), 0);
    assert_int_equal(ej_config_check_time_zone("America/New_York", err, sizeof(err)), 0);
    assert_int_equal(ej_config_check_time_zone("Etc/GMT+8", err, sizeof(err)), 0);
    assert_int_equal(ej_config_check_time_zone("Asia//Shanghai", err, sizeof(err)), EJ_ECONFIG);
    assert_string_equal(err, "invalid time zone name \"Asia//Shanghai\"");
    assert_int_equal(ej_config_check_time_zone("Asia/./Shanghai", err, sizeof(err)), EJ_ECONFIG);
    assert_int_equal(ej_config_check_time_zone("Asia/", err, sizeof(err)), EJ_ECONFIG);
    assert_int_equal(ej_config_check_time_zone("a..b", err, sizeof(err)), EJ_ECONFIG);

    /* TZDIR points the check at another database. */
    char dir[] = "/tmp/ejcfg-tz-XXXXXX";
    assert_non_null(mkdtemp(dir));
    char path[300];
    snprintf(path, sizeof(path), "%s/Test_Zone", dir);
    /* A real TZif file under a name no other database has. */
    FILE *in = fopen("/usr/share/zoneinfo/UTC", "rb");
    FILE *f = fopen(path, "wb");
    assert_non_null(in);
    char buf[4096];
    size_t got;
    while ((got = fread(buf, 1, sizeof(buf), in)) > 0)
        fwrite(buf, 1, got, f);
    fclose(in);
    fclose(f);
    const char *old = getenv("TZDIR");
    char *saved = old ? strdup(old) : NULL;
    setenv("TZDIR", dir, 1);
    assert_int_equal(ej_config_check_time_zone("Test_Zone", err, sizeof(err)), 0);
    assert_int_equal(ej_config_check_time_zone("Not/Here", err, sizeof(err)), EJ_ECONFIG);
    assert_string_equal(err, "unknown time zone \"Not/Here\"");
    if (saved) {
        setenv("TZDIR", saved, 1);
        free(saved);
    } else {
        unsetenv("TZDIR");
    }
    unlink(path);
    rmdir(dir);
}

/* ------------------------------------------------------------------------ */
/* sharding item parameters                                                  */
/* ------------------------------------------------------------------------ */

static void assert_params(const char *s, size_t count, const int *items, const char *const *values)
{
    struct ej_sharding_params p;
    char err[256];
    int rc = ej_sharding_params_parse(s, &p, err, sizeof(err));
    if (rc != 0)
        fail_msg("parse '%s': %s", s ? s : "(null)", err);
    assert_int_equal(p.count, count);
    for (size_t i = 0; i < count; i++) {
        assert_int_equal(p.entries[i].item, items[i]);
        assert_string_equal(p.entries[i].value, values[i]);
        assert_string_equal(ej_sharding_params_get(&p, items[i]), values[i]);
    }
    ej_sharding_params_fini(&p);
}

static void assert_params_error(const char *s, const char *expected)
{
    struct ej_sharding_params p;
    char err[512];
    assert_int_equal(ej_sharding_params_parse(s, &p, err, sizeof(err)), EJ_ECONFIG);
    assert_string_equal(err, expected);
    assert_int_equal(p.count, 0);
    assert_null(p.entries);
    ej_sharding_params_fini(&p);
}

static void test_sharding_params(void **state)
{
    (void)state;
    /* ShardingItemParametersTest's vectors. */
    assert_params("", 0, NULL, NULL);
    assert_params(NULL, 0, NULL, NULL);
    assert_params("0=A,1=B,2=C", 3, (const int[]){0, 1, 2}, (const char *const[]){"A", "B", "C"});
    assert_params_error("xxx-xxx", "Sharding item parameters 'xxx-xxx' format error, should be "
                                   "int=xx,int=xx");
    assert_params_error("xxx=xxx", "Sharding item parameters key 'xxx' is not an integer.");

    /* Java's split and trim. */
    assert_params(" 2 = c ,\t0=a , 1= b\n", 3, (const int[]){0, 1, 2},
                  (const char *const[]){"a", "b", "c"});
    assert_params("0=a,0=b,1=x,0=c", 2, (const int[]){0, 1}, (const char *const[]){"c", "x"});
    assert_params("0=a=", 1, (const int[]){0}, (const char *const[]){"a"});
    assert_params("0=  = ", 1, (const int[]){0}, (const char *const[]){""});
    assert_params("0=a,", 1, (const int[]){0}, (const char *const[]){"a"});
    assert_params(",,,", 0, NULL, NULL);
    assert_params("+7=p,-1=n,2147483647=max,-2147483648=min", 4,
                  (const int[]){INT32_MIN, -1, 7, INT32_MAX},
                  (const char *const[]){"min", "n", "p", "max"});
    assert_params("3=\xe4\xb8\xad\xe6\x96\x87", 1, (const int[]){3},
                  (const char *const[]){"\xe4\xb8\xad\xe6\x96\x87"});
    assert_params_error("0=a=b", "Sharding item parameters '0=a=b' format error, should be "
                                 "int=xx,int=xx");
    assert_params_error("0=", "Sharding item parameters '0=' format error, should be "
                              "int=xx,int=xx");
    assert_params_error("=", "Sharding item parameters '=' format error, should be int=xx,int=xx");
    assert_params_error(",0=a", "Sharding item parameters ',0=a' format error, should be "
                                "int=xx,int=xx");
    assert_params_error("0=a,,1=b", "Sharding item parameters '0=a,,1=b' format error, should "
                                    "be int=xx,int=xx");
    assert_params_error("  ", "Sharding item parameters '  ' format error, should be "
                              "int=xx,int=xx");
    assert_params_error("=a", "Sharding item parameters key '' is not an integer.");
    assert_params_error(" x = a", "Sharding item parameters key 'x ' is not an integer.");
    assert_params_error("2147483648=a", "Sharding item parameters key '2147483648' is not an "
                                        "integer.");
    assert_params_error("-2147483649=a", "Sharding item parameters key '-2147483649' is not an "
                                         "integer.");
    assert_params_error("+=a", "Sharding item parameters key '+' is not an integer.");
    assert_params_error("1 2=a", "Sharding item parameters key '1 2' is not an integer.");
    assert_params_error("0x1=a", "Sharding item parameters key '0x1' is not an integer.");

    struct ej_sharding_params p;
    assert_int_equal(ej_sharding_params_parse("0=a,2=c", &p, NULL, 0), 0);
    assert_null(ej_sharding_params_get(&p, 1));
    assert_null(ej_sharding_params_get(&p, 3));
    assert_null(ej_sharding_params_get(&p, -1));
    assert_string_equal(ej_sharding_params_get(&p, 2), "c");
    ej_sharding_params_fini(&p);
    ej_sharding_params_fini(&p);
    ej_sharding_params_fini(NULL);
    assert_null(ej_sharding_params_get(NULL, 0));
    assert_int_equal(ej_sharding_params_parse("0=a", NULL, NULL, 0), EJ_EINVAL);

    /* A long bad string is echoed cut. */
    char big[1000];
    memset(big, 'z', sizeof(big) - 1);
    big[sizeof(big) - 1] = '\0';
    char err[512];
    assert_int_equal(ej_sharding_params_parse(big, &p, err, sizeof(err)), EJ_ECONFIG);
    assert_true(strstr(err, "zzz...' format error") != NULL);
    /* Many items. */
    char *many = malloc(200000);
    size_t n = 0;
    for (int i = 0; i < 10000; i++)
        n += (size_t)sprintf(many + n, "%s%d=v%d", i ? "," : "", 9999 - i, i);
    assert_int_equal(ej_sharding_params_parse(many, &p, err, sizeof(err)), 0);
    assert_int_equal(p.count, 10000);
    assert_string_equal(ej_sharding_params_get(&p, 0), "v9999");
    assert_string_equal(ej_sharding_params_get(&p, 9999), "v0");
    ej_sharding_params_fini(&p);
    free(many);
}

/* ------------------------------------------------------------------------ */
/* daemon YAML                                                               */
/* ------------------------------------------------------------------------ */

static void test_yaml_spec_example(void **state)
{
    (void)state;
    struct ej_daemon_config d;
    struct ej_config_errors e;
    char path[512];
    ej_config_errors_init(&e);
    snprintf(path, sizeof(path), "%s/daemon_full.yaml", EJ_CONFIG_TEST_DATA);
    int rc = ej_daemon_config_load_file(path, &d, &e);
    if (rc != 0)
        dump_errors(&e);
    assert_int_equal(rc, 0);
    assert_int_equal(e.count, 0);
    assert_true(d.reg_center.embedded);
    assert_string_equal(d.reg_center.server_lists, "");
    assert_string_equal(d.reg_center.name_space, "ejob-demo");
    assert_int_equal(d.reg_center.session_timeout_ms, 10000);
    assert_int_equal(d.reg_center.takeover_margin_ms, -1); /* unset: the registry's default */
    assert_int_equal(d.reg_center.connection_timeout_ms, 15000);
    assert_int_equal(d.reg_center.base_sleep_time_ms, 1000);
    assert_int_equal(d.reg_center.max_sleep_time_ms, 3000);
    assert_int_equal(d.reg_center.max_retries, 3);
    assert_string_equal(d.reg_center.digest, "user:password");
    assert_int_equal(d.tracing.type, EJ_TRACING_SQLITE);
    assert_string_equal(d.tracing.url, "./ejob-trace.db");
    assert_int_equal(d.job_count, 1);
    assert_int_equal(d.job_lines[0], 14);
    const struct ej_job_config *j = &d.jobs[0];
    assert_string_equal(j->job_name, "orderSync");
    assert_int_equal(j->job_type, EJ_JOB_TYPE_SCRIPT);
    assert_string_equal(j->job_class, EJ_CONFIG_SCRIPT_JOB_CLASS);
    assert_string_equal(j->cron, "0/5 * * * * ?");
    assert_string_equal(j->time_zone, "Asia/Shanghai");
    assert_int_equal(j->sharding_total_count, 3);
    assert_string_equal(j->sharding_item_parameters, "0=Beijing,1=Shanghai,2=Guangzhou");
    assert_string_equal(j->job_parameter, "");
    assert_true(j->failover);
    assert_true(j->misfire);
    assert_true(j->monitor_execution);
    assert_int_equal(j->max_time_diff_seconds, -1);
    assert_int_equal(j->monitor_port, -1);
    assert_int_equal(j->reconcile_interval_minutes, 10);
    assert_string_equal(j->job_sharding_strategy_class, "");
    assert_string_equal(j->description, "sync orders");
    assert_false(j->disabled);
    assert_true(j->overwrite);
    assert_string_equal(j->script_command_line, "/opt/jobs/sync-orders.sh");
    assert_int_equal(ej_job_config_validate(j, NULL, 0), 0);
    ej_daemon_config_fini(&d);
    ej_daemon_config_fini(&d);
    ej_config_errors_fini(&e);
}

/* defaults: job keys every job of the file gets unless it sets them. */
static void test_yaml_defaults(void **state)
{
    (void)state;
    struct ej_daemon_config d;
    struct ej_config_errors e;
    const char *yaml = "regCenter: {namespace: n}\n"
                       "defaults:\n"
                       "  jobShardingStrategyType: ROTATE\n"
                       "  failover: true\n"
                       "  shardingTotalCount: 2\n"
                       "  props: {script.timeout.milliseconds: 5000}\n"
                       "jobs:\n"
                       "  a: {elasticJobType: SCRIPT, cron: \"0 * * * * ?\",\n"
                       "      props: {script.command.line: /bin/true}}\n"
                       "  b: {elasticJobType: SCRIPT, cron: \"0 * * * * ?\", failover: false,\n"
                       "      shardingTotalCount: 3, jobShardingStrategyType: AVERAGE,\n"
                       "      props: {script.command.line: /bin/true,\n"
                       "              script.timeout.milliseconds: 10}}\n";
    assert_int_equal(load_yaml(yaml, &d, &e), 0);
    assert_int_equal(d.job_count, 2);
    assert_true(d.jobs[0].failover);
    assert_int_equal(d.jobs[0].sharding_total_count, 2);
    assert_int_equal(d.jobs[0].script_timeout_ms, 5000);
    assert_string_equal(d.jobs[0].job_sharding_strategy_class,
                        "com.dangdang.ddframe.job.lite.api.strategy.impl."
                        "RotateServerByNameJobShardingStrategy");
    assert_false(d.jobs[1].failover);
    assert_int_equal(d.jobs[1].sharding_total_count, 3);
    assert_int_equal(d.jobs[1].script_timeout_ms, 10);
    assert_string_equal(d.jobs[1].job_sharding_strategy_class, "");
    ej_daemon_config_fini(&d);
    ej_config_errors_fini(&e);

    /* A problem in defaults is reported once, at its place, not per job. */
    const char *bad = "regCenter: {namespace: n}\n"
                      "defaults:\n"
                      "  shardingTotalCount: two\n"
                      "  shardingTotalCont: 2\n"
                      "jobs:\n"
                      "  a: {elasticJobType: SCRIPT, cron: \"0 * * * * ?\",\n"
                      "      props: {script.command.line: /bin/true}}\n"
                      "  b: {elasticJobType: SCRIPT, cron: \"0 * * * * ?\",\n"
                      "      props: {script.command.line: /bin/true}}\n";
    assert_int_equal(load_yaml(bad, &d, &e), EJ_ECONFIG);
    assert_int_equal(e.count, 2);
    assert_string_equal(e.messages[0],
                        "jobs.yaml:3:23: defaults.shardingTotalCount: expected an integer, got "
                        "\"two\"");
    assert_string_equal(e.messages[1],
                        "jobs.yaml:4:3: defaults: unknown key \"shardingTotalCont\"");
    ej_config_errors_fini(&e);
}

static void test_yaml_strategy_java_names(void **state)
{
    (void)state;
    static const char *const cases[][2] = {
        {"AVERAGE", ""},
        {"rotate", "com.dangdang.ddframe.job.lite.api.strategy.impl."
                   "RotateServerByNameJobShardingStrategy"},
        {"ODEVITY", "com.dangdang.ddframe.job.lite.api.strategy.impl."
                    "OdevitySortByNameJobShardingStrategy"},
        {"STICKY", "STICKY"},
    };
    for (size_t i = 0; i < sizeof(cases) / sizeof(cases[0]); i++) {
        char text[512];
        snprintf(text, sizeof(text),
                 "regCenter:\n  namespace: ns\njobs:\n  j:\n    cron: \"0/5 * * * * ?\"\n"
                 "    shardingTotalCount: 2\n    jobShardingStrategyType: %s\n"
                 "    props:\n      script.command.line: /bin/true\n",
                 cases[i][0]);
        struct ej_daemon_config d;
        struct ej_config_errors e;
        assert_int_equal(load_yaml(text, &d, &e), 0);
        assert_string_equal(d.jobs[0].job_sharding_strategy_class, cases[i][1]);
        ej_daemon_config_fini(&d);
        ej_config_errors_fini(&e);
    }
}

static void test_yaml_http_and_defaults(void **state)
{
    (void)state;
    struct ej_daemon_config d;
    struct ej_config_errors e;
    char path[512];
    ej_config_errors_init(&e);
    snprintf(path, sizeof(path), "%s/daemon_http.yaml", EJ_CONFIG_TEST_DATA);
    int rc = ej_daemon_config_load_file(path, &d, &e);
    if (rc != 0)
        dump_errors(&e);
    assert_int_equal(rc, 0);
    assert_false(d.reg_center.embedded);
    assert_string_equal(d.reg_center.server_lists,
                        "127.0.0.1:2181,zk2.example.com:2181,[::1]:2182/chroot");
    assert_string_equal(d.reg_center.name_space, "shop/jobs");
    assert_int_equal(d.reg_center.session_timeout_ms, 60000);
    assert_null(d.reg_center.digest);
    assert_int_equal(d.tracing.type, EJ_TRACING_POSTGRESQL);
    assert_string_equal(d.tracing.url, "host=127.0.0.1 dbname=ejob user=ejob");
    assert_int_equal(d.job_count, 2);
    const struct ej_job_config *h = &d.jobs[0];
    assert_string_equal(h->job_name, "pingApi");
    assert_int_equal(h->job_type, EJ_JOB_TYPE_HTTP);
    assert_string_equal(h->http.uri, "https://api.example.com/ping?x=1&y=2");
    assert_string_equal(h->http.method, "POST");
    assert_string_equal(h->http.data, "{\"hello\":\"world\"}");
    assert_int_equal(h->http.connect_timeout_ms, 1000);
    assert_int_equal(h->http.read_timeout_ms, 2000);
    assert_string_equal(h->http.content_type, "application/json");
    assert_false(h->failover);
    assert_true(h->misfire);
    assert_false(h->overwrite);
    const struct ej_job_config *s = &d.jobs[1];
    assert_string_equal(s->job_name, "cleanup");
    assert_int_equal(s->job_type, EJ_JOB_TYPE_SCRIPT); /* inferred */
    assert_string_equal(s->script_command_line, "/usr/local/bin/cleanup --all");
    assert_int_equal(s->script_timeout_ms, 600000);
    assert_string_equal(
        s->job_sharding_strategy_class,
        "com.dangdang.ddframe.job.lite.api.strategy.impl.RotateServerByNameJobShardingStrategy");
    assert_int_equal(d.job_lines[1], 20);
    ej_daemon_config_fini(&d);
    ej_config_errors_fini(&e);

    /* Minimal: only the required keys; an HTTP job inferred from http.uri. */
    rc = load_yaml("regCenter: {namespace: n}\njobs:\n  h:\n    cron: 0 * * * * ?\n"
                   "    shardingTotalCount: 1\n    props: {http.uri: 'http://x/'}\n",
                   &d, &e);
    assert_int_equal(rc, 0);
    assert_true(d.reg_center.embedded);
    assert_int_equal(d.tracing.type, EJ_TRACING_NONE);
    assert_null(d.tracing.url);
    assert_int_equal(d.jobs[0].job_type, EJ_JOB_TYPE_HTTP);
    assert_string_equal(d.jobs[0].http.method, "GET");
    ej_daemon_config_fini(&d);
    ej_config_errors_fini(&e);

    /* No jobs, "embedded" spelled out, tracing with SQLite default url,
     * empty values read as absent, anchors and aliases. */
    rc = load_yaml("regCenter:\n  serverLists: embedded\n  namespace: n\n  digest:\n"
                   "tracing:\n  type: sqlite\njobs:\n",
                   &d, &e);
    assert_int_equal(rc, 0);
    assert_int_equal(d.job_count, 0);
    assert_null(d.reg_center.digest);
    assert_string_equal(d.tracing.url, "ejob-trace.db");
    ej_daemon_config_fini(&d);
    ej_config_errors_fini(&e);
    rc = load_yaml("regCenter: {namespace: n}\ntracing:\njobs:\n"
                   "  a: &base\n    cron: 0 * * * * ?\n    shardingTotalCount: 2\n"
                   "    props: {script.command.line: x}\n  b: *base\n",
                   &d, &e);
    assert_int_equal(rc, 0);
    assert_int_equal(d.job_count, 2);
    assert_string_equal(d.jobs[1].job_name, "b");
    assert_int_equal(d.jobs[1].sharding_total_count, 2);
    ej_daemon_config_fini(&d);
    ej_config_errors_fini(&e);
}

/* A file holding regCenter.digest is itself a secret: refused when others
 * may change it, warned when everyone may read it, never quoting it. */
static void test_yaml_inline_digest_file_mode(void **state)
{
    (void)state;
    char dir[] = "/tmp/ejcfgXXXXXX", path[64];
    assert_non_null(mkdtemp(dir));
    snprintf(path, sizeof path, "%s/jobs.yaml", dir);
    FILE *f = fopen(path, "w");
    assert_non_null(f);
    fputs("regCenter:\n  namespace: n\n  digest: ops:s3cret\n", f);
    fclose(f);
    static const struct {
        mode_t mode;
        int rc;
        const char *says; /* in the error (refused) or the warning */
    } cases[] = {
        {0666, EJ_ECONFIG, "is world-writable (mode 666): refused; chmod go-w"},
        {0620, EJ_ECONFIG, "is group-writable (mode 620): refused; chmod go-w"},
        {0644, 0, "is world-readable (mode 644); chmod o-r"},
        {0600, 0, NULL},
    };
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        struct ej_daemon_config d;
        struct ej_config_errors e;
        ej_config_errors_init(&e);
        assert_int_equal(chmod(path, cases[i].mode), 0);
        assert_int_equal(ej_daemon_config_load_file(path, &d, &e), cases[i].rc);
        const struct ej_config_errors *said = cases[i].rc != 0 ? &e : &d.warnings;
        if (cases[i].says == NULL) {
            assert_int_equal(said->count, 0);
        } else {
            assert_int_equal(said->count, 1);
            assert_non_null(strstr(said->messages[0], cases[i].says));
            assert_null(strstr(said->messages[0], "s3cret"));
            if (cases[i].rc != 0)
                assert_non_null(strstr(said->messages[0], "jobs.yaml:3:11: regCenter.digest: "));
        }
        ej_daemon_config_fini(&d);
        ej_config_errors_fini(&e);
    }
    unlink(path);
    rmdir(dir);
}

static void test_yaml_error_file(void **state)
{
    (void)state;
    struct ej_daemon_config d;
    struct ej_config_errors e;
    char path[512], msg[700];
    ej_config_errors_init(&e);
    snprintf(path, sizeof(path), "%s/daemon_errors.yaml", EJ_CONFIG_TEST_DATA);
    assert_int_equal(ej_daemon_config_load_file(path, &d, &e), EJ_ECONFIG);
    assert_int_equal(d.job_count, 0);
    assert_null(d.jobs);
    static const char *const expected[] = {
        "2:16: regCenter.serverLists: server \"zk2:notaport\": port must be 1..65535",
        "3:14: regCenter.namespace: must not start or end with \"/\", got \"/bad\"",
        "4:15: regCenter.maxRetries: must be 0..29, got 50",
        "7:5: jobs.orderSync: unknown key \"shardingTotalCont\"",
        "9:25: jobs.orderSync.shardingTotalCount: expected an integer, got \"three\"",
        "12:3: jobs.b.props.script.command.line: is required for SCRIPT jobs",
        "13:11: jobs.b.cron: is required",
        "15:29: jobs.b.shardingItemParameters: item 5 >= shardingTotalCount 2",
        "16:18: jobs.b.monitorPort: must be -1 or 0..65535, got 70000",
        "17:15: jobs.b.timeZone: unknown time zone \"Mars/Base\"",
        "19:7: jobs.b.props: unknown key \"script.comand.line\"",
    };
    if (e.count != sizeof(expected) / sizeof(expected[0]))
        dump_errors(&e);
    assert_int_equal(e.count, sizeof(expected) / sizeof(expected[0]));
    for (size_t i = 0; i < e.count; i++) {
        snprintf(msg, sizeof(msg), "%s:%s", path, expected[i]);
        assert_string_equal(e.messages[i], msg);
    }
    ej_daemon_config_fini(&d);
    ej_config_errors_fini(&e);
}

static void test_yaml_errors(void **state)
{
    (void)state;
    /* Syntax. */
    assert_yaml_error("regCenter:\n  namespace: a\n bad: [\n",
                      "jobs.yaml:3:2: YAML syntax error: did not find expected key (while parsing "
                      "a block mapping at line 1, column 1)");
    assert_yaml_error("a: b: c\n",
                      "jobs.yaml:1:5: YAML syntax error: mapping values are not allowed in this "
                      "context");
    assert_yaml_error("regCenter: {namespace: n}\n\xff\n",
                      "jobs.yaml:2:1: YAML syntax error: invalid leading UTF-8 octet");
    assert_yaml_error("regCenter: {namespace: n}\n---\nx: 1\n",
                      "jobs.yaml:3:1: only one YAML document is allowed");
    /* Shape. */
    assert_yaml_error("", "jobs.yaml:1:1: regCenter.namespace: is required");
    assert_yaml_error("- a\n",
                      "jobs.yaml:1:1: expected a mapping at the top level, got a sequence");
    assert_yaml_error("regCenter: {namespace: n}\nregcenter: 1\n",
                      "jobs.yaml:2:1: unknown top-level key \"regcenter\"");
    assert_yaml_error("regCenter: {namespace: n}\nregCenter: {namespace: m}\n",
                      "jobs.yaml:2:1: duplicate key \"regCenter\"");
    assert_yaml_error("regCenter: {namespace: n}\n? [a]\n: 1\n",
                      "jobs.yaml:2:3: keys must be plain strings, got a sequence");
    assert_yaml_error("regCenter: [1]\n", "jobs.yaml:1:12: regCenter: expected a mapping, got a "
                                          "sequence");
    assert_yaml_error("regCenter:\n", "jobs.yaml:1:1: regCenter.namespace: is required");
    assert_yaml_error("regCenter: {namespace: n}\njobs: [a]\n",
                      "jobs.yaml:2:7: jobs: expected a mapping of job name to job, got a "
                      "sequence");
    assert_yaml_error("regCenter: {namespace: n}\ntracing: 3\n",
                      "jobs.yaml:2:10: tracing: expected a mapping, got a scalar");
    /* regCenter. */
    assert_yaml_error("regCenter:\n  serverLists: a:1\n",
                      "jobs.yaml:1:1: regCenter.namespace: is required");
    assert_yaml_error("regCenter:\n  namespace: n\n  nameSpace: m\n",
                      "jobs.yaml:3:3: regCenter: unknown key \"nameSpace\"");
    assert_yaml_error("regCenter:\n  namespace: n\n  namespace: m\n",
                      "jobs.yaml:3:3: regCenter: duplicate key \"namespace\"");
    assert_yaml_error("regCenter:\n  namespace: [n]\n",
                      "jobs.yaml:2:14: regCenter.namespace: expected a string, got a sequence");
    assert_yaml_error("regCenter:\n  namespace: \"a\\0b\"\n",
                      "jobs.yaml:2:14: regCenter.namespace: must not contain NUL characters");
    assert_yaml_error("regCenter:\n  namespace: a//b\n",
                      "jobs.yaml:2:14: regCenter.namespace: must not have empty, \".\" or \"..\" "
                      "parts, got \"a//b\"");
    assert_yaml_error("regCenter:\n  namespace: a/../b\n",
                      "jobs.yaml:2:14: regCenter.namespace: must not have empty, \".\" or \"..\" "
                      "parts, got \"a/../b\"");
    assert_yaml_error("regCenter:\n  namespace: \"a b\"\n",
                      "jobs.yaml:2:14: regCenter.namespace: must not contain spaces or control "
                      "characters, got \"a b\"");
    assert_yaml_error("regCenter:\n  namespace: \"\"\n",
                      "jobs.yaml:2:14: regCenter.namespace: is required");
    assert_yaml_error("regCenter:\n  namespace: n\n  serverLists: \"\"\n",
                      "jobs.yaml:3:16: regCenter.serverLists: must not be empty (use \"embedded\" "
                      "or host:port)");
    assert_yaml_error("regCenter:\n  namespace: n\n  serverLists: a:1,,b\n",
                      "jobs.yaml:3:16: regCenter.serverLists: empty server in the list");
    assert_yaml_error("regCenter:\n  namespace: n\n  serverLists: a:0\n",
                      "jobs.yaml:3:16: regCenter.serverLists: server \"a:0\": port must be "
                      "1..65535");
    assert_yaml_error("regCenter:\n  namespace: n\n  serverLists: \"a b:1\"\n",
                      "jobs.yaml:3:16: regCenter.serverLists: server \"a b:1\" must not contain "
                      "spaces");
    assert_yaml_error("regCenter:\n  namespace: n\n  serverLists: \"[::1:2181\"\n",
                      "jobs.yaml:3:16: regCenter.serverLists: server \"[::1:2181\": missing ']'");
    assert_yaml_error("regCenter:\n  namespace: n\n  serverLists: \"[::1]x\"\n",
                      "jobs.yaml:3:16: regCenter.serverLists: server \"[::1]x\": port must be "
                      "1..65535");
    assert_yaml_error(
        "regCenter:\n  namespace: n\n  sessionTimeoutMilliseconds: 0\n",
        "jobs.yaml:3:31: regCenter.sessionTimeoutMilliseconds: must be 1000..3600000, got 0");
    assert_yaml_error("regCenter:\n  namespace: n\n  connectionTimeoutMilliseconds: -1\n",
                      "jobs.yaml:3:34: regCenter.connectionTimeoutMilliseconds: must be >= 1, "
                      "got -1");
    assert_yaml_error("regCenter:\n  namespace: n\n  baseSleepTimeMilliseconds: 0\n",
                      "jobs.yaml:3:30: regCenter.baseSleepTimeMilliseconds: must be >= 1, got 0");
    assert_yaml_error("regCenter:\n  namespace: n\n  maxSleepTimeMilliseconds: 10\n",
                      "jobs.yaml:3:29: regCenter.maxSleepTimeMilliseconds: must be >= "
                      "baseSleepTimeMilliseconds 1000, got 10");
    assert_yaml_error("regCenter:\n  namespace: n\n  maxRetries: -1\n",
                      "jobs.yaml:3:15: regCenter.maxRetries: must be 0..29, got -1");
    assert_yaml_error("regCenter:\n  namespace: n\n  takeoverMarginMilliseconds: -5\n",
                      "jobs.yaml:3:31: regCenter.takeoverMarginMilliseconds: must be 0 "
                      "(none)..600000, got -5");
    assert_yaml_error("regCenter:\n  namespace: n\n  takeoverMarginMilliseconds: 700000\n",
                      "jobs.yaml:3:31: regCenter.takeoverMarginMilliseconds: must be 0 "
                      "(none)..600000, got 700000");
    assert_yaml_error("regCenter:\n  namespace: n\n  maxRetries: 3.5\n",
                      "jobs.yaml:3:15: regCenter.maxRetries: expected an integer, got \"3.5\"");
    assert_yaml_error("regCenter:\n  namespace: n\n  maxRetries: 99999999999\n",
                      "jobs.yaml:3:15: regCenter.maxRetries: expected an integer, got "
                      "\"99999999999\"");
    assert_yaml_error("regCenter:\n  namespace: n\n  digest: nopassword\n",
                      "jobs.yaml:3:11: regCenter.digest: must be \"user:password\"");
    /* tracing. */
    assert_yaml_error("regCenter: {namespace: n}\ntracing:\n  url: x\n",
                      "jobs.yaml:2:1: tracing.type: is required (SQLITE, POSTGRESQL or NONE)");
    assert_yaml_error(
        "regCenter: {namespace: n}\ntracing:\n  type: MYSQL\n",
        "jobs.yaml:3:9: tracing.type: must be SQLITE, POSTGRESQL or NONE, got \"MYSQL\"");
    assert_yaml_error("regCenter: {namespace: n}\ntracing:\n  type: [x]\n",
                      "jobs.yaml:3:9: tracing.type: expected a string, got a sequence");
    assert_yaml_error("regCenter: {namespace: n}\ntracing:\n  type: POSTGRESQL\n",
                      "jobs.yaml:2:1: tracing.url: is required for POSTGRESQL");
    assert_yaml_error("regCenter: {namespace: n}\ntracing:\n  type: SQLITE\n  user: x\n",
                      "jobs.yaml:4:3: tracing: unknown key \"user\"");
    assert_yaml_error("regCenter: {namespace: n}\ntracing:\n  type: SQLITE\n  type: SQLITE\n",
                      "jobs.yaml:4:3: tracing: duplicate key \"type\"");
}

/* metrics: {listen}: kept as given when the listen parser takes it;
 * otherwise that parser's own words, at the value. */
static void test_yaml_metrics(void **state)
{
    (void)state;
    struct ej_daemon_config d;
    struct ej_config_errors e;
    assert_int_equal(
        load_yaml("regCenter: {namespace: n}\nmetrics:\n  listen: 127.0.0.1:9464\n", &d, &e), 0);
    assert_string_equal(d.metrics.listen, "127.0.0.1:9464");
    ej_daemon_config_fini(&d);
    ej_config_errors_fini(&e);
    static const char *const good[] = {"':0'", "'[::1]:9464'", "localhost:80", "0.0.0.0:65535"};
    for (size_t i = 0; i < sizeof good / sizeof good[0]; i++) {
        char text[200];
        snprintf(text, sizeof text, "regCenter: {namespace: n}\nmetrics: {listen: %s}\n", good[i]);
        if (load_yaml(text, &d, &e) != 0) {
            dump_errors(&e);
            fail_msg("refused: %s", good[i]);
        }
        assert_non_null(d.metrics.listen);
        ej_daemon_config_fini(&d);
        ej_config_errors_fini(&e);
    }
    /* Not given, "metrics:" alone, or an empty listen: no endpoint. */
    static const char *const none[] = {"regCenter: {namespace: n}\n",
                                       "regCenter: {namespace: n}\nmetrics:\n",
                                       "regCenter: {namespace: n}\nmetrics: {listen: }\n"};
    for (size_t i = 0; i < sizeof none / sizeof none[0]; i++) {
        assert_int_equal(load_yaml(none[i], &d, &e), 0);
        assert_null(d.metrics.listen);
        ej_daemon_config_fini(&d);
        ej_config_errors_fini(&e);
    }

    assert_yaml_error("regCenter: {namespace: n}\nmetrics:\n  listen: example.com:80\n",
                      "jobs.yaml:3:11: metrics.listen: \"example.com:80\": \"example.com\" is not "
                      "an IPv4 address (names other than localhost are not looked up)");
    assert_yaml_error("regCenter: {namespace: n}\nmetrics:\n  listen: 127.0.0.1\n",
                      "jobs.yaml:3:11: metrics.listen: \"127.0.0.1\": expected HOST:PORT");
    assert_yaml_error("regCenter: {namespace: n}\nmetrics:\n  listen: 127.0.0.1:65536\n",
                      "jobs.yaml:3:11: metrics.listen: \"127.0.0.1:65536\": port must be a number "
                      "0..65535");
    assert_yaml_error("regCenter: {namespace: n}\nmetrics:\n  listen: '::1:80'\n",
                      "jobs.yaml:3:11: metrics.listen: \"::1:80\": write an IPv6 address in "
                      "brackets, [ADDR]:PORT");
    assert_yaml_error("regCenter: {namespace: n}\nmetrics:\n  listen: [1, 2]\n",
                      "jobs.yaml:3:11: metrics.listen: expected a string, got a sequence");
    assert_yaml_error("regCenter: {namespace: n}\nmetrics:\n  listen: :9464\n  port: 9464\n",
                      "jobs.yaml:4:3: metrics: unknown key \"port\"");
    assert_yaml_error("regCenter: {namespace: n}\nmetrics:\n  listen: :1\n  listen: :2\n",
                      "jobs.yaml:4:3: metrics: duplicate key \"listen\"");
    assert_yaml_error("regCenter: {namespace: n}\nmetrics: 127.0.0.1:9464\n",
                      "jobs.yaml:2:10: metrics: expected a mapping, got a scalar");
    assert_yaml_error("regCenter: {namespace: n}\nmetrics: {}\nmetrics: {}\n",
                      "jobs.yaml:3:1: duplicate key \"metrics\"");
    /* Every other problem of the file is still reported with it. */
    assert_int_equal(load_yaml("regCenter: {namespace: n}\nmetrics: {listen: x, y: 1}\n"
                               "tracing: {type: MYSQL}\n",
                               &d, &e),
                     EJ_ECONFIG);
    assert_int_equal(e.count, 3);
    assert_string_equal(e.messages[0], "jobs.yaml:2:19: metrics.listen: \"x\": expected HOST:PORT");
    assert_string_equal(e.messages[1], "jobs.yaml:2:22: metrics: unknown key \"y\"");
    ej_daemon_config_fini(&d);
    ej_config_errors_fini(&e);
}

/* log: {level, format}: the words of --log-level and --log-format; -1
 * when not given; anything else refused at the value. */
static void test_yaml_log(void **state)
{
    (void)state;
    struct ej_daemon_config d;
    struct ej_config_errors e;
    assert_int_equal(load_yaml("regCenter: {namespace: n}\n", &d, &e), 0);
    assert_int_equal(d.log.level, -1);
    assert_int_equal(d.log.format, -1);
    ej_daemon_config_fini(&d);
    ej_config_errors_fini(&e);
    assert_int_equal(
        load_yaml("regCenter: {namespace: n}\nlog:\n  level: debug\n  format: json\n", &d, &e), 0);
    assert_int_equal(d.log.level, EJ_LOG_DEBUG);
    assert_int_equal(d.log.format, EJ_LOG_JSON);
    ej_daemon_config_fini(&d);
    ej_config_errors_fini(&e);
    static const struct {
        const char *text;
        int level, format;
    } good[] = {{"log: {level: WARN}", EJ_LOG_WARN, -1},
                {"log: {level: warning, format: text}", EJ_LOG_WARN, EJ_LOG_TEXT},
                {"log: {level: error}", EJ_LOG_ERROR, -1},
                {"log: {level: info}", EJ_LOG_INFO, -1},
                {"log: {level: }", -1, -1},
                {"log:", -1, -1}};
    for (size_t i = 0; i < sizeof good / sizeof good[0]; i++) {
        char text[200];
        snprintf(text, sizeof text, "regCenter: {namespace: n}\n%s\n", good[i].text);
        if (load_yaml(text, &d, &e) != 0) {
            dump_errors(&e);
            fail_msg("refused: %s", good[i].text);
        }
        assert_int_equal(d.log.level, good[i].level);
        assert_int_equal(d.log.format, good[i].format);
        ej_daemon_config_fini(&d);
        ej_config_errors_fini(&e);
    }
    assert_yaml_error("regCenter: {namespace: n}\nlog:\n  level: verbose\n",
                      "jobs.yaml:3:10: log.level: must be debug, info, warn or error, got "
                      "\"verbose\"");
    assert_yaml_error("regCenter: {namespace: n}\nlog: {level: off}\n",
                      "jobs.yaml:2:14: log.level: must be debug, info, warn or error, got \"off\"");
    assert_yaml_error("regCenter: {namespace: n}\nlog: {format: xml}\n",
                      "jobs.yaml:2:15: log.format: must be text or json, got \"xml\"");
    assert_yaml_error("regCenter: {namespace: n}\nlog: {level: [debug]}\n",
                      "jobs.yaml:2:14: log.level: expected a string, got a sequence");
    assert_yaml_error("regCenter: {namespace: n}\nlog: {levels: debug}\n",
                      "jobs.yaml:2:7: log: unknown key \"levels\"");
    assert_yaml_error("regCenter: {namespace: n}\nlog: {level: info, level: debug}\n",
                      "jobs.yaml:2:20: log: duplicate key \"level\"");
    assert_yaml_error("regCenter: {namespace: n}\nlog: debug\n",
                      "jobs.yaml:2:6: log: expected a mapping, got a scalar");
}

static void test_yaml_job_errors(void **state)
{
    (void)state;
    assert_yaml_error(YAML_HEAD "    cron: 0 * * * * ?\n    props: {script.command.line: x}\n",
                      "jobs.yaml:4:3: jobs.j.shardingTotalCount: is required");
    assert_yaml_error(YAML_HEAD "    shardingTotalCount: 1\n    props: {script.command.line: x}\n",
                      "jobs.yaml:4:3: jobs.j.cron: is required");
    assert_yaml_error(YAML_HEAD "    cron: 0 * * * * ?\n    shardingTotalCount: 1\n",
                      "jobs.yaml:4:3: jobs.j.props.script.command.line: is required for SCRIPT "
                      "jobs");
    assert_yaml_error(YAML_HEAD "    elasticJobType: HTTP\n    cron: 0 * * * * ?\n"
                                "    shardingTotalCount: 1\n",
                      "jobs.yaml:4:3: jobs.j.props.http.uri: is required for HTTP jobs");
    assert_yaml_error(YAML_HEAD "    elasticJobType: SIMPLE\n    cron: 0 * * * * ?\n"
                                "    shardingTotalCount: 1\n",
                      "jobs.yaml:5:21: jobs.j.elasticJobType: must be SCRIPT or HTTP in the "
                      "daemon, got \"SIMPLE\"");
    assert_yaml_error(YAML_HEAD "    elasticJobType: [SCRIPT]\n    cron: 0 * * * * ?\n"
                                "    shardingTotalCount: 1\n",
                      "jobs.yaml:5:21: jobs.j.elasticJobType: expected SCRIPT or HTTP, got a "
                      "sequence");
    assert_yaml_error(YAML_HEAD "    cron: 0 * * * * ?\n    shardingTotalCount: 0\n"
                                "    props: {script.command.line: x}\n",
                      "jobs.yaml:6:25: jobs.j.shardingTotalCount: must be >= 1, got 0");
    assert_yaml_error(YAML_HEAD "    cron: 0 * * * * ?\n    shardingTotalCount: 1\n"
                                "    failover: yes\n    props: {script.command.line: x}\n",
                      "jobs.yaml:7:15: jobs.j.failover: expected true or false, got \"yes\"");
    assert_yaml_error(YAML_HEAD "    cron: 0 * * * * ?\n    shardingTotalCount: 1\n"
                                "    misfire: {}\n    props: {script.command.line: x}\n",
                      "jobs.yaml:7:14: jobs.j.misfire: expected true or false, got a mapping");
    assert_yaml_error(YAML_HEAD "    cron: 0 * * * * ?\n    shardingTotalCount: 1\n"
                                "    cron: 1 * * * * ?\n    props: {script.command.line: x}\n",
                      "jobs.yaml:7:5: jobs.j: duplicate key \"cron\"");
    assert_yaml_error(YAML_HEAD "    cron: 0 * * * * ?\n    shardingTotalCount: 1\n"
                                "    props: {script.command.line: x, script.command.line: y}\n",
                      "jobs.yaml:7:37: jobs.j.props: duplicate key \"script.command.line\"");
    assert_yaml_error(YAML_HEAD "    cron: 0 * * * * ?\n    shardingTotalCount: 1\n"
                                "    props: {script.command.line: x, http.uri: 'http://a/'}\n",
                      "jobs.yaml:4:3: jobs.j.props: http.uri does not apply to SCRIPT jobs");
    assert_yaml_error(YAML_HEAD "    elasticJobType: HTTP\n    cron: 0 * * * * ?\n"
                                "    shardingTotalCount: 1\n"
                                "    props: {script.command.line: x, http.uri: 'http://a/'}\n",
                      "jobs.yaml:4:3: jobs.j.props: script.command.line does not apply to HTTP "
                      "jobs");
    assert_yaml_error(YAML_HEAD "    cron: 0 * * * * ?\n    shardingTotalCount: 1\n"
                                "    props: [script.command.line]\n",
                      "jobs.yaml:7:12: jobs.j.props: expected a mapping, got a sequence");
    assert_yaml_error(YAML_HEAD "    cron: 0 * * * * ?\n    shardingTotalCount: 1\n"
                                "    props: {script.command.line: x, script.timeout.milliseconds: "
                                "-5}\n",
                      "jobs.yaml:7:66: jobs.j.props.script.timeout.milliseconds: must be >= 0, "
                      "got -5");
    assert_yaml_error(YAML_HEAD "    cron: 0 * * * * ?\n    shardingTotalCount: 1\n"
                                "    timeoutSeconds: -3\n"
                                "    props: {script.command.line: x}\n",
                      "jobs.yaml:7:21: jobs.j.timeoutSeconds: must be 0 (none) to 31536000, "
                      "got -3");
    assert_yaml_error(YAML_HEAD "    cron: 0 * * * * ?\n    shardingTotalCount: 1\n"
                                "    timeoutSeconds: 2\n"
                                "    props: {script.command.line: x, script.timeout.milliseconds: "
                                "5000}\n",
                      "jobs.yaml:7:21: jobs.j.timeoutSeconds: 2 s disagrees with its alias "
                      "scriptTimeoutMilliseconds (5000 ms): set one");
    assert_yaml_error(YAML_HEAD "    cron: 0 * * * * ?\n    shardingTotalCount: 1\n"
                                "    misfirePolicy: CATCH_UP\n"
                                "    props: {script.command.line: x}\n",
                      "jobs.yaml:7:20: jobs.j.misfirePolicy: CATCH_UP needs catchUpWindowSeconds "
                      "(1 to 86400)");
    assert_yaml_error(YAML_HEAD "    cron: 0 * * * * ?\n    shardingTotalCount: 1\n"
                                "    overlapPolicy: ALLOW\n"
                                "    props: {script.command.line: x}\n",
                      "jobs.yaml:7:20: jobs.j.overlapPolicy: must be QUEUE, SKIP or REPLACE, got "
                      "\"ALLOW\"");
    assert_yaml_error(YAML_HEAD "    cron: 0 * * * * ?\n    shardingTotalCount: 1\n"
                                "    retry: {maxAttempts: 3, multiplier: 0}\n"
                                "    props: {script.command.line: x}\n",
                      "jobs.yaml:7:41: jobs.j.retry.multiplier: must be an integer 1 to 10, got 0");
    assert_yaml_error(YAML_HEAD "    cron: 0 * * * * ?\n    shardingTotalCount: 1\n"
                                "    retry: {maxAttempts: 3, backoff: 1}\n"
                                "    props: {script.command.line: x}\n",
                      "jobs.yaml:7:29: jobs.j.retry: unknown key \"backoff\"");
    assert_yaml_error(YAML_HEAD "    cron: 0 * * * * ?\n    shardingTotalCount: 1\n"
                                "    timeoutGraceSeconds: 7200\n"
                                "    props: {script.command.line: x}\n",
                      "jobs.yaml:7:26: jobs.j.timeoutGraceSeconds: must be 0 (2 s) to 3600, "
                      "got 7200");
    assert_yaml_error(YAML_HEAD "    cron: 0 * * * * ?\n    shardingTotalCount: 1\n"
                                "    props: {script.command.line: x, script.timeout.milliseconds: "
                                "soon}\n",
                      "jobs.yaml:7:66: jobs.j.props.script.timeout.milliseconds: expected an "
                      "integer, got \"soon\"");
    assert_yaml_error(YAML_HEAD
                      "    elasticJobType: http\n    cron: 0 * * * * ?\n"
                      "    shardingTotalCount: 1\n"
                      "    props:\n      http.uri: 'http://a/'\n      http.method: fetch\n",
                      "jobs.yaml:10:20: jobs.j.props.http.method: must be one of GET, POST, PUT, "
                      "DELETE, PATCH, HEAD, OPTIONS, got \"FETCH\"");
    assert_yaml_error(YAML_HEAD "    elasticJobType: HTTP\n    cron: 0 * * * * ?\n"
                                "    shardingTotalCount: 1\n"
                                "    props:\n      http.uri: 'http://a/'\n"
                                "      http.read.timeout.milliseconds: 0\n",
                      "jobs.yaml:10:39: jobs.j.props.http.read.timeout.milliseconds: must be >= "
                      "1, got 0");
    assert_yaml_error(YAML_HEAD "    elasticJobType: HTTP\n    cron: 0 * * * * ?\n"
                                "    shardingTotalCount: 1\n"
                                "    props:\n      http.uri: 'http://a/'\n"
                                "      http.connect.timeout.milliseconds: x\n",
                      "jobs.yaml:10:42: jobs.j.props.http.connect.timeout.milliseconds: expected "
                      "an integer, got \"x\"");
    assert_yaml_error(YAML_HEAD "    elasticJobType: HTTP\n    cron: 0 * * * * ?\n"
                                "    shardingTotalCount: 1\n"
                                "    props:\n      http.uri: 'mailto:x'\n",
                      "jobs.yaml:9:17: jobs.j.props.http.uri: must start with http:// or "
                      "https://, got \"mailto:x\"");
    assert_yaml_error(YAML_HEAD "    cron: 0 * * * * ?\n    shardingTotalCount: 2\n"
                                "    shardingItemParameters: 0=a,1\n"
                                "    props: {script.command.line: x}\n",
                      "jobs.yaml:7:29: jobs.j.shardingItemParameters: Sharding item parameters "
                      "'0=a,1' format error, should be int=xx,int=xx");
    assert_yaml_error(YAML_HEAD "    cron: 0 * * * * ?\n    shardingTotalCount: 1\n"
                                "    maxTimeDiffSeconds: -7\n    props: {script.command.line: x}\n",
                      "jobs.yaml:7:25: jobs.j.maxTimeDiffSeconds: must be -1 or >= 0, got -7");
    assert_yaml_error(YAML_HEAD "    cron: 0 * * * * ?\n    shardingTotalCount: 1\n"
                                "    reconcileIntervalMinutes: often\n"
                                "    props: {script.command.line: x}\n",
                      "jobs.yaml:7:31: jobs.j.reconcileIntervalMinutes: expected an integer, got "
                      "\"often\"");
    assert_yaml_error(YAML_HEAD "    cron: 0 * * * * ?\n    shardingTotalCount: 1\n"
                                "    description: [a]\n    props: {script.command.line: x}\n",
                      "jobs.yaml:7:18: jobs.j.description: expected a string, got a sequence");
    assert_yaml_error("regCenter: {namespace: n}\njobs:\n  \"a b\":\n    cron: 0 * * * * ?\n"
                      "    shardingTotalCount: 1\n    props: {script.command.line: x}\n",
                      "jobs.yaml:3:3: jobs.a b: job name must match [A-Za-z0-9_.-]+, got \"a b\"");
    assert_yaml_error("regCenter: {namespace: n}\njobs:\n  a: 3\n",
                      "jobs.yaml:3:6: jobs.a: expected a mapping, got a scalar");
    assert_yaml_error("regCenter: {namespace: n}\njobs:\n  a:\n",
                      "jobs.yaml:3:3: jobs.a: expected a mapping, got nothing");
    assert_yaml_error("regCenter: {namespace: n}\njobs:\n  a: &x\n    cron: 0 * * * * ?\n"
                      "    shardingTotalCount: 1\n    props: {script.command.line: x}\n"
                      "  a: *x\n",
                      "jobs.yaml:7:3: jobs: duplicate job \"a\"");
    /* Several problems in one job are all reported, in file order; a value
     * that failed to parse is not reported again by validation. */
    struct ej_daemon_config d;
    struct ej_config_errors e;
    assert_int_equal(load_yaml(YAML_HEAD "    cron: ''\n    shardingTotalCount: x\n"
                                         "    shardingItemParameters: 9=a\n    monitorPort: 1e9\n"
                                         "    timeZone: Europe/Nowhere\n",
                               &d, &e),
                     EJ_ECONFIG);
    static const char *const expected[] = {
        "jobs.yaml:4:3: jobs.j.props.script.command.line: is required for SCRIPT jobs",
        "jobs.yaml:5:11: jobs.j.cron: is required",
        "jobs.yaml:6:25: jobs.j.shardingTotalCount: expected an integer, got \"x\"",
        "jobs.yaml:8:18: jobs.j.monitorPort: expected an integer, got \"1e9\"",
        "jobs.yaml:9:15: jobs.j.timeZone: unknown time zone \"Europe/Nowhere\"",
    };
    if (e.count != 5)
        dump_errors(&e);
    assert_int_equal(e.count, 5);
    for (size_t i = 0; i < 5; i++)
        assert_string_equal(e.messages[i], expected[i]);
    ej_config_errors_fini(&e);
}

static void test_yaml_limits_and_files(void **state)
{
    (void)state;
    struct ej_daemon_config d;
    struct ej_config_errors e;

    /* Too many errors: the list stops with a note. */
    size_t cap = 64 * 1024;
    char *buf = malloc(cap);
    size_t n = (size_t)sprintf(buf, "regCenter:\n  namespace: n\n");
    for (int i = 0; i < 300; i++)
        n += (size_t)sprintf(buf + n, "bad%d: 1\n", i);
    assert_int_equal(load_yaml(buf, &d, &e), EJ_ECONFIG);
    assert_int_equal(e.count, EJ_CONFIG_MAX_ERRORS);
    assert_string_equal(e.messages[0], "jobs.yaml:3:1: unknown top-level key \"bad0\"");
    assert_string_equal(e.messages[EJ_CONFIG_MAX_ERRORS - 1],
                        "too many errors; the rest are not shown");
    ej_config_errors_fini(&e);

    /* An alias bomb stays cheap and is refused. */
    n = (size_t)sprintf(buf, "regCenter: {namespace: n}\nx0: &a0 {");
    for (int k = 0; k < 2500; k++)
        n += (size_t)sprintf(buf + n, "%sk%d: 1", k ? ", " : "", k);
    n += (size_t)sprintf(buf + n, "}\njobs:\n");
    for (int j = 0; j < 1000; j++)
        n += (size_t)sprintf(buf + n, "  j%d: *a0\n", j);
    assert_true(n < cap);
    assert_int_equal(load_yaml(buf, &d, &e), EJ_ECONFIG);
    assert_int_equal(e.count, 1);
    assert_non_null(strstr(e.messages[0], ": document too complex: more than 2000000 mapping "
                                          "entries after aliases"));
    ej_config_errors_fini(&e);

    /* More aliases than the limit: refused before the document is built. */
    n = (size_t)sprintf(buf, "regCenter: {namespace: n}\nx0: &a0 {k: 1}\njobs:\n");
    for (int j = 0; j < 1001; j++)
        n += (size_t)sprintf(buf + n, "  j%d: *a0\n", j);
    assert_int_equal(load_yaml(buf, &d, &e), EJ_ECONFIG);
    assert_int_equal(e.count, 1);
    assert_string_equal(e.messages[0], "jobs.yaml:1004:10: more than 1000 aliases");
    ej_config_errors_fini(&e);

    /* Nesting: 200,000 levels are refused at level 65 (the top mapping is 1), at once. */
    free(buf);
    cap = 500000;
    buf = malloc(cap);
    n = (size_t)sprintf(buf, "regCenter: {namespace: n}\njobs: ");
    memset(buf + n, '[', 200000);
    memset(buf + n + 200000, ']', 200000);
    buf[n + 400000] = '\0';
    int64_t t0 = mono_ms();
    assert_int_equal(load_yaml(buf, &d, &e), EJ_ECONFIG);
    assert_true(mono_ms() - t0 < 2000); /* quadratic before: minutes */
    assert_int_equal(e.count, 1);
    assert_string_equal(e.messages[0], "jobs.yaml:2:70: nested deeper than 64 levels");
    ej_config_errors_fini(&e);

    /* Too many jobs. */
    free(buf);
    cap = 400000;
    buf = malloc(cap);
    n = (size_t)sprintf(buf, "regCenter: {namespace: n}\njobs:\n");
    for (int j = 0; j <= EJ_CONFIG_MAX_DAEMON_JOBS; j++)
        n += (size_t)sprintf(buf + n, "  j%d: {}\n", j);
    assert_int_equal(load_yaml(buf, &d, &e), EJ_ECONFIG);
    assert_has_message(&e, "jobs.yaml:3:3: jobs: defines 10001 jobs, more than the limit of 10000");
    ej_config_errors_fini(&e);
    free(buf);

    /* Files. */
    ej_config_errors_init(&e);
    assert_int_equal(ej_daemon_config_load_file("/nonexistent/ejob.yaml", &d, &e), -ENOENT);
    assert_int_equal(e.count, 1);
    assert_string_equal(e.messages[0],
                        "/nonexistent/ejob.yaml: cannot open: No such file or directory");
    ej_config_errors_fini(&e);
    assert_int_equal(ej_daemon_config_load_file("/tmp", &d, &e), EJ_ECONFIG);
    assert_string_equal(e.messages[0], "/tmp: not a regular file");
    ej_config_errors_fini(&e);
    /* NULL errs is allowed; the code still says what happened. */
    assert_int_equal(ej_daemon_config_load_string("x: [", "f", &d, NULL), EJ_ECONFIG);
    assert_int_equal(ej_daemon_config_load_string(NULL, "f", &d, NULL), EJ_EINVAL);
    assert_int_equal(ej_daemon_config_load_string("a: 1", "f", NULL, NULL), EJ_EINVAL);
    assert_int_equal(ej_daemon_config_load_file(NULL, &d, NULL), EJ_EINVAL);
    /* A name defaults to "<string>". */
    ej_config_errors_init(&e);
    assert_int_equal(ej_daemon_config_load_string("", NULL, &d, &e), EJ_ECONFIG);
    assert_string_equal(e.messages[0], "<string>:1:1: regCenter.namespace: is required");
    ej_config_errors_fini(&e);
    ej_config_errors_fini(NULL);
    ej_daemon_config_fini(NULL);
    assert_int_equal(ej_daemon_config_init(NULL), EJ_EINVAL);
}

/* ------------------------------------------------------------------------ */
/* the field table (src/config/fields.h)                                     */
/* ------------------------------------------------------------------------ */

/* A job type for which field f counts. */
static ej_job_type type_of_field(const struct ej__cfg_field_desc *f)
{
    return f->scope == EJ_CFG_S_ANY ? EJ_JOB_TYPE_SIMPLE : (ej_job_type)f->scope;
}

/* Give f a value that is neither its default nor what a JSON without its
 * key reads (a BOOL has two values: the caller also tries the default). */
static void set_other_value(struct ej_job_config *c, const struct ej__cfg_field_desc *f)
{
    char **p;
    switch (f->type) {
    case EJ_CFG_T_STR:
    case EJ_CFG_T_CLASS:
        assert_int_equal(ej_job_config_set_str(ej__config_field_strp(c, f), "other <&> value"), 0);
        break;
    case EJ_CFG_T_OBJ:
        p = ej__config_field_strp(c, f);
        free(*p);
        *p = strdup("{\"zz\":\"v\",\"n\":[1,2.5]}");
        assert_non_null(*p);
        break;
    case EJ_CFG_T_INT:
        ej__config_field_set_num(c, f, f->def_num + 7);
        break;
    case EJ_CFG_T_INT64:
        ej__config_field_set_num(c, f, f->def_num + (1LL << 40));
        break;
    case EJ_CFG_T_BOOL:
        ej__config_field_set_num(c, f, !f->def_num);
        break;
    case EJ_CFG_T_TYPE:
        ej__config_field_set_num(
            c, f, f->def_num == EJ_JOB_TYPE_HTTP ? EJ_JOB_TYPE_SIMPLE : EJ_JOB_TYPE_HTTP);
        break;
    }
}

/* to_json, from_json into a fresh config, equal. */
static void assert_field_round_trip(const struct ej_job_config *c,
                                    const struct ej__cfg_field_desc *f)
{
    struct ej_job_config back;
    char err[256];
    char *json = ej_job_config_to_json(c);
    assert_non_null(json);
    assert_int_equal(ej_job_config_init(&back), 0);
    if (ej_job_config_from_json(json, strlen(json), &back, err, sizeof(err)) != 0)
        fail_msg("%s: from_json: %s", f->name, err);
    if (!ej_job_config_equal(c, &back))
        fail_msg("%s: lost in to_json/from_json: %s", f->name, json);
    free(json);
    ej_job_config_fini(&back);
}

static bool json_has_key(const struct ej_job_config *c, const char *key)
{
    char quoted[128];
    char *json = ej_job_config_to_json(c);
    assert_non_null(json);
    snprintf(quoted, sizeof(quoted), "\"%s\":", key);
    bool has = strstr(json, quoted) != NULL;
    free(json);
    return has;
}

/* Every field through every path: init's default is the table's, a value
 * survives to_json/from_json, copy keeps it, equal sees a change of it, and
 * a field of another job type is neither written nor compared. A path that
 * leaves a field out fails here, naming the field. */
static void test_field_table_every_path(void **state)
{
    (void)state;
    for (int i = 0; i < EJ_CFG_F_COUNT_; i++) {
        const struct ej__cfg_field_desc *f = &ej__cfg_fields[i];
        struct ej_job_config a, b;
        assert_int_equal((int)(f - ej__cfg_fields), i);
        assert_string_equal(ej__config_field_json_name((enum ej__cfg_field)i), f->name);

        /* The default after init is the table's. */
        assert_int_equal(ej_job_config_init(&a), 0);
        if (f->type == EJ_CFG_T_STR || f->type == EJ_CFG_T_CLASS) {
            if (ej__config_field_str(&a, f) == NULL)
                fail_msg("%s: NULL after init", f->name);
            assert_string_equal(ej__config_field_str(&a, f), f->def_str);
        } else if (f->type == EJ_CFG_T_OBJ) {
            assert_null(ej__config_field_str(&a, f));
        } else if (ej__config_field_num(&a, f) != f->def_num) {
            fail_msg("%s: init gives %lld, the table %lld", f->name, ej__config_field_num(&a, f),
                     f->def_num);
        }
        assert_true(ej__config_field_is_default(&a, f));

        /* In a job of its type: the default and another value round-trip. */
        a.job_type = type_of_field(f);
        assert_field_round_trip(&a, f);
        /* ejob's own keys stay out of a job that does not use them. */
        if (f->where == EJ_CFG_W_SET && json_has_key(&a, f->key))
            fail_msg("%s: written with its default", f->name);
        set_other_value(&a, f);
        assert_false(ej__config_field_is_default(&a, f));
        assert_field_round_trip(&a, f);
        if (f->where != EJ_CFG_W_REST && !json_has_key(&a, f->key))
            fail_msg("%s: not written", f->name);

        /* copy keeps it, in memory of its own. */
        assert_int_equal(ej_job_config_copy(&b, &a), 0);
        if (!ej_job_config_equal(&a, &b))
            fail_msg("%s: lost by copy", f->name);
        if (f->type == EJ_CFG_T_STR || f->type == EJ_CFG_T_CLASS || f->type == EJ_CFG_T_OBJ)
            assert_ptr_not_equal(ej__config_field_str(&a, f), ej__config_field_str(&b, f));
        ej_job_config_fini(&b);

        ej_job_config_fini(&a);

        /* equal sees a change of this field alone. */
        assert_int_equal(ej_job_config_init(&a), 0);
        a.job_type = type_of_field(f);
        assert_int_equal(ej_job_config_copy(&b, &a), 0);
        assert_true(ej_job_config_equal(&a, &b));
        set_other_value(&b, f);
        if (ej_job_config_equal(&a, &b))
            fail_msg("%s: a change of it is not seen by equal", f->name);
        ej_job_config_fini(&b);

        /* In a job of another type a typed field neither counts nor shows
         * (no field belongs to SIMPLE alone). */
        if (f->scope != EJ_CFG_S_ANY) {
            assert_int_not_equal(f->scope, EJ_JOB_TYPE_SIMPLE);
            a.job_type = EJ_JOB_TYPE_SIMPLE;
            assert_int_equal(ej_job_config_copy(&b, &a), 0);
            set_other_value(&b, f);
            if (!ej_job_config_equal(&a, &b))
                fail_msg("%s: counts outside its job type", f->name);
            if (json_has_key(&b, f->key))
                fail_msg("%s: written outside its job type", f->name);
            ej_job_config_fini(&b);
        }
        ej_job_config_fini(&a);
    }
}

/* The table against struct ej_job_config: keys and members unique, and no
 * member of a pointer's size or more without a row (a gap between rows is
 * padding only, shorter than the next row's alignment). */
static void test_field_table_covers_struct(void **state)
{
    (void)state;
    unsigned char owner[sizeof(struct ej_job_config)];
    memset(owner, 0xff, sizeof(owner));
    for (int i = 0; i < EJ_CFG_F_COUNT_; i++) {
        const struct ej__cfg_field_desc *f = &ej__cfg_fields[i];
        size_t size = f->type == EJ_CFG_T_INT     ? sizeof(int)
                      : f->type == EJ_CFG_T_INT64 ? sizeof(int64_t)
                      : f->type == EJ_CFG_T_BOOL  ? sizeof(bool)
                      : f->type == EJ_CFG_T_TYPE  ? sizeof(ej_job_type)
                                                  : sizeof(char *);
        assert_true(f->off + size <= sizeof(owner));
        for (size_t k = f->off; k < f->off + size; k++) {
            if (owner[k] != 0xff)
                fail_msg("%s overlaps %s", f->name, ej__cfg_fields[owner[k]].name);
            owner[k] = (unsigned char)i;
        }
        for (int j = 0; j < i; j++) {
            const struct ej__cfg_field_desc *g = &ej__cfg_fields[j];
            if ((f->where == EJ_CFG_W_PROP) == (g->where == EJ_CFG_W_PROP) &&
                strcmp(f->key, g->key) == 0)
                fail_msg("key %s twice", f->key);
        }
    }
    size_t gap = 0;
    for (size_t k = 0; k < sizeof(owner); k++) {
        gap = owner[k] == 0xff ? gap + 1 : 0;
        if (gap >= sizeof(char *))
            fail_msg("bytes %zu..%zu of struct ej_job_config have no row in fields.h", k + 1 - gap,
                     k);
    }
}

/* The daemon file's job keys, as docs/configuration.md lists them: the
 * yaml column of fields.h must give exactly these, each to its field. */
static const struct {
    const char *yaml;
    enum ej__cfg_field field;
} documented_yaml_keys[] = {
    {"elasticJobType", EJ_CFG_F_JOB_TYPE},
    {"cron", EJ_CFG_F_CRON},
    {"timeZone", EJ_CFG_F_TIME_ZONE},
    {"shardingTotalCount", EJ_CFG_F_SHARDING_TOTAL_COUNT},
    {"shardingItemParameters", EJ_CFG_F_SHARDING_ITEM_PARAMETERS},
    {"jobParameter", EJ_CFG_F_JOB_PARAMETER},
    {"failover", EJ_CFG_F_FAILOVER},
    {"misfire", EJ_CFG_F_MISFIRE},
    {"monitorExecution", EJ_CFG_F_MONITOR_EXECUTION},
    {"maxTimeDiffSeconds", EJ_CFG_F_MAX_TIME_DIFF_SECONDS},
    {"monitorPort", EJ_CFG_F_MONITOR_PORT},
    {"reconcileIntervalMinutes", EJ_CFG_F_RECONCILE_INTERVAL_MINUTES},
    {"jobShardingStrategyType", EJ_CFG_F_JOB_SHARDING_STRATEGY_CLASS},
    {"description", EJ_CFG_F_DESCRIPTION},
    {"disabled", EJ_CFG_F_DISABLED},
    {"overwrite", EJ_CFG_F_OVERWRITE},
    {"props.script.command.line", EJ_CFG_F_SCRIPT_COMMAND_LINE},
    {"props.script.timeout.milliseconds", EJ_CFG_F_SCRIPT_TIMEOUT},
    {"timeoutSeconds", EJ_CFG_F_TIMEOUT_SECONDS},
    {"timeoutGraceSeconds", EJ_CFG_F_TIMEOUT_GRACE_SECONDS},
    {"retry.maxAttempts", EJ_CFG_F_RETRY_MAX_ATTEMPTS},
    {"retry.initialBackoffSeconds", EJ_CFG_F_RETRY_INITIAL_BACKOFF_SECONDS},
    {"retry.multiplier", EJ_CFG_F_RETRY_MULTIPLIER},
    {"retry.maxBackoffSeconds", EJ_CFG_F_RETRY_MAX_BACKOFF_SECONDS},
    {"retry.jitter", EJ_CFG_F_RETRY_JITTER},
    {"overlapPolicy", EJ_CFG_F_OVERLAP_POLICY},
    {"startingDeadlineSeconds", EJ_CFG_F_STARTING_DEADLINE_SECONDS},
    {"misfirePolicy", EJ_CFG_F_MISFIRE_POLICY},
    {"catchUpWindowSeconds", EJ_CFG_F_CATCH_UP_WINDOW_SECONDS},
    {"props.http.uri", EJ_CFG_F_HTTP_URI},
    {"props.http.method", EJ_CFG_F_HTTP_METHOD},
    {"props.http.data", EJ_CFG_F_HTTP_DATA},
    {"props.http.connect.timeout.milliseconds", EJ_CFG_F_HTTP_CONNECT_TIMEOUT},
    {"props.http.read.timeout.milliseconds", EJ_CFG_F_HTTP_READ_TIMEOUT},
    {"props.http.content.type", EJ_CFG_F_HTTP_CONTENT_TYPE},
    {"tracing.retentionDays", EJ_CFG_F_TRACING_RETENTION_DAYS},
    {"tracing.failedRetentionDays", EJ_CFG_F_TRACING_FAILED_RETENTION_DAYS},
};

/* A job's own retention: -1, 0 or days up to 36500, both named when bad,
 * and kept in the config node only when set. */
static void test_job_retention_fields(void **state)
{
    (void)state;
    struct ej_job_config c;
    assert_int_equal(ej_job_config_init(&c), 0);
    ej_job_config_set_str(&c.job_name, "retJob");
    ej_job_config_set_str(&c.cron, "0 * * * * ?");
    assert_int_equal(c.tracing.retention_days, -1);
    assert_int_equal(c.tracing.failed_retention_days, -1);
    char *json = ej_job_config_to_json(&c);
    assert_non_null(json);
    assert_null(strstr(json, "Retention"));
    free(json);
    c.tracing.retention_days = 30;
    c.tracing.failed_retention_days = 0;
    assert_int_equal(ej_job_config_validate(&c, NULL, 0), 0);
    json = ej_job_config_to_json(&c);
    assert_non_null(strstr(json, "\"tracingRetentionDays\":30,\"tracingFailedRetentionDays\":0"));
    free(json);
    c.tracing.retention_days = -2;
    c.tracing.failed_retention_days = 36501;
    struct ej_config_errors errs;
    ej_config_errors_init(&errs);
    assert_int_equal(ej_job_config_validate_all(&c, &errs), EJ_ECONFIG);
    assert_int_equal(errs.count, 2);
    assert_string_equal(errs.messages[0], "tracingRetentionDays: must be -1 (the daemon's), 0 "
                                          "(forever) or days up to 36500, got -2");
    assert_string_equal(errs.messages[1], "tracingFailedRetentionDays: must be -1 (as "
                                          "retentionDays), 0 (forever) or days up to 36500, got "
                                          "36501");
    ej_config_errors_fini(&errs);
    ej_job_config_fini(&c);
}

/* A job of one type around one key: the required keys (unless key is one
 * of them) plus key: text, under props for a "props." key. */
static void yaml_job_with(char *buf, size_t len, ej_job_type type, const char *key,
                          const char *text)
{
    const char *prop = strncmp(key, "props.", 6) == 0 ? key + 6 : NULL;
    const char *need = type == EJ_JOB_TYPE_HTTP ? "http.uri" : "script.command.line";
    const char *need_val = type == EJ_JOB_TYPE_HTTP ? "'http://127.0.0.1/x'" : "/bin/true";
    int n = snprintf(buf, len, YAML_HEAD);
    if (strcmp(key, "cron") != 0)
        n += snprintf(buf + n, len - (size_t)n, "    cron: 0 * * * * ?\n");
    if (strcmp(key, "shardingTotalCount") != 0)
        n += snprintf(buf + n, len - (size_t)n, "    shardingTotalCount: 2\n");
    if (strncmp(key, "retry.", 6) == 0)
        n += snprintf(buf + n, len - (size_t)n, "    retry:\n      %s: %s\n", key + 6, text);
    else if (strncmp(key, "tracing.", 8) == 0)
        n += snprintf(buf + n, len - (size_t)n, "    tracing:\n      %s: %s\n", key + 8, text);
    else if (prop == NULL)
        n += snprintf(buf + n, len - (size_t)n, "    %s: %s\n", key, text);
    n += snprintf(buf + n, len - (size_t)n, "    props:\n");
    if (prop == NULL || strcmp(prop, need) != 0)
        n += snprintf(buf + n, len - (size_t)n, "      %s: %s\n", need, need_val);
    if (prop != NULL)
        n += snprintf(buf + n, len - (size_t)n, "      %s: %s\n", prop, text);
    assert_true((size_t)n < len);
}

/* The field table drives the daemon file's job keys: every row with a yaml
 * key is accepted there and its value lands in the row's member; the keys
 * are the documented ones; any other key, in the job or under props, is
 * unknown. */
static void test_yaml_field_table_keys(void **state)
{
    (void)state;
    /* Values the validator refuses in their plain form: a valid one, and
     * what is stored (the daemon file's readings of the strategy, the
     * method and the type). */
    static const struct {
        enum ej__cfg_field field;
        const char *text;
        const char *stored;
    } valid[] = {
        {EJ_CFG_F_CRON, "0/7 * * * * ?", "0/7 * * * * ?"},
        {EJ_CFG_F_TIME_ZONE, "Asia/Tokyo", "Asia/Tokyo"},
        {EJ_CFG_F_SHARDING_ITEM_PARAMETERS, "'0=a,1=b'", "0=a,1=b"},
        {EJ_CFG_F_JOB_SHARDING_STRATEGY_CLASS, "odevity",
         "com.dangdang.ddframe.job.lite.api.strategy.impl.OdevitySortByNameJobShardingStrategy"},
        {EJ_CFG_F_HTTP_URI, "'https://example.com/a?b=c'", "https://example.com/a?b=c"},
        {EJ_CFG_F_HTTP_METHOD, "put", "PUT"},
        {EJ_CFG_F_OVERLAP_POLICY, "REPLACE", "REPLACE"},
        {EJ_CFG_F_MISFIRE_POLICY, "ONCE", "ONCE"},
        {EJ_CFG_F_JOB_TYPE, "http", NULL},
    };
    enum { NDOC = sizeof documented_yaml_keys / sizeof documented_yaml_keys[0] };
    enum { NVALID = sizeof valid / sizeof valid[0] };
    char text[2048], other[192], want[128];
    int rows = 0;

    for (int i = 0; i < NDOC; i++) {
        const struct ej__cfg_field_desc *f = &ej__cfg_fields[documented_yaml_keys[i].field];
        if (f->yaml == NULL || strcmp(f->yaml, documented_yaml_keys[i].yaml) != 0)
            fail_msg("%s: the daemon key %s is not its yaml key (%s)", f->name,
                     documented_yaml_keys[i].yaml, f->yaml ? f->yaml : "NULL");
    }
    for (int i = 0; i < EJ_CFG_F_COUNT_; i++) {
        const struct ej__cfg_field_desc *f = &ej__cfg_fields[i];
        struct ej_daemon_config d;
        struct ej_config_errors e;
        if (f->yaml == NULL)
            continue;
        rows++;
        bool documented = false;
        for (int k = 0; k < NDOC; k++)
            documented = documented || documented_yaml_keys[k].field == (enum ej__cfg_field)i;
        if (!documented)
            fail_msg("%s: yaml key %s is not documented", f->name, f->yaml);

        /* A value of its type, not its default (the table's kind of value,
         * or a valid one for the fields with a rule). */
        const char *stored = NULL;
        long long num = 0;
        switch (f->type) {
        case EJ_CFG_T_STR:
            snprintf(other, sizeof(other), "'other %s'", f->key);
            stored = other + 1;
            break;
        case EJ_CFG_T_INT:
        case EJ_CFG_T_INT64:
            num = f->def_num + 7;
            snprintf(other, sizeof(other), "%lld", num);
            break;
        case EJ_CFG_T_BOOL:
            num = !f->def_num;
            snprintf(other, sizeof(other), "%s", num ? "true" : "false");
            break;
        case EJ_CFG_T_TYPE:
            num = EJ_JOB_TYPE_HTTP;
            break;
        case EJ_CFG_T_CLASS:
        case EJ_CFG_T_OBJ:
            fail_msg("%s: a %s field cannot have a yaml key", f->name,
                     f->type == EJ_CFG_T_CLASS ? "CLASS" : "OBJ");
        }
        const char *value = other;
        for (int k = 0; k < NVALID; k++) {
            if (valid[k].field == (enum ej__cfg_field)i) {
                value = valid[k].text;
                stored = valid[k].stored;
            }
        }
        if (f->type == EJ_CFG_T_STR && value == other) {
            /* The quotes are YAML's, not the value's. */
            snprintf(want, sizeof(want), "%.*s", (int)strlen(other) - 2, other + 1);
            stored = want;
        }
        ej_job_type type = f->scope == EJ_CFG_S_HTTP || f->type == EJ_CFG_T_TYPE
                               ? EJ_JOB_TYPE_HTTP
                               : EJ_JOB_TYPE_SCRIPT;
        yaml_job_with(text, sizeof(text), type, f->yaml, value);
        int rc = load_yaml(text, &d, &e);
        if (rc != 0) {
            dump_errors(&e);
            fail_msg("%s: %s: %s refused (rc %d) in\n%s", f->name, f->yaml, value, rc, text);
        }
        assert_int_equal(d.job_count, 1);
        assert_int_equal(d.jobs[0].job_type, type);
        if (f->type == EJ_CFG_T_STR) {
            if (strcmp(ej__config_field_str(&d.jobs[0], f), stored) != 0)
                fail_msg("%s: %s: %s read as \"%s\", expected \"%s\"", f->name, f->yaml, value,
                         ej__config_field_str(&d.jobs[0], f), stored);
        } else if (ej__config_field_num(&d.jobs[0], f) != num) {
            fail_msg("%s: %s: %s read as %lld", f->name, f->yaml, value,
                     ej__config_field_num(&d.jobs[0], f));
        }
        ej_daemon_config_fini(&d);
        ej_config_errors_fini(&e);

        /* The key in the wrong place (under props, or out of it) is
         * unknown there. */
        bool prop = strncmp(f->yaml, "props.", 6) == 0;
        snprintf(want, sizeof(want), "%s", prop ? f->yaml + 6 : f->yaml);
        snprintf(other, sizeof(other), "%s%s", prop ? "" : "props.", want);
        yaml_job_with(text, sizeof(text), type, other, value);
        snprintf(want + strlen(want), sizeof(want) - strlen(want), "\"");
        assert_int_equal(load_yaml(text, &d, &e), EJ_ECONFIG);
        bool unknown = false;
        for (size_t k = 0; k < e.count; k++)
            unknown = unknown || (strstr(e.messages[k], "unknown key \"") != NULL &&
                                  strstr(e.messages[k], want) != NULL);
        if (!unknown) {
            dump_errors(&e);
            fail_msg("%s: %s accepted out of its place", f->name, f->yaml);
        }
        ej_daemon_config_fini(&d);
        ej_config_errors_fini(&e);
    }
    assert_int_equal(rows, NDOC);

    /* The JSON names of the fields the file does not set, or sets under
     * another key, are unknown keys of a job. */
    for (int i = 0; i < EJ_CFG_F_COUNT_; i++) {
        const struct ej__cfg_field_desc *f = &ej__cfg_fields[i];
        struct ej_daemon_config d;
        struct ej_config_errors e;
        if (f->where == EJ_CFG_W_REST || (f->yaml != NULL && strcmp(f->yaml, f->key) == 0))
            continue;
        yaml_job_with(text, sizeof(text), EJ_JOB_TYPE_SCRIPT, f->key, "x");
        assert_int_equal(load_yaml(text, &d, &e), EJ_ECONFIG);
        snprintf(want, sizeof(want), "jobs.j: unknown key \"%s\"", f->key);
        if (e.count != 1 || strstr(e.messages[0], want) == NULL) {
            dump_errors(&e);
            fail_msg("%s: key %s not refused as unknown", f->name, f->key);
        }
        ej_daemon_config_fini(&d);
        ej_config_errors_fini(&e);
    }
    assert_yaml_error(YAML_HEAD "    cron: 0 * * * * ?\n    shardingTotalCount: 1\n"
                                "    props: {script.command.line: x, noSuchKey: 1}\n",
                      "jobs.yaml:7:37: jobs.j.props: unknown key \"noSuchKey\"");
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_init_defaults),
        cmocka_unit_test(test_copy_equal),
        cmocka_unit_test(test_job_type_names),
        cmocka_unit_test(test_json_dataflow_vector),
        cmocka_unit_test(test_json_script_vector),
        cmocka_unit_test(test_json_strategy_java_cannot_load),
        cmocka_unit_test(test_json_peer_job_674_bytes),
        cmocka_unit_test(test_json_gson_escaping),
        cmocka_unit_test(test_json_ejob_extensions),
        cmocka_unit_test(test_json_round_trip_vectors),
        cmocka_unit_test(test_json_console_shape),
        cmocka_unit_test(test_json_missing_keys_java_defaults),
        cmocka_unit_test(test_json_unknown_keys_preserved),
        cmocka_unit_test(test_json_gson_lenient_numbers_and_strings),
        cmocka_unit_test(test_json_type_errors),
        cmocka_unit_test(test_json_syntax_errors),
        cmocka_unit_test(test_json_huge_and_hostile_input),
        cmocka_unit_test(test_validate_messages),
        cmocka_unit_test(test_validate_valid_and_all),
        cmocka_unit_test(test_validate_cron_rule),
        cmocka_unit_test(test_validate_command_line),
        cmocka_unit_test(test_time_zone_check),
        cmocka_unit_test(test_sharding_params),
        cmocka_unit_test(test_yaml_spec_example),
        cmocka_unit_test(test_yaml_strategy_java_names),
        cmocka_unit_test(test_yaml_defaults),
        cmocka_unit_test(test_yaml_http_and_defaults),
        cmocka_unit_test(test_yaml_inline_digest_file_mode),
        cmocka_unit_test(test_yaml_error_file),
        cmocka_unit_test(test_yaml_errors),
        cmocka_unit_test(test_yaml_metrics),
        cmocka_unit_test(test_yaml_log),
        cmocka_unit_test(test_yaml_job_errors),
        cmocka_unit_test(test_yaml_limits_and_files),
        cmocka_unit_test(test_field_table_every_path),
        cmocka_unit_test(test_field_table_covers_struct),
        cmocka_unit_test(test_yaml_field_table_keys),
        cmocka_unit_test(test_job_retention_fields),
        cmocka_unit_test(test_check_json_all_errors),
        cmocka_unit_test(test_fields_json),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
