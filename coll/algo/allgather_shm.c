/*
 * All-gather (even and _v) through the shared segment of a one-host group
 * (shm/seg.c).
 *
 * Per round every rank copies up to coll_seg_round (512 KiB) of its block
 * into its slot; barrier; every rank copies every slot's piece to its place
 * in the output; barrier.  Blocks may differ in size: the rounds run until
 * the largest block is done.  If every block fits in half a slot there is a
 * single barrier, with the halves alternating from call to call (see
 * allreduce_shm.c for why that is safe).  Blocks of at most COLL_SHM_TINY
 * bytes travel in the lines that signal them (coll_seg_tiny_put): one
 * cache-line transfer per peer instead of the barrier's line and then the
 * slot's (2 ranks, 8 B: 0.88 -> 0.6 us; bench/RESULTS.md).
 *
 * Cost per rank for a total of N bytes over n ranks: memcpy N/n in and N
 * out, where the transport needs (n-1)/n N of process_vm_readv (about half
 * memcpy's speed here) plus the N/n copy of the rank's own block.
 *
 * Blocks beyond COLL_SHM_SMALL up to AG_SINGLE_MAX: a single copy
 * through the segment (shm/cma.c) where the members may read each other's
 * memory.  Each rank exposes its block, reads every peer's straight out
 * of the peer's memory with process_vm_readv, and all end in one barrier:
 * the handshake is a cache line each way, where the transport's single
 * copy (the ring) sends a descriptor and a FIN message around it.  All
 * copy at once (bench/RESULTS.md, issue 28).  Without CMA: two ranks take
 * the ring, more the slots.  Larger blocks go through the slots.
 */
#include <string.h>

#include "algos.h"

/* The single copy up to blocks of this size: it ends in one barrier
 * where the slots take two a round, and with more ranks than cores each
 * barrier waits for every rank to get a core (4 ranks on 2 cores, 1 MiB:
 * 900-1,100 us through the slots, 280-380 us single copy, Open MPI
 * 330-420; two busy loops: 700-3,400 against 400-420).  Larger blocks go
 * through the slots in 512 KiB rounds, whose memcpy is faster than
 * process_vm_readv (4 ranks, 64 MiB: 21 against 32 ms; 2 ranks, 64 MiB:
 * 5.6 against 7.1 ms idle, 9.6 against 15.6 with two busy loops).
 * bench/RESULTS.md, "all_gather's single copy beyond two ranks" and
 * "Large all_gather and all_to_all through the slots". */
#define AG_SINGLE_MAX ((size_t)512 << 10)

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

/* Large blocks, CMA.  I expose my block where it is read from: the
 * input when not in place (its lines are clean; read out of my output,
 * just written by the copy below, they would come from my core's cache:
 * 1 MiB 2 ranks 89 us against 70), else its place in the output.  Then I
 * read every peer's block, beginning with the next member up (the n
 * readers start on n different buffers), and one barrier ends the call. */
static int single_copy(struct coll_run *run, struct coll_seg *s,
                       const struct coll_layout *l, const unsigned char *own,
                       unsigned char *out)
{
    int me = coll_seg_rank(s), n = coll_seg_size(s);
    size_t len = lay_bytes(l, me);
    coll_seg_expose(s, own ? own : out + lay_boff(l, me), len, 0);
    if (own)
        memcpy(out + lay_boff(l, me), own, len);
    int rc = FCCL_OK;
    for (int i = 1; i < n && rc >= 0; i++) {
        int q = (me + i) % n;
        rc = coll_seg_wait_exposed(run, s, q);
        if (rc >= 0)
            rc = coll_seg_pull(run, s, q, 0, out + lay_boff(l, q),
                               lay_bytes(l, q));
    }
    int brc = coll_seg_barrier(run, s);
    return rc < 0 ? rc : brc;
}

/* Blocks up to COLL_SHM_TINY: every set spans the largest block, so all
 * members wait for the same lines. */
static int lines(struct coll_run *run, struct coll_seg *s,
                 const struct coll_layout *l, const unsigned char *mine)
{
    int me = coll_seg_rank(s);
    unsigned char *out = run->a->recvbuf;
    coll_seg_tiny_put(s, mine, lay_bytes(l, me), max_block(l));
    int rc = coll_seg_tiny_wait(run, s);
    for (int q = 0; q < l->n && rc >= 0; q++)
        if (q != me)
            coll_seg_tiny_get(s, q, 0, out + lay_boff(l, q), lay_bytes(l, q));
    return rc;
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
    int halves = big <= COLL_SHM_SMALL && big <= slot / 2, cma = 0;
    if (!halves && big <= AG_SINGLE_MAX) {
        /* decided by all at once; before my block moves, which the
         * ring does itself */
        if ((cma = coll_seg_cma(run, s)) < 0)
            return cma;
        if (!cma && g->size == 2)
            return coll_allgather_ring(run);
    }
    /* in place, my block is moved to its final place first; then it is
     * read from there and never written */
    const unsigned char *own = coll_allgather_own(a, &l, me);
    if (cma)
        return single_copy(run, s, &l, own, out);
    if (!halves)
        return coll_seg_all_gather(run, s, &l, own, out);
    const unsigned char *mine = own ? own : out + lay_boff(&l, me);
    if (own)
        memcpy(out + lay_boff(&l, me), own, lay_bytes(&l, me));
    if (big <= COLL_SHM_TINY)
        return lines(run, s, &l, mine);
    return small(run, s, &l, mine);
}

/* My block is copied to its place in the output round by round, right
 * after the same piece goes into my slot: the second read of the piece
 * comes from the cache, where a copy of the whole block up front reads
 * it from memory twice (2 ranks, 64 MiB, idle: 5.2 against 5.5 ms, two
 * launches each). */
int coll_seg_all_gather(struct coll_run *run, struct coll_seg *s,
                        const struct coll_layout *l, const void *own,
                        void *buf)
{
    int me = coll_seg_rank(s);
    unsigned char *out = buf, *mine = out + lay_boff(l, me);
    const unsigned char *from_here = own ? own : mine;
    size_t big = max_block(l), round = coll_seg_round(s);
    size_t len = lay_bytes(l, me);
    int rc = coll_seg_large(run, s);
    for (size_t from = 0; from < big && rc >= 0; from += round) {
        if (from < len) {
            size_t k = min_sz(round, len - from);
            memcpy(coll_seg_slot(s, me), from_here + from, k);
            if (own)
                memcpy(mine + from, from_here + from, k);
        }
        rc = coll_seg_barrier(run, s);
        if (rc < 0)
            break;
        copy_out(s, l, me, out, from, round, 0);
        rc = coll_seg_barrier(run, s);
    }
    return rc;
}
