/*
 * Linear all-to-all (even, _v and _v_c): post every receive and every
 * send at once and wait for all of them.
 *
 * Cost: about alpha + (n-1)/n N beta when the network absorbs n-1
 * concurrent messages per rank; all latencies overlap, which makes it the
 * choice for small blocks.  For large blocks on many ranks the flood of
 * concurrent transfers congests, and pairwise exchange wins.
 *
 * Any n; zero counts send nothing.  In place: see alltoall_pairwise.c.
 */
#include <string.h>

#include "algos.h"

int coll_alltoall_linear(struct coll_run *run)
{
    /* the same view of the call as alltoall_pairwise.c opens with; what
     * the two share beyond it is in coll_a2a_* there */
    const struct coll_args *a = run->a;
    struct coll_view v = view_of_group(run->g);
    int n = v.n, me = v.me;
    size_t es = fccl_dtype_size(a->dtype);
    const unsigned char *src = coll_a2a_source(run);
    unsigned char *dst = a->recvbuf;
    size_t k = n > 1 ? (size_t)n - 1 : 0;
    struct tp_req *reqs = cr_reqs(run, 2 * k);
    if (!src || !reqs)
        return FCCL_ERR_NOMEM;
    /* reqs[0..k): receives from me-1, me-2, ..; reqs[k..2k): sends */
    for (int i = 1; i < n; i++) {
        int from = (me - i + n) % n;
        int rc = cr_irecv(run, &v, from, 0, dst + coll_a2a_displ(a, 0, from) * es,
                          coll_a2a_count(a, 0, from) * es, &reqs[i - 1]);
        if (rc < 0)
            return rc;
    }
    for (int i = 1; i < n; i++) {
        int to = (me + i) % n;
        int rc = cr_isend(run, &v, to, 0, src + coll_a2a_displ(a, 1, to) * es,
                          coll_a2a_count(a, 1, to) * es, &reqs[k + (size_t)i - 1]);
        if (rc < 0)
            return rc;
    }
    cr_copy(run, dst + coll_a2a_displ(a, 0, me) * es,
            src + coll_a2a_displ(a, 1, me) * es, coll_a2a_count(a, 1, me) * es);
    int rc = cr_wait(run, reqs, 2 * k);
    for (int i = 1; rc >= 0 && i < n; i++)
        rc = cr_check_len(run, &reqs[i - 1],
                          coll_a2a_count(a, 0, (me - i + n) % n) * es);
    return rc;
}
