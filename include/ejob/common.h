/* Definitions shared by every public ejob header. */
#ifndef EJOB_COMMON_H
#define EJOB_COMMON_H

#if defined(__GNUC__)
#define EJ_EXTERN __attribute__((visibility("default")))
#define EJ_PRINTF(fmt_idx, arg_idx) __attribute__((format(printf, fmt_idx, arg_idx)))
#else
#define EJ_EXTERN
#define EJ_PRINTF(fmt_idx, arg_idx)
#endif

#endif
