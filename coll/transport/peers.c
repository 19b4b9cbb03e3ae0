/*
 * Peers: where each world rank is reached (which of my endpoints, and its
 * address there), its liveness handle, and how long waiters spin.
 *
 * Matching.  A receive for (peer, tag) is a directed tagged receive: its
 * src_addr is the peer's fi_addr, so it matches only that peer's messages
 * with that tag.  Every provider used here grants FI_DIRECTED_RECV.  One
 * that does not gets the sender's rank in the tag's top 64 - TP_TAG_BITS
 * bits instead, which limits it to 16 ranks and to unchunked messages.
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
#define TP_SPIN_ENV "FCCL_SPIN_US"

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
        rc = tp_rv_start(tp);
        if (rc == FCCL_OK)
            tp_hb_start(tp);
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
