/*
 * A job's state as read from its ZooKeeper nodes, for `ejob jobs` and
 * `ejob status`. Computed the way ElasticJob 2.1.5's lifecycle API
 * (JobStatisticsAPI, ShardingStatisticsAPI) computes it, so a Java-run job
 * shows the same status here as in the Java console.
 */
#ifndef EJ_CLI_JOBINFO_H
#define EJ_CLI_JOBINFO_H

#include <stdbool.h>
#include <stddef.h>

#include "ejob/config.h"
#include "ejob/registry.h"

/* JobBriefInfo.JobStatus of 2.1.5. */
typedef enum {
    EJCLI_JOB_OK = 0,
    EJCLI_JOB_CRASHED = 1,       /* no live instance */
    EJCLI_JOB_DISABLED = 2,      /* every server DISABLED */
    EJCLI_JOB_SHARDING_FLAG = 3, /* an owner is not live, or nothing is assigned */
} ejcli_job_status;

const char *ejcli_job_status_name(ejcli_job_status s);

struct ejcli_server {
    char *ip;
    bool disabled; /* data is "DISABLED" */
    size_t instance_count;
};

struct ejcli_instance {
    char *id;
    char *data; /* "" or "TRIGGER" */
};

struct ejcli_item {
    int item;
    char *owner; /* sharding/{item}/instance, NULL when absent */
    bool owner_live;
    bool running;
    char *failover; /* sharding/{item}/failover, NULL when absent */
    bool misfire;
    bool disabled;
    const char *parameter; /* borrowed from the job's params, NULL when none */
    const char *status;    /* ShardingInfo status: DISABLED, RUNNING, SHARDING_FLAG, PENDING */
};

struct ejcli_job {
    char *name;
    char *config_raw;         /* the config node, NULL when absent */
    bool config_ok;           /* parsed and valid */
    char config_error[1024];  /* why not, naming the field */
    struct ej_job_config cfg; /* valid when config_parsed */
    bool config_parsed;       /* from_json succeeded (maybe invalid) */
    struct ej_sharding_params params;
    struct ejcli_server *servers;
    size_t server_count;
    struct ejcli_instance *instances; /* reverse lexicographic, as ZooKeeper's order here */
    size_t instance_count;
    char *leader; /* leader/election/instance, NULL when none */
    bool sharding_necessary, sharding_processing;
    struct ejcli_item *items; /* 0..count-1 plus any extra sharding/ children */
    size_t item_count;
    size_t failover_waiting; /* leader/failover/items children */
    ejcli_job_status status;
};

/* Install ej_cron_parse as the config validator's cron checker. */
void ejcli_install_cron_checker(void);

/*
 * Read everything of job. brief: only what `ejob jobs` needs (config,
 * servers, instances, leader, owners). Returns 0, EJ_ENONODE when /{job}
 * does not exist, or a registry error. out is always safe to free.
 */
int ejcli_job_load(ej_registry *reg, const char *job, bool brief, struct ejcli_job *out);
void ejcli_job_free(struct ejcli_job *j);

/* The IP part of an instance id ("10.0.0.7" of "10.0.0.7@-@4123"), copied
 * into buf. */
void ejcli_instance_ip(const char *id, char *buf, size_t len);

#endif
