/* The listener list (common/listeners.h). */
#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "common/listeners.h"
#include "ejob/error.h"

void ej__listeners_fini(ej__listeners *l)
{
    free(l->v);
    l->v = NULL;
    l->n = l->cap = 0;
}

static size_t index_of(const ej__listeners *l, ej__listener_fn fn, void *user)
{
    for (size_t i = 0; i < l->n; i++)
        if (l->v[i].fn == fn && l->v[i].user == user)
            return i;
    return l->n;
}

int ej__listeners_add(ej__listeners *l, ej__listener_fn fn, void *user)
{
    if (index_of(l, fn, user) < l->n)
        return -EEXIST;
    if (l->n == l->cap) {
        size_t cap = l->cap ? l->cap * 2 : 4;
        struct ej__listener *v = realloc(l->v, cap * sizeof *v);
        if (v == NULL)
            return EJ_ENOMEM;
        l->v = v;
        l->cap = cap;
    }
    l->v[l->n++] = (struct ej__listener){fn, user};
    return 0;
}

bool ej__listeners_remove(ej__listeners *l, ej__listener_fn fn, void *user)
{
    size_t i = index_of(l, fn, user);
    if (i == l->n)
        return false;
    memmove(&l->v[i], &l->v[i + 1], (l->n - i - 1) * sizeof l->v[0]);
    l->n--;
    return true;
}

bool ej__listeners_has(const ej__listeners *l, ej__listener_fn fn, void *user)
{
    return index_of(l, fn, user) < l->n;
}

size_t ej__listeners_snapshot(const ej__listeners *l, struct ej__listener **out)
{
    *out = NULL;
    if (l->n == 0)
        return 0;
    *out = malloc(l->n * sizeof **out);
    if (*out == NULL)
        return 0;
    memcpy(*out, l->v, l->n * sizeof **out);
    return l->n;
}
