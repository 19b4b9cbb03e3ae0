/*
 * mpi_barrier_pair: the MPI side of bench/pair.sh, as
 * cli/bench/barrier_pair.c (see there): passes of ITERS pairs of
 * MPI_Barrier and the call, the slowest rank's time per pair, the median
 * of five passes; with -m stamps, one pass stamped as there (the same
 * CLOCK_MONOTONIC, not MPI_Wtime, which need not be one clock for all);
 * with -m loop, the calls back to back without the barriers.
 *
 *   mpirun -n N mpi_barrier_pair [-o OP] [-b BYTES] [-n ITERS]
 *                                [-m pairs|stamps|loop]
 *
 * Built by bench/pair.sh with mpicc.openmpi and mpicc.mpich.
 */
#include <mpi.h>
#include <stdio.h>
#include <stdlib.h>

#include "bench_clock.h"
#include "pair_opts.h"

static int call(const char *op, float *in, float *out, int count)
{
    if (strcmp(op, "all_reduce") == 0)
        return MPI_Allreduce(in, out, count, MPI_FLOAT, MPI_SUM,
                             MPI_COMM_WORLD);
    if (strcmp(op, "all_gather") == 0)
        return MPI_Allgather(in, count, MPI_FLOAT, out, count, MPI_FLOAT,
                             MPI_COMM_WORLD);
    if (strcmp(op, "all_to_all") == 0)
        return MPI_Alltoall(in, count, MPI_FLOAT, out, count, MPI_FLOAT,
                            MPI_COMM_WORLD);
    if (strcmp(op, "broadcast") == 0)
        return MPI_Bcast(out, count, MPI_FLOAT, 0, MPI_COMM_WORLD);
    return MPI_Barrier(MPI_COMM_WORLD);
}

/* -m stamps, as barrier_pair.c's; 2 without memory. */
static int stamped(const struct pair_opts *o, float *in, float *out,
                   int count, int rank, int n)
{
    int k = (int)(o->iters * PAIR_STAMPS);
    double *st, *all;
    if (pair_stamp_bufs(o, n, &st, &all) < 0)
        return 2;
    for (long i = 0; i < 1000; i++) {
        MPI_Barrier(MPI_COMM_WORLD);
        call(o->op, in, out, count);
    }
    for (long i = 0; i < o->iters; i++) {
        double *s = st + (size_t)i * PAIR_STAMPS;
        s[0] = bench_clock_s(CLOCK_MONOTONIC);
        MPI_Barrier(MPI_COMM_WORLD);
        s[1] = bench_clock_s(CLOCK_MONOTONIC);
        call(o->op, in, out, count);
        s[2] = bench_clock_s(CLOCK_MONOTONIC);
    }
    MPI_Gather(st, k, MPI_DOUBLE, all, k, MPI_DOUBLE, 0, MPI_COMM_WORLD);
    int rc = rank == 0 && pair_stamps_print(o, all, n) < 0 ? 2 : 0;
    free(st);
    free(all);
    return rc;
}

int main(int argc, char **argv)
{
    MPI_Init(&argc, &argv);
    int rank, n;
    MPI_Comm_rank(MPI_COMM_WORLD, &rank);
    MPI_Comm_size(MPI_COMM_WORLD, &n);
    struct pair_opts o;
    int bad = pair_opts_parse(argc, argv, &o);
    size_t count = bad ? 0 : pair_count(&o, n), total = o.bytes / sizeof(float);
    float *in = calloc(total + 1, sizeof(float));
    float *out = calloc(total + 1, sizeof(float));
    if (count == 0 || !in || !out) {
        if (rank == 0)
            fprintf(stderr, "usage: mpi_barrier_pair [-o OP] [-b BYTES] "
                            "[-n ITERS] [-m pairs|stamps|loop] (a block of at "
                            "least 4 bytes)\n");
        MPI_Finalize();
        return 2;
    }
    if (o.mode == PAIR_MODE_STAMPS) {
        int rc = stamped(&o, in, out, (int)count, rank, n);
        if (rc)
            fprintf(stderr, "mpi_barrier_pair: no memory for the stamps\n");
        free(in);
        free(out);
        MPI_Finalize();
        return rc ? 1 : 0;
    }
    double pass[PAIR_PASSES];
    for (int p = 0; p < PAIR_PASSES; p++) {
        MPI_Barrier(MPI_COMM_WORLD);
        double t0 = MPI_Wtime();
        for (long i = 0; i < o.iters; i++) {
            if (o.mode != PAIR_MODE_LOOP)
                MPI_Barrier(MPI_COMM_WORLD);
            call(o.op, in, out, (int)count);
        }
        pass[p] = (MPI_Wtime() - t0) * 1e6 / (double)o.iters;
        MPI_Allreduce(MPI_IN_PLACE, &pass[p], 1, MPI_DOUBLE, MPI_MAX,
                      MPI_COMM_WORLD);
    }
    if (rank == 0)
        printf("%s %s %d %zu %.3f\n", o.mode == PAIR_MODE_LOOP ? "loop" : "pair",
               o.op, n, o.bytes, pair_median(pass));
    free(in);
    free(out);
    MPI_Finalize();
    return 0;
}
