/*
 * The scheduler: one timer thread and one bounded worker pool for all the
 * jobs of a process (or of one ej__sched object). Internal API.
 *
 * Timer: a min-heap of absolute CLOCK_REALTIME deadlines keyed by
 * (deadline, sequence), slept on with a timerfd (TFD_TIMER_ABSTIME |
 * TFD_TIMER_CANCEL_ON_SET), so the thread wakes only for a deadline, a
 * change to the heap, or a step of the wall clock. When the clock is set,
 * every cron trigger whose next fire time is now too far ahead is
 * recomputed from its cron expression.
 *
 * Pool: threads are created on demand up to max_threads and reaped after
 * idle_ms without work. Two kinds of task:
 *   - control tasks (fire callbacks, ej__sched_post with job NULL): run in
 *     FIFO order, not counted against any job's limit;
 *   - job tasks (ej__sched_run_all, ej__sched_post with a job): each job has
 *     a FIFO queue and a concurrency limit; jobs with runnable tasks are
 *     served round-robin.
 * A thread that waits in ej__sched_run_all runs queued tasks of its own job
 * itself, so waits never deadlock however saturated the pool is.
 *
 * Fires: a cron trigger's callback runs on the pool, never on the timer
 * thread, and never overlaps itself: fire times that come due while the
 * callback is still running (or queued) are counted and delivered as ONE
 * callback with misfired = true right after it returns. See ej__fire for
 * the exact misfire rules.
 *
 * Lock order, for code that calls in from callbacks: no scheduler lock is
 * held while any callback runs. Every function here is thread-safe unless
 * it says otherwise.
 */
#ifndef EJ_SCHEDULE_INTERNAL_H
#define EJ_SCHEDULE_INTERNAL_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "ejob/cron.h"

typedef struct ej__sched ej__sched;
typedef struct ej__sched_job ej__sched_job;
typedef struct ej__trigger ej__trigger;

struct ej__sched_opts {
    /* 0: up to max(16, 4 x online CPUs) threads start whenever work waits,
     * and up to max(64, 8 x online CPUs) when fire callbacks wait 20 ms or
     * more (they block on ZooKeeper). > 0: that many, started as needed. */
    int max_threads;
    int64_t idle_ms;              /* idle pool threads exit after this; 0: 60000 */
    int64_t misfire_threshold_ms; /* see ej__fire; 0: 1000; negative: 0 (every late fire) */
    size_t max_queued;            /* tasks queued at most (all kinds); 0: 1,000,000 */
    const char *name;             /* thread name prefix, <= 8 chars; NULL: "ej" */
};

/*
 * Creates a scheduler and starts its timer thread (pool threads start on
 * demand). opts may be NULL.
 * Returns 0; EJ_EINVAL; EJ_ENOMEM; -errno (timerfd, eventfd, pthread).
 */
int ej__sched_create(const struct ej__sched_opts *opts, ej__sched **out);

/*
 * Stops the timer thread, destroys every job left (as ej__sched_job_destroy:
 * triggers removed, queued fire callbacks dropped), lets the pool run every
 * task already queued, then joins all threads and frees. Must not be called
 * from a pool thread or callback of this scheduler. Accepts NULL.
 */
void ej__sched_destroy(ej__sched *s);

/*
 * The process-wide default scheduler, created with default options on first
 * use and never destroyed (its threads end with the process). NULL only if
 * creating it failed (logged).
 */
ej__sched *ej__sched_default(void);

/* ---------------------------------------------------------------- jobs */

/*
 * A job in the pool: a FIFO queue of job tasks and a limit on how many of
 * them run at once (e.g. ej_executor_concurrency()). name is copied (for
 * logs). concurrency < 1 is read as 1.
 * Returns 0; EJ_EINVAL; EJ_ENOMEM; EJ_ECLOSED (scheduler destroying).
 */
int ej__sched_job_create(ej__sched *s, const char *name, int concurrency, ej__sched_job **out);
/* True when the calling thread is running a task of j (ej__sched_job_post):
 * for a job of concurrency 1, "on j's serial queue". */
bool ej__sched_job_is_current(const ej__sched_job *j);

/* Changes the limit; takes effect as running tasks finish. */
void ej__sched_job_set_concurrency(ej__sched_job *j, int concurrency);

/*
 * Removes all of the job's triggers (as ej__sched_trigger_remove) and frees
 * the job once no task of it is queued or running. When called from one of
 * the job's own callbacks or tasks it does not wait: the job is freed after
 * that callback returns. Otherwise it waits for the job's running callbacks
 * and tasks to return. Job tasks still queued are run before it returns.
 * Accepts NULL.
 */
void ej__sched_job_destroy(ej__sched_job *j);

/* ------------------------------------------------------------- triggers */

/*
 * What a fire callback is told.
 *
 * Misfire rules (Quartz's misfireThreshold with
 * MISFIRE_INSTRUCTION_DO_NOTHING, as ElasticJob 2.1.5 configures it, but
 * reported rather than silently skipped):
 *   - A fire that starts (the callback is entered) no more than
 *     misfire_threshold_ms after its scheduled time, while the previous
 *     callback of the trigger has returned, is a normal fire: misfired false,
 *     missed_count 1.
 *   - Fire times that pass while the trigger's callback is running or queued
 *     (a slow job), while the trigger is paused, while the timer thread was
 *     late, or that the wall clock jumped over, are never delivered one by
 *     one: they collapse into ONE callback with misfired true, missed_count
 *     = how many fire times were collapsed (counting stops at 10,000:
 *     a larger gap reports 10,000), scheduled_ms = the first of them and
 *     last_scheduled_ms = the last. It is delivered as soon as the previous
 *     callback returns (slow job), at resume (paused), or at once (late
 *     timer, clock jump). The trigger then continues with the first fire
 *     time after now.
 *   - A fire whose callback starts more than misfire_threshold_ms late
 *     (the pool was saturated) is delivered misfired with missed_count 1.
 * ElasticJob 2.1.5 would not run a misfired fire but mark its items
 * `misfire` so that they run again (as MISFIRE) after the current or next
 * run; the fire flow decides what to do with misfired = true.
 */
/*
 * Why a cron fire time was not delivered on time as a callback of its own.
 * Every such fire time is counted under exactly one reason.
 */
typedef enum ej__miss_reason {
    EJ__MISS_RUNNING,    /* the trigger's previous callback was still running */
    EJ__MISS_QUEUED,     /* its previous callback still waited for a pool thread */
    EJ__MISS_PAUSED,     /* the trigger was paused (e.g. disconnected, job paused) */
    EJ__MISS_TIMER_LATE, /* the timer thread woke more than the threshold late */
    EJ__MISS_CLOCK_STEP, /* the wall clock was stepped over it */
    EJ__MISS_LATE_START, /* its callback started more than the threshold late */
    EJ__MISS_REASONS
} ej__miss_reason;

/* "running", "queued", "paused", "timer-late", "clock-step", "late-start". */
const char *ej__miss_reason_name(ej__miss_reason r);

/* What a miss hook is told (see ej__sched_trigger_set_miss_fn). */
struct ej__fire;
typedef struct ej__miss {
    ej__trigger *trigger;
    const struct ej__fire *fire; /* the misfired callback about to be made; NULL:
                                  * none (the fire times are dropped) */
    ej__miss_reason reason;
    uint32_t count;   /* fire times missed for this reason (capped at 10,000) */
    int64_t first_ms; /* the first of them, epoch ms (approximate when several
                       * reasons share one callback) */
    int64_t last_ms;  /* the last of them */
} ej__miss;

typedef struct ej__fire {
    ej__trigger *trigger;
    int64_t scheduled_ms;      /* the scheduled fire time (first collapsed one); epoch ms */
    int64_t last_scheduled_ms; /* == scheduled_ms unless several were collapsed */
    int64_t started_ms;        /* when the callback was entered; epoch ms */
    int64_t prev_scheduled_ms; /* scheduled time of the previous delivered fire; 0: none */
    int64_t next_ms;           /* the next scheduled fire time; 0: none (paused, no more) */
    bool misfired;
    uint32_t missed_count; /* >= 1 */
    /* ej__sched_trigger_fire_now() requests: the OR of their reason bits
     * (non-zero means this callback answers them; scheduled_ms is then the
     * time of the first request). A cron fire and a fire-now request that
     * are both pending are delivered as one callback with both set. */
    unsigned now_reasons;
    bool cron_due; /* a cron fire time is part of this callback */
    /* When misfired: how many of the missed_count fire times were missed
     * for each reason (they add up to missed_count). All 0 otherwise. */
    uint32_t missed_by[EJ__MISS_REASONS];
} ej__fire;

/* A fire callback: runs on a pool thread. fire is borrowed for the call. */
typedef void (*ej__fire_fn)(const ej__fire *fire, void *arg);

/* A miss hook: runs on a pool thread; miss is borrowed for the call. */
typedef void (*ej__miss_fn)(const ej__miss *miss, void *arg);

/*
 * Adds a cron trigger to job j: fires at every ej_cron_next() time in zone
 * tz (NULL: UTC) strictly after now.
 * cron: consumed on success (freed by remove / reschedule / destroy); the
 *       caller still owns it when this fails.
 * tz:   borrowed (zones from ej_tz_load are immortal).
 * paused: start paused (no fire until ej__sched_trigger_resume; fire times
 *       passed while paused-from-creation are not reported).
 * Returns 0 and *out; EJ_EINVAL; EJ_ENOMEM; EJ_ECLOSED; EJ_ENOTFOUND when the
 * cron has no fire time after now (the trigger is not added).
 */
int ej__sched_cron_add(ej__sched_job *j, ej_cron *cron, const ej_tz *tz, bool paused,
                       ej__fire_fn fn, void *arg, ej__trigger **out);

/*
 * A trigger with no schedule: fires only through ej__sched_trigger_fire_now
 * (e.g. a one-off job). Returns 0; EJ_EINVAL; EJ_ENOMEM; EJ_ECLOSED.
 */
int ej__sched_manual_add(ej__sched_job *j, ej__fire_fn fn, void *arg, ej__trigger **out);

/*
 * Replaces the cron expression and zone (cron consumed on success). The
 * next fire is recomputed from now; fires already collapsed and not yet
 * delivered are kept. A running callback is not disturbed.
 * Returns 0; EJ_EINVAL; EJ_ENOTFOUND (no fire after now: the trigger keeps
 * its old schedule and the caller keeps cron).
 */
int ej__sched_trigger_reschedule(ej__trigger *t, ej_cron *cron, const ej_tz *tz);

/*
 * Pause: no callback starts for cron fire times while paused (a callback
 * running now finishes). Resume: if fire times passed while paused, one
 * misfired callback reports them (see ej__fire), then the schedule
 * continues. Both are idempotent. Fire-now requests are delivered also
 * while paused.
 */
void ej__sched_trigger_pause(ej__trigger *t);
/*
 * Retire: pause for good, as the job stops. The fire times that passed
 * while it was paused before are still told at its remove; those from now
 * on are not missed (the instance is leaving, not failing to run them).
 */
void ej__sched_trigger_retire(ej__trigger *t);
void ej__sched_trigger_resume(ej__trigger *t);
bool ej__sched_trigger_is_paused(const ej__trigger *t);

/*
 * Requests a callback now (the console's TRIGGER, a failover). reasons is
 * a non-zero bit set the caller defines; it is OR-ed into the callback's
 * now_reasons. If the trigger's callback is running, the request is
 * delivered right after it returns; requests made meanwhile coalesce.
 * Returns 0; EJ_EINVAL (reasons 0); EJ_ECLOSED.
 */
int ej__sched_trigger_fire_now(ej__trigger *t, unsigned reasons);

/*
 * Sets (fn NULL: clears) the trigger's miss hook, called with the trigger's
 * arg once per reason, on the pool thread and right before every misfired
 * callback, for the fire times that callback stands for (their counts add
 * up to its missed_count). Of those fire times at most one runs (the fire
 * flow decides whether the misfired callback runs the job), so a caller
 * that wires this hook to events and counters reports every fire time that
 * was not run on time, with its reason, and never silently loses one.
 * Fire times a trigger collected and will never deliver because it is
 * removed (ej__sched_trigger_remove, ej__sched_job_destroy, shutdown of the
 * scheduler) are told too, on the remover's thread before it returns: a
 * queued cron fire not started yet (queued, or its misfire reasons), those
 * collected behind a running callback, and those passed while paused.
 *
 * Independently of any hook the scheduler counts missed fire times per
 * reason (ej__sched_get_stats) and logs them as one warning line per
 * scheduler every 10 s at most, naming the reasons and a job.
 */
void ej__sched_trigger_set_miss_fn(ej__trigger *t, ej__miss_fn fn);

/* The next scheduled cron fire time (epoch ms), or 0 when paused, manual or
 * none. */
int64_t ej__sched_trigger_next(const ej__trigger *t);

/* True while the trigger's callback is queued or running. */
bool ej__sched_trigger_is_busy(const ej__trigger *t);

/*
 * Removes a trigger. A queued callback that has not started is dropped (its
 * cron fire times, and any the trigger collected or that passed while it
 * was paused, go to the miss hook first: see ej__sched_trigger_set_miss_fn). If
 * the callback is running on another thread, waits until it returns; if
 * called from the trigger's own callback, returns at once and the trigger
 * is freed when the callback returns. After it returns, fn is never called
 * again for this trigger. Accepts NULL.
 */
void ej__sched_trigger_remove(ej__trigger *t);

/* ---------------------------------------------------------------- tasks */

typedef void (*ej__task_fn)(void *arg);

/*
 * Runs fn(args[i]) for i in 0..n-1, at most the job's concurrency at a time,
 * and returns when all have returned. The calling thread runs tasks too
 * (always at least one when n > 0), so this never deadlocks, also when
 * called from a pool thread, from a fire callback or from inside another
 * of the job's tasks (the caller's own slot is lent while it waits).
 * Every fn(args[i]) is called exactly once, also when the pool is full
 * (tasks the pool cannot queue run on the calling thread).
 * Returns 0; EJ_EINVAL (j or fn NULL, args NULL with n > 0).
 */
int ej__sched_run_all(ej__sched_job *j, ej__task_fn fn, void *const *args, size_t n);

/*
 * Queues fn(arg) without waiting. j NULL: a control task of scheduler s
 * (no limit); else a job task of j (s is ignored and may be NULL).
 * Returns 0; EJ_EBUSY when max_queued tasks are queued (logged; fn not
 * called); EJ_ENOMEM; EJ_ECLOSED; EJ_EINVAL.
 */
int ej__sched_post(ej__sched *s, ej__sched_job *j, ej__task_fn fn, void *arg);

/*
 * The same for a job task that goes before the job's queued ones: the
 * next step of work already under way that holds something others wait
 * for (a latch's continuation), where waiting its turn behind a burst of
 * events made it seconds late. Same returns.
 */
int ej__sched_post_first(ej__sched_job *j, ej__task_fn fn, void *arg);

/* ---------------------------------------------------------- inspection */

struct ej__sched_stats {
    int threads;          /* pool threads alive */
    int idle_threads;     /* of which waiting for work */
    size_t queued;        /* tasks queued (control + job) */
    size_t triggers;      /* triggers (all jobs) */
    size_t jobs;          /* jobs */
    uint64_t fires;       /* fire callbacks started */
    uint64_t misfires;    /* of which misfired */
    uint64_t clock_jumps; /* wall-clock steps detected */
    /* Cron fire times delivered in misfired callbacks, or never delivered
     * because their trigger was removed, by reason. */
    uint64_t missed_by[EJ__MISS_REASONS];
};

void ej__sched_get_stats(ej__sched *s, struct ej__sched_stats *out);

/* The scheduler a job belongs to. */
ej__sched *ej__sched_job_scheduler(const ej__sched_job *j);

/* Test hook: makes the timer thread sleep ms milliseconds (as if it were
 * descheduled) the next time it wakes. */
void ej__sched_debug_stall_timer(ej__sched *s, int64_t ms);

/* Test hook: shifts this scheduler's view of the wall clock by ms (positive:
 * forward), as if the system clock were stepped, and wakes the timer as a
 * timerfd clock-change cancellation would. Fire times reported afterwards
 * are on the shifted clock. */
void ej__sched_debug_shift_clock(ej__sched *s, int64_t ms);

#endif
