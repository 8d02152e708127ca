/* `ejob alerts test`: a test message through the channels of a daemon
 * file's alerts: section, saying what each receiver answered. */
#include <stdio.h>
#include <string.h>

#include "alert/alert.h"
#include "cli/cli.h"
#include "cli/cli_util.h"
#include "config/daemon_file.h"
#include "ejob/error.h"

#define CMD "alerts"

static const char usage[] =
    "Usage: ejob alerts test [CHANNEL] -c FILE\n"
    "\n"
    "Sends a test message through every channel of FILE's alerts: section, or\n"
    "through CHANNEL only, at once (no queue, no retry), and prints what each\n"
    "receiver answered: the HTTP status and the start of its body, or the SMTP\n"
    "server's last reply. Secrets are read as `ejob run` reads them\n"
    "(secretFile/secretEnv, passwordFile/passwordEnv). See docs/alerts.md.\n"
    "\n"
    "  -c, --config FILE   the daemon YAML file (required)\n"
    "\n"
    "Exit codes: 0 every receiver took its message, 1 one did not, 2 usage\n"
    "error (a bad file, an unknown CHANNEL, no alerts: section).\n";

static int run_alerts(int argc, char **argv)
{
    const char *file = NULL;
    struct ejcli_flag flags[] = {{"config", 'c', EJCLI_STR, &file}, EJCLI_FLAGS_END};
    char *pos[3];
    int npos = 0;
    int rc = ejcli_parse(CMD, argc, argv, flags, pos, 3, &npos);
    if (rc != 0)
        return rc;
    if (npos < 1 || strcmp(pos[0], "test") != 0)
        return ej_cli_usage_error(CMD, "the only sub-command is \"test\"");
    if (npos > 2)
        return ej_cli_usage_error(CMD, "unexpected argument \"%s\"", pos[2]);
    if (file == NULL)
        return ej_cli_usage_error(CMD, "-c FILE is required");
    struct ej_daemon_config cfg;
    struct ej_config_errors errs;
    ej_config_errors_init(&errs);
    rc = ej_daemon_config_load_file(file, &cfg, &errs);
    for (size_t i = 0; i < errs.count; i++)
        fprintf(stderr, "%s\n", errs.messages[i]);
    ej_config_errors_fini(&errs);
    if (rc != 0)
        return EJ_EXIT_USAGE;
    const struct ej_alert_config *ac = &cfg.alerts;
    const char *only = npos == 2 ? pos[1] : NULL;
    rc = EJ_EXIT_OK;
    size_t tried = 0;
    if (!ac->configured) {
        fprintf(stderr, "ejob %s: %s has no alerts: section\n", CMD, file);
        rc = EJ_EXIT_USAGE;
    }
    for (size_t i = 0; rc != EJ_EXIT_USAGE && i < ac->channel_count; i++) {
        const struct ej_alert_channel_config *ch = &ac->channels[i];
        if (only != NULL && strcmp(only, ch->name) != 0)
            continue;
        tried++;
        char answer[400];
        int e = ej_alert_send_test(ch, answer, sizeof answer);
        printf("%s (%s): %s: %s\n", ch->name, ej_alert_channel_type_name(ch->type),
               e == 0 ? "sent" : "NOT sent", e == EJ_ENOMEM ? "out of memory" : answer);
        if (e != 0)
            rc = EJ_EXIT_FAILED;
    }
    if (rc != EJ_EXIT_USAGE && only != NULL && tried == 0) {
        fprintf(stderr, "ejob %s: no channel \"%s\" in %s's alerts.channels\n", CMD, only, file);
        rc = EJ_EXIT_USAGE;
    }
    ej_daemon_config_fini(&cfg);
    return rc;
}

EJ_CLI_COMMAND(alerts, CMD, "send a test message through the alert channels of a daemon file",
               usage, run_alerts)
