/*
 * Per-job retention: a job's own tracing.retentionDays (and
 * failedRetentionDays for its failed runs) in ejob's table
 * EJOB_JOB_RETENTION, which every daemon sharing the store reads at its
 * retention pass, so a job's rule holds whichever daemon purges. The
 * store-wide pass (schema.c) leaves the jobs listed there alone.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "common/util.h"
#include "ejob/error.h"
#include "trace/internal.h"

#define DAY_MS (86400 * 1000LL)

static const char ddl_retention[] = "CREATE TABLE IF NOT EXISTS EJOB_JOB_RETENTION ("
                                    "job_name VARCHAR(100) NOT NULL, "
                                    "retention_days INT NOT NULL, "
                                    "failed_retention_days INT NOT NULL, "
                                    "updated_time_ms BIGINT NOT NULL, "
                                    "PRIMARY KEY (job_name))";

int ej__trace_retention_create(const struct ej__trace_ops *ops, struct ej__trace_conn *c)
{
    return ops->run(c, ddl_retention, NULL, 0, NULL);
}

static struct ej__tp tp_text(const char *s)
{
    return (struct ej__tp){.type = s ? EJ__TP_TEXT : EJ__TP_NULL, .s = s};
}

static struct ej__tp tp_int(int64_t i)
{
    return (struct ej__tp){.type = EJ__TP_INT, .i = i};
}

int ej__trace_retention_write(const struct ej__trace_ops *ops, struct ej__trace_conn *c,
                              const struct ej__job_retention *rules, size_t n)
{
    static const char sql_set[] =
        "INSERT INTO EJOB_JOB_RETENTION (job_name, retention_days, failed_retention_days, "
        "updated_time_ms) VALUES ($1, $2, $3, $4) ON CONFLICT (job_name) DO UPDATE SET "
        "retention_days = excluded.retention_days, failed_retention_days = "
        "excluded.failed_retention_days, updated_time_ms = excluded.updated_time_ms";
    static const char sql_unset[] = "DELETE FROM EJOB_JOB_RETENTION WHERE job_name = $1";
    int rc = 0;
    for (size_t i = 0; rc == 0 && i < n; i++) {
        const struct ej__job_retention *r = &rules[i];
        if (r->days < 0 && r->failed_days < 0) {
            struct ej__tp p[1] = {tp_text(r->job_name)};
            rc = ops->run(c, sql_unset, p, 1, NULL);
        } else {
            struct ej__tp p[4] = {tp_text(r->job_name), tp_int(r->days), tp_int(r->failed_days),
                                  tp_int(ej__now_ms())};
            rc = ops->run(c, sql_set, p, 4, NULL);
        }
    }
    return rc;
}

/* The rules in the table, every daemon's. */
struct rule_list {
    struct ej__job_retention *rows;
    size_t count, cap;
    bool oom;
};

static int add_rule(const struct ej__row *row, void *arg)
{
    struct rule_list *l = arg;
    if (l->count == l->cap) {
        size_t cap = l->cap ? l->cap * 2 : 16;
        struct ej__job_retention *p = realloc(l->rows, cap * sizeof *p);
        if (p == NULL) {
            l->oom = true;
            return EJ_ENOMEM;
        }
        l->rows = p;
        l->cap = cap;
    }
    struct ej__job_retention *r = &l->rows[l->count];
    snprintf(r->job_name, sizeof r->job_name, "%s", row->text(row, 0));
    r->days = (int)row->int64(row, 1);
    r->failed_days = (int)row->int64(row, 2);
    l->count++;
    return 0;
}

/* Runs one DELETE of at most chunk rows with (job, cutoff[, chunk]). */
static int purge_one(const struct ej__trace_ops *ops, struct ej__trace_conn *c, const char *sql,
                     const char *job, struct ej__tp cutoff, int chunk, int64_t *deleted)
{
    struct ej__tp p[3] = {tp_text(job), cutoff, tp_int(chunk)};
    int64_t n = 0;
    int rc = ops->run(c, sql, p, 3, &n);
    if (rc == 0)
        *deleted += n;
    return rc;
}

/* A cutoff days back from now, as the table's local-time text. */
static void text_cutoff(int64_t now_ms, int days, char out[32])
{
    ej__trace_format_time(now_ms - days * DAY_MS, out);
}

/* One job's rule: its runs by result, its status rows (TASK_ERROR kept as
 * its failed runs), its ledger while any of its runs is kept. */
static int purge_job(const struct ej__trace_ops *ops, struct ej__trace_conn *c,
                     const struct ej__job_retention *r, int default_days, int64_t now_ms, int chunk,
                     int64_t *deleted)
{
#define FAILED_RUN "(complete_time IS NOT NULL AND is_success = 0)"
    static const char *const sql_runs[2] = {
        "DELETE FROM JOB_EXECUTION_LOG WHERE id IN (SELECT id FROM JOB_EXECUTION_LOG WHERE "
        "job_name = $1 AND start_time < $2 AND NOT " FAILED_RUN " LIMIT $3)",
        "DELETE FROM JOB_EXECUTION_LOG WHERE id IN (SELECT id FROM JOB_EXECUTION_LOG WHERE "
        "job_name = $1 AND start_time < $2 AND " FAILED_RUN " LIMIT $3)",
    };
    static const char *const sql_status[2] = {
        "DELETE FROM JOB_STATUS_TRACE_LOG WHERE id IN (SELECT id FROM JOB_STATUS_TRACE_LOG "
        "WHERE job_name = $1 AND creation_time < $2 AND state <> 'TASK_ERROR' LIMIT $3)",
        "DELETE FROM JOB_STATUS_TRACE_LOG WHERE id IN (SELECT id FROM JOB_STATUS_TRACE_LOG "
        "WHERE job_name = $1 AND creation_time < $2 AND state = 'TASK_ERROR' LIMIT $3)",
    };
    static const char sql_ledger[] =
        "DELETE FROM EJOB_FIRE_LEDGER WHERE (job_name, fire_time_ms, sharding_item) IN (SELECT "
        "job_name, fire_time_ms, sharding_item FROM EJOB_FIRE_LEDGER WHERE job_name = $1 AND "
        "fire_time_ms < $2 LIMIT $3)";
#undef FAILED_RUN
    int days[2];
    days[0] = r->days < 0 ? default_days : r->days;
    days[1] = r->failed_days < 0 ? days[0] : r->failed_days;
    int rc = 0;
    for (int k = 0; k < 2 && rc == 0; k++) {
        if (days[k] <= 0)
            continue; /* kept forever */
        char cut[32];
        text_cutoff(now_ms, days[k], cut);
        rc = purge_one(ops, c, sql_runs[k], r->job_name, tp_text(cut), chunk, deleted);
        if (rc == 0)
            rc = purge_one(ops, c, sql_status[k], r->job_name, tp_text(cut), chunk, deleted);
    }
    if (rc == 0 && days[0] > 0 && days[1] > 0) {
        int longest = days[0] > days[1] ? days[0] : days[1];
        rc = purge_one(ops, c, sql_ledger, r->job_name, tp_int(now_ms - longest * DAY_MS), chunk,
                       deleted);
    }
    return rc;
}

int ej__trace_retention_purge(const struct ej__trace_ops *ops, struct ej__trace_conn *c,
                              int default_days, int64_t now_ms, int chunk, int64_t *deleted)
{
    struct rule_list l = {0};
    int rc = ops->select(c,
                         "SELECT job_name, retention_days, failed_retention_days FROM "
                         "EJOB_JOB_RETENTION ORDER BY job_name",
                         NULL, 0, add_rule, &l);
    for (size_t i = 0; rc == 0 && i < l.count; i++)
        rc = purge_job(ops, c, &l.rows[i], default_days, now_ms, chunk, deleted);
    free(l.rows);
    if (rc != 0)
        return rc;
    /* A run's detail goes with its row, whoever's rule removed it. */
    static const char sql_orphans[] =
        "DELETE FROM EJOB_EXECUTION_DETAIL WHERE id IN (SELECT d.id FROM EJOB_EXECUTION_DETAIL d "
        "LEFT JOIN JOB_EXECUTION_LOG e ON e.id = d.id WHERE e.id IS NULL LIMIT $1)";
    struct ej__tp p[1] = {tp_int(chunk)};
    int64_t n = 0;
    rc = ops->run(c, sql_orphans, p, 1, &n);
    if (rc == 0)
        *deleted += n;
    return rc;
}
