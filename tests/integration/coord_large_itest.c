/*
 * 100,000 items over 10 instances. The assignment does not fit one
 * ZooKeeper transaction (about 1 MB), so the leader writes it in chunks,
 * and the chunk that deletes leader/sharding/necessary and processing is
 * committed last: a reader that waits for those flags to go never sees a
 * half-written assignment. Each instance's view then finds exactly its own
 * items.
 *
 * In-process instances, through the coordination module's API (the job
 * API validates shardingTotalCount against the config module's limit).
 */
#include <pthread.h>
#include <stdatomic.h>

#include "coord/internal.h"
#include "coord_harness_itest.c"

#define ITEMS 100000
#define INSTANCES 10
static const char *JOB = "largeJob";

struct watcher {
    ej_registry *reg;
    atomic_bool stop;
    atomic_bool saw_flags;
    atomic_bool flags_gone;
    atomic_bool last_item_written_when_gone;
};

/* Polls the flags; the moment they are gone, the last item must be in. */
static void *watch_flags(void *p)
{
    struct watcher *w = p;
    while (!atomic_load(&w->stop)) {
        bool nec = zk_exists(w->reg, "/%s/leader/sharding/necessary", JOB);
        bool proc = zk_exists(w->reg, "/%s/leader/sharding/processing", JOB);
        if (nec || proc) {
            atomic_store(&w->saw_flags, true);
        } else if (atomic_load(&w->saw_flags)) {
            atomic_store(&w->last_item_written_when_gone,
                         zk_exists(w->reg, "/%s/sharding/%d/instance", JOB, ITEMS - 1));
            atomic_store(&w->flags_gone, true);
            break;
        }
        ej__sleep_ms(2);
    }
    return NULL;
}

struct reader {
    ej_registry *reg;
    ej__view *view;
    char id[64];
    size_t own;
    int64_t ms;
};

static void *load_view(void *p)
{
    struct reader *r = p;
    int64_t t = ej__mono_ms();
    REQUIRE(ej__view_create(r->reg, JOB, r->id, NULL, NULL, &r->view) == 0, "view");
    REQUIRE(ej__view_start(r->view) == 0, "view start");
    int *items = NULL;
    ej__view_items_of(r->view, r->id, &items, &r->own);
    free(items);
    r->ms = ej__mono_ms() - t;
    return NULL;
}

int main(void)
{
    harness_init();
    zkf_server *zk = zkf_shared();
    REQUIRE(zk != NULL, "zookeeper");
    const char *servers = zkf_connect_string(zk);
    char *ns = zkf_unique_namespace("large");
    ej_registry *reg = zk_connect(servers, ns);
    ej_registry *wreg = zk_connect(servers, ns);

    /* The leader's coordinator (not started: the sharding writer needs only
     * its registry, job name and view). */
    char *ids[INSTANCES];
    for (int i = 0; i < INSTANCES; i++)
        ids[i] = ej__asprintf("10.1.0.%d@-@%d", 10 + i, 1000 + i);
    ej_sharding_instances_order(ids, INSTANCES);
    ej__coord *c = NULL;
    struct ej__coord_opts co = {
        .reg = reg, .job_name = JOB, .instance_id = ids[0], .ip = "10.1.0.10"};
    REQUIRE(ej__coord_create(&co, &c) == 0, "coord");
    const char **owners = calloc(ITEMS, sizeof *owners);
    int64_t t = ej__mono_ms();
    REQUIRE(ej__shard_assign("", JOB, ids, INSTANCES, ITEMS, NULL, owners) == 0, "assign");
    say("assignment computed in %" PRId64 " ms", ej__mono_ms() - t);

    char path[256];
    snprintf(path, sizeof path, "/%s/leader/sharding/necessary", JOB);
    REQUIRE(ej_registry_create_node(reg, path, NULL, 0, EJ_REG_PERSISTENT, EJ_REG_CREATE_PARENTS,
                                    NULL) == 0,
            "necessary");
    snprintf(path, sizeof path, "/%s/leader/sharding/processing", JOB);
    REQUIRE(ej_registry_create_node(reg, path, NULL, 0, EJ_REG_EPHEMERAL, EJ_REG_CREATE_PARENTS,
                                    NULL) == 0,
            "processing");
    struct watcher w = {.reg = wreg};
    pthread_t wt;
    pthread_create(&wt, NULL, watch_flags, &w);
    ej__sleep_ms(50);
    t = ej__mono_ms();
    uint64_t req0 = ej_registry_request_count(reg);
    int rc = ej__shard_write(c, ITEMS, owners, 0);
    int64_t wrote = ej__mono_ms() - t;
    uint64_t reqs = ej_registry_request_count(reg) - req0;
    CHECK(rc == 0, "sharding write: %s", ej_strerror(rc));
    say("100,000 items written in %" PRId64 " ms with %" PRIu64 " requests", wrote, reqs);
    CHECK(reqs < 200, "%" PRIu64 " requests for the write (chunks of transactions expected)", reqs);
    int64_t dl = ej__mono_ms() + 5000;
    while (!atomic_load(&w.flags_gone) && ej__mono_ms() < dl)
        ej__sleep_ms(10);
    atomic_store(&w.stop, true);
    pthread_join(wt, NULL);
    CHECK(atomic_load(&w.saw_flags) && atomic_load(&w.flags_gone), "flags seen %d gone %d",
          atomic_load(&w.saw_flags), atomic_load(&w.flags_gone));
    CHECK(atomic_load(&w.last_item_written_when_gone),
          "the flags went before the last chunk of the assignment was written");

    /* The views of two instances (each watches every item's instance node:
     * ten such views would hold 1.2 million watches on this small test
     * server) see exactly their own 10,000 items. */

    enum { VIEWS = 2 };
    struct reader rd[VIEWS];
    pthread_t rt[VIEWS];
    t = ej__mono_ms();
    for (int i = 0; i < VIEWS; i++) {
        memset(&rd[i], 0, sizeof rd[i]);
        rd[i].reg = zk_connect(servers, ns);
        snprintf(rd[i].id, sizeof rd[i].id, "%s", ids[i == 0 ? 0 : INSTANCES - 1]);
        pthread_create(&rt[i], NULL, load_view, &rd[i]);
    }
    for (int i = 0; i < VIEWS; i++) {
        pthread_join(rt[i], NULL);
        CHECK(rd[i].own == ITEMS / INSTANCES, "%s owns %zu items", rd[i].id, rd[i].own);
        CHECK(ej__view_size(rd[i].view) == ITEMS, "view of %s has %zu items", rd[i].id,
              ej__view_size(rd[i].view));
    }
    say("%d views loaded in %" PRId64 " ms", VIEWS, ej__mono_ms() - t);
    /* Every item has one valid owner, 10,000 each (from the first view,
     * which knows all owners). */
    size_t per[INSTANCES] = {0};
    size_t unowned = 0;
    for (int item = 0; item < ITEMS; item++) {
        struct ej__view_item it;
        int k = -1;
        if (ej__view_get(rd[0].view, item, &it) == 0) {
            for (int i = 0; it.owner && i < INSTANCES; i++)
                if (strcmp(it.owner, ids[i]) == 0)
                    k = i;
            ej__view_item_fini(&it);
        }
        if (k < 0)
            unowned++;
        else
            per[k]++;
    }
    CHECK(unowned == 0, "%zu items without a valid owner", unowned);
    for (int i = 0; i < INSTANCES; i++)
        CHECK(per[i] == ITEMS / INSTANCES, "%s owns %zu items", ids[i], per[i]);
    /* Average: the first instance in ElasticJob order owns 0..9999. */
    char *o0 = zk_get(reg, "/%s/sharding/0/instance", JOB);
    char *o9 = zk_get(reg, "/%s/sharding/99999/instance", JOB);
    CHECK(o0 && strcmp(o0, ids[0]) == 0, "item 0 owner %s", o0 ? o0 : "-");
    CHECK(o9 && strcmp(o9, ids[INSTANCES - 1]) == 0, "item 99999 owner %s", o9 ? o9 : "-");
    free(o0);
    free(o9);

    for (int i = 0; i < VIEWS; i++) {
        ej__view_destroy(rd[i].view);
        ej_registry_destroy(rd[i].reg);
    }
    /* No clean-up: the namespace is this test's, and the server goes at
     * exit (deleting 200,000 nodes one by one would take minutes). */
    ej__coord_destroy(c);
    free(owners);
    for (int i = 0; i < INSTANCES; i++)
        free(ids[i]);
    ej_registry_destroy(wreg);
    ej_registry_destroy(reg);
    free(ns);
    if (failures) {
        fprintf(stderr, "%d check(s) failed\n", failures);
        return 1;
    }
    fprintf(stderr, "coord_large: all checks passed\n");
    return 0;
}
