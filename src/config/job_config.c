/* The job model: the field table (fields.h) and, driven by it, defaults,
 * copying, comparing. */
#include <stdlib.h>
#include <string.h>

#include "common/check.h"
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

/* ------------------------------------------------------------------------ */
/* The field table                                                           */
/* ------------------------------------------------------------------------ */

/* A row's default goes to def_str or def_num by its type. */
#define EJ_CFG_DEF_STR(d) d, 0
#define EJ_CFG_DEF_CLASS(d) d, 0
#define EJ_CFG_DEF_OBJ(d) NULL, 0
#define EJ_CFG_DEF_INT(d) NULL, d
#define EJ_CFG_DEF_INT64(d) NULL, d
#define EJ_CFG_DEF_BOOL(d) NULL, d
#define EJ_CFG_DEF_TYPE(d) NULL, d
/* A PROP row is named by its path in messages. */
#define EJ_CFG_NAME_KEY(k) k
#define EJ_CFG_NAME_SET(k) k
#define EJ_CFG_NAME_PROP(k) "jobProperties." k
#define EJ_CFG_NAME_REST(k) k

const struct ej__cfg_field_desc ej__cfg_fields[EJ_CFG_F_COUNT_] = {
#define EJ_CFG_FIELD_DESC(id, member, type, where, scope, key, yaml, dflt, form, choices, help)   \
    [EJ_CFG_F_##id] = {key,                                                                        \
                       EJ_CFG_NAME_##where(key),                                                   \
                       yaml,                                                                       \
                       offsetof(struct ej_job_config, member),                                     \
                       EJ_CFG_T_##type,                                                            \
                       EJ_CFG_W_##where,                                                           \
                       EJ_CFG_S_##scope,                                                           \
                       EJ_CFG_DEF_##type(dflt),                                                    \
                       EJ_CFG_FORM_##form,                                                         \
                       choices,                                                                    \
                       help},
    EJ_JOB_FIELDS(EJ_CFG_FIELD_DESC)
#undef EJ_CFG_FIELD_DESC
};

const char *ej__config_field_json_name(enum ej__cfg_field f)
{
    if ((int)f < 0 || f >= EJ_CFG_F_COUNT_)
        return "?";
    return ej__cfg_fields[f].name;
}

bool ej__config_field_applies(const struct ej__cfg_field_desc *f, ej_job_type t)
{
    return f->scope == EJ_CFG_S_ANY || f->scope == (int)t;
}

long long ej__config_field_num(const struct ej_job_config *cfg, const struct ej__cfg_field_desc *f)
{
    const void *at = (const char *)cfg + f->off;
    switch (f->type) {
    case EJ_CFG_T_INT:
        return *(const int *)at;
    case EJ_CFG_T_INT64:
        return *(const int64_t *)at;
    case EJ_CFG_T_BOOL:
        return *(const bool *)at;
    case EJ_CFG_T_TYPE:
        return *(const ej_job_type *)at;
    default:
        EJ_ASSERT(!"not a number field");
        return 0;
    }
}

void ej__config_field_set_num(struct ej_job_config *cfg, const struct ej__cfg_field_desc *f,
                              long long value)
{
    void *at = (char *)cfg + f->off;
    switch (f->type) {
    case EJ_CFG_T_INT:
        *(int *)at = (int)value;
        break;
    case EJ_CFG_T_INT64:
        *(int64_t *)at = value;
        break;
    case EJ_CFG_T_BOOL:
        *(bool *)at = value != 0;
        break;
    case EJ_CFG_T_TYPE:
        *(ej_job_type *)at = (ej_job_type)value;
        break;
    default:
        EJ_ASSERT(!"not a number field");
        break;
    }
}

static bool is_str_type(enum ej__cfg_type t)
{
    return t == EJ_CFG_T_STR || t == EJ_CFG_T_CLASS || t == EJ_CFG_T_OBJ;
}

char **ej__config_field_strp(struct ej_job_config *cfg, const struct ej__cfg_field_desc *f)
{
    EJ_ASSERT(is_str_type(f->type));
    return (char **)(void *)((char *)cfg + f->off);
}

const char *ej__config_field_str(const struct ej_job_config *cfg,
                                 const struct ej__cfg_field_desc *f)
{
    EJ_ASSERT(is_str_type(f->type));
    return *(char *const *)(const void *)((const char *)cfg + f->off);
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

const char *ej__config_job_class(const struct ej_job_config *c)
{
    return c->job_type == EJ_JOB_TYPE_SCRIPT ? EJ_CONFIG_SCRIPT_JOB_CLASS : c->job_class;
}

bool ej__config_field_is_default(const struct ej_job_config *cfg,
                                 const struct ej__cfg_field_desc *f)
{
    switch (f->type) {
    case EJ_CFG_T_STR:
    case EJ_CFG_T_CLASS:
        return str_eq(ej__config_field_str(cfg, f), f->def_str);
    case EJ_CFG_T_OBJ:
        return extra_eq(ej__config_field_str(cfg, f), NULL);
    default:
        return ej__config_field_num(cfg, f) == f->def_num;
    }
}

bool ej__config_field_equal(const struct ej_job_config *a, const struct ej_job_config *b,
                            const struct ej__cfg_field_desc *f)
{
    switch (f->type) {
    case EJ_CFG_T_STR:
        return str_eq(ej__config_field_str(a, f), ej__config_field_str(b, f));
    case EJ_CFG_T_CLASS:
        return str_eq(ej__config_job_class(a), ej__config_job_class(b));
    case EJ_CFG_T_OBJ:
        return extra_eq(ej__config_field_str(a, f), ej__config_field_str(b, f));
    default:
        return ej__config_field_num(a, f) == ej__config_field_num(b, f);
    }
}

/* ------------------------------------------------------------------------ */
/* The model                                                                 */
/* ------------------------------------------------------------------------ */

int ej_job_config_init(struct ej_job_config *cfg)
{
    if (cfg == NULL)
        return EJ_EINVAL;
    memset(cfg, 0, sizeof(*cfg));
    for (int i = 0; i < EJ_CFG_F_COUNT_; i++) {
        const struct ej__cfg_field_desc *f = &ej__cfg_fields[i];
        if (f->type == EJ_CFG_T_OBJ)
            continue; /* NULL: none */
        if (!is_str_type(f->type))
            ej__config_field_set_num(cfg, f, f->def_num);
        else if ((*ej__config_field_strp(cfg, f) = strdup(f->def_str)) == NULL)
            goto out_nomem;
    }
    return 0;

out_nomem:
    ej_job_config_fini(cfg);
    return EJ_ENOMEM;
}

void ej_job_config_fini(struct ej_job_config *cfg)
{
    if (cfg == NULL)
        return;
    for (int i = 0; i < EJ_CFG_F_COUNT_; i++) {
        if (is_str_type(ej__cfg_fields[i].type))
            free(*ej__config_field_strp(cfg, &ej__cfg_fields[i]));
    }
    memset(cfg, 0, sizeof(*cfg));
}

int64_t ej_job_config_timeout_ms(const struct ej_job_config *cfg)
{
    if (cfg->timeout_seconds > 0)
        return (int64_t)cfg->timeout_seconds * 1000;
    return cfg->job_type == EJ_JOB_TYPE_SCRIPT && cfg->script_timeout_ms > 0
               ? cfg->script_timeout_ms
               : 0;
}

bool ej_job_config_misfire(const struct ej_job_config *cfg)
{
    if (cfg->misfire_policy == NULL || cfg->misfire_policy[0] == '\0')
        return cfg->misfire;
    return strcmp(cfg->misfire_policy, "SKIP") != 0;
}

int64_t ej_job_config_grace_ms(const struct ej_job_config *cfg)
{
    return cfg->timeout_grace_seconds > 0 ? (int64_t)cfg->timeout_grace_seconds * 1000 : 2000;
}

int ej_job_config_copy(struct ej_job_config *dst, const struct ej_job_config *src)
{
    if (dst == NULL || src == NULL)
        return EJ_EINVAL;
    *dst = *src;
    /* Null every pointer first so a failure part-way leaves dst safe to fini. */
    for (int i = 0; i < EJ_CFG_F_COUNT_; i++) {
        if (is_str_type(ej__cfg_fields[i].type))
            *ej__config_field_strp(dst, &ej__cfg_fields[i]) = NULL;
    }
    for (int i = 0; i < EJ_CFG_F_COUNT_; i++) {
        const struct ej__cfg_field_desc *f = &ej__cfg_fields[i];
        if (!is_str_type(f->type))
            continue;
        const char *s = ej__config_field_str(src, f);
        if (f->type == EJ_CFG_T_OBJ && s == NULL)
            continue; /* an object stays NULL; a string NULL becomes "" */
        if ((*ej__config_field_strp(dst, f) = ej__config_strdup(s)) == NULL) {
            ej_job_config_fini(dst);
            return EJ_ENOMEM;
        }
    }
    return 0;
}

bool ej_job_config_equal(const struct ej_job_config *a, const struct ej_job_config *b)
{
    if (a == b)
        return true;
    if (a == NULL || b == NULL)
        return false;
    /* The type first: it says which fields count. */
    if (a->job_type != b->job_type)
        return false;
    for (int i = 0; i < EJ_CFG_F_COUNT_; i++) {
        const struct ej__cfg_field_desc *f = &ej__cfg_fields[i];
        if (ej__config_field_applies(f, a->job_type) && !ej__config_field_equal(a, b, f))
            return false;
    }
    return true;
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
