/*
 * Metrics: counters, gauges and histograms with labels, rendered in the
 * Prometheus text exposition format 0.0.4, and a small HTTP endpoint that
 * serves them with health and readiness checks.
 *
 * Model. A registry (ej_metrics) holds metric families (ej_metric), each
 * with a name, a help text, a type and up to EJ_METRIC_MAX_LABELS label
 * names. A family holds one series (ej_metric_series) per distinct tuple of
 * label values. Families are registered once, usually from a table of
 * struct ej_metric_desc (one line per metric); series are created on first
 * use and live until the family is reset or the registry destroyed.
 *
 * Threads and cost. Every function may be called from any thread.
 * ej_metric_get() takes the family's lock and allocates only the first time
 * a tuple is seen; a caller on a hot path looks its series up once and keeps
 * the pointer. ej_metric_inc/add/set/observe on a series are lock-free (C11
 * atomics) and never allocate. Rendering takes each family's lock in turn;
 * collectors (functions that refresh gauges from some other source just
 * before a render) run one render at a time.
 *
 * Exposition. Families appear in registration order, series of a family in
 * ascending order of their label values (byte-wise, labels compared in
 * declaration order), so two renders of the same state are identical. Help
 * texts escape backslash and newline; label values escape backslash, double
 * quote and newline. Histograms have cumulative `le` buckets ending with
 * "+Inf", then _sum and _count (equal to the +Inf bucket). A family with no
 * series renders only its HELP and TYPE lines.
 */
#ifndef EJOB_METRICS_H
#define EJOB_METRICS_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "ejob/common.h"

/* Label names a family may declare, at most. */
#define EJ_METRIC_MAX_LABELS 4
/* Histogram buckets (upper bounds, +Inf not counted) a family may declare. */
#define EJ_METRIC_MAX_BUCKETS 32

typedef struct ej_metrics ej_metrics;
typedef struct ej_metric ej_metric;
typedef struct ej_metric_series ej_metric_series;

typedef enum ej_metric_type {
    EJ_METRIC_COUNTER = 1,   /* only goes up (or is mirrored from a source that only goes up) */
    EJ_METRIC_GAUGE = 2,     /* goes up and down */
    EJ_METRIC_HISTOGRAM = 3, /* observations counted in fixed buckets */
} ej_metric_type;

/*
 * One family. Strings and the bucket array are copied at registration.
 * name:    [a-zA-Z_:][a-zA-Z0-9_:]*; counters should end in _total,
 *          durations in _seconds, sizes in _bytes (not enforced).
 * help:    one line of text (a newline is escaped, not refused).
 * labels:  label names, [a-zA-Z_][a-zA-Z0-9_]*, not starting with "__",
 *          distinct, "le" not allowed on a histogram; unused slots NULL.
 * buckets: histogram upper bounds, finite and strictly increasing; NULL
 *          with bucket_count 0 for ej_metric_default_buckets.
 */
struct ej_metric_desc {
    const char *name;
    ej_metric_type type;
    const char *help;
    const char *labels[EJ_METRIC_MAX_LABELS];
    const double *buckets;
    size_t bucket_count;
};

/* The default buckets, in seconds, for durations of things that take from a
 * few milliseconds to an hour: 0.005 0.01 0.025 0.05 0.1 0.25 0.5 1 2.5 5 10
 * 30 60 300 900 3600. */
EJ_EXTERN extern const double ej_metric_default_buckets[16];

/* A collector: called at the start of every render, one render at a time,
 * to refresh series from elsewhere (gauges of a job's status, counters
 * mirrored from another module). It must not render or register. */
typedef void (*ej_metrics_collect_fn)(ej_metrics *m, void *user);

/* Creates an empty registry. Returns 0 and *out (caller owns; destroy with
 * ej_metrics_destroy), EJ_EINVAL (out NULL) or EJ_ENOMEM. */
EJ_EXTERN int ej_metrics_create(ej_metrics **out);

/* Frees the registry, its families and series. Accepts NULL. No other call
 * on it (or on its families and series) may be running or follow. */
EJ_EXTERN void ej_metrics_destroy(ej_metrics *m);

/*
 * Registers a family. out (may be NULL) receives it; the family lives as
 * long as the registry.
 * Returns 0; EJ_EINVAL with err (may be NULL) naming the problem: a bad or
 * duplicate name, a bad or duplicate label name, "le" on a histogram,
 * buckets not increasing or not finite, too many buckets, an unknown type;
 * EJ_ENOMEM.
 */
EJ_EXTERN int ej_metrics_register(ej_metrics *m, const struct ej_metric_desc *desc, ej_metric **out,
                                  char *err, size_t errlen);

/* Registers n families from a table; out[i] (out may be NULL) receives the
 * family of desc[i]. Stops at the first failure (the families before it stay
 * registered). Returns 0 or the error of ej_metrics_register. */
EJ_EXTERN int ej_metrics_register_table(ej_metrics *m, const struct ej_metric_desc *desc, size_t n,
                                        ej_metric **out, char *err, size_t errlen);

/* Adds a collector. Returns 0, EJ_EINVAL (m or fn NULL) or EJ_ENOMEM. */
EJ_EXTERN int ej_metrics_add_collector(ej_metrics *m, ej_metrics_collect_fn fn, void *user);

/*
 * The series of family f for the label values (one string per declared
 * label, in declaration order; values may be NULL when the family has no
 * labels). Values may be any UTF-8 text, "" included. Created (zero) on
 * first use; the pointer stays valid until ej_metric_reset(f) or the
 * registry's destruction.
 * Returns the series, or NULL when f is NULL, a value is NULL, or memory
 * runs out.
 */
EJ_EXTERN ej_metric_series *ej_metric_get(ej_metric *f, const char *const *values);

/* Shorthands of ej_metric_get for families with no label, one or two. */
EJ_EXTERN ej_metric_series *ej_metric_get0(ej_metric *f);
EJ_EXTERN ej_metric_series *ej_metric_get1(ej_metric *f, const char *v1);
EJ_EXTERN ej_metric_series *ej_metric_get2(ej_metric *f, const char *v1, const char *v2);

/* Removes every series of f (a collector rebuilding a gauge family whose
 * label tuples come and go, such as one series per running job). Series
 * pointers of f obtained before are invalid afterwards: only the owner of
 * the family may call it. Accepts NULL. */
EJ_EXTERN void ej_metric_reset(ej_metric *f);

/* Counter or gauge: adds 1 / adds v (a counter ignores a negative or NaN
 * v). Histogram series: ignored. Accepts NULL (does nothing), so a failed
 * lookup costs nothing further. Lock-free. */
EJ_EXTERN void ej_metric_inc(ej_metric_series *s);
EJ_EXTERN void ej_metric_add(ej_metric_series *s, double v);

/* Gauge: sets the value. Counter: sets it too, for mirroring a count kept
 * elsewhere that only goes up (a reset to a lower value reads as a counter
 * reset, as Prometheus expects after a restart). Histogram: ignored. */
EJ_EXTERN void ej_metric_set(ej_metric_series *s, double v);

/* Histogram: counts v in the first bucket whose bound is >= v (or +Inf) and
 * adds it to the sum. NaN is ignored. Other types: ignored. Lock-free. */
EJ_EXTERN void ej_metric_observe(ej_metric_series *s, double v);

/* Histogram: replaces its state with one kept elsewhere (a histogram a
 * collector mirrors at each scrape): counts[i] observations in bucket i,
 * not cumulative, the last for +Inf; n must be the family's bucket count
 * plus one (else nothing changes); sum the total of the observations.
 * Other types: ignored. Lock-free; a render running meanwhile may see a
 * mix of the old and new state. */
EJ_EXTERN void ej_metric_histogram_set(ej_metric_series *s, const uint64_t *counts, size_t n,
                                       double sum);

/* The value of a counter or gauge series; for a histogram, its count.
 * 0 for NULL. */
EJ_EXTERN double ej_metric_value(const ej_metric_series *s);

/* The family's name (borrowed for the registry's lifetime). */
EJ_EXTERN const char *ej_metric_name(const ej_metric *f);

/* Looks a family up by name. NULL when absent. */
EJ_EXTERN ej_metric *ej_metrics_find(ej_metrics *m, const char *name);

/*
 * Renders every family in the text exposition format 0.0.4 (runs the
 * collectors first). On 0, *out is a new NUL-terminated string the caller
 * frees and *len (may be NULL) its length. Returns 0, EJ_EINVAL or
 * EJ_ENOMEM.
 */
EJ_EXTERN int ej_metrics_render(ej_metrics *m, char **out, size_t *len);

/* The Content-Type of the rendering. */
#define EJ_METRICS_CONTENT_TYPE "text/plain; version=0.0.4; charset=utf-8"

/* Adds the process_* metrics of the Prometheus client libraries, read from
 * /proc/self at every render: process_cpu_seconds_total,
 * process_resident_memory_bytes, process_virtual_memory_bytes,
 * process_open_fds, process_max_fds, process_start_time_seconds,
 * process_threads. Returns 0 or a registration error. */
EJ_EXTERN int ej_metrics_add_process_metrics(ej_metrics *m);

/* -------------------------------------------------------------- server */

/*
 * Parses a listen address: "HOST:PORT", "[IPV6]:PORT" or ":PORT" (HOST
 * then 127.0.0.1). HOST is a numeric IPv4 or IPv6 address or "localhost"
 * (127.0.0.1); PORT is 0..65535 (0: any free port). The result is a
 * sockaddr_in or sockaddr_in6 written to addr (at least
 * sizeof(struct sockaddr_in6) bytes), its length to *addrlen.
 * Returns 0, or EJ_EINVAL with err (may be NULL) saying what is wrong.
 */
EJ_EXTERN int ej_metrics_parse_listen(const char *text, void *addr, size_t *addrlen, char *err,
                                      size_t errlen);

/* A health or readiness check: returns true when fine; may write a short
 * reason (one line, UTF-8) into why either way. Called on the server's
 * thread; must not block for long. */
typedef bool (*ej_metrics_check_fn)(char *why, size_t whylen, void *user);

struct ej_metrics_server_opts {
    const char *listen;          /* see ej_metrics_parse_listen; required */
    ej_metrics *metrics;         /* served at /metrics; borrowed, outlives the server */
    ej_metrics_check_fn healthz; /* NULL: always healthy */
    ej_metrics_check_fn readyz;  /* NULL: always ready */
    void *user;                  /* passed to the checks */
};

typedef struct ej_metrics_server ej_metrics_server;

/*
 * Starts an HTTP/1.1 server (one thread, keep-alive) on opts->listen:
 *   GET /metrics  200, the rendering, EJ_METRICS_CONTENT_TYPE
 *   GET /healthz  200 "ok\n" or 503 "unhealthy: <why>\n"
 *   GET /readyz   200 "ready\n" or 503 "not ready: <why>\n"
 *   HEAD          as GET without the body
 *   another path  404; another method 405 (with an Allow header)
 * It holds against slow and hostile clients: a request's header must
 * arrive within 5 s, its answer be read within 10 s; 64 connections at
 * most, 8 per client address, the oldest still waiting for its request
 * closed to admit a new one; a Host other than "localhost" or an address
 * literal gets 421 (DNS rebinding); bodies are refused (413). One thread
 * serves every connection without blocking on any.
 * Returns 0 and *out; EJ_EINVAL (bad options or address, err says which);
 * -errno when the address cannot be bound (err names it); EJ_ENOMEM.
 */
EJ_EXTERN int ej_metrics_server_start(const struct ej_metrics_server_opts *opts,
                                      ej_metrics_server **out, char *err, size_t errlen);

/* The port the server listens on (the chosen one when the address asked for
 * port 0). */
EJ_EXTERN int ej_metrics_server_port(const ej_metrics_server *srv);

/* Stops the server (waits for requests being served) and frees it. Accepts
 * NULL. */
EJ_EXTERN void ej_metrics_server_stop(ej_metrics_server *srv);

#endif
