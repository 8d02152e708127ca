/* Fuzz the `config` node reader: any bytes must give a config or an error,
 * and whatever parses must survive write -> read -> write unchanged. */
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "ejob/config.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    struct ej_job_config a, b;
    char err[256];
    if (ej_job_config_init(&a) != 0)
        return 0;
    if (ej_job_config_from_json((const char *)data, size, &a, err, sizeof(err)) != 0) {
        ej_job_config_fini(&a);
        return 0;
    }
    (void)ej_job_config_validate(&a, err, sizeof(err));
    char *j1 = ej_job_config_to_json(&a);
    if (j1 == NULL)
        abort();
    if (ej_job_config_init(&b) != 0)
        abort();
    if (ej_job_config_from_json(j1, strlen(j1), &b, err, sizeof(err)) != 0)
        abort(); /* we wrote something we cannot read */
    if (!ej_job_config_equal(&a, &b))
        abort();
    char *j2 = ej_job_config_to_json(&b);
    if (j2 == NULL || strcmp(j1, j2) != 0)
        abort();
    free(j1);
    free(j2);
    ej_job_config_fini(&a);
    ej_job_config_fini(&b);
    return 0;
}
