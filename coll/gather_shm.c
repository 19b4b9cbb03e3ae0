/*
 * Gather and scatter of small blocks through the shared segment of a
 * one-host group (shm_seg.c): one barrier, the halves of the slots
 * alternating from call to call (see allreduce_shm.c).  Gather: every rank
 * copies its block into its slot and the root copies them all out.
 * Scatter: the root copies all blocks into its slot and every rank copies
 * its own out.  Blocks above COLL_SHM_SMALL (or n of them above half a slot)
 * go the linear way: at that size the root's copying bounds both.
 */
#include <string.h>

#include "coll_internal.h"


/* The segment and the half to use, or NULL when the linear form runs. */
static struct coll_seg *small_seg(struct coll_run *run, size_t bytes,
                                  size_t *half, int *rc)
{
    struct fccl_group *g = run->g;
    struct coll_seg *s = NULL;
    *rc = FCCL_OK;
    if (bytes == 0 || bytes > COLL_SHM_SMALL)
        return NULL;
    if ((*rc = coll_seg_get(run, &s)) < 0 || !s ||
        bytes * (size_t)g->size > coll_seg_slot_bytes(s) / 2)
        return NULL;
    *half = coll_seg_small(s);
    return s;
}

int coll_gather_shm(struct coll_run *run)
{
    const struct coll_args *a = run->a;
    struct fccl_group *g = run->g;
    size_t bytes = a->count * fccl_dtype_size(a->dtype), half = 0;
    int rc;
    struct coll_seg *s = small_seg(run, bytes, &half, &rc);
    if (rc < 0)
        return rc;
    if (!s)
        return coll_gather_linear(run);
    memcpy(coll_seg_slot(s, g->rank) + half, a->sendbuf, bytes);
    if ((rc = coll_seg_barrier(run, s)) < 0 || g->rank != a->root)
        return rc;
    unsigned char *out = a->recvbuf;
    for (int q = 0; q < g->size; q++)
        memcpy(out + (size_t)q * bytes, coll_seg_slot(s, q) + half, bytes);
    return FCCL_OK;
}

int coll_scatter_shm(struct coll_run *run)
{
    const struct coll_args *a = run->a;
    struct fccl_group *g = run->g;
    size_t bytes = a->count * fccl_dtype_size(a->dtype), half = 0;
    int rc;
    struct coll_seg *s = small_seg(run, bytes, &half, &rc);
    if (rc < 0)
        return rc;
    if (!s)
        return coll_scatter_linear(run);
    unsigned char *slot = coll_seg_slot(s, a->root) + half;
    if (g->rank == a->root)
        memcpy(slot, a->sendbuf, bytes * (size_t)g->size);
    if ((rc = coll_seg_barrier(run, s)) < 0)
        return rc;
    memcpy(a->recvbuf, slot + (size_t)g->rank * bytes, bytes);
    return FCCL_OK;
}
