/*
 * Store client: reply-less writes (SET, APPEND, MULTI_SET, QUEUE_PUSH)
 * and the fence whose reply tells their outcome: SYNC, or a PING.
 */
#include <stdlib.h>

#include "client_int.h"
#include "err.h"
#include "log.h"

/* SYNC's reply: u8 status `code` (read), then a message if not OK. */
static int read_sync_reply(struct sc_call *k, uint8_t code)
{
    int rc;
    if (code == SYNC_OK)
        return FCCL_OK;
    void *msg = NULL;
    size_t len = 0;
    if ((rc = sc_read_bytes(k, &msg, &len, k->io_deadline)) < 0)
        return rc;
    int err = code == SYNC_LIMIT    ? FCCL_ERR_LIMIT
              : code == SYNC_NOMEM  ? FCCL_ERR_NOMEM
              : code == SYNC_DENIED ? FCCL_ERR_AUTH
                                    : FCCL_ERR_PROTOCOL;
    rc = sc_soft(k, err, "refused by the server: %.*s",
                 (int)(len > 600 ? 600 : len), (const char *)msg);
    free(msg);
    return rc;
}

/* Learn whether the server has SYNC: a lone SYNC before the first write.
 * A server without it (PyTorch's) closes the connection there, before
 * reading anything behind it; we reconnect and fence with PING instead.
 * c->out is not touched. */
static int probe_sync(struct sc_call *k)
{
    struct store_client_conn *c = k->c;
    uint8_t msg = STORE_EXT_SYNC, code = 0;
    /* The hello's reply is on its way already: a tcpstore-server that
     * acknowledged it has SYNC, no probe needed. */
    int rc = sc_hello_reply(c, k->io_deadline);
    if (rc < 0)
        return sc_fail(k, rc);
    if (c->peer == SC_PEER_FCCL) {
        c->sync = SC_SYNC_YES;
        return FCCL_OK;
    }
    rc = sc_send(c, &msg, 1, k->io_deadline);
    if (rc == FCCL_OK)
        rc = sc_read_raw(c, &code, 1, k->io_deadline);
    if (rc == FCCL_OK) {
        c->sync = SC_SYNC_YES;
        return code == SYNC_OK ? FCCL_OK
                               : sc_read_bytes(k, NULL, NULL, k->io_deadline);
    }
    if (rc != FCCL_ERR_CLOSED)
        return sc_fail(k, rc);
    LOG_DEBUG("STORE", "%s has no SYNC (closed on it): fencing writes with "
              "PING", c->addr);
    c->sync = SC_SYNC_NO;
    struct codec_buf keep = c->out;
    codec_buf_init(&c->out);
    sc_conn_drop(c);
    rc = sc_conn_open(c, k->io_deadline);
    codec_buf_free(&c->out);
    c->out = keep;
    return rc < 0 ? sc_fail(k, rc) : FCCL_OK;
}

/* The fence's reply did not come: the server closed instead. */
static int fence_failed(struct sc_call *k, int rc)
{
    if (rc == FCCL_ERR_CLOSED)
        fccl_err(rc, "the server closed the connection instead of "
                     "confirming the write: it refused it (store full, "
                     "value over its limit, TLS required or not "
                     "authorized; the server's log says which)");
    return sc_fail(k, rc);
}

int sc_flush_write(struct sc_call *k)
{
    struct store_client_conn *c = k->c;
    int rc;
    if (c->dialect == DIALECT_MODERN && c->sync == SC_SYNC_UNKNOWN &&
        (rc = probe_sync(k)) < 0)
        return rc;
    uint32_t nonce = 0;
    if (c->dialect == DIALECT_LEGACY) {
        codec_put_type(&c->out, DIALECT_LEGACY, OP_GETNUMKEYS);
    } else if (c->sync == SC_SYNC_YES) {
        codec_put_u8(&c->out, STORE_EXT_SYNC);
    } else {
        nonce = c->nonce++;
        codec_put_type(&c->out, DIALECT_MODERN, OP_PING);
        codec_put_u32(&c->out, nonce);
    }
    if ((rc = sc_flush(k)) < 0)
        return rc;
    if (c->dialect == DIALECT_MODERN && c->sync == SC_SYNC_YES) {
        uint8_t code;
        rc = sc_read_raw(c, &code, 1, k->io_deadline);
        if (rc < 0)
            return fence_failed(k, rc);
        return read_sync_reply(k, code);
    }
    uint8_t b[8];
    size_t n = c->dialect == DIALECT_LEGACY ? 8 : 4;
    if ((rc = sc_read_raw(c, b, n, k->io_deadline)) < 0)
        return fence_failed(k, rc);
    if (n == 4 && codec_get_u32(b) != nonce) {
        fccl_err(FCCL_ERR_PROTOCOL, "PING after a write echoed %u, sent %u",
                 codec_get_u32(b), nonce);
        return sc_fail(k, FCCL_ERR_PROTOCOL);
    }
    return FCCL_OK;
}
