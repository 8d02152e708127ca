/*
 * Live output: the pieces of a running item's output (EJ_EVENT_OUTPUT) in
 * ejob's own table EJOB_EXECUTION_OUTPUT, and reading them back by byte
 * offset. The end event writes the whole output into EJOB_EXECUTION_DETAIL
 * as before and deletes the pieces in the same transaction, so a store
 * holds at most one output cap per stream of each running item here.
 * JOB_EXECUTION_LOG and JOB_STATUS_TRACE_LOG stay 2.1.5's.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "common/util.h"
#include "ejob/error.h"
#include "trace/internal.h"

/* Pieces left behind by a daemon that died mid-run whose run row is gone
 * (retention) are swept this long after they were written. */
#define ORPHAN_AGE_MS (3600 * 1000)

static const char ddl_output_fmt[] = "CREATE TABLE IF NOT EXISTS EJOB_EXECUTION_OUTPUT ("
                                     "id VARCHAR(40) NOT NULL, "
                                     "stream INT NOT NULL, "
                                     "byte_offset BIGINT NOT NULL, "
                                     "data %s NOT NULL, "
                                     "written_time_ms BIGINT NOT NULL, "
                                     "PRIMARY KEY (id, stream, byte_offset))";

int ej__trace_live_create(const struct ej__trace_ops *ops, struct ej__trace_conn *c)
{
    char ddl[512];
    snprintf(ddl, sizeof ddl, ddl_output_fmt, ops->blob_type);
    int rc = ops->run(c, ddl, NULL, 0, NULL);
    if (rc == 0)
        rc = ops->run(c,
                      "CREATE INDEX IF NOT EXISTS EJOB_OUTPUT_WRITTEN_INDEX ON "
                      "EJOB_EXECUTION_OUTPUT (written_time_ms)",
                      NULL, 0, NULL);
    return rc;
}

static struct ej__tp tp_text(const char *s)
{
    return (struct ej__tp){.type = s ? EJ__TP_TEXT : EJ__TP_NULL, .s = s};
}

static struct ej__tp tp_int(int64_t i)
{
    return (struct ej__tp){.type = EJ__TP_INT, .i = i};
}

int ej__trace_live_write(const struct ej__trace_ops *ops, struct ej__trace_conn *c,
                         const ej_output_event *e)
{
    if (e->data == NULL || e->len == 0)
        return 0; /* dropped from the queue: a gap the reader steps over */
    static const char sql[] =
        "INSERT INTO EJOB_EXECUTION_OUTPUT (id, stream, byte_offset, data, written_time_ms) "
        "VALUES ($1, $2, $3, $4, $5) ON CONFLICT (id, stream, byte_offset) DO NOTHING";
    struct ej__tp p[5] = {
        tp_text(e->execution_id), tp_int(e->stream),
        tp_int(e->offset),        {.type = EJ__TP_BLOB, .s = e->data, .len = e->len},
        tp_int(e->time_ms),
    };
    return ops->run(c, sql, p, 5, NULL);
}

/* The end event lost its output in the queue (ej_event_dup without
 * output): the pieces are all there is of it. */
static bool lost_output(const ej_execution_event *e)
{
    return (e->output == NULL && e->output_truncated) ||
           (e->error_output == NULL && e->error_output_truncated);
}

int ej__trace_live_end(const struct ej__trace_ops *ops, struct ej__trace_conn *c,
                       const ej_execution_event *e)
{
    if (lost_output(e))
        return 0;
    struct ej__tp p[1] = {tp_text(e->id)};
    return ops->run(c, "DELETE FROM EJOB_EXECUTION_OUTPUT WHERE id = $1", p, 1, NULL);
}

int ej__trace_live_purge(const struct ej__trace_ops *ops, struct ej__trace_conn *c,
                         int64_t cutoff_ms, int chunk, int64_t *deleted)
{
    static const char sql_old[] =
        "DELETE FROM EJOB_EXECUTION_OUTPUT WHERE (id, stream, byte_offset) IN (SELECT id, "
        "stream, byte_offset FROM EJOB_EXECUTION_OUTPUT WHERE written_time_ms < $1 LIMIT $2)";
    static const char sql_orphans[] =
        "DELETE FROM EJOB_EXECUTION_OUTPUT WHERE (id, stream, byte_offset) IN (SELECT o.id, "
        "o.stream, o.byte_offset FROM EJOB_EXECUTION_OUTPUT o LEFT JOIN JOB_EXECUTION_LOG e ON "
        "e.id = o.id WHERE e.id IS NULL AND o.written_time_ms < $1 LIMIT $2)";
    int64_t orphan_cutoff = ej__now_ms() - ORPHAN_AGE_MS;
    struct ej__tp p[2] = {tp_int(cutoff_ms), tp_int(chunk)};
    int64_t n = 0;
    int rc = cutoff_ms > 0 ? ops->run(c, sql_old, p, 2, &n) : 0;
    if (rc != 0)
        return rc;
    *deleted += n;
    p[0] = tp_int(orphan_cutoff);
    n = 0;
    rc = ops->run(c, sql_orphans, p, 2, &n);
    if (rc == 0)
        *deleted += n;
    return rc;
}

/* ------------------------------------------------------------- reading */

/* Bytes of one stream from an offset, gathered from its pieces. */
struct gather {
    ej_buf b;
    int64_t next; /* the stream offset after the bytes gathered */
    bool oom;
};

static int add_piece(const struct ej__row *row, void *arg)
{
    struct gather *g = arg;
    int64_t off = row->int64(row, 0);
    size_t len = 0;
    bool oom = false;
    unsigned char *data = row->blob(row, 1, &len, &oom);
    if (data == NULL)
        return oom ? EJ_ENOMEM : 0;
    /* A piece the queue dropped leaves a gap: step over it. */
    if (off > g->next)
        g->next = off;
    int64_t skip = g->next - off;
    if (skip < (int64_t)len) {
        ej__buf_append(&g->b, (const char *)data + skip, len - (size_t)skip);
        g->oom = g->b.failed;
        g->next = off + (int64_t)len;
    }
    free(data);
    return g->oom ? EJ_ENOMEM : 0;
}

/* The pieces of stream of run id from offset from: *out (owned, NUL
 * added; NULL when none), *len, *next (from when none). */
static int read_pieces(ej_trace_reader *r, const char *id, int stream, int64_t from,
                       unsigned char **out, size_t *len, int64_t *next)
{
    static const char sql[] =
        "SELECT byte_offset, data FROM EJOB_EXECUTION_OUTPUT WHERE id = $1 AND stream = $2 "
        "AND byte_offset + LENGTH(data) > $3 ORDER BY byte_offset";
    struct gather g = {.next = from};
    ej__buf_init(&g.b);
    struct ej__tp p[3] = {tp_text(id), tp_int(stream), tp_int(from)};
    int rc = r->ops->select(r->conn, sql, p, 3, add_piece, &g);
    /* A store an older ejob made has no such table: no pieces. */
    if (rc == EJ_EDB && strcasestr(r->ops->errmsg(r->conn), "EJOB_EXECUTION_OUTPUT") != NULL)
        rc = 0;
    *len = rc == 0 ? g.b.len : 0;
    *next = g.next;
    *out = rc == 0 && !g.oom && g.b.len > 0 ? (unsigned char *)ej__buf_steal(&g.b) : NULL;
    ej__buf_fini(&g.b);
    if (rc == 0 && g.oom)
        rc = EJ_ENOMEM;
    if (rc != 0 && *out != NULL) {
        free(*out);
        *out = NULL;
    }
    return rc;
}

int ej__trace_live_fill(ej_trace_reader *r, struct ej_trace_execution *e)
{
    int64_t next;
    int rc = 0;
    if (e->out == NULL)
        rc = read_pieces(r, e->id, EJ_OUTPUT_STDOUT, 0, &e->out, &e->out_len, &next);
    if (rc == 0 && e->err == NULL)
        rc = read_pieces(r, e->id, EJ_OUTPUT_STDERR, 0, &e->err, &e->err_len, &next);
    return rc;
}

/* One row of the run: whether it ended, and its detail's output. */
struct run_row {
    bool found, completed, is_success, has_detail;
    unsigned char *blob[2];
    size_t len[2];
    bool truncated[2];
    bool oom;
};

static int take_run(const struct ej__row *row, void *arg)
{
    struct run_row *w = arg;
    w->found = true;
    w->completed = !row->is_null(row, 0);
    w->is_success = row->int64(row, 1) != 0;
    w->has_detail = !row->is_null(row, 2);
    for (int s = 0; s < 2 && w->has_detail; s++) {
        w->truncated[s] = row->int64(row, 3 + s) != 0;
        w->blob[s] = row->blob(row, 5 + s, &w->len[s], &w->oom);
    }
    return w->oom ? EJ_ENOMEM : 0;
}

/* Bytes [from, len) of an ended run's whole output, into *out. */
static int tail_of(const unsigned char *all, size_t len, int64_t from, unsigned char **out,
                   size_t *out_len, int64_t *next)
{
    size_t start = from < 0 ? 0 : (size_t)from > len ? len : (size_t)from;
    *out_len = len - start;
    *next = (int64_t)len > from ? (int64_t)len : from;
    *out = NULL;
    if (*out_len == 0)
        return 0;
    *out = malloc(*out_len + 1);
    if (*out == NULL)
        return EJ_ENOMEM;
    memcpy(*out, all + start, *out_len);
    (*out)[*out_len] = '\0';
    return 0;
}

int ej_trace_read_output(ej_trace_reader *r, const char *id, int64_t out_from, int64_t err_from,
                         struct ej_trace_output *o)
{
    if (r == NULL || id == NULL || o == NULL)
        return EJ_EINVAL;
    memset(o, 0, sizeof *o);
    static const char sql[] =
        "SELECT e.complete_time, e.is_success, d.id, d.stdout_truncated, d.stderr_truncated, "
        "d.stdout, d.stderr FROM JOB_EXECUTION_LOG e LEFT JOIN EJOB_EXECUTION_DETAIL d ON d.id "
        "= e.id WHERE e.id = $1";
    struct run_row w = {0};
    struct ej__tp p[1] = {tp_text(id)};
    int rc = r->ops->select(r->conn, sql, p, 1, take_run, &w);
    if (rc == 0 && !w.found) {
        snprintf(r->err, sizeof r->err, "no execution %s", id);
        rc = EJ_ENOTFOUND;
    }
    o->completed = w.completed;
    o->is_success = w.is_success;
    const int64_t from[2] = {out_from, err_from};
    unsigned char **bytes[2] = {&o->out, &o->err};
    size_t *lens[2] = {&o->out_len, &o->err_len};
    int64_t *nexts[2] = {&o->out_next, &o->err_next};
    for (int s = 0; s < 2 && rc == 0; s++) {
        /* Ended with its output: the detail is the record. Else (running,
         * or its end lost the output) the pieces. */
        bool whole = w.completed && w.has_detail && !(w.blob[s] == NULL && w.truncated[s]);
        if (whole) {
            rc = tail_of(w.blob[s], w.len[s], from[s], bytes[s], lens[s], nexts[s]);
            if (s == 0)
                o->out_truncated = w.truncated[s];
            else
                o->err_truncated = w.truncated[s];
        } else {
            rc = read_pieces(r, id, s + 1, from[s], bytes[s], lens[s], nexts[s]);
        }
    }
    free(w.blob[0]);
    free(w.blob[1]);
    if (rc == EJ_EAGAIN || rc == EJ_EDB) {
        snprintf(r->err, sizeof r->err, "%s", r->ops->errmsg(r->conn));
        rc = EJ_EDB;
    }
    if (rc != 0)
        ej_trace_output_fini(o);
    return rc;
}

void ej_trace_output_fini(struct ej_trace_output *o)
{
    if (o == NULL)
        return;
    free(o->out);
    free(o->err);
    memset(o, 0, sizeof *o);
}
