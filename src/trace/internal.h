/*
 * The trace module's design in miniature.
 *
 * store.c   the writer: a bounded queue of event copies (ej_event_dup), one
 *           thread that peeks up to EJ_TRACE_BATCH_MAX queued events,
 *           writes them in one transaction and pops them only once the
 *           transaction committed. A transient failure (connection lost,
 *           database locked, read-only or full) leaves them queued, closes
 *           the connection and retries after an exponential back-off; any
 *           other failure re-writes the batch one event per transaction so
 *           that only the event the database refuses is rejected. Only the
 *           writer pops, so the peeked head of the ring stays put while the
 *           lock is released for the database call (posters only append).
 * schema.c  the SQL (shared by both databases: parameters are written $1,
 *           $2 ... in order of first appearance, which SQLite numbers the
 *           same way) and the mapping of an event to rows.
 * read.c    the read API on top of a connection.
 * sqlite.c, pg.c  one backend each, behind struct ej__trace_ops.
 *
 * Backend calls return 0, EJ_EAGAIN (transient: the store keeps the events
 * and reconnects) or EJ_EDB (this statement failed on its data).
 */
#ifndef EJ_TRACE_INTERNAL_H
#define EJ_TRACE_INTERNAL_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "ejob/event.h"
#include "ejob/trace.h"

/* A statement parameter. Text and blobs are borrowed for the call. */
enum { EJ__TP_NULL = 0, EJ__TP_TEXT, EJ__TP_INT, EJ__TP_BLOB };
struct ej__tp {
    int type;
    const char *s; /* TEXT (NUL-terminated) or BLOB (len bytes) */
    size_t len;
    int64_t i;
};

/* A result row as the backend hands it to a row callback. */
struct ej__row {
    void *impl;
    bool (*is_null)(const struct ej__row *r, int col);
    const char *(*text)(const struct ej__row *r, int col); /* "" for NULL */
    int64_t (*int64)(const struct ej__row *r, int col);    /* 0 for NULL */
    /* Bytes of a BLOB / bytea column in a new allocation (NUL added);
     * *len receives the length. NULL for SQL NULL (and on ENOMEM, with
     * *oom set). */
    unsigned char *(*blob)(const struct ej__row *r, int col, size_t *len, bool *oom);
};

typedef int (*ej__row_fn)(const struct ej__row *row, void *arg);

struct ej__trace_conn;

struct ej__trace_ops {
    const char *name; /* "SQLite" or "PostgreSQL" */
    /* writer: create the schema when missing (SQLite: read-write, WAL);
     * else open for reading (SQLite: read-only; EJ_ENOTFOUND when the file
     * or the tables are missing). */
    int (*connect)(const struct ej_trace_target *t, bool writer, int64_t timeout_ms,
                   struct ej__trace_conn **out, char *err, size_t errlen);
    void (*close)(struct ej__trace_conn *c);
    const char *(*errmsg)(const struct ej__trace_conn *c);
    /* Runs one statement; *changes (may be NULL) receives the rows changed. */
    int (*run)(struct ej__trace_conn *c, const char *sql, const struct ej__tp *p, int n,
               int64_t *changes);
    /* Runs a query and calls fn per row (fn returning non-zero stops and
     * is returned). */
    int (*select)(struct ej__trace_conn *c, const char *sql, const struct ej__tp *p, int n,
                  ej__row_fn fn, void *arg);
    /* SQL of the epoch ms of a TIMESTAMP column ({col}) read as UTC. */
    const char *naive_ms_sql;
    /* SQL true when the bytes column {col} holds the text of parameter
     * {param} (SQLite: LIKE, ASCII case-insensitive; PostgreSQL: bytes). */
    const char *output_match_sql;
    /* output_match_sql's parameter is a LIKE pattern ("%text%"), else the
     * text itself. */
    bool output_match_like;
    /* The type name of a bytes column ("BLOB" / "BYTEA"). */
    const char *blob_type;
    /* Statements inside BEGIN ... COMMIT cannot report rows changed (they
     * are pipelined): write an execution's end as one statement. */
    bool pipelined;
};

extern const struct ej__trace_ops ej__trace_sqlite_ops;
extern const struct ej__trace_ops ej__trace_pg_ops;

const struct ej__trace_ops *ej__trace_ops_of(ej_trace_kind kind);

/* The reader behind the read API (read.c, live.c). */
struct ej_trace_reader {
    const struct ej__trace_ops *ops;
    struct ej__trace_conn *conn;
    bool has_instants; /* the store has EJOB_EXECUTION_INSTANT */
    bool has_results;  /* and EJOB_EXECUTION_RESULT */
    char err[512];
};

/* ------------------------------------------------------------ schema.c */

/* Creates the tables and indexes that are missing (IF NOT EXISTS). */
int ej__trace_create_schema(const struct ej__trace_ops *ops, struct ej__trace_conn *c);

/* Writes one event (inside the caller's transaction). */
int ej__trace_write_event(const struct ej__trace_ops *ops, struct ej__trace_conn *c,
                          const ej_event *ev);

/* Deletes at most chunk rows older than cutoff_ms (0: none, kept
 * forever) from each table, but for the jobs of EJOB_JOB_RETENTION, whose
 * own rules apply (default_days: theirs when they say -1); *deleted
 * receives how many in all. */
int ej__trace_purge_chunk(const struct ej__trace_ops *ops, struct ej__trace_conn *c,
                          int64_t cutoff_ms, int default_days, int chunk, int64_t *deleted);

/* ------------------------------------------------------- retention.c */

/* A job's own retention (ej_trace_store_set_job_retention). */
struct ej__job_retention {
    char job_name[101];
    int days;        /* -1: the store's; 0: forever */
    int failed_days; /* -1: as days; 0: forever */
};

/* EJOB_JOB_RETENTION, the jobs' own rules. */
int ej__trace_retention_create(const struct ej__trace_ops *ops, struct ej__trace_conn *c);
/* Writes (both -1: removes) the rules. */
int ej__trace_retention_write(const struct ej__trace_ops *ops, struct ej__trace_conn *c,
                              const struct ej__job_retention *rules, size_t n);
/* Applies every rule of the table (at most chunk rows per statement), then
 * deletes the details whose run row is gone. */
int ej__trace_retention_purge(const struct ej__trace_ops *ops, struct ej__trace_conn *c,
                              int default_days, int64_t now_ms, int chunk, int64_t *deleted);

/* ------------------------------------------------------------- live.c */

/* EJOB_EXECUTION_OUTPUT, the pieces of running items' output. */
int ej__trace_live_create(const struct ej__trace_ops *ops, struct ej__trace_conn *c);
/* Writes one piece (an EJ_EVENT_OUTPUT; one without data is skipped). */
int ej__trace_live_write(const struct ej__trace_ops *ops, struct ej__trace_conn *c,
                         const ej_output_event *e);
/* The item ended: its end event holds the whole output, the pieces go
 * (unless the end event lost its output in the queue: e's output NULL and
 * marked truncated). */
int ej__trace_live_end(const struct ej__trace_ops *ops, struct ej__trace_conn *c,
                       const ej_execution_event *e);
/* Retention of the pieces: those written before cutoff_ms, and those of
 * runs whose JOB_EXECUTION_LOG row is gone. */
int ej__trace_live_purge(const struct ej__trace_ops *ops, struct ej__trace_conn *c,
                         int64_t cutoff_ms, int chunk, int64_t *deleted);
/* Fills e's out / err from the pieces of its run (it has not ended, or its
 * end lost the output). */
int ej__trace_live_fill(ej_trace_reader *r, struct ej_trace_execution *e);

/* "YYYY-MM-DD HH:MM:SS.mmm" in local time. */
void ej__trace_format_time(int64_t epoch_ms, char out[32]);
/* The same in the zone of UTC offset offset_s (known_offset), else local. */
void ej__trace_format_time_at(int64_t epoch_ms, bool known_offset, int32_t offset_s, char out[32]);
/* Parses what format_time writes (and PostgreSQL's timestamp text: any
 * number of fraction digits, or none). Returns epoch ms, 0 for "" or junk. */
int64_t ej__trace_parse_time(const char *s);
/* The same, as the local time of a writer whose UTC offset was offset_s
 * (known_offset), else of this process. */
int64_t ej__trace_parse_time_at(const char *s, bool known_offset, int32_t offset_s);
/* This process's UTC offset at epoch_ms, in seconds. */
int32_t ej__trace_utc_offset_s(int64_t epoch_ms);

/* A copy of s that is valid UTF-8 (each invalid byte becomes U+FFFD) and
 * at most max_chars characters; *cut says whether it was cut. NULL stays
 * NULL (and on ENOMEM, with *oom set). Caller frees. */
char *ej__trace_clean_text(const char *s, size_t max_chars, bool *cut, bool *oom);

/* The instance id at the end of a task id ("ip@-@pid"), "" when none.
 * Borrowed from task_id. */
const char *ej__trace_instance_of(const char *task_id);

#endif
