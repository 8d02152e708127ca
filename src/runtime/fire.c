/*
 * Each fire (SPEC 4 "Each fire", ElasticJob 2.1.5's
 * AbstractElasticJobExecutor.execute): clock-skew check, disabled server,
 * the sharding context (failover items first, else shard if necessary and
 * take own items), running nodes created conditionally, items run in
 * parallel on the shared pool, then the misfire loop and a failover take.
 * Also the coordinator's hooks and the events of a fire.
 */
#include <inttypes.h>
#include <pthread.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "common/check.h"
#include "common/util.h"
#include "coord/internal.h"
#include "ejob/cron.h"
#include "ejob/event.h"
#include "ejob/job.h"
#include "exec/internal.h"
#include "runtime/internal.h"
#include "schedule/internal.h"

#define MOD "job"

/* ------------------------------------------------------------------------ */
/* Definitions                                                               */

int ej__rt_def_type(const struct ej_job_def *def)
{
    return def ? (int)def->type : -1;
}

int ej__rt_def_validate(const struct ej_job_def *def, char *err, size_t errlen)
{
    return ej_job_def_validate(def, err, errlen);
}

int ej__rt_concurrency(const struct ej__rt_settings *s, const struct ej_job_def *user_def)
{
    /* A program's definition chooses only a FIXED executor; anything else
     * is the configuration's executorServiceHandler, as ej__rt_build_def. */
    if (user_def != NULL && user_def->executor == EJ_EXECUTOR_FIXED)
        return ej_executor_concurrency(EJ_EXECUTOR_FIXED, user_def->executor_threads);
    ej_executor_kind k = EJ_EXECUTOR_CPU;
    if (s && ej_executor_kind_parse(s->cfg.executor_service_handler, &k) != 0)
        k = EJ_EXECUTOR_CPU;
    return ej_executor_concurrency(k, 0);
}

int ej__rt_build_def(struct ej__rt_settings *s, const struct ej_job_def *user)
{
    /* What the program gave (callbacks, listeners, a custom handler, a
     * fixed executor, env, headers, caps), checked by its one rule; all
     * else is the configuration's, read by the runners through config_. */
    char err[256];
    if (user != NULL && ej_job_def_validate(user, err, sizeof err) != 0) {
        EJ_LOG(EJ_LOG_ERROR, MOD, EJ_ECONFIG, "job %s: invalid definition: %s", s->cfg.job_name,
               err);
        return EJ_ECONFIG;
    }
    struct ej_job_def *d = calloc(1, sizeof *d);
    if (d == NULL)
        return EJ_ENOMEM;
    if (user != NULL)
        *d = *user;
    d->type = (ej_job_type)s->cfg.job_type;
    d->config_ = &s->cfg;
    if (d->error_handler.kind != EJ_ERROR_HANDLER_CUSTOM &&
        ej_error_handler_parse(s->cfg.job_exception_handler, &d->error_handler.kind) != 0) {
        EJ_LOG(EJ_LOG_WARN, MOD, EJ_ECONFIG,
               "job %s: job_exception_handler \"%s\" is not known; logging errors instead",
               s->cfg.job_name, s->cfg.job_exception_handler);
        d->error_handler.kind = EJ_ERROR_HANDLER_LOG;
    }
    if (d->executor != EJ_EXECUTOR_FIXED &&
        ej_executor_kind_parse(s->cfg.executor_service_handler, &d->executor) != 0) {
        EJ_LOG(EJ_LOG_WARN, MOD, EJ_ECONFIG,
               "job %s: executor_service_handler \"%s\" is not known; using CPU",
               s->cfg.job_name, s->cfg.executor_service_handler);
        d->executor = EJ_EXECUTOR_CPU;
    }
    d->script.timeout_ms = ej_job_config_timeout_ms(&s->cfg);
    d->script.kill_grace_ms = ej_job_config_grace_ms(&s->cfg);
    free(s->def);
    s->def = d;
    return 0;
}

static const struct ej_job_def *def_of(const struct ej__rt_settings *s)
{
    return s->def;
}

static const char *param_of(const struct ej__rt_settings *s, int item)
{
    return ej_sharding_params_get(&s->params, item);
}

/* ------------------------------------------------------------------------ */
/* Events                                                                    */

int ej__rt_subscribe(struct ej_job *job, void (*fn)(const struct ej_event *ev, void *user),
                     void *user)
{
    pthread_mutex_lock(&job->mu);
    if (job->bus == NULL) {
        struct ej_event_bus_opts o = {.name = "ej-events"};
        int rc = ej_event_bus_create(&o, &job->bus);
        if (rc != 0) {
            pthread_mutex_unlock(&job->mu);
            return rc;
        }
        job->own_bus = true;
    }
    ej_event_bus *bus = job->bus;
    pthread_mutex_unlock(&job->mu);
    return ej_event_bus_add_sink(bus, fn, user);
}

void ej__rt_bus_destroy(struct ej_job *job)
{
    if (job->own_bus) {
        ej_event_bus_destroy(job->bus);
        job->bus = NULL;
        job->own_bus = false;
    }
}

static ej_event_bus *bus_of(struct ej_job *job)
{
    pthread_mutex_lock(&job->mu);
    ej_event_bus *b = job->bus;
    pthread_mutex_unlock(&job->mu);
    return b;
}

void ej__rt_post_status(struct ej_job *job, const char *task_id, const int *items, size_t n,
                        int state, const char *fmt, ...)
{
    ej_event_bus *bus = bus_of(job);
    if (bus == NULL)
        return;
    char msg[1024] = "";
    if (fmt) {
        va_list ap;
        va_start(ap, fmt);
        vsnprintf(msg, sizeof msg, fmt, ap);
        va_end(ap);
    }
    char *its = ej_event_items_string(items, n);
    ej_status_event ev = {
        .job_name = job->name,
        .original_task_id = "",
        .task_id = task_id ? task_id : "",
        .slave_id = job->ip,
        .source = "LITE_EXECUTOR",
        .execution_type = "READY",
        .sharding_item = its ? its : "[]",
        .state = (ej_task_state)state,
        .message = msg,
        .creation_time_ms = ej__now_ms(),
    };
    ej_event_new_id(ev.id);
    ej_event_bus_post_status(bus, &ev);
    free(its);
}

/* ------------------------------------------------------------------------ */
/* Fires not run                                                              */

/*
 * A fire that does not run is never lost silently: every one is added to
 * fires_missed and posted as a TASK_ERROR status event "Job 'j' fire not run
 * (REASON): N fire time(s) from A to B" (the daemon's /metrics counts these
 * by reason). The scheduler reports the cron fire times it could not
 * deliver on time through its miss hook (on_miss); the fire flow reports the
 * fires it was given and did not run (not_run).
 */

/* At most one warning line per job and reason this often. */
#define NOT_RUN_LOG_EVERY_MS 5000

static const struct {
    const char *name;
    ej_log_level level; /* of the rate-limited line */
} not_run_kinds[EJ__NOT_RUN_REASONS] = {
    [EJ__NOT_RUN_FENCED] = {"fenced", EJ_LOG_WARN},
    [EJ__NOT_RUN_BEFORE_REGISTRATION] = {"before-registration", EJ_LOG_WARN},
    [EJ__NOT_RUN_LEADER_WAIT] = {"leader-wait", EJ_LOG_WARN},
    [EJ__NOT_RUN_SHARDING_FAILED] = {"sharding-failed", EJ_LOG_WARN},
    [EJ__NOT_RUN_TIME_DIFF] = {"time-diff", EJ_LOG_WARN},
    [EJ__NOT_RUN_START_FAILED] = {"start-failed", EJ_LOG_WARN},
    [EJ__NOT_RUN_DEADLINE] = {"deadline", EJ_LOG_WARN},
    [EJ__NOT_RUN_MISSED] = {"missed", EJ_LOG_WARN},
    /* overlapPolicy SKIP: the job's own choice. */
    [EJ__NOT_RUN_OVERLAP] = {"overlap", EJ_LOG_INFO},
    /* An operator's decisions, expected: each fire at debug level. */
    [EJ__NOT_RUN_DISABLED] = {"disabled", EJ_LOG_DEBUG},
    [EJ__NOT_RUN_STOPPED] = {"stopped", EJ_LOG_DEBUG},
    /* ElasticJob ignores a console trigger while the job runs. */
    [EJ__NOT_RUN_RUNNING] = {"running", EJ_LOG_INFO},
};

const char *ej__not_run_reason_name(enum ej__not_run_reason r)
{
    return (unsigned)r < EJ__NOT_RUN_REASONS ? not_run_kinds[r].name : "unknown";
}

/* The one place fires not run are counted and posted: on_miss, not_run
 * and ej__rt_count_not_run. */
static void count_not_run(struct ej_job *job, const char *reason, const int *items, size_t n,
                          uint32_t count, int64_t first_ms, int64_t last_ms, const char *kind)
{
    ej__rt_ledger_not_run(job, reason, kind, items, n, first_ms, last_ms, count);
    pthread_mutex_lock(&job->mu);
    job->fires_missed += count;
    pthread_mutex_unlock(&job->mu);
    ej__rt_post_status(job, "", items, n, EJ_TASK_ERROR,
                       "Job '%s' fire not run (%s): %u fire time(s) from %lld to %lld", job->name,
                       reason, (unsigned)count, (long long)first_ms, (long long)last_ms);
}

void ej__rt_not_run_overlap(struct ej_job *job, int64_t due)
{
    EJ_LOG(EJ_LOG_INFO, MOD, 0,
           "job %s: fire of %lld not run (overlap): the job's items still run (overlapPolicy "
           "SKIP)",
           job->name, (long long)due);
    count_not_run(job, "overlap", NULL, 0, 1, due, due, "CRON");
}

void ej__rt_count_not_run(struct ej_job *job, enum ej__not_run_reason r, const int *items, size_t n,
                          uint32_t count, int64_t first_ms, int64_t last_ms)
{
    count_not_run(job, ej__not_run_reason_name(r), items, n, count, first_ms, last_ms, "CRON");
}

/* A fire the scheduler delivered, as far as counting it goes. */
struct fire_ref {
    int64_t at;        /* its cron fire time, or when the fire-now request was made */
    int64_t last;      /* with count > 1: the last fire time it covers */
    uint32_t count;    /* fire times it covers, when more than at alone */
    bool off_schedule; /* a fire-now request only (no cron fire time) */
    bool catch_up;     /* a missed fire time run late (CATCH_UP): arms no misfire marker */
    enum {
        FIRE_PENDING,  /* not counted yet */
        FIRE_REPORTED, /* counted: by not_run, or by the miss hook for a misfired
                        * cron fire (its fire times, under the scheduler's reason) */
        FIRE_FAILOVER, /* only failover items taken over: not a fire of the job's
                        * own (the items stay this instance's for its next fire) */
    } state;
};

static struct fire_ref fire_ref_of(const struct ej__fire *f)
{
    struct fire_ref fr = {
        .at = f->scheduled_ms, .off_schedule = !f->cron_due, .state = FIRE_PENDING};
    if ((f->now_reasons & EJ__FIRE_TRIGGER) == 0) {
        if (f->cron_due && f->misfired)
            fr.state = FIRE_REPORTED;
        else if (!f->cron_due)
            fr.state = FIRE_FAILOVER;
    }
    return fr;
}

/* fr does not run, for reason r (why: printf-style, for the log only).
 * Counts and posts it unless that was done, then logs a line at most every
 * NOT_RUN_LOG_EVERY_MS per job and reason, saying how many went without
 * one (a warning; debug or info for the reasons an operator chose). */
static void not_run(struct ej_job *job, struct fire_ref *fr, enum ej__not_run_reason r,
                    const char *why, ...) EJ_PRINTF(4, 5);
static void not_run(struct ej_job *job, struct fire_ref *fr, enum ej__not_run_reason r,
                    const char *why, ...)
{
    EJ_ASSERT((unsigned)r < EJ__NOT_RUN_REASONS);
    ej_log_level level = not_run_kinds[r].level;
    const char *note = "";
    if (fr->state == FIRE_PENDING) {
        fr->state = FIRE_REPORTED;
        count_not_run(job, not_run_kinds[r].name, NULL, 0, fr->count > 1 ? fr->count : 1, fr->at,
                      fr->count > 1 ? fr->last : fr->at, fr->off_schedule ? "TRIGGER" : "CRON");
    } else {
        level = EJ_LOG_DEBUG;
        note = fr->state == FIRE_FAILOVER ? " [a failover fire: the items wait for the next fire]"
                                          : " [its fire time(s) were reported already]";
    }
    uint64_t quiet = 0;
    if (level >= EJ_LOG_WARN) {
        int64_t now = ej__mono_ms();
        pthread_mutex_lock(&job->mu);
        bool say = job->not_run_log[r].last_ms == 0 ||
                   now - job->not_run_log[r].last_ms >= NOT_RUN_LOG_EVERY_MS;
        if (say) {
            quiet = job->not_run_log[r].suppressed;
            job->not_run_log[r].suppressed = 0;
            job->not_run_log[r].last_ms = now;
        } else {
            job->not_run_log[r].suppressed++;
        }
        pthread_mutex_unlock(&job->mu);
        if (!say)
            return;
    }
    if (level < ej_log_get_level())
        return;
    char msg[512];
    va_list ap;
    va_start(ap, why);
    vsnprintf(msg, sizeof msg, why, ap);
    va_end(ap);
    char more[96] = "";
    if (quiet > 0)
        snprintf(more, sizeof more, " (and %" PRIu64 " more not run so since the last such line)",
                 quiet);
    EJ_LOG(level, MOD, 0, "job %s: fire of %" PRId64 " not run (%s): %s%s%s", job->name, fr->at,
           not_run_kinds[r].name, msg, note, more);
}

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
    ej_event_bus *bus = bus_of(r->job);
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
    ej_event_bus *bus = bus_of(r->job);
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

/* One run_batch: the items to start, their runs, and what they share. */
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
        not_run(b->job, b->fr, r, "%s", why);
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
            not_run(b->job, b->fr, EJ__NOT_RUN_START_FAILED,
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
        not_run(job, b->fr, EJ__NOT_RUN_FENCED, "fenced before any of its %zu item(s) could start",
                b->k);
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
static bool run_batch(struct ej_job *job, const struct ej__rt_settings *s, const int *items,
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

/* ------------------------------------------------------------------------ */
/* The fire                                                                   */

static void fill_info(ej_shard_contexts_info *info, const struct ej__rt_settings *s,
                      const char *task_id, const int *items, size_t n, const char **params,
                      ej_execution_source source)
{
    for (size_t i = 0; i < n; i++)
        params[i] = param_of(s, items[i]);
    *info = (ej_shard_contexts_info){
        .job_name = s->cfg.job_name,
        .task_id = task_id,
        .sharding_total_count = s->cfg.sharding_total_count,
        .job_parameter = s->cfg.job_parameter,
        .items = items,
        .item_count = n,
        .item_parameters = n ? params : NULL,
        .execution_source = source,
    };
}

/* The misfired items still this instance's (one that moved is its new
 * owner's to re-run: the misfire node stays with the item). 0: none. */
static size_t own_misfired(struct ej__coord *c, int **mis)
{
    struct ej__fire_request req = {.want = EJ__PLAN_WANT_MISFIRED};
    struct ej__fire_plan plan;
    *mis = NULL;
    if (ej__coord_fire_plan(c, &req, &plan) != 0)
        return 0;
    size_t n = plan.nmisfired;
    if (n > 0) { /* callers free *mis only when there is something in it */
        *mis = plan.misfired;
        plan.misfired = NULL;
    }
    ej__fire_plan_fini(&plan);
    return n;
}

/* ElasticJob's `while (isExecuteMisfired) { clearMisfire; execute(MISFIRE) }`
 * over every local item marked misfire (misfire.c marks them all), until
 * none is left and no marker marked more meanwhile. */
static void misfire_loop_run(struct ej_job *job, const struct ej__rt_settings *s, bool abort_run)
{
    struct ej__coord *c = job->coord;
    bool stop = !ej_job_config_misfire(&s->cfg) || abort_run;
    int reshards = 0;
    for (int round = 0; !stop && round < 1000; round++) {
        uint64_t seen = ej__misfire_marks(job);
        int *mis = NULL;
        size_t k = own_misfired(c, &mis);
        if (k == 0 && ej__coord_necessary(c) && ej__misfire_run_unowned(job) &&
            ++reshards <= 3) {
            /* A leader is rewriting the instance nodes (Java 2.1.5's
             * deletes every one first): the marks of items briefly no
             * one's are looked at again once it is done. */
            if (ej__shard_if_necessary(c) != 0)
                break;
            continue;
        }
        if (k == 0) {
            if (ej__misfire_close(job, seen, false))
                return;
            continue; /* a marker marked after we looked */
        }
        pthread_mutex_lock(&job->mu);
        bool go = job->state == EJ__JOB_STARTED && !job->stopped;
        pthread_mutex_unlock(&job->mu);
        if (!go || !ej__coord_may_start(c, atomic_load(&job->fire_session)) ||
            atomic_load(&job->cancel)) {
            free(mis);
            break;
        }
        if (ej__coord_necessary(c)) {
            /* A resharding waits (an instance joined or left meanwhile):
             * do it first, as a fire's start would (the leader reshards
             * now that its items are done; a follower waits for it,
             * bounded), then re-run what is still ours. 2.1.5's
             * isEligibleForJobRunning gives up here and leaves the
             * re-runs to after the next fire's run, a period late, and
             * the leader reshards only at a fire's start: a run that
             * overruns its period then kept the job unsharded. */
            free(mis);
            if (++reshards > 3 || ej__shard_if_necessary(c) != 0)
                break;
            continue;
        }
        ej__running_clear_misfire(c, mis, k);
        size_t started = 0;
        stop = run_batch(job, s, mis, k, NULL, EJ_EXEC_MISFIRE, NULL, &started);
        free(mis);
        /* Nothing could start (running elsewhere: marked misfire again for
         * a later fire): stop here rather than spin. */
        if (started == 0)
            break;
    }
    ej__misfire_close(job, 0, true);
}

/* One execute() of ElasticJob: listeners around the run and, for normal
 * runs, the misfire loop. fr: the fire these items are of (see run_batch),
 * or NULL. */
static void execute(struct ej_job *job, const struct ej__rt_settings *s, const int *items, size_t n,
                    const int64_t *failover_tokens, ej_execution_source source, bool misfire_loop,
                    struct fire_ref *fr)
{
    struct ej__coord *c = job->coord;
    const struct ej_job_def *def = def_of(s);
    char *task_id = ej__exec_task_id(s->cfg.job_name, items, n, job->me);
    const char **params = n ? calloc(n, sizeof *params) : NULL;
    ej_shard_contexts_info info;
    fill_info(&info, s, task_id ? task_id : "", items, n, params, source);
    ej__rt_post_status(job, task_id, items, n, EJ_TASK_STAGING, "Job '%s' execute begin.",
                       s->cfg.job_name);
    ej__exec_listeners_before(def, &info);
    const struct ej_distribute_once_listener *once = job->once;
    if (once && once->before_last) {
        int r = ej__guarantee_enter(c, false, items, n, s->cfg.sharding_total_count,
                                    once->started_timeout_ms);
        if (r == 1) {
            once->before_last(&info, once->user);
            ej__guarantee_finish(c, false);
        } else if (r < 0) {
            ej__exec_handle_error(def, s->cfg.job_name, -1,
                                  "distribute-once listener: not every "
                                  "item started in time");
        }
    }
    bool abort_run = run_batch(job, s, items, n, failover_tokens, source, fr, NULL);
    if (misfire_loop)
        misfire_loop_run(job, s, abort_run);
    if (once && once->after_last) {
        int r = ej__guarantee_enter(c, true, items, n, s->cfg.sharding_total_count,
                                    once->completed_timeout_ms);
        if (r == 1) {
            once->after_last(&info, once->user);
            ej__guarantee_finish(c, true);
        } else if (r < 0) {
            ej__exec_handle_error(def, s->cfg.job_name, -1,
                                  "distribute-once listener: not every "
                                  "item completed in time");
        }
    }
    ej__exec_listeners_after(def, &info);
    free(params);
    free(task_id);
}

/* A plan's verdict other than RUN, counted and logged as fr's not-run
 * reason. */
static void plan_not_run(struct ej_job *job, const struct ej__rt_settings *s, struct fire_ref *fr,
                         const struct ej__fire_plan *plan)
{
    switch (plan->verdict) {
    case EJ__PLAN_RUN:
        return;
    case EJ__PLAN_FENCED:
        not_run(job, fr, EJ__NOT_RUN_FENCED,
                "not registered in ZooKeeper now, or fenced (no recent contact with ZooKeeper)");
        return;
    case EJ__PLAN_BEFORE_REGISTRATION:
        /* Its items belonged to others then, who ran them or will re-run
         * them as misfires. */
        not_run(job, fr, EJ__NOT_RUN_BEFORE_REGISTRATION,
                "due before this instance registered at %" PRId64 " (its items were others' then)",
                plan->registered_at_ms);
        return;
    case EJ__PLAN_TIME_DIFF:
        /* Logged by not_run (rate-limited) and by the error handler. */
        ej__job_set_error(job, "%s", plan->msg);
        ej__rt_post_status(job, "", NULL, 0, EJ_TASK_ERROR, "%s", plan->msg);
        ej__exec_handle_error(def_of(s), s->cfg.job_name, -1, plan->msg);
        not_run(job, fr, EJ__NOT_RUN_TIME_DIFF, "%s", plan->msg);
        return;
    case EJ__PLAN_TIME_DIFF_FAILED:
        not_run(job, fr, EJ__NOT_RUN_TIME_DIFF, "%s", plan->msg);
        return;
    case EJ__PLAN_DISABLED:
        not_run(job, fr, EJ__NOT_RUN_DISABLED, "server %s is disabled", job->ip);
        return;
    }
}

/* The fire's own items: resharding first when it is due (the leader
 * reshards, a follower waits, bounded), then the plan of this instance's
 * items, run with the misfire loop. */
static void run_own(struct ej_job *job, const struct ej__rt_settings *s, uint64_t gen, bool cron,
                    int64_t scheduled_ms, struct fire_ref *fr)
{
    struct ej__coord *c = job->coord;
    int rc = ej__shard_if_necessary(c);
    if (rc == EJ_ETIMEDOUT)
        not_run(job, fr, EJ__NOT_RUN_LEADER_WAIT,
                "the leader did not reshard within %d ms (leader/sharding/necessary or "
                "processing still there)",
                ej__coord_wait_bound(c));
    else if (rc == EJ_ESTOPPED)
        not_run(job, fr, EJ__NOT_RUN_STOPPED, "the job stopped while it waited to reshard");
    else if (rc != 0 && rc != EJ_EBUSY)
        not_run(job, fr, EJ__NOT_RUN_SHARDING_FAILED, "sharding failed: %s", ej_strerror(rc));
    if (rc != 0 && rc != EJ_EBUSY)
        return;
    struct ej__fire_request req = {.want = EJ__PLAN_WANT_OWN};
    struct ej__fire_plan plan;
    if (ej__coord_fire_plan(c, &req, &plan) != 0)
        memset(&plan, 0, sizeof plan);
    ej__takeover_check(job, s, plan.own, plan.nown, cron ? scheduled_ms : ej__now_ms());
    if (plan.nown == 0) {
        ej__rt_post_status(job, "", NULL, 0, EJ_TASK_FINISHED,
                           "Sharding item for job '%s' is empty.", s->cfg.job_name);
    } else {
        ej__misfire_open(job, plan.own, plan.nown);
        /* From the newest fire time this fire covers: armed from the
         * oldest of collapsed ones, the newest counted again as missed
         * while this ran (a second run at once). */
        int64_t covers = job->fire_covers_ms > scheduled_ms ? job->fire_covers_ms : scheduled_ms;
        if (cron && !job->manual && !(fr && fr->catch_up))
            ej__misfire_arm(job, gen, covers > 0 ? covers : ej__now_ms());
        execute(job, s, plan.own, plan.nown, NULL, EJ_EXEC_NORMAL_TRIGGER, true, fr);
    }
    ej__fire_plan_fini(&plan);
}

/* One fire: the coordinator's plan (its checks, then the items taken over,
 * which run first), the own items, then a failover take. */
static void do_fire(struct ej_job *job, const struct ej__rt_settings *s, uint64_t gen,
                    unsigned reasons, bool cron, int64_t scheduled_ms, struct fire_ref *fr)
{
    struct ej__coord *c = job->coord;
    struct ej__fire_request req = {
        .want = EJ__PLAN_WANT_GATE | (s->cfg.failover ? EJ__PLAN_WANT_FAILOVER : 0),
        .fire_session = atomic_load(&job->fire_session),
        .cron = cron,
        .scheduled_ms = scheduled_ms,
        .max_time_diff_seconds = s->cfg.max_time_diff_seconds,
    };
    struct ej__fire_plan plan;
    int rc = ej__coord_fire_plan(c, &req, &plan);
    if (rc != 0) {
        not_run(job, fr, EJ__NOT_RUN_START_FAILED, "its plan could not be made: %s",
                ej_strerror(rc));
        return;
    }
    if (plan.verdict != EJ__PLAN_RUN) {
        plan_not_run(job, s, fr, &plan);
        ej__fire_plan_fini(&plan);
        return;
    }
    EJ_LOG(EJ_LOG_DEBUG, MOD, 0, "job %s: %zu failover items of this instance", job->name,
           plan.nfailover);
    if (plan.nfailover) {
        execute(job, s, plan.failover, plan.nfailover, plan.failover_tokens, EJ_EXEC_FAILOVER,
                false, NULL);
        ej__coord_fire_done(
            c, &(struct ej__fire_done){.failover = plan.failover, .nfailover = plan.nfailover});
    }
    ej__fire_plan_fini(&plan);
    if (cron || (reasons & EJ__FIRE_TRIGGER))
        run_own(job, s, gen, cron, scheduled_ms, fr);
    if (s->cfg.failover)
        ej__failover_take(c); /* triggers a FAILOVER fire through the hook */
}

/* Sub-millisecond to minutes: a healthy scheduler starts a fire within a
 * few ms; seconds mean a busy pool, minutes a pause or a stall. */
const double ej_fire_lateness_bounds[EJ_FIRE_LATENESS_BUCKETS] = {
    0.001, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 60, 300};

/* Under job->mu. */
static void count_lateness(struct ej_job *job, int64_t late_ms)
{
    double late = late_ms > 0 ? (double)late_ms / 1000.0 : 0;
    size_t i = 0;
    while (i < EJ_FIRE_LATENESS_BUCKETS && late > ej_fire_lateness_bounds[i])
        i++;
    job->fire_lateness[i]++;
    job->fire_lateness_sum += late;
}

/* The latest cron fire time f covers (the last of collapsed ones); a
 * trigger's time; 0 for a fire that only runs failover items. */
static int64_t fire_covers(const struct ej__fire *f)
{
    if (f->cron_due)
        return f->last_scheduled_ms > f->scheduled_ms ? f->last_scheduled_ms : f->scheduled_ms;
    return (f->now_reasons & EJ__FIRE_TRIGGER) ? f->scheduled_ms : 0;
}

/*
 * startingDeadlineSeconds: whether the cron fire f, begun more than the
 * deadline after its newest fire time (Kubernetes: the latest missed
 * schedule), is dropped for it, with all it covers. Not a misfired
 * fire that is dropped anyway (misfire off, its fire times re-run by the
 * misfire loop already) or whose fire times CATCH_UP runs. Under job->mu.
 */
static bool past_deadline(struct ej_job *job, const struct ej__rt_settings *s,
                          const struct ej__fire *f)
{
    int deadline_s = s->cfg.starting_deadline_seconds;
    if (!f->cron_due || deadline_s <= 0 || f->scheduled_ms <= 0 ||
        f->started_ms - fire_covers(f) <= (int64_t)deadline_s * 1000)
        return false;
    if (!f->misfired || f->now_reasons != 0)
        return true;
    if (f->last_scheduled_ms <= job->misfire_handled_until || !ej_job_config_misfire(&s->cfg))
        return false;
    int64_t times[EJ_CONFIG_CATCH_UP_MAX];
    return ej__policy_catch_up_times(job, s, f, times, EJ_CONFIG_CATCH_UP_MAX) == 0;
}

void ej__fire_cb(const struct ej__fire *f, void *arg)
{
    struct ej_job *job = arg;
    unsigned reasons = f->now_reasons;
    bool cron = f->cron_due;
    struct fire_ref fr = fire_ref_of(f);
    pthread_mutex_lock(&job->mu);
    if (job->state != EJ__JOB_STARTED || job->stopped) {
        bool stopped = job->stopped;
        pthread_mutex_unlock(&job->mu);
        not_run(job, &fr, EJ__NOT_RUN_STOPPED, "%s",
                stopped ? "stopped by an operator, or the job was removed"
                        : "the job is shutting down");
        return;
    }
    struct ej__rt_settings *s = job->settings;
    ej__rt_settings_ref(s);
    /* Decided by the miss hook for a misfired fire (it left the fire
     * times to this, to be counted under "deadline"), here otherwise. */
    bool deadline =
        f->misfired ? job->deadline_fire_ms == f->scheduled_ms : past_deadline(job, s, f);
    job->deadline_fire_ms = 0;
    if (deadline) {
        pthread_mutex_unlock(&job->mu);
        fr.state = FIRE_PENDING;
        fr.count = f->missed_count;
        fr.last = f->last_scheduled_ms;
        not_run(job, &fr, EJ__NOT_RUN_DEADLINE,
                "started %" PRId64 " ms after its (newest) fire time, past "
                "startingDeadlineSeconds %d",
                f->started_ms - fire_covers(f), s->cfg.starting_deadline_seconds);
        ej__rt_settings_unref(s);
        return;
    }
    if (cron && f->misfired && reasons == 0) {
        /* Fire times that passed while this job ran were marked misfire
         * and re-run already; others (paused, stalled) run now, once, if
         * the job wants misfires. Not silent when dropped here: the
         * scheduler's miss hook (on_miss) counted and posted every one of
         * them, under its reason, right before this callback. */
        if (f->last_scheduled_ms <= job->misfire_handled_until || !ej_job_config_misfire(&s->cfg)) {
            pthread_mutex_unlock(&job->mu);
            ej__rt_settings_unref(s);
            return;
        }
    }
    int64_t catch_up[EJ_CONFIG_CATCH_UP_MAX];
    size_t ncatch = cron && f->misfired && reasons == 0
                        ? ej__policy_catch_up_times(job, s, f, catch_up, EJ_CONFIG_CATCH_UP_MAX)
                        : 0;
    EJ_LOG(EJ_LOG_DEBUG, MOD, 0,
           "job %s: fire (cron %d, misfired %d, missed %u, reasons 0x%x, late %" PRId64 " ms)",
           job->name, cron, f->misfired, f->missed_count, reasons, f->started_ms - f->scheduled_ms);
    job->firing = true;
    uint64_t gen = ++job->fire_gen;
    job->fires++;
    job->last_fire_ms = ej__now_ms();
    if (cron)
        count_lateness(job, f->started_ms - f->scheduled_ms);
    pthread_mutex_unlock(&job->mu);
    job->fire_covers_ms = fire_covers(f);
    int64_t session = ej__coord_session(job->coord);
    atomic_store(&job->fire_session, session);
    if (ej__coord_may_start(job->coord, session))
        atomic_store(&job->cancel, false);
    ej__coord_set_busy(job->coord, true);
    if (ncatch > 0) {
        EJ_LOG(EJ_LOG_INFO, MOD, 0,
               "job %s: catching up %zu missed fire time(s) within catchUpWindowSeconds %d",
               job->name, ncatch, s->cfg.catch_up_window_seconds);
        for (size_t i = 0; i < ncatch; i++) {
            struct fire_ref one = fr;
            one.at = catch_up[i];
            one.catch_up = true;
            do_fire(job, s, gen, reasons, cron, catch_up[i], &one);
        }
    } else {
        do_fire(job, s, gen, reasons, cron, cron ? f->scheduled_ms : 0, &fr);
    }
    ej__coord_set_busy(job->coord, false);
    pthread_mutex_lock(&job->mu);
    while (job->marker_inflight > 0)
        pthread_cond_wait(&job->cv, &job->mu);
    job->firing = false;
    pthread_cond_broadcast(&job->cv);
    pthread_mutex_unlock(&job->mu);
    ej__rt_settings_unref(s);
}

/* ------------------------------------------------------------------------ */
/* The trigger's users                                                        */

void (*ej__rt_trigger_use_hook)(struct ej_job *job);

ej__trigger *ej__rt_trigger_get(struct ej_job *job)
{
    pthread_mutex_lock(&job->mu);
    ej__trigger *t = job->trigger;
    if (t != NULL)
        job->trigger_uses++;
    pthread_mutex_unlock(&job->mu);
    if (t != NULL && ej__rt_trigger_use_hook != NULL)
        ej__rt_trigger_use_hook(job);
    return t;
}

void ej__rt_trigger_put(struct ej_job *job, ej__trigger *t)
{
    if (t == NULL)
        return;
    pthread_mutex_lock(&job->mu);
    EJ_ASSERT(job->trigger_uses > 0); /* a put without its get */
    if (--job->trigger_uses == 0)
        pthread_cond_broadcast(&job->cv);
    pthread_mutex_unlock(&job->mu);
}

/* The uses are short (pause, resume, fire now, reschedule: none waits for
 * the trigger's callback), so the wait is too. */
ej__trigger *ej__rt_trigger_detach(struct ej_job *job)
{
    pthread_mutex_lock(&job->mu);
    ej__trigger *t = job->trigger;
    job->trigger = NULL;
    while (job->trigger_uses > 0)
        pthread_cond_wait(&job->cv, &job->mu);
    pthread_mutex_unlock(&job->mu);
    return t;
}

bool ej__rt_wait_idle(struct ej_job *job, int64_t ms)
{
    int64_t deadline = ej__mono_ms() + ms;
    for (;;) {
        pthread_mutex_lock(&job->mu);
        bool firing = job->firing;
        pthread_mutex_unlock(&job->mu);
        ej__trigger *t = ej__rt_trigger_get(job);
        bool busy = firing || (t && ej__sched_trigger_is_busy(t));
        ej__rt_trigger_put(job, t);
        if (!busy)
            return true;
        if (ej__mono_ms() >= deadline)
            return false;
        ej__sleep_ms(10);
    }
}

/* ------------------------------------------------------------------------ */
/* Schedule                                                                   */

/* The scheduler's miss hook: every cron fire time that was not delivered on
 * time is counted on the job and reported as a status event naming the
 * reason, so that no fire goes unrun without a word (the scheduler also
 * logs a rate-limited warning). Runs on a pool thread. */
static void on_miss(const ej__miss *miss, void *arg)
{
    struct ej_job *job = arg;
    if (miss->fire != NULL) {
        /* A misfired fire its startingDeadlineSeconds drops: the callback
         * that comes next counts its fire times under "deadline". */
        pthread_mutex_lock(&job->mu);
        bool deadline = job->deadline_fire_ms == miss->fire->scheduled_ms ||
                        past_deadline(job, job->settings, miss->fire);
        if (deadline)
            job->deadline_fire_ms = miss->fire->scheduled_ms;
        pthread_mutex_unlock(&job->mu);
        if (deadline)
            return;
    }
    count_not_run(arg, ej__miss_reason_name(miss->reason), NULL, 0, miss->count, miss->first_ms,
                  miss->last_ms, "CRON");
}

int ej__rt_schedule(struct ej_job *job, const struct ej__rt_settings *s, bool reschedule)
{
    if (job->manual) {
        pthread_mutex_lock(&job->mu);
        bool have = job->trigger != NULL;
        pthread_mutex_unlock(&job->mu);
        if (reschedule || have)
            return 0;
        ej__trigger *t = NULL;
        int mrc = ej__sched_manual_add(job->sj, ej__fire_cb, job, &t);
        if (mrc == 0) {
            pthread_mutex_lock(&job->mu);
            job->trigger = t;
            pthread_mutex_unlock(&job->mu);
        }
        return mrc;
    }
    ej_tz *tz = NULL;
    int rc = ej_tz_load(s->cfg.time_zone[0] ? s->cfg.time_zone : NULL, &tz);
    if (rc != 0)
        return rc;
    ej_cron *cron = NULL, *copy = NULL;
    char err[256];
    rc = ej_cron_parse(s->cfg.cron, &cron, err, sizeof err);
    if (rc == 0)
        rc = ej_cron_parse(s->cfg.cron, &copy, err, sizeof err);
    if (rc != 0) {
        ej_cron_free(cron);
        EJ_LOG(EJ_LOG_ERROR, MOD, rc, "job %s: cron \"%s\": %s", job->name, s->cfg.cron, err);
        return rc;
    }
    ej__trigger *t = NULL;
    if (reschedule) {
        /* A config change seen while the job is destroyed: its trigger is
         * gone or held here until the new cron is in. */
        t = ej__rt_trigger_get(job);
        rc = t ? ej__sched_trigger_reschedule(t, cron, tz) : EJ_ESTOPPED;
    } else {
        rc = ej__sched_cron_add(job->sj, cron, tz, false, ej__fire_cb, job, &t);
        if (rc == 0)
            ej__sched_trigger_set_miss_fn(t, on_miss);
    }
    if (rc != 0) {
        ej__rt_trigger_put(job, reschedule ? t : NULL);
        ej_cron_free(cron);
        ej_cron_free(copy);
        return rc;
    }
    pthread_mutex_lock(&job->mu);
    if (!reschedule)
        job->trigger = t;
    ej_cron *old = job->cron;
    job->cron = copy;
    job->tz = tz;
    bool paused = job->user_paused || job->conn_paused || job->stopped;
    pthread_mutex_unlock(&job->mu);
    ej_cron_free(old);
    if (paused)
        ej__sched_trigger_pause(t);
    if (reschedule)
        ej__rt_trigger_put(job, t);
    return 0;
}

/* ------------------------------------------------------------------------ */
/* Coordinator hooks                                                          */

void ej__rt_on_trigger(void *user)
{
    struct ej_job *job = user;
    pthread_mutex_lock(&job->mu);
    bool firing = job->firing;
    bool ok = job->state == EJ__JOB_STARTED && !job->stopped;
    pthread_mutex_unlock(&job->mu);
    struct fire_ref fr = {.at = ej__now_ms(), .off_schedule = true, .state = FIRE_PENDING};
    if (!ok) {
        not_run(job, &fr, EJ__NOT_RUN_STOPPED, "a console trigger after the job stopped");
        return;
    }
    if (firing) {
        /* ElasticJob runs a trigger only when the job is not running. */
        not_run(job, &fr, EJ__NOT_RUN_RUNNING, "a console trigger while the job runs is ignored");
        return;
    }
    /* The job may be shut down from here on: the trigger stays until put. */
    ej__trigger *t = ej__rt_trigger_get(job);
    if (t)
        ej__sched_trigger_fire_now(t, EJ__FIRE_TRIGGER);
    ej__rt_trigger_put(job, t);
}

void ej__rt_on_failover_taken(void *user)
{
    struct ej_job *job = user;
    ej__trigger *t = ej__rt_trigger_get(job);
    if (t)
        ej__sched_trigger_fire_now(t, EJ__FIRE_FAILOVER);
    ej__rt_trigger_put(job, t);
}

static void take_task(struct ej__coord *c, void *arg)
{
    (void)arg;
    if (!ej__coord_busy(c))
        ej__failover_take(c);
}

void ej__rt_on_failover_pending(void *user)
{
    struct ej_job *job = user;
    pthread_mutex_lock(&job->mu);
    bool go = job->state == EJ__JOB_STARTED && !job->stopped && !job->firing;
    pthread_mutex_unlock(&job->mu);
    /* A busy instance takes pending items when its run ends. */
    if (go)
        ej__coord_post(job->coord, take_task, NULL);
}

void ej__rt_on_stop(void *user, int why)
{
    struct ej_job *job = user;
    pthread_mutex_lock(&job->mu);
    job->stopped = true;
    snprintf(job->last_error, sizeof job->last_error, "%s",
             why == EJ__STOP_OPERATOR ? "stopped: the instance node was deleted by an operator"
                                      : "stopped: the job was removed from ZooKeeper");
    pthread_mutex_unlock(&job->mu);
    ej__trigger *t = ej__rt_trigger_get(job);
    if (t)
        ej__sched_trigger_pause(t);
    ej__rt_trigger_put(job, t);
    if (job->on_stopped != NULL)
        job->on_stopped(job, why == EJ__STOP_OPERATOR, job->on_stopped_user);
}

void ej__rt_on_conn(void *user, ej_reg_state state, bool new_session)
{
    (void)new_session;
    struct ej_job *job = user;
    ej__trigger *t = ej__rt_trigger_get(job);
    pthread_mutex_lock(&job->mu);
    bool firing = job->firing;
    if (state == EJ_REG_SUSPENDED || state == EJ_REG_LOST)
        job->conn_paused = true;
    else
        job->conn_paused = false;
    bool resume = !job->conn_paused && !job->user_paused && !job->stopped &&
                  job->state == EJ__JOB_STARTED && !job->manual;
    pthread_mutex_unlock(&job->mu);
    if (t == NULL)
        return;
    if (state == EJ_REG_SUSPENDED || state == EJ_REG_LOST)
        ej__sched_trigger_pause(t);
    if (state == EJ_REG_LOST && firing && !job->keep_running_on_lost) {
        EJ_LOG(EJ_LOG_WARN, MOD, 0,
               "job %s: session lost while items run: asking them to stop (another instance "
               "may take them over)",
               job->name);
        atomic_store(&job->cancel, true);
    }
    if (resume)
        ej__sched_trigger_resume(t);
    ej__rt_trigger_put(job, t);
}

void ej__rt_on_fence(void *user, int level)
{
    struct ej_job *job = user;
    if (level != EJ_REG_FENCE_CANCEL)
        return; /* HOLD: ej__coord_may_start refuses every start */
    pthread_mutex_lock(&job->mu);
    bool firing = job->firing;
    pthread_mutex_unlock(&job->mu);
    if (!firing || job->keep_running_on_lost)
        return;
    EJ_LOG(EJ_LOG_WARN, MOD, 0,
           "job %s: fenced (ZooKeeper may expire the session soon): asking running items to "
           "stop (another instance may take them over)",
           job->name);
    atomic_store(&job->cancel, true);
}
