/* Internal helpers shared by the sharding module's files. */
#ifndef EJ_SHARDING_INTERNAL_H
#define EJ_SHARDING_INTERNAL_H

#include <stddef.h>
#include <stdint.h>

/* Checks shared by every built-in strategy: instances non-NULL when
 * n_instances > 0, n_instances <= INT_MAX, total_count >= 0, owner_out
 * non-NULL when total_count > 0, job_name non-NULL. 0 or EJ_EINVAL. */
int ej__sharding_check_args(const char *const *instances, size_t n_instances, const char *job_name,
                            int total_count, const int *owner_out);

/* AverageAllocation over a permuted instance list: position k of the list
 * ElasticJob would see is instance (reverse ? n-1-k : (k + offset) % n).
 * Requires n > 0 and offset < n. */
void ej__sharding_average_fill(size_t n, int total_count, size_t offset, int reverse,
                               int *owner_out);

/* 64-bit FNV-1a, to be continued with ej__sharding_fnv_more. */
#define EJ__FNV64_OFFSET UINT64_C(0xcbf29ce484222325)
uint64_t ej__sharding_fnv_more(uint64_t h, const void *data, size_t len);
/* The murmur3 64-bit finaliser: spreads every input bit over the output. */
uint64_t ej__sharding_mix64(uint64_t h);

#endif
