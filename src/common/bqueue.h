/*
 * A bounded queue with a consumer thread: producers push without waiting
 * (a full or closing queue refuses the item: counted as a drop, logged at
 * most every drop_log_ms), the queue's own thread works the items off
 * through a step callback, flushers wait until what was pushed before them
 * is done, and close waits a bounded time before abandoning the rest.
 * Used by the event bus (exec/event.c) and the history writer
 * (trace/store.c). Internal: not part of the public API.
 *
 * Items are opaque pointers the queue owns from a successful push until
 * popped (then freed with free_item).
 */
#ifndef EJ_COMMON_BQUEUE_H
#define EJ_COMMON_BQUEUE_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

typedef struct ej__bqueue ej__bqueue;

struct ej__bqueue_opts {
    size_t capacity;          /* items; > 0 */
    const char *thread_name;  /* the consumer thread's name (at most 15 bytes) */
    const char *log_module;   /* EJ_LOG module of the drop lines */
    const char *what;         /* "event", "history event": the drop lines' subject */
    int64_t drop_log_ms;      /* at most one drop line this often */
    /* On the queue's thread, without the queue's lock: work items off with
     * ej__bqueue_peek / ej__bqueue_pop, and any other work of the owner.
     * Returns the ms to sleep before the next call unless woken by a push
     * or ej__bqueue_wake (< 0: until woken), 0 to be called again at once.
     * It is called while items are queued or until it returns non-zero
     * once with none queued; after close it is called until the queue is
     * empty or abandoned. */
    int64_t (*step)(ej__bqueue *q, void *user);
    /* Appends what the owner knows about a drop (", database: ...") to
     * buf; may be NULL. Called with the queue's lock held: it must not
     * call the queue. */
    void (*drop_detail)(void *user, char *buf, size_t len);
    void (*free_item)(void *item);
    void *user;
};

struct ej__bqueue_stats {
    uint64_t pushed;    /* accepted */
    uint64_t done;      /* popped by the consumer */
    uint64_t dropped;   /* refused, noted, or abandoned at close */
    uint64_t abandoned; /* queued, then left at close (also in dropped) */
    size_t queued;
};

/* Starts the consumer thread. 0, EJ_EINVAL, EJ_ENOMEM or -errno. */
int ej__bqueue_create(const struct ej__bqueue_opts *o, ej__bqueue **out);

/* Queue item. 0 (the queue owns it); EJ_EAGAIN when full, EJ_ECLOSED when
 * closing: the caller keeps item, and the drop is counted and logged. Any
 * thread; never waits for the consumer. */
int ej__bqueue_push(ej__bqueue *q, void *item);

/* Counts (and logs) a drop that never reached the queue (no memory for
 * its copy). */
void ej__bqueue_note_drop(ej__bqueue *q, const char *why);

/* The consumer thread only (checked): up to max queued items from the
 * head, still queued (borrowed until popped). Returns how many. */
size_t ej__bqueue_peek(ej__bqueue *q, void **items, size_t max);
/* The consumer thread only (checked): frees n items from the head
 * (n <= what peek returned) and counts them done. */
void ej__bqueue_pop(ej__bqueue *q, size_t n);

/* Wakes the consumer thread (new work of the owner's). */
void ej__bqueue_wake(ej__bqueue *q);
/* True once close began: the consumer should finish quickly. */
bool ej__bqueue_closing(ej__bqueue *q);

/* Waits until everything pushed before the call is done or abandoned.
 * timeout_ms < 0: no limit. 0 or EJ_ETIMEDOUT. Not on the consumer thread. */
int ej__bqueue_flush(ej__bqueue *q, int64_t timeout_ms);

void ej__bqueue_stats(ej__bqueue *q, struct ej__bqueue_stats *out);

/* Refuses new items, waits up to flush_ms for the queued ones, abandons
 * the rest (counted as dropped), stops and joins the thread. Returns how
 * many were abandoned. Then only stats and destroy may be called. */
size_t ej__bqueue_close(ej__bqueue *q, int64_t flush_ms);

/* Closes (with no wait) when not closed, frees what is left. NULL is fine. */
void ej__bqueue_destroy(ej__bqueue *q);

#endif
