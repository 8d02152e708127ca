/* The SQLite backend: a file in WAL mode, statements cached per connection. */
#include <errno.h>
#include <sqlite3.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include "ejob/error.h"
#include "trace/internal.h"

#define CACHE_SLOTS 24

struct ej__trace_conn {
    sqlite3 *db;
    struct {
        char *sql; /* the statement's text (a copy) */
        sqlite3_stmt *st;
    } cache[CACHE_SLOTS];
    size_t next_slot;
    char err[512];
};

/* Failures that are the database's state, not the statement's: the store
 * keeps the events and tries again later. */
static bool transient(int rc)
{
    switch (rc & 0xff) {
    case SQLITE_BUSY:
    case SQLITE_LOCKED:
    case SQLITE_FULL:
    case SQLITE_READONLY:
    case SQLITE_IOERR:
    case SQLITE_CANTOPEN:
    case SQLITE_PROTOCOL:
    case SQLITE_NOMEM:
    case SQLITE_CORRUPT:
    case SQLITE_NOTADB:
        return true;
    }
    return false;
}

static int fail(struct ej__trace_conn *c, int rc, const char *what)
{
    snprintf(c->err, sizeof c->err, "%s: %s (%s)", what, sqlite3_errmsg(c->db), sqlite3_errstr(rc));
    return transient(rc) ? EJ_EAGAIN : EJ_EDB;
}

static void lite_close(struct ej__trace_conn *c)
{
    if (c == NULL)
        return;
    for (size_t i = 0; i < CACHE_SLOTS; i++) {
        sqlite3_finalize(c->cache[i].st);
        free(c->cache[i].sql);
    }
    sqlite3_close_v2(c->db);
    free(c);
}

static const char *lite_errmsg(const struct ej__trace_conn *c)
{
    return c ? c->err : "";
}

/* A prepared statement, from the cache when the same text ran before.
 * *owned is set when the statement is not cached (the caller finalises). */
static int prepare(struct ej__trace_conn *c, const char *sql, sqlite3_stmt **out, bool *owned)
{
    *owned = false;
    for (size_t i = 0; i < CACHE_SLOTS; i++) {
        if (c->cache[i].sql != NULL && strcmp(c->cache[i].sql, sql) == 0) {
            *out = c->cache[i].st;
            return 0;
        }
    }
    int rc = sqlite3_prepare_v2(c->db, sql, -1, out, NULL);
    if (rc != SQLITE_OK)
        return fail(c, rc, "prepare");
    char *copy = strdup(sql);
    if (copy == NULL) {
        *owned = true;
        return 0;
    }
    size_t s = c->next_slot++ % CACHE_SLOTS;
    sqlite3_finalize(c->cache[s].st);
    free(c->cache[s].sql);
    c->cache[s].sql = copy;
    c->cache[s].st = *out;
    return 0;
}

static int bind(struct ej__trace_conn *c, sqlite3_stmt *st, const struct ej__tp *p, int n)
{
    sqlite3_reset(st);
    sqlite3_clear_bindings(st);
    for (int i = 0; i < n; i++) {
        int rc = SQLITE_OK;
        switch (p[i].type) {
        case EJ__TP_TEXT:
            rc = sqlite3_bind_text(st, i + 1, p[i].s, -1, SQLITE_STATIC);
            break;
        case EJ__TP_INT:
            rc = sqlite3_bind_int64(st, i + 1, p[i].i);
            break;
        case EJ__TP_BLOB:
            rc = sqlite3_bind_blob64(st, i + 1, p[i].s, p[i].len, SQLITE_STATIC);
            break;
        default:
            rc = sqlite3_bind_null(st, i + 1);
        }
        if (rc != SQLITE_OK)
            return fail(c, rc, "bind");
    }
    return 0;
}

static int lite_run(struct ej__trace_conn *c, const char *sql, const struct ej__tp *p, int n,
                    int64_t *changes)
{
    sqlite3_stmt *st = NULL;
    bool owned = false;
    int rc = prepare(c, sql, &st, &owned);
    if (rc != 0)
        return rc;
    rc = bind(c, st, p, n);
    if (rc == 0) {
        int s = sqlite3_step(st);
        if (s == SQLITE_DONE || s == SQLITE_ROW) {
            if (changes)
                *changes = sqlite3_changes64(c->db);
        } else {
            rc = fail(c, s, "write");
        }
    }
    sqlite3_reset(st);
    if (owned)
        sqlite3_finalize(st);
    return rc;
}

static bool row_null(const struct ej__row *r, int col)
{
    return sqlite3_column_type(r->impl, col) == SQLITE_NULL;
}

static const char *row_text(const struct ej__row *r, int col)
{
    const unsigned char *t = sqlite3_column_text(r->impl, col);
    return t ? (const char *)t : "";
}

static int64_t row_int(const struct ej__row *r, int col)
{
    return sqlite3_column_int64(r->impl, col);
}

static unsigned char *row_blob(const struct ej__row *r, int col, size_t *len, bool *oom)
{
    *len = 0;
    if (row_null(r, col))
        return NULL;
    const void *b = sqlite3_column_blob(r->impl, col);
    size_t n = (size_t)sqlite3_column_bytes(r->impl, col);
    unsigned char *out = malloc(n + 1);
    if (out == NULL) {
        *oom = true;
        return NULL;
    }
    if (n)
        memcpy(out, b, n);
    out[n] = '\0';
    *len = n;
    return out;
}

static int lite_select(struct ej__trace_conn *c, const char *sql, const struct ej__tp *p, int n,
                       ej__row_fn fn, void *arg)
{
    sqlite3_stmt *st = NULL;
    bool owned = false;
    int rc = prepare(c, sql, &st, &owned);
    if (rc != 0)
        return rc;
    rc = bind(c, st, p, n);
    struct ej__row row = {st, row_null, row_text, row_int, row_blob};
    while (rc == 0) {
        int s = sqlite3_step(st);
        if (s == SQLITE_DONE)
            break;
        if (s != SQLITE_ROW) {
            rc = fail(c, s, "read");
            break;
        }
        rc = fn(&row, arg);
    }
    sqlite3_reset(st);
    if (owned)
        sqlite3_finalize(st);
    return rc;
}

static int exec_plain(struct ej__trace_conn *c, const char *sql)
{
    char *msg = NULL;
    int rc = sqlite3_exec(c->db, sql, NULL, NULL, &msg);
    if (rc != SQLITE_OK) {
        snprintf(c->err, sizeof c->err, "%s: %s", sql, msg ? msg : sqlite3_errstr(rc));
        sqlite3_free(msg);
        return transient(rc) ? EJ_EAGAIN : EJ_EDB;
    }
    return 0;
}

static int lite_connect(const struct ej_trace_target *t, bool writer, int64_t timeout_ms,
                        struct ej__trace_conn **out, char *err, size_t errlen)
{
    *out = NULL;
    struct ej__trace_conn *c = calloc(1, sizeof *c);
    if (c == NULL)
        return EJ_ENOMEM;
    struct stat sb;
    if (!writer && stat(t->url, &sb) != 0) {
        snprintf(err, errlen, "%s: %s", t->url, strerror(errno));
        free(c);
        return EJ_ENOTFOUND;
    }
    int flags = writer ? SQLITE_OPEN_READWRITE | SQLITE_OPEN_CREATE : SQLITE_OPEN_READONLY;
    int rc = sqlite3_open_v2(t->url, &c->db, flags | SQLITE_OPEN_NOMUTEX, NULL);
    int result = 0;
    if (rc != SQLITE_OK) {
        snprintf(err, errlen, "%s: %s", t->url, c->db ? sqlite3_errmsg(c->db) : sqlite3_errstr(rc));
        result = transient(rc) || rc == SQLITE_PERM ? EJ_EAGAIN : EJ_EDB;
        goto fail;
    }
    sqlite3_busy_timeout(c->db, (int)(timeout_ms > 0 ? timeout_ms : 2000));
    if (writer) {
        /* WAL: readers (ejob history) never block the writer, and several
         * daemons on one host can share the file. */
        result = exec_plain(c, "PRAGMA journal_mode=WAL");
        if (result == 0)
            result = exec_plain(c, "PRAGMA synchronous=NORMAL");
        if (result == 0)
            result = ej__trace_create_schema(&ej__trace_sqlite_ops, c);
        if (result != 0) {
            snprintf(err, errlen, "%s: %s", t->url, c->err);
            goto fail;
        }
    } else {
        sqlite3_stmt *st = NULL;
        rc = sqlite3_prepare_v2(c->db, "SELECT 1 FROM JOB_EXECUTION_LOG LIMIT 1", -1, &st, NULL);
        sqlite3_finalize(st);
        if (rc != SQLITE_OK) {
            snprintf(err, errlen, "%s: %s", t->url, sqlite3_errmsg(c->db));
            result = (rc & 0xff) == SQLITE_ERROR ? EJ_ENOTFOUND : EJ_EDB;
            goto fail;
        }
    }
    *out = c;
    return 0;
fail:
    lite_close(c);
    return result;
}

const struct ej__trace_ops ej__trace_sqlite_ops = {
    .name = "SQLite",
    .connect = lite_connect,
    .close = lite_close,
    .errmsg = lite_errmsg,
    .run = lite_run,
    .select = lite_select,
    .blob_type = "BLOB",
    .naive_ms_sql = "CAST(ROUND((julianday({col}) - 2440587.5) * 86400000.0) AS INTEGER)",
    .output_match_sql = "CAST({col} AS TEXT) LIKE {param} ESCAPE '\\'",
    .output_match_like = true,
};
