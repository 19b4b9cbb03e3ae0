/*
 * barrier_pair: fccl's side of bench/pair.sh.  Times a barrier and the
 * call after it together, back to back, as a program that synchronizes
 * before each call sees them:
 *
 *   fccl-run -n N build/bench/barrier_pair [-o OP] [-b BYTES] [-n ITERS]
 *
 * OP: all_reduce (float32 sum), all_gather, all_to_all, broadcast (root 0)
 * or barrier (two barriers a pair); BYTES (default 8) as fccl-bench's
 * sizes: the whole buffer for all_reduce and broadcast, the receive
 * buffer of all_gather, the send buffer of all_to_all.  Five passes of
 * ITERS (default 20000) pairs; each pass's time per pair is the slowest
 * rank's; rank 0 prints the median pass:
 *
 *   pair OP RANKS BYTES US
 *
 * The "time" column of fccl-bench and cli/bench/mpi_coll.c starts each
 * rank's clock as it leaves the barrier, so it also measures who leaves
 * a barrier first; a pair does not.  With -m stamps, one pass of ITERS
 * pairs (after 1,000 unstamped) is stamped instead, and rank 0 prints
 * what pair_stamps (pair_opts.h) reads from the stamps, in us:
 *
 *   stamps OP RANKS BYTES TIME SKEW CRIT
 *
 * With -m loop, each pass is ITERS calls back to back, with no barrier
 * between them (a job's run of small collectives), and rank 0 prints the
 * median pass's slowest-rank time per call:
 *
 *   loop OP RANKS BYTES US
 *
 * cli/bench/mpi_barrier_pair.c is the same for MPI.
 */
#include "bench_clock.h"
#include "fccl/fccl.h"
#include "pair_opts.h"

static int call(const char *op, float *in, float *out, size_t count,
                fccl_group_t *w)
{
    if (strcmp(op, "all_reduce") == 0)
        return fccl_all_reduce(in, out, count, FCCL_FLOAT32, FCCL_SUM, w,
                               NULL);
    if (strcmp(op, "all_gather") == 0)
        return fccl_all_gather(in, out, count, FCCL_FLOAT32, w, NULL);
    if (strcmp(op, "all_to_all") == 0)
        return fccl_all_to_all(in, out, count, FCCL_FLOAT32, w, NULL);
    if (strcmp(op, "broadcast") == 0)
        return fccl_broadcast(out, count, FCCL_FLOAT32, 0, w, NULL);
    return fccl_barrier(w, NULL);
}

/* -m stamps: each pair's three stamps, gathered; rank 0 prints them read
 * (pair_stamps).  Returns call()'s error, or 2 without memory. */
static int stamped(const struct pair_opts *o, float *in, float *out,
                   size_t count, fccl_group_t *w)
{
    int n = fccl_group_size(w), rc = FCCL_OK;
    double *st, *all;
    if (pair_stamp_bufs(o, n, &st, &all) < 0)
        return 2;
    for (long i = 0; i < 1000 && rc >= 0; i++)
        if ((rc = fccl_barrier(w, NULL)) >= 0)
            rc = call(o->op, in, out, count, w);
    for (long i = 0; i < o->iters && rc >= 0; i++) {
        double *s = st + (size_t)i * PAIR_STAMPS;
        s[0] = bench_clock_s(CLOCK_MONOTONIC);
        rc = fccl_barrier(w, NULL);
        s[1] = bench_clock_s(CLOCK_MONOTONIC);
        if (rc >= 0)
            rc = call(o->op, in, out, count, w);
        s[2] = bench_clock_s(CLOCK_MONOTONIC);
    }
    if (rc >= 0)
        rc = fccl_all_gather(st, all, (size_t)o->iters * PAIR_STAMPS,
                             FCCL_FLOAT64, w, NULL);
    if (rc >= 0 && fccl_group_rank(w) == 0 &&
        pair_stamps_print(o, all, n) < 0)
        rc = 2;
    free(st);
    free(all);
    return rc;
}

int main(int argc, char **argv)
{
    struct pair_opts o;
    if (pair_opts_parse(argc, argv, &o) < 0) {
        fprintf(stderr, "usage: barrier_pair [-o OP] [-b BYTES] [-n ITERS] "
                        "[-m pairs|stamps|loop]\n");
        return 2;
    }
    fccl_group_t *w;
    int rc = fccl_init(NULL, &w);
    if (rc < 0) {
        fprintf(stderr, "barrier_pair: fccl_init: %s\n", fccl_last_error());
        return 1;
    }
    int n = fccl_group_size(w);
    size_t count = pair_count(&o, n), total = o.bytes / sizeof(float);
    float *in = calloc(total + 1, sizeof(float));
    float *out = calloc(total + 1, sizeof(float));
    double pass[PAIR_PASSES];
    if (!in || !out || count == 0) {
        fprintf(stderr, "barrier_pair: %zu bytes make no block of %d ranks "
                        "(or no memory)\n", o.bytes, n);
        return 2;
    }
    if (o.mode == PAIR_MODE_STAMPS) {
        rc = stamped(&o, in, out, count, w);
        if (rc == 2)
            fprintf(stderr, "barrier_pair: no memory for the stamps\n");
        else if (rc < 0)
            fprintf(stderr, "barrier_pair: %s: %s\n", o.op,
                    fccl_last_error());
        free(in);
        free(out);
        return fccl_finalize() < 0 || rc ? 1 : 0;
    }
    for (int p = 0; p < PAIR_PASSES && rc >= 0; p++) {
        rc = fccl_barrier(w, NULL);
        double t0 = bench_clock_s(CLOCK_MONOTONIC);
        for (long i = 0; i < o.iters && rc >= 0; i++)
            if (o.mode == PAIR_MODE_LOOP ||
                (rc = fccl_barrier(w, NULL)) >= 0)
                rc = call(o.op, in, out, count, w);
        pass[p] = (bench_clock_s(CLOCK_MONOTONIC) - t0) * 1e6 /
                  (double)o.iters;
        if (rc >= 0)
            rc = fccl_all_reduce(&pass[p], &pass[p], 1, FCCL_FLOAT64,
                                 FCCL_MAX, w, NULL);
    }
    if (rc < 0) {
        fprintf(stderr, "barrier_pair: %s: %s\n", o.op, fccl_last_error());
        return 1;
    }
    if (fccl_group_rank(w) == 0)
        printf("%s %s %d %zu %.3f\n", o.mode == PAIR_MODE_LOOP ? "loop" : "pair",
               o.op, n, o.bytes, pair_median(pass));
    free(in);
    free(out);
    return fccl_finalize() < 0;
}
