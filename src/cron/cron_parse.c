/*
 * Parsing of Quartz cron expressions. This follows Quartz 2.3.2's
 * CronExpression.buildExpression step by step, so that exactly the same
 * strings are accepted and produce the same value sets -- including its
 * leniencies (trailing characters after a complete value are ignored, "5X"
 * means 5) -- and every case where Quartz throws (a Java runtime exception
 * inside the parser also makes Quartz reject the expression) is an error
 * here. Deviations are listed in docs/cron.md.
 */
#include <limits.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "cron/cron_impl.h"
#include "ejob/error.h"

#define MAX_EXPR_LEN 4096

static const char *const field_names[] = {"second", "minute",      "hour", "day-of-month",
                                          "month",  "day-of-week", "year"};

typedef struct parser {
    ej_cron *c;
    int field;
    char *err;
    size_t errlen;
} parser;

/* A token: the bytes of one comma-separated value (upper case). */
typedef struct tok {
    const char *s;
    int len;
} tok;

static bool fail(parser *p, const char *fmt, ...) __attribute__((format(printf, 2, 3)));

static bool fail(parser *p, const char *fmt, ...)
{
    if (p->err != NULL && p->errlen > 0) {
        int n = snprintf(p->err, p->errlen, "%s: ", field_names[p->field]);
        if (n >= 0 && (size_t)n < p->errlen) {
            va_list ap;
            va_start(ap, fmt);
            vsnprintf(p->err + n, p->errlen - (size_t)n, fmt, ap);
            va_end(ap);
        }
    }
    return false;
}

static bool fail_end(parser *p, tok t)
{
    return fail(p, "value '%.*s' ends too early", t.len, t.s);
}

static bool is_digit(char c)
{
    return c >= '0' && c <= '9';
}

/* Integer.parseInt over s[from, to): optional sign, ASCII digits, 32-bit. */
static bool java_parse_int(const char *s, int from, int to, int64_t *out)
{
    int i = from;
    bool neg = false;
    if (i < to && (s[i] == '+' || s[i] == '-')) {
        neg = s[i] == '-';
        i++;
    }
    if (i >= to)
        return false;
    int64_t v = 0;
    for (; i < to; i++) {
        if (!is_digit(s[i]))
            return false;
        v = v * 10 + (s[i] - '0');
        if (v > (int64_t)INT_MAX + 1)
            return false;
    }
    v = neg ? -v : v;
    if (v > INT_MAX || v < INT_MIN)
        return false;
    *out = v;
    return true;
}

/* Quartz's getValue: v followed by the digits at s[i...]; pos is where the
 * digits end (one past the end when they reach it, as Quartz has it). */
static bool get_value(parser *p, tok t, int v, int i, int64_t *value, int *pos)
{
    if (i >= t.len)
        return fail_end(p, t);
    char buf[32];
    int n = snprintf(buf, sizeof(buf), "%d", v);
    while (i < t.len && is_digit(t.s[i])) {
        if (n >= 12)
            return fail(p, "number in '%.*s' is too large", t.len, t.s);
        buf[n++] = t.s[i++];
    }
    buf[n] = '\0';
    *pos = i < t.len ? i : i + 1;
    if (!java_parse_int(buf, 0, n, value))
        return fail(p, "number in '%.*s' is too large", t.len, t.s);
    return true;
}

static cron_set *field_set(ej_cron *c, int field)
{
    switch (field) {
    case CRON_SECOND:
        return &c->sec;
    case CRON_MINUTE:
        return &c->min;
    case CRON_HOUR:
        return &c->hour;
    case CRON_DOM:
        return &c->dom;
    case CRON_MONTH:
        return &c->mon;
    default:
        return &c->dow;
    }
}

static void year_add(ej_cron *c, int64_t y)
{
    if (y > c->max_year)
        c->years_beyond = true;
    else if (y >= 0)
        c->years[y >> 6] |= 1ULL << (y & 63);
}

/* TreeSet.add without range checks. */
static bool set_add(parser *p, int64_t v)
{
    if (p->field == CRON_YEAR) {
        year_add(p->c, v);
        return true;
    }
    cron_set *s = field_set(p->c, p->field);
    if (v >= 0 && v < 128) {
        s->w[v >> 6] |= 1ULL << (v & 63);
        return true;
    }
    if (v < 0 || (s->big >= 0 && s->big != v))
        return fail(p, "value %lld is out of range", (long long)v);
    s->big = (int32_t)v;
    return true;
}

/* Quartz's addToSet: checks the range of the field, then adds val, or the
 * values from val to end (wrapping past the field's maximum) every incr. */
static bool add_to_set(parser *p, int64_t val, int64_t end, int64_t incr)
{
    int f = p->field;
    switch (f) {
    case CRON_SECOND:
    case CRON_MINUTE:
        if ((val < 0 || val > 59 || end > 59) && val != CRON_ALL_SPEC)
            return fail(p, "values must be 0..59, got %lld", (long long)(end > 59 ? end : val));
        break;
    case CRON_HOUR:
        if ((val < 0 || val > 23 || end > 23) && val != CRON_ALL_SPEC)
            return fail(p, "values must be 0..23, got %lld", (long long)(end > 23 ? end : val));
        break;
    case CRON_DOM:
        if ((val < 1 || val > 31 || end > 31) && val != CRON_ALL_SPEC && val != CRON_NO_SPEC)
            return fail(p, "values must be 1..31, got %lld", (long long)(end > 31 ? end : val));
        break;
    case CRON_MONTH:
        if ((val < 1 || val > 12 || end > 12) && val != CRON_ALL_SPEC)
            return fail(p, "values must be 1..12 (or JAN..DEC), got %lld",
                        (long long)(end > 12 ? end : val));
        break;
    case CRON_DOW:
        if ((val == 0 || val > 7 || end > 7) && val != CRON_ALL_SPEC && val != CRON_NO_SPEC)
            return fail(p, "values must be 1..7 (or SUN..SAT), got %lld",
                        (long long)(end > 7 ? end : val));
        break;
    default:
        break;
    }
    if ((incr == 0 || incr == -1) && val != CRON_ALL_SPEC)
        return set_add(p, val != -1 ? val : CRON_NO_SPEC);

    int64_t start = val, stop = end;
    if (val == CRON_ALL_SPEC && incr <= 0) {
        incr = 1;
        if (!set_add(p, CRON_ALL_SPEC))
            return false;
    }
    static const int lo[] = {0, 0, 0, 1, 1, 1, 1970};
    static const int hi[] = {59, 59, 23, 31, 12, 7, 0};
    if (stop == -1)
        stop = f == CRON_YEAR ? p->c->max_year : hi[f];
    if (start == -1 || start == CRON_ALL_SPEC)
        start = lo[f];
    int64_t max = -1;
    if (stop < start) {
        static const int wrap[] = {60, 60, 24, 31, 12, 7, 0};
        if (f == CRON_YEAR)
            return fail(p, "range start %lld is after its end %lld", (long long)start,
                        (long long)stop);
        max = wrap[f];
        stop += max;
    }
    /* Quartz steps with 32-bit ints: a step past INT_MAX wraps around and
     * fills the set with negative numbers. Refuse what would overflow. */
    int64_t last = start + (stop - start) / incr * incr;
    if (last + incr > INT_MAX)
        return fail(p, "increment %lld is too large", (long long)incr);
    for (int64_t i = start; i <= stop; i += incr) {
        if (f == CRON_YEAR && i > p->c->max_year) {
            p->c->years_beyond = true;
            break;
        }
        int64_t v = i;
        if (max != -1) {
            v = i % max;
            if (v == 0 && (f == CRON_MONTH || f == CRON_DOW || f == CRON_DOM))
                v = max;
        }
        if (!set_add(p, v))
            return false;
    }
    return true;
}

static bool check_increment(parser *p, int64_t incr)
{
    static const int limit[] = {59, 59, 23, 31, 12, 7, INT_MAX};
    if (incr > limit[p->field])
        return fail(p, "increment must be at most %d, got %lld", limit[p->field], (long long)incr);
    return true;
}

/* Quartz's checkNext: what follows a number at s[i]. */
static bool check_next(parser *p, tok t, int i, int64_t val)
{
    int f = p->field;
    if (i >= t.len)
        return add_to_set(p, val, -1, -1);
    char c = t.s[i];
    if (c == 'L') {
        if (f != CRON_DOW)
            return fail(p, "'L' after a number is only valid in day-of-week");
        if (val < 1 || val > 7)
            return fail(p, "'L' needs a day 1..7, got %lld", (long long)val);
        p->c->lastday_of_week = true;
        return set_add(p, val);
    }
    if (c == 'W') {
        if (f != CRON_DOM)
            return fail(p, "'W' is only valid in day-of-month");
        /* Quartz rejects only > 31; with 0 its getTimeAfter never returns
         * (a deviation, docs/cron.md). */
        if (val > 31 || val < 1)
            return fail(p, "'W' needs a day 1..31, got %lld", (long long)val);
        p->c->nearest_weekday = true;
        return set_add(p, val);
    }
    if (c == '#') {
        if (f != CRON_DOW)
            return fail(p, "'#' is only valid in day-of-week");
        int64_t nth;
        if (!java_parse_int(t.s, i + 1, t.len, &nth))
            return fail(p, "'#' must be followed by a number 1..5, got '%.*s'", t.len - i - 1,
                        t.s + i + 1);
        if (nth < 1 || nth > 5)
            return fail(p, "'#' value must be 1..5, got %lld", (long long)nth);
        p->c->nth_day_of_week = (int32_t)nth;
        return set_add(p, val);
    }
    if (c == '-') {
        i++;
        if (i >= t.len)
            return fail_end(p, t);
        if (!is_digit(t.s[i]))
            return fail(p, "range end in '%.*s' is not a number", t.len, t.s);
        int v = t.s[i] - '0';
        int64_t end = v;
        i++;
        if (i >= t.len)
            return add_to_set(p, val, end, 1);
        if (is_digit(t.s[i]) && !get_value(p, t, v, i, &end, &i))
            return false;
        if (i < t.len && t.s[i] == '/') {
            i++;
            if (i >= t.len)
                return fail_end(p, t);
            if (!is_digit(t.s[i]))
                return fail(p, "increment in '%.*s' is not a number", t.len, t.s);
            int v2 = t.s[i] - '0';
            i++;
            if (i >= t.len)
                return add_to_set(p, val, end, v2);
            if (is_digit(t.s[i])) {
                int64_t v3;
                int pos;
                if (!get_value(p, t, v2, i, &v3, &pos))
                    return false;
                return add_to_set(p, val, end, v3);
            }
            return add_to_set(p, val, end, v2);
        }
        return add_to_set(p, val, end, 1);
    }
    if (c == '/') {
        if (i + 1 >= t.len)
            return fail(p, "'/' must be followed by an integer");
        i++;
        if (!is_digit(t.s[i]))
            return fail(p, "increment in '%.*s' is not a number", t.len, t.s);
        int v2 = t.s[i] - '0';
        i++;
        if (i >= t.len)
            return check_increment(p, v2) && add_to_set(p, val, -1, v2);
        if (is_digit(t.s[i])) {
            int64_t v3;
            int pos;
            if (!get_value(p, t, v2, i, &v3, &pos))
                return false;
            return check_increment(p, v3) && add_to_set(p, val, -1, v3);
        }
        return fail(p, "unexpected character '%c' after '/'", t.s[i]);
    }
    return add_to_set(p, val, -1, 0);
}

static int month_number(const char *s)
{
    static const char *const names[] = {"JAN", "FEB", "MAR", "APR", "MAY", "JUN",
                                        "JUL", "AUG", "SEP", "OCT", "NOV", "DEC"};
    for (int i = 0; i < 12; i++)
        if (memcmp(s, names[i], 3) == 0)
            return i;
    return -1;
}

static int day_number(const char *s)
{
    static const char *const names[] = {"SUN", "MON", "TUE", "WED", "THU", "FRI", "SAT"};
    for (int i = 0; i < 7; i++)
        if (memcmp(s, names[i], 3) == 0)
            return i + 1;
    return -1;
}

/* "^L-[0-9]*[W]?$" */
static bool is_l_offset(tok t)
{
    if (t.len < 2 || t.s[0] != 'L' || t.s[1] != '-')
        return false;
    int i = 2;
    while (i < t.len && is_digit(t.s[i]))
        i++;
    if (i < t.len && t.s[i] == 'W')
        i++;
    return i == t.len;
}

static bool tok_is(tok t, const char *s)
{
    return (size_t)t.len == strlen(s) && memcmp(t.s, s, (size_t)t.len) == 0;
}

/* A value spelled with names: JAN, JAN-MAR, MON#2, FRIL ... */
static bool store_named(parser *p, tok t)
{
    int f = p->field;
    int i = 0;
    if (t.len < 3)
        return fail(p, "unknown name '%.*s'", t.len, t.s);
    int64_t sval = -1, eval = -1;
    if (f == CRON_MONTH) {
        sval = month_number(t.s) + 1;
        if (sval <= 0)
            return fail(p, "invalid month name '%.3s'", t.s);
        if (t.len > 3 && t.s[3] == '-') {
            i = 4;
            if (t.len < i + 3)
                return fail(p, "invalid month name '%.*s'", t.len - i, t.s + i);
            eval = month_number(t.s + i) + 1;
            if (eval <= 0)
                return fail(p, "invalid month name '%.3s'", t.s + i);
        }
    } else if (f == CRON_DOW) {
        sval = day_number(t.s);
        if (sval < 0)
            return fail(p, "invalid day name '%.3s'", t.s);
        if (t.len > 3) {
            char c = t.s[3];
            if (c == '-') {
                i = 4;
                if (t.len < i + 3)
                    return fail(p, "invalid day name '%.*s'", t.len - i, t.s + i);
                eval = day_number(t.s + i);
                if (eval < 0)
                    return fail(p, "invalid day name '%.3s'", t.s + i);
            } else if (c == '#') {
                int64_t nth;
                if (!java_parse_int(t.s, 4, t.len, &nth))
                    return fail(p, "'#' must be followed by a number 1..5, got '%.*s'", t.len - 4,
                                t.s + 4);
                if (nth < 1 || nth > 5)
                    return fail(p, "'#' value must be 1..5, got %lld", (long long)nth);
                p->c->nth_day_of_week = (int32_t)nth;
            } else if (c == 'L') {
                p->c->lastday_of_week = true;
            }
        }
    } else {
        return fail(p, "names are not allowed here: '%.*s'", t.len, t.s);
    }
    return add_to_set(p, sval, eval, eval != -1 ? 1 : 0);
}

/* Quartz's storeExpressionVals for one comma-separated value. */
static bool store_value(parser *p, tok t)
{
    int f = p->field;
    int i = 0;
    if (t.len == 0)
        return true;
    char c = t.s[0];
    if (c >= 'A' && c <= 'Z' && !tok_is(t, "L") && !tok_is(t, "LW") && !is_l_offset(t))
        return store_named(p, t);
    if (c == '?') {
        i++;
        if (i + 1 < t.len)
            return fail(p, "unexpected character after '?': '%c'", t.s[i]);
        if (f != CRON_DOW && f != CRON_DOM)
            return fail(p, "'?' is only valid in day-of-month or day-of-week");
        if (f == CRON_DOW && !p->c->lastday_of_month) {
            int last = -1;
            for (int v = 127; v >= 0; v--)
                if (cron_set_has(&p->c->dom, v)) {
                    last = v;
                    break;
                }
            if (last < 0)
                return fail(p, "'?' needs a day-of-month value before it");
            if (last == CRON_NO_SPEC)
                return fail(p, "'?' can be used in day-of-month or day-of-week, not both");
        }
        return add_to_set(p, CRON_NO_SPEC, -1, 0);
    }
    if (c == '*' || c == '/') {
        if (c == '*' && i + 1 >= t.len)
            return add_to_set(p, CRON_ALL_SPEC, -1, 0);
        if (c == '/' && i + 1 >= t.len)
            return fail(p, "'/' must be followed by an integer");
        if (c == '*')
            i++;
        int64_t incr = 1;
        if (t.s[i] == '/') {
            i++;
            if (i >= t.len)
                return fail(p, "'/' must be followed by an integer");
            if (!java_parse_int(t.s, i, t.len, &incr))
                return fail(p, "increment '%.*s' is not a number", t.len - i, t.s + i);
            if (!check_increment(p, incr))
                return false;
        }
        return add_to_set(p, CRON_ALL_SPEC, -1, incr);
    }
    if (c == 'L') {
        i++;
        if (f == CRON_DOM)
            p->c->lastday_of_month = true;
        if (f == CRON_DOW && !add_to_set(p, 7, 7, 0))
            return false;
        if (f == CRON_DOM && t.len > i) {
            if (t.s[i] == '-') {
                int64_t off;
                int pos;
                if (!get_value(p, t, 0, i + 1, &off, &pos))
                    return false;
                if (off > 30)
                    return fail(p, "offset from the last day must be at most 30, got %lld",
                                (long long)off);
                p->c->lastday_offset = (int32_t)off;
                i = pos;
            }
            if (t.len > i && t.s[i] == 'W') {
                p->c->nearest_weekday = true;
                i++;
            }
        }
        return true;
    }
    if (is_digit(c)) {
        int64_t val = c - '0';
        i++;
        if (i >= t.len)
            return add_to_set(p, val, -1, -1);
        if (is_digit(t.s[i]) && !get_value(p, t, (int)val, i, &val, &i))
            return false;
        return check_next(p, t, i, val);
    }
    return fail(p, "unexpected character '%c' in '%.*s'", c, t.len, t.s);
}

static bool has_char(tok t, char c)
{
    return memchr(t.s, c, (size_t)t.len) != NULL;
}

static int current_max_year(void)
{
    /* Quartz computes MAX_YEAR once, when the class loads. */
    static _Atomic int cached;
    int y = cached;
    if (y == 0) {
        time_t now = time(NULL);
        struct tm tm;
        if (localtime_r(&now, &tm) != NULL)
            y = tm.tm_year + 1900 + 100;
        else
            y = 2126;
        if (y > CRON_YEAR_BITS - 2)
            y = CRON_YEAR_BITS - 2;
        cached = y;
    }
    return y;
}

static bool is_ws(char c)
{
    return c == ' ' || c == '\t';
}

/* Quartz accepts expressions that then throw NoSuchElementException on
 * every evaluation (a field that ends up with no values, e.g. "L" in the
 * seconds or ",": refuse them here. */
static bool check_evaluable(parser *p)
{
    ej_cron *c = p->c;
    const cron_set *need[] = {&c->sec, &c->min, &c->hour, NULL, &c->mon};
    for (int f = CRON_SECOND; f <= CRON_MONTH; f++) {
        if (need[f] != NULL && cron_set_empty(need[f])) {
            p->field = f;
            return fail(p, "the field has no values");
        }
    }
    bool dom_spec = !cron_set_has(&c->dom, CRON_NO_SPEC);
    if (dom_spec && !c->lastday_of_month && cron_set_empty(&c->dom)) {
        p->field = CRON_DOM;
        return fail(p, "the field has no values");
    }
    if (!dom_spec && cron_set_empty(&c->dow)) {
        p->field = CRON_DOW;
        return fail(p, "the field has no values");
    }
    return true;
}

static bool build(parser *p, const char *up, size_t len)
{
    size_t at = 0;
    int field = CRON_SECOND;
    while (field <= CRON_YEAR) {
        while (at < len && is_ws(up[at]))
            at++;
        if (at >= len)
            break;
        size_t b = at;
        while (at < len && !is_ws(up[at]))
            at++;
        /* String.trim(): drop control characters at both ends. */
        size_t e = at;
        while (b < e && (unsigned char)up[b] <= ' ')
            b++;
        while (e > b && (unsigned char)up[e - 1] <= ' ')
            e--;
        tok expr = {up + b, (int)(e - b)};
        p->field = field;
        if (field == CRON_DOM && has_char(expr, 'L') && expr.len > 1 && has_char(expr, ','))
            return fail(p, "'L' and 'LW' cannot be combined with other days");
        if (field == CRON_DOW && has_char(expr, 'L') && expr.len > 1 && has_char(expr, ','))
            return fail(p, "'L' cannot be combined with other days");
        if (field == CRON_DOW) {
            const char *h = memchr(expr.s, '#', (size_t)expr.len);
            if (h != NULL && memchr(h + 1, '#', (size_t)(expr.s + expr.len - h - 1)) != NULL)
                return fail(p, "only one '#' value is supported");
        }
        int vb = 0;
        while (vb < expr.len) {
            while (vb < expr.len && expr.s[vb] == ',')
                vb++;
            if (vb >= expr.len)
                break;
            int ve = vb;
            while (ve < expr.len && expr.s[ve] != ',')
                ve++;
            if (!store_value(p, (tok){expr.s + vb, ve - vb}))
                return false;
            vb = ve;
        }
        field++;
    }
    if (field <= CRON_DOW) {
        p->field = field;
        return fail(p, "missing (an expression needs 6 or 7 fields)");
    }
    if (field <= CRON_YEAR) {
        p->field = CRON_YEAR;
        if (!store_value(p, (tok){"*", 1}))
            return false;
    }
    bool dom_spec = !cron_set_has(&p->c->dom, CRON_NO_SPEC);
    bool dow_spec = !cron_set_has(&p->c->dow, CRON_NO_SPEC);
    if (dom_spec == dow_spec) {
        p->field = dom_spec ? CRON_DOW : CRON_DOM;
        return fail(p, dom_spec ? "one of day-of-month and day-of-week must be '?'"
                                : "day-of-month and day-of-week cannot both be '?'");
    }
    return check_evaluable(p);
}

int ej_cron_parse(const char *expr, ej_cron **out, char *err, size_t errlen)
{
    if (err != NULL && errlen > 0)
        err[0] = '\0';
    if (expr == NULL)
        return EJ_EINVAL;
    size_t len = strlen(expr);
    if (len > MAX_EXPR_LEN) {
        if (err != NULL && errlen > 0)
            snprintf(err, errlen, "expression is longer than %d bytes", MAX_EXPR_LEN);
        return EJ_ECRON;
    }
    for (size_t i = 0; i < len; i++) {
        if ((unsigned char)expr[i] >= 0x80) {
            if (err != NULL && errlen > 0)
                snprintf(err, errlen, "expression contains a non-ASCII byte at offset %zu", i);
            return EJ_ECRON;
        }
    }
    ej_cron *c = calloc(1, sizeof(*c) + len + 1);
    char *up = malloc(len + 1);
    if (c == NULL || up == NULL) {
        free(c);
        free(up);
        return EJ_ENOMEM;
    }
    memcpy(c->text, expr, len + 1);
    for (size_t i = 0; i <= len; i++)
        up[i] = (expr[i] >= 'a' && expr[i] <= 'z') ? (char)(expr[i] - 32) : expr[i];
    c->sec.big = c->min.big = c->hour.big = c->dom.big = c->mon.big = c->dow.big = -1;
    c->max_year = current_max_year();
    parser p = {c, CRON_SECOND, err, errlen};
    bool ok = build(&p, up, len);
    free(up);
    if (!ok) {
        free(c);
        if (err != NULL && errlen > 0 && err[0] == '\0')
            snprintf(err, errlen, "invalid cron expression");
        return EJ_ECRON;
    }
    if (out != NULL)
        *out = c;
    else
        free(c);
    return 0;
}

void ej_cron_free(ej_cron *cron)
{
    free(cron);
}

const char *ej_cron_text(const ej_cron *cron)
{
    return cron == NULL ? "" : cron->text;
}
