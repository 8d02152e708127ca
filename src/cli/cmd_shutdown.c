/* `ejob shutdown`: shut down a job's instances (delete their instance nodes). The work is in ops.c.
 */
#include "cli/cli.h"
#include "cli/ops.h"

static int run_shutdown(int argc, char **argv)
{
    return ejcli_op_shutdown(argc, argv);
}

EJ_CLI_COMMAND(shutdown, "shutdown", "shut down a job's instances (delete their instance nodes)",
               ejcli_shutdown_usage, run_shutdown)
