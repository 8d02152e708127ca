#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "ejob/cron.h"
#include "ejob/error.h"
#include "common/util.h"
#include "cli/cli_util.h"
#include "cli/jobinfo.h"

const char *ejcli_job_status_name(ejcli_job_status s)
{
    switch (s) {
    case EJCLI_JOB_OK:
        return "OK";
    case EJCLI_JOB_CRASHED:
        return "CRASHED";
    case EJCLI_JOB_DISABLED:
        return "DISABLED";
    case EJCLI_JOB_SHARDING_FLAG:
        return "SHARDING_FLAG";
    }
    return "UNKNOWN";
}

static int cron_check(const char *cron, const char *time_zone, char *err, size_t errlen)
{
    (void)time_zone; /* the config module checks the zone itself */
    return ej_cron_parse(cron, NULL, err, errlen);
}

void ejcli_install_cron_checker(void)
{
    ej_config_set_cron_checker(cron_check);
}

void ejcli_instance_ip(const char *id, char *buf, size_t len)
{
    const char *sep = strstr(id, "@-@");
    size_t n = sep != NULL ? (size_t)(sep - id) : strlen(id);
    if (n >= len)
        n = len - 1;
    memcpy(buf, id, n);
    buf[n] = '\0';
}

static bool node_exists(ej_registry *reg, const char *path, int *rc)
{
    bool exists = false;
    int r = ej_registry_exists(reg, path, &exists, NULL);
    if (r != 0 && *rc == 0)
        *rc = r;
    return exists;
}

static int children(ej_registry *reg, const char *path, char ***names, size_t *count)
{
    int rc = ej_registry_children(reg, path, EJ_REG_SORT_DESC, names, count);
    if (rc == EJ_ENONODE) {
        *names = NULL;
        *count = 0;
        return 0;
    }
    return rc;
}

static bool instance_live(const struct ejcli_job *j, const char *id)
{
    for (size_t i = 0; i < j->instance_count; i++)
        if (strcmp(j->instances[i].id, id) == 0)
            return true;
    return false;
}

static int load_config(ej_registry *reg, struct ejcli_job *j)
{
    char path[600];
    snprintf(path, sizeof(path), "/%s/config", j->name);
    int rc = ejcli_get_opt(reg, path, &j->config_raw);
    if (rc != 0)
        return rc;
    if (j->config_raw == NULL) {
        snprintf(j->config_error, sizeof(j->config_error), "config: node %s is missing", path);
        return 0;
    }
    ejcli_install_cron_checker();
    if (ej_job_config_init(&j->cfg) != 0)
        return EJ_ENOMEM;
    char err[400];
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

static int load_servers(ej_registry *reg, struct ejcli_job *j)
{
    char path[600];
    snprintf(path, sizeof(path), "/%s/servers", j->name);
    char **names = NULL;
    size_t n = 0;
    int rc = children(reg, path, &names, &n);
    if (rc != 0)
        return rc;
    j->servers = calloc(n ? n : 1, sizeof(*j->servers));
    if (j->servers == NULL) {
        ej_registry_free_names(names);
        return EJ_ENOMEM;
    }
    for (size_t i = 0; i < n && rc == 0; i++) {
        char p[900];
        snprintf(p, sizeof(p), "%s/%s", path, names[i]);
        char *data = NULL;
        rc = ejcli_get_opt(reg, p, &data);
        if (rc != 0)
            break;
        struct ejcli_server *s = &j->servers[j->server_count++];
        s->ip = strdup(names[i]);
        s->disabled = data != NULL && strcmp(data, "DISABLED") == 0;
        free(data);
        if (s->ip == NULL)
            rc = EJ_ENOMEM;
    }
    ej_registry_free_names(names);
    return rc;
}

static int load_instances(ej_registry *reg, struct ejcli_job *j)
{
    char path[600];
    snprintf(path, sizeof(path), "/%s/instances", j->name);
    char **names = NULL;
    size_t n = 0;
    int rc = children(reg, path, &names, &n);
    if (rc != 0)
        return rc;
    j->instances = calloc(n ? n : 1, sizeof(*j->instances));
    if (j->instances == NULL) {
        ej_registry_free_names(names);
        return EJ_ENOMEM;
    }
    for (size_t i = 0; i < n && rc == 0; i++) {
        char p[900];
        snprintf(p, sizeof(p), "%s/%s", path, names[i]);
        char *data = NULL;
        rc = ej_registry_get(reg, p, &data, NULL, NULL);
        if (rc == EJ_ENONODE) {
            rc = 0; /* went away meanwhile */
            continue;
        }
        if (rc != 0)
            break;
        struct ejcli_instance *in = &j->instances[j->instance_count++];
        in->id = strdup(names[i]);
        in->data = data;
        if (in->id == NULL)
            rc = EJ_ENOMEM;
    }
    ej_registry_free_names(names);
    for (size_t s = 0; s < j->server_count; s++) {
        char prefix[300];
        snprintf(prefix, sizeof(prefix), "%s@-@", j->servers[s].ip);
        for (size_t i = 0; i < j->instance_count; i++)
            if (strncmp(j->instances[i].id, prefix, strlen(prefix)) == 0)
                j->servers[s].instance_count++;
    }
    return rc;
}

static int cmp_int(const void *a, const void *b)
{
    int x = *(const int *)a, y = *(const int *)b;
    return (x > y) - (x < y);
}

/* Items to show: 0..count-1 plus any other numeric child of sharding/. */
static int item_list(ej_registry *reg, struct ejcli_job *j, int **items, size_t *n)
{
    char path[600];
    snprintf(path, sizeof(path), "/%s/sharding", j->name);
    char **names = NULL;
    size_t count = 0;
    int rc = children(reg, path, &names, &count);
    if (rc != 0)
        return rc;
    size_t total = j->config_parsed && j->cfg.sharding_total_count > 0
                       ? (size_t)j->cfg.sharding_total_count
                       : 0;
    int *list = calloc(total + count + 1, sizeof(int));
    if (list == NULL) {
        ej_registry_free_names(names);
        return EJ_ENOMEM;
    }
    size_t k = 0;
    for (size_t i = 0; i < total; i++)
        list[k++] = (int)i;
    for (size_t i = 0; i < count; i++) {
        char *end;
        long v = strtol(names[i], &end, 10);
        if (*end != '\0' || names[i][0] == '\0' || v < 0 || v > 1000000)
            continue;
        if ((size_t)v < total)
            continue;
        list[k++] = (int)v;
    }
    ej_registry_free_names(names);
    qsort(list, k, sizeof(int), cmp_int);
    *items = list;
    *n = k;
    return 0;
}

static int load_items(ej_registry *reg, struct ejcli_job *j, bool brief)
{
    int *list = NULL;
    size_t n = 0;
    int rc = item_list(reg, j, &list, &n);
    if (rc != 0)
        return rc;
    j->items = calloc(n ? n : 1, sizeof(*j->items));
    if (j->items == NULL) {
        free(list);
        return EJ_ENOMEM;
    }
    for (size_t i = 0; i < n && rc == 0; i++) {
        struct ejcli_item *it = &j->items[j->item_count++];
        it->item = list[i];
        char p[700];
        snprintf(p, sizeof(p), "/%s/sharding/%d/instance", j->name, it->item);
        rc = ejcli_get_opt(reg, p, &it->owner);
        if (rc != 0)
            break;
        it->owner_live = it->owner != NULL && instance_live(j, it->owner);
        if (brief)
            continue;
        snprintf(p, sizeof(p), "/%s/sharding/%d/running", j->name, it->item);
        it->running = node_exists(reg, p, &rc);
        snprintf(p, sizeof(p), "/%s/sharding/%d/misfire", j->name, it->item);
        it->misfire = node_exists(reg, p, &rc);
        snprintf(p, sizeof(p), "/%s/sharding/%d/disabled", j->name, it->item);
        it->disabled = node_exists(reg, p, &rc);
        snprintf(p, sizeof(p), "/%s/sharding/%d/failover", j->name, it->item);
        if (rc == 0)
            rc = ejcli_get_opt(reg, p, &it->failover);
        it->parameter = ej_sharding_params_get(&j->params, it->item);
        /* ShardingStatisticsAPI's order of precedence. */
        if (it->disabled)
            it->status = "DISABLED";
        else if (it->running)
            it->status = "RUNNING";
        else if (!it->owner_live)
            it->status = "SHARDING_FLAG";
        else
            it->status = "PENDING";
    }
    free(list);
    return rc;
}

static ejcli_job_status compute_status(const struct ejcli_job *j)
{
    if (j->instance_count == 0)
        return EJCLI_JOB_CRASHED;
    size_t disabled = 0;
    for (size_t i = 0; i < j->server_count; i++)
        if (j->servers[i].disabled)
            disabled++;
    if (disabled == j->server_count)
        return EJCLI_JOB_DISABLED;
    /* Owners must all be live instances, and something must be assigned. */
    size_t owners = 0;
    for (size_t i = 0; i < j->item_count; i++) {
        const struct ejcli_item *it = &j->items[i];
        if (it->owner == NULL || it->owner[0] == '\0')
            continue;
        owners++;
        if (!it->owner_live)
            return EJCLI_JOB_SHARDING_FLAG;
    }
    return owners == 0 ? EJCLI_JOB_SHARDING_FLAG : EJCLI_JOB_OK;
}

int ejcli_job_load(ej_registry *reg, const char *job, bool brief, struct ejcli_job *out)
{
    memset(out, 0, sizeof(*out));
    out->name = strdup(job);
    if (out->name == NULL)
        return EJ_ENOMEM;
    char path[600];
    snprintf(path, sizeof(path), "/%s", job);
    int rc = 0;
    if (!node_exists(reg, path, &rc))
        return rc != 0 ? rc : EJ_ENONODE;
    if ((rc = load_config(reg, out)) != 0 || (rc = load_servers(reg, out)) != 0 ||
        (rc = load_instances(reg, out)) != 0)
        return rc;
    snprintf(path, sizeof(path), "/%s/leader/election/instance", job);
    if ((rc = ejcli_get_opt(reg, path, &out->leader)) != 0)
        return rc;
    if ((rc = load_items(reg, out, brief)) != 0)
        return rc;
    if (!brief) {
        snprintf(path, sizeof(path), "/%s/leader/sharding/necessary", job);
        out->sharding_necessary = node_exists(reg, path, &rc);
        snprintf(path, sizeof(path), "/%s/leader/sharding/processing", job);
        out->sharding_processing = node_exists(reg, path, &rc);
        snprintf(path, sizeof(path), "/%s/leader/failover/items", job);
        char **names = NULL;
        size_t n = 0;
        if (rc == 0 && (rc = children(reg, path, &names, &n)) == 0)
            out->failover_waiting = n;
        ej_registry_free_names(names);
        if (rc != 0)
            return rc;
    }
    out->status = compute_status(out);
    return 0;
}

void ejcli_job_free(struct ejcli_job *j)
{
    if (j == NULL)
        return;
    free(j->name);
    free(j->config_raw);
    if (j->config_raw != NULL || j->config_parsed)
        ej_job_config_fini(&j->cfg);
    ej_sharding_params_fini(&j->params);
    for (size_t i = 0; i < j->server_count; i++)
        free(j->servers[i].ip);
    free(j->servers);
    for (size_t i = 0; i < j->instance_count; i++) {
        free(j->instances[i].id);
        free(j->instances[i].data);
    }
    free(j->instances);
    free(j->leader);
    for (size_t i = 0; i < j->item_count; i++) {
        free(j->items[i].owner);
        free(j->items[i].failover);
    }
    free(j->items);
    memset(j, 0, sizeof(*j));
}
