/*
 * Asynchronous collectives: the group's worker thread and its queue.
 *
 * Every group gets one worker thread, started by its first asynchronous
 * call.  An asynchronous call copies its argument arrays into a request
 * and queues it; the worker runs queued collectives one after another, so
 * they complete in call order.  A blocking call runs inline on the
 * caller's thread when nothing is queued or running (no thread hand-off on
 * the latency path), otherwise it queues behind the others and waits.
 * Sequence numbers are taken at call time, so every rank numbers its
 * collectives identically whichever thread runs them.
 *
 * coll_worker_stop (from coll_group_fini) lets the worker drain the queue (each collective ends by
 * its deadline, or at once after an abort) and joins it.
 *
 * A wait given its own timeout that runs out fails the operation and the
 * group, as the operation's own deadline would (NCCL's model): the
 * failure sticks and the members are told (sticky.c), the group's stop
 * word ends the worker's wait at once (its posted messages are
 * cancelled), and fccl_wait returns when the worker has let go of the
 * buffers.
 */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "clock.h"
#include "log.h"
#include "request.h"


/* ---- the worker ---- */

static int cv_init_monotonic(pthread_cond_t *cv)
{
    pthread_condattr_t at;
    pthread_condattr_init(&at);
    pthread_condattr_setclock(&at, CLOCK_MONOTONIC);
    int rc = pthread_cond_init(cv, &at);
    pthread_condattr_destroy(&at);
    return rc;
}

int coll_worker_init(struct coll_worker *w)
{
    if (pthread_mutex_init(&w->qlock, NULL) != 0)
        return FCCL_ERR_NOMEM;
    if (cv_init_monotonic(&w->qcv) != 0) {
        pthread_mutex_destroy(&w->qlock);
        return FCCL_ERR_NOMEM;
    }
    if (cv_init_monotonic(&w->donecv) != 0) {
        pthread_cond_destroy(&w->qcv);
        pthread_mutex_destroy(&w->qlock);
        return FCCL_ERR_NOMEM;
    }
    return FCCL_OK;
}

void coll_worker_stop(struct coll_worker *w)
{
    pthread_mutex_lock(&w->qlock);
    w->stop = 1;
    pthread_cond_broadcast(&w->qcv);
    pthread_mutex_unlock(&w->qlock);
    if (w->started)
        pthread_join(w->thread, NULL);
    pthread_cond_destroy(&w->qcv);
    pthread_cond_destroy(&w->donecv);
    pthread_mutex_destroy(&w->qlock);
}

static void free_request(struct fccl_request *r);

static void finish(struct coll_state *st, struct fccl_request *r, int rc)
{
    if (rc < 0)
        snprintf(r->errmsg, sizeof(r->errmsg), "%s", fccl_last_error());
    pthread_mutex_lock(&st->worker.qlock);
    if (r->orphan) { /* its wait gave up on it */
        st->worker.pending--;
        pthread_cond_broadcast(&st->worker.donecv);
        pthread_mutex_unlock(&st->worker.qlock);
        free_request(r);
        return;
    }
    r->status = rc;
    r->done = 1;
    st->worker.pending--;
    pthread_cond_broadcast(&st->worker.donecv);
    pthread_mutex_unlock(&st->worker.qlock);
}

static void *worker(void *arg)
{
    struct coll_state *st = arg;
    for (;;) {
        pthread_mutex_lock(&st->worker.qlock);
        while (!st->worker.head && !st->worker.stop)
            pthread_cond_wait(&st->worker.qcv, &st->worker.qlock);
        struct fccl_request *r = st->worker.head;
        if (r) {
            st->worker.head = r->next;
            if (!st->worker.head)
                st->worker.tail = NULL;
        }
        pthread_mutex_unlock(&st->worker.qlock);
        if (!r)
            return NULL; /* stop requested and queue drained */
        finish(st, r, coll_execute(st->g, &r->args, r->seq, r->timeout_ms));
    }
}

/* ---- queued requests ---- */

/* Copy n entries of an array into the request's block at *pos. */
static const void *take(unsigned char **pos, const void *src, size_t bytes)
{
    if (!src)
        return NULL;
    unsigned char *d = *pos;
    memcpy(d, src, bytes);
    *pos += (bytes + 15) & ~(size_t)15;
    return d;
}

static size_t al16(size_t b) { return (b + 15) & ~(size_t)15; }

/* The argument arrays of a call belong to the caller: copy them. */
static struct fccl_request *make_request(struct fccl_group *g,
                                         const struct coll_args *a)
{
    size_t n = (size_t)g->size, z = sizeof(size_t);
    size_t need = (a->counts ? 2 * al16(n * z) : 0) +
                  (a->scounts ? 4 * al16(n * z) : 0) +
                  al16(a->nsend * sizeof(int)) + al16(a->nsend * sizeof(void *)) +
                  al16(a->nsend * z) + al16(a->nrecv * sizeof(int)) +
                  al16(a->nrecv * sizeof(void *)) + al16(a->nrecv * z);
    struct fccl_request *r = calloc(1, sizeof(*r));
    unsigned char *blk = need ? malloc(need) : NULL;
    if (!r || (need && !blk)) {
        free(r);
        free(blk);
        fccl_err(FCCL_ERR_NOMEM, "%s: no memory for a request", a->opname);
        return NULL;
    }
    r->g = g;
    r->kind = REQ_COLL;
    r->args = *a;
    r->owned = blk;
    unsigned char *p = blk;
    struct coll_args *c = &r->args;
    c->counts = take(&p, a->counts, n * z);
    c->displs = take(&p, a->displs, n * z);
    c->scounts = take(&p, a->scounts, n * z);
    c->sdispls = take(&p, a->sdispls, n * z);
    c->rcounts = take(&p, a->rcounts, n * z);
    c->rdispls = take(&p, a->rdispls, n * z);
    c->send_peers = take(&p, a->send_peers, a->nsend * sizeof(int));
    c->send_bufs = take(&p, a->send_bufs, a->nsend * sizeof(void *));
    c->send_counts = take(&p, a->send_counts, a->nsend * z);
    c->recv_peers = take(&p, a->recv_peers, a->nrecv * sizeof(int));
    c->recv_bufs = take(&p, a->recv_bufs, a->nrecv * sizeof(void *));
    c->recv_counts = take(&p, a->recv_counts, a->nrecv * z);
    return r;
}

static void free_request(struct fccl_request *r)
{
    free(r->owned);
    free(r);
}

/* Queue r (starting the worker on first use).  If the thread cannot be
 * started the call runs inline and r comes back already finished. */
static void enqueue(struct coll_state *st, struct fccl_request *r)
{
    pthread_mutex_lock(&st->worker.qlock);
    if (!st->worker.started) {
        if (pthread_create(&st->worker.thread, NULL, worker, st) != 0) {
            pthread_mutex_unlock(&st->worker.qlock);
            LOG_WARN("COLL", "group %s: no worker thread, running inline",
                     st->g->name);
            st->worker.pending++;
            finish(st, r, coll_execute(st->g, &r->args, r->seq,
                                       r->timeout_ms));
            return;
        }
        st->worker.started = 1;
    }
    r->next = NULL;
    if (st->worker.tail)
        st->worker.tail->next = r;
    else
        st->worker.head = r;
    st->worker.tail = r;
    st->worker.pending++;
    pthread_cond_signal(&st->worker.qcv);
    pthread_mutex_unlock(&st->worker.qlock);
}

static int idle(struct coll_state *st)
{
    if (!st->worker.started)
        return 1; /* only this thread ever submits: nothing can be queued */
    pthread_mutex_lock(&st->worker.qlock);
    int p = st->worker.pending;
    pthread_mutex_unlock(&st->worker.qlock);
    return p == 0;
}

int coll_submit(struct fccl_group *g, const struct coll_args *a,
                fccl_request_t **req)
{
    struct coll_state *st = g->state;
    int64_t ms = coll_take_timeout(g);
    uint32_t seq = g->seq++;
    if (!req && idle(st))
        return coll_execute(g, a, seq, ms);
    struct fccl_request *r = make_request(g, a);
    if (!r)
        return coll_fail(g, FCCL_ERR_NOMEM); /* peers already count seq */
    r->seq = seq;
    r->timeout_ms = ms;
    enqueue(st, r);
    if (req) {
        *req = r;
        return FCCL_OK;
    }
    return fccl_wait(r, -1);
}

/* ---- wait / test ---- */

static struct timespec to_timespec(uint64_t ns)
{
    struct timespec ts = {(time_t)(ns / 1000000000ull),
                          (long)(ns % 1000000000ull)};
    return ts;
}

static int collect(struct fccl_request *r)
{
    int rc = r->status;
    if (rc < 0)
        fccl_err(rc, "%s", r->errmsg);
    free_request(r);
    return rc;
}

/* Wait (qlock held) until r is done or the deadline; 1 if done. */
static int wait_done(struct coll_state *st, struct fccl_request *r,
                     uint64_t deadline)
{
    struct timespec ts = to_timespec(deadline);
    int w = 0;
    while (!r->done && w != ETIMEDOUT)
        w = pthread_cond_timedwait(&st->worker.donecv, &st->worker.qlock, &ts);
    return r->done;
}

#define WAIT_RELEASE_MS 10000 /* for the worker to let go, after a stop */

/* fccl_wait ran out after ms: fail the operation and the group, stop
 * the worker's wait, and take the request back from it. */
static int wait_expired(struct coll_state *st, struct fccl_request *r,
                        int64_t ms)
{
    struct fccl_group *g = r->g;
    fccl_err(FCCL_ERR_TIMEOUT, "fccl_wait gave up on it (%d operation(s) "
             "of the group still queued or running)", st->worker.pending);
    struct coll_opinfo oi = {r->args.opname, r->seq, 1, ms};
    coll_fail_op(g, FCCL_ERR_TIMEOUT, &oi);
    char msg[1024];
    snprintf(msg, sizeof(msg), "%s", fccl_last_error());
    atomic_fetch_or(&g->stop, GROUP_STOP_FAILED);
    pthread_mutex_lock(&st->worker.qlock);
    int done = wait_done(st, r, fccl_deadline_ms(WAIT_RELEASE_MS));
    if (!done)
        r->orphan = 1;
    pthread_mutex_unlock(&st->worker.qlock);
    if (done)
        free_request(r);
    else
        LOG_WARN("COLL", "%s seq %u on %s: the worker did not let go of it "
                 "within %d ms", r->args.opname, r->seq, g->name,
                 WAIT_RELEASE_MS);
    return fccl_err(FCCL_ERR_TIMEOUT, "%s", msg);
}

int fccl_wait(fccl_request_t *req, int64_t timeout_ms)
{
    if (!req)
        return fccl_err(FCCL_ERR_INVALID, "wait: request is NULL");
    if (req->kind == REQ_P2P)
        return coll_p2p_wait(req, timeout_ms);
    struct coll_state *st = req->g->state;
    pthread_mutex_lock(&st->worker.qlock);
    /* Without a timeout of its own the wait is bounded by the deadlines of
     * the collectives queued ahead (each ends by its timeout). */
    int64_t per = req->timeout_ms > req->g->timeout_ms ? req->timeout_ms
                                                       : req->g->timeout_ms;
    int64_t ms = timeout_ms >= 0
                     ? timeout_ms
                     : per * (int64_t)(st->worker.pending + 1) + 5000;
    int done = wait_done(st, req, fccl_deadline_ms(ms));
    pthread_mutex_unlock(&st->worker.qlock);
    return done ? collect(req) : wait_expired(st, req, ms);
}

int fccl_test(fccl_request_t *req, int *done)
{
    if (!req || !done)
        return fccl_err(FCCL_ERR_INVALID, "test: request or flag is NULL");
    if (req->kind == REQ_P2P)
        return coll_p2p_test(req, done);
    struct coll_state *st = req->g->state;
    pthread_mutex_lock(&st->worker.qlock);
    *done = req->done;
    pthread_mutex_unlock(&st->worker.qlock);
    return *done ? collect(req) : FCCL_OK;
}
