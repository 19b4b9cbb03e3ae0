/*
 * memcpy_bw: single-core memcpy bandwidth, the ceiling for a collective
 * whose ranks share one host (every byte is copied at least once).
 *
 *   memcpy_bw [MiB] [REPS]    defaults: 64 MiB buffers, best of 10
 *
 * Both buffers are touched first, so page faults are not timed.  Prints
 * bytes copied per second (each byte is read once and written once), in
 * GB/s (1e9), best and median over the repetitions.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

static double now_s(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + (double)ts.tv_nsec * 1e-9;
}

static int cmp_double(const void *a, const void *b)
{
    double x = *(const double *)a, y = *(const double *)b;
    return (x > y) - (x < y);
}

int main(int argc, char **argv)
{
    size_t mib = argc > 1 ? strtoull(argv[1], NULL, 10) : 64;
    int reps = argc > 2 ? atoi(argv[2]) : 10;
    if (mib == 0 || reps < 1 || reps > 1000) {
        fprintf(stderr, "usage: memcpy_bw [MiB > 0] [REPS 1..1000]\n");
        return 2;
    }
    size_t n = mib << 20;
    unsigned char *src = malloc(n), *dst = malloc(n);
    double *gbs = malloc(sizeof(double) * (size_t)reps);
    if (!src || !dst || !gbs) {
        fprintf(stderr, "memcpy_bw: out of memory for %zu MiB\n", mib);
        return 1;
    }
    memset(src, 1, n);
    memset(dst, 2, n);
    for (int i = 0; i < reps; i++) {
        src[(size_t)i * 4099 % n] = (unsigned char)i; /* defeat elision */
        double t = now_s();
        memcpy(dst, src, n);
        gbs[i] = (double)n / (now_s() - t) / 1e9;
    }
    unsigned sum = 0;
    for (size_t i = 0; i < n; i += 4096)
        sum += dst[i];
    qsort(gbs, (size_t)reps, sizeof(double), cmp_double);
    printf("memcpy %zu MiB: best %.2f GB/s, median %.2f GB/s (best of %d)"
           " [%u]\n",
           mib, gbs[reps - 1], gbs[reps / 2], reps, sum & 1);
    free(src);
    free(dst);
    free(gbs);
    return 0;
}
