/* libFuzzer target: `ejob console`'s settings file (YAML) parser. Any input
 * gives 0 or an error with a message, and nothing leaks. */
#include <stddef.h>
#include <stdint.h>
#include <string.h>

#include "console/web.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    struct ej_console_settings s;
    ej_console_settings_init(&s);
    char err[512];
    err[0] = '\0';
    if (ej__console_settings_parse((const char *)data, size, "fuzz.yaml", &s, err, sizeof err) ==
        0) {
        ej_console_settings_check(&s, err, sizeof err);
    } else if (err[0] == '\0' && size <= 64 * 1024) {
        __builtin_trap(); /* every refusal says why */
    }
    ej_console_settings_fini(&s);
    return 0;
}
