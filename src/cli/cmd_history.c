/* `ejob history`: what ran where, read from the history store. */
#include <ctype.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include <jansson.h>

#include "config/daemon_file.h"
#include "ejob/config.h"
#include "ejob/error.h"
#include "ejob/trace.h"
#include "cli/cli.h"
#include "cli/cli_util.h"
#include "cli/history_store.h"
#include "cli/embedded.h"
#include "trace/json.h"

#define CMD "history"

static const char usage[] =
    "Usage: ejob history [JOB] [--since 2h|TIME] [--until 2h|TIME] [--failed]\n"
    "                    [--item N] [--instance IP@-@PID] [--limit N] [--json]\n"
    "                    [-c FILE | --store STORE] [--state-dir DIR]\n"
    "       ejob history show EXECUTION_ID [--json] [-c FILE | --store STORE]\n"
    "\n"
    "Show the item runs the daemons recorded (ElasticJob's JOB_EXECUTION_LOG,\n"
    "with ejob's output and exit codes), newest first:\n"
    "\n"
    "  TIME                     JOB      ITEM  INSTANCE            SOURCE          RESULT  "
    "DURATION  ID\n"
    "  2026-01-01 10:00:02.004  demoJob  3     127.0.0.12@-@4242   FAILOVER        ok      "
    "812ms     5f0c2a1e\n"
    "\n"
    "`history show ID` prints one run (ID or a unique prefix of it): its row,\n"
    "the status changes of its fire (JOB_STATUS_TRACE_LOG) and its captured\n"
    "stdout and stderr (or HTTP response body). Bytes that are not printable\n"
    "UTF-8 are shown as \\xNN.\n"
    "\n"
    "  --since D|TIME    runs started at or after: a duration back from now\n"
    "                    (90s, 30m, 2h, 7d) or a local time (2026-01-01,\n"
    "                    \"2026-01-01 10:00\", 2026-01-01T10:00:00)\n"
    "  --until D|TIME    runs started before\n"
    "  --failed          only runs that ended in failure\n"
    "  --item N          only shard item N\n"
    "  --instance ID     only runs of this instance (IP@-@PID)\n"
    "  --limit N         at most N rows (default 50)\n"
    "  --json            JSON instead of a table\n"
    "\n"
    "Where the history is (the first that applies):\n"
    "  --store STORE     sqlite:PATH, a file path, postgresql://USER@HOST/DB or\n"
    "                    'host=HOST user=USER dbname=DB' (libpq's keyword form)\n"
    "                    (the password from EJOB_TRACING_PASSWORD, PGPASSWORD or\n"
    "                    ~/.pgpass, never on the command line)\n"
    "  -c, --config FILE the daemon file: its tracing section, as `ejob run`\n"
    "                    reads it (passwordFile included)\n"
    "  otherwise         STATE_DIR/history.db, the default of a local `ejob run`\n"
    "      --state-dir DIR  (env EJOB_STATE_DIR; else for -c /etc/ejob/NAME.yaml the\n"
    "                    unit's /var/lib/ejob[/NAME] when it exists; else\n"
    "                    $XDG_RUNTIME_DIR/ejob, else /tmp/ejob-$UID)\n"
    "\n"
    "Times are local, as ElasticJob writes them. A run the instance did not\n"
    "finish (it died, or is still running) shows RESULT \"unfinished\".\n"
    "\n"
    "Exit codes: 0 shown (also when nothing matched), 1 the store cannot be\n"
    "read or the run is not found, 2 usage error.\n";

/* ------------------------------------------------------------- output */

static void format_local(int64_t ms, char *out, size_t len)
{
    if (ms <= 0) {
        snprintf(out, len, "-");
        return;
    }
    time_t t = (time_t)(ms / 1000);
    struct tm tm;
    localtime_r(&t, &tm);
    size_t n = strftime(out, len, "%Y-%m-%d %H:%M:%S", &tm);
    snprintf(out + n, len - n, ".%03d", (int)(ms % 1000));
}

static void format_duration(int64_t ms, char *out, size_t len)
{
    if (ms < 0)
        snprintf(out, len, "-");
    else if (ms < 10000)
        snprintf(out, len, "%lldms", (long long)ms);
    else if (ms < 600000)
        snprintf(out, len, "%.1fs", (double)ms / 1000);
    else
        snprintf(out, len, "%lldm%02llds", (long long)(ms / 60000), (long long)(ms / 1000 % 60));
}

static void format_result(const struct ej_trace_execution *e, char *out, size_t len)
{
    if (!e->completed) {
        snprintf(out, len, "unfinished");
    } else if (e->is_success) {
        snprintf(out, len, "ok");
    } else if (e->result != NULL && strcmp(e->result, "timeout") == 0) {
        snprintf(out, len, "TIMEOUT");
    } else if (e->result != NULL && strcmp(e->result, "killed") == 0) {
        snprintf(out, len, "KILLED%s%s", e->killed_by ? " by " : "",
                 e->killed_by ? e->killed_by : "");
    } else if (e->has_detail && e->term_signal > 0) {
        snprintf(out, len, "FAILED signal %d", e->term_signal);
    } else if (e->has_detail && e->exit_code > 0) {
        snprintf(out, len, "FAILED exit %d", e->exit_code);
    } else if (e->has_detail && e->http_status > 0) {
        snprintf(out, len, "FAILED http %ld", e->http_status);
    } else {
        snprintf(out, len, "FAILED");
    }
}

static void print_json(json_t *v)
{
    char *s = json_dumps(v, JSON_INDENT(2) | JSON_PRESERVE_ORDER);
    if (s != NULL)
        puts(s);
    free(s);
    json_decref(v);
}

/* --------------------------------------------------------------- list */

static int list(ej_trace_reader *r, const struct ej_trace_query *q, bool as_json)
{
    struct ej_trace_execution_list l;
    int rc = ej_trace_query_executions(r, q, &l);
    if (rc != 0)
        return ejcli_fail(CMD, "query failed: %s", ej_trace_reader_errmsg(r));
    if (as_json) {
        json_t *arr = json_array();
        for (size_t i = 0; i < l.count; i++)
            json_array_append_new(arr, ej__trace_execution_json(&l.rows[i]));
        print_json(arr);
        ej_trace_execution_list_fini(&l);
        return EJ_EXIT_OK;
    }
    static const char *const headers[] = {"TIME",   "JOB",    "ITEM",     "INSTANCE",
                                          "SOURCE", "RESULT", "DURATION", "ID"};
    ejcli_table *t = ejcli_table_new(8, headers);
    /* Newest first, as the query gives them and --json prints them. */
    for (size_t k = 0; k < l.count; k++) {
        const struct ej_trace_execution *e = &l.rows[k];
        char when[40], item[16], result[48], dur[32], id[9];
        format_local(e->start_ms, when, sizeof when);
        snprintf(item, sizeof item, "%d", e->sharding_item);
        format_result(e, result, sizeof result);
        format_duration(e->completed ? e->duration_ms : -1, dur, sizeof dur);
        snprintf(id, sizeof id, "%.8s", e->id);
        const char *cells[8] = {when,
                                e->job_name,
                                item,
                                e->instance_id[0] ? e->instance_id : e->ip,
                                e->execution_source,
                                result,
                                dur,
                                id};
        ejcli_table_row(t, cells);
    }
    if (l.count > 0)
        ejcli_table_print(t, stdout);
    else
        fprintf(stderr, "no runs match\n");
    ejcli_table_free(t);
    ej_trace_execution_list_fini(&l);
    return EJ_EXIT_OK;
}

/* --------------------------------------------------------------- show */

static void show_stream(const char *name, const unsigned char *p, size_t n, bool truncated)
{
    if (p == NULL && !truncated)
        return;
    printf("%s (%zu bytes%s):\n", name, n, truncated ? ", cut at the cap" : "");
    ej__trace_print_bytes(stdout, p ? p : (const unsigned char *)"", n, "  ");
}

static void show_text(const struct ej_trace_execution_detail *d)
{
    const struct ej_trace_execution *e = &d->execution;
    char when[40], end[40], result[48], dur[32];
    format_local(e->start_ms, when, sizeof when);
    format_local(e->completed ? e->complete_ms : 0, end, sizeof end);
    format_result(e, result, sizeof result);
    format_duration(e->completed ? e->duration_ms : -1, dur, sizeof dur);
    printf("Execution  %s\n", e->id);
    printf("Job        %s, item %d\n", e->job_name, e->sharding_item);
    printf("Task       %s\n", e->task_id);
    printf("Instance   %s (host %s, ip %s)\n", e->instance_id[0] ? e->instance_id : "-",
           e->hostname, e->ip);
    printf("Source     %s\n", e->execution_source);
    printf("Started    %s\n", when);
    printf("Ended      %s (%s)\n", end, dur);
    printf("Result     %s\n", result);
    if (e->has_detail) {
        if (e->exit_code >= 0 || e->term_signal > 0)
            printf("Exit       code %d%s%.0d\n", e->exit_code, e->term_signal ? ", signal " : "",
                   e->term_signal);
        if (e->http_status > 0)
            printf("HTTP       status %ld\n", e->http_status);
        if (e->fencing_token)
            printf("Fencing    token %lld\n", (long long)e->fencing_token);
    }
    if (e->failure_cause != NULL) {
        printf("Failure%s:\n", e->failure_cause_truncated ? " (cut at 4000 characters)" : "");
        ej__trace_print_bytes(stdout, (const unsigned char *)e->failure_cause,
                              strlen(e->failure_cause), "  ");
    }
    printf("Status trail (%zu):\n", d->trail_count);
    for (size_t i = 0; i < d->trail_count; i++) {
        const struct ej_trace_status *s = &d->trail[i];
        char at[40];
        format_local(s->creation_ms, at, sizeof at);
        printf("  %s  %-13s  %-10s %s", at, s->state, s->sharding_item, s->slave_id);
        if (s->message != NULL && s->message[0] != '\0') {
            /* Multi-line messages (TASK_ERROR's causes) indented below. */
            fputs("  ", stdout);
            ej__trace_print_bytes(stdout, (const unsigned char *)s->message, strlen(s->message),
                                  "");
        } else {
            fputc('\n', stdout);
        }
    }
    show_stream("stdout", e->out, e->out_len, e->out_truncated);
    show_stream("stderr", e->err, e->err_len, e->err_truncated);
}

static int show(ej_trace_reader *r, const char *id, bool as_json)
{
    struct ej_trace_execution_detail d;
    int rc = ej_trace_get_execution(r, id, &d);
    if (rc != 0)
        return ejcli_fail(CMD, "%s", ej_trace_reader_errmsg(r));
    if (!as_json) {
        show_text(&d);
    } else {
        print_json(ej__trace_detail_json(&d));
    }
    ej_trace_execution_detail_fini(&d);
    return EJ_EXIT_OK;
}

/* ---------------------------------------------------------------- main */

static int run_history(int argc, char **argv)
{
    struct ejcli_store_args a = {NULL, NULL, NULL};
    struct ejcli_window w = {.since = NULL, .until = NULL, .item = -1, .limit = 50};
    const char *instance = NULL;
    bool failed = false, as_json = false;
    struct ejcli_flag flags[] = {{"store", 0, EJCLI_STR, &a.store},
                                 {"config", 'c', EJCLI_STR, &a.config},
                                 {"state-dir", 0, EJCLI_STR, &a.state_dir},
                                 {"since", 0, EJCLI_STR, &w.since},
                                 {"until", 0, EJCLI_STR, &w.until},
                                 {"failed", 0, EJCLI_BOOL, &failed},
                                 {"item", 0, EJCLI_INT, &w.item},
                                 {"instance", 0, EJCLI_STR, &instance},
                                 {"limit", 0, EJCLI_INT, &w.limit},
                                 {"json", 0, EJCLI_BOOL, &as_json},
                                 EJCLI_FLAGS_END};
    char *pos[2];
    int npos = 0;
    int rc = ejcli_parse(CMD, argc, argv, flags, pos, 2, &npos);
    if (rc != 0)
        return rc;
    bool showing = npos >= 1 && strcmp(pos[0], "show") == 0;
    if (showing && npos != 2)
        return ej_cli_usage_error(CMD, "show needs an EXECUTION_ID");
    if (!showing && npos > 1)
        return ej_cli_usage_error(CMD, "unexpected argument \"%s\"", pos[1]);
    if (a.store != NULL && a.config != NULL)
        return ej_cli_usage_error(CMD, "give --store or -c, not both");
    struct ej_trace_query q = {.item = -1};
    if (!showing) {
        if (npos == 1 && ejcli_check_job_name(CMD, pos[0]) != 0)
            return EJ_EXIT_USAGE;
        q.job_name = npos == 1 ? pos[0] : NULL;
        if ((rc = ejcli_window_check(CMD, &w, &q.since_ms, &q.until_ms)) != 0)
            return rc;
        q.item = (int)w.item;
        q.failed_only = failed;
        q.instance_id = instance;
        q.limit = (size_t)w.limit;
    }
    ej_trace_reader *r = NULL;
    if ((rc = ejcli_history_open(CMD, &a, &r)) != 0)
        return rc;
    rc = showing ? show(r, pos[1], as_json) : list(r, &q, as_json);
    ej_trace_reader_close(r);
    return rc;
}

EJ_CLI_COMMAND(history, CMD, "show what ran where, with its output (execution history)", usage,
               run_history)
