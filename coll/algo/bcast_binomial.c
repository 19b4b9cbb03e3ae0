/*
 * Binomial-tree broadcast, pipelined.
 *
 * Algorithm: with ranks renumbered so that the root is 0, rank v receives
 * from v - lowbit(v) and sends to v + 2^j for every 2^j below lowbit(v)
 * (the root: below n), largest subtree first.  The message is cut into
 * chunks and each chunk is passed on the moment it arrives, with a window
 * of receives posted ahead, so a long message streams down the tree.
 *
 * Cost: log2(n) alpha + N beta per level unpipelined; pipelined about
 * (log2(n) + C - 1) (alpha + N/C beta) for C chunks, but the root (and
 * each inner node) sends the whole message once per child, so for large
 * messages on many ranks scatter + all-gather (bcast_scatter_ag.c) wins.
 *
 * Any n (the tree is cut off at n).  Data is only copied: every rank gets
 * the root's bytes.
 */
#include "algos.h"

#define BB_WINDOW 8
#define BB_MAXCHILD 32

struct bb {
    struct coll_run *run;
    const struct coll_view *v;
    unsigned char *buf;
    size_t bytes, chunk, nchunks, nsent;
    int child[BB_MAXCHILD], nchild, parent;
    struct tp_req *rreq, *sreq;
};

static size_t bb_len(const struct bb *b, size_t c)
{
    size_t off = c * b->chunk;
    return b->bytes - off < b->chunk ? b->bytes - off : b->chunk;
}

static void bb_tree(struct bb *b, int n, int vr, int root)
{
    int low = 1;
    while (low < n && !(vr & low))
        low <<= 1;
    b->parent = vr == 0 ? -1 : (vr - low + root) % n;
    b->nchild = 0;
    for (int mask = low >> 1; mask >= 1; mask >>= 1)
        if (vr + mask < n && b->nchild < BB_MAXCHILD)
            b->child[b->nchild++] = (vr + mask + root) % n;
}

static int bb_post(struct bb *b, size_t c)
{
    if (c >= b->nchunks || b->parent < 0)
        return FCCL_OK;
    return cr_irecv(b->run, b->v, b->parent, (uint32_t)c,
                    b->buf + c * b->chunk, bb_len(b, c),
                    &b->rreq[c % BB_WINDOW]);
}

static int bb_forward(struct bb *b, size_t c)
{
    for (int i = 0; i < b->nchild; i++) {
        int rc = cr_isend(b->run, b->v, b->child[i], (uint32_t)c,
                          b->buf + c * b->chunk, bb_len(b, c),
                          &b->sreq[b->nsent]);
        if (rc < 0)
            return rc;
        b->nsent++;
    }
    return FCCL_OK;
}

int coll_binomial_bcast(struct coll_run *run, const struct coll_view *v,
                        void *buf, size_t len, int root)
{
    int n = v->n;
    if (n == 1 || len == 0)
        return FCCL_OK;
    struct bb b = {.run = run, .v = v, .buf = buf, .bytes = len};
    bb_tree(&b, n, (v->me - root + n) % n, root);
    b.chunk = cr_chunk(run, v, 1, len, run->nsteps);
    b.nchunks = (len + b.chunk - 1) / b.chunk;
    struct tp_req *reqs = cr_reqs(run, BB_WINDOW + b.nchunks * (size_t)b.nchild);
    if (!reqs)
        return FCCL_ERR_NOMEM;
    b.rreq = reqs;
    b.sreq = reqs + BB_WINDOW;
    int rc = FCCL_OK;
    for (size_t c = 0; c < BB_WINDOW && rc >= 0; c++)
        rc = bb_post(&b, c);
    for (size_t c = 0; c < b.nchunks && rc >= 0; c++) {
        if (b.parent >= 0) {
            struct tp_req *r = &b.rreq[c % BB_WINDOW];
            rc = cr_wait(run, r, 1);
            if (rc >= 0)
                rc = cr_check_len(run, r, bb_len(&b, c));
            if (rc >= 0)
                rc = bb_post(&b, c + BB_WINDOW);
        }
        if (rc >= 0)
            rc = bb_forward(&b, c);
    }
    if (rc >= 0)
        rc = cr_wait(run, b.sreq, b.nsent);
    return rc;
}

int coll_bcast_binomial(struct coll_run *run)
{
    const struct coll_args *a = run->a;
    struct coll_view v = view_of_group(run->g);
    return coll_binomial_bcast(run, &v, a->recvbuf,
                               a->count * fccl_dtype_size(a->dtype), a->root);
}
