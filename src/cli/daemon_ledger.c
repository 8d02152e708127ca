/* The daemon tells the fire ledger's start-up scan (src/runtime/ledger.c)
 * where the ledger of a job ends: a reader on its history store, opened on
 * first use and again after an error. */
#include <stdlib.h>
#include <string.h>

#include "ejob/error.h"
#include "ejob/log.h"
#include "ejob/trace.h"
#include "cli/daemon_events.h"
#include "runtime/internal.h"

/* Used only under the runtime's lock of the function (one call at a time),
 * and set up / torn down around its install / uninstall. */
static struct {
    struct ej_trace_target target;
    char *url, *password;
    ej_trace_reader *reader;
} ledger;

static int last_fire(const char *job, int64_t *last_ms, void *arg)
{
    (void)arg;
    *last_ms = 0;
    if (ledger.reader == NULL) {
        char err[256] = "";
        int rc = ej_trace_reader_open(&ledger.target, &ledger.reader, err, sizeof err);
        if (rc == EJ_ENOTFOUND)
            return 0; /* no history yet: no ledger to extend */
        if (rc != 0) {
            EJ_LOG(EJ_LOG_WARN, "daemon", rc,
                   "job %s: the fire ledger's end is unknown (%s): fires missed while no "
                   "instance was alive are not recorded",
                   job, err);
            return rc;
        }
    }
    struct ej_trace_fire_query q = {.job_name = job, .item = -1, .limit = 1};
    struct ej_trace_fire_list l;
    int rc = ej_trace_query_fires(ledger.reader, &q, &l);
    if (rc == EJ_ENOTFOUND)
        return 0;
    if (rc != 0) {
        EJ_LOG(EJ_LOG_WARN, "daemon", rc, "job %s: reading the fire ledger: %s", job,
               ej_trace_reader_errmsg(ledger.reader));
        ej_trace_reader_close(ledger.reader);
        ledger.reader = NULL;
        return rc;
    }
    if (l.count > 0)
        *last_ms = l.rows[0].fire_time_ms;
    ej_trace_fire_list_fini(&l);
    return 0;
}

int ejd_ledger_install(const struct ej_trace_target *t)
{
    ledger.url = strdup(t->url);
    ledger.password = t->password ? strdup(t->password) : NULL;
    if (ledger.url == NULL || (t->password && ledger.password == NULL)) {
        ejd_ledger_uninstall();
        return EJ_ENOMEM;
    }
    ledger.target = (struct ej_trace_target){t->kind, ledger.url, ledger.password};
    ej__rt_ledger_set_last_fire_fn(last_fire, NULL);
    return 0;
}

void ejd_ledger_uninstall(void)
{
    /* Waits for a call in flight: the function is called under the lock. */
    ej__rt_ledger_set_last_fire_fn(NULL, NULL);
    ej_trace_reader_close(ledger.reader);
    if (ledger.password)
        explicit_bzero(ledger.password, strlen(ledger.password));
    free(ledger.password);
    free(ledger.url);
    memset(&ledger, 0, sizeof ledger);
}
