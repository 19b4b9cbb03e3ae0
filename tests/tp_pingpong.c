/*
 * tp_pingpong: transport-level ping-pong between two local processes (no
 * store, no bootstrap), for comparing with fi_pingpong.
 *
 *   tp_pingpong [-p PROVIDER] [-I ITERS] [-S BYTES] [-B BYTES] [-r REPS]
 *
 * Prints the half round-trip latency of -S byte messages (default 8, 10000
 * iterations after 1000 warm-up) and the one-way bandwidth of -B byte
 * messages (default 64 MiB, 4 repetitions after one warm-up).  Exit 0 on
 * success, 1 on any transport error, 2 on bad usage.
 */
#include <getopt.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <sys/mman.h>

#include "clock.h"
#include "lib/proc.h"
#include "lib/tp_harness.h"

struct pp_args {
    int iters, reps;
    size_t small, big;
    double lat_us, bw_mbs;
};

static int xfer(struct fccl_tp *tp, int send, int peer, uint64_t tag,
                void *b, size_t n)
{
    struct tp_req r;
    int rc = send ? tp_isend(tp, peer, tag, b, n, &r)
                  : tp_irecv(tp, peer, tag, b, n, &r);
    return rc < 0 ? rc : tp_waitall(tp, &r, 1, fccl_deadline_ms(30000), NULL);
}

static int body(struct fccl_tp *tp, int rank, int n, void *arg)
{
    (void)n;
    struct pp_args *a = arg;
    int peer = 1 - rank;
    unsigned char *b = calloc(1, a->big > a->small ? a->big : a->small);
    TPH_CHECK(b, "malloc");
    for (int warm = 1; warm >= 0; warm--) {
        int iters = warm ? 1000 : a->iters;
        double t0 = th_now();
        for (int i = 0; i < iters; i++) {
            TPH_CHECK(xfer(tp, rank == 0, peer, 1, b, a->small) == 0, "ping");
            TPH_CHECK(xfer(tp, rank != 0, peer, 1, b, a->small) == 0, "pong");
        }
        if (!warm && rank == 0)
            a->lat_us = (th_now() - t0) * 1e6 / iters / 2;
    }
    double t0 = 0;
    for (int i = -1; i < a->reps; i++) {
        if (i == 0)
            t0 = th_now();
        TPH_CHECK(xfer(tp, rank == 0, peer, 2, b, a->big) == 0, "big");
    }
    TPH_CHECK(xfer(tp, rank != 0, peer, 3, b, 1) == 0, "ack");
    if (rank == 0)
        a->bw_mbs = (double)a->big * a->reps /
                    (th_now() - t0) / 1e6;
    free(b);
    return 0;
}

int main(int argc, char **argv)
{
    const char *prov = "shm";
    struct pp_args *a = mmap(NULL, sizeof(*a), PROT_READ | PROT_WRITE,
                             MAP_SHARED | MAP_ANONYMOUS, -1, 0);
    if (a == MAP_FAILED)
        return 1;
    *a = (struct pp_args){.iters = 10000, .reps = 4, .small = 8,
                          .big = 64u << 20};
    int c;
    while ((c = getopt(argc, argv, "p:I:S:B:r:")) != -1) {
        switch (c) {
        case 'p': prov = optarg; break;
        case 'I': a->iters = atoi(optarg); break;
        case 'S': a->small = strtoull(optarg, NULL, 0); break;
        case 'B': a->big = strtoull(optarg, NULL, 0); break;
        case 'r': a->reps = atoi(optarg); break;
        default:
            fprintf(stderr, "usage: tp_pingpong [-p PROVIDER] [-I ITERS] "
                    "[-S BYTES] [-B BYTES] [-r REPS]\n");
            return 2;
        }
    }
    if (a->iters < 1 || a->reps < 1 || a->big < 1)
        return 2;
    struct tp_harness h = {.provider = prov, .nranks = 2,
                           .timeout_ms = 300000};
    if (tp_harness_run(&h, body, a) != 0)
        return 1;
    printf("provider %s  tp_open %.1f ms  %zu B half-RTT %.2f us  "
           "%zu B bandwidth %.0f MB/s\n", h.desc, h.open_ms_max, a->small,
           a->lat_us, a->big, a->bw_mbs);
    return 0;
}
