/*
 * The tree cache: a local copy of a subtree kept current with asynchronous
 * reads and watches, like Curator's TreeCache.
 *
 * Every node of the subtree has a data watch (from its getData) and, unless
 * it is ephemeral, a child watch (from its getChildren), or less as its
 * shape says (EJ__TREE_* in internal.h): a NAME node has neither and is
 * known from its parent's listings only. All of a cache's
 * watches share one (watcher, context) pair, so ZooKeeper keeps at most one
 * of each kind per path. Answers and watch events come back on ZooKeeper's
 * completion thread, are copied into the registry's queue, and are applied
 * on the dispatch thread in the order the server produced them; that order
 * is what makes the cache converge.
 *
 * The model is guarded by the cache's mutex for readers on other threads;
 * only the dispatch thread changes it.
 */
#include <errno.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "common/util.h"
#include "ejob/log.h"
#include "reg/internal.h"

enum { N_PENDING = 0, N_LIVE = 1, N_ABSENT = 2 };
/* R_PROBE: the stat of a NAME node, without a watch (probe_names). */
enum { R_DATA = 0, R_CHILDREN = 1, R_EXISTS = 2, R_PROBE = 3 };
/* F_INIT: a read of the initial load (the start's, a reconnection's) or
 * one that follows from it; only those count for "initialized". A node
 * that changes while the cache loads (a fleet registering: every arrival
 * re-lists instances/) must not keep the load from ending. */
enum { F_THEN_CHILDREN = 1, F_DEEP = 2, F_INIT = 4 };

struct tnode {
    char *path;       /* namespace-relative */
    const char *name; /* last segment, inside path */
    struct tnode *parent;
    struct tnode **kids;
    size_t nkids, capkids;
    struct tnode *hnext;
    int state;
    char *data; /* NUL-terminated, NULL until loaded */
    size_t len;
    struct ej_node_stat stat;
    /* Dispatch-only, for NAME children (probe_names): the cversion and
     * pzxid of this node's last listing applied, and, on a NAME node, a
     * zxid at or after its creation (the pzxid of the listing that added
     * it, or the czxid a probe reported). */
    bool listed;
    int32_t list_cversion;
    int64_t list_pzxid;
    int64_t known_zxid;
};

struct ej_tree_cache {
    ej_registry *reg;
    uint64_t id;
    char *root_path;
    ej_tree_cache_fn fn;
    void *user;
    /* While a watch's change is applied (dispatch thread): when that watch
     * fired (mono ms), for the events it brings; 0 otherwise. */
    int64_t noticed_ms;
    /* What to read of each node (ej__tree_cache_set_shape): fixed before
     * the start; NULL: everything. */
    ej__tree_cache_shape_fn shape;
    void *shape_user;

    pthread_mutex_t mu;
    pthread_cond_t cv;
    struct tnode **buckets;
    size_t nbuckets, nnodes, nlive;
    struct tnode *root;
    bool initialized;

    /* dispatch-only */
    bool started, destroyed;
    uint64_t epoch;
    long outstanding;
    bool init_pending, load_failed;
};

/* ------------------------------------------------------------------------ */
/* Node table                                                                */

static size_t hash_str(const char *s)
{
    uint64_t h = 1469598103934665603ull;
    for (; *s; s++) {
        h ^= (unsigned char)*s;
        h *= 1099511628211ull;
    }
    return (size_t)h;
}

static struct tnode *lookup(const ej_tree_cache *c, const char *path)
{
    for (struct tnode *n = c->buckets[hash_str(path) & (c->nbuckets - 1)]; n; n = n->hnext)
        if (strcmp(n->path, path) == 0)
            return n;
    return NULL;
}

static void hash_insert(ej_tree_cache *c, struct tnode *n)
{
    if (c->nnodes + 1 > c->nbuckets * 2) {
        size_t nb = c->nbuckets * 4;
        struct tnode **b = calloc(nb, sizeof(*b));
        if (b) {
            for (size_t i = 0; i < c->nbuckets; i++) {
                struct tnode *x = c->buckets[i];
                while (x) {
                    struct tnode *next = x->hnext;
                    size_t h = hash_str(x->path) & (nb - 1);
                    x->hnext = b[h];
                    b[h] = x;
                    x = next;
                }
            }
            free(c->buckets);
            c->buckets = b;
            c->nbuckets = nb;
        }
    }
    size_t h = hash_str(n->path) & (c->nbuckets - 1);
    n->hnext = c->buckets[h];
    c->buckets[h] = n;
    c->nnodes++;
}

static void hash_remove(ej_tree_cache *c, struct tnode *n)
{
    struct tnode **pp = &c->buckets[hash_str(n->path) & (c->nbuckets - 1)];
    while (*pp && *pp != n)
        pp = &(*pp)->hnext;
    if (*pp) {
        *pp = n->hnext;
        c->nnodes--;
    }
}

static struct tnode *node_new(const char *path)
{
    struct tnode *n = calloc(1, sizeof(*n));
    if (!n)
        return NULL;
    n->path = strdup(path);
    if (!n->path) {
        free(n);
        return NULL;
    }
    const char *slash = strrchr(n->path, '/');
    n->name = slash ? slash + 1 : n->path;
    return n;
}

static void node_free(struct tnode *n)
{
    free(n->kids);
    free(n->data);
    free(n->path);
    free(n);
}

static int kid_add(struct tnode *parent, struct tnode *kid)
{
    if (parent->nkids == parent->capkids) {
        size_t cap = parent->capkids ? parent->capkids * 2 : 4;
        struct tnode **k = realloc(parent->kids, cap * sizeof(*k));
        if (!k)
            return -ENOMEM;
        parent->kids = k;
        parent->capkids = cap;
    }
    parent->kids[parent->nkids++] = kid;
    kid->parent = parent;
    return 0;
}

static void kid_remove(struct tnode *parent, struct tnode *kid)
{
    for (size_t i = 0; i < parent->nkids; i++) {
        if (parent->kids[i] == kid) {
            parent->kids[i] = parent->kids[--parent->nkids];
            break;
        }
    }
    kid->parent = NULL;
}

/* Post-order list of n's subtree (n included when self), detached from the
 * table. Called with the cache mutex held. */
struct nlist {
    struct tnode **v;
    size_t n, cap;
};

static void nlist_push(struct nlist *l, struct tnode *n)
{
    if (l->n == l->cap) {
        size_t cap = l->cap ? l->cap * 2 : 16;
        struct tnode **v = realloc(l->v, cap * sizeof(*v));
        if (!v) {
            /* Cannot report it: free the node quietly rather than leak. */
            if (n->state == N_LIVE)
                EJ_LOG(EJ_LOG_ERROR, "reg", -ENOMEM, "tree cache: removal of %s not reported",
                       n->path);
            node_free(n);
            return;
        }
        l->v = v;
        l->cap = cap;
    }
    l->v[l->n++] = n;
}

static void detach_subtree(ej_tree_cache *c, struct tnode *n, struct nlist *out, bool self)
{
    while (n->nkids) {
        struct tnode *k = n->kids[n->nkids - 1];
        n->nkids--;
        k->parent = NULL;
        detach_subtree(c, k, out, true);
    }
    if (!self)
        return;
    if (n->parent)
        kid_remove(n->parent, n);
    hash_remove(c, n);
    if (n->state == N_LIVE)
        c->nlive--;
    nlist_push(out, n);
}

/* ------------------------------------------------------------------------ */
/* Events                                                                    */

static void emit(ej_tree_cache *c, ej_tree_event_type type, const char *path, const char *data,
                 size_t len, const struct ej_node_stat *stat)
{
    if (c->destroyed || !c->fn)
        return;
    struct ej_tree_event ev = {type,  path, data ? data : (type == EJ_TREE_INITIALIZED ? NULL : ""),
                               len,   stat, c->noticed_ms};
    c->fn(c, &ev, c->user);
}

/* Report and free detached nodes, children before parents. */
static void report_removed(ej_tree_cache *c, struct nlist *l)
{
    for (size_t i = 0; i < l->n; i++) {
        struct tnode *n = l->v[i];
        if (n->state == N_LIVE)
            emit(c, EJ_TREE_NODE_REMOVED, n->path, n->data, n->len, &n->stat);
        node_free(n);
    }
    free(l->v);
}

static void check_initialized(ej_tree_cache *c)
{
    if (c->destroyed || c->outstanding != 0 || !c->init_pending || c->load_failed)
        return;
    c->init_pending = false;
    pthread_mutex_lock(&c->mu);
    c->initialized = true;
    pthread_cond_broadcast(&c->cv);
    pthread_mutex_unlock(&c->mu);
    emit(c, EJ_TREE_INITIALIZED, NULL, NULL, 0, NULL);
}

/* ------------------------------------------------------------------------ */
/* Requests                                                                  */

struct creq {
    struct ej__reg_item it;
    ej_registry *reg;
    uint64_t cache_id, gen, epoch;
    int kind, flags;
    char *path;
    int64_t since; /* R_PROBE: the parent's pzxid at the listing before */
    int rc;
    char *data;
    size_t len;
    struct Stat st;
    char **names;
    size_t nnames;
    int64_t noticed; /* a re-read after a watch: when the watch fired (mono ms) */
};

struct cwatch {
    struct ej__reg_item it;
    uint64_t cache_id, gen;
    int type;
    int64_t at; /* mono ms when it fired (the completion thread) */
    char path[];
};

static void on_creq(ej_registry *reg, struct ej__reg_item *item);
static void on_cwatch(ej_registry *reg, struct ej__reg_item *item);

/* ZooKeeper's completion thread. */
static void cache_watcher(zhandle_t *zh, int type, int state, const char *path, void *ctx)
{
    (void)state;
    if (type == ZOO_SESSION_EVENT || !path)
        return;
    const struct ej__reg_session *s = zoo_get_context(zh);
    const char *rel = ej__reg_rel_path(s->reg, path);
    if (!rel)
        return;
    size_t n = strlen(rel);
    struct cwatch *w = malloc(sizeof(*w) + n + 1);
    if (!w) {
        EJ_LOG(EJ_LOG_ERROR, "reg", -ENOMEM, "tree cache: watch event on %s dropped", rel);
        return;
    }
    w->it.run = on_cwatch;
    w->cache_id = (uint64_t)(uintptr_t)ctx;
    w->gen = s->gen;
    w->type = type;
    w->at = ej__mono_ms();
    memcpy(w->path, rel, n + 1);
    ej__reg_enqueue(s->reg, &w->it, true);
}

static void data_done(int rc, const char *value, int value_len, const struct Stat *stat,
                      const void *data)
{
    struct creq *r = (struct creq *)data;
    atomic_fetch_sub(&r->reg->cache_reads_inflight, 1);
    r->rc = rc;
    if (rc == ZOK) {
        r->len = value && value_len > 0 ? (size_t)value_len : 0;
        r->data = malloc(r->len + 1);
        if (r->data) {
            if (r->len)
                memcpy(r->data, value, r->len);
            r->data[r->len] = '\0';
        } else {
            r->rc = ZSYSTEMERROR;
        }
        if (stat)
            r->st = *stat;
    }
    ej__reg_enqueue(r->reg, &r->it, true);
}

static void children_done(int rc, const struct String_vector *strings, const struct Stat *stat,
                          const void *data)
{
    struct creq *r = (struct creq *)data;
    atomic_fetch_sub(&r->reg->cache_reads_inflight, 1);
    r->rc = rc;
    if (rc == ZOK) {
        size_t n = strings && strings->count > 0 ? (size_t)strings->count : 0;
        r->names = ej__reg_copy_names(n ? strings->data : NULL, n);
        r->nnames = n;
        if (!r->names)
            r->rc = ZSYSTEMERROR;
        if (stat)
            r->st = *stat;
    }
    ej__reg_enqueue(r->reg, &r->it, true);
}

static void exists_done(int rc, const struct Stat *stat, const void *data)
{
    struct creq *r = (struct creq *)data;
    atomic_fetch_sub(&r->reg->cache_reads_inflight, 1);
    r->rc = rc;
    if (rc == ZOK && stat)
        r->st = *stat;
    ej__reg_enqueue(r->reg, &r->it, true);
}

static void creq_free(struct creq *r)
{
    free(r->path);
    free(r->data);
    ej_registry_free_names(r->names);
    free(r);
}

/* Send one asynchronous read, with the cache's watch unless a probe
 * (dispatch thread). */
static void issue_read(ej_tree_cache *c, const char *path, int kind, int flags, int64_t since,
                       int64_t noticed)
{
    ej_registry *reg = c->reg;
    zhandle_t *zh = reg->zh;
    if (!zh || reg->quiescing) {
        c->load_failed = true;
        return;
    }
    struct creq *r = calloc(1, sizeof(*r));
    char *full = ej__reg_full_path(reg, path);
    if (!r || !full || !(r->path = strdup(path))) {
        free(full);
        if (r)
            creq_free(r);
        EJ_LOG(EJ_LOG_ERROR, "reg", -ENOMEM, "tree cache: cannot read %s: out of memory", path);
        c->load_failed = true;
        return;
    }
    r->it.run = on_creq;
    r->reg = reg;
    r->cache_id = c->id;
    r->gen = reg->cur_gen;
    r->epoch = c->epoch;
    r->kind = kind;
    r->flags = flags;
    r->since = since;
    r->noticed = noticed;
    void *wctx = (void *)(uintptr_t)c->id;
    int rc;
    /* Counted before sending: the answer may come before the call returns. */
    atomic_fetch_add(&reg->cache_reads_inflight, 1);
    if (kind == R_DATA)
        rc = zoo_awget(zh, full, cache_watcher, wctx, data_done, r);
    else if (kind == R_CHILDREN)
        rc = zoo_awget_children2(zh, full, cache_watcher, wctx, children_done, r);
    else if (kind == R_EXISTS)
        rc = zoo_awexists(zh, full, cache_watcher, wctx, exists_done, r);
    else
        rc = zoo_aexists(zh, full, 0, exists_done, r);
    free(full);
    if (rc != ZOK) {
        EJ_LOG(EJ_LOG_DEBUG, "reg", ej__reg_from_zk(rc), "tree cache: read of %s not sent: %s",
               path, zerror(rc));
        atomic_fetch_sub(&reg->cache_reads_inflight, 1);
        creq_free(r);
        c->load_failed = true;
        return;
    }
    ej__reg_count(reg);
    if (flags & F_INIT)
        c->outstanding++;
}

static void issue(ej_tree_cache *c, const char *path, int kind, int flags)
{
    issue_read(c, path, kind, flags, 0, 0);
}

static ej_tree_cache *find_cache(ej_registry *reg, uint64_t id)
{
    ej_tree_cache *c = NULL;
    ej__mutex_lock(&reg->mu);
    size_t lo = 0, hi = reg->ncaches;
    while (lo < hi) {
        size_t mid = (lo + hi) / 2;
        if (reg->caches[mid].id < id) {
            lo = mid + 1;
        } else if (reg->caches[mid].id > id) {
            hi = mid;
        } else {
            c = reg->caches[mid].cache;
            break;
        }
    }
    ej__mutex_unlock(&reg->mu);
    return c;
}

static void unregister_cache(ej_registry *reg, uint64_t id)
{
    ej__mutex_lock(&reg->mu);
    for (size_t i = 0; i < reg->ncaches; i++) {
        if (reg->caches[i].id == id) {
            memmove(&reg->caches[i], &reg->caches[i + 1],
                    (reg->ncaches - i - 1) * sizeof(reg->caches[0]));
            reg->ncaches--;
            break;
        }
    }
    ej__mutex_unlock(&reg->mu);
}

/* ------------------------------------------------------------------------ */
/* Applying answers                                                          */

static int cmp_name(const void *a, const void *b)
{
    return strcmp(*(char *const *)a, *(char *const *)b);
}

/* Levels below "/": 0 for "/", 2 for "/a/b". */
static size_t segments(const char *path)
{
    size_t k = 0;
    if (strcmp(path, "/") != 0)
        for (; *path; path++)
            k += *path == '/';
    return k;
}

/* What the cache reads of the node at path. The root has no parent whose
 * listing could name it: it is never skipped nor known by name only. */
static int shape_of(const ej_tree_cache *c, const char *path)
{
    if (!c->shape)
        return EJ__TREE_ALL;
    int k = c->shape(path, segments(path) - segments(c->root_path), c->shape_user);
    bool root_only = k == EJ__TREE_SKIP || k == EJ__TREE_NAME;
    return root_only && strcmp(path, c->root_path) == 0 ? EJ__TREE_ALL : k;
}

/* Read a node as its shape says (again, when the cache knows it). A NAME
 * node has nothing to read: its parent's listings are all there is of it
 * (kid_new, probe_names). */
static void load(ej_tree_cache *c, const char *path, int flags)
{
    int shape = shape_of(c, path);
    if (shape == EJ__TREE_NAME)
        return;
    if (shape == EJ__TREE_CHILDREN)
        issue(c, path, R_CHILDREN, flags & (F_DEEP | F_INIT));
    else
        issue(c, path, R_DATA, flags | F_THEN_CHILDREN);
}

/* A node whose data the cache does not read: a children answer (stat st)
 * tells that it exists, and by its czxid whether it is the node cached. */
static void children_node_seen(ej_tree_cache *c, struct tnode *n, const struct Stat *zst)
{
    struct ej_node_stat st, oldst = n->stat;
    ej__reg_stat_from_zk(&st, zst);
    bool added = false, replaced = false;
    struct nlist l = {0};
    char *empty = n->data ? NULL : calloc(1, 1);
    pthread_mutex_lock(&c->mu);
    if (!n->data) {
        if (!empty) {
            pthread_mutex_unlock(&c->mu);
            c->load_failed = true;
            return;
        }
        n->data = empty;
        n->len = 0;
    }
    if (n->state != N_LIVE) {
        added = true;
        n->state = N_LIVE;
        c->nlive++;
    } else if (n->stat.czxid != st.czxid) {
        /* Deleted and created again unseen: what was below it is gone. */
        replaced = true;
        detach_subtree(c, n, &l, false);
    }
    n->stat = st;
    pthread_mutex_unlock(&c->mu);
    if (replaced) {
        report_removed(c, &l);
        emit(c, EJ_TREE_NODE_REMOVED, n->path, n->data, 0, &oldst);
    }
    if (added || replaced)
        emit(c, EJ_TREE_NODE_ADDED, n->path, n->data, 0, &n->stat);
}

/* The node is gone from the server. */
static void node_gone(ej_tree_cache *c, struct tnode *n)
{
    struct nlist l = {0};
    if (n == c->root) {
        char *old = NULL;
        size_t oldlen = 0;
        struct ej_node_stat oldst;
        bool was_live = n->state == N_LIVE;
        pthread_mutex_lock(&c->mu);
        detach_subtree(c, n, &l, false);
        if (was_live)
            c->nlive--;
        n->state = N_ABSENT;
        old = n->data;
        oldlen = n->len;
        oldst = n->stat;
        n->data = NULL;
        n->len = 0;
        pthread_mutex_unlock(&c->mu);
        report_removed(c, &l);
        if (was_live)
            emit(c, EJ_TREE_NODE_REMOVED, n->path, old, oldlen, &oldst);
        free(old);
        /* Learn when it comes back. */
        if (!c->destroyed)
            issue(c, n->path, R_EXISTS, 0);
        return;
    }
    pthread_mutex_lock(&c->mu);
    detach_subtree(c, n, &l, true);
    pthread_mutex_unlock(&c->mu);
    report_removed(c, &l);
}

static void handle_data(ej_tree_cache *c, struct creq *r)
{
    struct tnode *n = lookup(c, r->path);
    if (r->rc == ZNONODE) {
        if (n && n->state != N_ABSENT)
            node_gone(c, n);
        else if (n && n == c->root)
            issue(c, n->path, R_EXISTS, r->flags & F_INIT);
        return;
    }
    if (r->rc != ZOK || !n)
        return;
    struct ej_node_stat st;
    ej__reg_stat_from_zk(&st, &r->st);
    enum { K_NONE, K_ADDED, K_UPDATED, K_REPLACED } kind = K_NONE;
    struct nlist l = {0};
    pthread_mutex_lock(&c->mu);
    if (n->state != N_LIVE) {
        kind = K_ADDED;
        n->state = N_LIVE;
        c->nlive++;
    } else if (n->stat.czxid != st.czxid) {
        /* Deleted and created again while we were not looking (a new
         * session): a node is deleted only when empty, so whatever was
         * cached below it is gone too. */
        kind = K_REPLACED;
        detach_subtree(c, n, &l, false);
    } else if (n->stat.mzxid != st.mzxid) {
        kind = K_UPDATED;
    }
    char *old = n->data;
    size_t oldlen = n->len;
    struct ej_node_stat oldst = n->stat;
    n->data = r->data;
    n->len = r->len;
    n->stat = st;
    r->data = NULL;
    pthread_mutex_unlock(&c->mu);

    if (kind == K_ADDED) {
        emit(c, EJ_TREE_NODE_ADDED, n->path, n->data, n->len, &n->stat);
    } else if (kind == K_UPDATED) {
        emit(c, EJ_TREE_NODE_UPDATED, n->path, n->data, n->len, &n->stat);
    } else if (kind == K_REPLACED) {
        report_removed(c, &l);
        emit(c, EJ_TREE_NODE_REMOVED, n->path, old, oldlen, &oldst);
        emit(c, EJ_TREE_NODE_ADDED, n->path, n->data, n->len, &n->stat);
    }
    free(old);
    if (c->destroyed)
        return;
    /* Ephemeral nodes cannot have children, and a leaf's are of no
     * interest: no child watch needed. */
    bool want_children = (r->flags & F_THEN_CHILDREN) || kind == K_REPLACED;
    if (want_children && st.ephemeral_owner == 0 && shape_of(c, n->path) == EJ__TREE_ALL)
        issue(c, n->path, R_CHILDREN, r->flags & (F_DEEP | F_INIT));
}

/* A child that a listing of n names for the first time, of shape `shape`
 * (not SKIP); pzxid is the listing's. A NAME child is complete at once:
 * live, data "", stat zero, reported here, no read and nothing for the
 * load to wait for. Any other is read as its shape says. */
static void kid_new(ej_tree_cache *c, struct tnode *n, const char *path, int shape, int64_t pzxid,
                    int flags)
{
    bool by_name = shape == EJ__TREE_NAME;
    struct tnode *k = node_new(path);
    if (k && by_name && !(k->data = calloc(1, 1))) {
        node_free(k);
        k = NULL;
    }
    if (!k) {
        c->load_failed = true;
        return;
    }
    k->known_zxid = pzxid; /* it existed at that listing */
    pthread_mutex_lock(&c->mu);
    int rc = kid_add(n, k);
    if (rc == 0) {
        hash_insert(c, k);
        if (by_name) {
            k->state = N_LIVE;
            c->nlive++;
        }
    }
    pthread_mutex_unlock(&c->mu);
    if (rc) {
        node_free(k);
        c->load_failed = true;
    } else if (by_name) {
        emit(c, EJ_TREE_NODE_ADDED, k->path, k->data, k->len, &k->stat);
    } else {
        load(c, path, flags & F_INIT);
    }
}

/* One name of a listing of n (stat st): a child the cache knows (read
 * again on a deep load), a new one, or one it skips. Returns 1 for a new
 * child, else 0; a name it cannot tell (out of memory) counts 0, which can
 * only cost probe_names a needless probe, never a missed one. */
static size_t kid_named(ej_tree_cache *c, struct tnode *n, const char *name, const struct Stat *st,
                        int flags)
{
    bool at_root = strcmp(n->path, "/") == 0;
    char *path = at_root ? ej__asprintf("/%s", name) : ej__asprintf("%s/%s", n->path, name);
    if (!path) {
        c->load_failed = true;
        return 0;
    }
    size_t fresh = 0;
    if (lookup(c, path)) {
        if (flags & F_DEEP)
            load(c, path, flags & (F_DEEP | F_INIT));
    } else {
        int shape = shape_of(c, path);
        if (shape != EJ__TREE_SKIP) {
            fresh = 1;
            kid_new(c, n, path, shape, st->pzxid, flags);
        }
    }
    free(path);
    return fresh;
}

/* NAME children have no watch: one deleted and created again between two
 * listings of n looks unchanged, named by both. n's cversion counts every
 * creation and deletion of a child: when it grew since the listing before
 * by more than `changes` (the names this listing added and removed), some
 * child came and went unseen, and each NAME child named by both listings
 * (n->kids[0, kept)) gets a stat read, answered in handle_probe. The first
 * listing checks nothing; after n itself was replaced, its kids were
 * dropped and none is kept. A reload after a reconnection compares with
 * the listing before it, of the old session or not. Counting fewer
 * changes than happened (a child whose deletion its own watch reported, a
 * SKIP child) can only cost needless probes. */
static void probe_names(ej_tree_cache *c, struct tnode *n, const struct Stat *st, size_t kept,
                        size_t changes, int flags)
{
    bool had = n->listed;
    int64_t grown = (int64_t)st->cversion - n->list_cversion;
    int64_t since = n->list_pzxid;
    n->listed = true;
    n->list_cversion = st->cversion;
    n->list_pzxid = st->pzxid;
    if (!had || grown <= (int64_t)changes)
        return;
    for (size_t i = 0; i < kept && i < n->nkids && !c->destroyed; i++) {
        struct tnode *k = n->kids[i];
        if (shape_of(c, k->path) == EJ__TREE_NAME)
            issue_read(c, k->path, R_PROBE, flags & F_INIT, since, 0);
    }
}

static void handle_children(ej_tree_cache *c, struct creq *r)
{
    struct tnode *n = lookup(c, r->path);
    if (r->rc == ZNONODE) {
        bool bare = n && shape_of(c, n->path) == EJ__TREE_CHILDREN;
        if (n && n->state == N_LIVE)
            node_gone(c, n);
        else if (bare && n == c->root)
            issue(c, n->path, R_EXISTS, r->flags & F_INIT); /* learn when it comes */
        else if (bare && n->state != N_ABSENT)
            node_gone(c, n); /* gone before its first answer */
        return;
    }
    if (r->rc == ZOK && n && shape_of(c, n->path) == EJ__TREE_CHILDREN) {
        children_node_seen(c, n, &r->st);
        if (c->destroyed)
            return;
    }
    /* A node not (yet) live asks for its children itself once its data is
     * in. */
    if (r->rc != ZOK || !n || n->state != N_LIVE)
        return;
    qsort(r->names, r->nnames, sizeof(char *), cmp_name);

    /* Children missing from the answer were deleted at or before it. */
    size_t changes = 0;
    for (size_t i = 0; i < n->nkids;) {
        struct tnode *k = n->kids[i];
        const char *name = k->name;
        if (bsearch(&name, r->names, r->nnames, sizeof(char *), cmp_name)) {
            i++;
            continue;
        }
        node_gone(c, k); /* removes k from n->kids */
        changes++;
        if (c->destroyed)
            return;
    }
    /* The kids left were named by the listing before too; kid_add appends,
     * so they stay the first `kept` entries. */
    size_t kept = n->nkids;
    for (size_t i = 0; i < r->nnames && !c->destroyed; i++)
        changes += kid_named(c, n, r->names[i], &r->st, r->flags);
    if (!c->destroyed)
        probe_names(c, n, &r->st, kept, changes, r->flags);
}

/* A stat read of a NAME child (probe_names). A czxid above the parent's
 * pzxid at the listing before (when the node was there already) and above
 * what the cache knew of the node (a repeated probe) means that the node
 * cached was deleted and this one created after it: report the one gone
 * and the new one, with the read's stat. NONODE: the next listing of the
 * parent removes it. The node's own stat stays zero, as for any NAME
 * node. */
static void handle_probe(ej_tree_cache *c, struct creq *r)
{
    struct tnode *n = lookup(c, r->path);
    if (r->rc != ZOK || !n || n->state != N_LIVE || shape_of(c, n->path) != EJ__TREE_NAME)
        return;
    if (r->st.czxid <= r->since || r->st.czxid <= n->known_zxid)
        return;
    n->known_zxid = r->st.czxid;
    struct ej_node_stat st;
    ej__reg_stat_from_zk(&st, &r->st);
    emit(c, EJ_TREE_NODE_REMOVED, n->path, n->data, n->len, &n->stat);
    emit(c, EJ_TREE_NODE_ADDED, n->path, n->data, n->len, &st);
}

static void handle_exists(ej_tree_cache *c, struct creq *r)
{
    if (r->rc == ZOK && c->root->state != N_LIVE)
        load(c, c->root->path, F_DEEP | (r->flags & F_INIT));
}

static void on_creq(ej_registry *reg, struct ej__reg_item *item)
{
    struct creq *r = (struct creq *)item;
    ej_tree_cache *c = find_cache(reg, r->cache_id);
    /* Answers from a closed handle say nothing about the current session. */
    if (!c || c->destroyed || !c->started || r->gen != reg->cur_gen)
        goto out_free;
    bool current = r->epoch == c->epoch;
    if (current && (r->flags & F_INIT))
        c->outstanding--;
    if (ej__reg_zk_is_connloss(r->rc) || r->rc == ZSYSTEMERROR) {
        /* Read again after the reconnection. */
        if (current)
            c->load_failed = true;
    } else if (r->rc != ZOK && r->rc != ZNONODE) {
        EJ_LOG(EJ_LOG_WARN, "reg", ej__reg_from_zk(r->rc), "tree cache: cannot read %s: %s",
               r->path, zerror(r->rc));
    }
    if (r->kind == R_DATA)
        handle_data(c, r);
    else if (r->kind == R_CHILDREN) {
        /* The listing a watch asked for: its removals were noticed when the
         * watch fired, a round trip before this answer. */
        c->noticed_ms = r->noticed;
        handle_children(c, r);
        c->noticed_ms = 0;
    } else if (r->kind == R_EXISTS)
        handle_exists(c, r);
    else
        handle_probe(c, r);
    check_initialized(c);
out_free:
    creq_free(r);
}

static void on_cwatch(ej_registry *reg, struct ej__reg_item *item)
{
    struct cwatch *w = (struct cwatch *)item;
    ej_tree_cache *c = find_cache(reg, w->cache_id);
    if (!c || c->destroyed || !c->started || w->gen != reg->cur_gen)
        goto out_free;
    struct tnode *n = lookup(c, w->path);
    if (!n)
        goto out_free;
    if (w->type == ZOO_CREATED_EVENT) {
        if (n == c->root)
            load(c, n->path, F_DEEP);
    } else if (w->type == ZOO_DELETED_EVENT) {
        c->noticed_ms = w->at;
        if (n->state != N_ABSENT)
            node_gone(c, n);
        c->noticed_ms = 0;
    } else if (w->type == ZOO_CHANGED_EVENT) {
        if (n->state == N_LIVE)
            issue(c, n->path, R_DATA, 0);
    } else if (w->type == ZOO_CHILD_EVENT) {
        if (n->state == N_LIVE)
            issue_read(c, n->path, R_CHILDREN, 0, 0, w->at);
    }
out_free:
    free(w);
}

/* Reload everything from the root (start, reconnection). */
static void reload(ej_tree_cache *c, bool announce)
{
    c->epoch++;
    c->outstanding = 0;
    c->load_failed = false;
    if (announce)
        c->init_pending = true;
    load(c, c->root->path, F_DEEP | F_INIT);
    check_initialized(c);
}

void ej__tree_cache_on_session(ej_registry *reg, bool new_session)
{
    ej__mutex_lock(&reg->mu);
    size_t n = reg->ncaches;
    uint64_t *ids = n ? malloc(n * sizeof(*ids)) : NULL;
    if (ids)
        for (size_t i = 0; i < n; i++)
            ids[i] = reg->caches[i].id;
    ej__mutex_unlock(&reg->mu);
    if (n && !ids) {
        EJ_LOG(EJ_LOG_ERROR, "reg", -ENOMEM, "tree caches not reloaded: out of memory");
        return;
    }
    for (size_t i = 0; i < n; i++) {
        ej_tree_cache *c = find_cache(reg, ids[i]);
        if (!c || !c->started || c->destroyed)
            continue;
        bool initialized;
        pthread_mutex_lock(&c->mu);
        initialized = c->initialized;
        pthread_mutex_unlock(&c->mu);
        reload(c, new_session || !initialized || c->init_pending);
    }
    free(ids);
}

/* ------------------------------------------------------------------------ */
/* Public API                                                                */

static void free_cache(ej_tree_cache *c)
{
    for (size_t i = 0; i < c->nbuckets; i++) {
        struct tnode *n = c->buckets[i];
        while (n) {
            struct tnode *next = n->hnext;
            node_free(n);
            n = next;
        }
    }
    free(c->buckets);
    free(c->root_path);
    pthread_mutex_destroy(&c->mu);
    pthread_cond_destroy(&c->cv);
    free(c);
}

void ej__tree_cache_free_all(ej_registry *reg)
{
    ej__mutex_lock(&reg->mu);
    struct ej__reg_cache_slot *slots = reg->caches;
    size_t n = reg->ncaches;
    reg->caches = NULL;
    reg->ncaches = reg->capcaches = 0;
    ej__mutex_unlock(&reg->mu);
    for (size_t i = 0; i < n; i++)
        free_cache(slots[i].cache);
    free(slots);
}

int ej_tree_cache_create(ej_registry *reg, const char *root, ej_tree_cache_fn listener, void *user,
                         ej_tree_cache **out)
{
    if (!out)
        return ej__reg_fail(EJ_EINVAL, "tree_cache_create: out is NULL");
    *out = NULL;
    if (!reg)
        return ej__reg_fail(EJ_EINVAL, "tree_cache_create: registry is NULL");
    const char *why = NULL;
    if (ej__reg_check_path(root, false, &why))
        return ej__reg_fail(EJ_EBADPATH, "tree_cache_create \"%s\": %s", root ? root : "(null)",
                            why);
    ej_tree_cache *c = calloc(1, sizeof(*c));
    if (!c)
        return ej__reg_fail(-ENOMEM, "tree_cache_create %s: out of memory", root);
    c->reg = reg;
    c->fn = listener;
    c->user = user;
    pthread_mutex_init(&c->mu, NULL);
    pthread_condattr_t a;
    pthread_condattr_init(&a);
    pthread_condattr_setclock(&a, CLOCK_MONOTONIC);
    pthread_cond_init(&c->cv, &a);
    pthread_condattr_destroy(&a);
    c->nbuckets = 64;
    c->buckets = calloc(c->nbuckets, sizeof(*c->buckets));
    c->root_path = strdup(root);
    c->root = node_new(root);
    if (!c->buckets || !c->root_path || !c->root) {
        if (c->root)
            node_free(c->root);
        c->root = NULL;
        free_cache(c);
        return ej__reg_fail(-ENOMEM, "tree_cache_create %s: out of memory", root);
    }
    c->root->state = N_ABSENT;
    hash_insert(c, c->root);

    int rc = 0;
    ej__mutex_lock(&reg->mu);
    if (reg->closing) {
        rc = ej__reg_fail(EJ_ECLOSED, "tree_cache_create %s: the registry is closing", root);
    } else if (reg->ncaches == reg->capcaches) {
        size_t cap = reg->capcaches ? reg->capcaches * 2 : 8;
        struct ej__reg_cache_slot *s = realloc(reg->caches, cap * sizeof(*s));
        if (!s) {
            rc = ej__reg_fail(-ENOMEM, "tree_cache_create %s: out of memory", root);
        } else {
            reg->caches = s;
            reg->capcaches = cap;
        }
    }
    if (rc == 0) {
        c->id = reg->next_cache_id++;
        reg->caches[reg->ncaches].id = c->id;
        reg->caches[reg->ncaches].cache = c;
        reg->ncaches++;
    }
    ej__mutex_unlock(&reg->mu);
    if (rc) {
        free_cache(c);
        return rc;
    }
    *out = c;
    return 0;
}

int ej__tree_cache_set_shape(ej_tree_cache *c, ej__tree_cache_shape_fn fn, void *user)
{
    if (!c)
        return ej__reg_fail(EJ_EINVAL, "tree_cache_set_shape: cache is NULL");
    c->shape = fn;
    c->shape_user = user;
    return 0;
}

static void start_task(ej_registry *reg, void *user)
{
    ej_tree_cache *c = find_cache(reg, (uint64_t)(uintptr_t)user);
    if (!c || c->destroyed || c->started)
        return;
    c->started = true;
    reload(c, true);
}

int ej_tree_cache_start(ej_tree_cache *c)
{
    if (!c)
        return ej__reg_fail(EJ_EINVAL, "tree_cache_start: cache is NULL");
    int rc = ej_registry_post(c->reg, start_task, (void *)(uintptr_t)c->id);
    if (rc)
        return ej__reg_fail(rc, "tree_cache_start %s: %s", c->root_path, ej_strerror(rc));
    return 0;
}

struct remove_item {
    struct ej__reg_item it;
    ej_tree_cache *c;
    bool done;
};

static void on_remove_item(ej_registry *reg, struct ej__reg_item *item)
{
    struct remove_item *ri = (struct remove_item *)item;
    unregister_cache(reg, ri->c->id);
    ri->c->destroyed = true;
    ej__mutex_lock(&reg->mu);
    ri->done = true;
    pthread_cond_broadcast(&reg->changed);
    ej__mutex_unlock(&reg->mu);
    /* ri lives on the waiting thread's stack: not ours to free. */
}

struct free_item {
    struct ej__reg_item it;
    ej_tree_cache *c;
};

static void on_free_item(ej_registry *reg, struct ej__reg_item *item)
{
    (void)reg;
    struct free_item *fi = (struct free_item *)item;
    free_cache(fi->c);
    free(fi);
}

void ej_tree_cache_destroy(ej_tree_cache *c)
{
    if (!c)
        return;
    ej_registry *reg = c->reg;
    if (ej_registry_on_dispatch_thread(reg)) {
        /* Possibly from the cache's own listener, deep inside its update:
         * stop it now, free it after the current item. */
        unregister_cache(reg, c->id);
        c->destroyed = true;
        struct free_item *fi = malloc(sizeof(*fi));
        if (!fi) {
            EJ_LOG(EJ_LOG_ERROR, "reg", -ENOMEM, "tree cache %s leaked: out of memory",
                   c->root_path);
            return;
        }
        fi->it.run = on_free_item;
        fi->c = c;
        ej__reg_enqueue(reg, &fi->it, true);
        return;
    }
    struct remove_item ri = {{NULL, on_remove_item}, c, false};
    ej__reg_enqueue(reg, &ri.it, true);
    ej__mutex_lock(&reg->mu);
    while (!ri.done)
        ej__mutex_wait(&reg->mu, &reg->changed);
    ej__mutex_unlock(&reg->mu);
    free_cache(c);
}

int ej_tree_cache_wait_initialized(ej_tree_cache *c, int timeout_ms)
{
    if (!c)
        return ej__reg_fail(EJ_EINVAL, "tree_cache_wait_initialized: cache is NULL");
    if (ej_registry_on_dispatch_thread(c->reg))
        return ej__reg_fail(EJ_EINVAL,
                            "tree_cache_wait_initialized %s: called on the dispatch thread",
                            c->root_path);
    int64_t deadline = ej__mono_ms() + (timeout_ms < 0 ? 0 : timeout_ms);
    struct timespec ts = ej__mono_timespec(deadline);
    int rc = 0;
    pthread_mutex_lock(&c->mu);
    while (!c->initialized) {
        if (pthread_cond_timedwait(&c->cv, &c->mu, &ts) == ETIMEDOUT && !c->initialized) {
            rc = EJ_ETIMEDOUT;
            break;
        }
    }
    pthread_mutex_unlock(&c->mu);
    if (rc)
        return ej__reg_fail(rc, "tree cache %s: not initialized within %d ms", c->root_path,
                            timeout_ms);
    return 0;
}

bool ej_tree_cache_is_initialized(const ej_tree_cache *cache)
{
    ej_tree_cache *c = (ej_tree_cache *)cache;
    pthread_mutex_lock(&c->mu);
    bool v = c->initialized;
    pthread_mutex_unlock(&c->mu);
    return v;
}

ej_registry *ej_tree_cache_registry(const ej_tree_cache *cache)
{
    return cache->reg;
}

const char *ej_tree_cache_root(const ej_tree_cache *cache)
{
    return cache->root_path;
}

int ej_tree_cache_get(ej_tree_cache *c, const char *path, char **data, size_t *len,
                      struct ej_node_stat *stat)
{
    if (data)
        *data = NULL;
    if (len)
        *len = 0;
    const char *why = NULL;
    if (!c)
        return ej__reg_fail(EJ_EINVAL, "tree_cache_get: cache is NULL");
    if (ej__reg_check_path(path, false, &why))
        return ej__reg_fail(EJ_EBADPATH, "tree_cache_get \"%s\": %s", path ? path : "(null)", why);
    int rc = 0;
    pthread_mutex_lock(&c->mu);
    struct tnode *n = lookup(c, path);
    if (!n || n->state != N_LIVE) {
        rc = EJ_ENONODE;
    } else {
        if (data) {
            *data = malloc(n->len + 1);
            if (*data) {
                memcpy(*data, n->data, n->len + 1);
            } else {
                rc = -ENOMEM;
            }
        }
        if (rc == 0 && len)
            *len = n->len;
        if (rc == 0 && stat)
            *stat = n->stat;
    }
    pthread_mutex_unlock(&c->mu);
    if (rc == EJ_ENONODE)
        return ej__reg_fail(rc, "tree_cache_get %s: not in the cache of %s", path, c->root_path);
    if (rc)
        return ej__reg_fail(rc, "tree_cache_get %s: out of memory", path);
    return 0;
}

bool ej_tree_cache_exists(ej_tree_cache *c, const char *path, struct ej_node_stat *stat)
{
    if (!c || ej__reg_check_path(path, false, NULL))
        return false;
    pthread_mutex_lock(&c->mu);
    struct tnode *n = lookup(c, path);
    bool ok = n && n->state == N_LIVE;
    if (ok && stat)
        *stat = n->stat;
    pthread_mutex_unlock(&c->mu);
    return ok;
}

int ej_tree_cache_children(ej_tree_cache *c, const char *path, ej_reg_sort sort, char ***names,
                           size_t *count)
{
    if (names)
        *names = NULL;
    if (count)
        *count = 0;
    const char *why = NULL;
    if (!c)
        return ej__reg_fail(EJ_EINVAL, "tree_cache_children: cache is NULL");
    if (ej__reg_check_path(path, false, &why))
        return ej__reg_fail(EJ_EBADPATH, "tree_cache_children \"%s\": %s", path ? path : "(null)",
                            why);
    int rc = 0;
    pthread_mutex_lock(&c->mu);
    struct tnode *n = lookup(c, path);
    if (!n || n->state != N_LIVE) {
        rc = EJ_ENONODE;
        goto out_unlock;
    }
    char **v = calloc(n->nkids + 1, sizeof(*v));
    if (!v) {
        rc = -ENOMEM;
        goto out_unlock;
    }
    size_t k = 0;
    for (size_t i = 0; i < n->nkids; i++) {
        if (n->kids[i]->state != N_LIVE)
            continue;
        if (!(v[k] = strdup(n->kids[i]->name))) {
            ej_registry_free_names(v);
            rc = -ENOMEM;
            goto out_unlock;
        }
        k++;
    }
    ej__reg_sort_names(v, k, sort == EJ_REG_UNSORTED ? EJ_REG_SORT_ASC : sort);
    if (names)
        *names = v;
    else
        ej_registry_free_names(v);
    if (count)
        *count = k;
out_unlock:
    pthread_mutex_unlock(&c->mu);
    if (rc == EJ_ENONODE)
        return ej__reg_fail(rc, "tree_cache_children %s: not in the cache of %s", path,
                            c->root_path);
    if (rc)
        return ej__reg_fail(rc, "tree_cache_children %s: out of memory", path);
    return 0;
}

size_t ej_tree_cache_size(ej_tree_cache *c)
{
    pthread_mutex_lock(&c->mu);
    size_t n = c->nlive;
    pthread_mutex_unlock(&c->mu);
    return n;
}
