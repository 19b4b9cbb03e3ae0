/*
 * All-to-all with small even blocks through the shared segment of a
 * one-host group (shm/seg.c): every rank copies its whole send buffer into
 * one half of its slot; one barrier; every rank copies block r of every
 * slot out.  The halves alternate from call to call (see allreduce_shm.c).
 * A send buffer of at most COLL_SHM_TINY bytes travels in the lines that
 * signal it instead (coll_seg_tiny_put): one cache-line transfer per peer,
 * not the barrier's and the slot's.
 *
 * Only the even form: the choice must be the same on every rank, and with
 * per-peer counts a rank knows only its own; the _v forms run pairwise
 * exchange.
 *
 * Larger even blocks.  Up to A2A_SINGLE_MAX, where the members
 * may read each other's memory (shm/cma.c): each exposes its send buffer
 * and reads its block straight out of every peer's with process_vm_readv
 * (its own block is a memcpy), then one barrier.  That is the transport's
 * single copy without its clear-to-send, descriptor and FIN messages.  In
 * place, the peers' blocks land in scratch and move into place after the
 * barrier (a peer may still be reading that place before it).  Without
 * CMA they run what the selector picks otherwise (linear, or pairwise for
 * many large blocks).  Beyond A2A_SINGLE_MAX the blocks go through the
 * slots in rounds (rounds() below), CMA or not.
 */
#include <string.h>

#include "algos.h"

/* Blocks beyond this go through the slots in rounds: two barriers a round,
 * but memcpy through pieces that stay in the cache instead of
 * process_vm_readv, which pins every page (64 MiB, medians of 5 launches:
 * 2 ranks 7.2 against 9.4 ms idle, 15.4 against 21.5 with two busy loops;
 * 4 ranks 18.5 against 23.6 idle, 56 against 67 busy).  Up to it the
 * single copy's one barrier wins or ties (3 ranks, 1 MiB: 125 against
 * 151 us).  bench/RESULTS.md, "Large all_gather and all_to_all through
 * the slots". */
#define A2A_SINGLE_MAX ((size_t)512 << 10)

/* Even blocks beyond A2A_SINGLE_MAX: per round every member copies the
 * next `piece` bytes of each peer's block into its slot (piece q at q *
 * piece) and the same of its own block to its place; barrier; it copies
 * its piece out of every peer's slot; barrier.  In place too: the piece
 * a round overwrites went into my slot before that round's first
 * barrier, and no later round reads it.  0 if the slot cannot hold a
 * line's worth per member (thousands of members). */
static size_t round_piece(const struct coll_seg *s)
{
    return coll_seg_round(s) / (size_t)coll_seg_size(s) & ~(size_t)63;
}

static int rounds(struct coll_run *run, struct coll_seg *s, size_t block,
                  size_t piece)
{
    const struct coll_args *a = run->a;
    int n = coll_seg_size(s), me = coll_seg_rank(s);
    unsigned char *out = a->recvbuf, *slot = coll_seg_slot(s, me);
    const unsigned char *in = a->sendbuf;
    int rc = coll_seg_large(run, s);
    for (size_t from = 0; from < block && rc >= 0; from += piece) {
        size_t len = block - from < piece ? block - from : piece;
        for (int q = 0; q < n; q++)
            if (q != me)
                memcpy(slot + (size_t)q * piece,
                       in + (size_t)q * block + from, len);
        if (in != out)
            memcpy(out + (size_t)me * block + from,
                   in + (size_t)me * block + from, len);
        if ((rc = coll_seg_barrier(run, s)) < 0)
            break;
        for (int q = 0; q < n; q++)
            if (q != me)
                memcpy(out + (size_t)q * block + from,
                       coll_seg_slot(s, q) + (size_t)me * piece, len);
        rc = coll_seg_barrier(run, s);
    }
    return rc;
}

/* Even blocks of `block` bytes, CMA agreed: each member reads its block
 * out of every peer's exposed send buffer, beginning with the next member
 * up, so that the n readers start on n different buffers. */
static int single_copy(struct coll_run *run, struct coll_seg *s,
                       size_t block)
{
    const struct coll_args *a = run->a;
    int n = coll_seg_size(s), me = coll_seg_rank(s);
    unsigned char *out = a->recvbuf;
    const unsigned char *in = a->sendbuf;
    int inplace = a->sendbuf == a->recvbuf;
    unsigned char *land = inplace ? cr_scratch(run, (size_t)(n - 1) * block)
                                  : NULL;
    if (inplace && !land)
        return FCCL_ERR_NOMEM; /* cr_scratch said why */
    coll_seg_expose(s, in, (size_t)n * block, 0);
    if (!inplace)
        memcpy(out + (size_t)me * block, in + (size_t)me * block, block);
    int rc = FCCL_OK;
    for (int i = 1; i < n && rc >= 0; i++) {
        int q = (me + i) % n;
        unsigned char *dst = inplace ? land + (size_t)(i - 1) * block
                                     : out + (size_t)q * block;
        rc = coll_seg_wait_exposed(run, s, q);
        if (rc >= 0)
            rc = coll_seg_pull(run, s, q, (size_t)me * block, dst, block);
    }
    int brc = coll_seg_barrier(run, s);
    for (int i = 1; rc >= 0 && brc >= 0 && inplace && i < n; i++)
        memcpy(out + (size_t)((me + i) % n) * block,
               land + (size_t)(i - 1) * block, block);
    return rc < 0 ? rc : brc;
}

int coll_alltoall_shm(struct coll_run *run)
{
    const struct coll_args *a = run->a;
    struct fccl_group *g = run->g;
    int n = g->size, me = g->rank;
    size_t block = a->count * fccl_dtype_size(a->dtype);
    int even = !a->scounts && !a->rcounts && !a->sdispls && !a->rdispls;
    struct coll_seg *s = NULL;
    int rc = even ? coll_seg_get(run, &s) : FCCL_OK;
    if (rc < 0)
        return rc;
    if (s && (block > COLL_SHM_SMALL ||
              block * (size_t)n > coll_seg_slot_bytes(s) / 2)) {
        size_t piece = round_piece(s);
        if (block > A2A_SINGLE_MAX && piece)
            return rounds(run, s, block, piece);
        if ((rc = coll_seg_cma(run, s)) < 0)
            return rc;
        if (rc)
            return single_copy(run, s, block);
        return coll_a2a_linear_fits(n, block) ? coll_alltoall_linear(run)
                                              : coll_alltoall_pairwise(run);
    }
    if (!s || block > COLL_SHM_SMALL ||
        block * (size_t)n > coll_seg_slot_bytes(s) / 2)
        return coll_alltoall_pairwise(run);
    unsigned char *out = a->recvbuf;
    size_t all = block * (size_t)n;
    if (all <= COLL_SHM_TINY) {
        /* in place too: the lines hold a copy of what is sent */
        coll_seg_tiny_put(s, a->sendbuf, all, all);
        if ((rc = coll_seg_tiny_wait(run, s)) < 0)
            return rc;
        for (int q = 0; q < n; q++)
            coll_seg_tiny_get(s, q, (size_t)me * block,
                              out + (size_t)q * block, block);
        return FCCL_OK;
    }
    size_t half = coll_seg_small(s);
    /* in place the copy into the slot is also the copy that saves the
     * outgoing data from the arriving blocks */
    memcpy(coll_seg_slot(s, me) + half, a->sendbuf, block * (size_t)n);
    if ((rc = coll_seg_barrier(run, s)) < 0)
        return rc;
    for (int q = 0; q < n; q++)
        memcpy(out + (size_t)q * block,
               coll_seg_slot(s, q) + half + (size_t)me * block, block);
    return FCCL_OK;
}
