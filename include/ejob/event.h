/*
 * Execution and status events (SPEC section 8) and the asynchronous bus
 * that delivers them to sinks (the SQLite / PostgreSQL tracing stores, the
 * built-in log sink, a user's own).
 *
 * Event fields are those of ElasticJob 2.1.5's JOB_EXECUTION_LOG and
 * JOB_STATUS_TRACE_LOG rows (reference 1.9), with the same value formats.
 * Posting never blocks: the bus copies the event into a bounded queue and
 * one bus thread hands it to every sink in turn. When the queue is full the
 * event is dropped, counted, and the drop logged (at most once a second).
 */
#ifndef EJOB_EVENT_H
#define EJOB_EVENT_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "ejob/common.h"
#include "ejob/job.h"

/* A UUID string "xxxxxxxx-xxxx-4xxx-yxxx-xxxxxxxxxxxx" plus NUL. */
#define EJ_EVENT_ID_LEN 37

/*
 * One item's execution (a JOB_EXECUTION_LOG row). ElasticJob posts it twice
 * with the same id: once when the item starts (complete_time_ms 0,
 * is_success false) and once when it ends (complete_time_ms set). A store
 * inserts the first and updates the row on the second, inserting the whole
 * row when the first never arrived.
 */
typedef struct ej_execution_event {
    char id[EJ_EVENT_ID_LEN]; /* random UUID, same for start and end */
    const char *job_name;
    const char *task_id;
    const char *hostname;
    const char *ip;
    int sharding_item;
    ej_execution_source execution_source;
    const char *failure_cause; /* NULL unless a failed end; stores cut it to 4000 chars */
    bool is_success;
    int64_t start_time_ms;    /* epoch ms */
    int64_t complete_time_ms; /* epoch ms; 0 on the start event */
    /* ejob's own (not 2.1.5 columns; stores keep them in
     * EJOB_EXECUTION_DETAIL), set on the end event. output: a script's
     * stdout or an http job's response body; error_output: a script's
     * stderr. Both are bytes (may hold NULs), each cut at the job's cap
     * (the *_truncated flags say so); NULL when none. A length of 0 with a
     * non-NULL pointer means NUL-terminated text. */
    const char *output;
    bool output_truncated;
    size_t output_len;
    const char *error_output;
    size_t error_output_len;
    bool error_output_truncated;
    bool has_exit_code;    /* a script ran: exit_code / term_signal are set */
    int exit_code;         /* script: exit status; -1 when it did not exit normally */
    int term_signal;       /* script: the signal that ended it; 0 none */
    long http_status;      /* http: response status; 0 none */
    int64_t fencing_token; /* the item's fencing token (SPEC 10); 0 none */
    /* ejob's own, on the end event (stores keep them in
     * EJOB_EXECUTION_RESULT): how it ended, EJ_RUN_SUCCESS, _FAILED,
     * _TIMEOUT or _KILLED (NULL reads as success or failed by is_success);
     * who killed it (killed only; NULL: not known); the attempt number
     * (1 the first run of the fire, 2.. its retries; 0 reads as 1). */
    const char *result;
    const char *killed_by;
    int attempt;
} ej_execution_event;

/* ej_execution_event.result values. */
#define EJ_RUN_SUCCESS "success"
#define EJ_RUN_FAILED "failed"
#define EJ_RUN_TIMEOUT "timeout"
#define EJ_RUN_KILLED "killed"

/* The result of an end event: its result, else success or failed. */
EJ_EXTERN const char *ej_execution_result(const ej_execution_event *e);

/* JOB_STATUS_TRACE_LOG.state values ElasticJob-Lite writes. */
typedef enum ej_task_state {
    EJ_TASK_STAGING = 0,
    EJ_TASK_RUNNING = 1,
    EJ_TASK_FINISHED = 2,
    EJ_TASK_ERROR = 3,
} ej_task_state;

/* "TASK_STAGING", "TASK_RUNNING", "TASK_FINISHED", "TASK_ERROR";
 * "TASK_UNKNOWN" otherwise. Static string. */
EJ_EXTERN const char *ej_task_state_name(ej_task_state state);

/*
 * A status change of one fire on this instance (a JOB_STATUS_TRACE_LOG
 * row). Lite's values: original_task_id "", slave_id the instance's IP
 * part of the task id, source "LITE_EXECUTOR", execution_type "READY",
 * sharding_item Java List.toString() of the items ("[0, 1, 2]", "[]").
 */
typedef struct ej_status_event {
    char id[EJ_EVENT_ID_LEN]; /* random UUID per event */
    const char *job_name;
    const char *original_task_id; /* NULL reads as "" */
    const char *task_id;
    const char *slave_id;
    const char *source;         /* NULL reads as "LITE_EXECUTOR" */
    const char *execution_type; /* NULL reads as "READY" */
    const char *sharding_item;  /* "[0, 1]" */
    ej_task_state state;
    const char *message; /* e.g. "Job 'x' execute begin."; may be NULL */
    int64_t creation_time_ms;
} ej_status_event;

/* The outcome of a fire that ran (ej_fire_event.outcome); any other
 * outcome is the reason it did not run ("paused", "leader-wait", "missed"
 * ...: docs/execution.md "Fires that did not run"). */
#define EJ_FIRE_RAN "ran"
/* Not run because no live instance owned the item at the fire time. */
#define EJ_FIRE_MISSED "missed"

/*
 * ejob's own (no 2.1.5 table): what became of one item at one fire time,
 * a row of the fire ledger (EJOB_FIRE_LEDGER, docs/tracing.md). Stores keep
 * one row per job, fire time and item for the whole cluster: a ran row
 * replaces a not-run one, a not-run one replaces "missed", anything else is
 * ignored.
 */
typedef struct ej_fire_event {
    const char *job_name;
    int64_t fire_time_ms;    /* the cron fire time (epoch ms); for runs off the
                                schedule (kind not CRON) the time they started */
    int sharding_item;       /* -1: every item (of the job, or of the reporting
                                instance: the fire did not get as far as items) */
    const char *outcome;     /* EJ_FIRE_RAN, or the reason it did not run */
    const char *kind;        /* "CRON", "CATCHUP" (a MISFIRE run at a fire time lost
                                while the item's owner died), "TRIGGER", "FAILOVER"
                                or "MISFIRE"; NULL: "CRON" */
    const char *instance_id; /* that ran or reported it; "" / NULL: none */
    char execution_id[EJ_EVENT_ID_LEN]; /* ran: the JOB_EXECUTION_LOG id; else "" */
    /* Record the row only when the ledger holds no later fire time of the
     * job (the start-up scan for fires missed while every instance was
     * down: the ledger's last row bounds what was missed). */
    bool only_after_last;
    int64_t recorded_time_ms; /* when it was known (epoch ms) */
} ej_fire_event;

/* ej_output_event.stream */
#define EJ_OUTPUT_STDOUT 1
#define EJ_OUTPUT_STDERR 2

/*
 * ejob's own (no 2.1.5 table): a piece of a running item's output, posted
 * while it runs so that it can be read before the item ends (stores keep it
 * in EJOB_EXECUTION_OUTPUT until the end event, which carries the whole
 * output, replaces it). The pieces of one stream follow each other without
 * a gap or an overlap, and stop at the job's output cap: they are the
 * first bytes of what the end event's output will hold.
 */
typedef struct ej_output_event {
    char execution_id[EJ_EVENT_ID_LEN]; /* the JOB_EXECUTION_LOG id */
    const char *job_name;
    int sharding_item;
    int stream;       /* EJ_OUTPUT_STDOUT or EJ_OUTPUT_STDERR */
    int64_t offset;   /* of data[0] in the stream */
    const char *data; /* len bytes (may hold NULs); NULL when dropped from the queue */
    size_t len;
    int64_t time_ms; /* when it was read (epoch ms) */
} ej_output_event;

typedef enum ej_event_type {
    EJ_EVENT_EXECUTION = 1,
    EJ_EVENT_STATUS = 2,
    EJ_EVENT_FIRE = 3,   /* ejob's fire ledger; sinks that do not know it skip it */
    EJ_EVENT_OUTPUT = 4, /* ejob's live output; sinks that do not know it skip it */
} ej_event_type;

typedef struct ej_event {
    ej_event_type type;
    union {
        ej_execution_event execution; /* EJ_EVENT_EXECUTION */
        ej_status_event status;       /* EJ_EVENT_STATUS */
        ej_fire_event fire;           /* EJ_EVENT_FIRE */
        ej_output_event output;       /* EJ_EVENT_OUTPUT */
    } u;
} ej_event;

/* The fire member does not change ej_event's size or layout (docs/abi.md). */
_Static_assert(sizeof(ej_fire_event) <= sizeof(ej_execution_event),
               "ej_fire_event must fit in the union without growing ej_event");
_Static_assert(sizeof(ej_output_event) <= sizeof(ej_execution_event),
               "ej_output_event must fit in the union without growing ej_event");

/* Fills out with a new random (version 4) UUID string. Thread-safe. */
EJ_EXTERN void ej_event_new_id(char out[EJ_EVENT_ID_LEN]);

/*
 * Java List.toString() of items: "[0, 1, 2]", "[]" for none. Caller frees.
 * NULL on allocation failure or when items is NULL and count > 0.
 */
EJ_EXTERN char *ej_event_items_string(const int *items, size_t count);

/*
 * A copy of ev with all of its strings and bytes in one allocation (free()
 * it). without_output leaves out output and error_output (an output
 * event's data), marking them
 * truncated. NULL on allocation failure, or when ev is NULL or of an
 * unknown type. Thread-safe.
 */
EJ_EXTERN ej_event *ej_event_dup(const ej_event *ev, bool without_output);

/* Bytes of output and error_output an execution event carries, or of data
 * an output event carries; 0 for other events. */
EJ_EXTERN size_t ej_event_output_bytes(const ej_event *ev);

/* --------------------------------------------------------------- bus */

typedef struct ej_event_bus ej_event_bus;

/*
 * A sink. Called on the bus thread, one event at a time, sinks in the order
 * they were added. ev and everything it points to is borrowed for the call.
 * A slow sink delays only the bus (events queue up, then drop), never a
 * fire.
 */
typedef void (*ej_event_sink_fn)(const ej_event *ev, void *user);

struct ej_event_bus_opts {
    size_t capacity;          /* events queued at most; 0: 10000 */
    int64_t flush_timeout_ms; /* how long destroy waits for the queue to drain; 0: 5000 */
    const char *name;         /* thread name suffix, "ej-events" by default (15 chars max) */
};

/* Counters; monotonic since the bus was created. */
struct ej_event_bus_stats {
    uint64_t posted;    /* accepted into the queue */
    uint64_t delivered; /* handed to the sinks (all of them) */
    uint64_t dropped;   /* refused: queue full, out of memory, or bus closing */
    size_t queued;      /* in the queue now */
};

/*
 * Creates a bus and starts its thread.
 * opts: may be NULL for defaults. out: receives the bus.
 * Returns 0; EJ_EINVAL (out NULL); EJ_ENOMEM; -errno from pthread_create.
 */
EJ_EXTERN int ej_event_bus_create(const struct ej_event_bus_opts *opts, ej_event_bus **out);

/*
 * Adds a sink. May be called at any time from any thread; events posted
 * before the call may or may not reach it.
 * Returns 0; EJ_EINVAL (bus or fn NULL); EJ_ENOMEM; EJ_ECLOSED while
 * destroying.
 */
EJ_EXTERN int ej_event_bus_add_sink(ej_event_bus *bus, ej_event_sink_fn fn, void *user);

/*
 * Posts a copy of ev (strings are copied; ev is borrowed for the call).
 * Never blocks beyond a short internal lock.
 * Returns 0 when queued; EJ_EAGAIN when the queue is full (counted as
 * dropped); EJ_ENOMEM (dropped); EJ_EINVAL (bus or ev NULL, unknown type);
 * EJ_ECLOSED when the bus is being destroyed (dropped).
 * Thread-safe.
 */
EJ_EXTERN int ej_event_bus_post(ej_event_bus *bus, const ej_event *ev);

/* Shorthands for ej_event_bus_post() with the type set. */
EJ_EXTERN int ej_event_bus_post_execution(ej_event_bus *bus, const ej_execution_event *ev);
EJ_EXTERN int ej_event_bus_post_status(ej_event_bus *bus, const ej_status_event *ev);
EJ_EXTERN int ej_event_bus_post_fire(ej_event_bus *bus, const ej_fire_event *ev);
EJ_EXTERN int ej_event_bus_post_output(ej_event_bus *bus, const ej_output_event *ev);

/*
 * Waits until every event posted before the call has been delivered, at
 * most timeout_ms (negative: no limit). Must not be called from a sink.
 * Returns 0; EJ_ETIMEDOUT; EJ_EINVAL (bus NULL).
 */
EJ_EXTERN int ej_event_bus_flush(ej_event_bus *bus, int64_t timeout_ms);

/* Reads the counters. Thread-safe. */
EJ_EXTERN void ej_event_bus_stats(ej_event_bus *bus, struct ej_event_bus_stats *out);

/*
 * Stops accepting events, delivers what is queued (waiting at most
 * flush_timeout_ms; what is left after that is counted as dropped and
 * logged), stops the thread and frees the bus. Accepts NULL. Must not be
 * called from a sink.
 */
EJ_EXTERN void ej_event_bus_destroy(ej_event_bus *bus);

/*
 * The built-in log sink: one line per event through EJ_LOG (module "event",
 * INFO for successes and status changes, WARN for failed executions and
 * TASK_ERROR). user is ignored. Add it with
 * ej_event_bus_add_sink(bus, ej_event_log_sink, NULL).
 */
EJ_EXTERN void ej_event_log_sink(const ej_event *ev, void *user);

#endif
