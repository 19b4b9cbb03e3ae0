/*
 * Pairwise-exchange all-to-all (even, _v and _v_c).
 *
 * Algorithm: in round i = 1..n-1 rank r sends its block for r+i and
 * receives the block from r-i (mod n), one exchange at a time; its own
 * block is a local copy.  Every rank talks to one peer per round, which
 * keeps links and receive queues uncongested for large blocks.
 *
 * Cost: (n-1) (alpha + N/n beta) for N bytes sent per rank.
 * Any n; per-peer counts may differ and be zero (nothing is sent then).
 * In place (sendbuf == recvbuf): the outgoing data is copied to scratch
 * first, since arriving blocks overwrite it.
 */
#include <string.h>

#include "algos.h"

size_t coll_a2a_count(const struct coll_args *a, int send, int p)
{
    const size_t *c = send ? a->scounts : a->rcounts;
    return c ? c[p] : a->count;
}

size_t coll_a2a_displ(const struct coll_args *a, int send, int p)
{
    const size_t *d = send ? a->sdispls : a->rdispls;
    return d ? d[p] : a->count * (size_t)p;
}

const unsigned char *coll_a2a_source(struct coll_run *run)
{
    const struct coll_args *a = run->a;
    if (a->sendbuf != a->recvbuf)
        return a->sendbuf;
    size_t end = 0, es = fccl_dtype_size(a->dtype);
    for (int p = 0; p < run->g->size; p++) {
        size_t e = coll_a2a_displ(a, 1, p) + coll_a2a_count(a, 1, p);
        end = e > end ? e : end;
    }
    unsigned char *tmp = cr_scratch(run, end * es);
    if (tmp)
        memcpy(tmp, a->sendbuf, end * es);
    return tmp;
}

int coll_alltoall_pairwise(struct coll_run *run)
{
    const struct coll_args *a = run->a;
    struct coll_view v = view_of_group(run->g);
    int n = v.n, me = v.me;
    size_t es = fccl_dtype_size(a->dtype);
    const unsigned char *src = coll_a2a_source(run);
    unsigned char *dst = a->recvbuf;
    if (!src)
        return FCCL_ERR_NOMEM;
    struct tp_req *r = cr_reqs(run, 2);
    if (!r)
        return FCCL_ERR_NOMEM;
    for (int i = 1; i < n; i++) {
        int to = (me + i) % n, from = (me - i + n) % n;
        int rc = cr_irecv(run, &v, from, 0,
                          dst + coll_a2a_displ(a, 0, from) * es,
                          coll_a2a_count(a, 0, from) * es, &r[0]);
        if (rc >= 0)
            rc = cr_isend(run, &v, to, 0, src + coll_a2a_displ(a, 1, to) * es,
                          coll_a2a_count(a, 1, to) * es, &r[1]);
        /* my own block while the first exchange's handshake is under way */
        if (rc >= 0 && i == 1)
            cr_copy(run, dst + coll_a2a_displ(a, 0, me) * es,
                    src + coll_a2a_displ(a, 1, me) * es,
                    coll_a2a_count(a, 1, me) * es);
        if (rc >= 0)
            rc = cr_wait(run, r, 2);
        if (rc >= 0)
            rc = cr_check_len(run, &r[0], coll_a2a_count(a, 0, from) * es);
        if (rc < 0)
            return rc;
    }
    if (n == 1)
        memmove(dst, src + coll_a2a_displ(a, 1, me) * es,
                coll_a2a_count(a, 1, me) * es);
    return FCCL_OK;
}
