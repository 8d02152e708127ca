#include <stdio.h>

#include "cli/cli.h"

static int run_version(int argc, char **argv)
{
    (void)argv;
    if (argc > 1)
        return ej_cli_usage_error("version", "takes no arguments");
    printf("ejob %s\n", EJOB_VERSION);
    return EJ_EXIT_OK;
}

EJ_CLI_COMMAND(version, "version", "print the version", "Usage: ejob version\n", run_version)
