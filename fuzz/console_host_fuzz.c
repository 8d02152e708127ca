/* libFuzzer target: the console's Host and Origin header checks (what any
 * client sends). Any bytes give an answer; no host name but localhost
 * passes. */
#include <ctype.h>
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

#include "console/web.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    static ej_console_web *web;
    if (web == NULL) {
        web = calloc(1, sizeof(*web));
        if (web == NULL)
            return 0;
        ej_console_settings_init(&web->settings);
        strcpy(web->listen_host, "10.0.0.5");
    }
    char *text = malloc(size + 1);
    if (text == NULL)
        return 0;
    memcpy(text, data, size);
    text[size] = '\0';
    bool host = ej__console_host_allowed(web, text);
    ej__console_origin_allowed(web, text);
    /* The property that stops DNS rebinding: no name passes but
     * "localhost" (none is configured here); address literals may. After
     * the optional whitespace a header value may have. */
    const char *v = text + strspn(text, " \t\n\v\f\r");
    if (host && (isalpha((unsigned char)v[0]) || v[0] == '_' || v[0] == '-') &&
        strncasecmp(v, "localhost", 9) != 0)
        __builtin_trap();
    free(text);
    return 0;
}
