/*
 * Sharding item parameters, "0=a,1=b", parsed the way ElasticJob's
 * ShardingItemParameters does (Java String.split, String.trim and
 * Integer.parseInt semantics), so a string Java accepts means the same here
 * and a string Java rejects is rejected with Java's message.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "config/internal.h"
#include "ejob/error.h"

/* A piece of the input: [p, p+n). */
struct span {
    const char *p;
    size_t n;
};

/*
 * Java's s.split(String.valueOf(sep)) with limit 0: when sep does not occur
 * the result is the whole string; otherwise every piece, with trailing empty
 * pieces removed. Returns the number of pieces (written to *out, which the
 * caller frees), or -1 when out of memory.
 */
static long java_split(const char *s, size_t n, char sep, struct span **out)
{
    size_t pieces = 1;
    for (size_t i = 0; i < n; i++)
        pieces += s[i] == sep;
    struct span *v = malloc(pieces * sizeof(*v));
    if (v == NULL)
        return -1;
    size_t k = 0, start = 0;
    for (size_t i = 0; i <= n; i++) {
        if (i == n || s[i] == sep) {
            v[k].p = s + start;
            v[k].n = i - start;
            k++;
            start = i + 1;
        }
    }
    if (pieces > 1) {
        while (k > 0 && v[k - 1].n == 0)
            k--;
    }
    *out = v;
    return (long)k;
}

/* Java's String.trim(): drop chars <= ' ' at both ends. */
static struct span java_trim(struct span s)
{
    while (s.n > 0 && (unsigned char)s.p[0] <= ' ') {
        s.p++;
        s.n--;
    }
    while (s.n > 0 && (unsigned char)s.p[s.n - 1] <= ' ')
        s.n--;
    return s;
}

/* Java's Integer.parseInt for ASCII digits: optional sign, at least one
 * digit, within int range. */
static bool java_parse_int(struct span s, int *out)
{
    size_t i = 0;
    bool neg = false;
    if (s.n > 0 && (s.p[0] == '-' || s.p[0] == '+')) {
        neg = s.p[0] == '-';
        i = 1;
    }
    if (i == s.n)
        return false;
    long long v = 0;
    for (; i < s.n; i++) {
        if (s.p[i] < '0' || s.p[i] > '9')
            return false;
        v = v * 10 + (s.p[i] - '0');
        if (v > 2147483648LL)
            return false;
    }
    if (neg)
        v = -v;
    if (v > 2147483647LL)
        return false;
    *out = (int)v;
    return true;
}

struct entry_seq {
    struct ej_sharding_param param;
    size_t seq;
};

static int cmp_entry(const void *a, const void *b)
{
    const struct entry_seq *x = a, *y = b;
    if (x->param.item != y->param.item)
        return x->param.item < y->param.item ? -1 : 1;
    return x->seq < y->seq ? -1 : (x->seq > y->seq);
}

static void set_err(char *err, size_t errlen, const char *what, struct span s, const char *after)
{
    if (err == NULL || errlen == 0)
        return;
    /* Cap what is echoed so a huge input gives a readable message. */
    int shown = s.n > 200 ? 200 : (int)s.n;
    snprintf(err, errlen, "%s'%.*s%s'%s", what, shown, s.p, s.n > 200 ? "..." : "", after);
}

int ej_sharding_params_parse(const char *s, struct ej_sharding_params *out, char *err,
                             size_t errlen)
{
    if (out == NULL)
        return EJ_EINVAL;
    out->count = 0;
    out->entries = NULL;
    if (err != NULL && errlen > 0)
        err[0] = '\0';
    if (s == NULL || s[0] == '\0')
        return 0;

    int rc = 0;
    struct span whole = {s, strlen(s)};
    struct span *pieces = NULL, *pair = NULL;
    long npieces = java_split(s, whole.n, ',', &pieces);
    if (npieces < 0)
        return EJ_ENOMEM;
    struct entry_seq *tmp = calloc(npieces > 0 ? (size_t)npieces : 1, sizeof(*tmp));
    if (tmp == NULL) {
        rc = EJ_ENOMEM;
        goto out_free_pieces;
    }
    size_t ntmp = 0;
    for (long i = 0; i < npieces; i++) {
        struct span piece = java_trim(pieces[i]);
        long nparts = java_split(piece.p, piece.n, '=', &pair);
        if (nparts < 0) {
            rc = EJ_ENOMEM;
            goto out_free_tmp;
        }
        if (nparts != 2) {
            set_err(err, errlen, "Sharding item parameters ", whole,
                    " format error, should be int=xx,int=xx");
            rc = EJ_ECONFIG;
            goto out_free_tmp;
        }
        int item;
        if (!java_parse_int(java_trim(pair[0]), &item)) {
            set_err(err, errlen, "Sharding item parameters key ", pair[0], " is not an integer.");
            rc = EJ_ECONFIG;
            goto out_free_tmp;
        }
        struct span value = java_trim(pair[1]);
        tmp[ntmp].param.item = item;
        tmp[ntmp].param.value = strndup(value.p, value.n);
        tmp[ntmp].seq = ntmp;
        if (tmp[ntmp].param.value == NULL) {
            rc = EJ_ENOMEM;
            goto out_free_tmp;
        }
        ntmp++;
        free(pair);
        pair = NULL;
    }

    qsort(tmp, ntmp, sizeof(*tmp), cmp_entry);
    out->entries = calloc(ntmp > 0 ? ntmp : 1, sizeof(*out->entries));
    if (out->entries == NULL) {
        rc = EJ_ENOMEM;
        goto out_free_tmp;
    }
    /* Equal items are adjacent, in input order: keep the last of each run. */
    for (size_t i = 0; i < ntmp; i++) {
        if (i + 1 < ntmp && tmp[i + 1].param.item == tmp[i].param.item) {
            free(tmp[i].param.value);
            continue;
        }
        out->entries[out->count++] = tmp[i].param;
    }
    ntmp = 0;

out_free_tmp:
    for (size_t i = 0; i < ntmp; i++)
        free(tmp[i].param.value);
    free(tmp);
    free(pair);
out_free_pieces:
    free(pieces);
    return rc;
}

const char *ej_sharding_params_get(const struct ej_sharding_params *p, int item)
{
    if (p == NULL || p->entries == NULL)
        return NULL;
    size_t lo = 0, hi = p->count;
    while (lo < hi) {
        size_t mid = lo + (hi - lo) / 2;
        int v = p->entries[mid].item;
        if (v == item)
            return p->entries[mid].value;
        if (v < item)
            lo = mid + 1;
        else
            hi = mid;
    }
    return NULL;
}

void ej_sharding_params_fini(struct ej_sharding_params *p)
{
    if (p == NULL)
        return;
    for (size_t i = 0; i < p->count; i++)
        free(p->entries[i].value);
    free(p->entries);
    p->count = 0;
    p->entries = NULL;
}
