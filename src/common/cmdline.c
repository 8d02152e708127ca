/*
 * Splitting a script command line into argv, exactly as Apache
 * commons-exec's CommandLine.parse does (ElasticJob's ScriptJobExecutor).
 * Shared by execution (src/exec) and validation (src/config), so a line the
 * validator accepts is one the executor can run.
 */
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "common/util.h"
#include "ejob/error.h"

int ej__split_command_line(const char *line, char ***argv_out, int *argc_out, char *err,
                           size_t errlen)
{
    if (line == NULL || argv_out == NULL)
        return EJ_EINVAL;
    *argv_out = NULL;
    if (argc_out)
        *argc_out = 0;
    size_t len = strlen(line);
    const char *p = line;
    while (*p == ' ' || *p == '\t' || *p == '\n' || *p == '\r' || *p == '\f' || *p == '\v')
        p++;
    if (*p == '\0') {
        if (err && errlen)
            snprintf(err, errlen, "command line is empty");
        return EJ_ECONFIG;
    }
    /* Pointers: at most one token per two characters, plus the JSON
     * argument a caller may append, plus NULL. Characters: each token
     * adds at most one NUL. */
    size_t maxtok = len / 2 + 3;
    size_t bytes = maxtok * sizeof(char *) + 2 * len + 2;
    char **argv = malloc(bytes);
    if (argv == NULL)
        return EJ_ENOMEM;
    char *out = (char *)(argv + maxtok);
    char *cur = out;
    size_t cur_len = 0;
    int argc = 0;
    enum { NORMAL, IN_QUOTE, IN_DQUOTE } state = NORMAL;
    bool quoted = false; /* commons-exec's lastTokenHasBeenQuoted */

    for (const char *c = line; *c; c++) {
        switch (state) {
        case IN_QUOTE:
            if (*c == '\'') {
                quoted = true;
                state = NORMAL;
            } else {
                cur[cur_len++] = *c;
            }
            break;
        case IN_DQUOTE:
            if (*c == '"') {
                quoted = true;
                state = NORMAL;
            } else {
                cur[cur_len++] = *c;
            }
            break;
        case NORMAL:
            if (*c == '\'') {
                state = IN_QUOTE;
            } else if (*c == '"') {
                state = IN_DQUOTE;
            } else if (*c == ' ') {
                if (quoted || cur_len != 0) {
                    cur[cur_len] = '\0';
                    argv[argc++] = cur;
                    cur += cur_len + 1;
                    cur_len = 0;
                }
            } else {
                cur[cur_len++] = *c;
            }
            /* Any character outside quotes ends the "just closed a
             * quote" state, as in commons-exec. */
            quoted = false;
            break;
        }
    }
    if (state != NORMAL) {
        free(argv);
        if (err && errlen)
            snprintf(err, errlen, "unbalanced quotes in '%s'", line);
        return EJ_ECONFIG;
    }
    if (quoted || cur_len != 0) {
        cur[cur_len] = '\0';
        argv[argc++] = cur;
    }
    argv[argc] = NULL;
    if (argc == 0 || argv[0][0] == '\0') {
        free(argv);
        if (err && errlen)
            snprintf(err, errlen, "no program in '%s'", line);
        return EJ_ECONFIG;
    }
    *argv_out = argv;
    if (argc_out)
        *argc_out = argc;
    return 0;
}
