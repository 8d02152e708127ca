/*
 * The floor of rss_bench: a program that does nothing but wait. Built twice
 * (bench/CMakeLists.txt): rss_floor_libc linked with nothing else, and
 * rss_floor linked with every shared library the ejob binary needs, so its
 * resident memory is what loading them costs before any of our code runs.
 * Prints "READY" once started; exits on SIGTERM or when stdin closes.
 */
#include <stdio.h>
#include <unistd.h>

int main(void)
{
    printf("READY\n");
    fflush(stdout);
    char c;
    while (read(0, &c, 1) > 0)
        ;
    return 0;
}
