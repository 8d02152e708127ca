/*
 * The history routes of `ejob console`, over the tracing store's read API
 * (ejob/trace.h), rendered by the same code as `ejob history --json`
 * (trace/json.h):
 *   GET /api/history?job=&since=&until=&failed=&item=&instance=&q=&limit=
 *                   &before=CURSOR|&after=CURSOR&registry=R
 *   GET /api/history/ID                    one run: row, status trail, output
 *   GET /api/history/ID/output?out=N&err=N its output from byte offsets (live)
 *   GET /api/registries/R/jobs/J/history   the list, for job J
 * A list is newest first; "older" and "newer" in its reply are the cursors
 * (START_MS:ID of a row) of the pages next to it, null at either end.
 * Runs not ended get instanceLive from the registry (the job's, or
 * registry=R), so the page tells a running item from a dead instance's.
 * The store is named once for the console (--store or history.store): the
 * tables of ElasticJob hold no namespace, so every registry reads the same
 * history. The reader is opened on first use (the daemons may not have
 * written the file yet when the console starts) and again after an error.
 */
#include <ctype.h>
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "common/check.h"
#include "console/internal.h"
#include "console/web.h"
#include "ejob/error.h"
#include "trace/json.h"

#define LIST_LIMIT_DEFAULT 50
#define LIST_LIMIT_MAX 1000
#define ITEM_MAX 1000000

int ej__console_history_init(ej_console_web *web, char *err, size_t errlen)
{
    struct ej__console_history *h = &web->history;
    const struct ej_console_settings *s = &web->settings;
    if (s->history_store == NULL)
        return 0;
    char why[256] = "";
    if (ej_trace_target_parse(s->history_store, &h->target, why, sizeof why) != 0)
        return ej__console_err(EJ_ECONFIG, err, errlen, "history store: %s", why);
    if (s->history_password_file != NULL) {
        int rc =
            ej_trace_read_password_file(s->history_password_file, &h->password, why, sizeof why);
        if (rc != 0)
            return ej__console_err(rc, err, errlen, "history store password: %s", why);
        h->target.password = h->password;
    }
    h->configured = true;
    return 0;
}

void ej__console_history_fini(ej_console_web *web)
{
    struct ej__console_history *h = &web->history;
    ej_trace_reader_close(h->reader);
    h->reader = NULL;
    if (h->password != NULL) {
        explicit_bzero(h->password, strlen(h->password));
        free(h->password);
        h->password = NULL;
    }
    ej__mutex_destroy(&h->mu);
}

ej_trace_reader *ej__console_history_reader_locked(struct ej__console_request *req)
{
    EJ_ASSERT_HELD(&req->web->history.mu);
    struct ej__console_history *h = &req->web->history;
    if (h->reader != NULL)
        return h->reader;
    char err[512] = "";
    int rc = ej_trace_reader_open(&h->target, &h->reader, err, sizeof err);
    if (rc == EJ_ENOTFOUND) {
        ej__console_reply_error(req, MHD_HTTP_SERVICE_UNAVAILABLE,
                                "no history in %s yet (%s): no daemon has written it",
                                h->target.url, err[0] ? err : ej_strerror(rc));
        return NULL;
    }
    if (rc != 0) {
        ej__console_reply_error(req, MHD_HTTP_SERVICE_UNAVAILABLE,
                                "cannot read the history store %s: %s", h->target.url,
                                err[0] ? err : ej_strerror(rc));
        h->reader = NULL;
        return NULL;
    }
    return h->reader;
}

void ej__console_history_failed_locked(struct ej__console_request *req, int rc)
{
    EJ_ASSERT_HELD(&req->web->history.mu);
    struct ej__console_history *h = &req->web->history;
    if (rc == EJ_ENOTFOUND) {
        ej__console_reply_error(req, MHD_HTTP_NOT_FOUND, "%s", ej_trace_reader_errmsg(h->reader));
        return;
    }
    if (rc == EJ_EINVAL) {
        ej__console_reply_error(req, MHD_HTTP_BAD_REQUEST, "%s", ej_trace_reader_errmsg(h->reader));
        return;
    }
    ej__console_reply_error(req, MHD_HTTP_BAD_GATEWAY, "history query failed: %s",
                            ej_trace_reader_errmsg(h->reader)[0] ? ej_trace_reader_errmsg(h->reader)
                                                                 : ej_strerror(rc));
    if (rc == EJ_EDB) {
        ej_trace_reader_close(h->reader);
        h->reader = NULL;
    }
}

const char *ej__console_query_arg(const struct ej__console_request *req, const char *name)
{
    const char *v = MHD_lookup_connection_value(req->conn, MHD_GET_ARGUMENT_KIND, name);
    return v != NULL && v[0] != '\0' ? v : NULL;
}

bool ej__console_parse_long(const char *s, long min, long max, long *out)
{
    char *end = NULL;
    long n = strtol(s, &end, 10);
    if (s[0] < '0' || s[0] > '9' || *end != '\0' || n < min || n > max)
        return false;
    *out = n;
    return true;
}

bool ej__console_parse_window(struct ej__console_request *req, const char *since_default,
                              int64_t *since_ms, int64_t *until_ms)
{
    static const char *const bounds[] = {"since", "until"};
    for (int i = 0; i < 2; i++) {
        const char *v = ej__console_query_arg(req, bounds[i]);
        if (i == 0 && v == NULL)
            v = since_default;
        int64_t ms = v != NULL ? ej__trace_parse_when(v) : 0;
        if (ms < 0) {
            ej__console_reply_error(req, MHD_HTTP_BAD_REQUEST,
                                    "%s: \"%s\" is neither a duration (2h) nor a time "
                                    "(2026-01-01 10:00)",
                                    bounds[i], v);
            return false;
        }
        *(i == 0 ? since_ms : until_ms) = ms;
    }
    return true;
}

bool ej__console_parse_arg_long(struct ej__console_request *req, const char *name, long min,
                                long max, long *out)
{
    const char *v = ej__console_query_arg(req, name);
    if (v == NULL || ej__console_parse_long(v, min, max, out))
        return true;
    ej__console_reply_error(req, MHD_HTTP_BAD_REQUEST, "%s: expected %ld..%ld, got \"%s\"", name,
                            min, max, v);
    return false;
}

bool ej__console_parse_cursor(const char *text, int64_t *ms, const char **id)
{
    if (text == NULL || text[0] < '0' || text[0] > '9')
        return false;
    char *end = NULL;
    errno = 0;
    long long v = strtoll(text, &end, 10);
    if (errno != 0 || *end != ':' || v > EJ_CONSOLE_CURSOR_MS_MAX)
        return false;
    const char *p = end + 1;
    size_t n = strlen(p);
    if (n == 0 || n >= EJ_EVENT_ID_LEN)
        return false;
    for (size_t i = 0; i < n; i++)
        if (!isalnum((unsigned char)p[i]) && p[i] != '-')
            return false;
    *ms = v;
    *id = p;
    return true;
}

/* before= / after=: "START_MS:ID" as a reply's older / newer gave it. */
static bool parse_cursor(struct ej__console_request *req, struct ej_trace_query *q)
{
    const char *before = ej__console_query_arg(req, "before");
    const char *after = ej__console_query_arg(req, "after");
    const char *c = before != NULL ? before : after;
    if (c == NULL)
        return true;
    if (before != NULL && after != NULL) {
        ej__console_reply_error(req, MHD_HTTP_BAD_REQUEST, "give before or after, not both");
        return false;
    }
    int64_t ms = 0;
    const char *id = NULL;
    if (!ej__console_parse_cursor(c, &ms, &id)) {
        ej__console_reply_error(req, MHD_HTTP_BAD_REQUEST,
                                "%s: \"%s\" is not a cursor (START_MS:ID from older or newer)",
                                before != NULL ? "before" : "after", c);
        return false;
    }
    q->page = before != NULL ? -1 : 1;
    q->cursor_ms = ms;
    q->cursor_id = id;
    return true;
}

/* The query's filters from the URL; false with a 400 reply naming the bad
 * one. */
static bool parse_query(struct ej__console_request *req, const char *job, struct ej_trace_query *q)
{
    memset(q, 0, sizeof *q);
    q->item = -1;
    q->limit = LIST_LIMIT_DEFAULT;
    q->job_name = job != NULL ? job : ej__console_query_arg(req, "job");
    if (q->job_name != NULL && !ej_layout_is_segment(q->job_name)) {
        ej__console_reply_error(req, MHD_HTTP_BAD_REQUEST, "job: \"%s\" is not a job name",
                                q->job_name);
        return false;
    }
    if (!ej__console_parse_window(req, NULL, &q->since_ms, &q->until_ms))
        return false;
    const char *failed = ej__console_query_arg(req, "failed");
    if (failed != NULL) {
        bool yes = strcmp(failed, "true") == 0 || strcmp(failed, "1") == 0;
        if (!yes && strcmp(failed, "false") != 0 && strcmp(failed, "0") != 0) {
            ej__console_reply_error(req, MHD_HTTP_BAD_REQUEST, "failed: expected true or false");
            return false;
        }
        q->failed_only = yes;
    }
    long n = -1;
    if (!ej__console_parse_arg_long(req, "item", 0, ITEM_MAX, &n))
        return false;
    q->item = (int)n;
    n = LIST_LIMIT_DEFAULT;
    if (!ej__console_parse_arg_long(req, "limit", 1, LIST_LIMIT_MAX, &n))
        return false;
    q->limit = (size_t)n;
    q->instance_id = ej__console_query_arg(req, "instance");
    q->output_text = ej__console_query_arg(req, "q");
    return parse_cursor(req, q);
}

static json_t *cursor_of(const struct ej_trace_execution *e)
{
    char buf[64 + EJ_EVENT_ID_LEN];
    snprintf(buf, sizeof buf, "%lld:%s", (long long)e->sort_ms, e->id);
    return json_string(buf);
}

/* Whether the instance of a run not ended is still registered. */
static json_t *instance_live(ej_console *con, const struct ej_trace_execution *e)
{
    if (con == NULL || e->completed || e->instance_id == NULL || e->instance_id[0] == '\0' ||
        !ej_layout_is_job_name(e->job_name) || !ej_layout_is_segment(e->instance_id))
        return json_null();
    /* A job this registry does not have: unknown here, not dead. */
    char path[EJ_REG_MAX_PATH_LEN + 1];
    ej_layout_path(path, sizeof path, e->job_name, EJ_LAYOUT_NODE_CONFIG, 0, NULL);
    bool known = false, live = false;
    if (ej__console_exists(con, path, &known) != 0 || !known)
        return json_null();
    ej_layout_path(path, sizeof path, e->job_name, EJ_LAYOUT_NODE_INSTANCE, 0, e->instance_id);
    if (ej__console_exists(con, path, &live) != 0)
        return json_null();
    return json_boolean(live);
}

static void list_locked(struct ej__console_request *req, ej_console *con, ej_trace_reader *r,
                        struct ej_trace_query *q)
{
    EJ_ASSERT_HELD(&req->web->history.mu);
    /* One row more than asked tells whether a page lies beyond. */
    size_t want = q->limit;
    q->limit = want + 1;
    struct ej_trace_execution_list l;
    int rc = ej_trace_query_executions(r, q, &l);
    if (rc != 0)
        return ej__console_history_failed_locked(req, rc);
    bool newer_pages = q->page > 0, more = l.count > want;
    size_t from = more && newer_pages ? 1 : 0; /* newer: the extra row is the newest */
    size_t to = more && !newer_pages ? want : l.count;
    json_t *rows = json_array();
    for (size_t i = from; i < to; i++) {
        json_t *o = ej__trace_execution_json(&l.rows[i]);
        json_object_set_new(o, "instanceLive", instance_live(con, &l.rows[i]));
        json_array_append_new(rows, o);
    }
    bool has_older = newer_pages ? to > from : more;
    bool has_newer = newer_pages ? more : q->page < 0 && to > from;
    json_t *older = has_older && to > from ? cursor_of(&l.rows[to - 1]) : json_null();
    json_t *newer = has_newer && to > from ? cursor_of(&l.rows[from]) : json_null();
    ej_trace_execution_list_fini(&l);
    req->status = MHD_HTTP_OK;
    /* The store as it may be shown: never a password, whatever was given. */
    char *store = ej_trace_target_display(&req->web->history.target);
    req->reply = json_pack("{s:s?,s:I,s:o,s:o,s:o}", "store", store, "limit", (json_int_t)want,
                           "executions", rows, "older", older, "newer", newer);
    free(store);
}

static void show_locked(struct ej__console_request *req, ej_trace_reader *r, const char *id)
{
    EJ_ASSERT_HELD(&req->web->history.mu);
    struct ej_trace_execution_detail d;
    int rc = ej_trace_get_execution(r, id, &d);
    if (rc != 0)
        return ej__console_history_failed_locked(req, rc);
    req->status = MHD_HTTP_OK;
    req->reply = ej__trace_detail_json(&d);
    ej_trace_execution_detail_fini(&d);
}

bool ej__console_last_fire(ej_console_web *web, const char *job, int64_t *ms)
{
    struct ej__console_history *h = &web->history;
    if (!h->configured)
        return false;
    struct ej_trace_fire_query q = {.job_name = job, .item = -1, .limit = 1};
    struct ej_trace_fire_list l = {0};
    char err[256];
    ej__mutex_lock(&h->mu);
    int rc = h->reader != NULL ? 0 : ej_trace_reader_open(&h->target, &h->reader, err, sizeof err);
    if (rc == 0)
        rc = ej_trace_query_fires(h->reader, &q, &l);
    if (rc == EJ_EDB) {
        ej_trace_reader_close(h->reader);
        h->reader = NULL;
    }
    ej__mutex_unlock(&h->mu);
    bool found = rc == 0 && l.count > 0;
    if (found)
        *ms = l.rows[0].fire_time_ms;
    ej_trace_fire_list_fini(&l);
    return found;
}

bool ej__console_history_configured(struct ej__console_request *req)
{
    if (req->web->history.configured)
        return true;
    ej__console_reply_error(req, MHD_HTTP_NOT_FOUND,
                            "no history store is configured: start the console with --store "
                            "sqlite:PATH|postgresql://USER@HOST/DB, or set history.store in "
                            "its settings file");
    json_object_set_new(req->reply, "configured", json_false());
    return false;
}

/* The registry a run list reads instance liveness from: the route's, or
 * registry=R where the caller may view it; NULL: none. */
static ej_console *liveness_registry(struct ej__console_request *req, ej_console *con)
{
    const char *name = ej__console_query_arg(req, "registry");
    if (con != NULL || name == NULL)
        return con;
    for (size_t i = 0; i < req->web->backend_count; i++)
        if (strcmp(req->web->backends[i].def->name, name) == 0 &&
            ej__console_role_on(&req->who, name) >= EJ_CONSOLE_ROLE_VIEWER)
            return req->web->backends[i].con;
    return NULL;
}

void ej__console_api_history(struct ej__console_request *req, ej_console *con, const char *job,
                             const char *id)
{
    struct ej__console_history *h = &req->web->history;
    if (!ej__console_history_configured(req))
        return;
    struct ej_trace_query q;
    if (id == NULL && !parse_query(req, job, &q))
        return;
    ej__mutex_lock(&h->mu);
    ej_trace_reader *r = ej__console_history_reader_locked(req);
    if (r != NULL && id != NULL)
        show_locked(req, r, id);
    else if (r != NULL)
        list_locked(req, liveness_registry(req, con), r, &q);
    ej__mutex_unlock(&h->mu);
}

/* The offsets of a live reader: out and err, bytes already shown. */
static bool parse_offsets(struct ej__console_request *req, int64_t *out, int64_t *err)
{
    long o = 0, e = 0;
    if (!ej__console_parse_arg_long(req, "out", 0, 1L << 40, &o) ||
        !ej__console_parse_arg_long(req, "err", 0, 1L << 40, &e))
        return false;
    *out = o;
    *err = e;
    return true;
}

void ej__console_api_history_output(struct ej__console_request *req, const char *id)
{
    struct ej__console_history *h = &req->web->history;
    if (!ej__console_history_configured(req))
        return;
    int64_t out_from, err_from;
    if (!parse_offsets(req, &out_from, &err_from))
        return;
    ej__mutex_lock(&h->mu);
    ej_trace_reader *r = ej__console_history_reader_locked(req);
    struct ej_trace_output o;
    int rc = r != NULL ? ej_trace_read_output(r, id, out_from, err_from, &o) : 0;
    if (r != NULL && rc != 0) {
        ej__console_history_failed_locked(req, rc);
    } else if (r != NULL) {
        req->status = MHD_HTTP_OK;
        req->reply = ej__trace_output_json(id, &o);
        ej_trace_output_fini(&o);
    }
    ej__mutex_unlock(&h->mu);
}
