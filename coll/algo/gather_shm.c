/*
 * Gather of small blocks through the shared segment of a one-host group
 * (shm/seg.c): one barrier, the halves of the slots alternating from call
 * to call (see allreduce_shm.c).  Every rank copies its block into its
 * slot and the root copies them all out.  Blocks above COLL_SHM_SMALL (or
 * n of them above half a slot) go the linear way: at that size the root's
 * copying bounds it.  scatter_shm.c is the mirror image, and opens the
 * same way (coll_seg_for_small holds what the two share); the fallback
 * and the copies, which differ, are all that follows.
 */
#include <string.h>

#include "algos.h"

int coll_gather_shm(struct coll_run *run)
{
    const struct coll_args *a = run->a;
    struct fccl_group *g = run->g;
    size_t bytes = a->count * fccl_dtype_size(a->dtype), half = 0;
    int rc;
    struct coll_seg *s = coll_seg_for_small(run, bytes, &half, &rc);
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
