/*
 * The running state of `ejob run` shared by its main loop (cmd_run.c) and
 * its job set and reloads (daemon_reload.c): the jobs of the file that run,
 * and the reload being read or applied on its own thread.
 */
#ifndef EJ_CLI_DAEMON_RUN_H
#define EJ_CLI_DAEMON_RUN_H

#include <pthread.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stddef.h>

#include "common/check.h"
#include "config/daemon_file.h"
#include "ejob/config.h"
#include "ejob/registry.h"
#include "cli/daemon.h"
#include "cli/embedded.h"

struct running {
    char *name;
    ejd_job *job;
};

struct daemon {
    const char *file;
    /* jobs/njobs/cap: changed by the reload thread while it applies a
     * reload, read by the main loop to pause every job on SIGTERM. */
    ej__mutex jobs_mu;
    atomic_bool stopping;     /* SIGTERM/SIGINT seen: a reload stops where it is */
    const char *metrics_flag; /* --metrics-listen, or NULL */
    char *metrics_now;        /* the endpoint's address, or NULL when off; owned */
    struct ej_daemon_config cfg;
    ej_registry *reg;
    ejcli_embedded *embedded;
    struct running *jobs;
    size_t njobs, cap;
    int drain_ms;
    /* Log level and format before the file's log section: the command
     * line's (then fixed), else EJOB_LOG_LEVEL's or the defaults. */
    int base_level, base_format;
    bool level_fixed, format_fixed;
    struct reload *reload; /* the reload being read or applied, or NULL */
    bool reload_again;     /* a SIGHUP came while one was going on */
    bool restart_again;    /* a restart was asked while a reload was going on */
};

/* A reload, read and applied on a thread of its own: reading a large file
 * (or a FIFO that never ends), draining a removed job's items or waiting for
 * ZooKeeper never keeps the main loop from answering SIGTERM. */
enum { RELOAD_READING, RELOAD_APPLYING, RELOAD_ABANDONED };
struct reload {
    struct daemon *d;
    const char *file;
    /* READING -> APPLYING (the thread, once read: the main loop then joins
     * it), or READING -> ABANDONED (the main loop, stopping while the file
     * is still being read: the thread then frees the reload and never
     * touches the daemon). */
    atomic_int phase;
    int efd; /* written by the thread when done */
    pthread_t thread;
    int rc;
    bool restarts_only; /* no file: the restarts asked (daemon_restart.h) */
    bool taken;         /* next was moved into the daemon */
    char outcome[160]; /* how it went, for systemd's STATUS= */
    struct ej_daemon_config next;
    struct ej_config_errors errs;
};

/* Print a file's errors (or why it could not be read) on stderr. */
void ejd_run_print_errors(const struct ej_config_errors *errs, const char *file, int rc);

/* The file's log section, unless the command line set the same. A level
 * or format the file no longer gives goes back to what it was before. */
void ejd_run_apply_log_config(const struct daemon *d, const struct ej_log_config *lc);

/* The file's jobs at start-up, all at once. On failure the jobs that
 * exist are in the running set (ejd_run_stop_all stops them). */
int ejd_run_start_all(struct daemon *d);

/* SIGTERM: no job fires from now on, whatever a reload is doing. */
void ejd_run_pause_all(struct daemon *d);

/* Stop every job at once (the drain bound holds for all together). */
void ejd_run_stop_all(struct daemon *d);

/* A SIGHUP acted on: the file is read and applied on a thread of its own;
 * d->reload->efd becomes readable when it is done. systemd hears of the
 * reload, and of its end at once when it cannot even start. */
void ejd_run_begin_reload(struct daemon *d);

/* Restarts asked through ZooKeeper (daemon_restart.h): applied on the
 * reload's thread like a reload without a file, so that they and reloads
 * never change the job set at once. */
void ejd_run_begin_restarts(struct daemon *d);

/* The main loop is done with a reload: join its thread, or leave a thread
 * still reading to free it. Accepts NULL. */
void ejd_run_reload_finish(struct reload *r);

#endif
