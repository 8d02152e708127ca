/*
 * The next fire time of a cron expression: Quartz 2.3.2's
 * CronExpression.getTimeAfter, step by step, over a small model of the
 * lenient java.util.GregorianCalendar it works in.
 *
 * The model: a calendar holds either an instant (and the local fields
 * computed from it) or local fields that were set since. Reading a field
 * first resolves the fields to an instant -- month and day overflow carry
 * into the next month and year, a wall time inside a daylight-saving gap
 * takes the offset in force before the gap, a repeated wall time the offset
 * after the change -- and then recomputes every field from that instant.
 * Quartz's results across DST follow from exactly this: it sets fields,
 * reads them back normalised, and carries on.
 */
#include <stdint.h>

#include "cron/cron_impl.h"
#include "ejob/error.h"

/* Quartz stops at year 2999; a pathological expression can make it loop for
 * a long time without progress, so bound the work. */
#define MAX_ITERATIONS 300000

typedef struct jcal {
    const ej_tz *tz;
    ej_tz_span span; /* the offset around the last instant, to skip lookups */
    int64_t t;       /* UTC seconds; valid when !dirty */
    int64_t year;
    int32_t mon0; /* 0-based, as java.util.Calendar.MONTH */
    int32_t dom, hour, min, sec;
    int32_t dow; /* 1 = Sunday; valid when !dirty */
    bool dirty;
} jcal;

static void jcal_fields(jcal *c)
{
    if (c->t < c->span.start || c->t >= c->span.end)
        ej__tz_span_at(c->tz, c->t, &c->span);
    int64_t local = c->t + c->span.off;
    int64_t days = ej__floordiv(local, 86400);
    int64_t sod = local - days * 86400;
    int m, d;
    ej__cron_civil_from_days(days, &c->year, &m, &d);
    c->mon0 = m - 1;
    c->dom = d;
    c->hour = (int32_t)(sod / 3600);
    c->min = (int32_t)(sod / 60 % 60);
    c->sec = (int32_t)(sod % 60);
    c->dow = (int32_t)ej__floormod(days + 4, 7) + 1;
}

static void jcal_set_time(jcal *c, int64_t t)
{
    c->t = t;
    c->dirty = false;
    jcal_fields(c);
}

static void jcal_complete(jcal *c)
{
    if (!c->dirty)
        return;
    int64_t y = c->year + ej__floordiv(c->mon0, 12);
    int m = (int)ej__floormod(c->mon0, 12) + 1;
    int64_t wall = (ej__cron_days_from_civil(y, m) + c->dom - 1) * 86400 + (int64_t)c->hour * 3600 +
                   (int64_t)c->min * 60 + c->sec;
    if (wall >= c->span.wall_lo && wall < c->span.wall_hi)
        c->t = wall - c->span.off;
    else
        c->t = wall - ej__tz_wall_offset_s(c->tz, wall, false);
    c->dirty = false;
    jcal_fields(c);
}

enum { F_YEAR, F_MONTH, F_DOM, F_HOUR, F_MIN, F_SEC, F_DOW };

static int64_t jget(jcal *c, int f)
{
    jcal_complete(c);
    switch (f) {
    case F_YEAR:
        return c->year;
    case F_MONTH:
        return c->mon0;
    case F_DOM:
        return c->dom;
    case F_HOUR:
        return c->hour;
    case F_MIN:
        return c->min;
    case F_SEC:
        return c->sec;
    default:
        return c->dow;
    }
}

static void jset(jcal *c, int f, int64_t v)
{
    /* java.util.Calendar fields are ints. */
    int32_t iv = (int32_t)v;
    switch (f) {
    case F_YEAR:
        c->year = iv;
        break;
    case F_MONTH:
        c->mon0 = iv;
        break;
    case F_DOM:
        c->dom = iv;
        break;
    case F_HOUR:
        c->hour = iv;
        break;
    case F_MIN:
        c->min = iv;
        break;
    default:
        c->sec = iv;
        break;
    }
    c->dirty = true;
}

/* GregorianCalendar.add(YEAR, n): complete, add, pin the day of month. */
static void jadd_year(jcal *c, int n)
{
    jcal_complete(c);
    c->year += n;
    c->dirty = true;
    int len = ej__cron_month_len(c->year, c->mon0 + 1);
    if (c->dom > len)
        c->dom = len;
}

/* Quartz's setCalendarHour: an hour lost to a DST gap becomes the next. */
static void set_calendar_hour(jcal *c, int64_t hour)
{
    jset(c, F_HOUR, hour);
    if (jget(c, F_HOUR) != hour && hour != 24)
        jset(c, F_HOUR, hour + 1);
}

static void start_of_day(jcal *c, int64_t day, int64_t mon0)
{
    jset(c, F_SEC, 0);
    jset(c, F_MIN, 0);
    jset(c, F_HOUR, 0);
    jset(c, F_DOM, day);
    jset(c, F_MONTH, mon0);
}

static int month_len(int64_t mon, int64_t year)
{
    return ej__cron_month_len(year, (int)mon);
}

static bool year_ceil(const ej_cron *cr, int64_t y, int64_t *out)
{
    if (y < 0)
        y = 0;
    if (y <= cr->max_year) {
        int64_t w = y >> 6;
        uint64_t m = cr->years[w] & (~0ULL << (y & 63));
        int64_t last_word = cr->max_year >> 6;
        while (true) {
            if (m != 0) {
                *out = w * 64 + __builtin_ctzll(m);
                return true;
            }
            if (++w > last_word)
                break;
            m = cr->years[w];
        }
    }
    if (cr->years_beyond) {
        *out = y > cr->max_year ? y : cr->max_year + 1;
        return true;
    }
    return false;
}

/*
 * The nearest-weekday adjustment of Quartz's 'W' branches. It works on a
 * second calendar set to midnight of the candidate day, then moves the day
 * to the nearest weekday and returns the candidate instant in *n_time.
 */
static int64_t nearest_weekday(const jcal *cl, int64_t year, int64_t mon, int64_t day, int64_t sec,
                               int64_t min, int64_t hr, int64_t *n_time)
{
    jcal tcal = {.tz = cl->tz, .span = cl->span};
    tcal.year = year;
    tcal.mon0 = (int32_t)(mon - 1);
    tcal.dom = (int32_t)day;
    tcal.hour = tcal.min = tcal.sec = 0;
    tcal.dirty = true;
    int ldom = month_len(mon, year);
    int64_t dow = jget(&tcal, F_DOW);
    if (dow == 7 && day == 1)
        day += 2;
    else if (dow == 7)
        day -= 1;
    else if (dow == 1 && day == ldom)
        day -= 2;
    else if (dow == 1)
        day += 1;
    jset(&tcal, F_SEC, sec);
    jset(&tcal, F_MIN, min);
    jset(&tcal, F_HOUR, hr);
    jset(&tcal, F_DOM, day);
    jset(&tcal, F_MONTH, mon - 1);
    jcal_complete(&tcal);
    *n_time = tcal.t;
    return day;
}

/* What a step of the search says: the field fits (go on to the next
 * field), the calendar moved (start again from the second), or there is
 * no next time. */
enum step { STEP_ON, STEP_AGAIN, STEP_NONE };

/* The wall time the day step looks at (Quartz's sec, min, hr locals). */
struct wall {
    int64_t sec, min, hr;
};

/* Seconds: the next allowed second, carrying into the minute. Never
 * starts again. */
static void seek_second(const ej_cron *cr, jcal *cl, struct wall *w)
{
    int sv = 0;
    int64_t sec = jget(cl, F_SEC);
    int64_t min = jget(cl, F_MIN);
    if (cron_set_ceil(&cr->sec, sec, &sv)) {
        sec = sv;
    } else {
        cron_set_first(&cr->sec, &sv);
        sec = sv;
        min++;
        jset(cl, F_MIN, min);
    }
    jset(cl, F_SEC, sec);
    w->sec = sec;
}

static enum step seek_minute(const ej_cron *cr, jcal *cl, struct wall *w)
{
    int sv = 0;
    int64_t min = jget(cl, F_MIN);
    int64_t hr = jget(cl, F_HOUR);
    int64_t t = -1;
    if (cron_set_ceil(&cr->min, min, &sv)) {
        t = min;
        min = sv;
    } else {
        cron_set_first(&cr->min, &sv);
        min = sv;
        hr++;
    }
    if (min != t) {
        jset(cl, F_SEC, 0);
        jset(cl, F_MIN, min);
        set_calendar_hour(cl, hr);
        return STEP_AGAIN;
    }
    jset(cl, F_MIN, min);
    w->min = min;
    return STEP_ON;
}

static enum step seek_hour(const ej_cron *cr, jcal *cl, struct wall *w)
{
    int sv = 0;
    int64_t hr = jget(cl, F_HOUR);
    int64_t day = jget(cl, F_DOM);
    int64_t t = -1;
    if (cron_set_ceil(&cr->hour, hr, &sv)) {
        t = hr;
        hr = sv;
    } else {
        cron_set_first(&cr->hour, &sv);
        hr = sv;
        day++;
    }
    if (hr != t) {
        jset(cl, F_SEC, 0);
        jset(cl, F_MIN, 0);
        jset(cl, F_DOM, day);
        set_calendar_hour(cl, hr);
        return STEP_AGAIN;
    }
    jset(cl, F_HOUR, hr);
    w->hr = hr;
    return STEP_ON;
}

/* Day by day-of-month ('L', 'LW', 'W', lists): *day is the day found. */
static enum step seek_day_of_month(const ej_cron *cr, jcal *cl, const struct wall *w,
                                   int64_t after_s, int64_t *day_out)
{
    int sv = 0;
    int64_t day = jget(cl, F_DOM);
    int64_t mon = jget(cl, F_MONTH) + 1;
    int64_t t = -1;
    int64_t tmon = mon;
    int st_first;
    bool st = cron_set_ceil(&cr->dom, day, &st_first);
    if (cr->lastday_of_month) {
        t = day;
        day = month_len(mon, jget(cl, F_YEAR)) - cr->lastday_offset;
        if (!cr->nearest_weekday) {
            if (t > day) {
                mon++;
                if (mon > 12) {
                    mon = 1;
                    tmon = 3333;
                    jadd_year(cl, 1);
                }
                day = 1;
            }
        } else {
            int64_t n_time;
            day = nearest_weekday(cl, jget(cl, F_YEAR), mon, day, w->sec, w->min, w->hr, &n_time);
            if (n_time < after_s) {
                day = 1;
                mon++;
            }
        }
    } else if (cr->nearest_weekday) {
        t = day;
        cron_set_first(&cr->dom, &sv);
        day = sv;
        int64_t n_time;
        day = nearest_weekday(cl, jget(cl, F_YEAR), mon, day, w->sec, w->min, w->hr, &n_time);
        if (n_time < after_s) {
            cron_set_first(&cr->dom, &sv);
            day = sv;
            mon++;
        }
    } else if (st) {
        t = day;
        day = st_first;
        if (day > month_len(mon, jget(cl, F_YEAR))) {
            cron_set_first(&cr->dom, &sv);
            day = sv;
            mon++;
        }
    } else {
        cron_set_first(&cr->dom, &sv);
        day = sv;
        mon++;
    }
    if (day != t || mon != tmon) {
        start_of_day(cl, day, mon - 1);
        return STEP_AGAIN;
    }
    *day_out = day;
    return STEP_ON;
}

/* How many days from day-of-week cdow to dow (0..6). */
static int64_t days_to(int64_t cdow, int64_t dow)
{
    if (cdow < dow)
        return dow - cdow;
    if (cdow > dow)
        return dow + (7 - cdow);
    return 0;
}

/* Day by day-of-week ('L', '#', lists): *day is the day found. */
static enum step seek_day_of_week(const ej_cron *cr, jcal *cl, int64_t *day_out)
{
    int sv = 0;
    int64_t day = jget(cl, F_DOM);
    int64_t mon = jget(cl, F_MONTH) + 1;
    if (cr->lastday_of_week) {
        cron_set_first(&cr->dow, &sv);
        int64_t add = days_to(jget(cl, F_DOW), sv);
        int ldays = month_len(mon, jget(cl, F_YEAR));
        if (day + add > ldays) {
            start_of_day(cl, 1, mon);
            return STEP_AGAIN;
        }
        while (day + add + 7 <= ldays)
            add += 7;
        day += add;
        if (add > 0) {
            start_of_day(cl, day, mon - 1);
            return STEP_AGAIN;
        }
    } else if (cr->nth_day_of_week != 0) {
        cron_set_first(&cr->dow, &sv);
        int64_t add = days_to(jget(cl, F_DOW), sv);
        bool shifted = add > 0;
        day += add;
        int64_t week = day / 7;
        if (day % 7 > 0)
            week++;
        add = (cr->nth_day_of_week - week) * 7;
        day += add;
        if (add < 0 || day > month_len(mon, jget(cl, F_YEAR))) {
            start_of_day(cl, 1, mon);
            return STEP_AGAIN;
        } else if (add > 0 || shifted) {
            start_of_day(cl, day, mon - 1);
            return STEP_AGAIN;
        }
    } else {
        int64_t cdow = jget(cl, F_DOW);
        cron_set_first(&cr->dow, &sv);
        int64_t dow = sv;
        if (cron_set_ceil(&cr->dow, cdow, &sv))
            dow = sv;
        int64_t add = days_to(cdow, dow);
        int ldays = month_len(mon, jget(cl, F_YEAR));
        if (day + add > ldays) {
            start_of_day(cl, 1, mon);
            return STEP_AGAIN;
        } else if (add > 0) {
            start_of_day(cl, day + add, mon - 1);
            return STEP_AGAIN;
        }
    }
    *day_out = day;
    return STEP_ON;
}

static enum step seek_day(const ej_cron *cr, jcal *cl, const struct wall *w, int64_t after_s)
{
    bool dom_spec = !cron_set_has(&cr->dom, CRON_NO_SPEC);
    bool dow_spec = !cron_set_has(&cr->dow, CRON_NO_SPEC);
    int64_t day = 0;
    enum step r;
    if (dom_spec && !dow_spec)
        r = seek_day_of_month(cr, cl, w, after_s, &day);
    else if (dow_spec && !dom_spec)
        r = seek_day_of_week(cr, cl, &day);
    else
        return STEP_NONE; /* the parser refuses these */
    if (r == STEP_ON)
        jset(cl, F_DOM, day);
    return r;
}

static enum step seek_month(const ej_cron *cr, jcal *cl)
{
    int sv = 0;
    int64_t mon = jget(cl, F_MONTH) + 1;
    int64_t year = jget(cl, F_YEAR);
    int64_t t = -1;
    if (year > cr->max_year)
        return STEP_NONE;
    if (cron_set_ceil(&cr->mon, mon, &sv)) {
        t = mon;
        mon = sv;
    } else {
        cron_set_first(&cr->mon, &sv);
        mon = sv;
        year++;
    }
    if (mon != t) {
        start_of_day(cl, 1, mon - 1);
        jset(cl, F_YEAR, year);
        return STEP_AGAIN;
    }
    jset(cl, F_MONTH, mon - 1);
    return STEP_ON;
}

/* The last step: STEP_ON means the calendar holds the answer. */
static enum step seek_year(const ej_cron *cr, jcal *cl)
{
    int64_t year = jget(cl, F_YEAR);
    int64_t y;
    if (!year_ceil(cr, year, &y))
        return STEP_NONE;
    if (y != year) {
        start_of_day(cl, 1, 0);
        jset(cl, F_YEAR, y);
        return STEP_AGAIN;
    }
    jset(cl, F_YEAR, y);
    return STEP_ON;
}

/* One pass over the fields, second to year, as Quartz's loop body. */
static enum step seek_once(const ej_cron *cr, jcal *cl, int64_t after_s)
{
    struct wall w = {0};
    seek_second(cr, cl, &w);
    enum step r = seek_minute(cr, cl, &w);
    if (r == STEP_ON)
        r = seek_hour(cr, cl, &w);
    if (r == STEP_ON)
        r = seek_day(cr, cl, &w, after_s);
    if (r == STEP_ON)
        r = seek_month(cr, cl);
    if (r == STEP_ON)
        r = seek_year(cr, cl);
    return r;
}

/* Brent's cycle detection over the instant at the top of the loop: the
 * loop's state is that instant alone, so a repeat means Quartz would never
 * return. */
struct cycle {
    int64_t saved_t, max_t;
    int power, lam;
};

static void cycle_reset(struct cycle *c)
{
    c->saved_t = INT64_MIN;
    c->power = 1;
    c->lam = 0;
}

/* True when t was seen before (the search loops); else records it. */
static bool cycle_repeats(struct cycle *c, int64_t t)
{
    if (t == c->saved_t)
        return true;
    if (t > c->max_t)
        c->max_t = t;
    if (++c->lam == c->power) {
        c->saved_t = t;
        c->power *= 2;
        c->lam = 0;
    }
    return false;
}

int ej_cron_next(const ej_cron *cr, const ej_tz *tz, int64_t after_epoch_ms, int64_t *next_epoch_ms)
{
    if (cr == NULL || next_epoch_ms == NULL)
        return EJ_EINVAL;
    if (after_epoch_ms > INT64_MAX - 1000)
        return EJ_ENOTFOUND;
    /* Quartz: afterTime + 1 s, milliseconds dropped. Its 'W' branches compare
     * a candidate against afterTime at second resolution here (Quartz's
     * candidate carries the wall clock's milliseconds, which makes the
     * comparison within the same second depend on the moment it runs). */
    int64_t after_s = ej__floordiv(after_epoch_ms + 1000, 1000);
    if (after_s > INT64_MAX / 2000 || after_s < -(INT64_MAX / 2000))
        return EJ_ENOTFOUND;
    jcal cl = {.tz = tz};
    ej__tz_span_at(tz, after_s, &cl.span);
    jcal_set_time(&cl, after_s);

    struct cycle cyc = {.max_t = INT64_MIN};
    cycle_reset(&cyc);
    for (int iter = 0;; iter++) {
        if (iter >= MAX_ITERATIONS)
            return EJ_ENOTFOUND;
        if (jget(&cl, F_YEAR) > 2999)
            return EJ_ENOTFOUND;
        if (cycle_repeats(&cyc, cl.t)) {
            /* Deviation (docs/cron.md): Quartz loops here forever, bouncing
             * between a 'W' candidate that a DST gap pushed forward and the
             * day after it. Search on from the furthest instant reached and
             * count 'W' candidates behind it as passed. */
            after_s = cyc.max_t + 1;
            jcal_set_time(&cl, after_s);
            cycle_reset(&cyc);
            continue;
        }
        enum step r = seek_once(cr, &cl, after_s);
        if (r == STEP_NONE)
            return EJ_ENOTFOUND;
        if (r == STEP_ON)
            break;
    }
    jcal_complete(&cl);
    *next_epoch_ms = cl.t * 1000;
    return 0;
}
