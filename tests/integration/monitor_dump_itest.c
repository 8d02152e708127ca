/* The dump and the monitor port against a real ZooKeeper, with the job's
 * nodes laid out as ElasticJob 2.1.5 writes them. */
#include <errno.h>
#include <poll.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>
#include <arpa/inet.h>
#include <netinet/in.h>
#include <sys/socket.h>

#include <cmocka.h>

#include "ejob/error.h"
#include "ejob/monitor.h"
#include "ejob/registry.h"
#include "zk_fixture.h"

#define JAVA_CONFIG                                                                                \
    "{\"jobName\":\"mjob\",\"jobClass\":\"com.dangdang.ddframe.job.api.script.ScriptJob\","        \
    "\"jobType\":\"SCRIPT\",\"cron\":\"0/2 * * * * ?\",\"shardingTotalCount\":3,"                  \
    "\"shardingItemParameters\":\"0\\u003da\",\"jobParameter\":\"\",\"failover\":true,"            \
    "\"misfire\":true,\"description\":\"\",\"jobProperties\":{\"job_exception_handler\":"          \
    "\"com.dangdang.ddframe.job.executor.handler.impl.DefaultJobExceptionHandler\","               \
    "\"executor_service_handler\":"                                                                \
    "\"com.dangdang.ddframe.job.executor.handler.impl.DefaultExecutorServiceHandler\"},"           \
    "\"scriptCommandLine\":\"/opt/jobs/log-item.sh\",\"monitorExecution\":true,"                   \
    "\"maxTimeDiffSeconds\":-1,\"monitorPort\":-1,\"jobShardingStrategyClass\":\"\","              \
    "\"reconcileIntervalMinutes\":10,\"disabled\":false,\"overwrite\":true}"

/* What ElasticJob prints for the tree built by build_job(). */
static const char expected_dump[] = "/mjob/sharding | \n"
                                    "/mjob/sharding/2 | \n"
                                    "/mjob/sharding/2/running | \n"
                                    "/mjob/sharding/2/instance | ip1@-@77\n"
                                    "/mjob/sharding/10 | \n"
                                    "/mjob/sharding/10/instance | ip2@-@4242\n"
                                    "/mjob/sharding/1 | \n"
                                    "/mjob/sharding/1/instance | ip3@-@9\n"
                                    "/mjob/sharding/0 | \n"
                                    "/mjob/sharding/0/instance | ip2@-@4242\n"
                                    "/mjob/servers | \n"
                                    "/mjob/servers/ip2 | \n"
                                    "/mjob/servers/ip1 | DISABLED\n"
                                    "/mjob/leader | \n"
                                    "/mjob/leader/election | \n"
                                    "/mjob/leader/election/instance | ip2@-@4242\n"
                                    "/mjob/instances | \n"
                                    "/mjob/instances/ip2@-@4242 | \n"
                                    "/mjob/instances/ip1@-@77 | \n"
                                    "/mjob/config | " JAVA_CONFIG "\n";

struct fixture {
    zkf_server *zk;
    ej_registry *reg;
};

static void put(ej_registry *reg, const char *path, const char *data, ej_reg_mode mode)
{
    int rc =
        ej_registry_create_node(reg, path, data, strlen(data), mode, EJ_REG_CREATE_PARENTS, NULL);
    if (rc != 0)
        fail_msg("create %s: %s", path, ej_registry_errmsg(reg));
}

static void build_job(ej_registry *reg)
{
    put(reg, "/mjob/config", JAVA_CONFIG, EJ_REG_PERSISTENT);
    put(reg, "/mjob/servers/192.168.1.100", "", EJ_REG_PERSISTENT);
    put(reg, "/mjob/servers/10.0.0.2", "DISABLED", EJ_REG_PERSISTENT);
    put(reg, "/mjob/instances/192.168.1.100@-@4242", "", EJ_REG_EPHEMERAL);
    put(reg, "/mjob/instances/10.0.0.2@-@77", "", EJ_REG_EPHEMERAL);
    put(reg, "/mjob/leader/election/instance", "192.168.1.100@-@4242", EJ_REG_EPHEMERAL);
    put(reg, "/mjob/sharding/0/instance", "192.168.1.100@-@4242", EJ_REG_PERSISTENT);
    put(reg, "/mjob/sharding/1/instance", "192.168.1.1@-@9", EJ_REG_PERSISTENT);
    put(reg, "/mjob/sharding/10/instance", "192.168.1.100@-@4242", EJ_REG_PERSISTENT);
    put(reg, "/mjob/sharding/2/instance", "10.0.0.2@-@77", EJ_REG_PERSISTENT);
    put(reg, "/mjob/sharding/2/running", "", EJ_REG_EPHEMERAL);
}

static int setup(void **state)
{
    struct fixture *f = calloc(1, sizeof(*f));
    f->zk = zkf_shared();
    assert_non_null(f->zk);
    char *ns = zkf_unique_namespace("monitor");
    struct ej_registry_opts opts = {.servers = zkf_connect_string(f->zk), .namespace_ = ns};
    assert_int_equal(ej_registry_create(&f->reg, &opts), 0);
    free(ns);
    build_job(f->reg);
    *state = f;
    return 0;
}

static int teardown(void **state)
{
    struct fixture *f = *state;
    ej_registry_destroy(f->reg);
    free(f);
    return 0;
}

static void test_dump_format(void **state)
{
    struct fixture *f = *state;
    char *out = NULL;
    assert_int_equal(ej_monitor_dump(f->reg, NULL, "mjob", &out), 0);
    assert_string_equal(out, expected_dump);
    free(out);
}

static void test_dump_raw_values_and_missing_job(void **state)
{
    struct fixture *f = *state;
    put(f->reg, "/njob/note", "line one\nline two", EJ_REG_PERSISTENT);
    char *out = NULL;
    assert_int_equal(ej_monitor_dump(f->reg, NULL, "njob", &out), 0);
    assert_string_equal(out, "/njob/note | line one\nline two\n");
    free(out);
    assert_int_equal(ej_monitor_dump(f->reg, NULL, "nosuchjob", &out), 0);
    assert_string_equal(out, "");
    free(out);
    assert_int_equal(ej_monitor_dump(f->reg, NULL, "a/b", &out), EJ_EINVAL);
    assert_int_equal(ej_monitor_dump(f->reg, NULL, "", &out), EJ_EINVAL);
}

/* Nodes the cache does not hold get four fields with empty cache columns. */
static void test_dump_with_cache(void **state)
{
    struct fixture *f = *state;
    ej_tree_cache *cache = NULL;
    assert_int_equal(ej_tree_cache_create(f->reg, "/mjob/sharding", NULL, NULL, &cache), 0);
    assert_int_equal(ej_tree_cache_start(cache), 0);
    assert_int_equal(ej_tree_cache_wait_initialized(cache, 10000), 0);
    char *out = NULL;
    assert_int_equal(ej_monitor_dump(f->reg, cache, "mjob", &out), 0);
    assert_non_null(strstr(out, "/mjob/sharding | \n/mjob/sharding/2 | \n"));
    assert_non_null(strstr(out, "\n/mjob/sharding/0/instance | ip2@-@4242\n"));
    assert_non_null(strstr(out, "\n/mjob/servers |  |  | \n"));
    assert_non_null(strstr(out, "\n/mjob/servers/ip1 | DISABLED |  | \n"));
    assert_non_null(strstr(out, "\n/mjob/config | " JAVA_CONFIG " |  | \n"));
    free(out);

    /* A cache of the whole job agrees everywhere: the plain format. */
    ej_tree_cache *whole = NULL;
    assert_int_equal(ej_tree_cache_create(f->reg, "/mjob", NULL, NULL, &whole), 0);
    assert_int_equal(ej_tree_cache_start(whole), 0);
    assert_int_equal(ej_tree_cache_wait_initialized(whole, 10000), 0);
    assert_int_equal(ej_monitor_dump(f->reg, whole, "mjob", &out), 0);
    assert_string_equal(out, expected_dump);
    free(out);
    ej_tree_cache_destroy(whole);
    ej_tree_cache_destroy(cache);
}

/* Send raw bytes, then read until the server closes. */
static char *exchange(int port, const char *bytes, size_t len, bool half_close)
{
    int fd = socket(AF_INET, SOCK_STREAM, 0);
    assert_true(fd >= 0);
    struct sockaddr_in sa = {.sin_family = AF_INET, .sin_port = htons((uint16_t)port)};
    sa.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    assert_int_equal(connect(fd, (struct sockaddr *)&sa, sizeof(sa)), 0);
    if (len > 0)
        assert_int_equal(send(fd, bytes, len, 0), (ssize_t)len);
    if (half_close)
        shutdown(fd, SHUT_WR);
    static char buf[65536];
    size_t got = 0;
    for (;;) {
        struct pollfd p = {.fd = fd, .events = POLLIN};
        assert_int_equal(poll(&p, 1, 10000), 1);
        ssize_t n = recv(fd, buf + got, sizeof(buf) - 1 - got, 0);
        if (n <= 0)
            break;
        got += (size_t)n;
    }
    buf[got] = '\0';
    close(fd);
    return buf;
}

static void test_monitor_port(void **state)
{
    struct fixture *f = *state;
    ej_monitor *m = NULL;
    assert_int_equal(ej_monitor_start(f->reg, NULL, "mjob", NULL, 0, &m), 0);
    int port = ej_monitor_port(m);
    assert_true(port > 0);

    char *out = NULL;
    assert_int_equal(ej_monitor_query("127.0.0.1", port, "dump", 10000, &out), 0);
    assert_string_equal(out, expected_dump);
    free(out);
    /* Case-insensitive, and the line may end with \r\n or the input. */
    assert_string_equal(exchange(port, "DuMp\r\n", 6, false), expected_dump);
    assert_string_equal(exchange(port, "dump", 4, true), expected_dump);
    /* Anything else: closed without output. */
    assert_string_equal(exchange(port, "stat\n", 5, false), "");
    assert_string_equal(exchange(port, "dump now\n", 9, false), "");
    assert_string_equal(exchange(port, "", 0, true), "");
    assert_int_equal(ej_monitor_query("127.0.0.1", port, "dump@mjob", 10000, &out), 0);
    assert_string_equal(out, "");
    free(out);
    for (int i = 0; i < 200 && ej_monitor_served(m) < 7; i++)
        usleep(10000);
    assert_true(ej_monitor_served(m) >= 7);

    /* The port is taken: a second monitor fails, as ElasticJob's second bind does. */
    ej_monitor *m2 = NULL;
    assert_int_equal(ej_monitor_start(f->reg, NULL, "mjob", "127.0.0.1", port, &m2), -EADDRINUSE);
    assert_null(m2);
    ej_monitor_stop(m);
    assert_int_equal(ej_monitor_query("127.0.0.1", port, "dump", 2000, &out), -ECONNREFUSED);
}

static void test_monitor_bad_arguments(void **state)
{
    struct fixture *f = *state;
    ej_monitor *m = NULL;
    assert_int_equal(ej_monitor_start(f->reg, NULL, "mjob", NULL, -1, &m), EJ_EINVAL);
    assert_int_equal(ej_monitor_start(f->reg, NULL, "mjob", NULL, 65536, &m), EJ_EINVAL);
    assert_int_equal(ej_monitor_start(f->reg, NULL, "a/b", NULL, 0, &m), EJ_EINVAL);
    assert_int_equal(ej_monitor_start(f->reg, NULL, "mjob", "localhost", 0, &m), EJ_EINVAL);
    assert_int_equal(ej_monitor_start(f->reg, NULL, "mjob", NULL, 0, NULL), EJ_EINVAL);
    assert_null(m);
    /* IPv6 loopback works when the host has it. */
    if (ej_monitor_start(f->reg, NULL, "mjob", "::1", 0, &m) == 0) {
        char *out = NULL;
        assert_int_equal(ej_monitor_query("::1", ej_monitor_port(m), "dump", 10000, &out), 0);
        assert_string_equal(out, expected_dump);
        free(out);
        ej_monitor_stop(m);
    }
}

/* A client that connects and sends nothing does not block the port for
 * others longer than the read timeout. */
static void test_silent_client(void **state)
{
    struct fixture *f = *state;
    ej_monitor *m = NULL;
    assert_int_equal(ej_monitor_start(f->reg, NULL, "mjob", NULL, 0, &m), 0);
    int port = ej_monitor_port(m);
    int fd = socket(AF_INET, SOCK_STREAM, 0);
    struct sockaddr_in sa = {.sin_family = AF_INET, .sin_port = htons((uint16_t)port)};
    sa.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    assert_int_equal(connect(fd, (struct sockaddr *)&sa, sizeof(sa)), 0);
    char *out = NULL;
    assert_int_equal(
        ej_monitor_query("127.0.0.1", port, "dump", EJ_MONITOR_READ_TIMEOUT_MS + 5000, &out), 0);
    assert_string_equal(out, expected_dump);
    free(out);
    close(fd);
    /* Stop does not wait for anything. */
    ej_monitor_stop(m);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test_setup_teardown(test_dump_format, setup, teardown),
        cmocka_unit_test_setup_teardown(test_dump_raw_values_and_missing_job, setup, teardown),
        cmocka_unit_test_setup_teardown(test_dump_with_cache, setup, teardown),
        cmocka_unit_test_setup_teardown(test_monitor_port, setup, teardown),
        cmocka_unit_test_setup_teardown(test_monitor_bad_arguments, setup, teardown),
        cmocka_unit_test_setup_teardown(test_silent_client, setup, teardown),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
