/*
 * MoE combine: the experts' rows back to the tokens' owners, and the
 * weighted sum (plus, fused, the residual add and RMSNorm) as they arrive.
 * This file starts a combine; moe_arrive.c finishes the tokens as their
 * rows land and waits.
 *
 *  1. local checks, including assist_info's consistency (it drives every
 *     write, so a damaged one is refused rather than trusted);
 *  2. one all_gather over EP of (verdict, rows each expert rank will send
 *     to each owner, rows each owner expects): every rank checks every
 *     pair, so "counts that do not add up" fail everyone at once;
 *  3. with TP, an all_gather over TP of (verdict, block rows), then
 *     ReduceScatterV of the two partial results (sum);
 *  4. each owner posts one receive per piece (expert rank, local expert)
 *     into its arrival workspace, the expert ranks send, and a rank's own
 *     pieces are used in place, without a copy;
 *  4'. or, when every rank passed its shared expert buffer (the exchange
 *     of step 2 says so), each owner reads the peers' pieces where they
 *     lie and sends them "done" (moe_shared.c): no message carries rows.
 * Memory: the arrival workspace (bs * slots rows, allocated once) and one
 * float32 row; nothing of the size of the combined tensor.
 */
#include <stdio.h>
#include <stdlib.h>

#include "clock.h"
#include "err.h"
#include "moe_int.h"

/* ---- checks ---- */

static int check_assist(struct fccl_moe *m, int32_t *a, size_t bs)
{
    if (a[0] != MOE_ASSIST_MAGIC || a[1] < 0 || (size_t)a[1] != bs)
        return moe_bad(m, "assist_info is not dispatch's for bs %zu", bs);
    int32_t n = a[2], *off = moe_assist_off(a);
    int32_t *s2p = moe_assist_slot2pos(m, a), *p2s = moe_assist_pos2slot(m, a);
    size_t nslots = bs * (size_t)m->slots;
    if (n < 0 || (size_t)n > nslots || off[0] != 0 || off[m->npieces] != n)
        return moe_bad(m, "assist_info: bad row total %d", n);
    for (size_t p = 0; p < m->npieces; p++)
        if (off[p + 1] < off[p])
            return moe_bad(m, "assist_info: piece offsets go backwards");
    for (int32_t pos = 0; pos < n; pos++)
        if (p2s[pos] < 0 || (size_t)p2s[pos] >= nslots ||
            s2p[p2s[pos]] != pos)
            return moe_bad(m, "assist_info: row %d maps to a bad slot", pos);
    /* a token's shared slots are sent exactly when a routed one is */
    for (size_t t = 0; t < bs; t++) {
        int routed = 0;
        for (int j = 0; j < m->slots; j++) {
            int32_t v = s2p[t * m->slots + j];
            if (v < -1 || v >= n || (j >= m->k && (v >= 0) != routed))
                return moe_bad(m, "assist_info: token %zu has a bad slot", t);
            routed |= j < m->k && v >= 0;
        }
    }
    return 0;
}

static int check_counts(struct fccl_moe *m, const fccl_moe_combine_in_t *in,
                        size_t *rows)
{
    int64_t sum = 0;
    for (size_t i = 0; i < (size_t)m->my_L * m->ep_size; i++) {
        if (in->ep_send_counts[i] < 0 ||
            in->ep_send_counts[i] > (int64_t)m->block_cap)
            return moe_bad(m, "ep_send_counts[%zu] = %lld out of range", i,
                           (long long)in->ep_send_counts[i]);
        sum += in->ep_send_counts[i];
    }
    if (sum > (int64_t)m->block_cap)
        return moe_bad(m, "ep_send_counts add up to %lld rows, more than "
                       "the capacity %zu", (long long)sum, m->block_cap);
    if (m->tp && in->tp_send_counts[m->tp_rank] != sum)
        return moe_bad(m, "ep_send_counts add up to %lld rows but "
                       "tp_send_counts[%d] says %lld", (long long)sum,
                       m->tp_rank, (long long)in->tp_send_counts[m->tp_rank]);
    *rows = (size_t)sum;
    return 0;
}

static int check_args(struct fccl_moe *m, const fccl_moe_combine_in_t *in,
                      const struct moe_finish *f, size_t *rows)
{
    if (!in || !in->assist_info || !in->ep_send_counts ||
        (m->tp && !in->tp_send_counts))
        return moe_bad(m, "in, assist_info, ep_send_counts or "
                       "tp_send_counts is NULL");
    if (in->bs > (size_t)m->bs)
        return moe_bad(m, "bs %zu is more than the config's %d", in->bs,
                       m->bs);
    if (in->bs > 0 && (!in->expert_scales || !f->x ||
                       (f->fused && (!f->residual || !f->gamma || !f->y ||
                                     !f->rstd))))
        return moe_bad(m, "expert_scales or an output/residual/gamma "
                       "buffer is NULL");
    if (check_counts(m, in, rows))
        return 1;
    if (*rows > 0 && !in->expand_x)
        return moe_bad(m, "expand_x is NULL");
    return check_assist(m, (int32_t *)in->assist_info, in->bs);
}

/* ---- step 2: the count exchange ---- */

static int64_t *meta_of(struct fccl_moe *m, int r) {
    return m->meta + (size_t)r * m->metalen;
}

static int pair_check(struct fccl_moe *m)
{
    size_t P = m->npieces;
    for (int r = 0; r < m->ep_size; r++)
        for (int s = 0; s < m->ep_size; s++)
            for (int le = 0; le < m->L; le++) {
                int64_t give = meta_of(m, r)[1 + (size_t)s * m->L + le];
                int64_t want = meta_of(m, s)[1 + P + (size_t)r * m->L + le];
                if (give != want)
                    return fccl_err(FCCL_ERR_INVALID,
                                    "moe_combine: EP rank %d would send %lld "
                                    "rows of its expert %d to rank %d, which "
                                    "expects %lld (ep_send_counts or "
                                    "assist_info not from the matching "
                                    "dispatch)", r, (long long)give, le, s,
                                    (long long)want);
            }
    return FCCL_OK;
}

static int ep_check(struct fccl_moe *m, int bad,
                    const fccl_moe_combine_in_t *in)
{
    size_t P = m->npieces;
    memset(m->mine, 0, m->metalen * sizeof(int64_t));
    m->mine[0] = bad;
    if (!bad) {
        const int32_t *off = moe_assist_off((int32_t *)in->assist_info);
        for (int le = 0; le < m->my_L; le++)
            for (int s = 0; s < m->ep_size; s++)
                m->mine[1 + (size_t)s * m->L + le] =
                    in->ep_send_counts[(size_t)le * m->ep_size + s];
        for (size_t p = 0; p < P; p++)
            m->mine[1 + P + p] = off[p + 1] - off[p];
        /* in place only if every rank passes its expert buffer */
        m->mine[1 + 2 * P] = m->shared_ok && in->expand_x == m->xbuf;
    }
    int rc = fccl_all_gather(m->mine, m->meta, m->metalen, FCCL_INT64, m->ep,
                             NULL);
    if (rc == FCCL_OK)
        rc = moe_verdict(m, m->meta, m->metalen, m->ep_size, "EP",
                         "moe_combine");
    if (rc == FCCL_OK)
        rc = pair_check(m);
    m->op.shared = rc == FCCL_OK;
    for (int r = 0; r < m->ep_size; r++)
        m->op.shared &= meta_of(m, r)[1 + 2 * P] == 1;
    return rc;
}

/* Step 3 (TP only): verdicts and block rows, then the partial sums. */
static int tp_reduce(struct fccl_moe *m, int bad, size_t rows,
                     const fccl_moe_combine_in_t *in)
{
    int64_t v[2] = {bad, (int64_t)rows}, all[4];
    uint64_t t0 = fccl_now_ns();
    int rc = fccl_all_gather(v, all, 2, FCCL_INT64, m->tp, NULL);
    m->times.check_ns += fccl_now_ns() - t0;
    if (rc < 0 || bad)
        return rc;
    if ((rc = moe_verdict(m, all, 2, 2, "TP", "moe_combine")) < 0)
        return rc;
    size_t cnt[2] = {(size_t)all[1] * m->H, (size_t)all[3] * m->H};
    t0 = fccl_now_ns();
    rc = fccl_reduce_scatter_v(in->expand_x, m->rs_rows, cnt, m->dt, FCCL_SUM,
                               m->tp, NULL);
    m->times.comm_ns += fccl_now_ns() - t0;
    return rc;
}

/* ---- step 4: the exchange ---- */

/* Post the receives (owner side) and the sends (expert side). */
static int post(struct fccl_moe *m, const unsigned char *data, size_t *nrecv,
                fccl_request_t **sreq)
{
    const fccl_moe_combine_in_t *in = &m->op.f.in;
    const int32_t *off = moe_assist_off((int32_t *)in->assist_info);
    size_t nr = 0, ns = 0;
    int rc = FCCL_OK;
    for (size_t p = 0; p < m->npieces && rc == FCCL_OK; p++) {
        int r = (int)(p / (size_t)m->L), le = (int)(p % (size_t)m->L);
        size_t n = (size_t)(off[p + 1] - off[p]);
        if (n == 0 || r == m->ep_rank)
            continue;
        m->req_piece[nr] = (int)p;
        rc = fccl_irecv(m->recv_rows + (size_t)off[p] * m->rowb, n * m->H,
                        m->dt, r, MOE_TAG_COMBINE_ROWS + le, m->ep,
                        &m->reqs[nr]);
        nr += rc == FCCL_OK;
    }
    *nrecv = nr;
    if (rc < 0)
        return rc;
    fccl_p2p_op_t *ops = m->ops;
    for (int le = 0; le < m->my_L; le++)
        for (int s = 0; s < m->ep_size; s++) {
            size_t n =
                (size_t)in->ep_send_counts[(size_t)le * m->ep_size + s];
            size_t row = m->recv_off[(size_t)le * m->ep_size + s];
            if (n > 0 && s != m->ep_rank)
                ops[ns++] = (fccl_p2p_op_t){1, (void *)(data + row * m->rowb),
                                            n * m->H, m->dt, s,
                                            MOE_TAG_COMBINE_ROWS + le};
        }
    return ns ? fccl_batch_isend_irecv(ops, ns, m->ep, sreq) : FCCL_OK;
}

/* The expert side's layout: row of (local expert, owner) in the data. */
static void expert_layout(struct fccl_moe *m)
{
    const int64_t *c = m->op.f.in.ep_send_counts;
    size_t row = 0;
    for (size_t i = 0; i < (size_t)m->my_L * m->ep_size; i++) {
        m->recv_off[i] = row;
        row += (size_t)c[i];
    }
}

static void self_pieces(struct fccl_moe *m, const unsigned char *data)
{
    const int32_t *off = moe_assist_off((int32_t *)m->op.f.in.assist_info);
    for (int le = 0; le < m->my_L; le++) {
        size_t p = (size_t)m->ep_rank * m->L + (size_t)le;
        size_t at = m->recv_off[(size_t)le * m->ep_size + m->ep_rank];
        moe_arrived(m, off[p], (size_t)(off[p + 1] - off[p]),
                    data + at * m->rowb);
    }
}

int moe_idle_check(const struct fccl_moe *m, const char *who)
{
    if (!m)
        return fccl_err(FCCL_ERR_INVALID, "%s: moe is NULL", who);
    if (m->op.active)
        return fccl_err(FCCL_ERR_STATE, "%s: a %s started with "
                        "fccl_moe_*_start is still running on this config "
                        "(fccl_moe_wait for it first)", who,
                        m->op.kind == MOE_OP_DISPATCH ? "dispatch"
                                                      : "combine");
    return FCCL_OK;
}

int moe_combine_begin(struct fccl_moe *m)
{
    struct moe_op *op = &m->op;
    op->t0 = fccl_now_ns();
    memset(&m->times, 0, sizeof(m->times));
    m->msg[0] = '\0';
    size_t rows = 0;
    int bad = check_args(m, &op->f.in, &op->f, &rows);
    int rc = ep_check(m, bad, &op->f.in);
    m->times.check_ns = fccl_now_ns() - op->t0;
    if (m->tp) {
        int trc = tp_reduce(m, rc < 0, rows, &op->f.in);
        if (rc == FCCL_OK)
            rc = trc;
    }
    if (rc < 0)
        return rc;
    const unsigned char *data = m->tp ? m->rs_rows : op->f.in.expand_x;
    op->active = 1;
    op->kind = MOE_OP_COMBINE;
    op->nr = 0;
    op->sreq = NULL;
    op->last = fccl_now_ns();
    moe_start_tokens(m);
    expert_layout(m);
    if (op->shared) { /* peers' rows in place, ours, then "done" */
        rc = moe_shared_begin(m);
        if (rc == FCCL_OK)
            self_pieces(m, data);
        if (rc == FCCL_OK)
            rc = moe_shared_end(m);
    } else {
        rc = post(m, data, &op->nr, &op->sreq);
        if (rc == FCCL_OK)
            self_pieces(m, data);
    }
    if (rc < 0) {
        moe_poll(m, 1); /* collect what was posted (the group has failed) */
        return rc;
    }
    return FCCL_OK;
}

static int run(struct fccl_moe *m)
{
    int rc = moe_combine_begin(m);
    if (rc == FCCL_OK)
        rc = moe_poll(m, 1);
    return rc < 0 ? rc : FCCL_OK;
}

void moe_set_fused(struct fccl_moe *m, const void *residual_x,
                   const void *gamma, void *y_out, float *rstd_out,
                   void *x_out)
{
    struct moe_finish *f = &m->op.f;
    f->fused = 1;
    f->x = x_out;
    f->residual = residual_x;
    f->gamma = gamma;
    f->y = y_out;
    f->rstd = rstd_out;
}

int moe_combine_fill(struct fccl_moe *m, const fccl_moe_combine_in_t *in,
                const char *who)
{
    int rc = moe_idle_check(m, who);
    if (rc < 0)
        return rc;
    memset(&m->op.f, 0, sizeof(m->op.f));
    if (in) /* NULL: every rank still takes part, the checks refuse it */
        m->op.f.in = *in;
    return FCCL_OK;
}

int fccl_moe_combine(fccl_moe_t *m, const fccl_moe_combine_in_t *in, void *x)
{
    int rc = moe_combine_fill(m, in, "moe_combine");
    if (rc < 0)
        return rc;
    m->op.f.x = x;
    return run(m);
}

int fccl_moe_combine_add_rms_norm(fccl_moe_t *m,
                                  const fccl_moe_combine_in_t *in,
                                  const void *residual_x, const void *gamma,
                                  void *y_out, float *rstd_out, void *x_out)
{
    int rc = moe_combine_fill(m, in, "moe_combine_add_rms_norm");
    if (rc < 0)
        return rc;
    moe_set_fused(m, residual_x, gamma, y_out, rstd_out, x_out);
    return run(m);
}
