/*
 * Barrier through the shared segment of a one-host group (shm/seg.c): each
 * rank bumps its counter and waits for everyone's, no messages.  Without a
 * segment it is the dissemination barrier.
 */
#include "algos.h"

int coll_barrier_shm(struct coll_run *run)
{
    struct coll_seg *s = NULL;
    int rc = coll_seg_get(run, &s);
    if (rc < 0)
        return rc;
    return s ? coll_seg_barrier(run, s) : coll_barrier_dissemination(run);
}
