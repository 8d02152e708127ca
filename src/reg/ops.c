/* Synchronous operations, the retry policy, transactions and one-shot
 * watches. */
#include <errno.h>
#include <inttypes.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "common/util.h"
#include "ejob/log.h"
#include "reg/internal.h"

/* ------------------------------------------------------------------------ */
/* The retry loop                                                            */

/* Wait up to ms for the connection (returns early once connected). */
static void wait_connected_for(ej_registry *reg, int ms)
{
    int64_t deadline = ej__mono_ms() + ms;
    struct timespec ts = ej__mono_timespec(deadline);
    ej__mutex_lock(&reg->mu);
    while (!reg->closing) {
        int err = ej__mutex_timedwait(&reg->mu, &reg->changed, &ts);
        if (reg->connected || err == ETIMEDOUT)
            break;
    }
    ej__mutex_unlock(&reg->mu);
}

/* Run fn until it succeeds, fails for a reason other than a lost
 * connection, or the retries are used up. An attempt on a handle that is not
 * connected is not sent and may always be tried again; one that was sent and
 * lost its answer is repeated only when `retry`. *sent_lost (may be NULL)
 * becomes true when an attempt was sent and its answer lost. Returns a Z
 * code. */
int ej__reg_run_zk(ej_registry *reg, bool retry, ej__reg_attempt_fn fn, void *arg, bool *sent_lost)
{
    int zrc = ZCONNECTIONLOSS;
    for (int attempt = 0;; attempt++) {
        bool sent = false;
        pthread_rwlock_rdlock(&reg->zh_lock);
        zhandle_t *zh = reg->zh;
        if (zh && zoo_state(zh) == ZOO_CONNECTED_STATE) {
            ej__reg_count(reg);
            zrc = fn(reg, zh, arg);
            sent = true;
        } else {
            zrc = ZCONNECTIONLOSS;
        }
        pthread_rwlock_unlock(&reg->zh_lock);
        if (!ej__reg_zk_is_connloss(zrc))
            return zrc;
        if (sent) {
            if (sent_lost)
                *sent_lost = true;
            if (!retry)
                return zrc;
        }
        if (attempt >= reg->max_retries)
            return zrc;
        ej__mutex_lock(&reg->mu);
        bool closing = reg->closing;
        ej__mutex_unlock(&reg->mu);
        if (closing)
            return ZCLOSING;
        int ms = ej__reg_backoff_ms(reg->base_sleep_ms, reg->max_sleep_ms, attempt, ej__reg_rand());
        wait_connected_for(reg, ms);
    }
}

/* The message for a failed operation. */
int ej__reg_op_fail(ej_registry *reg, const char *op, const char *path, int zrc)
{
    int err = ej__reg_from_zk(zrc);
    if (err == EJ_ECONNLOSS || err == EJ_ESESSIONEXPIRED)
        return ej__reg_fail(err, "%s %s: %s (ZooKeeper at %s; %d retries)", op, path, zerror(zrc),
                            reg->servers, reg->max_retries);
    return ej__reg_fail(err, "%s %s: %s", op, path, zerror(zrc));
}

/* Validate and resolve a path. */
int ej__reg_resolve(ej_registry *reg, const char *op, const char *path, bool sequential, char **full)
{
    const char *why = NULL;
    *full = NULL;
    if (!reg)
        return ej__reg_fail(EJ_EINVAL, "%s: registry is NULL", op);
    if (ej__reg_check_path(path, sequential, &why) != 0)
        return ej__reg_fail(EJ_EBADPATH, "%s \"%s\": %s", op, path ? path : "(null)", why);
    *full = ej__reg_full_path(reg, path);
    if (!*full)
        return ej__reg_fail(-ENOMEM, "%s %s: out of memory", op, path);
    return 0;
}

static int check_size(const char *op, const char *path, size_t len)
{
    if (len > EJ_REG_MAX_DATA_LEN)
        return ej__reg_fail(EJ_ETOOBIG, "%s %s: %zu bytes of data exceed the limit of %d", op, path,
                            len, EJ_REG_MAX_DATA_LEN);
    return 0;
}

/* ------------------------------------------------------------------------ */
/* One-shot watches                                                          */

struct ej__reg_watch {
    struct ej__reg_watch *prev, *next;
    ej_registry *reg;
    ej_reg_watch_fn fn;
    void *user;
    char *path;   /* namespace-relative */
    uint64_t gen; /* handle generation it is registered on; UINT64_MAX while pending */
    bool listed;  /* in reg->watches; whoever unlinks delivers the one callback */
    int refs;     /* the list and the registering call */
};

struct fire_item {
    struct ej__reg_item it;
    struct ej__reg_watch *w;
    int type;
};

static void watch_unref_locked(struct ej__reg_watch *w)
{
    if (--w->refs == 0) {
        free(w->path);
        free(w);
    }
}

static void watch_unlink_locked(ej_registry *reg, struct ej__reg_watch *w)
{
    if (w->prev)
        w->prev->next = w->next;
    else
        reg->watches = w->next;
    if (w->next)
        w->next->prev = w->prev;
    w->prev = w->next = NULL;
    w->listed = false;
}

static void on_fire_item(ej_registry *reg, struct ej__reg_item *item)
{
    struct fire_item *f = (struct fire_item *)item;
    struct ej__reg_watch *w = f->w;
    int type = f->type;
    free(f);
    ej__mutex_lock(&reg->mu);
    bool live = w->listed;
    if (live)
        watch_unlink_locked(reg, w);
    ej__mutex_unlock(&reg->mu);
    if (!live)
        return;
    ej_reg_watch_event ev = EJ_REG_WATCH_CHANGED;
    if (type == ZOO_CREATED_EVENT)
        ev = EJ_REG_WATCH_CREATED;
    else if (type == ZOO_DELETED_EVENT)
        ev = EJ_REG_WATCH_DELETED;
    else if (type == ZOO_CHILD_EVENT)
        ev = EJ_REG_WATCH_CHILDREN;
    else if (type == ZOO_NOTWATCHING_EVENT)
        ev = EJ_REG_WATCH_CANCELLED;
    w->fn(reg, ev, w->path, w->user);
    ej__mutex_lock(&reg->mu);
    watch_unref_locked(w);
    ej__mutex_unlock(&reg->mu);
}

/* ZooKeeper's completion thread: copy and enqueue. Session events reach
 * every watcher in the C client; only node events count here. */
static void oneshot_watcher(zhandle_t *zh, int type, int state, const char *path, void *ctx)
{
    (void)zh;
    (void)state;
    (void)path;
    if (type == ZOO_SESSION_EVENT)
        return;
    struct ej__reg_watch *w = ctx;
    struct fire_item *f = malloc(sizeof(*f));
    if (!f) {
        EJ_LOG(EJ_LOG_ERROR, "reg", -ENOMEM, "watch event on %s dropped: out of memory", w->path);
        return;
    }
    f->it.run = on_fire_item;
    f->w = w;
    f->type = type;
    ej__reg_enqueue(w->reg, &f->it, true);
}

void ej__reg_cancel_watches(ej_registry *reg, uint64_t gen)
{
    struct ej__reg_watch *todo = NULL;
    ej__mutex_lock(&reg->mu);
    struct ej__reg_watch *w = reg->watches;
    while (w) {
        struct ej__reg_watch *next = w->next;
        if (w->gen != UINT64_MAX && w->gen <= gen) {
            watch_unlink_locked(reg, w);
            w->next = todo;
            todo = w;
        } else if (gen == UINT64_MAX && w->gen == UINT64_MAX) {
            /* Shutdown: a registering call still running cannot succeed. */
            watch_unlink_locked(reg, w);
            w->next = todo;
            todo = w;
        }
        w = next;
    }
    ej__mutex_unlock(&reg->mu);
    while (todo) {
        struct ej__reg_watch *next = todo->next;
        todo->fn(reg, EJ_REG_WATCH_CANCELLED, todo->path, todo->user);
        ej__mutex_lock(&reg->mu);
        watch_unref_locked(todo);
        ej__mutex_unlock(&reg->mu);
        todo = next;
    }
}

static struct ej__reg_watch *watch_new(ej_registry *reg, ej_reg_watch_fn fn, void *user,
                                       const char *path)
{
    struct ej__reg_watch *w = calloc(1, sizeof(*w));
    if (!w)
        return NULL;
    w->path = strdup(path);
    if (!w->path) {
        free(w);
        return NULL;
    }
    w->reg = reg;
    w->fn = fn;
    w->user = user;
    w->gen = UINT64_MAX;
    w->refs = 2;
    ej__mutex_lock(&reg->mu);
    w->listed = true;
    w->next = reg->watches;
    if (reg->watches)
        reg->watches->prev = w;
    reg->watches = w;
    ej__mutex_unlock(&reg->mu);
    return w;
}

/* Called inside an attempt (read lock held) once the watch is set. */
static void watch_set(zhandle_t *zh, struct ej__reg_watch *w)
{
    const struct ej__reg_session *s = zoo_get_context(zh);
    ej__mutex_lock(&w->reg->mu);
    w->gen = s->gen;
    ej__mutex_unlock(&w->reg->mu);
}

/* The registering call is done: it drops its reference, and the
 * registration's too when the watch was not set. */
static void watch_done(struct ej__reg_watch *w, bool set)
{
    if (!w)
        return;
    ej_registry *reg = w->reg;
    ej__mutex_lock(&reg->mu);
    int drop = 1;
    if (!set && w->listed) {
        watch_unlink_locked(reg, w);
        drop = 2;
    }
    w->refs -= drop - 1;
    watch_unref_locked(w);
    ej__mutex_unlock(&reg->mu);
}

/* ------------------------------------------------------------------------ */
/* get                                                                       */

struct get_ctx {
    const char *full;
    struct ej__reg_watch *w;
    pthread_mutex_t mu;
    pthread_cond_t cv;
    bool done;
    int rc;
    char *data;
    size_t len;
    struct Stat st;
};

/* Completion thread: copy the answer and wake the caller. */
static void get_done(int rc, const char *value, int value_len, const struct Stat *stat,
                     const void *data)
{
    struct get_ctx *g = (struct get_ctx *)data;
    char *copy = NULL;
    size_t len = 0;
    if (rc == ZOK) {
        len = value && value_len > 0 ? (size_t)value_len : 0;
        copy = malloc(len + 1);
        if (copy) {
            if (len)
                memcpy(copy, value, len);
            copy[len] = '\0';
        } else {
            rc = ZSYSTEMERROR;
        }
        if (stat)
            g->st = *stat;
    }
    pthread_mutex_lock(&g->mu);
    g->rc = rc;
    g->data = copy;
    g->len = len;
    g->done = true;
    pthread_cond_signal(&g->cv);
    pthread_mutex_unlock(&g->mu);
}

/* Asynchronous get waited for: one round trip whatever the data size. */
static int get_attempt(ej_registry *reg, zhandle_t *zh, void *arg)
{
    (void)reg;
    struct get_ctx *g = arg;
    g->done = false;
    g->data = NULL;
    int rc = zoo_awget(zh, g->full, g->w ? oneshot_watcher : NULL, g->w, get_done, g);
    if (rc != ZOK)
        return rc;
    pthread_mutex_lock(&g->mu);
    while (!g->done)
        pthread_cond_wait(&g->cv, &g->mu);
    pthread_mutex_unlock(&g->mu);
    if (g->rc == ZOK && g->w)
        watch_set(zh, g->w);
    return g->rc;
}

static int do_get(ej_registry *reg, const char *path, ej_reg_watch_fn fn, void *user, char **data,
                  size_t *len, struct ej_node_stat *stat)
{
    const char *op = fn ? "get_watch" : "get";
    if (data)
        *data = NULL;
    if (len)
        *len = 0;
    struct get_ctx g = {0};
    char *full;
    int rc = ej__reg_resolve(reg, op, path, false, &full);
    if (rc)
        return rc;
    if (fn && !(g.w = watch_new(reg, fn, user, path))) {
        free(full);
        return ej__reg_fail(-ENOMEM, "%s %s: out of memory", op, path);
    }
    g.full = full;
    pthread_mutex_init(&g.mu, NULL);
    pthread_cond_init(&g.cv, NULL);
    int zrc = ej__reg_run_zk(reg, true, get_attempt, &g, NULL);
    watch_done(g.w, zrc == ZOK);
    pthread_mutex_destroy(&g.mu);
    pthread_cond_destroy(&g.cv);
    free(full);
    if (zrc == ZSYSTEMERROR && !g.data)
        return ej__reg_fail(-ENOMEM, "%s %s: out of memory", op, path);
    if (zrc != ZOK)
        return ej__reg_op_fail(reg, op, path, zrc);
    if (stat)
        ej__reg_stat_from_zk(stat, &g.st);
    if (len)
        *len = g.len;
    if (data)
        *data = g.data;
    else
        free(g.data);
    return 0;
}

int ej_registry_get(ej_registry *reg, const char *path, char **data, size_t *len,
                    struct ej_node_stat *stat)
{
    return do_get(reg, path, NULL, NULL, data, len, stat);
}

int ej_registry_get_watch(ej_registry *reg, const char *path, ej_reg_watch_fn fn, void *user,
                          char **data, size_t *len, struct ej_node_stat *stat)
{
    if (!fn)
        return ej__reg_fail(EJ_EINVAL, "get_watch %s: callback is NULL", path ? path : "(null)");
    return do_get(reg, path, fn, user, data, len, stat);
}

/* ------------------------------------------------------------------------ */
/* exists                                                                    */

struct exists_ctx {
    const char *full;
    struct ej__reg_watch *w;
    struct Stat st;
};

static int exists_attempt(ej_registry *reg, zhandle_t *zh, void *arg)
{
    (void)reg;
    struct exists_ctx *e = arg;
    int rc = zoo_wexists(zh, e->full, e->w ? oneshot_watcher : NULL, e->w, &e->st);
    if ((rc == ZOK || rc == ZNONODE) && e->w)
        watch_set(zh, e->w);
    return rc;
}

static int do_exists(ej_registry *reg, const char *path, ej_reg_watch_fn fn, void *user,
                     bool *exists, struct ej_node_stat *stat)
{
    const char *op = fn ? "exists_watch" : "exists";
    if (exists)
        *exists = false;
    struct exists_ctx e = {0};
    char *full;
    int rc = ej__reg_resolve(reg, op, path, false, &full);
    if (rc)
        return rc;
    if (fn && !(e.w = watch_new(reg, fn, user, path))) {
        free(full);
        return ej__reg_fail(-ENOMEM, "%s %s: out of memory", op, path);
    }
    e.full = full;
    int zrc = ej__reg_run_zk(reg, true, exists_attempt, &e, NULL);
    watch_done(e.w, zrc == ZOK || zrc == ZNONODE);
    free(full);
    if (zrc == ZNONODE)
        return 0;
    if (zrc != ZOK)
        return ej__reg_op_fail(reg, op, path, zrc);
    if (exists)
        *exists = true;
    if (stat)
        ej__reg_stat_from_zk(stat, &e.st);
    return 0;
}

int ej_registry_exists(ej_registry *reg, const char *path, bool *exists, struct ej_node_stat *stat)
{
    return do_exists(reg, path, NULL, NULL, exists, stat);
}

int ej_registry_exists_watch(ej_registry *reg, const char *path, ej_reg_watch_fn fn, void *user,
                             bool *exists, struct ej_node_stat *stat)
{
    if (!fn)
        return ej__reg_fail(EJ_EINVAL, "exists_watch %s: callback is NULL", path ? path : "(null)");
    return do_exists(reg, path, fn, user, exists, stat);
}

/* ------------------------------------------------------------------------ */
/* children                                                                  */

struct children_ctx {
    const char *full;
    struct ej__reg_watch *w;
    struct String_vector sv;
    bool have;
};

static int children_attempt(ej_registry *reg, zhandle_t *zh, void *arg)
{
    (void)reg;
    struct children_ctx *c = arg;
    struct Stat st;
    int rc = zoo_wget_children2(zh, c->full, c->w ? oneshot_watcher : NULL, c->w, &c->sv, &st);
    if (rc == ZOK) {
        c->have = true;
        if (c->w)
            watch_set(zh, c->w);
    }
    return rc;
}

static int do_children(ej_registry *reg, const char *path, ej_reg_watch_fn fn, void *user,
                       ej_reg_sort sort, char ***names, size_t *count)
{
    const char *op = fn ? "children_watch" : "children";
    if (names)
        *names = NULL;
    if (count)
        *count = 0;
    struct children_ctx c = {0};
    char *full;
    int rc = ej__reg_resolve(reg, op, path, false, &full);
    if (rc)
        return rc;
    if (fn && !(c.w = watch_new(reg, fn, user, path))) {
        free(full);
        return ej__reg_fail(-ENOMEM, "%s %s: out of memory", op, path);
    }
    c.full = full;
    int zrc = ej__reg_run_zk(reg, true, children_attempt, &c, NULL);
    watch_done(c.w, zrc == ZOK);
    free(full);
    if (zrc != ZOK)
        return ej__reg_op_fail(reg, op, path, zrc);
    size_t n = c.sv.count > 0 ? (size_t)c.sv.count : 0;
    if (names) {
        char **v = ej__reg_copy_names(c.sv.data, n);
        if (!v) {
            deallocate_String_vector(&c.sv);
            return ej__reg_fail(-ENOMEM, "%s %s: out of memory", op, path);
        }
        ej__reg_sort_names(v, n, sort);
        *names = v;
    }
    if (count)
        *count = n;
    deallocate_String_vector(&c.sv);
    return 0;
}

int ej_registry_children(ej_registry *reg, const char *path, ej_reg_sort sort, char ***names,
                         size_t *count)
{
    return do_children(reg, path, NULL, NULL, sort, names, count);
}

int ej_registry_children_watch(ej_registry *reg, const char *path, ej_reg_watch_fn fn, void *user,
                               ej_reg_sort sort, char ***names, size_t *count)
{
    if (!fn)
        return ej__reg_fail(EJ_EINVAL, "children_watch %s: callback is NULL",
                            path ? path : "(null)");
    return do_children(reg, path, fn, user, sort, names, count);
}

/* ------------------------------------------------------------------------ */
/* create                                                                    */

struct create_ctx {
    const char *full;
    const char *data;
    int len;
    int flags;
    const struct ACL_vector *acl;
    char *buf;
    int buflen;
};

static int create_attempt(ej_registry *reg, zhandle_t *zh, void *arg)
{
    (void)reg;
    struct create_ctx *c = arg;
    return zoo_create(zh, c->full, c->data, c->len, c->acl, c->flags, c->buf, c->buflen);
}

/* One ancestor of a node: created, or there already (ZOK). */
static int create_parent(ej_registry *reg, const char *path, bool container)
{
    struct create_ctx c = {
        path, "", 0, container ? ZOO_CONTAINER : ZOO_PERSISTENT, ej__reg_acl(reg), NULL, 0};
    int zrc = ej__reg_run_zk(reg, true, create_attempt, &c, NULL);
    return zrc == ZNODEEXISTS ? ZOK : zrc;
}

/* Create the missing ancestors of full, the nearest first: the usual
 * missing one is a single container the server reaped when it emptied (a
 * latch's), and each ancestor above it, there already, would cost a create
 * the server refuses, a write all the same (5 for a latch node of a job in
 * a namespace, where 1 does). Goes up while a create finds no parent, then
 * down again. */
int ej__reg_make_parents(ej_registry *reg, const char *full, bool container)
{
    char *p = strdup(full);
    if (!p)
        return ZSYSTEMERROR;
    char *last = strrchr(p, '/');
    if (!last || last == p) {
        free(p);
        return ZOK;
    }
    *last = '\0';
    size_t up = 0;
    int zrc;
    for (;;) {
        zrc = create_parent(reg, p, container);
        char *s = strrchr(p, '/');
        if (zrc != ZNONODE || !s || s == p)
            break;
        *s = '\0';
        up++;
    }
    for (; zrc == ZOK && up > 0; up--) {
        p[strlen(p)] = '/';
        zrc = create_parent(reg, p, container);
    }
    free(p);
    return zrc;
}

struct exists_raw {
    const char *full;
    struct Stat st;
};

static int exists_raw_attempt(ej_registry *reg, zhandle_t *zh, void *arg)
{
    (void)reg;
    struct exists_raw *e = arg;
    return zoo_exists(zh, e->full, 0, &e->st);
}

/* After a create whose answer was lost found the node existing: is it ours
 * (an ephemeral node of the current session)? */
static bool created_by_us(ej_registry *reg, const char *full)
{
    struct exists_raw e = {full, {0}};
    if (ej__reg_run_zk(reg, true, exists_raw_attempt, &e, NULL) != ZOK)
        return false;
    return e.st.ephemeralOwner != 0 && e.st.ephemeralOwner == ej_registry_session_id(reg);
}

int ej_registry_create_node(ej_registry *reg, const char *path, const void *data, size_t len,
                            ej_reg_mode mode, unsigned flags, char **actual_path)
{
    if (actual_path)
        *actual_path = NULL;
    int zmode = ej__reg_zk_mode(mode);
    bool seq = mode == EJ_REG_PERSISTENT_SEQUENTIAL || mode == EJ_REG_EPHEMERAL_SEQUENTIAL;
    char *full;
    int rc = ej__reg_resolve(reg, "create", path, seq, &full);
    if (rc)
        return rc;
    if (zmode == -1) {
        free(full);
        return ej__reg_fail(EJ_EINVAL, "create %s: unknown mode %d", path, (int)mode);
    }
    if ((rc = check_size("create", path, len))) {
        free(full);
        return rc;
    }
    if (!data && len) {
        free(full);
        return ej__reg_fail(EJ_EINVAL, "create %s: data is NULL with length %zu", path, len);
    }
    size_t buflen = strlen(full) + 32;
    char *buf = malloc(buflen);
    if (!buf) {
        free(full);
        return ej__reg_fail(-ENOMEM, "create %s: out of memory", path);
    }
    struct create_ctx c = {full, data ? data : "", (int)len, zmode, ej__reg_acl(reg),
                           buf,  (int)buflen};
    bool lost = false;
    int zrc = ej__reg_run_zk(reg, !seq, create_attempt, &c, &lost);
    if (zrc == ZNONODE && (flags & (EJ_REG_CREATE_PARENTS | EJ_REG_CONTAINER_PARENTS))) {
        zrc = ej__reg_make_parents(reg, full, (flags & EJ_REG_CONTAINER_PARENTS) != 0);
        if (zrc == ZOK)
            zrc = ej__reg_run_zk(reg, !seq, create_attempt, &c, &lost);
    }
    if (zrc == ZNODEEXISTS && lost && (mode == EJ_REG_EPHEMERAL) && created_by_us(reg, full)) {
        snprintf(buf, buflen, "%s", full);
        zrc = ZOK;
    }
    if (zrc != ZOK) {
        free(buf);
        free(full);
        if (zrc == ZSYSTEMERROR)
            return ej__reg_fail(-ENOMEM, "create %s: out of memory", path);
        return ej__reg_op_fail(reg, "create", path, zrc);
    }
    if (actual_path) {
        const char *rel = ej__reg_rel_path(reg, buf);
        *actual_path = strdup(rel ? rel : buf);
        if (!*actual_path)
            rc = ej__reg_fail(-ENOMEM, "create %s: out of memory (the node was created)", path);
    }
    free(buf);
    free(full);
    return rc;
}

/* ------------------------------------------------------------------------ */
/* set / delete                                                              */

struct set_ctx {
    const char *full;
    const char *data;
    int len;
    int version;
    struct Stat st;
};

static int set_attempt(ej_registry *reg, zhandle_t *zh, void *arg)
{
    (void)reg;
    struct set_ctx *s = arg;
    return zoo_set2(zh, s->full, s->data, s->len, s->version, &s->st);
}

int ej_registry_set(ej_registry *reg, const char *path, const void *data, size_t len, int version,
                    struct ej_node_stat *stat)
{
    char *full;
    int rc = ej__reg_resolve(reg, "set", path, false, &full);
    if (rc)
        return rc;
    if ((rc = check_size("set", path, len))) {
        free(full);
        return rc;
    }
    if (!data && len) {
        free(full);
        return ej__reg_fail(EJ_EINVAL, "set %s: data is NULL with length %zu", path, len);
    }
    struct set_ctx s = {full, data ? data : "", (int)len, version, {0}};
    int zrc = ej__reg_run_zk(reg, version == -1, set_attempt, &s, NULL);
    free(full);
    if (zrc != ZOK)
        return ej__reg_op_fail(reg, "set", path, zrc);
    if (stat)
        ej__reg_stat_from_zk(stat, &s.st);
    return 0;
}

struct delete_ctx {
    const char *full;
    int version;
};

static int delete_attempt(ej_registry *reg, zhandle_t *zh, void *arg)
{
    (void)reg;
    struct delete_ctx *d = arg;
    return zoo_delete(zh, d->full, d->version);
}

static int delete_full(ej_registry *reg, const char *full, int version)
{
    struct delete_ctx d = {full, version};
    bool lost = false;
    int zrc = ej__reg_run_zk(reg, version == -1, delete_attempt, &d, &lost);
    if (zrc == ZNONODE && lost && version == -1)
        zrc = ZOK; /* our lost attempt deleted it */
    return zrc;
}

int ej_registry_delete(ej_registry *reg, const char *path, int version)
{
    char *full;
    int rc = ej__reg_resolve(reg, "delete", path, false, &full);
    if (rc)
        return rc;
    int zrc = delete_full(reg, full, version);
    free(full);
    if (zrc != ZOK)
        return ej__reg_op_fail(reg, "delete", path, zrc);
    return 0;
}

struct children_raw {
    const char *full;
    struct String_vector sv;
};

static int children_raw_attempt(ej_registry *reg, zhandle_t *zh, void *arg)
{
    (void)reg;
    struct children_raw *c = arg;
    return zoo_get_children(zh, c->full, 0, &c->sv);
}

/* Depth-first delete of full and its subtree. Returns a Z code; ZNONODE
 * means the node is gone, which is what the caller wanted. A child that
 * cannot go (someone keeps writing under it: ZNOTEMPTY after its rounds;
 * or its ACL forbids) does not stop the delete of its siblings, and its
 * error is returned after them: removing a job whose instances still
 * elect must remove its config and instances, which is what stops them. */
static int delete_tree(ej_registry *reg, const char *full, int depth)
{
    if (depth > 1000)
        return ZBADARGUMENTS;
    for (int round = 0; round < 5; round++) {
        struct children_raw c = {full, {0, NULL}};
        int stuck = ZOK; /* the first child that could not go */
        int zrc = ej__reg_run_zk(reg, true, children_raw_attempt, &c, NULL);
        if (zrc != ZOK)
            return zrc;
        for (int i = 0; i < c.sv.count && zrc == ZOK; i++) {
            if (strcmp(full, "/") == 0 && strcmp(c.sv.data[i], "zookeeper") == 0)
                continue; /* the server's own subtree */
            char *child = strcmp(full, "/") == 0 ? ej__asprintf("/%s", c.sv.data[i])
                                                 : ej__asprintf("%s/%s", full, c.sv.data[i]);
            if (!child) {
                zrc = ZSYSTEMERROR;
                break;
            }
            zrc = delete_tree(reg, child, depth + 1);
            if (zrc == ZNONODE)
                zrc = ZOK;
            else if (zrc == ZNOTEMPTY || zrc == ZNOAUTH) {
                stuck = stuck == ZOK ? zrc : stuck;
                zrc = ZOK;
            }
            free(child);
        }
        deallocate_String_vector(&c.sv);
        if (zrc != ZOK)
            return zrc;
        if (stuck != ZOK)
            return stuck; /* the child had its rounds: not again here */
        if (strcmp(full, "/") == 0)
            return ZOK; /* the ZooKeeper root itself stays */
        zrc = delete_full(reg, full, -1);
        if (zrc != ZNOTEMPTY)
            return zrc; /* else someone added a child meanwhile: again */
    }
    return ZNOTEMPTY;
}

int ej_registry_delete_recursive(ej_registry *reg, const char *path)
{
    char *full;
    int rc = ej__reg_resolve(reg, "delete_recursive", path, false, &full);
    if (rc)
        return rc;
    int zrc = delete_tree(reg, full, 0);
    free(full);
    if (zrc == ZNONODE || zrc == ZOK)
        return 0;
    if (zrc == ZSYSTEMERROR)
        return ej__reg_fail(-ENOMEM, "delete_recursive %s: out of memory", path);
    return ej__reg_op_fail(reg, "delete_recursive", path, zrc);
}

/* ------------------------------------------------------------------------ */
/* persist                                                                   */

int ej_registry_persist(ej_registry *reg, const char *path, const void *data, size_t len)
{
    int rc = 0;
    for (int round = 0; round < 3; round++) {
        bool exists = false;
        if ((rc = ej_registry_exists(reg, path, &exists, NULL)))
            return rc;
        if (!exists) {
            rc = ej_registry_create_node(reg, path, data, len, EJ_REG_PERSISTENT,
                                         EJ_REG_CREATE_PARENTS, NULL);
            if (rc != EJ_ENODEEXISTS)
                return rc;
        } else {
            rc = ej_registry_set(reg, path, data, len, -1, NULL);
            if (rc != EJ_ENONODE)
                return rc;
        }
        /* Created or deleted by someone else in between: look again. */
    }
    return rc;
}

int ej_registry_persist_ephemeral(ej_registry *reg, const char *path, const void *data, size_t len)
{
    bool exists = false;
    int rc = ej_registry_exists(reg, path, &exists, NULL);
    if (rc)
        return rc;
    if (exists && (rc = ej_registry_delete_recursive(reg, path)))
        return rc;
    return ej_registry_create_node(reg, path, data, len, EJ_REG_EPHEMERAL, EJ_REG_CREATE_PARENTS,
                                   NULL);
}

/* ------------------------------------------------------------------------ */
/* multi                                                                     */

struct multi_ctx {
    zoo_op_t *zops;
    zoo_op_result_t *res;
    int n;
};

static int multi_attempt(ej_registry *reg, zhandle_t *zh, void *arg)
{
    (void)reg;
    struct multi_ctx *m = arg;
    return zoo_multi(zh, m->n, m->zops, m->res);
}

static const char *op_name(ej_reg_op_type t)
{
    switch (t) {
    case EJ_REG_OP_CREATE:
        return "create";
    case EJ_REG_OP_DELETE:
        return "delete";
    case EJ_REG_OP_SET:
        return "set";
    case EJ_REG_OP_CHECK:
        return "check";
    }
    return "?";
}

/* The ZooKeeper side of a transaction: full paths, created-path buffers,
 * the ops, their results and the stats of set ops. */
struct multi_bufs {
    char **fulls, **bufs;
    zoo_op_t *zops;
    zoo_op_result_t *res;
    struct Stat *stats;
};

static int multi_bufs_init(struct multi_bufs *mb, size_t n)
{
    mb->fulls = calloc(n, sizeof(*mb->fulls));
    mb->bufs = calloc(n, sizeof(*mb->bufs));
    mb->zops = calloc(n, sizeof(*mb->zops));
    mb->res = calloc(n, sizeof(*mb->res));
    mb->stats = calloc(n, sizeof(*mb->stats));
    if (!mb->fulls || !mb->bufs || !mb->zops || !mb->res || !mb->stats)
        return ej__reg_fail(-ENOMEM, "multi: out of memory");
    return 0;
}

static void multi_bufs_fini(struct multi_bufs *mb, size_t n)
{
    if (mb->fulls)
        for (size_t i = 0; i < n; i++)
            free(mb->fulls[i]);
    if (mb->bufs)
        for (size_t i = 0; i < n; i++)
            free(mb->bufs[i]);
    free(mb->fulls);
    free(mb->bufs);
    free(mb->zops);
    free(mb->res);
    free(mb->stats);
}

/* Whether op i can be sent: 0, or the error (reported). */
static int multi_check_op(const struct ej_reg_op *o, size_t i)
{
    const char *what = op_name(o->type);
    bool seq = o->type == EJ_REG_OP_CREATE &&
               (o->mode == EJ_REG_PERSISTENT_SEQUENTIAL || o->mode == EJ_REG_EPHEMERAL_SEQUENTIAL);
    const char *why = NULL;
    if (ej__reg_check_path(o->path, seq, &why))
        return ej__reg_fail(EJ_EBADPATH, "multi op %zu (%s) \"%s\": %s", i, what,
                            o->path ? o->path : "(null)", why);
    if ((o->type == EJ_REG_OP_CREATE || o->type == EJ_REG_OP_SET) && !o->data && o->len)
        return ej__reg_fail(EJ_EINVAL, "multi op %zu (%s) %s: data is NULL with length %zu", i,
                            what, o->path, o->len);
    if (o->type == EJ_REG_OP_CREATE && ej__reg_zk_mode(o->mode) == -1)
        return ej__reg_fail(EJ_EINVAL, "multi op %zu (create) %s: unknown mode %d", i, o->path,
                            (int)o->mode);
    if (o->type < EJ_REG_OP_CREATE || o->type > EJ_REG_OP_CHECK)
        return ej__reg_fail(EJ_EINVAL, "multi op %zu %s: unknown op type %d", i, o->path,
                            (int)o->type);
    if ((o->type == EJ_REG_OP_CREATE || o->type == EJ_REG_OP_SET) && o->len > EJ_REG_MAX_DATA_LEN)
        return ej__reg_fail(EJ_ETOOBIG, "multi op %zu (%s) %s: %zu bytes exceed the limit of %d",
                            i, what, o->path, o->len, EJ_REG_MAX_DATA_LEN);
    return 0;
}

/* Fills ZooKeeper's op i from o; *bytes: what it adds to the request. */
static int multi_init_op(ej_registry *reg, struct multi_bufs *mb, size_t i,
                         const struct ej_reg_op *o, size_t *bytes)
{
    if (!(mb->fulls[i] = ej__reg_full_path(reg, o->path)))
        return ej__reg_fail(-ENOMEM, "multi: out of memory");
    const char *full = mb->fulls[i];
    *bytes = strlen(full) + ((o->type == EJ_REG_OP_CREATE || o->type == EJ_REG_OP_SET) ? o->len : 0);
    const char *d = o->data ? o->data : "";
    switch (o->type) {
    case EJ_REG_OP_CREATE: {
        size_t bl = strlen(full) + 32;
        if (!(mb->bufs[i] = malloc(bl)))
            return ej__reg_fail(-ENOMEM, "multi: out of memory");
        zoo_create_op_init(&mb->zops[i], full, d, (int)o->len, ej__reg_acl(reg),
                           ej__reg_zk_mode(o->mode), mb->bufs[i], (int)bl);
        break;
    }
    case EJ_REG_OP_DELETE:
        zoo_delete_op_init(&mb->zops[i], full, o->version);
        break;
    case EJ_REG_OP_SET:
        zoo_set_op_init(&mb->zops[i], full, d, (int)o->len, o->version, &mb->stats[i]);
        break;
    case EJ_REG_OP_CHECK:
        zoo_check_op_init(&mb->zops[i], full, o->version);
        break;
    }
    return 0;
}

/* Applied: the created paths and the set ops' stats, to the caller. */
static int multi_collect(ej_registry *reg, struct ej_reg_op *ops, size_t n,
                         const struct multi_bufs *mb)
{
    int rc = 0;
    for (size_t i = 0; i < n; i++) {
        if (ops[i].type == EJ_REG_OP_CREATE && ops[i].out_path) {
            const char *rel = ej__reg_rel_path(reg, mb->bufs[i]);
            *ops[i].out_path = strdup(rel ? rel : mb->bufs[i]);
            if (!*ops[i].out_path)
                rc = ej__reg_fail(-ENOMEM, "multi: out of memory (the transaction was applied)");
        }
        if (ops[i].type == EJ_REG_OP_SET && ops[i].out_stat)
            ej__reg_stat_from_zk(ops[i].out_stat, &mb->stats[i]);
    }
    return rc;
}

/* Not applied: finds the op that made it fail (the others report ZOK,
 * rolled back, or ZRUNTIMEINCONSISTENCY, not run). */
static int multi_failed(ej_registry *reg, struct ej_reg_op *ops, size_t n,
                        const zoo_op_result_t *res, int zrc, size_t *failed_index)
{
    size_t bad = n;
    for (size_t i = 0; i < n; i++) {
        int e = res[i].err;
        if (bad == n && e != ZOK && e != ZRUNTIMEINCONSISTENCY)
            bad = i;
        ops[i].result = EJ_EAGAIN;
    }
    if (bad == n)
        return ej__reg_op_fail(reg, "multi", ops[0].path, zrc);
    ops[bad].result = ej__reg_from_zk(res[bad].err);
    if (failed_index)
        *failed_index = bad;
    return ej__reg_fail(ops[bad].result, "multi: op %zu (%s %s) failed: %s; nothing was applied",
                        bad, op_name(ops[bad].type), ops[bad].path, zerror(res[bad].err));
}

int ej_registry_multi(ej_registry *reg, struct ej_reg_op *ops, size_t n, size_t *failed_index)
{
    if (failed_index)
        *failed_index = n;
    if (!reg || !ops || n == 0 || n > 100000)
        return ej__reg_fail(EJ_EINVAL, "multi: no registry or no ops (n=%zu)", n);
    for (size_t i = 0; i < n; i++) {
        ops[i].result = 0;
        if (ops[i].out_path)
            *ops[i].out_path = NULL;
        if (ops[i].out_stat)
            memset(ops[i].out_stat, 0, sizeof *ops[i].out_stat);
    }
    struct multi_bufs mb = {0};
    int rc = multi_bufs_init(&mb, n);
    size_t total = 0;
    for (size_t i = 0; rc == 0 && i < n; i++) {
        rc = multi_check_op(&ops[i], i);
        if (rc) {
            for (size_t j = 0; j < n; j++)
                ops[j].result = EJ_EAGAIN;
            ops[i].result = rc;
            if (failed_index)
                *failed_index = i;
            break;
        }
        size_t bytes = 0;
        rc = multi_init_op(reg, &mb, i, &ops[i], &bytes);
        total += bytes;
    }
    if (rc == 0 && total > EJ_REG_MAX_DATA_LEN)
        rc = ej__reg_fail(EJ_ETOOBIG, "multi: %zu bytes of paths and data exceed the limit of %d",
                          total, EJ_REG_MAX_DATA_LEN);
    if (rc != 0)
        goto out_free;
    struct multi_ctx m = {mb.zops, mb.res, (int)n};
    int zrc = ej__reg_run_zk(reg, false, multi_attempt, &m, NULL);
    if (zrc == ZOK) {
        rc = multi_collect(reg, ops, n, &mb);
    } else if (ej__reg_zk_is_connloss(zrc)) {
        rc = ej__reg_op_fail(reg, "multi", ops[0].path, zrc);
        for (size_t i = 0; i < n; i++)
            ops[i].result = rc;
    } else {
        rc = multi_failed(reg, ops, n, mb.res, zrc, failed_index);
    }
out_free:
    multi_bufs_fini(&mb, n);
    return rc;
}
