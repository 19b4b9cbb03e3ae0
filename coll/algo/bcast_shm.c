/*
 * Broadcast through the shared segment of a one-host group (shm/seg.c).
 *
 * Up to COLL_SHM_TINY bytes the broadcast is one-way (shm/oneway.c): the
 * root stamps its bytes into lines of the segment and returns, and the
 * others wait for those lines alone, not for each other; no barrier.
 * Beyond, per round the root copies up to coll_seg_round (512 KiB) of the
 * buffer into its slot; barrier; the others copy it out; barrier.  Up to
 * COLL_SHM_SMALL (and half a slot) there is one barrier and no second one:
 * the halves of the root's slot alternate from call to call, as in
 * allreduce_shm.c.
 *
 * Two ranks, beyond the one-barrier size, where the members may read and
 * write each other's memory (shm/cma.c): both copy at once.  The root
 * exposes its buffer, the receiver its own, writable; the receiver reads
 * the first half out of the root's (process_vm_readv) while the root
 * writes the second half into the receiver's (process_vm_writev); the
 * receiver waits for the root's write to end, then one barrier.  A
 * single copy of half the bytes on each core instead of the whole on one
 * (bench/RESULTS.md, issue 28).
 *
 * Cost per rank: one memcpy of N (the root's in, everyone else's out),
 * plus two barriers per round; the binomial tree needs log2(n) transfers
 * along its deepest path.  Without a segment it is the binomial tree.
 */
#include <string.h>

#include "algos.h"


static size_t min_sz(size_t a, size_t b) { return a < b ? a : b; }

/* Two members, CMA agreed: each copies half. */
static int split_copy(struct coll_run *run, struct coll_seg *s, int root,
                      unsigned char *buf, size_t bytes)
{
    int me = coll_seg_rank(s), q = 1 - me, rc;
    size_t half = bytes / 2 & ~(size_t)63;
    coll_seg_expose(s, buf, bytes, me != root);
    if ((rc = coll_seg_wait_exposed(run, s, q)) >= 0)
        rc = me == root
                 ? coll_seg_push(run, s, q, half, buf + half, bytes - half)
                 : coll_seg_pull(run, s, q, 0, buf, half);
    if (me != root)
        rc = coll_seg_settle(run, s, root, rc);
    int brc = coll_seg_barrier(run, s);
    return rc < 0 ? rc : brc;
}

int coll_bcast_shm(struct coll_run *run)
{
    const struct coll_args *a = run->a;
    size_t bytes = a->count * fccl_dtype_size(a->dtype);
    /* the opening every shm algorithm has: the segment, else its fallback */
    struct coll_seg *s = NULL;
    int rc = coll_seg_get(run, &s);
    if (rc < 0)
        return rc;
    if (!s)
        return coll_bcast_binomial(run);
    if (coll_seg_size(s) == 2 && bytes > COLL_SHM_SMALL) {
        /* without CMA the transport's single copy beats the segment's
         * two memcpys */
        if ((rc = coll_seg_cma(run, s)) < 0)
            return rc;
        return rc ? split_copy(run, s, a->root, a->recvbuf, bytes)
                  : coll_bcast_binomial(run);
    }
    return coll_seg_bcast(run, s, a->root, a->recvbuf, bytes);
}

int coll_seg_bcast(struct coll_run *run, struct coll_seg *s, int root,
                   void *buf_, size_t bytes)
{
    int rc, me = coll_seg_rank(s);
    unsigned char *buf = buf_, *slot = coll_seg_slot(s, root);
    size_t cap = coll_seg_slot_bytes(s);
    /* one-way at two ranks too: measured again on a busy machine, the
     * barrier made 2-rank 8-byte calls 0.9-1.1 us (4.7 back to back)
     * against one-way's 0.7-0.9 (0.4), and 0.4-1.2 idle against 0.3-0.8
     * (bench/RESULTS.md, issue 33; issue 28 had measured the opposite,
     * 0.43 against 0.31, on one idle evening) */
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
    size_t round = coll_seg_round(s);
    for (size_t off = 0; off < bytes && rc >= 0; off += round) {
        size_t len = min_sz(round, bytes - off);
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
