/* The writer: queue, batches, back-off, retention (design in internal.h). */
#include <errno.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "common/check.h"
#include "common/bqueue.h"
#include "common/util.h"
#include "ejob/error.h"
#include "ejob/log.h"
#include "trace/internal.h"

#define MOD "trace"
#define DEFAULT_CAPACITY 100000
#define DEFAULT_BYTES (64u * 1024 * 1024)
#define DEFAULT_FLUSH_MS 5000
#define DEFAULT_OP_MS 10000
#define DEFAULT_BUSY_MS 2000
#define DEFAULT_RETRY_MAX_MS 30000
#define DEFAULT_PURGE_MS (3600 * 1000)
#define RETRY_MIN_MS 100
#define PURGE_CHUNK 1000
#define LOG_EVERY_MS 10000

/* What only the writer (the queue's thread) touches. */
struct writer {
    ej_trace_store *s;
    char err[512]; /* why the last write_batch failed */
    struct ej__trace_conn *conn;
    int64_t retry_ms;   /* current back-off */
    int64_t next_try;   /* monotonic ms before which nothing is tried */
    int64_t next_purge; /* monotonic ms of the next retention pass */
    bool purging;       /* a retention pass is under way */
    bool ever_connected;
    int64_t fail_logged_ms;
};

struct ej_trace_store {
    const struct ej__trace_ops *ops;
    struct ej_trace_target target; /* strings owned */
    struct ej_trace_store_opts o;
    ej__bqueue *q; /* the events, and the writer thread that drains them */
    struct writer w;

    ej__mutex mu;           /* what follows */
    pthread_cond_t done_cv; /* purgers wait for the retention pass */
    size_t bytes;           /* output bytes queued */
    bool purge_asked;
    uint64_t purges_done;
    struct ej_trace_stats st; /* queued and dropped come from the queue */
    /* Jobs' own retention not yet written to EJOB_JOB_RETENTION. */
    struct ej__job_retention *rules;
    size_t nrules;
};

/* ------------------------------------------------------------- helpers */

static size_t output_bytes(const ej_event *ev)
{
    if (ev->type == EJ_EVENT_OUTPUT)
        return ev->u.output.data ? ev->u.output.len : 0;
    if (ev->type != EJ_EVENT_EXECUTION)
        return 0;
    return ev->u.execution.output_len + ev->u.execution.error_output_len;
}

static void timed_wait(pthread_cond_t *cv, ej__mutex *mu, int64_t ms)
{
    struct timespec ts = ej__mono_timespec_in(ms);
    ej__mutex_timedwait(mu, cv, &ts);
}

/* Frees the first n of the events batch (the queue's head) as done. */
static void pop(ej_trace_store *s, ej_event *const *batch, size_t n)
{
    size_t bytes = 0;
    for (size_t i = 0; i < n; i++)
        bytes += output_bytes(batch[i]);
    ej__mutex_lock(&s->mu);
    s->bytes -= bytes;
    ej__mutex_unlock(&s->mu);
    ej__bqueue_pop(s->q, n);
}

/* Copies msg into the stats' last_error, cut to fit. */
static void set_last_error(ej_trace_store *s, const char *msg)
{
    size_t n = strlen(msg);
    if (n >= sizeof s->st.last_error)
        n = sizeof s->st.last_error - 1;
    memcpy(s->st.last_error, msg, n);
    s->st.last_error[n] = '\0';
}

static void note_error(ej_trace_store *s, const char *msg)
{
    ej__mutex_lock(&s->mu);
    set_last_error(s, msg);
    ej__mutex_unlock(&s->mu);
}

/* ------------------------------------------------------------- writing */

static void lose_connection(struct writer *w, const char *why)
{
    ej_trace_store *s = w->s;
    if (w->conn) {
        s->ops->close(w->conn);
        w->conn = NULL;
    }
    int64_t now = ej__mono_ms();
    /* While closing, try often: the flush has a deadline. */
    int64_t max = ej__bqueue_closing(s->q) ? 500 : s->o.retry_max_ms;
    struct ej__bqueue_stats qs;
    ej__bqueue_stats(s->q, &qs);
    ej__mutex_lock(&s->mu);
    s->st.connected = false;
    s->st.failures++;
    set_last_error(s, why);
    ej__mutex_unlock(&s->mu);
    size_t queued = qs.queued;
    w->retry_ms = w->retry_ms ? w->retry_ms * 2 : RETRY_MIN_MS;
    if (w->retry_ms > max)
        w->retry_ms = max;
    w->next_try = now + w->retry_ms;
    if (w->fail_logged_ms == 0 || now - w->fail_logged_ms >= LOG_EVERY_MS) {
        EJ_LOG(EJ_LOG_WARN, MOD, EJ_EDB,
               "%s store unavailable: %s; %zu event(s) kept in memory, retrying in %lld ms",
               s->ops->name, why, queued, (long long)w->retry_ms);
        w->fail_logged_ms = now;
    }
}

static bool ensure_connected(struct writer *w)
{
    if (w->conn)
        return true;
    ej_trace_store *s = w->s;
    char err[512] = "";
    int64_t t = s->target.kind == EJ_TRACE_SQLITE ? s->o.busy_timeout_ms : s->o.op_timeout_ms;
    int rc = s->ops->connect(&s->target, true, t, &w->conn, err, sizeof err);
    if (rc != 0) {
        lose_connection(w, err[0] ? err : ej_strerror(rc));
        return false;
    }
    ej__mutex_lock(&s->mu);
    s->st.connected = true;
    if (w->ever_connected)
        s->st.reconnects++;
    ej__mutex_unlock(&s->mu);
    if (w->ever_connected || w->retry_ms)
        EJ_LOG(EJ_LOG_INFO, MOD, 0, "%s store connected again", s->ops->name);
    w->ever_connected = true;
    w->retry_ms = 0;
    return true;
}

/* One transaction of n events. Returns 0, EJ_EAGAIN or EJ_EDB. */
static int write_batch(struct writer *w, ej_event *const *evs, size_t n)
{
    const struct ej__trace_ops *ops = w->s->ops;
    int rc = ops->run(w->conn, "BEGIN", NULL, 0, NULL);
    for (size_t i = 0; rc == 0 && i < n; i++)
        rc = ej__trace_write_event(ops, w->conn, evs[i]);
    if (rc == 0)
        rc = ops->run(w->conn, "COMMIT", NULL, 0, NULL);
    if (rc != 0) {
        snprintf(w->err, sizeof w->err, "%s", w->conn ? ops->errmsg(w->conn) : "connection lost");
        /* SQLite has rolled back already on some errors: ignore this one. */
        if (w->conn)
            ops->run(w->conn, "ROLLBACK", NULL, 0, NULL);
        note_error(w->s, w->err);
    }
    return rc;
}

static void log_rejected(ej_trace_store *s, const ej_event *ev, const char *why)
{
    const char *id = ev->type == EJ_EVENT_EXECUTION ? ev->u.execution.id
                     : ev->type == EJ_EVENT_FIRE    ? "(fire ledger row)"
                     : ev->type == EJ_EVENT_OUTPUT  ? ev->u.output.execution_id
                                                    : ev->u.status.id;
    const char *job = ev->type == EJ_EVENT_EXECUTION ? ev->u.execution.job_name
                      : ev->type == EJ_EVENT_FIRE    ? ev->u.fire.job_name
                      : ev->type == EJ_EVENT_OUTPUT  ? ev->u.output.job_name
                                                     : ev->u.status.job_name;
    EJ_LOG(EJ_LOG_ERROR, MOD, EJ_EDB, "%s store refused event %s of job %s: %s", s->ops->name, id,
           job ? job : "?", why);
}

/* Writes the n events of batch (the queue's head) and pops those done:
 * all when written; those before a lost connection; each refused one
 * (logged) when the database refuses some. */
static void write_some(struct writer *w, ej_event *const *batch, size_t n)
{
    ej_trace_store *s = w->s;
    int rc = write_batch(w, batch, n);
    if (rc == 0) {
        ej__mutex_lock(&s->mu);
        s->st.written += n;
        s->st.batches++;
        s->st.last_write_ms = ej__now_ms();
        ej__mutex_unlock(&s->mu);
        pop(s, batch, n);
        return;
    }
    if (rc == EJ_EAGAIN || w->conn == NULL) {
        lose_connection(w, w->err);
        return;
    }
    /* Some event the database refuses: one transaction each, so that only
     * that event is lost. */
    size_t ok = 0;
    for (size_t i = 0; i < n; i++) {
        rc = write_batch(w, &batch[i], 1);
        if (rc == EJ_EAGAIN || w->conn == NULL) {
            ej__mutex_lock(&s->mu);
            s->st.written += ok;
            ej__mutex_unlock(&s->mu);
            pop(s, batch, i);
            lose_connection(w, w->err);
            return;
        }
        if (rc == 0) {
            ok++;
        } else {
            log_rejected(s, batch[i], w->err);
            ej__mutex_lock(&s->mu);
            s->st.rejected++;
            ej__mutex_unlock(&s->mu);
        }
    }
    ej__mutex_lock(&s->mu);
    s->st.written += ok;
    s->st.batches += ok;
    if (ok)
        s->st.last_write_ms = ej__now_ms();
    ej__mutex_unlock(&s->mu);
    pop(s, batch, n);
}

/* Adds rule to the pending ones (replacing one of its job); mu held. */
static int add_rule(ej_trace_store *s, const struct ej__job_retention *rule)
{
    EJ_ASSERT_HELD(&s->mu);
    for (size_t i = 0; i < s->nrules; i++) {
        if (strcmp(s->rules[i].job_name, rule->job_name) == 0) {
            s->rules[i] = *rule;
            return 0;
        }
    }
    struct ej__job_retention *r = realloc(s->rules, (s->nrules + 1) * sizeof *r);
    if (r == NULL)
        return EJ_ENOMEM;
    s->rules = r;
    s->rules[s->nrules++] = *rule;
    return 0;
}

/* Writes the jobs' rules set since the last pass. Returns 0, or the
 * database's error (the rules stay pending). */
static int write_rules(struct writer *w)
{
    ej_trace_store *s = w->s;
    ej__mutex_lock(&s->mu);
    struct ej__job_retention *rules = s->rules;
    size_t n = s->nrules;
    s->rules = NULL;
    s->nrules = 0;
    ej__mutex_unlock(&s->mu);
    if (n == 0)
        return 0;
    int rc = ej__trace_retention_write(s->ops, w->conn, rules, n);
    ej__mutex_lock(&s->mu);
    for (size_t i = 0; rc != 0 && i < n; i++) {
        bool newer = false;
        for (size_t k = 0; k < s->nrules; k++)
            newer = newer || strcmp(s->rules[k].job_name, rules[i].job_name) == 0;
        if (!newer)
            add_rule(s, &rules[i]);
    }
    ej__mutex_unlock(&s->mu);
    free(rules);
    return rc;
}

/* One chunk of the retention pass. Runs also when the store keeps rows
 * forever: jobs may have rules of their own (this daemon's or another's
 * sharing the store). */
static void purge_some(struct writer *w)
{
    ej_trace_store *s = w->s;
    int64_t cutoff =
        s->o.retention_days > 0 ? ej__now_ms() - (int64_t)s->o.retention_days * 86400 * 1000 : 0;
    int rc = write_rules(w);
    int64_t deleted = 0;
    if (rc == 0)
        rc = ej__trace_purge_chunk(s->ops, w->conn, cutoff, s->o.retention_days, PURGE_CHUNK,
                                   &deleted);
    if (rc != 0) {
        char why[512];
        snprintf(why, sizeof why, "retention: %s", w->conn ? s->ops->errmsg(w->conn) : "lost");
        if (rc == EJ_EAGAIN || w->conn == NULL) {
            lose_connection(w, why);
        } else {
            EJ_LOG(EJ_LOG_WARN, MOD, rc, "%s", why);
            w->purging = false; /* try again at the next interval */
        }
    } else if (deleted < PURGE_CHUNK) {
        w->purging = false;
    }
    ej__mutex_lock(&s->mu);
    s->st.purged += (uint64_t)deleted;
    if (!w->purging) {
        s->purges_done++;
        pthread_cond_broadcast(&s->done_cv);
    }
    ej__mutex_unlock(&s->mu);
}

/* The writer's step on the queue's thread: a batch of events, else a chunk
 * of the retention pass when one is due; how long to sleep when there is
 * nothing to do or the database is being waited for. */
static int64_t writer_step(ej__bqueue *q, void *user)
{
    ej_trace_store *s = user;
    struct writer *w = &s->w;
    ej_event *batch[EJ_TRACE_BATCH_MAX];
    size_t n = ej__bqueue_peek(q, (void **)batch, EJ_TRACE_BATCH_MAX);
    int64_t now = ej__mono_ms();
    ej__mutex_lock(&s->mu);
    bool asked = s->purge_asked;
    ej__mutex_unlock(&s->mu);
    bool purge_due = w->purging || now >= w->next_purge;
    if (asked) {
        purge_due = true;
        w->purging = true;
    }
    if (n == 0 && !purge_due)
        return w->next_purge - now > 0 ? w->next_purge - now : 1;
    if (w->conn == NULL && now < w->next_try)
        return w->next_try - now;
    if (w->conn == NULL && !ensure_connected(w))
        return w->next_try - now > 0 ? w->next_try - now : 1;
    if (n > 0) {
        write_some(w, batch, n);
        return 0;
    }
    w->purging = true;
    purge_some(w);
    if (!w->purging) {
        ej__mutex_lock(&s->mu);
        s->purge_asked = false;
        ej__mutex_unlock(&s->mu);
        w->next_purge = ej__mono_ms() + s->o.purge_interval_ms;
    }
    return 0;
}

/* The drop line's tail: how the database is. With the queue's lock held. */
static void drop_detail(void *user, char *buf, size_t len)
{
    ej_trace_store *s = user;
    ej__mutex_lock(&s->mu);
    snprintf(buf, len, ", database: %s", s->st.connected ? "connected" : s->st.last_error);
    ej__mutex_unlock(&s->mu);
}

/* ----------------------------------------------------------------- API */

static void free_event(void *ev)
{
    free(ev);
}

static void free_store(ej_trace_store *s)
{
    free((char *)s->target.url);
    free((char *)s->target.password);
    free(s);
}

int ej_trace_store_create(const struct ej_trace_store_opts *opts, ej_trace_store **out)
{
    if (out == NULL)
        return EJ_EINVAL;
    *out = NULL;
    if (opts == NULL || opts->target.url == NULL || ej__trace_ops_of(opts->target.kind) == NULL)
        return EJ_EINVAL;
    ej_trace_store *s = calloc(1, sizeof *s);
    if (s == NULL)
        return EJ_ENOMEM;
    s->ops = ej__trace_ops_of(opts->target.kind);
    s->o = *opts;
    s->target.kind = opts->target.kind;
    s->target.url = strdup(opts->target.url);
    s->target.password = opts->target.password ? strdup(opts->target.password) : NULL;
    if (s->o.retention_days < 0)
        s->o.retention_days = EJ_TRACE_RETENTION_DAYS_DEFAULT;
    if (!s->o.queue_bytes)
        s->o.queue_bytes = DEFAULT_BYTES;
    if (s->o.flush_timeout_ms <= 0)
        s->o.flush_timeout_ms = DEFAULT_FLUSH_MS;
    if (s->o.op_timeout_ms <= 0)
        s->o.op_timeout_ms = DEFAULT_OP_MS;
    if (s->o.busy_timeout_ms <= 0)
        s->o.busy_timeout_ms = DEFAULT_BUSY_MS;
    if (s->o.retry_max_ms <= 0)
        s->o.retry_max_ms = DEFAULT_RETRY_MAX_MS;
    if (s->o.purge_interval_ms <= 0)
        s->o.purge_interval_ms = DEFAULT_PURGE_MS;
    s->o.target = s->target;
    if (s->target.url == NULL || (opts->target.password && s->target.password == NULL)) {
        free_store(s);
        return EJ_ENOMEM;
    }
    s->w.s = s;
    s->w.next_purge = ej__mono_ms() + 5000; /* the first pass soon after start */
    ej__mutex_init(&s->mu);
    pthread_condattr_t a;
    pthread_condattr_init(&a);
    pthread_condattr_setclock(&a, CLOCK_MONOTONIC);
    pthread_cond_init(&s->done_cv, &a);
    pthread_condattr_destroy(&a);
    struct ej__bqueue_opts qo = {
        .capacity = opts->queue_capacity ? opts->queue_capacity : DEFAULT_CAPACITY,
        .thread_name = "ej-trace",
        .log_module = MOD,
        .what = "history event",
        .drop_log_ms = LOG_EVERY_MS,
        .step = writer_step,
        .drop_detail = drop_detail,
        .free_item = free_event,
        .user = s,
    };
    int rc = ej__bqueue_create(&qo, &s->q);
    if (rc != 0) {
        pthread_cond_destroy(&s->done_cv);
        ej__mutex_destroy(&s->mu);
        free_store(s);
        return rc;
    }
    *out = s;
    return 0;
}

int ej_trace_store_post(ej_trace_store *s, const ej_event *ev)
{
    if (s == NULL || ev == NULL ||
        (ev->type != EJ_EVENT_EXECUTION && ev->type != EJ_EVENT_STATUS &&
         ev->type != EJ_EVENT_FIRE && ev->type != EJ_EVENT_OUTPUT))
        return EJ_EINVAL;
    /* The output is kept while the queued output stays under queue_bytes. */
    size_t need = ej_event_output_bytes(ev);
    ej__mutex_lock(&s->mu);
    bool strip = need > 0 && s->bytes + need > s->o.queue_bytes;
    ej__mutex_unlock(&s->mu);
    ej_event *c = ej_event_dup(ev, strip);
    if (c == NULL) {
        ej__bqueue_note_drop(s->q, "out of memory");
        return EJ_ENOMEM;
    }
    /* Counted before the push: the writer may pop it at once. */
    size_t bytes = output_bytes(c);
    ej__mutex_lock(&s->mu);
    s->bytes += bytes;
    ej__mutex_unlock(&s->mu);
    int rc = ej__bqueue_push(s->q, c);
    ej__mutex_lock(&s->mu);
    if (rc == 0) {
        s->st.accepted++;
        if (strip)
            s->st.output_stripped++;
    } else {
        s->bytes -= bytes;
    }
    ej__mutex_unlock(&s->mu);
    if (rc != 0)
        free(c);
    return rc;
}

void ej_trace_sink(const ej_event *ev, void *store)
{
    ej_trace_store_post(store, ev);
}

int ej_trace_store_flush(ej_trace_store *s, int64_t timeout_ms)
{
    if (s == NULL)
        return EJ_EINVAL;
    return ej__bqueue_flush(s->q, timeout_ms);
}

int ej_trace_store_purge(ej_trace_store *s, int64_t timeout_ms)
{
    if (s == NULL)
        return EJ_EINVAL;
    ej__mutex_lock(&s->mu);
    uint64_t target = s->purges_done + 1;
    s->purge_asked = true;
    ej__mutex_unlock(&s->mu);
    ej__bqueue_wake(s->q);
    ej__mutex_lock(&s->mu);
    int64_t deadline = ej__mono_ms() + timeout_ms;
    int rc = 0;
    while (s->purges_done < target) {
        int64_t left = deadline - ej__mono_ms();
        if (left <= 0) {
            rc = EJ_ETIMEDOUT;
            break;
        }
        timed_wait(&s->done_cv, &s->mu, left);
    }
    ej__mutex_unlock(&s->mu);
    return rc;
}

int ej_trace_store_set_job_retention(ej_trace_store *s, const char *job_name, int days,
                                     int failed_days)
{
    struct ej__job_retention rule = {.days = days < 0 ? -1 : days,
                                     .failed_days = failed_days < 0 ? -1 : failed_days};
    if (s == NULL || job_name == NULL || job_name[0] == '\0' ||
        strlen(job_name) >= sizeof rule.job_name)
        return EJ_EINVAL;
    memcpy(rule.job_name, job_name, strlen(job_name) + 1);
    ej__mutex_lock(&s->mu);
    int rc = add_rule(s, &rule);
    ej__mutex_unlock(&s->mu);
    return rc;
}

void ej_trace_store_stats(ej_trace_store *s, struct ej_trace_stats *out)
{
    if (out == NULL)
        return;
    memset(out, 0, sizeof *out);
    if (s == NULL)
        return;
    struct ej__bqueue_stats qs;
    ej__bqueue_stats(s->q, &qs);
    ej__mutex_lock(&s->mu);
    *out = s->st;
    out->queued = qs.queued;
    out->queued_bytes = s->bytes;
    out->dropped = qs.dropped;
    ej__mutex_unlock(&s->mu);
}

void ej_trace_store_destroy(ej_trace_store *s)
{
    if (s == NULL)
        return;
    ej__mutex_lock(&s->mu);
    s->purge_asked = false;
    ej__mutex_unlock(&s->mu);
    /* A database call in progress ends within its own timeout. */
    size_t left = ej__bqueue_close(s->q, s->o.flush_timeout_ms);
    if (s->w.conn)
        s->ops->close(s->w.conn);
    struct ej__bqueue_stats qs;
    ej__bqueue_stats(s->q, &qs);
    s->st.dropped = qs.dropped;
    if (left > 0 || s->st.dropped > 0 || s->st.rejected > 0)
        EJ_LOG(EJ_LOG_WARN, MOD, left ? EJ_ETIMEDOUT : 0,
               "%s store closed: %llu event(s) written, %llu not kept (%zu still queued after "
               "%lld ms: %s), %llu refused by the database",
               s->ops->name, (unsigned long long)s->st.written, (unsigned long long)s->st.dropped,
               left, (long long)s->o.flush_timeout_ms,
               s->st.last_error[0] ? s->st.last_error : "no error",
               (unsigned long long)s->st.rejected);
    else
        EJ_LOG(EJ_LOG_INFO, MOD, 0, "%s store closed: %llu event(s) written", s->ops->name,
               (unsigned long long)s->st.written);
    ej__bqueue_destroy(s->q);
    pthread_cond_destroy(&s->done_cv);
    ej__mutex_destroy(&s->mu);
    free(s->rules);
    free_store(s);
}
