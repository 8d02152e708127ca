/*
 * Fuzz target for the /proc/self/stat parser behind the process_* metrics:
 * any text either parses to finite, non-negative figures or is refused
 * with EJ_EPARSE.
 */
#include <math.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "ejob/error.h"
#include "metrics/internal.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    if (size > 4096)
        return 0;
    char *text = malloc(size + 1);
    if (text == NULL)
        return 0;
    memcpy(text, data, size);
    text[size] = '\0';
    struct ej__proc_stat st;
    int rc = ej__metrics_parse_proc_stat(text, 100, &st);
    if (rc == 0) {
        double v[] = {st.cpu_seconds, st.start_seconds, st.vsize_bytes, st.rss_pages, st.threads};
        for (size_t i = 0; i < sizeof v / sizeof v[0]; i++)
            if (!isfinite(v[i]) || v[i] < 0)
                abort();
    } else if (rc != EJ_EPARSE) {
        abort();
    }
    free(text);
    return 0;
}
