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
#include <sys/eventfd.h>
#include <sys/signalfd.h>
#include <sys/socket.h>

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
#include "cli/daemon_metrics.h"
#include "cli/daemon_notify.h"
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
    "Spring Boot configuration; see docs/cli.md) until stopped.\n"
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
    "                          /readyz over HTTP, e.g. 127.0.0.1:9464 (docs/metrics.md);\n"
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
    "                   changed jobs take their new config; the others are not\n"
    "                   touched. A file with errors is ignored (the errors are\n"
    "                   logged) and the running configuration is kept. A reload\n"
    "                   is read and applied on its own thread: SIGTERM is acted\n"
    "                   on at once even while a reload reads a slow or huge\n"
    "                   file or drains a removed job.\n"
    "                   regCenter, tracing and metrics changes need a restart\n"
    "                   (a warning says so; the running ones are kept);\n"
    "                   a changed log section applies at once.\n"
    "\n"
    "Under systemd (dist/systemd/ejob.service, docs/systemd.md) the daemon tells\n"
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

struct running {
    char *name;
    ejd_job *job;
};

struct daemon {
    const char *file;
    /* jobs/njobs/cap: changed by the reload thread while it applies a
     * reload, read by the main loop to pause every job on SIGTERM. */
    pthread_mutex_t jobs_mu;
    atomic_bool stopping;     /* SIGTERM/SIGINT seen: a reload stops where it is */
    const char *metrics_flag; /* --metrics-listen, or NULL */
    char *metrics_now;        /* the endpoint's address, or NULL when off; owned */
    struct ej_daemon_config cfg;
    ej_registry *reg;
    ejcli_embedded *embedded;
    struct running *jobs;
    size_t njobs, cap;
    int drain_ms;
    /* Log level and format before the file's log section: the command
     * line's (then fixed), else EJOB_LOG_LEVEL's or the defaults. */
    int base_level, base_format;
    bool level_fixed, format_fixed;
    struct reload *reload; /* the reload being read or applied, or NULL */
    bool reload_again;     /* a SIGHUP came while one was going on */
};

/* A reload, read and applied on a thread of its own: reading a large file
 * (or a FIFO that never ends), draining a removed job's items or waiting for
 * ZooKeeper never keeps the main loop from answering SIGTERM. */
enum { RELOAD_READING, RELOAD_APPLYING, RELOAD_ABANDONED };
struct reload {
    struct daemon *d;
    const char *file;
    /* READING -> APPLYING (the thread, once read: the main loop then joins
     * it), or READING -> ABANDONED (the main loop, stopping while the file
     * is still being read: the thread then frees the reload and never
     * touches the daemon). */
    atomic_int phase;
    int efd; /* written by the thread when done */
    pthread_t thread;
    int rc;
    bool taken;        /* next was moved into the daemon */
    char outcome[160]; /* how it went, for systemd's STATUS= */
    struct ej_daemon_config next;
    struct ej_config_errors errs;
};

static void reload_apply(struct daemon *d, struct reload *rl);

static void reload_free(struct reload *r)
{
    if (r->rc == 0 && !r->taken)
        ej_daemon_config_fini(&r->next);
    ej_config_errors_fini(&r->errs);
    close(r->efd);
    free(r);
}

/* The main loop is done with a reload: join its thread, or leave a thread
 * still reading to free it. Accepts NULL. */
static void reload_finish(struct reload *r)
{
    if (r == NULL)
        return;
    int reading = RELOAD_READING;
    if (atomic_compare_exchange_strong(&r->phase, &reading, RELOAD_ABANDONED)) {
        EJ_LOG(EJ_LOG_INFO, "daemon", 0, "the reload still reading %s is abandoned", r->file);
        pthread_detach(r->thread);
        return;
    }
    pthread_join(r->thread, NULL);
    reload_free(r);
}

static void *reload_main(void *arg)
{
    struct reload *r = arg;
    ej_config_errors_init(&r->errs);
    r->rc = ej_daemon_config_load_file(r->file, &r->next, &r->errs);
    int reading = RELOAD_READING;
    if (!atomic_compare_exchange_strong(&r->phase, &reading, RELOAD_APPLYING)) {
        reload_free(r); /* abandoned: the daemon may be gone */
        return NULL;
    }
    if (atomic_load(&r->d->stopping)) {
        EJ_LOG(EJ_LOG_INFO, "daemon", 0, "reload: not applied, the daemon is stopping");
        snprintf(r->outcome, sizeof r->outcome, "reload not applied (stopping)");
    } else {
        reload_apply(r->d, r);
    }
    uint64_t one = 1;
    if (write(r->efd, &one, sizeof(one)) != (ssize_t)sizeof(one))
        EJ_LOG(EJ_LOG_ERROR, "daemon", -errno, "reload: cannot signal the main loop");
    return NULL;
}

/* Start reading the file for a reload. Returns 0 or an error (logged). */
static int reload_start(struct daemon *d)
{
    struct reload *r = calloc(1, sizeof(*r));
    if (r == NULL)
        return EJ_ENOMEM;
    r->d = d;
    r->file = d->file;
    atomic_init(&r->phase, RELOAD_READING);
    r->efd = eventfd(0, EFD_CLOEXEC | EFD_NONBLOCK);
    if (r->efd < 0) {
        int e = -errno;
        free(r);
        EJ_LOG(EJ_LOG_ERROR, "daemon", e, "reload: eventfd failed");
        return e;
    }
    int e = pthread_create(&r->thread, NULL, reload_main, r);
    if (e != 0) {
        close(r->efd);
        free(r);
        EJ_LOG(EJ_LOG_ERROR, "daemon", -e, "reload: cannot start its thread");
        return -e;
    }
    d->reload = r;
    return 0;
}

static void log_warnings(const struct ej_config_errors *w, const char *prefix)
{
    for (size_t i = 0; i < w->count; i++)
        EJ_LOG(EJ_LOG_WARN, "daemon", 0, "%s%s", prefix, w->messages[i]);
}

static void print_errors(const struct ej_config_errors *errs, const char *file, int rc)
{
    if (errs->count == 0)
        fprintf(stderr, "%s: %s\n", file, ej_strerror(rc));
    for (size_t i = 0; i < errs->count; i++)
        fprintf(stderr, "%s\n", errs->messages[i]);
}

static void log_errors(const struct ej_config_errors *errs, const char *file, int rc)
{
    if (errs->count == 0)
        EJ_LOG(EJ_LOG_ERROR, "daemon", rc, "reload: %s: %s", file, ej_strerror(rc));
    for (size_t i = 0; i < errs->count; i++)
        EJ_LOG(EJ_LOG_ERROR, "daemon", 0, "reload: %s", errs->messages[i]);
}

/* The running job of that name, or NULL. */
static ejd_job *find_job(struct daemon *d, const char *name)
{
    ejd_job *job = NULL;
    pthread_mutex_lock(&d->jobs_mu);
    for (size_t i = 0; i < d->njobs && job == NULL; i++)
        if (strcmp(d->jobs[i].name, name) == 0)
            job = d->jobs[i].job;
    pthread_mutex_unlock(&d->jobs_mu);
    return job;
}

/* Under jobs_mu. A job added while the daemon stops is paused at once
 * (the main loop paused the others). */
static int add_running(struct daemon *d, const char *name, ejd_job *job)
{
    if (atomic_load(&d->stopping))
        ejd_job_pause(job);
    if (d->njobs == d->cap) {
        size_t cap = d->cap ? d->cap * 2 : 8;
        struct running *n = realloc(d->jobs, cap * sizeof(*n));
        if (n == NULL)
            return EJ_ENOMEM;
        d->jobs = n;
        d->cap = cap;
    }
    char *copy = strdup(name);
    if (copy == NULL)
        return EJ_ENOMEM;
    d->jobs[d->njobs].name = copy;
    d->jobs[d->njobs].job = job;
    d->njobs++;
    return 0;
}

static int start_job(struct daemon *d, const struct ej_job_config *cfg)
{
    char err[512] = "";
    ejd_job *job = NULL;
    int rc = ejd_job_start(d->reg, cfg, &job, err, sizeof(err));
    if (rc != 0) {
        EJ_LOG(EJ_LOG_ERROR, "daemon", rc, "job %s: cannot start: %s", cfg->job_name,
               err[0] ? err : ej_strerror(rc));
        return rc;
    }
    pthread_mutex_lock(&d->jobs_mu);
    rc = add_running(d, cfg->job_name, job);
    pthread_mutex_unlock(&d->jobs_mu);
    if (rc != 0) {
        ejd_jobs_stop(&job, 1);
        return rc;
    }
    EJ_LOG(EJ_LOG_INFO, "daemon", 0, "job %s: started (%s, cron \"%s\", %d items)", cfg->job_name,
           ej_job_type_name(cfg->job_type), cfg->cron, cfg->sharding_total_count);
    return 0;
}

/* The file's jobs at start-up, all at once. On failure the jobs that
 * exist are in the running set (out_jobs stops them). */
static int start_all(struct daemon *d)
{
    size_t n = d->cfg.job_count;
    ejd_job **jobs = calloc(n ? n : 1, sizeof(*jobs));
    if (jobs == NULL)
        return EJ_ENOMEM;
    int rc = ejd_jobs_start(d->reg, d->cfg.jobs, n, jobs);
    pthread_mutex_lock(&d->jobs_mu);
    for (size_t i = 0; i < n; i++) {
        if (jobs[i] == NULL)
            continue;
        int arc = add_running(d, d->cfg.jobs[i].job_name, jobs[i]);
        if (arc != 0) {
            ejd_jobs_stop(&jobs[i], 1);
            rc = rc != 0 ? rc : arc;
        }
    }
    pthread_mutex_unlock(&d->jobs_mu);
    free(jobs);
    if (rc == 0)
        EJ_LOG(EJ_LOG_INFO, "daemon", 0, "%zu job(s) started", n);
    return rc;
}

static void stop_job_at(struct daemon *d, size_t i)
{
    EJ_LOG(EJ_LOG_INFO, "daemon", 0, "job %s: stopping", d->jobs[i].name);
    ejd_jobs_stop(&d->jobs[i].job, 1);
    EJ_LOG(EJ_LOG_INFO, "daemon", 0, "job %s: stopped", d->jobs[i].name);
    free(d->jobs[i].name);
    d->jobs[i] = d->jobs[--d->njobs];
}

static const struct ej_job_config *find_cfg(const struct ej_daemon_config *c, const char *name)
{
    for (size_t i = 0; i < c->job_count; i++)
        if (strcmp(c->jobs[i].job_name, name) == 0)
            return &c->jobs[i];
    return NULL;
}

/* SIGTERM: no job fires from now on, whatever a reload is doing. */
static void pause_all(struct daemon *d)
{
    atomic_store(&d->stopping, true);
    pthread_mutex_lock(&d->jobs_mu);
    for (size_t i = 0; i < d->njobs; i++)
        ejd_job_pause(d->jobs[i].job);
    pthread_mutex_unlock(&d->jobs_mu);
}

/* The reload thread: take the jobs the new file no longer has out of the
 * running set, then stop them together (their items drain meanwhile). */
static size_t stop_removed(struct daemon *d, const struct ej_daemon_config *next)
{
    pthread_mutex_lock(&d->jobs_mu);
    ejd_job **gone = calloc(d->njobs ? d->njobs : 1, sizeof(*gone));
    size_t n = 0;
    for (size_t i = 0; gone != NULL && i < d->njobs;) {
        if (find_cfg(next, d->jobs[i].name) != NULL) {
            i++;
            continue;
        }
        EJ_LOG(EJ_LOG_INFO, "daemon", 0, "job %s: stopping (removed from the file)",
               d->jobs[i].name);
        gone[n++] = d->jobs[i].job;
        free(d->jobs[i].name);
        d->jobs[i] = d->jobs[--d->njobs];
    }
    pthread_mutex_unlock(&d->jobs_mu);
    if (gone == NULL) {
        EJ_LOG(EJ_LOG_ERROR, "daemon", EJ_ENOMEM, "reload: out of memory; no job removed");
        return 0;
    }
    ejd_jobs_stop(gone, n);
    free(gone);
    return n;
}

/* Stop every job at once (the drain bound holds for all together). */
static void stop_all(struct daemon *d)
{
    ejd_job **all = calloc(d->njobs ? d->njobs : 1, sizeof(*all));
    if (all == NULL) {
        while (d->njobs > 0)
            stop_job_at(d, d->njobs - 1);
    } else {
        for (size_t i = 0; i < d->njobs; i++)
            all[i] = d->jobs[i].job;
        if (d->njobs > 0)
            EJ_LOG(EJ_LOG_INFO, "daemon", 0, "stopping %zu job(s)", d->njobs);
        ejd_jobs_stop(all, d->njobs);
        for (size_t i = 0; i < d->njobs; i++)
            free(d->jobs[i].name);
        d->njobs = 0;
        free(all);
    }
    free(d->jobs);
    d->jobs = NULL;
}

static bool same_str(const char *a, const char *b)
{
    return strcmp(a != NULL ? a : "", b != NULL ? b : "") == 0;
}

/* The file's log section, unless the command line set the same. A level
 * or format the file no longer gives goes back to what it was before. */
static void apply_log_config(const struct daemon *d, const struct ej_log_config *lc)
{
    int level = lc->level >= 0 ? lc->level : d->base_level;
    int format = lc->format >= 0 ? lc->format : d->base_format;
    if (!d->format_fixed)
        ej_log_set_format((ej_log_format)format);
    if (!d->level_fixed && level != (int)ej_log_get_level()) {
        ej_log_set_level((ej_log_level)level);
        EJ_LOG(EJ_LOG_INFO, "daemon", 0, "log level %s", ej_log_level_name(level));
    }
}

/* Apply a reload (on its thread) once its file is read. Stops between
 * steps when the daemon is told to stop. */
static void reload_apply(struct daemon *d, struct reload *rl)
{
    int rc = rl->rc;
    if (rc != 0) {
        log_errors(&rl->errs, d->file, rc);
        EJ_LOG(EJ_LOG_WARN, "daemon", 0,
               "reload: %s has errors; the running configuration is "
               "kept",
               d->file);
        snprintf(rl->outcome, sizeof rl->outcome, "reload refused: the file has errors");
        return;
    }
    struct ej_daemon_config next = rl->next;
    log_warnings(&next.warnings, "reload: ");
    apply_log_config(d, &next.log);
    const struct ej_reg_center_config *a = &d->cfg.reg_center, *b = &next.reg_center;
    if (a->embedded != b->embedded || !same_str(a->server_lists, b->server_lists) ||
        !same_str(a->name_space, b->name_space) || !same_str(a->digest, b->digest) ||
        a->session_timeout_ms != b->session_timeout_ms)
        EJ_LOG(EJ_LOG_WARN, "daemon", 0,
               "reload: regCenter changes take effect only after a restart; ignored");
    if (d->cfg.tracing.type != next.tracing.type || d->cfg.tracing.off != next.tracing.off ||
        !same_str(d->cfg.tracing.url, next.tracing.url))
        EJ_LOG(EJ_LOG_WARN, "daemon", 0,
               "reload: tracing changes take effect only after a restart; ignored");
    /* The endpoint keeps its socket: moving it would leave scrapers and
     * probes pointed at a port that no longer answers mid-run. */
    if (d->metrics_flag != NULL && !same_str(d->cfg.metrics.listen, next.metrics.listen))
        EJ_LOG(EJ_LOG_WARN, "daemon", 0,
               "reload: metrics.listen is overridden by --metrics-listen %s; ignored",
               d->metrics_flag);
    else if (d->metrics_flag == NULL && !same_str(d->metrics_now, next.metrics.listen))
        EJ_LOG(EJ_LOG_WARN, "daemon", 0,
               "reload: metrics.listen changes take effect only after a restart; the "
               "endpoint stays %s",
               d->metrics_now != NULL ? d->metrics_now : "off");

    size_t removed = stop_removed(d, &next), added = 0, changed = 0, unchanged = 0;
    for (size_t i = 0; i < next.job_count; i++) {
        if (atomic_load(&d->stopping)) {
            EJ_LOG(EJ_LOG_INFO, "daemon", 0,
                   "reload: stopped after %zu of %zu job(s): the daemon is stopping", i,
                   next.job_count);
            snprintf(rl->outcome, sizeof rl->outcome, "reload stopped part-way (stopping)");
            return; /* next is freed with the reload */
        }
        const struct ej_job_config *cfg = &next.jobs[i];
        ejd_job *job = find_job(d, cfg->job_name);
        if (job == NULL) {
            if (start_job(d, cfg) == 0)
                added++;
            continue;
        }
        if (ej_job_config_equal(ejd_job_config(job), cfg)) {
            unchanged++;
            continue;
        }
        char err[512] = "";
        rc = ejd_job_update(job, cfg, err, sizeof(err));
        if (rc != 0) {
            EJ_LOG(EJ_LOG_ERROR, "daemon", rc, "job %s: new config not applied: %s", cfg->job_name,
                   err[0] ? err : ej_strerror(rc));
            continue;
        }
        EJ_LOG(EJ_LOG_INFO, "daemon", 0, "job %s: config updated (cron \"%s\", %d items)",
               cfg->job_name, cfg->cron, cfg->sharding_total_count);
        changed++;
    }
    rl->taken = true;
    ej_daemon_config_fini(&d->cfg);
    d->cfg = next;
    EJ_LOG(EJ_LOG_INFO, "daemon", 0,
           "reload done: %zu added, %zu removed, %zu changed, %zu unchanged", added, removed,
           changed, unchanged);
    snprintf(rl->outcome, sizeof rl->outcome,
             "last reload: %zu added, %zu removed, %zu changed, %zu unchanged", added, removed,
             changed, unchanged);
}

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

/* A SIGHUP acted on: systemd hears of the reload, and of its end at once
 * when it cannot even start. */
static void begin_reload(struct daemon *d)
{
    EJ_LOG(EJ_LOG_INFO, "daemon", 0, "SIGHUP: reloading %s", d->file);
    ejd_notify_reloading(d->file);
    if (reload_start(d) != 0)
        ejd_notify_ready(d->njobs, d->file, "the reload could not start");
}

static int run_daemon(int argc, char **argv)
{
    const char *file = NULL, *registry = NULL, *digest = NULL, *digest_file = NULL,
               *log_format = NULL, *log_level = NULL, *state_dir = NULL, *metrics_listen = NULL;
    long drain_ms = DEFAULT_DRAIN_MS;
    bool check = false;
    struct ejcli_flag flags[] = {{"config", 'c', EJCLI_STR, &file},
                                 {"registry", 'r', EJCLI_STR, &registry},
                                 {"digest", 0, EJCLI_STR, &digest},
                                 {"digest-file", 0, EJCLI_STR, &digest_file},
                                 {"log-format", 0, EJCLI_STR, &log_format},
                                 {"log-level", 0, EJCLI_STR, &log_level},
                                 {"drain-timeout-ms", 0, EJCLI_INT, &drain_ms},
                                 {"state-dir", 0, EJCLI_STR, &state_dir},
                                 {"check", 0, EJCLI_BOOL, &check},
                                 {"metrics-listen", 0, EJCLI_STR, &metrics_listen},
                                 EJCLI_FLAGS_END};
    char *pos[1];
    int npos;
    int rc = ejcli_parse(CMD, argc, argv, flags, pos, 0, &npos);
    if (rc != 0)
        return rc;
    if (file == NULL)
        return ej_cli_usage_error(CMD, "missing -c FILE");
    if (log_format != NULL && strcmp(log_format, "text") != 0 && strcmp(log_format, "json") != 0)
        return ej_cli_usage_error(CMD, "--log-format must be text or json, got \"%s\"", log_format);
    if (log_level != NULL && ej_log_level_parse(log_level) < 0)
        return ej_cli_usage_error(CMD, "--log-level must be debug, info, warn or error");
    if (drain_ms < 0 || drain_ms > 24L * 3600 * 1000)
        return ej_cli_usage_error(CMD, "--drain-timeout-ms must be 0..86400000");
    if (digest != NULL && digest_file != NULL)
        return ej_cli_usage_error(CMD, "give --digest or --digest-file, not both");
    char servers[1024] = "";
    const char *ns_override = NULL;
    if (registry != NULL && registry_arg(registry, servers, sizeof(servers), &ns_override) != 0)
        return ej_cli_usage_error(CMD, "bad --registry \"%s\"", registry);
    if (metrics_listen != NULL) {
        /* Checked up front so that --check refuses it too. */
        struct sockaddr_storage addr;
        size_t addrlen = sizeof addr;
        char why[256];
        if (ej_metrics_parse_listen(metrics_listen, &addr, &addrlen, why, sizeof why) != 0) {
            fprintf(stderr, "ejob %s: --metrics-listen: %s\n", CMD, why);
            return EJ_EXIT_USAGE;
        }
    }
    ej_log_set_format(log_format != NULL && strcmp(log_format, "json") == 0 ? EJ_LOG_JSON
                                                                            : EJ_LOG_TEXT);
    if (log_level != NULL)
        ej_log_set_level((ej_log_level)ej_log_level_parse(log_level));
    /* systemd's StateDirectory=, unless the command line or EJOB_STATE_DIR
     * says otherwise. */
    if (state_dir == NULL && getenv("EJOB_STATE_DIR") == NULL)
        state_dir = ejd_systemd_state_dir();

    struct daemon d;
    memset(&d, 0, sizeof(d));
    d.base_level = (int)ej_log_get_level();
    d.base_format =
        log_format != NULL && strcmp(log_format, "json") == 0 ? EJ_LOG_JSON : EJ_LOG_TEXT;
    d.level_fixed = log_level != NULL;
    d.format_fixed = log_format != NULL;
    pthread_mutex_init(&d.jobs_mu, NULL);
    atomic_init(&d.stopping, false);
    d.file = file;
    d.metrics_flag = metrics_listen;
    d.drain_ms = (int)drain_ms;
    struct ej_config_errors errs;
    ej_config_errors_init(&errs);
    rc = ej_daemon_config_load_file(file, &d.cfg, &errs);
    if (rc != 0) {
        print_errors(&errs, file, rc);
        ej_config_errors_fini(&errs);
        return EJ_EXIT_USAGE;
    }
    ej_config_errors_fini(&errs);
    apply_log_config(&d, &d.cfg.log);
    for (size_t i = 0; i < d.cfg.warnings.count; i++)
        fprintf(stderr, "warning: %s\n", d.cfg.warnings.messages[i]);
    char *secret = NULL;
    /* Outside the file: the file's regCenter.digest/digestFile otherwise. */
    rc = ejcli_digest(CMD, digest, digest_file, &secret);
    if (rc != 0) {
        ej_daemon_config_fini(&d.cfg);
        return rc;
    }
    if (check) {
        printf("%s: OK (%zu job%s)\n", file, d.cfg.job_count, d.cfg.job_count == 1 ? "" : "s");
        free(secret);
        ej_daemon_config_fini(&d.cfg);
        return EJ_EXIT_OK;
    }
    for (size_t i = 0; i < d.cfg.job_count; i++) {
        ej_job_type t = d.cfg.jobs[i].job_type;
        if (t != EJ_JOB_TYPE_SCRIPT && t != EJ_JOB_TYPE_HTTP) {
            fprintf(stderr, "%s:%d: jobs.%s: the daemon runs SCRIPT and HTTP jobs only\n", file,
                    d.cfg.job_lines ? d.cfg.job_lines[i] : 0, d.cfg.jobs[i].job_name);
            free(secret);
            ej_daemon_config_fini(&d.cfg);
            return EJ_EXIT_USAGE;
        }
    }

    /* Signals are taken through a signalfd: block them before any thread
     * exists so every thread inherits the mask. */
    sigset_t mask;
    sigemptyset(&mask);
    sigaddset(&mask, SIGTERM);
    sigaddset(&mask, SIGINT);
    sigaddset(&mask, SIGHUP);
    sigprocmask(SIG_BLOCK, &mask, NULL);
    signal(SIGPIPE, SIG_IGN);
    int sfd = signalfd(-1, &mask, SFD_CLOEXEC);
    if (sfd < 0) {
        rc = ejcli_fail(CMD, "signalfd: %s", strerror(errno));
        goto out_cfg;
    }

    /* The flag overrides the file. */
    const char *mlisten = metrics_listen != NULL ? metrics_listen : d.cfg.metrics.listen;
    if (mlisten != NULL) {
        char merr[512] = "";
        int me = ejd_metrics_start(mlisten, d.cfg.job_count, merr, sizeof(merr));
        if (me == 0 && (d.metrics_now = strdup(mlisten)) == NULL) {
            me = EJ_ENOMEM;
            snprintf(merr, sizeof merr, "out of memory");
        }
        if (me != 0) {
            fprintf(stderr, "ejob %s: %s: %s\n", CMD,
                    metrics_listen != NULL ? "--metrics-listen" : "metrics.listen", merr);
            rc = me == EJ_EINVAL ? EJ_EXIT_USAGE : EJ_EXIT_FAILED;
            goto out_sfd;
        }
    }
    const char *ns = ns_override != NULL ? ns_override : d.cfg.reg_center.name_space;
    if (servers[0] == '\0' && !d.cfg.reg_center.embedded)
        snprintf(servers, sizeof(servers), "%s", d.cfg.reg_center.server_lists);
    if (servers[0] == '\0') {
        char *dir = ejcli_state_dir(state_dir);
        char err[512] = "";
        ejd_notify_status("starting the embedded registry (state directory %s)",
                          dir != NULL ? dir : "?");
        int e = dir != NULL ? ejcli_embedded_join(dir, &d.embedded, err, sizeof(err)) : EJ_ENOMEM;
        if (e != 0) {
            EJ_LOG(EJ_LOG_ERROR, "daemon", e, "embedded registry: %s",
                   err[0] ? err : ej_strerror(e));
            free(dir);
            rc = EJ_EXIT_FAILED;
            goto out_sfd;
        }
        snprintf(servers, sizeof(servers), "%s", ejcli_embedded_address(d.embedded));
        EJ_LOG(EJ_LOG_INFO, "daemon", 0, "embedded registry %s (state directory %s)", servers, dir);
        free(dir);
    }

    const struct ej_reg_center_config *rcfg = &d.cfg.reg_center;
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
    };
    ejd_notify_status("connecting to ZooKeeper at %s", servers);
    int e = ej_registry_create(&d.reg, &opts);
    if (e != 0) {
        EJ_LOG(EJ_LOG_ERROR, "daemon", e, "cannot connect to ZooKeeper at %s: %s", servers,
               ej_registry_errmsg(NULL));
        rc = EJ_EXIT_FAILED;
        goto out_embedded;
    }
    char err[512] = "";
    char *trace_dir = ejcli_state_dir(state_dir);
    e = trace_dir != NULL ? ejd_init(&d.cfg.tracing, file, trace_dir, d.drain_ms, err, sizeof(err))
                          : EJ_ENOMEM;
    free(trace_dir);
    if (e != 0) {
        EJ_LOG(EJ_LOG_ERROR, "daemon", e, "%s", err[0] ? err : ej_strerror(e));
        rc = EJ_EXIT_FAILED;
        goto out_reg;
    }
    ejd_notify_status("registering %zu job(s)", d.cfg.job_count);
    if (start_all(&d) != 0) {
        rc = EJ_EXIT_FAILED;
        goto out_jobs;
    }
    EJ_LOG(EJ_LOG_INFO, "daemon", 0,
           "running %zu job(s) of %s; registry %s/%s; pid %d (SIGTERM stops, SIGHUP reloads)",
           d.njobs, file, servers, ns, (int)getpid());
    ejd_notify_ready(d.njobs, file, NULL);

    for (;;) {
        struct pollfd pfd[2] = {{.fd = sfd, .events = POLLIN},
                                {.fd = d.reload ? d.reload->efd : -1, .events = POLLIN}};
        if (poll(pfd, 2, -1) < 0) {
            if (errno == EINTR)
                continue;
            EJ_LOG(EJ_LOG_ERROR, "daemon", -errno, "poll failed; stopping");
            break;
        }
        if (pfd[1].revents & POLLIN) {
            char outcome[sizeof d.reload->outcome];
            snprintf(outcome, sizeof outcome, "%s", d.reload->outcome);
            reload_finish(d.reload);
            d.reload = NULL;
            ejd_notify_ready(d.njobs, file, outcome);
            if (d.reload_again) {
                d.reload_again = false;
                begin_reload(&d);
            }
        }
        if (!(pfd[0].revents & POLLIN))
            continue;
        struct signalfd_siginfo si;
        ssize_t n = read(sfd, &si, sizeof(si));
        if (n < 0 && (errno == EINTR || errno == EAGAIN))
            continue;
        if (n != (ssize_t)sizeof(si)) {
            EJ_LOG(EJ_LOG_ERROR, "daemon", -errno, "reading signals failed; stopping");
            break;
        }
        if (si.ssi_signo == SIGHUP) {
            if (d.reload != NULL) {
                EJ_LOG(EJ_LOG_INFO, "daemon", 0,
                       "SIGHUP: a reload of %s is still going on; reloading again when it ends",
                       d.file);
                d.reload_again = true;
            } else {
                begin_reload(&d);
            }
            continue;
        }
        pause_all(&d);
        ejd_notify_stopping(si.ssi_signo == SIGTERM ? "SIGTERM" : "SIGINT", d.drain_ms);
        EJ_LOG(EJ_LOG_INFO, "daemon", 0,
               "%s: stopping; no job fires from now on; running items may take up to %d ms",
               si.ssi_signo == SIGTERM ? "SIGTERM" : "SIGINT", d.drain_ms);
        break;
    }
    rc = EJ_EXIT_OK;
out_jobs:
    /* A reload being applied stops at its next step (a removed job it
     * stops drains within the same bound as the others); one still being
     * read is abandoned. */
    reload_finish(d.reload);
    d.reload = NULL;
    stop_all(&d);
    ejd_fini();
out_reg:
    ejd_metrics_stop();
    ej_registry_destroy(d.reg);
out_embedded:
    ejcli_embedded_leave(d.embedded, EMBEDDED_STOP_WAIT_MS);
out_sfd:
    ejd_metrics_stop();
    close(sfd);
out_cfg:
    if (secret != NULL)
        memset(secret, 0, strlen(secret));
    free(secret);
    free(d.metrics_now);
    ej_daemon_config_fini(&d.cfg);
    pthread_mutex_destroy(&d.jobs_mu);
    if (rc == EJ_EXIT_OK)
        EJ_LOG(EJ_LOG_INFO, "daemon", 0, "stopped");
    return rc;
}

EJ_CLI_COMMAND(run, CMD, "run the SCRIPT and HTTP jobs of a YAML file (the daemon)", usage,
               run_daemon)
