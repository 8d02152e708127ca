/* `ejob jobs`: every job of a namespace with its brief status. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <jansson.h>

#include "ejob/console.h"
#include "ejob/error.h"
#include "cli/cli.h"
#include "cli/cli_util.h"

#define CMD "jobs"

static const char usage[] =
    "Usage: ejob jobs [--json] [registry options]\n"
    "\n"
    "List every job of the namespace (the children of /NAMESPACE that have a\n"
    "config node), as the ElasticJob console's job list does:\n"
    "\n"
    "  JOB        STATUS  CRON           ITEMS  INSTANCES  LEADER           TYPE\n"
    "  demoJob    OK      0/2 * * * * ?  6      3          10.0.0.7@-@4123  SCRIPT\n"
    "\n"
    "STATUS is ElasticJob 2.1.5's JobBriefInfo status:\n"
    "  OK             instances are live and every item has a live owner\n"
    "  CRASHED        no live instance\n"
    "  DISABLED       every server of the job is disabled\n"
    "  SHARDING_FLAG  an item's owner is not live, or no item is assigned yet\n"
    "and ejob's own:\n"
    "  LEADER_LOST    leader/election/instance names an instance that is not live\n"
    "                 (LEADER then ends in \"(gone)\"): sharding waits for it\n"
    "A job whose config node does not parse or validate shows its error on\n"
    "stderr (and in configError with --json); one that does not parse shows\n"
    "CRON \"?\".\n"
    "\n" EJCLI_COMMON_HELP "\n"
    "Exit codes: 0 listed (also when there are no jobs), 1 registry error,\n"
    "2 usage error.\n";

static json_t *job_json(const struct ej_console_job *j)
{
    const struct ej_job_config *cfg = &j->cfg;
    json_t *o = json_object();
    json_object_set_new(o, "jobName", json_string(j->name));
    json_object_set_new(o, "status", json_string(ej_console_status_name(j->status)));
    json_object_set_new(o, "cron", j->config_parsed ? json_string(cfg->cron) : json_null());
    json_object_set_new(o, "shardingTotalCount",
                        json_integer(j->config_parsed ? cfg->sharding_total_count : 0));
    json_object_set_new(o, "instanceCount", json_integer((json_int_t)j->instance_count));
    json_object_set_new(o, "leader", j->leader ? json_string(j->leader) : json_null());
    json_object_set_new(o, "leaderLive", json_boolean(j->leader_live));
    json_object_set_new(o, "jobType",
                        j->config_parsed ? json_string(ej_job_type_name(cfg->job_type))
                                         : json_null());
    json_object_set_new(o, "description", json_string(j->config_parsed ? cfg->description : ""));
    json_object_set_new(o, "configError",
                        j->config_ok ? json_null() : json_string(j->config_error));
    return o;
}

static void add_row(ejcli_table *table, const struct ej_console_job *j)
{
    char items[16], instances[16], leader[300];
    snprintf(items, sizeof(items), "%d", j->config_parsed ? j->cfg.sharding_total_count : 0);
    snprintf(instances, sizeof(instances), "%zu", j->instance_count);
    snprintf(leader, sizeof(leader), "%s%s", j->leader ? j->leader : "-",
             j->leader && !j->leader_live ? " (gone)" : "");
    const char *row[] = {j->name,
                         ej_console_status_name(j->status),
                         j->config_parsed ? j->cfg.cron : "?",
                         items,
                         instances,
                         leader,
                         j->config_parsed ? ej_job_type_name(j->cfg.job_type) : "?",
                         j->config_parsed ? j->cfg.description : ""};
    ejcli_table_row(table, row);
}

static int run_jobs(int argc, char **argv)
{
    struct ejcli_common c;
    ejcli_common_init(&c);
    struct ejcli_flag flags[] = {EJCLI_COMMON_FLAGS(&c), EJCLI_FLAGS_END};
    char *pos[1];
    int npos;
    int rc = ejcli_parse(CMD, argc, argv, flags, pos, 0, &npos);
    if (rc != 0)
        return rc;
    ej_registry *reg;
    ej_console *con;
    if ((rc = ejcli_console(CMD, &c, &reg, &con)) != 0)
        return rc;
    struct ej_console_job *jobs = NULL;
    size_t count = 0;
    int err = ej_console_jobs(con, &jobs, &count);
    if (err != 0) {
        rc = ejcli_reg_fail(CMD, err, "cannot list jobs");
        goto out;
    }
    static const char *const headers[] = {"JOB",       "STATUS", "CRON", "ITEMS",
                                          "INSTANCES", "LEADER", "TYPE", "DESCRIPTION"};
    ejcli_table *table = ejcli_table_new(8, headers);
    json_t *arr = json_array();
    for (size_t i = 0; i < count; i++) {
        if (!jobs[i].config_ok)
            fprintf(stderr, "ejob jobs: job \"%s\": config error: %s\n", jobs[i].name,
                    jobs[i].config_error);
        if (c.json)
            json_array_append_new(arr, job_json(&jobs[i]));
        else
            add_row(table, &jobs[i]);
    }
    if (c.json) {
        char *s = json_dumps(arr, JSON_INDENT(2) | JSON_PRESERVE_ORDER);
        if (s != NULL)
            printf("%s\n", s);
        free(s);
    } else if (count == 0) {
        fprintf(stderr, "ejob jobs: no jobs in namespace \"%s\"\n", ej_registry_namespace(reg));
    } else {
        ejcli_table_print(table, stdout);
    }
    json_decref(arr);
    ejcli_table_free(table);
    ej_console_jobs_free(jobs, count);
out:
    ej_console_destroy(con);
    ej_registry_destroy(reg);
    return rc;
}

EJ_CLI_COMMAND(jobs, CMD, "list the jobs of a namespace with their status", usage, run_jobs)
