/*
 * Ring all-reduce = ring reduce-scatter + ring all-gather, the
 * large-message algorithm.
 *
 * The vector is split into n blocks (the first count % n blocks one
 * element longer, so any count works and blocks may be empty when
 * count < n).  The reduce-scatter leaves block r fully reduced on rank r,
 * the all-gather copies every finished block to every rank: each block is
 * reduced once, by one chain, so all ranks hold the same bits.  Both halves
 * pipeline in chunks (see their files).
 *
 * Cost: 2(n-1) alpha + 2(n-1)/n N beta + (n-1)/n N gamma.  Bandwidth-
 * optimal for any n (no power-of-two restriction); the 2(n-1) latency
 * terms make it the wrong choice for small vectors.
 */
#include "algos.h"

int coll_ring_all_reduce(struct coll_run *run, const struct coll_view *v,
                         const void *src, void *dst, size_t count,
                         fccl_dtype_t dt, fccl_redop_t op)
{
    struct coll_layout l = {LAY_SPLIT, v->n, fccl_dtype_size(dt), count,
                            NULL, NULL};
    unsigned char *d8 = dst;
    uint32_t half = run->nsteps / 2;
    struct step_range saved = cr_steps_push(run, 0, half);
    int rc = coll_ring_reduce_scatter(run, v, src, dst,
                                      d8 + lay_boff(&l, v->me), &l, dt, op);
    cr_steps_pop(run, saved);
    if (rc < 0)
        return rc;
    saved = cr_steps_push(run, half, run->nsteps - half);
    rc = coll_ring_all_gather(run, v, dst, &l, NULL);
    cr_steps_pop(run, saved);
    return rc;
}

int coll_allreduce_ring(struct coll_run *run)
{
    const struct coll_args *a = run->a;
    struct coll_view v = view_of_group(run->g);
    return coll_ring_all_reduce(run, &v, a->sendbuf, a->recvbuf, a->count,
                                a->dtype, a->op);
}
