/* Shared between the exec module's files only. */
#ifndef EJ_EXEC_IMPL_H
#define EJ_EXEC_IMPL_H

#include "ejob/common.h"
#include "exec/internal.h"

/* Sets res->rc and replaces res->failure_cause with a formatted message. */
void ej__exec_fail(ej__exec_result *res, int rc, const char *fmt, ...) EJ_PRINTF(3, 4);

/* The runners of script.c and http.c; they fill res (already zeroed). What
 * runs (command line, request) is cfg's; job adds what the program gave.
 * cfg NULL: nothing to run (a failure). */
void ej__exec_run_script(const struct ej_script_job *job, const struct ej_job_config *cfg,
                         const ej_shard_context *ctx, const struct ej__exec_opts *opts,
                         ej__exec_result *res);
void ej__exec_run_http(const struct ej_http_job *job, const struct ej_job_config *cfg,
                       const ej_shard_context *ctx, ej__exec_result *res);

#endif
