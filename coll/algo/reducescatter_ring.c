/*
 * Ring reduce-scatter (even and _v), also the first half of ring
 * all-reduce.
 *
 * Algorithm: ranks form a ring; at step s = 0..n-2 rank r sends block
 * (r-s-1) to r+1 and receives block (r-s-2) from r-1, which it combines
 * with its own contribution and forwards at the next step.  After n-1
 * steps block r, reduced over every rank, is complete on rank r.  Each
 * element is combined exactly once per rank in a fixed chain, so the
 * result is the same on every run.
 *
 * Cost: (n-1) alpha + (n-1)/n N beta + (n-1)/n N gamma, bandwidth-optimal.
 *
 * Pipelining: blocks are cut into chunks; RS_SLOTS receives are always
 * posted ahead, so while chunk k is being reduced chunks k+1.. arrive, and
 * a reduced chunk is forwarded at once (the next step of that chunk does
 * not wait for the rest of its block).
 *
 * Any rank count; uneven or empty blocks (the _v variant, or counts that
 * do not divide by n) only change chunk counts: empty blocks send nothing.
 */
#include <string.h>

#include "algos.h"

#define RS_SLOTS 4

struct rs_state {
    struct coll_run *run;
    const struct coll_view *v;
    const struct coll_layout *l;
    const unsigned char *src;
    unsigned char *acc, *out; /* out: where my finished block goes */
    unsigned char *slots;
    size_t chunk;
    fccl_dtype_t dt;
    fccl_redop_t op;
    struct tp_req *rreq, *sreq;
    struct chunk_item item[RS_SLOTS];
    struct chunk_it rit;
    size_t nsent, nposted;
};

static int ranges_overlap(const void *a, size_t alen, const void *b,
                          size_t blen)
{
    const unsigned char *pa = a, *pb = b;
    return alen && blen && pa < pb + blen && pb < pa + alen;
}

static int rs_post_recv(struct rs_state *s)
{
    int j = (int)(s->nposted % RS_SLOTS);
    if (!chunk_it_next(&s->rit, &s->item[j]))
        return 0;
    int left = (s->v->me - 1 + s->v->n) % s->v->n;
    int rc = cr_irecv(s->run, s->v, left, (uint32_t)s->nposted,
                      s->slots + (size_t)j * s->chunk, s->item[j].len,
                      &s->rreq[j]);
    if (rc < 0)
        return rc;
    s->nposted++;
    return 1;
}

static int rs_send(struct rs_state *s, const void *buf, size_t len)
{
    int right = (s->v->me + 1) % s->v->n;
    int rc = cr_isend(s->run, s->v, right, (uint32_t)s->nsent, buf, len,
                      &s->sreq[s->nsent]);
    if (rc == FCCL_OK)
        s->nsent++;
    return rc;
}

/* Step 0: my own contribution to block r-1 goes out unreduced. */
static int rs_first_sends(struct rs_state *s)
{
    int n = s->v->n, b = (s->v->me - 1 + n) % n;
    struct chunk_it it = chunk_it_make(s->l, b, 1, s->chunk);
    struct chunk_item c;
    while (chunk_it_next(&it, &c)) {
        int rc = rs_send(s, s->src + c.off, c.len);
        if (rc < 0)
            return rc;
    }
    return FCCL_OK;
}

/* Receive item k (in slot j), combine, forward or finish. */
static int rs_consume(struct rs_state *s, int j)
{
    struct chunk_item *c = &s->item[j];
    int rc = cr_wait(s->run, &s->rreq[j], 1);
    if (rc == FCCL_OK)
        rc = cr_check_len(s->run, &s->rreq[j], c->len);
    if (rc < 0)
        return rc;
    int last = c->step == s->v->n - 2;
    unsigned char *dst = last ? s->out + (c->off - lay_boff(s->l, s->v->me))
                              : s->acc + c->off;
    size_t es = s->l->esize;
    cr_reduce(s->run, dst, s->src + c->off, s->slots + (size_t)j * s->chunk,
              c->len / es, s->dt, s->op);
    return last ? FCCL_OK : rs_send(s, dst, c->len);
}

static size_t rs_count_sends(const struct coll_layout *l, int me, size_t chunk)
{
    int n = l->n;
    struct chunk_it it = chunk_it_make(l, me - 1, n - 1, chunk);
    struct chunk_item c;
    size_t k = 0;
    while (chunk_it_next(&it, &c))
        k++;
    return k;
}

int coll_ring_reduce_scatter(struct coll_run *run, const struct coll_view *v,
                             const void *src, void *acc, void *dst,
                             const struct coll_layout *l, fccl_dtype_t dt,
                             fccl_redop_t op)
{
    int n = v->n, me = v->me;
    size_t mine = lay_bytes(l, me);
    const unsigned char *s8 = src;
    if (n == 1) {
        if (dst != s8 + lay_boff(l, 0))
            memmove(dst, s8 + lay_boff(l, 0), mine);
        return FCCL_OK;
    }
    size_t total = lay_range_bytes(l, 0, n);
    if (total == 0)
        return FCCL_OK;
    size_t budget = run->nsteps > (uint32_t)n + 1 ? run->nsteps - (size_t)n : 1;
    struct rs_state s = {.run = run, .v = v, .l = l, .src = s8, .dt = dt,
                         .op = op};
    s.chunk = cr_chunk(run, v, l->esize, total, budget);
    size_t nsend = rs_count_sends(l, me, s.chunk);
    /* scratch: slots | accumulator (if none given) | my block (if the
     * output overlaps the input and must wait for the sends to finish) */
    int own_acc = acc == NULL;
    unsigned char *a8 = acc;
    int late_out = ranges_overlap(dst, mine, src, total) &&
                   (own_acc || (unsigned char *)dst != a8 + lay_boff(l, me));
    size_t need = RS_SLOTS * s.chunk + (own_acc ? total : 0) +
                  (late_out ? mine : 0);
    unsigned char *scr = cr_scratch(run, need);
    struct tp_req *reqs = cr_reqs(run, RS_SLOTS + nsend);
    if (!scr || !reqs)
        return FCCL_ERR_NOMEM;
    s.slots = scr;
    s.acc = own_acc ? scr + RS_SLOTS * s.chunk : a8;
    s.out = late_out ? scr + RS_SLOTS * s.chunk + (own_acc ? total : 0) : dst;
    s.rreq = reqs;
    s.sreq = reqs + RS_SLOTS;
    s.rit = chunk_it_make(l, me - 2, n - 1, s.chunk);

    int rc = FCCL_OK;
    for (int j = 0; j < RS_SLOTS && rc >= 0; j++)
        rc = rs_post_recv(&s);
    if (rc >= 0)
        rc = rs_first_sends(&s);
    for (size_t k = 0; rc >= 0 && k < s.nposted; k++) {
        int j = (int)(k % RS_SLOTS);
        rc = rs_consume(&s, j);
        if (rc >= 0)
            rc = rs_post_recv(&s);
    }
    if (rc >= 0)
        rc = cr_wait(run, s.sreq, s.nsent);
    if (rc < 0)
        return rc;
    if (late_out)
        memcpy(dst, s.out, mine);
    return FCCL_OK;
}

int coll_reducescatter_ring(struct coll_run *run)
{
    const struct coll_args *a = run->a;
    struct coll_view v = view_of_group(run->g);
    struct coll_layout l = lay_of_args(a, v.n);
    return coll_ring_reduce_scatter(run, &v, a->sendbuf, NULL, a->recvbuf, &l,
                                    a->dtype, a->op);
}
