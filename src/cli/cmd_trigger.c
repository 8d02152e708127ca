/* `ejob trigger`: run a job once now on its live instances. The work is in ops.c. */
#include "cli/cli.h"
#include "cli/ops.h"

static int run_trigger(int argc, char **argv)
{
    return ejcli_op_trigger(argc, argv);
}

EJ_CLI_COMMAND(trigger, "trigger", "run a job once now on its live instances", ejcli_trigger_usage,
               run_trigger)
