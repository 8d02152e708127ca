/* `ejob status JOB`: one job's configuration, servers, instances and items. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <jansson.h>

#include "ejob/console.h"
#include "ejob/error.h"
#include "cli/cli.h"
#include "cli/cli_util.h"

#define CMD "status"

static const char usage[] =
    "Usage: ejob status JOB [--json] [registry options]\n"
    "\n"
    "Show one job as ZooKeeper holds it: a summary of its configuration, its\n"
    "servers, its live instances and one row per shard item:\n"
    "\n"
    "  ITEM  OWNER                RUNNING  FAILOVER  MISFIRE  DISABLED  STATUS   PARAMETER\n"
    "  0     10.0.0.7@-@4123      yes      -         no       no        RUNNING  Beijing\n"
    "\n"
    "OWNER is sharding/ITEM/instance, FAILOVER the instance running the item as\n"
    "a failover, STATUS ElasticJob's ShardingInfo status (DISABLED, RUNNING,\n"
    "SHARDING_FLAG when the owner is not live, else PENDING). Status is as in\n"
    "`ejob jobs` (LEADER_LOST: the leader node names no live instance). When the config\n"
    "node does not parse or validate, the error is shown naming the field (the\n"
    "instances keep running with their last good config).\n"
    "\n" EJCLI_COMMON_HELP "\n"
    "Exit codes: 0 shown, 1 no such job or registry error, 2 usage error.\n";

static const char *yn(bool b)
{
    return b ? "yes" : "no";
}

/* A server whose ejob instances were all shut down is not simply ENABLED. */
static const char *server_status(const struct ej_console_server *s)
{
    if (s->disabled)
        return ej_console_status_name(EJ_CONSOLE_STATUS_DISABLED);
    return s->shut_down_count > 0 && s->instance_count == 0 ? "SHUT DOWN" : "ENABLED";
}

/* What brings a shut-down instance back (docs/cli.md, `ejob start`). */
static void print_shut_down(const struct ej_console_job *j)
{
    for (size_t i = 0; i < j->shut_down_count; i++) {
        const struct ej_console_shut_down *s = &j->shut_down[i];
        if (s->restartable)
            printf("Shut down:  %s: restart needed (ejob start %s --instance %s)\n", s->id,
                   j->name, s->id);
        else
            printf("Shut down:  %s: restart needed (restart its process)\n", s->id);
    }
}

static json_t *config_json(const struct ej_console_job *j)
{
    if (!j->config_parsed)
        return json_null();
    char *text = ej_job_config_to_json(&j->cfg);
    json_t *v = text != NULL ? json_loads(text, 0, NULL) : NULL;
    free(text);
    return v != NULL ? v : json_null();
}

/* Instances of the job that are not ejob instances (Java ones), read only
 * when the config has settings Java ignores: those settings' keys. */
struct java_note {
    char **ids;
    size_t n;
    const char *keys[8];
    size_t nkeys;
};

static int java_note_load(ej_console *con, const struct ej_console_job *j, struct java_note *jn)
{
    memset(jn, 0, sizeof *jn);
    if (!j->config_parsed)
        return 0;
    jn->nkeys = ej_job_config_java_ignored(&j->cfg, jn->keys, 8);
    if (jn->nkeys > 8)
        jn->nkeys = 8;
    return jn->nkeys ? ej_console_job_java_instances(con, j->name, &jn->ids, &jn->n) : 0;
}

static void print_java_text(const struct java_note *jn)
{
    if (jn->n == 0)
        return;
    printf("Java:       ");
    for (size_t i = 0; i < jn->n; i++)
        printf("%s%s", i ? ", " : "", jn->ids[i]);
    printf(" %s no ejob instance%s: %s ", jn->n == 1 ? "is" : "are", jn->n == 1 ? "" : "s",
           jn->n == 1 ? "it ignores" : "they ignore");
    for (size_t i = 0; i < jn->nkeys; i++)
        printf("%s%s", i ? ", " : "", jn->keys[i]);
    printf("\n");
}

static void add_java_json(json_t *o, const struct java_note *jn)
{
    json_t *ids = json_array(), *keys = json_array();
    for (size_t i = 0; i < jn->n; i++)
        json_array_append_new(ids, json_string(jn->ids[i]));
    for (size_t i = 0; i < jn->nkeys && jn->n > 0; i++)
        json_array_append_new(keys, json_string(jn->keys[i]));
    json_object_set_new(o, "javaInstances", ids);
    json_object_set_new(o, "javaIgnores", keys);
}

static void print_json(const struct ej_console_job *j, const char *ns, const struct java_note *jn)
{
    json_t *o = json_object();
    json_object_set_new(o, "jobName", json_string(j->name));
    json_object_set_new(o, "namespace", json_string(ns));
    json_object_set_new(o, "status", json_string(ej_console_status_name(j->status)));
    json_object_set_new(o, "config", config_json(j));
    json_object_set_new(o, "configError",
                        j->config_ok ? json_null() : json_string(j->config_error));
    json_object_set_new(o, "leader", j->leader ? json_string(j->leader) : json_null());
    json_object_set_new(o, "leaderLive", json_boolean(j->leader_live));
    json_object_set_new(o, "shardingNecessary", json_boolean(j->sharding_necessary));
    json_object_set_new(o, "shardingProcessing", json_boolean(j->sharding_processing));
    json_object_set_new(o, "failoverItemsWaiting", json_integer((json_int_t)j->failover_waiting));
    json_t *servers = json_array();
    for (size_t i = 0; i < j->server_count; i++) {
        json_t *s = json_object();
        json_object_set_new(s, "ip", json_string(j->servers[i].ip));
        json_object_set_new(s, "status", json_string(server_status(&j->servers[i])));
        json_object_set_new(s, "instanceCount",
                            json_integer((json_int_t)j->servers[i].instance_count));
        json_array_append_new(servers, s);
    }
    json_object_set_new(o, "servers", servers);
    json_t *instances = json_array();
    for (size_t i = 0; i < j->instance_count; i++) {
        char ip[256];
        ej_layout_instance_ip(j->instances[i].id, ip, sizeof(ip));
        json_t *s = json_object();
        json_object_set_new(s, "instanceId", json_string(j->instances[i].id));
        json_object_set_new(s, "serverIp", json_string(ip));
        json_object_set_new(
            s, "leader",
            json_boolean(j->leader != NULL && strcmp(j->leader, j->instances[i].id) == 0));
        json_object_set_new(s, "triggerPending", json_boolean(j->instances[i].trigger_pending));
        json_array_append_new(instances, s);
    }
    json_object_set_new(o, "instances", instances);
    json_t *down = json_array();
    for (size_t i = 0; i < j->shut_down_count; i++)
        json_array_append_new(down, json_pack("{s:s,s:b}", "instanceId", j->shut_down[i].id,
                                              "restartable", j->shut_down[i].restartable));
    json_object_set_new(o, "shutDown", down);
    json_t *items = json_array();
    for (size_t i = 0; i < j->item_count; i++) {
        const struct ej_console_item *it = &j->items[i];
        json_t *s = json_object();
        json_object_set_new(s, "item", json_integer(it->item));
        json_object_set_new(s, "instanceId", it->owner ? json_string(it->owner) : json_null());
        json_object_set_new(s, "ownerLive", json_boolean(it->owner_live));
        json_object_set_new(s, "running", json_boolean(it->running));
        json_object_set_new(s, "failover", it->failover ? json_string(it->failover) : json_null());
        json_object_set_new(s, "misfire", json_boolean(it->misfire));
        json_object_set_new(s, "disabled", json_boolean(it->disabled));
        json_object_set_new(s, "status", json_string(ej_console_item_status_name(it->status)));
        json_object_set_new(s, "parameter",
                            it->parameter ? json_string(it->parameter) : json_null());
        json_array_append_new(items, s);
    }
    json_object_set_new(o, "items", items);
    add_java_json(o, jn);
    char *text = json_dumps(o, JSON_INDENT(2) | JSON_PRESERVE_ORDER);
    if (text != NULL)
        printf("%s\n", text);
    free(text);
    json_decref(o);
}

static void print_text(const struct ej_console_job *j, const char *ns, const struct java_note *jn)
{
    printf("Job:        %s (namespace %s)\n", j->name, ns);
    printf("Status:     %s\n", ej_console_status_name(j->status));
    if (j->config_parsed) {
        const struct ej_job_config *cfg = &j->cfg;
        printf("Type:       %s", ej_job_type_name(cfg->job_type));
        if (cfg->job_type == EJ_JOB_TYPE_SCRIPT)
            printf("  %s", cfg->script_command_line);
        else if (cfg->job_type == EJ_JOB_TYPE_HTTP)
            printf("  %s %s", cfg->http.method[0] ? cfg->http.method : "GET", cfg->http.uri);
        else if (cfg->job_class[0] != '\0')
            printf("  %s", cfg->job_class);
        printf("\n");
        printf("Cron:       %s  (time zone %s)\n", cfg->cron,
               cfg->time_zone[0] ? cfg->time_zone : "of each host");
        printf("Items:      %d", cfg->sharding_total_count);
        if (cfg->sharding_item_parameters[0] != '\0')
            printf("  parameters %s", cfg->sharding_item_parameters);
        printf("\n");
        if (cfg->job_parameter[0] != '\0')
            printf("Parameter:  %s\n", cfg->job_parameter);
        printf("Options:    failover %s, misfire %s, monitorExecution %s, monitorPort %d\n",
               cfg->failover ? "on" : "off", cfg->misfire ? "on" : "off",
               cfg->monitor_execution ? "on" : "off", cfg->monitor_port);
        printf("Strategy:   %s\n", cfg->job_sharding_strategy_class[0]
                                       ? cfg->job_sharding_strategy_class
                                       : "average (default)");
        if (cfg->description[0] != '\0')
            printf("About:      %s\n", cfg->description);
    }
    if (!j->config_ok)
        printf("Config error: %s\n", j->config_error);
    print_java_text(jn);
    printf("Leader:     %s%s\n", j->leader ? j->leader : "(none)",
           j->leader != NULL && !j->leader_live ? " (not a live instance: sharding waits for it)"
                                                : "");
    if (j->sharding_necessary || j->sharding_processing)
        printf("Sharding:   %s\n",
               j->sharding_processing ? "in progress" : "needed at the next fire");
    if (j->failover_waiting > 0)
        printf("Failover:   %zu item(s) waiting to be taken over\n", j->failover_waiting);
    print_shut_down(j);

    printf("\n");
    static const char *const sh[] = {"SERVER", "STATUS", "INSTANCES"};
    ejcli_table *t = ejcli_table_new(3, sh);
    for (size_t i = 0; i < j->server_count; i++) {
        char n[16];
        snprintf(n, sizeof(n), "%zu", j->servers[i].instance_count);
        const char *row[] = {j->servers[i].ip, server_status(&j->servers[i]), n};
        ejcli_table_row(t, row);
    }
    ejcli_table_print(t, stdout);
    ejcli_table_free(t);

    printf("\n");
    /* The TRIGGER column: is the console's trigger marker waiting there? */
    static const char *const ih[] = {"INSTANCE", "SERVER", "LEADER", EJ_LAYOUT_INSTANCE_TRIGGER};
    t = ejcli_table_new(4, ih);
    for (size_t i = 0; i < j->instance_count; i++) {
        char ip[256];
        ej_layout_instance_ip(j->instances[i].id, ip, sizeof(ip));
        bool leader = j->leader != NULL && strcmp(j->leader, j->instances[i].id) == 0;
        const char *row[] = {j->instances[i].id, ip, yn(leader),
                             j->instances[i].trigger_pending ? "pending" : "-"};
        ejcli_table_row(t, row);
    }
    ejcli_table_print(t, stdout);
    ejcli_table_free(t);

    printf("\n");
    /* The DISABLED column: does the item have the DISABLED flag? */
    const char *const th[] = {"ITEM",    "OWNER",
                              "RUNNING", "FAILOVER",
                              "MISFIRE", ej_console_item_status_name(EJ_CONSOLE_ITEM_DISABLED),
                              "STATUS",  "PARAMETER"};
    t = ejcli_table_new(8, th);
    for (size_t i = 0; i < j->item_count; i++) {
        const struct ej_console_item *it = &j->items[i];
        char item[16], owner[300];
        snprintf(item, sizeof(item), "%d", it->item);
        snprintf(owner, sizeof(owner), "%s%s", it->owner ? it->owner : "-",
                 it->owner && !it->owner_live ? " (gone)" : "");
        const char *row[] = {item,
                             owner,
                             yn(it->running),
                             it->failover ? it->failover : "-",
                             yn(it->misfire),
                             yn(it->disabled),
                             ej_console_item_status_name(it->status),
                             it->parameter ? it->parameter : "-"};
        ejcli_table_row(t, row);
    }
    ejcli_table_print(t, stdout);
    ejcli_table_free(t);
}

static int run_status(int argc, char **argv)
{
    struct ejcli_common c;
    ejcli_common_init(&c);
    struct ejcli_flag flags[] = {EJCLI_COMMON_FLAGS(&c), EJCLI_FLAGS_END};
    char *pos[1];
    int npos;
    int rc = ejcli_parse(CMD, argc, argv, flags, pos, 1, &npos);
    if (rc != 0)
        return rc;
    if (npos != 1)
        return ej_cli_usage_error(CMD, "expected a job name");
    if ((rc = ejcli_check_job_name(CMD, pos[0])) != 0)
        return rc;
    ej_registry *reg;
    ej_console *con;
    if ((rc = ejcli_console(CMD, &c, &reg, &con)) != 0)
        return rc;
    struct ej_console_job j;
    struct java_note jn = {0};
    int err = ej_console_job_load(con, pos[0], false, &j);
    if (err == 0)
        err = java_note_load(con, &j, &jn);
    if (err == EJ_ENONODE)
        rc = ejcli_fail(CMD, "no job \"%s\" in namespace \"%s\"", pos[0],
                        ej_registry_namespace(reg));
    else if (err != 0)
        rc = ejcli_reg_fail(CMD, err, "cannot read the job");
    else if (c.json)
        print_json(&j, ej_registry_namespace(reg), &jn);
    else
        print_text(&j, ej_registry_namespace(reg), &jn);
    ej_registry_free_names(jn.ids);
    ej_console_job_fini(&j);
    ej_console_destroy(con);
    ej_registry_destroy(reg);
    return rc;
}

EJ_CLI_COMMAND(status, CMD, "show a job: config, servers, instances, shard items", usage,
               run_status)
