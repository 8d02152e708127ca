/*
 * ElasticJob 2.1.5's JobOperateAPI and ShardingOperateAPI: trigger,
 * shutdown, disable/enable (server, item), remove. Written straight into
 * ZooKeeper (never through the cache) so they act on what is there now.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "common/util.h"
#include "console/internal.h"
#include "ejob/error.h"

/* Fresh children of a job's node, reverse lexicographic; none when missing. */
static int live_children(ej_console *con, const char *job, ej_layout_node node, char ***names,
                         size_t *n)
{
    char path[EJ_REG_MAX_PATH_LEN + 1];
    if (ej_layout_path(path, sizeof path, job, node, 0, NULL) < 0)
        return EJ_EINVAL;
    int rc = ej_registry_children(con->reg, path, EJ_REG_SORT_DESC, names, n);
    if (rc == EJ_ENONODE) {
        *names = NULL;
        *n = 0;
        return 0;
    }
    return rc;
}

static bool selected(const struct ej_console_select *sel, const char *id)
{
    if (sel == NULL)
        return true;
    if (sel->instance != NULL)
        return strcmp(sel->instance, id) == 0;
    if (sel->server != NULL)
        return ej_layout_instance_on_server(id, sel->server);
    return true;
}

static int check_select(const struct ej_console_select *sel, char *err, size_t errlen)
{
    if (sel == NULL)
        return 0;
    if (sel->instance != NULL && sel->server != NULL)
        return ej__console_err(EJ_EINVAL, err, errlen, "give an instance or a server, not both");
    if (sel->instance != NULL && !ej_layout_is_segment(sel->instance))
        return ej__console_err(EJ_EINVAL, err, errlen, "bad instance id \"%s\"", sel->instance);
    if (sel->server != NULL && !ej_layout_is_segment(sel->server))
        return ej__console_err(EJ_EINVAL, err, errlen, "bad server \"%s\"", sel->server);
    return 0;
}

static int no_instance(const char *job, const struct ej_console_select *sel, char *err,
                       size_t errlen)
{
    if (sel != NULL && sel->instance != NULL)
        return ej__console_err(EJ_ENOTFOUND, err, errlen, "no live instance \"%s\" of job \"%s\"",
                               sel->instance, job);
    if (sel != NULL && sel->server != NULL)
        return ej__console_err(EJ_ENOTFOUND, err, errlen,
                               "job \"%s\" has no live instance on server %s", job, sel->server);
    return ej__console_err(EJ_ENOTFOUND, err, errlen, "job \"%s\" has no live instance", job);
}

static int instance_op(ej_console *con, const char *job, const struct ej_console_select *sel,
                       bool shutdown, ej_console_touched_fn touched, void *user, char *err,
                       size_t errlen)
{
    int rc = ej__console_require_job(con, job, err, errlen);
    if (rc == 0)
        rc = check_select(sel, err, errlen);
    if (rc != 0)
        return rc;
    char **ids = NULL;
    size_t n = 0;
    if ((rc = live_children(con, job, EJ_LAYOUT_NODE_INSTANCES, &ids, &n)) != 0)
        return ej__console_reg_err(rc, err, errlen, "cannot list instances");
    size_t done = 0;
    for (size_t i = 0; i < n && rc == 0; i++) {
        char path[EJ_REG_MAX_PATH_LEN + 1];
        if (!selected(sel, ids[i]) ||
            ej_layout_path(path, sizeof path, job, EJ_LAYOUT_NODE_INSTANCE, 0, ids[i]) < 0)
            continue;
        /* set, never persist: an instance node that vanished meanwhile must
         * not come back as a persistent node. */
        int r = shutdown ? ej_registry_delete(con->reg, path, -1)
                         : ej_registry_set(con->reg, path, EJ_LAYOUT_INSTANCE_TRIGGER,
                                           strlen(EJ_LAYOUT_INSTANCE_TRIGGER), -1, NULL);
        if (r == EJ_ENONODE)
            continue;
        if (r != 0) {
            rc = ej__console_reg_err(r, err, errlen, path);
            break;
        }
        done++;
        if (touched != NULL)
            touched(ids[i], user);
    }
    ej_registry_free_names(ids);
    if (rc == 0 && done == 0)
        rc = no_instance(job, sel, err, errlen);
    return rc;
}

int ej_console_trigger(ej_console *con, const char *job, const struct ej_console_select *sel,
                       ej_console_touched_fn touched, void *user, char *err, size_t errlen)
{
    if (con == NULL)
        return EJ_EINVAL;
    return instance_op(con, job, sel, false, touched, user, err, errlen);
}

int ej_console_shutdown(ej_console *con, const char *job, const struct ej_console_select *sel,
                        ej_console_touched_fn touched, void *user, char *err, size_t errlen)
{
    if (con == NULL)
        return EJ_EINVAL;
    return instance_op(con, job, sel, true, touched, user, err, errlen);
}

static int unknown_server(const char *job, const char *ip, char **ips, size_t n, char *err,
                          size_t errlen)
{
    ej_buf b;
    ej__buf_init(&b);
    for (size_t i = 0; i < n; i++)
        ej__buf_printf(&b, "%s%s", i ? ", " : "", ips[i]);
    int rc =
        ej__console_err(EJ_ENOTFOUND, err, errlen, "job \"%s\" has no server %s (its servers: %s)",
                        job, ip, n && b.data != NULL ? b.data : "none");
    ej__buf_fini(&b);
    return rc;
}

int ej_console_server_set_disabled(ej_console *con, const char *job, const char *ip, bool disable,
                                   ej_console_touched_fn touched, void *user, char *err,
                                   size_t errlen)
{
    if (con == NULL)
        return EJ_EINVAL;
    int rc = ej__console_require_job(con, job, err, errlen);
    if (rc != 0)
        return rc;
    if (ip != NULL && !ej_layout_is_segment(ip))
        return ej__console_err(EJ_EINVAL, err, errlen, "bad server \"%s\"", ip);
    char **ips = NULL;
    size_t n = 0;
    if ((rc = live_children(con, job, EJ_LAYOUT_NODE_SERVERS, &ips, &n)) != 0)
        return ej__console_reg_err(rc, err, errlen, "cannot list servers");
    bool known = ip == NULL;
    for (size_t i = 0; i < n && !known; i++)
        known = strcmp(ips[i], ip) == 0;
    if (!known)
        rc = unknown_server(job, ip, ips, n, err, errlen);
    else if (n == 0)
        rc = ej__console_err(EJ_ENOTFOUND, err, errlen, "job \"%s\" has no servers yet", job);
    const char *value = disable ? EJ_LAYOUT_SERVER_DISABLED : EJ_LAYOUT_SERVER_ENABLED;
    for (size_t i = 0; i < n && rc == 0; i++) {
        char path[EJ_REG_MAX_PATH_LEN + 1];
        if ((ip != NULL && strcmp(ips[i], ip) != 0) ||
            ej_layout_path(path, sizeof path, job, EJ_LAYOUT_NODE_SERVER, 0, ips[i]) < 0)
            continue;
        int r = ej_registry_persist(con->reg, path, value, strlen(value));
        if (r != 0) {
            rc = ej__console_reg_err(r, err, errlen, path);
            break;
        }
        if (touched != NULL)
            touched(ips[i], user);
    }
    ej_registry_free_names(ips);
    return rc;
}

/* Refuse items the job does not have, when its config says how many. */
static int check_item_in_range(ej_console *con, const char *job, int item, char *err, size_t errlen)
{
    char path[EJ_REG_MAX_PATH_LEN + 1];
    ej_layout_path(path, sizeof path, job, EJ_LAYOUT_NODE_CONFIG, 0, NULL);
    char *raw = NULL;
    int rc = ej_registry_get(con->reg, path, &raw, NULL, NULL);
    if (rc == EJ_ENONODE)
        return 0;
    if (rc != 0)
        return ej__console_reg_err(rc, err, errlen, path);
    struct ej_job_config cfg;
    if (ej_job_config_init(&cfg) == 0) {
        if (ej_job_config_from_json(raw, strlen(raw), &cfg, NULL, 0) == 0 &&
            cfg.sharding_total_count > 0 && item >= cfg.sharding_total_count)
            rc = ej__console_err(EJ_ENOTFOUND, err, errlen,
                                 "job \"%s\" has items 0..%d; there is no item %d", job,
                                 cfg.sharding_total_count - 1, item);
        ej_job_config_fini(&cfg);
    }
    free(raw);
    return rc;
}

int ej_console_item_set_disabled(ej_console *con, const char *job, int item, bool disable,
                                 bool *changed, char *err, size_t errlen)
{
    if (changed != NULL)
        *changed = false;
    if (con == NULL)
        return EJ_EINVAL;
    int rc = ej__console_require_job(con, job, err, errlen);
    if (rc != 0)
        return rc;
    if (item < 0 || item > EJ_CONFIG_MAX_SHARDING_TOTAL_COUNT)
        return ej__console_err(EJ_EINVAL, err, errlen, "bad shard item %d", item);
    if (disable && (rc = check_item_in_range(con, job, item, err, errlen)) != 0)
        return rc;
    char path[EJ_REG_MAX_PATH_LEN + 1];
    ej_layout_path(path, sizeof path, job, EJ_LAYOUT_NODE_ITEM_DISABLED, item, NULL);
    if (disable) {
        bool exists = false;
        rc = ej_registry_exists(con->reg, path, &exists, NULL);
        if (rc == 0 && !exists)
            rc = ej_registry_persist(con->reg, path, "", 0);
        if (rc == 0 && changed != NULL)
            *changed = !exists;
    } else {
        rc = ej_registry_delete(con->reg, path, -1);
        if (rc == 0 && changed != NULL)
            *changed = true;
        if (rc == EJ_ENONODE)
            rc = 0;
    }
    return rc != 0 ? ej__console_reg_err(rc, err, errlen, path) : 0;
}

int ej_console_remove(ej_console *con, const char *job, char *err, size_t errlen)
{
    if (con == NULL)
        return EJ_EINVAL;
    int rc = ej__console_require_job(con, job, err, errlen);
    if (rc != 0)
        return rc;
    char **ids = NULL;
    size_t n = 0;
    if ((rc = live_children(con, job, EJ_LAYOUT_NODE_INSTANCES, &ids, &n)) != 0)
        return ej__console_reg_err(rc, err, errlen, "cannot list instances");
    if (n > 0) {
        ej_buf b;
        ej__buf_init(&b);
        for (size_t i = 0; i < n && i < 5; i++)
            ej__buf_printf(&b, "%s%s", i ? ", " : "", ids[i]);
        rc = ej__console_err(EJ_EBUSY, err, errlen,
                             "job \"%s\" has %zu live instance(s): %s%s; shut them down first "
                             "(ejob shutdown %s) or stop their daemons",
                             job, n, b.data != NULL ? b.data : "", n > 5 ? ", ..." : "", job);
        ej__buf_fini(&b);
        ej_registry_free_names(ids);
        return rc;
    }
    ej_registry_free_names(ids);
    char path[EJ_REG_MAX_PATH_LEN + 1];
    ej_layout_path(path, sizeof path, job, EJ_LAYOUT_NODE_JOB, 0, NULL);
    rc = ej_registry_delete_recursive(con->reg, path);
    return rc != 0 ? ej__console_reg_err(rc, err, errlen, path) : 0;
}

/* Does job list ip under servers/? */
static int job_has_server(ej_console *con, const char *job, const char *ip, bool *has)
{
    char path[EJ_REG_MAX_PATH_LEN + 1];
    if (ej_layout_path(path, sizeof path, job, EJ_LAYOUT_NODE_SERVER, 0, ip) < 0) {
        *has = false;
        return 0;
    }
    return ej_registry_exists(con->reg, path, has, NULL);
}

int ej_console_server_apply(ej_console *con, const char *ip, ej_console_server_op op,
                            ej_console_touched_fn touched, void *user, char *err, size_t errlen)
{
    if (con == NULL)
        return EJ_EINVAL;
    if (!ej_layout_is_segment(ip))
        return ej__console_err(EJ_EINVAL, err, errlen, "bad server \"%s\"", ip ? ip : "");
    char **jobs = NULL;
    size_t n = 0;
    int rc = ej_registry_children(con->reg, "/", EJ_REG_SORT_ASC, &jobs, &n);
    if (rc == EJ_ENONODE)
        rc = 0;
    if (rc != 0)
        return ej__console_reg_err(rc, err, errlen, "cannot list jobs");
    size_t matched = 0;
    for (size_t i = 0; i < n && rc == 0; i++) {
        bool has = false;
        if (!ej_layout_is_job_name(jobs[i]) ||
            (rc = job_has_server(con, jobs[i], ip, &has)) != 0 || !has)
            continue;
        matched++;
        if (op == EJ_CONSOLE_SERVER_OP_SHUTDOWN) {
            struct ej_console_select sel = {.server = ip};
            rc = ej_console_shutdown(con, jobs[i], &sel, NULL, NULL, err, errlen);
            if (rc == EJ_ENOTFOUND) { /* no live instance there: nothing to do */
                rc = 0;
                continue;
            }
        } else {
            rc = ej_console_server_set_disabled(
                con, jobs[i], ip, op == EJ_CONSOLE_SERVER_OP_DISABLE, NULL, NULL, err, errlen);
        }
        if (rc == 0 && touched != NULL)
            touched(jobs[i], user);
    }
    ej_registry_free_names(jobs);
    if (rc == 0 && matched == 0)
        rc = ej__console_err(EJ_ENOTFOUND, err, errlen, "no job names server %s", ip);
    return rc;
}
