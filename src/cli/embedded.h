/*
 * The embedded registry: a private ZooKeeper server (Debian's package) that
 * `ejob run` daemons start on demand and share through a state directory.
 *
 * State directory layout (all files created 0600 in a 0700 directory):
 *   lock            flock(LOCK_EX) serialises start-up, joining and stopping
 *   users           every daemon using the server holds flock(LOCK_SH) on it
 *   registry        "127.0.0.1:PORT\n", present only while the server is up
 *   server.pid      the ZooKeeper JVM's pid
 *   supervisor.pid  the pid of the `ejob registry supervise` process that
 *                   started the JVM, watches the users lock and stops the
 *                   server when the last user is gone
 *   zk/             zoo.cfg, data/ and zookeeper.log
 *
 * The supervisor runs in its own session (setsid), so a daemon crash does not
 * take the server down; the server stops when no daemon holds the users lock
 * any more (also after crashes: the kernel drops a dead process's locks).
 */
#ifndef EJ_CLI_EMBEDDED_H
#define EJ_CLI_EMBEDDED_H

#include <stdbool.h>
#include <stddef.h>
#include <sys/types.h>

/* One daemon's membership of the shared server. */
typedef struct ejcli_embedded ejcli_embedded;

/*
 * The state directory: explicit if non-NULL and non-empty, else
 * $EJOB_STATE_DIR, else $XDG_RUNTIME_DIR/ejob, else /tmp/ejob-$UID.
 * Caller frees. NULL when out of memory.
 */
char *ejcli_state_dir(const char *explicit_dir);

/*
 * Join the embedded server of state_dir, starting it (and its supervisor)
 * when none is running, replacing a stale one (address file present but the
 * server not answering "ruok", or its pid gone). Blocks up to about 60 s.
 * On success *out is the membership (free with ejcli_embedded_leave) and the
 * address is ejcli_embedded_address(*out). On failure err says why.
 * Returns 0 or a negative error. Call before creating threads.
 */
int ejcli_embedded_join(const char *state_dir, ejcli_embedded **out, char *err, size_t errlen);

/* "127.0.0.1:PORT", borrowed from e. */
const char *ejcli_embedded_address(const ejcli_embedded *e);

/*
 * Give up the membership. When it was the last one, waits (up to
 * wait_ms) until the server process has exited. Accepts NULL.
 */
void ejcli_embedded_leave(ejcli_embedded *e, int wait_ms);

/* What `ejob registry status` shows. */
struct ejcli_embedded_status {
    bool running;         /* registry file present and the server answers */
    bool stale;           /* registry file present but the server is gone or mute */
    char address[64];     /* from the registry file, "" when absent */
    pid_t server_pid;     /* 0 when unknown */
    pid_t supervisor_pid; /* 0 when unknown */
    size_t user_count;    /* daemons holding the users lock */
    pid_t users[64];      /* their pids (at most 64 listed) */
};

/* Inspect state_dir without changing anything. Returns 0, or -errno when
 * the directory cannot be read. */
int ejcli_embedded_status(const char *state_dir, struct ejcli_embedded_status *st);

/*
 * Stop the server of state_dir by its recorded pids and remove its files.
 * Refuses (EJ_EBUSY) while daemons use it unless force. Returns 0 (also when
 * nothing was running), EJ_EBUSY, or another negative error with err set.
 */
int ejcli_embedded_stop(const char *state_dir, bool force, char *err, size_t errlen);

/* The supervisor's main loop (`ejob registry supervise`): starts the JVM,
 * reports "OK" or "ERR message" on ready_fd, then watches. Returns an exit
 * code. */
int ejcli_embedded_supervise(const char *state_dir, int ready_fd);

/* Reads the address of a running embedded server ("" when none).
 * Returns 0 when an address was read, EJ_ENOTFOUND when the file is absent. */
int ejcli_embedded_read_address(const char *state_dir, char *addr, size_t len);

/* Sends "ruok" to host:port and returns true when the reply is "imok". */
bool ejcli_zk_ruok(const char *hostport, int timeout_ms);

#endif
