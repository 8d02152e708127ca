/* Unit tests of the console library's pure parts: config and settings checks
 * (the paths are tested in layout_test.c). */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>

#include "config/daemon_file.h"
#include "console/web.h"
#include "ejob/config.h"
#include "ejob/console.h"
#include "ejob/error.h"

static void test_status_names(void **state)
{
    (void)state;
    assert_string_equal(ej_console_status_name(EJ_CONSOLE_STATUS_OK), "OK");
    assert_string_equal(ej_console_status_name(EJ_CONSOLE_STATUS_CRASHED), "CRASHED");
    assert_string_equal(ej_console_status_name(EJ_CONSOLE_STATUS_DISABLED), "DISABLED");
    assert_string_equal(ej_console_status_name(EJ_CONSOLE_STATUS_SHARDING_FLAG), "SHARDING_FLAG");
    assert_string_equal(ej_console_status_name(EJ_CONSOLE_STATUS_LEADER_LOST), "LEADER_LOST");
    assert_string_equal(ej_console_item_status_name(EJ_CONSOLE_ITEM_PENDING), "PENDING");
    assert_string_equal(ej_console_item_status_name(EJ_CONSOLE_ITEM_RUNNING), "RUNNING");
}

static const char good[] = "{\"jobName\":\"j\",\"jobType\":\"SCRIPT\",\"cron\":\"0/5 * * * * ?\","
                           "\"shardingTotalCount\":3,\"scriptCommandLine\":\"/bin/true\"}";

static void test_config_check(void **state)
{
    (void)state;
    struct ej_job_config cfg;
    struct ej_config_errors errs;
    ej_config_errors_init(&errs);
    assert_int_equal(ej_job_config_init(&cfg), 0);
    assert_int_equal(ej_console_config_check("j", good, strlen(good), &cfg, &errs), 0);
    assert_int_equal((int)errs.count, 0);
    assert_int_equal(cfg.sharding_total_count, 3);
    ej_job_config_fini(&cfg);

    /* A missing jobName is the job's; another job's name is refused. */
    const char *noname = "{\"jobType\":\"SCRIPT\",\"cron\":\"0/5 * * * * ?\","
                         "\"shardingTotalCount\":1,\"scriptCommandLine\":\"x\"}";
    assert_int_equal(ej_job_config_init(&cfg), 0);
    assert_int_equal(ej_console_config_check("mine", noname, strlen(noname), &cfg, &errs), 0);
    assert_string_equal(cfg.job_name, "mine");
    ej_job_config_fini(&cfg);
    assert_int_equal(ej_job_config_init(&cfg), 0);
    assert_int_equal(ej_console_config_check("other", good, strlen(good), &cfg, &errs), EJ_ECONFIG);
    assert_int_equal((int)errs.count, 1);
    assert_string_equal(errs.messages[0], "jobName: is \"j\" but the job is \"other\"");
    ej_job_config_fini(&cfg);
    ej_config_errors_fini(&errs);

    /* Every problem is reported, each naming its field; the cron is checked. */
    const char *bad = "{\"jobName\":\"j\",\"jobType\":\"SCRIPT\",\"cron\":\"0 0 0 ? * FOO\","
                      "\"shardingTotalCount\":0,\"scriptCommandLine\":\"x\"}";
    assert_int_equal(ej_job_config_init(&cfg), 0);
    assert_int_equal(ej_console_config_check("j", bad, strlen(bad), &cfg, &errs), EJ_ECONFIG);
    assert_true(errs.count >= 2);
    bool cron = false, count = false;
    for (size_t i = 0; i < errs.count; i++) {
        cron = cron || strncmp(errs.messages[i], "cron: ", 6) == 0;
        count = count || strncmp(errs.messages[i], "shardingTotalCount: ", 20) == 0;
    }
    assert_true(cron);
    assert_true(count);
    ej_job_config_fini(&cfg);
    ej_config_errors_fini(&errs);

    const char *syntax = "{\"jobName\":";
    assert_int_equal(ej_job_config_init(&cfg), 0);
    assert_int_equal(ej_console_config_check("j", syntax, strlen(syntax), &cfg, &errs), EJ_ECONFIG);
    assert_int_equal((int)errs.count, 1);
    assert_non_null(strstr(errs.messages[0], "JSON"));
    ej_job_config_fini(&cfg);
    ej_config_errors_fini(&errs);
}

/* The supervision settings (retry, timeouts, policies, deadline): a bad
 * value is refused by the console's check (naming its JSON key) and by the
 * daemon file's reader, which `ejob run --check` is (at its line and
 * column, naming its YAML key), with the one validator's same words. */
static void test_config_check_supervision_fields(void **state)
{
    (void)state;
    static const struct {
        const char *json_key, *yaml_key, *value, *json_value, *words;
    } cases[] = {
        {"timeoutSeconds", "timeoutSeconds", "-3", NULL, "must be 0 (none) to 31536000, got -3"},
        {"timeoutGraceSeconds", "timeoutGraceSeconds", "7200", NULL,
         "must be 0 (2 s) to 3600, got 7200"},
        {"retryMaxAttempts", "retry.maxAttempts", "101", NULL, "must be 0 to 100, got 101"},
        {"retryInitialBackoffSeconds", "retry.initialBackoffSeconds", "-1", NULL,
         "must be 0 to 86400, got -1"},
        {"retryMultiplier", "retry.multiplier", "11", NULL, "must be an integer 1 to 10, got 11"},
        {"retryMaxBackoffSeconds", "retry.maxBackoffSeconds", "86401", NULL,
         "must be 0 to 86400, got 86401"},
        {"retryJitterPercent", "retry.jitter", "101", NULL,
         "must be a percentage 0 to 100, got 101"},
        {"overlapPolicy", "overlapPolicy", "ALLOW", "\"ALLOW\"",
         "must be QUEUE, SKIP or REPLACE, got \"ALLOW\""},
        {"startingDeadlineSeconds", "startingDeadlineSeconds", "-1", NULL,
         "must be 0 (none) to 86400, got -1"},
        {"misfirePolicy", "misfirePolicy", "LATER", "\"LATER\"",
         "must be ONCE, SKIP or CATCH_UP, got \"LATER\""},
        {"misfirePolicy", "misfirePolicy", "CATCH_UP", "\"CATCH_UP\"",
         "CATCH_UP needs catchUpWindowSeconds (1 to 86400)"},
        {"catchUpWindowSeconds", "catchUpWindowSeconds", "86401", NULL,
         "must be 0 to 86400, got 86401"},
    };
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        const char *jv = cases[i].json_value ? cases[i].json_value : cases[i].value;
        char json[512], line[128], yaml[512], want[256];
        snprintf(json, sizeof json,
                 "{\"jobName\":\"j\",\"jobType\":\"SCRIPT\",\"cron\":\"0/5 * * * * ?\","
                 "\"shardingTotalCount\":1,\"scriptCommandLine\":\"x\",\"%s\":%s}",
                 cases[i].json_key, jv);
        struct ej_job_config cfg;
        struct ej_config_errors errs;
        ej_config_errors_init(&errs);
        assert_int_equal(ej_job_config_init(&cfg), 0);
        assert_int_equal(ej_console_config_check("j", json, strlen(json), &cfg, &errs), EJ_ECONFIG);
        snprintf(want, sizeof want, "%s: %s", cases[i].json_key, cases[i].words);
        if (errs.count != 1 || strcmp(errs.messages[0], want) != 0)
            fail_msg("console check of %s: %zu error(s), first \"%s\", expected \"%s\"", json,
                     errs.count, errs.count ? errs.messages[0] : "", want);
        ej_job_config_fini(&cfg);
        ej_config_errors_fini(&errs);

        const char *dot = strchr(cases[i].yaml_key, '.');
        if (dot != NULL)
            snprintf(line, sizeof line, "    retry: {%s: %s}", dot + 1, cases[i].value);
        else
            snprintf(line, sizeof line, "    %s: %s", cases[i].yaml_key, cases[i].value);
        snprintf(yaml, sizeof yaml,
                 "regCenter:\n  namespace: ns\njobs:\n  j:\n    cron: 0 * * * * ?\n"
                 "    shardingTotalCount: 1\n%s\n    props: {script.command.line: x}\n",
                 line);
        struct ej_daemon_config d;
        ej_config_errors_init(&errs);
        assert_int_equal(ej_daemon_config_load_string(yaml, "jobs.yaml", &d, &errs), EJ_ECONFIG);
        int column = (int)(strstr(line, ": ") - line) + 3;
        if (dot != NULL)
            column = (int)(strrchr(line, ' ') - line) + 2;
        snprintf(want, sizeof want, "jobs.yaml:7:%d: jobs.j.%s: %s", column, cases[i].yaml_key,
                 cases[i].words);
        if (errs.count != 1 || strcmp(errs.messages[0], want) != 0)
            fail_msg("the daemon file with \"%s\": %zu error(s), first \"%s\", expected \"%s\"",
                     line, errs.count, errs.count ? errs.messages[0] : "", want);
        ej_daemon_config_fini(&d);
        ej_config_errors_fini(&errs);
    }
}

static int parse(const char *text, struct ej_console_settings *s, char *err, size_t errlen)
{
    ej_console_settings_init(s);
    err[0] = '\0';
    return ej__console_settings_parse(text, strlen(text), "c.yaml", s, err, errlen);
}

static void test_settings_file(void **state)
{
    (void)state;
    struct ej_console_settings s;
    char err[512];
    const char *text = "listen: 127.0.0.1:9000\n"
                       "sessionTimeoutSeconds: 60\n"
                       "tls: {certFile: c.pem, keyFile: k.pem}\n"
                       "registries:\n"
                       "  - {name: prod, serverLists: \"a:1,b:2\", namespace: ns}\n"
                       "  - {serverLists: \"a:1\", namespace: other}\n"
                       "accounts:\n"
                       "  - {name: alice, role: admin, passwordHash: \"$6$s$h\"}\n"
                       "  - {name: bob, role: guest, passwordHash: \"$6$s$h\"}\n"
                       "history: {store: \"sqlite:/var/h.db\", passwordFile: /etc/pw}\n";
    assert_int_equal(parse(text, &s, err, sizeof err), 0);
    assert_string_equal(s.history_store, "sqlite:/var/h.db");
    assert_string_equal(s.history_password_file, "/etc/pw");
    assert_string_equal(s.listen, "127.0.0.1:9000");
    assert_int_equal(s.session_ttl_seconds, 60);
    assert_string_equal(s.tls_key_file, "k.pem");
    assert_int_equal((int)s.registry_count, 2);
    assert_string_equal(s.registries[0].servers, "a:1,b:2");
    assert_string_equal(s.registries[1].name, "other"); /* named after its namespace */
    assert_int_equal((int)s.account_count, 2);
    assert_int_equal(s.accounts[0].role, EJ_CONSOLE_ROLE_ADMIN);
    assert_int_equal(s.accounts[1].role, EJ_CONSOLE_ROLE_GUEST);
    assert_int_equal(ej_console_settings_check(&s, err, sizeof err), 0);
    ej_console_settings_fini(&s);

    static const struct {
        const char *text, *message;
    } bad[] = {
        {"frob: 1\n", "c.yaml:1:7: unknown key \"frob\""},
        {"accounts:\n  - {name: a, role: root, passwordHash: \"$6$x$y\"}\n",
         "c.yaml:2:21: role: expected viewer, operator or admin (guest: viewer)"},
        {"accounts:\n  - {name: a, role: admin, password: pw}\n",
         "c.yaml:2:38: password: plain passwords are not accepted; store passwordHash (ejob "
         "console hash-password)"},
        {"accounts:\n  - {name: a, role: admin, passwordHash: md5}\n",
         "c.yaml:2:5: account \"a\": passwordHash must be a yescrypt or SHA-512 crypt hash "
         "($y$... or $6$...; ejob console hash-password makes one)"},
        {"sessionTimeoutSeconds: 0\n", "c.yaml:1:24: sessionTimeoutSeconds: expected an integer "
                                       "1..604800"},
        {"registries:\n  - {name: x}\n", "c.yaml:2:5: registries: each needs serverLists and "
                                         "namespace"},
        {"listen: [\n", "c.yaml:2:1: did not find expected node content"},
        {"history: {store: x, password: p}\n",
         "c.yaml:1:31: history: a password does not go in this file; name a passwordFile or set "
         "EJOB_TRACING_PASSWORD"},
        {"history: {url: x}\n", "c.yaml:1:16: history: unknown key \"url\""},
    };
    for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
        assert_int_not_equal(parse(bad[i].text, &s, err, sizeof err), 0);
        assert_string_equal(err, bad[i].message);
        ej_console_settings_fini(&s);
    }
}

static void test_settings_check(void **state)
{
    (void)state;
    struct ej_console_settings s;
    char err[512];
    ej_console_settings_init(&s);
    assert_int_equal(ej_console_settings_add_registry(&s, NULL, "h:1", "ns", NULL), 0);
    /* No accounts and no --no-auth: refused, there is no default password. */
    assert_int_equal(ej_console_settings_check(&s, err, sizeof err), EJ_ECONFIG);
    assert_non_null(strstr(err, "no accounts"));
    s.no_auth = true;
    assert_int_equal(ej_console_settings_check(&s, err, sizeof err), 0);
    s.listen = strdup("10.1.2.3:8899");
    assert_int_equal(ej_console_settings_check(&s, err, sizeof err), EJ_ECONFIG);
    assert_string_equal(err, "--no-auth is only allowed on a loopback address, not 10.1.2.3:8899");
    free(s.listen);
    s.listen = strdup("127.0.0.1:99999");
    assert_int_equal(ej_console_settings_check(&s, err, sizeof err), EJ_ECONFIG);
    assert_non_null(strstr(err, "listen: expected"));
    free(s.listen);
    s.listen = strdup("127.0.0.1:0");
    s.tls_cert_file = strdup("c.pem");
    assert_int_equal(ej_console_settings_check(&s, err, sizeof err), EJ_ECONFIG);
    assert_string_equal(err, "tls: give both certFile and keyFile");
    free(s.tls_cert_file);
    s.tls_cert_file = NULL;
    assert_int_equal(ej_console_settings_add_registry(&s, NULL, "h:2", "ns", NULL), 0);
    assert_int_equal(ej_console_settings_check(&s, err, sizeof err), EJ_ECONFIG);
    assert_string_equal(err, "two registries are named \"ns\"");
    /* A history store name is checked as `ejob history --store` checks it. */
    ej_console_settings_fini(&s);
    ej_console_settings_init(&s);
    s.no_auth = true;
    assert_int_equal(ej_console_settings_add_registry(&s, NULL, "h:1", "ns", NULL), 0);
    s.history_password_file = strdup("/etc/pw");
    assert_int_equal(ej_console_settings_check(&s, err, sizeof err), EJ_ECONFIG);
    assert_string_equal(err, "history: a passwordFile without a store");
    s.history_store = strdup("postgresql://u:secret@h/db");
    assert_int_equal(ej_console_settings_check(&s, err, sizeof err), EJ_ECONFIG);
    assert_non_null(strstr(err, "history store: "));
    assert_non_null(strstr(err, "password"));
    free(s.history_store);
    s.history_store = strdup("postgresql://u@h/db");
    assert_int_equal(ej_console_settings_check(&s, err, sizeof err), 0);
    ej_console_settings_fini(&s);
}

static void test_passwords(void **state)
{
    (void)state;
    char a[256], b[256];
    assert_int_equal(ej_console_hash_password("s3cret pass", a, sizeof a), 0);
    assert_int_equal(ej_console_hash_password("s3cret pass", b, sizeof b), 0);
    assert_memory_equal(a, "$y$", 3);
    assert_string_not_equal(a, b); /* salted */
    assert_true(ej_console_check_password("s3cret pass", a));
    assert_true(ej_console_check_password("s3cret pass", b));
    assert_false(ej_console_check_password("s3cret pas", a));
    assert_false(ej_console_check_password("", a));
    assert_false(ej_console_check_password("x", "plain"));
    assert_int_equal(ej_console_hash_password("", a, sizeof a), EJ_EINVAL);
    assert_int_equal(ej_console_hash_password("x", a, 10), EJ_EINVAL);
    assert_true(ej__console_token_equal("abc", "abc"));
    assert_false(ej__console_token_equal("abc", "abd"));
    assert_false(ej__console_token_equal("abc", "abcd"));
    assert_false(ej__console_token_equal("", ""));
    assert_false(ej__console_token_equal(NULL, "a"));
}

/* The names of 1.0 stay (docs/abi.md) and behave as the layout's: the
 * console's ej_console_instance_ip now refuses an IP that does not fit,
 * as the coordinator's did, instead of cutting it. */
static void test_layout_names_of_1_0(void **state)
{
    (void)state;
    char a[128], b[128];
    assert_int_equal(ej_console_path(a, sizeof a, "j", EJ_CONSOLE_NODE_ITEM_RUNNING, 3, NULL),
                     ej_layout_path(b, sizeof b, "j", EJ_LAYOUT_NODE_ITEM_RUNNING, 3, NULL));
    assert_string_equal(a, b);
    char ip[4];
    ej_console_instance_ip("10.0.0.7@-@4123", ip, sizeof ip);
    assert_string_equal(ip, "");
    char ok[16];
    ej_console_instance_ip("10.0.0.7@-@4123", ok, sizeof ok);
    assert_string_equal(ok, "10.0.0.7");
    assert_true(ej_console_instance_on_server("10.0.0.7@-@1", "10.0.0.7"));
    assert_string_equal(EJ_CONSOLE_ID_SEP, EJ_LAYOUT_ID_SEP);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_layout_names_of_1_0),
        cmocka_unit_test(test_status_names),
        cmocka_unit_test(test_config_check),
        cmocka_unit_test(test_config_check_supervision_fields),
        cmocka_unit_test(test_settings_file),
        cmocka_unit_test(test_settings_check),
        cmocka_unit_test(test_passwords),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
