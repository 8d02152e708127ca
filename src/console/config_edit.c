/*
 * A job's config node: read, checked with the config module's public parser
 * and validator (the same verdict as every other path into a job), and
 * written conditionally on the version that was read.
 */
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "console/internal.h"
#include "ejob/error.h"

int ej__console_load_config(ej_console *con, struct ej_console_job *j)
{
    char path[EJ_REG_MAX_PATH_LEN + 1];
    ej_layout_path(path, sizeof path, j->name, EJ_LAYOUT_NODE_CONFIG, 0, NULL);
    struct ej_node_stat st;
    int rc = ej__console_get(con, path, &j->config_raw, &st);
    if (rc == EJ_ENONODE) {
        j->config_raw = NULL;
        snprintf(j->config_error, sizeof(j->config_error), "config: node %.900s is missing", path);
        return 0;
    }
    if (rc != 0)
        return rc;
    j->config_version = st.version;
    if (ej_job_config_init(&j->cfg) != 0)
        return EJ_ENOMEM;
    char err[512];
    rc = ej_job_config_from_json(j->config_raw, strlen(j->config_raw), &j->cfg, err, sizeof(err));
    if (rc != 0) {
        snprintf(j->config_error, sizeof(j->config_error), "%s", err);
        return rc == EJ_ENOMEM ? rc : 0;
    }
    j->config_parsed = true;
    if (ej_job_config_validate(&j->cfg, err, sizeof(err)) != 0) {
        snprintf(j->config_error, sizeof(j->config_error), "%s", err);
        return 0;
    }
    j->config_ok = true;
    if (ej_sharding_params_parse(j->cfg.sharding_item_parameters, &j->params, err, sizeof(err)) !=
        0)
        memset(&j->params, 0, sizeof(j->params));
    return 0;
}

int ej_console_config_get(ej_console *con, const char *job, char **raw, int *version, char *err,
                          size_t errlen)
{
    if (con == NULL || raw == NULL)
        return EJ_EINVAL;
    *raw = NULL;
    int rc = ej__console_require_job(con, job, err, errlen);
    if (rc != 0)
        return rc;
    char path[EJ_REG_MAX_PATH_LEN + 1];
    ej_layout_path(path, sizeof path, job, EJ_LAYOUT_NODE_CONFIG, 0, NULL);
    struct ej_node_stat st;
    rc = ej_registry_get(con->reg, path, raw, NULL, &st);
    if (rc == EJ_ENONODE)
        return ej__console_err(EJ_ENOTFOUND, err, errlen, "job \"%s\" has no config node (%s)", job,
                               path);
    if (rc != 0)
        return ej__console_reg_err(rc, err, errlen, path);
    if (version != NULL)
        *version = st.version;
    return 0;
}

static int add_error(struct ej_config_errors *errs, const char *fmt, ...) EJ_PRINTF(2, 3);
static int add_error(struct ej_config_errors *errs, const char *fmt, ...)
{
    if (errs == NULL)
        return 0;
    char msg[1200];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(msg, sizeof msg, fmt, ap);
    va_end(ap);
    char **grown = realloc(errs->messages, (errs->count + 1) * sizeof(char *));
    if (grown == NULL)
        return EJ_ENOMEM;
    errs->messages = grown;
    if ((grown[errs->count] = strdup(msg)) == NULL)
        return EJ_ENOMEM;
    errs->count++;
    return 0;
}

int ej_console_config_check(const char *job, const char *json, size_t len,
                            struct ej_job_config *cfg, struct ej_config_errors *errs)
{
    if (job == NULL || json == NULL || cfg == NULL)
        return EJ_EINVAL;
    if (errs != NULL) {
        /* Every problem at once: the form shows each by its field. */
        int rc = ej_job_config_check_json(json, len, job, cfg, errs);
        return rc == EJ_EPARSE ? EJ_ECONFIG : rc;
    }
    char err[1024];
    int rc = ej_job_config_from_json(json, len, cfg, err, sizeof err);
    if (rc == EJ_ENOMEM)
        return rc;
    if (rc != 0)
        return add_error(errs, "%s", err) != 0 ? EJ_ENOMEM : EJ_ECONFIG;
    if (cfg->job_name[0] == '\0' && ej_job_config_set_str(&cfg->job_name, job) != 0)
        return EJ_ENOMEM;
    if (strcmp(cfg->job_name, job) != 0) {
        if (add_error(errs, "jobName: is \"%s\" but the job is \"%s\"", cfg->job_name, job) != 0)
            return EJ_ENOMEM;
        return EJ_ECONFIG;
    }
    return ej_job_config_validate(cfg, NULL, 0) != 0 ? EJ_ECONFIG : 0;
}

void ej_console_config_change_fini(struct ej_console_config_change *c)
{
    if (c == NULL)
        return;
    free(c->old_json);
    free(c->new_json);
    memset(c, 0, sizeof(*c));
    c->new_version = -1;
    c->old_version = -1;
}

/* Write new bytes at the expected version; create when the node is missing. */
static int write_config(ej_console *con, const char *path, struct ej_console_config_change *c,
                        bool exists, int version)
{
    struct ej_node_stat st;
    int rc = exists
                 ? ej_registry_set(con->reg, path, c->new_json, strlen(c->new_json), version, &st)
                 : ej_registry_create_node(con->reg, path, c->new_json, strlen(c->new_json),
                                           EJ_REG_PERSISTENT, 0, NULL);
    /* Someone else changed (or created, or removed) it since it was read. */
    if (rc == EJ_ENODEEXISTS || (exists && rc == EJ_ENONODE))
        rc = EJ_EBADVERSION;
    if (rc == 0) {
        c->written = true;
        c->new_version = exists ? st.version : 0;
    }
    return rc;
}

int ej_console_config_set(ej_console *con, const char *job, const char *json, size_t len,
                          int expected_version, bool dry_run,
                          struct ej_console_config_change *change, struct ej_config_errors *errs)
{
    struct ej_console_config_change local;
    struct ej_console_config_change *c = change != NULL ? change : &local;
    memset(c, 0, sizeof(*c));
    c->new_version = -1;
    c->old_version = -1;
    if (con == NULL || json == NULL)
        return EJ_EINVAL;
    char err[1024];
    int rc = ej__console_require_job(con, job, err, sizeof err);
    if (rc != 0) {
        add_error(errs, "%s", err);
        return rc;
    }
    struct ej_job_config cfg;
    if (ej_job_config_init(&cfg) != 0)
        return EJ_ENOMEM;
    rc = ej_console_config_check(job, json, len, &cfg, errs);
    if (rc == 0 && (c->new_json = ej_job_config_to_json(&cfg)) == NULL)
        rc = EJ_ENOMEM;
    ej_job_config_fini(&cfg);
    if (rc != 0)
        goto out;
    char path[EJ_REG_MAX_PATH_LEN + 1];
    ej_layout_path(path, sizeof path, job, EJ_LAYOUT_NODE_CONFIG, 0, NULL);
    struct ej_node_stat st;
    rc = ej_registry_get(con->reg, path, &c->old_json, NULL, &st);
    bool exists = rc == 0;
    c->old_version = exists ? st.version : -1;
    if (rc != 0 && rc != EJ_ENONODE) {
        ej__console_reg_err(rc, err, sizeof err, path);
        add_error(errs, "%s", err);
        goto out;
    }
    rc = 0;
    if (expected_version >= 0 && (!exists || st.version != expected_version)) {
        rc = EJ_EBADVERSION;
        goto out;
    }
    c->changed = !exists || strcmp(c->old_json, c->new_json) != 0;
    if (!dry_run && c->changed)
        rc = write_config(con, path, c, exists, exists ? st.version : -1);
    if (rc != 0 && rc != EJ_EBADVERSION) {
        ej__console_reg_err(rc, err, sizeof err, path);
        add_error(errs, "%s", err);
    }
out:
    if (c == &local)
        ej_console_config_change_fini(c);
    return rc;
}
