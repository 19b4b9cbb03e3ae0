/*
 * Internal: the MoE config object, the assist_info layout, the tags, and
 * the row kernels shared by dispatch and combine.
 *
 * assist_info (int32), written by dispatch on the token owner, read by
 * combine there:
 *   [0] MOE_ASSIST_MAGIC   [1] bs   [2] rows sent (n)
 *   [3 .. 3+P]             P+1 piece offsets, P = ep_size * L; piece
 *                          (r, le) = rows for local expert le of EP rank r,
 *                          rows packed r-major, then le, then token order
 *   [4+P .. +bs*slots]     slot -> packed position (-1: not sent), slot =
 *                          t * slots + j, j < k routed, j >= k shared; a
 *                          token's shared slots are sent exactly when one
 *                          of its routed slots is (an active token)
 *   [.. + n]               packed position -> slot
 */
#ifndef FCCL_MOE_INT_H
#define FCCL_MOE_INT_H

#include <stddef.h>
#include <stdint.h>
#include <string.h>

#include "fccl/moe.h"

#define MOE_ASSIST_MAGIC 0x4d6f4531
#define MOE_ASSIST_HDR 3
/* Point-to-point tags (plus the local expert index, < 1024). */
#define MOE_TAG_DISPATCH_ROWS 0x4d4f0000
#define MOE_TAG_DISPATCH_SCALES 0x4d4f0400
#define MOE_TAG_COMBINE_ROWS 0x4d4f0800
#define MOE_TAG_COMBINE_DONE 0x4d4f0c00 /* in place: "read your rows" */
/* fccl_moe_new's TP check: hello to the partner over the world group,
 * status words over the EP group (moe_tpcheck.c). */
#define MOE_TAG_TP_HELLO 0x4d4f1000
#define MOE_TAG_TP_STATUS 0x4d4f1001

/* What a combine call finishes each token into. */
struct moe_finish {
    fccl_moe_combine_in_t in; /* a copy: the caller's struct may go */
    int fused;
    void *x;                  /* combine: out; fused: x_out */
    const void *residual, *gamma;
    void *y;
    float *rstd;
};

/* The operation in flight (one per config): a combine, or a dispatch
 * started by fccl_moe_dispatch_start. */
enum { MOE_OP_COMBINE, MOE_OP_DISPATCH };
struct moe_op {
    int active;
    int kind;               /* MOE_OP_* */
    fccl_request_t *dreq;   /* dispatch: the row exchange, or NULL */
    fccl_moe_dispatch_out_t *dout; /* dispatch: the caller's outputs */
    size_t drows;           /* dispatch: rows of the own TP block */
    struct moe_finish f;
    size_t nr;              /* receives still pending (m->reqs[0..nr)) */
    fccl_request_t *sreq;   /* the sends, or NULL */
    int shared;             /* rows read in place from the peers' expert
                               buffers (moe_shared.c) */
    uint64_t t0, last, math0; /* start, last progress, math before it */
};

struct fccl_moe_request {
    struct fccl_moe *m;
};

struct fccl_moe {
    fccl_group_t *ep, *tp;
    int ep_rank, ep_size, tp_rank, tp_size;
    int tp_world_me;  /* world rank (the TP check) */
    int tp_culprit;   /* the TP check: EP rank of the other EP group whose
                         own checks failed, as the partner's hello said;
                         -1 if none */
    int64_t new_epoch; /* this process's fccl_moe_new calls so far */
    int experts, shared_num, shared_ranks, k, slots;
    int L;            /* routed experts per routed rank = pieces per rank */
    int my_L;         /* experts on this rank */
    int first_expert; /* routed: first id; shared: shared expert index */
    int is_shared;
    int bs, global_bs, max_bs; /* max_bs: largest bs of the EP/TP groups */
    size_t H, es, rowb;
    fccl_dtype_t dt;
    float eps;
    int nums_type;
    size_t block_cap;  /* rows one EP exchange may bring (own TP block) */
    size_t expand_rows;
    size_t assist_len;
    size_t npieces; /* ep_size * L */
    size_t metalen; /* int64 per rank in the count exchanges */
    /* workspaces, sized once */
    unsigned char *send_rows; /* bs * slots rows: dispatch packing */
    float *send_scales;       /* bs * slots */
    unsigned char *recv_rows; /* bs * slots rows: combine arrivals */
    unsigned char *rs_rows;   /* block_cap rows: TP reduce-scatter output */
    int64_t *mine, *meta;     /* metalen, ep_size * metalen */
    int64_t *piece_cnt;       /* npieces, counts of this call */
    size_t *recv_off;         /* npieces: expert-side row offsets */
    fccl_request_t **reqs;    /* npieces */
    fccl_p2p_op_t *ops;       /* 4 * npieces: one call's sends/receives */
    int *req_piece;           /* npieces */
    int32_t *rem;             /* bs: rows still missing per token */
    const unsigned char **rowptr; /* bs * slots */
    float *acc;               /* H: one row of float32 scratch */
    const void **wrows;       /* slots + 1: one token's rows ... */
    float *wts;               /* ... and their weights */
    /* the expert buffer (moe_shared.c) */
    unsigned char *xbuf;      /* [expand_rows][H], NULL without one */
    void *xmap;               /* its mapping (header page + rows) */
    size_t xmap_len;
    int xplain;               /* 1: plain memory, not a mapping */
    int shared_ok;            /* every EP rank mapped every other's */
    const unsigned char **peer_rows; /* ep_size: their rows, read-only */
    size_t *peer_cap;         /* ep_size: rows in each */
    void **peer_map;          /* ep_size: their mappings ... */
    size_t *peer_len;         /* ... and lengths */
    int64_t *done_sink;       /* ep_size: "done" words received */
    int64_t done_word;        /* the one sent */
    fccl_moe_times_t times;
    struct moe_op op;
    struct fccl_moe_request req; /* handed out by the *_start calls */
    char msg[512];            /* this rank's own argument error */
};

/* Bad local arguments: record the message (for after the verdict
 * exchange, which overwrites the thread's message) and return 1. */
int moe_bad(struct fccl_moe *m, const char *fmt, ...)
    __attribute__((format(printf, 2, 3)));

/* Destination of slot j of a token: EP rank and local expert. */
static inline void moe_slot_dest(const struct fccl_moe *m, int32_t expert,
                                 int j, int *r, int *le)
{
    if (j < m->k) {
        *r = m->shared_ranks + expert / m->L;
        *le = expert % m->L;
        return;
    }
    int reps = m->shared_ranks / m->shared_num;
    *r = (j - m->k) * reps + m->ep_rank % reps;
    *le = 0;
}

/* assist_info views */
static inline int32_t *moe_assist_off(int32_t *a) { return a + MOE_ASSIST_HDR; }
static inline int32_t *moe_assist_slot2pos(const struct fccl_moe *m, int32_t *a)
{
    return a + MOE_ASSIST_HDR + m->npieces + 1;
}
static inline int32_t *moe_assist_pos2slot(const struct fccl_moe *m, int32_t *a)
{
    return moe_assist_slot2pos(m, a) + (size_t)m->bs * (size_t)m->slots;
}

/* Verdict exchange helper: FCCL_ERR_INVALID naming the first bad rank of
 * `flags` (stride `stride`), or FCCL_OK.  `who` names the operation. */
int moe_verdict(struct fccl_moe *m, const int64_t *flags, size_t stride,
                int n, const char *group, const char *who);

/* ---- the TP check of fccl_moe_new (moe_tpcheck.c) ---- */

/* Is world_rank a member of g?  (fccl_group_from_world: for a non-member
 * it leaves a message as the thread's last error, which the callers
 * never report; they keep their own messages in m->msg or save them
 * before asking.) */
int moe_in_group(const fccl_group_t *g, int world_rank);

/* Compares the element-wise max of the two partners' option vectors;
 * FCCL_OK or FCCL_ERR_INVALID with its message. */
typedef int (*moe_tp_judge_fn)(struct fccl_moe *m, const int64_t *vmax);
/* Collective over the EP group and the TP partner, run when any rank of
 * the EP group has a TP group: hello (nv option values) with the partner
 * over the world group, a good/bad word with every EP rank, so partners
 * that disagree about the TP group fail at once on every rank that can
 * know (see the file).  verdict: this rank's EP check.  vmax gets the
 * judged max.  Returns FCCL_OK, FCCL_ERR_INVALID, or a group error. */
int moe_tp_check(struct fccl_moe *m, const int64_t *hello, size_t nv,
                 int verdict, int64_t *vmax, moe_tp_judge_fn judge);

/* ---- the expert buffer (moe_shared.c) ---- */

/* Collective over EP (after the cross check): make the expert buffer and,
 * without TP, map every other rank's.  Falls back to a plain buffer
 * (shared_ok 0 on every rank) when any rank cannot.  Group errors only. */
int moe_shared_new(struct fccl_moe *m);
void moe_shared_free(struct fccl_moe *m);
/* In-place combine after the count check: post the "done" receives from
 * the ranks that read this rank's rows and note every peer's pieces where
 * they lie (finishing tokens).  Then, once this rank's own pieces are
 * noted too (every token finished), moe_shared_end tells each peer read
 * from that we are done (m->op.sreq). */
int moe_shared_begin(struct fccl_moe *m);
int moe_shared_end(struct fccl_moe *m);

/* ---- dispatch (moe_dispatch.c) ---- */

/* Checks with every rank, routing, posting the exchange and copying this
 * rank's own rows: afterwards m->op is an active dispatch that
 * moe_dispatch_poll finishes (the TP gather, the counts).  Fails (with
 * every rank, for argument errors) without leaving anything pending. */
int moe_dispatch_begin(struct fccl_moe *m, const void *x, const int32_t *ids,
                       const float *scales, const uint8_t *mask,
                       fccl_moe_mask_t mask_type, size_t bs,
                       fccl_moe_dispatch_out_t *o);
/* As moe_poll, for an active dispatch. */
int moe_dispatch_poll(struct fccl_moe *m, int block);

/* ---- combine (moe_combine.c, moe_arrive.c) ---- */

/* Check m->op.f's arguments with every rank, run the TP reduce-scatter,
 * post the receives and sends and use this rank's own rows: afterwards
 * m->op is active and moe_poll finishes it.  Fails (with every rank,
 * for argument errors) without leaving anything pending. */
int moe_combine_begin(struct fccl_moe *m);
/* Start m->op.f for a new call: idle check, copy of *in (NULL: zeros, which
 * the checks refuse on every rank), no outputs yet. */
int moe_combine_fill(struct fccl_moe *m, const fccl_moe_combine_in_t *in,
                     const char *who);
/* The fused operator's outputs. */
void moe_set_fused(struct fccl_moe *m, const void *residual_x,
                   const void *gamma, void *y_out, float *rstd_out,
                   void *x_out);
/* FCCL_ERR_STATE if a combine started by *_start is still running. */
int moe_idle_check(const struct fccl_moe *m, const char *who);
/* Every token with no rows to wait for is finished at once. */
void moe_start_tokens(struct fccl_moe *m);
/* Packed rows [pos0, pos0+n) are at `rows`: note them, finish the tokens
 * they complete. */
void moe_arrived(struct fccl_moe *m, int32_t pos0, size_t n,
                 const unsigned char *rows);
/* Drive the active combine: block = 0 makes one pass over the pending
 * receives, block = 1 waits until everything is done.  1 when done (the
 * op is then inactive), 0 still pending, < 0 failed (and inactive). */
int moe_poll(struct fccl_moe *m, int block);

/* ---- row kernels (moe_rows.c); float32 accumulation ---- */

/* acc = w * row (first) or acc += w * row, row of H elements of dt. */
void moe_row_axpy(float *acc, const void *row, float w, size_t H,
                  fccl_dtype_t dt, int first);
/* acc = sum_j w[j] * rows[j], j = 0..n-1 in order (the same bits as n
 * axpys), four rows per pass; n = 0 gives zeros. */
void moe_row_wsum(float *acc, const void *const *rows, const float *w,
                  int n, size_t H, fccl_dtype_t dt);
/* dst = acc rounded to dt. */
void moe_row_store(void *dst, const float *acc, size_t H, fccl_dtype_t dt);
/* rstd = 1/sqrt(mean(acc^2)+eps); y = acc * rstd * gamma.  Returns rstd.
 * (Also used by fccl-moe-bench's unfused path.) */
float moe_row_rms_norm(const float *acc, const void *gamma, float eps,
                       void *y_out, size_t H, fccl_dtype_t dt);
/* acc += residual; x_out = round(acc); rstd = 1/sqrt(mean(acc^2)+eps);
 * y = acc * rstd * gamma.  Returns rstd. */
float moe_row_add_rms_norm(float *acc, const void *residual,
                           const void *gamma, float eps, void *x_out,
                           void *y_out, size_t H, fccl_dtype_t dt);

#endif
