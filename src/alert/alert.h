/*
 * Alerts to people (docs/alerts.md): the daemon file's alerts: section
 * turned into messages on webhooks, chats and e-mail.
 *
 * Threads. The module is one per process. Facts arrive from any thread:
 * ej_alert_event_sink on the event bus's thread (item runs that ended,
 * fires not run) and ej__alert_post from anywhere (the fire ledger's missed
 * fires). Posting copies the fact into a bounded queue and never blocks
 * beyond a short lock; a full queue drops the fact (counted, logged at most
 * every 10 s). One sender thread, "ej-alerts", owns everything else: the
 * rules, each item's consecutive failures, the throttle windows, and the
 * messages waiting to be sent, which it sends one at a time (libcurl, at
 * most ALERT_SEND_TIMEOUT_MS each) and retries with back-off. A slow or
 * dead receiver therefore delays only other alerts, never a fire.
 *
 * Once for the cluster: a fact is posted only by the instance that ran, or
 * did not run, the item, so every instance sends only its own.
 */
#ifndef EJ_ALERT_ALERT_H
#define EJ_ALERT_ALERT_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "config/daemon_file.h"

struct ej_event;

/* Version of the webhook JSON body (docs/alerts.md); raised when a field
 * changes meaning or goes away, not when one is added. */
#define EJ_ALERT_SCHEMA_VERSION 1
/* The webhook's signature header: "sha256=" and the hex HMAC-SHA256 of the
 * body, keyed with the channel's secret. */
#define EJ_ALERT_SIGNATURE_HEADER "X-Ejob-Signature"
/* Lines and bytes of stderr a message carries at most (its end). */
#define EJ_ALERT_STDERR_LINES 10
#define EJ_ALERT_STDERR_BYTES 2048

/*
 * Something that happened to a job, as the alert rules see it. Every
 * pointer is borrowed for the call and may be NULL.
 */
struct ej_alert_fact {
    ej_alert_kind kind;       /* FAILED, TIMEOUT, NOT_RUN, MISSED (RECOVERED is derived) */
    bool succeeded;           /* an item run that succeeded: kind is ignored; it resets the
                                 item's failures and may send RECOVERED */
    const char *job;          /* required */
    int item;                 /* the shard item; -1: the whole fire (not-run, missed) */
    int64_t fire_ms;          /* the fire time (epoch ms), or when the run started; 0 unknown */
    uint32_t fire_count;      /* not-run, missed: fire times it stands for (0 reads as 1) */
    const char *instance;     /* "IP@-@PID" that ran / did not run it; NULL: this process */
    const char *reason;       /* why: the failure cause, or the not-run/missed reason */
    const char *execution_id; /* the run's id, for `ejob history show ID` */
    bool has_exit_code;
    int exit_code;           /* script: exit status; -1 when killed */
    int term_signal;         /* script: the signal that ended it; 0 none */
    long http_status;        /* http: the response status; 0 none */
    const char *stderr_text; /* the run's stderr (its end is kept) */
    size_t stderr_len;       /* 0 with stderr_text set: NUL-terminated */
};

/* Counters of one channel, monotonic since ej_alert_start. */
struct ej_alert_channel_stats {
    char name[72];
    const char *type; /* "webhook", ... (static) */
    uint64_t sent;    /* messages the receiver took (2xx, SMTP 250) */
    uint64_t failed;  /* messages given up after their retries, or refused (4xx) */
    uint64_t dropped; /* messages never tried: queue full, or still queued at stop */
    uint64_t retries; /* attempts after a first one failed */
};

struct ej_alert_stats {
    bool running;
    size_t channel_count;
    struct ej_alert_channel_stats channels[EJ_ALERT_MAX_CHANNELS];
    uint64_t facts_dropped; /* facts refused by a full queue */
    uint64_t throttled;     /* messages held back by throttleSeconds (counted in a later one) */
};

/*
 * Starts the module for the daemon file cfg: takes cfg->alerts (consumed:
 * left zeroed) and each job's timeZone, and starts the sender thread.
 * Without a configured alerts: section it does nothing and returns 0 (every
 * other call is then a no-op). Returns 0; EJ_ENOMEM; -errno from
 * pthread_create; EJ_EBUSY when already started. Call from one thread.
 */
int ej_alert_start(struct ej_daemon_config *cfg);

/*
 * Sends what is queued for at most drain_ms (one attempt each, no further
 * retries), drops the rest (counted, logged), stops the thread and frees
 * everything. Safe without a start, and more than once.
 */
void ej_alert_stop(int drain_ms);

/* True between a start with alerts configured and the stop. Any thread. */
bool ej_alert_is_running(void);

/*
 * Posts a fact (copied). Any thread; never blocks beyond a short lock; a
 * no-op when alerts are not running. A full queue (1000 facts) drops it.
 * This is the entry point of facts that are not events, such as a fire no
 * live instance owned (kind EJ_ALERT_MISSED), recorded by one instance.
 */
void ej__alert_post(const struct ej_alert_fact *fact);

/*
 * An event bus sink (ej_event_sink_fn): an execution's end becomes a fact
 * (FAILED, TIMEOUT when the run's failure cause says it timed out, or a
 * success); a TASK_ERROR status event "Job 'J' fire not run (REASON): N
 * fire time(s) from A to B" becomes NOT_RUN. Other events are ignored.
 * user is ignored. Add it to the bus after ej_alert_start.
 */
void ej_alert_event_sink(const struct ej_event *ev, void *user);

/* The counters now; after a stop, running is false and the counters are
 * those of the last run (all zero before any start). Any thread. */
void ej_alert_stats_get(struct ej_alert_stats *out);

/*
 * Sends one test message through ch at once, on the calling thread (no
 * queue, no retry), and describes what the receiver answered in answer
 * ("HTTP 200: ok", "SMTP 250: 2.0.0 OK", or the transport error).
 * Returns 0 when the receiver took it; -EIO (answer says why); EJ_ENOMEM.
 */
int ej_alert_send_test(const struct ej_alert_channel_config *ch, char *answer, size_t answerlen);

#endif
