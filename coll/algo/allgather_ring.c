/*
 * Ring all-gather (even and _v), also the second half of ring all-reduce.
 *
 * Algorithm: at step s = 0..n-2 rank r sends block (r-s) to r+1 and
 * receives block (r-s-1) from r-1, straight into its final place, and
 * forwards it at the next step.  Blocks are copied, never combined, so
 * every rank ends with the same bytes.
 *
 * Cost: (n-1) alpha + (n-1)/n N beta; bandwidth-optimal, latency linear in
 * n (Bruck is the small-message choice).
 *
 * Pipelining: blocks are cut into chunks and AG_WINDOW receives are kept
 * posted ahead; a chunk is forwarded as soon as it has arrived, so a block
 * streams around the ring instead of moving one hop per step.
 *
 * Any rank count; uneven or empty blocks (the _v variant) just change the
 * chunk counts, and empty blocks send nothing.
 */
#include <string.h>

#include "algos.h"

#define AG_WINDOW COLL_WINDOW

struct ag_state {
    struct coll_run *run;
    const struct coll_view *v;
    unsigned char *buf;
    size_t chunk;
    struct tp_req *rreq, *sreq;
    struct chunk_item item[AG_WINDOW];
    struct chunk_it rit;
    size_t nposted, nsent;
};

static int ag_post_recv(struct ag_state *s)
{
    int j = (int)(s->nposted % AG_WINDOW);
    if (!chunk_it_next(&s->rit, &s->item[j]))
        return 0;
    int left = (s->v->me - 1 + s->v->n) % s->v->n;
    int rc = cr_irecv(s->run, s->v, left, (uint32_t)s->nposted,
                      s->buf + s->item[j].off, s->item[j].len, &s->rreq[j]);
    if (rc < 0)
        return rc;
    s->nposted++;
    return 1;
}

static int ag_send(struct ag_state *s, const unsigned char *p, size_t len)
{
    int right = (s->v->me + 1) % s->v->n;
    int rc = cr_isend(s->run, s->v, right, (uint32_t)s->nsent, p, len,
                      &s->sreq[s->nsent]);
    if (rc == FCCL_OK)
        s->nsent++;
    return rc;
}

static size_t ag_count_sends(const struct coll_layout *l, int me, size_t chunk)
{
    struct chunk_it it = chunk_it_make(l, me, l->n - 1, chunk);
    struct chunk_item c;
    size_t k = 0;
    while (chunk_it_next(&it, &c))
        k++;
    return k;
}

int coll_ring_all_gather(struct coll_run *run, const struct coll_view *v,
                         void *buf, const struct coll_layout *l,
                         const void *own)
{
    int n = v->n, me = v->me;
    if (n == 1 || lay_range_bytes(l, 0, n) == 0) {
        if (own)
            memcpy((unsigned char *)buf + lay_boff(l, me), own, lay_bytes(l, me));
        return FCCL_OK;
    }
    size_t total = lay_range_bytes(l, 0, n);
    size_t budget = run->nsteps > (uint32_t)n + 1 ? run->nsteps - (size_t)n : 1;
    struct ag_state s = {.run = run, .v = v, .buf = buf};
    /* Two ranks forward nothing: each block crosses once, and chunks only
     * add per-message costs (2 hosts x 1 rank, 64 MiB all_gather, 4
     * interleaved rounds: 39.1 -> 30.8 ms on net, 16 MiB 8.7 -> 7.2 ms;
     * 2 rounds on tcp;ofi_rxm 35.8-46.3 -> 32.5-33.7 ms).
     * FCCL_CHUNK_BYTES still applies. */
    s.chunk = n == 2 && !run->st->chunk
                  ? total
                  : cr_chunk(run, v, l->esize, total, budget);
    size_t nsend = ag_count_sends(l, me, s.chunk);
    struct tp_req *reqs = cr_reqs(run, AG_WINDOW + nsend);
    if (!reqs)
        return FCCL_ERR_NOMEM;
    s.rreq = reqs;
    s.sreq = reqs + AG_WINDOW;
    s.rit = chunk_it_make(l, me - 1, n - 1, s.chunk);

    int rc = FCCL_OK;
    for (int j = 0; j < AG_WINDOW && rc >= 0; j++)
        rc = ag_post_recv(&s);
    /* step 0: my own block, straight from where the caller has it; its
     * local copy runs while the first chunks are on their way */
    const unsigned char *src = own ? own : s.buf + lay_boff(l, me);
    struct chunk_it oit = chunk_it_make(l, me, 1, s.chunk);
    struct chunk_item c;
    int copied = own == NULL;
    while (rc >= 0 && chunk_it_next(&oit, &c)) {
        if (!copied && s.nsent == COLL_WINDOW) {
            cr_copy(run, s.buf + lay_boff(l, me), own, lay_bytes(l, me));
            copied = 1;
        }
        rc = ag_send(&s, src + (c.off - lay_boff(l, me)), c.len);
    }
    if (rc >= 0 && !copied)
        cr_copy(run, s.buf + lay_boff(l, me), own, lay_bytes(l, me));
    for (size_t k = 0; rc >= 0 && k < s.nposted; k++) {
        int j = (int)(k % AG_WINDOW);
        struct chunk_item got = s.item[j];
        rc = cr_wait(run, &s.rreq[j], 1);
        if (rc >= 0)
            rc = cr_check_len(run, &s.rreq[j], got.len);
        if (rc >= 0 && got.step < n - 2)
            rc = ag_send(&s, s.buf + got.off, got.len);
        if (rc >= 0)
            rc = ag_post_recv(&s);
    }
    if (rc >= 0)
        rc = cr_wait(run, s.sreq, s.nsent);
    return rc < 0 ? rc : FCCL_OK;
}

const void *coll_allgather_own(const struct coll_args *a,
                               const struct coll_layout *l, int me)
{
    unsigned char *out = a->recvbuf, *mine = out + lay_boff(l, me);
    const unsigned char *in = a->sendbuf;
    size_t len = lay_bytes(l, me), total = lay_range_bytes(l, 0, l->n);
    if (in == mine || len == 0)
        return NULL;
    if (in < out + total && out < in + len) {
        /* in place with my block at the start: move it before anything
         * lands there */
        memmove(mine, in, len);
        return NULL;
    }
    return in;
}

/* all_gather / all_gather_v entry. */
int coll_allgather_ring(struct coll_run *run)
{
    const struct coll_args *a = run->a;
    struct coll_view v = view_of_group(run->g);
    struct coll_layout l = lay_of_args(a, v.n);
    const void *own = coll_allgather_own(a, &l, v.me);
    return coll_ring_all_gather(run, &v, a->recvbuf, &l, own);
}
