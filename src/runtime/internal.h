/*
 * The runtime module: the ej_job object (api.c) and the fire flow
 * (fire.c and the files fire_impl.h lists). Internal.
 *
 * What the fire flow needs of a configuration travels as plain struct
 * ej__rt_settings, copied when the configuration changes.
 */
#ifndef EJ_RUNTIME_INTERNAL_H
#define EJ_RUNTIME_INTERNAL_H

#include <pthread.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "ejob/ejob.h"
#include "ejob/registry.h"

struct ej__coord;
struct ej__sched;
struct ej__sched_job;
struct ej__trigger;
struct ej_cron;
struct ej_tz;
struct ej_monitor;
struct ej__fire;

/* Reasons of a fire-now request (ej__sched_trigger_fire_now). */
enum {
    EJ__FIRE_TRIGGER = 1u << 0,  /* console TRIGGER, ej_job_trigger */
    EJ__FIRE_FAILOVER = 1u << 1, /* failover items were taken */
};

/*
 * Why the runtime did not run a fire the scheduler delivered
 * (fire_events.c ej__rt_not_run; names in ej__not_run_reason_name). The
 * scheduler's own reasons, for cron fire times it could not deliver on
 * time, come through its miss hook (ej__miss_reason). Each fire that does
 * not run is counted under one reason, in ej_job_status.fires_missed and a
 * "fire not run (REASON)" status event.
 */
enum ej__not_run_reason {
    EJ__NOT_RUN_FENCED,              /* not registered in this session, or fenced */
    EJ__NOT_RUN_BEFORE_REGISTRATION, /* cron fire due before this instance registered */
    EJ__NOT_RUN_LEADER_WAIT,         /* the leader did not reshard within the wait bound */
    EJ__NOT_RUN_SHARDING_FAILED,     /* sharding failed otherwise (ZooKeeper, memory) */
    EJ__NOT_RUN_TIME_DIFF,           /* maxTimeDiffSeconds exceeded, or the check failed */
    EJ__NOT_RUN_DISABLED,            /* this server is disabled (an operator's decision) */
    EJ__NOT_RUN_STOPPED,             /* the job is shutting down, or stopped by an operator */
    EJ__NOT_RUN_RUNNING,             /* a console trigger while the job runs (ignored) */
    EJ__NOT_RUN_START_FAILED,        /* the running nodes could not be written */
    EJ__NOT_RUN_DEADLINE,            /* not started within startingDeadlineSeconds */
    EJ__NOT_RUN_OVERLAP,             /* overlapPolicy SKIP: the item still ran */
    EJ__NOT_RUN_MISSED,              /* its owner died; taken over without a catch-up run */
    EJ__NOT_RUN_FAILOVER_LOST,       /* its owner died running it; not failed over after all */
    EJ__NOT_RUN_REASONS
};

/* "fenced", "before-registration", "leader-wait", "sharding-failed",
 * "time-diff", "disabled", "stopped", "running", "start-failed", "missed",
 * "failover-lost": lowercase and dashes only
 * (the daemon's /metrics reads them back from the event text). */
const char *ej__not_run_reason_name(enum ej__not_run_reason r);

/* What a fire runs with: a reference-counted snapshot of the job's
 * validated configuration (as read back from ZooKeeper), plus what is
 * derived from it once. A fire holds its snapshot to the end; a config
 * change installs a new one. */
struct ej__rt_settings {
    atomic_int refs;
    struct ej_job_config cfg;         /* owned; every string member non-NULL */
    struct ej_sharding_params params; /* shardingItemParameters, parsed */
    struct ej_job_def *def;           /* the job definition built for it (fire.c), or NULL */
};

void ej__rt_settings_ref(struct ej__rt_settings *s);
void ej__rt_settings_unref(struct ej__rt_settings *s);
/* fire.c: build s->def from s and the user's def (SCRIPT/HTTP), or point
 * at the user's def (SIMPLE/DATAFLOW). Returns 0 or an error. */
int ej__rt_build_def(struct ej__rt_settings *s, const struct ej_job_def *user_def);
/* fire.c: the type of a user's definition (EJ_JOB_* value). */
int ej__rt_def_type(const struct ej_job_def *def);
/* fire.c: validate a user's definition (job.h rules). */
int ej__rt_def_validate(const struct ej_job_def *def, char *err, size_t errlen);
/* fire.c: how many items may run at once for s and the user's def. */
int ej__rt_concurrency(const struct ej__rt_settings *s, const struct ej_job_def *user_def);

enum { EJ__JOB_CREATED, EJ__JOB_STARTED, EJ__JOB_STOPPING, EJ__JOB_DONE };

struct ej_job {
    ej_registry *reg;
    struct ej__coord *coord;
    struct ej__sched *sched;
    struct ej__sched_job *sj;
    struct ej__trigger *trigger;
    struct ej_monitor *monitor;
    char *name;
    char me[256];
    char ip[64];
    char hostname[256];
    const struct ej_job_def *user_def;
    const struct ej_distribute_once_listener *once;
    struct ej_event_bus *bus;
    bool own_bus;
    int64_t drain_timeout_ms;
    bool keep_running_on_lost;
    bool manual;
    int wait_bound_ms;
    int64_t reconcile_ms;
    void (*on_stopped)(struct ej_job *job, bool by_operator, void *user); /* ej_job_opts */
    void *on_stopped_user;
    struct ej_job_config local_cfg; /* as given to create/update (api.c) */

    pthread_mutex_t mu;
    pthread_cond_t cv;
    atomic_int refs;
    int state;
    bool user_paused;
    bool conn_paused;
    bool stopped;     /* operator shutdown / job removed */
    bool firing;      /* the fire callback is running */
    int trigger_uses; /* ej__rt_trigger_get()s not given back yet */
    struct ej__rt_settings *settings;
    atomic_bool cancel; /* the current run must stop */
    /* The session the current fire began in (ej__coord_session): nothing of
     * the fire starts once this is not the registered, fenced-open one. */
    _Atomic int64_t fire_session;
    uint64_t fire_gen; /* bumped at each fire */
    int *run_items;    /* items of the current normal run (misfire.c) */
    size_t run_nitems;
    bool misfire_window;           /* a normal run's misfire loop will see new marks */
    uint64_t misfire_marks;        /* fire times marked misfire so far */
    int64_t misfire_handled_until; /* cron fire times up to this were marked misfire */
    int marker_inflight;           /* misfire markers working on the current fire */
    struct ej_cron *cron;          /* the cron in force (parsed), for misfire markers */
    const struct ej_tz *tz;
    uint64_t fires, items_run, items_failed;
    uint64_t fires_missed; /* fires not run: miss hook and ej__not_run_reason */
    /* The rate-limited warning of ej__rt_not_run (fire_events.c), per reason. */
    struct {
        int64_t last_ms;     /* monotonic ms of the last line; 0: none yet */
        uint64_t suppressed; /* fires not run since then without a line */
    } not_run_log[EJ__NOT_RUN_REASONS];
    uint64_t fire_lateness[EJ_FIRE_LATENESS_BUCKETS + 1]; /* cron fires, see ej_job_status */
    double fire_lateness_sum;
    int64_t last_fire_ms;
    /* The latest cron fire time the current fire covers (its trigger's
     * time for a console trigger; 0: a failover run), written with its
     * running nodes as the items' fire record (takeover.c). Fire thread. */
    int64_t fire_covers_ms;
    int *owned_items; /* the items of the previous fire (takeover.c); fire thread */
    /* Items marked misfire to catch up fire times lost while their owner
     * was gone (takeover.c), until their MISFIRE run starts: that run is
     * recorded in the ledger at each of those fire times. Fire thread. */
    struct ej__catchup {
        int item;
        int64_t first_ms, last_ms;
        uint32_t count;
    } *catchups;
    size_t ncatchups;
    size_t nowned;
    int64_t owned_session; /* the session they were this instance's in */
    /* The fire time of the misfired fire the miss hook found past its
     * startingDeadlineSeconds (ej__fire_cb counts it); 0: none. job->mu. */
    int64_t deadline_fire_ms;
    char last_error[1024];
    /* Kills (kill.c): the items running now, and the cache of kills/. */
    pthread_mutex_t kill_mu;
    struct ej__running *running;
    struct ej_tree_cache *kill_cache;
    bool kill_ready;        /* the cache's first load is done */
    int64_t kill_seen_zxid; /* requests created up to here were handled */
};

/* One item running on this instance, as kills see it (kill.c). */
struct ej__running {
    int item;
    atomic_bool *kill;
    char *killed_by; /* KILLED_BY_LEN bytes, written under kill_mu */
    struct ej__running *next;
};
#define EJ__KILLED_BY_LEN 128

/* Kills (kill.c): track an item from before its run to after it; watch the
 * job's kills/ node while the job is started. */
void ej__kill_track(struct ej_job *job, struct ej__running *r);
void ej__kill_untrack(struct ej_job *job, struct ej__running *r);
int ej__kill_watch_start(struct ej_job *job);
void ej__kill_watch_stop(struct ej_job *job);
/* Retries (retry.c). The delay before the attempt after failed_attempt
 * (1..), in ms, jittered with *seed; -1 when no attempt is left. */
int64_t ej__retry_delay_ms(const struct ej_retry_config *r, int failed_attempt, uint64_t *seed);
/* Waits delay_ms (the item's running node held), then says whether attempt
 * next_attempt may start: not killed or stopping, still fenced-open in the
 * fire's session, the item still this instance's, and the job's next cron
 * fire not due before it (the next fire wins). When not, posts a status
 * event naming why and returns false. */
bool ej__retry_wait(struct ej_job *job, const atomic_bool *kill, int64_t fire_session, int item,
                    int64_t delay_ms, int next_attempt, const char *task_id);

/* misfirePolicy CATCH_UP (policy.c): the missed cron fire times of the
 * misfired fire f to run, oldest first, into times (max <=
 * EJ_CONFIG_CATCH_UP_MAX); 0 when the policy is another. Under job->mu. */
struct ej__fire;
size_t ej__policy_catch_up_times(struct ej_job *job, const struct ej__rt_settings *s,
                                 const struct ej__fire *f, int64_t *times, size_t max);

/* overlapPolicy SKIP: the cron fire time due came while the job's items
 * still ran here; counted and posted as not run ("overlap"). */
void ej__rt_not_run_overlap(struct ej_job *job, int64_t due);

/* Sets the kill flag of the matching items running now; the count. */
size_t ej__kill_items(struct ej_job *job, int item, const char *by);

/* Misfire marking (misfire.c). A normal run opens the window with its
 * items and arms a marker at its fire time; its misfire loop reads the
 * marks count before it looks for misfired items, and closes the window
 * only when no mark came since (ej__misfire_close returns false: look
 * again), or with force when it stops for another reason. */
void ej__misfire_arm(struct ej_job *job, uint64_t gen, int64_t after);
void ej__misfire_open(struct ej_job *job, const int *items, size_t n);
uint64_t ej__misfire_marks(struct ej_job *job);
bool ej__misfire_close(struct ej_job *job, uint64_t marks_seen, bool force);
/* True when an item of the current normal run is no one's in the view now
 * (a leader is rewriting the instance nodes): its marks are still to be
 * seen once the leader is done. */
bool ej__misfire_run_unowned(struct ej_job *job);
/* The misfire loop after a normal run (abort_run: the error handler asked
 * to fail the whole run: no re-runs), then the window closed. */
void ej__misfire_loop_run(struct ej_job *job, const struct ej__rt_settings *s, bool abort_run);

void ej__job_ref(struct ej_job *job);
void ej__job_unref(struct ej_job *job);
void ej__job_set_error(struct ej_job *job, const char *fmt, ...)
    __attribute__((format(printf, 2, 3)));
/* The settings in force (a reference the caller drops). */
struct ej__rt_settings *ej__job_settings(struct ej_job *job);

/* fire.c */
void ej__fire_cb(const struct ej__fire *fire, void *arg); /* an ej__fire_fn */
/* fire_events.c */
/* Count and post count fire times from first_ms to last_ms not run for r
 * (items: those they were of, or NULL): the one place fires not run are
 * counted (ej_job_status().fires_missed, the "fire not run (REASON)" status
 * event the daemon's /metrics counts). Any thread. */
void ej__rt_count_not_run(struct ej_job *job, enum ej__not_run_reason r, const int *items, size_t n,
                          uint32_t count, int64_t first_ms, int64_t last_ms);

/*
 * takeover.c: items this fire has that the previous one did not (a
 * resharding or an enable gave them) and whose fire record names an
 * instance seen leaving: the cron fire times after its last start and
 * before before_ms went unrun while it was gone. With misfire on they are
 * marked misfire (one MISFIRE run after this fire's run); otherwise, or
 * when the mark cannot be written, reported not run (missed). Remembers
 * items for the next fire. Fire thread; reads ZooKeeper only for items
 * gained while some instance left (one read each).
 */
void ej__takeover_check(struct ej_job *job, const struct ej__rt_settings *s, const int *items,
                        size_t n, int64_t before_ms);
/* Coordinator hooks (dispatch thread / control tasks; fire_hooks.c). */
void ej__rt_on_trigger(void *user);
void ej__rt_on_failover_taken(void *user);
void ej__rt_on_failover_pending(void *user);
void ej__rt_on_failover_lost(void *user, const int *items, size_t n, int64_t gone_ms);
void ej__rt_on_stop(void *user, int why);
void ej__rt_on_conn(void *user, ej_reg_state state, bool new_session);
/* The fence of the registered session changed (an ej_reg_fence value;
 * registry watchdog thread): CANCEL asks running items to stop. */
void ej__rt_on_fence(void *user, int level);
/* fire.c: schedule (or reschedule) the cron of s. 0 or an error (cron / zone). */
int ej__rt_schedule(struct ej_job *job, const struct ej__rt_settings *s, bool reschedule);
/* fire_events.c: post a status event "state message" for the items of a task. */
void ej__rt_post_status(struct ej_job *job, const char *task_id, const int *items, size_t n,
                        int state, const char *fmt, ...) __attribute__((format(printf, 6, 7)));
/*
 * fire_hooks.c: the job's trigger for one use (pause, resume, fire now,
 * reschedule), or NULL once ej_job_destroy took it. Coordinator hooks (entered before the
 * coordinator closed) and API calls on other threads may hold it while the
 * job is destroyed: a non-NULL result is given back with
 * ej__rt_trigger_put, and ej__rt_trigger_detach waits for that before the
 * trigger is removed.
 */
struct ej__trigger *ej__rt_trigger_get(struct ej_job *job);
void ej__rt_trigger_put(struct ej_job *job, struct ej__trigger *t);
/* Takes the trigger from the job (later gets see NULL) once no use is left. */
struct ej__trigger *ej__rt_trigger_detach(struct ej_job *job);
/* Tests only (NULL otherwise): called between taking the trigger and using
 * it, to hold that window open. */
extern void (*ej__rt_trigger_use_hook)(struct ej_job *job);
/* Wait for the current fire to end, at most ms; false on timeout. */
bool ej__rt_wait_idle(struct ej_job *job, int64_t ms);
/* The fire ledger (ledger.c): rows posted on the job's bus. */
/* The start-up scan looks this far back, and records at most this many. */
#define EJ__LEDGER_WINDOW_MS (24 * 3600 * 1000LL)
#define EJ__LEDGER_SCAN_MAX 1000
/* "CRON", "TRIGGER", "FAILOVER" or "MISFIRE": the ledger kind of a run. */
const char *ej__rt_ledger_kind(ej_execution_source source, bool cron);
/* An item started: fire_ms is its cron fire time (kind CRON) or when it
 * started (the others). */
void ej__rt_ledger_ran(struct ej_job *job, int64_t fire_ms, const char *kind, int item,
                       const char *execution_id);
/* A fire not run, for reason (any name): a row per fire time from first_ms
 * to last_ms (count of them, at most EJ__LEDGER_SCAN_MAX; the times from
 * the job's cron) and per item of items[0..n) (n 0: one row, item -1). */
void ej__rt_ledger_not_run(struct ej_job *job, const char *reason, const char *kind,
                           const int *items, size_t n, int64_t first_ms, int64_t last_ms,
                           uint32_t count);
/* THE place a missed fire is recorded: item (-1: every item) of the job
 * was due at fire_ms and no live instance owned it. only_after_last: only
 * when the ledger holds no later fire time of the job (the start-up scan). */
/* A MISFIRE run (execution_id) of item that catches up count fire times
 * from first_ms to last_ms lost while the item's owner was gone: a ran row
 * of kind CATCHUP at each (at most EJ__LEDGER_SCAN_MAX). */
void ej__rt_ledger_caught_up(struct ej_job *job, int item, int64_t first_ms, int64_t last_ms,
                             uint32_t count, const char *execution_id);
/* The catch-up waiting for item's MISFIRE run (takeover.c), taken off the
 * job's list into out; false when none. Fire thread. */
bool ej__takeover_take_catchup(struct ej_job *job, int item, struct ej__catchup *out);
void ej__rt_ledger_missed(struct ej_job *job, int64_t fire_ms, int item, bool only_after_last);
/* At start, by the leader when it is the only live instance: the fire
 * times before this registration that no instance recorded (after the
 * ledger's last row of the job, within EJ__LEDGER_WINDOW_MS, the newest
 * EJ__LEDGER_SCAN_MAX) become missed. Needs the last-fire function below;
 * without one (no history store) it does nothing. */
void ej__rt_ledger_scan_down(struct ej_job *job, const char *cron, const char *time_zone);
/* Sets *last_ms to the ledger's newest fire time of job (0: no row).
 * Returns 0, or non-zero when the store cannot tell. */
typedef int (*ej__ledger_last_fire_fn)(const char *job, int64_t *last_ms, void *arg);
/* Installs fn (NULL: none) for every job of the process; the daemon
 * installs one over its history store. Any thread. */
void ej__rt_ledger_set_last_fire_fn(ej__ledger_last_fire_fn fn, void *arg);
/* Private bus creation and sinks (fire_events.c). */
int ej__rt_subscribe(struct ej_job *job, void (*fn)(const struct ej_event *ev, void *user),
                     void *user);
void ej__rt_bus_destroy(struct ej_job *job);

#endif
