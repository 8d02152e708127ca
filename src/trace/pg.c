/*
 * The PostgreSQL backend (libpq). Every connect and statement goes through
 * libpq's non-blocking calls with a deadline, so a server that stops
 * answering (a hung host, a stopped process) costs the writer at most the
 * operation timeout, after which the connection is dropped and retried.
 */
#include <errno.h>
#include <inttypes.h>
#include <libpq-fe.h>
#include <poll.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "common/util.h"
#include "ejob/error.h"
#include "trace/internal.h"

#define MAX_PARAMS 16

struct ej__trace_conn {
    PGconn *pg;
    int64_t timeout_ms;
    bool in_batch; /* between BEGIN and COMMIT: statements are pipelined */
    char err[512];
};

static void set_err(struct ej__trace_conn *c, const char *what, const char *msg)
{
    snprintf(c->err, sizeof c->err, "%s: %s", what, msg && msg[0] ? msg : "unknown error");
    /* libpq's messages span lines: keep ours on one. */
    for (char *q = c->err; *q; q++)
        if (*q == '\n' || *q == '\t')
            *q = ' ';
    size_t n = strlen(c->err);
    while (n > 0 && (c->err[n - 1] == '\n' || c->err[n - 1] == ' '))
        c->err[--n] = '\0';
}

/* Waits until the socket is ready for events, at most until deadline.
 * Returns 0, or EJ_ETIMEDOUT. */
static int wait_socket(PGconn *pg, short events, int64_t deadline)
{
    for (;;) {
        int64_t left = deadline - ej__mono_ms();
        if (left <= 0)
            return EJ_ETIMEDOUT;
        struct pollfd p = {.fd = PQsocket(pg), .events = events};
        int r = poll(&p, 1, (int)(left > 1000 ? 1000 : left));
        if (r > 0)
            return 0;
        if (r < 0 && errno != EINTR)
            return -errno;
    }
}

/* SQLSTATE classes that are the server's state, not the statement's. */
static bool transient_state(const char *st)
{
    if (st == NULL)
        return true;
    return strncmp(st, "08", 2) == 0    /* connection exception */
           || strncmp(st, "53", 2) == 0 /* insufficient resources (disk full) */
           || strncmp(st, "57", 2) == 0 /* operator intervention, shutdown, cancel */
           || strncmp(st, "58", 2) == 0 /* system error (I/O) */
           || strncmp(st, "40", 2) == 0 /* serialization failure, deadlock */
           || strcmp(st, "55P03") == 0  /* lock not available */
           || strcmp(st, "25006") == 0  /* read-only transaction (a standby) */
           || strcmp(st, "42501") == 0; /* permission denied: fixed by an admin */
}

/* Collects the results of the query sent last; returns the last one (or
 * NULL with c->err set, the connection unusable). */
static PGresult *collect(struct ej__trace_conn *c, int64_t deadline)
{
    PGconn *pg = c->pg;
    int f;
    while ((f = PQflush(pg)) == 1) {
        if (wait_socket(pg, POLLOUT | POLLIN, deadline) != 0) {
            set_err(c, "sending", "timed out");
            return NULL;
        }
        if (!PQconsumeInput(pg))
            break;
    }
    PGresult *last = NULL;
    for (;;) {
        while (PQisBusy(pg)) {
            if (wait_socket(pg, POLLIN, deadline) != 0) {
                PQclear(last);
                set_err(c, "waiting for the server", "timed out");
                return NULL;
            }
            if (!PQconsumeInput(pg)) {
                PQclear(last);
                set_err(c, "reading", PQerrorMessage(pg));
                return NULL;
            }
        }
        PGresult *r = PQgetResult(pg);
        if (r == NULL)
            break;
        PQclear(last);
        last = r;
    }
    if (last == NULL)
        set_err(c, "query", PQerrorMessage(pg));
    return last;
}

/* Sends one statement (not waiting for its result). */
static int send_params(struct ej__trace_conn *c, const char *sql, const struct ej__tp *p, int n)
{
    if (n > MAX_PARAMS)
        return EJ_EINVAL;
    if (PQstatus(c->pg) != CONNECTION_OK) {
        set_err(c, "connection", PQerrorMessage(c->pg));
        return EJ_EAGAIN;
    }
    const char *values[MAX_PARAMS];
    int lengths[MAX_PARAMS], formats[MAX_PARAMS];
    char ints[MAX_PARAMS][24];
    for (int i = 0; i < n; i++) {
        lengths[i] = 0;
        formats[i] = 0;
        switch (p[i].type) {
        case EJ__TP_TEXT:
            values[i] = p[i].s;
            break;
        case EJ__TP_INT:
            snprintf(ints[i], sizeof ints[i], "%" PRId64, p[i].i);
            values[i] = ints[i];
            break;
        case EJ__TP_BLOB:
            /* Binary format: bytea takes the bytes as they are. */
            values[i] = p[i].s;
            lengths[i] = (int)p[i].len;
            formats[i] = 1;
            break;
        default:
            values[i] = NULL;
        }
    }
    if (!PQsendQueryParams(c->pg, sql, n, NULL, values, lengths, formats, 0)) {
        set_err(c, "send", PQerrorMessage(c->pg));
        return EJ_EAGAIN;
    }
    return 0;
}

static void drop_connection(struct ej__trace_conn *c)
{
    PQfinish(c->pg);
    c->pg = NULL;
    c->in_batch = false;
}

/* Classifies a failed result; sets c->err. */
static int result_error(struct ej__trace_conn *c, const PGresult *r)
{
    const char *state = PQresultErrorField(r, PG_DIAG_SQLSTATE);
    set_err(c, state ? state : "error", PQresultErrorMessage(r));
    return transient_state(state) || PQstatus(c->pg) != CONNECTION_OK ? EJ_EAGAIN : EJ_EDB;
}

static int exec_params(struct ej__trace_conn *c, const char *sql, const struct ej__tp *p, int n,
                       PGresult **out)
{
    *out = NULL;
    int rc = send_params(c, sql, p, n);
    if (rc != 0)
        return rc;
    PGresult *r = collect(c, ej__mono_ms() + c->timeout_ms);
    if (r == NULL) {
        /* The connection's state is unknown now: drop it. */
        drop_connection(c);
        return EJ_EAGAIN;
    }
    ExecStatusType st = PQresultStatus(r);
    if (st != PGRES_COMMAND_OK && st != PGRES_TUPLES_OK) {
        rc = result_error(c, r);
        PQclear(r);
        return rc;
    }
    *out = r;
    return 0;
}

/* ------------------------------------------------------------ batches */

/*
 * A batch (BEGIN ... COMMIT from the store) is sent as one pipeline: every
 * statement goes out without waiting for the one before, and the Sync at
 * COMMIT ends an implicit transaction, so a batch costs one round trip
 * instead of one per statement. Any error rolls the whole batch back.
 * Statements of a batch cannot report rows changed (schema.c writes the
 * end of an execution as one statement for this backend).
 */
static int batch_begin(struct ej__trace_conn *c)
{
    if (PQstatus(c->pg) != CONNECTION_OK) {
        set_err(c, "connection", PQerrorMessage(c->pg));
        return EJ_EAGAIN;
    }
    if (!PQenterPipelineMode(c->pg) || PQsetnonblocking(c->pg, 1) != 0) {
        set_err(c, "pipeline", PQerrorMessage(c->pg));
        return EJ_EAGAIN;
    }
    c->in_batch = true;
    return 0;
}

/* Sends what is buffered while reading what arrives (so neither side's
 * buffers fill up), until everything is sent. */
static int flush_all(struct ej__trace_conn *c, int64_t deadline)
{
    int f;
    while ((f = PQflush(c->pg)) == 1) {
        if (wait_socket(c->pg, POLLOUT | POLLIN, deadline) != 0) {
            set_err(c, "sending", "timed out");
            return EJ_EAGAIN;
        }
        if (!PQconsumeInput(c->pg)) {
            set_err(c, "reading", PQerrorMessage(c->pg));
            return EJ_EAGAIN;
        }
    }
    if (f < 0) {
        set_err(c, "sending", PQerrorMessage(c->pg));
        return EJ_EAGAIN;
    }
    return 0;
}

/* Waits for the next result of the pipeline; NULL between statements. */
static int next_result(struct ej__trace_conn *c, int64_t deadline, PGresult **out)
{
    while (PQisBusy(c->pg)) {
        if (wait_socket(c->pg, POLLIN, deadline) != 0) {
            set_err(c, "waiting for the server", "timed out");
            return EJ_EAGAIN;
        }
        if (!PQconsumeInput(c->pg)) {
            set_err(c, "reading", PQerrorMessage(c->pg));
            return EJ_EAGAIN;
        }
    }
    *out = PQgetResult(c->pg);
    return 0;
}

static int batch_commit(struct ej__trace_conn *c)
{
    int64_t deadline = ej__mono_ms() + c->timeout_ms;
    int rc = PQpipelineSync(c->pg) ? 0 : EJ_EAGAIN;
    if (rc != 0)
        set_err(c, "pipeline", PQerrorMessage(c->pg));
    if (rc == 0)
        rc = flush_all(c, deadline);
    int first_error = 0;
    while (rc == 0) {
        PGresult *r = NULL;
        rc = next_result(c, deadline, &r);
        if (rc != 0 || r == NULL)
            continue;
        ExecStatusType st = PQresultStatus(r);
        if (st == PGRES_PIPELINE_SYNC) {
            PQclear(r);
            break;
        }
        if (st == PGRES_FATAL_ERROR && first_error == 0)
            first_error = result_error(c, r);
        PQclear(r);
    }
    if (rc != 0) {
        drop_connection(c);
        return rc;
    }
    c->in_batch = false;
    if (!PQexitPipelineMode(c->pg) || PQsetnonblocking(c->pg, 0) != 0) {
        set_err(c, "pipeline", PQerrorMessage(c->pg));
        drop_connection(c);
        return EJ_EAGAIN;
    }
    return first_error;
}

static int batch_run(struct ej__trace_conn *c, const char *sql, const struct ej__tp *p, int n)
{
    int rc = send_params(c, sql, p, n);
    if (rc != 0) {
        drop_connection(c);
        return rc;
    }
    /* Send as we go: a big batch does not pile up in memory. */
    if (PQflush(c->pg) < 0) {
        set_err(c, "sending", PQerrorMessage(c->pg));
        drop_connection(c);
        return EJ_EAGAIN;
    }
    return 0;
}

static int pg_run(struct ej__trace_conn *c, const char *sql, const struct ej__tp *p, int n,
                  int64_t *changes)
{
    if (c->pg == NULL)
        return EJ_EAGAIN;
    if (strcmp(sql, "BEGIN") == 0 && !c->in_batch)
        return batch_begin(c);
    if (c->in_batch) {
        if (strcmp(sql, "COMMIT") == 0)
            return batch_commit(c);
        if (strcmp(sql, "ROLLBACK") == 0) {
            /* Nothing was committed; the pipeline state is unknown. */
            drop_connection(c);
            return 0;
        }
        if (changes != NULL)
            return EJ_EINVAL; /* cannot know before the Sync */
        return batch_run(c, sql, p, n);
    }
    if (strcmp(sql, "ROLLBACK") == 0)
        return 0; /* a failed batch rolled back on its own */
    PGresult *r = NULL;
    int rc = exec_params(c, sql, p, n, &r);
    if (rc == 0 && changes) {
        const char *t = PQcmdTuples(r);
        *changes = t && t[0] ? strtoll(t, NULL, 10) : 0;
    }
    PQclear(r);
    return rc;
}

struct pg_row {
    PGresult *r;
    int row;
};

static bool row_null(const struct ej__row *r, int col)
{
    const struct pg_row *p = r->impl;
    return PQgetisnull(p->r, p->row, col);
}

static const char *row_text(const struct ej__row *r, int col)
{
    const struct pg_row *p = r->impl;
    return PQgetvalue(p->r, p->row, col);
}

static int64_t row_int(const struct ej__row *r, int col)
{
    const char *t = row_text(r, col);
    /* A 3.x schema has is_success BOOLEAN: "t" / "f". */
    if (t[0] == 't')
        return 1;
    return strtoll(t, NULL, 10);
}

static unsigned char *row_blob(const struct ej__row *r, int col, size_t *len, bool *oom)
{
    *len = 0;
    if (row_null(r, col))
        return NULL;
    size_t n = 0;
    unsigned char *raw = PQunescapeBytea((const unsigned char *)row_text(r, col), &n);
    unsigned char *out = raw ? malloc(n + 1) : NULL;
    if (out == NULL) {
        PQfreemem(raw);
        *oom = true;
        return NULL;
    }
    memcpy(out, raw, n);
    out[n] = '\0';
    PQfreemem(raw);
    *len = n;
    return out;
}

static int pg_select(struct ej__trace_conn *c, const char *sql, const struct ej__tp *p, int n,
                     ej__row_fn fn, void *arg)
{
    if (c->pg == NULL)
        return EJ_EAGAIN;
    PGresult *r = NULL;
    int rc = exec_params(c, sql, p, n, &r);
    if (rc != 0)
        return rc;
    struct pg_row pr = {r, 0};
    struct ej__row row = {&pr, row_null, row_text, row_int, row_blob};
    int rows = PQntuples(r);
    for (pr.row = 0; rc == 0 && pr.row < rows; pr.row++)
        rc = fn(&row, arg);
    PQclear(r);
    return rc;
}

static void pg_close(struct ej__trace_conn *c)
{
    if (c == NULL)
        return;
    if (c->pg)
        PQfinish(c->pg);
    free(c);
}

static const char *pg_errmsg(const struct ej__trace_conn *c)
{
    return c ? c->err : "";
}

/* Connects without blocking past the deadline. */
static int connect_timed(struct ej__trace_conn *c, const struct ej_trace_target *t)
{
    const char *password = t->password;
    if (password == NULL || password[0] == '\0')
        password = getenv("EJOB_TRACING_PASSWORD");
    /* dbname first with expand_dbname: the URL's settings, then ours. */
    /* Notices ("relation already exists, skipping") would go to stderr. */
    const char *keys[6] = {"dbname", "client_encoding", "application_name", "options", NULL, NULL};
    const char *vals[6] = {t->url, "UTF8", "ejob", "-c client_min_messages=warning", NULL, NULL};
    int k = 4;
    if (password != NULL && password[0] != '\0') {
        keys[k] = "password";
        vals[k++] = password;
    }
    c->pg = PQconnectStartParams(keys, vals, 1);
    if (c->pg == NULL) {
        set_err(c, "connect", "out of memory");
        return EJ_ENOMEM;
    }
    if (PQstatus(c->pg) == CONNECTION_BAD) {
        set_err(c, "connect", PQerrorMessage(c->pg));
        return EJ_EAGAIN;
    }
    int64_t deadline = ej__mono_ms() + c->timeout_ms;
    PostgresPollingStatusType ps = PGRES_POLLING_WRITING;
    for (;;) {
        if (ps == PGRES_POLLING_OK)
            return 0;
        if (ps == PGRES_POLLING_FAILED) {
            set_err(c, "connect", PQerrorMessage(c->pg));
            return EJ_EAGAIN;
        }
        short ev = ps == PGRES_POLLING_READING ? POLLIN : POLLOUT;
        if (wait_socket(c->pg, ev, deadline) != 0) {
            set_err(c, "connect", "timed out");
            return EJ_EAGAIN;
        }
        ps = PQconnectPoll(c->pg);
    }
}

/* Creates the schema under an advisory lock: two daemons starting at once
 * would otherwise race on CREATE TABLE IF NOT EXISTS. */
static int create_schema_locked(struct ej__trace_conn *c)
{
    int rc = pg_run(c, "BEGIN", NULL, 0, NULL);
    if (rc == 0)
        rc = pg_run(c, "SELECT pg_advisory_xact_lock(7120315846)", NULL, 0, NULL);
    if (rc == 0)
        rc = ej__trace_create_schema(&ej__trace_pg_ops, c);
    if (rc == 0)
        return pg_run(c, "COMMIT", NULL, 0, NULL);
    char keep[sizeof c->err];
    memcpy(keep, c->err, sizeof keep);
    pg_run(c, "ROLLBACK", NULL, 0, NULL);
    memcpy(c->err, keep, sizeof keep);
    return rc;
}

static int pg_connect(const struct ej_trace_target *t, bool writer, int64_t timeout_ms,
                      struct ej__trace_conn **out, char *err, size_t errlen)
{
    *out = NULL;
    struct ej__trace_conn *c = calloc(1, sizeof *c);
    if (c == NULL)
        return EJ_ENOMEM;
    c->timeout_ms = timeout_ms > 0 ? timeout_ms : 10000;
    int rc = connect_timed(c, t);
    if (rc == 0 && writer)
        rc = create_schema_locked(c);
    if (rc == 0 && !writer) {
        int64_t n = 0;
        rc = pg_run(c, "SELECT 1 FROM JOB_EXECUTION_LOG LIMIT 1", NULL, 0, &n);
        if (rc == EJ_EDB)
            rc = EJ_ENOTFOUND;
    }
    if (rc != 0) {
        snprintf(err, errlen, "%s", c->err);
        pg_close(c);
        return rc == EJ_EAGAIN ? EJ_EAGAIN : rc;
    }
    *out = c;
    return 0;
}

const struct ej__trace_ops ej__trace_pg_ops = {
    .name = "PostgreSQL",
    .connect = pg_connect,
    .close = pg_close,
    .errmsg = pg_errmsg,
    .run = pg_run,
    .select = pg_select,
    .blob_type = "BYTEA",
    .naive_ms_sql = "CAST(ROUND(EXTRACT(EPOCH FROM {col}) * 1000) AS BIGINT)",
    .output_match_sql = "position(convert_to({param}, 'UTF8') in {col}) > 0",
    .pipelined = true,
};
