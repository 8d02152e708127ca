/*
 * Execution history as JSON and text, shared by `ejob history` and the web
 * console so both show the same fields the same way. Inside the project
 * only (jansson types): not part of include/ejob/trace.h.
 */
#ifndef EJ_TRACE_JSON_H
#define EJ_TRACE_JSON_H

#include <stdint.h>
#include <stdio.h>

#include <jansson.h>

#include "ejob/trace.h"

/* "90s", "30m", "2h", "7d", "1w" back from now, or a local time
 * ("2026-01-01", "2026-01-01 10:00", "2026-01-01T10:00:00"): epoch ms, or
 * -1 when it is neither. */
int64_t ej__trace_parse_when(const char *s);

/* Writes bytes as text: valid UTF-8, \n and \t as they are, anything else
 * as \xNN; each line starts with indent. */
void ej__trace_print_bytes(FILE *f, const unsigned char *p, size_t n, const char *indent);

/* One row (without output): id, job, item, instance, ip, hostname, taskId,
 * source, completed, success, start, complete, durationMs, exitCode,
 * signal, httpStatus, fencingToken, failureCause. New reference. */
json_t *ej__trace_execution_json(const struct ej_trace_execution *e);

/* The row plus stdout / stderr (strings; not valid UTF-8 or holding NUL:
 * written with \xNN escapes and "stdoutBinary": true), their truncation
 * flags, and statusTrail. New reference. */
json_t *ej__trace_detail_json(const struct ej_trace_execution_detail *d);

/* What a run wrote from given offsets (ej_trace_read_output), for a live
 * reader: id, completed, success, stdout / stderr (as in the detail) and
 * outNext / errNext, the offsets to ask for next (a UTF-8 sequence cut by
 * the piece's end waits for the next one), stdoutTruncated /
 * stderrTruncated. New reference. */
json_t *ej__trace_output_json(const char *id, const struct ej_trace_output *o);

/* A fire-ledger reason ("paused", "missed" ...) in words; "not run" for
 * a name it does not know. Static string. */
const char *ej__trace_fire_reason_text(const char *reason);

/* One fire-ledger row: job, fireTimeMs, fireTime, item (-1: every item),
 * kind, ran, result (ran: succeeded, failed, running, unknown; else null),
 * reason and why (not run; else null), instance, executionId, recorded.
 * New reference. */
json_t *ej__trace_fire_json(const struct ej_trace_fire *f);

#endif
