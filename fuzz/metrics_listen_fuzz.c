/*
 * Fuzz target for the metrics endpoint's listen address parser
 * (ej_metrics_parse_listen). Checks that an accepted address is a sockaddr
 * of the length its family says and that printing it back ("IP:PORT" or
 * "[IP]:PORT") parses to the same bytes; a refused one comes with a
 * message.
 */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <arpa/inet.h>
#include <netinet/in.h>

#include "ejob/error.h"
#include "ejob/metrics.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    if (size > 256)
        return 0;
    char text[257];
    memcpy(text, data, size);
    text[size] = '\0';
    struct sockaddr_in6 sa;
    size_t len = 0;
    char err[160] = "";
    int rc = ej_metrics_parse_listen(text, &sa, &len, err, sizeof err);
    if (rc != 0) {
        if (rc != EJ_EINVAL || err[0] == '\0')
            abort();
        return 0;
    }
    char ip[INET6_ADDRSTRLEN], again[INET6_ADDRSTRLEN + 16];
    if (sa.sin6_family == AF_INET6) {
        if (len != sizeof(struct sockaddr_in6))
            abort();
        inet_ntop(AF_INET6, &sa.sin6_addr, ip, sizeof ip);
        snprintf(again, sizeof again, "[%s]:%u", ip, ntohs(sa.sin6_port));
    } else {
        const struct sockaddr_in *s4 = (const struct sockaddr_in *)(const void *)&sa;
        if (s4->sin_family != AF_INET || len != sizeof(struct sockaddr_in))
            abort();
        inet_ntop(AF_INET, &s4->sin_addr, ip, sizeof ip);
        snprintf(again, sizeof again, "%s:%u", ip, ntohs(s4->sin_port));
    }
    struct sockaddr_in6 sa2;
    size_t len2 = 0;
    if (ej_metrics_parse_listen(again, &sa2, &len2, err, sizeof err) != 0 || len2 != len ||
        memcmp(&sa, &sa2, len) != 0)
        abort();
    return 0;
}
