/* The names of the tz database, for forms that offer a zone (ej_tz_names). */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "common/util.h"
#include "cron/internal.h"
#include "ejob/cron.h"
#include "ejob/error.h"

void ej_tz_names_free(char **names)
{
    for (size_t i = 0; names != NULL && names[i] != NULL; i++)
        free(names[i]);
    free(names);
}

static int by_name(const void *a, const void *b)
{
    return strcmp(*(char *const *)a, *(char *const *)b);
}

/* Append name to *list (n used, *cap allocated, one slot kept for NULL). */
static int append(char ***list, size_t *n, size_t *cap, const char *name, size_t len)
{
    if (*n + 2 > *cap) {
        size_t grown = *cap ? *cap * 2 : 512;
        char **g = realloc(*list, grown * sizeof(*g));
        if (g == NULL)
            return EJ_ENOMEM;
        *list = g;
        *cap = grown;
    }
    char *copy = strndup(name, len);
    if (copy == NULL)
        return EJ_ENOMEM;
    (*list)[(*n)++] = copy;
    (*list)[*n] = NULL;
    return 0;
}

/* tzdata.zi names a zone on its "Z NAME ..." lines and a link on its
 * "L TARGET NAME" lines: the second and the third word. */
static int name_of_line(const char *line, const char **name, size_t *len)
{
    int word = line[0] == 'Z' ? 1 : line[0] == 'L' ? 2 : 0;
    if (word == 0 || line[1] != ' ')
        return EJ_ENOTFOUND;
    const char *p = line + 2;
    for (int w = 1; w < word; w++) {
        p = strchr(p, ' ');
        if (p == NULL)
            return EJ_ENOTFOUND;
        p++;
    }
    *len = strcspn(p, " \n");
    *name = p;
    return *len > 0 ? 0 : EJ_ENOTFOUND;
}

int ej_tz_names(char ***names, size_t *count)
{
    if (names == NULL)
        return EJ_EINVAL;
    *names = NULL;
    char *path = ej__asprintf("%s/tzdata.zi", ej__tz_dir());
    if (path == NULL)
        return EJ_ENOMEM;
    FILE *f = fopen(path, "re");
    free(path);
    if (f == NULL)
        return errno == ENOENT ? EJ_ENOTFOUND : -errno;
    char **list = NULL;
    size_t n = 0, cap = 0;
    char *line = NULL;
    size_t linecap = 0;
    int rc = 0;
    while (rc == 0 && getline(&line, &linecap, f) >= 0) {
        const char *name;
        size_t len;
        if (name_of_line(line, &name, &len) == 0)
            rc = append(&list, &n, &cap, name, len);
    }
    free(line);
    fclose(f);
    if (rc == 0 && list == NULL)
        rc = EJ_ENOTFOUND;
    if (rc != 0) {
        ej_tz_names_free(list);
        return rc;
    }
    qsort(list, n, sizeof(*list), by_name);
    *names = list;
    if (count != NULL)
        *count = n;
    return 0;
}
