/*
 * The fire plan: which items a fire runs, with which fencing tokens, or why
 * it runs nothing, decided by a pure function of what the coordinator knows
 * (struct ej__fire_plan_in). No ZooKeeper, no lock, no clock: the inputs are
 * gathered once (fire_request.c, ej__coord_fire_plan) and the decision is
 * tested on its own (tests/unit/fire_plan_test.c).
 *
 * Part of coord/internal.h (included from there); this header alone is
 * enough for a test of the plan.
 */
#ifndef EJ_COORD_FIRE_PLAN_H
#define EJ_COORD_FIRE_PLAN_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

/* Why a fire runs nothing (EJ__PLAN_RUN: it runs what the plan lists). The
 * runtime maps these onto its not-run reasons (runtime/fire.c). */
enum ej__plan_verdict {
    EJ__PLAN_RUN = 0,
    EJ__PLAN_FENCED,              /* not registered in the fire's session, or fenced */
    EJ__PLAN_BEFORE_REGISTRATION, /* a cron fire due before this instance registered */
    EJ__PLAN_TIME_DIFF,           /* maxTimeDiffSeconds exceeded (msg says by how much) */
    EJ__PLAN_TIME_DIFF_FAILED,    /* the clock could not be compared with ZooKeeper's */
    EJ__PLAN_DISABLED,            /* this server is disabled */
};

/* What a request wants planned (bits). */
enum {
    EJ__PLAN_WANT_GATE = 1u << 0,     /* the checks before anything runs (the verdict) */
    EJ__PLAN_WANT_FAILOVER = 1u << 1, /* the items this instance took over, with tokens */
    EJ__PLAN_WANT_OWN = 1u << 2,      /* the instance's own items for this fire */
    EJ__PLAN_WANT_MISFIRED = 1u << 3, /* its own items marked misfire */
};

/* One item of sharding/ as the coordinator's view knows it. */
struct ej__plan_item {
    int item;
    bool owned;           /* sharding/N/instance names this instance */
    bool taken_away;      /* sharding/N/failover owned by a session (failover on) */
    signed char disabled; /* sharding/N/disabled: 1 / 0; -1 unknown (counts as disabled) */
    signed char misfire;  /* sharding/N/misfire: 1 / 0; -1 unknown (counts as marked) */
};

/* An item this instance took over (failover.c), in the session it took it. */
struct ej__plan_taken {
    int item;
    int64_t session;
    int64_t czxid; /* of its sharding/N/failover node: the fencing token */
};

struct ej__fire_plan_in {
    unsigned want; /* EJ__PLAN_WANT_* */
    /* The fire. */
    int64_t fire_session; /* the session the fire began in */
    bool cron;            /* a cron fire (not a trigger or a failover run) */
    int64_t scheduled_ms; /* its fire time (epoch ms); 0: none */
    /* The coordinator. */
    int64_t reg_session; /* the session our instance node was created in; 0 none */
    int64_t session;     /* the registry's session now */
    bool started, stopped, closed, connected;
    bool fence_open;                   /* the registry's fence is OPEN for reg_session */
    int64_t registered_at_ms;          /* wall ms of the registration */
    int time_diff_rc;                  /* the clock-skew check: 0, EJ_ECONFIG, another error */
    const char *time_diff_msg;         /* its message (borrowed); NULL: none */
    bool server_disabled;              /* servers/{ip} is DISABLED */
    bool failover_on;                  /* the config in force has failover */
    const struct ej__plan_item *items; /* sharding/ as the view knows it, ascending */
    size_t nitems;
    const struct ej__plan_taken *taken; /* failover.c's items taken over, any order */
    size_t ntaken;
};

struct ej__fire_plan {
    enum ej__plan_verdict verdict;
    int *failover;            /* taken over in this session, ascending */
    int64_t *failover_tokens; /* failover[i]'s fencing token */
    size_t nfailover;
    int *own; /* own items: owned, not taken away, not disabled */
    size_t nown;
    int *misfired; /* own items marked misfire */
    size_t nmisfired;
    int64_t registered_at_ms; /* the registration (EJ__PLAN_BEFORE_REGISTRATION) */
    char msg[256];            /* the clock-skew message (EJ__PLAN_TIME_DIFF*) */
};

/* May items start for a fire begun in in->fire_session? (registered in it,
 * started, not stopped, connected, fence OPEN). */
bool ej__fire_plan_may_start(const struct ej__fire_plan_in *in);

/*
 * The plan for in (lists only for the parts in->want names; with
 * EJ__PLAN_WANT_GATE a verdict other than EJ__PLAN_RUN leaves the lists
 * empty). The checks, in ElasticJob's order: fenced, registered before the
 * fire time, clock skew, server disabled. Returns 0 or EJ_ENOMEM (out
 * zeroed). Caller frees with ej__fire_plan_fini. Pure.
 */
int ej__fire_plan_make(const struct ej__fire_plan_in *in, struct ej__fire_plan *out);
void ej__fire_plan_fini(struct ej__fire_plan *p);

/*
 * The fencing token an item runs with: its running node's czxid, or for a
 * failover run the failover node's czxid, unless the running node (written
 * later, monitorExecution) is newer. 0: none.
 */
int64_t ej__fire_plan_token(bool failover_run, int64_t failover_token, int64_t running_token,
                            bool monitor_execution);

#endif
