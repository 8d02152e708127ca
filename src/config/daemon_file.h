/*
 * The daemon's YAML file (SPEC section 3, docs/configuration.md): the model
 * `ejob run` loads and the loader. Not part of the public C API: a program
 * that embeds jobs builds each ej_job_config itself; the daemon, its
 * commands, tests, fuzzers and benches include this from src/.
 */
#ifndef EJ_CONFIG_DAEMON_FILE_H
#define EJ_CONFIG_DAEMON_FILE_H

#include <stdbool.h>
#include <stddef.h>

#include "ejob/config.h"

/* Largest daemon YAML file accepted. */
#define EJ_CONFIG_MAX_YAML (16 * 1024 * 1024)
/* Most jobs one daemon file may define. */
#define EJ_CONFIG_MAX_DAEMON_JOBS 10000
/* regCenter.sessionTimeoutMilliseconds range (ZooKeeper's server default
 * allows 2..20 ticks of 2000 ms; the client cannot keep a session shorter
 * than its own round trips). */
#define EJ_CONFIG_MIN_SESSION_TIMEOUT_MS 1000
#define EJ_CONFIG_MAX_SESSION_TIMEOUT_MS 3600000

struct ej_reg_center_config {
    bool embedded;             /* serverLists missing or "embedded" */
    char *server_lists;        /* "host:port[,host:port...]"; "" when embedded */
    char *name_space;          /* namespace (required) */
    int session_timeout_ms;    /* sessionTimeoutMilliseconds (60000) */
    int connection_timeout_ms; /* connectionTimeoutMilliseconds (15000) */
    int base_sleep_time_ms;    /* baseSleepTimeMilliseconds (1000) */
    int max_sleep_time_ms;     /* maxSleepTimeMilliseconds (3000) */
    int max_retries;           /* maxRetries (3) */
    int takeover_margin_ms;    /* takeoverMarginMilliseconds (1000; 0 none) */
    char *digest;              /* "user:password", or NULL for none */
    char *digest_file;         /* digestFile as given, or NULL; digest then
                                  holds what it contains */
};

typedef enum ej_tracing_type {
    EJ_TRACING_NONE = 0, /* no tracing section, or type NONE (see off) */
    EJ_TRACING_SQLITE = 1,
    EJ_TRACING_POSTGRESQL = 2,
} ej_tracing_type;

/* Defaults of tracing.retentionDays and tracing.outputMaxBytes. */
#define EJ_TRACING_RETENTION_DAYS_DEFAULT 7
#define EJ_TRACING_OUTPUT_MAX_DEFAULT 65536

struct ej_tracing_config {
    ej_tracing_type type;
    char *url; /* SQLite file path or libpq connection string; NULL when NONE */
    /* type: NONE given: no history at all. Without a tracing section (type
     * NONE, off false) the daemon keeps history in SQLite in its state
     * directory. */
    bool off;
    char *password_file;  /* passwordFile: PostgreSQL password, first line; NULL none */
    int retention_days;   /* retentionDays: purge rows older; 0 keeps forever (7) */
    int output_max_bytes; /* outputMaxBytes: cap of each captured stream (65536) */
};

/* The daemon's metrics endpoint (docs/metrics.md). */
struct ej_metrics_config {
    /* metrics.listen: "HOST:PORT", "[IPV6]:PORT" or ":PORT", checked with
     * ej_metrics_parse_listen (include/ejob/metrics.h) when the file is
     * loaded; NULL when not given (no endpoint unless --metrics-listen). */
    char *listen;
};

/* log: {level, format} (docs/configuration.md). --log-level and
 * --log-format win over them; a reload applies a changed level or format
 * that the command line did not set. */
struct ej_log_config {
    int level;  /* an ej_log_level (ejob/log.h), or -1 when not given */
    int format; /* an ej_log_format, or -1 when not given */
};

/* ------------------------------------------------------------------ alerts
 * alerts: {channels, rules, throttleSeconds} and each job's alerts
 * (docs/alerts.md). The loader resolves every job's rules (its own
 * jobs.X.alerts, else defaults.alerts, else the section's rules) into
 * job_rules, parallel to the file's jobs, and reads each channel's secret
 * (secretFile/secretEnv, passwordFile/passwordEnv) so a bad one stops the
 * start, or `ejob run --check`, at its line. */

typedef enum ej_alert_channel_type {
    EJ_ALERT_CH_WEBHOOK = 0,
    EJ_ALERT_CH_EMAIL,
    EJ_ALERT_CH_SLACK,
    EJ_ALERT_CH_DINGTALK,
    EJ_ALERT_CH_WECOM,
    EJ_ALERT_CH_FEISHU,
    EJ_ALERT_CH_TYPES
} ej_alert_channel_type;

/* What an alert is about: the words of a rule's `on`, in this order. */
typedef enum ej_alert_kind {
    EJ_ALERT_FAILED = 0, /* an item run failed */
    EJ_ALERT_TIMEOUT,    /* an item run failed by its script/HTTP timeout */
    EJ_ALERT_NOT_RUN,    /* a fire due on this instance did not run (a reason) */
    EJ_ALERT_MISSED,     /* a fire no live instance owned (the fire ledger) */
    EJ_ALERT_RECOVERED,  /* an item's first success after an alert for it */
    EJ_ALERT_TEST,       /* `ejob alerts test`; no rule names it */
    EJ_ALERT_KINDS
} ej_alert_kind;

/* Defaults of throttleSeconds and a rule's after. */
#define EJ_ALERT_THROTTLE_DEFAULT 300
#define EJ_ALERT_MAX_CHANNELS 64
#define EJ_ALERT_MAX_RULES 64

struct ej_alert_channel_config {
    char *name;
    ej_alert_channel_type type;
    char *url;    /* webhook and chats: the URL; email: smtp (smtp:// or smtps://) */
    char *secret; /* webhook: the HMAC key; email: the SMTP password; NULL none */
    char *from;   /* email */
    char *user;   /* email: SMTP user (default: from) */
    char **to;    /* email: recipients */
    size_t to_count;
};

struct ej_alert_rule_config {
    unsigned on;      /* bit (1u << ej_alert_kind) per kind */
    int after;        /* consecutive failures of an item before it alerts (1) */
    size_t *channels; /* indexes into ej_alert_config.channels */
    size_t channel_count;
};

/* The rules of one job, resolved. */
struct ej_alert_job_rules {
    char *job;
    struct ej_alert_rule_config *rules;
    size_t rule_count;
};

struct ej_alert_config {
    bool configured; /* an alerts: section with at least one channel */
    struct ej_alert_channel_config *channels;
    size_t channel_count;
    int throttle_seconds;                 /* throttleSeconds (300); 0: every message */
    struct ej_alert_job_rules *job_rules; /* job_count entries, file order */
    size_t job_count;
};

/* 0..EJ_ALERT_KINDS-1 by name ("failed", "not-run", ...), or -1. */
int ej_alert_kind_parse(const char *word);
/* "failed", "timeout", "not-run", "missed", "recovered", "test". */
const char *ej_alert_kind_name(ej_alert_kind kind);
/* "webhook", "email", "slack", "dingtalk", "wecom", "feishu". */
const char *ej_alert_channel_type_name(ej_alert_channel_type type);
/* Free cfg's contents (NULL and zeroed accepted); zeroes it. */
void ej_alert_config_fini(struct ej_alert_config *cfg);

/*
 * The whole daemon file. Each job is a complete ej_job_config: elasticJobType
 * gives job_type (SCRIPT or HTTP), props give script_command_line,
 * script_timeout_ms (script.timeout.milliseconds) and http.*,
 * jobShardingStrategyType is stored as given in job_sharding_strategy_class
 * (e.g. "AVERAGE", "ROTATE"), the job's key is job_name. Jobs keep file order.
 * Owned by the struct; free with ej_daemon_config_fini.
 */
struct ej_daemon_config {
    struct ej_reg_center_config reg_center;
    struct ej_tracing_config tracing;
    struct ej_metrics_config metrics;
    struct ej_log_config log;
    struct ej_alert_config alerts;
    size_t job_count;
    struct ej_job_config *jobs;
    int *job_lines; /* 1-based line of each job's key in the file */
    /* Things worth saying that do not stop the file, e.g. a secret in a
     * world-readable file: "NAME: message" each. */
    struct ej_config_errors warnings;
};

/* Defaults (no jobs, embedded registry, no namespace yet). Returns 0 or
 * EJ_ENOMEM (then safe to fini). */
int ej_daemon_config_init(struct ej_daemon_config *cfg);

/* Free everything; accepts NULL and a zeroed or finalised struct. */
void ej_daemon_config_fini(struct ej_daemon_config *cfg);

/*
 * Load a daemon YAML document. Collects ALL problems, not just the first,
 * each as "NAME:LINE:COL: message" (1-based), e.g.
 *   jobs.yaml:7:5: jobs.orderSync: unknown key "shardingTotalCont"
 *   jobs.yaml:9:26: jobs.orderSync.shardingTotalCount: expected an integer, got "three"
 *   jobs.yaml:2:3: regCenter.namespace: is required
 *   jobs.yaml:3:1: YAML syntax error: mapping values are not allowed in this context
 *   jobs.yaml:4:9: nested deeper than 64 levels
 *   jobs.yaml:12:11: metrics.listen: "example.com:80": "example.com" is not an IPv4 address ...
 *   jobs.yaml:14:10: log.level: must be debug, info, warn or error, got "verbose"
 * regCenter.digestFile names a file (relative to the YAML file's directory)
 * whose first line is the digest (ej_config_read_secret_file). A file
 * holding a secret (regCenter.digest, or the digestFile) that is group- or
 * world-writable is refused; world-readable adds a warning to
 * out->warnings (load_file only: a string has no file mode).
 * Unknown keys are errors; every job then goes through ej_job_config_validate
 * (errors placed at the offending key, or the job's key).
 *
 * text: NUL-terminated YAML. name: what to call the input in messages
 * (NULL = "<string>"). out: uninitialised or finalised; on success it owns
 * the result, on failure it is left finalised (safe to fini again).
 * errs: an initialised list that messages are appended to (may be NULL).
 * Returns 0, EJ_ECONFIG (errs say why), EJ_ENOMEM, or (load_file) a -errno
 * from opening/reading path (a message naming the path is added too).
 */
int ej_daemon_config_load_string(const char *text, const char *name, struct ej_daemon_config *out,
                                 struct ej_config_errors *errs);
int ej_daemon_config_load_file(const char *path, struct ej_daemon_config *out,
                               struct ej_config_errors *errs);

#endif
