/* Unit tests of the metrics module: registration checks, the exposition
 * (escaping, cumulative buckets, ordering, number format), concurrent
 * updates, the /proc parser, the listen address parser and the HTTP
 * endpoint on a loopback port. */
#include <math.h>
#include <pthread.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>
#include <arpa/inet.h>
#include <netinet/in.h>
#include <sys/socket.h>

#include <cmocka.h>

#include "ejob/error.h"
#include "ejob/metrics.h"
#include "metrics/internal.h"

/* noinline: inlined at -O3, GCC 12 takes the strstr results on the text as
 * pointers to this function's local `out` (-Wdangling-pointer, a false
 * positive that breaks the Release build under -Werror). */
__attribute__((noinline)) static char *render(ej_metrics *m)
{
    char *out = NULL;
    size_t len = 0;
    assert_int_equal(ej_metrics_render(m, &out, &len), 0);
    assert_non_null(out);
    assert_int_equal(strlen(out), len);
    return out;
}

static void expect_double(double v, const char *want)
{
    char buf[32];
    ej__metrics_format_double(buf, v);
    assert_string_equal(buf, want);
}

static void test_format_double(void **state)
{
    (void)state;
    expect_double(0, "0");
    expect_double(-0.0, "0");
    expect_double(1, "1");
    expect_double(-3, "-3");
    expect_double(1e14, "100000000000000");
    expect_double(0.005, "0.005");
    expect_double(2.5, "2.5");
    expect_double(0.1, "0.1");
    expect_double(1e15, "1e+15");
    expect_double(1.0 / 3, "0.3333333333333333");
    expect_double(0.1 + 0.2, "0.30000000000000004");
    expect_double(0.784, "0.784");
    expect_double(INFINITY, "+Inf");
    expect_double(-INFINITY, "-Inf");
    expect_double(NAN, "NaN");
}

static void test_escaping(void **state)
{
    (void)state;
    ej_metrics *m;
    assert_int_equal(ej_metrics_create(&m), 0);
    ej_metric *f;
    struct ej_metric_desc d = {
        "t_total", EJ_METRIC_COUNTER, "help \\ with\nnewline \"quoted\"", {"job"}, NULL, 0};
    assert_int_equal(ej_metrics_register(m, &d, &f, NULL, 0), 0);
    ej_metric_inc(ej_metric_get1(f, "a\\b\"c\nd"));
    char *out = render(m);
    assert_string_equal(out, "# HELP t_total help \\\\ with\\nnewline \"quoted\"\n"
                             "# TYPE t_total counter\n"
                             "t_total{job=\"a\\\\b\\\"c\\nd\"} 1\n");
    free(out);
    ej_metrics_destroy(m);
}

static void test_ordering(void **state)
{
    (void)state;
    ej_metrics *m;
    assert_int_equal(ej_metrics_create(&m), 0);
    ej_metric *runs, *up;
    const struct ej_metric_desc table[] = {
        {"runs_total", EJ_METRIC_COUNTER, "Runs.", {"job", "result"}, NULL, 0},
        {"up", EJ_METRIC_GAUGE, "Up.", {NULL}, NULL, 0},
    };
    ej_metric *fams[2];
    assert_int_equal(ej_metrics_register_table(m, table, 2, fams, NULL, 0), 0);
    runs = fams[0];
    up = fams[1];
    /* Inserted out of order; rendered by job, then result, byte-wise. */
    ej_metric_add(ej_metric_get2(runs, "b", "success"), 2);
    ej_metric_inc(ej_metric_get2(runs, "a", "success"));
    ej_metric_inc(ej_metric_get2(runs, "b", "failed"));
    ej_metric_inc(ej_metric_get2(runs, "B", "success"));
    ej_metric_inc(ej_metric_get2(runs, "", "success"));
    ej_metric_set(ej_metric_get0(up), 1);
    /* The same tuple is the same series. */
    assert_ptr_equal(ej_metric_get2(runs, "a", "success"), ej_metric_get2(runs, "a", "success"));
    char *out = render(m);
    assert_string_equal(out, "# HELP runs_total Runs.\n"
                             "# TYPE runs_total counter\n"
                             "runs_total{job=\"\",result=\"success\"} 1\n"
                             "runs_total{job=\"B\",result=\"success\"} 1\n"
                             "runs_total{job=\"a\",result=\"success\"} 1\n"
                             "runs_total{job=\"b\",result=\"failed\"} 1\n"
                             "runs_total{job=\"b\",result=\"success\"} 2\n"
                             "# HELP up Up.\n"
                             "# TYPE up gauge\n"
                             "up 1\n");
    /* Two renders of the same state are identical. */
    char *again = render(m);
    assert_string_equal(out, again);
    free(again);
    free(out);
    /* Wrong arity gets nothing. */
    assert_null(ej_metric_get1(runs, "a"));
    assert_null(ej_metric_get0(runs));
    assert_null(ej_metric_get2(runs, "a", NULL));
    assert_ptr_equal(ej_metrics_find(m, "up"), up);
    assert_null(ej_metrics_find(m, "down"));
    ej_metrics_destroy(m);
}

static void test_histogram(void **state)
{
    (void)state;
    ej_metrics *m;
    assert_int_equal(ej_metrics_create(&m), 0);
    static const double b[] = {0.1, 1, 5};
    struct ej_metric_desc d = {"d_seconds", EJ_METRIC_HISTOGRAM, "Durations.", {"job"}, b, 3};
    ej_metric *f;
    assert_int_equal(ej_metrics_register(m, &d, &f, NULL, 0), 0);
    ej_metric_series *s = ej_metric_get1(f, "j");
    ej_metric_observe(s, 0.05);
    ej_metric_observe(s, 0.1); /* le is inclusive */
    ej_metric_observe(s, 0.5);
    ej_metric_observe(s, 7);
    ej_metric_observe(s, 100);
    ej_metric_observe(s, NAN); /* ignored */
    ej_metric_inc(s);          /* ignored on a histogram */
    assert_true(ej_metric_value(s) == 5);
    char *out = render(m);
    assert_string_equal(out, "# HELP d_seconds Durations.\n"
                             "# TYPE d_seconds histogram\n"
                             "d_seconds_bucket{job=\"j\",le=\"0.1\"} 2\n"
                             "d_seconds_bucket{job=\"j\",le=\"1\"} 3\n"
                             "d_seconds_bucket{job=\"j\",le=\"5\"} 3\n"
                             "d_seconds_bucket{job=\"j\",le=\"+Inf\"} 5\n"
                             "d_seconds_sum{job=\"j\"} 107.65\n"
                             "d_seconds_count{job=\"j\"} 5\n");
    free(out);
    /* Mirrored from elsewhere: replaces the state; a wrong bucket count
     * changes nothing. */
    const uint64_t mirror[] = {1, 0, 2, 4};
    ej_metric_histogram_set(s, mirror, 3, 99);
    assert_true(ej_metric_value(s) == 5);
    ej_metric_histogram_set(s, mirror, 4, 12.5);
    assert_true(ej_metric_value(s) == 7);
    out = render(m);
    assert_non_null(strstr(out, "d_seconds_bucket{job=\"j\",le=\"0.1\"} 1\n"
                                "d_seconds_bucket{job=\"j\",le=\"1\"} 1\n"
                                "d_seconds_bucket{job=\"j\",le=\"5\"} 3\n"
                                "d_seconds_bucket{job=\"j\",le=\"+Inf\"} 7\n"
                                "d_seconds_sum{job=\"j\"} 12.5\n"
                                "d_seconds_count{job=\"j\"} 7\n"));
    free(out);
    /* No label: le is the only one; default buckets. */
    struct ej_metric_desc d2 = {"e_seconds", EJ_METRIC_HISTOGRAM, "E.", {NULL}, NULL, 0};
    ej_metric *f2;
    assert_int_equal(ej_metrics_register(m, &d2, &f2, NULL, 0), 0);
    ej_metric_observe(ej_metric_get0(f2), 4000);
    out = render(m);
    assert_non_null(strstr(out, "e_seconds_bucket{le=\"0.005\"} 0\n"));
    assert_non_null(strstr(out, "e_seconds_bucket{le=\"3600\"} 0\n"));
    assert_non_null(strstr(out, "e_seconds_bucket{le=\"+Inf\"} 1\n"));
    assert_non_null(strstr(out, "e_seconds_sum 4000\ne_seconds_count 1\n"));
    free(out);
    ej_metrics_destroy(m);
}

static void expect_register_error(ej_metrics *m, struct ej_metric_desc d, const char *needle)
{
    char err[200] = "";
    assert_int_equal(ej_metrics_register(m, &d, NULL, err, sizeof err), EJ_EINVAL);
    if (strstr(err, needle) == NULL)
        fail_msg("error \"%s\" does not say \"%s\"", err, needle);
}

static void test_register_errors(void **state)
{
    (void)state;
    ej_metrics *m;
    assert_int_equal(ej_metrics_create(&m), 0);
    static const double down[] = {1, 0.5};
    static const double inf[] = {1, INFINITY};
    static const double many[EJ_METRIC_MAX_BUCKETS + 1] = {0};
    expect_register_error(m, (struct ej_metric_desc){"1bad", EJ_METRIC_GAUGE, "", {NULL}, NULL, 0},
                          "bad metric name \"1bad\"");
    expect_register_error(m, (struct ej_metric_desc){"a-b", EJ_METRIC_GAUGE, "", {NULL}, NULL, 0},
                          "bad metric name");
    expect_register_error(m, (struct ej_metric_desc){NULL, EJ_METRIC_GAUGE, "", {NULL}, NULL, 0},
                          "bad metric name");
    expect_register_error(m, (struct ej_metric_desc){"g", (ej_metric_type)9, "", {NULL}, NULL, 0},
                          "unknown type");
    expect_register_error(m, (struct ej_metric_desc){"g", EJ_METRIC_GAUGE, "", {"a:b"}, NULL, 0},
                          "bad label name \"a:b\"");
    expect_register_error(m, (struct ej_metric_desc){"g", EJ_METRIC_GAUGE, "", {"__x"}, NULL, 0},
                          "bad label name");
    expect_register_error(m, (struct ej_metric_desc){"g", EJ_METRIC_GAUGE, "", {"a", "a"}, NULL, 0},
                          "twice");
    expect_register_error(
        m, (struct ej_metric_desc){"g", EJ_METRIC_GAUGE, "", {"a", NULL, "b"}, NULL, 0},
        "empty slot");
    expect_register_error(m, (struct ej_metric_desc){"h", EJ_METRIC_HISTOGRAM, "", {"le"}, NULL, 0},
                          "\"le\"");
    expect_register_error(m, (struct ej_metric_desc){"h", EJ_METRIC_HISTOGRAM, "", {NULL}, down, 2},
                          "increasing");
    expect_register_error(m, (struct ej_metric_desc){"h", EJ_METRIC_HISTOGRAM, "", {NULL}, inf, 2},
                          "finite");
    expect_register_error(
        m,
        (struct ej_metric_desc){
            "h", EJ_METRIC_HISTOGRAM, "", {NULL}, many, EJ_METRIC_MAX_BUCKETS + 1},
        "buckets");
    /* A gauge may use "le"; a name may hold colons. */
    struct ej_metric_desc ok = {"ns:g", EJ_METRIC_GAUGE, "", {"le"}, NULL, 0};
    assert_int_equal(ej_metrics_register(m, &ok, NULL, NULL, 0), 0);
    expect_register_error(m, ok, "registered twice");
    assert_int_equal(ej_metrics_register(NULL, &ok, NULL, NULL, 0), EJ_EINVAL);
    assert_int_equal(ej_metrics_create(NULL), EJ_EINVAL);
    assert_int_equal(ej_metrics_add_collector(m, NULL, NULL), EJ_EINVAL);
    /* A table stops at its first bad entry. */
    const struct ej_metric_desc table[] = {
        {"t1", EJ_METRIC_GAUGE, "", {NULL}, NULL, 0},
        {"t 2", EJ_METRIC_GAUGE, "", {NULL}, NULL, 0},
        {"t3", EJ_METRIC_GAUGE, "", {NULL}, NULL, 0},
    };
    assert_int_equal(ej_metrics_register_table(m, table, 3, NULL, NULL, 0), EJ_EINVAL);
    assert_non_null(ej_metrics_find(m, "t1"));
    assert_null(ej_metrics_find(m, "t3"));
    ej_metrics_destroy(m);
}

static void test_counter_rules_and_reset(void **state)
{
    (void)state;
    ej_metrics *m;
    assert_int_equal(ej_metrics_create(&m), 0);
    const struct ej_metric_desc table[] = {
        {"c_total", EJ_METRIC_COUNTER, "C.", {NULL}, NULL, 0},
        {"g", EJ_METRIC_GAUGE, "G.", {"job"}, NULL, 0},
    };
    ej_metric *f[2];
    assert_int_equal(ej_metrics_register_table(m, table, 2, f, NULL, 0), 0);
    ej_metric_series *c = ej_metric_get0(f[0]);
    ej_metric_add(c, 2.5);
    ej_metric_add(c, -1);  /* counters never go down */
    ej_metric_add(c, NAN); /* nor become NaN */
    ej_metric_observe(c, 3);
    assert_true(ej_metric_value(c) == 2.5);
    ej_metric_set(c, 10); /* mirroring a count kept elsewhere */
    assert_true(ej_metric_value(c) == 10);
    ej_metric_series *g = ej_metric_get1(f[1], "x");
    ej_metric_add(g, -4);
    assert_true(ej_metric_value(g) == -4);
    ej_metric_get1(f[1], "y");
    ej_metric_reset(f[1]);
    char *out = render(m);
    assert_string_equal(out, "# HELP c_total C.\n# TYPE c_total counter\nc_total 10\n"
                             "# HELP g G.\n# TYPE g gauge\n");
    free(out);
    /* NULL is harmless everywhere. */
    ej_metric_inc(NULL);
    ej_metric_set(NULL, 1);
    ej_metric_observe(NULL, 1);
    ej_metric_reset(NULL);
    assert_true(ej_metric_value(NULL) == 0);
    assert_null(ej_metric_get1(NULL, "a"));
    ej_metrics_destroy(m);
    ej_metrics_destroy(NULL);
}

static void collect(ej_metrics *m, void *user)
{
    int *calls = user;
    (*calls)++;
    ej_metric_set(ej_metric_get0(ej_metrics_find(m, "calls")), *calls);
}

static void test_collector(void **state)
{
    (void)state;
    ej_metrics *m;
    assert_int_equal(ej_metrics_create(&m), 0);
    struct ej_metric_desc d = {"calls", EJ_METRIC_GAUGE, "Renders.", {NULL}, NULL, 0};
    assert_int_equal(ej_metrics_register(m, &d, NULL, NULL, 0), 0);
    int calls = 0;
    assert_int_equal(ej_metrics_add_collector(m, collect, &calls), 0);
    char *out = render(m);
    assert_non_null(strstr(out, "\ncalls 1\n"));
    free(out);
    out = render(m);
    assert_non_null(strstr(out, "\ncalls 2\n"));
    free(out);
    ej_metrics_destroy(m);
}

struct hammer {
    ej_metric *counter, *hist;
    int id;
};

static void *hammer_thread(void *arg)
{
    struct hammer *h = arg;
    char job[8];
    snprintf(job, sizeof job, "j%d", h->id % 2);
    ej_metric_series *c = ej_metric_get1(h->counter, job);
    ej_metric_series *hs = ej_metric_get0(h->hist);
    for (int i = 0; i < 100000; i++) {
        ej_metric_inc(c);
        ej_metric_observe(hs, (i % 3) * 0.5);
    }
    return NULL;
}

static void test_concurrent_updates(void **state)
{
    (void)state;
    ej_metrics *m;
    assert_int_equal(ej_metrics_create(&m), 0);
    static const double b[] = {0.25, 0.75};
    const struct ej_metric_desc table[] = {
        {"n_total", EJ_METRIC_COUNTER, "N.", {"job"}, NULL, 0},
        {"h", EJ_METRIC_HISTOGRAM, "H.", {NULL}, b, 2},
    };
    ej_metric *f[2];
    assert_int_equal(ej_metrics_register_table(m, table, 2, f, NULL, 0), 0);
    pthread_t t[4];
    struct hammer h[4];
    for (int i = 0; i < 4; i++) {
        h[i] = (struct hammer){f[0], f[1], i};
        assert_int_equal(pthread_create(&t[i], NULL, hammer_thread, &h[i]), 0);
    }
    /* Renders while they run must stay consistent: +Inf equals _count. */
    for (int r = 0; r < 20; r++) {
        char *out = render(m);
        const char *inf = strstr(out, "h_bucket{le=\"+Inf\"} ");
        const char *cnt = strstr(out, "h_count ");
        if (inf != NULL) {
            assert_non_null(cnt);
            assert_true(strtod(inf + strlen("h_bucket{le=\"+Inf\"} "), NULL) ==
                        strtod(cnt + strlen("h_count "), NULL));
        }
        free(out);
    }
    for (int i = 0; i < 4; i++)
        pthread_join(t[i], NULL);
    assert_true(ej_metric_value(ej_metric_get1(f[0], "j0")) == 200000);
    assert_true(ej_metric_value(ej_metric_get1(f[0], "j1")) == 200000);
    char *out = render(m);
    /* i % 3 is 0 for 33334 of every 100000, 1 (0.5) for 33333, 2 (1.0) for 33333. */
    assert_non_null(strstr(out, "h_bucket{le=\"0.25\"} 133336\n"));
    assert_non_null(strstr(out, "h_bucket{le=\"0.75\"} 266668\n"));
    assert_non_null(strstr(out, "h_bucket{le=\"+Inf\"} 400000\n"));
    assert_non_null(strstr(out, "h_sum 199998\n"));
    free(out);
    ej_metrics_destroy(m);
}

static void test_proc_stat(void **state)
{
    (void)state;
    struct ej__proc_stat st;
    /* A command name with spaces and parentheses, as a thread may be named. */
    const char *line = "4123 (ej (x) y) S 1 4123 4123 0 -1 4194560 1000 0 0 0 250 50 0 0 20 0 "
                       "7 0 12345 104857600 2048 18446744073709551615 1 1 0 0 0 0 0 0 0 0 0 0\n";
    assert_int_equal(ej__metrics_parse_proc_stat(line, 100, &st), 0);
    assert_true(st.cpu_seconds == 3.0);
    assert_true(st.threads == 7);
    assert_true(st.start_seconds == 123.45);
    assert_true(st.vsize_bytes == 104857600);
    assert_true(st.rss_pages == 2048);
    assert_int_equal(ej__metrics_parse_proc_stat("4123 (x) S 1 2 3", 100, &st), EJ_EPARSE);
    assert_int_equal(ej__metrics_parse_proc_stat("no paren", 100, &st), EJ_EPARSE);
    assert_int_equal(ej__metrics_parse_proc_stat(NULL, 100, &st), EJ_EPARSE);
    assert_int_equal(ej__metrics_parse_proc_stat(line, 0, &st), EJ_EPARSE);
    assert_int_equal(
        ej__metrics_parse_proc_stat("1 (x) S 1 a 3 4 5 6 7 8 9 10 11 12 13 14 15 16 17 18 19 20 21 "
                                    "22 23 24",
                                    100, &st),
        EJ_EPARSE);
}

static void test_process_metrics(void **state)
{
    (void)state;
    ej_metrics *m;
    assert_int_equal(ej_metrics_create(&m), 0);
    assert_int_equal(ej_metrics_add_process_metrics(m), 0);
    char *out = render(m);
    const char *rss = strstr(out, "\nprocess_resident_memory_bytes ");
    assert_non_null(rss);
    assert_true(strtod(rss + strlen("\nprocess_resident_memory_bytes "), NULL) > 1e5);
    const char *start = strstr(out, "\nprocess_start_time_seconds ");
    assert_non_null(start);
    double st = strtod(start + strlen("\nprocess_start_time_seconds "), NULL);
    assert_true(st > 1.6e9 && st <= (double)time(NULL) + 1);
    const char *threads = strstr(out, "\nprocess_threads ");
    assert_non_null(threads);
    assert_true(strtod(threads + strlen("\nprocess_threads "), NULL) >= 1);
    assert_non_null(strstr(out, "# TYPE process_cpu_seconds_total counter\n"));
    assert_non_null(strstr(out, "\nprocess_open_fds "));
    assert_non_null(strstr(out, "\nprocess_max_fds "));
    free(out);
    ej_metrics_destroy(m);
}

static void expect_listen(const char *text, int family, const char *ip, int port)
{
    struct sockaddr_in6 sa;
    size_t len = 0;
    char err[128] = "";
    assert_int_equal(ej_metrics_parse_listen(text, &sa, &len, err, sizeof err), 0);
    char buf[64];
    if (family == AF_INET) {
        const struct sockaddr_in *s4 = (const struct sockaddr_in *)&sa;
        assert_int_equal(len, sizeof(struct sockaddr_in));
        assert_int_equal(s4->sin_family, AF_INET);
        inet_ntop(AF_INET, &s4->sin_addr, buf, sizeof buf);
        assert_int_equal(ntohs(s4->sin_port), port);
    } else {
        assert_int_equal(len, sizeof(struct sockaddr_in6));
        assert_int_equal(sa.sin6_family, AF_INET6);
        inet_ntop(AF_INET6, &sa.sin6_addr, buf, sizeof buf);
        assert_int_equal(ntohs(sa.sin6_port), port);
    }
    assert_string_equal(buf, ip);
}

static void expect_listen_error(const char *text, const char *needle)
{
    struct sockaddr_in6 sa;
    size_t len = 0;
    char err[160] = "";
    assert_int_equal(ej_metrics_parse_listen(text, &sa, &len, err, sizeof err), EJ_EINVAL);
    if (strstr(err, needle) == NULL)
        fail_msg("\"%s\": error \"%s\" does not say \"%s\"", text ? text : "(null)", err, needle);
}

static void test_parse_listen(void **state)
{
    (void)state;
    expect_listen("127.0.0.1:9090", AF_INET, "127.0.0.1", 9090);
    expect_listen(":9100", AF_INET, "127.0.0.1", 9100);
    expect_listen("localhost:0", AF_INET, "127.0.0.1", 0);
    expect_listen("0.0.0.0:65535", AF_INET, "0.0.0.0", 65535);
    expect_listen("[::1]:80", AF_INET6, "::1", 80);
    expect_listen("[::]:00080", AF_INET6, "::", 80);
    expect_listen_error("127.0.0.1", "expected HOST:PORT");
    expect_listen_error("127.0.0.1:", "port must be a number");
    expect_listen_error("127.0.0.1:65536", "port must be a number");
    expect_listen_error("127.0.0.1:+80", "port must be a number");
    expect_listen_error("127.0.0.1:123456", "port must be a number");
    expect_listen_error("127.0.0.1:8 0", "port must be a number");
    expect_listen_error("example.com:80", "not an IPv4 address");
    expect_listen_error("256.0.0.1:80", "not an IPv4 address");
    expect_listen_error("::1:80", "in brackets");
    expect_listen_error("[::1]80", "expected :PORT after ']'");
    expect_listen_error("[::1:80", "missing ']'");
    expect_listen_error("[1.2.3.4]:80", "not an IPv6 address");
    expect_listen_error(NULL, "no listen address");
    char longhost[200];
    memset(longhost, '1', sizeof longhost);
    strcpy(longhost + 150, ":80");
    expect_listen_error(longhost, "host too long");
}

/* ----------------------------------------------------------- the server */

/* Sends request to 127.0.0.1:port, returns the whole answer (caller frees). */
static char *http(int port, const char *request)
{
    int fd = socket(AF_INET, SOCK_STREAM, 0);
    assert_true(fd >= 0);
    struct sockaddr_in sa = {.sin_family = AF_INET, .sin_port = htons((uint16_t)port)};
    sa.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    assert_int_equal(connect(fd, (struct sockaddr *)&sa, sizeof sa), 0);
    assert_int_equal(write(fd, request, strlen(request)), (ssize_t)strlen(request));
    size_t cap = 65536, len = 0;
    char *buf = malloc(cap);
    ssize_t n;
    while ((n = read(fd, buf + len, cap - len - 1)) > 0)
        len += (size_t)n;
    buf[len] = '\0';
    close(fd);
    return buf;
}

static bool not_ready(char *why, size_t len, void *user)
{
    snprintf(why, len, "%s\nsecond line", (const char *)user);
    return false;
}

static void expect_http(int port, const char *req, const char *status, const char *needle)
{
    char *a = http(port, req);
    if (strncmp(a, status, strlen(status)) != 0 || strstr(a, needle) == NULL)
        fail_msg("%s-> %s", req, a);
    free(a);
}

static void test_server(void **state)
{
    (void)state;
    ej_metrics *m;
    assert_int_equal(ej_metrics_create(&m), 0);
    struct ej_metric_desc d = {"x_total", EJ_METRIC_COUNTER, "X.", {NULL}, NULL, 0};
    ej_metric *f;
    assert_int_equal(ej_metrics_register(m, &d, &f, NULL, 0), 0);
    ej_metric_add(ej_metric_get0(f), 42);
    struct ej_metrics_server_opts o = {.listen = "127.0.0.1:0",
                                       .metrics = m,
                                       .readyz = not_ready,
                                       .user = "ZooKeeper not connected"};
    ej_metrics_server *srv;
    char err[200] = "";
    assert_int_equal(ej_metrics_server_start(&o, &srv, err, sizeof err), 0);
    int port = ej_metrics_server_port(srv);
    assert_true(port > 0);
    expect_http(port, "GET /metrics HTTP/1.0\r\n\r\n", "HTTP/1.1 200",
                "Content-Type: text/plain; version=0.0.4; charset=utf-8");
    expect_http(port, "GET /metrics HTTP/1.0\r\n\r\n", "HTTP/1.1 200",
                "\r\n\r\n# HELP x_total X.\n# TYPE x_total counter\nx_total 42\n");
    expect_http(port, "GET /healthz HTTP/1.0\r\n\r\n", "HTTP/1.1 200", "\r\n\r\nok\n");
    expect_http(port, "GET /readyz HTTP/1.0\r\n\r\n", "HTTP/1.1 503",
                "\r\n\r\nnot ready: ZooKeeper not connected second line\n");
    expect_http(port, "GET /nope HTTP/1.0\r\n\r\n", "HTTP/1.1 404", "/nope: not found");
    expect_http(port, "GET /metrics/ HTTP/1.0\r\n\r\n", "HTTP/1.1 404", "not found");
    expect_http(port, "POST /metrics HTTP/1.0\r\nContent-Length: 0\r\n\r\n", "HTTP/1.1 405",
                "Allow: GET, HEAD");
    expect_http(port, "DELETE /readyz HTTP/1.0\r\n\r\n", "HTTP/1.1 405", "not allowed");
    /* HEAD: the headers of GET, no body. */
    char *a = http(port, "HEAD /metrics HTTP/1.0\r\n\r\n");
    assert_true(strncmp(a, "HTTP/1.1 200", 12) == 0);
    assert_null(strstr(a, "x_total"));
    free(a);
    /* The port is taken now: a second server says so. */
    char taken[32];
    snprintf(taken, sizeof taken, "127.0.0.1:%d", port);
    struct ej_metrics_server_opts o2 = {.listen = taken, .metrics = m};
    ej_metrics_server *srv2 = NULL;
    int rc = ej_metrics_server_start(&o2, &srv2, err, sizeof err);
    assert_true(rc < 0);
    assert_null(srv2);
    assert_non_null(strstr(err, "cannot listen"));
    o2.listen = "nohost";
    assert_int_equal(ej_metrics_server_start(&o2, &srv2, err, sizeof err), EJ_EINVAL);
    assert_non_null(strstr(err, "expected HOST:PORT"));
    o2.metrics = NULL;
    assert_int_equal(ej_metrics_server_start(&o2, &srv2, err, sizeof err), EJ_EINVAL);
    ej_metrics_server_stop(srv);
    ej_metrics_server_stop(NULL);
    ej_metrics_destroy(m);
}

static bool host_ok(const char *h)
{
    return ej__metrics_host_allowed(h, strlen(h));
}

/* DNS rebinding forges a name: only localhost and address literals pass. */
static void test_server_host_check(void **state)
{
    (void)state;
    assert_true(host_ok("localhost"));
    assert_true(host_ok("LOCALHOST:9464"));
    assert_true(host_ok("127.0.0.1:9464"));
    assert_true(host_ok("10.1.2.3"));
    assert_true(host_ok("[::1]:9464"));
    assert_true(host_ok("[::1]"));
    assert_false(host_ok("rebind.attacker.example:9464"));
    assert_false(host_ok("localhost.attacker.example"));
    assert_false(host_ok("127.0.0.1.nip.io"));
    assert_false(host_ok("[::1"));
    assert_false(host_ok("[::1]x"));
    assert_false(host_ok(""));
    assert_false(host_ok("[not-an-address]"));

    ej_metrics *m;
    assert_int_equal(ej_metrics_create(&m), 0);
    struct ej_metrics_server_opts o = {.listen = "127.0.0.1:0", .metrics = m};
    ej_metrics_server *srv;
    assert_int_equal(ej_metrics_server_start(&o, &srv, NULL, 0), 0);
    int port = ej_metrics_server_port(srv);
    expect_http(port, "GET /healthz HTTP/1.1\r\nHost: evil.example\r\n\r\n", "HTTP/1.1 421",
                "unknown Host");
    expect_http(port, "GET /healthz HTTP/1.1\r\n\r\n", "HTTP/1.1 400", "needs a Host");
    expect_http(port, "GET /metrics HTTP/1.1\r\nHost: localhost\r\nContent-Length: 5\r\n\r\nabcde",
                "HTTP/1.1 413", "not accepted");
    /* Keep-alive and pipelining: two requests, two answers, then close. */
    expect_http(port,
                "GET /healthz HTTP/1.1\r\nHost: localhost\r\n\r\n"
                "GET /readyz?x=1 HTTP/1.1\r\nHost: localhost\r\nConnection: close\r\n\r\n",
                "HTTP/1.1 200", "\r\n\r\nok\nHTTP/1.1 200 OK\r\n");
    char big[8193]; /* exactly the header buffer: nothing left unread to reset the answer */
    memset(big, 'a', sizeof big);
    memcpy(big, "GET /", 5);
    big[sizeof big - 1] = '\0';
    expect_http(port, big, "HTTP/1.1 431", "too large");
    ej_metrics_server_stop(srv);
    ej_metrics_destroy(m);
}

/* A connection to port from source (an IPv4 loopback address). */
static int connect_from(const char *source, int port)
{
    int fd = socket(AF_INET, SOCK_STREAM, 0);
    assert_true(fd >= 0);
    struct sockaddr_in src = {.sin_family = AF_INET};
    inet_pton(AF_INET, source, &src.sin_addr);
    assert_int_equal(bind(fd, (struct sockaddr *)&src, sizeof src), 0);
    struct sockaddr_in sa = {.sin_family = AF_INET, .sin_port = htons((uint16_t)port)};
    sa.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    assert_int_equal(connect(fd, (struct sockaddr *)&sa, sizeof sa), 0);
    return fd;
}

/* Idle connections filling the per-address and the total limit push each
 * other out: a request on a new connection is still answered, and the
 * oldest idle one of the address over its limit is the one closed. */
static void test_server_evicts_idle(void **state)
{
    (void)state;
    ej_metrics *m;
    assert_int_equal(ej_metrics_create(&m), 0);
    struct ej_metrics_server_opts o = {.listen = "127.0.0.1:0", .metrics = m};
    ej_metrics_server *srv;
    assert_int_equal(ej_metrics_server_start(&o, &srv, NULL, 0), 0);
    int port = ej_metrics_server_port(srv);
    enum { N = EJ_METRICS_CONNECTION_LIMIT + 16 };
    int idle[N];
    for (int i = 0; i < N; i++) {
        char src[32];
        snprintf(src, sizeof src, "127.0.1.%d", 1 + i % 12);
        idle[i] = connect_from(src, port);
        usleep(2000); /* accepted in this order */
    }
    for (int round = 0; round < 3; round++)
        expect_http(port, "GET /healthz HTTP/1.0\r\n\r\n", "HTTP/1.1 200", "\r\n\r\nok\n");
    /* The very first idle connection was closed by the server. */
    struct timeval tv = {.tv_sec = 2};
    setsockopt(idle[0], SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof tv);
    char c;
    assert_int_equal(read(idle[0], &c, 1), 0);
    for (int i = 0; i < N; i++)
        close(idle[i]);
    ej_metrics_server_stop(srv);
    ej_metrics_destroy(m);
}

/* An IPv6 listen address, when the machine has IPv6 loopback. */
static void test_server_ipv6(void **state)
{
    (void)state;
    int probe = socket(AF_INET6, SOCK_STREAM, 0);
    struct sockaddr_in6 lo = {.sin6_family = AF_INET6, .sin6_addr = IN6ADDR_LOOPBACK_INIT};
    bool have_v6 = probe >= 0 && bind(probe, (struct sockaddr *)&lo, sizeof lo) == 0;
    if (probe >= 0)
        close(probe);
    if (!have_v6) {
        printf("no IPv6 loopback here: IPv6 listening not tested\n");
        return;
    }
    ej_metrics *m;
    assert_int_equal(ej_metrics_create(&m), 0);
    struct ej_metrics_server_opts o = {.listen = "[::1]:0", .metrics = m};
    ej_metrics_server *srv;
    char err[200] = "";
    assert_int_equal(ej_metrics_server_start(&o, &srv, err, sizeof err), 0);
    int fd = socket(AF_INET6, SOCK_STREAM, 0);
    lo.sin6_port = htons((uint16_t)ej_metrics_server_port(srv));
    assert_int_equal(connect(fd, (struct sockaddr *)&lo, sizeof lo), 0);
    const char *req = "GET /healthz HTTP/1.0\r\n\r\n";
    assert_int_equal(write(fd, req, strlen(req)), (ssize_t)strlen(req));
    char buf[1024];
    size_t len = 0;
    ssize_t n;
    while ((n = read(fd, buf + len, sizeof buf - len - 1)) > 0)
        len += (size_t)n;
    buf[len] = '\0';
    close(fd);
    assert_true(strncmp(buf, "HTTP/1.1 200", 12) == 0);
    assert_non_null(strstr(buf, "\r\n\r\nok\n"));
    ej_metrics_server_stop(srv);
    ej_metrics_destroy(m);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_format_double),      cmocka_unit_test(test_escaping),
        cmocka_unit_test(test_ordering),           cmocka_unit_test(test_histogram),
        cmocka_unit_test(test_register_errors),    cmocka_unit_test(test_counter_rules_and_reset),
        cmocka_unit_test(test_collector),          cmocka_unit_test(test_concurrent_updates),
        cmocka_unit_test(test_proc_stat),          cmocka_unit_test(test_process_metrics),
        cmocka_unit_test(test_parse_listen),       cmocka_unit_test(test_server),
        cmocka_unit_test(test_server_ipv6),        cmocka_unit_test(test_server_host_check),
        cmocka_unit_test(test_server_evicts_idle),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
