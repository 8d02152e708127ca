/* Shard contexts, names, validation, and the simple/dataflow runners. */
#include <stdarg.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <unistd.h>

#include "common/util.h"
#include "ejob/error.h"
#include "ejob/job.h"
#include "ejob/log.h"
#include "exec/exec_impl.h"
#include "exec/internal.h"

#define MOD "exec"

/* ------------------------------------------------------------ contexts */

bool ej_shard_context_is_cancelled(const ej_shard_context *ctx)
{
    if (ctx == NULL)
        return false;
    if (ctx->cancel_ != NULL && atomic_load((const atomic_bool *)ctx->cancel_))
        return true;
    if (ctx->kill_ != NULL && atomic_load((const atomic_bool *)ctx->kill_))
        return true;
    return ej__exec_timed_out(ctx);
}

bool ej__exec_timed_out(const ej_shard_context *ctx)
{
    return ctx != NULL && ctx->deadline_ms_ > 0 && ej__mono_ms() >= ctx->deadline_ms_;
}

bool ej__exec_cancellable(const ej_shard_context *ctx)
{
    return ctx != NULL && (ctx->cancel_ != NULL || ctx->kill_ != NULL || ctx->deadline_ms_ > 0);
}

void ej__exec_context_limit(ej_shard_context *ctx, const atomic_bool *kill, int64_t timeout_ms)
{
    ctx->kill_ = kill;
    ctx->deadline_ms_ = timeout_ms > 0 ? ej__mono_ms() + timeout_ms : 0;
}

void ej_shard_context_set_error(const ej_shard_context *ctx, const char *fmt, ...)
{
    if (ctx == NULL || fmt == NULL)
        return;
    va_list ap;
    va_start(ap, fmt);
    char *msg = NULL;
    int n = vasprintf(&msg, fmt, ap);
    va_end(ap);
    if (n < 0)
        return;
    /* The context is const for the job, but every context ejob hands out
     * is a writable object: the error slot is ours. */
    ej_shard_context *w = (ej_shard_context *)ctx;
    free(w->error_);
    w->error_ = msg;
}

void ej__exec_context_init(ej_shard_context *ctx, const atomic_bool *cancel)
{
    memset(ctx, 0, sizeof *ctx);
    ctx->job_parameter = "";
    ctx->cancel_ = cancel;
}

void ej__exec_context_fini(ej_shard_context *ctx)
{
    if (ctx == NULL)
        return;
    free(ctx->error_);
    ctx->error_ = NULL;
}

const char *ej__exec_context_error(const ej_shard_context *ctx)
{
    return ctx ? ctx->error_ : NULL;
}

static void json_field(ej_buf *b, bool *first, const char *key, const char *val)
{
    if (val == NULL)
        return;
    char *q = ej__json_quote(val);
    if (q == NULL) {
        b->failed = true;
        return;
    }
    ej__buf_printf(b, "%s\"%s\":%s", *first ? "" : ",", key, q);
    *first = false;
    free(q);
}

char *ej__exec_context_json(const ej_shard_context *ctx)
{
    if (ctx == NULL)
        return NULL;
    ej_buf b;
    ej__buf_init(&b);
    bool first = true;
    ej__buf_puts(&b, "{");
    json_field(&b, &first, "jobName", ctx->job_name);
    json_field(&b, &first, "taskId", ctx->task_id);
    ej__buf_printf(&b, "%s\"shardingTotalCount\":%d", first ? "" : ",", ctx->sharding_total_count);
    first = false;
    json_field(&b, &first, "jobParameter", ctx->job_parameter);
    ej__buf_printf(&b, ",\"shardingItem\":%d", ctx->sharding_item);
    json_field(&b, &first, "shardingParameter", ctx->sharding_parameter);
    ej__buf_puts(&b, "}");
    if (b.failed) {
        ej__buf_fini(&b);
        return NULL;
    }
    return ej__buf_steal(&b);
}

char *ej__exec_task_id(const char *job_name, const int *items, size_t count,
                       const char *instance_id)
{
    if (job_name == NULL || instance_id == NULL || (items == NULL && count > 0))
        return NULL;
    ej_buf b;
    ej__buf_init(&b);
    ej__buf_printf(&b, "%s@-@", job_name);
    for (size_t i = 0; i < count; i++)
        ej__buf_printf(&b, "%s%d", i ? "," : "", items[i]);
    ej__buf_printf(&b, "@-@READY@-@%s", instance_id);
    if (b.failed) {
        ej__buf_fini(&b);
        return NULL;
    }
    return ej__buf_steal(&b);
}

/* --------------------------------------------------------------- names */

const char *ej_execution_source_name(ej_execution_source source)
{
    switch (source) {
    case EJ_EXEC_NORMAL_TRIGGER:
        return "NORMAL_TRIGGER";
    case EJ_EXEC_MISFIRE:
        return "MISFIRE";
    case EJ_EXEC_FAILOVER:
        return "FAILOVER";
    }
    return "UNKNOWN";
}

int ej_execution_source_parse(const char *name, ej_execution_source *out)
{
    if (name == NULL || out == NULL)
        return EJ_EINVAL;
    static const ej_execution_source all[] = {EJ_EXEC_NORMAL_TRIGGER, EJ_EXEC_MISFIRE,
                                              EJ_EXEC_FAILOVER};
    for (size_t i = 0; i < sizeof all / sizeof all[0]; i++) {
        if (strcmp(name, ej_execution_source_name(all[i])) == 0) {
            *out = all[i];
            return 0;
        }
    }
    return EJ_EINVAL;
}

int ej_error_handler_parse(const char *name, ej_error_handler_kind *out)
{
    if (out == NULL)
        return EJ_EINVAL;
    if (name == NULL || name[0] == '\0' || strcasecmp(name, "LOG") == 0 ||
        strcmp(name, EJ_CONFIG_DEFAULT_JOB_EXCEPTION_HANDLER) == 0) {
        *out = EJ_ERROR_HANDLER_LOG;
    } else if (strcasecmp(name, "IGNORE") == 0) {
        *out = EJ_ERROR_HANDLER_IGNORE;
    } else if (strcasecmp(name, "THROW") == 0 || strcasecmp(name, "FAIL") == 0) {
        *out = EJ_ERROR_HANDLER_FAIL;
    } else {
        return EJ_ECONFIG;
    }
    return 0;
}

const char *ej_error_handler_name(ej_error_handler_kind kind)
{
    switch (kind) {
    case EJ_ERROR_HANDLER_LOG:
        return "LOG";
    case EJ_ERROR_HANDLER_IGNORE:
        return "IGNORE";
    case EJ_ERROR_HANDLER_FAIL:
        return "THROW";
    case EJ_ERROR_HANDLER_CUSTOM:
        return "CUSTOM";
    }
    return "UNKNOWN";
}

int ej_executor_kind_parse(const char *name, ej_executor_kind *out)
{
    if (out == NULL)
        return EJ_EINVAL;
    if (name == NULL || name[0] == '\0' || strcasecmp(name, "CPU") == 0 ||
        strcmp(name, EJ_CONFIG_DEFAULT_EXECUTOR_SERVICE_HANDLER) == 0) {
        *out = EJ_EXECUTOR_CPU;
    } else if (strcasecmp(name, "SINGLE_THREAD") == 0) {
        *out = EJ_EXECUTOR_SINGLE_THREAD;
    } else {
        return EJ_ECONFIG;
    }
    return 0;
}

const char *ej_executor_kind_name(ej_executor_kind kind)
{
    switch (kind) {
    case EJ_EXECUTOR_CPU:
        return "CPU";
    case EJ_EXECUTOR_SINGLE_THREAD:
        return "SINGLE_THREAD";
    case EJ_EXECUTOR_FIXED:
        return "FIXED";
    }
    return "UNKNOWN";
}

int ej_executor_concurrency(ej_executor_kind kind, int threads)
{
    switch (kind) {
    case EJ_EXECUTOR_SINGLE_THREAD:
        return 1;
    case EJ_EXECUTOR_FIXED:
        return threads < 1 ? 1 : threads;
    case EJ_EXECUTOR_CPU:
        break;
    }
    long n = sysconf(_SC_NPROCESSORS_ONLN);
    return 2 * (n > 0 ? (int)n : 1);
}

/* ---------------------------------------------------------- validation */

static int config_err(char *err, size_t errlen, const char *fmt, ...) EJ_PRINTF(3, 4);

static int config_err(char *err, size_t errlen, const char *fmt, ...)
{
    if (err && errlen) {
        va_list ap;
        va_start(ap, fmt);
        vsnprintf(err, errlen, fmt, ap);
        va_end(ap);
    }
    return EJ_ECONFIG;
}

int ej_job_def_validate(const struct ej_job_def *def, char *err, size_t errlen)
{
    if (def == NULL)
        return EJ_EINVAL;
    switch (def->type) {
    case EJ_JOB_TYPE_SIMPLE:
        if (def->simple == NULL)
            return config_err(err, errlen, "simple: no callback for a SIMPLE job");
        break;
    case EJ_JOB_TYPE_DATAFLOW:
        if (def->dataflow.fetch == NULL)
            return config_err(err, errlen, "dataflow.fetch: no callback for a DATAFLOW job");
        if (def->dataflow.process == NULL)
            return config_err(err, errlen, "dataflow.process: no callback for a DATAFLOW job");
        break;
    case EJ_JOB_TYPE_SCRIPT:
    case EJ_JOB_TYPE_HTTP:
        break;
    default:
        return config_err(err, errlen, "type: unknown job type %d", (int)def->type);
    }
    /* The run limits are the configuration's, set by ejob for each fire. */
    if (def->script.timeout_ms != 0)
        return config_err(err, errlen,
                          "script.timeout_ms: set by the configuration's timeoutSeconds, not "
                          "by a definition");
    if (def->script.kill_grace_ms != 0)
        return config_err(err, errlen,
                          "script.kill_grace_ms: set by the configuration's timeoutGraceSeconds, "
                          "not by a definition");
    switch (def->error_handler.kind) {
    case EJ_ERROR_HANDLER_LOG:
        break;
    case EJ_ERROR_HANDLER_CUSTOM:
        if (def->error_handler.fn == NULL)
            return config_err(err, errlen, "error_handler.fn: CUSTOM handler without a function");
        break;
    case EJ_ERROR_HANDLER_IGNORE:
    case EJ_ERROR_HANDLER_FAIL:
        return config_err(err, errlen,
                          "error_handler.kind: %s is set by the configuration's "
                          "jobProperties.job_exception_handler, not by a definition",
                          ej_error_handler_name(def->error_handler.kind));
    default:
        return config_err(err, errlen, "error_handler.kind: unknown (%d)",
                          (int)def->error_handler.kind);
    }
    if (def->executor == EJ_EXECUTOR_SINGLE_THREAD)
        return config_err(err, errlen,
                          "executor: SINGLE_THREAD is set by the configuration's "
                          "jobProperties.executor_service_handler, not by a definition");
    if ((unsigned)def->executor > EJ_EXECUTOR_FIXED)
        return config_err(err, errlen, "executor: unknown (%d)", (int)def->executor);
    if (def->listener_count > 0 && def->listeners == NULL)
        return config_err(err, errlen, "listeners: NULL with listener_count %zu",
                          def->listener_count);
    return 0;
}

/* -------------------------------------------------------------- errors */

bool ej__exec_handle_error(const struct ej_job_def *def, const char *job_name, int item,
                           const char *message)
{
    const char *job = job_name ? job_name : "?";
    const char *msg = message ? message : "unknown failure";
    ej_error_handler_kind kind = def ? def->error_handler.kind : EJ_ERROR_HANDLER_LOG;
    switch (kind) {
    case EJ_ERROR_HANDLER_IGNORE:
        return false;
    case EJ_ERROR_HANDLER_CUSTOM:
        if (def->error_handler.fn)
            return def->error_handler.fn(job, item, msg, def->error_handler.user);
        break;
    case EJ_ERROR_HANDLER_FAIL:
    case EJ_ERROR_HANDLER_LOG:
        break;
    }
    if (item >= 0)
        EJ_LOG(EJ_LOG_ERROR, MOD, EJ_EJOBFAILED,
               "Job '%s' exception occur in job processing (item %d): %s", job, item, msg);
    else
        EJ_LOG(EJ_LOG_ERROR, MOD, EJ_EJOBFAILED, "Job '%s' exception occur in job processing: %s",
               job, msg);
    return kind == EJ_ERROR_HANDLER_FAIL;
}

void ej__exec_listeners_before(const struct ej_job_def *def, const ej_shard_contexts_info *info)
{
    if (def == NULL || def->listeners == NULL)
        return;
    for (size_t i = 0; i < def->listener_count; i++) {
        if (def->listeners[i].before)
            def->listeners[i].before(info, def->listeners[i].user);
    }
}

void ej__exec_listeners_after(const struct ej_job_def *def, const ej_shard_contexts_info *info)
{
    if (def == NULL || def->listeners == NULL)
        return;
    for (size_t i = 0; i < def->listener_count; i++) {
        if (def->listeners[i].after)
            def->listeners[i].after(info, def->listeners[i].user);
    }
}

/* ---------------------------------------------------------------- runs */

void ej__exec_result_fini(ej__exec_result *res)
{
    if (res == NULL)
        return;
    free(res->failure_cause);
    free(res->output);
    free(res->err_output);
    memset(res, 0, sizeof *res);
}

void ej__exec_fail(ej__exec_result *res, int rc, const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    char *msg = NULL;
    if (vasprintf(&msg, fmt, ap) < 0)
        msg = NULL;
    va_end(ap);
    free(res->failure_cause);
    res->failure_cause = msg;
    res->rc = rc;
}

/* The failure message for a callback that returned rc. */
static void callback_failed(const ej_shard_context *ctx, ej__exec_result *res, const char *what,
                            long rc)
{
    const char *msg = ej__exec_context_error(ctx);
    if (msg)
        ej__exec_fail(res, EJ_EJOBFAILED, "%s", msg);
    else
        ej__exec_fail(res, EJ_EJOBFAILED, "%s returned %ld (%s)", what, rc, ej_strerror((int)rc));
}

static void run_simple(const struct ej_job_def *def, const ej_shard_context *ctx,
                       ej__exec_result *res)
{
    int rc = def->simple(ctx, def->user);
    if (rc < 0)
        callback_failed(ctx, res, "job callback", rc);
}

static void run_dataflow(const struct ej_job_def *def, const ej_shard_context *ctx,
                         const struct ej__exec_opts *opts, ej__exec_result *res)
{
    const struct ej_dataflow_job *d = &def->dataflow;
    bool streaming = def->config_ != NULL && def->config_->streaming_process;
    for (;;) {
        void *batch = NULL;
        long n = d->fetch(ctx, &batch, def->user);
        if (n < 0) {
            callback_failed(ctx, res, "dataflow fetch", n);
            return;
        }
        if (n == 0)
            return;
        int rc = d->process(ctx, batch, n, def->user);
        if (rc < 0) {
            callback_failed(ctx, res, "dataflow process", rc);
            return;
        }
        if (!streaming)
            return;
        if (ej_shard_context_is_cancelled(ctx)) {
            res->cancelled = true;
            return;
        }
        if (opts && opts->keep_going && !opts->keep_going(opts->keep_going_arg))
            return;
    }
}

/*
 * Who ended the item, whatever the runner saw first: a kill (the run is
 * killed, even when the callback then returned 0), else its deadline (a
 * timeout: a C callback that returns after it, having ignored the flag,
 * timed out all the same), else the job's own cancellation as the runner
 * reported it.
 */
static void classify_stop(const ej_shard_context *ctx, ej__exec_result *res)
{
    if (ctx->kill_ != NULL && atomic_load((const atomic_bool *)ctx->kill_)) {
        res->killed = true;
        res->timed_out = false;
        res->cancelled = false;
        if (res->failure_cause == NULL || res->rc == 0 || res->rc == EJ_ESTOPPED)
            ej__exec_fail(res, EJ_ESTOPPED, "killed by an operator");
        res->rc = EJ_ESTOPPED;
        return;
    }
    if (ej__exec_timed_out(ctx) && !res->timed_out) {
        int64_t over = ej__mono_ms() - ctx->deadline_ms_;
        res->timed_out = true;
        res->cancelled = false;
        ej__exec_fail(res, EJ_ETIMEDOUT, "timed out (timeoutSeconds passed %lld ms ago)%s%s",
                      (long long)over, res->failure_cause ? ": " : "",
                      res->failure_cause ? res->failure_cause : "");
    }
}

int ej__exec_run_item(const struct ej_job_def *def, const ej_shard_context *ctx,
                      const struct ej__exec_opts *opts, ej__exec_result *res)
{
    if (res == NULL)
        return EJ_EINVAL;
    memset(res, 0, sizeof *res);
    res->exit_code = -1;
    if (def == NULL || ctx == NULL) {
        ej__exec_fail(res, EJ_EINVAL, "no job definition or context");
        return res->rc;
    }
    switch (def->type) {
    case EJ_JOB_TYPE_SIMPLE:
        if (def->simple == NULL)
            ej__exec_fail(res, EJ_ECONFIG, "job '%s' has no simple callback", ctx->job_name);
        else
            run_simple(def, ctx, res);
        break;
    case EJ_JOB_TYPE_DATAFLOW:
        if (def->dataflow.fetch == NULL || def->dataflow.process == NULL)
            ej__exec_fail(res, EJ_ECONFIG, "job '%s' has no dataflow callbacks", ctx->job_name);
        else
            run_dataflow(def, ctx, opts, res);
        break;
    case EJ_JOB_TYPE_SCRIPT:
        ej__exec_run_script(&def->script, def->config_, ctx, opts, res);
        break;
    case EJ_JOB_TYPE_HTTP:
        ej__exec_run_http(&def->http, def->config_, ctx, res);
        break;
    default:
        ej__exec_fail(res, EJ_ECONFIG, "job '%s': unknown job type %d", ctx->job_name,
                      (int)def->type);
        break;
    }
    classify_stop(ctx, res);
    if (res->rc != 0) {
        if (res->failure_cause == NULL)
            ej__exec_fail(res, res->rc, "%s", ej_strerror(res->rc));
        res->abort_run =
            ej__exec_handle_error(def, ctx->job_name, ctx->sharding_item, res->failure_cause);
    }
    return res->rc;
}
