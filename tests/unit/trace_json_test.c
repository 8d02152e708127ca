/* Unit tests of the history's JSON and time parsing shared by `ejob
 * history --json` and the web console (src/trace/json.c). */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include <cmocka.h>

#include "trace/json.h"

static int64_t now_ms(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_REALTIME, &ts);
    return (int64_t)ts.tv_sec * 1000 + ts.tv_nsec / 1000000;
}

static void test_parse_when(void **state)
{
    (void)state;
    int64_t before = now_ms();
    int64_t two_hours = ej__trace_parse_when("2h");
    int64_t after = now_ms();
    assert_true(two_hours >= before - 7200000 && two_hours <= after - 7200000);
    assert_true(ej__trace_parse_when("90s") >= before - 90000 - 5000);
    assert_true(ej__trace_parse_when("1w") <= after - 7 * 86400000LL);

    struct tm tm = {.tm_year = 126, .tm_mon = 0, .tm_mday = 1, .tm_hour = 10, .tm_isdst = -1};
    int64_t ten = (int64_t)mktime(&tm) * 1000;
    assert_int_equal(ej__trace_parse_when("2026-01-01 10:00"), ten);
    assert_int_equal(ej__trace_parse_when("2026-01-01T10:00:00"), ten);
    assert_int_equal(ej__trace_parse_when("2026-01-01 10:00:05"), ten + 5000);
    static const char *const bad[] = {"",           "yesterday",       "5x", "-2h", "2h ",
                                      "2026-13-01", "2026-01-01 25:00"};
    for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++)
        assert_int_equal(ej__trace_parse_when(bad[i]), -1);
    assert_int_equal(ej__trace_parse_when(NULL), -1);
}

static const char *str(json_t *o, const char *key)
{
    json_t *v = json_object_get(o, key);
    assert_true(json_is_string(v));
    return json_string_value(v);
}

static void test_detail_json(void **state)
{
    (void)state;
    static unsigned char out[] = "a\0b\xff\x01 <i>\n";
    static unsigned char err[] = "caf\xc3\xa9 <b>\n";
    struct ej_trace_status trail[] = {
        {.state = "TASK_STAGING", .sharding_item = "[1]", .slave_id = "10.0.0.7", .creation_ms = 1},
        {.state = "TASK_ERROR",
         .sharding_item = "[1]",
         .slave_id = "10.0.0.7",
         .message = "bad \xfe byte",
         .creation_ms = 2},
    };
    struct ej_trace_execution_detail d = {
        .execution = {.id = "5f0c2a1e-0000",
                      .job_name = "j",
                      .task_id = "t",
                      .hostname = "h",
                      .ip = "10.0.0.7",
                      .instance_id = "10.0.0.7@-@1",
                      .sharding_item = 1,
                      .execution_source = "FAILOVER",
                      .is_success = false,
                      .completed = true,
                      .start_ms = 1767261600000,
                      .complete_ms = 1767261600812,
                      .failure_cause = "exit 3",
                      .has_detail = true,
                      .duration_ms = 812,
                      .exit_code = 3,
                      .fencing_token = 7,
                      .out = out,
                      .out_len = sizeof out - 1,
                      .out_truncated = true,
                      .err = err,
                      .err_len = sizeof err - 1},
        .trail = trail,
        .trail_count = 2,
    };
    json_t *o = ej__trace_detail_json(&d);
    assert_non_null(o);
    /* Not UTF-8 / holding NUL: escaped as text, flagged; valid UTF-8 as is. */
    assert_string_equal(str(o, "stdout"), "a\\x00b\\xff\\x01 <i>\n");
    assert_true(json_is_true(json_object_get(o, "stdoutBinary")));
    assert_true(json_is_true(json_object_get(o, "stdoutTruncated")));
    assert_string_equal(str(o, "stderr"), "caf\xc3\xa9 <b>\n");
    assert_true(json_is_false(json_object_get(o, "stderrBinary")));
    assert_string_equal(str(o, "source"), "FAILOVER");
    assert_int_equal(json_integer_value(json_object_get(o, "exitCode")), 3);
    assert_int_equal(json_integer_value(json_object_get(o, "durationMs")), 812);
    assert_false(json_is_true(json_object_get(o, "success")));
    assert_true(json_is_null(json_object_get(o, "signal")));
    json_t *t = json_object_get(o, "statusTrail");
    assert_int_equal(json_array_size(t), 2);
    assert_string_equal(str(json_array_get(t, 1), "state"), "TASK_ERROR");
    /* Stored text that is not UTF-8 does not lose the whole row. */
    assert_string_equal(str(json_array_get(t, 1), "message"), "bad \\xfe byte");
    assert_true(json_is_null(json_object_get(json_array_get(t, 0), "message")));
    /* Overlong forms and surrogates are not UTF-8 either (the fuzzer found
     * F0 8D.. taken for a 4-byte sequence, which jansson then refused). */
    static unsigned char overlong[] = "\xf0\x8d\x8d\x8d \xed\xa0\x80 \xe0\x80\x80 ok";
    d.execution.out = overlong;
    d.execution.out_len = sizeof overlong - 1;
    json_t *o2 = ej__trace_detail_json(&d);
    assert_string_equal(str(o2, "stdout"),
                        "\\xf0\\x8d\\x8d\\x8d \\xed\\xa0\\x80 \\xe0\\x80\\x80 ok");
    json_decref(o2);
    /* Every value serialises (jansson refuses invalid UTF-8 strings). */
    char *text = json_dumps(o, JSON_COMPACT);
    assert_non_null(text);
    free(text);
    json_decref(o);

    /* An unfinished run without output or detail. */
    struct ej_trace_execution_detail u = {.execution = {.id = "x",
                                                        .job_name = "j",
                                                        .task_id = "t",
                                                        .hostname = "h",
                                                        .ip = "i",
                                                        .instance_id = "",
                                                        .execution_source = "NORMAL_TRIGGER",
                                                        .start_ms = 1767261600000,
                                                        .duration_ms = -1,
                                                        .exit_code = -1}};
    o = ej__trace_detail_json(&u);
    assert_true(json_is_null(json_object_get(o, "stdout")));
    assert_true(json_is_null(json_object_get(o, "complete")));
    assert_true(json_is_null(json_object_get(o, "durationMs")));
    assert_true(json_is_null(json_object_get(o, "exitCode")));
    assert_false(json_is_true(json_object_get(o, "completed")));
    assert_int_equal(json_array_size(json_object_get(o, "statusTrail")), 0);
    json_decref(o);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_parse_when),
        cmocka_unit_test(test_detail_json),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
