/*
 * The config node: write it at start-up (step 1, with the nodes of a job
 * new to ZooKeeper); parse, validate and check it; apply a new valid one
 * (keeping the last good one otherwise) and tell the runtime what changed.
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
#include "ejob/error.h"
#include "ejob/log.h"
#include "ejob/sharding.h"
#include "schedule/internal.h"

#define MOD "coord"

/* ------------------------------------------------------------------------ */
/* Configuration                                                             */

/* The parent of a path (caller frees), NULL without memory. */
static char *parent_dup(const char *path)
{
    const char *slash = strrchr(path, '/');
    return slash ? ej__asprintf("%.*s", (int)(slash - path), path) : NULL;
}

/* Start-up step 1: write the config when absent or overwrite, and give
 * what ZooKeeper holds (caller frees *data). A job new to ZooKeeper costs
 * one transaction: its node and config, and with them what steps 3 and 4
 * would otherwise create while the caches watch (each creation then costs
 * every cache above it a read): servers/, servers/{ip} with the value of a
 * new job (DISABLED when the config says so) and instances/; and the
 * parents of the election and failover latches, persistent (latch.c says
 * why not containers), so that neither the first election nor the first
 * failover is refused for want of them. What was written is what
 * ZooKeeper holds. A job already there costs one read, and
 * with overwrite one write more when the bytes differ. Anything unexpected goes the general way:
 * exists, persist, read back (retried). *fresh tells that the
 * transaction created the job. */
int ej__coord_config_sync(ej__coord *c, const struct ej_job_config *local, char **data, size_t *len,
                          bool *fresh)
{
    *fresh = false;
    char *json = ej_job_config_to_json(local);
    if (json == NULL)
        return EJ_ENOMEM;
    size_t jl = strlen(json);
    const char *srv = local->disabled ? EJ_LAYOUT_SERVER_DISABLED : EJ_LAYOUT_SERVER_ENABLED;
    char *election = parent_dup(c->p_el_latch), *failover = parent_dup(c->p_fo_latch);
    if (election == NULL || failover == NULL) {
        free(json);
        free(election);
        free(failover);
        return EJ_ENOMEM;
    }
    struct ej_reg_op ops[] = {
        {.type = EJ_REG_OP_CREATE, .path = c->p_root, .mode = EJ_REG_PERSISTENT},
        {.type = EJ_REG_OP_CREATE,
         .path = c->p_config,
         .data = json,
         .len = jl,
         .mode = EJ_REG_PERSISTENT},
        {.type = EJ_REG_OP_CREATE, .path = c->p_servers, .mode = EJ_REG_PERSISTENT},
        {.type = EJ_REG_OP_CREATE,
         .path = c->p_my_server,
         .data = srv,
         .len = strlen(srv),
         .mode = EJ_REG_PERSISTENT},
        {.type = EJ_REG_OP_CREATE, .path = c->p_instances, .mode = EJ_REG_PERSISTENT},
        {.type = EJ_REG_OP_CREATE, .path = c->p_leader, .mode = EJ_REG_PERSISTENT},
        {.type = EJ_REG_OP_CREATE, .path = election, .mode = EJ_REG_PERSISTENT},
        {.type = EJ_REG_OP_CREATE, .path = c->p_el_latch, .mode = EJ_REG_PERSISTENT},
        {.type = EJ_REG_OP_CREATE, .path = failover, .mode = EJ_REG_PERSISTENT},
        {.type = EJ_REG_OP_CREATE, .path = c->p_fo_latch, .mode = EJ_REG_PERSISTENT},
    };
    int rc = ej_registry_multi(c->reg, ops, sizeof ops / sizeof ops[0], NULL);
    free(election);
    free(failover);
    if (rc == EJ_ENODEEXISTS && ops[0].result == EJ_ENODEEXISTS) {
        /* The job's node exists: the config most likely too. An overwrite
         * that would write the bytes already there is not written: every
         * member's cache would read the node again (a fleet starting with
         * overwrite on rewrites it once per instance). */
        rc = ej_registry_get(c->reg, c->p_config, data, len, NULL);
        bool same = rc == 0 && *len == jl && memcmp(*data, json, jl) == 0;
        if (rc == 0 && (same || !local->overwrite)) {
            free(json);
            return 0;
        }
        if (rc == 0) {
            free(*data);
            *data = NULL;
            rc = ej_registry_set(c->reg, c->p_config, json, jl, -1, NULL);
        }
    } else if (rc == 0) {
        *fresh = true;
    }
    if (rc != 0) {
        bool exists = false;
        rc = ej_registry_exists(c->reg, c->p_config, &exists, NULL);
        if (rc == 0 && (!exists || local->overwrite))
            rc = ej_registry_persist(c->reg, c->p_config, json, jl);
        if (rc == 0)
            rc = ej_registry_get(c->reg, c->p_config, data, len, NULL);
        free(json);
        return rc;
    }
    *data = json; /* written just now: what ZooKeeper holds */
    *len = jl;
    return 0;
}

/* Parse and validate a config node's bytes (the one validator: cron and
 * zone included). */
int ej__coord_parse_config(const char *data, size_t len, struct ej_job_config *out, char *err,
                           size_t errlen)
{
    int rc = ej_job_config_init(out);
    if (rc != 0)
        return rc;
    rc = ej_job_config_from_json(data, len, out, err, errlen);
    if (rc == 0)
        rc = ej_job_config_validate(out, err, errlen);
    if (rc != 0) {
        ej_job_config_fini(out);
        return rc == EJ_ENOMEM ? rc : EJ_ECONFIG;
    }
    return 0;
}

static void clear_failover_task(ej__coord *c, void *arg)
{
    EJ_ASSERT_SERIAL(c);
    (void)arg;
    ej__failover_clear_all(c);
}

static void apply_config(ej__coord *c, const char *data, size_t len)
{
    EJ_ASSERT_SERIAL(c);
    struct ej_job_config n;
    char err[512] = "";
    int rc = ej__coord_parse_config(data, len, &n, err, sizeof err);
    if (rc != 0) {
        EJ_LOG(EJ_LOG_ERROR, MOD, rc,
               "job %s: the config in ZooKeeper is invalid and is not applied (keeping the last "
               "good one): %s",
               c->job, err);
        snprintf(c->err, sizeof c->err, "invalid config in ZooKeeper, not applied: %s", err);
        c->err_is_config = true;
        return;
    }
    unsigned changed = 0;
    if (c->err_is_config) {
        c->err[0] = '\0';
        c->err_is_config = false;
    }
    if (c->have_cfg) {
        if (n.job_name && c->cfg.job_name && strcmp(n.job_name, c->cfg.job_name) != 0) {
            EJ_LOG(EJ_LOG_ERROR, MOD, EJ_ECONFIG, "job %s: config names job \"%s\"; not applied",
                   c->job, n.job_name);
            ej_job_config_fini(&n);
            return;
        }
        if (strcmp(n.cron, c->cfg.cron) != 0 ||
            strcmp(n.time_zone ? n.time_zone : "", c->cfg.time_zone ? c->cfg.time_zone : "") != 0)
            changed |= EJ__CFG_CRON;
        if (n.sharding_total_count != c->cfg.sharding_total_count)
            changed |= EJ__CFG_COUNT;
        if (n.failover != c->cfg.failover)
            changed |= EJ__CFG_FAILOVER;
        if (!ej_job_config_equal(&n, &c->cfg))
            changed |= EJ__CFG_OTHER;
        if (n.job_type != c->cfg.job_type) {
            EJ_LOG(EJ_LOG_WARN, MOD, 0,
                   "job %s: jobType changed to %s in ZooKeeper; this instance keeps %s", c->job,
                   ej_job_type_name(n.job_type), ej_job_type_name(c->cfg.job_type));
            n.job_type = c->cfg.job_type;
        }
        ej_job_config_fini(&c->cfg);
    } else {
        changed = EJ__CFG_CRON | EJ__CFG_COUNT | EJ__CFG_FAILOVER | EJ__CFG_OTHER;
    }
    c->cfg = n;
    c->have_cfg = true;
    c->cfg_gen++;
    ej__coord_publish(c); /* the runtime's hook below reads it */
    bool started = c->started && !atomic_load(&c->closed) && !c->stopped;
    bool failover = n.failover;
    if (!started || changed == 0)
        return;
    EJ_LOG(EJ_LOG_INFO, MOD, 0, "job %s: new config applied (cron \"%s\", %d items%s)", c->job,
           n.cron, n.sharding_total_count, failover ? ", failover" : "");
    ej__view_set_failover(c->view, failover);
    if (changed & EJ__CFG_COUNT)
        ej__coord_leader_set_necessary(c);
    if ((changed & EJ__CFG_FAILOVER) && !failover)
        ej__coord_post(c, clear_failover_task, NULL);
    if (c->hooks.on_config) {
        struct ej_job_config copy;
        if (ej_job_config_copy(&copy, &c->cfg) == 0) {
            c->hooks.on_config(c->hooks.user, &copy, changed);
            ej_job_config_fini(&copy);
        }
    }
}

/* On the serial queue (posted by the listener below). */
static void on_config_event_body(ej__coord *c, const struct ej_tree_event *ev)
{
    if (c->started && !atomic_load(&c->closed))
        apply_config(c, ev->data, ev->len);
}

/* The config cache's listener (dispatch thread). A removed config node is
 * checked a moment later (the whole job may be going). */
void ej__coord_on_config_event(ej_tree_cache *cache, const struct ej_tree_event *ev, void *user)
{
    (void)cache;
    ej__coord *c = user;
    EJ_ASSERT_DISPATCH(c);
    if (!ej__coord_enter(c))
        return;
    if (ev->type == EJ_TREE_INITIALIZED || strcmp(ev->path, c->p_config) != 0) {
        /* not the config node */
    } else if (ev->type == EJ_TREE_NODE_REMOVED) {
        ej__coord_post_after(c, 300, ej__coord_root_check, NULL);
    } else if (ej__coord_listening(c)) {
        ej__coord_post_event(c, ev, on_config_event_body);
    }
    ej__coord_done(c);
}
