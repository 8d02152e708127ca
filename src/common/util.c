#include <arpa/inet.h>
#include <errno.h>
#include <ifaddrs.h>
#include <net/if.h>
#include <netinet/in.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "common/util.h"

int64_t ej__now_ms(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_REALTIME, &ts);
    return (int64_t)ts.tv_sec * 1000 + ts.tv_nsec / 1000000;
}

int64_t ej__mono_ms(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (int64_t)ts.tv_sec * 1000 + ts.tv_nsec / 1000000;
}

struct timespec ej__mono_timespec(int64_t deadline_ms)
{
    if (deadline_ms < 0)
        deadline_ms = 0;
    return (struct timespec){.tv_sec = (time_t)(deadline_ms / 1000),
                             .tv_nsec = (long)(deadline_ms % 1000) * 1000000L};
}

struct timespec ej__mono_timespec_in(int64_t ms)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    if (ms < 0)
        ms = 0;
    int64_t ns = (int64_t)ts.tv_nsec + (ms % 1000) * 1000000L;
    ts.tv_sec += (time_t)(ms / 1000 + ns / 1000000000L);
    ts.tv_nsec = (long)(ns % 1000000000L);
    return ts;
}

void ej__sleep_ms(int64_t ms)
{
    if (ms <= 0)
        return;
    struct timespec ts = {.tv_sec = ms / 1000, .tv_nsec = (ms % 1000) * 1000000};
    while (nanosleep(&ts, &ts) != 0 && errno == EINTR) {
    }
}

void ej__buf_init(ej_buf *b)
{
    b->data = NULL;
    b->len = 0;
    b->cap = 0;
    b->failed = false;
}

void ej__buf_fini(ej_buf *b)
{
    free(b->data);
    ej__buf_init(b);
}

static bool buf_reserve(ej_buf *b, size_t extra)
{
    if (b->failed)
        return false;
    if (b->len + extra + 1 <= b->cap)
        return true;
    size_t cap = b->cap ? b->cap : 64;
    while (cap < b->len + extra + 1) {
        if (cap > SIZE_MAX / 2) {
            b->failed = true;
            return false;
        }
        cap *= 2;
    }
    char *p = realloc(b->data, cap);
    if (p == NULL) {
        b->failed = true;
        return false;
    }
    b->data = p;
    b->cap = cap;
    return true;
}

void ej__buf_append(ej_buf *b, const char *s, size_t n)
{
    if (!buf_reserve(b, n))
        return;
    if (n > 0)
        memcpy(b->data + b->len, s, n);
    b->len += n;
    b->data[b->len] = '\0';
}

void ej__buf_puts(ej_buf *b, const char *s)
{
    ej__buf_append(b, s, strlen(s));
}

void ej__buf_printf(ej_buf *b, const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    int n = vsnprintf(NULL, 0, fmt, ap);
    va_end(ap);
    if (n < 0 || !buf_reserve(b, (size_t)n))
        return;
    va_start(ap, fmt);
    vsnprintf(b->data + b->len, (size_t)n + 1, fmt, ap);
    va_end(ap);
    b->len += (size_t)n;
}

char *ej__buf_steal(ej_buf *b)
{
    char *p = b->data;
    if (p == NULL && !b->failed)
        p = calloc(1, 1);
    ej__buf_init(b);
    return p;
}

char *ej__asprintf(const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    char *out = NULL;
    int n = vasprintf(&out, fmt, ap);
    va_end(ap);
    return n < 0 ? NULL : out;
}

char *ej__json_quote(const char *s)
{
    ej_buf b;
    ej__buf_init(&b);
    ej__buf_append(&b, "\"", 1);
    for (const unsigned char *p = (const unsigned char *)s; p && *p; p++) {
        unsigned char c = *p;
        switch (c) {
        case '"':
            ej__buf_puts(&b, "\\\"");
            break;
        case '\\':
            ej__buf_puts(&b, "\\\\");
            break;
        case '\n':
            ej__buf_puts(&b, "\\n");
            break;
        case '\r':
            ej__buf_puts(&b, "\\r");
            break;
        case '\t':
            ej__buf_puts(&b, "\\t");
            break;
        case '\b':
            ej__buf_puts(&b, "\\b");
            break;
        case '\f':
            ej__buf_puts(&b, "\\f");
            break;
        case '<':
        case '>':
        case '&':
        case '=':
        case '\'':
            ej__buf_printf(&b, "\\u%04x", c);
            break;
        case 0xE2:
            /* Gson also escapes the JavaScript line separators U+2028/U+2029. */
            if (p[1] == 0x80 && (p[2] == 0xA8 || p[2] == 0xA9)) {
                ej__buf_printf(&b, "\\u%04x", p[2] == 0xA8 ? 0x2028 : 0x2029);
                p += 2;
            } else {
                ej__buf_append(&b, (const char *)p, 1);
            }
            break;
        default:
            if (c < 0x20)
                ej__buf_printf(&b, "\\u%04x", c);
            else
                ej__buf_append(&b, (const char *)p, 1);
        }
    }
    ej__buf_append(&b, "\"", 1);
    if (b.failed) {
        ej__buf_fini(&b);
        return NULL;
    }
    return ej__buf_steal(&b);
}

/* Decode one UTF-8 sequence; returns the code point (U+FFFD for invalid input)
 * and advances *p. */
static uint32_t utf8_next(const unsigned char **p)
{
    const unsigned char *s = *p;
    uint32_t c = s[0];
    int extra;
    uint32_t min;
    if (c < 0x80) {
        *p = s + 1;
        return c;
    } else if ((c & 0xE0) == 0xC0) {
        extra = 1;
        c &= 0x1F;
        min = 0x80;
    } else if ((c & 0xF0) == 0xE0) {
        extra = 2;
        c &= 0x0F;
        min = 0x800;
    } else if ((c & 0xF8) == 0xF0) {
        extra = 3;
        c &= 0x07;
        min = 0x10000;
    } else {
        *p = s + 1;
        return 0xFFFD;
    }
    for (int i = 1; i <= extra; i++) {
        if ((s[i] & 0xC0) != 0x80) {
            *p = s + i;
            return 0xFFFD;
        }
        c = (c << 6) | (s[i] & 0x3F);
    }
    *p = s + extra + 1;
    if (c < min || c > 0x10FFFF || (c >= 0xD800 && c <= 0xDFFF))
        return 0xFFFD;
    return c;
}

int32_t ej__java_string_hash(const char *utf8)
{
    uint32_t h = 0;
    const unsigned char *p = (const unsigned char *)utf8;
    while (p && *p) {
        uint32_t cp = utf8_next(&p);
        if (cp >= 0x10000) {
            cp -= 0x10000;
            h = h * 31u + (0xD800u + (cp >> 10));
            h = h * 31u + (0xDC00u + (cp & 0x3FF));
        } else {
            h = h * 31u + cp;
        }
    }
    return (int32_t)h;
}

static bool is_site_local(uint32_t host_order)
{
    return (host_order >> 24) == 10 || (host_order >> 20) == 0xAC1 || (host_order >> 16) == 0xC0A8;
}

void ej__local_ip(char *out, size_t len)
{
    const char *env = getenv("EJOB_IP");
    if (env != NULL && *env != '\0') {
        snprintf(out, len, "%s", env);
        return;
    }
    snprintf(out, len, "127.0.0.1");
    struct ifaddrs *ifs = NULL;
    if (getifaddrs(&ifs) != 0)
        return;
    char site_local[INET_ADDRSTRLEN] = "";
    for (struct ifaddrs *ifa = ifs; ifa != NULL; ifa = ifa->ifa_next) {
        if (ifa->ifa_addr == NULL || ifa->ifa_addr->sa_family != AF_INET)
            continue;
        if ((ifa->ifa_flags & IFF_UP) == 0 || (ifa->ifa_flags & IFF_LOOPBACK) != 0)
            continue;
        struct in_addr a = ((struct sockaddr_in *)ifa->ifa_addr)->sin_addr;
        uint32_t h = ntohl(a.s_addr);
        if ((h >> 24) == 127)
            continue;
        char text[INET_ADDRSTRLEN];
        inet_ntop(AF_INET, &a, text, sizeof(text));
        if (!is_site_local(h)) {
            snprintf(out, len, "%s", text);
            freeifaddrs(ifs);
            return;
        }
        snprintf(site_local, sizeof(site_local), "%s", text);
    }
    if (site_local[0] != '\0')
        snprintf(out, len, "%s", site_local);
    freeifaddrs(ifs);
}
