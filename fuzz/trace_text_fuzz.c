/* Fuzz the trace module's text handling: any bytes must come out of
 * ej__trace_clean_text as valid UTF-8 of at most the asked characters,
 * and --store names and timestamps must parse or fail cleanly. */
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "ejob/trace.h"
#include "trace/internal.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

/* Valid UTF-8 without surrogates or overlong forms, counting characters. */
static bool valid_utf8(const unsigned char *p, size_t *chars)
{
    *chars = 0;
    while (*p) {
        size_t n = *p < 0x80 ? 1 : (*p & 0xe0) == 0xc0 ? 2 : (*p & 0xf0) == 0xe0 ? 3 : 4;
        for (size_t i = 1; i < n; i++)
            if ((p[i] & 0xc0) != 0x80)
                return false;
        p += n;
        (*chars)++;
    }
    return true;
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    char *s = malloc(size + 1);
    if (s == NULL)
        return 0;
    memcpy(s, data, size);
    s[size] = '\0';
    size_t max = size % 50;
    bool cut = false, oom = false;
    char *clean = ej__trace_clean_text(s, max, &cut, &oom);
    if (clean != NULL) {
        size_t chars = 0;
        if (!valid_utf8((const unsigned char *)clean, &chars) || chars > max)
            abort();
        free(clean);
    }
    struct ej_trace_target t;
    char err[256];
    if (ej_trace_target_parse(s, &t, err, sizeof err) == 0 && t.url == NULL)
        abort();
    (void)ej__trace_parse_time(s);
    (void)ej__trace_instance_of(s);
    free(s);
    return 0;
}
