/* Pure helpers of the registry: path rules, error translation, back-off,
 * name lists, the thread-local error message. */
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "common/util.h"
#include "reg/internal.h"

static _Thread_local char tl_errmsg[1024];

int ej__reg_fail(int err, const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(tl_errmsg, sizeof(tl_errmsg), fmt, ap);
    va_end(ap);
    return err;
}

const char *ej_registry_errmsg(const ej_registry *reg)
{
    (void)reg;
    return tl_errmsg;
}

uint32_t ej__reg_rand(void)
{
    static _Thread_local uint64_t s;
    if (s == 0)
        s = ((uint64_t)ej__mono_ms() << 20) ^ (uint64_t)(uintptr_t)&s ^ 0x9e3779b97f4a7c15ull;
    /* xorshift64* */
    s ^= s >> 12;
    s ^= s << 25;
    s ^= s >> 27;
    return (uint32_t)((s * 0x2545f4914f6cdd1dull) >> 32);
}

/* Decode one UTF-8 sequence at p (n bytes left). Returns its length and the
 * code point, or 0 when malformed. */
static size_t utf8_next(const unsigned char *p, size_t n, uint32_t *cp)
{
    if (p[0] < 0x80) {
        *cp = p[0];
        return 1;
    }
    size_t len;
    uint32_t min;
    if ((p[0] & 0xe0) == 0xc0) {
        len = 2;
        *cp = p[0] & 0x1f;
        min = 0x80;
    } else if ((p[0] & 0xf0) == 0xe0) {
        len = 3;
        *cp = p[0] & 0x0f;
        min = 0x800;
    } else if ((p[0] & 0xf8) == 0xf0) {
        len = 4;
        *cp = p[0] & 0x07;
        min = 0x10000;
    } else {
        return 0;
    }
    if (n < len)
        return 0;
    for (size_t i = 1; i < len; i++) {
        if ((p[i] & 0xc0) != 0x80)
            return 0;
        *cp = (*cp << 6) | (p[i] & 0x3f);
    }
    if (*cp < min || *cp > 0x10ffff)
        return 0;
    return len;
}

int ej__reg_check_path(const char *path, bool sequential, const char **why)
{
    const char *dummy;
    if (!why)
        why = &dummy;
    if (!path) {
        *why = "path is NULL";
        return EJ_EBADPATH;
    }
    size_t len = strlen(path);
    if (len == 0) {
        *why = "path is empty";
        return EJ_EBADPATH;
    }
    if (path[0] != '/') {
        *why = "path must start with '/'";
        return EJ_EBADPATH;
    }
    if (len > EJ_REG_MAX_PATH_LEN) {
        *why = "path is too long";
        return EJ_EBADPATH;
    }
    if (len == 1)
        return 0;
    if (path[len - 1] == '/' && !sequential) {
        *why = "path must not end with '/'";
        return EJ_EBADPATH;
    }
    /* Segments: not empty (except a sequential create's trailing one), not
     * "." or "..". */
    const char *seg = path + 1;
    for (;;) {
        const char *end = strchr(seg, '/');
        size_t slen = end ? (size_t)(end - seg) : strlen(seg);
        bool last = end == NULL;
        if (slen == 0 && !(last && sequential)) {
            *why = "path has an empty segment";
            return EJ_EBADPATH;
        }
        if ((slen == 1 && seg[0] == '.') || (slen == 2 && seg[0] == '.' && seg[1] == '.')) {
            *why = "path has a '.' or '..' segment";
            return EJ_EBADPATH;
        }
        if (last)
            break;
        seg = end + 1;
    }
    /* Characters ZooKeeper's PathUtils refuses. */
    const unsigned char *p = (const unsigned char *)path;
    size_t i = 0;
    while (i < len) {
        uint32_t cp;
        size_t n = utf8_next(p + i, len - i, &cp);
        if (n == 0) {
            *why = "path is not valid UTF-8";
            return EJ_EBADPATH;
        }
        if ((cp > 0 && cp < 0x20) || (cp >= 0x7f && cp <= 0x9f) || (cp >= 0xd800 && cp <= 0xf8ff) ||
            (cp >= 0xfff0 && cp <= 0xffff)) {
            *why = "path has a control or reserved character";
            return EJ_EBADPATH;
        }
        i += n;
    }
    return 0;
}

bool ej__reg_zk_is_connloss(int zrc)
{
    return zrc == ZCONNECTIONLOSS || zrc == ZOPERATIONTIMEOUT || zrc == ZSESSIONMOVED ||
           zrc == ZSESSIONEXPIRED || zrc == ZINVALIDSTATE || zrc == ZCLOSING || zrc == ZTHROTTLEDOP;
}

int ej__reg_from_zk(int zrc)
{
    switch (zrc) {
    case ZOK:
        return 0;
    case ZNONODE:
        return EJ_ENONODE;
    case ZNODEEXISTS:
        return EJ_ENODEEXISTS;
    case ZBADVERSION:
        return EJ_EBADVERSION;
    case ZNOTEMPTY:
        return EJ_ENOTEMPTY;
    case ZNOAUTH:
    case ZINVALIDACL:
        return EJ_ENOAUTH;
    case ZNOCHILDRENFOREPHEMERALS:
        return EJ_ENOCHILDREN;
    case ZAUTHFAILED:
    case ZSESSIONCLOSEDREQUIRESASLAUTH:
        return EJ_EAUTHFAILED;
    case ZSESSIONEXPIRED:
    case ZINVALIDSTATE:
        return EJ_ESESSIONEXPIRED;
    case ZCONNECTIONLOSS:
    case ZOPERATIONTIMEOUT:
    case ZSESSIONMOVED:
    case ZCLOSING:
    case ZTHROTTLEDOP:
        return EJ_ECONNLOSS;
    case ZBADARGUMENTS:
        return EJ_EINVAL;
    case ZRUNTIMEINCONSISTENCY:
        return EJ_EAGAIN;
    case ZNOWATCHER:
        return EJ_ENOTFOUND;
    default:
        return EJ_EZOOKEEPER;
    }
}

int ej__reg_backoff_ms(int base_ms, int max_ms, int retry, uint32_t rnd)
{
    if (retry < 0)
        retry = 0;
    if (retry > 29) /* Curator's MAX_RETRIES_LIMIT keeps 1 << (retry + 1) in range */
        retry = 29;
    uint32_t bound = 1u << (retry + 1);
    uint32_t mult = rnd % bound;
    if (mult < 1)
        mult = 1;
    int64_t ms = (int64_t)base_ms * mult;
    if (ms > max_ms)
        ms = max_ms;
    return (int)ms;
}

static int cmp_asc(const void *a, const void *b)
{
    return strcmp(*(char *const *)a, *(char *const *)b);
}

static int cmp_desc(const void *a, const void *b)
{
    return strcmp(*(char *const *)b, *(char *const *)a);
}

void ej__reg_sort_names(char **names, size_t n, ej_reg_sort sort)
{
    if (n < 2)
        return;
    if (sort == EJ_REG_SORT_ASC)
        qsort(names, n, sizeof(*names), cmp_asc);
    else if (sort == EJ_REG_SORT_DESC)
        qsort(names, n, sizeof(*names), cmp_desc);
}

char **ej__reg_copy_names(char *const *src, size_t n)
{
    char **v = calloc(n + 1, sizeof(*v));
    if (!v)
        return NULL;
    for (size_t i = 0; i < n; i++) {
        v[i] = strdup(src[i]);
        if (!v[i]) {
            ej_registry_free_names(v);
            return NULL;
        }
    }
    return v;
}

void ej_registry_free_names(char **names)
{
    if (!names)
        return;
    for (char **p = names; *p; p++)
        free(*p);
    free(names);
}

void ej__reg_stat_from_zk(struct ej_node_stat *out, const struct Stat *in)
{
    out->czxid = in->czxid;
    out->mzxid = in->mzxid;
    out->ctime = in->ctime;
    out->mtime = in->mtime;
    out->version = in->version;
    out->cversion = in->cversion;
    out->ephemeral_owner = in->ephemeralOwner;
    out->num_children = in->numChildren;
    out->data_length = in->dataLength;
    out->pzxid = in->pzxid;
    out->aversion = in->aversion;
}

ej_reg_fence ej__reg_fence_level(int64_t silence_ms, int64_t timeout_ms, bool up, bool same_session)
{
    if (!same_session)
        return EJ_REG_FENCE_CANCEL;
    if (silence_ms * 1000 >= timeout_ms * EJ_REG_FENCE_CANCEL_PERMILLE)
        return EJ_REG_FENCE_CANCEL;
    if (silence_ms * 1000 >= timeout_ms * EJ_REG_FENCE_HOLD_PERMILLE || !up)
        return EJ_REG_FENCE_HOLD;
    return EJ_REG_FENCE_OPEN;
}
