/*
 * One collective, run now on the calling thread (inline from coll_submit,
 * or on the group's worker): coll_execute returns at once from a call
 * that moves nothing, else stamps the tag (context id,
 * sequence number) and the deadline, lets the selector pick the
 * algorithm (and the general one if that cannot run here), finishes avg,
 * and makes any failure stick (a wait stopped by the group's failure
 * elsewhere reports that failure).
 */
#include "clock.h"
#include "log.h"
#include "reduce.h"
#include "request.h"
#include "select.h"
#include "tag.h"

static void finish_avg(const struct coll_args *a, const struct fccl_group *g)
{
    if (a->op != FCCL_AVG)
        return;
    switch (a->kind) {
    case COLL_ALLREDUCE:
        coll_reduce_avg_finish(a->recvbuf, a->count, a->dtype, g->size);
        break;
    case COLL_REDUCE:
        if (g->rank == a->root)
            coll_reduce_avg_finish(a->recvbuf, a->count, a->dtype, g->size);
        break;
    case COLL_REDUCESCATTER:
        coll_reduce_avg_finish(a->recvbuf,
                               a->counts ? a->counts[g->rank] : a->count,
                               a->dtype, g->size);
        break;
    default: break;
    }
}

/* The algorithm chosen cannot run on this group now (all_reduce[shm]
 * without a segment): run the selector's general choice on the same run.
 * Every member takes this path alike (the segment's setup tells all of
 * them the same outcome), so they all run the same algorithm. */
static int run_fallback(struct coll_run *run)
{
    int rc;
    const struct coll_algo *al = coll_select_fallback(run, &rc);
    if (!al)
        return rc;
    LOG_TRACE("COLL", "%s seq %u on %s: %s cannot run here, %s",
              run->a->opname, run->seq, run->g->name, run->algo, al->name);
    run->algo = al->name;
    return al->fn(run);
}

/* A call that moves no byte on any member, as each member can tell from
 * its own arguments: an even call of count 0.  It returns at once, as in
 * NCCL; it has taken its sequence number, so the members stay in step. */
static int moves_nothing(const struct coll_args *a)
{
    switch (a->kind) {
    case COLL_BCAST: case COLL_REDUCE: case COLL_ALLREDUCE:
    case COLL_ALLGATHER: case COLL_REDUCESCATTER: case COLL_GATHER:
    case COLL_SCATTER: case COLL_ALLTOALL:
        return a->count == 0 && !a->counts && !a->scounts && !a->rcounts;
    default: return 0;
    }
}

int coll_execute(struct fccl_group *g, const struct coll_args *a,
                 uint32_t seq, int64_t timeout_ms)
{
    int rc = coll_group_check(g);
    if (rc < 0 || moves_nothing(a))
        return rc;
    struct coll_run run = {
        .g = g, .st = g->state, .a = a, .seq = seq,
        .tag = coll_tag_base(g->ctx, seq), .step0 = 0,
        .nsteps = COLL_STEP_MAX, .deadline = fccl_deadline_ms(timeout_ms),
    };
    const struct coll_algo *al = coll_select(&run, &rc);
    if (!al)
        return rc;
    /* counted after the choice, on every member alike (they all run
     * the same calls in the same order), so they all choose alike */
    if (a->kind == COLL_BARRIER)
        run.st->barriers++;
    run.algo = al->name;
    LOG_TRACE("COLL", "%s seq %u on %s: %s", a->opname, seq, g->name,
              al->name);
    rc = al->fn(&run);
    if (rc != FCCL_OK) {
        if (rc == COLL_FALLBACK)
            rc = run_fallback(&run);
        if (rc < 0) {
            cr_cancel_pending(&run);
            struct coll_opinfo oi = {a->opname, seq, 1, timeout_ms};
            return coll_fail_op(g, coll_stopped(g, rc), &oi);
        }
    }
    finish_avg(a, g);
    return FCCL_OK;
}
