/* The job model: defaults, copying, comparing. */
#include <stdlib.h>
#include <string.h>

#include "config/internal.h"
#include "ejob/error.h"

char *ej__config_strdup(const char *s)
{
    return strdup(s ? s : "");
}

void ej__config_quote_short(const char *s, size_t n, char *out, size_t outlen)
{
    static const char hex[] = "0123456789abcdef";
    enum { MAX_SHOWN = 60 };
    size_t o = 0;
    if (outlen == 0)
        return;
    /* Room for the closing quote, "..." and the NUL is kept back. */
    size_t limit = outlen > 6 ? outlen - 6 : 0;
    if (o < limit)
        out[o++] = '"';
    size_t i;
    for (i = 0; s && i < n && i < MAX_SHOWN; i++) {
        unsigned char c = (unsigned char)s[i];
        if (c == '"' || c == '\\') {
            if (o + 2 > limit)
                break;
            out[o++] = '\\';
            out[o++] = (char)c;
        } else if (c < 0x20 || c == 0x7f) {
            if (o + 4 > limit)
                break;
            out[o++] = '\\';
            out[o++] = 'x';
            out[o++] = hex[c >> 4];
            out[o++] = hex[c & 15];
        } else {
            if (o + 1 > limit)
                break;
            out[o++] = (char)c;
        }
    }
    if (s && i < n && outlen > o + 4) {
        memcpy(out + o, "...", 3);
        o += 3;
    }
    if (o + 1 < outlen)
        out[o++] = '"';
    out[o < outlen ? o : outlen - 1] = '\0';
}

int ej_job_config_set_str(char **field, const char *value)
{
    if (field == NULL)
        return EJ_EINVAL;
    char *copy = ej__config_strdup(value);
    if (copy == NULL)
        return EJ_ENOMEM;
    free(*field);
    *field = copy;
    return 0;
}

/* Every owned string member, for init/fini/copy. */
#define EJ_CFG_STRINGS(X)                                                                          \
    X(job_name)                                                                                    \
    X(cron)                                                                                        \
    X(sharding_item_parameters)                                                                    \
    X(job_parameter)                                                                               \
    X(description)                                                                                 \
    X(job_exception_handler)                                                                       \
    X(executor_service_handler)                                                                    \
    X(job_class)                                                                                   \
    X(script_command_line)                                                                         \
    X(job_sharding_strategy_class)                                                                 \
    X(time_zone)                                                                                   \
    X(http.uri)                                                                                    \
    X(http.method)                                                                                 \
    X(http.data)                                                                                   \
    X(http.content_type)

int ej_job_config_init(struct ej_job_config *cfg)
{
    if (cfg == NULL)
        return EJ_EINVAL;
    memset(cfg, 0, sizeof(*cfg));
    bool ok = true;
#define EJ_CFG_INIT_EMPTY(m) ok = ok && (cfg->m = strdup("")) != NULL;
    EJ_CFG_STRINGS(EJ_CFG_INIT_EMPTY)
#undef EJ_CFG_INIT_EMPTY
    if (!ok)
        goto out_nomem;
    if (ej_job_config_set_str(&cfg->job_exception_handler,
                              EJ_CONFIG_DEFAULT_JOB_EXCEPTION_HANDLER) != 0 ||
        ej_job_config_set_str(&cfg->executor_service_handler,
                              EJ_CONFIG_DEFAULT_EXECUTOR_SERVICE_HANDLER) != 0 ||
        ej_job_config_set_str(&cfg->http.method, "GET") != 0)
        goto out_nomem;
    cfg->sharding_total_count = 1;
    cfg->failover = false;
    cfg->misfire = true;
    cfg->job_type = EJ_JOB_TYPE_SIMPLE;
    cfg->streaming_process = false;
    cfg->monitor_execution = true;
    cfg->max_time_diff_seconds = -1;
    cfg->monitor_port = -1;
    cfg->reconcile_interval_minutes = 10;
    cfg->disabled = false;
    cfg->overwrite = false;
    cfg->script_timeout_ms = 0;
    cfg->http.connect_timeout_ms = 3000;
    cfg->http.read_timeout_ms = 5000;
    return 0;

out_nomem:
    ej_job_config_fini(cfg);
    return EJ_ENOMEM;
}

void ej_job_config_fini(struct ej_job_config *cfg)
{
    if (cfg == NULL)
        return;
#define EJ_CFG_FREE(m) free(cfg->m);
    EJ_CFG_STRINGS(EJ_CFG_FREE)
#undef EJ_CFG_FREE
    free(cfg->job_properties_extra);
    free(cfg->extra_json);
    memset(cfg, 0, sizeof(*cfg));
}

int ej_job_config_copy(struct ej_job_config *dst, const struct ej_job_config *src)
{
    if (dst == NULL || src == NULL)
        return EJ_EINVAL;
    *dst = *src;
    /* Null every pointer first so a failure part-way leaves dst safe to fini. */
#define EJ_CFG_NULL(m) dst->m = NULL;
    EJ_CFG_STRINGS(EJ_CFG_NULL)
#undef EJ_CFG_NULL
    dst->job_properties_extra = NULL;
    dst->extra_json = NULL;
    bool ok = true;
#define EJ_CFG_DUP(m) ok = ok && (dst->m = ej__config_strdup(src->m)) != NULL;
    EJ_CFG_STRINGS(EJ_CFG_DUP)
#undef EJ_CFG_DUP
    if (ok && src->job_properties_extra != NULL)
        ok = (dst->job_properties_extra = strdup(src->job_properties_extra)) != NULL;
    if (ok && src->extra_json != NULL)
        ok = (dst->extra_json = strdup(src->extra_json)) != NULL;
    if (!ok) {
        ej_job_config_fini(dst);
        return EJ_ENOMEM;
    }
    return 0;
}

static bool str_eq(const char *a, const char *b)
{
    return strcmp(ej__config_str(a), ej__config_str(b)) == 0;
}

/* Extras compare NULL equal to "" and to "{}". */
static bool extra_eq(const char *a, const char *b)
{
    if (a != NULL && strcmp(a, "{}") == 0)
        a = NULL;
    if (b != NULL && strcmp(b, "{}") == 0)
        b = NULL;
    return str_eq(a, b);
}

/* The job class that counts: a SCRIPT job's is always ScriptJob. */
static const char *effective_class(const struct ej_job_config *c)
{
    return c->job_type == EJ_JOB_TYPE_SCRIPT ? EJ_CONFIG_SCRIPT_JOB_CLASS : c->job_class;
}

bool ej_job_config_equal(const struct ej_job_config *a, const struct ej_job_config *b)
{
    if (a == b)
        return true;
    if (a == NULL || b == NULL)
        return false;
    if (a->job_type != b->job_type)
        return false;
    ej_job_type t = a->job_type;
    bool eq = str_eq(a->job_name, b->job_name) && str_eq(a->cron, b->cron) &&
              str_eq(a->sharding_item_parameters, b->sharding_item_parameters) &&
              str_eq(a->job_parameter, b->job_parameter) &&
              str_eq(a->description, b->description) &&
              str_eq(a->job_exception_handler, b->job_exception_handler) &&
              str_eq(a->executor_service_handler, b->executor_service_handler) &&
              str_eq(effective_class(a), effective_class(b)) &&
              str_eq(a->job_sharding_strategy_class, b->job_sharding_strategy_class) &&
              str_eq(a->time_zone, b->time_zone) &&
              extra_eq(a->job_properties_extra, b->job_properties_extra) &&
              extra_eq(a->extra_json, b->extra_json) &&
              a->sharding_total_count == b->sharding_total_count && a->failover == b->failover &&
              a->misfire == b->misfire && a->monitor_execution == b->monitor_execution &&
              a->max_time_diff_seconds == b->max_time_diff_seconds &&
              a->monitor_port == b->monitor_port &&
              a->reconcile_interval_minutes == b->reconcile_interval_minutes &&
              a->disabled == b->disabled && a->overwrite == b->overwrite;
    /* Type-specific fields count only for their type. */
    if (eq && t == EJ_JOB_TYPE_DATAFLOW)
        eq = a->streaming_process == b->streaming_process;
    if (eq && t == EJ_JOB_TYPE_SCRIPT)
        eq = str_eq(a->script_command_line, b->script_command_line) &&
             a->script_timeout_ms == b->script_timeout_ms;
    if (eq && t == EJ_JOB_TYPE_HTTP)
        eq = str_eq(a->http.uri, b->http.uri) && str_eq(a->http.method, b->http.method) &&
             str_eq(a->http.data, b->http.data) &&
             str_eq(a->http.content_type, b->http.content_type) &&
             a->http.connect_timeout_ms == b->http.connect_timeout_ms &&
             a->http.read_timeout_ms == b->http.read_timeout_ms;
    return eq;
}

static const char *const job_type_names[] = {"SIMPLE", "DATAFLOW", "SCRIPT", "HTTP"};

const char *ej_job_type_name(ej_job_type type)
{
    if ((int)type < 0 || (size_t)type >= sizeof(job_type_names) / sizeof(job_type_names[0]))
        return "UNKNOWN";
    return job_type_names[type];
}

int ej_job_type_parse(const char *name, ej_job_type *out)
{
    if (name == NULL)
        return EJ_EINVAL;
    for (size_t i = 0; i < sizeof(job_type_names) / sizeof(job_type_names[0]); i++) {
        if (strcmp(name, job_type_names[i]) == 0) {
            if (out != NULL)
                *out = (ej_job_type)i;
            return 0;
        }
    }
    return EJ_EINVAL;
}
