/*
 * Private to coll/transport/: the transport's internal state, and the
 * calls its files make of each other (tp.h lists the files and the one
 * direction they call in).  The only files that include libfabric headers.
 */
#ifndef FCCL_COLL_TRANSPORT_INT_H
#define FCCL_COLL_TRANSPORT_INT_H

#include <pthread.h>
#include <rdma/fabric.h>
#include <rdma/fi_cm.h>
#include <rdma/fi_domain.h>
#include <rdma/fi_endpoint.h>
#include <rdma/fi_errno.h>
#include <rdma/fi_tagged.h>

#include "tp.h"

#define TP_MAX_EPS 2
/* The spin budget's floor, and its start: waiters poll at least this long
 * after progress before yielding, as they always did.  Two ranks the
 * scheduler put on one CPU (it happens for a few ms at a time, 2 ranks on
 * 2 cores) each spun out this window before the other could answer: 50 us
 * made every message hop cost 50 us (2 hosts x 1 rank pinned to one CPU,
 * 8-byte all_reduce 170-178 us; 5 us: 70; free CPUs: 11.9 either way).
 * wait.c learns how far above it to go. */
#define TP_SPIN_NS 5000ull
#define TP_PROV_MAX 64
#define TP_ADDR_MAX 256
#define TP_CTS_SLOTS 8 /* receives kept posted for control messages */
#define TP_CTL_WORDS 6  /* control message: rank, kind, 4 arguments */
#define TP_CMA_RTS 0x434d41ull /* remote CQ data of a CMA descriptor */
#define TP_TRUNC_DATA 0x5452554eull /* remote CQ data: "your receive is
                                        too short" (8 B: the message size) */
/* Tag of every control message.  Not bit 63: net (libfabric 1.17) keeps
 * that one for itself (XNET_CLAIM_TAG_BIT) and never matches such a tag. */
#define TP_CTS_BIT (1ull << 61)
#define TP_CHUNK_BIT (1ull << 62) /* tag bit of a chunk */
/* Eager messages (eager.c): tag TP_EAGER_TAG | sender rank, the real tag
 * in the remote CQ data, into bounce receives for any source. */
#define TP_EAGER_TAG (TP_CTS_BIT | TP_CHUNK_BIT)
#define TP_EAGER_RANKS 0xffffffffull
#define TP_EAGER_SLOTS 16
#define TP_EAGER_DEFAULT (32u << 10)
#define TP_EAGER_MAX (256u << 10)

/* Control messages (tag TP_CTS_BIT, any source; rndv.c). */
enum { TP_CTL_CTS = 1, TP_CTL_FIN, TP_CTL_PROBE, TP_CTL_PROBE_ACK,
       TP_CTL_BYE };
/* The states of a request (rndv.c has the transitions):
 *   DATA      its next wire message may be posted (data, a chunk, or a CMA
 *             descriptor); a posted receive stays here until it completes
 *   HELD      a send behind an earlier same-tag send that is not on the
 *             wire yet (it must not overtake it)
 *   WAIT_CTS  a send waiting for the receiver's clear-to-send
 *   SEND_CTS  a posted receive that still owes its sender a clear-to-send
 *             (queued: the provider refused the inject for now)
 *   WAIT_FIN  a send whose payload the receiver copies (CMA); done at FIN
 *   EAGER_RX  a receive of eager size, on its peer's list (not posted) */
enum { TP_PH_DATA = 0, TP_PH_WAIT_CTS, TP_PH_SEND_CTS, TP_PH_HELD,
       TP_PH_WAIT_FIN, TP_PH_EAGER_RX };
/* May this process read a peer's memory (cma.c, rndv.c)? */
enum { TP_CMA_UNKNOWN = 0, TP_CMA_PROBING, TP_CMA_YES, TP_CMA_NO };
/* How a send uses CMA (tp_req_priv.cma). */
enum { TP_CMA_OFF = 0, TP_CMA_AFTER_CTS, TP_CMA_EAGER };

enum tp_ep_kind { TP_EP_SHM = 1, TP_EP_NET = 2, TP_EP_PROC = 3, /* blob only */
                  TP_EP_HB = 4 /* blob only: heartbeat socket (hb.c) */ };
#define TP_PROC_NAME "proc"
#define TP_LIVE_ADDR_LEN 12
#define TP_HB_NAME "hb"
#define TP_HB_ADDR_LEN 18 /* IPv6 (IPv4-mapped for IPv4) + u16le port */

struct tp_mr_cache; /* mr.c */
struct tp_early_msg; /* eager.c */

/* The private part of a request (tp_req.priv). */
struct tp_req_priv {
    struct fi_context2 ctx;  /* the provider's; its address is the op
                                context, so completions find the request */
    int ep;                  /* endpoint index used */
    int fi_err;              /* libfabric errno of a failed completion */
    uint64_t tag;            /* wire tag as posted */
    unsigned char *buf;      /* caller's buffer */
    size_t total;            /* posted size (send: exact; recv: capacity) */
    size_t off;              /* bytes moved by completed chunks */
    size_t chunk;            /* size of the wire message in flight */
    size_t olen;             /* bytes that did not fit (truncation) */
    void *mr;                /* MR cache entry in use, or NULL */
    struct tp_req *next;     /* retry queue link */
    struct tp_req *rnext;    /* its peer's rendezvous-order list (sends),
                                or eager receive list (receives) */
    struct tp_req *fnext;    /* CMA: its peer's FIN list */
    unsigned char queued;    /* waiting in a retry queue */
    unsigned char mode;      /* single message or chunked */
    unsigned char phase;     /* TP_PH_* */
    unsigned char in_rv;     /* on its peer's rendezvous-order list */
    unsigned char cma;       /* TP_CMA_OFF / _AFTER_CTS / _EAGER */
    unsigned char cancelled; /* we asked the provider to cancel it */
    unsigned char trunc;     /* send: the receive is shorter (olen = its
                                size); a notice goes instead of data */
};
_Static_assert(sizeof(struct tp_req_priv) <= TP_REQ_PRIV_BYTES,
               "TP_REQ_PRIV_BYTES too small");

static inline struct tp_req_priv *P(struct tp_req *r)
{
    return (struct tp_req_priv *)(void *)r->priv;
}
static inline const struct tp_req_priv *PC(const struct tp_req *r)
{
    return (const struct tp_req_priv *)(const void *)r->priv;
}
/* The request whose op context a completion carries. */
static inline struct tp_req *tp_req_of_ctx(void *ctx)
{
    return (struct tp_req *)(void *)((char *)ctx -
                                     offsetof(struct tp_req, priv));
}

enum { TP_MODE_SINGLE = 0, TP_MODE_CHUNKED };

/* A receive kept posted for any peer's control message. */
struct tp_cts_slot {
    struct fi_context2 ctx;
    uint64_t msg[TP_CTL_WORDS];
    int posted;
};

/* A bounce receive kept posted for eager messages (eager.c). */
struct tp_eager_slot {
    struct fi_context2 ctx;
    int posted;
};

/* A control message the provider refused for now. */
struct tp_ctl {
    uint64_t msg[TP_CTL_WORDS];
    int peer;
    struct tp_ctl *next;
};

/* A clear-to-send that came before its send was posted. */
struct tp_early_cts {
    uint64_t tag;
    size_t len; /* the receive's size */
    struct tp_early_cts *next;
};

/* One opened libfabric endpoint with its own fabric/domain/CQ/AV. */
struct tp_ep {
    int kind;
    char prov[TP_PROV_MAX];      /* fabric_attr->prov_name */
    struct fi_info *info;
    struct fid_fabric *fabric;
    struct fid_domain *domain;
    struct fid_cq *cq;
    struct fid_av *av;
    struct fid_ep *ep;
    unsigned char addr[TP_ADDR_MAX];
    size_t addrlen;
    int directed;                /* FI_DIRECTED_RECV granted */
    int mr_local;                /* provider needs descriptors */
    int mr_endpoint;             /* FI_MR_ENDPOINT: bind MRs to the ep */
    size_t max_msg;              /* one wire message at most (chunking) */
    size_t inject_size;
    struct tp_mr_cache *mrc;
    struct tp_req *rxq_head, *rxq_tail; /* receives waiting to be posted */
    struct tp_req *ctsq_head, *ctsq_tail; /* posted receives whose
                                             clear-to-send waits */
    size_t txq_count;            /* sends queued on this ep's peers */
    int rndv;                    /* large sends wait for clear-to-send
                                    (shm, net): see rndv.c */
    int is_shm;                  /* the shm provider (CMA; it reports
                                    truncation of large messages itself) */
    struct tp_cts_slot cts[TP_CTS_SLOTS];
    int cts_unposted;            /* slots to post again (busy) */
    struct tp_ctl *ctlq_head, *ctlq_tail; /* control messages to retry */
    size_t eager_max;            /* eager.c: its largest message (0: off) */
    unsigned char *eager_buf;    /* TP_EAGER_SLOTS x eager_max */
    struct tp_eager_slot eslots[TP_EAGER_SLOTS];
    int eager_unposted;          /* slots to post again */
};

/* How to reach one peer. */
struct tp_peer {
    _Atomic int resolved; /* 0: not yet in the AV, 1: ep/addr valid, < 0:
                             resolving failed with this status (resolve.c) */
    int ep;          /* index into tp->eps */
    fi_addr_t addr;
    struct tp_req *txq_head, *txq_tail; /* sends waiting to be posted */
    struct tp_req *rv_head;      /* sends waiting for clear-to-send, and
                                    later sends held behind them (same
                                    tag), in post order */
    struct tp_early_cts *early;  /* clear-to-sends not yet claimed */
    struct tp_req *fin_head;     /* CMA sends waiting for FIN */
    struct tp_req *erx_head, *erx_tail; /* eager receives waiting */
    struct tp_early_msg *emsg_head;     /* eager messages not yet taken */
    int eager_out;               /* eager CMA descriptors among them */
    int cma;                     /* TP_CMA_*: do we send to it by CMA */
    int talked;                  /* a request to or from it was posted */
    int bye_in;                  /* it said goodbye (bye.c) */
    int pid;                     /* its pid, once it may read us */
    int pidfd, live_pid;         /* local peer's process (or -1, 0) */
    int old_pidfd;               /* a replaced process's (readmit.c), or -1 */
    /* live.c: the pidfd is opened on the first liveness check that needs
     * it (or when the peer is resolved), once: live_tried; live_gone: the
     * process was already gone then (pidfd_open said ESRCH). */
    _Atomic int live_tried;
    int live_gone;
    /* hb.c heartbeats: where its heartbeat socket listens (has_hb),
     * its pid as the blob says (datagrams must carry it), when we last
     * heard from it (ns; written by the heartbeat thread only), and
     * whether it said goodbye (finalized: not watched any more, and its
     * exit is no failure).  hb_local: on this host (goodbyes go to all
     * of those, for wait.c's watch lists). */
    unsigned char hb_ip[16];
    uint16_t hb_port;
    int has_hb, hb_pid, hb_local, shm_cleaned;
    _Atomic int hb_bye;
    uint64_t hb_heard;
    /* failed.c: declared failed once (any cause, also after the first
     * death of the job), and excluded by a shrink: its failures no
     * longer fail the job's waits */
    _Atomic int declared, excluded;
};

struct tp_hb; /* hb.c: the heartbeat thread's state */

struct fccl_tp {
    struct tp_ep eps[TP_MAX_EPS];
    int nep;
    int forced;              /* one provider for every peer */
    int always_register;
    size_t max_chunk;
    char desc[2 * TP_PROV_MAX + 2];
    struct tp_peer *peers;
    int nranks, my_rank;
    tp_lookup_fn lookup;     /* a peer's name blob, on first use */
    void *lookup_arg;
    void *own_names;         /* tp_add_peers' copy of the blobs */
    /* One lock guards every fi_* call (domains are FI_THREAD_DOMAIN) and
     * the retry queues; held briefly, never across a wait. */
    pthread_mutex_t lock;
    void **zombies;          /* contexts abandoned after a failed cancel */
    size_t nzombies, zcap;
    size_t outstanding;      /* operations inside the provider */
    /* How long waiters poll before yielding (wait.c, "Waiting"): the
     * learned budget, read and written by every waiting thread without
     * the lock (a lost update only delays the learning by one wait). */
    _Atomic uint64_t spin_ns;
    _Atomic uint64_t spin_calm;  /* when the budget last had to grow */
    int spin_fixed;          /* FCCL_SPIN_US, or oversubscribed: no learning */
    _Atomic int failed;      /* an operation failed (bye.c: no waiting) */
    int machine_ranks;       /* ranks sharing this machine's CPUs (0: unknown) */
    int cma_ok, pid;         /* CMA works in this process (FCCL_CMA) */
    uint64_t pidns, cma_magic;
    _Atomic uint64_t st_eagain, st_chunks, st_completions, st_cma;
    struct tp_hb *hb;        /* hb.c; NULL when heartbeats are off */
    _Atomic int dead_rank;   /* a rank declared dead (hb.c), or -1 */
    char dead_why[160];      /* why; written once before dead_rank */
    unsigned char hb_self[TP_HB_ADDR_LEN]; /* our heartbeat address */
    int hb_self_ok;                        /* ... published in the blob */
};

/* Two questions about an endpoint that files on both sides of the call
 * order ask (post.c and eager.c, rndv.c): answered from its fields alone,
 * so they live here, below every file, and stay inline on the post path. */

/* The largest wire message on e: max_msg_size, or opts.max_chunk if
 * smaller (never 0).  A request above it goes in chunks. */
static inline size_t tp_chunk_limit(const struct fccl_tp *tp,
                                    const struct tp_ep *e)
{
    size_t lim = e->max_msg;
    if (tp->max_chunk && tp->max_chunk < lim)
        lim = tp->max_chunk;
    return lim ? lim : 1;
}

/* Does a message of len bytes go eager on e (eager.c; eager_max is 0
 * where eager messages are off)? */
static inline int tp_eager_is(const struct tp_ep *e, size_t len)
{
    return e->eager_max && len <= e->eager_max;
}

/* bye.c: goodbyes to the peers we talked to over net, then wait (bounded)
 * for theirs (tp_close, before the endpoints close). */
void tp_bye(struct fccl_tp *tp);

/* ep.c */
int tp_ep_open(struct tp_ep *e, int kind, const char *prov,
               const char *iface, int forced);
void tp_ep_close(struct tp_ep *e);

/* libfabric's message for err (negative or positive; shm negates some). */
static inline const char *tp_fi_strerror(int err)
{
    return fi_strerror(err < 0 ? -err : err);
}

/* names.c: encode all endpoints and this process; decode one peer's
 * endpoint of `kind` (or, forced, the one with provider `prov`), or its
 * process (FCCL_ERR_NOTFOUND when absent). */
int tp_blob_encode(const struct fccl_tp *tp, void *buf, size_t *len);
int tp_blob_find(const void *blob, size_t len, int kind, const char *prov,
                 const unsigned char **addr, size_t *addrlen);
int tp_blob_proc(const void *blob, size_t len, int *pid, uint64_t *pidns);

/* mr.c: descriptor for [buf, buf+len) on endpoint e, registering on a
 * miss; *entry is released with tp_mr_put when the op completes. */
int tp_mr_get(struct tp_ep *e, const void *buf, size_t len, void **desc,
              void **entry);
void tp_mr_put(struct tp_ep *e, void *entry);
void *tp_mr_desc(void *entry); /* NULL for a NULL entry */
void tp_mr_cache_free(struct tp_ep *e);
void tp_mr_stats(const struct tp_ep *e, uint64_t *hits, uint64_t *misses,
                 uint64_t *entries);

/* cma.c: may this process read others' memory (sets tp->cma_ok); copy
 * len bytes from (pid, addr) (0 or a positive errno); does (pid, addr)
 * hold `value` in our pid namespace `pidns`? */
void tp_cma_init(struct fccl_tp *tp);
int tp_cma_pull(int pid, uint64_t addr, void *dst, size_t len);
int tp_cma_probe_ok(const struct fccl_tp *tp, int pid, uint64_t pidns,
                    uint64_t addr, uint64_t value);

/* resolve.c (uses ep state, live.c, names.c): which endpoint and address
 * serve rank r given its blob; where r would be reached without inserting
 * it; insert r into the AV on first use (idempotent; the error names r).
 * tp_resolve takes tp->lock, tp_resolve_locked expects it held. */
int tp_route(const struct fccl_tp *tp, int r, const void *blob, size_t len,
             int local, int *epi, const unsigned char **addr, size_t *alen);
int tp_peer_where(const struct fccl_tp *tp, int r, int *epi);
int tp_resolve(struct fccl_tp *tp, int r);
int tp_resolve_locked(struct fccl_tp *tp, int r);
/* peers.c: free tp_add_peers' copy of the blobs (tp_close). */
void tp_free_own_names(struct fccl_tp *tp);

/* live.c (uses names.c) */
void tp_live_add(struct fccl_tp *tp, struct tp_peer *p, const void *blob,
                 size_t len, int local);
void tp_live_close(struct tp_peer *p);
/* First of ranks[0..n) whose process has exited, or -1; with skip_bye,
 * ranks that said goodbye (heartbeats) do not count. */
int tp_live_dead(const struct fccl_tp *tp, const int *ranks, size_t n,
                 int skip_bye);
/* Heartbeats (hb.c, uses names.c): tp_hb_open binds the socket (before
 * the blob is encoded; failure only logs), tp_hb_start starts the watcher
 * thread once the peers are known, tp_hb_stop says goodbye and joins it
 * (tp_close).
 * tp_hb_open also fills tp->hb_self, which names.c publishes. */
void tp_hb_open(struct fccl_tp *tp);
void tp_hb_start(struct fccl_tp *tp);
void tp_hb_stop(struct fccl_tp *tp);
/* The rank declared dead (heartbeats), or -1; its reason in tp->dead_why. */
int tp_hb_dead(const struct fccl_tp *tp);
/* A peer's address and pid from its blob (tp_add_peers calls it). */
void tp_hb_add(struct fccl_tp *tp, struct tp_peer *p, const void *blob,
               size_t len, int local);
/* A wait failed because `rank` is gone (broken connection, exited): if no
 * death is known yet, declare it and tell every rank. */
void tp_hb_suspect(struct fccl_tp *tp, int rank, const char *why);
/* Watch the nearest ring neighbours that are not excluded (failed.c
 * calls it after an exclusion); their silence counts from now. */
void tp_hb_rewatch(struct fccl_tp *tp);
/* Take (1) or release (0) the heartbeat thread's lock (readmit.c: a
 * peer's heartbeat fields and record change under it). */
void tp_hb_hold(struct fccl_tp *tp, int hold);

/* post.c: put messages on the wire (all under tp->lock).  Each returns 0
 * or a negative fi errno; tp_post_busy() tells the ones to retry later. */
int tp_post_busy(ssize_t rc);
ssize_t tp_post_data(struct fccl_tp *tp, struct tp_req *r); /* 1: inject,
                                                     complete already */
ssize_t tp_post_recv(struct fccl_tp *tp, struct tp_req *r);
ssize_t tp_post_cts(struct fccl_tp *tp, struct tp_req *r);
ssize_t tp_post_desc(struct fccl_tp *tp, struct tp_req *r); /* CMA */
ssize_t tp_post_trunc(struct fccl_tp *tp, struct tp_req *r);
/* Control messages: send (queued and retried in order when refused),
 * retry the queue, (re)post the receive slots, which slot a context is. */
void tp_ctl_send(struct fccl_tp *tp, int peer, int kind, uint64_t a,
                 uint64_t b, uint64_t c, uint64_t d);
void tp_ctl_drain(struct fccl_tp *tp, struct tp_ep *e);
void tp_ctl_free(struct tp_ep *e);
void tp_slots_post(struct tp_ep *e);
struct tp_cts_slot *tp_slot_of(struct tp_ep *e, void *ctx);
/* Retry queues: per peer for sends, per endpoint for receives and for
 * owed clear-to-sends (which need no receive entry). */
struct tp_req **tp_q_head(struct fccl_tp *tp, struct tp_req *r);
void tp_q_push(struct fccl_tp *tp, struct tp_req *r, int front);
void tp_q_pop(struct fccl_tp *tp, struct tp_req *r);

/* eager.c (all under tp->lock; rndv.c finishes the requests):
 * set up and post the bounce receives of a network endpoint (after
 * tp_ep_open; off where it does not apply); post the ones not posted;
 * which slot a context is; start an
 * eager receive (1 and *status: a kept message completed it; 0: it waits
 * on its peer's list); take it off that list; a slot completed (the
 * receive it completed, with *status, or NULL); a slot failed; free what
 * is left (after the endpoints are closed). */
int tp_eager_open(struct fccl_tp *tp, struct tp_ep *e);
void tp_eager_post(struct tp_ep *e);
struct tp_eager_slot *tp_eager_slot_of(struct tp_ep *e, void *ctx);
int tp_eager_recv(struct fccl_tp *tp, struct tp_req *r, int *status);
void tp_eager_unlink(struct fccl_tp *tp, struct tp_req *r);
struct tp_req *tp_eager_arrived(struct fccl_tp *tp, struct tp_ep *e,
                                struct tp_eager_slot *s,
                                const struct fi_cq_tagged_entry *ent,
                                int *status);
void tp_eager_slot_failed(struct tp_ep *e, struct tp_eager_slot *s, int err);
void tp_eager_free(struct fccl_tp *tp);

/* rndv.c: the request state machine (all under tp->lock). */
int tp_rv_submit(struct fccl_tp *tp, struct tp_req *r);
void tp_rv_finish(struct fccl_tp *tp, struct tp_req *r, int status);
int tp_rv_unqueue(struct fccl_tp *tp, struct tp_req *r);
void tp_rv_drain(struct fccl_tp *tp, struct tp_ep *e);
int tp_rv_start(struct fccl_tp *tp);
void tp_rv_stop(struct fccl_tp *tp);
void tp_rv_on_cq(struct fccl_tp *tp, struct tp_ep *e,
                 const struct fi_cq_tagged_entry *ent);
void tp_rv_on_err(struct fccl_tp *tp, struct tp_ep *e, void *ctx,
                  const struct fi_cq_err_entry *ee);

/* progress.c: read every CQ once (under tp->lock); try without waiting
 * for the lock; drop the completion of an abandoned context. */
int tp_progress_locked(struct fccl_tp *tp);
int tp_progress_try(struct fccl_tp *tp);
void tp_zombie_add(struct fccl_tp *tp, void *ctx, int *ok);
int tp_zombie_take(struct fccl_tp *tp, void *ctx);

#endif
