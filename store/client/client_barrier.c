/*
 * Store client, PyTorch's BARRIER (18): one request, then the reply
 * protocol of a WAIT (client_wait.c): STOP_WAITING when the counter reaches
 * world_size; on the call's timeout CANCEL_WAIT.
 */
#include "client_int.h"
#include "clock.h"
#include "err.h"

static int cancel(struct sc_call *k, int64_t world_size)
{
    int rc = sc_cancel_wait(k, fccl_deadline_ms(k->c->timeout_ms));
    if (rc < 0)
        return rc;
    if (rc == 1)
        return FCCL_OK; /* released as the cancel went out */
    return sc_soft(k, FCCL_ERR_TIMEOUT, "timed out after %.3f s before %lld "
                   "arrivals (this one counted)", sc_elapsed_s(k),
                   (long long)world_size);
}

int tcp_store_barrier(fccl_store_t *s, const char *key, int64_t world_size,
                      int64_t timeout_ms)
{
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
        rc = sc_bad_byte(&k, "in reply to BARRIER", b);
out:
    sc_end(&k);
    return rc;
}
