/*
 * The job's fields: one line each, the single list of what struct
 * ej_job_config holds. The config module reads everything per field from it:
 * the defaults of ej_job_config_init, copy, equal and fini (job_config.c),
 * the JSON of the `config` node, written and read, and its known keys
 * (json.c), the field names in validation messages (enum ej__cfg_field,
 * validate.c), the daemon YAML file's job and props keys, the member behind
 * each and its name in the file's messages (yaml.c).
 *
 * X(ID, member, type, where, scope, key, yaml, default)
 *
 * ID      the field is EJ_CFG_F_<ID> (enum ej__cfg_field, internal.h).
 * member  its member of struct ej_job_config.
 * type    how it is held and written (enum ej__cfg_type):
 *         STR    char *, owned, never NULL after init;
 *         INT    int; INT64 int64_t; BOOL bool;
 *         TYPE   ej_job_type, written by name ("SCRIPT");
 *         CLASS  char *, jobClass: a SCRIPT job's is ScriptJob whatever it
 *                holds, when written and when compared;
 *         OBJ    char *, JSON object text of the keys nobody else knows,
 *                or NULL (NULL and "{}" both mean none).
 * where   where it goes in the JSON (enum ej__cfg_where):
 *         KEY    a top-level key, written for every job of its scope;
 *         SET    a top-level key written only when not the default (ejob's
 *                own keys that a Java-shaped job must not gain);
 *         PROP   a key inside the jobProperties object;
 *         REST   no key: members appended after every known key.
 * scope   ANY, or the job type it belongs to (DATAFLOW, SCRIPT, HTTP): only
 *         for that type is it written and does it count in equality.
 * key     its JSON key (inside jobProperties for PROP); validation names it
 *         by its path ("jobProperties.job_exception_handler"). The console's
 *         JobSettings shape uses the same keys in another order, so one key
 *         serves both shapes.
 * yaml    its key in a job of the daemon YAML file (and in `defaults:`):
 *         "cron"; "props.KEY" for KEY under the job's props mapping
 *         ("props.http.uri"); NULL when the file does not set it. It is
 *         read by the type, except where yaml.c says otherwise (TYPE reads
 *         SCRIPT or HTTP; jobShardingStrategyType is stored under its Java
 *         class name; http.method is upper-cased). A props key belongs to
 *         the jobs of the row's scope: in another type's job it is refused.
 * default what ej_job_config_init stores (Java's reader differs for two,
 *         see ej_job_config_from_json).
 *
 * The rows are in the order ej_job_config_to_json writes them, which is
 * ElasticJob 2.1.5's, byte for byte: keep it. The jobProperties row writes
 * the object: the PROP rows, then the unknown properties. ejob's own keys
 * come after 2.1.5's, the unknown top-level keys last.
 *
 * Adding a field: its member in include/ejob/config.h, one row here (after
 * the 2.1.5 keys unless Java writes it) and its rule in validate.c if it has
 * one. The row covers the daemon YAML file too: give it a yaml key and the
 * file accepts, reads and reports it.
 *
 * ejob-only settings never stop a Java instance. A Java 2.1.5 instance
 * shares the config node, and its reader skips keys it does not know but
 * fails on a value it cannot load in a key it reads. So an ejob-only
 * setting lives in a key of its own (SET or HTTP rows), never in a 2.1.5
 * key, and a 2.1.5 key whose value Java cannot load is written as Java's
 * default with ejob's value in an ejob-only key (json.c's java_guards).
 * What a Java instance does with each (ej_job_config_java_ignored names
 * them for `ejob status` and the console):
 *   timeZone                  fires in its JVM's zone;
 *   scriptTimeoutMilliseconds runs the script without a timeout;
 *   jobShardingStrategyClass  a strategy Java cannot load (BALANCED, STICKY,
 *                             CONSISTENT_HASH, a registered name, io.ejob.*)
 *                             is written "" with the name in
 *                             jobShardingStrategyType: a Java leader shards
 *                             with AverageAllocation;
 *   http* (jobType HTTP)      Java cannot read the job at all.
 * A new ejob-only row says here what Java does with it.
 */
#ifndef EJ_CONFIG_FIELDS_H
#define EJ_CONFIG_FIELDS_H

/* clang-format off */
#define EJ_JOB_FIELDS(X)                                                                           \
    X(JOB_NAME, job_name, STR, KEY, ANY, "jobName", NULL, "")                                      \
    X(JOB_CLASS, job_class, CLASS, KEY, ANY, "jobClass", NULL, "")                                 \
    X(JOB_TYPE, job_type, TYPE, KEY, ANY, "jobType", "elasticJobType", EJ_JOB_TYPE_SIMPLE)         \
    X(CRON, cron, STR, KEY, ANY, "cron", "cron", "")                                               \
    X(SHARDING_TOTAL_COUNT, sharding_total_count, INT, KEY, ANY,                                   \
      "shardingTotalCount", "shardingTotalCount", 1)                                               \
    X(SHARDING_ITEM_PARAMETERS, sharding_item_parameters, STR, KEY, ANY,                           \
      "shardingItemParameters", "shardingItemParameters", "")                                      \
    X(JOB_PARAMETER, job_parameter, STR, KEY, ANY, "jobParameter", "jobParameter", "")             \
    X(FAILOVER, failover, BOOL, KEY, ANY, "failover", "failover", false)                           \
    X(MISFIRE, misfire, BOOL, KEY, ANY, "misfire", "misfire", true)                                \
    X(DESCRIPTION, description, STR, KEY, ANY, "description", "description", "")                   \
    X(JOB_PROPERTIES, job_properties_extra, OBJ, KEY, ANY, "jobProperties", NULL, NULL)            \
    X(JOB_EXCEPTION_HANDLER, job_exception_handler, STR, PROP, ANY,                                \
      "job_exception_handler", NULL, EJ_CONFIG_DEFAULT_JOB_EXCEPTION_HANDLER)                      \
    X(EXECUTOR_SERVICE_HANDLER, executor_service_handler, STR, PROP, ANY,                          \
      "executor_service_handler", NULL, EJ_CONFIG_DEFAULT_EXECUTOR_SERVICE_HANDLER)                \
    X(STREAMING_PROCESS, streaming_process, BOOL, KEY, DATAFLOW, "streamingProcess", NULL, false)  \
    X(SCRIPT_COMMAND_LINE, script_command_line, STR, KEY, SCRIPT,                                  \
      "scriptCommandLine", "props.script.command.line", "")                                        \
    X(MONITOR_EXECUTION, monitor_execution, BOOL, KEY, ANY,                                        \
      "monitorExecution", "monitorExecution", true)                                                \
    X(MAX_TIME_DIFF_SECONDS, max_time_diff_seconds, INT, KEY, ANY,                                 \
      "maxTimeDiffSeconds", "maxTimeDiffSeconds", -1)                                              \
    X(MONITOR_PORT, monitor_port, INT, KEY, ANY, "monitorPort", "monitorPort", -1)                 \
    X(JOB_SHARDING_STRATEGY_CLASS, job_sharding_strategy_class, STR, KEY, ANY,                     \
      "jobShardingStrategyClass", "jobShardingStrategyType", "")                                   \
    X(RECONCILE_INTERVAL_MINUTES, reconcile_interval_minutes, INT, KEY, ANY,                       \
      "reconcileIntervalMinutes", "reconcileIntervalMinutes", 10)                                  \
    X(DISABLED, disabled, BOOL, KEY, ANY, "disabled", "disabled", false)                           \
    X(OVERWRITE, overwrite, BOOL, KEY, ANY, "overwrite", "overwrite", false)                       \
    /* ejob's own keys, after 2.1.5's; Java 2.1.5 readers skip them. */                            \
    X(TIME_ZONE, time_zone, STR, SET, ANY, "timeZone", "timeZone", "")                             \
    X(SCRIPT_TIMEOUT, script_timeout_ms, INT64, SET, SCRIPT,                                       \
      "scriptTimeoutMilliseconds", "props.script.timeout.milliseconds", 0)                         \
    X(TIMEOUT_SECONDS, timeout_seconds, INT, SET, ANY, "timeoutSeconds", "timeoutSeconds", 0)      \
    X(TIMEOUT_GRACE_SECONDS, timeout_grace_seconds, INT, SET, ANY, "timeoutGraceSeconds",          \
      "timeoutGraceSeconds", 0)                                                                    \
    X(RETRY_MAX_ATTEMPTS, retry.max_attempts, INT, SET, ANY, "retryMaxAttempts",                  \
      "retry.maxAttempts", 0)                                                                      \
    X(RETRY_INITIAL_BACKOFF_SECONDS, retry.initial_backoff_seconds, INT, SET, ANY,                 \
      "retryInitialBackoffSeconds", "retry.initialBackoffSeconds", 1)                              \
    X(RETRY_MULTIPLIER, retry.multiplier, INT, SET, ANY, "retryMultiplier", "retry.multiplier", 2) \
    X(RETRY_MAX_BACKOFF_SECONDS, retry.max_backoff_seconds, INT, SET, ANY,                         \
      "retryMaxBackoffSeconds", "retry.maxBackoffSeconds", 300)                                    \
    X(RETRY_JITTER, retry.jitter_percent, INT, SET, ANY, "retryJitterPercent", "retry.jitter", 0)  \
    X(OVERLAP_POLICY, overlap_policy, STR, SET, ANY, "overlapPolicy", "overlapPolicy", "QUEUE")   \
    X(STARTING_DEADLINE_SECONDS, starting_deadline_seconds, INT, SET, ANY,                         \
      "startingDeadlineSeconds", "startingDeadlineSeconds", 0)                                     \
    X(MISFIRE_POLICY, misfire_policy, STR, SET, ANY, "misfirePolicy", "misfirePolicy", "")         \
    X(CATCH_UP_WINDOW_SECONDS, catch_up_window_seconds, INT, SET, ANY, "catchUpWindowSeconds",     \
      "catchUpWindowSeconds", 0)                                                                   \
    X(HTTP_URI, http.uri, STR, KEY, HTTP, "httpUri", "props.http.uri", "")                         \
    X(HTTP_METHOD, http.method, STR, KEY, HTTP, "httpMethod", "props.http.method", "GET")          \
    X(HTTP_DATA, http.data, STR, KEY, HTTP, "httpData", "props.http.data", "")                     \
    X(HTTP_CONNECT_TIMEOUT, http.connect_timeout_ms, INT, KEY, HTTP,                               \
      "httpConnectTimeoutMilliseconds", "props.http.connect.timeout.milliseconds", 3000)           \
    X(HTTP_READ_TIMEOUT, http.read_timeout_ms, INT, KEY, HTTP,                                     \
      "httpReadTimeoutMilliseconds", "props.http.read.timeout.milliseconds", 5000)                 \
    X(HTTP_CONTENT_TYPE, http.content_type, STR, KEY, HTTP,                                        \
      "httpContentType", "props.http.content.type", "")                                            \
    /* The unknown top-level keys: the key is only their name in messages. */                      \
    X(EXTRA, extra_json, OBJ, REST, ANY, "(unknown keys)", NULL, NULL)
/* clang-format on */

#endif
