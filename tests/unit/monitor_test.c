/* Unit tests of the monitor module: IP masking, the command line, argument
 * checks and the client against a local fake server. The dump itself and the
 * monitor port against ZooKeeper are in tests/integration/monitor_dump_itest.c. */
#include <errno.h>
#include <pthread.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>
#include <arpa/inet.h>
#include <netinet/in.h>
#include <sys/socket.h>

#include <cmocka.h>

#include "ejob/error.h"
#include "ejob/monitor.h"
#include "monitor/internal.h"

static void expect_mask(const char *in, const char *want)
{
    char *out = NULL;
    assert_int_equal(ej_monitor_mask_ips(in, &out), 0);
    assert_string_equal(out, want);
    free(out);
}

static void test_match_ipv4(void **state)
{
    (void)state;
    assert_int_equal(ej__monitor_match_ipv4("10.0.0.1"), 8);
    assert_int_equal(ej__monitor_match_ipv4("192.168.1.100@-@42"), 13);
    assert_int_equal(ej__monitor_match_ipv4("255.255.255.255"), 15);
    assert_int_equal(ej__monitor_match_ipv4("0.0.0.0"), 7);
    /* The last number is the longest valid prefix of its digits. */
    assert_int_equal(ej__monitor_match_ipv4("1.2.3.256"), 8);
    assert_int_equal(ej__monitor_match_ipv4("1.2.3.1000"), 9);
    /* Not addresses. */
    assert_int_equal(ej__monitor_match_ipv4("256.1.1.1"), 0);
    assert_int_equal(ej__monitor_match_ipv4("1.2.3"), 0);
    assert_int_equal(ej__monitor_match_ipv4("1.2.3."), 0);
    assert_int_equal(ej__monitor_match_ipv4("01.2.3.4"), 0);
    assert_int_equal(ej__monitor_match_ipv4("1..2.3"), 0);
    assert_int_equal(ej__monitor_match_ipv4(""), 0);
    assert_int_equal(ej__monitor_match_ipv4("a.b.c.d"), 0);
}

static void test_mask(void **state)
{
    (void)state;
    expect_mask("", "");
    expect_mask("no address here 2.1.5", "no address here 2.1.5");
    expect_mask("a 10.0.0.1 b 10.0.0.2 c 10.0.0.1", "a ip1 b ip2 c ip1");
    /* 192.168.1.1 and 192.168.1.100 are different addresses. */
    expect_mask("/j/instances/192.168.1.100@-@42 | \n/j/sharding/0/instance | 192.168.1.1@-@7\n"
                "/j/servers/192.168.1.100 | \n",
                "/j/instances/ip1@-@42 | \n/j/sharding/0/instance | ip2@-@7\n/j/servers/ip1 | \n");
    /* Scanning is leftmost, like a regex search without word boundaries. */
    expect_mask("1234.5.6.7", "1ip1");
    expect_mask("1.2.3.4.5", "ip1.5");
    expect_mask("x01.2.3.4", "x0ip1");
    char *out = NULL;
    assert_int_equal(ej_monitor_mask_ips(NULL, &out), EJ_EINVAL);
    assert_null(out);
    assert_int_equal(ej_monitor_mask_ips("x", NULL), EJ_EINVAL);
}

static void test_dump_command(void **state)
{
    (void)state;
    assert_true(ej__monitor_is_dump_command("dump", 4));
    assert_true(ej__monitor_is_dump_command("DUMP", 4));
    assert_true(ej__monitor_is_dump_command("DuMp", 4));
    assert_false(ej__monitor_is_dump_command("dumpx", 5));
    assert_false(ej__monitor_is_dump_command("dum", 3));
    assert_false(ej__monitor_is_dump_command("", 0));
    assert_false(ej__monitor_is_dump_command("dump ", 5));
}

static void test_bad_arguments(void **state)
{
    (void)state;
    ej_monitor *m = (ej_monitor *)&m;
    assert_int_equal(ej_monitor_start(NULL, NULL, "job", NULL, 0, &m), EJ_EINVAL);
    assert_null(m);
    char *out = NULL;
    assert_int_equal(ej_monitor_dump(NULL, NULL, "job", &out), EJ_EINVAL);
    assert_null(out);
    assert_int_equal(ej_monitor_query(NULL, 1, "dump", 100, &out), EJ_EINVAL);
    assert_int_equal(ej_monitor_query("127.0.0.1", 0, "dump", 100, &out), EJ_EINVAL);
    assert_int_equal(ej_monitor_query("127.0.0.1", 70000, "dump", 100, &out), EJ_EINVAL);
    assert_int_equal(ej_monitor_query("127.0.0.1", 1, "dump", 0, &out), EJ_EINVAL);
    assert_int_equal(ej_monitor_query("127.0.0.1", 1, NULL, 100, &out), EJ_EINVAL);
    assert_int_equal(ej_monitor_port(NULL), -1);
    assert_int_equal(ej_monitor_served(NULL), 0);
    ej_monitor_stop(NULL);
}

/* A listener on a free loopback port; returns its fd and port. */
static int listen_any(int *port)
{
    int fd = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
    assert_true(fd >= 0);
    struct sockaddr_in sa = {.sin_family = AF_INET};
    sa.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    assert_int_equal(bind(fd, (struct sockaddr *)&sa, sizeof(sa)), 0);
    assert_int_equal(listen(fd, 4), 0);
    socklen_t sl = sizeof(sa);
    assert_int_equal(getsockname(fd, (struct sockaddr *)&sa, &sl), 0);
    *port = ntohs(sa.sin_port);
    return fd;
}

struct fake {
    int listen_fd;
    char got[64];
    const char *reply;
    bool hang; /* read the line, then never answer or close */
};

static void *fake_server(void *arg)
{
    struct fake *f = arg;
    int fd = accept(f->listen_fd, NULL, NULL);
    if (fd < 0)
        return NULL;
    ssize_t n = recv(fd, f->got, sizeof(f->got) - 1, 0);
    if (n > 0)
        f->got[n] = '\0';
    if (f->hang) {
        char c;
        n = recv(fd, &c, 1, 0); /* until the client gives up */
    } else {
        n = send(fd, f->reply, strlen(f->reply), MSG_NOSIGNAL);
    }
    (void)n;
    close(fd);
    return NULL;
}

static void test_query_client(void **state)
{
    (void)state;
    int port;
    struct fake f = {.reply = "/j/config | x\n"};
    f.listen_fd = listen_any(&port);
    pthread_t t;
    assert_int_equal(pthread_create(&t, NULL, fake_server, &f), 0);
    char *out = NULL;
    assert_int_equal(ej_monitor_query("127.0.0.1", port, "dump", 5000, &out), 0);
    pthread_join(t, NULL);
    assert_string_equal(f.got, "dump\n");
    assert_string_equal(out, "/j/config | x\n");
    free(out);

    /* A server that never answers: bounded by the timeout. */
    f.hang = true;
    assert_int_equal(pthread_create(&t, NULL, fake_server, &f), 0);
    out = NULL;
    assert_int_equal(ej_monitor_query("127.0.0.1", port, "dump", 300, &out), EJ_ETIMEDOUT);
    assert_null(out);
    pthread_join(t, NULL);
    close(f.listen_fd);

    /* Nobody listening any more. */
    assert_int_equal(ej_monitor_query("127.0.0.1", port, "dump", 1000, &out), -ECONNREFUSED);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_match_ipv4),   cmocka_unit_test(test_mask),
        cmocka_unit_test(test_dump_command), cmocka_unit_test(test_bad_arguments),
        cmocka_unit_test(test_query_client),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
