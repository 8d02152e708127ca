/* `ejob disable`: disable a job on its servers (or one server). The work is in ops.c. */
#include "cli/cli.h"
#include "cli/ops.h"

static int run_disable(int argc, char **argv)
{
    return ejcli_op_server(argc, argv, true);
}

EJ_CLI_COMMAND(disable, "disable", "disable a job on its servers (or one server)",
               ejcli_disable_usage, run_disable)
