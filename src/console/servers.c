/* The server view: every IP named under some job's servers/, with its jobs
 * (ElasticJob's ServerStatisticsAPI). */
#include <stdlib.h>
#include <string.h>

#include "console/internal.h"
#include "ejob/error.h"

static struct ej_console_server_view *find_or_add(struct ej_console_server_view **list, size_t *n,
                                                  size_t *cap, const char *ip)
{
    for (size_t i = 0; i < *n; i++)
        if (strcmp((*list)[i].ip, ip) == 0)
            return &(*list)[i];
    if (*n == *cap) {
        size_t ncap = *cap ? *cap * 2 : 8;
        struct ej_console_server_view *grown = realloc(*list, ncap * sizeof(**list));
        if (grown == NULL)
            return NULL;
        *list = grown;
        *cap = ncap;
    }
    struct ej_console_server_view *v = &(*list)[*n];
    memset(v, 0, sizeof(*v));
    v->ip = strdup(ip);
    if (v->ip == NULL)
        return NULL;
    (*n)++;
    return v;
}

static int add_job(struct ej_console_server_view *v, const struct ej_console_job *j,
                   const struct ej_console_server *s)
{
    struct ej_console_server_job *grown = realloc(v->jobs, (v->job_count + 1) * sizeof(*v->jobs));
    if (grown == NULL)
        return EJ_ENOMEM;
    v->jobs = grown;
    struct ej_console_server_job *sj = &v->jobs[v->job_count];
    sj->job = strdup(j->name);
    if (sj->job == NULL)
        return EJ_ENOMEM;
    sj->disabled = s->disabled;
    sj->instance_count = s->instance_count;
    sj->job_status = j->status;
    v->job_count++;
    v->instance_count += s->instance_count;
    if (s->disabled)
        v->disabled_count++;
    return 0;
}

static int cmp_view(const void *a, const void *b)
{
    return strcmp(((const struct ej_console_server_view *)a)->ip,
                  ((const struct ej_console_server_view *)b)->ip);
}

int ej_console_servers(ej_console *con, struct ej_console_server_view **servers, size_t *count)
{
    if (con == NULL || servers == NULL || count == NULL)
        return EJ_EINVAL;
    *servers = NULL;
    *count = 0;
    struct ej_console_job *jobs = NULL;
    size_t njobs = 0;
    int rc = ej_console_jobs(con, &jobs, &njobs);
    if (rc != 0)
        return rc;
    struct ej_console_server_view *list = NULL;
    size_t n = 0, cap = 0;
    /* Jobs come by name, so each server's jobs are in name order too. */
    for (size_t i = 0; i < njobs && rc == 0; i++)
        for (size_t s = 0; s < jobs[i].server_count && rc == 0; s++) {
            struct ej_console_server_view *v = find_or_add(&list, &n, &cap, jobs[i].servers[s].ip);
            rc = v != NULL ? add_job(v, &jobs[i], &jobs[i].servers[s]) : EJ_ENOMEM;
        }
    ej_console_jobs_free(jobs, njobs);
    if (rc != 0) {
        ej_console_servers_free(list, n);
        return rc;
    }
    if (n > 1)
        qsort(list, n, sizeof(*list), cmp_view);
    *servers = list;
    *count = n;
    return 0;
}

void ej_console_servers_free(struct ej_console_server_view *servers, size_t count)
{
    for (size_t i = 0; servers != NULL && i < count; i++) {
        for (size_t k = 0; k < servers[i].job_count; k++)
            free(servers[i].jobs[k].job);
        free(servers[i].jobs);
        free(servers[i].ip);
    }
    free(servers);
}
