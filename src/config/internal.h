/* Shared between the files of the config module. Not public. */
#ifndef EJ_CONFIG_INTERNAL_H
#define EJ_CONFIG_INTERNAL_H

#include <stdarg.h>
#include <stdbool.h>
#include <stddef.h>

#include "config/fields.h"
#include "ejob/common.h"
#include "ejob/config.h"

/* Every field of the job, in fields.h's order: EJ_CFG_F_JOB_NAME ... Validation
 * names the field a problem is about with it; the daemon YAML loader marks
 * where each came from. */
#define EJ_CFG_FIELD_ID(id, member, type, where, scope, key, yaml, dflt, form, choices, help)     \
    EJ_CFG_F_##id,
enum ej__cfg_field { EJ_JOB_FIELDS(EJ_CFG_FIELD_ID) EJ_CFG_F_COUNT_ };
#undef EJ_CFG_FIELD_ID

/* The type, where and scope columns of fields.h (described there). */
enum ej__cfg_type {
    EJ_CFG_T_STR,
    EJ_CFG_T_INT,
    EJ_CFG_T_INT64,
    EJ_CFG_T_BOOL,
    EJ_CFG_T_TYPE,
    EJ_CFG_T_CLASS,
    EJ_CFG_T_OBJ,
};
enum ej__cfg_where {
    EJ_CFG_W_KEY,
    EJ_CFG_W_SET,
    EJ_CFG_W_PROP,
    EJ_CFG_W_REST,
};
enum ej__cfg_form {
    EJ_CFG_FORM_MAIN,
    EJ_CFG_FORM_MORE,
    EJ_CFG_FORM_JAVA,
    EJ_CFG_FORM_NONE,
};
#define EJ_CFG_S_ANY (-1)
#define EJ_CFG_S_DATAFLOW EJ_JOB_TYPE_DATAFLOW
#define EJ_CFG_S_SCRIPT EJ_JOB_TYPE_SCRIPT
#define EJ_CFG_S_HTTP EJ_JOB_TYPE_HTTP

/* One row of fields.h. */
struct ej__cfg_field_desc {
    const char *key;  /* JSON key (inside jobProperties for PROP rows) */
    const char *name; /* in messages: the key, or "jobProperties.KEY" */
    const char *yaml; /* daemon YAML job key, "props.KEY", or NULL */
    size_t off;       /* of the member in struct ej_job_config */
    enum ej__cfg_type type;
    enum ej__cfg_where where;
    int scope;           /* EJ_CFG_S_ANY or an ej_job_type */
    const char *def_str; /* default of STR and CLASS rows */
    long long def_num;   /* default of INT, INT64, BOOL and TYPE rows */
    enum ej__cfg_form form;
    const char *choices; /* "A,B,C", "@tz" or NULL */
    const char *help;
};

/* True when value is one of f's choices (f has a list of them). */
bool ej__config_field_choice_ok(const struct ej__cfg_field_desc *f, const char *value);

/* The table, indexed by enum ej__cfg_field. */
extern const struct ej__cfg_field_desc ej__cfg_fields[EJ_CFG_F_COUNT_];

/* True when f counts for a job of type t (its scope). */
bool ej__config_field_applies(const struct ej__cfg_field_desc *f, ej_job_type t);

/* The value of an INT, INT64, BOOL or TYPE field as a number; set it. */
long long ej__config_field_num(const struct ej_job_config *cfg, const struct ej__cfg_field_desc *f);
void ej__config_field_set_num(struct ej_job_config *cfg, const struct ej__cfg_field_desc *f,
                              long long value);

/* The member of a STR, CLASS or OBJ field (the string stays cfg's). */
char **ej__config_field_strp(struct ej_job_config *cfg, const struct ej__cfg_field_desc *f);
const char *ej__config_field_str(const struct ej_job_config *cfg,
                                 const struct ej__cfg_field_desc *f);

/* The job class as written and compared: a SCRIPT job's is always
 * EJ_CONFIG_SCRIPT_JOB_CLASS, whatever job_class holds. Borrowed from c. */
const char *ej__config_job_class(const struct ej_job_config *c);

/* True when cfg holds f's default (NULL strings read as "", NULL objects
 * as "{}"). */
bool ej__config_field_is_default(const struct ej_job_config *cfg,
                                 const struct ej__cfg_field_desc *f);

/* True when a and b agree on f, as ej_job_config_equal compares it (a
 * CLASS field as written: ScriptJob for a SCRIPT job). Scope is the
 * caller's business. */
bool ej__config_field_equal(const struct ej_job_config *a, const struct ej_job_config *b,
                            const struct ej__cfg_field_desc *f);

/* A field's name in messages ("shardingTotalCount"), "?" when out of range. */
const char *ej__config_field_json_name(enum ej__cfg_field f);

/* Receives one validation problem: the field and the message without the
 * field name ("must be >= 1, got 0"). Returns 0, or non-zero to stop. */
typedef int (*ej__config_verr_fn)(void *ctx, enum ej__cfg_field field, const char *msg);

/* Run every validation rule, calling fn per problem. Returns the number of
 * problems (0 = valid) or EJ_ENOMEM. */
int ej__config_validate(const struct ej_job_config *cfg, ej__config_verr_fn fn, void *ctx);

/* ej_job_config_from_json, collecting: every value of the wrong type is
 * added to errs ("shardingTotalCount: expected an integer, got \"abc\"")
 * and its field marked in bad, and the reading goes on; cfg then receives
 * the fields that read (the others keep Java's defaults). A problem of the
 * JSON as a whole (syntax, not an object, too large) is added alone and cfg
 * is untouched. Returns 0, EJ_EPARSE (messages added), EJ_EINVAL or
 * EJ_ENOMEM. */
int ej__config_from_json_all(const char *json, size_t len, struct ej_job_config *cfg,
                             struct ej_config_errors *errs, bool bad[EJ_CFG_F_COUNT_]);

/* Append a formatted message to errs (NULL errs: ignored). Past
 * EJ_CONFIG_MAX_ERRORS messages are counted, not kept. Returns 0 or
 * EJ_ENOMEM. */
int ej__config_errors_add(struct ej_config_errors *errs, const char *fmt, ...) EJ_PRINTF(2, 3);

/* strdup that maps NULL to "". NULL only when out of memory. */
char *ej__config_strdup(const char *s);

/* s or "" when s is NULL. */
static inline const char *ej__config_str(const char *s)
{
    return s ? s : "";
}

/* Write a short, quoted, printable rendition of s (at most ~60 bytes of
 * it, "..." when cut) into out. */
void ej__config_quote_short(const char *s, size_t n, char *out, size_t outlen);

/* The first line of a secret file (not empty), under the rules of
 * ej_config_read_secret_file but of any shape (an HMAC key, a password).
 * Caller frees *out (zero it first). Same returns. */
int ej__config_read_secret_line(const char *path, char **out, char *warn, size_t warnlen, char *err,
                                size_t errlen);

#endif
