#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <jansson.h>

#include "common/util.h"
#include "ejob/console.h"
#include "ejob/error.h"
#include "cli/cli.h"
#include "cli/cli_util.h"
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

const char ejcli_start_usage[] =
    "Usage: ejob start JOB [--instance ID | --server IP] [--json] [registry options]\n"
    "\n"
    "Bring back instances that were shut down (ejob shutdown, the console). A\n"
    "shut-down instance has left the job until its process restarts; an `ejob run`\n"
    "daemon, on any host, starts the job again when asked: this writes \"RESTART\"\n"
    "into /NAMESPACE/JOB/ejob/instances/ID (an ejob-only node; Java ElasticJob\n"
    "ignores it), then waits up to 30 s for each instance to register again.\n"
    "A Java instance, or a program that embeds ejob, comes back only with a\n"
    "restart of its process. `kill -HUP` of the daemon does the same for every\n"
    "job of its file.\n"
    "\n"
    "  --instance ID   only this instance\n"
    "  --server IP     only the instances of this server\n"
    "\n" EJCLI_COMMON_HELP "\n"
    "Example:\n"
    "  $ ejob start demoJob --instance 127.0.0.12@-@4241\n"
    "  started demoJob instance 127.0.0.12@-@4241\n"
    "\n"
    "Exit codes: 0 every instance asked is back, 1 no such job / nothing waits for\n"
    "a restart / not back within 30 s / registry error, 2 usage error.\n";

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
    const char *job;
    bool json;
    const char *verb, *joiner; /* text line: "VERB JOB JOINERtarget" */
    json_t *targets;
};

static void report_init(struct report *r, const char *job, bool json, const char *const line[2])
{
    r->job = job;
    r->json = json;
    r->verb = line != NULL ? line[0] : "";
    r->joiner = line != NULL ? line[1] : "";
    r->targets = json ? json_array() : NULL;
}

/* An ej_console_touched_fn: one line per node the operation changed. */
static void report_touched(const char *target, void *user)
{
    struct report *r = user;
    if (r->json) {
        json_array_append_new(r->targets, json_string(target));
        return;
    }
    printf("%s %s %s%s\n", r->verb, r->job, r->joiner, target);
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

/* Connect, run op over the console library, print its report or error. */
typedef int (*op_fn)(ej_console *con, const struct op_args *a, struct report *r, char *err,
                     size_t errlen);

static int run_op(const char *cmd, const struct op_args *a, op_fn op, const char *const line[2])
{
    ej_registry *reg;
    ej_console *con;
    int rc = ejcli_console(cmd, &a->c, &reg, &con);
    if (rc != 0)
        return rc;
    struct report r;
    report_init(&r, a->job, a->c.json, line);
    char err[1024] = "";
    int e = op(con, a, &r, err, sizeof err);
    if (e != 0)
        rc = ejcli_fail(cmd, "%s", err[0] != '\0' ? err : ej_strerror(e));
    else
        report_finish(&r, ej_registry_namespace(reg), cmd);
    json_decref(r.targets);
    ej_console_destroy(con);
    ej_registry_destroy(reg);
    return rc;
}

static int do_trigger(ej_console *con, const struct op_args *a, struct report *r, char *err,
                      size_t errlen)
{
    struct ej_console_select sel = {a->instance, a->server};
    return ej_console_trigger(con, a->job, &sel, report_touched, r, err, errlen);
}

static int do_shutdown(ej_console *con, const struct op_args *a, struct report *r, char *err,
                       size_t errlen)
{
    struct ej_console_select sel = {a->instance, a->server};
    return ej_console_shutdown(con, a->job, &sel, report_touched, r, err, errlen);
}

/* How long `ejob start` waits for an instance to register again: the
 * daemon first drains what the stopped job still runs. */
#define START_WAIT_MS 30000

static void collect_id(const char *target, void *user)
{
    json_array_append_new(user, json_string(target));
}

/* Wait for instance inst of job to register again. 0 when back. */
static int wait_back(ej_registry *reg, const char *job, const char *inst, char *err,
                     size_t errlen)
{
    char path[EJ_REG_MAX_PATH_LEN + 1];
    ej_layout_path(path, sizeof path, job, EJ_LAYOUT_NODE_INSTANCE, 0, inst);
    bool back = false;
    for (int waited = 0; !back; waited += 100) {
        int rc = ej_registry_exists(reg, path, &back, NULL);
        if (rc != 0) {
            snprintf(err, errlen, "%s", ej_registry_errmsg(reg));
            return rc;
        }
        if (!back && waited >= START_WAIT_MS) {
            snprintf(err, errlen,
                     "instance %s of %s was asked to start again and has not registered within "
                     "%d s (see its daemon's log)",
                     inst, job, START_WAIT_MS / 1000);
            return EJ_ETIMEDOUT;
        }
        if (!back)
            ej__sleep_ms(100);
    }
    return 0;
}

/* Ask, then wait for each instance's node to be back. */
static int do_start(ej_console *con, const struct op_args *a, struct report *r, char *err,
                    size_t errlen)
{
    struct ej_console_select sel = {a->instance, a->server};
    json_t *asked = json_array();
    int rc = ej_console_restart(con, a->job, &sel, collect_id, asked, err, errlen);
    size_t i;
    json_t *id;
    json_array_foreach(asked, i, id)
    {
        if (rc != 0)
            break;
        rc = wait_back(ej_console_registry(con), a->job, json_string_value(id), err, errlen);
        if (rc == 0)
            report_touched(json_string_value(id), r);
    }
    json_decref(asked);
    return rc;
}

static int do_disable(ej_console *con, const struct op_args *a, struct report *r, char *err,
                      size_t errlen)
{
    return ej_console_server_set_disabled(con, a->job, a->server, true, report_touched, r, err,
                                          errlen);
}

static int do_enable(ej_console *con, const struct op_args *a, struct report *r, char *err,
                     size_t errlen)
{
    return ej_console_server_set_disabled(con, a->job, a->server, false, report_touched, r, err,
                                          errlen);
}

static int do_item(ej_console *con, const struct op_args *a, struct report *r, char *err,
                   size_t errlen, bool disable)
{
    bool changed = false;
    int rc =
        ej_console_item_set_disabled(con, a->job, (int)a->item, disable, &changed, err, errlen);
    if (rc != 0)
        return rc;
    if (r->json)
        json_array_append_new(r->targets, json_string(a->item_text));
    else if (!changed && !disable)
        printf("item %ld of %s was not disabled\n", a->item, a->job);
    else
        printf("%s item %ld of %s\n", disable ? "disabled" : "enabled", a->item, a->job);
    return 0;
}

static int do_disable_item(ej_console *con, const struct op_args *a, struct report *r, char *err,
                           size_t errlen)
{
    return do_item(con, a, r, err, errlen, true);
}

static int do_enable_item(ej_console *con, const struct op_args *a, struct report *r, char *err,
                          size_t errlen)
{
    return do_item(con, a, r, err, errlen, false);
}

static int do_remove(ej_console *con, const struct op_args *a, struct report *r, char *err,
                     size_t errlen)
{
    int rc = ej_console_remove(con, a->job, err, errlen);
    if (rc != 0)
        return rc;
    if (r->json)
        json_array_append_new(r->targets, json_string(a->job));
    else
        printf("removed job %s from namespace %s\n", a->job,
               ej_registry_namespace(ej_console_registry(con)));
    return 0;
}

int ejcli_op_trigger(int argc, char **argv)
{
    struct op_args a;
    int rc = parse_op("trigger", argc, argv, &a, true, false, false);
    return rc != 0 ? rc
                   : run_op("trigger", &a, do_trigger, (const char *const[]){"triggered", "on "});
}

int ejcli_op_shutdown(int argc, char **argv)
{
    struct op_args a;
    int rc = parse_op("shutdown", argc, argv, &a, true, false, false);
    return rc != 0 ? rc
                   : run_op("shutdown", &a, do_shutdown,
                            (const char *const[]){"shut down", "instance "});
}

int ejcli_op_start(int argc, char **argv)
{
    struct op_args a;
    int rc = parse_op("start", argc, argv, &a, true, false, false);
    return rc != 0 ? rc
                   : run_op("start", &a, do_start, (const char *const[]){"started", "instance "});
}

int ejcli_op_server(int argc, char **argv, bool disable)
{
    const char *cmd = disable ? "disable" : "enable";
    struct op_args a;
    int rc = parse_op(cmd, argc, argv, &a, false, true, false);
    if (rc != 0)
        return rc;
    const char *const line[] = {disable ? "disabled" : "enabled", "on server "};
    return run_op(cmd, &a, disable ? do_disable : do_enable, line);
}

int ejcli_op_item(int argc, char **argv, bool disable)
{
    const char *cmd = disable ? "disable-item" : "enable-item";
    struct op_args a;
    int rc = parse_op(cmd, argc, argv, &a, false, false, true);
    return rc != 0 ? rc : run_op(cmd, &a, disable ? do_disable_item : do_enable_item, NULL);
}

int ejcli_op_remove(int argc, char **argv)
{
    struct op_args a;
    int rc = parse_op("remove", argc, argv, &a, false, false, false);
    return rc != 0 ? rc : run_op("remove", &a, do_remove, NULL);
}
