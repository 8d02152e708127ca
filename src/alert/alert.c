/*
 * The alert engine (see alert.h for the threading contract): facts in, a
 * bounded queue, one sender thread that applies the rules, the throttle
 * windows and the retries.
 */
#include <errno.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "common/check.h"
#include "alert/internal.h"
#include "common/util.h"
#include "ejob/cron.h"
#include "ejob/error.h"
#include "ejob/log.h"

#define MOD "alerts"
#define FACT_QUEUE 1000 /* facts waiting for the sender thread */
#define OUT_QUEUE 1000  /* messages waiting to be sent or retried */
#define MAX_ATTEMPTS 5  /* a message's tries before it counts as failed */
#define BACKOFF_MS 1000 /* first retry after this, doubling */
#define BACKOFF_MAX_MS 30000
#define DROP_LOG_EVERY_MS 10000
#define BUCKETS 1024

/* A fact copied with its strings in one allocation. */
struct qfact {
    struct ej_alert_fact f;
    char strings[];
};

struct job_ent {
    const char *name; /* borrowed from the rules */
    const ej_tz *tz;
    const struct ej_alert_job_rules *rules;
};

/* One item's run of failures (thread-owned). */
struct item_state {
    struct item_state *next;
    char *job;
    int item;
    int consecutive;
    bool alerted; /* a message went out for it since its last success */
};

/* One throttle window: a job, a rule of it, a kind (thread-owned). */
struct window {
    struct window *next;
    char *job;
    int rule, kind;
    int64_t last_ms;
    uint64_t suppressed;
};

struct outmsg {
    struct outmsg *next;
    size_t ch;
    char *body;
    char *subject; /* for the log */
    int attempts;
    int64_t due_ms; /* monotonic */
};

static struct {
    ej__mutex mu;
    pthread_cond_t cv;
    atomic_bool running;
    bool stop;
    int64_t drain_until; /* monotonic; set with stop */
    struct ej_alert_config cfg;
    struct job_ent *jobs; /* sorted by name */
    size_t njobs;
    struct qfact *ring[FACT_QUEUE];
    size_t head, count;
    struct ej_alert_stats stats; /* under mu */
    uint64_t drops_unlogged;
    int64_t drop_logged_ms;
    pthread_t th;
    char self[128]; /* this instance: "IP@-@PID" */
    /* The sender thread's own. */
    struct item_state *items[BUCKETS];
    struct window *windows[BUCKETS];
    struct outmsg *out;
    size_t nout;
} A = {.mu = EJ__MUTEX_INITIALIZER, .cv = PTHREAD_COND_INITIALIZER};

static unsigned hash(const char *s, int a, int b)
{
    unsigned h = 2166136261u;
    for (; *s; s++)
        h = (h ^ (unsigned char)*s) * 16777619u;
    h = (h ^ (unsigned)a) * 16777619u;
    return ((h ^ (unsigned)b) * 16777619u) % BUCKETS;
}

static int cmp_job(const void *a, const void *b)
{
    return strcmp(((const struct job_ent *)a)->name, ((const struct job_ent *)b)->name);
}

static const struct job_ent *find_job(const char *name)
{
    struct job_ent key = {.name = name};
    return bsearch(&key, A.jobs, A.njobs, sizeof *A.jobs, cmp_job);
}

/* ------------------------------------------------------------- posting */

static size_t str_size(const char *s, size_t len)
{
    return s == NULL ? 0 : (len ? len : strlen(s)) + 1;
}

static const char *put_str(char **at, const char *s, size_t len)
{
    if (s == NULL)
        return NULL;
    size_t n = len ? len : strlen(s);
    char *d = *at;
    memcpy(d, s, n);
    d[n] = '\0';
    *at += n + 1;
    return d;
}

static struct qfact *copy_fact(const struct ej_alert_fact *f)
{
    /* Only the end of stderr is ever shown. */
    const char *err = f->stderr_text;
    size_t elen = err != NULL && f->stderr_len == 0 ? strlen(err) : f->stderr_len;
    if (err != NULL && elen > 4 * EJ_ALERT_STDERR_BYTES) {
        err += elen - 4 * EJ_ALERT_STDERR_BYTES;
        elen = 4 * EJ_ALERT_STDERR_BYTES;
    }
    size_t n = str_size(f->job, 0) + str_size(f->instance, 0) + str_size(f->reason, 0) +
               str_size(f->execution_id, 0) + (err != NULL ? elen + 1 : 0);
    struct qfact *q = malloc(sizeof *q + n);
    if (q == NULL)
        return NULL;
    q->f = *f;
    char *at = q->strings;
    q->f.job = put_str(&at, f->job, 0);
    q->f.instance = put_str(&at, f->instance, 0);
    q->f.reason = put_str(&at, f->reason, 0);
    q->f.execution_id = put_str(&at, f->execution_id, 0);
    /* Bytes, possibly with NULs: keep the length. */
    if (err != NULL) {
        memcpy(at, err, elen);
        at[elen] = '\0';
        q->f.stderr_text = at;
        q->f.stderr_len = elen;
    }
    return q;
}

/* A drop: counted, and said at most every DROP_LOG_EVERY_MS. mu held. */
static void note_drop_locked(const char *what)
{
    EJ_ASSERT_HELD(&A.mu);
    int64_t now = ej__mono_ms();
    A.drops_unlogged++;
    if (A.drop_logged_ms != 0 && now - A.drop_logged_ms < DROP_LOG_EVERY_MS)
        return;
    EJ_LOG(EJ_LOG_WARN, MOD, 0, "%s: %llu alert(s) dropped since the last such line", what,
           (unsigned long long)A.drops_unlogged);
    A.drops_unlogged = 0;
    A.drop_logged_ms = now;
}

void ej__alert_post(const struct ej_alert_fact *fact)
{
    if (fact == NULL || fact->job == NULL || !atomic_load(&A.running))
        return;
    struct qfact *q = copy_fact(fact);
    ej__mutex_lock(&A.mu);
    if (!A.stop && q != NULL && A.count < FACT_QUEUE) {
        A.ring[(A.head + A.count) % FACT_QUEUE] = q;
        A.count++;
        pthread_cond_signal(&A.cv);
        q = NULL;
    } else if (!A.stop) {
        A.stats.facts_dropped++;
        note_drop_locked("alert queue full");
    }
    ej__mutex_unlock(&A.mu);
    free(q);
}

/* ------------------------------------------------------------ the rules */

static struct item_state *item_state(const char *job, int item, bool create)
{
    unsigned h = hash(job, item, 0);
    for (struct item_state *s = A.items[h]; s != NULL; s = s->next)
        if (s->item == item && strcmp(s->job, job) == 0)
            return s;
    if (!create)
        return NULL;
    struct item_state *s = calloc(1, sizeof *s);
    if (s == NULL || (s->job = strdup(job)) == NULL) {
        free(s);
        return NULL;
    }
    s->item = item;
    s->next = A.items[h];
    A.items[h] = s;
    return s;
}

static struct window *window(const char *job, int rule, int kind)
{
    unsigned h = hash(job, rule, kind);
    for (struct window *w = A.windows[h]; w != NULL; w = w->next)
        if (w->rule == rule && w->kind == kind && strcmp(w->job, job) == 0)
            return w;
    struct window *w = calloc(1, sizeof *w);
    if (w == NULL || (w->job = strdup(job)) == NULL) {
        free(w);
        return NULL;
    }
    w->rule = rule;
    w->kind = kind;
    w->next = A.windows[h];
    A.windows[h] = w;
    return w;
}

static void count_locked_add(uint64_t *field)
{
    ej__mutex_lock(&A.mu);
    (*field)++;
    ej__mutex_unlock(&A.mu);
}

static void queue_message(size_t ch, char *body, char *subject)
{
    struct outmsg *o = body != NULL ? calloc(1, sizeof *o) : NULL;
    if (o == NULL || A.nout >= OUT_QUEUE) {
        ej__mutex_lock(&A.mu);
        A.stats.channels[ch].dropped++;
        note_drop_locked("alert send queue full (a receiver is slow or down)");
        ej__mutex_unlock(&A.mu);
        free(o);
        free(body);
        free(subject);
        return;
    }
    o->ch = ch;
    o->body = body;
    o->subject = subject;
    o->due_ms = ej__mono_ms();
    /* At the end: messages go out in the order they were made. */
    struct outmsg **p = &A.out;
    while (*p != NULL)
        p = &(*p)->next;
    *p = o;
    A.nout++;
}

/* The fire time in the job's zone, "2026-11-27 11:00:00 +08:00". */
static void local_time(const ej_tz *tz, int64_t ms, char *out, size_t len)
{
    ej_civil_time t;
    int32_t off = 0;
    ej_tz_to_local(tz, ms, &t, &off);
    int32_t a = off < 0 ? -off : off;
    snprintf(out, len, "%04d-%02d-%02d %02d:%02d:%02d %c%02d:%02d", (int)t.year, (int)t.month,
             (int)t.day, (int)t.hour, (int)t.minute, (int)t.second, off < 0 ? '-' : '+',
             (int)(a / 3600), (int)(a % 3600 / 60));
}

/* One rule's message about f through each of its channels, unless its
 * throttle window holds it back. Returns whether it was queued. */
static bool emit(const struct job_ent *j, int r, ej_alert_kind kind, const struct ej_alert_fact *f,
                 int consecutive)
{
    const struct ej_alert_rule_config *rule = &j->rules->rules[r];
    struct window *w = window(j->name, r, (int)kind);
    int64_t now = ej__now_ms();
    int64_t span = (int64_t)A.cfg.throttle_seconds * 1000;
    if (w != NULL && span > 0 && w->last_ms != 0 && now - w->last_ms < span) {
        w->suppressed++;
        count_locked_add(&A.stats.throttled);
        return false;
    }
    char when[64] = "";
    if (f->fire_ms > 0)
        local_time(j->tz, f->fire_ms, when, sizeof when);
    char *tail = ej__alert_tail(f->stderr_text, f->stderr_len);
    struct ej__alert_msg m = {
        .kind = kind,
        .job = j->name,
        .item = f->item,
        .fire_ms = f->fire_ms,
        .fire_time = when[0] ? when : NULL,
        .time_zone = ej_tz_name(j->tz),
        .fire_count = f->fire_count ? f->fire_count : 1,
        .instance = f->instance != NULL ? f->instance : A.self,
        .reason = f->reason,
        .execution_id = f->execution_id,
        .has_exit_code = f->has_exit_code,
        .exit_code = f->exit_code,
        .term_signal = f->term_signal,
        .http_status = f->http_status,
        .stderr_tail = tail,
        .consecutive = consecutive,
        .rule = r,
        .suppressed = w != NULL ? w->suppressed : 0,
        .sent_ms = now,
    };
    for (size_t i = 0; i < rule->channel_count; i++) {
        const struct ej_alert_channel_config *ch = &A.cfg.channels[rule->channels[i]];
        queue_message(rule->channels[i],
                      ej__alert_render(ch->type, &m, ch->from, ch->to, ch->to_count),
                      ej__alert_subject(&m));
    }
    free(tail);
    if (w != NULL) {
        w->last_ms = now;
        w->suppressed = 0;
    }
    return true;
}

static void apply_rules(const struct ej_alert_fact *f)
{
    const struct job_ent *j = find_job(f->job);
    if (j == NULL)
        return; /* not a job of the daemon file */
    const struct ej_alert_job_rules *jr = j->rules;
    if (f->succeeded) {
        struct item_state *s = item_state(f->job, f->item, false);
        if (s == NULL)
            return;
        s->consecutive = 0;
        if (!s->alerted)
            return;
        s->alerted = false;
        for (size_t r = 0; r < jr->rule_count; r++)
            if (jr->rules[r].on & (1u << EJ_ALERT_RECOVERED))
                emit(j, (int)r, EJ_ALERT_RECOVERED, f, 0);
        return;
    }
    bool failure = f->kind == EJ_ALERT_FAILED || f->kind == EJ_ALERT_TIMEOUT;
    struct item_state *s = failure ? item_state(f->job, f->item, true) : NULL;
    int consecutive = 0;
    if (s != NULL)
        consecutive = ++s->consecutive;
    for (size_t r = 0; r < jr->rule_count; r++) {
        const struct ej_alert_rule_config *rule = &jr->rules[r];
        if (!(rule->on & (1u << f->kind)) || (failure && consecutive < rule->after))
            continue;
        if (emit(j, (int)r, f->kind, f, consecutive) && s != NULL)
            s->alerted = true;
    }
}

/* ------------------------------------------------------------- sending */

static void send_one(struct outmsg *o, bool last_try)
{
    const struct ej_alert_channel_config *ch = &A.cfg.channels[o->ch];
    char answer[320];
    enum ej__alert_outcome r = ej__alert_deliver(ch, o->body, answer, sizeof answer);
    o->attempts++;
    ej__mutex_lock(&A.mu);
    struct ej_alert_channel_stats *cs = &A.stats.channels[o->ch];
    if (o->attempts > 1)
        cs->retries++;
    if (r == ALERT_SENT)
        cs->sent++;
    else if (r == ALERT_REFUSED || last_try || o->attempts >= MAX_ATTEMPTS)
        cs->failed++;
    ej__mutex_unlock(&A.mu);
    if (r == ALERT_SENT) {
        EJ_LOG(EJ_LOG_DEBUG, MOD, 0, "%s: sent through %s (%s)", o->subject, ch->name, answer);
        o->attempts = -1;
    } else if (r == ALERT_REFUSED || last_try || o->attempts >= MAX_ATTEMPTS) {
        EJ_LOG(EJ_LOG_WARN, MOD, 0, "%s: not sent through %s after %d attempt(s): %s", o->subject,
               ch->name, o->attempts, answer);
        o->attempts = -1;
    } else {
        int64_t wait = BACKOFF_MS << (o->attempts - 1);
        o->due_ms = ej__mono_ms() + (wait < BACKOFF_MAX_MS ? wait : BACKOFF_MAX_MS);
        EJ_LOG(EJ_LOG_INFO, MOD, 0, "%s: %s did not take it (%s); again in %lld ms", o->subject,
               ch->name, answer, (long long)(o->due_ms - ej__mono_ms()));
    }
}

static void free_out(struct outmsg *o)
{
    free(o->body);
    free(o->subject);
    free(o);
}

/* Sends what is due (everything, once, when stopping). Returns the next
 * due time, or 0 when nothing waits. */
static int64_t send_due(bool stopping)
{
    int64_t next = 0;
    for (struct outmsg **p = &A.out; *p != NULL;) {
        struct outmsg *o = *p;
        bool late = stopping && ej__mono_ms() >= A.drain_until;
        if (late) {
            ej__mutex_lock(&A.mu);
            A.stats.channels[o->ch].dropped++;
            ej__mutex_unlock(&A.mu);
            o->attempts = -1;
        } else if (stopping || o->due_ms <= ej__mono_ms()) {
            send_one(o, stopping);
        }
        if (o->attempts < 0) {
            *p = o->next;
            A.nout--;
            free_out(o);
            continue;
        }
        if (next == 0 || o->due_ms < next)
            next = o->due_ms;
        p = &o->next;
    }
    return next;
}

static void *sender(void *arg)
{
    (void)arg;
    struct qfact *batch[FACT_QUEUE];
    int64_t next_due = 0;
    for (;;) {
        ej__mutex_lock(&A.mu);
        while (!A.stop && A.count == 0 && (next_due == 0 || next_due > ej__mono_ms())) {
            if (next_due == 0) {
                ej__mutex_wait(&A.mu, &A.cv);
            } else {
                int64_t wait = next_due - ej__mono_ms();
                struct timespec ts = ej__mono_timespec_in(wait);
                ej__mutex_timedwait(&A.mu, &A.cv, &ts);
            }
        }
        size_t n = A.count;
        for (size_t i = 0; i < n; i++)
            batch[i] = A.ring[(A.head + i) % FACT_QUEUE];
        A.head = (A.head + n) % FACT_QUEUE;
        A.count = 0;
        bool stopping = A.stop;
        ej__mutex_unlock(&A.mu);
        for (size_t i = 0; i < n; i++) {
            apply_rules(&batch[i]->f);
            free(batch[i]);
        }
        next_due = send_due(stopping);
        if (stopping)
            return NULL;
    }
}

/* ------------------------------------------------------- start and stop */

static void free_state(void)
{
    for (size_t b = 0; b < BUCKETS; b++) {
        while (A.items[b] != NULL) {
            struct item_state *s = A.items[b];
            A.items[b] = s->next;
            free(s->job);
            free(s);
        }
        while (A.windows[b] != NULL) {
            struct window *w = A.windows[b];
            A.windows[b] = w->next;
            free(w->job);
            free(w);
        }
    }
    while (A.out != NULL) {
        struct outmsg *o = A.out;
        A.out = o->next;
        free_out(o);
    }
    A.nout = 0;
    free(A.jobs);
    A.jobs = NULL;
    A.njobs = 0;
    ej_alert_config_fini(&A.cfg);
}

int ej_alert_start(struct ej_daemon_config *cfg)
{
    if (atomic_load(&A.running))
        return EJ_EBUSY;
    if (cfg == NULL || !cfg->alerts.configured)
        return 0;
    A.cfg = cfg->alerts;
    memset(&cfg->alerts, 0, sizeof cfg->alerts);
    A.jobs = calloc(A.cfg.job_count ? A.cfg.job_count : 1, sizeof *A.jobs);
    if (A.jobs == NULL) {
        free_state();
        return EJ_ENOMEM;
    }
    for (size_t i = 0; i < A.cfg.job_count; i++) {
        struct job_ent *j = &A.jobs[A.njobs++];
        j->name = A.cfg.job_rules[i].job;
        j->rules = &A.cfg.job_rules[i];
        j->tz = ej_tz_utc();
        for (size_t k = 0; k < cfg->job_count; k++) {
            ej_tz *tz = NULL;
            if (strcmp(cfg->jobs[k].job_name, j->name) == 0 &&
                ej_tz_load(cfg->jobs[k].time_zone, &tz) == 0)
                j->tz = tz; /* zones are cached for the life of the process */
        }
    }
    qsort(A.jobs, A.njobs, sizeof *A.jobs, cmp_job);
    char ip[64];
    ej__local_ip(ip, sizeof ip);
    snprintf(A.self, sizeof A.self, "%s@-@%d", ip, (int)getpid());
    memset(&A.stats, 0, sizeof A.stats);
    A.stats.channel_count = A.cfg.channel_count;
    for (size_t i = 0; i < A.cfg.channel_count; i++) {
        snprintf(A.stats.channels[i].name, sizeof A.stats.channels[i].name, "%s",
                 A.cfg.channels[i].name);
        A.stats.channels[i].type = ej_alert_channel_type_name(A.cfg.channels[i].type);
    }
    A.stop = false;
    A.head = A.count = 0;
    int rc = pthread_create(&A.th, NULL, sender, NULL);
    if (rc != 0) {
        free_state();
        return -rc;
    }
    pthread_setname_np(A.th, "ej-alerts");
    A.stats.running = true;
    atomic_store(&A.running, true);
    EJ_LOG(EJ_LOG_INFO, MOD, 0, "alerts: %zu channel(s), throttle %d s", A.cfg.channel_count,
           A.cfg.throttle_seconds);
    return 0;
}

void ej_alert_stop(int drain_ms)
{
    if (!atomic_load(&A.running))
        return;
    ej__mutex_lock(&A.mu);
    A.stop = true;
    A.drain_until = ej__mono_ms() + (drain_ms > 0 ? drain_ms : 0);
    pthread_cond_signal(&A.cv);
    ej__mutex_unlock(&A.mu);
    pthread_join(A.th, NULL);
    ej__mutex_lock(&A.mu);
    atomic_store(&A.running, false);
    A.stats.running = false;
    /* Facts posted while the thread finished. */
    for (size_t i = 0; i < A.count; i++)
        free(A.ring[(A.head + i) % FACT_QUEUE]);
    A.count = 0;
    ej__mutex_unlock(&A.mu);
    free_state();
}

bool ej_alert_is_running(void)
{
    return atomic_load(&A.running);
}

void ej_alert_stats_get(struct ej_alert_stats *out)
{
    ej__mutex_lock(&A.mu);
    *out = A.stats;
    ej__mutex_unlock(&A.mu);
}

int ej_alert_send_test(const struct ej_alert_channel_config *ch, char *answer, size_t answerlen)
{
    char host[128] = "", ip[64];
    ej__local_ip(ip, sizeof ip);
    gethostname(host, sizeof host - 1);
    char *inst = ej__asprintf("%s@-@%d (%s)", ip, (int)getpid(), host);
    struct ej__alert_msg m = {
        .kind = EJ_ALERT_TEST,
        .job = "(test)",
        .item = -1,
        .instance = inst,
        .rule = -1,
        .fire_count = 1,
        .sent_ms = ej__now_ms(),
    };
    char *body =
        inst != NULL ? ej__alert_render(ch->type, &m, ch->from, ch->to, ch->to_count) : NULL;
    free(inst);
    if (body == NULL)
        return EJ_ENOMEM;
    enum ej__alert_outcome r = ej__alert_deliver(ch, body, answer, answerlen);
    free(body);
    return r == ALERT_SENT ? 0 : -EIO;
}
