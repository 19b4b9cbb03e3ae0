/*
 * Peer resolution: a network peer's address goes into our address vector
 * (fi_av_insert) the first time we post to it, send it a control message,
 * or ask where it is, never at start-up.  At 16,384 ranks inserting every
 * peer costs each rank seconds and memory it mostly never uses, and
 * libfabric 1.17's shm refuses more than 256 peers per endpoint; NCCL 2.22
 * connects lazily for the same reasons.
 *
 * The name blob of a peer comes from the caller's lookup (tp_set_peers):
 * the bootstrap's record table, or tp_add_peers' copy of the blobs.  A
 * peer that cannot be resolved fails the post with an error naming it,
 * and every later post to it fails the same way.
 *
 * Messages from a network peer we have not resolved yet wait in rxm's
 * unexpected queue like any other early message; the directed receive
 * posted after resolving it matches them (rxm looks the source up again
 * when the address appears).  shm does not: a message from a sender
 * missing from the address vector matches any receive with its tag, so
 * peers on shm are all resolved at once by tp_set_local (peers.c).
 */
#include <stdio.h>
#include <string.h>

#include "err.h"
#include "log.h"
#include "tp_int.h"

static int ep_index(const struct fccl_tp *tp, int kind)
{
    for (int i = 0; i < tp->nep; i++)
        if (tp->eps[i].kind == kind)
            return i;
    return -1;
}

int tp_route(const struct fccl_tp *tp, int r, const void *blob, size_t len,
             int local, int *epi, const unsigned char **addr, size_t *alen)
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

int tp_peer_where(const struct fccl_tp *tp, int r, int *epi)
{
    const void *blob = NULL;
    size_t len = 0, alen = 0;
    int local = 0;
    const unsigned char *addr;
    int rc = tp->lookup(tp->lookup_arg, r, &blob, &len, &local);
    if (rc < 0)
        return fccl_err_wrap(rc, "transport: rank %d: no name to reach it "
                             "by", r);
    return tp_route(tp, r, blob, len, local, epi, &addr, &alen);
}

static int insert(struct fccl_tp *tp, int r)
{
    const void *blob = NULL;
    size_t len = 0, alen = 0;
    int local = 0, epi = 0;
    const unsigned char *addr;
    int rc = tp->lookup(tp->lookup_arg, r, &blob, &len, &local);
    if (rc < 0)
        return fccl_err_wrap(rc, "transport: rank %d: no name to reach it "
                             "by", r);
    if ((rc = tp_route(tp, r, blob, len, local, &epi, &addr, &alen)) < 0)
        return rc;
    struct tp_ep *e = &tp->eps[epi];
    unsigned char tmp[TP_ADDR_MAX + 1] = {0}; /* aligned, NUL-terminated */
    memcpy(tmp, addr, alen);
    fi_addr_t fa = FI_ADDR_NOTAVAIL;
    int n = fi_av_insert(e->av, tmp, 1, &fa, 0, NULL);
    if (n != 1 || fa == FI_ADDR_NOTAVAIL)
        return fccl_err(FCCL_ERR_FABRIC, "transport: %s: cannot reach rank "
                        "%d: fi_av_insert: %s", e->prov, r,
                        n < 0 ? tp_fi_strerror(n) : "address rejected");
    struct tp_peer *p = &tp->peers[r];
    p->ep = epi;
    p->addr = fa;
    if (!atomic_load(&p->live_tried))
        tp_live_add(tp, p, blob, len, local);
    LOG_DEBUG("FABRIC", "rank %d resolved on %s", r, e->prov);
    return FCCL_OK;
}

int tp_resolve_locked(struct fccl_tp *tp, int r)
{
    struct tp_peer *p = &tp->peers[r];
    int st = atomic_load_explicit(&p->resolved, memory_order_acquire);
    if (st > 0)
        return FCCL_OK;
    if (st < 0) /* failed before: say so again, naming it */
        return fccl_err(st, "transport: rank %d could not be reached (its "
                        "address failed to resolve earlier)", r);
    int rc = insert(tp, r);
    atomic_store_explicit(&p->resolved, rc < 0 ? rc : 1,
                          memory_order_release);
    return rc;
}

int tp_resolve(struct fccl_tp *tp, int r)
{
    if (atomic_load_explicit(&tp->peers[r].resolved, memory_order_acquire) > 0)
        return FCCL_OK;
    pthread_mutex_lock(&tp->lock);
    int rc = tp_resolve_locked(tp, r);
    pthread_mutex_unlock(&tp->lock);
    return rc;
}

int tp_peer_endpoint(const struct fccl_tp *tp, int peer)
{
    int epi = -1;
    if (!tp || !tp->peers || !tp->lookup || peer < 0 ||
        peer >= tp->nranks || peer == tp->my_rank)
        return -1;
    if (atomic_load(&tp->peers[peer].resolved) == 1)
        epi = tp->peers[peer].ep;
    else if (tp_peer_where(tp, peer, &epi) < 0)
        return -1;
    return epi >= 0 && epi < tp->nep ? epi : -1;
}

const char *tp_endpoint_provider(const struct fccl_tp *tp, int i)
{
    return tp && i >= 0 && i < tp->nep ? tp->eps[i].prov : NULL;
}
