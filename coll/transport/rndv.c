/*
 * A request's life on the wire: the state machine of sends and receives,
 * with the rendezvous protocol (clear-to-send), single-copy transfers
 * between local processes (CMA descriptor and FIN), and the retry of posts
 * the provider refused.  progress.c hands it every completion; it calls
 * post.c to put messages on the wire and never drives progress itself.
 * All functions run under tp->lock.
 *
 * States (tp_int.h) and transitions:
 *
 *   send  submit -> DATA                      nothing in the way
 *                -> HELD                      a same-tag send is listed
 *                -> WAIT_CTS                  large on shm or net, no CTS yet
 *         HELD -> WAIT_CTS | DATA             the send before it left
 *         WAIT_CTS -> DATA                    its clear-to-send came
 *         DATA -> (posted) -> done            data, inject or last chunk
 *         DATA -> (truncation notice) -> done the receive is shorter
 *         DATA -> (descriptor) -> WAIT_FIN    CMA; eager ones skip WAIT_CTS
 *         WAIT_FIN -> done                    FIN from the receiver
 *   recv  submit -> DATA (posted) -> SEND_CTS (if owed and refused) -> DATA
 *         submit -> EAGER_RX (net, eager size: on a list, eager.c) -> done
 *         DATA -> done                        data, or last chunk
 *         DATA -> (descriptor) -> done        payload pulled by CMA, FIN sent
 *   any   busy post -> retry queue, same state; error or cancel -> done
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
 * a control message (its rank, TP_CTL_CTS, the tag and the receive's
 * size) tagged exactly TP_CTS_BIT; only then is the data sent, so it is
 * matched on arrival and its completion follows promptly.  Control
 * messages land in TP_CTS_SLOTS receives kept posted for any source (so
 * a send never needs a receive entry of its own, which could starve
 * behind data receives);
 * clear-to-sends are paired in software with the first send waiting on
 * that (peer, tag), or kept until it is posted.  Cost: one small message
 * per message above 4 KiB.  No receive uses an ignore mask: shm 1.17 does
 * not apply one correctly to messages that arrived before the receive.
 * Per-tag order: a later send on the same (peer, tag) is held until the
 * waiting one has gone (it must not overtake it); sends on other tags are
 * not held.  Both sides decide by their own length, so a receive above
 * 4 KiB for a message of at most 4 KiB leaves a stray clear-to-send
 * behind; fccl always receives exact sizes.
 *
 * Clear-to-send on net.  net holds every later message of a connection
 * behind one (above its 128 B inject size) that came before its receive,
 * and drops the connection after a message longer than its receive (see
 * streams_into_recv in ep.c).  So its sends above 128 B wait for the
 * clear-to-send too, except those up to the eager limit (32 KiB), which
 * go at once into bounce receives (eager.c).  A send longer than the
 * receive the clear-to-send announces sends a truncation notice instead:
 * its size, marked by the remote CQ data TP_TRUNC_DATA, which fails the
 * receive naming both sizes while the connection carries on; the send
 * fails the same way.  (shm reports the truncation of an expected
 * message itself, and CMA checks the size on the receiver.)
 *
 * Single copy (CMA).  shm's own large-message path also uses CMA, but
 * copies while holding a spin lock on the receiver's region that every
 * sender to that process needs; with two ranks each sending and
 * receiving, a quarter of a 64 MiB all_gather was spent spinning on it
 * (perf, bench/RESULTS.md).  Here the copy runs in our CQ handler, outside
 * any libfabric lock.  For a send of at least TP_CMA_MIN bytes to a peer
 * known to accept CMA: the sender injects a 24-byte descriptor {address,
 * length, cookie} on the data tag with remote CQ data TP_CMA_RTS; it lands
 * in the receive; the receiver reads the payload straight from the
 * sender's memory into its buffer and injects FIN {cookie, status}; the
 * send completes then.  The receiver only ever reads, and only while its
 * own receive is live, so a cancelled or failed operation on either side
 * can never write into another process.  Eager: the descriptor is an
 * inject, so the first TP_CMA_EAGER_MAX sends in flight to a peer go
 * without waiting for the clear-to-send (one hop saved; the bound keeps
 * shm's unexpected pool small).  The receiver, which cannot tell, still
 * sends its clear-to-send; it is owed to the eager send, which stays on
 * the peer's rendezvous list until it arrives (or FIN does), so later
 * sends on the same tag take the later clear-to-sends.  Permission: before
 * its first CMA send to a peer, a sender asks PROBE {pid, pid-ns inode,
 * address and value of a random word}; the peer reads the word and
 * answers PROBE_ACK {ok}; sends go through the provider until it says yes.
 *
 * Chunking.  A message longer than the endpoint's max_msg_size (or
 * opts.max_chunk) travels as chunks, each posted when the previous one
 * completed.  The receiver splits its buffer the same way, so a chunked
 * transfer needs the receive to be as long as the message (a short final
 * chunk also ends it early).  Chunks of two messages on one (peer, tag)
 * would mix: a chunked message must be alone in flight on its (peer, tag)
 * (collective tags always are).
 */
#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "err.h"
#include "log.h"
#include "tp_int.h"

/* Below this shm's own path is as fast: 2-rank all_to_all with 32 and
 * 64 KiB blocks takes the same time either way, with 128 KiB blocks 15-19
 * us here against 27-29 us through shm. */
#define TP_CMA_MIN (64u << 10)
#define TP_CMA_EAGER_MAX 8

/* What step_post did: posted (the provider owns r now), completed inline
 * (an inject), a clear-to-send or a CMA descriptor went out. */
enum { POSTED = 0, INLINE_DONE = 1, CTS_SENT = 2, DESC_SENT = 3,
       TRUNC_SENT = 4 };

static void rv_release(struct fccl_tp *tp, int peer, uint64_t tag);
static void rv_remove(struct fccl_tp *tp, struct tp_req *r);

/* Does a message of this length on e use the clear-to-send handshake? */
static int needs_cts(const struct tp_ep *e, size_t len)
{
    return e->rndv && e->directed && len > e->inject_size &&
           !tp_eager_is(e, len); /* eager.c: none */
}

/* The clear-to-send said the receive is `len` B: a longer send sends a
 * notice instead of its data (not on shm, whose provider reports the
 * truncation of an expected message itself and carries on). */
static void check_fit(const struct tp_ep *e, struct tp_req *r, size_t len)
{
    if (!e->is_shm && len < P(r)->total) {
        P(r)->trunc = 1;
        P(r)->olen = len;
    }
}

void tp_rv_finish(struct fccl_tp *tp, struct tp_req *r, int status)
{
    struct tp_req_priv *p = P(r);
    if (p->in_rv) {
        rv_remove(tp, r);
        rv_release(tp, r->peer, p->tag);
    }
    tp_mr_put(&tp->eps[p->ep], p->mr);
    p->mr = NULL;
    r->status = status;
    if (status)
        atomic_store(&tp->failed, 1);
    atomic_store_explicit(&r->state, status ? TP_REQ_ERROR : TP_REQ_DONE,
                          memory_order_release);
}

/* ------------------------------------------------------------------ */
/* CMA sends waiting for FIN                                          */
/* ------------------------------------------------------------------ */

/* How should send r use CMA?  Starts the permission probe on first use. */
static int cma_plan(struct fccl_tp *tp, struct tp_ep *e, struct tp_req *r)
{
    struct tp_peer *p = &tp->peers[r->peer];
    if (!tp->cma_ok || !e->is_shm || !e->rndv || !e->directed ||
        P(r)->total < TP_CMA_MIN || P(r)->total <= e->inject_size)
        return TP_CMA_OFF;
    if (p->cma == TP_CMA_UNKNOWN) {
        p->cma = TP_CMA_PROBING;
        tp_ctl_send(tp, r->peer, TP_CTL_PROBE, (uint64_t)tp->pid, tp->pidns,
                    (uint64_t)(uintptr_t)&tp->cma_magic, tp->cma_magic);
    }
    if (p->cma != TP_CMA_YES)
        return TP_CMA_OFF;
    return p->eager_out < TP_CMA_EAGER_MAX ? TP_CMA_EAGER : TP_CMA_AFTER_CTS;
}

static void fin_wait(struct fccl_tp *tp, struct tp_req *r)
{
    struct tp_peer *p = &tp->peers[r->peer];
    P(r)->phase = TP_PH_WAIT_FIN;
    P(r)->fnext = p->fin_head;
    p->fin_head = r;
    p->eager_out += P(r)->cma == TP_CMA_EAGER;
}

/* Take the send with this cookie off its peer's FIN list. */
static struct tp_req *fin_take(struct tp_peer *p, uint64_t cookie)
{
    for (struct tp_req **pp = &p->fin_head; *pp; pp = &P(*pp)->fnext) {
        struct tp_req *r = *pp;
        if ((uint64_t)(uintptr_t)r == cookie) {
            *pp = P(r)->fnext;
            P(r)->fnext = NULL;
            p->eager_out -= P(r)->cma == TP_CMA_EAGER;
            return r;
        }
    }
    return NULL;
}

/* ------------------------------------------------------------------ */
/* Posting a request's next wire message                              */
/* ------------------------------------------------------------------ */

/* POSTED, INLINE_DONE, CTS_SENT, DESC_SENT, or a negative fi errno
 * (tp_post_busy() ones are retried later). */
static ssize_t step_post(struct fccl_tp *tp, struct tp_req *r)
{
    struct tp_req_priv *p = P(r);
    if (!r->is_send) {
        if (p->phase == TP_PH_SEND_CTS) {
            ssize_t rc = tp_post_cts(tp, r);
            return rc == 0 ? CTS_SENT : rc;
        }
        return tp_post_recv(tp, r);
    }
    if (p->trunc) {
        ssize_t rc = tp_post_trunc(tp, r);
        return rc == 0 ? TRUNC_SENT : rc;
    }
    if (p->mode == TP_MODE_SINGLE && p->cma) {
        ssize_t rc = tp_post_desc(tp, r);
        return rc == 0 ? DESC_SENT : rc;
    }
    return tp_post_data(tp, r); /* INLINE_DONE for an inject */
}

static void post_failed(struct fccl_tp *tp, struct tp_req *r, ssize_t rc)
{
    LOG_DEBUG("FABRIC", "%s: rank %d: %s %zu B: %s", tp->eps[P(r)->ep].prov,
              r->peer, r->is_send ? "send" : "recv", P(r)->total,
              tp_fi_strerror((int)rc));
    P(r)->fi_err = (int)-rc;
    tp_rv_finish(tp, r, FCCL_ERR_FABRIC);
}

/* Outcome of a post that was not busy.  A failure is recorded in the
 * request only: this may run in another thread's progress call, so the
 * thread-local message is left to the request's waiter.  A receive that
 * owes a clear-to-send sends it now, or queues it (SEND_CTS). */
static int posted(struct fccl_tp *tp, struct tp_req *r, ssize_t rc)
{
    struct tp_req_priv *p = P(r);
    if (rc < 0) {
        post_failed(tp, r, rc);
        return FCCL_ERR_FABRIC;
    }
    switch (rc) {
    case INLINE_DONE:
        p->off = r->len = p->total;
        tp_rv_finish(tp, r, FCCL_OK);
        return FCCL_OK;
    case CTS_SENT:
        p->phase = TP_PH_DATA;
        return FCCL_OK;
    case DESC_SENT:
        fin_wait(tp, r);
        return FCCL_OK;
    case TRUNC_SENT:
        r->len = 0;
        tp_rv_finish(tp, r, FCCL_ERR_PROTOCOL);
        return FCCL_OK;
    }
    tp->outstanding++;
    if (!r->is_send && p->off == 0 && needs_cts(&tp->eps[p->ep], p->total)) {
        p->phase = TP_PH_SEND_CTS;
        ssize_t c = step_post(tp, r);
        if (tp_post_busy(c)) {
            tp_q_push(tp, r, 0);
            return FCCL_OK;
        }
        p->phase = TP_PH_DATA;
        if (c < 0)
            LOG_WARN("FABRIC", "rank %d: clear-to-send: %s", r->peer,
                     tp_fi_strerror((int)c));
    }
    return FCCL_OK;
}

/* The next chunk: post it, or go to the front of the queue (the message
 * has started, so it precedes anything queued later on its tag). */
static void continue_req(struct fccl_tp *tp, struct tp_req *r)
{
    ssize_t rc = step_post(tp, r);
    if (tp_post_busy(rc)) {
        atomic_fetch_add(&tp->st_eagain, 1);
        tp_q_push(tp, r, 1);
        return;
    }
    posted(tp, r, rc);
}

/* Post r now, or behind what is already queued for its peer. */
static void post_or_queue(struct fccl_tp *tp, struct tp_req *r)
{
    if (*tp_q_head(tp, r)) {
        tp_q_push(tp, r, 0);
        return;
    }
    ssize_t rc = step_post(tp, r);
    if (tp_post_busy(rc))
        tp_q_push(tp, r, 0);
    else
        posted(tp, r, rc);
}

static void drain(struct fccl_tp *tp, struct tp_req **head)
{
    while (*head) {
        struct tp_req *r = *head;
        ssize_t rc = step_post(tp, r);
        if (tp_post_busy(rc))
            return;
        tp_q_pop(tp, r);
        posted(tp, r, rc);
    }
}

void tp_rv_drain(struct fccl_tp *tp, struct tp_ep *e)
{
    if (e->cts_unposted)
        tp_slots_post(e);
    if (e->eager_unposted)
        tp_eager_post(e);
    if (e->ctlq_head)
        tp_ctl_drain(tp, e);
    drain(tp, &e->ctsq_head);
    drain(tp, &e->rxq_head);
    if (!e->txq_count)
        return;
    for (int p = 0; p < tp->nranks; p++)
        if (tp->peers[p].txq_head && tp->peers[p].ep == (int)(e - tp->eps))
            drain(tp, &tp->peers[p].txq_head);
}

/* ------------------------------------------------------------------ */
/* Rendezvous order (per peer)                                        */
/* ------------------------------------------------------------------ */

static int rv_has_tag(const struct tp_peer *p, uint64_t tag)
{
    for (const struct tp_req *q = p->rv_head; q; q = PC(q)->rnext)
        if (PC(q)->tag == tag)
            return 1;
    return 0;
}

static void rv_append(struct fccl_tp *tp, struct tp_req *r)
{
    struct tp_req **pp = &tp->peers[r->peer].rv_head;
    while (*pp)
        pp = &P(*pp)->rnext;
    P(r)->rnext = NULL;
    P(r)->in_rv = 1;
    *pp = r;
}

static void rv_remove(struct fccl_tp *tp, struct tp_req *r)
{
    for (struct tp_req **pp = &tp->peers[r->peer].rv_head; *pp;
         pp = &P(*pp)->rnext) {
        if (*pp == r) {
            *pp = P(r)->rnext;
            break;
        }
    }
    P(r)->rnext = NULL;
    P(r)->in_rv = 0;
}

/* Claim a clear-to-send that arrived before its send. */
static int early_take(struct tp_peer *p, uint64_t tag, size_t *len)
{
    for (struct tp_early_cts **pp = &p->early; *pp; pp = &(*pp)->next) {
        if ((*pp)->tag == tag) {
            struct tp_early_cts *c = *pp;
            *pp = c->next;
            *len = c->len;
            free(c);
            return 1;
        }
    }
    return 0;
}

static void early_keep(struct tp_peer *p, uint64_t tag, size_t len,
                       int peer)
{
    struct tp_early_cts *n = malloc(sizeof(*n));
    if (!n) {
        LOG_ERROR("FABRIC", "rank %d: clear-to-send lost (out of memory)",
                  peer);
        return;
    }
    n->tag = tag;
    n->len = len;
    n->next = NULL;
    struct tp_early_cts **pp = &p->early;
    while (*pp)
        pp = &(*pp)->next;
    *pp = n;
}

/* Does send r still wait for a clear-to-send?  One that came early is
 * claimed (and its receive's size checked). */
static int cts_owed(struct fccl_tp *tp, struct tp_req *r)
{
    struct tp_ep *e = &tp->eps[P(r)->ep];
    size_t len;
    if (!needs_cts(e, P(r)->total))
        return 0;
    if (!early_take(&tp->peers[r->peer], P(r)->tag, &len))
        return 1;
    check_fit(e, r, len);
    return 0;
}

/* The first same-tag entry left the list: start the held ones in order,
 * up to the next one that must wait for its own clear-to-send. */
static void rv_release(struct fccl_tp *tp, int peer, uint64_t tag)
{
    struct tp_req *q = tp->peers[peer].rv_head;
    while (q) {
        struct tp_req *nx = P(q)->rnext;
        if (P(q)->tag != tag) {
            q = nx;
            continue;
        }
        if (P(q)->phase != TP_PH_HELD)
            return;
        int owed = cts_owed(tp, q);
        if (owed && P(q)->cma != TP_CMA_EAGER) {
            P(q)->phase = TP_PH_WAIT_CTS; /* stays first on the list */
            return;
        }
        P(q)->phase = TP_PH_DATA;
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
/* Control messages                                                   */
/* ------------------------------------------------------------------ */

/* Clear-to-send: the receiver of (peer, tag) is ready; start the first
 * send waiting for it, or keep the news for the send still to come. */
static void on_cts(struct fccl_tp *tp, int peer, uint64_t tag, size_t len)
{
    struct tp_peer *p = &tp->peers[peer];
    for (struct tp_req *r = p->rv_head; r; r = P(r)->rnext) {
        if (P(r)->tag != tag)
            continue;
        if (P(r)->phase == TP_PH_HELD)
            break;
        rv_remove(tp, r);
        if (P(r)->phase == TP_PH_WAIT_CTS) {
            check_fit(&tp->eps[P(r)->ep], r, len);
            P(r)->phase = TP_PH_DATA;
            post_or_queue(tp, r);
        } /* else an eager CMA send already went: this was owed to it */
        rv_release(tp, peer, tag);
        return;
    }
    early_keep(p, tag, len, peer);
}

static void on_probe(struct fccl_tp *tp, int peer, const uint64_t *m)
{
    int ok = tp_cma_probe_ok(tp, (int)m[2], m[3], m[4], m[5]);
    if (ok)
        tp->peers[peer].pid = (int)m[2];
    tp_ctl_send(tp, peer, TP_CTL_PROBE_ACK, (uint64_t)ok, 0, 0, 0);
}

static void on_fin(struct fccl_tp *tp, int peer, const uint64_t *m)
{
    struct tp_req *r = fin_take(&tp->peers[peer], m[2]);
    if (!r) /* the send was cancelled meanwhile */
        return;
    int status = (int)(int64_t)m[3];
    if (status > 0 || status < FCCL_ERR_AUTH)
        status = FCCL_ERR_PROTOCOL; /* not a status we know */
    r->len = P(r)->off = status == FCCL_OK ? P(r)->total : 0;
    tp_rv_finish(tp, r, status);
}

static void on_ctl(struct fccl_tp *tp, struct tp_ep *e,
                   struct tp_cts_slot *c)
{
    uint64_t msg[TP_CTL_WORDS];
    memcpy(msg, c->msg, sizeof(msg));
    c->posted = 0;
    tp_slots_post(e);
    if (msg[0] >= (uint64_t)tp->nranks) {
        LOG_WARN("FABRIC", "%s: control message from unknown rank %llu",
                 e->prov, (unsigned long long)msg[0]);
        return;
    }
    int peer = (int)msg[0];
    switch (msg[1]) {
    case TP_CTL_CTS:
        on_cts(tp, peer, msg[2], (size_t)msg[3]);
        break;
    case TP_CTL_PROBE:
        on_probe(tp, peer, msg);
        break;
    case TP_CTL_PROBE_ACK:
        tp->peers[peer].cma = msg[2] ? TP_CMA_YES : TP_CMA_NO;
        LOG_DEBUG("FABRIC", "rank %d: CMA %s", peer,
                  msg[2] ? "on" : "refused, shm copies");
        break;
    case TP_CTL_FIN:
        on_fin(tp, peer, msg);
        break;
    case TP_CTL_BYE:
        tp->peers[peer].bye_in = 1;
        break;
    default:
        LOG_WARN("FABRIC", "rank %d: unknown control message %llu", peer,
                 (unsigned long long)msg[1]);
    }
}

int tp_rv_start(struct fccl_tp *tp)
{
    for (int i = 0; i < tp->nep; i++) {
        struct tp_ep *e = &tp->eps[i];
        if (!e->rndv || !e->directed)
            continue;
        for (int k = 0; k < TP_CTS_SLOTS; k++)
            e->cts[k].posted = 0;
        tp_slots_post(e);
        if (e->cts_unposted == TP_CTS_SLOTS)
            return fccl_err(FCCL_ERR_FABRIC, "transport: %s: cannot post "
                            "clear-to-send receives", e->prov);
        int rc = tp_eager_open(tp, e);
        if (rc < 0)
            return rc;
    }
    return FCCL_OK;
}

void tp_rv_stop(struct fccl_tp *tp)
{
    for (int p = 0; p < tp->nranks; p++)
        while (tp->peers[p].early) {
            size_t len;
            early_take(&tp->peers[p], tp->peers[p].early->tag, &len);
        }
    for (int i = 0; i < tp->nep; i++)
        tp_ctl_free(&tp->eps[i]);
    tp_eager_free(tp);
}

/* ------------------------------------------------------------------ */
/* Completions                                                        */
/* ------------------------------------------------------------------ */

static int status_of_errno(int err)
{
    /* ESRCH: the sender is gone; EFAULT: its buffer is (a failed send) */
    return err == ESRCH || err == EFAULT ? FCCL_ERR_PEER : FCCL_ERR_FABRIC;
}

/* Receive r got a CMA descriptor instead of data: fetch the payload,
 * then tell the sender (FIN). */
static void on_desc(struct fccl_tp *tp, struct tp_req *r)
{
    struct tp_req_priv *rp = P(r);
    struct tp_peer *p = &tp->peers[r->peer];
    struct { uint64_t addr, len, cookie; } d;
    memcpy(&d, rp->buf, sizeof(d));
    int status = FCCL_OK;
    if (p->pid <= 0) {
        rp->fi_err = EPROTO;
        status = FCCL_ERR_PROTOCOL; /* no probe came first: a bug */
    } else if (d.len > rp->total) {
        r->len = rp->total;
        rp->olen = d.len - rp->total;
        status = FCCL_ERR_PROTOCOL;
    } else {
        int err = tp_cma_pull(p->pid, d.addr, rp->buf, d.len);
        r->len = err ? 0 : d.len;
        rp->fi_err = err;
        if (!err)
            atomic_fetch_add(&tp->st_cma, 1);
        status = err ? status_of_errno(err) : FCCL_OK;
        if (err)
            LOG_DEBUG("FABRIC", "rank %d: CMA read of %llu B: %s", r->peer,
                      (unsigned long long)d.len, strerror(err));
    }
    rp->off = r->len;
    tp_ctl_send(tp, r->peer, TP_CTL_FIN, d.cookie, (uint64_t)(int64_t)status,
                0, 0);
    tp_rv_finish(tp, r, status);
}

static void send_done(struct fccl_tp *tp, struct tp_req *r)
{
    struct tp_req_priv *p = P(r);
    p->off += p->chunk;
    if (p->mode == TP_MODE_CHUNKED && p->off < p->total) {
        continue_req(tp, r);
        return;
    }
    r->len = p->off;
    tp_rv_finish(tp, r, FCCL_OK);
}

/* A receive completed by a notice (a CMA descriptor, a truncation) rather
 * than data? */
static int is_notice(const struct tp_req *r,
                     const struct fi_cq_tagged_entry *ent)
{
    return (ent->flags & FI_REMOTE_CQ_DATA) &&
           (ent->data == TP_CMA_RTS || ent->data == TP_TRUNC_DATA) &&
           PC(r)->off == 0;
}

/* The sender's message does not fit receive r; the notice holds its
 * size.  Nothing else of that message comes. */
static void on_trunc(struct fccl_tp *tp, struct tp_req *r)
{
    uint64_t len;
    memcpy(&len, P(r)->buf, sizeof(len));
    r->len = 0;
    P(r)->olen = (size_t)len;
    tp_rv_finish(tp, r, FCCL_ERR_PROTOCOL);
}

static void recv_done(struct fccl_tp *tp, struct tp_req *r, size_t len)
{
    struct tp_req_priv *p = P(r);
    p->off += len;
    /* Chunked: a full chunk short of the end asks for the next one. */
    if (len == p->chunk && p->off < p->total) {
        continue_req(tp, r);
        return;
    }
    r->len = p->off;
    if (p->queued) /* its clear-to-send was never sent: moot now */
        tp_q_pop(tp, r);
    tp_rv_finish(tp, r, FCCL_OK);
}

void tp_rv_on_cq(struct fccl_tp *tp, struct tp_ep *e,
                 const struct fi_cq_tagged_entry *ent)
{
    struct tp_cts_slot *c = tp_slot_of(e, ent->op_context);
    if (c) {
        on_ctl(tp, e, c);
        return;
    }
    struct tp_eager_slot *s = tp_eager_slot_of(e, ent->op_context);
    if (s) {
        int status = FCCL_OK;
        struct tp_req *r = tp_eager_arrived(tp, e, s, ent, &status);
        if (r)
            tp_rv_finish(tp, r, status);
        return;
    }
    struct tp_req *r = tp_req_of_ctx(ent->op_context);
    tp->outstanding--;
    if (r->is_send) {
        send_done(tp, r);
        return;
    }
    if (is_notice(r, ent)) {
        if (P(r)->queued) /* its clear-to-send is moot */
            tp_q_pop(tp, r);
        if (ent->data == TP_CMA_RTS)
            on_desc(tp, r);
        else
            on_trunc(tp, r);
        return;
    }
    recv_done(tp, r, ent->len);
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

void tp_rv_on_err(struct fccl_tp *tp, struct tp_ep *e, void *ctx,
                  const struct fi_cq_err_entry *ee)
{
    struct tp_cts_slot *c = tp_slot_of(e, ctx);
    if (c) { /* cancelled at close, or a malformed clear-to-send */
        c->posted = 0;
        if (ee->err != FI_ECANCELED && ee->err != -FI_ECANCELED)
            tp_slots_post(e);
        return;
    }
    struct tp_eager_slot *s = tp_eager_slot_of(e, ctx);
    if (s) {
        tp_eager_slot_failed(e, s, ee->err);
        return;
    }
    struct tp_req *r = tp_req_of_ctx(ctx);
    struct tp_req_priv *p = P(r);
    tp->outstanding--;
    if (p->queued)
        tp_q_pop(tp, r);
    p->fi_err = ee->err < 0 ? -ee->err : ee->err; /* shm reports it negated */
    /* The overflow is exact only for a single message (0 = unknown). */
    p->olen = ee->tag & TP_CHUNK_BIT ? 0 : ee->olen;
    r->len = p->off + ee->len;
    LOG_DEBUG("FABRIC", "%s: rank %d %s failed: %s", tp->eps[p->ep].prov,
              r->peer, r->is_send ? "send" : "recv",
              tp_fi_strerror(p->fi_err));
    int status = status_of_fi_err(p->fi_err);
    /* cancelled without our asking: the provider dropped its connection
     * to the peer (net does, for everything in flight on it) */
    if (status == FCCL_ERR_ABORTED && !p->cancelled)
        status = FCCL_ERR_PEER;
    tp_rv_finish(tp, r, status);
}

/* ------------------------------------------------------------------ */
/* Starting and dropping a request                                    */
/* ------------------------------------------------------------------ */

static int plan_send(struct fccl_tp *tp, struct tp_ep *e, struct tp_req *r)
{
    struct tp_req_priv *rp = P(r);
    rp->mode = TP_MODE_SINGLE;
    if (rp->total > tp_chunk_limit(tp, e)) {
        if (!e->directed)
            return fccl_err(FCCL_ERR_INVALID, "tp_isend: rank %d: %zu B "
                            "exceeds %s's %zu B message limit", r->peer,
                            rp->total, e->prov, tp_chunk_limit(tp, e));
        rp->mode = TP_MODE_CHUNKED;
    }
    struct tp_peer *p = &tp->peers[r->peer];
    rp->cma = rp->mode == TP_MODE_SINGLE ? cma_plan(tp, e, r) : TP_CMA_OFF;
    /* held: must not overtake a same-tag send; owed: a clear-to-send is
     * due to it (an eager CMA send goes at once and stays listed) */
    int held = p->rv_head && rv_has_tag(p, rp->tag);
    int owed = !held && cts_owed(tp, r);
    rp->phase = held ? TP_PH_HELD
              : owed && rp->cma != TP_CMA_EAGER ? TP_PH_WAIT_CTS
                                                : TP_PH_DATA;
    if (held || owed)
        rv_append(tp, r);
    return FCCL_OK;
}

/* Start r: plan it, then post it now or queue it behind its queue (the
 * waiter's progress call retries the queue; a post never drives
 * progress).  FCCL_ERR_FABRIC when the post failed (r is finished). */
int tp_rv_submit(struct fccl_tp *tp, struct tp_req *r)
{
    tp->peers[r->peer].talked = 1;
    if (r->is_send) {
        int rc = plan_send(tp, &tp->eps[P(r)->ep], r);
        if (rc < 0) {
            tp_rv_finish(tp, r, rc);
            return rc;
        }
        if (P(r)->phase != TP_PH_DATA) /* held, or waiting for its CTS */
            return FCCL_OK;
    } else if (tp_eager_is(&tp->eps[P(r)->ep], P(r)->total)) {
        int status = FCCL_OK;
        if (tp_eager_recv(tp, r, &status))
            tp_rv_finish(tp, r, status);
        return FCCL_OK;
    }
    if (!*tp_q_head(tp, r)) {
        ssize_t rc = step_post(tp, r);
        if (!tp_post_busy(rc))
            return posted(tp, r, rc);
        atomic_fetch_add(&tp->st_eagain, 1);
    }
    tp_q_push(tp, r, 0);
    return FCCL_OK;
}

/* Drop r from wherever it waits outside the provider.  1 if it was not in
 * the provider (now finished as aborted); a receive queued just for its
 * clear-to-send is posted, so the caller must cancel it in the provider
 * too (0). */
int tp_rv_unqueue(struct fccl_tp *tp, struct tp_req *r)
{
    struct tp_req_priv *p = P(r);
    if (p->phase == TP_PH_EAGER_RX) {
        tp_eager_unlink(tp, r);
        tp_rv_finish(tp, r, FCCL_ERR_ABORTED);
        return 1;
    }
    if (p->phase == TP_PH_WAIT_FIN) {
        fin_take(&tp->peers[r->peer], (uint64_t)(uintptr_t)r);
        tp_rv_finish(tp, r, FCCL_ERR_ABORTED);
        return 1;
    }
    if (p->phase == TP_PH_HELD || p->phase == TP_PH_WAIT_CTS) {
        if (p->queued)
            tp_q_pop(tp, r);
        tp_rv_finish(tp, r, FCCL_ERR_ABORTED);
        return 1;
    }
    if (!p->queued)
        return 0;
    tp_q_pop(tp, r);
    if (p->phase == TP_PH_SEND_CTS)
        return 0;
    tp_rv_finish(tp, r, FCCL_ERR_ABORTED);
    return 1;
}
