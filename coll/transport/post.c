/*
 * Putting messages on the wire: a request's data (one message, or chunks
 * of the endpoint's max_msg_size, tagged TP_CHUNK_BIT | tag), the
 * control messages of the rendezvous protocol (clear-to-send, CMA
 * descriptor, FIN, probe), the receives kept posted for control
 * messages, and the retry queues for posts the provider refuses for now.
 * Which message a request needs next is decided by rndv.c; nothing here
 * changes a request's state or drives progress.  All under tp->lock.
 *
 * Retry queues: a post refused for lack of queue entries (-FI_EAGAIN, or
 * -FI_ENOMEM from shm's receive queue) waits in a FIFO: per peer for
 * sends (one congested peer must not hold back the others), per endpoint
 * for receives (their queue entries are shared), and per endpoint for
 * owed clear-to-sends (they need no receive entry, so they must not stand
 * behind receives that wait for one).  FIFO keeps per-tag order.
 */
#include <stdlib.h>
#include <string.h>

#include "err.h"
#include "log.h"
#include "tp_int.h"

struct cma_desc {
    uint64_t addr, len, cookie;
};

int tp_post_busy(ssize_t rc)
{
    return rc == -FI_EAGAIN || rc == -FI_ENOMEM;
}

static size_t min_sz(size_t a, size_t b) { return a < b ? a : b; }

static fi_addr_t addr_of(const struct fccl_tp *tp, const struct tp_req *r)
{
    return tp->peers[r->peer].addr;
}

/* ------------------------------------------------------------------ */
/* A request's messages                                               */
/* ------------------------------------------------------------------ */

ssize_t tp_post_recv(struct fccl_tp *tp, struct tp_req *r)
{
    struct tp_req_priv *p = P(r);
    struct tp_ep *e = &tp->eps[p->ep];
    size_t lim = tp_chunk_limit(tp, e);
    uint64_t tag = p->tag | (p->total > lim ? TP_CHUNK_BIT : 0);
    p->chunk = min_sz(p->total - p->off, lim);
    return fi_trecv(e->ep, p->buf + p->off, p->chunk, tp_mr_desc(p->mr),
                    e->directed ? addr_of(tp, r) : FI_ADDR_UNSPEC, tag, 0,
                    &p->ctx);
}

/* 1 when the message went as an inject (complete already). */
ssize_t tp_post_data(struct fccl_tp *tp, struct tp_req *r)
{
    struct tp_req_priv *p = P(r);
    struct tp_ep *e = &tp->eps[p->ep];
    fi_addr_t fa = addr_of(tp, r);
    if (p->mode == TP_MODE_CHUNKED) {
        p->chunk = min_sz(p->total - p->off, tp_chunk_limit(tp, e));
        ssize_t rc = fi_tsend(e->ep, p->buf + p->off, p->chunk,
                              tp_mr_desc(p->mr), fa, p->tag | TP_CHUNK_BIT,
                              &p->ctx);
        if (rc == 0)
            atomic_fetch_add(&tp->st_chunks, 1);
        return rc;
    }
    p->chunk = p->total;
    if (tp_eager_is(e, p->total)) { /* an eager message (eager.c) */
        uint64_t etag = TP_EAGER_TAG | (uint64_t)tp->my_rank;
        if (p->total > e->inject_size)
            return fi_tsenddata(e->ep, p->buf, p->total, tp_mr_desc(p->mr),
                                p->tag, fa, etag, &p->ctx);
        ssize_t rc = fi_tinjectdata(e->ep, p->buf, p->total, p->tag, fa, etag);
        return rc == 0 ? 1 : rc;
    }
    if (p->total <= e->inject_size) {
        ssize_t rc = fi_tinject(e->ep, p->buf, p->total, fa, p->tag);
        return rc == 0 ? 1 : rc;
    }
    return fi_tsend(e->ep, p->buf, p->total, tp_mr_desc(p->mr), fa, p->tag,
                    &p->ctx);
}

/* The receiver of r is ready: its rank, TP_CTL_CTS, the tag and the
 * receive's size (the sender checks that its message fits). */
ssize_t tp_post_cts(struct fccl_tp *tp, struct tp_req *r)
{
    struct tp_ep *e = &tp->eps[P(r)->ep];
    uint64_t msg[TP_CTL_WORDS] = {(uint64_t)tp->my_rank, TP_CTL_CTS,
                                  P(r)->tag, P(r)->total};
    return fi_tinject(e->ep, msg, sizeof(msg), addr_of(tp, r), TP_CTS_BIT);
}

/* A CMA descriptor {address, length, cookie} on the data tag, marked by
 * its remote CQ data; it lands in the peer's receive. */
ssize_t tp_post_desc(struct fccl_tp *tp, struct tp_req *r)
{
    struct tp_req_priv *p = P(r);
    struct cma_desc d = {(uint64_t)(uintptr_t)p->buf, p->total,
                         (uint64_t)(uintptr_t)r};
    p->chunk = p->total;
    return fi_tinjectdata(tp->eps[p->ep].ep, &d, sizeof(d), TP_CMA_RTS,
                          addr_of(tp, r), p->tag);
}

/* Instead of a message longer than its receive (P(r)->olen B, known from
 * the clear-to-send): the message's size, marked by TP_TRUNC_DATA, on the
 * tag the receive was posted with.  The receive fails naming both sizes
 * and the connection carries on (told to deliver the message, a provider
 * would report truncation, and net would drop the connection). */
ssize_t tp_post_trunc(struct fccl_tp *tp, struct tp_req *r)
{
    struct tp_req_priv *p = P(r);
    struct tp_ep *e = &tp->eps[p->ep];
    uint64_t len = p->total;
    uint64_t tag = p->tag | (p->olen > tp_chunk_limit(tp, e) ? TP_CHUNK_BIT
                                                             : 0);
    p->chunk = 0;
    return fi_tinjectdata(e->ep, &len, sizeof(len), TP_TRUNC_DATA,
                          addr_of(tp, r), tag);
}

/* ------------------------------------------------------------------ */
/* Retry queues                                                       */
/* ------------------------------------------------------------------ */

struct tp_req **tp_q_head(struct fccl_tp *tp, struct tp_req *r)
{
    if (r->is_send)
        return &tp->peers[r->peer].txq_head;
    return P(r)->phase == TP_PH_SEND_CTS ? &tp->eps[P(r)->ep].ctsq_head
                                         : &tp->eps[P(r)->ep].rxq_head;
}

static struct tp_req **q_tail(struct fccl_tp *tp, struct tp_req *r)
{
    if (r->is_send)
        return &tp->peers[r->peer].txq_tail;
    return P(r)->phase == TP_PH_SEND_CTS ? &tp->eps[P(r)->ep].ctsq_tail
                                         : &tp->eps[P(r)->ep].rxq_tail;
}

void tp_q_push(struct fccl_tp *tp, struct tp_req *r, int front)
{
    struct tp_req **head = tp_q_head(tp, r), **tail = q_tail(tp, r);
    P(r)->queued = 1;
    if (r->is_send)
        tp->eps[P(r)->ep].txq_count++;
    if (front) {
        P(r)->next = *head;
        *head = r;
        if (!*tail)
            *tail = r;
        return;
    }
    P(r)->next = NULL;
    if (*tail)
        P(*tail)->next = r;
    else
        *head = r;
    *tail = r;
}

void tp_q_pop(struct fccl_tp *tp, struct tp_req *r)
{
    struct tp_req **head = tp_q_head(tp, r), **tail = q_tail(tp, r);
    struct tp_req *prev = NULL;
    for (struct tp_req *q = *head; q; prev = q, q = P(q)->next) {
        if (q != r)
            continue;
        if (prev)
            P(prev)->next = P(q)->next;
        else
            *head = P(q)->next;
        if (*tail == q)
            *tail = prev;
        P(r)->next = NULL;
        P(r)->queued = 0;
        if (r->is_send)
            tp->eps[P(r)->ep].txq_count--;
        return;
    }
}

/* ------------------------------------------------------------------ */
/* Control messages                                                   */
/* ------------------------------------------------------------------ */

/* (Re)post the control-message receives; keep count of the refused ones. */
void tp_slots_post(struct tp_ep *e)
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

struct tp_cts_slot *tp_slot_of(struct tp_ep *e, void *ctx)
{
    if (!e->rndv || (char *)ctx < (char *)e->cts ||
        (char *)ctx >= (char *)(e->cts + TP_CTS_SLOTS))
        return NULL;
    return (struct tp_cts_slot *)ctx;
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
    if (tp_resolve_locked(tp, peer) < 0) { /* a reply to an unknown peer */
        LOG_WARN("FABRIC", "control message %d dropped: %s", kind,
                 fccl_last_error());
        return;
    }
    struct tp_ep *e = &tp->eps[tp->peers[peer].ep];
    ssize_t rc = e->ctlq_head ? -FI_EAGAIN : ctl_inject(tp, &m);
    if (rc == 0)
        return;
    if (!tp_post_busy(rc)) {
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

void tp_ctl_drain(struct fccl_tp *tp, struct tp_ep *e)
{
    while (e->ctlq_head) {
        struct tp_ctl *c = e->ctlq_head;
        ssize_t rc = ctl_inject(tp, c);
        if (tp_post_busy(rc))
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

void tp_ctl_free(struct tp_ep *e)
{
    while (e->ctlq_head) {
        struct tp_ctl *c = e->ctlq_head;
        e->ctlq_head = c->next;
        free(c);
    }
    e->ctlq_tail = NULL;
}
