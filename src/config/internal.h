/* Shared between the files of the config module. Not public. */
#ifndef EJ_CONFIG_INTERNAL_H
#define EJ_CONFIG_INTERNAL_H

#include <stdarg.h>
#include <stdbool.h>
#include <stddef.h>

#include "ejob/common.h"
#include "ejob/config.h"

/* The fields validation can complain about. Each has a JSON key name (used
 * in ej_job_config_validate's messages) and a daemon YAML key path. */
enum ej__cfg_field {
    EJ_CFG_F_JOB_NAME,
    EJ_CFG_F_CRON,
    EJ_CFG_F_SHARDING_TOTAL_COUNT,
    EJ_CFG_F_SHARDING_ITEM_PARAMETERS,
    EJ_CFG_F_JOB_PARAMETER,
    EJ_CFG_F_DESCRIPTION,
    EJ_CFG_F_JOB_EXCEPTION_HANDLER,
    EJ_CFG_F_EXECUTOR_SERVICE_HANDLER,
    EJ_CFG_F_JOB_PROPERTIES,
    EJ_CFG_F_JOB_TYPE,
    EJ_CFG_F_JOB_CLASS,
    EJ_CFG_F_SCRIPT_COMMAND_LINE,
    EJ_CFG_F_SCRIPT_TIMEOUT,
    EJ_CFG_F_MAX_TIME_DIFF_SECONDS,
    EJ_CFG_F_MONITOR_PORT,
    EJ_CFG_F_JOB_SHARDING_STRATEGY_CLASS,
    EJ_CFG_F_TIME_ZONE,
    EJ_CFG_F_HTTP_URI,
    EJ_CFG_F_HTTP_METHOD,
    EJ_CFG_F_HTTP_DATA,
    EJ_CFG_F_HTTP_CONNECT_TIMEOUT,
    EJ_CFG_F_HTTP_READ_TIMEOUT,
    EJ_CFG_F_HTTP_CONTENT_TYPE,
    EJ_CFG_F_EXTRA,
    EJ_CFG_F_COUNT_
};

/* JSON key of a field ("shardingTotalCount"). */
const char *ej__config_field_json_name(enum ej__cfg_field f);

/* Receives one validation problem: the field and the message without the
 * field name ("must be >= 1, got 0"). Returns 0, or non-zero to stop. */
typedef int (*ej__config_verr_fn)(void *ctx, enum ej__cfg_field field, const char *msg);

/* Run every validation rule, calling fn per problem. Returns the number of
 * problems (0 = valid) or EJ_ENOMEM. */
int ej__config_validate(const struct ej_job_config *cfg, ej__config_verr_fn fn, void *ctx);

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

#endif
