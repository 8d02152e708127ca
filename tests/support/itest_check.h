/*
 * Checks of the C integration tests that drive several jobs at once:
 * CHECK records a failure and goes on (the test ends with the count),
 * REQUIRE stops the test at once. A test that must undo something before
 * exiting on a REQUIRE (a frozen ZooKeeper to resume) defines
 * ITEST_ON_REQUIRE_FAILED() before including this. itest_registry_opts
 * gives the registry options those tests share.
 */
#ifndef EJ_ITEST_CHECK_H
#define EJ_ITEST_CHECK_H

#include <stdio.h>
#include <stdlib.h>

#include "ejob/registry.h"
#include "zk_fixture.h"

#ifndef ITEST_ON_REQUIRE_FAILED
#define ITEST_ON_REQUIRE_FAILED()                                                                  \
    do {                                                                                           \
    } while (0)
#endif

/* Failed CHECKs so far (each test file has its own). */
static int failures;

#define CHECK(cond, ...)                                                                           \
    do {                                                                                           \
        if (!(cond)) {                                                                             \
            fprintf(stderr, "CHECK FAILED %s:%d: %s: ", __FILE__, __LINE__, #cond);                \
            fprintf(stderr, __VA_ARGS__);                                                          \
            fprintf(stderr, "\n");                                                                 \
            failures++;                                                                            \
        }                                                                                          \
    } while (0)

#define REQUIRE(cond, ...)                                                                         \
    do {                                                                                           \
        if (!(cond)) {                                                                             \
            fprintf(stderr, "REQUIRE FAILED %s:%d: %s: ", __FILE__, __LINE__, #cond);              \
            fprintf(stderr, __VA_ARGS__);                                                          \
            fprintf(stderr, "\n");                                                                 \
            ITEST_ON_REQUIRE_FAILED();                                                             \
            exit(1);                                                                               \
        }                                                                                          \
    } while (0)

/* Registry options for a test's clients of zk: session_ms, and retries
 * short enough for a test that stops or freezes the server. */
static inline struct ej_registry_opts itest_registry_opts(zkf_server *zk, const char *ns,
                                                          int session_ms)
{
    return (struct ej_registry_opts){.servers = zkf_connect_string(zk),
                                     .namespace_ = ns,
                                     .session_timeout_ms = session_ms,
                                     .connection_timeout_ms = 10000,
                                     .base_sleep_ms = 100,
                                     .max_sleep_ms = 500,
                                     .max_retries = 3};
}

#endif
