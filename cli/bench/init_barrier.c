/*
 * init_barrier: fccl's side of the job start-up benchmark.  Every rank
 * joins through env:// (fccl_init), runs one barrier on the world and
 * calls fccl_finalize; bench/bootstrap.sh times the launcher:
 *
 *   fccl-run -n N build/bench/init_barrier [-v]
 *
 * With -v, every rank first prints its own figures as one line (so they
 * exist even if a later step fails; bench/init_scale.sh summarizes them):
 *
 *   stats RANK N age premain_cpu init init_cpu fabric_cpu store_cpu
 *         neighbours_cpu gather_cpu world_cpu barrier_cpu bar total_cpu
 *         t_main t_init_done
 *
 * in seconds: process start -> main() (from /proc/self/stat, 10 ms
 * ticks), the CPU spent before main() (exec, loading libfabric), the
 * fccl_init wall and CPU time, the CPU of init's phases (the libfabric
 * open thread's own, the store connect (which runs alongside it), the
 * neighbours' records, the record gather, building the world, init's
 * barrier; bootstrap/boot.h), the timed barrier's wall time, the
 * process's CPU at the end of fccl_finalize, and the wall clock at main()
 * and at init done.  Then the ranks all_gather their timestamps (not
 * part of anything timed) and rank 0 prints, per phase, the slowest and
 * the median rank and the time from the last rank's arrival at main() to
 * the last rank's init done (what bench/gloo_init_barrier.py reports for
 * Gloo).
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "boot.h"
#include "bench_clock.h"
#include "fccl/fccl.h"

enum { F_AGE, F_MAIN, F_INIT_DONE, F_INIT, F_INIT_CPU, F_BAR, F_N };

static int cmp_double(const void *a, const void *b)
{
    double x = *(const double *)a, y = *(const double *)b;
    return (x > y) - (x < y);
}

/* Median and maximum of field f over the ranks' rows. */
static void stat_of(const double *all, int n, int f, double *med, double *max)
{
    double *col = malloc(sizeof(double) * (size_t)n);
    if (!col) {
        *med = *max = -1;
        return;
    }
    for (int r = 0; r < n; r++)
        col[r] = all[r * F_N + f];
    qsort(col, (size_t)n, sizeof(double), cmp_double);
    *med = col[n / 2];
    *max = col[n - 1];
    free(col);
}

static int report(fccl_group_t *w, const double *mine)
{
    int n = fccl_group_size(w);
    double *all = malloc(sizeof(double) * F_N * (size_t)n);
    if (!all)
        return FCCL_ERR_NOMEM;
    int rc = fccl_all_gather(mine, all, F_N, FCCL_FLOAT64, w, NULL);
    if (rc == FCCL_OK && fccl_group_rank(w) == 0) {
        static const char *names[] = {"start->main", NULL, NULL, "init",
                                      "init cpu", "barrier"};
        double med, max, last_main, last_done;
        printf("fccl N=%d per rank (median / max):", n);
        for (int f = 0; f < F_N; f++) {
            if (!names[f])
                continue;
            stat_of(all, n, f, &med, &max);
            printf(" %s %.3f/%.3f s;", names[f], med, max);
        }
        stat_of(all, n, F_MAIN, &med, &last_main);
        stat_of(all, n, F_INIT_DONE, &med, &last_done);
        printf(" last main() -> last init done %.3f s\n",
               last_done - last_main);
        fflush(stdout);
    }
    free(all);
    return rc;
}

/* This rank's line (see the top of the file); flushed at once. */
static void print_mine(int me, int n, const double *mine, double cpu0)
{
    const struct boot_init_stats *st = boot_last_init_stats();
    printf("stats %d %d %.4f %.6f %.4f %.6f %.6f", me, n, mine[F_AGE], cpu0,
           mine[F_INIT], mine[F_INIT_CPU], st->fabric_cpu_ms / 1e3);
    for (int i = 0; i < BOOT_PH_N; i++)
        printf(" %.6f", st->cpu_ms[i] / 1e3);
    printf(" %.4f %.6f %.6f\n", mine[F_BAR], mine[F_MAIN],
           mine[F_INIT_DONE]);
    fflush(stdout);
}

int main(int argc, char **argv)
{
    double mine[F_N];
    mine[F_AGE] = bench_process_age_s();
    mine[F_MAIN] = bench_clock_s(CLOCK_REALTIME);
    double cpu0 = bench_clock_s(CLOCK_PROCESS_CPUTIME_ID);
    int verbose = argc > 1 && strcmp(argv[1], "-v") == 0;

    fccl_init_opts_t opts;
    fccl_init_opts_init(&opts);
    fccl_group_t *world = NULL;
    int rc = fccl_init(&opts, &world);
    if (rc < 0) {
        fprintf(stderr, "init_barrier: fccl_init: %s (%s)\n",
                fccl_strerror(rc), fccl_last_error());
        return 1;
    }
    mine[F_INIT_DONE] = bench_clock_s(CLOCK_REALTIME);
    mine[F_INIT] = mine[F_INIT_DONE] - mine[F_MAIN];
    mine[F_INIT_CPU] = bench_clock_s(CLOCK_PROCESS_CPUTIME_ID) - cpu0;
    rc = fccl_barrier(world, NULL);
    mine[F_BAR] = bench_clock_s(CLOCK_REALTIME) - mine[F_INIT_DONE];
    int me = fccl_get_rank();
    if (rc == FCCL_OK && verbose)
        print_mine(me, fccl_group_size(world), mine, cpu0);
    if (rc == FCCL_OK && verbose)
        rc = report(world, mine);
    if (rc < 0)
        fprintf(stderr, "init_barrier: rank %d: %s (%s)\n", me,
                fccl_strerror(rc), fccl_last_error());
    fccl_finalize();
    if (verbose) /* the whole process's CPU, finalize included */
        printf("total_cpu %d %.4f\n", me,
               bench_clock_s(CLOCK_PROCESS_CPUTIME_ID));
    return rc < 0 ? 1 : 0;
}
