/* libFuzzer target: a history cursor from the URL (before= / after=,
 * ej__console_parse_cursor), which any console client sends. Any bytes give
 * an answer; a cursor that parses has its time in range and an id of 1..36
 * letters, digits and '-' that ends the text. */
#include <ctype.h>
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "console/web.h"
#include "ejob/event.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    char *text = malloc(size + 1);
    if (text == NULL)
        return 0;
    memcpy(text, data, size);
    text[size] = '\0';
    int64_t ms = -1;
    const char *id = NULL;
    if (ej__console_parse_cursor(text, &ms, &id)) {
        if (ms < 0 || ms > EJ_CONSOLE_CURSOR_MS_MAX || id < text || id > text + size)
            abort();
        size_t n = strlen(id);
        if (n == 0 || n >= EJ_EVENT_ID_LEN || id + n != text + strlen(text))
            abort();
        for (size_t i = 0; i < n; i++)
            if (!isalnum((unsigned char)id[i]) && id[i] != '-')
                abort();
    }
    free(text);
    return 0;
}
