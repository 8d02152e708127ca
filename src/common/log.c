#include <stdarg.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <pthread.h>
#include <syslog.h>
#include <time.h>
#include <unistd.h>
#include <sys/stat.h>

#include "common/check.h"
#include "ejob/error.h"
#include "ejob/log.h"
#include "common/util.h"

static atomic_int log_level = -1; /* -1: not yet read from the environment */
static atomic_int log_format = EJ_LOG_TEXT;
static ej__mutex sink_lock = EJ__MUTEX_INITIALIZER;
static ej_log_sink sink_fn;
static void *sink_user;

/* A message is cut at this many bytes. */
#define LOG_MSG_MAX 2048

static const char *const level_names[] = {"debug", "info", "warn", "error", "off"};

/* The syslog priority of each level, as the journal reads it from a "<N>"
 * prefix (sd-daemon.h's SD_DEBUG, SD_INFO, SD_WARNING, SD_ERR). */
static const int level_priority[] = {LOG_DEBUG, LOG_INFO, LOG_WARNING, LOG_ERR, LOG_ERR};

/* -1: not yet looked at; then 0 or 1. Read and written under sink_lock. */
static int to_journal = -1;

/* systemd connects a service's stderr to the journal and says so in
 * JOURNAL_STREAM ("DEV:INO" of that stream). The variable is inherited by
 * children whose stderr may go elsewhere, so it counts only when stderr
 * still is that very stream (systemd.exec(5), $JOURNAL_STREAM). */
static bool stderr_is_journal(void)
{
    const char *js = getenv("JOURNAL_STREAM");
    unsigned long long dev, ino;
    char end;
    if (js == NULL || sscanf(js, "%llu:%llu%c", &dev, &ino, &end) != 2)
        return false;
    struct stat st;
    if (fstat(STDERR_FILENO, &st) != 0)
        return false;
    return (unsigned long long)st.st_dev == dev && (unsigned long long)st.st_ino == ino;
}

int ej_log_level_parse(const char *name)
{
    if (name == NULL)
        return -1;
    for (int i = 0; i < 5; i++)
        if (strcasecmp(name, level_names[i]) == 0)
            return i;
    if (strcasecmp(name, "warning") == 0)
        return EJ_LOG_WARN;
    return -1;
}

const char *ej_log_level_name(int level)
{
    return level >= 0 && level <= EJ_LOG_OFF ? level_names[level] : "?";
}

ej_log_level ej_log_get_level(void)
{
    int level = atomic_load_explicit(&log_level, memory_order_relaxed);
    if (level < 0) {
        level = ej_log_level_parse(getenv("EJOB_LOG_LEVEL"));
        if (level < 0)
            level = EJ_LOG_INFO;
        int expected = -1;
        atomic_compare_exchange_strong(&log_level, &expected, level);
        level = atomic_load(&log_level);
    }
    return (ej_log_level)level;
}

void ej_log_set_level(ej_log_level level)
{
    atomic_store(&log_level, (int)level);
}

void ej_log_set_format(ej_log_format format)
{
    atomic_store(&log_format, (int)format);
}

void ej_log_set_sink(ej_log_sink sink, void *user)
{
    ej__mutex_lock(&sink_lock);
    sink_fn = sink;
    sink_user = user;
    ej__mutex_unlock(&sink_lock);
}

size_t ej__log_escape_text(char *out, size_t outlen, const char *msg)
{
    static const char hex[] = "0123456789abcdef";
    size_t k = 0;
    for (const unsigned char *p = (const unsigned char *)msg; *p != '\0'; p++) {
        char esc[5];
        size_t n;
        if (*p == '\n' || *p == '\r' || *p == '\t') {
            esc[0] = '\\';
            esc[1] = *p == '\n' ? 'n' : *p == '\r' ? 'r' : 't';
            n = 2;
        } else if (*p < 0x20 || *p == 0x7f) {
            esc[0] = '\\';
            esc[1] = 'x';
            esc[2] = hex[*p >> 4];
            esc[3] = hex[*p & 15];
            n = 4;
        } else {
            esc[0] = (char)*p;
            n = 1;
        }
        if (k + n >= outlen)
            break;
        memcpy(out + k, esc, n);
        k += n;
    }
    if (outlen > 0)
        out[k] = '\0';
    return k;
}

/* The journal stamps each line itself and shows the priority, so neither
 * the time nor the level word is repeated. */
static void write_journal(ej_log_level level, const char *module, int err, const char *msg)
{
    int prio = level_priority[level < EJ_LOG_OFF ? level : EJ_LOG_ERROR];
    if (err != 0)
        fprintf(stderr, "<%d>[%s] %s (%s)\n", prio, module, msg, ej_strerror(err));
    else
        fprintf(stderr, "<%d>[%s] %s\n", prio, module, msg);
}

/* Under sink_lock. A text line carries its message with control
 * characters escaped: a job's output or a name taken from ZooKeeper must not
 * start a line of its own (forging a daemon's line) or reach the terminal as
 * an escape sequence. JSON escapes them by its own rules. */
static void write_stderr(ej_log_level level, const char *module, int err, const char *raw)
{
    EJ_ASSERT_HELD(&sink_lock);
    static char escaped[4 * LOG_MSG_MAX + 1]; /* sink_lock held */
    const char *msg = raw;
    if (atomic_load(&log_format) == EJ_LOG_TEXT) {
        ej__log_escape_text(escaped, sizeof escaped, raw);
        msg = escaped;
        if (to_journal < 0)
            to_journal = stderr_is_journal();
        if (to_journal) {
            write_journal(level, module, err, msg);
            return;
        }
    }
    struct timespec ts;
    struct tm tm;
    char when[40];
    clock_gettime(CLOCK_REALTIME, &ts);
    gmtime_r(&ts.tv_sec, &tm);
    strftime(when, sizeof(when), "%Y-%m-%dT%H:%M:%S", &tm);
    const char *lvl = level_names[level < EJ_LOG_OFF ? level : EJ_LOG_ERROR];

    if (atomic_load(&log_format) == EJ_LOG_JSON) {
        char *msg_json = ej__json_quote(msg);
        if (err != 0)
            fprintf(stderr,
                    "{\"ts\":\"%s.%03ldZ\",\"level\":\"%s\",\"module\":\"%s\",\"msg\":%s,"
                    "\"error\":\"%s\"}\n",
                    when, ts.tv_nsec / 1000000, lvl, module, msg_json ? msg_json : "\"\"",
                    ej_err_name(err));
        else
            fprintf(stderr,
                    "{\"ts\":\"%s.%03ldZ\",\"level\":\"%s\",\"module\":\"%s\",\"msg\":%s}\n", when,
                    ts.tv_nsec / 1000000, lvl, module, msg_json ? msg_json : "\"\"");
        free(msg_json);
        return;
    }
    if (err != 0)
        fprintf(stderr, "%s.%03ldZ %-5s [%s] %s (%s)\n", when, ts.tv_nsec / 1000000, lvl, module,
                msg, ej_strerror(err));
    else
        fprintf(stderr, "%s.%03ldZ %-5s [%s] %s\n", when, ts.tv_nsec / 1000000, lvl, module, msg);
}

void ej_log_write(ej_log_level level, const char *module, int err, const char *fmt, ...)
{
    if (level < ej_log_get_level() || level >= EJ_LOG_OFF)
        return;
    char buf[LOG_MSG_MAX];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(buf, sizeof(buf), fmt, ap);
    va_end(ap);
    if (module == NULL)
        module = "ejob";

    ej__mutex_lock(&sink_lock);
    ej_log_sink fn = sink_fn;
    void *user = sink_user;
    if (fn == NULL)
        write_stderr(level, module, err, buf);
    ej__mutex_unlock(&sink_lock);
    if (fn != NULL)
        fn(level, module, err, buf, user);
}
