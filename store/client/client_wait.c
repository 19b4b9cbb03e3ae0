/*
 * Store client, the WAIT protocol: WAIT and PyTorch's BARRIER get their
 * STOP_WAITING whenever the keys (or the arrivals) are there; the server
 * has no timeout for them, the client enforces its own.  When the deadline
 * passes on the modern dialect the client sends CANCEL_WAIT and reads
 * until the server's WAIT_CANCELED, so the connection is clean for the
 * next call:
 *   cancelled:  WAIT_CANCELED
 *   raced:      STOP_WAITING, WAIT_CANCELED
 * A race means the wait did complete, and the call succeeds.
 *
 * Nothing is ever sent behind a pending WAIT: a server with PyTorch's
 * semantics (tcpstore-server included) answers such a request at once,
 * before the STOP_WAITING, so a GET pipelined behind a WAIT would read an
 * empty value for a key that is still missing, indistinguishable on the
 * wire from a real one.  (client_ops.c gets a key with CHECK+GET instead,
 * then WAIT and GET when it is missing.)
 *
 * The legacy dialect has no CANCEL_WAIT: the connection is closed and the
 * next call reconnects, so no stale STOP_WAITING is ever read as a later
 * reply.
 */
#include <stdio.h>
#include <string.h>

#include "client_int.h"
#include "clock.h"
#include "err.h"
#include "log.h"

/* Keys checked one by one to name the missing ones in a timeout message. */
#define MISSING_CHECK_MAX 16

int sc_bad_byte(struct sc_call *k, const char *what, uint8_t b)
{
    fccl_err(FCCL_ERR_PROTOCOL, "unexpected byte %u %s", b, what);
    return sc_fail(k, FCCL_ERR_PROTOCOL);
}

double sc_elapsed_s(const struct sc_call *k)
{
    return (double)(fccl_now_ns() - k->t0) / 1e9;
}

int sc_cancel_wait(struct sc_call *k, uint64_t dl)
{
    k->io_deadline = dl;
    int rc = sc_put_op(k, OP_CANCEL_WAIT);
    if (rc == FCCL_OK)
        rc = sc_flush(k);
    uint8_t b = 0;
    if (rc == FCCL_OK)
        rc = sc_read_u8(k, &b, dl);
    if (rc < 0)
        return rc;
    if (b == REPLY_WAIT_CANCELED)
        return 0;
    if (b != REPLY_STOP_WAITING)
        return sc_bad_byte(k, "in reply to CANCEL_WAIT", b);
    /* It completed while the cancel was on its way. */
    if ((rc = sc_read_u8(k, &b, dl)) < 0)
        return rc;
    if (b != REPLY_WAIT_CANCELED)
        return sc_bad_byte(k, "where WAIT_CANCELED was due", b);
    return 1;
}

/* After a cancel: one CHECK per key (pipelined, one round trip) to name
 * the keys that are still missing. */
static int name_missing(struct sc_call *k, const char *const *keys,
                        size_t n, uint64_t dl, char *out, size_t outlen)
{
    size_t m = n < MISSING_CHECK_MAX ? n : MISSING_CHECK_MAX;
    for (size_t i = 0; i < m; i++) {
        int rc = sc_put_op(k, OP_CHECK);
        if (rc < 0)
            return rc;
        sc_put_keys(k, &keys[i], 1);
    }
    int rc = sc_flush(k);
    if (rc < 0)
        return rc;
    const char *miss[MISSING_CHECK_MAX];
    size_t nmiss = 0;
    for (size_t i = 0; i < m; i++) {
        uint8_t b;
        rc = sc_read_u8(k, &b, dl);
        if (rc < 0)
            return rc;
        if (b != REPLY_READY && b != REPLY_NOT_READY)
            return sc_bad_byte(k, "in a CHECK reply", b);
        if (b == REPLY_NOT_READY)
            miss[nmiss++] = keys[i];
    }
    if (nmiss == 0 && m == n) {
        snprintf(out, outlen, "none (they appeared just after the deadline)");
        return FCCL_OK;
    }
    sc_describe_keys(k, miss, nmiss, out, outlen);
    if (m < n) {
        size_t l = strlen(out);
        snprintf(out + l, outlen - l, "%s(%zu more keys not checked)",
                 nmiss ? " " : "", n - m);
    }
    return FCCL_OK;
}

/* Once the call's own deadline has passed, the cancel gets at most
 * SC_DRAIN_MS, and at least a second. */
static uint64_t drain_deadline(const struct sc_call *k)
{
    int64_t ms = k->c->timeout_ms < SC_DRAIN_MS ? k->c->timeout_ms
                                                : SC_DRAIN_MS;
    return fccl_deadline_ms(ms < 1000 ? 1000 : ms);
}

static int cancel_wait(struct sc_call *k, const char *const *keys,
                       size_t n)
{
    uint64_t dl = drain_deadline(k);
    int rc = sc_cancel_wait(k, dl);
    if (rc < 0)
        return rc;
    if (rc == 1) {
        LOG_DEBUG("STORE", "%s %s: wait completed as it was cancelled",
                  k->op, k->what);
        return FCCL_OK;
    }
    char missing[256];
    rc = name_missing(k, keys, n, dl, missing, sizeof(missing));
    if (rc < 0)
        return rc;
    return sc_soft(k, FCCL_ERR_TIMEOUT,
                   "timed out after %.3f s; still missing: %s",
                   sc_elapsed_s(k), missing);
}

int sc_wait_reply(struct sc_call *k, const char *const *keys, size_t n,
                  uint64_t deadline)
{
    uint8_t b;
    int rc = sc_try_read(k, &b, 1, deadline);
    if (rc == FCCL_OK) {
        if (b != REPLY_STOP_WAITING)
            return sc_bad_byte(k, "in reply to WAIT", b);
        /* The wait may have used the whole deadline: what follows gets a
         * fresh one. */
        k->io_deadline = fccl_deadline_ms(k->c->timeout_ms);
        return FCCL_OK;
    }
    if (rc != FCCL_ERR_TIMEOUT)
        return rc;
    if (k->c->dialect == DIALECT_MODERN)
        return cancel_wait(k, keys, n);
    char ks[200];
    sc_describe_keys(k, keys, n, ks, sizeof(ks));
    fccl_err(FCCL_ERR_TIMEOUT,
             "timed out after %.3f s waiting for %s (the legacy dialect "
             "cannot cancel a wait: reconnecting on the next call)",
             sc_elapsed_s(k), ks);
    return sc_fail(k, FCCL_ERR_TIMEOUT);
}
