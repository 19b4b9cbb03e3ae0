/*
 * Two-level all-reduce for large vectors on hosts of equal rank counts
 * (the layout NCCL's rings across nodes also use).
 *
 * Algorithm, with h hosts of m ranks: the vector is split into m slices;
 * (1) inside each host a reduce-scatter leaves slice p reduced over the
 * host on its local rank p; (2) the local ranks p of all hosts all-reduce
 * slice p among themselves (m independent all-reduces across hosts, in
 * parallel); (3) inside each host an all-gather gives every rank every
 * slice.  Stages (1) and (3) go through the host's shared segment when
 * there is one (two memcpys per byte, no kernel copy), else through the
 * transport (ring reduce-scatter and all-gather).
 *
 * Why not leaders only (allreduce_hier.c): there one rank per host carries
 * all of the host's network traffic while the others wait, and the host
 * broadcast comes after the network stage as a third pass over N.  Here
 * every rank moves N/m across hosts, the host's sockets are driven by m
 * processes at once, and the all-gather's copies replace the broadcast.
 * Cost per rank: a copy of N in and out of the segment, a reduction over
 * N/m, and an all-reduce of N/m over h ranks.
 *
 * Each element is reduced in one fixed order by one rank of each host,
 * then by the cross-host algorithm (itself bitwise consistent), then
 * copied: every rank gets the same bits.  The choice to use this algorithm
 * depends only on the layout and the size, so all ranks agree even when
 * one host has no segment.
 */
#include "algos.h"

#define H2D_RD_MAX (64u * 1024u) /* slices up to this use rd across hosts */

int coll_hier_2d(struct coll_run *run, const struct coll_view *lv,
                 const struct coll_view *xv)
{
    const struct coll_args *a = run->a;
    struct coll_layout l = {LAY_SPLIT, lv->n, fccl_dtype_size(a->dtype),
                            a->count, NULL, NULL};
    unsigned char *dst = a->recvbuf, *slice = dst + lay_boff(&l, lv->me);
    uint32_t third = run->nsteps / 3;
    struct coll_seg *s = NULL;

    struct step_range saved = cr_steps_push(run, 0, third);
    int rc = coll_seg_host(run, lv, &s);
    if (rc >= 0 && s)
        rc = coll_seg_reduce_scatter(run, s, &l, a->sendbuf, slice);
    else if (rc >= 0)
        rc = coll_ring_reduce_scatter(run, lv, a->sendbuf, dst, slice, &l,
                                      a->dtype, a->op);
    cr_steps_pop(run, saved);
    if (rc < 0)
        return rc;

    size_t mine = lay_count(&l, lv->me);
    if (xv->n > 1 && mine) {
        saved = cr_steps_push(run, third, third);
        rc = mine * l.esize <= H2D_RD_MAX
                 ? coll_rd_all_reduce(run, xv, slice, slice, mine, a->dtype,
                                      a->op)
                 : coll_ring_all_reduce(run, xv, slice, slice, mine, a->dtype,
                                        a->op);
        cr_steps_pop(run, saved);
        if (rc < 0)
            return rc;
    }

    saved = cr_steps_push(run, 2 * third, run->nsteps - 2 * third);
    rc = s ? coll_seg_all_gather(run, s, &l, NULL, dst)
           : coll_ring_all_gather(run, lv, dst, &l, NULL);
    cr_steps_pop(run, saved);
    return rc;
}
