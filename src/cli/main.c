#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cli/cli.h"

#define MAX_COMMANDS 64

static const ej_cli_command *commands[MAX_COMMANDS];
static int n_commands;

void ej_cli_register(const ej_cli_command *cmd)
{
    if (n_commands < MAX_COMMANDS)
        commands[n_commands++] = cmd;
}

bool ej_cli_wants_help(int argc, char **argv)
{
    for (int i = 1; i < argc; i++) {
        if (strcmp(argv[i], "--") == 0)
            return false;
        if (strcmp(argv[i], "--help") == 0 || strcmp(argv[i], "-h") == 0)
            return true;
    }
    return false;
}

int ej_cli_usage_error(const char *name, const char *fmt, ...)
{
    va_list ap;
    fprintf(stderr, "ejob %s: ", name);
    va_start(ap, fmt);
    vfprintf(stderr, fmt, ap);
    va_end(ap);
    fprintf(stderr, "\nTry 'ejob %s --help'.\n", name);
    return EJ_EXIT_USAGE;
}

static int by_name(const void *a, const void *b)
{
    const ej_cli_command *x = *(const ej_cli_command *const *)a;
    const ej_cli_command *y = *(const ej_cli_command *const *)b;
    return strcmp(x->name, y->name);
}

static void print_help(FILE *out)
{
    fprintf(out, "Usage: ejob COMMAND [ARGS...]\n\n"
                 "ejob is a distributed, sharded, fault-tolerant cron coordinated through\n"
                 "ZooKeeper, compatible with ElasticJob-Lite 2.1.5.\n\nCommands:\n");
    for (int i = 0; i < n_commands; i++)
        fprintf(out, "  %-14s %s\n", commands[i]->name, commands[i]->summary);
    fprintf(out, "\n'ejob COMMAND --help' describes a command.\n"
                 "Exit codes: 0 success, 1 the operation failed, 2 usage error.\n");
}

/* Levenshtein distance, for suggesting a command after a typo. */
static size_t edit_distance(const char *a, const char *b)
{
    size_t la = strlen(a), lb = strlen(b);
    if (la > 63 || lb > 63)
        return 64;
    size_t prev[64], cur[64];
    for (size_t j = 0; j <= lb; j++)
        prev[j] = j;
    for (size_t i = 1; i <= la; i++) {
        cur[0] = i;
        for (size_t j = 1; j <= lb; j++) {
            size_t sub = prev[j - 1] + (a[i - 1] != b[j - 1]);
            size_t del = prev[j] + 1, ins = cur[j - 1] + 1;
            cur[j] = sub < del ? (sub < ins ? sub : ins) : (del < ins ? del : ins);
        }
        memcpy(prev, cur, sizeof(size_t) * (lb + 1));
    }
    return prev[lb];
}

int main(int argc, char **argv)
{
    qsort(commands, (size_t)n_commands, sizeof(commands[0]), by_name);
    if (argc < 2 || strcmp(argv[1], "--help") == 0 || strcmp(argv[1], "-h") == 0 ||
        strcmp(argv[1], "help") == 0) {
        if (argc >= 3 && strcmp(argv[1], "help") == 0) {
            for (int i = 0; i < n_commands; i++) {
                if (strcmp(commands[i]->name, argv[2]) == 0) {
                    fputs(commands[i]->usage, stdout);
                    return EJ_EXIT_OK;
                }
            }
            fprintf(stderr, "ejob help: unknown command '%s'.\n", argv[2]);
            print_help(stderr);
            return EJ_EXIT_USAGE;
        }
        print_help(argc < 2 ? stderr : stdout);
        return argc < 2 ? EJ_EXIT_USAGE : EJ_EXIT_OK;
    }
    if (strcmp(argv[1], "--version") == 0) {
        printf("ejob %s\n", EJOB_VERSION);
        return EJ_EXIT_OK;
    }
    for (int i = 0; i < n_commands; i++) {
        if (strcmp(commands[i]->name, argv[1]) == 0) {
            if (ej_cli_wants_help(argc - 1, argv + 1)) {
                fputs(commands[i]->usage, stdout);
                return EJ_EXIT_OK;
            }
            return commands[i]->run(argc - 1, argv + 1);
        }
    }
    fprintf(stderr, "ejob: unknown command '%s'.", argv[1]);
    const char *best = NULL;
    size_t best_d = 3;
    for (int i = 0; i < n_commands; i++) {
        size_t d = edit_distance(argv[1], commands[i]->name);
        if (d < best_d) {
            best_d = d;
            best = commands[i]->name;
        }
    }
    if (best != NULL)
        fprintf(stderr, " Did you mean '%s'?", best);
    fprintf(stderr, "\nRun 'ejob --help' for the list of commands.\n");
    return EJ_EXIT_USAGE;
}
