/*
 * Internal: the state of a group as the collective engine sees it.  The
 * bootstrap (one layer up) creates and fills these; coll/ only reads the
 * membership and owns the sequence counter, error and abort state.
 */
#ifndef FCCL_COLL_COMM_H
#define FCCL_COLL_COMM_H

#include <pthread.h>
#include <stdatomic.h>
#include <stdint.h>

#include "fccl/coll.h"
#include "transport.h"

#define FCCL_GROUP_NAME_MAX 64 /* "fccl_<count>_<40 hex>" fits */

struct coll_async; /* the group's async worker, owned by coll/ */

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
    pthread_mutex_t lock; /* guards err/errmsg and the async queue */
    struct coll_async *async;
    void *boot;           /* bootstrap's private data (store view, ...) */
};

/* Called by the bootstrap: set up / tear down coll's per-group state
 * (sequence, async worker).  comm_destroy waits for pending work. */
int coll_comm_init(struct fccl_group *g);
void coll_comm_destroy(struct fccl_group *g);

#endif
