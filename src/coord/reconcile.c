/*
 * ElasticJob's ReconcileService: the leader sets necessary when the
 * sharding names instances that are gone.
 */
#include <inttypes.h>
#include <pthread.h>
#include <stdarg.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "common/util.h"
#include "coord/coord_impl.h"
#include "ejob/config.h"
#include "ejob/cron.h"
#include "ejob/error.h"
#include "ejob/log.h"
#include "ejob/sharding.h"
#include "schedule/internal.h"

#define MOD "coord"

/* ------------------------------------------------------------------------ */
/* Reconcile (ElasticJob's ReconcileService)                                  */

static void reconcile_task(ej__coord *c, void *arg);

static int64_t reconcile_interval(ej__coord *c)
{
    EJ_ASSERT_SERIAL(c);
    if (c->reconcile_override_ms > 0)
        return c->reconcile_override_ms;
    int m = c->have_cfg ? c->cfg.reconcile_interval_minutes : 0;
    return m >= 1 ? (int64_t)m * 60000 : 0;
}

void ej__coord_post_reconcile(ej__coord *c)
{
    int64_t iv = reconcile_interval(c);
    /* Checked at least every minute, as ElasticJob does, so an interval
     * turned on by a config change takes effect. */
    int64_t delay = iv > 0 && iv < 60000 ? iv : 60000;
    ej__coord_post_after(c, (int)delay, reconcile_task, NULL);
}

static void reconcile_task(ej__coord *c, void *arg)
{
    (void)arg;
    EJ_ASSERT_SERIAL(c);
    bool go = c->started && !c->stopped && atomic_load(&c->connected);
    int64_t iv = reconcile_interval(c);
    int64_t now = ej__mono_ms();
    if (go && iv > 0 && now - c->last_reconcile_ms >= iv - 50) {
        c->last_reconcile_ms = now;
        if (ej__coord_is_leader(c) && !ej_tree_cache_exists(c->c_leader, c->p_necessary, NULL)) {
            int *items = NULL;
            size_t n = 0;
            bool stale = false;
            ej__view_items(c->view, &items, &n);
            for (size_t i = 0; i < n && !stale; i++) {
                struct ej__view_item it;
                if (ej__view_get(c->view, items[i], &it) != 0)
                    continue;
                if (it.owner == NULL || !ej__coord_instance_listed(c, it.owner))
                    stale = true;
                ej__view_item_fini(&it);
            }
            free(items);
            if (stale) {
                EJ_LOG(EJ_LOG_INFO, MOD, 0,
                       "job %s: sharding names instances that are gone: start reconciling", c->job);
                ej__coord_set_necessary(c);
            }
        }
    }
    ej__coord_post_reconcile(c);
}
