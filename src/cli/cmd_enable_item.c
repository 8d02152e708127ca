/* `ejob enable-item`: enable a disabled shard item again. The work is in ops.c. */
#include "cli/cli.h"
#include "cli/ops.h"

static int run_enable_item(int argc, char **argv)
{
    return ejcli_op_item(argc, argv, false);
}

EJ_CLI_COMMAND(enable_item, "enable-item", "enable a disabled shard item again",
               ejcli_enable_item_usage, run_enable_item)
