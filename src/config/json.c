/*
 * The ZooKeeper `config` node: ElasticJob 2.1.5's JSON, written byte for
 * byte as its Gson type adapter does, read in both the adapter's shape and
 * the console's JobSettings shape.
 */
#include <jansson.h>
#include <math.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "common/util.h"
#include "config/internal.h"
#include "ejob/error.h"

/* ------------------------------------------------------------------------ */
/* Writing                                                                   */
/* ------------------------------------------------------------------------ */

/* A Gson string literal. ej__json_quote does the HTML-safe escaping; Gson
 * also escapes U+2028 and U+2029, which are done here. */
static void put_quoted(ej_buf *b, const char *s)
{
    char *q = ej__json_quote(ej__config_str(s));
    if (q == NULL) {
        b->failed = true;
        return;
    }
    const char *p = q;
    for (;;) {
        const char *ls = strstr(p, "\xe2\x80\xa8");
        const char *ps = strstr(p, "\xe2\x80\xa9");
        const char *hit = ls == NULL ? ps : (ps == NULL || ls < ps ? ls : ps);
        if (hit == NULL)
            break;
        ej__buf_append(b, p, (size_t)(hit - p));
        ej__buf_puts(b, hit == ls ? "\\u2028" : "\\u2029");
        p = hit + 3;
    }
    ej__buf_puts(b, p);
    free(q);
}

static void put_key(ej_buf *b, const char *key)
{
    if (b->len > 0 && b->data[b->len - 1] != '{')
        ej__buf_append(b, ",", 1);
    put_quoted(b, key);
    ej__buf_append(b, ":", 1);
}

static void put_str(ej_buf *b, const char *key, const char *value)
{
    put_key(b, key);
    put_quoted(b, value);
}

static void put_int(ej_buf *b, const char *key, long long value)
{
    put_key(b, key);
    ej__buf_printf(b, "%lld", value);
}

static void put_bool(ej_buf *b, const char *key, bool value)
{
    put_key(b, key);
    ej__buf_puts(b, value ? "true" : "false");
}

/* The shortest "%g" rendition that reads back as the same double, always
 * with a '.' or an exponent so it stays a real when read again. */
static void put_real(ej_buf *b, double d)
{
    char tmp[40];
    if (!isfinite(d)) {
        ej__buf_puts(b, "null");
        return;
    }
    for (int prec = 1; prec <= 17; prec++) {
        snprintf(tmp, sizeof(tmp), "%.*g", prec, d);
        if (strtod(tmp, NULL) == d)
            break;
    }
    ej__buf_puts(b, tmp);
    if (strpbrk(tmp, ".eE") == NULL)
        ej__buf_puts(b, ".0");
}

/* Any JSON value, compact, with Gson's string escaping. */
static void put_value(ej_buf *b, json_t *v)
{
    const char *key;
    json_t *item;
    size_t i;
    switch (json_typeof(v)) {
    case JSON_OBJECT:
        ej__buf_append(b, "{", 1);
        json_object_foreach(v, key, item)
        {
            put_key(b, key);
            put_value(b, item);
        }
        ej__buf_append(b, "}", 1);
        break;
    case JSON_ARRAY:
        ej__buf_append(b, "[", 1);
        json_array_foreach(v, i, item)
        {
            if (i > 0)
                ej__buf_append(b, ",", 1);
            put_value(b, item);
        }
        ej__buf_append(b, "]", 1);
        break;
    case JSON_STRING:
        put_quoted(b, json_string_value(v));
        break;
    case JSON_INTEGER:
        ej__buf_printf(b, "%" JSON_INTEGER_FORMAT, json_integer_value(v));
        break;
    case JSON_REAL:
        put_real(b, json_real_value(v));
        break;
    case JSON_TRUE:
        ej__buf_puts(b, "true");
        break;
    case JSON_FALSE:
        ej__buf_puts(b, "false");
        break;
    case JSON_NULL:
        ej__buf_puts(b, "null");
        break;
    }
}

/* Keys ejob writes itself; a preserved unknown key never repeats one. */
static const char *const known_keys[] = {
    "jobName",
    "jobClass",
    "jobType",
    "cron",
    "shardingTotalCount",
    "shardingItemParameters",
    "jobParameter",
    "failover",
    "misfire",
    "description",
    "jobProperties",
    "streamingProcess",
    "scriptCommandLine",
    "monitorExecution",
    "maxTimeDiffSeconds",
    "monitorPort",
    "jobShardingStrategyClass",
    "reconcileIntervalMinutes",
    "disabled",
    "overwrite",
    "timeZone",
    "scriptTimeoutMilliseconds",
    "httpUri",
    "httpMethod",
    "httpData",
    "httpConnectTimeoutMilliseconds",
    "httpReadTimeoutMilliseconds",
    "httpContentType",
};

static bool is_known_key(const char *key)
{
    for (size_t i = 0; i < sizeof(known_keys) / sizeof(known_keys[0]); i++) {
        if (strcmp(key, known_keys[i]) == 0)
            return true;
    }
    return false;
}

/* Append the members of the JSON object text `extra`, skipping keys in
 * skip[] (NULL-terminated) and those is_known (when check_known). Text that
 * is not a JSON object is ignored. */
static void put_extra_members(ej_buf *b, const char *extra, const char *const *skip,
                              bool check_known)
{
    if (extra == NULL || extra[0] == '\0')
        return;
    json_error_t jerr;
    json_t *obj = json_loads(extra, 0, &jerr);
    if (obj == NULL)
        return;
    if (json_is_object(obj)) {
        const char *key;
        json_t *v;
        json_object_foreach(obj, key, v)
        {
            bool skipped = check_known && is_known_key(key);
            for (size_t i = 0; skip != NULL && skip[i] != NULL; i++)
                skipped = skipped || strcmp(key, skip[i]) == 0;
            if (skipped)
                continue;
            put_key(b, key);
            put_value(b, v);
        }
    }
    json_decref(obj);
}

char *ej_job_config_to_json(const struct ej_job_config *cfg)
{
    static const char *const prop_keys[] = {"job_exception_handler", "executor_service_handler",
                                            NULL};
    if (cfg == NULL)
        return NULL;
    ej_buf b;
    ej__buf_init(&b);
    ej__buf_append(&b, "{", 1);
    put_str(&b, "jobName", cfg->job_name);
    put_str(&b, "jobClass",
            cfg->job_type == EJ_JOB_TYPE_SCRIPT ? EJ_CONFIG_SCRIPT_JOB_CLASS : cfg->job_class);
    put_str(&b, "jobType", ej_job_type_name(cfg->job_type));
    put_str(&b, "cron", cfg->cron);
    put_int(&b, "shardingTotalCount", cfg->sharding_total_count);
    put_str(&b, "shardingItemParameters", cfg->sharding_item_parameters);
    put_str(&b, "jobParameter", cfg->job_parameter);
    put_bool(&b, "failover", cfg->failover);
    put_bool(&b, "misfire", cfg->misfire);
    put_str(&b, "description", cfg->description);
    put_key(&b, "jobProperties");
    ej__buf_append(&b, "{", 1);
    put_str(&b, "job_exception_handler", cfg->job_exception_handler);
    put_str(&b, "executor_service_handler", cfg->executor_service_handler);
    put_extra_members(&b, cfg->job_properties_extra, prop_keys, false);
    ej__buf_append(&b, "}", 1);
    if (cfg->job_type == EJ_JOB_TYPE_DATAFLOW)
        put_bool(&b, "streamingProcess", cfg->streaming_process);
    else if (cfg->job_type == EJ_JOB_TYPE_SCRIPT)
        put_str(&b, "scriptCommandLine", cfg->script_command_line);
    put_bool(&b, "monitorExecution", cfg->monitor_execution);
    put_int(&b, "maxTimeDiffSeconds", cfg->max_time_diff_seconds);
    put_int(&b, "monitorPort", cfg->monitor_port);
    put_str(&b, "jobShardingStrategyClass", cfg->job_sharding_strategy_class);
    put_int(&b, "reconcileIntervalMinutes", cfg->reconcile_interval_minutes);
    put_bool(&b, "disabled", cfg->disabled);
    put_bool(&b, "overwrite", cfg->overwrite);
    /* ejob's own keys: only when they carry something, so a Java-shaped job
     * is written exactly as Java writes it. Java readers skip them. */
    if (cfg->time_zone != NULL && cfg->time_zone[0] != '\0')
        put_str(&b, "timeZone", cfg->time_zone);
    if (cfg->job_type == EJ_JOB_TYPE_SCRIPT && cfg->script_timeout_ms != 0)
        put_int(&b, "scriptTimeoutMilliseconds", cfg->script_timeout_ms);
    if (cfg->job_type == EJ_JOB_TYPE_HTTP) {
        put_str(&b, "httpUri", cfg->http.uri);
        put_str(&b, "httpMethod", cfg->http.method);
        put_str(&b, "httpData", cfg->http.data);
        put_int(&b, "httpConnectTimeoutMilliseconds", cfg->http.connect_timeout_ms);
        put_int(&b, "httpReadTimeoutMilliseconds", cfg->http.read_timeout_ms);
        put_str(&b, "httpContentType", cfg->http.content_type);
    }
    put_extra_members(&b, cfg->extra_json, NULL, true);
    ej__buf_append(&b, "}", 1);
    if (b.failed) {
        ej__buf_fini(&b);
        return NULL;
    }
    return ej__buf_steal(&b);
}

/* ------------------------------------------------------------------------ */
/* Reading                                                                   */
/* ------------------------------------------------------------------------ */

struct reader {
    char *err;
    size_t errlen;
    int rc; /* first failure */
};

static void fail(struct reader *r, int rc, const char *fmt, ...) EJ_PRINTF(3, 4);

static void fail(struct reader *r, int rc, const char *fmt, ...)
{
    if (r->rc != 0)
        return;
    r->rc = rc;
    if (r->err != NULL && r->errlen > 0) {
        va_list ap;
        va_start(ap, fmt);
        vsnprintf(r->err, r->errlen, fmt, ap);
        va_end(ap);
    }
}

/* A short rendition of a JSON value for messages: strings quoted, others as
 * compact JSON, cut at about 60 bytes. */
static void describe(json_t *v, char *out, size_t outlen)
{
    if (json_is_string(v)) {
        ej__config_quote_short(json_string_value(v), json_string_length(v), out, outlen);
        return;
    }
    char *text = json_dumps(v, JSON_COMPACT | JSON_ENCODE_ANY);
    if (text == NULL) {
        snprintf(out, outlen, "(a JSON value)");
        return;
    }
    size_t n = strlen(text);
    if (n > 60)
        snprintf(out, outlen, "%.60s...", text);
    else
        snprintf(out, outlen, "%s", text);
    free(text);
}

/* Gson's nextString: strings as they are, numbers as their text. */
static void read_str(struct reader *r, const char *key, json_t *v, char **dst)
{
    char shown[128];
    char *copy = NULL;
    if (json_is_string(v)) {
        copy = strdup(json_string_value(v));
    } else if (json_is_integer(v)) {
        copy = ej__asprintf("%" JSON_INTEGER_FORMAT, json_integer_value(v));
    } else if (json_is_real(v)) {
        ej_buf b;
        ej__buf_init(&b);
        put_real(&b, json_real_value(v));
        copy = b.failed ? NULL : ej__buf_steal(&b);
        ej__buf_fini(&b);
    } else {
        describe(v, shown, sizeof(shown));
        fail(r, EJ_EPARSE, "%s: expected a string, got %s", key, shown);
        return;
    }
    if (copy == NULL) {
        fail(r, EJ_ENOMEM, "%s: out of memory", key);
        return;
    }
    free(*dst);
    *dst = copy;
}

/* A number text as Gson's nextInt accepts it in a string: an integer, or a
 * decimal number with no fraction. */
static bool parse_int_text(const char *s, long long min, long long max, long long *out)
{
    while (*s == ' ' || *s == '\t' || *s == '\n' || *s == '\r')
        s++;
    if (*s == '\0')
        return false;
    for (const char *p = s; *p; p++) {
        bool ok = (*p >= '0' && *p <= '9') || *p == '+' || *p == '-' || *p == '.' || *p == 'e' ||
                  *p == 'E' || *p == ' ' || *p == '\t' || *p == '\n' || *p == '\r';
        if (!ok)
            return false;
    }
    char *end;
    double d = strtod(s, &end);
    while (*end == ' ' || *end == '\t' || *end == '\n' || *end == '\r')
        end++;
    if (*end != '\0' || end == s || !isfinite(d) || d < (double)min || d > (double)max ||
        (double)(long long)d != d)
        return false;
    *out = (long long)d;
    return true;
}

static bool read_integer(struct reader *r, const char *key, json_t *v, long long min, long long max,
                         long long *out)
{
    char shown[128];
    long long value;
    bool ok;
    if (json_is_integer(v)) {
        value = json_integer_value(v);
        ok = value >= min && value <= max;
    } else if (json_is_real(v)) {
        double d = json_real_value(v);
        ok = isfinite(d) && d >= (double)min && d <= (double)max && (double)(long long)d == d;
        value = ok ? (long long)d : 0;
    } else if (json_is_string(v)) {
        ok = parse_int_text(json_string_value(v), min, max, &value);
    } else {
        ok = false;
    }
    if (!ok) {
        describe(v, shown, sizeof(shown));
        fail(r, EJ_EPARSE, "%s: expected an integer, got %s", key, shown);
        return false;
    }
    *out = value;
    return true;
}

static void read_int(struct reader *r, const char *key, json_t *v, int *dst)
{
    long long value;
    if (read_integer(r, key, v, INT32_MIN, INT32_MAX, &value))
        *dst = (int)value;
}

static void read_int64(struct reader *r, const char *key, json_t *v, int64_t *dst)
{
    long long value;
    /* Limited to what a double holds exactly, so "1e30" is refused. */
    if (read_integer(r, key, v, -(1LL << 53), 1LL << 53, &value))
        *dst = value;
}

static void read_bool(struct reader *r, const char *key, json_t *v, bool *dst)
{
    char shown[128];
    if (json_is_boolean(v)) {
        *dst = json_is_true(v);
        return;
    }
    describe(v, shown, sizeof(shown));
    fail(r, EJ_EPARSE, "%s: expected true or false, got %s", key, shown);
}

/* Serialise obj (may be NULL or empty) into *dst as JSON object text;
 * NULL when empty. */
static void store_extra(struct reader *r, json_t *obj, char **dst)
{
    free(*dst);
    *dst = NULL;
    if (obj == NULL || json_object_size(obj) == 0)
        return;
    ej_buf b;
    ej__buf_init(&b);
    put_value(&b, obj);
    if (b.failed) {
        ej__buf_fini(&b);
        fail(r, EJ_ENOMEM, "config: out of memory");
        return;
    }
    *dst = ej__buf_steal(&b);
}

static void read_job_properties(struct reader *r, json_t *v, struct ej_job_config *cfg)
{
    char shown[128];
    if (!json_is_object(v)) {
        describe(v, shown, sizeof(shown));
        fail(r, EJ_EPARSE, "jobProperties: expected an object, got %s", shown);
        return;
    }
    json_t *extra = json_object();
    if (extra == NULL) {
        fail(r, EJ_ENOMEM, "config: out of memory");
        return;
    }
    const char *key;
    json_t *item;
    json_object_foreach(v, key, item)
    {
        if (json_is_null(item) && (strcmp(key, "job_exception_handler") == 0 ||
                                   strcmp(key, "executor_service_handler") == 0))
            continue; /* a null reads as the default, which cfg holds */
        if (strcmp(key, "job_exception_handler") == 0)
            read_str(r, "jobProperties.job_exception_handler", item, &cfg->job_exception_handler);
        else if (strcmp(key, "executor_service_handler") == 0)
            read_str(r, "jobProperties.executor_service_handler", item,
                     &cfg->executor_service_handler);
        else if (json_object_set(extra, key, item) != 0)
            fail(r, EJ_ENOMEM, "config: out of memory");
    }
    store_extra(r, extra, &cfg->job_properties_extra);
    json_decref(extra);
}

static void read_job_type(struct reader *r, json_t *v, struct ej_job_config *cfg)
{
    char shown[128];
    if (!json_is_string(v)) {
        describe(v, shown, sizeof(shown));
        fail(r, EJ_EPARSE, "jobType: expected a string, got %s", shown);
        return;
    }
    if (ej_job_type_parse(json_string_value(v), &cfg->job_type) != 0) {
        describe(v, shown, sizeof(shown));
        fail(r, EJ_EPARSE, "jobType: unknown job type %s", shown);
    }
}

/* Apply one top-level member. Returns false for an unknown key. */
static bool read_member(struct reader *r, const char *k, json_t *v, struct ej_job_config *c,
                        bool *saw_type)
{
    if (strcmp(k, "jobName") == 0)
        read_str(r, k, v, &c->job_name);
    else if (strcmp(k, "jobClass") == 0)
        read_str(r, k, v, &c->job_class);
    else if (strcmp(k, "jobType") == 0) {
        read_job_type(r, v, c);
        *saw_type = true;
    } else if (strcmp(k, "cron") == 0)
        read_str(r, k, v, &c->cron);
    else if (strcmp(k, "shardingTotalCount") == 0)
        read_int(r, k, v, &c->sharding_total_count);
    else if (strcmp(k, "shardingItemParameters") == 0)
        read_str(r, k, v, &c->sharding_item_parameters);
    else if (strcmp(k, "jobParameter") == 0)
        read_str(r, k, v, &c->job_parameter);
    else if (strcmp(k, "failover") == 0)
        read_bool(r, k, v, &c->failover);
    else if (strcmp(k, "misfire") == 0)
        read_bool(r, k, v, &c->misfire);
    else if (strcmp(k, "description") == 0)
        read_str(r, k, v, &c->description);
    else if (strcmp(k, "jobProperties") == 0)
        read_job_properties(r, v, c);
    else if (strcmp(k, "streamingProcess") == 0)
        read_bool(r, k, v, &c->streaming_process);
    else if (strcmp(k, "scriptCommandLine") == 0)
        read_str(r, k, v, &c->script_command_line);
    else if (strcmp(k, "monitorExecution") == 0)
        read_bool(r, k, v, &c->monitor_execution);
    else if (strcmp(k, "maxTimeDiffSeconds") == 0)
        read_int(r, k, v, &c->max_time_diff_seconds);
    else if (strcmp(k, "monitorPort") == 0)
        read_int(r, k, v, &c->monitor_port);
    else if (strcmp(k, "jobShardingStrategyClass") == 0)
        read_str(r, k, v, &c->job_sharding_strategy_class);
    else if (strcmp(k, "reconcileIntervalMinutes") == 0)
        read_int(r, k, v, &c->reconcile_interval_minutes);
    else if (strcmp(k, "disabled") == 0)
        read_bool(r, k, v, &c->disabled);
    else if (strcmp(k, "overwrite") == 0)
        read_bool(r, k, v, &c->overwrite);
    else if (strcmp(k, "timeZone") == 0)
        read_str(r, k, v, &c->time_zone);
    else if (strcmp(k, "scriptTimeoutMilliseconds") == 0)
        read_int64(r, k, v, &c->script_timeout_ms);
    else if (strcmp(k, "httpUri") == 0)
        read_str(r, k, v, &c->http.uri);
    else if (strcmp(k, "httpMethod") == 0)
        read_str(r, k, v, &c->http.method);
    else if (strcmp(k, "httpData") == 0)
        read_str(r, k, v, &c->http.data);
    else if (strcmp(k, "httpConnectTimeoutMilliseconds") == 0)
        read_int(r, k, v, &c->http.connect_timeout_ms);
    else if (strcmp(k, "httpReadTimeoutMilliseconds") == 0)
        read_int(r, k, v, &c->http.read_timeout_ms);
    else if (strcmp(k, "httpContentType") == 0)
        read_str(r, k, v, &c->http.content_type);
    else
        return false;
    return true;
}

/* Offset of the bracket that nests deeper than EJ_CONFIG_MAX_JSON_DEPTH, or
 * (size_t)-1. Checked before parsing so the parser never recurses deep. */
static size_t too_deep_at(const char *json, size_t len)
{
    int depth = 0;
    bool in_string = false;
    for (size_t i = 0; json != NULL && i < len; i++) {
        char c = json[i];
        if (in_string) {
            if (c == '\\')
                i++;
            else if (c == '"')
                in_string = false;
        } else if (c == '"') {
            in_string = true;
        } else if (c == '{' || c == '[') {
            if (++depth > EJ_CONFIG_MAX_JSON_DEPTH)
                return i;
        } else if (c == '}' || c == ']') {
            depth--;
        }
    }
    return (size_t)-1;
}

int ej_job_config_from_json(const char *json, size_t len, struct ej_job_config *cfg, char *err,
                            size_t errlen)
{
    struct reader r = {err, errlen, 0};
    char shown[128];
    if (err != NULL && errlen > 0)
        err[0] = '\0';
    if (cfg == NULL || (json == NULL && len > 0)) {
        fail(&r, EJ_EINVAL, "config: NULL argument");
        return r.rc;
    }
    if (len > EJ_CONFIG_MAX_JSON) {
        fail(&r, EJ_EPARSE, "config: JSON is %zu bytes, larger than the limit of %d", len,
             EJ_CONFIG_MAX_JSON);
        return r.rc;
    }
    size_t deep_at = too_deep_at(json, len);
    if (deep_at != (size_t)-1) {
        fail(&r, EJ_EPARSE, "config: JSON nested deeper than %d levels at byte %zu",
             EJ_CONFIG_MAX_JSON_DEPTH, deep_at + 1);
        return r.rc;
    }
    json_error_t jerr;
    json_t *root = json_loadb(json ? json : "", len, JSON_DECODE_ANY, &jerr);
    if (root == NULL) {
        /* jansson says column 0 before the first character of a line. */
        fail(&r, EJ_EPARSE, "JSON syntax error at line %d, column %d: %s",
             jerr.line > 0 ? jerr.line : 1, jerr.column > 0 ? jerr.column : 1, jerr.text);
        return r.rc;
    }
    if (!json_is_object(root)) {
        describe(root, shown, sizeof(shown));
        fail(&r, EJ_EPARSE, "config: expected a JSON object, got %s", shown);
        json_decref(root);
        return r.rc;
    }

    struct ej_job_config tmp;
    json_t *extra = NULL;
    if (ej_job_config_init(&tmp) != 0) {
        fail(&r, EJ_ENOMEM, "config: out of memory");
        goto out_free_root;
    }
    /* Java 2.1.5's reader defaults where they differ from the builder's. */
    tmp.sharding_total_count = 0;
    tmp.misfire = false;

    extra = json_object();
    if (extra == NULL) {
        fail(&r, EJ_ENOMEM, "config: out of memory");
        goto out_fini_tmp;
    }
    bool saw_type = false;
    const char *key;
    json_t *v;
    json_object_foreach(root, key, v)
    {
        if (r.rc != 0)
            break;
        if (is_known_key(key) && json_is_null(v))
            continue; /* Gson omits nulls; an explicit null reads as missing */
        if (!read_member(&r, key, v, &tmp, &saw_type) && json_object_set(extra, key, v) != 0)
            fail(&r, EJ_ENOMEM, "config: out of memory");
    }
    if (r.rc == 0 && !saw_type)
        fail(&r, EJ_EPARSE, "jobType: is required");
    if (r.rc == 0)
        store_extra(&r, extra, &tmp.extra_json);
    if (r.rc == 0) {
        ej_job_config_fini(cfg);
        *cfg = tmp;
        goto out_free_extra;
    }

out_fini_tmp:
    ej_job_config_fini(&tmp);
out_free_extra:
    json_decref(extra);
out_free_root:
    json_decref(root);
    return r.rc;
}

int ej_job_config_parse(const char *json, size_t len, struct ej_job_config *cfg, char *err,
                        size_t errlen)
{
    int rc = ej_job_config_from_json(json, len, cfg, err, errlen);
    if (rc != 0)
        return rc;
    return ej_job_config_validate(cfg, err, errlen);
}
