/* Where `ejob history` and `ejob fires` find the history store. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "config/daemon_file.h"
#include "ejob/config.h"
#include "ejob/error.h"
#include "ejob/trace.h"
#include "cli/cli.h"
#include "cli/cli_util.h"
#include "cli/daemon_events.h"
#include "cli/embedded.h"
#include "cli/history_store.h"
#include "trace/json.h"

int ejcli_history_open(const char *cmd, const struct ejcli_store_args *a, ej_trace_reader **out)
{
    char err[512] = "";
    struct ejd_trace_where where;
    memset(&where, 0, sizeof where);
    struct ej_trace_target target;
    int rc = 0;
    if (a->store != NULL) {
        if (ej_trace_target_parse(a->store, &target, err, sizeof err) != 0)
            return ej_cli_usage_error(cmd, "--store: %s", err);
    } else {
        char *dir = ejcli_daemon_state_dir(a->state_dir, a->config);
        struct ej_daemon_config cfg;
        bool loaded = false;
        if (a->config != NULL) {
            struct ej_config_errors errs;
            ej_config_errors_init(&errs);
            rc = ej_daemon_config_load_file(a->config, &cfg, &errs);
            if (rc != 0) {
                for (size_t i = 0; i < errs.count; i++)
                    fprintf(stderr, "%s\n", errs.messages[i]);
                ej_config_errors_fini(&errs);
                free(dir);
                return ejcli_fail(cmd, "%s: %s", a->config, ej_strerror(rc));
            }
            ej_config_errors_fini(&errs);
            loaded = true;
        }
        rc = dir == NULL ? EJ_ENOMEM
                         : ejd_trace_where(loaded ? &cfg.tracing : NULL, a->config, dir, &where,
                                           err, sizeof err);
        if (loaded)
            ej_daemon_config_fini(&cfg);
        free(dir);
        if (rc != 0)
            return ejcli_fail(cmd, "%s", err[0] ? err : ej_strerror(rc));
        if (where.off) {
            ejd_trace_where_fini(&where);
            return ejcli_fail(cmd, "%s has tracing type NONE: no history is kept", a->config);
        }
        target = where.target;
    }
    rc = ej_trace_reader_open(&target, out, err, sizeof err);
    /* target.url points into where: the messages come before its fini. */
    if (rc == EJ_ENOTFOUND) {
        /* Shown without a secret (a daemon file's url may carry one). */
        char *shown = target.kind == EJ_TRACE_SQLITE ? NULL : ej_trace_target_display(&target);
        ejcli_fail(cmd, "no history in %s (%s)", shown != NULL ? shown : target.url, err);
        free(shown);
    } else if (rc != 0)
        ejcli_fail(cmd, "cannot read the history: %s", err[0] ? err : ej_strerror(rc));
    ejd_trace_where_fini(&where);
    return rc == 0 ? 0 : 1;
}

int ejcli_window_check(const char *cmd, const struct ejcli_window *w, int64_t *since_ms,
                       int64_t *until_ms)
{
    *since_ms = *until_ms = 0;
    if (w->since != NULL && (*since_ms = ej__trace_parse_when(w->since)) < 0)
        return ej_cli_usage_error(cmd, "--since: \"%s\" is neither a duration (2h) nor a time",
                                  w->since);
    if (w->until != NULL && (*until_ms = ej__trace_parse_when(w->until)) < 0)
        return ej_cli_usage_error(cmd, "--until: \"%s\" is neither a duration (2h) nor a time",
                                  w->until);
    if (w->item < -1 || w->item > 1000000)
        return ej_cli_usage_error(cmd, "--item must be 0..1000000");
    if (w->limit < 1 || w->limit > 1000000)
        return ej_cli_usage_error(cmd, "--limit must be 1..1000000");
    return 0;
}
