/*
 * A job destroyed while a coordinator hook still uses its trigger.
 *
 * The coordinator runs its hooks (console trigger, connection state,
 * failover taken, job stopped, config change) between ej__coord_enter and
 * ej__coord_done; ej_job_shutdown closes the coordinator but only
 * ej__coord_destroy waits for hooks already inside. A hook that took the
 * job's trigger just before the close must find it still there when it
 * uses it: ej_job_destroy may remove the trigger only after that use.
 *
 * Each round enters the coordinator of a started job on a thread of its
 * own, as the coordinator does, and calls one hook; the test hook
 * ej__rt_trigger_use_hook holds the window between taking the trigger and
 * using it open for WINDOW_MS while the main thread destroys the job. With
 * the trigger removed under the hook, the build with AddressSanitizer
 * reports a heap-use-after-free (EJ_SANITIZE=address scripts/test -R
 * coord_shutdown).
 */
#include <pthread.h>
#include <stdatomic.h>

#include "coord_harness_itest.c"

#include "coord/coord_impl.h"
#include "runtime/internal.h"

/* Far longer than shutting down an idle job takes (leave, two deletes). */
#define WINDOW_MS 1000

enum hook_kind { HOOK_TRIGGER, HOOK_CONN, HOOK_FAILOVER, HOOK_STOP, HOOK_CONFIG, HOOK_KINDS };

static const char *const hook_names[HOOK_KINDS] = {"on_trigger", "on_conn", "on_failover_taken",
                                                   "on_stop", "on_config"};

static _Thread_local bool on_hook_thread;
static pthread_mutex_t window_mu = PTHREAD_MUTEX_INITIALIZER;
static pthread_cond_t window_cv = PTHREAD_COND_INITIALIZER;
static bool window_open;           /* the hook holds the trigger */
static atomic_bool destroy_begun;  /* the main thread is in ej_job_destroy */
static atomic_bool destroy_during; /* ... and was when the window closed */

static void hold_window(struct ej_job *job)
{
    (void)job;
    if (!on_hook_thread)
        return;
    on_hook_thread = false; /* once per round */
    pthread_mutex_lock(&window_mu);
    window_open = true;
    pthread_cond_broadcast(&window_cv);
    pthread_mutex_unlock(&window_mu);
    ej__sleep_ms(WINDOW_MS);
    atomic_store(&destroy_during, atomic_load(&destroy_begun));
}

struct hook_call {
    struct ej_job *job;
    enum hook_kind kind;
    const struct ej_job_config *new_cfg;
    bool entered;
};

static void *hook_thread(void *arg)
{
    struct hook_call *h = arg;
    struct ej__coord *c = h->job->coord;
    on_hook_thread = true;
    h->entered = ej__coord_enter(c);
    if (h->entered) {
        switch (h->kind) {
        case HOOK_TRIGGER:
            ej__rt_on_trigger(h->job);
            break;
        case HOOK_CONN:
            ej__rt_on_conn(h->job, EJ_REG_RECONNECTED, false);
            break;
        case HOOK_FAILOVER:
            ej__rt_on_failover_taken(h->job);
            break;
        case HOOK_STOP:
            ej__rt_on_stop(h->job, EJ__STOP_OPERATOR);
            break;
        case HOOK_CONFIG:
            c->hooks.on_config(c->hooks.user, h->new_cfg, EJ__CFG_CRON);
            break;
        case HOOK_KINDS:
            break;
        }
        ej__coord_done(c);
    }
    /* Never leave the main thread waiting. */
    pthread_mutex_lock(&window_mu);
    window_open = true;
    pthread_cond_broadcast(&window_cv);
    pthread_mutex_unlock(&window_mu);
    return NULL;
}

static int noop_fn(const ej_shard_context *ctx, void *user)
{
    (void)ctx;
    (void)user;
    return 0;
}

static void job_config(struct ej_job_config *cfg, const char *name, const char *cron)
{
    ej_job_config_init(cfg);
    ej_job_config_set_str(&cfg->job_name, name);
    ej_job_config_set_str(&cfg->cron, cron);
    cfg->sharding_total_count = 2;
    cfg->job_type = EJ_JOB_TYPE_SIMPLE;
}

/* One round: start a job, call hook kind from inside its coordinator, and
 * destroy the job while the hook holds the trigger. */
static void destroy_under_hook(ej_registry *reg, enum hook_kind kind)
{
    char name[64];
    snprintf(name, sizeof name, "raceJob%d", (int)kind);
    /* No fire while the round runs: shutdown has nothing to drain. */
    struct ej_job_config cfg, new_cfg;
    job_config(&cfg, name, "0 0 0 1 1 ? 2099");
    job_config(&new_cfg, name, "0 0 0 2 1 ? 2099");
    struct ej_job_def def = {.type = EJ_JOB_TYPE_SIMPLE, .simple = noop_fn};
    struct ej_job_opts opts = {.def = &def, .ip = "127.0.5.2"};
    ej_job *job = NULL;
    REQUIRE(ej_job_create(reg, &cfg, &opts, &job) == 0, "create %s", name);
    REQUIRE(ej_job_start(job) == 0, "start %s: %s", name,
            ej_job_last_error(job, (char[512]){0}, 512));

    window_open = false;
    atomic_store(&destroy_begun, false);
    atomic_store(&destroy_during, false);
    struct hook_call h = {.job = job, .kind = kind, .new_cfg = &new_cfg};
    pthread_t th;
    REQUIRE(pthread_create(&th, NULL, hook_thread, &h) == 0, "thread");
    pthread_mutex_lock(&window_mu);
    while (!window_open)
        pthread_cond_wait(&window_cv, &window_mu);
    pthread_mutex_unlock(&window_mu);

    int64_t t0 = ej__mono_ms();
    atomic_store(&destroy_begun, true);
    ej_job_destroy(job);
    int64_t took = ej__mono_ms() - t0;
    pthread_join(th, NULL);
    CHECK(h.entered, "%s: the coordinator was closed before the hook", hook_names[kind]);
    CHECK(atomic_load(&destroy_during), "%s: the hook did not hold the trigger while destroyed",
          hook_names[kind]);
    fprintf(stderr, "coord_shutdown: %s: destroy took %" PRId64 " ms with the hook inside\n",
            hook_names[kind], took);
    ej_job_config_fini(&cfg);
    ej_job_config_fini(&new_cfg);
}

int main(void)
{
    harness_init();
    zkf_server *zk = zkf_shared();
    REQUIRE(zk != NULL, "zookeeper");
    char *ns = zkf_unique_namespace("shutdown");
    ej_registry *reg = zk_connect(zkf_connect_string(zk), ns);
    ej__rt_trigger_use_hook = hold_window;
    for (int k = 0; k < HOOK_KINDS; k++)
        destroy_under_hook(reg, (enum hook_kind)k);
    ej__rt_trigger_use_hook = NULL;
    ej_registry_destroy(reg);
    free(ns);
    if (failures) {
        fprintf(stderr, "%d check(s) failed\n", failures);
        return 1;
    }
    fprintf(stderr, "coord_shutdown: all checks passed\n");
    return 0;
}
