/*
 * Job configuration: the job model (every field of an ElasticJob-Lite 2.1.5
 * job plus ejob's own), its validation, the JSON of the ZooKeeper `config`
 * node (byte for byte what ElasticJob 2.1.5 writes), sharding item
 * parameters, and secrets in files. The daemon's YAML file is the
 * daemon's own (src/config/daemon_file.h).
 *
 * Thread safety: every function here works only on the memory it is given;
 * calls on different objects may run on any threads at once. The cron
 * validator hook is process-wide (set it once at start-up).
 */
#ifndef EJOB_CONFIG_H
#define EJOB_CONFIG_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "ejob/common.h"

/* ------------------------------------------------------------------------ */
/* Constants                                                                 */
/* ------------------------------------------------------------------------ */

/* What ElasticJob 2.1.5 writes as jobClass of every SCRIPT job. */
#define EJ_CONFIG_SCRIPT_JOB_CLASS "com.dangdang.ddframe.job.api.script.ScriptJob"
/* Defaults of jobProperties (Java class names, as 2.1.5 writes them). */
#define EJ_CONFIG_DEFAULT_JOB_EXCEPTION_HANDLER                                                    \
    "com.dangdang.ddframe.job.executor.handler.impl.DefaultJobExceptionHandler"
#define EJ_CONFIG_DEFAULT_EXECUTOR_SERVICE_HANDLER                                                 \
    "com.dangdang.ddframe.job.executor.handler.impl.DefaultExecutorServiceHandler"

/* Size limits checked by ej_job_config_validate (bytes, without the NUL). */
#define EJ_CONFIG_MAX_JOB_NAME 255 /* jobName */
#define EJ_CONFIG_MAX_TEXT                                                                         \
    (64 * 1024) /* description, jobParameter,                                                      \
                   shardingItemParameters,                                                         \
                   scriptCommandLine, httpData */
#define EJ_CONFIG_MAX_SHORT                                                                        \
    1024                                           /* cron, class names, handler                   \
                                                      names, timeZone, httpMethod,                 \
                                                      httpContentType */
#define EJ_CONFIG_MAX_URI 8192                     /* httpUri */
#define EJ_CONFIG_MAX_RETENTION_DAYS 36500         /* tracing.retentionDays of a job */
#define EJ_CONFIG_MAX_TIMEOUT_SECONDS 31536000     /* timeoutSeconds: a year */
#define EJ_CONFIG_MAX_SHARDING_TOTAL_COUNT 1000000 /* shardingTotalCount */
/* Largest `config` node ej_job_config_from_json accepts (ZooKeeper's own
 * default node limit is just under 1 MiB). */
#define EJ_CONFIG_MAX_JSON (1024 * 1024)
/* Deepest nesting of objects/arrays in a `config` node (the known shape
 * needs 2; unknown keys are kept, so some room is left). */
#define EJ_CONFIG_MAX_JSON_DEPTH 32
/* At most this many messages are kept in an ej_config_errors list; the
 * last kept one then says how many more were dropped. */
#define EJ_CONFIG_MAX_ERRORS 100

/* ------------------------------------------------------------------------ */
/* The job model                                                             */
/* ------------------------------------------------------------------------ */

typedef enum ej_job_type {
    EJ_JOB_TYPE_SIMPLE = 0,
    EJ_JOB_TYPE_DATAFLOW = 1,
    EJ_JOB_TYPE_SCRIPT = 2,
    EJ_JOB_TYPE_HTTP = 3, /* ejob's own; Java 2.1.5 instances cannot run it */
} ej_job_type;

/*
 * One job's configuration. JSON key names (and 2.1.5 defaults) in comments.
 *
 * Ownership: every `char *` member is a heap string owned by the struct and
 * released by ej_job_config_fini. After ej_job_config_init every string
 * member is non-NULL except job_properties_extra and extra_json (NULL = none).
 * Functions here read a NULL string member as "". Replace a string with
 * ej_job_config_set_str (or free it yourself and store a malloc'd one).
 *
 * Every member has one row in src/config/fields.h, which drives init, copy,
 * equal, fini, the JSON codec and the validator's field names: a member
 * added here needs its row there.
 */
struct ej_job_config {
    char *job_name;                 /* jobName (required, [A-Za-z0-9_.-]+) */
    char *cron;                     /* cron (required; Quartz syntax) */
    int sharding_total_count;       /* shardingTotalCount (required, >= 1; init: 1) */
    char *sharding_item_parameters; /* shardingItemParameters ("", "0=a,1=b") */
    char *job_parameter;            /* jobParameter ("") */
    bool failover;                  /* failover (false) */
    bool misfire;                   /* misfire (true; a JSON without it reads false) */
    char *description;              /* description ("") */
    /* jobProperties */
    char *job_exception_handler;    /* job_exception_handler (DefaultJobExceptionHandler) */
    char *executor_service_handler; /* executor_service_handler (DefaultExecutorServiceHandler) */
    char *job_properties_extra;     /* other jobProperties keys: JSON object text, or NULL */
    ej_job_type job_type;           /* jobType (init: SIMPLE) */
    char *job_class;                /* jobClass (""; SCRIPT always writes ScriptJob) */
    bool streaming_process;         /* streamingProcess (false; DATAFLOW only) */
    char *script_command_line;      /* scriptCommandLine (""; required for SCRIPT) */
    bool monitor_execution;         /* monitorExecution (true) */
    int max_time_diff_seconds;      /* maxTimeDiffSeconds (-1 = no check) */
    int monitor_port;               /* monitorPort (-1 = off) */
    char *job_sharding_strategy_class; /* jobShardingStrategyClass ("" = average);
                                          a Java class name or an ejob type name */
    int reconcile_interval_minutes;    /* reconcileIntervalMinutes (10; < 1 = off) */
    bool disabled;                     /* disabled (false) */
    bool overwrite;                    /* overwrite (false) */
    /* ejob extensions (written to JSON only when set, after the Java keys). */
    char *time_zone;           /* timeZone ("" = host zone; IANA name) */
    int64_t script_timeout_ms; /* scriptTimeoutMilliseconds (0 = none; SCRIPT): the
                                  alias of timeoutSeconds kept from before it */
    int timeout_seconds;       /* timeoutSeconds (0 = none; every job type) */
    int timeout_grace_seconds; /* timeoutGraceSeconds (0 = 2 s): SIGTERM to SIGKILL */
    /* retry: a failed (or timed-out) item run is run again on the instance
     * that owns the item, after a back-off (docs/execution.md "Retries"). */
    struct ej_retry_config {
        int max_attempts;            /* retryMaxAttempts (0 = 1 = no retry; <= 100) */
        int initial_backoff_seconds; /* retryInitialBackoffSeconds (1) */
        int multiplier;              /* retryMultiplier (2; an integer >= 1) */
        int max_backoff_seconds;     /* retryMaxBackoffSeconds (300) */
        int jitter_percent;          /* retryJitterPercent (0): +-N% of each delay */
    } retry;
    /* A cron fire that comes while the same item still runs here
     * (docs/execution.md "Overlap and deadline"): QUEUE (ElasticJob's
     * misfire: run it right after), SKIP (not run, reason "overlap"),
     * REPLACE (kill the running items, then run it). */
    char *overlap_policy;          /* overlapPolicy ("QUEUE") */
    int starting_deadline_seconds; /* startingDeadlineSeconds (0 = none): a fire not
                                      started within it is not run ("deadline") */
    /* Fire times missed while the process could not fire (stopped, starved):
     * "" (by misfire), ONCE (misfire true: run once now), SKIP (misfire
     * false), CATCH_UP (each missed fire time within catchUpWindowSeconds,
     * oldest first, at most EJ_CONFIG_CATCH_UP_MAX). */
    char *misfire_policy;        /* misfirePolicy ("") */
    int catch_up_window_seconds; /* catchUpWindowSeconds (0; 1..86400 for CATCH_UP) */
    struct ej_http_config {      /* HTTP jobs only */
        char *uri;               /* httpUri (required for HTTP) */
        char *method;            /* httpMethod ("GET") */
        char *data;              /* httpData ("") body for POST/PUT/PATCH/DELETE */
        int connect_timeout_ms;  /* httpConnectTimeoutMilliseconds (3000) */
        int read_timeout_ms;     /* httpReadTimeoutMilliseconds (5000) */
        char *content_type;      /* httpContentType ("" = none) */
    } http;
    /* The job's own history retention (docs/tracing.md "Never in the way of
     * a fire"): -1 = the daemon's tracing.retentionDays, 0 = forever. */
    struct ej_job_tracing_config {
        int retention_days;        /* tracingRetentionDays (-1; 0..36500) */
        int failed_retention_days; /* tracingFailedRetentionDays (-1 = as retention_days) */
    } tracing;
    /* Unknown top-level keys of the JSON it was read from, as JSON object
     * text, written back after all known keys; NULL when none. */
    char *extra_json;
};

/*
 * Fill cfg with the 2.1.5 builder defaults (above). cfg's previous contents
 * are not freed.
 * Returns 0, or EJ_ENOMEM (cfg is then safe to pass to ej_job_config_fini).
 */
EJ_EXTERN int ej_job_config_init(struct ej_job_config *cfg);

/* Free every string of cfg and zero it. Accepts NULL and a zeroed struct;
 * calling it twice is safe. */
EJ_EXTERN void ej_job_config_fini(struct ej_job_config *cfg);

/*
 * Deep copy src into dst. dst's previous contents are not freed (pass
 * uninitialised or finalised memory).
 * Returns 0, or EJ_ENOMEM (dst is then safe to pass to ej_job_config_fini).
 */
/*
 * The run time limit of the job's items in ms (0: none): timeoutSeconds, or
 * for a SCRIPT job without it scriptTimeoutMilliseconds, its alias.
 */
EJ_EXTERN int64_t ej_job_config_timeout_ms(const struct ej_job_config *cfg);

/* What a timed-out or killed script gets between SIGTERM and SIGKILL to its
 * process group, in ms: timeoutGraceSeconds, 0 read as 2 s. */
EJ_EXTERN int64_t ej_job_config_grace_ms(const struct ej_job_config *cfg);

/* At most this many missed fire times are caught up at once. */
#define EJ_CONFIG_CATCH_UP_MAX 100

/* Whether misfires run: misfirePolicy ONCE or CATCH_UP, SKIP, or when it
 * is "" the misfire flag. */
EJ_EXTERN bool ej_job_config_misfire(const struct ej_job_config *cfg);

EJ_EXTERN int ej_job_config_copy(struct ej_job_config *dst, const struct ej_job_config *src);

/* True when a and b describe the same job: every common field equal (NULL
 * strings equal "", NULL extras equal "{}"), the type-specific fields only
 * for their type (streaming_process for DATAFLOW, script_command_line and
 * script_timeout_ms for SCRIPT, http for HTTP), and job_class as written
 * (always ScriptJob for SCRIPT). */
EJ_EXTERN bool ej_job_config_equal(const struct ej_job_config *a, const struct ej_job_config *b);

/*
 * Replace the owned string *field (e.g. &cfg->cron) with a copy of value
 * (NULL stores ""). Returns 0, or EJ_ENOMEM (the old value is kept).
 */
EJ_EXTERN int ej_job_config_set_str(char **field, const char *value);

/* "SIMPLE", "DATAFLOW", "SCRIPT", "HTTP"; "UNKNOWN" for any other value. */
EJ_EXTERN const char *ej_job_type_name(ej_job_type type);

/* Parse an exact upper-case type name. Returns 0 or EJ_EINVAL. */
EJ_EXTERN int ej_job_type_parse(const char *name, ej_job_type *out);

/* ------------------------------------------------------------------------ */
/* Validation                                                                */
/* ------------------------------------------------------------------------ */

/*
 * The cron rule of validation, for callers that have only an expression
 * (`ejob cron next/check`): Quartz syntax (ej_cron_parse), the zone
 * (ej_config_check_time_zone; "" or NULL = the host's zone), and at least
 * one fire time after now in that zone. err receives the same message
 * ej_job_config_validate gives for that cron and zone, e.g.
 *   cron: has no fire time ahead
 *   cron: day-of-month: value must be 1..31, got 32
 *   timeZone: unknown time zone "Mars/Base"
 * Returns 0, EJ_ECONFIG or EJ_ENOMEM. Thread-safe.
 */
EJ_EXTERN int ej_config_check_cron(const char *cron, const char *time_zone, char *err,
                                   size_t errlen);

/* A list of error messages (each a heap string owned by the list). */
struct ej_config_errors {
    size_t count;
    char **messages;
};

/* Empty list. */
EJ_EXTERN void ej_config_errors_init(struct ej_config_errors *errs);
/* Free every message; the list is empty afterwards. Accepts NULL. */
EJ_EXTERN void ej_config_errors_fini(struct ej_config_errors *errs);

/*
 * Check cfg against the rules of SPEC section 3. The first problem is
 * written to err (if err and errlen > 0) as "field: message", e.g.
 *   shardingTotalCount: must be >= 1, got 0
 *   jobName: must match [A-Za-z0-9_.-]+, got "a b"
 *   cron: is required
 *   scriptCommandLine: is required for SCRIPT jobs
 *   monitorPort: must be -1 or 0..65535, got 70000
 *   shardingItemParameters: item 5 >= shardingTotalCount 3
 *   description: is 70000 bytes, longer than the limit of 65536
 *   timeZone: unknown time zone "Mars/Base"
 *   cron: has no fire time ahead
 *   scriptCommandLine: unbalanced quotes in '...'
 * This is the one validator of every path (the daemon's file at --check,
 * start-up and SIGHUP, the `config` node seen in ZooKeeper, ej_job_create,
 * ej_job_update_config, `ejob config set`): the same config gets the same
 * verdict and message everywhere.
 * Returns 0 when valid, EJ_ECONFIG otherwise (EJ_ENOMEM, EJ_EINVAL).
 */
EJ_EXTERN int ej_job_config_validate(const struct ej_job_config *cfg, char *err, size_t errlen);

/*
 * Like ej_job_config_validate, but appends every problem to errs (same
 * message format). Returns 0, EJ_ECONFIG (messages added) or EJ_ENOMEM.
 */
EJ_EXTERN int ej_job_config_validate_all(const struct ej_job_config *cfg,
                                         struct ej_config_errors *errs);

/*
 * The one time-zone check (also what `ejob cron next --tz` uses): valid when
 * ej_tz_load (ejob/cron.h) can load it: an IANA name of the system's tz
 * database ($TZDIR, default /usr/share/zoneinfo) or one of Java's custom ids
 * (GMT+8, GMT+08:00, GMT-0530). "" and NULL are the host zone and valid.
 * Returns 0, or EJ_ECONFIG with `unknown time zone "NAME"` or
 * `invalid time zone name "NAME"` in err (EJ_ENOMEM).
 */
EJ_EXTERN int ej_config_check_time_zone(const char *name, char *err, size_t errlen);

/* ------------------------------------------------------------------------ */
/* JSON of the ZooKeeper `config` node                                       */
/* ------------------------------------------------------------------------ */

/*
 * Serialise cfg exactly as ElasticJob 2.1.5 does: compact, keys in the order
 *   jobName, jobClass, jobType, cron, shardingTotalCount,
 *   shardingItemParameters, jobParameter, failover, misfire, description,
 *   jobProperties{job_exception_handler, executor_service_handler, extras},
 *   [streamingProcess (DATAFLOW) | scriptCommandLine (SCRIPT)],
 *   monitorExecution, maxTimeDiffSeconds, monitorPort,
 *   jobShardingStrategyClass, reconcileIntervalMinutes, disabled, overwrite
 * with Gson's HTML-safe escaping. Then ejob's keys, only when they apply:
 *   timeZone (when non-empty), scriptTimeoutMilliseconds (SCRIPT, when != 0),
 *   httpUri, httpMethod, httpData, httpConnectTimeoutMilliseconds,
 *   httpReadTimeoutMilliseconds, httpContentType (HTTP jobs, always),
 * then the preserved unknown keys (extra_json). jobClass of a SCRIPT job is
 * always EJ_CONFIG_SCRIPT_JOB_CLASS. cfg is not validated here.
 * Returns a NUL-terminated heap string the caller frees, or NULL when out of
 * memory.
 */
EJ_EXTERN char *ej_job_config_to_json(const struct ej_job_config *cfg);

/*
 * The ejob-only settings of cfg that a Java ElasticJob-Lite 2.1.5 instance
 * sharing the job ignores (it reads the config node without them): their
 * config node keys ("timeZone", "scriptTimeoutMilliseconds",
 * "jobShardingStrategyType" for a strategy Java cannot load, "jobType" for
 * an HTTP job, which Java cannot read at all), at most max of them into
 * keys (static strings; keys may be NULL when max is 0). Returns how many
 * there are (0: Java runs the job as ejob does). Thread-safe; cfg is only
 * read.
 */
EJ_EXTERN size_t ej_job_config_java_ignored(const struct ej_job_config *cfg, const char **keys,
                                            size_t max);

/*
 * Parse a `config` node: the Lite adapter's shape or the console's
 * JobSettings shape, keys in any order, Java 2.1.5's defaults for missing
 * keys (notably misfire=false, shardingTotalCount=0, monitorExecution=true,
 * reconcileIntervalMinutes=10), unknown keys kept in extra_json and unknown
 * jobProperties keys in job_properties_extra. Numbers given as strings ("3")
 * and strings given as numbers are accepted as Gson does. The result is NOT
 * validated: call ej_job_config_validate before using it.
 *
 * json/len: the bytes (need not be NUL-terminated); at most EJ_CONFIG_MAX_JSON.
 * cfg: an initialised config; replaced on success (old strings freed),
 *      untouched on failure.
 * err: receives e.g. `shardingTotalCount: expected an integer, got "x"`,
 *      `jobType: is required`, `jobType: unknown job type "FOO"`,
 *      `JSON syntax error at line 1, column 17: ...`.
 * Objects and arrays may nest at most EJ_CONFIG_MAX_JSON_DEPTH deep.
 * Numbers are read as Java 2.1.5's Gson reads them for an int field (so Java
 * and ejob instances sharing the node agree): 3, "3", 3.0 and 3e0 are 3;
 * 3.5, 1e10 and 2147483648 are refused ("expected an integer").
 * Returns 0, EJ_EPARSE (syntax, type or shape error), EJ_EINVAL (NULL
 * arguments) or EJ_ENOMEM.
 */
EJ_EXTERN int ej_job_config_from_json(const char *json, size_t len, struct ej_job_config *cfg,
                                      char *err, size_t errlen);

/*
 * The job's fields as a form shows them, from the one field table
 * (src/config/fields.h), as compact JSON: an array of
 *   {"key": "cron", "name": "cron", "inProps": false,
 *    "type": "string"|"integer"|"boolean"|"enum"|"object",
 *    "scope": "ANY"|"DATAFLOW"|"SCRIPT"|"HTTP", "form": "main"|"more"|"java",
 *    "choices": [...], "default": ..., "timeZone": false, "help": "..."}
 * in the config node's order; inProps: the key is inside jobProperties
 * (name is then "jobProperties.KEY"); form "java": what only Java
 * ElasticJob instances use; timeZone: a name of the tz database
 * (ej_tz_names). A heap string the caller frees, NULL when out of memory.
 */
EJ_EXTERN char *ej_config_fields_json(void);

/*
 * ej_job_config_from_json then ej_job_config_validate_all, reporting every
 * problem at once (the console's config form, `ejob config set`): each
 * value of the wrong type ("shardingTotalCount: expected an integer, got
 * \"abc\""), then every rule's problem about the fields that did read (a
 * field whose value did not read is not blamed twice). A bad time zone
 * does not hide the cron's problems, nor a bad cron the zone's. Messages
 * are appended to errs in the format of ej_job_config_validate.
 * job: the job the node belongs to, or NULL. A missing jobName is taken
 * from it; a different one is a problem (`jobName: is "x" but the job is
 * "y"`).
 * cfg: initialised; receives what was read unless the JSON as a whole is
 * unusable (syntax, not an object: EJ_EPARSE with that one message).
 * Returns 0, EJ_ECONFIG (messages added), EJ_EPARSE, EJ_EINVAL or EJ_ENOMEM.
 */
EJ_EXTERN int ej_job_config_check_json(const char *json, size_t len, const char *job,
                                       struct ej_job_config *cfg, struct ej_config_errors *errs);

/*
 * ej_job_config_from_json then ej_job_config_validate: what a `config` node
 * read from ZooKeeper or given to `ejob config set` must pass before anyone
 * uses it. cfg: an initialised config, replaced only when the JSON parses
 * (it then holds the parsed config even when validation fails, so callers
 * can show it). err: the first problem, as those two functions word it.
 * Returns 0, EJ_EPARSE, EJ_ECONFIG, EJ_EINVAL or EJ_ENOMEM.
 */
EJ_EXTERN int ej_job_config_parse(const char *json, size_t len, struct ej_job_config *cfg,
                                  char *err, size_t errlen);

/* ------------------------------------------------------------------------ */
/* Sharding item parameters ("0=a,1=b")                                      */
/* ------------------------------------------------------------------------ */

struct ej_sharding_param {
    int item;
    char *value; /* owned; trimmed */
};

/* item -> parameter, sorted by item, unique items. */
struct ej_sharding_params {
    size_t count;
    struct ej_sharding_param *entries; /* owned */
};

/*
 * Parse exactly as ElasticJob's ShardingItemParameters: NULL or "" gives an
 * empty map; otherwise split on ',' (Java String.split: trailing empty
 * pieces dropped), trim each piece (Java trim: chars <= ' '), split on '='
 * (again dropping trailing empties), require exactly 2 parts, trim both, the
 * key must be a Java int; the last duplicate wins. Errors (in err):
 *   Sharding item parameters 'S' format error, should be int=xx,int=xx
 *   Sharding item parameters key 'K' is not an integer.
 * No range check against shardingTotalCount (validation does that).
 * out: uninitialised or finalised; filled on success, left empty on failure
 * (always safe to fini). Returns 0, EJ_ECONFIG or EJ_ENOMEM.
 */
EJ_EXTERN int ej_sharding_params_parse(const char *s, struct ej_sharding_params *out, char *err,
                                       size_t errlen);

/* The parameter of item, borrowed from p (valid until p is finalised), or
 * NULL when the item has none. */
EJ_EXTERN const char *ej_sharding_params_get(const struct ej_sharding_params *p, int item);

/* Free p's entries; p is empty afterwards. Accepts NULL. */
EJ_EXTERN void ej_sharding_params_fini(struct ej_sharding_params *p);

/* ------------------------------------------------------------------------ */
/* Secrets in files                                                          */
/* ------------------------------------------------------------------------ */

/*
 * The rule for a file that holds a secret (the digest), as ssh applies it to
 * keys: mode (st_mode) group- or world-writable is refused (EJ_ECONFIG,
 * err: "PATH holds a secret and is world-writable (mode 666): refused;
 * chmod go-w PATH"); world-readable is allowed with a warning in warn
 * ("PATH holds a secret and is world-readable (mode 644); chmod o-r PATH"),
 * else warn is "". Messages never contain the secret. Returns 0 or
 * EJ_ECONFIG.
 */
EJ_EXTERN int ej_config_check_secret_mode(const char *path, unsigned mode, char *warn,
                                          size_t warnlen, char *err, size_t errlen);

/*
 * Read a ZooKeeper digest from a file: its first line, "USER:PASSWORD"
 * (the line end is dropped). The file must be a regular file (symbolic
 * links are not followed) and pass ej_config_check_secret_mode.
 * out: receives a heap string the caller frees (and should wipe).
 * Returns 0, EJ_ECONFIG (err says why, naming the path, never the
 * content), -errno from open/read, EJ_EINVAL or EJ_ENOMEM.
 */
EJ_EXTERN int ej_config_read_secret_file(const char *path, char **out, char *warn, size_t warnlen,
                                         char *err, size_t errlen);

#endif
