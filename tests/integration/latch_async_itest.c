/* The latch acquisition that does not block (ej__latch_acquire_async)
 * against a real ZooKeeper: contenders on their own sessions (one registry
 * each, as separate instances would be), a tiny owner queue (one thread and
 * a FIFO) standing in for a coordinator's serial queue. One shared server,
 * a fresh namespace per test. */
#include <pthread.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>
#include <cmocka.h>

#include "coord/internal.h"
#include "ejob/log.h"
#include "ejob/registry.h"
#include "zk_fixture.h"

#define LATCH "/job/leader/election/latch"

static int64_t now_ms(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (int64_t)ts.tv_sec * 1000 + ts.tv_nsec / 1000000;
}

static ej_registry *open_on(zkf_server *zk, const char *ns)
{
    assert_non_null(zk);
    struct ej_registry_opts o = {0};
    o.servers = zkf_connect_string(zk);
    o.namespace_ = ns;
    o.session_timeout_ms = 4000;
    o.connection_timeout_ms = 5000;
    o.base_sleep_ms = 20;
    o.max_sleep_ms = 100;
    o.max_retries = 3;
    ej_registry *reg = NULL;
    if (ej_registry_create(&reg, &o) != 0)
        fail_msg("create: %s", ej_registry_errmsg(NULL));
    return reg;
}

static ej_registry *open_ns(const char *ns)
{
    return open_on(zkf_shared(), ns);
}

/* The names under the latch path (0 when it is missing). */
static size_t latch_children(ej_registry *reg, char ***names)
{
    size_t n = 0;
    *names = NULL;
    int rc = ej_registry_children(reg, LATCH, EJ_REG_UNSORTED, names, &n);
    if (rc == EJ_ENONODE)
        return 0;
    assert_int_equal(rc, 0);
    return n;
}

static size_t latch_count(ej_registry *reg)
{
    char **names;
    size_t n = latch_children(reg, &names);
    ej_registry_free_names(names);
    return n;
}

/* ------------------------------------------------------------------------ */
/* The owner: one thread running posted tasks in order. Closed, it refuses
 * new tasks (post returns EJ_ECLOSED) and still runs those it accepted. */

struct task {
    struct task *next;
    void (*fn)(void *);
    void *arg;
};

struct owner {
    pthread_mutex_t mu;
    pthread_cond_t cv;
    struct task *head, *tail;
    bool closed, stop;
    pthread_t thread;
};

static void *owner_main(void *p)
{
    struct owner *o = p;
    pthread_mutex_lock(&o->mu);
    for (;;) {
        while (o->head == NULL && !o->stop)
            pthread_cond_wait(&o->cv, &o->mu);
        struct task *t = o->head;
        if (t == NULL)
            break;
        o->head = t->next;
        if (o->head == NULL)
            o->tail = NULL;
        pthread_mutex_unlock(&o->mu);
        t->fn(t->arg);
        free(t);
        pthread_mutex_lock(&o->mu);
    }
    pthread_mutex_unlock(&o->mu);
    return NULL;
}

static int owner_post(void *post_arg, void (*fn)(void *task), void *task)
{
    struct owner *o = post_arg;
    struct task *t = calloc(1, sizeof *t);
    if (t == NULL)
        return EJ_ENOMEM;
    *t = (struct task){NULL, fn, task};
    pthread_mutex_lock(&o->mu);
    if (o->closed) {
        pthread_mutex_unlock(&o->mu);
        free(t);
        return EJ_ECLOSED;
    }
    if (o->tail)
        o->tail->next = t;
    else
        o->head = t;
    o->tail = t;
    pthread_cond_signal(&o->cv);
    pthread_mutex_unlock(&o->mu);
    return 0;
}

static void owner_start(struct owner *o)
{
    memset(o, 0, sizeof *o);
    pthread_mutex_init(&o->mu, NULL);
    pthread_cond_init(&o->cv, NULL);
    assert_int_equal(pthread_create(&o->thread, NULL, owner_main, o), 0);
}

static void owner_close(struct owner *o)
{
    pthread_mutex_lock(&o->mu);
    o->closed = true;
    pthread_mutex_unlock(&o->mu);
}

/* Close, run what was accepted, join. */
static void owner_stop(struct owner *o)
{
    pthread_mutex_lock(&o->mu);
    o->closed = o->stop = true;
    pthread_cond_signal(&o->cv);
    pthread_mutex_unlock(&o->mu);
    pthread_join(o->thread, NULL);
    pthread_mutex_destroy(&o->mu);
    pthread_cond_destroy(&o->cv);
}

/* ------------------------------------------------------------------------ */
/* What done saw. */

struct result {
    pthread_mutex_t mu;
    pthread_cond_t cv;
    ej_registry *reg; /* the contender's, to tell the dispatch thread */
    int calls;
    ej__latch *latch;
    int rc;
    int64_t at_ms;
    pthread_t thread;
    bool on_dispatch;
};

static void result_init(struct result *r, ej_registry *reg)
{
    memset(r, 0, sizeof *r);
    pthread_mutex_init(&r->mu, NULL);
    pthread_cond_init(&r->cv, NULL);
    r->reg = reg;
    r->rc = 1;
}

static void result_fini(struct result *r)
{
    pthread_mutex_destroy(&r->mu);
    pthread_cond_destroy(&r->cv);
}

static void on_done(void *arg, ej__latch *latch, int rc)
{
    struct result *r = arg;
    pthread_mutex_lock(&r->mu);
    r->calls++;
    r->latch = latch;
    r->rc = rc;
    r->at_ms = now_ms();
    r->thread = pthread_self();
    r->on_dispatch = ej_registry_on_dispatch_thread(r->reg);
    pthread_cond_broadcast(&r->cv);
    pthread_mutex_unlock(&r->mu);
}

/* The number of done calls once there is one or timeout_ms passed. */
static int wait_done(struct result *r, int timeout_ms)
{
    int64_t deadline = now_ms() + timeout_ms;
    pthread_mutex_lock(&r->mu);
    while (r->calls == 0 && now_ms() < deadline) {
        pthread_mutex_unlock(&r->mu);
        usleep(2000);
        pthread_mutex_lock(&r->mu);
    }
    int calls = r->calls;
    pthread_mutex_unlock(&r->mu);
    return calls;
}

static int calls_of(struct result *r)
{
    pthread_mutex_lock(&r->mu);
    int calls = r->calls;
    pthread_mutex_unlock(&r->mu);
    return calls;
}

/* A task that notes when the owner ran it. */
struct ping {
    atomic_llong at_ms;
};

static void ping_task(void *arg)
{
    struct ping *p = arg;
    atomic_store(&p->at_ms, now_ms());
}

/* ------------------------------------------------------------------------ */

struct dispatch_try {
    int rc;
    struct owner *o;
    struct result *r;
};

static void try_on_dispatch(ej_registry *reg, void *user)
{
    struct dispatch_try *t = user;
    t->rc = ej__latch_acquire_async(reg, LATCH, 1000, owner_post, t->o, on_done, t->r);
}

/* Uncontended: done on the owner's thread with the latch, its node under the
 * latch path; released, gone. Refused on the dispatch thread and when the
 * owner refuses the first result (no node left, no done). */
static void test_uncontended(void **state)
{
    (void)state;
    char *ns = zkf_unique_namespace("latch1");
    ej_registry *reg = open_ns(ns);
    struct owner o;
    owner_start(&o);
    struct result r;
    result_init(&r, reg);

    assert_int_equal(ej__latch_acquire_async(reg, LATCH, 5000, owner_post, &o, on_done, &r), 0);
    assert_int_equal(wait_done(&r, 5000), 1);
    assert_int_equal(r.rc, 0);
    assert_non_null(r.latch);
    assert_true(pthread_equal(r.thread, o.thread));
    const char *node = ej__latch_node(r.latch);
    assert_non_null(node);
    assert_int_equal(strncmp(node, LATCH "/_c_", strlen(LATCH "/_c_")), 0);
    assert_non_null(strstr(node, "-latch-"));
    bool exists = false;
    assert_int_equal(ej_registry_exists(reg, node, &exists, NULL), 0);
    assert_true(exists);
    char *copy = strdup(node);
    ej__latch_release(r.latch);
    assert_int_equal(ej_registry_exists(reg, copy, &exists, NULL), 0);
    assert_false(exists);
    free(copy);

    struct result r2;
    result_init(&r2, reg);
    struct dispatch_try t = {.rc = 1, .o = &o, .r = &r2};
    assert_int_equal(ej_registry_post(reg, try_on_dispatch, &t), 0);
    assert_int_equal(ej_registry_barrier(reg, 5000), 0);
    assert_int_equal(t.rc, EJ_EINVAL);

    owner_close(&o);
    assert_int_equal(ej__latch_acquire_async(reg, LATCH, 5000, owner_post, &o, on_done, &r2),
                     EJ_ECLOSED);
    assert_int_equal(latch_count(reg), 0);
    usleep(100000);
    assert_int_equal(calls_of(&r2), 0);

    owner_stop(&o);
    result_fini(&r);
    result_fini(&r2);
    assert_int_equal(ej_registry_delete_recursive(reg, "/"), 0);
    ej_registry_destroy(reg);
    free(ns);
}

/* Contended: B's acquisition returns at once while A holds; the owner runs
 * other tasks meanwhile; B gets the latch right after A's release. */
static void test_contended(void **state)
{
    (void)state;
    char *ns = zkf_unique_namespace("latch2");
    ej_registry *ra = open_ns(ns), *rb = open_ns(ns);
    struct owner o;
    owner_start(&o);
    struct result r;
    result_init(&r, rb);

    ej__latch *la = NULL;
    assert_int_equal(ej__latch_acquire(ra, LATCH, 5000, &la), 0);
    int64_t t0 = now_ms();
    assert_int_equal(ej__latch_acquire_async(rb, LATCH, 10000, owner_post, &o, on_done, &r), 0);
    int64_t returned = now_ms() - t0;
    print_message("contended: acquire_async returned in %lld ms\n", (long long)returned);
    assert_true(returned < 100);
    assert_int_equal(latch_count(ra), 2);

    struct ping p = {0};
    assert_int_equal(owner_post(&o, ping_task, &p), 0);
    while (atomic_load(&p.at_ms) == 0 && now_ms() - t0 < 900)
        usleep(2000);
    print_message("contended: the owner ran another task %lld ms after the call\n",
                  (long long)(atomic_load(&p.at_ms) - t0));
    assert_true(atomic_load(&p.at_ms) != 0);
    assert_int_equal(calls_of(&r), 0);

    int64_t left = t0 + 1000 - now_ms();
    if (left > 0)
        usleep((useconds_t)left * 1000);
    int64_t released = now_ms();
    ej__latch_release(la);
    assert_int_equal(wait_done(&r, 5000), 1);
    print_message("contended: done %lld ms after A's release (A held %lld ms)\n",
                  (long long)(r.at_ms - released), (long long)(released - t0));
    assert_int_equal(r.rc, 0);
    assert_non_null(r.latch);
    assert_true(pthread_equal(r.thread, o.thread));
    assert_true(r.at_ms >= released);
    assert_true(r.at_ms - released < 500);
    assert_true(atomic_load(&p.at_ms) <= r.at_ms);
    assert_int_equal(latch_count(ra), 1);
    ej__latch_release(r.latch);
    assert_int_equal(latch_count(ra), 0);

    owner_stop(&o);
    result_fini(&r);
    ej_registry_destroy(rb);
    assert_int_equal(ej_registry_delete_recursive(ra, "/"), 0);
    ej_registry_destroy(ra);
    free(ns);
}

/* Cancel: B waits behind A; the cancel ends B's wait at once (A still
 * holds): done(NULL, EJ_EAGAIN) once, on the owner, B's node gone. A
 * cancel after done changes nothing. The blocking acquisition gives up
 * likewise when its predicate says the latch is no longer needed. */
static atomic_bool unneeded_flag;

static bool unneeded(void *arg)
{
    (void)arg;
    return atomic_load(&unneeded_flag);
}

struct blocked {
    ej_registry *reg;
    int rc;
    ej__latch *l;
};

static void *blocked_acquire(void *arg)
{
    struct blocked *b = arg;
    b->rc = ej__latch_acquire_unless(b->reg, LATCH, 10000, unneeded, NULL, &b->l);
    return NULL;
}

static void test_cancel(void **state)
{
    (void)state;
    char *ns = zkf_unique_namespace("latchcancel");
    ej_registry *ra = open_ns(ns), *rb = open_ns(ns);
    struct owner o;
    owner_start(&o);
    struct result r;
    result_init(&r, rb);

    ej__latch *la = NULL;
    assert_int_equal(ej__latch_acquire(ra, LATCH, 5000, &la), 0);
    ej__latch_wait *w = NULL;
    assert_int_equal(
        ej__latch_acquire_async_w(rb, LATCH, 10000, owner_post, &o, on_done, &r, &w), 0);
    assert_non_null(w);
    usleep(200 * 1000);
    assert_int_equal(calls_of(&r), 0);
    assert_int_equal(latch_count(ra), 2);
    int64_t t0 = now_ms();
    ej__latch_wait_cancel(w);
    assert_int_equal(wait_done(&r, 3000), 1);
    print_message("cancel: done %lld ms after the cancel\n", (long long)(r.at_ms - t0));
    assert_int_equal(r.rc, EJ_EAGAIN);
    assert_null(r.latch);
    assert_true(pthread_equal(r.thread, o.thread));
    assert_int_equal(latch_count(ra), 1); /* A's own */
    ej__latch_wait_cancel(w);             /* after done: nothing */
    usleep(100 * 1000);
    assert_int_equal(calls_of(&r), 1);
    ej__latch_wait_put(w);

    /* Blocking: B gives up within the poll once its predicate says so. */
    atomic_store(&unneeded_flag, false);
    struct blocked b = {rb, 1, NULL};
    pthread_t th;
    assert_int_equal(pthread_create(&th, NULL, blocked_acquire, &b), 0);
    usleep(200 * 1000);
    assert_int_equal(latch_count(ra), 2);
    t0 = now_ms();
    atomic_store(&unneeded_flag, true);
    pthread_join(th, NULL);
    print_message("cancel: the blocking wait gave up %lld ms after its predicate turned\n",
                  (long long)(now_ms() - t0));
    assert_int_equal(b.rc, EJ_EAGAIN);
    assert_null(b.l);
    assert_int_equal(latch_count(ra), 1);

    ej__latch_release(la);
    assert_int_equal(latch_count(ra), 0);
    owner_stop(&o);
    result_fini(&r);
    ej_registry_destroy(rb);
    assert_int_equal(ej_registry_delete_recursive(ra, "/"), 0);
    ej_registry_destroy(ra);
    free(ns);
}

/* Timeout: A holds past B's timeout; the watch never fires in time, the
 * timer ends the wait: done(NULL, EJ_ETIMEDOUT) once, B's node gone. A's
 * later release (B's watch fires then) changes nothing. A timeout of 0
 * while held gives up at once, through the owner as well. */
static void test_timeout(void **state)
{
    (void)state;
    char *ns = zkf_unique_namespace("latch3");
    ej_registry *ra = open_ns(ns), *rb = open_ns(ns);
    struct owner o;
    owner_start(&o);
    struct result r, r0;
    result_init(&r, rb);
    result_init(&r0, rb);

    ej__latch *la = NULL;
    assert_int_equal(ej__latch_acquire(ra, LATCH, 5000, &la), 0);
    char *a_name = strdup(strrchr(ej__latch_node(la), '/') + 1);
    int64_t t0 = now_ms();
    assert_int_equal(ej__latch_acquire_async(rb, LATCH, 800, owner_post, &o, on_done, &r), 0);
    assert_int_equal(wait_done(&r, 3000), 1);
    print_message("timeout: done %lld ms after the call (timeout 800 ms)\n",
                  (long long)(r.at_ms - t0));
    assert_int_equal(r.rc, EJ_ETIMEDOUT);
    assert_null(r.latch);
    assert_true(pthread_equal(r.thread, o.thread));
    assert_true(r.at_ms - t0 >= 800);
    assert_true(r.at_ms - t0 <= 800 + 500);
    char **names;
    size_t n = latch_children(ra, &names);
    assert_int_equal(n, 1);
    assert_string_equal(names[0], a_name);
    ej_registry_free_names(names);

    assert_int_equal(ej__latch_acquire_async(rb, LATCH, 0, owner_post, &o, on_done, &r0), 0);
    assert_int_equal(wait_done(&r0, 3000), 1);
    assert_int_equal(r0.rc, EJ_ETIMEDOUT);
    assert_true(pthread_equal(r0.thread, o.thread));
    assert_int_equal(latch_count(ra), 1);

    ej__latch_release(la);
    usleep(300000);
    assert_int_equal(ej_registry_barrier(rb, 5000), 0);
    assert_int_equal(calls_of(&r), 1);
    assert_int_equal(calls_of(&r0), 1);
    assert_int_equal(latch_count(ra), 0);

    owner_stop(&o);
    result_fini(&r);
    result_fini(&r0);
    free(a_name);
    ej_registry_destroy(rb);
    assert_int_equal(ej_registry_delete_recursive(ra, "/"), 0);
    ej_registry_destroy(ra);
    free(ns);
}

/* Sequence order with a Java contender: a node as Curator creates it (J),
 * then B and C (async, own sessions). J's delete gives the latch to B
 * only; B's release to C. */
static void test_order(void **state)
{
    (void)state;
    char *ns = zkf_unique_namespace("latch4");
    ej_registry *rj = open_ns(ns), *rb = open_ns(ns), *rc_ = open_ns(ns);
    struct owner o;
    owner_start(&o);
    struct result b, c;
    result_init(&b, rb);
    result_init(&c, rc_);

    char uuid[37], prefix[EJ__LATCH_PREFIX_LEN + 1], path[256];
    ej__layout_uuid4(uuid);
    ej__layout_latch_node_prefix(uuid, prefix, sizeof prefix);
    snprintf(path, sizeof path, "%s/%s", LATCH, prefix);
    char *java = NULL;
    assert_int_equal(ej_registry_create_node(rj, path, NULL, 0, EJ_REG_EPHEMERAL_SEQUENTIAL,
                                             EJ_REG_CONTAINER_PARENTS, &java),
                     0);
    assert_int_equal(ej__latch_acquire_async(rb, LATCH, 10000, owner_post, &o, on_done, &b), 0);
    assert_int_equal(ej__latch_acquire_async(rc_, LATCH, 10000, owner_post, &o, on_done, &c), 0);
    usleep(200000);
    assert_int_equal(calls_of(&b), 0);
    assert_int_equal(calls_of(&c), 0);
    assert_int_equal(latch_count(rj), 3);

    assert_int_equal(ej_registry_delete(rj, java, -1), 0);
    assert_int_equal(wait_done(&b, 5000), 1);
    assert_int_equal(b.rc, 0);
    usleep(300000);
    assert_int_equal(calls_of(&c), 0);
    int64_t released = now_ms();
    ej__latch_release(b.latch);
    assert_int_equal(wait_done(&c, 5000), 1);
    assert_int_equal(c.rc, 0);
    assert_true(c.at_ms >= released);
    print_message("order: C acquired %lld ms after B's release\n", (long long)(c.at_ms - released));
    ej__latch_release(c.latch);
    assert_int_equal(latch_count(rj), 0);

    owner_stop(&o);
    result_fini(&b);
    result_fini(&c);
    free(java);
    ej_registry_destroy(rb);
    ej_registry_destroy(rc_);
    assert_int_equal(ej_registry_delete_recursive(rj, "/"), 0);
    ej_registry_destroy(rj);
    free(ns);
}

/* Acquire LATCH and release it on reg; the requests it cost. */
static uint64_t acquire_release(ej_registry *reg, struct owner *o)
{
    struct result r;
    result_init(&r, reg);
    uint64_t before = ej_registry_request_count(reg);
    assert_int_equal(ej__latch_acquire_async(reg, LATCH, 5000, owner_post, o, on_done, &r), 0);
    assert_int_equal(wait_done(&r, 5000), 1);
    assert_int_equal(r.rc, 0);
    ej__latch_release(r.latch);
    uint64_t cost = ej_registry_request_count(reg) - before;
    result_fini(&r);
    return cost;
}

static bool exists_now(ej_registry *reg, const char *path)
{
    bool e = false;
    assert_int_equal(ej_registry_exists(reg, path, &e, NULL), 0);
    return e;
}

/* The latch's parents outlive the server's reaping of empty containers: a
 * latch used again after a quiet spell costs its create and look (sent
 * together) and the release, not a refused create and its parents made
 * again first (every election and every failover after a quiet minute
 * paid that, in a fleet's expiry burst 300 ms a round trip). This server
 * reaps every 100 ms; a container beside the latch shows that it does. */
static void test_parents_stay(void **state)
{
    (void)state;
    zkf_server *zk = NULL;
    zkf_opts zo = {.container_check_ms = 100};
    assert_int_equal(zkf_start(&zk, &zo), 0);
    ej_registry *reg = open_on(zk, "reap");
    struct owner o;
    owner_start(&o);

    uint64_t first = acquire_release(reg, &o);
    assert_int_equal(ej_registry_create_node(reg, "/box/x", NULL, 0, EJ_REG_PERSISTENT,
                                             EJ_REG_CONTAINER_PARENTS, NULL),
                     0);
    assert_int_equal(ej_registry_delete(reg, "/box/x", -1), 0);
    int64_t deadline = now_ms() + 10000;
    while (exists_now(reg, "/box") && now_ms() < deadline)
        usleep(50000);
    assert_false(exists_now(reg, "/box")); /* the server reaps */
    usleep(500000);                        /* a few more passes */
    assert_true(exists_now(reg, LATCH));
    uint64_t again = acquire_release(reg, &o);
    print_message("parents: a latch cost %llu requests the first time, %llu after the "
                  "server's container reaping\n",
                  (unsigned long long)first, (unsigned long long)again);
    assert_int_equal(again, 3); /* create and look, release */

    owner_stop(&o);
    ej_registry_destroy(reg);
    zkf_destroy(zk);
}

/* Two paths to read behind an acquisition (malloc'd, for the latch). */
static char **two_paths(const char *a, const char *b)
{
    char **p = calloc(2, sizeof *p);
    assert_non_null(p);
    p[0] = strdup(a);
    p[1] = strdup(b);
    return p;
}

/* Reads sent behind the first create and look: a contender that finds the
 * latch free gets them (read while it held the latch, no round trip of
 * their own: the acquisition costs 4 requests, create, look and 2 reads);
 * one that had to wait gets none (they were read before its turn). */
static void test_first_reads(void **state)
{
    (void)state;
    char *ns = zkf_unique_namespace("latch6");
    ej_registry *ra = open_ns(ns), *rb = open_ns(ns);
    struct owner o;
    owner_start(&o);
    assert_int_equal(ej_registry_create_node(ra, "/job/sharding/0", NULL, 0, EJ_REG_PERSISTENT,
                                             EJ_REG_CREATE_PARENTS, NULL),
                     0);
    assert_int_equal(ej_registry_create_node(ra, LATCH, NULL, 0, EJ_REG_PERSISTENT,
                                             EJ_REG_CREATE_PARENTS, NULL),
                     0);
    struct ej_node_stat st;
    bool e = false;
    assert_int_equal(ej_registry_exists(ra, "/job/sharding/0", &e, &st), 0);

    struct result a, b;
    result_init(&a, ra);
    result_init(&b, rb);
    uint64_t before = ej_registry_request_count(ra);
    assert_int_equal(ej__latch_acquire_async_r(ra, LATCH, 5000, owner_post, &o, on_done, &a, NULL,
                                               two_paths("/job/sharding/0", "/job/sharding/9"), 2),
                     0);
    assert_int_equal(wait_done(&a, 5000), 1);
    assert_int_equal(a.rc, 0);
    assert_int_equal(ej_registry_request_count(ra) - before, 4);
    const struct ej_reg_read *rd = NULL;
    size_t n = 0;
    assert_true(ej__latch_first_reads(a.latch, &rd, &n));
    assert_int_equal(n, 2);
    assert_string_equal(rd[0].path, "/job/sharding/0");
    assert_int_equal(rd[0].result, 0);
    assert_true(rd[0].stat.pzxid == st.pzxid);
    assert_int_equal(rd[1].result, EJ_ENONODE);

    /* B queues behind A: after A's release it holds the latch, with no
     * reads to trust. */
    assert_int_equal(ej__latch_acquire_async_r(rb, LATCH, 5000, owner_post, &o, on_done, &b, NULL,
                                               two_paths("/job/sharding/0", "/job/sharding/9"), 2),
                     0);
    usleep(200000);
    assert_int_equal(calls_of(&b), 0);
    ej__latch_release(a.latch);
    assert_int_equal(wait_done(&b, 5000), 1);
    assert_int_equal(b.rc, 0);
    assert_false(ej__latch_first_reads(b.latch, &rd, &n));
    assert_int_equal(n, 0);
    ej__latch_release(b.latch);

    owner_stop(&o);
    result_fini(&a);
    result_fini(&b);
    ej_registry_destroy(rb);
    assert_int_equal(ej_registry_delete_recursive(ra, "/"), 0);
    ej_registry_destroy(ra);
    free(ns);
}

/* The owner closes while B waits: A's release wakes B, post refuses, B's
 * node is deleted and done(NULL, EJ_ECLOSED) runs once on the dispatch
 * thread. The same when B's registry is destroyed under the wait. */
static void test_owner_closed(void **state)
{
    (void)state;
    char *ns = zkf_unique_namespace("latch5");
    ej_registry *ra = open_ns(ns), *rb = open_ns(ns);
    struct owner o;
    owner_start(&o);
    struct result r;
    result_init(&r, rb);

    ej__latch *la = NULL;
    assert_int_equal(ej__latch_acquire(ra, LATCH, 5000, &la), 0);
    assert_int_equal(ej__latch_acquire_async(rb, LATCH, 10000, owner_post, &o, on_done, &r), 0);
    assert_int_equal(latch_count(ra), 2);
    owner_close(&o);
    ej__latch_release(la);
    assert_int_equal(wait_done(&r, 5000), 1);
    assert_int_equal(r.rc, EJ_ECLOSED);
    assert_null(r.latch);
    assert_true(r.on_dispatch);
    assert_int_equal(latch_count(ra), 0);
    usleep(300000);
    assert_int_equal(calls_of(&r), 1);

    /* The registry destroyed under a wait whose owner closed: its cancelled
     * watch ends the wait the same way, once; the timer, run early by the
     * destroy, finds nothing left to do. */
    ej_registry *rb2 = open_ns(ns);
    struct owner o2;
    owner_start(&o2);
    struct result r2;
    result_init(&r2, rb2);
    assert_int_equal(ej__latch_acquire(ra, LATCH, 5000, &la), 0);
    assert_int_equal(ej__latch_acquire_async(rb2, LATCH, 10000, owner_post, &o2, on_done, &r2), 0);
    assert_int_equal(latch_count(ra), 2);
    owner_close(&o2);
    ej_registry_destroy(rb2);
    assert_int_equal(calls_of(&r2), 1);
    assert_int_equal(r2.rc, EJ_ECLOSED);
    assert_true(r2.on_dispatch);
    assert_int_equal(latch_count(ra), 1);
    ej__latch_release(la);
    owner_stop(&o2);
    result_fini(&r2);

    owner_stop(&o);
    result_fini(&r);
    ej_registry_destroy(rb);
    assert_int_equal(ej_registry_delete_recursive(ra, "/"), 0);
    ej_registry_destroy(ra);
    free(ns);
}

int main(void)
{
    if (!getenv("EJOB_LOG_LEVEL"))
        ej_log_set_level(EJ_LOG_ERROR);
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_uncontended),  cmocka_unit_test(test_contended),
        cmocka_unit_test(test_timeout),      cmocka_unit_test(test_order),
        cmocka_unit_test(test_owner_closed), cmocka_unit_test(test_cancel),
        cmocka_unit_test(test_parents_stay), cmocka_unit_test(test_first_reads),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
