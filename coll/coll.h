/*
 * fccl collectives: point-to-point and collective operations on a group.
 *
 * Every operation works on any group (the world from fccl_init or one made
 * by fccl_group_new / fccl_group_split, see fccl/pg.h).  Counts are element
 * counts of `dtype`.  Ranks and peers are ranks *in the group*.
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
 * All ranks of a group call its collectives in the same order.  Different
 * groups may be driven from different threads at once; one group is used
 * by one thread at a time.  Every rank gets a bitwise-identical result.
 *
 * Errors: FCCL_ERR_INVALID for bad arguments (checked on the calling rank
 * before any communication, so a mistake never leaves peers hanging: they
 * time out), FCCL_ERR_TIMEOUT (the group timeout, FCCL_TIMEOUT or 300 s;
 * the message names the ranks that did not answer), FCCL_ERR_PEER (a rank
 * failed; named), FCCL_ERR_ABORTED (fccl_group_abort).  The first fatal
 * error sticks to the group: later calls return it at once.
 */
#ifndef FCCL_COLL_H
#define FCCL_COLL_H

#include <stddef.h>
#include <stdint.h>

#include "fccl/core.h"

#ifdef __cplusplus
extern "C" {
#endif

typedef struct fccl_group fccl_group_t;
typedef struct fccl_request fccl_request_t;

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
    FCCL_NUM_DTYPES
} fccl_dtype_t;

/* Integer sum/prod wrap; avg on integers truncates toward zero; bool has
 * sum = or, prod = and, max = or, min = and, and refuses avg.  Half types
 * accumulate in float. */
typedef enum { FCCL_SUM, FCCL_PROD, FCCL_MAX, FCCL_MIN, FCCL_AVG,
               FCCL_NUM_OPS } fccl_redop_t;

/* Bytes per element; 0 for an invalid dtype. */
size_t fccl_dtype_size(fccl_dtype_t dtype);
/* "float32", "sum", ...; "?" if invalid. */
const char *fccl_dtype_name(fccl_dtype_t dtype);
const char *fccl_redop_name(fccl_redop_t op);
/* Parse a name ("float32", "fp32", "sum", ...); -1 if unknown. */
int fccl_dtype_parse(const char *name);
int fccl_redop_parse(const char *name);

/* Force the algorithm of one operation on this group, overriding
 * FCCL_ALGO_<OP> (e.g. FCCL_ALGO_ALL_REDUCE=ring): op is named as in the
 * API ("all_reduce", "broadcast", ...), algo is one of that operation's
 * algorithms or "auto"/NULL for the automatic choice.  Every rank of the
 * group must make the same choice.  Never blocks; call it from the thread
 * that drives the group.  FCCL_ERR_INVALID (listing the choices) for an
 * unknown operation or algorithm. */
int fccl_set_algo(fccl_group_t *g, const char *op, const char *algo);

/* ---- requests ---- */

/* Wait for an asynchronous operation and free the handle.  timeout_ms < 0
 * uses the group timeout.  Returns the operation's status.  If timeout_ms
 * passes first, returns FCCL_ERR_TIMEOUT and the handle stays valid (wait
 * or test it again); the operation itself still ends by the group
 * timeout.  Wait for every handle before destroying its group. */
int fccl_wait(fccl_request_t *req, int64_t timeout_ms);
/* *done = 1 and the handle is freed when finished (the return value is then
 * the operation's status); *done = 0 otherwise.  Never blocks. */
int fccl_test(fccl_request_t *req, int *done);

/* ---- point to point (tag >= 0 separates messages between a pair) ---- */
int fccl_send(const void *buf, size_t count, fccl_dtype_t dtype, int peer,
              int tag, fccl_group_t *g);
int fccl_recv(void *buf, size_t count, fccl_dtype_t dtype, int peer, int tag,
              fccl_group_t *g);
int fccl_isend(const void *buf, size_t count, fccl_dtype_t dtype, int peer,
               int tag, fccl_group_t *g, fccl_request_t **req);
int fccl_irecv(void *buf, size_t count, fccl_dtype_t dtype, int peer,
               int tag, fccl_group_t *g, fccl_request_t **req);

typedef struct fccl_p2p_op {
    int is_send;        /* 1 send, 0 recv */
    void *buf;
    size_t count;
    fccl_dtype_t dtype;
    int peer;
    int tag;
} fccl_p2p_op_t;
/* Post all sends and receives at once; one handle completes when all do. */
int fccl_batch_isend_irecv(const fccl_p2p_op_t *ops, size_t n,
                           fccl_group_t *g, fccl_request_t **req);

/* ---- collectives ---- */
int fccl_barrier(fccl_group_t *g, fccl_request_t **req);
int fccl_broadcast(void *buf, size_t count, fccl_dtype_t dtype, int root,
                   fccl_group_t *g, fccl_request_t **req);
/* recvbuf is used on root only (may be NULL elsewhere). */
int fccl_reduce(const void *sendbuf, void *recvbuf, size_t count,
                fccl_dtype_t dtype, fccl_redop_t op, int root,
                fccl_group_t *g, fccl_request_t **req);
int fccl_all_reduce(const void *sendbuf, void *recvbuf, size_t count,
                    fccl_dtype_t dtype, fccl_redop_t op, fccl_group_t *g,
                    fccl_request_t **req);
/* recvbuf holds size * sendcount elements, rank r's block at r*sendcount. */
int fccl_all_gather(const void *sendbuf, void *recvbuf, size_t sendcount,
                    fccl_dtype_t dtype, fccl_group_t *g, fccl_request_t **req);
/* Uneven: rank r contributes recvcounts[r] elements (its sendcount must
 * equal recvcounts[rank]); blocks are packed in rank order. */
int fccl_all_gather_v(const void *sendbuf, size_t sendcount, void *recvbuf,
                      const size_t *recvcounts, fccl_dtype_t dtype,
                      fccl_group_t *g, fccl_request_t **req);
/* sendbuf holds size * recvcount elements; rank r gets the reduction of
 * block r. */
int fccl_reduce_scatter(const void *sendbuf, void *recvbuf, size_t recvcount,
                        fccl_dtype_t dtype, fccl_redop_t op, fccl_group_t *g,
                        fccl_request_t **req);
/* Uneven: sendbuf holds sum(recvcounts); rank r gets recvcounts[r]. */
int fccl_reduce_scatter_v(const void *sendbuf, void *recvbuf,
                          const size_t *recvcounts, fccl_dtype_t dtype,
                          fccl_redop_t op, fccl_group_t *g,
                          fccl_request_t **req);
/* recvbuf (root only) holds size * sendcount. */
int fccl_gather(const void *sendbuf, void *recvbuf, size_t sendcount,
                fccl_dtype_t dtype, int root, fccl_group_t *g,
                fccl_request_t **req);
/* sendbuf (root only) holds size * recvcount. */
int fccl_scatter(const void *sendbuf, void *recvbuf, size_t recvcount,
                 fccl_dtype_t dtype, int root, fccl_group_t *g,
                 fccl_request_t **req);
/* count elements to and from every rank (sendbuf, recvbuf: size*count). */
int fccl_all_to_all(const void *sendbuf, void *recvbuf, size_t count,
                    fccl_dtype_t dtype, fccl_group_t *g, fccl_request_t **req);
/* Per-peer counts; blocks are packed in rank order (displacements are the
 * prefix sums).  sendcounts[p] on this rank must equal recvcounts[me] on p. */
int fccl_all_to_all_v(const void *sendbuf, const size_t *sendcounts,
                      void *recvbuf, const size_t *recvcounts,
                      fccl_dtype_t dtype, fccl_group_t *g,
                      fccl_request_t **req);
/* Full send-count matrix (size x size, row-major; [i][j] = elements rank i
 * sends to rank j), identical on every rank, as MindSpore's
 * all_to_all_v_c. */
int fccl_all_to_all_v_c(const void *sendbuf, void *recvbuf,
                        const size_t *send_count_matrix, fccl_dtype_t dtype,
                        fccl_group_t *g, fccl_request_t **req);
/* Send send_counts[i] elements from send_bufs[i] to send_peers[i] and
 * receive recv_counts[j] into recv_bufs[j] from recv_peers[j] (MindSpore's
 * NeighborExchange).  Each peer at most once per list.  Collective: every
 * rank of the group calls it, with empty lists if it exchanges nothing. */
int fccl_neighbor_exchange(const int *send_peers, const void *const *send_bufs,
                           const size_t *send_counts, size_t nsend,
                           const int *recv_peers, void *const *recv_bufs,
                           const size_t *recv_counts, size_t nrecv,
                           fccl_dtype_t dtype, fccl_group_t *g,
                           fccl_request_t **req);

#ifdef __cplusplus
}
#endif
#endif
