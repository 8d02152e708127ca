/* The daemon's event bus and its history store (see daemon_events.c). */
#ifndef EJ_CLI_DAEMON_EVENTS_H
#define EJ_CLI_DAEMON_EVENTS_H

#include <stdbool.h>
#include <stddef.h>

#include "config/daemon_file.h"
#include "ejob/config.h"
#include "ejob/trace.h"

struct ej_event_bus;

/* The SQLite file of the daemon's default history in a state directory. */
#define EJD_HISTORY_FILE "history.db"

/* Where the history of a daemon file is, resolved the same way by the
 * daemon and `ejob history`. */
struct ejd_trace_where {
    bool off;                      /* tracing: {type: NONE} */
    struct ej_trace_target target; /* url and password point into the fields below */
    char *url;                     /* owned */
    char *password;                /* owned; from passwordFile, or NULL */
};

/*
 * Resolves t (NULL: no tracing section) against the daemon file's path (a
 * relative SQLite url is taken relative to the file's directory) and the
 * state directory (the default store is STATE_DIR/history.db). Returns 0
 * (free with ejd_trace_where_fini), or a negative error with err set (an
 * unreadable passwordFile).
 */
int ejd_trace_where(const struct ej_tracing_config *t, const char *config_file,
                    const char *state_dir, struct ejd_trace_where *out, char *err, size_t errlen);
void ejd_trace_where_fini(struct ejd_trace_where *w);

/*
 * A bus with the log sink, and the history store of where (unless off)
 * behind it. drain_ms bounds how long ejd_events_destroy writes buffered
 * history. Returns 0 or a negative error with err set.
 */
int ejd_events_create(struct ej_event_bus **out, const struct ejd_trace_where *where,
                      int retention_days, int drain_ms, char *err, size_t errlen);
/* Deliver what is queued, write buffered history (bounded by drain_ms),
 * free the bus and the store. Accepts NULL. */
void ejd_events_destroy(struct ej_event_bus *bus);

/*
 * The history store's counters (ej_trace_store_stats) into out. Returns
 * false, out untouched, when there is no store: history off (tracing type
 * NONE), not created yet, or already destroyed. Any thread may call it,
 * also while ejd_events_destroy runs (the store is withdrawn under a lock
 * before it is freed).
 */
bool ejd_events_history_stats(struct ej_trace_stats *out);

/* A job's own retention (its tracing.retentionDays / failedRetentionDays;
 * -1: none) for the history store (ej_trace_store_set_job_retention);
 * nothing without a store. */
void ejd_events_job_retention(const char *job_name, int days, int failed_days);

/* daemon_ledger.c: lets the fire ledger's start-up scan read where the
 * ledger of a job ends in the history store at t (copied). Returns 0 or
 * EJ_ENOMEM. Uninstall waits for a read in flight. */
int ejd_ledger_install(const struct ej_trace_target *t);
void ejd_ledger_uninstall(void);

#endif
