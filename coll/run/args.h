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

/* neighbor_exchange_v2 and all_to_all_dims: the shape of the caller's
 * dense (C-order) tensor, checked and normalised by the API floor.
 * Held by value in coll_args, so a queued call keeps its own copy. */
#define COLL_MAX_DIMS FCCL_COLL_MAX_DIMS
struct coll_shape {
    int ndim;                       /* 0: not a shaped call */
    size_t dims[COLL_MAX_DIMS];     /* the send buffer's shape */
    int split_dim, concat_dim;      /* all_to_all_dims, 0..ndim-1 */
    /* neighbor_exchange_v2 (NCHW): per direction (FCCL_NBR_TOP ..
     * FCCL_NBR_TOP_LEFT) the group rank or -1, and per side (top,
     * bottom, left, right) the rows or columns; a receive side whose
     * rank is -1 has its length set to 0 here (it adds nothing) */
    int send_ids[8], recv_ids[8];
    size_t send_lens[4], recv_lens[4];
};

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
    COLL_NEIGHBOR_V2,
    COLL_ALLTOALL_DIMS,
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
    struct coll_shape shape;   /* neighbor_exchange_v2, all_to_all_dims */
};

#endif
