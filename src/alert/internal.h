/* Shared between the alert module's files. Not public. */
#ifndef EJ_ALERT_INTERNAL_H
#define EJ_ALERT_INTERNAL_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "alert/alert.h"

/* One send attempt's bound (connect plus exchange). */
#define ALERT_SEND_TIMEOUT_MS 10000

/* Everything one message says, whatever the channel (docs/alerts.md). The
 * strings are owned by whoever built it. */
struct ej__alert_msg {
    ej_alert_kind kind;
    const char *job;
    int item;              /* -1: the whole fire */
    int64_t fire_ms;       /* 0: unknown */
    const char *fire_time; /* fire_ms in the job's zone, "2026-11-27 11:00:00 +08:00" */
    const char *time_zone; /* the zone's name */
    uint32_t fire_count;
    const char *instance;
    const char *reason;
    const char *execution_id;
    bool has_exit_code;
    int exit_code;
    int term_signal;
    long http_status;
    const char *stderr_tail; /* the last lines, NUL-terminated text; NULL none */
    int consecutive;         /* failures of the item in a row (failed, timeout) */
    int rule;                /* index of the rule in the job's rules; -1 test */
    uint64_t suppressed;     /* held back by throttling since the last message */
    int64_t sent_ms;         /* when the message was made (epoch ms) */
};

/* The message's one-line summary ("[ejob] failed: job J item 0") and its
 * plain-text body. Caller frees. NULL on allocation failure. */
char *ej__alert_subject(const struct ej__alert_msg *m);
char *ej__alert_text(const struct ej__alert_msg *m);

/* The webhook body (JSON, schema EJ_ALERT_SCHEMA_VERSION), or the JSON a
 * chat's incoming webhook takes (slack, dingtalk, wecom, feishu), or for
 * e-mail the whole RFC 5322 message (headers and text). Caller frees. */
char *ej__alert_render(ej_alert_channel_type type, const struct ej__alert_msg *m, const char *from,
                       char *const *to, size_t to_count);

/* "sha256=HEX" of body keyed with key, into out (at least 72 bytes). */
void ej__alert_sign(const char *key, const char *body, size_t len, char *out, size_t outlen);

/* The outcome of one attempt. */
enum ej__alert_outcome {
    ALERT_SENT,    /* the receiver took it */
    ALERT_RETRY,   /* worth another attempt: transport error, 5xx, 429 */
    ALERT_REFUSED, /* a final no: another 4xx, a bad address */
};

/* One attempt to deliver body (from ej__alert_render) through ch; answer
 * gets what the receiver said. Blocks at most ALERT_SEND_TIMEOUT_MS. */
enum ej__alert_outcome ej__alert_deliver(const struct ej_alert_channel_config *ch, const char *body,
                                         char *answer, size_t answerlen);

/* The last lines of text (at most EJ_ALERT_STDERR_LINES lines and
 * EJ_ALERT_STDERR_BYTES bytes, NULs and invalid bytes shown as '?').
 * Caller frees; NULL when there is nothing or no memory. */
char *ej__alert_tail(const char *text, size_t len);

#endif
