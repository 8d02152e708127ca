/* Small helpers every module may use. Internal: not part of the public API. */
#ifndef EJ_COMMON_UTIL_H
#define EJ_COMMON_UTIL_H

#include <stdarg.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <time.h>

#include "ejob/common.h"

/* Milliseconds since the epoch (CLOCK_REALTIME). */
int64_t ej__now_ms(void);
/* Milliseconds on CLOCK_MONOTONIC, for measuring durations and deadlines. */
int64_t ej__mono_ms(void);
/* The timespec of deadline_ms on the ej__mono_ms clock (CLOCK_MONOTONIC),
 * for pthread_cond_timedwait on a condition created with that clock. */
struct timespec ej__mono_timespec(int64_t deadline_ms);
/* The CLOCK_MONOTONIC timespec ms from now (ms < 0 counts as 0). */
struct timespec ej__mono_timespec_in(int64_t ms);
/* Sleep for ms milliseconds, restarting after signals. */
void ej__sleep_ms(int64_t ms);

/* A JSON string literal (with quotes) for s, escaping as Gson does by default
 * (HTML-safe: = < > & ' become \u003d \u003c \u003e \u0026 \u0027). Caller
 * frees. NULL on allocation failure. */
char *ej__json_quote(const char *s);

/* Copies msg into out (outlen bytes, NUL-terminated, cut to fit) with
 * control characters escaped as a text log line writes them: \n \r \t, other
 * C0 bytes and DEL as \xHH (ESC is \x1b). Other bytes, UTF-8 included, are
 * copied. Returns the length written. */
size_t ej__log_escape_text(char *out, size_t outlen, const char *msg);

/* printf into a new heap string. Caller frees. NULL on allocation failure. */
char *ej__asprintf(const char *fmt, ...) EJ_PRINTF(1, 2);

/* A growable byte buffer, always NUL-terminated after a successful append. */
typedef struct ej_buf {
    char *data;
    size_t len;
    size_t cap;
    bool failed; /* an append ran out of memory; data holds what fit before */
} ej_buf;

void ej__buf_init(ej_buf *b);
void ej__buf_fini(ej_buf *b);
void ej__buf_append(ej_buf *b, const char *s, size_t n);
void ej__buf_puts(ej_buf *b, const char *s);
void ej__buf_printf(ej_buf *b, const char *fmt, ...) EJ_PRINTF(2, 3);
/* Take ownership of the contents; the buffer is left empty. Caller frees. */
char *ej__buf_steal(ej_buf *b);

/* Java's String.hashCode() of a UTF-8 string, computed over its UTF-16 code
 * units with 32-bit wraparound, as Java does. Invalid UTF-8 bytes count as
 * U+FFFD. */
int32_t ej__java_string_hash(const char *utf8);

/* The first non-loopback IPv4 address of this host, as ElasticJob 2.1.5's
 * IpUtils picks it (a public address first, else the last site-local one),
 * or "127.0.0.1". EJOB_IP in the environment overrides it. Writes at most
 * len bytes including the NUL. */
void ej__local_ip(char *out, size_t len);

/* Split a script command line into argv as Apache commons-exec's
 * CommandLine.parse does: tokens separated by ' ', '...' and "..." quote
 * (no escapes). *argv_out is one heap block (argv pointers and strings; free
 * it with free()), NULL-terminated, with room for one more pointer before
 * the NULL for a caller's extra argument. Returns 0, EJ_ECONFIG (err says
 * "command line is empty", "unbalanced quotes in '...'" or "no program in
 * '...'"), EJ_EINVAL (NULL line or argv_out) or EJ_ENOMEM. */
int ej__split_command_line(const char *line, char ***argv_out, int *argc_out, char *err,
                           size_t errlen);

#endif
