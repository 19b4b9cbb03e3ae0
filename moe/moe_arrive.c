/*
 * MoE combine, the owner's side: rows as they arrive.
 *
 * Each receive of a combine brings one piece (the rows one expert rank
 * computed for this rank's tokens with one of its experts).  When a piece
 * lands, each of its rows is noted against its token; a token whose last
 * row has arrived is finished at once: its rows summed in float32 in slot
 * order (then shared_expert_x), the routed ones weighted by their scales,
 * the shared expert's by the sum of those scales (moe.h says why), and
 * for the fused operator the residual added and RMSNorm applied, into the
 * caller's outputs.  Routes masked off were not sent and count for
 * nothing.  So the math runs
 * while other pieces are still in flight, over one float32 row of scratch.
 *
 * Waiting is a wait on any receive built from fccl_test: a pass over the
 * pending receives, and when a pass finds nothing a yield (first 200 us),
 * then a sleep of 20 us doubling to 500 us (so ranks sharing cores get
 * the CPU), and after a whole second without progress fccl_wait on one
 * receive, which brings the group timeout.
 */
#include <sched.h>
#include <time.h>

#include "clock.h"
#include "err.h"
#include "moe_int.h"

#define MOE_YIELD_NS 200000ull
#define MOE_BLOCK_NS 1000000000ull

static void finish_token(struct fccl_moe *m, size_t t)
{
    const struct moe_finish *f = &m->op.f;
    const fccl_moe_combine_in_t *in = &f->in;
    const int32_t *s2p = moe_assist_slot2pos(m, (int32_t *)in->assist_info);
    size_t base = t * (size_t)m->slots;
    int n = 0;
    float shw = 0; /* the sum of the sent routes' scales, in slot order */
    for (int j = 0; j < m->k; j++)
        if (s2p[base + j] >= 0)
            shw += in->expert_scales[t * m->k + j];
    for (int j = 0; j < m->slots; j++) { /* the sent rows in slot order */
        if (s2p[base + j] < 0)
            continue;
        m->wrows[n] = m->rowptr[base + j];
        m->wts[n++] = j < m->k ? in->expert_scales[t * m->k + j] : shw;
    }
    if (n > 0 && in->shared_expert_x) { /* an active token */
        m->wrows[n] = (const unsigned char *)in->shared_expert_x + t * m->rowb;
        m->wts[n++] = shw;
    }
    moe_row_wsum(m->acc, m->wrows, m->wts, n, m->H, m->dt);
    unsigned char *x = (unsigned char *)f->x + t * m->rowb;
    if (!f->fused) {
        moe_row_store(x, m->acc, m->H, m->dt);
        return;
    }
    f->rstd[t] = moe_row_add_rms_norm(
        m->acc, (const unsigned char *)f->residual + t * m->rowb, f->gamma,
        m->eps, x, (unsigned char *)f->y + t * m->rowb, m->H, m->dt);
}

void moe_arrived(struct fccl_moe *m, int32_t pos0, size_t n,
                 const unsigned char *rows)
{
    const int32_t *p2s =
        moe_assist_pos2slot(m, (int32_t *)m->op.f.in.assist_info);
    uint64_t t0 = fccl_now_ns();
    for (size_t i = 0; i < n; i++) {
        size_t slot = (size_t)p2s[pos0 + (int32_t)i];
        size_t t = slot / (size_t)m->slots;
        m->rowptr[slot] = rows + i * m->rowb;
        if (--m->rem[t] == 0)
            finish_token(m, t);
    }
    m->times.math_ns += fccl_now_ns() - t0;
}

void moe_start_tokens(struct fccl_moe *m)
{
    const int32_t *s2p =
        moe_assist_slot2pos(m, (int32_t *)m->op.f.in.assist_info);
    uint64_t t0 = fccl_now_ns();
    for (size_t t = 0; t < m->op.f.in.bs; t++) {
        m->rem[t] = 0;
        for (int j = 0; j < m->slots; j++)
            m->rem[t] += s2p[t * m->slots + j] >= 0;
        if (m->rem[t] == 0)
            finish_token(m, t);
    }
    m->times.math_ns += fccl_now_ns() - t0;
}

static void idle_wait(uint64_t idle_ns)
{
    if (idle_ns < MOE_YIELD_NS) {
        sched_yield();
        return;
    }
    long ns = 20000;
    for (uint64_t t = idle_ns / MOE_YIELD_NS; t > 1 && ns < 500000; t /= 2)
        ns *= 2;
    struct timespec ts = {0, ns < 500000 ? ns : 500000};
    nanosleep(&ts, NULL);
}

/* One pass over the pending receives; *progress when one finished. */
static int pass(struct fccl_moe *m, int blocking, int *progress)
{
    struct moe_op *op = &m->op;
    const int32_t *off = moe_assist_off((int32_t *)op->f.in.assist_info);
    int rc = FCCL_OK;
    for (size_t i = 0; i < op->nr && rc == FCCL_OK;) {
        int done = 1; /* a finished handle is freed, even on failure */
        if (blocking)
            rc = fccl_wait(m->reqs[i], -1), blocking = 0;
        else
            rc = fccl_test(m->reqs[i], &done);
        if (!done) {
            i++;
            continue;
        }
        int p = m->req_piece[i];
        m->reqs[i] = m->reqs[op->nr - 1]; /* swap out the finished one */
        m->req_piece[i] = m->req_piece[op->nr - 1];
        op->nr--;
        *progress = 1;
        if (rc == FCCL_OK && p >= 0) /* p < 0: a "done" (moe_shared.c) */
            moe_arrived(m, off[p], (size_t)(off[p + 1] - off[p]),
                        m->recv_rows + (size_t)off[p] * m->rowb);
    }
    return rc;
}

/* The end of a combine, good or bad: collect every handle. */
static int finish_op(struct fccl_moe *m, int rc)
{
    struct moe_op *op = &m->op;
    for (size_t i = 0; i < op->nr; i++) /* only after a failure */
        fccl_wait(m->reqs[i], -1);
    op->nr = 0;
    int src = op->sreq ? fccl_wait(op->sreq, -1) : FCCL_OK;
    op->sreq = NULL;
    op->active = 0;
    uint64_t now = fccl_now_ns();
    m->times.total_ns = now - op->t0;
    m->times.comm_ns = m->times.total_ns - m->times.check_ns -
                       m->times.math_ns;
    return rc < 0 ? rc : src < 0 ? src : 1;
}

int moe_poll(struct fccl_moe *m, int block)
{
    struct moe_op *op = &m->op;
    if (!op->active)
        return 1;
    if (op->kind == MOE_OP_DISPATCH)
        return moe_dispatch_poll(m, block);
    for (;;) {
        int progress = 0;
        uint64_t idle = fccl_now_ns() - op->last;
        int rc = pass(m, block && idle >= MOE_BLOCK_NS, &progress);
        if (rc < 0 || op->nr == 0) {
            if (rc == FCCL_OK && !block && op->sreq) {
                int done = 0; /* the sends, without blocking */
                rc = fccl_test(op->sreq, &done);
                if (done)
                    op->sreq = NULL;
                else if (rc == FCCL_OK)
                    return 0;
            }
            return finish_op(m, rc);
        }
        if (progress)
            op->last = fccl_now_ns();
        if (!block)
            return 0;
        if (!progress)
            idle_wait(idle);
    }
}
