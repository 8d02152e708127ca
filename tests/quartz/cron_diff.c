/*
 * Differential test of ejob's cron evaluation against Quartz 2.3.2 itself.
 *
 *   cron_quartz_diff EJOB_BINARY ORACLE_SOURCE_DIR WORK_DIR
 *
 * 1. Compiles tests/quartz/CronOracle.java with javac against Debian's
 *    quartz2.jar (skips, exit 77, when javac or the jar is missing).
 * 2. Checks that the JDK's zone data and the system's TZif files agree for
 *    every zone used (offsets every 30 minutes, 1965..2135); a zone whose
 *    data differ is left out and reported (different tzdata releases).
 * 3. Compares wall-time resolution around every transition of those zones
 *    (GregorianCalendar vs ej_tz_local_to_utc).
 * 4. Generates random cron expressions (valid and invalid: fields, steps,
 *    ranges, lists, L/W/LW/L-n/#, names, years), random zones and start
 *    instants (many next to DST transitions), runs `ejob cron next --batch`
 *    and the oracle on the same input and compares validity and the next 10
 *    fire times line by line.
 *
 * Differences that docs/cron.md lists as deliberate deviations are skipped
 * by rule, counted and printed:
 *   - Quartz accepts the expression but getTimeAfter throws (a field with
 *     no values): ejob rejects it.
 *   - Quartz does not return within the time limit (it loops forever):
 *     not compared.
 *   - A 'W' expression with a start instant that is not a whole second,
 *     where the two differ: Quartz compares its 'W' candidate, which carries
 *     the milliseconds of the wall clock at the moment it runs, with the
 *     start, so its answer depends on when it runs.
 * Environment: EJ_CRON_DIFF_CASES (default 10000), EJ_CRON_DIFF_SEED (default
 * 20261122; any other seed explores further).
 */
#include <errno.h>
#include <inttypes.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "ejob/cron.h"

#define QUARTZ_JAR "/usr/share/java/quartz2.jar"
#define SLF4J_JAR "/usr/share/java/slf4j-api.jar"

static const char *const zones[] = {
    "UTC",
    "America/New_York",
    "Europe/London",
    "Australia/Lord_Howe",
    "Asia/Shanghai",
    "America/Los_Angeles",
    "America/Chicago",
    "America/Denver",
    "America/Phoenix",
    "America/Sao_Paulo",
    "America/Santiago",
    "America/Havana",
    "America/St_Johns",
    "Europe/Berlin",
    "Europe/Paris",
    "Europe/Moscow",
    "Europe/Dublin",
    "Europe/Lisbon",
    "Africa/Cairo",
    "Asia/Tokyo",
    "Asia/Kolkata",
    "Asia/Kathmandu",
    "Asia/Tehran",
    "Asia/Jerusalem",
    "Australia/Sydney",
    "Australia/Adelaide",
    "Pacific/Auckland",
    "Pacific/Chatham",
    "Pacific/Apia",
    "Atlantic/Azores",
};
#define NZONES (int)(sizeof(zones) / sizeof(zones[0]))

static bool zone_ok[NZONES];

/* ------------------------------------------------------------ helpers */

static uint64_t rng_state;

static uint64_t rnd(void)
{
    /* splitmix64 */
    uint64_t z = (rng_state += 0x9e3779b97f4a7c15ULL);
    z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ULL;
    z = (z ^ (z >> 27)) * 0x94d049bb133111ebULL;
    return z ^ (z >> 31);
}

static int rn(int n)
{
    return (int)(rnd() % (uint64_t)n);
}

static int rr(int lo, int hi)
{
    return lo + rn(hi - lo + 1);
}

static bool chance(int percent)
{
    return rn(100) < percent;
}

typedef struct sbuf {
    char s[512];
    size_t n;
} sbuf;

static void sb_printf(sbuf *b, const char *fmt, ...) __attribute__((format(printf, 2, 3)));

static void sb_printf(sbuf *b, const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    int k = vsnprintf(b->s + b->n, sizeof(b->s) - b->n, fmt, ap);
    va_end(ap);
    if (k > 0)
        b->n += (size_t)k < sizeof(b->s) - b->n ? (size_t)k : sizeof(b->s) - b->n - 1;
}

static double mono(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + ts.tv_nsec / 1e9;
}

static int run(const char *cmd)
{
    int st = system(cmd);
    if (st == -1)
        return -1;
    return WIFEXITED(st) ? WEXITSTATUS(st) : -1;
}

/* ---------------------------------------------------------- generator */

static const char *const month_names[] = {"JAN", "FEB", "MAR", "APR", "MAY", "JUN",
                                          "JUL", "AUG", "SEP", "OCT", "NOV", "DEC"};
static const char *const day_names[] = {"SUN", "MON", "TUE", "WED", "THU", "FRI", "SAT"};

/* A number of a field: usually in range, sometimes just outside. */
static int fnum(int lo, int hi)
{
    if (chance(3))
        return chance(50) ? lo - 1 : hi + 1;
    return rr(lo, hi);
}

static void num_or_name(sbuf *b, int field, int v)
{
    if (field == 4 && v >= 1 && v <= 12 && chance(40))
        sb_printf(b, "%s", month_names[v - 1]);
    else if (field == 5 && v >= 1 && v <= 7 && chance(40))
        sb_printf(b, "%s", day_names[v - 1]);
    else
        sb_printf(b, "%d", v);
}

/* One element of a list: n, a-b, a/s, *\/s, a-b/s. */
static void element(sbuf *b, int field, int lo, int hi)
{
    int k = rn(10);
    if (k < 4) {
        num_or_name(b, field, fnum(lo, hi));
    } else if (k < 7) {
        int a = fnum(lo, hi), z = fnum(lo, hi);
        if (field == 6 && z < a && chance(80)) {
            int t = a;
            a = z;
            z = t;
        }
        num_or_name(b, field, a);
        sb_printf(b, "-");
        num_or_name(b, field, z);
        if (chance(25))
            sb_printf(b, "/%d", rr(1, field == 6 ? 30 : hi - lo + 2));
    } else if (k < 9) {
        sb_printf(b, "%d/%d", fnum(lo, hi), rr(1, field == 6 ? 20 : hi - lo + 2));
    } else {
        sb_printf(b, "*/%d", rr(1, field == 6 ? 20 : hi - lo + 2));
    }
}

static void plain_field(sbuf *b, int field, int lo, int hi)
{
    if (chance(20)) {
        sb_printf(b, "*");
        return;
    }
    int n = chance(70) ? 1 : rr(2, 4);
    for (int i = 0; i < n; i++) {
        if (i > 0)
            sb_printf(b, ",");
        element(b, field, lo, hi);
    }
}

static void dom_field(sbuf *b)
{
    int k = rn(20);
    if (k < 3)
        sb_printf(b, "L");
    else if (k < 5)
        sb_printf(b, "L-%d", rr(0, 31));
    else if (k < 6)
        sb_printf(b, "LW");
    else if (k < 7)
        sb_printf(b, "L-%dW", rr(0, 28));
    else if (k < 10)
        sb_printf(b, "%dW", rr(1, 31));
    else
        plain_field(b, 3, 1, 31);
}

static void dow_field(sbuf *b)
{
    int k = rn(20);
    if (k < 2) {
        sb_printf(b, "L");
    } else if (k < 5) {
        num_or_name(b, 5, fnum(1, 7));
        sb_printf(b, "L");
    } else if (k < 9) {
        num_or_name(b, 5, chance(95) ? rr(1, 7) : rr(0, 9));
        sb_printf(b, "#%d", chance(90) ? rr(1, 5) : rr(0, 6));
    } else {
        plain_field(b, 5, 1, 7);
    }
}

static void year_field(sbuf *b)
{
    int k = rn(10);
    if (k < 2)
        sb_printf(b, "*");
    else if (k < 5)
        sb_printf(b, "%d", rr(2015, 2135));
    else if (k < 8)
        sb_printf(b, "%d-%d", rr(2015, 2060), rr(2040, 2140));
    else if (k < 9)
        sb_printf(b, "%d/%d", rr(2000, 2050), rr(1, 12));
    else
        sb_printf(b, "%d,%d,%d", rr(2020, 2040), rr(2040, 2080), rr(2080, 2130));
}

static void mutate(sbuf *b)
{
    static const char pool[] = "0123456789*?,-/#LW ABCXYZ\t";
    if (b->n == 0)
        return;
    size_t at = (size_t)rn((int)b->n);
    int k = rn(3);
    if (k == 0 && b->n + 1 < sizeof(b->s)) {
        memmove(b->s + at + 1, b->s + at, b->n - at + 1);
        b->s[at] = pool[rn((int)sizeof(pool) - 1)];
        b->n++;
    } else if (k == 1) {
        memmove(b->s + at, b->s + at + 1, b->n - at);
        b->n--;
    } else {
        b->s[at] = pool[rn((int)sizeof(pool) - 1)];
    }
}

static void gen_expr(sbuf *b)
{
    b->n = 0;
    b->s[0] = '\0';
    /* Small sets of seconds/minutes/hours keep fire times spread out. */
    if (chance(60))
        sb_printf(b, "%d", rr(0, 59));
    else
        plain_field(b, 0, 0, 59);
    sb_printf(b, " ");
    if (chance(50))
        sb_printf(b, "%d", rr(0, 59));
    else
        plain_field(b, 1, 0, 59);
    sb_printf(b, " ");
    if (chance(40))
        sb_printf(b, "%d", chance(30) ? rr(0, 3) : rr(0, 23));
    else
        plain_field(b, 2, 0, 23);
    sb_printf(b, " ");
    int which = rn(100);
    if (which < 45) {
        dom_field(b);
        sb_printf(b, " ");
        plain_field(b, 4, 1, 12);
        sb_printf(b, " ?");
    } else if (which < 92) {
        sb_printf(b, "? ");
        plain_field(b, 4, 1, 12);
        sb_printf(b, " ");
        dow_field(b);
    } else {
        dom_field(b);
        sb_printf(b, " ");
        plain_field(b, 4, 1, 12);
        sb_printf(b, " ");
        dow_field(b);
    }
    if (chance(35)) {
        sb_printf(b, " ");
        year_field(b);
    }
    if (chance(6))
        mutate(b);
    if (chance(3)) /* lower case is accepted */
        for (size_t i = 0; i < b->n; i++)
            if (b->s[i] >= 'A' && b->s[i] <= 'Z' && chance(50))
                b->s[i] = (char)(b->s[i] + 32);
}

/* Instants where a zone's offset changes, found by scanning and bisecting. */
static int find_transitions(const ej_tz *tz, int64_t from_s, int64_t to_s, int64_t *out, int max)
{
    int n = 0;
    int32_t prev = ej_tz_offset_at(tz, from_s * 1000);
    for (int64_t t = from_s + 3600 * 6; t <= to_s && n < max; t += 3600 * 6) {
        int32_t off = ej_tz_offset_at(tz, t * 1000);
        if (off != prev) {
            int64_t lo = t - 3600 * 6, hi = t;
            while (hi - lo > 1) {
                int64_t mid = lo + (hi - lo) / 2;
                if (ej_tz_offset_at(tz, mid * 1000) == prev)
                    lo = mid;
                else
                    hi = mid;
            }
            out[n++] = hi;
            prev = off;
        }
    }
    return n;
}

#define MAX_TRANS 1024
static int64_t trans[NZONES][MAX_TRANS];
static int ntrans[NZONES];

static int64_t gen_from(int z)
{
    /* 2000-01-01 .. 2110-01-01 */
    int64_t lo = 946684800, hi = 4417977600LL;
    int64_t s;
    int k = rn(10);
    if (k < 4 && ntrans[z] > 0) {
        s = trans[z][rn(ntrans[z])] + rr(-36 * 3600, 36 * 3600);
        if (chance(50))
            s = s / 60 * 60 + (chance(50) ? -1 : 0);
    } else if (k < 6) {
        /* near the end of a month or year */
        int y = rr(2000, 2105), m = rr(1, 12);
        struct tm tm = {.tm_year = y - 1900, .tm_mon = m, .tm_mday = 1};
        s = (int64_t)timegm(&tm) + rr(-3 * 86400, 86400);
    } else if (k < 7) {
        /* 1960 .. 2000 and 2110 .. 2130 */
        s = chance(50) ? -315619200 + (int64_t)(rnd() % 1262304000ULL)
                       : 4417977600LL + (int64_t)(rnd() % 631152000ULL);
    } else {
        s = lo + (int64_t)(rnd() % (uint64_t)(hi - lo));
    }
    int64_t ms = s * 1000;
    if (chance(15))
        ms += rr(1, 999);
    return ms;
}

/* ------------------------------------------------------------ checks */

static uint64_t fnv_offsets(const ej_tz *tz, int64_t from, int64_t step, int64_t n)
{
    uint64_t h = 0xcbf29ce484222325ULL;
    for (int64_t i = 0; i < n; i++) {
        uint32_t off = (uint32_t)ej_tz_offset_at(tz, (from + i * step) * 1000);
        for (int b = 0; b < 4; b++) {
            h ^= (off >> (8 * b)) & 0xff;
            h *= 0x100000001b3ULL;
        }
    }
    return h;
}

static FILE *xopen(const char *path, const char *mode)
{
    FILE *f = fopen(path, mode);
    if (f == NULL) {
        fprintf(stderr, "cron_quartz_diff: %s: %s\n", path, strerror(errno));
        exit(1);
    }
    return f;
}

static char *read_line(FILE *f, char **buf, size_t *cap)
{
    ssize_t n = getline(buf, cap, f);
    if (n < 0)
        return NULL;
    while (n > 0 && ((*buf)[n - 1] == '\n' || (*buf)[n - 1] == '\r'))
        (*buf)[--n] = '\0';
    return *buf;
}

int main(int argc, char **argv)
{
    if (argc != 4) {
        fprintf(stderr, "usage: cron_quartz_diff EJOB ORACLE_DIR WORK_DIR\n");
        return 2;
    }
    const char *ejob = argv[1], *src = argv[2], *work = argv[3];
    if (access(QUARTZ_JAR, R_OK) != 0 || run("command -v javac >/dev/null 2>&1") != 0 ||
        run("command -v java >/dev/null 2>&1") != 0) {
        printf("SKIP: needs javac, java and %s\n", QUARTZ_JAR);
        return 77;
    }
    if (access(ejob, X_OK) != 0) {
        fprintf(stderr, "cron_quartz_diff: %s is not executable\n", ejob);
        return 1;
    }
    double t0 = mono();
    mkdir(work, 0755);
    char cmd[16384];
    snprintf(cmd, sizeof(cmd), "javac -nowarn -d '%s' -cp '%s' '%s/CronOracle.java'", work,
             QUARTZ_JAR, src);
    if (run(cmd) != 0) {
        fprintf(stderr, "cron_quartz_diff: javac failed\n");
        return 1;
    }
    char java[8192];
    snprintf(java, sizeof(java), "java -Xss4m -cp '%s:%s:%s' CronOracle", QUARTZ_JAR, SLF4J_JAR,
             work);
    const char *env_seed = getenv("EJ_CRON_DIFF_SEED");
    uint64_t seed = env_seed ? strtoull(env_seed, NULL, 10) : 20261122;
    const char *env_cases = getenv("EJ_CRON_DIFF_CASES");
    int ncases = env_cases ? atoi(env_cases) : 10000;
    printf("cron_quartz_diff: seed %" PRIu64 ", %d cases (EJ_CRON_DIFF_SEED reproduces)\n", seed,
           ncases);
    rng_state = seed;

    /* Zone data: the JDK's tzdb against the TZif files. */
    const ej_tz *tzs[NZONES];
    char path_in[2048], path_java[2048], path_ejob[2048];
    snprintf(path_in, sizeof(path_in), "%s/zones.in", work);
    snprintf(path_java, sizeof(path_java), "%s/zones.java", work);
    FILE *in = xopen(path_in, "w");
    const int64_t zfrom = -157766400, zstep = 3600, zn = (4923475200LL + 157766400) / 3600 + 1;
    int64_t zfrom_s = zfrom;
    for (int z = 0; z < NZONES; z++) {
        ej_tz *t;
        if (ej_tz_load(zones[z], &t) != 0) {
            fprintf(stderr, "cron_quartz_diff: cannot load zone %s\n", zones[z]);
            return 1;
        }
        tzs[z] = t;
        fprintf(in, "#OFFSETS\t%s\t%" PRId64 "\t%" PRId64 "\t%" PRId64 "\n", zones[z], zfrom_s,
                zstep, zn);
    }
    fclose(in);
    snprintf(cmd, sizeof(cmd), "%s < '%s' > '%s'", java, path_in, path_java);
    if (run(cmd) != 0) {
        fprintf(stderr, "cron_quartz_diff: the oracle failed\n");
        return 1;
    }
    FILE *jf = xopen(path_java, "r");
    char *line = NULL;
    size_t cap = 0;
    int good_zones = 0;
    for (int z = 0; z < NZONES; z++) {
        char *l = read_line(jf, &line, &cap);
        uint64_t mine = fnv_offsets(tzs[z], zfrom, zstep, zn);
        zone_ok[z] = l != NULL && strtoull(l, NULL, 10) == mine;
        if (!zone_ok[z])
            printf("zone %s: JDK and system tzdata disagree; left out\n", zones[z]);
        else
            good_zones++;
        ntrans[z] = find_transitions(tzs[z], 946684800, 4417977600LL, trans[z], MAX_TRANS);
    }
    fclose(jf);
    printf("zones: %d of %d agree with the JDK's data (%.1f s)\n", good_zones, NZONES, mono() - t0);

    /* Wall-time resolution around transitions. */
    snprintf(path_in, sizeof(path_in), "%s/wall.in", work);
    snprintf(path_java, sizeof(path_java), "%s/wall.java", work);
    in = xopen(path_in, "w");
    int nwall = 0;
    static int64_t wall_expect[200000];
    static char wall_desc[200000][48];
    for (int z = 0; z < NZONES && nwall < 190000; z++) {
        if (!zone_ok[z])
            continue;
        for (int i = 0; i < ntrans[z] && nwall < 190000; i += (ntrans[z] > 200 ? 2 : 1)) {
            int64_t tr = trans[z][i];
            int32_t before = ej_tz_offset_at(tzs[z], (tr - 1) * 1000);
            for (int d = -120; d <= 120; d += 15) {
                int64_t wall = tr + before + d * 60;
                time_t wt = (time_t)wall;
                struct tm tm;
                gmtime_r(&wt, &tm);
                ej_civil_time lt = {tm.tm_year + 1900, tm.tm_mon + 1, tm.tm_mday, tm.tm_hour,
                                    tm.tm_min,         tm.tm_sec,     0,          0};
                int64_t ms;
                ej_tz_local_to_utc(tzs[z], &lt, EJ_TZ_LATER, &ms);
                wall_expect[nwall] = ms;
                snprintf(wall_desc[nwall], sizeof(wall_desc[0]), "%.20s %04d-%02d-%02d %02d:%02d",
                         zones[z], lt.year, lt.month, lt.day, lt.hour, lt.minute);
                fprintf(in, "#WALL\t%s\t%d\t%d\t%d\t%d\t%d\t%d\n", zones[z], lt.year, lt.month,
                        lt.day, lt.hour, lt.minute, lt.second);
                nwall++;
            }
        }
    }
    fclose(in);
    snprintf(cmd, sizeof(cmd), "%s < '%s' > '%s'", java, path_in, path_java);
    if (run(cmd) != 0) {
        fprintf(stderr, "cron_quartz_diff: the oracle failed\n");
        return 1;
    }
    jf = xopen(path_java, "r");
    int wall_bad = 0;
    for (int i = 0; i < nwall; i++) {
        char *l = read_line(jf, &line, &cap);
        int64_t j = l ? strtoll(l, NULL, 10) : INT64_MIN;
        if (j != wall_expect[i]) {
            if (wall_bad < 10)
                printf("WALL MISMATCH %s: quartz %" PRId64 " ejob %" PRId64 "\n", wall_desc[i], j,
                       wall_expect[i]);
            wall_bad++;
        }
    }
    fclose(jf);
    printf("wall times around transitions: %d compared, %d mismatches (%.1f s)\n", nwall, wall_bad,
           mono() - t0);

    /* The cron cases. */
    snprintf(path_in, sizeof(path_in), "%s/cron.in", work);
    snprintf(path_java, sizeof(path_java), "%s/cron.java", work);
    snprintf(path_ejob, sizeof(path_ejob), "%s/cron.ejob", work);
    in = xopen(path_in, "w");
    for (int i = 0; i < ncases; i++) {
        sbuf b;
        gen_expr(&b);
        int z;
        do
            z = rn(NZONES);
        while (!zone_ok[z]);
        fprintf(in, "%s\t%s\t%" PRId64 "\t10\n", b.s, zones[z], gen_from(z));
    }
    fclose(in);
    snprintf(cmd, sizeof(cmd), "%s < '%s' > '%s'", java, path_in, path_java);
    if (run(cmd) != 0) {
        fprintf(stderr, "cron_quartz_diff: the oracle failed\n");
        return 1;
    }
    snprintf(cmd, sizeof(cmd), "'%s' cron next --batch < '%s' > '%s' 2>/dev/null", ejob, path_in,
             path_ejob);
    if (run(cmd) != 0) {
        fprintf(stderr, "cron_quartz_diff: ejob cron next --batch failed\n");
        return 1;
    }
    FILE *inf = xopen(path_in, "r");
    jf = xopen(path_java, "r");
    FILE *ef = xopen(path_ejob, "r");
    char *lin = NULL, *lj = NULL, *le = NULL;
    size_t cin = 0, cj = 0, ce = 0;
    int valid = 0, invalid = 0, none = 0, mism = 0, skip_throw = 0, skip_timeout = 0, skip_w = 0;
    long times = 0;
    for (int i = 0; i < ncases; i++) {
        char *a = read_line(inf, &lin, &cin);
        char *j = read_line(jf, &lj, &cj);
        char *e = read_line(ef, &le, &ce);
        if (a == NULL || j == NULL || e == NULL) {
            fprintf(stderr, "cron_quartz_diff: output ends early at case %d\n", i);
            return 1;
        }
        if (strncmp(j, "ERROR java.util.NoSuchElementException", 38) == 0 &&
            strcmp(e, "INVALID") == 0) {
            printf("skipped (Quartz accepts, then throws): %s\n", a);
            skip_throw++;
            continue;
        }
        if (strcmp(j, "TIMEOUT") == 0) {
            printf("skipped (Quartz does not return): %s\n  ejob: %s\n", a, e);
            skip_timeout++;
            continue;
        }
        if (strcmp(j, e) != 0 && strpbrk(a, "Ww") != NULL) {
            /* FROM is the field before the last tab */
            const char *f = strrchr(a, '\t') - 1;
            while (f > a && f[-1] != '\t')
                f--;
            int64_t from = strtoll(f, NULL, 10);
            if (from % 1000 != 0) {
                printf("skipped (W, sub-second start): %s\n", a);
                skip_w++;
                continue;
            }
        }
        if (strcmp(j, e) != 0) {
            if (mism < 20)
                printf("MISMATCH %s\n  quartz: %s\n  ejob:   %s\n", a, j, e);
            mism++;
            continue;
        }
        if (strcmp(j, "INVALID") == 0) {
            invalid++;
        } else if (strcmp(j, "NONE") == 0) {
            valid++;
            none++;
        } else {
            valid++;
            times++;
            for (const char *p = j; *p; p++)
                times += *p == ' ';
        }
    }
    printf("cron cases: %d generated, %d equal: %d valid (%d with no fire time), %d invalid; "
           "%ld fire times equal\n",
           ncases, valid + invalid, valid, none, invalid, times);
    printf("skipped by rule: %d accepted by Quartz but unevaluable (it throws), %d where Quartz "
           "did not return, %d 'W' with a sub-second start\n",
           skip_throw, skip_timeout, skip_w);
    printf("mismatches: %d (%.1f s)\n", mism, mono() - t0);
    free(line);
    free(lin);
    free(lj);
    free(le);
    return mism == 0 && wall_bad == 0 ? 0 : 1;
}
