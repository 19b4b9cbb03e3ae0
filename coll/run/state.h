/*
 * Internal: what the collective engine keeps for each group (g->state):
 * scratch memory and requests reused across calls, the forced algorithm
 * per operation, the pipeline chunk, the shared segment of a one-host
 * group, its count of barriers, and the queue of the group's worker
 * thread (api/request.c).
 * Created by coll_group_init, freed by coll_group_fini (api/coll_group.c).
 * The floors above fill their own parts (select/ the forced choices,
 * shm/ the segments, api/ the worker); it lives here, on the lowest floor
 * that reads it (the primitives' scratch and requests).
 */
#ifndef FCCL_COLL_STATE_H
#define FCCL_COLL_STATE_H

#include <pthread.h>
#include <stddef.h>

#include "args.h"

struct tp_req;
struct coll_seg;
struct fccl_request;
struct fccl_group;

/* The queue of asynchronous calls and the thread that runs them. */
struct coll_worker {
    pthread_mutex_t qlock;
    pthread_cond_t qcv;        /* work queued or stop */
    pthread_cond_t donecv;     /* some request finished */
    struct fccl_request *head, *tail;
    int pending;               /* queued + running */
    int started, stop;
    pthread_t thread;
};

struct coll_state {
    struct fccl_group *g;
    /* scratch memory, reused across calls (one call runs at a time) */
    void *scratch;
    size_t scratch_cap;
    struct tp_req *reqs;
    size_t reqs_cap;
    size_t *idx;               /* displacement arrays of blocking v-calls */
    size_t idx_cap;
    /* forced algorithm per kind: -1 automatic, -2 invalid env value */
    int forced[COLL_NUM_KINDS];
    char forced_bad[COLL_NUM_KINDS][48];
    size_t chunk;              /* pipeline chunk in bytes (0: default) */
    struct coll_seg *seg;      /* shared segment of a one-host group */
    int seg_failed;            /* its setup failed: never try again */
    struct coll_seg *hseg;     /* segment of this host's members of a
                                  multi-host group (all_reduce[hier]) */
    int hseg_failed;
    /* barriers run so far (api/execute.c counts, the selector reads):
     * the segment waits for a group's second, the first being often
     * fccl_init's */
    unsigned barriers;
    struct coll_worker worker;
};

#endif
