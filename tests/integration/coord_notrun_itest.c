/*
 * A fire that does not run is never lost silently (docs/execution.md
 * "Fires that did not run"): each reason the fire flow has for not running a
 * fire it was given is forced here against a real ZooKeeper, and the fire
 * must be added to ej_job_status().fires_missed and posted as a TASK_ERROR
 * status event "Job 'j' fire not run (REASON): 1 fire time(s) from A to A"
 * that the daemon's /metrics parser reads (the same sscanf pattern).
 *
 *   before-registration  the scheduler's clock is set an hour back, so every
 *                        cron fire is due before the instance registered
 *   disabled             an operator writes DISABLED into servers/{ip}
 *                        (no line above debug level)
 *   leader-wait          a leader that never reshards (a plain client holds
 *                        the election node and a live-looking instance node):
 *                        the follower's bounded wait times out; one warning
 *                        line per 5 s, the next one counting the rest
 *   time-diff            maxTimeDiffSeconds on, and systemTime made an
 *                        ephemeral node so the check cannot write under it
 *   running, stopped     a console trigger while the job runs (ignored, as
 *                        ElasticJob does), and a trigger delivered while the
 *                        job shuts down
 *   start-failed         the item's node takes no children (its ACL), so
 *                        the running node cannot be written
 *   fenced               the server frozen and the registry's dispatch thread
 *                        held up: the trigger keeps firing while the fence
 *                        refuses every start
 */
#include <inttypes.h>
#include <pthread.h>
#include <signal.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "common/util.h"
#include "ejob/console.h"
#include "ejob/ejob.h"
#include "ejob/event.h"
#include "ejob/log.h"
#include "schedule/internal.h"
#include "zk_fixture.h"
#include <zookeeper/zookeeper.h>
/* A REQUIRE that fails while ZooKeeper is frozen resumes it first. */
#define ITEST_ON_REQUIRE_FAILED()                                                                  \
    do {                                                                                           \
        if (zk)                                                                                    \
            kill(zkf_pid(zk), SIGCONT);                                                            \
    } while (0)
#include "itest_check.h"

#define SESSION_MS 3000

static zkf_server *zk;
static const char *ns;

/* ------------------------------------------------------------------------ */
/* What a job saw                                                            */

static const char *const reasons[] = {"fenced",         "before-registration",
                                      "leader-wait",    "time-diff",
                                      "disabled",       "stopped",
                                      "running",        "paused",
                                      "queued",         "timer-late",
                                      "clock-step",     "late-start",
                                      "sharding-failed", "start-failed"};
#define NREASONS (sizeof reasons / sizeof reasons[0])

struct seen {
    const char *job;
    atomic_int runs;
    atomic_int by_reason[NREASONS];
    atomic_int unknown;   /* a "fire not run" event of a reason not listed */
    atomic_int not_error; /* one not posted as TASK_ERROR */
    atomic_int bad_times; /* one whose times are not "from A to A" with A > 0 */
    /* Fire-ledger rows (EJ_EVENT_FIRE) not run, by reason; and bad ones
     * (an unknown reason, no fire time, not item -1). */
    atomic_int ledger_by_reason[NREASONS];
    atomic_int ledger_bad;
    atomic_int item_ms;   /* how long an item runs */
    atomic_int started;   /* items entered */
};

static int reason_index(const char *r)
{
    for (size_t i = 0; i < NREASONS; i++)
        if (strcmp(reasons[i], r) == 0)
            return (int)i;
    return -1;
}

/* A ledger row: a fire not run lands there under the reason it was
 * counted under (src/runtime/ledger.c). */
static void on_fire_event(struct seen *s, const ej_fire_event *f)
{
    if (strcmp(f->outcome, EJ_FIRE_RAN) == 0)
        return;
    int i = reason_index(f->outcome);
    if (i < 0 || f->fire_time_ms <= 0 || f->sharding_item != -1) {
        atomic_fetch_add(&s->ledger_bad, 1);
        return;
    }
    atomic_fetch_add(&s->ledger_by_reason[i], 1);
}

static void on_event(const struct ej_event *ev, void *user)
{
    struct seen *s = user;
    if (ev->type == EJ_EVENT_FIRE)
        return on_fire_event(s, &ev->u.fire);
    if (ev->type != EJ_EVENT_STATUS || ev->u.status.message == NULL)
        return;
    const char *m = strstr(ev->u.status.message, "fire not run (");
    if (m == NULL)
        return;
    /* The daemon's /metrics reads the reason with this very pattern. */
    char reason[32];
    unsigned count = 0;
    if (sscanf(m, "fire not run (%31[a-z-]): %u", reason, &count) != 2) {
        atomic_fetch_add(&s->unknown, 1);
        return;
    }
    int i = reason_index(reason);
    if (i < 0) {
        atomic_fetch_add(&s->unknown, 1);
        return;
    }
    atomic_fetch_add(&s->by_reason[i], (int)count);
    if (ev->u.status.state != EJ_TASK_ERROR)
        atomic_fetch_add(&s->not_error, 1);
    long long a = 0, b = 0;
    const char *from = strstr(m, " from ");
    bool one_scheduler_reason = i >= reason_index("paused") && i <= reason_index("late-start");
    if (!one_scheduler_reason &&
        (count != 1 || from == NULL || sscanf(from, " from %lld to %lld", &a, &b) != 2 || a <= 0 ||
         a != b))
        atomic_fetch_add(&s->bad_times, 1);
}

static int seen_count(struct seen *s, const char *reason)
{
    return atomic_load(&s->by_reason[reason_index(reason)]);
}

static int seen_total(struct seen *s)
{
    int n = 0;
    for (size_t i = 0; i < NREASONS; i++)
        n += atomic_load(&s->by_reason[i]);
    return n;
}

static int item_fn(const ej_shard_context *ctx, void *user)
{
    (void)ctx;
    struct seen *s = user;
    atomic_fetch_add(&s->started, 1);
    int ms = atomic_load(&s->item_ms);
    if (ms > 0)
        ej__sleep_ms(ms);
    atomic_fetch_add(&s->runs, 1);
    return 0;
}

/* Log lines about fires not run, by level and reason (the sink also prints
 * every line). */
static atomic_int lines_at[EJ_LOG_OFF][NREASONS];
static char last_line[NREASONS][512];
static int64_t line_ms[NREASONS][2]; /* monotonic ms of the first and the last line */
static pthread_mutex_t line_mu = PTHREAD_MUTEX_INITIALIZER;

static void log_sink(ej_log_level level, const char *module, int err, const char *msg, void *user)
{
    (void)user;
    (void)err;
    fprintf(stderr, "[%" PRId64 "] %d [%s] %s\n", ej__now_ms() % 100000, (int)level, module, msg);
    const char *m = strstr(msg, " not run (");
    char reason[32];
    if (m == NULL || sscanf(m, " not run (%31[a-z-])", reason) != 1)
        return;
    int i = reason_index(reason);
    if (i < 0 || level >= EJ_LOG_OFF)
        return;
    atomic_fetch_add(&lines_at[level][i], 1);
    pthread_mutex_lock(&line_mu);
    snprintf(last_line[i], sizeof last_line[i], "%s", msg);
    if (line_ms[i][0] == 0)
        line_ms[i][0] = ej__mono_ms();
    line_ms[i][1] = ej__mono_ms();
    pthread_mutex_unlock(&line_mu);
}

static int lines(ej_log_level level, const char *reason)
{
    return atomic_load(&lines_at[level][reason_index(reason)]);
}

/* ------------------------------------------------------------------------ */
/* Helpers                                                                   */

static char *path_of(const char *job, ej_layout_node node, const char *name)
{
    char *p = ej_layout_path_dup(job, node, 0, name);
    REQUIRE(p != NULL, "path");
    return p;
}

static ej_job *make_job(ej_registry *reg, struct seen *s, const char *ip, bool manual,
                        int wait_bound_ms, int max_time_diff_seconds, const struct ej_job_def *def)
{
    struct ej_job_config cfg;
    ej_job_config_init(&cfg);
    ej_job_config_set_str(&cfg.job_name, s->job);
    ej_job_config_set_str(&cfg.cron, "* * * * * ?");
    cfg.sharding_total_count = 1;
    cfg.job_type = EJ_JOB_TYPE_SIMPLE;
    cfg.misfire = false;
    cfg.max_time_diff_seconds = max_time_diff_seconds;
    struct ej_job_opts jo = {.def = def,
                             .ip = ip,
                             .manual = manual,
                             .wait_bound_ms = wait_bound_ms,
                             .drain_timeout_ms = 10000};
    ej_job *job = NULL;
    int rc = ej_job_create(reg, &cfg, &jo, &job);
    ej_job_config_fini(&cfg);
    REQUIRE(rc == 0, "create %s: %s", s->job, ej_strerror(rc));
    REQUIRE(ej_job_subscribe(job, on_event, s) == 0, "subscribe %s", s->job);
    rc = ej_job_start(job);
    REQUIRE(rc == 0, "start %s: %s", s->job, ej_job_last_error(job, (char[512]){0}, 512));
    return job;
}

static uint64_t fires_missed(ej_job *job)
{
    struct ej_job_status st;
    REQUIRE(ej_job_status(job, &st) == 0, "status");
    uint64_t n = st.fires_missed;
    ej_job_status_fini(&st);
    return n;
}

static bool wait_for(atomic_int *v, int at_least, int64_t ms)
{
    int64_t end = ej__mono_ms() + ms;
    while (atomic_load(v) < at_least && ej__mono_ms() < end)
        ej__sleep_ms(20);
    return atomic_load(v) >= at_least;
}

static bool wait_reason(struct seen *s, const char *reason, int at_least, int64_t ms)
{
    return wait_for(&s->by_reason[reason_index(reason)], at_least, ms);
}

/*
 * Shut the job down, read its counter, destroy it, and check every "fire not
 * run" event: well-formed, TASK_ERROR, and as many as fires_missed says,
 * plus the fire times that passed while the shutdown drained (the trigger
 * is paused by then; its removal reports them as paused).
 */
static void finish(ej_job *job, struct seen *s)
{
    ej_job_shutdown(job);
    uint64_t missed = fires_missed(job);
    ej_job_destroy(job); /* delivers the events posted */
    CHECK(atomic_load(&s->unknown) == 0, "%s: %d not-run events of an unknown reason", s->job,
          atomic_load(&s->unknown));
    CHECK(atomic_load(&s->not_error) == 0, "%s: %d not-run events not TASK_ERROR", s->job,
          atomic_load(&s->not_error));
    CHECK(atomic_load(&s->bad_times) == 0, "%s: %d not-run events without 'from A to A'", s->job,
          atomic_load(&s->bad_times));
    /* Every fire time counted not run is a ledger row with its reason (the
     * scheduler's ranges expanded from the cron: at most as many). */
    CHECK(atomic_load(&s->ledger_bad) == 0, "%s: %d ledger rows of an unknown reason or shape",
          s->job, atomic_load(&s->ledger_bad));
    for (size_t i = 0; i < NREASONS; i++) {
        int events = atomic_load(&s->by_reason[i]), rows = atomic_load(&s->ledger_by_reason[i]);
        bool scheduler = (int)i >= reason_index("paused") && (int)i <= reason_index("late-start");
        CHECK(scheduler ? (rows >= (events > 0) && rows <= events) : rows == events,
              "%s: %d fire time(s) not run (%s), %d ledger row(s)", s->job, events, reasons[i],
              rows);
    }
    uint64_t seen = (uint64_t)seen_total(s);
    CHECK(seen >= missed && seen - missed <= (uint64_t)seen_count(s, "paused"),
          "%s: fires_missed %" PRIu64 ", events say %" PRIu64 " (%d paused)", s->job, missed, seen,
          seen_count(s, "paused"));
}

static void hold_dispatch(ej_registry *reg, void *user)
{
    (void)reg;
    ej__sleep_ms(*(int *)user);
}

/* ------------------------------------------------------------------------ */
/* Scenarios                                                                 */

/* Runs alone: the clock shift applies to every trigger of the process. */
static void before_registration(ej_registry *reg)
{
    static struct seen s = {.job = "nrBefore"};
    struct ej_job_def def = {.type = EJ_JOB_TYPE_SIMPLE, .simple = item_fn, .user = &s};
    ej_job *job = make_job(reg, &s, "127.0.6.1", false, 0, -1, &def);
    REQUIRE(wait_for(&s.runs, 1, 10000), "%s did not run", s.job);
    /* An hour back on the scheduler's clock: every cron fire time it hands
     * over is now before the instance registered. */
    ej__sched_debug_shift_clock(ej__sched_default(), -3600 * 1000LL);
    ej__sleep_ms(300);
    int runs = atomic_load(&s.runs);
    CHECK(wait_reason(&s, "before-registration", 2, 8000),
          "%d 'fire not run (before-registration)' events", seen_count(&s, "before-registration"));
    CHECK(atomic_load(&s.runs) == runs, "%d runs of fires due before the registration",
          atomic_load(&s.runs) - runs);
    CHECK(lines(EJ_LOG_WARN, "before-registration") == 1, "%d warning lines in under 5 s",
          lines(EJ_LOG_WARN, "before-registration"));
    finish(job, &s);
    ej__sched_debug_shift_clock(ej__sched_default(), 3600 * 1000LL);
    fprintf(stderr, "before-registration: %d fires not run\n",
            seen_count(&s, "before-registration"));
}

static void disabled(ej_registry *reg, ej_registry *peek)
{
    static struct seen s = {.job = "nrDisabled"};
    struct ej_job_def def = {.type = EJ_JOB_TYPE_SIMPLE, .simple = item_fn, .user = &s};
    const char *ip = "127.0.6.2";
    ej_job *job = make_job(reg, &s, ip, false, 0, -1, &def);
    REQUIRE(wait_for(&s.runs, 1, 10000), "%s did not run", s.job);
    char *server = path_of(s.job, EJ_LAYOUT_NODE_SERVER, ip);
    REQUIRE(ej_registry_set(peek, server, EJ_LAYOUT_SERVER_DISABLED,
                            strlen(EJ_LAYOUT_SERVER_DISABLED), -1, NULL) == 0,
            "disable");
    ej__sleep_ms(500);
    int runs = atomic_load(&s.runs);
    CHECK(wait_reason(&s, "disabled", 3, 8000), "%d 'fire not run (disabled)' events",
          seen_count(&s, "disabled"));
    CHECK(atomic_load(&s.runs) == runs, "%d runs while disabled", atomic_load(&s.runs) - runs);
    /* An operator's decision: logged at debug level only. */
    CHECK(lines(EJ_LOG_INFO, "disabled") + lines(EJ_LOG_WARN, "disabled") == 0,
          "disabled fires logged above debug: %s", last_line[reason_index("disabled")]);
    REQUIRE(ej_registry_set(peek, server, "", 0, -1, NULL) == 0, "enable");
    CHECK(wait_for(&s.runs, runs + 1, 8000), "no run after enabling");
    finish(job, &s);
    free(server);
    fprintf(stderr, "disabled: %d fires not run\n", seen_count(&s, "disabled"));
}

static void leader_wait(ej_registry *reg, ej_registry *peek)
{
    static struct seen s = {.job = "nrLeader"};
    struct ej_job_def def = {.type = EJ_JOB_TYPE_SIMPLE, .simple = item_fn, .user = &s};
    /* A leader that never reshards: a plain client holds the election node
     * naming an instance whose node it holds too, so the leader looks
     * alive (a leader naming no live instance would be healed). */
    const char *ghost = "10.9.9.9@-@1";
    char *leader = path_of(s.job, EJ_LAYOUT_NODE_ELECTION_INSTANCE, NULL);
    char *inst = path_of(s.job, EJ_LAYOUT_NODE_INSTANCE, ghost);
    REQUIRE(ej_registry_create_node(peek, inst, NULL, 0, EJ_REG_EPHEMERAL, EJ_REG_CREATE_PARENTS,
                                    NULL) == 0,
            "ghost instance");
    REQUIRE(ej_registry_create_node(peek, leader, ghost, strlen(ghost), EJ_REG_EPHEMERAL,
                                    EJ_REG_CREATE_PARENTS, NULL) == 0,
            "ghost leader");
    ej_job *job = make_job(reg, &s, "127.0.6.3", false, 600, -1, &def);
    CHECK(wait_reason(&s, "leader-wait", 2, 10000), "%d 'fire not run (leader-wait)' events",
          seen_count(&s, "leader-wait"));
    CHECK(atomic_load(&s.runs) == 0, "%d runs without a sharding", atomic_load(&s.runs));
    /* Rate-limited: one warning line now, the next one at least 5 s after
     * it, counting the fires that went without a line. */
    CHECK(lines(EJ_LOG_WARN, "leader-wait") == 1, "%d warning lines",
          lines(EJ_LOG_WARN, "leader-wait"));
    int lw = reason_index("leader-wait");
    CHECK(wait_for(&lines_at[EJ_LOG_WARN][lw], 2, 15000), "no second warning line");
    pthread_mutex_lock(&line_mu);
    CHECK(strstr(last_line[lw], "more not run so since the last") != NULL,
          "second line does not count the rest: %s", last_line[lw]);
    int64_t gap = line_ms[lw][1] - line_ms[lw][0];
    pthread_mutex_unlock(&line_mu);
    CHECK(gap >= 4900, "second warning line %" PRId64 " ms after the first", gap);
    CHECK(seen_count(&s, "leader-wait") >= 3, "%d leader-wait fires in 5 s",
          seen_count(&s, "leader-wait"));
    /* The ghost goes: the instance leads, shards and runs. */
    ej_registry_delete(peek, leader, -1);
    ej_registry_delete(peek, inst, -1);
    CHECK(wait_for(&s.runs, 1, 15000), "no run once the ghost leader left");
    finish(job, &s);
    free(leader);
    free(inst);
    fprintf(stderr, "leader-wait: %d fires not run\n", seen_count(&s, "leader-wait"));
}

static void time_diff(ej_registry *reg, ej_registry *peek)
{
    static struct seen s = {.job = "nrTime"};
    struct ej_job_def def = {.type = EJ_JOB_TYPE_SIMPLE, .simple = item_fn, .user = &s};
    /* systemTime ephemeral: systemTime/current cannot be created under it,
     * so the clock check fails with a ZooKeeper error. */
    char *current = path_of(s.job, EJ_LAYOUT_NODE_SYSTEM_TIME, NULL);
    char *dir = strdup(current);
    REQUIRE(dir != NULL, "strdup");
    *strrchr(dir, '/') = '\0';
    REQUIRE(ej_registry_create_node(peek, dir, NULL, 0, EJ_REG_EPHEMERAL, EJ_REG_CREATE_PARENTS,
                                    NULL) == 0,
            "ephemeral %s", dir);
    ej_job *job = make_job(reg, &s, "127.0.6.4", false, 0, 600, &def);
    CHECK(wait_reason(&s, "time-diff", 2, 10000), "%d 'fire not run (time-diff)' events",
          seen_count(&s, "time-diff"));
    CHECK(atomic_load(&s.runs) == 0, "%d runs without a clock check", atomic_load(&s.runs));
    CHECK(lines(EJ_LOG_WARN, "time-diff") == 1, "%d warning lines",
          lines(EJ_LOG_WARN, "time-diff"));
    REQUIRE(ej_registry_delete(peek, dir, -1) == 0, "delete %s", dir);
    CHECK(wait_for(&s.runs, 1, 10000), "no run once the clock could be checked");
    finish(job, &s);
    free(current);
    free(dir);
    fprintf(stderr, "time-diff: %d fires not run\n", seen_count(&s, "time-diff"));
}

static void running_and_stopped(ej_registry *reg)
{
    static struct seen s = {.job = "nrManual"};
    struct ej_job_def def = {.type = EJ_JOB_TYPE_SIMPLE, .simple = item_fn, .user = &s};
    atomic_store(&s.item_ms, 2500);
    ej_job *job = make_job(reg, &s, "127.0.6.5", true, 0, -1, &def);
    /* A trigger right after the start may find the sharding flag not yet
     * in the cache, so no item of this instance: trigger again. */
    for (int i = 0; i < 10 && atomic_load(&s.started) == 0; i++) {
        REQUIRE(ej_job_trigger(job) == 0, "trigger");
        wait_for(&s.started, 1, 1000);
    }
    REQUIRE(atomic_load(&s.started) == 1, "the triggered run did not start");
    /* The console's trigger while the job runs: ignored, and said so. */
    REQUIRE(ej_job_trigger_all(job) == 0, "trigger_all");
    CHECK(wait_reason(&s, "running", 1, 2000), "no 'fire not run (running)' event");
    /* A trigger that comes due while the job shuts down. */
    REQUIRE(ej_job_trigger(job) == 0, "second trigger");
    CHECK(ej_job_shutdown(job) == 0, "shutdown");
    CHECK(wait_reason(&s, "stopped", 1, 2000), "no 'fire not run (stopped)' event");
    CHECK(atomic_load(&s.runs) == 1, "%d runs", atomic_load(&s.runs));
    uint64_t missed = fires_missed(job);
    CHECK(missed == 2, "fires_missed %" PRIu64, missed);
    CHECK(seen_count(&s, "running") == 1 && seen_count(&s, "stopped") == 1,
          "running %d, stopped %d", seen_count(&s, "running"), seen_count(&s, "stopped"));
    finish(job, &s);
}

/* Sets the ACL of /{ns}{path} with a raw client (the registry has no ACL
 * calls). */
static int set_acl(const char *path, struct ACL_vector *acl)
{
    zhandle_t *zh = zookeeper_init(zkf_connect_string(zk), NULL, 10000, NULL, NULL, 0);
    REQUIRE(zh != NULL, "zookeeper_init");
    for (int i = 0; i < 200 && zoo_state(zh) != ZOO_CONNECTED_STATE; i++)
        ej__sleep_ms(20);
    char full[512];
    snprintf(full, sizeof full, "/%s%s", ns, path);
    int rc = zoo_set_acl(zh, full, -1, acl);
    zookeeper_close(zh);
    return rc;
}

/* The item's node takes no children (world may read, write, delete and
 * administer it, not create under it): the running node of the next fire
 * cannot be written, so the fire cannot start anything. */
static void start_failed(ej_registry *reg)
{
    static struct seen s = {.job = "nrStart"};
    struct ej_job_def def = {.type = EJ_JOB_TYPE_SIMPLE, .simple = item_fn, .user = &s};
    ej_job *job = make_job(reg, &s, "127.0.6.7", false, 0, -1, &def);
    REQUIRE(wait_for(&s.runs, 1, 10000), "%s did not run", s.job);
    char *item = ej_layout_path_dup(s.job, EJ_LAYOUT_NODE_ITEM, 0, NULL);
    REQUIRE(item != NULL, "path");
    struct ACL no_create_acl[] = {
        {ZOO_PERM_READ | ZOO_PERM_WRITE | ZOO_PERM_DELETE | ZOO_PERM_ADMIN, ZOO_ANYONE_ID_UNSAFE}};
    struct ACL_vector no_create = {1, no_create_acl};
    REQUIRE(set_acl(item, &no_create) == ZOK, "set the ACL of %s", item);
    int runs = atomic_load(&s.runs);
    CHECK(wait_reason(&s, "start-failed", 2, 10000), "%d 'fire not run (start-failed)' events",
          seen_count(&s, "start-failed"));
    CHECK(atomic_load(&s.runs) - runs <= 1, "%d runs without running nodes",
          atomic_load(&s.runs) - runs);
    CHECK(lines(EJ_LOG_WARN, "start-failed") == 1, "%d warning lines",
          lines(EJ_LOG_WARN, "start-failed"));
    REQUIRE(set_acl(item, &ZOO_OPEN_ACL_UNSAFE) == ZOK, "restore the ACL of %s", item);
    CHECK(wait_for(&s.runs, runs + 1, 10000), "no run once the running node could be written");
    finish(job, &s);
    free(item);
    fprintf(stderr, "start-failed: %d fires not run\n", seen_count(&s, "start-failed"));
}

/* Last: it freezes the server. */
static void fenced(ej_registry *reg)
{
    static struct seen s = {.job = "nrFence"};
    struct ej_job_def def = {.type = EJ_JOB_TYPE_SIMPLE, .simple = item_fn, .user = &s};
    ej_job *job = make_job(reg, &s, "127.0.6.6", false, 0, -1, &def);
    REQUIRE(wait_for(&s.runs, 1, 10000), "%s did not run", s.job);
    /* The dispatch thread is held up, so the connection's loss does not
     * pause the trigger: fires keep coming while the fence refuses. */
    int hold_ms = 3 * SESSION_MS;
    ej_registry_post(reg, hold_dispatch, &hold_ms);
    ej__sleep_ms(50);
    REQUIRE(kill(zkf_pid(zk), SIGSTOP) == 0, "SIGSTOP zookeeper");
    int64_t frozen = ej__mono_ms();
    int runs = atomic_load(&s.runs);
    bool got = wait_reason(&s, "fenced", 2, hold_ms - 500);
    int64_t took = ej__mono_ms() - frozen;
    int late_runs = atomic_load(&s.runs) - runs;
    REQUIRE(kill(zkf_pid(zk), SIGCONT) == 0, "SIGCONT zookeeper");
    CHECK(got, "%d 'fire not run (fenced)' events in %" PRId64 " ms frozen",
          seen_count(&s, "fenced"), took);
    CHECK(late_runs <= 1, "%d runs while frozen", late_runs);
    CHECK(lines(EJ_LOG_WARN, "fenced") == 1, "%d warning lines", lines(EJ_LOG_WARN, "fenced"));
    fprintf(stderr, "fenced: %d fires not run in %" PRId64 " ms frozen\n", seen_count(&s, "fenced"),
            took);
    ej_registry_wait_connected(reg, 20000);
    finish(job, &s);
}

int main(void)
{
    setvbuf(stderr, NULL, _IOLBF, 0);
    ej_log_set_sink(log_sink, NULL);
    zkf_opts zo = {.tick_ms = 200};
    REQUIRE(zkf_start(&zk, &zo) == 0, "zookeeper");
    char *ns_buf = zkf_unique_namespace("notrun");
    ns = ns_buf;
    struct ej_registry_opts ro = itest_registry_opts(zk, ns, SESSION_MS);
    ej_registry *reg = NULL, *peek = NULL;
    REQUIRE(ej_registry_create(&reg, &ro) == 0, "registry: %s", ej_registry_errmsg(NULL));
    REQUIRE(ej_registry_create(&peek, &ro) == 0, "registry: %s", ej_registry_errmsg(NULL));

    before_registration(reg);
    disabled(reg, peek);
    leader_wait(reg, peek);
    time_diff(reg, peek);
    running_and_stopped(reg);
    start_failed(reg);
    fenced(reg);

    ej_registry_destroy(peek);
    ej_registry_destroy(reg);
    ej_log_set_sink(NULL, NULL);
    zkf_destroy(zk);
    zk = NULL;
    free(ns_buf);
    if (failures) {
        fprintf(stderr, "%d check(s) failed\n", failures);
        return 1;
    }
    fprintf(stderr, "coord_notrun: all checks passed\n");
    return 0;
}
