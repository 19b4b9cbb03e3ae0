/*
 * Store client, PyTorch's BARRIER (18): one request, then the WAIT-style
 * reply protocol: STOP_WAITING when the counter reaches world_size; on the
 * call's timeout CANCEL_WAIT, then STOP_WAITING (released as the cancel
 * went out) and/or WAIT_CANCELED.
 */
#include "client_int.h"
#include "clock.h"
#include "err.h"

static int bad(struct sc_call *k, uint8_t b)
{
    fccl_err(FCCL_ERR_PROTOCOL, "unexpected reply byte %u", b);
    return sc_fail(k, FCCL_ERR_PROTOCOL);
}

static int cancel(struct sc_call *k, int64_t world_size)
{
    uint64_t dl = fccl_deadline_ms(k->c->timeout_ms);
    k->io_deadline = dl;
    int rc = sc_put_op(k, OP_CANCEL_WAIT);
    if (rc == FCCL_OK)
        rc = sc_flush(k);
    uint8_t b = 0;
    if (rc == FCCL_OK)
        rc = sc_read_u8(k, &b, dl);
    if (rc < 0)
        return rc;
    if (b == REPLY_STOP_WAITING) {
        if ((rc = sc_read_u8(k, &b, dl)) < 0)
            return rc;
        return b == REPLY_WAIT_CANCELED ? FCCL_OK : bad(k, b);
    }
    if (b != REPLY_WAIT_CANCELED)
        return bad(k, b);
    return sc_soft(k, FCCL_ERR_TIMEOUT, "timed out after %.3f s before %lld "
                   "arrivals (this one counted)",
                   (double)(fccl_now_ns() - k->t0) / 1e9,
                   (long long)world_size);
}

int fccl_store_barrier(fccl_store_t *s, const char *key, int64_t world_size,
                       int64_t timeout_ms)
{
    if (!key || world_size < 1)
        return fccl_err(FCCL_ERR_INVALID, "store BARRIER: %s",
                        !key ? "NULL key" : "world_size must be >= 1");
    struct sc_call k;
    int rc = sc_begin(&k, s, "BARRIER", key);
    if (rc < 0)
        return rc;
    uint64_t deadline = sc_call_deadline(&k, timeout_ms);
    if ((rc = sc_put_op(&k, OP_BARRIER)) < 0)
        goto out;
    sc_put_key(&k, key);
    codec_put_i64(&k.c->out, world_size);
    if ((rc = sc_flush(&k)) < 0)
        goto out;
    uint8_t b;
    rc = sc_try_read(&k, &b, 1, deadline);
    if (rc == FCCL_ERR_TIMEOUT)
        rc = cancel(&k, world_size);
    else if (rc == FCCL_OK && b != REPLY_STOP_WAITING)
        rc = bad(&k, b);
out:
    sc_end(&k);
    return rc;
}
