/*
 * The transport's engine: open/close, peers, the progress engine, waiting
 * and cancelling.  Endpoint setup is in transport_ep.c, the wire protocol
 * (requests -> tagged messages, chunking, retry queues) in
 * transport_wire.c, registration in transport_mr.c.
 *
 * Matching.  A receive for (peer, tag) is a directed tagged receive: its
 * src_addr is the peer's fi_addr, so it matches only that peer's messages
 * with that tag.  Every provider used here grants FI_DIRECTED_RECV.  One
 * that does not gets the sender's rank in the tag's top 64 - TP_TAG_BITS
 * bits instead, which limits it to 16 ranks and to unchunked messages.
 *
 * Progress.  One lock guards every fi_* call (domains are opened with
 * FI_THREAD_DOMAIN).  Whichever thread waits takes it briefly (trylock, so
 * waiters never queue behind each other), reads every endpoint's CQ and
 * credits each completion to its request through the request's atomic
 * state.  isend/irecv never block (see the retry queues in
 * transport_wire.c).
 *
 * Waiting.  Tight polling while completions flow (the 8-byte latency
 * path), sched_yield() after TP_SPIN_NS without a completion, and sleeps
 * growing to TP_SLEEP_MAX_NS after TP_YIELD_NS, so oversubscribed ranks
 * (8 on 2 cores) leave the CPU to the ones that have work.  With more
 * ranks on this host than CPUs we may run on, a waiter yields after every
 * empty poll instead: the rank it waits for may be the one it keeps off
 * the CPU (4 ranks on 2 cores: 8-byte all_reduce 112 -> 15 us; with
 * spare cores spinning is 2.5x faster, 0.6 against 1.6 us).
 * FCCL_SPIN_US overrides the spin time.
 */
#include <errno.h>
#include <limits.h>
#include <sched.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "clock.h"
#include "err.h"
#include "log.h"
#include "transport/tp_int.h"

#define TP_SRC_MAX (1 << (64 - TP_TAG_BITS)) /* ranks without directed recv */
#define TP_CQ_BATCH 16
#define TP_SPIN_NS 50000ull     /* tight poll this long after progress */
#define TP_SPIN_ENV "FCCL_SPIN_US"
#define TP_YIELD_NS 1000000ull  /* then sched_yield() until this */
#define TP_SLEEP_MIN_NS 20000L  /* then sleep, doubling up to the max */
#define TP_SLEEP_MAX_NS 500000L
#define TP_DRAIN_MS 200         /* bound on draining cancelled ops */
#define TP_LIVE_NS 200000000ull /* idle this long: are the peers alive? */
#define TP_CLOCK_POLLS 16       /* polls per clock reading while spinning */

/* ------------------------------------------------------------------ */
/* Open / close                                                       */
/* ------------------------------------------------------------------ */

/* opts->provider, else FCCL_PROVIDER, else FI_PROVIDER; NULL = auto.
 * "auto" asks for auto explicitly; a FI_PROVIDER list or exclusion
 * ("^shm", "a,b") only filters libfabric itself, so it means auto here. */
static const char *forced_provider(const struct tp_opts *o)
{
    const char *p = o->provider;
    if (!p || !*p)
        p = getenv("FCCL_PROVIDER");
    if (!p || !*p) {
        p = getenv("FI_PROVIDER");
        if (p && (strchr(p, ',') || p[0] == '^'))
            p = NULL;
    }
    if (!p || !*p || strcmp(p, "auto") == 0)
        return NULL;
    return p;
}

static int open_auto(struct fccl_tp *tp, const struct tp_opts *o,
                     const char *iface)
{
    int rc = tp_ep_open(&tp->eps[0], TP_EP_SHM, NULL, iface, 0);
    if (rc == FCCL_OK)
        tp->nep = 1;
    else
        LOG_INFO("FABRIC", "no shm endpoint (%s); using the network for "
                 "every peer", fccl_last_error());
    if (tp->nep && !o->need_network)
        return FCCL_OK;
    rc = tp_ep_open(&tp->eps[tp->nep], TP_EP_NET, NULL, iface, 0);
    if (rc < 0)
        return rc;
    tp->nep++;
    return FCCL_OK;
}

static void describe(struct fccl_tp *tp)
{
    size_t off = 0;
    tp->desc[0] = '\0';
    for (int i = 0; i < tp->nep; i++)
        off += (size_t)snprintf(tp->desc + off, sizeof(tp->desc) - off,
                                "%s%s", i ? "+" : "", tp->eps[i].prov);
}

int tp_open(const struct tp_opts *opts, struct fccl_tp **out)
{
    static const struct tp_opts defaults;
    if (!out)
        return fccl_err(FCCL_ERR_INVALID, "tp_open: out is NULL");
    *out = NULL;
    const struct tp_opts *o = opts ? opts : &defaults;
    struct fccl_tp *tp = calloc(1, sizeof(*tp));
    if (!tp)
        return fccl_err(FCCL_ERR_NOMEM, "tp_open: out of memory");
    pthread_mutex_init(&tp->lock, NULL);
    tp->always_register = o->always_register;
    tp->max_chunk = o->max_chunk;
    tp->my_rank = -1;
    tp->spin_ns = TP_SPIN_NS;
    tp_cma_init(tp);
    const char *iface = o->net_iface ? o->net_iface : getenv("FCCL_NET_IFACE");
    const char *prov = forced_provider(o);
    uint64_t t0 = fccl_now_ns();
    int rc;
    if (prov) {
        int kind = strcmp(prov, "shm") == 0 ? TP_EP_SHM : TP_EP_NET;
        rc = tp_ep_open(&tp->eps[0], kind, prov, iface, 1);
        tp->forced = 1;
        tp->nep = rc == FCCL_OK;
    } else {
        rc = open_auto(tp, o, iface);
    }
    if (rc < 0) {
        tp_close(tp);
        return rc;
    }
    describe(tp);
    LOG_INFO("FABRIC", "transport %s (%s) open in %.1f ms", tp->desc,
             prov ? "forced" : "auto", (double)(fccl_now_ns() - t0) / 1e6);
    *out = tp;
    return FCCL_OK;
}

int tp_local_name(struct fccl_tp *tp, void *buf, size_t *len)
{
    if (!tp || !len)
        return fccl_err(FCCL_ERR_INVALID, "tp_local_name: NULL argument");
    return tp_blob_encode(tp, buf, len);
}

const char *tp_provider_desc(const struct fccl_tp *tp)
{
    return tp ? tp->desc : "";
}

/* ------------------------------------------------------------------ */
/* Peers                                                              */
/* ------------------------------------------------------------------ */

static int ep_index(const struct fccl_tp *tp, int kind)
{
    for (int i = 0; i < tp->nep; i++)
        if (tp->eps[i].kind == kind)
            return i;
    return -1;
}

/* Which of my endpoints serves rank r, and r's address on it. */
static int route(struct fccl_tp *tp, int r, const void *blob, size_t len,
                 int local, int *epi, const unsigned char **addr,
                 size_t *alen)
{
    if (tp->forced) {
        *epi = 0;
        int rc = tp_blob_find(blob, len, 0, tp->eps[0].prov, addr, alen);
        if (rc == FCCL_ERR_NOTFOUND)
            return fccl_err(FCCL_ERR_UNSUPPORTED, "transport: rank %d has "
                            "no %s endpoint (providers differ between "
                            "ranks?)", r, tp->eps[0].prov);
        return rc;
    }
    int shm = ep_index(tp, TP_EP_SHM);
    if (local && shm >= 0) {
        int rc = tp_blob_find(blob, len, TP_EP_SHM, NULL, addr, alen);
        if (rc != FCCL_ERR_NOTFOUND) {
            *epi = shm;
            return rc;
        }
    }
    int net = ep_index(tp, TP_EP_NET);
    if (net < 0)
        return fccl_err(FCCL_ERR_UNSUPPORTED, "transport: rank %d is %s but "
                        "this rank opened no network endpoint (set "
                        "need_network)", r, local ? "without shm" :
                        "on another host");
    *epi = net;
    int rc = tp_blob_find(blob, len, 0, tp->eps[net].prov, addr, alen);
    if (rc == FCCL_ERR_NOTFOUND)
        return fccl_err(FCCL_ERR_UNSUPPORTED, "transport: rank %d has no %s "
                        "endpoint", r, tp->eps[net].prov);
    return rc;
}

/* How long waiters poll before yielding (see the top of the file). */
static void set_spin(struct fccl_tp *tp, int nranks, int me,
                     const int *node_of)
{
    const char *env = getenv(TP_SPIN_ENV);
    if (env && *env) {
        char *end;
        unsigned long long us = strtoull(env, &end, 10);
        if (*end == '\0') {
            tp->spin_ns = us * 1000ull;
            return;
        }
        LOG_WARN("FABRIC", "%s=%s is not a number of microseconds; ignored",
                 TP_SPIN_ENV, env);
    }
    int local = 0;
    for (int r = 0; r < nranks; r++)
        local += !node_of || node_of[r] == node_of[me];
    cpu_set_t set;
    int cpus = sched_getaffinity(0, sizeof(set), &set) == 0 ? CPU_COUNT(&set)
                                                             : 0;
    tp->spin_ns = cpus > 0 && local > cpus ? 0 : TP_SPIN_NS;
    LOG_DEBUG("FABRIC", "%d local ranks, %d CPUs: waiters %s", local, cpus,
              tp->spin_ns ? "spin 50 us, then yield" : "yield at once");
}

static int add_peer(struct fccl_tp *tp, int r, const void *blob, size_t len,
                    int local)
{
    const unsigned char *addr;
    size_t alen = 0;
    int epi = 0;
    int rc = route(tp, r, blob, len, local, &epi, &addr, &alen);
    if (rc < 0)
        return fccl_err_wrap(rc, "tp_add_peers: rank %d", r);
    struct tp_ep *e = &tp->eps[epi];
    unsigned char tmp[TP_ADDR_MAX + 1] = {0}; /* aligned, NUL-terminated */
    memcpy(tmp, addr, alen);
    fi_addr_t fa = FI_ADDR_NOTAVAIL;
    int n = fi_av_insert(e->av, tmp, 1, &fa, 0, NULL);
    if (n != 1 || fa == FI_ADDR_NOTAVAIL)
        return fccl_err(FCCL_ERR_FABRIC, "transport: %s: fi_av_insert(rank "
                        "%d): %s", e->prov, r,
                        n < 0 ? tp_fi_strerror(n) : "address rejected");
    tp->peers[r].ep = epi;
    tp->peers[r].addr = fa;
    tp_live_add(tp, &tp->peers[r], blob, len, local);
    return FCCL_OK;
}

int tp_add_peers(struct fccl_tp *tp, int nranks, int my_rank,
                 const void *const *names, const size_t *lens,
                 const int *node_of)
{
    if (!tp || nranks <= 0 || my_rank < 0 || my_rank >= nranks || !names ||
        !lens)
        return fccl_err(FCCL_ERR_INVALID, "tp_add_peers: bad arguments "
                        "(nranks %d, rank %d)", nranks, my_rank);
    if (tp->peers)
        return fccl_err(FCCL_ERR_STATE, "tp_add_peers: peers already added");
    for (int i = 0; i < tp->nep; i++)
        if (!tp->eps[i].directed && nranks > TP_SRC_MAX)
            return fccl_err(FCCL_ERR_UNSUPPORTED, "transport: %s lacks "
                            "directed receive; at most %d ranks", 
                            tp->eps[i].prov, TP_SRC_MAX);
    struct tp_peer *peers = calloc((size_t)nranks, sizeof(*peers));
    if (!peers)
        return fccl_err(FCCL_ERR_NOMEM, "tp_add_peers: %d ranks", nranks);
    for (int r = 0; r < nranks; r++)
        peers[r].pidfd = -1;
    pthread_mutex_lock(&tp->lock);
    tp->peers = peers;
    int rc = FCCL_OK;
    for (int r = 0; r < nranks && rc == FCCL_OK; r++) {
        int local = !node_of || node_of[r] == node_of[my_rank];
        rc = add_peer(tp, r, names[r], lens[r], local);
    }
    if (rc == FCCL_OK) {
        tp->nranks = nranks;
        tp->my_rank = my_rank;
        set_spin(tp, nranks, my_rank, node_of);
        rc = tp_wire_start(tp);
    }
    if (rc < 0) {
        for (int r = 0; r < nranks; r++)
            tp_live_close(&peers[r]);
        tp->peers = NULL;
        tp->nranks = 0;
        free(peers);
    }
    pthread_mutex_unlock(&tp->lock);
    return rc;
}

int tp_peer_is_local(const struct fccl_tp *tp, int peer)
{
    if (!tp || !tp->peers || peer < 0 || peer >= tp->nranks)
        return 0;
    return tp->eps[tp->peers[peer].ep].kind == TP_EP_SHM;
}

/* ------------------------------------------------------------------ */
/* The progress engine (all under tp->lock)                           */
/* ------------------------------------------------------------------ */

static int zombie_take(struct fccl_tp *tp, void *ctx)
{
    for (size_t i = 0; i < tp->nzombies; i++) {
        if (tp->zombies[i] == ctx) {
            tp->zombies[i] = tp->zombies[--tp->nzombies];
            return 1;
        }
    }
    return 0;
}

static void read_error(struct fccl_tp *tp, struct tp_ep *e)
{
    struct fi_cq_err_entry ee;
    memset(&ee, 0, sizeof(ee));
    ssize_t rc = fi_cq_readerr(e->cq, &ee, 0);
    if (rc < 0) {
        if (rc != -FI_EAGAIN)
            LOG_WARN("FABRIC", "%s: fi_cq_readerr: %s", e->prov,
                     tp_fi_strerror((int)rc));
        return;
    }
    void *ctx = ee.op_context;
    if (ctx && !(tp->nzombies && zombie_take(tp, ctx)))
        tp_wire_on_err(tp, e, ctx, &ee);
}

/* Read one endpoint's CQ until empty (bounded); returns completions. */
static int progress_ep(struct fccl_tp *tp, struct tp_ep *e)
{
    struct fi_cq_tagged_entry ent[TP_CQ_BATCH];
    int total = 0;
    for (int round = 0; round < 4; round++) {
        ssize_t n = fi_cq_read(e->cq, ent, TP_CQ_BATCH);
        if (n == -FI_EAVAIL) {
            read_error(tp, e);
            total++;
            continue;
        }
        if (n <= 0) {
            if (n != -FI_EAGAIN)
                LOG_WARN("FABRIC", "%s: fi_cq_read: %s", e->prov,
                         tp_fi_strerror((int)n));
            break;
        }
        for (ssize_t i = 0; i < n; i++) {
            void *ctx = ent[i].op_context;
            if (ctx && !(tp->nzombies && zombie_take(tp, ctx)))
                tp_wire_on_cq(tp, e, &ent[i]);
        }
        total += (int)n;
        if (n < TP_CQ_BATCH)
            break;
    }
    tp_wire_drain(tp, e);
    return total;
}

int tp_progress_locked(struct fccl_tp *tp)
{
    int n = 0;
    for (int i = 0; i < tp->nep; i++)
        n += progress_ep(tp, &tp->eps[i]);
    if (n)
        atomic_fetch_add(&tp->st_completions, (uint64_t)n);
    return n;
}

/* Progress unless another thread is already doing it. */
static int progress_try(struct fccl_tp *tp)
{
    if (pthread_mutex_trylock(&tp->lock) != 0)
        return 0;
    int n = tp_progress_locked(tp);
    pthread_mutex_unlock(&tp->lock);
    return n;
}

/* ------------------------------------------------------------------ */
/* Posting                                                            */
/* ------------------------------------------------------------------ */

static int req_error(const struct fccl_tp *tp, const struct tp_req *r);

static int check_post(struct fccl_tp *tp, int peer, uint64_t tag,
                      const void *buf, size_t len, struct tp_req *req,
                      const char *what)
{
    if (!tp || !req)
        return fccl_err(FCCL_ERR_INVALID, "%s: NULL transport or request",
                        what);
    if (!tp->peers)
        return fccl_err(FCCL_ERR_STATE, "%s: tp_add_peers not called", what);
    if (peer < 0 || peer >= tp->nranks)
        return fccl_err(FCCL_ERR_INVALID, "%s: rank %d out of range (0..%d)",
                        what, peer, tp->nranks - 1);
    if (tag >> TP_TAG_BITS)
        return fccl_err(FCCL_ERR_INVALID, "%s: rank %d: tag 0x%llx wider "
                        "than %d bits", what, peer, (unsigned long long)tag,
                        TP_TAG_BITS);
    if (len && !buf)
        return fccl_err(FCCL_ERR_INVALID, "%s: rank %d: NULL buffer of %zu "
                        "B", what, peer, len);
    return FCCL_OK;
}

static int start(struct fccl_tp *tp, int peer, uint64_t tag, const void *buf,
                 size_t len, struct tp_req *r, int is_send)
{
    int rc = check_post(tp, peer, tag, buf, len, r,
                        is_send ? "tp_isend" : "tp_irecv");
    if (rc < 0)
        return rc;
    int epi = tp->peers[peer].ep;
    struct tp_ep *e = &tp->eps[epi];
    int src = is_send ? tp->my_rank : peer;
    r->peer = peer;
    r->ep = epi;
    r->is_send = is_send;
    r->tag = e->directed ? tag : tag | (uint64_t)src << TP_TAG_BITS;
    r->buf = (unsigned char *)buf;
    r->total = len;
    r->off = r->len = r->olen = r->chunk = 0;
    r->mr = NULL;
    r->next = NULL;
    r->queued = r->fi_err = r->status = r->mode = r->phase = r->in_rv = 0;
    r->cma = 0;
    r->rnext = NULL;
    atomic_store_explicit(&r->state, TP_REQ_PENDING, memory_order_relaxed);
    pthread_mutex_lock(&tp->lock);
    if (tp->nzombies) /* reused memory of an abandoned request */
        zombie_take(tp, r);
    rc = FCCL_OK;
    void *desc;
    if (len && (e->mr_local || tp->always_register))
        rc = tp_mr_get(e, buf, len, &desc, &r->mr);
    if (rc < 0) {
        tp_wire_finish(tp, r, rc);
        rc = fccl_err_wrap(rc, "rank %d", peer);
    } else if ((rc = tp_wire_submit(tp, r)) == FCCL_ERR_FABRIC) {
        rc = req_error(tp, r);
    }
    pthread_mutex_unlock(&tp->lock);
    return rc;
}

int tp_isend(struct fccl_tp *tp, int peer, uint64_t tag, const void *buf,
             size_t len, struct tp_req *req)
{
    return start(tp, peer, tag, buf, len, req, 1);
}

int tp_irecv(struct fccl_tp *tp, int peer, uint64_t tag, void *buf,
             size_t len, struct tp_req *req)
{
    return start(tp, peer, tag, buf, len, req, 0);
}

/* ------------------------------------------------------------------ */
/* Waiting and cancelling                                             */
/* ------------------------------------------------------------------ */

/* Set the thread's message for a failed request; returns its status. */
static int req_error(const struct fccl_tp *tp, const struct tp_req *r)
{
    const char *op = r->is_send ? "send" : "recv";
    const char *prov = tp->eps[r->ep].prov;
    switch (r->status) {
    case FCCL_ERR_PROTOCOL:
        if (r->is_send)
            return fccl_err(r->status, "rank %d: its receive is shorter than "
                            "the %zu B message (tag 0x%llx, %s)", r->peer,
                            r->total, (unsigned long long)
                            (r->tag & ((1ull << TP_TAG_BITS) - 1)), prov);
        if (r->olen) /* not every provider reports the overflow */
            return fccl_err(r->status, "rank %d: message of %zu B does not "
                            "fit the %zu B receive (tag 0x%llx, %s)", r->peer,
                            r->len + r->olen, r->total, (unsigned long long)
                            (r->tag & ((1ull << TP_TAG_BITS) - 1)), prov);
        return fccl_err(r->status, "rank %d: message longer than the %zu B "
                        "receive (tag 0x%llx, %s)", r->peer, r->total,
                        (unsigned long long)(r->tag &
                                             ((1ull << TP_TAG_BITS) - 1)),
                        prov);
    case FCCL_ERR_ABORTED:
        return fccl_err(r->status, "rank %d: %s of %zu B cancelled", r->peer,
                        op, r->total);
    }
    if (r->fi_err)
        return fccl_err(r->status, "rank %d: %s of %zu B failed: %s (%s)",
                        r->peer, op, r->total, tp_fi_strerror(r->fi_err),
                        prov);
    return fccl_err(r->status, "rank %d: %s of %zu B failed: %s", r->peer,
                    op, r->total, fccl_strerror(r->status));
}

static int req_pending(const struct tp_req *r)
{
    return atomic_load_explicit(&r->state, memory_order_acquire) ==
           TP_REQ_PENDING;
}

/* Ask the provider to give r back; queued posts are simply dropped. */
static void cancel_locked(struct fccl_tp *tp, struct tp_req *r)
{
    struct tp_ep *e = &tp->eps[r->ep];
    if (tp_wire_unqueue(tp, r))
        return;
    int rc = fi_cancel(&e->ep->fid, r->fi_ctx);
    if (rc && rc != -FI_ENOENT)
        LOG_DEBUG("FABRIC", "%s: fi_cancel(rank %d): %s", e->prov, r->peer,
                  tp_fi_strerror(rc));
}

/* Give up on r: the provider may still complete it later; that completion
 * will be dropped.  Buffers of an abandoned send may still be read. */
static void abandon_locked(struct fccl_tp *tp, struct tp_req *r)
{
    if (tp->nzombies == tp->zcap) {
        size_t cap = tp->zcap ? 2 * tp->zcap : 16;
        void **z = realloc(tp->zombies, cap * sizeof(*z));
        if (!z)
            return; /* keep it pending rather than risk a stray write */
        tp->zombies = z;
        tp->zcap = cap;
    }
    tp->zombies[tp->nzombies++] = r;
    tp->outstanding--;
    LOG_WARN("FABRIC", "rank %d: %s of %zu B could not be cancelled; "
             "abandoned", r->peer, r->is_send ? "send" : "recv", r->total);
    tp_wire_finish(tp, r, FCCL_ERR_ABORTED);
}

static void cancel_many(struct fccl_tp *tp, struct tp_req *reqs, size_t n)
{
    pthread_mutex_lock(&tp->lock);
    for (size_t i = 0; i < n; i++)
        if (req_pending(&reqs[i]))
            cancel_locked(tp, &reqs[i]);
    pthread_mutex_unlock(&tp->lock);
    uint64_t deadline = fccl_deadline_ms(TP_DRAIN_MS);
    for (;;) {
        size_t left = 0;
        pthread_mutex_lock(&tp->lock);
        tp_progress_locked(tp);
        for (size_t i = 0; i < n; i++)
            left += req_pending(&reqs[i]);
        /* one reading of the clock: the deadline must not pass between
         * deciding not to abandon and deciding to return */
        int expired = fccl_now_ns() >= deadline;
        if (left && expired)
            for (size_t i = 0; i < n; i++)
                if (req_pending(&reqs[i]))
                    abandon_locked(tp, &reqs[i]);
        pthread_mutex_unlock(&tp->lock);
        if (!left || expired)
            return;
        sched_yield();
    }
}

void tp_cancel(struct fccl_tp *tp, struct tp_req *req)
{
    if (tp && req && req_pending(req))
        cancel_many(tp, req, 1);
}

int tp_test(struct fccl_tp *tp, struct tp_req *req)
{
    if (!tp || !req)
        return fccl_err(FCCL_ERR_INVALID, "tp_test: NULL argument");
    if (req_pending(req))
        progress_try(tp);
    switch (atomic_load_explicit(&req->state, memory_order_acquire)) {
    case TP_REQ_PENDING:
        return 0;
    case TP_REQ_ERROR:
        return req_error(tp, req);
    }
    return 1;
}

/* Back off according to how long nothing has completed. */
static void backoff(const struct fccl_tp *tp, uint64_t idle_ns)
{
    if (idle_ns < tp->spin_ns)
        return;
    if (idle_ns < TP_YIELD_NS) {
        sched_yield();
        return;
    }
    long ns = TP_SLEEP_MIN_NS;
    for (uint64_t t = idle_ns / TP_YIELD_NS; t > 1 && ns < TP_SLEEP_MAX_NS;
         t /= 2)
        ns *= 2;
    if (ns > TP_SLEEP_MAX_NS)
        ns = TP_SLEEP_MAX_NS;
    struct timespec ts = {0, ns};
    nanosleep(&ts, NULL);
}

void tp_idle(const struct fccl_tp *tp, uint64_t idle_ns)
{
    backoff(tp, idle_ns);
}

int tp_dead_peer(const struct fccl_tp *tp, const int *ranks, size_t n)
{
    return tp && tp->peers ? tp_live_dead(tp, ranks, n) : -1;
}

static int timeout_error(const struct tp_req *reqs, size_t n, uint64_t t0)
{
    char list[400];
    size_t off = 0, shown = 0, more = 0;
    list[0] = '\0';
    for (size_t i = 0; i < n; i++) {
        const struct tp_req *r = &reqs[i];
        if (!req_pending(r))
            continue;
        if (shown == 4) {
            more++;
            continue;
        }
        int w = snprintf(list + off, sizeof(list) - off, "%srank %d (%s %zu "
                         "B)", shown ? ", " : "", r->peer,
                         r->is_send ? "send" : "recv", r->total);
        if (w > 0 && (size_t)w < sizeof(list) - off)
            off += (size_t)w;
        shown++;
    }
    uint64_t ms = (fccl_now_ns() - t0) / 1000000;
    if (more)
        return fccl_err(FCCL_ERR_TIMEOUT, "timed out after %llu ms waiting "
                        "for %s and %zu more", (unsigned long long)ms, list,
                        more);
    return fccl_err(FCCL_ERR_TIMEOUT, "timed out after %llu ms waiting for %s",
                    (unsigned long long)ms, list);
}

/* First non-pending failure at or after `from`, or -1; *first_pending is
 * the lowest pending index (n if none). */
static long scan(const struct tp_req *reqs, size_t n, size_t from,
                 size_t *first_pending)
{
    *first_pending = n;
    for (size_t i = from; i < n; i++) {
        int st = atomic_load_explicit(&reqs[i].state, memory_order_acquire);
        if (st == TP_REQ_ERROR)
            return (long)i;
        if (st == TP_REQ_PENDING && *first_pending == n)
            *first_pending = i;
    }
    return -1;
}

/* A local rank we depend on has exited?  Those are `watch` (if given) and
 * the peers of the pending requests.  Returns the dead rank or -1. */
static int find_dead(const struct fccl_tp *tp, const struct tp_req *reqs,
                     size_t n, size_t from, const int *watch, size_t nwatch)
{
    int dead = watch ? tp_live_dead(tp, watch, nwatch) : -1;
    for (size_t i = from; i < n && dead < 0; i++)
        if (req_pending(&reqs[i]))
            dead = tp_live_dead(tp, &reqs[i].peer, 1);
    return dead;
}

static int dead_error(const struct fccl_tp *tp, int dead)
{
    return fccl_err(FCCL_ERR_PEER, "rank %d (pid %d on this host) has "
                    "exited", dead, tp->peers[dead].live_pid);
}

int tp_waitall(struct fccl_tp *tp, struct tp_req *reqs, size_t n,
               uint64_t deadline, const _Atomic int *abort)
{
    return tp_waitall_watch(tp, reqs, n, deadline, abort, NULL, 0);
}

int tp_waitall_watch(struct fccl_tp *tp, struct tp_req *reqs, size_t n,
                     uint64_t deadline, const _Atomic int *abort,
                     const int *watch, size_t nwatch)
{
    if (!tp || (n && !reqs))
        return fccl_err(FCCL_ERR_INVALID, "tp_waitall: NULL argument");
    uint64_t t0 = 0, last = 0, checked = 0;
    size_t from = 0;
    unsigned polls = 0;
    int moved = 0;
    for (;;) {
        int got = progress_try(tp);
        size_t pend;
        long bad = scan(reqs, n, from, &pend);
        if (bad >= 0) {
            cancel_many(tp, reqs, n);
            return req_error(tp, &reqs[bad]);
        }
        if (pend == n)
            return FCCL_OK;
        /* Our own requests advancing counts as progress too: another
         * thread may be the one reading the CQ. */
        moved |= got | (pend != from);
        from = pend;
        if (abort && atomic_load(abort)) {
            cancel_many(tp, reqs, n);
            return fccl_err(FCCL_ERR_ABORTED, "aborted while waiting for "
                            "rank %d (%s %zu B)", reqs[pend].peer,
                            reqs[pend].is_send ? "send" : "recv",
                            reqs[pend].total);
        }
        /* While spinning, read the clock only every TP_CLOCK_POLLS polls:
         * it was 15% of an 8-byte all_reduce. */
        if (tp->spin_ns && ++polls % TP_CLOCK_POLLS)
            continue;
        uint64_t now = fccl_now_ns();
        if (t0 == 0)
            t0 = last = checked = now;
        if (now >= deadline) {
            int rc = timeout_error(reqs, n, t0);
            char msg[512];
            snprintf(msg, sizeof(msg), "%s", fccl_last_error());
            cancel_many(tp, reqs, n);
            return fccl_err(rc, "%s", msg);
        }
        if (moved)
            last = now;
        moved = 0;
        if (now - last >= TP_LIVE_NS && now - checked >= TP_LIVE_NS) {
            checked = now;
            int dead = find_dead(tp, reqs, n, from, watch, nwatch);
            if (dead >= 0) {
                cancel_many(tp, reqs, n);
                return dead_error(tp, dead);
            }
        }
        backoff(tp, now - last);
    }
}

/* ------------------------------------------------------------------ */
/* Close and stats                                                    */
/* ------------------------------------------------------------------ */

void tp_close(struct fccl_tp *tp)
{
    if (!tp)
        return;
    pthread_mutex_lock(&tp->lock);
    /* Let operations already in flight finish briefly; closing the
     * endpoint discards the rest (their requests are never completed). */
    uint64_t deadline = fccl_deadline_ms(TP_DRAIN_MS);
    while (tp->outstanding && fccl_now_ns() < deadline)
        if (!tp_progress_locked(tp))
            sched_yield();
    if (tp->outstanding)
        LOG_DEBUG("FABRIC", "closing with %zu operations in flight",
                  tp->outstanding);
    for (int i = tp->nep - 1; i >= 0; i--)
        tp_ep_close(&tp->eps[i]);
    if (tp->peers)
        tp_wire_stop(tp);
    pthread_mutex_unlock(&tp->lock);
    pthread_mutex_destroy(&tp->lock);
    for (int p = 0; tp->peers && p < tp->nranks; p++)
        tp_live_close(&tp->peers[p]);
    free(tp->peers);
    free(tp->zombies);
    free(tp);
}

void tp_get_stats(struct fccl_tp *tp, struct tp_stats *st)
{
    memset(st, 0, sizeof(*st));
    if (!tp)
        return;
    pthread_mutex_lock(&tp->lock);
    for (int i = 0; i < tp->nep; i++)
        tp_mr_stats(&tp->eps[i], &st->mr_hits, &st->mr_misses,
                    &st->mr_entries);
    pthread_mutex_unlock(&tp->lock);
    st->eagain = atomic_load(&tp->st_eagain);
    st->chunks = atomic_load(&tp->st_chunks);
    st->completions = atomic_load(&tp->st_completions);
    st->cma = atomic_load(&tp->st_cma);
}
