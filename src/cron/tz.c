/*
 * Time zones from the system's TZif files (RFC 8536, versions 1 to 4) with
 * the POSIX TZ rule of the file's footer for instants after the table.
 *
 * A loaded zone keeps its transitions extended with the footer rule up to
 * RULE_TABLE_END_YEAR, so almost every lookup is one binary search; later
 * instants evaluate the rule directly. Zones are cached for the life of the
 * process and never freed, so handles can be shared without reference counts.
 */
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "common/check.h"
#include "cron/internal.h"
#include "ejob/error.h"

#define RULE_TABLE_END_YEAR 2200
#define TZIF_MAX_FILE (4 * 1024 * 1024)
#define TZ_NAME_MAX 255

/* ------------------------------------------------------------ civil math */

int64_t ej__cron_days_from_civil(int64_t y, int m)
{
    /* Howard Hinnant's days_from_civil, for day 1 of the month. */
    y -= m <= 2;
    int64_t era = ej__floordiv(y, 400);
    int64_t yoe = y - era * 400;
    int64_t mp = (m + 9) % 12;
    int64_t doy = (153 * mp + 2) / 5;
    int64_t doe = yoe * 365 + yoe / 4 - yoe / 100 + doy;
    return era * 146097 + doe - 719468;
}

void ej__cron_civil_from_days(int64_t z, int64_t *year, int *month, int *day)
{
    z += 719468;
    int64_t era = ej__floordiv(z, 146097);
    int64_t doe = z - era * 146097;
    int64_t yoe = (doe - doe / 1460 + doe / 36524 - doe / 146096) / 365;
    int64_t doy = doe - (365 * yoe + yoe / 4 - yoe / 100);
    int64_t mp = (5 * doy + 2) / 153;
    int d = (int)(doy - (153 * mp + 2) / 5 + 1);
    int m = (int)(mp < 10 ? mp + 3 : mp - 9);
    *year = yoe + era * 400 + (m <= 2);
    *month = m;
    *day = d;
}

bool ej__cron_is_leap(int64_t y)
{
    return (y % 4 == 0 && y % 100 != 0) || y % 400 == 0;
}

int ej__cron_month_len(int64_t y, int m)
{
    static const int len[12] = {31, 28, 31, 30, 31, 30, 31, 31, 30, 31, 30, 31};
    if (m == 2 && ej__cron_is_leap(y))
        return 29;
    return len[(m - 1) % 12];
}

/* ------------------------------------------------------- POSIX TZ rules */

typedef struct rule_date {
    char kind; /* 'J' (1..365, no Feb 29), 'D' (0..365), 'M' (month.week.day) */
    int n, m, w, d;
    int32_t time; /* seconds after local midnight, may be negative or > 24h */
} rule_date;

typedef struct posix_rule {
    int32_t std_off; /* seconds east of UTC */
    int32_t dst_off;
    bool has_dst;
    bool all_dst; /* the rule keeps daylight time all year */
    rule_date start, end;
} posix_rule;

typedef struct tz_event {
    int64_t at; /* UTC seconds */
    int32_t off_after;
    int32_t off_before;
} tz_event;

struct ej_tz {
    char *name;
    int32_t initial_off; /* before the first transition: time type 0 */
    int32_t ntrans;
    int64_t *trans;    /* UTC seconds, ascending */
    int32_t *off;      /* offset after transition i */
    int64_t *wall_key; /* trans[i] + off[i]: the wall time the change lands on */
    bool has_rule;
    bool rule_only; /* no transitions of its own: a TZ rule string */
    posix_rule rule;
    int64_t table_limit; /* instants >= this use the rule (INT64_MAX: never) */
};

static const char *parse_name(const char *s)
{
    if (*s == '<') {
        s++;
        while (*s && *s != '>') {
            if (!((*s >= 'A' && *s <= 'Z') || (*s >= 'a' && *s <= 'z') ||
                  (*s >= '0' && *s <= '9') || *s == '+' || *s == '-'))
                return NULL;
            s++;
        }
        return *s == '>' ? s + 1 : NULL;
    }
    const char *b = s;
    while ((*s >= 'A' && *s <= 'Z') || (*s >= 'a' && *s <= 'z'))
        s++;
    return s - b >= 3 ? s : NULL;
}

/* [+-]hh[:mm[:ss]] with hh <= max_h; returns the end or NULL. */
static const char *parse_hms(const char *s, int max_h, int32_t *out)
{
    int sign = 1;
    if (*s == '+' || *s == '-') {
        sign = *s == '-' ? -1 : 1;
        s++;
    }
    int32_t v[3] = {0, 0, 0};
    for (int part = 0; part < 3; part++) {
        if (part > 0) {
            if (*s != ':')
                break;
            s++;
        }
        if (*s < '0' || *s > '9')
            return NULL;
        int n = 0, digits = 0;
        while (*s >= '0' && *s <= '9' && digits < 3) {
            n = n * 10 + (*s - '0');
            s++;
            digits++;
        }
        v[part] = n;
    }
    if (v[0] > max_h || v[1] > 59 || v[2] > 59)
        return NULL;
    *out = sign * (v[0] * 3600 + v[1] * 60 + v[2]);
    return s;
}

static const char *parse_int(const char *s, int lo, int hi, int *out)
{
    if (*s < '0' || *s > '9')
        return NULL;
    int n = 0;
    while (*s >= '0' && *s <= '9') {
        n = n * 10 + (*s - '0');
        if (n > hi)
            return NULL;
        s++;
    }
    if (n < lo)
        return NULL;
    *out = n;
    return s;
}

static const char *parse_rule_date(const char *s, rule_date *r)
{
    if (*s == 'J') {
        r->kind = 'J';
        s = parse_int(s + 1, 1, 365, &r->n);
    } else if (*s == 'M') {
        r->kind = 'M';
        s = parse_int(s + 1, 1, 12, &r->m);
        if (s == NULL || *s != '.')
            return NULL;
        s = parse_int(s + 1, 1, 5, &r->w);
        if (s == NULL || *s != '.')
            return NULL;
        s = parse_int(s + 1, 0, 6, &r->d);
    } else {
        r->kind = 'D';
        s = parse_int(s, 0, 365, &r->n);
    }
    if (s == NULL)
        return NULL;
    r->time = 7200;
    if (*s == '/')
        s = parse_hms(s + 1, 167, &r->time);
    return s;
}

static int64_t rule_date_utc(const rule_date *r, int64_t year, int32_t off_before)
{
    int64_t days = ej__cron_days_from_civil(year, 1);
    if (r->kind == 'J') {
        days += r->n - 1;
        if (ej__cron_is_leap(year) && r->n >= 60)
            days++;
    } else if (r->kind == 'D') {
        days += r->n;
    } else {
        int64_t first = ej__cron_days_from_civil(year, r->m);
        int wday_first = (int)ej__floormod(first + 4, 7); /* 1970-01-01 was a Thursday */
        int mday = 1 + (r->d - wday_first + 7) % 7 + (r->w - 1) * 7;
        int len = ej__cron_month_len(year, r->m);
        while (mday > len)
            mday -= 7;
        days = first + mday - 1;
    }
    return days * 86400 + r->time - off_before;
}

/* Parses a POSIX TZ string (RFC 8536 section 3.3 extensions included). */
static bool parse_posix_tz(const char *s, posix_rule *r)
{
    memset(r, 0, sizeof(*r));
    int32_t off;
    s = parse_name(s);
    if (s == NULL || (s = parse_hms(s, 24, &off)) == NULL)
        return false;
    r->std_off = -off;
    r->dst_off = r->std_off;
    if (*s == '\0')
        return true;
    s = parse_name(s);
    if (s == NULL)
        return false;
    r->has_dst = true;
    r->dst_off = r->std_off + 3600;
    if (*s != ',' && *s != '\0') {
        s = parse_hms(s, 24, &off);
        if (s == NULL)
            return false;
        r->dst_off = -off;
    }
    if (*s == '\0') {
        /* No rule: POSIX leaves it to the implementation; use the US one. */
        r->start = (rule_date){'M', 0, 3, 2, 0, 7200};
        r->end = (rule_date){'M', 0, 11, 1, 0, 7200};
        return true;
    }
    if (*s != ',' || (s = parse_rule_date(s + 1, &r->start)) == NULL)
        return false;
    if (*s != ',' || (s = parse_rule_date(s + 1, &r->end)) == NULL)
        return false;
    if (*s != '\0')
        return false;
    /* Daylight time all year: the rule ends when (or after) the next year's
     * daylight time starts, e.g. "EST5EDT,0/0,J365/25". */
    int64_t st = rule_date_utc(&r->start, 2001, r->std_off);
    int64_t en = rule_date_utc(&r->end, 2001, r->dst_off);
    if (st <= ej__cron_days_from_civil(2001, 1) * 86400 - r->std_off &&
        en >= ej__cron_days_from_civil(2002, 1) * 86400 - r->dst_off)
        r->all_dst = true;
    return true;
}

/* The six rule events of years y-1..y+1, sorted by instant. */
static int rule_events(const posix_rule *r, int64_t y, tz_event ev[6])
{
    int n = 0;
    for (int64_t yy = y - 1; yy <= y + 1; yy++) {
        ev[n++] = (tz_event){rule_date_utc(&r->start, yy, r->std_off), r->dst_off, r->std_off};
        ev[n++] = (tz_event){rule_date_utc(&r->end, yy, r->dst_off), r->std_off, r->dst_off};
    }
    for (int i = 1; i < n; i++) {
        tz_event e = ev[i];
        int j = i - 1;
        while (j >= 0 && ev[j].at > e.at) {
            ev[j + 1] = ev[j];
            j--;
        }
        ev[j + 1] = e;
    }
    return n;
}

static int32_t rule_offset_at(const posix_rule *r, int64_t t)
{
    if (!r->has_dst)
        return r->std_off;
    if (r->all_dst)
        return r->dst_off;
    int64_t y;
    int m, d;
    ej__cron_civil_from_days(ej__floordiv(t + r->std_off, 86400), &y, &m, &d);
    tz_event ev[6];
    int n = rule_events(r, y, ev);
    int32_t off = ev[0].off_before;
    for (int i = 0; i < n && ev[i].at <= t; i++)
        off = ev[i].off_after;
    return off;
}

static int32_t rule_wall_offset(const posix_rule *r, int64_t w, bool earlier)
{
    if (!r->has_dst)
        return r->std_off;
    if (r->all_dst)
        return r->dst_off;
    int64_t y;
    int m, d;
    ej__cron_civil_from_days(ej__floordiv(w, 86400), &y, &m, &d);
    tz_event ev[6];
    int n = rule_events(r, y, ev);
    int idx = -1;
    for (int i = 0; i < n && ev[i].at + ev[i].off_after <= w; i++)
        idx = i;
    if (idx < 0)
        return ev[0].off_before;
    if (earlier && ev[idx].off_before > ev[idx].off_after && w < ev[idx].at + ev[idx].off_before)
        return ev[idx].off_before;
    return ev[idx].off_after;
}

/* ---------------------------------------------------------------- lookups */

static ej_tz utc_zone = {
    .name = "UTC",
    .initial_off = 0,
    .ntrans = 0,
    .has_rule = false,
    .table_limit = INT64_MAX,
};

const ej_tz *ej_tz_utc(void)
{
    return &utc_zone;
}

int32_t ej__tz_offset_at_s(const ej_tz *tz, int64_t t)
{
    if (tz == NULL)
        return 0;
    if (t >= tz->table_limit)
        return rule_offset_at(&tz->rule, t);
    if (tz->rule_only)
        return rule_offset_at(&tz->rule, t);
    if (tz->ntrans == 0 || t < tz->trans[0])
        return tz->has_rule && tz->ntrans == 0 ? rule_offset_at(&tz->rule, t) : tz->initial_off;
    int32_t lo = 0, hi = tz->ntrans - 1;
    while (lo < hi) { /* last i with trans[i] <= t */
        int32_t mid = lo + (hi - lo + 1) / 2;
        if (tz->trans[mid] <= t)
            lo = mid;
        else
            hi = mid - 1;
    }
    if (lo == tz->ntrans - 1 && tz->has_rule)
        return rule_offset_at(&tz->rule, t);
    return tz->off[lo];
}

int32_t ej__tz_wall_offset_s(const ej_tz *tz, int64_t w, bool earlier)
{
    if (tz == NULL)
        return 0;
    if (tz->ntrans == 0 || tz->rule_only)
        return tz->has_rule ? rule_wall_offset(&tz->rule, w, earlier) : tz->initial_off;
    if (tz->table_limit != INT64_MAX && w >= tz->table_limit + tz->rule.std_off)
        return rule_wall_offset(&tz->rule, w, earlier);
    if (w < tz->wall_key[0])
        return tz->initial_off;
    int32_t lo = 0, hi = tz->ntrans - 1;
    while (lo < hi) { /* last i with wall_key[i] <= w */
        int32_t mid = lo + (hi - lo + 1) / 2;
        if (tz->wall_key[mid] <= w)
            lo = mid;
        else
            hi = mid - 1;
    }
    if (lo == tz->ntrans - 1 && tz->has_rule && tz->table_limit == INT64_MAX)
        return rule_wall_offset(&tz->rule, w, earlier);
    int32_t before = lo > 0 ? tz->off[lo - 1] : tz->initial_off;
    if (earlier && before > tz->off[lo] && w < tz->trans[lo] + before)
        return before;
    return tz->off[lo];
}

void ej__tz_span_at(const ej_tz *tz, int64_t t, ej_tz_span *sp)
{
    sp->start = sp->end = t;
    sp->wall_lo = sp->wall_hi = 0;
    sp->off = ej__tz_offset_at_s(tz, t);
    if (tz == NULL || (tz->ntrans == 0 && !tz->has_rule)) {
        sp->start = sp->wall_lo = INT64_MIN;
        sp->end = sp->wall_hi = INT64_MAX;
        return;
    }
    if (tz->rule_only || tz->ntrans == 0 || t >= tz->table_limit)
        return; /* rule region: no span */
    if (t < tz->trans[0]) {
        sp->start = sp->wall_lo = INT64_MIN;
        sp->end = tz->trans[0];
        sp->wall_hi = tz->wall_key[0];
        sp->off = tz->initial_off;
        return;
    }
    int32_t lo = 0, hi = tz->ntrans - 1;
    while (lo < hi) {
        int32_t mid = lo + (hi - lo + 1) / 2;
        if (tz->trans[mid] <= t)
            lo = mid;
        else
            hi = mid - 1;
    }
    if (lo == tz->ntrans - 1) {
        /* After the table: only a zone without daylight time has a span. */
        if (tz->table_limit != INT64_MAX ||
            (tz->has_rule && (tz->rule.has_dst || tz->rule.std_off != tz->off[lo])))
            return;
        sp->end = sp->wall_hi = INT64_MAX;
    } else {
        sp->end = tz->trans[lo + 1];
        sp->wall_hi = tz->wall_key[lo + 1];
        /* The table's last stretch before the rule takes over. */
        if (tz->table_limit != INT64_MAX && lo + 1 == tz->ntrans - 1)
            return;
    }
    sp->start = tz->trans[lo];
    sp->wall_lo = tz->wall_key[lo];
    sp->off = tz->off[lo];
    if (sp->wall_lo >= sp->wall_hi) /* keys out of order: no span */
        sp->start = sp->end = t;
}

int32_t ej_tz_offset_at(const ej_tz *tz, int64_t epoch_ms)
{
    return ej__tz_offset_at_s(tz, ej__floordiv(epoch_ms, 1000));
}

void ej_tz_to_local(const ej_tz *tz, int64_t epoch_ms, ej_civil_time *out, int32_t *offset_s)
{
    int64_t s = ej__floordiv(epoch_ms, 1000);
    int32_t off = ej__tz_offset_at_s(tz, s);
    int64_t local = s + off;
    int64_t days = ej__floordiv(local, 86400);
    int64_t sod = local - days * 86400;
    int64_t y;
    int m, d;
    ej__cron_civil_from_days(days, &y, &m, &d);
    if (out != NULL) {
        out->year = (int32_t)y;
        out->month = m;
        out->day = d;
        out->hour = (int32_t)(sod / 3600);
        out->minute = (int32_t)(sod / 60 % 60);
        out->second = (int32_t)(sod % 60);
        out->ms = (int32_t)ej__floormod(epoch_ms, 1000);
        out->wday = (int32_t)ej__floormod(days + 4, 7) + 1;
    }
    if (offset_s != NULL)
        *offset_s = off;
}

int ej_tz_local_to_utc(const ej_tz *tz, const ej_civil_time *lt, ej_tz_resolve resolve,
                       int64_t *epoch_ms)
{
    if (lt == NULL || epoch_ms == NULL || lt->year < -1000000 || lt->year > 1000000)
        return EJ_EINVAL;
    int64_t month0 = (int64_t)lt->month - 1;
    int64_t year = lt->year + ej__floordiv(month0, 12);
    int month = (int)ej__floormod(month0, 12) + 1;
    int64_t days = ej__cron_days_from_civil(year, month) + (int64_t)lt->day - 1;
    int64_t wall_ms = days * 86400000 + (int64_t)lt->hour * 3600000 + (int64_t)lt->minute * 60000 +
                      (int64_t)lt->second * 1000 + lt->ms;
    int32_t off = ej__tz_wall_offset_s(tz, ej__floordiv(wall_ms, 1000), resolve == EJ_TZ_EARLIER);
    *epoch_ms = wall_ms - (int64_t)off * 1000;
    return 0;
}

/* ------------------------------------------------------------ TZif files */

static uint32_t be32(const uint8_t *p)
{
    return (uint32_t)p[0] << 24 | (uint32_t)p[1] << 16 | (uint32_t)p[2] << 8 | p[3];
}

static int64_t be64(const uint8_t *p)
{
    return (int64_t)((uint64_t)be32(p) << 32 | be32(p + 4));
}

typedef struct tzif_counts {
    uint32_t isut, isstd, leap, time, type, chars;
} tzif_counts;

static bool read_header(const uint8_t *p, size_t n, size_t at, tzif_counts *c, char *version)
{
    if (n < at + 44 || memcmp(p + at, "TZif", 4) != 0)
        return false;
    *version = (char)p[at + 4];
    c->isut = be32(p + at + 20);
    c->isstd = be32(p + at + 24);
    c->leap = be32(p + at + 28);
    c->time = be32(p + at + 32);
    c->type = be32(p + at + 36);
    c->chars = be32(p + at + 40);
    if (c->type == 0 || c->type > 256 || c->chars == 0 || c->chars > 65536 || c->time > 1000000 ||
        c->leap > 100000 || (c->isut != 0 && c->isut != c->type) ||
        (c->isstd != 0 && c->isstd != c->type))
        return false;
    return true;
}

static size_t block_len(const tzif_counts *c, int tsize)
{
    return (size_t)c->time * tsize + c->time + (size_t)c->type * 6 + c->chars +
           (size_t)c->leap * (tsize + 4) + c->isstd + c->isut;
}

/* Builds the zone's tables from the transitions and the rule. */
static int build_zone(ej_tz *z, const int64_t *times, const uint8_t *idx, uint32_t ntime,
                      const int32_t *type_off, uint32_t ntype)
{
    (void)ntype;
    size_t extra = 0;
    int64_t last_year = 1970;
    if (z->has_rule && z->rule.has_dst && !z->rule.all_dst) {
        int64_t from = ntime > 0 ? times[ntime - 1] : 0;
        int64_t y;
        int m, d;
        ej__cron_civil_from_days(ej__floordiv(from, 86400), &y, &m, &d);
        last_year = y < 1900 ? 1900 : y;
        if (last_year <= RULE_TABLE_END_YEAR)
            extra = (size_t)(RULE_TABLE_END_YEAR - last_year + 2) * 2;
    }
    size_t cap = ntime + extra;
    z->trans = malloc((cap ? cap : 1) * sizeof(int64_t));
    z->off = malloc((cap ? cap : 1) * sizeof(int32_t));
    z->wall_key = malloc((cap ? cap : 1) * sizeof(int64_t));
    if (z->trans == NULL || z->off == NULL || z->wall_key == NULL)
        return EJ_ENOMEM;
    int32_t n = 0;
    for (uint32_t i = 0; i < ntime; i++) {
        z->trans[n] = times[i];
        z->off[n] = type_off[idx[i]];
        n++;
    }
    if (extra > 0) {
        int64_t after = ntime > 0 ? times[ntime - 1] : INT64_MIN;
        int32_t cur = n > 0 ? z->off[n - 1] : z->initial_off;
        for (int64_t y = last_year; y <= RULE_TABLE_END_YEAR; y++) {
            int64_t st = rule_date_utc(&z->rule.start, y, z->rule.std_off);
            int64_t en = rule_date_utc(&z->rule.end, y, z->rule.dst_off);
            tz_event ev[2] = {{st, z->rule.dst_off, 0}, {en, z->rule.std_off, 0}};
            if (en < st) {
                tz_event t = ev[0];
                ev[0] = ev[1];
                ev[1] = t;
            }
            for (int k = 0; k < 2; k++) {
                if (ev[k].at <= after || ev[k].off_after == cur || (size_t)n >= cap)
                    continue;
                z->trans[n] = ev[k].at;
                z->off[n] = ev[k].off_after;
                cur = ev[k].off_after;
                n++;
            }
        }
        /* Past the table the rule is evaluated directly. */
        z->table_limit = (ej__cron_days_from_civil(RULE_TABLE_END_YEAR + 1, 1)) * 86400;
    } else {
        z->table_limit = INT64_MAX;
    }
    z->ntrans = n;
    for (int32_t i = 0; i < n; i++)
        z->wall_key[i] = z->trans[i] + z->off[i];
    return 0;
}

static int parse_tzif(ej_tz *z, const uint8_t *p, size_t n)
{
    tzif_counts c;
    char version;
    if (!read_header(p, n, 0, &c, &version))
        return EJ_EPARSE;
    size_t at = 44;
    int tsize = 4;
    if (version != 0) {
        size_t v1 = block_len(&c, 4);
        if (n < at + v1)
            return EJ_EPARSE;
        at += v1;
        char v2;
        if (!read_header(p, n, at, &c, &v2))
            return EJ_EPARSE;
        at += 44;
        tsize = 8;
    }
    size_t blen = block_len(&c, tsize);
    if (n < at + blen)
        return EJ_EPARSE;
    const uint8_t *tp = p + at;
    const uint8_t *ip = tp + (size_t)c.time * tsize;
    const uint8_t *typ = ip + c.time;
    int rc = EJ_ENOMEM;
    int64_t *times = malloc((c.time ? c.time : 1) * sizeof(int64_t));
    int32_t type_off[256];
    if (times == NULL)
        return EJ_ENOMEM;
    rc = EJ_EPARSE;
    for (uint32_t i = 0; i < c.type; i++) {
        int32_t off = (int32_t)be32(typ + i * 6);
        if (off < -25 * 3600 || off > 26 * 3600 || typ[i * 6 + 5] >= c.chars)
            goto out_free_times;
        type_off[i] = off;
    }
    for (uint32_t i = 0; i < c.time; i++) {
        times[i] =
            tsize == 8 ? be64(tp + (size_t)i * 8) : (int64_t)(int32_t)be32(tp + (size_t)i * 4);
        if (ip[i] >= c.type || (i > 0 && times[i] <= times[i - 1]))
            goto out_free_times;
    }
    z->initial_off = type_off[0];
    z->has_rule = false;
    if (tsize == 8) {
        size_t f = at + blen;
        if (f < n && p[f] == '\n') {
            const uint8_t *e = memchr(p + f + 1, '\n', n - f - 1);
            if (e == NULL)
                goto out_free_times;
            size_t len = (size_t)(e - (p + f + 1));
            if (len > 0) {
                char buf[256];
                if (len >= sizeof(buf))
                    goto out_free_times;
                memcpy(buf, p + f + 1, len);
                buf[len] = '\0';
                if (!parse_posix_tz(buf, &z->rule))
                    goto out_free_times;
                z->has_rule = true;
            }
        }
    }
    rc = build_zone(z, times, ip, c.time, type_off, c.type);
out_free_times:
    free(times);
    return rc;
}

static int read_file(const char *path, uint8_t **out, size_t *len)
{
    int fd = open(path, O_RDONLY | O_CLOEXEC);
    if (fd < 0)
        return errno == ENOENT || errno == ENOTDIR ? EJ_ENOTFOUND : -errno;
    struct stat st;
    int rc = 0;
    uint8_t *buf = NULL;
    if (fstat(fd, &st) != 0) {
        rc = -errno;
        goto out_close;
    }
    if (!S_ISREG(st.st_mode)) {
        rc = EJ_ENOTFOUND;
        goto out_close;
    }
    if (st.st_size > TZIF_MAX_FILE) {
        rc = EJ_EPARSE;
        goto out_close;
    }
    buf = malloc((size_t)st.st_size + 1);
    if (buf == NULL) {
        rc = EJ_ENOMEM;
        goto out_close;
    }
    size_t got = 0;
    while (got < (size_t)st.st_size) {
        ssize_t r = read(fd, buf + got, (size_t)st.st_size - got);
        if (r < 0 && errno == EINTR)
            continue;
        if (r < 0) {
            rc = -errno;
            free(buf);
            goto out_close;
        }
        if (r == 0)
            break;
        got += (size_t)r;
    }
    *out = buf;
    *len = got;
out_close:
    close(fd);
    return rc;
}

static void zone_destroy(ej_tz *z)
{
    if (z == NULL || z == &utc_zone)
        return;
    free(z->name);
    free(z->trans);
    free(z->off);
    free(z->wall_key);
    free(z);
}

static int load_path(const char *path, const char *name, ej_tz **out)
{
    uint8_t *buf = NULL;
    size_t len = 0;
    int rc = read_file(path, &buf, &len);
    if (rc != 0)
        return rc;
    ej_tz *z = calloc(1, sizeof(*z));
    if (z == NULL) {
        free(buf);
        return EJ_ENOMEM;
    }
    rc = parse_tzif(z, buf, len);
    free(buf);
    if (rc == 0 && (z->name = strdup(name)) == NULL)
        rc = EJ_ENOMEM;
    if (rc != 0) {
        zone_destroy(z);
        return rc;
    }
    *out = z;
    return 0;
}

static int zone_from_rule(const posix_rule *r, const char *name, ej_tz **out)
{
    ej_tz *z = calloc(1, sizeof(*z));
    if (z == NULL)
        return EJ_ENOMEM;
    z->rule = *r;
    z->has_rule = true;
    z->rule_only = true;
    z->initial_off = r->std_off;
    int rc = build_zone(z, NULL, NULL, 0, NULL, 0);
    if (rc == 0 && (z->name = strdup(name)) == NULL)
        rc = EJ_ENOMEM;
    if (rc != 0) {
        zone_destroy(z);
        return rc;
    }
    *out = z;
    return 0;
}

/* java.util.TimeZone custom ids: GMT+h, GMT+hh, GMT+hh:mm, GMT+hhmm. */
static bool java_custom_offset(const char *id, int32_t *off)
{
    if (strncmp(id, "GMT", 3) != 0 || (id[3] != '+' && id[3] != '-') || id[4] == '\0')
        return false;
    bool neg = id[3] == '-';
    int hours = 0, num = 0, delims = 0, len = 0;
    for (const char *s = id + 4; *s; s++) {
        if (*s == ':') {
            if (delims > 0 || len > 2)
                return false;
            hours = num;
            delims++;
            num = 0;
            len = 0;
            continue;
        }
        if (*s < '0' || *s > '9' || len > 6)
            return false;
        num = num * 10 + (*s - '0');
        len++;
    }
    if (delims == 0) {
        if (len <= 2) {
            hours = num;
            num = 0;
        } else {
            hours = num / 100;
            num %= 100;
        }
    } else if (len != 2) {
        return false;
    }
    if (hours > 23 || num > 59)
        return false;
    *off = (neg ? -1 : 1) * (hours * 3600 + num * 60);
    return true;
}

static bool valid_zone_name(const char *name)
{
    size_t len = strlen(name);
    if (len == 0 || len > TZ_NAME_MAX || name[0] == '/')
        return false;
    const char *comp = name;
    for (const char *s = name;; s++) {
        if (*s == '/' || *s == '\0') {
            size_t cl = (size_t)(s - comp);
            if (cl == 0 || (cl == 2 && comp[0] == '.' && comp[1] == '.') ||
                (cl == 1 && comp[0] == '.'))
                return false;
            if (*s == '\0')
                break;
            comp = s + 1;
            continue;
        }
        char c = *s;
        if (!((c >= 'A' && c <= 'Z') || (c >= 'a' && c <= 'z') || (c >= '0' && c <= '9') ||
              c == '_' || c == '-' || c == '+' || c == '.'))
            return false;
    }
    return true;
}

const char *ej__tz_dir(void)
{
    const char *d = getenv("TZDIR");
    return d != NULL && d[0] == '/' ? d : "/usr/share/zoneinfo";
}

static bool is_utc_name(const char *name)
{
    return strcmp(name, "UTC") == 0 || strcmp(name, "Etc/UTC") == 0 || strcmp(name, "GMT") == 0 ||
           strcmp(name, "Etc/GMT") == 0 || strcmp(name, "Zulu") == 0 ||
           strcmp(name, "Universal") == 0;
}

static int load_named(const char *name, ej_tz **out)
{
    int32_t off;
    if (java_custom_offset(name, &off)) {
        posix_rule r = {.std_off = off, .dst_off = off};
        char norm[16];
        snprintf(norm, sizeof(norm), "GMT%c%02d:%02d", off < 0 ? '-' : '+', abs(off) / 3600,
                 abs(off) / 60 % 60);
        return zone_from_rule(&r, off == 0 ? "GMT" : norm, out);
    }
    if (!valid_zone_name(name))
        return EJ_EINVAL;
    char path[PATH_MAX];
    int n = snprintf(path, sizeof(path), "%s/%s", ej__tz_dir(), name);
    if (n < 0 || (size_t)n >= sizeof(path))
        return EJ_EINVAL;
    int rc = load_path(path, name, out);
    if (rc == EJ_ENOTFOUND && is_utc_name(name)) {
        *out = &utc_zone;
        return 0;
    }
    return rc;
}

/* The host zone: $TZ, else /etc/localtime (named after its link target or
 * /etc/timezone), else UTC. */
static int load_host(ej_tz **out)
{
    const char *env = getenv("TZ");
    if (env != NULL) {
        const char *s = env[0] == ':' ? env + 1 : env;
        if (*s == '\0') {
            *out = &utc_zone;
            return 0;
        }
        if (s[0] == '/') {
            const char *zi = strstr(s, "/zoneinfo/");
            return load_path(s, zi != NULL ? zi + 10 : s, out);
        }
        int rc = load_named(s, out);
        if (rc != EJ_EINVAL && rc != EJ_ENOTFOUND)
            return rc;
        posix_rule r;
        if (parse_posix_tz(s, &r))
            return zone_from_rule(&r, s, out);
        return rc;
    }
    char name[PATH_MAX] = "localtime";
    char link[PATH_MAX];
    ssize_t ln = readlink("/etc/localtime", link, sizeof(link) - 1);
    if (ln > 0) {
        link[ln] = '\0';
        const char *zi = strstr(link, "zoneinfo/");
        if (zi != NULL && valid_zone_name(zi + 9))
            snprintf(name, sizeof(name), "%s", zi + 9);
    } else {
        FILE *f = fopen("/etc/timezone", "re");
        if (f != NULL) {
            char line[256];
            if (fgets(line, sizeof(line), f) != NULL) {
                line[strcspn(line, "\r\n")] = '\0';
                if (valid_zone_name(line))
                    snprintf(name, sizeof(name), "%s", line);
            }
            fclose(f);
        }
    }
    int rc = load_path("/etc/localtime", name, out);
    if (rc == EJ_ENOTFOUND) {
        *out = &utc_zone;
        return 0;
    }
    return rc;
}

/* ------------------------------------------------------------------ cache */

typedef struct cache_entry {
    struct cache_entry *next;
    ej_tz *tz;
    char key[];
} cache_entry;

static ej__mutex cache_lock = EJ__MUTEX_INITIALIZER;
static cache_entry *cache_head;

int ej_tz_load(const char *name, ej_tz **out)
{
    if (out == NULL)
        return EJ_EINVAL;
    const char *key = name == NULL ? "" : name;
    if (strlen(key) > TZ_NAME_MAX)
        return EJ_EINVAL;
    ej__mutex_lock(&cache_lock);
    for (cache_entry *e = cache_head; e != NULL; e = e->next) {
        if (strcmp(e->key, key) == 0) {
            *out = e->tz;
            ej__mutex_unlock(&cache_lock);
            return 0;
        }
    }
    ej_tz *z = NULL;
    int rc = key[0] == '\0' ? load_host(&z) : load_named(key, &z);
    if (rc == 0) {
        size_t kl = strlen(key);
        cache_entry *e = malloc(sizeof(*e) + kl + 1);
        if (e == NULL) {
            zone_destroy(z);
            rc = EJ_ENOMEM;
        } else {
            memcpy(e->key, key, kl + 1);
            e->tz = z;
            e->next = cache_head;
            cache_head = e;
            *out = z;
        }
    }
    ej__mutex_unlock(&cache_lock);
    return rc;
}

void ej_tz_free(ej_tz *tz)
{
    (void)tz; /* cached for the life of the process */
}

const char *ej_tz_name(const ej_tz *tz)
{
    return tz == NULL ? "UTC" : tz->name;
}

void ej_tz_format_iso(const ej_tz *tz, int64_t ms, char *buf, size_t len)
{
    ej_civil_time lt;
    int32_t off;
    ej_tz_to_local(tz, ms, &lt, &off);
    int32_t a = off < 0 ? -off : off;
    int n =
        snprintf(buf, len, "%04d-%02d-%02dT%02d:%02d:%02d%c%02d:%02d", lt.year, lt.month, lt.day,
                 lt.hour, lt.minute, lt.second, off < 0 ? '-' : '+', a / 3600, a / 60 % 60);
    if (a % 60 != 0 && n > 0 && (size_t)n < len)
        snprintf(buf + n, len - (size_t)n, ":%02d", a % 60);
}
