/*
 * A crash seen while ZooKeeper cannot be read. Two instances of one job;
 * the owner of an item is killed -9 while it runs it, and the survivor's
 * first crash checks fail as reads past the registry's retries would
 * (testnode --fail-crash-checks: a connection lost for seconds, as while
 * an ensemble elects). The survivor is the only one left to record the
 * crash: it must read again until it can, and run the item as FAILOVER
 * before the next fire. (Before, a check that could not be read dropped
 * the departure: the item was never failed over, and nothing said so.)
 * When the checks fail for longer than their retry window, the lost
 * failover run is told as a fire not run (failover-lost).
 */
#include "coord_harness_itest.c"

static const char *JOB = "recheckJob";
#define SESSION_MS 2000
#define ITEMS 2

/* Two instances on a fresh namespace; the victim is killed -9 400 ms into
 * a run of its item, and the survivor's first `faults` crash checks fail
 * (tried again for retry_ms). Returns the victim's item; *killed the time
 * of the kill; the execution log's path in *log after 8.5 s (caller frees
 * and unlinks). */
static int crash_with_faults(const char *servers, const char *faults, const char *retry_ms,
                             int64_t *killed, char **log_out)
{
    char *ns = zkf_unique_namespace("recheck");
    char *log = tmp_log("recheck");
    ej_registry *reg = zk_connect(servers, ns);
    char sess[16];
    snprintf(sess, sizeof sess, "%d", SESSION_MS);

    /* The survivor runs its item 200 ms, the victim 7 s of a 10 s period. */
    int survivor = node_start(servers, ns, JOB, log, "127.0.1.71", "--count", "2", "--cron",
                              "0/10 * * * * ?", "--item-ms", "200", "--failover", "--session-ms",
                              sess, "--fail-crash-checks", faults, "--failover-retry-ms",
                              retry_ms, NULL);
    REQUIRE(survivor >= 0, "survivor");
    int victim = node_start(servers, ns, JOB, log, "127.0.1.72", "--count", "2", "--cron",
                            "0/10 * * * * ?", "--item-ms", "7000", "--failover", "--session-ms",
                            sess, NULL);
    REQUIRE(victim >= 0, "victim");
    REQUIRE(wait_sharded(reg, JOB, ITEMS, 15000), "initial sharding");
    char *owners[ITEMS] = {0};
    zk_owners(reg, JOB, ITEMS, owners);
    int vitem = -1;
    for (int it = 0; it < ITEMS && vitem < 0; it++)
        if (owners[it] && node_index(owners[it]) == victim)
            vitem = it;
    free_owners(owners, ITEMS);
    REQUIRE(vitem >= 0, "the victim owns an item");

    /* Kill the victim 400 ms into a run of its item. */
    bool seen = false;
    for (int k = 0; k < 800 && !seen; k++) {
        struct xlog xl;
        xlog_read(log, &xl);
        for (size_t i = 0; i < xl.n && !seen; i++) {
            struct run *r = &xl.runs[i];
            seen = r->item == vitem && strcmp(r->inst, nodes[victim].id) == 0 &&
                   r->end == INT64_MAX && ej__now_ms() - r->start < 300;
        }
        xlog_free(&xl);
        if (!seen)
            ej__sleep_ms(30);
    }
    REQUIRE(seen, "the victim's item never ran");
    ej__sleep_ms(400);
    node_kill9(victim);
    *killed = nodes[victim].killed_at;
    /* The next fire is about 9.3 s after the kill. */
    ej__sleep_ms(8500);
    node_stop(survivor);
    ej_registry_destroy(reg);
    free(ns);
    *log_out = log;
    return vitem;
}

/* Does a NOTRUN failover-lost line name item, at a time in [from, to]
 * (when the departure was seen)? */
static bool lost_names(const char *log, int item, int64_t from, int64_t to)
{
    FILE *f = fopen(log, "r");
    if (f == NULL)
        return false;
    char line[1024], want[32];
    snprintf(want, sizeof want, "[%d]", item);
    bool found = false;
    while (!found && fgets(line, sizeof line, f)) {
        long long at = 0, first = 0, last = 0;
        unsigned count = 0;
        char inst[128], r[32], items[256];
        found = sscanf(line, "NOTRUN %lld %127s %31s %u %lld %lld %255s", &at, inst, r, &count,
                       &first, &last, items) == 7 &&
                strcmp(r, "failover-lost") == 0 && count == 1 && first == last &&
                first >= from && first <= to && strcmp(items, want) == 0;
    }
    fclose(f);
    return found;
}

int main(void)
{
    harness_init();
    zkf_server *zk = zkf_shared();
    REQUIRE(zk != NULL, "zookeeper");
    const char *servers = zkf_connect_string(zk);

    /* 3 checks fail: the FAILOVER run comes before the next fire, after
     * the session's expiry and the failed checks (read again every
     * 500 ms). */
    int64_t killed = 0;
    char *log = NULL;
    int vitem = crash_with_faults(servers, "3", "30000", &killed, &log);
    struct xlog xl;
    xlog_read(log, &xl);
    int fo = runs_of(&xl, vitem, killed, killed + 8500, "FAILOVER");
    CHECK(fo == 1, "item %d: %d failover run(s) before the next fire (want 1)", vitem, fo);
    say_failovers(&xl, vitem, killed);
    CHECK(check_no_overlap(&xl) == 0, "overlapping runs");
    xlog_free(&xl);
    unlink(log);
    free(log);

    /* Every check fails, tried again for 2.5 s: the run the crash cut
     * short is not failed over, and the survivor says so as a fire not run
     * (failover-lost) naming the item, which the metric, the ledger and
     * the alerts take (before, only a log line said it). */
    vitem = crash_with_faults(servers, "1000000", "2500", &killed, &log);
    xlog_read(log, &xl);
    fo = runs_of(&xl, vitem, killed, killed + 8500, "FAILOVER");
    CHECK(fo == 0, "item %d: %d failover run(s) with every check failing (want 0)", vitem, fo);
    xlog_free(&xl);
    int lost = notrun_lines(log, "failover-lost", killed, -1, 0);
    CHECK(lost == 1, "%d fire(s) not run (failover-lost) after the kill (want 1)", lost);
    CHECK(lost_names(log, vitem, killed, killed + SESSION_MS + 3000),
          "the failover-lost fire names item %d, at the departure", vitem);
    unlink(log);
    free(log);

    if (failures) {
        fprintf(stderr, "%d check(s) failed\n", failures);
        return 1;
    }
    fprintf(stderr, "coord_recheck: all checks passed\n");
    return 0;
}
