/*
 * Fuzz target for the history store parser (ej_trace_target_parse) and its
 * display form (ej_trace_target_display). Checks that an accepted store
 * has a kind and a url inside the input, that a refused one comes with a
 * message, and that the display form of any string reads back (libpq's
 * parser) as a keyword string that sets no password.
 */
#include <libpq-fe.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "ejob/error.h"
#include "ejob/trace.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    if (size > 512)
        return 0;
    char text[513];
    memcpy(text, data, size);
    text[size] = '\0';
    struct ej_trace_target t;
    char err[256] = "";
    int rc = ej_trace_target_parse(text, &t, err, sizeof err);
    if (rc != 0) {
        if (rc != EJ_EINVAL || err[0] == '\0')
            abort();
    } else {
        if (t.kind != EJ_TRACE_SQLITE && t.kind != EJ_TRACE_POSTGRESQL)
            abort();
        if (t.url < text || t.url > text + size)
            abort();
    }
    /* Shown as PostgreSQL whatever it is: the display reads back as a
     * keyword string that sets no password. */
    struct ej_trace_target pg = {EJ_TRACE_POSTGRESQL, text, NULL};
    char *shown = ej_trace_target_display(&pg);
    if (shown != NULL) {
        if (strncmp(shown, "postgresql:", 11) != 0)
            abort();
        PQconninfoOption *opts = PQconninfoParse(shown + 11, NULL);
        if (opts == NULL)
            abort();
        for (PQconninfoOption *o = opts; o->keyword; o++)
            if ((strcmp(o->keyword, "password") == 0 || strcmp(o->keyword, "sslpassword") == 0) &&
                o->val != NULL && o->val[0] != '\0')
                abort();
        PQconninfoFree(opts);
    }
    free(shown);
    return 0;
}
