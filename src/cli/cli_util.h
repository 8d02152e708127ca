/*
 * Helpers shared by the `ejob` commands: option parsing, finding and
 * connecting to the registry, aligned tables and JSON output.
 */
#ifndef EJ_CLI_UTIL_H
#define EJ_CLI_UTIL_H

#include <stdbool.h>
#include <stddef.h>
#include <stdio.h>

#include "ejob/console.h"
#include "ejob/registry.h"

/* ------------------------------------------------------------ options */

typedef enum {
    EJCLI_BOOL = 0, /* --name: sets *(bool *)target */
    EJCLI_STR = 1,  /* --name VALUE or --name=VALUE: sets *(const char **)target */
    EJCLI_INT = 2,  /* --name N: sets *(long *)target (decimal, may be negative) */
} ejcli_flag_kind;

struct ejcli_flag {
    const char *name; /* "registry" for --registry */
    char short_name;  /* 'c' for -c, or 0 */
    ejcli_flag_kind kind;
    void *target;
};

/* Options every registry-using command accepts. */
struct ejcli_common {
    const char *config;      /* -c, --config FILE: the daemon file's regCenter */
    const char *registry;    /* --registry HOST:PORT[,...][/NAMESPACE] */
    const char *namespace_;  /* --namespace NS */
    const char *digest;      /* --digest user:password (warned: ps shows it) */
    const char *digest_file; /* --digest-file FILE */
    const char *state_dir;   /* --state-dir DIR */
    long timeout_ms;         /* --timeout-ms N (connect), default 5000 */
    bool json;               /* --json */
};

/* The flags of struct ejcli_common, to put in a command's flag table. */
#define EJCLI_COMMON_FLAGS(c)                                                                      \
    {"config", 'c', EJCLI_STR, &(c)->config}, {"registry", 'r', EJCLI_STR, &(c)->registry},        \
        {"namespace", 'n', EJCLI_STR, &(c)->namespace_}, {"digest", 0, EJCLI_STR, &(c)->digest},   \
        {"digest-file", 0, EJCLI_STR, &(c)->digest_file},                                          \
        {"state-dir", 0, EJCLI_STR, &(c)->state_dir},                                              \
        {"timeout-ms", 0, EJCLI_INT, &(c)->timeout_ms},                                            \
    {                                                                                              \
        "json", 0, EJCLI_BOOL, &(c)->json                                                          \
    }

/* Text of the common options for usage messages: -c, then the rest
 * (EJCLI_REGISTRY_HELP alone where -c means something else). */
#define EJCLI_COMMON_HELP                                                                          \
    "Registry options (every command that talks to ZooKeeper):\n"                                  \
    "  -c, --config FILE   the registry a daemon file names (its regCenter:\n"                     \
    "                      serverLists, namespace, digest or digestFile), instead\n"               \
    "                      of --registry; -n and --digest-file still win over the\n"               \
    "                      file's, the file over EJOB_REGISTRY, EJOB_NAMESPACE and\n"              \
    "                      EJOB_DIGEST. An embedded registry is found in the state\n"              \
    "                      directory (below); for a file in /etc/ejob, in the one\n"               \
    "                      its systemd unit gives it when that exists:\n"                          \
    "                      /var/lib/ejob for ejob.yaml, /var/lib/ejob/NAME for\n"                  \
    "                      NAME.yaml\n" EJCLI_REGISTRY_HELP

#define EJCLI_REGISTRY_HELP                                                                        \
    "  -r, --registry HOST:PORT[,HOST:PORT...][/NAMESPACE]\n"                                      \
    "                      the ZooKeeper ensemble and namespace (env EJOB_REGISTRY).\n"            \
    "                      Without it, the embedded registry a local `ejob run`\n"                 \
    "                      started (its address is in STATE_DIR/registry).\n"                      \
    "  -n, --namespace NS  the namespace, when --registry does not name one\n"                     \
    "                      (env EJOB_NAMESPACE)\n"                                                 \
    "      --digest-file FILE  ZooKeeper digest auth: FILE's first line is USER:PASSWORD\n"        \
    "                      (refused if group- or world-writable); or env EJOB_DIGEST;\n"           \
    "                      --digest USER:PASSWORD works too but every user sees it in ps\n"        \
    "      --state-dir DIR state directory of the embedded registry (env EJOB_STATE_DIR,\n"        \
    "                      else $XDG_RUNTIME_DIR/ejob, else /tmp/ejob-$UID)\n"                     \
    "      --timeout-ms N  how long to wait for the connection (default 5000)\n"                   \
    "      --json          print JSON instead of a table\n"

/* The list terminator of a flag table. */
#define EJCLI_FLAGS_END                                                                            \
    {                                                                                              \
        NULL, 0, EJCLI_BOOL, NULL                                                                  \
    }

/*
 * Parse argv[1..] (argv[0] is the command name) against flags; the other
 * arguments go to pos (at most max_pos; *npos receives how many). "--" ends
 * the options. "-" alone is a positional argument.
 * Returns 0, or prints a usage error for cmd and returns EJ_EXIT_USAGE.
 */
int ejcli_parse(const char *cmd, int argc, char **argv, const struct ejcli_flag *flags, char **pos,
                int max_pos, int *npos);

/* Set defaults of a struct ejcli_common. */
void ejcli_common_init(struct ejcli_common *c);

/* --------------------------------------------------------- registry */

/*
 * The ZooKeeper digest given outside a file: --digest ARG (with a warning:
 * every user sees it in ps), --digest-file FILE (first line, the rule of
 * every file holding a secret), else EJOB_DIGEST. *out is NULL when none;
 * the caller frees it (wiping it first). Returns 0, or prints "ejob CMD:
 * message" and returns EJ_EXIT_USAGE (bad value, both flags, bad file) or
 * EJ_EXIT_FAILED (out of memory).
 */
int ejcli_digest(const char *cmd, const char *arg, const char *file, char **out);

/*
 * The state directory of the daemon that runs config_file (may be NULL):
 * explicit, else $EJOB_STATE_DIR, else for a file in /etc/ejob the
 * directory its systemd unit gives it (StateDirectory=: /var/lib/ejob for
 * ejob.yaml, /var/lib/ejob/NAME for NAME.yaml) when that exists, else
 * ejcli_state_dir's default. Caller frees; NULL when out of memory.
 */
char *ejcli_daemon_state_dir(const char *explicit_dir, const char *config_file);

/* Where the registry is, resolved from options, environment and state. */
struct ejcli_target {
    char servers[1024];
    char namespace_[256];
    const char *digest; /* digest_buf, or NULL for none */
    char digest_buf[1024];
    bool embedded; /* found through the state directory */
};

/*
 * Work out servers and namespace (see EJCLI_COMMON_HELP). On failure prints
 * "ejob CMD: message" and returns EJ_EXIT_USAGE (nothing given) or
 * EJ_EXIT_FAILED (embedded registry missing or not answering).
 */
int ejcli_resolve(const char *cmd, const struct ejcli_common *c, struct ejcli_target *t);

/*
 * Resolve and connect. Returns 0 and *out, or prints why and returns an
 * exit code (EJ_EXIT_USAGE or EJ_EXIT_FAILED).
 */
int ejcli_connect(const char *cmd, const struct ejcli_common *c, ej_registry **out,
                  struct ejcli_target *target_out);

/* Print "ejob CMD: message" to stderr and return EJ_EXIT_FAILED. */
int ejcli_fail(const char *cmd, const char *fmt, ...) __attribute__((format(printf, 2, 3)));

/* Print "ejob CMD: what: <registry error message>" and return EJ_EXIT_FAILED. */
int ejcli_reg_fail(const char *cmd, int rc, const char *what);

/* Checks the job name is one path segment; prints a usage error if not. */
int ejcli_check_job_name(const char *cmd, const char *job);

/*
 * Connect (as ejcli_connect) and open the console library over the registry
 * (direct reads). Returns 0 with *reg and *con (destroy con, then reg), or
 * prints why and returns an exit code.
 */
int ejcli_console(const char *cmd, const struct ejcli_common *c, ej_registry **reg,
                  ej_console **con);

/* Print "ejob CMD: err" (or the code's message when err is empty) and
 * return EJ_EXIT_FAILED. */
int ejcli_console_fail(const char *cmd, int rc, const char *err);

/* ------------------------------------------------------------ tables */

typedef struct ejcli_table ejcli_table;

/* A table with ncols columns and these headers (copied). */
ejcli_table *ejcli_table_new(size_t ncols, const char *const *headers);
/* Append a row of ncols strings (copied; NULL prints as "-"). */
void ejcli_table_row(ejcli_table *t, const char *const *cells);
/* Print aligned (two spaces between columns, last column not padded). */
void ejcli_table_print(const ejcli_table *t, FILE *out);
void ejcli_table_free(ejcli_table *t);

#endif
