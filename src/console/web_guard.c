/*
 * What `ejob console` checks before any route, and what it records:
 * - the Host header (a page on another name reaching this port through DNS
 *   rebinding gets 421) and the Origin of writes and logins (403);
 * - failed logins per address and per account, answered 429 with
 *   Retry-After once over their allowance: no worker thread ever sleeps;
 * - the audit log: one JSON object per line, so no field (a user name, a
 *   URL with %0a) can end a line or forge another.
 */
#include <errno.h>
#include <pwd.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <time.h>
#include <unistd.h>

#include "common/check.h"
#include "common/util.h"
#include "console/web.h"
#include "ejob/error.h"

/* Failed logins allowed before the back-off starts, and its longest wait. */
#define FREE_FAILURES_ADDRESS 10
#define FREE_FAILURES_ACCOUNT 5
#define MAX_WAIT_SECONDS 60
/* Failures older than this are forgotten. */
#define FORGET_MS (15 * 60 * 1000)

/* host (no port, brackets kept for IPv6) of a Host header value. */
static void host_part(const char *value, char *out, size_t len)
{
    size_t n;
    if (value[0] == '[') {
        const char *close = strchr(value, ']');
        n = close != NULL ? (size_t)(close - value) + 1 : strlen(value);
    } else {
        n = strcspn(value, ":");
    }
    if (n >= len)
        n = len - 1;
    memcpy(out, value, n);
    out[n] = '\0';
}

static bool is_loopback_ipv4(const char *h)
{
    unsigned a, b, c, d;
    char tail;
    return sscanf(h, "%u.%u.%u.%u%c", &a, &b, &c, &d, &tail) == 4 && a == 127 && b < 256 &&
           c < 256 && d < 256;
}

static bool name_allowed(const ej_console_web *web, const char *host)
{
    if (host[0] == '\0')
        return false;
    if (strcasecmp(host, "localhost") == 0 || strcasecmp(host, "localhost.") == 0 ||
        strcmp(host, "[::1]") == 0 || is_loopback_ipv4(host))
        return true;
    if (web->listen_host[0] != '\0' && strcmp(web->listen_host, "0.0.0.0") != 0 &&
        strcasecmp(host, web->listen_host) == 0)
        return true;
    for (size_t i = 0; i < web->settings.allowed_host_count; i++)
        if (strcasecmp(host, web->settings.allowed_hosts[i]) == 0)
            return true;
    return false;
}

bool ej__console_host_allowed(const ej_console_web *web, const char *host)
{
    if (host == NULL)
        return false;
    char h[256];
    host_part(host, h, sizeof h);
    return name_allowed(web, h);
}

bool ej__console_origin_allowed(const ej_console_web *web, const char *origin)
{
    if (origin == NULL)
        return true; /* not a browser's cross-site request */
    const char *rest = NULL;
    if (strncmp(origin, "http://", 7) == 0)
        rest = origin + 7;
    else if (strncmp(origin, "https://", 8) == 0)
        rest = origin + 8;
    if (rest == NULL || strchr(rest, '/') != NULL)
        return false; /* "null" and anything else that is not scheme://host[:port] */
    return ej__console_host_allowed(web, rest);
}

/* With web->mu held: the slot of key, taking the least recently used one
 * when it has none. */
static struct ej__console_throttle *throttle_slot_locked(ej_console_web *web, const char *key,
                                                         int64_t now)
{
    EJ_ASSERT_HELD(&web->mu);
    struct ej__console_throttle *lru = &web->throttle[0];
    for (size_t i = 0; i < EJ__CONSOLE_THROTTLE_SLOTS; i++) {
        struct ej__console_throttle *t = &web->throttle[i];
        if (t->key[0] != '\0' && strcmp(t->key, key) == 0) {
            if (now - t->last_ms > FORGET_MS)
                t->failures = 0;
            return t;
        }
        if (t->key[0] == '\0' || t->last_ms < lru->last_ms)
            lru = t;
    }
    memset(lru, 0, sizeof(*lru));
    snprintf(lru->key, sizeof lru->key, "%s", key);
    return lru;
}

/* Milliseconds the holder of t must still wait. */
static int64_t wait_ms(const struct ej__console_throttle *t, unsigned free_failures, int64_t now)
{
    if (t->failures < free_failures)
        return 0;
    unsigned over = t->failures - free_failures;
    int64_t backoff = over >= 6 ? MAX_WAIT_SECONDS * 1000 : (int64_t)1000 << over;
    if (backoff > MAX_WAIT_SECONDS * 1000)
        backoff = MAX_WAIT_SECONDS * 1000;
    int64_t left = t->last_ms + backoff - now;
    return left > 0 ? left : 0;
}

unsigned ej__console_login_wait(ej_console_web *web, const char *remote, const char *user)
{
    char ka[136], ku[136];
    snprintf(ka, sizeof ka, "a:%s", remote);
    snprintf(ku, sizeof ku, "u:%s", user != NULL ? user : "");
    int64_t now = ej__mono_ms();
    ej__mutex_lock(&web->mu);
    struct ej__console_throttle *a = throttle_slot_locked(web, ka, now);
    struct ej__console_throttle *u = throttle_slot_locked(web, ku, now);
    int64_t wa = wait_ms(a, FREE_FAILURES_ADDRESS, now);
    int64_t wu = wait_ms(u, FREE_FAILURES_ACCOUNT, now);
    int64_t w = wa > wu ? wa : wu;
    if (w > 0) {
        web->logins_throttled++;
    } else {
        /* Counted as failed until it succeeds, so that parallel attempts
         * are bounded too, not only those after an answer. */
        a->failures++;
        u->failures++;
        a->last_ms = u->last_ms = now;
    }
    ej__mutex_unlock(&web->mu);
    return w > 0 ? (unsigned)((w + 999) / 1000) : 0;
}

void ej__console_login_result(ej_console_web *web, const char *remote, const char *user, bool ok)
{
    char ka[136], ku[136];
    snprintf(ka, sizeof ka, "a:%s", remote);
    snprintf(ku, sizeof ku, "u:%s", user != NULL ? user : "");
    int64_t now = ej__mono_ms();
    ej__mutex_lock(&web->mu);
    if (ok) {
        throttle_slot_locked(web, ka, now)->failures = 0;
        throttle_slot_locked(web, ku, now)->failures = 0;
    } else {
        web->logins_failed++;
    }
    ej__mutex_unlock(&web->mu);
}

/* A JSON string of any bytes: those that are not UTF-8 become '?'. */
static json_t *text_json(const char *s)
{
    json_t *v = json_string(s);
    if (v != NULL)
        return v;
    char *copy = strdup(s);
    if (copy == NULL)
        return json_null();
    for (char *p = copy; *p; p++)
        if ((unsigned char)*p >= 0x80)
            *p = '?';
    v = json_string(copy);
    free(copy);
    return v != NULL ? v : json_null();
}

void ej__console_audit_field(struct ej__console_request *req, const char *key, json_t *value)
{
    if (req->audit_extra == NULL)
        req->audit_extra = json_object();
    json_object_set_new(req->audit_extra, key, value);
}

static void now_text(char *ts, size_t len)
{
    time_t now = time(NULL);
    struct tm tm;
    gmtime_r(&now, &tm);
    strftime(ts, len, "%Y-%m-%dT%H:%M:%SZ", &tm);
}

int ej_console_audit_token(const char *audit_log, const char *action, const char *name,
                           const char *role)
{
    char ts[32];
    now_text(ts, sizeof ts);
    const struct passwd *pw = getpwuid(geteuid());
    json_t *line = json_pack(
        "{s:s,s:s,s:o,s:s,s:s,s:o,s:o}", "time", ts, "event", "ejob-console audit", "user",
        pw != NULL ? text_json(pw->pw_name) : json_null(), "auth", "local", "action", action,
        "token", text_json(name), "role", role != NULL ? json_string(role) : json_null());
    char *text = line != NULL ? json_dumps(line, JSON_COMPACT | JSON_ENSURE_ASCII) : NULL;
    json_decref(line);
    if (text == NULL)
        return EJ_ENOMEM;
    FILE *out = audit_log != NULL ? fopen(audit_log, "ae") : stderr;
    int rc = out != NULL ? 0 : -errno;
    if (out != NULL) {
        fprintf(out, "%s\n", text);
        if (out != stderr && fclose(out) != 0)
            rc = -errno;
    }
    free(text);
    return rc;
}

void ej__console_audit(ej_console_web *web, const struct ej__console_request *req)
{
    char ts[32];
    now_text(ts, sizeof ts);
    json_t *line = json_object();
    json_object_set_new(line, "time", json_string(ts));
    json_object_set_new(line, "event", json_string("ejob-console audit"));
    const struct ej__console_principal *who = &req->who;
    json_object_set_new(line, "user", who->name[0] ? text_json(who->name) : json_null());
    json_object_set_new(line, "auth", who->kind != NULL ? json_string(who->kind) : json_null());
    json_object_set_new(line, "role",
                        who->kind != NULL ? json_string(ej_console_role_name(
                                                ej__console_role_on(who, req->registry)))
                                          : json_null());
    json_object_set_new(line, "remote", text_json(req->remote));
    json_object_set_new(line, "method", text_json(req->method));
    json_object_set_new(line, "path", text_json(req->url));
    json_object_set_new(line, "result", json_integer(req->status));
    json_t *e = req->reply != NULL ? json_object_get(req->reply, "error") : NULL;
    if (json_is_string(e))
        json_object_set(line, "error", e);
    if (req->audit_extra != NULL)
        json_object_update(line, req->audit_extra);
    /* Invalid UTF-8 in a name is escaped as \u00XX rather than dropped. */
    char *text = json_dumps(line, JSON_COMPACT | JSON_ENSURE_ASCII);
    json_decref(line);
    ej__mutex_lock(&web->mu);
    FILE *out = web->audit != NULL ? web->audit : stderr;
    if (text != NULL)
        fprintf(out, "%s\n", text);
    fflush(out);
    ej__mutex_unlock(&web->mu);
    free(text);
}
