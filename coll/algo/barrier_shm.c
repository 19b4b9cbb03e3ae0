/*
 * Barrier through the shared segment of a one-host group (shm/seg.c): each
 * rank bumps its counter and waits for everyone's, no messages.  Without a
 * segment it is the dissemination barrier.
 *
 * With 3+ ranks on a machine whose waiters yield at once (more ranks than
 * CPUs) rank 0 leaves first (coll_seg_barrier_led): it bumps its counter
 * only once it has seen everyone's, and the others leave when they see
 * it.  A broadcast from rank 0 right after the barrier then has its data
 * written before the receivers leave; with everyone released at once a
 * receiver waited for the root to get a CPU back (4 ranks on 2 cores,
 * 8 B: 2.1 us a call after a barrier, 0.18 us led; bench/RESULTS.md).
 * Not where every rank has a CPU (nobody waits for a descheduled root):
 * at 2 ranks a root that leaves first cut a broadcast's own time after
 * the barrier from 0.6 to 0.23 us, but made the barrier and broadcast
 * together 0.05-0.1 us longer (the receiver fetches the release, then the
 * data, where after a symmetric barrier it fetches only the data).
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
    if (coll_seg_size(s) > 2 && tp_yields_at_once(run->g->tp))
        return coll_seg_barrier_led(run, s);
    return coll_seg_barrier(run, s);
}
