/*
 * Internal: the state of a group as the collective engine sees it.  The
 * bootstrap (one layer up) creates and fills these; coll/ only reads the
 * membership and owns the sequence counter, error and abort state.
 */
#ifndef FCCL_COLL_GROUP_H
#define FCCL_COLL_GROUP_H

#include <pthread.h>
#include <stdatomic.h>
#include <stdint.h>

#include "fccl/coll.h"

#define FCCL_GROUP_NAME_MAX 64 /* "fccl_<count>_<40 hex>" fits */

struct fccl_tp;
struct coll_state; /* the engine's per-group state (state.h) */

struct fccl_group {
    char name[FCCL_GROUP_NAME_MAX];
    struct fccl_tp *tp;   /* shared by every group of the process */
    int rank;             /* my rank in the group */
    int size;
    int *world;           /* world rank of each group rank (tp peer id) */
    int world_rank;       /* my world rank */
    /* topology, indexed by group rank: host index (0..nnodes-1) */
    int *node_of;
    int nnodes;
    uint32_t ctx;         /* context id agreed by the members (< 2^20) */
    uint32_t seq;         /* next collective sequence number */
    int64_t timeout_ms;   /* per-call default (FCCL_TIMEOUT or 300 s) */
    _Atomic int aborted;  /* set by fccl_group_abort */
    _Atomic int err;      /* sticky first fatal error (0 = none) */
    char errmsg[512];
    pthread_mutex_t lock; /* guards err/errmsg */
    struct coll_state *state; /* owned by coll/ */
};

/* Called by the bootstrap once a group's membership is filled in: set up
 * coll's per-group state (sequence, error, worker).  FCCL_ERR_INVALID for
 * a malformed group, FCCL_ERR_NOMEM. */
int coll_group_init(struct fccl_group *g);
/* Tear it down; waits for queued asynchronous work to end. */
void coll_group_fini(struct fccl_group *g);

/* Group rank of a world rank, or -1 if it is not a member. */
static inline int group_rank_of_world(const struct fccl_group *g, int world)
{
    for (int r = 0; r < g->size; r++)
        if (g->world[r] == world)
            return r;
    return -1;
}

#endif
