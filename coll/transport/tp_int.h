/*
 * Private to coll/transport*.c: the transport's internal state.  These are
 * the only files that include libfabric headers.
 *
 *   transport_ep.c    provider choice, endpoint setup/teardown, name blobs
 *   transport_mr.c    memory-registration cache
 *   transport_wire.c  requests -> tagged messages, completions, retry queues
 *   transport_cma.c   single-copy transfers between local processes
 *   transport_live.c  noticing that a local peer's process has exited
 *   transport.c       open/close, peers, the progress engine, waiting
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

#include "transport/tp.h"

#define TP_MAX_EPS 2
#define TP_PROV_MAX 64
#define TP_ADDR_MAX 256
#define TP_CTS_SLOTS 8 /* receives kept posted for control messages */
#define TP_CTL_WORDS 6  /* control message: rank, kind, 4 arguments */
#define TP_CMA_RTS 0x434d41ull /* remote CQ data of a CMA descriptor */

/* Control messages (tag TP_CTS_BIT, any source; transport_wire.c). */
enum { TP_CTL_CTS = 1, TP_CTL_FIN, TP_CTL_PROBE, TP_CTL_PROBE_ACK };
/* Request phases: a send waits for clear-to-send, then sends data (or a
 * CMA descriptor, then waits for FIN); a receive posts its buffer, then
 * tells the sender to go. */
enum { TP_PH_DATA = 0, TP_PH_WAIT_CTS, TP_PH_SEND_CTS, TP_PH_HELD,
       TP_PH_WAIT_FIN };
/* May this process read a peer's memory (transport_cma.c)? */
enum { TP_CMA_UNKNOWN = 0, TP_CMA_PROBING, TP_CMA_YES, TP_CMA_NO };
/* How a send uses CMA (tp_req.cma). */
enum { TP_CMA_OFF = 0, TP_CMA_AFTER_CTS, TP_CMA_EAGER };

enum tp_ep_kind { TP_EP_SHM = 1, TP_EP_NET = 2, TP_EP_PROC = 3 /* blob only */ };
#define TP_PROC_NAME "proc"
#define TP_LIVE_ADDR_LEN 12

struct tp_mr_cache; /* transport_mr.c */

/* A receive kept posted for any peer's control message. */
struct tp_cts_slot {
    struct fi_context2 ctx;
    uint64_t msg[TP_CTL_WORDS];
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
                                    (shm): see transport_wire.c */
    struct tp_cts_slot cts[TP_CTS_SLOTS];
    int cts_unposted;            /* slots to post again (busy) */
    struct tp_ctl *ctlq_head, *ctlq_tail; /* control messages to retry */
};

/* How to reach one peer. */
struct tp_peer {
    int ep;          /* index into tp->eps */
    fi_addr_t addr;
    struct tp_req *txq_head, *txq_tail; /* sends waiting to be posted */
    struct tp_req *rv_head;      /* sends waiting for clear-to-send, and
                                    later sends held behind them (same
                                    tag), in post order */
    struct tp_early_cts *early;  /* clear-to-sends not yet claimed */
    struct tp_req *fin_head;     /* CMA sends waiting for FIN */
    int eager_out;               /* eager CMA descriptors among them */
    int cma;                     /* TP_CMA_*: do we send to it by CMA */
    int pid;                     /* its pid, once it may read us */
    int pidfd, live_pid;         /* local peer's process (or -1, 0) */
};

struct fccl_tp {
    struct tp_ep eps[TP_MAX_EPS];
    int nep;
    int forced;              /* one provider for every peer */
    int always_register;
    size_t max_chunk;
    char desc[2 * TP_PROV_MAX + 2];
    struct tp_peer *peers;
    int nranks, my_rank;
    /* One lock guards every fi_* call (domains are FI_THREAD_DOMAIN) and
     * the retry queues; held briefly, never across a wait. */
    pthread_mutex_t lock;
    void **zombies;          /* contexts abandoned after a failed cancel */
    size_t nzombies, zcap;
    size_t outstanding;      /* operations inside the provider */
    uint64_t spin_ns;        /* waiters poll this long before yielding */
    int cma_ok, pid;         /* CMA works in this process (FCCL_CMA) */
    uint64_t pidns, cma_magic;
    _Atomic uint64_t st_eagain, st_chunks, st_completions, st_cma;
};

/* transport_ep.c */
int tp_ep_open(struct tp_ep *e, int kind, const char *prov,
               const char *iface, int forced);
void tp_ep_close(struct tp_ep *e);
/* Name blob: encode all endpoints; decode one peer's endpoint of `kind`
 * (or, forced, the one with provider `prov`). */
int tp_blob_encode(const struct fccl_tp *tp, void *buf, size_t *len);
int tp_blob_find(const void *blob, size_t len, int kind, const char *prov,
                 const unsigned char **addr, size_t *addrlen);
const char *tp_fi_strerror(int err); /* err may be negative or positive */

/* transport.c */
int tp_progress_locked(struct fccl_tp *tp);

/* transport_wire.c */
size_t tp_chunk_limit(const struct fccl_tp *tp, const struct tp_ep *e);
int tp_wire_submit(struct fccl_tp *tp, struct tp_req *r);
void tp_wire_finish(struct fccl_tp *tp, struct tp_req *r, int status);
int tp_wire_unqueue(struct fccl_tp *tp, struct tp_req *r);
void tp_wire_drain(struct fccl_tp *tp, struct tp_ep *e);
int tp_wire_start(struct fccl_tp *tp);
void tp_wire_stop(struct fccl_tp *tp);
void tp_wire_on_cq(struct fccl_tp *tp, struct tp_ep *e,
                   const struct fi_cq_tagged_entry *ent);
void tp_wire_on_err(struct fccl_tp *tp, struct tp_ep *e, void *ctx,
                    const struct fi_cq_err_entry *ee);

/* Send control message `kind` with arguments a..d to peer (queued and
 * retried if the provider is busy). */
void tp_ctl_send(struct fccl_tp *tp, int peer, int kind, uint64_t a,
                 uint64_t b, uint64_t c, uint64_t d);

/* transport_cma.c */
void tp_cma_init(struct fccl_tp *tp);
int tp_cma_plan(struct fccl_tp *tp, struct tp_ep *e, struct tp_req *r);
ssize_t tp_cma_post(struct fccl_tp *tp, struct tp_ep *e, struct tp_req *r,
                    fi_addr_t fa);
void tp_cma_wait_fin(struct fccl_tp *tp, struct tp_req *r);
void tp_cma_forget(struct fccl_tp *tp, struct tp_req *r);
void tp_cma_on_rts(struct fccl_tp *tp, struct tp_req *r);
void tp_cma_on_ctl(struct fccl_tp *tp, int peer, const uint64_t *msg);

/* transport_live.c */
size_t tp_live_encode(const struct fccl_tp *tp, unsigned char *p);
void tp_live_add(struct fccl_tp *tp, struct tp_peer *p, const void *blob,
                 size_t len, int local);
void tp_live_close(struct tp_peer *p);
int tp_live_dead(const struct fccl_tp *tp, const int *ranks, size_t n);

/* transport_mr.c: descriptor for [buf, buf+len) on endpoint e, registering
 * on a miss; *entry is released with tp_mr_put when the op completes. */
int tp_mr_get(struct tp_ep *e, const void *buf, size_t len, void **desc,
              void **entry);
void tp_mr_put(struct tp_ep *e, void *entry);
void *tp_mr_desc(void *entry); /* NULL for a NULL entry */
void tp_mr_cache_free(struct tp_ep *e);
void tp_mr_stats(const struct tp_ep *e, uint64_t *hits, uint64_t *misses,
                 uint64_t *entries);

#endif
