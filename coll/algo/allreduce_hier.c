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
#include <string.h>

#include "algos.h"

#define HIER_RD_MAX (64u * 1024u) /* leaders use rd up to this many bytes */
#define HIER_2D_MIN (256u * 1024u) /* above: slices across hosts (2d) */

struct hier_views {
    int *local, *leaders, *across;
    struct coll_view lv, ldv, xv; /* my host's ranks; the leaders; the
                                     ranks of my local index (2d) */
    int uniform;                  /* every host has lv.n ranks */
};

static int hier_views(const struct fccl_group *g, struct hier_views *h)
{
    int n = g->size, nn = g->nnodes > 0 ? g->nnodes : 1;
    h->local = malloc((size_t)n * sizeof(int));
    h->leaders = malloc((size_t)nn * sizeof(int));
    h->across = malloc((size_t)nn * sizeof(int));
    int *seen = calloc((size_t)nn, sizeof(int));
    if (!h->local || !h->leaders || !h->across || !seen) {
        free(seen);
        return fccl_err(FCCL_ERR_NOMEM, "all_reduce[hier]: no memory");
    }
    int mynode = g->node_of[g->rank], nl = 0, nld = 0;
    h->lv.me = h->ldv.me = -1;
    for (int r = 0; r < n; r++) { /* my host's ranks, in rank order */
        if (g->node_of[r] != mynode)
            continue;
        if (r == g->rank)
            h->lv.me = nl;
        h->local[nl++] = r;
    }
    for (int r = 0; r < n; r++) {
        int node = g->node_of[r];
        if (node < 0 || node >= nn)
            continue;
        int idx = seen[node]++; /* r's local index on its host */
        if (idx == h->lv.me) /* hosts are numbered 0..nn-1 */
            h->across[node] = r;
        if (idx)
            continue;
        if (r == g->rank) /* the lowest rank of a host leads it */
            h->ldv.me = nld;
        h->leaders[nld++] = r;
    }
    h->uniform = 1;
    for (int k = 0; k < nn; k++)
        h->uniform &= seen[k] == nl;
    free(seen);
    h->lv.n = nl;
    h->lv.map = h->local;
    h->ldv.n = nld;
    h->ldv.map = h->leaders;
    h->xv.n = nn;
    h->xv.me = mynode;
    h->xv.map = h->across;
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

/* 2d when the hosts are alike and the vector is large (see
 * allreduce_hier2d.c); the same on every rank. */
static int use_2d(const struct coll_run *run, const struct hier_views *h)
{
    size_t bytes = run->a->count * fccl_dtype_size(run->a->dtype);
    const char *force = run->algo;
    if (!h->uniform || h->lv.n < 2)
        return 0;
    if (force && strcmp(force, "hier2d") == 0)
        return 1;
    return bytes > HIER_2D_MIN;
}

static int hier_any(struct coll_run *run, int allow_2d)
{
    struct hier_views h = {0};
    int rc = hier_views(run->g, &h);
    if (rc == FCCL_OK)
        rc = allow_2d && use_2d(run, &h) ? coll_hier_2d(run, &h.lv, &h.xv)
                                         : hier_run(run, &h);
    free(h.local);
    free(h.leaders);
    free(h.across);
    return rc;
}

int coll_allreduce_hier(struct coll_run *run)
{
    return hier_any(run, 1);
}

int coll_allreduce_hier_leaders(struct coll_run *run)
{
    return hier_any(run, 0);
}
