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
#include <string.h>

enum { PASSES = 5 };

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

static int cmp_double(const void *a, const void *b)
{
    double x = *(const double *)a, y = *(const double *)b;
    return (x > y) - (x < y);
}

int main(int argc, char **argv)
{
    MPI_Init(&argc, &argv);
    int rank, n;
    MPI_Comm_rank(MPI_COMM_WORLD, &rank);
    MPI_Comm_size(MPI_COMM_WORLD, &n);
    const char *op = "all_reduce";
    size_t bytes = 8;
    long iters = 20000;
    for (int i = 1; i + 1 < argc; i += 2) {
        if (strcmp(argv[i], "-o") == 0)
            op = argv[i + 1];
        else if (strcmp(argv[i], "-b") == 0)
            bytes = strtoul(argv[i + 1], NULL, 10);
        else if (strcmp(argv[i], "-n") == 0)
            iters = strtol(argv[i + 1], NULL, 10);
    }
    int blocked = strcmp(op, "all_gather") == 0 ||
                  strcmp(op, "all_to_all") == 0;
    size_t total = bytes / sizeof(float);
    size_t count = blocked ? total / (size_t)n : total;
    float *in = calloc(total + 1, sizeof(float));
    float *out = calloc(total + 1, sizeof(float));
    if (iters < 1 || count == 0 || !in || !out) {
        if (rank == 0)
            fprintf(stderr, "usage: mpi_barrier_pair [-o OP] [-b BYTES] "
                            "[-n ITERS] (a block of at least 4 bytes)\n");
        MPI_Finalize();
        return 2;
    }
    double pass[PASSES];
    for (int p = 0; p < PASSES; p++) {
        MPI_Barrier(MPI_COMM_WORLD);
        double t0 = MPI_Wtime();
        for (long i = 0; i < iters; i++) {
            MPI_Barrier(MPI_COMM_WORLD);
            call(op, in, out, (int)count);
        }
        pass[p] = (MPI_Wtime() - t0) * 1e6 / (double)iters;
        MPI_Allreduce(MPI_IN_PLACE, &pass[p], 1, MPI_DOUBLE, MPI_MAX,
                      MPI_COMM_WORLD);
    }
    qsort(pass, PASSES, sizeof(double), cmp_double);
    if (rank == 0)
        printf("pair %s %d %zu %.3f\n", op, n, bytes, pass[PASSES / 2]);
    free(in);
    free(out);
    MPI_Finalize();
    return 0;
}
