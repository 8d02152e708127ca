/*
 * The metrics module inside (see include/ejob/metrics.h for the contract).
 *
 * Design. A registry is a list of families in registration order plus the
 * collectors. A family keeps its series in an array sorted by label values,
 * so lookups are a binary search and the exposition comes out ordered
 * without sorting at render time. A series is one allocation: its label
 * values and, for a histogram, one atomic count per bucket (the last one
 * counts what is above every bound) follow the struct.
 *
 * Values are doubles stored as their bit pattern in an _Atomic uint64_t:
 * set is a store, add a compare-exchange loop (no lock, no allocation).
 * Histogram counts are per bucket (not cumulative) and summed at render
 * time; _count is that same sum, so a render never shows a +Inf bucket that
 * differs from _count even while observations race with it.
 *
 * Lock order: render_mu (one render at a time, collectors under it) before
 * mu (the family list) before a family's mu (its series array).
 */
#ifndef EJ_METRICS_INTERNAL_H
#define EJ_METRICS_INTERNAL_H

#include <pthread.h>
#include <stdatomic.h>
#include <stdint.h>

#include "common/check.h"
#include "ejob/metrics.h"
#include "common/util.h"

struct ej_metric_series {
    struct ej_metric *family;
    _Atomic uint64_t value;     /* counter / gauge value, histogram sum (double bits) */
    const char **values;        /* family->nlabels label values, stored after the buckets */
    _Atomic uint64_t buckets[]; /* histogram: nbuckets + 1 counts; none otherwise */
};

struct ej_metric {
    ej_metrics *owner;
    char *name;
    char *help;
    ej_metric_type type;
    size_t nlabels;
    char *labels[EJ_METRIC_MAX_LABELS];
    size_t nbuckets;
    double buckets[EJ_METRIC_MAX_BUCKETS];
    ej__mutex mu;
    ej_metric_series **series; /* sorted by label values */
    size_t nseries, cap;
};

struct ej__collector {
    ej_metrics_collect_fn fn;
    void *user;
    bool owned; /* user is freed with the registry */
};

struct ej_metrics {
    ej__mutex render_mu;
    ej__mutex mu;
    ej_metric **families;
    size_t nfamilies, cap;
    struct ej__collector *collectors;
    size_t ncollectors, ccap;
};

/* Writes v as the exposition format writes a float: "+Inf", "-Inf", "NaN",
 * an integer without exponent when v is one (below 1e15), else the shortest
 * of %.15g, %.16g, %.17g that reads back as v. out has at least 32 bytes. */
void ej__metrics_format_double(char out[32], double v);

/* Appends s with the escapes of a label value (quote true: \\ \" \n) or of
 * a help text (quote false: \\ \n). */
void ej__metrics_escape(ej_buf *b, const char *s, bool quote);

/* Renders one family (its lock held by the caller). */
void ej__metrics_render_family(ej_buf *b, const ej_metric *f);

/* ej_metrics_add_collector; owned: the registry frees user (with free())
 * when destroyed. On failure the caller still owns user. */
int ej__metrics_add_collector(ej_metrics *m, ej_metrics_collect_fn fn, void *user, bool owned);

/* printf into err (errlen bytes) when err is not NULL. */
void ej__metrics_set_err(char *err, size_t errlen, const char *fmt, ...) EJ_PRINTF(3, 4);

/* Double stored in an atomic word. */
double ej__metrics_load(const _Atomic uint64_t *p);

/* The HTTP endpoint's limits (see the top of server.c and docs/metrics.md):
 * connections at once, per client address, the time a request's whole
 * header may take to arrive (from connecting, or from the previous answer
 * on a kept-alive connection), the time an answer may take to be read. */
#define EJ_METRICS_CONNECTION_LIMIT 64
#define EJ_METRICS_PER_ADDRESS_LIMIT 8
#define EJ_METRICS_HEADER_TIMEOUT_MS 5000
#define EJ_METRICS_WRITE_TIMEOUT_MS 10000

/* Whether a request's Host header value (len bytes, maybe with :PORT)
 * names this endpoint in a way DNS rebinding cannot forge: "localhost" or
 * an address literal (IPv4, or IPv6 in brackets). */
bool ej__metrics_host_allowed(const char *host, size_t len);

/* What process_* metrics read from /proc/self/stat. */
struct ej__proc_stat {
    double cpu_seconds;   /* utime + stime */
    double start_seconds; /* since boot */
    double vsize_bytes;
    double rss_pages;
    double threads;
};

/* Parses the text of /proc/self/stat (ticks: sysconf(_SC_CLK_TCK)).
 * Returns 0 or EJ_EPARSE. */
int ej__metrics_parse_proc_stat(const char *text, long ticks, struct ej__proc_stat *out);

#endif
