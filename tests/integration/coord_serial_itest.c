/*
 * One owner per job: a coordinator's control tasks (election, crash
 * handling, re-registration, operator checks; ej__coord_post) run one at a
 * time, in the order posted, on the job's serial queue; another job's
 * tasks are not held up by them. Against a real ZooKeeper, with two
 * in-process jobs: eight tasks posted at once to job A, each sleeping
 * 100 ms, never overlap and run in order, while a task posted to job B
 * after them starts at once. (On the scheduler's shared control queue
 * they ran side by side.)
 *
 * The serial queue owns the coordination state; what other threads read
 * of it is its published snapshot: while a task of job A keeps the queue
 * for a second (an election waiting for its latch, a slow request), the
 * fire's checks (may it start, the session, connected) and the job API's
 * status answer at once, and right.
 *
 * An election does not hold the queue: with the election latch held by
 * someone else and job A's leader node deleted, A's election waits for the
 * latch by a watch, and a task posted to A's queue meanwhile runs at once;
 * A leads again once the latch is free. (When the election waited on the
 * queue, the task waited for the latch.)
 */
#include <inttypes.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>

#include "common/util.h"
#include "coord/internal.h"
#include "ejob/ejob.h"
#include "runtime/internal.h"
#include "zk_fixture.h"
#include "itest_check.h"

#define TASKS 8

struct record {
    pthread_mutex_t mu;
    int order[TASKS];
    int done;
    int inside; /* tasks of job A running now */
    int max_inside;
    int64_t b_started_ms; /* job B's task, mono ms */
};

static struct record rec = {.mu = PTHREAD_MUTEX_INITIALIZER};

struct task_arg {
    int index;
};

static void task_a(ej__coord *c, void *arg)
{
    (void)c;
    struct task_arg *t = arg;
    pthread_mutex_lock(&rec.mu);
    rec.inside++;
    if (rec.inside > rec.max_inside)
        rec.max_inside = rec.inside;
    pthread_mutex_unlock(&rec.mu);
    ej__sleep_ms(100);
    pthread_mutex_lock(&rec.mu);
    rec.inside--;
    if (rec.done < TASKS)
        rec.order[rec.done++] = t->index;
    pthread_mutex_unlock(&rec.mu);
}

static void task_b(ej__coord *c, void *arg)
{
    (void)c;
    (void)arg;
    pthread_mutex_lock(&rec.mu);
    rec.b_started_ms = ej__mono_ms();
    pthread_mutex_unlock(&rec.mu);
}

static atomic_bool holding;

/* A task that keeps the state's owner, the serial queue, for a second. */
static void hold_queue(ej__coord *c, void *arg)
{
    (void)arg;
    EJ_ASSERT_SERIAL(c);
    atomic_store(&holding, true);
    ej__sleep_ms(1000);
    atomic_store(&holding, false);
}

/* Readers answer from the snapshot while the owner is busy. */
static void check_readers_do_not_wait(ej_job *a)
{
    int64_t sess = ej__coord_session(a->coord);
    CHECK(sess != 0, "job A has no session");
    REQUIRE(ej__coord_post(a->coord, hold_queue, NULL) == 0, "post the queue holder");
    for (int i = 0; i < 100 && !atomic_load(&holding); i++)
        ej__sleep_ms(10);
    REQUIRE(atomic_load(&holding), "the queue holder never ran");
    int64_t t0 = ej__mono_ms();
    bool may = ej__coord_may_start(a->coord, sess);
    bool conn = ej__coord_connected(a->coord);
    int64_t sess2 = ej__coord_session(a->coord);
    struct ej_job_status st;
    int rc = ej_job_status(a, &st);
    int64_t took = ej__mono_ms() - t0;
    bool still = atomic_load(&holding);
    CHECK(rc == 0 && st.connected, "status: rc %d, connected %d", rc, rc == 0 && st.connected);
    if (rc == 0)
        ej_job_status_fini(&st);
    CHECK(still && took < 300,
          "readers took %" PRId64 " ms while the owner was busy (busy throughout: %d)", took,
          still);
    CHECK(may && conn && sess2 == sess, "readers answered may %d, connected %d, session %s", may,
          conn, sess2 == sess ? "same" : "changed");
    fprintf(stderr, "readers answered in %" PRId64 " ms while the owner was busy\n", took);
    for (int i = 0; i < 200 && atomic_load(&holding); i++)
        ej__sleep_ms(10);
}

static _Atomic int64_t probe_ran_ms;

static void probe(ej__coord *c, void *arg)
{
    (void)c;
    (void)arg;
    atomic_store(&probe_ran_ms, ej__mono_ms());
}

static void check_election_does_not_hold_queue(ej_registry *reg, ej_job *a)
{
    ej__latch *latch = NULL;
    REQUIRE(ej__latch_acquire(reg, "/serialA/leader/election/latch", 5000, &latch) == 0,
            "take the election latch");
    REQUIRE(ej_registry_delete(reg, "/serialA/leader/election/instance", -1) == 0,
            "delete the leader node");
    /* A sees the removal and begins an election, which waits for us. */
    ej__sleep_ms(500);
    CHECK(!ej__coord_is_leader(a->coord), "A leads while the latch is held");
    int64_t posted = ej__mono_ms();
    REQUIRE(ej__coord_post(a->coord, probe, NULL) == 0, "post the probe");
    for (int i = 0; i < 150 && atomic_load(&probe_ran_ms) == 0; i++)
        ej__sleep_ms(10);
    int64_t ran = atomic_load(&probe_ran_ms);
    int64_t waited = ran ? ran - posted : -1;
    CHECK(ran != 0 && waited < 300,
          "a task posted while A's election waited for the latch ran after %" PRId64
          " ms (-1: not in 1.5 s)",
          waited);
    fprintf(stderr, "task ran %" PRId64 " ms after it was posted, the election waiting\n",
            waited);
    ej__latch_release(latch);
    bool leads = false;
    for (int i = 0; i < 100 && !leads; i++) {
        ej__sleep_ms(50);
        leads = ej__coord_is_leader(a->coord);
    }
    CHECK(leads, "A did not lead again after the latch was released");
}

static int noop(const ej_shard_context *ctx, void *user)
{
    (void)ctx;
    (void)user;
    return 0;
}

static ej_job *start_job(ej_registry *reg, const char *name)
{
    static struct ej_job_def def = {.type = EJ_JOB_TYPE_SIMPLE, .simple = noop};
    struct ej_job_config cfg;
    ej_job_config_init(&cfg);
    ej_job_config_set_str(&cfg.job_name, name);
    ej_job_config_set_str(&cfg.cron, "0 0 0 1 1 ? 2099");
    cfg.sharding_total_count = 1;
    cfg.job_type = EJ_JOB_TYPE_SIMPLE;
    struct ej_job_opts jo = {.def = &def, .ip = "127.0.0.1"};
    ej_job *job = NULL;
    int rc = ej_job_create(reg, &cfg, &jo, &job);
    ej_job_config_fini(&cfg);
    REQUIRE(rc == 0, "create %s: %s", name, ej_strerror(rc));
    REQUIRE(ej_job_start(job) == 0, "start %s", name);
    return job;
}

int main(void)
{
    setvbuf(stderr, NULL, _IOLBF, 0);
    zkf_server *zk = NULL;
    zkf_opts zo = {.tick_ms = 200};
    REQUIRE(zkf_start(&zk, &zo) == 0, "zookeeper");
    char *ns = zkf_unique_namespace("serial");
    struct ej_registry_opts ro = itest_registry_opts(zk, ns, 4000);
    ej_registry *reg = NULL;
    REQUIRE(ej_registry_create(&reg, &ro) == 0, "registry: %s", ej_registry_errmsg(NULL));
    ej_job *a = start_job(reg, "serialA");
    ej_job *b = start_job(reg, "serialB");
    ej__sleep_ms(500); /* let the start's own tasks (election) finish */

    static struct task_arg args[TASKS];
    int64_t posted = ej__mono_ms();
    for (int i = 0; i < TASKS; i++) {
        args[i].index = i;
        REQUIRE(ej__coord_post(a->coord, task_a, &args[i]) == 0, "post %d", i);
    }
    REQUIRE(ej__coord_post(b->coord, task_b, NULL) == 0, "post to B");
    for (int i = 0; i < 100; i++) {
        pthread_mutex_lock(&rec.mu);
        int done = rec.done;
        pthread_mutex_unlock(&rec.mu);
        if (done == TASKS)
            break;
        ej__sleep_ms(50);
    }
    pthread_mutex_lock(&rec.mu);
    int64_t took = ej__mono_ms() - posted;
    CHECK(rec.done == TASKS, "%d of %d tasks of job A ran", rec.done, TASKS);
    CHECK(rec.max_inside == 1, "up to %d tasks of job A ran at once", rec.max_inside);
    bool in_order = true;
    for (int i = 0; i < rec.done; i++)
        in_order = in_order && rec.order[i] == i;
    CHECK(in_order, "job A's tasks ran out of the order posted");
    CHECK(took >= TASKS * 100, "job A's tasks took %" PRId64 " ms: not one at a time", took);
    int64_t b_wait = rec.b_started_ms - posted;
    CHECK(rec.b_started_ms > 0 && b_wait < 300,
          "job B's task started %" PRId64 " ms after it was posted, behind job A's", b_wait);
    fprintf(stderr, "job A: %d tasks one at a time in %" PRId64 " ms; job B's task after %" PRId64
                    " ms\n",
            rec.done, took, b_wait);
    pthread_mutex_unlock(&rec.mu);

    check_readers_do_not_wait(a);
    check_election_does_not_hold_queue(reg, a);

    ej_job_shutdown(a);
    ej_job_shutdown(b);
    ej_job_destroy(a);
    ej_job_destroy(b);
    ej_registry_destroy(reg);
    zkf_destroy(zk);
    free(ns);
    if (failures) {
        fprintf(stderr, "%d check(s) failed\n", failures);
        return 1;
    }
    fprintf(stderr, "coord_serial: all checks passed\n");
    return 0;
}
