/*
 * Scatter of small blocks through the shared segment of a one-host group
 * (shm/seg.c): one barrier.  The root copies all blocks into its slot and
 * every rank copies its own out.  Larger blocks go the linear way (see
 * gather_shm.c).
 */
#include <string.h>

#include "algos.h"

int coll_scatter_shm(struct coll_run *run)
{
    const struct coll_args *a = run->a;
    struct fccl_group *g = run->g;
    size_t bytes = a->count * fccl_dtype_size(a->dtype), half = 0;
    int rc;
    struct coll_seg *s = coll_seg_for_small(run, bytes, &half, &rc);
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
