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

#include "common/check.h"
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

/* Values Java 2.1.5 cannot load never go into the key Java reads: that key
 * keeps what Java would write (the row's default), and ejob's choice goes
 * into an ejob-only key, which Java's reader skips (docs/configuration.md,
 * "Sharing a job with Java instances"). A reader takes the ejob-only key
 * when the Java key holds its default, so a value Java writes there later
 * (its console) wins; a node of an earlier ejob with the value in the Java
 * key still reads the same. */
struct java_guard {
    enum ej__cfg_field field; /* the row whose key Java reads */
    const char *ejob_key;     /* where a value Java cannot load goes */
    bool (*java_loads)(const char *value);
};

/* Java's JobShardingStrategyFactory loads "" (AverageAllocation) or a class
 * by its full name; ejob's own names (BALANCED, STICKY, a registered
 * strategy) and its own class names are none Java has. */
static bool java_loads_strategy(const char *v)
{
    return v[0] == '\0' || (strchr(v, '.') != NULL && strncmp(v, "io.ejob.", 8) != 0);
}

static const struct java_guard java_guards[] = {
    {EJ_CFG_F_JOB_SHARDING_STRATEGY_CLASS, "jobShardingStrategyType", java_loads_strategy},
};
#define N_GUARDS (sizeof(java_guards) / sizeof(java_guards[0]))

static const struct java_guard *guard_of_key(const char *key)
{
    for (size_t i = 0; i < N_GUARDS; i++)
        if (strcmp(key, java_guards[i].ejob_key) == 0)
            return &java_guards[i];
    return NULL;
}

/* The guard of a row whose value Java cannot load, or NULL. */
static const struct java_guard *guard_hiding(const struct ej_job_config *cfg,
                                             const struct ej__cfg_field_desc *f)
{
    for (size_t i = 0; i < N_GUARDS; i++)
        if (&ej__cfg_fields[java_guards[i].field] == f &&
            !java_guards[i].java_loads(ej__config_str(ej__config_field_str(cfg, f))))
            return &java_guards[i];
    return NULL;
}

/* The row of a JSON key: a top-level key, or (in_props) one inside
 * jobProperties. NULL for a key of nobody's: kept as it is. */
static const struct ej__cfg_field_desc *find_field(const char *key, bool in_props)
{
    for (int i = 0; i < EJ_CFG_F_COUNT_; i++) {
        const struct ej__cfg_field_desc *f = &ej__cfg_fields[i];
        if (f->where != EJ_CFG_W_REST && (f->where == EJ_CFG_W_PROP) == in_props &&
            strcmp(key, f->key) == 0)
            return f;
    }
    return NULL;
}

/* Append the members of the JSON object text `extra`, skipping the keys
 * of the table's rows (a preserved unknown key never repeats a key ejob
 * writes itself). Text that is not a JSON object is ignored. */
static void put_extra_members(ej_buf *b, const char *extra, bool in_props)
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
            if (find_field(key, in_props) != NULL || (!in_props && guard_of_key(key) != NULL))
                continue;
            put_key(b, key);
            put_value(b, v);
        }
    }
    json_decref(obj);
}

static void put_field(ej_buf *b, const struct ej_job_config *cfg,
                      const struct ej__cfg_field_desc *f);

/* The jobProperties object: its PROP rows, then the other properties. */
static void put_job_properties(ej_buf *b, const struct ej_job_config *cfg,
                               const struct ej__cfg_field_desc *obj)
{
    put_key(b, obj->key);
    ej__buf_append(b, "{", 1);
    for (int i = 0; i < EJ_CFG_F_COUNT_; i++) {
        if (ej__cfg_fields[i].where == EJ_CFG_W_PROP)
            put_field(b, cfg, &ej__cfg_fields[i]);
    }
    put_extra_members(b, ej__config_field_str(cfg, obj), true);
    ej__buf_append(b, "}", 1);
}

static void put_field(ej_buf *b, const struct ej_job_config *cfg,
                      const struct ej__cfg_field_desc *f)
{
    switch (f->type) {
    case EJ_CFG_T_STR:
        put_str(b, f->key, ej__config_field_str(cfg, f));
        break;
    case EJ_CFG_T_CLASS:
        put_str(b, f->key, ej__config_job_class(cfg));
        break;
    case EJ_CFG_T_INT:
    case EJ_CFG_T_INT64:
        put_int(b, f->key, ej__config_field_num(cfg, f));
        break;
    case EJ_CFG_T_BOOL:
        put_bool(b, f->key, ej__config_field_num(cfg, f) != 0);
        break;
    case EJ_CFG_T_TYPE:
        put_str(b, f->key, ej_job_type_name((ej_job_type)ej__config_field_num(cfg, f)));
        break;
    case EJ_CFG_T_OBJ:
        /* The unknown top-level keys are members of the config object
         * itself; jobProperties is an object of its own. */
        if (f->where == EJ_CFG_W_REST)
            put_extra_members(b, ej__config_field_str(cfg, f), false);
        else
            put_job_properties(b, cfg, f);
        break;
    }
}

char *ej_job_config_to_json(const struct ej_job_config *cfg)
{
    if (cfg == NULL)
        return NULL;
    ej_buf b;
    ej__buf_init(&b);
    ej__buf_append(&b, "{", 1);
    /* The table's order is 2.1.5's. ejob's own (SET) keys are written only
     * when they carry something, so a Java-shaped job is written exactly as
     * Java writes it; the ejob-only keys of guarded values first. */
    bool guards_done = false;
    for (int i = 0; i < EJ_CFG_F_COUNT_; i++) {
        const struct ej__cfg_field_desc *f = &ej__cfg_fields[i];
        if (!guards_done && (f->where == EJ_CFG_W_SET || f->where == EJ_CFG_W_REST)) {
            guards_done = true;
            for (size_t g = 0; g < N_GUARDS; g++) {
                const struct ej__cfg_field_desc *gf = &ej__cfg_fields[java_guards[g].field];
                if (guard_hiding(cfg, gf) != NULL)
                    put_str(&b, java_guards[g].ejob_key, ej__config_field_str(cfg, gf));
            }
        }
        if (f->where == EJ_CFG_W_PROP || !ej__config_field_applies(f, cfg->job_type))
            continue;
        if (f->where == EJ_CFG_W_SET && ej__config_field_is_default(cfg, f))
            continue;
        if (guard_hiding(cfg, f) != NULL)
            put_str(&b, f->key, f->def_str);
        else
            put_field(&b, cfg, f);
    }
    ej__buf_append(&b, "}", 1);
    if (b.failed) {
        ej__buf_fini(&b);
        return NULL;
    }
    return ej__buf_steal(&b);
}

size_t ej_job_config_java_ignored(const struct ej_job_config *cfg, const char **keys, size_t max)
{
    if (cfg == NULL)
        return 0;
    size_t n = 0;
    if (cfg->job_type == EJ_JOB_TYPE_HTTP && n++ < max)
        keys[n - 1] = ej__cfg_fields[EJ_CFG_F_JOB_TYPE].key;
    for (int i = 0; i < EJ_CFG_F_COUNT_; i++) {
        const struct ej__cfg_field_desc *f = &ej__cfg_fields[i];
        const struct java_guard *g = guard_hiding(cfg, f);
        const char *key = g ? g->ejob_key : NULL;
        if (key == NULL && f->where == EJ_CFG_W_SET && ej__config_field_applies(f, cfg->job_type) &&
            !ej__config_field_is_default(cfg, f))
            key = f->key;
        if (key != NULL && n++ < max)
            keys[n - 1] = key;
    }
    return n;
}

/* ------------------------------------------------------------------------ */
/* Reading                                                                   */
/* ------------------------------------------------------------------------ */

struct reader {
    char *err;
    size_t errlen;
    int rc; /* first failure that stops the reading */
    /* Collecting (ej__config_from_json_all): a value of the wrong type is
     * added to errs and marks its field in bad; the reading goes on, so
     * every field's problem is reported at once. NULL: the first stops. */
    struct ej_config_errors *errs;
    bool *bad;
    const struct ej__cfg_field_desc *cur; /* the field being read, or NULL */
    int value_errors;                     /* collected */
};

static void fail(struct reader *r, int rc, const char *fmt, ...) EJ_PRINTF(3, 4);

static void fail(struct reader *r, int rc, const char *fmt, ...)
{
    if (r->rc != 0)
        return;
    char msg[1024];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(msg, sizeof msg, fmt, ap);
    va_end(ap);
    if (r->errs != NULL && rc == EJ_EPARSE && r->cur != NULL) {
        r->bad[r->cur - ej__cfg_fields] = true;
        r->value_errors++;
        if (ej__config_errors_add(r->errs, "%s", msg) != 0)
            r->rc = EJ_ENOMEM;
        return;
    }
    r->rc = rc;
    if (r->err != NULL && r->errlen > 0)
        snprintf(r->err, r->errlen, "%s", msg);
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

/* The readers of the field types share one shape: f's value v into cfg.
 * A failure is recorded in r. */

/* A STR or CLASS field, as Gson's nextString: strings as they are, numbers
 * as their text. */
static void read_str(struct reader *r, const struct ej__cfg_field_desc *f, json_t *v,
                     struct ej_job_config *cfg)
{
    const char *key = f->name;
    char **dst = ej__config_field_strp(cfg, f);
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

/* An INT or INT64 field. */
static void read_number(struct reader *r, const struct ej__cfg_field_desc *f, json_t *v,
                        struct ej_job_config *cfg)
{
    long long value;
    /* INT64 is limited to what a double holds exactly, so "1e30" is
     * refused. */
    bool ok = f->type == EJ_CFG_T_INT
                  ? read_integer(r, f->name, v, INT32_MIN, INT32_MAX, &value)
                  : read_integer(r, f->name, v, -(1LL << 53), 1LL << 53, &value);
    if (ok)
        ej__config_field_set_num(cfg, f, value);
}

static void read_bool(struct reader *r, const struct ej__cfg_field_desc *f, json_t *v,
                      struct ej_job_config *cfg)
{
    char shown[128];
    if (json_is_boolean(v)) {
        ej__config_field_set_num(cfg, f, json_is_true(v));
        return;
    }
    describe(v, shown, sizeof(shown));
    fail(r, EJ_EPARSE, "%s: expected true or false, got %s", f->name, shown);
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

static void read_field(struct reader *r, const struct ej__cfg_field_desc *f, json_t *v,
                       struct ej_job_config *cfg);

/* The jobProperties object: its PROP rows, the other keys kept in the
 * row's member. */
static void read_job_properties(struct reader *r, const struct ej__cfg_field_desc *obj, json_t *v,
                                struct ej_job_config *cfg)
{
    char shown[128];
    if (!json_is_object(v)) {
        describe(v, shown, sizeof(shown));
        fail(r, EJ_EPARSE, "%s: expected an object, got %s", obj->name, shown);
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
        const struct ej__cfg_field_desc *f = find_field(key, true);
        if (f == NULL) {
            if (json_object_set(extra, key, item) != 0)
                fail(r, EJ_ENOMEM, "config: out of memory");
        } else if (!json_is_null(item)) {
            read_field(r, f, item, cfg); /* a null reads as the default, which cfg holds */
        }
    }
    store_extra(r, extra, ej__config_field_strp(cfg, obj));
    json_decref(extra);
}

static void read_job_type(struct reader *r, const struct ej__cfg_field_desc *f, json_t *v,
                          struct ej_job_config *cfg)
{
    char shown[128];
    ej_job_type type;
    if (!json_is_string(v)) {
        describe(v, shown, sizeof(shown));
        fail(r, EJ_EPARSE, "%s: expected a string, got %s", f->name, shown);
        return;
    }
    if (ej_job_type_parse(json_string_value(v), &type) != 0) {
        describe(v, shown, sizeof(shown));
        fail(r, EJ_EPARSE, "%s: unknown job type %s", f->name, shown);
        return;
    }
    ej__config_field_set_num(cfg, f, type);
}

typedef void (*read_fn)(struct reader *r, const struct ej__cfg_field_desc *f, json_t *v,
                        struct ej_job_config *cfg);

static const read_fn readers[] = {
    [EJ_CFG_T_STR] = read_str,
    [EJ_CFG_T_CLASS] = read_str,
    [EJ_CFG_T_INT] = read_number,
    [EJ_CFG_T_INT64] = read_number,
    [EJ_CFG_T_BOOL] = read_bool,
    [EJ_CFG_T_TYPE] = read_job_type,
    /* Only jobProperties has a key; the unknown keys (REST) have none. */
    [EJ_CFG_T_OBJ] = read_job_properties,
};

/* One known member (not null) into its field. */
static void read_field(struct reader *r, const struct ej__cfg_field_desc *f, json_t *v,
                       struct ej_job_config *cfg)
{
    EJ_ASSERT((size_t)f->type < sizeof(readers) / sizeof(readers[0]) && readers[f->type] != NULL);
    const struct ej__cfg_field_desc *outer = r->cur; /* jobProperties around a PROP row */
    r->cur = f;
    readers[f->type](r, f, v, cfg);
    r->cur = outer;
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

static int from_json(struct reader *r, const char *json, size_t len, struct ej_job_config *cfg);

int ej_job_config_from_json(const char *json, size_t len, struct ej_job_config *cfg, char *err,
                            size_t errlen)
{
    struct reader r = {.err = err, .errlen = errlen};
    return from_json(&r, json, len, cfg);
}

int ej__config_from_json_all(const char *json, size_t len, struct ej_job_config *cfg,
                             struct ej_config_errors *errs, bool bad[EJ_CFG_F_COUNT_])
{
    char err[1024] = "";
    memset(bad, 0, EJ_CFG_F_COUNT_ * sizeof(bool));
    struct reader r = {.err = err, .errlen = sizeof err, .errs = errs, .bad = bad};
    int rc = from_json(&r, json, len, cfg);
    if (rc != 0 && err[0] != '\0' && ej__config_errors_add(errs, "%s", err) != 0)
        return EJ_ENOMEM;
    if (rc == 0 && r.value_errors > 0)
        return EJ_EPARSE;
    return rc;
}

/* Read json into cfg under r's rules. Collecting, cfg receives the fields
 * that read (the others keep Java's defaults) when only values were wrong. */
static int from_json(struct reader *r, const char *json, size_t len, struct ej_job_config *cfg)
{
    char shown[128];
    char *err = r->err;
    size_t errlen = r->errlen;
    if (err != NULL && errlen > 0)
        err[0] = '\0';
    if (cfg == NULL || (json == NULL && len > 0)) {
        fail(r, EJ_EINVAL, "config: NULL argument");
        return r->rc;
    }
    if (len > EJ_CONFIG_MAX_JSON) {
        fail(r, EJ_EPARSE, "config: JSON is %zu bytes, larger than the limit of %d", len,
             EJ_CONFIG_MAX_JSON);
        return r->rc;
    }
    size_t deep_at = too_deep_at(json, len);
    if (deep_at != (size_t)-1) {
        fail(r, EJ_EPARSE, "config: JSON nested deeper than %d levels at byte %zu",
             EJ_CONFIG_MAX_JSON_DEPTH, deep_at + 1);
        return r->rc;
    }
    json_error_t jerr;
    json_t *root = json_loadb(json ? json : "", len, JSON_DECODE_ANY, &jerr);
    if (root == NULL) {
        /* jansson says column 0 before the first character of a line. */
        fail(r, EJ_EPARSE, "JSON syntax error at line %d, column %d: %s",
             jerr.line > 0 ? jerr.line : 1, jerr.column > 0 ? jerr.column : 1, jerr.text);
        return r->rc;
    }
    if (!json_is_object(root)) {
        describe(root, shown, sizeof(shown));
        fail(r, EJ_EPARSE, "config: expected a JSON object, got %s", shown);
        json_decref(root);
        return r->rc;
    }

    struct ej_job_config tmp;
    json_t *extra = NULL;
    if (ej_job_config_init(&tmp) != 0) {
        fail(r, EJ_ENOMEM, "config: out of memory");
        goto out_free_root;
    }
    /* Java 2.1.5's reader defaults where they differ from the builder's. */
    tmp.sharding_total_count = 0;
    tmp.misfire = false;

    extra = json_object();
    if (extra == NULL) {
        fail(r, EJ_ENOMEM, "config: out of memory");
        goto out_fini_tmp;
    }
    bool saw_type = false;
    const char *key;
    json_t *v;
    json_t *guarded[N_GUARDS] = {0}; /* the ejob-only keys' values, borrowed */
    json_object_foreach(root, key, v)
    {
        if (r->rc != 0)
            break;
        const struct java_guard *g = guard_of_key(key);
        if (g != NULL) {
            if (!json_is_string(v) && !json_is_null(v)) {
                describe(v, shown, sizeof(shown));
                r->cur = &ej__cfg_fields[g->field];
                fail(r, EJ_EPARSE, "%s: expected a string, got %s", g->ejob_key, shown);
                r->cur = NULL;
                continue;
            }
            guarded[g - java_guards] = v;
            continue;
        }
        const struct ej__cfg_field_desc *f = find_field(key, false);
        if (f == NULL) {
            if (json_object_set(extra, key, v) != 0)
                fail(r, EJ_ENOMEM, "config: out of memory");
            continue;
        }
        if (json_is_null(v))
            continue; /* Gson omits nulls; an explicit null reads as missing */
        read_field(r, f, v, &tmp);
        saw_type = saw_type || f->type == EJ_CFG_T_TYPE;
    }
    if (r->rc == 0 && !saw_type) {
        r->cur = &ej__cfg_fields[EJ_CFG_F_JOB_TYPE];
        fail(r, EJ_EPARSE, "jobType: is required");
        r->cur = NULL;
    }
    for (size_t g = 0; g < N_GUARDS && r->rc == 0; g++) {
        const struct ej__cfg_field_desc *f = &ej__cfg_fields[java_guards[g].field];
        char **member = ej__config_field_strp(&tmp, f);
        if (json_is_string(guarded[g]) && json_string_value(guarded[g])[0] != '\0' &&
            strcmp(ej__config_str(*member), f->def_str) == 0 &&
            ej_job_config_set_str(member, json_string_value(guarded[g])) != 0)
            fail(r, EJ_ENOMEM, "config: out of memory");
    }
    if (r->rc == 0)
        store_extra(r, extra, &tmp.extra_json);
    if (r->rc == 0) {
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
    return r->rc;
}

int ej_job_config_parse(const char *json, size_t len, struct ej_job_config *cfg, char *err,
                        size_t errlen)
{
    int rc = ej_job_config_from_json(json, len, cfg, err, errlen);
    if (rc != 0)
        return rc;
    return ej_job_config_validate(cfg, err, errlen);
}
