/*
 * What the commands share about jobs beyond the console library
 * (include/ejob/console.h), which reads and operates them.
 */
#ifndef EJ_CLI_JOBINFO_H
#define EJ_CLI_JOBINFO_H

/* Install ej_cron_parse as the config validator's cron checker (for the
 * daemon's own validation of its YAML jobs). */
void ejcli_install_cron_checker(void);

#endif
