/* A slow link for tests: a loopback proxy in front of the shared test
 * ZooKeeper that holds every answer back delay_ms (requests pass at once),
 * so that a test can count round trips by time: n requests one after the
 * other take n delays, n sent together one. One client connection at a
 * time (a reconnect comes after the old one closed); a thread of its own. */
#ifndef EJ_TEST_SLOW_LINK_H
#define EJ_TEST_SLOW_LINK_H

#include <pthread.h>
#include <stdatomic.h>
#include <stdbool.h>

typedef struct slow_link {
    int lfd;
    int port; /* connect the client to 127.0.0.1:port */
    int delay_ms;
    int zk_port; /* the shared test server's */
    atomic_bool stop;
    pthread_t thread;
} slow_link;

/* Listens on a free loopback port and starts the proxy thread: 0, or -1. */
int slow_link_start(slow_link *l, int delay_ms);
/* Stops the thread, closes every socket. */
void slow_link_stop(slow_link *l);

#endif
