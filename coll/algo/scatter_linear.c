/*
 * Linear scatter: the root posts one send per rank at once; every other
 * rank receives its block.
 *
 * Cost: alpha + (n-1)/n N beta at the root's link, which bounds any
 * scatter; all sends are in flight together so the latencies overlap.
 *
 * Any n, any count.  In place (root's recvbuf == sendbuf): the root's own
 * block is copied to the start of the buffer after the sends are done
 * (they may still read that region before).  The mirror image of
 * gather_linear.c, kept apart on purpose (see there).
 */
#include <string.h>

#include "algos.h"

int coll_scatter_linear(struct coll_run *run)
{
    const struct coll_args *a = run->a;
    struct fccl_group *g = run->g;
    struct coll_view v = view_of_group(g);
    size_t bytes = a->count * fccl_dtype_size(a->dtype);
    if (bytes == 0)
        return FCCL_OK;
    if (g->rank != a->root) {
        struct tp_req r;
        int rc = cr_irecv(run, &v, a->root, 0, a->recvbuf, bytes, &r);
        if (rc == FCCL_OK)
            rc = cr_wait(run, &r, 1);
        return rc < 0 ? rc : cr_check_len(run, &r, bytes);
    }
    const unsigned char *in = a->sendbuf;
    if (g->size > 1) {
        struct tp_req *reqs = cr_reqs(run, (size_t)g->size - 1);
        if (!reqs)
            return FCCL_ERR_NOMEM;
        size_t k = 0;
        for (int p = 0; p < g->size; p++) {
            if (p == g->rank)
                continue;
            int rc = cr_isend(run, &v, p, 0, in + (size_t)p * bytes, bytes,
                              &reqs[k++]);
            if (rc < 0)
                return rc;
        }
        int rc = cr_wait(run, reqs, k);
        if (rc < 0)
            return rc;
    }
    if (in + (size_t)g->rank * bytes != a->recvbuf)
        memmove(a->recvbuf, in + (size_t)g->rank * bytes, bytes);
    return FCCL_OK;
}
