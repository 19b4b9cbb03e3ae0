/*
 * Rabenseifner all-reduce: recursive-halving reduce-scatter followed by a
 * recursive-doubling all-gather, the medium/large-message algorithm with
 * logarithmic latency.
 *
 * Algorithm (p = 2^k ranks): the vector is split into p blocks.  In
 * halving round j (distance p/2, p/4, .., 1) each rank keeps the half of
 * its current block range on its side of the partner, sends the other
 * half, and combines what it receives as (lower rank's data) op (higher
 * rank's data).  After k rounds rank v owns block v, fully reduced; the
 * doubling rounds then swap owned ranges in the reverse order until every
 * rank holds every block.  Each block is reduced by one tree and then only
 * copied, so all ranks hold the same bits.
 *
 * Cost: 2 log2(p) alpha + 2 (p-1)/p N beta + (p-1)/p N gamma.
 *
 * Non-power-of-two n: the extra ranks fold in first and get the result
 * back at the end (see allreduce_rd.c), adding 2 (alpha + N beta).
 * Counts not divisible by p: the first count % p blocks are one element
 * longer; blocks may be empty when count < p (nothing is sent for them).
 */
#include <string.h>

#include "algos.h"

struct rab {
    struct coll_run *run;
    const struct coll_view *v;
    const struct coll_fold *f;
    struct coll_layout l;
    unsigned char *dst, *tmp;
    fccl_dtype_t dt;
    fccl_redop_t op;
};

static size_t range_off(const struct rab *r, int lo)
{
    return lo == r->l.n ? r->l.count * r->l.esize : lay_boff(&r->l, lo);
}

static size_t range_bytes(const struct rab *r, int lo, int hi)
{
    return range_off(r, hi) - range_off(r, lo);
}

/* One halving round: keep [klo, khi), send [slo, shi). */
static int halve(struct rab *r, int mask, uint32_t step, int *lo, int *hi)
{
    int vr = r->f->vr, pv = vr ^ mask, peer = coll_fold_real(r->f, pv);
    int mid = *lo + (*hi - *lo) / 2;
    int keep_low = (vr & mask) == 0;
    int klo = keep_low ? *lo : mid, khi = keep_low ? mid : *hi;
    int slo = keep_low ? mid : *lo, shi = keep_low ? *hi : mid;
    size_t kb = range_bytes(r, klo, khi);
    int rc = cr_sendrecv(r->run, r->v, peer, r->dst + range_off(r, slo),
                         range_bytes(r, slo, shi), peer, r->tmp, kb, step);
    if (rc < 0)
        return rc;
    unsigned char *mine = r->dst + range_off(r, klo);
    size_t cnt = kb / r->l.esize;
    if (pv < vr)
        coll_reduce(mine, r->tmp, mine, cnt, r->dt, r->op);
    else
        coll_reduce(mine, mine, r->tmp, cnt, r->dt, r->op);
    *lo = klo;
    *hi = khi;
    return FCCL_OK;
}

/* One doubling round: swap my range with the partner's neighbouring one. */
static int dbl(struct rab *r, int mask, uint32_t step, int *lo, int *hi)
{
    int vr = r->f->vr, pv = vr ^ mask, peer = coll_fold_real(r->f, pv);
    int plo = (vr & mask) ? *lo - mask : *hi;
    int phi = plo + mask;
    int rc = cr_sendrecv(r->run, r->v, peer, r->dst + range_off(r, *lo),
                         range_bytes(r, *lo, *hi), peer,
                         r->dst + range_off(r, plo), range_bytes(r, plo, phi),
                         step);
    if (rc < 0)
        return rc;
    *lo = plo < *lo ? plo : *lo;
    *hi = phi > *hi ? phi : *hi;
    return FCCL_OK;
}

int coll_rab_all_reduce(struct coll_run *run, const struct coll_view *v,
                        const void *src, void *dst, size_t count,
                        fccl_dtype_t dt, fccl_redop_t op)
{
    size_t es = fccl_dtype_size(dt), bytes = count * es;
    if (v->n == 1 || bytes == 0) {
        if (dst != src)
            memmove(dst, src, bytes);
        return FCCL_OK;
    }
    struct coll_fold f;
    coll_fold_make(&f, v->n, v->me);
    /* half the vector (rounded up to a block) is the most one round gets */
    unsigned char *tmp = cr_scratch(run, bytes);
    if (!tmp)
        return FCCL_ERR_NOMEM;
    int rc = coll_fold_in(run, v, &f, src, dst, count, dt, op, tmp);
    if (rc < 0 || f.role == FOLD_GIVER)
        return rc < 0 ? rc : coll_fold_out(run, v, &f, dst, bytes);

    struct rab r = {run, v, &f, {LAY_SPLIT, f.p, es, count, NULL, NULL},
                    dst, tmp, dt, op};
    uint32_t step = COLL_FOLD_STEPS;
    int lo = 0, hi = f.p;
    for (int mask = f.p / 2; mask >= 1 && rc >= 0; mask /= 2)
        rc = halve(&r, mask, step++, &lo, &hi);
    for (int mask = 1; mask < f.p && rc >= 0; mask *= 2)
        rc = dbl(&r, mask, step++, &lo, &hi);
    if (rc < 0)
        return rc;
    return coll_fold_out(run, v, &f, dst, bytes);
}

int coll_allreduce_rabenseifner(struct coll_run *run)
{
    const struct coll_args *a = run->a;
    struct coll_view v = view_of_group(run->g);
    return coll_rab_all_reduce(run, &v, a->sendbuf, a->recvbuf, a->count,
                               a->dtype, a->op);
}
