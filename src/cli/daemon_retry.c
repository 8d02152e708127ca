/* Jobs of `ejob run` started again after a transient failure (see
 * daemon_retry.h). One thread, woken by a condition variable on the
 * monotonic clock; the job starts themselves run without the lock. */
#include <errno.h>
#include <pthread.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "common/check.h"
#include "common/util.h"
#include "ejob/config.h"
#include "ejob/error.h"
#include "ejob/log.h"
#include "cli/daemon_retry.h"

struct pending {
    struct ej_job_config cfg;
    int attempts; /* failed so far */
    int64_t at;   /* monotonic ms of the next attempt */
    char why[256];
};

static ej__mutex mu = EJ__MUTEX_INITIALIZER;
static pthread_cond_t cv;      /* the list changed, or stop */
static pthread_cond_t idle_cv; /* an attempt ended */
static bool cv_ready, thread_on, paused, stopping;
static pthread_t thread;
static struct pending *list;
static size_t count, cap;
static ejd_retry_start_fn start_fn;
static void *start_arg;
/* The attempt going on: its job's name and how many attempts failed
 * before it (a failure queues it again one further). */
static char inflight[256];
static int inflight_attempts;

bool ejd_retry_is_transient(int rc)
{
    /* Not EJ_ENOAUTH nor EJ_EAUTHFAILED: a digest that ZooKeeper's ACLs
     * refuse stays refused. */
    return rc == EJ_ETIMEDOUT || rc == EJ_EAGAIN || rc == EJ_EBUSY || rc == EJ_ECONNLOSS ||
           rc == EJ_ESESSIONEXPIRED || rc == EJ_EZOOKEEPER || rc == EJ_ENODEEXISTS ||
           rc == EJ_EBADVERSION || rc == EJ_ENONODE;
}

static int64_t backoff_ms(int attempts)
{
    int64_t d = EJD_RETRY_FIRST_MS;
    for (int i = 1; i < attempts && d < EJD_RETRY_MAX_MS; i++)
        d *= 2;
    if (d > EJD_RETRY_MAX_MS)
        d = EJD_RETRY_MAX_MS;
    return d + (int64_t)(rand() % (int)(d / 4 + 1));
}

static void free_all_locked(void)
{
    EJ_ASSERT_HELD(&mu);
    for (size_t i = 0; i < count; i++)
        ej_job_config_fini(&list[i].cfg);
    count = 0;
}

static void *retry_main(void *unused)
{
    (void)unused;
    ej__mutex_lock(&mu);
    while (!stopping) {
        size_t next = count;
        for (size_t i = 0; i < count; i++)
            if (next == count || list[i].at < list[next].at)
                next = i;
        int64_t now = ej__mono_ms();
        if (paused || next == count || list[next].at > now) {
            int64_t wait = paused || next == count ? 1000 : list[next].at - now;
            struct timespec ts = ej__mono_timespec_in(wait);
            ej__mutex_timedwait(&mu, &cv, &ts);
            continue;
        }
        struct pending p = list[next];
        list[next] = list[--count];
        snprintf(inflight, sizeof inflight, "%s", p.cfg.job_name);
        inflight_attempts = p.attempts;
        ej__mutex_unlock(&mu);
        EJ_LOG(EJ_LOG_INFO, "daemon", 0, "job %s: starting again (attempt %d)", p.cfg.job_name,
               p.attempts + 1);
        start_fn(start_arg, &p.cfg); /* logs, and queues it again on a transient error */
        ej_job_config_fini(&p.cfg);
        ej__mutex_lock(&mu);
        inflight[0] = '\0';
        pthread_cond_broadcast(&idle_cv);
    }
    ej__mutex_unlock(&mu);
    return NULL;
}

/* Under mu. */
static void ensure_thread_locked(void)
{
    EJ_ASSERT_HELD(&mu);
    if (!cv_ready) {
        pthread_condattr_t ca;
        pthread_condattr_init(&ca);
        pthread_condattr_setclock(&ca, CLOCK_MONOTONIC);
        pthread_cond_init(&cv, &ca);
        pthread_condattr_destroy(&ca);
        pthread_cond_init(&idle_cv, NULL);
        cv_ready = true;
    }
    if (thread_on || stopping)
        return;
    int e = pthread_create(&thread, NULL, retry_main, NULL);
    if (e != 0)
        EJ_LOG(EJ_LOG_ERROR, "daemon", -e, "cannot start the thread that retries job starts");
    else
        thread_on = true;
}

void ejd_retry_init(ejd_retry_start_fn start, void *arg)
{
    ej__mutex_lock(&mu);
    start_fn = start;
    start_arg = arg;
    stopping = false;
    paused = false;
    ej__mutex_unlock(&mu);
}

void ejd_retry_add(const struct ej_job_config *cfg, int rc, const char *why)
{
    ej__mutex_lock(&mu);
    if (stopping || start_fn == NULL) {
        ej__mutex_unlock(&mu);
        return;
    }
    if (count == cap) {
        size_t ncap = cap ? cap * 2 : 8;
        struct pending *n = realloc(list, ncap * sizeof *n);
        if (n == NULL) {
            ej__mutex_unlock(&mu);
            EJ_LOG(EJ_LOG_ERROR, "daemon", EJ_ENOMEM, "job %s: cannot queue another start",
                   cfg->job_name);
            return;
        }
        list = n;
        cap = ncap;
    }
    struct pending *p = &list[count];
    memset(p, 0, sizeof *p);
    if (ej_job_config_copy(&p->cfg, cfg) != 0) {
        ej_job_config_fini(&p->cfg);
        ej__mutex_unlock(&mu);
        EJ_LOG(EJ_LOG_ERROR, "daemon", EJ_ENOMEM, "job %s: cannot queue another start",
               cfg->job_name);
        return;
    }
    p->attempts = strcmp(inflight, cfg->job_name) == 0 ? inflight_attempts + 1 : 1;
    int64_t delay = backoff_ms(p->attempts);
    p->at = ej__mono_ms() + delay;
    snprintf(p->why, sizeof p->why, "%s", why != NULL && why[0] != '\0' ? why : ej_strerror(rc));
    count++;
    ensure_thread_locked();
    pthread_cond_broadcast(&cv);
    int attempts = p->attempts;
    ej__mutex_unlock(&mu);
    EJ_LOG(EJ_LOG_WARN, "daemon", rc, "job %s: not started (attempt %d); trying again in %lld ms",
           cfg->job_name, attempts, (long long)delay);
}

void ejd_retry_clear(void)
{
    ej__mutex_lock(&mu);
    while (inflight[0] != '\0' && cv_ready)
        ej__mutex_wait(&mu, &idle_cv);
    free_all_locked();
    ej__mutex_unlock(&mu);
}

void ejd_retry_pause(void)
{
    ej__mutex_lock(&mu);
    paused = true;
    if (cv_ready)
        pthread_cond_broadcast(&cv);
    ej__mutex_unlock(&mu);
}

void ejd_retry_stop(void)
{
    ej__mutex_lock(&mu);
    stopping = true;
    bool join = thread_on;
    thread_on = false;
    if (cv_ready)
        pthread_cond_broadcast(&cv);
    ej__mutex_unlock(&mu);
    if (join)
        pthread_join(thread, NULL);
    ej__mutex_lock(&mu);
    free_all_locked();
    free(list);
    list = NULL;
    cap = 0;
    ej__mutex_unlock(&mu);
}

size_t ejd_retry_pending(void)
{
    ej__mutex_lock(&mu);
    size_t n = count + (inflight[0] != '\0');
    ej__mutex_unlock(&mu);
    return n;
}

size_t ejd_retry_describe(char *buf, size_t len)
{
    size_t off = 0, n = 0;
    if (len > 0)
        buf[0] = '\0';
    ej__mutex_lock(&mu);
    int64_t now = ej__mono_ms();
    if (inflight[0] != '\0' && off < len) {
        int w = snprintf(buf + off, len - off, "job %s (attempt %d going on)", inflight,
                         inflight_attempts + 1);
        off += w > 0 ? (size_t)w : 0;
        n++;
    }
    for (size_t i = 0; i < count && off < len; i++, n++) {
        int64_t in = list[i].at > now ? list[i].at - now : 0;
        int w = snprintf(buf + off, len - off, "%sjob %s (attempt %d in %lld ms; last: %s)",
                         n ? ", " : "", list[i].cfg.job_name, list[i].attempts + 1, (long long)in,
                         list[i].why);
        off += w > 0 ? (size_t)w : 0;
    }
    ej__mutex_unlock(&mu);
    return n;
}
