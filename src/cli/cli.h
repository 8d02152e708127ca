/*
 * The `ejob` command line. Every sub-command lives in its own cmd_*.c file
 * and registers itself with EJ_CLI_COMMAND, so adding a command touches no
 * shared file.
 */
#ifndef EJ_CLI_H
#define EJ_CLI_H

#include <stdbool.h>

/* Exit codes of every command. */
enum {
    EJ_EXIT_OK = 0,
    EJ_EXIT_FAILED = 1, /* the operation failed; a message says why */
    EJ_EXIT_USAGE = 2,  /* bad command line */
};

/* argv[0] is the command name ("cron", "jobs" ...). Returns an exit code. */
typedef int (*ej_cli_fn)(int argc, char **argv);

typedef struct ej_cli_command {
    const char *name;    /* "cron", "status" ... */
    const char *summary; /* one line for `ejob --help` */
    const char *usage;   /* full text for `ejob NAME --help` */
    ej_cli_fn run;
} ej_cli_command;

void ej_cli_register(const ej_cli_command *cmd);

/* True when argv contains --help or -h. */
bool ej_cli_wants_help(int argc, char **argv);

/* Prints "ejob NAME: message" to stderr and returns EJ_EXIT_USAGE. */
int ej_cli_usage_error(const char *name, const char *fmt, ...)
    __attribute__((format(printf, 2, 3)));

#define EJ_CLI_COMMAND(ident, cmd_name, cmd_summary, cmd_usage, fn)                        \
    static const ej_cli_command ej_cli_cmd_##ident = {cmd_name, cmd_summary, cmd_usage, fn}; \
    __attribute__((constructor)) static void ej_cli_register_##ident(void)                 \
    {                                                                                      \
        ej_cli_register(&ej_cli_cmd_##ident);                                              \
    }

#endif
