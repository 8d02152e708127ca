/*
 * A private PostgreSQL server for tests and benchmarks: Debian's server
 * (/usr/lib/postgresql/N/bin) initdb'd into a temporary directory as an
 * unprivileged user (initdb refuses root), listening on a free loopback
 * port, with password authentication (user "ejob", password
 * PGF_PASSWORD). It is a child of the calling process (and dies with it:
 * PR_SET_PDEATHSIG), stopped and killed by pid.
 *
 *   struct pgf pg; if (pgf_init(&pg) != 0) skip;   initdb
 *   pgf_start(&pg);  pgf_kill(&pg);  pgf_start(&pg);  (same data, same port)
 *   pgf_fini(&pg);   stop, remove the directory
 */
#ifndef EJ_TRACE_PG_FIXTURE_H
#define EJ_TRACE_PG_FIXTURE_H

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <stdbool.h>
#include <glob.h>
#include <libpq-fe.h>
#include <netinet/in.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/prctl.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#define PGF_PASSWORD "ejob-secret"

struct pgf {
    char bin[256];
    char dir[256];
    char url[512]; /* postgresql://ejob@127.0.0.1:PORT/postgres */
    int port;
    pid_t pid;
    uid_t uid;
};

__attribute__((unused)) static int pgf_free_port(void)
{
    int s = socket(AF_INET, SOCK_STREAM, 0);
    struct sockaddr_in a = {.sin_family = AF_INET, .sin_addr.s_addr = htonl(INADDR_LOOPBACK)};
    socklen_t len = sizeof a;
    int port = -1;
    if (s >= 0 && bind(s, (struct sockaddr *)&a, sizeof a) == 0 &&
        getsockname(s, (struct sockaddr *)&a, &len) == 0)
        port = ntohs(a.sin_port);
    if (s >= 0)
        close(s);
    return port;
}

/* Runs argv (as the fixture's user when root); returns its exit status. */
__attribute__((unused)) static int pgf_run(struct pgf *p, char *const argv[], const char *log)
{
    pid_t pid = fork();
    if (pid == 0) {
        int fd = open(log, O_WRONLY | O_CREAT | O_APPEND, 0644);
        if (fd >= 0) {
            dup2(fd, 1);
            dup2(fd, 2);
        }
        if (getuid() == 0 && (setgid(p->uid) != 0 || setuid(p->uid) != 0))
            _exit(126);
        execv(argv[0], argv);
        _exit(127);
    }
    int st = 0;
    while (waitpid(pid, &st, 0) < 0 && errno == EINTR)
        ;
    return WIFEXITED(st) ? WEXITSTATUS(st) : 128;
}

/* 0 ready; -1 no server binaries (skip); other failures abort. */
__attribute__((unused)) static int pgf_init(struct pgf *p)
{
    memset(p, 0, sizeof *p);
    glob_t g;
    if (glob("/usr/lib/postgresql/*/bin/postgres", 0, NULL, &g) != 0 || g.gl_pathc == 0) {
        fprintf(stderr, "pgfixture: no /usr/lib/postgresql/*/bin/postgres (apt-get install "
                        "postgresql)\n");
        return -1;
    }
    snprintf(p->bin, sizeof p->bin, "%s", g.gl_pathv[g.gl_pathc - 1]);
    globfree(&g);
    *strrchr(p->bin, '/') = '\0';
    p->uid = getuid() == 0 ? 65534 : getuid(); /* nobody */
    snprintf(p->dir, sizeof p->dir, "/tmp/ejob-pg-XXXXXX");
    if (mkdtemp(p->dir) == NULL)
        abort();
    if (getuid() == 0 && chown(p->dir, p->uid, p->uid) != 0)
        abort();
    char pw[320], data[320], log[320], initdb[320];
    snprintf(pw, sizeof pw, "%s/pw", p->dir);
    snprintf(data, sizeof data, "%s/data", p->dir);
    snprintf(log, sizeof log, "%s/initdb.log", p->dir);
    snprintf(initdb, sizeof initdb, "%s/initdb", p->bin);
    FILE *f = fopen(pw, "w");
    fprintf(f, "%s\n", PGF_PASSWORD);
    fclose(f);
    if (getuid() == 0 && chown(pw, p->uid, p->uid) != 0)
        abort();
    char *argv[] = {initdb,     "-D", data, "-U",   "ejob",      "-A", "scram-sha-256",
                    "--pwfile", pw,   "-E", "UTF8", "--no-sync", NULL};
    int rc = pgf_run(p, argv, log);
    if (rc != 0) {
        fprintf(stderr, "pgfixture: initdb failed (%d), see %s\n", rc, log);
        abort();
    }
    p->port = pgf_free_port();
    snprintf(p->url, sizeof p->url, "postgresql://ejob@127.0.0.1:%d/postgres", p->port);
    return 0;
}

__attribute__((unused)) static bool pgf_ready(const struct pgf *p)
{
    char conn[600];
    snprintf(conn, sizeof conn, "%s?connect_timeout=2", p->url);
    return PQping(conn) == PQPING_OK;
}

__attribute__((unused)) static void pgf_start(struct pgf *p)
{
    char data[320], log[320], port[16], postgres[320];
    snprintf(data, sizeof data, "%s/data", p->dir);
    snprintf(log, sizeof log, "%s/server.log", p->dir);
    snprintf(postgres, sizeof postgres, "%s/postgres", p->bin);
    snprintf(port, sizeof port, "%d", p->port);
    pid_t pid = fork();
    if (pid == 0) {
        int fd = open(log, O_WRONLY | O_CREAT | O_APPEND, 0644);
        if (fd >= 0) {
            dup2(fd, 1);
            dup2(fd, 2);
        }
        prctl(PR_SET_PDEATHSIG, SIGKILL);
        if (getuid() == 0 && (setgid(p->uid) != 0 || setuid(p->uid) != 0))
            _exit(126);
        execl(postgres, postgres, "-D", data, "-p", port, "-k", p->dir, "-c",
              "listen_addresses=127.0.0.1", "-c", "fsync=off", "-c", "max_connections=50", "-c",
              "shared_buffers=16MB", (char *)NULL);
        _exit(127);
    }
    p->pid = pid;
    for (int i = 0; i < 600; i++) {
        if (pgf_ready(p))
            return;
        if (waitpid(pid, NULL, WNOHANG) == pid) {
            fprintf(stderr, "pgfixture: postgres exited, see %s\n", log);
            abort();
        }
        struct timespec ts = {0, 50 * 1000 * 1000};
        nanosleep(&ts, NULL);
    }
    fprintf(stderr, "pgfixture: postgres did not start, see %s\n", log);
    abort();
}

/* Kills the server (SIGKILL to the postmaster, then to its backends, by
 * pid) as a crash would. */
__attribute__((unused)) static void pgf_kill(struct pgf *p)
{
    if (p->pid <= 0)
        return;
    /* The backends are the postmaster's children: find them first. */
    pid_t kids[256];
    int n = 0;
    DIR *d = opendir("/proc");
    struct dirent *e;
    while (d && (e = readdir(d)) != NULL && n < 256) {
        char path[300], buf[512];
        snprintf(path, sizeof path, "/proc/%s/stat", e->d_name);
        FILE *f = fopen(path, "r");
        if (f == NULL)
            continue;
        size_t len = fread(buf, 1, sizeof buf - 1, f);
        fclose(f);
        buf[len] = '\0';
        char *rp = strrchr(buf, ')');
        int ppid = 0;
        if (rp && sscanf(rp + 2, "%*c %d", &ppid) == 1 && ppid == p->pid)
            kids[n++] = (pid_t)atoi(e->d_name);
    }
    if (d)
        closedir(d);
    kill(p->pid, SIGKILL);
    for (int i = 0; i < n; i++)
        kill(kids[i], SIGKILL);
    waitpid(p->pid, NULL, 0);
    p->pid = 0;
    /* Let the kernel release the port and the backends exit. */
    struct timespec ts = {0, 200 * 1000 * 1000};
    nanosleep(&ts, NULL);
}

__attribute__((unused)) static void pgf_fini(struct pgf *p)
{
    if (p->pid > 0) {
        kill(p->pid, SIGTERM);
        for (int i = 0; i < 100 && waitpid(p->pid, NULL, WNOHANG) == 0; i++) {
            struct timespec ts = {0, 50 * 1000 * 1000};
            nanosleep(&ts, NULL);
        }
        pgf_kill(p);
    }
    char cmd[400];
    snprintf(cmd, sizeof cmd, "rm -rf '%s'", p->dir);
    if (p->dir[0] && system(cmd) != 0)
        fprintf(stderr, "pgfixture: could not remove %s\n", p->dir);
}

/* Runs SQL on the server (as ejob); returns the first value of the first
 * row (caller frees) or NULL. */
__attribute__((unused)) static char *pgf_query(const struct pgf *p, const char *sql)
{
    const char *keys[] = {"dbname", "password", NULL};
    const char *vals[] = {p->url, PGF_PASSWORD, NULL};
    PGconn *c = PQconnectdbParams(keys, vals, 1);
    char *out = NULL;
    if (PQstatus(c) == CONNECTION_OK) {
        PGresult *r = PQexec(c, sql);
        if ((PQresultStatus(r) == PGRES_TUPLES_OK) && PQntuples(r) > 0)
            out = strdup(PQgetvalue(r, 0, 0));
        else if (PQresultStatus(r) == PGRES_COMMAND_OK)
            out = strdup("");
        else
            fprintf(stderr, "pgfixture: %s: %s", sql, PQresultErrorMessage(r));
        PQclear(r);
    }
    PQfinish(c);
    return out;
}

#endif
