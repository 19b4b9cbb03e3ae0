/*
 * mpi_barrier_pair: the MPI side of bench/pair.sh, as
 * cli/bench/barrier_pair.c (see there): passes of ITERS pairs of
 * MPI_Barrier and the call, the slowest rank's time per pair, the median
 * of five passes.
 *
 *   mpirun -n N mpi_barrier_pair [-o OP] [-b BYTES] [-n ITERS]
 *
 * Built by bench/pair.sh with mpicc.openmpi and mpicc.mpich.
 */
#include <mpi.h>
#include <stdio.h>
#include <stdlib.h>

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
                            "[-n ITERS] (a block of at least 4 bytes)\n");
        MPI_Finalize();
        return 2;
    }
    double pass[PAIR_PASSES];
    for (int p = 0; p < PAIR_PASSES; p++) {
        MPI_Barrier(MPI_COMM_WORLD);
        double t0 = MPI_Wtime();
        for (long i = 0; i < o.iters; i++) {
            MPI_Barrier(MPI_COMM_WORLD);
            call(o.op, in, out, (int)count);
        }
        pass[p] = (MPI_Wtime() - t0) * 1e6 / (double)o.iters;
        MPI_Allreduce(MPI_IN_PLACE, &pass[p], 1, MPI_DOUBLE, MPI_MAX,
                      MPI_COMM_WORLD);
    }
    if (rank == 0)
        printf("pair %s %d %zu %.3f\n", o.op, n, o.bytes, pair_median(pass));
    free(in);
    free(out);
    MPI_Finalize();
    return 0;
}
