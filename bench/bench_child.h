/*
 * The one child process a bench starts (a daemon or a job process): killed
 * by pid when the bench ends, however it ends. Include in one .c file;
 * set child after fork, call bench_child_guard() once.
 */
#ifndef EJ_BENCH_CHILD_H
#define EJ_BENCH_CHILD_H

#include <signal.h>
#include <stdlib.h>
#include <sys/types.h>
#include <sys/wait.h>

static pid_t child;

/* Kill and reap the child, if any (also at exit). */
static void kill_child(void)
{
    if (child > 0) {
        kill(child, SIGKILL);
        waitpid(child, NULL, 0);
        child = 0;
    }
}

static void bench_child_on_signal(int sig)
{
    if (child > 0)
        kill(child, SIGKILL);
    signal(sig, SIG_DFL);
    raise(sig);
}

/* At exit, SIGINT and SIGTERM: the child goes too. */
static void bench_child_guard(void)
{
    atexit(kill_child);
    signal(SIGINT, bench_child_on_signal);
    signal(SIGTERM, bench_child_on_signal);
}

#endif
