/*
 * Neighbour exchange (MindSpore's NeighborExchange): each rank sends one
 * buffer to each of its send peers and receives one from each of its
 * receive peers.
 *
 * Algorithm: post every receive, then every send, and wait for all; a
 * message to myself is a local copy.  Every peer appears at most once per
 * list, so one tag per collective call tells the messages apart.
 *
 * Cost: alpha + max(bytes in, bytes out) beta when the links absorb the
 * concurrent transfers.  Zero-length entries send nothing.
 */
#include <string.h>

#include "algos.h"

static void self_copy(const struct coll_args *a, int me, size_t es)
{
    for (size_t i = 0; i < a->nsend; i++) {
        if (a->send_peers[i] != me)
            continue;
        for (size_t j = 0; j < a->nrecv; j++)
            if (a->recv_peers[j] == me)
                memmove(a->recv_bufs[j], a->send_bufs[i],
                        a->send_counts[i] * es);
    }
}

int coll_neighbor_exchange(struct coll_run *run)
{
    const struct coll_args *a = run->a;
    struct coll_view v = view_of_group(run->g);
    size_t es = fccl_dtype_size(a->dtype);
    struct tp_req *reqs = cr_reqs(run, a->nsend + a->nrecv);
    if (!reqs && a->nsend + a->nrecv > 0)
        return FCCL_ERR_NOMEM;
    size_t k = 0;
    for (size_t j = 0; j < a->nrecv; j++) {
        if (a->recv_peers[j] == v.me)
            continue;
        int rc = cr_irecv(run, &v, a->recv_peers[j], 0, a->recv_bufs[j],
                          a->recv_counts[j] * es, &reqs[k++]);
        if (rc < 0)
            return rc;
    }
    for (size_t i = 0; i < a->nsend; i++) {
        if (a->send_peers[i] == v.me)
            continue;
        int rc = cr_isend(run, &v, a->send_peers[i], 0, a->send_bufs[i],
                          a->send_counts[i] * es, &reqs[k++]);
        if (rc < 0)
            return rc;
    }
    self_copy(a, v.me, es);
    int rc = cr_wait(run, reqs, k);
    for (size_t j = 0, i = 0; rc >= 0 && j < a->nrecv; j++)
        if (a->recv_peers[j] != v.me)
            rc = cr_check_len(run, &reqs[i++], a->recv_counts[j] * es);
    return rc;
}
