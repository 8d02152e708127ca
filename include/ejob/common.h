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

/* The version of this header; ej_version() gives the library's (they differ
 * only when a program runs against another build than it was compiled
 * with). Kept in step with project(ejob VERSION ...) in CMakeLists.txt. */
#define EJ_VERSION_MAJOR 1
#define EJ_VERSION_MINOR 0
#define EJ_VERSION_PATCH 0
#define EJ_VERSION_HEX ((EJ_VERSION_MAJOR << 16) | (EJ_VERSION_MINOR << 8) | EJ_VERSION_PATCH)

/* The library's version as EJ_VERSION_HEX computes it, e.g. 0x010000 for
 * 1.0.0. Thread-safe. */
EJ_EXTERN unsigned ej_version(void);

/* The library's version as text, "1.0.0". Static. Thread-safe. */
EJ_EXTERN const char *ej_version_string(void);

#endif
