/*
 * Jobs of `ejob run` whose start failed for a reason that can pass (a cache
 * that did not load in time under start-up load, a lost connection or
 * session): each is started again on a thread of its own, with
 * back-off, while the other jobs run. /readyz names them until they run.
 * Errors a retry cannot fix (a bad config, a digest ZooKeeper's ACLs
 * refuse) are not retried: the daemon stops on them at start-up as before.
 */
#ifndef EJ_CLI_DAEMON_RETRY_H
#define EJ_CLI_DAEMON_RETRY_H

#include <stdbool.h>
#include <stddef.h>

/* ejob/config.h is not included: /readyz (daemon_metrics.c) includes
 * ejob/job.h, and the two cannot meet in one file. */
struct ej_job_config;

/* Back-off between two attempts of one job: doubled from the first to
 * the last, with up to a quarter added at random so that the daemons of a
 * fleet started together do not retry in step. */
#define EJD_RETRY_FIRST_MS 1000
#define EJD_RETRY_MAX_MS 30000

/* True for a start error a later attempt may not meet again. */
bool ejd_retry_is_transient(int rc);

/* Starts a job (cfg borrowed for the call); returns 0 or an error. It may
 * call ejd_retry_add() for the same job again. */
typedef int (*ejd_retry_start_fn)(void *arg, const struct ej_job_config *cfg);

/* The function that starts a job again. Call before ejd_retry_add(). */
void ejd_retry_init(ejd_retry_start_fn start, void *arg);

/* Queue cfg (copied) for another attempt; why (copied, may be NULL) is
 * what /readyz says of it meanwhile. A job queued again after a failed
 * retry waits twice as long as the last time. Thread-safe. */
void ejd_retry_add(const struct ej_job_config *cfg, int rc, const char *why);

/* A reload is about to start or change jobs: forget every queued job (the
 * reload starts those still in the file itself, queueing them again if they
 * still fail), after an attempt going on has ended. Thread-safe. */
void ejd_retry_clear(void);

/* The daemon stops: no attempt starts from now on. Does not wait. */
void ejd_retry_pause(void);

/* Stop the thread (waiting for an attempt going on) and forget every queued
 * job. Idempotent. */
void ejd_retry_stop(void);

/* How many jobs are waiting for another attempt (one being attempted
 * counts). */
size_t ejd_retry_pending(void);

/* "job A (attempt 3 in 2000 ms: why), job B (...)" into buf, for /readyz.
 * Returns the number of jobs described. */
size_t ejd_retry_describe(char *buf, size_t len);

#endif
