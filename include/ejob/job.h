/*
 * What a job runs for each of its shard items, and how.
 *
 * A job is one of four types (SPEC section 7): simple and dataflow jobs call
 * C callbacks; script jobs run a command line per item; http jobs call a URL
 * per item. Each item run receives an ej_shard_context describing the item.
 * Error handlers decide what a failed item does to the run; listeners run
 * before and after every fire on every instance; the executor kind bounds
 * how many items of one job run at once.
 *
 * struct ej_job_def holds what only the program can give: its callbacks,
 * their user pointer, listeners, a custom error handler, a fixed executor,
 * a script's environment, an http job's extra headers, output caps. What
 * a job runs with otherwise (command line, URL, timeouts, streaming, the
 * error handler and executor by name) is its configuration (config.h),
 * one field each, validated by ej_job_config_validate. The caller fills
 * the definition and keeps it (and every string and array it points to)
 * alive while the job is registered.
 */
#ifndef EJOB_JOB_H
#define EJOB_JOB_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "ejob/common.h"
#include "ejob/config.h"

/* ------------------------------------------------------------ contexts */

/* Why an item runs (JOB_EXECUTION_LOG.execution_source). */
typedef enum ej_execution_source {
    EJ_EXEC_NORMAL_TRIGGER = 0, /* the cron fired, or an operator's TRIGGER */
    EJ_EXEC_MISFIRE = 1,        /* re-run of an item that fired while still running */
    EJ_EXEC_FAILOVER = 2,       /* item taken over from an instance that died */
} ej_execution_source;

/* "NORMAL_TRIGGER", "MISFIRE" or "FAILOVER"; "UNKNOWN" for other values.
 * Static string. Thread-safe. */
EJ_EXTERN const char *ej_execution_source_name(ej_execution_source source);

/* Parses the names above (exact, upper case). Returns 0, or EJ_EINVAL when
 * name is NULL or unknown (out untouched). */
EJ_EXTERN int ej_execution_source_parse(const char *name, ej_execution_source *out);

/*
 * One shard item's run. ejob fills it and passes it to the job's callback;
 * every field is read-only for the job and lives only during the callback
 * (copy what you keep). Strings are UTF-8.
 */
typedef struct ej_shard_context {
    const char *job_name;
    /* "jobName@-@items@-@READY@-@instanceId", e.g.
     * "orderSync@-@0,1@-@READY@-@10.0.0.7@-@4123" (the items of this
     * instance's run, comma separated, as ElasticJob writes them). */
    const char *task_id;
    int sharding_total_count;
    const char *job_parameter; /* "" when the job has none; never NULL */
    int sharding_item;
    const char *sharding_parameter; /* from shardingItemParameters; NULL when none */
    /* The zxid of this item's `running` or `failover` node; a job may use it
     * to reject writes from a stale run (SPEC 10). 0 when not known (the job
     * does not monitor execution). */
    int64_t fencing_token;
    ej_execution_source execution_source;

    /* Private to ejob: do not touch. */
    const void *cancel_;  /* an atomic_bool owned by the run; NULL: never cancelled */
    char *error_;         /* set by ej_shard_context_set_error() */
    const void *kill_;    /* an atomic_bool of this item alone (a kill); NULL: none */
    int64_t deadline_ms_; /* monotonic ms the item's time is up at (timeout); 0: none */
} ej_shard_context;

/*
 * True once ejob asks this item to stop: the job is shutting down, this
 * instance lost its ZooKeeper session and another instance may now own the
 * item (SPEC 4, "Connection state"), an operator killed the item (`ejob
 * kill`), or the job's timeoutSeconds has passed since the item started. A long-running callback
 * should poll it and return early (with failure or success, as the job sees fit). Thread-safe;
 * cheap (one atomic load).
 */
EJ_EXTERN bool ej_shard_context_is_cancelled(const ej_shard_context *ctx);

/*
 * Records why the item failed; printf-style. Call from the job's callback
 * (the thread that runs the item) before returning a negative value. The
 * message becomes the execution event's failure_cause and is handed to the
 * error handler. A later call replaces an earlier one. Ignored when ctx is
 * NULL or on allocation failure.
 */
EJ_EXTERN void ej_shard_context_set_error(const ej_shard_context *ctx, const char *fmt, ...)
    EJ_PRINTF(2, 3);

/*
 * What listeners see of one fire on this instance (ElasticJob's
 * ShardingContexts). Borrowed during the listener call.
 */
typedef struct ej_shard_contexts_info {
    const char *job_name;
    const char *task_id;
    int sharding_total_count;
    const char *job_parameter; /* never NULL */
    const int *items;          /* this instance's items for the fire, ascending */
    size_t item_count;
    /* item_parameters[i] is the parameter of items[i], or NULL when none.
     * The array itself is NULL when item_count is 0. */
    const char *const *item_parameters;
    ej_execution_source execution_source;
} ej_shard_contexts_info;

/* ---------------------------------------------------------- job types */

/* The job types are config.h's ej_job_type (EJ_JOB_TYPE_SIMPLE, _DATAFLOW,
 * _SCRIPT, _HTTP) with ej_job_type_name() and ej_job_type_parse(). */

/*
 * A simple job: called once per item, on a pool thread, possibly at the
 * same time for several items of the same fire (up to the executor's
 * limit). Returns 0 on success, negative on failure (call
 * ej_shard_context_set_error() first to say why). user is ej_job_def.user.
 */
typedef int (*ej_simple_job_fn)(const ej_shard_context *ctx, void *user);

/*
 * Dataflow fetch: returns how many items it fetched (0: nothing to do,
 * negative: failure) and, when more than 0, stores an opaque batch in
 * *batch. The batch belongs to the job: ejob passes it to process and never
 * looks inside or frees it.
 */
typedef long (*ej_dataflow_fetch_fn)(const ej_shard_context *ctx, void **batch, void *user);

/*
 * Dataflow process: handles a batch from fetch (count > 0) and releases it.
 * Called exactly once for every batch fetch returns, on the same thread.
 * Returns 0 or negative (failure; with streaming, the loop stops).
 */
typedef int (*ej_dataflow_process_fn)(const ej_shard_context *ctx, void *batch, long count,
                                      void *user);

/* Whether fetch runs once or again and again is the configuration's
 * streamingProcess: true keeps fetching and processing until fetch returns
 * 0, the item is cancelled, or the job must stop or be resharded. */
struct ej_dataflow_job {
    ej_dataflow_fetch_fn fetch;
    ej_dataflow_process_fn process;
};

/* Default cap on each of a script's captured stdout and stderr (and an
 * http response body): 64 KiB. Beyond it output is discarded and marked
 * truncated. */
#define EJ_JOB_OUTPUT_CAP_DEFAULT (64 * 1024)

/*
 * A script job runs the configuration's scriptCommandLine for each item:
 * split into argv as Apache commons-exec's CommandLine.parse splits it
 * (space-separated; '...' and "..." quote; no backslash escapes), the
 * program looked up in PATH, no shell unless the command names one, the
 * item's context JSON appended as the last argument. The configuration's
 * timeoutSeconds (or scriptTimeoutMilliseconds) and timeoutGraceSeconds
 * bound it: SIGTERM to its process group, SIGKILL after the grace.
 */
struct ej_script_job {
    size_t output_cap;      /* 0: EJ_JOB_OUTPUT_CAP_DEFAULT */
    const char *const *env; /* extra "NAME=value" entries, NULL-terminated; may be NULL */
    /* ejob's own: the limits of one run, which ejob sets from the
     * configuration for each fire (and bounds by the session timeout). A
     * program leaves them 0; ej_job_def_validate refuses anything else. */
    int64_t timeout_ms;
    int64_t kill_grace_ms;
};

/*
 * An http job requests the configuration's httpUri with its httpMethod,
 * httpData, httpContentType and timeouts (httpConnectTimeoutMilliseconds,
 * httpReadTimeoutMilliseconds) for each item.
 */
struct ej_http_job {
    /* extra "Name: value" request headers, NULL-terminated; may be NULL */
    const char *const *headers;
    size_t output_cap; /* response body kept; 0: EJ_JOB_OUTPUT_CAP_DEFAULT */
};

/* ------------------------------------------------------ error handlers */

typedef enum ej_error_handler_kind {
    EJ_ERROR_HANDLER_LOG = 0, /* default: log "Job '<job>' exception occur in job processing" */
    EJ_ERROR_HANDLER_IGNORE = 1,
    /* ElasticJob 3.x THROW: log, and fail the whole run (the fire stops
     * after this run's items: no misfire re-run, the run is reported as an
     * error). */
    EJ_ERROR_HANDLER_FAIL = 2,
    EJ_ERROR_HANDLER_CUSTOM = 3, /* call ej_error_handler.fn */
} ej_error_handler_kind;

/*
 * A user error handler. item is the failed item, or -1 for a failure that
 * is not an item's (a listener, the clock-skew check). message is the
 * failure cause. Called on the thread that saw the failure; borrowed
 * arguments. Return true to fail the whole run as EJ_ERROR_HANDLER_FAIL
 * does, false to carry on.
 */
typedef bool (*ej_error_handler_fn)(const char *job_name, int item, const char *message,
                                    void *user);

/* In a definition: kind EJ_ERROR_HANDLER_LOG (0) leaves the choice to the
 * configuration's jobProperties.job_exception_handler (LOG, IGNORE, THROW or
 * a 2.1.5 class name); EJ_ERROR_HANDLER_CUSTOM calls fn instead. IGNORE and
 * FAIL are the configuration's to say: a definition naming them is refused. */
struct ej_error_handler {
    ej_error_handler_kind kind;
    ej_error_handler_fn fn; /* EJ_ERROR_HANDLER_CUSTOM only */
    void *user;
};

/*
 * Parses an error handler name: "LOG", "IGNORE", "THROW" or "FAIL"
 * (case-insensitive; ElasticJob 3.x jobErrorHandlerType), or a 2.1.5
 * job_exception_handler class name: the default
 * (EJ_CONFIG_DEFAULT_JOB_EXCEPTION_HANDLER) is LOG. NULL or "" is LOG. Returns 0, or EJ_ECONFIG for
 * anything else (ElasticJob falls back to the default with a warning; the caller decides).
 */
EJ_EXTERN int ej_error_handler_parse(const char *name, ej_error_handler_kind *out);

/* "LOG", "IGNORE", "THROW" (FAIL) or "CUSTOM". Static string. */
EJ_EXTERN const char *ej_error_handler_name(ej_error_handler_kind kind);

/* ----------------------------------------------------------- executors */

typedef enum ej_executor_kind {
    EJ_EXECUTOR_CPU = 0,           /* default: 2 x online CPUs items at once */
    EJ_EXECUTOR_SINGLE_THREAD = 1, /* one item at a time */
    EJ_EXECUTOR_FIXED = 2,         /* ej_job_def.executor_threads items at once */
} ej_executor_kind;

/*
 * Parses an executor name: "CPU" or "SINGLE_THREAD" (case-insensitive;
 * ElasticJob 3.x jobExecutorServiceHandlerType), or a 2.1.5
 * executor_service_handler class name: the default
 * (EJ_CONFIG_DEFAULT_EXECUTOR_SERVICE_HANDLER) is CPU. NULL or "" is CPU. Returns 0, or EJ_ECONFIG
 * for anything else.
 */
EJ_EXTERN int ej_executor_kind_parse(const char *name, ej_executor_kind *out);

/* "CPU", "SINGLE_THREAD" or "FIXED". Static string. */
EJ_EXTERN const char *ej_executor_kind_name(ej_executor_kind kind);

/* How many items of one job may run at once: 2 x online CPUs for CPU, 1 for
 * SINGLE_THREAD, threads (at least 1) for FIXED. */
EJ_EXTERN int ej_executor_concurrency(ej_executor_kind kind, int threads);

/* ----------------------------------------------------------- listeners */

/* A listener callback; runs on the fire's thread before the items start
 * (before) or after they all finished (after). Must not block for long. */
typedef void (*ej_job_listener_fn)(const ej_shard_contexts_info *info, void *user);

struct ej_job_listener {
    ej_job_listener_fn before; /* may be NULL */
    ej_job_listener_fn after;  /* may be NULL */
    void *user;
};

/* --------------------------------------------------------- definitions */

/*
 * What the program gives a job. Zero-initialise, set type (the
 * configuration's jobType) and the callbacks for it; the rest is optional.
 * Borrowed: the caller keeps the struct and what it points to alive and
 * unchanged while the job is registered.
 *
 * executor: EJ_EXECUTOR_CPU (0) leaves the choice to the configuration's
 * jobProperties.executor_service_handler (CPU, SINGLE_THREAD or a 2.1.5
 * class name); EJ_EXECUTOR_FIXED runs executor_threads items at once.
 * SINGLE_THREAD is the configuration's to say: a definition naming it is
 * refused.
 */
struct ej_job_def {
    ej_job_type type;
    ej_simple_job_fn simple;         /* EJ_JOB_TYPE_SIMPLE */
    struct ej_dataflow_job dataflow; /* EJ_JOB_TYPE_DATAFLOW */
    struct ej_script_job script;     /* EJ_JOB_TYPE_SCRIPT */
    struct ej_http_job http;         /* EJ_JOB_TYPE_HTTP */
    void *user;                      /* passed to the callbacks */
    struct ej_error_handler error_handler;
    ej_executor_kind executor;
    int executor_threads; /* EJ_EXECUTOR_FIXED */
    const struct ej_job_listener *listeners;
    size_t listener_count;

    /* Private to ejob: the configuration a definition built for a fire
     * runs with. A program leaves it NULL. */
    const struct ej_job_config *config_;
};

/*
 * Checks what a program gives: the callbacks its type needs are set, a
 * custom error handler has a function, the error handler and executor
 * kinds are ones a definition may name (above), listeners are given when
 * counted, the script's run limits are left to ejob. Everything the
 * configuration holds is checked by ej_job_config_validate alone.
 *
 * err: on EJ_ECONFIG receives a message naming the member, e.g.
 *      "dataflow.process: no callback for a DATAFLOW job". May be NULL.
 * Returns 0; EJ_EINVAL when def is NULL; EJ_ECONFIG.
 * Thread-safe.
 */
EJ_EXTERN int ej_job_def_validate(const struct ej_job_def *def, char *err, size_t errlen);

#endif
