/* Instance ids, item names and Curator latch names: pure functions. The
 * paths themselves come from the console library (ej_layout_path). */
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/random.h>
#include <time.h>
#include <unistd.h>

#include "common/util.h"
#include "ejob/error.h"
#include "ejob/layout.h"
#include "layout/internal.h"

int ej__layout_make_instance_id(const char *ip, long pid, char *out, size_t len)
{
    if (ip == NULL || out == NULL || ip[0] == '\0' || strchr(ip, '/') != NULL ||
        strstr(ip, EJ_LAYOUT_ID_SEP) != NULL)
        return EJ_EINVAL;
    int n = snprintf(out, len, "%s" EJ_LAYOUT_ID_SEP "%ld", ip, pid);
    if (n < 0 || (size_t)n >= len)
        return EJ_EINVAL;
    return 0;
}

int ej__layout_parse_item(const char *name, int *item)
{
    if (name == NULL || item == NULL || name[0] == '\0')
        return EJ_EINVAL;
    if (name[0] == '0' && name[1] != '\0')
        return EJ_EINVAL;
    long long v = 0;
    for (const char *p = name; *p; p++) {
        if (*p < '0' || *p > '9')
            return EJ_EINVAL;
        v = v * 10 + (*p - '0');
        if (v > INT_MAX)
            return EJ_EINVAL;
    }
    *item = (int)v;
    return 0;
}

int ej__layout_latch_node_prefix(const char *uuid, char *out, size_t len)
{
    if (uuid == NULL || out == NULL || strlen(uuid) != 36)
        return EJ_EINVAL;
    int n = snprintf(out, len, "_c_%s-latch-", uuid);
    if (n < 0 || (size_t)n >= len)
        return EJ_EINVAL;
    return 0;
}

const char *ej__layout_latch_sort_key(const char *name)
{
    static const char lock_name[] = "latch-";
    const char *last = NULL;
    for (const char *p = name; (p = strstr(p, lock_name)) != NULL; p++)
        last = p;
    return last ? last + sizeof lock_name - 1 : name;
}

int ej__layout_latch_name_cmp(const char *a, const char *b)
{
    int c = strcmp(ej__layout_latch_sort_key(a), ej__layout_latch_sort_key(b));
    return c != 0 ? c : strcmp(a, b);
}

static int cmp_latch(const void *x, const void *y)
{
    return ej__layout_latch_name_cmp(*(char *const *)x, *(char *const *)y);
}

void ej__layout_latch_sort(char **names, size_t n)
{
    if (names != NULL && n > 1)
        qsort(names, n, sizeof *names, cmp_latch);
}

long ej__layout_latch_find(char *const *names, size_t n, const char *uuid)
{
    if (names == NULL || uuid == NULL)
        return -1;
    char prefix[64];
    int k = snprintf(prefix, sizeof prefix, "_c_%s-", uuid);
    if (k < 0 || (size_t)k >= sizeof prefix)
        return -1;
    for (size_t i = 0; i < n; i++)
        if (names[i] != NULL && strncmp(names[i], prefix, (size_t)k) == 0)
            return (long)i;
    return -1;
}

void ej__layout_uuid4(char out[37])
{
    unsigned char b[16];
    size_t got = 0;
    while (got < sizeof b) {
        ssize_t r = getrandom(b + got, sizeof b - got, 0);
        if (r > 0) {
            got += (size_t)r;
            continue;
        }
        if (r < 0 && errno == EINTR)
            continue;
        /* No entropy source: time and pid are unique enough for a latch
         * node name, which only needs to differ between contenders. */
        uint64_t seed = (uint64_t)ej__mono_ms() ^ ((uint64_t)getpid() << 32) ^
                        (uint64_t)(uintptr_t)&got ^ (uint64_t)ej__now_ms();
        for (size_t i = got; i < sizeof b; i++) {
            seed = seed * 6364136223846793005ull + 1442695040888963407ull;
            b[i] = (unsigned char)(seed >> 56);
        }
        got = sizeof b;
    }
    b[6] = (unsigned char)((b[6] & 0x0f) | 0x40);
    b[8] = (unsigned char)((b[8] & 0x3f) | 0x80);
    static const char hex[] = "0123456789abcdef";
    size_t o = 0;
    for (size_t i = 0; i < 16; i++) {
        if (i == 4 || i == 6 || i == 8 || i == 10)
            out[o++] = '-';
        out[o++] = hex[b[i] >> 4];
        out[o++] = hex[b[i] & 15];
    }
    out[o] = '\0';
}

static int cmp_item_str_desc(const void *x, const void *y)
{
    char a[16], b[16];
    snprintf(a, sizeof a, "%d", *(const int *)x);
    snprintf(b, sizeof b, "%d", *(const int *)y);
    return -strcmp(a, b);
}

void ej__layout_items_sort_desc(int *items, size_t n)
{
    if (items != NULL && n > 1)
        qsort(items, n, sizeof *items, cmp_item_str_desc);
}
