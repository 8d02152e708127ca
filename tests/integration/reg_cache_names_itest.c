/* The tree cache's EJ__TREE_NAME shape against a real ZooKeeper: children
 * known by name only cost no read (the load of 20 is one listing, each
 * arrival one re-listing), show data "" and a zero stat, go when a listing
 * no longer names them; one deleted and created again between two
 * listings (in one transaction, or across a session expiry and the
 * reload after it) is reported REMOVED then ADDED with the new node's
 * stat, and nothing else is; a DATA child among NAME siblings still has
 * its data read and watched. One shared server, a fresh namespace per
 * test; the cache's registry sends nothing but the cache's requests. */
#include <pthread.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>
#include <cmocka.h>

#include "ejob/log.h"
#include "ejob/registry.h"
#include "reg/internal.h"
#include "reg_open.h"
#include "zk_fixture.h"

#define ROOT "/names_job/instances"

static int64_t now_ms(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (int64_t)ts.tv_sec * 1000 + ts.tv_nsec / 1000000;
}

static ej_registry *open_ns(const char *ns)
{
    ej_registry *reg = reg_open(ns, NULL);
    if (!reg)
        fail_msg("registry: %s", ej_registry_errmsg(NULL));
    assert_int_equal(ej_registry_wait_connected(reg, 5000), 0);
    return reg;
}

static char *kid(const char *name)
{
    char *p = NULL;
    assert_true(asprintf(&p, ROOT "/%s", name) > 0);
    return p;
}

static bool stat_is_zero(const struct ej_node_stat *st)
{
    static const struct ej_node_stat zero;
    return memcmp(st, &zero, sizeof(zero)) == 0;
}

/* Depth 0 children only, depth 1 by name; the one path in user (may be
 * NULL) has its data read. */
static int names_shape(const char *path, size_t depth, void *user)
{
    const char *data_kid = user;
    if (depth == 0)
        return EJ__TREE_CHILDREN;
    if (data_kid && strcmp(path, data_kid) == 0)
        return EJ__TREE_DATA;
    return EJ__TREE_NAME;
}

/* ------------------------------------------------------------------------ */
/* An event recorder: every event, and the set of paths its ADDED and
 * REMOVED events leave, with what does not fit counted as an anomaly. */

struct ev {
    ej_tree_event_type type;
    char *path;
    char *data;
    size_t len;
    struct ej_node_stat stat;
};

enum { MAX_EVENTS = 4096, MAX_LIVE = 256 };

struct recorder {
    pthread_mutex_t mu;
    struct ev v[MAX_EVENTS];
    size_t n;
    char *live[MAX_LIVE];
    size_t nlive;
    int anomalies;
};

static struct recorder *rec_new(void)
{
    struct recorder *r = calloc(1, sizeof(*r));
    assert_non_null(r);
    pthread_mutex_init(&r->mu, NULL);
    return r;
}

static void rec_free(struct recorder *r)
{
    for (size_t i = 0; i < r->n; i++) {
        free(r->v[i].path);
        free(r->v[i].data);
    }
    for (size_t i = 0; i < r->nlive; i++)
        free(r->live[i]);
    pthread_mutex_destroy(&r->mu);
    free(r);
}

/* Under r->mu. */
static void live_apply(struct recorder *r, const struct ej_tree_event *e)
{
    size_t i = 0;
    while (i < r->nlive && strcmp(r->live[i], e->path) != 0)
        i++;
    bool known = i < r->nlive;
    if (e->type == EJ_TREE_NODE_ADDED) {
        if (known || r->nlive == MAX_LIVE) {
            fprintf(stderr, "ADDED %s: already live\n", e->path);
            r->anomalies++;
        } else {
            r->live[r->nlive++] = strdup(e->path);
        }
    } else if (e->type == EJ_TREE_NODE_REMOVED) {
        if (!known) {
            fprintf(stderr, "REMOVED %s: not live\n", e->path);
            r->anomalies++;
        } else {
            free(r->live[i]);
            r->live[i] = r->live[--r->nlive];
        }
    } else if (e->type == EJ_TREE_NODE_UPDATED && !known) {
        fprintf(stderr, "UPDATED %s: not live\n", e->path);
        r->anomalies++;
    }
}

static void on_event(ej_tree_cache *cache, const struct ej_tree_event *e, void *user)
{
    (void)cache;
    struct recorder *r = user;
    pthread_mutex_lock(&r->mu);
    if (e->type != EJ_TREE_INITIALIZED)
        live_apply(r, e);
    if (r->n < MAX_EVENTS) {
        struct ev *x = &r->v[r->n++];
        x->type = e->type;
        x->path = e->path ? strdup(e->path) : NULL;
        x->data = e->data ? strndup(e->data, e->len) : NULL;
        x->len = e->len;
        if (e->stat)
            x->stat = *e->stat;
    } else {
        r->anomalies++;
    }
    pthread_mutex_unlock(&r->mu);
}

static size_t rec_count(struct recorder *r)
{
    pthread_mutex_lock(&r->mu);
    size_t n = r->n;
    pthread_mutex_unlock(&r->mu);
    return n;
}

/* Index of the first event of type on path (NULL: any) at or after from,
 * or -1. Events are never moved: the caller may read r->v[i] after. */
static long find_ev(struct recorder *r, size_t from, ej_tree_event_type type, const char *path)
{
    long found = -1;
    pthread_mutex_lock(&r->mu);
    for (size_t i = from; i < r->n && found < 0; i++)
        if (r->v[i].type == type && (!path || (r->v[i].path && !strcmp(r->v[i].path, path))))
            found = (long)i;
    pthread_mutex_unlock(&r->mu);
    return found;
}

static long wait_ev(struct recorder *r, size_t from, ej_tree_event_type type, const char *path,
                    int ms)
{
    int64_t end = now_ms() + ms;
    long i;
    while ((i = find_ev(r, from, type, path)) < 0 && now_ms() < end)
        usleep(2000);
    return i;
}

static size_t count_ev(struct recorder *r, size_t from, size_t to, ej_tree_event_type type)
{
    size_t k = 0;
    pthread_mutex_lock(&r->mu);
    for (size_t i = from; i < to && i < r->n; i++)
        k += r->v[i].type == type;
    pthread_mutex_unlock(&r->mu);
    return k;
}

/* Start the cache and wait for its first INITIALIZED event (the listener
 * hears of it after ej_tree_cache_wait_initialized returns). Its index. */
static long start_and_wait(ej_tree_cache *cache, struct recorder *r)
{
    assert_int_equal(ej_tree_cache_start(cache), 0);
    assert_int_equal(ej_tree_cache_wait_initialized(cache, 5000), 0);
    long init = wait_ev(r, 0, EJ_TREE_INITIALIZED, NULL, 3000);
    assert_true(init >= 0);
    return init;
}

/* Nothing more for the cache to do: its answers are in and applied (a
 * settled cache sends nothing by itself; a pause lets a stray watch event
 * or answer arrive before the second barrier). */
static void settle(ej_registry *reg)
{
    assert_int_equal(ej_registry_barrier(reg, 3000), 0);
    usleep(300 * 1000);
    assert_int_equal(ej_registry_barrier(reg, 3000), 0);
}

static void check_name_event(struct recorder *r, long i, const char *data_why)
{
    assert_true(i >= 0);
    pthread_mutex_lock(&r->mu);
    const struct ev *x = &r->v[i];
    bool ok = x->data && x->data[0] == '\0' && x->len == 0 && stat_is_zero(&x->stat);
    pthread_mutex_unlock(&r->mu);
    if (!ok)
        fail_msg("%s: event %ld on %s: not \"\" with a zero stat", data_why, i, x->path);
}

static void create_kid(ej_registry *reg, const char *name, ej_reg_mode mode)
{
    char *p = kid(name);
    assert_int_equal(ej_registry_create_node(reg, p, "x", 1, mode, EJ_REG_CREATE_PARENTS, NULL), 0);
    free(p);
}

/* ------------------------------------------------------------------------ */

/* The load, arrivals and departures of children known by name, and what
 * they cost. */
/* A cache of ROOT shaped by names_shape(user), reporting to r; not started. */
static ej_tree_cache *names_cache(ej_registry *reg, struct recorder *r, void *user)
{
    ej_tree_cache *cache = NULL;
    assert_int_equal(ej_tree_cache_create(reg, ROOT, on_event, r, &cache), 0);
    assert_int_equal(ej__tree_cache_set_shape(cache, names_shape, user), 0);
    return cache;
}

static void test_names_load_and_changes(void **state)
{
    (void)state;
    char *ns = zkf_unique_namespace("names");
    ej_registry *other = open_ns(ns);
    ej_registry *reg = open_ns(ns); /* the cache's own, nothing else */
    char name[32];
    for (int i = 0; i < 20; i++) {
        snprintf(name, sizeof(name), "i%02d", i);
        create_kid(other, name, i % 2 ? EJ_REG_EPHEMERAL : EJ_REG_PERSISTENT);
    }
    struct recorder *r = rec_new();
    ej_tree_cache *cache = names_cache(reg, r, NULL);
    assert_int_equal(ej_registry_barrier(reg, 3000), 0);

    uint64_t before = ej_registry_request_count(reg);
    long init = start_and_wait(cache, r);
    settle(reg);
    uint64_t load_reqs = ej_registry_request_count(reg) - before;
    printf("names: load of 20 children: %llu requests\n", (unsigned long long)load_reqs);
    /* A read each would be 21. */
    assert_true(load_reqs <= 3);
    /* The root and its 20 children. */
    assert_int_equal(count_ev(r, 0, (size_t)init, EJ_TREE_NODE_ADDED), 21);
    assert_true(find_ev(r, 0, EJ_TREE_NODE_ADDED, ROOT) >= 0);
    assert_int_equal(ej_tree_cache_size(cache), 21);
    for (int i = 0; i < 20; i++) {
        snprintf(name, sizeof(name), "i%02d", i);
        char *p = kid(name);
        long a = find_ev(r, 0, EJ_TREE_NODE_ADDED, p);
        assert_true(a >= 0 && a < init);
        check_name_event(r, a, "load");
        struct ej_node_stat st;
        memset(&st, 0xff, sizeof(st));
        assert_true(ej_tree_cache_exists(cache, p, &st));
        assert_true(stat_is_zero(&st));
        char *data = NULL;
        size_t len = 99;
        memset(&st, 0xff, sizeof(st));
        assert_int_equal(ej_tree_cache_get(cache, p, &data, &len, &st), 0);
        assert_string_equal(data, "");
        assert_int_equal(len, 0);
        assert_true(stat_is_zero(&st));
        free(data);
        free(p);
    }
    char **names = NULL;
    size_t n = 0;
    assert_int_equal(ej_tree_cache_children(cache, ROOT, EJ_REG_SORT_ASC, &names, &n), 0);
    assert_int_equal(n, 20);
    assert_string_equal(names[0], "i00");
    assert_string_equal(names[19], "i19");
    ej_registry_free_names(names);
    assert_int_equal(ej_registry_request_count(reg) - before, load_reqs); /* lookups: local */

    /* Arrivals, one by one: a re-listing each, nothing per child. */
    size_t mark = rec_count(r);
    before = ej_registry_request_count(reg);
    for (int i = 20; i < 30; i++) {
        snprintf(name, sizeof(name), "i%02d", i);
        create_kid(other, name, i % 2 ? EJ_REG_EPHEMERAL : EJ_REG_PERSISTENT);
        char *p = kid(name);
        check_name_event(r, wait_ev(r, mark, EJ_TREE_NODE_ADDED, p, 3000), "arrival");
        free(p);
    }
    settle(reg);
    uint64_t add_reqs = ej_registry_request_count(reg) - before;
    printf("names: 10 arrivals: %llu requests\n", (unsigned long long)add_reqs);
    assert_true(add_reqs <= 15);
    assert_int_equal(rec_count(r) - mark, 10);
    assert_int_equal(ej_tree_cache_size(cache), 31);

    /* Departures: the listing that no longer names them removes them. */
    mark = rec_count(r);
    for (int i = 0; i < 5; i++) {
        snprintf(name, sizeof(name), "i%02d", i * 3);
        char *p = kid(name);
        assert_int_equal(ej_registry_delete(other, p, -1), 0);
        long rm = wait_ev(r, mark, EJ_TREE_NODE_REMOVED, p, 3000);
        check_name_event(r, rm, "departure");
        assert_false(ej_tree_cache_exists(cache, p, NULL));
        free(p);
    }
    settle(reg);
    assert_int_equal(rec_count(r) - mark, 5);
    assert_int_equal(ej_tree_cache_size(cache), 26);
    pthread_mutex_lock(&r->mu);
    assert_int_equal(r->anomalies, 0);
    assert_int_equal(r->nlive, 26);
    pthread_mutex_unlock(&r->mu);

    ej_tree_cache_destroy(cache);
    assert_int_equal(ej_registry_delete_recursive(other, "/"), 0);
    ej_registry_destroy(other);
    ej_registry_destroy(reg);
    rec_free(r);
    free(ns);
}

/* X replaced: REMOVED (its "" and zero stat) then ADDED with the new
 * node's stat; no other child hears of it. */
static void check_replaced(struct recorder *r, size_t mark, const char *x,
                           const struct ej_node_stat *now)
{
    long rm = wait_ev(r, mark, EJ_TREE_NODE_REMOVED, x, 5000);
    check_name_event(r, rm, "replaced, removed");
    long ad = wait_ev(r, (size_t)rm + 1, EJ_TREE_NODE_ADDED, x, 5000);
    assert_true(ad > rm);
    pthread_mutex_lock(&r->mu);
    struct ev e = r->v[ad];
    pthread_mutex_unlock(&r->mu);
    assert_string_equal(e.data, "");
    assert_int_equal(e.len, 0);
    assert_int_equal(e.stat.czxid, now->czxid);
    assert_int_equal(e.stat.ctime, now->ctime);
    assert_int_equal(e.stat.ephemeral_owner, now->ephemeral_owner);
}

static void node_stat(ej_registry *reg, const char *path, struct ej_node_stat *st)
{
    bool ex = false;
    assert_int_equal(ej_registry_exists(reg, path, &ex, st), 0);
    assert_true(ex);
}

static void test_names_replaced_in_a_transaction(void **state)
{
    (void)state;
    char *ns = zkf_unique_namespace("nrepl");
    ej_registry *other = open_ns(ns);
    ej_registry *reg = open_ns(ns);
    for (int i = 0; i < 5; i++) {
        char name[8];
        snprintf(name, sizeof(name), "a%d", i);
        create_kid(other, name, EJ_REG_PERSISTENT);
    }
    struct recorder *r = rec_new();
    ej_tree_cache *cache = names_cache(reg, r, NULL);
    start_and_wait(cache, r);
    settle(reg);

    /* One arrival and one departure in one transaction: the listing
     * accounts for both changes, nothing is probed. */
    char *a4 = kid("a4"), *a5 = kid("a5"), *a6 = kid("a6");
    size_t mark = rec_count(r);
    uint64_t before = ej_registry_request_count(reg);
    struct ej_reg_op swap[] = {
        {.type = EJ_REG_OP_CREATE, .path = a5, .mode = EJ_REG_PERSISTENT},
        {.type = EJ_REG_OP_DELETE, .path = a4, .version = -1},
    };
    assert_int_equal(ej_registry_multi(other, swap, 2, NULL), 0);
    assert_true(wait_ev(r, mark, EJ_TREE_NODE_ADDED, a5, 3000) >= 0);
    assert_true(wait_ev(r, mark, EJ_TREE_NODE_REMOVED, a4, 3000) >= 0);
    settle(reg);
    assert_int_equal(rec_count(r) - mark, 2);
    assert_int_equal(ej_registry_request_count(reg) - before, 1);

    /* X deleted and created again in one transaction. */
    char *x = kid("a1"), *y = kid("a2");
    struct ej_node_stat old, now;
    node_stat(other, x, &old);
    mark = rec_count(r);
    before = ej_registry_request_count(reg);
    struct ej_reg_op again[] = {
        {.type = EJ_REG_OP_DELETE, .path = x, .version = -1},
        {.type = EJ_REG_OP_CREATE, .path = x, .mode = EJ_REG_PERSISTENT},
    };
    assert_int_equal(ej_registry_multi(other, again, 2, NULL), 0);
    node_stat(other, x, &now);
    assert_true(now.czxid > old.czxid);
    check_replaced(r, mark, x, &now);
    settle(reg);
    assert_int_equal(rec_count(r) - mark, 2); /* nothing for y and the others */
    assert_true(find_ev(r, mark, EJ_TREE_NODE_REMOVED, y) < 0);
    assert_true(find_ev(r, mark, EJ_TREE_NODE_ADDED, y) < 0);
    uint64_t reqs = ej_registry_request_count(reg) - before;
    printf("names: replacement among 5: %llu requests\n", (unsigned long long)reqs);
    assert_true(reqs >= 2 && reqs <= 6); /* the listing, a probe per child */
    assert_true(ej_tree_cache_exists(cache, x, NULL));
    assert_int_equal(ej_tree_cache_size(cache), 6);

    /* A replacement beside an arrival: the listing sees one change of
     * three. */
    mark = rec_count(r);
    node_stat(other, y, &old);
    struct ej_reg_op mixed[] = {
        {.type = EJ_REG_OP_DELETE, .path = y, .version = -1},
        {.type = EJ_REG_OP_CREATE, .path = y, .mode = EJ_REG_EPHEMERAL},
        {.type = EJ_REG_OP_CREATE, .path = a6, .mode = EJ_REG_PERSISTENT},
    };
    assert_int_equal(ej_registry_multi(other, mixed, 3, NULL), 0);
    node_stat(other, y, &now);
    assert_int_equal(now.ephemeral_owner, ej_registry_session_id(other));
    check_replaced(r, mark, y, &now);
    assert_true(wait_ev(r, mark, EJ_TREE_NODE_ADDED, a6, 3000) >= 0);
    settle(reg);
    assert_int_equal(rec_count(r) - mark, 3);
    pthread_mutex_lock(&r->mu);
    assert_int_equal(r->anomalies, 0);
    pthread_mutex_unlock(&r->mu);

    ej_tree_cache_destroy(cache);
    assert_int_equal(ej_registry_delete_recursive(other, "/"), 0);
    ej_registry_destroy(other);
    ej_registry_destroy(reg);
    rec_free(r);
    free(a4);
    free(a5);
    free(a6);
    free(x);
    free(y);
    free(ns);
}

/* Holds the dispatch thread (ej_registry_post) until opened, 10 s at most
 * so a failed test does not hang its registry's destroy. */
struct gate {
    pthread_mutex_t mu;
    pthread_cond_t cv;
    bool entered, open;
};

static void gate_task(ej_registry *reg, void *user)
{
    (void)reg;
    struct gate *g = user;
    struct timespec end;
    clock_gettime(CLOCK_REALTIME, &end);
    end.tv_sec += 10;
    pthread_mutex_lock(&g->mu);
    g->entered = true;
    pthread_cond_broadcast(&g->cv);
    while (!g->open && pthread_cond_timedwait(&g->cv, &g->mu, &end) == 0)
        ;
    pthread_mutex_unlock(&g->mu);
}

/* The process's own ephemeral child, its session expired and the node
 * created again before the cache reloads: the reload's listing names it
 * as before, and its stat says that it is another. Reported before the
 * reload's INITIALIZED. */
static void test_names_replaced_across_expiry(void **state)
{
    (void)state;
    char *ns = zkf_unique_namespace("nexp");
    ej_registry *other = open_ns(ns);
    ej_registry *reg = open_ns(ns);
    create_kid(other, "peer", EJ_REG_PERSISTENT);
    create_kid(reg, "me", EJ_REG_EPHEMERAL);
    char *me = kid("me"), *peer = kid("peer");
    struct recorder *r = rec_new();
    ej_tree_cache *cache = names_cache(reg, r, NULL);
    start_and_wait(cache, r);
    settle(reg);

    size_t mark = rec_count(r);
    struct gate g = {PTHREAD_MUTEX_INITIALIZER, PTHREAD_COND_INITIALIZER, false, false};
    assert_int_equal(ej_registry_post(reg, gate_task, &g), 0);
    pthread_mutex_lock(&g.mu);
    while (!g.entered)
        pthread_cond_wait(&g.cv, &g.mu);
    pthread_mutex_unlock(&g.mu);
    int64_t sid = 0;
    char pw[EJ_REG_PASSWD_LEN];
    assert_int_equal(ej_registry_session_credentials(reg, &sid, pw), 0);
    int erc = zkf_expire_session(zkf_shared(), sid, pw, EJ_REG_PASSWD_LEN);
    /* The ephemeral node went with the session; here it is again. */
    int crc = ej_registry_create_node(other, me, "", 0, EJ_REG_EPHEMERAL, 0, NULL);
    pthread_mutex_lock(&g.mu);
    g.open = true;
    pthread_cond_broadcast(&g.cv);
    pthread_mutex_unlock(&g.mu);
    assert_int_equal(erc, 0);
    assert_int_equal(crc, 0);

    struct ej_node_stat now;
    node_stat(other, me, &now);
    check_replaced(r, mark, me, &now);
    long init2 = wait_ev(r, mark, EJ_TREE_INITIALIZED, NULL, 8000);
    long ad = find_ev(r, mark, EJ_TREE_NODE_ADDED, me);
    assert_true(init2 > ad);
    assert_true(ej_registry_session_id(reg) != sid);
    settle(reg);
    assert_int_equal(rec_count(r) - mark, 3); /* REMOVED, ADDED, INITIALIZED */
    assert_true(find_ev(r, mark, EJ_TREE_NODE_REMOVED, peer) < 0);
    pthread_mutex_lock(&r->mu);
    assert_int_equal(r->anomalies, 0);
    pthread_mutex_unlock(&r->mu);

    ej_tree_cache_destroy(cache);
    assert_int_equal(ej_registry_delete_recursive(other, "/"), 0);
    ej_registry_destroy(other);
    ej_registry_destroy(reg);
    rec_free(r);
    free(me);
    free(peer);
    free(ns);
}

/* The instance's own child among children known by name: its data is read
 * and watched as before. */
static void test_names_with_a_data_child(void **state)
{
    (void)state;
    char *ns = zkf_unique_namespace("ndata");
    ej_registry *other = open_ns(ns);
    ej_registry *reg = open_ns(ns);
    char *me = kid("me");
    assert_int_equal(
        ej_registry_create_node(other, me, "d1", 2, EJ_REG_PERSISTENT, EJ_REG_CREATE_PARENTS, NULL),
        0);
    create_kid(other, "n0", EJ_REG_PERSISTENT);
    create_kid(other, "n1", EJ_REG_EPHEMERAL);
    char *n0 = kid("n0");
    struct recorder *r = rec_new();
    ej_tree_cache *cache = names_cache(reg, r, me);
    assert_int_equal(ej_registry_barrier(reg, 3000), 0);
    uint64_t before = ej_registry_request_count(reg);
    long init = start_and_wait(cache, r);
    settle(reg);
    /* The listing, and the data of me. */
    assert_int_equal(ej_registry_request_count(reg) - before, 2);
    assert_int_equal(count_ev(r, 0, (size_t)init, EJ_TREE_NODE_ADDED), 4);
    long a = find_ev(r, 0, EJ_TREE_NODE_ADDED, me);
    assert_true(a >= 0 && a < init);
    struct ej_node_stat st;
    node_stat(other, me, &st);
    pthread_mutex_lock(&r->mu);
    assert_string_equal(r->v[a].data, "d1");
    assert_int_equal(r->v[a].stat.czxid, st.czxid);
    pthread_mutex_unlock(&r->mu);
    check_name_event(r, find_ev(r, 0, EJ_TREE_NODE_ADDED, n0), "sibling");

    size_t mark = rec_count(r);
    assert_int_equal(ej_registry_set(other, me, "d2", 2, -1, NULL), 0);
    long u = wait_ev(r, mark, EJ_TREE_NODE_UPDATED, me, 3000);
    assert_true(u >= 0);
    pthread_mutex_lock(&r->mu);
    assert_string_equal(r->v[u].data, "d2");
    assert_int_equal(r->v[u].stat.version, 1);
    pthread_mutex_unlock(&r->mu);
    char *data = NULL;
    assert_int_equal(ej_tree_cache_get(cache, me, &data, NULL, NULL), 0);
    assert_string_equal(data, "d2");
    free(data);
    settle(reg);
    assert_int_equal(rec_count(r) - mark, 1);

    /* Its deletion comes through its data watch, with its last data. */
    mark = rec_count(r);
    assert_int_equal(ej_registry_delete(other, me, -1), 0);
    long rm = wait_ev(r, mark, EJ_TREE_NODE_REMOVED, me, 3000);
    assert_true(rm >= 0);
    pthread_mutex_lock(&r->mu);
    assert_string_equal(r->v[rm].data, "d2");
    assert_int_equal(r->anomalies, 0);
    pthread_mutex_unlock(&r->mu);
    settle(reg);
    assert_int_equal(rec_count(r) - mark, 1);
    assert_true(ej_tree_cache_exists(cache, n0, NULL));

    ej_tree_cache_destroy(cache);
    assert_int_equal(ej_registry_delete_recursive(other, "/"), 0);
    ej_registry_destroy(other);
    ej_registry_destroy(reg);
    rec_free(r);
    free(me);
    free(n0);
    free(ns);
}

int main(void)
{
    if (!getenv("EJOB_LOG_LEVEL"))
        ej_log_set_level(EJ_LOG_WARN);
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_names_load_and_changes),
        cmocka_unit_test(test_names_replaced_in_a_transaction),
        cmocka_unit_test(test_names_replaced_across_expiry),
        cmocka_unit_test(test_names_with_a_data_child),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
