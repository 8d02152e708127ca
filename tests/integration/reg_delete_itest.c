/* ej_registry_delete_recursive on a tree with a subtree that cannot go:
 * the rest of the tree goes all the same, and the error says which part
 * stayed. A console removing a job whose instances still elect deletes
 * leader/ while they write it again; the job's config and instances must
 * go regardless, since their removal is what stops the instances. Before,
 * the delete gave up at the first such child, and the siblings after it
 * in ZooKeeper's order (config among them) stayed: the instances kept
 * electing and the removal never ended. */
#include <pthread.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stdatomic.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <cmocka.h>

#include "ejob/error.h"
#include "ejob/registry.h"
#include "reg_open.h"
#include "zk_fixture.h"

/* The nodes of a job beside leader/, and more, so that some come after
 * leader/ in whatever order the server lists them. */
static const char *const siblings[] = {
    "/job/config",          "/job/instances/10.0.0.1@-@1", "/job/servers/10.0.0.1",
    "/job/sharding/0/instance", "/job/sharding/1/instance", "/job/a", "/job/b", "/job/c",
    "/job/d",               "/job/e",                    "/job/f",  "/job/g",
};
#define NSIBLINGS (sizeof siblings / sizeof siblings[0])

static void make_siblings(ej_registry *reg)
{
    for (size_t i = 0; i < NSIBLINGS; i++)
        assert_int_equal(ej_registry_create_node(reg, siblings[i], "x", 1, EJ_REG_PERSISTENT,
                                                 EJ_REG_CREATE_PARENTS, NULL),
                         0);
}

static void assert_siblings_gone(ej_registry *reg)
{
    int left = 0;
    for (size_t i = 0; i < NSIBLINGS; i++) {
        bool ex = true;
        assert_int_equal(ej_registry_exists(reg, siblings[i], &ex, NULL), 0);
        if (ex) {
            fprintf(stderr, "still there: %s\n", siblings[i]);
            left++;
        }
    }
    assert_int_equal(left, 0);
}

/* leader/ belongs to another user (CREATOR_ALL_ACL): it stays, the rest
 * goes, and the error is the ACL's, naming the path asked for. */
static void test_forbidden_child(void **state)
{
    (void)state;
    char *ns = zkf_unique_namespace("delacl");
    ej_registry *anon = reg_open(ns, NULL);
    assert_non_null(anon);
    make_siblings(anon); /* first: the namespace's node is open to all */
    ej_registry *owner = reg_open(ns, "ejob:secret");
    assert_non_null(owner);
    assert_int_equal(ej_registry_create_node(owner, "/job/leader/election/instance", "x", 1,
                                             EJ_REG_PERSISTENT, EJ_REG_CREATE_PARENTS, NULL),
                     0);

    assert_int_equal(ej_registry_delete_recursive(anon, "/job"), EJ_ENOAUTH);
    assert_non_null(strstr(ej_registry_errmsg(NULL), "/job"));
    assert_siblings_gone(anon);
    bool ex = false;
    assert_int_equal(ej_registry_exists(anon, "/job/leader", &ex, NULL), 0);
    assert_true(ex);

    assert_int_equal(ej_registry_delete_recursive(owner, "/"), 0);
    ej_registry_destroy(anon);
    ej_registry_destroy(owner);
    free(ns);
}

struct writer {
    ej_registry *reg;
    atomic_bool stop;
    atomic_int made;
};

/* Writes leader/election/latch/ again and again, as electing instances do
 * while their job is deleted under them: a node, then its removal. */
static void *writer_main(void *arg)
{
    struct writer *w = arg;
    while (!atomic_load(&w->stop)) {
        char *made = NULL;
        if (ej_registry_create_node(w->reg, "/job/leader/election/latch/n-", "", 0,
                                    EJ_REG_EPHEMERAL_SEQUENTIAL, EJ_REG_CREATE_PARENTS,
                                    &made) == 0) {
            atomic_fetch_add(&w->made, 1);
            (void)ej_registry_delete(w->reg, made, -1);
            free(made);
        }
    }
    return NULL;
}

static void test_contended_child(void **state)
{
    (void)state;
    char *ns = zkf_unique_namespace("delbusy");
    ej_registry *reg = reg_open(ns, NULL);
    ej_registry *wreg = reg_open(ns, NULL);
    assert_non_null(reg);
    assert_non_null(wreg);
    make_siblings(reg);
    struct writer w = {.reg = wreg};
    atomic_init(&w.stop, false);
    atomic_init(&w.made, 0);
    pthread_t th[2];
    for (int i = 0; i < 2; i++)
        assert_int_equal(pthread_create(&th[i], NULL, writer_main, &w), 0);
    while (atomic_load(&w.made) < 50)
        ; /* the writers are going */

    int rc = ej_registry_delete_recursive(reg, "/job");
    fprintf(stderr, "delete while written: %s, %d nodes written\n",
            rc ? ej_strerror(rc) : "ok", atomic_load(&w.made));
    assert_true(rc == 0 || rc == EJ_ENOTEMPTY);
    atomic_store(&w.stop, true);
    for (int i = 0; i < 2; i++)
        pthread_join(th[i], NULL);
    assert_siblings_gone(reg);

    ej_registry_destroy(wreg); /* its ephemeral nodes go with it */
    assert_int_equal(ej_registry_delete_recursive(reg, "/"), 0);
    ej_registry_destroy(reg);
    free(ns);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_forbidden_child),
        cmocka_unit_test(test_contended_child),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
