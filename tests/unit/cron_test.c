/* Unit tests of the cron module: time zones, parsing, next fire times.
 * The fire-time facts below were produced by Quartz 2.3.2 itself
 * (tests/quartz/CronOracle.java); the first ones are the vectors of Quartz's
 * CronExpressionTest. */
#include <errno.h>
#include <pthread.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>
#include <cmocka.h>

#include "ejob/cron.h"
#include "ejob/error.h"

static ej_tz *zone(const char *name)
{
    ej_tz *tz = NULL;
    assert_int_equal(ej_tz_load(name, &tz), 0);
    assert_non_null(tz);
    return tz;
}

static ej_cron *parse_ok(const char *expr)
{
    ej_cron *c = NULL;
    char err[256];
    int rc = ej_cron_parse(expr, &c, err, sizeof(err));
    if (rc != 0)
        fail_msg("'%s' rejected: %s", expr, err);
    return c;
}

/* The error message of an invalid expression. */
static const char *parse_err(const char *expr)
{
    static char err[256];
    ej_cron *c = NULL;
    int rc = ej_cron_parse(expr, &c, err, sizeof(err));
    if (rc != EJ_ECRON)
        fail_msg("'%s' accepted (rc %d)", expr, rc);
    assert_null(c);
    return err;
}

static bool satisfied(const ej_cron *c, const ej_tz *tz, int64_t t)
{
    int64_t n;
    return ej_cron_next(c, tz, t - 1000, &n) == 0 && n == t;
}

typedef struct fact {
    const char *expr;
    const char *zone;
    int64_t from;
    int count;
    int expected;
    int64_t times[16];
} fact;

static const fact facts[] = {
    {"0 15 10 * * ? 2005", "UTC", 1117620899000LL, 2, 2, {1117620900000LL, 1117707300000LL}},
    {"0 15 10 L-2 * ? 2010",
     "UTC",
     1285891200000LL,
     3,
     3,
     {1288347300000LL, 1290939300000LL, 1293617700000LL}},
    {"0 15 10 L-5W * ? 2010",
     "UTC",
     1285891200000LL,
     3,
     3,
     {1288088100000LL, 1290680100000LL, 1293444900000LL}},
    {"0 15 10 L-1 * ? 2010",
     "UTC",
     1285891200000LL,
     3,
     3,
     {1288433700000LL, 1291025700000LL, 1293704100000LL}},
    {"0 15 10 L-1W * ? 2010",
     "UTC",
     1285891200000LL,
     3,
     3,
     {1288347300000LL, 1291025700000LL, 1293704100000LL}},
    {"0 0 0 L-2 * ? *",
     "UTC",
     1767225600000LL,
     14,
     14,
     {1769644800000LL, 1772064000000LL, 1774742400000LL, 1777334400000LL, 1780012800000LL,
      1782604800000LL, 1785283200000LL, 1787961600000LL, 1790553600000LL, 1793232000000LL,
      1795824000000LL, 1798502400000LL, 1801180800000LL, 1803600000000LL}},
    {"0 0 0 LW * ? *",
     "UTC",
     1767225600000LL,
     14,
     14,
     {1769731200000LL, 1772150400000LL, 1774915200000LL, 1777507200000LL, 1780012800000LL,
      1782777600000LL, 1785456000000LL, 1788134400000LL, 1790726400000LL, 1793318400000LL,
      1795996800000LL, 1798675200000LL, 1801180800000LL, 1803600000000LL}},
    {"0 0 12 15W * ?",
     "UTC",
     1767225600000LL,
     12,
     12,
     {1768478400000LL, 1771243200000LL, 1773662400000LL, 1776254400000LL, 1778846400000LL,
      1781524800000LL, 1784116800000LL, 1786708800000LL, 1789473600000LL, 1792065600000LL,
      1794830400000LL, 1797336000000LL}},
    {"0 0 12 1W * ?",
     "UTC",
     1767225600000LL,
     12,
     12,
     {1767268800000LL, 1770033600000LL, 1772452800000LL, 1775044800000LL, 1777636800000LL,
      1780315200000LL, 1782907200000LL, 1785758400000LL, 1788264000000LL, 1790856000000LL,
      1793620800000LL, 1796126400000LL}},
    {"0 0 12 31W * ?",
     "UTC",
     1767225600000LL,
     6,
     6,
     {1769774400000LL, 1774958400000LL, 1780056000000LL, 1785499200000LL, 1788177600000LL,
      1793361600000LL}},
    {"0 0 12 ? * 6L",
     "UTC",
     1767225600000LL,
     6,
     6,
     {1769774400000LL, 1772193600000LL, 1774612800000LL, 1777032000000LL, 1780056000000LL,
      1782475200000LL}},
    {"0 0 12 ? * MON#5",
     "UTC",
     1767225600000LL,
     6,
     6,
     {1774872000000LL, 1782734400000LL, 1788177600000LL, 1796040000000LL, 1806321600000LL,
      1811764800000LL}},
    {"0 0 12 ? * 2#1",
     "UTC",
     1767225600000LL,
     4,
     4,
     {1767614400000LL, 1770033600000LL, 1772452800000LL, 1775476800000LL}},
    {"0 0 0 29 2 ?",
     "UTC",
     1767225600000LL,
     3,
     3,
     {1835395200000LL, 1961625600000LL, 2087856000000LL}},
    {"0 0 0 L 2 ?",
     "UTC",
     1767225600000LL,
     4,
     4,
     {1772236800000LL, 1803772800000LL, 1835395200000LL, 1866931200000LL}},
    {"0 0 0 31 * ?",
     "UTC",
     1767225600000LL,
     7,
     7,
     {1769817600000LL, 1774915200000LL, 1780185600000LL, 1785456000000LL, 1788134400000LL,
      1793404800000LL, 1798675200000LL}},
    {"0 0 0 30 2 ?", "UTC", 1767225600000LL, 1, 0, {}},
    {"0 0 0 1 1 ? 2099", "UTC", 4102444800000LL, 1, 0, {}},
    {"0 0 0 1 1 ? 2099", "UTC", 4070908800000LL, 1, 0, {}},
    {"0 0 0 1 1 ? 1969", "UTC", -315619200000LL, 2, 1, {-31536000000LL}},
    {"0 30 2 * * ?",
     "America/New_York",
     1772899200000LL,
     3,
     3,
     {1773037800000LL, 1773124200000LL, 1773210600000LL}},
    {"0 0 2 * * ?",
     "America/New_York",
     1772899200000LL,
     3,
     3,
     {1773036000000LL, 1773122400000LL, 1773208800000LL}},
    {"0 */30 1-3 * * ?",
     "America/New_York",
     1772946000000LL,
     8,
     8,
     {1772949600000LL, 1772951400000LL, 1772953200000LL, 1772955000000LL, 1773032400000LL,
      1773034200000LL, 1773036000000LL, 1773037800000LL}},
    {"0 30 1 * * ?",
     "America/New_York",
     1793419200000LL,
     3,
     3,
     {1793424600000LL, 1793514600000LL, 1793601000000LL}},
    {"0 */30 0-2 * * ?",
     "America/New_York",
     1793505600000LL,
     10,
     10,
     {1793507400000LL, 1793512800000LL, 1793514600000LL, 1793516400000LL, 1793518200000LL,
      1793595600000LL, 1793597400000LL, 1793599200000LL, 1793601000000LL, 1793602800000LL}},
    {"0 30 1 * * ?",
     "Europe/London",
     1774656000000LL,
     3,
     3,
     {1774661400000LL, 1774830600000LL, 1774917000000LL}},
    {"0 30 1 * * ?",
     "Europe/London",
     1792972800000LL,
     3,
     3,
     {1792978200000LL, 1793064600000LL, 1793151000000LL}},
    {"0 */20 0-2 * * ?",
     "Europe/London",
     1792972800000LL,
     12,
     12,
     {1792974000000LL, 1792975200000LL, 1792976400000LL, 1792977600000LL, 1792978800000LL,
      1792980000000LL, 1792981200000LL, 1792982400000LL, 1793059200000LL, 1793060400000LL,
      1793061600000LL, 1793062800000LL}},
    {"0 15 2 * * ?",
     "Australia/Lord_Howe",
     1791028800000LL,
     3,
     3,
     {1791126900000LL, 1791213300000LL, 1791299700000LL}},
    {"0 */15 1-2 * * ?",
     "Australia/Lord_Howe",
     1775318400000LL,
     12,
     12,
     {1775319300000LL, 1775399400000LL, 1775400300000LL, 1775401200000LL, 1775402100000LL,
      1775403000000LL, 1775403900000LL, 1775404800000LL, 1775405700000LL, 1775485800000LL,
      1775486700000LL, 1775487600000LL}},
    {"0 0 8 * * ?",
     "Asia/Shanghai",
     1795000000000LL,
     3,
     3,
     {1795046400000LL, 1795132800000LL, 1795219200000LL}},
    {"5X 0 0 * * ?", "UTC", 0LL, 2, 2, {5000LL, 86405000LL}},
    {"0 0 0 ?X * 1", "UTC", 0LL, 2, 2, {259200000LL, 864000000LL}},
    {"0 0 12 L-W * ?",
     "UTC",
     1767225600000LL,
     3,
     3,
     {1769774400000LL, 1772193600000LL, 1774958400000LL}},
    {"*/-5 0 0 * * ?", "UTC", 0LL, 3, 3, {1000LL, 2000LL, 3000LL}},
    {"0 0 0 ? JANX MON", "UTC", 0LL, 2, 2, {345600000LL, 950400000LL}},
    {"0 0 9-17/4 ? * MON-FRI",
     "UTC",
     1767225600000LL,
     6,
     6,
     {1767258000000LL, 1767272400000LL, 1767286800000LL, 1767344400000LL, 1767358800000LL,
      1767373200000LL}},
    {"0 0 22-2 * * ?",
     "UTC",
     1767225600000LL,
     6,
     6,
     {1767229200000LL, 1767232800000LL, 1767304800000LL, 1767308400000LL, 1767312000000LL,
      1767315600000LL}},
    {"0 0 0 ? * FRI-MON",
     "UTC",
     1767225600000LL,
     6,
     6,
     {1767312000000LL, 1767398400000LL, 1767484800000LL, 1767571200000LL, 1767916800000LL,
      1768003200000LL}},
    {"0 0 0 1 NOV-FEB ?",
     "UTC",
     1767225600000LL,
     5,
     5,
     {1769904000000LL, 1793491200000LL, 1796083200000LL, 1798761600000LL, 1801440000000LL}},
    {"0 0 0 1 * ? 2027/2",
     "UTC",
     1767225600000LL,
     3,
     3,
     {1798761600000LL, 1801440000000LL, 1803859200000LL}},
    {"0 0 12 ? * 2L",
     "UTC",
     1767225600000LL,
     3,
     3,
     {1769428800000LL, 1771848000000LL, 1774872000000LL}},
    {"0 15 10 ? * 6#3",
     "UTC",
     1767225600000LL,
     3,
     3,
     {1768558500000LL, 1771582500000LL, 1774001700000LL}},
    {"0 0 0 ? * L",
     "UTC",
     1767225600000LL,
     3,
     3,
     {1767398400000LL, 1768003200000LL, 1768608000000LL}},
};

static void test_quartz_facts(void **state)
{
    (void)state;
    for (size_t i = 0; i < sizeof(facts) / sizeof(facts[0]); i++) {
        const fact *f = &facts[i];
        ej_cron *c = parse_ok(f->expr);
        ej_tz *tz = zone(f->zone);
        int64_t t = f->from;
        int got = 0;
        for (; got < f->count; got++) {
            int64_t n;
            int rc = ej_cron_next(c, tz, t, &n);
            if (rc == EJ_ENOTFOUND)
                break;
            assert_int_equal(rc, 0);
            if (got >= f->expected || n != f->times[got])
                fail_msg("'%s' in %s from %lld: time %d is %lld, Quartz says %lld", f->expr,
                         f->zone, (long long)f->from, got, (long long)n,
                         got < f->expected ? (long long)f->times[got] : -1LL);
            t = n;
        }
        if (got != f->expected)
            fail_msg("'%s': %d times, Quartz gives %d", f->expr, got, f->expected);
        ej_cron_free(c);
    }
}

/* CronExpressionTest.testIsSatisfiedBy and testLastDayOffset. */
static void test_quartz_satisfied(void **state)
{
    (void)state;
    ej_tz *utc = zone("UTC");
    ej_cron *c = parse_ok("0 15 10 * * ? 2005");
    assert_true(satisfied(c, utc, 1117620900000LL));  /* 2005-06-01 10:15:00 */
    assert_false(satisfied(c, utc, 1149156900000LL)); /* 2006-06-01 10:15:00 */
    assert_false(satisfied(c, utc, 1117620960000LL)); /* 10:16 */
    assert_false(satisfied(c, utc, 1117620840000LL)); /* 10:14 */
    ej_cron_free(c);
    c = parse_ok("0 15 10 L-2 * ? 2010");
    assert_true(satisfied(c, utc, 1288347300000LL));  /* 2010-10-29 10:15 */
    assert_false(satisfied(c, utc, 1288260900000LL)); /* 2010-10-28 */
    ej_cron_free(c);
    c = parse_ok("0 15 10 L-5W * ? 2010");
    assert_true(satisfied(c, utc, 1288088100000LL)); /* 2010-10-26 */
    ej_cron_free(c);
    c = parse_ok("0 15 10 L-1 * ? 2010");
    assert_true(satisfied(c, utc, 1288433700000LL)); /* 2010-10-30 */
    ej_cron_free(c);
    c = parse_ok("0 15 10 L-1W * ? 2010");
    assert_true(satisfied(c, utc, 1288347300000LL)); /* 2010-10-29, a Friday */
    ej_cron_free(c);
}

/* QTZ-259: a last-day offset must never repeat a fire time. */
static void test_quartz_qtz259(void **state)
{
    (void)state;
    const char *exprs[] = {"0 0 0 L-2 * ? *", "0 0 0 LW * ? *", "0 0 0 L-30 * ?", "0 0 0 L-3W * ?"};
    ej_tz *tz = zone("America/New_York");
    for (size_t k = 0; k < 4; k++) {
        ej_cron *c = parse_ok(exprs[k]);
        int64_t t = 1767225600000LL, n;
        for (int i = 0; i < 60; i++) {
            assert_int_equal(ej_cron_next(c, tz, t, &n), 0);
            assert_true(n > t);
            t = n;
        }
        ej_cron_free(c);
    }
}

static void test_quartz_parse_errors(void **state)
{
    (void)state;
    /* CronExpressionTest: QUARTZ-574, 621, 640, QTZ-96, issue #58 */
    assert_string_equal(parse_err("* * * * Foo ? "), "month: invalid month name 'FOO'");
    assert_string_equal(parse_err("* * * * Jan-Foo ? "), "month: invalid month name 'FOO'");
    assert_string_equal(parse_err("0 0 * * * *"),
                        "day-of-week: one of day-of-month and day-of-week must be '?'");
    parse_err("0 0 * 4 * *");
    parse_err("0 0 * * * 4");
    assert_string_equal(parse_err("0 43 9 1,5,29,L * ?"),
                        "day-of-month: 'L' and 'LW' cannot be combined with other days");
    assert_string_equal(parse_err("0 43 9 ? * SAT,SUN,L"),
                        "day-of-week: 'L' cannot be combined with other days");
    parse_err("0 43 9 ? * 6,7,L");
    ej_cron_free(parse_ok("0 43 9 ? * 5L"));
    assert_string_equal(parse_err("0/5 * * 32W 1 ?"),
                        "day-of-month: 'W' needs a day 1..31, got 32");
    assert_string_equal(parse_err("/120 0 8-18 ? * 2-6"),
                        "second: increment must be at most 59, got 120");
    assert_string_equal(parse_err("0/120 0 8-18 ? * 2-6"),
                        "second: increment must be at most 59, got 120");
    assert_string_equal(parse_err("/ 0 8-18 ? * 2-6"),
                        "second: '/' must be followed by an integer");
    assert_string_equal(parse_err("0/ 0 8-18 ? * 2-6"),
                        "second: '/' must be followed by an integer");
    assert_string_equal(parse_err("0 /120 8-18 ? * 2-6"),
                        "minute: increment must be at most 59, got 120");
    parse_err("0 0/120 8-18 ? * 2-6");
    parse_err("0 / 8-18 ? * 2-6");
    parse_err("0 0/ 8-18 ? * 2-6");
    assert_string_equal(parse_err("0 0 /120 ? * 2-6"),
                        "hour: increment must be at most 23, got 120");
    parse_err("0 0 0/120 ? * 2-6");
    parse_err("0 0 / ? * 2-6");
    parse_err("0 0 0/ ? * 2-6");
    assert_string_equal(parse_err("0 0 0 /120 * 2-6"),
                        "day-of-month: increment must be at most 31, got 120");
    parse_err("0 0 0 0/120 * 2-6");
    parse_err("0 0 0 / * 2-6");
    parse_err("0 0 0 0/ * 2-6");
    assert_string_equal(parse_err("0 0 0 ? /120 2-6"),
                        "month: increment must be at most 12, got 120");
    parse_err("0 0 0 ? 0/120 2-6");
    parse_err("0 0 0 ? / 2-6");
    parse_err("0 0 0 ? 0/ 2-6");
    assert_string_equal(parse_err("0 0 0 ? * /120"),
                        "day-of-week: increment must be at most 7, got 120");
    parse_err("0 0 0 ? * 0/120");
    parse_err("0 0 0 ? * /");
    parse_err("0 0 0 ? * 0/");
}

static void test_error_messages(void **state)
{
    (void)state;
    assert_string_equal(parse_err("0 0 0 ? * 2#6"), "day-of-week: '#' value must be 1..5, got 6");
    assert_string_equal(parse_err("0 0 0 ? * MON#0"), "day-of-week: '#' value must be 1..5, got 0");
    assert_string_equal(parse_err("0 0 0 ? * 2#"),
                        "day-of-week: '#' must be followed by a number 1..5, got ''");
    assert_string_equal(parse_err("0 0 0 ? * 2#1,3#2"),
                        "day-of-week: only one '#' value is supported");
    assert_string_equal(parse_err("60 * * * * ?"), "second: values must be 0..59, got 60");
    assert_string_equal(parse_err("0 0-60 * * * ?"), "minute: values must be 0..59, got 60");
    assert_string_equal(parse_err("0 0 24 * * ?"), "hour: values must be 0..23, got 24");
    assert_string_equal(parse_err("0 0 0 32 * ?"), "day-of-month: values must be 1..31, got 32");
    assert_string_equal(parse_err("0 0 0 0 * ?"), "day-of-month: values must be 1..31, got 0");
    assert_string_equal(parse_err("0 0 0 * 13 ?"),
                        "month: values must be 1..12 (or JAN..DEC), got 13");
    assert_string_equal(parse_err("0 0 0 ? * 8"),
                        "day-of-week: values must be 1..7 (or SUN..SAT), got 8");
    assert_string_equal(parse_err("0 0 0 ? * 8L"), "day-of-week: 'L' needs a day 1..7, got 8");
    assert_string_equal(parse_err("0 0 0 ? * FOO"), "day-of-week: invalid day name 'FOO'");
    assert_string_equal(parse_err("0 0 0 * *"),
                        "day-of-week: missing (an expression needs 6 or 7 fields)");
    assert_string_equal(parse_err(""), "second: missing (an expression needs 6 or 7 fields)");
    assert_string_equal(parse_err("0 0 0 ? * ?"),
                        "day-of-week: '?' can be used in day-of-month or day-of-week, not both");
    assert_string_equal(parse_err("0 0 0 * * ? 2030-2020"),
                        "year: range start 2030 is after its end 2020");
    assert_string_equal(parse_err("0 0 0 L-31 * ?"),
                        "day-of-month: offset from the last day must be at most 30, got 31");
    assert_string_equal(parse_err("0 0 0 5L * ?"),
                        "day-of-month: 'L' after a number is only valid in day-of-week");
    assert_string_equal(parse_err("0 0 5W * * ?"), "hour: 'W' is only valid in day-of-month");
    assert_string_equal(parse_err("0 0 0 1#2 * ?"),
                        "day-of-month: '#' is only valid in day-of-week");
    assert_string_equal(parse_err("? 0 0 * * ?"),
                        "second: '?' is only valid in day-of-month or day-of-week");
    assert_string_equal(parse_err("0 0 0 ?XY * 1"),
                        "day-of-month: unexpected character after '?': 'X'");
    assert_string_equal(parse_err("0 0 JAN * * ?"), "hour: names are not allowed here: 'JAN'");
    assert_string_equal(parse_err("0 0 0 ? * MO"), "day-of-week: unknown name 'MO'");
    assert_string_equal(parse_err("0 0 0 1 JAN- ?"), "month: invalid month name ''");
    assert_string_equal(parse_err("0 0 0 1- * ?"), "day-of-month: value '1-' ends too early");
    assert_string_equal(parse_err("0 0 0 1-X * ?"),
                        "day-of-month: range end in '1-X' is not a number");
    assert_string_equal(parse_err("0 0 0 1/X * ?"),
                        "day-of-month: increment in '1/X' is not a number");
    assert_string_equal(parse_err("0 0 0 1/2X * ?"),
                        "day-of-month: unexpected character 'X' after '/'");
    assert_string_equal(parse_err("0 0 0 */5X * ?"),
                        "day-of-month: increment '5X' is not a number");
    assert_string_equal(parse_err("0 0 0 L- * ?"), "day-of-month: value 'L-' ends too early");
    assert_string_equal(parse_err("0 0 0 L-99999999999 * ?"),
                        "day-of-month: number in 'L-99999999999' is too large");
    assert_string_equal(parse_err("%"), "second: unexpected character '%' in '%'");
    /* Deviations (docs/cron.md): Quartz accepts these and then throws, or
     * reads bytes it never sees. */
    assert_string_equal(parse_err("L 0 0 * * ?"), "second: the field has no values");
    assert_string_equal(parse_err("0 , 0 * * ?"), "minute: the field has no values");
    assert_string_equal(parse_err("0 0 0 L L ?"), "month: the field has no values");
    assert_string_equal(parse_err("0 0 0 , * ?"),
                        "day-of-week: '?' needs a day-of-month value before it");
    assert_string_equal(parse_err("0 0 0 ? * ,"), "day-of-week: the field has no values");
    assert_string_equal(parse_err("0 0 12 0W * ?"), "day-of-month: 'W' needs a day 1..31, got 0");
    assert_string_equal(parse_err("0 0 0 * * ? 1970-2147483647"), "year: increment 1 is too large");
    assert_string_equal(parse_err("5-10/2147483647 0 0 * * ?"),
                        "second: increment 2147483647 is too large");
    assert_string_equal(parse_err("0 0 0 * * ? \xc3\xa9"),
                        "expression contains a non-ASCII byte at offset 12");
    /* NULL and sizes */
    assert_int_equal(ej_cron_parse(NULL, NULL, NULL, 0), EJ_EINVAL);
    assert_int_equal(ej_cron_parse("bad", NULL, NULL, 0), EJ_ECRON);
    char small[8];
    assert_int_equal(ej_cron_parse("0 0 0 ? * 2#6", NULL, small, sizeof(small)), EJ_ECRON);
    assert_string_equal(small, "day-of-");
    char *huge = malloc(5000);
    memset(huge, '0', 4999);
    huge[4999] = '\0';
    char err[128];
    assert_int_equal(ej_cron_parse(huge, NULL, err, sizeof(err)), EJ_ECRON);
    assert_string_equal(err, "expression is longer than 4096 bytes");
    free(huge);
}

/* Quartz's leniencies are kept: what it accepts, ejob accepts with the same
 * meaning. */
static void test_lenient_syntax(void **state)
{
    (void)state;
    const char *valid[] = {
        "5X 0 0 * * ?",          /* trailing characters after a number */
        "0 0 0 ?X * 1",          /* one character after '?' */
        "0 0 0 ? JANX MON",      /* after a name */
        "0 0 0 L-W * ?",         /* an empty last-day offset */
        "*/-5 0 0 * * ?",        /* a negative step is '*' */
        "0 0 0 ? * 2#+3",        /* Integer.parseInt takes a sign */
        "0 0 0 * * ? 2030 junk", /* fields past the year */
        "  0\t0  0 * * ?  ",     /* spaces and tabs */
        "0 0 0 ? * mon-fri",     /* lower case */
        "0 0 0 ? * L-5",         /* day-of-week ignores an offset */
        "0 0 0 ? * 0#1",         /* '#' takes any day number */
        "0 0 0 1-5X * ?",        /* after a range */
        "0 0 0 1-5/2X * ?",      /* after a stepped range */
        "0 0 0 * * ? ,",         /* no year at all: never fires */
        "0 0 0 * * ? 3000",      /* a year past the last one */
    };
    for (size_t i = 0; i < sizeof(valid) / sizeof(valid[0]); i++)
        ej_cron_free(parse_ok(valid[i]));
    ej_tz *utc = zone("UTC");
    ej_cron *a = parse_ok("5X 0 0 * * ?"), *b = parse_ok("5 0 0 * * ?");
    int64_t ta, tb;
    assert_int_equal(ej_cron_next(a, utc, 0, &ta), 0);
    assert_int_equal(ej_cron_next(b, utc, 0, &tb), 0);
    assert_int_equal(ta, tb);
    ej_cron_free(a);
    ej_cron_free(b);
    a = parse_ok("0 0 0 * * ? ,");
    assert_int_equal(ej_cron_next(a, utc, 0, &ta), EJ_ENOTFOUND);
    ej_cron_free(a);
    a = parse_ok("0 0 0 * * ? 3000");
    assert_int_equal(ej_cron_next(a, utc, 0, &ta), EJ_ENOTFOUND);
    assert_string_equal(ej_cron_text(a), "0 0 0 * * ? 3000");
    ej_cron_free(a);
    ej_cron_free(NULL);
}

static void test_next_basics(void **state)
{
    (void)state;
    ej_tz *utc = zone("UTC");
    ej_cron *c = parse_ok("*/15 * * * * ?");
    int64_t n;
    /* strictly after, milliseconds dropped */
    assert_int_equal(ej_cron_next(c, utc, 15000, &n), 0);
    assert_int_equal(n, 30000);
    assert_int_equal(ej_cron_next(c, utc, 14999, &n), 0);
    assert_int_equal(n, 15000);
    assert_int_equal(ej_cron_next(c, utc, 15999, &n), 0);
    assert_int_equal(n, 30000);
    assert_int_equal(ej_cron_next(c, utc, -1, &n), 0);
    assert_int_equal(n, 0);
    /* NULL zone is UTC */
    assert_int_equal(ej_cron_next(c, NULL, 15000, &n), 0);
    assert_int_equal(n, 30000);
    assert_int_equal(ej_cron_next(NULL, utc, 0, &n), EJ_EINVAL);
    assert_int_equal(ej_cron_next(c, utc, 0, NULL), EJ_EINVAL);
    /* Quartz stops at year 2999 */
    assert_int_equal(ej_cron_next(c, utc, 32503680000000LL, &n), EJ_ENOTFOUND);
    assert_int_equal(ej_cron_next(c, utc, INT64_MAX, &n), EJ_ENOTFOUND);
    assert_int_equal(ej_cron_next(c, utc, -315619200000LL, &n), 0); /* from 1960 */
    assert_int_equal(n, 0);                                         /* '*' years start in 1970 */
    /* ... but Quartz keeps its '*' marker, 99, among them: before year 99
     * the next year is 99 (Quartz counts that one in the Julian calendar). */
    assert_int_equal(ej_cron_next(c, utc, INT64_MIN / 2, &n), 0);
    assert_int_equal(n, -59042995200000LL); /* 0099-01-01T00:00:00Z, proleptic Gregorian */
    ej_cron_free(c);
    /* Quartz's MAX_YEAR: the current year + 100 */
    time_t now = time(NULL);
    struct tm tm;
    localtime_r(&now, &tm);
    int max_year = tm.tm_year + 1900 + 100;
    c = parse_ok("0 0 0 1 1 ?");
    struct tm last = {.tm_year = max_year - 1900, .tm_mon = 0, .tm_mday = 1};
    int64_t t_last = (int64_t)timegm(&last) * 1000;
    assert_int_equal(ej_cron_next(c, utc, t_last - 1000, &n), 0);
    assert_int_equal(n, t_last);
    assert_int_equal(ej_cron_next(c, utc, t_last, &n), EJ_ENOTFOUND);
    ej_cron_free(c);
    /* leap years */
    c = parse_ok("0 0 0 29 2 ? 2096-2104");
    assert_int_equal(ej_cron_next(c, utc, 4070908800000LL, &n), 0); /* from 2099 */
    assert_int_equal(n, 4233686400000LL); /* 2104-02-29: 2100 is not a leap year */
    ej_cron_free(c);
}

/* Deviation (docs/cron.md): where Quartz loops forever, ejob goes on. */
static void test_quartz_infinite_loop(void **state)
{
    (void)state;
    ej_tz *cairo = zone("Africa/Cairo");
    ej_cron *c = parse_ok("9 2 0 25W 8,AUG,MAR,8 ?");
    int64_t n;
    assert_int_equal(ej_cron_next(c, cairo, 3162924129000LL, &n), 0);
    assert_int_equal(n, 3176139729000LL); /* 2070-08-25T00:02:09+03:00 */
    ej_cron_free(c);
    ej_tz *adelaide = zone("Australia/Adelaide");
    c = parse_ok("26 13 1 L-28W * ? *");
    assert_int_equal(ej_cron_next(c, adelaide, 2366981006000LL, &n), 0);
    assert_int_equal(n, 2372078606000LL); /* skips February 2045 */
    ej_cron_free(c);
}

static void *concurrent_worker(void *arg)
{
    const ej_cron *c = arg;
    static const char *const names[] = {"Europe/Rome", "Asia/Tokyo", "America/Chicago",
                                        "Europe/Rome", "Asia/Tokyo", "America/Chicago"};
    intptr_t bad = 0;
    for (int i = 0; i < 200; i++) {
        ej_tz *tz;
        if (ej_tz_load(names[i % 6], &tz) != 0)
            return (void *)1;
        ej_tz *london;
        if (ej_tz_load("Europe/London", &london) != 0)
            return (void *)1;
        int64_t n;
        if (ej_cron_next(c, london, 1792972800000LL, &n) != 0 || n != 1792974000000LL)
            bad++;
        ej_cron *own;
        if (ej_cron_parse("0 0 12 ? * MON#2", &own, NULL, 0) != 0)
            return (void *)1;
        if (ej_cron_next(own, tz, 1767225600000LL, &n) != 0)
            bad++;
        ej_cron_free(own);
    }
    return (void *)bad;
}

/* Handles are immutable and the zone cache is locked: threads share them. */
static void test_concurrent_use(void **state)
{
    (void)state;
    ej_cron *c = parse_ok("0 */20 0-2 * * ?");
    pthread_t th[4];
    for (int i = 0; i < 4; i++)
        assert_int_equal(pthread_create(&th[i], NULL, concurrent_worker, c), 0);
    for (int i = 0; i < 4; i++) {
        void *ret;
        assert_int_equal(pthread_join(th[i], &ret), 0);
        assert_null(ret);
    }
    ej_cron_free(c);
}

/* ---------------------------------------------------------------- zones */

static void test_tz_offsets(void **state)
{
    (void)state;
    ej_tz *ny = zone("America/New_York");
    assert_string_equal(ej_tz_name(ny), "America/New_York");
    assert_int_equal(ej_tz_offset_at(ny, 1767225600000LL), -5 * 3600);  /* 2026-01-01 */
    assert_int_equal(ej_tz_offset_at(ny, 1782864000000LL), -4 * 3600);  /* 2026-07-01 */
    assert_int_equal(ej_tz_offset_at(ny, 4118083200000LL), -4 * 3600);  /* 2100-07-01 */
    assert_int_equal(ej_tz_offset_at(ny, 10424563200000LL), -4 * 3600); /* 2300-05-01 */
    assert_int_equal(ej_tz_offset_at(ny, 10418428800000LL), -5 * 3600); /* 2300-02-24 */
    /* the transition instant itself: 2026-03-08T07:00:00Z */
    assert_int_equal(ej_tz_offset_at(ny, 1772953199999LL), -5 * 3600);
    assert_int_equal(ej_tz_offset_at(ny, 1772953200000LL), -4 * 3600);
    assert_int_equal(ej_tz_offset_at(ny, -2800000000000LL), -(4 * 3600 + 56 * 60 + 2)); /* LMT */
    ej_tz *lh = zone("Australia/Lord_Howe");
    assert_int_equal(ej_tz_offset_at(lh, 1767225600000LL), 11 * 3600);
    assert_int_equal(ej_tz_offset_at(lh, 1782864000000LL), 10 * 3600 + 1800);
    ej_tz *sh = zone("Asia/Shanghai");
    assert_int_equal(ej_tz_offset_at(sh, 1782864000000LL), 8 * 3600);
    assert_int_equal(ej_tz_offset_at(NULL, 1782864000000LL), 0);
    assert_int_equal(ej_tz_offset_at(ej_tz_utc(), 1782864000000LL), 0);
    assert_string_equal(ej_tz_name(ej_tz_utc()), "UTC");
    assert_string_equal(ej_tz_name(NULL), "UTC");

    ej_civil_time lt;
    int32_t off;
    ej_tz_to_local(sh, 1795046400000LL, &lt, &off);
    assert_int_equal(lt.year, 2026);
    assert_int_equal(lt.month, 11);
    assert_int_equal(lt.day, 19);
    assert_int_equal(lt.hour, 8);
    assert_int_equal(lt.minute, 0);
    assert_int_equal(lt.wday, 5); /* a Thursday */
    assert_int_equal(off, 8 * 3600);
    ej_tz_to_local(NULL, -1, &lt, NULL);
    assert_int_equal(lt.year, 1969);
    assert_int_equal(lt.second, 59);
    assert_int_equal(lt.ms, 999);
}

/* Wall times in gaps and overlaps, checked against GregorianCalendar. */
static void test_tz_local_to_utc(void **state)
{
    (void)state;
    struct {
        const char *zone;
        ej_civil_time lt;
        int64_t later, earlier;
    } cases[] = {
        {"America/New_York", {2026, 3, 8, 2, 30, 0, 0, 0}, 1772955000000LL, 1772955000000LL},
        {"America/New_York", {2026, 11, 1, 1, 30, 0, 0, 0}, 1793514600000LL, 1793511000000LL},
        {"Europe/London", {2026, 3, 29, 1, 30, 0, 0, 0}, 1774747800000LL, 1774747800000LL},
        {"Europe/London", {2026, 10, 25, 1, 30, 0, 0, 0}, 1792891800000LL, 1792888200000LL},
        {"Australia/Lord_Howe", {2026, 10, 4, 2, 15, 0, 0, 0}, 1791042300000LL, 1791042300000LL},
        {"Australia/Lord_Howe", {2026, 4, 5, 1, 45, 0, 0, 0}, 1775315700000LL, 1775313900000LL},
        {"America/New_York", {2300, 3, 11, 2, 30, 0, 0, 0}, 10419780600000LL, 10419780600000LL},
        {"America/New_York", {2300, 11, 4, 1, 30, 0, 0, 0}, 10440340200000LL, 10440336600000LL},
        /* lenient fields: month 13, day 0, hour 25 */
        {"UTC", {2026, 13, 0, 25, 0, 0, 0, 0}, 1798765200000LL, 1798765200000LL},
    };
    for (size_t i = 0; i < sizeof(cases) / sizeof(cases[0]); i++) {
        ej_tz *tz = zone(cases[i].zone);
        int64_t ms;
        assert_int_equal(ej_tz_local_to_utc(tz, &cases[i].lt, EJ_TZ_LATER, &ms), 0);
        assert_int_equal(ms, cases[i].later);
        assert_int_equal(ej_tz_local_to_utc(tz, &cases[i].lt, EJ_TZ_EARLIER, &ms), 0);
        assert_int_equal(ms, cases[i].earlier);
    }
    int64_t ms;
    ej_civil_time bad = {2000000, 1, 1, 0, 0, 0, 0, 0};
    assert_int_equal(ej_tz_local_to_utc(NULL, &bad, EJ_TZ_LATER, &ms), EJ_EINVAL);
    assert_int_equal(ej_tz_local_to_utc(NULL, NULL, EJ_TZ_LATER, &ms), EJ_EINVAL);
}

static void test_tz_names(void **state)
{
    (void)state;
    ej_tz *tz;
    assert_int_equal(ej_tz_load("../etc/passwd", &tz), EJ_EINVAL);
    assert_int_equal(ej_tz_load("/etc/localtime", &tz), EJ_EINVAL);
    assert_int_equal(ej_tz_load("America//New_York", &tz), EJ_EINVAL);
    assert_int_equal(ej_tz_load("America/New_York/", &tz), EJ_EINVAL);
    assert_int_equal(ej_tz_load("America/./New_York", &tz), EJ_EINVAL);
    assert_int_equal(ej_tz_load("Asia/Shang hai", &tz), EJ_EINVAL);
    assert_int_equal(ej_tz_load("UTC", NULL), EJ_EINVAL);
    assert_int_equal(ej_tz_load("Mars/Olympus_Mons", &tz), EJ_ENOTFOUND);
    assert_int_equal(ej_tz_load("America", &tz), EJ_ENOTFOUND); /* a directory */
    assert_int_equal(ej_tz_load("zone.tab", &tz), EJ_EPARSE);
    /* cached: the same handle */
    ej_tz *a = zone("Europe/Paris"), *b = zone("Europe/Paris");
    assert_ptr_equal(a, b);
    ej_tz_free(a);
    ej_tz_free(NULL);
    /* java.util.TimeZone custom ids */
    tz = zone("GMT+8");
    assert_string_equal(ej_tz_name(tz), "GMT+08:00");
    assert_int_equal(ej_tz_offset_at(tz, 0), 8 * 3600);
    tz = zone("GMT-05:30");
    assert_int_equal(ej_tz_offset_at(tz, 0), -(5 * 3600 + 1800));
    tz = zone("GMT+0930");
    assert_int_equal(ej_tz_offset_at(tz, 0), 9 * 3600 + 1800);
    assert_int_equal(ej_tz_load("GMT+24", &tz), EJ_ENOTFOUND); /* not a custom id, no such file */
}

/* TZif files that are not valid, read from a private TZDIR. */
static void test_tz_bad_files(void **state)
{
    (void)state;
    char dir[] = "/tmp/ej_cron_tzXXXXXX";
    assert_non_null(mkdtemp(dir));
    char path[256];
    /* a copy of a real file cut short, and garbage */
    FILE *in = fopen("/usr/share/zoneinfo/Europe/London", "rb");
    assert_non_null(in);
    static unsigned char buf[1 << 16];
    size_t n = fread(buf, 1, sizeof(buf), in);
    fclose(in);
    snprintf(path, sizeof(path), "%s/Cut", dir);
    FILE *out = fopen(path, "wb");
    fwrite(buf, 1, n / 2, out);
    fclose(out);
    snprintf(path, sizeof(path), "%s/Junk", dir);
    out = fopen(path, "wb");
    fputs("TZif2 this is not a zone file at all, just text that is long enough", out);
    fclose(out);
    snprintf(path, sizeof(path), "%s/Copy", dir);
    out = fopen(path, "wb");
    fwrite(buf, 1, n, out);
    fclose(out);
    /* a valid file with a broken footer */
    snprintf(path, sizeof(path), "%s/Footer", dir);
    out = fopen(path, "wb");
    fwrite(buf, 1, n - 1, out); /* drop the final newline */
    fclose(out);
    setenv("TZDIR", dir, 1);
    ej_tz *tz;
    assert_int_equal(ej_tz_load("Cut", &tz), EJ_EPARSE);
    assert_int_equal(ej_tz_load("Junk", &tz), EJ_EPARSE);
    assert_int_equal(ej_tz_load("Footer", &tz), EJ_EPARSE);
    assert_int_equal(ej_tz_load("Copy", &tz), 0);
    assert_int_equal(ej_tz_offset_at(tz, 1782864000000LL), 3600);
    unsetenv("TZDIR");
    const char *names[] = {"Cut", "Junk", "Copy", "Footer"};
    for (int i = 0; i < 4; i++) {
        snprintf(path, sizeof(path), "%s/%s", dir, names[i]);
        unlink(path);
    }
    rmdir(dir);
}

/* The tz database's names for a form: zones and links of tzdata.zi,
 * sorted; a TZDIR without tzdata.zi has none. */
static void test_tz_list(void **state)
{
    (void)state;
    char **names = NULL;
    size_t n = 0;
    assert_int_equal(ej_tz_names(&names, &n), 0);
    assert_true(n > 300);
    bool shanghai = false, utc = false;
    for (size_t i = 0; i < n; i++) {
        shanghai = shanghai || strcmp(names[i], "Asia/Shanghai") == 0;
        utc = utc || strcmp(names[i], "UTC") == 0; /* a link */
        if (i > 0)
            assert_true(strcmp(names[i - 1], names[i]) <= 0);
    }
    assert_null(names[n]);
    assert_true(shanghai && utc);
    ej_tz_names_free(names);
    assert_int_equal(ej_tz_names(NULL, &n), EJ_EINVAL);

    char dir[] = "/tmp/ej_cron_tznXXXXXX";
    assert_non_null(mkdtemp(dir));
    setenv("TZDIR", dir, 1);
    assert_int_equal(ej_tz_names(&names, NULL), EJ_ENOTFOUND);
    assert_null(names);
    char path[256];
    snprintf(path, sizeof path, "%s/tzdata.zi", dir);
    FILE *f = fopen(path, "w");
    assert_non_null(f);
    fputs("# version x\nZ Pacific/Zed 1 - Z\nR X 1 2 - 1 1 1 0\nL Pacific/Zed Alpha/Link\n"
          "Zbroken\nL onlytarget\n",
          f);
    fclose(f);
    assert_int_equal(ej_tz_names(&names, &n), 0);
    assert_int_equal(n, 2);
    assert_string_equal(names[0], "Alpha/Link");
    assert_string_equal(names[1], "Pacific/Zed");
    ej_tz_names_free(names);
    ej_tz_names_free(NULL);
    unsetenv("TZDIR");
    unlink(path);
    rmdir(dir);
}

/* The host zone from a POSIX TZ rule string in $TZ. Runs first: the host
 * zone is cached on first use. */
static void test_tz_host_rule(void **state)
{
    (void)state;
    setenv("TZ", "XST5XDT,M3.2.0,M11.1.0", 1);
    ej_tz *tz = zone(NULL);
    assert_string_equal(ej_tz_name(tz), "XST5XDT,M3.2.0,M11.1.0");
    assert_ptr_equal(zone(""), tz);
    assert_int_equal(ej_tz_offset_at(tz, 1767225600000LL), -5 * 3600);
    assert_int_equal(ej_tz_offset_at(tz, 1782864000000LL), -4 * 3600);
    assert_int_equal(ej_tz_offset_at(tz, 10424563200000LL), -4 * 3600); /* 2300 */
    ej_cron *c = parse_ok("0 30 2 * * ?");
    ej_tz *ny = zone("America/New_York");
    int64_t a, b;
    for (int64_t t = 1772899200000LL; t < 1772899200000LL + 5 * 86400000LL; t = a) {
        assert_int_equal(ej_cron_next(c, tz, t, &a), 0);
        assert_int_equal(ej_cron_next(c, ny, t, &b), 0);
        assert_int_equal(a, b);
    }
    ej_cron_free(c);
    unsetenv("TZ");
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_tz_host_rule),
        cmocka_unit_test(test_quartz_facts),
        cmocka_unit_test(test_quartz_satisfied),
        cmocka_unit_test(test_quartz_qtz259),
        cmocka_unit_test(test_quartz_parse_errors),
        cmocka_unit_test(test_error_messages),
        cmocka_unit_test(test_lenient_syntax),
        cmocka_unit_test(test_next_basics),
        cmocka_unit_test(test_quartz_infinite_loop),
        cmocka_unit_test(test_concurrent_use),
        cmocka_unit_test(test_tz_offsets),
        cmocka_unit_test(test_tz_local_to_utc),
        cmocka_unit_test(test_tz_names),
        cmocka_unit_test(test_tz_bad_files),
        cmocka_unit_test(test_tz_list),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
