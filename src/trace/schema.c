/*
 * The tables (ElasticJob 2.1.5's two, reference 1.9, and ejob's detail
 * table) and how an event becomes rows.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "common/util.h"
#include "ejob/error.h"
#include "trace/internal.h"

/* ElasticJob 2.1.5's DDL (JobEventRdbStorage), without its MySQL
 * backquotes so that PostgreSQL takes it too. */
static const char ddl_execution[] = "CREATE TABLE IF NOT EXISTS JOB_EXECUTION_LOG ("
                                    "id VARCHAR(40) NOT NULL, "
                                    "job_name VARCHAR(100) NOT NULL, "
                                    "task_id VARCHAR(255) NOT NULL, "
                                    "hostname VARCHAR(255) NOT NULL, "
                                    "ip VARCHAR(50) NOT NULL, "
                                    "sharding_item INT NOT NULL, "
                                    "execution_source VARCHAR(20) NOT NULL, "
                                    "failure_cause VARCHAR(4000) NULL, "
                                    "is_success INT NOT NULL, "
                                    "start_time TIMESTAMP NULL, "
                                    "complete_time TIMESTAMP NULL, "
                                    "PRIMARY KEY (id))";

static const char ddl_status[] = "CREATE TABLE IF NOT EXISTS JOB_STATUS_TRACE_LOG ("
                                 "id VARCHAR(40) NOT NULL, "
                                 "job_name VARCHAR(100) NOT NULL, "
                                 "original_task_id VARCHAR(255) NOT NULL, "
                                 "task_id VARCHAR(255) NOT NULL, "
                                 "slave_id VARCHAR(50) NOT NULL, "
                                 "source VARCHAR(50) NOT NULL, "
                                 "execution_type VARCHAR(20) NOT NULL, "
                                 "sharding_item VARCHAR(100) NOT NULL, "
                                 "state VARCHAR(20) NOT NULL, "
                                 "message VARCHAR(4000) NULL, "
                                 "creation_time TIMESTAMP NULL, "
                                 "PRIMARY KEY (id))";

static const char ddl_detail_fmt[] = "CREATE TABLE IF NOT EXISTS EJOB_EXECUTION_DETAIL ("
                                     "id VARCHAR(40) NOT NULL, "
                                     "instance_id VARCHAR(255) NOT NULL, "
                                     "start_time TIMESTAMP NULL, "
                                     "duration_ms BIGINT NULL, "
                                     "fencing_token BIGINT NOT NULL, "
                                     "exit_code INT NULL, "
                                     "term_signal INT NULL, "
                                     "http_status INT NULL, "
                                     "stdout %s NULL, "
                                     "stdout_truncated INT NOT NULL, "
                                     "stderr %s NULL, "
                                     "stderr_truncated INT NOT NULL, "
                                     "failure_cause_truncated INT NOT NULL, "
                                     "PRIMARY KEY (id))";

/* ejob's: how each run ended (timeout and killed are failures to 2.1.5's
 * is_success), who killed it, and its attempt within its fire (retries).
 * A table of its own: JOB_EXECUTION_LOG stays 2.1.5's for Java's console,
 * and EJOB_EXECUTION_DETAIL of databases made before needs no change. */
static const char ddl_result[] = "CREATE TABLE IF NOT EXISTS EJOB_EXECUTION_RESULT ("
                                 "id VARCHAR(40) NOT NULL, "
                                 "result VARCHAR(20) NOT NULL, "
                                 "attempt INT NOT NULL, "
                                 "killed_by VARCHAR(255) NULL, "
                                 "PRIMARY KEY (id))";

/* The instants of a run, ejob's (JOB_EXECUTION_LOG keeps 2.1.5's local-time
 * text for Java's console): epoch ms of its start and end, and the writer's
 * UTC offset at its start, which reads its JOB_STATUS_TRACE_LOG rows (local
 * text too) as instants. Written with the run's start, so a running row has
 * one. A run without a row (Java's, or written before) is read in the
 * reader's zone, as Java's console reads it (docs/tracing.md). */
static const char ddl_instant[] = "CREATE TABLE IF NOT EXISTS EJOB_EXECUTION_INSTANT ("
                                  "id VARCHAR(40) NOT NULL, "
                                  "start_ms BIGINT NOT NULL, "
                                  "complete_ms BIGINT NULL, "
                                  "utc_offset_s INT NOT NULL, "
                                  "PRIMARY KEY (id))";

/* ejob's fire ledger: one row per job, cron fire time and item for the
 * whole cluster (the key), whoever writes it first or best (sql_fire).
 * Times are epoch ms: a local-time text would give two fire times of a
 * repeated daylight-saving hour the same key. */
static const char ddl_ledger[] = "CREATE TABLE IF NOT EXISTS EJOB_FIRE_LEDGER ("
                                 "job_name VARCHAR(100) NOT NULL, "
                                 "fire_time_ms BIGINT NOT NULL, "
                                 "sharding_item INT NOT NULL, "
                                 "outcome VARCHAR(40) NOT NULL, "
                                 "kind VARCHAR(20) NOT NULL, "
                                 "execution_id VARCHAR(40) NULL, "
                                 "instance_id VARCHAR(255) NOT NULL, "
                                 "recorded_time_ms BIGINT NOT NULL, "
                                 "PRIMARY KEY (job_name, fire_time_ms, sharding_item))";

static const char *const ddl_indexes[] = {
    /* ElasticJob's own. */
    "CREATE INDEX IF NOT EXISTS TASK_ID_STATE_INDEX ON JOB_STATUS_TRACE_LOG (task_id, state)",
    /* ejob's: history by time, and retention. */
    "CREATE INDEX IF NOT EXISTS EJOB_EXECUTION_START_INDEX ON JOB_EXECUTION_LOG (start_time)",
    ("CREATE INDEX IF NOT EXISTS EJOB_STATUS_CREATION_INDEX ON JOB_STATUS_TRACE_LOG "
     "(creation_time)"),
    "CREATE INDEX IF NOT EXISTS EJOB_DETAIL_START_INDEX ON EJOB_EXECUTION_DETAIL (start_time)",
    "CREATE INDEX IF NOT EXISTS EJOB_INSTANT_START_INDEX ON EJOB_EXECUTION_INSTANT (start_ms)",
    /* Retention, and `ejob fires` over every job. */
    "CREATE INDEX IF NOT EXISTS EJOB_LEDGER_FIRE_INDEX ON EJOB_FIRE_LEDGER (fire_time_ms)",
};

int ej__trace_create_schema(const struct ej__trace_ops *ops, struct ej__trace_conn *c)
{
    char detail[1024];
    snprintf(detail, sizeof detail, ddl_detail_fmt, ops->blob_type, ops->blob_type);
    int rc = ops->run(c, ddl_execution, NULL, 0, NULL);
    if (rc == 0)
        rc = ops->run(c, ddl_status, NULL, 0, NULL);
    if (rc == 0)
        rc = ops->run(c, detail, NULL, 0, NULL);
    if (rc == 0)
        rc = ops->run(c, ddl_result, NULL, 0, NULL);
    if (rc == 0)
        rc = ops->run(c, ddl_ledger, NULL, 0, NULL);
    if (rc == 0)
        rc = ej__trace_live_create(ops, c);
    if (rc == 0)
        rc = ej__trace_retention_create(ops, c);
    if (rc == 0)
        rc = ops->run(c, ddl_instant, NULL, 0, NULL);
    for (size_t i = 0; rc == 0 && i < sizeof ddl_indexes / sizeof ddl_indexes[0]; i++)
        rc = ops->run(c, ddl_indexes[i], NULL, 0, NULL);
    return rc;
}

/* ------------------------------------------------------------- values */

void ej__trace_format_time(int64_t epoch_ms, char out[32])
{
    ej__trace_format_time_at(epoch_ms, false, 0, out);
}

void ej__trace_format_time_at(int64_t epoch_ms, bool known_offset, int32_t offset_s, char out[32])
{
    time_t secs = (time_t)(epoch_ms / 1000);
    struct tm tm;
    if (known_offset) {
        secs += offset_s;
        gmtime_r(&secs, &tm);
    } else {
        localtime_r(&secs, &tm);
    }
    size_t n = strftime(out, 32, "%Y-%m-%d %H:%M:%S", &tm);
    snprintf(out + n, 32 - n, ".%03d", (int)(epoch_ms % 1000));
}

int32_t ej__trace_utc_offset_s(int64_t epoch_ms)
{
    time_t secs = (time_t)(epoch_ms / 1000);
    struct tm tm;
    localtime_r(&secs, &tm);
    return (int32_t)tm.tm_gmtoff;
}

int64_t ej__trace_parse_time(const char *s)
{
    return ej__trace_parse_time_at(s, false, 0);
}

int64_t ej__trace_parse_time_at(const char *s, bool known_offset, int32_t offset_s)
{
    if (s == NULL || s[0] == '\0')
        return 0;
    struct tm tm;
    memset(&tm, 0, sizeof tm);
    int ms = 0;
    const char *rest = strptime(s, "%Y-%m-%d %H:%M:%S", &tm);
    if (rest == NULL)
        rest = strptime(s, "%Y-%m-%dT%H:%M:%S", &tm);
    if (rest == NULL)
        return 0;
    if (*rest == '.') {
        int scale = 100;
        for (rest++; *rest >= '0' && *rest <= '9'; rest++) {
            ms += (*rest - '0') * scale;
            scale /= 10;
        }
    }
    tm.tm_isdst = -1;
    time_t t = known_offset ? timegm(&tm) - offset_s : mktime(&tm);
    if (t == (time_t)-1)
        return 0;
    return (int64_t)t * 1000 + ms;
}

/* Length of the valid UTF-8 sequence at p (1..4), 0 when invalid. */
static size_t utf8_seq(const unsigned char *p)
{
    unsigned char c = p[0];
    if (c < 0x80)
        return 1;
    size_t n;
    unsigned min;
    unsigned cp;
    if ((c & 0xe0) == 0xc0) {
        n = 2, cp = c & 0x1f, min = 0x80;
    } else if ((c & 0xf0) == 0xe0) {
        n = 3, cp = c & 0x0f, min = 0x800;
    } else if ((c & 0xf8) == 0xf0) {
        n = 4, cp = c & 0x07, min = 0x10000;
    } else {
        return 0;
    }
    for (size_t i = 1; i < n; i++) {
        if ((p[i] & 0xc0) != 0x80)
            return 0;
        cp = (cp << 6) | (p[i] & 0x3f);
    }
    if (cp < min || cp > 0x10ffff || (cp >= 0xd800 && cp <= 0xdfff))
        return 0;
    return n;
}

char *ej__trace_clean_text(const char *s, size_t max_chars, bool *cut, bool *oom)
{
    if (cut)
        *cut = false;
    if (s == NULL)
        return NULL;
    size_t len = strlen(s);
    /* Worst case every byte becomes the 3-byte U+FFFD. */
    char *out = malloc(len * 3 + 1);
    if (out == NULL) {
        if (oom)
            *oom = true;
        return NULL;
    }
    const unsigned char *p = (const unsigned char *)s;
    size_t o = 0, chars = 0;
    while (*p) {
        if (chars == max_chars) {
            if (cut)
                *cut = true;
            break;
        }
        size_t n = utf8_seq(p);
        if (n == 0) {
            memcpy(out + o, "\xef\xbf\xbd", 3);
            o += 3;
            p++;
        } else {
            memcpy(out + o, p, n);
            o += n;
            p += n;
        }
        chars++;
    }
    out[o] = '\0';
    return out;
}

const char *ej__trace_instance_of(const char *task_id)
{
    if (task_id == NULL)
        return "";
    const char *m = strstr(task_id, "@-@READY@-@");
    return m ? m + strlen("@-@READY@-@") : "";
}

/* ------------------------------------------------------------- writing */

static struct ej__tp tp_text(const char *s)
{
    return (struct ej__tp){.type = s ? EJ__TP_TEXT : EJ__TP_NULL, .s = s};
}

static struct ej__tp tp_int(int64_t i)
{
    return (struct ej__tp){.type = EJ__TP_INT, .i = i};
}

static struct ej__tp tp_blob(const char *p, size_t n)
{
    return (struct ej__tp){.type = p ? EJ__TP_BLOB : EJ__TP_NULL, .s = p, .len = n};
}

/* The column values of one execution event, cut to the column widths. */
struct exec_vals {
    char *job_name, *task_id, *hostname, *ip, *cause, *instance;
    bool cause_cut, oom;
    char start[32], complete[32];
};

static void exec_vals_init(struct exec_vals *v, const ej_execution_event *e)
{
    memset(v, 0, sizeof *v);
    v->job_name = ej__trace_clean_text(e->job_name ? e->job_name : "", 100, NULL, &v->oom);
    v->task_id = ej__trace_clean_text(e->task_id ? e->task_id : "", 255, NULL, &v->oom);
    v->hostname = ej__trace_clean_text(e->hostname ? e->hostname : "", 255, NULL, &v->oom);
    v->ip = ej__trace_clean_text(e->ip ? e->ip : "", 50, NULL, &v->oom);
    v->cause = ej__trace_clean_text(e->failure_cause, EJ_TRACE_TEXT_MAX, &v->cause_cut, &v->oom);
    v->instance = ej__trace_clean_text(ej__trace_instance_of(e->task_id), 255, NULL, &v->oom);
    ej__trace_format_time(e->start_time_ms, v->start);
    if (e->complete_time_ms)
        ej__trace_format_time(e->complete_time_ms, v->complete);
}

static void exec_vals_fini(struct exec_vals *v)
{
    free(v->job_name);
    free(v->task_id);
    free(v->hostname);
    free(v->ip);
    free(v->cause);
    free(v->instance);
}

static const char sql_exec_start[] =
    "INSERT INTO JOB_EXECUTION_LOG (id, job_name, task_id, hostname, ip, sharding_item, "
    "execution_source, is_success, start_time) VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9) "
    "ON CONFLICT (id) DO NOTHING";
static const char sql_exec_end[] =
    "UPDATE JOB_EXECUTION_LOG SET is_success = $1, complete_time = $2, failure_cause = $3 "
    "WHERE id = $4";
static const char sql_exec_full[] =
    "INSERT INTO JOB_EXECUTION_LOG (id, job_name, task_id, hostname, ip, sharding_item, "
    "execution_source, failure_cause, is_success, start_time, complete_time) VALUES ($1, $2, "
    "$3, $4, $5, $6, $7, $8, $9, $10, $11) ON CONFLICT (id) DO NOTHING";
/* The same update-else-insert in one PostgreSQL statement, for pipelined
 * batches: the INSERT runs only when the UPDATE found no row. */
static const char sql_exec_end_one[] =
    "WITH u AS (UPDATE JOB_EXECUTION_LOG SET is_success = $9::int, complete_time = "
    "$11::timestamp, failure_cause = $8::varchar WHERE id = $1 RETURNING id) "
    "INSERT INTO JOB_EXECUTION_LOG (id, job_name, task_id, hostname, ip, sharding_item, "
    "execution_source, failure_cause, is_success, start_time, complete_time) SELECT $1, $2, "
    "$3, $4, $5, $6::int, $7, $8::varchar, $9::int, $10::timestamp, $11::timestamp WHERE NOT "
    "EXISTS (SELECT 1 FROM u) ON CONFLICT (id) DO NOTHING";
static const char sql_detail[] =
    "INSERT INTO EJOB_EXECUTION_DETAIL (id, instance_id, start_time, duration_ms, "
    "fencing_token, exit_code, term_signal, http_status, stdout, stdout_truncated, stderr, "
    "stderr_truncated, failure_cause_truncated) VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9, "
    "$10, $11, $12, $13) ON CONFLICT (id) DO UPDATE SET instance_id = excluded.instance_id, "
    "start_time = excluded.start_time, duration_ms = excluded.duration_ms, fencing_token = "
    "excluded.fencing_token, exit_code = excluded.exit_code, term_signal = "
    "excluded.term_signal, http_status = excluded.http_status, stdout = excluded.stdout, "
    "stdout_truncated = excluded.stdout_truncated, stderr = excluded.stderr, stderr_truncated "
    "= excluded.stderr_truncated, failure_cause_truncated = excluded.failure_cause_truncated";

static int write_detail(const struct ej__trace_ops *ops, struct ej__trace_conn *c,
                        const ej_execution_event *e, const struct exec_vals *v)
{
    struct ej__tp p[13] = {
        tp_text(e->id),
        tp_text(v->instance),
        tp_text(v->start),
        tp_int(e->complete_time_ms - e->start_time_ms),
        tp_int(e->fencing_token),
        e->has_exit_code ? tp_int(e->exit_code) : tp_text(NULL),
        e->has_exit_code ? tp_int(e->term_signal) : tp_text(NULL),
        e->http_status ? tp_int(e->http_status) : tp_text(NULL),
        tp_blob(e->output, e->output_len),
        tp_int(e->output_truncated),
        tp_blob(e->error_output, e->error_output_len),
        tp_int(e->error_output_truncated),
        tp_int(v->cause_cut),
    };
    return ops->run(c, sql_detail, p, 13, NULL);
}

static const char sql_instant[] =
    "INSERT INTO EJOB_EXECUTION_INSTANT (id, start_ms, complete_ms, utc_offset_s) VALUES ($1, "
    "$2, $3, $4) ON CONFLICT (id) DO UPDATE SET complete_ms = COALESCE(excluded.complete_ms, "
    "EJOB_EXECUTION_INSTANT.complete_ms)";

/* The run's instants, with its start and again with its end. */
static int write_instant(const struct ej__trace_ops *ops, struct ej__trace_conn *c,
                         const ej_execution_event *e)
{
    if (e->start_time_ms <= 0)
        return 0;
    struct ej__tp p[4] = {tp_text(e->id), tp_int(e->start_time_ms),
                          e->complete_time_ms ? tp_int(e->complete_time_ms) : tp_text(NULL),
                          tp_int(ej__trace_utc_offset_s(e->start_time_ms))};
    return ops->run(c, sql_instant, p, 4, NULL);
}

static const char sql_result[] =
    "INSERT INTO EJOB_EXECUTION_RESULT (id, result, attempt, killed_by) VALUES ($1, $2, $3, $4) "
    "ON CONFLICT (id) DO UPDATE SET result = excluded.result, attempt = excluded.attempt, "
    "killed_by = excluded.killed_by";

static int write_result(const struct ej__trace_ops *ops, struct ej__trace_conn *c,
                        const ej_execution_event *e)
{
    bool oom = false;
    char *by = e->killed_by ? ej__trace_clean_text(e->killed_by, 255, NULL, &oom) : NULL;
    if (oom)
        return EJ_ENOMEM;
    struct ej__tp p[4] = {tp_text(e->id), tp_text(ej_execution_result(e)),
                          tp_int(e->attempt > 0 ? e->attempt : 1), tp_text(by)};
    int rc = ops->run(c, sql_result, p, 4, NULL);
    free(by);
    return rc;
}

static int write_execution(const struct ej__trace_ops *ops, struct ej__trace_conn *c,
                           const ej_execution_event *e)
{
    struct exec_vals v;
    exec_vals_init(&v, e);
    int rc = EJ_ENOMEM;
    if (v.oom || (rc = write_instant(ops, c, e)) != 0)
        goto out;
    const char *src = ej_execution_source_name(e->execution_source);
    if (e->complete_time_ms == 0) {
        struct ej__tp p[9] = {tp_text(e->id),      tp_text(v.job_name), tp_text(v.task_id),
                              tp_text(v.hostname), tp_text(v.ip),       tp_int(e->sharding_item),
                              tp_text(src),        tp_int(0),           tp_text(v.start)};
        rc = ops->run(c, sql_exec_start, p, 9, NULL);
        goto out;
    }
    /* The end: update the row, or insert it whole when its start event was
     * lost or is still to come (ElasticJob's out-of-order fallback). */
    if (ops->pipelined) {
        struct ej__tp p[11] = {tp_text(e->id),      tp_text(v.job_name), tp_text(v.task_id),
                               tp_text(v.hostname), tp_text(v.ip),       tp_int(e->sharding_item),
                               tp_text(src),        tp_text(v.cause),    tp_int(e->is_success),
                               tp_text(v.start),    tp_text(v.complete)};
        rc = ops->run(c, sql_exec_end_one, p, 11, NULL);
        if (rc == 0)
            rc = write_detail(ops, c, e, &v);
        if (rc == 0)
            rc = write_result(ops, c, e);
        if (rc == 0)
            rc = ej__trace_live_end(ops, c, e);
        goto out;
    }
    struct ej__tp u[4] = {tp_int(e->is_success), tp_text(v.complete), tp_text(v.cause),
                          tp_text(e->id)};
    int64_t changed = 0;
    rc = ops->run(c, sql_exec_end, u, 4, &changed);
    if (rc == 0 && changed == 0) {
        struct ej__tp p[11] = {tp_text(e->id),      tp_text(v.job_name), tp_text(v.task_id),
                               tp_text(v.hostname), tp_text(v.ip),       tp_int(e->sharding_item),
                               tp_text(src),        tp_text(v.cause),    tp_int(e->is_success),
                               tp_text(v.start),    tp_text(v.complete)};
        rc = ops->run(c, sql_exec_full, p, 11, NULL);
    }
    if (rc == 0)
        rc = write_detail(ops, c, e, &v);
    if (rc == 0)
        rc = write_result(ops, c, e);
    if (rc == 0)
        rc = ej__trace_live_end(ops, c, e);
out:
    exec_vals_fini(&v);
    return rc;
}

static const char sql_status[] =
    "INSERT INTO JOB_STATUS_TRACE_LOG (id, job_name, original_task_id, task_id, slave_id, "
    "source, execution_type, sharding_item, state, message, creation_time) VALUES ($1, $2, $3, "
    "$4, $5, $6, $7, $8, $9, $10, $11) ON CONFLICT (id) DO NOTHING";

static int write_status(const struct ej__trace_ops *ops, struct ej__trace_conn *c,
                        const ej_status_event *e)
{
    bool oom = false;
    /* Column widths of the 2.1.5 DDL, in characters. */
    char *v[8] = {
        ej__trace_clean_text(e->job_name ? e->job_name : "", 100, NULL, &oom),
        ej__trace_clean_text(e->original_task_id ? e->original_task_id : "", 255, NULL, &oom),
        ej__trace_clean_text(e->task_id ? e->task_id : "", 255, NULL, &oom),
        ej__trace_clean_text(e->slave_id ? e->slave_id : "", 50, NULL, &oom),
        ej__trace_clean_text(e->source ? e->source : "LITE_EXECUTOR", 50, NULL, &oom),
        ej__trace_clean_text(e->execution_type ? e->execution_type : "READY", 20, NULL, &oom),
        ej__trace_clean_text(e->sharding_item ? e->sharding_item : "[]", 100, NULL, &oom),
        ej__trace_clean_text(e->message, EJ_TRACE_TEXT_MAX, NULL, &oom),
    };
    int rc = EJ_ENOMEM;
    if (!oom) {
        char when[32];
        ej__trace_format_time(e->creation_time_ms, when);
        struct ej__tp p[11] = {
            tp_text(e->id), tp_text(v[0]), tp_text(v[1]),
            tp_text(v[2]),  tp_text(v[3]), tp_text(v[4]),
            tp_text(v[5]),  tp_text(v[6]), tp_text(ej_task_state_name(e->state)),
            tp_text(v[7]),  tp_text(when),
        };
        rc = ops->run(c, sql_status, p, 11, NULL);
    }
    for (int i = 0; i < 8; i++)
        free(v[i]);
    return rc;
}

/* A row replaces another only when it says more: ran (2) over a reason it
 * did not run (1) over missed (0), so that the cluster keeps one row per
 * fire time and item whatever order the instances write in. */
#define FIRE_RANK(t) "(CASE " t ".outcome WHEN 'ran' THEN 2 WHEN 'missed' THEN 0 ELSE 1 END)"
static const char sql_fire[] =
    "INSERT INTO EJOB_FIRE_LEDGER (job_name, fire_time_ms, sharding_item, outcome, kind, "
    "execution_id, instance_id, recorded_time_ms) VALUES ($1, $2, $3, $4, $5, $6, $7, $8) "
    "ON CONFLICT (job_name, fire_time_ms, sharding_item) DO UPDATE SET outcome = "
    "excluded.outcome, kind = excluded.kind, execution_id = excluded.execution_id, instance_id "
    "= excluded.instance_id, recorded_time_ms = excluded.recorded_time_ms WHERE " FIRE_RANK(
        "EJOB_FIRE_LEDGER") " < " FIRE_RANK("excluded") " OR (EJOB_FIRE_LEDGER.outcome = 'ran' "
                                                        "AND excluded.outcome = 'ran' AND "
                                                        "EJOB_FIRE_LEDGER.instance_id = "
                                                        "excluded.instance_id)";
/* (The last clause: a retry of the item on the instance that ran it points
 * the row at its latest attempt, so the ledger shows the final outcome.) */
/* The start-up scan's rows: only after the job's last row (none: nothing,
 * the job has no ledger to extend), and never over another row. */
static const char sql_fire_after_last[] =
    "INSERT INTO EJOB_FIRE_LEDGER (job_name, fire_time_ms, sharding_item, outcome, kind, "
    "execution_id, instance_id, recorded_time_ms) SELECT CAST($1 AS VARCHAR(100)), CAST($2 AS "
    "BIGINT), CAST($3 AS INT), CAST($4 AS VARCHAR(40)), CAST($5 AS VARCHAR(20)), CAST($6 AS "
    "VARCHAR(40)), CAST($7 AS VARCHAR(255)), CAST($8 AS BIGINT) WHERE CAST($2 AS BIGINT) > "
    "(SELECT MAX(fire_time_ms) FROM EJOB_FIRE_LEDGER WHERE job_name = CAST($1 AS VARCHAR(100))) "
    "ON CONFLICT (job_name, fire_time_ms, sharding_item) DO NOTHING";

static int write_fire(const struct ej__trace_ops *ops, struct ej__trace_conn *c,
                      const ej_fire_event *e)
{
    bool oom = false;
    char *job = ej__trace_clean_text(e->job_name ? e->job_name : "", 100, NULL, &oom);
    char *outcome = ej__trace_clean_text(e->outcome ? e->outcome : "", 40, NULL, &oom);
    char *kind = ej__trace_clean_text(e->kind ? e->kind : "CRON", 20, NULL, &oom);
    char *inst = ej__trace_clean_text(e->instance_id ? e->instance_id : "", 255, NULL, &oom);
    int rc = EJ_ENOMEM;
    if (!oom) {
        struct ej__tp p[8] = {
            tp_text(job),
            tp_int(e->fire_time_ms),
            tp_int(e->sharding_item),
            tp_text(outcome),
            tp_text(kind),
            tp_text(e->execution_id[0] ? e->execution_id : NULL),
            tp_text(inst),
            tp_int(e->recorded_time_ms),
        };
        rc = ops->run(c, e->only_after_last ? sql_fire_after_last : sql_fire, p, 8, NULL);
    }
    free(job);
    free(outcome);
    free(kind);
    free(inst);
    return rc;
}

int ej__trace_write_event(const struct ej__trace_ops *ops, struct ej__trace_conn *c,
                          const ej_event *ev)
{
    if (ev->type == EJ_EVENT_EXECUTION)
        return write_execution(ops, c, &ev->u.execution);
    if (ev->type == EJ_EVENT_STATUS)
        return write_status(ops, c, &ev->u.status);
    if (ev->type == EJ_EVENT_FIRE)
        return write_fire(ops, c, &ev->u.fire);
    if (ev->type == EJ_EVENT_OUTPUT)
        return ej__trace_live_write(ops, c, &ev->u.output);
    return EJ_EDB;
}

/* ------------------------------------------------------------ retention */

int ej__trace_purge_chunk(const struct ej__trace_ops *ops, struct ej__trace_conn *c,
                          int64_t cutoff_ms, int default_days, int chunk, int64_t *deleted)
{
    /* The jobs with a rule of their own are purged by it (retention.c). */
#define NOT_RULED " AND job_name NOT IN (SELECT job_name FROM EJOB_JOB_RETENTION)"
    static const char *const sql[] = {
        "DELETE FROM JOB_EXECUTION_LOG WHERE id IN (SELECT id FROM JOB_EXECUTION_LOG WHERE "
        "start_time < $1" NOT_RULED " LIMIT $2)",
        "DELETE FROM JOB_STATUS_TRACE_LOG WHERE id IN (SELECT id FROM JOB_STATUS_TRACE_LOG "
        "WHERE creation_time < $1" NOT_RULED " LIMIT $2)",
    };
    /* The ledger keys by epoch ms (the others by local-time text). */
    static const char sql_ledger[] =
        "DELETE FROM EJOB_FIRE_LEDGER WHERE (job_name, fire_time_ms, sharding_item) IN (SELECT "
        "job_name, fire_time_ms, sharding_item FROM EJOB_FIRE_LEDGER WHERE fire_time_ms < "
        "$1" NOT_RULED " LIMIT $2)";
#undef NOT_RULED
    *deleted = 0;
    int rc = 0;
    if (cutoff_ms > 0) {
        char cutoff[32];
        ej__trace_format_time(cutoff_ms, cutoff);
        struct ej__tp p[2] = {tp_text(cutoff), tp_int(chunk)};
        for (size_t i = 0; rc == 0 && i < sizeof sql / sizeof sql[0]; i++) {
            int64_t n = 0;
            rc = ops->run(c, sql[i], p, 2, &n);
            *deleted += n;
        }
        struct ej__tp lp[2] = {tp_int(cutoff_ms), tp_int(chunk)};
        int64_t n = 0;
        if (rc == 0)
            rc = ops->run(c, sql_ledger, lp, 2, &n);
        *deleted += n;
    }
    /* Results go with their runs (they have no time of their own). */
    static const char sql_orphans[] =
        "DELETE FROM EJOB_EXECUTION_RESULT WHERE id IN (SELECT r.id FROM EJOB_EXECUTION_RESULT r "
        "LEFT JOIN JOB_EXECUTION_LOG e ON e.id = r.id WHERE e.id IS NULL LIMIT $1)";
    struct ej__tp rp[1] = {tp_int(chunk)};
    /* The jobs' own rules, and the details of the runs gone. */
    if (rc == 0)
        rc = ej__trace_retention_purge(ops, c, default_days, ej__now_ms(), chunk, deleted);
    int64_t n = 0;
    if (rc == 0)
        rc = ops->run(c, sql_orphans, rp, 1, &n);
    *deleted += n;
    /* Instants go with their runs too. */
    static const char sql_instant_orphans[] =
        "DELETE FROM EJOB_EXECUTION_INSTANT WHERE id IN (SELECT i.id FROM EJOB_EXECUTION_INSTANT "
        "i LEFT JOIN JOB_EXECUTION_LOG e ON e.id = i.id WHERE e.id IS NULL LIMIT $1)";
    n = 0;
    if (rc == 0)
        rc = ops->run(c, sql_instant_orphans, rp, 1, &n);
    *deleted += n;
    if (rc == 0)
        rc = ej__trace_live_purge(ops, c, cutoff_ms, chunk, deleted);
    return rc;
}

const struct ej__trace_ops *ej__trace_ops_of(ej_trace_kind kind)
{
    if (kind == EJ_TRACE_SQLITE)
        return &ej__trace_sqlite_ops;
    if (kind == EJ_TRACE_POSTGRESQL)
        return &ej__trace_pg_ops;
    return NULL;
}
