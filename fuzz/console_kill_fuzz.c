/* libFuzzer target: a kill request's data (ej_console_kill_parse), which any
 * ZooKeeper client with write access to the job's kills/ node can write.
 * Any bytes give an answer; a request that parses has its fields
 * NUL-terminated within their buffers and an item in range. */
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "ejob/config.h"
#include "ejob/console.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    char *text = malloc(size + 1);
    if (text == NULL)
        return 0;
    memcpy(text, data, size);
    text[size] = '\0';
    struct ej_console_kill_request q;
    if (ej_console_kill_parse(text, &q)) {
        if (q.item < -1 || q.item > EJ_CONFIG_MAX_SHARDING_TOTAL_COUNT)
            abort();
        if (strnlen(q.instance, sizeof q.instance) == sizeof q.instance ||
            strnlen(q.server, sizeof q.server) == sizeof q.server ||
            strnlen(q.by, sizeof q.by) == sizeof q.by)
            abort();
    }
    free(text);
    return 0;
}
