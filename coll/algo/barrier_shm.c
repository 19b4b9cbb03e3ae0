/*
 * Barrier through the shared segment of a one-host group (shm/seg.c): each
 * rank bumps its counter and waits for everyone's, no messages.  Without a
 * segment it is the dissemination barrier.
 *
 * Who leaves first.  In the symmetric barrier the last to arrive leaves
 * first.  When what follows is a one-way broadcast, a receiver that leaves
 * first then waits for the root to learn that the barrier is over, and
 * then for its data: two line transfers in the receiver's call.  So a
 * barrier leaves the root first (coll_seg_barrier_led): it arrives last,
 * once it has seen everyone, and its data follows its release.  That
 * costs the barrier itself a transfer (2 ranks back to back: 0.7 us
 * against 0.4), so it is done only where it pays:
 *  - after a barrier that a broadcast followed, its root leads the next
 *    barrier (a loop of barrier and broadcast; 2 ranks, 8 B: the
 *    receiver's call 0.21-0.28 us, 0.54-0.66 symmetric);
 *  - with 3+ ranks on a machine whose waiters yield at once (more ranks
 *    than CPUs) rank 0 leads every barrier: a receiver released at once
 *    waited for the root to get a CPU back (4 ranks on 2 cores, 8 B: 2.1
 *    us a call after a barrier, 0.18 us led).
 * Figures: bench/RESULTS.md.
 */
#include "algos.h"

int coll_barrier_shm(struct coll_run *run)
{
    /* the opening every shm algorithm has: the segment, else its fallback */
    struct coll_seg *s = NULL;
    int rc = coll_seg_get(run, &s);
    if (rc < 0)
        return rc;
    if (!s)
        return coll_barrier_dissemination(run);
    int lead = run->st->barrier_lead;
    if (lead < 0 && coll_seg_size(s) > 2 && tp_yields_at_once(run->g->tp))
        lead = 0;
    return lead >= 0 ? coll_seg_barrier_led(run, s, lead)
                     : coll_seg_barrier(run, s);
}
