#include <errno.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "ejob/config.h"
#include "ejob/error.h"
#include "ejob/log.h"
#include "common/util.h"
#include "cli/cli.h"
#include "cli/cli_util.h"
#include "cli/embedded.h"

/* ------------------------------------------------------------ options */

void ejcli_common_init(struct ejcli_common *c)
{
    memset(c, 0, sizeof(*c));
    c->timeout_ms = 5000;
}

static const struct ejcli_flag *find_long(const struct ejcli_flag *flags, const char *name,
                                          size_t len)
{
    for (const struct ejcli_flag *f = flags; f->name != NULL; f++)
        if (strlen(f->name) == len && strncmp(f->name, name, len) == 0)
            return f;
    return NULL;
}

static const struct ejcli_flag *find_short(const struct ejcli_flag *flags, char c)
{
    for (const struct ejcli_flag *f = flags; f->name != NULL; f++)
        if (f->short_name != 0 && f->short_name == c)
            return f;
    return NULL;
}

static int set_flag(const char *cmd, const struct ejcli_flag *f, const char *value)
{
    if (f->kind == EJCLI_STR) {
        *(const char **)f->target = value;
        return 0;
    }
    char *end = NULL;
    errno = 0;
    long v = strtol(value, &end, 10);
    if (value[0] == '\0' || *end != '\0' || errno != 0)
        return ej_cli_usage_error(cmd, "--%s expects an integer, got \"%s\"", f->name, value);
    *(long *)f->target = v;
    return 0;
}

int ejcli_parse(const char *cmd, int argc, char **argv, const struct ejcli_flag *flags, char **pos,
                int max_pos, int *npos)
{
    *npos = 0;
    bool options_done = false;
    for (int i = 1; i < argc; i++) {
        const char *a = argv[i];
        if (options_done || a[0] != '-' || strcmp(a, "-") == 0) {
            if (*npos >= max_pos)
                return ej_cli_usage_error(cmd, "unexpected argument \"%s\"", a);
            pos[(*npos)++] = argv[i];
            continue;
        }
        if (strcmp(a, "--") == 0) {
            options_done = true;
            continue;
        }
        const struct ejcli_flag *f;
        const char *value = NULL;
        if (a[1] == '-') {
            const char *name = a + 2;
            const char *eq = strchr(name, '=');
            size_t len = eq != NULL ? (size_t)(eq - name) : strlen(name);
            f = find_long(flags, name, len);
            if (f == NULL)
                return ej_cli_usage_error(cmd, "unknown option --%.*s", (int)len, name);
            if (eq != NULL) {
                if (f->kind == EJCLI_BOOL)
                    return ej_cli_usage_error(cmd, "--%s takes no value", f->name);
                value = eq + 1;
            }
        } else {
            if (a[2] != '\0')
                return ej_cli_usage_error(cmd, "unknown option %s", a);
            f = find_short(flags, a[1]);
            if (f == NULL)
                return ej_cli_usage_error(cmd, "unknown option %s", a);
        }
        if (f->kind == EJCLI_BOOL) {
            *(bool *)f->target = true;
            continue;
        }
        if (value == NULL) {
            if (i + 1 >= argc)
                return ej_cli_usage_error(cmd, "--%s needs a value", f->name);
            value = argv[++i];
        }
        int rc = set_flag(cmd, f, value);
        if (rc != 0)
            return rc;
    }
    return 0;
}

/* --------------------------------------------------------- registry */

int ejcli_fail(const char *cmd, const char *fmt, ...)
{
    va_list ap;
    fprintf(stderr, "ejob %s: ", cmd);
    va_start(ap, fmt);
    vfprintf(stderr, fmt, ap);
    va_end(ap);
    fputc('\n', stderr);
    return EJ_EXIT_FAILED;
}

int ejcli_reg_fail(const char *cmd, int rc, const char *what)
{
    const char *msg = ej_registry_errmsg(NULL);
    if (msg == NULL || msg[0] == '\0')
        msg = ej_strerror(rc);
    return ejcli_fail(cmd, "%s: %s", what, msg);
}

static bool valid_namespace(const char *ns)
{
    if (ns[0] == '\0' || ns[0] == '/')
        return false;
    for (const char *p = ns; *p != '\0'; p++)
        if ((unsigned char)*p < 0x20 || *p == '/')
            return false;
    return strcmp(ns, ".") != 0 && strcmp(ns, "..") != 0 && strcmp(ns, "zookeeper") != 0;
}

int ejcli_digest(const char *cmd, const char *arg, const char *file, char **out)
{
    *out = NULL;
    if (arg != NULL && file != NULL)
        return ej_cli_usage_error(cmd, "give --digest or --digest-file, not both");
    const char *env = getenv("EJOB_DIGEST");
    if (file != NULL) {
        char warn[600], err[600];
        int rc = ej_config_read_secret_file(file, out, warn, sizeof(warn), err, sizeof(err));
        if (rc != 0) {
            fprintf(stderr, "ejob %s: --digest-file: %s\n", cmd, err[0] ? err : ej_strerror(rc));
            return EJ_EXIT_USAGE;
        }
        if (warn[0] != '\0')
            fprintf(stderr, "warning: %s\n", warn);
        return 0;
    }
    const char *given = arg != NULL ? arg : env;
    const char *what = arg != NULL ? "--digest" : "EJOB_DIGEST";
    if (given == NULL || given[0] == '\0')
        return 0;
    if (strchr(given, ':') == NULL || given[0] == ':')
        return ej_cli_usage_error(cmd, "%s must be USER:PASSWORD", what);
    if (arg != NULL)
        fprintf(stderr, "warning: --digest is visible to every user in ps; use --digest-file or "
                        "EJOB_DIGEST\n");
    if ((*out = strdup(given)) == NULL) {
        fprintf(stderr, "ejob %s: out of memory\n", cmd);
        return EJ_EXIT_FAILED;
    }
    return 0;
}

int ejcli_resolve(const char *cmd, const struct ejcli_common *c, struct ejcli_target *t)
{
    memset(t, 0, sizeof(*t));
    const char *reg = c->registry;
    if (reg == NULL || reg[0] == '\0')
        reg = getenv("EJOB_REGISTRY");
    const char *ns = c->namespace_;
    if (ns == NULL || ns[0] == '\0')
        ns = getenv("EJOB_NAMESPACE");
    char *secret = NULL;
    int drc = ejcli_digest(cmd, c->digest, c->digest_file, &secret);
    if (drc != 0)
        return drc;
    if (secret != NULL) {
        size_t n = strlen(secret);
        if (n >= sizeof t->digest_buf) {
            memset(secret, 0, n);
            free(secret);
            return ej_cli_usage_error(cmd, "the digest is longer than %zu bytes",
                                      sizeof t->digest_buf - 1);
        }
        memcpy(t->digest_buf, secret, n + 1);
        t->digest = t->digest_buf;
        memset(secret, 0, n);
        free(secret);
    }

    if (reg != NULL && reg[0] != '\0') {
        const char *slash = strchr(reg, '/');
        size_t slen = slash != NULL ? (size_t)(slash - reg) : strlen(reg);
        if (slen == 0 || slen >= sizeof(t->servers))
            return ej_cli_usage_error(
                cmd, "bad registry \"%s\": expected HOST:PORT[,...]/NAMESPACE", reg);
        memcpy(t->servers, reg, slen);
        t->servers[slen] = '\0';
        /* --namespace wins over the namespace inside --registry. */
        if ((ns == NULL || ns[0] == '\0') && slash != NULL)
            ns = slash + 1;
    } else {
        char *dir = ejcli_state_dir(c->state_dir);
        if (dir == NULL)
            return ejcli_fail(cmd, "out of memory");
        int rc = ejcli_embedded_read_address(dir, t->servers, sizeof(t->servers));
        if (rc != 0) {
            int ret = ejcli_fail(cmd,
                                 "no registry given: pass --registry HOST:PORT/NAMESPACE or set "
                                 "EJOB_REGISTRY (no embedded registry is running: %s/registry "
                                 "does not exist)",
                                 dir);
            free(dir);
            return ret;
        }
        if (!ejcli_zk_ruok(t->servers, 2000)) {
            int ret = ejcli_fail(cmd,
                                 "the embedded registry at %s (from %s/registry) is not "
                                 "answering; `ejob registry status` shows its state",
                                 t->servers, dir);
            free(dir);
            return ret;
        }
        free(dir);
        t->embedded = true;
    }
    if (ns == NULL || ns[0] == '\0')
        return ej_cli_usage_error(cmd, "no namespace: use --registry HOST:PORT/NAMESPACE, "
                                       "--namespace NS or EJOB_NAMESPACE");
    if (!valid_namespace(ns) || strlen(ns) >= sizeof(t->namespace_))
        return ej_cli_usage_error(cmd, "bad namespace \"%s\"", ns);
    snprintf(t->namespace_, sizeof(t->namespace_), "%s", ns);
    return 0;
}

/* Commands report their own errors; the library's log lines (ZooKeeper's
 * connection retries among them) only when asked for with EJOB_LOG_LEVEL. */
static void quiet_logs(void)
{
    if (getenv("EJOB_LOG_LEVEL") == NULL)
        ej_log_set_level(EJ_LOG_OFF);
}

int ejcli_connect(const char *cmd, const struct ejcli_common *c, ej_registry **out,
                  struct ejcli_target *target_out)
{
    struct ejcli_target local;
    struct ejcli_target *t = target_out != NULL ? target_out : &local;
    *out = NULL;
    int rc = ejcli_resolve(cmd, c, t);
    if (rc != 0)
        return rc;
    if (c->timeout_ms <= 0)
        return ej_cli_usage_error(cmd, "--timeout-ms must be > 0");
    quiet_logs();
    struct ej_registry_opts opts = {
        .servers = t->servers,
        .namespace_ = t->namespace_,
        .session_timeout_ms = 10000,
        .connection_timeout_ms = (int)c->timeout_ms,
        .base_sleep_ms = 200,
        .max_sleep_ms = 1000,
        .max_retries = 2,
        .digest = t->digest,
    };
    rc = ej_registry_create(out, &opts);
    if (rc != 0) {
        const char *msg = ej_registry_errmsg(NULL);
        return ejcli_fail(cmd, "cannot connect to ZooKeeper at %s: %s", t->servers,
                          msg != NULL && msg[0] != '\0' ? msg : ej_strerror(rc));
    }
    return 0;
}

int ejcli_check_job_name(const char *cmd, const char *job)
{
    if (!ej_console_is_job_name(job))
        return ej_cli_usage_error(cmd, "bad job name \"%s\"", job != NULL ? job : "");
    return 0;
}

int ejcli_console(const char *cmd, const struct ejcli_common *c, ej_registry **reg,
                  ej_console **con)
{
    *con = NULL;
    int rc = ejcli_connect(cmd, c, reg, NULL);
    if (rc != 0)
        return rc;
    int err = ej_console_create(*reg, NULL, con);
    if (err != 0) {
        ej_registry_destroy(*reg);
        *reg = NULL;
        return ejcli_fail(cmd, "%s", ej_strerror(err));
    }
    return 0;
}

int ejcli_console_fail(const char *cmd, int rc, const char *err)
{
    return ejcli_fail(cmd, "%s", err != NULL && err[0] != '\0' ? err : ej_strerror(rc));
}

/* ------------------------------------------------------------ tables */

struct ejcli_table {
    size_t ncols, nrows, cap;
    char **cells; /* (nrows + 1) * ncols; row 0 is the header */
};

static char *dup_cell(const char *s)
{
    return strdup(s != NULL ? s : "-");
}

ejcli_table *ejcli_table_new(size_t ncols, const char *const *headers)
{
    ejcli_table *t = calloc(1, sizeof(*t));
    if (t == NULL)
        return NULL;
    t->ncols = ncols;
    t->cap = 8;
    t->cells = calloc(t->cap * ncols, sizeof(char *));
    if (t->cells == NULL) {
        free(t);
        return NULL;
    }
    for (size_t i = 0; i < ncols; i++)
        t->cells[i] = dup_cell(headers[i]);
    t->nrows = 1;
    return t;
}

void ejcli_table_row(ejcli_table *t, const char *const *cells)
{
    if (t == NULL)
        return;
    if (t->nrows == t->cap) {
        char **n = realloc(t->cells, t->cap * 2 * t->ncols * sizeof(char *));
        if (n == NULL)
            return;
        t->cells = n;
        t->cap *= 2;
    }
    for (size_t i = 0; i < t->ncols; i++)
        t->cells[t->nrows * t->ncols + i] = dup_cell(cells[i]);
    t->nrows++;
}

/* Display width: UTF-8 continuation bytes take no column. */
static size_t width(const char *s)
{
    size_t w = 0;
    for (; s != NULL && *s != '\0'; s++)
        if (((unsigned char)*s & 0xC0) != 0x80)
            w++;
    return w;
}

void ejcli_table_print(const ejcli_table *t, FILE *out)
{
    if (t == NULL)
        return;
    size_t *w = calloc(t->ncols, sizeof(size_t));
    if (w == NULL)
        return;
    for (size_t r = 0; r < t->nrows; r++)
        for (size_t c = 0; c < t->ncols; c++) {
            size_t cw = width(t->cells[r * t->ncols + c]);
            if (cw > w[c])
                w[c] = cw;
        }
    for (size_t r = 0; r < t->nrows; r++) {
        /* No padding after the last non-empty cell of a row. */
        size_t last = 0;
        for (size_t c = 0; c < t->ncols; c++) {
            const char *cell = t->cells[r * t->ncols + c];
            if (cell != NULL && cell[0] != '\0')
                last = c;
        }
        for (size_t c = 0; c <= last; c++) {
            const char *cell = t->cells[r * t->ncols + c];
            fputs(cell != NULL ? cell : "", out);
            if (c < last)
                for (size_t pad = width(cell); pad < w[c] + 2; pad++)
                    fputc(' ', out);
        }
        fputc('\n', out);
    }
    free(w);
}

void ejcli_table_free(ejcli_table *t)
{
    if (t == NULL)
        return;
    for (size_t i = 0; i < t->nrows * t->ncols; i++)
        free(t->cells[i]);
    free(t->cells);
    free(t);
}
