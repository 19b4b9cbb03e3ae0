/*
 * All-reduce and reduce through a shared-memory segment, for groups on
 * one host (a reduce is the same with only the root copying out).
 *
 * Algorithm, per chunk of up to half a slot per rank and at most
 * coll_seg_round (512 KiB): every rank copies its chunk into its slot;
 * barrier; rank p reduces portion p of the chunk across all slots (its own
 * first, then the others in rank order) into portion p of its own slot, which
 * only it writes; barrier; every rank copies all portions out.  Every element
 * is combined by one rank in one fixed order and copied by the others, so all
 * ranks get the same bits, run after run.  The chunks alternate between the
 * slots' halves like the one-barrier calls below: the next chunk or call
 * writes the other half, and the one after writes this half only once every
 * member has passed the next one's first barrier, i.e. finished reading this
 * one, so no third barrier is needed before the slots are written again.
 *
 * Cost per rank for N bytes: two memcpys of N and a reduction that reads N
 * and writes N/n, plus 2 barriers per chunk; no kernel copy.  Against the
 * ring's 2 (n-1)/n N of process_vm_readv (about half memcpy's speed here),
 * it wins with three or more ranks; bench/RESULTS.md has the figures.
 * (Copying in only the portions the others reduce and reducing from src
 * in place moves less, but was slower here: 2 ranks, 64 KiB 18 against
 * 14 us, and 1 MiB slower whenever the host was in its slow phase.)
 *
 * Tiny vectors (up to COLL_SHM_TINY, 448 bytes) travel in the lines that
 * signal them (seg.c), one barrier's worth of waiting and no slot.
 *
 * Small vectors (up to COLL_SHM_SMALL, half a slot) take one barrier: every
 * rank puts its vector into one half of its slot, the halves alternating
 * from call to call; barrier; every rank combines all of them itself, in
 * rank order, so again all get the same bits.  A rank that has passed the
 * next call's barrier is done reading this call's half, so the half can be
 * reused by the call after; a large call after small ones starts with a
 * barrier for the same reason.
 *
 * Only for groups whose members share one host; elsewhere (or if the
 * segment cannot be made) an all_reduce returns COLL_FALLBACK, and the
 * caller runs what the selector chooses among the transport's algorithms
 * (a reduce runs the binomial tree itself).
 */
#include <string.h>

#include "algos.h"


/* First element and element count of portion p of a chunk of cnt. */
static void portion(size_t cnt, int n, int p, size_t *first, size_t *k)
{
    size_t base = cnt / (size_t)n, extra = cnt % (size_t)n;
    *first = (size_t)p * base + ((size_t)p < extra ? (size_t)p : extra);
    *k = base + ((size_t)p < extra);
}

/* root < 0: every rank gets the result (all-reduce); else only root.  The
 * chunk goes into one half of the slots (coll_seg_small), so two barriers
 * do: the next chunk or call writes the other half, and the one after
 * writes this half only once every member has passed the next one's first
 * barrier, i.e. finished reading this one. */
static int chunk(struct coll_run *run, struct coll_seg *s, int root,
                 const unsigned char *src, unsigned char *dst, size_t cnt)
{
    const struct coll_args *a = run->a;
    size_t es = fccl_dtype_size(a->dtype), half = coll_seg_small(s);
    int n = coll_seg_size(s), me = coll_seg_rank(s);
    memcpy(coll_seg_slot(s, me) + half, src, cnt * es);
    int rc = coll_seg_barrier(run, s);
    if (rc < 0)
        return rc;
    size_t first, k;
    portion(cnt, n, me, &first, &k);
    unsigned char *mine = coll_seg_slot(s, me) + half + first * es;
    for (int q = 0; q < n && k; q++)
        if (q != me)
            coll_reduce(mine, mine, coll_seg_slot(s, q) + half + first * es,
                        k, a->dtype, a->op);
    if ((rc = coll_seg_barrier(run, s)) < 0)
        return rc;
    for (int q = 0; q < n && (root < 0 || root == me); q++) {
        portion(cnt, n, q, &first, &k);
        memcpy(dst + first * es, coll_seg_slot(s, q) + half + first * es,
               k * es);
    }
    return FCCL_OK;
}

/* Up to COLL_SHM_TINY bytes: the vectors travel in the signalling lines
 * (coll_seg_tiny_put); every rank (or the root) combines them in rank
 * order in a local buffer, so dst may be src. */
static int tiny(struct coll_run *run, struct coll_seg *s, int root,
                const void *src, void *dst, size_t count)
{
    const struct coll_args *a = run->a;
    size_t bytes = count * fccl_dtype_size(a->dtype);
    int n = coll_seg_size(s), me = coll_seg_rank(s);
    coll_seg_tiny_put(s, src, bytes, bytes);
    int rc = coll_seg_tiny_wait(run, s);
    if (rc < 0 || (root >= 0 && root != me))
        return rc;
    _Alignas(64) unsigned char acc[COLL_SHM_TINY], in[COLL_SHM_TINY];
    coll_seg_tiny_get(s, 0, 0, acc, bytes);
    for (int q = 1; q < n; q++) {
        coll_seg_tiny_get(s, q, 0, in, bytes);
        coll_reduce(acc, acc, in, count, a->dtype, a->op);
    }
    memcpy(dst, acc, bytes);
    return FCCL_OK;
}

static int small(struct coll_run *run, struct coll_seg *s, int root,
                 const void *src, void *dst, size_t count)
{
    const struct coll_args *a = run->a;
    size_t bytes = count * fccl_dtype_size(a->dtype);
    size_t half = coll_seg_small(s);
    int n = coll_seg_size(s), me = coll_seg_rank(s);
    memcpy(coll_seg_slot(s, me) + half, src, bytes);
    int rc = coll_seg_barrier(run, s);
    if (rc < 0 || (root >= 0 && root != me))
        return rc;
    coll_reduce(dst, coll_seg_slot(s, 0) + half, coll_seg_slot(s, 1) + half,
                count, a->dtype, a->op);
    for (int q = 2; q < n; q++)
        coll_reduce(dst, dst, coll_seg_slot(s, q) + half, count, a->dtype,
                    a->op);
    return FCCL_OK;
}

int coll_seg_reduce(struct coll_run *run, struct coll_seg *s, int root,
                    const void *src, void *dst, size_t count)
{
    size_t es = fccl_dtype_size(run->a->dtype), bytes = count * es;
    if (bytes == 0)
        return FCCL_OK;
    if (bytes <= COLL_SHM_TINY)
        return tiny(run, s, root, src, dst, count);
    if (bytes <= COLL_SHM_SMALL && bytes <= coll_seg_slot_bytes(s) / 2)
        return small(run, s, root, src, dst, count);
    int rc = FCCL_OK;
    size_t room = coll_seg_slot_bytes(s) / 2, round = coll_seg_round(s);
    size_t per = (room < round ? room : round) / es;
    const unsigned char *in = src;
    unsigned char *out = dst;
    for (size_t off = 0; off < count && rc >= 0; off += per) {
        size_t cnt = count - off < per ? count - off : per;
        /* a reduce's non-roots may pass no output at all */
        rc = chunk(run, s, root, in + off * es, out ? out + off * es : NULL,
                   cnt);
    }
    return rc;
}

static int shm_reduce(struct coll_run *run, int root)
{
    const struct coll_args *a = run->a;
    struct fccl_group *g = run->g;
    size_t es = fccl_dtype_size(a->dtype), bytes = a->count * es;
    if (g->size == 1 || bytes == 0) {
        if (a->recvbuf != a->sendbuf && bytes)
            memmove(a->recvbuf, a->sendbuf, bytes);
        return FCCL_OK;
    }
    struct coll_seg *s = NULL;
    int rc = coll_seg_get(run, &s);
    if (rc < 0)
        return rc;
    if (!s)
        return root < 0 ? COLL_FALLBACK : coll_reduce_binomial(run);
    return coll_seg_reduce(run, s, root, a->sendbuf, a->recvbuf, a->count);
}

int coll_shm_reduce(struct coll_run *run, int root)
{
    return shm_reduce(run, root);
}

int coll_allreduce_shm(struct coll_run *run) { return shm_reduce(run, -1); }
