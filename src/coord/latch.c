/*
 * A mutex compatible with Curator's LeaderLatch as ElasticJob uses it
 * (reference section 3): a new latch per critical section, released right
 * after it. Java and ejob contenders on the same latch path serialise.
 */
#include <inttypes.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "common/util.h"
#include "coord/internal.h"
#include "ejob/error.h"
#include "ejob/log.h"

#define MOD "coord"

struct ej__latch {
    ej_registry *reg;
    char *dir;  /* latch path */
    char *node; /* own node path */
    char uuid[37];
};

/* Create the own node (Curator: creatingParentContainersIfNeeded,
 * withProtection, EPHEMERAL_SEQUENTIAL). After a connection loss the node
 * may exist: protection finds it by its UUID. */
static int create_node(struct ej__latch *l)
{
    char prefix[EJ__LATCH_PREFIX_LEN + 1];
    ej__layout_latch_node_prefix(l->uuid, prefix, sizeof prefix);
    char *path = ej__asprintf("%s/%s", l->dir, prefix);
    if (path == NULL)
        return EJ_ENOMEM;
    int rc = EJ_ECONNLOSS;
    for (int attempt = 0; attempt < 5; attempt++) {
        char *actual = NULL;
        rc = ej_registry_create_node(l->reg, path, NULL, 0, EJ_REG_EPHEMERAL_SEQUENTIAL,
                                     EJ_REG_CONTAINER_PARENTS, &actual);
        if (rc == 0) {
            free(l->node);
            l->node = actual;
            break;
        }
        if (rc == EJ_ENONODE)
            continue; /* the server reaped an empty container parent meanwhile */
        if (rc != EJ_ECONNLOSS)
            break;
        char **names = NULL;
        size_t n = 0;
        if (ej_registry_children(l->reg, l->dir, EJ_REG_UNSORTED, &names, &n) == 0) {
            long i = ej__layout_latch_find(names, n, l->uuid);
            if (i >= 0) {
                free(l->node);
                l->node = ej__asprintf("%s/%s", l->dir, names[i]);
                ej_registry_free_names(names);
                rc = l->node ? 0 : EJ_ENOMEM;
                break;
            }
            ej_registry_free_names(names);
        }
    }
    free(path);
    return rc;
}

static void delete_node(struct ej__latch *l)
{
    if (l->node == NULL)
        return;
    /* Curator's delete().guaranteed(): retried until it succeeds; ours is
     * retried by the registry, and the session's end removes it anyway. */
    int rc = ej_registry_delete(l->reg, l->node, -1);
    if (rc != 0 && rc != EJ_ENONODE)
        EJ_LOG(EJ_LOG_WARN, MOD, rc, "latch: cannot delete %s: %s", l->node,
               ej_registry_errmsg(l->reg));
    free(l->node);
    l->node = NULL;
}

int ej__latch_acquire(ej_registry *reg, const char *latch_path, int timeout_ms, ej__latch **out)
{
    if (reg == NULL || latch_path == NULL || out == NULL)
        return EJ_EINVAL;
    *out = NULL;
    if (ej_registry_on_dispatch_thread(reg))
        return EJ_EINVAL;
    struct ej__latch *l = calloc(1, sizeof *l);
    if (l == NULL)
        return EJ_ENOMEM;
    l->reg = reg;
    l->dir = strdup(latch_path);
    if (l->dir == NULL) {
        free(l);
        return EJ_ENOMEM;
    }
    ej__layout_uuid4(l->uuid);
    int64_t start = ej__mono_ms();
    int64_t deadline = start + (timeout_ms > 0 ? timeout_ms : 0);
    bool warned = false;
    int rc = create_node(l);
    while (rc == 0) {
        char **names = NULL;
        size_t n = 0;
        rc = ej_registry_children(reg, l->dir, EJ_REG_UNSORTED, &names, &n);
        if (rc == EJ_ENONODE) {
            /* The parent is gone, so our node is too: start over. */
            rc = create_node(l);
            continue;
        }
        if (rc != 0)
            break;
        ej__layout_latch_sort(names, n);
        const char *own = strrchr(l->node, '/') + 1;
        long idx = -1;
        for (size_t i = 0; i < n; i++)
            if (strcmp(names[i], own) == 0)
                idx = (long)i;
        if (idx < 0) {
            ej_registry_free_names(names);
            rc = create_node(l); /* Curator's reset() */
            continue;
        }
        if (idx == 0) {
            ej_registry_free_names(names);
            *out = l;
            EJ_LOG(EJ_LOG_DEBUG, MOD, 0, "latch %s acquired as %s after %" PRId64 " ms", l->dir,
                   own, ej__mono_ms() - start);
            return 0;
        }
        char *pred = ej__asprintf("%s/%s", l->dir, names[idx - 1]);
        ej_registry_free_names(names);
        if (pred == NULL) {
            rc = EJ_ENOMEM;
            break;
        }
        if (ej__mono_ms() >= deadline) {
            EJ_LOG(EJ_LOG_WARN, MOD, EJ_ETIMEDOUT,
                   "latch %s: gave up after %" PRId64 " ms waiting for %s to be released", l->dir,
                   ej__mono_ms() - start, pred);
            free(pred);
            rc = EJ_ETIMEDOUT;
            break;
        }
        ej__waiter *w = ej__waiter_new();
        if (w == NULL) {
            free(pred);
            rc = EJ_ENOMEM;
            break;
        }
        struct ej_node_stat st;
        int wrc = ej_registry_get_watch(reg, pred, ej__waiter_watch, w, NULL, NULL, &st);
        if (wrc != 0) {
            ej__waiter_unref(w); /* no watch was set */
            ej__waiter_unref(w);
            free(pred);
            if (wrc == EJ_ENONODE)
                continue; /* Curator: NONODE from getData -> getChildren again */
            rc = wrc;
            break;
        }
        if (st.ephemeral_owner == 0) {
            /* A persistent node can never be released by a latch client:
             * something that is not a contender left it (EJ#730). */
            EJ_LOG(EJ_LOG_WARN, MOD, 0,
                   "latch %s: deleting %s, a persistent node no contender can release", l->dir,
                   pred);
            ej_registry_delete(reg, pred, -1);
        } else {
            int64_t waited = ej__mono_ms() - start;
            if (!warned && waited > 2000) {
                warned = true;
                EJ_LOG(EJ_LOG_WARN, MOD, 0,
                       "latch %s: waited %" PRId64 " ms for %s (session 0x%" PRIx64
                       ") to release it",
                       l->dir, waited, pred, (uint64_t)st.ephemeral_owner);
            } else {
                EJ_LOG(EJ_LOG_DEBUG, MOD, 0, "latch %s: waiting for %s", l->dir, pred);
            }
            ej__waiter_wait(w, deadline);
        }
        ej__waiter_unref(w);
        free(pred);
    }
    delete_node(l);
    free(l->dir);
    free(l);
    return rc;
}

void ej__latch_release(ej__latch *l)
{
    if (l == NULL)
        return;
    delete_node(l);
    free(l->dir);
    free(l);
}

const char *ej__latch_node(const ej__latch *l)
{
    return l ? l->node : NULL;
}
