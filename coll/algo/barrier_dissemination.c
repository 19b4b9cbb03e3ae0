/*
 * Dissemination barrier.
 *
 * Algorithm: in round k every rank sends a one-byte token to rank
 * r + 2^k and waits for the token of rank r - 2^k (mod n).  After
 * ceil(log2 n) rounds every rank has heard, directly or through others,
 * from every rank, so nobody leaves before everybody has arrived.
 *
 * Cost: ceil(log2 n) alpha.  Any n, no folding: unlike a butterfly the
 * pattern does not need a power of two.
 */
#include "algos.h"

int coll_dissemination_barrier(struct coll_run *run, const struct coll_view *v)
{
    int n = v->n, me = v->me;
    static const unsigned char token = 1;
    unsigned char got[64];
    uint32_t step = 0;
    for (int d = 1; d < n; d *= 2, step++) {
        int rc = cr_sendrecv(run, v, (me + d) % n, &token, 1, (me - d + n) % n,
                             &got[step % 64], 1, step);
        if (rc < 0)
            return rc;
    }
    return FCCL_OK;
}

int coll_barrier_dissemination(struct coll_run *run)
{
    struct coll_view v = view_of_group(run->g);
    return coll_dissemination_barrier(run, &v);
}
