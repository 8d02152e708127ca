/* The text exposition format 0.0.4 (Prometheus' "text/plain; version=0.0.4"). */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "common/check.h"
#include "ejob/error.h"
#include "metrics/internal.h"

void ej__metrics_format_double(char out[32], double v)
{
    if (isnan(v)) {
        strcpy(out, "NaN");
        return;
    }
    if (isinf(v)) {
        strcpy(out, v > 0 ? "+Inf" : "-Inf");
        return;
    }
    if (v == 0) {
        strcpy(out, "0"); /* not "-0" */
        return;
    }
    if (fabs(v) < 1e15 && v == floor(v)) {
        snprintf(out, 32, "%.0f", v);
        return;
    }
    /* The shortest of 15, 16, 17 significant digits that reads back as v
     * (17 always does). */
    for (int digits = 15; digits <= 17; digits++) {
        snprintf(out, 32, "%.*g", digits, v);
        if (strtod(out, NULL) == v)
            break;
    }
}

void ej__metrics_escape(ej_buf *b, const char *s, bool quote)
{
    const char *start = s;
    for (; *s != '\0'; s++) {
        const char *esc = NULL;
        if (*s == '\\')
            esc = "\\\\";
        else if (*s == '\n')
            esc = "\\n";
        else if (quote && *s == '"')
            esc = "\\\"";
        if (esc == NULL)
            continue;
        ej__buf_append(b, start, (size_t)(s - start));
        ej__buf_puts(b, esc);
        start = s + 1;
    }
    ej__buf_append(b, start, (size_t)(s - start));
}

static const char *type_name(ej_metric_type t)
{
    return t == EJ_METRIC_COUNTER ? "counter" : t == EJ_METRIC_GAUGE ? "gauge" : "histogram";
}

/* name{l1="v1",...[,le="bound"]} value */
static void sample(ej_buf *b, const ej_metric *f, const char *suffix, const ej_metric_series *s,
                   const char *le, double v)
{
    ej__buf_puts(b, f->name);
    ej__buf_puts(b, suffix);
    if (f->nlabels > 0 || le != NULL) {
        ej__buf_append(b, "{", 1);
        for (size_t i = 0; i < f->nlabels; i++) {
            if (i > 0)
                ej__buf_append(b, ",", 1);
            ej__buf_puts(b, f->labels[i]);
            ej__buf_append(b, "=\"", 2);
            ej__metrics_escape(b, s->values[i], true);
            ej__buf_append(b, "\"", 1);
        }
        if (le != NULL) {
            if (f->nlabels > 0)
                ej__buf_append(b, ",", 1);
            ej__buf_printf(b, "le=\"%s\"", le);
        }
        ej__buf_append(b, "}", 1);
    }
    char num[32];
    ej__metrics_format_double(num, v);
    ej__buf_printf(b, " %s\n", num);
}

static void histogram(ej_buf *b, const ej_metric *f, const ej_metric_series *s)
{
    uint64_t counts[EJ_METRIC_MAX_BUCKETS + 1];
    for (size_t i = 0; i <= f->nbuckets; i++)
        counts[i] = atomic_load_explicit(&s->buckets[i], memory_order_relaxed);
    double sum = ej__metrics_load(&s->value);
    uint64_t cumulative = 0;
    char le[32];
    for (size_t i = 0; i < f->nbuckets; i++) {
        cumulative += counts[i];
        ej__metrics_format_double(le, f->buckets[i]);
        sample(b, f, "_bucket", s, le, (double)cumulative);
    }
    cumulative += counts[f->nbuckets];
    sample(b, f, "_bucket", s, "+Inf", (double)cumulative);
    sample(b, f, "_sum", s, NULL, sum);
    sample(b, f, "_count", s, NULL, (double)cumulative);
}

void ej__metrics_render_family(ej_buf *b, const ej_metric *f)
{
    EJ_ASSERT_HELD(&f->mu);
    ej__buf_printf(b, "# HELP %s ", f->name);
    ej__metrics_escape(b, f->help, false);
    ej__buf_printf(b, "\n# TYPE %s %s\n", f->name, type_name(f->type));
    for (size_t i = 0; i < f->nseries; i++) {
        const ej_metric_series *s = f->series[i];
        if (f->type == EJ_METRIC_HISTOGRAM)
            histogram(b, f, s);
        else
            sample(b, f, "", s, NULL, ej__metrics_load(&s->value));
    }
}

static void run_collectors(ej_metrics *m)
{
    ej__mutex_lock(&m->mu);
    size_t n = m->ncollectors;
    struct ej__collector *copy = n ? malloc(n * sizeof *copy) : NULL;
    if (copy != NULL)
        memcpy(copy, m->collectors, n * sizeof *copy);
    ej__mutex_unlock(&m->mu);
    /* Without memory for the copy the values are only staler; the render
     * itself reports the shortage. */
    for (size_t i = 0; copy != NULL && i < n; i++)
        copy[i].fn(m, copy[i].user);
    free(copy);
}

int ej_metrics_render(ej_metrics *m, char **out, size_t *len)
{
    if (m == NULL || out == NULL)
        return EJ_EINVAL;
    *out = NULL;
    ej__mutex_lock(&m->render_mu);
    run_collectors(m);
    ej_buf b;
    ej__buf_init(&b);
    ej__buf_append(&b, "", 0);
    ej__mutex_lock(&m->mu);
    for (size_t i = 0; i < m->nfamilies; i++) {
        ej_metric *f = m->families[i];
        ej__mutex_lock(&f->mu);
        ej__metrics_render_family(&b, f);
        ej__mutex_unlock(&f->mu);
    }
    ej__mutex_unlock(&m->mu);
    ej__mutex_unlock(&m->render_mu);
    if (b.failed || b.data == NULL) {
        ej__buf_fini(&b);
        return EJ_ENOMEM;
    }
    if (len != NULL)
        *len = b.len;
    *out = ej__buf_steal(&b);
    return 0;
}
