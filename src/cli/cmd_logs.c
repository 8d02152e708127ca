/* `ejob logs`: a run's output, followed live while it runs. */
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "common/util.h"
#include "ejob/error.h"
#include "ejob/trace.h"
#include "cli/cli.h"
#include "cli/cli_util.h"
#include "cli/history_store.h"

#define CMD "logs"
/* How often a follower asks the store (the daemon stores output at most
 * 250 ms after the item wrote it). */
#define FOLLOW_POLL_MS 200

static const char usage[] =
    "Usage: ejob logs JOB [--item N] [-f] [-c FILE | --store STORE] [--state-dir DIR]\n"
    "       ejob logs EXECUTION_ID [-f] [-c FILE | --store STORE] [--state-dir DIR]\n"
    "\n"
    "Print the output of a run: the newest run of JOB (of its item N with\n"
    "--item), or the run EXECUTION_ID (or a unique prefix of it, at least 8\n"
    "characters, as `ejob history` prints it). Its stdout goes to stdout and\n"
    "its stderr to stderr, byte for byte.\n"
    "\n"
    "While the run goes on, the daemon that runs it stores its output every\n"
    "250 ms (ejob's EJOB_EXECUTION_OUTPUT table, up to the output cap), so\n"
    "any host that reads the history store sees it.\n"
    "\n"
    "  -f, --follow      keep printing what the run writes until it ends (JOB:\n"
    "                    waits for a first run when it has none yet)\n"
    "  --item N          JOB's newest run of shard item N\n"
    "\n"
    "Where the history is: as for `ejob history` (--store STORE, -c FILE: the\n"
    "daemon file's tracing section, else STATE_DIR/history.db).\n"
    "\n"
    "Exit codes: 0 printed (with -f: the run ended), 1 the store cannot be\n"
    "read or no such run, 2 usage error.\n";

static volatile sig_atomic_t interrupted;

static void on_signal(int sig)
{
    (void)sig;
    interrupted = 1;
}

/* An execution id or a prefix of one: hex digits and dashes, 8 or more. */
static bool looks_like_id(const char *s)
{
    size_t n = strlen(s);
    if (n < 8 || n > EJ_EVENT_ID_LEN - 1)
        return false;
    return strspn(s, "0123456789abcdef-") == n;
}

/* The full id of the run arg names (an id, else JOB's newest run), into
 * id. Returns 0, EJ_ENOTFOUND (no run, yet), or the exit code of a failure
 * (printed). */
static int find_run(ej_trace_reader *r, const char *arg, long item, char id[EJ_EVENT_ID_LEN])
{
    if (looks_like_id(arg)) {
        struct ej_trace_execution_detail d;
        int rc = ej_trace_get_execution(r, arg, &d);
        if (rc == 0) {
            snprintf(id, EJ_EVENT_ID_LEN, "%s", d.execution.id);
            ej_trace_execution_detail_fini(&d);
            return 0;
        }
        if (rc != EJ_ENOTFOUND)
            return ejcli_fail(CMD, "%s", ej_trace_reader_errmsg(r));
    }
    struct ej_trace_query q = {.job_name = arg, .item = (int)item, .limit = 1};
    struct ej_trace_execution_list l;
    if (ej_trace_query_executions(r, &q, &l) != 0)
        return ejcli_fail(CMD, "query failed: %s", ej_trace_reader_errmsg(r));
    int rc = EJ_ENOTFOUND;
    if (l.count > 0) {
        snprintf(id, EJ_EVENT_ID_LEN, "%s", l.rows[0].id);
        rc = 0;
    }
    ej_trace_execution_list_fini(&l);
    return rc;
}

/* Prints what run id wrote from *out_at / *err_at and moves them on.
 * Returns 0 and *done once the run has ended, else the exit code. */
static int print_more(ej_trace_reader *r, const char *id, int64_t *out_at, int64_t *err_at,
                      bool *done)
{
    struct ej_trace_output o;
    if (ej_trace_read_output(r, id, *out_at, *err_at, &o) != 0)
        return ejcli_fail(CMD, "%s", ej_trace_reader_errmsg(r));
    if (o.out_len > 0 && fwrite(o.out, 1, o.out_len, stdout) != o.out_len) {
        ej_trace_output_fini(&o);
        return 1; /* stdout closed (a pager quit) */
    }
    fflush(stdout);
    if (o.err_len > 0)
        fwrite(o.err, 1, o.err_len, stderr);
    fflush(stderr);
    *out_at = o.out_next;
    *err_at = o.err_next;
    *done = o.completed;
    ej_trace_output_fini(&o);
    return 0;
}

static int logs(ej_trace_reader *r, const char *arg, long item, bool follow)
{
    char id[EJ_EVENT_ID_LEN];
    int rc;
    while ((rc = find_run(r, arg, item, id)) == EJ_ENOTFOUND && follow && !interrupted)
        ej__sleep_ms(FOLLOW_POLL_MS);
    if (rc == EJ_ENOTFOUND)
        return interrupted ? 1 : ejcli_fail(CMD, "no run of %s in the history", arg);
    if (rc != 0)
        return rc;
    int64_t out_at = 0, err_at = 0;
    bool done = false;
    for (;;) {
        if ((rc = print_more(r, id, &out_at, &err_at, &done)) != 0)
            return rc;
        if (done || !follow || interrupted)
            return EJ_EXIT_OK;
        ej__sleep_ms(FOLLOW_POLL_MS);
    }
}

static int run_logs(int argc, char **argv)
{
    struct ejcli_store_args a = {NULL, NULL, NULL};
    long item = -1;
    bool follow = false;
    struct ejcli_flag flags[] = {
        {"store", 0, EJCLI_STR, &a.store},         {"config", 'c', EJCLI_STR, &a.config},
        {"state-dir", 0, EJCLI_STR, &a.state_dir}, {"item", 0, EJCLI_INT, &item},
        {"follow", 'f', EJCLI_BOOL, &follow},      EJCLI_FLAGS_END};
    char *pos[1];
    int npos = 0;
    int rc = ejcli_parse(CMD, argc, argv, flags, pos, 1, &npos);
    if (rc != 0)
        return rc;
    if (npos != 1)
        return ej_cli_usage_error(CMD, "give a JOB or an EXECUTION_ID");
    if (a.store != NULL && a.config != NULL)
        return ej_cli_usage_error(CMD, "give --store or -c, not both");
    if (item < -1 || item > 1000000)
        return ej_cli_usage_error(CMD, "--item must be 0..1000000");
    if (!looks_like_id(pos[0]) && ejcli_check_job_name(CMD, pos[0]) != 0)
        return EJ_EXIT_USAGE;
    ej_trace_reader *r = NULL;
    if ((rc = ejcli_history_open(CMD, &a, &r)) != 0)
        return rc;
    struct sigaction sa = {.sa_handler = on_signal};
    sigaction(SIGINT, &sa, NULL);
    sigaction(SIGTERM, &sa, NULL);
    rc = logs(r, pos[0], item, follow);
    ej_trace_reader_close(r);
    return rc;
}

EJ_CLI_COMMAND(logs, CMD, "print a run's output, following it live while it runs (-f)", usage,
               run_logs)
