/*
 * The jobs of `ejob run`: one running ejob job per entry of the daemon
 * file, created, reconfigured and shut down through the library API
 * (ejob.h). Kept apart from cmd_run.c because config.h and job.h cannot be
 * included in one file (both define enum ej_job_type).
 */
#ifndef EJ_CLI_DAEMON_H
#define EJ_CLI_DAEMON_H

#include <stdbool.h>
#include <stddef.h>

#include "config/daemon_file.h"
#include "ejob/config.h"
#include "ejob/registry.h"

/* One running job of the daemon. */
typedef struct ejd_job ejd_job;

/* Process-wide set-up before any job starts: the event bus that logs one
 * line per job event (in the log format already chosen), the history store
 * (tracing; see daemon_events.h for where it is: config_file and
 * state_dir place relative and default SQLite files), and the drain bound
 * of shutdowns. Returns 0, or a negative error with err set. */
int ejd_init(const struct ej_tracing_config *tracing, const char *config_file,
             const char *state_dir, int drain_ms, char *err, size_t errlen);

/* Alert delivery for the daemon file (docs/alerts.md), after ejd_init:
 * takes cfg->alerts (left zeroed) and puts the alert sink on the event
 * bus; nothing when the file has no alerts: section. ejd_fini stops it.
 * Returns 0 or a negative error. */
int ejd_alerts_start(struct ej_daemon_config *cfg);

/* Create and start a job from cfg (copied). Returns 0 and *out, or a
 * negative error with err saying why (the field, for config errors). */
int ejd_job_start(ej_registry *reg, const struct ej_job_config *cfg, ejd_job **out, char *err,
                  size_t errlen);

/* Create and start the jobs of cfgs[0..n) at once (ej_jobs_start: their
 * registrations pipelined). Every failure is logged with the job's name
 * and why. out[i] receives each job, or NULL when it could not even be
 * created or its start met a transient error (ejd_retry_is_transient: it
 * is then queued with ejd_retry_add, see daemon_retry.h). Returns 0 when
 * every job started or was queued; otherwise the first error a retry
 * cannot fix, and the caller stops every non-NULL out[i] with
 * ejd_jobs_stop (those that failed to start are only freed). */
int ejd_jobs_start(ej_registry *reg, const struct ej_job_config *cfgs, size_t n, ejd_job **out);

/* The config the job was started or last updated with. Borrowed. */
const struct ej_job_config *ejd_job_config(const ejd_job *job);

/* Apply a changed config (same job name) to a running job: written to
 * ZooKeeper, from where every instance applies it. Returns 0, or a negative
 * error with err set (the job keeps its old config). */
int ejd_job_update(ejd_job *job, const struct ej_job_config *cfg, char *err, size_t errlen);

/* True when the job stopped on its own: an operator shut it down, or the
 * job was removed from ZooKeeper (it then runs again only as a new job). */
bool ejd_job_is_stopped(const ejd_job *job);

/* Stop cron firing (running items go on). */
void ejd_job_pause(ejd_job *job);

/* Stop the jobs at once: stop firing, let running items finish (bounded by
 * the drain time), leave ZooKeeper, free them. Runs the shutdowns in
 * parallel so the bound holds for all of them together. */
void ejd_jobs_stop(ejd_job **jobs, size_t n);

/* Undo ejd_init (delivers the queued events). */
void ejd_fini(void);

#endif
