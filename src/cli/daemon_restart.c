/* Restart on request of a job an operator shut down (daemon_restart.h). */
#include <errno.h>
#include <pthread.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <sys/eventfd.h>
#include <unistd.h>

#include "common/check.h"
#include "cli/daemon_restart.h"
#include "ejob/console.h"
#include "ejob/error.h"
#include "ejob/log.h"

static ej__mutex mu = EJ__MUTEX_INITIALIZER;
static ej_registry *registry; /* under mu */
static int efd = -1;          /* under mu */
static char **asked;          /* job names, NULL terminated; under mu */
static size_t nasked;

/* One armed watch on a marker; freed when its event does not arm another. */
struct marker_watch {
    char *job;
    char *path;
};

int ejd_restart_init(ej_registry *reg)
{
    int fd = eventfd(0, EFD_CLOEXEC | EFD_NONBLOCK);
    if (fd < 0)
        return -errno;
    ej__mutex_lock(&mu);
    registry = reg;
    efd = fd;
    ej__mutex_unlock(&mu);
    return 0;
}

int ejd_restart_fd(void)
{
    ej__mutex_lock(&mu);
    int fd = efd;
    ej__mutex_unlock(&mu);
    return fd;
}

void ejd_restart_ack(void)
{
    uint64_t n;
    int fd = ejd_restart_fd();
    if (fd >= 0 && read(fd, &n, sizeof n) < 0 && errno != EAGAIN)
        EJ_LOG(EJ_LOG_WARN, "daemon", -errno, "restart requests: read failed");
}

char **ejd_restart_take(void)
{
    ej__mutex_lock(&mu);
    char **names = asked;
    asked = NULL;
    nasked = 0;
    ej__mutex_unlock(&mu);
    return names;
}

void ejd_restart_fini(void)
{
    ej__mutex_lock(&mu);
    if (efd >= 0)
        close(efd);
    efd = -1;
    registry = NULL;
    ej_registry_free_names(asked);
    asked = NULL;
    nasked = 0;
    ej__mutex_unlock(&mu);
}

/* Queue job for a restart and wake the main loop (once per job). */
static void ask(const char *job)
{
    ej__mutex_lock(&mu);
    bool queued = false;
    for (size_t i = 0; i < nasked && !queued; i++)
        queued = strcmp(asked[i], job) == 0;
    char **grown = queued || efd < 0 ? NULL : realloc(asked, (nasked + 2) * sizeof(*grown));
    if (grown != NULL) {
        asked = grown;
        asked[nasked] = strdup(job);
        if (asked[nasked] != NULL)
            nasked++;
        asked[nasked] = NULL;
        uint64_t one = 1;
        if (write(efd, &one, sizeof one) < 0)
            EJ_LOG(EJ_LOG_WARN, "daemon", -errno, "job %s: cannot wake the main loop", job);
    } else if (!queued && efd >= 0) {
        EJ_LOG(EJ_LOG_ERROR, "daemon", EJ_ENOMEM, "job %s: restart request dropped", job);
    }
    ej__mutex_unlock(&mu);
}

static void watch_free(struct marker_watch *w)
{
    free(w->job);
    free(w->path);
    free(w);
}

static void on_marker(ej_registry *reg, ej_reg_watch_event event, const char *path, void *user);

/* Read the marker and watch it again; queue the job when it says RESTART.
 * The watch stays armed until the marker goes with the old job. */
static void arm(ej_registry *reg, struct marker_watch *w)
{
    char *data = NULL;
    int rc = ej_registry_get_watch(reg, w->path, on_marker, w, &data, NULL, NULL);
    if (rc != 0) {
        if (rc != EJ_ENONODE && rc != EJ_ECLOSED)
            EJ_LOG(EJ_LOG_WARN, "daemon", rc, "job %s: cannot watch %s for a restart request: %s",
                   w->job, w->path, ej_registry_errmsg(reg));
        watch_free(w);
        return;
    }
    if (strcmp(data, EJ_LAYOUT_EJOB_RESTART) == 0) {
        EJ_LOG(EJ_LOG_INFO, "daemon", 0, "job %s: restart asked (%s)", w->job, w->path);
        ask(w->job);
    }
    free(data);
}

static void on_marker(ej_registry *reg, ej_reg_watch_event event, const char *path, void *user)
{
    (void)path;
    struct marker_watch *w = user;
    if (event == EJ_REG_WATCH_CHANGED)
        arm(reg, w);
    else
        watch_free(w); /* deleted with the old job, or the session went */
}

void ejd_restart_on_stopped(ej_job *job, bool by_operator, void *user)
{
    (void)user;
    ej__mutex_lock(&mu);
    ej_registry *reg = registry;
    ej__mutex_unlock(&mu);
    if (!by_operator || reg == NULL)
        return;
    struct marker_watch *w = calloc(1, sizeof *w);
    if (w != NULL) {
        w->job = strdup(ej_job_name(job));
        w->path = ej_layout_marker_path_dup(ej_job_name(job), ej_job_instance_id(job));
    }
    if (w == NULL || w->job == NULL || w->path == NULL) {
        if (w != NULL)
            watch_free(w);
        EJ_LOG(EJ_LOG_ERROR, "daemon", EJ_ENOMEM, "job %s: shut down; no restart request will "
               "be seen (out of memory); SIGHUP starts it again", ej_job_name(job));
        return;
    }
    /* set, never create: a marker gone with the session stays gone. */
    int rc = ej_registry_set(reg, w->path, EJ_LAYOUT_EJOB_SHUTDOWN,
                             strlen(EJ_LAYOUT_EJOB_SHUTDOWN), -1, NULL);
    if (rc != 0) {
        EJ_LOG(EJ_LOG_WARN, "daemon", rc, "job %s: shut down; cannot mark %s: %s; SIGHUP starts "
               "it again", w->job, w->path, ej_registry_errmsg(reg));
        watch_free(w);
        return;
    }
    EJ_LOG(EJ_LOG_WARN, "daemon", 0, "job %s: shut down by an operator; `ejob start %s "
           "--instance %s`, the console's Restart or SIGHUP starts it again", w->job, w->job,
           ej_job_instance_id(job));
    arm(reg, w);
}
