/* `ejob sharding`: run a sharding strategy offline and print who gets what. */
#include <errno.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cli/cli.h"
#include "ejob/error.h"
#include "ejob/sharding.h"

#define CMD "sharding"

static const char usage[] =
    "Usage: ejob sharding [--strategy NAME] --job JOBNAME --count N [--previous FILE]\n"
    "                     [--load INSTANCE=N]... INSTANCE...\n"
    "\n"
    "Run a sharding strategy and print one line per instance, in the order given:\n"
    "  INSTANCE<TAB>item,item,...      (an instance without items prints INSTANCE<TAB>)\n"
    "\n"
    "The instances are taken in the order given, which stands for the order the\n"
    "registry returns them in (reverse lexicographic: 192.168.1.9@-@1 before\n"
    "192.168.1.10@-@1).\n"
    "\n"
    "Options:\n"
    "  --strategy NAME   AVERAGE (default; also AVG_ALLOCATION), ODEVITY, ROTATE\n"
    "                    (also ROUND_ROBIN), CONSISTENT_HASH, STICKY, BALANCED, or\n"
    "                    an ElasticJob strategy class name\n"
    "  --job JOBNAME     the job name (ODEVITY, ROTATE and CONSISTENT_HASH use it)\n"
    "  --count N         shardingTotalCount, at least 1\n"
    "  --previous FILE   the previous assignment, in this command's output format\n"
    "                    (STICKY and BALANCED use it; items >= N are ignored)\n"
    "  --load INSTANCE=N BALANCED only: INSTANCE already holds N items of the\n"
    "                    namespace's other BALANCED jobs (repeatable; default 0)\n"
    "\n"
    "Exit codes: 0 success; 1 the previous file is unreadable or malformed, or the\n"
    "strategy failed; 2 usage error (including an unknown strategy).\n";

/* An option's value from "--opt VALUE" or "--opt=VALUE"; advances *i. NULL
 * when argv[*i] is not this option. Sets *missing when the value is absent. */
static const char *option_value(int argc, char **argv, int *i, const char *opt, int *missing)
{
    size_t len = strlen(opt);
    if (strncmp(argv[*i], opt, len) != 0)
        return NULL;
    if (argv[*i][len] == '=')
        return argv[*i] + len + 1;
    if (argv[*i][len] != '\0')
        return NULL;
    if (*i + 1 >= argc) {
        *missing = 1;
        return NULL;
    }
    (*i)++;
    return argv[*i];
}

/* Parse a non-negative decimal int; -1 when s is not one. */
static long parse_nonneg(const char *s)
{
    if (s[0] < '0' || s[0] > '9')
        return -1;
    errno = 0;
    char *end;
    long v = strtol(s, &end, 10);
    if (errno != 0 || *end != '\0' || v > INT_MAX)
        return -1;
    return v;
}

/*
 * Read FILE (lines "INSTANCE<TAB>item,item,...") into prev_ids[item]: each
 * entry points into *store_out (caller frees every string in it and the
 * array). Returns 0 or prints `--previous FILE:LINE: ...` and returns -1.
 */
static int read_previous(const char *path, int count, const char **prev_ids, char ***store_out,
                         size_t *n_store_out)
{
    FILE *f = fopen(path, "r");
    if (f == NULL) {
        fprintf(stderr, "ejob sharding: --previous %s: %s\n", path, strerror(errno));
        return -1;
    }
    char *line = NULL;
    size_t line_cap = 0;
    char **store = NULL;
    size_t n_store = 0, cap_store = 0;
    int rc = 0;
    long lineno = 0;
    ssize_t got;
    while ((got = getline(&line, &line_cap, f)) >= 0) {
        lineno++;
        while (got > 0 && (line[got - 1] == '\n' || line[got - 1] == '\r'))
            line[--got] = '\0';
        if (got == 0)
            continue;
        if (strlen(line) != (size_t)got) {
            fprintf(stderr, "ejob sharding: --previous %s:%ld: line contains a NUL byte\n", path,
                    lineno);
            rc = -1;
            break;
        }
        char *tab = strchr(line, '\t');
        if (tab == NULL || tab == line) {
            fprintf(stderr,
                    "ejob sharding: --previous %s:%ld: expected INSTANCE<TAB>items, got \"%s\"\n",
                    path, lineno, line);
            rc = -1;
            break;
        }
        *tab = '\0';
        if (n_store == cap_store) {
            size_t cap = cap_store ? 2 * cap_store : 16;
            char **grown = realloc(store, cap * sizeof(*grown));
            if (grown == NULL) {
                fprintf(stderr, "ejob sharding: out of memory reading %s\n", path);
                rc = -1;
                break;
            }
            store = grown;
            cap_store = cap;
        }
        char *id = strdup(line);
        if (id == NULL) {
            fprintf(stderr, "ejob sharding: out of memory reading %s\n", path);
            rc = -1;
            break;
        }
        store[n_store++] = id;
        char *items = tab + 1;
        if (*items == '\0')
            continue;
        for (char *tok = items;;) {
            char *comma = strchr(tok, ',');
            if (comma != NULL)
                *comma = '\0';
            long item = parse_nonneg(tok);
            if (item < 0) {
                fprintf(stderr,
                        "ejob sharding: --previous %s:%ld: instance \"%s\": item \"%s\" is not a "
                        "non-negative integer\n",
                        path, lineno, id, tok);
                rc = -1;
                break;
            }
            if (item < count) {
                if (prev_ids[item] != NULL) {
                    fprintf(stderr,
                            "ejob sharding: --previous %s:%ld: item %ld of instance \"%s\" is "
                            "already owned by \"%s\"\n",
                            path, lineno, item, id, prev_ids[item]);
                    rc = -1;
                    break;
                }
                prev_ids[item] = id;
            }
            if (comma == NULL)
                break;
            tok = comma + 1;
        }
        if (rc != 0)
            break;
    }
    if (rc == 0 && ferror(f)) {
        fprintf(stderr, "ejob sharding: --previous %s: read error\n", path);
        rc = -1;
    }
    free(line);
    fclose(f);
    *store_out = store;
    *n_store_out = n_store;
    return rc;
}

struct args {
    const char *strategy, *job, *count_str, *previous;
    const char **instances; /* argc entries, n used; caller frees */
    size_t n;
    const char **loads; /* "INSTANCE=N" values of --load; argc entries, n_loads used */
    size_t n_loads;
};

/* Options may come before, between or after the instances; "--" ends them.
 * Returns 0 or an exit code after printing a usage error. */
static int parse_args(int argc, char **argv, struct args *a)
{
    a->instances = malloc((size_t)argc * sizeof(*a->instances));
    a->loads = malloc((size_t)argc * sizeof(*a->loads));
    if (a->instances == NULL || a->loads == NULL) {
        fprintf(stderr, "ejob sharding: out of memory\n");
        return EJ_EXIT_FAILED;
    }
    int options_done = 0;
    for (int i = 1; i < argc; i++) {
        int missing = 0;
        const char *v;
        if (options_done || argv[i][0] != '-' || argv[i][1] == '\0') {
            a->instances[a->n++] = argv[i];
            continue;
        }
        if (strcmp(argv[i], "--") == 0)
            options_done = 1;
        else if ((v = option_value(argc, argv, &i, "--strategy", &missing)) != NULL)
            a->strategy = v;
        else if ((v = option_value(argc, argv, &i, "--job", &missing)) != NULL)
            a->job = v;
        else if ((v = option_value(argc, argv, &i, "--count", &missing)) != NULL)
            a->count_str = v;
        else if ((v = option_value(argc, argv, &i, "--previous", &missing)) != NULL)
            a->previous = v;
        else if ((v = option_value(argc, argv, &i, "--load", &missing)) != NULL)
            a->loads[a->n_loads++] = v;
        else if (missing)
            return ej_cli_usage_error(CMD, "option %s needs a value", argv[i]);
        else
            return ej_cli_usage_error(CMD, "unknown option %s", argv[i]);
    }
    if (a->job == NULL)
        return ej_cli_usage_error(CMD, "--job JOBNAME is required");
    if (a->count_str == NULL)
        return ej_cli_usage_error(CMD, "--count N is required");
    if (parse_nonneg(a->count_str) < 1)
        return ej_cli_usage_error(CMD, "--count must be an integer from 1 to %d, got \"%s\"",
                                  INT_MAX, a->count_str);
    if (a->n == 0)
        return ej_cli_usage_error(CMD, "no instances given");
    return 0;
}

/* BALANCED with the --load values: the strategy's user pointer. */
static int balanced_with_load(const char *const *instances, size_t n_instances,
                              const char *job_name, int total_count,
                              const char *const *previous_owner, int *owner_out, void *user)
{
    return ej_sharding_balanced_loaded(instances, n_instances, job_name, total_count,
                                       previous_owner, user, owner_out);
}

/* "INSTANCE=N" values into load[k] for instances[k]. Returns 0 or the exit
 * code of a usage error naming the bad value. */
static int parse_loads(const struct args *a, const ej_sharding_strategy *s, long *load)
{
    if (a->n_loads > 0 && !s->namespace_load)
        return ej_cli_usage_error(CMD, "--load applies only to BALANCED, not to %s", s->name);
    for (size_t k = 0; k < a->n; k++)
        load[k] = 0;
    for (size_t i = 0; i < a->n_loads; i++) {
        const char *eq = strrchr(a->loads[i], '=');
        long v = eq ? parse_nonneg(eq + 1) : -1;
        if (eq == NULL || eq == a->loads[i] || v < 0)
            return ej_cli_usage_error(CMD, "--load expects INSTANCE=N (N >= 0), got \"%s\"",
                                      a->loads[i]);
        size_t len = (size_t)(eq - a->loads[i]), k = 0;
        while (k < a->n &&
               (strlen(a->instances[k]) != len || strncmp(a->instances[k], a->loads[i], len) != 0))
            k++;
        if (k == a->n)
            return ej_cli_usage_error(CMD, "--load %s: %.*s is not one of the instances given",
                                      a->loads[i], (int)len, a->loads[i]);
        load[k] = v;
    }
    return 0;
}

static int run_sharding(int argc, char **argv)
{
    struct args a = {0};
    int status = parse_args(argc, argv, &a);
    if (status != 0) {
        free(a.instances);
        free(a.loads);
        return status;
    }
    long count = parse_nonneg(a.count_str);
    size_t n = a.n;
    const char *const *instances = a.instances;

    char err[512];
    ej_sharding_strategy s;
    if (ej_sharding_find(a.strategy, &s, err, sizeof(err)) != 0) {
        free(a.instances);
        free(a.loads);
        return ej_cli_usage_error(CMD, "%s", err);
    }
    long *load = malloc(n * sizeof(*load));
    if (load == NULL) {
        fprintf(stderr, "ejob sharding: out of memory\n");
        free(a.instances);
        free(a.loads);
        return EJ_EXIT_FAILED;
    }
    status = parse_loads(&a, &s, load);
    if (status != 0) {
        free(load);
        free(a.instances);
        free(a.loads);
        return status;
    }
    if (s.namespace_load) {
        s.fn = balanced_with_load;
        s.user = load;
    }

    status = EJ_EXIT_FAILED;
    const char **prev_ids = NULL;
    char **store = NULL;
    size_t n_store = 0;
    int *owner = malloc((size_t)count * sizeof(*owner));
    int *items = malloc((size_t)count * sizeof(*items));
    size_t *offsets = malloc((n + 1) * sizeof(*offsets));
    if (owner == NULL || items == NULL || offsets == NULL) {
        fprintf(stderr, "ejob sharding: out of memory for %ld items\n", count);
        goto out_free;
    }
    if (a.previous != NULL) {
        prev_ids = calloc((size_t)count, sizeof(*prev_ids));
        if (prev_ids == NULL) {
            fprintf(stderr, "ejob sharding: out of memory for %ld items\n", count);
            goto out_free;
        }
        if (read_previous(a.previous, (int)count, prev_ids, &store, &n_store) != 0)
            goto out_free;
    }
    int rc =
        ej_sharding_run(&s, instances, n, a.job, (int)count, prev_ids, owner, err, sizeof(err));
    if (rc == EJ_EINVAL) {
        status = ej_cli_usage_error(CMD, "%s", err);
        goto out_free;
    }
    if (rc != 0) {
        fprintf(stderr, "ejob sharding: %s\n", err);
        goto out_free;
    }
    if (ej_sharding_group(owner, (int)count, n, offsets, items) != 0) {
        fprintf(stderr, "ejob sharding: strategy \"%s\" returned an invalid assignment\n", s.name);
        goto out_free;
    }
    for (size_t k = 0; k < n; k++) {
        fputs(instances[k], stdout);
        putchar('\t');
        for (size_t j = offsets[k]; j < offsets[k + 1]; j++)
            printf(j == offsets[k] ? "%d" : ",%d", items[j]);
        putchar('\n');
    }
    if (fflush(stdout) != 0 || ferror(stdout)) {
        fprintf(stderr, "ejob sharding: writing the result: %s\n", strerror(errno));
        goto out_free;
    }
    status = EJ_EXIT_OK;

out_free:
    for (size_t i = 0; i < n_store; i++)
        free(store[i]);
    free(store);
    free(prev_ids);
    free(offsets);
    free(items);
    free(owner);
    free(load);
    free(a.instances);
    free(a.loads);
    return status;
}

EJ_CLI_COMMAND(sharding, CMD, "split a job's items among instances with a sharding strategy", usage,
               run_sharding)
