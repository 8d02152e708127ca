/*
 * `ejob run` under systemd (docs/systemd.md): the sd_notify(3) messages a
 * Type=notify or Type=notify-reload unit waits for, and the state
 * directory systemd hands the service.
 *
 * Every ejd_notify_* call is a no-op when NOTIFY_SOCKET is unset (the
 * daemon was not started by systemd) and never fails the daemon: a lost
 * notification is logged at debug and otherwise ignored. Called from the
 * daemon's main thread only (systemd takes READY/RELOADING/STOPPING from
 * the main process; NotifyAccess=main is the default).
 */
#ifndef EJ_CLI_DAEMON_NOTIFY_H
#define EJ_CLI_DAEMON_NOTIFY_H

#include <stddef.h>

#include "ejob/common.h"

/* STATUS=<text>: what the daemon is doing, shown by `systemctl status`. */
void ejd_notify_status(const char *fmt, ...) EJ_PRINTF(1, 2);

/* READY=1 once every job of file is registered and scheduled (at start-up
 * and after a reload was applied or refused), with a STATUS= line giving
 * the job count; outcome (NULL at start-up) says how the last reload went. */
void ejd_notify_ready(size_t njobs, const char *file, const char *outcome);

/* RELOADING=1 with MONOTONIC_USEC= (systemd 253 and later want both for
 * Type=notify-reload; older ones ignore the second) at a SIGHUP. */
void ejd_notify_reloading(const char *file);

/* STOPPING=1 at SIGTERM/SIGINT: running items get drain_ms to finish. */
void ejd_notify_stopping(const char *signame, int drain_ms);

/* The directory systemd created for StateDirectory= ($STATE_DIRECTORY; its
 * first entry when the unit names several), or NULL when unset or empty.
 * Borrowed from a static buffer; main thread only. */
const char *ejd_systemd_state_dir(void);

#endif
