/* Connection faults against a dedicated ZooKeeper: server stop and restart
 * within the session timeout (same session), forced session expiry (new
 * session, cache rebuilt), and a cut-off longer than the session timeout
 * (LOST while still disconnected). */
#include <pthread.h>
#include <setjmp.h>
#include <stdarg.h>
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
#include "zk_fixture.h"

static int64_t now_ms(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (int64_t)ts.tv_sec * 1000 + ts.tv_nsec / 1000000;
}

struct st_ev {
    ej_reg_state state;
    bool new_session;
    int64_t at;
};

struct st_log {
    pthread_mutex_t mu;
    struct st_ev v[64];
    int n;
    bool off_dispatch;
};

static void on_state(ej_registry *reg, ej_reg_state s, bool new_session, void *user)
{
    struct st_log *l = user;
    pthread_mutex_lock(&l->mu);
    if (!ej_registry_on_dispatch_thread(reg))
        l->off_dispatch = true;
    if (l->n < 64)
        l->v[l->n++] = (struct st_ev){s, new_session, now_ms()};
    pthread_mutex_unlock(&l->mu);
}

/* Index of the first state s at or after from, waiting up to ms; -1. */
static int wait_state(struct st_log *l, int from, ej_reg_state s, int ms)
{
    int64_t end = now_ms() + ms;
    for (;;) {
        pthread_mutex_lock(&l->mu);
        for (int i = from; i < l->n; i++) {
            if (l->v[i].state == s) {
                pthread_mutex_unlock(&l->mu);
                return i;
            }
        }
        pthread_mutex_unlock(&l->mu);
        if (now_ms() > end)
            return -1;
        usleep(5000);
    }
}

static struct ej_registry_opts opts_for(zkf_server *zk, struct st_log *l, int session_ms)
{
    struct ej_registry_opts o = {0};
    o.servers = zkf_connect_string(zk);
    o.namespace_ = "fault";
    o.session_timeout_ms = session_ms;
    o.connection_timeout_ms = 5000;
    o.base_sleep_ms = 20;
    o.max_sleep_ms = 100;
    o.max_retries = 3;
    o.on_state = on_state;
    o.on_state_user = l;
    return o;
}

/* Tree-cache events, kept simple: type, path, data, owner. */
struct cev {
    ej_tree_event_type type;
    char path[128];
    char data[32];
    int64_t owner;
};

struct cache_log {
    pthread_mutex_t mu;
    struct cev v[512];
    int n;
    int initialized;
};

static void on_cache(ej_tree_cache *cache, const struct ej_tree_event *e, void *user)
{
    (void)cache;
    struct cache_log *l = user;
    pthread_mutex_lock(&l->mu);
    if (e->type == EJ_TREE_INITIALIZED)
        l->initialized++;
    if (l->n < 512) {
        struct cev *x = &l->v[l->n++];
        x->type = e->type;
        snprintf(x->path, sizeof(x->path), "%s", e->path ? e->path : "");
        snprintf(x->data, sizeof(x->data), "%.*s", (int)e->len, e->data ? e->data : "");
        x->owner = e->stat ? e->stat->ephemeral_owner : 0;
    }
    pthread_mutex_unlock(&l->mu);
}

static int find_cev(struct cache_log *l, int from, ej_tree_event_type t, const char *path)
{
    pthread_mutex_lock(&l->mu);
    int found = -1;
    for (int i = from; i < l->n; i++) {
        if (l->v[i].type == t && (!path || strcmp(l->v[i].path, path) == 0)) {
            found = i;
            break;
        }
    }
    pthread_mutex_unlock(&l->mu);
    return found;
}

static int wait_cev(struct cache_log *l, int from, ej_tree_event_type t, const char *path, int ms)
{
    int64_t end = now_ms() + ms;
    int i;
    while ((i = find_cev(l, from, t, path)) < 0 && now_ms() < end)
        usleep(5000);
    return i;
}

static int cev_mark(struct cache_log *l)
{
    pthread_mutex_lock(&l->mu);
    int n = l->n;
    pthread_mutex_unlock(&l->mu);
    return n;
}

static int count_cev(struct cache_log *l, ej_tree_event_type t)
{
    pthread_mutex_lock(&l->mu);
    int c = 0;
    for (int i = 0; i < l->n; i++)
        c += l->v[i].type == t;
    pthread_mutex_unlock(&l->mu);
    return c;
}

struct wlog {
    pthread_mutex_t mu;
    int count;
    ej_reg_watch_event last;
};

static void on_watch(ej_registry *reg, ej_reg_watch_event ev, const char *path, void *user)
{
    (void)reg;
    (void)path;
    struct wlog *w = user;
    pthread_mutex_lock(&w->mu);
    w->count++;
    w->last = ev;
    pthread_mutex_unlock(&w->mu);
}

/* A listener that works on LOST: the new session must serve it. */
struct lost_op {
    pthread_mutex_t mu;
    int calls;
    int rc;
};

static void on_state_op(ej_registry *reg, ej_reg_state s, bool new_session, void *user)
{
    (void)new_session;
    struct lost_op *l = user;
    if (s != EJ_REG_LOST)
        return;
    bool ex = false;
    int rc = ej_registry_exists(reg, "/job/config", &ex, NULL);
    pthread_mutex_lock(&l->mu);
    l->calls++;
    l->rc = rc == 0 && ex ? 0 : (rc ? rc : -1);
    pthread_mutex_unlock(&l->mu);
}

static bool exists_fresh(zkf_server *zk, const char *path)
{
    struct st_log l = {.mu = PTHREAD_MUTEX_INITIALIZER};
    struct ej_registry_opts o = opts_for(zk, &l, 4000);
    o.on_state = NULL;
    ej_registry *r = NULL;
    assert_int_equal(ej_registry_create(&r, &o), 0);
    bool ex = false;
    assert_int_equal(ej_registry_exists(r, path, &ex, NULL), 0);
    ej_registry_destroy(r);
    return ex;
}

/* ------------------------------------------------------------------------ */

/* The session outlives the server's restart: a JVM's start on a loaded
 * machine takes seconds, and a session shorter than that expires (a
 * different test: test_expiry_new_session). */
#define RESTART_SESSION_MS 12000

static void test_stop_restart_same_session(void **state)
{
    (void)state;
    zkf_server *zk = NULL;
    zkf_opts zo = {.max_session_ms = RESTART_SESSION_MS};
    assert_int_equal(zkf_start(&zk, &zo), 0);
    struct st_log sl = {.mu = PTHREAD_MUTEX_INITIALIZER};
    struct ej_registry_opts o = opts_for(zk, &sl, RESTART_SESSION_MS);
    ej_registry *reg = NULL;
    assert_int_equal(ej_registry_create(&reg, &o), 0);
    assert_int_equal(ej_registry_negotiated_timeout_ms(reg), RESTART_SESSION_MS);
    int64_t sid = ej_registry_session_id(reg);
    assert_int_equal(ej_registry_create_node(reg, "/job/instances/me", "", 0, EJ_REG_EPHEMERAL,
                                             EJ_REG_CREATE_PARENTS, NULL),
                     0);
    struct cache_log cl = {.mu = PTHREAD_MUTEX_INITIALIZER};
    ej_tree_cache *cache = NULL;
    assert_int_equal(ej_tree_cache_create(reg, "/job", on_cache, &cl, &cache), 0);
    assert_int_equal(ej_tree_cache_start(cache), 0);
    assert_int_equal(ej_tree_cache_wait_initialized(cache, 5000), 0);

    assert_int_equal(zkf_stop(zk), 0);
    int s = wait_state(&sl, 0, EJ_REG_SUSPENDED, 3000);
    assert_true(s >= 1);
    assert_false(ej_registry_is_connected(reg));
    assert_int_equal(ej_registry_state(reg), EJ_REG_SUSPENDED);

    /* Operations fail cleanly, after the retries, naming path and server. */
    int64_t t0 = now_ms();
    char *data = NULL;
    assert_int_equal(ej_registry_get(reg, "/job/config", &data, NULL, NULL), EJ_ECONNLOSS);
    int64_t took = now_ms() - t0;
    assert_true(took < 2000);
    const char *m = ej_registry_errmsg(reg);
    assert_non_null(strstr(m, "/job/config"));
    assert_non_null(strstr(m, zkf_connect_string(zk)));
    struct ej_reg_op op = {.type = EJ_REG_OP_CHECK, .path = "/job", .version = -1};
    assert_int_equal(ej_registry_multi(reg, &op, 1, NULL), EJ_ECONNLOSS);
    /* Cached reads still answer. */
    assert_true(ej_tree_cache_exists(cache, "/job/instances/me", NULL));

    assert_int_equal(zkf_restart(zk), 0);
    int rc = wait_state(&sl, s, EJ_REG_RECONNECTED, RESTART_SESSION_MS);
    assert_true(rc > s);
    pthread_mutex_lock(&sl.mu);
    assert_false(sl.v[rc].new_session);
    int64_t gap = sl.v[rc].at - sl.v[s].at;
    for (int i = 0; i < sl.n; i++)
        assert_int_not_equal(sl.v[i].state, EJ_REG_LOST);
    assert_false(sl.off_dispatch);
    pthread_mutex_unlock(&sl.mu);
    printf("suspended for %lld ms, same session\n", (long long)gap);
    assert_int_equal(ej_registry_session_id(reg), sid);
    assert_true(exists_fresh(zk, "/job/instances/me"));
    assert_int_equal(ej_registry_get(reg, "/job/instances/me", &data, NULL, NULL), 0);
    free(data);
    /* The cache kept its nodes and saw no removal. */
    assert_int_equal(ej_registry_barrier(reg, 2000), 0);
    assert_int_equal(count_cev(&cl, EJ_TREE_NODE_REMOVED), 0);
    assert_true(ej_tree_cache_exists(cache, "/job/instances/me", NULL));
    /* ... and still follows changes. */
    int mark = cev_mark(&cl);
    assert_int_equal(ej_registry_persist(reg, "/job/config", "after", 5), 0);
    assert_true(wait_cev(&cl, mark, EJ_TREE_NODE_ADDED, "/job/config", 3000) >= 0);

    ej_tree_cache_destroy(cache);
    ej_registry_destroy(reg);
    zkf_destroy(zk);
}

static void test_expiry_new_session(void **state)
{
    (void)state;
    zkf_server *zk = NULL;
    assert_int_equal(zkf_start(&zk, NULL), 0);
    struct st_log sl = {.mu = PTHREAD_MUTEX_INITIALIZER};
    struct ej_registry_opts o = opts_for(zk, &sl, 4000);
    ej_registry *reg = NULL;
    assert_int_equal(ej_registry_create(&reg, &o), 0);
    assert_int_equal(ej_registry_persist(reg, "/job/config", "c", 1), 0);
    assert_int_equal(ej_registry_persist(reg, "/job/sharding/0/instance", "me", 2), 0);
    assert_int_equal(
        ej_registry_create_node(reg, "/job/sharding/0/running", "r", 1, EJ_REG_EPHEMERAL, 0, NULL),
        0);
    assert_int_equal(ej_registry_create_node(reg, "/job/instances/me", "", 0, EJ_REG_EPHEMERAL,
                                             EJ_REG_CREATE_PARENTS, NULL),
                     0);
    struct cache_log cl = {.mu = PTHREAD_MUTEX_INITIALIZER};
    ej_tree_cache *cache = NULL;
    assert_int_equal(ej_tree_cache_create(reg, "/job", on_cache, &cl, &cache), 0);
    assert_int_equal(ej_tree_cache_start(cache), 0);
    assert_int_equal(ej_tree_cache_wait_initialized(cache, 5000), 0);
    struct lost_op lo = {.mu = PTHREAD_MUTEX_INITIALIZER, .rc = 1};
    assert_int_equal(ej_registry_add_listener(reg, on_state_op, &lo), 0);
    struct wlog wl = {.mu = PTHREAD_MUTEX_INITIALIZER};
    assert_int_equal(ej_registry_get_watch(reg, "/job/config", on_watch, &wl, NULL, NULL, NULL), 0);

    int64_t old_sid = 0;
    char pw[EJ_REG_PASSWD_LEN];
    assert_int_equal(ej_registry_session_credentials(reg, &old_sid, pw), 0);
    int mark = cev_mark(&cl);
    assert_int_equal(zkf_expire_session(zk, old_sid, pw, EJ_REG_PASSWD_LEN), 0);

    int lost = wait_state(&sl, 0, EJ_REG_LOST, 8000);
    assert_true(lost >= 1);
    int rec = wait_state(&sl, lost, EJ_REG_RECONNECTED, 8000);
    assert_true(rec > lost);
    pthread_mutex_lock(&sl.mu);
    assert_true(sl.v[rec].new_session);
    pthread_mutex_unlock(&sl.mu);
    int64_t new_sid = ej_registry_session_id(reg);
    assert_true(new_sid != 0 && new_sid != old_sid);
    pthread_mutex_lock(&lo.mu);
    assert_int_equal(lo.calls, 1);
    assert_int_equal(lo.rc, 0); /* served by the new session */
    pthread_mutex_unlock(&lo.mu);

    /* The cache rebuilt: the old session's ephemeral nodes are reported
     * removed, with what they held, then INITIALIZED again. */
    int rm = wait_cev(&cl, mark, EJ_TREE_NODE_REMOVED, "/job/sharding/0/running", 5000);
    assert_true(rm >= 0);
    pthread_mutex_lock(&cl.mu);
    assert_string_equal(cl.v[rm].data, "r");
    assert_int_equal(cl.v[rm].owner, old_sid);
    pthread_mutex_unlock(&cl.mu);
    assert_true(wait_cev(&cl, mark, EJ_TREE_NODE_REMOVED, "/job/instances/me", 5000) >= 0);
    int init2 = wait_cev(&cl, mark, EJ_TREE_INITIALIZED, NULL, 5000);
    assert_true(init2 > rm);
    assert_false(ej_tree_cache_exists(cache, "/job/sharding/0/running", NULL));
    assert_true(ej_tree_cache_exists(cache, "/job/sharding/0/instance", NULL));

    /* The one-shot watch of the old session was cancelled. */
    assert_int_equal(ej_registry_barrier(reg, 2000), 0);
    pthread_mutex_lock(&wl.mu);
    assert_int_equal(wl.count, 1);
    assert_int_equal(wl.last, EJ_REG_WATCH_CANCELLED);
    pthread_mutex_unlock(&wl.mu);

    /* The new session works, and the cache follows it: re-registering. */
    mark = cev_mark(&cl);
    assert_int_equal(
        ej_registry_create_node(reg, "/job/instances/me", "", 0, EJ_REG_EPHEMERAL, 0, NULL), 0);
    int ad = wait_cev(&cl, mark, EJ_TREE_NODE_ADDED, "/job/instances/me", 3000);
    assert_true(ad >= 0);
    pthread_mutex_lock(&cl.mu);
    assert_int_equal(cl.v[ad].owner, new_sid);
    pthread_mutex_unlock(&cl.mu);

    ej_tree_cache_destroy(cache);
    ej_registry_destroy(reg);
    zkf_destroy(zk);
}

static void test_lost_while_cut_off(void **state)
{
    (void)state;
    zkf_server *zk = NULL;
    assert_int_equal(zkf_start(&zk, NULL), 0);
    struct st_log sl = {.mu = PTHREAD_MUTEX_INITIALIZER};
    struct ej_registry_opts o = opts_for(zk, &sl, 2000);
    ej_registry *reg = NULL;
    assert_int_equal(ej_registry_create(&reg, &o), 0);
    int t = ej_registry_negotiated_timeout_ms(reg);
    assert_int_equal(t, 2000);
    int64_t old_sid = ej_registry_session_id(reg);
    assert_int_equal(ej_registry_create_node(reg, "/eph", "", 0, EJ_REG_EPHEMERAL, 0, NULL), 0);

    assert_int_equal(zkf_stop(zk), 0);
    int s = wait_state(&sl, 0, EJ_REG_SUSPENDED, 3000);
    assert_true(s >= 1);
    /* No server to tell it: LOST comes from the session timeout. */
    int lost = wait_state(&sl, s, EJ_REG_LOST, 5000);
    assert_true(lost > s);
    pthread_mutex_lock(&sl.mu);
    int64_t after = sl.v[lost].at - sl.v[s].at;
    pthread_mutex_unlock(&sl.mu);
    printf("LOST %lld ms after SUSPENDED (session timeout %d ms)\n", (long long)after, t);
    assert_true(after >= t - 100 && after < t + 1500);
    assert_int_equal(ej_registry_state(reg), EJ_REG_LOST);

    assert_int_equal(zkf_restart(zk), 0);
    int rec = wait_state(&sl, lost, EJ_REG_RECONNECTED, 8000);
    assert_true(rec > lost);
    pthread_mutex_lock(&sl.mu);
    assert_true(sl.v[rec].new_session);
    pthread_mutex_unlock(&sl.mu);
    assert_true(ej_registry_session_id(reg) != old_sid);
    /* The server expires the abandoned session in its own time. */
    int64_t end = now_ms() + 8000;
    bool ex = true;
    while (now_ms() < end) {
        assert_int_equal(ej_registry_exists(reg, "/eph", &ex, NULL), 0);
        if (!ex)
            break;
        usleep(100000);
    }
    assert_false(ex);
    ej_registry_destroy(reg);
    zkf_destroy(zk);
}

int main(void)
{
    if (!getenv("EJOB_LOG_LEVEL"))
        ej_log_set_level(EJ_LOG_ERROR);
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_stop_restart_same_session),
        cmocka_unit_test(test_expiry_new_session),
        cmocka_unit_test(test_lost_while_cut_off),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
