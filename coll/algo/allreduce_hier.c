/*
 * Hierarchical all-reduce for groups spread over several hosts.
 *
 * Algorithm: (1) inside each host, a reduce to the host's leader (its
 * lowest group rank); (2) the leaders all-reduce among themselves
 * (recursive doubling for small vectors, ring for large ones); (3) each
 * leader broadcasts the result inside its host.  Stages (1) and (3) go
 * through a segment shared by the host's members (shm/seg.c, set up on
 * the group's first hier call: one barrier-synchronised copy in, a
 * reduction split among the members, the leader's copy out; then one copy
 * in by the leader and out by the others), not the transport; without
 * one (it could not be made) they are a binomial reduce and a pipelined
 * binomial broadcast over the transport.
 * Only the leaders' traffic crosses hosts.  The result is computed once
 * (by the leaders' algorithm, which is itself bitwise consistent) and then
 * copied, so every rank holds the same bits.
 *
 * Cost with h hosts of m ranks: inside a host, through the segment, two
 * memcpys of N per rank and a reduction of N/m, plus one memcpy of N, and
 * a handful of barriers; plus the leaders' all-reduce of N over h ranks
 * (over the network).
 *
 * Any layout: hosts may have different rank counts, a host of one rank
 * skips (1) and (3), a single host skips (2).  Uses group->node_of and
 * group->nnodes from the bootstrap's topology.
 */
#include <stdlib.h>

#include "algo/algos.h"
#include "shm/shm.h"

#define HIER_RD_MAX (64u * 1024u) /* leaders use rd up to this many bytes */

struct hier_views {
    int *local, *leaders;
    struct coll_view lv, ldv; /* my host's ranks; the leaders */
};

static int hier_views(const struct fccl_group *g, struct hier_views *h)
{
    int n = g->size, nn = g->nnodes > 0 ? g->nnodes : 1;
    h->local = malloc((size_t)n * sizeof(int));
    h->leaders = malloc((size_t)nn * sizeof(int));
    int *first = malloc((size_t)nn * sizeof(int));
    if (!h->local || !h->leaders || !first) {
        free(first);
        return fccl_err(FCCL_ERR_NOMEM, "all_reduce[hier]: no memory");
    }
    for (int k = 0; k < nn; k++)
        first[k] = -1;
    int mynode = g->node_of[g->rank], nl = 0, nld = 0;
    h->lv.me = h->ldv.me = -1;
    for (int r = 0; r < n; r++) {
        int node = g->node_of[r];
        if (node == mynode) {
            if (r == g->rank)
                h->lv.me = nl;
            h->local[nl++] = r;
        }
        if (node < 0 || node >= nn || first[node] >= 0)
            continue;
        first[node] = r; /* the lowest rank of a host leads it */
        if (r == g->rank)
            h->ldv.me = nld;
        h->leaders[nld++] = r;
    }
    free(first);
    h->lv.n = nl;
    h->lv.map = h->local;
    h->ldv.n = nld;
    h->ldv.map = h->leaders;
    return FCCL_OK;
}

static int hier_run(struct coll_run *run, struct hier_views *h)
{
    const struct coll_args *a = run->a;
    size_t bytes = a->count * fccl_dtype_size(a->dtype);
    struct coll_seg *s = NULL;
    int rc = h->lv.n > 1 ? coll_seg_host(run, &h->lv, &s) : FCCL_OK;
    if (rc < 0)
        return rc;
    uint32_t third = run->nsteps / 3;
    struct step_range saved = cr_steps_push(run, 0, third);
    if (s)
        rc = coll_seg_reduce(run, s, 0, a->sendbuf, a->recvbuf, a->count);
    else
        rc = coll_binomial_reduce(run, &h->lv, a->sendbuf, a->recvbuf,
                                  a->count, a->dtype, a->op, 0);
    cr_steps_pop(run, saved);
    if (rc < 0)
        return rc;
    if (h->ldv.me >= 0 && h->ldv.n > 1) {
        saved = cr_steps_push(run, third, third);
        rc = bytes <= HIER_RD_MAX
                 ? coll_rd_all_reduce(run, &h->ldv, a->recvbuf, a->recvbuf,
                                      a->count, a->dtype, a->op)
                 : coll_ring_all_reduce(run, &h->ldv, a->recvbuf, a->recvbuf,
                                        a->count, a->dtype, a->op);
        cr_steps_pop(run, saved);
        if (rc < 0)
            return rc;
    }
    saved = cr_steps_push(run, 2 * third, run->nsteps - 2 * third);
    rc = s ? coll_seg_bcast(run, s, 0, a->recvbuf, bytes)
           : coll_binomial_bcast(run, &h->lv, a->recvbuf, bytes, 0);
    cr_steps_pop(run, saved);
    return rc;
}

int coll_allreduce_hier(struct coll_run *run)
{
    struct hier_views h = {0};
    int rc = hier_views(run->g, &h);
    if (rc == FCCL_OK)
        rc = hier_run(run, &h);
    free(h.local);
    free(h.leaders);
    return rc;
}
