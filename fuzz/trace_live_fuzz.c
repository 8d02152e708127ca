/* Fuzz the live output's rendering (GET /api/history/ID/output): a run's
 * bytes cut anywhere by its pieces must become JSON that serialises, and
 * while the run goes on the bytes held back are only a UTF-8 character not
 * complete yet: fed in two cuts, valid text arrives whole and unescaped. */
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "trace/json.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

/* The JSON of bytes p[0..n) from offset at; *next: the offset it asks for
 * next; appends the text to acc (when not NULL). */
static void render(const uint8_t *p, size_t n, int64_t at, bool completed, int64_t *next,
                   char **acc, size_t *acc_len)
{
    struct ej_trace_output o = {.completed = completed,
                                .out = (unsigned char *)p,
                                .out_len = n,
                                .out_next = at + (int64_t)n,
                                .err = (unsigned char *)p,
                                .err_len = n,
                                .err_next = at + (int64_t)n};
    json_t *j = ej__trace_output_json("id", &o);
    char *text = j ? json_dumps(j, JSON_COMPACT) : NULL;
    json_t *out = j ? json_object_get(j, "stdout") : NULL;
    json_t *nx = j ? json_object_get(j, "outNext") : NULL;
    if (text == NULL || !json_is_string(out) || !json_is_integer(nx))
        abort();
    *next = json_integer_value(nx);
    /* At most 3 bytes held back, none once the run has ended. */
    if (*next > at + (int64_t)n || *next < at + (int64_t)n - (completed ? 0 : 3))
        abort();
    if (acc != NULL && !json_is_true(json_object_get(j, "stdoutBinary"))) {
        size_t l = json_string_length(out);
        char *grown = realloc(*acc, *acc_len + l + 1);
        if (grown == NULL)
            abort();
        memcpy(grown + *acc_len, json_string_value(out), l);
        *acc = grown;
        *acc_len += l;
    }
    free(text);
    json_decref(j);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    if (size < 1)
        return 0;
    size_t cut = data[0] % size; /* where the first piece ends */
    data++;
    size--;
    if (cut > size)
        cut = size;
    int64_t next = 0;
    render(data, size, 0, true, &next, NULL, NULL);
    /* Two polls of a running run, then its end. */
    json_t *whole = json_stringn((const char *)data, size);
    bool text = whole != NULL && memchr(data, '\0', size) == NULL;
    json_decref(whole);
    char *acc = NULL;
    size_t acc_len = 0;
    render(data, cut, 0, false, &next, text ? &acc : NULL, &acc_len);
    int64_t from = next;
    render(data + from, size - (size_t)from, from, true, &next, text ? &acc : NULL, &acc_len);
    /* Valid text cut anywhere arrives whole, as it was. */
    if (text && (acc_len != size || (size && memcmp(acc, data, size) != 0)))
        abort();
    free(acc);
    return 0;
}
