/*
 * Job, job list and server view, computed as ElasticJob 2.1.5's lifecycle
 * API computes them (JobStatisticsAPI, ShardingStatisticsAPI,
 * ServerStatisticsAPI), so a Java-run job shows the same status here.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "console/internal.h"
#include "ejob/error.h"

const char *ej_console_status_name(ej_console_status s)
{
    switch (s) {
    case EJ_CONSOLE_STATUS_OK:
        return "OK";
    case EJ_CONSOLE_STATUS_CRASHED:
        return "CRASHED";
    case EJ_CONSOLE_STATUS_DISABLED:
        return "DISABLED";
    case EJ_CONSOLE_STATUS_SHARDING_FLAG:
        return "SHARDING_FLAG";
    case EJ_CONSOLE_STATUS_LEADER_LOST:
        return "LEADER_LOST";
    }
    return "UNKNOWN";
}

const char *ej_console_item_status_name(ej_console_item_status s)
{
    switch (s) {
    case EJ_CONSOLE_ITEM_DISABLED:
        return "DISABLED";
    case EJ_CONSOLE_ITEM_RUNNING:
        return "RUNNING";
    case EJ_CONSOLE_ITEM_SHARDING_FLAG:
        return "SHARDING_FLAG";
    case EJ_CONSOLE_ITEM_PENDING:
        return "PENDING";
    }
    return "UNKNOWN";
}

#define PATH(var, job, node, item, name)                                                           \
    char var[EJ_REG_MAX_PATH_LEN + 1];                                                             \
    ej_layout_path(var, sizeof var, job, node, item, name)

static bool instance_live(const struct ej_console_job *j, const char *id)
{
    for (size_t i = 0; i < j->instance_count; i++)
        if (strcmp(j->instances[i].id, id) == 0)
            return true;
    return false;
}

static int load_servers(ej_console *con, struct ej_console_job *j)
{
    PATH(path, j->name, EJ_LAYOUT_NODE_SERVERS, 0, NULL);
    char **names = NULL;
    size_t n = 0;
    int rc = ej__console_children(con, path, &names, &n);
    if (rc != 0)
        return rc;
    j->servers = calloc(n ? n : 1, sizeof(*j->servers));
    if (j->servers == NULL) {
        ej_registry_free_names(names);
        return EJ_ENOMEM;
    }
    for (size_t i = 0; i < n && rc == 0; i++) {
        if (!ej_layout_is_segment(names[i]))
            continue;
        PATH(p, j->name, EJ_LAYOUT_NODE_SERVER, 0, names[i]);
        char *data = NULL;
        if ((rc = ej__console_get_opt(con, p, &data)) != 0)
            break;
        struct ej_console_server *s = &j->servers[j->server_count++];
        s->ip = strdup(names[i]);
        s->disabled = data != NULL && strcmp(data, EJ_LAYOUT_SERVER_DISABLED) == 0;
        free(data);
        if (s->ip == NULL)
            rc = EJ_ENOMEM;
    }
    ej_registry_free_names(names);
    return rc;
}

static int load_instances(ej_console *con, struct ej_console_job *j)
{
    PATH(path, j->name, EJ_LAYOUT_NODE_INSTANCES, 0, NULL);
    char **names = NULL;
    size_t n = 0;
    int rc = ej__console_children(con, path, &names, &n);
    if (rc != 0)
        return rc;
    j->instances = calloc(n ? n : 1, sizeof(*j->instances));
    if (j->instances == NULL) {
        ej_registry_free_names(names);
        return EJ_ENOMEM;
    }
    for (size_t i = 0; i < n && rc == 0; i++) {
        if (!ej_layout_is_segment(names[i]))
            continue;
        PATH(p, j->name, EJ_LAYOUT_NODE_INSTANCE, 0, names[i]);
        char *data = NULL;
        rc = ej__console_get(con, p, &data, NULL);
        if (rc == EJ_ENONODE) {
            rc = 0; /* went away meanwhile */
            continue;
        }
        if (rc != 0)
            break;
        struct ej_console_instance *in = &j->instances[j->instance_count++];
        in->id = strdup(names[i]);
        in->trigger_pending = strcmp(data, EJ_LAYOUT_INSTANCE_TRIGGER) == 0;
        free(data);
        if (in->id == NULL)
            rc = EJ_ENOMEM;
    }
    ej_registry_free_names(names);
    for (size_t s = 0; s < j->server_count; s++)
        for (size_t i = 0; i < j->instance_count; i++)
            if (ej_layout_instance_on_server(j->instances[i].id, j->servers[s].ip))
                j->servers[s].instance_count++;
    return rc;
}

static int cmp_int(const void *a, const void *b)
{
    int x = *(const int *)a, y = *(const int *)b;
    return (x > y) - (x < y);
}

/* Items to show: 0..count-1 plus any other numeric child of sharding/. */
static int item_list(ej_console *con, struct ej_console_job *j, int **items, size_t *n)
{
    PATH(path, j->name, EJ_LAYOUT_NODE_SHARDING, 0, NULL);
    char **names = NULL;
    size_t count = 0;
    int rc = ej__console_children(con, path, &names, &count);
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
        if (*end != '\0' || names[i][0] < '0' || names[i][0] > '9' ||
            v > EJ_CONFIG_MAX_SHARDING_TOTAL_COUNT || (size_t)v < total)
            continue;
        list[k++] = (int)v;
    }
    ej_registry_free_names(names);
    qsort(list, k, sizeof(int), cmp_int);
    *items = list;
    *n = k;
    return 0;
}

static int flag(ej_console *con, const char *job, ej_layout_node node, int item, bool *out)
{
    PATH(p, job, node, item, NULL);
    return ej__console_exists(con, p, out);
}

static int load_item(ej_console *con, struct ej_console_job *j, struct ej_console_item *it,
                     bool brief)
{
    PATH(p, j->name, EJ_LAYOUT_NODE_ITEM_INSTANCE, it->item, NULL);
    int rc = ej__console_get_opt(con, p, &it->owner);
    if (rc != 0)
        return rc;
    it->owner_live = it->owner != NULL && instance_live(j, it->owner);
    if (brief)
        return 0;
    if ((rc = flag(con, j->name, EJ_LAYOUT_NODE_ITEM_RUNNING, it->item, &it->running)) != 0 ||
        (rc = flag(con, j->name, EJ_LAYOUT_NODE_ITEM_MISFIRE, it->item, &it->misfire)) != 0 ||
        (rc = flag(con, j->name, EJ_LAYOUT_NODE_ITEM_DISABLED, it->item, &it->disabled)) != 0)
        return rc;
    PATH(f, j->name, EJ_LAYOUT_NODE_ITEM_FAILOVER, it->item, NULL);
    if ((rc = ej__console_get_opt(con, f, &it->failover)) != 0)
        return rc;
    if (j->failover_waiting > 0) {
        PATH(fo, j->name, EJ_LAYOUT_NODE_FAILOVER_ITEMS, 0, NULL);
        char waiting[EJ_REG_MAX_PATH_LEN + 16];
        snprintf(waiting, sizeof waiting, "%s/%d", fo, it->item);
        if ((rc = ej__console_exists(con, waiting, &it->failover_waiting)) != 0)
            return rc;
    }
    it->parameter = ej_sharding_params_get(&j->params, it->item);
    /* ShardingStatisticsAPI's order of precedence. */
    if (it->disabled)
        it->status = EJ_CONSOLE_ITEM_DISABLED;
    else if (it->running)
        it->status = EJ_CONSOLE_ITEM_RUNNING;
    else if (!it->owner_live)
        it->status = EJ_CONSOLE_ITEM_SHARDING_FLAG;
    else
        it->status = EJ_CONSOLE_ITEM_PENDING;
    return 0;
}

static int load_items(ej_console *con, struct ej_console_job *j, bool brief)
{
    int *list = NULL;
    size_t n = 0;
    int rc = item_list(con, j, &list, &n);
    if (rc != 0)
        return rc;
    j->items = calloc(n ? n : 1, sizeof(*j->items));
    if (j->items == NULL) {
        free(list);
        return EJ_ENOMEM;
    }
    for (size_t i = 0; i < n && rc == 0; i++) {
        struct ej_console_item *it = &j->items[j->item_count++];
        it->item = list[i];
        rc = load_item(con, j, it, brief);
    }
    free(list);
    return rc;
}

static ej_console_status compute_status(const struct ej_console_job *j)
{
    if (j->instance_count == 0)
        return EJ_CONSOLE_STATUS_CRASHED;
    size_t disabled = 0;
    for (size_t i = 0; i < j->server_count; i++)
        if (j->servers[i].disabled)
            disabled++;
    if (disabled == j->server_count)
        return EJ_CONSOLE_STATUS_DISABLED;
    if (j->leader != NULL && !j->leader_live)
        return EJ_CONSOLE_STATUS_LEADER_LOST;
    /* Owners must all be live instances, and something must be assigned. */
    size_t owners = 0;
    for (size_t i = 0; i < j->item_count; i++) {
        const struct ej_console_item *it = &j->items[i];
        if (it->owner == NULL || it->owner[0] == '\0')
            continue;
        owners++;
        if (!it->owner_live)
            return EJ_CONSOLE_STATUS_SHARDING_FLAG;
    }
    return owners == 0 ? EJ_CONSOLE_STATUS_SHARDING_FLAG : EJ_CONSOLE_STATUS_OK;
}

static int load_leader(ej_console *con, struct ej_console_job *j, bool brief)
{
    PATH(path, j->name, EJ_LAYOUT_NODE_ELECTION_INSTANCE, 0, NULL);
    int rc = ej__console_get_opt(con, path, &j->leader);
    if (rc != 0)
        return rc;
    j->leader_live = j->leader != NULL && instance_live(j, j->leader);
    if (brief)
        return 0;
    PATH(nec, j->name, EJ_LAYOUT_NODE_SHARDING_NECESSARY, 0, NULL);
    PATH(proc, j->name, EJ_LAYOUT_NODE_SHARDING_PROCESSING, 0, NULL);
    PATH(fo, j->name, EJ_LAYOUT_NODE_FAILOVER_ITEMS, 0, NULL);
    if ((rc = ej__console_exists(con, nec, &j->sharding_necessary)) != 0 ||
        (rc = ej__console_exists(con, proc, &j->sharding_processing)) != 0)
        return rc;
    char **names = NULL;
    size_t n = 0;
    if ((rc = ej__console_children(con, fo, &names, &n)) == 0)
        j->failover_waiting = n;
    ej_registry_free_names(names);
    return rc;
}

int ej_console_job_java_instances(ej_console *con, const char *job, char ***ids, size_t *n)
{
    if (con == NULL || ids == NULL || n == NULL || !ej_layout_is_job_name(job))
        return EJ_EINVAL;
    *ids = NULL;
    *n = 0;
    PATH(path, job, EJ_LAYOUT_NODE_INSTANCES, 0, NULL);
    char **names = NULL;
    size_t count = 0;
    int rc = ej__console_children(con, path, &names, &count);
    if (rc == EJ_ENONODE)
        return 0;
    if (rc != 0)
        return rc;
    size_t k = 0;
    for (size_t i = 0; i < count && rc == 0; i++) {
        char *marker = ej_layout_marker_path_dup(job, names[i]);
        char *data = NULL;
        int grc = marker ? ej__console_get(con, marker, &data, NULL) : EJ_ENOMEM;
        free(data);
        free(marker);
        if (grc == EJ_ENONODE)
            names[k++] = names[i]; /* no marker: not an ejob instance */
        else if (grc == 0)
            free(names[i]);
        else
            rc = grc;
    }
    if (rc != 0) {
        for (size_t i = 0; i < k; i++)
            free(names[i]);
        free(names);
        return rc;
    }
    if (names != NULL)
        names[k] = NULL;
    *ids = names;
    *n = k;
    return 0;
}

int ej_console_job_load(ej_console *con, const char *job, bool brief, struct ej_console_job *out)
{
    if (out == NULL)
        return EJ_EINVAL;
    memset(out, 0, sizeof(*out));
    out->config_version = -1;
    if (con == NULL || !ej_layout_is_job_name(job))
        return EJ_EINVAL;
    out->name = strdup(job);
    if (out->name == NULL)
        return EJ_ENOMEM;
    PATH(path, job, EJ_LAYOUT_NODE_JOB, 0, NULL);
    bool exists = false;
    int rc = ej__console_exists(con, path, &exists);
    if (rc != 0)
        return rc;
    if (!exists)
        return EJ_ENONODE;
    if ((rc = ej__console_load_config(con, out)) != 0 || (rc = load_servers(con, out)) != 0 ||
        (rc = load_instances(con, out)) != 0 || (rc = load_leader(con, out, brief)) != 0 ||
        (rc = load_items(con, out, brief)) != 0 ||
        (!brief && (rc = ej__console_load_shut_down(con, out)) != 0))
        return rc;
    out->status = compute_status(out);
    return 0;
}

void ej_console_job_fini(struct ej_console_job *j)
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
    for (size_t i = 0; i < j->instance_count; i++)
        free(j->instances[i].id);
    free(j->instances);
    free(j->leader);
    for (size_t i = 0; i < j->item_count; i++) {
        free(j->items[i].owner);
        free(j->items[i].failover);
    }
    free(j->items);
    ej__console_shut_down_fini(j);
    memset(j, 0, sizeof(*j));
    j->config_version = -1;
}

int ej_console_jobs(ej_console *con, struct ej_console_job **jobs, size_t *count)
{
    if (con == NULL || jobs == NULL || count == NULL)
        return EJ_EINVAL;
    *jobs = NULL;
    *count = 0;
    char **names = NULL;
    size_t n = 0;
    int rc = ej__console_children_asc(con, "/", &names, &n);
    if (rc != 0)
        return rc;
    struct ej_console_job *list = calloc(n ? n : 1, sizeof(*list));
    if (list == NULL) {
        ej_registry_free_names(names);
        return EJ_ENOMEM;
    }
    size_t k = 0;
    for (size_t i = 0; i < n; i++) {
        if (!ej_layout_is_job_name(names[i]))
            continue;
        struct ej_console_job *j = &list[k];
        rc = ej_console_job_load(con, names[i], true, j);
        if (rc == EJ_ENONODE || (rc == 0 && j->config_raw == NULL)) {
            /* Gone meanwhile, or not a job (no config), as the Java console skips it. */
            ej_console_job_fini(j);
            rc = 0;
            continue;
        }
        if (rc != 0) {
            ej_console_job_fini(j);
            break;
        }
        k++;
    }
    ej_registry_free_names(names);
    if (rc != 0) {
        ej_console_jobs_free(list, k);
        return rc;
    }
    *jobs = list;
    *count = k;
    return 0;
}

void ej_console_jobs_free(struct ej_console_job *jobs, size_t count)
{
    for (size_t i = 0; jobs != NULL && i < count; i++)
        ej_console_job_fini(&jobs[i]);
    free(jobs);
}
