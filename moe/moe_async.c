/*
 * MoE dispatch and combine, asynchronous: start the operation (argument
 * checks with every rank, routing, the TP reduce-scatter, posting the
 * transfers: these block), get a handle, and finish it with fccl_moe_wait,
 * or drive it with fccl_moe_test while doing other work (a shared expert,
 * the next layer's attention); each combine test finishes the tokens whose
 * rows have landed.  The handle lives in the config: one operation in
 * flight per config.
 */
#include "err.h"
#include "moe_int.h"

static int started(struct fccl_moe *m, int rc, fccl_moe_request_t **req)
{
    if (rc < 0)
        return rc;
    m->req.m = m;
    *req = &m->req;
    return FCCL_OK;
}

int fccl_moe_dispatch_mask_start(fccl_moe_t *m, const void *x,
                                 const int32_t *expert_ids,
                                 const float *expert_scales,
                                 const uint8_t *x_active_mask,
                                 fccl_moe_mask_t mask_type, size_t bs,
                                 fccl_moe_dispatch_out_t *out,
                                 fccl_moe_request_t **req)
{
    if (!req)
        return fccl_err(FCCL_ERR_INVALID, "moe_dispatch_start: req is NULL");
    *req = NULL;
    return started(m, moe_dispatch_begin(m, x, expert_ids, expert_scales,
                                         x_active_mask, mask_type, bs, out),
                   req);
}

int fccl_moe_dispatch_start(fccl_moe_t *m, const void *x,
                            const int32_t *expert_ids,
                            const float *expert_scales,
                            const uint8_t *x_active_mask, size_t bs,
                            fccl_moe_dispatch_out_t *out,
                            fccl_moe_request_t **req)
{
    return fccl_moe_dispatch_mask_start(m, x, expert_ids, expert_scales,
                                        x_active_mask, FCCL_MOE_MASK_TOKENS,
                                        bs, out, req);
}

int fccl_moe_combine_start(fccl_moe_t *m, const fccl_moe_combine_in_t *in,
                           void *x, fccl_moe_request_t **req)
{
    if (!req)
        return fccl_err(FCCL_ERR_INVALID, "moe_combine_start: req is NULL");
    *req = NULL;
    int rc = moe_combine_fill(m, in, "moe_combine_start");
    if (rc < 0)
        return rc;
    m->op.f.x = x;
    return started(m, moe_combine_begin(m), req);
}

int fccl_moe_combine_add_rms_norm_start(fccl_moe_t *m,
                                        const fccl_moe_combine_in_t *in,
                                        const void *residual_x,
                                        const void *gamma, void *y_out,
                                        float *rstd_out, void *x_out,
                                        fccl_moe_request_t **req)
{
    if (!req)
        return fccl_err(FCCL_ERR_INVALID, "moe_combine_add_rms_norm_start: "
                        "req is NULL");
    *req = NULL;
    int rc = moe_combine_fill(m, in, "moe_combine_add_rms_norm_start");
    if (rc < 0)
        return rc;
    moe_set_fused(m, residual_x, gamma, y_out, rstd_out, x_out);
    return started(m, moe_combine_begin(m), req);
}

int fccl_moe_test(fccl_moe_request_t *req, int *done)
{
    if (!req || !req->m || !done)
        return fccl_err(FCCL_ERR_INVALID, "moe_test: req or done is NULL");
    int rc = moe_poll(req->m, 0);
    *done = rc != 0;
    if (*done)
        req->m = NULL;
    return rc < 0 ? rc : FCCL_OK;
}

int fccl_moe_wait(fccl_moe_request_t *req)
{
    if (!req || !req->m)
        return fccl_err(FCCL_ERR_INVALID, "moe_wait: req is NULL or "
                        "already finished");
    int rc = moe_poll(req->m, 1);
    req->m = NULL;
    return rc < 0 ? rc : FCCL_OK;
}
