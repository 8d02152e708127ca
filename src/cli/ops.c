#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <jansson.h>

#include "ejob/config.h"
#include "ejob/error.h"
#include "common/util.h"
#include "cli/cli.h"
#include "cli/cli_util.h"
#include "cli/jobinfo.h"
#include "cli/ops.h"

const char ejcli_trigger_usage[] =
    "Usage: ejob trigger JOB [--instance ID | --server IP] [--json] [registry options]\n"
    "\n"
    "Run the job once now on its live instances, as the ElasticJob console does:\n"
    "writes \"TRIGGER\" into /NAMESPACE/JOB/instances/ID. Each instance clears it\n"
    "and fires its own items at once (unless it is running already).\n"
    "\n"
    "  --instance ID   only this instance (e.g. 10.0.0.7@-@4123)\n"
    "  --server IP     only the instances of this server\n"
    "\n" EJCLI_COMMON_HELP "\n"
    "Example:\n"
    "  $ ejob trigger demoJob\n"
    "  triggered demoJob on 127.0.0.13@-@4242\n"
    "  triggered demoJob on 127.0.0.12@-@4241\n"
    "\n"
    "Exit codes: 0 triggered, 1 no such job / no live instance / registry error,\n"
    "2 usage error.\n";

const char ejcli_disable_usage[] =
    "Usage: ejob disable JOB [--server IP] [--json] [registry options]\n"
    "\n"
    "Disable the job on every server (or one): writes \"DISABLED\" into\n"
    "/NAMESPACE/JOB/servers/IP. Instances on a disabled server stop firing and\n"
    "take no part in sharding; their items move to the other servers.\n"
    "\n"
    "  --server IP     only this server (it must be one of the job's servers)\n"
    "\n" EJCLI_COMMON_HELP "\n"
    "Example:\n"
    "  $ ejob disable demoJob --server 127.0.0.12\n"
    "  disabled demoJob on server 127.0.0.12\n"
    "\n"
    "Exit codes: 0 done, 1 no such job or server / registry error, 2 usage error.\n";

const char ejcli_enable_usage[] =
    "Usage: ejob enable JOB [--server IP] [--json] [registry options]\n"
    "\n"
    "Enable the job again on every server (or one): writes \"\" into\n"
    "/NAMESPACE/JOB/servers/IP.\n"
    "\n"
    "  --server IP     only this server (it must be one of the job's servers)\n"
    "\n" EJCLI_COMMON_HELP "\n"
    "Exit codes: 0 done, 1 no such job or server / registry error, 2 usage error.\n";

const char ejcli_disable_item_usage[] =
    "Usage: ejob disable-item JOB ITEM [--json] [registry options]\n"
    "\n"
    "Disable one shard item: creates /NAMESPACE/JOB/sharding/ITEM/disabled. The\n"
    "item's owner skips it until it is enabled again.\n"
    "\n" EJCLI_COMMON_HELP "\n"
    "Example:\n"
    "  $ ejob disable-item demoJob 3\n"
    "  disabled item 3 of demoJob\n"
    "\n"
    "Exit codes: 0 done, 1 no such job / item out of range / registry error,\n"
    "2 usage error.\n";

const char ejcli_enable_item_usage[] =
    "Usage: ejob enable-item JOB ITEM [--json] [registry options]\n"
    "\n"
    "Enable a disabled shard item: deletes /NAMESPACE/JOB/sharding/ITEM/disabled.\n"
    "\n" EJCLI_COMMON_HELP "\n"
    "Exit codes: 0 done (also when it was not disabled), 1 no such job / registry\n"
    "error, 2 usage error.\n";

const char ejcli_shutdown_usage[] =
    "Usage: ejob shutdown JOB [--instance ID | --server IP] [--json] [registry options]\n"
    "\n"
    "Shut the job's instances down (all, or one instance, or those of one\n"
    "server), as the ElasticJob console does: deletes\n"
    "/NAMESPACE/JOB/instances/ID. Each instance then stops its schedule and gives\n"
    "up leadership; the process itself keeps running.\n"
    "\n"
    "  --instance ID   only this instance\n"
    "  --server IP     only the instances of this server\n"
    "\n" EJCLI_COMMON_HELP "\n"
    "Example:\n"
    "  $ ejob shutdown demoJob --instance 127.0.0.12@-@4241\n"
    "  shut down demoJob instance 127.0.0.12@-@4241\n"
    "\n"
    "Exit codes: 0 done, 1 no such job or instance / registry error, 2 usage error.\n";

const char ejcli_remove_usage[] =
    "Usage: ejob remove JOB [--json] [registry options]\n"
    "\n"
    "Delete the job from the namespace: /NAMESPACE/JOB and everything below it\n"
    "(config, servers, sharding, leader nodes). Refused while any instance of the\n"
    "job is live: shut them down first (ejob shutdown JOB) or stop their daemons.\n"
    "\n" EJCLI_COMMON_HELP "\n"
    "Example:\n"
    "  $ ejob remove demoJob\n"
    "  ejob remove: job \"demoJob\" has 2 live instance(s): 127.0.0.13@-@4242, ...\n"
    "\n"
    "Exit codes: 0 removed, 1 no such job / live instances / registry error,\n"
    "2 usage error.\n";

/* Parsed arguments of an operation. */
struct op_args {
    struct ejcli_common c;
    const char *instance;
    const char *server;
    const char *job;
    const char *item_text;
    long item;
};

static int parse_op(const char *cmd, int argc, char **argv, struct op_args *a, bool targets,
                    bool server_only, bool item)
{
    memset(a, 0, sizeof(*a));
    ejcli_common_init(&a->c);
    struct ejcli_flag with_targets[] = {EJCLI_COMMON_FLAGS(&a->c),
                                        {"instance", 0, EJCLI_STR, &a->instance},
                                        {"server", 0, EJCLI_STR, &a->server},
                                        EJCLI_FLAGS_END};
    struct ejcli_flag with_server[] = {
        EJCLI_COMMON_FLAGS(&a->c), {"server", 0, EJCLI_STR, &a->server}, EJCLI_FLAGS_END};
    struct ejcli_flag plain[] = {EJCLI_COMMON_FLAGS(&a->c), EJCLI_FLAGS_END};
    const struct ejcli_flag *flags = targets ? with_targets : server_only ? with_server : plain;
    char *pos[2];
    int npos;
    int rc = ejcli_parse(cmd, argc, argv, flags, pos, item ? 2 : 1, &npos);
    if (rc != 0)
        return rc;
    if (npos < 1)
        return ej_cli_usage_error(cmd, "expected a job name");
    if (item && npos < 2)
        return ej_cli_usage_error(cmd, "expected a shard item number after the job name");
    a->job = pos[0];
    if ((rc = ejcli_check_job_name(cmd, a->job)) != 0)
        return rc;
    if (a->instance != NULL && a->server != NULL)
        return ej_cli_usage_error(cmd, "give --instance or --server, not both");
    if (a->instance != NULL && (a->instance[0] == '\0' || strchr(a->instance, '/') != NULL))
        return ej_cli_usage_error(cmd, "bad instance id \"%s\"", a->instance);
    if (a->server != NULL && (a->server[0] == '\0' || strchr(a->server, '/') != NULL))
        return ej_cli_usage_error(cmd, "bad server \"%s\"", a->server);
    if (item) {
        a->item_text = pos[1];
        char *end;
        a->item = strtol(pos[1], &end, 10);
        if (pos[1][0] < '0' || pos[1][0] > '9' || *end != '\0' || a->item > 1000000)
            return ej_cli_usage_error(cmd, "shard item must be a number >= 0, got \"%s\"", pos[1]);
    }
    return 0;
}

/* Collects what an operation touched, for the final output. */
struct report {
    const char *cmd;
    const char *job;
    bool json;
    json_t *targets;
};

static void report_init(struct report *r, const char *cmd, const char *job, bool json)
{
    r->cmd = cmd;
    r->job = job;
    r->json = json;
    r->targets = json ? json_array() : NULL;
}

static void report_add(struct report *r, const char *target, const char *fmt, ...)
    __attribute__((format(printf, 3, 4)));
static void report_add(struct report *r, const char *target, const char *fmt, ...)
{
    if (r->json) {
        json_array_append_new(r->targets, json_string(target));
        return;
    }
    va_list ap;
    va_start(ap, fmt);
    vprintf(fmt, ap);
    va_end(ap);
    putchar('\n');
}

static void report_finish(struct report *r, const char *ns, const char *action)
{
    if (!r->json)
        return;
    json_t *o = json_object();
    json_object_set_new(o, "jobName", json_string(r->job));
    json_object_set_new(o, "namespace", json_string(ns));
    json_object_set_new(o, "action", json_string(action));
    json_object_set_new(o, "targets", r->targets);
    char *s = json_dumps(o, JSON_INDENT(2) | JSON_PRESERVE_ORDER);
    if (s != NULL)
        printf("%s\n", s);
    free(s);
    json_decref(o);
    r->targets = NULL;
}

static int list_children(ej_registry *reg, const char *job, const char *sub, char ***names,
                         size_t *n)
{
    char path[600];
    snprintf(path, sizeof(path), "/%s/%s", job, sub);
    int rc = ej_registry_children(reg, path, EJ_REG_SORT_DESC, names, n);
    if (rc == EJ_ENONODE) {
        *names = calloc(1, sizeof(char *));
        *n = 0;
        return *names != NULL ? 0 : EJ_ENOMEM;
    }
    return rc;
}

static bool instance_selected(const struct op_args *a, const char *id)
{
    if (a->instance != NULL)
        return strcmp(a->instance, id) == 0;
    if (a->server != NULL) {
        size_t n = strlen(a->server);
        return strncmp(id, a->server, n) == 0 && strncmp(id + n, "@-@", 3) == 0;
    }
    return true;
}

/* The instance operations: trigger (set TRIGGER) and shutdown (delete). */
static int instance_op(const char *cmd, int argc, char **argv, bool shutdown)
{
    struct op_args a;
    int rc = parse_op(cmd, argc, argv, &a, true, false, false);
    if (rc != 0)
        return rc;
    ej_registry *reg;
    if ((rc = ejcli_connect(cmd, &a.c, &reg, NULL)) != 0)
        return rc;
    if ((rc = ejcli_require_job(cmd, reg, a.job)) != 0)
        goto out;
    char **ids = NULL;
    size_t n = 0;
    int err = list_children(reg, a.job, "instances", &ids, &n);
    if (err != 0) {
        rc = ejcli_reg_fail(cmd, err, "cannot list instances");
        goto out;
    }
    struct report r;
    report_init(&r, cmd, a.job, a.c.json);
    size_t done = 0;
    for (size_t i = 0; i < n && rc == 0; i++) {
        if (!instance_selected(&a, ids[i]))
            continue;
        char path[900];
        snprintf(path, sizeof(path), "/%s/instances/%s", a.job, ids[i]);
        /* set, never persist: an instance node that vanished meanwhile must
         * not come back as a persistent node. */
        err = shutdown ? ej_registry_delete(reg, path, -1)
                       : ej_registry_set(reg, path, "TRIGGER", 7, -1, NULL);
        if (err == EJ_ENONODE)
            continue;
        if (err != 0) {
            rc = ejcli_reg_fail(cmd, err, path);
            break;
        }
        done++;
        if (shutdown)
            report_add(&r, ids[i], "shut down %s instance %s", a.job, ids[i]);
        else
            report_add(&r, ids[i], "triggered %s on %s", a.job, ids[i]);
    }
    if (rc == 0 && done == 0) {
        if (a.instance != NULL)
            rc = ejcli_fail(cmd, "no live instance \"%s\" of job \"%s\"", a.instance, a.job);
        else if (a.server != NULL)
            rc = ejcli_fail(cmd, "job \"%s\" has no live instance on server %s", a.job, a.server);
        else
            rc = ejcli_fail(cmd, "job \"%s\" has no live instance", a.job);
    }
    if (rc == 0)
        report_finish(&r, ej_registry_namespace(reg), shutdown ? "shutdown" : "trigger");
    json_decref(r.targets);
    ej_registry_free_names(ids);
out:
    ej_registry_destroy(reg);
    return rc;
}

int ejcli_op_trigger(int argc, char **argv)
{
    return instance_op("trigger", argc, argv, false);
}

int ejcli_op_shutdown(int argc, char **argv)
{
    return instance_op("shutdown", argc, argv, true);
}

int ejcli_op_server(int argc, char **argv, bool disable)
{
    const char *cmd = disable ? "disable" : "enable";
    struct op_args a;
    int rc = parse_op(cmd, argc, argv, &a, false, true, false);
    if (rc != 0)
        return rc;
    ej_registry *reg;
    if ((rc = ejcli_connect(cmd, &a.c, &reg, NULL)) != 0)
        return rc;
    if ((rc = ejcli_require_job(cmd, reg, a.job)) != 0)
        goto out;
    char **ips = NULL;
    size_t n = 0;
    int err = list_children(reg, a.job, "servers", &ips, &n);
    if (err != 0) {
        rc = ejcli_reg_fail(cmd, err, "cannot list servers");
        goto out;
    }
    if (a.server != NULL) {
        bool known = false;
        for (size_t i = 0; i < n; i++)
            known = known || strcmp(ips[i], a.server) == 0;
        if (!known) {
            ej_buf b;
            ej__buf_init(&b);
            for (size_t i = 0; i < n; i++)
                ej__buf_printf(&b, "%s%s", i ? ", " : "", ips[i]);
            rc = ejcli_fail(cmd, "job \"%s\" has no server %s (its servers: %s)", a.job, a.server,
                            n ? b.data : "none");
            ej__buf_fini(&b);
        }
    } else if (n == 0) {
        rc = ejcli_fail(cmd, "job \"%s\" has no servers yet", a.job);
    }
    struct report r;
    report_init(&r, cmd, a.job, a.c.json);
    const char *value = disable ? "DISABLED" : "";
    for (size_t i = 0; i < n && rc == 0; i++) {
        if (a.server != NULL && strcmp(ips[i], a.server) != 0)
            continue;
        char path[900];
        snprintf(path, sizeof(path), "/%s/servers/%s", a.job, ips[i]);
        err = ej_registry_persist(reg, path, value, strlen(value));
        if (err != 0) {
            rc = ejcli_reg_fail(cmd, err, path);
            break;
        }
        report_add(&r, ips[i], "%s %s on server %s", disable ? "disabled" : "enabled", a.job,
                   ips[i]);
    }
    if (rc == 0)
        report_finish(&r, ej_registry_namespace(reg), cmd);
    json_decref(r.targets);
    ej_registry_free_names(ips);
out:
    ej_registry_destroy(reg);
    return rc;
}

int ejcli_op_item(int argc, char **argv, bool disable)
{
    const char *cmd = disable ? "disable-item" : "enable-item";
    struct op_args a;
    int rc = parse_op(cmd, argc, argv, &a, false, false, true);
    if (rc != 0)
        return rc;
    ej_registry *reg;
    if ((rc = ejcli_connect(cmd, &a.c, &reg, NULL)) != 0)
        return rc;
    if ((rc = ejcli_require_job(cmd, reg, a.job)) != 0)
        goto out;
    char path[700];
    if (disable) {
        /* Refuse items the job does not have, when its config says. */
        snprintf(path, sizeof(path), "/%s/config", a.job);
        char *raw = NULL;
        int err = ejcli_get_opt(reg, path, &raw);
        if (err != 0) {
            rc = ejcli_reg_fail(cmd, err, path);
            goto out;
        }
        struct ej_job_config cfg;
        if (raw != NULL && ej_job_config_init(&cfg) == 0) {
            if (ej_job_config_from_json(raw, strlen(raw), &cfg, NULL, 0) == 0 &&
                cfg.sharding_total_count > 0 && a.item >= cfg.sharding_total_count)
                rc = ejcli_fail(cmd, "job \"%s\" has items 0..%d; there is no item %ld", a.job,
                                cfg.sharding_total_count - 1, a.item);
            ej_job_config_fini(&cfg);
        }
        free(raw);
        if (rc != 0)
            goto out;
    }
    snprintf(path, sizeof(path), "/%s/sharding/%ld/disabled", a.job, a.item);
    int err = disable ? ej_registry_persist(reg, path, "", 0) : ej_registry_delete(reg, path, -1);
    if (err == EJ_ENONODE && !disable) {
        if (!a.c.json)
            printf("item %ld of %s was not disabled\n", a.item, a.job);
        err = 0;
    } else if (err == 0 && !a.c.json) {
        printf("%s item %ld of %s\n", disable ? "disabled" : "enabled", a.item, a.job);
    }
    if (err != 0) {
        rc = ejcli_reg_fail(cmd, err, path);
        goto out;
    }
    if (a.c.json) {
        struct report r;
        report_init(&r, cmd, a.job, true);
        report_add(&r, a.item_text, "%s", "");
        report_finish(&r, ej_registry_namespace(reg), cmd);
    }
out:
    ej_registry_destroy(reg);
    return rc;
}

int ejcli_op_remove(int argc, char **argv)
{
    const char *cmd = "remove";
    struct op_args a;
    int rc = parse_op(cmd, argc, argv, &a, false, false, false);
    if (rc != 0)
        return rc;
    ej_registry *reg;
    if ((rc = ejcli_connect(cmd, &a.c, &reg, NULL)) != 0)
        return rc;
    if ((rc = ejcli_require_job(cmd, reg, a.job)) != 0)
        goto out;
    char **ids = NULL;
    size_t n = 0;
    int err = list_children(reg, a.job, "instances", &ids, &n);
    if (err != 0) {
        rc = ejcli_reg_fail(cmd, err, "cannot list instances");
        goto out;
    }
    if (n > 0) {
        ej_buf b;
        ej__buf_init(&b);
        for (size_t i = 0; i < n && i < 5; i++)
            ej__buf_printf(&b, "%s%s", i ? ", " : "", ids[i]);
        rc = ejcli_fail(cmd,
                        "job \"%s\" has %zu live instance(s): %s%s; shut them down first "
                        "(ejob shutdown %s) or stop their daemons",
                        a.job, n, b.data != NULL ? b.data : "", n > 5 ? ", ..." : "", a.job);
        ej__buf_fini(&b);
        ej_registry_free_names(ids);
        goto out;
    }
    ej_registry_free_names(ids);
    char path[600];
    snprintf(path, sizeof(path), "/%s", a.job);
    err = ej_registry_delete_recursive(reg, path);
    if (err != 0) {
        rc = ejcli_reg_fail(cmd, err, path);
        goto out;
    }
    struct report r;
    report_init(&r, cmd, a.job, a.c.json);
    report_add(&r, a.job, "removed job %s from namespace %s", a.job, ej_registry_namespace(reg));
    report_finish(&r, ej_registry_namespace(reg), cmd);
out:
    ej_registry_destroy(reg);
    return rc;
}
