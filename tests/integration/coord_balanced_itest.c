/*
 * BALANCED counts the namespace (docs/sharding.md): 20 one-item BALANCED
 * jobs on 4 in-process instances (each its own ZooKeeper session and IP),
 * every job resharded by its own leader at its own fires. Afterwards every
 * instance must own exactly 5 items: a leader that shards its job alone
 * piles one-item jobs on the instances its hash prefers. Then one instance
 * stops: the other three must own 6 or 7 each, and of the items they owned
 * before, none may move (balance needs only the leaver's 5 to move).
 *
 * Also: no leader fell back to sharding its job alone ("cannot read the
 * namespace"), and the owners stay put once balanced (no resharding war).
 */
#include <inttypes.h>
#include <signal.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "common/util.h"
#include "ejob/console.h"
#include "ejob/ejob.h"
#include "ejob/log.h"
#include "zk_fixture.h"
#include "itest_check.h"

#define JOBS 20
#define INSTANCES 4
#define SESSION_MS 4000
#define SETTLE_MS 20000

static atomic_int fallbacks;

static void log_sink(ej_log_level level, const char *module, int err, const char *msg, void *user)
{
    (void)user;
    (void)err;
    if (strstr(msg, "cannot read the namespace") != NULL)
        atomic_fetch_add(&fallbacks, 1);
    if (level >= EJ_LOG_WARN)
        fprintf(stderr, "[%" PRId64 "] %d [%s] %s\n", ej__now_ms() % 100000, (int)level, module,
                msg);
}

static int item_fn(const ej_shard_context *ctx, void *user)
{
    (void)ctx;
    (void)user;
    return 0;
}

struct instance {
    char ip[32];
    char id[64];
    ej_registry *reg;
    ej_job *jobs[JOBS];
    bool live;
};

static char job_names[JOBS][16];

static void start_instance(struct instance *in, const struct ej_registry_opts *ro)
{
    REQUIRE(ej_registry_create(&in->reg, ro) == 0, "registry: %s", ej_registry_errmsg(NULL));
    int w = snprintf(in->id, sizeof in->id, "%s%s%ld", in->ip, EJ_LAYOUT_ID_SEP, (long)getpid());
    REQUIRE(w > 0 && (size_t)w < sizeof in->id, "instance id of %s", in->ip);
    struct ej_job_def def = {.type = EJ_JOB_TYPE_SIMPLE, .simple = item_fn};
    for (int j = 0; j < JOBS; j++) {
        struct ej_job_config cfg;
        REQUIRE(ej_job_config_init(&cfg) == 0, "config init");
        ej_job_config_set_str(&cfg.job_name, job_names[j]);
        ej_job_config_set_str(&cfg.cron, "* * * * * ?");
        ej_job_config_set_str(&cfg.job_sharding_strategy_class, "BALANCED");
        cfg.sharding_total_count = 1;
        cfg.job_type = EJ_JOB_TYPE_SIMPLE;
        cfg.misfire = false;
        struct ej_job_opts jo = {.def = &def, .ip = in->ip, .drain_timeout_ms = 5000};
        int rc = ej_job_create(in->reg, &cfg, &jo, &in->jobs[j]);
        ej_job_config_fini(&cfg);
        REQUIRE(rc == 0, "create %s on %s: %s", job_names[j], in->ip, ej_strerror(rc));
        rc = ej_job_start(in->jobs[j]);
        REQUIRE(rc == 0, "start %s on %s: %s", job_names[j], in->ip,
                ej_job_last_error(in->jobs[j], (char[512]){0}, 512));
    }
    in->live = true;
}

static void stop_instance(struct instance *in)
{
    for (int j = 0; j < JOBS; j++) {
        ej_job_shutdown(in->jobs[j]);
        ej_job_destroy(in->jobs[j]);
        in->jobs[j] = NULL;
    }
    ej_registry_destroy(in->reg);
    in->reg = NULL;
    in->live = false;
}

/* The owner of each job's item 0 (NULL: none), read through peek; false
 * when some job is still to reshard (necessary or processing present) or
 * its instances are not exactly the live ones. Caller frees owners. */
static bool read_state(ej_registry *peek, const struct instance *ins, char *owner[JOBS])
{
    int live = 0;
    for (int i = 0; i < INSTANCES; i++)
        live += ins[i].live;
    bool settled = true;
    for (int j = 0; j < JOBS; j++) {
        owner[j] = NULL;
        char *p = ej_layout_path_dup(job_names[j], EJ_LAYOUT_NODE_ITEM_INSTANCE, 0, NULL);
        REQUIRE(p != NULL, "path");
        if (ej_registry_get(peek, p, &owner[j], NULL, NULL) != 0)
            settled = false;
        free(p);
        static const ej_layout_node flags[] = {EJ_LAYOUT_NODE_SHARDING_NECESSARY,
                                                EJ_LAYOUT_NODE_SHARDING_PROCESSING};
        for (size_t f = 0; f < 2; f++) {
            p = ej_layout_path_dup(job_names[j], flags[f], 0, NULL);
            REQUIRE(p != NULL, "path");
            bool ex = true;
            if (ej_registry_exists(peek, p, &ex, NULL) != 0 || ex)
                settled = false;
            free(p);
        }
        p = ej_layout_path_dup(job_names[j], EJ_LAYOUT_NODE_INSTANCES, 0, NULL);
        REQUIRE(p != NULL, "path");
        size_t n = 0;
        char **names = NULL;
        if (ej_registry_children(peek, p, EJ_REG_UNSORTED, &names, &n) != 0 || n != (size_t)live)
            settled = false;
        ej_registry_free_names(names);
        free(p);
    }
    return settled;
}

static void free_state(char *owner[JOBS])
{
    for (int j = 0; j < JOBS; j++) {
        free(owner[j]);
        owner[j] = NULL;
    }
}

/* Items per instance; items owned by no live instance go to *orphans. */
static void count_items(const struct instance *ins, char *const owner[JOBS], int counts[INSTANCES],
                        int *orphans)
{
    *orphans = 0;
    for (int i = 0; i < INSTANCES; i++)
        counts[i] = 0;
    for (int j = 0; j < JOBS; j++) {
        bool found = false;
        for (int i = 0; i < INSTANCES && !found; i++)
            if (ins[i].live && owner[j] != NULL && strcmp(owner[j], ins[i].id) == 0) {
                counts[i]++;
                found = true;
            }
        if (!found)
            (*orphans)++;
    }
}

static bool is_balanced(const struct instance *ins, const int counts[INSTANCES], int lo, int hi)
{
    int mn = JOBS + 1, mx = -1;
    for (int i = 0; i < INSTANCES; i++) {
        if (!ins[i].live)
            continue;
        mn = counts[i] < mn ? counts[i] : mn;
        mx = counts[i] > mx ? counts[i] : mx;
    }
    return mn >= lo && mx <= hi && mx - mn <= 1;
}

static void print_counts(const char *when, const struct instance *ins, const int counts[INSTANCES],
                         int orphans, int64_t ms)
{
    fprintf(stderr, "%s after %" PRId64 " ms:", when, ms);
    for (int i = 0; i < INSTANCES; i++)
        if (ins[i].live)
            fprintf(stderr, " %s=%d", ins[i].ip, counts[i]);
    fprintf(stderr, " (unowned %d)\n", orphans);
}

/*
 * Poll until every job is settled on the live instances with per-instance
 * counts in [lo, hi], then check that the owners stay as they are for 2 s
 * (no leader moves them again). owner: the last state read (caller frees).
 */
static bool wait_balanced(ej_registry *peek, const struct instance *ins, int lo, int hi,
                          const char *when, char *owner[JOBS])
{
    int64_t start = ej__mono_ms();
    int counts[INSTANCES];
    int orphans = 0;
    bool ok = false;
    for (;;) {
        bool settled = read_state(peek, ins, owner);
        count_items(ins, owner, counts, &orphans);
        ok = settled && orphans == 0 && is_balanced(ins, counts, lo, hi);
        if (ok || ej__mono_ms() - start > SETTLE_MS)
            break;
        free_state(owner);
        ej__sleep_ms(200);
    }
    print_counts(when, ins, counts, orphans, ej__mono_ms() - start);
    if (!ok)
        return false;
    /* Stable: the same owners 2 s (two fires of every job) later. */
    ej__sleep_ms(2000);
    char *again[JOBS];
    read_state(peek, ins, again);
    int changed = 0;
    for (int j = 0; j < JOBS; j++)
        if (again[j] == NULL || strcmp(again[j], owner[j]) != 0)
            changed++;
    free_state(again);
    CHECK(changed == 0, "%s: %d items moved again once balanced", when, changed);
    return true;
}

int main(void)
{
    setvbuf(stderr, NULL, _IOLBF, 0);
    ej_log_set_sink(log_sink, NULL);
    zkf_server *zk = NULL;
    zkf_opts zo = {.tick_ms = 200};
    REQUIRE(zkf_start(&zk, &zo) == 0, "zookeeper");
    char *ns = zkf_unique_namespace("balanced");
    struct ej_registry_opts ro = itest_registry_opts(zk, ns, SESSION_MS);
    ej_registry *peek = NULL;
    REQUIRE(ej_registry_create(&peek, &ro) == 0, "registry: %s", ej_registry_errmsg(NULL));
    for (int j = 0; j < JOBS; j++)
        snprintf(job_names[j], sizeof job_names[j], "bal%02d", j);

    struct instance ins[INSTANCES];
    memset(ins, 0, sizeof ins);
    for (int i = 0; i < INSTANCES; i++) {
        snprintf(ins[i].ip, sizeof ins[i].ip, "127.0.7.%d", i + 1);
        start_instance(&ins[i], &ro);
    }

    /* 20 items over 4 instances: 5 each. */
    char *before[JOBS];
    bool ok = wait_balanced(peek, ins, JOBS / INSTANCES, JOBS / INSTANCES, "4 instances", before);
    CHECK(ok, "with 4 instances, some instance does not own exactly %d items", JOBS / INSTANCES);

    /* One leaves (the last started, so leaders elsewhere stay): 20 over 3. */
    int gone = INSTANCES - 1;
    stop_instance(&ins[gone]);
    char *after[JOBS];
    int lo = JOBS / (INSTANCES - 1), hi = (JOBS + INSTANCES - 2) / (INSTANCES - 1);
    ok = wait_balanced(peek, ins, lo, hi, "3 instances", after);
    CHECK(ok, "with 3 instances, counts are not all %d or %d", lo, hi);

    /* Only the leaver's items had to move. */
    int moved = 0, kept = 0;
    for (int j = 0; j < JOBS; j++) {
        if (before[j] == NULL || strcmp(before[j], ins[gone].id) == 0)
            continue;
        if (after[j] != NULL && strcmp(after[j], before[j]) == 0)
            kept++;
        else
            moved++;
    }
    fprintf(stderr, "items of the live instances: %d kept, %d moved\n", kept, moved);
    CHECK(moved == 0, "%d items of live instances moved", moved);
    CHECK(atomic_load(&fallbacks) == 0, "%d leaders sharded their job alone",
          atomic_load(&fallbacks));
    free_state(before);
    free_state(after);

    for (int i = 0; i < INSTANCES; i++)
        if (ins[i].live)
            stop_instance(&ins[i]);
    ej_registry_destroy(peek);
    ej_log_set_sink(NULL, NULL);
    zkf_destroy(zk);
    free(ns);
    if (failures) {
        fprintf(stderr, "%d check(s) failed\n", failures);
        return 1;
    }
    fprintf(stderr, "coord_balanced: all checks passed\n");
    return 0;
}
