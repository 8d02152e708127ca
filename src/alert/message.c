/*
 * What an alert says, and how each channel wants it: the webhook's own
 * JSON (docs/alerts.md, schema EJ_ALERT_SCHEMA_VERSION), the incoming-
 * webhook JSON of Slack, DingTalk, WeCom and Feishu, and an e-mail.
 */
#include <jansson.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "alert/internal.h"
#include "common/util.h"

/* Length of the valid UTF-8 sequence at p (n bytes left), or 0. */
static size_t utf8_len(const unsigned char *p, size_t n)
{
    size_t want = p[0] < 0x80             ? 1
                  : (p[0] & 0xE0) == 0xC0 ? 2
                  : (p[0] & 0xF0) == 0xE0 ? 3
                  : (p[0] & 0xF8) == 0xF0 ? 4
                                          : 0;
    if (want == 0 || want > n || (want == 2 && p[0] < 0xC2))
        return 0;
    for (size_t i = 1; i < want; i++)
        if ((p[i] & 0xC0) != 0x80)
            return 0;
    return want;
}

/* text as valid UTF-8 without control characters but newline and tab. */
static void put_clean(ej_buf *b, const char *text, size_t len)
{
    const unsigned char *p = (const unsigned char *)text;
    for (size_t i = 0; i < len;) {
        size_t k = utf8_len(p + i, len - i);
        if (k == 0 || (k == 1 && p[i] < 0x20 && p[i] != '\n' && p[i] != '\t') || p[i] == 0x7f) {
            ej__buf_append(b, "?", 1);
            i += k ? k : 1;
            continue;
        }
        ej__buf_append(b, (const char *)p + i, k);
        i += k;
    }
}

char *ej__alert_tail(const char *text, size_t len)
{
    if (text == NULL)
        return NULL;
    if (len == 0)
        len = strlen(text);
    while (len > 0 && (text[len - 1] == '\n' || text[len - 1] == '\r'))
        len--;
    if (len == 0)
        return NULL;
    size_t start = len, lines = 0;
    while (start > 0 && len - start < EJ_ALERT_STDERR_BYTES) {
        if (text[start - 1] == '\n' && ++lines == EJ_ALERT_STDERR_LINES)
            break;
        start--;
    }
    /* Do not begin inside a UTF-8 sequence. */
    while (start < len && ((unsigned char)text[start] & 0xC0) == 0x80)
        start++;
    ej_buf b;
    ej__buf_init(&b);
    ej__buf_append(&b, "", 0);
    put_clean(&b, text + start, len - start);
    if (b.failed) {
        ej__buf_fini(&b);
        return NULL;
    }
    return ej__buf_steal(&b);
}

static const char *result_word(const struct ej__alert_msg *m)
{
    return ej_alert_kind_name(m->kind);
}

char *ej__alert_subject(const struct ej__alert_msg *m)
{
    ej_buf b;
    ej__buf_init(&b);
    ej__buf_puts(&b, "[ejob] ");
    ej__buf_puts(&b, result_word(m));
    ej__buf_puts(&b, ": job ");
    put_clean(&b, m->job, strlen(m->job));
    if (m->item >= 0)
        ej__buf_printf(&b, " item %d", m->item);
    if (m->kind == EJ_ALERT_NOT_RUN || m->kind == EJ_ALERT_MISSED) {
        ej__buf_printf(&b, " (%u fire time%s", m->fire_count, m->fire_count == 1 ? "" : "s");
        if (m->reason != NULL) {
            ej__buf_puts(&b, ": ");
            put_clean(&b, m->reason, strlen(m->reason));
        }
        ej__buf_puts(&b, ")");
    }
    /* A subject is one line. */
    for (size_t i = 0; i < b.len; i++)
        if (b.data[i] == '\n' || b.data[i] == '\t')
            b.data[i] = ' ';
    if (b.failed) {
        ej__buf_fini(&b);
        return NULL;
    }
    return ej__buf_steal(&b);
}

static void line(ej_buf *b, const char *label, const char *value)
{
    if (value == NULL)
        return;
    ej__buf_printf(b, "%-18s ", label);
    put_clean(b, value, strlen(value));
    ej__buf_puts(b, "\n");
}

char *ej__alert_text(const struct ej__alert_msg *m)
{
    ej_buf b;
    char num[64];
    ej__buf_init(&b);
    if (m->kind == EJ_ALERT_TEST)
        ej__buf_puts(&b,
                     "A test message of ejob's alerts (ejob alerts test): this channel works.\n");
    line(&b, "Job:", m->job);
    if (m->item >= 0) {
        snprintf(num, sizeof num, "%d", m->item);
        line(&b, "Item:", num);
    } else if (m->kind != EJ_ALERT_TEST) {
        line(&b, "Item:", "the whole fire");
    }
    if (m->fire_time != NULL) {
        char *t = ej__asprintf("%s (%s)%s", m->fire_time, m->time_zone ? m->time_zone : "UTC",
                               m->fire_count > 1 ? " (the first)" : "");
        line(&b, "Fire time:", t);
        free(t);
    }
    if (m->fire_count > 1) {
        snprintf(num, sizeof num, "%u", m->fire_count);
        line(&b, "Fire times:", num);
    }
    line(&b, "Instance:", m->instance);
    line(&b, "Result:", result_word(m));
    line(&b, m->kind == EJ_ALERT_NOT_RUN || m->kind == EJ_ALERT_MISSED ? "Reason:" : "Cause:",
         m->reason);
    if (m->has_exit_code) {
        if (m->term_signal > 0)
            snprintf(num, sizeof num, "killed by signal %d", m->term_signal);
        else
            snprintf(num, sizeof num, "%d", m->exit_code);
        line(&b, "Exit code:", num);
    }
    if (m->http_status > 0) {
        snprintf(num, sizeof num, "%ld", m->http_status);
        line(&b, "HTTP status:", num);
    }
    if (m->consecutive > 1) {
        snprintf(num, sizeof num, "%d", m->consecutive);
        line(&b, "Failures in a row:", num);
    }
    if (m->suppressed > 0)
        ej__buf_printf(&b,
                       "%-18s %llu more %s message(s) of this job and rule since the last one "
                       "(alerts.throttleSeconds)\n",
                       "Held back:", (unsigned long long)m->suppressed, result_word(m));
    if (m->stderr_tail != NULL) {
        ej__buf_puts(&b, "Last lines of stderr:\n");
        const char *p = m->stderr_tail;
        while (*p) {
            const char *nl = strchr(p, '\n');
            size_t n = nl ? (size_t)(nl - p) : strlen(p);
            ej__buf_puts(&b, "  | ");
            ej__buf_append(&b, p, n);
            ej__buf_puts(&b, "\n");
            p += n + (nl != NULL);
        }
    }
    if (m->execution_id != NULL && m->execution_id[0] != '\0') {
        char *cmd = ej__asprintf("ejob history show %s", m->execution_id);
        line(&b, "See the run:", cmd);
        free(cmd);
    }
    if (b.failed) {
        ej__buf_fini(&b);
        return NULL;
    }
    return ej__buf_steal(&b);
}

/* A JSON string of text made valid; NULL text is JSON null. */
static json_t *jstr(const char *text)
{
    if (text == NULL)
        return json_null();
    ej_buf b;
    ej__buf_init(&b);
    ej__buf_append(&b, "", 0);
    put_clean(&b, text, strlen(text));
    json_t *j = b.failed ? NULL : json_string(b.data);
    ej__buf_fini(&b);
    return j;
}

static void iso_utc(int64_t ms, char *out, size_t len)
{
    time_t s = (time_t)(ms / 1000);
    struct tm tm;
    gmtime_r(&s, &tm);
    snprintf(out, len, "%04d-%02d-%02dT%02d:%02d:%02d.%03dZ", tm.tm_year + 1900, tm.tm_mon + 1,
             tm.tm_mday, tm.tm_hour, tm.tm_min, tm.tm_sec, (int)(ms % 1000));
}

static json_t *webhook_json(const struct ej__alert_msg *m, const char *subject, const char *text)
{
    char sent[80];
    iso_utc(m->sent_ms, sent, sizeof sent);
    char *cmd = m->execution_id != NULL && m->execution_id[0] != '\0'
                    ? ej__asprintf("ejob history show %s", m->execution_id)
                    : NULL;
    json_t *o = json_object();
    json_object_set_new(o, "version", json_integer(EJ_ALERT_SCHEMA_VERSION));
    json_object_set_new(o, "kind", json_string(ej_alert_kind_name(m->kind)));
    json_object_set_new(o, "test", json_boolean(m->kind == EJ_ALERT_TEST));
    json_object_set_new(o, "job", jstr(m->job));
    json_object_set_new(o, "item", m->item >= 0 ? json_integer(m->item) : json_null());
    json_object_set_new(o, "fireTime", jstr(m->fire_time));
    json_object_set_new(o, "fireTimeMs", m->fire_ms > 0 ? json_integer(m->fire_ms) : json_null());
    json_object_set_new(o, "timeZone", jstr(m->time_zone));
    json_object_set_new(o, "fireCount", json_integer(m->fire_count));
    json_object_set_new(o, "instance", jstr(m->instance));
    json_object_set_new(o, "reason", jstr(m->reason));
    json_object_set_new(o, "exitCode", m->has_exit_code ? json_integer(m->exit_code) : json_null());
    json_object_set_new(o, "termSignal",
                        m->has_exit_code && m->term_signal > 0 ? json_integer(m->term_signal)
                                                               : json_null());
    json_object_set_new(o, "httpStatus",
                        m->http_status > 0 ? json_integer(m->http_status) : json_null());
    json_object_set_new(o, "stderrTail", jstr(m->stderr_tail));
    json_object_set_new(o, "executionId", jstr(m->execution_id));
    json_object_set_new(o, "command", jstr(cmd));
    json_object_set_new(o, "consecutiveFailures", json_integer(m->consecutive));
    json_object_set_new(o, "rule", m->rule >= 0 ? json_integer(m->rule) : json_null());
    json_object_set_new(o, "suppressed", json_integer((json_int_t)m->suppressed));
    json_object_set_new(o, "sentAt", json_string(sent));
    json_object_set_new(o, "summary", jstr(subject));
    json_object_set_new(o, "text", jstr(text));
    free(cmd);
    return o;
}

/* {"k1": {"k2": text}} or {"k1": "msgtype", "text": {...}} shapes of the
 * chats' incoming webhooks. */
static json_t *chat_json(ej_alert_channel_type type, const char *subject, const char *text)
{
    char *all = ej__asprintf("%s\n%s", subject, text);
    json_t *o = json_object();
    if (type == EJ_ALERT_CH_SLACK) {
        json_object_set_new(o, "text", jstr(all));
    } else if (type == EJ_ALERT_CH_FEISHU) {
        json_object_set_new(o, "msg_type", json_string("text"));
        json_object_set_new(o, "content", json_pack("{s:o}", "text", jstr(all)));
    } else { /* DingTalk and WeCom take the same text message */
        json_object_set_new(o, "msgtype", json_string("text"));
        json_object_set_new(o, "text", json_pack("{s:o}", "content", jstr(all)));
    }
    free(all);
    return o;
}

/* An RFC 5322 message, lines ending in CRLF. */
static char *email(const struct ej__alert_msg *m, const char *subject, const char *text,
                   const char *from, char *const *to, size_t to_count)
{
    char date[64];
    time_t s = (time_t)(m->sent_ms / 1000);
    struct tm tm;
    gmtime_r(&s, &tm);
    strftime(date, sizeof date, "%a, %d %b %Y %H:%M:%S +0000", &tm);
    ej_buf b;
    ej__buf_init(&b);
    ej__buf_printf(&b, "From: %s\r\nTo: ", from ? from : "");
    for (size_t i = 0; i < to_count; i++)
        ej__buf_printf(&b, "%s%s", i ? ", " : "", to[i]);
    ej__buf_printf(&b,
                   "\r\nSubject: %s\r\nDate: %s\r\nMIME-Version: 1.0\r\n"
                   "Content-Type: text/plain; charset=utf-8\r\n"
                   "Content-Transfer-Encoding: 8bit\r\nX-Ejob-Alert-Kind: %s\r\n\r\n",
                   subject, date, ej_alert_kind_name(m->kind));
    for (const char *p = text; *p; p++) {
        if (*p == '\n')
            ej__buf_puts(&b, "\r\n");
        else
            ej__buf_append(&b, p, 1);
    }
    if (b.failed) {
        ej__buf_fini(&b);
        return NULL;
    }
    return ej__buf_steal(&b);
}

char *ej__alert_render(ej_alert_channel_type type, const struct ej__alert_msg *m, const char *from,
                       char *const *to, size_t to_count)
{
    char *subject = ej__alert_subject(m);
    char *text = ej__alert_text(m);
    char *out = NULL;
    if (subject == NULL || text == NULL)
        goto out_free;
    if (type == EJ_ALERT_CH_EMAIL) {
        out = email(m, subject, text, from, to, to_count);
        goto out_free;
    }
    json_t *j = type == EJ_ALERT_CH_WEBHOOK ? webhook_json(m, subject, text)
                                            : chat_json(type, subject, text);
    if (j != NULL)
        out = json_dumps(j, JSON_COMPACT | JSON_ENSURE_ASCII);
    json_decref(j);
out_free:
    free(subject);
    free(text);
    return out;
}
