/*
 * pair_opts.h: what barrier_pair.c (fccl) and mpi_barrier_pair.c (MPI)
 * share: their options, the elements of a call's buffer or block, the
 * median of their passes, and the reading of their stamps (-m stamps).
 * bench/pair.sh runs both.
 */
#ifndef FCCL_BENCH_PAIR_OPTS_H
#define FCCL_BENCH_PAIR_OPTS_H

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

enum { PAIR_PASSES = 5 };

/* What a pass times: a barrier and the call, ITERS times (pairs); one
 * stamped pass of them (stamps, pair_stamps below); or ITERS calls back to
 * back with no barrier between them, as a job's run of small collectives
 * (loop: each call starts when the one before ends on that rank). */
enum pair_mode { PAIR_MODE_PAIRS, PAIR_MODE_STAMPS, PAIR_MODE_LOOP };

struct pair_opts {
    const char *op; /* all_reduce, all_gather, all_to_all, broadcast, barrier */
    size_t bytes;   /* fccl-bench's size convention */
    long iters;     /* pairs (or calls) a pass */
    enum pair_mode mode;
};

static inline int pair_mode_parse(const char *s, enum pair_mode *m)
{
    static const char *const names[] = {"pairs", "stamps", "loop"};
    for (int i = 0; i < 3; i++)
        if (strcmp(s, names[i]) == 0) {
            *m = (enum pair_mode)i;
            return 0;
        }
    return -1;
}

/* -o OP -b BYTES -n ITERS -m pairs|stamps|loop, each optional; 0, or -1
 * on a bad value. */
static inline int pair_opts_parse(int argc, char **argv, struct pair_opts *o)
{
    *o = (struct pair_opts){"all_reduce", 8, 20000, PAIR_MODE_PAIRS};
    for (int i = 1; i < argc; i += 2) {
        if (i + 1 == argc)
            return -1; /* an option without its value */
        if (strcmp(argv[i], "-o") == 0)
            o->op = argv[i + 1];
        else if (strcmp(argv[i], "-b") == 0)
            o->bytes = strtoul(argv[i + 1], NULL, 10);
        else if (strcmp(argv[i], "-n") == 0)
            o->iters = strtol(argv[i + 1], NULL, 10);
        else if (strcmp(argv[i], "-m") != 0 ||
                 pair_mode_parse(argv[i + 1], &o->mode) < 0)
            return -1;
    }
    return o->iters < 1 || o->bytes < 4 ? -1 : 0;
}

/* float32 elements a call takes: the whole buffer (all_reduce,
 * broadcast), else one rank's block of it; 0 if a block would be empty. */
static inline size_t pair_count(const struct pair_opts *o, int nranks)
{
    size_t total = o->bytes / sizeof(float);
    int blocked = strcmp(o->op, "all_gather") == 0 ||
                  strcmp(o->op, "all_to_all") == 0;
    return blocked ? total / (size_t)nranks : total;
}

static inline int pair_cmp(const void *a, const void *b)
{
    double x = *(const double *)a, y = *(const double *)b;
    return (x > y) - (x < y);
}

/* The median of v[0..k) (sorts it). */
static inline double pair_median_of(double *v, long k)
{
    qsort(v, (size_t)k, sizeof(double), pair_cmp);
    return k % 2 ? v[k / 2] : (v[k / 2 - 1] + v[k / 2]) / 2;
}

/* The median of the passes' times (sorts them). */
static inline double pair_median(double *pass)
{
    return pair_median_of(pass, PAIR_PASSES);
}

/* -m stamps: each rank stamps every pair with CLOCK_MONOTONIC (one clock
 * for every process of the machine) as it enters the barrier, leaves it,
 * and leaves the call; rank 0 gathers the stamps, `st[(r * iters + i) *
 * PAIR_STAMPS + k]`, and reads three medians over the pairs, in us:
 *   time: the slowest rank's call, from its barrier's exit (fccl-bench's
 *         and mpi_coll's "time" column);
 *   skew: the last rank's exit from the barrier minus the first's;
 *   crit: the last rank's end of the call minus the last entry into the
 *         barrier: barrier and call once everyone has come, wherever each
 *         rank's own clock would start.
 * A barrier that lets one rank out early lengthens that rank's "time"
 * by the skew, while crit does not move.  0, or -1 without memory. */
enum { PAIR_STAMPS = 3 };

static inline int pair_stamps(const double *st, int n, long iters,
                              double *time, double *skew, double *crit)
{
    double *v = malloc(3 * (size_t)iters * sizeof(double));
    if (!v)
        return -1;
    double *vt = v, *vs = v + iters, *vc = v + 2 * iters;
    for (long i = 0; i < iters; i++) {
        const double *s = st + (size_t)i * PAIR_STAMPS; /* rank 0's */
        double slow = s[2] - s[1], out0 = s[1], out1 = s[1], in = s[0],
               end = s[2];
        for (int r = 1; r < n; r++) {
            s = st + ((size_t)r * iters + i) * PAIR_STAMPS;
            slow = s[2] - s[1] > slow ? s[2] - s[1] : slow;
            out0 = s[1] < out0 ? s[1] : out0;
            out1 = s[1] > out1 ? s[1] : out1;
            in = s[0] > in ? s[0] : in;
            end = s[2] > end ? s[2] : end;
        }
        vt[i] = slow * 1e6;
        vs[i] = (out1 - out0) * 1e6;
        vc[i] = (end - in) * 1e6;
    }
    *time = pair_median_of(vt, iters);
    *skew = pair_median_of(vs, iters);
    *crit = pair_median_of(vc, iters);
    free(v);
    return 0;
}

/* -m stamps: a rank's stamp buffer (iters pairs) and room for every
 * rank's (n); 0, or -1 without memory (neither then allocated). */
static inline int pair_stamp_bufs(const struct pair_opts *o, int n,
                                  double **st, double **all)
{
    size_t k = (size_t)o->iters * PAIR_STAMPS;
    *st = malloc(k * sizeof(double));
    *all = malloc((size_t)n * k * sizeof(double));
    if (*st && *all)
        return 0;
    free(*st);
    free(*all);
    return -1;
}

/* Rank 0's line of -m stamps, read from every rank's stamps; 0, or -1
 * without memory. */
static inline int pair_stamps_print(const struct pair_opts *o,
                                    const double *all, int n)
{
    double t, sk, cr;
    if (pair_stamps(all, n, o->iters, &t, &sk, &cr) < 0)
        return -1;
    printf("stamps %s %d %zu %.3f %.3f %.3f\n", o->op, n, o->bytes, t, sk,
           cr);
    return 0;
}

#endif
