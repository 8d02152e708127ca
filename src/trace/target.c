/* Store names (ej_trace_target_parse, _display) and password files. */
#include <ctype.h>
#include <errno.h>
#include <libpq-fe.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include "common/util.h"
#include "ejob/config.h"
#include "ejob/error.h"
#include "ejob/log.h"
#include "trace/internal.h"

/* Whether spec is a libpq keyword string ("host=db dbname=jobs"): it opens
 * with a keyword and '='. A SQLite file whose name looks like that is
 * written sqlite:PATH or ./PATH. */
static bool is_keyword_form(const char *spec)
{
    const char *p = spec;
    while (*p == ' ' || *p == '\t')
        p++;
    const char *word = p;
    while ((*p >= 'a' && *p <= 'z') || (*p >= 'A' && *p <= 'Z') || *p == '_')
        p++;
    if (p == word)
        return false;
    while (*p == ' ' || *p == '\t')
        p++;
    return *p == '=';
}

/* Options whose value is a secret: refused in a store string. */
static bool is_secret_option(const char *keyword)
{
    return strcmp(keyword, "password") == 0 || strcmp(keyword, "sslpassword") == 0;
}

/* Checks a PostgreSQL connection string (URI or keyword form) with libpq's
 * own parser: well formed and without a password. */
static int check_conninfo(const char *spec, char *err, size_t errlen)
{
    char *perr = NULL;
    PQconninfoOption *opts = PQconninfoParse(spec, &perr);
    if (opts == NULL) {
        /* libpq's message ends with a newline. */
        size_t n = perr != NULL ? strcspn(perr, "\n") : 0;
        snprintf(err, errlen, "bad PostgreSQL connection string: %.*s", (int)n,
                 perr != NULL ? perr : "out of memory");
        PQfreemem(perr);
        return EJ_EINVAL;
    }
    bool has_password = false;
    for (PQconninfoOption *o = opts; o->keyword; o++)
        if (is_secret_option(o->keyword) && o->val && o->val[0])
            has_password = true;
    PQconninfoFree(opts);
    if (has_password) {
        snprintf(err, errlen,
                 "the connection string carries a password; give it in EJOB_TRACING_PASSWORD "
                 "or PGPASSWORD (or ~/.pgpass, or a password file) instead of on the command "
                 "line");
        return EJ_EINVAL;
    }
    return 0;
}

int ej_trace_target_parse(const char *spec, struct ej_trace_target *out, char *err, size_t errlen)
{
    memset(out, 0, sizeof *out);
    if (spec == NULL || spec[0] == '\0') {
        snprintf(err, errlen, "empty store name");
        return EJ_EINVAL;
    }
    if (strncmp(spec, "sqlite:", 7) == 0) {
        out->kind = EJ_TRACE_SQLITE;
        out->url = spec + 7;
        if (out->url[0] == '\0') {
            snprintf(err, errlen, "sqlite: needs a file path (sqlite:PATH)");
            return EJ_EINVAL;
        }
        return 0;
    }
    if (strncmp(spec, "postgresql://", 13) == 0 || strncmp(spec, "postgres://", 11) == 0 ||
        is_keyword_form(spec)) {
        int rc = check_conninfo(spec, err, errlen);
        if (rc != 0)
            return rc;
        out->kind = EJ_TRACE_POSTGRESQL;
        out->url = spec;
        return 0;
    }
    const char *colon = strchr(spec, ':');
    const char *slash = strchr(spec, '/');
    if (colon != NULL && (slash == NULL || colon < slash)) {
        snprintf(err, errlen, "unknown store \"%.*s:\" (use sqlite:PATH or postgresql://...)",
                 (int)(colon - spec), spec);
        return EJ_EINVAL;
    }
    out->kind = EJ_TRACE_SQLITE;
    out->url = spec;
    return 0;
}

/* Appends value as a keyword string writes it: bare when it has no white
 * space (isspace: libpq's separator), quote or backslash, else in single
 * quotes with those two escaped. */
static void put_conninfo_value(ej_buf *b, const char *value)
{
    bool bare = value[0] != '\0';
    for (const char *p = value; *p != '\0'; p++)
        if (isspace((unsigned char)*p) || *p == '\'' || *p == '\\')
            bare = false;
    if (bare) {
        ej__buf_puts(b, value);
        return;
    }
    ej__buf_puts(b, "'");
    for (const char *p = value; *p != '\0'; p++)
        ej__buf_printf(b, "%s%c", *p == '\'' || *p == '\\' ? "\\" : "", *p);
    ej__buf_puts(b, "'");
}

char *ej_trace_target_display(const struct ej_trace_target *t)
{
    if (t == NULL || t->url == NULL)
        return NULL;
    if (t->kind != EJ_TRACE_POSTGRESQL)
        return ej__asprintf("sqlite:%s", t->url);
    /* Only what names the database: never a secret, whatever was given. */
    static const char *const shown[] = {"host", "hostaddr", "port", "dbname", "user", "sslmode"};
    PQconninfoOption *opts = PQconninfoParse(t->url, NULL);
    ej_buf b;
    ej__buf_init(&b);
    ej__buf_puts(&b, "postgresql:");
    for (size_t i = 0; opts != NULL && i < sizeof shown / sizeof shown[0]; i++) {
        for (PQconninfoOption *o = opts; o->keyword; o++) {
            if (strcmp(o->keyword, shown[i]) != 0 || o->val == NULL || o->val[0] == '\0')
                continue;
            ej__buf_printf(&b, " %s=", o->keyword);
            put_conninfo_value(&b, o->val);
        }
    }
    PQconninfoFree(opts);
    if (b.failed) {
        ej__buf_fini(&b);
        return NULL;
    }
    return ej__buf_steal(&b);
}

int ej_trace_read_password_file(const char *path, char **out, char *err, size_t errlen)
{
    *out = NULL;
    FILE *f = fopen(path, "re");
    if (f == NULL) {
        int e = errno;
        snprintf(err, errlen, "passwordFile %s: %s", path, strerror(e));
        return -e;
    }
    /* The rule of every file that holds a secret (the digest's too). */
    struct stat st;
    char warn[600] = "", why[600] = "";
    int rc = fstat(fileno(f), &st) != 0
                 ? -errno
                 : ej_config_check_secret_mode(path, (unsigned)st.st_mode, warn, sizeof warn, why,
                                               sizeof why);
    if (rc != 0) {
        fclose(f);
        snprintf(err, errlen, "passwordFile %s", rc == EJ_ECONFIG ? why : strerror(-rc));
        return rc;
    }
    if (warn[0] != '\0')
        EJ_LOG(EJ_LOG_WARN, "trace", 0, "passwordFile %s", warn);
    char *line = NULL;
    size_t cap = 0;
    ssize_t n = getline(&line, &cap, f);
    fclose(f);
    while (n > 0 && (line[n - 1] == '\n' || line[n - 1] == '\r'))
        line[--n] = '\0';
    if (n <= 0) {
        free(line);
        snprintf(err, errlen, "passwordFile %s: empty", path);
        return EJ_EINVAL;
    }
    *out = line;
    return 0;
}

