/*
 * The job list of `ejob console` for thousands of jobs, and the times of a
 * job:
 *   GET /api/registries/R/jobs?offset=&limit=&sort=&order=&q=&status=&errors=
 * filters, sorts and pages on the server ({total, offset, limit, jobs}).
 * Its reply carries an ETag; a poll that sends it back in If-None-Match
 * gets 304 without a body. An unchanged list is known without computing
 * it: the ETag of the last few queries is kept with the tree cache's
 * change count (ej_console_generation), the connection state, and a time
 * after which the times shown may have moved (the first next fire of the
 * page, at most LIST_VALID_MS).
 * A job's times: its zone, its next fires (the cron module's
 * ej_cron_next, as `ejob cron next`) and its last fire (the fire ledger's
 * newest row, when a history store is configured).
 */
#include <ctype.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "common/check.h"
#include "common/util.h"
#include "console/internal.h"
#include "console/web.h"
#include "ejob/cron.h"
#include "ejob/error.h"

#define LIST_LIMIT_MAX 1000
#define LIST_VALID_MS 10000
#define NEXT_FIRES_MAX 5

/* The zone a job fires in: its timeZone, else its daemon's host zone,
 * unknown here: the console's own stands in (*assumed). */
static const ej_tz *job_zone(const struct ej_console_job *j, bool *assumed)
{
    ej_tz *tz = NULL;
    const char *name = j->config_parsed ? j->cfg.time_zone : NULL;
    *assumed = name == NULL || name[0] == '\0';
    if (ej_tz_load(*assumed ? NULL : name, &tz) != 0)
        return NULL;
    return tz;
}

/* Up to n next fire times after now into out; returns how many. */
static int next_fires(const struct ej_console_job *j, const ej_tz *tz, int64_t now, int64_t *out,
                      int n)
{
    if (!j->config_parsed || tz == NULL || j->cfg.cron == NULL || j->cfg.cron[0] == '\0')
        return 0;
    ej_cron *cron = NULL;
    char err[128];
    if (ej_cron_parse(j->cfg.cron, &cron, err, sizeof err) != 0)
        return 0;
    int k = 0;
    for (int64_t after = now; k < n && ej_cron_next(cron, tz, after, &out[k]) == 0; k++)
        after = out[k];
    ej_cron_free(cron);
    return k;
}

static json_t *iso_in(const ej_tz *tz, int64_t ms)
{
    char buf[48];
    ej_tz_format_iso(tz, ms, buf, sizeof buf);
    return json_string(buf);
}

int64_t ej__console_job_times(ej_console_web *web, const struct ej_console_job *j, int count,
                              json_t *o)
{
    bool assumed = false;
    const ej_tz *tz = job_zone(j, &assumed);
    int64_t fires[NEXT_FIRES_MAX];
    int n = next_fires(j, tz, ej__now_ms(), fires, count < NEXT_FIRES_MAX ? count : NEXT_FIRES_MAX);
    json_object_set_new(o, "timeZone", tz != NULL ? json_string(ej_tz_name(tz)) : json_null());
    json_object_set_new(o, "timeZoneAssumed", json_boolean(assumed));
    json_t *next = json_array();
    for (int i = 0; i < n; i++)
        json_array_append_new(next, iso_in(tz, fires[i]));
    json_object_set_new(o, count == 1 ? "nextFire" : "nextFires",
                        count == 1 ? (n ? iso_in(tz, fires[0]) : json_null()) : next);
    if (count == 1)
        json_decref(next);
    int64_t last = 0;
    json_object_set_new(o, "lastFire",
                        tz != NULL && ej__console_last_fire(web, j->name, &last) && last > 0
                            ? iso_in(tz, last)
                            : json_null());
    return n ? fires[0] : 0;
}

struct list_query {
    long offset, limit; /* limit 0: every job */
    const char *sort;   /* name, status, instances, nextFire, type */
    bool desc;
    const char *text;   /* in the name or description, any case */
    const char *status;
    bool errors_only;
};

static bool parse_bool_arg(struct ej__console_request *req, const char *name, bool *out)
{
    const char *v = ej__console_query_arg(req, name);
    if (v == NULL)
        return true;
    *out = strcmp(v, "true") == 0 || strcmp(v, "1") == 0;
    if (*out || strcmp(v, "false") == 0 || strcmp(v, "0") == 0)
        return true;
    ej__console_reply_error(req, MHD_HTTP_BAD_REQUEST, "%s: expected true or false", name);
    return false;
}

static bool parse_list_query(struct ej__console_request *req, struct list_query *q)
{
    static const char *const sorts[] = {"name", "status", "instances", "nextFire", "type"};
    memset(q, 0, sizeof *q);
    if (!ej__console_parse_arg_long(req, "offset", 0, 10000000, &q->offset) ||
        !ej__console_parse_arg_long(req, "limit", 0, LIST_LIMIT_MAX, &q->limit) ||
        !parse_bool_arg(req, "errors", &q->errors_only))
        return false;
    q->sort = ej__console_query_arg(req, "sort");
    if (q->sort == NULL)
        q->sort = "name";
    bool known = false;
    for (size_t i = 0; i < sizeof sorts / sizeof sorts[0]; i++)
        known = known || strcmp(q->sort, sorts[i]) == 0;
    if (!known) {
        ej__console_reply_error(req, MHD_HTTP_BAD_REQUEST,
                                "sort: \"%s\" is none of name, status, instances, nextFire, type",
                                q->sort);
        return false;
    }
    const char *order = ej__console_query_arg(req, "order");
    if (order != NULL && strcmp(order, "asc") != 0 && strcmp(order, "desc") != 0) {
        ej__console_reply_error(req, MHD_HTTP_BAD_REQUEST, "order: expected asc or desc");
        return false;
    }
    q->desc = order != NULL && strcmp(order, "desc") == 0;
    q->text = ej__console_query_arg(req, "q");
    q->status = ej__console_query_arg(req, "status");
    return true;
}

static bool contains_nocase(const char *hay, const char *needle)
{
    size_t n = strlen(needle);
    for (; hay != NULL && *hay != '\0'; hay++)
        if (strncasecmp(hay, needle, n) == 0)
            return true;
    return n == 0;
}

static bool matches(const struct ej_console_job *j, const struct list_query *q)
{
    if (q->text != NULL && !contains_nocase(j->name, q->text) &&
        !(j->config_parsed && contains_nocase(j->cfg.description, q->text)))
        return false;
    if (q->status != NULL && strcmp(ej_console_status_name(j->status), q->status) != 0)
        return false;
    return !q->errors_only || !j->config_ok;
}

struct row {
    const struct ej_console_job *job;
    int64_t next_fire; /* 0: none */
};

static int cmp_rows(const void *a, const void *b, void *query)
{
    const struct list_query *sort_by = query;
    const struct row *x = a, *y = b;
    const char *s = sort_by->sort;
    int c = 0;
    if (strcmp(s, "status") == 0)
        c = strcmp(ej_console_status_name(x->job->status), ej_console_status_name(y->job->status));
    else if (strcmp(s, "instances") == 0)
        c = (x->job->instance_count > y->job->instance_count) -
            (x->job->instance_count < y->job->instance_count);
    else if (strcmp(s, "nextFire") == 0) /* none last */
        c = (x->next_fire == 0) != (y->next_fire == 0)
                ? (x->next_fire == 0) - (y->next_fire == 0)
                : (x->next_fire > y->next_fire) - (x->next_fire < y->next_fire);
    else if (strcmp(s, "type") == 0 && x->job->config_parsed && y->job->config_parsed)
        c = strcmp(ej_job_type_name(x->job->cfg.job_type), ej_job_type_name(y->job->cfg.job_type));
    if (c == 0)
        c = strcmp(x->job->name, y->job->name);
    return sort_by->desc ? -c : c;
}

static size_t disabled_servers(const struct ej_console_job *j)
{
    size_t n = 0;
    for (size_t i = 0; i < j->server_count; i++)
        n += j->servers[i].disabled;
    return n;
}

/* The page's body; *valid_until: when its times may have moved. */
static json_t *page_body(struct ej__console_request *req, ej_console *con,
                         const struct list_query *q, const struct ej_console_job *jobs, size_t n,
                         int64_t *valid_until)
{
    struct row *rows = calloc(n ? n : 1, sizeof *rows);
    if (rows == NULL) {
        ej__console_reply_error(req, MHD_HTTP_INTERNAL_SERVER_ERROR, "out of memory");
        return NULL;
    }
    size_t k = 0;
    int64_t now = ej__now_ms();
    for (size_t i = 0; i < n; i++) {
        if (!matches(&jobs[i], q))
            continue;
        rows[k].job = &jobs[i];
        bool assumed;
        if (strcmp(q->sort, "nextFire") == 0)
            next_fires(&jobs[i], job_zone(&jobs[i], &assumed), now, &rows[k].next_fire, 1);
        k++;
    }
    qsort_r(rows, k, sizeof *rows, cmp_rows, (void *)q);
    size_t from = (size_t)q->offset < k ? (size_t)q->offset : k;
    size_t to = q->limit == 0 || from + (size_t)q->limit > k ? k : from + (size_t)q->limit;
    json_t *arr = json_array();
    *valid_until = now + LIST_VALID_MS;
    for (size_t i = from; i < to; i++) {
        json_t *o = ej__console_job_brief_json(rows[i].job);
        json_object_set_new(o, "disabledServers",
                            json_integer((json_int_t)disabled_servers(rows[i].job)));
        int64_t next = ej__console_job_times(req->web, rows[i].job, 1, o);
        if (next > 0 && next < *valid_until)
            *valid_until = next;
        json_array_append_new(arr, o);
    }
    free(rows);
    return json_pack("{s:I,s:I,s:I,s:s,s:s,s:b,s:o}", "total", (json_int_t)k, "offset",
                     (json_int_t)q->offset, "limit", (json_int_t)q->limit, "sort", q->sort,
                     "order", q->desc ? "desc" : "asc", "connected",
                     ej_registry_is_connected(ej_console_registry(con)), "jobs", arr);
}

/* The jobs (loaded again only when the tree cache changed) and the page
 * over them; NULL with an error reply. */
static json_t *list_body(struct ej__console_request *req, struct ej__console_backend *b,
                         const struct list_query *q, int64_t *valid_until)
{
    ej__mutex_lock(&b->list_mu);
    uint64_t gen = ej_console_generation(b->con);
    int rc = 0;
    if (!b->list_loaded || b->list_gen != gen) {
        ej_console_jobs_free(b->list_jobs, b->list_count);
        b->list_jobs = NULL;
        b->list_count = 0;
        rc = ej_console_jobs(b->con, &b->list_jobs, &b->list_count);
        b->list_loaded = rc == 0;
        b->list_gen = gen;
    }
    json_t *body = NULL;
    if (rc == 0)
        body = page_body(req, b->con, q, b->list_jobs, b->list_count, valid_until);
    ej__mutex_unlock(&b->list_mu);
    if (rc != 0)
        ej__console_reply_error(req, MHD_HTTP_BAD_GATEWAY, "cannot read the jobs: %s",
                                ej_strerror(rc));
    return body;
}

/* FNV-1a of the body, as a weak ETag. */
static void etag_of(const json_t *body, char out[EJ__CONSOLE_ETAG_MAX])
{
    char *text = json_dumps(body, JSON_COMPACT);
    uint64_t h = 1469598103934665603ULL;
    for (const char *p = text; p != NULL && *p != '\0'; p++)
        h = (h ^ (unsigned char)*p) * 1099511628211ULL;
    free(text);
    snprintf(out, EJ__CONSOLE_ETAG_MAX, "W/\"%016llx\"", (unsigned long long)h);
}

static struct ej__console_backend *backend_of(ej_console_web *web, ej_console *con)
{
    for (size_t i = 0; i < web->backend_count; i++)
        if (web->backends[i].con == con)
            return &web->backends[i];
    return NULL;
}

void ej__console_api_jobs(struct ej__console_request *req, ej_console *con)
{
    struct list_query q;
    if (!parse_list_query(req, &q))
        return;
    struct ej__console_backend *b = backend_of(req->web, con);
    if (b == NULL || !b->list_mu_ready)
        return ej__console_reply_error(req, MHD_HTTP_INTERNAL_SERVER_ERROR, "no registry");
    char key[sizeof b->list_etags[0].key];
    snprintf(key, sizeof key, "%llu|%d|%ld|%ld|%s|%d|%s|%s|%d",
             (unsigned long long)ej_console_generation(con),
             ej_registry_is_connected(ej_console_registry(con)), q.offset, q.limit, q.sort, q.desc,
             q.text ? q.text : "", q.status ? q.status : "", q.errors_only);
    const char *inm =
        MHD_lookup_connection_value(req->conn, MHD_HEADER_KIND, MHD_HTTP_HEADER_IF_NONE_MATCH);
    int64_t now = ej__now_ms();
    ej__mutex_lock(&req->web->mu);
    for (size_t i = 0; inm != NULL && i < EJ__CONSOLE_LIST_ETAGS; i++) {
        const struct ej__console_list_etag *e = &b->list_etags[i];
        if (strcmp(e->key, key) == 0 && now < e->valid_until_ms && strcmp(e->etag, inm) == 0) {
            snprintf(req->etag, sizeof req->etag, "%s", e->etag);
            req->status = MHD_HTTP_NOT_MODIFIED;
        }
    }
    ej__mutex_unlock(&req->web->mu);
    if (req->status == MHD_HTTP_NOT_MODIFIED)
        return;
    int64_t valid_until = 0;
    json_t *body = list_body(req, b, &q, &valid_until);
    if (body == NULL)
        return;
    etag_of(body, req->etag);
    ej__mutex_lock(&req->web->mu);
    struct ej__console_list_etag *e = &b->list_etags[b->list_etag_next++ % EJ__CONSOLE_LIST_ETAGS];
    for (size_t i = 0; i < EJ__CONSOLE_LIST_ETAGS; i++)
        if (strcmp(b->list_etags[i].key, key) == 0)
            e = &b->list_etags[i];
    snprintf(e->key, sizeof e->key, "%s", key);
    snprintf(e->etag, sizeof e->etag, "%s", req->etag);
    e->valid_until_ms = valid_until;
    ej__mutex_unlock(&req->web->mu);
    if (inm != NULL && strcmp(inm, req->etag) == 0) {
        json_decref(body);
        req->status = MHD_HTTP_NOT_MODIFIED;
        return;
    }
    req->status = MHD_HTTP_OK;
    req->reply = body;
}
