/*
 * Internal: one collective call, normalised: what the public entry points
 * (api/) hand to the selector and the algorithms.  On the run/ floor
 * because the call's execution (run.h) and the per-group state (state.h)
 * are made of it.
 */
#ifndef FCCL_COLL_ARGS_H
#define FCCL_COLL_ARGS_H

#include <stddef.h>

#include "fccl/coll.h"

enum coll_kind {
    COLL_BARRIER,
    COLL_BCAST,
    COLL_REDUCE,
    COLL_ALLREDUCE,
    COLL_ALLGATHER,
    COLL_REDUCESCATTER,
    COLL_GATHER,
    COLL_SCATTER,
    COLL_ALLTOALL,
    COLL_NEIGHBOR,
    COLL_NUM_KINDS
};

/* Arguments of one collective call, normalised.  Counts are elements.
 * v-variants: counts[i] per rank, displs[i] their prefix sums (owned by
 * the caller of the algorithm); all_to_all uses scounts/sdispls for what
 * this rank sends and rcounts/rdispls for what it receives. */
struct coll_args {
    enum coll_kind kind;
    const char *opname;        /* "all_gather_v", ... for messages */
    const void *sendbuf;
    void *recvbuf;
    size_t count;              /* even ops */
    const size_t *counts;      /* all_gather_v, reduce_scatter_v */
    const size_t *displs;
    const size_t *scounts, *sdispls, *rcounts, *rdispls; /* all_to_all */
    fccl_dtype_t dtype;
    fccl_redop_t op;
    int root;
    /* neighbor_exchange */
    const int *send_peers, *recv_peers;
    const void *const *send_bufs;
    void *const *recv_bufs;
    const size_t *send_counts, *recv_counts;
    size_t nsend, nrecv;
};

#endif
