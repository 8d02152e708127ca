/*
 * What the resident memory of a daemon with one job is made of, and its
 * floor. A real `ejob run` with one SCRIPT job (`/bin/true`, a fire every
 * second, history in SQLite as by default) on a private ZooKeeper is left
 * to settle, then its /proc/PID/smaps is summed up:
 *   - file-backed pages (code and read-only data of the binary and of each
 *     shared library, shared with every process that maps them) and
 *     anonymous pages, split into: data the loader wrote in the binary's and
 *     libraries' mappings (relocations, .data, .bss), the malloc heap and
 *     arenas, thread stacks (found from each thread's stack pointer in
 *     /proc/PID/task/TID/syscall), the rest;
 *   - the mappings holding most, by file.
 * The same for the floors (bench/rss_floor.c): a program that only waits,
 * linked with every library ejob needs; with those a daemon of SCRIPT jobs
 * uses (no libcurl, libpq, libmicrohttpd and what they pull in); with libc
 * alone. Then
 * the daemon again with M_ARENA_MAX 2 (MALLOC_ARENA_MAX=2): one malloc
 * arena per thread that allocates is most of what the daemon adds.
 *
 * RSS counts every page mapped, shared library pages in full; PSS divides
 * shared pages among the processes mapping them; private pages are what
 * the process alone holds.
 *
 * Usage: rss_bench [settle_seconds]   (default 10)
 *   $EJOB names the ejob binary (default ../ejob next to this program).
 */
#include <ctype.h>
#include <dirent.h>
#include <fcntl.h>
#include <limits.h>
#include <poll.h>
#include <signal.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/prctl.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include "bench_child.h"
#include "zk_fixture.h"

#define MAX_MAPS 4096
#define MAX_THREADS 256
#define TOP 12

struct map {
    uintptr_t lo, hi;
    char name[256];
    long rss, pss, priv, anon;
    bool stack;
};

struct breakdown {
    long rss, file, anon;
    long pss, priv;  /* shared pages divided among their users; private ones */
    long lib_anon;   /* written data in file mappings: relocations, .data */
    long heap;       /* [heap] and the arenas of malloc (64 MiB aligned) */
    long stacks;     /* mappings holding a thread's stack pointer */
    long other_anon; /* .bss of libraries and anything else */
    int threads, arenas;
};

static struct map maps[MAX_MAPS];
static size_t nmaps;
/* The files the daemon maps (its libraries), to compare the floor's with. */
static char libs[128][256];
static long lib_rss[128];
static size_t nlibs;
static char dir[64];



static bool read_maps(pid_t pid)
{
    char path[64];
    snprintf(path, sizeof path, "/proc/%d/smaps", (int)pid);
    FILE *f = fopen(path, "r");
    if (f == NULL)
        return false;
    nmaps = 0;
    char line[512];
    struct map *m = NULL;
    while (fgets(line, sizeof line, f)) {
        unsigned long lo, hi;
        int off = 0;
        if (sscanf(line, "%lx-%lx %*s %*s %*s %*s%n", &lo, &hi, &off) == 2 && off > 0) {
            if (nmaps == MAX_MAPS)
                break;
            m = &maps[nmaps++];
            memset(m, 0, sizeof *m);
            m->lo = lo;
            m->hi = hi;
            const char *n = line + off;
            while (isspace((unsigned char)*n))
                n++;
            snprintf(m->name, sizeof m->name, "%s", n);
            m->name[strcspn(m->name, "\n")] = '\0';
        } else if (m && strncmp(line, "Rss:", 4) == 0) {
            m->rss = strtol(line + 4, NULL, 10);
        } else if (m && strncmp(line, "Pss:", 4) == 0) {
            m->pss = strtol(line + 4, NULL, 10);
        } else if (m && strncmp(line, "Private_", 8) == 0) {
            m->priv += strtol(strchr(line, ':') + 1, NULL, 10);
        } else if (m && strncmp(line, "Anonymous:", 10) == 0) {
            m->anon = strtol(line + 10, NULL, 10);
        }
    }
    fclose(f);
    return nmaps > 0;
}

/* Mark the mappings that hold a thread's stack pointer; returns threads. */
static int mark_stacks(pid_t pid)
{
    char path[64];
    snprintf(path, sizeof path, "/proc/%d/task", (int)pid);
    DIR *d = opendir(path);
    if (d == NULL)
        return 0;
    int n = 0;
    struct dirent *e;
    while ((e = readdir(d)) != NULL) {
        if (e->d_name[0] == '.')
            continue;
        n++;
        char p[320], buf[512];
        snprintf(p, sizeof p, "/proc/%d/task/%s/syscall", (int)pid, e->d_name);
        FILE *f = fopen(p, "r");
        if (f == NULL)
            continue;
        bool got = fgets(buf, sizeof buf, f) != NULL;
        fclose(f);
        if (!got)
            continue;
        /* "nr a1 .. a6 sp pc" while blocked in a system call. */
        char *tok[10];
        int k = 0;
        for (char *s = strtok(buf, " \n"); s && k < 10; s = strtok(NULL, " \n"))
            tok[k++] = s;
        if (k < 9)
            continue;
        uintptr_t sp = (uintptr_t)strtoull(tok[7], NULL, 16);
        for (size_t i = 0; i < nmaps; i++)
            if (maps[i].lo <= sp && sp < maps[i].hi)
                maps[i].stack = true;
    }
    closedir(d);
    return n;
}

static bool is_anon_name(const char *n)
{
    return n[0] == '\0' || n[0] == '[';
}

static void summarize(pid_t pid, struct breakdown *b)
{
    memset(b, 0, sizeof *b);
    if (!read_maps(pid))
        return;
    b->threads = mark_stacks(pid);
    for (size_t i = 0; i < nmaps; i++) {
        const struct map *m = &maps[i];
        b->rss += m->rss;
        b->anon += m->anon;
        b->pss += m->pss;
        b->priv += m->priv;
        if (m->stack || strcmp(m->name, "[stack]") == 0) {
            b->stacks += m->rss;
        } else if (strcmp(m->name, "[heap]") == 0) {
            b->heap += m->rss;
        } else if (m->name[0] == '\0' && m->lo % (64u << 20) == 0) {
            b->heap += m->rss; /* a malloc arena's heap */
            b->arenas++;
        } else if (is_anon_name(m->name)) {
            b->other_anon += m->anon;
        } else {
            b->lib_anon += m->anon;
        }
    }
    b->file = b->rss - b->anon;
}

static int by_rss(const void *a, const void *b)
{
    const struct map *x = a, *y = b;
    return (y->rss > x->rss) - (y->rss < x->rss);
}

static bool is_lib(const char *n)
{
    return strstr(n, ".so") != NULL;
}

/* Index of a library in libs, or -1. */
static long lib_index(const char *name)
{
    for (size_t j = 0; j < nlibs; j++)
        if (strcmp(libs[j], name) == 0)
            return (long)j;
    return -1;
}

static void remember_libs(void)
{
    nlibs = 0;
    for (size_t i = 0; i < nmaps; i++) {
        if (!is_lib(maps[i].name))
            continue;
        long j = lib_index(maps[i].name);
        if (j < 0 && nlibs < 128) {
            j = (long)nlibs++;
            snprintf(libs[j], sizeof libs[0], "%s", maps[i].name);
            lib_rss[j] = 0;
        }
        if (j >= 0)
            lib_rss[j] += maps[i].rss;
    }
}

/* The floor's libraries against the daemon's, and what the daemon touched
 * in each beyond what loading it did (its code that ran). */
static void compare_libs(void)
{
    long floor_rss[128] = {0};
    bool in_floor[128] = {false};
    size_t extra = 0, same = 0;
    for (size_t i = 0; i < nmaps; i++) {
        if (!is_lib(maps[i].name))
            continue;
        long j = lib_index(maps[i].name);
        if (j >= 0) {
            floor_rss[j] += maps[i].rss;
            in_floor[j] = true;
            continue;
        }
        bool dup = false;
        for (size_t k = 0; k < i && !dup; k++)
            dup = strcmp(maps[k].name, maps[i].name) == 0;
        if (!dup) {
            extra++;
            printf("    only in the floor: %s\n", maps[i].name);
        }
    }
    for (size_t j = 0; j < nlibs; j++) {
        if (in_floor[j])
            same++;
        else
            printf("    not in the floor: %s\n", libs[j]);
    }
    printf("    the same %zu shared libraries as the daemon%s; the daemon holds more of:\n", same,
           same == nlibs && extra == 0 ? "" : " (and the differences above)");
    for (size_t j = 0; j < nlibs; j++) {
        const char *base = strrchr(libs[j], '/');
        if (lib_rss[j] - floor_rss[j] >= 32)
            printf("      %-34s +%ld kB\n", base ? base + 1 : libs[j], lib_rss[j] - floor_rss[j]);
    }
    printf("    and the floor's most:\n");
}

/* The mappings holding most, by file (anonymous ones are in the totals). */
static void print_top(void)
{
    /* Merge the mappings of one file into its first. */
    size_t n = 0;
    for (size_t i = 0; i < nmaps; i++) {
        if (is_anon_name(maps[i].name))
            continue;
        size_t j = 0;
        while (j < n && strcmp(maps[j].name, maps[i].name) != 0)
            j++;
        if (j == n)
            maps[n++] = maps[i];
        else {
            maps[j].rss += maps[i].rss;
            maps[j].anon += maps[i].anon;
        }
    }
    qsort(maps, n, sizeof *maps, by_rss);
    for (size_t i = 0; i < n && i < TOP; i++) {
        const char *base = strrchr(maps[i].name, '/');
        printf("      %-34s %6ld kB (%ld kB written)\n", base ? base + 1 : maps[i].name,
               maps[i].rss, maps[i].anon);
    }
}

enum { TOP_NONE, TOP_DAEMON, TOP_FLOOR };

static void print_breakdown(const char *what, pid_t pid, int top)
{
    struct breakdown b;
    summarize(pid, &b);
    if (top == TOP_DAEMON)
        remember_libs();
    printf("  %s: RSS %ld kB = file-backed %ld + anonymous %ld; PSS %ld, private %ld; %d "
           "thread(s)\n",
           what, b.rss, b.file, b.anon, b.pss, b.priv, b.threads);
    printf("    anonymous: library and binary data %ld kB, malloc heap and %d arena(s) %ld kB, "
           "thread stacks %ld kB, other %ld kB\n",
           b.lib_anon, b.arenas, b.heap, b.stacks, b.other_anon);
    if (top == TOP_FLOOR)
        compare_libs();
    if (top != TOP_NONE)
        print_top();
}

static pid_t spawn(char *const argv[], char *env_extra, const char *log)
{
    pid_t parent = getpid();
    pid_t pid = fork();
    if (pid == 0) {
        prctl(PR_SET_PDEATHSIG, SIGKILL);
        if (getppid() != parent)
            _exit(1);
        int fd = open(log, O_WRONLY | O_CREAT | O_TRUNC, 0600);
        if (fd >= 0) {
            dup2(fd, 1);
            dup2(fd, 2);
        }
        if (env_extra)
            putenv(env_extra);
        execv(argv[0], argv);
        _exit(127);
    }
    return pid;
}

/* A floor program: started, measured once it printed READY, stopped. */
static void floor_of(const char *self_dir, const char *prog, const char *what)
{
    char path[PATH_MAX];
    snprintf(path, sizeof path, "%s/%s", self_dir, prog);
    int pin[2], pout[2];
    if (pipe(pin) != 0 || pipe(pout) != 0)
        return;
    child = fork();
    if (child == 0) {
        prctl(PR_SET_PDEATHSIG, SIGKILL);
        dup2(pin[0], 0);
        dup2(pout[1], 1);
        close(pin[1]);
        close(pout[0]);
        execl(path, path, (char *)NULL);
        _exit(127);
    }
    close(pin[0]);
    close(pout[1]);
    char buf[16] = {0};
    struct pollfd p = {.fd = pout[0], .events = POLLIN};
    if (poll(&p, 1, 5000) == 1 && read(pout[0], buf, sizeof buf - 1) > 0 &&
        strncmp(buf, "READY", 5) == 0)
        print_breakdown(what, child, strcmp(prog, "rss_floor") == 0 ? TOP_FLOOR : TOP_NONE);
    else
        printf("  %s: %s did not start\n", what, path);
    close(pin[1]);
    close(pout[0]);
    waitpid(child, NULL, 0);
    child = 0;
}

/* One daemon with one job: started, left to settle, measured, stopped. */
static void daemon_run(const char *ejob, const char *yaml, int settle, char *env, const char *what)
{
    char state[128], log[128];
    snprintf(state, sizeof state, "%s/state", dir);
    snprintf(log, sizeof log, "%s/daemon.log", dir);
    char *argv[] = {(char *)ejob, "run", "-c", (char *)yaml, "--state-dir", state, NULL};
    child = spawn(argv, env, log);
    if (child < 0)
        return;
    sleep((unsigned)settle);
    if (waitpid(child, NULL, WNOHANG) != 0) {
        printf("  %s: the daemon exited (see %s)\n", what, log);
        child = 0;
        return;
    }
    print_breakdown(what, child, env == NULL ? TOP_DAEMON : TOP_NONE);
    kill(child, SIGTERM);
    waitpid(child, NULL, 0);
    child = 0;
}

int main(int argc, char **argv)
{
    int settle = argc > 1 ? atoi(argv[1]) : 10;
    if (settle < 2)
        settle = 2;
    char self[PATH_MAX - 64];
    ssize_t n = readlink("/proc/self/exe", self, sizeof self - 1);
    self[n > 0 ? n : 0] = '\0';
    char *slash = strrchr(self, '/');
    if (slash)
        *slash = '\0';
    char ejob[PATH_MAX];
    if (getenv("EJOB"))
        snprintf(ejob, sizeof ejob, "%s", getenv("EJOB"));
    else
        snprintf(ejob, sizeof ejob, "%s/../ejob", self);
    if (access(ejob, X_OK) != 0) {
        fprintf(stderr, "rss_bench: no ejob binary at %s (set EJOB)\n", ejob);
        return 1;
    }
    bench_child_guard();
    zkf_server *zk = zkf_shared();
    if (zk == NULL) {
        fprintf(stderr, "rss_bench: cannot start ZooKeeper\n");
        return 1;
    }
    snprintf(dir, sizeof dir, "/tmp/ejob-rss-%d", (int)getpid());
    mkdir(dir, 0700);
    char yaml[128];
    snprintf(yaml, sizeof yaml, "%s/one.yaml", dir);
    FILE *f = fopen(yaml, "w");
    if (f == NULL)
        return 1;
    char *ns = zkf_unique_namespace("rss");
    fprintf(f,
            "regCenter:\n  serverLists: %s\n  namespace: %s\njobs:\n  oneJob:\n"
            "    elasticJobType: SCRIPT\n    cron: \"0/1 * * * * ?\"\n"
            "    shardingTotalCount: 1\n    props:\n      script.command.line: /bin/true\n",
            zkf_connect_string(zk), ns);
    fclose(f);
    free(ns);
    printf("Resident memory (kB) of `ejob run` with one SCRIPT job (a fire a second, history in "
           "SQLite), after %d s, and its floor\n",
           settle);
    daemon_run(ejob, yaml, settle, NULL, "daemon");
    daemon_run(ejob, yaml, settle, "MALLOC_ARENA_MAX=2", "daemon, M_ARENA_MAX 2");
    floor_of(self, "rss_floor", "floor: a program that waits, linked with ejob's libraries");
    floor_of(self, "rss_floor_core",
             "floor: the same linked with libzookeeper_mt, libyaml, libjansson, libsqlite3 only");
    floor_of(self, "rss_floor_libc", "floor: the same linked with libc alone");
    char cmd[160];
    snprintf(cmd, sizeof cmd, "rm -rf %s", dir);
    if (system(cmd) != 0)
        fprintf(stderr, "rss_bench: cannot remove %s\n", dir);
    return 0;
}
