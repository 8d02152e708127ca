/*
 * Restart on request of a job an operator shut down (docs/cli.md, `ejob
 * start`). ElasticJob's shutdown deletes the instance node: the instance
 * leaves the job until its process restarts. A daemon keeps running its
 * other jobs, so it offers the way back without a restart of the process:
 * when one of its jobs is shut down it writes SHUTDOWN into that job's
 * ejob marker (EJ_LAYOUT_NODE_EJOB_INSTANCE, ejob-only: Java 2.1.5 never
 * reads it) and watches it; RESTART written there by `ejob start` or the
 * console, from any host, queues the job for a restart, which the main
 * loop hands to the reload thread (daemon_reload.c). A SIGHUP restarts every
 * job of the file that was shut down, request or not.
 *
 * Threads: ejd_restart_on_stopped and the watches run on the registry's
 * dispatch thread or a job's; ejd_restart_take on the reload thread; the
 * rest on the main thread.
 */
#ifndef EJ_CLI_DAEMON_RESTART_H
#define EJ_CLI_DAEMON_RESTART_H

#include <stdbool.h>
#include <stddef.h>

#include "ejob/ejob.h"

/* Before any job starts: the registry the markers are in (borrowed, it
 * must outlive ejd_restart_fini). Returns 0 or a negative error. */
int ejd_restart_init(ej_registry *reg);

/* Readable (an eventfd) when a restart was asked; -1 before init. The main
 * loop reads it with ejd_restart_ack. */
int ejd_restart_fd(void);
void ejd_restart_ack(void);

/* ej_job_opts.on_stopped of every daemon job (user unused). */
void ejd_restart_on_stopped(ej_job *job, bool by_operator, void *user);

/* The names of the jobs asked to restart since the last call, NULL
 * terminated (free with ej_registry_free_names); NULL when none. */
char **ejd_restart_take(void);

/* Undo init (watches still armed end when the registry goes). */
void ejd_restart_fini(void);

#endif
