/*
 * The daemon's metrics (see daemon_metrics.h and docs/metrics.md).
 *
 * Sources, and the thread each arrives on:
 *   - the event bus thread: execution events (item runs, results,
 *     durations, failovers) and status events (fires not run);
 *   - the registry's dispatch thread: connection states, counted in plain
 *     atomics (no lock: the dispatch thread must never wait on us);
 *   - the HTTP thread, at each scrape: ej_job_status() of every job, the
 *     registry's state and request counter, the bus counters, the history
 *     store's counters (daemon_events.c), /proc.
 * Everything but the atomics is under one mutex; none of our callers holds
 * a lock of the job, registry or bus while calling in.
 *
 * Adding a metric: one line in the table below (and its enum name), then
 * feed it where its source is.
 */
#include <pthread.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "common/check.h"
#include "ejob/ejob.h"
#include "ejob/error.h"
#include "ejob/event.h"
#include "ejob/log.h"
#include "ejob/metrics.h"
#include "alert/alert.h"
#include "common/util.h"
#include "cli/daemon_clock.h"
#include "cli/daemon_events.h"
#include "cli/daemon_metrics.h"
#include "cli/daemon_retry.h"

#ifndef EJOB_VERSION
#define EJOB_VERSION "unknown"
#endif

/* /healthz fails once the registry's dispatch thread (which runs every
 * ZooKeeper callback of every job) has not run a heartbeat for this long.
 * Generous: a callback may legitimately block through a few retries of a
 * synchronous request while ZooKeeper is away. */
#define STALL_MS 60000
#define BEAT_MS 1000

enum {
    M_BUILD_INFO,
    M_JOBS,
    M_READY,
    M_FIRES,
    M_ITEM_RUNS,
    M_ITEM_DURATION,
    M_NOT_RUN,
    M_FAILOVERS,
    M_MISFIRES,
    M_LATENESS,
    M_RESHARDS,
    M_LEADER,
    M_ITEMS_OWNED,
    M_RUNNING,
    M_LAST_FIRE,
    M_NEXT_FIRE,
    M_ZK_STATE,
    M_ZK_REQUESTS,
    M_ZK_DISCONNECTS,
    M_ZK_RECONNECTS,
    M_ZK_LOST,
    M_ZK_TIMEOUT,
    M_CLOCK_OFFSET,
    M_EV_DEPTH,
    M_EV_POSTED,
    M_EV_DROPPED,
    M_HIST_WRITTEN,
    M_HIST_DROPPED,
    M_HIST_REJECTED,
    M_HIST_FAILURES,
    M_HIST_DEPTH,
    M_HIST_UP,
    M_HIST_LAST_WRITE,
    M_ALERTS_SENT,
    M_ALERTS_FAILED,
    M_ALERTS_DROPPED,
    M_COUNT
};

/* The label naming a job. Not "job": Prometheus sets "job" to the scrape
 * job's name and renames a target's own to "exported_job". */
#define JOB "ejob_job"

/* clang-format off: one line per metric */
#define C EJ_METRIC_COUNTER
#define G EJ_METRIC_GAUGE
#define H EJ_METRIC_HISTOGRAM
static const struct ej_metric_desc table[M_COUNT] = {
    [M_BUILD_INFO] = {"ejob_build_info", G, "Always 1; the version of ejob.", {"version"}, NULL, 0},
    [M_JOBS] = {"ejob_jobs", G, "Jobs this daemon runs.", {NULL}, NULL, 0},
    [M_READY] = {"ejob_ready", G, "1 while /readyz answers 200 (ready).", {NULL}, NULL, 0},
    [M_FIRES] = {"ejob_job_fires_total", C, "Fires started on this instance.", {JOB}, NULL, 0},
    [M_ITEM_RUNS] = {"ejob_item_runs_total",
                     C,
                     "Shard item runs finished, by result (success, failed, timeout or killed).",
                     {JOB, "result"},
                     NULL,
                     0},
    [M_ITEM_DURATION] =
        {"ejob_item_run_duration_seconds", H, "How long shard item runs took.", {JOB}, NULL, 0},
    [M_NOT_RUN] = {"ejob_fires_not_run_total",
                   C,
                   "Fires that did not run their items when due, by reason.",
                   {JOB, "reason"},
                   NULL,
                   0},
    [M_FAILOVERS] = {"ejob_failovers_total",
                     C,
                     "Shard item runs this instance took over from an instance that died.",
                     {JOB},
                     NULL,
                     0},
    [M_MISFIRES] = {"ejob_misfire_runs_total",
                    C,
                    "Shard item runs started on this instance as misfire re-runs.",
                    {JOB},
                    NULL,
                    0},
    [M_LATENESS] = {"ejob_fire_lateness_seconds",
                    H,
                    "Cron fires started on this instance, by how late they started "
                    "(cron fire time to start).",
                    {JOB},
                    ej_fire_lateness_bounds,
                    EJ_FIRE_LATENESS_BUCKETS},
    [M_RESHARDS] = {"ejob_reshards_total",
                    C,
                    "New sharding assignments this instance wrote as the job's leader.",
                    {JOB},
                    NULL,
                    0},
    [M_LEADER] =
        {"ejob_job_leader", G, "1 when this instance is the job's leader.", {JOB}, NULL, 0},
    [M_ITEMS_OWNED] =
        {"ejob_job_shard_items", G, "Shard items this instance owns.", {JOB}, NULL, 0},
    [M_RUNNING] =
        {"ejob_job_running", G, "1 while a fire of the job runs on this instance.", {JOB}, NULL, 0},
    [M_LAST_FIRE] = {"ejob_job_last_fire_timestamp_seconds",
                     G,
                     "When the last fire started (unix time; 0: none yet).",
                     {JOB},
                     NULL,
                     0},
    [M_NEXT_FIRE] = {"ejob_job_next_fire_timestamp_seconds",
                     G,
                     "When the job fires next (unix time; 0: none scheduled).",
                     {JOB},
                     NULL,
                     0},
    [M_ZK_STATE] = {"ejob_zookeeper_session_state",
                    G,
                    "1 for the current state of the ZooKeeper session (connecting, connected, "
                    "suspended, lost).",
                    {"state"},
                    NULL,
                    0},
    [M_ZK_REQUESTS] = {"ejob_zookeeper_requests_total",
                       C,
                       "Requests sent to ZooKeeper (every attempt; not pings).",
                       {NULL},
                       NULL,
                       0},
    [M_ZK_DISCONNECTS] = {"ejob_zookeeper_disconnects_total",
                          C,
                          "Times the ZooKeeper connection was lost (SUSPENDED).",
                          {NULL},
                          NULL,
                          0},
    [M_ZK_RECONNECTS] = {"ejob_zookeeper_reconnects_total",
                         C,
                         "Times the connection came back, by session (same or new).",
                         {"session"},
                         NULL,
                         0},
    [M_ZK_LOST] = {"ejob_zookeeper_sessions_lost_total",
                   C,
                   "ZooKeeper sessions lost (expired, or disconnected past their timeout).",
                   {NULL},
                   NULL,
                   0},
    [M_ZK_TIMEOUT] = {"ejob_zookeeper_session_timeout_seconds",
                      G,
                      "Session timeout the server granted.",
                      {NULL},
                      NULL,
                      0},
    [M_CLOCK_OFFSET] = {"ejob_clock_offset_seconds",
                        G,
                        "This host's clock minus ZooKeeper's, last measured (0 until then).",
                        {NULL},
                        NULL,
                        0},
    [M_EV_DEPTH] =
        {"ejob_event_queue_depth", G, "Job events waiting in the event bus.", {NULL}, NULL, 0},
    [M_EV_POSTED] =
        {"ejob_event_posted_total", C, "Job events accepted by the event bus.", {NULL}, NULL, 0},
    [M_EV_DROPPED] = {"ejob_event_dropped_total",
                      C,
                      "Job events dropped (queue full, out of memory, closing).",
                      {NULL},
                      NULL,
                      0},
    [M_HIST_WRITTEN] = {"ejob_history_events_written_total",
                        C,
                        "Job events committed to the history store.",
                        {NULL},
                        NULL,
                        0},
    [M_HIST_DROPPED] = {"ejob_history_events_dropped_total",
                        C,
                        "Job events the history store did not take or gave up at shutdown "
                        "(queue full, out of memory, closing).",
                        {NULL},
                        NULL,
                        0},
    [M_HIST_REJECTED] = {"ejob_history_events_rejected_total",
                         C,
                         "Job events the history database refused on their own.",
                         {NULL},
                         NULL,
                         0},
    [M_HIST_FAILURES] = {"ejob_history_write_failures_total",
                         C,
                         "Failed attempts to write to the history database (each retried).",
                         {NULL},
                         NULL,
                         0},
    [M_HIST_DEPTH] = {"ejob_history_queue_depth",
                      G,
                      "Job events waiting to be written to the history store.",
                      {NULL},
                      NULL,
                      0},
    [M_HIST_UP] = {"ejob_history_store_up",
                   G,
                   "1 while the history store has a working database connection.",
                   {NULL},
                   NULL,
                   0},
    [M_HIST_LAST_WRITE] = {"ejob_history_last_write_timestamp_seconds",
                           G,
                           "When the history store last committed (unix time; 0: never).",
                           {NULL},
                           NULL,
                           0},
    [M_ALERTS_SENT] = {"ejob_alerts_sent_total",
                       C,
                       "Alert messages a receiver took, by channel.",
                       {"channel"},
                       NULL,
                       0},
    [M_ALERTS_FAILED] = {"ejob_alerts_failed_total",
                         C,
                         "Alert messages given up after their retries or refused, by channel.",
                         {"channel"},
                         NULL,
                         0},
    [M_ALERTS_DROPPED] = {"ejob_alerts_dropped_total",
                          C,
                          "Alerts dropped unsent (queue full, stopping), by channel; "
                          "channel=\"\" for facts the alert queue refused.",
                          {"channel"},
                          NULL,
                          0},
};
#undef C
#undef G
#undef H
#undef JOB
/* clang-format on */

/* Families the collector rebuilds at every scrape: their series follow the
 * jobs that run now. */
static const int per_job_status[] = {M_FIRES,   M_LATENESS,  M_RESHARDS,    M_LEADER,
                                     M_RUNNING, M_LAST_FIRE, M_ITEMS_OWNED, M_NEXT_FIRE};

static ej__mutex mu = EJ__MUTEX_INITIALIZER;
static struct {
    bool on;
    ej_metrics *m;
    ej_metrics_server *srv;
    ej_metric *f[M_COUNT];
    struct ej_event_bus *bus;
    ej_job **jobs;
    size_t njobs, cap;
    size_t expected, started_total;
} st;

/* Written on the registry's dispatch thread. */
static _Atomic(ej_registry *) registry;
static atomic_int reg_state; /* ej_reg_state; 0: not connected yet */
static atomic_uint_fast64_t disconnects, reconnects_same, reconnects_new, sessions_lost;
static atomic_bool beating;
static _Atomic int64_t last_beat_ms;

/* ------------------------------------------------------------- events */

static const char misfire_prefix[] = "Previous job '";
/* ejob_item_runs_total's results; ejob_fires_not_run_total's reason for
 * items marked misfire (the runtime's reasons: ej_fire_not_run_reason). */
static const char *const results[] = {EJ_RUN_SUCCESS, EJ_RUN_FAILED, EJ_RUN_TIMEOUT, EJ_RUN_KILLED};
static const char reason_busy[] = "busy";

static void on_execution(const ej_execution_event *e)
{
    if (e->complete_time_ms == 0) {
        if (e->execution_source == EJ_EXEC_FAILOVER)
            ej_metric_inc(ej_metric_get1(st.f[M_FAILOVERS], e->job_name));
        else if (e->execution_source == EJ_EXEC_MISFIRE)
            ej_metric_inc(ej_metric_get1(st.f[M_MISFIRES], e->job_name));
        return;
    }
    ej_metric_inc(ej_metric_get2(st.f[M_ITEM_RUNS], e->job_name, ej_execution_result(e)));
    if (e->start_time_ms > 0 && e->complete_time_ms >= e->start_time_ms)
        ej_metric_observe(ej_metric_get1(st.f[M_ITEM_DURATION], e->job_name),
                          (double)(e->complete_time_ms - e->start_time_ms) / 1000.0);
}

static void on_status(const ej_status_event *e)
{
    /* ElasticJob's own message for a fire that found the previous run
     * still going: its items were marked misfire instead of running. */
    if (e->message != NULL && strncmp(e->message, misfire_prefix, strlen(misfire_prefix)) == 0 &&
        strstr(e->message, "is still running, misfired job will start") != NULL)
        ej_metric_inc(ej_metric_get2(st.f[M_NOT_RUN], e->job_name, reason_busy));
    /* The runtime's report of cron fire times the scheduler could not
     * deliver on time: "... fire not run (REASON): N fire time(s) ...". */
    const char *m = e->message ? strstr(e->message, "fire not run (") : NULL;
    char reason[32];
    unsigned count = 0;
    if (m != NULL && sscanf(m, "fire not run (%31[a-z-]): %u", reason, &count) == 2)
        ej_metric_add(ej_metric_get2(st.f[M_NOT_RUN], e->job_name, reason), (double)count);
}

static void event_sink(const ej_event *ev, void *user)
{
    (void)user;
    ej__mutex_lock(&mu);
    if (st.on && ev->type == EJ_EVENT_EXECUTION)
        on_execution(&ev->u.execution);
    else if (st.on && ev->type == EJ_EVENT_STATUS)
        on_status(&ev->u.status);
    ej__mutex_unlock(&mu);
}

/* ------------------------------------------------------------ collect */

static double seconds(int64_t ms)
{
    return (double)ms / 1000.0;
}

static void collect_jobs(void)
{
    for (size_t i = 0; i < sizeof per_job_status / sizeof per_job_status[0]; i++)
        ej_metric_reset(st.f[per_job_status[i]]);
    for (size_t i = 0; i < st.njobs; i++) {
        struct ej_job_status s;
        if (ej_job_status(st.jobs[i], &s) != 0)
            continue;
        const char *job = s.job_name != NULL ? s.job_name : ej_job_name(st.jobs[i]);
        ej_metric_set(ej_metric_get1(st.f[M_FIRES], job), (double)s.fires);
        ej_metric_histogram_set(ej_metric_get1(st.f[M_LATENESS], job), s.fire_lateness,
                                EJ_FIRE_LATENESS_BUCKETS + 1, s.fire_lateness_sum);
        ej_metric_set(ej_metric_get1(st.f[M_RESHARDS], job), (double)s.reshards);
        ej_metric_set(ej_metric_get1(st.f[M_LEADER], job), s.leader);
        ej_metric_set(ej_metric_get1(st.f[M_ITEMS_OWNED], job), (double)s.item_count);
        ej_metric_set(ej_metric_get1(st.f[M_RUNNING], job), s.running);
        ej_metric_set(ej_metric_get1(st.f[M_LAST_FIRE], job), seconds(s.last_fire_ms));
        ej_metric_set(ej_metric_get1(st.f[M_NEXT_FIRE], job), seconds(s.next_fire_ms));
        ej_job_status_fini(&s);
    }
    ej_metric_set(ej_metric_get0(st.f[M_JOBS]), (double)st.njobs);
}

static const char *state_label(int s)
{
    switch (s) {
    case EJ_REG_CONNECTED:
    case EJ_REG_RECONNECTED:
        return "connected";
    case EJ_REG_SUSPENDED:
        return "suspended";
    case EJ_REG_LOST:
        return "lost";
    default:
        return "connecting";
    }
}

static void collect_registry(void)
{
    static const char *const states[] = {"connecting", "connected", "suspended", "lost"};
    const char *now = state_label(atomic_load(&reg_state));
    for (size_t i = 0; i < 4; i++)
        ej_metric_set(ej_metric_get1(st.f[M_ZK_STATE], states[i]), strcmp(states[i], now) == 0);
    ej_metric_set(ej_metric_get0(st.f[M_ZK_DISCONNECTS]), (double)atomic_load(&disconnects));
    ej_metric_set(ej_metric_get1(st.f[M_ZK_RECONNECTS], "same"),
                  (double)atomic_load(&reconnects_same));
    ej_metric_set(ej_metric_get1(st.f[M_ZK_RECONNECTS], "new"),
                  (double)atomic_load(&reconnects_new));
    ej_metric_set(ej_metric_get0(st.f[M_ZK_LOST]), (double)atomic_load(&sessions_lost));
    ej_registry *reg = atomic_load(&registry);
    if (reg != NULL) {
        ej_metric_set(ej_metric_get0(st.f[M_ZK_REQUESTS]), (double)ej_registry_request_count(reg));
        ej_metric_set(ej_metric_get0(st.f[M_ZK_TIMEOUT]),
                      seconds(ej_registry_negotiated_timeout_ms(reg)));
    }
}

/* The history store's counters; no series while history is off. */
static void collect_history(void)
{
    struct ej_trace_stats ts;
    if (!ejd_events_history_stats(&ts))
        return;
    ej_metric_set(ej_metric_get0(st.f[M_HIST_WRITTEN]), (double)ts.written);
    ej_metric_set(ej_metric_get0(st.f[M_HIST_DROPPED]), (double)ts.dropped);
    ej_metric_set(ej_metric_get0(st.f[M_HIST_REJECTED]), (double)ts.rejected);
    ej_metric_set(ej_metric_get0(st.f[M_HIST_FAILURES]), (double)ts.failures);
    ej_metric_set(ej_metric_get0(st.f[M_HIST_DEPTH]), (double)ts.queued);
    ej_metric_set(ej_metric_get0(st.f[M_HIST_UP]), ts.connected);
    ej_metric_set(ej_metric_get0(st.f[M_HIST_LAST_WRITE]), seconds(ts.last_write_ms));
}

static bool ready_locked(char *why, size_t len);

/* Alert delivery, per channel; no series while alerts are off. */
static void collect_alerts(void)
{
    EJ_ASSERT_HELD(&mu);
    static struct ej_alert_stats as; /* large; mu held */
    ej_alert_stats_get(&as);
    if (!as.running)
        return;
    for (size_t i = 0; i < as.channel_count; i++) {
        const struct ej_alert_channel_stats *c = &as.channels[i];
        ej_metric_set(ej_metric_get1(st.f[M_ALERTS_SENT], c->name), (double)c->sent);
        ej_metric_set(ej_metric_get1(st.f[M_ALERTS_FAILED], c->name), (double)c->failed);
        ej_metric_set(ej_metric_get1(st.f[M_ALERTS_DROPPED], c->name), (double)c->dropped);
    }
    ej_metric_set(ej_metric_get1(st.f[M_ALERTS_DROPPED], ""), (double)as.facts_dropped);
}

static void collect(ej_metrics *m, void *user)
{
    (void)m;
    (void)user;
    ej__mutex_lock(&mu);
    if (st.on) {
        collect_jobs();
        char why[256];
        ej_metric_set(ej_metric_get0(st.f[M_READY]), ready_locked(why, sizeof why));
        collect_registry();
        collect_history();
        collect_alerts();
        int64_t clock_off = 0;
        ejd_clock_offset(&clock_off);
        ej_metric_set(ej_metric_get0(st.f[M_CLOCK_OFFSET]), (double)clock_off / 1000.0);
        if (st.bus != NULL) {
            struct ej_event_bus_stats bs;
            ej_event_bus_stats(st.bus, &bs);
            ej_metric_set(ej_metric_get0(st.f[M_EV_DEPTH]), (double)bs.queued);
            ej_metric_set(ej_metric_get0(st.f[M_EV_POSTED]), (double)bs.posted);
            ej_metric_set(ej_metric_get0(st.f[M_EV_DROPPED]), (double)bs.dropped);
        }
    }
    ej__mutex_unlock(&mu);
}

/* ------------------------------------------------------ health, ready */

static bool healthz(char *why, size_t len, void *user)
{
    (void)user;
    if (atomic_load(&registry) == NULL || !atomic_load(&beating))
        return true; /* nothing to watch yet: the process answers */
    int64_t idle = ej__mono_ms() - atomic_load(&last_beat_ms);
    if (idle < STALL_MS)
        return true;
    snprintf(why, len, "the ZooKeeper event thread has not run for %lld ms", (long long)idle);
    return false;
}

static bool jobs_ready(char *why, size_t len)
{
    if (st.started_total < st.expected) {
        int w = snprintf(why, len, "starting jobs: %zu of %zu registered", st.started_total,
                         st.expected);
        if (w > 0 && (size_t)w + 20 < len && ejd_retry_pending() > 0) {
            w += snprintf(why + w, len - (size_t)w, "; waiting to start again: ");
            ejd_retry_describe(why + w, len - (size_t)w);
        }
        return false;
    }
    for (size_t i = 0; i < st.njobs; i++) {
        struct ej_job_status s;
        if (ej_job_status(st.jobs[i], &s) != 0) {
            snprintf(why, len, "job %s: status unavailable", ej_job_name(st.jobs[i]));
            return false;
        }
        bool ok = s.started && !s.stopped;
        if (!ok)
            snprintf(why, len, "job %s: %s", ej_job_name(st.jobs[i]),
                     s.stopped ? "stopped (shut down or removed)" : "not started");
        ej_job_status_fini(&s);
        if (!ok)
            return false;
    }
    return true;
}

/* What /readyz answers, and ejob_ready shows; with mu held. */
static bool ready_locked(char *why, size_t len)
{
    EJ_ASSERT_HELD(&mu);
    ej_registry *reg = atomic_load(&registry);
    if (reg == NULL) {
        snprintf(why, len, "connecting to ZooKeeper");
        return false;
    }
    if (!ej_registry_is_connected(reg)) {
        snprintf(why, len, "ZooKeeper session %s", state_label(atomic_load(&reg_state)));
        return false;
    }
    return jobs_ready(why, len);
}

static bool readyz(char *why, size_t len, void *user)
{
    (void)user;
    ej__mutex_lock(&mu);
    bool ok = ready_locked(why, len);
    ej__mutex_unlock(&mu);
    return ok;
}

/* On the dispatch thread, every BEAT_MS: proves it runs. Ends when the
 * registry refuses the next post (being destroyed). */
static void beat(ej_registry *reg, void *user)
{
    atomic_store(&last_beat_ms, ej__mono_ms());
    if (ej_registry_post_after(reg, BEAT_MS, beat, user) != 0)
        atomic_store(&beating, false);
}

void ejd_metrics_registry_state(ej_registry *reg, ej_reg_state state, bool new_session, void *user)
{
    (void)user;
    atomic_store(&reg_state, (int)state);
    if (state == EJ_REG_SUSPENDED)
        atomic_fetch_add(&disconnects, 1);
    else if (state == EJ_REG_LOST)
        atomic_fetch_add(&sessions_lost, 1);
    else if (state == EJ_REG_RECONNECTED)
        atomic_fetch_add(new_session ? &reconnects_new : &reconnects_same, 1);
    if (state == EJ_REG_CONNECTED && atomic_load(&registry) == NULL) {
        atomic_store(&last_beat_ms, ej__mono_ms());
        atomic_store(&beating, ej_registry_post_after(reg, BEAT_MS, beat, NULL) == 0);
        atomic_store(&registry, reg);
    }
}

/* ------------------------------------------------------- jobs and bus */

void ejd_metrics_watch_bus(struct ej_event_bus *bus)
{
    ej__mutex_lock(&mu);
    bool add = st.on && bus != NULL && st.bus != bus;
    if (st.on)
        st.bus = bus;
    ej__mutex_unlock(&mu);
    if (add && ej_event_bus_add_sink(bus, event_sink, NULL) != 0)
        EJ_LOG(EJ_LOG_WARN, "metrics", 0, "cannot watch the event bus: item metrics stay at 0");
}

/* Every series of the job's event-fed families, at 0 (one already there,
 * of a job started again by a reload, keeps its count): Prometheus's
 * rate() and increase() see a first event only as a rise from a sample
 * before it, so a series born at 1 would hide it. The families read from
 * the job's status get their series at every scrape. With mu held. */
static void zero_job_series(const char *job)
{
    EJ_ASSERT_HELD(&mu);
    for (size_t i = 0; i < sizeof results / sizeof results[0]; i++)
        ej_metric_get2(st.f[M_ITEM_RUNS], job, results[i]);
    ej_metric_get2(st.f[M_NOT_RUN], job, reason_busy);
    const char *reason;
    for (size_t i = 0; (reason = ej_fire_not_run_reason(i)) != NULL; i++)
        ej_metric_get2(st.f[M_NOT_RUN], job, reason);
    ej_metric_get1(st.f[M_ITEM_DURATION], job);
    ej_metric_get1(st.f[M_FAILOVERS], job);
    ej_metric_get1(st.f[M_MISFIRES], job);
}

void ejd_metrics_job_started(ej_job *job)
{
    ej__mutex_lock(&mu);
    if (st.on)
        zero_job_series(ej_job_name(job));
    if (st.on && st.njobs == st.cap) {
        size_t cap = st.cap ? st.cap * 2 : 8;
        ej_job **n = realloc(st.jobs, cap * sizeof *n);
        if (n != NULL) {
            st.jobs = n;
            st.cap = cap;
        }
    }
    if (st.on && st.njobs < st.cap) {
        st.jobs[st.njobs++] = job;
        st.started_total++;
    }
    ej__mutex_unlock(&mu);
}

void ejd_metrics_job_stopped(ej_job *job)
{
    ej__mutex_lock(&mu);
    for (size_t i = 0; i < st.njobs; i++)
        if (st.jobs[i] == job) {
            st.jobs[i] = st.jobs[--st.njobs];
            break;
        }
    ej__mutex_unlock(&mu);
}

/* ------------------------------------------------------- start, stop */

static int build(char *err, size_t errlen)
{
    int rc = ej_metrics_create(&st.m);
    if (rc == 0)
        rc = ej_metrics_register_table(st.m, table, M_COUNT, st.f, err, errlen);
    if (rc == 0)
        rc = ej_metrics_add_process_metrics(st.m);
    if (rc == 0)
        rc = ej_metrics_add_collector(st.m, collect, NULL);
    if (rc == 0)
        ej_metric_set(ej_metric_get1(st.f[M_BUILD_INFO], EJOB_VERSION), 1);
    if (rc != 0 && err[0] == '\0')
        snprintf(err, errlen, "metrics: %s", ej_strerror(rc));
    return rc;
}

int ejd_metrics_start(const char *listen, size_t expected_jobs, char *err, size_t errlen)
{
    err[0] = '\0';
    ej__mutex_lock(&mu);
    if (st.on) {
        ej__mutex_unlock(&mu);
        snprintf(err, errlen, "metrics already started");
        return EJ_EBUSY;
    }
    st.expected = expected_jobs;
    int rc = build(err, errlen);
    if (rc == 0)
        st.on = true;
    ej__mutex_unlock(&mu);
    if (rc == 0) {
        struct ej_metrics_server_opts o = {
            .listen = listen, .metrics = st.m, .healthz = healthz, .readyz = readyz};
        rc = ej_metrics_server_start(&o, &st.srv, err, errlen);
    }
    if (rc != 0) {
        ejd_metrics_stop();
        return rc;
    }
    EJ_LOG(EJ_LOG_INFO, "metrics", 0, "serving /metrics, /healthz and /readyz on %s (port %d)",
           listen, ej_metrics_server_port(st.srv));
    return 0;
}

int ejd_metrics_render(char **out, size_t *len)
{
    ej__mutex_lock(&mu);
    ej_metrics *m = st.on ? st.m : NULL;
    ej__mutex_unlock(&mu);
    return m != NULL ? ej_metrics_render(m, out, len) : EJ_ECLOSED;
}

void ejd_metrics_stop(void)
{
    /* The server first, outside the lock: a request being served may wait
     * for it. */
    ej_metrics_server_stop(st.srv);
    st.srv = NULL;
    ej__mutex_lock(&mu);
    ej_metrics *m = st.m;
    free(st.jobs);
    memset(&st, 0, sizeof st);
    atomic_store(&registry, NULL);
    ej__mutex_unlock(&mu);
    ej_metrics_destroy(m);
}
