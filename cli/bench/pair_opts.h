/*
 * pair_opts.h: what barrier_pair.c (fccl) and mpi_barrier_pair.c (MPI)
 * share: their options, the elements of a call's buffer or block, and the
 * median of their passes.  bench/pair.sh runs both.
 */
#ifndef FCCL_BENCH_PAIR_OPTS_H
#define FCCL_BENCH_PAIR_OPTS_H

#include <stdlib.h>
#include <string.h>

enum { PAIR_PASSES = 5 };

struct pair_opts {
    const char *op; /* all_reduce, all_gather, all_to_all, broadcast, barrier */
    size_t bytes;   /* fccl-bench's size convention */
    long iters;     /* pairs a pass */
};

/* -o OP -b BYTES -n ITERS, each optional; 0, or -1 on a bad value. */
static inline int pair_opts_parse(int argc, char **argv, struct pair_opts *o)
{
    *o = (struct pair_opts){"all_reduce", 8, 20000};
    for (int i = 1; i < argc; i += 2) {
        if (i + 1 == argc)
            return -1; /* an option without its value */
        if (strcmp(argv[i], "-o") == 0)
            o->op = argv[i + 1];
        else if (strcmp(argv[i], "-b") == 0)
            o->bytes = strtoul(argv[i + 1], NULL, 10);
        else if (strcmp(argv[i], "-n") == 0)
            o->iters = strtol(argv[i + 1], NULL, 10);
        else
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

/* The median of the passes' times (sorts them). */
static inline double pair_median(double *pass)
{
    qsort(pass, PAIR_PASSES, sizeof(double), pair_cmp);
    return pass[PAIR_PASSES / 2];
}

#endif
