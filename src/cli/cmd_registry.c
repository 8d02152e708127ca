/* `ejob registry status|stop`: the embedded ZooKeeper of `ejob run`. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <jansson.h>

#include "ejob/error.h"
#include "cli/cli.h"
#include "cli/cli_util.h"
#include "cli/embedded.h"

#define CMD "registry"

static const char usage[] =
    "Usage: ejob registry status [-c FILE | --state-dir DIR] [--json]\n"
    "       ejob registry stop [-c FILE | --state-dir DIR] [--force]\n"
    "\n"
    "The embedded registry is the private ZooKeeper server `ejob run` starts when\n"
    "its file says `serverLists: embedded` (or has no serverLists). Every daemon\n"
    "using the same state directory shares it: the first starts it, the others\n"
    "join; it keeps running when a daemon crashes and stops when the last daemon\n"
    "using it exits.\n"
    "\n"
    "status  prints its address, its pids and the daemons using it. Exit code 0\n"
    "        when it is running, 1 when it is not (or stale: its address file is\n"
    "        there but the server does not answer).\n"
    "stop    stops it by its recorded pid and removes its state files. Refused\n"
    "        while daemons use it, unless --force.\n"
    "\n"
    "  -c, --config FILE the registry of the daemon that runs this file: for a\n"
    "                    file in /etc/ejob, the state directory its systemd unit\n"
    "                    gives it (/var/lib/ejob for ejob.yaml, /var/lib/ejob/NAME\n"
    "                    for NAME.yaml) when that exists\n"
    "  --state-dir DIR   the state directory (env EJOB_STATE_DIR, else\n"
    "                    $XDG_RUNTIME_DIR/ejob, else /tmp/ejob-$UID)\n"
    "\n"
    "Example:\n"
    "  $ ejob registry status\n"
    "  embedded registry: running at 127.0.0.1:42113\n"
    "  state directory:   /run/user/1000/ejob\n"
    "  server pid:        81234\n"
    "  supervisor pid:    81230\n"
    "  daemons using it:  2 (pids 81201 81260)\n"
    "\n"
    "Exit codes: 0 done / running, 1 failed / not running, 2 usage error.\n";

static int status(const char *dir, bool json)
{
    struct ejcli_embedded_status st;
    int err = ejcli_embedded_status(dir, &st);
    if (err != 0 && !json) {
        printf("embedded registry: not running (no state directory %s)\n", dir);
        return EJ_EXIT_FAILED;
    }
    const char *state = st.running ? "running" : st.stale ? "stale" : "not running";
    size_t listed = st.user_count < 64 ? st.user_count : 64;
    if (json) {
        json_t *o = json_object();
        json_object_set_new(o, "state", json_string(state));
        json_object_set_new(o, "stateDir", json_string(dir));
        json_object_set_new(o, "address", st.address[0] ? json_string(st.address) : json_null());
        json_object_set_new(o, "serverPid",
                            st.server_pid ? json_integer(st.server_pid) : json_null());
        json_object_set_new(o, "supervisorPid",
                            st.supervisor_pid ? json_integer(st.supervisor_pid) : json_null());
        json_t *users = json_array();
        for (size_t i = 0; i < listed; i++)
            json_array_append_new(users, json_integer(st.users[i]));
        json_object_set_new(o, "daemonPids", users);
        char *s = json_dumps(o, JSON_INDENT(2) | JSON_PRESERVE_ORDER);
        if (s != NULL)
            printf("%s\n", s);
        free(s);
        json_decref(o);
    } else {
        printf("embedded registry: %s", state);
        if (st.address[0] != '\0')
            printf(" at %s", st.address);
        printf("\nstate directory:   %s\n", dir);
        if (st.server_pid)
            printf("server pid:        %d\n", (int)st.server_pid);
        if (st.supervisor_pid)
            printf("supervisor pid:    %d\n", (int)st.supervisor_pid);
        printf("daemons using it:  %zu", st.user_count);
        if (listed > 0) {
            printf(" (pids");
            for (size_t i = 0; i < listed; i++)
                printf(" %d", (int)st.users[i]);
            printf(")");
        }
        printf("\n");
        if (st.stale)
            printf("the address file is there but the server does not answer; the next\n"
                   "`ejob run` replaces it, `ejob registry stop` cleans it up\n");
    }
    return st.running ? EJ_EXIT_OK : EJ_EXIT_FAILED;
}

static int run_registry(int argc, char **argv)
{
    const char *state_dir = NULL, *config = NULL;
    bool json = false, force = false;
    long ready_fd = -1;
    struct ejcli_flag flags[] = {
        {"state-dir", 0, EJCLI_STR, &state_dir}, {"config", 'c', EJCLI_STR, &config},
        {"json", 0, EJCLI_BOOL, &json},          {"force", 0, EJCLI_BOOL, &force},
        {"ready-fd", 0, EJCLI_INT, &ready_fd},   EJCLI_FLAGS_END};
    char *pos[1];
    int npos;
    int rc = ejcli_parse(CMD, argc, argv, flags, pos, 1, &npos);
    if (rc != 0)
        return rc;
    if (npos != 1)
        return ej_cli_usage_error(CMD, "expected status or stop");
    char *dir = ejcli_daemon_state_dir(state_dir, config);
    if (dir == NULL)
        return ejcli_fail(CMD, "out of memory");
    if (strcmp(pos[0], "status") == 0) {
        rc = status(dir, json);
    } else if (strcmp(pos[0], "stop") == 0) {
        char err[512] = "";
        int e = ejcli_embedded_stop(dir, force, err, sizeof(err));
        if (e != 0)
            rc = ejcli_fail(CMD, "%s", err[0] ? err : ej_strerror(e));
        else
            printf("embedded registry of %s stopped\n", dir);
    } else if (strcmp(pos[0], "supervise") == 0) {
        /* Internal: the process `ejob run` starts to own the server. */
        rc = ejcli_embedded_supervise(dir, (int)ready_fd);
    } else {
        rc = ej_cli_usage_error(CMD, "unknown action \"%s\" (expected status or stop)", pos[0]);
    }
    free(dir);
    return rc;
}

EJ_CLI_COMMAND(registry, CMD, "show or stop the embedded ZooKeeper of `ejob run`", usage,
               run_registry)
