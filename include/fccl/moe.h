/** @file fccl/moe.h
 *
 * fccl MoE: expert-parallel dispatch and combine on the collective engine,
 * after Ascend's MoeDistributeDispatch / MoeDistributeCombine /
 * MoeDistributeCombineAddRmsNorm.
 *
 * The idea.  An EP (expert parallel) group of ep_size ranks holds
 * moe_expert_num routed experts; the first shared_expert_rank_num EP ranks
 * hold replicas of the shared expert(s) instead, the others hold
 * local_expert_num = moe_expert_num / (ep_size - shared_expert_rank_num)
 * routed experts each: routed expert e lives on EP rank
 * shared_expert_rank_num + e / local_expert_num.  Every rank owns bs tokens
 * (rows of H elements) and for each token the ids and weights of its top K
 * experts.
 *
 *   dispatch:  each token goes to the rank of each of its K experts (and
 *              to one replica of every shared expert); each rank receives
 *              expand_x, its tokens grouped by local expert, then by source
 *              rank.  With a TP group of 2, the two TP ranks then gather each
 *              other's rows (AllGatherV), so each holds both blocks.
 *   experts:   the caller runs its experts on expand_x in place (or into
 *              another buffer of the same layout).
 *   combine:   with TP, the two partial results are summed and scattered
 *              back (ReduceScatterV); then every row goes back to the rank
 *              that owns the token, which forms, with s[t] the sum of the
 *              token's scales over its active routes,
 *                out[t] = sum_k expert_scales[t,k] * y[t,k]
 *                         + s[t] * (each shared expert's row of t)
 *                         + s[t] * shared_expert_x[t]     (if given)
 *              (k over the active routes), accumulated in float32 in that
 *              fixed order, so every run gives the same bits whatever
 *              order the rows arrive in.
 *
 * The shared expert's weight.  The seed writes combineOut =
 * Sum(expertScales * ataOut + expertScales * sharedExpertX).  Read as the
 * tensor expression it is (expertScales [BS, K] against sharedExpertX
 * [BS, H], summed over K), the shared term is (sum_k expertScales[t,k]) *
 * sharedExpertX[t]: the shared expert is weighted by the sum of the
 * token's routing weights.  This is the one reading under which the
 * formula is well formed as written, and it agrees with adding the
 * shared expert unweighted (the reading before this version) exactly when
 * the weights of a token sum to 1, the usual normalised top-k gating.
 * The same weight goes to the rows of the shared-expert ranks, which
 * compute the same term on other ranks: where the shared expert runs
 * (shared-expert ranks, or the caller, as shared_expert_x) does not
 * change the result.
 *   fused:     combine_add_rms_norm also adds residual_x and applies RMSNorm:
 *                x = out + residual;  rstd = 1 / sqrt(mean(x^2) + eps);
 *                y = x * rstd * gamma
 *              in one pass over the received rows: a token is finished
 *              (weighted sum, add, norm) as soon as its last row arrives,
 *              while other rows are still in flight, with one row of float32
 *              scratch and no full-size temporary.  rstd and y are computed
 *              from x in float32 before x is rounded to the data type.
 *
 * Configs.  A config object (fccl_moe_new()) holds the groups, sizes and
 * workspaces; it is created once, collectively, and reused, so each call
 * is only data movement and math.  Data types float32, bfloat16 and
 * float16 (the 16-bit types in and out, float32 accumulation, rounded to
 * nearest even).
 *
 * Masks.  x_active_mask takes either of Ascend's two forms
 * (fccl_moe_mask_t): [bs], a token on or off, or [bs][k] (newer CANN
 * versions), each of a token's k routes on or off.  A route that is off
 * is not sent and adds nothing to the combine (nor its scale to s[t]); a
 * token with every route off is inactive as with the [bs] form.  An
 * active token also goes to the shared experts.  An inactive token is
 * not sent at all; its combine output is zero (fused: x is the
 * residual).
 *
 * Argument errors never leave other ranks waiting: each call (and
 * fccl_moe_new) checks its arguments locally and then shares a verdict
 * with the other ranks in the exchange it needs anyway (the token counts;
 * fccl_moe_new's option comparison), so every rank of the EP group (and
 * of the TP groups) returns FCCL_ERR_INVALID together, the offending rank
 * with the precise message, the others naming that rank (the lowest and
 * highest when several are wrong).
 *
 * Asynchronous variants: fccl_moe_dispatch_start(), fccl_moe_combine_start()
 * and fccl_moe_combine_add_rms_norm_start() return a handle to test or
 * wait on while the caller works on something else (below).
 *
 * Groups: the EP group (and the TP group) must carry no other traffic
 * between the first and the last rank entering an operation here (they
 * use the groups' point-to-point tags 0x4d4f0000 and up; fccl_moe_new()
 * with TP also tag 0x4d4f1000 of the world group).  Every rank of the EP
 * group calls the same operations in the same order.
 *
 * Thread safety: a config is used by one thread at a time (like its
 * groups); different configs on different groups may run in parallel.
 */
#ifndef FCCL_MOE_H
#define FCCL_MOE_H

#include <stddef.h>
#include <stdint.h>

#include "fccl/coll.h"
#include "fccl/core.h"

#ifdef __cplusplus
extern "C" {
#endif

/** An MoE config (opaque); see fccl_moe_new(). */
typedef struct fccl_moe fccl_moe_t;

/** How dispatch reports expert_token_nums (Ascend's
 * expert_token_nums_type). */
typedef enum {
    FCCL_MOE_TOKEN_NUMS_CUMSUM = 0, /**< prefix sums: rows of experts 0..i */
    FCCL_MOE_TOKEN_NUMS_COUNT = 1,  /**< rows of expert i */
} fccl_moe_token_nums_t;

/** @name Limits
 * Ascend's, kept: experts per token (K), routed experts, tokens per rank
 * (bs), EP group size.
 * @{ */
#define FCCL_MOE_MAX_K 16
#define FCCL_MOE_MAX_EXPERTS 1024
#define FCCL_MOE_MAX_BS 512
#define FCCL_MOE_MAX_EP 768
/** @} */

/** Options of fccl_moe_new().  Fill with fccl_moe_opts_init() first. */
typedef struct fccl_moe_opts {
    fccl_group_t *ep;           /**< EP group, 2..768 ranks (borrowed: keep
                                   it alive until fccl_moe_destroy) */
    fccl_group_t *tp;           /**< NULL: no TP; else a group of exactly 2
                                   ranks, each in a different EP group with
                                   the same EP rank (borrowed) */
    int moe_expert_num;         /**< routed experts, 1..1024, a multiple of
                                   the number of routed-expert ranks */
    int shared_expert_num;      /**< shared experts: 0, or >= 1 with
                                   shared_expert_rank_num a multiple of it */
    int shared_expert_rank_num; /**< EP ranks 0..n-1 hold shared experts
                                   (replicas), 0..ep_size-1 */
    int bs;                     /**< most tokens this rank passes per call,
                                   1..512 */
    int global_bs;              /**< 0: every rank has the same bs; else at
                                   least (largest bs of the EP group) *
                                   ep_size, the same on every rank */
    int k;                      /**< experts per token, 1..min(16, experts) */
    size_t hidden;              /**< H, elements per token row, >= 1 */
    fccl_dtype_t dtype;         /**< FCCL_FLOAT32, FCCL_BFLOAT16 or
                                   FCCL_FLOAT16 */
    float norm_eps;             /**< RMSNorm epsilon, finite and >= 0 */
    fccl_moe_token_nums_t token_nums_type; /**< see fccl_moe_token_nums_t */
    int expert_buffer;          /**< 1: fccl_moe_new also makes an expert
                                   buffer shared with the EP group's ranks
                                   on this host
                                   (fccl_moe_get_expert_buffer); 0
                                   (default): none */
} fccl_moe_opts_t;

/**
 * Fill opts with the defaults: no groups, 0 experts, bs 0, k 0, hidden 0,
 * bfloat16, eps 1e-6, cumsum.  Fill in the rest before fccl_moe_new().
 *
 * Never blocks, never fails.
 *
 * @param opts the options to fill.
 */
FCCL_API void fccl_moe_opts_init(fccl_moe_opts_t *opts);

/**
 * Create a config.  Collective over opts->ep and then opts->tp: every
 * rank of both calls it.
 *
 * Blocks until they have (the groups' timeout applies).  Checks the
 * options on this rank, then compares them across the EP group (one small
 * all_reduce), so a rank with a different H, K, expert layout, dtype,
 * eps, global_bs or TP-or-not makes every rank fail together.  With TP,
 * each rank then sends its options to its TP partner over the world group
 * (fccl_world(), tag 0x4d4f1000) and one word to every rank of its EP
 * group: partners that disagree (options, or the TP group itself: one
 * passing none, a group of another size, a group pairing a rank with its
 * own EP group) fail at once on every rank that can learn of it.
 * Undetectable, and left to the group timeout (whose message names the
 * silent partner): a whole EP group passing no TP group while the other
 * passes one.  Partners must create their configs in the same order.
 * With opts.expert_buffer, one more all_gather and all_reduce over EP
 * share the buffers.  Allocates the workspaces (about
 * 2 * bs * (k + shared_expert_num) * H elements, plus the TP block).
 *
 * @param opts the options (fccl_moe_opts_init(), then filled in).
 * @param out receives the config, owned by the caller
 *     (fccl_moe_destroy()); NULL on a group error.
 * @return FCCL_OK; FCCL_ERR_INVALID (this rank's options or another
 *     rank's, with a message saying which and why); FCCL_ERR_NOMEM;
 *     FCCL_ERR_TIMEOUT, FCCL_ERR_PEER, FCCL_ERR_ABORTED from the group
 *     (then *out is NULL).
 */
FCCL_API int fccl_moe_new(const fccl_moe_opts_t *opts, fccl_moe_t **out);

/**
 * The expert buffer (opts.expert_buffer = 1): [expand_rows][H] dtype,
 * owned by the config, valid until fccl_moe_destroy().
 *
 * Write the experts' outputs into it (or use it as dispatch's expand_x
 * and run the experts in place) and pass it to a combine as expand_x:
 * when every rank of the EP group does so, there is no TP group and the
 * ranks share a host (memfd mappings, checked by fccl_moe_new() on every
 * rank), the combine reads the other ranks' rows straight out of their
 * buffers instead of receiving copies, so each row crosses memory once,
 * in the weighted sum.  The combine then returns only after every rank
 * has read this rank's rows, so the buffer may be written again as soon
 * as it returns.  Otherwise (another host, FCCL_MOE_SHARED=0, a rank
 * passing another buffer) the buffer is an ordinary one and the combine
 * sends rows as messages.
 *
 * Never blocks.
 *
 * @param buf receives the buffer.
 * @param shared set to 1 when the in-place path is available; may be
 *     NULL.
 * @return FCCL_OK; FCCL_ERR_INVALID if moe or buf is NULL or the config
 *     was made without opts.expert_buffer.
 */
FCCL_API int fccl_moe_get_expert_buffer(fccl_moe_t *moe, void **buf,
                                        int *shared);

/**
 * Free the config and its workspaces (not the groups).
 *
 * Not collective, except that a combine still running is first waited for
 * (fccl_moe_wait()).
 *
 * @param moe the config; NULL is a no-op.
 */
FCCL_API void fccl_moe_destroy(fccl_moe_t *moe);

/** What fccl_moe_get_info() reports: this rank's place and the sizes of
 * the buffers the caller allocates. */
typedef struct fccl_moe_info {
    int ep_rank, ep_size;      /**< this rank in the EP group */
    int tp_rank, tp_size;      /**< 0 and 1 without TP */
    int is_shared_rank;        /**< 1 if this rank holds a shared expert */
    int local_expert_num;      /**< experts on this rank (1 on shared
                                  ranks) */
    int first_expert;          /**< global id of local expert 0 (routed
                                  ranks); the shared expert's index on
                                  shared ranks */
    int routed_local_expert_num; /**< experts per routed-expert rank */
    size_t expand_rows;        /**< capacity A: rows of expand_x (and of
                                  expand_scales) that dispatch may fill */
    size_t assist_len;         /**< int32 elements of assist_info */
    int slots;                 /**< rows per token sent: k + shared
                                  experts */
} fccl_moe_info_t;

/**
 * Sizes the caller needs for its buffers.
 *
 * Never blocks.  Thread-safe.
 *
 * @return FCCL_OK; FCCL_ERR_INVALID if moe or info is NULL.
 */
FCCL_API int fccl_moe_get_info(const fccl_moe_t *moe, fccl_moe_info_t *info);

/** Outputs of dispatch, all allocated by the caller (sizes from
 * fccl_moe_get_info()); dispatch fills them. */
typedef struct fccl_moe_dispatch_out {
    void *expand_x;             /**< [expand_rows][H] dtype: received rows
                                   by local expert, then source EP rank,
                                   then token order; with TP the TP rank 0
                                   block, then the TP rank 1 block */
    float *expand_scales;       /**< [expand_rows]: each row's weight in
                                   the combine (shared-expert rows: s[t],
                                   the sum of the token's active scales) */
    int64_t *expert_token_nums; /**< [local_expert_num], counts or cumsums
                                   over all rows (both TP blocks) */
    int64_t *ep_recv_counts;    /**< [local_expert_num][ep_size]: rows from
                                   each EP rank (own TP block); pass to
                                   combine as ep_send_counts */
    int64_t *tp_recv_counts;    /**< [2] rows of each TP block; NULL without
                                   TP; pass to combine as tp_send_counts */
    int32_t *assist_info;       /**< [assist_len] opaque: where this rank's
                                   rows went; pass to combine */
    size_t rows;                /**< set: rows written to expand_x */
} fccl_moe_dispatch_out_t;

/** The forms of x_active_mask (Ascend's two shapes). */
typedef enum {
    FCCL_MOE_MASK_TOKENS = 0, /**< [bs]: a token on (1) or off (0) */
    FCCL_MOE_MASK_ROUTES = 1, /**< [bs][k]: each route of a token on or
                                 off (newer CANN versions) */
} fccl_moe_mask_t;

/**
 * Send every active token to its experts.  Collective over the EP group
 * (then the TP group).  The [bs] mask form; fccl_moe_dispatch_mask()
 * takes either.
 *
 * Blocks until this rank's rows are in place.  The inputs are only read.
 *
 * @param x [bs][H] dtype, this rank's tokens.
 * @param expert_ids [bs][k] routed expert ids, 0..moe_expert_num-1,
 *     distinct within a token.
 * @param expert_scales [bs][k] float32 weights (only copied to
 *     expand_scales; combine reads them again).
 * @param x_active_mask [bs] 0/1, or NULL: all active (the [bs][k] form:
 *     fccl_moe_dispatch_mask()).
 * @param bs tokens this call, 0..opts.bs (exactly opts.bs when global_bs
 *     is 0).
 * @param out the outputs, allocated by the caller.
 * @return FCCL_OK; FCCL_ERR_INVALID for a bad argument on this or any
 *     other rank of the groups (ids out of range or repeated, bs too
 *     large, NULL buffers, a capacity overflow); errors of the groups
 *     (FCCL_ERR_TIMEOUT, FCCL_ERR_PEER, FCCL_ERR_ABORTED,
 *     FCCL_ERR_PROTOCOL), which stick to them.
 */
FCCL_API int fccl_moe_dispatch(fccl_moe_t *moe, const void *x,
                               const int32_t *expert_ids,
                               const float *expert_scales,
                               const uint8_t *x_active_mask, size_t bs,
                               fccl_moe_dispatch_out_t *out);
/**
 * fccl_moe_dispatch() with the mask in either form: mask_type says how
 * x_active_mask is laid out ([bs] or [bs][k] of 0/1 bytes; NULL: all on).
 * Each rank chooses its own form (only its own tokens are concerned).
 *
 * @return as fccl_moe_dispatch(); FCCL_ERR_INVALID also for an unknown
 *     mask_type or a mask byte other than 0 and 1 (the message names the
 *     entry).
 */
FCCL_API int fccl_moe_dispatch_mask(fccl_moe_t *moe, const void *x,
                                    const int32_t *expert_ids,
                                    const float *expert_scales,
                                    const uint8_t *x_active_mask,
                                    fccl_moe_mask_t mask_type, size_t bs,
                                    fccl_moe_dispatch_out_t *out);

/** Inputs of combine: the experts' outputs in dispatch's layout and the
 * bookkeeping dispatch returned, unchanged. */
typedef struct fccl_moe_combine_in {
    const void *expand_x;          /**< [rows][H] dtype, the experts'
                                      outputs (with TP: this rank's partial
                                      sums of both blocks) */
    const int32_t *assist_info;    /**< from dispatch */
    const int64_t *ep_send_counts; /**< dispatch's ep_recv_counts */
    const int64_t *tp_send_counts; /**< dispatch's tp_recv_counts; NULL
                                      without TP.  This rank's entry must
                                      equal the sum of ep_send_counts; the
                                      partner's block size comes from the
                                      partner itself */
    const float *expert_scales;    /**< [bs][k] the weights */
    const void *shared_expert_x;   /**< [bs][H] dtype added to every active
                                      token, weighted by s[t] (see the
                                      top of this file), or NULL */
    size_t bs;                     /**< as passed to dispatch */
} fccl_moe_combine_in_t;

/**
 * The weighted sum back on the tokens' owners.  Collective over the EP
 * group (after the TP group).
 *
 * Blocks until x is complete.
 *
 * @param in the experts' outputs and dispatch's bookkeeping.
 * @param x [bs][H] dtype, the caller's: receives the result.
 * @return as fccl_moe_dispatch(); FCCL_ERR_INVALID also when the counts do
 *     not add up (a rank's ep_send_counts differ from what the token owner
 *     expects, their sum differs from the TP block, assist_info is not
 *     dispatch's).
 */
FCCL_API int fccl_moe_combine(fccl_moe_t *moe, const fccl_moe_combine_in_t *in,
                              void *x);

/**
 * Combine, residual add and RMSNorm fused (see the top of this file).
 * Same collective rules as fccl_moe_combine().
 *
 * All buffers are the caller's.
 *
 * @param residual_x [bs][H] dtype.
 * @param gamma [H] dtype.
 * @param y_out [bs][H] dtype.
 * @param rstd_out [bs] float32.
 * @param x_out [bs][H] dtype; may be residual_x itself (in place).
 * @return the statuses of fccl_moe_combine().
 */
FCCL_API int fccl_moe_combine_add_rms_norm(fccl_moe_t *moe,
                                           const fccl_moe_combine_in_t *in,
                                           const void *residual_x,
                                           const void *gamma, void *y_out,
                                           float *rstd_out, void *x_out);

/** @name Asynchronous dispatch and combine
 * @{ */

/** A started dispatch or combine (opaque); it belongs to the config. */
typedef struct fccl_moe_request fccl_moe_request_t;

/**
 * Start fccl_moe_dispatch() and return with *req.
 *
 * The argument checks with every rank (the count exchange), the routing,
 * posting the row transfers and copying this rank's rows for itself
 * happen before the return (they block); the transfers finish in
 * fccl_moe_test() / fccl_moe_wait(), and with TP the AllGatherV with the
 * partner runs there too (blocking that call).  out's arrays (and out
 * itself) are complete only when the handle reports done; until then the
 * call borrows out and its buffers.  x, expert_ids, expert_scales and
 * x_active_mask are free again when this returns (their rows and weights
 * are packed or copied by then).  Same config rules, statuses and handle
 * ownership as fccl_moe_combine_start() below.
 *
 * @param req receives the handle (see fccl_moe_combine_start()).
 * @return the statuses of fccl_moe_combine_start().
 */
FCCL_API int fccl_moe_dispatch_start(fccl_moe_t *moe, const void *x,
                                     const int32_t *expert_ids,
                                     const float *expert_scales,
                                     const uint8_t *x_active_mask, size_t bs,
                                     fccl_moe_dispatch_out_t *out,
                                     fccl_moe_request_t **req);
/** fccl_moe_dispatch_start() with the mask in either form (as
 * fccl_moe_dispatch_mask()). */
FCCL_API int fccl_moe_dispatch_mask_start(
    fccl_moe_t *moe, const void *x, const int32_t *expert_ids,
    const float *expert_scales, const uint8_t *x_active_mask,
    fccl_moe_mask_t mask_type, size_t bs, fccl_moe_dispatch_out_t *out,
    fccl_moe_request_t **req);

/**
 * Start fccl_moe_combine() / fccl_moe_combine_add_rms_norm() and return
 * at once with *req.
 *
 * The argument checks with every rank, the TP reduce-scatter and posting
 * the transfers happen before the return (they block); the transfers and
 * the math continue in fccl_moe_test() and fccl_moe_wait().  (When the
 * rows are read in place from the expert buffers, every row is there at
 * the start, so the start also does the math; test and wait then wait for
 * the other ranks to finish reading this rank's rows.)  Until then the
 * call borrows every buffer it was given (the fccl_moe_combine_in_t
 * struct itself is copied); the config runs one operation at a time (a
 * dispatch or combine on it returns FCCL_ERR_STATE until the handle is
 * finished).
 *
 * @param req receives the handle, which belongs to the config: it needs
 *     no freeing and ends with the wait or the test that reports done.
 * @return the statuses of the blocking calls (argument errors come from
 *     the start, with *req NULL); FCCL_ERR_INVALID if req is NULL.
 */
FCCL_API int fccl_moe_combine_start(fccl_moe_t *moe,
                                    const fccl_moe_combine_in_t *in, void *x,
                                    fccl_moe_request_t **req);
FCCL_API int fccl_moe_combine_add_rms_norm_start(
    fccl_moe_t *moe, const fccl_moe_combine_in_t *in, const void *residual_x,
    const void *gamma, void *y_out, float *rstd_out, void *x_out,
    fccl_moe_request_t **req);

/**
 * One non-blocking pass: finishes the tokens whose rows have landed.
 *
 * @param done receives 1 when everything is done (the handle is then
 *     finished).
 * @return once done, the operation's status; FCCL_ERR_INVALID for a NULL
 *     or finished handle.
 */
FCCL_API int fccl_moe_test(fccl_moe_request_t *req, int *done);

/**
 * Block until the combine is done (the group timeout bounds it); the
 * handle is then finished.
 *
 * @return its status; FCCL_ERR_INVALID for a NULL or finished handle.
 */
FCCL_API int fccl_moe_wait(fccl_moe_request_t *req);
/** @} */

/** Where the last call's time went on this rank, in nanoseconds. */
typedef struct fccl_moe_times {
    uint64_t check_ns, comm_ns, math_ns, total_ns;
} fccl_moe_times_t;

/**
 * Where the last call's time went on this rank, in nanoseconds: check =
 * argument checks and the count exchange, comm = waiting for data
 * (including the TP collectives), math = packing, weighted sums, add,
 * norm; total = the whole call.
 *
 * Never blocks.
 *
 * @return FCCL_OK; FCCL_ERR_INVALID if an argument is NULL.
 */
FCCL_API int fccl_moe_last_times(const fccl_moe_t *moe, fccl_moe_times_t *t);

#ifdef __cplusplus
}
#endif
#endif
