/*
 * API tokens of `ejob console`, for automation: `Authorization: Bearer
 * ejob_ID_SECRET` on the REST API. The tokens file (JSON, mode 0600) holds
 * for each token its id, name, role, creation, expiry, last use and a
 * crypt(3) hash of its secret; the secret itself is shown once, by
 * `ejob console token create`. The console reads the file again whenever
 * it changes (a token created or revoked takes effect at once) and writes
 * a token's last use back at most once a minute. Writers lock FILE.lock.
 *   {"tokens": [{"id": "3f9c...", "name": "ci", "role": "operator",
 *                "hash": "$5$...", "created": 1795000000,
 *                "expires": 1802776000, "lastUsed": null}]}
 */
#include <crypt.h>
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/file.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include "common/check.h"
#include "common/util.h"
#include "console/internal.h"
#include "console/web.h"
#include "ejob/config.h"
#include "ejob/error.h"

#define ID_HEX 16
#define SECRET_HEX 64
#define PREFIX "ejob_"
#define LAST_USE_EVERY_S 60

struct ej__console_tokens {
    json_t *doc; /* the file as read */
    struct stat st;
};

void ej__console_tokens_free(struct ej__console_tokens *t)
{
    if (t == NULL)
        return;
    json_decref(t->doc);
    free(t);
}

/* Read the tokens file into *doc ({"tokens": []} when it does not exist). */
static int read_doc(const char *file, json_t **doc, struct stat *st, char *err, size_t errlen)
{
    *doc = NULL;
    int fd = open(file, O_RDONLY | O_CLOEXEC | O_NOFOLLOW);
    if (fd < 0 && errno == ENOENT) {
        memset(st, 0, sizeof(*st));
        *doc = json_pack("{s:[]}", "tokens");
        return *doc != NULL ? 0 : EJ_ENOMEM;
    }
    if (fd < 0)
        return ej__console_err(-errno, err, errlen, "%s: %s", file, strerror(errno));
    int rc = 0;
    if (fstat(fd, st) != 0 || !S_ISREG(st->st_mode))
        rc = ej__console_err(EJ_ECONFIG, err, errlen, "%s: not a regular file", file);
    else
        rc = ej_config_check_secret_mode(file, (unsigned)st->st_mode, NULL, 0, err, errlen);
    json_error_t jerr;
    if (rc == 0 && (*doc = json_loadfd(fd, 0, &jerr)) == NULL)
        rc = ej__console_err(EJ_EPARSE, err, errlen, "%s:%d:%d: %s", file, jerr.line, jerr.column,
                             jerr.text);
    if (rc == 0 && !json_is_array(json_object_get(*doc, "tokens"))) {
        rc = ej__console_err(EJ_ECONFIG, err, errlen, "%s: expected {\"tokens\": [...]}", file);
        json_decref(*doc);
        *doc = NULL;
    }
    close(fd);
    return rc;
}

/* Write doc to file through a temporary file and rename (mode 0600). */
static int write_doc(const char *file, json_t *doc, char *err, size_t errlen)
{
    char *tmp = ej__asprintf("%s.tmp", file);
    if (tmp == NULL)
        return EJ_ENOMEM;
    int fd = open(tmp, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC | O_NOFOLLOW, 0600);
    int rc = 0;
    if (fd < 0 || json_dumpfd(doc, fd, JSON_INDENT(2)) != 0 || write(fd, "\n", 1) != 1 ||
        fsync(fd) != 0)
        rc = ej__console_err(-errno, err, errlen, "%s: %s", tmp, strerror(errno));
    if (fd >= 0)
        close(fd);
    if (rc == 0 && rename(tmp, file) != 0)
        rc = ej__console_err(-errno, err, errlen, "%s: %s", file, strerror(errno));
    if (rc != 0)
        unlink(tmp);
    free(tmp);
    return rc;
}

/* An exclusive lock on FILE.lock; returns its fd or -errno. */
static int lock_file(const char *file, char *err, size_t errlen)
{
    char *path = ej__asprintf("%s.lock", file);
    if (path == NULL)
        return EJ_ENOMEM;
    int fd = open(path, O_RDWR | O_CREAT | O_CLOEXEC | O_NOFOLLOW, 0600);
    if (fd < 0 || flock(fd, LOCK_EX) != 0) {
        int e = errno;
        ej__console_err(-e, err, errlen, "%s: %s", path, strerror(e));
        if (fd >= 0)
            close(fd);
        fd = -e;
    }
    free(path);
    return fd;
}

static int crypt_secret(const char *secret, char *out, size_t len)
{
    unsigned char rnd[16];
    char salt[CRYPT_GENSALT_OUTPUT_SIZE];
    char hexsalt[33];
    if (ej__console_random_hex(hexsalt, 32) != 0)
        return EJ_EAGAIN;
    memcpy(rnd, hexsalt, sizeof rnd);
    /* The secret is 256 random bits: a slow hash adds nothing, and a
     * request checks it. */
    if (crypt_gensalt_rn("$5$", 1000, (const char *)rnd, sizeof rnd, salt, sizeof salt) == NULL)
        return -errno;
    struct crypt_data *cd = calloc(1, sizeof(*cd));
    if (cd == NULL)
        return EJ_ENOMEM;
    const char *h = crypt_r(secret, salt, cd);
    int rc = h != NULL && h[0] != '*' && strlen(h) < len ? 0 : EJ_EINVAL;
    if (rc == 0)
        strcpy(out, h);
    free(cd);
    return rc;
}

static json_t *find_token(json_t *doc, const char *key, const char *value)
{
    size_t i;
    json_t *t;
    json_array_foreach(json_object_get(doc, "tokens"), i, t)
    {
        const char *v = json_string_value(json_object_get(t, key));
        if (v != NULL && strcmp(v, value) == 0)
            return t;
    }
    return NULL;
}

int ej_console_token_create(const char *file, const char *name, ej_console_role role,
                            const struct ej_console_grant *grants, size_t grant_count,
                            int64_t expires, char *token, size_t token_len, char *err,
                            size_t errlen)
{
    if (file == NULL || name == NULL || name[0] == '\0' || token_len < 128)
        return ej__console_err(EJ_EINVAL, err, errlen, "a token needs a name");
    if (grant_count > EJ__CONSOLE_TOKEN_GRANTS)
        return ej__console_err(EJ_EINVAL, err, errlen, "a token has roles on at most %d registries",
                               EJ__CONSOLE_TOKEN_GRANTS);
    char id[ID_HEX + 1], secret[SECRET_HEX + 1], hash[256];
    int rc = ej__console_random_hex(id, ID_HEX);
    if (rc == 0)
        rc = ej__console_random_hex(secret, SECRET_HEX);
    if (rc == 0)
        rc = crypt_secret(secret, hash, sizeof hash);
    if (rc != 0)
        return ej__console_err(rc, err, errlen, "cannot make a token: %s", ej_strerror(rc));
    int lock = lock_file(file, err, errlen);
    if (lock < 0)
        return lock;
    json_t *doc = NULL;
    struct stat st;
    rc = read_doc(file, &doc, &st, err, errlen);
    if (rc == 0 && find_token(doc, "name", name) != NULL)
        rc = ej__console_err(EJ_EBUSY, err, errlen,
                             "%s: a token is already named \"%s\" (revoke it first)", file, name);
    if (rc == 0) {
        json_t *roles = json_object();
        for (size_t i = 0; i < grant_count; i++)
            json_object_set_new(roles, grants[i].registry,
                                json_string(ej_console_role_name(grants[i].role)));
        json_t *t = json_pack("{s:s,s:s,s:s,s:o,s:s,s:I,s:o,s:n}", "id", id, "name", name, "role",
                              ej_console_role_name(role), "roles", roles, "hash", hash, "created",
                              (json_int_t)time(NULL), "expires",
                              expires > 0 ? json_integer(expires) : json_null(), "lastUsed");
        json_array_append_new(json_object_get(doc, "tokens"), t);
        rc = write_doc(file, doc, err, errlen);
    }
    json_decref(doc);
    close(lock);
    if (rc == 0)
        snprintf(token, token_len, PREFIX "%s_%s", id, secret);
    explicit_bzero(secret, sizeof secret);
    return rc;
}

int ej_console_token_revoke(const char *file, const char *name, char *err, size_t errlen)
{
    int lock = lock_file(file, err, errlen);
    if (lock < 0)
        return lock;
    json_t *doc = NULL;
    struct stat st;
    int rc = read_doc(file, &doc, &st, err, errlen);
    if (rc == 0) {
        json_t *list = json_object_get(doc, "tokens"), *t;
        size_t i, found = (size_t)-1;
        json_array_foreach(list, i, t)
        {
            const char *n = json_string_value(json_object_get(t, "name"));
            const char *id = json_string_value(json_object_get(t, "id"));
            if ((n != NULL && strcmp(n, name) == 0) || (id != NULL && strcmp(id, name) == 0))
                found = i;
        }
        if (found == (size_t)-1)
            rc =
                ej__console_err(EJ_ENOTFOUND, err, errlen, "%s: no token named \"%s\"", file, name);
        else
            json_array_remove(list, found);
    }
    if (rc == 0)
        rc = write_doc(file, doc, err, errlen);
    json_decref(doc);
    close(lock);
    return rc;
}

static void when(json_t *v, char *buf, size_t len)
{
    if (!json_is_integer(v)) {
        snprintf(buf, len, "-");
        return;
    }
    time_t t = (time_t)json_integer_value(v);
    struct tm tm;
    gmtime_r(&t, &tm);
    strftime(buf, len, "%Y-%m-%dT%H:%M:%SZ", &tm);
}

int ej_console_token_list(const char *file, FILE *out, char *err, size_t errlen)
{
    json_t *doc = NULL;
    struct stat st;
    int rc = read_doc(file, &doc, &st, err, errlen);
    if (rc != 0)
        return rc;
    fprintf(out, "%-20s %-16s %-8s %-20s %-20s %s\n", "NAME", "ID", "ROLE", "CREATED", "EXPIRES",
            "LAST USED");
    size_t i;
    json_t *t;
    json_array_foreach(json_object_get(doc, "tokens"), i, t)
    {
        char created[32], expires[32], used[32];
        when(json_object_get(t, "created"), created, sizeof created);
        when(json_object_get(t, "expires"), expires, sizeof expires);
        when(json_object_get(t, "lastUsed"), used, sizeof used);
        const char *name = json_string_value(json_object_get(t, "name"));
        const char *id = json_string_value(json_object_get(t, "id"));
        const char *role = json_string_value(json_object_get(t, "role"));
        char roles[512];
        snprintf(roles, sizeof roles, "%s", role ? role : "?");
        const char *reg;
        json_t *v;
        json_object_foreach(json_object_get(t, "roles"), reg, v)
        {
            size_t len = strlen(roles);
            snprintf(roles + len, sizeof roles - len, ",%s=%s", reg,
                     json_is_string(v) ? json_string_value(v) : "?");
        }
        fprintf(out, "%-20s %-16s %-8s %-20s %-20s %s\n", name ? name : "?", id ? id : "?", roles,
                created, expires, json_is_integer(json_object_get(t, "lastUsed")) ? used : "never");
    }
    json_decref(doc);
    return 0;
}

/* With tokens_mu held: the file as it is now. */
static json_t *current_doc_locked(ej_console_web *web)
{
    EJ_ASSERT_HELD(&web->tokens_mu);
    const char *file = web->settings.tokens_file;
    struct stat st;
    if (stat(file, &st) != 0)
        return NULL;
    struct ej__console_tokens *t = web->tokens;
    if (t != NULL && t->st.st_ino == st.st_ino && t->st.st_mtim.tv_sec == st.st_mtim.tv_sec &&
        t->st.st_mtim.tv_nsec == st.st_mtim.tv_nsec && t->st.st_size == st.st_size)
        return t->doc;
    json_t *doc = NULL;
    char err[512];
    if (read_doc(file, &doc, &st, err, sizeof err) != 0) {
        fprintf(stderr, "ejob console: API tokens refused: %s\n", err);
        return NULL;
    }
    if (t == NULL && (t = calloc(1, sizeof(*t))) == NULL) {
        json_decref(doc);
        return NULL;
    }
    json_decref(t->doc);
    t->doc = doc;
    t->st = st;
    web->tokens = t;
    return doc;
}

/* Write the token's last use back (at most once a minute). */
static void note_use(ej_console_web *web, const char *id, int64_t now)
{
    const char *file = web->settings.tokens_file;
    char err[512];
    int lock = lock_file(file, err, sizeof err);
    if (lock < 0)
        return;
    json_t *doc = NULL;
    struct stat st;
    if (read_doc(file, &doc, &st, err, sizeof err) == 0) {
        json_t *t = find_token(doc, "id", id);
        if (t != NULL) {
            json_object_set_new(t, "lastUsed", json_integer(now));
            write_doc(file, doc, err, sizeof err);
        }
    }
    json_decref(doc);
    close(lock);
}

/* A token's "roles" ({"registry": "role"}) into who's own storage. */
static void token_grants(json_t *roles, struct ej__console_principal *who)
{
    const char *registry;
    json_t *v;
    who->grants = who->token_grants;
    who->grant_count = 0;
    json_object_foreach(roles, registry, v)
    {
        ej_console_role r;
        if (who->grant_count == EJ__CONSOLE_TOKEN_GRANTS ||
            !ej_console_role_parse(json_string_value(v), &r))
            continue;
        size_t i = who->grant_count++;
        snprintf(who->token_registries[i], sizeof who->token_registries[i], "%s", registry);
        who->token_grants[i].registry = who->token_registries[i];
        who->token_grants[i].role = r;
    }
}

bool ej__console_token_auth(ej_console_web *web, const char *token,
                            struct ej__console_principal *who)
{
    if (web->settings.tokens_file == NULL || token == NULL ||
        strlen(token) != strlen(PREFIX) + ID_HEX + 1 + SECRET_HEX ||
        strncmp(token, PREFIX, strlen(PREFIX)) != 0 || token[strlen(PREFIX) + ID_HEX] != '_')
        return false;
    char id[ID_HEX + 1];
    memcpy(id, token + strlen(PREFIX), ID_HEX);
    id[ID_HEX] = '\0';
    const char *secret = token + strlen(PREFIX) + ID_HEX + 1;
    int64_t now = (int64_t)time(NULL);
    bool ok = false, write_use = false;
    ej__mutex_lock(&web->tokens_mu);
    json_t *doc = current_doc_locked(web);
    json_t *t = doc != NULL ? find_token(doc, "id", id) : NULL;
    json_t *exp = t != NULL ? json_object_get(t, "expires") : NULL;
    const char *hash = t != NULL ? json_string_value(json_object_get(t, "hash")) : NULL;
    ej_console_role role;
    if (hash != NULL && (!json_is_integer(exp) || json_integer_value(exp) > now) &&
        ej_console_role_parse(json_string_value(json_object_get(t, "role")), &role) &&
        ej_console_check_password(secret, hash)) {
        ok = true;
        snprintf(who->name, sizeof who->name, "%s", json_string_value(json_object_get(t, "name")));
        who->role = role;
        token_grants(json_object_get(t, "roles"), who);
        json_t *used = json_object_get(t, "lastUsed");
        write_use = !json_is_integer(used) || now - json_integer_value(used) >= LAST_USE_EVERY_S;
    }
    ej__mutex_unlock(&web->tokens_mu);
    if (write_use)
        note_use(web, id, now);
    return ok;
}
