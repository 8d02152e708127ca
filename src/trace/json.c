/* Execution history as JSON and text (see json.h). */
#include "trace/json.h"

#include <stdbool.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

/* "90s", "30m", "2h", "7d", "1w": milliseconds, or -1. */
static int64_t parse_duration(const char *s)
{
    char *end = NULL;
    long long n = strtoll(s, &end, 10);
    if (end == s || n < 0 || end[0] == '\0' || end[1] != '\0')
        return -1;
    switch (end[0]) {
    case 's':
        return n * 1000;
    case 'm':
        return n * 60 * 1000;
    case 'h':
        return n * 3600 * 1000;
    case 'd':
        return n * 86400 * 1000;
    case 'w':
        return n * 7 * 86400 * 1000;
    }
    return -1;
}

int64_t ej__trace_parse_when(const char *s)
{
    if (s == NULL || s[0] == '\0')
        return -1;
    int64_t d = parse_duration(s);
    if (d >= 0) {
        struct timespec ts;
        clock_gettime(CLOCK_REALTIME, &ts);
        return (int64_t)ts.tv_sec * 1000 + ts.tv_nsec / 1000000 - d;
    }
    static const char *const formats[] = {"%Y-%m-%d %H:%M:%S", "%Y-%m-%dT%H:%M:%S",
                                          "%Y-%m-%d %H:%M", "%Y-%m-%dT%H:%M", "%Y-%m-%d"};
    for (size_t i = 0; i < sizeof formats / sizeof formats[0]; i++) {
        struct tm tm;
        memset(&tm, 0, sizeof tm);
        const char *rest = strptime(s, formats[i], &tm);
        if (rest == NULL || *rest != '\0')
            continue;
        tm.tm_isdst = -1;
        time_t t = mktime(&tm);
        if (t != (time_t)-1)
            return (int64_t)t * 1000;
    }
    return -1;
}

/* Length of the well-formed UTF-8 sequence at p (lead byte 0xc2..0xf4),
 * or 0: no overlong forms, surrogates or code points over U+10FFFF, which
 * JSON encoders refuse. */
static size_t utf8_sequence(const unsigned char *p, size_t avail)
{
    unsigned char c = p[0];
    size_t k = c >= 0xf0 ? 4 : c >= 0xe0 ? 3 : 2;
    if (avail < k)
        return 0;
    unsigned char lo = 0x80, hi = 0xbf;
    if (c == 0xe0)
        lo = 0xa0;
    else if (c == 0xed)
        hi = 0x9f;
    else if (c == 0xf0)
        lo = 0x90;
    else if (c == 0xf4)
        hi = 0x8f;
    if (p[1] < lo || p[1] > hi)
        return 0;
    for (size_t j = 2; j < k; j++)
        if ((p[j] & 0xc0) != 0x80)
            return 0;
    return k;
}

void ej__trace_print_bytes(FILE *f, const unsigned char *p, size_t n, const char *indent)
{
    bool line_start = true;
    for (size_t i = 0; i < n;) {
        if (line_start)
            fputs(indent, f);
        line_start = false;
        unsigned char c = p[i];
        size_t k = 0;
        if (c >= 0xc2 && c <= 0xf4)
            k = utf8_sequence(p + i, n - i);
        if (k > 0) {
            fwrite(p + i, 1, k, f);
            i += k;
            continue;
        }
        if (c == '\n') {
            fputc('\n', f);
            line_start = true;
        } else if (c == '\t' || (c >= 0x20 && c < 0x7f)) {
            fputc(c, f);
        } else {
            fprintf(f, "\\x%02x", c);
        }
        i++;
    }
    if (!line_start)
        fputc('\n', f);
}

/* ISO 8601 with the local offset. */
static json_t *json_time(int64_t ms)
{
    if (ms <= 0)
        return json_null();
    time_t t = (time_t)(ms / 1000);
    struct tm tm;
    localtime_r(&t, &tm);
    char buf[64], zone[8];
    size_t n = strftime(buf, sizeof buf, "%Y-%m-%dT%H:%M:%S", &tm);
    strftime(zone, sizeof zone, "%z", &tm);
    snprintf(buf + n, sizeof buf - n, ".%03d%.3s:%s", (int)(ms % 1000), zone, zone + 3);
    return json_string(buf);
}

/* Bytes for JSON: a string when valid UTF-8 without NUL, else with \xNN
 * escapes as ej__trace_print_bytes writes them (and *binary set). */
static json_t *json_bytes(const unsigned char *p, size_t n, bool *binary)
{
    *binary = false;
    if (p == NULL)
        return json_null();
    json_t *s = json_stringn((const char *)p, n);
    if (s != NULL && memchr(p, '\0', n) == NULL)
        return s;
    json_decref(s);
    *binary = true;
    char *buf = NULL;
    size_t len = 0;
    FILE *f = open_memstream(&buf, &len);
    if (f == NULL)
        return json_null();
    ej__trace_print_bytes(f, p, n, "");
    fclose(f);
    if (len > 0 && buf[len - 1] == '\n' && (n == 0 || p[n - 1] != '\n'))
        len--;
    s = json_stringn(buf, len);
    free(buf);
    return s ? s : json_null();
}

/* Text the database gave back (failure causes, messages) may not be valid
 * UTF-8 when another writer put it there: escaped like output then. */
static json_t *json_text(const char *s)
{
    if (s == NULL)
        return json_null();
    bool binary;
    return json_bytes((const unsigned char *)s, strlen(s), &binary);
}

json_t *ej__trace_execution_json(const struct ej_trace_execution *e)
{
    json_t *o = json_object();
    json_object_set_new(o, "id", json_text(e->id));
    json_object_set_new(o, "job", json_text(e->job_name));
    json_object_set_new(o, "item", json_integer(e->sharding_item));
    json_object_set_new(o, "instance", json_text(e->instance_id));
    json_object_set_new(o, "ip", json_text(e->ip));
    json_object_set_new(o, "hostname", json_text(e->hostname));
    json_object_set_new(o, "taskId", json_text(e->task_id));
    json_object_set_new(o, "source", json_text(e->execution_source));
    json_object_set_new(o, "completed", json_boolean(e->completed));
    json_object_set_new(o, "success", json_boolean(e->completed && e->is_success));
    json_object_set_new(o, "result", json_text(e->result));
    json_object_set_new(o, "attempt", json_integer(e->attempt > 0 ? e->attempt : 1));
    json_object_set_new(o, "killedBy", json_text(e->killed_by));
    json_object_set_new(o, "start", json_time(e->start_ms));
    json_object_set_new(o, "complete", json_time(e->completed ? e->complete_ms : 0));
    json_object_set_new(o, "durationMs",
                        e->duration_ms >= 0 ? json_integer(e->duration_ms) : json_null());
    json_object_set_new(o, "exitCode",
                        e->has_detail && e->exit_code >= 0 ? json_integer(e->exit_code)
                                                           : json_null());
    json_object_set_new(o, "signal",
                        e->term_signal > 0 ? json_integer(e->term_signal) : json_null());
    json_object_set_new(o, "httpStatus",
                        e->http_status > 0 ? json_integer(e->http_status) : json_null());
    json_object_set_new(o, "fencingToken",
                        e->fencing_token ? json_integer(e->fencing_token) : json_null());
    json_object_set_new(o, "failureCause", json_text(e->failure_cause));
    return o;
}

json_t *ej__trace_detail_json(const struct ej_trace_execution_detail *d)
{
    const struct ej_trace_execution *e = &d->execution;
    json_t *o = ej__trace_execution_json(e);
    bool bin = false;
    json_object_set_new(o, "stdout", json_bytes(e->out, e->out_len, &bin));
    json_object_set_new(o, "stdoutBinary", json_boolean(bin));
    json_object_set_new(o, "stdoutTruncated", json_boolean(e->out_truncated));
    json_object_set_new(o, "stderr", json_bytes(e->err, e->err_len, &bin));
    json_object_set_new(o, "stderrBinary", json_boolean(bin));
    json_object_set_new(o, "stderrTruncated", json_boolean(e->err_truncated));
    json_t *trail = json_array();
    for (size_t i = 0; i < d->trail_count; i++) {
        const struct ej_trace_status *s = &d->trail[i];
        json_t *so = json_object();
        json_object_set_new(so, "time", json_time(s->creation_ms));
        json_object_set_new(so, "state", json_text(s->state));
        json_object_set_new(so, "shardingItem", json_text(s->sharding_item));
        json_object_set_new(so, "slaveId", json_text(s->slave_id));
        json_object_set_new(so, "message", json_text(s->message));
        json_array_append_new(trail, so);
    }
    json_object_set_new(o, "statusTrail", trail);
    return o;
}

/* ---------------------------------------------------------- fire ledger */

/* The reasons of docs/execution.md (the scheduler's and the fire flow's)
 * and "missed", in words. */
static const struct {
    const char *reason, *text;
} fire_reasons[] = {
    {"missed", "no live instance owned the item: every instance was down, or its owner had died "
               "and its session had not expired yet"},
    {"fenced", "the instance was cut off from ZooKeeper (or its session changed)"},
    {"before-registration", "the fire was due before the instance (re)registered"},
    {"leader-wait", "the leader did not reshard in time"},
    {"sharding-failed", "resharding failed"},
    {"time-diff", "the instance's clock differs from ZooKeeper's"},
    {"disabled", "the server is disabled"},
    {"stopped", "the job was stopping, or was stopped by an operator"},
    {"running", "its previous run was still going"},
    {"start-failed", "the start of its items could not be written to ZooKeeper"},
    {"queued", "the fire waited for a pool thread"},
    {"paused", "the instance was disconnected from ZooKeeper, its trigger paused"},
    {"timer-late", "the instance's timer woke late"},
    {"clock-step", "the instance's clock was stepped"},
    {"late-start", "the fire started too late"},
    {"deadline", "the fire could not start within the job's startingDeadlineSeconds"},
    {"overlap", "the job's items still ran here (overlapPolicy SKIP)"},
    {"failover-lost", "its instance died running it, and what it ran could not be read or "
                      "recorded for failover in time"},
};

const char *ej__trace_fire_reason_text(const char *reason)
{
    for (size_t i = 0; i < sizeof fire_reasons / sizeof fire_reasons[0]; i++)
        if (strcmp(fire_reasons[i].reason, reason) == 0)
            return fire_reasons[i].text;
    return "not run";
}

json_t *ej__trace_fire_json(const struct ej_trace_fire *f)
{
    json_t *o = json_object();
    bool ran = strcmp(f->outcome, EJ_FIRE_RAN) == 0;
    json_object_set_new(o, "job", json_text(f->job_name));
    json_object_set_new(o, "fireTimeMs", json_integer(f->fire_time_ms));
    json_object_set_new(o, "fireTime", json_time(f->fire_time_ms));
    json_object_set_new(o, "item", json_integer(f->sharding_item));
    json_object_set_new(o, "kind", json_text(f->kind));
    json_object_set_new(o, "ran", json_boolean(ran));
    json_object_set_new(o, "result", ran ? json_text(f->result) : json_null());
    json_object_set_new(o, "attempts",
                        ran && f->attempts > 0 ? json_integer(f->attempts) : json_null());
    json_object_set_new(o, "reason", ran ? json_null() : json_text(f->outcome));
    json_object_set_new(o, "why",
                        ran ? json_null() : json_text(ej__trace_fire_reason_text(f->outcome)));
    json_object_set_new(o, "instance", json_text(f->instance_id));
    json_object_set_new(o, "executionId",
                        f->execution_id[0] ? json_text(f->execution_id) : json_null());
    json_object_set_new(o, "recorded", json_time(f->recorded_ms));
    return o;
}

/* Bytes at the end of p[0..n) that begin a UTF-8 sequence not complete
 * yet (0 to 3): a live reader gets them with the next piece. */
static size_t partial_utf8_tail(const unsigned char *p, size_t n)
{
    for (size_t k = 1; k <= 3 && k <= n; k++) {
        unsigned char c = p[n - k];
        if ((c & 0xc0) == 0x80)
            continue; /* a continuation byte: look further back */
        size_t need = (c & 0xe0) == 0xc0 ? 2 : (c & 0xf0) == 0xe0 ? 3 : (c & 0xf8) == 0xf0 ? 4 : 1;
        return need > k ? k : 0;
    }
    return 0;
}

json_t *ej__trace_output_json(const char *id, const struct ej_trace_output *o)
{
    json_t *j = json_pack("{s:s,s:b,s:b}", "id", id, "completed", o->completed, "success",
                          o->completed && o->is_success);
    const unsigned char *data[2] = {o->out, o->err};
    const size_t len[2] = {o->out_len, o->err_len};
    const int64_t next[2] = {o->out_next, o->err_next};
    const bool cut[2] = {o->out_truncated, o->err_truncated};
    static const char *const names[2][4] = {
        {"stdout", "stdoutBinary", "outNext", "stdoutTruncated"},
        {"stderr", "stderrBinary", "errNext", "stderrTruncated"}};
    for (int s = 0; s < 2; s++) {
        size_t keep = len[s];
        if (!o->completed && data[s] != NULL)
            keep -= partial_utf8_tail(data[s], len[s]);
        bool bin = false;
        json_object_set_new(j, names[s][0],
                            data[s] ? json_bytes(data[s], keep, &bin) : json_string(""));
        json_object_set_new(j, names[s][1], json_boolean(bin));
        json_object_set_new(j, names[s][2], json_integer(next[s] - (json_int_t)(len[s] - keep)));
        json_object_set_new(j, names[s][3], json_boolean(cut[s]));
    }
    return j;
}
