/*
 * HTTP jobs: one request per item, with the item's context JSON in the
 * `shardingContext` header and its fencing token in X-Ejob-Fencing-Token.
 * Success is a 2xx response; cancellation aborts the transfer.
 */
#include <curl/curl.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

#include "common/util.h"
#include "ejob/error.h"
#include "ejob/log.h"
#include "exec/exec_impl.h"
#include "exec/internal.h"

#define MOD "exec"
#define EXCERPT_LEN 200
#define CANCEL_TICK_MS 50

static pthread_once_t curl_once = PTHREAD_ONCE_INIT;
static CURLcode curl_init_rc;

static void curl_init(void)
{
    curl_init_rc = curl_global_init(CURL_GLOBAL_DEFAULT);
}

struct body {
    char *data;
    size_t len, cap, limit;
    bool truncated;
    bool failed;
};

static size_t on_body(char *ptr, size_t size, size_t nmemb, void *user)
{
    struct body *b = user;
    size_t n = size * nmemb;
    size_t take = n;
    size_t room = b->limit > b->len ? b->limit - b->len : 0;
    if (take > room) {
        take = room;
        b->truncated = true;
    }
    if (take > 0 && !b->failed) {
        if (b->len + take + 1 > b->cap) {
            size_t cap = b->cap ? b->cap : 1024;
            while (cap < b->len + take + 1)
                cap *= 2;
            char *d = realloc(b->data, cap);
            if (d == NULL) {
                b->failed = true;
                b->truncated = true;
                return n;
            }
            b->data = d;
            b->cap = cap;
        }
        memcpy(b->data + b->len, ptr, take);
        b->len += take;
        b->data[b->len] = '\0';
    }
    return n; /* keep reading what exceeds the cap, and drop it */
}

static int on_progress(void *user, curl_off_t dltotal, curl_off_t dlnow, curl_off_t ultotal,
                       curl_off_t ulnow)
{
    (void)dltotal;
    (void)dlnow;
    (void)ultotal;
    (void)ulnow;
    return ej_shard_context_is_cancelled(user) ? 1 : 0;
}

/*
 * curl_easy_perform, but a cancelled item is aborted within CANCEL_TICK_MS:
 * with no data moving, libcurl calls the progress callback only about once
 * a second.
 */
static CURLcode perform(CURL *h, const ej_shard_context *ctx)
{
    CURLM *m = ej__exec_cancellable(ctx) ? curl_multi_init() : NULL;
    if (m == NULL)
        return curl_easy_perform(h);
    if (curl_multi_add_handle(m, h) != CURLM_OK) {
        curl_multi_cleanup(m);
        return curl_easy_perform(h);
    }
    CURLcode cc = CURLE_OK;
    for (;;) {
        int running = 0;
        CURLMcode mc = curl_multi_perform(m, &running);
        if (mc != CURLM_OK) {
            cc = mc == CURLM_OUT_OF_MEMORY ? CURLE_OUT_OF_MEMORY : CURLE_FAILED_INIT;
            break;
        }
        if (running == 0) {
            int left = 0;
            CURLMsg *msg;
            while ((msg = curl_multi_info_read(m, &left)) != NULL)
                if (msg->msg == CURLMSG_DONE && msg->easy_handle == h)
                    cc = msg->data.result;
            break;
        }
        if (ej_shard_context_is_cancelled(ctx)) {
            cc = CURLE_ABORTED_BY_CALLBACK;
            break;
        }
        curl_multi_poll(m, NULL, 0, CANCEL_TICK_MS, NULL);
    }
    curl_multi_remove_handle(m, h);
    curl_multi_cleanup(m);
    return cc;
}

/* The first EXCERPT_LEN bytes of the body on one line, for messages. */
static char *excerpt(const struct body *b)
{
    size_t n = b->len < EXCERPT_LEN ? b->len : EXCERPT_LEN;
    char *e = malloc(n + 4);
    if (e == NULL)
        return NULL;
    for (size_t i = 0; i < n; i++) {
        char c = b->data[i];
        e[i] = (c == '\n' || c == '\r' || c == '\t') ? ' ' : c;
    }
    if (n < b->len) {
        memcpy(e + n, "...", 4);
    } else {
        e[n] = '\0';
    }
    return e;
}

static struct curl_slist *add_header(struct curl_slist *list, const char *h, bool *failed)
{
    struct curl_slist *n = curl_slist_append(list, h);
    if (n == NULL)
        *failed = true;
    return n ? n : list;
}

void ej__exec_run_http(const struct ej_http_job *job, const struct ej_job_config *cfg,
                       const ej_shard_context *ctx, ej__exec_result *res)
{
    /* The request is the configuration's (validated: a method of the
     * field's choices, timeouts >= 1). */
    static const struct ej_http_config none;
    const struct ej_http_config *req = cfg ? &cfg->http : &none;
    const char *method = req->method && req->method[0] ? req->method : "GET";
    const char *uri = req->uri;
    if (uri == NULL || uri[0] == '\0') {
        ej__exec_fail(res, EJ_ECONFIG, "Cannot find http uri for job '%s', job is not executed.",
                      ctx->job_name ? ctx->job_name : "");
        return;
    }
    pthread_once(&curl_once, curl_init);
    if (curl_init_rc != CURLE_OK) {
        ej__exec_fail(res, EJ_EJOBFAILED, "HTTP job failure: libcurl initialisation failed: %s",
                      curl_easy_strerror(curl_init_rc));
        return;
    }
    struct body body = {.limit = job->output_cap ? job->output_cap : EJ_JOB_OUTPUT_CAP_DEFAULT};
    struct curl_slist *headers = NULL;
    char *json = NULL, *hdr = NULL, *ctype = NULL;
    char errbuf[CURL_ERROR_SIZE];
    errbuf[0] = '\0';
    CURL *h = curl_easy_init();
    if (h == NULL) {
        ej__exec_fail(res, EJ_ENOMEM, "HTTP job failure: cannot create a libcurl handle");
        return;
    }
    json = ej__exec_context_json(ctx);
    hdr = json ? ej__asprintf("shardingContext: %s", json) : NULL;
    bool failed = hdr == NULL;
    if (hdr)
        headers = add_header(headers, hdr, &failed);
    if (req->content_type && req->content_type[0]) {
        ctype = ej__asprintf("Content-Type: %s", req->content_type);
        if (ctype == NULL)
            failed = true;
        else
            headers = add_header(headers, ctype, &failed);
    }
    size_t tl = strlen(EJ_FENCING_TOKEN_HEADER);
    for (const char *const *x = job->headers; x && *x; x++) {
        /* A job cannot pass off another token. */
        if (strncasecmp(*x, EJ_FENCING_TOKEN_HEADER, tl) == 0 &&
            ((*x)[tl] == ':' || (*x)[tl] == ';'))
            continue;
        headers = add_header(headers, *x, &failed);
    }
    char token_hdr[64];
    snprintf(token_hdr, sizeof token_hdr, EJ_FENCING_TOKEN_HEADER ": %lld",
             (long long)ctx->fencing_token);
    headers = add_header(headers, token_hdr, &failed);
    /* No "Expect: 100-continue" round trip before a body. */
    headers = add_header(headers, "Expect:", &failed);
    if (failed) {
        ej__exec_fail(res, EJ_ENOMEM, "HTTP job failure: out of memory");
        goto out;
    }

    int64_t connect_ms = req->connect_timeout_ms;
    int64_t read_ms = req->read_timeout_ms;
    curl_easy_setopt(h, CURLOPT_URL, uri);
    curl_easy_setopt(h, CURLOPT_NOSIGNAL, 1L);
    curl_easy_setopt(h, CURLOPT_ERRORBUFFER, errbuf);
    curl_easy_setopt(h, CURLOPT_CONNECTTIMEOUT_MS, (long)connect_ms);
    /* libcurl has no idle-read timeout: bound the whole exchange by the
     * connect plus the read timeout. */
    curl_easy_setopt(h, CURLOPT_TIMEOUT_MS, (long)(connect_ms + read_ms));
    curl_easy_setopt(h, CURLOPT_HTTPHEADER, headers);
    curl_easy_setopt(h, CURLOPT_WRITEFUNCTION, on_body);
    curl_easy_setopt(h, CURLOPT_WRITEDATA, &body);
    curl_easy_setopt(h, CURLOPT_NOPROGRESS, 0L);
    curl_easy_setopt(h, CURLOPT_XFERINFOFUNCTION, on_progress);
    curl_easy_setopt(h, CURLOPT_XFERINFODATA, (void *)ctx);
    curl_easy_setopt(h, CURLOPT_FOLLOWLOCATION, 1L);
    curl_easy_setopt(h, CURLOPT_MAXREDIRS, 5L);
    curl_easy_setopt(h, CURLOPT_PROTOCOLS_STR, "http,https");
    curl_easy_setopt(h, CURLOPT_REDIR_PROTOCOLS_STR, "http,https");
    bool has_data = req->data && req->data[0];
    if (strcasecmp(method, "GET") == 0) {
        curl_easy_setopt(h, CURLOPT_HTTPGET, 1L);
    } else if (strcasecmp(method, "HEAD") == 0) {
        curl_easy_setopt(h, CURLOPT_NOBODY, 1L);
    } else {
        if (strcasecmp(method, "POST") == 0) {
            curl_easy_setopt(h, CURLOPT_POST, 1L);
        } else {
            curl_easy_setopt(h, CURLOPT_CUSTOMREQUEST, method);
        }
        if (has_data || strcasecmp(method, "POST") == 0) {
            curl_easy_setopt(h, CURLOPT_POSTFIELDS, has_data ? req->data : "");
            curl_easy_setopt(h, CURLOPT_POSTFIELDSIZE_LARGE,
                             (curl_off_t)(has_data ? strlen(req->data) : 0));
        }
    }

    CURLcode cc = perform(h, ctx);
    long status = 0;
    curl_easy_getinfo(h, CURLINFO_RESPONSE_CODE, &status);
    res->http_status = status;
    if (cc == CURLE_OPERATION_TIMEDOUT) {
        res->timed_out = true;
        ej__exec_fail(res, EJ_ETIMEDOUT, "HTTP job failure: %s %s: timed out (%s)", method, uri,
                      errbuf[0] ? errbuf : curl_easy_strerror(cc));
    } else if (cc == CURLE_ABORTED_BY_CALLBACK) {
        res->cancelled = true;
        ej__exec_fail(res, EJ_ESTOPPED, "HTTP job failure: %s %s: cancelled", method, uri);
    } else if (cc != CURLE_OK) {
        ej__exec_fail(res, EJ_EJOBFAILED, "HTTP job failure: %s %s: %s", method, uri,
                      errbuf[0] ? errbuf : curl_easy_strerror(cc));
    } else if (status < 200 || status > 299) {
        char *e = excerpt(&body);
        ej__exec_fail(res, EJ_EJOBFAILED, "HTTP job failure: %s %s: status %ld%s%s", method, uri,
                      status, e && e[0] ? ": " : "", e ? e : "");
        free(e);
    } else {
        EJ_LOG(EJ_LOG_DEBUG, MOD, 0, "job '%s' item %d: %s %s: status %ld", ctx->job_name,
               ctx->sharding_item, method, uri, status);
    }

out:
    curl_easy_cleanup(h);
    curl_slist_free_all(headers);
    free(json);
    free(hdr);
    free(ctype);
    res->output = body.data;
    res->output_len = body.len;
    res->output_truncated = body.truncated;
}
