/*
 * Self-fencing bounded by the server's expiry (docs/coordination.md
 * "Self-fencing").
 *
 * The ZooKeeper server is frozen (SIGSTOP of its JVM) while a C item and a
 * script item run: the server hears nothing more from the client, so it may
 * expire the session one session timeout T after the last contact. The
 * instance must stop starting items by T/2 after the last contact, have its
 * C item told to stop and its script's process (which ignores SIGTERM) killed
 * before T -- even while the registry's dispatch thread is held up (a task
 * sleeping there stands for a view retrying reads). After the server is
 * thawed the instance registers again and runs items again.
 *
 * Then the server is killed (the connection breaks at once): the fence holds
 * as soon as the client reports the disconnection (measured from the kill:
 * 0-1 ms, about 200 ms under TSan), again with the dispatch thread held up.
 */
#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <signal.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "common/util.h"
#include "ejob/ejob.h"
#include "zk_fixture.h"
/* A REQUIRE that fails while ZooKeeper is frozen resumes it first. */
#define ITEST_ON_REQUIRE_FAILED()                                                                  \
    do {                                                                                           \
        if (zk)                                                                                    \
            kill(zkf_pid(zk), SIGCONT);                                                            \
    } while (0)
#include "itest_check.h"

/* How soon after the server dies the fence must hold (see the last phase). */
#if defined(__SANITIZE_ADDRESS__) || defined(__SANITIZE_THREAD__)
#define FENCE_AFTER_DEATH_MS 1000
#elif defined(__has_feature)
#if __has_feature(address_sanitizer) || __has_feature(thread_sanitizer)
#define FENCE_AFTER_DEATH_MS 1000
#endif
#endif
#ifndef FENCE_AFTER_DEATH_MS
#define FENCE_AFTER_DEATH_MS 100
#endif

#define SESSION_MS 3000

static zkf_server *zk;

/* The C item: runs until told to stop; counts starts. */
static atomic_int c_starts;
static _Atomic int64_t c_started_ms, c_cancel_seen_ms;

static int long_item(const ej_shard_context *ctx, void *user)
{
    (void)user;
    atomic_fetch_add(&c_starts, 1);
    atomic_store(&c_started_ms, ej__mono_ms());
    int64_t end = ej__mono_ms() + 20000;
    while (ej__mono_ms() < end) {
        if (ej_shard_context_is_cancelled(ctx)) {
            int64_t zero = 0;
            atomic_compare_exchange_strong(&c_cancel_seen_ms, &zero, ej__mono_ms());
            return -1;
        }
        ej__sleep_ms(2);
    }
    return 0;
}

static void hold_dispatch(ej_registry *reg, void *user)
{
    (void)reg;
    ej__sleep_ms(*(int *)user);
}

static pid_t read_pid(const char *path)
{
    FILE *f = fopen(path, "r");
    if (!f)
        return 0;
    long pid = 0;
    if (fscanf(f, "%ld", &pid) != 1)
        pid = 0;
    fclose(f);
    return (pid_t)pid;
}

/* Gone, or a zombie nobody reaped yet (it runs no more). */
static bool process_gone(pid_t pid)
{
    char path[64], buf[512];
    snprintf(path, sizeof path, "/proc/%d/stat", (int)pid);
    FILE *f = fopen(path, "r");
    if (!f)
        return true;
    size_t n = fread(buf, 1, sizeof buf - 1, f);
    fclose(f);
    buf[n] = '\0';
    const char *rp = strrchr(buf, ')');
    return rp && rp[1] == ' ' && (rp[2] == 'Z' || rp[2] == 'X');
}

static ej_job *make_job(ej_registry *reg, const char *name, ej_job_type type, const char *cmd,
                        const struct ej_job_def *def)
{
    struct ej_job_config cfg;
    ej_job_config_init(&cfg);
    ej_job_config_set_str(&cfg.job_name, name);
    ej_job_config_set_str(&cfg.cron, "* * * * * ?");
    cfg.sharding_total_count = 1;
    cfg.job_type = type;
    cfg.monitor_execution = true;
    cfg.misfire = false;
    if (cmd) {
        ej_job_config_set_str(&cfg.script_command_line, cmd);
        cfg.timeout_grace_seconds = 10; /* the fence's bound must win over it */
    }
    struct ej_job_opts jo = {.def = def, .ip = "127.0.5.1", .drain_timeout_ms = 200};
    ej_job *job = NULL;
    int rc = ej_job_create(reg, &cfg, &jo, &job);
    ej_job_config_fini(&cfg);
    REQUIRE(rc == 0, "create %s: %s", name, ej_strerror(rc));
    rc = ej_job_start(job);
    REQUIRE(rc == 0, "start %s: %s", name, ej_job_last_error(job, (char[512]){0}, 512));
    return job;
}

int main(void)
{
    setvbuf(stderr, NULL, _IOLBF, 0);
    zkf_opts zo = {.tick_ms = 200};
    REQUIRE(zkf_start(&zk, &zo) == 0, "zookeeper");
    char *ns = zkf_unique_namespace("fence");
    struct ej_registry_opts ro = itest_registry_opts(zk, ns, SESSION_MS);
    ej_registry *reg = NULL;
    REQUIRE(ej_registry_create(&reg, &ro) == 0, "registry: %s", ej_registry_errmsg(NULL));
    const int T = ej_registry_negotiated_timeout_ms(reg);
    REQUIRE(T == SESSION_MS, "negotiated %d ms", T);
    CHECK(ej_registry_fence(reg, 0) == EJ_REG_FENCE_OPEN, "fence not open after create");

    char dir[] = "/tmp/ejfenceXXXXXX";
    REQUIRE(mkdtemp(dir) != NULL, "mkdtemp");
    char script[256], pidfile[256], cmd[600];
    snprintf(script, sizeof script, "%s/item.sh", dir);
    snprintf(pidfile, sizeof pidfile, "%s/pid", dir);
    FILE *f = fopen(script, "w");
    REQUIRE(f != NULL, "script");
    /* Ignores SIGTERM: only the SIGKILL after the (bounded) grace ends it. */
    fprintf(f, "#!/bin/sh\ntrap '' TERM\necho $$ > \"$1.tmp\" && mv \"$1.tmp\" \"$1\"\n"
               "exec sleep 60\n");
    fclose(f);
    chmod(script, 0755);
    snprintf(cmd, sizeof cmd, "%s %s", script, pidfile);

    struct ej_job_def cdef = {.type = EJ_JOB_TYPE_SIMPLE, .simple = long_item};
    struct ej_job_def sdef = {.type = EJ_JOB_TYPE_SCRIPT};
    ej_job *cj = make_job(reg, "fenceC", EJ_JOB_TYPE_SIMPLE, NULL, &cdef);
    ej_job *sj = make_job(reg, "fenceScript", EJ_JOB_TYPE_SCRIPT, cmd, &sdef);

    /* Both items running. */
    pid_t spid = 0;
    int64_t until = ej__mono_ms() + 15000;
    while (ej__mono_ms() < until && (atomic_load(&c_starts) == 0 || spid == 0)) {
        ej__sleep_ms(20);
        spid = read_pid(pidfile);
    }
    REQUIRE(atomic_load(&c_starts) > 0 && spid > 0, "items did not start");
    ej__sleep_ms(700);
    REQUIRE(!process_gone(spid), "script ended early");

    /* ---- the server freezes; the dispatch thread is held up ---- */
    int hold_ms = 2 * T;
    ej_registry_post(reg, hold_dispatch, &hold_ms);
    ej__sleep_ms(50);
    int starts_before = atomic_load(&c_starts);
    REQUIRE(kill(zkf_pid(zk), SIGSTOP) == 0, "SIGSTOP zookeeper");
    int64_t stopped = ej__mono_ms();
    int64_t hold_at = 0, cancel_at = 0, script_gone = 0;
    while (ej__mono_ms() < stopped + T + 1000) {
        ej_reg_fence lv = ej_registry_fence(reg, 0);
        int64_t now = ej__mono_ms();
        if (!hold_at && lv != EJ_REG_FENCE_OPEN)
            hold_at = now;
        if (!cancel_at && lv == EJ_REG_FENCE_CANCEL)
            cancel_at = now;
        if (!script_gone && process_gone(spid))
            script_gone = now;
        ej__sleep_ms(2);
    }
    int64_t contact_session = 0;
    int64_t last = ej_registry_last_contact_ms(reg, &contact_session);
    int starts_frozen = atomic_load(&c_starts) - starts_before;
    int64_t c_cancel = atomic_load(&c_cancel_seen_ms);
    fprintf(stderr,
            "T %d ms; last contact %+" PRId64 " ms before the freeze; after the last contact: "
            "hold %+" PRId64 ", cancel %+" PRId64 ", C item stopped %+" PRId64
            ", script process gone %+" PRId64 " ms\n",
            T, stopped - last, hold_at - last, cancel_at - last, c_cancel ? c_cancel - last : -1,
            script_gone ? script_gone - last : -1);
    REQUIRE(last > 0 && last <= stopped, "last contact %" PRId64 " vs freeze %" PRId64, last,
            stopped);
    CHECK(stopped - last <= T / 6 + 300, "last contact %" PRId64 " ms before the freeze",
          stopped - last);
    CHECK(hold_at && hold_at - last <= T / 2 + 100, "hold %" PRId64 " ms after the last contact",
          hold_at - last);
    CHECK(cancel_at && cancel_at - last <= T * 6 / 10 + 100,
          "cancel %" PRId64 " ms after the last contact", cancel_at - last);
    CHECK(c_cancel && c_cancel - last < T * 7 / 10,
          "the C item was told to stop %" PRId64 " ms after the last contact (T %d)",
          c_cancel ? c_cancel - last : -1, T);
    CHECK(script_gone && script_gone - last < T - 100,
          "the script's process went %" PRId64 " ms after the last contact (T %d)",
          script_gone ? script_gone - last : -1, T);
    CHECK(starts_frozen == 0, "%d items started while the server was frozen", starts_frozen);

    /* ---- thaw: the instance comes back (a new session or the same) ---- */
    REQUIRE(kill(zkf_pid(zk), SIGCONT) == 0, "SIGCONT zookeeper");
    int64_t thawed = ej__mono_ms();
    int starts_thaw = atomic_load(&c_starts);
    until = thawed + 20000;
    while (ej__mono_ms() < until && atomic_load(&c_starts) == starts_thaw)
        ej__sleep_ms(20);
    CHECK(atomic_load(&c_starts) > starts_thaw, "no item started within 20 s of the thaw");
    fprintf(stderr, "items start again %" PRId64 " ms after the thaw\n", ej__mono_ms() - thawed);
    CHECK(ej_registry_fence(reg, 0) == EJ_REG_FENCE_OPEN, "fence not open after the thaw");

    /* ---- the server dies: the disconnection is reported at once ---- */
    ej_registry_post(reg, hold_dispatch, &hold_ms);
    ej__sleep_ms(50);
    REQUIRE(ej_registry_fence(reg, 0) == EJ_REG_FENCE_OPEN, "fence before the kill");
    int64_t killed = ej__mono_ms();
    REQUIRE(zkf_stop(zk) == 0, "stop zookeeper");
    int64_t dead = ej__mono_ms();
    int64_t held = 0;
    while (ej__mono_ms() < dead + 2000 && !held) {
        if (ej_registry_fence(reg, 0) != EJ_REG_FENCE_OPEN)
            held = ej__mono_ms();
        ej__sleep_ms(1);
    }
    fprintf(stderr, "server killed: fence holds %" PRId64 " ms after the kill returned\n",
            held ? held - dead : -1);
    /* The fence reads the client's own state the moment its completion
     * thread reports the disconnection: within 100 ms of the server's death
     * (sanitizer builds, several times slower, get 1000 ms for the client to
     * notice the reset). A fence waiting for the dispatch thread would hold
     * only after hold_ms = 2 T. */
    CHECK(held && held - dead <= FENCE_AFTER_DEATH_MS,
          "fence held %" PRId64 " ms after the server died (bound %d ms)", held ? held - dead : -1,
          FENCE_AFTER_DEATH_MS);
    (void)killed;

    ej_job_destroy(cj);
    ej_job_destroy(sj);
    ej_registry_destroy(reg);
    zkf_destroy(zk);
    zk = NULL;
    unlink(pidfile);
    unlink(script);
    rmdir(dir);
    free(ns);
    if (failures) {
        fprintf(stderr, "%d check(s) failed\n", failures);
        return 1;
    }
    fprintf(stderr, "coord_fence: all checks passed\n");
    return 0;
}
