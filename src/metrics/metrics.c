/* Metric families and series: registration, lookup, lock-free updates. */
#include <math.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "common/check.h"
#include "ejob/error.h"
#include "metrics/internal.h"

const double ej_metric_default_buckets[16] = {0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1,
                                              2.5,   5,    10,    30,   60,  300,  900, 3600};

void ej__metrics_set_err(char *err, size_t errlen, const char *fmt, ...)
{
    if (err == NULL || errlen == 0)
        return;
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(err, errlen, fmt, ap);
    va_end(ap);
}

double ej__metrics_load(const _Atomic uint64_t *p)
{
    uint64_t bits = atomic_load_explicit(p, memory_order_relaxed);
    double d;
    memcpy(&d, &bits, sizeof d);
    return d;
}

static void store_double(_Atomic uint64_t *p, double v)
{
    uint64_t bits;
    memcpy(&bits, &v, sizeof bits);
    atomic_store_explicit(p, bits, memory_order_relaxed);
}

static void add_double(_Atomic uint64_t *p, double v)
{
    uint64_t old = atomic_load_explicit(p, memory_order_relaxed), next;
    do {
        double d;
        memcpy(&d, &old, sizeof d);
        d += v;
        memcpy(&next, &d, sizeof next);
    } while (!atomic_compare_exchange_weak_explicit(p, &old, next, memory_order_relaxed,
                                                    memory_order_relaxed));
}

/* ------------------------------------------------------------- registry */

int ej_metrics_create(ej_metrics **out)
{
    if (out == NULL)
        return EJ_EINVAL;
    *out = NULL;
    ej_metrics *m = calloc(1, sizeof *m);
    if (m == NULL)
        return EJ_ENOMEM;
    ej__mutex_init(&m->render_mu);
    ej__mutex_init(&m->mu);
    *out = m;
    return 0;
}

static void free_family(ej_metric *f)
{
    for (size_t i = 0; i < f->nseries; i++)
        free(f->series[i]);
    free(f->series);
    for (size_t i = 0; i < f->nlabels; i++)
        free(f->labels[i]);
    free(f->name);
    free(f->help);
    ej__mutex_destroy(&f->mu);
    free(f);
}

void ej_metrics_destroy(ej_metrics *m)
{
    if (m == NULL)
        return;
    for (size_t i = 0; i < m->nfamilies; i++)
        free_family(m->families[i]);
    free(m->families);
    for (size_t i = 0; i < m->ncollectors; i++)
        if (m->collectors[i].owned)
            free(m->collectors[i].user);
    free(m->collectors);
    ej__mutex_destroy(&m->mu);
    ej__mutex_destroy(&m->render_mu);
    free(m);
}

static bool valid_name(const char *s, bool colon)
{
    if (s == NULL || s[0] == '\0')
        return false;
    for (size_t i = 0; s[i] != '\0'; i++) {
        char c = s[i];
        bool ok = (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || c == '_' ||
                  (colon && c == ':') || (i > 0 && c >= '0' && c <= '9');
        if (!ok)
            return false;
    }
    return true;
}

static int check_labels(const struct ej_metric_desc *d, size_t *n, char *err, size_t errlen)
{
    *n = 0;
    while (*n < EJ_METRIC_MAX_LABELS && d->labels[*n] != NULL)
        (*n)++;
    for (size_t i = *n; i < EJ_METRIC_MAX_LABELS; i++)
        if (d->labels[i] != NULL) {
            ej__metrics_set_err(err, errlen, "%s: label %zu set after an empty slot", d->name, i);
            return EJ_EINVAL;
        }
    for (size_t i = 0; i < *n; i++) {
        const char *l = d->labels[i];
        if (!valid_name(l, false) || strncmp(l, "__", 2) == 0) {
            ej__metrics_set_err(err, errlen, "%s: bad label name \"%s\"", d->name, l);
            return EJ_EINVAL;
        }
        if (d->type == EJ_METRIC_HISTOGRAM && strcmp(l, "le") == 0) {
            ej__metrics_set_err(err, errlen, "%s: a histogram cannot have a label \"le\"", d->name);
            return EJ_EINVAL;
        }
        for (size_t j = 0; j < i; j++)
            if (strcmp(d->labels[j], l) == 0) {
                ej__metrics_set_err(err, errlen, "%s: label \"%s\" twice", d->name, l);
                return EJ_EINVAL;
            }
    }
    return 0;
}

static int check_buckets(const struct ej_metric_desc *d, const double **b, size_t *n, char *err,
                         size_t errlen)
{
    *b = d->buckets;
    *n = d->bucket_count;
    if (d->type != EJ_METRIC_HISTOGRAM)
        return 0;
    if (*b == NULL && *n == 0) {
        *b = ej_metric_default_buckets;
        *n = sizeof ej_metric_default_buckets / sizeof ej_metric_default_buckets[0];
    }
    if (*b == NULL || *n == 0 || *n > EJ_METRIC_MAX_BUCKETS) {
        ej__metrics_set_err(err, errlen, "%s: histogram needs 1..%d buckets", d->name,
                            EJ_METRIC_MAX_BUCKETS);
        return EJ_EINVAL;
    }
    for (size_t i = 0; i < *n; i++)
        if (!isfinite((*b)[i]) || (i > 0 && !((*b)[i] > (*b)[i - 1]))) {
            ej__metrics_set_err(err, errlen, "%s: buckets must be finite and strictly increasing",
                                d->name);
            return EJ_EINVAL;
        }
    return 0;
}

static int check_desc(ej_metrics *m, const struct ej_metric_desc *d, size_t *nlabels,
                      const double **b, size_t *nb, char *err, size_t errlen)
{
    if (m == NULL || d == NULL) {
        ej__metrics_set_err(err, errlen, "no registry or description");
        return EJ_EINVAL;
    }
    if (!valid_name(d->name, true)) {
        ej__metrics_set_err(err, errlen, "bad metric name \"%s\"", d->name ? d->name : "(null)");
        return EJ_EINVAL;
    }
    if (d->type != EJ_METRIC_COUNTER && d->type != EJ_METRIC_GAUGE &&
        d->type != EJ_METRIC_HISTOGRAM) {
        ej__metrics_set_err(err, errlen, "%s: unknown type %d", d->name, (int)d->type);
        return EJ_EINVAL;
    }
    int rc = check_labels(d, nlabels, err, errlen);
    return rc != 0 ? rc : check_buckets(d, b, nb, err, errlen);
}

static ej_metric *find_locked(ej_metrics *m, const char *name)
{
    EJ_ASSERT_HELD(&m->mu);
    for (size_t i = 0; i < m->nfamilies; i++)
        if (strcmp(m->families[i]->name, name) == 0)
            return m->families[i];
    return NULL;
}

static ej_metric *new_family(ej_metrics *m, const struct ej_metric_desc *d, size_t nlabels,
                             const double *b, size_t nb)
{
    ej_metric *f = calloc(1, sizeof *f);
    if (f == NULL)
        return NULL;
    ej__mutex_init(&f->mu);
    f->owner = m;
    f->type = d->type;
    f->name = strdup(d->name);
    f->help = strdup(d->help != NULL ? d->help : "");
    bool ok = f->name != NULL && f->help != NULL;
    for (size_t i = 0; i < nlabels; i++) {
        f->labels[i] = strdup(d->labels[i]);
        ok = ok && f->labels[i] != NULL;
        f->nlabels = i + 1;
    }
    if (d->type == EJ_METRIC_HISTOGRAM) {
        memcpy(f->buckets, b, nb * sizeof *b);
        f->nbuckets = nb;
    }
    if (!ok) {
        free_family(f);
        return NULL;
    }
    return f;
}

int ej_metrics_register(ej_metrics *m, const struct ej_metric_desc *desc, ej_metric **out,
                        char *err, size_t errlen)
{
    size_t nlabels = 0, nb = 0;
    const double *b = NULL;
    int rc = check_desc(m, desc, &nlabels, &b, &nb, err, errlen);
    if (rc != 0)
        return rc;
    ej_metric *f = new_family(m, desc, nlabels, b, nb);
    if (f == NULL) {
        ej__metrics_set_err(err, errlen, "%s: out of memory", desc->name);
        return EJ_ENOMEM;
    }
    ej__mutex_lock(&m->mu);
    if (find_locked(m, desc->name) != NULL) {
        rc = EJ_EINVAL;
        ej__metrics_set_err(err, errlen, "%s: registered twice", desc->name);
    } else if (m->nfamilies == m->cap) {
        size_t cap = m->cap ? m->cap * 2 : 16;
        ej_metric **n = realloc(m->families, cap * sizeof *n);
        if (n == NULL) {
            rc = EJ_ENOMEM;
            ej__metrics_set_err(err, errlen, "%s: out of memory", desc->name);
        } else {
            m->families = n;
            m->cap = cap;
        }
    }
    if (rc == 0)
        m->families[m->nfamilies++] = f;
    ej__mutex_unlock(&m->mu);
    if (rc != 0) {
        free_family(f);
        f = NULL;
    }
    if (out != NULL)
        *out = f;
    return rc;
}

int ej_metrics_register_table(ej_metrics *m, const struct ej_metric_desc *desc, size_t n,
                              ej_metric **out, char *err, size_t errlen)
{
    for (size_t i = 0; i < n; i++) {
        int rc = ej_metrics_register(m, &desc[i], out != NULL ? &out[i] : NULL, err, errlen);
        if (rc != 0)
            return rc;
    }
    return 0;
}

int ej_metrics_add_collector(ej_metrics *m, ej_metrics_collect_fn fn, void *user)
{
    return ej__metrics_add_collector(m, fn, user, false);
}

int ej__metrics_add_collector(ej_metrics *m, ej_metrics_collect_fn fn, void *user, bool owned)
{
    if (m == NULL || fn == NULL)
        return EJ_EINVAL;
    int rc = 0;
    ej__mutex_lock(&m->mu);
    if (m->ncollectors == m->ccap) {
        size_t cap = m->ccap ? m->ccap * 2 : 4;
        struct ej__collector *n = realloc(m->collectors, cap * sizeof *n);
        if (n == NULL)
            rc = EJ_ENOMEM;
        else {
            m->collectors = n;
            m->ccap = cap;
        }
    }
    if (rc == 0)
        m->collectors[m->ncollectors++] = (struct ej__collector){fn, user, owned};
    ej__mutex_unlock(&m->mu);
    return rc;
}

ej_metric *ej_metrics_find(ej_metrics *m, const char *name)
{
    if (m == NULL || name == NULL)
        return NULL;
    ej__mutex_lock(&m->mu);
    ej_metric *f = find_locked(m, name);
    ej__mutex_unlock(&m->mu);
    return f;
}

const char *ej_metric_name(const ej_metric *f)
{
    return f != NULL ? f->name : NULL;
}

/* --------------------------------------------------------------- series */

static int compare_values(const ej_metric *f, const char *const *a, const char *const *b)
{
    for (size_t i = 0; i < f->nlabels; i++) {
        int c = strcmp(a[i], b[i]);
        if (c != 0)
            return c;
    }
    return 0;
}

/* Index of the series with these values, or where it would go (*found false). */
static size_t search(const ej_metric *f, const char *const *values, bool *found)
{
    size_t lo = 0, hi = f->nseries;
    while (lo < hi) {
        size_t mid = lo + (hi - lo) / 2;
        int c = compare_values(f, f->series[mid]->values, values);
        if (c == 0) {
            *found = true;
            return mid;
        }
        if (c < 0)
            lo = mid + 1;
        else
            hi = mid;
    }
    *found = false;
    return lo;
}

static ej_metric_series *new_series(ej_metric *f, const char *const *values)
{
    size_t nb = f->type == EJ_METRIC_HISTOGRAM ? f->nbuckets + 1 : 0;
    size_t size =
        sizeof(ej_metric_series) + nb * sizeof(_Atomic uint64_t) + f->nlabels * sizeof(char *);
    size_t lens[EJ_METRIC_MAX_LABELS];
    for (size_t i = 0; i < f->nlabels; i++) {
        lens[i] = strlen(values[i]) + 1;
        size += lens[i];
    }
    ej_metric_series *s = calloc(1, size);
    if (s == NULL)
        return NULL;
    s->family = f;
    for (size_t i = 0; i < nb; i++)
        atomic_init(&s->buckets[i], 0);
    store_double(&s->value, 0.0);
    const char **vals = (const char **)(void *)&s->buckets[nb];
    char *text = (char *)&vals[f->nlabels];
    for (size_t i = 0; i < f->nlabels; i++) {
        memcpy(text, values[i], lens[i]);
        vals[i] = text;
        text += lens[i];
    }
    s->values = vals;
    return s;
}

static ej_metric_series *insert_locked(ej_metric *f, size_t at, const char *const *values)
{
    EJ_ASSERT_HELD(&f->mu);
    if (f->nseries == f->cap) {
        size_t cap = f->cap ? f->cap * 2 : 8;
        ej_metric_series **n = realloc(f->series, cap * sizeof *n);
        if (n == NULL)
            return NULL;
        f->series = n;
        f->cap = cap;
    }
    ej_metric_series *s = new_series(f, values);
    if (s == NULL)
        return NULL;
    memmove(&f->series[at + 1], &f->series[at], (f->nseries - at) * sizeof *f->series);
    f->series[at] = s;
    f->nseries++;
    return s;
}

ej_metric_series *ej_metric_get(ej_metric *f, const char *const *values)
{
    if (f == NULL || (f->nlabels > 0 && values == NULL))
        return NULL;
    for (size_t i = 0; i < f->nlabels; i++)
        if (values[i] == NULL)
            return NULL;
    ej__mutex_lock(&f->mu);
    bool found;
    size_t at = search(f, values, &found);
    ej_metric_series *s = found ? f->series[at] : insert_locked(f, at, values);
    ej__mutex_unlock(&f->mu);
    return s;
}

ej_metric_series *ej_metric_get0(ej_metric *f)
{
    return f != NULL && f->nlabels == 0 ? ej_metric_get(f, NULL) : NULL;
}

ej_metric_series *ej_metric_get1(ej_metric *f, const char *v1)
{
    const char *v[1] = {v1};
    return f != NULL && f->nlabels == 1 ? ej_metric_get(f, v) : NULL;
}

ej_metric_series *ej_metric_get2(ej_metric *f, const char *v1, const char *v2)
{
    const char *v[2] = {v1, v2};
    return f != NULL && f->nlabels == 2 ? ej_metric_get(f, v) : NULL;
}

void ej_metric_reset(ej_metric *f)
{
    if (f == NULL)
        return;
    ej__mutex_lock(&f->mu);
    for (size_t i = 0; i < f->nseries; i++)
        free(f->series[i]);
    f->nseries = 0;
    ej__mutex_unlock(&f->mu);
}

void ej_metric_inc(ej_metric_series *s)
{
    ej_metric_add(s, 1.0);
}

void ej_metric_add(ej_metric_series *s, double v)
{
    if (s == NULL || s->family->type == EJ_METRIC_HISTOGRAM)
        return;
    if (s->family->type == EJ_METRIC_COUNTER && !(v >= 0))
        return;
    add_double(&s->value, v);
}

void ej_metric_set(ej_metric_series *s, double v)
{
    if (s == NULL || s->family->type == EJ_METRIC_HISTOGRAM)
        return;
    store_double(&s->value, v);
}

void ej_metric_observe(ej_metric_series *s, double v)
{
    if (s == NULL || s->family->type != EJ_METRIC_HISTOGRAM || isnan(v))
        return;
    const ej_metric *f = s->family;
    size_t i = 0;
    while (i < f->nbuckets && v > f->buckets[i])
        i++;
    atomic_fetch_add_explicit(&s->buckets[i], 1, memory_order_relaxed);
    add_double(&s->value, v);
}

void ej_metric_histogram_set(ej_metric_series *s, const uint64_t *counts, size_t n, double sum)
{
    if (s == NULL || counts == NULL || s->family->type != EJ_METRIC_HISTOGRAM ||
        n != s->family->nbuckets + 1 || isnan(sum))
        return;
    for (size_t i = 0; i < n; i++)
        atomic_store_explicit(&s->buckets[i], counts[i], memory_order_relaxed);
    store_double(&s->value, sum);
}

double ej_metric_value(const ej_metric_series *s)
{
    if (s == NULL)
        return 0;
    if (s->family->type != EJ_METRIC_HISTOGRAM)
        return ej__metrics_load(&s->value);
    uint64_t n = 0;
    for (size_t i = 0; i <= s->family->nbuckets; i++)
        n += atomic_load_explicit(&s->buckets[i], memory_order_relaxed);
    return (double)n;
}
