/*
 * mpi_coll: OSU-style timing of MPI_Allreduce, MPI_Allgather,
 * MPI_Alltoall, MPI_Bcast (root 0), MPI_Reduce_scatter_block on float32
 * (sum) and MPI_Barrier, the MPI baseline for bench/coll.sh.
 *
 *   mpirun -n N mpi_coll [-o all_reduce|all_gather|all_to_all|broadcast|
 *                        reduce_scatter|barrier] [-b MIN] [-e MAX]
 *                        [-f FACTOR] [-n ITERS] [-w WARMUP] [-c]
 *
 * Sizes follow nccl-tests (and fccl-bench): for all_reduce and broadcast
 * the buffer size, for all_gather the whole receive buffer (N blocks), for
 * all_to_all and reduce_scatter the whole send buffer (N blocks); a size
 * whose per-rank block is empty is skipped.
 *
 * Per size: warm-up, then ITERS iterations of { MPI_Barrier; t0; op; t1 },
 * the slowest rank's t1 - t0 (one MPI_Allreduce MAX of every iteration's
 * time after the loop, as fccl-bench does: a reduction inside the loop
 * would change which rank reaches the next barrier last), and the median
 * over iterations ("time"); then ITERS back-to-back operations
 * between two barriers, averaged ("avg", as nccl-tests reports).  Large
 * sizes run fewer iterations (at least 5) so a sweep stays short.
 * algbw = size / time, busbw = algbw * factor (all_reduce 2(N-1)/N, the
 * others (N-1)/N), in GB/s (1e9).  -c checks every result once per size.
 *
 * Built by bench/coll.sh with mpicc.openmpi and mpicc.mpich.
 */
#include <mpi.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

enum op { OP_ALL_REDUCE, OP_ALL_GATHER, OP_ALL_TO_ALL, OP_BCAST,
          OP_REDUCE_SCATTER, OP_BARRIER, OP_COUNT };
static const char *op_names[OP_COUNT] = {"all_reduce", "all_gather",
                                         "all_to_all", "broadcast",
                                         "reduce_scatter", "barrier"};


struct cfg {
    enum op op;
    size_t minb, maxb, factor;
    int iters, warmup, check;
};

static int rank, nranks;

static int parse_op(const char *s, enum op *op)
{
    for (int i = 0; i < OP_COUNT; i++)
        if (strcmp(s, op_names[i]) == 0) {
            *op = (enum op)i;
            return 0;
        }
    return -1;
}

static size_t parse_size(const char *s)
{
    char *end;
    double v = strtod(s, &end);
    switch (*end) {
    case 'K': case 'k': v *= 1024; break;
    case 'M': case 'm': v *= 1024 * 1024; break;
    case 'G': case 'g': v *= 1024.0 * 1024 * 1024; break;
    default: break;
    }
    return (size_t)v;
}

static int parse_args(int argc, char **argv, struct cfg *c)
{
    *c = (struct cfg){OP_ALL_REDUCE, 8, 64u << 20, 2, 20, 5, 0};
    for (int i = 1; i < argc; i++) {
        const char *a = argv[i], *v = i + 1 < argc ? argv[i + 1] : NULL;
        if (strcmp(a, "-c") == 0) {
            c->check = 1;
            continue;
        }
        if (!v || a[0] != '-' || a[2])
            return -1;
        i++;
        switch (a[1]) {
        case 'o': if (parse_op(v, &c->op)) return -1; break;
        case 'b': c->minb = parse_size(v); break;
        case 'e': c->maxb = parse_size(v); break;
        case 'f': c->factor = (size_t)atoi(v); break;
        case 'n': c->iters = atoi(v); break;
        case 'w': c->warmup = atoi(v); break;
        default: return -1;
        }
    }
    return c->factor < 2 || c->iters < 1 || c->minb < 1 ? -1 : 0;
}

/* The operations whose buffer is the whole size (not N blocks). */
static int whole(const struct cfg *c)
{
    return c->op == OP_ALL_REDUCE || c->op == OP_BCAST ||
           c->op == OP_BARRIER;
}

/* Elements of a given block: count per block and total block count. */
static size_t block_count(const struct cfg *c, size_t bytes)
{
    size_t elems = bytes / sizeof(float);
    return whole(c) ? elems : elems / (size_t)nranks;
}

static int run_op(const struct cfg *c, const float *in, float *out,
                  size_t count)
{
    int n = (int)count;
    switch (c->op) {
    case OP_ALL_REDUCE:
        return MPI_Allreduce(in, out, n, MPI_FLOAT, MPI_SUM, MPI_COMM_WORLD);
    case OP_ALL_GATHER:
        return MPI_Allgather(in, n, MPI_FLOAT, out, n, MPI_FLOAT,
                             MPI_COMM_WORLD);
    case OP_ALL_TO_ALL:
        return MPI_Alltoall(in, n, MPI_FLOAT, out, n, MPI_FLOAT,
                            MPI_COMM_WORLD);
    case OP_BCAST:
        /* in place in `out`: the root's copy of the input is made by
         * fill() */
        return MPI_Bcast(out, n, MPI_FLOAT, 0, MPI_COMM_WORLD);
    case OP_REDUCE_SCATTER:
        return MPI_Reduce_scatter_block(in, out, n, MPI_FLOAT, MPI_SUM,
                                        MPI_COMM_WORLD);
    case OP_BARRIER:
        return MPI_Barrier(MPI_COMM_WORLD);
    default: break;
    }
    return MPI_ERR_OTHER;
}

/* Input element i of rank r: small integers, so float sums are exact. */
static float input_val(int r, size_t i) { return (float)((i * 7 + (size_t)r * 13) % 101); }

static void fill(const struct cfg *c, float *in, float *out, size_t count)
{
    size_t total = c->op == OP_ALL_TO_ALL || c->op == OP_REDUCE_SCATTER
                       ? count * (size_t)nranks : count;
    for (size_t i = 0; i < total; i++)
        in[i] = input_val(rank, i);
    if (c->op == OP_BCAST && rank == 0)
        memcpy(out, in, count * sizeof(float));
}

static float expect(const struct cfg *c, size_t i, size_t count)
{
    if (c->op == OP_ALL_REDUCE || c->op == OP_REDUCE_SCATTER) {
        /* reduce_scatter: my block of everyone's send buffer */
        size_t k = c->op == OP_ALL_REDUCE ? i : (size_t)rank * count + i;
        float s = 0;
        for (int r = 0; r < nranks; r++)
            s += input_val(r, k);
        return s;
    }
    if (c->op == OP_BCAST)
        return input_val(0, i);
    int src = (int)(i / count);
    size_t j = i % count;
    /* all_to_all: block `rank` of rank src's send buffer. */
    return c->op == OP_ALL_GATHER ? input_val(src, j)
                                  : input_val(src, (size_t)rank * count + j);
}

static int check(const struct cfg *c, const float *out, size_t count)
{
    size_t total = whole(c) || c->op == OP_REDUCE_SCATTER
                       ? count : count * (size_t)nranks;
    int bad = 0;
    for (size_t i = 0; i < total && !bad && c->op != OP_BARRIER; i++)
        bad = out[i] != expect(c, i, count);
    int anybad = 0;
    MPI_Allreduce(&bad, &anybad, 1, MPI_INT, MPI_MAX, MPI_COMM_WORLD);
    return anybad;
}

static int cmp_double(const void *a, const void *b)
{
    double x = *(const double *)a, y = *(const double *)b;
    return (x > y) - (x < y);
}

/* Median over iterations of the slowest rank's barrier-then-op time. */
static double time_median(const struct cfg *c, const float *in, float *out,
                          size_t count, int iters, double *samples)
{
    for (int it = 0; it < iters; it++) {
        MPI_Barrier(MPI_COMM_WORLD);
        double t0 = MPI_Wtime();
        run_op(c, in, out, count);
        samples[it] = MPI_Wtime() - t0;
    }
    MPI_Allreduce(MPI_IN_PLACE, samples, iters, MPI_DOUBLE, MPI_MAX,
                  MPI_COMM_WORLD);
    qsort(samples, (size_t)iters, sizeof(double), cmp_double);
    return iters % 2 ? samples[iters / 2]
                     : (samples[iters / 2 - 1] + samples[iters / 2]) / 2;
}

/* nccl-tests style: back-to-back operations, slowest rank's average. */
static double time_avg(const struct cfg *c, const float *in, float *out,
                       size_t count, int iters)
{
    MPI_Barrier(MPI_COMM_WORLD);
    double t0 = MPI_Wtime();
    for (int it = 0; it < iters; it++)
        run_op(c, in, out, count);
    double dt = (MPI_Wtime() - t0) / iters, slowest = 0;
    MPI_Reduce(&dt, &slowest, 1, MPI_DOUBLE, MPI_MAX, 0, MPI_COMM_WORLD);
    return slowest;
}

static int iters_for(const struct cfg *c, size_t bytes, int base)
{
    size_t budget = (size_t)256 << 20; /* bytes moved per size, roughly */
    size_t n = budget / (bytes ? bytes : 1);
    if (n > (size_t)base)
        n = (size_t)base;
    if (base >= 5 && n < 5)
        n = 5;
    (void)c;
    return n < 1 ? 1 : (int)n;
}

static void print_header(const struct cfg *c)
{
    printf("# mpi_coll %s float32 sum, %d ranks\n", op_names[c->op], nranks);
    printf("#%11s %12s %7s %5s %11s %11s %9s %9s %6s\n", "size(B)", "count",
           "type", "redop", "time(us)", "avg(us)", "algbw", "busbw",
           "check");
}

static int sweep(const struct cfg *c)
{
    size_t maxelems = c->maxb / sizeof(float) + (size_t)nranks;
    float *in = malloc(maxelems * sizeof(float));
    float *out = malloc(maxelems * sizeof(float));
    double *samples = malloc(sizeof(double) * (size_t)(c->iters + 5));
    if (!in || !out || !samples)
        return 1;
    double bw_factor = c->op == OP_ALL_REDUCE ? 2.0 * (nranks - 1) / nranks
                       : c->op == OP_BCAST    ? 1.0
                                              : (double)(nranks - 1) / nranks;
    int failed = 0;
    if (rank == 0)
        print_header(c);
    for (size_t bytes = c->minb; bytes <= c->maxb; bytes *= c->factor) {
        size_t count = block_count(c, bytes);
        if (count == 0)
            continue;
        size_t real = whole(c) ? count * sizeof(float)
                               : count * (size_t)nranks * 4;
        int iters = iters_for(c, real, c->iters);
        int warm = iters < c->warmup ? iters : c->warmup;
        fill(c, in, out, count);
        for (int i = 0; i < warm; i++)
            run_op(c, in, out, count);
        const char *ck = "-";
        if (c->check) {
            memset(out, 0, real);
            fill(c, in, out, count);
            run_op(c, in, out, count);
            int bad = check(c, out, count);
            failed |= bad;
            ck = bad ? "WRONG" : "ok";
        }
        double med = time_median(c, in, out, count, iters, samples);
        double avg = time_avg(c, in, out, count, iters);
        if (rank == 0) {
            double algbw = (double)real / med / 1e9;
            printf("%12zu %12zu %7s %5s %11.2f %11.2f %9.3f %9.3f %6s\n",
                   real, count, "float", "sum", med * 1e6, avg * 1e6, algbw,
                   algbw * bw_factor, ck);
            fflush(stdout);
        }
    }
    free(in);
    free(out);
    free(samples);
    return failed;
}

int main(int argc, char **argv)
{
    MPI_Init(&argc, &argv);
    MPI_Comm_rank(MPI_COMM_WORLD, &rank);
    MPI_Comm_size(MPI_COMM_WORLD, &nranks);
    struct cfg c;
    if (parse_args(argc, argv, &c) < 0) {
        if (rank == 0)
            fprintf(stderr, "usage: mpi_coll [-o all_reduce|all_gather|"
                            "all_to_all|broadcast|reduce_scatter|barrier] "
                            "[-b MIN] [-e MAX] [-f FACTOR] [-n ITERS] "
                            "[-w WARMUP] [-c]\n");
        MPI_Finalize();
        return 2;
    }
    int rc = sweep(&c);
    MPI_Finalize();
    return rc ? 1 : 0;
}
