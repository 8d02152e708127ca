#include "ejob/config.h"
#include "ejob/cron.h"
#include "cli/jobinfo.h"

static int cron_check(const char *cron, const char *time_zone, char *err, size_t errlen)
{
    (void)time_zone; /* the config module checks the zone itself */
    return ej_cron_parse(cron, NULL, err, errlen);
}

void ejcli_install_cron_checker(void)
{
    ej_config_set_cron_checker(cron_check);
}
