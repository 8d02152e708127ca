/* Fuzz the `config` node reader: any bytes must give a config or an error,
 * and whatever parses must survive write -> read -> write unchanged. The
 * reader that collects every problem (ej_job_config_check_json) must agree
 * with the one that stops at the first: valid exactly when that one reads
 * and validates the bytes, and never invalid without a message. */
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "ejob/config.h"
#include "ejob/error.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    struct ej_job_config a, b, all;
    struct ej_config_errors errs;
    char err[256];
    if (ej_job_config_init(&a) != 0)
        return 0;
    if (ej_job_config_init(&all) != 0)
        abort();
    ej_config_errors_init(&errs);
    int all_rc = ej_job_config_check_json((const char *)data, size, NULL, &all, &errs);
    ej_job_config_fini(&all);
    if (all_rc != 0 && all_rc != EJ_ENOMEM && errs.count == 0)
        abort(); /* refused without saying why */
    ej_config_errors_fini(&errs);
    if (ej_job_config_from_json((const char *)data, size, &a, err, sizeof(err)) != 0) {
        if (all_rc == 0)
            abort(); /* the collecting reader took what the reader refuses */
        ej_job_config_fini(&a);
        return 0;
    }
    int valid = ej_job_config_validate(&a, err, sizeof(err));
    if ((valid == 0) != (all_rc == 0) && all_rc != EJ_ENOMEM && valid != EJ_ENOMEM)
        abort(); /* the two verdicts differ */
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
