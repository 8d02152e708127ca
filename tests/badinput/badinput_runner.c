/*
 * The bad-input corpus (tests/badinput/): every entry is refused with the
 * message written next to it, by the same public functions every path of
 * ejob uses (the daemon file: ej_daemon_config_load_file; a `config` node
 * from ZooKeeper or `ejob config set`: ej_job_config_parse; a cron and zone
 * from `ejob cron`: ej_config_check_cron).
 *
 *   yaml/NAME.yaml + NAME.expected  every expected line appears in a message
 *   json/NAME.json + NAME.expected  the one message, exactly ("OK": valid)
 *   cron.txt     EXPR<TAB>ZONE<TAB>message
 *   cmdline.txt  COMMAND LINE<TAB>message (as scriptCommandLine of a job)
 *
 * Run from the corpus directory (argv[1]). Prints one line per entry and
 * exits 1 when any entry differs.
 */
#include <dirent.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "config/daemon_file.h"
#include "ejob/config.h"
#include "ejob/error.h"

static int failures, entries;

static char *slurp(const char *path, size_t *len)
{
    FILE *f = fopen(path, "rb");
    if (f == NULL)
        return NULL;
    size_t cap = 1 << 16, n = 0;
    char *buf = malloc(cap + 1);
    size_t got;
    while (buf != NULL && (got = fread(buf + n, 1, cap - n, f)) > 0) {
        n += got;
        if (n == cap) {
            char *g = realloc(buf, 2 * cap + 1);
            if (g == NULL) {
                free(buf);
                buf = NULL;
                break;
            }
            buf = g;
            cap *= 2;
        }
    }
    fclose(f);
    if (buf != NULL)
        buf[n] = '\0';
    if (len != NULL)
        *len = n;
    return buf;
}

static void chomp(char *s)
{
    size_t n = strlen(s);
    while (n > 0 && (s[n - 1] == '\n' || s[n - 1] == '\r'))
        s[--n] = '\0';
}

static void verdict(const char *name, bool ok, const char *want, const char *got)
{
    entries++;
    if (ok) {
        printf("ok   %s: %s\n", name, got);
        return;
    }
    failures++;
    printf("FAIL %s\n  want: %s\n  got:  %s\n", name, want, got);
}

static char *expected_of(const char *dir, const char *base)
{
    char path[600];
    snprintf(path, sizeof(path), "%s/%.*s.expected", dir, (int)(strrchr(base, '.') - base), base);
    char *e = slurp(path, NULL);
    if (e != NULL)
        chomp(e);
    return e;
}

static void run_yaml(const char *base)
{
    char path[600];
    snprintf(path, sizeof(path), "yaml/%s", base);
    char *want = expected_of("yaml", base);
    struct ej_daemon_config cfg;
    struct ej_config_errors errs;
    ej_config_errors_init(&errs);
    int rc = ej_daemon_config_load_file(path, &cfg, &errs);
    if (rc == 0)
        ej_daemon_config_fini(&cfg);
    bool ok = want != NULL && rc == EJ_ECONFIG;
    const char *got = errs.count > 0 ? errs.messages[0] : (rc == 0 ? "OK" : ej_strerror(rc));
    /* Every expected line is (a prefix of) one of the messages. */
    for (char *line = want, *next; ok && line != NULL && *line; line = next) {
        next = strchr(line, '\n');
        if (next != NULL)
            *next++ = '\0';
        bool found = false;
        for (size_t i = 0; i < errs.count && !found; i++)
            if (strncmp(errs.messages[i], line, strlen(line)) == 0) {
                found = true;
                got = errs.messages[i];
            }
        ok = found;
    }
    verdict(path, ok, want ? want : "(no .expected file)", got);
    ej_config_errors_fini(&errs);
    free(want);
}

static void run_json(const char *base)
{
    char path[600];
    snprintf(path, sizeof(path), "json/%s", base);
    char *want = expected_of("json", base);
    size_t len = 0;
    char *text = slurp(path, &len);
    while (text != NULL && len > 0 && (text[len - 1] == '\n'))
        text[--len] = '\0';
    char err[600] = "";
    struct ej_job_config cfg;
    ej_job_config_init(&cfg);
    int rc = text ? ej_job_config_parse(text, len, &cfg, err, sizeof(err)) : EJ_EINVAL;
    ej_job_config_fini(&cfg);
    const char *got = rc == 0 ? "OK" : err;
    verdict(path, want != NULL && strcmp(want, got) == 0, want ? want : "(no .expected file)", got);
    free(text);
    free(want);
}

/* Lines of FIELDS tab-separated fields (comments with '#'). */
static void run_lines(const char *file, int fields)
{
    char *text = slurp(file, NULL);
    if (text == NULL) {
        verdict(file, false, "a readable file", "cannot read");
        return;
    }
    int lineno = 0;
    for (char *line = text, *next; line != NULL && *line; line = next) {
        next = strchr(line, '\n');
        if (next != NULL)
            *next++ = '\0';
        lineno++;
        if (line[0] == '#' || line[0] == '\0')
            continue;
        char *f[3] = {line, NULL, NULL};
        for (int i = 1; i < fields; i++) {
            char *tab = strchr(f[i - 1], '\t');
            if (tab != NULL) {
                *tab = '\0';
                f[i] = tab + 1;
            }
        }
        const char *want = f[fields - 1] ? f[fields - 1] : "";
        char name[700], err[600] = "";
        snprintf(name, sizeof(name), "%s:%d (%s)", file, lineno, f[0]);
        int rc;
        if (fields == 3) {
            rc = ej_config_check_cron(f[0], f[1], err, sizeof(err));
        } else {
            struct ej_job_config cfg;
            ej_job_config_init(&cfg);
            ej_job_config_set_str(&cfg.job_name, "j");
            ej_job_config_set_str(&cfg.cron, "0 * * * * ?");
            ej_job_config_set_str(&cfg.script_command_line, f[0]);
            cfg.job_type = EJ_JOB_TYPE_SCRIPT;
            rc = ej_job_config_validate(&cfg, err, sizeof(err));
            ej_job_config_fini(&cfg);
        }
        const char *got = rc == 0 ? "OK" : err;
        verdict(name, strcmp(want, got) == 0, want, got);
    }
    free(text);
}

static int by_name(const struct dirent **a, const struct dirent **b)
{
    return strcmp((*a)->d_name, (*b)->d_name);
}

static void run_dir(const char *dir, const char *ext, void (*fn)(const char *))
{
    struct dirent **names;
    int n = scandir(dir, &names, NULL, by_name);
    for (int i = 0; i < n; i++) {
        const char *dot = strrchr(names[i]->d_name, '.');
        if (dot != NULL && strcmp(dot, ext) == 0)
            fn(names[i]->d_name);
        free(names[i]);
    }
    if (n >= 0)
        free(names);
}

int main(int argc, char **argv)
{
    if (argc != 2 || chdir(argv[1]) != 0) {
        fprintf(stderr, "usage: badinput_runner CORPUS_DIR\n");
        return 2;
    }
    run_dir("yaml", ".yaml", run_yaml);
    run_dir("json", ".json", run_json);
    run_lines("cron.txt", 3);
    run_lines("cmdline.txt", 2);
    printf("%d entries, %d failure(s)\n", entries, failures);
    return failures > 0 || entries == 0;
}
