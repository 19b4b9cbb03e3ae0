/*
 * Eager messages on net: every message up to FCCL_EAGER_BYTES (32 KiB),
 * none waiting for a clear-to-send.
 *
 * net stops a connection behind a message above its inject size that
 * arrives before its receive, so such sends wait for the receiver's
 * clear-to-send (rndv.c); that costs one more one-way latency whenever
 * both sides post at about the same time (13-16 % of 512 B-32 KiB
 * collectives across hosts).  Here messages up to the limit instead go
 * at once, on tag TP_EAGER_TAG | sender rank with the real tag in the
 * remote CQ data, into TP_EAGER_SLOTS bounce receives kept posted for
 * any source (the small ones too, so that a receive of any size up to
 * the limit takes any message that fits: both sides choose the path by
 * their own size); a receive of those sizes is not given to the provider but
 * kept on its peer's list, and an arrival is copied into the first
 * receive waiting on that (peer, tag), or, if none waits yet, into a
 * heap copy that the next such receive takes.  A slot is posted again as
 * soon as its message is copied out, so nothing waits on the
 * application: early messages cannot stop the connection.  Cost: one
 * copy of at most 32 KiB on the receiving side, and 16 x 32 KiB of slots
 * per network endpoint.
 *
 * A message longer than its receive fails the receive naming both sizes
 * (the send has completed; the connection carries on).  A receive above
 * the limit for a message at or below it never sees the message and
 * times out (fccl's collectives and point-to-point calls post exact
 * sizes).
 */
#include <stdlib.h>
#include <string.h>

#include "env.h"
#include "err.h"
#include "log.h"
#include "tp_int.h"

#define EAGER_ENV "FCCL_EAGER_BYTES"

struct tp_early_msg {
    uint64_t tag;
    size_t len;
    struct tp_early_msg *next;
    unsigned char data[];
};

static size_t env_limit(size_t fallback)
{
    uint64_t v = 0;
    int got = fccl_env_bytes(EAGER_ENV, &v);
    if (got < 0)
        LOG_WARN("FABRIC", "%s=%s is not a size; using %zu", EAGER_ENV,
                 getenv(EAGER_ENV), fallback);
    if (got != 1)
        return fallback;
    return v > TP_EAGER_MAX ? TP_EAGER_MAX : (size_t)v;
}

size_t tp_eager_limit(void)
{
    return env_limit(TP_EAGER_DEFAULT);
}

int tp_eager_open(struct fccl_tp *tp, struct tp_ep *e)
{
    e->eager_max = 0;
    if (e->is_shm || !e->rndv || !e->directed)
        return FCCL_OK;
    size_t max = tp_eager_limit();
    if (max > tp_chunk_limit(tp, e))
        max = tp_chunk_limit(tp, e);
    if (max <= e->inject_size)
        return FCCL_OK; /* off */
    e->eager_buf = malloc(max * TP_EAGER_SLOTS);
    if (!e->eager_buf)
        return fccl_err(FCCL_ERR_NOMEM, "transport: %s: no memory for eager "
                        "receives", e->prov);
    e->eager_max = max;
    for (int k = 0; k < TP_EAGER_SLOTS; k++)
        e->eslots[k].posted = 0;
    tp_eager_post(e);
    if (e->eager_unposted == TP_EAGER_SLOTS)
        return fccl_err(FCCL_ERR_FABRIC, "transport: %s: cannot post eager "
                        "receives", e->prov);
    return FCCL_OK;
}

void tp_eager_post(struct tp_ep *e)
{
    e->eager_unposted = 0;
    for (int k = 0; k < TP_EAGER_SLOTS; k++) {
        struct tp_eager_slot *s = &e->eslots[k];
        if (s->posted)
            continue;
        ssize_t rc = fi_trecv(e->ep, e->eager_buf + (size_t)k * e->eager_max,
                              e->eager_max, NULL, FI_ADDR_UNSPEC,
                              TP_EAGER_TAG, TP_EAGER_RANKS, &s->ctx);
        if (rc == 0)
            s->posted = 1;
        else
            e->eager_unposted++;
    }
}

struct tp_eager_slot *tp_eager_slot_of(struct tp_ep *e, void *ctx)
{
    if (!e->eager_max || (char *)ctx < (char *)e->eslots ||
        (char *)ctx >= (char *)(e->eslots + TP_EAGER_SLOTS))
        return NULL;
    return (struct tp_eager_slot *)ctx;
}

/* Copy len bytes of a message into receive r: r->len, and on overflow
 * olen; the status to finish r with. */
static int deliver(struct tp_req *r, const void *data, size_t len)
{
    struct tp_req_priv *p = P(r);
    size_t n = len < p->total ? len : p->total;
    if (n)
        memcpy(p->buf, data, n);
    r->len = p->off = n;
    if (len <= p->total)
        return FCCL_OK;
    p->olen = len - p->total;
    return FCCL_ERR_PROTOCOL;
}

int tp_eager_recv(struct fccl_tp *tp, struct tp_req *r, int *status)
{
    struct tp_peer *peer = &tp->peers[r->peer];
    for (struct tp_early_msg **pp = &peer->emsg_head; *pp;
         pp = &(*pp)->next) {
        struct tp_early_msg *m = *pp;
        if (m->tag != P(r)->tag)
            continue;
        *pp = m->next;
        *status = deliver(r, m->data, m->len);
        free(m);
        return 1;
    }
    P(r)->phase = TP_PH_EAGER_RX;
    P(r)->rnext = NULL;
    if (peer->erx_tail)
        P(peer->erx_tail)->rnext = r;
    else
        peer->erx_head = r;
    peer->erx_tail = r;
    return 0;
}

/* Take the first waiting receive that `match` accepts off peer's list. */
static struct tp_req *take_waiting(struct tp_peer *peer,
                                   int (*match)(const struct tp_req *,
                                                const void *),
                                   const void *arg)
{
    struct tp_req *prev = NULL;
    for (struct tp_req *q = peer->erx_head; q; prev = q, q = P(q)->rnext) {
        if (!match(q, arg))
            continue;
        if (prev)
            P(prev)->rnext = P(q)->rnext;
        else
            peer->erx_head = P(q)->rnext;
        if (peer->erx_tail == q)
            peer->erx_tail = prev;
        P(q)->rnext = NULL;
        return q;
    }
    return NULL;
}

static int is_req(const struct tp_req *q, const void *r) { return q == r; }

static int has_tag(const struct tp_req *q, const void *tag)
{
    return PC(q)->tag == *(const uint64_t *)tag;
}

void tp_eager_unlink(struct fccl_tp *tp, struct tp_req *r)
{
    take_waiting(&tp->peers[r->peer], is_req, r);
}

/* Keep a message nobody waits for yet (its receive takes it later). */
static void keep_early(struct tp_peer *peer, uint64_t tag, const void *data,
                       size_t len, int from)
{
    struct tp_early_msg *m = malloc(sizeof(*m) + len);
    if (!m) {
        LOG_ERROR("FABRIC", "rank %d: eager message of %zu B lost (out of "
                  "memory)", from, len);
        return;
    }
    m->tag = tag;
    m->len = len;
    m->next = NULL;
    memcpy(m->data, data, len);
    struct tp_early_msg **pp = &peer->emsg_head;
    while (*pp) /* per (peer, tag) order is arrival order */
        pp = &(*pp)->next;
    *pp = m;
}

struct tp_req *tp_eager_arrived(struct fccl_tp *tp, struct tp_ep *e,
                                struct tp_eager_slot *s,
                                const struct fi_cq_tagged_entry *ent,
                                int *status)
{
    const unsigned char *data = e->eager_buf +
                                (size_t)(s - e->eslots) * e->eager_max;
    uint64_t from = ent->tag & TP_EAGER_RANKS;
    struct tp_req *found = NULL;
    s->posted = 0;
    if (from >= (uint64_t)tp->nranks) {
        LOG_WARN("FABRIC", "%s: eager message from unknown rank %llu",
                 e->prov, (unsigned long long)from);
    } else {
        struct tp_peer *peer = &tp->peers[from];
        found = take_waiting(peer, has_tag, &ent->data);
        if (found)
            *status = deliver(found, data, ent->len);
        else
            keep_early(peer, ent->data, data, ent->len, (int)from);
    }
    tp_eager_post(e);
    return found;
}

void tp_eager_slot_failed(struct tp_ep *e, struct tp_eager_slot *s, int err)
{
    s->posted = 0;
    if (err == FI_ECANCELED || err == -FI_ECANCELED)
        return; /* closing */
    LOG_WARN("FABRIC", "%s: eager receive failed: %s", e->prov,
             tp_fi_strerror(err));
    tp_eager_post(e);
}

void tp_eager_free(struct fccl_tp *tp)
{
    for (int p = 0; tp->peers && p < tp->nranks; p++)
        while (tp->peers[p].emsg_head) {
            struct tp_early_msg *m = tp->peers[p].emsg_head;
            tp->peers[p].emsg_head = m->next;
            free(m);
        }
    for (int i = 0; i < tp->nep; i++) {
        free(tp->eps[i].eager_buf);
        tp->eps[i].eager_buf = NULL;
        tp->eps[i].eager_max = 0;
    }
}
