/* `ejob jobs`: every job of a namespace with its brief status. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <jansson.h>

#include "ejob/error.h"
#include "cli/cli.h"
#include "cli/cli_util.h"
#include "cli/jobinfo.h"

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
    "A job whose config node does not parse shows CRON \"?\" and its error on\n"
    "stderr.\n"
    "\n" EJCLI_COMMON_HELP "\n"
    "Exit codes: 0 listed (also when there are no jobs), 1 registry error,\n"
    "2 usage error.\n";

static int cmp_str(const void *a, const void *b)
{
    return strcmp(*(char *const *)a, *(char *const *)b);
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
    if ((rc = ejcli_connect(CMD, &c, &reg, NULL)) != 0)
        return rc;

    char **names = NULL;
    size_t count = 0;
    int err = ej_registry_children(reg, "/", EJ_REG_SORT_ASC, &names, &count);
    if (err == EJ_ENONODE) {
        err = 0;
        count = 0;
    }
    if (err != 0) {
        rc = ejcli_reg_fail(CMD, err, "cannot list jobs");
        ej_registry_destroy(reg);
        return rc;
    }
    if (count > 1)
        qsort(names, count, sizeof(char *), cmp_str);

    static const char *const headers[] = {"JOB",       "STATUS", "CRON", "ITEMS",
                                          "INSTANCES", "LEADER", "TYPE", "DESCRIPTION"};
    ejcli_table *table = c.json ? NULL : ejcli_table_new(8, headers);
    json_t *arr = c.json ? json_array() : NULL;
    size_t shown = 0;
    for (size_t i = 0; i < count && rc == 0; i++) {
        struct ejcli_job j;
        err = ejcli_job_load(reg, names[i], true, &j);
        if (err == EJ_ENONODE) {
            ejcli_job_free(&j);
            continue;
        }
        if (err != 0) {
            rc = ejcli_reg_fail(CMD, err, names[i]);
            ejcli_job_free(&j);
            break;
        }
        if (j.config_raw == NULL) {
            /* Not a job (no config), as the Java console skips it. */
            ejcli_job_free(&j);
            continue;
        }
        if (!j.config_ok)
            fprintf(stderr, "ejob jobs: job \"%s\": config error: %s\n", j.name, j.config_error);
        const char *status = ejcli_job_status_name(j.status);
        char items[16], instances[16];
        snprintf(items, sizeof(items), "%d", j.config_parsed ? j.cfg.sharding_total_count : 0);
        snprintf(instances, sizeof(instances), "%zu", j.instance_count);
        const char *cron = j.config_parsed ? j.cfg.cron : "?";
        const char *type = j.config_parsed ? ej_job_type_name(j.cfg.job_type) : "?";
        const char *desc = j.config_parsed ? j.cfg.description : "";
        if (c.json) {
            json_t *o = json_object();
            json_object_set_new(o, "jobName", json_string(j.name));
            json_object_set_new(o, "status", json_string(status));
            json_object_set_new(o, "cron", j.config_parsed ? json_string(cron) : json_null());
            json_object_set_new(o, "shardingTotalCount",
                                json_integer(j.config_parsed ? j.cfg.sharding_total_count : 0));
            json_object_set_new(o, "instanceCount", json_integer((json_int_t)j.instance_count));
            json_object_set_new(o, "leader", j.leader ? json_string(j.leader) : json_null());
            json_object_set_new(o, "jobType", j.config_parsed ? json_string(type) : json_null());
            json_object_set_new(o, "description", json_string(desc));
            json_object_set_new(o, "configError",
                                j.config_ok ? json_null() : json_string(j.config_error));
            json_array_append_new(arr, o);
        } else {
            const char *row[] = {j.name, status, cron, items, instances, j.leader ? j.leader : "-",
                                 type,   desc};
            ejcli_table_row(table, row);
        }
        shown++;
        ejcli_job_free(&j);
    }
    ej_registry_free_names(names);
    if (rc == 0) {
        if (c.json) {
            char *s = json_dumps(arr, JSON_INDENT(2) | JSON_PRESERVE_ORDER);
            if (s != NULL)
                printf("%s\n", s);
            free(s);
        } else if (shown == 0) {
            fprintf(stderr, "ejob jobs: no jobs in namespace \"%s\"\n", ej_registry_namespace(reg));
        } else {
            ejcli_table_print(table, stdout);
        }
    }
    json_decref(arr);
    ejcli_table_free(table);
    ej_registry_destroy(reg);
    return rc;
}

EJ_CLI_COMMAND(jobs, CMD, "list the jobs of a namespace with their status", usage, run_jobs)
