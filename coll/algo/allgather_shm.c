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
    struct coll_seg *s = NULL;
    int rc = coll_seg_get(run, &s);
    if (rc < 0)
        return rc;
    if (!s)
        return coll_allgather_ring(run);
    /* in place, my block is moved to its final place first; then it is
     * read from there and never written */
    const unsigned char *own = coll_allgather_own(a, &l, me);
    const unsigned char *mine = own ? own : out + lay_boff(&l, me);
    if (own)
        memcpy(out + lay_boff(&l, me), own, lay_bytes(&l, me));
    size_t big = max_block(&l), slot = coll_seg_slot_bytes(s);
    if (big <= COLL_SHM_SMALL && big <= slot / 2)
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
