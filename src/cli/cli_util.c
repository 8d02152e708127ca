#include <errno.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include "ejob/config.h"
#include "ejob/error.h"
#include "ejob/log.h"
#include "common/util.h"
#include "cli/cli.h"
#include "cli/cli_util.h"
#include "cli/embedded.h"
#include "config/daemon_file.h"

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

/* The unit's state directory of a daemon file in /etc/ejob (see
 * dist/systemd: StateDirectory=ejob for ejob.yaml, ejob/%i for NAME.yaml),
 * or NULL when config_file is elsewhere. */
static char *unit_state_dir(const char *config_file)
{
    static const char etc[] = "/etc/ejob/";
    char *real = config_file != NULL ? realpath(config_file, NULL) : NULL;
    char *dir = NULL;
    size_t n = real != NULL ? strlen(real) : 0;
    if (n > sizeof etc + 4 && strncmp(real, etc, sizeof etc - 1) == 0 &&
        strcmp(real + n - 5, ".yaml") == 0 && strchr(real + sizeof etc - 1, '/') == NULL) {
        const char *name = real + sizeof etc - 1;
        int len = (int)(n - 5 - (sizeof etc - 1));
        dir = strcmp(name, "ejob.yaml") == 0 ? strdup("/var/lib/ejob")
                                             : ej__asprintf("/var/lib/ejob/%.*s", len, name);
    }
    free(real);
    return dir;
}

char *ejcli_daemon_state_dir(const char *explicit_dir, const char *config_file)
{
    const char *env = getenv("EJOB_STATE_DIR");
    if ((explicit_dir == NULL || explicit_dir[0] == '\0') && (env == NULL || env[0] == '\0')) {
        char *unit = unit_state_dir(config_file);
        struct stat st;
        if (unit != NULL && stat(unit, &st) == 0 && S_ISDIR(st.st_mode))
            return unit;
        free(unit);
    }
    return ejcli_state_dir(explicit_dir);
}

/* The digest: --digest or --digest-file, else the file's, else EJOB_DIGEST. */
static int resolve_digest(const char *cmd, const struct ejcli_common *c, const char *from_file,
                          struct ejcli_target *t)
{
    char *secret = NULL;
    if (from_file != NULL && c->digest == NULL && c->digest_file == NULL) {
        if ((secret = strdup(from_file)) == NULL)
            return ejcli_fail(cmd, "out of memory");
    } else {
        int drc = ejcli_digest(cmd, c->digest, c->digest_file, &secret);
        if (drc != 0)
            return drc;
    }
    if (secret == NULL)
        return 0;
    size_t n = strlen(secret);
    int rc = 0;
    if (n >= sizeof t->digest_buf) {
        rc = ej_cli_usage_error(cmd, "the digest is longer than %zu bytes",
                                sizeof t->digest_buf - 1);
    } else {
        memcpy(t->digest_buf, secret, n + 1);
        t->digest = t->digest_buf;
    }
    explicit_bzero(secret, n);
    free(secret);
    return rc;
}

/* The servers of --registry (the part before '/'). */
static int copy_servers(const char *cmd, const char *reg, struct ejcli_target *t)
{
    const char *slash = strchr(reg, '/');
    size_t slen = slash != NULL ? (size_t)(slash - reg) : strlen(reg);
    if (slen == 0 || slen >= sizeof(t->servers))
        return ej_cli_usage_error(cmd, "bad registry \"%s\": expected HOST:PORT[,...]/NAMESPACE",
                                  reg);
    memcpy(t->servers, reg, slen);
    t->servers[slen] = '\0';
    return 0;
}

/* The address of the embedded registry in the state directory. */
static int find_embedded(const char *cmd, const struct ejcli_common *c, struct ejcli_target *t)
{
    char *dir = ejcli_daemon_state_dir(c->state_dir, c->config);
    if (dir == NULL)
        return ejcli_fail(cmd, "out of memory");
    int ret = 0;
    if (ejcli_embedded_read_address(dir, t->servers, sizeof(t->servers)) != 0)
        ret = ejcli_fail(cmd,
                         "no registry given: pass --registry HOST:PORT/NAMESPACE, -c FILE or set "
                         "EJOB_REGISTRY (no embedded registry is running: %s/registry does not "
                         "exist%s)",
                         dir, c->config != NULL ? "; --state-dir names the daemon's" : "");
    else if (!ejcli_zk_ruok(t->servers, 2000))
        ret = ejcli_fail(cmd,
                         "the embedded registry at %s (from %s/registry) is not answering; `ejob "
                         "registry status` shows its state",
                         t->servers, dir);
    free(dir);
    t->embedded = ret == 0;
    return ret;
}

/* Servers, namespace and digest from the daemon file (-c) when given. */
static int resolve_with_file(const char *cmd, const struct ejcli_common *c, struct ejcli_target *t,
                             const struct ej_reg_center_config *rc_file, const char **ns)
{
    int rc = resolve_digest(cmd, c, rc_file != NULL ? rc_file->digest : NULL, t);
    if (rc != 0)
        return rc;
    const char *reg = c->registry;
    if (rc_file == NULL && (reg == NULL || reg[0] == '\0'))
        reg = getenv("EJOB_REGISTRY");
    if (rc_file != NULL && !rc_file->embedded) {
        if (snprintf(t->servers, sizeof t->servers, "%s", rc_file->server_lists) >=
            (int)sizeof t->servers)
            return ejcli_fail(cmd, "%s: serverLists is too long", c->config);
    } else if (reg != NULL && reg[0] != '\0') {
        if ((rc = copy_servers(cmd, reg, t)) != 0)
            return rc;
        /* --namespace wins over the namespace inside --registry. */
        const char *slash = strchr(reg, '/');
        if ((*ns == NULL || (*ns)[0] == '\0') && slash != NULL)
            *ns = slash + 1;
    } else if ((rc = find_embedded(cmd, c, t)) != 0) {
        return rc;
    }
    if (rc_file != NULL && (*ns == NULL || (*ns)[0] == '\0'))
        *ns = rc_file->name_space;
    return 0;
}

int ejcli_resolve(const char *cmd, const struct ejcli_common *c, struct ejcli_target *t)
{
    memset(t, 0, sizeof(*t));
    if (c->config != NULL && c->registry != NULL)
        return ej_cli_usage_error(cmd, "give --registry or -c, not both");
    struct ej_daemon_config file;
    bool loaded = false;
    if (c->config != NULL) {
        struct ej_config_errors errs;
        ej_config_errors_init(&errs);
        int lrc = ej_daemon_config_load_file(c->config, &file, &errs);
        for (size_t i = 0; i < errs.count; i++)
            fprintf(stderr, "%s\n", errs.messages[i]);
        ej_config_errors_fini(&errs);
        if (lrc != 0)
            return ej_cli_usage_error(cmd, "-c %s: %s", c->config, ej_strerror(lrc));
        loaded = true;
    }
    /* -n first; with -c the file's namespace comes before EJOB_NAMESPACE. */
    const char *ns = c->namespace_;
    if ((ns == NULL || ns[0] == '\0') && !loaded)
        ns = getenv("EJOB_NAMESPACE");
    int rc = resolve_with_file(cmd, c, t, loaded ? &file.reg_center : NULL, &ns);
    if (rc == 0 && (ns == NULL || ns[0] == '\0'))
        rc = ej_cli_usage_error(cmd, "no namespace: use --registry HOST:PORT/NAMESPACE, "
                                     "--namespace NS, -c FILE or EJOB_NAMESPACE");
    else if (rc == 0 && (!valid_namespace(ns) || strlen(ns) >= sizeof(t->namespace_)))
        rc = ej_cli_usage_error(cmd, "bad namespace \"%s\"", ns);
    if (rc == 0)
        snprintf(t->namespace_, sizeof(t->namespace_), "%s", ns);
    if (loaded)
        ej_daemon_config_fini(&file);
    return rc;
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
    if (!ej_layout_is_job_name(job))
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
