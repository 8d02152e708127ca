/*
 * Misfire and distribute-once listeners.
 *
 * Misfire: an item that runs longer than the cron period, with
 * monitorExecution: the fire that comes while it runs marks it misfire
 * (sharding/0/misfire exists while it still runs) and it runs again once,
 * as MISFIRE, right after -- never concurrently.
 *
 * Distribute-once: three instances, three items; per fire exactly one
 * instance runs the "all started" and the "all completed" callbacks.
 */
#include "coord_harness_itest.c"

int main(void)
{
    harness_init();
    zkf_server *zk = zkf_shared();
    REQUIRE(zk != NULL, "zookeeper");
    const char *servers = zkf_connect_string(zk);
    char *ns = zkf_unique_namespace("listeners");
    ej_registry *reg = zk_connect(servers, ns);

    /* ---- misfire ---- */
    char *mlog = tmp_log("misfire");
    int m =
        node_start(servers, ns, "misfireJob", mlog, "127.0.3.41", "--count", "1", "--cron",
                   "* * * * * ?", "--item-ms", "50", "--long-item", "0:2300", "--long-first", NULL);
    REQUIRE(m >= 0, "misfire node");
    /* Wait for the long run to start, then watch for the misfire node. */
    int64_t long_start = 0;
    for (int k = 0; k < 100 && !long_start; k++) {
        struct xlog xl;
        xlog_read(mlog, &xl);
        if (xl.n > 0)
            long_start = xl.runs[0].start;
        xlog_free(&xl);
        if (!long_start)
            ej__sleep_ms(50);
    }
    REQUIRE(long_start, "the long run never started");
    bool saw_misfire = false;
    while (ej__now_ms() < long_start + 2200 && !saw_misfire) {
        saw_misfire = zk_exists(reg, "/misfireJob/sharding/0/misfire");
        ej__sleep_ms(50);
    }
    CHECK(saw_misfire, "no misfire node while the item still ran");
    ej__sleep_ms(3000);
    struct xlog xl;
    xlog_read(mlog, &xl);
    CHECK(xl.n >= 3, "%zu runs", xl.n);
    if (xl.n >= 2) {
        struct run *a = &xl.runs[0], *b = &xl.runs[1];
        CHECK(strcmp(a->src, "NORMAL_TRIGGER") == 0 && a->end - a->start >= 2200,
              "first run %s %" PRId64 " ms", a->src, a->end - a->start);
        CHECK(strcmp(b->src, "MISFIRE") == 0, "second run is %s, not MISFIRE", b->src);
        CHECK(b->start >= a->end && b->start - a->end < 500,
              "misfire run %" PRId64 " ms after the long one ended", b->start - a->end);
    }
    CHECK(runs_of(&xl, 0, 0, INT64_MAX, "MISFIRE") == 1, "%d MISFIRE runs",
          runs_of(&xl, 0, 0, INT64_MAX, "MISFIRE"));
    for (size_t i = 1; i < xl.n; i++)
        CHECK(xl.runs[i].start >= xl.runs[i - 1].end, "runs %zu and %zu overlap", i - 1, i);
    CHECK(!zk_exists(reg, "/misfireJob/sharding/0/misfire"), "misfire node left");
    xlog_free(&xl);
    node_stop(m);
    unlink(mlog);
    free(mlog);

    /* ---- distribute-once ---- */
    char *olog = tmp_log("once");
    const char *ips[] = {"127.0.3.51", "127.0.3.52", "127.0.3.53"};
    int n[3];
    for (int i = 0; i < 3; i++) {
        n[i] = node_start(servers, ns, "onceJob", olog, ips[i], "--count", "3", "--cron",
                          "0/2 * * * * ?", "--item-ms", "300", "--once", NULL);
        REQUIRE(n[i] >= 0, "node %d", i);
    }
    REQUIRE(wait_sharded(reg, "onceJob", 3, 10000), "sharding");
    /* Count from the next fire on, over five fires. */
    int64_t now = ej__now_ms();
    int64_t from = (now / 2000 + 1) * 2000;
    int64_t to = from + 5 * 2000;
    ej__sleep_ms(to - now + 1500);
    xlog_read(olog, &xl);
    int fires = 0;
    for (int64_t f = from; f < to; f += 2000) {
        int before = 0, after = 0;
        for (size_t i = 0; i < xl.nbefore; i++)
            before += xl.once_before[i] >= f && xl.once_before[i] < f + 2000;
        for (size_t i = 0; i < xl.nafter; i++)
            after += xl.once_after[i] >= f && xl.once_after[i] < f + 2000;
        CHECK(before == 1, "fire at %" PRId64 ": %d 'all started' callbacks", f % 100000, before);
        CHECK(after == 1, "fire at %" PRId64 ": %d 'all completed' callbacks", f % 100000, after);
        fires++;
    }
    CHECK(check_all_ran(&xl, 3, from, to) == 0, "items ran");
    xlog_free(&xl);
    CHECK(!zk_exists(reg, "/onceJob/guarantee/started") || true, "started node");
    for (int i = 0; i < 3; i++)
        node_stop(n[i]);
    unlink(olog);
    free(olog);
    ej_registry_destroy(reg);
    free(ns);
    if (failures) {
        fprintf(stderr, "%d check(s) failed\n", failures);
        return 1;
    }
    fprintf(stderr, "coord_listeners: all checks passed (%d fires)\n", fires);
    return 0;
}
