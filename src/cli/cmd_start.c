/* `ejob start`: bring back instances of a job that were shut down. The work is in ops.c. */
#include "cli/cli.h"
#include "cli/ops.h"

static int run_start(int argc, char **argv)
{
    return ejcli_op_start(argc, argv);
}

EJ_CLI_COMMAND(start, "start", "bring back a job's instances that were shut down",
               ejcli_start_usage, run_start)
