/* `ejob dump JOB`: ElasticJob's dump of a job's ZooKeeper subtree. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "ejob/config.h"
#include "ejob/console.h"
#include "ejob/error.h"
#include "ejob/monitor.h"
#include "cli/cli.h"
#include "cli/cli_util.h"

#define CMD "dump"

static const char usage[] =
    "Usage: ejob dump JOB [--host HOST] [--port PORT] [--zookeeper] [registry options]\n"
    "\n"
    "Print the job's ZooKeeper subtree in ElasticJob 2.1.5's dump format: one\n"
    "line per node below /JOB, depth first, children in reverse lexicographic\n"
    "order,\n"
    "  /JOB/path | value\n"
    "with IPv4 addresses masked as ip1, ip2, ... (so the text can be shared).\n"
    "A line with four fields (/JOB/path | value | cachePath | cacheValue) shows a\n"
    "node the answering instance's cache does not hold as ZooKeeper does.\n"
    "\n"
    "When the job's monitorPort is set (>= 0), the dump is asked from an\n"
    "instance's monitor port (what `echo dump | nc HOST PORT` does), trying\n"
    "127.0.0.1 and then each instance's IP; otherwise, or when no instance\n"
    "answers, it is computed from ZooKeeper directly (two fields per line).\n"
    "\n"
    "  --host HOST     ask the monitor port on this host only\n"
    "  --port PORT     the monitor port (default: the job's monitorPort)\n"
    "  --zookeeper     do not ask a monitor port; read ZooKeeper directly\n"
    "\n" EJCLI_COMMON_HELP "\n"
    "Example:\n"
    "  $ ejob dump demoJob\n"
    "  /demoJob/sharding | \n"
    "  /demoJob/sharding/1 | \n"
    "  /demoJob/sharding/1/instance | ip1@-@4242\n"
    "  ...\n"
    "  /demoJob/config | {\"jobName\":\"demoJob\",...}\n"
    "\n"
    "Exit codes: 0 printed, 1 no such job / registry error, 2 usage error.\n";

static int monitor_port_of(ej_console *con, const char *job)
{
    char *raw = NULL;
    int port = -1;
    if (ej_console_config_get(con, job, &raw, NULL, NULL, 0) != 0)
        return -1;
    struct ej_job_config cfg;
    if (ej_job_config_init(&cfg) == 0) {
        if (ej_job_config_from_json(raw, strlen(raw), &cfg, NULL, 0) == 0)
            port = cfg.monitor_port;
        ej_job_config_fini(&cfg);
    }
    free(raw);
    return port;
}

/* Ask the monitor port on host; prints the dump and returns true when it
 * answered with one. */
static bool try_monitor(const char *host, int port)
{
    char *reply = NULL;
    if (ej_monitor_query(host, port, "dump", 3000, &reply) != 0)
        return false;
    bool ok = reply[0] != '\0';
    if (ok)
        fputs(reply, stdout);
    free(reply);
    return ok;
}

static bool try_instances(ej_registry *reg, const char *job, int port)
{
    if (try_monitor("127.0.0.1", port))
        return true;
    char path[EJ_REG_MAX_PATH_LEN + 1];
    if (ej_layout_path(path, sizeof path, job, EJ_LAYOUT_NODE_INSTANCES, 0, NULL) < 0)
        return false;
    char **ids = NULL;
    size_t n = 0;
    if (ej_registry_children(reg, path, EJ_REG_SORT_DESC, &ids, &n) != 0)
        return false;
    bool ok = false;
    char tried[64][64];
    size_t ntried = 0;
    for (size_t i = 0; i < n && !ok; i++) {
        char ip[64];
        ej_layout_instance_ip(ids[i], ip, sizeof ip);
        if (ip[0] == '\0' || strlen(ip) + 1 >= sizeof ip)
            continue;
        bool seen = strcmp(ip, "127.0.0.1") == 0;
        for (size_t k = 0; k < ntried && !seen; k++)
            seen = strcmp(tried[k], ip) == 0;
        if (seen)
            continue;
        if (ntried < 64)
            snprintf(tried[ntried++], sizeof(tried[0]), "%s", ip);
        ok = try_monitor(ip, port);
    }
    ej_registry_free_names(ids);
    return ok;
}

static int run_dump(int argc, char **argv)
{
    struct ejcli_common c;
    ejcli_common_init(&c);
    const char *host = NULL;
    long port = -1;
    bool zookeeper = false;
    struct ejcli_flag flags[] = {EJCLI_COMMON_FLAGS(&c),
                                 {"host", 0, EJCLI_STR, &host},
                                 {"port", 0, EJCLI_INT, &port},
                                 {"zookeeper", 0, EJCLI_BOOL, &zookeeper},
                                 EJCLI_FLAGS_END};
    char *pos[1];
    int npos;
    int rc = ejcli_parse(CMD, argc, argv, flags, pos, 1, &npos);
    if (rc != 0)
        return rc;
    if (npos != 1)
        return ej_cli_usage_error(CMD, "expected a job name");
    if ((rc = ejcli_check_job_name(CMD, pos[0])) != 0)
        return rc;
    if (port != -1 && (port < 1 || port > 65535))
        return ej_cli_usage_error(CMD, "--port must be 1..65535");
    if (zookeeper && (host != NULL || port != -1))
        return ej_cli_usage_error(CMD, "--zookeeper excludes --host and --port");
    ej_registry *reg;
    ej_console *con;
    if ((rc = ejcli_console(CMD, &c, &reg, &con)) != 0)
        return rc;
    const char *job = pos[0];
    char why[1024] = "";
    bool exists = false;
    char jobpath[EJ_REG_MAX_PATH_LEN + 1];
    ej_layout_path(jobpath, sizeof jobpath, job, EJ_LAYOUT_NODE_JOB, 0, NULL);
    int e = ej_registry_exists(reg, jobpath, &exists, NULL);
    if (e != 0) {
        rc = ejcli_reg_fail(CMD, e, "cannot read the job");
        goto out;
    }
    if (!exists) {
        snprintf(why, sizeof why, "no job \"%s\" in namespace \"%s\"", job,
                 ej_registry_namespace(reg));
        rc = ejcli_console_fail(CMD, EJ_ENOTFOUND, why);
        goto out;
    }
    if (!zookeeper) {
        int p = port > 0 ? (int)port : monitor_port_of(con, job);
        if (p > 0) {
            bool ok = host != NULL ? try_monitor(host, p) : try_instances(reg, job, p);
            if (ok)
                goto out;
            fprintf(stderr,
                    "ejob dump: no monitor answered on port %d%s%s; computed from ZooKeeper\n", p,
                    host ? " of " : "", host ? host : "");
        }
    }
    char *text = NULL;
    int err = ej_monitor_dump(reg, NULL, job, &text);
    if (err != 0) {
        rc = ejcli_reg_fail(CMD, err, "cannot read the job's nodes");
        goto out;
    }
    fputs(text, stdout);
    free(text);
out:
    ej_console_destroy(con);
    ej_registry_destroy(reg);
    return rc;
}

EJ_CLI_COMMAND(dump, CMD, "print a job's ZooKeeper nodes (ElasticJob's dump format)", usage,
               run_dump)
