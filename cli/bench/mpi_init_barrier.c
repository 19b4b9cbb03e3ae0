/*
 * mpi_init_barrier: the MPI side of the job start-up benchmark.  Every rank
 * calls MPI_Init, one MPI_Barrier and MPI_Finalize; the launcher's wall
 * time (measured by bench/bootstrap.sh) is the number that counts.
 *
 * Built by bench/bootstrap.sh twice, with mpicc.openmpi and mpicc.mpich,
 * not by the Makefile (it filters out cli/bench/mpi_*.c).
 *
 * With -v, rank 0 prints how long MPI_Init, the barrier and MPI_Finalize
 * took on its side, and the spread of the ranks' arrival times at main()
 * (gathered after the barrier, so it costs nothing that is timed).
 */
#include <mpi.h>
#include <stdio.h>
#include <string.h>
#include <time.h>

static double now_s(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_REALTIME, &ts);
    return (double)ts.tv_sec + (double)ts.tv_nsec * 1e-9;
}

/* After the barrier: the latest main() arrival among the ranks, so rank 0
 * can print "last arrival -> barrier done" like the other systems. */
static void report(double t_main, double t_init, double t_bar, int rank)
{
    double mine[2] = {t_main, t_init}, last[2];
    MPI_Reduce(mine, last, 2, MPI_DOUBLE, MPI_MAX, 0, MPI_COMM_WORLD);
    if (rank != 0)
        return;
    printf("mpi rank0: init %.3f s, barrier %.3f s; last main() arrival -> "
           "last init done %.3f s\n",
           t_init - t_main, t_bar - t_init, last[1] - last[0]);
}

int main(int argc, char **argv)
{
    double t_main = now_s();
    int verbose = argc > 1 && strcmp(argv[1], "-v") == 0;
    if (MPI_Init(&argc, &argv) != MPI_SUCCESS)
        return 1;
    double t_init = now_s();
    int rank = 0;
    MPI_Comm_rank(MPI_COMM_WORLD, &rank);
    if (MPI_Barrier(MPI_COMM_WORLD) != MPI_SUCCESS)
        return 1;
    double t_bar = now_s();
    if (verbose)
        report(t_main, t_init, t_bar, rank);
    MPI_Finalize();
    return 0;
}
