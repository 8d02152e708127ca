/*
 * The monitor port (SPEC section 9): ElasticJob-Lite 2.1.5's per-job dump
 * service. A client connects, sends one line; "dump" (any case) gets the
 * job's ZooKeeper subtree, anything else gets the connection closed with no
 * output.
 *
 * Dump format (as ElasticJob 2.1.5's MonitorService writes it): a depth-first
 * pre-order walk of the descendants of /{job} (the job node itself is not
 * listed), children of each node in reverse lexicographic order, one line per
 * node:
 *     /{job}/path | value
 * or, when the job's tree cache is given and does not hold the same node
 * with the same data,
 *     /{job}/path | value | cachePath | cacheValue
 * where cachePath and cacheValue are "" when the cache lacks the node. Paths
 * are namespace-relative. Values are written raw (embedded newlines stay).
 * Lines end with "\n" (the last one too). Every IPv4 address in the text is
 * replaced by ip1, ip2, ... in order of first appearance across the whole
 * dump, the same address always by the same name.
 *
 * Differences from ElasticJob, on purpose: the value is read from ZooKeeper
 * (ElasticJob reads its cache first, so its four-field lines only show nodes
 * missing from the cache; ours also show cached data that is stale); an
 * address's last number is masked whole (ElasticJob's pattern stops at the
 * first digit of the last number, turning 192.168.1.100 into "ip100" and
 * mixing it up with 192.168.1.1); a client that sends nothing is dropped
 * after 5 s instead of blocking the port forever.
 */
#ifndef EJOB_MONITOR_H
#define EJOB_MONITOR_H

#include "ejob/common.h"
#include "ejob/registry.h"

typedef struct ej_monitor ej_monitor;

/* Longest command line the monitor reads; longer lines are not "dump". */
#define EJ_MONITOR_MAX_LINE 1024
/* How long the monitor waits for a client's line, in ms. */
#define EJ_MONITOR_READ_TIMEOUT_MS 5000

/*
 * Compute the dump of job.
 *
 * reg:   a connected registry whose namespace holds the job. Borrowed.
 * cache: the job's tree cache (rooted at "/{job}"), or NULL to compare
 *        nothing (every line then has two fields). Borrowed.
 * job:   the job name (one path segment: non-empty, no '/').
 * out:   receives a NUL-terminated heap string the caller frees ("" when
 *        the job has no nodes below it, or does not exist).
 *
 * Nodes that vanish during the walk are listed with an empty value (or
 * skipped when their parent vanished first).
 * Returns 0; EJ_EINVAL (NULL argument, bad job name); EJ_ENOMEM; or the
 * registry's error for a failed read (EJ_ECONNLOSS, EJ_ENOAUTH ...; see
 * ej_registry_errmsg). *out is NULL on error.
 * Thread-safe (uses only thread-safe registry calls).
 */
EJ_EXTERN int ej_monitor_dump(ej_registry *reg, ej_tree_cache *cache, const char *job, char **out);

/*
 * Replace every IPv4 address in text by ip1, ip2, ... in order of first
 * appearance, as the dump does. Returns 0 and *out (caller frees), EJ_EINVAL
 * or EJ_ENOMEM. Thread-safe.
 */
EJ_EXTERN int ej_monitor_mask_ips(const char *text, char **out);

/*
 * Start a job's monitor port: one thread that accepts connections and serves
 * them one at a time.
 *
 * reg, cache: as for ej_monitor_dump; both must outlive the monitor (stop it
 *        before destroying them). cache may be NULL.
 * job:   the job name; copied.
 * bind_addr: a numeric IPv4 or IPv6 address to listen on; NULL or "" means
 *        127.0.0.1 (use "0.0.0.0" to listen on every interface, as
 *        ElasticJob does).
 * port:  0..65535; 0 picks a free port (see ej_monitor_port).
 * out:   receives the monitor; the caller owns it (ej_monitor_stop).
 *
 * Returns 0 once the port is listening; EJ_EINVAL (NULL argument, bad job
 * name, port out of range, bind_addr not a numeric address); -EADDRINUSE
 * (another process or job holds the port), other -errno from socket, bind,
 * listen or thread creation; EJ_ENOMEM. On error nothing is left running.
 */
EJ_EXTERN int ej_monitor_start(ej_registry *reg, ej_tree_cache *cache, const char *job,
                               const char *bind_addr, int port, ej_monitor **out);

/* The port the monitor listens on (the chosen one when started with 0). */
EJ_EXTERN int ej_monitor_port(const ej_monitor *mon);

/* Connections served so far (dump or not). Thread-safe. */
EJ_EXTERN unsigned long ej_monitor_served(const ej_monitor *mon);

/*
 * Stop listening, wait for the thread (a dump in progress finishes first)
 * and free the monitor. Accepts NULL. Must not be called from the monitor
 * thread (there are no callbacks, so it cannot be).
 */
EJ_EXTERN void ej_monitor_stop(ej_monitor *mon);

/*
 * Client side: connect to host:port, send `command` and a newline, and read
 * the reply until the server closes the connection.
 *
 * host: a numeric IPv4/IPv6 address or a host name.
 * timeout_ms: bound on the whole exchange (> 0).
 * out: receives the reply (NUL-terminated, caller frees; "" when the server
 *      closed without output).
 * Returns 0; EJ_EINVAL; -ECONNREFUSED and other -errno; EJ_ETIMEDOUT;
 * EJ_ENOTFOUND (host name not resolved); EJ_ETOOBIG (reply over 64 MiB);
 * EJ_ENOMEM. Thread-safe.
 */
EJ_EXTERN int ej_monitor_query(const char *host, int port, const char *command, int timeout_ms,
                               char **out);

#endif
