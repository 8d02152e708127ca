/* ejob cron: check cron expressions and list their fire times. */
#include <errno.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/time.h>

#include "cli/cli.h"
#include "ejob/config.h"
#include "ejob/cron.h"
#include "ejob/error.h"

#define CRON_MAX_COUNT 100000

static const char cron_usage[] =
    "Usage: ejob cron next EXPR [--tz ZONE] [--from EPOCH_MS] [--count N]\n"
    "       ejob cron next --batch\n"
    "       ejob cron check EXPR [--tz ZONE]\n"
    "\n"
    "EXPR is a Quartz cron expression: second minute hour day-of-month month\n"
    "day-of-week [year], e.g. '0 0 8 ? * MON-FRI'. Quote it; the fields may also\n"
    "be given as separate arguments.\n"
    "\n"
    "next     prints the next N (default 5) fire times after --from (default now)\n"
    "         in ZONE (an IANA name such as Asia/Shanghai, or GMT+08:00; default\n"
    "         the host's zone), one per line: EPOCH_MS<TAB>local ISO-8601 time.\n"
    "--batch  reads lines EXPR<TAB>ZONE<TAB>FROM_EPOCH_MS<TAB>COUNT from stdin\n"
    "         (an empty ZONE is the host's) and prints one line for each: the\n"
    "         fire times as epoch ms separated by spaces (fewer than COUNT when\n"
    "         the schedule ends), NONE when there is no fire time at all, or\n"
    "         INVALID (the reason goes to stderr).\n"
    "check    says whether EXPR is valid in ZONE; exit code 1 and the reason if not.\n"
    "\n"
    "next and check judge EXPR and ZONE exactly as a job's cron and timeZone are\n"
    "judged (same rule, same message): Quartz syntax, a zone that loads, and a\n"
    "fire time after now (`0 0 0 30 2 ?` never fires: an error).\n";

static int64_t now_ms(void)
{
    struct timeval tv;
    gettimeofday(&tv, NULL);
    return (int64_t)tv.tv_sec * 1000 + tv.tv_usec / 1000;
}

static bool parse_i64(const char *s, int64_t *out)
{
    if (s == NULL || *s == '\0')
        return false;
    char *end;
    errno = 0;
    long long v = strtoll(s, &end, 10);
    if (errno != 0 || *end != '\0')
        return false;
    *out = v;
    return true;
}

/* Joins argv[from..to) with single spaces (an expression given unquoted). */
static char *join_args(char **argv, int from, int to)
{
    size_t len = 1;
    for (int i = from; i < to; i++)
        len += strlen(argv[i]) + 1;
    char *s = malloc(len);
    if (s == NULL)
        return NULL;
    s[0] = '\0';
    for (int i = from; i < to; i++) {
        if (i > from)
            strcat(s, " ");
        strcat(s, argv[i]);
    }
    return s;
}

static int load_zone(const char *name, const ej_tz **out)
{
    ej_tz *tz;
    int rc = ej_tz_load(name, &tz);
    if (rc != 0)
        return rc;
    *out = tz;
    return 0;
}

/* The rule jobs are judged by (ejob/config.h); prints the reason. */
static bool expr_valid(const char *expr, const char *zone, char *err, size_t errlen)
{
    int rc = ej_config_check_cron(expr, zone, err, errlen);
    if (rc == 0)
        return true;
    if (rc == EJ_ECONFIG)
        fprintf(stderr, "ejob cron: invalid expression '%s': %s\n", expr, err);
    else
        fprintf(stderr, "ejob cron: %s\n", ej_strerror(rc));
    return false;
}

static int cron_batch(void)
{
    char *line = NULL;
    size_t cap = 0;
    ssize_t n;
    long lineno = 0;
    char err[256];
    while ((n = getline(&line, &cap, stdin)) >= 0) {
        lineno++;
        while (n > 0 && (line[n - 1] == '\n' || line[n - 1] == '\r'))
            line[--n] = '\0';
        /* EXPR may itself contain tabs: split the last three fields off. */
        char *f[3] = {NULL, NULL, NULL};
        for (int k = 2; k >= 0; k--) {
            char *tab = strrchr(line, '\t');
            if (tab == NULL)
                break;
            *tab = '\0';
            f[k] = tab + 1;
        }
        int64_t from, count;
        if (f[0] == NULL || f[1] == NULL || f[2] == NULL || !parse_i64(f[1], &from) ||
            !parse_i64(f[2], &count) || count < 0 || count > CRON_MAX_COUNT) {
            fprintf(stderr, "line %ld: expected EXPR<TAB>ZONE<TAB>FROM_EPOCH_MS<TAB>COUNT\n",
                    lineno);
            puts("INVALID");
            continue;
        }
        const ej_tz *tz;
        int rc = load_zone(f[0], &tz);
        if (rc != 0) {
            fprintf(stderr, "line %ld: time zone '%s': %s\n", lineno, f[0], ej_strerror(rc));
            puts("INVALID");
            continue;
        }
        ej_cron *cron;
        rc = ej_cron_parse(line, &cron, err, sizeof(err));
        if (rc != 0) {
            fprintf(stderr, "line %ld: %s\n", lineno, rc == EJ_ECRON ? err : ej_strerror(rc));
            puts("INVALID");
            continue;
        }
        int64_t t = from;
        int64_t got = 0;
        for (; got < count; got++) {
            if (ej_cron_next(cron, tz, t, &t) != 0)
                break;
            printf(got == 0 ? "%" PRId64 : " %" PRId64, t);
        }
        if (got == 0)
            fputs(count == 0 ? "" : "NONE", stdout);
        putchar('\n');
        ej_cron_free(cron);
    }
    free(line);
    fflush(stdout);
    return EJ_EXIT_OK;
}

static int cron_next(int argc, char **argv)
{
    const char *zone = NULL;
    int64_t from = now_ms(), count = 5;
    bool batch = false;
    int first = 0, last = 0; /* positional arguments argv[first..last) */
    for (int i = 2; i < argc; i++) {
        const char *a = argv[i];
        if (strcmp(a, "--batch") == 0) {
            batch = true;
        } else if (strcmp(a, "--tz") == 0 || strcmp(a, "--from") == 0 ||
                   strcmp(a, "--count") == 0) {
            if (i + 1 >= argc)
                return ej_cli_usage_error("cron", "%s needs a value", a);
            const char *v = argv[++i];
            if (strcmp(a, "--tz") == 0) {
                zone = v;
            } else if (strcmp(a, "--from") == 0) {
                if (!parse_i64(v, &from))
                    return ej_cli_usage_error("cron", "--from: '%s' is not epoch milliseconds", v);
            } else if (!parse_i64(v, &count) || count < 1 || count > CRON_MAX_COUNT) {
                return ej_cli_usage_error("cron", "--count: '%s' is not a number 1..%d", v,
                                          CRON_MAX_COUNT);
            }
        } else if (a[0] == '-' && a[1] == '-') {
            return ej_cli_usage_error("cron", "unknown option '%s'", a);
        } else {
            if (first != 0 && last != i)
                return ej_cli_usage_error("cron", "the expression must be one argument");
            if (first == 0)
                first = i;
            last = i + 1;
        }
    }
    if (batch) {
        if (first != 0 || zone != NULL)
            return ej_cli_usage_error("cron", "--batch takes no other arguments");
        return cron_batch();
    }
    if (first == 0)
        return ej_cli_usage_error("cron", "next: missing EXPR");
    char *expr = join_args(argv, first, last);
    if (expr == NULL) {
        fprintf(stderr, "ejob cron: out of memory\n");
        return EJ_EXIT_FAILED;
    }
    char err[400];
    if (!expr_valid(expr, zone, err, sizeof(err))) {
        free(expr);
        return EJ_EXIT_FAILED;
    }
    const ej_tz *tz;
    int rc = load_zone(zone, &tz);
    ej_cron *cron = NULL;
    if (rc == 0)
        rc = ej_cron_parse(expr, &cron, err, sizeof(err));
    if (rc != 0) {
        fprintf(stderr, "ejob cron: %s\n", ej_strerror(rc));
        free(expr);
        return EJ_EXIT_FAILED;
    }
    int64_t t = from;
    int64_t got = 0;
    char buf[64];
    for (; got < count; got++) {
        if (ej_cron_next(cron, tz, t, &t) != 0)
            break;
        ej_tz_format_iso(tz, t, buf, sizeof(buf));
        printf("%" PRId64 "\t%s\n", t, buf);
    }
    if (got == 0)
        fprintf(stderr, "ejob cron: '%s' has no fire time after %" PRId64 " in %s\n", expr, from,
                ej_tz_name(tz));
    ej_cron_free(cron);
    free(expr);
    return EJ_EXIT_OK;
}

static int cron_check(int argc, char **argv)
{
    const char *zone = NULL;
    int first = 0, last = 0;
    for (int i = 2; i < argc; i++) {
        if (strcmp(argv[i], "--tz") == 0) {
            if (i + 1 >= argc)
                return ej_cli_usage_error("cron", "--tz needs a value");
            zone = argv[++i];
        } else if (argv[i][0] == '-' && argv[i][1] == '-') {
            return ej_cli_usage_error("cron", "unknown option '%s'", argv[i]);
        } else {
            if (first != 0 && last != i)
                return ej_cli_usage_error("cron", "the expression must be one argument");
            if (first == 0)
                first = i;
            last = i + 1;
        }
    }
    if (first == 0)
        return ej_cli_usage_error("cron", "check: missing EXPR");
    char *expr = join_args(argv, first, last);
    if (expr == NULL) {
        fprintf(stderr, "ejob cron: out of memory\n");
        return EJ_EXIT_FAILED;
    }
    char err[400];
    bool ok = expr_valid(expr, zone, err, sizeof(err));
    if (ok)
        printf("valid\n");
    free(expr);
    return ok ? EJ_EXIT_OK : EJ_EXIT_FAILED;
}

static int run_cron(int argc, char **argv)
{
    if (ej_cli_wants_help(argc, argv)) {
        fputs(cron_usage, stdout);
        return EJ_EXIT_OK;
    }
    if (argc < 2)
        return ej_cli_usage_error("cron", "missing sub-command (next or check)");
    if (strcmp(argv[1], "next") == 0)
        return cron_next(argc, argv);
    if (strcmp(argv[1], "check") == 0)
        return cron_check(argc, argv);
    return ej_cli_usage_error("cron", "unknown sub-command '%s'", argv[1]);
}

EJ_CLI_COMMAND(cron, "cron", "check cron expressions and list their fire times", cron_usage,
               run_cron)
