/* The listener list (common/listeners.h): each pair once, removal, and a
 * snapshot that outlives changes to the list. */
#include <errno.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>

#include <cmocka.h>

#include "common/listeners.h"
#include "ejob/error.h"

static int calls[3];

static void count(int *slot)
{
    (*slot)++;
}

static void other(int *slot)
{
    *slot += 10;
}

typedef void (*slot_fn)(int *slot);

static void test_add_remove_has(void **state)
{
    (void)state;
    ej__listeners l = {0};
    assert_int_equal(ej__listeners_add(&l, (ej__listener_fn)count, &calls[0]), 0);
    assert_int_equal(ej__listeners_add(&l, (ej__listener_fn)count, &calls[1]), 0);
    assert_int_equal(ej__listeners_add(&l, (ej__listener_fn)other, &calls[0]), 0);
    /* The same pair twice is refused; the same function with another
     * user (or the reverse) is another listener. */
    assert_int_equal(ej__listeners_add(&l, (ej__listener_fn)count, &calls[0]), -EEXIST);
    assert_true(ej__listeners_has(&l, (ej__listener_fn)count, &calls[1]));
    assert_false(ej__listeners_has(&l, (ej__listener_fn)other, &calls[1]));
    assert_true(ej__listeners_remove(&l, (ej__listener_fn)count, &calls[1]));
    assert_false(ej__listeners_remove(&l, (ej__listener_fn)count, &calls[1]));
    assert_false(ej__listeners_has(&l, (ej__listener_fn)count, &calls[1]));
    /* Many: the list grows. */
    int many[100];
    for (int i = 0; i < 100; i++)
        assert_int_equal(ej__listeners_add(&l, (ej__listener_fn)count, &many[i]), 0);
    assert_int_equal(l.n, 102);
    ej__listeners_fini(&l);
    assert_int_equal(l.n, 0);
}

static void test_snapshot_calls_in_order(void **state)
{
    (void)state;
    ej__listeners l = {0};
    struct ej__listener *snap = NULL;
    assert_int_equal(ej__listeners_snapshot(&l, &snap), 0);
    assert_null(snap);
    calls[0] = calls[1] = calls[2] = 0;
    ej__listeners_add(&l, (ej__listener_fn)count, &calls[0]);
    ej__listeners_add(&l, (ej__listener_fn)other, &calls[1]);
    ej__listeners_add(&l, (ej__listener_fn)count, &calls[2]);
    size_t n = ej__listeners_snapshot(&l, &snap);
    assert_int_equal(n, 3);
    /* Removed after the snapshot: the owner skips it (has() is false). */
    ej__listeners_remove(&l, (ej__listener_fn)other, &calls[1]);
    for (size_t i = 0; i < n; i++)
        if (ej__listeners_has(&l, snap[i].fn, snap[i].user))
            ((slot_fn)snap[i].fn)(snap[i].user);
    free(snap);
    assert_int_equal(calls[0], 1);
    assert_int_equal(calls[1], 0);
    assert_int_equal(calls[2], 1);
    ej__listeners_fini(&l);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_add_remove_has),
        cmocka_unit_test(test_snapshot_calls_in_order),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
