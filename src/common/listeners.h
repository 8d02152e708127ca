/*
 * A listener list: (function, user) pairs, each at most once, called from a
 * snapshot so that a listener may add or remove listeners (itself
 * included) while the list is being told. The list has no lock of its own:
 * its owner guards it (the registry's mu, the watchdog's live_mu). Used for
 * the registry's connection-state and fence listeners. Internal.
 *
 * Functions are stored as ej__listener_fn and cast back to their own type
 * by the owner before the call.
 */
#ifndef EJ_COMMON_LISTENERS_H
#define EJ_COMMON_LISTENERS_H

#include <stdbool.h>
#include <stddef.h>

typedef void (*ej__listener_fn)(void);

struct ej__listener {
    ej__listener_fn fn;
    void *user;
};

typedef struct ej__listeners {
    struct ej__listener *v;
    size_t n, cap;
} ej__listeners;

/* Frees the list's memory; the list is then empty and usable. */
void ej__listeners_fini(ej__listeners *l);
/* Adds (fn, user). 0; -EEXIST when it is there already; EJ_ENOMEM. */
int ej__listeners_add(ej__listeners *l, ej__listener_fn fn, void *user);
/* Removes (fn, user); false when it was not there. */
bool ej__listeners_remove(ej__listeners *l, ej__listener_fn fn, void *user);
/* True when (fn, user) is in the list: checked before each call of a
 * snapshot, to skip one removed meanwhile. */
bool ej__listeners_has(const ej__listeners *l, ej__listener_fn fn, void *user);
/* A copy of the list to call outside the owner's lock: *out (caller frees;
 * NULL when empty or out of memory) and the count (0 then). */
size_t ej__listeners_snapshot(const ej__listeners *l, struct ej__listener **out);

#endif
