/* Fuzz the daemon YAML loader: any text must give a config or a list of
 * errors; every job it accepts is valid and survives a JSON round trip. */
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "config/daemon_file.h"
#include "ejob/config.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    char *text = malloc(size + 1);
    if (text == NULL)
        return 0;
    memcpy(text, data, size);
    text[size] = '\0';
    struct ej_daemon_config d;
    struct ej_config_errors errs;
    ej_config_errors_init(&errs);
    int rc = ej_daemon_config_load_string(text, "fuzz.yaml", &d, &errs);
    if (rc == 0) {
        if (errs.count != 0)
            abort();
        for (size_t i = 0; i < d.job_count; i++) {
            char err[256];
            if (ej_job_config_validate(&d.jobs[i], err, sizeof(err)) != 0)
                abort(); /* accepted a job that does not validate */
            char *json = ej_job_config_to_json(&d.jobs[i]);
            struct ej_job_config back;
            if (json == NULL || ej_job_config_init(&back) != 0)
                abort();
            if (ej_job_config_from_json(json, strlen(json), &back, err, sizeof(err)) != 0 ||
                !ej_job_config_equal(&d.jobs[i], &back))
                abort();
            free(json);
            ej_job_config_fini(&back);
        }
        ej_daemon_config_fini(&d);
    } else if (rc == -1005 /* EJ_ECONFIG */ && errs.count == 0) {
        abort(); /* refused without saying why */
    }
    ej_config_errors_fini(&errs);
    free(text);
    return 0;
}
