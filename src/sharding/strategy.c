/* The ElasticJob strategies (average, odevity, rotate) and the helpers
 * around every strategy: argument checks, grouping, instance order. */
#include <limits.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "common/util.h"
#include "ejob/error.h"
#include "ejob/sharding.h"
#include "sharding/internal.h"

int ej__sharding_check_args(const char *const *instances, size_t n_instances, const char *job_name,
                            int total_count, const int *owner_out)
{
    if (job_name == NULL || total_count < 0 || n_instances > INT_MAX)
        return EJ_EINVAL;
    if (n_instances > 0 && instances == NULL)
        return EJ_EINVAL;
    if (total_count > 0 && owner_out == NULL)
        return EJ_EINVAL;
    return 0;
}

void ej__sharding_average_fill(size_t n, int total_count, size_t offset, int reverse,
                               int *owner_out)
{
    size_t total = (size_t)total_count;
    size_t per = total / n;
    size_t rem = total % n;
    size_t item = 0;
    for (size_t k = 0; k < n; k++) {
        int inst = (int)(reverse ? n - 1 - k : (k + offset) % n);
        for (size_t j = 0; j < per; j++)
            owner_out[item++] = inst;
    }
    /* The remainder goes one item each to the first instances of the list,
     * after the evenly split block (ElasticJob: item per*n+k to instance k). */
    for (size_t k = 0; k < rem; k++)
        owner_out[item++] = (int)(reverse ? n - 1 - k : (k + offset) % n);
}

static int fill_unassigned(int total_count, int *owner_out)
{
    for (int i = 0; i < total_count; i++)
        owner_out[i] = -1;
    return 0;
}

int ej_sharding_average(const char *const *instances, size_t n_instances, const char *job_name,
                        int total_count, const char *const *previous_owner, int *owner_out,
                        void *user)
{
    (void)previous_owner;
    (void)user;
    int rc = ej__sharding_check_args(instances, n_instances, job_name, total_count, owner_out);
    if (rc != 0)
        return rc;
    if (n_instances == 0)
        return fill_unassigned(total_count, owner_out);
    ej__sharding_average_fill(n_instances, total_count, 0, 0, owner_out);
    return 0;
}

int ej_sharding_odevity(const char *const *instances, size_t n_instances, const char *job_name,
                        int total_count, const char *const *previous_owner, int *owner_out,
                        void *user)
{
    (void)previous_owner;
    (void)user;
    int rc = ej__sharding_check_args(instances, n_instances, job_name, total_count, owner_out);
    if (rc != 0)
        return rc;
    if (n_instances == 0)
        return fill_unassigned(total_count, owner_out);
    /* Java: `0 == hash % 2` reverses; a negative even hash is even too. */
    int32_t h = ej__java_string_hash(job_name);
    ej__sharding_average_fill(n_instances, total_count, 0, h % 2 == 0, owner_out);
    return 0;
}

int ej_sharding_rotate(const char *const *instances, size_t n_instances, const char *job_name,
                       int total_count, const char *const *previous_owner, int *owner_out,
                       void *user)
{
    (void)previous_owner;
    (void)user;
    int rc = ej__sharding_check_args(instances, n_instances, job_name, total_count, owner_out);
    if (rc != 0)
        return rc;
    if (n_instances == 0)
        return fill_unassigned(total_count, owner_out);
    int32_t h = ej__java_string_hash(job_name);
    /* Java computes Math.abs(h) % n. Math.abs(Integer.MIN_VALUE) stays
     * negative and Java then indexes the list with a negative number and
     * throws; ejob rotates by 0 instead, which is also what Java computes
     * whenever n is a power of two. Every other hash gives Java's offset. */
    size_t offset = 0;
    if (h != INT32_MIN)
        offset = (size_t)(h < 0 ? -h : h) % n_instances;
    ej__sharding_average_fill(n_instances, total_count, offset, 0, owner_out);
    return 0;
}

static void set_err(char *err, size_t err_len, const char *fmt, ...) EJ_PRINTF(3, 4);
static void set_err(char *err, size_t err_len, const char *fmt, ...)
{
    if (err == NULL || err_len == 0)
        return;
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(err, err_len, fmt, ap);
    va_end(ap);
}

/* Duplicate ids would make two indexes name one instance. Sorting copies
 * of the pointers finds them in O(n log n). */
static int cmp_str_ptr(const void *a, const void *b)
{
    return strcmp(*(const char *const *)a, *(const char *const *)b);
}

static int check_instances(const char *const *instances, size_t n, char *err, size_t err_len)
{
    for (size_t i = 0; i < n; i++) {
        if (instances[i] == NULL) {
            set_err(err, err_len, "instance %zu is NULL", i);
            return EJ_EINVAL;
        }
    }
    if (n < 2)
        return 0;
    const char **sorted = malloc(n * sizeof(*sorted));
    if (sorted == NULL) {
        set_err(err, err_len, "out of memory checking %zu instances", n);
        return EJ_ENOMEM;
    }
    memcpy(sorted, instances, n * sizeof(*sorted));
    qsort(sorted, n, sizeof(*sorted), cmp_str_ptr);
    int rc = 0;
    for (size_t i = 1; i < n; i++) {
        if (strcmp(sorted[i - 1], sorted[i]) == 0) {
            set_err(err, err_len, "instance \"%s\" is listed twice", sorted[i]);
            rc = EJ_EINVAL;
            break;
        }
    }
    free(sorted);
    return rc;
}

int ej_sharding_run(const ej_sharding_strategy *s, const char *const *instances, size_t n_instances,
                    const char *job_name, int total_count, const char *const *previous_owner,
                    int *owner_out, char *err, size_t err_len)
{
    if (s == NULL || s->fn == NULL) {
        set_err(err, err_len, "no sharding strategy given");
        return EJ_EINVAL;
    }
    if (job_name == NULL) {
        set_err(err, err_len, "job name is NULL");
        return EJ_EINVAL;
    }
    if (total_count < 0) {
        set_err(err, err_len, "job \"%s\": sharding total count %d is negative", job_name,
                total_count);
        return EJ_EINVAL;
    }
    if (n_instances > INT_MAX || (n_instances > 0 && instances == NULL) ||
        (total_count > 0 && owner_out == NULL)) {
        set_err(err, err_len, "job \"%s\": NULL instance or owner array", job_name);
        return EJ_EINVAL;
    }
    int rc = check_instances(instances, n_instances, err, err_len);
    if (rc != 0)
        return rc;
    fill_unassigned(total_count, owner_out);
    rc = s->fn(instances, n_instances, job_name, total_count, previous_owner, owner_out, s->user);
    if (rc != 0) {
        set_err(err, err_len, "sharding strategy \"%s\" failed for job \"%s\": %s (%s)", s->name,
                job_name, ej_strerror(rc), ej_err_name(rc));
        return EJ_ESHARDING;
    }
    for (int i = 0; i < total_count; i++) {
        if (owner_out[i] < -1 || owner_out[i] >= (int)n_instances) {
            set_err(err, err_len,
                    "sharding strategy \"%s\" gave item %d of job \"%s\" to instance index %d, "
                    "but there are %zu instances",
                    s->name, i, job_name, owner_out[i], n_instances);
            return EJ_ESHARDING;
        }
    }
    return 0;
}

int ej_sharding_group(const int *owner, int total_count, size_t n_instances, size_t *offsets,
                      int *items)
{
    if (total_count < 0 || offsets == NULL || (total_count > 0 && (owner == NULL || items == NULL)))
        return EJ_EINVAL;
    for (size_t k = 0; k <= n_instances; k++)
        offsets[k] = 0;
    /* Counting sort: count per owner into offsets[k+1], prefix-sum, place. */
    for (int i = 0; i < total_count; i++) {
        if (owner[i] < -1 || (owner[i] >= 0 && (size_t)owner[i] >= n_instances))
            return EJ_EINVAL;
        if (owner[i] >= 0)
            offsets[owner[i] + 1]++;
    }
    for (size_t k = 0; k < n_instances; k++)
        offsets[k + 1] += offsets[k];
    /* offsets[k] doubles as the next free slot of instance k while placing,
     * and ends up as the end of k's range, i.e. the start of k+1's. */
    for (int i = 0; i < total_count; i++)
        if (owner[i] >= 0)
            items[offsets[owner[i]]++] = i;
    for (size_t k = n_instances; k > 0; k--)
        offsets[k] = offsets[k - 1];
    offsets[0] = 0;
    return 0;
}

/* The next code point of a UTF-8 string, as a key that orders like Java's
 * UTF-16 comparison: code points below U+D800 first, then the supplementary
 * planes (surrogate pairs, D800-DBFF), then U+E000..U+FFFF. Invalid bytes
 * count as U+FFFD, like ej__java_string_hash. */
static uint32_t next_utf16_key(const unsigned char **p)
{
    const unsigned char *s = *p;
    uint32_t cp = 0xFFFD;
    size_t len = 1;
    if (s[0] < 0x80) {
        cp = s[0];
    } else if ((s[0] & 0xE0) == 0xC0 && (s[1] & 0xC0) == 0x80) {
        cp = ((uint32_t)(s[0] & 0x1F) << 6) | (s[1] & 0x3F);
        len = cp >= 0x80 ? 2 : 1;
        if (cp < 0x80)
            cp = 0xFFFD;
    } else if ((s[0] & 0xF0) == 0xE0 && (s[1] & 0xC0) == 0x80 && (s[2] & 0xC0) == 0x80) {
        cp = ((uint32_t)(s[0] & 0x0F) << 12) | ((uint32_t)(s[1] & 0x3F) << 6) | (s[2] & 0x3F);
        len = 3;
        if (cp < 0x800 || (cp >= 0xD800 && cp <= 0xDFFF)) {
            cp = 0xFFFD;
            len = 1;
        }
    } else if ((s[0] & 0xF8) == 0xF0 && (s[1] & 0xC0) == 0x80 && (s[2] & 0xC0) == 0x80 &&
               (s[3] & 0xC0) == 0x80) {
        cp = ((uint32_t)(s[0] & 0x07) << 18) | ((uint32_t)(s[1] & 0x3F) << 12) |
             ((uint32_t)(s[2] & 0x3F) << 6) | (s[3] & 0x3F);
        len = 4;
        if (cp < 0x10000 || cp > 0x10FFFF) {
            cp = 0xFFFD;
            len = 1;
        }
    }
    *p = s + len;
    if (cp < 0xD800)
        return cp;
    if (cp >= 0x10000)
        return 0x200000 + cp;
    return 0x400000 + cp;
}

static int java_compare(const char *a, const char *b)
{
    const unsigned char *pa = (const unsigned char *)a, *pb = (const unsigned char *)b;
    for (;;) {
        if (*pa == 0 || *pb == 0)
            return (*pa != 0) - (*pb != 0);
        if (*pa < 0x80 && *pb < 0x80) {
            if (*pa != *pb)
                return *pa < *pb ? -1 : 1;
            pa++;
            pb++;
            continue;
        }
        uint32_t ka = next_utf16_key(&pa), kb = next_utf16_key(&pb);
        if (ka != kb)
            return ka < kb ? -1 : 1;
    }
}

static int reverse_java_order(const void *a, const void *b)
{
    const char *x = *(char *const *)a, *y = *(char *const *)b;
    if (x == NULL || y == NULL)
        return (x == NULL) - (y == NULL);
    return java_compare(y, x);
}

void ej_sharding_instances_order(char **ids, size_t n)
{
    if (ids == NULL || n < 2)
        return;
    qsort(ids, n, sizeof(*ids), reverse_java_order);
}

uint64_t ej__sharding_fnv_more(uint64_t h, const void *data, size_t len)
{
    const unsigned char *p = data;
    for (size_t i = 0; i < len; i++) {
        h ^= p[i];
        h *= UINT64_C(0x100000001b3);
    }
    return h;
}

uint64_t ej__sharding_mix64(uint64_t h)
{
    h ^= h >> 33;
    h *= UINT64_C(0xff51afd7ed558ccd);
    h ^= h >> 33;
    h *= UINT64_C(0xc4ceb9fe1a85ec53);
    h ^= h >> 33;
    return h;
}
