/*
 * Opening and closing the transport: which provider(s), the endpoints,
 * the description for logs, and the counters.
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

#define TP_DRAIN_MS 200 /* bound on letting operations in flight finish */

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
    /* FCCL_NET_PROVIDER picks the network provider (benchmarks compare
     * them); shm stays for local peers */
    const char *np = getenv("FCCL_NET_PROVIDER");
    if (np && !*np)
        np = NULL;
    rc = tp_ep_open(&tp->eps[tp->nep], TP_EP_NET, np, iface, np != NULL);
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
    atomic_store(&tp->dead_rank, -1);
    tp->always_register = o->always_register;
    tp->max_chunk = o->max_chunk;
    tp->my_rank = -1;
    atomic_store(&tp->spin_ns, TP_SPIN_NS);
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
    tp_hb_open(tp);
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
/* Close and stats                                                    */
/* ------------------------------------------------------------------ */

void tp_close(struct fccl_tp *tp)
{
    if (!tp)
        return;
    tp_bye(tp); /* while the heartbeats still watch the peers it waits for */
    tp_hb_stop(tp); /* says goodbye to the watchers and local ranks */
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
        tp_rv_stop(tp);
    pthread_mutex_unlock(&tp->lock);
    pthread_mutex_destroy(&tp->lock);
    for (int p = 0; tp->peers && p < tp->nranks; p++)
        tp_live_close(&tp->peers[p]);
    free(tp->peers);
    tp_free_own_names(tp);
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

