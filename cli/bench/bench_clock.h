/*
 * bench_clock.h: the clocks of the start-up benchmarks (fabric_floor,
 * init_barrier), among them how long this process has existed: what a
 * launch costs before main() counts too.
 */
#ifndef FCCL_BENCH_CLOCK_H
#define FCCL_BENCH_CLOCK_H

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

/* Clock `id` in seconds. */
static inline double bench_clock_s(clockid_t id)
{
    struct timespec ts;
    clock_gettime(id, &ts);
    return (double)ts.tv_sec + (double)ts.tv_nsec * 1e-9;
}

/* Seconds since this process started: CLOCK_BOOTTIME now minus the
 * starttime of /proc/self/stat (field 22, clock ticks since boot); -1 if
 * that file is unreadable. */
static inline double bench_process_age_s(void)
{
    char buf[1024];
    FILE *f = fopen("/proc/self/stat", "r");
    if (!f)
        return -1;
    size_t n = fread(buf, 1, sizeof(buf) - 1, f);
    fclose(f);
    buf[n] = '\0';
    char *p = strrchr(buf, ')');
    unsigned long long start = 0;
    /* After ") " come fields 3..; starttime is the 20th of those. */
    for (int field = 3; p && field <= 22; field++) {
        p = strchr(p + 1, ' ');
        if (p && field == 22)
            start = strtoull(p + 1, NULL, 10);
    }
    return bench_clock_s(CLOCK_BOOTTIME) -
           (double)start / (double)sysconf(_SC_CLK_TCK);
}

#endif
