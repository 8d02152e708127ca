/* The console handle: reads from ZooKeeper directly or from a tree cache of
 * the whole namespace. */
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "console/internal.h"
#include "ejob/error.h"

static void count_change(ej_tree_cache *cache, const struct ej_tree_event *event, void *user)
{
    (void)cache;
    (void)event;
    ej_console *con = user;
    __atomic_add_fetch(&con->generation, 1, __ATOMIC_RELAXED);
}

uint64_t ej_console_generation(ej_console *con)
{
    if (con == NULL)
        return 0;
    if (con->cache == NULL)
        return __atomic_add_fetch(&con->uncached_reads, 1, __ATOMIC_RELAXED) | (1ULL << 63);
    return __atomic_load_n(&con->generation, __ATOMIC_RELAXED);
}

int ej_console_create(ej_registry *reg, const struct ej_console_opts *opts, ej_console **out)
{
    if (reg == NULL || out == NULL)
        return EJ_EINVAL;
    *out = NULL;
    ej_console *con = calloc(1, sizeof(*con));
    if (con == NULL)
        return EJ_ENOMEM;
    con->reg = reg;
    if (opts != NULL && opts->cached) {
        int rc = ej_tree_cache_create(reg, "/", count_change, con, &con->cache);
        if (rc == 0)
            rc = ej_tree_cache_start(con->cache);
        if (rc == 0)
            rc = ej_tree_cache_wait_initialized(
                con->cache, opts->cache_wait_ms > 0 ? opts->cache_wait_ms : 30000);
        if (rc != 0) {
            ej_console_destroy(con);
            return rc;
        }
    }
    *out = con;
    return 0;
}

void ej_console_destroy(ej_console *con)
{
    if (con == NULL)
        return;
    ej_tree_cache_destroy(con->cache);
    free(con);
}

ej_registry *ej_console_registry(const ej_console *con)
{
    return con != NULL ? con->reg : NULL;
}

int ej__console_get(ej_console *con, const char *path, char **data, struct ej_node_stat *stat)
{
    if (con->cache != NULL)
        return ej_tree_cache_get(con->cache, path, data, NULL, stat);
    return ej_registry_get(con->reg, path, data, NULL, stat);
}

int ej__console_get_opt(ej_console *con, const char *path, char **out)
{
    *out = NULL;
    int rc = ej__console_get(con, path, out, NULL);
    return rc == EJ_ENONODE ? 0 : rc;
}

int ej__console_exists(ej_console *con, const char *path, bool *exists)
{
    if (con->cache != NULL) {
        *exists = ej_tree_cache_exists(con->cache, path, NULL);
        return 0;
    }
    return ej_registry_exists(con->reg, path, exists, NULL);
}

static int children_sorted(ej_console *con, const char *path, ej_reg_sort sort, char ***names,
                           size_t *count)
{
    int rc = con->cache != NULL ? ej_tree_cache_children(con->cache, path, sort, names, count)
                                : ej_registry_children(con->reg, path, sort, names, count);
    if (rc == EJ_ENONODE) {
        *names = NULL;
        *count = 0;
        return 0;
    }
    return rc;
}

int ej__console_children(ej_console *con, const char *path, char ***names, size_t *count)
{
    return children_sorted(con, path, EJ_REG_SORT_DESC, names, count);
}

int ej__console_children_asc(ej_console *con, const char *path, char ***names, size_t *count)
{
    return children_sorted(con, path, EJ_REG_SORT_ASC, names, count);
}

int ej__console_err(int rc, char *err, size_t errlen, const char *fmt, ...)
{
    if (err != NULL && errlen > 0) {
        va_list ap;
        va_start(ap, fmt);
        vsnprintf(err, errlen, fmt, ap);
        va_end(ap);
    }
    return rc;
}

int ej__console_require_job(ej_console *con, const char *job, char *err, size_t errlen)
{
    if (!ej_layout_is_job_name(job))
        return ej__console_err(EJ_EINVAL, err, errlen, "bad job name \"%s\"",
                               job != NULL ? job : "");
    char path[EJ_REG_MAX_PATH_LEN + 1];
    ej_layout_path(path, sizeof path, job, EJ_LAYOUT_NODE_JOB, 0, NULL);
    bool exists = false;
    /* Always ask ZooKeeper: an operation must not act on a stale view. */
    int rc = ej_registry_exists(con->reg, path, &exists, NULL);
    if (rc != 0)
        return ej__console_reg_err(rc, err, errlen, "cannot read the job");
    if (!exists)
        return ej__console_err(EJ_ENOTFOUND, err, errlen, "no job \"%s\" in namespace \"%s\"", job,
                               ej_registry_namespace(con->reg));
    return 0;
}

int ej__console_reg_err(int rc, char *err, size_t errlen, const char *what)
{
    const char *msg = ej_registry_errmsg(NULL);
    if (msg == NULL || msg[0] == '\0')
        msg = ej_strerror(rc);
    return ej__console_err(rc, err, errlen, "%s: %s", what, msg);
}
