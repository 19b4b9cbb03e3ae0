/*
 * Bruck all-gather (even and _v), the small-message all-gather.
 *
 * Algorithm: rank r keeps the blocks it has in rotated order r, r+1, ..
 * in a scratch buffer.  In round k (distance d = 2^k) it sends its first
 * min(d, n-d) blocks to r-d and appends the same number of blocks received
 * from r+d; after ceil(log2 n) rounds it holds all n and copies each block
 * to its place.  Blocks are only copied, so every rank gets the same bytes.
 *
 * Cost: ceil(log2 n) alpha + (n-1)/n N beta, plus one local copy of N.
 * Works for any n without folding (the last round is just shorter);
 * uneven or empty blocks (the _v variant) only change message sizes.
 */
#include <string.h>

#include "algos.h"

int coll_bruck_all_gather(struct coll_run *run, const struct coll_view *v,
                          void *buf, const struct coll_layout *l,
                          const void *own)
{
    int n = v->n, me = v->me;
    unsigned char *b8 = buf;
    size_t total = lay_range_bytes(l, 0, n), have = lay_bytes(l, me);
    if (n == 1 || total == 0) {
        if (own)
            memcpy(b8 + lay_boff(l, me), own, have);
        return FCCL_OK;
    }
    unsigned char *tmp = cr_scratch(run, total);
    if (!tmp)
        return FCCL_ERR_NOMEM;
    memcpy(tmp, own ? own : b8 + lay_boff(l, me), have);
    uint32_t step = 0;
    for (int d = 1; d < n; d *= 2, step++) {
        int cnt = d < n - d ? d : n - d;
        int to = (me - d + n) % n, from = (me + d) % n;
        size_t sb = lay_range_bytes(l, me, cnt);
        size_t rb = lay_range_bytes(l, from, cnt);
        int rc = cr_sendrecv(run, v, to, tmp, sb, from, tmp + have, rb, step);
        if (rc < 0)
            return rc;
        have += rb;
    }
    size_t pos = 0;
    for (int i = 0; i < n; i++) {
        int b = (me + i) % n;
        size_t len = lay_bytes(l, b);
        memcpy(b8 + lay_boff(l, b), tmp + pos, len);
        pos += len;
    }
    return FCCL_OK;
}

int coll_allgather_bruck(struct coll_run *run)
{
    const struct coll_args *a = run->a;
    struct coll_view v = view_of_group(run->g);
    struct coll_layout l = lay_of_args(a, v.n);
    const void *own = coll_allgather_own(a, &l, v.me);
    return coll_bruck_all_gather(run, &v, a->recvbuf, &l, own);
}
