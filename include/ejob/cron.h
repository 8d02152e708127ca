/*
 * Cron expressions (Quartz 2.3.2 CronExpression syntax and semantics) and
 * IANA time zones read from the system's TZif files (/usr/share/zoneinfo).
 *
 * Both handle types are immutable once created and may be shared between
 * threads without locking. Time zones are cached process-wide: loading the
 * same name twice returns the same handle.
 */
#ifndef EJOB_CRON_H
#define EJOB_CRON_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "ejob/common.h"

/* ---------------------------------------------------------------- zones */

/* A time zone: the transitions of one IANA zone plus its POSIX rule for
 * instants beyond the table. Opaque. */
typedef struct ej_tz ej_tz;

/* A wall-clock (civil) time in the proleptic Gregorian calendar. */
typedef struct ej_civil_time {
    int32_t year;   /* e.g. 2026 */
    int32_t month;  /* 1..12 */
    int32_t day;    /* 1..31 */
    int32_t hour;   /* 0..23 */
    int32_t minute; /* 0..59 */
    int32_t second; /* 0..59 */
    int32_t ms;     /* 0..999 */
    int32_t wday;   /* 1..7, Sunday = 1 (as Quartz and java.util.Calendar); output only */
} ej_civil_time;

/* How ej_tz_local_to_utc() resolves a wall time that occurs twice (the hour
 * repeated when clocks go back). A wall time that does not exist (skipped
 * when clocks go forward) is always read with the offset in force before the
 * gap, so it maps to an instant after the gap: 02:30 on a day New York skips
 * from 02:00 to 03:00 becomes 03:30 EDT. */
typedef enum ej_tz_resolve {
    EJ_TZ_LATER = 0, /* the later instant (the offset after the change); this
                        is what java.util.GregorianCalendar does */
    EJ_TZ_EARLIER = 1,
} ej_tz_resolve;

/*
 * Loads a time zone.
 *
 * name: an IANA zone name ("Asia/Shanghai", "UTC", "America/New_York"),
 *       read from /usr/share/zoneinfo (or $TZDIR). NULL or "" means the
 *       host's zone: $TZ if set (":Name" or "Name"; a bare POSIX rule string
 *       such as "CET-1CEST,M3.5.0,M10.5.0/3" is accepted too), else
 *       /etc/localtime, else UTC.
 * out:  receives the zone. The handle is cached and immortal: it stays valid
 *       for the life of the process, also after ej_tz_free().
 *
 * Returns 0; EJ_EINVAL for a NULL out or a malformed name (empty component,
 *   "..", a leading '/', characters outside [A-Za-z0-9_+-./]); EJ_ENOTFOUND
 *   when no zone file has that name; EJ_EPARSE when the file is not valid
 *   TZif; EJ_ENOMEM; or -errno from reading the file.
 * Thread-safe.
 */
EJ_EXTERN int ej_tz_load(const char *name, ej_tz **out);

/*
 * The names of the tz database that ej_tz_load loads (its zones and their
 * links, from tzdata.zi in the directory ej_tz_load reads), sorted: what a
 * form offers as time zones. *names: NULL-terminated, free with
 * ej_tz_names_free; *count may be NULL. Returns 0, EJ_ENOTFOUND (no
 * tzdata.zi), EJ_ENOMEM or -errno. Thread-safe.
 */
EJ_EXTERN int ej_tz_names(char ***names, size_t *count);
EJ_EXTERN void ej_tz_names_free(char **names);

/* Releases a handle from ej_tz_load(). Zones are cached for the process, so
 * this does nothing today; call it anyway. Accepts NULL. Thread-safe. */
EJ_EXTERN void ej_tz_free(ej_tz *tz);

/* The zone's name as loaded ("Europe/London"; "UTC" for the built-in UTC;
 * for the host zone, the name found through $TZ or /etc/localtime, else
 * "localtime"). Borrowed for the life of the process. Never NULL. */
EJ_EXTERN const char *ej_tz_name(const ej_tz *tz);

/* The built-in UTC zone (needs no file). Never NULL. Thread-safe. */
EJ_EXTERN const ej_tz *ej_tz_utc(void);

/* The zone's offset from UTC, in seconds east of Greenwich, at the instant
 * epoch_ms (milliseconds since 1970-01-01T00:00:00Z). tz NULL means UTC.
 * Instants before the first transition use the zone's first local time type
 * (LMT); instants after the table follow the POSIX rule in the file's footer.
 * Never fails. Thread-safe; does not allocate. */
EJ_EXTERN int32_t ej_tz_offset_at(const ej_tz *tz, int64_t epoch_ms);

/* Converts an instant to the zone's wall time. out->wday is filled.
 * offset_s (may be NULL) receives the offset in force. tz NULL means UTC.
 * Never fails. Thread-safe; does not allocate. */
EJ_EXTERN void ej_tz_to_local(const ej_tz *tz, int64_t epoch_ms, ej_civil_time *out,
                              int32_t *offset_s);

/* The instant as ISO 8601 in the zone, with its offset in force:
 * "2026-01-01T08:00:00+08:00" (seconds of an offset appended when it has
 * some). tz NULL means UTC. Thread-safe. */
EJ_EXTERN void ej_tz_format_iso(const ej_tz *tz, int64_t epoch_ms, char *buf, size_t len);

/* Converts a wall time in the zone to an instant (epoch ms), resolving gaps
 * and repeated hours as described at ej_tz_resolve. Fields outside their
 * ranges are normalised as java.util.Calendar does when lenient (month 13 is
 * January of the next year, day 0 the last day of the previous month, ...);
 * wday is ignored. tz NULL means UTC.
 * Returns 0; EJ_EINVAL when local or epoch_ms is NULL or the year is outside
 *   -1000000..1000000. Thread-safe; does not allocate.
 */
EJ_EXTERN int ej_tz_local_to_utc(const ej_tz *tz, const ej_civil_time *local, ej_tz_resolve resolve,
                                 int64_t *epoch_ms);

/* ----------------------------------------------------------------- cron */

/* A parsed cron expression. Opaque, immutable. */
typedef struct ej_cron ej_cron;

/*
 * Parses a Quartz cron expression:
 *   second minute hour day-of-month month day-of-week [year]
 * with `* ? - , /`, `L`, `L-n`, `W`, `LW`, `#`, month names JAN..DEC and day
 * names SUN..SAT (SUN = 1), case-insensitive, exactly as Quartz 2.3.2's
 * CronExpression accepts them (including its rules that one of day-of-month
 * and day-of-week must be '?').
 *
 * expr:   the expression (NUL-terminated).
 * out:    receives the parsed expression; caller frees with ej_cron_free().
 *         May be NULL to only validate.
 * err:    on EJ_ECRON, receives a message naming the field and the reason,
 *         e.g. "day-of-week: '#' value must be 1..5, got 6". May be NULL.
 * errlen: size of err in bytes, including the NUL.
 *
 * Returns 0; EJ_ECRON for an invalid expression; EJ_EINVAL when expr is
 *   NULL; EJ_ENOMEM.
 * Thread-safe.
 */
EJ_EXTERN int ej_cron_parse(const char *expr, ej_cron **out, char *err, size_t errlen);

/* Frees an expression from ej_cron_parse(). Accepts NULL. */
EJ_EXTERN void ej_cron_free(ej_cron *cron);

/* The expression's text as given to ej_cron_parse(). Borrowed until
 * ej_cron_free(). */
EJ_EXTERN const char *ej_cron_text(const ej_cron *cron);

/*
 * The first fire time strictly after after_epoch_ms, evaluated in zone tz
 * (NULL means UTC), exactly as Quartz 2.3.2's
 * CronExpression.getTimeAfter() with setTimeZone(tz) computes it: second
 * resolution (milliseconds of after_epoch_ms are dropped before searching),
 * including its behaviour across daylight-saving gaps and repeated hours.
 * Deviations from Quartz are listed in docs/cron.md.
 *
 * Returns 0 and sets *next_epoch_ms; EJ_ENOTFOUND when there is no later
 *   fire time (e.g. the year field has passed, or "0 0 0 30 2 ?");
 *   EJ_EINVAL when cron or next_epoch_ms is NULL.
 * Thread-safe; does not allocate; typically well under 2 microseconds.
 */
EJ_EXTERN int ej_cron_next(const ej_cron *cron, const ej_tz *tz, int64_t after_epoch_ms,
                           int64_t *next_epoch_ms);

#endif
