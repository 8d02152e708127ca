/* Fuzz the sharding item parameters parser: any string parses or fails
 * cleanly, and a parsed map written back as "k=v,..." parses to itself. */
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "ejob/config.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    char *s = malloc(size + 1);
    if (s == NULL)
        return 0;
    memcpy(s, data, size);
    s[size] = '\0';
    struct ej_sharding_params p, q;
    char err[512];
    if (ej_sharding_params_parse(s, &p, err, sizeof(err)) == 0) {
        size_t cap = strlen(s) + p.count * 16 + 1;
        char *joined = malloc(cap);
        size_t n = 0;
        if (joined == NULL)
            abort();
        joined[0] = '\0';
        for (size_t i = 0; i < p.count; i++) {
            if (i > 0 && p.entries[i].item <= p.entries[i - 1].item)
                abort(); /* not sorted and unique */
            if (ej_sharding_params_get(&p, p.entries[i].item) != p.entries[i].value)
                abort();
            n += (size_t)snprintf(joined + n, cap - n, "%s%d=%s", i ? "," : "", p.entries[i].item,
                                  p.entries[i].value);
        }
        /* Java lets "0=  =" through with an empty value, which "0=" cannot
         * express: only maps without empty values are written back. */
        bool has_empty = false;
        for (size_t i = 0; i < p.count; i++)
            has_empty = has_empty || p.entries[i].value[0] == '\0';
        if (has_empty) {
            free(joined);
            ej_sharding_params_fini(&p);
            free(s);
            return 0;
        }
        if (ej_sharding_params_parse(joined, &q, err, sizeof(err)) != 0 || q.count != p.count)
            abort();
        for (size_t i = 0; i < p.count; i++) {
            if (q.entries[i].item != p.entries[i].item ||
                strcmp(q.entries[i].value, p.entries[i].value) != 0)
                abort();
        }
        ej_sharding_params_fini(&q);
        free(joined);
    }
    ej_sharding_params_fini(&p);
    free(s);
    return 0;
}
