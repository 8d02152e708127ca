/*
 * The console operations of ElasticJob 2.1.5's lifecycle API (JobOperateAPI,
 * ShardingOperateAPI), done by the console library (ejob/console.h) so they work on jobs
 * run by Java instances as well as by ejob. Each prints what it did (a line
 * per node, or JSON with --json) and returns an exit code.
 */
#ifndef EJ_CLI_OPS_H
#define EJ_CLI_OPS_H

#include <stdbool.h>

/* trigger: EJ_LAYOUT_INSTANCE_TRIGGER into instances/{id}. */
int ejcli_op_trigger(int argc, char **argv);
/* disable / enable: servers/{ip} = EJ_LAYOUT_SERVER_DISABLED / ENABLED. */
int ejcli_op_server(int argc, char **argv, bool disable);
/* disable-item / enable-item: create / delete sharding/{item}/disabled. */
int ejcli_op_item(int argc, char **argv, bool disable);
/* shutdown: delete instances/{id}. */
int ejcli_op_shutdown(int argc, char **argv);
/* start: RESTART into the ejob marker of shut-down instances, wait for them. */
int ejcli_op_start(int argc, char **argv);
/* remove: delete /{job} recursively once no instance is live. */
int ejcli_op_remove(int argc, char **argv);

extern const char ejcli_trigger_usage[], ejcli_disable_usage[], ejcli_enable_usage[],
    ejcli_disable_item_usage[], ejcli_enable_item_usage[], ejcli_shutdown_usage[],
    ejcli_start_usage[], ejcli_remove_usage[];

#endif
