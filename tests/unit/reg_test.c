/* Pure logic of the registry: path rules, error translation, back-off,
 * name sorting, and argument checks that fail before any connection. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <cmocka.h>

#include "ejob/registry.h"
#include "reg/internal.h"

static void test_paths_valid(void **state)
{
    (void)state;
    const char *ok[] = {"/",
                        "/a",
                        "/myJob/config",
                        "/a/b/c",
                        "/a.b",
                        "/a..b",
                        "/.a",
                        "/10.0.0.7@-@4123",
                        "/\xe4\xb8\xad\xe6\x96\x87",
                        "/a b"};
    for (size_t i = 0; i < sizeof(ok) / sizeof(ok[0]); i++)
        assert_int_equal(ej__reg_check_path(ok[i], false, NULL), 0);
    /* A sequential create may end with '/'. */
    assert_int_equal(ej__reg_check_path("/latch/", true, NULL), 0);
    assert_int_equal(ej__reg_check_path("/latch/latch-", true, NULL), 0);
}

static void test_paths_invalid(void **state)
{
    (void)state;
    struct {
        const char *path;
        const char *why;
    } bad[] = {
        {"", "empty"},
        {"a/b", "start with"},
        {"/a/", "end with"},
        {"//a", "empty segment"},
        {"/a//b", "empty segment"},
        {"/a/./b", "'.'"},
        {"/a/..", "'.'"},
        {"/.", "'.'"},
        {"/a\x01", "control"},
        {"/a\x7f", "control"},
        {"/a\xc2\x80", "control"},     /* U+0080 */
        {"/a\xee\x80\x80", "control"}, /* U+E000, private use */
        {"/a\xef\xbf\xbf", "control"}, /* U+FFFF */
        {"/a\xff", "UTF-8"},
        {"/a\xc0\xaf", "UTF-8"}, /* overlong '/' */
        {"/a\xe4\xb8", "UTF-8"}, /* truncated */
    };
    for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++) {
        const char *why = NULL;
        assert_int_equal(ej__reg_check_path(bad[i].path, false, &why), EJ_EBADPATH);
        assert_non_null(why);
        if (!strstr(why, bad[i].why))
            fail_msg("path %zu: reason \"%s\" lacks \"%s\"", i, why, bad[i].why);
    }
    assert_int_equal(ej__reg_check_path(NULL, false, NULL), EJ_EBADPATH);
    assert_int_equal(ej__reg_check_path("/a//", true, NULL), EJ_EBADPATH);
    char *longp = malloc(EJ_REG_MAX_PATH_LEN + 2);
    memset(longp, 'a', EJ_REG_MAX_PATH_LEN + 1);
    longp[0] = '/';
    longp[EJ_REG_MAX_PATH_LEN + 1] = '\0';
    assert_int_equal(ej__reg_check_path(longp, false, NULL), EJ_EBADPATH);
    longp[EJ_REG_MAX_PATH_LEN] = '\0';
    assert_int_equal(ej__reg_check_path(longp, false, NULL), 0);
    free(longp);
}

static void test_zk_codes(void **state)
{
    (void)state;
    assert_int_equal(ej__reg_from_zk(ZOK), 0);
    assert_int_equal(ej__reg_from_zk(ZNONODE), EJ_ENONODE);
    assert_int_equal(ej__reg_from_zk(ZNODEEXISTS), EJ_ENODEEXISTS);
    assert_int_equal(ej__reg_from_zk(ZBADVERSION), EJ_EBADVERSION);
    assert_int_equal(ej__reg_from_zk(ZNOTEMPTY), EJ_ENOTEMPTY);
    assert_int_equal(ej__reg_from_zk(ZNOAUTH), EJ_ENOAUTH);
    assert_int_equal(ej__reg_from_zk(ZINVALIDACL), EJ_ENOAUTH);
    assert_int_equal(ej__reg_from_zk(ZNOCHILDRENFOREPHEMERALS), EJ_ENOCHILDREN);
    assert_int_equal(ej__reg_from_zk(ZCONNECTIONLOSS), EJ_ECONNLOSS);
    assert_int_equal(ej__reg_from_zk(ZOPERATIONTIMEOUT), EJ_ECONNLOSS);
    assert_int_equal(ej__reg_from_zk(ZCLOSING), EJ_ECONNLOSS);
    assert_int_equal(ej__reg_from_zk(ZSESSIONEXPIRED), EJ_ESESSIONEXPIRED);
    assert_int_equal(ej__reg_from_zk(ZINVALIDSTATE), EJ_ESESSIONEXPIRED);
    assert_int_equal(ej__reg_from_zk(ZAUTHFAILED), EJ_EAUTHFAILED);
    assert_int_equal(ej__reg_from_zk(ZBADARGUMENTS), EJ_EINVAL);
    assert_int_equal(ej__reg_from_zk(ZRUNTIMEINCONSISTENCY), EJ_EAGAIN);
    assert_int_equal(ej__reg_from_zk(ZSYSTEMERROR), EJ_EZOOKEEPER);
    assert_int_equal(ej__reg_from_zk(ZMARSHALLINGERROR), EJ_EZOOKEEPER);
    /* Never a raw Z code: everything negative maps to an EJ_E* code. */
    for (int z = -130; z < 0; z++)
        assert_memory_equal(ej_err_name(ej__reg_from_zk(z)), "EJ_E", 4);
    assert_true(ej__reg_zk_is_connloss(ZCONNECTIONLOSS));
    assert_true(ej__reg_zk_is_connloss(ZSESSIONEXPIRED));
    assert_false(ej__reg_zk_is_connloss(ZNONODE));
    assert_false(ej__reg_zk_is_connloss(ZOK));
}

static void test_backoff(void **state)
{
    (void)state;
    /* Curator: base * max(1, random(1 << (retry + 1))), capped. */
    assert_int_equal(ej__reg_backoff_ms(1000, 3000, 0, 0), 1000); /* max(1, 0) */
    assert_int_equal(ej__reg_backoff_ms(1000, 3000, 0, 1), 1000);
    assert_int_equal(ej__reg_backoff_ms(1000, 3000, 0, 2), 1000); /* 2 % 2 = 0 -> 1 */
    assert_int_equal(ej__reg_backoff_ms(1000, 3000, 1, 3), 3000); /* 3 % 4 */
    assert_int_equal(ej__reg_backoff_ms(1000, 3000, 1, 2), 2000);
    assert_int_equal(ej__reg_backoff_ms(1000, 3000, 2, 7), 3000); /* 7000 capped */
    assert_int_equal(ej__reg_backoff_ms(100, 100000, 2, 7), 700);
    assert_int_equal(ej__reg_backoff_ms(100, 100000, 2, 8), 100); /* 8 % 8 = 0 */
    /* Large retry counts neither overflow nor exceed the cap. */
    assert_int_equal(ej__reg_backoff_ms(1000, 3000, 100, 0xffffffffu), 3000);
    for (int r = 0; r < 40; r++) {
        for (int i = 0; i < 200; i++) {
            int ms = ej__reg_backoff_ms(10, 5000, r, ej__reg_rand());
            assert_true(ms >= 10 && ms <= 5000);
            if (r < 28)
                assert_true(ms <= 10LL * ((1LL << (r + 1)) - 1) || ms == 5000);
        }
    }
}

static void test_sort(void **state)
{
    (void)state;
    char *src[] = {"10.0.0.2@-@1", "10.0.0.17@-@9", "10.0.0.1@-@5", "b"};
    char **v = ej__reg_copy_names(src, 4);
    assert_non_null(v);
    assert_null(v[4]);
    ej__reg_sort_names(v, 4, EJ_REG_SORT_DESC);
    assert_string_equal(v[0], "b");
    assert_string_equal(v[1], "10.0.0.2@-@1");
    assert_string_equal(v[2], "10.0.0.1@-@5");
    assert_string_equal(v[3], "10.0.0.17@-@9");
    ej__reg_sort_names(v, 4, EJ_REG_SORT_ASC);
    assert_string_equal(v[0], "10.0.0.17@-@9");
    assert_string_equal(v[3], "b");
    ej_registry_free_names(v);
    ej_registry_free_names(NULL);
}

/* The fence: thresholds of the negotiated timeout, the client's own view,
 * other sessions. */
static void test_fence_level(void **state)
{
    (void)state;
    assert_int_equal(ej__reg_fence_level(0, 3000, true, true), EJ_REG_FENCE_OPEN);
    assert_int_equal(ej__reg_fence_level(1499, 3000, true, true), EJ_REG_FENCE_OPEN);
    assert_int_equal(ej__reg_fence_level(1500, 3000, true, true), EJ_REG_FENCE_HOLD);
    assert_int_equal(ej__reg_fence_level(1799, 3000, true, true), EJ_REG_FENCE_HOLD);
    assert_int_equal(ej__reg_fence_level(1800, 3000, true, true), EJ_REG_FENCE_CANCEL);
    assert_int_equal(ej__reg_fence_level(60000, 3000, true, true), EJ_REG_FENCE_CANCEL);
    /* Disconnected: at least HOLD at once. */
    assert_int_equal(ej__reg_fence_level(10, 3000, false, true), EJ_REG_FENCE_HOLD);
    assert_int_equal(ej__reg_fence_level(1900, 3000, false, true), EJ_REG_FENCE_CANCEL);
    /* Another session (expired, replaced, not registered in): CANCEL. */
    assert_int_equal(ej__reg_fence_level(0, 3000, true, false), EJ_REG_FENCE_CANCEL);
    /* Large timeouts do not overflow. */
    assert_int_equal(ej__reg_fence_level(29999, 60000, true, true), EJ_REG_FENCE_OPEN);
    assert_int_equal(ej__reg_fence_level(36000, 60000, true, true), EJ_REG_FENCE_CANCEL);
}

static void test_create_bad_opts(void **state)
{
    (void)state;
    ej_registry *reg = (ej_registry *)0x1;
    assert_int_equal(ej_registry_create(&reg, NULL), EJ_EINVAL);
    assert_null(reg);
    struct ej_registry_opts o = {0};
    assert_int_equal(ej_registry_create(&reg, &o), EJ_EINVAL);
    assert_non_null(strstr(ej_registry_errmsg(NULL), "servers"));
    o.servers = "127.0.0.1:1";
    o.namespace_ = "/lead";
    assert_int_equal(ej_registry_create(&reg, &o), EJ_EBADPATH);
    assert_non_null(strstr(ej_registry_errmsg(NULL), "/lead"));
    o.namespace_ = "a//b";
    assert_int_equal(ej_registry_create(&reg, &o), EJ_EBADPATH);
    o.namespace_ = "ok";
    o.digest = "nocolon";
    assert_int_equal(ej_registry_create(&reg, &o), EJ_EINVAL);
    assert_non_null(strstr(ej_registry_errmsg(NULL), "digest"));
    o.digest = NULL;
    o.session_timeout_ms = -1;
    assert_int_equal(ej_registry_create(&reg, &o), EJ_EINVAL);
    ej_registry_destroy(NULL);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_paths_valid), cmocka_unit_test(test_paths_invalid),
        cmocka_unit_test(test_zk_codes),    cmocka_unit_test(test_backoff),
        cmocka_unit_test(test_sort),        cmocka_unit_test(test_create_bad_opts),
        cmocka_unit_test(test_fence_level),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
