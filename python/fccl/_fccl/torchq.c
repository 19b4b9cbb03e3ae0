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
 * Receive from any source: an irecv from every other rank into scratch
 * buffers; the first to arrive wins, the rest are cancelled, and a
 * message that arrived meanwhile is kept aside (per peer and tag) for the
 * next receive, so none is lost and each peer's messages stay in order.
 */
#include "fcclpy.h"

#include <errno.h>
#include <pthread.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

enum tq_op {
    TQ_BARRIER, TQ_BROADCAST, TQ_REDUCE, TQ_ALL_REDUCE, TQ_ALL_GATHER,
    TQ_ALL_GATHER_V, TQ_REDUCE_SCATTER, TQ_REDUCE_SCATTER_V, TQ_GATHER,
    TQ_SCATTER, TQ_ALL_TO_ALL, TQ_ALL_TO_ALL_V, TQ_NUM_OPS
};

static const char *const op_names[TQ_NUM_OPS] = {
    "barrier", "broadcast", "reduce", "all_reduce", "all_gather",
    "all_gather_v", "reduce_scatter", "reduce_scatter_v", "gather",
    "scatter", "all_to_all", "all_to_all_v",
};

#define MB_TAG 0x7ffffff0 /* monitored_barrier's messages */
#define POLL_MIN_NS 20000L
#define POLL_MAX_NS 1000000L

typedef void (*complete_fn)(void *work, int rc, const char *msg, int src);

/* A message that arrived for a cancelled receive from any source. */
typedef struct stash {
    struct stash *next;
    int peer, tag;
    size_t len;
    void *data;
} stash;

typedef struct item {
    struct item *next;
    void *work;              /* retained FcclWork, completed once */
    int p2p;
    fccl_request_t *req;     /* NULL for a receive from any source */
    int peer, tag;           /* p2p: group rank (-1: any source) */
    uint64_t start_ns, deadline_ns; /* p2p */
    char what[256];
    /* receive from any source */
    int nany;
    fccl_request_t **any;
    void **anybuf;
    int *anypeer;
    void *dst;
    size_t len;
} item;

typedef struct {
    PyObject_HEAD
    fccl_group_t *g;
    int owned;               /* made by fccl_group_new: destroyed by close */
    int rank, size;
    pthread_mutex_t lock;
    pthread_cond_t cv;       /* new submissions, stop */
    item *head, *tail;
    int np2p;                /* queued p2p items */
    pthread_t thread;
    int started, stop, closed;
    pthread_t waiter;        /* see waiter() */
    int waiter_started;
    item *waiting;           /* the item waiter() is in fccl_wait for */
    int failed;              /* sticky */
    char failmsg[1000];
    stash *stash;
    complete_fn complete;
    size_t inline_bytes;
    int64_t timeout_ms;
    char name[128];          /* "group 'ID' (fccl name)" for messages */
} tq;

/* ---- small helpers ---- */

static uint64_t now_ns(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (uint64_t)ts.tv_sec * 1000000000ull + (uint64_t)ts.tv_nsec;
}

static struct timespec abs_in(long ns)
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

/* ---- receive from any source ---- */

static stash *stash_take(tq *q, int peer, int tag)
{
    for (stash **pp = &q->stash; *pp; pp = &(*pp)->next)
        if ((peer < 0 || (*pp)->peer == peer) && (*pp)->tag == tag) {
            stash *s = *pp;
            *pp = s->next;
            return s;
        }
    return NULL;
}

static void stash_put(tq *q, int peer, int tag, void *data, size_t len)
{
    stash *s = malloc(sizeof *s);
    if (!s) {
        free(data);
        return;
    }
    *s = (stash){NULL, peer, tag, len, data};
    stash **pp = &q->stash; /* at the end: per peer, in arrival order */
    while (*pp)
        pp = &(*pp)->next;
    *pp = s;
}

/* Test the receives of an any-source item.  Returns 1 when finished
 * (*rc, *src set), 0 while none arrived.  Under the lock. */
static int any_test(tq *q, item *it, int *rc, int *src)
{
    int winner = -1;
    for (int i = 0; i < it->nany; i++) {
        int done = 0, st = fccl_test(it->any[i], &done);
        if (!done)
            continue;
        it->any[i] = NULL;
        if (st < 0) {
            *rc = st;
            winner = -2;
            break;
        }
        if (winner < 0) {
            winner = i;
            continue;
        }
        /* a second message arrived before the others were cancelled */
        stash_put(q, it->anypeer[i], it->tag, it->anybuf[i], it->len);
        it->anybuf[i] = NULL;
    }
    if (winner == -1)
        return 0;
    for (int i = 0; i < it->nany; i++)
        if (it->any[i]) {
            int done = 0;
            fccl_test(it->any[i], &done);
            if (done && winner >= 0 && it->anybuf[i]) {
                stash_put(q, it->anypeer[i], it->tag, it->anybuf[i], it->len);
                it->anybuf[i] = NULL;
            } else if (!done) {
                fccl_cancel(it->any[i]);
            }
            it->any[i] = NULL;
        }
    if (winner >= 0) {
        memcpy(it->dst, it->anybuf[winner], it->len);
        *src = it->anypeer[winner];
        *rc = FCCL_OK;
    }
    return 1;
}

static void any_cancel(item *it)
{
    for (int i = 0; i < it->nany; i++)
        if (it->any[i]) {
            fccl_cancel(it->any[i]);
            it->any[i] = NULL;
        }
}

/* ---- the progress thread ---- */

/* One item that ended: its Work to complete outside the lock. */
typedef struct {
    item *it;
    int rc, src;
    char msg[1600]; /* failure text, when rc < 0 */
} ended;

/* Fail a p2p item (cancel what is pending) with msg.  Under the lock. */
static void p2p_abandon(item *it)
{
    if (it->req)
        fccl_cancel(it->req);
    it->req = NULL;
    any_cancel(it);
}

/* One poll round over every item, under the lock.  Fills out[] with the
 * items that ended (at most cap); returns how many. */
static int poll_round(tq *q, ended *out, int cap)
{
    int n = 0, coll_seen = 0;
    uint64_t now = now_ns();
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
            done = any_test(q, it, &rc, &src);
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
        struct timespec ts = abs_in(sleep_ns);
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
        item *it = oldest_p2p(q, now_ns());
        if (!it) {
            struct timespec ts = abs_in(100000000L);
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

typedef struct {
    int op;
    void *sbuf, *rbuf;
    size_t count;
    fccl_dtype_t dtype;
    fccl_redop_t redop;
    int root;
    size_t *c1, *c2; /* per-rank counts of the _v forms */
} coll_args;

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
        it->start_ns = now_ns();
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
static int submit_coll(tq *q, void *work, const coll_args *a)
{
    const char *what = op_names[a->op];
    pthread_mutex_lock(&q->lock);
    if (refuse(q, work, what)) {
        pthread_mutex_unlock(&q->lock);
        return FCCL_OK;
    }
    char full[256];
    snprintf(full, sizeof full, "%s on %s", what, q->name);
    int rc;
    if (!q->head && bytes_of(a) <= q->inline_bytes) {
        rc = start_coll(q, a, NULL);
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
    finish_work(q, work, rc, full, -1);
    return rc == FCCL_ERR_INVALID ? rc : FCCL_OK;
}

/* Post a send or receive (peer >= 0) or a receive from any source (peer
 * < 0) and queue it.  GIL released.  Returns as submit_coll. */
static int submit_p2p(tq *q, void *work, int is_send, void *buf, size_t count,
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
    stash *s = rc == FCCL_OK && !is_send ? stash_take(q, peer, tag) : NULL;
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
            any_cancel(it);
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

/* ---- the Python type ---- */

static PyTypeObject TorchQueueType;

static int q_live(tq *q)
{
    if (fpy_check_usable(1) < 0)
        return -1;
    if (!q->g) {
        PyErr_SetString(PyExc_RuntimeError, "fccl: the group was destroyed");
        return -1;
    }
    return 0;
}

/* Cancel queued p2p, wait for queued collectives, stop the thread. */
static void q_stop(tq *q)
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
    while (q->stash) {
        stash *s = q->stash;
        q->stash = s->next;
        free(s->data);
        free(s);
    }
}

static PyObject *q_close(tq *q, PyObject *unused)
{
    (void)unused;
    if (!q->g)
        Py_RETURN_NONE;
    Py_BEGIN_ALLOW_THREADS q_stop(q);
    Py_END_ALLOW_THREADS
    fccl_group_t *g = q->g;
    q->g = NULL;
    if (q->owned && !fpy_forked && fccl_is_initialized()) {
        int rc;
        Py_BEGIN_ALLOW_THREADS rc = fccl_group_destroy(g);
        Py_END_ALLOW_THREADS
        if (rc < 0)
            return fpy_raise(rc, "destroy_process_group");
    }
    Py_RETURN_NONE;
}

static void q_dealloc(tq *q)
{
    if (q->g && !fpy_forked) {
        Py_BEGIN_ALLOW_THREADS q_stop(q);
        Py_END_ALLOW_THREADS
        if (q->owned && fccl_is_initialized())
            fccl_group_destroy(q->g);
    }
    pthread_cond_destroy(&q->cv);
    pthread_mutex_destroy(&q->lock);
    Py_TYPE(q)->tp_free((PyObject *)q);
}

/* TorchQueue(ranks, name, complete, timeout_ms, inline_bytes): ranks None
 * for the world group (fccl_init done), else the sorted world ranks of a
 * new group of which this rank is a member (a collective of the
 * members); complete the capsule of fccl_work_complete. */
static int q_init(tq *q, PyObject *args, PyObject *kw)
{
    static char *kwlist[] = {"ranks", "name", "complete", "timeout_ms",
                             "inline_bytes", NULL};
    PyObject *ranks, *cap;
    const char *name;
    long long timeout_ms, inl;
    if (!PyArg_ParseTupleAndKeywords(args, kw, "OsOLL", kwlist, &ranks,
                                     &name, &cap, &timeout_ms, &inl))
        return -1;
    if (q->g) {
        PyErr_SetString(PyExc_RuntimeError, "TorchQueue: already set up");
        return -1;
    }
    complete_fn fn = (complete_fn)PyCapsule_GetPointer(cap,
                                                       "fccl_work_complete");
    if (!fn || fpy_check_usable(1) < 0)
        return -1;
    if (timeout_ms <= 0) {
        PyErr_SetString(PyExc_ValueError, "TorchQueue: timeout must be > 0");
        return -1;
    }
    fccl_group_t *g = NULL;
    int owned = 0;
    if (ranks == Py_None) {
        g = fccl_world();
    } else {
        size_t *r = NULL, n = 0;
        if (fpy_sizes_arg(ranks, &r, &n, "new_group", "ranks") < 0)
            return -1;
        int *ir = PyMem_Malloc((n ? n : 1) * sizeof *ir);
        if (!ir) {
            PyMem_Free(r);
            PyErr_NoMemory();
            return -1;
        }
        for (size_t i = 0; i < n; i++)
            ir[i] = (int)r[i];
        PyMem_Free(r);
        int rc;
        Py_BEGIN_ALLOW_THREADS rc = fccl_group_new(ir, n, &g);
        Py_END_ALLOW_THREADS
        PyMem_Free(ir);
        if (rc < 0) {
            fpy_raise(rc, "new_group");
            return -1;
        }
        owned = 1;
    }
    fccl_group_set_timeout(g, timeout_ms);
    q->g = g;
    q->owned = owned;
    q->rank = fccl_group_rank(g);
    q->size = fccl_group_size(g);
    q->complete = fn;
    q->timeout_ms = timeout_ms;
    q->inline_bytes = inl < 0 ? 0 : (size_t)inl;
    snprintf(q->name, sizeof q->name, "group '%s' (%s, rank %d of %d)", name,
             fccl_group_name(g), q->rank, q->size);
    return 0;
}

static PyObject *q_new(PyTypeObject *type, PyObject *args, PyObject *kw)
{
    (void)args;
    (void)kw;
    tq *q = (tq *)type->tp_alloc(type, 0);
    if (!q)
        return NULL;
    pthread_condattr_t at;
    pthread_condattr_init(&at);
    pthread_condattr_setclock(&at, CLOCK_MONOTONIC);
    if (pthread_mutex_init(&q->lock, NULL) != 0 ||
        pthread_cond_init(&q->cv, &at) != 0) {
        pthread_condattr_destroy(&at);
        Py_DECREF(q);
        return PyErr_NoMemory();
    }
    pthread_condattr_destroy(&at);
    return (PyObject *)q;
}

/* An address from _work.retain(). */
static void *work_arg(PyObject *v)
{
    void *w = PyLong_AsVoidPtr(v);
    if (!w && !PyErr_Occurred())
        PyErr_SetString(PyExc_ValueError, "TorchQueue: no Work");
    return w;
}

static int dtype_arg(PyObject *v, fccl_dtype_t *out)
{
    long d = PyLong_AsLong(v);
    if (d == -1 && PyErr_Occurred())
        return -1;
    if (d < 0 || d >= FCCL_NUM_DTYPES) {
        PyErr_Format(PyExc_ValueError, "TorchQueue: bad dtype %ld", d);
        return -1;
    }
    *out = (fccl_dtype_t)d;
    return 0;
}

static PyObject *invalid(tq *q, const char *what)
{
    char m[1300];
    snprintf(m, sizeof m, "fccl: %s on %s: %s", what, q->name,
             fccl_last_error());
    PyErr_SetString(PyExc_ValueError, m);
    return NULL;
}

/* coll(op, work, sptr, rptr, count, dtype, redop, root, counts1, counts2)
 * Pointers are addresses (tensor.data_ptr()); counts lists or None. */
static PyObject *q_coll(tq *q, PyObject *const *args, Py_ssize_t nargs)
{
    if (nargs != 10) {
        PyErr_SetString(PyExc_TypeError, "coll takes 10 arguments");
        return NULL;
    }
    if (q_live(q) < 0)
        return NULL;
    coll_args a = {0};
    long op = PyLong_AsLong(args[0]);
    void *work = work_arg(args[1]);
    a.sbuf = PyLong_AsVoidPtr(args[2]);
    a.rbuf = PyLong_AsVoidPtr(args[3]);
    a.count = PyLong_AsSize_t(args[4]);
    long redop = PyLong_AsLong(args[6]);
    a.root = (int)PyLong_AsLong(args[7]);
    if (PyErr_Occurred() || !work || dtype_arg(args[5], &a.dtype) < 0)
        return NULL;
    if (op < 0 || op >= TQ_NUM_OPS || redop < 0 || redop >= FCCL_NUM_OPS) {
        PyErr_SetString(PyExc_ValueError, "TorchQueue: bad op");
        return NULL;
    }
    a.op = (int)op;
    a.redop = (fccl_redop_t)redop;
    size_t n1 = 0, n2 = 0;
    if (fpy_sizes_arg(args[8], &a.c1, &n1, op_names[op], "counts") < 0)
        return NULL;
    if (fpy_sizes_arg(args[9], &a.c2, &n2, op_names[op], "counts") < 0) {
        PyMem_Free(a.c1);
        return NULL;
    }
    if ((a.c1 && n1 != (size_t)q->size) || (a.c2 && n2 != (size_t)q->size)) {
        PyMem_Free(a.c1);
        PyMem_Free(a.c2);
        PyErr_Format(PyExc_ValueError, "fccl: %s on %s: %d counts needed",
                     op_names[op], q->name, q->size);
        return NULL;
    }
    if (a.c1 && (a.op == TQ_ALL_GATHER_V || a.op == TQ_REDUCE_SCATTER_V)) {
        size_t total = 0;
        for (size_t i = 0; i < n1; i++)
            total += a.c1[i];
        a.count = a.op == TQ_ALL_GATHER_V ? a.c1[q->rank] : total;
    }
    int rc;
    Py_BEGIN_ALLOW_THREADS rc = submit_coll(q, work, &a);
    Py_END_ALLOW_THREADS
    PyMem_Free(a.c1);
    PyMem_Free(a.c2);
    if (rc < 0)
        return invalid(q, op_names[op]);
    Py_RETURN_NONE;
}

/* p2p(is_send, work, ptr, count, dtype, peer, tag); peer -1: any source */
static PyObject *q_p2p(tq *q, PyObject *const *args, Py_ssize_t nargs)
{
    if (nargs != 7) {
        PyErr_SetString(PyExc_TypeError, "p2p takes 7 arguments");
        return NULL;
    }
    if (q_live(q) < 0)
        return NULL;
    int is_send = PyObject_IsTrue(args[0]);
    void *work = work_arg(args[1]);
    void *buf = PyLong_AsVoidPtr(args[2]);
    size_t count = PyLong_AsSize_t(args[3]);
    fccl_dtype_t dt;
    long peer = PyLong_AsLong(args[5]), tag = PyLong_AsLong(args[6]);
    if (PyErr_Occurred() || !work || dtype_arg(args[4], &dt) < 0)
        return NULL;
    int rc;
    Py_BEGIN_ALLOW_THREADS rc = submit_p2p(q, work, is_send, buf, count, dt,
                                           (int)peer, (int)tag);
    Py_END_ALLOW_THREADS
    if (rc < 0)
        return invalid(q, is_send ? "send" : "recv");
    Py_RETURN_NONE;
}

/* ---- monitored barrier ---- */

/* Wait until nothing is queued (each operation ends by its deadline). */
static void drain(tq *q)
{
    while (q->head) {
        struct timespec ts = abs_in(POLL_MAX_NS);
        pthread_cond_timedwait(&q->cv, &q->lock, &ts);
    }
}

/* Rank 0: receive one byte from every other rank within the deadline.
 * Fills missing[] (group ranks) and returns how many; <0 on error. */
static int mb_collect(tq *q, uint64_t deadline, int wait_all, int *missing)
{
    int n = q->size, nmiss = 0, rc = FCCL_OK;
    fccl_request_t **r = calloc((size_t)n, sizeof *r);
    unsigned char *b = calloc((size_t)n, 1);
    if (!r || !b) {
        free(r);
        free(b);
        return fccl_set_error(FCCL_ERR_NOMEM, "no memory");
    }
    for (int p = 1; p < n && rc == FCCL_OK; p++)
        rc = fccl_irecv(&b[p], 1, FCCL_UINT8, p, MB_TAG, q->g, &r[p]);
    int left = n - 1;
    while (rc == FCCL_OK && left > 0 && now_ns() < deadline) {
        for (int p = 1; p < n; p++) {
            int done = 0;
            if (r[p] && (rc = fccl_test(r[p], &done)) == FCCL_OK && done) {
                r[p] = NULL;
                left--;
            }
            if (rc < 0) {
                r[p] = NULL;
                break;
            }
        }
        if (left > 0) {
            struct timespec ts = {0, 200000};
            nanosleep(&ts, NULL);
        }
    }
    for (int p = 1; p < n; p++)
        if (r[p]) {
            fccl_cancel(r[p]);
            if (wait_all || nmiss == 0)
                missing[nmiss++] = p;
        }
    free(r);
    free(b);
    return rc < 0 ? rc : nmiss;
}

/* A p2p wait bounded by deadline, by tests (so a timeout keeps nothing
 * pending).  Returns the status, FCCL_ERR_TIMEOUT if it passed. */
static int mb_wait(fccl_request_t *r, uint64_t deadline)
{
    for (;;) {
        int done = 0, rc = fccl_test(r, &done);
        if (done || rc < 0)
            return rc;
        if (now_ns() >= deadline) {
            fccl_cancel(r);
            return FCCL_ERR_TIMEOUT;
        }
        struct timespec ts = {0, 200000};
        nanosleep(&ts, NULL);
    }
}

/* monitored_barrier(timeout_ms, wait_all) -> None; raises RuntimeError
 * naming the ranks that did not arrive (rank 0) or that rank 0 did not
 * answer (the others). */
static PyObject *q_monitored_barrier(tq *q, PyObject *args)
{
    long long timeout_ms;
    int wait_all;
    if (!PyArg_ParseTuple(args, "Lp", &timeout_ms, &wait_all) || q_live(q) < 0)
        return NULL;
    int *missing = PyMem_Malloc((size_t)q->size * sizeof *missing);
    if (!missing)
        return PyErr_NoMemory();
    int rc = FCCL_OK, nmiss = 0;
    unsigned char one = 1;
    Py_BEGIN_ALLOW_THREADS
    pthread_mutex_lock(&q->lock);
    drain(q);
    uint64_t deadline = now_ns() + (uint64_t)timeout_ms * 1000000ull;
    fccl_request_t *r = NULL;
    if (q->rank == 0) {
        nmiss = rc = mb_collect(q, deadline, wait_all, missing);
        for (int p = 1; rc == 0 && p < q->size; p++)
            if ((rc = fccl_isend(&one, 1, FCCL_UINT8, p, MB_TAG, q->g, &r)) == 0)
                rc = mb_wait(r, deadline + 1000000000ull);
    } else if ((rc = fccl_isend(&one, 1, FCCL_UINT8, 0, MB_TAG, q->g, &r)) == 0 &&
               (rc = mb_wait(r, deadline)) == 0 &&
               (rc = fccl_irecv(&one, 1, FCCL_UINT8, 0, MB_TAG, q->g, &r)) == 0) {
        rc = mb_wait(r, deadline + 1000000000ull);
    }
    pthread_mutex_unlock(&q->lock);
    Py_END_ALLOW_THREADS
    if (rc > 0) {
        char m[1400];
        int k = snprintf(m, sizeof m, "fccl: monitored_barrier on %s: Rank%s",
                         q->name, nmiss > 1 ? "s" : "");
        for (int i = 0; i < nmiss && k < (int)sizeof m - 16; i++)
            k += snprintf(m + k, sizeof m - (size_t)k, "%s %d", i ? "," : "",
                          missing[i]);
        snprintf(m + k, sizeof m - (size_t)k, " failed to pass "
                 "monitoredBarrier in %lld ms", timeout_ms);
        PyMem_Free(missing);
        PyErr_SetString(PyExc_RuntimeError, m);
        return NULL;
    }
    PyMem_Free(missing);
    if (rc == FCCL_ERR_TIMEOUT) {
        PyErr_Format(PyExc_RuntimeError, "fccl: monitored_barrier on %s: "
                     "rank 0 did not answer within %lld ms", q->name,
                     timeout_ms);
        return NULL;
    }
    if (rc < 0)
        return fpy_raise(rc, "monitored_barrier");
    Py_RETURN_NONE;
}

static PyObject *q_get_rank(tq *q, void *c)
{
    (void)c;
    return PyLong_FromLong(q->rank);
}

static PyObject *q_get_size(tq *q, void *c)
{
    (void)c;
    return PyLong_FromLong(q->size);
}

static PyObject *q_get_fccl_name(tq *q, void *c)
{
    (void)c;
    return PyUnicode_FromString(q->g ? fccl_group_name(q->g) : "");
}

static PyObject *q_get_pending(tq *q, void *c)
{
    (void)c;
    int n = 0;
    Py_BEGIN_ALLOW_THREADS
    pthread_mutex_lock(&q->lock);
    for (item *it = q->head; it; it = it->next)
        n++;
    pthread_mutex_unlock(&q->lock);
    Py_END_ALLOW_THREADS
    return PyLong_FromLong(n);
}

static PyMethodDef q_methods[] = {
    {"coll", (PyCFunction)(void (*)(void))q_coll, METH_FASTCALL,
     "coll(op, work, sptr, rptr, count, dtype, redop, root, counts1, "
     "counts2)"},
    {"p2p", (PyCFunction)(void (*)(void))q_p2p, METH_FASTCALL,
     "p2p(is_send, work, ptr, count, dtype, peer, tag)"},
    {"monitored_barrier", (PyCFunction)q_monitored_barrier, METH_VARARGS,
     "monitored_barrier(timeout_ms, wait_all)"},
    {"close", (PyCFunction)q_close, METH_NOARGS,
     "close(): cancel queued p2p, wait for queued collectives, destroy "
     "the group if the queue made it"},
    {NULL, NULL, 0, NULL},
};

static PyGetSetDef q_getset[] = {
    {"rank", (getter)q_get_rank, NULL, "group rank", NULL},
    {"size", (getter)q_get_size, NULL, "group size", NULL},
    {"fccl_name", (getter)q_get_fccl_name, NULL, "fccl's group name", NULL},
    {"pending", (getter)q_get_pending, NULL, "queued operations", NULL},
    {NULL, NULL, NULL, NULL, NULL},
};

static PyTypeObject TorchQueueType = {
    PyVarObject_HEAD_INIT(NULL, 0)
    .tp_name = "fccl._fccl.TorchQueue",
    .tp_basicsize = sizeof(tq),
    .tp_dealloc = (destructor)q_dealloc,
    .tp_flags = Py_TPFLAGS_DEFAULT,
    .tp_doc = "fccl.torch's per-group queue (see torchq.c)",
    .tp_methods = q_methods,
    .tp_getset = q_getset,
    .tp_init = (initproc)q_init,
    .tp_new = q_new,
};

PyMethodDef fpy_torchq_methods[] = {
    {NULL, NULL, 0, NULL},
};

int fpy_torchq_add_types(PyObject *m)
{
    if (PyType_Ready(&TorchQueueType) < 0 ||
        PyModule_AddObjectRef(m, "TorchQueue", (PyObject *)&TorchQueueType) < 0)
        return -1;
    for (int i = 0; i < TQ_NUM_OPS; i++) {
        char name[40];
        snprintf(name, sizeof name, "TQ_%s", op_names[i]);
        for (char *p = name; *p; p++)
            if (*p >= 'a' && *p <= 'z')
                *p = (char)(*p - 'a' + 'A');
        if (PyModule_AddIntConstant(m, name, i) < 0)
            return -1;
    }
    return PyModule_AddIntConstant(m, "TQ_MB_TAG", MB_TAG);
}
