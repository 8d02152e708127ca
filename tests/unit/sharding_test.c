#include <errno.h>
#include <limits.h>
#include <pthread.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <cmocka.h>

#include "common/util.h"
#include "ejob/error.h"
#include "ejob/sharding.h"

/* Allocation failure injection: the module's objects and this file are
 * linked with --wrap=malloc/calloc/realloc. fail_countdown > 0 lets that
 * many allocations succeed, then fails the next one. */
void *__real_malloc(size_t n);
void *__real_calloc(size_t n, size_t m);
void *__real_realloc(void *p, size_t n);
void *__wrap_malloc(size_t n);
void *__wrap_calloc(size_t n, size_t m);
void *__wrap_realloc(void *p, size_t n);
static int fail_countdown = -1;
static int should_fail(void)
{
    if (fail_countdown < 0)
        return 0;
    if (fail_countdown == 0) {
        fail_countdown = -1;
        return 1;
    }
    fail_countdown--;
    return 0;
}
void *__wrap_malloc(size_t n)
{
    return should_fail() ? NULL : __real_malloc(n);
}
void *__wrap_calloc(size_t n, size_t m)
{
    return should_fail() ? NULL : __real_calloc(n, m);
}
void *__wrap_realloc(void *p, size_t n)
{
    return should_fail() ? NULL : __real_realloc(p, n);
}

static const char *const hosts3[] = {"host0@-@0", "host1@-@0", "host2@-@0"};

/* "host0@-@0=[0,1,6] host1@-@0=[2,3,7] host2@-@0=[4,5]" for owner[]. Static buffer. */
static const char *layout(const char *const *inst, size_t n, const int *owner, int total)
{
    static char out[4096];
    size_t offsets[64];
    int items[1024];
    assert_true(n < 64 && total <= 1024);
    assert_int_equal(ej_sharding_group(owner, total, n, offsets, items), 0);
    size_t len = 0;
    out[0] = '\0';
    for (size_t k = 0; k < n; k++) {
        len += (size_t)snprintf(out + len, sizeof(out) - len, "%s%s=[", k ? " " : "", inst[k]);
        for (size_t j = offsets[k]; j < offsets[k + 1]; j++)
            len += (size_t)snprintf(out + len, sizeof(out) - len, j > offsets[k] ? ",%d" : "%d",
                                    items[j]);
        len += (size_t)snprintf(out + len, sizeof(out) - len, "]");
    }
    return out;
}

static const char *shard(ej_sharding_fn fn, const char *const *inst, size_t n, const char *job,
                         int total)
{
    int owner[1024];
    assert_int_equal(fn(inst, n, job, total, NULL, owner, NULL), 0);
    return layout(inst, n, owner, total);
}

static void test_average_vectors(void **state)
{
    (void)state;
    int owner[3] = {7, 7, 7};
    /* No instances: nothing assigned (ElasticJob returns an empty map). */
    assert_int_equal(ej_sharding_average(NULL, 0, "j", 3, NULL, owner, NULL), 0);
    assert_int_equal(owner[0], -1);
    assert_int_equal(owner[2], -1);
    assert_string_equal(shard(ej_sharding_average, hosts3, 1, "j", 3), "host0@-@0=[0,1,2]");
    assert_string_equal(shard(ej_sharding_average, hosts3, 3, "j", 2),
                        "host0@-@0=[0] host1@-@0=[1] host2@-@0=[]");
    assert_string_equal(shard(ej_sharding_average, hosts3, 3, "j", 9),
                        "host0@-@0=[0,1,2] host1@-@0=[3,4,5] host2@-@0=[6,7,8]");
    assert_string_equal(shard(ej_sharding_average, hosts3, 3, "j", 8),
                        "host0@-@0=[0,1,6] host1@-@0=[2,3,7] host2@-@0=[4,5]");
    assert_string_equal(shard(ej_sharding_average, hosts3, 3, "j", 10),
                        "host0@-@0=[0,1,2,9] host1@-@0=[3,4,5] host2@-@0=[6,7,8]");
    assert_string_equal(shard(ej_sharding_average, hosts3, 3, "j", 0),
                        "host0@-@0=[] host1@-@0=[] host2@-@0=[]");
}

static void test_odevity_vectors(void **state)
{
    (void)state;
    assert_string_equal(shard(ej_sharding_odevity, hosts3, 3, "1", 2),
                        "host0@-@0=[0] host1@-@0=[1] host2@-@0=[]");
    assert_string_equal(shard(ej_sharding_odevity, hosts3, 3, "0", 2),
                        "host0@-@0=[] host1@-@0=[1] host2@-@0=[0]");
    /* A negative even hash reverses too (Java: -2 % 2 == 0). */
    assert_true(ej__java_string_hash("polygenelubricants") % 2 == 0);
    assert_string_equal(shard(ej_sharding_odevity, hosts3, 3, "polygenelubricants", 8),
                        "host0@-@0=[4,5] host1@-@0=[2,3,7] host2@-@0=[0,1,6]");
    /* A negative odd hash keeps the order. */
    char neg_odd[32] = "";
    for (int i = 0; i < 1000 && neg_odd[0] == '\0'; i++) {
        char name[32];
        snprintf(name, sizeof(name), "negative-odd-%d", i);
        int32_t h = ej__java_string_hash(name);
        if (h < 0 && h % 2 != 0)
            memcpy(neg_odd, name, sizeof(name));
    }
    assert_true(neg_odd[0] != '\0');
    assert_string_equal(shard(ej_sharding_odevity, hosts3, 3, neg_odd, 8),
                        "host0@-@0=[0,1,6] host1@-@0=[2,3,7] host2@-@0=[4,5]");
}

static void test_rotate_vectors(void **state)
{
    (void)state;
    assert_string_equal(shard(ej_sharding_rotate, hosts3, 3, "1", 2),
                        "host0@-@0=[] host1@-@0=[0] host2@-@0=[1]");
    assert_string_equal(shard(ej_sharding_rotate, hosts3, 3, "2", 2),
                        "host0@-@0=[1] host1@-@0=[] host2@-@0=[0]");
    assert_string_equal(shard(ej_sharding_rotate, hosts3, 3, "3", 2),
                        "host0@-@0=[0] host1@-@0=[1] host2@-@0=[]");
}

/* Java's rotation, written independently with 64-bit arithmetic, for names
 * whose hash is not Integer.MIN_VALUE. */
static void java_rotate(size_t n, const char *job, int total, int *owner)
{
    int64_t h = ej__java_string_hash(job);
    int64_t offset = (h < 0 ? -h : h) % (int64_t)n;
    int per = total / (int)n, rem = total % (int)n;
    for (size_t pos = 0; pos < n; pos++) {
        int inst = (int)(((int64_t)pos + offset) % (int64_t)n);
        for (int j = 0; j < per; j++)
            owner[(int)pos * per + j] = inst;
        if ((int)pos < rem)
            owner[per * (int)n + (int)pos] = inst;
    }
}

static void test_rotate_matches_java_and_min_value(void **state)
{
    (void)state;
    const char *inst[9] = {"a", "b", "c", "d", "e", "f", "g", "h", "i"};
    int got[64], want[64];
    static const char *const names[] = {
        "1", "2", "3", "myJob", "elastic-job-demo", "\xe4\xb8\xad\xe6\x96\x87", "negative_job_x",
        "zz"};
    for (size_t k = 0; k < sizeof(names) / sizeof(names[0]); k++) {
        for (size_t n = 1; n <= 9; n++) {
            for (int total = 0; total <= 20; total += 7) {
                assert_int_equal(ej_sharding_rotate(inst, n, names[k], total, NULL, got, NULL), 0);
                java_rotate(n, names[k], total, want);
                assert_memory_equal(got, want, (size_t)total * sizeof(int));
            }
        }
    }
    /* Integer.MIN_VALUE: Java throws for n = 3, 5, 6, 7; ejob uses offset 0,
     * the same as Java for n = 1, 2, 4, 8. */
    static const char *const min_names[] = {"polygenelubricants", "GydZG_", "DESIGNING WORKHOUSES"};
    for (size_t k = 0; k < 3; k++) {
        assert_int_equal(ej__java_string_hash(min_names[k]), INT32_MIN);
        for (size_t n = 1; n <= 9; n++) {
            assert_int_equal(ej_sharding_rotate(inst, n, min_names[k], 17, NULL, got, NULL), 0);
            assert_int_equal(ej_sharding_average(inst, n, "x", 17, NULL, want, NULL), 0);
            assert_memory_equal(got, want, 17 * sizeof(int));
        }
    }
    assert_string_equal(shard(ej_sharding_rotate, hosts3, 3, "GydZG_", 8),
                        "host0@-@0=[0,1,6] host1@-@0=[2,3,7] host2@-@0=[4,5]");
}

static void test_builtin_argument_errors(void **state)
{
    (void)state;
    ej_sharding_fn fns[] = {ej_sharding_average, ej_sharding_odevity, ej_sharding_rotate,
                            ej_sharding_consistent_hash, ej_sharding_sticky};
    int owner[4];
    const char *with_null[] = {"a", NULL};
    for (size_t i = 0; i < 5; i++) {
        assert_int_equal(fns[i](hosts3, 3, NULL, 2, NULL, owner, NULL), EJ_EINVAL);
        assert_int_equal(fns[i](hosts3, 3, "j", -1, NULL, owner, NULL), EJ_EINVAL);
        assert_int_equal(fns[i](NULL, 3, "j", 2, NULL, owner, NULL), EJ_EINVAL);
        assert_int_equal(fns[i](hosts3, 3, "j", 2, NULL, NULL, NULL), EJ_EINVAL);
        assert_int_equal(fns[i](hosts3, (size_t)INT_MAX + 1, "j", 2, NULL, owner, NULL), EJ_EINVAL);
        /* Zero items need no output array. */
        assert_int_equal(fns[i](hosts3, 3, "j", 0, NULL, NULL, NULL), 0);
    }
    const char *prev[2] = {"a", "a"};
    assert_int_equal(ej_sharding_consistent_hash(with_null, 2, "j", 2, NULL, owner, NULL),
                     EJ_EINVAL);
    assert_int_equal(ej_sharding_sticky(with_null, 2, "j", 2, prev, owner, NULL), EJ_EINVAL);
}

static void test_find_names(void **state)
{
    (void)state;
    static const struct {
        const char *name, *canonical;
    } cases[] = {
        {NULL, "AVERAGE"},
        {"", "AVERAGE"},
        {"AVERAGE", "AVERAGE"},
        {"average", "AVERAGE"},
        {"AVG_ALLOCATION", "AVERAGE"},
        {"com.dangdang.ddframe.job.lite.api.strategy.impl.AverageAllocationJobShardingStrategy",
         "AVERAGE"},
        {"io.elasticjob.lite.api.strategy.impl.AverageAllocationJobShardingStrategy", "AVERAGE"},
        {"ODEVITY", "ODEVITY"},
        {"com.dangdang.ddframe.job.lite.api.strategy.impl.OdevitySortByNameJobShardingStrategy",
         "ODEVITY"},
        {"io.elasticjob.lite.api.strategy.impl.OdevitySortByNameJobShardingStrategy", "ODEVITY"},
        {"ROTATE", "ROTATE"},
        {"ROUND_ROBIN", "ROTATE"},
        {"round_robin", "ROTATE"},
        {"com.dangdang.ddframe.job.lite.api.strategy.impl.RotateServerByNameJobShardingStrategy",
         "ROTATE"},
        {"io.elasticjob.lite.api.strategy.impl.RotateServerByNameJobShardingStrategy", "ROTATE"},
        {"CONSISTENT_HASH", "CONSISTENT_HASH"},
        {"STICKY", "STICKY"},
        {"sticky", "STICKY"},
        {"BALANCED", "BALANCED"},
        {"balanced", "BALANCED"},
        {"io.ejob.sharding.BalancedShardingStrategy", "BALANCED"},
    };
    for (size_t i = 0; i < sizeof(cases) / sizeof(cases[0]); i++) {
        ej_sharding_strategy s;
        assert_int_equal(ej_sharding_find(cases[i].name, &s, NULL, 0), 0);
        assert_string_equal(s.name, cases[i].canonical);
        assert_true(s.builtin);
        assert_non_null(s.fn);
        /* Only BALANCED asks the coordinator for the namespace's load. */
        assert_int_equal(s.namespace_load, strcmp(s.name, "BALANCED") == 0);
    }
    ej_sharding_strategy s;
    assert_int_equal(ej_sharding_find("ODEVITY", &s, NULL, 0), 0);
    assert_ptr_equal(s.fn, ej_sharding_odevity);

    char err[128];
    memset(&s, 0x5a, sizeof(s));
    assert_int_equal(ej_sharding_find("NotClass", &s, err, sizeof(err)), EJ_ENOTFOUND);
    assert_string_equal(err, "unknown sharding strategy \"NotClass\"");
    assert_int_equal((unsigned char)s.name[0], 0x5a); /* untouched */
    /* Class names match exactly: a wrong package or case is unknown. */
    assert_int_equal(
        ej_sharding_find("org.example.AverageAllocationJobShardingStrategy", &s, NULL, 0),
        EJ_ENOTFOUND);
    assert_int_equal(ej_sharding_find("com.dangdang.ddframe.job.lite.api.strategy.impl."
                                      "averageallocationjobshardingstrategy",
                                      &s, err, sizeof(err)),
                     EJ_ENOTFOUND);
    assert_int_equal(ej_sharding_find("java.lang.Object", &s, err, 4), EJ_ENOTFOUND);
    assert_string_equal(err, "unk"); /* truncated, NUL-terminated */
    assert_int_equal(ej_sharding_find("AVERAGE", NULL, err, sizeof(err)), EJ_EINVAL);
}

static int custom_calls;
static int custom_first(const char *const *instances, size_t n, const char *job, int total,
                        const char *const *prev, int *owner, void *user)
{
    (void)instances;
    (void)job;
    (void)prev;
    custom_calls++;
    for (int i = 0; i < total; i++)
        owner[i] = n > 0 ? (int)(*(int *)user % (int)n) : -1;
    return 0;
}
static int custom_bad_index(const char *const *instances, size_t n, const char *job, int total,
                            const char *const *prev, int *owner, void *user)
{
    (void)instances;
    (void)job;
    (void)prev;
    (void)user;
    for (int i = 0; i < total; i++)
        owner[i] = i == 1 ? (int)n : 0;
    return 0;
}
static int custom_negative(const char *const *instances, size_t n, const char *job, int total,
                           const char *const *prev, int *owner, void *user)
{
    (void)instances;
    (void)n;
    (void)job;
    (void)prev;
    (void)user;
    for (int i = 0; i < total; i++)
        owner[i] = -2;
    return 0;
}
static int custom_fails(const char *const *instances, size_t n, const char *job, int total,
                        const char *const *prev, int *owner, void *user)
{
    (void)instances;
    (void)n;
    (void)job;
    (void)total;
    (void)prev;
    (void)owner;
    (void)user;
    return EJ_EBUSY;
}
static int custom_leaves_unassigned(const char *const *instances, size_t n, const char *job,
                                    int total, const char *const *prev, int *owner, void *user)
{
    (void)instances;
    (void)n;
    (void)job;
    (void)prev;
    (void)user;
    if (total > 0)
        owner[0] = 0; /* the rest keep the -1 that ej_sharding_run put there */
    return 0;
}

static void test_register_custom(void **state)
{
    (void)state;
    int one = 1, two = 2;
    ej_sharding_strategy s;
    assert_int_equal(ej_sharding_register("myStrategy", custom_first, &one), 0);
    assert_int_equal(ej_sharding_find("myStrategy", &s, NULL, 0), 0);
    assert_string_equal(s.name, "myStrategy");
    assert_false(s.builtin);
    assert_ptr_equal(s.user, &one);
    /* Custom names are case-sensitive. */
    assert_int_equal(ej_sharding_find("mystrategy", &s, NULL, 0), EJ_ENOTFOUND);

    int owner[4];
    char err[256];
    assert_int_equal(ej_sharding_find("myStrategy", &s, NULL, 0), 0);
    assert_int_equal(ej_sharding_run(&s, hosts3, 3, "j", 4, NULL, owner, err, sizeof(err)), 0);
    assert_int_equal(owner[3], 1);
    /* Re-registering replaces. */
    assert_int_equal(ej_sharding_register("myStrategy", custom_first, &two), 0);
    assert_int_equal(ej_sharding_find("myStrategy", &s, NULL, 0), 0);
    assert_int_equal(ej_sharding_run(&s, hosts3, 3, "j", 4, NULL, owner, err, sizeof(err)), 0);
    assert_int_equal(owner[3], 2);

    /* Built-in names, aliases and class names cannot be taken. */
    assert_int_equal(ej_sharding_register("AVERAGE", custom_first, NULL), EJ_EINVAL);
    assert_int_equal(ej_sharding_register("sticky", custom_first, NULL), EJ_EINVAL);
    assert_int_equal(ej_sharding_register("Round_Robin", custom_first, NULL), EJ_EINVAL);
    assert_int_equal(ej_sharding_register("com.dangdang.ddframe.job.lite.api.strategy.impl."
                                          "RotateServerByNameJobShardingStrategy",
                                          custom_first, NULL),
                     EJ_EINVAL);
    assert_int_equal(ej_sharding_register("", custom_first, NULL), EJ_EINVAL);
    assert_int_equal(ej_sharding_register(NULL, custom_first, NULL), EJ_EINVAL);
    assert_int_equal(ej_sharding_register("x", NULL, NULL), EJ_EINVAL);
    char longname[EJ_SHARDING_NAME_MAX + 1];
    memset(longname, 'n', sizeof(longname) - 1);
    longname[EJ_SHARDING_NAME_MAX] = '\0';
    assert_int_equal(ej_sharding_register(longname, custom_first, NULL), EJ_EINVAL);
    longname[EJ_SHARDING_NAME_MAX - 1] = '\0'; /* exactly the longest allowed */
    assert_int_equal(ej_sharding_register(longname, custom_first, &one), 0);
    assert_int_equal(ej_sharding_find(longname, &s, NULL, 0), 0);
    assert_string_equal(s.name, longname);
    assert_int_equal(ej_sharding_unregister(longname), 0);

    /* Unregister. */
    assert_int_equal(ej_sharding_unregister("myStrategy"), 0);
    assert_int_equal(ej_sharding_unregister("myStrategy"), EJ_ENOTFOUND);
    assert_int_equal(ej_sharding_unregister(NULL), EJ_EINVAL);
    assert_int_equal(ej_sharding_find("myStrategy", &s, err, sizeof(err)), EJ_ENOTFOUND);
    assert_string_equal(err, "unknown sharding strategy \"myStrategy\"");

    /* Many registrations grow the table; removal from the middle keeps the rest. */
    char name[32];
    for (int i = 0; i < 40; i++) {
        snprintf(name, sizeof(name), "s%d", i);
        assert_int_equal(ej_sharding_register(name, custom_first, &one), 0);
    }
    assert_int_equal(ej_sharding_unregister("s7"), 0);
    assert_int_equal(ej_sharding_find("s39", &s, NULL, 0), 0);
    assert_int_equal(ej_sharding_find("s7", &s, NULL, 0), EJ_ENOTFOUND);
    for (int i = 0; i < 40; i++) {
        snprintf(name, sizeof(name), "s%d", i);
        assert_int_equal(ej_sharding_unregister(name), i == 7 ? EJ_ENOTFOUND : 0);
    }
}

static void test_register_out_of_memory(void **state)
{
    (void)state;
    /* Fill the table to a growth boundary, then fail the growth. */
    char name[32];
    int rc = 0, registered = 0;
    for (int i = 0; i < 4096 && rc == 0; i++) {
        snprintf(name, sizeof(name), "oom%d", i);
        fail_countdown = 0;
        rc = ej_sharding_register(name, custom_first, NULL);
        fail_countdown = -1;
        if (rc == 0)
            registered++;
    }
    assert_int_equal(rc, EJ_ENOMEM);
    assert_int_equal(ej_sharding_find(name, &(ej_sharding_strategy){0}, NULL, 0), EJ_ENOTFOUND);
    for (int i = 0; i < registered; i++) {
        snprintf(name, sizeof(name), "oom%d", i);
        assert_int_equal(ej_sharding_unregister(name), 0);
    }
}

static void test_run_checks(void **state)
{
    (void)state;
    int owner[4];
    char err[256];
    ej_sharding_strategy s;
    assert_int_equal(ej_sharding_find("AVERAGE", &s, NULL, 0), 0);
    assert_int_equal(ej_sharding_run(&s, hosts3, 3, "j", 4, NULL, owner, err, sizeof(err)), 0);
    assert_string_equal(layout(hosts3, 3, owner, 4), "host0@-@0=[0,3] host1@-@0=[1] host2@-@0=[2]");

    const char *dup[] = {"a@-@1", "b@-@1", "a@-@1"};
    assert_int_equal(ej_sharding_run(&s, dup, 3, "j", 4, NULL, owner, err, sizeof(err)), EJ_EINVAL);
    assert_string_equal(err, "instance \"a@-@1\" is listed twice");
    const char *with_null[] = {"a@-@1", NULL};
    assert_int_equal(ej_sharding_run(&s, with_null, 2, "j", 4, NULL, owner, err, sizeof(err)),
                     EJ_EINVAL);
    assert_string_equal(err, "instance 1 is NULL");
    assert_int_equal(ej_sharding_run(&s, hosts3, 3, "j", -3, NULL, owner, err, sizeof(err)),
                     EJ_EINVAL);
    assert_string_equal(err, "job \"j\": sharding total count -3 is negative");
    assert_int_equal(ej_sharding_run(&s, hosts3, 3, NULL, 4, NULL, owner, err, sizeof(err)),
                     EJ_EINVAL);
    assert_string_equal(err, "job name is NULL");
    assert_int_equal(ej_sharding_run(NULL, hosts3, 3, "j", 4, NULL, owner, err, sizeof(err)),
                     EJ_EINVAL);
    assert_string_equal(err, "no sharding strategy given");
    assert_int_equal(ej_sharding_run(&s, NULL, 3, "j", 4, NULL, owner, err, sizeof(err)),
                     EJ_EINVAL);
    assert_string_equal(err, "job \"j\": NULL instance or owner array");
    assert_int_equal(ej_sharding_run(&s, hosts3, 3, "j", 4, NULL, NULL, NULL, 0), EJ_EINVAL);
    /* No instances: nothing assigned, not an error. */
    owner[0] = 5;
    assert_int_equal(ej_sharding_run(&s, NULL, 0, "j", 4, NULL, owner, err, sizeof(err)), 0);
    assert_int_equal(owner[0], -1);
    /* Out of memory while checking for duplicates. */
    fail_countdown = 0;
    assert_int_equal(ej_sharding_run(&s, hosts3, 3, "j", 4, NULL, owner, err, sizeof(err)),
                     EJ_ENOMEM);
    assert_string_equal(err, "out of memory checking 3 instances");

    ej_sharding_strategy bad = {.name = "bad", .fn = custom_bad_index};
    assert_int_equal(ej_sharding_run(&bad, hosts3, 3, "j", 4, NULL, owner, err, sizeof(err)),
                     EJ_ESHARDING);
    assert_string_equal(err, "sharding strategy \"bad\" gave item 1 of job \"j\" to instance "
                             "index 3, but there are 3 instances");
    ej_sharding_strategy neg = {.name = "neg", .fn = custom_negative};
    assert_int_equal(ej_sharding_run(&neg, hosts3, 3, "j", 4, NULL, owner, err, sizeof(err)),
                     EJ_ESHARDING);
    ej_sharding_strategy fails = {.name = "fails", .fn = custom_fails};
    assert_int_equal(ej_sharding_run(&fails, hosts3, 3, "j", 4, NULL, owner, err, sizeof(err)),
                     EJ_ESHARDING);
    assert_string_equal(err, "sharding strategy \"fails\" failed for job \"j\": resource busy "
                             "(EJ_EBUSY)");
    ej_sharding_strategy partial = {.name = "partial", .fn = custom_leaves_unassigned};
    assert_int_equal(ej_sharding_run(&partial, hosts3, 3, "j", 4, NULL, owner, err, sizeof(err)),
                     0);
    assert_string_equal(layout(hosts3, 3, owner, 4), "host0@-@0=[0] host1@-@0=[] host2@-@0=[]");
}

static void test_group(void **state)
{
    (void)state;
    int owner[] = {2, -1, 0, 2, 1, 0};
    size_t offsets[4];
    int items[6];
    assert_int_equal(ej_sharding_group(owner, 6, 3, offsets, items), 0);
    assert_int_equal(offsets[0], 0);
    assert_int_equal(offsets[1], 2);
    assert_int_equal(offsets[2], 3);
    assert_int_equal(offsets[3], 5);
    int want[] = {2, 5, 4, 0, 3};
    assert_memory_equal(items, want, sizeof(want));
    /* No instances: everything must be unassigned. */
    int none[] = {-1, -1};
    assert_int_equal(ej_sharding_group(none, 2, 0, offsets, items), 0);
    assert_int_equal(offsets[0], 0);
    assert_int_equal(ej_sharding_group(owner, 6, 2, offsets, items), EJ_EINVAL);
    int neg[] = {-2};
    assert_int_equal(ej_sharding_group(neg, 1, 3, offsets, items), EJ_EINVAL);
    assert_int_equal(ej_sharding_group(owner, -1, 3, offsets, items), EJ_EINVAL);
    assert_int_equal(ej_sharding_group(owner, 6, 3, NULL, items), EJ_EINVAL);
    assert_int_equal(ej_sharding_group(owner, 6, 3, offsets, NULL), EJ_EINVAL);
    assert_int_equal(ej_sharding_group(NULL, 0, 3, offsets, NULL), 0);
    assert_int_equal(offsets[3], 0);
}

static void test_instances_order(void **state)
{
    (void)state;
    char a[] = "192.168.1.10@-@100", b[] = "192.168.1.9@-@7", c[] = "192.168.1.9@-@12",
         d[] = "10.0.0.1@-@5";
    char *ids[] = {a, NULL, d, b, c};
    ej_sharding_instances_order(ids, 5);
    assert_ptr_equal(ids[0], b);
    assert_ptr_equal(ids[1], c);
    assert_ptr_equal(ids[2], a);
    assert_ptr_equal(ids[3], d);
    assert_null(ids[4]);
    /* Java compares UTF-16 units: U+1F600 (a surrogate pair, D83D DE00)
     * sorts below U+FF61, though its UTF-8 bytes sort above. */
    char emoji[] = "x\xf0\x9f\x98\x80", halfwidth[] = "x\xef\xbd\xa1", plain[] = "xz",
         prefix[] = "x";
    char *u[] = {emoji, prefix, halfwidth, plain};
    ej_sharding_instances_order(u, 4);
    assert_ptr_equal(u[0], halfwidth);
    assert_ptr_equal(u[1], emoji);
    assert_ptr_equal(u[2], plain);
    assert_ptr_equal(u[3], prefix);
    /* Invalid UTF-8 compares as U+FFFD; nothing crashes on truncated sequences. */
    char bad1[] = "x\xc3", bad2[] = "x\xff\xfe", bad3[] = "x\xe2\x82";
    char *v[] = {bad1, bad2, bad3, plain};
    ej_sharding_instances_order(v, 4);
    assert_ptr_equal(v[3], plain);
    ej_sharding_instances_order(NULL, 3);
    ej_sharding_instances_order(u, 1);
}

/* ---- consistent hash ---- */

static char **make_ids(size_t n, const char *prefix)
{
    char **ids = calloc(n, sizeof(*ids));
    assert_non_null(ids);
    for (size_t i = 0; i < n; i++) {
        ids[i] = malloc(48);
        assert_non_null(ids[i]);
        snprintf(ids[i], 48, "%s%u.%u@-@%u", prefix, (unsigned)(i / 250), (unsigned)(i % 250),
                 1000 + (unsigned)i);
    }
    return ids;
}

static void free_ids(char **ids, size_t n)
{
    for (size_t i = 0; i < n; i++)
        free(ids[i]);
    free(ids);
}

static void test_consistent_hash_properties(void **state)
{
    (void)state;
    enum { N = 10, TOTAL = 10000 };
    char **ids = make_ids(N + 1, "10.0.");
    int *a = malloc(TOTAL * sizeof(int)), *b = malloc(TOTAL * sizeof(int));
    assert_non_null(a);
    assert_non_null(b);
    assert_int_equal(
        ej_sharding_consistent_hash((const char *const *)ids, N, "job", TOTAL, NULL, a, NULL), 0);
    int count[N] = {0};
    for (int i = 0; i < TOTAL; i++) {
        assert_true(a[i] >= 0 && a[i] < N);
        count[a[i]]++;
    }
    /* 160 virtual nodes keep every instance near the mean of 1000. */
    for (int k = 0; k < N; k++)
        assert_true(count[k] > 600 && count[k] < 1400);

    /* Deterministic and independent of the instance order. */
    char *rev[N];
    for (int k = 0; k < N; k++)
        rev[k] = ids[N - 1 - k];
    assert_int_equal(
        ej_sharding_consistent_hash((const char *const *)rev, N, "job", TOTAL, NULL, b, NULL), 0);
    for (int i = 0; i < TOTAL; i++)
        assert_string_equal(ids[a[i]], rev[b[i]]);

    /* A join moves only items to the new instance, about total/(n+1). */
    assert_int_equal(
        ej_sharding_consistent_hash((const char *const *)ids, N + 1, "job", TOTAL, NULL, b, NULL),
        0);
    int moved = 0;
    for (int i = 0; i < TOTAL; i++) {
        if (a[i] != b[i]) {
            assert_int_equal(b[i], N);
            moved++;
        }
    }
    assert_true(moved > TOTAL / (N + 1) / 2 && moved < TOTAL / (N + 1) * 3 / 2);
    /* A leave moves only the leaving instance's items. */
    char *left[N - 1];
    for (int k = 0, j = 0; k < N; k++)
        if (k != 4)
            left[j++] = ids[k];
    assert_int_equal(
        ej_sharding_consistent_hash((const char *const *)left, N - 1, "job", TOTAL, NULL, b, NULL),
        0);
    moved = 0;
    for (int i = 0; i < TOTAL; i++) {
        if (strcmp(ids[a[i]], left[b[i]]) != 0) {
            assert_int_equal(a[i], 4);
            moved++;
        }
    }
    assert_int_equal(moved, count[4]);
    /* Another job spreads differently. */
    assert_int_equal(
        ej_sharding_consistent_hash((const char *const *)ids, N, "job2", TOTAL, NULL, b, NULL), 0);
    assert_true(memcmp(a, b, TOTAL * sizeof(int)) != 0);
    /* A single instance takes everything; none leaves everything unassigned. */
    assert_int_equal(
        ej_sharding_consistent_hash((const char *const *)ids, 1, "job", 50, NULL, b, NULL), 0);
    for (int i = 0; i < 50; i++)
        assert_int_equal(b[i], 0);
    assert_int_equal(ej_sharding_consistent_hash(NULL, 0, "job", 50, NULL, b, NULL), 0);
    assert_int_equal(b[49], -1);
    /* Allocation failure of the ring, then of the position index. */
    for (int k = 0; k < 2; k++) {
        fail_countdown = k;
        assert_int_equal(
            ej_sharding_consistent_hash((const char *const *)ids, N, "job", 5, NULL, b, NULL),
            EJ_ENOMEM);
    }
    fail_countdown = -1;
    free(a);
    free(b);
    free_ids(ids, N + 1);
}

static void test_consistent_hash_many_instances(void **state)
{
    (void)state;
    /* No instance limit: 2000 instances, all items land on one of them. */
    enum { N = 2000, TOTAL = 20000 };
    char **ids = make_ids(N, "172.16.");
    int *owner = malloc(TOTAL * sizeof(int));
    assert_non_null(owner);
    assert_int_equal(
        ej_sharding_consistent_hash((const char *const *)ids, N, "big", TOTAL, NULL, owner, NULL),
        0);
    int *seen = calloc(N, sizeof(int));
    assert_non_null(seen);
    int used = 0;
    for (int i = 0; i < TOTAL; i++) {
        assert_true(owner[i] >= 0 && owner[i] < N);
        if (!seen[owner[i]]++)
            used++;
    }
    assert_true(used > N * 9 / 10);
    free(seen);
    free(owner);
    free_ids(ids, N);
}

/* ---- sticky ---- */

static uint64_t rng_state = 0x9e3779b97f4a7c15u;
static uint32_t rnd(uint32_t bound)
{
    rng_state ^= rng_state << 13;
    rng_state ^= rng_state >> 7;
    rng_state ^= rng_state << 17;
    return (uint32_t)(rng_state % bound);
}

/* The fewest items that must leave an instance that is still present: every
 * instance holds at most ceil, only r of them ceil. Computed independently of
 * the implementation from the previous owners' counts. */
static int min_moves(const char *const *inst, size_t n, const char *const *prev, int total)
{
    int q = total / (int)n, r = total % (int)n;
    int over = 0, above_q = 0;
    for (size_t k = 0; k < n; k++) {
        int kept = 0;
        for (int i = 0; i < total; i++)
            if (prev[i] != NULL && strcmp(prev[i], inst[k]) == 0)
                kept++;
        if (kept > q) {
            over += kept - q;
            above_q++;
        }
    }
    return over - (above_q < r ? above_q : r);
}

/* Checks balance and minimal movement; returns the number of items that
 * changed owner (including items whose owner is gone). */
static int check_sticky(const char *const *inst, size_t n, const char *const *prev, int total,
                        int *owner)
{
    assert_int_equal(ej_sharding_sticky(inst, n, "job", total, prev, owner, NULL), 0);
    int q = total / (int)n, r = total % (int)n;
    int count[64] = {0};
    int moved_present = 0, moved = 0;
    for (int i = 0; i < total; i++) {
        assert_true(owner[i] >= 0 && owner[i] < (int)n);
        count[owner[i]]++;
        if (prev[i] == NULL || strcmp(prev[i], inst[owner[i]]) == 0)
            continue;
        moved++;
        for (size_t k = 0; k < n; k++)
            if (strcmp(prev[i], inst[k]) == 0)
                moved_present++;
    }
    int at_ceil = 0;
    for (size_t k = 0; k < n; k++) {
        assert_true(count[k] == q || count[k] == q + 1);
        at_ceil += count[k] == q + 1;
    }
    assert_int_equal(at_ceil, r);
    assert_int_equal(moved_present, min_moves(inst, n, prev, total));
    return moved;
}

static void test_sticky_without_previous_is_average(void **state)
{
    (void)state;
    const char *inst[20];
    char names[20][40];
    for (int k = 0; k < 20; k++) {
        snprintf(names[k], sizeof(names[k]), "h%d@-@1", k);
        inst[k] = names[k];
    }
    int a[200], b[200];
    const char *none[200] = {0};
    const char *gone[200];
    for (int i = 0; i < 200; i++)
        gone[i] = "gone@-@9";
    for (int t = 0; t < 300; t++) {
        size_t n = 1 + rnd(20);
        int total = (int)rnd(201);
        assert_int_equal(ej_sharding_average(inst, n, "job", total, NULL, a, NULL), 0);
        assert_int_equal(ej_sharding_sticky(inst, n, "job", total, NULL, b, NULL), 0);
        assert_memory_equal(a, b, (size_t)total * sizeof(int));
        assert_int_equal(ej_sharding_sticky(inst, n, "job", total, none, b, NULL), 0);
        assert_memory_equal(a, b, (size_t)total * sizeof(int));
        assert_int_equal(ej_sharding_sticky(inst, n, "job", total, gone, b, NULL), 0);
        assert_memory_equal(a, b, (size_t)total * sizeof(int));
    }
    assert_string_equal(shard(ej_sharding_sticky, hosts3, 3, "j", 8),
                        "host0@-@0=[0,1,6] host1@-@0=[2,3,7] host2@-@0=[4,5]");
}

static void test_sticky_vectors(void **state)
{
    (void)state;
    int owner[10];
    /* host1 leaves a 9-item layout: its items 3,4,5 are split, nothing else moves. */
    const char *prev9[] = {"host0@-@0", "host0@-@0", "host0@-@0", "host1@-@0", "host1@-@0",
                           "host1@-@0", "host2@-@0", "host2@-@0", "host2@-@0"};
    const char *two[] = {"host0@-@0", "host2@-@0"};
    assert_int_equal(ej_sharding_sticky(two, 2, "j", 9, prev9, owner, NULL), 0);
    assert_string_equal(layout(two, 2, owner, 9), "host0@-@0=[0,1,2,3,4] host2@-@0=[5,6,7,8]");
    /* host3 joins: it takes 2 items, one from each of the fuller instances. */
    const char *four[] = {"host0@-@0", "host1@-@0", "host2@-@0", "host3@-@0"};
    assert_int_equal(ej_sharding_sticky(four, 4, "j", 9, prev9, owner, NULL), 0);
    assert_string_equal(layout(four, 4, owner, 9),
                        "host0@-@0=[0,1,2] host1@-@0=[3,4] host2@-@0=[6,7] host3@-@0=[5,8]");
    /* Same instances: nothing moves. */
    assert_int_equal(ej_sharding_sticky(hosts3, 3, "j", 9, prev9, owner, NULL), 0);
    assert_string_equal(layout(hosts3, 3, owner, 9),
                        "host0@-@0=[0,1,2] host1@-@0=[3,4,5] host2@-@0=[6,7,8]");
    /* Count grows 9 -> 10 (new item unowned): the new item goes where there is room. */
    const char *prev10[10];
    memcpy(prev10, prev9, sizeof(prev9));
    prev10[9] = NULL;
    assert_int_equal(ej_sharding_sticky(hosts3, 3, "j", 10, prev10, owner, NULL), 0);
    assert_string_equal(layout(hosts3, 3, owner, 10),
                        "host0@-@0=[0,1,2,9] host1@-@0=[3,4,5] host2@-@0=[6,7,8]");
    /* Allocation failure. */
    for (int k = 0; k < 3; k++) {
        fail_countdown = k;
        assert_int_equal(ej_sharding_sticky(hosts3, 3, "j", 9, prev9, owner, NULL), EJ_ENOMEM);
    }
    fail_countdown = -1;
}

static void test_sticky_property_join_leave(void **state)
{
    (void)state;
    char names[21][40];
    const char *pool[21];
    for (int k = 0; k < 21; k++) {
        snprintf(names[k], sizeof(names[k]), "10.1.0.%d@-@%d", k, 500 + k);
        pool[k] = names[k];
    }
    int owner[200], prev_owner[200];
    const char *prev[200];
    for (int t = 0; t < 500; t++) {
        size_t n = 1 + rnd(20);
        int total = 1 + (int)rnd(200);
        const char *inst[21];
        for (size_t k = 0; k < n; k++)
            inst[k] = pool[k];
        /* A balanced start: plain average, or sticky from a random layout. */
        if (rnd(2) == 0) {
            assert_int_equal(ej_sharding_average(inst, n, "job", total, NULL, prev_owner, NULL), 0);
        } else {
            const char *rand_prev[200];
            for (int i = 0; i < total; i++)
                rand_prev[i] = rnd(5) == 0 ? NULL : pool[rnd(21)];
            check_sticky(inst, n, rand_prev, total, prev_owner);
        }
        for (int i = 0; i < total; i++)
            prev[i] = inst[prev_owner[i]];

        int leave = n > 1 && rnd(2) == 0;
        if (leave) {
            size_t gone = rnd((uint32_t)n);
            int orphans = 0;
            for (int i = 0; i < total; i++)
                orphans += prev_owner[i] == (int)gone;
            memmove(&inst[gone], &inst[gone + 1], (n - gone - 1) * sizeof(inst[0]));
            n--;
            int moved = check_sticky(inst, n, prev, total, owner);
            assert_int_equal(moved, orphans + min_moves(inst, n, prev, total));
        } else {
            /* The new instance appears anywhere in the registry order. */
            size_t at = rnd((uint32_t)n + 1);
            memmove(&inst[at + 1], &inst[at], (n - at) * sizeof(inst[0]));
            inst[at] = pool[20];
            n++;
            int moved = check_sticky(inst, n, prev, total, owner);
            int got_new = 0;
            for (int i = 0; i < total; i++)
                got_new += owner[i] == (int)at;
            /* Only the new instance gains items, and it gets floor or ceil. */
            assert_int_equal(moved, got_new);
            assert_true(got_new == total / (int)n || got_new == total / (int)n + 1);
        }
    }
}

static void test_sticky_random_previous_minimal(void **state)
{
    (void)state;
    /* Arbitrary (unbalanced, partly unknown) previous owners. */
    char names[24][40];
    const char *pool[24];
    for (int k = 0; k < 24; k++) {
        snprintf(names[k], sizeof(names[k]), "192.168.0.%d@-@1", k);
        pool[k] = names[k];
    }
    int owner[200];
    const char *prev[200];
    for (int t = 0; t < 500; t++) {
        size_t n = 1 + rnd(20);
        int total = 1 + (int)rnd(200);
        for (int i = 0; i < total; i++) {
            uint32_t pick = rnd(10);
            /* Skewed toward the first few instances to force rebalancing. */
            prev[i] = pick == 0 ? NULL : pick < 6 ? pool[rnd(3)] : pool[rnd(24)];
        }
        check_sticky(pool, n, prev, total, owner);
        /* Feeding the result back moves nothing. */
        const char *again[200];
        for (int i = 0; i < total; i++)
            again[i] = pool[owner[i]];
        int owner2[200];
        assert_int_equal(check_sticky(pool, n, again, total, owner2), 0);
        assert_memory_equal(owner, owner2, (size_t)total * sizeof(int));
    }
}

static void test_sticky_duplicate_ids_do_not_crash(void **state)
{
    (void)state;
    const char *dup[] = {"a", "b", "a"};
    const char *prev[] = {"a", "a", "b", "c"};
    int owner[4];
    assert_int_equal(ej_sharding_sticky(dup, 3, "j", 4, prev, owner, NULL), 0);
    for (int i = 0; i < 4; i++)
        assert_true(owner[i] >= 0 && owner[i] < 3);
}

/* ---- performance ---- */

static double now_ms(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec * 1e3 + (double)ts.tv_nsec / 1e6;
}

/* ----------------------------------------------------------- BALANCED */

/* Checks one ej_sharding_balanced_loaded result against water-filling:
 * with M the highest total a greedy one-item-at-a-time fill reaches,
 * every instance that took items ends at M-1 or M and every instance that
 * took none was already at M-1 or more. Returns the items moved away from
 * a previous owner that is still present. */
static int check_balanced(const char *const *inst, size_t n, const long *load,
                          const char *const *prev, int total, int *owner)
{
    assert_int_equal(ej_sharding_balanced_loaded(inst, n, "job", total, prev, load, owner), 0);
    long greedy[32], got[32];
    for (size_t k = 0; k < n; k++)
        greedy[k] = got[k] = load ? load[k] : 0;
    for (int i = 0; i < total; i++) {
        size_t lo = 0;
        for (size_t k = 1; k < n; k++)
            if (greedy[k] < greedy[lo])
                lo = k;
        greedy[lo]++;
    }
    long level = 0;
    for (int i = 0; i < total; i++) {
        assert_true(owner[i] >= 0 && owner[i] < (int)n);
        got[owner[i]]++;
    }
    for (size_t k = 0; k < n; k++)
        if (greedy[k] > (load ? load[k] : 0) && greedy[k] > level)
            level = greedy[k];
    int moved = 0;
    for (size_t k = 0; k < n; k++) {
        long base = load ? load[k] : 0;
        if (got[k] > base)
            assert_true(got[k] == level || got[k] == level - 1);
        else
            assert_true(total == 0 || base >= level - 1);
    }
    for (int i = 0; prev && i < total; i++) {
        if (prev[i] == NULL)
            continue;
        for (size_t k = 0; k < n; k++)
            if (strcmp(prev[i], inst[k]) == 0 && owner[i] != (int)k)
                moved++;
    }
    return moved;
}

static void test_balanced_loaded_properties(void **state)
{
    (void)state;
    char names[24][40];
    const char *pool[24];
    for (int k = 0; k < 24; k++) {
        snprintf(names[k], sizeof(names[k]), "10.2.0.%d@-@%d", k, 700 + k);
        pool[k] = names[k];
    }
    for (int t = 0; t < 2000; t++) {
        size_t n = 1 + rnd(20);
        int total = (int)rnd(80);
        const char *inst[24], *prev[80], *again[80], *shuffled[24];
        long load[24], shuffled_load[24];
        int owner[80], owner2[80];
        for (size_t k = 0; k < n; k++) {
            inst[k] = pool[k];
            load[k] = rnd(3) == 0 ? 0 : (long)rnd(30);
        }
        for (int i = 0; i < total; i++)
            prev[i] = rnd(4) == 0 ? NULL : pool[rnd(24)];
        int moved = check_balanced(inst, n, load, prev, total, owner);
        /* Sticky: no item moves that the counts do not force away. */
        long kept[24] = {0}, count[24] = {0};
        for (int i = 0; i < total; i++) {
            count[owner[i]]++;
            for (size_t k = 0; prev[i] && k < n; k++)
                kept[k] += strcmp(prev[i], inst[k]) == 0;
        }
        int forced = 0;
        for (size_t k = 0; k < n; k++)
            forced += kept[k] > count[k] ? (int)(kept[k] - count[k]) : 0;
        assert_int_equal(moved, forced);
        /* Nothing moves when the result is given back as the previous one. */
        for (int i = 0; i < total; i++)
            again[i] = inst[owner[i]];
        assert_int_equal(check_balanced(inst, n, load, again, total, owner2), 0);
        /* The order instances are given in does not matter. */
        for (size_t k = 0; k < n; k++) {
            shuffled[k] = inst[n - 1 - k];
            shuffled_load[k] = load[n - 1 - k];
        }
        check_balanced(shuffled, n, shuffled_load, prev, total, owner2);
        for (int i = 0; i < total; i++)
            assert_string_equal(shuffled[owner2[i]], inst[owner[i]]);
    }
    /* Bad arguments. */
    long neg[] = {0, -1};
    int owner[4];
    assert_int_equal(ej_sharding_balanced_loaded(hosts3, 2, "j", 4, NULL, neg, owner), EJ_EINVAL);
    assert_int_equal(ej_sharding_balanced_loaded(NULL, 2, "j", 4, NULL, NULL, owner), EJ_EINVAL);
    assert_int_equal(ej_sharding_balanced_loaded(hosts3, 3, NULL, 4, NULL, NULL, owner), EJ_EINVAL);
    assert_int_equal(ej_sharding_balanced_loaded(NULL, 0, "j", 2, NULL, NULL, owner), 0);
    assert_int_equal(owner[0], -1);
    assert_int_equal(owner[1], -1);
}

/* The namespace plan for 100 one-item jobs on the instances of inst[],
 * each job's previous owner taken from prev_owner (ids or NULL); fills
 * owner_id[job] and returns the highest count on any instance. */
static int plan_all(const char *const *inst, size_t n, const char **prev_owner,
                    const char **owner_id, int jobs, const int *order)
{
    char names[128][16];
    ej_sharding_balanced_job bj[128];
    for (int j = 0; j < jobs; j++) {
        int at = order ? order[j] : j; /* the array order must not matter */
        snprintf(names[at], sizeof(names[at]), "job%03d", j);
        bj[at] = (ej_sharding_balanced_job){names[at], inst, n, 1, &prev_owner[j]};
    }
    int count[32] = {0}, high = 0;
    for (int j = 0; j < jobs; j++) {
        int at = order ? order[j] : j, owner = -2;
        assert_int_equal(ej_sharding_balanced_namespace(bj, (size_t)jobs, (size_t)at, &owner), 0);
        assert_true(owner >= 0 && owner < (int)n);
        owner_id[j] = inst[owner];
        if (++count[owner] > high)
            high = count[owner];
    }
    return high;
}

static int count_moves(const char **a, const char **b, int jobs)
{
    int moved = 0;
    for (int j = 0; j < jobs; j++)
        moved += a[j] && strcmp(a[j], b[j]) != 0;
    return moved;
}

static void test_balanced_namespace_join_leave(void **state)
{
    (void)state;
    char names[11][32];
    const char *inst[11];
    for (int k = 0; k < 11; k++) {
        snprintf(names[k], sizeof(names[k]), "192.168.0.%d@-@%d", 10 + k, 100 + k);
        inst[k] = names[k];
    }
    const char *none[100] = {0}, *first[100], *again[100], *left[100], *joined[100];
    int order[100];
    for (int j = 0; j < 100; j++)
        order[j] = (j * 37) % 100;
    /* 100 one-item jobs over 10 instances: 10 each, whatever the order. */
    assert_int_equal(plan_all(inst, 10, none, first, 100, NULL), 10);
    assert_int_equal(plan_all(inst, 10, first, again, 100, order), 10);
    assert_int_equal(count_moves(first, again, 100), 0);
    /* One leaves: only its 10 items move, nobody holds more than 12. */
    int orphans = 0;
    for (int j = 0; j < 100; j++)
        orphans += strcmp(first[j], inst[9]) == 0;
    assert_int_equal(orphans, 10);
    assert_true(plan_all(inst, 9, first, left, 100, order) <= 12);
    assert_int_equal(count_moves(first, left, 100), 10);
    /* It comes back (or a new one joins): the fewest items move to it. */
    assert_int_equal(plan_all(inst, 10, left, joined, 100, NULL), 10);
    assert_int_equal(count_moves(left, joined, 100), 10);
    const char *eleven[100];
    assert_int_equal(plan_all(inst, 11, first, eleven, 100, NULL), 10);
    int to_new = 0;
    for (int j = 0; j < 100; j++)
        to_new += strcmp(eleven[j], inst[10]) == 0;
    assert_int_equal(count_moves(first, eleven, 100), to_new);
    assert_true(to_new == 9);
}

static void test_balanced_namespace_mixed_jobs(void **state)
{
    (void)state;
    char names[8][32];
    const char *inst[8];
    for (int k = 0; k < 8; k++) {
        snprintf(names[k], sizeof(names[k]), "10.9.0.%d@-@1", k);
        inst[k] = names[k];
    }
    for (int t = 0; t < 3000; t++) {
        size_t n = 1 + rnd(8), jobs = 1 + rnd(12);
        bool subsets = t % 3 == 2; /* some jobs run on fewer instances */
        char jn[12][16];
        ej_sharding_balanced_job bj[12];
        int owners[12][40];
        const char *prev[12][40];
        long total_on[8] = {0};
        for (size_t j = 0; j < jobs; j++) {
            snprintf(jn[j], sizeof(jn[j]), "m%02zu", (j * 7) % 12);
            int total = (int)rnd(40);
            for (int i = 0; i < total; i++)
                prev[j][i] = rnd(3) ? inst[rnd(8)] : NULL;
            size_t first = subsets ? rnd((uint32_t)n) : 0;
            bj[j] = (ej_sharding_balanced_job){jn[j], inst + first, n - first, total, prev[j]};
        }
        for (size_t j = 0; j < jobs; j++) {
            assert_int_equal(ej_sharding_balanced_namespace(bj, jobs, j, owners[j]), 0);
            for (int i = 0; i < bj[j].total_count; i++)
                total_on[owners[j][i] + (bj[j].instances - inst)]++;
        }
        /* Instances that run every job differ by at most one item. */
        long lo = LONG_MAX, hi = 0;
        for (size_t k = 0; k < n; k++) {
            lo = total_on[k] < lo ? total_on[k] : lo;
            hi = total_on[k] > hi ? total_on[k] : hi;
        }
        assert_true(subsets || hi - lo <= 1);
        /* Applied and computed again: nothing moves. */
        const char *applied[12][40];
        for (size_t j = 0; j < jobs; j++) {
            for (int i = 0; i < bj[j].total_count; i++)
                applied[j][i] = bj[j].instances[owners[j][i]];
            bj[j].previous_owner = applied[j];
        }
        for (size_t j = 0; j < jobs; j++) {
            int again[40];
            assert_int_equal(ej_sharding_balanced_namespace(bj, jobs, j, again), 0);
            /* Jobs on different sets of instances are placed greedily: a
             * few items may move again; only the same sets are a fixed point. */
            if (!subsets)
                assert_memory_equal(again, owners[j], (size_t)bj[j].total_count * sizeof(int));
            /* The order the jobs are given in does not matter. */
            ej_sharding_balanced_job rev[12];
            int again_rev[40];
            for (size_t r = 0; r < jobs; r++)
                rev[r] = bj[jobs - 1 - r];
            assert_int_equal(ej_sharding_balanced_namespace(rev, jobs, jobs - 1 - j, again_rev), 0);
            assert_memory_equal(again, again_rev, (size_t)bj[j].total_count * sizeof(int));
        }
    }
    /* Errors: duplicate job names, target out of range, NULL instance. */
    const char *bad[] = {"a@-@1", NULL};
    ej_sharding_balanced_job dup[2] = {{"same", inst, 2, 1, NULL}, {"same", inst, 2, 1, NULL}};
    int owner[2];
    assert_int_equal(ej_sharding_balanced_namespace(dup, 2, 0, owner), EJ_EINVAL);
    assert_int_equal(ej_sharding_balanced_namespace(dup, 1, 1, owner), EJ_EINVAL);
    assert_int_equal(ej_sharding_balanced_namespace(NULL, 1, 0, owner), EJ_EINVAL);
    dup[1] = (ej_sharding_balanced_job){"other", bad, 2, 1, NULL};
    assert_int_equal(ej_sharding_balanced_namespace(dup, 2, 0, owner), EJ_EINVAL);
}

static void test_balanced_without_load_spreads_jobs(void **state)
{
    (void)state;
    /* A leader without the namespace's load still does not put every
     * one-item job on the same instance (AVERAGE does). */
    char names[10][32], job[16];
    const char *inst[10];
    for (int k = 0; k < 10; k++) {
        snprintf(names[k], sizeof(names[k]), "10.3.0.%d@-@1", k);
        inst[k] = names[k];
    }
    int count[10] = {0}, high = 0;
    for (int j = 0; j < 100; j++) {
        snprintf(job, sizeof(job), "job%03d", j);
        int owner = -1;
        assert_int_equal(ej_sharding_balanced(inst, 10, job, 1, NULL, &owner, NULL), 0);
        high = ++count[owner] > high ? count[owner] : high;
    }
    assert_true(high < 30);
    for (int k = 0; k < 10; k++)
        assert_true(count[k] > 0);
}

static void test_balanced_out_of_memory(void **state)
{
    (void)state;
    ej_sharding_balanced_job bj[2] = {{"a", hosts3, 3, 5, NULL}, {"b", hosts3, 3, 4, NULL}};
    int owner[5], rc = EJ_ENOMEM;
    for (int k = 0; rc == EJ_ENOMEM && k < 100; k++) {
        fail_countdown = k;
        rc = ej_sharding_balanced_namespace(bj, 2, 1, owner);
        fail_countdown = -1;
    }
    assert_int_equal(rc, 0);
    rc = EJ_ENOMEM;
    for (int k = 0; rc == EJ_ENOMEM && k < 100; k++) {
        fail_countdown = k;
        rc = ej_sharding_balanced_loaded(hosts3, 3, "a", 5, NULL, NULL, owner);
        fail_countdown = -1;
    }
    assert_int_equal(rc, 0);
}

static void test_performance(void **state)
{
    (void)state;
    enum { N = 10, TOTAL = 100000 };
    char **ids = make_ids(N, "10.9.");
    const char *const *inst = (const char *const *)ids;
    int *owner = malloc(TOTAL * sizeof(int));
    const char **prev = malloc(TOTAL * sizeof(char *));
    assert_non_null(owner);
    assert_non_null(prev);
    /* Previous layout: average over the first 9, then one joins. */
    assert_int_equal(ej_sharding_average(inst, N - 1, "job", TOTAL, NULL, owner, NULL), 0);
    for (int i = 0; i < TOTAL; i++)
        prev[i] = ids[owner[i]];
    static const struct {
        const char *name;
        ej_sharding_fn fn;
    } fns[] = {{"average", ej_sharding_average},
               {"odevity", ej_sharding_odevity},
               {"rotate", ej_sharding_rotate},
               {"consistent_hash", ej_sharding_consistent_hash},
               {"sticky", ej_sharding_sticky}};
    for (size_t f = 0; f < 5; f++) {
        double best = 1e9;
        for (int rep = 0; rep < 3; rep++) {
            double t0 = now_ms();
            assert_int_equal(fns[f].fn(inst, N, "job", TOTAL, prev, owner, NULL), 0);
            double t = now_ms() - t0;
            best = t < best ? t : best;
        }
        printf("# %s: %d items over %d instances in %.2f ms\n", fns[f].name, TOTAL, N, best);
        /* Generous for sanitizer builds; an unsanitized build takes a few ms. */
        assert_true(best < 250.0);
    }
    free(prev);
    free(owner);
    free_ids(ids, N);
}

/* ---- threads ---- */

static void *registry_worker(void *arg)
{
    int id = *(int *)arg;
    char name[32];
    snprintf(name, sizeof(name), "thread%d", id % 4);
    for (int i = 0; i < 2000; i++) {
        ej_sharding_strategy s;
        if (ej_sharding_register(name, custom_first, arg) != 0)
            return (void *)1;
        int rc = ej_sharding_find(name, &s, NULL, 0);
        if (rc != 0 && rc != EJ_ENOTFOUND)
            return (void *)1;
        if (ej_sharding_find("STICKY", &s, NULL, 0) != 0)
            return (void *)1;
        if (i % 3 == 0)
            (void)ej_sharding_unregister(name);
    }
    return NULL;
}

static void test_registry_threads(void **state)
{
    (void)state;
    pthread_t t[8];
    int ids[8];
    for (int i = 0; i < 8; i++) {
        ids[i] = i;
        assert_int_equal(pthread_create(&t[i], NULL, registry_worker, &ids[i]), 0);
    }
    for (int i = 0; i < 8; i++) {
        void *ret;
        assert_int_equal(pthread_join(t[i], &ret), 0);
        assert_null(ret);
    }
    for (int i = 0; i < 4; i++) {
        char name[32];
        snprintf(name, sizeof(name), "thread%d", i);
        (void)ej_sharding_unregister(name);
    }
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_average_vectors),
        cmocka_unit_test(test_odevity_vectors),
        cmocka_unit_test(test_rotate_vectors),
        cmocka_unit_test(test_rotate_matches_java_and_min_value),
        cmocka_unit_test(test_builtin_argument_errors),
        cmocka_unit_test(test_find_names),
        cmocka_unit_test(test_register_custom),
        cmocka_unit_test(test_register_out_of_memory),
        cmocka_unit_test(test_run_checks),
        cmocka_unit_test(test_group),
        cmocka_unit_test(test_instances_order),
        cmocka_unit_test(test_consistent_hash_properties),
        cmocka_unit_test(test_consistent_hash_many_instances),
        cmocka_unit_test(test_sticky_without_previous_is_average),
        cmocka_unit_test(test_sticky_vectors),
        cmocka_unit_test(test_sticky_property_join_leave),
        cmocka_unit_test(test_sticky_random_previous_minimal),
        cmocka_unit_test(test_sticky_duplicate_ids_do_not_crash),
        cmocka_unit_test(test_balanced_loaded_properties),
        cmocka_unit_test(test_balanced_namespace_join_leave),
        cmocka_unit_test(test_balanced_namespace_mixed_jobs),
        cmocka_unit_test(test_balanced_without_load_spreads_jobs),
        cmocka_unit_test(test_balanced_out_of_memory),
        cmocka_unit_test(test_performance),
        cmocka_unit_test(test_registry_threads),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
