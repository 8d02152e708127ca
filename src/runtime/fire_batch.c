/*
 * A batch of a fire's items run once (ElasticJob's execute of a sharding
 * context): the coordinator registers their start (running nodes and
 * fencing tokens), each item that may start runs on a pool thread, with
 * its retries, posting its execution events and ledger rows; its running
 * node goes as soon as it is done (deleted together with others that end
 * within COALESCE_MS); then the batch is counted and reported.
 */
#include <inttypes.h>
#include <pthread.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "common/check.h"
#include "common/util.h"
#include "coord/internal.h"
#include "ejob/event.h"
#include "ejob/job.h"
#include "exec/internal.h"
#include "runtime/fire_impl.h"
#include "runtime/internal.h"
#include "schedule/internal.h"

#define MOD "job"

/* ------------------------------------------------------------------------ */
/* Item runs                                                                  */

/* Running nodes of items that finished, deleted together when several
 * finish within COALESCE_MS of each other (one transaction instead of one
 * request each), and at most COALESCE_MS after their item ended. */
#define COALESCE_MS 100

struct batch_sync {
    pthread_mutex_t mu;
    pthread_cond_t cv;
    size_t remaining; /* items still running */
    int *done;        /* finished, node not deleted yet */
    size_t ndone;
};

struct item_run {
    struct ej_job *job;
    const struct ej_job_def *def;
    int64_t session; /* that created the running node; 0: none */
    struct batch_sync *bs;
    ej_shard_context ctx;
    ej__exec_result res;
    struct ej__exec_opts xo;
    char event_id[EJ_EVENT_ID_LEN];
    int64_t start_ms;
    int64_t fire_session; /* the session the fire began in */
    int64_t fire_ms;      /* the cron fire time (ledger); 0: off the schedule */
    const char *fire_kind;
    struct ej__catchup catchup;        /* count 0: the run catches up no lost fire time */
    bool not_started;                  /* fenced before it could start */
    int64_t timeout_ms;                /* the job's timeoutSeconds, in ms; 0: none */
    atomic_bool kill;                  /* this item alone must stop (ejob kill) */
    char killed_by[EJ__KILLED_BY_LEN]; /* who asked (under the job's kill_mu) */
    struct ej__running tracked;
    const struct ej_retry_config *retry; /* the settings' (held by the fire) */
    int attempt;                         /* 1, then 2.. for retries */
    int64_t ledger_ms;                   /* the fire time of its ledger row */
};

static bool keep_going(void *arg)
{
    struct ej_job *job = arg;
    if (atomic_load(&job->cancel))
        return false;
    pthread_mutex_lock(&job->mu);
    bool ok = job->state == EJ__JOB_STARTED && !job->stopped;
    pthread_mutex_unlock(&job->mu);
    if (!ok || !ej__coord_connected(job->coord))
        return false;
    /* ElasticJob's isEligibleForJobRunning: stop streaming to reshard. */
    return !ej__coord_necessary(job->coord);
}

static void post_exec(struct item_run *r, bool end)
{
    ej_event_bus *bus = ej__rt_bus_of(r->job);
    if (bus == NULL)
        return;
    ej_execution_event ev = {
        .job_name = r->ctx.job_name,
        .task_id = r->ctx.task_id,
        .hostname = r->job->hostname,
        .ip = r->job->ip,
        .sharding_item = r->ctx.sharding_item,
        .execution_source = r->ctx.execution_source,
        .start_time_ms = r->start_ms,
    };
    memcpy(ev.id, r->event_id, sizeof ev.id);
    char by[EJ__KILLED_BY_LEN]; /* ev.killed_by: alive until the post below */
    if (end) {
        ev.complete_time_ms = ej__now_ms();
        if (ev.complete_time_ms == 0)
            ev.complete_time_ms = 1;
        ev.is_success = r->res.rc == 0;
        ev.failure_cause = r->res.rc == 0 ? NULL : r->res.failure_cause;
        ev.output = r->res.output;
        ev.output_len = r->res.output_len;
        ev.output_truncated = r->res.output_truncated;
        ev.error_output = r->res.err_output;
        ev.error_output_len = r->res.err_output_len;
        ev.error_output_truncated = r->res.err_output_truncated;
        ev.has_exit_code = r->def->type == EJ_JOB_TYPE_SCRIPT;
        ev.exit_code = r->res.exit_code;
        ev.term_signal = r->res.term_signal;
        ev.http_status = r->res.http_status;
        ev.result = r->res.killed      ? EJ_RUN_KILLED
                    : r->res.timed_out ? EJ_RUN_TIMEOUT
                    : r->res.rc == 0   ? EJ_RUN_SUCCESS
                                       : EJ_RUN_FAILED;
        pthread_mutex_lock(&r->job->kill_mu);
        memcpy(by, r->killed_by, sizeof by);
        pthread_mutex_unlock(&r->job->kill_mu);
        ev.killed_by = r->res.killed && by[0] ? by : NULL;
        ev.attempt = r->attempt;
    }
    ev.fencing_token = r->ctx.fencing_token;
    ej_event_bus_post_execution(bus, &ev);
}

/* A running script's output as it comes (docs/tracing.md "Live output"). */
static void post_output(void *arg, int stream, int64_t offset, const char *data, size_t len)
{
    struct item_run *r = arg;
    ej_event_bus *bus = ej__rt_bus_of(r->job);
    if (bus == NULL)
        return;
    ej_output_event ev = {
        .job_name = r->ctx.job_name,
        .sharding_item = r->ctx.sharding_item,
        .stream = stream,
        .offset = offset,
        .data = data,
        .len = len,
        .time_ms = ej__now_ms(),
    };
    memcpy(ev.execution_id, r->event_id, sizeof ev.execution_id);
    ej_event_bus_post_output(bus, &ev);
}

static bool in_done(const struct batch_sync *b, int item)
{
    for (size_t i = 0; i < b->ndone; i++)
        if (b->done[i] == item)
            return true;
    return false;
}

static void finish_running(struct item_run *r)
{
    struct batch_sync *b = r->bs;
    int item = r->ctx.sharding_item;
    pthread_mutex_lock(&b->mu);
    b->done[b->ndone++] = item;
    b->remaining--;
    if (b->remaining > 0) {
        /* Wait a moment for the others: the last one deletes for all. */
        int64_t deadline = ej__mono_ms() + COALESCE_MS;
        while (b->remaining > 0 && in_done(b, item)) {
            int64_t left = deadline - ej__mono_ms();
            if (left <= 0)
                break;
            struct timespec ts;
            clock_gettime(CLOCK_MONOTONIC, &ts);
            ts.tv_nsec += left * 1000000L;
            ts.tv_sec += ts.tv_nsec / 1000000000L;
            ts.tv_nsec %= 1000000000L;
            pthread_cond_timedwait(&b->cv, &b->mu, &ts);
        }
    }
    if (!in_done(b, item)) {
        pthread_mutex_unlock(&b->mu);
        return; /* deleted by another item's thread */
    }
    size_t n = b->ndone;
    int *items = malloc(n * sizeof *items);
    if (items)
        memcpy(items, b->done, n * sizeof *items);
    b->ndone = 0;
    pthread_cond_broadcast(&b->cv);
    pthread_mutex_unlock(&b->mu);
    if (items == NULL) {
        ej__running_complete_one(r->job->coord, item, r->session);
        return;
    }
    if (n == 1)
        ej__running_complete_one(r->job->coord, items[0], r->session);
    else
        ej__running_complete(r->job->coord, items, n, r->session);
    free(items);
}

/* The item's ledger rows (its fire time, and the lost fire times a
 * catch-up run covers) point at its latest attempt: the ledger shows the
 * final outcome. */
static void ledger_ran(struct item_run *r)
{
    ej__rt_ledger_ran(r->job, r->ledger_ms, r->fire_kind, r->ctx.sharding_item, r->event_id);
    if (r->catchup.count > 0)
        ej__rt_ledger_caught_up(r->job, r->ctx.sharding_item, r->catchup.first_ms,
                                r->catchup.last_ms, r->catchup.count, r->event_id);
}

/*
 * The item's first attempt and its retries (retry.c), each its own history
 * row with its attempt number; the running node is held throughout. True
 * when the last attempt's end event is posted already (a retry that was
 * then not run).
 */
static bool run_attempts(struct item_run *r)
{
    uint64_t seed = (uint64_t)ej__mono_ms() * 2654435761u + (uint64_t)r->ctx.sharding_item;
    for (r->attempt = 1;; r->attempt++) {
        if (r->attempt > 1) {
            ej_event_new_id(r->event_id);
            r->start_ms = ej__now_ms();
            post_exec(r, false);
            ledger_ran(r);
        }
        ej__exec_context_limit(&r->ctx, &r->kill, r->timeout_ms);
        ej__exec_run_item(r->def, &r->ctx, &r->xo, &r->res);
        bool failed = r->res.rc != 0 && !r->res.killed && !r->res.cancelled && !r->res.abort_run;
        int64_t delay = failed ? ej__retry_delay_ms(r->retry, r->attempt, &seed) : -1;
        if (delay < 0)
            return false;
        post_exec(r, true);
        if (!ej__retry_wait(r->job, &r->kill, r->fire_session, r->ctx.sharding_item, delay,
                            r->attempt + 1, r->ctx.task_id))
            return true;
        ej__exec_result_fini(&r->res);
        ej__exec_context_fini(&r->ctx); /* the attempt's error message */
    }
}

static void item_task(void *arg)
{
    struct item_run *r = arg;
    /* Items wait for a pool thread: the fence is asked again right here,
     * after the takeover margin of an expiry just seen. */
    ej__coord_takeover_wait(r->job->coord);
    if (!ej__coord_may_start(r->job->coord, r->fire_session)) {
        r->not_started = true;
        r->res.rc = EJ_ESTOPPED;
        EJ_LOG(EJ_LOG_WARN, MOD, 0,
               "job %s: item %d not started: fenced (no recent contact with "
               "ZooKeeper, or the session changed)",
               r->job->name, r->ctx.sharding_item);
        if (r->session)
            finish_running(r);
        return;
    }
    ej_event_new_id(r->event_id);
    r->start_ms = ej__now_ms();
    post_exec(r, false);
    r->ledger_ms = r->fire_ms ? r->fire_ms : r->start_ms;
    ledger_ran(r);
    r->tracked = (struct ej__running){
        .item = r->ctx.sharding_item, .kill = &r->kill, .killed_by = r->killed_by};
    ej__kill_track(r->job, &r->tracked);
    bool ended = run_attempts(r);
    ej__kill_untrack(r->job, &r->tracked);
    /* The running node goes as soon as this item is done (ElasticJob keeps
     * it until the whole batch is: a crash would then fail over items that
     * had finished, and they would run twice). */
    if (r->session)
        finish_running(r);
    if (!ended)
        post_exec(r, true);
}

/*
 * A script's process group must be gone before the server can expire the
 * session: the fence cancels at 6/10 of the session timeout T, the script
 * gets SIGTERM within the exec module's 100 ms tick, and SIGKILL after the
 * grace, here at most T/5: all gone by about 0.8 T + 100 ms.
 */
static void bound_kill_grace(struct ej_job *job, struct ej_job_def *def)
{
    if (def->type != EJ_JOB_TYPE_SCRIPT)
        return;
    int t = ej_registry_negotiated_timeout_ms(job->reg);
    int64_t cap = t > 0 ? t / 5 : 2000;
    if (cap < 1)
        cap = 1;
    int64_t grace = def->script.kill_grace_ms > 0 ? def->script.kill_grace_ms : 2000;
    def->script.kill_grace_ms = grace < cap ? grace : cap;
}

/* The fire record of a run (docs/coordination.md "Takeover"): the latest
 * cron fire time it covers. A failover run re-runs its dead owner's fire
 * (recorded by that owner): none. */
static int64_t fire_record_ms(struct ej_job *job, ej_execution_source source)
{
    if (source == EJ_EXEC_FAILOVER)
        return 0;
    int64_t at = job->fire_covers_ms;
    if (source == EJ_EXEC_MISFIRE) {
        pthread_mutex_lock(&job->mu);
        if (job->misfire_handled_until > at)
            at = job->misfire_handled_until;
        pthread_mutex_unlock(&job->mu);
    }
    return at;
}

/* One ej__rt_run_batch: the items to start, their runs, and what they share. */
struct batch {
    struct ej_job *job;
    const struct ej__rt_settings *s;
    const int *items;
    size_t n;
    const int64_t *failover_tokens; /* a failover run: the plan's tokens; else NULL */
    ej_execution_source source;
    struct fire_ref *fr;
    char *task_id;
    bool *ok;        /* items[i] may start (its running node is ours) */
    int64_t *tokens; /* items[i]'s fencing token */
    struct item_run *runs;
    void **args;
    int *ran; /* the items started, k of them */
    size_t k;
    int64_t fire_session;
    int64_t session; /* of the running nodes; 0: none */
    struct batch_sync bs;
    struct ej_job_def def; /* the job's, with its timeouts bounded */
};

static int batch_alloc(struct batch *b)
{
    size_t n = b->n;
    b->task_id = ej__exec_task_id(b->s->cfg.job_name, b->items, n, b->job->me);
    b->ok = calloc(n, sizeof *b->ok);
    b->tokens = calloc(n, sizeof *b->tokens);
    b->runs = calloc(n, sizeof *b->runs);
    b->args = calloc(n, sizeof *b->args);
    b->ran = calloc(n, sizeof *b->ran);
    b->bs.done = calloc(n, sizeof(int));
    pthread_mutex_init(&b->bs.mu, NULL);
    pthread_condattr_t ca;
    pthread_condattr_init(&ca);
    pthread_condattr_setclock(&ca, CLOCK_MONOTONIC);
    pthread_cond_init(&b->bs.cv, &ca);
    pthread_condattr_destroy(&ca);
    if (!b->task_id || !b->ok || !b->tokens || !b->runs || !b->args || !b->ran || !b->bs.done) {
        EJ_LOG(EJ_LOG_ERROR, MOD, EJ_ENOMEM, "job %s: out of memory starting items", b->job->name);
        return EJ_ENOMEM;
    }
    return 0;
}

static void batch_free(struct batch *b)
{
    for (size_t i = 0; i < b->k; i++) {
        ej__exec_context_fini(&b->runs[i].ctx);
        ej__exec_result_fini(&b->runs[i].res);
    }
    free(b->task_id);
    free(b->ok);
    free(b->tokens);
    free(b->runs);
    free(b->args);
    free(b->ran);
    free(b->bs.done);
    pthread_mutex_destroy(&b->bs.mu);
    pthread_cond_destroy(&b->bs.cv);
}

/* A batch that starts nothing: counted for its fire, else logged. */
static void batch_not_run(struct batch *b, enum ej__not_run_reason r, ej_log_level level,
                          const char *why)
{
    if (b->fr)
        ej__rt_not_run(b->job, b->fr, r, "%s", why);
    else
        EJ_LOG(level, MOD, 0, "job %s: %s", b->job->name, why);
}

/* The coordinator registers the start (running nodes and tokens). False:
 * nothing may start (reported). */
static bool batch_begin(struct batch *b)
{
    const struct ej__rt_settings *s = b->s;
    struct ej__fire_begin req = {
        .items = b->items,
        .n = b->n,
        .fire_session = b->fire_session,
        .fired_ms = s->cfg.monitor_execution ? fire_record_ms(b->job, b->source) : 0,
        .monitor_execution = s->cfg.monitor_execution,
        .failover_tokens = b->failover_tokens,
    };
    int err = 0;
    switch (ej__coord_fire_begin(b->job->coord, &req, b->ok, b->tokens, &b->session, &err)) {
    case EJ__BEGIN_STARTED:
        return true;
    case EJ__BEGIN_FENCED:
        /* Cut off, fenced, or the fire began in a session that is gone. */
        batch_not_run(b, EJ__NOT_RUN_FENCED, EJ_LOG_INFO,
                      "not registered in ZooKeeper in this fire's session, or fenced: items not "
                      "started");
        return false;
    case EJ__BEGIN_FAILED:
        ej__rt_post_status(b->job, b->task_id, b->items, b->n, EJ_TASK_ERROR,
                           "Job '%s' not started: %s", s->cfg.job_name, ej_strerror(err));
        if (b->fr)
            ej__rt_not_run(b->job, b->fr, EJ__NOT_RUN_START_FAILED,
                           "the start of its items could not be registered in ZooKeeper: %s",
                           ej_strerror(err));
        return false;
    case EJ__BEGIN_SESSION_CHANGED:
        batch_not_run(b, EJ__NOT_RUN_FENCED, EJ_LOG_WARN,
                      "the session changed during this fire: abandoned");
        return false;
    }
    return false;
}

/* The job's definition for these runs: its timeouts, the kill grace
 * bounded by the session (bound_kill_grace). */
static void batch_bound_def(struct batch *b)
{
    const struct ej__rt_settings *s = b->s;
    b->def = *def_of(s);
    int64_t timeout_ms = ej_job_config_timeout_ms(&s->cfg);
    if (b->def.type == EJ_JOB_TYPE_SCRIPT && timeout_ms > 0)
        b->def.script.timeout_ms = timeout_ms;
    if (b->def.type == EJ_JOB_TYPE_SCRIPT && s->cfg.timeout_grace_seconds > 0)
        b->def.script.kill_grace_ms = ej_job_config_grace_ms(&s->cfg);
    bound_kill_grace(b->job, &b->def);
}

/* The run of items[i] that may start, as run b->k. */
static void batch_add_run(struct batch *b, size_t i)
{
    const struct ej__rt_settings *s = b->s;
    struct ej_job *job = b->job;
    struct item_run *r = &b->runs[b->k];
    r->job = job;
    r->def = &b->def;
    r->fire_session = b->fire_session;
    r->fire_ms = b->fr && !b->fr->off_schedule ? b->fr->at : 0;
    r->fire_kind = ej__rt_ledger_kind(b->source, r->fire_ms != 0);
    r->timeout_ms = ej_job_config_timeout_ms(&s->cfg);
    r->retry = &s->cfg.retry;
    r->attempt = 1;
    atomic_init(&r->kill, false);
    if (b->source != EJ_EXEC_MISFIRE || !ej__takeover_take_catchup(job, b->items[i], &r->catchup))
        r->catchup.count = 0;
    ej__exec_context_init(&r->ctx, &job->cancel);
    r->ctx.job_name = s->cfg.job_name;
    r->ctx.task_id = b->task_id;
    r->ctx.sharding_total_count = s->cfg.sharding_total_count;
    r->ctx.job_parameter = s->cfg.job_parameter;
    r->ctx.sharding_item = b->items[i];
    r->ctx.sharding_parameter = param_of(s, b->items[i]);
    r->ctx.fencing_token = b->tokens[i];
    r->ctx.execution_source = b->source;
    r->xo.keep_going = keep_going;
    r->xo.keep_going_arg = job;
    r->xo.output = post_output;
    r->xo.output_arg = r;
    r->session = s->cfg.monitor_execution ? b->session : 0;
    r->bs = &b->bs;
    b->args[b->k] = r;
    b->ran[b->k] = b->items[i];
    b->k++;
}

/* After the runs: counters, the fire's not-run reason when every item was
 * fenced before it could start, and the batch's status event. Returns
 * whether the error handler asked to fail the whole run. */
static bool batch_report(struct batch *b, size_t *started)
{
    struct ej_job *job = b->job;
    ej_buf errs;
    ej__buf_init(&errs);
    size_t failed = 0, not_started = 0;
    bool abort_run = false;
    for (size_t i = 0; i < b->k; i++) {
        const struct item_run *r = &b->runs[i];
        not_started += r->not_started;
        if (r->res.rc != 0) {
            ej__buf_printf(&errs, "%s%d=%s", failed ? ", " : "", r->ctx.sharding_item,
                           r->not_started         ? "not started: fenced"
                           : r->res.failure_cause ? r->res.failure_cause
                                                  : "failed");
            failed++;
        }
        abort_run |= r->res.abort_run;
    }
    if (started)
        *started = b->k - not_started;
    /* Every item fenced while it waited for a pool thread: the fire ran
     * nothing (the error event below names the items). */
    if (b->fr && not_started == b->k)
        ej__rt_not_run(job, b->fr, EJ__NOT_RUN_FENCED,
                       "fenced before any of its %zu item(s) could start", b->k);
    pthread_mutex_lock(&job->mu);
    job->items_run += b->k - not_started;
    job->items_failed += failed;
    pthread_mutex_unlock(&job->mu);
    if (failed)
        ej__rt_post_status(job, b->task_id, b->ran, b->k, EJ_TASK_ERROR, "{%s}",
                           errs.data ? errs.data : "");
    else
        ej__rt_post_status(job, b->task_id, b->ran, b->k, EJ_TASK_FINISHED, "%s", "");
    ej__buf_fini(&errs);
    return abort_run;
}

/*
 * Run items once with source: the coordinator registers their start
 * (batch_begin), each that may start runs on a pool thread, then the batch
 * is reported. failover_tokens: the plan's tokens of a failover run, else
 * NULL. fr: the fire, when these are its items (not a misfire re-run or
 * failover): counted as not run when none can start. Returns true when the
 * error handler asked to fail the whole run.
 */
bool ej__rt_run_batch(struct ej_job *job, const struct ej__rt_settings *s, const int *items,
                      size_t n, const int64_t *failover_tokens, ej_execution_source source,
                      struct fire_ref *fr, size_t *started)
{
    if (started)
        *started = 0;
    if (n == 0)
        return false;
    struct batch b = {.job = job,
                      .s = s,
                      .items = items,
                      .n = n,
                      .failover_tokens = failover_tokens,
                      .source = source,
                      .fr = fr,
                      .fire_session = atomic_load(&job->fire_session)};
    bool abort_run = false;
    if (batch_alloc(&b) != 0 || !batch_begin(&b))
        goto out;
    batch_bound_def(&b);
    for (size_t i = 0; i < n; i++)
        if (b.ok[i])
            batch_add_run(&b, i);
    if (b.k == 0)
        goto out;
    ej__rt_post_status(job, b.task_id, b.ran, b.k, EJ_TASK_RUNNING, "%s", "");
    b.bs.remaining = b.k;
    ej__sched_run_all(job->sj, item_task, b.args, b.k);
    abort_run = batch_report(&b, started);
out:
    batch_free(&b);
    return abort_run;
}
