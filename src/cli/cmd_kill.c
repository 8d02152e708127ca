/* `ejob kill`: stop running items of a job on whichever host runs them, through
 * a request in ZooKeeper (ej_console_kill; src/runtime/kill.c acts on it). */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <jansson.h>

#include "cli/cli.h"
#include "cli/cli_util.h"
#include "ejob/console.h"
#include "ejob/error.h"

static const char kill_usage[] =
    "Usage: ejob kill JOB [--item N | --instance ID | --server IP] [--json] [registry options]\n"
    "\n"
    "Stop the job's items running now: every ejob instance of the job sees the\n"
    "request (written under /NAMESPACE/JOB/kills) and kills its matching items:\n"
    "a script's process group gets SIGTERM, then SIGKILL after\n"
    "timeoutGraceSeconds (default 2 s); an HTTP transfer is aborted; a C job\n"
    "gets its cancel flag. Each run is recorded as killed, by the user who asked.\n"
    "Runs that start after the request are not affected.\n"
    "\n"
    "  --item N        only item N, wherever it runs\n"
    "  --instance ID   only the items of this instance (e.g. 10.0.0.7@-@4123)\n"
    "  --server IP     only the items of the instances of this server\n"
    "\n" EJCLI_COMMON_HELP "\n"
    "Example:\n"
    "  $ ejob kill demoJob --item 2\n"
    "  kill request kill-0000000003 for demoJob item 2 by alice@ops1\n"
    "\n"
    "Exit codes: 0 requested, 1 no such job / registry error, 2 usage error.\n";

static int run_kill(int argc, char **argv)
{
    struct ejcli_common c;
    ejcli_common_init(&c);
    long item = -1;
    const char *instance = NULL, *server = NULL;
    struct ejcli_flag flags[] = {EJCLI_COMMON_FLAGS(&c),
                                 {"item", 0, EJCLI_INT, &item},
                                 {"instance", 0, EJCLI_STR, &instance},
                                 {"server", 0, EJCLI_STR, &server},
                                 EJCLI_FLAGS_END};
    char *pos[1];
    int npos = 0;
    int rc = ejcli_parse("kill", argc, argv, flags, pos, 1, &npos);
    if (rc != 0)
        return rc;
    if (npos < 1)
        return ej_cli_usage_error("kill", "expected a job name");
    if ((rc = ejcli_check_job_name("kill", pos[0])) != 0)
        return rc;
    if (item < -1 || item > EJ_CONFIG_MAX_SHARDING_TOTAL_COUNT)
        return ej_cli_usage_error("kill", "--item must be a number >= 0, got %ld", item);
    if (instance != NULL && server != NULL)
        return ej_cli_usage_error("kill", "give --instance or --server, not both");
    if ((instance && !ej_layout_is_segment(instance)) ||
        (server && !ej_layout_is_segment(server)))
        return ej_cli_usage_error("kill", "bad instance id or server");
    ej_registry *reg;
    ej_console *con;
    if ((rc = ejcli_console("kill", &c, &reg, &con)) != 0)
        return rc;
    char host[64] = "";
    gethostname(host, sizeof host - 1);
    const char *user = getenv("USER") ? getenv("USER") : getlogin();
    char by[128];
    snprintf(by, sizeof by, "%s@%s", user ? user : "uid", host);
    struct ej_console_select sel = {instance, server};
    char err[1024] = "";
    char *node = NULL;
    int e = ej_console_kill(con, pos[0], &sel, (int)item, by, &node, err, sizeof err);
    if (e != 0) {
        rc = ejcli_fail("kill", "%s", err[0] ? err : ej_strerror(e));
    } else if (c.json) {
        json_t *o = json_pack("{s:s, s:s, s:s, s:i, s:s?, s:s?, s:s}", "jobName", pos[0],
                              "namespace", ej_registry_namespace(reg), "request", node, "item",
                              (int)item, "instance", instance, "server", server, "by", by);
        char *s = o ? json_dumps(o, JSON_INDENT(2) | JSON_PRESERVE_ORDER) : NULL;
        if (s)
            puts(s);
        free(s);
        json_decref(o);
    } else {
        printf("kill request %s for %s", node, pos[0]);
        if (item >= 0)
            printf(" item %ld", item);
        if (instance || server)
            printf(" on %s", instance ? instance : server);
        printf(" by %s\n", by);
    }
    free(node);
    ej_console_destroy(con);
    ej_registry_destroy(reg);
    return rc;
}

EJ_CLI_COMMAND(kill, "kill", "stop running items of a job (recorded as killed)", kill_usage,
               run_kill)
