/*
 * All-to-all along any dimensions (all_to_all_dims, MindSpore's AlltoAll
 * with split_dim and concat_dim): a change of layout around an even
 * all-to-all.
 *
 * Algorithm: the block for rank p is slice p of the input along
 * split_dim; packed one after the other, the slices are the send buffer
 * of an even all-to-all with one slice per rank.  Its receive buffer
 * holds rank q's slice at q, and unpacking puts it at slice q of the
 * output along concat_dim.  Either step is skipped where the slices lie
 * contiguous already (every dimension before split_dim, or before
 * concat_dim in the output, is 1): split_dim = concat_dim = 0 is
 * all_to_all itself, with no copy.  The exchange is the all_to_all
 * algorithm of the same name (pairwise, linear, shm), picked by the
 * selector as it would pick it for all_to_all with the slice as block.
 *
 * Cost: that all-to-all's, plus one pass over the input to pack and one
 * over the output to unpack where needed, through up to twice the
 * tensor's bytes of the group's scratch.  Any n (the API makes the split
 * dimension a multiple of it).  In place works: the exchange then runs
 * between the user's buffer and scratch, or, with no copy at all, in
 * place as all_to_all does.
 */
#include "algos.h"

typedef int (*a2a_fn)(struct coll_run *run);

/* Are the slices along `dim` whole contiguous blocks? */
static int contiguous(const size_t *dims, int dim)
{
    for (int i = 0; i < dim; i++)
        if (dims[i] != 1)
            return 0;
    return 1;
}

/* Slice p (of width w) of a tensor along dim: lo and ext of its box. */
static void slice(const size_t *dims, int nd, int dim, size_t w, size_t p,
                  size_t *lo, size_t *ext)
{
    for (int i = 0; i < nd; i++) {
        lo[i] = 0;
        ext[i] = dims[i];
    }
    lo[dim] = p * w;
    ext[dim] = w;
}

/* Run `inner` on the packed buffers (a sub-run with its own arguments;
 * its requests are handed back for the error path's cancel). */
static int exchange(struct coll_run *run, a2a_fn inner, const void *src,
                    void *dst)
{
    struct coll_args b = *run->a;
    b.kind = COLL_ALLTOALL;
    b.sendbuf = src;
    b.recvbuf = dst;
    b.shape.ndim = 0;
    struct coll_run sub = *run;
    sub.a = &b;
    int rc = inner(&sub);
    run->reqs = sub.reqs;
    run->nreqs = sub.nreqs;
    return rc;
}

static int run_dims(struct coll_run *run, a2a_fn inner)
{
    const struct coll_args *a = run->a;
    const struct coll_shape *s = &a->shape;
    int nd = s->ndim;
    size_t n = (size_t)run->g->size, es = fccl_dtype_size(a->dtype);
    size_t blk = a->count * es, bytes = blk * n;
    size_t bd[COLL_MAX_DIMS] = {0}, od[COLL_MAX_DIMS] = {0};
    size_t lo[COLL_MAX_DIMS], ext[COLL_MAX_DIMS];
    for (int i = 0; i < nd; i++)
        bd[i] = s->dims[i];
    bd[s->split_dim] /= n;
    for (int i = 0; i < nd; i++)
        od[i] = bd[i];
    od[s->concat_dim] *= n;
    int pack = !contiguous(s->dims, s->split_dim);
    int unpack = !contiguous(od, s->concat_dim);
    unsigned char *scr = NULL;
    if ((pack || unpack) &&
        !(scr = cr_scratch(run, (size_t)(pack + unpack) * bytes)))
        return FCCL_ERR_NOMEM;
    unsigned char *src = pack ? scr : (unsigned char *)a->sendbuf;
    unsigned char *dst = unpack ? scr + (pack ? bytes : 0) : a->recvbuf;
    for (size_t p = 0; pack && p < n; p++) {
        slice(s->dims, nd, s->split_dim, bd[s->split_dim], p, lo, ext);
        coll_box_copy((unsigned char *)a->sendbuf, s->dims, nd, lo, ext, es,
                      src + p * blk, 1);
    }
    int rc = exchange(run, inner, src, dst);
    if (rc != FCCL_OK)
        return rc;
    for (size_t q = 0; unpack && q < n; q++) {
        slice(od, nd, s->concat_dim, bd[s->concat_dim], q, lo, ext);
        coll_box_copy(a->recvbuf, od, nd, lo, ext, es, dst + q * blk, 0);
    }
    return FCCL_OK;
}

int coll_alltoall_dims_pairwise(struct coll_run *run)
{
    return run_dims(run, coll_alltoall_pairwise);
}

int coll_alltoall_dims_linear(struct coll_run *run)
{
    return run_dims(run, coll_alltoall_linear);
}

int coll_alltoall_dims_shm(struct coll_run *run)
{
    return run_dims(run, coll_alltoall_shm);
}
