/*
 * Execution history (SPEC section 8): the stores that keep the events of
 * the event bus (event.h) in a relational database, and the read API that
 * `ejob history` and the web console use.
 *
 * Tables. A store creates, when missing, ElasticJob 2.1.5's two tables with
 * its columns, types and index (reference 1.9): JOB_EXECUTION_LOG (one row
 * per item run) and JOB_STATUS_TRACE_LOG (one row per status change of a
 * fire), and writes them with ElasticJob's value formats and semantics: the
 * start event inserts the row (a duplicate id is ignored), the end event
 * updates it and inserts the whole row when the start never arrived;
 * failure_cause and message are cut to 4000 characters. Identifiers are
 * unquoted, so PostgreSQL folds them to lower case, which is what
 * ElasticJob's unquoted SQL reads. Timestamps are local time (the process's
 * TZ) without a zone, as Java's java.sql.Timestamp writes them.
 * ejob's own data goes to a table of its own keyed by execution id,
 * EJOB_EXECUTION_DETAIL: instance id, fencing token, exit code, signal,
 * HTTP status, duration, stdout, stderr (bytes: BLOB in SQLite, bytea in
 * PostgreSQL, stored exactly as captured) and truncation flags. Java's
 * tables are never altered; ejob adds two indexes to them (start_time,
 * creation_time) for history queries and retention.
 *
 * Threads. A store owns one writer thread ("ej-trace"). ej_trace_store_post
 * (and the bus sink ej_trace_sink) only copy the event into the store's
 * bounded queue and never wait for the database. The writer takes what is
 * queued, writes it in one transaction (at most EJ_TRACE_BATCH_MAX events),
 * and on a lost, locked, read-only or full database keeps the events
 * queued and retries with exponential back-off (reconnecting as needed).
 * Events the queue cannot take are counted (stats) and logged at most once
 * every 10 s; an event the database refuses on its own (after its batch
 * failed and it was retried alone) is counted as rejected and logged. The
 * retention purge runs on the writer thread in small chunks between
 * batches. Every function may be called from any thread.
 *
 * A reader is a plain connection for queries: its calls block on the
 * database; one reader must not be used by two threads at once.
 */
#ifndef EJOB_TRACE_H
#define EJOB_TRACE_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "ejob/common.h"
#include "ejob/event.h"

/* Most events one transaction writes. */
#define EJ_TRACE_BATCH_MAX 256
/* ElasticJob's cut of failure_cause and message, in characters. */
#define EJ_TRACE_TEXT_MAX 4000
/* Default retention and per-stream output cap (the YAML defaults). */
#define EJ_TRACE_RETENTION_DAYS_DEFAULT 7
#define EJ_TRACE_OUTPUT_MAX_DEFAULT 65536

typedef enum ej_trace_kind {
    EJ_TRACE_SQLITE = 1,
    EJ_TRACE_POSTGRESQL = 2,
} ej_trace_kind;

/* Where the history is. Strings are borrowed for the call they are given
 * to (create / open copy what they keep). */
struct ej_trace_target {
    ej_trace_kind kind;
    /* SQLite: a file path (created with its directory's permissions).
     * PostgreSQL: a libpq connection URI ("postgresql://user@host:5432/db")
     * or keyword string ("host=... dbname=..."). */
    const char *url;
    /* PostgreSQL password, or NULL: then EJOB_TRACING_PASSWORD from the
     * environment, else libpq's own (PGPASSWORD, ~/.pgpass). */
    const char *password;
};

/*
 * Parses a store name as `ejob history --store` and the console take it:
 * "sqlite:PATH"; "postgresql://..." / "postgres://..." (libpq URI) or a
 * libpq keyword string ("host=db user=ejob dbname=jobs": it opens with
 * KEYWORD=), both PostgreSQL; else a plain path (SQLite; one that looks
 * like a keyword string is written sqlite:PATH). url points into spec
 * (borrowed). Returns 0, or EJ_EINVAL with a message in err: empty, unknown
 * scheme, a connection string libpq refuses, or one that carries a
 * password (password or sslpassword, in either form, refused with the same
 * words: passwords belong in the environment or a password file, never on
 * a command line).
 */
EJ_EXTERN int ej_trace_target_parse(const char *spec, struct ej_trace_target *out, char *err,
                                    size_t errlen);

/*
 * The store as it may be shown (logs, the console's replies): SQLite
 * "sqlite:PATH"; PostgreSQL "postgresql: host=db port=5432 dbname=jobs
 * user=ejob", the options that name the database (host, hostaddr, port,
 * dbname, user, sslmode) in keyword form whatever form it was given in, so
 * never a password. Caller frees; NULL for NULL or out of memory.
 */
EJ_EXTERN char *ej_trace_target_display(const struct ej_trace_target *t);

/*
 * Reads a password file: its first line, without the line end. Caller
 * frees *out. A group- or world-writable file is refused and a
 * world-readable one logged as a warning, as for the ZooKeeper digest
 * (ej_config_check_secret_mode). Returns 0, -errno (err names the file),
 * EJ_ECONFIG (refused: err says why and how to fix it), EJ_EINVAL (empty).
 */
EJ_EXTERN int ej_trace_read_password_file(const char *path, char **out, char *err, size_t errlen);

/* ------------------------------------------------------------- writing */

typedef struct ej_trace_store ej_trace_store;

struct ej_trace_store_opts {
    struct ej_trace_target target;
    int retention_days;        /* rows older are purged; 0: keep forever; <0: default 7 */
    size_t queue_capacity;     /* events buffered at most; 0: 100000 */
    size_t queue_bytes;        /* bytes of output buffered at most; 0: 64 MiB */
    int64_t flush_timeout_ms;  /* how long destroy writes what is buffered; 0: 5000 */
    int64_t op_timeout_ms;     /* PostgreSQL: bound on one connect or statement; 0: 10000 */
    int64_t busy_timeout_ms;   /* SQLite: wait for another writer's lock; 0: 2000 */
    int64_t retry_max_ms;      /* back-off ceiling between attempts; 0: 30000 */
    int64_t purge_interval_ms; /* between retention passes; 0: 1 hour */
};

/* Counters since the store was created, and its state now. */
struct ej_trace_stats {
    uint64_t accepted;        /* taken into the queue */
    uint64_t written;         /* committed to the database */
    uint64_t dropped;         /* not taken: queue full, out of memory, or store closing;
                                 plus what was still queued when destroy gave up */
    uint64_t rejected;        /* refused by the database on their own (logged) */
    uint64_t output_stripped; /* taken without their output: output bytes over queue_bytes */
    uint64_t batches;         /* transactions committed */
    uint64_t failures;        /* failed attempts to write (each retried later) */
    uint64_t reconnects;      /* connections opened after the first */
    uint64_t purged;          /* rows removed by retention */
    size_t queued;            /* events waiting now */
    size_t queued_bytes;      /* output bytes waiting now */
    bool connected;           /* the writer has a working connection now */
    int64_t last_write_ms;    /* epoch ms of the last commit; 0: none yet */
    char last_error[256];     /* the last database error, "" if none */
};

/*
 * Creates a store and starts its writer thread. The first connection is
 * made on that thread: a database that is down at start is retried like a
 * lost one, and create does not wait for it.
 * Returns 0; EJ_EINVAL (opts, url or out NULL, unknown kind); EJ_ENOMEM;
 * -errno from pthread_create.
 */
EJ_EXTERN int ej_trace_store_create(const struct ej_trace_store_opts *opts, ej_trace_store **out);

/*
 * Queues a copy of ev (ev is borrowed for the call). Never waits for the
 * database. Returns 0; EJ_EAGAIN (queue full: counted as dropped);
 * EJ_ENOMEM (dropped); EJ_ECLOSED (being destroyed: dropped); EJ_EINVAL.
 */
EJ_EXTERN int ej_trace_store_post(ej_trace_store *store, const ej_event *ev);

/* A bus sink (event.h) posting to the store given as user:
 * ej_event_bus_add_sink(bus, ej_trace_sink, store). */
EJ_EXTERN void ej_trace_sink(const ej_event *ev, void *store);

/*
 * Waits until everything queued before the call is written (or rejected),
 * at most timeout_ms (<0: no limit). Returns 0; EJ_ETIMEDOUT; EJ_EINVAL.
 */
EJ_EXTERN int ej_trace_store_flush(ej_trace_store *store, int64_t timeout_ms);

/* Reads the counters. */
EJ_EXTERN void ej_trace_store_stats(ej_trace_store *store, struct ej_trace_stats *out);

/*
 * Runs a retention pass now (on the writer thread) and waits for it, at
 * most timeout_ms. Returns 0, EJ_ETIMEDOUT, EJ_EINVAL.
 */
EJ_EXTERN int ej_trace_store_purge(ej_trace_store *store, int64_t timeout_ms);

/*
 * Stops taking events, writes what is queued (at most flush_timeout_ms;
 * what is left is counted as dropped and logged), closes the connection,
 * joins the thread and frees the store. Accepts NULL.
 */
EJ_EXTERN void ej_trace_store_destroy(ej_trace_store *store);

/*
 * A job's own retention (its tracing.retentionDays / failedRetentionDays):
 * its runs are kept days (-1: the store's retention_days; 0: forever), its
 * failed runs (and TASK_ERROR status rows) failed_days (-1: as days).
 * Both -1 drops the job's rule. Written to ejob's EJOB_JOB_RETENTION at the
 * next retention pass, so every daemon sharing the store applies it; the
 * store-wide retention then leaves that job alone.
 * Returns 0; EJ_EINVAL (no store, no name or one over 100 bytes); EJ_ENOMEM.
 */
EJ_EXTERN int ej_trace_store_set_job_retention(ej_trace_store *store, const char *job_name,
                                               int days, int failed_days);

/* ------------------------------------------------------------- reading */

typedef struct ej_trace_reader ej_trace_reader;

/*
 * Opens a reader. SQLite files are opened read-only and must exist.
 * Returns 0; EJ_ENOTFOUND (no such SQLite file, or the tables are
 * missing); EJ_EDB (cannot connect: err says why); EJ_EINVAL; EJ_ENOMEM.
 */
EJ_EXTERN int ej_trace_reader_open(const struct ej_trace_target *target, ej_trace_reader **out,
                                   char *err, size_t errlen);

/* The last error of the reader, "" if none. Borrowed until the next call. */
EJ_EXTERN const char *ej_trace_reader_errmsg(const ej_trace_reader *reader);

EJ_EXTERN void ej_trace_reader_close(ej_trace_reader *reader);

/* Filters of a history query; zero-initialise, then set what you need. */
struct ej_trace_query {
    const char *job_name;    /* NULL: every job */
    int64_t since_ms;        /* start_time >= this (epoch ms); 0: no bound */
    int64_t until_ms;        /* start_time < this; 0: no bound */
    bool failed_only;        /* ended and not successful */
    int item;                /* -1: every item (set it: 0 means item 0) */
    const char *instance_id; /* "IP@-@PID": runs whose task id ends with it; NULL: any */
    const char *output_text; /* in its stdout, stderr or failure cause; NULL: any */
    /* Paging by cursor, the (sort_ms, id) of a row of an earlier page:
     * older (-1) or newer (+1) rows than it; 0: the newest. Newest first
     * either way. */
    int page;
    int64_t cursor_ms;
    const char *cursor_id;
    size_t limit; /* newest first; 0: 100 */
};

/* One JOB_EXECUTION_LOG row with ejob's detail when it has one. Strings
 * are owned by the list or detail holding the row. */
struct ej_trace_execution {
    char *id;
    char *job_name;
    char *task_id;
    char *hostname;
    char *ip;
    char *instance_id; /* from the task id; "" when it has none */
    int sharding_item;
    char *execution_source; /* NORMAL_TRIGGER, MISFIRE, FAILOVER */
    bool is_success;
    bool completed;        /* complete_time is set */
    int64_t start_ms;      /* epoch ms; 0 when NULL */
    int64_t complete_ms;   /* epoch ms; 0 when NULL */
    /* The writer's UTC offset at the start (an EJOB_EXECUTION_INSTANT row:
     * the instants above are exact); else the times were read as local
     * times of this process, as Java's console reads them. */
    bool utc_offset_known;
    int32_t utc_offset_s;
    int64_t sort_ms; /* the query's order and cursor (ej_trace_query_executions) */
    char *failure_cause;   /* NULL when none */
    bool has_detail;       /* an EJOB_EXECUTION_DETAIL row exists */
    int64_t duration_ms;   /* detail, else complete - start, else -1 */
    int exit_code;         /* detail: -1 none */
    int term_signal;       /* detail: 0 none */
    long http_status;      /* detail: 0 none */
    int64_t fencing_token; /* detail: 0 none */
    bool failure_cause_truncated;
    /* EJOB_EXECUTION_RESULT: "success", "failed", "timeout", "killed" ("" while
     * running; by is_success for rows without one); the attempt (1..);
     * who killed it (NULL: not killed or not known). */
    char *result;
    int attempt;
    char *killed_by;
    /* Output (only from ej_trace_get_execution): bytes, not
     * NUL-terminated text (a NUL follows them for convenience). */
    unsigned char *out;
    size_t out_len;
    bool out_truncated;
    unsigned char *err;
    size_t err_len;
    bool err_truncated;
};

struct ej_trace_execution_list {
    struct ej_trace_execution *rows;
    size_t count;
};

/* One JOB_STATUS_TRACE_LOG row. */
struct ej_trace_status {
    char *id;
    char *job_name;
    char *task_id;
    char *slave_id;
    char *source;
    char *execution_type;
    char *sharding_item; /* "[0, 1]" */
    char *state;         /* TASK_STAGING ... */
    char *message;       /* NULL when none */
    int64_t creation_ms;
};

/* An execution with its output and the status changes of its fire. */
struct ej_trace_execution_detail {
    struct ej_trace_execution execution;
    struct ej_trace_status *trail; /* oldest first */
    size_t trail_count;
};

/*
 * Executions matching q (NULL: the newest 100), newest first (by the
 * start instant, then id ascending). out is
 * filled on success (caller finalises with ej_trace_execution_list_fini).
 * Returns 0; EJ_EDB (reader errmsg says why); EJ_EINVAL; EJ_ENOMEM.
 */
EJ_EXTERN int ej_trace_query_executions(ej_trace_reader *reader, const struct ej_trace_query *q,
                                        struct ej_trace_execution_list *out);

/*
 * One execution by id (or a unique prefix of it) with its output and
 * status trail: the status rows of
 * its task id from the last TASK_STAGING at or before its start to the
 * first TASK_FINISHED / TASK_ERROR at or after its end. Caller finalises
 * with ej_trace_execution_detail_fini.
 * Returns 0; EJ_ENOTFOUND; EJ_EDB; EJ_EINVAL (also: a prefix matching
 * several); EJ_ENOMEM.
 */
EJ_EXTERN int ej_trace_get_execution(ej_trace_reader *reader, const char *id,
                                     struct ej_trace_execution_detail *out);

/* Free what the functions above filled. Accept NULL and zeroed structs. */
EJ_EXTERN void ej_trace_execution_list_fini(struct ej_trace_execution_list *list);
EJ_EXTERN void ej_trace_execution_detail_fini(struct ej_trace_execution_detail *detail);

/* ---------------------------------------------------------- live output */

/* What a run has written from given byte offsets: while it runs, the
 * pieces its daemon has stored so far (EJOB_EXECUTION_OUTPUT, at most
 * ~250 ms behind the item); once it has ended, its whole output. */
struct ej_trace_output {
    bool completed;     /* the run has ended: these are its last bytes */
    bool is_success;    /* when completed */
    unsigned char *out; /* stdout bytes from out_from (NUL follows); NULL: none */
    size_t out_len;
    int64_t out_next;   /* the offset to ask for next */
    unsigned char *err; /* stderr, the same way */
    size_t err_len;
    int64_t err_next;
    bool out_truncated, err_truncated; /* cut at the cap (known once completed) */
};

/*
 * The output of run id (the whole id) from out_from / err_from: call again
 * with out_next / err_next to follow it until completed. Bytes a full queue
 * dropped are stepped over (next then jumps). Caller finalises with
 * ej_trace_output_fini.
 * Returns 0; EJ_ENOTFOUND (no such run yet); EJ_EDB; EJ_EINVAL; EJ_ENOMEM.
 */
EJ_EXTERN int ej_trace_read_output(ej_trace_reader *reader, const char *id, int64_t out_from,
                                   int64_t err_from, struct ej_trace_output *out);
EJ_EXTERN void ej_trace_output_fini(struct ej_trace_output *out);

/* ---------------------------------------------------------- fire ledger */

/* Filters of a fire-ledger query; zero-initialise, then set what you need. */
struct ej_trace_fire_query {
    const char *job_name; /* NULL: every job */
    int64_t since_ms;     /* fire_time >= this (epoch ms); 0: no bound */
    int64_t until_ms;     /* fire_time < this; 0: no bound */
    int item;             /* -1: every item; else this item and the job-wide rows (-1) */
    size_t limit;         /* rows at most, the newest fire times kept; 0: 10000 */
};

/* One EJOB_FIRE_LEDGER row (event.h, ej_fire_event), with the result of
 * its run. Strings are owned by the list. */
struct ej_trace_fire {
    char *job_name;
    int64_t fire_time_ms;
    int sharding_item;  /* -1: every item (of the job, or of the reporting instance) */
    char *outcome;      /* "ran", or the reason it did not run ("missed", "paused" ...) */
    char *kind;         /* CRON, CATCHUP, TRIGGER, FAILOVER, MISFIRE */
    char *execution_id; /* "" when it did not run */
    char *instance_id;  /* that ran or reported it; "" for missed */
    int64_t recorded_ms;
    /* ran: "running", "succeeded", "failed", or "unknown" (its
     * JOB_EXECUTION_LOG row is gone); "" otherwise. Of the last attempt
     * when the item was retried. */
    char *result;
    int attempts; /* ran: how many attempts (retries + 1); 0: not known */
};

struct ej_trace_fire_list {
    struct ej_trace_fire *rows; /* oldest fire time first, then by item */
    size_t count;
};

/*
 * The ledger rows matching q (NULL: the newest 10000). out is filled on
 * success (caller finalises with ej_trace_fire_list_fini).
 * Returns 0; EJ_ENOTFOUND (the store has no ledger yet: written by an
 * older ejob); EJ_EDB (reader errmsg says why); EJ_EINVAL; EJ_ENOMEM.
 */
EJ_EXTERN int ej_trace_query_fires(ej_trace_reader *reader, const struct ej_trace_fire_query *q,
                                   struct ej_trace_fire_list *out);
EJ_EXTERN void ej_trace_fire_list_fini(struct ej_trace_fire_list *list);

#endif
