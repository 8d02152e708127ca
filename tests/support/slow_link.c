/* The slow link (slow_link.h). */
#include "slow_link.h"

#include <arpa/inet.h>
#include <netinet/in.h>
#include <poll.h>
#include <stdint.h>
#include <stdlib.h>
#include <sys/socket.h>
#include <time.h>
#include <unistd.h>

#include "zk_fixture.h"

static int64_t now_ms(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (int64_t)ts.tv_sec * 1000 + ts.tv_nsec / 1000000;
}

struct held {
    struct held *next;
    int64_t due;
    size_t len;
    char buf[4096];
};

static int connect_zk(int port)
{
    struct sockaddr_in a = {.sin_family = AF_INET, .sin_port = htons((uint16_t)port)};
    a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    int fd = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
    if (fd >= 0 && connect(fd, (struct sockaddr *)&a, sizeof a) != 0) {
        close(fd);
        fd = -1;
    }
    return fd;
}

static bool write_all(int fd, const char *p, size_t n)
{
    while (n > 0) {
        ssize_t w = write(fd, p, n);
        if (w <= 0)
            return false;
        p += w;
        n -= (size_t)w;
    }
    return true;
}

/* One client connection until either side closes or the link stops. */
static void relay(slow_link *l, int cfd)
{
    int sfd = connect_zk(l->zk_port);
    struct held *head = NULL, **tail = &head;
    bool up = sfd >= 0;
    while (up && !atomic_load(&l->stop)) {
        int64_t now = now_ms();
        while (up && head != NULL && head->due <= now) {
            struct held *h = head;
            up = write_all(cfd, h->buf, h->len);
            head = h->next;
            if (head == NULL)
                tail = &head;
            free(h);
        }
        int wait = head ? (int)(head->due - now) : 50;
        struct pollfd p[2] = {{.fd = cfd, .events = POLLIN}, {.fd = sfd, .events = POLLIN}};
        if (!up || poll(p, 2, wait < 0 ? 0 : wait > 50 ? 50 : wait) < 0)
            break;
        if (p[0].revents) {
            char buf[4096];
            ssize_t r = read(cfd, buf, sizeof buf);
            up = r > 0 && write_all(sfd, buf, (size_t)r);
        }
        if (up && p[1].revents) {
            struct held *h = malloc(sizeof *h);
            ssize_t r = h ? read(sfd, h->buf, sizeof h->buf) : -1;
            up = r > 0;
            if (up) {
                h->next = NULL;
                h->due = now_ms() + l->delay_ms;
                h->len = (size_t)r;
                *tail = h;
                tail = &h->next;
            } else {
                free(h);
            }
        }
    }
    while (head != NULL) {
        struct held *h = head;
        head = h->next;
        free(h);
    }
    if (sfd >= 0)
        close(sfd);
    close(cfd);
}

/* One connection at a time: the test's one client (a reconnect comes
 * after the old one closed). */
static void *link_main(void *arg)
{
    slow_link *l = arg;
    while (!atomic_load(&l->stop)) {
        struct pollfd p = {.fd = l->lfd, .events = POLLIN};
        if (poll(&p, 1, 50) <= 0)
            continue;
        int cfd = accept4(l->lfd, NULL, NULL, SOCK_CLOEXEC);
        if (cfd >= 0)
            relay(l, cfd);
    }
    return NULL;
}

int slow_link_start(slow_link *l, int delay_ms)
{
    struct sockaddr_in a = {.sin_family = AF_INET};
    a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    socklen_t al = sizeof a;
    l->delay_ms = delay_ms;
    /* The shared server started here, not by the proxy thread: the server
     * dies with the thread that started it (its parent-death signal). */
    zkf_server *zk = zkf_shared();
    if (zk == NULL)
        return -1;
    l->zk_port = zkf_port(zk);
    l->lfd = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
    if (l->lfd < 0)
        return -1;
    if (bind(l->lfd, (struct sockaddr *)&a, sizeof a) != 0 || listen(l->lfd, 4) != 0 ||
        getsockname(l->lfd, (struct sockaddr *)&a, &al) != 0) {
        close(l->lfd);
        return -1;
    }
    l->port = ntohs(a.sin_port);
    atomic_init(&l->stop, false);
    if (pthread_create(&l->thread, NULL, link_main, l) != 0) {
        close(l->lfd);
        return -1;
    }
    return 0;
}

void slow_link_stop(slow_link *l)
{
    atomic_store(&l->stop, true);
    pthread_join(l->thread, NULL);
    close(l->lfd);
}
