/*
 * Kills: `ejob kill` and the console write a request under the job's
 * kills/ node (ej_console_kill); every ejob instance of the job keeps a
 * cache of that node and, for each request created after it started
 * watching, sets the kill flag of its matching items running right then
 * (ej__exec_context_limit's flag: a script's group gets SIGTERM, then
 * SIGKILL after the grace; an HTTP transfer is aborted; a C job reads it).
 * Java 2.1.5 instances never read kills/ (docs/execution.md).
 */
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "ejob/console.h"
#include "ejob/log.h"
#include "ejob/registry.h"
#include "runtime/internal.h"

#define MOD "job"

void ej__kill_track(struct ej_job *job, struct ej__running *r)
{
    pthread_mutex_lock(&job->kill_mu);
    r->next = job->running;
    job->running = r;
    pthread_mutex_unlock(&job->kill_mu);
}

void ej__kill_untrack(struct ej_job *job, struct ej__running *r)
{
    pthread_mutex_lock(&job->kill_mu);
    for (struct ej__running **p = &job->running; *p != NULL; p = &(*p)->next)
        if (*p == r) {
            *p = r->next;
            break;
        }
    pthread_mutex_unlock(&job->kill_mu);
}

size_t ej__kill_items(struct ej_job *job, int item, const char *by)
{
    size_t n = 0;
    pthread_mutex_lock(&job->kill_mu);
    for (struct ej__running *r = job->running; r != NULL; r = r->next) {
        if (item >= 0 && r->item != item)
            continue;
        snprintf(r->killed_by, EJ__KILLED_BY_LEN, "%s", by);
        atomic_store(r->kill, true);
        n++;
    }
    pthread_mutex_unlock(&job->kill_mu);
    return n;
}

/* Is this instance one the request names? */
static bool targets_me(const struct ej_job *job, const struct ej_console_kill_request *q)
{
    if (q->instance[0] != '\0' && strcmp(q->instance, job->me) != 0)
        return false;
    if (q->server[0] != '\0' && !ej_layout_instance_on_server(job->me, q->server))
        return false;
    return true;
}

static void on_kills_event(ej_tree_cache *cache, const struct ej_tree_event *ev, void *user)
{
    (void)cache;
    struct ej_job *job = user;
    if (ev->type == EJ_TREE_INITIALIZED) {
        job->kill_ready = true;
        return;
    }
    if (ev->type != EJ_TREE_NODE_ADDED || ev->stat == NULL || ev->path == NULL)
        return;
    const char *name = strrchr(ev->path, '/');
    if (name == NULL || strncmp(name, "/kill-", 6) != 0)
        return;
    /* Requests there before the first load, or seen again when the cache
     * reloads after a new session, were for runs before these. */
    bool fresh = job->kill_ready && ev->stat->czxid > job->kill_seen_zxid;
    if (ev->stat->czxid > job->kill_seen_zxid)
        job->kill_seen_zxid = ev->stat->czxid;
    if (!fresh)
        return;
    struct ej_console_kill_request q;
    if (!ej_console_kill_parse(ev->data, &q)) {
        EJ_LOG(EJ_LOG_WARN, MOD, 0, "job %s: kill request %s is not one: ignored", job->name,
               name + 1);
        return;
    }
    if (!targets_me(job, &q))
        return;
    size_t n = ej__kill_items(job, q.item, q.by);
    EJ_LOG(EJ_LOG_INFO, MOD, 0, "job %s: kill request %s by %s (item %d): %zu item(s) killed",
           job->name, name + 1, q.by, q.item, n);
}

int ej__kill_watch_start(struct ej_job *job)
{
    char path[EJ_REG_MAX_PATH_LEN + 1];
    if (ej_layout_path(path, sizeof path, job->name, EJ_LAYOUT_NODE_KILLS, 0, NULL) < 0)
        return EJ_EINVAL;
    ej_tree_cache *c = NULL;
    int rc = ej_tree_cache_create(job->reg, path, on_kills_event, job, &c);
    if (rc == 0)
        rc = ej_tree_cache_start(c);
    if (rc != 0) {
        ej_tree_cache_destroy(c);
        return rc;
    }
    job->kill_cache = c;
    return 0;
}

void ej__kill_watch_stop(struct ej_job *job)
{
    ej_tree_cache_destroy(job->kill_cache);
    job->kill_cache = NULL;
}
