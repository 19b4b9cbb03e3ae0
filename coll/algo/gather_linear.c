/*
 * Linear gather: every rank sends its block straight to the root, which
 * has all receives posted at once.
 *
 * Cost: alpha + (n-1)/n N beta at the root's link (the root's incoming
 * bandwidth is the limit either way, so a binomial tree only saves
 * latency for tiny blocks on many ranks; the root posts everything up
 * front, so the n-1 latencies overlap).
 *
 * Any n, any count.  In place (root's sendbuf == recvbuf): the root's own
 * block is first moved from the start of the buffer to its slot.
 *
 * scatter_linear.c is this file's mirror image (it sends where this one
 * receives).  They stay two files on purpose, each reading as its own
 * operation: where they differ is the point (the root's own block moves
 * before the transfers here and after them there, and only receivers
 * check lengths).
 */
#include <string.h>

#include "algos.h"

int coll_gather_linear(struct coll_run *run)
{
    const struct coll_args *a = run->a;
    struct fccl_group *g = run->g;
    struct coll_view v = view_of_group(g);
    size_t bytes = a->count * fccl_dtype_size(a->dtype);
    if (bytes == 0)
        return FCCL_OK;
    if (g->rank != a->root) {
        struct tp_req r;
        int rc = cr_isend(run, &v, a->root, 0, a->sendbuf, bytes, &r);
        return rc < 0 ? rc : cr_wait(run, &r, 1);
    }
    unsigned char *out = a->recvbuf;
    if (out + (size_t)g->rank * bytes != a->sendbuf)
        memmove(out + (size_t)g->rank * bytes, a->sendbuf, bytes);
    if (g->size == 1)
        return FCCL_OK;
    struct tp_req *reqs = cr_reqs(run, (size_t)g->size - 1);
    if (!reqs)
        return FCCL_ERR_NOMEM;
    size_t k = 0;
    for (int p = 0; p < g->size; p++) {
        if (p == g->rank)
            continue;
        int rc = cr_irecv(run, &v, p, 0, out + (size_t)p * bytes, bytes,
                          &reqs[k++]);
        if (rc < 0)
            return rc;
    }
    int rc = cr_wait(run, reqs, k);
    for (size_t i = 0; rc >= 0 && i < k; i++)
        rc = cr_check_len(run, &reqs[i], bytes);
    return rc;
}
