/*
 * Inside the console library:
 *   source.c      the handle; reads from ZooKeeper or from a tree cache
 *   jobs.c        job, job list and server view queries
 *   ops.c         trigger, shutdown, disable/enable, remove
 *   config_edit.c config get / check / version-checked set
 *   web_*.c       `ejob console` (library ejob_console_web): HTTP server, REST API,
 *                 auth, settings file
 */
#ifndef EJ_CONSOLE_INTERNAL_H
#define EJ_CONSOLE_INTERNAL_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "ejob/console.h"
#include "ejob/registry.h"

struct ej_console {
    ej_registry *reg;
    ej_tree_cache *cache;   /* NULL: direct reads */
    uint64_t generation;    /* cache events seen (atomic) */
    uint64_t uncached_reads; /* without a cache: a new generation per call (atomic) */
};

/* Reads through the console's source. Same conventions as ej_registry_*:
 * EJ_ENONODE when missing. */
int ej__console_get(ej_console *con, const char *path, char **data, struct ej_node_stat *stat);
/* *out NULL and 0 when the node does not exist. */
int ej__console_get_opt(ej_console *con, const char *path, char **out);
int ej__console_exists(ej_console *con, const char *path, bool *exists);
/* Children in reverse lexicographic order; a missing node has none (0). */
int ej__console_children(ej_console *con, const char *path, char ***names, size_t *count);
/* Children in ascending order; a missing node has none (0). */
int ej__console_children_asc(ej_console *con, const char *path, char ***names, size_t *count);

/* snprintf into err when err is not NULL; returns rc. */
int ej__console_err(int rc, char *err, size_t errlen, const char *fmt, ...) EJ_PRINTF(4, 5);

/* "what: <registry's message>" into err; returns rc. */
int ej__console_reg_err(int rc, char *err, size_t errlen, const char *what);

/* The job must exist: 0, or EJ_ENOTFOUND / EJ_EINVAL / registry error with a message. */
int ej__console_require_job(ej_console *con, const char *job, char *err, size_t errlen);

/* Parse and validate a config node into job (fills config_* fields). */
int ej__console_load_config(ej_console *con, struct ej_console_job *j);
/* restart.c: j's shut-down instances (after its servers and instances are
 * loaded), and their release. */
int ej__console_load_shut_down(ej_console *con, struct ej_console_job *j);
void ej__console_shut_down_fini(struct ej_console_job *j);

#endif
