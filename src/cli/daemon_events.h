/* The daemon's event bus (see daemon_events.c). */
#ifndef EJ_CLI_DAEMON_EVENTS_H
#define EJ_CLI_DAEMON_EVENTS_H

struct ej_event_bus;

/* A bus with the log sink. Returns 0 or a negative error. */
int ejd_events_create(struct ej_event_bus **out);
/* Deliver what is queued and free the bus. Accepts NULL. */
void ejd_events_destroy(struct ej_event_bus *bus);

#endif
