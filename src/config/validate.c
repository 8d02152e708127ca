/* Validation of a job configuration, the error list, the time-zone check. */
#include <errno.h>
#include <fcntl.h>
#include <jansson.h>
#include <stdarg.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <sys/stat.h>
#include <unistd.h>

#include "common/util.h"
#include "config/internal.h"
#include "ejob/cron.h"
#include "ejob/error.h"

/* ------------------------------------------------------------------------ */
/* Error list                                                                */
/* ------------------------------------------------------------------------ */

void ej_config_errors_init(struct ej_config_errors *errs)
{
    if (errs == NULL)
        return;
    errs->count = 0;
    errs->messages = NULL;
}

void ej_config_errors_fini(struct ej_config_errors *errs)
{
    if (errs == NULL)
        return;
    for (size_t i = 0; i < errs->count; i++)
        free(errs->messages[i]);
    free(errs->messages);
    ej_config_errors_init(errs);
}

static const char too_many_errors[] = "too many errors; the rest are not shown";

int ej__config_errors_add(struct ej_config_errors *errs, const char *fmt, ...)
{
    if (errs == NULL)
        return 0;
    if (errs->count >= EJ_CONFIG_MAX_ERRORS)
        return 0;
    char *msg;
    if (errs->count == EJ_CONFIG_MAX_ERRORS - 1) {
        msg = strdup(too_many_errors);
    } else {
        va_list ap;
        va_start(ap, fmt);
        if (vasprintf(&msg, fmt, ap) < 0)
            msg = NULL;
        va_end(ap);
    }
    if (msg == NULL)
        return EJ_ENOMEM;
    char **grown = realloc(errs->messages, (errs->count + 1) * sizeof(*grown));
    if (grown == NULL) {
        free(msg);
        return EJ_ENOMEM;
    }
    errs->messages = grown;
    errs->messages[errs->count++] = msg;
    return 0;
}

/* ------------------------------------------------------------------------ */
/* Time zones                                                                */
/* ------------------------------------------------------------------------ */

int ej_config_check_time_zone(const char *name, char *err, size_t errlen)
{
    char shown[96];
    if (name == NULL || name[0] == '\0')
        return 0;
    size_t n = strlen(name);
    ej__config_quote_short(name, n, shown, sizeof(shown));
    if (n > EJ_CONFIG_MAX_SHORT) {
        if (err && errlen)
            snprintf(err, errlen, "invalid time zone name %s", shown);
        return EJ_ECONFIG;
    }
    /* The zone loader of the scheduler is the judge: what it loads is valid
     * (IANA names, and Java's custom ids such as GMT+08:00), nothing else. */
    ej_tz *tz = NULL;
    int rc = ej_tz_load(name, &tz);
    if (rc == EJ_ENOMEM) {
        if (err && errlen)
            snprintf(err, errlen, "out of memory");
        return rc;
    }
    if (rc != 0) {
        if (err && errlen)
            snprintf(err, errlen,
                     rc == EJ_EINVAL ? "invalid time zone name %s" : "unknown time zone %s", shown);
        return EJ_ECONFIG;
    }
    ej_tz_free(tz);
    return 0;
}

/* The cron rule: Quartz syntax, then a fire time ahead in the job's zone.
 * A zone that does not load is the zone rule's problem, reported in
 * *zone_why when zone_why is not NULL: the fire time is then judged in
 * UTC, so a bad zone never hides a bad cron. `why` receives the cron's
 * problem without the field name. Returns 0, EJ_ECONFIG (a cron problem
 * in why) or EJ_ENOMEM; *zone_bad tells whether the zone failed. */
static int check_cron_text(const char *cron, const char *time_zone, char *why, size_t whylen,
                           bool *zone_bad, char *zone_why, size_t zone_whylen)
{
    *zone_bad = false;
    ej_cron *parsed = NULL;
    int rc = ej_cron_parse(cron, &parsed, why, whylen);
    if (rc == EJ_ENOMEM)
        return rc;
    if (rc != 0)
        return EJ_ECONFIG;
    ej_tz *tz = NULL;
    if (time_zone != NULL && time_zone[0] != '\0') {
        rc = ej_config_check_time_zone(time_zone, zone_why, zone_whylen);
        if (rc == EJ_ENOMEM) {
            ej_cron_free(parsed);
            return rc;
        }
        *zone_bad = rc != 0;
        if (rc == 0)
            (void)ej_tz_load(time_zone, &tz);
    } else if (ej_tz_load(NULL, &tz) != 0) {
        tz = NULL; /* no usable host zone: judge in UTC */
    }
    int64_t next = 0;
    rc = ej_cron_next(parsed, tz, ej__now_ms(), &next);
    ej_cron_free(parsed);
    ej_tz_free(tz);
    if (rc != 0) {
        snprintf(why, whylen, "has no fire time ahead");
        return EJ_ECONFIG;
    }
    return 0;
}

int ej_config_check_cron(const char *cron, const char *time_zone, char *err, size_t errlen)
{
    char why[300] = "", zone_why[300] = "";
    bool zone_bad = false;
    if (cron == NULL || cron[0] == '\0') {
        if (err && errlen)
            snprintf(err, errlen, "cron: is required");
        return EJ_ECONFIG;
    }
    int rc = check_cron_text(cron, time_zone, why, sizeof why, &zone_bad, zone_why, sizeof zone_why);
    if (rc == EJ_ENOMEM)
        return rc;
    /* One message: the syntax, then the zone, then the fire time ahead. */
    bool syntax = rc != 0 && strcmp(why, "has no fire time ahead") != 0;
    if (zone_bad && !syntax) {
        if (err && errlen)
            snprintf(err, errlen, "%s: %s", ej__config_field_json_name(EJ_CFG_F_TIME_ZONE),
                     zone_why);
        return EJ_ECONFIG;
    }
    if (rc != 0 && err && errlen)
        snprintf(err, errlen, "%s: %s", ej__config_field_json_name(EJ_CFG_F_CRON), why);
    return rc;
}

/* ------------------------------------------------------------------------ */
/* Rules                                                                     */
/* ------------------------------------------------------------------------ */

struct vstate {
    ej__config_verr_fn fn;
    void *ctx;
    int count;
    bool stop;
};

static void report(struct vstate *v, enum ej__cfg_field f, const char *fmt, ...) EJ_PRINTF(3, 4);

static void report(struct vstate *v, enum ej__cfg_field f, const char *fmt, ...)
{
    if (v->stop)
        return;
    char msg[512];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(msg, sizeof(msg), fmt, ap);
    va_end(ap);
    v->count++;
    if (v->fn(v->ctx, f, msg) != 0)
        v->stop = true;
}

static bool is_blank(const char *s)
{
    for (; s && *s; s++) {
        if (*s != ' ' && *s != '\t' && *s != '\n' && *s != '\r' && *s != '\f' && *s != '\v')
            return false;
    }
    return true;
}

/* Strict UTF-8: no overlongs, no surrogates, nothing above U+10FFFF. */
static bool utf8_valid(const char *str)
{
    const unsigned char *s = (const unsigned char *)str;
    while (s && *s) {
        unsigned char c = *s;
        int n;
        uint32_t cp;
        if (c < 0x80) {
            s++;
            continue;
        } else if (c >= 0xC2 && c <= 0xDF) {
            n = 1;
            cp = c & 0x1F;
        } else if (c >= 0xE0 && c <= 0xEF) {
            n = 2;
            cp = c & 0x0F;
        } else if (c >= 0xF0 && c <= 0xF4) {
            n = 3;
            cp = c & 0x07;
        } else {
            return false;
        }
        for (int i = 1; i <= n; i++) {
            if ((s[i] & 0xC0) != 0x80)
                return false;
            cp = (cp << 6) | (s[i] & 0x3F);
        }
        if ((n == 2 && cp < 0x800) || (n == 3 && (cp < 0x10000 || cp > 0x10FFFF)) ||
            (cp >= 0xD800 && cp <= 0xDFFF))
            return false;
        s += n + 1;
    }
    return true;
}

/* Length and encoding of one string field. Returns false when reported. */
static bool check_text(struct vstate *v, enum ej__cfg_field f, const char *s, size_t max)
{
    size_t n = strlen(ej__config_str(s));
    if (n > max) {
        report(v, f, "is %zu bytes, longer than the limit of %zu", n, max);
        return false;
    }
    if (!utf8_valid(s)) {
        report(v, f, "must be valid UTF-8");
        return false;
    }
    return true;
}

static bool has_ctl(const char *s)
{
    for (const unsigned char *p = (const unsigned char *)s; p && *p; p++) {
        if (*p < 0x20 || *p == 0x7f)
            return true;
    }
    return false;
}

static bool is_json_object_text(const char *s)
{
    json_error_t jerr;
    json_t *j = json_loads(s, 0, &jerr);
    bool ok = j != NULL && json_is_object(j);
    json_decref(j);
    return ok;
}

static void check_job_name(struct vstate *v, const char *name)
{
    char shown[96];
    name = ej__config_str(name);
    size_t n = strlen(name);
    if (n == 0) {
        report(v, EJ_CFG_F_JOB_NAME, "is required");
        return;
    }
    if (n > EJ_CONFIG_MAX_JOB_NAME) {
        report(v, EJ_CFG_F_JOB_NAME, "is %zu bytes, longer than the limit of %d", n,
               EJ_CONFIG_MAX_JOB_NAME);
        return;
    }
    for (const char *p = name; *p; p++) {
        char c = *p;
        if (!((c >= 'A' && c <= 'Z') || (c >= 'a' && c <= 'z') || (c >= '0' && c <= '9') ||
              c == '_' || c == '.' || c == '-')) {
            ej__config_quote_short(name, n, shown, sizeof(shown));
            report(v, EJ_CFG_F_JOB_NAME, "must match [A-Za-z0-9_.-]+, got %s", shown);
            return;
        }
    }
    /* "." and ".." cannot be ZooKeeper path components. */
    if (strcmp(name, ".") == 0 || strcmp(name, "..") == 0)
        report(v, EJ_CFG_F_JOB_NAME, "must not be \".\" or \"..\"");
}

static int check_cron(struct vstate *v, const struct ej_job_config *cfg)
{
    if (is_blank(cfg->cron)) {
        report(v, EJ_CFG_F_CRON, "is required");
        return 0;
    }
    if (!check_text(v, EJ_CFG_F_CRON, cfg->cron, EJ_CONFIG_MAX_SHORT))
        return 0;
    char why[300] = "";
    bool zone_bad;
    /* A bad zone is reported by the zone rule, once; the cron is judged
     * all the same. */
    int rc = check_cron_text(cfg->cron, ej__config_str(cfg->time_zone), why, sizeof why,
                             &zone_bad, NULL, 0);
    if (rc == EJ_ENOMEM)
        return rc;
    if (rc != 0)
        report(v, EJ_CFG_F_CRON, "%s", why);
    return 0;
}

/* The script command line must split as the executor splits it. */
static int check_command_line(struct vstate *v, const char *line)
{
    char **argv = NULL;
    char why[300] = "";
    int rc = ej__split_command_line(line, &argv, NULL, why, sizeof(why));
    free(argv);
    if (rc == EJ_ENOMEM)
        return rc;
    if (rc != 0)
        report(v, EJ_CFG_F_SCRIPT_COMMAND_LINE, "%s", why);
    return 0;
}

static int check_params(struct vstate *v, const struct ej_job_config *cfg)
{
    if (!check_text(v, EJ_CFG_F_SHARDING_ITEM_PARAMETERS, cfg->sharding_item_parameters,
                    EJ_CONFIG_MAX_TEXT))
        return 0;
    struct ej_sharding_params params;
    char msg[256];
    int rc = ej_sharding_params_parse(cfg->sharding_item_parameters, &params, msg, sizeof(msg));
    if (rc == EJ_ENOMEM)
        return rc;
    if (rc != 0) {
        report(v, EJ_CFG_F_SHARDING_ITEM_PARAMETERS, "%s", msg);
        return 0;
    }
    for (size_t i = 0; i < params.count; i++) {
        int item = params.entries[i].item;
        if (item < 0)
            report(v, EJ_CFG_F_SHARDING_ITEM_PARAMETERS, "item %d is negative", item);
        else if (cfg->sharding_total_count >= 1 && item >= cfg->sharding_total_count)
            report(v, EJ_CFG_F_SHARDING_ITEM_PARAMETERS, "item %d >= shardingTotalCount %d", item,
                   cfg->sharding_total_count);
    }
    ej_sharding_params_fini(&params);
    return 0;
}

/* A job's history retention: -1 (the daemon's), 0 (forever) or days, at
 * most a hundred years. */
static void check_retention(struct vstate *v, const struct ej_job_tracing_config *t)
{
    if (t->retention_days < -1 || t->retention_days > EJ_CONFIG_MAX_RETENTION_DAYS)
        report(v, EJ_CFG_F_TRACING_RETENTION_DAYS,
               "must be -1 (the daemon's), 0 (forever) or days up to %d, got %d",
               EJ_CONFIG_MAX_RETENTION_DAYS, t->retention_days);
    if (t->failed_retention_days < -1 || t->failed_retention_days > EJ_CONFIG_MAX_RETENTION_DAYS)
        report(v, EJ_CFG_F_TRACING_FAILED_RETENTION_DAYS,
               "must be -1 (as retentionDays), 0 (forever) or days up to %d, got %d",
               EJ_CONFIG_MAX_RETENTION_DAYS, t->failed_retention_days);
}

/* The choices of f's row for a message: "A, B, C", or (or_last) "A, B or C". */
static void choices_text(const struct ej__cfg_field_desc *f, bool or_last, char *out, size_t len)
{
    const char *last = strrchr(f->choices, ',');
    size_t n = 0;
    for (const char *c = f->choices; *c != '\0' && n + 4 < len; c++) {
        if (*c != ',') {
            out[n++] = *c;
        } else if (c == last && or_last) {
            memcpy(out + n, " or ", 4);
            n += 4;
        } else {
            memcpy(out + n, ", ", 2);
            n += 2;
        }
    }
    out[n] = '\0';
}

/* A policy field (a string of its row's choices; "" allowed when that is
 * its default). */
static void check_choice(struct vstate *v, enum ej__cfg_field id, const char *value)
{
    const struct ej__cfg_field_desc *f = &ej__cfg_fields[id];
    if ((value[0] == '\0' && f->def_str[0] == '\0') || ej__config_field_choice_ok(f, value))
        return;
    char list[160];
    choices_text(f, true, list, sizeof list);
    report(v, id, "must be %s, got \"%.64s\"", list, value);
}

/* timeoutSeconds (every type) and scriptTimeoutMilliseconds, its alias from
 * before it (SCRIPT): at most a year; both set must agree. */
static void check_timeouts(struct vstate *v, const struct ej_job_config *cfg)
{
    if (cfg->timeout_seconds < 0 || cfg->timeout_seconds > EJ_CONFIG_MAX_TIMEOUT_SECONDS)
        report(v, EJ_CFG_F_TIMEOUT_SECONDS, "must be 0 (none) to %d, got %d",
               EJ_CONFIG_MAX_TIMEOUT_SECONDS, cfg->timeout_seconds);
    else if (cfg->timeout_seconds > 0 && cfg->script_timeout_ms > 0 &&
             cfg->job_type == EJ_JOB_TYPE_SCRIPT &&
             cfg->script_timeout_ms != (int64_t)cfg->timeout_seconds * 1000)
        report(v, EJ_CFG_F_TIMEOUT_SECONDS,
               "%d s disagrees with its alias scriptTimeoutMilliseconds (%lld ms): set one",
               cfg->timeout_seconds, (long long)cfg->script_timeout_ms);
    const struct ej_retry_config *r = &cfg->retry;
    if (r->max_attempts < 0 || r->max_attempts > 100)
        report(v, EJ_CFG_F_RETRY_MAX_ATTEMPTS, "must be 0 to 100, got %d", r->max_attempts);
    if (r->initial_backoff_seconds < 0 || r->initial_backoff_seconds > 86400)
        report(v, EJ_CFG_F_RETRY_INITIAL_BACKOFF_SECONDS, "must be 0 to 86400, got %d",
               r->initial_backoff_seconds);
    if (r->multiplier < 1 || r->multiplier > 10)
        report(v, EJ_CFG_F_RETRY_MULTIPLIER, "must be an integer 1 to 10, got %d", r->multiplier);
    if (r->max_backoff_seconds < 0 || r->max_backoff_seconds > 86400)
        report(v, EJ_CFG_F_RETRY_MAX_BACKOFF_SECONDS, "must be 0 to 86400, got %d",
               r->max_backoff_seconds);
    if (r->jitter_percent < 0 || r->jitter_percent > 100)
        report(v, EJ_CFG_F_RETRY_JITTER, "must be a percentage 0 to 100, got %d",
               r->jitter_percent);
    check_choice(v, EJ_CFG_F_OVERLAP_POLICY, cfg->overlap_policy);
    const char *mp = cfg->misfire_policy;
    bool catch_up = strcmp(mp, "CATCH_UP") == 0;
    check_choice(v, EJ_CFG_F_MISFIRE_POLICY, mp);
    if (cfg->catch_up_window_seconds < 0 || cfg->catch_up_window_seconds > 86400)
        report(v, EJ_CFG_F_CATCH_UP_WINDOW_SECONDS, "must be 0 to 86400, got %d",
               cfg->catch_up_window_seconds);
    else if (catch_up && cfg->catch_up_window_seconds == 0)
        report(v, EJ_CFG_F_MISFIRE_POLICY, "CATCH_UP needs catchUpWindowSeconds (1 to 86400)");
    if (cfg->starting_deadline_seconds < 0 || cfg->starting_deadline_seconds > 86400)
        report(v, EJ_CFG_F_STARTING_DEADLINE_SECONDS, "must be 0 (none) to 86400, got %d",
               cfg->starting_deadline_seconds);
    if (cfg->timeout_grace_seconds < 0 || cfg->timeout_grace_seconds > 3600)
        report(v, EJ_CFG_F_TIMEOUT_GRACE_SECONDS, "must be 0 (2 s) to 3600, got %d",
               cfg->timeout_grace_seconds);
}

static void check_http(struct vstate *v, const struct ej_http_config *h)
{
    char shown[96];
    const char *uri = ej__config_str(h->uri);
    if (is_blank(uri)) {
        report(v, EJ_CFG_F_HTTP_URI, "is required for HTTP jobs");
    } else if (check_text(v, EJ_CFG_F_HTTP_URI, uri, EJ_CONFIG_MAX_URI)) {
        ej__config_quote_short(uri, strlen(uri), shown, sizeof(shown));
        if (strncasecmp(uri, "http://", 7) != 0 && strncasecmp(uri, "https://", 8) != 0)
            report(v, EJ_CFG_F_HTTP_URI, "must start with http:// or https://, got %s", shown);
        else if (has_ctl(uri) || strchr(uri, ' ') != NULL)
            report(v, EJ_CFG_F_HTTP_URI, "must not contain spaces or control characters, got %s",
                   shown);
    }
    const char *method = ej__config_str(h->method);
    const struct ej__cfg_field_desc *mf = &ej__cfg_fields[EJ_CFG_F_HTTP_METHOD];
    if (!ej__config_field_choice_ok(mf, method)) {
        ej__config_quote_short(method, strlen(method), shown, sizeof(shown));
        char list[160];
        choices_text(mf, false, list, sizeof list);
        report(v, EJ_CFG_F_HTTP_METHOD, "must be one of %s, got %s", list, shown);
    }
    check_text(v, EJ_CFG_F_HTTP_DATA, h->data, EJ_CONFIG_MAX_TEXT);
    if (h->connect_timeout_ms < 1)
        report(v, EJ_CFG_F_HTTP_CONNECT_TIMEOUT, "must be >= 1, got %d", h->connect_timeout_ms);
    if (h->read_timeout_ms < 1)
        report(v, EJ_CFG_F_HTTP_READ_TIMEOUT, "must be >= 1, got %d", h->read_timeout_ms);
    if (check_text(v, EJ_CFG_F_HTTP_CONTENT_TYPE, h->content_type, EJ_CONFIG_MAX_SHORT) &&
        has_ctl(h->content_type))
        report(v, EJ_CFG_F_HTTP_CONTENT_TYPE, "must not contain control characters");
}

int ej__config_validate(const struct ej_job_config *cfg, ej__config_verr_fn fn, void *ctx)
{
    struct vstate v = {fn, ctx, 0, false};
    char msg[256];

    check_job_name(&v, cfg->job_name);
    if (check_cron(&v, cfg) == EJ_ENOMEM)
        return EJ_ENOMEM;
    if (cfg->sharding_total_count < 1)
        report(&v, EJ_CFG_F_SHARDING_TOTAL_COUNT, "must be >= 1, got %d",
               cfg->sharding_total_count);
    else if (cfg->sharding_total_count > EJ_CONFIG_MAX_SHARDING_TOTAL_COUNT)
        report(&v, EJ_CFG_F_SHARDING_TOTAL_COUNT, "must be <= %d, got %d",
               EJ_CONFIG_MAX_SHARDING_TOTAL_COUNT, cfg->sharding_total_count);
    if (check_params(&v, cfg) == EJ_ENOMEM)
        return EJ_ENOMEM;
    check_text(&v, EJ_CFG_F_JOB_PARAMETER, cfg->job_parameter, EJ_CONFIG_MAX_TEXT);
    check_text(&v, EJ_CFG_F_DESCRIPTION, cfg->description, EJ_CONFIG_MAX_TEXT);
    check_text(&v, EJ_CFG_F_JOB_EXCEPTION_HANDLER, cfg->job_exception_handler, EJ_CONFIG_MAX_SHORT);
    check_text(&v, EJ_CFG_F_EXECUTOR_SERVICE_HANDLER, cfg->executor_service_handler,
               EJ_CONFIG_MAX_SHORT);
    if (cfg->job_properties_extra != NULL && !is_json_object_text(cfg->job_properties_extra))
        report(&v, EJ_CFG_F_JOB_PROPERTIES, "extra properties are not a JSON object");
    if (ej_job_type_parse(ej_job_type_name(cfg->job_type), NULL) != 0)
        report(&v, EJ_CFG_F_JOB_TYPE, "unknown job type %d", (int)cfg->job_type);
    check_text(&v, EJ_CFG_F_JOB_CLASS, cfg->job_class, EJ_CONFIG_MAX_SHORT);
    if (cfg->job_type == EJ_JOB_TYPE_SCRIPT && is_blank(cfg->script_command_line))
        report(&v, EJ_CFG_F_SCRIPT_COMMAND_LINE, "is required for SCRIPT jobs");
    else if (check_text(&v, EJ_CFG_F_SCRIPT_COMMAND_LINE, cfg->script_command_line,
                        EJ_CONFIG_MAX_TEXT) &&
             cfg->job_type == EJ_JOB_TYPE_SCRIPT &&
             check_command_line(&v, cfg->script_command_line) == EJ_ENOMEM)
        return EJ_ENOMEM;
    if (cfg->script_timeout_ms < 0)
        report(&v, EJ_CFG_F_SCRIPT_TIMEOUT, "must be >= 0, got %lld",
               (long long)cfg->script_timeout_ms);
    check_timeouts(&v, cfg);
    if (cfg->max_time_diff_seconds < -1)
        report(&v, EJ_CFG_F_MAX_TIME_DIFF_SECONDS, "must be -1 or >= 0, got %d",
               cfg->max_time_diff_seconds);
    if (cfg->monitor_port < -1 || cfg->monitor_port > 65535)
        report(&v, EJ_CFG_F_MONITOR_PORT, "must be -1 or 0..65535, got %d", cfg->monitor_port);
    check_text(&v, EJ_CFG_F_JOB_SHARDING_STRATEGY_CLASS, cfg->job_sharding_strategy_class,
               EJ_CONFIG_MAX_SHORT);
    int rc = ej_config_check_time_zone(cfg->time_zone, msg, sizeof(msg));
    if (rc == EJ_ENOMEM)
        return rc;
    if (rc != 0)
        report(&v, EJ_CFG_F_TIME_ZONE, "%s", msg);
    if (cfg->job_type == EJ_JOB_TYPE_HTTP)
        check_http(&v, &cfg->http);
    check_retention(&v, &cfg->tracing);
    if (cfg->extra_json != NULL && !is_json_object_text(cfg->extra_json))
        report(&v, EJ_CFG_F_EXTRA, "extra keys are not a JSON object");
    return v.count;
}

/* ------------------------------------------------------------------------ */
/* Public entry points                                                       */
/* ------------------------------------------------------------------------ */

struct first_err {
    char *buf;
    size_t len;
};

static int keep_first(void *ctx, enum ej__cfg_field field, const char *msg)
{
    struct first_err *fe = ctx;
    if (fe->buf != NULL && fe->len > 0)
        snprintf(fe->buf, fe->len, "%s: %s", ej__config_field_json_name(field), msg);
    return 1; /* stop at the first */
}

int ej_job_config_validate(const struct ej_job_config *cfg, char *err, size_t errlen)
{
    if (err != NULL && errlen > 0)
        err[0] = '\0';
    if (cfg == NULL) {
        if (err != NULL && errlen > 0)
            snprintf(err, errlen, "config: is NULL");
        return EJ_EINVAL;
    }
    struct first_err fe = {err, errlen};
    int n = ej__config_validate(cfg, keep_first, &fe);
    if (n < 0)
        return n;
    return n == 0 ? 0 : EJ_ECONFIG;
}

struct all_errs {
    struct ej_config_errors *errs;
    int rc;
};

static int keep_all(void *ctx, enum ej__cfg_field field, const char *msg)
{
    struct all_errs *ae = ctx;
    if (ae->rc == 0)
        ae->rc = ej__config_errors_add(ae->errs, "%s: %s", ej__config_field_json_name(field), msg);
    return 0;
}

int ej_job_config_validate_all(const struct ej_job_config *cfg, struct ej_config_errors *errs)
{
    if (cfg == NULL)
        return EJ_EINVAL;
    struct all_errs ae = {errs, 0};
    int n = ej__config_validate(cfg, keep_all, &ae);
    if (n < 0)
        return n;
    if (ae.rc != 0)
        return ae.rc;
    return n == 0 ? 0 : EJ_ECONFIG;
}

/* Drops the problems of fields whose value did not even read (their
 * member holds a default the rules would blame), then keeps the rest. */
struct read_filter {
    const bool *bad;
    struct all_errs all;
};

static int keep_readable(void *ctx, enum ej__cfg_field field, const char *msg)
{
    struct read_filter *rf = ctx;
    if (rf->bad[field])
        return 0;
    return keep_all(&rf->all, field, msg);
}

int ej_job_config_check_json(const char *json, size_t len, const char *job,
                             struct ej_job_config *cfg, struct ej_config_errors *errs)
{
    if (cfg == NULL || errs == NULL)
        return EJ_EINVAL;
    bool bad[EJ_CFG_F_COUNT_];
    size_t before = errs->count;
    int rc = ej__config_from_json_all(json, len, cfg, errs, bad);
    if (rc != 0 && rc != EJ_EPARSE)
        return rc;
    bool some_value = false;
    for (int i = 0; i < EJ_CFG_F_COUNT_; i++)
        some_value = some_value || bad[i];
    if (rc == EJ_EPARSE && !some_value)
        return rc; /* the JSON itself is unusable: nothing was read */
    if (job != NULL && !bad[EJ_CFG_F_JOB_NAME]) {
        if (cfg->job_name[0] == '\0' && ej_job_config_set_str(&cfg->job_name, job) != 0)
            return EJ_ENOMEM;
        if (strcmp(cfg->job_name, job) != 0) {
            char shown[96];
            ej__config_quote_short(cfg->job_name, strlen(cfg->job_name), shown, sizeof shown);
            if (ej__config_errors_add(errs, "jobName: is %s but the job is \"%s\"", shown, job))
                return EJ_ENOMEM;
            bad[EJ_CFG_F_JOB_NAME] = true;
        }
    }
    struct read_filter rf = {bad, {errs, 0}};
    int n = ej__config_validate(cfg, keep_readable, &rf);
    if (n < 0)
        return n;
    if (rf.all.rc != 0)
        return rf.all.rc;
    return errs->count > before ? EJ_ECONFIG : 0;
}
