/*
 * ElasticJob-Lite 2.1.5's ZooKeeper layout (SPEC §2) in one table: every
 * node of a job, the bytes some nodes hold, and the instance id format.
 * The coordinator, the console library, the `ejob` commands and the tests
 * all build their paths here and nowhere else.
 *
 * Thread safety: every function here is pure.
 */
#ifndef EJOB_LAYOUT_H
#define EJOB_LAYOUT_H

#include <stdbool.h>
#include <stddef.h>

#include "ejob/common.h"
#include "ejob/config.h"
#include "ejob/registry.h"

/* Data of servers/{ip}: disabled, enabled. */
#define EJ_LAYOUT_SERVER_DISABLED "DISABLED"
#define EJ_LAYOUT_SERVER_ENABLED ""
/* Data the console writes into instances/{id} to run the job once now. */
#define EJ_LAYOUT_INSTANCE_TRIGGER "TRIGGER"
/* The data of an ejob instance's marker (EJ_LAYOUT_NODE_EJOB_INSTANCE):
 * "" while it runs the job; SHUTDOWN once an operator shut it down and its
 * `ejob run` daemon waits for a restart request; RESTART written there
 * (over SHUTDOWN, at its version) asks the daemon to start the job again.
 * A marker with no instances/{id} node and no SHUTDOWN: an ejob instance
 * that was shut down and that only a restart of its process brings back. */
#define EJ_LAYOUT_EJOB_SHUTDOWN "SHUTDOWN"
#define EJ_LAYOUT_EJOB_RESTART "RESTART"
/* Separator of an instance id: {ip}@-@{pid}. */
#define EJ_LAYOUT_ID_SEP "@-@"

/*
 * The nodes of a job, below /{job}. "(item)" nodes take the item argument,
 * "(name)" nodes the name argument (an IP or an instance id: one path
 * segment).
 */
typedef enum {
    EJ_LAYOUT_NODE_JOB = 0,                  /* /{job} */
    EJ_LAYOUT_NODE_CONFIG,                   /* config */
    EJ_LAYOUT_NODE_SERVERS,                  /* servers */
    EJ_LAYOUT_NODE_SERVER,                   /* servers/{ip} (name) */
    EJ_LAYOUT_NODE_INSTANCES,                /* instances */
    EJ_LAYOUT_NODE_INSTANCE,                 /* instances/{id} (name) */
    EJ_LAYOUT_NODE_SHARDING,                 /* sharding */
    EJ_LAYOUT_NODE_ITEM,                     /* sharding/{item} (item) */
    EJ_LAYOUT_NODE_ITEM_INSTANCE,            /* sharding/{item}/instance (item) */
    EJ_LAYOUT_NODE_ITEM_RUNNING,             /* sharding/{item}/running (item) */
    EJ_LAYOUT_NODE_ITEM_FAILOVER,            /* sharding/{item}/failover (item) */
    EJ_LAYOUT_NODE_ITEM_MISFIRE,             /* sharding/{item}/misfire (item) */
    EJ_LAYOUT_NODE_ITEM_DISABLED,            /* sharding/{item}/disabled (item) */
    EJ_LAYOUT_NODE_LEADER,                   /* leader */
    EJ_LAYOUT_NODE_ELECTION_LATCH,           /* leader/election/latch */
    EJ_LAYOUT_NODE_ELECTION_INSTANCE,        /* leader/election/instance */
    EJ_LAYOUT_NODE_SHARDING_NECESSARY,       /* leader/sharding/necessary */
    EJ_LAYOUT_NODE_SHARDING_PROCESSING,      /* leader/sharding/processing */
    EJ_LAYOUT_NODE_FAILOVER_ITEMS,           /* leader/failover/items */
    EJ_LAYOUT_NODE_FAILOVER_ITEM,            /* leader/failover/items/{item} (item) */
    EJ_LAYOUT_NODE_FAILOVER_LATCH,           /* leader/failover/latch */
    EJ_LAYOUT_NODE_GUARANTEE_STARTED,        /* guarantee/started */
    EJ_LAYOUT_NODE_GUARANTEE_STARTED_ITEM,   /* guarantee/started/{item} (item) */
    EJ_LAYOUT_NODE_GUARANTEE_COMPLETED,      /* guarantee/completed */
    EJ_LAYOUT_NODE_GUARANTEE_COMPLETED_ITEM, /* guarantee/completed/{item} (item) */
    EJ_LAYOUT_NODE_SYSTEM_TIME,              /* systemTime/current */
    /* ejob's own nodes, which Java 2.1.5 ignores: */
    EJ_LAYOUT_NODE_KILLS,          /* kills (kill requests) */
    EJ_LAYOUT_NODE_EJOB_INSTANCES, /* ejob/instances */
    EJ_LAYOUT_NODE_EJOB_INSTANCE,  /* ejob/instances/{id} (name): the marker */
    EJ_LAYOUT_NODE_EJOB_MEMBERS,   /* ejob/members */
    /* ejob/members/{id} (name: the instance id), a container holding an
     * ephemeral node per live session of the instance, named by the
     * session (ej_layout_member_live_path_dup): once the last is gone, its
     * children zxid is the zxid of that session's close. Named by the
     * instance, which is what a departure tells (the instances cache knows
     * other instances by name only). */
    EJ_LAYOUT_NODE_EJOB_MEMBER,
    EJ_LAYOUT_NODE_COUNT_                    /* not a node */
} ej_layout_node;

/*
 * Write the namespace-relative path of node of job into buf (len bytes),
 * e.g. "/demoJob/sharding/3/instance". item is used by "(item)" nodes (>= 0),
 * name by "(name)" nodes (one non-empty segment, no '/'). Returns the
 * length, or EJ_EINVAL (bad job name, node, item or name; buf too small:
 * buf then holds ""). Pure, thread-safe.
 */
EJ_EXTERN int ej_layout_path(char *buf, size_t len, const char *job, ej_layout_node node,
                              int item, const char *name);

/* The same as a new string (caller frees), or NULL on EJ_EINVAL / no memory. */
EJ_EXTERN char *ej_layout_path_dup(const char *job, ej_layout_node node, int item,
                                    const char *name);

/* The ephemeral node every ejob instance holds beside instances/{id}, at
 * /{job}/ejob/instances/{id}, so that instances can be told apart: an
 * instance without one is not an ejob instance (a Java ElasticJob
 * instance; Java ignores this subtree). A new string (caller frees), or
 * NULL when job or id is not a valid name / no memory. Pure. */
EJ_EXTERN char *ej_layout_marker_path_dup(const char *job, const char *id);

/* The ephemeral node an ejob instance holds in its container (see
 * EJ_LAYOUT_NODE_EJOB_MEMBER) for one session: /{job}/ejob/members/{id}/
 * {session in hex}. A new string (caller frees), or NULL (invalid job or
 * id, session <= 0, no memory). Pure. */
EJ_EXTERN char *ej_layout_member_live_path_dup(const char *job, const char *id, int64_t session);

/* True when job is a usable job name: one path segment, no control
 * characters, not "." / "..", at most 255 bytes. */
EJ_EXTERN bool ej_layout_is_job_name(const char *job);

/* True when s can be one path segment (an IP, an instance id): non-empty,
 * no '/', no control characters, not "." / "..". */
EJ_EXTERN bool ej_layout_is_segment(const char *s);

/* Copy the IP part of an instance id ("10.0.0.7" of "10.0.0.7@-@4123"; the
 * whole id when it has no separator) into buf. Returns 0, or EJ_EINVAL when
 * id or buf is NULL, len is 0 or the IP does not fit (buf then holds ""):
 * a truncated IP would name another server. */
EJ_EXTERN int ej_layout_instance_ip(const char *id, char *buf, size_t len);

/* True when instance id belongs to server ip ("10.0.0.7@-@..." and "10.0.0.7"). */
EJ_EXTERN bool ej_layout_instance_on_server(const char *id, const char *ip);


#endif
