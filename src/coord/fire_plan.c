/*
 * The fire plan (fire_plan.h): a pure function from what the coordinator
 * knows to what a fire runs. Everything it reads comes in the input struct,
 * so that the decision is the same whichever thread gathered it, and a test
 * can state it item by item.
 */
#include "coord/fire_plan.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "common/check.h"
#include "ejob/error.h"

bool ej__fire_plan_may_start(const struct ej__fire_plan_in *in)
{
    return in->fire_session != 0 && in->reg_session == in->fire_session && in->started &&
           !in->stopped && !in->closed && in->connected && in->fence_open;
}

int64_t ej__fire_plan_token(bool failover_run, int64_t failover_token, int64_t running_token,
                            bool monitor_execution)
{
    if (!failover_run || failover_token == 0)
        return running_token;
    return monitor_execution && running_token > failover_token ? running_token : failover_token;
}

static enum ej__plan_verdict gate(const struct ej__fire_plan_in *in)
{
    if (!ej__fire_plan_may_start(in))
        return EJ__PLAN_FENCED;
    /* A fire due before this instance registered (again): its items were
     * others' then, who ran them or re-run them as misfires. */
    if (in->cron && in->scheduled_ms > 0 && in->scheduled_ms < in->registered_at_ms)
        return EJ__PLAN_BEFORE_REGISTRATION;
    if (in->time_diff_rc == EJ_ECONFIG)
        return EJ__PLAN_TIME_DIFF;
    if (in->time_diff_rc != 0)
        return EJ__PLAN_TIME_DIFF_FAILED;
    if (in->server_disabled)
        return EJ__PLAN_DISABLED;
    return EJ__PLAN_RUN;
}

static int cmp_taken(const void *a, const void *b)
{
    int x = ((const struct ej__plan_taken *)a)->item, y = ((const struct ej__plan_taken *)b)->item;
    return (x > y) - (x < y);
}

/* Items taken over in the session now (those of an earlier session went
 * with it), ascending, with their tokens. Taken while failover was on:
 * they run even if it was turned off since (the take is a promise). */
static int plan_failover(const struct ej__fire_plan_in *in, struct ej__fire_plan *out)
{
    if (in->ntaken == 0)
        return 0;
    struct ej__plan_taken *t = malloc(in->ntaken * sizeof *t);
    out->failover = malloc(in->ntaken * sizeof *out->failover);
    out->failover_tokens = malloc(in->ntaken * sizeof *out->failover_tokens);
    if (t == NULL || out->failover == NULL || out->failover_tokens == NULL) {
        free(t);
        return EJ_ENOMEM;
    }
    size_t k = 0;
    for (size_t i = 0; i < in->ntaken; i++)
        if (in->taken[i].session == in->session && in->session != 0)
            t[k++] = in->taken[i];
    qsort(t, k, sizeof *t, cmp_taken);
    for (size_t i = 0; i < k; i++) {
        out->failover[i] = t[i].item;
        out->failover_tokens[i] = t[i].czxid;
    }
    out->nfailover = k;
    free(t);
    return 0;
}

/* Own items (owned, not taken away by a failover, not disabled) and,
 * among them, those marked misfire. An unknown disabled mark counts as
 * disabled (never start what may be disabled); an unknown misfire mark
 * counts as marked (a promised re-run is not dropped: the running node's
 * conditional create still keeps it from running twice). */
static int plan_own(const struct ej__fire_plan_in *in, struct ej__fire_plan *out)
{
    bool own = in->want & EJ__PLAN_WANT_OWN, mis = in->want & EJ__PLAN_WANT_MISFIRED;
    if ((!own && !mis) || in->nitems == 0)
        return 0;
    if (own && (out->own = malloc(in->nitems * sizeof *out->own)) == NULL)
        return EJ_ENOMEM;
    if (mis && (out->misfired = malloc(in->nitems * sizeof *out->misfired)) == NULL)
        return EJ_ENOMEM;
    for (size_t i = 0; i < in->nitems; i++) {
        const struct ej__plan_item *it = &in->items[i];
        bool taken_away = in->failover_on && it->taken_away;
        if (!it->owned || taken_away || it->disabled != 0)
            continue;
        if (own)
            out->own[out->nown++] = it->item;
        if (mis && it->misfire != 0)
            out->misfired[out->nmisfired++] = it->item;
    }
    return 0;
}

int ej__fire_plan_make(const struct ej__fire_plan_in *in, struct ej__fire_plan *out)
{
    memset(out, 0, sizeof *out);
    EJ_ASSERT(in->nitems == 0 || in->items != NULL);
    EJ_ASSERT(in->ntaken == 0 || in->taken != NULL);
    if (in->want & EJ__PLAN_WANT_GATE) {
        out->verdict = gate(in);
        out->registered_at_ms = in->registered_at_ms;
        if (out->verdict == EJ__PLAN_TIME_DIFF || out->verdict == EJ__PLAN_TIME_DIFF_FAILED)
            snprintf(out->msg, sizeof out->msg, "%s",
                     in->time_diff_msg ? in->time_diff_msg : ej_strerror(in->time_diff_rc));
        if (out->verdict != EJ__PLAN_RUN)
            return 0;
    }
    int rc = 0;
    if (in->want & EJ__PLAN_WANT_FAILOVER)
        rc = plan_failover(in, out);
    if (rc == 0)
        rc = plan_own(in, out);
    if (rc != 0) {
        ej__fire_plan_fini(out);
        memset(out, 0, sizeof *out);
    }
    return rc;
}

void ej__fire_plan_fini(struct ej__fire_plan *p)
{
    if (p == NULL)
        return;
    free(p->failover);
    free(p->failover_tokens);
    free(p->own);
    free(p->misfired);
    p->failover = p->own = p->misfired = NULL;
    p->failover_tokens = NULL;
    p->nfailover = p->nown = p->nmisfired = 0;
}
