/* The daemon's event bus: one log line per job event. Apart from
 * daemon_jobs.c because event.h includes job.h (see daemon.h). */
#include <stddef.h>

#include "ejob/error.h"
#include "ejob/event.h"
#include "cli/daemon_events.h"

int ejd_events_create(struct ej_event_bus **out)
{
    struct ej_event_bus_opts opts = {.capacity = 0, .flush_timeout_ms = 5000, .name = "ej-events"};
    int rc = ej_event_bus_create(&opts, out);
    if (rc != 0)
        return rc;
    rc = ej_event_bus_add_sink(*out, ej_event_log_sink, NULL);
    if (rc != 0) {
        ej_event_bus_destroy(*out);
        *out = NULL;
    }
    return rc;
}

void ejd_events_destroy(struct ej_event_bus *bus)
{
    ej_event_bus_destroy(bus);
}
