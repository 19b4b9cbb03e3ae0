/*
 * Point-to-point operations: send, recv, isend, irecv, batch_isend_irecv,
 * and their requests' wait, test and cancel.
 *
 * They go straight to the transport, with no sequence number and no worker
 * thread: the tag is the group's context id plus the user's tag in the
 * point-to-point half of the tag space (run/tag.h), so user messages
 * never meet collective traffic.  Sizes must match on both ends (a
 * receive that gets a different length fails with FCCL_ERR_PROTOCOL);
 * zero-count transfers complete at once without a message.  Failures are
 * fatal to the group like any other (sticky error, told to the members).
 * Each operation's bound is taken when it is posted (a per-call timeout,
 * else the group's); a wait with a timeout of its own that runs out
 * fails it and the group the same way.
 */
#include <stdlib.h>
#include <string.h>

#include "clock.h"
#include "request.h"
#include "tag.h"

static int check_op(const struct fccl_group *g, const char *what,
                    const void *buf, size_t count, fccl_dtype_t dtype,
                    int peer, int tag)
{
    size_t es = fccl_dtype_size(dtype);
    if (es == 0)
        return fccl_err(FCCL_ERR_INVALID, "%s: unknown dtype %d", what,
                        (int)dtype);
    if (peer < 0 || peer >= g->size)
        return fccl_err(FCCL_ERR_INVALID,
                        "%s: peer %d out of range for group %s of %d ranks",
                        what, peer, g->name, g->size);
    if (peer == g->rank)
        return fccl_err(FCCL_ERR_INVALID,
                        "%s: peer %d is the calling rank itself", what, peer);
    if (tag < 0)
        return fccl_err(FCCL_ERR_INVALID, "%s: tag %d is negative", what, tag);
    if (count > SIZE_MAX / es)
        return fccl_err(FCCL_ERR_INVALID, "%s: count %zu overflows", what,
                        count);
    if (!buf && count > 0)
        return fccl_err(FCCL_ERR_INVALID, "%s: buffer is NULL", what);
    return FCCL_OK;
}

static int check_group(const struct fccl_group *g, const char *what)
{
    if (!g || !g->state)
        return fccl_err(FCCL_ERR_INVALID, "%s: group is NULL or not set up",
                        what);
    return FCCL_OK;
}

static int post(struct fccl_group *g, const fccl_p2p_op_t *op,
                struct tp_req *req)
{
    size_t len = op->count * fccl_dtype_size(op->dtype);
    int w = g->world[op->peer];
    if (len == 0) {
        tp_req_complete_empty(req, w, op->is_send);
        return FCCL_OK;
    }
    uint64_t tag = coll_p2p_tag(g->ctx, op->tag);
    int rc = op->is_send ? tp_isend(g->tp, w, tag, op->buf, len, req)
                         : tp_irecv(g->tp, w, tag, op->buf, len, req);
    if (rc < 0)
        return coll_fail(g, fccl_err_wrap(rc, "%s rank %d (world %d) tag %d "
                                          "on group %s",
                                          op->is_send ? "send to" : "recv from",
                                          op->peer, w, op->tag, g->name));
    return FCCL_OK;
}

static void cancel_pending(struct fccl_group *g, struct tp_req *reqs, size_t n)
{
    for (size_t i = 0; i < n; i++)
        if (tp_req_pending(&reqs[i]))
            tp_cancel(g->tp, &reqs[i]);
}

/* A failed wait: name the first unfinished peer, make the error stick
 * (the group's failure elsewhere, if that is what stopped the wait). */
static int p2p_fail(struct fccl_group *g, int rc, struct tp_req *reqs,
                    size_t n, const char *what, int64_t ms)
{
    struct coll_opinfo oi = {what, 0, 0, ms};
    int failed = coll_stopped(g, rc);
    if (failed != rc)
        return failed;
    for (size_t i = 0; i < n; i++) {
        if (atomic_load(&reqs[i].state) == TP_REQ_DONE)
            continue;
        int gr = group_rank_of_world(g, reqs[i].peer);
        fccl_err_wrap(rc, "%s rank %d (world %d) on group %s (rank %d)",
                      reqs[i].is_send ? "send to" : "recv from", gr,
                      reqs[i].peer, g->name, g->rank);
        break;
    }
    return coll_fail_op(g, rc, &oi);
}

static int check_lens(struct fccl_group *g, const struct tp_req *reqs,
                      const size_t *want, size_t n)
{
    for (size_t i = 0; i < n; i++) {
        if (reqs[i].is_send || want[i] == 0 || reqs[i].len == want[i])
            continue;
        return coll_fail(g, fccl_err(FCCL_ERR_PROTOCOL,
                                     "recv from rank %d (world %d) on group "
                                     "%s: got %zu bytes, expected %zu",
                                     group_rank_of_world(g, reqs[i].peer),
                                     reqs[i].peer, g->name, reqs[i].len,
                                     want[i]));
    }
    return FCCL_OK;
}

/* ---- blocking ---- */

static int blocking(const fccl_p2p_op_t *op, fccl_group_t *g, const char *what)
{
    int rc = check_group(g, what);
    if (rc == FCCL_OK)
        rc = check_op(g, what, op->buf, op->count, op->dtype, op->peer,
                      op->tag);
    if (rc == FCCL_OK)
        rc = coll_group_check(g);
    if (rc < 0)
        return rc;
    struct tp_req req;
    int64_t ms = coll_take_timeout(g);
    if ((rc = post(g, op, &req)) < 0)
        return rc;
    rc = tp_waitall(g->tp, &req, 1, fccl_deadline_ms(ms), &g->stop);
    if (rc < 0)
        return p2p_fail(g, rc, &req, 1, what, ms);
    size_t want = op->count * fccl_dtype_size(op->dtype);
    return check_lens(g, &req, &want, 1);
}

int fccl_send(const void *buf, size_t count, fccl_dtype_t dtype, int peer,
              int tag, fccl_group_t *g)
{
    fccl_p2p_op_t op = {1, (void *)buf, count, dtype, peer, tag};
    return blocking(&op, g, "send");
}

int fccl_recv(void *buf, size_t count, fccl_dtype_t dtype, int peer, int tag,
              fccl_group_t *g)
{
    fccl_p2p_op_t op = {0, buf, count, dtype, peer, tag};
    return blocking(&op, g, "recv");
}

/* ---- requests ---- */

static struct fccl_request *p2p_request(struct fccl_group *g, size_t n)
{
    struct fccl_request *r = calloc(1, sizeof(*r));
    if (!r)
        return NULL;
    r->g = g;
    r->kind = REQ_P2P;
    r->ntp = n;
    if (n <= 1) {
        r->tp = &r->one;
        r->want = &r->one_want;
        return r;
    }
    void *p = NULL;
    if (posix_memalign(&p, 64, n * (sizeof(struct tp_req) + sizeof(size_t))) != 0) {
        free(r);
        return NULL;
    }
    memset(p, 0, n * sizeof(struct tp_req));
    r->tp = p;
    r->want = (size_t *)(r->tp + n);
    return r;
}

static void p2p_free(struct fccl_request *r)
{
    if (r->tp != &r->one)
        free(r->tp);
    free(r);
}

int fccl_batch_isend_irecv(const fccl_p2p_op_t *ops, size_t n,
                           fccl_group_t *g, fccl_request_t **req)
{
    int rc = check_group(g, "batch_isend_irecv");
    if (rc < 0)
        return rc;
    if (!req || (!ops && n > 0))
        return fccl_err(FCCL_ERR_INVALID,
                        "batch_isend_irecv: ops or request pointer is NULL");
    for (size_t i = 0; i < n; i++) {
        rc = check_op(g, ops[i].is_send ? "batch isend" : "batch irecv",
                      ops[i].buf, ops[i].count, ops[i].dtype, ops[i].peer,
                      ops[i].tag);
        if (rc < 0)
            return fccl_err_wrap(rc, "op %zu", i);
    }
    if ((rc = coll_group_check(g)) < 0)
        return rc;
    struct fccl_request *r = p2p_request(g, n);
    if (!r)
        return fccl_err(FCCL_ERR_NOMEM, "batch_isend_irecv: no memory");
    r->timeout_ms = coll_take_timeout(g);
    r->args.opname = n != 1 ? "batch_isend_irecv"
                            : ops[0].is_send ? "isend" : "irecv";
    for (size_t i = 0; i < n; i++) {
        r->want[i] = ops[i].count * fccl_dtype_size(ops[i].dtype);
        if ((rc = post(g, &ops[i], &r->tp[i])) < 0) {
            cancel_pending(g, r->tp, i);
            p2p_free(r);
            return rc;
        }
    }
    *req = r;
    return FCCL_OK;
}

int fccl_isend(const void *buf, size_t count, fccl_dtype_t dtype, int peer,
               int tag, fccl_group_t *g, fccl_request_t **req)
{
    fccl_p2p_op_t op = {1, (void *)buf, count, dtype, peer, tag};
    return fccl_batch_isend_irecv(&op, 1, g, req);
}

int fccl_irecv(void *buf, size_t count, fccl_dtype_t dtype, int peer,
               int tag, fccl_group_t *g, fccl_request_t **req)
{
    fccl_p2p_op_t op = {0, buf, count, dtype, peer, tag};
    return fccl_batch_isend_irecv(&op, 1, g, req);
}

/* ---- wait / test ---- */

static int p2p_done(struct fccl_request *r, int rc, int64_t ms)
{
    struct fccl_group *g = r->g;
    if (rc < 0) {
        cancel_pending(g, r->tp, r->ntp);
        rc = p2p_fail(g, rc, r->tp, r->ntp, r->args.opname, ms);
    } else {
        rc = check_lens(g, r->tp, r->want, r->ntp);
    }
    p2p_free(r);
    return rc;
}

/* Poll every request once: 1 all done, 0 some pending, < 0 failed. */
static int poll_all(struct fccl_request *r)
{
    int all = 1;
    for (size_t i = 0; i < r->ntp; i++) {
        if (atomic_load(&r->tp[i].state) == TP_REQ_DONE)
            continue;
        int t = tp_test(r->g->tp, &r->tp[i]);
        if (t < 0)
            return t;
        all &= t == 1;
    }
    return all;
}

int coll_p2p_wait(fccl_request_t *r, int64_t timeout_ms)
{
    struct fccl_group *g = r->g;
    if (timeout_ms < 0) {
        /* its own bound: a failure is final, the transport cancels */
        int rc = tp_waitall(g->tp, r->tp, r->ntp,
                            fccl_deadline_ms(r->timeout_ms), &g->stop);
        return p2p_done(r, rc, r->timeout_ms);
    }
    /* The caller's timeout: running out fails the request and the group
     * like its own bound would (p2p_done cancels what is posted). */
    uint64_t t0 = fccl_now_ns(), deadline = fccl_deadline_ms(timeout_ms);
    for (;;) {
        int t = poll_all(r);
        if (t != 0)
            return p2p_done(r, t < 0 ? t : FCCL_OK, timeout_ms);
        if (atomic_load(&g->stop))
            return p2p_done(r, fccl_err(FCCL_ERR_ABORTED, "group %s aborted",
                                        g->name), timeout_ms);
        if (fccl_now_ns() >= deadline)
            return p2p_done(r, fccl_err(FCCL_ERR_TIMEOUT, "fccl_wait gave "
                                        "up"), timeout_ms);
        /* back off as the engine's own waits do: a late peer costs no
         * spinning */
        tp_idle(g->tp, fccl_now_ns() - t0);
    }
}

int fccl_cancel(fccl_request_t *r)
{
    if (!r)
        return fccl_err(FCCL_ERR_INVALID, "cancel: request is NULL");
    if (r->kind != REQ_P2P)
        return fccl_err(FCCL_ERR_INVALID, "cancel: %s seq %u on group %s is "
                        "a collective, which cannot be cancelled (wait for "
                        "it)", r->args.opname, r->seq, r->g->name);
    cancel_pending(r->g, r->tp, r->ntp);
    p2p_free(r);
    return FCCL_OK;
}

int coll_p2p_test(fccl_request_t *r, int *done)
{
    int t = poll_all(r);
    if (t == 0 && atomic_load(&r->g->stop))
        t = fccl_err(FCCL_ERR_ABORTED, "group %s aborted", r->g->name);
    *done = t != 0;
    return t == 0 ? FCCL_OK : p2p_done(r, t < 0 ? t : FCCL_OK, r->timeout_ms);
}
