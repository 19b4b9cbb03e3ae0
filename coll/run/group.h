/*
 * Internal: the state of a group as the collective engine sees it.  The
 * bootstrap (the floor above coll/) creates and fills these; coll/ only
 * reads the membership and owns the sequence counter, error and abort
 * state.  It sits on coll's lowest floor that knows groups (run/), so
 * every floor from there up, and the bootstrap, read the same struct.
 * The calls that hand a group to the engine and take it back are the
 * API floor's (api/coll_group.h).
 */
#ifndef FCCL_COLL_GROUP_H
#define FCCL_COLL_GROUP_H

#include <pthread.h>
#include <stdatomic.h>
#include <stdint.h>

#include "fccl/coll.h"

#define FCCL_GROUP_NAME_MAX 64 /* "fccl_<count>_<40 hex>" fits */

/* Bits of fccl_group.stop.  GROUP_STOP_FAILED is the transport's
 * TP_STOP_NOTICE (tp.h), which the heartbeat thread sets on a notice. */
#define GROUP_STOP_ABORT 1
#define GROUP_STOP_FAILED 2
#define GROUP_STOP_REVOKED 4 /* tp.h's TP_STOP_REVOKE */

struct fccl_tp;
struct coll_state; /* the engine's per-group state (state.h) */

struct fccl_group {
    char name[FCCL_GROUP_NAME_MAX];
    int named;            /* name chosen by the user (new_named) */
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
    int64_t next_timeout_ms; /* fccl_set_next_timeout: the next operation's
                                (0: none) */
    /* Waits on the group end at once while stop != 0: GROUP_STOP_ABORT
     * (fccl_group_abort, one atomic OR: async-signal-safe) or
     * GROUP_STOP_FAILED (the group failed: a wait of this rank ran out,
     * or a member's failure notice arrived, see api/sticky.c). */
    _Atomic int stop;
    _Atomic int err;      /* sticky first fatal error (0 = none) */
    int failed_rank;      /* world rank the failure came from (-1: none,
                             or an abort); under lock */
    char errmsg[512];
    pthread_mutex_t lock; /* guards err/errmsg/failed_rank/revoked_by */
    int revoked_by;       /* world rank that revoked the group, if this
                             rank did or learnt it (-1: not known yet) */
    /* A shrink's agreed failed set (group ranks, ascending), which
     * fccl_group_failed_ranks gives from then on (has_agreed), and how
     * many shrinks of this group this rank has begun (the store keys of
     * the next one).  Written by the thread that shrinks. */
    int *agreed, nagreed, has_agreed, shrinks;
    /* local view (bootstrap): my index among the members on my host,
     * and how many members share it */
    int local_rank, local_size;
    struct coll_state *state; /* owned by coll/ */
};

/* Group rank of a world rank, or -1 if it is not a member: the library's
 * one translation that way (fccl_group_from_world is it with a message). */
static inline int group_rank_of_world(const struct fccl_group *g, int world)
{
    for (int r = 0; r < g->size; r++)
        if (g->world[r] == world)
            return r;
    return -1;
}

#endif
