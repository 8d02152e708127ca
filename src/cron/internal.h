/* Internal interfaces shared by the files of the cron module. */
#ifndef EJ_CRON_INTERNAL_H
#define EJ_CRON_INTERNAL_H

#include <stdbool.h>
#include <stdint.h>

#include "ejob/cron.h"

/* Floor division and modulo for a positive divisor. */
static inline int64_t ej__floordiv(int64_t a, int64_t b)
{
    int64_t q = a / b;
    return (a % b != 0 && (a < 0)) ? q - 1 : q;
}

static inline int64_t ej__floormod(int64_t a, int64_t b)
{
    int64_t m = a % b;
    return m < 0 ? m + b : m;
}

/* Days since 1970-01-01 of year-month-01 in the proleptic Gregorian
 * calendar (month 1..12). */
int64_t ej__cron_days_from_civil(int64_t year, int month);

/* The civil date of a day number (days since 1970-01-01). */
void ej__cron_civil_from_days(int64_t days, int64_t *year, int *month, int *day);

bool ej__cron_is_leap(int64_t year);

/* Days in a month (1..12) of a year. */
int ej__cron_month_len(int64_t year, int month);

/* The offset (seconds east of UTC) in force at utc_s (seconds since the
 * epoch). tz NULL means UTC. */
int32_t ej__tz_offset_at_s(const ej_tz *tz, int64_t utc_s);

/* The offset to subtract from a wall time (seconds since the epoch as if
 * the wall time were UTC) to get the instant, as java.util.GregorianCalendar
 * chooses it: a wall time in a gap takes the offset before the gap, a
 * repeated wall time the offset after the change. With earlier set, a
 * repeated wall time takes the offset before the change instead. */
int32_t ej__tz_wall_offset_s(const ej_tz *tz, int64_t wall_s, bool earlier);

/* A stretch of time with one offset, for callers that look up many nearby
 * instants: the offset applies to UTC seconds in [start, end), and the wall
 * times in [wall_lo, wall_hi) resolve to it (as ej__tz_wall_offset_s does
 * with earlier false). An empty span (start == end) means "look up each
 * time". */
typedef struct ej_tz_span {
    int64_t start, end;
    int64_t wall_lo, wall_hi;
    int32_t off;
} ej_tz_span;

void ej__tz_span_at(const ej_tz *tz, int64_t utc_s, ej_tz_span *span);

/* The tz database's directory: $TZDIR when absolute, else
 * /usr/share/zoneinfo. Borrowed. */
const char *ej__tz_dir(void);

#endif
