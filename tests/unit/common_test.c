#include <errno.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <cmocka.h>

#include "common/util.h"
#include "ejob/error.h"
#include "ejob/log.h"

static void test_strerror_own_and_system(void **state)
{
    (void)state;
    assert_string_equal(ej_strerror(0), "success");
    assert_string_equal(ej_strerror(EJ_ECONNLOSS), "ZooKeeper connection lost");
    assert_string_equal(ej_err_name(EJ_ENONODE), "EJ_ENONODE");
    assert_string_equal(ej_err_name(-ENOENT), "ENOENT");
    assert_string_equal(ej_strerror(-ENOENT), "No such file or directory");
    assert_string_equal(ej_strerror(-999999), "unknown error");
}

/* One error family: the errno-valued codes are -errno (libuv's rule), so a
 * module returning -ENOMEM and one returning EJ_ENOMEM agree; ejob's own
 * codes stay below -1000. */
static void test_error_family(void **state)
{
    (void)state;
    assert_int_equal(EJ_ENOMEM, -ENOMEM);
    assert_int_equal(EJ_EINVAL, -EINVAL);
    assert_int_equal(EJ_EAGAIN, -EAGAIN);
    assert_int_equal(EJ_EBUSY, -EBUSY);
    assert_int_equal(EJ_ETIMEDOUT, -ETIMEDOUT);
    assert_string_equal(ej_strerror(-ENOMEM), "out of memory");
    assert_string_equal(ej_err_name(-ENOMEM), "EJ_ENOMEM");
    assert_true(EJ_ECONFIG < -1000 && EJ_ECONNLOSS < -1000 && EJ_EDB < -1000);
}

static void test_version(void **state)
{
    (void)state;
    assert_int_equal(ej_version(), EJ_VERSION_HEX);
    char want[32];
    snprintf(want, sizeof(want), "%d.%d.%d", EJ_VERSION_MAJOR, EJ_VERSION_MINOR, EJ_VERSION_PATCH);
    assert_string_equal(ej_version_string(), want);
    assert_string_equal(ej_version_string(), EJOB_PROJECT_VERSION);
}

static void test_java_hash(void **state)
{
    (void)state;
    assert_int_equal(ej__java_string_hash("0"), 48);
    assert_int_equal(ej__java_string_hash("1"), 49);
    assert_int_equal(ej__java_string_hash(""), 0);
    assert_int_equal(ej__java_string_hash("polygenelubricants"), INT32_MIN);
    assert_int_equal(ej__java_string_hash("GydZG_"), INT32_MIN);
    assert_int_equal(ej__java_string_hash("DESIGNING WORKHOUSES"), INT32_MIN);
    assert_int_equal(ej__java_string_hash("hello"), 99162322);
    /* U+4E2D U+6587 ("Chinese") and an astral code point as a surrogate pair. */
    assert_int_equal(ej__java_string_hash("\xe4\xb8\xad\xe6\x96\x87"), 0x4E2D * 31 + 0x6587);
    assert_int_equal(ej__java_string_hash("\xf0\x9f\x98\x80"), 0xD83D * 31 + 0xDE00);
}

static void test_json_quote_gson_escaping(void **state)
{
    (void)state;
    char *q = ej__json_quote("a=b<c>&'\"\\\n\x01");
    assert_string_equal(q, "\"a\\u003db\\u003cc\\u003e\\u0026\\u0027\\\"\\\\\\n\\u0001\"");
    free(q);
    q = ej__json_quote("a\xe2\x80\xa8"
                       "b\xe2\x80\xa9"
                       "c\xe2\x82\xac");
    assert_string_equal(q, "\"a\\u2028b\\u2029c\xe2\x82\xac\"");
    free(q);
}

static void test_buf(void **state)
{
    (void)state;
    ej_buf b;
    ej__buf_init(&b);
    for (int i = 0; i < 1000; i++)
        ej__buf_printf(&b, "%d,", i);
    assert_false(b.failed);
    assert_true(strncmp(b.data, "0,1,2,", 6) == 0);
    char *s = ej__buf_steal(&b);
    assert_int_equal(strlen(s), 3890);
    free(s);
    assert_null(b.data);
}

static int seen_level = -1;
static char seen_msg[64];
static void capture(ej_log_level level, const char *module, int err, const char *msg, void *user)
{
    (void)module;
    (void)err;
    (void)user;
    seen_level = (int)level;
    strncpy(seen_msg, msg, sizeof(seen_msg) - 1);
}

static void test_log_level_filters(void **state)
{
    (void)state;
    ej_log_set_sink(capture, NULL);
    ej_log_set_level(EJ_LOG_WARN);
    EJ_LOG(EJ_LOG_INFO, "test", 0, "dropped %d", 1);
    assert_int_equal(seen_level, -1);
    EJ_LOG(EJ_LOG_ERROR, "test", EJ_ECRON, "kept %d", 2);
    assert_int_equal(seen_level, EJ_LOG_ERROR);
    assert_string_equal(seen_msg, "kept 2");
    assert_int_equal(ej_log_level_parse("WARN"), EJ_LOG_WARN);
    assert_int_equal(ej_log_level_parse("nope"), -1);
    ej_log_set_sink(NULL, NULL);
}

/* A text log line keeps a job's output on its one line and out of the
 * terminal's control: newline, CR, ESC, other C0 and DEL are escaped. */
static void test_log_escape_text(void **state)
{
    (void)state;
    char out[128];
    ej__log_escape_text(out, sizeof out,
                        "exit 1\n2026-01-01T00:00:00.000Z info  [daemon] ok\r\033[2J\t\x01\x7f");
    assert_string_equal(
        out, "exit 1\\n2026-01-01T00:00:00.000Z info  [daemon] ok\\r\\x1b[2J\\t\\x01\\x7f");
    ej__log_escape_text(out, sizeof out, "caf\xc3\xa9 \\n stays");
    assert_string_equal(out, "caf\xc3\xa9 \\n stays");
    /* Cut to fit, never in the middle of an escape. */
    char small[6];
    assert_int_equal(ej__log_escape_text(small, sizeof small, "abcd\n"), 4);
    assert_string_equal(small, "abcd");
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_strerror_own_and_system),
        cmocka_unit_test(test_error_family),
        cmocka_unit_test(test_version),
        cmocka_unit_test(test_java_hash),
        cmocka_unit_test(test_json_quote_gson_escaping),
        cmocka_unit_test(test_buf),
        cmocka_unit_test(test_log_level_filters),
        cmocka_unit_test(test_log_escape_text),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
