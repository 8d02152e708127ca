/* `ejob enable`: enable a job again on its servers (or one server). The work is in ops.c. */
#include "cli/cli.h"
#include "cli/ops.h"

static int run_enable(int argc, char **argv)
{
    return ejcli_op_server(argc, argv, false);
}

EJ_CLI_COMMAND(enable, "enable", "enable a job again on its servers (or one server)",
               ejcli_enable_usage, run_enable)
