/* `ejob run`: the daemon for script and HTTP jobs. */
#include <errno.h>
#include <poll.h>
#include <pthread.h>
#include <signal.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>
#include <sys/resource.h>
#include <sys/signalfd.h>
#include <sys/socket.h>

#include "common/check.h"
#include "config/daemon_file.h"
#include "ejob/config.h"
#include "ejob/error.h"
#include "ejob/log.h"
#include "ejob/metrics.h"
#include "ejob/registry.h"
#include "common/util.h"
#include "cli/cli.h"
#include "cli/cli_util.h"
#include "cli/daemon.h"
#include "cli/daemon_clock.h"
#include "cli/daemon_metrics.h"
#include "cli/daemon_notify.h"
#include "cli/daemon_restart.h"
#include "cli/daemon_run.h"
#include "cli/embedded.h"

#define CMD "run"
#define DEFAULT_DRAIN_MS 30000
#define EMBEDDED_STOP_WAIT_MS 15000

static const char usage[] =
    "Usage: ejob run -c FILE [--registry HOST:PORT[,...][/NAMESPACE]] [--digest-file FILE]\n"
    "                [--log-format text|json] [--log-level LEVEL]\n"
    "                [--drain-timeout-ms N] [--state-dir DIR] [--check]\n"
    "                [--metrics-listen ADDR:PORT]\n"
    "\n"
    "Run the SCRIPT and HTTP jobs of a YAML file (the shape of ElasticJob 3.x's\n"
    "Spring Boot configuration; see ejob.yaml(5) and " EJ_DOC_DIR "/docs/cli.md)\n"
    "until stopped.\n"
    "\n"
    "  -c, --config FILE       the daemon file (required)\n"
    "  -r, --registry SERVERS  ZooKeeper to use instead of the file's\n"
    "                          regCenter.serverLists; a /NAMESPACE suffix replaces\n"
    "                          regCenter.namespace\n"
    "      --digest-file FILE  ZooKeeper digest auth: the first line of FILE is\n"
    "                          USER:PASS (refused when group- or world-writable);\n"
    "                          also EJOB_DIGEST, or regCenter.digest/digestFile\n"
    "      --digest USER:PASS  the same on the command line (visible in ps: a\n"
    "                          warning is logged; prefer the ways above)\n"
    "      --log-format F      text (default) or json: one line per log record and\n"
    "                          per job event, on stderr; overrides log.format. Text\n"
    "                          to the systemd journal is \"<6>[module] message\"\n"
    "      --log-level L       debug, info (default: one line per item run), warn\n"
    "                          or error; overrides the file's log.level\n"
    "      --drain-timeout-ms N  on SIGTERM/SIGINT, how long running items may take\n"
    "                          to finish (default 30000)\n"
    "      --state-dir DIR     state directory of the embedded registry and of the\n"
    "                          default history (STATE_DIR/history.db; env\n"
    "                          EJOB_STATE_DIR, else systemd's $STATE_DIRECTORY,\n"
    "                          else $XDG_RUNTIME_DIR/ejob, else /tmp/ejob-$UID)\n"
    "      --check             only load and validate the file, then exit\n"
    "      --metrics-listen ADDR:PORT  serve /metrics (Prometheus), /healthz and\n"
    "                          /readyz over HTTP, e.g. 127.0.0.1:9464 (see\n"
    "                          " EJ_DOC_DIR "/docs/metrics.md);\n"
    "                          overrides the file's metrics.listen\n"
    "\n"
    "The file is checked completely before anything starts: every problem is\n"
    "printed as FILE:LINE:COLUMN: message and the exit code is 2.\n"
    "\n"
    "Embedded registry: when regCenter.serverLists is missing or `embedded` (and\n"
    "no --registry is given), the daemon uses a private ZooKeeper on 127.0.0.1\n"
    "that it starts from the Debian package (java + /usr/share/java/zookeeper.jar)\n"
    "unless another daemon of the same state directory already runs it. The\n"
    "server survives a daemon's crash and stops when the last daemon using it\n"
    "exits. `ejob registry status` shows it; other ejob commands find it through\n"
    "the state directory (give them --namespace).\n"
    "\n"
    "Signals:\n"
    "  SIGTERM, SIGINT  stop firing, let running items finish (bounded by\n"
    "                   --drain-timeout-ms), leave ZooKeeper cleanly, exit 0\n"
    "  SIGHUP           reload the file: added jobs start, removed jobs stop,\n"
    "                   changed jobs take their new config, jobs an operator\n"
    "                   shut down start again; the others are not touched.\n"
    "                   A file with errors is ignored (the errors are\n"
    "                   logged) and the running configuration is kept. A reload\n"
    "                   is read and applied on its own thread: SIGTERM is acted\n"
    "                   on at once even while a reload reads a slow or huge\n"
    "                   file or drains a removed job.\n"
    "                   regCenter, tracing and metrics changes need a restart\n"
    "                   (a warning says so; the running ones are kept);\n"
    "                   a changed log section applies at once.\n"
    "\n"
    "Under systemd (ejob.service; " EJ_DOC_DIR "/docs/systemd.md) the daemon tells\n"
    "the service manager when it is ready, reloading and stopping (sd_notify;\n"
    "nothing without NOTIFY_SOCKET).\n"
    "\n"
    "The host's IP in instance ids is the first non-loopback IPv4 address\n"
    "(public before site-local), or EJOB_IP when set.\n"
    "\n"
    "Example:\n"
    "  $ ejob run -c examples/demo/jobs.yaml\n"
    "  2026-01-01T10:00:00.000Z info  [daemon] embedded registry 127.0.0.1:40123 ...\n"
    "\n"
    "Exit codes: 0 stopped by a signal, 1 could not start (registry, job), 2 usage\n"
    "error or invalid file.\n";

/* Splits "servers[/namespace]" of --registry. */
static int registry_arg(const char *arg, char *servers, size_t slen, const char **ns)
{
    const char *slash = strchr(arg, '/');
    size_t n = slash != NULL ? (size_t)(slash - arg) : strlen(arg);
    if (n == 0 || n >= slen)
        return -1;
    memcpy(servers, arg, n);
    servers[n] = '\0';
    if (slash != NULL && slash[1] != '\0')
        *ns = slash + 1;
    return 0;
}

/* The command line of `ejob run`. */
struct run_opts {
    const char *file, *registry, *digest, *digest_file, *log_format, *log_level, *state_dir,
        *metrics_listen;
    long drain_ms;
    bool check;
    char servers[1024];      /* --registry's servers, or "" */
    const char *ns_override; /* --registry's /NAMESPACE, or NULL */
};

/* Parse and check the options. Returns 0 or the exit code. */
static int parse_run_opts(int argc, char **argv, struct run_opts *o)
{
    memset(o, 0, sizeof *o);
    o->drain_ms = DEFAULT_DRAIN_MS;
    struct ejcli_flag flags[] = {{"config", 'c', EJCLI_STR, &o->file},
                                 {"registry", 'r', EJCLI_STR, &o->registry},
                                 {"digest", 0, EJCLI_STR, &o->digest},
                                 {"digest-file", 0, EJCLI_STR, &o->digest_file},
                                 {"log-format", 0, EJCLI_STR, &o->log_format},
                                 {"log-level", 0, EJCLI_STR, &o->log_level},
                                 {"drain-timeout-ms", 0, EJCLI_INT, &o->drain_ms},
                                 {"state-dir", 0, EJCLI_STR, &o->state_dir},
                                 {"check", 0, EJCLI_BOOL, &o->check},
                                 {"metrics-listen", 0, EJCLI_STR, &o->metrics_listen},
                                 EJCLI_FLAGS_END};
    char *pos[1];
    int npos;
    int rc = ejcli_parse(CMD, argc, argv, flags, pos, 0, &npos);
    if (rc != 0)
        return rc;
    if (o->file == NULL)
        return ej_cli_usage_error(CMD, "missing -c FILE");
    if (o->log_format != NULL && strcmp(o->log_format, "text") != 0 &&
        strcmp(o->log_format, "json") != 0)
        return ej_cli_usage_error(CMD, "--log-format must be text or json, got \"%s\"",
                                  o->log_format);
    if (o->log_level != NULL && ej_log_level_parse(o->log_level) < 0)
        return ej_cli_usage_error(CMD, "--log-level must be debug, info, warn or error");
    if (o->drain_ms < 0 || o->drain_ms > 24L * 3600 * 1000)
        return ej_cli_usage_error(CMD, "--drain-timeout-ms must be 0..86400000");
    if (o->digest != NULL && o->digest_file != NULL)
        return ej_cli_usage_error(CMD, "give --digest or --digest-file, not both");
    if (o->registry != NULL &&
        registry_arg(o->registry, o->servers, sizeof o->servers, &o->ns_override) != 0)
        return ej_cli_usage_error(CMD, "bad --registry \"%s\"", o->registry);
    if (o->metrics_listen != NULL) {
        /* Checked up front so that --check refuses it too. */
        struct sockaddr_storage addr;
        size_t addrlen = sizeof addr;
        char why[256];
        if (ej_metrics_parse_listen(o->metrics_listen, &addr, &addrlen, why, sizeof why) != 0) {
            fprintf(stderr, "ejob %s: --metrics-listen: %s\n", CMD, why);
            return EJ_EXIT_USAGE;
        }
    }
    /* systemd's StateDirectory=, unless the command line or EJOB_STATE_DIR
     * says otherwise. */
    if (o->state_dir == NULL && getenv("EJOB_STATE_DIR") == NULL)
        o->state_dir = ejd_systemd_state_dir();
    return 0;
}

/* The log settings of the command line; the file's log section applies
 * where they say nothing. */
static void init_daemon(struct daemon *d, const struct run_opts *o)
{
    bool json = o->log_format != NULL && strcmp(o->log_format, "json") == 0;
    ej_log_set_format(json ? EJ_LOG_JSON : EJ_LOG_TEXT);
    if (o->log_level != NULL)
        ej_log_set_level((ej_log_level)ej_log_level_parse(o->log_level));
    memset(d, 0, sizeof *d);
    d->base_level = (int)ej_log_get_level();
    d->base_format = json ? EJ_LOG_JSON : EJ_LOG_TEXT;
    d->level_fixed = o->log_level != NULL;
    d->format_fixed = o->log_format != NULL;
    ej__mutex_init(&d->jobs_mu);
    atomic_init(&d->stopping, false);
    d->file = o->file;
    d->metrics_flag = o->metrics_listen;
    d->drain_ms = (int)o->drain_ms;
}

/* Load and check the file into d->cfg and the digest into *secret.
 * Returns 0 to go on, or the exit code (with d->cfg freed): --check ends
 * here with EJ_EXIT_OK. */
static int load_file(struct daemon *d, const struct run_opts *o, char **secret)
{
    struct ej_config_errors errs;
    ej_config_errors_init(&errs);
    int rc = ej_daemon_config_load_file(o->file, &d->cfg, &errs);
    if (rc != 0) {
        ejd_run_print_errors(&errs, o->file, rc);
        ej_config_errors_fini(&errs);
        return EJ_EXIT_USAGE;
    }
    ej_config_errors_fini(&errs);
    ejd_run_apply_log_config(d, &d->cfg.log);
    for (size_t i = 0; i < d->cfg.warnings.count; i++)
        fprintf(stderr, "warning: %s\n", d->cfg.warnings.messages[i]);
    /* Outside the file: the file's regCenter.digest/digestFile otherwise. */
    rc = ejcli_digest(CMD, o->digest, o->digest_file, secret);
    for (size_t i = 0; rc == 0 && i < d->cfg.job_count; i++) {
        ej_job_type t = d->cfg.jobs[i].job_type;
        if (t != EJ_JOB_TYPE_SCRIPT && t != EJ_JOB_TYPE_HTTP) {
            fprintf(stderr, "%s:%d: jobs.%s: the daemon runs SCRIPT and HTTP jobs only\n", o->file,
                    d->cfg.job_lines ? d->cfg.job_lines[i] : 0, d->cfg.jobs[i].job_name);
            rc = EJ_EXIT_USAGE;
        }
    }
    if (rc == 0 && o->check) {
        printf("%s: OK (%zu job%s)\n", o->file, d->cfg.job_count, d->cfg.job_count == 1 ? "" : "s");
        rc = EJ_EXIT_OK;
    } else if (rc == 0) {
        return 0;
    }
    free(*secret);
    *secret = NULL;
    ej_daemon_config_fini(&d->cfg);
    return rc;
}

/* Signals are taken through a signalfd: block them before any thread
 * exists so every thread inherits the mask. Returns the fd or -errno. */
static int open_signals(void)
{
    sigset_t mask;
    sigemptyset(&mask);
    sigaddset(&mask, SIGTERM);
    sigaddset(&mask, SIGINT);
    sigaddset(&mask, SIGHUP);
    sigprocmask(SIG_BLOCK, &mask, NULL);
    signal(SIGPIPE, SIG_IGN);
    int sfd = signalfd(-1, &mask, SFD_CLOEXEC);
    return sfd >= 0 ? sfd : -errno;
}

/* The metrics endpoint, when the flag or the file asks for one (the flag
 * overrides the file). Returns 0 or the exit code. */
static int start_metrics(struct daemon *d, const struct run_opts *o)
{
    const char *mlisten = o->metrics_listen != NULL ? o->metrics_listen : d->cfg.metrics.listen;
    if (mlisten == NULL)
        return 0;
    char merr[512] = "";
    int me = ejd_metrics_start(mlisten, d->cfg.job_count, merr, sizeof(merr));
    if (me == 0 && (d->metrics_now = strdup(mlisten)) == NULL) {
        me = EJ_ENOMEM;
        snprintf(merr, sizeof merr, "out of memory");
    }
    if (me == 0)
        return 0;
    fprintf(stderr, "ejob %s: %s: %s\n", CMD,
            o->metrics_listen != NULL ? "--metrics-listen" : "metrics.listen", merr);
    return me == EJ_EINVAL ? EJ_EXIT_USAGE : EJ_EXIT_FAILED;
}

/* Fill servers: --registry's, else the file's, else the embedded
 * registry's (joined, or started). Returns 0 or the exit code. */
static int find_servers(struct daemon *d, const struct run_opts *o, char *servers, size_t len)
{
    snprintf(servers, len, "%s", o->servers);
    if (servers[0] == '\0' && !d->cfg.reg_center.embedded)
        snprintf(servers, len, "%s", d->cfg.reg_center.server_lists);
    if (servers[0] != '\0')
        return 0;
    char *dir = ejcli_state_dir(o->state_dir);
    char err[512] = "";
    ejd_notify_status("starting the embedded registry (state directory %s)",
                      dir != NULL ? dir : "?");
    int e = dir != NULL ? ejcli_embedded_join(dir, &d->embedded, err, sizeof(err)) : EJ_ENOMEM;
    if (e != 0) {
        EJ_LOG(EJ_LOG_ERROR, "daemon", e, "embedded registry: %s", err[0] ? err : ej_strerror(e));
        free(dir);
        return EJ_EXIT_FAILED;
    }
    snprintf(servers, len, "%s", ejcli_embedded_address(d->embedded));
    EJ_LOG(EJ_LOG_INFO, "daemon", 0, "embedded registry %s (state directory %s)", servers, dir);
    free(dir);
    return 0;
}

static int connect_registry(struct daemon *d, const char *servers, const char *ns,
                            const char *secret)
{
    const struct ej_reg_center_config *rcfg = &d->cfg.reg_center;
    struct ej_registry_opts opts = {
        .servers = servers,
        .namespace_ = ns,
        .session_timeout_ms = rcfg->session_timeout_ms,
        .connection_timeout_ms = rcfg->connection_timeout_ms,
        .base_sleep_ms = rcfg->base_sleep_time_ms,
        .max_sleep_ms = rcfg->max_sleep_time_ms,
        .max_retries = rcfg->max_retries,
        .digest = secret != NULL ? secret : rcfg->digest,
        .on_state = ejd_metrics_registry_state,
        /* unset (-1): the registry's default; 0 in the file: none */
        .takeover_margin_ms = rcfg->takeover_margin_ms < 0    ? 0
                              : rcfg->takeover_margin_ms == 0 ? -1
                                                              : rcfg->takeover_margin_ms,
    };
    ejd_notify_status("connecting to ZooKeeper at %s", servers);
    int e = ej_registry_create(&d->reg, &opts);
    if (e != 0)
        EJ_LOG(EJ_LOG_ERROR, "daemon", e, "cannot connect to ZooKeeper at %s: %s", servers,
               ej_registry_errmsg(NULL));
    return e;
}

/* A reload's thread is done: systemd hears how it went; a SIGHUP that
 * came meanwhile starts the next. */
static void reload_done(struct daemon *d)
{
    char outcome[sizeof d->reload->outcome];
    snprintf(outcome, sizeof outcome, "%s", d->reload->outcome);
    ejd_run_reload_finish(d->reload);
    d->reload = NULL;
    ejd_notify_ready(d->njobs, d->file, outcome);
    if (d->reload_again) {
        d->reload_again = false;
        ejd_run_begin_reload(d);
    } else if (d->restart_again) {
        d->restart_again = false;
        ejd_run_begin_restarts(d);
    }
}

/* A restart was asked (daemon_restart.h): done on the reload thread, after
 * the reload going on if there is one. */
static void restart_asked(struct daemon *d)
{
    ejd_restart_ack();
    if (d->reload != NULL)
        d->restart_again = true;
    else
        ejd_run_begin_restarts(d);
}

/* The main loop: reloads on SIGHUP until SIGTERM or SIGINT, which pauses
 * every job at once. */
static void serve(struct daemon *d, int sfd)
{
    for (;;) {
        struct pollfd pfd[3] = {{.fd = sfd, .events = POLLIN},
                                {.fd = d->reload ? d->reload->efd : -1, .events = POLLIN},
                                {.fd = ejd_restart_fd(), .events = POLLIN}};
        if (poll(pfd, 3, -1) < 0) {
            if (errno == EINTR)
                continue;
            EJ_LOG(EJ_LOG_ERROR, "daemon", -errno, "poll failed; stopping");
            return;
        }
        if (pfd[1].revents & POLLIN)
            reload_done(d);
        if (pfd[2].revents & POLLIN)
            restart_asked(d);
        if (!(pfd[0].revents & POLLIN))
            continue;
        struct signalfd_siginfo si;
        ssize_t n = read(sfd, &si, sizeof(si));
        if (n < 0 && (errno == EINTR || errno == EAGAIN))
            continue;
        if (n != (ssize_t)sizeof(si)) {
            EJ_LOG(EJ_LOG_ERROR, "daemon", -errno, "reading signals failed; stopping");
            return;
        }
        if (si.ssi_signo == SIGHUP && d->reload != NULL) {
            EJ_LOG(EJ_LOG_INFO, "daemon", 0,
                   "SIGHUP: a reload of %s is still going on; reloading again when it ends",
                   d->file);
            d->reload_again = true;
            continue;
        }
        if (si.ssi_signo == SIGHUP) {
            ejd_run_begin_reload(d);
            continue;
        }
        const char *sig = si.ssi_signo == SIGTERM ? "SIGTERM" : "SIGINT";
        ejd_run_pause_all(d);
        ejd_notify_stopping(sig, d->drain_ms);
        EJ_LOG(EJ_LOG_INFO, "daemon", 0,
               "%s: stopping; no job fires from now on; running items may take up to %d ms", sig,
               d->drain_ms);
        return;
    }
}

/* Descriptors the daemon holds apart from its items (ZooKeeper, signals,
 * the metrics endpoint, the history store, logs), and per script item
 * running at once (its output and error pipes, its socket and pidfd, and
 * the descriptors it is started with). */
#define NOFILE_BASE 64
#define NOFILE_PER_ITEM 8

/* Every item of every job may run at once: the open-file limit must hold
 * that many, or runs fail with "Too many open files" one by one. The soft
 * limit is raised towards the hard one when it is lower; what is still
 * short is warned about at start-up, not found out from failed runs. */
static void check_nofile(const struct ej_daemon_config *cfg)
{
    unsigned long long need = NOFILE_BASE;
    for (size_t i = 0; i < cfg->job_count; i++)
        need += (unsigned long long)cfg->jobs[i].sharding_total_count * NOFILE_PER_ITEM;
    struct rlimit rl;
    if (getrlimit(RLIMIT_NOFILE, &rl) != 0 || rl.rlim_cur == RLIM_INFINITY || rl.rlim_cur >= need)
        return;
    unsigned long long was = rl.rlim_cur;
    rlim_t want = rl.rlim_max != RLIM_INFINITY && rl.rlim_max < need ? rl.rlim_max : need;
    if (want > rl.rlim_cur) {
        rl.rlim_cur = want;
        if (setrlimit(RLIMIT_NOFILE, &rl) == 0)
            EJ_LOG(EJ_LOG_INFO, "daemon", 0, "open-file limit raised from %llu to %llu", was,
                   (unsigned long long)want);
        else if (getrlimit(RLIMIT_NOFILE, &rl) != 0)
            return;
    }
    if (rl.rlim_cur < need)
        EJ_LOG(EJ_LOG_WARN, "daemon", 0,
               "the open-file limit is %llu (hard limit %llu), but %zu job(s) of %llu item(s) "
               "may need about %llu descriptors when their items run at once: items will fail "
               "with \"Too many open files\"; raise it (ulimit -n, systemd LimitNOFILE=)",
               (unsigned long long)rl.rlim_cur, (unsigned long long)rl.rlim_max, cfg->job_count,
               (need - NOFILE_BASE) / NOFILE_PER_ITEM, need);
}

/* Registry, history, jobs, then the main loop; everything is undone in
 * reverse order. Returns the exit code. */
static int run(struct daemon *d, const struct run_opts *o, const char *secret, int sfd)
{
    char servers[1024];
    check_nofile(&d->cfg);
    int rc = start_metrics(d, o);
    if (rc == 0)
        rc = find_servers(d, o, servers, sizeof servers);
    if (rc != 0)
        goto out_metrics;
    const char *ns = o->ns_override != NULL ? o->ns_override : d->cfg.reg_center.name_space;
    if (connect_registry(d, servers, ns, secret) != 0) {
        rc = EJ_EXIT_FAILED;
        goto out_embedded;
    }
    char err[512] = "";
    char *trace_dir = ejcli_state_dir(o->state_dir);
    int e = trace_dir != NULL
                ? ejd_init(&d->cfg.tracing, o->file, trace_dir, d->drain_ms, err, sizeof(err))
                : EJ_ENOMEM;
    free(trace_dir);
    if (e != 0) {
        EJ_LOG(EJ_LOG_ERROR, "daemon", e, "%s", err[0] ? err : ej_strerror(e));
        rc = EJ_EXIT_FAILED;
        goto out_reg;
    }
    e = ejd_alerts_start(&d->cfg);
    if (e != 0) {
        EJ_LOG(EJ_LOG_ERROR, "daemon", e, "cannot start alerts: %s", ej_strerror(e));
        rc = EJ_EXIT_FAILED;
        goto out_jobs;
    }
    if ((e = ejd_restart_init(d->reg)) != 0)
        EJ_LOG(EJ_LOG_WARN, "daemon", e, "restart requests will not be seen; SIGHUP restarts a "
               "job that was shut down");
    ejd_notify_status("registering %zu job(s)", d->cfg.job_count);
    if (ejd_run_start_all(d) != 0) {
        rc = EJ_EXIT_FAILED;
        goto out_jobs;
    }
    if (d->cfg.job_count > 0 && ejd_clock_start(d->reg, d->cfg.jobs[0].job_name) != 0)
        EJ_LOG(EJ_LOG_WARN, "daemon", 0, "the clock offset to ZooKeeper will not be measured");
    EJ_LOG(EJ_LOG_INFO, "daemon", 0,
           "running %zu job(s) of %s; registry %s/%s; pid %d (SIGTERM stops, SIGHUP reloads)",
           d->njobs, o->file, servers, ns, (int)getpid());
    ejd_notify_ready(d->njobs, o->file, NULL);
    serve(d, sfd);
    rc = EJ_EXIT_OK;
out_jobs:
    ejd_clock_stop();
    /* A reload being applied stops at its next step (a removed job it
     * stops drains within the same bound as the others); one still being
     * read is abandoned. */
    ejd_run_reload_finish(d->reload);
    d->reload = NULL;
    ejd_run_stop_all(d);
    ejd_restart_fini();
    ejd_fini();
out_reg:
    ejd_metrics_stop();
    ej_registry_destroy(d->reg);
out_embedded:
    ejcli_embedded_leave(d->embedded, EMBEDDED_STOP_WAIT_MS);
out_metrics:
    ejd_metrics_stop();
    return rc;
}

static int run_daemon(int argc, char **argv)
{
    struct run_opts o;
    int rc = parse_run_opts(argc, argv, &o);
    if (rc != 0)
        return rc;
    struct daemon d;
    init_daemon(&d, &o);
    char *secret = NULL;
    rc = load_file(&d, &o, &secret);
    if (rc != 0 || o.check) {
        ej__mutex_destroy(&d.jobs_mu);
        return rc;
    }
    int sfd = open_signals();
    if (sfd < 0) {
        rc = ejcli_fail(CMD, "signalfd: %s", strerror(-sfd));
    } else {
        rc = run(&d, &o, secret, sfd);
        close(sfd);
    }
    if (secret != NULL)
        memset(secret, 0, strlen(secret));
    free(secret);
    free(d.metrics_now);
    ej_daemon_config_fini(&d.cfg);
    ej__mutex_destroy(&d.jobs_mu);
    if (rc == EJ_EXIT_OK)
        EJ_LOG(EJ_LOG_INFO, "daemon", 0, "stopped");
    return rc;
}

EJ_CLI_COMMAND(run, CMD, "run the SCRIPT and HTTP jobs of a YAML file (the daemon)", usage,
               run_daemon)
