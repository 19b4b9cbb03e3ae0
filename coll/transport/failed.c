/*
 * The job's failed ranks, for a job that goes on without them.
 *
 * The heartbeats (hb.c) keep one culprit per job, tp->dead_rank, and every
 * wait fails while it is set: one death fails the whole job.  A shrink
 * (bootstrap/shrink.c) lets the survivors agree to go on without some
 * ranks; they then exclude them here: an excluded rank's death no longer
 * sets the culprit (or clears it, when it is the culprit), no goodbye is
 * awaited from it (bye.c), and the heartbeat ring closes over it.  Every
 * rank ever declared keeps its mark (peer.declared), so a member can list
 * all the failures it knows of, not only the first.
 */
#include "tp_int.h"

int tp_dead_rank(const struct fccl_tp *tp)
{
    return tp ? tp_hb_dead(tp) : -1;
}

static int in_range(const struct fccl_tp *tp, int rank)
{
    return tp && tp->peers && rank >= 0 && rank < tp->nranks;
}

int tp_rank_failed(struct fccl_tp *tp, int rank)
{
    if (!in_range(tp, rank) || rank == tp->my_rank)
        return 0;
    if (atomic_load(&tp->peers[rank].declared))
        return 1;
    return tp_live_dead(tp, &rank, 1, 0) >= 0;
}

int tp_rank_excluded(const struct fccl_tp *tp, int rank)
{
    return in_range(tp, rank) && atomic_load(&tp->peers[rank].excluded);
}

void tp_exclude(struct fccl_tp *tp, const int *ranks, size_t n)
{
    if (!tp || !tp->peers)
        return;
    for (size_t i = 0; i < n; i++)
        if (in_range(tp, ranks[i]) && ranks[i] != tp->my_rank)
            atomic_store(&tp->peers[ranks[i]].excluded, 1);
    int d = tp_hb_dead(tp); /* settled: not a declaration under way */
    if (d >= 0 && tp_rank_excluded(tp, d))
        atomic_compare_exchange_strong(&tp->dead_rank, &d, -1);
    /* a failure of a rank that stays must still fail the job's waits */
    for (int r = 0; r < tp->nranks && tp_hb_dead(tp) < 0; r++)
        if (r != tp->my_rank && atomic_load(&tp->peers[r].declared) &&
            !atomic_load(&tp->peers[r].excluded))
            tp_hb_suspect(tp, r, "it failed earlier");
    tp_hb_rewatch(tp);
}
