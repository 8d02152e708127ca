/*
 * The REST API of `ejob console`, over the console library. Paths:
 *   GET    /api/registries
 *   GET    /api/fields                              the config form's fields, time zones
 *   GET    /api/registries/R/jobs                   job list with status, paged (web_jobs.c)
 *   GET    /api/registries/R/jobs/J                 servers, instances, items
 *   DELETE /api/registries/R/jobs/J                 remove
 *   GET|PUT /api/registries/R/jobs/J/config         read / validated, versioned write
 *   POST   /api/registries/R/jobs/J/{trigger,shutdown,restart,disable,enable}
 *   POST   /api/registries/R/jobs/J/items/N/{disable,enable}
 *   GET    /api/registries/R/jobs/J/history         its runs (web_history.c)
 *   GET    /api/registries/R/jobs/J/fires           its fire ledger (web_fires.c)
 *   GET    /api/history[/ID]                        runs of every job / one run
 *   GET    /api/history/ID/output?out=N&err=N       its output from offsets (live)
 *   GET    /api/registries/R/servers                servers with their jobs
 *   POST   /api/registries/R/servers/IP/{disable,enable,shutdown}
 * Authentication is checked before (web_server.c); the role each route
 * needs on its registry is in the route table below (viewer reads, operator
 * operates, admin edits configs and removes jobs). HEAD is served as GET; a
 * known path with another method gets 405 with Allow.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "console/internal.h"
#include "console/web.h"
#include "ejob/cron.h"
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

json_t *ej__console_job_brief_json(const struct ej_console_job *j)
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
    json_t *servers = json_array();
    for (size_t i = 0; i < j->server_count; i++)
        if (j->servers[i].disabled)
            json_array_append_new(servers, json_string(j->servers[i].ip));
    json_object_set_new(o, "disabledServerIps", servers);
    return o;
}

static json_t *job_detail_json(const struct ej_console_job *j)
{
    json_t *o = ej__console_job_brief_json(j);
    json_object_set_new(o, "shardingNecessary", json_boolean(j->sharding_necessary));
    json_object_set_new(o, "shardingProcessing", json_boolean(j->sharding_processing));
    json_object_set_new(o, "failoverItemsWaiting", json_integer((json_int_t)j->failover_waiting));
    json_t *servers = json_array();
    for (size_t i = 0; i < j->server_count; i++)
        json_array_append_new(servers,
                              json_pack("{s:s,s:b,s:I,s:I}", "ip", j->servers[i].ip, "disabled",
                                        j->servers[i].disabled, "instanceCount",
                                        (json_int_t)j->servers[i].instance_count, "shutDownCount",
                                        (json_int_t)j->servers[i].shut_down_count));
    json_object_set_new(o, "servers", servers);
    /* Instances an operator shut down: gone from instances/, alive. */
    json_t *down = json_array();
    for (size_t i = 0; i < j->shut_down_count; i++) {
        char ip[256];
        ej_layout_instance_ip(j->shut_down[i].id, ip, sizeof ip);
        json_array_append_new(down, json_pack("{s:s,s:s,s:b}", "instanceId", j->shut_down[i].id,
                                              "serverIp", ip, "restartable",
                                              j->shut_down[i].restartable));
    }
    json_object_set_new(o, "shutDown", down);
    json_t *instances = json_array();
    for (size_t i = 0; i < j->instance_count; i++) {
        char ip[256];
        ej_layout_instance_ip(j->instances[i].id, ip, sizeof ip);
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
            "{s:i,s:o,s:b,s:b,s:o,s:b,s:b,s:b,s:s,s:o}", "item", it->item, "instanceId",
            str_or_null(it->owner), "ownerLive", it->owner_live, "running", it->running, "failover",
            str_or_null(it->failover), "misfire", it->misfire, "disabled", it->disabled,
            "failoverWaiting", it->failover_waiting, "status",
            ej_console_item_status_name(it->status), "parameter", str_or_null(it->parameter));
        json_array_append_new(items, x);
    }
    json_object_set_new(o, "items", items);
    return o;
}

static void list_registries(struct ej__console_request *req, ej_console *con, char **args)
{
    (void)con;
    (void)args;
    json_t *arr = json_array();
    for (size_t i = 0; i < req->web->backend_count; i++) {
        const struct ej__console_backend *b = &req->web->backends[i];
        json_array_append_new(arr, json_pack("{s:s,s:s,s:s,s:b}", "name", b->def->name, "servers",
                                             b->def->servers, "namespace", b->def->namespace_,
                                             "connected", ej_registry_is_connected(b->reg)));
    }
    ok(req, arr);
}

/* The job's fields as the config form shows them (the config module's
 * field table) and the time zones it offers. */
static void list_fields(struct ej__console_request *req, ej_console *con, char **args)
{
    (void)con;
    (void)args;
    char *text = ej_config_fields_json();
    json_t *fields = text != NULL ? json_loads(text, 0, NULL) : NULL;
    free(text);
    if (fields == NULL)
        return fail(req, EJ_ENOMEM, NULL);
    char **names = NULL;
    json_t *zones = json_array();
    if (ej_tz_names(&names, NULL) == 0)
        for (size_t i = 0; names[i] != NULL; i++)
            json_array_append_new(zones, json_string(names[i]));
    ej_tz_names_free(names);
    ok(req, json_pack("{s:o,s:o}", "fields", fields, "timeZones", zones));
}

static void list_jobs(struct ej__console_request *req, ej_console *con, char **args)
{
    (void)args;
    ej__console_api_jobs(req, con);
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

static void show_job(struct ej__console_request *req, ej_console *con, char **args)
{
    const char *job = args[1];
    struct ej_console_job j;
    int rc = ej_console_job_load(con, job, false, &j);
    if (rc == EJ_ENONODE)
        ej__console_reply_error(req, MHD_HTTP_NOT_FOUND, "no job \"%s\"", job);
    else if (rc != 0)
        fail(req, rc, NULL);
    else {
        json_t *o = with_java_note(con, &j, job_detail_json(&j));
        ej__console_job_times(req->web, &j, 5, o);
        json_object_set_new(o, "connected", json_boolean(ej_registry_is_connected(con->reg)));
        ok(req, o);
    }
    ej_console_job_fini(&j);
}

static void list_servers(struct ej__console_request *req, ej_console *con, char **args)
{
    (void)args;
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

/* A kill request (ej_console_kill) by the signed-in user: body {"item": N}
 * (optional; none: every item), with instance or server as for trigger. */
static int kill_action(struct ej__console_request *req, ej_console *con, const char *job,
                       const struct ej_console_select *sel, json_t *targets, char *err,
                       size_t errlen)
{
    json_t *it = json_object_get(req->body, "item");
    int item = -1;
    if (it != NULL && !json_is_null(it)) {
        if (!json_is_integer(it) || json_integer_value(it) < 0 ||
            json_integer_value(it) > EJ_CONFIG_MAX_SHARDING_TOTAL_COUNT)
            return ej__console_err(EJ_EINVAL, err, errlen, "item must be a shard item number");
        item = (int)json_integer_value(it);
    }
    char by[160];
    int n = snprintf(by, sizeof by, "console:%s", req->who.name[0] ? req->who.name : "anonymous");
    (void)n; /* ej_console_kill keeps 127 bytes of it */
    char *node = NULL;
    int rc = ej_console_kill(con, job, sel, item, by, &node, err, errlen);
    if (rc == 0)
        json_array_append_new(targets, json_string(node));
    ej__console_audit_field(req, "item", json_integer(item));
    free(node);
    return rc;
}

static void job_action(struct ej__console_request *req, ej_console *con, char **args)
{
    const char *job = args[1], *action = req->action;
    char err[1024] = "";
    json_t *targets = json_array();
    struct ej_console_select sel = {body_str(req, "instance"), body_str(req, "server")};
    int rc;
    if (strcmp(action, "trigger") == 0)
        rc = ej_console_trigger(con, job, &sel, collect, targets, err, sizeof err);
    else if (strcmp(action, "shutdown") == 0)
        rc = ej_console_shutdown(con, job, &sel, collect, targets, err, sizeof err);
    else if (strcmp(action, "restart") == 0)
        rc = ej_console_restart(con, job, &sel, collect, targets, err, sizeof err);
    else if (strcmp(action, "disable") == 0 || strcmp(action, "enable") == 0)
        rc = ej_console_server_set_disabled(con, job, sel.server, action[0] == 'd', collect,
                                            targets, err, sizeof err);
    else if (strcmp(action, "kill") == 0)
        rc = kill_action(req, con, job, &sel, targets, err, sizeof err);
    else
        rc = ej__console_err(EJ_ENOTFOUND, err, sizeof err, "no action \"%s\"", action);
    ej__console_audit_field(req, "job", json_string(job));
    ej__console_audit_field(req, "targets", json_integer((json_int_t)json_array_size(targets)));
    if (rc != 0) {
        json_decref(targets);
        return fail(req, rc, err);
    }
    ok(req, json_pack("{s:s,s:s,s:o}", "jobName", job, "action", action, "targets", targets));
}

static void item_action(struct ej__console_request *req, ej_console *con, char **args)
{
    const char *job = args[1], *item_text = args[2], *action = req->action;
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
    ej__console_audit_field(req, "job", json_string(job));
    ej__console_audit_field(req, "item", json_integer(item));
    if (rc != 0)
        return fail(req, rc, err);
    ok(req, json_pack("{s:s,s:i,s:b,s:b}", "jobName", job, "item", (int)item, "disabled", disable,
                      "changed", changed));
}

static void server_action(struct ej__console_request *req, ej_console *con, char **args)
{
    const char *ip = args[1], *action = req->action;
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
    ej__console_audit_field(req, "server", json_string(ip));
    ej__console_audit_field(req, "jobs", json_integer((json_int_t)json_array_size(jobs)));
    if (rc != 0) {
        json_decref(jobs);
        return fail(req, rc, err);
    }
    ok(req, json_pack("{s:s,s:s,s:o}", "server", ip, "action", action, "jobs", jobs));
}

static void remove_job(struct ej__console_request *req, ej_console *con, char **args)
{
    const char *job = args[1];
    char err[1024] = "";
    int rc = ej_console_remove(con, job, err, sizeof err);
    ej__console_audit_field(req, "job", json_string(job));
    if (rc != 0)
        return fail(req, rc, err);
    ok(req, json_pack("{s:s,s:b}", "jobName", job, "removed", 1));
}

static void config(struct ej__console_request *req, ej_console *con, char **args)
{
    ej__console_api_config(req, con, args[1]);
}

static void job_history(struct ej__console_request *req, ej_console *con, char **args)
{
    ej__console_api_history(req, con, args[1], NULL);
}

static void job_fires(struct ej__console_request *req, ej_console *con, char **args)
{
    (void)con;
    ej__console_api_fires(req, args[1]);
}

static void history(struct ej__console_request *req, ej_console *con, char **args)
{
    ej__console_api_history(req, con, NULL, args[0]);
}

static void history_output(struct ej__console_request *req, ej_console *con, char **args)
{
    (void)con;
    ej__console_api_history_output(req, args[0]);
}

#define VIEWER EJ_CONSOLE_ROLE_VIEWER
#define OPERATOR EJ_CONSOLE_ROLE_OPERATOR
#define ADMIN EJ_CONSOLE_ROLE_ADMIN

/* Every route, one a line. ":r" names a registry (its role applies), other
 * ":x" segments are arguments, in order. */
static const struct ej__console_route routes[] = {
    {"GET", "registries", VIEWER, list_registries},
    {"GET", "fields", VIEWER, list_fields},
    {"GET", "history", VIEWER, history},
    {"GET", "history/:id", VIEWER, history},
    {"GET", "history/:id/output", VIEWER, history_output},
    {"GET", "registries/:r/jobs", VIEWER, list_jobs},
    {"GET", "registries/:r/jobs/:j", VIEWER, show_job},
    {"DELETE", "registries/:r/jobs/:j", ADMIN, remove_job},
    {"GET", "registries/:r/jobs/:j/config", VIEWER, config},
    {"PUT", "registries/:r/jobs/:j/config", ADMIN, config},
    {"GET", "registries/:r/jobs/:j/history", VIEWER, job_history},
    {"GET", "registries/:r/jobs/:j/fires", VIEWER, job_fires},
    {"POST", "registries/:r/jobs/:j/trigger", OPERATOR, job_action},
    {"POST", "registries/:r/jobs/:j/shutdown", OPERATOR, job_action},
    {"POST", "registries/:r/jobs/:j/restart", OPERATOR, job_action},
    {"POST", "registries/:r/jobs/:j/kill", ADMIN, job_action},
    {"POST", "registries/:r/jobs/:j/disable", OPERATOR, job_action},
    {"POST", "registries/:r/jobs/:j/enable", OPERATOR, job_action},
    {"POST", "registries/:r/jobs/:j/items/:n/disable", OPERATOR, item_action},
    {"POST", "registries/:r/jobs/:j/items/:n/enable", OPERATOR, item_action},
    {"GET", "registries/:r/servers", VIEWER, list_servers},
    {"POST", "registries/:r/servers/:ip/disable", OPERATOR, server_action},
    {"POST", "registries/:r/servers/:ip/enable", OPERATOR, server_action},
    {"POST", "registries/:r/servers/:ip/shutdown", OPERATOR, server_action},
};

const struct ej__console_route *ej__console_routes(size_t *count)
{
    *count = sizeof routes / sizeof routes[0];
    return routes;
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

/* Does the route's path match seg? Its arguments into args. */
static bool path_matches(const char *pattern, char **seg, int n, char **args)
{
    char buf[128];
    snprintf(buf, sizeof buf, "%s", pattern);
    char *pseg[MAX_SEGMENTS];
    int pn = split(buf, pseg);
    if (pn != n)
        return false;
    int a = 0;
    for (int i = 0; i < n; i++) {
        if (pseg[i][0] == ':')
            args[a++] = seg[i];
        else if (strcmp(pseg[i], seg[i]) != 0)
            return false;
    }
    return true;
}

static bool method_matches(const char *route, const char *method)
{
    return strcmp(route, method) == 0 || (strcmp(method, "HEAD") == 0 && strcmp(route, "GET") == 0);
}

static ej_console *registry_named(ej_console_web *web, const char *name)
{
    for (size_t i = 0; i < web->backend_count; i++)
        if (strcmp(web->backends[i].def->name, name) == 0)
            return web->backends[i].con;
    return NULL;
}

/* 405 with the methods the path has. */
static void not_allowed(struct ej__console_request *req, char **seg, int n)
{
    char allow[64] = "";
    char *args[MAX_SEGMENTS];
    for (size_t i = 0; i < sizeof routes / sizeof routes[0]; i++) {
        if (!path_matches(routes[i].path, seg, n, args) || strstr(allow, routes[i].method))
            continue;
        size_t len = strlen(allow);
        snprintf(allow + len, sizeof allow - len, "%s%s", len ? ", " : "", routes[i].method);
        if (strcmp(routes[i].method, "GET") == 0 && strstr(allow, "HEAD") == NULL) {
            len = strlen(allow);
            snprintf(allow + len, sizeof allow - len, ", HEAD");
        }
    }
    req->allow = strdup(allow);
    ej__console_reply_error(req, MHD_HTTP_METHOD_NOT_ALLOWED, "%s is not allowed on %s (use %s)",
                            req->method, req->url, allow);
}

void ej__console_api(struct ej__console_request *req)
{
    char path[2048];
    snprintf(path, sizeof path, "%s", req->url + strlen("/api/"));
    char *seg[MAX_SEGMENTS];
    int n = split(path, seg);
    const struct ej__console_route *route = NULL;
    bool path_known = false;
    char *args[MAX_SEGMENTS] = {0};
    for (size_t i = 0; n > 0 && i < sizeof routes / sizeof routes[0] && route == NULL; i++) {
        memset(args, 0, sizeof args);
        if (!path_matches(routes[i].path, seg, n, args))
            continue;
        path_known = true;
        if (method_matches(routes[i].method, req->method))
            route = &routes[i];
    }
    if (route == NULL && path_known)
        return not_allowed(req, seg, n);
    if (route == NULL)
        return ej__console_reply_error(req, MHD_HTTP_NOT_FOUND, "no route %s %s", req->method,
                                       req->url);
    req->action = seg[n - 1];
    ej_console *con = NULL;
    bool per_registry = strncmp(route->path, "registries/:r", 13) == 0;
    if (per_registry) {
        req->registry = args[0];
        if ((con = registry_named(req->web, args[0])) == NULL)
            return ej__console_reply_error(req, MHD_HTTP_NOT_FOUND, "no registry \"%s\"", args[0]);
    }
    ej_console_role have = ej__console_role_on(&req->who, req->registry);
    if (have < route->need)
        return ej__console_reply_error(
            req, MHD_HTTP_FORBIDDEN, "%s \"%s\" is %s%s%s; %s %s needs %s", req->who.kind,
            req->who.name, ej_console_role_name(have), req->registry ? " on " : "",
            req->registry ? req->registry : "", req->method, route->path,
            ej_console_role_name(route->need));
    route->handler(req, con, args);
}
