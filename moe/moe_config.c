/*
 * MoE config: option checks, the cross-rank consistency check, sizes and
 * workspaces.  fccl_moe_new is collective over the EP group, then the TP
 * group: each rank checks its own options, then one all_reduce(max) per
 * group carries a "bad" flag and every option as (value, -value), so max
 * and min arrive together and a rank that differs makes all of them fail
 * at the same point instead of hanging later.  With TP, a third
 * all_reduce over EP spreads a disagreement found only between two TP
 * partners to both EP groups.
 */
#include <math.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>

#include "err.h"
#include "fccl/pg.h"
#include "moe_int.h"

void fccl_moe_opts_init(fccl_moe_opts_t *o)
{
    if (!o)
        return;
    memset(o, 0, sizeof(*o));
    o->dtype = FCCL_BFLOAT16;
    o->norm_eps = 1e-6f;
    o->token_nums_type = FCCL_MOE_TOKEN_NUMS_CUMSUM;
}

int moe_bad(struct fccl_moe *m, const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(m->msg, sizeof(m->msg), fmt, ap);
    va_end(ap);
    return 1;
}

int moe_verdict(struct fccl_moe *m, const int64_t *flags, size_t stride,
                int n, const char *group, const char *who)
{
    int me = strcmp(group, "TP") == 0 ? m->tp_rank : m->ep_rank;
    if (flags[(size_t)me * stride] != 0 && m->msg[0]) /* my own, precise */
        return fccl_err(FCCL_ERR_INVALID, "%s: %s", who, m->msg);
    for (int r = 0; r < n; r++) {
        if (flags[(size_t)r * stride] == 0)
            continue;
        return fccl_err(FCCL_ERR_INVALID,
                        "%s: %s rank %d failed its checks (its own error "
                        "says why)", who, group, r);
    }
    return FCCL_OK;
}

/* ---- local checks ---- */

int moe_in_group(const fccl_group_t *g, int world_rank)
{
    int r;
    return fccl_group_from_world(g, world_rank, &r) == FCCL_OK;
}

static int check_groups(struct fccl_moe *m, const fccl_moe_opts_t *o)
{
    int n = fccl_group_size(o->ep);
    if (n < 2 || n > FCCL_MOE_MAX_EP)
        return moe_bad(m, "the EP group has %d ranks (needs 2..%d)", n,
                       FCCL_MOE_MAX_EP);
    if (o->tp && fccl_group_size(o->tp) != 2)
        return moe_bad(m, "the TP group has %d ranks (needs exactly 2, or "
                       "no TP group)", fccl_group_size(o->tp));
    int w = -1;
    if (o->tp && fccl_group_to_world(o->tp, 1 - fccl_group_rank(o->tp),
                                     &w) == FCCL_OK &&
        moe_in_group(o->ep, w))
        return moe_bad(m, "the TP group pairs this rank with world rank %d, "
                       "which is in its own EP group (TP partners sit in "
                       "different EP groups)", w);
    return 0;
}

static int check_experts(struct fccl_moe *m, const fccl_moe_opts_t *o)
{
    int S = o->shared_expert_rank_num, N = o->shared_expert_num;
    if (o->moe_expert_num < 1 || o->moe_expert_num > FCCL_MOE_MAX_EXPERTS)
        return moe_bad(m, "moe_expert_num %d out of range 1..%d",
                       o->moe_expert_num, FCCL_MOE_MAX_EXPERTS);
    if (S < 0 || S >= m->ep_size)
        return moe_bad(m, "shared_expert_rank_num %d out of range 0..%d "
                       "(EP size %d leaves no routed-expert rank)", S,
                       m->ep_size - 1, m->ep_size);
    if (N < 0 || (N == 0) != (S == 0) || (N > 0 && S % N != 0))
        return moe_bad(m, "shared_expert_num %d does not fit "
                       "shared_expert_rank_num %d (both 0, or the ranks a "
                       "multiple of the experts)", N, S);
    if (o->moe_expert_num % (m->ep_size - S) != 0)
        return moe_bad(m, "moe_expert_num %d is not a multiple of the %d "
                       "routed-expert ranks (EP size %d - %d shared)",
                       o->moe_expert_num, m->ep_size - S, m->ep_size, S);
    if (o->tp && o->moe_expert_num / (m->ep_size - S) > 1)
        return moe_bad(m, "a TP group needs one expert per rank, not %d",
                       o->moe_expert_num / (m->ep_size - S));
    return 0;
}

static int check_shape(struct fccl_moe *m, const fccl_moe_opts_t *o)
{
    int kmax = o->moe_expert_num < FCCL_MOE_MAX_K ? o->moe_expert_num
                                                  : FCCL_MOE_MAX_K;
    if (o->k < 1 || o->k > kmax)
        return moe_bad(m, "k %d out of range 1..%d (at most 16 and at most "
                       "moe_expert_num)", o->k, kmax);
    if (o->bs < 1 || o->bs > FCCL_MOE_MAX_BS)
        return moe_bad(m, "bs %d out of range 1..%d", o->bs, FCCL_MOE_MAX_BS);
    if (o->global_bs < 0)
        return moe_bad(m, "global_bs %d is negative", o->global_bs);
    if (o->hidden < 1 || o->hidden > ((size_t)1 << 24))
        return moe_bad(m, "hidden %zu out of range 1..%zu", o->hidden,
                       (size_t)1 << 24);
    if (o->dtype != FCCL_FLOAT32 && o->dtype != FCCL_BFLOAT16 &&
        o->dtype != FCCL_FLOAT16)
        return moe_bad(m, "dtype %s unsupported (float32, bfloat16 or "
                       "float16)", fccl_dtype_name(o->dtype));
    if (!isfinite(o->norm_eps) || o->norm_eps < 0)
        return moe_bad(m, "norm_eps %g must be finite and >= 0",
                       (double)o->norm_eps);
    if (o->token_nums_type != FCCL_MOE_TOKEN_NUMS_CUMSUM &&
        o->token_nums_type != FCCL_MOE_TOKEN_NUMS_COUNT)
        return moe_bad(m, "token_nums_type %d unknown (0 cumsum, 1 count)",
                       (int)o->token_nums_type);
    return 0;
}

/* ---- the cross-rank check ---- */

enum { V_BAD, V_H, V_K, V_E, V_N, V_S, V_GBS, V_DT, V_EPS, V_TP, V_NUMS,
       V_EPSIZE, V_EPRANK, V_XBUF, V_BS, NV };
static const char *const vname[NV] = {
    "", "hidden", "k", "moe_expert_num", "shared_expert_num",
    "shared_expert_rank_num", "global_bs", "dtype", "norm_eps",
    "TP group or none", "token_nums_type", "EP size", "EP rank",
    "expert_buffer", "bs"};

/* bad: the rank failed (its checks, or with TP its EP group's check);
 * culprit: the EP rank to name for it. */
static void fill(int64_t *v, const struct fccl_moe *m, const fccl_moe_opts_t *o,
                 int bad, int culprit)
{
    uint32_t eb;
    memcpy(&eb, &o->norm_eps, sizeof(eb));
    int64_t x[NV] = {bad, (int64_t)o->hidden, o->k, o->moe_expert_num,
                     o->shared_expert_num, o->shared_expert_rank_num,
                     o->global_bs, o->dtype, eb, o->tp != NULL,
                     o->token_nums_type, m->ep_size, m->ep_rank,
                     o->expert_buffer != 0, o->bs};
    for (int i = 0; i < NV; i++) {
        v[2 * i] = x[i];
        v[2 * i + 1] = -x[i];
    }
    /* the verdict names the ranks: after the max, the highest bad EP rank
     * + 1 and FCCL_MOE_MAX_EP minus the lowest (0: every rank is good) */
    v[2 * V_BAD] = bad ? culprit + 1 : 0;
    v[2 * V_BAD + 1] = bad ? FCCL_MOE_MAX_EP - culprit : 0;
}

/* Every rank's message when some rank of `group` failed its own checks:
 * the failing rank its precise one, the others naming the rank(s). */
static int bad_verdict(const struct fccl_moe *m, const int64_t *v,
                       const char *group)
{
    if (m->msg[0])
        return fccl_err(FCCL_ERR_INVALID, "moe_new: %s", m->msg);
    int hi = (int)v[2 * V_BAD] - 1, lo = FCCL_MOE_MAX_EP - (int)v[2 * V_BAD + 1];
    if (strcmp(group, "TP") == 0) /* what the partner's EP group found */
        return fccl_err(FCCL_ERR_INVALID, "moe_new: EP rank %d of the other "
                        "EP group (across the TP group from TP rank %d) "
                        "failed its checks (its own error says why)", hi,
                        1 - m->tp_rank);
    if (lo == hi)
        return fccl_err(FCCL_ERR_INVALID, "moe_new: EP rank %d passed bad "
                        "options (its own error says which)", lo);
    return fccl_err(FCCL_ERR_INVALID, "moe_new: EP ranks %d and %d (and "
                    "maybe others between them) passed bad options (their "
                    "own errors say which)", lo, hi);
}

/* After all_reduce(max) over `group`: the first option that differs
 * (skipping those allowed to differ there). */
static int compare(struct fccl_moe *m, const int64_t *v, const char *group,
                   int bs_may_differ, int rank_may_differ)
{
    if (v[2 * V_BAD] != 0)
        return bad_verdict(m, v, group);
    for (int i = 1; i < NV; i++) {
        if ((i == V_BS && bs_may_differ) || (i == V_EPRANK && rank_may_differ))
            continue;
        if (v[2 * i] != -v[2 * i + 1] && i == V_EPS) {
            float lo, hi;
            uint32_t a = (uint32_t)-v[2 * i + 1], b = (uint32_t)v[2 * i];
            memcpy(&lo, &a, sizeof(lo));
            memcpy(&hi, &b, sizeof(hi));
            return fccl_err(FCCL_ERR_INVALID, "moe_new: norm_eps differs "
                            "across the %s group (%g and %g); every rank "
                            "must pass the same", group, (double)lo,
                            (double)hi);
        }
        if (v[2 * i] != -v[2 * i + 1])
            return fccl_err(FCCL_ERR_INVALID,
                            "moe_new: %s differs across the %s group (from "
                            "%lld to %lld); every rank must pass the same",
                            vname[i], group, (long long)-v[2 * i + 1],
                            (long long)v[2 * i]);
    }
    return FCCL_OK;
}

static int tp_judge(struct fccl_moe *m, const int64_t *vmax)
{
    m->max_bs = (int)vmax[2 * V_BS];
    if (vmax[2 * V_BAD]) /* for the status words of moe_tpcheck.c */
        m->tp_culprit = (int)vmax[2 * V_BAD] - 1;
    return compare(m, vmax, "TP", 1, 0);
}

static int cross_check(struct fccl_moe *m, const fccl_moe_opts_t *o, int bad)
{
    int64_t v[2 * NV];
    fill(v, m, o, bad, m->ep_rank);
    int rc = fccl_all_reduce(v, v, 2 * NV, FCCL_INT64, FCCL_MAX, o->ep, NULL);
    if (rc < 0)
        return rc;
    /* who to name across TP: the lowest bad rank, or this rank when the
     * options differ */
    int culprit = v[2 * V_BAD] ? FCCL_MOE_MAX_EP - (int)v[2 * V_BAD + 1]
                               : m->ep_rank;
    int64_t max_bs = v[2 * V_BS];
    int any_tp = v[2 * V_TP] != 0;
    int verdict = compare(m, v, "EP", o->global_bs != 0, 1);
    if (verdict == FCCL_OK && o->global_bs != 0 &&
        o->global_bs < max_bs * m->ep_size)
        verdict = fccl_err(FCCL_ERR_INVALID,
                           "moe_new: global_bs %d is less than the largest "
                           "bs %lld times the EP size %d", o->global_bs,
                           (long long)max_bs, m->ep_size);
    m->max_bs = (int)max_bs;
    if (!any_tp) /* no rank of the EP group has a TP group */
        return verdict;
    /* TP partners: same everything (including the EP rank), the larger
     * max bs of the two EP groups; moe_tpcheck.c makes a disagreement
     * about the TP group itself fail fast too. */
    int64_t vmax[2 * NV];
    fill(v, m, o, verdict < 0, culprit);
    v[2 * V_BS] = max_bs;
    v[2 * V_BS + 1] = -max_bs;
    return moe_tp_check(m, v, 2 * NV, verdict, vmax, tp_judge);
}

/* ---- sizes and workspaces ---- */

static void derive(struct fccl_moe *m, const fccl_moe_opts_t *o)
{
    int S = o->shared_expert_rank_num;
    m->experts = o->moe_expert_num;
    m->shared_num = o->shared_expert_num;
    m->shared_ranks = S;
    m->k = o->k;
    m->slots = o->k + o->shared_expert_num;
    m->L = o->moe_expert_num / (m->ep_size - S);
    m->is_shared = m->ep_rank < S;
    m->my_L = m->is_shared ? 1 : m->L;
    m->first_expert = m->is_shared ? m->ep_rank / (S / o->shared_expert_num)
                                   : (m->ep_rank - S) * m->L;
    m->bs = o->bs;
    m->global_bs = o->global_bs;
    m->H = o->hidden;
    m->dt = o->dtype;
    m->es = fccl_dtype_size(o->dtype);
    m->rowb = m->H * m->es;
    m->eps = o->norm_eps;
    m->nums_type = o->token_nums_type;
    m->npieces = (size_t)m->ep_size * (size_t)m->L;
    m->metalen = 1 + 2 * m->npieces + 1;
    m->assist_len = MOE_ASSIST_HDR + m->npieces + 1 +
                    2 * (size_t)m->bs * (size_t)m->slots;
}

static void derive_caps(struct fccl_moe *m)
{
    size_t per_src;
    size_t srcs = (size_t)m->ep_size;
    if (m->is_shared) {
        int reps = m->shared_ranks / m->shared_num;
        per_src = 1;
        srcs = ((size_t)m->ep_size + (size_t)reps - 1) / (size_t)reps;
    } else {
        per_src = (size_t)(m->L < m->k ? m->L : m->k);
    }
    m->block_cap = (size_t)m->max_bs * srcs * per_src;
    m->expand_rows = m->block_cap * (size_t)m->tp_size;
}

static void *zalloc(size_t n, int *fail)
{
    void *p = NULL;
    if (posix_memalign(&p, 64, n ? n : 64) != 0) {
        *fail = 1;
        return NULL;
    }
    memset(p, 0, n ? n : 64);
    return p;
}

/* Everything sized by this rank's own options (before the cross check,
 * so an allocation failure joins the verdict). */
static int alloc_local(struct fccl_moe *m)
{
    int f = 0;
    size_t rows = (size_t)m->bs * (size_t)m->slots;
    m->send_rows = zalloc(rows * m->rowb, &f);
    m->send_scales = zalloc(rows * sizeof(float), &f);
    m->recv_rows = zalloc(rows * m->rowb, &f);
    m->mine = zalloc(m->metalen * sizeof(int64_t), &f);
    m->meta = zalloc((size_t)m->ep_size * m->metalen * sizeof(int64_t), &f);
    m->piece_cnt = zalloc(m->npieces * sizeof(int64_t), &f);
    m->recv_off = zalloc(m->npieces * sizeof(size_t), &f);
    m->reqs = zalloc(m->npieces * sizeof(*m->reqs), &f);
    m->ops = zalloc(4 * m->npieces * sizeof(*m->ops), &f);
    m->req_piece = zalloc(m->npieces * sizeof(int), &f);
    m->rem = zalloc((size_t)m->bs * sizeof(int32_t), &f);
    m->rowptr = zalloc(rows * sizeof(*m->rowptr), &f);
    m->acc = zalloc(m->H * sizeof(float), &f);
    m->wrows = zalloc(((size_t)m->slots + 1) * sizeof(*m->wrows), &f);
    m->wts = zalloc(((size_t)m->slots + 1) * sizeof(float), &f);
    return f ? moe_bad(m, "no memory for the workspaces (%zu rows of %zu "
                       "bytes)", rows, m->rowb)
             : 0;
}

void fccl_moe_destroy(fccl_moe_t *m)
{
    if (!m)
        return;
    moe_poll(m, 1); /* a combine still running: finish it first */
    free(m->send_rows);
    free(m->send_scales);
    free(m->recv_rows);
    free(m->rs_rows);
    free(m->mine);
    free(m->meta);
    free(m->piece_cnt);
    free(m->recv_off);
    free(m->reqs);
    free(m->ops);
    free(m->req_piece);
    free(m->rem);
    free(m->rowptr);
    free(m->acc);
    free(m->wrows);
    free(m->wts);
    moe_shared_free(m);
    free(m);
}

static int local_checks(struct fccl_moe *m, const fccl_moe_opts_t *o)
{
    if (check_groups(m, o) || check_experts(m, o) || check_shape(m, o))
        return 1;
    derive(m, o);
    return alloc_local(m);
}

int fccl_moe_new(const fccl_moe_opts_t *o, fccl_moe_t **out)
{
    if (out)
        *out = NULL;
    if (!o || !out || !o->ep)
        return fccl_err(FCCL_ERR_INVALID, "moe_new: %s is NULL",
                        !o ? "opts" : !out ? "out" : "opts->ep");
    static _Atomic int64_t calls; /* the TP check's hello epoch */
    int64_t epoch = ++calls;
    struct fccl_moe *m = calloc(1, sizeof(*m));
    if (!m)
        return fccl_err(FCCL_ERR_NOMEM, "moe_new: no memory");
    m->new_epoch = epoch;
    m->ep = o->ep;
    m->tp = o->tp;
    m->ep_rank = fccl_group_rank(o->ep);
    m->ep_size = fccl_group_size(o->ep);
    m->tp_rank = o->tp ? fccl_group_rank(o->tp) : 0;
    m->tp_size = o->tp ? 2 : 1;
    if (m->ep_size < 2) { /* every member sees the same size: no exchange */
        check_groups(m, o);
        fccl_moe_destroy(m);
        return fccl_err(FCCL_ERR_INVALID, "moe_new: the EP group has %d "
                        "rank(s); expert parallelism needs at least 2",
                        fccl_group_size(o->ep));
    }
    int bad = local_checks(m, o);
    int rc = cross_check(m, o, bad);
    if (rc == FCCL_OK) {
        derive_caps(m);
        if (o->expert_buffer) /* collective over EP; same choice on all */
            rc = moe_shared_new(m);
    }
    if (rc == FCCL_OK) {
        int f = 0;
        m->rs_rows = o->tp ? zalloc(m->block_cap * m->rowb, &f) : NULL;
        if (f)
            rc = fccl_err(FCCL_ERR_NOMEM, "moe_new: no memory for the TP "
                          "block (%zu rows)", m->block_cap);
    }
    if (rc < 0) {
        fccl_moe_destroy(m);
        return rc;
    }
    m->msg[0] = '\0';
    *out = m;
    return FCCL_OK;
}

int fccl_moe_get_info(const fccl_moe_t *m, fccl_moe_info_t *info)
{
    if (!m || !info)
        return fccl_err(FCCL_ERR_INVALID, "moe_get_info: %s is NULL",
                        !m ? "moe" : "info");
    info->ep_rank = m->ep_rank;
    info->ep_size = m->ep_size;
    info->tp_rank = m->tp_rank;
    info->tp_size = m->tp_size;
    info->is_shared_rank = m->is_shared;
    info->local_expert_num = m->my_L;
    info->first_expert = m->first_expert;
    info->routed_local_expert_num = m->L;
    info->expand_rows = m->expand_rows;
    info->assist_len = m->assist_len;
    info->slots = m->slots;
    return FCCL_OK;
}

int fccl_moe_last_times(const fccl_moe_t *m, fccl_moe_times_t *t)
{
    if (!m || !t)
        return fccl_err(FCCL_ERR_INVALID, "moe_last_times: %s is NULL",
                        !m ? "moe" : "times");
    *t = m->times;
    return FCCL_OK;
}
