/* The parsed form of a cron expression, shared by the parser and the
 * evaluator. */
#ifndef EJ_CRON_IMPL_H
#define EJ_CRON_IMPL_H

#include <stdbool.h>
#include <stdint.h>

#include "cron/internal.h"

enum {
    CRON_SECOND = 0,
    CRON_MINUTE = 1,
    CRON_HOUR = 2,
    CRON_DOM = 3,
    CRON_MONTH = 4,
    CRON_DOW = 5,
    CRON_YEAR = 6,
};

/* Quartz keeps these marker values inside its value sets. */
#define CRON_ALL_SPEC 99 /* '*' */
#define CRON_NO_SPEC 98  /* '?' */

#define CRON_YEAR_BITS 4096

/* A set of small integers (0..127) plus at most one larger value, which only
 * "n#k" in day-of-week can produce. */
typedef struct cron_set {
    uint64_t w[2];
    int32_t big; /* -1: none */
} cron_set;

struct ej_cron {
    cron_set sec, min, hour, dom, mon, dow;
    uint64_t years[CRON_YEAR_BITS / 64]; /* years 0..max_year */
    bool years_beyond;                   /* some year > max_year */
    int32_t max_year;                    /* Quartz's MAX_YEAR: this year + 100 */
    bool lastday_of_week;
    bool lastday_of_month;
    bool nearest_weekday;
    int32_t nth_day_of_week;
    int32_t lastday_offset;
    char text[];
};

static inline bool cron_set_has(const cron_set *s, int64_t v)
{
    if (v >= 0 && v < 128)
        return (s->w[v >> 6] >> (v & 63)) & 1;
    return s->big >= 0 && v == s->big;
}

static inline bool cron_set_empty(const cron_set *s)
{
    return s->w[0] == 0 && s->w[1] == 0 && s->big < 0;
}

/* tailSet(v).first(): the smallest member >= v. */
static inline bool cron_set_ceil(const cron_set *s, int64_t v, int *out)
{
    if (v < 0)
        v = 0;
    if (v < 128) {
        int word = (int)(v >> 6);
        uint64_t m = s->w[word] & (~0ULL << (v & 63));
        if (m != 0) {
            *out = word * 64 + __builtin_ctzll(m);
            return true;
        }
        if (word == 0 && s->w[1] != 0) {
            *out = 64 + __builtin_ctzll(s->w[1]);
            return true;
        }
    }
    if (s->big >= 0 && s->big >= v) {
        *out = s->big;
        return true;
    }
    return false;
}

static inline bool cron_set_first(const cron_set *s, int *out)
{
    return cron_set_ceil(s, 0, out);
}

#endif
