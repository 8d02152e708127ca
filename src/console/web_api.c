/*
 * The REST API of `ejob console`, over the console library. Paths:
 *   GET    /api/registries
 *   GET    /api/registries/R/jobs                   job list with status
 *   GET    /api/registries/R/jobs/J                 servers, instances, items
 *   DELETE /api/registries/R/jobs/J                 remove
 *   GET|PUT /api/registries/R/jobs/J/config         read / validated, versioned write
 *   POST   /api/registries/R/jobs/J/{trigger,shutdown,disable,enable}
 *   POST   /api/registries/R/jobs/J/items/N/{disable,enable}
 *   GET    /api/registries/R/jobs/J/history         its runs (web_history.c)
 *   GET    /api/history[/ID]                        runs of every job / one run
 *   GET    /api/registries/R/servers                servers with their jobs
 *   POST   /api/registries/R/servers/IP/{disable,enable,shutdown}
 * Authentication and roles are checked before (web_server.c).
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "console/internal.h"
#include "console/web.h"
#include "ejob/error.h"

#define MAX_SEGMENTS 8

static unsigned status_of(int rc)
{
    switch (rc) {
    case EJ_ENOTFOUND:
    case EJ_ENONODE:
        return MHD_HTTP_NOT_FOUND;
    case EJ_EINVAL:
        return MHD_HTTP_BAD_REQUEST;
    case EJ_EBUSY:
    case EJ_EBADVERSION:
        return MHD_HTTP_CONFLICT;
    case EJ_ECONFIG:
        return MHD_HTTP_UNPROCESSABLE_CONTENT;
    case EJ_ENOAUTH:
        return MHD_HTTP_FORBIDDEN;
    case EJ_ENOMEM:
        return MHD_HTTP_INTERNAL_SERVER_ERROR;
    default:
        return MHD_HTTP_BAD_GATEWAY; /* ZooKeeper did not do it */
    }
}

static void fail(struct ej__console_request *req, int rc, const char *msg)
{
    ej__console_reply_error(req, status_of(rc), "%s",
                            msg != NULL && msg[0] ? msg : ej_strerror(rc));
}

static void ok(struct ej__console_request *req, json_t *reply)
{
    req->status = MHD_HTTP_OK;
    req->reply = reply;
}

static json_t *str_or_null(const char *s)
{
    return s != NULL ? json_string(s) : json_null();
}

static json_t *job_brief_json(const struct ej_console_job *j)
{
    const struct ej_job_config *c = &j->cfg;
    json_t *o = json_object();
    json_object_set_new(o, "jobName", json_string(j->name));
    json_object_set_new(o, "status", json_string(ej_console_status_name(j->status)));
    json_object_set_new(o, "cron", j->config_parsed ? json_string(c->cron) : json_null());
    json_object_set_new(o, "shardingTotalCount",
                        json_integer(j->config_parsed ? c->sharding_total_count : 0));
    json_object_set_new(
        o, "jobType", j->config_parsed ? json_string(ej_job_type_name(c->job_type)) : json_null());
    json_object_set_new(o, "description", json_string(j->config_parsed ? c->description : ""));
    json_object_set_new(o, "instanceCount", json_integer((json_int_t)j->instance_count));
    json_object_set_new(o, "serverCount", json_integer((json_int_t)j->server_count));
    json_object_set_new(o, "leader", str_or_null(j->leader));
    json_object_set_new(o, "leaderLive", json_boolean(j->leader_live));
    json_object_set_new(o, "configError",
                        j->config_ok ? json_null() : json_string(j->config_error));
    return o;
}

static json_t *job_detail_json(const struct ej_console_job *j)
{
    json_t *o = job_brief_json(j);
    json_object_set_new(o, "shardingNecessary", json_boolean(j->sharding_necessary));
    json_object_set_new(o, "shardingProcessing", json_boolean(j->sharding_processing));
    json_object_set_new(o, "failoverItemsWaiting", json_integer((json_int_t)j->failover_waiting));
    json_t *servers = json_array();
    for (size_t i = 0; i < j->server_count; i++)
        json_array_append_new(servers,
                              json_pack("{s:s,s:b,s:I}", "ip", j->servers[i].ip, "disabled",
                                        j->servers[i].disabled, "instanceCount",
                                        (json_int_t)j->servers[i].instance_count));
    json_object_set_new(o, "servers", servers);
    json_t *instances = json_array();
    for (size_t i = 0; i < j->instance_count; i++) {
        char ip[256];
        ej_console_instance_ip(j->instances[i].id, ip, sizeof ip);
        json_array_append_new(
            instances,
            json_pack("{s:s,s:s,s:b,s:b}", "instanceId", j->instances[i].id, "serverIp", ip,
                      "leader", j->leader != NULL && strcmp(j->leader, j->instances[i].id) == 0,
                      "triggerPending", j->instances[i].trigger_pending));
    }
    json_object_set_new(o, "instances", instances);
    json_t *items = json_array();
    for (size_t i = 0; i < j->item_count; i++) {
        const struct ej_console_item *it = &j->items[i];
        json_t *x = json_pack(
            "{s:i,s:o,s:b,s:b,s:o,s:b,s:b,s:s,s:o}", "item", it->item, "instanceId",
            str_or_null(it->owner), "ownerLive", it->owner_live, "running", it->running, "failover",
            str_or_null(it->failover), "misfire", it->misfire, "disabled", it->disabled, "status",
            ej_console_item_status_name(it->status), "parameter", str_or_null(it->parameter));
        json_array_append_new(items, x);
    }
    json_object_set_new(o, "items", items);
    return o;
}

static void list_registries(struct ej__console_request *req)
{
    json_t *arr = json_array();
    for (size_t i = 0; i < req->web->backend_count; i++) {
        const struct ej__console_backend *b = &req->web->backends[i];
        json_array_append_new(arr, json_pack("{s:s,s:s,s:s,s:b}", "name", b->def->name, "servers",
                                             b->def->servers, "namespace", b->def->namespace_,
                                             "connected", ej_registry_is_connected(b->reg)));
    }
    ok(req, arr);
}

static void list_jobs(struct ej__console_request *req, ej_console *con)
{
    struct ej_console_job *jobs = NULL;
    size_t n = 0;
    int rc = ej_console_jobs(con, &jobs, &n);
    if (rc != 0)
        return fail(req, rc, NULL);
    json_t *arr = json_array();
    for (size_t i = 0; i < n; i++)
        json_array_append_new(arr, job_brief_json(&jobs[i]));
    ej_console_jobs_free(jobs, n);
    ok(req, arr);
}

/* javaInstances / javaIgnores of a job detail: the live instances that are
 * no ejob instances, when the job has settings Java 2.1.5 ignores (both
 * empty otherwise; as `ejob status --json`). Returns o. */
static json_t *with_java_note(ej_console *con, const struct ej_console_job *j, json_t *o)
{
    const char *keys[8];
    size_t nkeys = j->config_parsed ? ej_job_config_java_ignored(&j->cfg, keys, 8) : 0;
    char **ids = NULL;
    size_t n = 0;
    if (nkeys > 0 && ej_console_job_java_instances(con, j->name, &ids, &n) != 0)
        n = 0;
    json_t *jids = json_array(), *jkeys = json_array();
    for (size_t i = 0; i < n; i++)
        json_array_append_new(jids, json_string(ids[i]));
    for (size_t i = 0; i < nkeys && i < 8 && n > 0; i++)
        json_array_append_new(jkeys, json_string(keys[i]));
    ej_registry_free_names(ids);
    json_object_set_new(o, "javaInstances", jids);
    json_object_set_new(o, "javaIgnores", jkeys);
    return o;
}

static void show_job(struct ej__console_request *req, ej_console *con, const char *job)
{
    struct ej_console_job j;
    int rc = ej_console_job_load(con, job, false, &j);
    if (rc == EJ_ENONODE)
        ej__console_reply_error(req, MHD_HTTP_NOT_FOUND, "no job \"%s\"", job);
    else if (rc != 0)
        fail(req, rc, NULL);
    else
        ok(req, with_java_note(con, &j, job_detail_json(&j)));
    ej_console_job_fini(&j);
}

static void list_servers(struct ej__console_request *req, ej_console *con)
{
    struct ej_console_server_view *v = NULL;
    size_t n = 0;
    int rc = ej_console_servers(con, &v, &n);
    if (rc != 0)
        return fail(req, rc, NULL);
    json_t *arr = json_array();
    for (size_t i = 0; i < n; i++) {
        json_t *jobs = json_array();
        for (size_t k = 0; k < v[i].job_count; k++)
            json_array_append_new(jobs,
                                  json_pack("{s:s,s:b,s:I,s:s}", "jobName", v[i].jobs[k].job,
                                            "disabled", v[i].jobs[k].disabled, "instanceCount",
                                            (json_int_t)v[i].jobs[k].instance_count, "jobStatus",
                                            ej_console_status_name(v[i].jobs[k].job_status)));
        json_array_append_new(
            arr, json_pack("{s:s,s:I,s:I,s:I,s:o}", "ip", v[i].ip, "instanceCount",
                           (json_int_t)v[i].instance_count, "jobCount", (json_int_t)v[i].job_count,
                           "disabledJobCount", (json_int_t)v[i].disabled_count, "jobs", jobs));
    }
    ej_console_servers_free(v, n);
    ok(req, arr);
}

static void collect(const char *target, void *user)
{
    json_array_append_new(user, json_string(target));
}

static const char *body_str(const struct ej__console_request *req, const char *key)
{
    const char *s = json_string_value(json_object_get(req->body, key));
    return s != NULL && s[0] != '\0' ? s : NULL;
}

static void job_action(struct ej__console_request *req, ej_console *con, const char *job,
                       const char *action)
{
    char err[1024] = "";
    json_t *targets = json_array();
    struct ej_console_select sel = {body_str(req, "instance"), body_str(req, "server")};
    int rc;
    if (strcmp(action, "trigger") == 0)
        rc = ej_console_trigger(con, job, &sel, collect, targets, err, sizeof err);
    else if (strcmp(action, "shutdown") == 0)
        rc = ej_console_shutdown(con, job, &sel, collect, targets, err, sizeof err);
    else if (strcmp(action, "disable") == 0 || strcmp(action, "enable") == 0)
        rc = ej_console_server_set_disabled(con, job, sel.server, action[0] == 'd', collect,
                                            targets, err, sizeof err);
    else
        rc = ej__console_err(EJ_ENOTFOUND, err, sizeof err, "no action \"%s\"", action);
    snprintf(req->audit_detail, sizeof req->audit_detail, " job=%s targets=%zu", job,
             json_array_size(targets));
    if (rc != 0) {
        json_decref(targets);
        return fail(req, rc, err);
    }
    ok(req, json_pack("{s:s,s:s,s:o}", "jobName", job, "action", action, "targets", targets));
}

static void item_action(struct ej__console_request *req, ej_console *con, const char *job,
                        const char *item_text, const char *action)
{
    char *end;
    long item = strtol(item_text, &end, 10);
    if (item_text[0] < '0' || item_text[0] > '9' || *end != '\0' ||
        item > EJ_CONFIG_MAX_SHARDING_TOTAL_COUNT)
        return ej__console_reply_error(req, MHD_HTTP_BAD_REQUEST, "bad shard item \"%s\"",
                                       item_text);
    bool disable = strcmp(action, "disable") == 0;
    if (!disable && strcmp(action, "enable") != 0)
        return ej__console_reply_error(req, MHD_HTTP_NOT_FOUND, "no item action \"%s\"", action);
    char err[1024] = "";
    bool changed = false;
    int rc = ej_console_item_set_disabled(con, job, (int)item, disable, &changed, err, sizeof err);
    snprintf(req->audit_detail, sizeof req->audit_detail, " job=%s item=%ld", job, item);
    if (rc != 0)
        return fail(req, rc, err);
    ok(req, json_pack("{s:s,s:i,s:b,s:b}", "jobName", job, "item", (int)item, "disabled", disable,
                      "changed", changed));
}

static void server_action(struct ej__console_request *req, ej_console *con, const char *ip,
                          const char *action)
{
    ej_console_server_op op;
    if (strcmp(action, "disable") == 0)
        op = EJ_CONSOLE_SERVER_OP_DISABLE;
    else if (strcmp(action, "enable") == 0)
        op = EJ_CONSOLE_SERVER_OP_ENABLE;
    else if (strcmp(action, "shutdown") == 0)
        op = EJ_CONSOLE_SERVER_OP_SHUTDOWN;
    else
        return ej__console_reply_error(req, MHD_HTTP_NOT_FOUND, "no server action \"%s\"", action);
    char err[1024] = "";
    json_t *jobs = json_array();
    int rc = ej_console_server_apply(con, ip, op, collect, jobs, err, sizeof err);
    snprintf(req->audit_detail, sizeof req->audit_detail, " server=%s jobs=%zu", ip,
             json_array_size(jobs));
    if (rc != 0) {
        json_decref(jobs);
        return fail(req, rc, err);
    }
    ok(req, json_pack("{s:s,s:s,s:o}", "server", ip, "action", action, "jobs", jobs));
}

static void remove_job(struct ej__console_request *req, ej_console *con, const char *job)
{
    char err[1024] = "";
    int rc = ej_console_remove(con, job, err, sizeof err);
    snprintf(req->audit_detail, sizeof req->audit_detail, " job=%s", job);
    if (rc != 0)
        return fail(req, rc, err);
    ok(req, json_pack("{s:s,s:b}", "jobName", job, "removed", 1));
}

static int split(char *path, char **seg)
{
    int n = 0;
    for (char *save = NULL, *t = strtok_r(path, "/", &save); t != NULL;
         t = strtok_r(NULL, "/", &save)) {
        if (n == MAX_SEGMENTS)
            return -1;
        seg[n++] = t;
    }
    return n;
}

static bool is(const char *a, const char *b)
{
    return strcmp(a, b) == 0;
}

static void route_job(struct ej__console_request *req, ej_console *con, char **seg, int n)
{
    const char *job = seg[0];
    bool get = is(req->method, "GET");
    if (n == 1 && get)
        return show_job(req, con, job);
    if (n == 1 && is(req->method, "DELETE"))
        return remove_job(req, con, job);
    if (n == 2 && is(seg[1], "config") && (get || is(req->method, "PUT")))
        return ej__console_api_config(req, con, job);
    if (n == 2 && is(seg[1], "history") && get)
        return ej__console_api_history(req, job, NULL);
    if (n == 2 && is(req->method, "POST"))
        return job_action(req, con, job, seg[1]);
    if (n == 4 && is(seg[1], "items") && is(req->method, "POST"))
        return item_action(req, con, job, seg[2], seg[3]);
    ej__console_reply_error(req, MHD_HTTP_NOT_FOUND, "no route %s %s", req->method, req->url);
}

void ej__console_api(struct ej__console_request *req)
{
    char path[2048];
    snprintf(path, sizeof path, "%s", req->url + strlen("/api/"));
    char *seg[MAX_SEGMENTS];
    int n = split(path, seg);
    bool get = is(req->method, "GET");
    if (n == 1 && is(seg[0], "registries") && get)
        return list_registries(req);
    if (n >= 1 && n <= 2 && is(seg[0], "history") && get)
        return ej__console_api_history(req, NULL, n == 2 ? seg[1] : NULL);
    if (n < 3 || !is(seg[0], "registries"))
        return ej__console_reply_error(req, MHD_HTTP_NOT_FOUND, "no route %s %s", req->method,
                                       req->url);
    ej_console *con = NULL;
    for (size_t i = 0; i < req->web->backend_count; i++)
        if (is(req->web->backends[i].def->name, seg[1]))
            con = req->web->backends[i].con;
    if (con == NULL)
        return ej__console_reply_error(req, MHD_HTTP_NOT_FOUND, "no registry \"%s\"", seg[1]);
    if (is(seg[2], "jobs") && n == 3 && get)
        return list_jobs(req, con);
    if (is(seg[2], "jobs") && n >= 4)
        return route_job(req, con, seg + 3, n - 3);
    if (is(seg[2], "servers") && n == 3 && get)
        return list_servers(req, con);
    if (is(seg[2], "servers") && n == 5 && is(req->method, "POST"))
        return server_action(req, con, seg[3], seg[4]);
    ej__console_reply_error(req, MHD_HTTP_NOT_FOUND, "no route %s %s", req->method, req->url);
}
