/*
 * Balance of many small jobs over many daemons: J one-item jobs (default
 * 100) over D daemons (default 10), every job on every daemon, resharded
 * job by job as each job's leader would (each sees the owners the jobs
 * before it wrote). Then the first daemon in ZooKeeper order leaves and
 * every job is resharded; then a new daemon joins and every job is
 * resharded again. For each strategy it prints the most items on one
 * daemon and how many items moved.
 *
 *   BALANCED (namespace)  ej_sharding_balanced_namespace: what a leader
 *                         computes from the namespace's BALANCED jobs;
 *   BALANCED (load)       ej_sharding_balanced_loaded with the items of the
 *                         other jobs as load, leader after leader;
 *   BALANCED (load, all at once)  the same, every leader reading the same
 *                         state (leaders resharding at the same moment);
 *   BALANCED (no load)    the plain strategy function (what a coordinator
 *                         that does not read the namespace gets);
 *   AVERAGE, STICKY, CONSISTENT_HASH  each job on its own.
 *
 * Usage: balance_bench [jobs [daemons]]
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "ejob/sharding.h"

#define MAX_D 64
#define MAX_J 4096

enum mode { NAMESPACE, LOADED, LOADED_SNAPSHOT, PLAIN };

struct world {
    char ids[MAX_D + 1][48];
    const char *live[MAX_D + 1]; /* ZooKeeper order */
    size_t n;
    int jobs;
    char names[MAX_J][16];
    const char *owner[MAX_J]; /* one item each */
};

static void order_live(struct world *w)
{
    ej_sharding_instances_order((char **)w->live, w->n);
}

/* Items of jobs other than skip on each live instance. */
static void loads(const struct world *w, const char *const *owner, int skip, long *load)
{
    for (size_t k = 0; k < w->n; k++) {
        load[k] = 0;
        for (int j = 0; j < w->jobs; j++)
            if (j != skip && owner[j] && strcmp(owner[j], w->live[k]) == 0)
                load[k]++;
    }
}

static int reshard_job(struct world *w, int j, enum mode m, const ej_sharding_strategy *s,
                       const char *const *snapshot)
{
    int own = -1, rc;
    const char *prev = w->owner[j];
    if (m == NAMESPACE) {
        static ej_sharding_balanced_job all[MAX_J];
        for (int i = 0; i < w->jobs; i++)
            all[i] = (ej_sharding_balanced_job){w->names[i], w->live, w->n, 1, &w->owner[i]};
        rc = ej_sharding_balanced_namespace(all, (size_t)w->jobs, (size_t)j, &own);
    } else if (m == LOADED || m == LOADED_SNAPSHOT) {
        long load[MAX_D + 1];
        loads(w, m == LOADED ? w->owner : snapshot, j, load);
        rc = ej_sharding_balanced_loaded(w->live, w->n, w->names[j], 1, &prev, load, &own);
    } else {
        char err[256];
        rc = ej_sharding_run(s, w->live, w->n, w->names[j], 1, &prev, &own, err, sizeof err);
    }
    if (rc != 0 || own < 0) {
        fprintf(stderr, "balance_bench: job %d: strategy failed (%d)\n", j, rc);
        exit(1);
    }
    w->owner[j] = w->live[own];
    return 0;
}

/* Reshards every job; returns the items that moved. */
static int reshard_all(struct world *w, enum mode m, const ej_sharding_strategy *s)
{
    static const char *before[MAX_J];
    memcpy(before, w->owner, sizeof(before[0]) * (size_t)w->jobs);
    for (int j = 0; j < w->jobs; j++)
        reshard_job(w, j, m, s, before);
    int moved = 0;
    for (int j = 0; j < w->jobs; j++)
        moved += before[j] == NULL || strcmp(before[j], w->owner[j]) != 0;
    return moved;
}

static int most(const struct world *w)
{
    int high = 0;
    for (size_t k = 0; k < w->n; k++) {
        int c = 0;
        for (int j = 0; j < w->jobs; j++)
            c += strcmp(w->owner[j], w->live[k]) == 0;
        high = c > high ? c : high;
    }
    return high;
}

static void run(const char *label, enum mode m, const char *strategy, int jobs, int daemons)
{
    static struct world w;
    memset(&w, 0, sizeof w);
    w.jobs = jobs;
    for (int k = 0; k <= daemons; k++)
        snprintf(w.ids[k], sizeof w.ids[k], "192.168.1.%d@-@%d", 10 + k, 4000 + k);
    for (int k = 0; k < daemons; k++)
        w.live[k] = w.ids[k];
    w.n = (size_t)daemons;
    order_live(&w);
    for (int j = 0; j < jobs; j++)
        snprintf(w.names[j], sizeof w.names[j], "job%04d", j);
    ej_sharding_strategy s;
    if (ej_sharding_find(strategy, &s, NULL, 0) != 0)
        exit(1);
    reshard_all(&w, m, &s);
    int start = most(&w);
    /* The first daemon in ZooKeeper order leaves: its items are orphans. */
    const char *gone = w.live[0];
    int orphans = 0;
    for (int j = 0; j < jobs; j++)
        if (strcmp(w.owner[j], gone) == 0) {
            w.owner[j] = NULL;
            orphans++;
        }
    memmove(&w.live[0], &w.live[1], (w.n - 1) * sizeof w.live[0]);
    w.n--;
    int moved_leave = reshard_all(&w, m, &s);
    int after_leave = most(&w);
    /* A new daemon joins. */
    w.live[w.n++] = w.ids[daemons];
    order_live(&w);
    int moved_join = reshard_all(&w, m, &s);
    int after_join = most(&w);
    char mv[32];
    snprintf(mv, sizeof mv, "%d (%d orphaned)", moved_leave, orphans);
    printf("%-30s %5d | %5d %21s | %5d %6d\n", label, start, after_leave, mv, after_join,
           moved_join);
}

int main(int argc, char **argv)
{
    int jobs = argc > 1 ? atoi(argv[1]) : 100;
    int daemons = argc > 2 ? atoi(argv[2]) : 10;
    if (jobs < 1 || jobs > MAX_J || daemons < 2 || daemons > MAX_D) {
        fprintf(stderr, "usage: balance_bench [jobs (1..%d) [daemons (2..%d)]]\n", MAX_J, MAX_D);
        return 2;
    }
    printf("%d one-item jobs over %d daemons; then one daemon leaves, then one joins\n", jobs,
           daemons);
    printf("ideal: at most %d items on a daemon, %d after the leave; the fewest moves are the "
           "orphans on a leave and %d on a join\n",
           (jobs + daemons - 1) / daemons, (jobs + daemons - 2) / (daemons - 1), jobs / daemons);
    printf("%-30s %5s | %-27s | %s\n", "", "start", "one leaves", "one joins");
    printf("%-30s %5s | %5s %21s | %5s %6s\n", "strategy", "most", "most", "moved", "most",
           "moved");
    run("BALANCED (namespace)", NAMESPACE, "BALANCED", jobs, daemons);
    run("BALANCED (load, one by one)", LOADED, "BALANCED", jobs, daemons);
    run("BALANCED (load, all at once)", LOADED_SNAPSHOT, "BALANCED", jobs, daemons);
    run("BALANCED (no load)", PLAIN, "BALANCED", jobs, daemons);
    run("AVERAGE", PLAIN, "AVERAGE", jobs, daemons);
    run("STICKY", PLAIN, "STICKY", jobs, daemons);
    run("CONSISTENT_HASH", PLAIN, "CONSISTENT_HASH", jobs, daemons);
    return 0;
}
