/*
 * Single-copy transfers between processes on one host (cross-memory
 * attach, process_vm_readv).  All functions run under tp->lock.
 *
 * Why.  shm's own large-message path also uses CMA, but copies while
 * holding a spin lock on the receiver's region that every sender to that
 * process needs; with two ranks each sending and receiving, a quarter of
 * a 64 MiB all_gather was spent spinning on it (perf, bench/RESULTS.md).
 * Here the copy runs in our CQ handler, outside any libfabric lock.
 *
 * Protocol, for a send of at least TP_CMA_MIN bytes to a peer known to
 * accept CMA:
 *   1. the sender injects a 24-byte descriptor {address, length, cookie}
 *      on the data tag with remote CQ data TP_CMA_RTS; it lands in the
 *      receive (the receiver's buffer holds it for a moment);
 *   2. the receiver reads the payload straight from the sender's memory
 *      into its buffer and injects FIN {cookie, status} to the sender's
 *      control slots; the send completes then.
 * The receiver only ever reads from the peer, and only while its own
 * receive is live, so a cancelled or failed operation on either side can
 * never write into another process.  Per-tag order is the provider's: the
 * descriptor is the message.
 *
 * Eager.  The descriptor is an inject, which completes at once, so it
 * need not wait for the receiver's clear-to-send (transport_wire.c): the
 * first TP_CMA_EAGER_MAX sends in flight to a peer go out right away,
 * which saves one hop (the bound keeps shm's unexpected-message pool
 * small when nobody receives).  The receiver, which cannot tell, still
 * sends its clear-to-send; it is owed to the eager send, which stays on
 * the peer's rendezvous list until it arrives (or FIN does: a
 * clear-to-send still queued when the descriptor is read is dropped), so
 * later sends on the same tag take the later clear-to-sends.
 *
 * Permission.  CMA needs the same pid namespace and ptrace rights (Yama's
 * ptrace_scope 1, Ubuntu's default, refuses siblings).  So before its
 * first CMA send to a peer, a sender asks: PROBE {pid, pid-ns inode,
 * address and value of a random word}; the peer reads the word and
 * answers PROBE_ACK {ok}.  Sends go through the provider until the answer
 * says yes.  FCCL_CMA=0 turns the path off.
 */
#include <errno.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/uio.h>
#include <time.h>
#include <unistd.h>

#include "err.h"
#include "log.h"
#include "transport/tp_int.h"

/* Below this shm's own path is as fast: 2-rank all_to_all with 32 and
 * 64 KiB blocks takes the same time either way, with 128 KiB blocks 15-19
 * us here against 27-29 us through shm. */
#define TP_CMA_MIN (64u << 10)
#define TP_CMA_EAGER_MAX 8

struct cma_desc {
    uint64_t addr, len, cookie;
};

static uint64_t pidns_inode(void)
{
    struct stat st;
    return stat("/proc/self/ns/pid", &st) == 0 ? (uint64_t)st.st_ino : 0;
}

/* Copy len bytes from (pid, addr) to dst.  0 or a positive errno. */
static int pull(int pid, uint64_t addr, void *dst, size_t len)
{
    size_t done = 0;
    while (done < len) {
        struct iovec l = {(char *)dst + done, len - done};
        struct iovec r = {(void *)(uintptr_t)(addr + done), len - done};
        ssize_t n = process_vm_readv(pid, &l, 1, &r, 1, 0);
        if (n < 0 && errno == EINTR)
            continue;
        if (n <= 0)
            return n < 0 ? errno : EFAULT;
        done += (size_t)n;
    }
    return 0;
}

void tp_cma_init(struct fccl_tp *tp)
{
    const char *env = getenv("FCCL_CMA");
    tp->pid = (int)getpid();
    tp->pidns = pidns_inode();
    struct timespec ts;
    clock_gettime(CLOCK_REALTIME, &ts);
    tp->cma_magic = ((uint64_t)ts.tv_nsec << 20) ^ (uint64_t)ts.tv_sec ^
                    ((uint64_t)tp->pid << 40) ^ (uint64_t)(uintptr_t)tp;
    if (env && strcmp(env, "0") == 0) {
        LOG_DEBUG("FABRIC", "CMA off (FCCL_CMA=0)");
        return;
    }
    uint64_t probe = 0;
    if (tp->pidns == 0 ||
        pull(tp->pid, (uint64_t)(uintptr_t)&tp->cma_magic, &probe,
             sizeof(probe)) != 0 || probe != tp->cma_magic) {
        LOG_INFO("FABRIC", "CMA unavailable here (%s); shm copies large "
                 "messages itself", strerror(errno));
        return;
    }
    tp->cma_ok = 1;
}

/* How should send r use CMA (TP_CMA_OFF, _AFTER_CTS, _EAGER)?  Starts the
 * permission probe on first use. */
int tp_cma_plan(struct fccl_tp *tp, struct tp_ep *e, struct tp_req *r)
{
    struct tp_peer *p = &tp->peers[r->peer];
    if (!tp->cma_ok || !e->rndv || !e->directed || r->total < TP_CMA_MIN ||
        r->total <= e->inject_size)
        return 0;
    if (p->cma == TP_CMA_UNKNOWN) {
        p->cma = TP_CMA_PROBING;
        tp_ctl_send(tp, r->peer, TP_CTL_PROBE, (uint64_t)tp->pid, tp->pidns,
                    (uint64_t)(uintptr_t)&tp->cma_magic, tp->cma_magic);
    }
    if (p->cma != TP_CMA_YES)
        return TP_CMA_OFF;
    return p->eager_out < TP_CMA_EAGER_MAX ? TP_CMA_EAGER : TP_CMA_AFTER_CTS;
}

/* Post the descriptor of send r (it waits for FIN afterwards). */
ssize_t tp_cma_post(struct fccl_tp *tp, struct tp_ep *e, struct tp_req *r,
                    fi_addr_t fa)
{
    struct cma_desc d = {(uint64_t)(uintptr_t)r->buf, r->total,
                         (uint64_t)(uintptr_t)r};
    (void)tp;
    return fi_tinjectdata(e->ep, &d, sizeof(d), TP_CMA_RTS, fa, r->tag);
}

void tp_cma_wait_fin(struct fccl_tp *tp, struct tp_req *r)
{
    struct tp_peer *p = &tp->peers[r->peer];
    r->phase = TP_PH_WAIT_FIN;
    r->fnext = p->fin_head;
    p->fin_head = r;
    p->eager_out += r->cma == TP_CMA_EAGER;
}

/* Take the send with this cookie off its peer's FIN list. */
static struct tp_req *fin_take(struct tp_peer *p, uint64_t cookie)
{
    for (struct tp_req **pp = &p->fin_head; *pp; pp = &(*pp)->fnext) {
        struct tp_req *r = *pp;
        if ((uint64_t)(uintptr_t)r == cookie) {
            *pp = r->fnext;
            r->fnext = NULL;
            p->eager_out -= r->cma == TP_CMA_EAGER;
            return r;
        }
    }
    return NULL;
}

void tp_cma_forget(struct fccl_tp *tp, struct tp_req *r)
{
    fin_take(&tp->peers[r->peer], (uint64_t)(uintptr_t)r);
}

static int status_of_errno(int err)
{
    /* ESRCH: the sender is gone; EFAULT: its buffer is (a failed send) */
    return err == ESRCH || err == EFAULT ? FCCL_ERR_PEER : FCCL_ERR_FABRIC;
}

/* Receive r got a descriptor instead of data: fetch the payload. */
void tp_cma_on_rts(struct fccl_tp *tp, struct tp_req *r)
{
    struct tp_peer *p = &tp->peers[r->peer];
    struct cma_desc d;
    memcpy(&d, r->buf, sizeof(d));
    int status = FCCL_OK;
    if (p->pid <= 0) {
        r->fi_err = EPROTO;
        status = FCCL_ERR_PROTOCOL; /* no probe came first: a bug */
    } else if (d.len > r->total) {
        r->len = r->total;
        r->olen = d.len - r->total;
        status = FCCL_ERR_PROTOCOL;
    } else {
        int err = pull(p->pid, d.addr, r->buf, d.len);
        r->len = err ? 0 : d.len;
        r->fi_err = err;
        if (!err)
            atomic_fetch_add(&tp->st_cma, 1);
        status = err ? status_of_errno(err) : FCCL_OK;
        if (err)
            LOG_DEBUG("FABRIC", "rank %d: CMA read of %llu B: %s", r->peer,
                      (unsigned long long)d.len, strerror(err));
    }
    r->off = r->len;
    tp_ctl_send(tp, r->peer, TP_CTL_FIN, d.cookie, (uint64_t)(int64_t)status,
                0, 0);
    tp_wire_finish(tp, r, status);
}

static void on_probe(struct fccl_tp *tp, int peer, const uint64_t *m)
{
    uint64_t word = 0;
    int ok = tp->cma_ok && m[3] == tp->pidns &&
             pull((int)m[2], m[4], &word, sizeof(word)) == 0 && word == m[5];
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
    r->len = r->off = status == FCCL_OK ? r->total : 0;
    tp_wire_finish(tp, r, status);
}

/* A control message other than clear-to-send. */
void tp_cma_on_ctl(struct fccl_tp *tp, int peer, const uint64_t *m)
{
    switch (m[1]) {
    case TP_CTL_PROBE:
        on_probe(tp, peer, m);
        break;
    case TP_CTL_PROBE_ACK:
        tp->peers[peer].cma = m[2] ? TP_CMA_YES : TP_CMA_NO;
        LOG_DEBUG("FABRIC", "rank %d: CMA %s", peer,
                  m[2] ? "on" : "refused, shm copies");
        break;
    case TP_CTL_FIN:
        on_fin(tp, peer, m);
        break;
    default:
        LOG_WARN("FABRIC", "rank %d: unknown control message %llu", peer,
                 (unsigned long long)m[1]);
    }
}
