/*
 * Script jobs: run the command line once per item, with the item's context
 * JSON as the last argument, in a new process group, capturing its output.
 */
#include <errno.h>
#include <fcntl.h>
#include <poll.h>
#include <signal.h>
#include <spawn.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/syscall.h>
#include <sys/types.h>
#include <sys/wait.h>
#include <unistd.h>

#include "common/util.h"
#include "ejob/error.h"
#include "ejob/event.h"
#include "ejob/log.h"
#include "exec/exec_impl.h"
#include "exec/internal.h"

#define MOD "exec"
#define CANCEL_TICK_MS 100
#define FAILURE_OUTPUT_TAIL 2000

extern char **environ;

/* ------------------------------------------------------------ splitting */

int ej__exec_split_command(const char *line, char ***argv_out, int *argc_out, char *err,
                           size_t errlen)
{
    /* One tokenizer for validation and execution: src/common/cmdline.c. */
    return ej__split_command_line(line, argv_out, argc_out, err, errlen);
}

/* ------------------------------------------------------------ capturing */

struct capture {
    char *data;
    size_t len, cap, limit;
    size_t sent; /* bytes handed to the live output */
    int stream;  /* EJ_OUTPUT_STDOUT or EJ_OUTPUT_STDERR */
    bool truncated;
    bool failed;
};

/* Hands what the item wrote since the last call to opts->output (only
 * bytes kept within the cap: the live pieces are the output's first bytes). */
static void send_live(const struct ej__exec_opts *opts, struct capture *c)
{
    if (opts == NULL || opts->output == NULL || c->len <= c->sent)
        return;
    opts->output(opts->output_arg, c->stream, (int64_t)c->sent, c->data + c->sent,
                 c->len - c->sent);
    c->sent = c->len;
}

static void capture_add(struct capture *c, const char *buf, size_t n)
{
    size_t room = c->limit > c->len ? c->limit - c->len : 0;
    if (n > room) {
        c->truncated = true;
        n = room;
    }
    if (n == 0 || c->failed)
        return;
    if (c->len + n + 1 > c->cap) {
        size_t cap = c->cap ? c->cap : 4096;
        while (cap < c->len + n + 1)
            cap *= 2;
        if (cap > c->limit + 1)
            cap = c->limit + 1;
        char *d = realloc(c->data, cap);
        if (d == NULL) {
            c->failed = true;
            c->truncated = true;
            return;
        }
        c->data = d;
        c->cap = cap;
    }
    memcpy(c->data + c->len, buf, n);
    c->len += n;
    c->data[c->len] = '\0';
}

/* Reads what the pipe has now. Returns false at EOF or error. */
static bool drain_pipe(int fd, struct capture *c)
{
    char buf[16384];
    for (;;) {
        ssize_t n = read(fd, buf, sizeof buf);
        if (n > 0) {
            capture_add(c, buf, (size_t)n);
            continue;
        }
        if (n == 0)
            return false;
        if (errno == EINTR)
            continue;
        return errno == EAGAIN || errno == EWOULDBLOCK;
    }
}

/* -------------------------------------------------------------- running */

/* True when the "NAME=value" entries a and b have the same NAME. */
static bool same_name(const char *a, const char *b)
{
    const char *eq = strchr(a, '=');
    size_t nl = eq ? (size_t)(eq - a) : strlen(a);
    return strncmp(a, b, nl) == 0 && (b[nl] == '=' || b[nl] == '\0');
}

/* The daemon's environment, the job's entries (extra) and then last, each
 * replacing an earlier entry of the same name. */
static char **build_env(const char *const *extra, const char *last)
{
    size_t n = 0, m = 0;
    while (environ && environ[n])
        n++;
    while (extra && extra[m])
        m++;
    char **env = malloc((n + m + 2) * sizeof *env);
    if (env == NULL)
        return NULL;
    size_t k = 0;
    for (size_t i = 0; i < n; i++) {
        bool overridden = same_name(environ[i], last);
        for (size_t j = 0; j < m && !overridden; j++)
            overridden = same_name(environ[i], extra[j]);
        if (!overridden)
            env[k++] = environ[i];
    }
    for (size_t j = 0; j < m; j++)
        if (!same_name(extra[j], last))
            env[k++] = (char *)extra[j];
    env[k++] = (char *)last;
    env[k] = NULL;
    return env;
}

/* Appends the tail of one stream to the failure cause (the text only: a
 * NUL in the output ends it there). */
static void append_tail(ej__exec_result *res, const char *name, const struct capture *c)
{
    if (res->failure_cause == NULL || c->len == 0)
        return;
    size_t start = c->len > FAILURE_OUTPUT_TAIL ? c->len - FAILURE_OUTPUT_TAIL : 0;
    char *m = ej__asprintf("%s\n--- %s%s ---\n%s", res->failure_cause, name,
                           start ? " (last 2000 bytes)" : "", c->data + start);
    if (m) {
        free(res->failure_cause);
        res->failure_cause = m;
    }
}

void ej__exec_run_script(const struct ej_script_job *job, const struct ej_job_config *cfg,
                         const ej_shard_context *ctx, const struct ej__exec_opts *opts,
                         ej__exec_result *res)
{
    res->exit_code = -1;
    const char *command_line = cfg ? cfg->script_command_line : NULL;
    if (command_line == NULL || command_line[0] == '\0') {
        ej__exec_fail(res, EJ_ECONFIG,
                      "Cannot find script command line for job '%s', job is not executed.",
                      ctx->job_name ? ctx->job_name : "");
        return;
    }
    char **argv = NULL;
    int argc = 0;
    char msg[512];
    int rc = ej__exec_split_command(command_line, &argv, &argc, msg, sizeof msg);
    if (rc != 0) {
        ej__exec_fail(res, rc, "Execute script failure: scriptCommandLine: %s",
                      rc == EJ_ENOMEM ? "out of memory" : msg);
        return;
    }
    char *json = ej__exec_context_json(ctx);
    if (json == NULL) {
        free(argv);
        ej__exec_fail(res, EJ_ENOMEM, "Execute script failure: out of memory");
        return;
    }
    argv[argc] = json;
    argv[argc + 1] = NULL;

    /* stdout and stderr are captured apart, each up to the cap. */
    size_t limit = job->output_cap ? job->output_cap : EJ_JOB_OUTPUT_CAP_DEFAULT;
    struct capture cap = {.limit = limit, .stream = EJ_OUTPUT_STDOUT},
                   ecap = {.limit = limit, .stream = EJ_OUTPUT_STDERR};
    int pipefd[2] = {-1, -1}, errfd[2] = {-1, -1};
    int devnull = -1, pidfd = -1;
    char **env = NULL;
    posix_spawn_file_actions_t fa;
    posix_spawnattr_t attr;
    bool fa_init = false, attr_init = false;
    pid_t pid = -1;
    struct ej__supervisor sup = {.pid = -1, .fd = -1, .sup = -1, .leader = -1};
    int64_t grace = 0;

    if (pipe2(pipefd, O_CLOEXEC) != 0 || pipe2(errfd, O_CLOEXEC) != 0 ||
        (devnull = open("/dev/null", O_RDONLY | O_CLOEXEC)) < 0) {
        ej__exec_fail(res, -errno, "Execute script failure: cannot create a pipe: %s",
                      strerror(errno));
        goto out;
    }
    /* Always set, so that no token inherited from the daemon's own
     * environment reaches the item. */
    char token_env[64];
    snprintf(token_env, sizeof token_env, EJ_FENCING_TOKEN_ENV "=%lld",
             (long long)ctx->fencing_token);
    env = build_env(job->env, token_env);
    if (env == NULL) {
        ej__exec_fail(res, EJ_ENOMEM, "Execute script failure: out of memory");
        goto out;
    }
    posix_spawn_file_actions_init(&fa);
    fa_init = true;
    posix_spawn_file_actions_adddup2(&fa, devnull, 0);
    posix_spawn_file_actions_adddup2(&fa, pipefd[1], 1);
    posix_spawn_file_actions_adddup2(&fa, errfd[1], 2);
    /* Descriptors other libraries opened without O_CLOEXEC stay ours. */
    posix_spawn_file_actions_addclosefrom_np(&fa, 3);
    posix_spawnattr_init(&attr);
    attr_init = true;
    sigset_t none, all;
    sigemptyset(&none);
    sigfillset(&all);
    sigdelset(&all, SIGKILL);
    sigdelset(&all, SIGSTOP);
    posix_spawnattr_setsigmask(&attr, &none);
    posix_spawnattr_setsigdefault(&attr, &all);
    posix_spawnattr_setpgroup(&attr, 0);
    posix_spawnattr_setflags(&attr, POSIX_SPAWN_SETPGROUP | POSIX_SPAWN_SETSIGMASK |
                                        POSIX_SPAWN_SETSIGDEF);
    /* The fire's bound, else the configuration's timeoutGraceSeconds. */
    grace = job->kill_grace_ms > 0 ? job->kill_grace_ms : ej_job_config_grace_ms(cfg);
    const int stdfds[3] = {devnull, pipefd[1], errfd[1]};
    rc = ej__supervise_spawn(&sup, &pid, argv[0], &fa, &attr, argv, env, stdfds, grace);
    if (rc != 0) {
        pid = -1;
        ej__exec_fail(res, -rc, "Execute script failure: cannot run '%s': %s", argv[0],
                      strerror(rc));
        goto out;
    }
    close(pipefd[1]);
    pipefd[1] = -1;
    close(errfd[1]);
    errfd[1] = -1;
    close(devnull);
    devnull = -1;
    fcntl(pipefd[0], F_SETFL, fcntl(pipefd[0], F_GETFL) | O_NONBLOCK);
    fcntl(errfd[0], F_SETFL, fcntl(errfd[0], F_GETFL) | O_NONBLOCK);
    pidfd = ej__supervise_exit_fd(&sup, pid);

    int64_t start = ej__mono_ms();
    int64_t deadline = job->timeout_ms > 0 ? start + job->timeout_ms : 0;
    int64_t kill_at = 0;
    /* Output waits at most EJ__LIVE_FLUSH_MS for the live readers: the
     * first line at once, then a piece per stream at most that often. */
    bool live = opts != NULL && opts->output != NULL;
    int64_t next_live = start;
    enum { RUNNING, TERMED, KILLED } kstate = RUNNING;
    bool pipe_open = true, err_open = true;
    int status = 0, exited;
    for (;;) {
        exited = ej__supervise_check(&sup, pid, &status);
        if (exited == EJ__SPAWNER_LOST) {
            /* Nothing would end the group if this process died now, and
             * its end would go unseen: end it here, and only then let the
             * item's next run start. */
            EJ_LOG(EJ_LOG_WARN, MOD, EJ_EJOBFAILED,
                   "the process that starts script items died while '%s' (pid %d) ran: "
                   "ending its process group",
                   argv[0], (int)pid);
            pidfd = ej__supervise_exit_fd(&sup, pid);
            if (kstate == RUNNING) {
                kill(-sup.pid, SIGTERM);
                kstate = TERMED;
                kill_at = ej__mono_ms() + grace;
            }
            exited = 0;
        }
        if (exited != 0)
            break;
        int64_t now = ej__mono_ms();
        if (kstate == RUNNING) {
            bool timeout = deadline && now >= deadline;
            bool cancel = !timeout && ej_shard_context_is_cancelled(ctx);
            if (timeout || cancel) {
                res->timed_out = timeout;
                res->cancelled = cancel;
                kill(-sup.pid, SIGTERM);
                kstate = TERMED;
                kill_at = now + grace;
            }
        } else if (kstate == TERMED && now >= kill_at) {
            kill(-sup.pid, SIGKILL);
            kstate = KILLED;
        }
        int64_t wait = -1;
        if (live && now >= next_live && (cap.len > cap.sent || ecap.len > ecap.sent)) {
            send_live(opts, &cap);
            send_live(opts, &ecap);
            next_live = now + EJ__LIVE_FLUSH_MS;
        }
        if (live && (cap.len > cap.sent || ecap.len > ecap.sent))
            wait = next_live > now ? next_live - now : 0;
        if (kstate == RUNNING && deadline && (wait < 0 || deadline - now < wait))
            wait = deadline - now;
        if (kstate == TERMED && (wait < 0 || kill_at - now < wait))
            wait = kill_at - now;
        if (kstate == RUNNING && ej__exec_cancellable(ctx) && (wait < 0 || wait > CANCEL_TICK_MS))
            wait = CANCEL_TICK_MS;
        if (pidfd < 0 && (wait < 0 || wait > CANCEL_TICK_MS))
            wait = CANCEL_TICK_MS / 2; /* no pidfd: look for the exit now and then */
        if (wait < 0 && kstate == KILLED)
            wait = CANCEL_TICK_MS;
        struct pollfd pfd[3];
        int np = 0, out_i = -1, err_i = -1;
        if (pipe_open) {
            out_i = np;
            pfd[np++] = (struct pollfd){.fd = pipefd[0], .events = POLLIN};
        }
        if (err_open) {
            err_i = np;
            pfd[np++] = (struct pollfd){.fd = errfd[0], .events = POLLIN};
        }
        if (pidfd >= 0)
            pfd[np++] = (struct pollfd){.fd = pidfd, .events = POLLIN};
        int pr = poll(pfd, (nfds_t)np, wait < 0 ? -1 : (int)(wait > 0 ? wait : 0));
        if (pr < 0 && errno != EINTR)
            ej__sleep_ms(10);
        /* EOF on a pipe: every writer of it is gone. */
        if (out_i >= 0 && pr > 0 && pfd[out_i].revents && !drain_pipe(pipefd[0], &cap))
            pipe_open = false;
        if (err_i >= 0 && pr > 0 && pfd[err_i].revents && !drain_pipe(errfd[0], &ecap))
            err_open = false;
    }
    /* The child has exited. Take what it wrote; a background process that
     * still holds the pipe does not keep us waiting. */
    if (pipe_open)
        drain_pipe(pipefd[0], &cap);
    if (err_open)
        drain_pipe(errfd[0], &ecap);
    if (kstate != RUNNING || sup.lost)
        kill(-sup.pid, SIGKILL); /* stragglers in the group; the pgid is still ours */
    bool have_status = exited > 0;
    pid = -1;

    const char *prog = argv[0];
    if (res->timed_out) {
        ej__exec_fail(res, EJ_ETIMEDOUT,
                      "Execute script failure: '%s' timed out after %lld ms; process group "
                      "killed",
                      prog, (long long)job->timeout_ms);
    } else if (res->cancelled) {
        ej__exec_fail(res, EJ_ESTOPPED,
                      "Execute script failure: '%s' cancelled; process group killed", prog);
    }
    if (have_status && WIFEXITED(status)) {
        res->exit_code = WEXITSTATUS(status);
        if (res->exit_code != 0 && res->rc == 0)
            ej__exec_fail(res, EJ_EJOBFAILED, "Execute script failure: '%s' exited with code %d",
                          prog, res->exit_code);
    } else if (have_status && WIFSIGNALED(status)) {
        res->term_signal = WTERMSIG(status);
        if (res->rc == 0)
            ej__exec_fail(res, EJ_EJOBFAILED,
                          "Execute script failure: '%s' killed by signal %d (%s)", prog,
                          res->term_signal, strsignal(res->term_signal));
    } else if (res->rc == 0 && sup.lost) {
        ej__exec_fail(res, EJ_EJOBFAILED,
                      "Execute script failure: '%s' ended with its status unknown: the process "
                      "that starts script items died while it ran, and its process group was "
                      "ended",
                      prog);
    } else if (res->rc == 0) {
        ej__exec_fail(res, EJ_EJOBFAILED,
                      "Execute script failure: '%s' exit status unknown (is SIGCHLD ignored?)",
                      prog);
    }
    if (res->rc != 0) {
        append_tail(res, "stdout", &cap);
        append_tail(res, "stderr", &ecap);
    }

out:
    if (pid > 0) {
        int st;
        kill(-sup.pid, SIGKILL);
        while (ej__supervise_check(&sup, pid, &st) == 0)
            ej__sleep_ms(1);
    }
    ej__supervise_end(&sup);
    if (pipefd[0] >= 0)
        close(pipefd[0]);
    if (pipefd[1] >= 0)
        close(pipefd[1]);
    for (int i = 0; i < 2; i++)
        if (errfd[i] >= 0)
            close(errfd[i]);
    if (devnull >= 0)
        close(devnull);
    if (fa_init)
        posix_spawn_file_actions_destroy(&fa);
    if (attr_init)
        posix_spawnattr_destroy(&attr);
    free(env);
    free(json);
    free(argv);
    res->output = cap.data;
    res->output_len = cap.len;
    res->output_truncated = cap.truncated;
    res->err_output = ecap.data;
    res->err_output_len = ecap.len;
    res->err_output_truncated = ecap.truncated;
}
