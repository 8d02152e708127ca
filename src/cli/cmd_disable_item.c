/* `ejob disable-item`: disable one shard item of a job. The work is in ops.c. */
#include "cli/cli.h"
#include "cli/ops.h"

static int run_disable_item(int argc, char **argv)
{
    return ejcli_op_item(argc, argv, true);
}

EJ_CLI_COMMAND(disable_item, "disable-item", "disable one shard item of a job",
               ejcli_disable_item_usage, run_disable_item)
