/*
 * The progress engine: read every endpoint's completion queue and hand
 * each completion to the request state machine (rndv.c), then let it
 * retry what the provider refused before.
 *
 * One lock guards every fi_* call (domains are opened with
 * FI_THREAD_DOMAIN).  Whichever thread waits takes it briefly (trylock,
 * so waiters never queue behind each other), reads every endpoint's CQ and
 * credits each completion to its request through the request's atomic
 * state.  Completions of contexts given up after a failed cancel
 * ("zombies") are dropped here.
 */
#include <errno.h>
#include <limits.h>
#include <sched.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "clock.h"
#include "err.h"
#include "log.h"
#include "tp_int.h"

#define TP_CQ_BATCH 16

/* The progress engine (all under tp->lock)                           */
/* ------------------------------------------------------------------ */

int tp_zombie_take(struct fccl_tp *tp, void *ctx)
{
    for (size_t i = 0; i < tp->nzombies; i++) {
        if (tp->zombies[i] == ctx) {
            tp->zombies[i] = tp->zombies[--tp->nzombies];
            return 1;
        }
    }
    return 0;
}

static void read_error(struct fccl_tp *tp, struct tp_ep *e)
{
    struct fi_cq_err_entry ee;
    memset(&ee, 0, sizeof(ee));
    ssize_t rc = fi_cq_readerr(e->cq, &ee, 0);
    if (rc < 0) {
        if (rc != -FI_EAGAIN)
            LOG_WARN("FABRIC", "%s: fi_cq_readerr: %s", e->prov,
                     tp_fi_strerror((int)rc));
        return;
    }
    void *ctx = ee.op_context;
    if (ctx && !(tp->nzombies && tp_zombie_take(tp, ctx)))
        tp_rv_on_err(tp, e, ctx, &ee);
}

/* Read one endpoint's CQ until empty (bounded); returns completions. */
static int progress_ep(struct fccl_tp *tp, struct tp_ep *e)
{
    struct fi_cq_tagged_entry ent[TP_CQ_BATCH];
    int total = 0;
    for (int round = 0; round < 4; round++) {
        ssize_t n = fi_cq_read(e->cq, ent, TP_CQ_BATCH);
        if (n == -FI_EAVAIL) {
            read_error(tp, e);
            total++;
            continue;
        }
        if (n <= 0) {
            if (n != -FI_EAGAIN)
                LOG_WARN("FABRIC", "%s: fi_cq_read: %s", e->prov,
                         tp_fi_strerror((int)n));
            break;
        }
        for (ssize_t i = 0; i < n; i++) {
            void *ctx = ent[i].op_context;
            if (ctx && !(tp->nzombies && tp_zombie_take(tp, ctx)))
                tp_rv_on_cq(tp, e, &ent[i]);
        }
        total += (int)n;
        if (n < TP_CQ_BATCH)
            break;
    }
    tp_rv_drain(tp, e);
    return total;
}

int tp_progress_locked(struct fccl_tp *tp)
{
    int n = 0;
    for (int i = 0; i < tp->nep; i++)
        n += progress_ep(tp, &tp->eps[i]);
    if (n)
        atomic_fetch_add(&tp->st_completions, (uint64_t)n);
    return n;
}

/* Progress unless another thread is already doing it. */
int tp_progress_try(struct fccl_tp *tp)
{
    if (pthread_mutex_trylock(&tp->lock) != 0)
        return 0;
    int n = tp_progress_locked(tp);
    pthread_mutex_unlock(&tp->lock);
    return n;
}

/* ------------------------------------------------------------------ */
/* Posting                                                            */
