/*
 * A fire's requests to its coordinator: the ZooKeeper half of a fire.
 *
 * ej__coord_fire_plan gathers, once, what the plan needs (the
 * coordinator's state in one look, the view's items, the items taken
 * over), does the fire's ZooKeeper checks (stale running nodes, clock
 * skew) and hands everything to the pure ej__fire_plan_make (fire_plan.c).
 * ej__coord_fire_begin registers the start of a batch (the running nodes'
 * transaction, which yields the fencing tokens) and
 * ej__coord_fire_done the end of a failover run. runtime/fire.c runs the
 * items and posts the events; it asks nothing else of the coordinator
 * about which items run.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "coord/coord_impl.h"
#include "ejob/error.h"
#include "ejob/log.h"

#define MOD "coord"

/* The coordinator's part of the plan's input: its published snapshot. */
static void gather_state(ej__coord *c, struct ej__fire_plan_in *in)
{
    struct ej__coord_snap *s = ej__coord_snap_get(c);
    in->reg_session = s->reg_session;
    in->started = s->started;
    in->stopped = s->stopped;
    in->closed = atomic_load(&c->closed);
    in->connected = atomic_load(&c->connected);
    in->registered_at_ms = s->reg_at_ms;
    in->failover_on = s->failover_on;
    ej__coord_snap_unref(s);
    in->session = ej_registry_session_id(c->reg);
    in->fence_open =
        in->reg_session != 0 && ej_registry_fence(c->reg, in->reg_session) == EJ_REG_FENCE_OPEN;
}

/* The fire's ZooKeeper checks, once the fire may run at all: running
 * nodes a lost request left, then the clock skew (maxTimeDiffSeconds). */
static void zk_checks(ej__coord *c, int max_time_diff_seconds, struct ej__fire_plan_in *in,
                      char *msg, size_t msglen)
{
    ej__running_cleanup(c);
    if (max_time_diff_seconds >= 0) {
        in->time_diff_rc = ej__running_check_time_diff(c, max_time_diff_seconds, msg, msglen);
        if (in->time_diff_rc != 0 && in->time_diff_rc != EJ_ECONFIG)
            snprintf(msg, msglen,
                     "the clock could not be compared with ZooKeeper's (maxTimeDiffSeconds "
                     "%d): %s",
                     max_time_diff_seconds, ej_strerror(in->time_diff_rc));
        in->time_diff_msg = msg;
    }
    in->server_disabled = ej__coord_server_disabled(c);
}

int ej__coord_fire_plan(ej__coord *c, const struct ej__fire_request *req, struct ej__fire_plan *out)
{
    struct ej__fire_plan_in in = {.want = req->want,
                                  .fire_session = req->fire_session,
                                  .cron = req->cron,
                                  .scheduled_ms = req->scheduled_ms};
    gather_state(c, &in);
    char msg[256] = "";
    if (req->want & EJ__PLAN_WANT_GATE) {
        /* The checks that need no request first: a fenced fire or one
         * due before the registration costs ZooKeeper nothing. */
        struct ej__fire_plan_in gate = in;
        gate.want = EJ__PLAN_WANT_GATE;
        int rc = ej__fire_plan_make(&gate, out);
        if (rc != 0 || out->verdict != EJ__PLAN_RUN)
            return rc;
        zk_checks(c, req->max_time_diff_seconds, &in, msg, sizeof msg);
    }
    struct ej__plan_item *items = NULL;
    struct ej__plan_taken *taken = NULL;
    int rc = 0;
    if (req->want & (EJ__PLAN_WANT_OWN | EJ__PLAN_WANT_MISFIRED))
        rc = ej__running_plan_items(c, in.failover_on, req->want & EJ__PLAN_WANT_MISFIRED, &items,
                                    &in.nitems);
    if (rc == 0 && (req->want & EJ__PLAN_WANT_FAILOVER))
        rc = ej__failover_taken(c, &taken, &in.ntaken);
    in.items = items;
    in.taken = taken;
    if (rc == 0)
        rc = ej__fire_plan_make(&in, out);
    else
        memset(out, 0, sizeof *out);
    free(items);
    free(taken);
    return rc;
}

enum ej__begin_result ej__coord_fire_begin(ej__coord *c, const struct ej__fire_begin *b, bool *ok,
                                           int64_t *tokens, int64_t *session_out, int *err)
{
    *err = 0;
    *session_out = 0;
    struct ej__fire_plan_in in = {.fire_session = b->fire_session};
    gather_state(c, &in);
    if (!ej__fire_plan_may_start(&in))
        return EJ__BEGIN_FENCED;
    int rc;
    if (b->monitor_execution) {
        rc = ej__running_begin(c, b->items, b->n, b->fired_ms, ok, tokens, session_out);
    } else {
        /* Without running nodes nothing else proves this instance still
         * holds its session: ask (a zombie starts nothing). */
        rc = ej__running_check_alive(c);
        for (size_t i = 0; i < b->n; i++) {
            ok[i] = rc == 0;
            tokens[i] = 0;
        }
    }
    if (rc != 0) {
        *err = rc;
        return EJ__BEGIN_FAILED;
    }
    if (b->monitor_execution && *session_out != b->fire_session) {
        /* The running nodes were made in a newer session than the fire's:
         * this fire is from before the loss. Abandon it. */
        int *mine = malloc(b->n * sizeof *mine);
        size_t k = 0;
        for (size_t i = 0; mine && i < b->n; i++)
            if (ok[i])
                mine[k++] = b->items[i];
        ej__running_complete(c, mine, k, *session_out);
        free(mine);
        return EJ__BEGIN_SESSION_CHANGED;
    }
    for (size_t i = 0; i < b->n; i++)
        tokens[i] = ej__fire_plan_token(b->failover_tokens != NULL,
                                        b->failover_tokens ? b->failover_tokens[i] : 0, tokens[i],
                                        b->monitor_execution);
    return EJ__BEGIN_STARTED;
}

void ej__coord_fire_done(ej__coord *c, const struct ej__fire_done *d)
{
    if (d->nfailover > 0)
        ej__failover_done(c, d->failover, d->nfailover);
}
