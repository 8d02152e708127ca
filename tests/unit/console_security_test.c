/* Unit tests of `ejob console`'s defences that need no server: Host and
 * Origin names, login throttling, audit lines, sessions per account, roles,
 * the route table, settings-file checks and password hashing.
 * tests/integration/console_security_test.sh tries them over HTTP. */
#include <crypt.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cmocka.h>

#include "console/web.h"
#include "ejob/console.h"
#include "ejob/error.h"

static ej_console_web *new_web(void)
{
    ej_console_web *web = calloc(1, sizeof(*web));
    assert_non_null(web);
    ej_console_settings_init(&web->settings);
    ej__mutex_init(&web->mu);
    return web;
}

static void free_web(ej_console_web *web)
{
    ej_console_settings_fini(&web->settings);
    ej__mutex_destroy(&web->mu);
    free(web);
}

static void test_host_and_origin(void **state)
{
    (void)state;
    ej_console_web *web = new_web();
    snprintf(web->listen_host, sizeof web->listen_host, "10.0.0.5");
    web->settings.allowed_hosts = calloc(1, sizeof(char *));
    web->settings.allowed_hosts[0] = strdup("console.example.com");
    web->settings.allowed_host_count = 1;
    static const char *good[] = {
        "127.0.0.1:8896", "localhost:8896",         "LOCALHOST", "[::1]:8896", "127.3.4.5",
        "10.0.0.5:8899",  "Console.Example.com:443"};
    for (size_t i = 0; i < sizeof good / sizeof good[0]; i++)
        assert_true(ej__console_host_allowed(web, good[i]));
    static const char *bad[] = {
        "rebind.attacker.example:8896", "127.0.0.1.nip.io:8896", "",
        "localhost.attacker.example",   "10.0.0.6:8899",         "[::2]:8896"};
    for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++)
        assert_false(ej__console_host_allowed(web, bad[i]));
    assert_false(ej__console_host_allowed(web, NULL));
    /* Origin: absent (not a browser) or one of those names. */
    assert_true(ej__console_origin_allowed(web, NULL));
    assert_true(ej__console_origin_allowed(web, "http://127.0.0.1:8896"));
    assert_true(ej__console_origin_allowed(web, "https://console.example.com"));
    assert_false(ej__console_origin_allowed(web, "http://rebind.attacker.example:8896"));
    assert_false(ej__console_origin_allowed(web, "null"));
    assert_false(ej__console_origin_allowed(web, "http://127.0.0.1:8896/x"));
    /* Listening on every address names no host of its own. */
    snprintf(web->listen_host, sizeof web->listen_host, "0.0.0.0");
    assert_false(ej__console_host_allowed(web, "0.0.0.0:8899"));
    free_web(web);
}

static void test_login_throttle(void **state)
{
    (void)state;
    ej_console_web *web = new_web();
    /* Five free attempts for an account, even in flight at once. */
    for (int i = 0; i < 5; i++)
        assert_int_equal(ej__console_login_wait(web, "127.0.0.9", "alice"), 0);
    unsigned wait = ej__console_login_wait(web, "127.0.0.9", "alice");
    assert_true(wait >= 1 && wait <= 60);
    assert_int_equal(web->logins_throttled, 1);
    /* Another address is held back for alice too (per account) ... */
    assert_true(ej__console_login_wait(web, "127.0.0.10", "alice") > 0);
    /* ... but not for another account, until the address has had ten. */
    for (int i = 0; i < 5; i++)
        assert_int_equal(ej__console_login_wait(web, "127.0.0.9", "bob"), 0);
    assert_true(ej__console_login_wait(web, "127.0.0.9", "carol") > 0);
    for (int i = 0; i < 5; i++)
        ej__console_login_result(web, "127.0.0.9", "bob", false);
    assert_int_equal(web->logins_failed, 5);
    /* A good login clears both counts. */
    ej__console_login_result(web, "127.0.0.9", "alice", true);
    assert_int_equal(ej__console_login_wait(web, "127.0.0.9", "alice"), 0);
    free_web(web);
}

static void test_audit_line(void **state)
{
    (void)state;
    ej_console_web *web = new_web();
    web->audit = tmpfile();
    assert_non_null(web->audit);
    struct ej__console_request req = {.web = web, .method = "POST", .remote = "127.0.0.1"};
    req.url = "/api/registries/x\n2026-11-27T01:50:00Z ejob-console audit user=alice/trigger";
    snprintf(req.who.name, sizeof req.who.name,
             "mallory\n2026-11-27T01:50:00Z ejob-console audit user=alice role=admin");
    struct ej_console_account admin = {.name = "mallory", .role = EJ_CONSOLE_ROLE_ADMIN};
    req.who.kind = "login";
    req.who.role = admin.role;
    req.status = 401;
    req.reply = json_pack("{s:s}", "error", "say \"no\"\r\n");
    ej__console_audit_field(&req, "job", json_string("j\n"));
    ej__console_audit(web, &req);
    json_decref(req.reply);
    json_decref(req.audit_extra);
    rewind(web->audit);
    char buf[4096];
    size_t n = fread(buf, 1, sizeof buf - 1, web->audit);
    buf[n] = '\0';
    fclose(web->audit);
    web->audit = NULL;
    /* One line, whatever the fields hold. */
    assert_non_null(strchr(buf, '\n'));
    assert_int_equal(strchr(buf, '\n') - buf, (long)n - 1);
    json_error_t jerr;
    json_t *line = json_loads(buf, 0, &jerr);
    assert_non_null(line);
    assert_string_equal(json_string_value(json_object_get(line, "user")), req.who.name);
    assert_string_equal(json_string_value(json_object_get(line, "role")), "admin");
    assert_string_equal(json_string_value(json_object_get(line, "path")), req.url);
    assert_string_equal(json_string_value(json_object_get(line, "error")), "say \"no\"\r\n");
    assert_string_equal(json_string_value(json_object_get(line, "job")), "j\n");
    assert_int_equal(json_integer_value(json_object_get(line, "result")), 401);
    json_decref(line);
    free_web(web);
}

static void test_sessions_per_account(void **state)
{
    (void)state;
    ej_console_web *web = new_web();
    struct ej__console_session admin, first, s;
    assert_int_equal(ej__console_session_new(web, "alice", &admin), 0);
    /* 1,030 logins of another account end none of alice's sessions. */
    assert_int_equal(ej__console_session_new(web, "gus", &first), 0);
    for (int i = 0; i < 1030; i++)
        assert_int_equal(ej__console_session_new(web, "gus", &s), 0);
    assert_true(ej__console_session_find(web, admin.token, &s));
    assert_string_equal(s.user, "alice");
    assert_false(ej__console_session_find(web, first.token, &s)); /* gus's oldest ended */
    size_t gus = 0;
    for (size_t i = 0; i < EJ__CONSOLE_MAX_SESSIONS; i++)
        gus += strcmp(web->sessions[i].user, "gus") == 0;
    assert_int_equal(gus, EJ__CONSOLE_SESSIONS_PER_ACCOUNT);
    free_web(web);
}

static void test_roles(void **state)
{
    (void)state;
    struct ej_console_settings s;
    ej_console_settings_init(&s);
    char err[512];
    const char *text = "registries:\n"
                       "  - {name: prod, serverLists: \"a:1\", namespace: p}\n"
                       "  - {name: batch, serverLists: \"a:1\", namespace: b}\n"
                       "accounts:\n"
                       "  - {name: bob, role: viewer, roles: {prod: operator, batch: admin},\n"
                       "     passwordHash: \"$y$x\"}\n"
                       "  - {name: gus, role: guest, passwordHash: \"$6$x\"}\n";
    assert_int_equal(ej__console_settings_parse(text, strlen(text), "c.yaml", &s, err, sizeof err),
                     0);
    assert_int_equal(ej_console_account_role(&s.accounts[0], "prod"), EJ_CONSOLE_ROLE_OPERATOR);
    assert_int_equal(ej_console_account_role(&s.accounts[0], "batch"), EJ_CONSOLE_ROLE_ADMIN);
    assert_int_equal(ej_console_account_role(&s.accounts[0], NULL), EJ_CONSOLE_ROLE_VIEWER);
    assert_int_equal(ej_console_account_role(&s.accounts[1], "prod"), EJ_CONSOLE_ROLE_VIEWER);
    assert_int_equal(ej_console_settings_check(&s, err, sizeof err), 0);
    ej_console_settings_fini(&s);
    ej_console_settings_init(&s);
    text = "registries:\n  - {name: prod, serverLists: \"a:1\", namespace: p}\n"
           "accounts:\n  - {name: bob, role: viewer, roles: {qa: admin}, passwordHash: \"$y$x\"}\n";
    assert_int_equal(ej__console_settings_parse(text, strlen(text), "c.yaml", &s, err, sizeof err),
                     0);
    assert_int_equal(ej_console_settings_check(&s, err, sizeof err), EJ_ECONFIG);
    assert_non_null(strstr(err, "registry \"qa\""));
    ej_console_settings_fini(&s);
    ej_console_settings_init(&s);
    text = "accounts:\n  - {name: bob, role: viewer, roles: {qa: root}, passwordHash: \"$y$x\"}\n";
    assert_int_not_equal(
        ej__console_settings_parse(text, strlen(text), "c.yaml", &s, err, sizeof err), 0);
    assert_string_equal(err, "c.yaml:2:43: roles.qa: expected viewer, operator or admin");
    ej_console_settings_fini(&s);
}

/* Every route has a handler; reads need a viewer, writes an operator at
 * least, and a config write or a removal an admin. */
static void test_route_table(void **state)
{
    (void)state;
    size_t n;
    const struct ej__console_route *r = ej__console_routes(&n);
    assert_true(n >= 19);
    for (size_t i = 0; i < n; i++) {
        assert_non_null(r[i].handler);
        bool read = strcmp(r[i].method, "GET") == 0;
        if (read)
            assert_int_equal(r[i].need, EJ_CONSOLE_ROLE_VIEWER);
        else
            assert_true(r[i].need >= EJ_CONSOLE_ROLE_OPERATOR);
        if (strcmp(r[i].method, "PUT") == 0 || strcmp(r[i].method, "DELETE") == 0)
            assert_int_equal(r[i].need, EJ_CONSOLE_ROLE_ADMIN);
    }
}

static int load_file(const char *dir, const char *text, unsigned mode, char *err, size_t errlen)
{
    char path[512];
    snprintf(path, sizeof path, "%s/console.yaml", dir);
    FILE *f = fopen(path, "w");
    assert_non_null(f);
    fputs(text, f);
    fclose(f);
    chmod(path, mode);
    struct ej_console_settings s;
    ej_console_settings_init(&s);
    int rc = ej_console_settings_load(path, &s, err, errlen);
    if (rc == 0 && s.registry_count > 0 && s.registries[0].digest != NULL)
        snprintf(err, errlen, "digest=%s tokens=%s", s.registries[0].digest,
                 strrchr(s.tokens_file, '/') + 1);
    ej_console_settings_fini(&s);
    return rc;
}

static void test_settings_file_checks(void **state)
{
    (void)state;
    char dir[] = "/tmp/ejob-console-sec-XXXXXX";
    assert_non_null(mkdtemp(dir));
    char err[1024];
    const char *inline_digest =
        "registries:\n  - {name: p, serverLists: \"a:1\", namespace: p, digest: \"u:pw\"}\n";
    /* An inline digest in a file everyone may read: refused. */
    assert_int_equal(load_file(dir, inline_digest, 0644, err, sizeof err), EJ_ECONFIG);
    assert_non_null(strstr(err, "everyone may read it (mode 644)"));
    assert_null(strstr(err, "pw"));
    assert_int_equal(load_file(dir, inline_digest, 0640, err, sizeof err), 0);
    /* A digestFile, relative to the settings file, with the daemon's checks. */
    char path[600];
    snprintf(path, sizeof path, "%s/zk-digest", dir);
    FILE *f = fopen(path, "w");
    fputs("ejob:s3cret\n", f);
    fclose(f);
    chmod(path, 0600);
    const char *from_file =
        "registries:\n  - {name: p, serverLists: \"a:1\", namespace: p, digestFile: zk-digest}\n";
    assert_int_equal(load_file(dir, from_file, 0644, err, sizeof err), 0);
    assert_string_equal(err, "digest=ejob:s3cret tokens=console-tokens.json");
    chmod(path, 0666);
    assert_int_equal(load_file(dir, from_file, 0644, err, sizeof err), EJ_ECONFIG);
    assert_non_null(strstr(err, "digestFile: "));
    assert_non_null(strstr(err, "world-writable"));
    chmod(path, 0600);
    assert_int_equal(
        load_file(dir,
                  "registries:\n  - {name: p, serverLists: \"a:1\", namespace: p, digest: \"u:p\", "
                  "digestFile: zk-digest}\n",
                  0600, err, sizeof err),
        EJ_ECONFIG);
    assert_non_null(strstr(err, "give digest or digestFile, not both"));
    /* Owned by another user (root may test this): refused. */
    if (geteuid() == 0) {
        char cfg[600];
        snprintf(cfg, sizeof cfg, "%s/console.yaml", dir);
        assert_int_equal(load_file(dir, from_file, 0600, err, sizeof err), 0);
        assert_int_equal(chown(cfg, 65534, 65534), 0);
        struct ej_console_settings s;
        ej_console_settings_init(&s);
        assert_int_equal(ej_console_settings_load(cfg, &s, err, sizeof err), EJ_ECONFIG);
        assert_non_null(strstr(err, "owned by user 65534"));
        ej_console_settings_fini(&s);
        unlink(cfg);
    }
    snprintf(path, sizeof path, "rm -rf '%s'", dir);
    assert_int_equal(system(path), 0);
}

static void test_password_hashes(void **state)
{
    (void)state;
    char h[256];
    assert_int_equal(ej_console_hash_password("123456789", h, sizeof h), EJ_EINVAL);
    assert_int_equal(ej_console_hash_password("1234567890", h, sizeof h), 0);
    assert_memory_equal(h, "$y$", 3);
    assert_true(ej_console_check_password("1234567890", h));
    /* A SHA-512 hash made before still logs in. */
    struct crypt_data cd = {0};
    const char *old = crypt_r("old password", "$6$abcdefgh$", &cd);
    assert_non_null(old);
    assert_true(ej_console_check_password("old password", old));
    assert_false(ej_console_check_password("old passwore", old));
}

/* History cursors from the URL: what a reply gave back parses; anything
 * else is refused (not a number, out of range, overflow, an id with other
 * characters or too long). */
static void test_history_cursor(void **state)
{
    (void)state;
    int64_t ms = -1;
    const char *id = NULL;
    const char *good = "1795773450000:19340f55-a8ea-4eac-a0e1-9986cab893c9";
    assert_true(ej__console_parse_cursor(good, &ms, &id));
    assert_int_equal(ms, 1795773450000LL);
    assert_string_equal(id, "19340f55-a8ea-4eac-a0e1-9986cab893c9");
    const char *bad[] = {
        "",
        ":abc",
        "-5:abc",
        " 5:abc",
        "5abc",
        "5:",
        "99999999999999999999:abc",
        "253402300800000:abc",
        "5:a'b",
        "5:a b",
        "5:0123456789012345678901234567890123456",
    };
    for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++)
        if (ej__console_parse_cursor(bad[i], &ms, &id))
            fail_msg("cursor \"%s\" accepted", bad[i]);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_host_and_origin),
        cmocka_unit_test(test_login_throttle),
        cmocka_unit_test(test_audit_line),
        cmocka_unit_test(test_sessions_per_account),
        cmocka_unit_test(test_roles),
        cmocka_unit_test(test_route_table),
        cmocka_unit_test(test_settings_file_checks),
        cmocka_unit_test(test_password_hashes),
        cmocka_unit_test(test_history_cursor),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
