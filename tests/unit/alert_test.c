/* The alert module: the alerts: section of the daemon file, the rules,
 * throttling and recovery, the event sink, and delivery to a real webhook
 * receiver on loopback (tests/support/alert_receiver.py, started and
 * stopped by pid here). */
#include <arpa/inet.h>
#include <errno.h>
#include <jansson.h>
#include <netinet/in.h>
#include <setjmp.h>
#include <signal.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/prctl.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>
#include <cmocka.h>

#include "alert/alert.h"
#include "alert/internal.h"
#include "common/util.h"
#include "config/daemon_file.h"
#include "ejob/error.h"
#include "ejob/event.h"

#ifndef EJ_SOURCE_DIR
#error "EJ_SOURCE_DIR must name the source tree"
#endif

/* ------------------------------------------------------------- helpers */

static char *load_errors(const char *yaml, struct ej_daemon_config *cfg, int *rc)
{
    struct ej_config_errors errs;
    ej_config_errors_init(&errs);
    *rc = ej_daemon_config_load_string(yaml, "f.yaml", cfg, &errs);
    ej_buf b;
    ej__buf_init(&b);
    ej__buf_append(&b, "", 0);
    for (size_t i = 0; i < errs.count; i++)
        ej__buf_printf(&b, "%s\n", errs.messages[i]);
    ej_config_errors_fini(&errs);
    return ej__buf_steal(&b);
}

/* The file must be refused with want among its messages. */
static void assert_refused(const char *yaml, const char *want)
{
    struct ej_daemon_config cfg;
    int rc;
    char *msgs = load_errors(yaml, &cfg, &rc);
    if (rc != EJ_ECONFIG || strstr(msgs, want) == NULL)
        fail_msg("wanted \"%s\", got rc %d:\n%s", want, rc, msgs);
    free(msgs);
}

#define HEAD "regCenter: {namespace: t}\n"
#define JOB(name)                                                                                  \
    "  " name                                                                                      \
    ": {cron: \"0 * * * * ?\", shardingTotalCount: 2, props: {script.command.line: \"true\"}"

/* ---------------------------------------------------------- the config */

static void config_resolves_rules(void **state)
{
    (void)state;
    setenv("EJ_ALERT_TEST_SECRET", "s3cret", 1);
    const char *yaml =
        HEAD "alerts:\n"
             "  channels:\n"
             "    hook: {type: webhook, url: \"http://127.0.0.1:9/x\", secretEnv: "
             "EJ_ALERT_TEST_SECRET}\n"
             "    mail: {type: email, smtp: \"smtp://127.0.0.1:25\", from: a@b.c, "
             "to: [x@y.z, w@y.z]}\n"
             "    ding: {type: dingtalk, url: \"https://oapi.example/robot\"}\n"
             "  rules:\n"
             "    - {on: [failed, timeout], after: 3, channels: [hook]}\n"
             "    - {on: not-run}\n"
             "  throttleSeconds: 10\n"
             "defaults:\n"
             "  alerts: {channels: [ding]}\n"
             "jobs:\n" JOB("plain") "}\n" JOB("own") ", alerts: {rules: [{on: "
                                                     "[recovered], channels: "
                                                     "[mail]}]}}\n" JOB("third") "}\n";
    struct ej_daemon_config cfg;
    int rc;
    char *msgs = load_errors(yaml, &cfg, &rc);
    assert_int_equal(rc, 0);
    free(msgs);
    const struct ej_alert_config *ac = &cfg.alerts;
    assert_true(ac->configured);
    assert_int_equal(ac->channel_count, 3);
    assert_string_equal(ac->channels[0].secret, "s3cret");
    assert_int_equal(ac->channels[1].type, EJ_ALERT_CH_EMAIL);
    assert_int_equal(ac->channels[1].to_count, 2);
    assert_int_equal(ac->throttle_seconds, 10);
    assert_int_equal(ac->job_count, 3);
    /* plain: the section's rules, sent to the defaults' channel. */
    const struct ej_alert_job_rules *p = &ac->job_rules[0];
    assert_string_equal(p->job, "plain");
    assert_int_equal(p->rule_count, 2);
    assert_int_equal(p->rules[0].after, 3);
    assert_int_equal(p->rules[0].on, (1u << EJ_ALERT_FAILED) | (1u << EJ_ALERT_TIMEOUT));
    assert_int_equal(p->rules[0].channel_count, 1);
    assert_int_equal(p->rules[0].channels[0], 2);
    assert_int_equal(p->rules[1].channels[0], 2);
    /* own: its own rule. */
    const struct ej_alert_job_rules *o = &ac->job_rules[1];
    assert_int_equal(o->rule_count, 1);
    assert_int_equal(o->rules[0].on, 1u << EJ_ALERT_RECOVERED);
    assert_int_equal(o->rules[0].channels[0], 1);
    ej_daemon_config_fini(&cfg);

    /* Without defaults: a rule with no channels goes to every channel. */
    const char *y2 = HEAD "alerts:\n  channels:\n    a: {type: slack, url: \"http://h/a\"}\n"
                          "    b: {type: feishu, url: \"http://h/b\"}\n"
                          "  rules: [{on: missed}]\njobs:\n" JOB("j") "}\n";
    msgs = load_errors(y2, &cfg, &rc);
    assert_int_equal(rc, 0);
    free(msgs);
    assert_int_equal(cfg.alerts.throttle_seconds, EJ_ALERT_THROTTLE_DEFAULT);
    assert_int_equal(cfg.alerts.job_rules[0].rules[0].channel_count, 2);
    ej_daemon_config_fini(&cfg);
}

static void config_refuses_at_line_and_column(void **state)
{
    (void)state;
    unsetenv("EJ_ALERT_TEST_UNSET");
    assert_refused(HEAD "alerts:\n  channels:\n    x: {type: pager, url: \"http://h\"}\n",
                   "f.yaml:4:15: alerts.channels.x.type: must be webhook, email, slack, dingtalk, "
                   "wecom or feishu, got \"pager\"");
    assert_refused(HEAD "alerts:\n  channels:\n    x: {type: slack, url: \"ftp://h/x\"}\n",
                   "f.yaml:4:27: alerts.channels.x.url: must be a http:// or https:// URL");
    assert_refused(HEAD "alerts:\n  channels:\n    x: {type: slack, url: \"http://h/x\"}\n"
                        "  rules:\n    - {on: [failed, exploded]}\n",
                   "f.yaml:6:21: alerts.rules[0].on: must be failed, timeout, not-run, missed or "
                   "recovered, got \"exploded\"");
    assert_refused(HEAD "alerts:\n  channels:\n    x: {type: slack, url: \"http://h/x\"}\n"
                        "  rules:\n    - {on: failed, channels: [y]}\n",
                   "f.yaml:6:31: alerts.rules[0].channels: no channel \"y\" in alerts.channels");
    assert_refused(HEAD "alerts:\n  channels:\n    x: {type: slack, url: \"http://h/x\"}\n"
                        "  rules:\n    - {on: failed, after: 0}\n",
                   "f.yaml:6:27: alerts.rules[0].after: must be 1..1000000, got 0");
    assert_refused(HEAD "alerts:\n  channels:\n    x: {type: slack, url: \"http://h/x\", "
                        "secretFile: k}\n",
                   "alerts.channels.x.secretFile: does not apply to slack channels");
    assert_refused(HEAD "alerts:\n  channels:\n    x: {type: webhook, url: \"http://h/x\", "
                        "secretEnv: EJ_ALERT_TEST_UNSET}\n",
                   "alerts.channels.x.secretEnv: environment variable EJ_ALERT_TEST_UNSET is not "
                   "set");
    assert_refused(HEAD "alerts:\n  channels:\n    m: {type: email, smtp: \"smtp://h\", from: "
                        "\"a@b\\r\\nBcc: x@y\", to: c@d}\n",
                   "f.yaml:4:46: alerts.channels.m.from: not an e-mail address");
    assert_refused(HEAD "alerts:\n  channels:\n    m: {type: email, smtp: \"smtp://h\"}\n",
                   "f.yaml:4:5: alerts.channels.m.from: is required for email channels");
    assert_refused(HEAD "alerts:\n  channels:\n    x: {type: slack, url: \"http://h/x\"}\n"
                        "  throttleSeconds: -1\n",
                   "f.yaml:5:20: alerts.throttleSeconds: must be 0..604800");
    assert_refused(HEAD "alerts:\n  rules: []\n", "alerts.channels: is required");
    assert_refused(HEAD "alerts:\n  channels:\n    x: {type: slack, url: \"http://h/x\"}\n"
                        "  ruels: []\n",
                   "f.yaml:5:3: alerts: unknown key \"ruels\"");
    assert_refused(HEAD "jobs:\n" JOB("j") ", alerts: {channels: [x]}}\n",
                   "jobs.j.alerts: there is no alerts: section with channels");
    assert_refused(HEAD "alerts:\n  channels:\n    x: {type: slack, url: \"http://h/x\"}\n"
                        "jobs:\n" JOB("j") ", alerts: {rulez: []}}\n",
                   "jobs.j.alerts: unknown key \"rulez\"");
}

/* A secret file others may change is refused, as the registry digest's. */
static void config_secret_file_rules(void **state)
{
    (void)state;
    char dir[] = "/tmp/ej_alert_testXXXXXX";
    assert_non_null(mkdtemp(dir));
    char *key = ej__asprintf("%s/hook.key", dir), *yml = ej__asprintf("%s/f.yaml", dir);
    FILE *f = fopen(key, "w");
    fputs("k3y\n", f);
    fclose(f);
    f = fopen(yml, "w");
    fputs(HEAD "alerts:\n  channels:\n    h: {type: webhook, url: \"http://h/x\", secretFile: "
               "hook.key}\n",
          f);
    fclose(f);
    struct ej_daemon_config cfg;
    struct ej_config_errors errs;
    ej_config_errors_init(&errs);
    chmod(key, 0620);
    assert_int_equal(ej_daemon_config_load_file(yml, &cfg, &errs), EJ_ECONFIG);
    assert_non_null(strstr(errs.messages[0], "group-writable"));
    ej_config_errors_fini(&errs);
    chmod(key, 0600);
    ej_config_errors_init(&errs);
    assert_int_equal(ej_daemon_config_load_file(yml, &cfg, &errs), 0);
    assert_string_equal(cfg.alerts.channels[0].secret, "k3y");
    ej_daemon_config_fini(&cfg);
    ej_config_errors_fini(&errs);
    unlink(key);
    unlink(yml);
    rmdir(dir);
    free(key);
    free(yml);
}

/* ------------------------------------------------------ pure functions */

static void sign_is_hmac_sha256(void **state)
{
    (void)state;
    char out[100];
    /* RFC 4231, test case 2. */
    const char *data = "what do ya want for nothing?";
    ej__alert_sign("Jefe", data, strlen(data), out, sizeof out);
    assert_string_equal(out, "sha256=5bdcc146bf60754e6a042426089575c75a003f089d2739839dec58b964"
                             "ec3843");
    /* Test case 1: a 20-byte key. */
    char key[132];
    memset(key, 0x0b, 20);
    key[20] = '\0';
    ej__alert_sign(key, "Hi There", 8, out, sizeof out);
    assert_string_equal(out, "sha256=b0344c61d8db38535ca8afceaf0bf12b881dc200c9833da726e9376c2e"
                             "32cff7");
    /* Test cases 6 and 7: a key longer than a block is hashed first; data
     * longer than a block. */
    memset(key, 0xaa, 131);
    key[131] = '\0';
    const char *d6 = "Test Using Larger Than Block-Size Key - Hash Key First";
    ej__alert_sign(key, d6, strlen(d6), out, sizeof out);
    assert_string_equal(out, "sha256=60e431591ee0b67f0d8a26aacbf5b77f8e0bc6213728c5140546040f0e"
                             "e37f54");
    const char *d7 = "This is a test using a larger than block-size key and a larger than "
                     "block-size data. The key needs to be hashed before being used by the "
                     "HMAC algorithm.";
    ej__alert_sign(key, d7, strlen(d7), out, sizeof out);
    assert_string_equal(out, "sha256=9b09ffa71b942fcb27635fbcd5b0e944bfdc63644f0713938a7f51535c"
                             "3a35e2");
}

static void tail_is_bounded(void **state)
{
    (void)state;
    ej_buf b;
    ej__buf_init(&b);
    for (int i = 0; i < 50; i++)
        ej__buf_printf(&b, "line %d\n", i);
    char *t = ej__alert_tail(b.data, b.len);
    assert_non_null(t);
    assert_non_null(strstr(t, "line 49"));
    assert_non_null(strstr(t, "line 40"));
    assert_null(strstr(t, "line 39"));
    free(t);
    ej__buf_fini(&b);
    char big[10000];
    memset(big, 'x', sizeof big);
    big[100] = '\0'; /* NULs and bad bytes become '?' */
    big[200] = (char)0xff;
    t = ej__alert_tail(big, sizeof big);
    assert_true(strlen(t) <= EJ_ALERT_STDERR_BYTES);
    free(t);
    assert_null(ej__alert_tail("\n\n", 0));
}

static void post_without_start_is_a_noop(void **state)
{
    (void)state;
    struct ej_alert_fact f = {.kind = EJ_ALERT_MISSED, .job = "j", .item = -1};
    ej__alert_post(&f);
    struct ej_alert_stats st;
    ej_alert_stats_get(&st);
    assert_false(st.running);
    /* A file without alerts: starts nothing. */
    struct ej_daemon_config cfg;
    int rc;
    free(load_errors(HEAD, &cfg, &rc));
    assert_int_equal(ej_alert_start(&cfg), 0);
    assert_false(ej_alert_is_running());
    ej_daemon_config_fini(&cfg);
}

/* ------------------------------------------------- against a receiver */

struct receiver {
    pid_t pid;
    int port;
    char dir[64];
    char out[128];
    char key[128];
};

static int free_port(void)
{
    int s = socket(AF_INET, SOCK_STREAM, 0);
    struct sockaddr_in a = {.sin_family = AF_INET, .sin_addr.s_addr = htonl(INADDR_LOOPBACK)};
    socklen_t len = sizeof a;
    bind(s, (struct sockaddr *)&a, sizeof a);
    getsockname(s, (struct sockaddr *)&a, &len);
    close(s);
    return ntohs(a.sin_port);
}

static bool can_connect(int port)
{
    int s = socket(AF_INET, SOCK_STREAM, 0);
    struct sockaddr_in a = {.sin_family = AF_INET,
                            .sin_port = htons((uint16_t)port),
                            .sin_addr.s_addr = htonl(INADDR_LOOPBACK)};
    bool ok = connect(s, (struct sockaddr *)&a, sizeof a) == 0;
    close(s);
    return ok;
}

static void receiver_start(struct receiver *r)
{
    snprintf(r->dir, sizeof r->dir, "/tmp/ej_alert_rcvXXXXXX");
    assert_non_null(mkdtemp(r->dir));
    snprintf(r->out, sizeof r->out, "%s/requests.jsonl", r->dir);
    snprintf(r->key, sizeof r->key, "%s/hook.key", r->dir);
    FILE *f = fopen(r->key, "w");
    fputs("k3y\n", f);
    fclose(f);
    chmod(r->key, 0600);
    r->port = free_port();
    char port[16];
    snprintf(port, sizeof port, "%d", r->port);
    r->pid = fork();
    assert_true(r->pid >= 0);
    if (r->pid == 0) {
        prctl(PR_SET_PDEATHSIG, SIGKILL);
        execlp("python3", "python3", EJ_SOURCE_DIR "/tests/support/alert_receiver.py", port, r->out,
               r->key, (char *)NULL);
        _exit(127);
    }
    for (int i = 0; i < 100 && !can_connect(r->port); i++)
        usleep(100000);
    assert_true(can_connect(r->port));
}

static void receiver_stop(struct receiver *r)
{
    kill(r->pid, SIGTERM);
    waitpid(r->pid, NULL, 0);
    unlink(r->out);
    unlink(r->key);
    rmdir(r->dir);
}

/* The requests received so far, as a JSON array of their records. */
static json_t *received(const struct receiver *r)
{
    json_t *all = json_array();
    FILE *f = fopen(r->out, "r");
    char line[65536];
    while (f != NULL && fgets(line, sizeof line, f) != NULL) {
        json_t *rec = json_loads(line, 0, NULL);
        if (rec != NULL) {
            json_t *body = json_loads(json_string_value(json_object_get(rec, "body")), 0, NULL);
            json_object_set_new(rec, "json", body != NULL ? body : json_null());
            json_array_append_new(all, rec);
        }
    }
    if (f != NULL)
        fclose(f);
    return all;
}

/* Waits until n requests came (at most 10 s), returns them. */
static json_t *wait_received(const struct receiver *r, size_t n)
{
    for (int i = 0; i < 100; i++) {
        json_t *all = received(r);
        if (json_array_size(all) >= n)
            return all;
        json_decref(all);
        usleep(100000);
    }
    return received(r);
}

static const char *field(json_t *rec, const char *name)
{
    json_t *v = json_object_get(json_object_get(rec, "json"), name);
    return json_is_string(v) ? json_string_value(v) : NULL;
}

static json_int_t ifield(json_t *rec, const char *name)
{
    return json_integer_value(json_object_get(json_object_get(rec, "json"), name));
}

static void start_alerts(const struct receiver *r, int throttle, const char *rules)
{
    char *yaml = ej__asprintf(
        HEAD "alerts:\n  channels:\n"
             "    hook: {type: webhook, url: \"http://127.0.0.1:%d/hook\", secretFile: %s}\n"
             "    refused: {type: webhook, url: \"http://127.0.0.1:%d/status/400\"}\n"
             "  rules:\n%s  throttleSeconds: %d\n"
             "jobs:\n" JOB("j") ", timeZone: Asia/Shanghai}\n",
        r->port, r->key, r->port, rules, throttle);
    struct ej_daemon_config cfg;
    int rc;
    char *msgs = load_errors(yaml, &cfg, &rc);
    if (rc != 0)
        fail_msg("%s", msgs);
    free(msgs);
    free(yaml);
    assert_int_equal(ej_alert_start(&cfg), 0);
    assert_true(ej_alert_is_running());
    assert_false(cfg.alerts.configured); /* taken */
    ej_daemon_config_fini(&cfg);
}

static void post(ej_alert_kind kind, bool ok, int item, const char *reason)
{
    struct ej_alert_fact f = {.kind = kind,
                              .succeeded = ok,
                              .job = "j",
                              .item = item,
                              .fire_ms = 1795748400000LL, /* 2026-11-27 11:00:00 +08:00 */
                              .reason = reason,
                              .execution_id = "0f0e0d0c-aaaa-4bbb-8ccc-000000000001",
                              .has_exit_code = !ok,
                              .exit_code = 3,
                              .stderr_text = "first\nboom: disk full\n"};
    ej__alert_post(&f);
}

/* A missed fire, posted directly (the fire ledger's entry point), reaches
 * the webhook signed, with the schema's fields. */
static void missed_reaches_webhook_signed(void **state)
{
    (void)state;
    struct receiver r;
    receiver_start(&r);
    start_alerts(&r, 300, "    - {on: [missed], channels: [hook]}\n");
    struct ej_alert_fact f = {.kind = EJ_ALERT_MISSED,
                              .job = "j",
                              .item = 1,
                              .fire_ms = 1795748400000LL,
                              .fire_count = 3,
                              .instance = "127.0.0.9@-@42",
                              .reason = "no live instance"};
    ej__alert_post(&f);
    json_t *all = wait_received(&r, 1);
    assert_int_equal(json_array_size(all), 1);
    json_t *rec = json_array_get(all, 0);
    assert_true(json_is_true(json_object_get(rec, "signature_ok")));
    assert_int_equal(ifield(rec, "version"), EJ_ALERT_SCHEMA_VERSION);
    assert_string_equal(field(rec, "kind"), "missed");
    assert_string_equal(field(rec, "job"), "j");
    assert_int_equal(ifield(rec, "item"), 1);
    assert_int_equal(ifield(rec, "fireCount"), 3);
    assert_string_equal(field(rec, "fireTime"), "2026-11-27 11:00:00 +08:00");
    assert_string_equal(field(rec, "timeZone"), "Asia/Shanghai");
    assert_string_equal(field(rec, "instance"), "127.0.0.9@-@42");
    assert_string_equal(field(rec, "reason"), "no live instance");
    json_decref(all);
    ej_alert_stop(1000);
    assert_false(ej_alert_is_running());
    receiver_stop(&r);
}

/* after: 2 waits for the second failure in a row; throttling holds the
 * third back and the next message counts it; a success then recovers. */
static void after_throttle_and_recovery(void **state)
{
    (void)state;
    struct receiver r;
    receiver_start(&r);
    start_alerts(&r, 1,
                 "    - {on: [failed, timeout], after: 2, channels: [hook]}\n"
                 "    - {on: [recovered], channels: [hook]}\n");
    post(EJ_ALERT_FAILED, false, 0, "Execute script failure: 'x' exited with code 3");
    post(EJ_ALERT_FAILED, false, 0, "Execute script failure: 'x' exited with code 3");
    post(EJ_ALERT_FAILED, false, 0, "Execute script failure: 'x' exited with code 3");
    json_t *all = wait_received(&r, 1);
    usleep(300000);
    json_decref(all);
    all = received(&r);
    assert_int_equal(json_array_size(all), 1); /* the first fact was under after: 2 */
    json_t *rec = json_array_get(all, 0);
    assert_string_equal(field(rec, "kind"), "failed");
    assert_int_equal(ifield(rec, "consecutiveFailures"), 2);
    assert_int_equal(ifield(rec, "exitCode"), 3);
    assert_string_equal(field(rec, "command"),
                        "ejob history show 0f0e0d0c-aaaa-4bbb-8ccc-000000000001");
    assert_non_null(strstr(field(rec, "stderrTail"), "boom: disk full"));
    json_decref(all);
    struct ej_alert_stats st;
    ej_alert_stats_get(&st);
    assert_int_equal(st.throttled, 1);
    /* Past the window: the next one says how many were held back. */
    sleep(1);
    usleep(200000);
    post(EJ_ALERT_TIMEOUT, false, 0, "Execute script failure: 'x' timed out after 5 ms");
    all = wait_received(&r, 2);
    assert_int_equal(json_array_size(all), 2);
    rec = json_array_get(all, 1);
    assert_string_equal(field(rec, "kind"), "timeout");
    assert_int_equal(ifield(rec, "consecutiveFailures"), 4);
    json_decref(all);
    /* timeout has its own window: the held-back failure waits for the next
     * failed message; a success of the item recovers it, once. */
    post(EJ_ALERT_FAILED, true, 0, NULL);
    post(EJ_ALERT_FAILED, true, 0, NULL);
    post(EJ_ALERT_FAILED, true, 1, NULL); /* item 1 never alerted */
    all = wait_received(&r, 3);
    usleep(300000);
    json_decref(all);
    all = received(&r);
    assert_int_equal(json_array_size(all), 3);
    assert_string_equal(field(json_array_get(all, 2), "kind"), "recovered");
    assert_int_equal(ifield(json_array_get(all, 2), "item"), 0);
    json_decref(all);
    /* Failures start again from one. */
    sleep(1);
    post(EJ_ALERT_FAILED, false, 0, "again");
    post(EJ_ALERT_FAILED, false, 0, "again");
    all = wait_received(&r, 4);
    rec = json_array_get(all, 3);
    assert_string_equal(field(rec, "kind"), "failed");
    assert_int_equal(ifield(rec, "consecutiveFailures"), 2);
    assert_int_equal(ifield(rec, "suppressed"), 1);
    json_decref(all);
    /* The sender counts a message sent once the receiver has answered,
     * after the receiver has it: wait for the count. */
    for (int i = 0; i < 200; i++) {
        ej_alert_stats_get(&st);
        if (st.channels[0].sent >= 4)
            break;
        usleep(10000);
    }
    assert_int_equal(st.channels[0].sent, 4);
    ej_alert_stop(1000);
    receiver_stop(&r);
}

/* A 4xx is final: counted failed; a message that cannot be sent by the
 * stop's deadline is counted dropped. */
static void refused_and_dropped_are_counted(void **state)
{
    (void)state;
    struct receiver r;
    receiver_start(&r);
    start_alerts(&r, 0, "    - {on: [not-run], channels: [refused]}\n");
    post(EJ_ALERT_NOT_RUN, false, -1, "paused");
    struct ej_alert_stats st;
    for (int i = 0; i < 100; i++) {
        ej_alert_stats_get(&st);
        if (st.channels[1].failed > 0)
            break;
        usleep(50000);
    }
    assert_int_equal(st.channels[1].failed, 1);
    assert_int_equal(st.channels[1].sent, 0);
    assert_string_equal(st.channels[1].name, "refused");
    /* The receiver gone: the next message is retried, then dropped at a
     * stop with no time to drain. */
    receiver_stop(&r);
    post(EJ_ALERT_NOT_RUN, false, -1, "paused");
    /* Its first attempt fails at once (nothing listens); the retry would
     * come a second later. */
    usleep(500000);
    ej_alert_stats_get(&st);
    assert_int_equal(st.channels[1].failed, 1); /* a lost connection is retried */
    ej_alert_stop(0);
    ej_alert_stats_get(&st);
    assert_false(st.running);
    assert_int_equal(st.channels[1].dropped, 1);
    assert_int_equal(st.channels[1].failed, 1);
}

/* The sink: a failed execution end, a timed-out one, a success, and a
 * fire not run, as the bus delivers them. */
static void sink_reads_events(void **state)
{
    (void)state;
    struct receiver r;
    receiver_start(&r);
    start_alerts(&r, 0, "    - {on: [failed, timeout, not-run], channels: [hook]}\n");
    ej_event ev = {.type = EJ_EVENT_EXECUTION};
    ej_execution_event *e = &ev.u.execution;
    snprintf(e->id, sizeof e->id, "11111111-2222-4333-8444-555555555555");
    e->job_name = "j";
    e->task_id = "j@-@0@-@READY@-@127.0.0.5@-@777";
    e->sharding_item = 0;
    e->start_time_ms = 1795748400000LL;
    e->complete_time_ms = 0; /* a start: nothing */
    ej_alert_event_sink(&ev, NULL);
    /* The ledger's row of the run: its cron fire time, 5 s before the start. */
    ej_event fev = {.type = EJ_EVENT_FIRE};
    fev.u.fire.job_name = "j";
    fev.u.fire.fire_time_ms = 1795748395000LL;
    fev.u.fire.sharding_item = 0;
    fev.u.fire.outcome = EJ_FIRE_RAN;
    snprintf(fev.u.fire.execution_id, sizeof fev.u.fire.execution_id, "%s", e->id);
    ej_alert_event_sink(&fev, NULL);
    e->complete_time_ms = 1795741201000LL;
    e->failure_cause = "Execute script failure: 'sleep' timed out after 100 ms; process group "
                       "killed";
    e->result = EJ_RUN_TIMEOUT; /* the flag, not the words, makes it a timeout */
    e->has_exit_code = true;
    e->exit_code = -1;
    e->term_signal = 15;
    ej_alert_event_sink(&ev, NULL);
    e->failure_cause = "HTTP job failure: GET http://x/: timed out (by its words only)";
    e->result = NULL;
    e->has_exit_code = false;
    e->http_status = 502;
    e->sharding_item = 1;
    ej_alert_event_sink(&ev, NULL);
    ej_event sev = {.type = EJ_EVENT_STATUS};
    sev.u.status.job_name = "j";
    sev.u.status.task_id = "";
    sev.u.status.state = EJ_TASK_ERROR;
    sev.u.status.message = "Job 'j' fire not run (leader-wait): 2 fire time(s) from "
                           "1795748400000 to 1795748410000";
    ej_alert_event_sink(&sev, NULL);
    json_t *all = wait_received(&r, 3);
    assert_int_equal(json_array_size(all), 3);
    json_t *t = json_array_get(all, 0), *h = json_array_get(all, 1), *n = json_array_get(all, 2);
    assert_string_equal(field(t, "kind"), "timeout");
    assert_string_equal(field(t, "fireTime"), "2026-11-27 10:59:55 +08:00"); /* the cron's */
    assert_string_equal(field(t, "instance"), "127.0.0.5@-@777");
    assert_int_equal(ifield(t, "termSignal"), 15);
    assert_string_equal(field(h, "kind"), "failed");
    assert_int_equal(ifield(h, "httpStatus"), 502);
    assert_string_equal(field(n, "kind"), "not-run");
    assert_string_equal(field(n, "reason"), "leader-wait");
    assert_int_equal(ifield(n, "fireCount"), 2);
    assert_true(json_is_null(json_object_get(json_object_get(n, "json"), "item")));
    json_decref(all);
    ej_alert_stop(1000);
    receiver_stop(&r);
}

/* The fire ledger's "missed" rows become missed alerts, once: the
 * "fire not run (missed)" status line of the same fire adds none, and a
 * ledger row of another outcome is not an alert. */
static void sink_reads_missed_fires(void **state)
{
    (void)state;
    struct receiver r;
    receiver_start(&r);
    start_alerts(&r, 0, "    - {on: [missed, not-run], channels: [hook]}\n");
    ej_event fev = {.type = EJ_EVENT_FIRE};
    ej_fire_event *f = &fev.u.fire;
    f->job_name = "j";
    f->fire_time_ms = 1795748400000LL;
    f->sharding_item = 2;
    f->outcome = EJ_FIRE_RAN;
    ej_alert_event_sink(&fev, NULL);
    f->outcome = EJ_FIRE_MISSED;
    ej_alert_event_sink(&fev, NULL);
    ej_event sev = {.type = EJ_EVENT_STATUS};
    sev.u.status.job_name = "j";
    sev.u.status.task_id = "";
    sev.u.status.state = EJ_TASK_ERROR;
    sev.u.status.message = "Job 'j' fire not run (missed): 1 fire time(s) from "
                           "1795748400000 to 1795748400000";
    ej_alert_event_sink(&sev, NULL);
    json_t *all = wait_received(&r, 1);
    usleep(300000); /* nothing else comes */
    json_decref(all);
    all = wait_received(&r, 1);
    assert_int_equal(json_array_size(all), 1);
    json_t *m = json_array_get(all, 0);
    assert_string_equal(field(m, "kind"), "missed");
    assert_int_equal(ifield(m, "item"), 2);
    json_decref(all);
    ej_alert_stop(1000);
    receiver_stop(&r);
}

/* A failed assertion leaves the module running: stop it, so the next test
 * starts clean. */
static int stop_alerts(void **state)
{
    (void)state;
    ej_alert_stop(0);
    return 0;
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(config_resolves_rules),
        cmocka_unit_test(config_refuses_at_line_and_column),
        cmocka_unit_test(config_secret_file_rules),
        cmocka_unit_test(sign_is_hmac_sha256),
        cmocka_unit_test(tail_is_bounded),
        cmocka_unit_test(post_without_start_is_a_noop),
        cmocka_unit_test_teardown(missed_reaches_webhook_signed, stop_alerts),
        cmocka_unit_test_teardown(after_throttle_and_recovery, stop_alerts),
        cmocka_unit_test_teardown(refused_and_dropped_are_counted, stop_alerts),
        cmocka_unit_test_teardown(sink_reads_events, stop_alerts),
        cmocka_unit_test_teardown(sink_reads_missed_fires, stop_alerts),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
