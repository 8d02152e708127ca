/*
 * ejob: ElasticJob-Lite for C. The umbrella header (every public header)
 * and the job API that ties them together.
 *
 * A program creates one registry (registry.h: a ZooKeeper session rooted at
 * a namespace), then one ej_job per job: a configuration (config.h, the
 * fields ElasticJob 2.1.5 stores in `/{job}/config`) and what to run
 * (job.h: simple and dataflow callbacks; script and http jobs run what the
 * configuration names). ej_job_start() registers the instance in ZooKeeper
 * as an ElasticJob-Lite 2.1.5 peer (SPEC section 2 and 4): it takes part in
 * the leader election, gets shard items, fires on its cron schedule, takes
 * over items of instances that die, and obeys the console's operations.
 *
 *     ej_registry *reg;
 *     struct ej_registry_opts ro = {.servers = "127.0.0.1:2181",
 *                                   .namespace_ = "ejob-demo"};
 *     ej_registry_create(&reg, &ro);
 *     struct ej_job_config cfg;
 *     ej_job_config_init(&cfg);
 *     ej_job_config_set_str(&cfg.job_name, "orders");
 *     ej_job_config_set_str(&cfg.cron, "0/5 * * * * ?");
 *     cfg.sharding_total_count = 3;
 *     struct ej_job_def def = {.type = EJ_JOB_TYPE_SIMPLE, .simple = my_fn};
 *     struct ej_job_opts jo = {.def = &def};
 *     ej_job *job;
 *     ej_job_create(reg, &cfg, &jo, &job);
 *     ej_job_start(job);
 *     ...
 *     ej_job_shutdown(job);
 *     ej_job_destroy(job);
 *     ej_registry_destroy(reg);
 *
 * examples/embed.c is a complete program.
 *
 * Threads: every function here may be called from any thread, except where
 * it says it must not run inside one of the job's own callbacks. Callbacks
 * (items, listeners, event sinks) run on ejob's threads.
 */
#ifndef EJOB_EJOB_H
#define EJOB_EJOB_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "ejob/common.h"
#include "ejob/error.h"
#include "ejob/log.h"
#include "ejob/registry.h"

#include "ejob/config.h"
#include "ejob/cron.h"
#include "ejob/event.h"
#include "ejob/job.h"
#include "ejob/jobs.h"
#include "ejob/metrics.h"
#include "ejob/monitor.h"
#include "ejob/sharding.h"

struct ej_job_config;
struct ej_job_def;
struct ej_event;
struct ej_event_bus;
struct ej_shard_contexts_info;

/* A job running on this instance. Opaque. */
typedef struct ej_job ej_job;

/*
 * A distribute-once listener (ElasticJob's
 * AbstractDistributeOnceElasticJobListener): of all instances running a fire
 * of the job, exactly one calls before_last once every item has started
 * and after_last once every item has completed. The instances wait for it
 * (bounded by the timeouts). info describes this instance's part of the
 * fire; it is borrowed for the call.
 */
struct ej_distribute_once_listener {
    void (*before_last)(const struct ej_shard_contexts_info *info, void *user); /* may be NULL */
    void (*after_last)(const struct ej_shard_contexts_info *info, void *user);  /* may be NULL */
    void *user;
    int64_t started_timeout_ms;   /* <= 0: the job's wait bound */
    int64_t completed_timeout_ms; /* <= 0: the job's wait bound */
};

/* Options of ej_job_create. Zero-initialise; every field is optional
 * except def for SIMPLE and DATAFLOW jobs. */
struct ej_job_opts {
    /* What the program gives (job.h). Borrowed: keep it (and what it
     * points to) alive and unchanged until ej_job_destroy(). Required for
     * SIMPLE and DATAFLOW jobs. What a job runs otherwise (command line,
     * URI, timeouts, streaming, the error handler and executor by name)
     * is always the configuration in force (so a console edit applies); a
     * def given for SCRIPT and HTTP jobs contributes a custom error
     * handler, a fixed executor, listeners, the script environment, http
     * headers and output caps. */
    const struct ej_job_def *def;
    /* Events of this job go to this bus (borrowed; it must outlive the
     * job). NULL: none, until ej_job_subscribe() creates a private bus. */
    struct ej_event_bus *events;
    /* Optional distribute-once listener (borrowed). */
    const struct ej_distribute_once_listener *once_listener;
    /* How long ej_job_shutdown() waits for running items before asking
     * them to stop (the cancellation flag; SIGTERM to scripts). 0: 30000. */
    int64_t drain_timeout_ms;
    /* true: items keep running when the ZooKeeper session is lost
     * (ElasticJob's behaviour). false (default): they are asked to stop,
     * since another instance may take them over. */
    bool keep_running_on_lost;
    /* Bound on every wait (election, sharding by the leader, running items
     * before resharding, latches). 0: twice the session timeout plus 2 s. */
    int wait_bound_ms;
    /* Override the instance id "{ip}@-@{pid}" (e.g. several instances of a
     * job in one process, in tests). NULL: computed. */
    const char *instance_id;
    /* Override the IP (else EJOB_IP from the environment, else the host's
     * address as ElasticJob picks it). NULL: computed. */
    const char *ip;
    /* Do not schedule the cron: the job runs only when triggered
     * (ej_job_trigger, ej_job_trigger_all, the console). The configuration
     * still needs a valid cron for ElasticJob peers and validation. */
    bool manual;
    /* Tests only: reconcile every this many ms instead of
     * reconcileIntervalMinutes. 0: off. */
    int64_t reconcile_interval_ms;
    /* Called once when the job stops on its own: an operator shut this
     * instance down (by_operator; its instance node deleted), or the job
     * was removed from ZooKeeper. The process lives on; only a new job
     * (ej_job_create) runs it here again. Runs on one of the job's threads,
     * which may call the registry's synchronous operations; it must not
     * block otherwise nor destroy the job. NULL: none. */
    void (*on_stopped)(ej_job *job, bool by_operator, void *user);
    void *on_stopped_user;
};

/*
 * Create a job. Nothing is written to ZooKeeper until ej_job_start().
 *
 * reg:  a registry (borrowed; destroy every job before it).
 * cfg:  the local configuration (copied). It is validated here; it is
 *       written to ZooKeeper at start if the node is absent or cfg->overwrite
 *       is set, and the job then always runs with what ZooKeeper holds.
 * opts: may be NULL only for SCRIPT / HTTP jobs.
 * out:  receives the job; the caller owns it (ej_job_destroy).
 * Returns 0; EJ_EINVAL (NULL arguments, missing def for SIMPLE/DATAFLOW, a
 * def whose type differs from cfg->job_type); EJ_ECONFIG (invalid config or
 * def; ej_job_last_error names the field); EJ_ENOMEM; -errno.
 */
EJ_EXTERN int ej_job_create(ej_registry *reg, const struct ej_job_config *cfg,
                            const struct ej_job_opts *opts, ej_job **out);

/*
 * Register in ZooKeeper and start firing (SPEC 4 "Start"): persist and read
 * back the config, start the caches, elect a leader, persist servers/{ip},
 * create the ephemeral instances/{id}, set leader/sharding/necessary, start
 * the monitor port (monitorPort >= 0), the reconcile timer and the cron
 * schedule. Blocks until done (bounded).
 * Returns 0; EJ_EBUSY (already started); EJ_ECONFIG (the config in
 * ZooKeeper is invalid or of another job type; see ej_job_last_error);
 * registry errors (EJ_ECONNLOSS ...); -errno (monitor port).
 * On error nothing keeps running and the job may be destroyed.
 */
EJ_EXTERN int ej_job_start(ej_job *job);

/*
 * Run this instance's items once now, as the console's TRIGGER does (right
 * after the current run when one is running).
 * Returns 0; EJ_ESTOPPED (not started, shut down or stopped by an
 * operator); EJ_ECLOSED.
 */
EJ_EXTERN int ej_job_trigger(ej_job *job);

/*
 * Ask every live instance of the job to run once now: writes "TRIGGER" into
 * each instances/{id} (ElasticJob's JobOperateAPI.trigger). A one-off run of
 * a job created with opts.manual. Returns 0 or a registry error.
 */
EJ_EXTERN int ej_job_trigger_all(ej_job *job);

/* Stop / restart cron firing on this instance (triggers still run). Fire
 * times passed while paused are reported as one misfired fire at resume.
 * Return 0 or EJ_ESTOPPED. */
EJ_EXTERN int ej_job_pause(ej_job *job);
EJ_EXTERN int ej_job_resume(ej_job *job);

/*
 * Replace the job's configuration (e.g. the daemon's reload): validated,
 * then written to `/{job}/config`, from where every instance (this one
 * included) applies it as it applies a console edit: a new cron
 * reschedules, a new shardingTotalCount reshards at the next fire, failover
 * turned off removes the failover nodes. Waits (bounded) until this
 * instance has applied it.
 * Returns 0; EJ_EINVAL; EJ_ECONFIG (invalid: nothing written;
 * ej_job_last_error names the field); EJ_ETIMEDOUT (written, not yet
 * applied); registry errors.
 */
EJ_EXTERN int ej_job_update_config(ej_job *job, const struct ej_job_config *cfg);

/*
 * Leave cleanly: stop firing, wait for running items (at most
 * opts.drain_timeout_ms, then ask them to stop and wait up to 5 s more),
 * give up leadership and delete this instance's node. Fire times that come
 * after the call are not counted as fires not run (the instance leaves);
 * those missed before it still are. The job cannot be started again;
 * destroy it. Must not be called from the job's callbacks.
 * Returns 0, or EJ_ETIMEDOUT when items were still running at the end
 * (they are abandoned to finish on their own).
 */
EJ_EXTERN int ej_job_shutdown(ej_job *job);

/* Shut down (if not yet) and free. Accepts NULL. Must not be called from
 * the job's callbacks. */
EJ_EXTERN void ej_job_destroy(ej_job *job);

/* Upper bounds, in seconds, of the buckets of ej_job_status.fire_lateness
 * (a last bucket, +Inf, follows them). */
#define EJ_FIRE_LATENESS_BUCKETS 14
EJ_EXTERN extern const double ej_fire_lateness_bounds[EJ_FIRE_LATENESS_BUCKETS];

/* What ej_job_status() reports. Free with ej_job_status_fini(). */
struct ej_job_status {
    char *job_name;
    char *instance_id;
    bool started;
    bool stopped; /* shut down, or stopped by an operator / job removal */
    bool leader;
    bool paused;          /* by ej_job_pause() */
    bool connected;       /* ZooKeeper connection up */
    bool server_disabled; /* servers/{ip} is DISABLED */
    bool running;         /* a fire is running now */
    int *items;           /* shard items this instance owns (ascending) */
    size_t item_count;
    int sharding_total_count;
    char *cron;           /* in force */
    int64_t next_fire_ms; /* epoch ms; 0: none (paused, manual, stopped) */
    int64_t last_fire_ms; /* start of the last fire; 0: none */
    uint64_t fires;       /* fires started */
    uint64_t items_run;   /* item runs finished */
    uint64_t items_failed;
    /* Fires that did not run their items: cron fire times the scheduler
     * could not deliver on time, and fires (cron or triggered) the fire
     * flow declined (fenced, before registration, leader wait, disabled,
     * ...). Each is also posted as a TASK_ERROR status event "fire not run
     * (REASON)" (docs/execution.md lists the reasons). */
    uint64_t fires_missed;
    /* Cron fires started, by lateness (the cron fire time to the fire's
     * start; fire-now and failover fires are not counted): fire_lateness[i]
     * fires with ej_fire_lateness_bounds[i-1] < lateness <= bounds[i], the
     * last for more than every bound; not cumulative. Sum in seconds. */
    uint64_t fire_lateness[EJ_FIRE_LATENESS_BUCKETS + 1];
    double fire_lateness_sum;
    uint64_t reshards; /* new sharding assignments this instance wrote as leader
                        * (since start; 0 while not started) */
    int monitor_port;  /* the monitor port listening, -1: none */
    char *last_error;  /* "" when none: e.g. an invalid config in ZooKeeper */
};

/*
 * The reasons a "fire not run (REASON)" status event may give, i = 0, 1,
 * ... until NULL: the scheduler's (cron fire times it could not deliver on
 * time) and the fire flow's (fires it was handed and did not run), each
 * once (docs/execution.md). Static strings, lowercase and dashes only.
 * Thread-safe. For a consumer that shows every reason before it happens
 * (the daemon's /metrics creates a series for each at 0).
 */
EJ_EXTERN const char *ej_fire_not_run_reason(size_t i);

/* Fill st (caller finalises). Returns 0, EJ_EINVAL or EJ_ENOMEM. */
EJ_EXTERN int ej_job_status(ej_job *job, struct ej_job_status *st);
EJ_EXTERN void ej_job_status_fini(struct ej_job_status *st);

/* Copy the job's last error message into buf (at most len bytes with the
 * NUL; "" when none or job is NULL): e.g. why start failed, or an invalid
 * config seen in ZooKeeper and not applied ("invalid config in ZooKeeper,
 * not applied: cron: has no fire time ahead"). Returns buf, so a call can
 * sit in a printf argument list. Thread-safe. */
EJ_EXTERN const char *ej_job_last_error(ej_job *job, char *buf, size_t len);

/*
 * Receive the job's events (executions and status changes, SPEC 8) in
 * fn(ev, user) on the event bus thread. Without opts.events the job gets a
 * private bus here. Returns 0; EJ_EINVAL; EJ_ENOMEM; -errno.
 * ej_event_log_sink (event.h) logs one line per event.
 */
EJ_EXTERN int ej_job_subscribe(ej_job *job, void (*fn)(const struct ej_event *ev, void *user),
                               void *user);

/* The registry, and the job's name and instance id (borrowed for the
 * job's lifetime). */
EJ_EXTERN ej_registry *ej_job_registry(const ej_job *job);
EJ_EXTERN const char *ej_job_name(const ej_job *job);
EJ_EXTERN const char *ej_job_instance_id(const ej_job *job);

#endif
