/* process_* metrics, named and defined as the Prometheus client libraries
 * define them, read from /proc/self at every render. */
#include <dirent.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>
#include <sys/resource.h>

#include "ejob/error.h"
#include "metrics/internal.h"

enum {
    P_CPU,
    P_RSS,
    P_VSIZE,
    P_OPEN_FDS,
    P_MAX_FDS,
    P_START,
    P_THREADS,
    P_COUNT,
};

static const struct ej_metric_desc process_metrics[P_COUNT] = {
    [P_CPU] = {"process_cpu_seconds_total",
               EJ_METRIC_COUNTER,
               "Total user and system CPU time spent in seconds.",
               {NULL},
               NULL,
               0},
    [P_RSS] = {"process_resident_memory_bytes",
               EJ_METRIC_GAUGE,
               "Resident memory size in bytes.",
               {NULL},
               NULL,
               0},
    [P_VSIZE] = {"process_virtual_memory_bytes",
                 EJ_METRIC_GAUGE,
                 "Virtual memory size in bytes.",
                 {NULL},
                 NULL,
                 0},
    [P_OPEN_FDS] =
        {"process_open_fds", EJ_METRIC_GAUGE, "Number of open file descriptors.", {NULL}, NULL, 0},
    [P_MAX_FDS] = {"process_max_fds",
                   EJ_METRIC_GAUGE,
                   "Maximum number of open file descriptors.",
                   {NULL},
                   NULL,
                   0},
    [P_START] = {"process_start_time_seconds",
                 EJ_METRIC_GAUGE,
                 "Start time of the process since unix epoch in seconds.",
                 {NULL},
                 NULL,
                 0},
    [P_THREADS] = {"process_threads",
                   EJ_METRIC_GAUGE,
                   "Number of OS threads in the process.",
                   {NULL},
                   NULL,
                   0},
};

struct process_collector {
    ej_metric *f[P_COUNT];
};

int ej__metrics_parse_proc_stat(const char *text, long ticks, struct ej__proc_stat *out)
{
    /* The command name (field 2) is in parentheses and may itself hold
     * spaces and ')': the fields after it start after the last ')'. */
    const char *p = text != NULL ? strrchr(text, ')') : NULL;
    if (p == NULL || ticks <= 0)
        return EJ_EPARSE;
    p++;
    /* Fields 3.. ; we need 14 utime, 15 stime, 20 num_threads,
     * 22 starttime, 23 vsize, 24 rss. */
    unsigned long long f[25] = {0};
    int field = 3;
    while (field <= 24) {
        while (*p == ' ')
            p++;
        if (*p == '\0')
            return EJ_EPARSE;
        if (field == 3) { /* the state letter */
            p++;
        } else {
            char *end;
            if (*p == '-') /* a few fields are signed; none we read is */
                p++;
            f[field] = strtoull(p, &end, 10);
            if (end == p)
                return EJ_EPARSE;
            p = end;
        }
        if (*p != ' ' && *p != '\0' && *p != '\n')
            return EJ_EPARSE;
        field++;
    }
    out->cpu_seconds = (double)(f[14] + f[15]) / (double)ticks;
    out->threads = (double)f[20];
    out->start_seconds = (double)f[22] / (double)ticks;
    out->vsize_bytes = (double)f[23];
    out->rss_pages = (double)f[24];
    return 0;
}

static char *read_small_file(const char *path)
{
    int fd = open(path, O_RDONLY | O_CLOEXEC);
    if (fd < 0)
        return NULL;
    char *buf = malloc(4096);
    ssize_t n = buf != NULL ? read(fd, buf, 4095) : -1;
    close(fd);
    if (n <= 0) {
        free(buf);
        return NULL;
    }
    buf[n] = '\0';
    return buf;
}

static double boot_time_seconds(void)
{
    FILE *f = fopen("/proc/stat", "re");
    if (f == NULL)
        return 0;
    char line[256];
    double btime = 0;
    while (fgets(line, sizeof line, f) != NULL)
        if (strncmp(line, "btime ", 6) == 0) {
            btime = strtod(line + 6, NULL);
            break;
        }
    fclose(f);
    return btime;
}

static double open_fds(void)
{
    DIR *d = opendir("/proc/self/fd");
    if (d == NULL)
        return 0;
    double n = 0;
    struct dirent *e;
    while ((e = readdir(d)) != NULL)
        if (e->d_name[0] != '.')
            n++;
    closedir(d);
    return n - 1; /* the directory stream's own descriptor */
}

static void collect_process(ej_metrics *m, void *user)
{
    (void)m;
    struct process_collector *c = user;
    struct ej__proc_stat st;
    char *text = read_small_file("/proc/self/stat");
    if (text != NULL && ej__metrics_parse_proc_stat(text, sysconf(_SC_CLK_TCK), &st) == 0) {
        ej_metric_set(ej_metric_get0(c->f[P_CPU]), st.cpu_seconds);
        ej_metric_set(ej_metric_get0(c->f[P_RSS]), st.rss_pages * (double)sysconf(_SC_PAGESIZE));
        ej_metric_set(ej_metric_get0(c->f[P_VSIZE]), st.vsize_bytes);
        ej_metric_set(ej_metric_get0(c->f[P_THREADS]), st.threads);
        ej_metric_set(ej_metric_get0(c->f[P_START]), boot_time_seconds() + st.start_seconds);
    }
    free(text);
    ej_metric_set(ej_metric_get0(c->f[P_OPEN_FDS]), open_fds());
    struct rlimit rl;
    if (getrlimit(RLIMIT_NOFILE, &rl) == 0)
        ej_metric_set(ej_metric_get0(c->f[P_MAX_FDS]),
                      rl.rlim_cur == RLIM_INFINITY ? -1 : (double)rl.rlim_cur);
}

int ej_metrics_add_process_metrics(ej_metrics *m)
{
    if (m == NULL)
        return EJ_EINVAL;
    struct process_collector *c = calloc(1, sizeof *c);
    if (c == NULL)
        return EJ_ENOMEM;
    int rc = ej_metrics_register_table(m, process_metrics, P_COUNT, c->f, NULL, 0);
    if (rc == 0)
        rc = ej__metrics_add_collector(m, collect_process, c, true);
    if (rc != 0)
        free(c);
    return rc;
}
