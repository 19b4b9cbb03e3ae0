/*
 * MoE dispatch: every active token to the ranks of its experts.
 *
 *  1. local checks (ids in range and distinct per token, bs, buffers,
 *     the mask: [bs] or [bs][k] of 0/1);
 *  2. routing on the token owner: count the rows of each piece (r, le),
 *     give each (token, slot) a packed position, pack the rows for other
 *     ranks into the send workspace (assist_info records the mapping);
 *  3. one all_gather over EP of (verdict, bs, piece counts): every rank
 *     learns every count and every verdict, so a bad argument anywhere
 *     fails every rank here;
 *  4. rows and weights move point to point, straight into their place in
 *     expand_x / expand_scales (by local expert, then source); a rank's
 *     rows for itself are copied from x;
 *  5. with TP: an all_gather over TP of (verdict, rows), then AllGatherV of
 *     the rows and of the weights, in place.
 * Cost: one small all_gather plus one message per non-empty piece.
 */
#include <stdio.h>
#include <stdlib.h>

#include "clock.h"
#include "err.h"
#include "moe_int.h"

/* Is slot j of token t sent?  Routed slots by the mask; the shared ones
 * when any routed slot of the token is (an active token). */
static int slot_on(const struct fccl_moe *m, const uint8_t *mask,
                   fccl_moe_mask_t mt, size_t t, int j)
{
    if (!mask)
        return 1;
    if (mt == FCCL_MOE_MASK_TOKENS)
        return mask[t];
    const uint8_t *row = mask + t * (size_t)m->k;
    if (j < m->k)
        return row[j];
    for (int i = 0; i < m->k; i++)
        if (row[i])
            return 1;
    return 0;
}

static int check_mask(struct fccl_moe *m, const uint8_t *mask,
                      fccl_moe_mask_t mt, size_t bs)
{
    if (mt != FCCL_MOE_MASK_TOKENS && mt != FCCL_MOE_MASK_ROUTES)
        return moe_bad(m, "mask_type %d unknown (0: x_active_mask[bs], 1: "
                       "x_active_mask[bs][k])", (int)mt);
    size_t w = mt == FCCL_MOE_MASK_ROUTES ? (size_t)m->k : 1;
    for (size_t i = 0; mask && i < bs * w; i++)
        if (mask[i] > 1)
            return w == 1 ? moe_bad(m, "x_active_mask[%zu] = %u (0 or 1)", i,
                                    mask[i])
                          : moe_bad(m, "x_active_mask[%zu][%zu] = %u (0 or "
                                    "1)", i / w, i % w, mask[i]);
    return 0;
}

static int check_args(struct fccl_moe *m, const void *x, const int32_t *ids,
                      const float *scales, const uint8_t *mask,
                      fccl_moe_mask_t mt, size_t bs,
                      const fccl_moe_dispatch_out_t *o)
{
    if (bs > (size_t)m->bs || (m->global_bs == 0 && bs != (size_t)m->bs))
        return moe_bad(m, "bs %zu: must be %s %d (the config's bs%s)", bs,
                       m->global_bs ? "at most" : "exactly", m->bs,
                       m->global_bs ? "" : ", global_bs is 0");
    if (!o || !o->expand_x || !o->expand_scales || !o->expert_token_nums ||
        !o->ep_recv_counts || !o->assist_info || (m->tp && !o->tp_recv_counts))
        return moe_bad(m, "an output buffer is NULL");
    if (bs > 0 && (!x || !ids || !scales))
        return moe_bad(m, "x, expert_ids or expert_scales is NULL");
    if (check_mask(m, mask, mt, bs))
        return 1;
    for (size_t t = 0; t < bs; t++) {
        const int32_t *e = ids + t * (size_t)m->k;
        for (int j = 0; j < m->k; j++) {
            if (e[j] < 0 || e[j] >= m->experts)
                return moe_bad(m, "expert_ids[%zu][%d] = %d out of range "
                               "0..%d", t, j, e[j], m->experts - 1);
            for (int i = 0; i < j; i++)
                if (e[i] == e[j])
                    return moe_bad(m, "expert_ids[%zu] names expert %d "
                                   "twice (slots %d and %d)", t, e[j], i, j);
        }
    }
    return 0;
}

/* The weight of a shared-expert row of token t: the sum of the scales
 * of its routes that are sent, in slot order (moe_arrive.c sums alike). */
static float shared_weight(const struct fccl_moe *m, const float *scales,
                           const uint8_t *mask, fccl_moe_mask_t mt, size_t t)
{
    float s = 0;
    for (int j = 0; j < m->k; j++)
        if (slot_on(m, mask, mt, t, j))
            s += scales[t * (size_t)m->k + (size_t)j];
    return s;
}

/* Step 2: piece counts, positions, packing. */
static void route(struct fccl_moe *m, const void *x, const int32_t *ids,
                  const float *scales, const uint8_t *mask,
                  fccl_moe_mask_t mt, size_t bs, int32_t *assist)
{
    int32_t *off = moe_assist_off(assist);
    int32_t *s2p = moe_assist_slot2pos(m, assist);
    int32_t *p2s = moe_assist_pos2slot(m, assist);
    int S = m->slots, K = m->k;
    memset(m->piece_cnt, 0, m->npieces * sizeof(int64_t));
    for (size_t t = 0; t < bs; t++)
        for (int j = 0; j < S; j++) {
            int r, le;
            if (!slot_on(m, mask, mt, t, j))
                continue;
            moe_slot_dest(m, j < K ? ids[t * K + j] : 0, j, &r, &le);
            m->piece_cnt[(size_t)r * m->L + le]++;
        }
    off[0] = 0;
    for (size_t p = 0; p < m->npieces; p++)
        off[p + 1] = off[p] + (int32_t)m->piece_cnt[p];
    /* second pass: the cursor of each piece is off[p] + rows placed */
    memset(m->piece_cnt, 0, m->npieces * sizeof(int64_t));
    for (size_t t = 0; t < bs; t++) {
        float shw = S > K ? shared_weight(m, scales, mask, mt, t) : 0;
        for (int j = 0; j < S; j++) {
            size_t slot = t * (size_t)S + (size_t)j;
            if (!slot_on(m, mask, mt, t, j)) {
                s2p[slot] = -1;
                continue;
            }
            int r, le;
            moe_slot_dest(m, j < K ? ids[t * K + j] : 0, j, &r, &le);
            size_t p = (size_t)r * m->L + (size_t)le;
            int32_t pos = off[p] + (int32_t)m->piece_cnt[p]++;
            s2p[slot] = pos;
            p2s[pos] = (int32_t)slot;
            m->send_scales[pos] = j < K ? scales[t * K + j] : shw;
            if (r != m->ep_rank)
                memcpy(m->send_rows + (size_t)pos * m->rowb,
                       (const unsigned char *)x + t * m->rowb, m->rowb);
        }
    }
    assist[0] = MOE_ASSIST_MAGIC;
    assist[1] = (int32_t)bs;
    assist[2] = off[m->npieces];
}

/* Count from source s for my local expert le, from the gathered meta. */
static int64_t recv_cnt(const struct fccl_moe *m, int s, int le)
{
    return m->meta[(size_t)s * m->metalen + 2 +
                   (size_t)m->ep_rank * m->L + (size_t)le];
}

/* Expert-side layout: row offset of (le, s) in expand_x; total rows. */
static size_t layout(struct fccl_moe *m)
{
    size_t row = 0;
    for (int le = 0; le < m->my_L; le++)
        for (int s = 0; s < m->ep_size; s++) {
            m->recv_off[(size_t)le * m->ep_size + s] = row;
            row += (size_t)recv_cnt(m, s, le);
        }
    return row;
}

/* Step 4: post the exchange (m->op.dreq), then copy this rank's rows for
 * itself while the messages fly. */
static int exchange(struct fccl_moe *m, const void *x, const int32_t *assist,
                    fccl_moe_dispatch_out_t *o)
{
    const int32_t *off = moe_assist_off((int32_t *)assist);
    unsigned char *ex = o->expand_x;
    size_t nops = 0;
    fccl_p2p_op_t *ops = m->ops;
    for (int le = 0; le < m->my_L; le++)
        for (int s = 0; s < m->ep_size; s++) {
            size_t n = (size_t)recv_cnt(m, s, le);
            size_t at = m->recv_off[(size_t)le * m->ep_size + s];
            if (n == 0 || s == m->ep_rank)
                continue;
            ops[nops++] = (fccl_p2p_op_t){0, ex + at * m->rowb, n * m->H,
                                          m->dt, s, MOE_TAG_DISPATCH_ROWS + le};
            ops[nops++] = (fccl_p2p_op_t){0, o->expand_scales + at, n,
                                          FCCL_FLOAT32, s,
                                          MOE_TAG_DISPATCH_SCALES + le};
        }
    for (int r = 0; r < m->ep_size; r++)
        for (int le = 0; le < m->L; le++) {
            size_t p = (size_t)r * m->L + (size_t)le;
            size_t n = (size_t)(off[p + 1] - off[p]);
            if (n == 0 || r == m->ep_rank)
                continue;
            ops[nops++] = (fccl_p2p_op_t){1, m->send_rows + off[p] * m->rowb,
                                          n * m->H, m->dt, r,
                                          MOE_TAG_DISPATCH_ROWS + le};
            ops[nops++] = (fccl_p2p_op_t){1, m->send_scales + off[p], n,
                                          FCCL_FLOAT32, r,
                                          MOE_TAG_DISPATCH_SCALES + le};
        }
    m->op.dreq = NULL;
    int rc = nops ? fccl_batch_isend_irecv(ops, nops, m->ep, &m->op.dreq)
                  : FCCL_OK;
    if (rc < 0)
        return rc;
    uint64_t t0 = fccl_now_ns();
    const int32_t *p2s = moe_assist_pos2slot(m, (int32_t *)assist);
    for (int le = 0; le < m->my_L; le++) {
        size_t p = (size_t)m->ep_rank * m->L + (size_t)le;
        size_t at = m->recv_off[(size_t)le * m->ep_size + m->ep_rank];
        for (int32_t pos = off[p]; pos < off[p + 1]; pos++, at++) {
            size_t t = (size_t)p2s[pos] / (size_t)m->slots;
            memcpy(ex + at * m->rowb, (const unsigned char *)x + t * m->rowb,
                   m->rowb);
            o->expand_scales[at] = m->send_scales[pos];
        }
    }
    m->times.math_ns += fccl_now_ns() - t0;
    return FCCL_OK;
}

static void counts_out(struct fccl_moe *m, fccl_moe_dispatch_out_t *o,
                       const size_t *tp_rows)
{
    int64_t run = 0;
    for (int le = 0; le < m->my_L; le++) {
        int64_t n = 0;
        for (int s = 0; s < m->ep_size; s++) {
            int64_t c = recv_cnt(m, s, le);
            o->ep_recv_counts[(size_t)le * m->ep_size + s] = c;
            n += c;
        }
        if (m->tp) /* one local expert with TP: both blocks are its rows */
            n = (int64_t)(tp_rows[0] + tp_rows[1]);
        run += n;
        o->expert_token_nums[le] =
            m->nums_type == FCCL_MOE_TOKEN_NUMS_COUNT ? n : run;
    }
}

/* Step 5: verdicts and rows of the two TP ranks, then gather in place. */
static int tp_gather(struct fccl_moe *m, int bad, size_t rows,
                     fccl_moe_dispatch_out_t *o, size_t *tp_rows)
{
    int64_t v[2] = {bad, (int64_t)rows}, all[4];
    uint64_t t0 = fccl_now_ns();
    int rc = fccl_all_gather(v, all, 2, FCCL_INT64, m->tp, NULL);
    m->times.check_ns += fccl_now_ns() - t0;
    if (rc < 0)
        return rc;
    if ((rc = moe_verdict(m, all, 2, 2, "TP", "moe_dispatch")) < 0)
        return rc;
    size_t cnt[2], sc[2];
    for (int i = 0; i < 2; i++) {
        tp_rows[i] = (size_t)all[2 * i + 1];
        cnt[i] = tp_rows[i] * m->H;
        sc[i] = tp_rows[i];
        o->tp_recv_counts[i] = all[2 * i + 1];
    }
    t0 = fccl_now_ns();
    rc = fccl_all_gather_v(o->expand_x, cnt[m->tp_rank], o->expand_x, cnt,
                           m->dt, m->tp, NULL);
    if (rc == FCCL_OK)
        rc = fccl_all_gather_v(o->expand_scales, sc[m->tp_rank],
                               o->expand_scales, sc, FCCL_FLOAT32, m->tp,
                               NULL);
    m->times.comm_ns += fccl_now_ns() - t0;
    return rc;
}

/* Step 3: counts and verdicts of every rank, then the layout. */
static int ep_phase(struct fccl_moe *m, int bad, size_t bs, size_t *rows)
{
    m->mine[0] = bad;
    m->mine[1] = (int64_t)bs;
    memcpy(m->mine + 2, m->piece_cnt, m->npieces * sizeof(int64_t));
    uint64_t t0 = fccl_now_ns();
    int rc = fccl_all_gather(m->mine, m->meta, m->metalen, FCCL_INT64, m->ep,
                             NULL);
    if (rc == FCCL_OK)
        rc = moe_verdict(m, m->meta, m->metalen, m->ep_size, "EP",
                         "moe_dispatch");
    if (rc == FCCL_OK && (*rows = layout(m)) > m->block_cap)
        rc = fccl_err(FCCL_ERR_INVALID, "moe_dispatch: EP rank %d would "
                      "receive %zu rows, more than its capacity %zu",
                      m->ep_rank, *rows, m->block_cap);
    m->times.check_ns += fccl_now_ns() - t0;
    return rc;
}

/* The end of a dispatch, good or bad (rc: the exchange's status): the TP
 * gather (the partner learns our verdict even on failure), the counts. */
static int dispatch_end(struct fccl_moe *m, int rc)
{
    struct moe_op *op = &m->op;
    fccl_moe_dispatch_out_t *o = op->dout;
    size_t tp_rows[2] = {0, 0};
    if (m->tp) {
        int trc = tp_gather(m, rc < 0, op->drows, o, tp_rows);
        if (rc == FCCL_OK)
            rc = trc;
    }
    if (rc == FCCL_OK) {
        counts_out(m, o, tp_rows);
        o->rows = m->tp ? tp_rows[0] + tp_rows[1] : op->drows;
    }
    op->active = 0;
    op->dreq = NULL;
    m->times.total_ns = fccl_now_ns() - op->t0;
    m->times.comm_ns = m->times.total_ns - m->times.check_ns -
                       m->times.math_ns;
    return rc;
}

int moe_dispatch_begin(struct fccl_moe *m, const void *x, const int32_t *ids,
                       const float *scales, const uint8_t *mask,
                       fccl_moe_mask_t mt, size_t bs,
                       fccl_moe_dispatch_out_t *o)
{
    int rc0 = moe_idle_check(m, "moe_dispatch");
    if (rc0 < 0)
        return rc0;
    struct moe_op *op = &m->op;
    uint64_t t0 = fccl_now_ns();
    memset(&m->times, 0, sizeof(m->times));
    m->msg[0] = '\0';
    int bad = check_args(m, x, ids, scales, mask, mt, bs, o);
    uint64_t t1 = fccl_now_ns();
    if (!bad)
        route(m, x, ids, scales, mask, mt, bs, o->assist_info);
    else
        memset(m->piece_cnt, 0, m->npieces * sizeof(int64_t));
    uint64_t t2 = fccl_now_ns();
    m->times.check_ns += t1 - t0;
    m->times.math_ns += t2 - t1;
    op->kind = MOE_OP_DISPATCH;
    op->t0 = t0;
    op->dout = o;
    op->drows = 0;
    op->dreq = NULL;
    int rc = ep_phase(m, bad, bs, &op->drows);
    if (rc == FCCL_OK)
        rc = exchange(m, x, o->assist_info, o);
    op->active = 1;
    if (rc < 0) { /* nothing is pending; the TP partner hears of it */
        int erc = dispatch_end(m, rc);
        return erc < 0 ? erc : rc;
    }
    return FCCL_OK;
}

int moe_dispatch_poll(struct fccl_moe *m, int block)
{
    struct moe_op *op = &m->op;
    int rc = FCCL_OK;
    if (op->dreq) {
        int done = 1;
        rc = block ? fccl_wait(op->dreq, -1) : fccl_test(op->dreq, &done);
        if (!done)
            return rc < 0 ? rc : 0;
        op->dreq = NULL;
    }
    rc = dispatch_end(m, rc);
    return rc < 0 ? rc : 1;
}

int fccl_moe_dispatch_mask(fccl_moe_t *m, const void *x, const int32_t *ids,
                           const float *scales, const uint8_t *mask,
                           fccl_moe_mask_t mask_type, size_t bs,
                           fccl_moe_dispatch_out_t *o)
{
    int rc = moe_dispatch_begin(m, x, ids, scales, mask, mask_type, bs, o);
    if (rc == FCCL_OK)
        rc = moe_dispatch_poll(m, 1);
    return rc < 0 ? rc : FCCL_OK;
}

int fccl_moe_dispatch(fccl_moe_t *m, const void *x, const int32_t *ids,
                      const float *scales, const uint8_t *mask, size_t bs,
                      fccl_moe_dispatch_out_t *o)
{
    return fccl_moe_dispatch_mask(m, x, ids, scales, mask,
                                  FCCL_MOE_MASK_TOKENS, bs, o);
}
