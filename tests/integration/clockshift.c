/*
 * LD_PRELOAD shim for daemon_clock_test.sh: CLOCK_REALTIME read through
 * clock_gettime() is EJ_CLOCK_SHIFT_S seconds ahead (negative: behind), as
 * on a host whose clock is off. Other clocks are left alone.
 */
#ifndef _GNU_SOURCE
#define _GNU_SOURCE
#endif
#include <dlfcn.h>
#include <stdlib.h>
#include <time.h>

__attribute__((visibility("default"))) int clock_gettime(clockid_t id, struct timespec *ts)
{
    static int (*real)(clockid_t, struct timespec *);
    static long shift;
    static int init;
    if (!init) {
        real = (int (*)(clockid_t, struct timespec *))dlsym(RTLD_NEXT, "clock_gettime");
        const char *s = getenv("EJ_CLOCK_SHIFT_S");
        shift = s != NULL ? strtol(s, NULL, 10) : 0;
        init = 1;
    }
    int rc = real(id, ts);
    if (rc == 0 && id == CLOCK_REALTIME)
        ts->tv_sec += shift;
    return rc;
}
