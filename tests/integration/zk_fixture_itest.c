/* The ZooKeeper fixture itself: start, data kept across restart, forced
 * session expiry, and the server gone by pid after destroy. */
#include <errno.h>
#include <setjmp.h>
#include <signal.h>
#include <stdarg.h>
#include <stdatomic.h>
#include <stddef.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>
#include <cmocka.h>
#include <zookeeper/zookeeper.h>

#include "zk_fixture.h"

static atomic_int last_state;

static void watcher(zhandle_t *zh, int type, int state, const char *path, void *ctx)
{
    (void)zh;
    (void)type;
    (void)path;
    (void)ctx;
    if (type == ZOO_SESSION_EVENT)
        atomic_store(&last_state, state);
}

static zhandle_t *connect_wait(zkf_server *zk, int timeout_ms)
{
    atomic_store(&last_state, 0);
    zhandle_t *zh = zookeeper_init(zkf_connect_string(zk), watcher, timeout_ms, NULL, NULL, 0);
    assert_non_null(zh);
    for (int i = 0; i < 400 && atomic_load(&last_state) != ZOO_CONNECTED_STATE; i++)
        usleep(10000);
    assert_int_equal(atomic_load(&last_state), ZOO_CONNECTED_STATE);
    return zh;
}

static void test_start_restart_expire(void **state)
{
    (void)state;
    zkf_server *zk = NULL;
    assert_int_equal(zkf_start(&zk, NULL), 0);
    pid_t pid = zkf_pid(zk);
    assert_true(pid > 0);

    zhandle_t *zh = connect_wait(zk, 4000);
    assert_int_equal(zoo_create(zh, "/kept", "v", 1, &ZOO_OPEN_ACL_UNSAFE, 0, NULL, 0), ZOK);
    assert_int_equal(zoo_create(zh, "/eph", "", 0, &ZOO_OPEN_ACL_UNSAFE, ZOO_EPHEMERAL, NULL, 0),
                     ZOK);
    const clientid_t *id = zoo_client_id(zh);
    assert_int_equal(zkf_expire_session(zk, id->client_id, id->passwd, sizeof(id->passwd)), 0);
    for (int i = 0; i < 400 && atomic_load(&last_state) != ZOO_EXPIRED_SESSION_STATE; i++)
        usleep(10000);
    assert_int_equal(atomic_load(&last_state), ZOO_EXPIRED_SESSION_STATE);
    zookeeper_close(zh);

    zh = connect_wait(zk, 4000);
    struct Stat st;
    assert_int_equal(zoo_exists(zh, "/eph", 0, &st), ZNONODE);
    zookeeper_close(zh);

    assert_int_equal(zkf_stop(zk), 0);
    assert_int_equal(kill(pid, 0), -1);
    assert_int_equal(zkf_restart(zk), 0);
    zh = connect_wait(zk, 4000);
    char buf[8];
    int len = sizeof(buf);
    assert_int_equal(zoo_get(zh, "/kept", 0, buf, &len, NULL), ZOK);
    assert_int_equal(len, 1);
    zookeeper_close(zh);

    assert_true(zkf_mntr_value(zk, "zk_packets_received") > 0);
    pid = zkf_pid(zk);
    zkf_destroy(zk);
    assert_int_equal(kill(pid, 0), -1);
}

int main(void)
{
    zoo_set_debug_level(ZOO_LOG_LEVEL_ERROR);
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_start_restart_expire),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
