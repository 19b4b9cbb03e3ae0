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
#include <string.h>

#include "algo/algos.h"
#include "shm/shm.h"

#define H2D_RD_MAX (64u * 1024u) /* slices up to this use rd across hosts */

static size_t clamp_count(size_t total, size_t off, size_t per)
{
    if (off >= total)
        return 0;
    return total - off < per ? total - off : per;
}

/* (1) through the segment: in rounds, every rank copies the round's piece
 * of every slice into its slot (one section per slice); rank p reduces
 * section p of all slots into its slice of dst. */
static int seg_reduce_scatter(struct coll_run *run, struct coll_seg *s,
                              const struct coll_layout *l, const void *src,
                              void *dst)
{
    const struct coll_args *a = run->a;
    size_t es = l->esize;
    int m = l->n, me = coll_seg_rank(s);
    size_t per = coll_seg_slot_bytes(s) / (size_t)m / es;
    size_t most = lay_max_count(l);
    const unsigned char *in = src;
    unsigned char *out = dst;
    int rc = FCCL_OK;
    for (size_t off = 0; off < most && rc >= 0; off += per) {
        unsigned char *slot = coll_seg_slot(s, me);
        for (int q = 0; q < m; q++) {
            size_t k = clamp_count(lay_count(l, q), off, per);
            if (k)
                memcpy(slot + (size_t)q * per * es,
                       in + (lay_off(l, q) + off) * es, k * es);
        }
        if ((rc = coll_seg_barrier(run, s)) < 0)
            break;
        size_t k = clamp_count(lay_count(l, me), off, per);
        unsigned char *d = out + (lay_off(l, me) + off) * es;
        size_t sec = (size_t)me * per * es;
        if (k && m == 1)
            memcpy(d, coll_seg_slot(s, 0) + sec, k * es);
        if (k && m > 1)
            coll_reduce(d, coll_seg_slot(s, 0) + sec, coll_seg_slot(s, 1) + sec,
                        k, a->dtype, a->op);
        for (int q = 2; q < m && k; q++)
            coll_reduce(d, d, coll_seg_slot(s, q) + sec, k, a->dtype, a->op);
        rc = coll_seg_barrier(run, s);
    }
    return rc;
}

/* (3) through the segment: in rounds, every rank puts the round's piece of
 * its slice into its slot and copies the others' out. */
static int seg_all_gather(struct coll_run *run, struct coll_seg *s,
                          const struct coll_layout *l, void *dst)
{
    size_t es = l->esize, per = coll_seg_slot_bytes(s) / es;
    int m = l->n, me = coll_seg_rank(s), rc = FCCL_OK;
    size_t most = lay_max_count(l);
    unsigned char *buf = dst;
    for (size_t off = 0; off < most && rc >= 0; off += per) {
        size_t k = clamp_count(lay_count(l, me), off, per);
        if (k)
            memcpy(coll_seg_slot(s, me), buf + (lay_off(l, me) + off) * es,
                   k * es);
        if ((rc = coll_seg_barrier(run, s)) < 0)
            break;
        for (int q = 0; q < m; q++) {
            size_t kq = clamp_count(lay_count(l, q), off, per);
            if (q != me && kq)
                memcpy(buf + (lay_off(l, q) + off) * es, coll_seg_slot(s, q),
                       kq * es);
        }
        rc = coll_seg_barrier(run, s);
    }
    return rc;
}

int coll_hier_2d(struct coll_run *run, const struct coll_view *lv,
                 const struct coll_view *xv)
{
    const struct coll_args *a = run->a;
    struct coll_layout l = {LAY_SPLIT, lv->n, fccl_dtype_size(a->dtype),
                            a->count, NULL, NULL};
    unsigned char *dst = a->recvbuf;
    uint32_t third = run->nsteps / 3;
    struct coll_seg *s = NULL;

    if (lv->n == 1) { /* nothing to do inside the host */
        if (a->sendbuf != a->recvbuf && a->count)
            memmove(dst, a->sendbuf, a->count * l.esize);
        return xv->n > 1 ? coll_ring_all_reduce(run, xv, dst, dst, a->count,
                                                a->dtype, a->op)
                         : FCCL_OK;
    }
    struct step_range saved = cr_steps_push(run, 0, third);
    int rc = coll_seg_host(run, lv, &s);
    if (rc >= 0 && s)
        rc = coll_seg_large(run, s);
    if (rc >= 0 && s)
        rc = seg_reduce_scatter(run, s, &l, a->sendbuf, dst);
    else if (rc >= 0)
        rc = coll_ring_reduce_scatter(run, lv, a->sendbuf, dst,
                                      dst + lay_boff(&l, lv->me), &l,
                                      a->dtype, a->op);
    cr_steps_pop(run, saved);
    if (rc < 0)
        return rc;

    size_t mine = lay_count(&l, lv->me);
    if (xv->n > 1 && mine) {
        void *slice = dst + lay_boff(&l, lv->me);
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
    rc = s ? seg_all_gather(run, s, &l, dst)
           : coll_ring_all_gather(run, lv, dst, &l, NULL);
    cr_steps_pop(run, saved);
    return rc;
}
