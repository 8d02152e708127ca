/* The asynchronous event bus and the built-in log sink. */
#include <errno.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/random.h>
#include <time.h>

#include "common/check.h"
#include "common/bqueue.h"
#include "common/util.h"
#include "ejob/error.h"
#include "ejob/event.h"
#include "ejob/log.h"

#define MOD "event"
#define DEFAULT_CAPACITY 10000
#define DEFAULT_FLUSH_MS 5000

struct sink {
    ej_event_sink_fn fn;
    void *user;
};

struct ej_event_bus {
    ej__bqueue *q; /* the events, and the thread that delivers them */
    ej__mutex mu;
    struct sink *sinks; /* under mu */
    size_t nsinks, sinks_cap;
    bool closing;       /* under mu: no new sinks */
    struct sink *snap;  /* the delivering thread's copy of the sinks */
    size_t snap_cap;
    int64_t flush_ms;
    char name[16];
};

/* ----------------------------------------------------------------- ids */

void ej_event_new_id(char out[EJ_EVENT_ID_LEN])
{
    unsigned char r[16];
    size_t got = 0;
    while (got < sizeof r) {
        ssize_t n = getrandom(r + got, sizeof r - got, 0);
        if (n > 0) {
            got += (size_t)n;
        } else if (n < 0 && errno != EINTR) {
            /* No entropy source: fall back to time and address bits. */
            struct timespec ts;
            clock_gettime(CLOCK_REALTIME, &ts);
            uint64_t x = (uint64_t)ts.tv_nsec ^ ((uint64_t)ts.tv_sec << 20) ^ (uintptr_t)out;
            for (size_t i = got; i < sizeof r; i++) {
                x ^= x << 13;
                x ^= x >> 7;
                x ^= x << 17;
                r[i] = (unsigned char)x;
            }
            got = sizeof r;
        }
    }
    r[6] = (unsigned char)((r[6] & 0x0f) | 0x40); /* version 4 */
    r[8] = (unsigned char)((r[8] & 0x3f) | 0x80); /* IETF variant */
    static const char hex[] = "0123456789abcdef";
    size_t k = 0;
    for (size_t i = 0; i < 16; i++) {
        if (i == 4 || i == 6 || i == 8 || i == 10)
            out[k++] = '-';
        out[k++] = hex[r[i] >> 4];
        out[k++] = hex[r[i] & 15];
    }
    out[k] = '\0';
}

char *ej_event_items_string(const int *items, size_t count)
{
    if (items == NULL && count > 0)
        return NULL;
    ej_buf b;
    ej__buf_init(&b);
    ej__buf_puts(&b, "[");
    for (size_t i = 0; i < count; i++)
        ej__buf_printf(&b, "%s%d", i ? ", " : "", items[i]);
    ej__buf_puts(&b, "]");
    if (b.failed) {
        ej__buf_fini(&b);
        return NULL;
    }
    return ej__buf_steal(&b);
}

const char *ej_execution_result(const ej_execution_event *e)
{
    if (e->result != NULL && e->result[0] != '\0')
        return e->result;
    return e->is_success ? EJ_RUN_SUCCESS : EJ_RUN_FAILED;
}

const char *ej_task_state_name(ej_task_state state)
{
    switch (state) {
    case EJ_TASK_STAGING:
        return "TASK_STAGING";
    case EJ_TASK_RUNNING:
        return "TASK_RUNNING";
    case EJ_TASK_FINISHED:
        return "TASK_FINISHED";
    case EJ_TASK_ERROR:
        return "TASK_ERROR";
    }
    return "TASK_UNKNOWN";
}

/* -------------------------------------------------------------- copies */

static size_t slen(const char *s)
{
    return s ? strlen(s) + 1 : 0;
}

/* Copies s into the arena at *pos; NULL stays NULL. */
static const char *put(char **pos, const char *s)
{
    if (s == NULL)
        return NULL;
    size_t n = strlen(s) + 1;
    memcpy(*pos, s, n);
    const char *r = *pos;
    *pos += n;
    return r;
}

/* Room for n bytes plus a NUL; n 0 with p set means strlen(p). */
static size_t blen(const char *p, size_t n)
{
    if (p == NULL)
        return 0;
    return (n ? n : strlen(p)) + 1;
}

/* Copies n bytes (strlen when 0) and a NUL; sets *len_out to the length. */
static const char *put_bytes(char **pos, const char *p, size_t n, size_t *len_out)
{
    if (p == NULL) {
        *len_out = 0;
        return NULL;
    }
    if (n == 0)
        n = strlen(p);
    memcpy(*pos, p, n);
    (*pos)[n] = '\0';
    const char *r = *pos;
    *pos += n + 1;
    *len_out = n;
    return r;
}

size_t ej_event_output_bytes(const ej_event *ev)
{
    if (ev != NULL && ev->type == EJ_EVENT_OUTPUT)
        return ev->u.output.data ? ev->u.output.len : 0;
    if (ev == NULL || ev->type != EJ_EVENT_EXECUTION)
        return 0;
    const ej_execution_event *e = &ev->u.execution;
    size_t a = blen(e->output, e->output_len), b = blen(e->error_output, e->error_output_len);
    return (a ? a - 1 : 0) + (b ? b - 1 : 0);
}

static bool known_type(ej_event_type t)
{
    return t == EJ_EVENT_EXECUTION || t == EJ_EVENT_STATUS || t == EJ_EVENT_FIRE ||
           t == EJ_EVENT_OUTPUT;
}

/* One allocation holding the event and all of its strings. */
static ej_event *event_copy(const ej_event *ev, bool strip)
{
    size_t extra = 0;
    if (ev->type == EJ_EVENT_EXECUTION) {
        const ej_execution_event *e = &ev->u.execution;
        extra = slen(e->job_name) + slen(e->task_id) + slen(e->hostname) + slen(e->ip) +
                slen(e->failure_cause) + slen(e->result) + slen(e->killed_by);
        if (!strip)
            extra += blen(e->output, e->output_len) + blen(e->error_output, e->error_output_len);
    } else if (ev->type == EJ_EVENT_FIRE) {
        const ej_fire_event *e = &ev->u.fire;
        extra = slen(e->job_name) + slen(e->outcome) + slen(e->kind) + slen(e->instance_id);
    } else if (ev->type == EJ_EVENT_OUTPUT) {
        const ej_output_event *e = &ev->u.output;
        extra = slen(e->job_name) + (strip || e->data == NULL ? 0 : e->len + 1);
    } else {
        const ej_status_event *e = &ev->u.status;
        extra = slen(e->job_name) + slen(e->original_task_id ? e->original_task_id : "") +
                slen(e->task_id) + slen(e->slave_id) +
                slen(e->source ? e->source : "LITE_EXECUTOR") +
                slen(e->execution_type ? e->execution_type : "READY") + slen(e->sharding_item) +
                slen(e->message);
    }
    ej_event *c = malloc(sizeof *c + extra);
    if (c == NULL)
        return NULL;
    *c = *ev;
    char *pos = (char *)(c + 1);
    if (ev->type == EJ_EVENT_EXECUTION) {
        ej_execution_event *d = &c->u.execution;
        const ej_execution_event *e = &ev->u.execution;
        d->job_name = put(&pos, e->job_name);
        d->task_id = put(&pos, e->task_id);
        d->hostname = put(&pos, e->hostname);
        d->ip = put(&pos, e->ip);
        d->failure_cause = put(&pos, e->failure_cause);
        d->result = put(&pos, e->result);
        d->killed_by = put(&pos, e->killed_by);
        if (strip) {
            /* Kept without output: say it was cut. */
            d->output_truncated = d->output_truncated || e->output != NULL;
            d->error_output_truncated = d->error_output_truncated || e->error_output != NULL;
            d->output = d->error_output = NULL;
            d->output_len = d->error_output_len = 0;
        } else {
            d->output = put_bytes(&pos, e->output, e->output_len, &d->output_len);
            d->error_output =
                put_bytes(&pos, e->error_output, e->error_output_len, &d->error_output_len);
        }
    } else if (ev->type == EJ_EVENT_FIRE) {
        ej_fire_event *d = &c->u.fire;
        const ej_fire_event *e = &ev->u.fire;
        d->job_name = put(&pos, e->job_name);
        d->outcome = put(&pos, e->outcome);
        d->kind = put(&pos, e->kind);
        d->instance_id = put(&pos, e->instance_id);
    } else if (ev->type == EJ_EVENT_OUTPUT) {
        ej_output_event *d = &c->u.output;
        const ej_output_event *e = &ev->u.output;
        d->job_name = put(&pos, e->job_name);
        if (strip || e->data == NULL) {
            d->data = NULL;
        } else {
            memcpy(pos, e->data, e->len);
            pos[e->len] = '\0';
            d->data = pos;
            pos += e->len + 1;
        }
    } else {
        ej_status_event *d = &c->u.status;
        const ej_status_event *e = &ev->u.status;
        d->job_name = put(&pos, e->job_name);
        d->original_task_id = put(&pos, e->original_task_id ? e->original_task_id : "");
        d->task_id = put(&pos, e->task_id);
        d->slave_id = put(&pos, e->slave_id);
        d->source = put(&pos, e->source ? e->source : "LITE_EXECUTOR");
        d->execution_type = put(&pos, e->execution_type ? e->execution_type : "READY");
        d->sharding_item = put(&pos, e->sharding_item);
        d->message = put(&pos, e->message);
    }
    return c;
}

ej_event *ej_event_dup(const ej_event *ev, bool without_output)
{
    if (ev == NULL || !known_type(ev->type))
        return NULL;
    return event_copy(ev, without_output);
}

/* ----------------------------------------------------------------- bus */

/* The bus's step on the queue's thread: delivers the oldest event to a
 * snapshot of the sinks (sinks may be added meanwhile), then frees it. One
 * event a step: a destroy that gives up on the queue stops the delivery
 * after the sink call in progress, not after a batch. */
static int64_t deliver_step(ej__bqueue *q, void *user)
{
    ej_event_bus *bus = user;
    ej_event *evs[1];
    size_t n = ej__bqueue_peek(q, (void **)evs, 1);
    if (n == 0)
        return -1; /* until a post wakes it */
    ej__mutex_lock(&bus->mu);
    if (bus->snap_cap < bus->nsinks) {
        struct sink *s = realloc(bus->snap, bus->nsinks * sizeof *s);
        if (s) {
            bus->snap = s;
            bus->snap_cap = bus->nsinks;
        }
    }
    size_t ns = bus->nsinks < bus->snap_cap ? bus->nsinks : bus->snap_cap;
    if (ns)
        memcpy(bus->snap, bus->sinks, ns * sizeof *bus->snap);
    ej__mutex_unlock(&bus->mu);
    for (size_t k = 0; k < n; k++)
        for (size_t i = 0; i < ns; i++)
            bus->snap[i].fn(evs[k], bus->snap[i].user);
    ej__bqueue_pop(q, n);
    return 0;
}

static void free_event(void *ev)
{
    free(ev);
}

int ej_event_bus_create(const struct ej_event_bus_opts *opts, ej_event_bus **out)
{
    if (out == NULL)
        return EJ_EINVAL;
    *out = NULL;
    ej_event_bus *bus = calloc(1, sizeof *bus);
    if (bus == NULL)
        return EJ_ENOMEM;
    bus->flush_ms = opts && opts->flush_timeout_ms > 0 ? opts->flush_timeout_ms : DEFAULT_FLUSH_MS;
    snprintf(bus->name, sizeof bus->name, "%s",
             opts && opts->name && opts->name[0] ? opts->name : "ej-events");
    ej__mutex_init(&bus->mu);
    struct ej__bqueue_opts qo = {
        .capacity = opts && opts->capacity ? opts->capacity : DEFAULT_CAPACITY,
        .thread_name = bus->name,
        .log_module = MOD,
        .what = "event",
        .drop_log_ms = 1000,
        .step = deliver_step,
        .free_item = free_event,
        .user = bus,
    };
    int rc = ej__bqueue_create(&qo, &bus->q);
    if (rc != 0) {
        ej__mutex_destroy(&bus->mu);
        free(bus);
        EJ_LOG(EJ_LOG_ERROR, MOD, rc, "cannot start the event bus thread");
        return rc;
    }
    *out = bus;
    return 0;
}

int ej_event_bus_add_sink(ej_event_bus *bus, ej_event_sink_fn fn, void *user)
{
    if (bus == NULL || fn == NULL)
        return EJ_EINVAL;
    int rc = 0;
    ej__mutex_lock(&bus->mu);
    if (bus->closing) {
        rc = EJ_ECLOSED;
    } else {
        if (bus->nsinks == bus->sinks_cap) {
            size_t cap = bus->sinks_cap ? bus->sinks_cap * 2 : 4;
            struct sink *n = realloc(bus->sinks, cap * sizeof *n);
            if (n == NULL) {
                rc = EJ_ENOMEM;
                goto out;
            }
            bus->sinks = n;
            bus->sinks_cap = cap;
        }
        bus->sinks[bus->nsinks++] = (struct sink){fn, user};
    }
out:
    ej__mutex_unlock(&bus->mu);
    return rc;
}

int ej_event_bus_post(ej_event_bus *bus, const ej_event *ev)
{
    if (bus == NULL || ev == NULL || !known_type(ev->type))
        return EJ_EINVAL;
    /* Copy before queueing: a full queue costs an allocation, never a wait. */
    ej_event *c = event_copy(ev, false);
    if (c == NULL) {
        ej__bqueue_note_drop(bus->q, "out of memory");
        return EJ_ENOMEM;
    }
    int rc = ej__bqueue_push(bus->q, c);
    if (rc != 0)
        free(c);
    return rc;
}

int ej_event_bus_post_execution(ej_event_bus *bus, const ej_execution_event *ev)
{
    if (ev == NULL)
        return EJ_EINVAL;
    ej_event e = {.type = EJ_EVENT_EXECUTION};
    e.u.execution = *ev;
    return ej_event_bus_post(bus, &e);
}

int ej_event_bus_post_status(ej_event_bus *bus, const ej_status_event *ev)
{
    if (ev == NULL)
        return EJ_EINVAL;
    ej_event e = {.type = EJ_EVENT_STATUS};
    e.u.status = *ev;
    return ej_event_bus_post(bus, &e);
}

int ej_event_bus_post_fire(ej_event_bus *bus, const ej_fire_event *ev)
{
    if (ev == NULL)
        return EJ_EINVAL;
    ej_event e = {.type = EJ_EVENT_FIRE};
    e.u.fire = *ev;
    return ej_event_bus_post(bus, &e);
}

int ej_event_bus_post_output(ej_event_bus *bus, const ej_output_event *ev)
{
    if (ev == NULL)
        return EJ_EINVAL;
    ej_event e = {.type = EJ_EVENT_OUTPUT};
    e.u.output = *ev;
    return ej_event_bus_post(bus, &e);
}

int ej_event_bus_flush(ej_event_bus *bus, int64_t timeout_ms)
{
    if (bus == NULL)
        return EJ_EINVAL;
    return ej__bqueue_flush(bus->q, timeout_ms);
}

void ej_event_bus_stats(ej_event_bus *bus, struct ej_event_bus_stats *out)
{
    if (out == NULL)
        return;
    memset(out, 0, sizeof *out);
    if (bus == NULL)
        return;
    struct ej__bqueue_stats qs;
    ej__bqueue_stats(bus->q, &qs);
    out->posted = qs.pushed;
    out->delivered = qs.done;
    out->dropped = qs.dropped;
    out->queued = qs.queued;
}

void ej_event_bus_destroy(ej_event_bus *bus)
{
    if (bus == NULL)
        return;
    ej__mutex_lock(&bus->mu);
    bus->closing = true;
    ej__mutex_unlock(&bus->mu);
    /* Waits for a sink call in progress to return. */
    size_t left = ej__bqueue_close(bus->q, bus->flush_ms);
    if (left > 0)
        EJ_LOG(EJ_LOG_WARN, MOD, EJ_ETIMEDOUT,
               "event bus: %zu event(s) still queued after %lld ms; dropped them", left,
               (long long)bus->flush_ms);
    struct ej__bqueue_stats qs;
    ej__bqueue_stats(bus->q, &qs);
    if (qs.dropped > 0)
        EJ_LOG(EJ_LOG_WARN, MOD, 0, "event bus closed: %llu delivered, %llu dropped",
               (unsigned long long)qs.done, (unsigned long long)qs.dropped);
    ej__bqueue_destroy(bus->q);
    ej__mutex_destroy(&bus->mu);
    free(bus->sinks);
    free(bus->snap);
    free(bus);
}

/* ------------------------------------------------------------ log sink */

/* The first line of s, at most 300 bytes, for a one-line log. */
static int first_line_len(const char *s)
{
    size_t n = strcspn(s, "\r\n");
    return (int)(n > 300 ? 300 : n);
}

/* One line per item run at info: its end (succeeded with duration and
 * source; failed at warn with the reason). Its start and the per-fire
 * status trace (STAGING, RUNNING, FINISHED) are debug: at a fire every
 * second they would bury everything else. TASK_ERROR (a fire not run, a
 * fire that failed) stays a warning. */
void ej_event_log_sink(const ej_event *ev, void *user)
{
    (void)user;
    if (ev == NULL)
        return;
    if (ev->type == EJ_EVENT_EXECUTION) {
        const ej_execution_event *e = &ev->u.execution;
        const char *src = ej_execution_source_name(e->execution_source);
        if (e->complete_time_ms == 0) {
            EJ_LOG(EJ_LOG_DEBUG, MOD, 0,
                   "execution %s job=%s item=%d source=%s task=%s host=%s ip=%s: started", e->id,
                   e->job_name ? e->job_name : "", e->sharding_item, src,
                   e->task_id ? e->task_id : "", e->hostname ? e->hostname : "",
                   e->ip ? e->ip : "");
        } else if (e->is_success) {
            EJ_LOG(EJ_LOG_INFO, MOD, 0,
                   "execution %s job=%s item=%d source=%s task=%s: succeeded in %lld ms", e->id,
                   e->job_name ? e->job_name : "", e->sharding_item, src,
                   e->task_id ? e->task_id : "",
                   (long long)(e->complete_time_ms - e->start_time_ms));
        } else {
            const char *cause = e->failure_cause ? e->failure_cause : "";
            EJ_LOG(
                EJ_LOG_WARN, MOD, EJ_EJOBFAILED,
                "execution %s job=%s item=%d source=%s task=%s: failed in %lld ms: %.*s", e->id,
                e->job_name ? e->job_name : "", e->sharding_item, src, e->task_id ? e->task_id : "",
                (long long)(e->complete_time_ms - e->start_time_ms), first_line_len(cause), cause);
        }
    } else if (ev->type == EJ_EVENT_STATUS) {
        const ej_status_event *e = &ev->u.status;
        const char *msg = e->message ? e->message : "";
        EJ_LOG(e->state == EJ_TASK_ERROR ? EJ_LOG_WARN : EJ_LOG_DEBUG, MOD, 0,
               "status job=%s task=%s items=%s state=%s: %.*s", e->job_name ? e->job_name : "",
               e->task_id ? e->task_id : "", e->sharding_item ? e->sharding_item : "[]",
               ej_task_state_name(e->state), first_line_len(msg), msg);
    }
}
