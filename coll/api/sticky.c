/*
 * A group's sticky error: the first fatal error of a group is kept with
 * its message, and every later call on the group returns it at once (as
 * does an abort), so no rank waits for a peer that has already failed.
 * The floors below only return errors; the API floor, where an operation
 * takes its place in the group's order, decides that one sticks.
 */
#include <stdio.h>

#include "log.h"
#include "request.h"

int coll_fail(struct fccl_group *g, int code)
{
    if (code >= 0)
        return code;
    pthread_mutex_lock(&g->lock);
    if (atomic_load(&g->err) == 0) {
        snprintf(g->errmsg, sizeof(g->errmsg), "%s", fccl_last_error());
        atomic_store(&g->err, code);
        LOG_WARN("COLL", "group %s failed: %s", g->name, g->errmsg);
    }
    pthread_mutex_unlock(&g->lock);
    return code;
}

int coll_group_check(struct fccl_group *g)
{
    if (atomic_load(&g->aborted))
        return fccl_err(FCCL_ERR_ABORTED, "group %s (rank %d): aborted",
                        g->name, g->rank);
    int e = atomic_load(&g->err);
    if (e == 0)
        return FCCL_OK;
    pthread_mutex_lock(&g->lock);
    fccl_err(e, "group %s (rank %d) failed earlier: %s", g->name, g->rank,
             g->errmsg);
    pthread_mutex_unlock(&g->lock);
    return e;
}
