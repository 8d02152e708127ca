/*
 * prom_check: a strict checker of the Prometheus text exposition format
 * 0.0.4, written from the format's description (not from ejob's renderer),
 * for tests that scrape /metrics.
 *
 * Reads the exposition on stdin. Every line must be a HELP, TYPE or other
 * comment line, or a sample: name, optional {label="value",...}, a value,
 * an optional integer timestamp. It also checks what a scraper relies on:
 * the input ends with a newline; no empty lines; names and label names are
 * valid; label values use only the escapes \\ \" \n; no label twice in a
 * sample; HELP and TYPE at most once per family and TYPE before its
 * samples; the samples of a family are contiguous; no series twice;
 * counters are not negative or NaN; histograms have increasing `le`
 * buckets whose counts never decrease, a "+Inf" bucket equal to _count, and
 * a _sum.
 *
 * On success prints every sample line unchanged (so a test can grep
 * values) and exits 0; otherwise prints "line N: what is wrong" to stderr
 * and exits 1.
 */
#include <math.h>
#include <stdarg.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define MAX_LINE 65536
#define MAX_LABELS 32
#define MAX_FAMILIES 4096
#define MAX_SERIES 65536

static int lineno;

static void die(const char *fmt, ...) __attribute__((format(printf, 1, 2), noreturn));

static void die(const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    fprintf(stderr, "line %d: ", lineno);
    vfprintf(stderr, fmt, ap);
    fputc('\n', stderr);
    va_end(ap);
    exit(1);
}

static bool name_start(char c, bool colon)
{
    return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || c == '_' || (colon && c == ':');
}

static bool name_char(char c, bool colon)
{
    return name_start(c, colon) || (c >= '0' && c <= '9');
}

/* Reads a name at *p into out; returns false when there is none. */
static bool read_name(const char **p, char *out, size_t outlen, bool colon)
{
    const char *s = *p;
    if (!name_start(*s, colon))
        return false;
    size_t n = 0;
    while (name_char(s[n], colon))
        n++;
    if (n >= outlen)
        die("name too long");
    memcpy(out, s, n);
    out[n] = '\0';
    *p = s + n;
    return true;
}

/* A Go ParseFloat number, or +Inf/-Inf/Inf/NaN. */
static bool parse_value(const char *s, double *out)
{
    if (strcmp(s, "+Inf") == 0 || strcmp(s, "Inf") == 0) {
        *out = INFINITY;
        return true;
    }
    if (strcmp(s, "-Inf") == 0) {
        *out = -INFINITY;
        return true;
    }
    if (strcmp(s, "NaN") == 0) {
        *out = NAN;
        return true;
    }
    const char *p = s;
    if (*p == '+' || *p == '-')
        p++;
    bool digits = false;
    while (*p >= '0' && *p <= '9')
        p++, digits = true;
    if (*p == '.') {
        p++;
        while (*p >= '0' && *p <= '9')
            p++, digits = true;
    }
    if (!digits)
        return false;
    if (*p == 'e' || *p == 'E') {
        p++;
        if (*p == '+' || *p == '-')
            p++;
        if (!(*p >= '0' && *p <= '9'))
            return false;
        while (*p >= '0' && *p <= '9')
            p++;
    }
    if (*p != '\0')
        return false;
    *out = strtod(s, NULL);
    return true;
}

/* ------------------------------------------------------------ families */

enum type { T_NONE, T_COUNTER, T_GAUGE, T_HISTOGRAM, T_SUMMARY, T_UNTYPED };

struct family {
    char name[256];
    enum type type;
    bool help, typed, sampled, closed;
};

static struct family fams[MAX_FAMILIES];
static int nfams;
static int current = -1; /* family of the last sample */
static char *series[MAX_SERIES];
static int nseries;

static struct family *family(const char *name, bool create)
{
    for (int i = 0; i < nfams; i++)
        if (strcmp(fams[i].name, name) == 0)
            return &fams[i];
    if (!create)
        return NULL;
    if (nfams == MAX_FAMILIES)
        die("too many families");
    struct family *f = &fams[nfams++];
    memset(f, 0, sizeof *f);
    snprintf(f->name, sizeof f->name, "%s", name);
    return f;
}

static bool ends_with(const char *s, const char *suffix)
{
    size_t a = strlen(s), b = strlen(suffix);
    return a > b && strcmp(s + a - b, suffix) == 0;
}

/* The family a sample name belongs to: a declared histogram/summary whose
 * name plus _bucket/_sum/_count it is, else the name itself. */
static struct family *family_of(const char *sample, const char **suffix)
{
    static const char *const sfx[] = {"_bucket", "_sum", "_count"};
    for (int i = 0; i < 3; i++) {
        if (!ends_with(sample, sfx[i]))
            continue;
        char base[256];
        size_t n = strlen(sample) - strlen(sfx[i]);
        memcpy(base, sample, n);
        base[n] = '\0';
        struct family *f = family(base, false);
        if (f != NULL && (f->type == T_HISTOGRAM || (f->type == T_SUMMARY && i > 0))) {
            *suffix = sfx[i];
            return f;
        }
    }
    *suffix = "";
    return family(sample, true);
}

/* ----------------------------------------------------------- histograms */

/* State of the histogram series being read (buckets come before _sum and
 * _count of the same label set). */
struct hist {
    char key[MAX_LINE]; /* family + labels without le */
    double last_le, last_count, inf_count;
    bool any, has_inf, has_sum, has_count;
};

static struct hist hs;

static void hist_finish(void)
{
    if (!hs.any)
        return;
    if (!hs.has_inf)
        die("histogram %s: no +Inf bucket", hs.key);
    if (!hs.has_sum || !hs.has_count)
        die("histogram %s: missing _sum or _count", hs.key);
    hs.any = false;
}

static void hist_sample(const char *fam, const char *suffix, const char *labels_wo_le,
                        const char *le, double v)
{
    char key[MAX_LINE];
    snprintf(key, sizeof key, "%s{%s}", fam, labels_wo_le);
    if (strcmp(suffix, "_bucket") == 0) {
        if (le == NULL)
            die("%s_bucket without an le label", fam);
        double bound;
        if (!parse_value(le, &bound) || isnan(bound))
            die("bad le \"%s\"", le);
        if (!hs.any || strcmp(hs.key, key) != 0) {
            hist_finish();
            memset(&hs, 0, sizeof hs);
            snprintf(hs.key, sizeof hs.key, "%s", key);
            hs.any = true;
            hs.last_le = -INFINITY;
        } else if (hs.has_sum || hs.has_count) {
            die("%s: bucket after _sum/_count", key);
        }
        if (hs.has_inf || !(bound > hs.last_le))
            die("%s: le=\"%s\" not above the bucket before", key, le);
        if (isnan(v) || v < hs.last_count)
            die("%s: bucket le=\"%s\" count %g below the bucket before (%g): not cumulative", key,
                le, v, hs.last_count);
        if (v != floor(v))
            die("%s: bucket count %g not an integer", key, v);
        hs.last_le = bound;
        hs.last_count = v;
        if (isinf(bound) && bound > 0) {
            hs.has_inf = true;
            hs.inf_count = v;
        }
        return;
    }
    if (le != NULL)
        die("le label on %s%s", fam, suffix);
    if (!hs.any || strcmp(hs.key, key) != 0)
        die("%s%s before the buckets of %s", fam, suffix, key);
    if (strcmp(suffix, "_sum") == 0)
        hs.has_sum = true;
    else {
        hs.has_count = true;
        if (!hs.has_inf)
            die("histogram %s: no +Inf bucket", key);
        if (v != hs.inf_count)
            die("%s: _count %g differs from the +Inf bucket %g", key, v, hs.inf_count);
    }
}

/* -------------------------------------------------------------- samples */

/* Parses {a="x",b="y"}; returns the label text without le (for the series
 * key) and the le value. */
static const char *parse_labels(const char *p, char *wo_le, size_t wlen, char *le, bool *has_le,
                                char *canon, size_t clen)
{
    char names[MAX_LABELS][256];
    int n = 0;
    size_t w = 0, c = 0;
    *has_le = false;
    wo_le[0] = canon[0] = '\0';
    p++; /* '{' */
    while (*p != '}') {
        char lname[256];
        if (!read_name(&p, lname, sizeof lname, false))
            die("bad label name at \"%.20s\"", p);
        if (strncmp(lname, "__", 2) == 0)
            die("label name %s is reserved", lname);
        for (int i = 0; i < n; i++)
            if (strcmp(names[i], lname) == 0)
                die("label %s twice", lname);
        if (n == MAX_LABELS)
            die("too many labels");
        snprintf(names[n++], 256, "%s", lname);
        if (*p++ != '=' || *p++ != '"')
            die("expected =\" after label %s", lname);
        char value[MAX_LINE];
        size_t v = 0;
        while (*p != '"') {
            if (*p == '\0')
                die("unterminated label value of %s", lname);
            if (*p == '\\') {
                p++;
                if (*p != '\\' && *p != '"' && *p != 'n')
                    die("bad escape \\%c in label %s", *p ? *p : '0', lname);
            }
            value[v++] = *p++;
        }
        value[v] = '\0';
        p++;
        bool is_le = strcmp(lname, "le") == 0;
        if (is_le) {
            *has_le = true;
            if (v >= 64)
                die("le value too long");
            memcpy(le, value, v + 1);
        } else {
            w += (size_t)snprintf(wo_le + w, wlen - w, "%s%s=\"%s\"", w ? "," : "", lname, value);
        }
        c += (size_t)snprintf(canon + c, clen - c, "%s%s=\"%s\"", c ? "," : "", lname, value);
        if (w >= wlen || c >= clen)
            die("labels too long");
        if (*p == ',')
            p++;
        else if (*p != '}')
            die("expected , or } after label %s", lname);
    }
    return p + 1;
}

static void remember_series(const char *key)
{
    for (int i = 0; i < nseries; i++)
        if (strcmp(series[i], key) == 0)
            die("series %s twice", key);
    if (nseries == MAX_SERIES)
        die("too many series");
    series[nseries++] = strdup(key);
}

static void sample_line(const char *line)
{
    const char *p = line;
    char name[256];
    if (!read_name(&p, name, sizeof name, true))
        die("not a sample: \"%.40s\"", line);
    char wo_le[MAX_LINE], canon[MAX_LINE], le[64] = "";
    bool has_le = false;
    wo_le[0] = canon[0] = '\0';
    if (*p == '{')
        p = parse_labels(p, wo_le, sizeof wo_le, le, &has_le, canon, sizeof canon);
    if (*p != ' ')
        die("expected a space before the value");
    p++;
    char value[128];
    size_t n = strcspn(p, " ");
    if (n == 0 || n >= sizeof value)
        die("missing or overlong value");
    memcpy(value, p, n);
    value[n] = '\0';
    p += n;
    double v;
    if (!parse_value(value, &v))
        die("bad value \"%s\"", value);
    if (*p == ' ') {
        p++;
        char *end;
        if (*p == '\0')
            die("trailing space");
        strtoll(p, &end, 10);
        if (*end != '\0' || end == p)
            die("bad timestamp \"%s\"", p);
    }
    const char *suffix;
    struct family *f = family_of(name, &suffix);
    int idx = (int)(f - fams);
    if (f->closed || (current != idx && f->sampled))
        die("samples of %s are not together", f->name);
    if (current >= 0 && current != idx) {
        fams[current].closed = true;
        if (fams[current].type == T_HISTOGRAM)
            hist_finish();
    }
    current = idx;
    f->sampled = true;
    char key[MAX_LINE + 256];
    snprintf(key, sizeof key, "%s{%s}", name, canon);
    remember_series(key);
    if (f->type == T_COUNTER && (isnan(v) || v < 0))
        die("counter %s is %s", name, value);
    if (f->type == T_HISTOGRAM)
        hist_sample(f->name, suffix, wo_le, has_le ? le : NULL, v);
    else if (f->type != T_GAUGE && f->type != T_UNTYPED && f->type != T_NONE && has_le &&
             f->type != T_SUMMARY)
        die("le label on %s", name);
    puts(line);
}

static enum type parse_type(const char *s)
{
    static const char *const names[] = {"", "counter", "gauge", "histogram", "summary", "untyped"};
    for (int i = 1; i < 6; i++)
        if (strcmp(s, names[i]) == 0)
            return (enum type)i;
    return T_NONE;
}

static void comment_line(const char *line)
{
    bool help = strncmp(line, "# HELP ", 7) == 0;
    bool type = strncmp(line, "# TYPE ", 7) == 0;
    if (!help && !type)
        return; /* another comment */
    const char *p = line + 7;
    char name[256];
    if (!read_name(&p, name, sizeof name, true))
        die("bad metric name in %s line", help ? "HELP" : "TYPE");
    struct family *f = family(name, true);
    if (f->sampled)
        die("%s of %s after its samples", help ? "HELP" : "TYPE", name);
    if (help) {
        if (f->help)
            die("second HELP for %s", name);
        f->help = true;
        if (*p == '\0')
            return;
        if (*p++ != ' ')
            die("expected a space after the name in HELP");
        for (; *p != '\0'; p++)
            if (*p == '\\') {
                p++;
                if (*p != '\\' && *p != 'n')
                    die("bad escape in HELP of %s", name);
            }
        return;
    }
    if (f->typed)
        die("second TYPE for %s", name);
    if (*p++ != ' ' || (f->type = parse_type(p)) == T_NONE)
        die("bad TYPE line for %s", name);
    f->typed = true;
}

int main(void)
{
    static char line[MAX_LINE + 2];
    size_t total = 0;
    while (fgets(line, sizeof line, stdin) != NULL) {
        lineno++;
        size_t n = strlen(line);
        total += n;
        if (n == 0 || line[n - 1] != '\n')
            die(n > MAX_LINE ? "line too long" : "the input does not end with a newline");
        line[--n] = '\0';
        if (n == 0)
            die("empty line");
        if (line[0] == '#')
            comment_line(line);
        else
            sample_line(line);
    }
    if (total == 0) {
        fprintf(stderr, "empty input\n");
        return 1;
    }
    lineno++;
    if (current >= 0 && fams[current].type == T_HISTOGRAM)
        hist_finish();
    for (int i = 0; i < nfams; i++)
        if (fams[i].sampled && !fams[i].typed)
            die("%s has samples but no TYPE", fams[i].name);
    return 0;
}
