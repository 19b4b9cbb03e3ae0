/*
 * Goodbye before closing.
 *
 * net (libfabric 1.17) loses the messages of a connection that it has not
 * yet matched to a receive when the connection is reset, and closing a
 * socket that still holds unread bytes resets it.  So a rank that sent its
 * last messages (small ones complete at once) and closed could erase them
 * before its peer posted the receives: coll_check on 5 ranks failed now
 * and then because the last barrier's message from a rank that had
 * finished and exited never arrived (test_transport's last_words_rst_net
 * shows the loss in isolation).
 *
 * So before closing, a rank sends TP_CTL_BYE ("all my receives are done")
 * to every peer it exchanged messages with over such an endpoint, and
 * waits until each of them has said the same: then nothing a peer still
 * wants from us is in flight when our connections go.  Goodbyes land in
 * the control receives kept posted (rndv.c), so one that comes early is
 * kept until we close.  The wait gives up on a peer whose process exited
 * or that the heartbeats declared dead, and on everyone after TP_BYE_MS
 * (none is awaited from a rank a shrink excluded, failed.c); a
 * transport whose operations already failed does not wait (its peers may
 * be gone).  shm needs none of this (a message sits in the receiver's own
 * memory), nor does tcp;ofi_rxm (it copies what comes early into its own
 * buffers, which a reset does not drop).
 */
#include <stdlib.h>

#include "clock.h"
#include "log.h"
#include "tp_int.h"

#define TP_BYE_MS 10000
#define TP_BYE_LIVE_NS 50000000ull /* exited peers: checked every 50 ms */

/* Does rank r get (and owe us) a goodbye? */
static int wants_bye(const struct fccl_tp *tp, int r)
{
    const struct tp_peer *p = &tp->peers[r];
    if (r == tp->my_rank || !p->talked || atomic_load(&p->excluded) ||
        atomic_load_explicit(&p->resolved, memory_order_acquire) != 1)
        return 0;
    const struct tp_ep *e = &tp->eps[p->ep];
    return !e->is_shm && e->rndv && e->directed; /* control receives posted */
}

static int ctl_queued(const struct fccl_tp *tp)
{
    for (int i = 0; i < tp->nep; i++)
        if (tp->eps[i].ctlq_head)
            return 1;
    return 0;
}

/* Drop from ranks[0..n) those that said goodbye; the new count. */
static size_t drop_answered(const struct fccl_tp *tp, int *ranks, size_t n)
{
    size_t k = 0;
    for (size_t i = 0; i < n; i++)
        if (!tp->peers[ranks[i]].bye_in)
            ranks[k++] = ranks[i];
    return k;
}

/* Drop those whose process has exited (local peers). */
static size_t drop_exited(const struct fccl_tp *tp, int *ranks, size_t n)
{
    size_t k = 0;
    for (size_t i = 0; i < n; i++)
        if (tp_live_dead(tp, &ranks[i], 1, 0) < 0)
            ranks[k++] = ranks[i];
    return k;
}

/* Wait until every rank of wait[0..n) said goodbye (or exited, or the
 * heartbeats declared someone dead, or TP_BYE_MS passed) and our own
 * control messages are out; returns how many never answered. */
static size_t await_byes(struct fccl_tp *tp, int *wait, size_t n)
{
    uint64_t t0 = fccl_now_ns(), last = t0, live_at = t0 + TP_BYE_LIVE_NS;
    uint64_t end = fccl_deadline_ms(TP_BYE_MS);
    for (;;) {
        pthread_mutex_lock(&tp->lock);
        int moved = tp_progress_locked(tp);
        n = drop_answered(tp, wait, n);
        int queued = ctl_queued(tp);
        pthread_mutex_unlock(&tp->lock);
        if (n == 0 && !queued)
            return 0;
        uint64_t now = fccl_now_ns();
        if (now >= live_at) {
            n = drop_exited(tp, wait, n);
            live_at = now + TP_BYE_LIVE_NS;
        }
        if (tp_hb_dead(tp) >= 0)
            return n;
        if (now >= end) {
            LOG_WARN("FABRIC", "closing after %d ms without a goodbye from "
                     "rank %d%s: messages it had not received yet may be "
                     "lost", TP_BYE_MS, n ? wait[0] : -1,
                     n > 1 ? " and others" : "");
            return n;
        }
        if (moved)
            last = now;
        tp_idle(tp, now - last);
    }
}

void tp_bye(struct fccl_tp *tp)
{
    if (!tp->peers || tp->nranks < 2)
        return;
    int *wait = malloc((size_t)tp->nranks * sizeof(int));
    if (!wait)
        return;
    size_t n = 0;
    int failed = atomic_load(&tp->failed) || tp_hb_dead(tp) >= 0;
    pthread_mutex_lock(&tp->lock);
    for (int r = 0; r < tp->nranks; r++)
        if (wants_bye(tp, r)) {
            tp_ctl_send(tp, r, TP_CTL_BYE, 0, 0, 0, 0);
            wait[n++] = r;
        }
    pthread_mutex_unlock(&tp->lock);
    if (!failed) {
        uint64_t t0 = fccl_now_ns();
        n = await_byes(tp, wait, n);
        LOG_DEBUG("FABRIC", "goodbyes done in %.1f ms (%zu unanswered)",
                  (double)(fccl_now_ns() - t0) / 1e6, n);
    }
    free(wait);
}
