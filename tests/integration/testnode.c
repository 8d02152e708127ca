/*
 * A test instance: one ejob job in its own process, for the coordination
 * integration tests. Every item run appends two lines to a shared execution
 * log (opened O_APPEND, one write(2) per line, so lines of concurrent
 * processes never interleave):
 *
 *   START <epoch_ms> <instance> <item> <source> <fencing_token>
 *   END <epoch_ms> <instance> <item> <source> <status>
 *
 * and, for every fire not run (its "fire not run" status event),
 *
 *   NOTRUN <epoch_ms> <instance> <reason> <count> <first_ms> <last_ms> <items>
 *
 * (items as "[0,1]", "[]" when the event names none).
 *
 * status is OK, CANCELLED (the run was asked to stop) or FROZEN (the item
 * noticed the process had been stopped -- SIGSTOP -- and did no more work;
 * the END time is then the time of its last work, and "CANCELLED" follows
 * when ejob told it to stop within 10 s of waking).
 *
 * It prints "READY <instance_id> <session_id_hex> <passwd_hex>" on stdout
 * once started, "SESSION <instance> <session_id_hex> <passwd_hex>" when
 * asked with SIGUSR1, and a "STATUS ..." line (ej_job_status) with SIGUSR2.
 * SIGTERM shuts the job down cleanly and exits 0. With --jobs N it runs N
 * jobs (for footprint measurements).
 */
#include <errno.h>
#include <fcntl.h>
#include <getopt.h>
#include <inttypes.h>
#include <signal.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "common/util.h"
#include "coord/internal.h"
#include "ejob/ejob.h"

static int log_fd = -1;
static char instance[256];
static int item_ms = 200;
static int long_items[64];
static int nlong;
static int long_ms = 0;
static bool long_first; /* only the first run of the long item is long */
static atomic_int long_runs;
static volatile sig_atomic_t want_exit, want_session, want_status;

static void logf_line(const char *fmt, ...) EJ_PRINTF(1, 2);
static void logf_line(const char *fmt, ...)
{
    char line[512];
    va_list ap;
    va_start(ap, fmt);
    int n = vsnprintf(line, sizeof line - 1, fmt, ap);
    va_end(ap);
    if (n < 0)
        return;
    if (n > (int)sizeof line - 2)
        n = (int)sizeof line - 2;
    line[n++] = '\n';
    if (write(log_fd, line, (size_t)n) < 0)
        perror("testnode: write log");
}

/* False when more than a second passed since the last reading (*prev):
 * the process was stopped. Otherwise moves *prev and *last_work (the wall
 * time of the last reading that found it running) on. */
static bool awake(int64_t *prev, int64_t *last_work)
{
    int64_t wall = ej__now_ms(); /* first: a stop after it shows in now */
    int64_t now = ej__mono_ms();
    if (now - *prev > 1000)
        return false;
    *prev = now;
    *last_work = wall;
    return true;
}

static int run_item(const ej_shard_context *ctx, void *user)
{
    (void)user;
    const char *src = ej_execution_source_name(ctx->execution_source);
    logf_line("START %" PRId64 " %s %d %s %" PRId64, ej__now_ms(), instance, ctx->sharding_item,
              src, ctx->fencing_token);
    int ms = item_ms;
    bool is_long = false;
    for (int i = 0; i < nlong; i++)
        if (long_items[i] == ctx->sharding_item)
            is_long = true;
    if (is_long && (!long_first || atomic_fetch_add(&long_runs, 1) == 0))
        ms = long_ms;
    int64_t last_work = ej__now_ms();
    int64_t end = ej__mono_ms() + ms;
    const char *status = "OK";
    /* Every step reads the clock: a SIGSTOP anywhere between two readings
     * shows as a gap, not only one that lands in the sleep. */
    int64_t prev = ej__mono_ms();
    bool frozen = false;
    for (;;) {
        ej__sleep_ms(20);
        if ((frozen = !awake(&prev, &last_work)))
            break;
        bool cancelled = ej_shard_context_is_cancelled(ctx);
        if ((frozen = !awake(&prev, &last_work)))
            break;
        if (cancelled) {
            status = "CANCELLED";
            break;
        }
        if (prev >= end)
            break;
    }
    if (frozen) {
        /* We were stopped. Do no more work; wait for ejob's verdict. */
        int64_t woke = ej__now_ms();
        status = "FROZEN";
        for (int i = 0; i < 500; i++) {
            if (ej_shard_context_is_cancelled(ctx)) {
                status = "FROZEN_CANCELLED";
                break;
            }
            ej__sleep_ms(20);
        }
        logf_line("END %" PRId64 " %s %d %s %s woke=%" PRId64, last_work, instance,
                  ctx->sharding_item, src, status, woke);
        return 0;
    }
    logf_line("END %" PRId64 " %s %d %s %s", ej__now_ms(), instance, ctx->sharding_item, src,
              status);
    return 0;
}

static void once_before(const struct ej_shard_contexts_info *info, void *user)
{
    (void)user;
    logf_line("ONCE_BEFORE %" PRId64 " %s %s", ej__now_ms(), instance, info->task_id);
}

static void once_after(const struct ej_shard_contexts_info *info, void *user)
{
    (void)user;
    logf_line("ONCE_AFTER %" PRId64 " %s %s", ej__now_ms(), instance, info->task_id);
}

/* A "fire not run" status event as a NOTRUN line (see the top). */
static void on_event(const struct ej_event *ev, void *user)
{
    (void)user;
    if (ev->type != EJ_EVENT_STATUS || ev->u.status.message == NULL)
        return;
    const char *m = strstr(ev->u.status.message, "fire not run (");
    char reason[32];
    unsigned count = 0;
    long long first = 0, last = 0;
    if (m == NULL || sscanf(m, "fire not run (%31[a-z-]): %u fire time(s) from %lld to %lld",
                            reason, &count, &first, &last) != 4)
        return;
    char items[256];
    size_t k = 0;
    for (const char *p = ev->u.status.sharding_item; p && *p && k + 1 < sizeof items; p++)
        if (*p != ' ')
            items[k++] = *p;
    items[k] = '\0';
    logf_line("NOTRUN %" PRId64 " %s %s %u %lld %lld %s", ej__now_ms(), instance, reason, count,
              first, last, k ? items : "[]");
}

static void on_signal(int sig)
{
    if (sig == SIGUSR1)
        want_session = 1;
    else if (sig == SIGUSR2)
        want_status = 1;
    else
        want_exit = 1;
}

static void print_session(ej_registry *reg, const char *what)
{
    int64_t sid = 0;
    char pw[EJ_REG_PASSWD_LEN];
    if (ej_registry_session_credentials(reg, &sid, pw) != 0)
        return;
    printf("%s %s %" PRIx64 " ", what, instance, (uint64_t)sid);
    for (int i = 0; i < EJ_REG_PASSWD_LEN; i++)
        printf("%02x", (unsigned char)pw[i]);
    printf("\n");
    fflush(stdout);
}

static void usage(void)
{
    fprintf(stderr,
            "usage: testnode --zk HOST:PORT --ns NS --job JOB --log FILE [--ip IP] [--count N]\n"
            "  [--cron EXPR] [--item-ms MS] [--long-item ITEM[,ITEM..]:MS] [--failover] "
            "[--no-misfire]\n"
            "  [--no-monitor] [--overwrite] [--session-ms MS] [--once] [--reconcile-ms MS]\n"
            "  [--strategy NAME] [--wait-bound-ms MS] [--drain-ms MS] [--long-first]\n"
            "  [--jobs N]   (N jobs JOB0..JOB<N-1> in this process; STATUS shows the first)\n"
            "  [--fail-crash-checks N]   (the next N crash checks fail as a lost connection)\n"
            "  [--failover-retry-ms MS]  (how long a crash check is tried again; 30000)\n");
}

int main(int argc, char **argv)
{
    const char *zk = NULL, *ns = NULL, *job_name = NULL, *log_path = NULL, *ip = NULL;
    const char *cron = "0/2 * * * * ?", *strategy = "";
    int count = 3, session_ms = 4000, wait_bound = 0, njobs = 1;
    int64_t reconcile_ms = 0, drain_ms = 0;
    bool failover = false, misfire = true, monitor = true, overwrite = false, once = false;
    static const struct option opts[] = {
        {"zk", required_argument, 0, 'z'},
        {"ns", required_argument, 0, 'n'},
        {"job", required_argument, 0, 'j'},
        {"log", required_argument, 0, 'l'},
        {"ip", required_argument, 0, 'i'},
        {"count", required_argument, 0, 'c'},
        {"cron", required_argument, 0, 'C'},
        {"item-ms", required_argument, 0, 'm'},
        {"long-item", required_argument, 0, 'L'},
        {"failover", no_argument, 0, 'f'},
        {"no-misfire", no_argument, 0, 'M'},
        {"no-monitor", no_argument, 0, 'N'},
        {"overwrite", no_argument, 0, 'o'},
        {"session-ms", required_argument, 0, 's'},
        {"once", no_argument, 0, 'O'},
        {"reconcile-ms", required_argument, 0, 'r'},
        {"strategy", required_argument, 0, 'S'},
        {"wait-bound-ms", required_argument, 0, 'w'},
        {"drain-ms", required_argument, 0, 'd'},
        {"long-first", no_argument, 0, 'F'},
        {"jobs", required_argument, 0, 'J'},
        {"fail-crash-checks", required_argument, 0, 'X'},
        {"failover-retry-ms", required_argument, 0, 'Y'},
        {0, 0, 0, 0},
    };
    int ch;
    while ((ch = getopt_long(argc, argv, "", opts, NULL)) != -1) {
        switch (ch) {
        case 'z':
            zk = optarg;
            break;
        case 'n':
            ns = optarg;
            break;
        case 'j':
            job_name = optarg;
            break;
        case 'l':
            log_path = optarg;
            break;
        case 'i':
            ip = optarg;
            break;
        case 'c':
            count = atoi(optarg);
            break;
        case 'C':
            cron = optarg;
            break;
        case 'm':
            item_ms = atoi(optarg);
            break;
        case 'L': {
            /* ITEM[,ITEM...]:MS */
            const char *colon = strchr(optarg, ':');
            if (colon == NULL) {
                usage();
                return 2;
            }
            long_ms = atoi(colon + 1);
            for (const char *p = optarg; p < colon && nlong < 64;) {
                long_items[nlong++] = atoi(p);
                const char *comma = strchr(p, ',');
                if (comma == NULL || comma > colon)
                    break;
                p = comma + 1;
            }
            break;
        }
        case 'f':
            failover = true;
            break;
        case 'X':
            atomic_store(&ej__failover_check_faults, atoi(optarg));
            break;
        case 'Y':
            atomic_store(&ej__failover_retry_ms, atoi(optarg));
            break;
        case 'M':
            misfire = false;
            break;
        case 'N':
            monitor = false;
            break;
        case 'o':
            overwrite = true;
            break;
        case 's':
            session_ms = atoi(optarg);
            break;
        case 'O':
            once = true;
            break;
        case 'r':
            reconcile_ms = atoll(optarg);
            break;
        case 'S':
            strategy = optarg;
            break;
        case 'w':
            wait_bound = atoi(optarg);
            break;
        case 'd':
            drain_ms = atoll(optarg);
            break;
        case 'F':
            long_first = true;
            break;
        case 'J':
            njobs = atoi(optarg) > 0 ? atoi(optarg) : 1;
            break;
        default:
            usage();
            return 2;
        }
    }
    if (!zk || !ns || !job_name || !log_path) {
        usage();
        return 2;
    }
    log_fd = open(log_path, O_WRONLY | O_CREAT | O_APPEND | O_CLOEXEC, 0644);
    if (log_fd < 0) {
        perror(log_path);
        return 1;
    }
    struct sigaction sa;
    memset(&sa, 0, sizeof sa);
    sa.sa_handler = on_signal;
    sigaction(SIGTERM, &sa, NULL);
    sigaction(SIGINT, &sa, NULL);
    sigaction(SIGUSR1, &sa, NULL);
    sigaction(SIGUSR2, &sa, NULL);

    ej_registry *reg = NULL;
    struct ej_registry_opts ro = {.servers = zk,
                                  .namespace_ = ns,
                                  .session_timeout_ms = session_ms,
                                  .connection_timeout_ms = 10000,
                                  .base_sleep_ms = 100,
                                  .max_sleep_ms = 500,
                                  .max_retries = 3};
    int rc = ej_registry_create(&reg, &ro);
    if (rc != 0) {
        fprintf(stderr, "testnode: registry: %s\n", ej_registry_errmsg(NULL));
        return 1;
    }
    struct ej_job_def def = {.type = EJ_JOB_TYPE_SIMPLE, .simple = run_item};
    struct ej_distribute_once_listener ol = {.before_last = once_before,
                                             .after_last = once_after,
                                             .started_timeout_ms = 4000,
                                             .completed_timeout_ms = 4000};
    struct ej_job_opts jo = {.def = &def,
                             .ip = ip,
                             .once_listener = once ? &ol : NULL,
                             .reconcile_interval_ms = reconcile_ms,
                             .wait_bound_ms = wait_bound,
                             .drain_timeout_ms = drain_ms};
    ej_job **jobs = calloc((size_t)njobs, sizeof *jobs);
    if (jobs == NULL)
        return 1;
    for (int j = 0; j < njobs; j++) {
        char name[256];
        if (njobs == 1)
            snprintf(name, sizeof name, "%s", job_name);
        else
            snprintf(name, sizeof name, "%s%d", job_name, j);
        struct ej_job_config cfg;
        ej_job_config_init(&cfg);
        ej_job_config_set_str(&cfg.job_name, name);
        ej_job_config_set_str(&cfg.cron, cron);
        ej_job_config_set_str(&cfg.job_sharding_strategy_class, strategy);
        cfg.sharding_total_count = count;
        cfg.failover = failover;
        cfg.misfire = misfire;
        cfg.monitor_execution = monitor;
        cfg.overwrite = overwrite;
        cfg.job_type = EJ_JOB_TYPE_SIMPLE;
        rc = ej_job_create(reg, &cfg, &jo, &jobs[j]);
        ej_job_config_fini(&cfg);
        if (rc != 0) {
            fprintf(stderr, "testnode: create %s: %s\n", name, ej_strerror(rc));
            return 1;
        }
        snprintf(instance, sizeof instance, "%s", ej_job_instance_id(jobs[j]));
        if (j == 0 && ej_job_subscribe(jobs[j], on_event, NULL) != 0) {
            fprintf(stderr, "testnode: cannot subscribe to the events of %s\n", name);
            return 1;
        }
        rc = ej_job_start(jobs[j]);
        if (rc != 0) {
            fprintf(stderr, "testnode: start %s: %s: %s\n", name, ej_strerror(rc),
                    ej_job_last_error(jobs[j], (char[512]){0}, 512));
            return 1;
        }
    }
    ej_job *job = jobs[0];
    print_session(reg, "READY");
    while (!want_exit) {
        if (want_session) {
            want_session = 0;
            print_session(reg, "SESSION");
        }
        if (want_status) {
            want_status = 0;
            struct ej_job_status st;
            if (ej_job_status(job, &st) == 0) {
                printf("STATUS leader=%d stopped=%d connected=%d disabled=%d items=", st.leader,
                       st.stopped, st.connected, st.server_disabled);
                for (size_t i = 0; i < st.item_count; i++)
                    printf("%s%d", i ? "," : "", st.items[i]);
                printf(" fires=%" PRIu64 " requests=%" PRIu64 " cron=%s error=%s\n", st.fires,
                       ej_registry_request_count(reg), st.cron, st.last_error);
                fflush(stdout);
                ej_job_status_fini(&st);
            }
        }
        ej__sleep_ms(50);
    }
    for (int j = 0; j < njobs; j++)
        ej_job_destroy(jobs[j]);
    free(jobs);
    ej_registry_destroy(reg);
    close(log_fd);
    return 0;
}
