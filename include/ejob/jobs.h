/*
 * Many jobs of one process at once: start-up and shutdown whose time does
 * not grow by a chain of ZooKeeper round trips per job.
 *
 * ej_job_start() blocks for the round trips of one job's registration
 * (config, caches, server and instance nodes, the election latch, the
 * resharding flag: about 15 in sequence, several of them writes that the
 * server syncs to disk). Called for 1,000 jobs one after the other that is
 * 1,000 such chains. These functions run the jobs' starts and shutdowns on
 * a bounded set of threads (EJ_JOBS_PARALLEL), so the requests of many
 * jobs are in flight together on the registry's one connection (the
 * ZooKeeper client pipelines them, and the server commits their writes
 * together).
 *
 * Threads: callable from any thread but the jobs' own callbacks. Each job
 * goes through exactly what ej_job_start() / ej_job_shutdown() /
 * ej_job_destroy() do to it; only the order between jobs is unspecified.
 */
#ifndef EJOB_JOBS_H
#define EJOB_JOBS_H

#include <stddef.h>

#include "ejob/common.h"

typedef struct ej_job ej_job;

/* How many jobs start or shut down at the same time. */
#define EJ_JOBS_PARALLEL 64

/*
 * ej_job_start() on every job of jobs[0..n), EJ_JOBS_PARALLEL at a time.
 * rcs: NULL, or n ints receiving each job's result (as ej_job_start
 * returns it; EJ_EINVAL for a NULL entry).
 * Returns 0 when every job started, else the first failed job's result
 * (by index). A job that failed is in the state ej_job_start() leaves it
 * in (destroy it); the others run.
 */
EJ_EXTERN int ej_jobs_start(ej_job *const *jobs, size_t n, int *rcs);

/*
 * ej_job_shutdown() on every job, EJ_JOBS_PARALLEL at a time, after first
 * pausing every job's trigger (no job fires while another drains). The
 * drain bound of each job holds for all together. NULL entries are
 * skipped. Returns 0, or EJ_ETIMEDOUT when any job had items still
 * running at the end.
 */
EJ_EXTERN int ej_jobs_shutdown(ej_job *const *jobs, size_t n);

/*
 * ej_jobs_shutdown(), then ej_job_destroy() on every job (in parallel as
 * well). NULL entries are skipped. The array itself stays the caller's.
 */
EJ_EXTERN void ej_jobs_destroy(ej_job *const *jobs, size_t n);

#endif
