/* The daemon's event bus: one log line per job event, and the history
 * store. Apart from daemon_jobs.c because event.h includes job.h (see
 * daemon.h). */
#include <errno.h>
#include <limits.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include "common/check.h"
#include "common/util.h"
#include "config/daemon_file.h"
#include "ejob/error.h"
#include "ejob/event.h"
#include "ejob/log.h"
#include "ejob/trace.h"
#include "cli/daemon_events.h"

/* The history store, or NULL. Set and withdrawn on the main thread; read
 * by ejd_events_history_stats from the metrics endpoint's thread. store_mu
 * covers the pointer and each stats read, so the store is never freed
 * under a reader. */
static ej__mutex store_mu = EJ__MUTEX_INITIALIZER;
static ej_trace_store *store;
static int store_drain_ms; /* how long stopping may wait for queued history */

/* The store's own wait when it is destroyed: what is queued then is
 * flushed before, by flush_history, which stops waiting early for a store
 * that cannot write (a full disk, a database gone). */
#define STORE_CLOSE_MS 1000
/* A store that has not written anything for this long while its writes
 * fail gets no more of the drain time at stop. */
#define STORE_STALL_MS 2000

/* mkdir -p, private to the user like the state directory. */
static int make_dirs(const char *path)
{
    char buf[PATH_MAX];
    if (snprintf(buf, sizeof buf, "%s", path) >= (int)sizeof buf)
        return -ENAMETOOLONG;
    for (char *p = buf + 1;; p++) {
        if (*p != '/' && *p != '\0')
            continue;
        char c = *p;
        *p = '\0';
        if (mkdir(buf, 0700) != 0 && errno != EEXIST)
            return -errno;
        *p = c;
        if (c == '\0')
            return 0;
    }
}

int ejd_trace_where(const struct ej_tracing_config *t, const char *config_file,
                    const char *state_dir, struct ejd_trace_where *out, char *err, size_t errlen)
{
    memset(out, 0, sizeof *out);
    if (t != NULL && t->off) {
        out->off = true;
        return 0;
    }
    if (t == NULL || t->type == EJ_TRACING_NONE) {
        out->target.kind = EJ_TRACE_SQLITE;
        out->url = ej__asprintf("%s/%s", state_dir, EJD_HISTORY_FILE);

    } else if (t->type == EJ_TRACING_SQLITE && t->url[0] != '/' && config_file != NULL &&
               strrchr(config_file, '/') != NULL) {
        out->target.kind = EJ_TRACE_SQLITE;
        const char *slash = strrchr(config_file, '/');
        out->url = ej__asprintf("%.*s/%s", (int)(slash - config_file), config_file, t->url);
    } else {
        out->target.kind = t->type == EJ_TRACING_SQLITE ? EJ_TRACE_SQLITE : EJ_TRACE_POSTGRESQL;
        out->url = strdup(t->url);
    }
    if (out->url == NULL)
        return EJ_ENOMEM;
    out->target.url = out->url;
    if (t != NULL && t->password_file != NULL) {
        int rc = ej_trace_read_password_file(t->password_file, &out->password, err, errlen);
        if (rc != 0) {
            ejd_trace_where_fini(out);
            return rc;
        }
        out->target.password = out->password;
    }
    return 0;
}

void ejd_trace_where_fini(struct ejd_trace_where *w)
{
    if (w == NULL)
        return;
    free(w->url);
    if (w->password != NULL) {
        memset(w->password, 0, strlen(w->password));
        free(w->password);
    }
    memset(w, 0, sizeof *w);
}

int ejd_events_create(struct ej_event_bus **out, const struct ejd_trace_where *where,
                      int retention_days, int drain_ms, char *err, size_t errlen)
{
    struct ej_event_bus_opts opts = {.capacity = 0, .flush_timeout_ms = 5000, .name = "ej-events"};
    int rc = ej_event_bus_create(&opts, out);
    if (rc != 0) {
        snprintf(err, errlen, "cannot start the event bus: %s", ej_strerror(rc));
        return rc;
    }
    rc = ej_event_bus_add_sink(*out, ej_event_log_sink, NULL);
    const char *slash = where != NULL && !where->off && where->target.kind == EJ_TRACE_SQLITE
                            ? strrchr(where->target.url, '/')
                            : NULL;
    if (rc == 0 && slash != NULL && slash != where->target.url) {
        char dir[PATH_MAX];
        snprintf(dir, sizeof dir, "%.*s", (int)(slash - where->target.url), where->target.url);
        rc = make_dirs(dir);
        if (rc != 0)
            snprintf(err, errlen, "history directory %s: %s", dir, strerror(-rc));
    }
    if (rc == 0 && where != NULL && !where->off) {
        struct ej_trace_store_opts so = {
            .target = where->target,
            .retention_days = retention_days,
            .flush_timeout_ms = drain_ms > 0 && drain_ms < STORE_CLOSE_MS ? drain_ms
                                                                          : STORE_CLOSE_MS,
        };
        store_drain_ms = drain_ms > 0 ? drain_ms : 1;
        ej_trace_store *s = NULL;
        rc = ej_trace_store_create(&so, &s);
        if (rc == 0) {
            ej__mutex_lock(&store_mu);
            store = s;
            ej__mutex_unlock(&store_mu);
            rc = ej_event_bus_add_sink(*out, ej_trace_sink, s);
        }
        if (rc == 0)
            rc = ejd_ledger_install(&where->target);
        if (rc != 0)
            snprintf(err, errlen, "cannot start the history store: %s", ej_strerror(rc));
        else
            EJ_LOG(EJ_LOG_INFO, "daemon", 0, "history: %s %s (retention %d days%s)",
                   where->target.kind == EJ_TRACE_SQLITE ? "SQLite" : "PostgreSQL",
                   where->target.kind == EJ_TRACE_SQLITE ? where->target.url : "database",
                   retention_days, retention_days == 0 ? ": kept forever" : "");
    } else if (rc == 0) {
        EJ_LOG(EJ_LOG_INFO, "daemon", 0, "history: off (tracing type NONE)");
    }
    if (rc != 0) {
        ejd_events_destroy(*out);
        *out = NULL;
    }
    return rc;
}

/* Wait, within the drain time, for the queued history to be written; but
 * not for a store whose writes fail and that wrote nothing for
 * STORE_STALL_MS (a full disk stays full: waiting the whole drain time
 * would only delay the stop). What is left is counted as dropped. */
static void flush_history(ej_trace_store *s)
{
    int64_t start = ej__mono_ms(), progress_at = start;
    struct ej_trace_stats st;
    ej_trace_store_stats(s, &st);
    uint64_t done = st.written + st.rejected, failures = st.failures;
    while (ej_trace_store_flush(s, 100) == EJ_ETIMEDOUT) {
        int64_t now = ej__mono_ms();
        ej_trace_store_stats(s, &st);
        if (st.written + st.rejected != done) {
            done = st.written + st.rejected;
            failures = st.failures;
            progress_at = now;
        }
        if (now - start >= store_drain_ms)
            return;
        /* A slow write that has not failed is waited for. */
        if (now - progress_at >= STORE_STALL_MS && st.failures > failures) {
            EJ_LOG(EJ_LOG_WARN, "daemon", EJ_EDB,
                   "history store: nothing written for %lld ms (%s); not waiting for its %zu "
                   "queued event(s)",
                   (long long)(now - progress_at), st.last_error[0] ? st.last_error : "failing",
                   st.queued);
            return;
        }
    }
}

void ejd_events_destroy(struct ej_event_bus *bus)
{
    /* The bus first: what it still holds goes into the store's queue. */
    ej_event_bus_destroy(bus);
    ejd_ledger_uninstall();
    ej__mutex_lock(&store_mu);
    ej_trace_store *s = store;
    store = NULL;
    ej__mutex_unlock(&store_mu);
    if (s != NULL)
        flush_history(s);
    ej_trace_store_destroy(s);
}

bool ejd_events_history_stats(struct ej_trace_stats *out)
{
    ej__mutex_lock(&store_mu);
    bool have = store != NULL;
    if (have)
        ej_trace_store_stats(store, out);
    ej__mutex_unlock(&store_mu);
    return have;
}

void ejd_events_job_retention(const char *job_name, int days, int failed_days)
{
    ej__mutex_lock(&store_mu);
    if (store != NULL && ej_trace_store_set_job_retention(store, job_name, days, failed_days) != 0)
        EJ_LOG(EJ_LOG_WARN, "daemon", EJ_ENOMEM, "job %s: its history retention not kept",
               job_name);
    ej__mutex_unlock(&store_mu);
}
