/* Where `ejob history` and `ejob fires` find the history store. */
#ifndef EJ_CLI_HISTORY_STORE_H
#define EJ_CLI_HISTORY_STORE_H

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

#endif
