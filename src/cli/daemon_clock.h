/*
 * How far this host's clock is from ZooKeeper's, measured now and then by
 * `ejob run` whatever the jobs' maxTimeDiffSeconds: with -1 (ElasticJob's
 * default, no check) a clock 30 s ahead would run every fire 30 s early and
 * nothing would say so. A large offset is logged (a warning, repeated every
 * 10 minutes while it lasts) and exported as ejob_clock_offset_seconds.
 */
#ifndef EJ_CLI_DAEMON_CLOCK_H
#define EJ_CLI_DAEMON_CLOCK_H

#include <stdbool.h>
#include <stdint.h>

#include "ejob/registry.h"

/* An offset at least this large (either way) is warned about. */
#define EJD_CLOCK_WARN_MS 5000
/* Between two measurements. */
#define EJD_CLOCK_EVERY_MS 60000

/* Measure through job's systemTime/current node (ElasticJob's, written
 * for the same purpose), 1 s after this call and every EJD_CLOCK_EVERY_MS
 * after, on a thread of its own. reg is borrowed until ejd_clock_stop();
 * job is copied. Returns 0 or -errno (nothing measured then). */
int ejd_clock_start(ej_registry *reg, const char *job);

/* Stop measuring (waits for a measurement going on). Idempotent. */
void ejd_clock_stop(void);

/* The last offset (this host's clock minus ZooKeeper's, ms); false when
 * none was measured yet. Thread-safe. */
bool ejd_clock_offset(int64_t *offset_ms);

#endif
