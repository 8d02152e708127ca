/* The registry does not resolve the ZooKeeper server list for every answer.
 * This program defines getaddrinfo, so the ZooKeeper client's calls come
 * here first (the executable's symbols lead the lookup scope) and are
 * counted before they go on to the C library's. */
#include <dlfcn.h>
#include <netdb.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stdatomic.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <cmocka.h>

#include "ejob/registry.h"
#include "zk_fixture.h"

static atomic_long resolutions;

typedef int (*getaddrinfo_fn)(const char *, const char *, const struct addrinfo *,
                              struct addrinfo **);

/* Default visibility: the build hides every symbol not marked. */
__attribute__((visibility("default"))) int getaddrinfo(const char *node, const char *service,
                                                       const struct addrinfo *hints,
                                                       struct addrinfo **res)
{
    static getaddrinfo_fn next;
    if (next == NULL)
        next = (getaddrinfo_fn)dlsym(RTLD_NEXT, "getaddrinfo");
    atomic_fetch_add(&resolutions, 1);
    return next(node, service, hints, res);
}

/* 500 reads, each an answer that wakes the client's I/O thread: the server
 * list (one host) is resolved when the handle opens, and not again while
 * the connection lives (it was resolved at least once per answer). */
static void test_answers_do_not_resolve(void **state)
{
    (void)state;
    zkf_server *zk = zkf_shared();
    assert_non_null(zk);
    struct ej_registry_opts o = {0};
    o.servers = zkf_connect_string(zk);
    char *ns = zkf_unique_namespace("resolve");
    o.namespace_ = ns;
    o.session_timeout_ms = 4000;
    o.connection_timeout_ms = 5000;
    ej_registry *reg = NULL;
    assert_int_equal(ej_registry_create(&reg, &o), 0);
    assert_int_equal(ej_registry_create_node(reg, "/n", "x", 1, EJ_REG_PERSISTENT, 0, NULL), 0);
    long before = atomic_load(&resolutions);
    for (int i = 0; i < 500; i++) {
        char *data = NULL;
        assert_int_equal(ej_registry_get(reg, "/n", &data, NULL, NULL), 0);
        free(data);
    }
    long during = atomic_load(&resolutions) - before;
    ej_registry_destroy(reg);
    free(ns);
    if (during > 5)
        fail_msg("the server list was resolved %ld times during 500 reads", during);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_answers_do_not_resolve),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
