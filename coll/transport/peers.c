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
#include "tp_int.h"

#define TP_SRC_MAX (1 << (64 - TP_TAG_BITS)) /* ranks without directed recv */
#define TP_SPIN_ENV "FCCL_SPIN_US"
#define TP_SHM_PEERS_MAX 255 /* libfabric 1.17 shm: 256 per endpoint */

/* Peers                                                              */
/* ------------------------------------------------------------------ */

/* How long waiters poll before yielding: FCCL_SPIN_US fixes it; with more
 * ranks on this machine than CPUs it is 0 for good; else wait.c learns it,
 * starting from TP_SPIN_NS (see the top of wait.c). */
static void set_spin(struct fccl_tp *tp, int local)
{
    const char *env = getenv(TP_SPIN_ENV);
    if (env && *env) {
        char *end;
        unsigned long long us = strtoull(env, &end, 10);
        if (*end == '\0') {
            atomic_store(&tp->spin_ns, us * 1000ull);
            tp->spin_fixed = 1;
            return;
        }
        LOG_WARN("FABRIC", "%s=%s is not a number of microseconds; ignored",
                 TP_SPIN_ENV, env);
    }
    cpu_set_t set;
    int cpus = sched_getaffinity(0, sizeof(set), &set) == 0 ? CPU_COUNT(&set)
                                                             : 0;
    /* Namespaces of one machine are different hosts to the topology but
     * share the CPUs: a spinning waiter keeps another "host"'s rank off
     * the core it needs (2 hosts x 2 ranks on 2 cores: 8-byte all_reduce
     * 437 us spinning, 42 us yielding). */
    int sharing = tp->machine_ranks > local ? tp->machine_ranks : local;
    tp->spin_fixed = cpus > 0 && sharing > cpus;
    atomic_store(&tp->spin_ns, tp->spin_fixed ? 0 : TP_SPIN_NS);
    atomic_store(&tp->spin_calm, fccl_now_ns());
    LOG_DEBUG("FABRIC", "%d local ranks, %d on this machine, %d CPUs: "
              "waiters %s", local, sharing, cpus,
              tp->spin_fixed ? "yield at once" : "learn how long to spin");
}

/* tp_add_peers' own table: every blob copied into one block. */
struct own_names {
    int nranks, my_node;
    int *node_of;      /* NULL: everyone on my host */
    size_t *off, *len;
    unsigned char *data;
};

static int own_lookup(void *arg, int rank, const void **name, size_t *len,
                      int *local)
{
    const struct own_names *o = arg;
    *name = o->data + o->off[rank];
    *len = o->len[rank];
    *local = !o->node_of || o->node_of[rank] == o->my_node;
    return FCCL_OK;
}

static void own_free(struct own_names *o)
{
    if (!o)
        return;
    free(o->node_of);
    free(o->off);
    free(o->len);
    free(o->data);
    free(o);
}

static struct own_names *own_copy(int n, int me, const void *const *names,
                                  const size_t *lens, const int *node_of)
{
    struct own_names *o = calloc(1, sizeof(*o));
    size_t total = 0;
    for (int r = 0; r < n; r++)
        total += lens[r];
    if (!o)
        return NULL;
    o->nranks = n;
    o->off = calloc((size_t)n, sizeof(size_t));
    o->len = calloc((size_t)n, sizeof(size_t));
    o->data = malloc(total ? total : 1);
    if (node_of)
        o->node_of = malloc((size_t)n * sizeof(int));
    if (!o->off || !o->len || !o->data || (node_of && !o->node_of)) {
        own_free(o);
        return NULL;
    }
    o->my_node = node_of ? node_of[me] : 0;
    size_t at = 0;
    for (int r = 0; r < n; r++) {
        o->off[r] = at;
        o->len[r] = lens[r];
        if (lens[r])
            memcpy(o->data + at, names[r], lens[r]);
        at += lens[r];
    }
    if (node_of)
        memcpy(o->node_of, node_of, (size_t)n * sizeof(int));
    return o;
}

int tp_set_peers(struct fccl_tp *tp, int nranks, int my_rank, int local_ranks,
                 tp_lookup_fn lookup, void *lookup_arg)
{
    if (!tp || nranks <= 0 || my_rank < 0 || my_rank >= nranks || !lookup)
        return fccl_err(FCCL_ERR_INVALID, "tp_set_peers: bad arguments "
                        "(nranks %d, rank %d)", nranks, my_rank);
    if (tp->peers)
        return fccl_err(FCCL_ERR_STATE, "tp_set_peers: peers already added");
    for (int i = 0; i < tp->nep; i++)
        if (!tp->eps[i].directed && nranks > TP_SRC_MAX)
            return fccl_err(FCCL_ERR_UNSUPPORTED, "transport: %s lacks "
                            "directed receive; at most %d ranks",
                            tp->eps[i].prov, TP_SRC_MAX);
    struct tp_peer *peers = calloc((size_t)nranks, sizeof(*peers));
    if (!peers)
        return fccl_err(FCCL_ERR_NOMEM, "tp_set_peers: %d ranks", nranks);
    for (int r = 0; r < nranks; r++)
        peers[r].pidfd = peers[r].old_pidfd = -1;
    pthread_mutex_lock(&tp->lock);
    tp->peers = peers;
    tp->lookup = lookup;
    tp->lookup_arg = lookup_arg;
    tp->nranks = nranks;
    tp->my_rank = my_rank;
    set_spin(tp, local_ranks);
    int rc = tp_rv_start(tp);
    if (rc < 0) {
        tp->peers = NULL;
        tp->nranks = 0;
        tp->lookup = NULL;
        free(peers);
    }
    pthread_mutex_unlock(&tp->lock);
    return rc;
}

/* The heartbeat addresses of my two ring neighbours, the ranks hb.c
 * watches (parsing only, nothing is resolved).  Everyone else's is looked
 * up only if a death has to be announced to all (hb.c), so this stays
 * O(1) per rank whatever the world size. */
static void hb_fill_locked(struct fccl_tp *tp)
{
    int n = tp->nranks, me = tp->my_rank;
    int nb[2] = {(me + n - 1) % n, (me + 1) % n};
    for (int i = 0; i < 2; i++) {
        const void *blob = NULL;
        size_t len = 0;
        int local = 0, r = nb[i];
        if (r == me || tp->peers[r].has_hb ||
            tp->lookup(tp->lookup_arg, r, &blob, &len, &local) < 0)
            continue;
        tp_hb_add(tp, &tp->peers[r], blob, len, local);
    }
}

void tp_set_machine(struct fccl_tp *tp, int ranks)
{
    if (!tp)
        return;
    pthread_mutex_lock(&tp->lock);
    tp->machine_ranks = ranks;
    pthread_mutex_unlock(&tp->lock);
}

/* Put every local peer reached through shm into its address vector now.
 * libfabric 1.17's shm matches a message from a sender missing from the
 * receiver's address vector (its source is FI_ADDR_UNSPEC) against any
 * posted receive with the same tag, whatever peer that receive names
 * (smr_match_id), and keeps it so in the unexpected queue: in a pairwise
 * all_to_all, rank r's receive from r-2 took the 12 B that r-3 sent a
 * round early (same collective tag) and failed as truncated.  With every
 * local peer known before the first collective no message has an unknown
 * source.  Lazy resolution stays for the network, where rxm looks the
 * source up again when it is inserted.  Beyond shm's 256 peers per
 * endpoint this cannot be done; such a host stays lazy, with a warning. */
static void resolve_shm_peers(struct fccl_tp *tp, const int *ranks, int n)
{
    int shm = 0;
    for (int i = 0; i < tp->nep; i++)
        shm |= tp->eps[i].is_shm;
    if (!shm)
        return;
    if (n - 1 > TP_SHM_PEERS_MAX) {
        LOG_WARN("FABRIC", "%d local ranks exceed shm's %d peers: peers are "
                 "resolved on first use, and a message from a peer this rank "
                 "has not talked to yet can match another peer's receive",
                 n, TP_SHM_PEERS_MAX);
        return;
    }
    for (int i = 0; i < n; i++) {
        int epi, r = ranks[i];
        if (r == tp->my_rank || tp_peer_where(tp, r, &epi) < 0 ||
            !tp->eps[epi].is_shm)
            continue;
        if (tp_resolve_locked(tp, r) < 0) /* the first post says it again */
            LOG_DEBUG("FABRIC", "rank %d: %s", r, fccl_last_error());
    }
}

void tp_set_local(struct fccl_tp *tp, const int *ranks, int n)
{
    if (!tp || !tp->peers)
        return;
    pthread_mutex_lock(&tp->lock);
    set_spin(tp, n);
    if (ranks)
        resolve_shm_peers(tp, ranks, n);
    hb_fill_locked(tp);
    tp_hb_start(tp);
    pthread_mutex_unlock(&tp->lock);
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
    /* Check every blob now (parsing only: nothing is inserted). */
    int local_ranks = 0, *local_list = malloc(sizeof(int) * (size_t)nranks);
    if (!local_list)
        return fccl_err(FCCL_ERR_NOMEM, "tp_add_peers: %d ranks", nranks);
    for (int r = 0; r < nranks; r++) {
        int local = !node_of || node_of[r] == node_of[my_rank], epi;
        const unsigned char *addr;
        size_t alen;
        if (local)
            local_list[local_ranks++] = r;
        int rc = tp_route(tp, r, names[r], lens[r], local, &epi, &addr, &alen);
        if (rc < 0) {
            free(local_list);
            return fccl_err_wrap(rc, "tp_add_peers: rank %d", r);
        }
    }
    struct own_names *o = own_copy(nranks, my_rank, names, lens, node_of);
    int rc = o ? tp_set_peers(tp, nranks, my_rank, local_ranks, own_lookup, o)
               : fccl_err(FCCL_ERR_NOMEM, "tp_add_peers: %d ranks", nranks);
    if (rc < 0) {
        own_free(o);
    } else {
        tp->own_names = o;
        tp_set_local(tp, local_list, local_ranks);
    }
    free(local_list);
    return rc;
}

void tp_free_own_names(struct fccl_tp *tp)
{
    own_free(tp->own_names);
    tp->own_names = NULL;
}

int tp_resolved_count(struct fccl_tp *tp)
{
    int n = 0;
    for (int r = 0; tp && tp->peers && r < tp->nranks; r++)
        n += atomic_load(&tp->peers[r].resolved) > 0;
    return n;
}

/* Answered without resolving the peer (select.c asks about every member):
 * the route its blob would take. */
int tp_peer_is_local(const struct fccl_tp *tp, int peer)
{
    if (!tp || !tp->peers || peer < 0 || peer >= tp->nranks)
        return 0;
    if (atomic_load(&((struct fccl_tp *)tp)->peers[peer].resolved) > 0)
        return tp->eps[tp->peers[peer].ep].kind == TP_EP_SHM;
    int epi = 0;
    if (tp_peer_where(tp, peer, &epi) < 0)
        return 0;
    return tp->eps[epi].kind == TP_EP_SHM;
}
