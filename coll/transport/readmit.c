/*
 * A rank left out by a shrink taken back in (bootstrap/grow.c): a new
 * process now holds that world rank, with new endpoints, a new pid and a
 * new heartbeat socket, so everything this transport learnt about the old
 * one is dropped and learnt again from the new record.
 *
 * The caller's update (the record table's swap) runs under the transport
 * lock and the heartbeat thread's lock, the two places a lookup of the
 * rank's record may run from, so neither reads a half-written table.
 * The old pidfd stays open until tp_close: the heartbeat thread may be
 * polling it right now (its shm files are the launcher's or that thread's
 * to remove).  Messages of the old process still queued here (early
 * clear-to-sends, early eager messages) carry tags of groups that ended,
 * which no later group uses (context ids are never reused), so they are
 * left until tp_close.  On shm the new address is inserted at once, as
 * tp_set_local does for every local peer; on the network on first use.
 */
#include <unistd.h>

#include "err.h"
#include "log.h"
#include "tp_int.h"

/* Forget the old process (under both locks). */
static void forget(struct tp_peer *p)
{
    if (p->old_pidfd >= 0)
        close(p->old_pidfd);
    p->old_pidfd = p->pidfd;
    p->pidfd = -1;
    p->live_pid = 0;
    p->live_gone = 0;
    p->shm_cleaned = 0;
    atomic_store(&p->live_tried, 0);
    atomic_store(&p->resolved, 0);
    p->cma = TP_CMA_UNKNOWN;
    p->pid = 0;
    p->talked = 0;
    p->bye_in = 0;
    p->has_hb = 0; /* parsed again from the new record (hb.c) */
    atomic_store(&p->hb_bye, 0);
    atomic_store(&p->declared, 0);
}

int tp_readmit(struct fccl_tp *tp, int rank, void (*update)(void *arg),
               void *arg)
{
    if (!tp || !tp->peers || rank < 0 || rank >= tp->nranks ||
        rank == tp->my_rank)
        return fccl_err(FCCL_ERR_INVALID, "readmit: rank %d is not another "
                        "rank of this job", rank);
    struct tp_peer *p = &tp->peers[rank];
    if (!atomic_load(&p->excluded))
        return fccl_err(FCCL_ERR_STATE, "readmit: rank %d was not left out "
                        "by a shrink here (a live rank cannot be replaced)",
                        rank);
    pthread_mutex_lock(&tp->lock);
    tp_hb_hold(tp, 1);
    if (update)
        update(arg);
    forget(p);
    atomic_store(&p->excluded, 0);
    tp_hb_hold(tp, 0);
    int rc = FCCL_OK, epi = -1;
    if (tp_peer_where(tp, rank, &epi) >= 0 && tp->eps[epi].is_shm)
        rc = tp_resolve_locked(tp, rank);
    pthread_mutex_unlock(&tp->lock);
    tp_hb_rewatch(tp);
    LOG_DEBUG("FABRIC", "rank %d taken back in (%s)", rank,
              rc < 0 ? fccl_last_error() : "ok");
    return rc;
}
