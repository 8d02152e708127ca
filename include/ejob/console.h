/*
 * The console library: the queries and operations of ElasticJob's console
 * (JobStatisticsAPI, ShardingStatisticsAPI, ServerStatisticsAPI,
 * JobOperateAPI, ShardingOperateAPI, JobSettingsAPI) as C functions, over
 * the layout of ejob/layout.h (SPEC §2, included here).
 *
 * Everything here reads and writes the nodes directly, with the bytes Java
 * writes, so it works on jobs run by Java instances as well as by ejob. The
 * `ejob` commands and `ejob console` go through it.
 *
 * Thread safety: an ej_console handle may be
 * used from several threads at once (the registry and the tree cache are
 * thread-safe); errors are returned through caller buffers, never kept in
 * the handle.
 */
#ifndef EJOB_CONSOLE_H
#define EJOB_CONSOLE_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>

#include "ejob/common.h"
#include "ejob/config.h"
#include "ejob/layout.h"
#include "ejob/registry.h"

/* ------------------------------------------------------------------------ */
/* Layout: the names of 1.0                                                   */
/* ------------------------------------------------------------------------ */

/*
 * The layout moved to ejob/layout.h (ej_layout_*, EJ_LAYOUT_*). These names
 * stay for programs built against 1.0 (docs/abi.md: nothing is removed
 * within a major version); new code uses the layout's.
 * ej_console_instance_ip behaves as ej_layout_instance_ip: an IP that does
 * not fit gives "" (a cut IP would name another server).
 */
#define EJ_CONSOLE_SERVER_DISABLED EJ_LAYOUT_SERVER_DISABLED
#define EJ_CONSOLE_SERVER_ENABLED EJ_LAYOUT_SERVER_ENABLED
#define EJ_CONSOLE_INSTANCE_TRIGGER EJ_LAYOUT_INSTANCE_TRIGGER
#define EJ_CONSOLE_EJOB_SHUTDOWN EJ_LAYOUT_EJOB_SHUTDOWN
#define EJ_CONSOLE_EJOB_RESTART EJ_LAYOUT_EJOB_RESTART
#define EJ_CONSOLE_ID_SEP EJ_LAYOUT_ID_SEP
typedef ej_layout_node ej_console_node;
#define EJ_CONSOLE_NODE_JOB EJ_LAYOUT_NODE_JOB
#define EJ_CONSOLE_NODE_CONFIG EJ_LAYOUT_NODE_CONFIG
#define EJ_CONSOLE_NODE_SERVERS EJ_LAYOUT_NODE_SERVERS
#define EJ_CONSOLE_NODE_SERVER EJ_LAYOUT_NODE_SERVER
#define EJ_CONSOLE_NODE_INSTANCES EJ_LAYOUT_NODE_INSTANCES
#define EJ_CONSOLE_NODE_INSTANCE EJ_LAYOUT_NODE_INSTANCE
#define EJ_CONSOLE_NODE_SHARDING EJ_LAYOUT_NODE_SHARDING
#define EJ_CONSOLE_NODE_ITEM EJ_LAYOUT_NODE_ITEM
#define EJ_CONSOLE_NODE_ITEM_INSTANCE EJ_LAYOUT_NODE_ITEM_INSTANCE
#define EJ_CONSOLE_NODE_ITEM_RUNNING EJ_LAYOUT_NODE_ITEM_RUNNING
#define EJ_CONSOLE_NODE_ITEM_FAILOVER EJ_LAYOUT_NODE_ITEM_FAILOVER
#define EJ_CONSOLE_NODE_ITEM_MISFIRE EJ_LAYOUT_NODE_ITEM_MISFIRE
#define EJ_CONSOLE_NODE_ITEM_DISABLED EJ_LAYOUT_NODE_ITEM_DISABLED
#define EJ_CONSOLE_NODE_LEADER EJ_LAYOUT_NODE_LEADER
#define EJ_CONSOLE_NODE_ELECTION_LATCH EJ_LAYOUT_NODE_ELECTION_LATCH
#define EJ_CONSOLE_NODE_ELECTION_INSTANCE EJ_LAYOUT_NODE_ELECTION_INSTANCE
#define EJ_CONSOLE_NODE_SHARDING_NECESSARY EJ_LAYOUT_NODE_SHARDING_NECESSARY
#define EJ_CONSOLE_NODE_SHARDING_PROCESSING EJ_LAYOUT_NODE_SHARDING_PROCESSING
#define EJ_CONSOLE_NODE_FAILOVER_ITEMS EJ_LAYOUT_NODE_FAILOVER_ITEMS
#define EJ_CONSOLE_NODE_FAILOVER_ITEM EJ_LAYOUT_NODE_FAILOVER_ITEM
#define EJ_CONSOLE_NODE_FAILOVER_LATCH EJ_LAYOUT_NODE_FAILOVER_LATCH
#define EJ_CONSOLE_NODE_GUARANTEE_STARTED EJ_LAYOUT_NODE_GUARANTEE_STARTED
#define EJ_CONSOLE_NODE_GUARANTEE_STARTED_ITEM EJ_LAYOUT_NODE_GUARANTEE_STARTED_ITEM
#define EJ_CONSOLE_NODE_GUARANTEE_COMPLETED EJ_LAYOUT_NODE_GUARANTEE_COMPLETED
#define EJ_CONSOLE_NODE_GUARANTEE_COMPLETED_ITEM EJ_LAYOUT_NODE_GUARANTEE_COMPLETED_ITEM
#define EJ_CONSOLE_NODE_SYSTEM_TIME EJ_LAYOUT_NODE_SYSTEM_TIME
#define EJ_CONSOLE_NODE_KILLS EJ_LAYOUT_NODE_KILLS
#define EJ_CONSOLE_NODE_EJOB_INSTANCES EJ_LAYOUT_NODE_EJOB_INSTANCES
#define EJ_CONSOLE_NODE_EJOB_INSTANCE EJ_LAYOUT_NODE_EJOB_INSTANCE
#define EJ_CONSOLE_NODE_COUNT_ EJ_LAYOUT_NODE_COUNT_
EJ_EXTERN int ej_console_path(char *buf, size_t len, const char *job, ej_console_node node,
                              int item, const char *name);
EJ_EXTERN char *ej_console_path_dup(const char *job, ej_console_node node, int item,
                                    const char *name);
EJ_EXTERN char *ej_console_ejob_marker_path_dup(const char *job, const char *id);
EJ_EXTERN bool ej_console_is_job_name(const char *job);
EJ_EXTERN bool ej_console_is_segment(const char *s);
EJ_EXTERN void ej_console_instance_ip(const char *id, char *buf, size_t len);
EJ_EXTERN bool ej_console_instance_on_server(const char *id, const char *ip);

/* ------------------------------------------------------------------------ */
/* Handle                                                                    */
/* ------------------------------------------------------------------------ */

typedef struct ej_console ej_console;

struct ej_console_opts {
    /* Serve reads from a tree cache of the whole namespace (kept up to date
     * by watches) instead of asking ZooKeeper each time: what a long-running
     * console wants. Writes always go to ZooKeeper. */
    bool cached;
    /* How long ej_console_create waits for the cache's first load. */
    int cache_wait_ms;
};

/*
 * A console over reg (borrowed: it must outlive the console). opts may be
 * NULL (direct reads). Returns 0 and *out, EJ_ETIMEDOUT (cache not loaded in
 * time), EJ_ENOMEM or a registry error.
 */
EJ_EXTERN int ej_console_create(ej_registry *reg, const struct ej_console_opts *opts,
                                ej_console **out);
/* Free the console (not the registry). NULL ok. */
EJ_EXTERN void ej_console_destroy(ej_console *con);
/* The registry, borrowed. */
EJ_EXTERN ej_registry *ej_console_registry(const ej_console *con);
/* A count of the changes the console's tree cache has seen: equal on two
 * calls, nothing under the namespace changed between them (0 without a
 * cache: unknown, never equal to a later call's). Thread-safe. */
EJ_EXTERN uint64_t ej_console_generation(ej_console *con);

/* ------------------------------------------------------------------------ */
/* Queries                                                                   */
/* ------------------------------------------------------------------------ */

/* A job's status: JobBriefInfo.JobStatus of 2.1.5, plus LEADER_LOST. */
typedef enum {
    EJ_CONSOLE_STATUS_OK = 0,
    EJ_CONSOLE_STATUS_CRASHED = 1,       /* no live instance */
    EJ_CONSOLE_STATUS_DISABLED = 2,      /* every server DISABLED */
    EJ_CONSOLE_STATUS_SHARDING_FLAG = 3, /* an owner is not live, or nothing is assigned */
    /* leader/election/instance names no live instance while instances are
     * live: the job waits for a leader that is gone (ejob's own status). */
    EJ_CONSOLE_STATUS_LEADER_LOST = 4,
} ej_console_status;

/* "OK", "CRASHED", "DISABLED", "SHARDING_FLAG", "LEADER_LOST". */
EJ_EXTERN const char *ej_console_status_name(ej_console_status s);

/* ShardingInfo status of 2.1.5, in its order of precedence. */
typedef enum {
    EJ_CONSOLE_ITEM_DISABLED = 0,
    EJ_CONSOLE_ITEM_RUNNING = 1,
    EJ_CONSOLE_ITEM_SHARDING_FLAG = 2, /* owner missing or not live */
    EJ_CONSOLE_ITEM_PENDING = 3,
} ej_console_item_status;

EJ_EXTERN const char *ej_console_item_status_name(ej_console_item_status s);

struct ej_console_server {
    char *ip;
    bool disabled; /* data is EJ_LAYOUT_SERVER_DISABLED */
    size_t instance_count;
    size_t shut_down_count; /* its ejob instances shut down (not brief) */
};

/* An ejob instance an operator shut down: its process lives (its marker
 * does) but it left the job. */
struct ej_console_shut_down {
    char *id;
    bool restartable; /* its daemon restarts the job on request (ej_console_restart) */
};

struct ej_console_instance {
    char *id;
    bool trigger_pending; /* data is EJ_LAYOUT_INSTANCE_TRIGGER */
};

struct ej_console_item {
    int item;
    char *owner; /* sharding/{item}/instance, NULL when absent */
    bool owner_live;
    bool running;
    char *failover; /* sharding/{item}/failover, NULL when absent */
    bool misfire;
    bool disabled;
    bool failover_waiting; /* leader/failover/items/{item}: waits for a live instance */
    const char *parameter; /* borrowed from the job, NULL when none */
    ej_console_item_status status;
};

struct ej_console_job {
    char *name;
    char *config_raw;        /* the config node, NULL when absent */
    int config_version;      /* its version, -1 when absent */
    bool config_parsed;      /* cfg holds the parsed config (maybe invalid) */
    bool config_ok;          /* parsed and valid */
    char config_error[1024]; /* why not ("field: message"), "" when ok */
    struct ej_job_config cfg;
    struct ej_sharding_params params;
    struct ej_console_server *servers; /* reverse lexicographic, as ElasticJob lists them */
    size_t server_count;
    struct ej_console_instance *instances; /* reverse lexicographic */
    size_t instance_count;
    char *leader;     /* leader/election/instance, NULL when none */
    bool leader_live; /* leader names a live instance */
    bool sharding_necessary, sharding_processing;
    struct ej_console_item *items; /* 0..count-1 plus any other numeric sharding/ child */
    size_t item_count;
    size_t failover_waiting; /* leader/failover/items children */
    struct ej_console_shut_down *shut_down; /* by id; none when brief */
    size_t shut_down_count;
    ej_console_status status;
};

/*
 * Read job. brief: only what the job list needs (config, servers,
 * instances, leader, owners); items then have owner and owner_live only.
 * Returns 0, EJ_ENONODE (no /{job}), EJ_EINVAL (bad name), EJ_ENOMEM or a
 * registry error. out is always safe to pass to ej_console_job_fini.
 */
EJ_EXTERN int ej_console_job_load(ej_console *con, const char *job, bool brief,
                                  struct ej_console_job *out);
EJ_EXTERN void ej_console_job_fini(struct ej_console_job *job);

/*
 * The live instances of job that are not ejob instances (no
 * ej_layout_marker_path_dup node): Java ElasticJob instances, in
 * ElasticJob's order (reverse lexicographic). *ids: free with
 * ej_registry_free_names. Returns 0 (*n may be 0), EJ_EINVAL, EJ_ENOMEM or
 * a registry error.
 */
EJ_EXTERN int ej_console_job_java_instances(ej_console *con, const char *job, char ***ids,
                                            size_t *n);

/*
 * Every job of the namespace (children of / that have a config node, as the
 * Java console lists them), by name, loaded brief. On 0 *jobs (free with
 * ej_console_jobs_free) and *count.
 */
EJ_EXTERN int ej_console_jobs(ej_console *con, struct ej_console_job **jobs, size_t *count);
EJ_EXTERN void ej_console_jobs_free(struct ej_console_job *jobs, size_t count);

/* One job as seen from one server (ServerStatisticsAPI's job of a server). */
struct ej_console_server_job {
    char *job;
    bool disabled;         /* servers/{ip} of this job is DISABLED */
    size_t instance_count; /* this server's live instances of the job */
    ej_console_status job_status;
};

/* One server (IP) and the jobs that name it under servers/. */
struct ej_console_server_view {
    char *ip;
    size_t instance_count;              /* live instances over all its jobs */
    size_t disabled_count;              /* jobs disabled on it */
    struct ej_console_server_job *jobs; /* by job name */
    size_t job_count;
};

/* Every server of the namespace with its jobs, by IP. Free with
 * ej_console_servers_free. */
EJ_EXTERN int ej_console_servers(ej_console *con, struct ej_console_server_view **servers,
                                 size_t *count);
EJ_EXTERN void ej_console_servers_free(struct ej_console_server_view *servers, size_t count);

/* ------------------------------------------------------------------------ */
/* Operations                                                                */
/* ------------------------------------------------------------------------ */

/*
 * Each operation writes straight into ZooKeeper. err (errlen bytes) gets a
 * message naming what failed ("no job \"x\" in namespace \"ns\"", "job
 * \"x\" has no server 10.0.0.9 (its servers: ...)"). touched, when not NULL,
 * is called once per node the operation changed, with its target (instance
 * id, IP, item or job name). Return codes besides registry errors:
 *   EJ_EINVAL    bad job name, instance id, IP or item
 *   EJ_ENOTFOUND no such job, server, instance, or no live instance at all
 *   EJ_EBUSY     remove: the job still has live instances
 */
typedef void (*ej_console_touched_fn)(const char *target, void *user);

/* Which instances an instance operation acts on: one instance, the
 * instances of one server, or (both NULL) all. */
struct ej_console_select {
    const char *instance;
    const char *server;
};

/* Run the job once now: EJ_LAYOUT_INSTANCE_TRIGGER into each selected
 * instances/{id} (set, never create: a vanished instance stays gone). */
EJ_EXTERN int ej_console_trigger(ej_console *con, const char *job,
                                 const struct ej_console_select *sel, ej_console_touched_fn touched,
                                 void *user, char *err, size_t errlen);

/*
 * Kill running items (ejob's; Java 2.1.5 instances never read the node):
 * creates the persistent sequential node kills/kill-NNNNNNNNNN holding
 * "item=N\ninstance=ID\nserver=IP\nby=WHO\n" (item -1: every item; empty
 * instance and server: every instance). Each ejob instance of the job
 * watches kills/ and kills its matching items running when the request
 * arrives: a script's process group gets SIGTERM, then SIGKILL after
 * timeoutGraceSeconds; an HTTP transfer is aborted; a C job gets its cancel
 * flag. The run is recorded as killed by WHO. Requests older than
 * EJ_CONSOLE_KILL_KEEP_MS are deleted by the next request.
 * *node (may be NULL) receives the request's name (caller frees).
 */
#define EJ_CONSOLE_KILL_KEEP_MS (10 * 60 * 1000)
EJ_EXTERN int ej_console_kill(ej_console *con, const char *job, const struct ej_console_select *sel,
                              int item, const char *by, char **node, char *err, size_t errlen);

/* The parsed data of a kill request; strings point into buf. Returns
 * false when text is not one. */
struct ej_console_kill_request {
    int item;
    char instance[256];
    char server[64];
    char by[128];
};
EJ_EXTERN bool ej_console_kill_parse(const char *text, struct ej_console_kill_request *req);

/* Shut the selected instances down: delete instances/{id}. The instance
 * leaves the job until its process restarts, or (an `ejob run` daemon)
 * until ej_console_restart. */
EJ_EXTERN int ej_console_shutdown(ej_console *con, const char *job,
                                  const struct ej_console_select *sel,
                                  ej_console_touched_fn touched, void *user, char *err,
                                  size_t errlen);

/* Bring shut-down instances back: EJ_LAYOUT_EJOB_RESTART into the marker
 * of each selected instance whose daemon waits for it (its marker holds
 * EJ_LAYOUT_EJOB_SHUTDOWN; written at that version). The daemon, on any
 * host, then starts the job again with the config it runs it with. Returns
 * 0 once written (touched per instance); EJ_ENOTFOUND when nothing
 * selected waits for a restart, with why in err (a live instance, or an
 * instance only a restart of its process brings back); EJ_EINVAL; a
 * registry error. */
EJ_EXTERN int ej_console_restart(ej_console *con, const char *job,
                                 const struct ej_console_select *sel,
                                 ej_console_touched_fn touched, void *user, char *err,
                                 size_t errlen);

/* Disable (or enable) the job on server ip, or on every server when ip is
 * NULL: servers/{ip} = EJ_LAYOUT_SERVER_DISABLED / ENABLED. */
EJ_EXTERN int ej_console_server_set_disabled(ej_console *con, const char *job, const char *ip,
                                             bool disable, ej_console_touched_fn touched,
                                             void *user, char *err, size_t errlen);

/* Disable (create sharding/{item}/disabled) or enable (delete it) one item.
 * Disabling an item >= shardingTotalCount of a parsable config is refused
 * (EJ_ENOTFOUND). *changed (may be NULL): false when it already was so. */
EJ_EXTERN int ej_console_item_set_disabled(ej_console *con, const char *job, int item, bool disable,
                                           bool *changed, char *err, size_t errlen);

/* Delete /{job} and everything below it; refused while an instance is live. */
EJ_EXTERN int ej_console_remove(ej_console *con, const char *job, char *err, size_t errlen);

/* What an operation on every job of one server does. */
typedef enum {
    EJ_CONSOLE_SERVER_OP_DISABLE = 0,
    EJ_CONSOLE_SERVER_OP_ENABLE = 1,
    EJ_CONSOLE_SERVER_OP_SHUTDOWN = 2, /* delete the server's instances of every job */
} ej_console_server_op;

/* Apply op to every job that lists server ip under servers/ (the Java
 * console's server view). touched gets each job name changed. EJ_ENOTFOUND
 * when no job names the server. */
EJ_EXTERN int ej_console_server_apply(ej_console *con, const char *ip, ej_console_server_op op,
                                      ej_console_touched_fn touched, void *user, char *err,
                                      size_t errlen);

/* ------------------------------------------------------------------------ */
/* Configuration                                                             */
/* ------------------------------------------------------------------------ */

/* Read config of job: *raw (caller frees) and *version (may be NULL).
 * EJ_ENOTFOUND with a message when the job or its config node is missing. */
EJ_EXTERN int ej_console_config_get(ej_console *con, const char *job, char **raw, int *version,
                                    char *err, size_t errlen);

/*
 * Parse and validate json (either shape Java writes) as the config of job,
 * with the config module's public parser and validator. A missing jobName
 * is taken from job, a different one is an error. On 0, cfg (initialised by
 * the caller) holds the config. Otherwise every problem is appended to errs
 * as "field: message" and EJ_ECONFIG (or EJ_ENOMEM) is returned.
 */
EJ_EXTERN int ej_console_config_check(const char *job, const char *json, size_t len,
                                      struct ej_job_config *cfg, struct ej_config_errors *errs);

/* Outcome of ej_console_config_set. */
struct ej_console_config_change {
    char *old_json;  /* what the node held, NULL when it was missing */
    int old_version; /* its version, -1 when it was missing */
    char *new_json;  /* the exact bytes ElasticJob 2.1.5 writes for the config */
    bool changed;    /* new_json differs from old_json */
    bool written;    /* the node was written */
    int new_version; /* the node's version after the write, else -1 */
};

EJ_EXTERN void ej_console_config_change_fini(struct ej_console_config_change *c);

/*
 * Replace the config of job with json, after ej_console_config_check (an
 * invalid config is never written: EJ_ECONFIG with every problem in errs).
 * expected_version >= 0: write only if the node is still at that version
 * (what the caller read); -1: the version read here. A concurrent change
 * gives EJ_EBADVERSION and writes nothing. dry_run: check and compare only.
 * The job must exist (EJ_ENOTFOUND). change (caller-owned, filled on 0 and
 * EJ_EBADVERSION) may be NULL. Registry errors get their path in errs.
 */
EJ_EXTERN int ej_console_config_set(ej_console *con, const char *job, const char *json, size_t len,
                                    int expected_version, bool dry_run,
                                    struct ej_console_config_change *change,
                                    struct ej_config_errors *errs);

/* ------------------------------------------------------------------------ */
/* Web console (`ejob console`)                                              */
/* ------------------------------------------------------------------------ */

/* In the library ejob_console_web (the rest is in ejob_console, which does
 * not link a web server). */

/* Roles, each allowing what the one before allows: a viewer reads; an
 * operator also triggers, shuts down, disables and enables; an admin also
 * edits configs and removes jobs. "guest" is another name for viewer. */
typedef enum {
    EJ_CONSOLE_ROLE_VIEWER = 0,
    EJ_CONSOLE_ROLE_OPERATOR = 1,
    EJ_CONSOLE_ROLE_ADMIN = 2,
    EJ_CONSOLE_ROLE_GUEST = EJ_CONSOLE_ROLE_VIEWER,
} ej_console_role;

/* "viewer", "operator", "admin". */
EJ_EXTERN const char *ej_console_role_name(ej_console_role role);
/* Parse a role name (guest = viewer); false when unknown. */
EJ_EXTERN bool ej_console_role_parse(const char *name, ej_console_role *out);

/* A role on one registry, overriding the account's own. */
struct ej_console_grant {
    char *registry;
    ej_console_role role;
};

struct ej_console_account {
    char *name;
    ej_console_role role; /* on every registry without a grant */
    char *password_hash;  /* crypt(3): yescrypt ("$y$") or SHA-512 ("$6$") */
    struct ej_console_grant *grants;
    size_t grant_count;
};

/* The account's role on registry (its grant there, else its role). */
EJ_EXTERN ej_console_role ej_console_account_role(const struct ej_console_account *a,
                                                  const char *registry);

struct ej_console_registry {
    char *name;       /* shown in the page and used in API paths */
    char *servers;    /* host:port[,host:port...] */
    char *namespace_; /* namespace */
    char *digest;     /* user:password for ZooKeeper digest auth, or NULL */
};

/* Everything `ejob console` runs with: its settings file plus flags. */
struct ej_console_settings {
    char *listen;        /* ADDR:PORT; default 127.0.0.1:8899 */
    char *tls_cert_file; /* PEM; both or neither */
    char *tls_key_file;
    char *audit_log;             /* file the audit lines are appended to; NULL: stderr */
    int session_ttl_seconds;     /* idle time after which a session ends; default 1800 */
    int connect_timeout_ms;      /* per registry; default 15000 */
    int idle_timeout_seconds;    /* a connection silent this long is closed; default 10 */
    int request_timeout_seconds; /* a request body not in by then: closed; default 30 */
    bool no_auth;                /* only allowed on a loopback address, without accounts */
    struct ej_console_account *accounts;
    size_t account_count;
    struct ej_console_registry *registries;
    size_t registry_count;
    /* Execution history (trace.h): a store name as `ejob history --store`
     * takes it (sqlite:PATH, postgresql://USER@HOST/DB); NULL: none. */
    char *history_store;
    char *history_password_file; /* PostgreSQL password, first line; NULL: env */
    /* Host names the console answers to besides loopback names and the
     * listen address (a name in front of it: proxy, DNS). */
    char **allowed_hosts;
    size_t allowed_host_count;
    char *tokens_file; /* API tokens (hashed); NULL: none accepted */
};

/* Defaults, no registry, no account. */
EJ_EXTERN void ej_console_settings_init(struct ej_console_settings *s);
EJ_EXTERN void ej_console_settings_fini(struct ej_console_settings *s);

/*
 * Read a settings file (YAML, at most 64 KiB):
 *   listen: 127.0.0.1:8899
 *   tls: {certFile: cert.pem, keyFile: key.pem}
 *   sessionTimeoutSeconds: 1800
 *   idleTimeoutSeconds: 10
 *   requestTimeoutSeconds: 30
 *   auditLog: /var/log/ejob/console-audit.log
 *   registries:
 *     - {name: prod, serverLists: "zk1:2181,zk2:2181", namespace: ejob-prod}
 *   allowedHosts: [console.example.com]
 *   tokensFile: console-tokens.json
 *   registries:
 *     - {name: batch, serverLists: "zk:2181", namespace: b, digestFile: FILE}
 *   accounts:
 *     - {name: alice, role: admin, passwordHash: "$y$..."}
 *     - {name: bob, role: viewer, roles: {prod: operator}, passwordHash: "$y$..."}
 *   history: {store: "sqlite:/var/lib/ejob/history.db", passwordFile: FILE}
 * into s (initialised). A file that others may write, or owned by another
 * user (root aside), is refused (it holds the accounts), and so is an
 * inline digest in a file everyone may read. Relative digestFile and
 * tokensFile paths are from the file's directory; tokensFile defaults to
 * console-tokens.json there. Returns 0, or EJ_ECONFIG / EJ_EPARSE / -errno with
 * "FILE:LINE:COL: message" in err.
 */
EJ_EXTERN int ej_console_settings_load(const char *path, struct ej_console_settings *s, char *err,
                                       size_t errlen);

/* Append a registry / account (strings copied). 0 or EJ_ENOMEM / EJ_EINVAL. */
EJ_EXTERN int ej_console_settings_add_registry(struct ej_console_settings *s, const char *name,
                                               const char *servers, const char *namespace_,
                                               const char *digest);

/* Check the settings can be served: listen address, accounts or --no-auth
 * on loopback, TLS files in pairs, unique registry names, a history store
 * name that parses (without a password in it). EJ_ECONFIG with a
 * message. */
EJ_EXTERN int ej_console_settings_check(const struct ej_console_settings *s, char *err,
                                        size_t errlen);

/* Shortest password hash-password accepts. */
#define EJ_CONSOLE_MIN_PASSWORD 10

/* Hash password with crypt(3) yescrypt and a random salt into out (at least
 * 128 bytes). Returns 0, EJ_EINVAL (also for a password shorter than
 * EJ_CONSOLE_MIN_PASSWORD) or -errno. */
EJ_EXTERN int ej_console_hash_password(const char *password, char *out, size_t len);

/* True when password matches hash (crypt(3): yescrypt, SHA-512 or
 * SHA-256); constant-time comparison. */
EJ_EXTERN bool ej_console_check_password(const char *password, const char *hash);

/*
 * API tokens in a tokens file (JSON, mode 0600; docs/console.md):
 * create one with a role (and roles per registry: grants, at most 16),
 * expiring at expires (Unix seconds; 0 never), the
 * token ("ejob_ID_SECRET", shown once; only a hash is kept) into token (at
 * least 128 bytes); revoke one by name or id; list them (name, id, role,
 * created, expires, last use) on out. 0 or an error with a message in err.
 */
EJ_EXTERN int ej_console_token_create(const char *file, const char *name, ej_console_role role,
                                      const struct ej_console_grant *grants, size_t grant_count,
                                      int64_t expires, char *token, size_t token_len, char *err,
                                      size_t errlen);
EJ_EXTERN int ej_console_token_revoke(const char *file, const char *name, char *err, size_t errlen);
EJ_EXTERN int ej_console_token_list(const char *file, FILE *out, char *err, size_t errlen);
/* Append the audit line of a token created or revoked (action "token
 * create" / "token revoke") by this process's user to audit_log (NULL:
 * standard error). 0 or -errno. */
EJ_EXTERN int ej_console_audit_token(const char *audit_log, const char *action, const char *name,
                                     const char *role);

typedef struct ej_console_web ej_console_web;

/*
 * Connect to every registry, load their trees, and serve the REST API and
 * the page (built into the binary) on settings->listen, with TLS when
 * cert and key are set. settings is copied. Returns 0 and *out, or an error
 * with a message in err (bad settings, registry not reachable, address in
 * use, unreadable TLS files).
 */
EJ_EXTERN int ej_console_web_start(const struct ej_console_settings *settings, ej_console_web **out,
                                   char *err, size_t errlen);

/* The port it listens on (useful with port 0). */
EJ_EXTERN int ej_console_web_port(const ej_console_web *web);

/* Stop serving and free everything. NULL ok. */
EJ_EXTERN void ej_console_web_stop(ej_console_web *web);

#endif
