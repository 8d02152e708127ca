/* `ejob fires`: every fire time of a job and what became of each item
 * (the fire ledger, EJOB_FIRE_LEDGER). */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include <jansson.h>

#include "ejob/error.h"
#include "ejob/trace.h"
#include "cli/cli.h"
#include "cli/cli_util.h"
#include "cli/history_store.h"
#include "trace/json.h"

#define CMD "fires"
#define MAX_COLUMNS 256 /* items shown side by side; more: use --item */

static const char usage[] =
    "Usage: ejob fires [JOB] [--since 2h|TIME] [--until 2h|TIME] [--item N] [--gaps]\n"
    "                  [--limit N] [--json] [-c FILE | --store STORE] [--state-dir DIR]\n"
    "\n"
    "Show every fire time of a job and what became of each item (the fire\n"
    "ledger the daemons keep in the history store): one row per fire time, one\n"
    "column per item, the instance that ran it, or a code for why it did not\n"
    "run, spelled out under the table:\n"
    "\n"
    "  FIRE                 ITEM 0      ITEM 1      ITEM 2\n"
    "  2026-01-01 10:00:00  127.0.0.11  127.0.0.12  127.0.0.13\n"
    "  2026-01-01 10:00:02  127.0.0.11  -a          127.0.0.13!\n"
    "  2026-01-01 10:00:04  -b          -b          -b\n"
    "\n"
    "  -a  leader-wait: the leader did not reshard in time (127.0.0.12@-@4242)\n"
    "  -b  missed: no live instance owned the item ...\n"
    "\n"
    "After an instance: ! the run failed, ~ still running (or its instance died\n"
    "in it), ? its result is gone. A cell \"?\" alone: nobody ran or reported it.\n"
    "Runs off the schedule (a failover, a misfire re-run, a trigger) are rows of\n"
    "their own, at the time they started, marked FAILOVER, MISFIRE or TRIGGER.\n"
    "\n"
    "  --since D|TIME    fire times at or after: a duration back from now\n"
    "                    (90s, 30m, 2h, 7d) or a local time (2026-01-01,\n"
    "                    \"2026-01-01 10:00\"); default 2h\n"
    "  --until D|TIME    fire times before\n"
    "  --item N          only item N (and what was recorded for every item)\n"
    "  --gaps            only fire times where some item did not run\n"
    "  --limit N         at most N ledger rows, the newest (default 10000)\n"
    "  --json            the ledger rows as JSON (with --gaps: the rows not run)\n"
    "  --store STORE, -c FILE, --state-dir DIR\n"
    "                    where the history is, as for `ejob history`\n"
    "\n"
    "Exit codes: 0 shown (also when nothing matched), 1 the store cannot be\n"
    "read, 2 usage error.\n";

/* ------------------------------------------------------------- the grid */

/* One line of the table: a fire time (and kind), rows [from, to). */
struct line {
    size_t from, to;
};

/* A cron fire time's row: run or not on time (CRON), or caught up after
 * a takeover by a MISFIRE run (CATCHUP). */
static bool is_cron(const struct ej_trace_fire *f)
{
    return strcmp(f->kind, "CRON") == 0 || strcmp(f->kind, "CATCHUP") == 0;
}

static bool same_line(const struct ej_trace_fire *a, const struct ej_trace_fire *b)
{
    return a->fire_time_ms == b->fire_time_ms &&
           (is_cron(a) ? is_cron(b) : strcmp(a->kind, b->kind) == 0);
}

/* Not-run reasons in order of appearance: their letter is their index. */
struct legend {
    const char *reason[26];
    char who[26][200]; /* the instances that reported it, cut */
    size_t n;
};

static char legend_code(struct legend *lg, const struct ej_trace_fire *f)
{
    size_t i = 0;
    while (i < lg->n && strcmp(lg->reason[i], f->outcome) != 0)
        i++;
    if (i == lg->n) {
        if (lg->n == 26)
            return '*';
        lg->reason[lg->n++] = f->outcome;
    }
    if (f->instance_id[0] && !strstr(lg->who[i], f->instance_id)) {
        size_t used = strlen(lg->who[i]);
        if (used + strlen(f->instance_id) + 3 < sizeof lg->who[i])
            snprintf(lg->who[i] + used, sizeof lg->who[i] - used, "%s%s", used ? ", " : "",
                     f->instance_id);
    }
    return (char)('a' + i);
}

/* The instance as shown: its IP when that names one instance among rows,
 * else the whole id. */
static void instance_label(const struct ej_trace_fire_list *l, size_t from, size_t to,
                           const char *id, char *out, size_t len)
{
    const char *sep = strstr(id, "@-@");
    size_t iplen = sep ? (size_t)(sep - id) : strlen(id);
    for (size_t i = from; sep && i < to; i++) {
        const char *o = l->rows[i].instance_id;
        if (strncmp(o, id, iplen) == 0 && strncmp(o + iplen, "@-@", 3) == 0 && strcmp(o, id) != 0) {
            snprintf(out, len, "%s", id);
            return;
        }
    }
    snprintf(out, len, "%.*s", (int)iplen, id);
}

static const char *result_mark(const char *result)
{
    if (strcmp(result, "failed") == 0)
        return "!";
    if (strcmp(result, "running") == 0)
        return "~";
    if (strcmp(result, "unknown") == 0)
        return "?";
    return "";
}

/* The cell of item in line ln (rows of one job, [jf, jt)). Returns whether
 * the item ran. */
static bool cell(const struct ej_trace_fire_list *l, size_t jf, size_t jt, struct line ln, int item,
                 struct legend *lg, char *out, size_t len)
{
    const struct ej_trace_fire *hit = NULL, *all = NULL;
    for (size_t i = ln.from; i < ln.to; i++) {
        if (l->rows[i].sharding_item == item)
            hit = &l->rows[i];
        else if (l->rows[i].sharding_item == -1)
            all = &l->rows[i];
    }
    if (hit == NULL)
        hit = all;
    if (hit == NULL) {
        /* Off the schedule a run concerns its own items only. */
        snprintf(out, len, "%s", is_cron(&l->rows[ln.from]) ? "?" : "");
        return !is_cron(&l->rows[ln.from]);
    }
    if (strcmp(hit->outcome, EJ_FIRE_RAN) == 0) {
        char label[300];
        instance_label(l, jf, jt, hit->instance_id, label, sizeof label);
        snprintf(out, len, "%s%s%s", label, strcmp(hit->kind, "CATCHUP") == 0 ? "^" : "",
                 result_mark(hit->result));
        return true;
    }
    snprintf(out, len, "-%c", legend_code(lg, hit));
    return false;
}

static void fire_label(const struct ej_trace_fire *f, char *out, size_t len)
{
    time_t t = (time_t)(f->fire_time_ms / 1000);
    struct tm tm;
    localtime_r(&t, &tm);
    size_t n = strftime(out, len, "%Y-%m-%d %H:%M:%S", &tm);
    if (!is_cron(f))
        snprintf(out + n, len - n, ".%03d %s", (int)(f->fire_time_ms % 1000), f->kind);
}

/* The table of one job: rows [jf, jt) of l. */
static void print_job(const struct ej_trace_fire_list *l, size_t jf, size_t jt, bool gaps)
{
    int items[MAX_COLUMNS];
    size_t ncol = 0;
    for (size_t i = jf; i < jt; i++) {
        int it = l->rows[i].sharding_item;
        bool seen = it < 0;
        for (size_t k = 0; k < ncol && !seen; k++)
            seen = items[k] == it;
        if (!seen && ncol < MAX_COLUMNS)
            items[ncol++] = it;
    }
    for (size_t a = 1; a < ncol; a++) /* insertion sort: a few columns */
        for (size_t b = a; b > 0 && items[b - 1] > items[b]; b--) {
            int t = items[b];
            items[b] = items[b - 1];
            items[b - 1] = t;
        }
    bool job_wide = ncol == 0; /* only rows for every item */
    if (job_wide)
        items[ncol++] = -1;
    const char *headers[MAX_COLUMNS + 1];
    char names[MAX_COLUMNS][24];
    headers[0] = "FIRE";
    for (size_t k = 0; k < ncol; k++) {
        snprintf(names[k], sizeof names[k], job_wide ? "ITEMS" : "ITEM %d", items[k]);
        headers[k + 1] = names[k];
    }
    ejcli_table *t = ejcli_table_new(ncol + 1, headers);
    struct legend lg;
    memset(&lg, 0, sizeof lg);
    size_t shown = 0;
    bool unknown = false;
    static char cells[MAX_COLUMNS + 1][320];
    const char *cp[MAX_COLUMNS + 1];
    for (size_t i = jf; i < jt;) {
        struct line ln = {i, i + 1};
        while (ln.to < jt && same_line(&l->rows[ln.from], &l->rows[ln.to]))
            ln.to++;
        i = ln.to;
        struct legend before = lg;
        bool all_ran = true;
        fire_label(&l->rows[ln.from], cells[0], sizeof cells[0]);
        for (size_t k = 0; k < ncol; k++) {
            all_ran &= cell(l, jf, jt, ln, items[k], &lg, cells[k + 1], sizeof cells[k + 1]);
            unknown |= strcmp(cells[k + 1], "?") == 0;
        }
        if (gaps && all_ran) {
            lg = before; /* a line not shown adds no legend */
            continue;
        }
        for (size_t k = 0; k <= ncol; k++)
            cp[k] = cells[k];
        ejcli_table_row(t, cp);
        shown++;
    }
    printf("Job %s\n", l->rows[jf].job_name);
    if (shown > 0)
        ejcli_table_print(t, stdout);
    else
        printf("  %s\n", gaps ? "every item of every fire time ran" : "no fire times");
    ejcli_table_free(t);
    bool caught_up = false;
    for (size_t i = jf; i < jt && !caught_up; i++)
        caught_up = strcmp(l->rows[i].kind, "CATCHUP") == 0;
    if (lg.n > 0 || unknown || caught_up)
        printf("\n");
    if (caught_up)
        printf("  ^   caught up: its owner died before running it; the item's next owner ran it\n"
               "      once (a MISFIRE run) after the takeover\n");
    for (size_t k = 0; k < lg.n; k++)
        printf("  -%c  %s: %s%s%s%s\n", (char)('a' + k), lg.reason[k],
               ej__trace_fire_reason_text(lg.reason[k]), lg.who[k][0] ? " (" : "", lg.who[k],
               lg.who[k][0] ? ")" : "");
    if (unknown)
        printf(
            "  ?   no record: no instance ran or reported it (its owner may have died before its\n"
            "      session expired)\n");
}

static int print_fires(const struct ej_trace_fire_list *l, bool gaps)
{
    /* Jobs one after another (the rows come by fire time). */
    bool *done = calloc(l->count + 1, sizeof *done);
    struct ej_trace_fire_list job = {NULL, 0};
    job.rows = malloc((l->count + 1) * sizeof *job.rows);
    if (done == NULL || job.rows == NULL) {
        free(done);
        free(job.rows);
        return ejcli_fail(CMD, "out of memory");
    }
    bool first = true;
    for (size_t i = 0; i < l->count; i++) {
        if (done[i])
            continue;
        job.count = 0;
        for (size_t k = i; k < l->count; k++)
            if (!done[k] && strcmp(l->rows[k].job_name, l->rows[i].job_name) == 0) {
                job.rows[job.count++] = l->rows[k]; /* shallow: owned by l */
                done[k] = true;
            }
        if (!first)
            printf("\n");
        first = false;
        print_job(&job, 0, job.count, gaps);
    }
    if (l->count == 0)
        fprintf(stderr, "no fire times recorded in this period\n");
    free(done);
    free(job.rows);
    return EJ_EXIT_OK;
}

static void print_json(const struct ej_trace_fire_list *l, bool gaps)
{
    json_t *arr = json_array();
    for (size_t i = 0; i < l->count; i++)
        if (!gaps || strcmp(l->rows[i].outcome, EJ_FIRE_RAN) != 0)
            json_array_append_new(arr, ej__trace_fire_json(&l->rows[i]));
    char *s = json_dumps(arr, JSON_INDENT(2) | JSON_PRESERVE_ORDER);
    if (s != NULL)
        puts(s);
    free(s);
    json_decref(arr);
}

/* ---------------------------------------------------------------- main */

static int run_fires(int argc, char **argv)
{
    struct ejcli_store_args a = {NULL, NULL, NULL};
    struct ejcli_window w = {.since = "2h", .until = NULL, .item = -1, .limit = 10000};
    bool gaps = false, as_json = false;
    struct ejcli_flag flags[] = {{"store", 0, EJCLI_STR, &a.store},
                                 {"config", 'c', EJCLI_STR, &a.config},
                                 {"state-dir", 0, EJCLI_STR, &a.state_dir},
                                 {"since", 0, EJCLI_STR, &w.since},
                                 {"until", 0, EJCLI_STR, &w.until},
                                 {"item", 0, EJCLI_INT, &w.item},
                                 {"gaps", 0, EJCLI_BOOL, &gaps},
                                 {"limit", 0, EJCLI_INT, &w.limit},
                                 {"json", 0, EJCLI_BOOL, &as_json},
                                 EJCLI_FLAGS_END};
    char *pos[1];
    int npos = 0;
    int rc = ejcli_parse(CMD, argc, argv, flags, pos, 1, &npos);
    if (rc != 0)
        return rc;
    if (a.store != NULL && a.config != NULL)
        return ej_cli_usage_error(CMD, "give --store or -c, not both");
    if (npos == 1 && ejcli_check_job_name(CMD, pos[0]) != 0)
        return EJ_EXIT_USAGE;
    struct ej_trace_fire_query q = {.job_name = npos == 1 ? pos[0] : NULL};
    if ((rc = ejcli_window_check(CMD, &w, &q.since_ms, &q.until_ms)) != 0)
        return rc;
    q.item = (int)w.item;
    q.limit = (size_t)w.limit;
    ej_trace_reader *r = NULL;
    if ((rc = ejcli_history_open(CMD, &a, &r)) != 0)
        return rc;
    struct ej_trace_fire_list l;
    rc = ej_trace_query_fires(r, &q, &l);
    if (rc == EJ_ENOTFOUND)
        rc = ejcli_fail(CMD, "this store has no fire ledger yet (no daemon of this version "
                             "has written to it)");
    else if (rc != 0)
        rc = ejcli_fail(CMD, "query failed: %s", ej_trace_reader_errmsg(r));
    else if (as_json)
        print_json(&l, gaps);
    else
        rc = print_fires(&l, gaps);
    ej_trace_fire_list_fini(&l); /* zeroed when the query failed */
    ej_trace_reader_close(r);
    return rc;
}

EJ_CLI_COMMAND(fires, CMD, "show every fire time and what became of each item (fire ledger)", usage,
               run_fires)
