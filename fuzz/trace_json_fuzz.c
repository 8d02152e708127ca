/* Fuzz the history's rendering for the console and `ejob history --json`:
 * any stored bytes (output, failure cause, status message) must become
 * JSON that serialises, and any filter text must parse or fail cleanly. */
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "trace/json.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    char *s = malloc(size + 1);
    if (s == NULL)
        return 0;
    memcpy(s, data, size);
    s[size] = '\0';
    (void)ej__trace_parse_when(s);
    struct ej_trace_status st = {.id = s,
                                 .job_name = s,
                                 .task_id = s,
                                 .slave_id = s,
                                 .source = s,
                                 .execution_type = s,
                                 .sharding_item = s,
                                 .state = s,
                                 .message = s,
                                 .creation_ms = (int64_t)size};
    struct ej_trace_execution_detail d = {
        .execution = {.id = s,
                      .job_name = s,
                      .task_id = s,
                      .hostname = s,
                      .ip = s,
                      .instance_id = s,
                      .execution_source = s,
                      .failure_cause = s,
                      .completed = size % 2,
                      .start_ms = (int64_t)size * 1000,
                      .duration_ms = (int64_t)size - 3,
                      .out = (unsigned char *)data,
                      .out_len = size,
                      .err = (unsigned char *)s,
                      .err_len = size / 2},
        .trail = &st,
        .trail_count = 1,
    };
    json_t *o = ej__trace_detail_json(&d);
    if (o == NULL)
        abort();
    char *text = json_dumps(o, JSON_COMPACT);
    /* Every string made it in: none was refused as invalid UTF-8. */
    if (text == NULL || !json_is_string(json_object_get(o, "stdout")) ||
        !json_is_string(json_object_get(o, "failureCause")) ||
        !json_is_string(
            json_object_get(json_array_get(json_object_get(o, "statusTrail"), 0), "message")))
        abort();
    free(text);
    json_decref(o);
    free(s);
    return 0;
}
