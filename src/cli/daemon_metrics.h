/*
 * The daemon's metrics and health endpoint (`ejob run --metrics-listen`, or
 * metrics.listen in the daemon file; docs/metrics.md): /metrics fed from
 * the jobs' events, their status, the registry's connection states and
 * counters, the event bus, the history store (ejd_events_history_stats)
 * and /proc; /healthz and /readyz.
 *
 * Every hook below is a no-op until ejd_metrics_start() succeeded and after
 * ejd_metrics_stop(), so the daemon calls them unconditionally. Hooks may
 * come from any thread.
 */
#ifndef EJ_CLI_DAEMON_METRICS_H
#define EJ_CLI_DAEMON_METRICS_H

#include <stdbool.h>
#include <stddef.h>

#include "ejob/registry.h"

struct ej_event_bus;
struct ej_job;

/*
 * Starts serving on listen ("HOST:PORT", "[IPV6]:PORT", ":PORT"; loopback
 * unless a host says otherwise). expected_jobs: how many jobs the daemon
 * starts at start-up; /readyz stays 503 until that many have registered.
 * Returns 0; EJ_EINVAL for a bad address (err says why); -errno when the
 * address cannot be bound; EJ_ENOMEM. err (errlen bytes) gets the reason.
 * Call it once, before the registry connects.
 */
int ejd_metrics_start(const char *listen, size_t expected_jobs, char *err, size_t errlen);

/* Stops serving and frees everything. Call before the registry is
 * destroyed. Safe to call more than once, or without a start. */
void ejd_metrics_stop(void);

/* A registry connection-state listener (ej_registry_opts.on_state): counts
 * disconnects, reconnects and lost sessions, and learns the registry. */
void ejd_metrics_registry_state(ej_registry *reg, ej_reg_state state, bool new_session, void *user);

/* The daemon's event bus (NULL before destroying it): item runs, results,
 * durations and failovers come from its events; depth and drops from its
 * counters. */
void ejd_metrics_watch_bus(struct ej_event_bus *bus);

/* A job started / about to be destroyed: its status feeds the per-job
 * gauges and /readyz. At its start every series of its event-fed families
 * is created at 0 (each result, each not-run reason, failovers, misfire
 * runs, the duration histogram), so Prometheus sees their first event. */
void ejd_metrics_job_started(struct ej_job *job);
void ejd_metrics_job_stopped(struct ej_job *job);

/* What /metrics serves now (for tests): *out, caller frees, and *len (may
 * be NULL). Returns 0; EJ_ECLOSED when not started; EJ_ENOMEM. The
 * render must not race ejd_metrics_stop(). */
int ejd_metrics_render(char **out, size_t *len);

#endif
