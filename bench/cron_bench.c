/*
 * Cost of ej_cron_next() for typical expressions: nanoseconds per call,
 * percentiles over many start instants (2026..2035) in zones with and
 * without daylight saving time. Also counts heap allocations during the
 * calls (there must be none). Prints figures; not a test.
 *
 *   cron_bench [CALLS_PER_EXPRESSION]   (default 20000)
 */
#include <stdatomic.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "ejob/cron.h"

#if !defined(__SANITIZE_ADDRESS__) && !defined(__SANITIZE_THREAD__)
/* Count allocations by interposing glibc's allocator. */
#define COUNT_ALLOCS 1
extern void *__libc_malloc(size_t);
extern void *__libc_calloc(size_t, size_t);
extern void *__libc_realloc(void *, size_t);
static atomic_long allocs;
void *malloc(size_t n);
void *calloc(size_t a, size_t b);
void *realloc(void *p, size_t n);
void *malloc(size_t n)
{
    atomic_fetch_add(&allocs, 1);
    return __libc_malloc(n);
}
void *calloc(size_t a, size_t b)
{
    atomic_fetch_add(&allocs, 1);
    return __libc_calloc(a, b);
}
void *realloc(void *p, size_t n)
{
    atomic_fetch_add(&allocs, 1);
    return __libc_realloc(p, n);
}
#endif

static const char *const exprs[] = {
    "0 0 8 * * ?",   "0 */5 * * * ?", "*/10 * * * * ?",  "0 0/30 9-17 ? * MON-FRI",
    "0 15 10 L * ?", "0 0 12 LW * ?", "0 15 10 ? * 6#3", "0 0 0 1 1 ?",
    "0 30 2 * * ?",  "0 0 3 ? * 6L",  "0 0 12 15W * ?",  "0 0 0 29 2 ?",
};
static const char *const zones[] = {"UTC", "Asia/Shanghai", "America/New_York", "Europe/London",
                                    "Australia/Lord_Howe"};

static int64_t now_ns(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (int64_t)ts.tv_sec * 1000000000 + ts.tv_nsec;
}

static int cmp_i64(const void *a, const void *b)
{
    int64_t x = *(const int64_t *)a, y = *(const int64_t *)b;
    return (x > y) - (x < y);
}

int main(int argc, char **argv)
{
    int calls = argc > 1 ? atoi(argv[1]) : 20000;
    if (calls < 100)
        calls = 100;
    const int batch = 8; /* calls timed together, to dwarf the clock's cost */
    int samples = calls / batch;
    int64_t *ns = malloc(sizeof(int64_t) * (size_t)samples);
    int64_t *all = malloc(sizeof(int64_t) * (size_t)samples * (sizeof(exprs) / sizeof(exprs[0])));
    int64_t *from = malloc(sizeof(int64_t) * (size_t)calls);
    if (ns == NULL || all == NULL || from == NULL)
        return 1;
    uint64_t x = 88172645463325252ULL;
    for (int i = 0; i < calls; i++) {
        x ^= x << 13;
        x ^= x >> 7;
        x ^= x << 17;
        from[i] = 1767225600000LL + (int64_t)(x % (315360000000ULL)); /* 2026..2035 */
    }
    const ej_tz *tz[5];
    for (int z = 0; z < 5; z++) {
        ej_tz *t;
        if (ej_tz_load(zones[z], &t) != 0) {
            fprintf(stderr, "cannot load %s\n", zones[z]);
            return 1;
        }
        tz[z] = t;
    }
    printf("ej_cron_next: ns per call, %d calls per expression over 5 zones\n", calls);
    printf("%-26s %7s %7s %7s %7s\n", "expression", "p50", "p90", "p99", "max");
    int nall = 0;
#ifdef COUNT_ALLOCS
    long allocs_in_calls = 0;
#endif
    volatile int64_t sink = 0;
    for (size_t e = 0; e < sizeof(exprs) / sizeof(exprs[0]); e++) {
        ej_cron *c;
        if (ej_cron_parse(exprs[e], &c, NULL, 0) != 0)
            return 1;
        int64_t warm;
        for (int i = 0; i < 1000; i++)
            ej_cron_next(c, tz[i % 5], from[i % calls], &warm);
#ifdef COUNT_ALLOCS
        long before = atomic_load(&allocs);
#endif
        for (int s = 0; s < samples; s++) {
            int64_t t0 = now_ns();
            for (int k = 0; k < batch; k++) {
                int i = s * batch + k;
                int64_t n;
                ej_cron_next(c, tz[i % 5], from[i], &n);
                sink += n;
            }
            ns[s] = (now_ns() - t0) / batch;
            all[nall++] = ns[s];
        }
#ifdef COUNT_ALLOCS
        allocs_in_calls += atomic_load(&allocs) - before;
#endif
        qsort(ns, (size_t)samples, sizeof(int64_t), cmp_i64);
        printf("%-26s %7lld %7lld %7lld %7lld\n", exprs[e], (long long)ns[samples / 2],
               (long long)ns[samples * 9 / 10], (long long)ns[samples * 99 / 100],
               (long long)ns[samples - 1]);
        ej_cron_free(c);
    }
    qsort(all, (size_t)nall, sizeof(int64_t), cmp_i64);
    printf("%-26s %7lld %7lld %7lld %7lld\n", "all", (long long)all[nall / 2],
           (long long)all[nall * 9 / 10], (long long)all[nall * 99 / 100],
           (long long)all[nall - 1]);
#ifdef COUNT_ALLOCS
    printf("heap allocations during ej_cron_next calls: %ld\n", allocs_in_calls);
#else
    printf("heap allocations: not counted in sanitizer builds\n");
#endif
    free(ns);
    free(all);
    free(from);
    return sink == 42 ? 1 : 0;
}
