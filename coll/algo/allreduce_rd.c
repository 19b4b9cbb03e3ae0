/*
 * Recursive-doubling all-reduce, the small-message algorithm, and the
 * fold that lets power-of-two algorithms run on any rank count.
 *
 * Algorithm: in round k every rank exchanges its whole partial vector with
 * the rank whose virtual number differs in bit k and combines the two,
 * always as (lower rank's data) op (higher rank's data), so both partners
 * compute the same bits; after log2(p) rounds everyone holds the result.
 *
 * Non-power-of-two n = p + e (p the largest power of two <= n): the first
 * 2e ranks fold in pairs before the rounds (even rank r sends its vector
 * to r+1, which combines it) and the even ranks get the finished vector
 * back afterwards; the p survivors run the rounds.
 *
 * Cost: log2(p) (alpha + N beta + N gamma), plus 2 (alpha + N beta) when n
 * is not a power of two.  Latency-optimal; the full vector moves every
 * round, so it loses to ring and Rabenseifner on large vectors.  Uses one
 * scratch vector of N bytes from the group's cache: no allocation on the
 * hot path once warm.
 */
#include <string.h>

#include "algos.h"

#define STEP_FOLD 0
#define STEP_UNFOLD 1
#define STEP_ROUND0 COLL_FOLD_STEPS

void coll_fold_make(struct coll_fold *f, int n, int me)
{
    int p = 1;
    while (p * 2 <= n)
        p *= 2;
    f->p = p;
    f->extra = n - p;
    if (me < 2 * f->extra) {
        f->role = me % 2 == 0 ? FOLD_GIVER : FOLD_TAKER;
        f->vr = me % 2 == 0 ? -1 : me / 2;
    } else {
        f->role = FOLD_NONE;
        f->vr = me - f->extra;
    }
}

int coll_fold_real(const struct coll_fold *f, int vr)
{
    return vr < f->extra ? 2 * vr + 1 : vr + f->extra;
}

int coll_fold_in(struct coll_run *run, const struct coll_view *v,
                 const struct coll_fold *f, const void *src, void *dst,
                 size_t count, fccl_dtype_t dt, fccl_redop_t op, void *tmp)
{
    size_t bytes = count * fccl_dtype_size(dt);
    if (f->role == FOLD_GIVER) {
        struct tp_req r;
        int rc = cr_isend(run, v, v->me + 1, STEP_FOLD, src, bytes, &r);
        return rc < 0 ? rc : cr_wait(run, &r, 1);
    }
    if (f->role == FOLD_TAKER) {
        struct tp_req r;
        int rc = cr_irecv(run, v, v->me - 1, STEP_FOLD, tmp, bytes, &r);
        if (rc == FCCL_OK)
            rc = cr_wait(run, &r, 1);
        if (rc == FCCL_OK)
            rc = cr_check_len(run, &r, bytes);
        if (rc < 0)
            return rc;
        coll_reduce(dst, tmp, src, count, dt, op); /* lower rank first */
        return FCCL_OK;
    }
    if (dst != src)
        memmove(dst, src, bytes);
    return FCCL_OK;
}

int coll_fold_out(struct coll_run *run, const struct coll_view *v,
                  const struct coll_fold *f, void *dst, size_t bytes)
{
    if (f->role == FOLD_NONE)
        return FCCL_OK;
    struct tp_req r;
    int rc = f->role == FOLD_TAKER
                 ? cr_isend(run, v, v->me - 1, STEP_UNFOLD, dst, bytes, &r)
                 : cr_irecv(run, v, v->me + 1, STEP_UNFOLD, dst, bytes, &r);
    if (rc < 0)
        return rc;
    rc = cr_wait(run, &r, 1);
    return rc < 0 ? rc : cr_check_len(run, &r, f->role == FOLD_GIVER ? bytes : 0);
}

int coll_rd_all_reduce(struct coll_run *run, const struct coll_view *v,
                       const void *src, void *dst, size_t count,
                       fccl_dtype_t dt, fccl_redop_t op)
{
    size_t bytes = count * fccl_dtype_size(dt);
    if (v->n == 1 || bytes == 0) {
        if (dst != src)
            memmove(dst, src, bytes);
        return FCCL_OK;
    }
    void *tmp = cr_scratch(run, bytes);
    if (!tmp)
        return FCCL_ERR_NOMEM;
    struct coll_fold f;
    coll_fold_make(&f, v->n, v->me);
    /* Before any round, my partial is src itself (no copy): the first
     * combine writes dst. */
    const void *cur = src;
    if (f.role != FOLD_NONE) {
        int rc = coll_fold_in(run, v, &f, src, dst, count, dt, op, tmp);
        if (rc < 0)
            return rc;
        cur = dst;
    }
    for (int mask = 1, k = 0; f.vr >= 0 && mask < f.p; mask <<= 1, k++) {
        int pv = f.vr ^ mask, peer = coll_fold_real(&f, pv);
        int rc = cr_sendrecv(run, v, peer, cur, bytes, peer, tmp, bytes,
                             STEP_ROUND0 + (uint32_t)k);
        if (rc < 0)
            return rc;
        if (pv < f.vr)
            coll_reduce(dst, tmp, cur, count, dt, op);
        else
            coll_reduce(dst, cur, tmp, count, dt, op);
        cur = dst;
    }
    return coll_fold_out(run, v, &f, dst, bytes);
}

int coll_allreduce_rd(struct coll_run *run)
{
    const struct coll_args *a = run->a;
    struct coll_view v = view_of_group(run->g);
    return coll_rd_all_reduce(run, &v, a->sendbuf, a->recvbuf, a->count,
                              a->dtype, a->op);
}
