/* libFuzzer target: the console's Host and Origin header checks (what any
 * client sends). Any bytes give an answer; a name that passes is one of the
 * allowed ones. */
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
    /* An allowed Host starts, after the optional whitespace a header value
     * may have, with a loopback name or the listen address. */
    const char *v = text + strspn(text, " \t");
    if (host && strncasecmp(v, "localhost", 9) != 0 && strncmp(v, "127.", 4) != 0 &&
        strncmp(v, "[::1]", 5) != 0 && strncmp(v, "10.0.0.5", 8) != 0)
        __builtin_trap();
    free(text);
    return 0;
}
