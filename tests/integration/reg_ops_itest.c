/* Registry operations against a real ZooKeeper: every synchronous operation
 * and its errors, transactions, watches, ephemeral nodes, digest ACLs, the
 * dispatch thread. One shared server, a fresh namespace per test. */
#include <errno.h>
#include <pthread.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stdatomic.h>
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

static struct ej_registry_opts base_opts(const char *ns)
{
    zkf_server *zk = zkf_shared();
    assert_non_null(zk);
    struct ej_registry_opts o = {0};
    o.servers = zkf_connect_string(zk);
    o.namespace_ = ns;
    o.session_timeout_ms = 4000;
    o.connection_timeout_ms = 5000;
    o.base_sleep_ms = 20;
    o.max_sleep_ms = 100;
    o.max_retries = 3;
    return o;
}

static ej_registry *open_ns(const char *ns)
{
    struct ej_registry_opts o = base_opts(ns);
    ej_registry *reg = NULL;
    int rc = ej_registry_create(&reg, &o);
    if (rc)
        fail_msg("create: %s", ej_registry_errmsg(NULL));
    return reg;
}

static void assert_msg_has(const char *needle)
{
    const char *m = ej_registry_errmsg(NULL);
    if (!strstr(m, needle))
        fail_msg("error message \"%s\" lacks \"%s\"", m, needle);
}

/* ------------------------------------------------------------------------ */

/* opts.takeover_margin_ms: 0 the default (or EJOB_TAKEOVER_MARGIN_MS), > 0
 * as given, negative none. */
static void test_takeover_margin(void **state)
{
    (void)state;
    const struct {
        int asked;
        const char *env;
        int want;
    } cases[] = {
        {0, NULL, EJ_REG_TAKEOVER_MARGIN_DEFAULT_MS},
        {0, "250", 250},
        {0, "junk", EJ_REG_TAKEOVER_MARGIN_DEFAULT_MS},
        {2500, "250", 2500},
        {-1, NULL, 0},
    };
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        if (cases[i].env != NULL)
            setenv("EJOB_TAKEOVER_MARGIN_MS", cases[i].env, 1);
        else
            unsetenv("EJOB_TAKEOVER_MARGIN_MS");
        struct ej_registry_opts o = base_opts("margin");
        o.takeover_margin_ms = cases[i].asked;
        ej_registry *reg = NULL;
        if (ej_registry_create(&reg, &o) != 0)
            fail_msg("create: %s", ej_registry_errmsg(NULL));
        if (ej_registry_takeover_margin_ms(reg) != cases[i].want)
            fail_msg("case %zu: margin %d, want %d", i, ej_registry_takeover_margin_ms(reg),
                     cases[i].want);
        ej_registry_destroy(reg);
    }
    unsetenv("EJOB_TAKEOVER_MARGIN_MS");
}

static void test_crud(void **state)
{
    (void)state;
    char *ns = zkf_unique_namespace("crud");
    ej_registry *reg = open_ns(ns);
    assert_string_equal(ej_registry_namespace(reg), ns);
    assert_true(ej_registry_session_id(reg) != 0);
    int t = ej_registry_negotiated_timeout_ms(reg);
    assert_true(t >= 400 && t <= 4000);
    assert_true(ej_registry_is_connected(reg));

    /* create + get */
    assert_int_equal(ej_registry_create_node(reg, "/job", "cfg", 3, EJ_REG_PERSISTENT, 0, NULL), 0);
    char *data = NULL;
    size_t len = 99;
    struct ej_node_stat st;
    assert_int_equal(ej_registry_get(reg, "/job", &data, &len, &st), 0);
    assert_int_equal(len, 3);
    assert_string_equal(data, "cfg");
    assert_int_equal(st.version, 0);
    assert_int_equal(st.data_length, 3);
    assert_int_equal(st.ephemeral_owner, 0);
    assert_true(st.czxid > 0 && st.mzxid == st.czxid);
    free(data);

    /* empty data */
    assert_int_equal(ej_registry_create_node(reg, "/job/e", NULL, 0, EJ_REG_PERSISTENT, 0, NULL),
                     0);
    assert_int_equal(ej_registry_get(reg, "/job/e", &data, &len, NULL), 0);
    assert_int_equal(len, 0);
    assert_string_equal(data, "");
    free(data);

    /* exists */
    bool ex = false;
    assert_int_equal(ej_registry_exists(reg, "/job", &ex, &st), 0);
    assert_true(ex);
    assert_int_equal(st.num_children, 1);
    assert_int_equal(ej_registry_exists(reg, "/nope", &ex, NULL), 0);
    assert_false(ex);

    /* set with version */
    struct ej_node_stat st2;
    assert_int_equal(ej_registry_set(reg, "/job", "v1", 2, 0, &st2), 0);
    assert_int_equal(st2.version, 1);
    assert_int_equal(ej_registry_set(reg, "/job", "v2", 2, 0, NULL), EJ_EBADVERSION);
    assert_msg_has("/job");
    assert_int_equal(ej_registry_set(reg, "/job", "v2", 2, -1, NULL), 0);
    assert_int_equal(ej_registry_set(reg, "/missing", "x", 1, -1, NULL), EJ_ENONODE);
    assert_msg_has("/missing");

    /* errors of create */
    assert_int_equal(ej_registry_create_node(reg, "/job", "", 0, EJ_REG_PERSISTENT, 0, NULL),
                     EJ_ENODEEXISTS);
    assert_msg_has("/job");
    assert_int_equal(ej_registry_create_node(reg, "/a/b/c", "", 0, EJ_REG_PERSISTENT, 0, NULL),
                     EJ_ENONODE);
    assert_int_equal(ej_registry_create_node(reg, "/a/b/c", "x", 1, EJ_REG_PERSISTENT,
                                             EJ_REG_CREATE_PARENTS, NULL),
                     0);
    assert_int_equal(ej_registry_get(reg, "/a/b", &data, &len, NULL), 0);
    assert_int_equal(len, 0); /* parents get empty data */
    free(data);
    assert_int_equal(ej_registry_create_node(reg, "/x", "", 0, (ej_reg_mode)42, 0, NULL),
                     EJ_EINVAL);

    /* sequential: the actual path comes back namespace-relative */
    char *p1 = NULL, *p2 = NULL;
    assert_int_equal(ej_registry_create_node(reg, "/job/latch/latch-", "", 0,
                                             EJ_REG_EPHEMERAL_SEQUENTIAL, EJ_REG_CREATE_PARENTS,
                                             &p1),
                     0);
    assert_int_equal(ej_registry_create_node(reg, "/job/latch/latch-", "", 0,
                                             EJ_REG_EPHEMERAL_SEQUENTIAL, 0, &p2),
                     0);
    assert_non_null(p1);
    assert_int_equal(strncmp(p1, "/job/latch/latch-", 17), 0);
    assert_int_equal(strlen(p1), 17 + 10);
    assert_true(strcmp(p1, p2) < 0);
    free(p1);
    free(p2);
    assert_int_equal(ej_registry_create_node(reg, "/seq/", "", 0, EJ_REG_PERSISTENT_SEQUENTIAL,
                                             EJ_REG_CREATE_PARENTS, &p1),
                     0);
    assert_string_equal(p1, "/seq/0000000000");
    free(p1);

    /* ephemeral: no children */
    assert_int_equal(ej_registry_create_node(reg, "/eph", "", 0, EJ_REG_EPHEMERAL, 0, NULL), 0);
    assert_int_equal(ej_registry_exists(reg, "/eph", &ex, &st), 0);
    assert_int_equal(st.ephemeral_owner, ej_registry_session_id(reg));
    assert_int_equal(ej_registry_create_node(reg, "/eph/kid", "", 0, EJ_REG_PERSISTENT, 0, NULL),
                     EJ_ENOCHILDREN);

    /* container */
    assert_int_equal(ej_registry_create_node(reg, "/cont/kid", "", 0, EJ_REG_EPHEMERAL,
                                             EJ_REG_CONTAINER_PARENTS, NULL),
                     0);

    /* Missing parents are created the nearest first: when only the parent
     * is missing (a reaped container), the create, the parent and the
     * create again; not a refused create of every ancestor above it. */
    assert_int_equal(ej_registry_create_node(reg, "/deep/a/b/latch/kid", "", 0, EJ_REG_EPHEMERAL,
                                             EJ_REG_CONTAINER_PARENTS, NULL),
                     0);
    assert_int_equal(ej_registry_delete(reg, "/deep/a/b/latch/kid", -1), 0);
    assert_int_equal(ej_registry_delete(reg, "/deep/a/b/latch", -1), 0);
    uint64_t req0 = ej_registry_request_count(reg);
    assert_int_equal(ej_registry_create_node(reg, "/deep/a/b/latch/kid", "", 0, EJ_REG_EPHEMERAL,
                                             EJ_REG_CONTAINER_PARENTS, NULL),
                     0);
    assert_int_equal(ej_registry_request_count(reg) - req0, 3);
    /* and from higher up, each missing one once: b and latch */
    assert_int_equal(ej_registry_delete(reg, "/deep/a/b/latch/kid", -1), 0);
    assert_int_equal(ej_registry_delete(reg, "/deep/a/b/latch", -1), 0);
    assert_int_equal(ej_registry_delete(reg, "/deep/a/b", -1), 0);
    req0 = ej_registry_request_count(reg);
    assert_int_equal(ej_registry_create_node(reg, "/deep/a/b/latch/kid", "", 0, EJ_REG_EPHEMERAL,
                                             EJ_REG_CONTAINER_PARENTS, NULL),
                     0);
    assert_int_equal(ej_registry_request_count(reg) - req0, 5);
    assert_true(ej_registry_exists(reg, "/deep/a/b/latch/kid", &ex, &st) == 0 && ex);

    /* children, sorted both ways */
    const char *kids[] = {"10.0.0.2@-@1", "10.0.0.17@-@9", "10.0.0.1@-@5"};
    for (int i = 0; i < 3; i++) {
        char path[64];
        snprintf(path, sizeof(path), "/job/instances/%s", kids[i]);
        assert_int_equal(ej_registry_create_node(reg, path, "", 0, EJ_REG_EPHEMERAL,
                                                 EJ_REG_CREATE_PARENTS, NULL),
                         0);
    }
    char **names = NULL;
    size_t n = 0;
    assert_int_equal(ej_registry_children(reg, "/job/instances", EJ_REG_SORT_DESC, &names, &n), 0);
    assert_int_equal(n, 3);
    assert_string_equal(names[0], "10.0.0.2@-@1");
    assert_string_equal(names[1], "10.0.0.1@-@5"); /* '@' sorts after '7' */
    assert_string_equal(names[2], "10.0.0.17@-@9");
    assert_null(names[3]);
    ej_registry_free_names(names);
    assert_int_equal(ej_registry_children(reg, "/job/instances", EJ_REG_SORT_ASC, &names, NULL), 0);
    assert_string_equal(names[0], "10.0.0.17@-@9");
    ej_registry_free_names(names);
    assert_int_equal(ej_registry_children(reg, "/nope", EJ_REG_UNSORTED, &names, &n), EJ_ENONODE);
    assert_null(names);
    assert_msg_has("/nope");
    /* the namespace root */
    assert_int_equal(ej_registry_children(reg, "/", EJ_REG_SORT_ASC, &names, &n), 0);
    assert_true(n >= 4);
    ej_registry_free_names(names);

    /* delete */
    assert_int_equal(ej_registry_delete(reg, "/job", -1), EJ_ENOTEMPTY);
    assert_msg_has("/job");
    assert_int_equal(ej_registry_delete(reg, "/job/e", 5), EJ_EBADVERSION);
    assert_int_equal(ej_registry_delete(reg, "/job/e", 0), 0);
    assert_int_equal(ej_registry_delete(reg, "/job/e", -1), EJ_ENONODE);
    assert_int_equal(ej_registry_delete_recursive(reg, "/job"), 0);
    assert_int_equal(ej_registry_exists(reg, "/job", &ex, NULL), 0);
    assert_false(ex);
    assert_int_equal(ej_registry_delete_recursive(reg, "/job"), 0); /* already gone */
    assert_int_equal(ej_registry_get(reg, "/job", &data, &len, NULL), EJ_ENONODE);
    assert_null(data);

    /* persist / persist_ephemeral */
    assert_int_equal(ej_registry_persist(reg, "/p/q/config", "a", 1), 0);
    assert_int_equal(ej_registry_persist(reg, "/p/q/config", "bb", 2), 0);
    assert_int_equal(ej_registry_get(reg, "/p/q/config", &data, &len, &st), 0);
    assert_string_equal(data, "bb");
    assert_int_equal(st.version, 1);
    free(data);
    assert_int_equal(ej_registry_persist(reg, "/p/r", "x", 1), 0);
    assert_int_equal(ej_registry_create_node(reg, "/p/r/kid", "", 0, EJ_REG_PERSISTENT, 0, NULL),
                     0);
    assert_int_equal(ej_registry_persist_ephemeral(reg, "/p/r", "eph", 3), 0);
    assert_int_equal(ej_registry_exists(reg, "/p/r", &ex, &st), 0);
    assert_true(ex);
    assert_int_equal(st.ephemeral_owner, ej_registry_session_id(reg));
    assert_int_equal(st.num_children, 0);

    assert_true(ej_registry_request_count(reg) > 40);
    assert_int_equal(ej_registry_delete_recursive(reg, "/"), 0);
    ej_registry_destroy(reg);
    free(ns);
}

static void test_bad_input(void **state)
{
    (void)state;
    char *ns = zkf_unique_namespace("bad");
    ej_registry *reg = open_ns(ns);
    uint64_t before = ej_registry_request_count(reg);
    char *data = NULL;
    assert_int_equal(ej_registry_get(reg, "no/slash", &data, NULL, NULL), EJ_EBADPATH);
    assert_msg_has("no/slash");
    assert_int_equal(ej_registry_get(reg, "/a//b", &data, NULL, NULL), EJ_EBADPATH);
    assert_msg_has("/a//b");
    assert_int_equal(ej_registry_create_node(reg, "/trailing/", "", 0, EJ_REG_PERSISTENT, 0, NULL),
                     EJ_EBADPATH);
    assert_int_equal(ej_registry_set(reg, "/a/../b", "", 0, -1, NULL), EJ_EBADPATH);
    assert_int_equal(ej_registry_delete(reg, NULL, -1), EJ_EBADPATH);
    bool ex;
    assert_int_equal(ej_registry_exists(reg, "", &ex, NULL), EJ_EBADPATH);

    /* Oversize data is refused before sending; the session is unharmed. */
    size_t big = EJ_REG_MAX_DATA_LEN + 1;
    char *buf = malloc(big);
    memset(buf, 'x', big);
    assert_int_equal(ej_registry_create_node(reg, "/big", buf, big, EJ_REG_PERSISTENT, 0, NULL),
                     EJ_ETOOBIG);
    assert_msg_has("/big");
    assert_int_equal(ej_registry_persist(reg, "/big", "", 0), 0);
    assert_int_equal(ej_registry_set(reg, "/big", buf, big, -1, NULL), EJ_ETOOBIG);
    assert_int_equal(ej_registry_request_count(reg) - before, 2); /* the persist only */
    /* Just under the limit works, in one round trip each way. */
    assert_int_equal(ej_registry_set(reg, "/big", buf, 900000, -1, NULL), 0);
    size_t len = 0;
    before = ej_registry_request_count(reg);
    assert_int_equal(ej_registry_get(reg, "/big", &data, &len, NULL), 0);
    assert_int_equal(ej_registry_request_count(reg) - before, 1);
    assert_int_equal(len, 900000);
    assert_int_equal(memcmp(data, buf, len), 0);
    free(data);
    free(buf);
    assert_true(ej_registry_is_connected(reg));
    assert_int_equal(ej_registry_delete_recursive(reg, "/"), 0);
    ej_registry_destroy(reg);
    free(ns);
}

static void test_multi(void **state)
{
    (void)state;
    char *ns = zkf_unique_namespace("multi");
    ej_registry *reg = open_ns(ns);
    assert_int_equal(ej_registry_persist(reg, "/job/leader/sharding/necessary", "", 0), 0);
    assert_int_equal(ej_registry_persist(reg, "/job/leader/sharding/processing", "", 0), 0);
    assert_int_equal(ej_registry_persist(reg, "/job/sharding/0", "", 0), 0);
    assert_int_equal(ej_registry_persist(reg, "/job/config", "c", 1), 0);

    /* All-or-nothing: the last op fails, nothing of the first ones stays. */
    struct ej_reg_op bad[] = {
        {.type = EJ_REG_OP_CREATE, .path = "/job/sharding/0/instance", .data = "i1", .len = 2},
        {.type = EJ_REG_OP_DELETE, .path = "/job/leader/sharding/necessary", .version = -1},
        {.type = EJ_REG_OP_SET, .path = "/job/config", .data = "c2", .len = 2, .version = -1},
        {.type = EJ_REG_OP_CHECK, .path = "/job/config", .version = 7},
    };
    size_t failed = 99;
    assert_int_equal(ej_registry_multi(reg, bad, 4, &failed), EJ_EBADVERSION);
    assert_int_equal(failed, 3);
    assert_int_equal(bad[3].result, EJ_EBADVERSION);
    assert_int_equal(bad[0].result, EJ_EAGAIN);
    assert_msg_has("/job/config");
    bool ex;
    assert_int_equal(ej_registry_exists(reg, "/job/sharding/0/instance", &ex, NULL), 0);
    assert_false(ex);
    assert_int_equal(ej_registry_exists(reg, "/job/leader/sharding/necessary", &ex, NULL), 0);
    assert_true(ex);
    char *data;
    assert_int_equal(ej_registry_get(reg, "/job/config", &data, NULL, NULL), 0);
    assert_string_equal(data, "c");
    free(data);

    /* A failing op in the middle. */
    struct ej_reg_op mid[] = {
        {.type = EJ_REG_OP_CREATE, .path = "/job/a", .data = "", .len = 0},
        {.type = EJ_REG_OP_CREATE, .path = "/job/config", .data = "", .len = 0},
        {.type = EJ_REG_OP_CREATE, .path = "/job/b", .data = "", .len = 0},
    };
    assert_int_equal(ej_registry_multi(reg, mid, 3, &failed), EJ_ENODEEXISTS);
    assert_int_equal(failed, 1);
    assert_int_equal(ej_registry_exists(reg, "/job/a", &ex, NULL), 0);
    assert_false(ex);

    /* Success, with a sequential create's path. */
    char *seq = NULL;
    struct ej_reg_op good[] = {
        {.type = EJ_REG_OP_CREATE, .path = "/job/sharding/0/instance", .data = "i1", .len = 2},
        {.type = EJ_REG_OP_DELETE, .path = "/job/leader/sharding/necessary", .version = -1},
        {.type = EJ_REG_OP_DELETE, .path = "/job/leader/sharding/processing", .version = 0},
        {.type = EJ_REG_OP_SET, .path = "/job/config", .data = "c2", .len = 2, .version = 0},
        {.type = EJ_REG_OP_CHECK, .path = "/job/config", .version = -1},
        {.type = EJ_REG_OP_CREATE,
         .path = "/job/s-",
         .mode = EJ_REG_PERSISTENT_SEQUENTIAL,
         .out_path = &seq},
    };
    assert_int_equal(ej_registry_multi(reg, good, 6, &failed), 0);
    assert_int_equal(failed, 6);
    for (int i = 0; i < 6; i++)
        assert_int_equal(good[i].result, 0);
    assert_non_null(seq);
    assert_int_equal(strncmp(seq, "/job/s-", 7), 0);
    free(seq);
    assert_int_equal(ej_registry_get(reg, "/job/sharding/0/instance", &data, NULL, NULL), 0);
    assert_string_equal(data, "i1");
    free(data);
    assert_int_equal(ej_registry_exists(reg, "/job/leader/sharding/processing", &ex, NULL), 0);
    assert_false(ex);

    /* Validation names the op. */
    uint64_t before = ej_registry_request_count(reg);
    struct ej_reg_op badpath[] = {
        {.type = EJ_REG_OP_CHECK, .path = "/job", .version = -1},
        {.type = EJ_REG_OP_DELETE, .path = "job", .version = -1},
    };
    assert_int_equal(ej_registry_multi(reg, badpath, 2, &failed), EJ_EBADPATH);
    assert_int_equal(failed, 1);
    assert_msg_has("op 1");
    char *big = calloc(1, 600000);
    struct ej_reg_op toobig[] = {
        {.type = EJ_REG_OP_SET, .path = "/job/config", .data = big, .len = 600000, .version = -1},
        {.type = EJ_REG_OP_SET, .path = "/job/a", .data = big, .len = 600000, .version = -1},
    };
    assert_int_equal(ej_registry_multi(reg, toobig, 2, &failed), EJ_ETOOBIG);
    assert_int_equal(failed, 2);
    free(big);
    assert_int_equal(ej_registry_multi(reg, NULL, 0, &failed), EJ_EINVAL);
    assert_int_equal(ej_registry_request_count(reg), before);

    assert_int_equal(ej_registry_delete_recursive(reg, "/"), 0);
    ej_registry_destroy(reg);
    free(ns);
}

static void test_dead_server(void **state)
{
    (void)state;
    struct ej_registry_opts o = base_opts("dead");
    /* A port nothing listens on: the shared server's port + 1 is not ours to
     * know, so take a port from a socket we close. */
    o.servers = "127.0.0.1:1";
    o.connection_timeout_ms = 800;
    ej_registry *reg = (ej_registry *)0x1;
    int64_t t0 = now_ms();
    assert_int_equal(ej_registry_create(&reg, &o), EJ_ETIMEDOUT);
    int64_t took = now_ms() - t0;
    assert_null(reg);
    assert_msg_has("127.0.0.1:1");
    assert_msg_has("800 ms");
    assert_true(took >= 750 && took < 3000);
    o.servers = "not a host list";
    assert_true(ej_registry_create(&reg, &o) < 0);
    assert_null(reg);
}

/* ------------------------------------------------------------------------ */
/* Ephemeral nodes and watches                                               */

static void test_ephemeral_vanishes(void **state)
{
    (void)state;
    char *ns = zkf_unique_namespace("eph");
    ej_registry *a = open_ns(ns);
    ej_registry *b = open_ns(ns);
    assert_int_equal(ej_registry_create_node(a, "/job/instances/1.2.3.4@-@1", "", 0,
                                             EJ_REG_EPHEMERAL, EJ_REG_CREATE_PARENTS, NULL),
                     0);
    bool ex = false;
    struct ej_node_stat st;
    assert_int_equal(ej_registry_exists(b, "/job/instances/1.2.3.4@-@1", &ex, &st), 0);
    assert_true(ex);
    assert_int_equal(st.ephemeral_owner, ej_registry_session_id(a));
    ej_registry_destroy(a);
    /* Closing the session removes its ephemeral nodes at once. */
    assert_int_equal(ej_registry_exists(b, "/job/instances/1.2.3.4@-@1", &ex, NULL), 0);
    assert_false(ex);
    assert_int_equal(ej_registry_exists(b, "/job/instances", &ex, NULL), 0);
    assert_true(ex);
    assert_int_equal(ej_registry_delete_recursive(b, "/"), 0);
    ej_registry_destroy(b);
    free(ns);
}

struct watch_log {
    pthread_mutex_t mu;
    pthread_cond_t cv;
    int count;
    ej_reg_watch_event last;
    char path[128];
    bool on_dispatch;
};

static void on_watch(ej_registry *reg, ej_reg_watch_event ev, const char *path, void *user)
{
    struct watch_log *w = user;
    pthread_mutex_lock(&w->mu);
    w->count++;
    w->last = ev;
    snprintf(w->path, sizeof(w->path), "%s", path);
    w->on_dispatch = ej_registry_on_dispatch_thread(reg);
    pthread_cond_broadcast(&w->cv);
    pthread_mutex_unlock(&w->mu);
}

static int wait_count(struct watch_log *w, int n, int ms)
{
    int64_t end = now_ms() + ms;
    pthread_mutex_lock(&w->mu);
    while (w->count < n && now_ms() < end) {
        pthread_mutex_unlock(&w->mu);
        usleep(5000);
        pthread_mutex_lock(&w->mu);
    }
    int c = w->count;
    pthread_mutex_unlock(&w->mu);
    return c;
}

static void watch_init(struct watch_log *w)
{
    memset(w, 0, sizeof(*w));
    pthread_mutex_init(&w->mu, NULL);
    pthread_cond_init(&w->cv, NULL);
}

static void test_watches(void **state)
{
    (void)state;
    char *ns = zkf_unique_namespace("watch");
    ej_registry *reg = open_ns(ns);
    ej_registry *other = open_ns(ns);
    struct watch_log w;
    watch_init(&w);

    /* data watch: fires once for two changes */
    assert_int_equal(ej_registry_persist(other, "/n", "0", 1), 0);
    char *data = NULL;
    assert_int_equal(ej_registry_get_watch(reg, "/n", on_watch, &w, &data, NULL, NULL), 0);
    assert_string_equal(data, "0");
    free(data);
    assert_int_equal(ej_registry_set(other, "/n", "1", 1, -1, NULL), 0);
    assert_int_equal(wait_count(&w, 1, 3000), 1);
    assert_int_equal(w.last, EJ_REG_WATCH_CHANGED);
    assert_string_equal(w.path, "/n");
    assert_true(w.on_dispatch);
    assert_int_equal(ej_registry_set(other, "/n", "2", 1, -1, NULL), 0);
    usleep(300000);
    assert_int_equal(ej_registry_barrier(reg, 2000), 0);
    assert_int_equal(w.count, 1);

    /* set again: fires again, on deletion */
    assert_int_equal(ej_registry_get_watch(reg, "/n", on_watch, &w, NULL, NULL, NULL), 0);
    assert_int_equal(ej_registry_delete(other, "/n", -1), 0);
    assert_int_equal(wait_count(&w, 2, 3000), 2);
    assert_int_equal(w.last, EJ_REG_WATCH_DELETED);

    /* exists watch on a missing node: creation */
    bool ex = true;
    assert_int_equal(ej_registry_exists_watch(reg, "/n", on_watch, &w, &ex, NULL), 0);
    assert_false(ex);
    assert_int_equal(ej_registry_create_node(other, "/n", "", 0, EJ_REG_PERSISTENT, 0, NULL), 0);
    assert_int_equal(wait_count(&w, 3, 3000), 3);
    assert_int_equal(w.last, EJ_REG_WATCH_CREATED);

    /* children watch */
    char **names = NULL;
    size_t n = 9;
    assert_int_equal(
        ej_registry_children_watch(reg, "/n", on_watch, &w, EJ_REG_SORT_ASC, &names, &n), 0);
    assert_int_equal(n, 0);
    ej_registry_free_names(names);
    assert_int_equal(ej_registry_create_node(other, "/n/k1", "", 0, EJ_REG_PERSISTENT, 0, NULL), 0);
    assert_int_equal(ej_registry_create_node(other, "/n/k2", "", 0, EJ_REG_PERSISTENT, 0, NULL), 0);
    assert_int_equal(wait_count(&w, 4, 3000), 4);
    assert_int_equal(w.last, EJ_REG_WATCH_CHILDREN);
    usleep(200000);
    assert_int_equal(ej_registry_barrier(reg, 2000), 0);
    assert_int_equal(w.count, 4);

    /* A failed registration sets no watch and never calls back. */
    assert_int_equal(ej_registry_get_watch(reg, "/missing", on_watch, &w, NULL, NULL, NULL),
                     EJ_ENONODE);
    assert_int_equal(ej_registry_get_watch(reg, "/n", NULL, NULL, NULL, NULL, NULL), EJ_EINVAL);

    /* A watch still pending at destroy is cancelled. */
    assert_int_equal(ej_registry_get_watch(reg, "/n", on_watch, &w, NULL, NULL, NULL), 0);
    ej_registry_destroy(reg);
    assert_int_equal(w.count, 5);
    assert_int_equal(w.last, EJ_REG_WATCH_CANCELLED);

    assert_int_equal(ej_registry_delete_recursive(other, "/"), 0);
    ej_registry_destroy(other);
    free(ns);
}

/* ------------------------------------------------------------------------ */
/* Digest ACL                                                                */

static void test_digest(void **state)
{
    (void)state;
    char *ns = zkf_unique_namespace("digest");
    struct ej_registry_opts o = base_opts(ns);
    o.digest = "ejob:secret";
    ej_registry *owner = NULL;
    assert_int_equal(ej_registry_create(&owner, &o), 0);
    assert_int_equal(ej_registry_persist(owner, "/job/config", "c", 1), 0);

    ej_registry *anon = open_ns(ns);
    assert_int_equal(ej_registry_set(anon, "/job/config", "evil", 4, -1, NULL), EJ_ENOAUTH);
    assert_msg_has("/job/config");
    assert_int_equal(ej_registry_delete(anon, "/job/config", -1), EJ_ENOAUTH);
    assert_int_equal(ej_registry_create_node(anon, "/job/x", "", 0, EJ_REG_PERSISTENT, 0, NULL),
                     EJ_ENOAUTH);
    char *data = NULL;
    assert_int_equal(ej_registry_get(anon, "/job/config", &data, NULL, NULL), EJ_ENOAUTH);

    ej_registry *wrong = NULL;
    o.digest = "ejob:other";
    assert_int_equal(ej_registry_create(&wrong, &o), 0);
    assert_int_equal(ej_registry_set(wrong, "/job/config", "evil", 4, -1, NULL), EJ_ENOAUTH);

    ej_registry *same = NULL;
    o.digest = "ejob:secret";
    assert_int_equal(ej_registry_create(&same, &o), 0);
    assert_int_equal(ej_registry_set(same, "/job/config", "ok", 2, -1, NULL), 0);
    assert_int_equal(ej_registry_get(owner, "/job/config", &data, NULL, NULL), 0);
    assert_string_equal(data, "ok");
    free(data);

    assert_int_equal(ej_registry_delete_recursive(owner, "/"), 0);
    ej_registry_destroy(anon);
    ej_registry_destroy(wrong);
    ej_registry_destroy(same);
    ej_registry_destroy(owner);
    free(ns);
}

/* ------------------------------------------------------------------------ */
/* Dispatch thread                                                           */

struct seq_log {
    pthread_mutex_t mu;
    int order[16];
    int n;
    bool all_on_dispatch;
    ej_registry *reg;
};

struct seq_task {
    struct seq_log *log;
    int id;
};

static void record(ej_registry *reg, void *user)
{
    struct seq_task *t = user;
    pthread_mutex_lock(&t->log->mu);
    t->log->order[t->log->n++] = t->id;
    if (!ej_registry_on_dispatch_thread(reg))
        t->log->all_on_dispatch = false;
    pthread_mutex_unlock(&t->log->mu);
}

struct state_log {
    pthread_mutex_t mu;
    ej_reg_state states[16];
    int n;
    bool on_dispatch;
};

static void on_state(ej_registry *reg, ej_reg_state s, bool new_session, void *user)
{
    (void)new_session;
    struct state_log *l = user;
    pthread_mutex_lock(&l->mu);
    if (l->n < 16)
        l->states[l->n++] = s;
    l->on_dispatch = ej_registry_on_dispatch_thread(reg);
    pthread_mutex_unlock(&l->mu);
}

static void test_dispatch(void **state)
{
    (void)state;
    struct state_log sl = {.mu = PTHREAD_MUTEX_INITIALIZER};
    struct ej_registry_opts o = base_opts("dispatch");
    o.on_state = on_state;
    o.on_state_user = &sl;
    ej_registry *reg = NULL;
    assert_int_equal(ej_registry_create(&reg, &o), 0);
    assert_int_equal(ej_registry_barrier(reg, 2000), 0);
    assert_int_equal(sl.n, 1);
    assert_int_equal(sl.states[0], EJ_REG_CONNECTED);
    assert_true(sl.on_dispatch);
    assert_int_equal(ej_registry_state(reg), EJ_REG_CONNECTED);
    assert_int_equal(ej_registry_add_listener(reg, on_state, &sl), EJ_EINVAL);
    assert_int_equal(ej_registry_remove_listener(reg, on_state, &sl), 0);
    assert_int_equal(ej_registry_remove_listener(reg, on_state, &sl), EJ_ENOTFOUND);
    assert_false(ej_registry_on_dispatch_thread(reg));
    assert_int_equal(ej_registry_wait_connected(reg, 100), 0);

    struct seq_log log = {.mu = PTHREAD_MUTEX_INITIALIZER, .all_on_dispatch = true};
    struct seq_task t[6];
    for (int i = 0; i < 6; i++)
        t[i] = (struct seq_task){&log, i};
    assert_int_equal(ej_registry_post_after(reg, 150, record, &t[5]), 0);
    assert_int_equal(ej_registry_post_after(reg, 50, record, &t[4]), 0);
    for (int i = 0; i < 4; i++)
        assert_int_equal(ej_registry_post(reg, record, &t[i]), 0);
    assert_int_equal(ej_registry_barrier(reg, 2000), 0);
    pthread_mutex_lock(&log.mu);
    assert_int_equal(log.n, 4);
    for (int i = 0; i < 4; i++)
        assert_int_equal(log.order[i], i);
    pthread_mutex_unlock(&log.mu);
    usleep(300000);
    assert_int_equal(ej_registry_barrier(reg, 2000), 0);
    pthread_mutex_lock(&log.mu);
    assert_int_equal(log.n, 6);
    assert_int_equal(log.order[4], 4);
    assert_int_equal(log.order[5], 5);
    assert_true(log.all_on_dispatch);
    pthread_mutex_unlock(&log.mu);

    /* A delayed task pending at destroy still runs, once. */
    struct seq_log late = {.mu = PTHREAD_MUTEX_INITIALIZER, .all_on_dispatch = true};
    struct seq_task lt = {&late, 7};
    assert_int_equal(ej_registry_post_after(reg, 60000, record, &lt), 0);
    assert_int_equal(ej_registry_post(reg, NULL, NULL), EJ_EINVAL);
    ej_registry_destroy(reg);
    assert_int_equal(late.n, 1);
    assert_true(late.all_on_dispatch);
}

/* A set on a node created earlier in the same transaction returns that
 * node's stat: its czxid is the transaction's zxid, shared by every node it
 * created (the fencing token of a fire, docs/coordination.md), in one
 * request. The set fires no watch: a peer's exists watch on the path sees
 * only the creation. */
static void test_multi_create_stat(void **state)
{
    (void)state;
    char *ns = zkf_unique_namespace("mstat");
    ej_registry *reg = open_ns(ns);
    ej_registry *peer = open_ns(ns);
    assert_int_equal(ej_registry_persist(reg, "/job/sharding/0", "", 0), 0);
    assert_int_equal(ej_registry_persist(reg, "/job/sharding/1", "", 0), 0);
    struct watch_log w;
    watch_init(&w);
    bool ex = true;
    assert_int_equal(
        ej_registry_exists_watch(peer, "/job/sharding/0/running", on_watch, &w, &ex, NULL), 0);
    assert_false(ex);

    struct ej_node_stat st = {.czxid = -1};
    struct ej_reg_op ops[] = {
        {.type = EJ_REG_OP_CREATE, .path = "/job/sharding/0/running", .mode = EJ_REG_EPHEMERAL},
        {.type = EJ_REG_OP_CREATE, .path = "/job/sharding/1/running", .mode = EJ_REG_EPHEMERAL},
        {.type = EJ_REG_OP_SET, .path = "/job/sharding/0/running", .version = 0, .out_stat = &st},
    };
    uint64_t before = ej_registry_request_count(reg);
    assert_int_equal(ej_registry_multi(reg, ops, 3, NULL), 0);
    assert_int_equal(ej_registry_request_count(reg) - before, 1);
    struct ej_node_stat s0, s1;
    assert_int_equal(ej_registry_exists(reg, "/job/sharding/0/running", &ex, &s0), 0);
    assert_true(ex);
    assert_int_equal(ej_registry_exists(reg, "/job/sharding/1/running", &ex, &s1), 0);
    assert_true(ex);
    assert_true(st.czxid > 0);
    assert_int_equal(st.czxid, s0.czxid);
    assert_int_equal(st.czxid, s1.czxid);
    assert_int_equal(st.mzxid, st.czxid);
    assert_int_equal(st.ephemeral_owner, ej_registry_session_id(reg));
    assert_int_equal(st.data_length, 0);
    assert_int_equal(s0.version, 1);
    char *data = NULL;
    size_t len = 9;
    assert_int_equal(ej_registry_get(reg, "/job/sharding/0/running", &data, &len, NULL), 0);
    assert_int_equal(len, 0);
    free(data);
    assert_int_equal(wait_count(&w, 1, 3000), 1);
    assert_int_equal(w.last, EJ_REG_WATCH_CREATED);
    usleep(200000);
    assert_int_equal(ej_registry_barrier(peer, 2000), 0);
    assert_int_equal(w.count, 1);

    /* A later transaction: a greater token. A failed one clears out_stat. */
    struct ej_node_stat st2 = {.czxid = -1};
    struct ej_reg_op again[] = {
        {.type = EJ_REG_OP_DELETE, .path = "/job/sharding/1/running", .version = -1},
        {.type = EJ_REG_OP_CREATE, .path = "/job/sharding/1/running", .mode = EJ_REG_EPHEMERAL},
        {.type = EJ_REG_OP_SET, .path = "/job/sharding/1/running", .version = 0, .out_stat = &st2},
    };
    assert_int_equal(ej_registry_multi(reg, again, 3, NULL), 0);
    assert_true(st2.czxid > st.czxid);
    struct ej_node_stat st3 = {.czxid = -1};
    struct ej_reg_op dup[] = {
        {.type = EJ_REG_OP_CREATE, .path = "/job/sharding/1/running", .mode = EJ_REG_EPHEMERAL},
        {.type = EJ_REG_OP_SET, .path = "/job/sharding/1/running", .version = 0, .out_stat = &st3},
    };
    size_t failed = 9;
    assert_int_equal(ej_registry_multi(reg, dup, 2, &failed), EJ_ENODEEXISTS);
    assert_int_equal(failed, 0);
    assert_int_equal(st3.czxid, 0);

    ej_registry_destroy(peer);
    assert_int_equal(ej_registry_delete_recursive(reg, "/"), 0);
    ej_registry_destroy(reg);
    free(ns);
}

int main(void)
{
    if (!getenv("EJOB_LOG_LEVEL"))
        ej_log_set_level(EJ_LOG_WARN);
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_crud),
        cmocka_unit_test(test_bad_input),
        cmocka_unit_test(test_multi),
        cmocka_unit_test(test_dead_server),
        cmocka_unit_test(test_ephemeral_vanishes),
        cmocka_unit_test(test_watches),
        cmocka_unit_test(test_multi_create_stat),
        cmocka_unit_test(test_digest),
        cmocka_unit_test(test_dispatch),
        cmocka_unit_test(test_takeover_margin),
    };
    int rc = cmocka_run_group_tests(tests, NULL, NULL);
    return rc;
}
