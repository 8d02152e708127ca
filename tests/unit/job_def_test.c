/* The one job model: what a fire runs with is the configuration, plus what
 * only the program gives (its struct ej_job_def), and each fact has one
 * validation rule (src/config/validate.c for the configuration's, job.h's
 * ej_job_def_validate for the program's). */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <cmocka.h>

#include "ejob/config.h"
#include "ejob/error.h"
#include "ejob/job.h"
#include "ejob/log.h"
#include "exec/internal.h"
#include "runtime/internal.h"

static int noop_item(const ej_shard_context *ctx, void *user)
{
    (void)ctx;
    (void)user;
    return 0;
}

static bool custom_handler(const char *job, int item, const char *message, void *user)
{
    (void)job;
    (void)item;
    (void)message;
    (void)user;
    return false;
}

/* A valid configuration of type t, as a fire's settings hold it. */
static void settings_init(struct ej__rt_settings *s, ej_job_type t)
{
    memset(s, 0, sizeof *s);
    assert_int_equal(ej_job_config_init(&s->cfg), 0);
    assert_int_equal(ej_job_config_set_str(&s->cfg.job_name, "defJob"), 0);
    assert_int_equal(ej_job_config_set_str(&s->cfg.cron, "0/5 * * * * ?"), 0);
    s->cfg.job_type = t;
    if (t == EJ_JOB_TYPE_SCRIPT)
        assert_int_equal(ej_job_config_set_str(&s->cfg.script_command_line, "/bin/true"), 0);
    if (t == EJ_JOB_TYPE_HTTP)
        assert_int_equal(ej_job_config_set_str(&s->cfg.http.uri, "http://127.0.0.1:1/x"), 0);
}

static void settings_fini(struct ej__rt_settings *s)
{
    free(s->def);
    ej_job_config_fini(&s->cfg);
}

/*
 * A timeout of 0 gets one answer, naming the field, whichever way the job
 * comes in: the configuration's rule. A program's definition cannot carry
 * a timeout of its own (the http ones are gone from it, and the script's
 * run limits are refused there, naming the configuration's field), so
 * there is no second rule left to disagree (it used to accept 0 where the
 * configuration refuses it).
 */
static void test_timeout_zero_one_answer(void **state)
{
    (void)state;
    char err[256];
    struct ej__rt_settings s;
    settings_init(&s, EJ_JOB_TYPE_HTTP);
    assert_int_equal(ej_job_config_validate(&s.cfg, err, sizeof err), 0);
    s.cfg.http.connect_timeout_ms = 0;
    assert_int_equal(ej_job_config_validate(&s.cfg, err, sizeof err), EJ_ECONFIG);
    assert_string_equal(err, "httpConnectTimeoutMilliseconds: must be >= 1, got 0");
    s.cfg.http.connect_timeout_ms = 3000;
    s.cfg.http.read_timeout_ms = 0;
    assert_int_equal(ej_job_config_validate(&s.cfg, err, sizeof err), EJ_ECONFIG);
    assert_string_equal(err, "httpReadTimeoutMilliseconds: must be >= 1, got 0");
    settings_fini(&s);

    /* A script's time limit: the configuration's field, named by both. */
    settings_init(&s, EJ_JOB_TYPE_SCRIPT);
    s.cfg.timeout_seconds = -1;
    assert_int_equal(ej_job_config_validate(&s.cfg, err, sizeof err), EJ_ECONFIG);
    assert_non_null(strstr(err, "timeoutSeconds: "));
    struct ej_job_def user = {.type = EJ_JOB_TYPE_SCRIPT, .script = {.timeout_ms = -1}};
    assert_int_equal(ej_job_def_validate(&user, err, sizeof err), EJ_ECONFIG);
    assert_non_null(strstr(err, "timeoutSeconds"));
    /* ... and a fire is not built from such a definition. */
    s.cfg.timeout_seconds = 0;
    assert_int_equal(ej__rt_build_def(&s, &user), EJ_ECONFIG);
    assert_null(s.def);
    settings_fini(&s);
}

/* What the configuration says wins over a definition's zero values: the
 * error handler, the executor, the run limits and streaming. */
static void test_built_def_follows_config(void **state)
{
    (void)state;
    struct ej__rt_settings s;
    settings_init(&s, EJ_JOB_TYPE_SIMPLE);
    assert_int_equal(ej_job_config_set_str(&s.cfg.job_exception_handler, "THROW"), 0);
    assert_int_equal(ej_job_config_set_str(&s.cfg.executor_service_handler, "SINGLE_THREAD"), 0);
    s.cfg.timeout_seconds = 7;
    s.cfg.timeout_grace_seconds = 3;
    int mark = 0;
    struct ej_job_def user = {.type = EJ_JOB_TYPE_SIMPLE, .simple = noop_item, .user = &mark};
    assert_int_equal(ej__rt_build_def(&s, &user), 0);
    assert_non_null(s.def);
    assert_int_equal(s.def->error_handler.kind, EJ_ERROR_HANDLER_FAIL);
    assert_int_equal(s.def->executor, EJ_EXECUTOR_SINGLE_THREAD);
    assert_int_equal(s.def->script.timeout_ms, 7000);
    assert_int_equal(s.def->script.kill_grace_ms, 3000);
    assert_ptr_equal(s.def->config_, &s.cfg);
    assert_ptr_equal(s.def->simple, noop_item);
    assert_ptr_equal(s.def->user, &mark);

    /* What only the program can say stays its own. */
    user.error_handler =
        (struct ej_error_handler){.kind = EJ_ERROR_HANDLER_CUSTOM, .fn = custom_handler};
    user.executor = EJ_EXECUTOR_FIXED;
    user.executor_threads = 3;
    assert_int_equal(ej__rt_build_def(&s, &user), 0);
    assert_int_equal(s.def->error_handler.kind, EJ_ERROR_HANDLER_CUSTOM);
    assert_ptr_equal(s.def->error_handler.fn, custom_handler);
    assert_int_equal(s.def->executor, EJ_EXECUTOR_FIXED);
    assert_int_equal(s.def->executor_threads, 3);

    /* Without a definition (a daemon's SCRIPT and HTTP jobs): the same. */
    assert_int_equal(ej__rt_build_def(&s, NULL), 0);
    assert_int_equal(s.def->error_handler.kind, EJ_ERROR_HANDLER_FAIL);
    assert_int_equal(s.def->executor, EJ_EXECUTOR_SINGLE_THREAD);
    settings_fini(&s);
}

/* The Java handler class names (config.h, the configuration's defaults)
 * are what the parsers take as LOG and CPU. */
static void test_java_class_names(void **state)
{
    (void)state;
    ej_error_handler_kind ek = EJ_ERROR_HANDLER_FAIL;
    assert_int_equal(ej_error_handler_parse(EJ_CONFIG_DEFAULT_JOB_EXCEPTION_HANDLER, &ek), 0);
    assert_int_equal(ek, EJ_ERROR_HANDLER_LOG);
    ej_executor_kind xk = EJ_EXECUTOR_FIXED;
    assert_int_equal(ej_executor_kind_parse(EJ_CONFIG_DEFAULT_EXECUTOR_SERVICE_HANDLER, &xk), 0);
    assert_int_equal(xk, EJ_EXECUTOR_CPU);
    struct ej_job_config cfg;
    assert_int_equal(ej_job_config_init(&cfg), 0);
    assert_string_equal(cfg.job_exception_handler, EJ_CONFIG_DEFAULT_JOB_EXCEPTION_HANDLER);
    assert_string_equal(cfg.executor_service_handler, EJ_CONFIG_DEFAULT_EXECUTOR_SERVICE_HANDLER);
    ej_job_config_fini(&cfg);
}

struct flow {
    int batches_left;
    int fetched;
};

static long flow_fetch(const ej_shard_context *ctx, void **batch, void *user)
{
    (void)ctx;
    struct flow *f = user;
    f->fetched++;
    if (f->batches_left == 0)
        return 0;
    f->batches_left--;
    *batch = NULL;
    return 1;
}

static int flow_process(const ej_shard_context *ctx, void *batch, long count, void *user)
{
    (void)ctx;
    (void)batch;
    (void)count;
    (void)user;
    return 0;
}

/* streamingProcess is the configuration's, for a C dataflow job too. */
static void test_streaming_from_config(void **state)
{
    (void)state;
    struct ej__rt_settings s;
    settings_init(&s, EJ_JOB_TYPE_DATAFLOW);
    struct flow f = {.batches_left = 3};
    struct ej_job_def user = {.type = EJ_JOB_TYPE_DATAFLOW,
                              .dataflow = {.fetch = flow_fetch, .process = flow_process},
                              .user = &f};
    ej_shard_context ctx;
    ej__exec_context_init(&ctx, NULL);
    ctx.job_name = "defJob";
    ej__exec_result r;
    s.cfg.streaming_process = false;
    assert_int_equal(ej__rt_build_def(&s, &user), 0);
    assert_int_equal(ej__exec_run_item(s.def, &ctx, NULL, &r), 0);
    assert_int_equal(f.fetched, 1);
    ej__exec_result_fini(&r);
    s.cfg.streaming_process = true;
    f = (struct flow){.batches_left = 3};
    assert_int_equal(ej__exec_run_item(s.def, &ctx, NULL, &r), 0);
    assert_int_equal(f.fetched, 4);
    ej__exec_result_fini(&r);
    ej__exec_context_fini(&ctx);
    settings_fini(&s);
}

static int simple_fn(const ej_shard_context *ctx, void *user)
{
    (void)ctx;
    (void)user;
    return 0;
}

/* How many items of a job run at once: a program's definition that leaves
 * the executor to the configuration gets the configuration's (a C job with
 * SINGLE_THREAD in its config ran 2 x CPUs at once); FIXED is the
 * program's. */
static void test_concurrency_follows_config(void **state)
{
    (void)state;
    struct ej__rt_settings s;
    settings_init(&s, EJ_JOB_TYPE_SIMPLE);
    assert_int_equal(ej_job_config_set_str(&s.cfg.executor_service_handler, "SINGLE_THREAD"), 0);
    struct ej_job_def def = {.type = EJ_JOB_TYPE_SIMPLE, .simple = simple_fn};
    assert_int_equal(ej__rt_concurrency(&s, &def), 1);
    assert_int_equal(ej__rt_concurrency(&s, NULL), 1);
    def.executor = EJ_EXECUTOR_FIXED;
    def.executor_threads = 3;
    assert_int_equal(ej__rt_concurrency(&s, &def), 3);
    settings_fini(&s);
}

int main(void)
{
    ej_log_set_level(EJ_LOG_OFF);
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_timeout_zero_one_answer),
        cmocka_unit_test(test_built_def_follows_config),
        cmocka_unit_test(test_java_class_names),
        cmocka_unit_test(test_streaming_from_config),
        cmocka_unit_test(test_concurrency_follows_config),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
