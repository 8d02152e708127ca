/*
 * Failover, the taking side (SPEC 4 "Failover"): a live idle instance
 * takes one recorded item at a time under leader/failover/latch (the
 * greatest first, as Java 2.1.5 does), creating sharding/{n}/failover with
 * its id and deleting the record in one transaction; it runs the item at
 * once and deletes the failover node when the run ends. The instance that
 * records a crash, when idle, takes one of the crashed items itself under
 * the same latch, without a record (ej__failover_take_crashed). Items
 * taken are remembered with the session that took them: a node of an
 * earlier session went with it.
 */
#include <pthread.h>
#include <stdlib.h>
#include <string.h>

#include "common/util.h"
#include "coord/failover_impl.h"
#include "coord/internal.h"
#include "ejob/error.h"
#include "ejob/log.h"

#define MOD "coord"

/* A take waiting for the latch gives up when the cache shows no item left
 * to take: every idle member of the job sees the same items and queues
 * for them, and all but one would get the latch for nothing. */
static bool nothing_to_take(void *arg)
{
    ej__coord *c = arg;
    char *items = ej_layout_path_dup(ej__coord_job_name(c), EJ_LAYOUT_NODE_FAILOVER_ITEMS, 0, NULL);
    char **names = NULL;
    size_t n = 0;
    bool none = items != NULL &&
                ej_tree_cache_children(ej__coord_cache(c, "leader"), items, EJ_REG_UNSORTED, &names,
                                       &n) != 0;
    none = none || (items != NULL && n == 0);
    ej_registry_free_names(names);
    free(items);
    return none;
}

/* Try to take the recorded item `name` (a child of items_path): one
 * transaction creates sharding/{n}/failover with our id and deletes the
 * record. 1 taken, 0 not (a record of an item that is gone or already
 * taken is deleted), or the connection's error. */
static int take_record(ej__coord *c, const char *items_path, const char *name, int *item)
{
    ej_registry *reg = ej__coord_registry(c);
    char *pending = ej__asprintf("%s/%s", items_path, name);
    if (pending == NULL)
        return EJ_ENOMEM;
    if (ej__layout_parse_item(name, item) != 0 || *item >= ej__coord_total_count(c)) {
        ej_registry_delete(reg, pending, -1);
        free(pending);
        return 0;
    }
    char *fo = ej_layout_path_dup(ej__coord_job_name(c), EJ_LAYOUT_NODE_ITEM_FAILOVER, *item, NULL);
    const char *me = ej__coord_instance_id(c);
    struct ej_reg_op ops[2] = {
        {.type = EJ_REG_OP_CREATE,
         .path = fo,
         .data = me,
         .len = strlen(me),
         .mode = EJ_REG_EPHEMERAL,
         .version = -1},
        {.type = EJ_REG_OP_DELETE, .path = pending, .version = -1},
    };
    size_t failed = 0;
    int mrc = fo ? ej_registry_multi(reg, ops, 2, &failed) : EJ_ENOMEM;
    int rc = 0;
    if (mrc == 0)
        rc = 1;
    else if (failed == 0 && (mrc == EJ_ENODEEXISTS || mrc == EJ_ENONODE))
        ej_registry_delete(reg, pending, -1); /* being run by someone, or the item is gone */
    else if (mrc == EJ_ECONNLOSS || mrc == EJ_ESESSIONEXPIRED)
        rc = mrc;
    free(fo);
    free(pending);
    return rc;
}

/* Under the failover latch: take the greatest recorded item that can be
 * taken (*taken, or -1 for none). 0 or the connection's error. */
static int take_one_latched(ej__coord *c, const char *items_path, int *taken)
{
    char **names = NULL;
    size_t n = 0;
    *taken = -1;
    int rc = ej_registry_children(ej__coord_registry(c), items_path, EJ_REG_SORT_DESC, &names, &n);
    if (rc == EJ_ENONODE)
        return 0;
    for (size_t i = 0; rc == 0 && i < n && *taken < 0; i++) {
        int item = -1;
        int t = take_record(c, items_path, names[i], &item);
        if (t == 1)
            *taken = item;
        else if (t != 0)
            rc = t;
    }
    ej_registry_free_names(names);
    return rc;
}

/* Remember an item taken, with the session that took it and the czxid of
 * its failover node (the run's fencing token). */
static void remember_taken(ej__coord *c, struct ej__failover_state *s, int item)
{
    ej_registry *reg = ej__coord_registry(c);
    char *fo = ej_layout_path_dup(ej__coord_job_name(c), EJ_LAYOUT_NODE_ITEM_FAILOVER, item, NULL);
    struct ej_node_stat st;
    bool ex = false;
    memset(&st, 0, sizeof st);
    if (fo)
        ej_registry_exists(reg, fo, &ex, &st);
    free(fo);
    pthread_mutex_lock(&s->mu);
    if (s->nmine == s->capmine) {
        size_t nc = s->capmine ? s->capmine * 2 : 4;
        struct taken *p = realloc(s->mine, nc * sizeof *p);
        if (p) {
            s->mine = p;
            s->capmine = nc;
        }
    }
    if (s->nmine < s->capmine)
        s->mine[s->nmine++] = (struct taken){item, ex ? st.czxid : 0, ej_registry_session_id(reg)};
    pthread_mutex_unlock(&s->mu);
}

bool ej__failover_may_take(ej__coord *c)
{
    return ej__coord_failover_state(c) != NULL && ej__coord_failover_on(c) &&
           !ej__coord_stopped(c) && ej__coord_connected(c) && ej__coord_registered(c) &&
           !ej__coord_server_disabled(c);
}

void ej__failover_took(ej__coord *c, int item)
{
    remember_taken(c, ej__coord_failover_state(c), item);
    EJ_LOG(EJ_LOG_INFO, MOD, 0, "job %s: %s took over failover item %d", ej__coord_job_name(c),
           ej__coord_instance_id(c), item);
    ej__coord_notify_failover_taken(c);
}

int ej__failover_take_crashed(ej__coord *c, int item)
{
    char *fo = ej_layout_path_dup(ej__coord_job_name(c), EJ_LAYOUT_NODE_ITEM_FAILOVER, item, NULL);
    if (fo == NULL)
        return EJ_ENOMEM;
    const char *me = ej__coord_instance_id(c);
    int rc = ej_registry_create_node(ej__coord_registry(c), fo, me, strlen(me), EJ_REG_EPHEMERAL,
                                     0, NULL);
    free(fo);
    if (rc == 0)
        return 1;
    return rc == EJ_ECONNLOSS || rc == EJ_ESESSIONEXPIRED ? rc : 0;
}

int ej__failover_take(ej__coord *c)
{
    if (!ej__failover_may_take(c))
        return 0;
    /* Steady state: the cache says nothing waits; a crowd waiting for the
     * latch leaves it when the cache says so too. */
    if (nothing_to_take(c))
        return 0;
    const char *job = ej__coord_job_name(c);
    char *items_path = ej_layout_path_dup(job, EJ_LAYOUT_NODE_FAILOVER_ITEMS, 0, NULL);
    char *latch_path = ej_layout_path_dup(job, EJ_LAYOUT_NODE_FAILOVER_LATCH, 0, NULL);
    int rc = items_path && latch_path ? 0 : EJ_ENOMEM;
    ej__latch *latch = NULL;
    if (rc == 0)
        rc = ej__latch_acquire_unless(ej__coord_registry(c), latch_path, ej__coord_wait_bound(c),
                                      nothing_to_take, c, &latch);
    if (rc == EJ_EAGAIN)
        rc = 0; /* taken by others while this one waited */
    int taken = -1;
    if (rc == 0 && latch != NULL) {
        rc = take_one_latched(c, items_path, &taken);
        ej__latch_release(latch);
    }
    if (taken >= 0)
        ej__failover_took(c, taken);
    free(items_path);
    free(latch_path);
    if (rc != 0)
        return rc;
    return taken >= 0 ? 1 : 0;
}

int ej__failover_taken(ej__coord *c, struct ej__plan_taken **out, size_t *nout)
{
    *out = NULL;
    *nout = 0;
    struct ej__failover_state *s = ej__coord_failover_state(c);
    if (s == NULL)
        return 0;
    int64_t sess = ej_registry_session_id(ej__coord_registry(c));
    pthread_mutex_lock(&s->mu);
    /* Items taken in an earlier session are gone with it. */
    size_t j = 0;
    for (size_t i = 0; i < s->nmine; i++)
        if (s->mine[i].session == sess)
            s->mine[j++] = s->mine[i];
    s->nmine = j;
    struct ej__plan_taken *t = j ? malloc(j * sizeof *t) : NULL;
    if (j && t == NULL) {
        pthread_mutex_unlock(&s->mu);
        return EJ_ENOMEM;
    }
    for (size_t i = 0; i < j; i++)
        t[i] = (struct ej__plan_taken){
            .item = s->mine[i].item, .session = s->mine[i].session, .czxid = s->mine[i].czxid};
    pthread_mutex_unlock(&s->mu);
    *out = t;
    *nout = j;
    return 0;
}

void ej__failover_done(ej__coord *c, const int *items, size_t n)
{
    struct ej__failover_state *s = ej__coord_failover_state(c);
    if (s == NULL || n == 0)
        return;
    ej_registry *reg = ej__coord_registry(c);
    int64_t sess = ej_registry_session_id(reg);
    for (size_t k = 0; k < n; k++) {
        bool ours = false;
        pthread_mutex_lock(&s->mu);
        for (size_t i = 0; i < s->nmine; i++) {
            if (s->mine[i].item != items[k])
                continue;
            ours = s->mine[i].session == sess;
            s->mine[i] = s->mine[--s->nmine];
            break;
        }
        pthread_mutex_unlock(&s->mu);
        if (!ours)
            continue; /* the node went with an earlier session */
        char *p = ej_layout_path_dup(ej__coord_job_name(c), EJ_LAYOUT_NODE_ITEM_FAILOVER,
                                      items[k], NULL);
        if (p == NULL)
            continue;
        int rc = ej_registry_delete(reg, p, -1);
        if (rc != 0 && rc != EJ_ENONODE)
            EJ_LOG(EJ_LOG_WARN, MOD, rc, "cannot delete %s: %s", p, ej_registry_errmsg(reg));
        free(p);
    }
}

void ej__failover_clear_all(ej__coord *c)
{
    struct ej__failover_state *s = ej__coord_failover_state(c);
    ej_registry *reg = ej__coord_registry(c);
    const char *job = ej__coord_job_name(c);
    if (s) {
        pthread_mutex_lock(&s->mu);
        s->nmine = 0;
        pthread_mutex_unlock(&s->mu);
    }
    int *items = NULL;
    size_t n = 0;
    ej__view_items(ej__coord_view(c), &items, &n);
    size_t removed = 0;
    for (size_t i = 0; i < n; i++) {
        char *p = ej_layout_path_dup(job, EJ_LAYOUT_NODE_ITEM_FAILOVER, items[i], NULL);
        if (p && ej_registry_delete(reg, p, -1) == 0)
            removed++;
        free(p);
    }
    free(items);
    char *ip = ej_layout_path_dup(job, EJ_LAYOUT_NODE_FAILOVER_ITEMS, 0, NULL);
    char **names = NULL;
    size_t k = 0;
    if (ip && ej_registry_children(reg, ip, EJ_REG_UNSORTED, &names, &k) == 0) {
        for (size_t i = 0; i < k; i++) {
            char *p = ej__asprintf("%s/%s", ip, names[i]);
            if (p && ej_registry_delete(reg, p, -1) == 0)
                removed++;
            free(p);
        }
        ej_registry_free_names(names);
    }
    free(ip);
    EJ_LOG(EJ_LOG_INFO, MOD, 0, "job %s: failover turned off: %zu failover nodes removed", job,
           removed);
}
