/*
 * All-gather (even and _v) through the shared segment of a one-host group
 * (shm/seg.c).
 *
 * Per round every rank copies up to one slot of its block into its slot;
 * barrier; every rank copies every slot's piece to its place in the
 * output; barrier.  Blocks may differ in size: the rounds run until the
 * largest block is done.  If every block fits in half a slot there is a
 * single barrier, with the halves alternating from call to call (see
 * allreduce_shm.c for why that is safe).
 *
 * Cost per rank for a total of N bytes over n ranks: memcpy N/n in and N
 * out, where the transport needs (n-1)/n N of process_vm_readv (about half
 * memcpy's speed here) plus the N/n copy of the rank's own block.
 *
 * Two ranks with blocks beyond half a slot: a single copy through the
 * segment (shm/cma.c) where the members may read each other's memory.
 * Each rank exposes its block, reads the peer's straight out of the
 * peer's memory with process_vm_readv, and both end in one barrier: the handshake is a cache
 * line each way, where the transport's single copy (the ring) sends a
 * descriptor and a FIN message around it.  Both copy at once, each N/2
 * (bench/RESULTS.md, issue 28).  Without CMA, the ring.
 */
#include <string.h>

#include "algos.h"

static size_t min_sz(size_t a, size_t b) { return a < b ? a : b; }

static size_t max_block(const struct coll_layout *l)
{
    return lay_max_count(l) * l->esize;
}

/* Copy [from, from+len) of every other rank's block out of the slots (at
 * slot offset `at`). */
static void copy_out(struct coll_seg *s, const struct coll_layout *l, int me,
                     unsigned char *out, size_t from, size_t len, size_t at)
{
    for (int q = 0; q < l->n; q++) {
        size_t b = lay_bytes(l, q);
        if (q != me && from < b)
            memcpy(out + lay_boff(l, q) + from, coll_seg_slot(s, q) + at,
                   min_sz(len, b - from));
    }
}

/* Two ranks, large blocks, CMA.  I expose my block where it is read
 * from: the input when not in place (its lines are clean; read out of my
 * output, just written by the copy below, they would come from my
 * core's cache: 1 MiB 2 ranks 89 us against 70), else its place in the
 * output. */
static int single_copy(struct coll_run *run, struct coll_seg *s,
                       const struct coll_layout *l, const unsigned char *own,
                       unsigned char *out)
{
    int me = coll_seg_rank(s), q = 1 - me;
    size_t len = lay_bytes(l, me);
    coll_seg_expose(s, own ? own : out + lay_boff(l, me), len, 0);
    if (own)
        memcpy(out + lay_boff(l, me), own, len);
    int rc = coll_seg_wait_exposed(run, s, q);
    if (rc >= 0)
        rc = coll_seg_pull(run, s, q, 0, out + lay_boff(l, q),
                           lay_bytes(l, q));
    int brc = coll_seg_barrier(run, s);
    return rc < 0 ? rc : brc;
}

static int small(struct coll_run *run, struct coll_seg *s,
                 const struct coll_layout *l, const unsigned char *mine)
{
    size_t half = coll_seg_small(s);
    int me = run->g->rank;
    memcpy(coll_seg_slot(s, me) + half, mine, lay_bytes(l, me));
    int rc = coll_seg_barrier(run, s);
    if (rc >= 0)
        copy_out(s, l, me, run->a->recvbuf, 0, max_block(l), half);
    return rc;
}

int coll_allgather_shm(struct coll_run *run)
{
    const struct coll_args *a = run->a;
    struct fccl_group *g = run->g;
    struct coll_layout l = lay_of_args(a, g->size);
    int me = g->rank;
    unsigned char *out = a->recvbuf;
    /* the opening every shm algorithm has: the segment, else its fallback */
    struct coll_seg *s = NULL;
    int rc = coll_seg_get(run, &s);
    if (rc < 0)
        return rc;
    if (!s)
        return coll_allgather_ring(run);
    size_t big = max_block(&l), slot = coll_seg_slot_bytes(s);
    int tiny = big <= COLL_SHM_SMALL && big <= slot / 2, cma = 0;
    if (!tiny && g->size == 2) {
        /* decided by both at once; before my block moves, which the
         * ring does itself */
        if ((cma = coll_seg_cma(run, s)) < 0)
            return cma;
        if (!cma)
            return coll_allgather_ring(run);
    }
    /* in place, my block is moved to its final place first; then it is
     * read from there and never written */
    const unsigned char *own = coll_allgather_own(a, &l, me);
    if (cma)
        return single_copy(run, s, &l, own, out);
    const unsigned char *mine = own ? own : out + lay_boff(&l, me);
    if (own)
        memcpy(out + lay_boff(&l, me), own, lay_bytes(&l, me));
    if (tiny)
        return small(run, s, &l, mine);
    return coll_seg_all_gather(run, s, &l, out);
}

int coll_seg_all_gather(struct coll_run *run, struct coll_seg *s,
                        const struct coll_layout *l, void *buf)
{
    int me = coll_seg_rank(s);
    unsigned char *out = buf;
    const unsigned char *mine = out + lay_boff(l, me);
    size_t big = max_block(l), slot = coll_seg_slot_bytes(s);
    size_t len = lay_bytes(l, me);
    int rc = coll_seg_large(run, s);
    for (size_t from = 0; from < big && rc >= 0; from += slot) {
        if (from < len)
            memcpy(coll_seg_slot(s, me), mine + from, min_sz(slot, len - from));
        rc = coll_seg_barrier(run, s);
        if (rc < 0)
            break;
        copy_out(s, l, me, out, from, slot, 0);
        rc = coll_seg_barrier(run, s);
    }
    return rc;
}
