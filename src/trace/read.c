/* The read API: history queries and one execution with its trail. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "common/util.h"
#include "ejob/error.h"
#include "trace/internal.h"

#define DEFAULT_LIMIT 100
#define TRAIL_WINDOW_MS (10 * 60 * 1000)
#define TRAIL_MAX 2000


/* ------------------------------------------------------------- readers */

int ej_trace_reader_open(const struct ej_trace_target *target, ej_trace_reader **out, char *err,
                         size_t errlen)
{
    if (out == NULL || target == NULL || target->url == NULL ||
        ej__trace_ops_of(target->kind) == NULL)
        return EJ_EINVAL;
    *out = NULL;
    ej_trace_reader *r = calloc(1, sizeof *r);
    if (r == NULL)
        return EJ_ENOMEM;
    r->ops = ej__trace_ops_of(target->kind);
    int rc = r->ops->connect(target, false, 10000, &r->conn, err, errlen);
    if (rc != 0) {
        free(r);
        return rc == EJ_EAGAIN ? EJ_EDB : rc;
    }
    /* A store no ejob of this version wrote to yet has no instants. */
    r->has_instants = r->ops->run(r->conn, "SELECT 1 FROM EJOB_EXECUTION_INSTANT WHERE 1 = 0",
                                  NULL, 0, NULL) == 0;
    r->has_results = r->ops->run(r->conn, "SELECT 1 FROM EJOB_EXECUTION_RESULT WHERE 1 = 0", NULL,
                                 0, NULL) == 0;
    *out = r;
    return 0;
}

const char *ej_trace_reader_errmsg(const ej_trace_reader *r)
{
    return r ? r->err : "";
}

void ej_trace_reader_close(ej_trace_reader *r)
{
    if (r == NULL)
        return;
    r->ops->close(r->conn);
    free(r);
}

/* ----------------------------------------------------------- executions */

#define EXEC_COLUMNS                                                                               \
    "e.id, e.job_name, e.task_id, e.hostname, e.ip, e.sharding_item, e.execution_source, "         \
    "e.failure_cause, e.is_success, e.start_time, e.complete_time, d.id, d.duration_ms, "          \
    "d.exit_code, d.term_signal, d.http_status, d.fencing_token, d.stdout_truncated, "             \
    "d.stderr_truncated, d.failure_cause_truncated"
#define EXEC_FROM " FROM JOB_EXECUTION_LOG e LEFT JOIN EJOB_EXECUTION_DETAIL d ON d.id = e.id"
/* Columns 20-22: how the run ended (EJOB_EXECUTION_RESULT); 23-25: its
 * instants (EJOB_EXECUTION_INSTANT). NULLs from a store that lacks the
 * table (Java's alone, or one ejob wrote before it had it). */
static const char *const extra_columns[2][2] = {
    {", NULL, NULL, NULL, NULL, NULL, NULL",
     ", NULL, NULL, NULL, i.start_ms, i.complete_ms, i.utc_offset_s"},
    {", r.result, r.attempt, r.killed_by, NULL, NULL, NULL",
     ", r.result, r.attempt, r.killed_by, i.start_ms, i.complete_ms, i.utc_offset_s"},
};
static const char *const extra_joins[2][2] = {
    {"", " LEFT JOIN EJOB_EXECUTION_INSTANT i ON i.id = e.id"},
    {" LEFT JOIN EJOB_EXECUTION_RESULT r ON r.id = e.id",
     " LEFT JOIN EJOB_EXECUTION_RESULT r ON r.id = e.id LEFT JOIN EJOB_EXECUTION_INSTANT i ON "
     "i.id = e.id"},
};

static const char *ejob_columns(const ej_trace_reader *r)
{
    return extra_columns[r->has_results][r->has_instants];
}

static const char *ejob_joins(const ej_trace_reader *r)
{
    return extra_joins[r->has_results][r->has_instants];
}

static char *dup_col(const struct ej__row *row, int col, bool *oom)
{
    if (row->is_null(row, col))
        return NULL;
    char *s = strdup(row->text(row, col));
    if (s == NULL)
        *oom = true;
    return s;
}

static char *dup_col0(const struct ej__row *row, int col, bool *oom)
{
    char *s = strdup(row->text(row, col));
    if (s == NULL)
        *oom = true;
    return s;
}

static void execution_fini(struct ej_trace_execution *e)
{
    free(e->id);
    free(e->job_name);
    free(e->task_id);
    free(e->hostname);
    free(e->ip);
    free(e->instance_id);
    free(e->execution_source);
    free(e->failure_cause);
    free(e->result);
    free(e->killed_by);
    free(e->out);
    free(e->err);
    memset(e, 0, sizeof *e);
}

/* Fills e from a row of EXEC_COLUMNS. */
static int execution_from_row(const struct ej__row *row, struct ej_trace_execution *e)
{
    bool oom = false;
    memset(e, 0, sizeof *e);
    e->id = dup_col0(row, 0, &oom);
    e->job_name = dup_col0(row, 1, &oom);
    e->task_id = dup_col0(row, 2, &oom);
    e->hostname = dup_col0(row, 3, &oom);
    e->ip = dup_col0(row, 4, &oom);
    e->instance_id = strdup(ej__trace_instance_of(row->text(row, 2)));
    oom = oom || e->instance_id == NULL;
    e->sharding_item = (int)row->int64(row, 5);
    e->execution_source = dup_col0(row, 6, &oom);
    e->failure_cause = dup_col(row, 7, &oom);
    e->is_success = row->int64(row, 8) != 0;
    e->utc_offset_known = !row->is_null(row, 23);
    if (e->utc_offset_known)
        e->utc_offset_s = (int32_t)row->int64(row, 25);
    e->start_ms = e->utc_offset_known ? row->int64(row, 23)
                                      : ej__trace_parse_time(row->text(row, 9));
    e->completed = !row->is_null(row, 10);
    e->complete_ms = e->utc_offset_known && !row->is_null(row, 24)
                         ? row->int64(row, 24)
                         : ej__trace_parse_time_at(row->text(row, 10), e->utc_offset_known,
                                                   e->utc_offset_s);
    e->sort_ms = e->start_ms;
    e->has_detail = !row->is_null(row, 11);
    e->duration_ms = -1;
    e->exit_code = -1;
    if (e->has_detail) {
        if (!row->is_null(row, 12))
            e->duration_ms = row->int64(row, 12);
        if (!row->is_null(row, 13))
            e->exit_code = (int)row->int64(row, 13);
        e->term_signal = (int)row->int64(row, 14);
        e->http_status = (long)row->int64(row, 15);
        e->fencing_token = row->int64(row, 16);
        e->out_truncated = row->int64(row, 17) != 0;
        e->err_truncated = row->int64(row, 18) != 0;
        e->failure_cause_truncated = row->int64(row, 19) != 0;
    }
    /* Rows from before EJOB_EXECUTION_RESULT, or Java's: by is_success. */
    e->result = row->is_null(row, 20) ? strdup(!e->completed   ? ""
                                               : e->is_success ? EJ_RUN_SUCCESS
                                                               : EJ_RUN_FAILED)
                                      : strdup(row->text(row, 20));
    oom = oom || e->result == NULL;
    e->attempt = row->is_null(row, 21) ? 1 : (int)row->int64(row, 21);
    e->killed_by = dup_col(row, 22, &oom);
    if (e->duration_ms < 0 && e->completed && e->start_ms)
        e->duration_ms = e->complete_ms - e->start_ms;
    if (oom) {
        execution_fini(e);
        return EJ_ENOMEM;
    }
    return 0;
}

static int add_execution(const struct ej__row *row, void *arg)
{
    struct ej_trace_execution_list *l = arg;
    struct ej_trace_execution *n = realloc(l->rows, (l->count + 1) * sizeof *n);
    if (n == NULL)
        return EJ_ENOMEM;
    l->rows = n;
    int rc = execution_from_row(row, &l->rows[l->count]);
    if (rc == 0)
        l->count++;
    return rc;
}

/* Escapes LIKE's wildcards with backslashes. Caller frees. */
static char *like_suffix(const char *s)
{
    size_t n = strlen(s);
    char *out = malloc(2 * n + 3); /* room for a '%' at either end */
    if (out == NULL)
        return NULL;
    size_t o = 0;
    out[o++] = '%';
    for (size_t i = 0; i < n; i++) {
        if (s[i] == '%' || s[i] == '_' || s[i] == '\\')
            out[o++] = '\\';
        out[o++] = s[i];
    }
    out[o] = '\0';
    return out;
}

static struct ej__tp text_param(const char *s)
{
    return (struct ej__tp){.type = EJ__TP_TEXT, .s = s};
}

/* The local-time text of JOB_EXECUTION_LOG is some writer's zone: a bound
 * on it is widened by the largest gap between two zones (UTC-12 to UTC+14)
 * and the instant itself is compared too. */
#define ZONE_SPREAD_MS (26LL * 3600 * 1000)

/* Appends tmpl with {col} replaced by col and {param} by $param. */
static void put_template(ej_buf *sql, const char *tmpl, const char *col, int param)
{
    for (const char *p = tmpl; *p != '\0';) {
        if (strncmp(p, "{col}", 5) == 0) {
            ej__buf_puts(sql, col);
            p += 5;
        } else if (strncmp(p, "{param}", 7) == 0) {
            ej__buf_printf(sql, "$%d", param);
            p += 7;
        } else {
            ej__buf_printf(sql, "%c", *p++);
        }
    }
}

/* The SQL of a run's start instant: ejob's, else the text read as local
 * time of this process (offset $1), as Java's console reads it. */
static void put_sort_key(const ej_trace_reader *r, ej_buf *sql)
{
    if (r->has_instants)
        ej__buf_puts(sql, "COALESCE(i.start_ms, ");
    else
        ej__buf_puts(sql, "(");
    put_template(sql, r->ops->naive_ms_sql, "e.start_time", 0);
    ej__buf_puts(sql, " - $1)");
}

struct query_sql {
    ej_buf sql;
    struct ej__tp p[16];
    int n;
    char texts[4][32];
    int ntexts;
    char *like, *match;
};

static int add_param(struct query_sql *b, struct ej__tp tp)
{
    b->p[b->n++] = tp;
    return b->n;
}

static struct ej__tp int_param(int64_t i)
{
    return (struct ej__tp){.type = EJ__TP_INT, .i = i};
}

/* " AND e.start_time OP text(ms +- spread) AND key OP ms". */
static void bound(struct query_sql *b, const ej_trace_reader *r, const char *op, int64_t ms)
{
    int64_t widened = op[0] == '>' ? ms - ZONE_SPREAD_MS : ms + ZONE_SPREAD_MS;
    char *t = b->texts[b->ntexts++];
    ej__trace_format_time(widened, t);
    ej__buf_printf(&b->sql, " AND e.start_time %s $%d AND ", op[0] == '>' ? ">=" : "<=",
                   add_param(b, text_param(t)));
    put_sort_key(r, &b->sql);
    ej__buf_printf(&b->sql, " %s $%d", op, add_param(b, int_param(ms)));
}

static int build_query(struct query_sql *b, const ej_trace_reader *r,
                       const struct ej_trace_query *q)
{
    ej_buf *sql = &b->sql;
    add_param(b, int_param((int64_t)ej__trace_utc_offset_s(ej__now_ms()) * 1000));
    ej__buf_printf(sql, "SELECT " EXEC_COLUMNS "%s, ", ejob_columns(r));
    put_sort_key(r, sql);
    ej__buf_printf(sql, " AS sort_ms" EXEC_FROM "%s WHERE 1 = 1", ejob_joins(r));
    if (q->job_name)
        ej__buf_printf(sql, " AND e.job_name = $%d", add_param(b, text_param(q->job_name)));
    if (q->since_ms)
        bound(b, r, ">=", q->since_ms);
    if (q->until_ms)
        bound(b, r, "<", q->until_ms);
    if (q->failed_only)
        ej__buf_printf(sql, " AND e.complete_time IS NOT NULL AND e.is_success = $%d",
                       add_param(b, text_param("0")));
    if (q->item >= 0)
        ej__buf_printf(sql, " AND e.sharding_item = $%d", add_param(b, int_param(q->item)));
    if (q->instance_id) {
        if ((b->like = like_suffix(q->instance_id)) == NULL)
            return EJ_ENOMEM;
        ej__buf_printf(sql, " AND e.task_id LIKE $%d ESCAPE '\\'",
                       add_param(b, text_param(b->like)));
    }
    if (q->output_text) {
        const char *v = q->output_text;
        if (r->ops->output_match_like) {
            if ((b->match = like_suffix(q->output_text)) == NULL)
                return EJ_ENOMEM;
            strcat(b->match, "%");
            v = b->match;
        }
        int k = add_param(b, text_param(v));
        ej__buf_puts(sql, " AND (");
        put_template(sql, r->ops->output_match_sql, "d.stdout", k);
        ej__buf_puts(sql, " OR ");
        put_template(sql, r->ops->output_match_sql, "d.stderr", k);
        ej__buf_puts(sql, ")");
    }
    if (q->page != 0 && q->cursor_id != NULL) {
        bool older = q->page < 0;
        bound(b, r, older ? "<=" : ">=", q->cursor_ms);
        ej__buf_puts(sql, " AND (");
        put_sort_key(r, sql);
        int k = add_param(b, int_param(q->cursor_ms));
        ej__buf_printf(sql, " %s $%d OR e.id %s $%d)", older ? "<" : ">", k, older ? ">" : "<",
                       add_param(b, text_param(q->cursor_id)));
    }
    bool newer = q->page > 0 && q->cursor_id != NULL;
    ej__buf_printf(sql, " ORDER BY sort_ms %s, e.id %s LIMIT %zu", newer ? "ASC" : "DESC",
                   newer ? "DESC" : "ASC", q->limit ? q->limit : DEFAULT_LIMIT);
    return sql->failed ? EJ_ENOMEM : 0;
}

static int add_listed(const struct ej__row *row, void *arg)
{
    struct ej_trace_execution_list *l = arg;
    int rc = add_execution(row, l);
    if (rc == 0)
        l->rows[l->count - 1].sort_ms = row->int64(row, 26);
    return rc;
}

int ej_trace_query_executions(ej_trace_reader *r, const struct ej_trace_query *q,
                              struct ej_trace_execution_list *out)
{
    if (r == NULL || out == NULL)
        return EJ_EINVAL;
    memset(out, 0, sizeof *out);
    static const struct ej_trace_query none = {.item = -1};
    if (q == NULL)
        q = &none;
    struct query_sql b;
    memset(&b, 0, sizeof b);
    ej__buf_init(&b.sql);
    int rc = build_query(&b, r, q);
    if (rc == 0) {
        rc = r->ops->select(r->conn, b.sql.data, b.p, b.n, add_listed, out);
        if (rc == EJ_EAGAIN || rc == EJ_EDB) {
            snprintf(r->err, sizeof r->err, "%s", r->ops->errmsg(r->conn));
            rc = EJ_EDB;
        }
    }
    ej__buf_fini(&b.sql);
    free(b.like);
    free(b.match);
    if (rc != 0) {
        ej_trace_execution_list_fini(out);
        return rc;
    }
    if (q->page > 0 && q->cursor_id != NULL) /* newest first, as the other pages */
        for (size_t i = 0; i < out->count / 2; i++) {
            struct ej_trace_execution t = out->rows[i];
            out->rows[i] = out->rows[out->count - 1 - i];
            out->rows[out->count - 1 - i] = t;
        }
    return 0;
}

void ej_trace_execution_list_fini(struct ej_trace_execution_list *l)
{
    if (l == NULL)
        return;
    for (size_t i = 0; i < l->count; i++)
        execution_fini(&l->rows[i]);
    free(l->rows);
    l->rows = NULL;
    l->count = 0;
}

/* --------------------------------------------------------------- detail */

struct one {
    struct ej_trace_execution *e;
    int found;
};

static int take_one(const struct ej__row *row, void *arg)
{
    struct one *o = arg;
    if (o->found++)
        return 0; /* a second match of a prefix: ambiguous */
    int rc = execution_from_row(row, o->e);
    if (rc != 0)
        return rc;
    bool oom = false;
    o->e->out = row->blob(row, 26, &o->e->out_len, &oom);
    o->e->err = row->blob(row, 27, &o->e->err_len, &oom);
    return oom ? EJ_ENOMEM : 0;
}

static void status_fini(struct ej_trace_status *s)
{
    free(s->id);
    free(s->job_name);
    free(s->task_id);
    free(s->slave_id);
    free(s->source);
    free(s->execution_type);
    free(s->sharding_item);
    free(s->state);
    free(s->message);
}

struct trail {
    struct ej_trace_status *rows;
    size_t count;
    const struct ej_trace_execution *e; /* its local times are in e's writer's zone */
};

static int add_status(const struct ej__row *row, void *arg)
{
    struct trail *t = arg;
    struct ej_trace_status *n = realloc(t->rows, (t->count + 1) * sizeof *n);
    if (n == NULL)
        return EJ_ENOMEM;
    t->rows = n;
    struct ej_trace_status *s = &t->rows[t->count];
    bool oom = false;
    s->id = dup_col0(row, 0, &oom);
    s->job_name = dup_col0(row, 1, &oom);
    s->task_id = dup_col0(row, 2, &oom);
    s->slave_id = dup_col0(row, 3, &oom);
    s->source = dup_col0(row, 4, &oom);
    s->execution_type = dup_col0(row, 5, &oom);
    s->sharding_item = dup_col0(row, 6, &oom);
    s->state = dup_col0(row, 7, &oom);
    s->message = dup_col(row, 8, &oom);
    s->creation_ms =
        ej__trace_parse_time_at(row->text(row, 9), t->e->utc_offset_known, t->e->utc_offset_s);
    t->count++;
    return oom ? EJ_ENOMEM : 0;
}

static bool is_end_state(const char *state)
{
    return strcmp(state, "TASK_FINISHED") == 0 || strcmp(state, "TASK_ERROR") == 0;
}

/* Keeps the rows of this execution's fire: from the last TASK_STAGING at
 * or before its start to the first end state at or after its end (the
 * same task id recurs at every fire of the same items). */
static void cut_trail(struct trail *t, const struct ej_trace_execution *e)
{
    if (t->count == 0)
        return;
    size_t first = 0, last = t->count;
    for (size_t i = 0; i < t->count; i++)
        if (strcmp(t->rows[i].state, "TASK_STAGING") == 0 && t->rows[i].creation_ms <= e->start_ms)
            first = i;
    int64_t end = e->completed ? e->complete_ms : e->start_ms;
    for (size_t i = first + 1; i < t->count; i++) {
        if (strcmp(t->rows[i].state, "TASK_STAGING") == 0 && t->rows[i].creation_ms > end) {
            last = i;
            break;
        }
        if (is_end_state(t->rows[i].state) && t->rows[i].creation_ms >= end) {
            last = i + 1;
            break;
        }
    }
    for (size_t i = 0; i < first; i++)
        status_fini(&t->rows[i]);
    for (size_t i = last; i < t->count; i++)
        status_fini(&t->rows[i]);
    memmove(t->rows, t->rows + first, (last - first) * sizeof *t->rows);
    t->count = last - first;
}

int ej_trace_get_execution(ej_trace_reader *r, const char *id,
                           struct ej_trace_execution_detail *out)
{
    if (r == NULL || id == NULL || out == NULL)
        return EJ_EINVAL;
    memset(out, 0, sizeof *out);
    /* A shorter id is a prefix (as `ejob history` prints ids). */
    char sql[1024];
    snprintf(sql, sizeof sql,
             "SELECT " EXEC_COLUMNS "%s, d.stdout, d.stderr" EXEC_FROM
             "%s WHERE e.id LIKE $1 ESCAPE '\\' ORDER BY e.id LIMIT 2",
             ejob_columns(r), ejob_joins(r));
    char *pattern = like_suffix(id);
    if (pattern == NULL)
        return EJ_ENOMEM;
    /* like_suffix gives "%id"; a prefix wants "id%". */
    memmove(pattern, pattern + 1, strlen(pattern));
    strcat(pattern, strlen(id) >= EJ_EVENT_ID_LEN - 1 ? "" : "%");
    struct ej__tp p[3] = {text_param(pattern)};
    struct one o = {&out->execution, 0};
    int rc = r->ops->select(r->conn, sql, p, 1, take_one, &o);
    free(pattern);
    if (rc == 0 && o.found != 1) {
        ej_trace_execution_detail_fini(out);
        snprintf(r->err, sizeof r->err,
                 o.found ? "execution id %s is ambiguous" : "no execution %s", id);
        return o.found ? EJ_EINVAL : EJ_ENOTFOUND;
    }
    /* A run still going (or whose end lost its output) shows what its
     * daemon has stored of it so far; a store without the table has none. */
    struct ej_trace_execution *x = &out->execution;
    if (rc == 0 && (!x->completed || !x->has_detail || (x->out == NULL && x->out_truncated) ||
                    (x->err == NULL && x->err_truncated)))
        (void)ej__trace_live_fill(r, x);
    struct trail t = {NULL, 0, &out->execution};
    if (rc == 0) {
        const struct ej_trace_execution *e = &out->execution;
        char from[32], to[32];
        int64_t end = e->completed ? e->complete_ms : e->start_ms;
        ej__trace_format_time_at(e->start_ms - TRAIL_WINDOW_MS, e->utc_offset_known,
                                 e->utc_offset_s, from);
        ej__trace_format_time_at(end + TRAIL_WINDOW_MS, e->utc_offset_known, e->utc_offset_s,
                                 to);
        static const char tsql[] =
            "SELECT id, job_name, task_id, slave_id, source, execution_type, sharding_item, "
            "state, message, creation_time FROM JOB_STATUS_TRACE_LOG WHERE task_id = $1 AND "
            "creation_time >= $2 AND creation_time <= $3 ORDER BY creation_time, id LIMIT 2000";
        p[0] = text_param(e->task_id);
        p[1] = text_param(from);
        p[2] = text_param(to);
        rc = r->ops->select(r->conn, tsql, p, 3, add_status, &t);
        if (rc == 0)
            cut_trail(&t, e);
    }
    out->trail = t.rows;
    out->trail_count = t.count;
    if (rc != 0) {
        if (rc == EJ_EAGAIN || rc == EJ_EDB) {
            snprintf(r->err, sizeof r->err, "%s", r->ops->errmsg(r->conn));
            rc = EJ_EDB;
        }
        ej_trace_execution_detail_fini(out);
    }
    return rc;
}

void ej_trace_execution_detail_fini(struct ej_trace_execution_detail *d)
{
    if (d == NULL)
        return;
    execution_fini(&d->execution);
    for (size_t i = 0; i < d->trail_count; i++)
        status_fini(&d->trail[i]);
    free(d->trail);
    d->trail = NULL;
    d->trail_count = 0;
}

/* ---------------------------------------------------------- fire ledger */

#define FIRE_DEFAULT_LIMIT 10000

static void fire_fini(struct ej_trace_fire *f)
{
    free(f->job_name);
    free(f->outcome);
    free(f->kind);
    free(f->execution_id);
    free(f->instance_id);
    free(f->result);
    memset(f, 0, sizeof *f);
}

/* The result of a ran row from its execution's columns (7: id, 8:
 * is_success, 9: complete_time). */
static const char *fire_result(const struct ej__row *row, const char *outcome)
{
    if (strcmp(outcome, EJ_FIRE_RAN) != 0)
        return "";
    if (row->is_null(row, 7))
        return "unknown";
    if (row->is_null(row, 9))
        return "running";
    return row->int64(row, 8) != 0 ? "succeeded" : "failed";
}

static int add_fire(const struct ej__row *row, void *arg)
{
    struct ej_trace_fire_list *l = arg;
    struct ej_trace_fire *n = realloc(l->rows, (l->count + 1) * sizeof *n);
    if (n == NULL)
        return EJ_ENOMEM;
    l->rows = n;
    struct ej_trace_fire *f = &l->rows[l->count];
    bool oom = false;
    memset(f, 0, sizeof *f);
    f->job_name = dup_col0(row, 0, &oom);
    f->fire_time_ms = row->int64(row, 1);
    f->sharding_item = (int)row->int64(row, 2);
    f->outcome = dup_col0(row, 3, &oom);
    f->kind = dup_col0(row, 4, &oom);
    f->execution_id = dup_col0(row, 5, &oom);
    f->instance_id = dup_col0(row, 6, &oom);
    f->recorded_ms = row->int64(row, 10);
    f->result = strdup(fire_result(row, row->text(row, 3)));
    f->attempts = row->is_null(row, 11) ? (row->is_null(row, 7) ? 0 : 1) : (int)row->int64(row, 11);
    if (oom || f->result == NULL) {
        fire_fini(f);
        return EJ_ENOMEM;
    }
    l->count++;
    return 0;
}

/* Newest first from the database (the limit keeps the newest): turned
 * around here. */
static void fires_reverse(struct ej_trace_fire_list *l)
{
    for (size_t i = 0, j = l->count; i + 1 < j; i++, j--) {
        struct ej_trace_fire t = l->rows[i];
        l->rows[i] = l->rows[j - 1];
        l->rows[j - 1] = t;
    }
}

int ej_trace_query_fires(ej_trace_reader *r, const struct ej_trace_fire_query *q,
                         struct ej_trace_fire_list *out)
{
    if (r == NULL || out == NULL)
        return EJ_EINVAL;
    memset(out, 0, sizeof *out);
    static const struct ej_trace_fire_query none = {.item = -1};
    if (q == NULL)
        q = &none;
    ej_buf sql;
    ej__buf_init(&sql);
    ej__buf_puts(&sql, "SELECT f.job_name, f.fire_time_ms, f.sharding_item, f.outcome, f.kind, "
                       "f.execution_id, f.instance_id, e.id, e.is_success, e.complete_time, "
                       "f.recorded_time_ms, r.attempt FROM EJOB_FIRE_LEDGER f LEFT JOIN "
                       "JOB_EXECUTION_LOG e ON e.id = f.execution_id LEFT JOIN "
                       "EJOB_EXECUTION_RESULT r ON r.id = f.execution_id WHERE 1 = 1");
    struct ej__tp p[5];
    int n = 0;
    if (q->job_name) {
        p[n++] = text_param(q->job_name);
        ej__buf_printf(&sql, " AND f.job_name = $%d", n);
    }
    if (q->since_ms) {
        p[n++] = (struct ej__tp){.type = EJ__TP_INT, .i = q->since_ms};
        ej__buf_printf(&sql, " AND f.fire_time_ms >= $%d", n);
    }
    if (q->until_ms) {
        p[n++] = (struct ej__tp){.type = EJ__TP_INT, .i = q->until_ms};
        ej__buf_printf(&sql, " AND f.fire_time_ms < $%d", n);
    }
    if (q->item >= 0) {
        p[n++] = (struct ej__tp){.type = EJ__TP_INT, .i = q->item};
        ej__buf_printf(&sql, " AND (f.sharding_item = $%d OR f.sharding_item = -1)", n);
    }
    ej__buf_printf(&sql,
                   " ORDER BY f.fire_time_ms DESC, f.job_name DESC, f.sharding_item DESC "
                   "LIMIT %zu",
                   q->limit ? q->limit : FIRE_DEFAULT_LIMIT);
    int rc = EJ_ENOMEM;
    if (!sql.failed) {
        rc = r->ops->select(r->conn, sql.data, p, n, add_fire, out);
        if (rc == EJ_EAGAIN || rc == EJ_EDB) {
            snprintf(r->err, sizeof r->err, "%s", r->ops->errmsg(r->conn));
            /* SQLite "no such table", PostgreSQL "does not exist". */
            bool missing =
                strstr(r->err, "no such table") != NULL || strstr(r->err, "does not exist") != NULL;
            rc = missing ? EJ_ENOTFOUND : EJ_EDB;
        }
    }
    ej__buf_fini(&sql);
    if (rc != 0)
        ej_trace_fire_list_fini(out);
    else
        fires_reverse(out);
    return rc;
}

void ej_trace_fire_list_fini(struct ej_trace_fire_list *l)
{
    if (l == NULL)
        return;
    for (size_t i = 0; i < l->count; i++)
        fire_fini(&l->rows[i]);
    free(l->rows);
    l->rows = NULL;
    l->count = 0;
}
