/* Where `ejob history` and `ejob fires` find the history store. */
#ifndef EJ_CLI_HISTORY_STORE_H
#define EJ_CLI_HISTORY_STORE_H

#include <stdint.h>

#include "ejob/trace.h"

/* The store options of both commands; NULL when not given. */
struct ejcli_store_args {
    const char *store;     /* --store */
    const char *config;    /* -c: the daemon file's tracing section */
    const char *state_dir; /* --state-dir: STATE_DIR/history.db */
};

/*
 * Opens a reader on the store a names (the first that applies: --store,
 * -c, the state directory's history.db). Errors are printed, prefixed with
 * cmd. Returns 0 (*out set), else the command's exit code.
 */
int ejcli_history_open(const char *cmd, const struct ejcli_store_args *a, ej_trace_reader **out);

/* The filters both commands take: --since, --until (a duration back from
 * now or a local time; NULL: none), --item (-1: every item), --limit. */
struct ejcli_window {
    const char *since, *until;
    long item, limit;
};

/* Checks w (limit 1..1000000, item -1..1000000) and turns the times into
 * epoch ms (0: no bound). Returns 0, or prints a usage error for cmd and
 * returns EJ_EXIT_USAGE. */
int ejcli_window_check(const char *cmd, const struct ejcli_window *w, int64_t *since_ms,
                       int64_t *until_ms);

#endif
