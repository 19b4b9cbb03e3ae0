/*
 * Broadcast as binomial scatter + ring all-gather (van de Geijn), the
 * large-message broadcast.
 *
 * Algorithm: the buffer is split into n blocks, block v for the rank v
 * places after the root.  A binomial scatter hands every rank its block
 * (each subtree receives its range of blocks in one message), then a ring
 * all-gather over the same rotated numbering gives every rank every block.
 * Blocks are only copied, so all ranks get the root's bytes.
 *
 * Cost: (log2(n) + n - 1) alpha + 2 (n-1)/n N beta: unlike the binomial
 * tree no rank sends the whole message more than about twice.
 *
 * Any n; sizes not divisible by n give the first len % n blocks one more
 * byte (blocks may be empty when len < n).
 */
#include <stdlib.h>

#include "algos.h"

#define STEP_SCATTER 0
#define STEP_AG 1

/* Send each child its subtree's blocks, after receiving mine from the
 * parent; blocks are numbered in the rotated order (root = 0). */
static int scatter(struct coll_run *run, const struct coll_view *rv,
                   unsigned char *buf, const struct coll_layout *l)
{
    int n = rv->n, vr = rv->me, low = 1;
    while (low < n && !(vr & low))
        low <<= 1;
    if (vr != 0) {
        int end = vr + low < n ? vr + low : n;
        struct tp_req r;
        size_t want = lay_range_bytes(l, vr, end - vr);
        int rc = cr_irecv(run, rv, vr - low, STEP_SCATTER,
                          buf + lay_boff(l, vr), want, &r);
        if (rc == FCCL_OK)
            rc = cr_wait(run, &r, 1);
        if (rc == FCCL_OK)
            rc = cr_check_len(run, &r, want);
        if (rc < 0)
            return rc;
    }
    struct tp_req reqs[32];
    size_t k = 0;
    for (int mask = low >> 1; mask >= 1 && k < 32; mask >>= 1) {
        int child = vr + mask;
        if (child >= n)
            continue;
        int end = child + mask < n ? child + mask : n;
        int rc = cr_isend(run, rv, child, STEP_SCATTER, buf + lay_boff(l, child),
                          lay_range_bytes(l, child, end - child), &reqs[k]);
        if (rc < 0) {
            for (size_t i = 0; i < k; i++)
                if (tp_req_pending(&reqs[i]))
                    tp_cancel(run->g->tp, &reqs[i]);
            return rc;
        }
        k++;
    }
    return cr_wait(run, reqs, k);
}

int coll_bcast_scatter_ag(struct coll_run *run)
{
    const struct coll_args *a = run->a;
    struct fccl_group *g = run->g;
    int n = g->size;
    size_t len = a->count * fccl_dtype_size(a->dtype);
    if (n == 1 || len == 0)
        return FCCL_OK;
    int *map = malloc((size_t)n * sizeof(int));
    if (!map)
        return fccl_err(FCCL_ERR_NOMEM, "broadcast: no memory for %d ranks", n);
    for (int i = 0; i < n; i++)
        map[i] = (i + a->root) % n;
    struct coll_view rv = {n, (g->rank - a->root + n) % n, map};
    struct coll_layout l = {LAY_SPLIT, n, 1, len, NULL, NULL};
    struct step_range saved = cr_steps_push(run, STEP_SCATTER, 1);
    int rc = scatter(run, &rv, a->recvbuf, &l);
    cr_steps_pop(run, saved);
    if (rc >= 0) {
        saved = cr_steps_push(run, STEP_AG, run->nsteps - STEP_AG);
        rc = coll_ring_all_gather(run, &rv, a->recvbuf, &l, NULL);
        cr_steps_pop(run, saved);
    }
    free(map);
    return rc;
}
