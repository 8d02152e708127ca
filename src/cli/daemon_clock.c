/* The clock offset of `ejob run` against ZooKeeper (see daemon_clock.h). */
#include <errno.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "common/check.h"
#include "common/util.h"
#include "ejob/console.h"
#include "ejob/error.h"
#include "ejob/log.h"
#include "cli/daemon_clock.h"

#define WARN_EVERY_MS (10 * 60 * 1000)

static ej__mutex mu = EJ__MUTEX_INITIALIZER;
static pthread_cond_t cv;
static bool running, stop;
static pthread_t thread;
static ej_registry *clock_reg;
static char *clock_job; /* owned */
static atomic_llong offset_ms;
static atomic_bool measured;

/* One write of the node; its mtime is ZooKeeper's clock at the commit,
 * compared with the middle of the round trip here. */
static int measure(int64_t *out)
{
    char *p = ej_layout_path_dup(clock_job, EJ_LAYOUT_NODE_SYSTEM_TIME, 0, NULL);
    if (p == NULL)
        return EJ_ENOMEM;
    struct ej_node_stat st = {0};
    int64_t before = ej__now_ms();
    int rc = ej_registry_set(clock_reg, p, "", 0, -1, &st);
    if (rc == EJ_ENONODE) {
        rc = ej_registry_persist(clock_reg, p, "", 0);
        before = ej__now_ms();
        if (rc == 0)
            rc = ej_registry_set(clock_reg, p, "", 0, -1, &st);
    }
    int64_t after = ej__now_ms();
    free(p);
    if (rc == 0)
        *out = before + (after - before) / 2 - st.mtime;
    return rc;
}

static void *clock_main(void *unused)
{
    (void)unused;
    int64_t warned_at = 0, wait_ms = 1000;
    ej__mutex_lock(&mu);
    while (!stop) {
        struct timespec ts = ej__mono_timespec_in(wait_ms);
        if (ej__mutex_timedwait(&mu, &cv, &ts) == 0 || stop)
            continue;
        wait_ms = EJD_CLOCK_EVERY_MS;
        ej__mutex_unlock(&mu);
        int64_t off = 0;
        int rc = ej_registry_is_connected(clock_reg) ? measure(&off) : EJ_ECONNLOSS;
        if (rc == 0) {
            atomic_store(&offset_ms, off);
            atomic_store(&measured, true);
            int64_t now = ej__mono_ms();
            if (llabs(off) >= EJD_CLOCK_WARN_MS &&
                (warned_at == 0 || now - warned_at >= WARN_EVERY_MS)) {
                warned_at = now;
                EJ_LOG(EJ_LOG_WARN, "daemon", 0,
                       "this host's clock is %+.1f s off ZooKeeper's: fires run %.1f s %s; jobs "
                       "with maxTimeDiffSeconds -1 do not refuse them (fix the clock, e.g. NTP, "
                       "or set maxTimeDiffSeconds)",
                       (double)off / 1000.0, (double)llabs(off) / 1000.0,
                       off > 0 ? "early" : "late");
            } else if (llabs(off) < EJD_CLOCK_WARN_MS && warned_at != 0) {
                warned_at = 0;
                EJ_LOG(EJ_LOG_INFO, "daemon", 0,
                       "this host's clock is within %.1f s of ZooKeeper's again",
                       (double)llabs(off) / 1000.0);
            }
        }
        ej__mutex_lock(&mu);
    }
    ej__mutex_unlock(&mu);
    return NULL;
}

int ejd_clock_start(ej_registry *reg, const char *job)
{
    ej__mutex_lock(&mu);
    if (running) {
        ej__mutex_unlock(&mu);
        return 0;
    }
    pthread_condattr_t ca;
    pthread_condattr_init(&ca);
    pthread_condattr_setclock(&ca, CLOCK_MONOTONIC);
    pthread_cond_init(&cv, &ca);
    pthread_condattr_destroy(&ca);
    clock_reg = reg;
    free(clock_job);
    clock_job = strdup(job);
    stop = false;
    int e = clock_job != NULL ? pthread_create(&thread, NULL, clock_main, NULL) : ENOMEM;
    running = e == 0;
    if (e != 0)
        pthread_cond_destroy(&cv);
    ej__mutex_unlock(&mu);
    return -e;
}

void ejd_clock_stop(void)
{
    ej__mutex_lock(&mu);
    bool join = running;
    running = false;
    stop = true;
    if (join)
        pthread_cond_broadcast(&cv);
    ej__mutex_unlock(&mu);
    if (!join)
        return;
    pthread_join(thread, NULL);
    pthread_cond_destroy(&cv);
    free(clock_job);
    clock_job = NULL;
}

bool ejd_clock_offset(int64_t *out)
{
    if (!atomic_load(&measured))
        return false;
    *out = atomic_load(&offset_ms);
    return true;
}
