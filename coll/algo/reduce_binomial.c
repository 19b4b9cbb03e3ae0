/*
 * Binomial-tree reduce to a root.
 *
 * Algorithm: with ranks renumbered so that the root is 0, rank v receives
 * the partial results of its children v+1, v+2, v+4, .. (while the bit is
 * clear in v), combines them in that fixed order onto its own data and
 * sends the result to its parent v - lowbit(v).  The tree depends only on
 * (n, root), so the result is the same on every run.
 *
 * Cost: log2(n) (alpha + N beta + N gamma) on the critical path.  Large
 * vectors are pipelined in chunks: chunk c+1 is already arriving from the
 * children while chunk c is combined and passed up, which brings the
 * bandwidth term close to N beta (each rank forwards at most once).
 *
 * Any n (the tree is just cut off at n); any count.
 */
#include <string.h>

#include "algos.h"

#define RB_MAXCHILD 32

struct rb {
    struct coll_run *run;
    const struct coll_view *v;
    const unsigned char *src;
    unsigned char *acc, *slots;
    size_t chunk, bytes, nchunks;
    fccl_dtype_t dt;
    fccl_redop_t op;
    int child[RB_MAXCHILD], nchild, parent;
    struct tp_req *rreq, *sreq; /* rreq: 2 x nchild slots */
};

static size_t rb_len(const struct rb *b, size_t c)
{
    size_t off = c * b->chunk;
    return b->bytes - off < b->chunk ? b->bytes - off : b->chunk;
}

static unsigned char *rb_slot(const struct rb *b, size_t c, int i)
{
    return b->slots + ((c % 2) * (size_t)b->nchild + (size_t)i) * b->chunk;
}

static int rb_post(struct rb *b, size_t c)
{
    if (c >= b->nchunks)
        return FCCL_OK;
    for (int i = 0; i < b->nchild; i++) {
        struct tp_req *r = &b->rreq[(c % 2) * (size_t)b->nchild + (size_t)i];
        int rc = cr_irecv(b->run, b->v, b->child[i], (uint32_t)c,
                          rb_slot(b, c, i), rb_len(b, c), r);
        if (rc < 0)
            return rc;
    }
    return FCCL_OK;
}

/* Combine chunk c of every child onto my data, in child order. */
static int rb_chunk(struct rb *b, size_t c)
{
    size_t off = c * b->chunk, len = rb_len(b, c);
    size_t cnt = len / fccl_dtype_size(b->dt);
    struct tp_req *r = &b->rreq[(c % 2) * (size_t)b->nchild];
    int rc = cr_wait(b->run, r, (size_t)b->nchild);
    for (int i = 0; rc >= 0 && i < b->nchild; i++)
        rc = cr_check_len(b->run, &r[i], len);
    if (rc < 0)
        return rc;
    const unsigned char *in = b->src + off;
    for (int i = 0; i < b->nchild; i++) {
        coll_reduce(b->acc + off, in, rb_slot(b, c, i), cnt, b->dt, b->op);
        in = b->acc + off;
    }
    if (b->parent < 0)
        return FCCL_OK;
    return cr_isend(b->run, b->v, b->parent, (uint32_t)c, in, len,
                    &b->sreq[c]);
}

static void rb_tree(struct rb *b, int n, int vr, int root)
{
    b->nchild = 0;
    b->parent = -1;
    for (int mask = 1; mask < n; mask <<= 1) {
        if (vr & mask) {
            b->parent = (vr - mask + root) % n;
            break;
        }
        if (vr + mask < n && b->nchild < RB_MAXCHILD)
            b->child[b->nchild++] = (vr + mask + root) % n;
    }
}

int coll_binomial_reduce(struct coll_run *run, const struct coll_view *v,
                         const void *src, void *dst, size_t count,
                         fccl_dtype_t dt, fccl_redop_t op, int root)
{
    int n = v->n, vr = (v->me - root + n) % n;
    struct rb b = {.run = run, .v = v, .src = src, .dt = dt, .op = op};
    b.bytes = count * fccl_dtype_size(dt);
    if (n == 1 || b.bytes == 0) {
        if (v->me == root && dst != src)
            memmove(dst, src, b.bytes);
        return FCCL_OK;
    }
    rb_tree(&b, n, vr, root);
    b.chunk = cr_chunk(run, v, fccl_dtype_size(dt), b.bytes, run->nsteps);
    b.nchunks = (b.bytes + b.chunk - 1) / b.chunk;
    /* scratch: two chunk slots per child | my partial (inner nodes) */
    size_t slots = 2 * (size_t)b.nchild * b.chunk;
    int inner = b.parent >= 0 && b.nchild > 0;
    unsigned char *scr = cr_scratch(run, slots + (inner ? b.bytes : 0));
    struct tp_req *reqs = cr_reqs(run, 2 * (size_t)b.nchild + b.nchunks);
    if (!scr || !reqs)
        return FCCL_ERR_NOMEM;
    b.slots = scr;
    b.acc = b.parent < 0 ? dst : inner ? scr + slots : NULL;
    b.rreq = reqs;
    b.sreq = reqs + 2 * (size_t)b.nchild;
    int rc = rb_post(&b, 0);
    for (size_t c = 0; rc >= 0 && c < b.nchunks; c++) {
        rc = rb_post(&b, c + 1);
        if (rc >= 0 && b.nchild > 0)
            rc = rb_chunk(&b, c);
        else if (rc >= 0) /* leaf: my data goes up as it is */
            rc = cr_isend(run, v, b.parent, (uint32_t)c, b.src + c * b.chunk,
                          rb_len(&b, c), &b.sreq[c]);
    }
    if (rc >= 0 && b.parent >= 0)
        rc = cr_wait(run, b.sreq, b.nchunks);
    return rc;
}

int coll_reduce_binomial(struct coll_run *run)
{
    const struct coll_args *a = run->a;
    struct coll_view v = view_of_group(run->g);
    return coll_binomial_reduce(run, &v, a->sendbuf, a->recvbuf, a->count,
                                a->dtype, a->op, a->root);
}
