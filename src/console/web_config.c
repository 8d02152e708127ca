/* GET / PUT /api/registries/R/jobs/J/config: the config node as JSON, and a
 * write checked by the config module's validator, conditional on the
 * version the editor read. */
#include <stdlib.h>
#include <string.h>

#include "console/internal.h"
#include "console/web.h"
#include "ejob/error.h"

static void get_config(struct ej__console_request *req, ej_console *con, const char *job)
{
    char *raw = NULL;
    int version = -1;
    char err[1024] = "";
    int rc = ej_console_config_get(con, job, &raw, &version, err, sizeof err);
    if (rc != 0) {
        ej__console_reply_error(req, rc == EJ_ENOTFOUND ? MHD_HTTP_NOT_FOUND : MHD_HTTP_BAD_GATEWAY,
                                "%s", err[0] ? err : ej_strerror(rc));
        return;
    }
    json_t *parsed = json_loads(raw, 0, NULL);
    struct ej_job_config cfg;
    struct ej_config_errors errs;
    ej_config_errors_init(&errs);
    json_t *problems = json_array();
    if (ej_job_config_init(&cfg) == 0) {
        if (ej_console_config_check(job, raw, strlen(raw), &cfg, &errs) != 0)
            for (size_t i = 0; i < errs.count; i++)
                json_array_append_new(problems, json_string(errs.messages[i]));
        ej_job_config_fini(&cfg);
    }
    ej_config_errors_fini(&errs);
    req->status = MHD_HTTP_OK;
    req->reply = json_pack("{s:s,s:i,s:s,s:o,s:o}", "jobName", job, "version", version, "raw", raw,
                           "config", parsed != NULL ? parsed : json_null(), "problems", problems);
    free(raw);
}

/* "field: message" as {"field": ..., "message": ...}; field "" when the
 * message names none. */
static json_t *field_error(const char *msg)
{
    const char *colon = strstr(msg, ": ");
    size_t n = colon != NULL ? (size_t)(colon - msg) : 0;
    bool named = n > 0 && n < 64 && strcspn(msg, " \"") >= n;
    json_t *o = json_object();
    json_object_set_new(o, "field", named ? json_stringn(msg, n) : json_string(""));
    json_object_set_new(o, "message", json_string(named ? colon + 2 : msg));
    return o;
}

static void put_config(struct ej__console_request *req, ej_console *con, const char *job)
{
    json_t *cfg = json_object_get(req->body, "config");
    json_t *ver = json_object_get(req->body, "version");
    if (!json_is_object(cfg) || !json_is_integer(ver)) {
        ej__console_reply_error(req, MHD_HTTP_BAD_REQUEST,
                                "expected {\"version\": N, \"config\": {...}} with the version "
                                "the config was read at");
        return;
    }
    char *text = json_dumps(cfg, JSON_COMPACT | JSON_PRESERVE_ORDER);
    if (text == NULL) {
        ej__console_reply_error(req, MHD_HTTP_INTERNAL_SERVER_ERROR, "out of memory");
        return;
    }
    struct ej_console_config_change ch;
    struct ej_config_errors errs;
    ej_config_errors_init(&errs);
    int rc = ej_console_config_set(con, job, text, strlen(text), (int)json_integer_value(ver),
                                   false, &ch, &errs);
    free(text);
    ej__console_audit_field(req, "job", json_string(job));
    ej__console_audit_field(req, "version", json_integer(json_integer_value(ver)));
    if (rc == EJ_ECONFIG) {
        json_t *list = json_array();
        for (size_t i = 0; i < errs.count; i++)
            json_array_append_new(list, field_error(errs.messages[i]));
        req->status = MHD_HTTP_UNPROCESSABLE_CONTENT;
        req->reply =
            json_pack("{s:s,s:o}", "error", errs.count > 0 ? errs.messages[0] : "invalid config",
                      "errors", list);
    } else if (rc == EJ_EBADVERSION) {
        ej__console_reply_error(req, MHD_HTTP_CONFLICT,
                                "the config of \"%s\" changed since it was read (now version "
                                "%d); reload it and edit again",
                                job, ch.old_version);
    } else if (rc != 0) {
        ej__console_reply_error(req, rc == EJ_ENOTFOUND ? MHD_HTTP_NOT_FOUND : MHD_HTTP_BAD_GATEWAY,
                                "%s", errs.count > 0 ? errs.messages[0] : ej_strerror(rc));
    } else {
        req->status = MHD_HTTP_OK;
        req->reply = json_pack("{s:s,s:b,s:i}", "jobName", job, "changed", ch.changed, "version",
                               ch.written ? ch.new_version : ch.old_version);
    }
    ej_console_config_change_fini(&ch);
    ej_config_errors_fini(&errs);
}

void ej__console_api_config(struct ej__console_request *req, ej_console *con, const char *job)
{
    if (strcmp(req->method, "GET") == 0)
        get_config(req, con, job);
    else
        put_config(req, con, job);
}
