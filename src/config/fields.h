/*
 * The job's fields: one line each, the single list of what struct
 * ej_job_config holds. The config module reads everything per field from it:
 * the defaults of ej_job_config_init, copy, equal and fini (job_config.c),
 * the JSON of the `config` node, written and read, and its known keys
 * (json.c), the field names in validation messages (enum ej__cfg_field,
 * validate.c), the daemon YAML file's job and props keys, the member behind
 * each and its name in the file's messages (yaml.c).
 *
 * X(ID, member, type, where, scope, key, yaml, default, form, choices, help)
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
 * form    where the console's config form shows it (ej_config_fields_json):
 *         MAIN  always; MORE  under "more settings";
 *         JAVA  folded away with what only Java ElasticJob instances use
 *               (ejob ignores it, or reads it only as a name);
 *         NONE  no input (the unknown keys, kept as they are).
 * choices the values it may take, comma-separated: the form's select, and
 *         what validation accepts (validate.c reads them from the row);
 *         "@tz": a name of the tz database; NULL: free.
 * help    one line on what it does, shown under the field in the form.
 *
 * The rows are in the order ej_job_config_to_json writes them, which is
 * ElasticJob 2.1.5's, byte for byte: keep it. The jobProperties row writes
 * the object: the PROP rows, then the unknown properties. ejob's own keys
 * come after 2.1.5's, the unknown top-level keys last.
 *
 * Adding a field: its member in include/ejob/config.h, one row here (after
 * the 2.1.5 keys unless Java writes it, with its form group and help line)
 * and its rule in validate.c if it has one. The row covers the daemon YAML
 * file too: give it a yaml key and the file accepts, reads and reports it.
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
 *   http* (jobType HTTP)      Java cannot read the job at all;
 *   timeoutSeconds, timeoutGraceSeconds, retry*, overlapPolicy,
 *   startingDeadlineSeconds, misfirePolicy, catchUpWindowSeconds
 *                             runs its items without a timeout, retries,
 *                             policies or deadline (its misfire flag as
 *                             2.1.5's), and never reads kills/.
 *   tracingRetentionDays,     nothing: Java keeps no history of its own
 *   tracingFailedRetentionDays  rules (ejob's retention pass purges its
 *                             rows of the job by them, in a shared store).
 * A new ejob-only row says here what Java does with it.
 */
#ifndef EJ_CONFIG_FIELDS_H
#define EJ_CONFIG_FIELDS_H

/* clang-format off */
#define EJ_JOB_FIELDS(X)                                                                           \
    X(JOB_NAME, job_name, STR, KEY, ANY,                                                           \
      "jobName", NULL, "",                                                                         \
      MAIN, NULL, "The job's name: one ZooKeeper path segment of [A-Za-z0-9_.-]")                  \
    X(JOB_CLASS, job_class, CLASS, KEY, ANY,                                                       \
      "jobClass", NULL, "",                                                                        \
      JAVA, NULL, "The class a Java instance runs; ejob runs by jobType")                          \
    X(JOB_TYPE, job_type, TYPE, KEY, ANY,                                                          \
      "jobType", "elasticJobType", EJ_JOB_TYPE_SIMPLE,                                             \
      MAIN, "SIMPLE,DATAFLOW,SCRIPT,HTTP",                                                         \
      "What an item runs: SIMPLE or DATAFLOW code, a SCRIPT, an HTTP request")                     \
    X(CRON, cron, STR, KEY, ANY,                                                                   \
      "cron", "cron", "",                                                                          \
      MAIN, NULL, "Quartz cron: second minute hour day-of-month month day-of-week [year]")         \
    X(SHARDING_TOTAL_COUNT, sharding_total_count, INT, KEY, ANY,                                   \
      "shardingTotalCount", "shardingTotalCount", 1,                                               \
      MAIN, NULL, "How many items each fire is split into, spread over the instances")             \
    X(SHARDING_ITEM_PARAMETERS, sharding_item_parameters, STR, KEY, ANY,                           \
      "shardingItemParameters", "shardingItemParameters", "",                                      \
      MAIN, NULL, "Each item's parameter, e.g. 0=Beijing,1=Shanghai")                              \
    X(JOB_PARAMETER, job_parameter, STR, KEY, ANY,                                                 \
      "jobParameter", "jobParameter", "",                                                          \
      MAIN, NULL, "A parameter every item receives")                                               \
    X(FAILOVER, failover, BOOL, KEY, ANY,                                                          \
      "failover", "failover", false,                                                               \
      MAIN, NULL, "Items of an instance that died run again on another instance")                  \
    X(MISFIRE, misfire, BOOL, KEY, ANY,                                                            \
      "misfire", "misfire", true,                                                                  \
      MAIN, NULL, "A fire that came while the item still ran runs once it ends")                   \
    X(DESCRIPTION, description, STR, KEY, ANY,                                                     \
      "description", "description", "",                                                            \
      MAIN, NULL, "Free text for operators")                                                       \
    X(JOB_PROPERTIES, job_properties_extra, OBJ, KEY, ANY,                                         \
      "jobProperties", NULL, NULL,                                                                 \
      JAVA, NULL, "Other jobProperties (a JSON object), kept for Java instances")                  \
    X(JOB_EXCEPTION_HANDLER, job_exception_handler, STR, PROP, ANY,                                \
      "job_exception_handler", NULL, EJ_CONFIG_DEFAULT_JOB_EXCEPTION_HANDLER,                      \
      JAVA, NULL, "On an item's error: a Java handler class, or LOG, THROW, IGNORE")               \
    X(EXECUTOR_SERVICE_HANDLER, executor_service_handler, STR, PROP, ANY,                          \
      "executor_service_handler", NULL, EJ_CONFIG_DEFAULT_EXECUTOR_SERVICE_HANDLER,                \
      JAVA, NULL, "Where items run: a Java executor handler class, or CPU")                        \
    X(STREAMING_PROCESS, streaming_process, BOOL, KEY, DATAFLOW,                                   \
      "streamingProcess", NULL, false,                                                             \
      MORE, NULL, "DATAFLOW: fetch again while there is data")                                     \
    X(SCRIPT_COMMAND_LINE, script_command_line, STR, KEY, SCRIPT,                                  \
      "scriptCommandLine", "props.script.command.line", "",                                        \
      MAIN, NULL, "SCRIPT: the command run for each item")                                         \
    X(MONITOR_EXECUTION, monitor_execution, BOOL, KEY, ANY,                                        \
      "monitorExecution", "monitorExecution", true,                                                \
      MORE, NULL, "Running items are recorded in ZooKeeper (failover needs it)")                   \
    X(MAX_TIME_DIFF_SECONDS, max_time_diff_seconds, INT, KEY, ANY,                                 \
      "maxTimeDiffSeconds", "maxTimeDiffSeconds", -1,                                              \
      MORE, NULL, "Refuse to start on a clock this far from ZooKeeper's (-1: no check)")           \
    X(MONITOR_PORT, monitor_port, INT, KEY, ANY,                                                   \
      "monitorPort", "monitorPort", -1,                                                            \
      JAVA, NULL, "Port of the dump monitor (-1: none)")                                           \
    X(JOB_SHARDING_STRATEGY_CLASS, job_sharding_strategy_class, STR, KEY, ANY,                     \
      "jobShardingStrategyClass", "jobShardingStrategyType", "",                                   \
      MORE, NULL, "How items are spread: empty (AVERAGE), a strategy or a Java class")             \
    X(RECONCILE_INTERVAL_MINUTES, reconcile_interval_minutes, INT, KEY, ANY,                       \
      "reconcileIntervalMinutes", "reconcileIntervalMinutes", 10,                                  \
      MORE, NULL, "The leader checks the sharding every N minutes (0: never)")                     \
    X(DISABLED, disabled, BOOL, KEY, ANY,                                                          \
      "disabled", "disabled", false,                                                               \
      MORE, NULL, "A starting instance disables the job on its server")                            \
    X(OVERWRITE, overwrite, BOOL, KEY, ANY,                                                        \
      "overwrite", "overwrite", false,                                                             \
      MORE, NULL, "A starting instance writes its local config over ZooKeeper's")                  \
    /* ejob's own keys, after 2.1.5's; Java 2.1.5 readers skip them. */                            \
    X(TIME_ZONE, time_zone, STR, SET, ANY,                                                         \
      "timeZone", "timeZone", "",                                                                  \
      MAIN, "@tz", "The zone the cron fires in (empty: each host's own)")                          \
    X(SCRIPT_TIMEOUT, script_timeout_ms, INT64, SET, SCRIPT,                                       \
      "scriptTimeoutMilliseconds", "props.script.timeout.milliseconds", 0,                         \
      MORE, NULL, "SCRIPT: stop the command after this many ms (0: no limit)")                     \
    X(TIMEOUT_SECONDS, timeout_seconds, INT, SET, ANY,                                             \
      "timeoutSeconds", "timeoutSeconds", 0,                                                       \
      MAIN, NULL, "Stop an item that runs longer than this many seconds (0: no limit)")            \
    X(TIMEOUT_GRACE_SECONDS, timeout_grace_seconds, INT, SET, ANY,                                 \
      "timeoutGraceSeconds", "timeoutGraceSeconds", 0,                                             \
      MORE, NULL, "From SIGTERM to SIGKILL for a timed-out or killed script (0: 2 s)")             \
    X(RETRY_MAX_ATTEMPTS, retry.max_attempts, INT, SET, ANY,                                       \
      "retryMaxAttempts", "retry.maxAttempts", 0,                                                  \
      MAIN, NULL, "Attempts in all for a failed item (0 or 1: no retry)")                          \
    X(RETRY_INITIAL_BACKOFF_SECONDS, retry.initial_backoff_seconds, INT, SET, ANY,                 \
      "retryInitialBackoffSeconds", "retry.initialBackoffSeconds", 1,                              \
      MORE, NULL, "Seconds before the first retry")                                                \
    X(RETRY_MULTIPLIER, retry.multiplier, INT, SET, ANY,                                           \
      "retryMultiplier", "retry.multiplier", 2,                                                    \
      MORE, NULL, "Each retry waits this many times longer than the one before")                   \
    X(RETRY_MAX_BACKOFF_SECONDS, retry.max_backoff_seconds, INT, SET, ANY,                         \
      "retryMaxBackoffSeconds", "retry.maxBackoffSeconds", 300,                                    \
      MORE, NULL, "The longest wait before a retry, in seconds")                                   \
    X(RETRY_JITTER, retry.jitter_percent, INT, SET, ANY,                                           \
      "retryJitterPercent", "retry.jitter", 0,                                                     \
      MORE, NULL, "Each retry's wait varies by up to this many percent")                           \
    X(OVERLAP_POLICY, overlap_policy, STR, SET, ANY,                                               \
      "overlapPolicy", "overlapPolicy", "QUEUE",                                                   \
      MORE, "QUEUE,SKIP,REPLACE",                                                                  \
      "A fire time while the items still run: QUEUE it, SKIP it, REPLACE the run")                 \
    X(STARTING_DEADLINE_SECONDS, starting_deadline_seconds, INT, SET, ANY,                         \
      "startingDeadlineSeconds", "startingDeadlineSeconds", 0,                                     \
      MORE, NULL, "A cron fire that begins later than this after its time is not run (0: none)")   \
    X(MISFIRE_POLICY, misfire_policy, STR, SET, ANY,                                               \
      "misfirePolicy", "misfirePolicy", "",                                                        \
      MORE, "ONCE,SKIP,CATCH_UP",                                                                  \
      "Fire times missed: run ONCE, SKIP them, CATCH_UP each (empty: by misfire)")                 \
    X(CATCH_UP_WINDOW_SECONDS, catch_up_window_seconds, INT, SET, ANY,                             \
      "catchUpWindowSeconds", "catchUpWindowSeconds", 0,                                           \
      MORE, NULL, "CATCH_UP runs the fire times missed within this many seconds")                  \
    X(HTTP_URI, http.uri, STR, KEY, HTTP,                                                          \
      "httpUri", "props.http.uri", "",                                                             \
      MAIN, NULL, "HTTP: the URL requested for each item")                                         \
    X(HTTP_METHOD, http.method, STR, KEY, HTTP,                                                    \
      "httpMethod", "props.http.method", "GET",                                                    \
      MAIN, "GET,POST,PUT,DELETE,PATCH,HEAD,OPTIONS", "HTTP: the request method")                  \
    X(HTTP_DATA, http.data, STR, KEY, HTTP,                                                        \
      "httpData", "props.http.data", "",                                                           \
      MORE, NULL, "HTTP: the request body")                                                        \
    X(HTTP_CONNECT_TIMEOUT, http.connect_timeout_ms, INT, KEY, HTTP,                               \
      "httpConnectTimeoutMilliseconds", "props.http.connect.timeout.milliseconds", 3000,           \
      MORE, NULL, "HTTP: connect timeout in milliseconds")                                         \
    X(HTTP_READ_TIMEOUT, http.read_timeout_ms, INT, KEY, HTTP,                                     \
      "httpReadTimeoutMilliseconds", "props.http.read.timeout.milliseconds", 5000,                 \
      MORE, NULL, "HTTP: read timeout in milliseconds")                                            \
    X(HTTP_CONTENT_TYPE, http.content_type, STR, KEY, HTTP,                                        \
      "httpContentType", "props.http.content.type", "",                                            \
      MORE, NULL, "HTTP: Content-Type of the request body")                                        \
    X(TRACING_RETENTION_DAYS, tracing.retention_days, INT, SET, ANY,                               \
      "tracingRetentionDays", "tracing.retentionDays", -1,                                         \
      MORE, NULL, "Days this job's history is kept (-1: the daemon's, 0: forever)")                \
    X(TRACING_FAILED_RETENTION_DAYS, tracing.failed_retention_days, INT, SET, ANY,                 \
      "tracingFailedRetentionDays", "tracing.failedRetentionDays", -1,                             \
      MORE, NULL, "Days its failed runs are kept (-1: as tracingRetentionDays, 0: forever)")       \
    /* The unknown top-level keys: the key is only their name in messages. */                      \
    X(EXTRA, extra_json, OBJ, REST, ANY,                                                           \
      "(unknown keys)", NULL, NULL,                                                                \
      NONE, NULL, "Keys no row knows, kept as they are")
/* clang-format on */

#endif
