/*
 * The transport's wire protocol: how a request becomes tagged messages,
 * how completions are credited, and the retry queues.  All functions run
 * under tp->lock.
 *
 * Clear-to-send on shm.  shm reports the completions of its large sends
 * (above the 4 KiB inject size: CMA or SAR) in the order they were posted,
 * so one large send that the peer has not matched yet holds back the
 * completion of every later large send of the process, to any peer.  With
 * groups driven from several threads that closes a wait cycle: thread A
 * waits for a send that is done but unreported, while the peer that would
 * match the older send waits on thread A's group.  (Sending such messages
 * as injected pieces instead floods shm's unexpected-message pool, which
 * libfabric 1.17 does not survive.)  So on shm a large send first waits
 * for a clear-to-send: the receiver, once its receive is posted, injects
 * a control message (its rank, TP_CTL_CTS and the tag) tagged exactly
 * TP_CTS_BIT; only then is the data sent, so it is matched on arrival and
 * its completion follows promptly.  (A CMA descriptor, an inject, may go
 * first: transport_cma.c.)  Control messages land in TP_CTS_SLOTS receives kept
 * posted for any source (so a send never needs a receive entry of its
 * own, which could starve behind data receives); clear-to-sends are
 * paired in software with the first send waiting on that (peer, tag), or
 * kept until it is posted.  Cost: one small message per message above
 * 4 KiB.  No receive uses an ignore mask: shm 1.17 does not apply one
 * correctly to messages that arrived before the receive.  Per-tag order: a later send on the same (peer, tag) is
 * held until the waiting one has gone (it must not overtake it); sends on
 * other tags are not held.  Both sides decide by their own length, so a
 * receive above
 * 4 KiB for a message of at most 4 KiB leaves a stray clear-to-send
 * behind; fccl always receives exact sizes.
 *
 * Chunking.  A message longer than the endpoint's max_msg_size (or
 * opts.max_chunk) travels as chunks of that size, each posted when the
 * previous one completed, tagged TP_CHUNK_BIT | tag.  The receiver splits
 * its buffer the same way, so a chunked transfer needs the receive to be
 * as long as the message (a short final chunk also ends it early).
 * Chunks of two messages on one (peer, tag) would mix: a chunked message
 * must be alone in flight on its (peer, tag) (collective tags always are).
 *
 * Retry queues: a post refused for lack of queue entries (-FI_EAGAIN, or
 * -FI_ENOMEM from shm's receive queue) waits in a FIFO: per peer for
 * sends (one congested peer must not hold back the others), per endpoint
 * for receives (their queue entries are shared).  FIFO keeps per-tag
 * order; progress drains them.
 */
#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "err.h"
#include "log.h"
#include "transport/tp_int.h"

#define TP_CTS_BIT (1ull << 63)
#define TP_CHUNK_BIT (1ull << 62)
#define TP_POST_TRIES 8 /* busy retries (with progress) before queueing */

enum { MODE_SINGLE = 0, MODE_CHUNKED };

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

/* Does a message of this length on e use the clear-to-send handshake? */
static int needs_cts(const struct tp_ep *e, size_t len)
{
    return e->rndv && e->directed && len > e->inject_size;
}

static void rv_release(struct fccl_tp *tp, int peer, uint64_t tag);
static void rv_remove(struct fccl_tp *tp, struct tp_req *r);

void tp_wire_finish(struct fccl_tp *tp, struct tp_req *r, int status)
{
    if (r->in_rv) {
        rv_remove(tp, r);
        rv_release(tp, r->peer, r->tag);
    }
    tp_mr_put(&tp->eps[r->ep], r->mr);
    r->mr = NULL;
    r->status = status;
    atomic_store_explicit(&r->state, status ? TP_REQ_ERROR : TP_REQ_DONE,
                          memory_order_release);
}

/* ------------------------------------------------------------------ */
/* Retry queues                                                       */
/* ------------------------------------------------------------------ */

/* A clear-to-send waits in its own queue: it needs no receive entry, so
 * it must not stand behind receives that wait for one. */
static struct tp_req **q_head(struct fccl_tp *tp, struct tp_req *r)
{
    if (r->is_send)
        return &tp->peers[r->peer].txq_head;
    return r->phase == TP_PH_SEND_CTS ? &tp->eps[r->ep].ctsq_head
                                   : &tp->eps[r->ep].rxq_head;
}

static struct tp_req **q_tail(struct fccl_tp *tp, struct tp_req *r)
{
    if (r->is_send)
        return &tp->peers[r->peer].txq_tail;
    return r->phase == TP_PH_SEND_CTS ? &tp->eps[r->ep].ctsq_tail
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

/* Drop r from its retry queue.  1 if r was not in the provider (now
 * finished as aborted); a receive queued just for its clear-to-send is
 * posted, so the caller must cancel it in the provider too (0). */
int tp_wire_unqueue(struct fccl_tp *tp, struct tp_req *r)
{
    if (r->phase == TP_PH_WAIT_FIN) {
        tp_cma_forget(tp, r);
        tp_wire_finish(tp, r, FCCL_ERR_ABORTED);
        return 1;
    }
    if (r->phase == TP_PH_HELD || r->phase == TP_PH_WAIT_CTS) {
        if (r->queued)
            q_pop(tp, r);
        tp_wire_finish(tp, r, FCCL_ERR_ABORTED);
        return 1;
    }
    if (!r->queued)
        return 0;
    q_pop(tp, r);
    if (r->phase == TP_PH_SEND_CTS)
        return 0;
    tp_wire_finish(tp, r, FCCL_ERR_ABORTED);
    return 1;
}

/* ------------------------------------------------------------------ */
/* Posting one step of a request                                      */
/* ------------------------------------------------------------------ */

static ssize_t post_recv(struct fccl_tp *tp, struct tp_ep *e,
                         struct tp_req *r, fi_addr_t fa)
{
    if (r->phase == TP_PH_SEND_CTS) {
        uint64_t msg[TP_CTL_WORDS] = {(uint64_t)tp->my_rank, TP_CTL_CTS,
                                      r->tag};
        ssize_t rc = fi_tinject(e->ep, msg, sizeof(msg), fa, TP_CTS_BIT);
        return rc == 0 ? 2 : rc; /* phase changes once off its queue */
    }
    size_t lim = tp_chunk_limit(tp, e);
    uint64_t tag = r->tag | (r->total > lim ? TP_CHUNK_BIT : 0);
    r->chunk = min_sz(r->total - r->off, lim);
    return fi_trecv(e->ep, r->buf + r->off, r->chunk, tp_mr_desc(r->mr),
                    e->directed ? fa : FI_ADDR_UNSPEC, tag, 0, r->fi_ctx);
}

/* Post r's next wire message: 0 posted, 1 completed inline (inject), 2
 * clear-to-send injected (no new operation), 3 CMA descriptor injected
 * (the send waits for FIN), or a negative fi errno (busy() ones are
 * retried later). */
static ssize_t post_wire(struct fccl_tp *tp, struct tp_req *r)
{
    struct tp_ep *e = &tp->eps[r->ep];
    fi_addr_t fa = tp->peers[r->peer].addr;
    if (!r->is_send)
        return post_recv(tp, e, r, fa);
    if (r->mode == MODE_CHUNKED) {
        r->chunk = min_sz(r->total - r->off, tp_chunk_limit(tp, e));
        ssize_t rc = fi_tsend(e->ep, r->buf + r->off, r->chunk,
                              tp_mr_desc(r->mr), fa, r->tag | TP_CHUNK_BIT,
                              r->fi_ctx);
        if (rc == 0)
            atomic_fetch_add(&tp->st_chunks, 1);
        return rc;
    }
    r->chunk = r->total;
    if (r->cma) {
        ssize_t rc = tp_cma_post(tp, e, r, fa);
        return rc == 0 ? 3 : rc;
    }
    if (r->total <= e->inject_size) {
        ssize_t rc = fi_tinject(e->ep, r->buf, r->total, fa, r->tag);
        return rc == 0 ? 1 : rc;
    }
    return fi_tsend(e->ep, r->buf, r->total, tp_mr_desc(r->mr), fa, r->tag,
                    r->fi_ctx);
}

static void post_failed(struct fccl_tp *tp, struct tp_req *r, ssize_t rc)
{
    LOG_DEBUG("FABRIC", "%s: rank %d: %s %zu B: %s", tp->eps[r->ep].prov,
              r->peer, r->is_send ? "send" : "recv", r->total,
              tp_fi_strerror((int)rc));
    r->fi_err = (int)-rc;
    tp_wire_finish(tp, r, FCCL_ERR_FABRIC);
}

/* Outcome of a post that was not busy().  A failure is recorded in the
 * request only: this may run in another thread's progress call, so the
 * thread-local message is left to the request's waiter.  A receive that
 * owes a clear-to-send stays (or goes) at the back of its queue. */
static int posted(struct fccl_tp *tp, struct tp_req *r, ssize_t rc)
{
    if (rc < 0) {
        post_failed(tp, r, rc);
        return FCCL_ERR_FABRIC;
    }
    if (rc == 1) {
        r->off = r->len = r->total;
        tp_wire_finish(tp, r, FCCL_OK);
        return FCCL_OK;
    }
    if (rc == 2) { /* clear-to-send went out */
        r->phase = TP_PH_DATA;
        return FCCL_OK;
    }
    if (rc == 3) {
        tp_cma_wait_fin(tp, r);
        return FCCL_OK;
    }
    tp->outstanding++;
    if (!r->is_send && r->off == 0 && needs_cts(&tp->eps[r->ep], r->total)) {
        r->phase = TP_PH_SEND_CTS;
        ssize_t c = post_wire(tp, r);
        if (busy(c)) {
            q_push(tp, r, 0);
            return FCCL_OK;
        }
        r->phase = TP_PH_DATA;
        if (c < 0)
            LOG_WARN("FABRIC", "rank %d: clear-to-send: %s", r->peer,
                     tp_fi_strerror((int)c));
    }
    return FCCL_OK;
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

static void post_cts_slots(struct tp_ep *e);
static void ctl_drain(struct fccl_tp *tp, struct tp_ep *e);

void tp_wire_drain(struct fccl_tp *tp, struct tp_ep *e)
{
    if (e->cts_unposted)
        post_cts_slots(e);
    if (e->ctlq_head)
        ctl_drain(tp, e);
    drain(tp, &e->ctsq_head);
    drain(tp, &e->rxq_head);
    if (!e->txq_count)
        return;
    for (int p = 0; p < tp->nranks; p++)
        if (tp->peers[p].txq_head && tp->peers[p].ep == (int)(e - tp->eps))
            drain(tp, &tp->peers[p].txq_head);
}

/* ------------------------------------------------------------------ */
/* Rendezvous order (per peer, see the top of the file)               */
/* ------------------------------------------------------------------ */

static int rv_has_tag(const struct tp_peer *p, uint64_t tag)
{
    for (const struct tp_req *q = p->rv_head; q; q = q->rnext)
        if (q->tag == tag)
            return 1;
    return 0;
}

static void rv_append(struct fccl_tp *tp, struct tp_req *r)
{
    struct tp_req **pp = &tp->peers[r->peer].rv_head;
    while (*pp)
        pp = &(*pp)->rnext;
    r->rnext = NULL;
    r->in_rv = 1;
    *pp = r;
}

static void rv_remove(struct fccl_tp *tp, struct tp_req *r)
{
    for (struct tp_req **pp = &tp->peers[r->peer].rv_head; *pp;
         pp = &(*pp)->rnext) {
        if (*pp == r) {
            *pp = r->rnext;
            break;
        }
    }
    r->rnext = NULL;
    r->in_rv = 0;
}

/* Claim a clear-to-send that arrived before its send. */
static int early_take(struct tp_peer *p, uint64_t tag)
{
    for (struct tp_early_cts **pp = &p->early; *pp; pp = &(*pp)->next) {
        if ((*pp)->tag == tag) {
            struct tp_early_cts *c = *pp;
            *pp = c->next;
            free(c);
            return 1;
        }
    }
    return 0;
}

/* Post r now, or behind what is already queued for its peer. */
static void post_or_queue(struct fccl_tp *tp, struct tp_req *r)
{
    if (*q_head(tp, r)) {
        q_push(tp, r, 0);
        return;
    }
    ssize_t rc = post_wire(tp, r);
    if (busy(rc))
        q_push(tp, r, 0);
    else
        posted(tp, r, rc);
}

/* The first same-tag entry left the list: start the held ones in order,
 * up to the next one that must wait for its own clear-to-send. */
static void rv_release(struct fccl_tp *tp, int peer, uint64_t tag)
{
    struct tp_req *q = tp->peers[peer].rv_head;
    while (q) {
        struct tp_req *nx = q->rnext;
        if (q->tag != tag) {
            q = nx;
            continue;
        }
        if (q->phase != TP_PH_HELD)
            return;
        int owed = needs_cts(&tp->eps[q->ep], q->total) &&
                   !early_take(&tp->peers[peer], tag);
        if (owed && q->cma != TP_CMA_EAGER) {
            q->phase = TP_PH_WAIT_CTS; /* stays first on the list */
            return;
        }
        q->phase = TP_PH_DATA;
        if (owed) { /* eager: goes now, stays first until its CTS comes */
            post_or_queue(tp, q);
            return;
        }
        rv_remove(tp, q);
        post_or_queue(tp, q);
        q = nx;
    }
}

/* ------------------------------------------------------------------ */
/* Completions                                                        */
/* ------------------------------------------------------------------ */

/* (Re)post the control-message receives; keep count of the refused ones. */
static void post_cts_slots(struct tp_ep *e)
{
    e->cts_unposted = 0;
    for (int i = 0; i < TP_CTS_SLOTS; i++) {
        struct tp_cts_slot *c = &e->cts[i];
        if (c->posted)
            continue;
        ssize_t rc = fi_trecv(e->ep, c->msg, sizeof(c->msg), NULL,
                              FI_ADDR_UNSPEC, TP_CTS_BIT, 0, &c->ctx);
        if (rc == 0)
            c->posted = 1;
        else
            e->cts_unposted++;
    }
}

int tp_wire_start(struct fccl_tp *tp)
{
    for (int i = 0; i < tp->nep; i++) {
        struct tp_ep *e = &tp->eps[i];
        if (!e->rndv || !e->directed)
            continue;
        for (int k = 0; k < TP_CTS_SLOTS; k++)
            e->cts[k].posted = 0;
        post_cts_slots(e);
        if (e->cts_unposted == TP_CTS_SLOTS)
            return fccl_err(FCCL_ERR_FABRIC, "transport: %s: cannot post "
                            "clear-to-send receives", e->prov);
    }
    return FCCL_OK;
}

void tp_wire_stop(struct fccl_tp *tp)
{
    for (int p = 0; p < tp->nranks; p++)
        while (tp->peers[p].early)
            early_take(&tp->peers[p], tp->peers[p].early->tag);
    for (int i = 0; i < tp->nep; i++) {
        struct tp_ep *e = &tp->eps[i];
        while (e->ctlq_head) {
            struct tp_ctl *c = e->ctlq_head;
            e->ctlq_head = c->next;
            free(c);
        }
        e->ctlq_tail = NULL;
    }
}

static ssize_t ctl_inject(struct fccl_tp *tp, const struct tp_ctl *c)
{
    struct tp_peer *p = &tp->peers[c->peer];
    return fi_tinject(tp->eps[p->ep].ep, c->msg, sizeof(c->msg), p->addr,
                      TP_CTS_BIT);
}

void tp_ctl_send(struct fccl_tp *tp, int peer, int kind, uint64_t a,
                 uint64_t b, uint64_t c, uint64_t d)
{
    struct tp_ctl m = {{(uint64_t)tp->my_rank, (uint64_t)kind, a, b, c, d},
                       peer, NULL};
    struct tp_ep *e = &tp->eps[tp->peers[peer].ep];
    ssize_t rc = e->ctlq_head ? -FI_EAGAIN : ctl_inject(tp, &m);
    if (rc == 0)
        return;
    if (!busy(rc)) {
        LOG_WARN("FABRIC", "rank %d: control message %d: %s", peer, kind,
                 tp_fi_strerror((int)rc));
        return;
    }
    struct tp_ctl *q = malloc(sizeof(*q));
    if (!q) {
        LOG_ERROR("FABRIC", "rank %d: control message %d lost (out of "
                  "memory)", peer, kind);
        return;
    }
    *q = m;
    if (e->ctlq_tail)
        e->ctlq_tail->next = q;
    else
        e->ctlq_head = q;
    e->ctlq_tail = q;
}

static void ctl_drain(struct fccl_tp *tp, struct tp_ep *e)
{
    while (e->ctlq_head) {
        struct tp_ctl *c = e->ctlq_head;
        ssize_t rc = ctl_inject(tp, c);
        if (busy(rc))
            return;
        if (rc)
            LOG_WARN("FABRIC", "rank %d: control message %llu: %s", c->peer,
                     (unsigned long long)c->msg[1], tp_fi_strerror((int)rc));
        e->ctlq_head = c->next;
        if (!e->ctlq_head)
            e->ctlq_tail = NULL;
        free(c);
    }
}

static struct tp_cts_slot *cts_slot(struct tp_ep *e, void *ctx)
{
    if (!e->rndv || (char *)ctx < (char *)e->cts ||
        (char *)ctx >= (char *)(e->cts + TP_CTS_SLOTS))
        return NULL;
    return (struct tp_cts_slot *)ctx;
}

/* A control message.  Clear-to-send: the receiver of (peer, tag) is
 * ready; start the first send waiting for it, or keep the news for the
 * send still to come. */
static void on_ctl(struct fccl_tp *tp, struct tp_ep *e,
                   struct tp_cts_slot *c)
{
    uint64_t msg[TP_CTL_WORDS];
    memcpy(msg, c->msg, sizeof(msg));
    uint64_t peer = msg[0], tag = msg[2];
    c->posted = 0;
    post_cts_slots(e);
    if (peer >= (uint64_t)tp->nranks) {
        LOG_WARN("FABRIC", "%s: control message from unknown rank %llu",
                 e->prov, (unsigned long long)peer);
        return;
    }
    if (msg[1] != TP_CTL_CTS) {
        tp_cma_on_ctl(tp, (int)peer, msg);
        return;
    }
    struct tp_peer *p = &tp->peers[peer];
    for (struct tp_req *r = p->rv_head; r; r = r->rnext) {
        if (r->tag != tag)
            continue;
        if (r->phase == TP_PH_HELD)
            break;
        rv_remove(tp, r);
        if (r->phase == TP_PH_WAIT_CTS) {
            r->phase = TP_PH_DATA;
            post_or_queue(tp, r);
        } /* else an eager CMA send already went: this was owed to it */
        rv_release(tp, (int)peer, tag);
        return;
    }
    struct tp_early_cts *n = malloc(sizeof(*n));
    if (!n) {
        LOG_ERROR("FABRIC", "rank %llu: clear-to-send lost (out of memory)",
                  (unsigned long long)peer);
        return;
    }
    n->tag = tag;
    n->next = NULL;
    struct tp_early_cts **pp = &p->early;
    while (*pp)
        pp = &(*pp)->next;
    *pp = n;
}

static void send_done(struct fccl_tp *tp, struct tp_req *r)
{
    r->off += r->chunk;
    if (r->mode == MODE_CHUNKED && r->off < r->total) {
        continue_req(tp, r);
        return;
    }
    r->len = r->off;
    tp_wire_finish(tp, r, FCCL_OK);
}

/* A receive completed by a CMA descriptor rather than data? */
static int is_cma_rts(const struct tp_req *r,
                      const struct fi_cq_tagged_entry *ent)
{
    return (ent->flags & FI_REMOTE_CQ_DATA) && ent->data == TP_CMA_RTS &&
           r->off == 0;
}

void tp_wire_on_cq(struct fccl_tp *tp, struct tp_ep *e,
                   const struct fi_cq_tagged_entry *ent)
{
    struct tp_cts_slot *c = cts_slot(e, ent->op_context);
    if (c) {
        on_ctl(tp, e, c);
        return;
    }
    struct tp_req *r = ent->op_context;
    size_t len = ent->len;
    tp->outstanding--;
    if (r->is_send) {
        send_done(tp, r);
        return;
    }
    if (is_cma_rts(r, ent)) {
        if (r->queued)
            q_pop(tp, r);
        tp_cma_on_rts(tp, r);
        return;
    }
    r->off += len;
    /* Chunked: a full chunk short of the end asks for the next one. */
    if (len == r->chunk && r->off < r->total) {
        continue_req(tp, r);
        return;
    }
    r->len = r->off;
    if (r->queued) /* its clear-to-send was never sent: moot now */
        q_pop(tp, r);
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

void tp_wire_on_err(struct fccl_tp *tp, struct tp_ep *e, void *ctx,
                    const struct fi_cq_err_entry *ee)
{
    struct tp_cts_slot *c = cts_slot(e, ctx);
    if (c) { /* cancelled at close, or a malformed clear-to-send */
        c->posted = 0;
        if (ee->err != FI_ECANCELED && ee->err != -FI_ECANCELED)
            post_cts_slots(e);
        return;
    }
    struct tp_req *r = ctx;
    tp->outstanding--;
    if (r->queued)
        q_pop(tp, r);
    r->fi_err = ee->err < 0 ? -ee->err : ee->err; /* shm reports it negated */
    /* The overflow is exact only for a single message (0 = unknown). */
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

static int plan_send(struct fccl_tp *tp, struct tp_ep *e, struct tp_req *r)
{
    r->mode = MODE_SINGLE;
    if (r->total > tp_chunk_limit(tp, e)) {
        if (!e->directed)
            return fccl_err(FCCL_ERR_INVALID, "tp_isend: rank %d: %zu B "
                            "exceeds %s's %zu B message limit", r->peer,
                            r->total, e->prov, tp_chunk_limit(tp, e));
        r->mode = MODE_CHUNKED;
    }
    struct tp_peer *p = &tp->peers[r->peer];
    r->cma = r->mode == MODE_SINGLE ? tp_cma_plan(tp, e, r) : TP_CMA_OFF;
    /* held: must not overtake a same-tag send; owed: a clear-to-send is
     * due to it (an eager CMA send goes at once and stays listed) */
    int held = p->rv_head && rv_has_tag(p, r->tag);
    int owed = !held && needs_cts(e, r->total) && !early_take(p, r->tag);
    r->phase = held ? TP_PH_HELD
             : owed && r->cma != TP_CMA_EAGER ? TP_PH_WAIT_CTS : TP_PH_DATA;
    if (held || owed)
        rv_append(tp, r);
    return FCCL_OK;
}

int tp_wire_submit(struct fccl_tp *tp, struct tp_req *r)
{
    if (r->is_send) {
        int rc = plan_send(tp, &tp->eps[r->ep], r);
        if (rc < 0) {
            tp_wire_finish(tp, r, rc);
            return rc;
        }
        if (r->phase != TP_PH_DATA) /* held, or waiting for clear-to-send */
            return FCCL_OK;
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
