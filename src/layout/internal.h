/*
 * The layout module: ElasticJob-Lite 2.1.5's ZooKeeper layout, shared by the
 * coordinator and the console library (neither depends on the other).
 *
 *   paths.c   every node of a job from one table, instance-id parts
 *             (public: ejob/layout.h)
 *   ids.c     instance ids, item node names, Curator latch names, UUIDs
 *
 * Everything is pure and thread-safe, except ej__layout_uuid4, which reads
 * the kernel's random source (also thread-safe).
 */
#ifndef EJ_LAYOUT_INTERNAL_H
#define EJ_LAYOUT_INTERNAL_H

#include <stddef.h>

#include "ejob/layout.h"

/* Longest instance id / IP accepted (bytes with the NUL). */
#define EJ__ID_MAX 256
#define EJ__IP_MAX 64

/* Writes "{ip}@-@{pid}" into out. Returns 0, or EJ_EINVAL when it does not
 * fit or ip is empty or contains '/' or the separator. */
int ej__layout_make_instance_id(const char *ip, long pid, char *out, size_t len);

/* Parses a shard item node name: decimal digits only, no sign, no leading
 * zeros (except "0"), at most INT_MAX. Returns 0 or EJ_EINVAL. */
int ej__layout_parse_item(const char *name, int *item);

/* Curator's protected latch node prefix for a UUID:
 * "_c_{uuid}-latch-" (uuid is 36 characters). */
#define EJ__LATCH_PREFIX_LEN (3 + 36 + 7)
int ej__layout_latch_node_prefix(const char *uuid, char *out, size_t len);

/* The sort key of a latch node name: what follows the LAST "latch-" (the
 * sequence number), or the whole name when it has none (Curator's
 * standardFixForSorting). Points into name. */
const char *ej__layout_latch_sort_key(const char *name);

/* strcmp of the sort keys; ties broken by the whole name. */
int ej__layout_latch_name_cmp(const char *a, const char *b);

/* Sorts latch node names in place by ej__layout_latch_name_cmp. */
void ej__layout_latch_sort(char **names, size_t n);

/* Index of the name protected by uuid ("_c_{uuid}-" prefix), or -1. */
long ej__layout_latch_find(char *const *names, size_t n, const char *uuid);

/* A random version 4 UUID, lower case, 36 characters plus NUL. */
void ej__layout_uuid4(char out[37]);

/* Reverse-sorts item numbers as strings (ElasticJob takes the greatest item
 * STRING first when picking a failover item: "9" before "10"). */
void ej__layout_items_sort_desc(int *items, size_t n);

#endif
