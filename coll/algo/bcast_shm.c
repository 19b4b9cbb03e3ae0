/*
 * Broadcast through the shared segment of a one-host group (shm/seg.c).
 *
 * Up to COLL_SHM_TINY bytes the broadcast is one-way (shm/oneway.c): the
 * root stamps its bytes into lines of the segment and returns, and the
 * others wait for those lines alone, not for each other; no barrier.
 * Beyond, per round the root copies up to one slot of the buffer into its
 * slot; barrier; the others copy it out; barrier.  Up to COLL_SHM_SMALL
 * (and half a slot) there is one barrier and no second one: the halves of
 * the root's slot alternate from call to call, as in allreduce_shm.c.
 *
 * Cost per rank: one memcpy of N (the root's in, everyone else's out),
 * plus two barriers per slot; the binomial tree needs log2(n) transfers
 * along its deepest path.  Without a segment it is the binomial tree.
 */
#include <string.h>

#include "algos.h"


static size_t min_sz(size_t a, size_t b) { return a < b ? a : b; }

int coll_bcast_shm(struct coll_run *run)
{
    const struct coll_args *a = run->a;
    size_t bytes = a->count * fccl_dtype_size(a->dtype);
    struct coll_seg *s = NULL;
    int rc = coll_seg_get(run, &s);
    if (rc < 0)
        return rc;
    if (!s)
        return coll_bcast_binomial(run);
    return coll_seg_bcast(run, s, a->root, a->recvbuf, bytes);
}

int coll_seg_bcast(struct coll_run *run, struct coll_seg *s, int root,
                   void *buf_, size_t bytes)
{
    int rc, me = coll_seg_rank(s);
    unsigned char *buf = buf_, *slot = coll_seg_slot(s, root);
    size_t cap = coll_seg_slot_bytes(s);
    if (bytes <= COLL_SHM_TINY)
        return coll_seg_bcast_oneway(run, s, root, buf, bytes);
    if (bytes <= COLL_SHM_SMALL && bytes <= cap / 2) {
        size_t half = coll_seg_small(s);
        if (me == root)
            memcpy(slot + half, buf, bytes);
        rc = coll_seg_barrier(run, s);
        if (rc >= 0 && me != root)
            memcpy(buf, slot + half, bytes);
        return rc;
    }
    if ((rc = coll_seg_large(run, s)) < 0)
        return rc;
    for (size_t off = 0; off < bytes && rc >= 0; off += cap) {
        size_t len = min_sz(cap, bytes - off);
        if (me == root)
            memcpy(slot, buf + off, len);
        if ((rc = coll_seg_barrier(run, s)) < 0)
            break;
        if (me != root)
            memcpy(buf + off, slot, len);
        rc = coll_seg_barrier(run, s);
    }
    return rc;
}
