/*
 * Leadership follows availability (in-process instances, real ZooKeeper).
 *
 * Two instances A and B of one job, B the leader. An operator disables
 * B's server and then A's, back to back: B gives up leadership, A elects,
 * and A's server is disabled while A holds the election latch, before it
 * writes the leader node (a test hook puts the disable exactly there).
 * Java 2.1.5 only elects on an available server and abdicates when its
 * server is disabled; A must do the same: it never names itself leader
 * while disabled. When B's server is enabled again, B leads and the job
 * runs. (A took the leadership and kept it: every fire of A "not run
 * (disabled)", B waiting for a leader that never shards, the job stalled
 * until A's server was enabled again.)
 */
#include <inttypes.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "common/util.h"
#include "coord/internal.h"
#include "ejob/console.h"
#include "ejob/ejob.h"
#include "zk_fixture.h"
#include "itest_check.h"

#define SESSION_MS 4000
#define JOB "abdicateJob"
#define IP_A "127.0.10.1"
#define IP_B "127.0.10.2"

static ej_registry *operator_reg; /* the operator's (test's) client */
static char id_a[64];
static atomic_bool hook_armed;
static atomic_int hook_fired;
static atomic_int runs_on_b;

static int item_fn(const ej_shard_context *ctx, void *user)
{
    (void)ctx;
    atomic_fetch_add(&runs_on_b, user != NULL);
    ej__sleep_ms(20);
    return 0;
}

static void set_server(const char *ip, const char *value)
{
    char *p = ej_layout_path_dup(JOB, EJ_LAYOUT_NODE_SERVER, 0, ip);
    REQUIRE(p && ej_registry_set(operator_reg, p, value, strlen(value), -1, NULL) == 0,
            "set %s: %s", p ? p : "?", ej_registry_errmsg(operator_reg));
    free(p);
}

/* In A's election, between winning the latch and writing the leader node:
 * the operator disables A's server. */
static void after_latch(ej__coord *c)
{
    if (strcmp(ej__coord_instance_id(c), id_a) != 0 || !atomic_exchange(&hook_armed, false))
        return;
    set_server(IP_A, EJ_LAYOUT_SERVER_DISABLED);
    atomic_fetch_add(&hook_fired, 1);
}

static char *leader(void)
{
    char *p = ej_layout_path_dup(JOB, EJ_LAYOUT_NODE_ELECTION_INSTANCE, 0, NULL);
    char *data = NULL;
    if (p == NULL || ej_registry_get(operator_reg, p, &data, NULL, NULL) != 0)
        data = NULL;
    free(p);
    return data;
}

static ej_job *start_instance(const struct ej_registry_opts *ro, ej_registry **reg, const char *ip,
                              bool is_b)
{
    REQUIRE(ej_registry_create(reg, ro) == 0, "registry: %s", ej_registry_errmsg(NULL));
    struct ej_job_config cfg;
    REQUIRE(ej_job_config_init(&cfg) == 0, "config init");
    ej_job_config_set_str(&cfg.job_name, JOB);
    ej_job_config_set_str(&cfg.cron, "* * * * * ?");
    cfg.sharding_total_count = 2;
    cfg.job_type = EJ_JOB_TYPE_SIMPLE;
    static int b_mark;
    static struct ej_job_def def_a = {.type = EJ_JOB_TYPE_SIMPLE, .simple = item_fn};
    static struct ej_job_def def_b = {
        .type = EJ_JOB_TYPE_SIMPLE, .simple = item_fn, .user = &b_mark};
    struct ej_job_opts jo = {.def = is_b ? &def_b : &def_a, .ip = ip, .drain_timeout_ms = 5000};
    ej_job *job = NULL;
    int rc = ej_job_create(*reg, &cfg, &jo, &job);
    ej_job_config_fini(&cfg);
    REQUIRE(rc == 0, "create on %s: %s", ip, ej_strerror(rc));
    rc = ej_job_start(job);
    REQUIRE(rc == 0, "start on %s: %s", ip, ej_job_last_error(job, (char[512]){0}, 512));
    return job;
}

/* Watch the leader for ms: true when A was ever seen leading. */
static bool a_leads_within(int ms)
{
    bool seen = false;
    for (int64_t end = ej__mono_ms() + ms; ej__mono_ms() < end;) {
        char *l = leader();
        seen |= l != NULL && strcmp(l, id_a) == 0;
        free(l);
        ej__sleep_ms(20);
    }
    return seen;
}

int main(void)
{
    setvbuf(stderr, NULL, _IOLBF, 0);
    zkf_server *zk = zkf_shared();
    REQUIRE(zk != NULL, "zookeeper");
    char *ns = zkf_unique_namespace("abdicate");
    struct ej_registry_opts ro = itest_registry_opts(zk, ns, SESSION_MS);
    REQUIRE(ej_registry_create(&operator_reg, &ro) == 0, "registry: %s", ej_registry_errmsg(NULL));
    snprintf(id_a, sizeof id_a, "%s%s%ld", IP_A, EJ_LAYOUT_ID_SEP, (long)getpid());
    char id_b[64];
    snprintf(id_b, sizeof id_b, "%s%s%ld", IP_B, EJ_LAYOUT_ID_SEP, (long)getpid());

    ej_registry *reg_a = NULL, *reg_b = NULL;
    ej_job *b = start_instance(&ro, &reg_b, IP_B, true);
    char *l = leader();
    REQUIRE(l && strcmp(l, id_b) == 0, "B leads first (leader %s)", l ? l : "(none)");
    free(l);
    ej_job *a = start_instance(&ro, &reg_a, IP_A, false);
    atomic_store(&ej__election_after_latch_hook, after_latch);

    /* The operator disables B, then (in A's election) A. */
    atomic_store(&hook_armed, true);
    set_server(IP_B, EJ_LAYOUT_SERVER_DISABLED);
    int64_t end = ej__mono_ms() + 10000;
    while (atomic_load(&hook_fired) == 0 && ej__mono_ms() < end)
        ej__sleep_ms(20);
    REQUIRE(atomic_load(&hook_fired) == 1, "A never elected after B gave up leadership");
    CHECK(!a_leads_within(3000), "A leads although its server was disabled while it elected");

    /* B enabled: B leads, and the job runs on B. */
    set_server(IP_B, EJ_LAYOUT_SERVER_ENABLED);
    bool b_leads = false;
    for (end = ej__mono_ms() + 10000; !b_leads && ej__mono_ms() < end; ej__sleep_ms(50)) {
        l = leader();
        b_leads = l && strcmp(l, id_b) == 0;
        free(l);
    }
    CHECK(b_leads, "B does not lead after its server was enabled again");
    int before = atomic_load(&runs_on_b);
    ej__sleep_ms(3000);
    int ran = atomic_load(&runs_on_b) - before;
    fprintf(stderr, "after B's enable: B leads %d, %d item runs on B in 3 s\n", b_leads, ran);
    CHECK(ran >= 2, "the job stalled: %d item runs on B in 3 s", ran);

    atomic_store(&ej__election_after_latch_hook, NULL);
    ej_job_shutdown(a);
    ej_job_destroy(a);
    ej_job_shutdown(b);
    ej_job_destroy(b);
    ej_registry_destroy(reg_a);
    ej_registry_destroy(reg_b);
    ej_registry_destroy(operator_reg);
    free(ns);
    if (failures) {
        fprintf(stderr, "%d check(s) failed\n", failures);
        return 1;
    }
    fprintf(stderr, "coord_abdicate: all checks passed\n");
    return 0;
}
