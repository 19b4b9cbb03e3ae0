/*
 * Reduce-scatter (even and _v) through the shared segment of a one-host
 * group (shm/seg.c).
 *
 * Per round every rank copies the next piece of each of the n blocks into
 * its slot (piece q at q * P elements); barrier; rank r combines piece r
 * of every slot, in rank order, straight into its output; barrier.  Up to
 * COLL_SHM_SMALL per block (when all n blocks fit in half a slot) every rank
 * puts its whole input into one half of its slot and there is one barrier
 * only, the halves alternating from call to call (see allreduce_shm.c).
 *
 * Each output element is computed by its owner alone, in one fixed order.
 * In place the result goes to the start of the buffer: round k writes
 * elements [kP, kP+P) of it, which no later round reads (every block's
 * later pieces start at or beyond (k+1)P).
 *
 * Cost per rank for N bytes of input: a memcpy of N and a reduction that
 * reads N and writes N/n, against (n-1)/n N of process_vm_readv for the
 * ring.  Without a segment it is the ring.
 */
#include <string.h>

#include "algos.h"

static size_t min_sz(size_t a, size_t b) { return a < b ? a : b; }

/* out[0..k) = op over q of slot(q)[at..at+k), in member order. */
static void combine(struct coll_run *run, struct coll_seg *s, size_t at,
                    void *out, size_t k)
{
    const struct coll_args *a = run->a;
    int n = coll_seg_size(s);
    if (n == 1 || k == 0) {
        if (k)
            memcpy(out, coll_seg_slot(s, 0) + at, k * fccl_dtype_size(a->dtype));
        return;
    }
    coll_reduce(out, coll_seg_slot(s, 0) + at, coll_seg_slot(s, 1) + at, k,
                a->dtype, a->op);
    for (int q = 2; q < n; q++)
        coll_reduce(out, out, coll_seg_slot(s, q) + at, k, a->dtype, a->op);
}

static int small(struct coll_run *run, struct coll_seg *s,
                 const struct coll_layout *l)
{
    const struct coll_args *a = run->a;
    int me = run->g->rank;
    size_t half = coll_seg_small(s);
    memcpy(coll_seg_slot(s, me) + half, a->sendbuf,
           lay_range_bytes(l, 0, l->n));
    int rc = coll_seg_barrier(run, s);
    if (rc >= 0)
        combine(run, s, half + lay_boff(l, me), a->recvbuf, lay_count(l, me));
    return rc;
}

int coll_reducescatter_shm(struct coll_run *run)
{
    const struct coll_args *a = run->a;
    struct fccl_group *g = run->g;
    struct coll_layout l = lay_of_args(a, g->size);
    int n = g->size;
    size_t es = l.esize;
    /* the opening every shm algorithm has: the segment, else its fallback */
    struct coll_seg *s = NULL;
    int rc = coll_seg_get(run, &s);
    if (rc < 0)
        return rc;
    if (!s)
        return coll_reducescatter_ring(run);
    size_t cap = coll_seg_slot_bytes(s), big = lay_max_count(&l);
    if (big * es <= COLL_SHM_SMALL && lay_range_bytes(&l, 0, n) <= cap / 2)
        return small(run, s, &l);
    return coll_seg_reduce_scatter(run, s, &l, a->sendbuf, a->recvbuf);
}

int coll_seg_reduce_scatter(struct coll_run *run, struct coll_seg *s,
                            const struct coll_layout *l, const void *src,
                            void *dst)
{
    int n = coll_seg_size(s), me = coll_seg_rank(s);
    size_t es = l->esize, big = lay_max_count(l);
    int rc = coll_seg_large(run, s);
    size_t per = coll_seg_slot_bytes(s) / ((size_t)n * es); /* elements per
                                                    block per round */
    const unsigned char *in = src;
    unsigned char *out = dst, *slot = coll_seg_slot(s, me);
    for (size_t from = 0; from < big && rc >= 0; from += per) {
        for (int q = 0; q < n; q++) {
            size_t c = lay_count(l, q);
            if (from < c)
                memcpy(slot + (size_t)q * per * es,
                       in + lay_boff(l, q) + from * es,
                       min_sz(per, c - from) * es);
        }
        if ((rc = coll_seg_barrier(run, s)) < 0)
            break;
        size_t mine = lay_count(l, me);
        if (from < mine)
            combine(run, s, (size_t)me * per * es, out + from * es,
                    min_sz(per, mine - from));
        rc = coll_seg_barrier(run, s);
    }
    return rc;
}
