/* Item runners (simple, dataflow, script, http), contexts, names, and the
 * event bus. */
#include <arpa/inet.h>
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <microhttpd.h>
#include <pthread.h>
#include <setjmp.h>
#include <signal.h>
#include <stdarg.h>
#include <stdatomic.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/prctl.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>
#include <cmocka.h>

#include "common/util.h"
#include "ejob/config.h"
#include "ejob/error.h"
#include "ejob/event.h"
#include "ejob/job.h"
#include "ejob/log.h"
#include "exec/internal.h"

static char tmpdir[64];

static void make_tmpdir(void)
{
    if (tmpdir[0])
        return;
    snprintf(tmpdir, sizeof tmpdir, "/tmp/ej-exec-test-XXXXXX");
    assert_non_null(mkdtemp(tmpdir));
}

static char *tmp_path(const char *name)
{
    make_tmpdir();
    return ej__asprintf("%s/%s", tmpdir, name);
}

static char *write_script(const char *name, const char *body)
{
    char *p = tmp_path(name);
    FILE *f = fopen(p, "w");
    assert_non_null(f);
    fputs(body, f);
    fclose(f);
    chmod(p, 0755);
    return p;
}

/* The configurations the tests' definitions run with: a script's command
 * line, an http request and streamingProcess are the job's configuration
 * (ej_job_def.config_, set by the runtime for a fire). Freed by the group's
 * teardown. */
static struct ej_job_config run_cfgs[64];
static size_t n_run_cfgs;

static struct ej_job_config *run_config(struct ej_job_def *d)
{
    for (size_t i = 0; i < n_run_cfgs; i++)
        if (d->config_ == &run_cfgs[i])
            return &run_cfgs[i];
    assert_true(n_run_cfgs < sizeof run_cfgs / sizeof run_cfgs[0]);
    struct ej_job_config *c = &run_cfgs[n_run_cfgs++];
    assert_int_equal(ej_job_config_init(c), 0);
    c->job_type = d->type;
    d->config_ = c;
    return c;
}

static void script_cmd(struct ej_job_def *d, const char *line)
{
    assert_int_equal(ej_job_config_set_str(&run_config(d)->script_command_line, line), 0);
}

static void cfg_str(char **field, const char *value)
{
    assert_int_equal(ej_job_config_set_str(field, value), 0);
}

static char *slurp(const char *path)
{
    FILE *f = fopen(path, "r");
    if (f == NULL)
        return NULL;
    ej_buf b;
    ej__buf_init(&b);
    char buf[4096];
    size_t n;
    while ((n = fread(buf, 1, sizeof buf, f)) > 0)
        ej__buf_append(&b, buf, n);
    fclose(f);
    return ej__buf_steal(&b);
}

static void fill_ctx(ej_shard_context *ctx, const atomic_bool *cancel, int item, const char *param)
{
    ej__exec_context_init(ctx, cancel);
    ctx->job_name = "demoJob";
    ctx->task_id = "demoJob@-@0,1,2@-@READY@-@10.0.0.7@-@4123";
    ctx->sharding_total_count = 3;
    ctx->job_parameter = "a=b";
    ctx->sharding_item = item;
    ctx->sharding_parameter = param;
}

/* ------------------------------------------------------------ contexts */

static void test_context_json(void **state)
{
    (void)state;
    ej_shard_context ctx;
    fill_ctx(&ctx, NULL, 0, "A");
    char *j = ej__exec_context_json(&ctx);
    assert_string_equal(j, "{\"jobName\":\"demoJob\",\"taskId\":\"demoJob@-@0,1,2@-@READY@-@10.0.0."
                           "7@-@4123\",\"shardingTotalCount\":3,\"jobParameter\":\"a\\u003db\","
                           "\"shardingItem\":0,\"shardingParameter\":\"A\"}");
    free(j);
    ctx.sharding_parameter = NULL;
    ctx.job_parameter = "";
    ctx.sharding_item = 2;
    j = ej__exec_context_json(&ctx);
    assert_string_equal(j, "{\"jobName\":\"demoJob\",\"taskId\":\"demoJob@-@0,1,2@-@READY@-@10.0.0."
                           "7@-@4123\",\"shardingTotalCount\":3,\"jobParameter\":\"\","
                           "\"shardingItem\":2}");
    free(j);
    ctx.sharding_parameter = "<x>&'\"";
    j = ej__exec_context_json(&ctx);
    assert_non_null(strstr(j, "\"shardingParameter\":\"\\u003cx\\u003e\\u0026\\u0027\\\"\"}"));
    free(j);
    ej__exec_context_fini(&ctx);
}

static void test_task_id_and_items(void **state)
{
    (void)state;
    int items[] = {0, 1, 2};
    char *t = ej__exec_task_id("job", items, 3, "10.0.0.7@-@4123");
    assert_string_equal(t, "job@-@0,1,2@-@READY@-@10.0.0.7@-@4123");
    free(t);
    t = ej__exec_task_id("job", NULL, 0, "i");
    assert_string_equal(t, "job@-@@-@READY@-@i");
    free(t);
    assert_null(ej__exec_task_id(NULL, items, 1, "i"));
    char *s = ej_event_items_string(items, 3);
    assert_string_equal(s, "[0, 1, 2]");
    free(s);
    s = ej_event_items_string(NULL, 0);
    assert_string_equal(s, "[]");
    free(s);
    assert_null(ej_event_items_string(NULL, 2));
}

static void test_cancel_and_error(void **state)
{
    (void)state;
    atomic_bool cancel = false;
    ej_shard_context ctx;
    fill_ctx(&ctx, &cancel, 0, NULL);
    assert_false(ej_shard_context_is_cancelled(&ctx));
    atomic_store(&cancel, true);
    assert_true(ej_shard_context_is_cancelled(&ctx));
    assert_false(ej_shard_context_is_cancelled(NULL));
    ej_shard_context_set_error(&ctx, "bad %d", 1);
    ej_shard_context_set_error(&ctx, "worse %d", 2);
    assert_string_equal(ej__exec_context_error(&ctx), "worse 2");
    ej__exec_context_fini(&ctx);
    assert_null(ej__exec_context_error(&ctx));
}

static void test_names(void **state)
{
    (void)state;
    ej_error_handler_kind k;
    assert_int_equal(ej_error_handler_parse(NULL, &k), 0);
    assert_int_equal(k, EJ_ERROR_HANDLER_LOG);
    assert_int_equal(ej_error_handler_parse("ignore", &k), 0);
    assert_int_equal(k, EJ_ERROR_HANDLER_IGNORE);
    assert_int_equal(ej_error_handler_parse("THROW", &k), 0);
    assert_int_equal(k, EJ_ERROR_HANDLER_FAIL);
    assert_int_equal(
        ej_error_handler_parse(
            "com.dangdang.ddframe.job.executor.handler.impl.DefaultJobExceptionHandler", &k),
        0);
    assert_int_equal(k, EJ_ERROR_HANDLER_LOG);
    assert_int_equal(ej_error_handler_parse("EMAIL", &k), EJ_ECONFIG);
    ej_executor_kind e;
    assert_int_equal(ej_executor_kind_parse("SINGLE_THREAD", &e), 0);
    assert_int_equal(e, EJ_EXECUTOR_SINGLE_THREAD);
    assert_int_equal(
        ej_executor_kind_parse(
            "com.dangdang.ddframe.job.executor.handler.impl.DefaultExecutorServiceHandler", &e),
        0);
    assert_int_equal(e, EJ_EXECUTOR_CPU);
    assert_int_equal(ej_executor_kind_parse("com.example.Mine", &e), EJ_ECONFIG);
    assert_int_equal(ej_executor_concurrency(EJ_EXECUTOR_SINGLE_THREAD, 0), 1);
    assert_int_equal(ej_executor_concurrency(EJ_EXECUTOR_CPU, 0),
                     2 * (int)sysconf(_SC_NPROCESSORS_ONLN));
    assert_int_equal(ej_executor_concurrency(EJ_EXECUTOR_FIXED, 5), 5);
    ej_job_type t;
    assert_int_equal(ej_job_type_parse("DATAFLOW", &t), 0);
    assert_int_equal(t, EJ_JOB_TYPE_DATAFLOW);
    assert_int_equal(ej_job_type_parse("JAVA", &t), EJ_EINVAL);
    assert_string_equal(ej_job_type_name(EJ_JOB_TYPE_HTTP), "HTTP");
    ej_execution_source src;
    assert_int_equal(ej_execution_source_parse("MISFIRE", &src), 0);
    assert_int_equal(src, EJ_EXEC_MISFIRE);
    assert_string_equal(ej_execution_source_name(EJ_EXEC_FAILOVER), "FAILOVER");
    assert_string_equal(ej_task_state_name(EJ_TASK_ERROR), "TASK_ERROR");
}

static int noop_simple(const ej_shard_context *ctx, void *user)
{
    (void)ctx;
    (void)user;
    return 0;
}

/* A definition holds what only the program gives; what the configuration
 * holds is refused there, naming the configuration's field. */
static void test_validate(void **state)
{
    (void)state;
    char err[256];
    struct ej_job_def d = {.type = EJ_JOB_TYPE_SIMPLE};
    assert_int_equal(ej_job_def_validate(&d, err, sizeof err), EJ_ECONFIG);
    assert_non_null(strstr(err, "simple"));
    d.simple = noop_simple;
    assert_int_equal(ej_job_def_validate(&d, err, sizeof err), 0);
    d.error_handler.kind = EJ_ERROR_HANDLER_CUSTOM;
    assert_int_equal(ej_job_def_validate(&d, err, sizeof err), EJ_ECONFIG);
    assert_non_null(strstr(err, "error_handler.fn"));
    d.error_handler.kind = EJ_ERROR_HANDLER_IGNORE;
    assert_int_equal(ej_job_def_validate(&d, err, sizeof err), EJ_ECONFIG);
    assert_non_null(strstr(err, "jobProperties.job_exception_handler"));
    d.error_handler.kind = EJ_ERROR_HANDLER_LOG;
    d.executor = EJ_EXECUTOR_SINGLE_THREAD;
    assert_int_equal(ej_job_def_validate(&d, err, sizeof err), EJ_ECONFIG);
    assert_non_null(strstr(err, "jobProperties.executor_service_handler"));
    d.executor = EJ_EXECUTOR_FIXED;
    d.executor_threads = 3;
    assert_int_equal(ej_job_def_validate(&d, err, sizeof err), 0);

    /* A script or http definition needs nothing: the command line and the
     * request are the configuration's. Its run limits are ejob's. */
    struct ej_job_def s = {.type = EJ_JOB_TYPE_SCRIPT};
    assert_int_equal(ej_job_def_validate(&s, err, sizeof err), 0);
    s.script.timeout_ms = -1;
    assert_int_equal(ej_job_def_validate(&s, err, sizeof err), EJ_ECONFIG);
    assert_non_null(strstr(err, "timeoutSeconds"));
    s.script.timeout_ms = 0;
    s.script.kill_grace_ms = 5000;
    assert_int_equal(ej_job_def_validate(&s, err, sizeof err), EJ_ECONFIG);
    assert_non_null(strstr(err, "timeoutGraceSeconds"));
    struct ej_job_def h = {.type = EJ_JOB_TYPE_HTTP};
    assert_int_equal(ej_job_def_validate(&h, err, sizeof err), 0);

    struct ej_job_def df = {.type = EJ_JOB_TYPE_DATAFLOW};
    assert_int_equal(ej_job_def_validate(&df, err, sizeof err), EJ_ECONFIG);
    assert_non_null(strstr(err, "dataflow.fetch"));
    assert_int_equal(ej_job_def_validate(NULL, err, sizeof err), EJ_EINVAL);
}

/* -------------------------------------------------------------- split */

static void check_split(const char *line, int n, ...)
{
    char **argv = NULL;
    int argc = -1;
    char err[128];
    assert_int_equal(ej__exec_split_command(line, &argv, &argc, err, sizeof err), 0);
    assert_int_equal(argc, n);
    va_list ap;
    va_start(ap, n);
    for (int i = 0; i < n; i++)
        assert_string_equal(argv[i], va_arg(ap, const char *));
    va_end(ap);
    assert_null(argv[n]);
    free(argv);
}

static void test_split_command(void **state)
{
    (void)state;
    check_split("a b  c", 3, "a", "b", "c");
    check_split(" /bin/sh -c 'echo a b' ", 3, "/bin/sh", "-c", "echo a b");
    check_split("x \"\" y", 3, "x", "", "y");
    check_split("a\"b c\"d", 1, "ab cd");
    check_split("say \"it's\" 'a \"q\"'", 3, "say", "it's", "a \"q\"");
    check_split("a\tb", 1, "a\tb"); /* only spaces separate, as in commons-exec */
    check_split("p C:\\dir\\f", 2, "p", "C:\\dir\\f");
    check_split("x ''", 2, "x", "");
    char **argv = NULL;
    char err[128];
    assert_int_equal(ej__exec_split_command("echo \"open", &argv, NULL, err, sizeof err),
                     EJ_ECONFIG);
    assert_non_null(strstr(err, "unbalanced quotes in 'echo \"open'"));
    assert_null(argv);
    assert_int_equal(ej__exec_split_command("   ", &argv, NULL, err, sizeof err), EJ_ECONFIG);
    assert_int_equal(ej__exec_split_command("\"\" a", &argv, NULL, err, sizeof err), EJ_ECONFIG);
    assert_non_null(strstr(err, "no program"));
    assert_int_equal(ej__exec_split_command(NULL, &argv, NULL, err, sizeof err), EJ_EINVAL);
}

/* ------------------------------------------------------------- script */

static int count_fds(void)
{
    int n = 0;
    DIR *d = opendir("/proc/self/fd");
    struct dirent *e;
    while ((e = readdir(d)) != NULL)
        n += e->d_name[0] != '.';
    closedir(d);
    return n;
}

static void test_script_context_per_item(void **state)
{
    (void)state;
    char *out = tmp_path("argv.txt");
    char *script =
        write_script("args.sh", "#!/bin/sh\n"
                                "for a in \"$@\"; do printf '%s\\n' \"$a\"; done >> \"$OUT\"\n");
    char *envv = ej__asprintf("OUT=%s", out);
    const char *env[] = {envv, NULL};
    char *cmd = ej__asprintf("%s 'first arg' second", script);
    struct ej_job_def d = {.type = EJ_JOB_TYPE_SCRIPT};
    script_cmd(&d, cmd);
    d.script.env = env;
    const char *params[] = {"Beijing", NULL, "Guang=zhou"};
    /* Counted after the first item: it may start the process that
     * supervises every item (zygote.c), whose socket stays open. */
    int fds_before = -1;
    for (int i = 0; i < 3; i++) {
        if (i == 1)
            fds_before = count_fds();
        ej_shard_context ctx;
        fill_ctx(&ctx, NULL, i, params[i]);
        ej__exec_result r;
        assert_int_equal(ej__exec_run_item(&d, &ctx, NULL, &r), 0);
        assert_null(r.failure_cause);
        assert_int_equal(r.exit_code, 0);
        ej__exec_result_fini(&r);
        ej__exec_context_fini(&ctx);
    }
    assert_int_equal(count_fds(), fds_before);
    char *got = slurp(out);
    const char *tid = "\"taskId\":\"demoJob@-@0,1,2@-@READY@-@10.0.0.7@-@4123\"";
    char *want = ej__asprintf(
        "first arg\nsecond\n"
        "{\"jobName\":\"demoJob\",%s,\"shardingTotalCount\":3,\"jobParameter\":\"a\\u003db\","
        "\"shardingItem\":0,\"shardingParameter\":\"Beijing\"}\n"
        "first arg\nsecond\n"
        "{\"jobName\":\"demoJob\",%s,\"shardingTotalCount\":3,\"jobParameter\":\"a\\u003db\","
        "\"shardingItem\":1}\n"
        "first arg\nsecond\n"
        "{\"jobName\":\"demoJob\",%s,\"shardingTotalCount\":3,\"jobParameter\":\"a\\u003db\","
        "\"shardingItem\":2,\"shardingParameter\":\"Guang\\u003dzhou\"}\n",
        tid, tid, tid);
    assert_string_equal(got, want);
    free(want);
    free(got);
    free(cmd);
    free(envv);
    free(script);
    free(out);
}

static int failures_seen;
static int last_failed_item = -2;
static char last_failure[512];

static bool record_failure(const char *job, int item, const char *msg, void *user)
{
    (void)job;
    failures_seen++;
    last_failed_item = item;
    snprintf(last_failure, sizeof last_failure, "%s", msg);
    return user != NULL;
}

static void test_script_failure_exit_code(void **state)
{
    (void)state;
    struct ej_job_def d = {.type = EJ_JOB_TYPE_SCRIPT};
    script_cmd(&d, "/bin/sh -c 'echo boom-out; echo boom-err >&2; exit 3'");
    d.error_handler.kind = EJ_ERROR_HANDLER_CUSTOM;
    d.error_handler.fn = record_failure;
    ej_shard_context ctx;
    fill_ctx(&ctx, NULL, 1, NULL);
    ej__exec_result r;
    failures_seen = 0;
    assert_int_equal(ej__exec_run_item(&d, &ctx, NULL, &r), EJ_EJOBFAILED);
    assert_int_equal(r.exit_code, 3);
    assert_non_null(strstr(r.failure_cause, "exited with code 3"));
    assert_non_null(strstr(r.failure_cause, "boom-out"));
    assert_non_null(strstr(r.output, "boom-out\n"));
    assert_null(strstr(r.output, "boom-err"));
    assert_string_equal(r.err_output, "boom-err\n");
    assert_non_null(strstr(r.failure_cause, "--- stderr ---\nboom-err"));
    assert_false(r.abort_run);
    assert_int_equal(failures_seen, 1);
    assert_int_equal(last_failed_item, 1);
    assert_non_null(strstr(last_failure, "exited with code 3"));
    ej__exec_result_fini(&r);

    /* Killed by a signal. */
    script_cmd(&d, "/bin/sh -c 'kill -9 $$'");
    d.error_handler.user = (void *)1; /* the handler asks to fail the run */
    assert_int_equal(ej__exec_run_item(&d, &ctx, NULL, &r), EJ_EJOBFAILED);
    assert_int_equal(r.term_signal, 9);
    assert_non_null(strstr(r.failure_cause, "killed by signal 9"));
    assert_true(r.abort_run);
    ej__exec_result_fini(&r);

    /* A program that does not exist. */
    script_cmd(&d, "/nonexistent/prog x");
    d.error_handler.kind = EJ_ERROR_HANDLER_IGNORE;
    assert_int_equal(ej__exec_run_item(&d, &ctx, NULL, &r), -ENOENT);
    assert_non_null(strstr(r.failure_cause, "cannot run '/nonexistent/prog'"));
    assert_false(r.abort_run);
    ej__exec_result_fini(&r);

    /* Empty command line: ElasticJob's message. */
    script_cmd(&d, "");
    assert_int_equal(ej__exec_run_item(&d, &ctx, NULL, &r), EJ_ECONFIG);
    assert_string_equal(r.failure_cause,
                        "Cannot find script command line for job 'demoJob', job is not executed.");
    ej__exec_result_fini(&r);
    ej__exec_context_fini(&ctx);
}

/* True when pid no longer runs (gone, or a zombie nobody reaped yet). */
static bool process_gone(pid_t pid)
{
    char path[64];
    snprintf(path, sizeof path, "/proc/%d/stat", (int)pid);
    char *st = slurp(path);
    if (st == NULL)
        return true;
    const char *rp = strrchr(st, ')');
    bool zombie = rp && (rp[2] == 'Z' || rp[2] == 'X');
    free(st);
    return zombie;
}

static pid_t read_pid(const char *path)
{
    char *s = slurp(path);
    assert_non_null(s);
    pid_t p = (pid_t)atoi(s);
    free(s);
    return p;
}

static void run_timeout_case(const char *trap, int64_t grace, int64_t min_ms, int64_t max_ms)
{
    char *pidfile = tmp_path(trap[0] ? "grand2.pid" : "grand.pid");
    unlink(pidfile);
    char *cmd = ej__asprintf("/bin/sh -c '%s sleep 30 & echo $! > %s; wait'", trap, pidfile);
    struct ej_job_def d = {.type = EJ_JOB_TYPE_SCRIPT};
    script_cmd(&d, cmd);
    d.script.timeout_ms = 300;
    d.script.kill_grace_ms = grace;
    d.error_handler.kind = EJ_ERROR_HANDLER_IGNORE;
    ej_shard_context ctx;
    fill_ctx(&ctx, NULL, 0, NULL);
    ej__exec_result r;
    int64_t t0 = ej__mono_ms();
    assert_int_equal(ej__exec_run_item(&d, &ctx, NULL, &r), EJ_ETIMEDOUT);
    int64_t took = ej__mono_ms() - t0;
    assert_true(r.timed_out);
    assert_non_null(strstr(r.failure_cause, "timed out after 300 ms"));
    assert_true(took >= min_ms);
    assert_true(took < max_ms);
    pid_t grandchild = read_pid(pidfile);
    assert_true(grandchild > 0);
    /* The grandchild was in the script's process group: it got the signal
     * too. Give the kernel a moment to deliver it. */
    int64_t until = ej__mono_ms() + 2000;
    while (!process_gone(grandchild) && ej__mono_ms() < until)
        ej__sleep_ms(10);
    assert_true(process_gone(grandchild));
    ej__exec_result_fini(&r);
    ej__exec_context_fini(&ctx);
    free(cmd);
    free(pidfile);
}

/* What a script's live output callback received. */
struct live_seen {
    char out[4096];
    size_t out_len, pieces;
    int64_t first_ms, last_ms, min_gap_ms;
    bool gap_or_overlap;
};

static void on_live(void *arg, int stream, int64_t offset, const char *data, size_t len)
{
    struct live_seen *l = arg;
    int64_t now = ej__mono_ms();
    if (stream != EJ_OUTPUT_STDOUT)
        return;
    if (offset != (int64_t)l->out_len || l->out_len + len > sizeof l->out)
        l->gap_or_overlap = true;
    else
        memcpy(l->out + l->out_len, data, len);
    l->out_len += len;
    if (l->pieces++ == 0)
        l->first_ms = now;
    else if (l->min_gap_ms < 0 || now - l->last_ms < l->min_gap_ms)
        l->min_gap_ms = now - l->last_ms;
    l->last_ms = now;
}

/* Live output: the first line at once, then a piece at most every 250 ms,
 * contiguous, the first bytes of the output, never past the cap. */
static void test_script_live_output(void **state)
{
    (void)state;
    struct ej_job_def d = {.type = EJ_JOB_TYPE_SCRIPT};
    script_cmd(
        &d, "/bin/sh -c 'i=0; while [ $i -lt 20 ]; do echo line$i; i=$((i+1)); sleep 0.05; done'");
    d.script.output_cap = 64;
    ej_shard_context ctx;
    fill_ctx(&ctx, NULL, 0, NULL);
    struct live_seen l = {.min_gap_ms = -1};
    struct ej__exec_opts o = {.output = on_live, .output_arg = &l};
    ej__exec_result r;
    int64_t start = ej__mono_ms();
    assert_int_equal(ej__exec_run_item(&d, &ctx, &o, &r), 0);
    int64_t took = ej__mono_ms() - start;
    assert_false(l.gap_or_overlap);
    assert_true(l.pieces >= 2);
    assert_true(l.first_ms - start < 200); /* the first line at once */
    assert_true(l.min_gap_ms >= EJ__LIVE_FLUSH_MS - 5);
    assert_true(l.last_ms - start < took);
    /* The pieces are the first bytes of the output, which stops at the cap. */
    assert_true(r.output_truncated);
    assert_int_equal(r.output_len, 64);
    assert_true(l.out_len <= r.output_len);
    assert_memory_equal(l.out, r.output, l.out_len);
    ej__exec_result_fini(&r);
    ej__exec_context_fini(&ctx);
}

static void test_script_fencing_token_env(void **state)
{
    (void)state;
    /* Neither the daemon's environment nor the job's env can set it. */
    setenv("EJOB_FENCING_TOKEN", "7", 1);
    const char *env[] = {"EJOB_FENCING_TOKEN=1", "OTHER=x", NULL};
    struct ej_job_def d = {.type = EJ_JOB_TYPE_SCRIPT};
    script_cmd(&d, "/bin/sh -c 'echo \"$EJOB_FENCING_TOKEN $OTHER\"'");
    d.script.env = env;
    ej_shard_context ctx;
    fill_ctx(&ctx, NULL, 0, NULL);
    ctx.fencing_token = 4294967302LL;
    ej__exec_result r;
    assert_int_equal(ej__exec_run_item(&d, &ctx, NULL, &r), 0);
    assert_string_equal(r.output, "4294967302 x\n");
    ej__exec_result_fini(&r);
    /* Not known: 0, and without job env. */
    ctx.fencing_token = 0;
    d.script.env = NULL;
    assert_int_equal(ej__exec_run_item(&d, &ctx, NULL, &r), 0);
    assert_string_equal(r.output, "0 \n");
    ej__exec_result_fini(&r);
    ej__exec_context_fini(&ctx);
    unsetenv("EJOB_FENCING_TOKEN");
}

static void test_script_timeout_kills_group(void **state)
{
    (void)state;
    /* SIGTERM is enough. */
    run_timeout_case("", 5000, 290, 2000);
    /* The whole group ignores SIGTERM: SIGKILL after the grace. */
    run_timeout_case("trap \"\" TERM;", 400, 690, 3000);
}

static void test_script_output_cap(void **state)
{
    (void)state;
    struct ej_job_def d = {.type = EJ_JOB_TYPE_SCRIPT};
    script_cmd(&d, "/bin/sh -c 'head -c 300000 /dev/zero | tr \"\\\\000\" a; echo'");
    d.script.output_cap = 1000;
    ej_shard_context ctx;
    fill_ctx(&ctx, NULL, 0, NULL);
    ej__exec_result r;
    assert_int_equal(ej__exec_run_item(&d, &ctx, NULL, &r), 0);
    assert_int_equal(r.output_len, 1000);
    assert_true(r.output_truncated);
    assert_int_equal(strspn(r.output, "a"), 1000);
    ej__exec_result_fini(&r);

    /* No descriptor but 0, 1, 2 (and ls's own) reaches the script. */
    script_cmd(&d, "/bin/sh -c 'ls /proc/self/fd'");
    d.script.output_cap = 0;
    int keep = open("/dev/null", O_RDONLY); /* not O_CLOEXEC on purpose */
    assert_int_equal(ej__exec_run_item(&d, &ctx, NULL, &r), 0);
    close(keep);
    assert_string_equal(r.output, "0\n1\n2\n3\n");
    assert_false(r.output_truncated);
    ej__exec_result_fini(&r);
    ej__exec_context_fini(&ctx);
}

static _Atomic int64_t cancelled_at_ms; /* when cancel_later set the flag */

static void *cancel_later(void *arg)
{
    ej__sleep_ms(200);
    atomic_store(&cancelled_at_ms, ej__mono_ms());
    atomic_store((atomic_bool *)arg, true);
    return NULL;
}

static void test_script_cancel(void **state)
{
    (void)state;
    atomic_bool cancel = false;
    struct ej_job_def d = {.type = EJ_JOB_TYPE_SCRIPT};
    script_cmd(&d, "/bin/sh -c 'sleep 30'");
    d.error_handler.kind = EJ_ERROR_HANDLER_IGNORE;
    ej_shard_context ctx;
    fill_ctx(&ctx, &cancel, 0, NULL);
    pthread_t th;
    pthread_create(&th, NULL, cancel_later, &cancel);
    ej__exec_result r;
    int64_t t0 = ej__mono_ms();
    int rc = ej__exec_run_item(&d, &ctx, NULL, &r);
    if (rc != EJ_ESTOPPED)
        print_error("cancel: %s\n", r.failure_cause);
    assert_int_equal(rc, EJ_ESTOPPED);
    assert_true(ej__mono_ms() - t0 < 2000);
    assert_true(r.cancelled);
    assert_non_null(strstr(r.failure_cause, "cancelled"));
    pthread_join(th, NULL);
    ej__exec_result_fini(&r);
    ej__exec_context_fini(&ctx);
}

/* A C job that works until the flag says stop (as a well-behaved job
 * polls it), at most 10 s. */
static int poll_until_cancelled(const ej_shard_context *ctx, void *user)
{
    (void)user;
    for (int i = 0; i < 1000 && !ej_shard_context_is_cancelled(ctx); i++)
        ej__sleep_ms(10);
    return 0;
}

static void test_c_job_timeout_and_kill(void **state)
{
    (void)state;
    struct ej_job_def d = {.type = EJ_JOB_TYPE_SIMPLE, .simple = poll_until_cancelled};
    d.error_handler.kind = EJ_ERROR_HANDLER_IGNORE;
    ej_shard_context ctx;
    fill_ctx(&ctx, NULL, 0, NULL);
    ej__exec_context_limit(&ctx, NULL, 300);
    ej__exec_result r;
    int64_t t0 = ej__mono_ms();
    /* It returned 0, but after its time: a timeout. */
    assert_int_equal(ej__exec_run_item(&d, &ctx, NULL, &r), EJ_ETIMEDOUT);
    int64_t took = ej__mono_ms() - t0;
    assert_true(took >= 300 && took < 800);
    assert_true(r.timed_out);
    assert_non_null(strstr(r.failure_cause, "timed out"));
    ej__exec_result_fini(&r);
    ej__exec_context_fini(&ctx);

    /* A kill wins over a timeout still ahead. */
    atomic_bool kill = false;
    fill_ctx(&ctx, NULL, 0, NULL);
    ej__exec_context_limit(&ctx, &kill, 5000);
    pthread_t th;
    pthread_create(&th, NULL, cancel_later, &kill);
    assert_int_equal(ej__exec_run_item(&d, &ctx, NULL, &r), EJ_ESTOPPED);
    pthread_join(th, NULL);
    assert_true(ej__mono_ms() - atomic_load(&cancelled_at_ms) < 200);
    assert_true(r.killed);
    assert_false(r.timed_out);
    ej__exec_result_fini(&r);
    ej__exec_context_fini(&ctx);

    /* A script killed: SIGTERM to its group, recorded as killed. */
    struct ej_job_def sd = {.type = EJ_JOB_TYPE_SCRIPT};
    script_cmd(&sd, "/bin/sh -c 'sleep 30'");
    sd.error_handler.kind = EJ_ERROR_HANDLER_IGNORE;
    atomic_store(&kill, false);
    fill_ctx(&ctx, NULL, 0, NULL);
    ej__exec_context_limit(&ctx, &kill, 0);
    pthread_create(&th, NULL, cancel_later, &kill);
    assert_int_equal(ej__exec_run_item(&sd, &ctx, NULL, &r), EJ_ESTOPPED);
    pthread_join(th, NULL);
    assert_true(ej__mono_ms() - atomic_load(&cancelled_at_ms) < 1000);
    assert_true(r.killed);
    assert_int_equal(r.term_signal, SIGTERM);
    ej__exec_result_fini(&r);
    ej__exec_context_fini(&ctx);
}

struct daemon_item {
    struct ej_job_def def;
    ej_shard_context ctx;
};

static void *daemon_item_thread(void *arg)
{
    struct daemon_item *di = arg;
    ej__exec_result r;
    ej__exec_run_item(&di->def, &di->ctx, NULL, &r);
    return NULL;
}

/* Reaps what came to this process (a subreaper) and says whether the
 * process group pgid has no member left. */
static bool group_gone(pid_t pgid)
{
    while (waitpid(-1, NULL, WNOHANG) > 0) {
    }
    return kill(-pgid, 0) != 0 && errno == ESRCH;
}

/* Reaps what came here; true once the script and its grandchild are gone. */
static bool item_gone(pid_t script, pid_t grandchild)
{
    while (waitpid(-1, NULL, WNOHANG) > 0) {
    }
    return process_gone(script) && process_gone(grandchild);
}

/*
 * A "daemon" (a forked process) runs a script item on one of its threads;
 * the script (a shell and a grandchild) runs in the item's group. kill -9
 * (or SIGSTOP) of the daemon must end the script and the grandchild within
 * [min_ms, max_ms], and the whole group, supervisor included, by the grace
 * plus a margin. This process is a subreaper, so the orphans come here and
 * their end is seen exactly. Returns the measured time.
 */
static int64_t daemon_death_case(const char *trap, int64_t grace, int64_t min_ms, int64_t max_ms,
                                 bool stop)
{
    assert_int_equal(prctl(PR_SET_CHILD_SUBREAPER, 1), 0);
    char *pidfile = tmp_path("daemon-death.pids");
    unlink(pidfile);
    char *cmd = ej__asprintf("/bin/sh -c '%s sleep 60 & echo $$ $! > %s.tmp; mv %s.tmp %s; wait'",
                             trap, pidfile, pidfile, pidfile);
    pid_t daemon = fork();
    assert_true(daemon >= 0);
    if (daemon == 0) {
        static struct daemon_item di;
        di.def = (struct ej_job_def){.type = EJ_JOB_TYPE_SCRIPT};
        script_cmd(&di.def, cmd);
        di.def.script.kill_grace_ms = grace;
        di.def.error_handler.kind = EJ_ERROR_HANDLER_IGNORE;
        fill_ctx(&di.ctx, NULL, 0, NULL);
        pthread_t th;
        pthread_create(&th, NULL, daemon_item_thread, &di);
        pthread_join(th, NULL);
        _exit(0);
    }
    char *pids = NULL;
    for (int i = 0; i < 1000 && pids == NULL; i++) {
        pids = slurp(pidfile);
        if (pids == NULL)
            ej__sleep_ms(10);
    }
    assert_non_null(pids);
    int script = 0, grandchild = 0;
    assert_int_equal(sscanf(pids, "%d %d", &script, &grandchild), 2);
    pid_t pgid = getpgid(script);
    assert_true(pgid > 0);
    assert_int_equal(getpgid(grandchild), pgid);
    kill(daemon, stop ? SIGSTOP : SIGKILL);
    int64_t t0 = ej__mono_ms();
    if (!stop)
        waitpid(daemon, NULL, 0);
    while (!item_gone(script, grandchild) && ej__mono_ms() - t0 < max_ms + 3000)
        ej__sleep_ms(2);
    int64_t took = ej__mono_ms() - t0;
    bool gone = item_gone(script, grandchild);
    if (stop) {
        /* Resumed, the daemon reaps its script and supervisor, and ends. */
        kill(daemon, SIGCONT);
        waitpid(daemon, NULL, 0);
    }
    /* The supervisor too, by the grace. */
    bool group_ended = false;
    for (int i = 0; i < (grace + 3000) / 10 && !group_ended; i++) {
        group_ended = group_gone(pgid);
        if (!group_ended)
            ej__sleep_ms(10);
    }
    if (!gone || !group_ended) {
        kill(-pgid, SIGKILL);
        kill(grandchild, SIGKILL);
        for (int i = 0; i < 200 && !group_gone(pgid); i++)
            ej__sleep_ms(10);
    }
    bool all_reaped = false;
    for (int i = 0; i < 200 && !all_reaped; i++) {
        all_reaped = waitpid(-1, NULL, WNOHANG) < 0 && errno == ECHILD;
        if (!all_reaped)
            ej__sleep_ms(10);
    }
    prctl(PR_SET_CHILD_SUBREAPER, 0);
    print_message("%s of the daemon (grace %lld ms%s): item processes %s after %lld ms\n",
                  stop ? "SIGSTOP" : "kill -9", (long long)grace,
                  trap[0] ? ", SIGTERM ignored" : "", gone ? "gone" : "STILL THERE",
                  (long long)took);
    assert_true(gone);
    assert_true(group_ended);
    assert_true(all_reaped);
    assert_true(took >= min_ms);
    assert_true(took <= max_ms);
    free(pids);
    free(cmd);
    free(pidfile);
    return took;
}

static void test_script_group_dies_with_daemon(void **state)
{
    (void)state;
    /* SIGTERM from the supervisor ends the item at once. */
    daemon_death_case("", 1000, 0, 1000, false);
    /* The group ignores SIGTERM: SIGKILL after the item's grace. */
    daemon_death_case("trap \"\" TERM;", 400, 390, 2500, false);
}

static void test_script_group_stops_with_stopped_daemon(void **state)
{
    (void)state;
    /* A daemon stopped for a second has its items stopped. */
    daemon_death_case("", 1000, 950, 2500, true);
}

struct spawner_item {
    struct ej_job_def def;
    ej_shard_context ctx;
    ej__exec_result res;
    int rc;
    int64_t ended_ms;
};

static void *spawner_item_thread(void *arg)
{
    struct spawner_item *si = arg;
    si->rc = ej__exec_run_item(&si->def, &si->ctx, NULL, &si->res);
    si->ended_ms = ej__mono_ms();
    return NULL;
}

/* The parent pid of pid, from /proc/PID/stat; -1 when unknown. */
static pid_t parent_of(pid_t pid)
{
    char path[64];
    snprintf(path, sizeof path, "/proc/%d/stat", (int)pid);
    char *st = slurp(path);
    const char *rp = st ? strrchr(st, ')') : NULL;
    int ppid = -1;
    if (rp == NULL || sscanf(rp + 2, "%*c %d", &ppid) != 1)
        ppid = -1;
    free(st);
    return ppid;
}

/*
 * kill -9 of the process that starts script items (the zygote; the OOM
 * killer may pick it) while an item runs whose group ignores SIGTERM. The
 * run must not end while a process of the item lives (the item's next run
 * would then overlap it): the group gets SIGTERM at once and SIGKILL after
 * the grace, the run ends after that with the spawner named as the cause,
 * and the next item starts through a new zygote.
 */
static void test_script_survives_spawner_kill(void **state)
{
    (void)state;
    char *pidfile = tmp_path("spawner-kill.pids");
    unlink(pidfile);
    char *cmd = ej__asprintf("/bin/sh -c 'trap \"\" TERM; sleep 60 & echo $$ $! > %s.tmp; "
                             "mv %s.tmp %s; wait'",
                             pidfile, pidfile, pidfile);
    static struct spawner_item si;
    si.def = (struct ej_job_def){.type = EJ_JOB_TYPE_SCRIPT};
    script_cmd(&si.def, cmd);
    si.def.script.kill_grace_ms = 500;
    si.def.error_handler.kind = EJ_ERROR_HANDLER_IGNORE;
    fill_ctx(&si.ctx, NULL, 0, NULL);
    pthread_t th;
    pthread_create(&th, NULL, spawner_item_thread, &si);
    char *pids = NULL;
    for (int i = 0; i < 1000 && pids == NULL; i++) {
        pids = slurp(pidfile);
        if (pids == NULL)
            ej__sleep_ms(10);
    }
    assert_non_null(pids);
    int script = 0, grandchild = 0;
    assert_int_equal(sscanf(pids, "%d %d", &script, &grandchild), 2);
    pid_t zygote = parent_of(script);
    assert_true(zygote > 1);
    assert_int_not_equal(zygote, getpid()); /* the zygote's item, not a supervisor's */
    assert_int_equal(kill(zygote, SIGKILL), 0);
    int64_t t0 = ej__mono_ms();
    pthread_join(th, NULL);
    int64_t took = si.ended_ms - t0;
    /* Every process of the item is gone when the run ends (a SIGKILL is
     * delivered within moments). */
    bool gone = false;
    for (int i = 0; i < 50 && !gone; i++) {
        gone = process_gone(script) && process_gone(grandchild);
        if (!gone)
            ej__sleep_ms(2);
    }
    print_message("kill -9 of the zygote: the run ended after %lld ms: %s\n", (long long)took,
                  si.res.failure_cause ? si.res.failure_cause : "(no failure)");
    if (!gone) {
        kill(script, SIGKILL);
        kill(grandchild, SIGKILL);
    }
    assert_true(gone);
    assert_true(took >= 450);
    assert_true(took < 3000);
    assert_int_equal(si.rc, EJ_EJOBFAILED);
    assert_non_null(si.res.failure_cause);
    assert_non_null(strstr(si.res.failure_cause, "the process that starts script items died"));
    assert_null(strstr(si.res.failure_cause, "SIGCHLD"));
    ej__exec_result_fini(&si.res);
    ej__exec_context_fini(&si.ctx);

    /* The next item starts through a new zygote. */
    struct ej_job_def d = {.type = EJ_JOB_TYPE_SCRIPT};
    script_cmd(&d, "/bin/sh -c 'exit 0'");
    ej_shard_context ctx;
    fill_ctx(&ctx, NULL, 1, NULL);
    ej__exec_result r;
    assert_int_equal(ej__exec_run_item(&d, &ctx, NULL, &r), 0);
    ej__exec_result_fini(&r);
    ej__exec_context_fini(&ctx);
    free(pids);
    free(cmd);
    free(pidfile);
}

/* --------------------------------------------------- simple / dataflow */

static int failing_simple(const ej_shard_context *ctx, void *user)
{
    (void)user;
    ej_shard_context_set_error(ctx, "item %d: no database", ctx->sharding_item);
    return -1;
}

static int silent_failing_simple(const ej_shard_context *ctx, void *user)
{
    (void)ctx;
    (void)user;
    return EJ_ETIMEDOUT;
}

static void test_simple_and_handlers(void **state)
{
    (void)state;
    struct ej_job_def d = {.type = EJ_JOB_TYPE_SIMPLE, .simple = noop_simple};
    ej_shard_context ctx;
    fill_ctx(&ctx, NULL, 2, NULL);
    ej__exec_result r;
    assert_int_equal(ej__exec_run_item(&d, &ctx, NULL, &r), 0);
    ej__exec_result_fini(&r);

    d.simple = failing_simple;
    d.error_handler.kind = EJ_ERROR_HANDLER_FAIL;
    assert_int_equal(ej__exec_run_item(&d, &ctx, NULL, &r), EJ_EJOBFAILED);
    assert_string_equal(r.failure_cause, "item 2: no database");
    assert_true(r.abort_run);
    ej__exec_result_fini(&r);
    ej__exec_context_fini(&ctx);

    d.simple = silent_failing_simple;
    d.error_handler.kind = EJ_ERROR_HANDLER_LOG;
    fill_ctx(&ctx, NULL, 2, NULL);
    assert_int_equal(ej__exec_run_item(&d, &ctx, NULL, &r), EJ_EJOBFAILED);
    char want[64];
    snprintf(want, sizeof(want), "job callback returned %d", EJ_ETIMEDOUT);
    assert_non_null(strstr(r.failure_cause, want));
    assert_false(r.abort_run);
    ej__exec_result_fini(&r);
    ej__exec_context_fini(&ctx);

    assert_false(ej__exec_handle_error(&d, "j", -1, "listener failed"));
    d.error_handler.kind = EJ_ERROR_HANDLER_FAIL;
    assert_true(ej__exec_handle_error(&d, "j", -1, "listener failed"));
}

struct flow {
    int batches_left;
    int fetched, processed;
    int stop_after; /* keep_going false after this many batches */
};

static long flow_fetch(const ej_shard_context *ctx, void **batch, void *user)
{
    (void)ctx;
    struct flow *f = user;
    f->fetched++;
    if (f->batches_left == 0)
        return 0;
    f->batches_left--;
    int *b = malloc(2 * sizeof *b);
    b[0] = 7;
    b[1] = 8;
    *batch = b;
    return 2;
}

static int flow_process(const ej_shard_context *ctx, void *batch, long count, void *user)
{
    (void)ctx;
    struct flow *f = user;
    assert_int_equal(count, 2);
    assert_int_equal(((int *)batch)[1], 8);
    free(batch);
    f->processed++;
    return 0;
}

static bool flow_keep_going(void *arg)
{
    struct flow *f = arg;
    return f->stop_after == 0 || f->processed < f->stop_after;
}

static void test_dataflow(void **state)
{
    (void)state;
    struct flow f = {.batches_left = 3};
    struct ej_job_def d = {.type = EJ_JOB_TYPE_DATAFLOW, .user = &f};
    d.dataflow.fetch = flow_fetch;
    d.dataflow.process = flow_process;
    run_config(&d)->streaming_process = true;
    ej_shard_context ctx;
    fill_ctx(&ctx, NULL, 0, NULL);
    ej__exec_result r;
    /* Streaming: until fetch returns nothing. */
    assert_int_equal(ej__exec_run_item(&d, &ctx, NULL, &r), 0);
    assert_int_equal(f.fetched, 4);
    assert_int_equal(f.processed, 3);
    ej__exec_result_fini(&r);
    /* Streaming stopped by the predicate (job stopped / resharding). */
    f = (struct flow){.batches_left = 5, .stop_after = 2};
    struct ej__exec_opts o = {.keep_going = flow_keep_going, .keep_going_arg = &f};
    assert_int_equal(ej__exec_run_item(&d, &ctx, &o, &r), 0);
    assert_int_equal(f.processed, 2);
    assert_int_equal(f.fetched, 2);
    ej__exec_result_fini(&r);
    /* Not streaming: one fetch, one process. */
    f = (struct flow){.batches_left = 5};
    run_config(&d)->streaming_process = false;
    assert_int_equal(ej__exec_run_item(&d, &ctx, NULL, &r), 0);
    assert_int_equal(f.fetched, 1);
    assert_int_equal(f.processed, 1);
    ej__exec_result_fini(&r);
    ej__exec_context_fini(&ctx);
}

/* --------------------------------------------------------------- http */

struct http_rec {
    pthread_mutex_t mu;
    char method[16];
    char url[128];
    char ctx_header[1024];
    char ctype[128];
    char body[1024];
    char token[64];
    int requests;
};
static struct http_rec rec = {.mu = PTHREAD_MUTEX_INITIALIZER};

struct conn {
    ej_buf body;
};

static enum MHD_Result on_request(void *cls, struct MHD_Connection *c, const char *url,
                                  const char *method, const char *version, const char *upload_data,
                                  size_t *upload_size, void **con_cls)
{
    (void)cls;
    (void)version;
    if (*con_cls == NULL) {
        struct conn *k = calloc(1, sizeof *k);
        ej__buf_init(&k->body);
        *con_cls = k;
        return MHD_YES;
    }
    struct conn *k = *con_cls;
    if (*upload_size > 0) {
        ej__buf_append(&k->body, upload_data, *upload_size);
        *upload_size = 0;
        return MHD_YES;
    }
    const char *h = MHD_lookup_connection_value(c, MHD_HEADER_KIND, "shardingContext");
    const char *ct = MHD_lookup_connection_value(c, MHD_HEADER_KIND, "Content-Type");
    const char *tok = MHD_lookup_connection_value(c, MHD_HEADER_KIND, "X-Ejob-Fencing-Token");
    pthread_mutex_lock(&rec.mu);
    rec.requests++;
    snprintf(rec.method, sizeof rec.method, "%s", method);
    snprintf(rec.url, sizeof rec.url, "%s", url);
    snprintf(rec.ctx_header, sizeof rec.ctx_header, "%s", h ? h : "");
    snprintf(rec.ctype, sizeof rec.ctype, "%s", ct ? ct : "");
    snprintf(rec.token, sizeof rec.token, "%s", tok ? tok : "(none)");
    snprintf(rec.body, sizeof rec.body, "%s", k->body.data ? k->body.data : "");
    pthread_mutex_unlock(&rec.mu);
    unsigned status = 200;
    const char *reply = "done";
    if (strcmp(url, "/fail") == 0) {
        status = 500;
        reply = "kaput: database down";
    } else if (strcmp(url, "/slow") == 0) {
        ej__sleep_ms(1500);
    } else if (strcmp(url, "/created") == 0) {
        status = 201;
    }
    struct MHD_Response *resp =
        MHD_create_response_from_buffer(strlen(reply), (void *)reply, MHD_RESPMEM_MUST_COPY);
    enum MHD_Result ok = MHD_queue_response(c, status, resp);
    MHD_destroy_response(resp);
    return ok;
}

static void on_completed(void *cls, struct MHD_Connection *c, void **con_cls,
                         enum MHD_RequestTerminationCode toe)
{
    (void)cls;
    (void)c;
    (void)toe;
    struct conn *k = *con_cls;
    if (k) {
        ej__buf_fini(&k->body);
        free(k);
        *con_cls = NULL;
    }
}

static void test_http(void **state)
{
    (void)state;
    struct sockaddr_in addr = {.sin_family = AF_INET};
    addr.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    struct MHD_Daemon *d =
        MHD_start_daemon(MHD_USE_INTERNAL_POLLING_THREAD | MHD_USE_THREAD_PER_CONNECTION, 0, NULL,
                         NULL, on_request, NULL, MHD_OPTION_SOCK_ADDR, &addr,
                         MHD_OPTION_NOTIFY_COMPLETED, on_completed, NULL, MHD_OPTION_END);
    assert_non_null(d);
    int port = MHD_get_daemon_info(d, MHD_DAEMON_INFO_BIND_PORT)->port;
    char *ok_url = ej__asprintf("http://127.0.0.1:%d/ok", port);
    char *fail_url = ej__asprintf("http://127.0.0.1:%d/fail", port);
    char *slow_url = ej__asprintf("http://127.0.0.1:%d/slow", port);
    char *created_url = ej__asprintf("http://127.0.0.1:%d/created", port);

    ej_shard_context ctx;
    fill_ctx(&ctx, NULL, 1, "Shanghai");
    ctx.fencing_token = 4294967302LL;
    char *want_json = ej__exec_context_json(&ctx);
    const char *extra[] = {"X-Extra: yes", "x-ejob-fencing-token: 1", NULL};
    struct ej_job_def j = {.type = EJ_JOB_TYPE_HTTP};
    cfg_str(&run_config(&j)->http.uri, ok_url);
    cfg_str(&run_config(&j)->http.method, "POST");
    cfg_str(&run_config(&j)->http.data, "a=1&b=2");
    cfg_str(&run_config(&j)->http.content_type, "application/x-www-form-urlencoded");
    j.http.headers = extra;
    ej__exec_result r;
    assert_int_equal(ej__exec_run_item(&j, &ctx, NULL, &r), 0);
    assert_int_equal(r.http_status, 200);
    assert_string_equal(r.output, "done");
    pthread_mutex_lock(&rec.mu);
    assert_string_equal(rec.method, "POST");
    assert_string_equal(rec.url, "/ok");
    assert_string_equal(rec.ctx_header, want_json);
    assert_string_equal(rec.ctype, "application/x-www-form-urlencoded");
    assert_string_equal(rec.body, "a=1&b=2");
    /* The item's token, not the one the job's headers tried to set. */
    assert_string_equal(rec.token, "4294967302");
    pthread_mutex_unlock(&rec.mu);
    ej__exec_result_fini(&r);

    /* GET without a method; 201 is success too. */
    cfg_str(&run_config(&j)->http.method, NULL);
    cfg_str(&run_config(&j)->http.data, NULL);
    cfg_str(&run_config(&j)->http.content_type, NULL);
    cfg_str(&run_config(&j)->http.uri, created_url);
    assert_int_equal(ej__exec_run_item(&j, &ctx, NULL, &r), 0);
    assert_int_equal(r.http_status, 201);
    pthread_mutex_lock(&rec.mu);
    assert_string_equal(rec.method, "GET");
    assert_string_equal(rec.ctype, "");
    pthread_mutex_unlock(&rec.mu);
    ej__exec_result_fini(&r);

    /* 500: a failure naming the status and the body. */
    cfg_str(&run_config(&j)->http.uri, fail_url);
    cfg_str(&run_config(&j)->http.method, "PUT");
    cfg_str(&run_config(&j)->http.data, "x");
    j.error_handler.kind = EJ_ERROR_HANDLER_IGNORE;
    assert_int_equal(ej__exec_run_item(&j, &ctx, NULL, &r), EJ_EJOBFAILED);
    assert_int_equal(r.http_status, 500);
    assert_non_null(strstr(r.failure_cause, "PUT"));
    assert_non_null(strstr(r.failure_cause, "status 500: kaput: database down"));
    pthread_mutex_lock(&rec.mu);
    assert_string_equal(rec.method, "PUT");
    assert_string_equal(rec.body, "x");
    pthread_mutex_unlock(&rec.mu);
    ej__exec_result_fini(&r);

    /* The server answers after 1.5 s; the read timeout is 300 ms. */
    cfg_str(&run_config(&j)->http.uri, slow_url);
    cfg_str(&run_config(&j)->http.method, "GET");
    run_config(&j)->http.connect_timeout_ms = 200;
    run_config(&j)->http.read_timeout_ms = 300;
    int64_t t0 = ej__mono_ms();
    assert_int_equal(ej__exec_run_item(&j, &ctx, NULL, &r), EJ_ETIMEDOUT);
    int64_t took = ej__mono_ms() - t0;
    assert_true(took < 1400);
    assert_true(r.timed_out);
    assert_non_null(strstr(r.failure_cause, "timed out"));
    ej__exec_result_fini(&r);

    /* Cancelled 200 ms into a request the server answers after 1.5 s:
     * the transfer is aborted at once. */
    atomic_bool cancel = false;
    ej_shard_context cctx;
    fill_ctx(&cctx, &cancel, 0, NULL);
    run_config(&j)->http.read_timeout_ms = 5000;
    pthread_t th;
    pthread_create(&th, NULL, cancel_later, &cancel);
    assert_int_equal(ej__exec_run_item(&j, &cctx, NULL, &r), EJ_ESTOPPED);
    took = ej__mono_ms() - atomic_load(&cancelled_at_ms);
    pthread_join(th, NULL);
    print_message("http item cancelled: aborted %lld ms after the flag was set\n", (long long)took);
    assert_true(took < 750);
    assert_true(r.cancelled);
    assert_non_null(strstr(r.failure_cause, "cancelled"));
    ej__exec_result_fini(&r);
    ej__exec_context_fini(&cctx);

    /* The job's timeout (300 ms) ends a request its read timeout (5 s)
     * would let run: aborted, and the result is a timeout, not a cancel. */
    ej_shard_context tctx;
    fill_ctx(&tctx, NULL, 0, NULL);
    ej__exec_context_limit(&tctx, NULL, 300);
    t0 = ej__mono_ms();
    assert_int_equal(ej__exec_run_item(&j, &tctx, NULL, &r), EJ_ETIMEDOUT);
    took = ej__mono_ms() - t0;
    print_message("http item past its timeoutSeconds: ended after %lld ms (limit 300)\n",
                  (long long)took);
    assert_true(took >= 300 && took < 800);
    assert_true(r.timed_out);
    assert_false(r.cancelled);
    assert_false(r.killed);
    ej__exec_result_fini(&r);
    ej__exec_context_fini(&tctx);

    /* Killed 200 ms in: aborted, recorded as killed. */
    atomic_bool kill = false;
    fill_ctx(&tctx, NULL, 0, NULL);
    ej__exec_context_limit(&tctx, &kill, 0);
    pthread_create(&th, NULL, cancel_later, &kill);
    assert_int_equal(ej__exec_run_item(&j, &tctx, NULL, &r), EJ_ESTOPPED);
    took = ej__mono_ms() - atomic_load(&cancelled_at_ms);
    pthread_join(th, NULL);
    assert_true(took < 750);
    assert_true(r.killed);
    assert_false(r.timed_out);
    assert_non_null(strstr(r.failure_cause, "killed"));
    ej__exec_result_fini(&r);
    ej__exec_context_fini(&tctx);

    /* Nothing listens on this port (the daemon's port + 0 is taken:
     * bind a socket, close it, use its port). */
    cfg_str(&run_config(&j)->http.uri, "http://127.0.0.1:1/nothing");
    assert_int_equal(ej__exec_run_item(&j, &ctx, NULL, &r), EJ_EJOBFAILED);
    assert_non_null(strstr(r.failure_cause, "http://127.0.0.1:1/nothing"));
    ej__exec_result_fini(&r);

    MHD_stop_daemon(d);
    free(want_json);
    ej__exec_context_fini(&ctx);
    free(ok_url);
    free(fail_url);
    free(slow_url);
    free(created_url);
}

/* ---------------------------------------------------------- event bus */

struct sink_rec {
    pthread_mutex_t mu;
    int n;
    int64_t sleep_ms;
    char last_job[64];
    char last_items[64];
    char last_cause[64];
    int order_ok;
    int next_item;
};

static void rec_sink(const ej_event *ev, void *user)
{
    struct sink_rec *s = user;
    if (s->sleep_ms)
        ej__sleep_ms(s->sleep_ms);
    pthread_mutex_lock(&s->mu);
    s->n++;
    if (ev->type == EJ_EVENT_EXECUTION) {
        snprintf(s->last_job, sizeof s->last_job, "%s", ev->u.execution.job_name);
        snprintf(s->last_cause, sizeof s->last_cause, "%s",
                 ev->u.execution.failure_cause ? ev->u.execution.failure_cause : "(null)");
        if (ev->u.execution.sharding_item == s->next_item)
            s->order_ok++;
        s->next_item = ev->u.execution.sharding_item + 1;
    } else {
        snprintf(s->last_items, sizeof s->last_items, "%s", ev->u.status.sharding_item);
    }
    pthread_mutex_unlock(&s->mu);
}

static void test_event_id(void **state)
{
    (void)state;
    char a[EJ_EVENT_ID_LEN], b[EJ_EVENT_ID_LEN];
    ej_event_new_id(a);
    ej_event_new_id(b);
    assert_int_equal(strlen(a), 36);
    assert_true(a[8] == '-' && a[13] == '-' && a[18] == '-' && a[23] == '-');
    assert_int_equal(a[14], '4');
    assert_non_null(strchr("89ab", a[19]));
    assert_string_not_equal(a, b);
}

static void test_event_bus_flush_on_destroy(void **state)
{
    (void)state;
    ej_event_bus *bus;
    assert_int_equal(ej_event_bus_create(NULL, &bus), 0);
    struct sink_rec s = {.mu = PTHREAD_MUTEX_INITIALIZER, .sleep_ms = 5};
    assert_int_equal(ej_event_bus_add_sink(bus, rec_sink, &s), 0);
    assert_int_equal(ej_event_bus_add_sink(bus, ej_event_log_sink, NULL), 0);
    char job[32];
    for (int i = 0; i < 20; i++) {
        snprintf(job, sizeof job, "job-%d", i);
        ej_execution_event e = {.job_name = job, .task_id = "t", .hostname = "h", .ip = "1.2.3.4"};
        ej_event_new_id(e.id);
        e.sharding_item = i;
        e.start_time_ms = 1000;
        e.complete_time_ms = i % 2 ? 1500 : 0;
        e.failure_cause = i == 19 ? "it broke\nat line 2" : NULL;
        assert_int_equal(ej_event_bus_post_execution(bus, &e), 0);
        /* The bus copied the strings: overwrite ours. */
        memset(job, 'x', sizeof job - 1);
    }
    ej_status_event st = {.job_name = "j",
                          .task_id = "t",
                          .slave_id = "1.2.3.4",
                          .sharding_item = "[0, 1]",
                          .state = EJ_TASK_RUNNING};
    ej_event_new_id(st.id);
    assert_int_equal(ej_event_bus_post_status(bus, &st), 0);
    ej_event bad = {.type = 99};
    assert_int_equal(ej_event_bus_post(bus, &bad), EJ_EINVAL);
    /* Destroy flushes everything before returning. */
    ej_event_bus_destroy(bus);
    assert_int_equal(s.n, 21);
    assert_int_equal(s.order_ok, 20);
    assert_string_equal(s.last_job, "job-19");
    assert_string_equal(s.last_cause, "it broke\nat line 2");
    assert_string_equal(s.last_items, "[0, 1]");
}

static void test_event_bus_never_blocks(void **state)
{
    (void)state;
    ej_event_bus *bus;
    struct ej_event_bus_opts o = {.capacity = 4, .flush_timeout_ms = 300};
    assert_int_equal(ej_event_bus_create(&o, &bus), 0);
    struct sink_rec s = {.mu = PTHREAD_MUTEX_INITIALIZER, .sleep_ms = 200};
    assert_int_equal(ej_event_bus_add_sink(bus, rec_sink, &s), 0);
    int accepted = 0, dropped = 0;
    int64_t worst = 0;
    for (int i = 0; i < 100; i++) {
        ej_status_event st = {.job_name = "j", .task_id = "t", .sharding_item = "[0]"};
        int64_t t0 = ej__mono_ms();
        int rc = ej_event_bus_post_status(bus, &st);
        int64_t dt = ej__mono_ms() - t0;
        worst = dt > worst ? dt : worst;
        if (rc == 0)
            accepted++;
        else if (rc == EJ_EAGAIN)
            dropped++;
    }
    assert_true(worst < 150); /* the sink sleeps 200 ms per event */
    assert_true(accepted <= 5);
    assert_int_equal(accepted + dropped, 100);
    struct ej_event_bus_stats stats;
    ej_event_bus_stats(bus, &stats);
    assert_int_equal(stats.dropped, (uint64_t)dropped);
    assert_int_equal(stats.posted, (uint64_t)accepted);
    assert_int_equal(ej_event_bus_flush(bus, 10), EJ_ETIMEDOUT);
    /* Destroy waits at most flush_timeout_ms for the queue, then drops
     * the rest (after the sink call in progress returns). */
    int64_t t0 = ej__mono_ms();
    ej_event_bus_destroy(bus);
    int64_t took = ej__mono_ms() - t0;
    assert_true(took < 1000);
    assert_true(s.n < accepted);
    assert_true(s.n >= 1);
}

static void test_event_bus_flush(void **state)
{
    (void)state;
    ej_event_bus *bus;
    assert_int_equal(ej_event_bus_create(NULL, &bus), 0);
    struct sink_rec s = {.mu = PTHREAD_MUTEX_INITIALIZER, .sleep_ms = 20};
    assert_int_equal(ej_event_bus_add_sink(bus, rec_sink, &s), 0);
    for (int i = 0; i < 5; i++) {
        ej_status_event st = {.job_name = "j", .task_id = "t", .sharding_item = "[1]"};
        assert_int_equal(ej_event_bus_post_status(bus, &st), 0);
    }
    assert_int_equal(ej_event_bus_flush(bus, 5000), 0);
    pthread_mutex_lock(&s.mu);
    assert_int_equal(s.n, 5);
    pthread_mutex_unlock(&s.mu);
    struct ej_event_bus_stats stats;
    ej_event_bus_stats(bus, &stats);
    assert_int_equal(stats.delivered, 5);
    assert_int_equal(stats.queued, 0);
    ej_event_bus_destroy(bus);
    ej_event_bus_destroy(NULL);
    assert_int_equal(ej_event_bus_create(NULL, NULL), EJ_EINVAL);
}

static int teardown_tmp(void **state)
{
    (void)state;
    for (size_t i = 0; i < n_run_cfgs; i++)
        ej_job_config_fini(&run_cfgs[i]);
    if (tmpdir[0]) {
        char *cmd = ej__asprintf("rm -rf '%s'", tmpdir);
        int rc = system(cmd);
        (void)rc;
        free(cmd);
    }
    return 0;
}

int main(void)
{
    signal(SIGPIPE, SIG_IGN);
    ej_log_set_level(EJ_LOG_WARN);
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_context_json),
        cmocka_unit_test(test_task_id_and_items),
        cmocka_unit_test(test_cancel_and_error),
        cmocka_unit_test(test_names),
        cmocka_unit_test(test_validate),
        cmocka_unit_test(test_split_command),
        cmocka_unit_test(test_script_context_per_item),
        cmocka_unit_test(test_script_failure_exit_code),
        cmocka_unit_test(test_script_fencing_token_env),
        cmocka_unit_test(test_script_live_output),
        cmocka_unit_test(test_script_timeout_kills_group),
        cmocka_unit_test(test_c_job_timeout_and_kill),
        cmocka_unit_test(test_script_output_cap),
        cmocka_unit_test(test_script_cancel),
        cmocka_unit_test(test_script_group_dies_with_daemon),
        cmocka_unit_test(test_script_group_stops_with_stopped_daemon),
        cmocka_unit_test(test_script_survives_spawner_kill),
        cmocka_unit_test(test_simple_and_handlers),
        cmocka_unit_test(test_dataflow),
        cmocka_unit_test(test_http),
        cmocka_unit_test(test_event_id),
        cmocka_unit_test(test_event_bus_flush_on_destroy),
        cmocka_unit_test(test_event_bus_never_blocks),
        cmocka_unit_test(test_event_bus_flush),
    };
    return cmocka_run_group_tests(tests, NULL, teardown_tmp);
}
