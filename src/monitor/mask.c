#include <stdlib.h>
#include <string.h>
#include <strings.h>

#include "ejob/error.h"
#include "ejob/monitor.h"
#include "common/util.h"
#include "monitor/internal.h"

static bool is_digit(char c)
{
    return c >= '0' && c <= '9';
}

/* One number of an address: 0..255 written without a leading zero (the
 * alternatives of ElasticJob's IP_REGEX: \d, [1-9]\d, 1\d{2}, 2[0-4]\d,
 * 25[0-5]). */
static bool valid_octet(const char *s, size_t n)
{
    switch (n) {
    case 1:
        return true;
    case 2:
        return s[0] != '0';
    case 3:
        return s[0] == '1' || (s[0] == '2' && (s[1] < '5' || (s[1] == '5' && s[2] <= '5')));
    default:
        return false;
    }
}

size_t ej__monitor_match_ipv4(const char *s)
{
    const char *p = s;
    for (int k = 0; k < 3; k++) {
        size_t run = 0;
        while (run < 4 && is_digit(p[run]))
            run++;
        if (run == 0 || !valid_octet(p, run) || p[run] != '.')
            return 0;
        p += run + 1;
    }
    size_t run = 0;
    while (run < 3 && is_digit(p[run]))
        run++;
    for (size_t n = run; n > 0; n--)
        if (valid_octet(p, n))
            return (size_t)(p + n - s);
    return 0;
}

bool ej__monitor_is_dump_command(const char *line, size_t len)
{
    return len == 4 && strncasecmp(line, "dump", 4) == 0;
}

struct ip_name {
    char ip[16];
};

int ej_monitor_mask_ips(const char *text, char **out)
{
    if (text == NULL || out == NULL)
        return EJ_EINVAL;
    *out = NULL;
    ej_buf b;
    ej__buf_init(&b);
    struct ip_name *names = NULL;
    size_t count = 0, cap = 0;
    int rc = 0;
    const char *p = text;
    while (*p != '\0') {
        size_t len = is_digit(*p) ? ej__monitor_match_ipv4(p) : 0;
        if (len == 0) {
            /* Copy the run up to the next digit in one go. */
            const char *q = p + 1;
            while (*q != '\0' && !is_digit(*q))
                q++;
            ej__buf_append(&b, p, (size_t)(q - p));
            p = q;
            continue;
        }
        size_t idx = 0;
        while (idx < count && (strlen(names[idx].ip) != len || memcmp(names[idx].ip, p, len) != 0))
            idx++;
        if (idx == count) {
            if (count == cap) {
                size_t ncap = cap ? cap * 2 : 8;
                struct ip_name *n = realloc(names, ncap * sizeof(*n));
                if (n == NULL) {
                    rc = EJ_ENOMEM;
                    goto out;
                }
                names = n;
                cap = ncap;
            }
            memcpy(names[count].ip, p, len);
            names[count].ip[len] = '\0';
            count++;
        }
        ej__buf_printf(&b, "ip%zu", idx + 1);
        p += len;
    }
    if (b.failed) {
        rc = EJ_ENOMEM;
        goto out;
    }
    *out = b.data != NULL ? ej__buf_steal(&b) : strdup("");
    if (*out == NULL)
        rc = EJ_ENOMEM;
out:
    free(names);
    ej__buf_fini(&b);
    return rc;
}
