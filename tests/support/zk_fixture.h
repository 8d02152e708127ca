/*
 * A private ZooKeeper server for tests: the Debian package's server, started
 * as a child process on a free 127.0.0.1 port with its own data directory and
 * a short tick time.
 *
 * The server is started with PR_SET_PDEATHSIG=SIGKILL, so it dies with the
 * thread that started it even when the test crashes or is killed: call
 * zkf_start() from the test's main thread. zkf_destroy() (also run at exit
 * for every server still up) stops it by pid and removes its data.
 */
#ifndef EJ_TEST_ZK_FIXTURE_H
#define EJ_TEST_ZK_FIXTURE_H

#include <stdint.h>
#include <sys/types.h>

typedef struct zkf_server zkf_server;

typedef struct zkf_opts {
    int tick_ms;             /* default 200: sessions may be 400 ms .. 4 s */
    int max_session_ms;      /* default 20 * tick_ms */
    const char *extra_config; /* optional extra zoo.cfg lines */
    /* How often the server deletes empty containers (a system property,
     * znode.container.checkIntervalMs); 0: the server's default, a minute. */
    int container_check_ms;
} zkf_opts;

/* Start a server and wait until it answers "ruok". opts may be NULL.
 * Returns 0 or -errno; on error nothing is left running. */
int zkf_start(zkf_server **out, const zkf_opts *opts);

/* "127.0.0.1:PORT". Borrowed until zkf_destroy(). */
const char *zkf_connect_string(const zkf_server *zk);
int zkf_port(const zkf_server *zk);
pid_t zkf_pid(const zkf_server *zk);

/* Stop the server (SIGKILL, waits for it), keeping its data. */
int zkf_stop(zkf_server *zk);

/* Start a stopped server again on the same port with the same data. */
int zkf_restart(zkf_server *zk);

/* Force-expire a client session, as the server would after the session
 * timeout: connects with the same session id and password, then closes,
 * again until the server answers that the session is expired (the owner's
 * reconnection may kick a connection off before its close is sent). */
int zkf_expire_session(zkf_server *zk, int64_t session_id, const char *passwd, int passwd_len);

/* Send a four-letter word ("mntr", "cons", "stat" ...) and return the reply.
 * Caller frees. NULL on failure. */
char *zkf_four_letter(const zkf_server *zk, const char *word);

/* A named counter from "mntr" (e.g. "zk_packets_received"), or -1. */
long long zkf_mntr_value(const zkf_server *zk, const char *key);

/* Stop the server and remove its data directory. Accepts NULL. */
void zkf_destroy(zkf_server *zk);

/* A process-wide shared server for tests that only need isolation by
 * namespace: started on first use, destroyed at exit. NULL on failure. */
zkf_server *zkf_shared(void);

/* A fresh namespace name ("t<pid>_<n>_<tag>") for one test. Caller frees. */
char *zkf_unique_namespace(const char *tag);

#endif
