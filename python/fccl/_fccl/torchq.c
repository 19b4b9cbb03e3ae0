/*
 * TorchQueue: the engine under fccl.torch's ProcessGroup, one per torch
 * group.  It owns (or, for the default group, borrows) an fccl group,
 * starts the operations torch asks for, and completes their Work objects
 * (fccl/torch/_work.cpp) when they end, all without the GIL.
 *
 * Submitting.  Every call of a torch group is serialised on the queue's
 * lock (torch calls a group from several threads: autograd hooks, future
 * callbacks), taken with the GIL released.  A collective of at most
 * `inline_bytes` on an idle queue runs right there on the calling thread
 * (no thread hand-off on the latency path) and its Work is completed
 * before the call returns; anything else is started with the library's
 * asynchronous form (collectives go to the group's worker thread in call
 * order, point-to-point operations are posted to the transport at once,
 * so an irecv never waits behind a collective) and queued here.
 *
 * Progress.  One thread per queue, started by the first queued operation,
 * finishes queued operations and completes their Work.  While only
 * collectives are queued it waits for the oldest with fccl_wait (the
 * library's worker drives the transport meanwhile, point-to-point
 * traffic included).  When point-to-point operations are queued (the
 * library drives those only inside fccl_wait/fccl_test) it polls every
 * queued operation with fccl_test, sleeping 20 us doubling to 1 ms
 * between rounds that moved nothing, woken early by a new submission.
 * Collectives are completed in their order; point-to-point operations
 * whenever they end.  The thread never takes the GIL: completing a Work
 * marks its future, whose C++ callbacks run on this thread and whose
 * Python callbacks take the GIL themselves.
 *
 * Concurrency with the library.  fccl's rule is one thread at a time per
 * group.  Here the submitting thread starts operations while the progress
 * thread waits for earlier ones; the library allows exactly this split
 * for collectives (a wait touches only the request and the worker queue,
 * under the worker's lock) and the transport serialises point-to-point
 * posting and testing on its own lock.  Tests (fccl_test) run under the
 * queue's lock, so they never overlap a submission.
 *
 * Deadlines and failures.  Collectives end by the group timeout (set to
 * torch's timeout) inside the library, which names the ranks that did
 * not answer and notices dead peers.  A queued point-to-point operation
 * gets the same timeout from its start: past it, it is cancelled and
 * fails naming the operation, the group and the peer.  The first failure
 * sticks: every queued point-to-point operation fails with it, and every
 * later call fails at once; so does a failure of the group that the
 * library learnt of without a call here (fccl_group_failed_rank: a
 * member's failure notice, a dead peer).  close() (the group destroyed, or the
 * process exiting) cancels queued point-to-point operations and waits
 * for queued collectives (each ends by the group timeout).
 *
 * Files: torchq.h (the shared types), torchq.c (this: the queue, its
 * threads, starting operations), torchq_p2p.c (receive from any source,
 * the monitored barrier), torchq_py.c (the Python type).
 */
#include "torchq.h"

#include <errno.h>
#include <pthread.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

const char *const tq_op_names[TQ_NUM_OPS] = {
    "barrier", "broadcast", "reduce", "all_reduce", "all_gather",
    "all_gather_v", "reduce_scatter", "reduce_scatter_v", "gather",
    "scatter", "all_to_all", "all_to_all_v",
};

/* ---- small helpers ---- */

uint64_t tq_now_ns(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (uint64_t)ts.tv_sec * 1000000000ull + (uint64_t)ts.tv_nsec;
}

struct timespec tq_abs_in(long ns)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    ts.tv_nsec += ns;
    while (ts.tv_nsec >= 1000000000L) {
        ts.tv_sec++;
        ts.tv_nsec -= 1000000000L;
    }
    return ts;
}

/* Complete a Work with the library's status; msg: the caller's text, or
 * the thread's fccl_last_error() for a failure. */
static void finish_work(tq *q, void *work, int rc, const char *what, int src)
{
    char msg[1400];
    if (rc < 0)
        snprintf(msg, sizeof msg, "fccl: %s failed: %s (%s)", what,
                 fccl_last_error(), fccl_strerror(rc));
    else
        msg[0] = '\0';
    q->complete(work, rc, msg, src);
}

static void free_item(item *it)
{
    for (int i = 0; i < it->nany; i++)
        free(it->anybuf ? it->anybuf[i] : NULL);
    free(it->anybuf);
    free(it->any);
    free(it->anypeer);
    free(it);
}

/* Unlink `it` (whose predecessor is prev, NULL for the head). */
static void unlink_item(tq *q, item *prev, item *it)
{
    if (prev)
        prev->next = it->next;
    else
        q->head = it->next;
    if (q->tail == it)
        q->tail = prev;
    if (it->p2p)
        q->np2p--;
}

/* Make the failure stick: later calls fail with this text at once. */
static void stick(tq *q, const char *msg)
{
    if (!q->failed) {
        size_t n = strlen(msg);
        if (n >= sizeof q->failmsg)
            n = sizeof q->failmsg - 1;
        memcpy(q->failmsg, msg, n);
        q->failmsg[n] = '\0';
        q->failed = 1;
    }
}

/* ---- the progress thread ---- */

/* Fail a p2p item (cancel what is pending) with msg.  Under the lock. */
static void p2p_abandon(item *it)
{
    if (it->req)
        fccl_cancel(it->req);
    it->req = NULL;
    tq_any_cancel(it);
}

/* One poll round over every item, under the lock.  Fills out[] with the
 * items that ended (at most cap); returns how many. */
static int poll_round(tq *q, ended *out, int cap)
{
    int n = 0, coll_seen = 0;
    uint64_t now = tq_now_ns();
    item *prev = NULL, *it = q->head;
    while (it && n < cap) {
        item *next = it->next;
        int done = 0, rc = FCCL_OK, src = -1;
        const char *why = NULL;
        char buf[400];
        if (it == q->waiting) {
            prev = it; /* waiter() owns it */
            it = next;
            continue;
        }
        if (!it->p2p) {
            /* collectives end in order: test only the oldest */
            if (!coll_seen) {
                coll_seen = 1;
                rc = fccl_test(it->req, &done);
            }
        } else if (it->peer < 0) {
            done = tq_any_test(q, it, &rc, &src);
        } else {
            rc = fccl_test(it->req, &done);
            if (done)
                src = it->peer;
        }
        if (!done && it->p2p && now >= it->deadline_ns) {
            snprintf(buf, sizeof buf, "fccl: %s timed out after %lld ms "
                     "(no matching %s from %s)", it->what,
                     (long long)q->timeout_ms,
                     it->peer < 0 ? "send" : "operation",
                     it->peer < 0 ? "any rank" : "the peer");
            p2p_abandon(it);
            done = 1;
            rc = FCCL_ERR_TIMEOUT;
            why = buf;
        }
        if (done) {
            out[n].it = it;
            out[n].rc = rc;
            out[n].src = src;
            if (rc < 0) {
                if (why)
                    snprintf(out[n].msg, sizeof out[n].msg, "%s", why);
                else
                    snprintf(out[n].msg, sizeof out[n].msg,
                             "fccl: %s failed: %s (%s)", it->what,
                             fccl_last_error(), fccl_strerror(rc));
                stick(q, out[n].msg);
            }
            n++;
            unlink_item(q, prev, it);
        } else {
            prev = it;
        }
        it = next;
    }
    /* The group failed elsewhere (a member's failure notice, a dead peer
     * seen by the library's heartbeat thread): a queued send or receive
     * would otherwise wait for its deadline. */
    int culprit = q->failed ? -1 : fccl_group_failed_rank(q->g);
    if (culprit >= 0) {
        char m[200];
        snprintf(m, sizeof m, "fccl: %s failed: world rank %d failed "
                 "(fccl_group_failed_rank)", q->name, culprit);
        stick(q, m);
    }
    /* a failure sticks: fail every queued p2p operation with it */
    if (q->failed)
        for (prev = NULL, it = q->head; it && n < cap; it = it->next) {
            if (!it->p2p || it == q->waiting) {
                prev = it;
                continue;
            }
            p2p_abandon(it);
            out[n].it = it;
            out[n].rc = FCCL_ERR_PEER;
            out[n].src = -1;
            snprintf(out[n].msg, sizeof out[n].msg, "fccl: %s: the group "
                     "failed earlier: %s", it->what, q->failmsg);
            n++;
            unlink_item(q, prev, it);
        }
    return n;
}

static void complete_ended(tq *q, ended *e, int n)
{
    for (int i = 0; i < n; i++) {
        q->complete(e[i].it->work, e[i].rc, e[i].rc < 0 ? e[i].msg : "",
                    e[i].src);
        free_item(e[i].it);
    }
}

/* Only collectives queued: wait for the oldest without the lock. */
static void wait_oldest(tq *q, item *it)
{
    pthread_mutex_unlock(&q->lock);
    int rc = fccl_wait(it->req, -1);
    char msg[1400] = "";
    if (rc < 0)
        snprintf(msg, sizeof msg, "fccl: %s failed: %s (%s)", it->what,
                 fccl_last_error(), fccl_strerror(rc));
    pthread_mutex_lock(&q->lock);
    unlink_item(q, NULL, it); /* still the head: only we remove items */
    if (rc < 0)
        stick(q, msg);
    pthread_mutex_unlock(&q->lock);
    q->complete(it->work, rc, msg, -1);
    free_item(it);
    pthread_mutex_lock(&q->lock);
}

static void *progress(void *arg)
{
    tq *q = arg;
    ended *e = malloc(64 * sizeof *e);
    long sleep_ns = POLL_MIN_NS;
    pthread_mutex_lock(&q->lock);
    for (;;) {
        while (!q->head && !q->stop)
            pthread_cond_wait(&q->cv, &q->lock);
        if (!q->head)
            break; /* stop, and nothing left */
        if (q->np2p == 0) {
            wait_oldest(q, q->head);
            sleep_ns = POLL_MIN_NS;
            continue;
        }
        int n = e ? poll_round(q, e, 64) : 0;
        if (n > 0) {
            pthread_mutex_unlock(&q->lock);
            complete_ended(q, e, n);
            pthread_mutex_lock(&q->lock);
            sleep_ns = POLL_MIN_NS;
            continue;
        }
        struct timespec ts = tq_abs_in(sleep_ns);
        pthread_cond_timedwait(&q->cv, &q->lock, &ts);
        sleep_ns = sleep_ns * 2 > POLL_MAX_NS ? POLL_MAX_NS : sleep_ns * 2;
    }
    pthread_mutex_unlock(&q->lock);
    free(e);
    return NULL;
}

/* The waiter: fccl_test notices neither a dead peer nor an exited local
 * process (only the library's blocking waits check liveness), so a
 * receive from a rank that died would fail only at its deadline.  This
 * second thread takes the oldest send or receive that has been queued
 * for WAIT_AFTER_NS and waits for it with fccl_wait(req, -1), which fails
 * within FCCL_PEER_TIMEOUT (or at once for an exited local process),
 * naming the peer; the progress thread keeps polling the others, so later
 * operations are still reported as they end.  Started with the first
 * queued send or receive. */
#define WAIT_AFTER_NS 500000000ull

static item *oldest_p2p(tq *q, uint64_t now)
{
    for (item *it = q->head; it; it = it->next)
        if (it->p2p && it->peer >= 0 && it->req &&
            it->start_ns + WAIT_AFTER_NS <= now)
            return it;
    return NULL;
}

static void *waiter(void *arg)
{
    tq *q = arg;
    pthread_mutex_lock(&q->lock);
    while (!q->stop) {
        item *it = oldest_p2p(q, tq_now_ns());
        if (!it) {
            struct timespec ts = tq_abs_in(100000000L);
            pthread_cond_timedwait(&q->cv, &q->lock, &ts);
            continue;
        }
        q->waiting = it;
        pthread_mutex_unlock(&q->lock);
        int rc = fccl_wait(it->req, -1); /* frees the request */
        char msg[1600] = "";
        if (rc < 0)
            snprintf(msg, sizeof msg, "fccl: %s failed: %s (%s)", it->what,
                     fccl_last_error(), fccl_strerror(rc));
        pthread_mutex_lock(&q->lock);
        item *prev = NULL;
        for (item *x = q->head; x && x != it; x = x->next)
            prev = x;
        unlink_item(q, prev, it);
        q->waiting = NULL;
        if (rc < 0)
            stick(q, msg);
        pthread_cond_broadcast(&q->cv);
        pthread_mutex_unlock(&q->lock);
        q->complete(it->work, rc, msg, rc < 0 ? -1 : it->peer);
        free_item(it);
        pthread_mutex_lock(&q->lock);
    }
    pthread_mutex_unlock(&q->lock);
    return NULL;
}

/* Queue an item (the lock held); starts the thread on first use.  Returns
 * 0, or -1 if the thread could not be started (the item is not queued). */
static int enqueue(tq *q, item *it)
{
    if (!q->started) {
        if (pthread_create(&q->thread, NULL, progress, q) != 0)
            return -1;
        q->started = 1;
    }
    if (it->p2p && !q->waiter_started &&
        pthread_create(&q->waiter, NULL, waiter, q) == 0)
        q->waiter_started = 1; /* without it: failures at the deadline */
    it->next = NULL;
    if (q->tail)
        q->tail->next = it;
    else
        q->head = it;
    q->tail = it;
    if (it->p2p)
        q->np2p++;
    pthread_cond_broadcast(&q->cv); /* the progress thread and waiter() */
    return 0;
}

/* ---- starting operations ---- */

static size_t bytes_of(const coll_args *a)
{
    return a->count * fccl_dtype_size(a->dtype);
}

static int start_coll(tq *q, const coll_args *a, fccl_request_t **req)
{
    fccl_group_t *g = q->g;
    switch (a->op) {
    case TQ_BARRIER: return fccl_barrier(g, req);
    case TQ_BROADCAST:
        return fccl_broadcast(a->rbuf, a->count, a->dtype, a->root, g, req);
    case TQ_REDUCE:
        return fccl_reduce(a->sbuf, a->rbuf, a->count, a->dtype, a->redop,
                           a->root, g, req);
    case TQ_ALL_REDUCE:
        return fccl_all_reduce(a->sbuf, a->rbuf, a->count, a->dtype, a->redop,
                               g, req);
    case TQ_ALL_GATHER:
        return fccl_all_gather(a->sbuf, a->rbuf, a->count, a->dtype, g, req);
    case TQ_ALL_GATHER_V:
        return fccl_all_gather_v(a->sbuf, a->count, a->rbuf, a->c1, a->dtype,
                                 g, req);
    case TQ_REDUCE_SCATTER:
        return fccl_reduce_scatter(a->sbuf, a->rbuf, a->count, a->dtype,
                                   a->redop, g, req);
    case TQ_REDUCE_SCATTER_V:
        return fccl_reduce_scatter_v(a->sbuf, a->rbuf, a->c1, a->dtype,
                                     a->redop, g, req);
    case TQ_GATHER:
        return fccl_gather(a->sbuf, a->rbuf, a->count, a->dtype, a->root, g,
                           req);
    case TQ_SCATTER:
        return fccl_scatter(a->sbuf, a->rbuf, a->count, a->dtype, a->root, g,
                            req);
    case TQ_ALL_TO_ALL:
        return fccl_all_to_all(a->sbuf, a->rbuf, a->count, a->dtype, g, req);
    case TQ_ALL_TO_ALL_V:
        return fccl_all_to_all_v(a->sbuf, a->c1, a->rbuf, a->c2, a->dtype, g,
                                 req);
    default:
        return fccl_set_error(FCCL_ERR_INVALID, "unknown operation");
    }
}

static item *new_item(tq *q, void *work, int p2p, const char *what)
{
    item *it = calloc(1, sizeof *it);
    if (!it)
        return NULL;
    it->work = work;
    it->p2p = p2p;
    snprintf(it->what, sizeof it->what, "%s on %s", what, q->name);
    if (p2p) {
        it->start_ns = tq_now_ns();
        it->deadline_ns = it->start_ns + (uint64_t)q->timeout_ms * 1000000ull;
    }
    return it;
}

/* The sticky failure or a closed queue: fail the Work at once.  Under
 * the lock.  Returns 1 if the call must not start. */
static int refuse(tq *q, void *work, const char *what)
{
    if (!q->failed && !q->closed)
        return 0;
    char msg[1500];
    if (q->closed)
        snprintf(msg, sizeof msg, "fccl: %s on %s: the group was destroyed",
                 what, q->name);
    else
        snprintf(msg, sizeof msg, "fccl: %s on %s: the group failed "
                 "earlier: %s", what, q->name, q->failmsg);
    q->complete(work, q->closed ? FCCL_ERR_STATE : FCCL_ERR_PEER, msg, -1);
    return 1;
}

/* Run or queue a collective.  GIL released.  Returns FCCL_OK (the Work is
 * completed or queued) or FCCL_ERR_INVALID (argument error: the Work was
 * failed too; the caller raises). */
int tq_submit_coll(tq *q, void *work, const coll_args *a)
{
    const char *what = tq_op_names[a->op];
    pthread_mutex_lock(&q->lock);
    if (refuse(q, work, what)) {
        pthread_mutex_unlock(&q->lock);
        return FCCL_OK;
    }
    char full[256] = ""; /* the operation's name, made only on failure */
    int rc;
    if (!q->head && bytes_of(a) <= q->inline_bytes) {
        rc = start_coll(q, a, NULL);
        if (rc < 0)
            snprintf(full, sizeof full, "%s on %s", what, q->name);
        if (rc < 0 && rc != FCCL_ERR_INVALID) {
            char m[1400];
            snprintf(m, sizeof m, "fccl: %s failed: %s (%s)", full,
                     fccl_last_error(), fccl_strerror(rc));
            stick(q, m);
        }
        pthread_mutex_unlock(&q->lock);
        finish_work(q, work, rc, full, -1);
        return rc == FCCL_ERR_INVALID ? rc : FCCL_OK;
    }
    item *it = new_item(q, work, 0, what);
    fccl_request_t *req = NULL;
    rc = it ? start_coll(q, a, &req) : FCCL_ERR_NOMEM;
    if (rc >= 0) {
        it->req = req;
        if (enqueue(q, it) == 0) {
            pthread_mutex_unlock(&q->lock);
            return FCCL_OK;
        }
        /* no thread: finish it here */
        rc = fccl_wait(req, -1);
    }
    free(it);
    pthread_mutex_unlock(&q->lock);
    snprintf(full, sizeof full, "%s on %s", what, q->name);
    finish_work(q, work, rc, full, -1);
    return rc == FCCL_ERR_INVALID ? rc : FCCL_OK;
}

/* Post a send or receive (peer >= 0) or a receive from any source (peer
 * < 0) and queue it.  GIL released.  Returns as tq_submit_coll. */
int tq_submit_p2p(tq *q, void *work, int is_send, void *buf, size_t count,
                      fccl_dtype_t dt, int peer, int tag)
{
    char what[64];
    if (peer < 0)
        snprintf(what, sizeof what, "recv from any rank (tag %d)", tag);
    else
        snprintf(what, sizeof what, "%s rank %d (tag %d)",
                 is_send ? "send to" : "recv from", peer, tag);
    size_t len = count * fccl_dtype_size(dt);
    pthread_mutex_lock(&q->lock);
    if (refuse(q, work, what)) {
        pthread_mutex_unlock(&q->lock);
        return FCCL_OK;
    }
    item *it = new_item(q, work, 1, what);
    int rc = it ? FCCL_OK : FCCL_ERR_NOMEM;
    char full[256];
    snprintf(full, sizeof full, "%s on %s", what, q->name);
    if (it) {
        it->peer = peer;
        it->tag = tag;
        it->dst = buf;
        it->len = len;
    }
    stash *s = rc == FCCL_OK && !is_send ? tq_stash_take(q, peer, tag) : NULL;
    if (s) { /* kept aside by an earlier receive from any source */
        pthread_mutex_unlock(&q->lock);
        if (s->len == len)
            memcpy(buf, s->data, len);
        else
            rc = fccl_set_error(FCCL_ERR_PROTOCOL, "a message of another "
                                "size arrived");
        finish_work(q, work, rc, full, s->peer);
        free(s->data);
        free(s);
        free(it);
        return FCCL_OK;
    }
    if (rc == FCCL_OK && peer >= 0) {
        rc = is_send ? fccl_isend(buf, count, dt, peer, tag, q->g, &it->req)
                     : fccl_irecv(buf, count, dt, peer, tag, q->g, &it->req);
    } else if (rc == FCCL_OK) {
        int n = q->size - 1;
        it->any = calloc((size_t)(n ? n : 1), sizeof *it->any);
        it->anybuf = calloc((size_t)(n ? n : 1), sizeof *it->anybuf);
        it->anypeer = calloc((size_t)(n ? n : 1), sizeof *it->anypeer);
        rc = it->any && it->anybuf && it->anypeer ? FCCL_OK : FCCL_ERR_NOMEM;
        if (n == 0 && rc == FCCL_OK)
            rc = fccl_set_error(FCCL_ERR_INVALID, "no other rank in the group");
        for (int p = 0, i = 0; rc == FCCL_OK && p < q->size; p++) {
            if (p == q->rank)
                continue;
            it->anypeer[i] = p;
            if (!(it->anybuf[i] = malloc(len ? len : 1)))
                rc = FCCL_ERR_NOMEM;
            else
                rc = fccl_irecv(it->anybuf[i], count, dt, p, tag, q->g,
                                &it->any[i]);
            it->nany = ++i;
        }
        if (rc < 0)
            tq_any_cancel(it);
    }
    if (rc == FCCL_OK && enqueue(q, it) == 0) {
        pthread_mutex_unlock(&q->lock);
        return FCCL_OK;
    }
    if (rc == FCCL_OK) { /* no thread */
        p2p_abandon(it);
        rc = fccl_set_error(FCCL_ERR_NOMEM, "no progress thread");
    }
    pthread_mutex_unlock(&q->lock);
    finish_work(q, work, rc, full, -1);
    if (it)
        free_item(it);
    return rc == FCCL_ERR_INVALID ? rc : FCCL_OK;
}

/* Cancel queued p2p, wait for queued collectives, stop the thread. */
void tq_stop(tq *q)
{
    pthread_mutex_lock(&q->lock);
    q->closed = 1;
    ended *e = malloc(64 * sizeof *e);
    int n = 0;
    item *prev = NULL;
    for (item *it = q->head, *next; it; it = next) {
        next = it->next;
        if (!it->p2p || !e || n >= 64) {
            prev = it;
            continue;
        }
        p2p_abandon(it);
        e[n].it = it;
        e[n].rc = FCCL_ERR_STATE;
        e[n].src = -1;
        snprintf(e[n].msg, sizeof e[n].msg, "fccl: %s: the group was "
                 "destroyed", it->what);
        n++;
        unlink_item(q, prev, it);
    }
    q->stop = 1;
    /* waiter() may be in fccl_wait for a receive nobody will send: only
     * an abort ends that before the group timeout.  The group is being
     * destroyed (or the process is exiting) anyway. */
    if (q->waiting)
        fccl_group_abort(q->g);
    pthread_cond_broadcast(&q->cv);
    pthread_mutex_unlock(&q->lock);
    if (e)
        complete_ended(q, e, n);
    free(e);
    if (q->waiter_started)
        pthread_join(q->waiter, NULL);
    q->waiter_started = 0;
    if (q->started)
        pthread_join(q->thread, NULL);
    q->started = 0;
    tq_stash_free_all(q);
}
