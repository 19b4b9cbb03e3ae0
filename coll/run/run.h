/*
 * Internal: the execution of one collective call, and the point-to-point
 * primitives every algorithm is written against (run.c).  Algorithms see
 * these and nothing of libfabric.  The floor between the transport and
 * everything that runs a call: the shared segment's setup (shm/), the
 * algorithms (algo/), the selector and the API.
 *
 * Algorithms run on a rank view (`struct coll_view`): virtual ranks
 * 0..n-1 mapped to group ranks, so a composite algorithm (hier) can run a
 * ring among node leaders or a tree inside one node with the same code.
 */
#ifndef FCCL_COLL_RUN_H
#define FCCL_COLL_RUN_H

#include <stddef.h>
#include <stdint.h>

#include "args.h"
#include "err.h"
#include "group.h"
#include "state.h"
#include "tp.h"

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

/* The execution of one collective call. */
struct coll_run {
    struct fccl_group *g;
    struct coll_state *st;
    const struct coll_args *a;
    const char *algo;          /* chosen algorithm's name */
    uint32_t seq;
    uint64_t tag;              /* coll_tag_base(ctx, seq) */
    uint32_t step0, nsteps;    /* step range this (sub)algorithm may use */
    uint64_t deadline;
    struct tp_req *reqs;       /* the current algorithm's requests */
    size_t nreqs;
};

/* What an algorithm (a table entry, select.h) returns: FCCL_OK, a
 * negative error, or COLL_FALLBACK when it cannot run on this group now
 * (all_reduce[shm] without a segment).  The caller then runs the
 * selector's general choice on the same run (api/execute.c): an
 * algorithm never calls the selector, which sits above it.  Positive, so
 * never taken for an error; never returned past coll_execute. */
#define COLL_FALLBACK 1

/* ---- primitives for algorithms (run.c) ---- */

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
/* coll_reduce (dst = a op b over count elements) in pieces, driving the
 * transport's progress between them, so that transfers in flight (a
 * rendezvous waiting for its read, the next chunk of a pipeline) keep
 * moving while a long reduction runs. */
void cr_reduce(struct coll_run *run, void *dst, const void *a, const void *b,
               size_t count, fccl_dtype_t dt, fccl_redop_t op);
/* memmove(dst, src, len), in pieces with a progress call between them
 * when the regions do not overlap: providers that move data only inside
 * our calls (net) would otherwise leave the link idle for a long local
 * copy (2 hosts x 1 rank, 64 MiB all_to_all: its 32 MiB own block). */
void cr_copy(struct coll_run *run, void *dst, const void *src, size_t len);
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

/* Pipelined algorithms keep at most this many receives posted ahead per
 * link: enough to overlap transfer and reduction, few enough not to pile
 * up clear-to-send traffic in the transport. */
#define COLL_WINDOW 8

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

#endif
