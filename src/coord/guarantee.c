/*
 * Distribute-once listeners (ElasticJob's
 * AbstractDistributeOnceElasticJobListener and GuaranteeService): every
 * instance records its items under guarantee/{started|completed}; the one
 * that completes the set runs the callback, then deletes the node, which
 * releases the others.
 *
 * ElasticJob 2.1.5 lets every instance that sees the set complete run the
 * callback (two can, when their writes cross); here the run is claimed with
 * a conditional write on guarantee/{phase} first, so exactly one instance
 * runs it.
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

static char *phase_dir(ej__coord *c, bool completed)
{
    return ej_layout_path_dup(ej__coord_job_name(c),
                               completed ? EJ_LAYOUT_NODE_GUARANTEE_COMPLETED
                                         : EJ_LAYOUT_NODE_GUARANTEE_STARTED,
                               0, NULL);
}

/* Wait until dir is gone or the deadline passes. 0 or EJ_ETIMEDOUT. */
static int wait_gone(ej_registry *reg, const char *dir, int64_t deadline)
{
    for (;;) {
        ej__waiter *w = ej__waiter_new();
        if (w == NULL)
            return EJ_ENOMEM;
        bool ex = false;
        int rc = ej_registry_exists_watch(reg, dir, ej__waiter_watch, w, &ex, NULL);
        if (rc != 0) {
            ej__waiter_unref(w);
            ej__waiter_unref(w);
            return rc;
        }
        if (!ex) {
            ej__waiter_unref(w); /* the watch (for a create) keeps its own ref */
            return 0;
        }
        bool fired = ej__waiter_wait(w, deadline);
        ej__waiter_unref(w);
        if (!fired)
            return EJ_ETIMEDOUT;
    }
}

int ej__guarantee_enter(ej__coord *c, bool completed, const int *items, size_t n, int total,
                        int64_t timeout_ms)
{
    ej_registry *reg = ej__coord_registry(c);
    if (ej_registry_on_dispatch_thread(reg))
        return EJ_EINVAL;
    char *dir = phase_dir(c, completed);
    if (dir == NULL)
        return EJ_ENOMEM;
    int rc = 0;
    for (size_t i = 0; i < n && rc == 0; i++) {
        char *p = ej_layout_path_dup(ej__coord_job_name(c),
                                      completed ? EJ_LAYOUT_NODE_GUARANTEE_COMPLETED_ITEM
                                                : EJ_LAYOUT_NODE_GUARANTEE_STARTED_ITEM,
                                      items[i], NULL);
        if (p == NULL) {
            rc = EJ_ENOMEM;
            break;
        }
        rc = ej_registry_create_node(reg, p, NULL, 0, EJ_REG_PERSISTENT, EJ_REG_CREATE_PARENTS,
                                     NULL);
        if (rc == EJ_ENODEEXISTS)
            rc = 0;
        free(p);
    }
    if (rc != 0)
        goto out;
    struct ej_node_stat st;
    char *claim = NULL;
    rc = ej_registry_get(reg, dir, &claim, NULL, &st);
    if (rc == EJ_ENONODE) {
        rc = 0; /* the winner finished already */
        goto out;
    }
    if (rc != 0)
        goto out;
    bool unclaimed = claim[0] == '\0';
    free(claim);
    if (unclaimed && st.num_children >= total) {
        /* All items are in: claim the callback. The data names the winner;
         * the version check makes one of several simultaneous claims win,
         * the data makes later ones see the claim. */
        int src = ej_registry_set(reg, dir, ej__coord_instance_id(c),
                                  strlen(ej__coord_instance_id(c)), st.version, NULL);
        if (src == 0) {
            rc = 1;
            goto out;
        }
        if (src != EJ_EBADVERSION && src != EJ_ENONODE) {
            rc = src;
            goto out;
        }
    }
    int64_t deadline = ej__mono_ms() + (timeout_ms > 0 ? timeout_ms : ej__coord_wait_bound(c));
    rc = wait_gone(reg, dir, deadline);
    if (rc == EJ_ETIMEDOUT) {
        EJ_LOG(EJ_LOG_WARN, MOD, rc,
               "job %s: distribute-once listener timed out waiting for %s: not every item "
               "reported in %" PRId64 " ms",
               ej__coord_job_name(c), dir, timeout_ms);
        ej_registry_delete_recursive(reg, dir);
    }
out:
    free(dir);
    return rc;
}

void ej__guarantee_finish(ej__coord *c, bool completed)
{
    char *dir = phase_dir(c, completed);
    if (dir == NULL)
        return;
    int rc = ej_registry_delete_recursive(ej__coord_registry(c), dir);
    if (rc != 0)
        EJ_LOG(EJ_LOG_WARN, MOD, rc, "cannot delete %s: %s", dir,
               ej_registry_errmsg(ej__coord_registry(c)));
    free(dir);
}
