/*
 * Posting, testing, waiting and cancelling: the calls algorithms make.
 *
 * Waiting.  Tight polling while completions flow (the 8-byte latency
 * path) for up to the spin budget, then sched_yield() until TP_YIELD_NS
 * without a completion, then sleeps growing to TP_SLEEP_MAX_NS, so
 * oversubscribed ranks (8 on 2 cores) leave the CPU to the ones that have
 * work; a wait idle for longer than 32 ms sleeps 1/64 of its idle time
 * (at most 20 ms).  Every wait of the engine backs off here: tp_waitall,
 * the shared-segment waits (shm/seg.c, through tp_idle), fccl_wait,
 * closing.
 *
 * The spin budget is learned from how the waits of this process ended
 * (tp_spin_next, one budget per transport, i.e. per process).  When other
 * work keeps every core busy, a waiter that yields after a few us hands
 * its core to that work for a whole time slice (ms), while the peer it
 * waits for answers a few us later; the two ranks then rarely run at the
 * same time (2 ranks, two busy loops on the 2 cores: 8-byte all_reduce
 * 15 us, 1 MiB 4 ms, against 0.3 us and 0.28 ms when spinning 0.5-1 ms;
 * spinning 5 ms made 1 MiB 12 ms: a waiter that never sleeps spends its
 * share of the core on spinning).  So a wait that ends soon after the
 * spin gave up (the peer was off its core, or computing) raises the
 * budget towards twice its length, up to TP_SPIN_CAP_NS; one that ends
 * only after TP_SPIN_LATE_NS (a late peer, not a busy machine) drops it
 * to TP_SPIN_NS, so a rank that keeps waiting for a late peer spins
 * almost nothing; one that ends just after the spin gave up (the peer got
 * our core only when we stopped) halves it; and the budget halves after
 * TP_SPIN_CALM_NS without a reason to grow, back to TP_SPIN_NS on an idle
 * machine, where spinning 5 us then yielding is as fast.
 *
 * With more of the job's ranks on this machine (every host sharing its
 * kernel) than CPUs we may run on, a waiter yields after every empty poll
 * instead, learning nothing (peers.c sets tp->spin_ns and spin_fixed):
 * the rank it waits for may be the one it keeps off the CPU (4 ranks on 2
 * cores: 8-byte all_reduce 112 -> 15 us; with spare cores spinning is
 * 2.5x faster, 0.6 against 1.6 us).  FCCL_SPIN_US fixes the budget.
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
#include "tp_int.h"

#define TP_SPIN_CAP_NS 1000000ull /* the learned spin budget's ceiling */
#define TP_SPIN_LATE_NS 20000000ull /* a wait this long: a late peer */
#define TP_SPIN_CALM_NS 200000000ull /* no growth this long: halve */
#define TP_SPIN_NEAR_NS 20000ull /* ended this soon after the spin: its fault */
#define TP_YIELD_NS 1000000ull  /* then sched_yield() until this */
#define TP_SLEEP_MIN_NS 20000L  /* then sleep, doubling up to the max */
#define TP_SLEEP_MAX_NS 500000L
#define TP_SLEEP_IDLE_DIV 64     /* long waits: sleep idle/64 ... */
#define TP_SLEEP_LONG_NS 20000000L /* ... up to 20 ms */
#define TP_DRAIN_MS 200         /* bound on draining cancelled ops */
#define TP_LIVE_NS 200000000ull /* idle this long: are the peers alive? */
#define TP_CLOCK_POLLS 16       /* polls per clock reading while spinning */
/* Two clock readings of one wait this far apart: the process was stopped
 * (SIGSTOP) or starved; the heartbeats' news is read before anything is
 * concluded from the clock (hb.c, tp_news). */
#define TP_GAP_NS 1000000000ull

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
    if ((rc = tp_resolve(tp, peer)) < 0) /* first use: into the AV */
        return rc;
    int epi = tp->peers[peer].ep;
    struct tp_ep *e = &tp->eps[epi];
    int src = is_send ? tp->my_rank : peer;
    struct tp_req_priv *p = P(r);
    r->peer = peer;
    r->is_send = is_send;
    r->len = 0;
    r->status = 0;
    p->ep = epi;
    p->tag = e->directed ? tag : tag | (uint64_t)src << TP_TAG_BITS;
    p->buf = (unsigned char *)buf;
    p->total = len;
    p->off = p->olen = p->chunk = 0;
    p->mr = NULL;
    p->next = p->rnext = p->fnext = NULL;
    p->fi_err = 0;
    p->queued = p->mode = p->phase = p->in_rv = p->cma = 0;
    p->cancelled = p->trunc = 0;
    atomic_store_explicit(&r->state, TP_REQ_PENDING, memory_order_relaxed);
    pthread_mutex_lock(&tp->lock);
    if (tp->nzombies) /* reused memory of an abandoned request */
        tp_zombie_take(tp, &p->ctx);
    rc = FCCL_OK;
    void *desc;
    if (len && (e->mr_local || tp->always_register))
        rc = tp_mr_get(e, buf, len, &desc, &p->mr);
    if (rc < 0) {
        tp_rv_finish(tp, r, rc);
        rc = fccl_err_wrap(rc, "rank %d", peer);
    } else if ((rc = tp_rv_submit(tp, r)) == FCCL_ERR_FABRIC) {
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

void tp_req_complete_empty(struct tp_req *req, int peer, int is_send)
{
    memset(req, 0, sizeof(*req));
    req->peer = peer;
    req->is_send = is_send;
    atomic_store(&req->state, TP_REQ_DONE);
}

int tp_req_pending(const struct tp_req *req)
{
    return atomic_load_explicit(&req->state, memory_order_acquire) ==
           TP_REQ_PENDING;
}

int tp_req_endpoint(const struct tp_req *req)
{
    return PC(req)->ep;
}

/* ------------------------------------------------------------------ */
/* Waiting and cancelling                                             */
/* ------------------------------------------------------------------ */

/* Set the thread's message for a failed request; returns its status. */
static int req_error(const struct fccl_tp *tp, const struct tp_req *r)
{
    const char *op = r->is_send ? "send" : "recv";
    const char *prov = tp->eps[PC(r)->ep].prov;
    switch (r->status) {
    case FCCL_ERR_PROTOCOL: {
        /* the caller's tag, without the bits the transport adds */
        unsigned long long tag = PC(r)->tag & ((1ull << TP_TAG_BITS) - 1);
        if (r->is_send && PC(r)->trunc)
            return fccl_err(r->status, "rank %d: its %zu B receive is shorter "
                            "than the %zu B message (tag 0x%llx, %s)", r->peer,
                            PC(r)->olen, PC(r)->total, tag, prov);
        if (r->is_send)
            return fccl_err(r->status, "rank %d: its receive is shorter than "
                            "the %zu B message (tag 0x%llx, %s)", r->peer,
                            PC(r)->total, tag, prov);
        if (PC(r)->olen) /* not every provider reports the overflow */
            return fccl_err(r->status, "rank %d: message of %zu B does not "
                            "fit the %zu B receive (tag 0x%llx, %s)", r->peer,
                            r->len + PC(r)->olen, PC(r)->total, tag, prov);
        return fccl_err(r->status, "rank %d: message longer than the %zu B "
                        "receive (tag 0x%llx, %s)", r->peer, PC(r)->total, tag,
                        prov);
    }
    case FCCL_ERR_ABORTED:
        return fccl_err(r->status, "rank %d: %s of %zu B cancelled", r->peer,
                        op, PC(r)->total);
    }
    if (PC(r)->fi_err)
        return fccl_err(r->status, "rank %d: %s of %zu B failed: %s (%s)",
                        r->peer, op, PC(r)->total, tp_fi_strerror(PC(r)->fi_err),
                        prov);
    return fccl_err(r->status, "rank %d: %s of %zu B failed: %s", r->peer,
                    op, PC(r)->total, fccl_strerror(r->status));
}

static int req_pending(const struct tp_req *r)
{
    return atomic_load_explicit(&r->state, memory_order_acquire) ==
           TP_REQ_PENDING;
}

/* Ask the provider to give r back; queued posts are simply dropped. */
static void cancel_locked(struct fccl_tp *tp, struct tp_req *r)
{
    struct tp_ep *e = &tp->eps[PC(r)->ep];
    if (tp_rv_unqueue(tp, r))
        return;
    P(r)->cancelled = 1;
    int rc = fi_cancel(&e->ep->fid, &P(r)->ctx);
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
    tp->zombies[tp->nzombies++] = &P(r)->ctx;
    tp->outstanding--;
    LOG_WARN("FABRIC", "rank %d: %s of %zu B could not be cancelled; "
             "abandoned", r->peer, r->is_send ? "send" : "recv", PC(r)->total);
    tp_rv_finish(tp, r, FCCL_ERR_ABORTED);
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

int tp_poke(struct fccl_tp *tp)
{
    return tp ? tp_progress_try(tp) : 0;
}

int tp_test(struct fccl_tp *tp, struct tp_req *req)
{
    if (!tp || !req)
        return fccl_err(FCCL_ERR_INVALID, "tp_test: NULL argument");
    if (req_pending(req))
        tp_progress_try(tp);
    switch (atomic_load_explicit(&req->state, memory_order_acquire)) {
    case TP_REQ_PENDING:
        return 0;
    case TP_REQ_ERROR:
        return req_error(tp, req);
    }
    return 1;
}

uint64_t tp_spin_next(uint64_t budget, uint64_t waited_ns)
{
    if (waited_ns <= budget) /* spinning caught it */
        return budget;
    if (waited_ns >= TP_SPIN_LATE_NS) /* spinning only burnt CPU */
        return TP_SPIN_NS;
    /* Ended just after we stopped polling: the peer may have needed our
     * core.  Growing on it would feed itself (2 ranks on one CPU: each
     * wait lasts as long as the other's spin). */
    if (waited_ns <= budget + budget / 4 + TP_SPIN_NEAR_NS)
        return budget / 2 > TP_SPIN_NS ? budget / 2 : TP_SPIN_NS;
    uint64_t want = 2 * waited_ns;
    if (want < budget)
        want = budget;
    return want < TP_SPIN_CAP_NS ? want : TP_SPIN_CAP_NS;
}

static uint64_t spin_budget(const struct fccl_tp *tp)
{
    return atomic_load_explicit(&tp->spin_ns, memory_order_relaxed);
}

/* A wait that had to wait ended after waited_ns: learn from it (see the
 * top of the file).  Threads race on the two words; a lost update costs
 * one wait's lesson. */
static void spin_learn(struct fccl_tp *tp, uint64_t waited_ns, uint64_t now)
{
    if (tp->spin_fixed)
        return;
    uint64_t b = spin_budget(tp), next = tp_spin_next(b, waited_ns);
    uint64_t calm = atomic_load_explicit(&tp->spin_calm, memory_order_relaxed);
    if (next > b || (next == b && b == TP_SPIN_CAP_NS && waited_ns > b)) {
        atomic_store_explicit(&tp->spin_calm, now, memory_order_relaxed);
    } else if (next == b && now - calm >= TP_SPIN_CALM_NS) {
        atomic_store_explicit(&tp->spin_calm, now, memory_order_relaxed);
        next = b / 2 > TP_SPIN_NS ? b / 2 : TP_SPIN_NS;
    }
    if (next != b)
        atomic_store_explicit(&tp->spin_ns, next, memory_order_relaxed);
}

void tp_wait_done(struct fccl_tp *tp, uint64_t t0)
{
    if (!tp)
        return;
    uint64_t now = fccl_now_ns();
    spin_learn(tp, now - t0, now);
}

/* Back off according to how long nothing has completed. */
static void backoff(const struct fccl_tp *tp, uint64_t idle_ns)
{
    if (idle_ns < spin_budget(tp))
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
    /* A long wait (a peer not started yet, or busy outside fccl) sleeps
     * 1/TP_SLEEP_IDLE_DIV of its idle time, up to TP_SLEEP_LONG_NS: the
     * wake-up comes at most that fraction late, and 256 ranks waiting
     * seconds on 2 cores no longer wake 2000 times a second each (their
     * init CPU grew with the wait, i.e. with N). */
    if ((uint64_t)ns < idle_ns / TP_SLEEP_IDLE_DIV)
        ns = idle_ns / TP_SLEEP_IDLE_DIV < TP_SLEEP_LONG_NS
                 ? (long)(idle_ns / TP_SLEEP_IDLE_DIV)
                 : TP_SLEEP_LONG_NS;
    struct timespec ts = {0, ns};
    nanosleep(&ts, NULL);
}

void tp_idle(const struct fccl_tp *tp, uint64_t idle_ns)
{
    backoff(tp, idle_ns);
}

int tp_yields_at_once(const struct fccl_tp *tp)
{
    return tp && tp->spin_fixed && spin_budget(tp) == 0;
}

int tp_dead_peer(const struct fccl_tp *tp, const int *ranks, size_t n)
{
    if (!tp || !tp->peers)
        return -1;
    /* the job's known culprit first: a local peer may have exited only
     * because it failed on it */
    int dead = tp_hb_dead(tp);
    return dead >= 0 ? dead : tp_live_dead(tp, ranks, n, 1);
}

void tp_report_dead(struct fccl_tp *tp, int rank)
{
    if (!tp || !tp->peers || rank < 0 || rank >= tp->nranks ||
        tp_hb_dead(tp) == rank)
        return;
    char why[96];
    snprintf(why, sizeof(why), "rank %d (pid %d on this host) has exited",
             rank, tp->peers[rank].live_pid);
    tp_hb_suspect(tp, rank, why);
}

const char *tp_dead_why(const struct fccl_tp *tp, int rank)
{
    if (tp && tp_hb_dead(tp) == rank)
        return tp->dead_why;
    return "its process has exited";
}

/* A wait failed: when a rank of the job is known dead (hb.c), that is the
 * cause to report (the failure in hand may be a live neighbour that gave
 * up first); else a broken connection names its peer as the suspect. */
static int blame(struct fccl_tp *tp, int rc, int peer)
{
    /* News queued on the heartbeat socket (this rank itself declared dead
     * while stopped) explains a broken connection better than its peer */
    int dead = rc == FCCL_ERR_ABORTED ? tp_hb_dead(tp) : tp_news(tp);
    if (dead < 0 && rc != FCCL_ERR_PROTOCOL && rc != FCCL_ERR_ABORTED &&
        rc != FCCL_ERR_TIMEOUT && rc != FCCL_ERR_INVALID) {
        tp_hb_suspect(tp, peer, fccl_last_error());
        return rc;
    }
    if (dead < 0 || rc == FCCL_ERR_ABORTED)
        return rc;
    char msg[256];
    snprintf(msg, sizeof(msg), "%s", fccl_last_error());
    return fccl_err(FCCL_ERR_PEER, "%s (here: %s)", tp->dead_why, msg);
}

/* Names the peers still pending; how long the whole call had is for the
 * caller to say (a wait may start with little of its deadline left, so
 * its own duration would mislead). */
static int timeout_error(const struct tp_req *reqs, size_t n)
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
                         r->is_send ? "send" : "recv", PC(r)->total);
        if (w > 0 && (size_t)w < sizeof(list) - off)
            off += (size_t)w;
        shown++;
    }
    if (more)
        return fccl_err(FCCL_ERR_TIMEOUT, "timed out waiting for %s and %zu "
                        "more", list, more);
    return fccl_err(FCCL_ERR_TIMEOUT, "timed out waiting for %s", list);
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

/* A local rank we depend on has exited?  Those are the peers of the
 * pending requests, and `watch` (if given).  A watched rank that finished
 * and left is no failure: it said goodbye (hb.c), or, if that datagram is
 * still unread, it counts only when seen exited at two checks in a row
 * (*seen: the rank the previous check found).  Returns the dead rank or
 * -1. */
static int find_dead(const struct fccl_tp *tp, const struct tp_req *reqs,
                     size_t n, size_t from, const int *watch, size_t nwatch,
                     int *seen)
{
    for (size_t i = from; i < n; i++)
        if (req_pending(&reqs[i]) &&
            tp_live_dead(tp, &reqs[i].peer, 1, 0) >= 0)
            return reqs[i].peer;
    int dead = watch ? tp_live_dead(tp, watch, nwatch, 1) : -1;
    if (dead >= 0 && dead != *seen) {
        *seen = dead;
        return -1;
    }
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
    uint64_t t0 = 0, last = 0, checked = 0, prev = 0;
    size_t from = 0;
    unsigned polls = 0;
    int moved = 0, seen = -1;
    for (;;) {
        int got = tp_progress_try(tp);
        size_t pend;
        long bad = scan(reqs, n, from, &pend);
        if (bad >= 0) {
            cancel_many(tp, reqs, n);
            return blame(tp, req_error(tp, &reqs[bad]), reqs[bad].peer);
        }
        if (pend == n) {
            if (t0) /* it had to wait (a quick one is no lesson) */
                tp_wait_done(tp, last);
            return FCCL_OK;
        }
        /* Our own requests advancing counts as progress too: another
         * thread may be the one reading the CQ. */
        moved |= got | (pend != from);
        from = pend;
        if (abort && atomic_load(abort)) {
            cancel_many(tp, reqs, n);
            return fccl_err(FCCL_ERR_ABORTED, "aborted while waiting for "
                            "rank %d (%s %zu B)", reqs[pend].peer,
                            reqs[pend].is_send ? "send" : "recv",
                            PC(&reqs[pend])->total);
        }
        /* While spinning, read the clock only every TP_CLOCK_POLLS polls:
         * it was 15% of an 8-byte all_reduce. */
        if (spin_budget(tp) && ++polls % TP_CLOCK_POLLS)
            continue;
        uint64_t now = fccl_now_ns();
        if (t0 == 0)
            t0 = last = checked = prev = now;
        /* Woken from a stop: a verdict that came meanwhile comes first. */
        int gap = now - prev >= TP_GAP_NS;
        prev = now;
        if ((gap || now >= deadline) && tp_news(tp) >= 0) {
            cancel_many(tp, reqs, n);
            return fccl_err(FCCL_ERR_PEER, "%s", tp->dead_why);
        }
        if (now >= deadline) {
            int rc = timeout_error(reqs, n);
            char msg[512];
            snprintf(msg, sizeof(msg), "%s", fccl_last_error());
            cancel_many(tp, reqs, n);
            return blame(tp, fccl_err(rc, "%s", msg), -1);
        }
        if (moved)
            last = now;
        moved = 0;
        /* once idle, a death announced meanwhile counts at once (one
         * atomic load), so the survivors fail within ms of each other */
        if (now - last >= TP_LIVE_NS && tp_hb_dead(tp) >= 0) {
            cancel_many(tp, reqs, n);
            return fccl_err(FCCL_ERR_PEER, "%s", tp->dead_why);
        }
        if (now - last >= TP_LIVE_NS && now - checked >= TP_LIVE_NS) {
            checked = now;
            int dead = find_dead(tp, reqs, n, from, watch, nwatch, &seen);
            if (dead >= 0) {
                cancel_many(tp, reqs, n);
                int rc = dead_error(tp, dead);
                tp_hb_suspect(tp, dead, fccl_last_error());
                return rc;
            }
        }
        backoff(tp, now - last);
    }
}
