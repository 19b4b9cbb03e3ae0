/** @file fccl/coll.h
 *
 * fccl collectives: point-to-point and collective operations on a group.
 *
 * Every operation works on any group (the world from fccl_init or one made
 * by fccl_group_new / fccl_group_split, see fccl/pg.h).  Counts are element
 * counts of `dtype`.  Ranks and peers are ranks *in the group*.  A count of
 * 0 is valid everywhere (its buffer may then be NULL); a collective with
 * count 0 is still a collective that every rank must call, but in its even
 * form (no per-rank counts) it moves nothing and returns without waiting
 * for the others (it does not synchronise: use fccl_barrier for that).
 *
 * Blocking and asynchronous forms: collectives take `fccl_request_t **req`.
 * With req == NULL the call blocks until done (or the group timeout).  With
 * req != NULL it starts the operation, stores a handle in *req and returns
 * at once; finish it with fccl_wait() or fccl_test().  Until then the call
 * borrows its buffers: do not touch them.  In-place: pass the same pointer
 * as send and recv buffer.  For all_gather(_v) and gather the caller's block
 * is then read from the start of the buffer (passing recvbuf + its offset,
 * NCCL style, works too); reduce_scatter(_v) and scatter leave the result at
 * the start of the buffer; all_to_all(_v, _v_c) works on a copy.
 *
 * Ownership: data buffers are borrowed until the operation ends (see
 * above).  Argument arrays (counts, peer lists, buffer lists, the p2p op
 * list) are read or copied during the call: the caller may free or reuse
 * them as soon as the call returns, even for an asynchronous operation.
 * A request handle belongs to the library and is freed by the fccl_wait()
 * or fccl_test() that reports its completion.
 *
 * Execution: a group's collectives run in call order.  A blocking call
 * runs on the calling thread when nothing of the group is queued;
 * asynchronous collectives run on one worker thread per group, started by
 * the group's first asynchronous call.  Point-to-point operations bypass
 * that queue.  There is no progress thread: a point-to-point operation
 * is driven forward by fccl_wait() / fccl_test() and by any other fccl
 * call of the process that waits on the transport.
 *
 * The group timeout bounds each operation: fccl_init's timeout_ms, else
 * FCCL_TIMEOUT (seconds), else 300 s; fccl_group_set_timeout() changes it
 * per group, fccl_set_next_timeout() for the next operation alone.  An
 * operation's clock starts when it starts running (a queued collective's
 * when the worker picks it up).
 *
 * A group fails as a whole (NCCL's abort model): when an operation fails
 * on one member (its timeout or a wait's ran out, sizes disagree, ...),
 * that member tells the others over the heartbeat sockets (unless
 * FCCL_PEER_TIMEOUT=0), their pending waits on the group end at once and
 * every later call on it fails at once, on every member, with a message
 * naming the rank, the operation and its sequence number ("rank 3 (world
 * 3) timed out after 2000 ms in all_reduce seq 17 on fccl_2_..."): the
 * member where it happened returns that failure's code, the others
 * FCCL_ERR_PEER; fccl_group_failed_rank() names the rank.  Destroy the
 * group then (the world: fccl_finalize()); a group created again works.
 *
 * All ranks of a group call its collectives in the same order.  Different
 * groups may be driven from different threads at once; one group is used
 * by one thread at a time.  Every rank gets a bitwise-identical result.
 *
 * Errors: FCCL_ERR_INVALID for bad arguments (checked on the calling rank
 * before any communication, so the mistaken rank returns at once without
 * a half-sent message; its peers time out), FCCL_ERR_TIMEOUT (the group
 * timeout; the message names the ranks that did not answer),
 * FCCL_ERR_PEER (a rank failed, or the group failed on another member;
 * named), FCCL_ERR_ABORTED (fccl_group_abort).  The first fatal error
 * sticks to the group: later calls return it at once.
 *
 * In detail, an operation that communicates can fail with:
 *  - FCCL_ERR_INVALID: an argument check (the call then had no effect:
 *    no sequence number taken, nothing sent, nothing sticks), or an
 *    unknown algorithm in FCCL_ALGO_<OP>;
 *  - FCCL_ERR_NOMEM: scratch memory or a request could not be allocated;
 *  - FCCL_ERR_TIMEOUT: the group timeout passed;
 *  - FCCL_ERR_PEER: a rank exited (detected for ranks on this host), a
 *    connection to it broke, its heartbeats stopped (FCCL_PEER_TIMEOUT),
 *    or the group failed on another member (its notice names it);
 *  - FCCL_ERR_PROTOCOL: a message of another size than expected arrived
 *    (counts or roots that differ between ranks);
 *  - FCCL_ERR_FABRIC: a libfabric call or completion failed;
 *  - FCCL_ERR_ABORTED: fccl_group_abort() was called on this group;
 *  - FCCL_ERR_STATE: only on an internal error of the library;
 *  - or the group's sticky error, returned again by every later call.
 * A failure found before the operation takes its place in the group's
 * order (an argument check, a bad FCCL_ALGO_<OP>, an allocation for the
 * argument checks) leaves the group usable; every other failure sticks.
 * Asynchronous calls return argument, allocation and sticky errors at
 * once and the others from fccl_wait() / fccl_test().
 */
#ifndef FCCL_COLL_H
#define FCCL_COLL_H

#include <stddef.h>
#include <stdint.h>

#include "fccl/core.h"

#ifdef __cplusplus
extern "C" {
#endif

/** A group of ranks (opaque).  Made and freed by the calls of fccl/pg.h. */
typedef struct fccl_group fccl_group_t;
/** An asynchronous operation in flight (opaque).  See fccl_wait(). */
typedef struct fccl_request fccl_request_t;

/** Element types.  FLOAT16 is IEEE half, BFLOAT16 is bfloat16 (both 2
 * bytes, held as raw bits by the caller); BOOL is one byte, any non-zero
 * byte is true, and reductions produce exactly 0 or 1.  New types are
 * appended (INT16 came last), so the values of the others never change. */
typedef enum {
    FCCL_INT8,
    FCCL_UINT8,
    FCCL_INT32,
    FCCL_UINT32,
    FCCL_INT64,
    FCCL_UINT64,
    FCCL_FLOAT16,
    FCCL_BFLOAT16,
    FCCL_FLOAT32,
    FCCL_FLOAT64,
    FCCL_BOOL,
    FCCL_INT16,
    FCCL_NUM_DTYPES /**< count of types, not a type */
} fccl_dtype_t;

/** Reduction ops.  Integer sum/prod wrap; avg on integers truncates toward
 * zero; bool has sum = or, prod = and, max = or, min = and, and refuses
 * avg.  Half types accumulate in float.  BAND, BOR and BXOR (bitwise and,
 * or, xor; torch's ReduceOp.BAND/BOR/BXOR) take integer types and bool
 * only (on bool: and, or, xor of the truth values), FCCL_ERR_INVALID on
 * floating types.  FCCL_NUM_OPS is a count, not an op. */
typedef enum { FCCL_SUM, FCCL_PROD, FCCL_MAX, FCCL_MIN, FCCL_AVG,
               FCCL_BAND, FCCL_BOR, FCCL_BXOR,
               FCCL_NUM_OPS } fccl_redop_t;

/** @name Types and ops by name
 * Pure functions: never block, never set fccl_last_error(), thread-safe.
 * Returned strings are static, owned by the library.
 * @{ */

/** Bytes per element of `dtype`; 0 for a value that is not a dtype. */
FCCL_API size_t fccl_dtype_size(fccl_dtype_t dtype);
/** The API name of a dtype ("float32", "bfloat16", ...); "?" if invalid. */
FCCL_API const char *fccl_dtype_name(fccl_dtype_t dtype);
/** The API name of a reduction op ("sum", "avg", ...); "?" if invalid. */
FCCL_API const char *fccl_redop_name(fccl_redop_t op);
/** Parse a dtype name, ignoring case: the API names and the usual
 * spellings of nccl-tests and PyTorch ("float", "fp32", "half", "bf16",
 * "int", "long", "double", "i8", "u64", ...).
 * @return the fccl_dtype_t value, or -1 if unknown or NULL. */
FCCL_API int fccl_dtype_parse(const char *name);
/** Parse a reduction op name, ignoring case: "sum", "prod" ("product",
 * "mul"), "max", "min", "avg" ("mean"), "band", "bor", "bxor" ("and",
 * "or", "xor").
 * @return the fccl_redop_t value, or -1 if unknown or NULL. */
FCCL_API int fccl_redop_parse(const char *name);
/** @} */

/**
 * Force the algorithm of one operation on this group, overriding
 * FCCL_ALGO_<OP> (e.g. FCCL_ALGO_ALL_REDUCE=ring).  Every rank of the
 * group must make the same choice.  docs/algorithms.md lists the
 * choices; an algorithm that needs what the group
 * lacks (shm on a group that spans hosts) runs a general one instead.
 *
 * Never blocks.  Not thread-safe: call it from the thread that drives the
 * group, when none of its asynchronous collectives is pending (a queued
 * collective picks its algorithm when it starts running).
 *
 * @param g a group; not NULL.
 * @param op the operation as named in the API ("all_reduce", "broadcast",
 *     "reduce", "all_gather", "reduce_scatter", "gather", "scatter",
 *     "all_to_all", "barrier", "neighbor_exchange", "neighbor_exchange_v2",
 *     "all_to_all_dims"; case, '_' and '-' are ignored, "bcast" and
 *     "alltoall" also work).  The _v variants share
 *     the choice of their operation.
 * @param algo one of that operation's algorithms, or "auto", "" or NULL
 *     for the automatic choice (which also clears a bad FCCL_ALGO_<OP>).
 * @return FCCL_OK; FCCL_ERR_INVALID for a NULL group, an unknown
 *     operation or an unknown algorithm (the message lists the choices).
 */
FCCL_API int fccl_set_algo(fccl_group_t *g, const char *op, const char *algo);

/* ---- requests and timeouts ---- */

/**
 * Give the next operation started on g its own timeout, instead of the
 * group's (fccl_group_set_timeout()).  "Started" is when the operation
 * takes its place in the group's order: the next collective or
 * point-to-point call on g that passes its argument checks takes the
 * setting and clears it (a call refused with FCCL_ERR_INVALID, or with
 * the group's sticky error, leaves it for the next one).  For a
 * collective it bounds the operation from when it starts running; for
 * fccl_send() / fccl_recv() the call; for fccl_isend(), fccl_irecv() and
 * fccl_batch_isend_irecv() the fccl_wait(req, -1) of its handle.  When it
 * runs out the operation fails with FCCL_ERR_TIMEOUT and the group fails
 * on every member (see the overview).  Ranks may give different values:
 * the setting is local.
 *
 * Never blocks.  Not thread-safe: call it from the thread that drives
 * the group, right before the call it is meant for.
 *
 * @param g the group; not NULL.
 * @param timeout_ms > 0: the next operation's timeout in milliseconds;
 *     -1: clear a setting no operation has taken yet.
 * @return FCCL_OK; FCCL_ERR_INVALID for a NULL group or timeout_ms 0 or
 *     below -1.
 */
FCCL_API int fccl_set_next_timeout(fccl_group_t *g, int64_t timeout_ms);

/**
 * The world rank a failed group's failure came from: the rank that timed
 * out or failed (this rank itself when it happened here), the dead rank
 * for a dead peer, or the member whose failure notice arrived (also
 * before any call on g noticed it: the notice is read by the library's
 * heartbeat thread).  So a program (fccl.PeerError.rank in Python) need
 * not parse messages.
 *
 * Never blocks.  Thread-safe.
 *
 * @param g the group; NULL gives -1.
 * @return the world rank, or -1 if g has not failed, was only aborted
 *     (fccl_group_abort()), or the culprit is not known.
 */
FCCL_API int fccl_group_failed_rank(const fccl_group_t *g);

/**
 * Wait for an asynchronous operation and free the handle.
 *
 * Blocks until the operation ends or timeout_ms passes.  timeout_ms < 0
 * uses the operation's own bound: for a point-to-point request, its
 * timeout (fccl_set_next_timeout() before the call, else the group's)
 * counted from this call; for a collective, as long as the collectives
 * queued ahead of it and itself may take (each ends by its timeout).
 * If timeout_ms passes first, the wait fails the operation as its own
 * timeout would: it returns FCCL_ERR_TIMEOUT ("rank R (world W) timed out
 * after timeout_ms ms in OP seq S on G ..."; if the group had already
 * failed, the message ends with "the group had already failed: " and
 * that first failure), the handle is freed, what
 * the operation had posted is cancelled (its buffers are the caller's
 * again when the call returns), and the group fails on every member
 * (see the overview).  To look without failing anything, use
 * fccl_test().  A collective ends by its timeout in any case; a
 * point-to-point request has no deadline of its own before it is waited
 * for (and only a wait with timeout_ms < 0 notices a peer on this host
 * that exited).  When a request fails in a wait, the handle is freed and
 * the error sticks to the group.  Wait for every handle before
 * destroying its group.
 *
 * Thread-safety: waiting counts as using the group (one thread at a time
 * per group); that thread need not be the one that started the
 * operation.
 *
 * @param req a handle from an asynchronous call, not yet freed; not NULL.
 * @param timeout_ms how long to wait, in milliseconds; < 0: see above.
 * @return the operation's status (FCCL_OK or any error of the overview's
 *     list) once it ended, with its message in fccl_last_error(); the
 *     handle is then freed.  FCCL_ERR_TIMEOUT if timeout_ms >= 0 passed
 *     first (the handle is freed too, and the group has failed).
 *     FCCL_ERR_INVALID if req is NULL (nothing else happens).
 */
FCCL_API int fccl_wait(fccl_request_t *req, int64_t timeout_ms);
/**
 * Check whether an asynchronous operation has ended; if so, free the
 * handle.  *done = 1 and the handle is freed when finished (the return
 * value is then the operation's status); *done = 0 otherwise.
 *
 * Never blocks (a point-to-point request is moved forward once).  It never
 * times out by itself: a point-to-point request whose peer never answers
 * stays at *done = 0, so bound a loop of tests yourself or finish with
 * fccl_wait(req, -1).  A collective ends by the group timeout in any
 * case.
 * Thread-safety as fccl_wait().
 *
 * @param req a handle from an asynchronous call, not yet freed; not NULL.
 * @param done receives 1 (ended; handle freed) or 0 (still running).
 * @return FCCL_OK while running; once ended, the operation's status (any
 *     error of the overview's list; FCCL_ERR_ABORTED for a point-to-point
 *     request whose group was aborted); FCCL_ERR_INVALID if req or done
 *     is NULL.
 */
FCCL_API int fccl_test(fccl_request_t *req, int *done);
/**
 * Cancel a point-to-point request (from fccl_isend(), fccl_irecv() or
 * fccl_batch_isend_irecv()) and free its handle: what is still pending is
 * taken back from the transport, what has already completed is dropped
 * unreported.  For a receive whose sender will never come (a protocol
 * that gives up on a peer), or a send nobody will receive.
 *
 * Blocks while the transport takes the operations back: usually not at
 * all, at most about 200 ms for each one the provider still holds.
 * Nothing sticks to the group and the peer is not told: a cancelled send
 * may or may not have been delivered, and a message that arrives later
 * for a cancelled receive waits for the next receive of the same peer,
 * group and tag (use a new tag, or tell stale messages apart, when
 * trying again).
 *
 * Ownership: on return the buffers are the caller's again, with one rare
 * exception: a send the provider has already taken and does not give
 * back within that time is abandoned (the log says so at level warn);
 * the provider may still read its buffer, so free or reuse it only where
 * stale bytes reaching the peer do no harm, or keep it until
 * fccl_finalize().
 *
 * Thread-safety as fccl_wait(): cancelling counts as using the group.
 *
 * @param req a point-to-point handle, not yet freed; not NULL.
 * @return FCCL_OK (the handle is freed); FCCL_ERR_INVALID if req is NULL
 *     or is a collective's handle (a collective cannot be taken back, the
 *     other ranks are in it: finish it with fccl_wait()); the handle then
 *     stays valid.
 */
FCCL_API int fccl_cancel(fccl_request_t *req);

/* ---- point to point (tag >= 0 separates messages between a pair) ---- */

/*
 * Point-to-point operations send `count` elements to, or receive them
 * from, one peer of the group.  A message matches the receive of the same
 * peer, group and tag; tags never meet collective traffic.  Sizes must
 * match on both ends: a receive that gets a message of another size fails
 * with FCCL_ERR_PROTOCOL.  A transfer of 0 elements completes at once
 * without any message (so both ends must agree on 0).  Failures stick to
 * the group like those of collectives.  They are not collectives: only
 * the two ranks involved call them.  Thread-safety: as for collectives,
 * one thread at a time per group.
 *
 * Parameters common to all of them:
 *   buf    count elements of dtype; NULL only when count is 0.  Borrowed
 *          until the operation ends.
 *   count  elements; count * element size must fit in size_t.
 *   dtype  a valid fccl_dtype_t.
 *   peer   a group rank other than the caller's (0..size-1).
 *   tag    >= 0 (any non-negative int).
 *   g      the group; not NULL.
 *
 * Errors: FCCL_ERR_INVALID (NULL group, bad dtype, peer out of range or
 * the caller itself, negative tag, count overflow, NULL buffer, NULL req
 * for the i-forms), the group's sticky error or FCCL_ERR_ABORTED, then
 * FCCL_ERR_NOMEM, FCCL_ERR_FABRIC, FCCL_ERR_TIMEOUT, FCCL_ERR_PEER,
 * FCCL_ERR_PROTOCOL (for the i-forms, from fccl_wait() / fccl_test()).
 */

/** Send and wait until buf may be reused (or the group timeout).
 * Returns FCCL_OK or an error of the list above. */
FCCL_API int fccl_send(const void *buf, size_t count, fccl_dtype_t dtype,
                       int peer, int tag, fccl_group_t *g);
/** Receive and wait until the message has arrived (or the group timeout).
 * Returns FCCL_OK or an error of the list above. */
FCCL_API int fccl_recv(void *buf, size_t count, fccl_dtype_t dtype, int peer,
                       int tag, fccl_group_t *g);
/** Start a send and return at once with a handle in *req (not NULL).
 * Returns FCCL_OK or a posting error of the list above. */
FCCL_API int fccl_isend(const void *buf, size_t count, fccl_dtype_t dtype,
                        int peer, int tag, fccl_group_t *g,
                        fccl_request_t **req);
/** Start a receive and return at once with a handle in *req (not NULL).
 * Returns FCCL_OK or a posting error of the list above. */
FCCL_API int fccl_irecv(void *buf, size_t count, fccl_dtype_t dtype, int peer,
                        int tag, fccl_group_t *g, fccl_request_t **req);

/** One operation of fccl_batch_isend_irecv(); fields as the parameters of
 * the point-to-point calls above. */
typedef struct fccl_p2p_op {
    int is_send;        /**< 1 send, 0 recv */
    void *buf;          /**< data; borrowed until the batch ends */
    size_t count;       /**< elements of dtype */
    fccl_dtype_t dtype; /**< element type */
    int peer;           /**< group rank, not the caller */
    int tag;            /**< >= 0 */
} fccl_p2p_op_t;
/**
 * Post all sends and receives at once; one handle completes when all do.
 *
 * Never blocks.  Every op is checked before any is posted; if posting one
 * fails, those already posted are cancelled.  Thread-safety as the other
 * point-to-point calls.
 *
 * @param ops n operations; read during the call only.  NULL if n is 0.
 * @param n number of operations (0 gives a handle that completes at once).
 * @param g the group; not NULL.
 * @param req receives the handle; not NULL.  Finish with fccl_wait() or
 *     fccl_test(), which report the first failure among the ops.
 * @return FCCL_OK, or an error of the point-to-point list (an op's
 *     argument error names its index).
 */
FCCL_API int fccl_batch_isend_irecv(const fccl_p2p_op_t *ops, size_t n,
                                    fccl_group_t *g, fccl_request_t **req);

/* ---- collectives ---- */

/*
 * Every collective below is called by every rank of the group, in the
 * same order, with matching arguments (same count, dtype, op and root,
 * unless a comment says otherwise).  Parameters common to all:
 *   dtype  a valid fccl_dtype_t;
 *   op     a valid fccl_redop_t (FCCL_AVG not on FCCL_BOOL; FCCL_BAND,
 *          FCCL_BOR, FCCL_BXOR on integer types and bool only);
 *   root   a group rank, 0..size-1;
 *   g      the group; not NULL;
 *   req    NULL to block until the operation is done on this rank (at
 *          most the group timeout; longer if asynchronous collectives of
 *          the group are queued ahead, which run first), or where to
 *          store the handle of an asynchronous operation (see the
 *          overview).
 * Buffers may be NULL only where they hold no element.  Counts times the
 * element size (times the group size where a buffer holds one block per
 * rank) must fit in size_t.  They return FCCL_OK or an error of the
 * overview's list; FCCL_ERR_INVALID covers exactly the checks each
 * comment names plus the common ones above.
 */

/** Completes once every rank of the group has entered the barrier. */
FCCL_API int fccl_barrier(fccl_group_t *g, fccl_request_t **req);
/** Copy count elements of buf on root into buf on every other rank. */
FCCL_API int fccl_broadcast(void *buf, size_t count, fccl_dtype_t dtype,
                            int root, fccl_group_t *g, fccl_request_t **req);
/** Reduce every rank's sendbuf (count elements) with op into recvbuf on
 * root.  recvbuf is used on root only (may be NULL elsewhere). */
FCCL_API int fccl_reduce(const void *sendbuf, void *recvbuf, size_t count,
                         fccl_dtype_t dtype, fccl_redop_t op, int root,
                         fccl_group_t *g, fccl_request_t **req);
/** Reduce every rank's sendbuf (count elements) with op into recvbuf on
 * every rank. */
FCCL_API int fccl_all_reduce(const void *sendbuf, void *recvbuf, size_t count,
                             fccl_dtype_t dtype, fccl_redop_t op,
                             fccl_group_t *g, fccl_request_t **req);
/** Gather sendcount elements from every rank into recvbuf on every rank.
 * recvbuf holds size * sendcount elements, rank r's block at r*sendcount. */
FCCL_API int fccl_all_gather(const void *sendbuf, void *recvbuf,
                             size_t sendcount, fccl_dtype_t dtype,
                             fccl_group_t *g, fccl_request_t **req);
/** Uneven all_gather: rank r contributes recvcounts[r] elements (its
 * sendcount must equal recvcounts[rank]: FCCL_ERR_INVALID otherwise);
 * blocks are packed in rank order.  recvcounts (size entries, the same
 * on every rank, not NULL) is read during the call only. */
FCCL_API int fccl_all_gather_v(const void *sendbuf, size_t sendcount,
                               void *recvbuf, const size_t *recvcounts,
                               fccl_dtype_t dtype, fccl_group_t *g,
                               fccl_request_t **req);
/** Reduce with op and scatter: sendbuf holds size * recvcount elements;
 * rank r gets the reduction of block r in recvbuf (recvcount elements). */
FCCL_API int fccl_reduce_scatter(const void *sendbuf, void *recvbuf,
                                 size_t recvcount, fccl_dtype_t dtype,
                                 fccl_redop_t op, fccl_group_t *g,
                                 fccl_request_t **req);
/** Uneven reduce_scatter: sendbuf holds sum(recvcounts), block r at the
 * prefix sum; rank r gets recvcounts[r] reduced elements.  recvcounts
 * (size entries, the same on every rank, not NULL) is read during the
 * call only. */
FCCL_API int fccl_reduce_scatter_v(const void *sendbuf, void *recvbuf,
                                   const size_t *recvcounts,
                                   fccl_dtype_t dtype, fccl_redop_t op,
                                   fccl_group_t *g, fccl_request_t **req);
/** Gather sendcount elements from every rank into recvbuf on root, rank
 * r's block at r*sendcount.  recvbuf (root only; may be NULL elsewhere)
 * holds size * sendcount. */
FCCL_API int fccl_gather(const void *sendbuf, void *recvbuf, size_t sendcount,
                         fccl_dtype_t dtype, int root, fccl_group_t *g,
                         fccl_request_t **req);
/** Scatter from root: block r of sendbuf goes to rank r's recvbuf
 * (recvcount elements).  sendbuf (root only; may be NULL elsewhere) holds
 * size * recvcount. */
FCCL_API int fccl_scatter(const void *sendbuf, void *recvbuf,
                          size_t recvcount, fccl_dtype_t dtype, int root,
                          fccl_group_t *g, fccl_request_t **req);
/** count elements to and from every rank (sendbuf, recvbuf: size*count):
 * block p of sendbuf goes to rank p, block p of recvbuf comes from it. */
FCCL_API int fccl_all_to_all(const void *sendbuf, void *recvbuf, size_t count,
                             fccl_dtype_t dtype, fccl_group_t *g,
                             fccl_request_t **req);
/** Per-peer counts; blocks are packed in rank order (displacements are the
 * prefix sums).  sendcounts[p] on this rank must equal recvcounts[me] on p
 * (not checked locally: a mismatch fails with FCCL_ERR_PROTOCOL or
 * FCCL_ERR_TIMEOUT, and can go unnoticed where the receiver expects 0).
 * sendcounts[me] must equal recvcounts[me] (FCCL_ERR_INVALID).  Both
 * arrays (size entries, not NULL) are read during the call only. */
FCCL_API int fccl_all_to_all_v(const void *sendbuf, const size_t *sendcounts,
                               void *recvbuf, const size_t *recvcounts,
                               fccl_dtype_t dtype, fccl_group_t *g,
                               fccl_request_t **req);
/** Full send-count matrix (size x size, row-major; [i][j] = elements rank i
 * sends to rank j), identical on every rank, as MindSpore's
 * all_to_all_v_c.  Row `me` gives this rank's send counts, column `me`
 * its receive counts, packed as in fccl_all_to_all_v().  The matrix (not
 * NULL) is read during the call only. */
FCCL_API int fccl_all_to_all_v_c(const void *sendbuf, void *recvbuf,
                                 const size_t *send_count_matrix,
                                 fccl_dtype_t dtype, fccl_group_t *g,
                                 fccl_request_t **req);
/** Send send_counts[i] elements from send_bufs[i] to send_peers[i] and
 * receive recv_counts[j] into recv_bufs[j] from recv_peers[j] (MindSpore's
 * NeighborExchange).  Each peer at most once per list.  Collective: every
 * rank of the group calls it, with empty lists if it exchanges nothing.
 * Peers are group ranks; what this rank sends to p must be what p expects
 * from it (as in fccl_all_to_all_v()).  A send to the caller itself needs
 * a receive from itself of the same count.  The four lists of each side
 * may be NULL when their length is 0 and are read during the call only;
 * the buffers are borrowed.  FCCL_ERR_INVALID also for a peer out of
 * range or listed twice, NULL lists, or an unmatched send to oneself. */
FCCL_API int fccl_neighbor_exchange(const int *send_peers,
                                    const void *const *send_bufs,
                                    const size_t *send_counts, size_t nsend,
                                    const int *recv_peers,
                                    void *const *recv_bufs,
                                    const size_t *recv_counts, size_t nrecv,
                                    fccl_dtype_t dtype, fccl_group_t *g,
                                    fccl_request_t **req);

/* ---- collectives on shaped tensors (MindSpore's comm_ops) ---- */

/*
 * NeighborExchangeV2 and AlltoAll with split and concat dimensions work
 * on dense tensors in C order (row-major, the last dimension contiguous),
 * described by a dims array of ndim entries (at most FCCL_COLL_MAX_DIMS);
 * the buffers hold the product of the dims in elements of dtype (NULL
 * only when that product is 0).  The argument checks are the seed's
 * (mindspore.ops.NeighborExchangeV2 and ops.AlltoAll), made on the
 * calling rank before anything is sent; each FCCL_ERR_INVALID message
 * names the argument and the value that failed.  Blocking (req NULL) and
 * asynchronous as the other collectives; the dims and id arrays are read
 * during the call only.  The data is packed into and unpacked out of the
 * group's scratch memory (up to the bytes of both buffers), so the
 * transfers themselves are contiguous.
 */

/** Most dimensions of a shaped buffer. */
#define FCCL_COLL_MAX_DIMS 8

/** The eight directions of fccl_neighbor_exchange_v2(), in the order of
 * MindSpore's send_rank_ids and recv_rank_ids (clockwise from the top). */
typedef enum {
    FCCL_NBR_TOP,
    FCCL_NBR_TOP_RIGHT,
    FCCL_NBR_RIGHT,
    FCCL_NBR_BOTTOM_RIGHT,
    FCCL_NBR_BOTTOM,
    FCCL_NBR_BOTTOM_LEFT,
    FCCL_NBR_LEFT,
    FCCL_NBR_TOP_LEFT,
    FCCL_NBR_NUM_DIRS /**< count of directions, not a direction */
} fccl_nbr_dir_t;

/** The four sides of the lens arrays of fccl_neighbor_exchange_v2(), in
 * MindSpore's order [top, bottom, left, right]. */
typedef enum {
    FCCL_NBR_LEN_TOP,
    FCCL_NBR_LEN_BOTTOM,
    FCCL_NBR_LEN_LEFT,
    FCCL_NBR_LEN_RIGHT,
    FCCL_NBR_NUM_SIDES /**< count of sides, not a side */
} fccl_nbr_side_t;

/**
 * Halo exchange of an NCHW tensor with up to eight neighbours
 * (MindSpore's NeighborExchangeV2).
 *
 * Sends: for each direction d with send_rank_ids[d] != -1, a block of the
 * input goes to that rank: top = rows [0, send_lens[TOP]) of every (n, c)
 * plane, all W columns; bottom = the last send_lens[BOTTOM] rows; left
 * and right = send_lens[LEFT] / send_lens[RIGHT] columns of all H rows;
 * a corner = the intersection (top-right: the first send_lens[TOP] rows
 * of the last send_lens[RIGHT] columns, and so on).
 *
 * Receives: the output is the input with a frame around it.  A side
 * whose direction has a rank (recv_rank_ids[TOP] for the top, [BOTTOM],
 * [LEFT], [RIGHT]) adds recv_lens of that side; a side with -1 adds
 * nothing, whatever its length (the seed's output shape).  So the output
 * is N x C x (H + top + bottom) x (W + left + right) with those sizes, the
 * input in its centre, and each received block in its place around it
 * (the top block above the centre, W wide; the top-right corner above
 * and right of it; ...).  The seed's corner rule makes the frame whole: a
 * corner has a rank exactly when both of its sides have one.
 * fccl_neighbor_exchange_v2_shape() computes the output shape.
 *
 * Matching: what this rank sends to p is what p receives from it, in
 * whatever direction p names it (the usual grid: my top goes to the rank
 * above, which receives it as its bottom), element counts equal on both
 * ends (a mismatch fails with FCCL_ERR_PROTOCOL or FCCL_ERR_TIMEOUT, or
 * goes unnoticed where the receiver expects 0).  A rank may be its own
 * neighbour: a send to itself needs a receive from itself of the same
 * count, and is a local copy.  Every rank of the group calls it (with
 * all ids -1 if it exchanges nothing).
 *
 * @param sendbuf the input, dims[0] x dims[1] x dims[2] x dims[3].
 * @param dims the input's shape (N, C, H, W); ndim must be 4 (NCHW, the
 *     only data format of the seed).
 * @param ndim 4.
 * @param recvbuf the output (see above); must not overlap sendbuf.
 * @param send_rank_ids 8 group ranks by direction (fccl_nbr_dir_t), -1
 *     for none; no rank twice.
 * @param send_lens 4 sizes by side (fccl_nbr_side_t), >= 0; the top and
 *     bottom ones at most H, the left and right ones at most W.
 * @param recv_rank_ids 8 group ranks by direction, -1 for none; no rank
 *     twice; the corner rule above.
 * @param recv_lens 4 sizes by side, >= 0.
 * @return FCCL_OK or an error of the overview's list; FCCL_ERR_INVALID
 *     also for: ndim other than 4, a NULL dims, id or lens array, an id
 *     below -1 or not a rank of the group, an id twice in one list, a
 *     negative length, a corner that breaks the corner rule, a send
 *     length larger than the input, overlapping buffers, a send to
 *     myself without the matching receive, sizes that overflow.
 */
FCCL_API int fccl_neighbor_exchange_v2(const void *sendbuf, const size_t *dims,
                                       size_t ndim, void *recvbuf,
                                       const int *send_rank_ids,
                                       const int64_t *send_lens,
                                       const int *recv_rank_ids,
                                       const int64_t *recv_lens,
                                       fccl_dtype_t dtype, fccl_group_t *g,
                                       fccl_request_t **req);
/**
 * The output shape of fccl_neighbor_exchange_v2() for an input of `dims`,
 * with the argument checks that need no group (every check of the call
 * but the rank range and the buffers).
 *
 * Never blocks; thread-safe.
 *
 * @param out_dims receives 4 dims.
 * @return FCCL_OK; FCCL_ERR_INVALID as fccl_neighbor_exchange_v2() (with
 *     send_rank_ids NULL, the send checks are skipped).
 */
FCCL_API int fccl_neighbor_exchange_v2_shape(const size_t *dims, size_t ndim,
                                            const int *send_rank_ids,
                                            const int64_t *send_lens,
                                            const int *recv_rank_ids,
                                            const int64_t *recv_lens,
                                            size_t *out_dims);

/**
 * All-to-all along any dimensions (MindSpore's AlltoAll with
 * split_count, split_dim and concat_dim).
 *
 * The input (shape dims) is cut along split_dim into split_count equal
 * blocks; block p goes to group rank p; the blocks received are joined
 * in rank order along concat_dim.  The output's shape is dims with
 * dims[split_dim] / n and then dims[concat_dim] * n (n = split_count =
 * the group size; split_dim == concat_dim keeps the shape).  With
 * split_dim = concat_dim = 0 it is fccl_all_to_all().  Every rank passes
 * the same dims, split_dim and concat_dim.
 *
 * In place (sendbuf == recvbuf) works.
 *
 * @param sendbuf the input, the product of dims elements.
 * @param recvbuf the output, as many elements.
 * @param dims the input's shape, ndim entries.
 * @param ndim 1..FCCL_COLL_MAX_DIMS.
 * @param split_count must equal the group size (the seed's rule).
 * @param split_dim, concat_dim dimensions, -ndim..ndim-1 (negative counts
 *     from the end, as Python indexes).
 * @return FCCL_OK or an error of the overview's list; FCCL_ERR_INVALID
 *     also for: dims NULL, ndim out of range, split_count other than the
 *     group size, a dimension out of range, dims[split_dim] not divisible
 *     by split_count, sizes that overflow.
 */
FCCL_API int fccl_all_to_all_dims(const void *sendbuf, void *recvbuf,
                                  const size_t *dims, size_t ndim,
                                  int split_count, int split_dim,
                                  int concat_dim, fccl_dtype_t dtype,
                                  fccl_group_t *g, fccl_request_t **req);
/**
 * The output shape of fccl_all_to_all_dims(), with its argument checks
 * that need no group (split_count is only checked to be >= 1).
 *
 * Never blocks; thread-safe.
 *
 * @param out_dims receives ndim dims.
 * @return FCCL_OK; FCCL_ERR_INVALID as fccl_all_to_all_dims().
 */
FCCL_API int fccl_all_to_all_dims_shape(const size_t *dims, size_t ndim,
                                        int split_count, int split_dim,
                                        int concat_dim, size_t *out_dims);

#ifdef __cplusplus
}
#endif
#endif
