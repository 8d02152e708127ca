/* `ejob remove`: delete a job from the namespace (no live instance allowed). The work is in ops.c.
 */
#include "cli/cli.h"
#include "cli/ops.h"

static int run_remove(int argc, char **argv)
{
    return ejcli_op_remove(argc, argv);
}

EJ_CLI_COMMAND(remove, "remove", "delete a job from the namespace (no live instance allowed)",
               ejcli_remove_usage, run_remove)
