/*
 * The transport's wire protocol: how a request becomes tagged messages,
 * how completions are credited, and the retry queues.  All functions run
 * under tp->lock.
 *
 * One request is usually one tagged message.  It becomes several when
 *  - it is longer than the endpoint's max_msg_size (or opts.max_chunk):
 *    "chunked", each chunk posted when the previous one completed; or
 *  - it is an shm send above the inject size while another such send is
 *    still unmatched: "eager", fi_tinject pieces of the inject size.
 *    Why: shm reports the completions of its large (CMA/SAR) sends in the
 *    order they were posted, so one unmatched large send holds back the
 *    completion of every later one from the process, to any peer.  With
 *    groups driven from several threads that closes a wait cycle (thread A
 *    waits for a send that is done but unreported; the peer that would
 *    match the older send waits on thread A's group).  So at most one
 *    large shm send per endpoint is in flight; the others travel as
 *    injected pieces, which complete at once and never wait for a reply.
 * Pieces carry TP_CHUNK_BIT in the tag's reserved bits, the final one also
 * TP_LAST_BIT.  A receive always matches with those two bits ignored and
 * posts (the rest of) its buffer; a completion with CHUNK but not LAST
 * asks for the next piece.  So the receiver never needs to know how the
 * sender split the message, and a receive may always be longer than the
 * message.  Pieces of two messages on the same (peer, tag) could mix: such
 * a pair must not be in flight at once (collective tags never are).
 *
 * Retry queues: a post refused for lack of queue entries (-FI_EAGAIN, or
 * -FI_ENOMEM from shm's receive queue) waits in a FIFO: per peer for
 * sends (one congested peer must not hold back the others), per endpoint
 * for receives (their queue entries are shared).  FIFO keeps per-tag
 * order; progress drains them.
 */
#include <errno.h>
#include <string.h>

#include "err.h"
#include "log.h"
#include "transport_int.h"

#define TP_CHUNK_BIT (1ull << 63)
#define TP_LAST_BIT (1ull << 62)
#define TP_POST_TRIES 8 /* busy retries (with progress) before queueing */

enum { MODE_SINGLE = 0, MODE_CHUNKED, MODE_EAGER };

size_t tp_chunk_limit(const struct fccl_tp *tp, const struct tp_ep *e)
{
    size_t lim = e->max_msg;
    if (tp->max_chunk && tp->max_chunk < lim)
        lim = tp->max_chunk;
    return lim ? lim : 1;
}

static size_t min_sz(size_t a, size_t b) { return a < b ? a : b; }

static int busy(ssize_t rc)
{
    return rc == -FI_EAGAIN || rc == -FI_ENOMEM;
}

void tp_wire_finish(struct fccl_tp *tp, struct tp_req *r, int status)
{
    struct tp_ep *e = &tp->eps[r->ep];
    if (e->big_owner == r)
        e->big_owner = NULL;
    tp_mr_put(e, r->mr);
    r->mr = NULL;
    r->status = status;
    atomic_store_explicit(&r->state, status ? TP_REQ_ERROR : TP_REQ_DONE,
                          memory_order_release);
}

/* ------------------------------------------------------------------ */
/* Retry queues                                                       */
/* ------------------------------------------------------------------ */

static struct tp_req **q_head(struct fccl_tp *tp, struct tp_req *r)
{
    return r->is_send ? &tp->peers[r->peer].txq_head
                      : &tp->eps[r->ep].rxq_head;
}

static struct tp_req **q_tail(struct fccl_tp *tp, struct tp_req *r)
{
    return r->is_send ? &tp->peers[r->peer].txq_tail
                      : &tp->eps[r->ep].rxq_tail;
}

static void q_push(struct fccl_tp *tp, struct tp_req *r, int front)
{
    struct tp_req **head = q_head(tp, r), **tail = q_tail(tp, r);
    r->queued = 1;
    if (r->is_send)
        tp->eps[r->ep].txq_count++;
    if (front) {
        r->next = *head;
        *head = r;
        if (!*tail)
            *tail = r;
        return;
    }
    r->next = NULL;
    if (*tail)
        (*tail)->next = r;
    else
        *head = r;
    *tail = r;
}

static void q_pop(struct fccl_tp *tp, struct tp_req *r)
{
    struct tp_req **head = q_head(tp, r), **tail = q_tail(tp, r);
    struct tp_req *prev = NULL;
    for (struct tp_req *q = *head; q; prev = q, q = q->next) {
        if (q != r)
            continue;
        if (prev)
            prev->next = q->next;
        else
            *head = q->next;
        if (*tail == q)
            *tail = prev;
        r->next = NULL;
        r->queued = 0;
        if (r->is_send)
            tp->eps[r->ep].txq_count--;
        return;
    }
}

int tp_wire_unqueue(struct fccl_tp *tp, struct tp_req *r)
{
    if (!r->queued)
        return 0;
    q_pop(tp, r);
    tp_wire_finish(tp, r, FCCL_ERR_ABORTED);
    return 1;
}

/* ------------------------------------------------------------------ */
/* Posting one step of a request                                      */
/* ------------------------------------------------------------------ */

static ssize_t post_recv(struct fccl_tp *tp, struct tp_ep *e,
                         struct tp_req *r, fi_addr_t fa)
{
    r->chunk = min_sz(r->total - r->off, tp_chunk_limit(tp, e));
    uint64_t ignore = e->directed ? TP_CHUNK_BIT | TP_LAST_BIT : 0;
    return fi_trecv(e->ep, r->buf + r->off, r->chunk, tp_mr_desc(r->mr),
                    e->directed ? fa : FI_ADDR_UNSPEC, r->tag, ignore,
                    r->fi_ctx);
}

/* Inject pieces until done (1) or the provider pushes back (busy). */
static ssize_t post_eager(struct fccl_tp *tp, struct tp_ep *e,
                          struct tp_req *r, fi_addr_t fa)
{
    while (r->off < r->total) {
        size_t n = min_sz(e->inject_size, r->total - r->off);
        uint64_t tag = r->tag | TP_CHUNK_BIT |
                       (r->off + n == r->total ? TP_LAST_BIT : 0);
        ssize_t rc = fi_tinject(e->ep, r->buf + r->off, n, fa, tag);
        if (rc) {
            LOG_TRACE("FABRIC", "rank %d: eager piece at %zu of %zu: %s",
                      r->peer, r->off, r->total, tp_fi_strerror((int)rc));
            return rc;
        }
        r->off += n;
        atomic_fetch_add(&tp->st_chunks, 1);
    }
    return 1;
}

/* Post r's next wire message(s): 0 posted, 1 completed inline, or a
 * negative fi errno (busy() ones are retried later). */
static ssize_t post_wire(struct fccl_tp *tp, struct tp_req *r)
{
    struct tp_ep *e = &tp->eps[r->ep];
    fi_addr_t fa = tp->peers[r->peer].addr;
    if (!r->is_send)
        return post_recv(tp, e, r, fa);
    if (r->mode == MODE_EAGER)
        return post_eager(tp, e, r, fa);
    if (r->mode == MODE_CHUNKED) {
        r->chunk = min_sz(r->total - r->off, tp_chunk_limit(tp, e));
        uint64_t tag = r->tag | TP_CHUNK_BIT |
                       (r->off + r->chunk == r->total ? TP_LAST_BIT : 0);
        atomic_fetch_add(&tp->st_chunks, 1);
        return fi_tsend(e->ep, r->buf + r->off, r->chunk, tp_mr_desc(r->mr),
                        fa, tag, r->fi_ctx);
    }
    r->chunk = r->total;
    if (r->total <= e->inject_size) {
        ssize_t rc = fi_tinject(e->ep, r->buf, r->total, fa, r->tag);
        return rc == 0 ? 1 : rc;
    }
    return fi_tsend(e->ep, r->buf, r->total, tp_mr_desc(r->mr), fa, r->tag,
                    r->fi_ctx);
}

/* Outcome of a post that was not busy().  A failure is recorded in the
 * request only: this may run in another thread's progress call, so the
 * thread-local message is left to the request's waiter. */
static int posted(struct fccl_tp *tp, struct tp_req *r, ssize_t rc)
{
    if (rc == 0) {
        tp->outstanding++;
        return FCCL_OK;
    }
    if (rc == 1) {
        r->off = r->len = r->total;
        tp_wire_finish(tp, r, FCCL_OK);
        return FCCL_OK;
    }
    LOG_DEBUG("FABRIC", "%s: rank %d: %s %zu B: %s", tp->eps[r->ep].prov,
              r->peer, r->is_send ? "send" : "recv", r->chunk,
              tp_fi_strerror((int)rc));
    r->fi_err = (int)-rc;
    tp_wire_finish(tp, r, FCCL_ERR_FABRIC);
    return FCCL_ERR_FABRIC;
}

/* Post again, or go to the front of the queue (the message has started,
 * so it precedes anything queued later on its tag). */
static void continue_req(struct fccl_tp *tp, struct tp_req *r)
{
    ssize_t rc = post_wire(tp, r);
    if (busy(rc)) {
        atomic_fetch_add(&tp->st_eagain, 1);
        q_push(tp, r, 1);
        return;
    }
    posted(tp, r, rc);
}

static void drain(struct fccl_tp *tp, struct tp_req **head)
{
    while (*head) {
        struct tp_req *r = *head;
        ssize_t rc = post_wire(tp, r);
        if (busy(rc))
            return;
        q_pop(tp, r);
        posted(tp, r, rc);
    }
}

void tp_wire_drain(struct fccl_tp *tp, struct tp_ep *e)
{
    drain(tp, &e->rxq_head);
    if (!e->txq_count)
        return;
    for (int p = 0; p < tp->nranks; p++)
        if (tp->peers[p].txq_head && tp->peers[p].ep == (int)(e - tp->eps))
            drain(tp, &tp->peers[p].txq_head);
}

/* ------------------------------------------------------------------ */
/* Completions                                                        */
/* ------------------------------------------------------------------ */

void tp_wire_on_cq(struct fccl_tp *tp, struct tp_req *r, size_t len,
                   uint64_t tag)
{
    tp->outstanding--;
    if (r->is_send) {
        r->off += r->chunk;
        if (r->mode == MODE_CHUNKED && r->off < r->total) {
            continue_req(tp, r);
            return;
        }
        r->len = r->off;
        tp_wire_finish(tp, r, FCCL_OK);
        return;
    }
    r->off += len;
    int more = (tag & TP_CHUNK_BIT) && !(tag & TP_LAST_BIT);
    LOG_TRACE("FABRIC", "rank %d: recv piece %zu B tag 0x%llx, %zu of %zu",
              r->peer, len, (unsigned long long)tag, r->off, r->total);
    if (more && r->off < r->total) {
        continue_req(tp, r);
        return;
    }
    r->len = r->off;
    if (more) { /* the sender has more than fits */
        r->fi_err = FI_ETRUNC;
        tp_wire_finish(tp, r, FCCL_ERR_PROTOCOL);
        return;
    }
    tp_wire_finish(tp, r, FCCL_OK);
}

static int status_of_fi_err(int err)
{
    switch (err) {
    case FI_ECANCELED:
        return FCCL_ERR_ABORTED;
    case FI_ETRUNC:
        return FCCL_ERR_PROTOCOL;
    case FI_ECONNRESET: case FI_ECONNREFUSED: case FI_ECONNABORTED:
    case FI_ENOTCONN: case FI_EHOSTUNREACH: case FI_ENETUNREACH:
    case FI_ETIMEDOUT: case FI_EIO: case FI_EADDRNOTAVAIL: case FI_EREMOTEIO:
    case EPIPE: case FI_ESHUTDOWN:
        return FCCL_ERR_PEER;
    }
    return FCCL_ERR_FABRIC;
}

void tp_wire_on_err(struct fccl_tp *tp, struct tp_req *r,
                    const struct fi_cq_err_entry *ee)
{
    tp->outstanding--;
    r->fi_err = ee->err < 0 ? -ee->err : ee->err; /* shm reports it negated */
    /* The overflow is exact only for a single message (not every
     * provider reports it; 0 = unknown). */
    r->olen = ee->tag & TP_CHUNK_BIT ? 0 : ee->olen;
    r->len = r->off + ee->len;
    LOG_DEBUG("FABRIC", "%s: rank %d %s failed: %s", tp->eps[r->ep].prov,
              r->peer, r->is_send ? "send" : "recv",
              tp_fi_strerror(r->fi_err));
    tp_wire_finish(tp, r, status_of_fi_err(r->fi_err));
}

/* ------------------------------------------------------------------ */
/* Starting a request                                                 */
/* ------------------------------------------------------------------ */

/* How a send travels (see the top of the file). */
static int send_mode(struct fccl_tp *tp, struct tp_ep *e, struct tp_req *r)
{
    int big = e->hol_tx && r->total > e->inject_size && e->inject_size;
    if (big && e->directed && (e->big_owner || e->big_stuck))
        return MODE_EAGER;
    int mode = MODE_SINGLE;
    if (r->total > tp_chunk_limit(tp, e)) {
        if (!e->directed)
            return fccl_err(FCCL_ERR_INVALID, "tp_isend: rank %d: %zu B "
                            "exceeds %s's %zu B message limit", r->peer,
                            r->total, e->prov, tp_chunk_limit(tp, e));
        mode = MODE_CHUNKED; /* its chunks go one at a time */
    }
    if (big)
        e->big_owner = r;
    return mode;
}

int tp_wire_submit(struct fccl_tp *tp, struct tp_req *r)
{
    struct tp_ep *e = &tp->eps[r->ep];
    if (r->is_send) {
        int mode = send_mode(tp, e, r);
        if (mode < 0) {
            tp_wire_finish(tp, r, mode);
            return mode;
        }
        r->mode = mode;
    }
    if (!*q_head(tp, r)) {
        for (int i = 0; i < TP_POST_TRIES; i++) {
            ssize_t rc = post_wire(tp, r);
            if (!busy(rc))
                return posted(tp, r, rc);
            atomic_fetch_add(&tp->st_eagain, 1);
            tp_progress_locked(tp);
            if (*q_head(tp, r)) /* progress queued a continuation */
                break;
        }
    }
    q_push(tp, r, 0);
    return FCCL_OK;
}
