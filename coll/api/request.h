/*
 * Internal: what the API floor's files call of each other: requests and
 * the execution behind the public entry points, and the group's sticky
 * error.  A collective runs inline (coll_execute) or through the group's
 * worker (coll_submit); point-to-point requests go to the transport
 * directly.
 *
 * Module map, top down:
 *   collectives.c  the public collectives: argument checks, coll_submit
 *   shaped.c       the collectives on shaped tensors (the same way)
 *   coll_group.c   a group handed over by the bootstrap, and taken back
 *   request.c      the group's worker and queue, fccl_wait and fccl_test
 *   execute.c      coll_execute: one collective on this thread
 *   p2p.c          the public point-to-point calls and their requests
 *   sticky.c       the group's failure: what sticks, who failed, who is
 *                  told (coll_fail, coll_group_check, the notices)
 *   revoke.c       fccl_group_revoke (a notice to every member), the
 *                  revoked error, fccl_group_failed_ranks
 *   timeout.c      per-call timeouts (fccl_set_next_timeout)
 * Each file calls only files below it in this list (the build checks it
 * on the objects, scripts/check-calls.sh), so the queue runs collectives
 * without knowing the entry points that fill it.
 */
#ifndef FCCL_COLL_REQUEST_H
#define FCCL_COLL_REQUEST_H

#include <stddef.h>
#include <stdint.h>

#include "args.h"
#include "group.h"
#include "run.h"
#include "tp.h"

enum req_kind { REQ_COLL, REQ_P2P };

struct fccl_request {
    struct fccl_group *g;
    enum req_kind kind;
    /* REQ_COLL: a queued collective */
    struct coll_args args;
    uint32_t seq;
    int64_t timeout_ms;        /* its own bound (per-call or the group's) */
    void *owned;               /* copies of the argument arrays */
    int status;
    int done;                  /* under st->qlock */
    int orphan;                /* its fccl_wait gave up: finish frees it */
    char errmsg[512];
    struct fccl_request *next;
    /* REQ_P2P: operations posted to the transport directly */
    size_t ntp;
    struct tp_req *tp;         /* ntp requests */
    size_t *want;              /* receives: expected bytes (sends: SIZE_MAX) */
    struct tp_req one;         /* storage when ntp == 1 */
    size_t one_want;
};

/* ---- execution (execute.c, request.c) ---- */

/* Run one collective now on this thread: seq, deadline (timeout_ms from
 * its start), algorithm, avg, sticky error.  a must stay valid for the
 * call. */
int coll_execute(struct fccl_group *g, const struct coll_args *a,
                 uint32_t seq, int64_t timeout_ms);

/* Submit: inline when nothing is queued and req == NULL, else queue to the
 * worker (copying a's arrays) and either wait (req == NULL) or hand back
 * a request. */
int coll_submit(struct fccl_group *g, const struct coll_args *a,
                fccl_request_t **req);

/* Wait for / poll a REQ_P2P request (p2p.c); same contract as
 * fccl_wait / fccl_test. */
int coll_p2p_wait(fccl_request_t *req, int64_t timeout_ms);
int coll_p2p_test(fccl_request_t *req, int *done);

/* The worker's locks (FCCL_ERR_NOMEM if they cannot be made), and its
 * end: let it drain the queue, join it, free the locks. */
struct coll_worker;
int coll_worker_init(struct coll_worker *w);
void coll_worker_stop(struct coll_worker *w);

/* ---- the group's failure (sticky.c) ---- */

/* The operation a failure happened in, for its message and the notice
 * to the members: op "all_reduce" (or "recv", "fccl_wait" ...), its
 * sequence number if it has one, the timeout it had. */
struct coll_opinfo {
    const char *op;
    uint32_t seq;
    int has_seq;
    int64_t ms;
};
/* Fail the group: keep the first fatal error (code and this thread's
 * message; a timeout's message becomes "rank R (world W) timed out after
 * MS ms in OP seq S on G: ...") with the world rank it came from, and
 * tell the members unless it is a dead peer or an abort.  The first time,
 * the thread's message is set to the kept one.  op may be NULL.  Returns
 * code. */
int coll_fail_op(struct fccl_group *g, int code, const struct coll_opinfo *op);
int coll_fail(struct fccl_group *g, int code);
/* FCCL_OK, or the group's sticky error / abort (or a member's failure
 * notice, which becomes the sticky error) with its message. */
int coll_group_check(struct fccl_group *g);
/* A wait that returned FCCL_ERR_ABORTED because the group failed (a
 * notice, or a wait of this rank that gave up), not because of an abort:
 * the group's failure instead, with its message.  Else rc. */
int coll_stopped(struct fccl_group *g, int rc);
/* revoke.c: FCCL_ERR_REVOKED with the message naming the rank that
 * revoked g, if g is revoked (else FCCL_OK). */
int coll_revoked(struct fccl_group *g);

/* ---- per-call timeouts (timeout.c) ---- */

/* The timeout of the operation taking its place now: the one
 * fccl_set_next_timeout() left (consumed), else the group's. */
int64_t coll_take_timeout(struct fccl_group *g);

#endif
