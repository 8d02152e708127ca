/*
 * The fire-ledger route of `ejob console`, over the history store's read
 * API (ej_trace_query_fires), rendered by the same code as `ejob fires
 * --json` (trace/json.h):
 *   GET /api/registries/R/jobs/J/fires?since=&until=&item=&gaps=&limit=
 * Reply: {store, since, until, limit, fires: [ledger rows, oldest first]};
 * since defaults to 2h back. gaps=true keeps the rows of items that did
 * not run. The console page turns the rows into the table `ejob fires`
 * prints (a row per fire time, a column per item).
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "common/check.h"
#include "common/util.h"
#include "console/internal.h"
#include "console/web.h"
#include "ejob/error.h"
#include "trace/json.h"

#define FIRES_LIMIT_DEFAULT 5000
#define FIRES_LIMIT_MAX 100000
#define ITEM_MAX 1000000

/* The filters from the URL; false with a 400 reply naming the bad one. */
static bool parse_fires_query(struct ej__console_request *req, const char *job,
                              struct ej_trace_fire_query *q, bool *gaps)
{
    *q = (struct ej_trace_fire_query){.job_name = job, .item = -1, .limit = FIRES_LIMIT_DEFAULT};
    if (!ej__console_parse_window(req, "2h", &q->since_ms, &q->until_ms))
        return false;
    long n = -1;
    if (!ej__console_parse_arg_long(req, "item", 0, ITEM_MAX, &n))
        return false;
    q->item = (int)n;
    n = FIRES_LIMIT_DEFAULT;
    if (!ej__console_parse_arg_long(req, "limit", 1, FIRES_LIMIT_MAX, &n))
        return false;
    q->limit = (size_t)n;
    const char *g = ej__console_query_arg(req, "gaps");
    *gaps = false;
    if (g != NULL) {
        *gaps = strcmp(g, "true") == 0 || strcmp(g, "1") == 0;
        if (!*gaps && strcmp(g, "false") != 0 && strcmp(g, "0") != 0) {
            ej__console_reply_error(req, MHD_HTTP_BAD_REQUEST, "gaps: expected true or false");
            return false;
        }
    }
    return true;
}

static void fires_locked(struct ej__console_request *req, ej_trace_reader *r,
                         const struct ej_trace_fire_query *q, bool gaps)
{
    EJ_ASSERT_HELD(&req->web->history.mu);
    struct ej_trace_fire_list l;
    int rc = ej_trace_query_fires(r, q, &l);
    if (rc == EJ_ENOTFOUND) {
        ej__console_reply_error(req, MHD_HTTP_SERVICE_UNAVAILABLE,
                                "the history store has no fire ledger yet: no daemon of this "
                                "version has written to it");
        return;
    }
    if (rc != 0)
        return ej__console_history_failed_locked(req, rc);
    json_t *rows = json_array();
    for (size_t i = 0; i < l.count; i++)
        if (!gaps || strcmp(l.rows[i].outcome, EJ_FIRE_RAN) != 0)
            json_array_append_new(rows, ej__trace_fire_json(&l.rows[i]));
    ej_trace_fire_list_fini(&l);
    req->status = MHD_HTTP_OK;
    req->reply = json_pack("{s:s,s:I,s:I,s:I,s:o}", "store", req->web->settings.history_store,
                           "since", (json_int_t)q->since_ms, "until",
                           (json_int_t)(q->until_ms ? q->until_ms : ej__now_ms()), "limit",
                           (json_int_t)q->limit, "fires", rows);
}

void ej__console_api_fires(struct ej__console_request *req, const char *job)
{
    if (!ej__console_history_configured(req))
        return;
    struct ej_trace_fire_query q;
    bool gaps;
    if (!parse_fires_query(req, job, &q, &gaps))
        return;
    struct ej__console_history *h = &req->web->history;
    ej__mutex_lock(&h->mu);
    ej_trace_reader *r = ej__console_history_reader_locked(req);
    if (r != NULL)
        fires_locked(req, r, &q, gaps);
    ej__mutex_unlock(&h->mu);
}
