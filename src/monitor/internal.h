/* Internal helpers of the monitor module. */
#ifndef EJ_MONITOR_INTERNAL_H
#define EJ_MONITOR_INTERNAL_H

#include <stdbool.h>
#include <stddef.h>

/* The IPv4 address starting at s, as the dump's masking recognises it: four
 * dot-separated numbers 0..255 without leading zeros; the first three must be
 * followed by '.', the last is the longest valid prefix of its digits.
 * Returns its length, or 0 when none starts at s. */
size_t ej__monitor_match_ipv4(const char *s);

/* True when line equals "dump" ignoring case (Java equalsIgnoreCase). */
bool ej__monitor_is_dump_command(const char *line, size_t len);

#endif
