/*
 * The failover state shared by the two halves of failover: recording the
 * crashes (failover.c) and taking the recorded items (failover_take.c).
 * One per coordinator; its fields are guarded by mu: the serial queue
 * records crashes, fire threads take items, and the serial queue clears
 * them when failover is turned off.
 */
#ifndef EJ_COORD_FAILOVER_IMPL_H
#define EJ_COORD_FAILOVER_IMPL_H

#include <pthread.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "coord/internal.h"

struct crash {
    char *id;
    int64_t at_ms; /* epoch ms when the instance node was seen removed */
    int *items;    /* what it was running */
    size_t n;
    int64_t close_zxid; /* the session's close (session_close_zxid): pzxid of those sharding/{n} */
};

/* A departure whose crash check could not be read (ZooKeeper unreachable
 * for longer than the registry's retries): checked again later, for a
 * while, instead of forgotten. */
struct departure_check {
    char *id;
    int64_t at_ms; /* epoch ms when the instance node was seen removed */
    int *cand;     /* the candidates (ej__view_departed_items) */
    size_t n;
};

struct taken {
    int item;
    int64_t czxid;
    int64_t session;
};

struct pending_record;

struct ej__failover_state {
    pthread_mutex_t mu;
    struct crash *crashes;
    size_t ncrash, capcrash;
    struct departure_check *checks;
    size_t nchecks, capchecks;
    /* The recording waiting for the latch (one at a time; the records
     * seen meanwhile wait in crashes), cancelled when the caches show its
     * items recorded or taken by another instance. */
    struct pending_record *inflight;
    ej__latch_wait *inflight_wait;
    struct taken *mine;
    size_t nmine, capmine;
};

/* May this instance take failover items now (failover on, registered,
 * connected, its server enabled, the coordinator not stopped)? Whether it
 * is idle is the caller's to check (ej__coord_busy). */
bool ej__failover_may_take(ej__coord *c);

/* Under the failover latch, by the instance that records a crash: take
 * `item`, whose sharding/{n} the caller found still as the crash left it,
 * without recording it: one ephemeral create of sharding/{n}/failover = own
 * id. 1 taken, 0 not (the node exists, the item is gone), or the
 * connection's error. Then, outside the latch, ej__failover_took. */
int ej__failover_take_crashed(ej__coord *c, int item);

/* An item taken: remember it (with its fencing token), log, and ask the
 * runtime for the FAILOVER fire. Blocks (one read). */
void ej__failover_took(ej__coord *c, int item);

#endif
