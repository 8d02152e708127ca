/* Settings of `ejob console`: the YAML file, defaults and checks. */
#include <arpa/inet.h>
#include <errno.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include <yaml.h>

#include "common/util.h"
#include "console/internal.h"
#include "console/web.h"
#include "ejob/config.h"
#include "ejob/error.h"
#include "ejob/trace.h"

#define MAX_SETTINGS_BYTES (64 * 1024)

void ej_console_settings_init(struct ej_console_settings *s)
{
    memset(s, 0, sizeof(*s));
    s->session_ttl_seconds = 1800;
    s->connect_timeout_ms = 15000;
    s->idle_timeout_seconds = 10;
    s->request_timeout_seconds = 30;
}

void ej_console_settings_fini(struct ej_console_settings *s)
{
    if (s == NULL)
        return;
    free(s->listen);
    free(s->tls_cert_file);
    free(s->tls_key_file);
    free(s->audit_log);
    for (size_t i = 0; i < s->account_count; i++)
        ej__console_account_fini(&s->accounts[i]);
    free(s->accounts);
    for (size_t i = 0; i < s->registry_count; i++) {
        free(s->registries[i].name);
        free(s->registries[i].servers);
        free(s->registries[i].namespace_);
        free(s->registries[i].digest);
    }
    free(s->registries);
    free(s->history_store);
    free(s->history_password_file);
    for (size_t i = 0; i < s->allowed_host_count; i++)
        free(s->allowed_hosts[i]);
    free(s->allowed_hosts);
    free(s->tokens_file);
    memset(s, 0, sizeof(*s));
}

void ej__console_account_fini(struct ej_console_account *a)
{
    free(a->name);
    free(a->password_hash);
    for (size_t i = 0; i < a->grant_count; i++)
        free(a->grants[i].registry);
    free(a->grants);
    memset(a, 0, sizeof(*a));
}

int ej__console_account_copy(struct ej_console_account *dst, const struct ej_console_account *src)
{
    memset(dst, 0, sizeof(*dst));
    dst->name = strdup(src->name);
    dst->password_hash = strdup(src->password_hash);
    dst->role = src->role;
    if (src->grant_count > 0)
        dst->grants = calloc(src->grant_count, sizeof(*dst->grants));
    if (dst->name == NULL || dst->password_hash == NULL ||
        (src->grant_count > 0 && dst->grants == NULL))
        return EJ_ENOMEM;
    for (size_t i = 0; i < src->grant_count; i++) {
        dst->grants[i].role = src->grants[i].role;
        if ((dst->grants[i].registry = strdup(src->grants[i].registry)) == NULL)
            return EJ_ENOMEM;
        dst->grant_count++;
    }
    return 0;
}

static char *dup_or_null(const char *v)
{
    return v != NULL ? strdup(v) : NULL;
}

int ej_console_settings_add_registry(struct ej_console_settings *s, const char *name,
                                     const char *servers, const char *namespace_,
                                     const char *digest)
{
    if (s == NULL || servers == NULL || namespace_ == NULL)
        return EJ_EINVAL;
    struct ej_console_registry *grown =
        realloc(s->registries, (s->registry_count + 1) * sizeof(*grown));
    if (grown == NULL)
        return EJ_ENOMEM;
    s->registries = grown;
    struct ej_console_registry *r = &grown[s->registry_count];
    r->name = strdup(name != NULL && name[0] != '\0' ? name : namespace_);
    r->servers = strdup(servers);
    r->namespace_ = strdup(namespace_);
    r->digest = dup_or_null(digest);
    s->registry_count++;
    if (r->name == NULL || r->servers == NULL || r->namespace_ == NULL ||
        (digest != NULL && r->digest == NULL))
        return EJ_ENOMEM;
    return 0;
}

/* ---------------------------------------------------------------- YAML */

struct loader {
    yaml_document_t doc;
    const char *file;
    char *err;
    size_t errlen;
    unsigned mode;   /* of the file; 0: not a file */
    const char *dir; /* of the file, for relative paths; NULL: cwd */
};

/* path as given, or relative to the settings file's directory. */
static char *relative_path(const struct loader *l, const char *path)
{
    return path[0] == '/' || l->dir == NULL ? strdup(path) : ej__asprintf("%s/%s", l->dir, path);
}

static int fail_at(struct loader *l, yaml_node_t *n, const char *fmt, ...) EJ_PRINTF(3, 4);
static int fail_at(struct loader *l, yaml_node_t *n, const char *fmt, ...)
{
    char msg[512];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(msg, sizeof msg, fmt, ap);
    va_end(ap);
    return ej__console_err(EJ_ECONFIG, l->err, l->errlen, "%s:%zu:%zu: %s", l->file,
                           n != NULL ? n->start_mark.line + 1 : 0,
                           n != NULL ? n->start_mark.column + 1 : 0, msg);
}

static const char *scalar(yaml_node_t *n)
{
    return n != NULL && n->type == YAML_SCALAR_NODE ? (const char *)n->data.scalar.value : NULL;
}

static int take_string(struct loader *l, yaml_node_t *v, const char *key, char **out)
{
    const char *s = scalar(v);
    if (s == NULL)
        return fail_at(l, v, "%s: expected a string", key);
    free(*out);
    *out = strdup(s);
    return *out != NULL ? 0 : EJ_ENOMEM;
}

static int take_int(struct loader *l, yaml_node_t *v, const char *key, int min, int max, int *out)
{
    const char *s = scalar(v);
    char *end = NULL;
    errno = 0;
    long n = s != NULL ? strtol(s, &end, 10) : 0;
    if (s == NULL || s[0] == '\0' || *end != '\0' || errno != 0 || n < min || n > max) {
        char what[160];
        snprintf(what, sizeof what, "%s: expected an integer %d..%d", key, min, max);
        return fail_at(l, v, "%s", what);
    }
    *out = (int)n;
    return 0;
}

typedef int (*pair_fn)(struct loader *l, const char *key, yaml_node_t *value, void *target);

/* Call fn for each key of a mapping. */
static int each_pair(struct loader *l, yaml_node_t *map, const char *what, pair_fn fn, void *target)
{
    if (map == NULL || map->type != YAML_MAPPING_NODE)
        return fail_at(l, map, "%s: expected a mapping", what);
    for (yaml_node_pair_t *p = map->data.mapping.pairs.start; p < map->data.mapping.pairs.top;
         p++) {
        yaml_node_t *k = yaml_document_get_node(&l->doc, p->key);
        yaml_node_t *v = yaml_document_get_node(&l->doc, p->value);
        const char *key = scalar(k);
        if (key == NULL)
            return fail_at(l, k, "%s: keys must be strings", what);
        int rc = fn(l, key, v, target);
        if (rc != 0)
            return rc;
    }
    return 0;
}

/* A digest (a ZooKeeper password) inline: the settings file must not be
 * readable by everyone (the daemon's rule for its YAML, made strict here). */
static int inline_digest(struct loader *l, yaml_node_t *v, struct ej_console_registry *r)
{
    int rc = take_string(l, v, "digest", &r->digest);
    if (rc != 0)
        return rc;
    if (strchr(r->digest, ':') == NULL || r->digest[0] == ':')
        return fail_at(l, v, "digest: must be \"user:password\"");
    if (l->mode & S_IROTH)
        return fail_at(l, v,
                       "digest: %s holds a ZooKeeper password and everyone may read it (mode "
                       "%03o): chmod o-r %s, or move it to a digestFile",
                       l->file, l->mode & 0777u, l->file);
    return 0;
}

/* digestFile: read now with the daemon's checks (config/secret.c). */
static int digest_file(struct loader *l, yaml_node_t *v, struct ej_console_registry *r)
{
    const char *name = scalar(v);
    if (name == NULL || name[0] == '\0')
        return fail_at(l, v, "digestFile: expected a file name");
    char *path = relative_path(l, name);
    if (path == NULL)
        return EJ_ENOMEM;
    char warn[600], why[600];
    free(r->digest);
    r->digest = NULL;
    int rc = ej_config_read_secret_file(path, &r->digest, warn, sizeof warn, why, sizeof why);
    free(path);
    if (rc == EJ_ENOMEM)
        return rc;
    if (rc != 0)
        return fail_at(l, v, "digestFile: %s", why);
    if (warn[0] != '\0')
        fprintf(stderr, "ejob console: warning: %s\n", warn);
    return 0;
}

static int registry_pair(struct loader *l, const char *key, yaml_node_t *v, void *target)
{
    struct ej_console_registry *r = target;
    if (strcmp(key, "name") == 0)
        return take_string(l, v, key, &r->name);
    if (strcmp(key, "serverLists") == 0)
        return take_string(l, v, key, &r->servers);
    if (strcmp(key, "namespace") == 0)
        return take_string(l, v, key, &r->namespace_);
    if ((strcmp(key, "digest") == 0 || strcmp(key, "digestFile") == 0) && r->digest != NULL)
        return fail_at(l, v, "registries: give digest or digestFile, not both");
    if (strcmp(key, "digest") == 0)
        return inline_digest(l, v, r);
    if (strcmp(key, "digestFile") == 0)
        return digest_file(l, v, r);
    return fail_at(l, v, "registries: unknown key \"%s\"", key);
}

static int grant_pair(struct loader *l, const char *key, yaml_node_t *v, void *target)
{
    struct ej_console_account *a = target;
    ej_console_role role;
    if (!ej_console_role_parse(scalar(v), &role))
        return fail_at(l, v, "roles.%s: expected viewer, operator or admin", key);
    struct ej_console_grant *grown = realloc(a->grants, (a->grant_count + 1) * sizeof(*grown));
    if (grown == NULL)
        return EJ_ENOMEM;
    a->grants = grown;
    if ((grown[a->grant_count].registry = strdup(key)) == NULL)
        return EJ_ENOMEM;
    grown[a->grant_count++].role = role;
    return 0;
}

static int account_pair(struct loader *l, const char *key, yaml_node_t *v, void *target)
{
    struct ej_console_account *a = target;
    if (strcmp(key, "name") == 0)
        return take_string(l, v, key, &a->name);
    if (strcmp(key, "passwordHash") == 0)
        return take_string(l, v, key, &a->password_hash);
    if (strcmp(key, "role") == 0) {
        if (!ej_console_role_parse(scalar(v), &a->role))
            return fail_at(l, v, "%s: expected viewer, operator or admin (guest: viewer)", "role");
        return 0;
    }
    if (strcmp(key, "roles") == 0)
        return each_pair(l, v, key, grant_pair, a);
    if (strcmp(key, "password") == 0)
        return fail_at(l, v,
                       "%s: plain passwords are not accepted; store passwordHash "
                       "(ejob console hash-password)",
                       "password");
    return fail_at(l, v, "accounts: unknown key \"%s\"", key);
}

static int check_account(struct loader *l, yaml_node_t *n, const struct ej_console_account *a)
{
    if (a->name == NULL || a->name[0] == '\0')
        return fail_at(l, n, "%s: an account needs a name", "accounts");
    if (a->password_hash == NULL ||
        (strncmp(a->password_hash, "$y$", 3) != 0 && strncmp(a->password_hash, "$6$", 3) != 0))
        return fail_at(l, n,
                       "account \"%s\": passwordHash must be a yescrypt or SHA-512 crypt hash "
                       "($y$... or $6$...; ejob console hash-password makes one)",
                       a->name);
    return 0;
}

static int load_list(struct loader *l, yaml_node_t *seq, struct ej_console_settings *s,
                     bool accounts)
{
    const char *what = accounts ? "accounts" : "registries";
    if (seq == NULL || seq->type != YAML_SEQUENCE_NODE)
        return fail_at(l, seq, "%s: expected a list", what);
    for (yaml_node_item_t *i = seq->data.sequence.items.start; i < seq->data.sequence.items.top;
         i++) {
        yaml_node_t *n = yaml_document_get_node(&l->doc, *i);
        int rc;
        if (accounts) {
            struct ej_console_account a = {0};
            rc = each_pair(l, n, what, account_pair, &a);
            if (rc == 0)
                rc = check_account(l, n, &a);
            struct ej_console_account *grown =
                rc == 0 ? realloc(s->accounts, (s->account_count + 1) * sizeof(a)) : NULL;
            if (grown != NULL) {
                s->accounts = grown;
                grown[s->account_count++] = a;
            } else {
                ej__console_account_fini(&a);
                if (rc == 0)
                    rc = EJ_ENOMEM;
            }
        } else {
            struct ej_console_registry r = {0};
            rc = each_pair(l, n, what, registry_pair, &r);
            if (rc == 0 && (r.servers == NULL || r.namespace_ == NULL))
                rc = fail_at(l, n, "%s: each needs serverLists and namespace", what);
            if (rc == 0)
                rc = ej_console_settings_add_registry(s, r.name, r.servers, r.namespace_, r.digest);
            free(r.name);
            free(r.servers);
            free(r.namespace_);
            if (r.digest != NULL)
                explicit_bzero(r.digest, strlen(r.digest));
            free(r.digest);
        }
        if (rc != 0)
            return rc;
    }
    return 0;
}

static int tls_pair(struct loader *l, const char *key, yaml_node_t *v, void *target)
{
    struct ej_console_settings *s = target;
    if (strcmp(key, "certFile") == 0)
        return take_string(l, v, key, &s->tls_cert_file);
    if (strcmp(key, "keyFile") == 0)
        return take_string(l, v, key, &s->tls_key_file);
    return fail_at(l, v, "tls: unknown key \"%s\"", key);
}

static int history_pair(struct loader *l, const char *key, yaml_node_t *v, void *target)
{
    struct ej_console_settings *s = target;
    if (strcmp(key, "store") == 0)
        return take_string(l, v, key, &s->history_store);
    if (strcmp(key, "passwordFile") == 0)
        return take_string(l, v, key, &s->history_password_file);
    if (strcmp(key, "password") == 0)
        return fail_at(l, v,
                       "history: a password does not go in this file; name a passwordFile "
                       "or set EJOB_TRACING_PASSWORD");
    return fail_at(l, v, "history: unknown key \"%s\"", key);
}

static int allowed_hosts(struct loader *l, yaml_node_t *seq, struct ej_console_settings *s)
{
    if (seq == NULL || seq->type != YAML_SEQUENCE_NODE)
        return fail_at(l, seq, "allowedHosts: expected a list of host names");
    for (yaml_node_item_t *i = seq->data.sequence.items.start; i < seq->data.sequence.items.top;
         i++) {
        yaml_node_t *n = yaml_document_get_node(&l->doc, *i);
        const char *h = scalar(n);
        if (h == NULL || h[0] == '\0' || strcspn(h, ":/ \t") != strlen(h))
            return fail_at(l, n, "allowedHosts: expected a host name without port, got \"%s\"",
                           h != NULL ? h : "");
        char **grown = realloc(s->allowed_hosts, (s->allowed_host_count + 1) * sizeof(*grown));
        if (grown == NULL)
            return EJ_ENOMEM;
        s->allowed_hosts = grown;
        if ((grown[s->allowed_host_count] = strdup(h)) == NULL)
            return EJ_ENOMEM;
        s->allowed_host_count++;
    }
    return 0;
}

static int top_pair(struct loader *l, const char *key, yaml_node_t *v, void *target)
{
    struct ej_console_settings *s = target;
    if (strcmp(key, "listen") == 0)
        return take_string(l, v, key, &s->listen);
    if (strcmp(key, "auditLog") == 0)
        return take_string(l, v, key, &s->audit_log);
    if (strcmp(key, "sessionTimeoutSeconds") == 0)
        return take_int(l, v, key, 1, 7 * 24 * 3600, &s->session_ttl_seconds);
    if (strcmp(key, "connectionTimeoutMilliseconds") == 0)
        return take_int(l, v, key, 100, 600000, &s->connect_timeout_ms);
    if (strcmp(key, "idleTimeoutSeconds") == 0)
        return take_int(l, v, key, 1, 3600, &s->idle_timeout_seconds);
    if (strcmp(key, "requestTimeoutSeconds") == 0)
        return take_int(l, v, key, 1, 3600, &s->request_timeout_seconds);
    if (strcmp(key, "tls") == 0)
        return each_pair(l, v, key, tls_pair, s);
    if (strcmp(key, "registries") == 0)
        return load_list(l, v, s, false);
    if (strcmp(key, "accounts") == 0)
        return load_list(l, v, s, true);
    if (strcmp(key, "history") == 0)
        return each_pair(l, v, key, history_pair, s);
    if (strcmp(key, "allowedHosts") == 0)
        return allowed_hosts(l, v, s);
    if (strcmp(key, "tokensFile") == 0) {
        const char *f = scalar(v);
        if (f == NULL || f[0] == '\0')
            return fail_at(l, v, "tokensFile: expected a file name");
        free(s->tokens_file);
        s->tokens_file = relative_path(l, f);
        return s->tokens_file != NULL ? 0 : EJ_ENOMEM;
    }
    return fail_at(l, v, "unknown key \"%s\"", key);
}

int ej__console_settings_parse(const char *text, size_t len, const char *name,
                               struct ej_console_settings *s, char *err, size_t errlen)
{
    return ej__console_settings_parse_file(text, len, name, 0, s, err, errlen);
}

int ej__console_settings_parse_file(const char *text, size_t len, const char *name, unsigned mode,
                                    struct ej_console_settings *s, char *err, size_t errlen)
{
    if (len > MAX_SETTINGS_BYTES)
        return ej__console_err(EJ_ECONFIG, err, errlen, "%s: larger than %d bytes", name,
                               MAX_SETTINGS_BYTES);
    yaml_parser_t parser;
    if (!yaml_parser_initialize(&parser))
        return EJ_ENOMEM;
    yaml_parser_set_input_string(&parser, (const unsigned char *)text, len);
    char *dir = NULL;
    if (mode != 0 && strchr(name, '/') != NULL && (dir = strdup(name)) != NULL)
        *strrchr(dir, '/') = '\0';
    struct loader l = {.file = name, .err = err, .errlen = errlen, .mode = mode, .dir = dir};
    int rc = 0;
    if (!yaml_parser_load(&parser, &l.doc)) {
        rc = ej__console_err(EJ_EPARSE, err, errlen, "%s:%zu:%zu: %s", name,
                             parser.problem_mark.line + 1, parser.problem_mark.column + 1,
                             parser.problem != NULL ? parser.problem : "YAML syntax error");
        yaml_parser_delete(&parser);
        return rc;
    }
    yaml_node_t *root = yaml_document_get_root_node(&l.doc);
    if (root != NULL)
        rc = each_pair(&l, root, "settings", top_pair, s);
    if (rc == 0 && mode != 0 && s->tokens_file == NULL &&
        (s->tokens_file = relative_path(&l, "console-tokens.json")) == NULL)
        rc = EJ_ENOMEM;
    yaml_document_delete(&l.doc);
    yaml_parser_delete(&parser);
    free(dir);
    return rc;
}

int ej_console_settings_load(const char *path, struct ej_console_settings *s, char *err,
                             size_t errlen)
{
    FILE *f = fopen(path, "rb");
    if (f == NULL)
        return ej__console_err(-errno, err, errlen, "%s: %s", path, strerror(errno));
    struct stat st;
    if (fstat(fileno(f), &st) != 0 || (st.st_mode & (S_IWGRP | S_IWOTH)) != 0) {
        fclose(f);
        return ej__console_err(EJ_ECONFIG, err, errlen,
                               "%s: others may write it, and it holds the console's accounts "
                               "(chmod go-w %s)",
                               path, path);
    }
    if (st.st_uid != geteuid() && st.st_uid != 0) {
        fclose(f);
        return ej__console_err(EJ_ECONFIG, err, errlen,
                               "%s: owned by user %u, not by this user (%u) or root, and it holds "
                               "the console's accounts (chown it)",
                               path, (unsigned)st.st_uid, (unsigned)geteuid());
    }
    char *buf = malloc(MAX_SETTINGS_BYTES + 1);
    size_t n = buf != NULL ? fread(buf, 1, MAX_SETTINGS_BYTES + 1, f) : 0;
    fclose(f);
    if (buf == NULL)
        return EJ_ENOMEM;
    int rc = ej__console_settings_parse_file(buf, n, path, (unsigned)st.st_mode, s, err, errlen);
    free(buf);
    return rc;
}

/* ---------------------------------------------------------------- checks */

int ej__console_parse_listen(const char *listen, struct sockaddr_in *out)
{
    memset(out, 0, sizeof(*out));
    const char *colon = listen != NULL ? strrchr(listen, ':') : NULL;
    if (colon == NULL || colon == listen || (size_t)(colon - listen) >= INET_ADDRSTRLEN)
        return EJ_EINVAL;
    char host[INET_ADDRSTRLEN];
    memcpy(host, listen, (size_t)(colon - listen));
    host[colon - listen] = '\0';
    char *end = NULL;
    long port = strtol(colon + 1, &end, 10);
    if (colon[1] == '\0' || *end != '\0' || port < 0 || port > 65535)
        return EJ_EINVAL;
    out->sin_family = AF_INET;
    out->sin_port = htons((uint16_t)port);
    if (inet_pton(AF_INET, host, &out->sin_addr) != 1)
        return EJ_EINVAL;
    return 0;
}

static bool registry_known(const struct ej_console_settings *s, const char *name)
{
    for (size_t i = 0; i < s->registry_count; i++)
        if (strcmp(s->registries[i].name, name) == 0)
            return true;
    return false;
}

int ej_console_settings_check(const struct ej_console_settings *s, char *err, size_t errlen)
{
    struct sockaddr_in sa;
    const char *listen = s->listen != NULL ? s->listen : EJ__CONSOLE_DEFAULT_LISTEN;
    if (ej__console_parse_listen(listen, &sa) != 0)
        return ej__console_err(EJ_ECONFIG, err, errlen,
                               "listen: expected IPV4ADDR:PORT (e.g. 127.0.0.1:8899), got \"%s\"",
                               listen);
    bool loopback = (ntohl(sa.sin_addr.s_addr) >> 24) == 127;
    if (s->no_auth && s->account_count > 0)
        return ej__console_err(EJ_ECONFIG, err, errlen,
                               "--no-auth with accounts configured: drop one of them");
    if (s->no_auth && !loopback)
        return ej__console_err(EJ_ECONFIG, err, errlen,
                               "--no-auth is only allowed on a loopback address, not %s", listen);
    if (!s->no_auth && s->account_count == 0)
        return ej__console_err(EJ_ECONFIG, err, errlen,
                               "no accounts: add accounts (with passwordHash) to the settings "
                               "file, or pass --no-auth to serve without login on loopback");
    if ((s->tls_cert_file == NULL) != (s->tls_key_file == NULL))
        return ej__console_err(EJ_ECONFIG, err, errlen, "tls: give both certFile and keyFile");
    if (s->registry_count == 0)
        return ej__console_err(EJ_ECONFIG, err, errlen, "no registry to show");
    for (size_t i = 0; i < s->registry_count; i++) {
        if (!ej_layout_is_segment(s->registries[i].name))
            return ej__console_err(EJ_ECONFIG, err, errlen, "registry name \"%s\" is not usable",
                                   s->registries[i].name);
        for (size_t k = 0; k < i; k++)
            if (strcmp(s->registries[i].name, s->registries[k].name) == 0)
                return ej__console_err(EJ_ECONFIG, err, errlen, "two registries are named \"%s\"",
                                       s->registries[i].name);
    }
    if (s->history_store != NULL) {
        struct ej_trace_target t;
        char why[256];
        if (ej_trace_target_parse(s->history_store, &t, why, sizeof why) != 0)
            return ej__console_err(EJ_ECONFIG, err, errlen, "history store: %s", why);
    } else if (s->history_password_file != NULL) {
        return ej__console_err(EJ_ECONFIG, err, errlen, "history: a passwordFile without a store");
    }
    for (size_t i = 0; i < s->account_count; i++)
        for (size_t g = 0; g < s->accounts[i].grant_count; g++)
            if (!registry_known(s, s->accounts[i].grants[g].registry))
                return ej__console_err(EJ_ECONFIG, err, errlen,
                                       "account \"%s\": roles names registry \"%s\", which is "
                                       "not one of the console's",
                                       s->accounts[i].name, s->accounts[i].grants[g].registry);
    for (size_t i = 0; i < s->account_count; i++)
        for (size_t k = 0; k < i; k++)
            if (strcmp(s->accounts[i].name, s->accounts[k].name) == 0)
                return ej__console_err(EJ_ECONFIG, err, errlen, "two accounts are named \"%s\"",
                                       s->accounts[i].name);
    return 0;
}
