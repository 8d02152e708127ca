/*
 * How fast hostile or large daemon files and config nodes are refused or
 * loaded: nesting (refused on the event stream before libyaml builds the
 * document), an alias bomb, a 10,000-job file, a deep `config` JSON.
 * Prints one line per case: milliseconds and the verdict.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "config/daemon_file.h"
#include "ejob/config.h"
#include "ejob/error.h"

static double now_ms(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec * 1e3 + (double)ts.tv_nsec / 1e6;
}

static void yaml_case(const char *what, const char *text)
{
    struct ej_daemon_config cfg;
    struct ej_config_errors errs;
    ej_config_errors_init(&errs);
    double t0 = now_ms();
    int rc = ej_daemon_config_load_string(text, "bench.yaml", &cfg, &errs);
    double t1 = now_ms();
    printf("%-34s %9.2f ms  %s\n", what, t1 - t0,
           rc == 0 ? "loaded" : (errs.count ? errs.messages[0] : ej_strerror(rc)));
    if (rc == 0)
        ej_daemon_config_fini(&cfg);
    ej_config_errors_fini(&errs);
}

static char *nested(size_t levels)
{
    const char *head = "regCenter: {namespace: n}\njobs: ";
    size_t h = strlen(head);
    char *s = malloc(h + 2 * levels + 2);
    memcpy(s, head, h);
    memset(s + h, '[', levels);
    memset(s + h + levels, ']', levels);
    s[h + 2 * levels] = '\n';
    s[h + 2 * levels + 1] = '\0';
    return s;
}

int main(void)
{
    size_t depths[] = {20000, 40000, 200000};
    for (size_t i = 0; i < sizeof(depths) / sizeof(depths[0]); i++) {
        char what[64];
        snprintf(what, sizeof(what), "YAML nested %zu levels", depths[i]);
        char *s = nested(depths[i]);
        yaml_case(what, s);
        free(s);
    }
    /* 10 levels of 10 aliases each: 10^10 nodes if expanded. */
    char bomb[4096];
    size_t n = (size_t)snprintf(bomb, sizeof(bomb), "regCenter: {namespace: n}\na0: &a0 [x]\n");
    for (int l = 1; l <= 10; l++) {
        n += (size_t)snprintf(bomb + n, sizeof(bomb) - n, "a%d: &a%d [", l, l);
        for (int k = 0; k < 10; k++)
            n += (size_t)snprintf(bomb + n, sizeof(bomb) - n, "%s*a%d", k ? "," : "", l - 1);
        n += (size_t)snprintf(bomb + n, sizeof(bomb) - n, "]\n");
    }
    yaml_case("YAML alias bomb (10x10)", bomb);

    size_t cap = 2000000;
    char *big = malloc(cap);
    n = (size_t)snprintf(big, cap, "regCenter: {namespace: n}\njobs:\n");
    for (int j = 0; j < EJ_CONFIG_MAX_DAEMON_JOBS; j++)
        n += (size_t)snprintf(big + n, cap - n,
                              "  j%d: {elasticJobType: SCRIPT, cron: \"0 * * * * ?\", "
                              "shardingTotalCount: 3, props: {script.command.line: /bin/true}}\n",
                              j);
    yaml_case("YAML 10000 valid jobs", big);
    free(big);

    char json[512];
    n = (size_t)snprintf(json, sizeof(json), "{\"jobType\":\"SCRIPT\",\"x\":");
    for (int i = 0; i < 200; i++)
        json[n++] = '[';
    json[n] = '\0';
    struct ej_job_config cfg;
    ej_job_config_init(&cfg);
    char err[256];
    double t0 = now_ms();
    int rc = ej_job_config_parse(json, n, &cfg, err, sizeof(err));
    printf("%-34s %9.2f ms  %s\n", "config JSON nested 200 levels", now_ms() - t0,
           rc == 0 ? "loaded" : err);
    ej_job_config_fini(&cfg);
    return 0;
}
