/* `ejob run` under systemd: sd_notify(3) messages and $STATE_DIRECTORY. */
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <systemd/sd-daemon.h>

#include "ejob/log.h"
#include "cli/daemon_notify.h"

/* Longest STATUS= text sent; systemd shows one line of it anyway. */
#define STATUS_MAX 512

static bool under_systemd(void)
{
    const char *s = getenv("NOTIFY_SOCKET");
    return s != NULL && s[0] != '\0';
}

/* Send state (newline-separated assignments, or "") plus a STATUS= line.
 * A newline in the status would start an assignment of its own: each
 * becomes a space. */
static void send_with_status(const char *state, const char *fmt, va_list ap)
{
    char status[STATUS_MAX];
    vsnprintf(status, sizeof status, fmt, ap);
    for (char *p = status; *p != '\0'; p++)
        if (*p == '\n' || *p == '\r')
            *p = ' ';
    /* unset_environment 0: later messages need NOTIFY_SOCKET too. */
    int rc = sd_notifyf(0, "%s%sSTATUS=%s", state, state[0] != '\0' ? "\n" : "", status);
    if (rc < 0)
        EJ_LOG(EJ_LOG_DEBUG, "daemon", rc, "sd_notify failed: %s%sSTATUS=%s", state,
               state[0] != '\0' ? " " : "", status);
}

static void notify(const char *state, const char *fmt, ...) EJ_PRINTF(2, 3);
static void notify(const char *state, const char *fmt, ...)
{
    if (!under_systemd())
        return;
    va_list ap;
    va_start(ap, fmt);
    send_with_status(state, fmt, ap);
    va_end(ap);
}

void ejd_notify_status(const char *fmt, ...)
{
    if (!under_systemd())
        return;
    va_list ap;
    va_start(ap, fmt);
    send_with_status("", fmt, ap);
    va_end(ap);
}

void ejd_notify_ready(size_t njobs, const char *file, const char *outcome)
{
    if (outcome != NULL)
        notify("READY=1", "running %zu job(s) of %s; %s", njobs, file, outcome);
    else
        notify("READY=1", "running %zu job(s) of %s", njobs, file);
}

void ejd_notify_reloading(const char *file)
{
    if (!under_systemd())
        return;
    /* With the time the reload began, systemd tells this reload cycle from
     * an earlier one (sd_notify(3), MONOTONIC_USEC). */
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    char state[96];
    snprintf(state, sizeof state, "RELOADING=1\nMONOTONIC_USEC=%llu",
             (unsigned long long)ts.tv_sec * 1000000ULL + (unsigned long long)ts.tv_nsec / 1000);
    notify(state, "reloading %s", file);
}

void ejd_notify_stopping(const char *signame, int drain_ms)
{
    notify("STOPPING=1", "%s: stopping; running items may take up to %d ms", signame, drain_ms);
}

const char *ejd_systemd_state_dir(void)
{
    static char dir[4096];
    const char *env = getenv("STATE_DIRECTORY");
    if (env == NULL || env[0] == '\0')
        return NULL;
    /* StateDirectory=a b gives "/var/lib/a:/var/lib/b"; ours is the first. */
    size_t n = strcspn(env, ":");
    if (n == 0 || n >= sizeof dir) {
        EJ_LOG(EJ_LOG_WARN, "daemon", 0, "STATE_DIRECTORY ignored: its first entry is %s",
               n == 0 ? "empty" : "too long");
        return NULL;
    }
    memcpy(dir, env, n);
    dir[n] = '\0';
    return dir;
}
