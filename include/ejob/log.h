/*
 * Logging. One process-wide sink; text by default, JSON lines on request.
 * EJ_LOG checks the level before formatting its arguments.
 */
#ifndef EJOB_LOG_H
#define EJOB_LOG_H

#include <stdbool.h>

#include "ejob/common.h"

typedef enum {
    EJ_LOG_DEBUG = 0,
    EJ_LOG_INFO = 1,
    EJ_LOG_WARN = 2,
    EJ_LOG_ERROR = 3,
    EJ_LOG_OFF = 4,
} ej_log_level;

typedef enum {
    EJ_LOG_TEXT = 0,
    EJ_LOG_JSON = 1,
} ej_log_format;

/* A sink receives one formatted message (no trailing newline). module is a
 * short static name ("reg", "cron" ...); err is 0 or the ejob/-errno code the
 * message is about. Called on any thread; must be thread-safe. */
typedef void (*ej_log_sink)(ej_log_level level, const char *module, int err, const char *msg,
                            void *user);

/* Messages below level are dropped before formatting. Default EJ_LOG_INFO,
 * or the EJOB_LOG_LEVEL environment variable (debug|info|warn|error|off). */
EJ_EXTERN void ej_log_set_level(ej_log_level level);
EJ_EXTERN ej_log_level ej_log_get_level(void);

/* Format used by the default sink (stderr). Text is
 * "2026-01-01T10:00:00.000Z info  [module] message (error)"; when stderr is
 * the systemd journal (JOURNAL_STREAM names stderr's device and inode) it is
 * "<6>[module] message (error)" instead: a syslog priority the journal
 * reads (7 debug, 6 info, 4 warn, 3 error) and no time, the journal's own.
 * JSON lines are the same either way. In both text forms the message's
 * control characters are escaped (\n \r \t, other C0 and DEL as \xHH), so
 * a message quoting untrusted text (a job's output, a name read from
 * ZooKeeper) stays one line and sends no escape sequence to a terminal. A
 * sink set with ej_log_set_sink receives the message unescaped. */
EJ_EXTERN void ej_log_set_format(ej_log_format format);

/* Replace the sink; NULL restores the default stderr sink. */
EJ_EXTERN void ej_log_set_sink(ej_log_sink sink, void *user);

/* Parse "debug", "info", "warn", "error", "off"; returns -1 when unknown. */
EJ_EXTERN int ej_log_level_parse(const char *name);

/* "debug", "info", "warn", "error" or "off" (static); "?" when out of range. */
EJ_EXTERN const char *ej_log_level_name(int level);

EJ_EXTERN void ej_log_write(ej_log_level level, const char *module, int err, const char *fmt, ...)
    EJ_PRINTF(4, 5);

#define EJ_LOG(level, module, err, ...)                                                            \
    do {                                                                                           \
        if ((level) >= ej_log_get_level())                                                         \
            ej_log_write((level), (module), (err), __VA_ARGS__);                                   \
    } while (0)

#endif
