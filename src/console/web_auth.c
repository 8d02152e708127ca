/* Accounts and their roles, password hashes (crypt(3) yescrypt; SHA-512
 * hashes made before still check), sessions and CSRF tokens. */
#include <crypt.h>
#include <errno.h>
#include <stdlib.h>
#include <string.h>
#include <sys/random.h>
#include <stdio.h>

#include "common/check.h"
#include "common/util.h"
#include "console/internal.h"
#include "console/web.h"
#include "ejob/error.h"

static int random_bytes(unsigned char *b, size_t n)
{
    size_t got = 0;
    while (got < n) {
        ssize_t r = getrandom(b + got, n - got, 0);
        if (r < 0 && errno == EINTR)
            continue;
        if (r <= 0)
            return r < 0 ? -errno : EJ_EAGAIN;
        got += (size_t)r;
    }
    return 0;
}

int ej__console_random_hex(char *out, size_t hex_len)
{
    unsigned char b[64];
    size_t n = hex_len / 2;
    if (n > sizeof b)
        return EJ_EINVAL;
    int rc = random_bytes(b, n);
    if (rc != 0)
        return rc;
    static const char hex[] = "0123456789abcdef";
    for (size_t i = 0; i < n; i++) {
        out[2 * i] = hex[b[i] >> 4];
        out[2 * i + 1] = hex[b[i] & 15];
    }
    out[2 * n] = '\0';
    return 0;
}

bool ej__console_token_equal(const char *a, const char *b)
{
    if (a == NULL || b == NULL)
        return false;
    size_t la = strlen(a), lb = strlen(b);
    unsigned char diff = (unsigned char)(la != lb);
    size_t n = la < lb ? la : lb;
    for (size_t i = 0; i < n; i++)
        diff |= (unsigned char)(a[i] ^ b[i]);
    return diff == 0 && la > 0;
}

int ej_console_hash_password(const char *password, char *out, size_t len)
{
    if (password == NULL || out == NULL || len < 128 || strlen(password) < EJ_CONSOLE_MIN_PASSWORD)
        return EJ_EINVAL;
    char salt[CRYPT_GENSALT_OUTPUT_SIZE];
    unsigned char rnd[16];
    int rc = random_bytes(rnd, sizeof rnd);
    if (rc != 0)
        return rc;
    if (crypt_gensalt_rn("$y$", 0, (const char *)rnd, sizeof rnd, salt, sizeof salt) == NULL)
        return -errno;
    struct crypt_data *cd = calloc(1, sizeof(*cd));
    if (cd == NULL)
        return EJ_ENOMEM;
    const char *h = crypt_r(password, salt, cd);
    rc = 0;
    if (h == NULL || h[0] == '*' || strlen(h) >= len)
        rc = EJ_EINVAL;
    else
        strcpy(out, h);
    explicit_bzero(cd, sizeof(*cd));
    free(cd);
    return rc;
}

bool ej_console_check_password(const char *password, const char *hash)
{
    if (password == NULL || hash == NULL ||
        (strncmp(hash, "$y$", 3) != 0 && strncmp(hash, "$6$", 3) != 0 &&
         strncmp(hash, "$5$", 3) != 0))
        return false;
    struct crypt_data *cd = calloc(1, sizeof(*cd));
    if (cd == NULL)
        return false;
    const char *h = crypt_r(password, hash, cd);
    bool ok = h != NULL && h[0] != '*' && ej__console_token_equal(h, hash);
    explicit_bzero(cd, sizeof(*cd));
    free(cd);
    return ok;
}

const struct ej_console_account *ej__console_account(const ej_console_web *web, const char *name)
{
    for (size_t i = 0; name != NULL && i < web->settings.account_count; i++)
        if (strcmp(web->settings.accounts[i].name, name) == 0)
            return &web->settings.accounts[i];
    return NULL;
}

const char *ej_console_role_name(ej_console_role role)
{
    switch (role) {
    case EJ_CONSOLE_ROLE_ADMIN:
        return "admin";
    case EJ_CONSOLE_ROLE_OPERATOR:
        return "operator";
    default:
        return "viewer";
    }
}

bool ej_console_role_parse(const char *name, ej_console_role *out)
{
    static const struct {
        const char *name;
        ej_console_role role;
    } names[] = {{"viewer", EJ_CONSOLE_ROLE_VIEWER},
                 {"guest", EJ_CONSOLE_ROLE_VIEWER},
                 {"operator", EJ_CONSOLE_ROLE_OPERATOR},
                 {"admin", EJ_CONSOLE_ROLE_ADMIN}};
    for (size_t i = 0; name != NULL && i < sizeof names / sizeof names[0]; i++)
        if (strcmp(name, names[i].name) == 0) {
            *out = names[i].role;
            return true;
        }
    return false;
}

static ej_console_role role_in(ej_console_role role, const struct ej_console_grant *grants,
                               size_t n, const char *registry)
{
    for (size_t i = 0; registry != NULL && i < n; i++)
        if (strcmp(grants[i].registry, registry) == 0)
            return grants[i].role;
    return role;
}

ej_console_role ej_console_account_role(const struct ej_console_account *a, const char *registry)
{
    return role_in(a->role, a->grants, a->grant_count, registry);
}

ej_console_role ej__console_role_on(const struct ej__console_principal *who, const char *registry)
{
    return role_in(who->role, who->grants, who->grant_count, registry);
}

json_t *ej__console_roles_json(const ej_console_web *web, const struct ej__console_principal *who)
{
    json_t *o = json_object();
    for (size_t i = 0; i < web->backend_count; i++) {
        const char *r = web->backends[i].def->name;
        json_object_set_new(o, r, json_string(ej_console_role_name(ej__console_role_on(who, r))));
    }
    return o;
}

/* With web->mu held: the slot for a new session of user. */
static size_t session_slot_locked(ej_console_web *web, const char *user, int64_t now, bool *found)
{
    EJ_ASSERT_HELD(&web->mu);
    size_t free_slot = EJ__CONSOLE_MAX_SESSIONS, oldest = EJ__CONSOLE_MAX_SESSIONS;
    unsigned mine = 0;
    for (size_t i = 0; i < EJ__CONSOLE_MAX_SESSIONS; i++) {
        struct ej__console_session *s = &web->sessions[i];
        bool live = s->token[0] != '\0' && s->expires_ms > now;
        if (!live) {
            if (free_slot == EJ__CONSOLE_MAX_SESSIONS)
                free_slot = i;
            continue;
        }
        if (strcmp(s->user, user) != 0)
            continue;
        mine++;
        if (oldest == EJ__CONSOLE_MAX_SESSIONS || s->created_ms < web->sessions[oldest].created_ms)
            oldest = i;
    }
    *found = true;
    if (mine >= EJ__CONSOLE_SESSIONS_PER_ACCOUNT)
        return oldest;
    if (free_slot < EJ__CONSOLE_MAX_SESSIONS)
        return free_slot;
    *found = false;
    return 0;
}

int ej__console_session_new(ej_console_web *web, const char *user, struct ej__console_session *out)
{
    struct ej__console_session s = {0};
    int rc = ej__console_random_hex(s.token, EJ__CONSOLE_TOKEN_HEX);
    if (rc == 0)
        rc = ej__console_random_hex(s.csrf, EJ__CONSOLE_TOKEN_HEX);
    if (rc != 0)
        return rc;
    snprintf(s.user, sizeof s.user, "%s", user);
    int64_t now = ej__mono_ms();
    s.created_ms = now;
    s.expires_ms = now + (int64_t)web->settings.session_ttl_seconds * 1000;
    ej__mutex_lock(&web->mu);
    bool found;
    size_t slot = session_slot_locked(web, user, now, &found);
    if (found)
        web->sessions[slot] = s;
    ej__mutex_unlock(&web->mu);
    if (!found)
        return EJ_EBUSY;
    *out = s;
    return 0;
}
bool ej__console_session_find(ej_console_web *web, const char *token,
                              struct ej__console_session *out)
{
    if (token == NULL || strlen(token) != EJ__CONSOLE_TOKEN_HEX)
        return false;
    bool found = false;
    int64_t now = ej__mono_ms();
    ej__mutex_lock(&web->mu);
    for (size_t i = 0; i < EJ__CONSOLE_MAX_SESSIONS && !found; i++) {
        struct ej__console_session *s = &web->sessions[i];
        if (s->token[0] == '\0' || !ej__console_token_equal(s->token, token))
            continue;
        if (s->expires_ms <= now) {
            memset(s, 0, sizeof(*s));
            break;
        }
        s->expires_ms = now + (int64_t)web->settings.session_ttl_seconds * 1000;
        *out = *s;
        found = true;
    }
    ej__mutex_unlock(&web->mu);
    return found;
}

void ej__console_session_end(ej_console_web *web, const char *token)
{
    if (token == NULL)
        return;
    ej__mutex_lock(&web->mu);
    for (size_t i = 0; i < EJ__CONSOLE_MAX_SESSIONS; i++)
        if (web->sessions[i].token[0] != '\0' &&
            ej__console_token_equal(web->sessions[i].token, token))
            memset(&web->sessions[i], 0, sizeof(web->sessions[i]));
    ej__mutex_unlock(&web->mu);
}
