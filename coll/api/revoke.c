/*
 * Revoke: one member fails a group on every member (ULFM's
 * MPIX_Comm_revoke, NCCL's ncclCommRevoke).  Unlike an abort, which is
 * local, a revoke travels: the revoking rank sets the group's revoked bit
 * and sends a failure notice of status FCCL_ERR_REVOKED to every member
 * over the heartbeat sockets (tp_group_notify: one datagram each at once,
 * two repeats; the socket is open also with FCCL_PEER_TIMEOUT=0).  The
 * heartbeat thread of a member that receives it ORs the revoked bit into
 * the group's stop word, which every wait of the group watches (the
 * transport's and the shared segment's), so pending waits end at once and
 * later calls fail in coll_group_check, all with FCCL_ERR_REVOKED naming
 * the revoking rank.  A revoke wins over an earlier failure of the group.
 *
 * The failed ranks a member knows are the transport's (failed.c), seen
 * through the group; after a shrink agreed on a failed set, that set.
 */
#include <stdio.h>
#include <string.h>

#include "fccl/pg.h"
#include "log.h"
#include "request.h"

/* The world rank that revoked g: ours, or the notice's origin. */
static int revoker(struct fccl_group *g)
{
    pthread_mutex_lock(&g->lock);
    int r = g->revoked_by;
    pthread_mutex_unlock(&g->lock);
    if (r >= 0)
        return r;
    struct tp_notice n;
    if (!tp_group_notice(g->tp, g->ctx, &n) || n.status != FCCL_ERR_REVOKED)
        return -1;
    pthread_mutex_lock(&g->lock);
    if (g->revoked_by < 0)
        g->revoked_by = n.origin;
    r = g->revoked_by;
    pthread_mutex_unlock(&g->lock);
    return r;
}

int coll_revoked(struct fccl_group *g)
{
    if (!(atomic_load(&g->stop) & GROUP_STOP_REVOKED))
        return FCCL_OK;
    int w = revoker(g), gr = w >= 0 ? group_rank_of_world(g, w) : -1;
    if (w == g->world_rank)
        return fccl_err(FCCL_ERR_REVOKED, "group %s (rank %d): revoked by "
                        "this rank (fccl_group_revoke)", g->name, g->rank);
    return fccl_err(FCCL_ERR_REVOKED, "group %s (rank %d): revoked by rank "
                    "%d (world %d)", g->name, g->rank, gr, w);
}

int fccl_group_revoke(fccl_group_t *cg)
{
    struct fccl_group *g = cg;
    if (!g || !g->state)
        return fccl_err(FCCL_ERR_INVALID, "revoke: group is NULL");
    pthread_mutex_lock(&g->lock);
    int first = g->revoked_by < 0 &&
                !(atomic_load(&g->stop) & GROUP_STOP_REVOKED);
    if (first)
        g->revoked_by = g->world_rank;
    pthread_mutex_unlock(&g->lock);
    atomic_fetch_or(&g->stop, GROUP_STOP_REVOKED);
    if (!first) /* idempotent: the members were told once */
        return FCCL_OK;
    struct tp_notice n;
    memset(&n, 0, sizeof(n));
    n.ctx = g->ctx;
    n.origin = g->world_rank;
    n.status = FCCL_ERR_REVOKED;
    snprintf(n.op, sizeof(n.op), "revoke");
    snprintf(n.text, sizeof(n.text), "group %s revoked by rank %d (world %d)",
             g->name, g->rank, g->world_rank);
    LOG_INFO("COLL", "%s", n.text);
    tp_group_notify(g->tp, &n, g->world, (size_t)g->size);
    return FCCL_OK;
}

int fccl_group_failed_ranks(const fccl_group_t *cg, int *ranks, int max)
{
    struct fccl_group *g = (struct fccl_group *)cg;
    if (!g || !g->state || max < 0 || (max > 0 && !ranks))
        return fccl_err(FCCL_ERR_INVALID, "failed_ranks: NULL group, NULL "
                        "ranks with max > 0, or max < 0");
    int count = 0;
    if (g->has_agreed) {
        for (int i = 0; i < g->nagreed; i++, count++)
            if (count < max)
                ranks[count] = g->agreed[i];
        return count;
    }
    for (int r = 0; r < g->size; r++) {
        if (r == g->rank || !tp_rank_failed(g->tp, g->world[r]))
            continue;
        if (count < max)
            ranks[count] = r;
        count++;
    }
    return count;
}
