/* The listen address of the metrics endpoint: HOST:PORT, [IPV6]:PORT, :PORT. */
#include <stdio.h>
#include <string.h>
#include <arpa/inet.h>
#include <netinet/in.h>

#include "ejob/error.h"
#include "metrics/internal.h"

#define MAX_HOST 64

/* The error of this parser: EJ_EINVAL, with err saying why. */
#define LISTEN_ERROR(err, errlen, ...) (ej__metrics_set_err(err, errlen, __VA_ARGS__), EJ_EINVAL)

static int parse_port(const char *s, int *port)
{
    size_t n = strlen(s);
    if (n == 0 || n > 5)
        return -1;
    int v = 0;
    for (size_t i = 0; i < n; i++) {
        if (s[i] < '0' || s[i] > '9')
            return -1;
        v = v * 10 + (s[i] - '0');
    }
    if (v > 65535)
        return -1;
    *port = v;
    return 0;
}

/* Splits text into host (without brackets) and port text. */
static int split(const char *text, char host[MAX_HOST], const char **port, bool *v6, char *err,
                 size_t errlen)
{
    const char *colon;
    const char *h = text;
    size_t hlen;
    *v6 = false;
    if (text[0] == '[') {
        const char *close = strchr(text, ']');
        if (close == NULL)
            return LISTEN_ERROR(err, errlen, "\"%s\": missing ']' after the IPv6 address", text);
        if (close[1] != ':')
            return LISTEN_ERROR(err, errlen, "\"%s\": expected :PORT after ']'", text);
        h = text + 1;
        hlen = (size_t)(close - h);
        colon = close + 1;
        *v6 = true;
    } else {
        colon = strrchr(text, ':');
        if (colon == NULL)
            return LISTEN_ERROR(err, errlen, "\"%s\": expected HOST:PORT", text);
        hlen = (size_t)(colon - text);
        if (memchr(text, ':', hlen) != NULL)
            return LISTEN_ERROR(err, errlen,
                                "\"%s\": write an IPv6 address in brackets, [ADDR]:PORT", text);
    }
    if (hlen >= MAX_HOST)
        return LISTEN_ERROR(err, errlen, "host too long (%zu bytes)", hlen);
    memcpy(host, h, hlen);
    host[hlen] = '\0';
    *port = colon + 1;
    return 0;
}

int ej_metrics_parse_listen(const char *text, void *addr, size_t *addrlen, char *err, size_t errlen)
{
    if (text == NULL || addr == NULL || addrlen == NULL)
        return LISTEN_ERROR(err, errlen, "no listen address");
    char host[MAX_HOST];
    const char *port_text = NULL;
    bool v6 = false;
    int rc = split(text, host, &port_text, &v6, err, errlen);
    if (rc != 0)
        return rc;
    int port;
    if (parse_port(port_text, &port) != 0)
        return LISTEN_ERROR(err, errlen, "\"%s\": port must be a number 0..65535", text);
    if (v6) {
        struct sockaddr_in6 sa6;
        memset(&sa6, 0, sizeof sa6);
        sa6.sin6_family = AF_INET6;
        sa6.sin6_port = htons((uint16_t)port);
        if (inet_pton(AF_INET6, host, &sa6.sin6_addr) != 1)
            return LISTEN_ERROR(err, errlen, "\"%s\": \"%s\" is not an IPv6 address", text, host);
        memcpy(addr, &sa6, sizeof sa6);
        *addrlen = sizeof sa6;
        return 0;
    }
    struct sockaddr_in sa;
    memset(&sa, 0, sizeof sa);
    sa.sin_family = AF_INET;
    sa.sin_port = htons((uint16_t)port);
    const char *ip = host[0] == '\0' || strcmp(host, "localhost") == 0 ? "127.0.0.1" : host;
    if (inet_pton(AF_INET, ip, &sa.sin_addr) != 1)
        return LISTEN_ERROR(err, errlen,
                            "\"%s\": \"%s\" is not an IPv4 address (names other than "
                            "localhost are not looked up)",
                            text, host);
    memcpy(addr, &sa, sizeof sa);
    *addrlen = sizeof sa;
    return 0;
}
