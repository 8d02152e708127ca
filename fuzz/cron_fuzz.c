/*
 * Fuzz target for cron parsing and evaluation: the input's first byte picks
 * a zone, the next 8 bytes a start instant, the rest is the expression.
 * Parses it and, when valid, asks for a few fire times, checking that each
 * is strictly later than the one before.
 */
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "ejob/cron.h"
#include "ejob/error.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

static const char *const zones[] = {
    "UTC",           "America/New_York", "Europe/London", "Australia/Lord_Howe",
    "Asia/Shanghai", "Africa/Cairo",     "Pacific/Apia",  "America/Sao_Paulo"};

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    if (size < 9 || size > 512)
        return 0;
    ej_tz *tz;
    if (ej_tz_load(zones[data[0] % 8], &tz) != 0)
        abort();
    int64_t from;
    memcpy(&from, data + 1, sizeof(from));
    /* Mostly instants between 1900 and 2200, sometimes anything. */
    if ((data[0] & 0x80) == 0)
        from = (int64_t)((uint64_t)from % 9467280000000ULL) - 2208988800000LL;
    char *expr = malloc(size - 9 + 1);
    if (expr == NULL)
        return 0;
    memcpy(expr, data + 9, size - 9);
    expr[size - 9] = '\0';
    ej_cron *c = NULL;
    char err[128];
    int rc = ej_cron_parse(expr, &c, err, sizeof(err));
    if (rc == 0) {
        int64_t t = from;
        for (int i = 0; i < 4; i++) {
            int64_t n;
            rc = ej_cron_next(c, tz, t, &n);
            if (rc == EJ_ENOTFOUND)
                break;
            if (rc != 0 || n <= t || n % 1000 != 0)
                abort();
            t = n;
        }
        ej_cron_free(c);
    } else if (rc != EJ_ECRON || err[0] == '\0') {
        abort();
    }
    free(expr);
    return 0;
}
