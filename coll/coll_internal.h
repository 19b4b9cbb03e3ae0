/*
 * Internal to the collective engine: what every algorithm file shares.
 *
 * Layers (each looks only down):
 *   coll.c       public entry points: argument checks, sticky errors,
 *                algorithm choice, inline or queued execution (async.c)
 *   select.c     the {id, name, description, fn} table of each operation,
 *                FCCL_ALGO_<OP>, the size/rank-count/topology selector
 *   <op>_<alg>.c one algorithm each, written against the primitives below
 *   coll_run.c   the primitives: tagged isend/irecv/wait on a rank view,
 *                scratch memory cached per group, error reporting
 *
 * Tags (TP_TAG_BITS = 60): ctx (20 bits) | seq (24 bits) | step (16 bits).
 * Collectives keep bit 23 of the seq field clear (seq counts modulo 2^23);
 * point-to-point messages set it and put the user's tag in the 39 bits
 * below, so a user message can never match a collective's and vice versa.
 * Within one collective the step field only has to tell apart the
 * messages that flow between the same ordered pair of ranks.
 *
 * Algorithms run on a rank view (`struct coll_view`): virtual ranks
 * 0..n-1 mapped to group ranks, so a composite algorithm (hier) can run a
 * ring among node leaders or a tree inside one node with the same code.
 */
#ifndef FCCL_COLL_INTERNAL_H
#define FCCL_COLL_INTERNAL_H

#include <stddef.h>
#include <stdint.h>

#include "clock.h"
#include "comm.h"
#include "err.h"
#include "log.h"
#include "reduce.h"
#include "transport.h"

#define COLL_CTX_BITS 20
#define COLL_SEQ_BITS 24
#define COLL_STEP_BITS 16
#define COLL_SEQ_MASK ((1u << (COLL_SEQ_BITS - 1)) - 1) /* 23 usable bits */
#define COLL_P2P_BIT (1ull << (COLL_STEP_BITS + COLL_SEQ_BITS - 1))
#define COLL_P2P_TAG_MAX (COLL_P2P_BIT - 1)
#define COLL_STEP_MAX (1u << COLL_STEP_BITS)

static inline uint64_t coll_tag_base(uint32_t ctx, uint32_t seq)
{
    return ((uint64_t)(ctx & ((1u << COLL_CTX_BITS) - 1))
            << (COLL_SEQ_BITS + COLL_STEP_BITS)) |
           ((uint64_t)(seq & COLL_SEQ_MASK) << COLL_STEP_BITS);
}

static inline uint64_t coll_p2p_tag(uint32_t ctx, int user_tag)
{
    return coll_tag_base(ctx, 0) | COLL_P2P_BIT | (uint64_t)(uint32_t)user_tag;
}

/* ---- operations ---- */

enum coll_kind {
    COLL_BARRIER,
    COLL_BCAST,
    COLL_REDUCE,
    COLL_ALLREDUCE,
    COLL_ALLGATHER,
    COLL_REDUCESCATTER,
    COLL_GATHER,
    COLL_SCATTER,
    COLL_ALLTOALL,
    COLL_NEIGHBOR,
    COLL_NUM_KINDS
};

/* Arguments of one collective call, normalised.  Counts are elements.
 * v-variants: counts[i] per rank, displs[i] their prefix sums (owned by
 * the caller of the algorithm); all_to_all uses scounts/sdispls for what
 * this rank sends and rcounts/rdispls for what it receives. */
struct coll_args {
    enum coll_kind kind;
    const char *opname;        /* "all_gather_v", ... for messages */
    const void *sendbuf;
    void *recvbuf;
    size_t count;              /* even ops */
    const size_t *counts;      /* all_gather_v, reduce_scatter_v */
    const size_t *displs;
    const size_t *scounts, *sdispls, *rcounts, *rdispls; /* all_to_all */
    fccl_dtype_t dtype;
    fccl_redop_t op;
    int root;
    /* neighbor_exchange */
    const int *send_peers, *recv_peers;
    const void *const *send_bufs;
    void *const *recv_bufs;
    const size_t *send_counts, *recv_counts;
    size_t nsend, nrecv;
};

/* Virtual ranks 0..n-1 of an algorithm; map[v] is the group rank (NULL:
 * identity).  me is my virtual rank. */
struct coll_view {
    int n;
    int me;
    const int *map;
};

static inline int view_grank(const struct coll_view *v, int vr)
{
    return v->map ? v->map[vr] : vr;
}

/* The whole group as a view. */
static inline struct coll_view view_of_group(const struct fccl_group *g)
{
    struct coll_view v = {g->size, g->rank, NULL};
    return v;
}

/* Per-group private state of the engine (comm.h names it coll_async for
 * its worker; it also holds the scratch cache and algorithm settings). */
struct coll_async {
    /* scratch memory, reused across calls (one call runs at a time) */
    void *scratch;
    size_t scratch_cap;
    struct tp_req *reqs;
    size_t reqs_cap;
    size_t *idx;               /* displacement arrays of blocking v-calls */
    size_t idx_cap;
    /* forced algorithm per kind: -1 automatic, -2 invalid env value */
    int forced[COLL_NUM_KINDS];
    char forced_bad[COLL_NUM_KINDS][48];
    size_t chunk;              /* pipeline chunk in bytes */
    struct coll_seg *seg;      /* shared segment of a one-host group */
    int seg_failed;            /* its setup failed: never try again */
    /* async worker (async.c) */
    struct fccl_group *g;
    pthread_mutex_t qlock;
    pthread_cond_t qcv;        /* work queued or stop */
    pthread_cond_t donecv;     /* some request finished */
    struct fccl_request *head, *tail;
    int pending;               /* queued + running */
    int started, stop;
    pthread_t thread;
};

/* The execution of one collective call. */
struct coll_run {
    struct fccl_group *g;
    struct coll_async *st;
    const struct coll_args *a;
    const char *algo;          /* chosen algorithm's name */
    uint32_t seq;
    uint64_t tag;              /* coll_tag_base(ctx, seq) */
    uint32_t step0, nsteps;    /* step range this (sub)algorithm may use */
    uint64_t deadline;
    struct tp_req *reqs;       /* the current algorithm's requests */
    size_t nreqs;
};

/* ---- primitives for algorithms (coll_run.c) ---- */

/* Post a send/receive of len bytes to/from virtual rank vpeer, tagged with
 * step0 + step.  A zero-length operation is completed locally without any
 * message (both sides always know the length).  Errors are returned and
 * recorded; the request is then idle. */
int cr_isend(struct coll_run *run, const struct coll_view *v, int vpeer,
             uint32_t step, const void *buf, size_t len, struct tp_req *req);
int cr_irecv(struct coll_run *run, const struct coll_view *v, int vpeer,
             uint32_t step, void *buf, size_t len, struct tp_req *req);
/* Wait for n requests until the call's deadline or an abort.  On failure
 * the message names the op, the group and the ranks that did not answer. */
int cr_wait(struct coll_run *run, struct tp_req *reqs, size_t n);
/* Exchange with two peers (either length may be 0) and wait. */
int cr_sendrecv(struct coll_run *run, const struct coll_view *v, int to,
                const void *sbuf, size_t slen, int from, void *rbuf,
                size_t rlen, uint32_t step);
/* FCCL_ERR_PROTOCOL unless receive `req` got exactly `want` bytes. */
int cr_check_len(struct coll_run *run, const struct tp_req *req, size_t want);

/* The per-group scratch buffer, at least `bytes` long (page aligned,
 * contents undefined).  Valid until the next cr_scratch call. */
void *cr_scratch(struct coll_run *run, size_t bytes);
/* n zeroed requests for the current algorithm (replaces the previous
 * array: call once per algorithm, when nothing is pending). */
struct tp_req *cr_reqs(struct coll_run *run, size_t n);
/* Cancel whatever is still pending in run->reqs (error paths). */
void cr_cancel_pending(struct coll_run *run);
/* Pipeline chunk size in bytes for elements of esize bytes, enlarged so
 * that `total` bytes need at most `max_chunks` chunks.  Between two ranks
 * on one host it is `total` (unless FCCL_CHUNK_BYTES is set): nothing is
 * forwarded there, and the receiver copies each message itself (CMA), so
 * chunks would only add per-message costs. */
size_t cr_chunk(const struct coll_run *run, const struct coll_view *v,
                size_t esize, size_t total, size_t max_chunks);

/* Fail the group: keep the first fatal error (code and this thread's
 * message) in g->err / g->errmsg.  Returns code. */
int coll_fail(struct fccl_group *g, int code);

/* Pipelined algorithms keep at most this many receives posted ahead per
 * link: enough to overlap transfer and reduction, few enough not to pile
 * up clear-to-send traffic in the transport. */
#define COLL_WINDOW 8

/* ---- block layouts: how a vector splits into n blocks ---- */

enum lay_mode { LAY_EVEN, LAY_SPLIT, LAY_V };

/* LAY_EVEN: every block has `count` elements; LAY_SPLIT: `count` elements
 * in total split as evenly as possible (the first count % n blocks one
 * longer); LAY_V: counts[i] elements at element offset displs[i]. */
struct coll_layout {
    enum lay_mode mode;
    int n;
    size_t esize;
    size_t count;
    const size_t *counts, *displs;
};

static inline size_t lay_count(const struct coll_layout *l, int i)
{
    switch (l->mode) {
    case LAY_EVEN: return l->count;
    case LAY_SPLIT:
        return l->count / (size_t)l->n + ((size_t)i < l->count % (size_t)l->n);
    default: return l->counts[i];
    }
}

static inline size_t lay_off(const struct coll_layout *l, int i)
{
    switch (l->mode) {
    case LAY_EVEN: return l->count * (size_t)i;
    case LAY_SPLIT: {
        size_t q = l->count / (size_t)l->n, rem = l->count % (size_t)l->n;
        return q * (size_t)i + ((size_t)i < rem ? (size_t)i : rem);
    }
    default: return l->displs[i];
    }
}

/* Bytes of block i and its byte offset. */
static inline size_t lay_bytes(const struct coll_layout *l, int i)
{
    return lay_count(l, i) * l->esize;
}
static inline size_t lay_boff(const struct coll_layout *l, int i)
{
    return lay_off(l, i) * l->esize;
}

/* Largest block, in elements. */
static inline size_t lay_max_count(const struct coll_layout *l)
{
    size_t m = 0;
    for (int q = 0; q < l->n; q++)
        m = lay_count(l, q) > m ? lay_count(l, q) : m;
    return m;
}

/* The blocks of an even or _v call (all_gather, reduce_scatter) as the
 * call's arguments describe them, over n ranks. */
static inline struct coll_layout lay_of_args(const struct coll_args *a, int n)
{
    struct coll_layout l = {a->counts ? LAY_V : LAY_EVEN, n,
                            fccl_dtype_size(a->dtype), a->count, a->counts,
                            a->displs};
    return l;
}
/* Total bytes of blocks [first, first+k) in ring order (mod n). */
size_t lay_range_bytes(const struct coll_layout *l, int first, int k);

/* Walks the chunks of a sequence of blocks, block (base - s) mod n for
 * s = 0..nsteps-1, each cut into pieces of at most `chunk` bytes; empty
 * blocks yield nothing.  Ring algorithms enumerate what crosses a link
 * with it, identically on both ends. */
struct chunk_it {
    const struct coll_layout *l;
    int base, nsteps, s;
    size_t pos, chunk;
};

struct chunk_item {
    int step, blk;
    size_t off, len; /* byte offset in the vector, bytes */
};

static inline struct chunk_it chunk_it_make(const struct coll_layout *l,
                                            int base, int nsteps, size_t chunk)
{
    struct chunk_it it = {l, base, nsteps, 0, 0, chunk};
    return it;
}

static inline int chunk_it_next(struct chunk_it *it, struct chunk_item *out)
{
    int n = it->l->n;
    while (it->s < it->nsteps) {
        int b = ((it->base - it->s) % n + n) % n;
        size_t bl = lay_bytes(it->l, b);
        if (it->pos < bl) {
            size_t len = bl - it->pos < it->chunk ? bl - it->pos : it->chunk;
            out->step = it->s;
            out->blk = b;
            out->off = lay_boff(it->l, b) + it->pos;
            out->len = len;
            it->pos += len;
            return 1;
        }
        it->s++;
        it->pos = 0;
    }
    return 0;
}

/* A composite algorithm gives each part its own step range. */
struct step_range {
    uint32_t step0, nsteps;
};

static inline struct step_range cr_steps_push(struct coll_run *run,
                                              uint32_t off, uint32_t span)
{
    struct step_range saved = {run->step0, run->nsteps};
    run->step0 += off;
    run->nsteps = span;
    return saved;
}

static inline void cr_steps_pop(struct coll_run *run, struct step_range saved)
{
    run->step0 = saved.step0;
    run->nsteps = saved.nsteps;
}

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

/* all_to_all helpers (alltoall_pairwise.c): elements that go to
 * (send = 1) or come from (send = 0) rank p and their element offsets;
 * the data to send (a scratch copy when in place, NULL if out of memory). */
size_t coll_a2a_count(const struct coll_args *a, int send, int p);
size_t coll_a2a_displ(const struct coll_args *a, int send, int p);
const unsigned char *coll_a2a_source(struct coll_run *run);

/* ---- algorithm tables (select.c) ---- */

typedef int (*coll_algo_fn)(struct coll_run *run);

struct coll_algo {
    int id;
    const char *name;
    const char *description;
    coll_algo_fn fn;
};

/* Table entries: whole-operation entry points over the group. */
int coll_allreduce_ring(struct coll_run *run);
int coll_allreduce_rd(struct coll_run *run);
int coll_allreduce_rabenseifner(struct coll_run *run);
int coll_allreduce_hier(struct coll_run *run);
int coll_allreduce_shm(struct coll_run *run);
int coll_allgather_shm(struct coll_run *run);
int coll_barrier_shm(struct coll_run *run);
int coll_bcast_shm(struct coll_run *run);
int coll_reduce_shm(struct coll_run *run);
int coll_gather_shm(struct coll_run *run);
int coll_scatter_shm(struct coll_run *run);
int coll_reducescatter_shm(struct coll_run *run);
int coll_alltoall_shm(struct coll_run *run);
/* all_reduce by the algorithm the selector picks among those that use the
 * transport (select.c). */
int coll_allreduce_transport(struct coll_run *run);

/* ---- shared-memory segment of a one-host group (shm_seg.c) ---- */
struct coll_seg;
/* The group's segment, set up with all members on first use: *out is NULL
 * for a group of one rank or spread over hosts, and (for good) when it
 * cannot be made.  Errors are those of the setup messages. */
int coll_seg_get(struct coll_run *run, struct coll_seg **out);
size_t coll_seg_slot_bytes(const struct coll_seg *s);
unsigned char *coll_seg_slot(const struct coll_seg *s, int rank);
/* Wait until every member has entered as many barriers as I have: fails
 * on the call's deadline, an abort, or a member that has exited. */
int coll_seg_barrier(struct coll_run *run, struct coll_seg *s);
/* Every *_shm.c call is one of two kinds (see allreduce_shm.c for why
 * this is safe).  A one-barrier call (up to COLL_SHM_SMALL) uses half of
 * each slot, alternating from call to call: coll_seg_small returns the
 * byte offset of this call's half.  A call that fills whole slots starts
 * with coll_seg_large, which waits in a barrier if the call before was a
 * one-barrier one (its halves may still be read); errors as the barrier. */
#define COLL_SHM_SMALL (16u << 10)
size_t coll_seg_small(struct coll_seg *s);
int coll_seg_large(struct coll_run *run, struct coll_seg *s);
void coll_seg_free(struct coll_seg *s);
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

/* Operation name as in FCCL_ALGO_<OP> ("ALL_REDUCE") and in the API
 * ("all_reduce"). */
const char *coll_kind_env(enum coll_kind k);
const char *coll_kind_name(enum coll_kind k);
/* Kind from an API-style name ("all_reduce", "allreduce"); -1 if none. */
int coll_kind_parse(const char *name);

/* The table of kind k (terminated by an entry with name NULL). */
const struct coll_algo *coll_algos(enum coll_kind k);
/* Index of algorithm `name` for kind k, or -1. */
int coll_algo_find(enum coll_kind k, const char *name);
/* Write "ring, rd, ..." into buf. */
void coll_algo_list(enum coll_kind k, char *buf, size_t len);
/* Read FCCL_ALGO_<OP> for every kind into st (at group creation). */
void coll_algo_env(struct coll_async *st);
/* Choose the algorithm for run->a (honouring a forced one).  Returns NULL
 * with FCCL_ERR_INVALID recorded if the forced name is unknown. */
const struct coll_algo *coll_select(struct coll_run *run, int *rc);

/* ---- requests (async.c, p2p.c) ---- */

enum req_kind { REQ_COLL, REQ_P2P };

struct fccl_request {
    struct fccl_group *g;
    enum req_kind kind;
    /* REQ_COLL: a queued collective */
    struct coll_args args;
    uint32_t seq;
    void *owned;               /* copies of the argument arrays */
    int status;
    int done;                  /* under st->qlock */
    char errmsg[512];
    struct fccl_request *next;
    /* REQ_P2P: operations posted to the transport directly */
    size_t ntp;
    struct tp_req *tp;         /* ntp requests */
    size_t *want;              /* receives: expected bytes (sends: SIZE_MAX) */
    struct tp_req one;         /* storage when ntp == 1 */
    size_t one_want;
};

/* ---- execution (coll.c / async.c) ---- */

/* Run one collective now on this thread: seq, deadline, algorithm, avg,
 * sticky error.  a must stay valid for the call. */
int coll_execute(struct fccl_group *g, const struct coll_args *a,
                 uint32_t seq);

/* Submit: inline when nothing is queued and req == NULL, else queue to the
 * worker (copying a's arrays) and either wait (req == NULL) or hand back
 * a request. */
int coll_submit(struct fccl_group *g, const struct coll_args *a,
                fccl_request_t **req);

/* Wait for / poll a REQ_P2P request (p2p.c); same contract as
 * fccl_wait / fccl_test. */
int coll_p2p_wait(fccl_request_t *req, int64_t timeout_ms);
int coll_p2p_test(fccl_request_t *req, int *done);

/* FCCL_OK, or the group's sticky error / abort with its message. */
int coll_group_check(struct fccl_group *g);

#endif
