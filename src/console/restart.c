/*
 * Shut-down instances and bringing them back. ElasticJob's shutdown deletes
 * instances/{id}: the instance leaves the job and only a restart of its
 * process brings it back. An ejob instance keeps its marker
 * (ejob/instances/{id}, ejob-only: Java 2.1.5 never reads it) while its
 * process lives, so the console can tell such an instance from one that is
 * gone; an `ejob run` daemon also writes SHUTDOWN there and restarts the
 * job when RESTART is written over it (console.h).
 */
#include <stdlib.h>
#include <string.h>

#include "console/internal.h"
#include "ejob/error.h"

static bool has_instance(const struct ej_console_job *j, const char *id)
{
    for (size_t i = 0; i < j->instance_count; i++)
        if (strcmp(j->instances[i].id, id) == 0)
            return true;
    return false;
}

int ej__console_load_shut_down(ej_console *con, struct ej_console_job *j)
{
    char path[EJ_REG_MAX_PATH_LEN + 1];
    ej_layout_path(path, sizeof path, j->name, EJ_LAYOUT_NODE_EJOB_INSTANCES, 0, NULL);
    char **ids = NULL;
    size_t n = 0;
    int rc = ej__console_children(con, path, &ids, &n);
    if (rc != 0)
        return rc;
    j->shut_down = calloc(n ? n : 1, sizeof(*j->shut_down));
    if (j->shut_down == NULL) {
        ej_registry_free_names(ids);
        return EJ_ENOMEM;
    }
    for (size_t i = 0; i < n && rc == 0; i++) {
        if (has_instance(j, ids[i]) || !ej_layout_is_segment(ids[i]))
            continue;
        ej_layout_path(path, sizeof path, j->name, EJ_LAYOUT_NODE_EJOB_INSTANCE, 0, ids[i]);
        char *data = NULL;
        if ((rc = ej__console_get_opt(con, path, &data)) != 0 || data == NULL)
            continue; /* gone meanwhile: its process ended */
        struct ej_console_shut_down *s = &j->shut_down[j->shut_down_count++];
        s->restartable = strcmp(data, EJ_LAYOUT_EJOB_SHUTDOWN) == 0;
        s->id = strdup(ids[i]);
        free(data);
        if (s->id == NULL)
            rc = EJ_ENOMEM;
        for (size_t k = 0; k < j->server_count && s->id != NULL; k++)
            if (ej_layout_instance_on_server(s->id, j->servers[k].ip))
                j->servers[k].shut_down_count++;
    }
    ej_registry_free_names(ids);
    return rc;
}

void ej__console_shut_down_fini(struct ej_console_job *j)
{
    for (size_t i = 0; i < j->shut_down_count; i++)
        free(j->shut_down[i].id);
    free(j->shut_down);
    j->shut_down = NULL;
    j->shut_down_count = 0;
}

static bool selected(const struct ej_console_select *sel, const char *id)
{
    if (sel == NULL || (sel->instance == NULL && sel->server == NULL))
        return true;
    if (sel->instance != NULL)
        return strcmp(sel->instance, id) == 0;
    return ej_layout_instance_on_server(id, sel->server);
}

/* RESTART over SHUTDOWN, at the version that said SHUTDOWN: a daemon that
 * restarted meanwhile (its new marker "") is not asked twice. 1 when
 * written, 0 when the marker does not wait for a restart. */
static int ask_restart(ej_console *con, const char *path, char *err, size_t errlen)
{
    char *data = NULL;
    struct ej_node_stat st;
    int rc = ej_registry_get(con->reg, path, &data, NULL, &st);
    if (rc == EJ_ENONODE)
        return 0;
    if (rc != 0)
        return ej__console_reg_err(rc, err, errlen, path);
    bool waiting = strcmp(data, EJ_LAYOUT_EJOB_SHUTDOWN) == 0;
    free(data);
    if (!waiting)
        return 0;
    rc = ej_registry_set(con->reg, path, EJ_LAYOUT_EJOB_RESTART, strlen(EJ_LAYOUT_EJOB_RESTART),
                         st.version, NULL);
    if (rc == EJ_EBADVERSION || rc == EJ_ENONODE)
        return 0;
    return rc != 0 ? ej__console_reg_err(rc, err, errlen, path) : 1;
}

int ej_console_restart(ej_console *con, const char *job, const struct ej_console_select *sel,
                       ej_console_touched_fn touched, void *user, char *err, size_t errlen)
{
    if (con == NULL)
        return EJ_EINVAL;
    int rc = ej__console_require_job(con, job, err, errlen);
    if (rc != 0)
        return rc;
    if (sel != NULL && ((sel->instance != NULL && !ej_layout_is_segment(sel->instance)) ||
                        (sel->server != NULL && !ej_layout_is_segment(sel->server))))
        return ej__console_err(EJ_EINVAL, err, errlen, "bad instance id or server");
    char path[EJ_REG_MAX_PATH_LEN + 1];
    ej_layout_path(path, sizeof path, job, EJ_LAYOUT_NODE_EJOB_INSTANCES, 0, NULL);
    char **ids = NULL;
    size_t n = 0, done = 0;
    rc = ej_registry_children(con->reg, path, EJ_REG_SORT_DESC, &ids, &n);
    if (rc == EJ_ENONODE)
        rc = 0;
    if (rc != 0)
        return ej__console_reg_err(rc, err, errlen, path);
    for (size_t i = 0; i < n && rc >= 0; i++) {
        if (!selected(sel, ids[i]) ||
            ej_layout_path(path, sizeof path, job, EJ_LAYOUT_NODE_EJOB_INSTANCE, 0, ids[i]) < 0)
            continue;
        rc = ask_restart(con, path, err, errlen);
        if (rc == 1) {
            done++;
            if (touched != NULL)
                touched(ids[i], user);
        }
    }
    ej_registry_free_names(ids);
    if (rc < 0)
        return rc;
    if (done > 0)
        return 0;
    if (sel != NULL && sel->instance != NULL)
        return ej__console_err(EJ_ENOTFOUND, err, errlen,
                               "instance \"%s\" of job \"%s\" does not wait for a restart (it "
                               "runs the job, or it is not an `ejob run` daemon that was shut "
                               "down: restart its process)",
                               sel->instance, job);
    return ej__console_err(EJ_ENOTFOUND, err, errlen,
                           "no instance of job \"%s\"%s%s waits for a restart", job,
                           sel != NULL && sel->server != NULL ? " on server " : "",
                           sel != NULL && sel->server != NULL ? sel->server : "");
}
