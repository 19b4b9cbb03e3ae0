/*
 * Internal: the algorithms, as the selector's tables and other algorithms
 * call them.  Each lives in its own file (<op>_<algorithm>.c, the ones
 * through a one-host group's shared segment <op>_shm.c); the building
 * blocks below are the pieces composite algorithms are made of (ring
 * all_reduce = ring reduce_scatter + ring all_gather, hier = binomial
 * reduce + leaders' all_reduce + binomial broadcast).  They see the run's
 * point-to-point primitives (run.h), the segment (shm.h) and the
 * reduction kernels (reduce.h), never the selector above them.
 */
#ifndef FCCL_COLL_ALGOS_H
#define FCCL_COLL_ALGOS_H

#include "layout.h"
#include "reduce.h"
#include "run.h"
#include "shm.h"

/* ---- whole operations over the group (table entries) ---- */
int coll_allreduce_ring(struct coll_run *run);
int coll_allreduce_rd(struct coll_run *run);
int coll_allreduce_rabenseifner(struct coll_run *run);
int coll_allreduce_hier(struct coll_run *run);
/* hier with the leaders-only layout at every size */
int coll_allreduce_hier_leaders(struct coll_run *run);
/* Two-level all-reduce (allreduce_hier2d.c): lv is my host's ranks, xv
 * the ranks of my local index on every host (one per host, host order);
 * every host must have lv->n >= 2 ranks. */
int coll_hier_2d(struct coll_run *run, const struct coll_view *lv,
                 const struct coll_view *xv);
int coll_bcast_binomial(struct coll_run *run);
int coll_bcast_scatter_ag(struct coll_run *run);
int coll_reduce_binomial(struct coll_run *run);
int coll_allgather_ring(struct coll_run *run);
int coll_allgather_bruck(struct coll_run *run);
int coll_reducescatter_ring(struct coll_run *run);
int coll_alltoall_pairwise(struct coll_run *run);
int coll_alltoall_linear(struct coll_run *run);
int coll_barrier_dissemination(struct coll_run *run);
int coll_gather_linear(struct coll_run *run);
int coll_scatter_linear(struct coll_run *run);
int coll_neighbor_exchange(struct coll_run *run);
int coll_neighbor_exchange_v2(struct coll_run *run);
/* all_to_all_dims: pack, the all_to_all algorithm of that name, unpack
 * (alltoall_dims.c) */
int coll_alltoall_dims_pairwise(struct coll_run *run);
int coll_alltoall_dims_linear(struct coll_run *run);
int coll_alltoall_dims_shm(struct coll_run *run);
/* Through a one-host group's segment (<op>_shm.c).  Without a segment
 * each runs a transport algorithm instead: all_reduce returns
 * COLL_FALLBACK (the selector's choice among the transport's algorithms
 * depends on the size), the others call their general algorithm. */
int coll_allreduce_shm(struct coll_run *run);
int coll_reduce_shm(struct coll_run *run);
int coll_allgather_shm(struct coll_run *run);
int coll_barrier_shm(struct coll_run *run);
int coll_bcast_shm(struct coll_run *run);
int coll_gather_shm(struct coll_run *run);
int coll_scatter_shm(struct coll_run *run);
int coll_reducescatter_shm(struct coll_run *run);
int coll_alltoall_shm(struct coll_run *run);

/* ---- building blocks (each in its own file) ---- */

/* Ring reduce-scatter over v (reducescatter_ring.c): src holds the whole
 * vector, acc is a work area laid out like src (may be src itself), and my
 * fully reduced block lands in dst.  Uses steps [0, nsteps). */
int coll_ring_reduce_scatter(struct coll_run *run, const struct coll_view *v,
                             const void *src, void *acc, void *dst,
                             const struct coll_layout *l, fccl_dtype_t dt,
                             fccl_redop_t op);
/* Ring all-gather over v (allgather_ring.c): afterwards buf holds every
 * block.  My block is read from `own` (and copied to its place while the
 * transfers run) or, with own == NULL, is already in place in buf. */
int coll_ring_all_gather(struct coll_run *run, const struct coll_view *v,
                         void *buf, const struct coll_layout *l,
                         const void *own);
/* Bruck all-gather (allgather_bruck.c), same contract, log(n) rounds. */
int coll_bruck_all_gather(struct coll_run *run, const struct coll_view *v,
                          void *buf, const struct coll_layout *l,
                          const void *own);
/* Where the all_gather entry points find my block: the send buffer, or
 * NULL when it is already in place (a block at the start of an in-place
 * buffer is first moved to its slot). */
const void *coll_allgather_own(const struct coll_args *a,
                               const struct coll_layout *l, int me);
/* Binomial-tree broadcast of len bytes from virtual rank root, pipelined
 * in chunks (bcast_binomial.c). */
int coll_binomial_bcast(struct coll_run *run, const struct coll_view *v,
                        void *buf, size_t len, int root);
/* Binomial-tree reduction to virtual rank root (reduce_binomial.c): dst
 * is used on the root only; src may equal dst there. */
int coll_binomial_reduce(struct coll_run *run, const struct coll_view *v,
                         const void *src, void *dst, size_t count,
                         fccl_dtype_t dt, fccl_redop_t op, int root);
/* All-reduces over v, src may equal dst (allreduce_*.c). */
int coll_rd_all_reduce(struct coll_run *run, const struct coll_view *v,
                       const void *src, void *dst, size_t count,
                       fccl_dtype_t dt, fccl_redop_t op);
int coll_ring_all_reduce(struct coll_run *run, const struct coll_view *v,
                         const void *src, void *dst, size_t count,
                         fccl_dtype_t dt, fccl_redop_t op);
int coll_rab_all_reduce(struct coll_run *run, const struct coll_view *v,
                        const void *src, void *dst, size_t count,
                        fccl_dtype_t dt, fccl_redop_t op);
/* Folding n = p + e ranks onto p = 2^k (allreduce_rd.c): the first 2e
 * ranks pair up, the even one (giver) hands its vector to the odd one
 * (taker) and gets the result back at the end.  vr is the rank among the
 * p survivors (-1 for givers). */
enum fold_role { FOLD_NONE, FOLD_GIVER, FOLD_TAKER };
struct coll_fold {
    int p, extra, vr;
    enum fold_role role;
};
void coll_fold_make(struct coll_fold *f, int n, int me);
/* View rank of survivor vr. */
int coll_fold_real(const struct coll_fold *f, int vr);
/* Givers send src; takers combine into dst (tmp: count elements of
 * scratch); others copy src to dst.  Uses step 0. */
int coll_fold_in(struct coll_run *run, const struct coll_view *v,
                 const struct coll_fold *f, const void *src, void *dst,
                 size_t count, fccl_dtype_t dt, fccl_redop_t op, void *tmp);
/* Takers return the finished dst to their giver.  Uses step 1. */
int coll_fold_out(struct coll_run *run, const struct coll_view *v,
                  const struct coll_fold *f, void *dst, size_t bytes);
/* First step free for the rounds after the fold. */
#define COLL_FOLD_STEPS 2

/* Dissemination barrier over v (barrier_dissemination.c). */
int coll_dissemination_barrier(struct coll_run *run, const struct coll_view *v);

/* all_reduce (root < 0) or reduce to root through the segment
 * (allreduce_shm.c); COLL_FALLBACK for an all_reduce without one. */
int coll_shm_reduce(struct coll_run *run, int root);
/* The same on segment s whatever group it belongs to: reduce count
 * elements (run->a's dtype and op) of every member's src into dst of
 * member `root` (segment index), or of every member if root < 0. */
int coll_seg_reduce(struct coll_run *run, struct coll_seg *s, int root,
                    const void *src, void *dst, size_t count);
/* Reduce-scatter over the members of segment s (whatever group it belongs
 * to; run->a's dtype and op): src holds every block of layout l (one per
 * member), member i's reduced block i lands in dst (reducescatter_shm.c).
 * Whole-slot rounds (starts with coll_seg_large). */
int coll_seg_reduce_scatter(struct coll_run *run, struct coll_seg *s,
                            const struct coll_layout *l, const void *src,
                            void *dst);
/* All-gather over the members of s: buf is laid out by l; my block is
 * read from own, or with own NULL is already in place in buf; afterwards
 * buf holds every block (allgather_shm.c).  Rounds of at most
 * coll_seg_round (starts with coll_seg_large). */
int coll_seg_all_gather(struct coll_run *run, struct coll_seg *s,
                        const struct coll_layout *l, const void *own,
                        void *buf);
/* Broadcast `bytes` of buf from segment member `root` (bcast_shm.c). */
int coll_seg_bcast(struct coll_run *run, struct coll_seg *s, int root,
                   void *buf, size_t bytes);

/* Copy between a dense C-order tensor of nd dims and a packed box of it
 * (box.c): the box spans [lo[i], lo[i] + ext[i]) of each dimension;
 * to_box = 1 reads the tensor into box, 0 writes box into the tensor. */
void coll_box_copy(unsigned char *tensor, const size_t *dims, int nd,
                   const size_t *lo, const size_t *ext, size_t es,
                   unsigned char *box, int to_box);
/* The output shape of neighbor_exchange_v2 for a normalised shape (the
 * receive lengths of sides without a rank already 0; neighbor_halo.c). */
void coll_nbr_v2_out_dims(const struct coll_shape *s, size_t out[4]);

/* all_to_all helpers (alltoall_pairwise.c): elements that go to
 * (send = 1) or come from (send = 0) rank p and their element offsets;
 * the data to send (a scratch copy when in place, NULL if out of memory). */
size_t coll_a2a_count(const struct coll_args *a, int send, int p);
size_t coll_a2a_displ(const struct coll_args *a, int send, int p);
const unsigned char *coll_a2a_source(struct coll_run *run);
/* Linear (everything posted at once) rather than pairwise for n ranks
 * sending `bytes` to each peer: while the host absorbs it (the selector's
 * choice, and alltoall_shm.c's without single copies). */
static inline int coll_a2a_linear_fits(int n, size_t bytes)
{
    return n <= 8 || bytes * (size_t)n <= ((size_t)1 << 20);
}

#endif
