/*
 * One timer thread and one bounded worker pool per scheduler. See
 * internal.h for the contract. Everything below is protected by the one
 * scheduler mutex s->mu; it is never held while a callback or task runs.
 */
#include <errno.h>
#include <inttypes.h>
#include <poll.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/eventfd.h>
#include <sys/timerfd.h>
#include <time.h>
#include <unistd.h>

#include "common/check.h"
#include "common/util.h"
#include "ejob/error.h"
#include "ejob/log.h"
#include "schedule/internal.h"

#define MOD "sched"
/* Fire times counted at most when collapsing a gap into one misfire. */
#define MISSED_COUNT_MAX 10000u
/* A change of (REALTIME - MONOTONIC) larger than this is a clock step. */
#define CLOCK_JUMP_MS 100

/* ----------------------------------------------------------- structures */

struct group {
    size_t remaining;
};

/* A queued unit of work: a control task, a job task, or a trigger's fire. */
struct task {
    ej__task_fn fn;
    void *arg;
    struct task *next, *prev; /* control queue is doubly linked; job queues use next */
    struct group *group;      /* run_all tasks: completion counter; else NULL */
    ej__trigger *trigger;     /* a fire task (embedded in the trigger) */
    int64_t queued_mono;      /* control tasks: when queued (MONOTONIC ms) */
};

struct ej__sched_job {
    ej__sched *s;
    char *name;
    int limit;
    int running;
    size_t queued;
    struct task *qhead, *qtail;
    bool in_ready;
    ej__sched_job *rnext, *rprev; /* ready list */
    ej__sched_job *next, *prev;   /* scheduler's job list */
    ej__trigger *triggers;        /* list through trigger->jnext */
    size_t ntriggers;             /* including removed ones not yet freed */
    bool dead;
    int destroy_waiters;
    pthread_cond_t cv; /* a task of this job finished, or a slot freed */
};

struct ej__trigger {
    ej__sched *s;
    ej__sched_job *job;
    ej__fire_fn fn;
    void *arg;
    ej_cron *cron; /* NULL: manual trigger */
    const ej_tz *tz;
    /* A cron replaced while the timer computes with it outside the lock;
     * freed when the timer is done. */
    ej_cron *retired_cron;

    int64_t deadline; /* next cron fire time while in the heap */
    uint64_t seq;
    ssize_t heap_idx; /* -1 when not in the heap */

    bool paused;
    bool removed;
    bool in_batch; /* popped by the timer, next deadline not computed yet */
    bool queued;   /* fire task in the control queue */
    bool running;  /* callback running */
    int remover_waiting;
    pthread_t running_thread;
    int64_t paused_next; /* next fire time when paused (0: none to report) */

    /* Collapsed fire times not yet delivered, also by reason. */
    uint32_t missed;
    uint32_t missed_by[EJ__MISS_REASONS];
    int64_t missed_first, missed_last;
    ej__miss_fn miss_fn;
    /* fire-now requests not yet delivered */
    unsigned now_pending;
    int64_t now_first;

    ej__fire pend; /* the queued fire */
    int64_t prev_scheduled;
    struct task fire_task;
    ej__trigger *jnext, *jprev;
};

struct worker {
    pthread_t th;
    struct worker *next;
};

struct ej__sched {
    ej__mutex mu;
    pthread_cond_t work_cv; /* workers wait here (CLOCK_MONOTONIC) */
    pthread_cond_t done_cv; /* trigger callbacks / jobs finished; threads exited */

    char name[9];
    int core_threads; /* started whenever work waits */
    int max_threads;  /* beyond core: only when control tasks wait too long */
    int64_t idle_ms;
    int64_t misfire_ms;
    size_t max_queued;

    /* pool */
    struct task *chead, *ctail; /* control queue */
    size_t cqueued;
    ej__sched_job *rhead, *rtail; /* ready jobs */
    size_t nqueued;               /* all queued tasks */
    int threads, idle, wakes_in_flight, next_worker_id;
    struct worker *workers, *zombies;
    bool closing;

    /* jobs and triggers */
    ej__sched_job *jobs;
    size_t njobs, ntriggers;

    /* timer */
    ej__trigger **heap;
    size_t heap_len, heap_cap;
    uint64_t seq;
    pthread_t timer_th;
    bool timer_started;
    bool timer_stop;
    int tfd, efd;
    int64_t clock_offset;  /* REALTIME - MONOTONIC, ms */
    int64_t clock_checked; /* MONOTONIC ms of the last check */
    bool clock_set;        /* the timerfd reported a clock step */
    int64_t stall_ms;
    int64_t armed_for;

    uint64_t fires, misfires, clock_jumps;
    uint64_t missed_by[EJ__MISS_REASONS];
    /* Rate-limited warning: missed fire times since the last line. */
    uint64_t miss_window[EJ__MISS_REASONS];
    uint64_t miss_window_callbacks; /* misfired callbacks they went to */
    int64_t miss_window_since;      /* MONOTONIC ms; 0: nothing counted */
    char miss_window_job[64];
    _Atomic int64_t debug_shift_ms; /* ej__sched_debug_shift_clock */
};

static int64_t sched_now(const ej__sched *s)
{
    return ej__now_ms() + atomic_load(&s->debug_shift_ms);
}

/* What the current thread is doing, for waits that must not deadlock. */
struct tls_state {
    ej__sched_job *job; /* running one of this job's tasks (holds a slot) */
    bool holds_slot;
    ej__trigger *trigger; /* running this trigger's callback */
};
static _Thread_local struct tls_state tls;

/* -------------------------------------------------------------- helpers */

static int64_t mono_ms(void)
{
    return ej__mono_ms();
}

/* The wall clock as this scheduler sees it (shifted by the test hook). */
static int64_t sched_now(const ej__sched *s);

static void cond_init_mono(pthread_cond_t *cv)
{
    pthread_condattr_t a;
    pthread_condattr_init(&a);
    pthread_condattr_setclock(&a, CLOCK_MONOTONIC);
    pthread_cond_init(cv, &a);
    pthread_condattr_destroy(&a);
}

static void timed_wait_ms(pthread_cond_t *cv, ej__mutex *mu, int64_t ms, bool *timed_out)
{
    struct timespec ts = ej__mono_timespec_in(ms);
    int rc = ej__mutex_timedwait(mu, cv, &ts);
    if (timed_out)
        *timed_out = rc == ETIMEDOUT;
}

static void wake_timer(ej__sched *s)
{
    uint64_t one = 1;
    ssize_t n = write(s->efd, &one, sizeof one);
    (void)n; /* EAGAIN: the counter is already non-zero, the wake-up is pending */
}

/* ----------------------------------------------------------------- heap */

static bool heap_less(const ej__trigger *a, const ej__trigger *b)
{
    if (a->deadline != b->deadline)
        return a->deadline < b->deadline;
    return a->seq < b->seq;
}

static void heap_set(ej__sched *s, size_t i, ej__trigger *t)
{
    s->heap[i] = t;
    t->heap_idx = (ssize_t)i;
}

static void heap_up(ej__sched *s, size_t i)
{
    ej__trigger *t = s->heap[i];
    while (i > 0) {
        size_t p = (i - 1) / 2;
        if (!heap_less(t, s->heap[p]))
            break;
        heap_set(s, i, s->heap[p]);
        i = p;
    }
    heap_set(s, i, t);
}

static void heap_down(ej__sched *s, size_t i)
{
    ej__trigger *t = s->heap[i];
    for (;;) {
        size_t l = 2 * i + 1, r = l + 1, m = i;
        const ej__trigger *best = t;
        if (l < s->heap_len && heap_less(s->heap[l], best)) {
            m = l;
            best = s->heap[l];
        }
        if (r < s->heap_len && heap_less(s->heap[r], best))
            m = r;
        if (m == i)
            break;
        heap_set(s, i, s->heap[m]);
        i = m;
    }
    heap_set(s, i, t);
}

/* Pushes t with deadline; wakes the timer when t becomes the earliest. */
static int heap_push(ej__sched *s, ej__trigger *t, int64_t deadline)
{
    if (s->heap_len == s->heap_cap) {
        size_t cap = s->heap_cap ? s->heap_cap * 2 : 64;
        ej__trigger **h = realloc(s->heap, cap * sizeof *h);
        if (h == NULL)
            return EJ_ENOMEM;
        s->heap = h;
        s->heap_cap = cap;
    }
    t->deadline = deadline;
    t->seq = ++s->seq;
    heap_set(s, s->heap_len++, t);
    heap_up(s, s->heap_len - 1);
    if (s->heap[0] == t && deadline < s->armed_for)
        wake_timer(s);
    return 0;
}

static void heap_remove(ej__sched *s, ej__trigger *t)
{
    if (t->heap_idx < 0)
        return;
    size_t i = (size_t)t->heap_idx;
    t->heap_idx = -1;
    s->heap_len--;
    if (i == s->heap_len)
        return;
    heap_set(s, i, s->heap[s->heap_len]);
    heap_down(s, i);
    heap_up(s, (size_t)s->heap[i]->heap_idx);
}

/* Changes the deadline of a trigger in the heap. */
static void heap_update(ej__sched *s, ej__trigger *t, int64_t deadline)
{
    t->deadline = deadline;
    size_t i = (size_t)t->heap_idx;
    heap_down(s, i);
    heap_up(s, (size_t)t->heap_idx);
    if (s->heap[0] == t && deadline < s->armed_for)
        wake_timer(s);
}

/* ----------------------------------------------------------------- pool */

static void *worker_main(void *arg);

/* Joins the last exited worker (each exiting worker joins the one before
 * it, so at most one is left unjoined). Called with s->mu held (checked). */
static void join_zombies_locked(ej__sched *s)
{
    EJ_ASSERT_HELD(&s->mu);
    struct worker *z = s->zombies;
    s->zombies = NULL;
    if (z == NULL)
        return;
    ej__mutex_unlock(&s->mu);
    pthread_join(z->th, NULL);
    free(z);
    ej__mutex_lock(&s->mu);
}

static bool has_runnable(const ej__sched *s)
{
    return s->chead != NULL || s->rhead != NULL;
}

static void spawn_worker(ej__sched *s)
{
    struct worker *w = calloc(1, sizeof *w);
    if (w == NULL)
        return;
    pthread_attr_t attr;
    pthread_attr_init(&attr);
    /* Job code may use deep stacks; 8 MiB of virtual space costs nothing
     * until touched, so keep the system default. */
    int rc = pthread_create(&w->th, &attr, worker_main, s);
    pthread_attr_destroy(&attr);
    if (rc != 0) {
        EJ_LOG(EJ_LOG_WARN, MOD, -rc, "cannot start a pool thread (%d running)", s->threads);
        free(w);
        return;
    }
    w->next = s->workers;
    s->workers = w;
    s->threads++;
}

/* A control task (a fire callback, mostly) waited this long: the threads
 * are busy waiting for ZooKeeper, more of them would start it sooner. */
#define BURST_AFTER_MS 20

/* Makes sure someone will run the runnable work: an idle worker not yet
 * woken, else a new thread (beyond core_threads only when the oldest
 * control task has waited BURST_AFTER_MS; checked again at every task a
 * worker takes). */
static void wake_worker(ej__sched *s)
{
    if (!has_runnable(s))
        return;
    if (s->idle > s->wakes_in_flight) {
        s->wakes_in_flight++;
        pthread_cond_signal(&s->work_cv);
    } else if (s->threads < s->max_threads && !s->closing &&
               (s->threads < s->core_threads ||
                (s->chead && mono_ms() - s->chead->queued_mono >= BURST_AFTER_MS))) {
        spawn_worker(s);
    }
}

static void ready_push(ej__sched *s, ej__sched_job *j)
{
    if (j->in_ready || j->qhead == NULL || j->running >= j->limit)
        return;
    j->in_ready = true;
    j->rnext = NULL;
    j->rprev = s->rtail;
    if (s->rtail)
        s->rtail->rnext = j;
    else
        s->rhead = j;
    s->rtail = j;
}

static void ready_remove(ej__sched *s, ej__sched_job *j)
{
    if (!j->in_ready)
        return;
    if (j->rprev)
        j->rprev->rnext = j->rnext;
    else
        s->rhead = j->rnext;
    if (j->rnext)
        j->rnext->rprev = j->rprev;
    else
        s->rtail = j->rprev;
    j->in_ready = false;
    j->rnext = j->rprev = NULL;
}

static void ctl_push(ej__sched *s, struct task *t)
{
    t->queued_mono = mono_ms();
    t->next = NULL;
    t->prev = s->ctail;
    if (s->ctail)
        s->ctail->next = t;
    else
        s->chead = t;
    s->ctail = t;
    s->cqueued++;
    s->nqueued++;
}

static void ctl_unlink(ej__sched *s, struct task *t)
{
    if (t->prev)
        t->prev->next = t->next;
    else
        s->chead = t->next;
    if (t->next)
        t->next->prev = t->prev;
    else
        s->ctail = t->prev;
    t->next = t->prev = NULL;
    s->cqueued--;
    s->nqueued--;
}

/* Queues t last, or first (ej__sched_post_first). */
static void job_push(ej__sched *s, ej__sched_job *j, struct task *t, bool first)
{
    t->next = NULL;
    if (first) {
        t->next = j->qhead;
        j->qhead = t;
        if (j->qtail == NULL)
            j->qtail = t;
    } else if (j->qtail) {
        j->qtail->next = t;
        j->qtail = t;
    } else {
        j->qhead = j->qtail = t;
    }
    j->queued++;
    s->nqueued++;
    ready_push(s, j);
}

static struct task *job_pop(ej__sched *s, ej__sched_job *j)
{
    struct task *t = j->qhead;
    if (t == NULL)
        return NULL;
    j->qhead = t->next;
    if (j->qhead == NULL)
        j->qtail = NULL;
    t->next = NULL;
    j->queued--;
    s->nqueued--;
    return t;
}

static void job_free(ej__sched_job *j)
{
    ej__sched *s = j->s;
    if (j->prev)
        j->prev->next = j->next;
    else
        s->jobs = j->next;
    if (j->next)
        j->next->prev = j->prev;
    s->njobs--;
    pthread_cond_destroy(&j->cv);
    free(j->name);
    free(j);
    pthread_cond_broadcast(&s->done_cv);
}

bool ej__sched_job_is_current(const ej__sched_job *j)
{
    return j != NULL && tls.job == j;
}

static bool job_idle(const ej__sched_job *j)
{
    return j->queued == 0 && j->running == 0 && j->ntriggers == 0;
}

/* Frees a destroyed job once nothing refers to it any more. */
static void job_maybe_free(ej__sched_job *j)
{
    if (j->dead && job_idle(j) && j->destroy_waiters == 0)
        job_free(j);
}

/* Runs one job task; called and returns with s->mu held (checked), j->running
 * already counted. */
static void run_job_task(ej__sched *s, ej__sched_job *j, struct task *t)
{
    EJ_ASSERT_HELD(&s->mu);
    ej__mutex_unlock(&s->mu);
    struct tls_state saved = tls;
    tls.job = j;
    tls.holds_slot = true;
    tls.trigger = NULL;
    t->fn(t->arg);
    tls = saved;
    ej__mutex_lock(&s->mu);
    j->running--;
    if (t->group) {
        t->group->remaining--;
    } else {
        free(t);
    }
    ready_push(s, j);
    wake_worker(s);
    pthread_cond_broadcast(&j->cv);
    if (j->dead) {
        pthread_cond_broadcast(&s->done_cv);
        job_maybe_free(j);
    }
}

static void fire_run(ej__sched *s, ej__trigger *t);

/* Takes the next task for a pool thread; NULL when there is none. The
 * caller runs it. */
static void worker_run_one(ej__sched *s, struct task *ct, ej__sched_job *j)
{
    if (ct) {
        if (ct->trigger) {
            fire_run(s, ct->trigger);
            return;
        }
        ej__mutex_unlock(&s->mu);
        ct->fn(ct->arg);
        free(ct);
        ej__mutex_lock(&s->mu);
        return;
    }
    struct task *t = job_pop(s, j);
    j->running++;
    ready_remove(s, j);
    ready_push(s, j); /* back to the tail: round-robin */
    wake_worker(s);
    run_job_task(s, j, t);
}

static void *worker_main(void *arg)
{
    ej__sched *s = arg;
    ej__mutex_lock(&s->mu);
    char name[16];
    snprintf(name, sizeof name, "%s-w%d", s->name, s->next_worker_id++);
    pthread_setname_np(pthread_self(), name);
    for (;;) {
        if (s->chead) {
            struct task *ct = s->chead;
            ctl_unlink(s, ct);
            wake_worker(s);
            worker_run_one(s, ct, NULL);
            continue;
        }
        if (s->rhead) {
            ej__sched_job *j = s->rhead;
            if (j->qhead == NULL || j->running >= j->limit) {
                ready_remove(s, j); /* stale: a helper took its tasks */
                continue;
            }
            worker_run_one(s, NULL, j);
            continue;
        }
        if (s->closing)
            break;
        s->idle++;
        bool timed_out = false;
        timed_wait_ms(&s->work_cv, &s->mu, s->idle_ms, &timed_out);
        s->idle--;
        if (s->wakes_in_flight > 0)
            s->wakes_in_flight--;
        if (timed_out && !has_runnable(s))
            break;
    }
    /* Leave: become the zombie a later thread joins, and join the one
     * before us. */
    pthread_t self = pthread_self();
    struct worker *prev = s->zombies;
    s->zombies = NULL;
    for (struct worker **pw = &s->workers; *pw; pw = &(*pw)->next) {
        if (pthread_equal((*pw)->th, self)) {
            struct worker *w = *pw;
            *pw = w->next;
            w->next = NULL;
            s->zombies = w;
            break;
        }
    }
    s->threads--;
    pthread_cond_broadcast(&s->done_cv);
    ej__mutex_unlock(&s->mu);
    if (prev) {
        pthread_join(prev->th, NULL);
        free(prev);
    }
    return NULL;
}

/* ------------------------------------------------------------- triggers */

static void trigger_free(ej__trigger *t)
{
    ej__sched *s = t->s;
    ej__sched_job *j = t->job;
    if (t->jprev)
        t->jprev->jnext = t->jnext;
    else
        j->triggers = t->jnext;
    if (t->jnext)
        t->jnext->jprev = t->jprev;
    j->ntriggers--;
    s->ntriggers--;
    ej_cron_free(t->cron);
    ej_cron_free(t->retired_cron);
    free(t);
    pthread_cond_broadcast(&s->done_cv);
    job_maybe_free(j);
}

static void trigger_maybe_free(ej__trigger *t)
{
    if (t->removed && !t->in_batch && !t->running && !t->queued && t->remover_waiting == 0)
        trigger_free(t);
}

/* Queues the fire in t->pend as a control task. */
static void fire_enqueue(ej__sched *s, ej__trigger *t)
{
    t->queued = true;
    t->fire_task.fn = NULL;
    t->fire_task.arg = NULL;
    t->fire_task.group = NULL;
    t->fire_task.trigger = t;
    ctl_push(s, &t->fire_task);
    wake_worker(s);
}

/* Delivers what accumulated (collapsed fire times, fire-now requests) when
 * the trigger is free to fire. */
static void trigger_flush(ej__sched *s, ej__trigger *t, int64_t now)
{
    if (t->removed || t->queued || t->running || t->in_batch)
        return;
    bool cron_part = t->missed > 0 && !t->paused;
    if (!cron_part && t->now_pending == 0)
        return;
    memset(&t->pend, 0, sizeof t->pend);
    t->pend.trigger = t;
    if (cron_part) {
        t->pend.cron_due = true;
        t->pend.misfired = true;
        t->pend.missed_count = t->missed;
        t->pend.scheduled_ms = t->missed_first;
        t->pend.last_scheduled_ms = t->missed_last;
        memcpy(t->pend.missed_by, t->missed_by, sizeof t->missed_by);
        memset(t->missed_by, 0, sizeof t->missed_by);
        t->missed = 0;
    } else {
        t->pend.missed_count = 1;
        t->pend.scheduled_ms = t->now_first ? t->now_first : now;
        t->pend.last_scheduled_ms = t->pend.scheduled_ms;
    }
    t->pend.now_reasons = t->now_pending;
    t->now_pending = 0;
    t->now_first = 0;
    fire_enqueue(s, t);
}

/* Adds n fire times missed for reason r, up to MISSED_COUNT_MAX in all. */
static void count_missed(ej__trigger *t, uint32_t n, ej__miss_reason r)
{
    uint32_t room = MISSED_COUNT_MAX - t->missed;
    if (n > room)
        n = room;
    t->missed += n;
    t->missed_by[r] += n;
}

static void add_missed(ej__trigger *t, int64_t when, ej__miss_reason r)
{
    if (t->missed == 0)
        t->missed_first = when;
    count_missed(t, 1, r);
    t->missed_last = when;
}

const char *ej__miss_reason_name(ej__miss_reason r)
{
    static const char *const names[EJ__MISS_REASONS] = {"running",    "queued",     "paused",
                                                        "timer-late", "clock-step", "late-start"};
    return (unsigned)r < EJ__MISS_REASONS ? names[r] : "unknown";
}

#define MISS_LOG_EVERY_MS 10000

/* Counts a misfired callback's fire times; with s->mu held (checked). Returns true
 * and fills line when the rate-limited warning is due. */
static bool miss_account(ej__sched *s, const ej__fire *f, const char *job, char *line, size_t len)
{
    EJ_ASSERT_HELD(&s->mu);
    int64_t mono = mono_ms();
    if (s->miss_window_since == 0) {
        s->miss_window_since = mono;
        snprintf(s->miss_window_job, sizeof s->miss_window_job, "%s", job);
    }
    for (int r = 0; r < EJ__MISS_REASONS; r++) {
        s->missed_by[r] += f->missed_by[r];
        s->miss_window[r] += f->missed_by[r];
    }
    s->miss_window_callbacks++;
    if (mono - s->miss_window_since < MISS_LOG_EVERY_MS && s->misfires > 1)
        return false;
    uint64_t total = 0;
    size_t n = 0;
    for (int r = 0; r < EJ__MISS_REASONS; r++)
        total += s->miss_window[r];
    /* Each misfired callback runs at most once for all its fire times. */
    n += (size_t)snprintf(line + n, len - n,
                          "%" PRIu64 " cron fire time(s) missed in %" PRId64
                          " ms, delivered late in %" PRIu64
                          " misfired callback(s) (at most one run each: %" PRIu64 " never run):",
                          total, mono - s->miss_window_since, s->miss_window_callbacks,
                          total - s->miss_window_callbacks);
    for (int r = 0; r < EJ__MISS_REASONS && n < len; r++)
        if (s->miss_window[r])
            n += (size_t)snprintf(line + n, len - n, " %s %" PRIu64,
                                  ej__miss_reason_name((ej__miss_reason)r), s->miss_window[r]);
    if (n < len)
        snprintf(line + n, len - n, "; first job '%s'", s->miss_window_job);
    memset(s->miss_window, 0, sizeof s->miss_window);
    s->miss_window_callbacks = 0;
    s->miss_window_since = 0;
    return true;
}

/* Runs a trigger's callback; called and returns with s->mu held (checked). */
static void fire_run(ej__sched *s, ej__trigger *t)
{
    EJ_ASSERT_HELD(&s->mu);
    ej__fire fire = t->pend;
    t->queued = false;
    t->running = true;
    t->running_thread = pthread_self();
    fire.started_ms = sched_now(s);
    if (fire.cron_due && !fire.misfired && fire.started_ms - fire.scheduled_ms > s->misfire_ms) {
        fire.misfired = true;
        fire.missed_by[EJ__MISS_LATE_START] = 1;
    }
    fire.next_ms = (t->heap_idx >= 0 && !t->paused) ? t->deadline : 0;
    fire.prev_scheduled_ms = t->prev_scheduled;
    if (fire.cron_due)
        t->prev_scheduled = fire.last_scheduled_ms;
    s->fires++;
    char line[512];
    bool log_miss = false;
    ej__miss_fn miss_fn = t->miss_fn;
    if (fire.misfired) {
        s->misfires++;
        log_miss = miss_account(s, &fire, t->job->name, line, sizeof line);
    }
    ej__mutex_unlock(&s->mu);

    struct tls_state saved = tls;
    tls.job = NULL;
    tls.holds_slot = false;
    tls.trigger = t;
    if (log_miss)
        EJ_LOG(EJ_LOG_WARN, MOD, 0, "%s", line);
    for (int r = 0; miss_fn && fire.misfired && r < EJ__MISS_REASONS; r++) {
        if (fire.missed_by[r] == 0)
            continue;
        ej__miss m = {.trigger = t,
                      .fire = &fire,
                      .reason = (ej__miss_reason)r,
                      .count = fire.missed_by[r],
                      .first_ms = fire.scheduled_ms,
                      .last_ms = fire.last_scheduled_ms};
        miss_fn(&m, t->arg);
    }
    t->fn(&fire, t->arg);
    tls = saved;

    ej__mutex_lock(&s->mu);
    t->running = false;
    pthread_cond_broadcast(&s->done_cv);
    if (t->removed)
        trigger_maybe_free(t);
    else
        trigger_flush(s, t, sched_now(s));
}

/* ---------------------------------------------------------------- timer */

/* Counts cron fire times after `from` up to now into t->missed and returns
 * the first fire time after now (0: none). */
static int64_t count_until(ej__trigger *t, int64_t from, int64_t now, ej__miss_reason r)
{
    int64_t next = from;
    for (;;) {
        int64_t n;
        if (ej_cron_next(t->cron, t->tz, next, &n) != 0)
            return 0;
        if (n > now) {
            return n;
        }
        add_missed(t, n, r);
        if (t->missed >= MISSED_COUNT_MAX) {
            /* Stop counting; resume from now. */
            if (ej_cron_next(t->cron, t->tz, now, &n) != 0)
                return 0;
            return n;
        }
        next = n;
    }
}

/* A trigger the timer popped: its next fire time is computed outside the
 * lock with the cron captured at pop time. */
struct batch_entry {
    ej__trigger *t;
    const ej_cron *cron;
    const ej_tz *tz;
    int64_t from;
    int64_t next;           /* first fire time after now; 0: none */
    ej__miss_reason reason; /* of the fire times it counts */
    uint32_t missed;
    int64_t missed_first, missed_last;
};

/* Without the lock: fire times in (from, now] are counted, the next one
 * after now found. */
static void batch_compute(struct batch_entry *e, int64_t now)
{
    int64_t at = e->from;
    e->next = 0;
    e->missed = 0;
    for (;;) {
        int64_t n;
        if (ej_cron_next(e->cron, e->tz, at, &n) != 0)
            return;
        if (n > now) {
            e->next = n;
            return;
        }
        if (e->missed == 0)
            e->missed_first = n;
        e->missed++;
        e->missed_last = n;
        if (e->missed >= MISSED_COUNT_MAX) {
            if (ej_cron_next(e->cron, e->tz, now, &n) == 0)
                e->next = n;
            return;
        }
        at = n;
    }
}

/* With the lock: re-arms a popped trigger and delivers what it collected. */
static void batch_finish(ej__sched *s, struct batch_entry *e, int64_t now)
{
    ej__trigger *t = e->t;
    t->in_batch = false;
    ej_cron_free(t->retired_cron);
    t->retired_cron = NULL;
    if (t->removed) {
        trigger_maybe_free(t);
        return;
    }
    int64_t next;
    if (t->cron != e->cron || t->tz != e->tz) {
        /* Rescheduled meanwhile: start over from the new expression. */
        next = count_until(t, t->deadline, now, e->reason);
    } else {
        next = e->next;
        if (e->missed > 0) {
            if (t->missed == 0)
                t->missed_first = e->missed_first;
            count_missed(t, e->missed, e->reason);
            t->missed_last = e->missed_last;
        }
    }
    if (t->paused) {
        t->paused_next = next;
    } else if (next != 0) {
        if (heap_push(s, t, next) != 0)
            EJ_LOG(EJ_LOG_ERROR, MOD, EJ_ENOMEM, "job '%s': cannot re-arm its trigger",
                   t->job->name);
    } else {
        EJ_LOG(EJ_LOG_INFO, MOD, 0, "job '%s': cron '%s' has no more fire times", t->job->name,
               ej_cron_text(t->cron));
    }
    trigger_flush(s, t, now);
}

/* The wall clock was stepped: re-arm every trigger that now fires too late. */
static void timer_clock_jump(ej__sched *s, int64_t now)
{
    s->clock_jumps++;
    EJ_LOG(EJ_LOG_WARN, MOD, 0, "wall clock stepped; recomputing %zu trigger(s)", s->heap_len);
    /* Collect first: updating positions while walking the heap array would
     * skip or repeat entries. */
    size_t n = s->heap_len;
    ej__trigger **v = malloc((n ? n : 1) * sizeof *v);
    if (v == NULL)
        return;
    memcpy(v, s->heap, n * sizeof *v);
    for (size_t i = 0; i < n; i++) {
        ej__trigger *t = v[i];
        int64_t nx;
        if (t->deadline <= now || t->heap_idx < 0)
            continue; /* due: handled as late below */
        if (ej_cron_next(t->cron, t->tz, now, &nx) == 0 && nx < t->deadline)
            heap_update(s, t, nx);
    }
    free(v);
}

static void timer_arm(ej__sched *s)
{
    struct itimerspec its;
    memset(&its, 0, sizeof its);
    int64_t at = s->heap_len ? s->heap[0]->deadline : INT64_MAX;
    if (at == s->armed_for && !s->clock_set)
        return;
    s->clock_set = false;
    /* Keep the timer armed even with an empty heap, so that a clock step
     * still cancels it (harmless: nothing to recompute). */
    int64_t arm = at == INT64_MAX ? sched_now(s) + 86400000LL * 365 : at;
    arm -= atomic_load(&s->debug_shift_ms); /* back to the real clock */
    its.it_value.tv_sec = arm / 1000;
    its.it_value.tv_nsec = (arm % 1000) * 1000000;
    if (timerfd_settime(s->tfd, TFD_TIMER_ABSTIME | TFD_TIMER_CANCEL_ON_SET, &its, NULL) != 0)
        EJ_LOG(EJ_LOG_ERROR, MOD, -errno, "timerfd_settime failed");
    s->armed_for = at;
}

/* The due triggers of one round of the timer thread. */
struct batch {
    struct batch_entry *v;
    size_t n, cap;
};

/* Whether the wall clock jumped since the last round (or was set: the
 * timerfd said so); remembers the offset for the next round. */
static bool timer_check_clock(ej__sched *s, int64_t now)
{
    EJ_ASSERT_HELD(&s->mu);
    int64_t mono = mono_ms();
    int64_t off = now - mono;
    /* NTP slews the clock by at most 0.5 ms/s: allow 1 ms/s on top. */
    int64_t allowed = CLOCK_JUMP_MS + (mono - s->clock_checked) / 1000;
    bool jumped =
        s->clock_set || off - s->clock_offset > allowed || s->clock_offset - off > allowed;
    s->clock_offset = off;
    s->clock_checked = mono;
    if (jumped) {
        s->clock_set = true; /* re-arm the timerfd below */
        timer_clock_jump(s, now);
    }
    return jumped;
}

/* An on-time fire of t, free to run: queued for the pool now. */
static void queue_fire(ej__sched *s, ej__trigger *t)
{
    EJ_ASSERT_HELD(&s->mu);
    memset(&t->pend, 0, sizeof t->pend);
    t->pend.trigger = t;
    t->pend.cron_due = true;
    t->pend.missed_count = 1;
    t->pend.scheduled_ms = t->deadline;
    t->pend.last_scheduled_ms = t->deadline;
    t->pend.now_reasons = t->now_pending;
    t->now_pending = 0;
    t->now_first = 0;
    t->queued = true;
    t->fire_task = (struct task){.trigger = t};
    ctl_push(s, &t->fire_task);
}

/* Phase 1: pops every due trigger into the batch; on-time fires go to the
 * pool at once, before any next time is computed; the others count as
 * missed. Returns how many fires were queued. */
static size_t pop_due(ej__sched *s, struct batch *bt, int64_t now, bool jumped)
{
    EJ_ASSERT_HELD(&s->mu);
    size_t queued = 0;
    bt->n = 0;
    while (s->heap_len && s->heap[0]->deadline <= now) {
        ej__trigger *t = s->heap[0];
        if (bt->n == bt->cap) {
            size_t cap = bt->cap ? bt->cap * 2 : 64;
            struct batch_entry *b = realloc(bt->v, cap * sizeof *b);
            if (b == NULL)
                break; /* the rest waits for the next round */
            bt->v = b;
            bt->cap = cap;
        }
        heap_remove(s, t);
        bool on_time = now - t->deadline <= s->misfire_ms;
        /* Fire times after this one that are already due: the timer (or
         * the clock) was late. */
        bt->v[bt->n++] =
            (struct batch_entry){.t = t,
                                 .cron = t->cron,
                                 .tz = t->tz,
                                 .from = t->deadline,
                                 .reason = jumped ? EJ__MISS_CLOCK_STEP : EJ__MISS_TIMER_LATE};
        t->in_batch = true;
        if (on_time && !t->queued && !t->running && t->missed == 0) {
            queue_fire(s, t);
            queued++;
        } else {
            ej__miss_reason r = t->running  ? EJ__MISS_RUNNING
                                : t->queued ? EJ__MISS_QUEUED
                                : !on_time  ? (jumped ? EJ__MISS_CLOCK_STEP : EJ__MISS_TIMER_LATE)
                                            : EJ__MISS_QUEUED;
            add_missed(t, t->deadline, r);
        }
    }
    return queued;
}

/* One wake-up per fire at most (idle threads, else new ones up to the
 * limit): the woken threads wake more as they find work. */
static void wake_for(ej__sched *s, size_t queued)
{
    for (size_t k = 0; k < queued && k < (size_t)s->max_threads; k++) {
        int before = s->wakes_in_flight + s->threads;
        wake_worker(s);
        if (s->wakes_in_flight + s->threads == before)
            break; /* nobody left to wake */
    }
}

/* Sleeps until the timerfd or the wake-up eventfd says so. Called and
 * returns with s->mu held (released meanwhile). */
static void timer_sleep(ej__sched *s)
{
    EJ_ASSERT_HELD(&s->mu);
    ej__mutex_unlock(&s->mu);
    struct pollfd pfd[2] = {{.fd = s->tfd, .events = POLLIN}, {.fd = s->efd, .events = POLLIN}};
    int pr = poll(pfd, 2, -1);
    bool clock_set = false;
    if (pr > 0) {
        uint64_t v;
        if (pfd[0].revents) {
            if (read(s->tfd, &v, sizeof v) < 0 && errno == ECANCELED)
                clock_set = true;
        }
        if (pfd[1].revents) {
            ssize_t r = read(s->efd, &v, sizeof v);
            (void)r;
        }
    }
    ej__mutex_lock(&s->mu);
    if (clock_set)
        s->clock_set = true;
    if (pr > 0 && pfd[0].revents)
        s->armed_for = -1; /* expired or cancelled: must be re-armed */
}

static void *timer_main(void *arg)
{
    ej__sched *s = arg;
    char name[16];
    snprintf(name, sizeof name, "%s-timer", s->name);
    pthread_setname_np(pthread_self(), name);

    struct batch bt = {.cap = 64};
    bt.v = malloc(bt.cap * sizeof *bt.v);
    if (bt.v == NULL)
        bt.cap = 0;
    ej__mutex_lock(&s->mu);
    s->clock_checked = mono_ms();
    s->clock_offset = sched_now(s) - s->clock_checked;
    while (!s->timer_stop) {
        if (s->stall_ms > 0) {
            int64_t ms = s->stall_ms;
            s->stall_ms = 0;
            ej__mutex_unlock(&s->mu);
            ej__sleep_ms(ms);
            ej__mutex_lock(&s->mu);
        }
        int64_t now = sched_now(s);
        bool jumped = timer_check_clock(s, now);
        size_t queued = pop_due(s, &bt, now, jumped);
        wake_for(s, queued);
        /* Phase 2: next fire times, computed without the lock so that the
         * workers take the queued fires meanwhile. */
        if (bt.n > 0) {
            ej__mutex_unlock(&s->mu);
            for (size_t i = 0; i < bt.n; i++)
                batch_compute(&bt.v[i], now);
            ej__mutex_lock(&s->mu);
            for (size_t i = 0; i < bt.n; i++)
                batch_finish(s, &bt.v[i], now);
        }
        if (s->timer_stop)
            break;
        timer_arm(s);
        timer_sleep(s);
    }
    ej__mutex_unlock(&s->mu);
    free(bt.v);
    return NULL;
}

/* ------------------------------------------------------------ lifecycle */

static int online_cpus(void)
{
    long n = sysconf(_SC_NPROCESSORS_ONLN);
    return n > 0 ? (int)n : 1;
}

int ej__sched_create(const struct ej__sched_opts *opts, ej__sched **out)
{
    if (out == NULL)
        return EJ_EINVAL;
    *out = NULL;
    ej__sched *s = calloc(1, sizeof *s);
    if (s == NULL)
        return EJ_ENOMEM;
    struct ej__sched_opts o = {0};
    if (opts)
        o = *opts;
    /* Fire callbacks mostly wait for ZooKeeper round trips, not for a CPU:
     * 1,000 one-second jobs need about fires/s x round-trip time threads
     * (16 ran 75% of their fires under load, 64 ran 98%). Up to core_threads
     * start whenever work waits; the rest only for fires that wait (see
     * wake_worker). Idle threads exit, so none of this costs anything idle. */
    s->max_threads = o.max_threads > 0 ? o.max_threads : 8 * online_cpus();
    if (o.max_threads <= 0 && s->max_threads < 64)
        s->max_threads = 64;
    s->core_threads = o.max_threads > 0 ? o.max_threads : 4 * online_cpus();
    if (o.max_threads <= 0 && s->core_threads < 16)
        s->core_threads = 16;
    s->idle_ms = o.idle_ms > 0 ? o.idle_ms : 60000;
    s->misfire_ms = o.misfire_threshold_ms > 0   ? o.misfire_threshold_ms
                    : o.misfire_threshold_ms < 0 ? 0
                                                 : 1000;
    s->max_queued = o.max_queued ? o.max_queued : 1000000;
    snprintf(s->name, sizeof s->name, "%s", o.name && o.name[0] ? o.name : "ej");
    s->armed_for = -1;
    s->tfd = s->efd = -1;

    int rc = 0;
    /* Critical sections are short and taken by many threads in bursts
     * (every fire of a busy second): spin a little before sleeping. */
    pthread_mutexattr_t ma;
    pthread_mutexattr_init(&ma);
    pthread_mutexattr_settype(&ma, PTHREAD_MUTEX_ADAPTIVE_NP);
    ej__mutex_init_attr(&s->mu, &ma);
    pthread_mutexattr_destroy(&ma);
    cond_init_mono(&s->work_cv);
    cond_init_mono(&s->done_cv);
    s->tfd = timerfd_create(CLOCK_REALTIME, TFD_CLOEXEC | TFD_NONBLOCK);
    if (s->tfd < 0) {
        rc = -errno;
        goto out_fail;
    }
    s->efd = eventfd(0, EFD_CLOEXEC | EFD_NONBLOCK);
    if (s->efd < 0) {
        rc = -errno;
        goto out_fail;
    }
    rc = -pthread_create(&s->timer_th, NULL, timer_main, s);
    if (rc != 0)
        goto out_fail;
    s->timer_started = true;
    *out = s;
    return 0;

out_fail:
    EJ_LOG(EJ_LOG_ERROR, MOD, rc, "cannot create the scheduler");
    if (s->tfd >= 0)
        close(s->tfd);
    if (s->efd >= 0)
        close(s->efd);
    pthread_cond_destroy(&s->work_cv);
    pthread_cond_destroy(&s->done_cv);
    ej__mutex_destroy(&s->mu);
    free(s);
    return rc;
}

void ej__sched_destroy(ej__sched *s)
{
    if (s == NULL)
        return;
    ej__mutex_lock(&s->mu);
    s->timer_stop = true;
    wake_timer(s);
    ej__mutex_unlock(&s->mu);
    if (s->timer_started)
        pthread_join(s->timer_th, NULL);

    ej__mutex_lock(&s->mu);
    while (s->jobs) {
        ej__sched_job *j = s->jobs;
        ej__mutex_unlock(&s->mu);
        ej__sched_job_destroy(j);
        ej__mutex_lock(&s->mu);
        /* ej__sched_job_destroy returns once the job is freed (or, when
         * called from its own task, which we are not, deferred). */
    }
    s->closing = true;
    pthread_cond_broadcast(&s->work_cv);
    while (s->threads > 0 || has_runnable(s)) {
        if (has_runnable(s) && s->threads == 0)
            spawn_worker(s); /* posted control tasks still queued */
        if (s->threads == 0) {
            /* Cannot start a thread: run what is left here. */
            struct task *ct = s->chead;
            if (ct) {
                ctl_unlink(s, ct);
                worker_run_one(s, ct, NULL);
            }
            continue;
        }
        ej__mutex_wait(&s->mu, &s->done_cv);
    }
    join_zombies_locked(s);
    ej__mutex_unlock(&s->mu);

    close(s->tfd);
    close(s->efd);
    free(s->heap);
    pthread_cond_destroy(&s->work_cv);
    pthread_cond_destroy(&s->done_cv);
    ej__mutex_destroy(&s->mu);
    free(s);
}

static pthread_once_t default_once = PTHREAD_ONCE_INIT;
static ej__sched *default_sched;

static void default_init(void)
{
    if (ej__sched_create(NULL, &default_sched) != 0)
        default_sched = NULL;
}

ej__sched *ej__sched_default(void)
{
    pthread_once(&default_once, default_init);
    return default_sched;
}

/* ----------------------------------------------------------------- jobs */

int ej__sched_job_create(ej__sched *s, const char *name, int concurrency, ej__sched_job **out)
{
    if (s == NULL || name == NULL || out == NULL)
        return EJ_EINVAL;
    ej__sched_job *j = calloc(1, sizeof *j);
    if (j == NULL)
        return EJ_ENOMEM;
    j->name = strdup(name);
    if (j->name == NULL) {
        free(j);
        return EJ_ENOMEM;
    }
    j->s = s;
    j->limit = concurrency < 1 ? 1 : concurrency;
    cond_init_mono(&j->cv);
    ej__mutex_lock(&s->mu);
    if (s->closing || s->timer_stop) {
        ej__mutex_unlock(&s->mu);
        pthread_cond_destroy(&j->cv);
        free(j->name);
        free(j);
        return EJ_ECLOSED;
    }
    j->next = s->jobs;
    if (s->jobs)
        s->jobs->prev = j;
    s->jobs = j;
    s->njobs++;
    ej__mutex_unlock(&s->mu);
    *out = j;
    return 0;
}

void ej__sched_job_set_concurrency(ej__sched_job *j, int concurrency)
{
    if (j == NULL)
        return;
    ej__sched *s = j->s;
    ej__mutex_lock(&s->mu);
    j->limit = concurrency < 1 ? 1 : concurrency;
    ready_push(s, j);
    wake_worker(s);
    pthread_cond_broadcast(&j->cv);
    ej__mutex_unlock(&s->mu);
}

ej__sched *ej__sched_job_scheduler(const ej__sched_job *j)
{
    return j ? j->s : NULL;
}

static void trigger_remove_locked(ej__sched *s, ej__trigger *t);

void ej__sched_job_destroy(ej__sched_job *j)
{
    if (j == NULL)
        return;
    ej__sched *s = j->s;
    ej__mutex_lock(&s->mu);
    if (j->dead) {
        ej__mutex_unlock(&s->mu);
        return;
    }
    j->dead = true;
    /* Hold the job while we work on it: removing its last trigger would
     * otherwise free it under us. */
    j->destroy_waiters++;
    /* Removing may wait and drop the lock: restart from the head each
     * time, skipping triggers already removed. */
    for (;;) {
        ej__trigger *t = j->triggers;
        while (t && t->removed)
            t = t->jnext;
        if (t == NULL)
            break;
        trigger_remove_locked(s, t);
    }
    bool self = (tls.job == j) || (tls.trigger && tls.trigger->job == j);
    if (!self) {
        while (!job_idle(j)) {
            /* Queued tasks of the job are ours to run if no thread can. */
            if (j->qhead && j->running < j->limit) {
                struct task *t = job_pop(s, j);
                ready_remove(s, j);
                j->running++;
                run_job_task(s, j, t);
                continue;
            }
            ej__mutex_wait(&s->mu, &s->done_cv);
        }
    }
    j->destroy_waiters--;
    job_maybe_free(j);
    ej__mutex_unlock(&s->mu);
}

/* ------------------------------------------------------------- triggers */

static int trigger_new(ej__sched_job *j, ej__fire_fn fn, void *arg, ej__trigger **out)
{
    ej__trigger *t = calloc(1, sizeof *t);
    if (t == NULL)
        return EJ_ENOMEM;
    t->s = j->s;
    t->job = j;
    t->fn = fn;
    t->arg = arg;
    t->heap_idx = -1;
    *out = t;
    return 0;
}

static void trigger_link(ej__sched *s, ej__sched_job *j, ej__trigger *t)
{
    t->jnext = j->triggers;
    if (j->triggers)
        j->triggers->jprev = t;
    j->triggers = t;
    j->ntriggers++;
    s->ntriggers++;
}

int ej__sched_cron_add(ej__sched_job *j, ej_cron *cron, const ej_tz *tz, bool paused,
                       ej__fire_fn fn, void *arg, ej__trigger **out)
{
    if (j == NULL || cron == NULL || fn == NULL || out == NULL)
        return EJ_EINVAL;
    ej__sched *s = j->s;
    int64_t now = sched_now(s);
    int64_t next;
    int rc = ej_cron_next(cron, tz, now, &next);
    if (rc != 0)
        return rc == EJ_ENOTFOUND ? EJ_ENOTFOUND : EJ_EINVAL;
    ej__trigger *t;
    rc = trigger_new(j, fn, arg, &t);
    if (rc != 0)
        return rc;
    t->cron = cron;
    t->tz = tz;
    ej__mutex_lock(&s->mu);
    if (j->dead || s->timer_stop) {
        ej__mutex_unlock(&s->mu);
        free(t);
        return EJ_ECLOSED;
    }
    if (paused) {
        t->paused = true;
        t->paused_next = 0; /* nothing to report for a trigger born paused */
    } else if ((rc = heap_push(s, t, next)) != 0) {
        ej__mutex_unlock(&s->mu);
        free(t);
        return rc;
    }
    trigger_link(s, j, t);
    ej__mutex_unlock(&s->mu);
    *out = t;
    return 0;
}

int ej__sched_manual_add(ej__sched_job *j, ej__fire_fn fn, void *arg, ej__trigger **out)
{
    if (j == NULL || fn == NULL || out == NULL)
        return EJ_EINVAL;
    ej__sched *s = j->s;
    ej__trigger *t;
    int rc = trigger_new(j, fn, arg, &t);
    if (rc != 0)
        return rc;
    ej__mutex_lock(&s->mu);
    if (j->dead || s->timer_stop) {
        ej__mutex_unlock(&s->mu);
        free(t);
        return EJ_ECLOSED;
    }
    trigger_link(s, j, t);
    ej__mutex_unlock(&s->mu);
    *out = t;
    return 0;
}

int ej__sched_trigger_reschedule(ej__trigger *t, ej_cron *cron, const ej_tz *tz)
{
    if (t == NULL || cron == NULL)
        return EJ_EINVAL;
    ej__sched *s = t->s;
    int64_t now = sched_now(s);
    int64_t next;
    int rc = ej_cron_next(cron, tz, now, &next);
    if (rc != 0)
        return rc == EJ_ENOTFOUND ? EJ_ENOTFOUND : EJ_EINVAL;
    ej__mutex_lock(&s->mu);
    if (t->removed) {
        ej__mutex_unlock(&s->mu);
        return EJ_ECLOSED;
    }
    /* In a timer batch the timer computes with the old expression outside
     * the lock: retire it, the timer frees it and recomputes from the new
     * one. */
    if (t->in_batch && t->retired_cron == NULL) {
        t->retired_cron = t->cron;
    } else {
        ej_cron_free(t->cron);
    }
    t->cron = cron;
    t->tz = tz;
    if (t->paused) {
        t->paused_next = 0; /* the old schedule's missed times no longer apply */
    } else if (t->in_batch) {
        /* The timer re-arms it from the new cron. Make it count from now. */
        t->deadline = now;
    } else if (t->heap_idx >= 0) {
        heap_update(s, t, next);
    } else {
        rc = heap_push(s, t, next);
    }
    ej__mutex_unlock(&s->mu);
    return rc;
}

/* Counts the cron fire times that passed while t was paused, up to now
 * (reason paused), and forgets them (paused_next 0). Returns the first
 * one after now, or 0 when none had passed. */
static int64_t settle_paused(ej__trigger *t, int64_t now)
{
    if (t->paused_next <= 0 || t->paused_next > now)
        return 0;
    add_missed(t, t->paused_next, EJ__MISS_PAUSED);
    int64_t next = count_until(t, t->paused_next, now, EJ__MISS_PAUSED);
    t->paused_next = 0;
    return next;
}

static void pause_locked(ej__sched *s, ej__trigger *t)
{
    EJ_ASSERT_HELD(&s->mu);
    if (!t->paused && !t->removed) {
        t->paused = true;
        t->paused_next = t->heap_idx >= 0 ? t->deadline : 0;
        heap_remove(s, t);
        /* A queued but unstarted cron fire is withdrawn and counted. */
        if (t->queued && t->pend.cron_due) {
            ctl_unlink(s, &t->fire_task);
            t->queued = false;
            /* The withdrawn fire times come before any collected since. */
            int64_t last = t->missed ? t->missed_last : t->pend.last_scheduled_ms;
            if (t->pend.misfired) {
                for (int r = 0; r < EJ__MISS_REASONS; r++)
                    count_missed(t, t->pend.missed_by[r], (ej__miss_reason)r);
            } else {
                count_missed(t, t->pend.missed_count, EJ__MISS_PAUSED);
            }
            t->missed_first = t->pend.scheduled_ms;
            t->missed_last = last;
            t->now_pending |= t->pend.now_reasons;
            if (t->pend.now_reasons && t->now_first == 0)
                t->now_first = t->pend.scheduled_ms;
            trigger_flush(s, t, sched_now(s)); /* delivers fire-now requests only */
        }
    }
}

void ej__sched_trigger_pause(ej__trigger *t)
{
    if (t == NULL)
        return;
    ej__sched *s = t->s;
    ej__mutex_lock(&s->mu);
    pause_locked(s, t);
    ej__mutex_unlock(&s->mu);
}

void ej__sched_trigger_retire(ej__trigger *t)
{
    if (t == NULL)
        return;
    ej__sched *s = t->s;
    ej__mutex_lock(&s->mu);
    pause_locked(s, t);
    /* The fire times missed while it was paused before stay counted (the
     * remove tells them); from now on none is due. */
    if (t->cron && t->paused && !t->removed && !t->in_batch)
        settle_paused(t, sched_now(s));
    t->paused_next = 0;
    ej__mutex_unlock(&s->mu);
}

void ej__sched_trigger_resume(ej__trigger *t)
{
    if (t == NULL)
        return;
    ej__sched *s = t->s;
    ej__mutex_lock(&s->mu);
    if (t->paused && !t->removed) {
        t->paused = false;
        if (t->cron && !t->in_batch) {
            int64_t now = sched_now(s);
            int64_t next;
            if (t->paused_next > 0 && t->paused_next <= now) {
                next = settle_paused(t, now);
            } else if (t->paused_next > 0) {
                next = t->paused_next;
            } else if (ej_cron_next(t->cron, t->tz, now, &next) != 0) {
                next = 0;
            }
            if (next > 0 && heap_push(s, t, next) != 0)
                EJ_LOG(EJ_LOG_ERROR, MOD, EJ_ENOMEM, "job '%s': cannot resume its trigger",
                       t->job->name);
            t->paused_next = 0;
            trigger_flush(s, t, now);
        }
    }
    ej__mutex_unlock(&s->mu);
}

void ej__sched_trigger_set_miss_fn(ej__trigger *t, ej__miss_fn fn)
{
    if (t == NULL)
        return;
    ej__mutex_lock(&t->s->mu);
    t->miss_fn = fn;
    ej__mutex_unlock(&t->s->mu);
}

bool ej__sched_trigger_is_paused(const ej__trigger *t)
{
    if (t == NULL)
        return false;
    ej__mutex_lock(&t->s->mu);
    bool p = t->paused;
    ej__mutex_unlock(&t->s->mu);
    return p;
}

int ej__sched_trigger_fire_now(ej__trigger *t, unsigned reasons)
{
    if (t == NULL || reasons == 0)
        return EJ_EINVAL;
    ej__sched *s = t->s;
    ej__mutex_lock(&s->mu);
    if (t->removed || s->timer_stop) {
        ej__mutex_unlock(&s->mu);
        return EJ_ECLOSED;
    }
    int64_t now = sched_now(s);
    if (t->queued) {
        /* Not started yet: ride along. */
        t->pend.now_reasons |= reasons;
    } else {
        if (t->now_first == 0)
            t->now_first = now;
        t->now_pending |= reasons;
        trigger_flush(s, t, now);
    }
    ej__mutex_unlock(&s->mu);
    return 0;
}

int64_t ej__sched_trigger_next(const ej__trigger *t)
{
    if (t == NULL)
        return 0;
    ej__mutex_lock(&t->s->mu);
    int64_t n = (t->heap_idx >= 0 && !t->paused) ? t->deadline : 0;
    ej__mutex_unlock(&t->s->mu);
    return n;
}

bool ej__sched_trigger_is_busy(const ej__trigger *t)
{
    if (t == NULL)
        return false;
    ej__mutex_lock(&t->s->mu);
    bool b = t->queued || t->running;
    ej__mutex_unlock(&t->s->mu);
    return b;
}

/*
 * The cron fire times a trigger being removed will never deliver: a queued
 * cron fire that has not started (counted as queued, or under its misfire
 * reasons), those collected behind a running or paused callback, and those
 * passed since a pause. Taken out of t into out[] (one entry per reason) and
 * added to the scheduler's stats, for the remover to tell the miss hook.
 * With s->mu held (checked); t->removed set. Returns how many entries.
 */
static size_t take_undelivered(ej__sched *s, ej__trigger *t, ej__miss *out)
{
    EJ_ASSERT_HELD(&s->mu);
    if (t->queued && t->pend.cron_due) {
        int64_t last = t->missed ? t->missed_last : t->pend.last_scheduled_ms;
        if (t->pend.misfired) {
            for (int r = 0; r < EJ__MISS_REASONS; r++)
                count_missed(t, t->pend.missed_by[r], (ej__miss_reason)r);
        } else {
            count_missed(t, t->pend.missed_count, EJ__MISS_QUEUED);
        }
        t->missed_first = t->pend.scheduled_ms;
        t->missed_last = last;
    }
    /* Not while the timer computes the next time with t->cron (in_batch):
     * a paused trigger is never in a batch. */
    if (t->cron && t->paused && !t->in_batch)
        settle_paused(t, sched_now(s));
    size_t n = 0;
    for (int r = 0; r < EJ__MISS_REASONS; r++) {
        if (t->missed_by[r] == 0)
            continue;
        s->missed_by[r] += t->missed_by[r];
        out[n++] = (ej__miss){.trigger = t,
                              .reason = (ej__miss_reason)r,
                              .count = t->missed_by[r],
                              .first_ms = t->missed_first,
                              .last_ms = t->missed_last};
    }
    memset(t->missed_by, 0, sizeof t->missed_by);
    t->missed = 0;
    return n;
}

static void trigger_remove_locked(ej__sched *s, ej__trigger *t)
{
    if (t->removed)
        return;
    t->removed = true;
    heap_remove(s, t);
    ej__miss miss[EJ__MISS_REASONS];
    size_t nmiss = t->miss_fn ? take_undelivered(s, t, miss) : 0;
    if (t->queued) {
        ctl_unlink(s, &t->fire_task);
        t->queued = false;
    }
    if (nmiss > 0) {
        /* Told without the lock, as every hook; the wait count keeps t. */
        ej__miss_fn fn = t->miss_fn;
        void *arg = t->arg;
        t->remover_waiting++;
        ej__mutex_unlock(&s->mu);
        for (size_t i = 0; i < nmiss; i++)
            fn(&miss[i], arg);
        ej__mutex_lock(&s->mu);
        t->remover_waiting--;
    }
    if (t->running && !pthread_equal(t->running_thread, pthread_self())) {
        t->remover_waiting++;
        while (t->running)
            ej__mutex_wait(&s->mu, &s->done_cv);
        t->remover_waiting--;
    }
    trigger_maybe_free(t);
}

void ej__sched_trigger_remove(ej__trigger *t)
{
    if (t == NULL)
        return;
    ej__sched *s = t->s;
    ej__mutex_lock(&s->mu);
    trigger_remove_locked(s, t);
    ej__mutex_unlock(&s->mu);
}

/* ---------------------------------------------------------------- tasks */

int ej__sched_run_all(ej__sched_job *j, ej__task_fn fn, void *const *args, size_t n)
{
    if (j == NULL || fn == NULL || (args == NULL && n > 0))
        return EJ_EINVAL;
    if (n == 0)
        return 0;
    ej__sched *s = j->s;
    struct group g = {.remaining = n};
    struct task *tasks = calloc(n, sizeof *tasks);
    if (tasks == NULL) {
        /* No memory to queue: run them here, one after another. */
        for (size_t i = 0; i < n; i++)
            fn(args[i]);
        return 0;
    }
    size_t inline_from = n;
    ej__mutex_lock(&s->mu);
    bool lent = tls.job == j && tls.holds_slot;
    if (lent) {
        j->running--;
        tls.holds_slot = false;
    }
    for (size_t i = 0; i < n; i++) {
        if (s->nqueued >= s->max_queued) {
            inline_from = i;
            g.remaining -= n - i;
            EJ_LOG(EJ_LOG_WARN, MOD, EJ_EBUSY,
                   "job '%s': pool queue full (%zu tasks); running %zu item(s) inline", j->name,
                   s->nqueued, n - i);
            break;
        }
        tasks[i].fn = fn;
        tasks[i].arg = args[i];
        tasks[i].group = &g;
        job_push(s, j, &tasks[i], false);
    }
    wake_worker(s);
    while (g.remaining > 0) {
        if (j->qhead && j->running < j->limit) {
            struct task *t = job_pop(s, j);
            j->running++;
            ready_remove(s, j);
            ready_push(s, j);
            run_job_task(s, j, t);
            continue;
        }
        ej__mutex_wait(&s->mu, &j->cv);
    }
    ej__mutex_unlock(&s->mu);
    /* Tasks the queue could not take run here, after the rest. */
    for (size_t i = inline_from; i < n; i++)
        fn(args[i]);
    ej__mutex_lock(&s->mu);
    if (lent) {
        j->running++;
        tls.holds_slot = true;
    }
    ej__mutex_unlock(&s->mu);
    free(tasks);
    return 0;
}

static int post_task(ej__sched *s, ej__sched_job *j, ej__task_fn fn, void *arg, bool first)
{
    if (fn == NULL || (s == NULL && j == NULL))
        return EJ_EINVAL;
    if (j)
        s = j->s;
    struct task *t = calloc(1, sizeof *t);
    if (t == NULL)
        return EJ_ENOMEM;
    t->fn = fn;
    t->arg = arg;
    ej__mutex_lock(&s->mu);
    int rc = 0;
    if (s->closing || (j && j->dead)) {
        rc = EJ_ECLOSED;
    } else if (s->nqueued >= s->max_queued) {
        rc = EJ_EBUSY;
        EJ_LOG(EJ_LOG_ERROR, MOD, rc, "pool queue full (%zu tasks): task refused", s->nqueued);
    } else if (j) {
        job_push(s, j, t, first);
        wake_worker(s);
        pthread_cond_broadcast(&j->cv);
    } else {
        ctl_push(s, t);
        wake_worker(s);
    }
    ej__mutex_unlock(&s->mu);
    if (rc != 0)
        free(t);
    return rc;
}

int ej__sched_post(ej__sched *s, ej__sched_job *j, ej__task_fn fn, void *arg)
{
    return post_task(s, j, fn, arg, false);
}

int ej__sched_post_first(ej__sched_job *j, ej__task_fn fn, void *arg)
{
    return j == NULL ? EJ_EINVAL : post_task(NULL, j, fn, arg, true);
}

/* ----------------------------------------------------------- inspection */

void ej__sched_get_stats(ej__sched *s, struct ej__sched_stats *out)
{
    memset(out, 0, sizeof *out);
    if (s == NULL)
        return;
    ej__mutex_lock(&s->mu);
    out->threads = s->threads;
    out->idle_threads = s->idle;
    out->queued = s->nqueued;
    out->triggers = s->ntriggers;
    out->jobs = s->njobs;
    out->fires = s->fires;
    out->misfires = s->misfires;
    memcpy(out->missed_by, s->missed_by, sizeof out->missed_by);
    out->clock_jumps = s->clock_jumps;
    ej__mutex_unlock(&s->mu);
}

void ej__sched_debug_stall_timer(ej__sched *s, int64_t ms)
{
    if (s == NULL)
        return;
    ej__mutex_lock(&s->mu);
    s->stall_ms = ms;
    wake_timer(s);
    ej__mutex_unlock(&s->mu);
}

void ej__sched_debug_shift_clock(ej__sched *s, int64_t ms)
{
    if (s == NULL)
        return;
    ej__mutex_lock(&s->mu);
    atomic_fetch_add(&s->debug_shift_ms, ms);
    s->clock_set = true; /* what a timerfd cancellation reports */
    wake_timer(s);
    ej__mutex_unlock(&s->mu);
}
