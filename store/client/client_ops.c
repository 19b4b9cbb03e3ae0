/*
 * Store client: the single-key operations of store.h.  Each
 * operation encodes its request(s) into the connection's buffer, sends
 * them with one send, and reads the reply under the connection's mutex
 * (client_call.c); WAITs follow the protocol of client_wait.c.
 */
#include "client_int.h"
#include "clock.h"
#include "err.h"

/* ---- operations ---- */

static int null_key(const char *op, const char *key)
{
    return fccl_err(FCCL_ERR_INVALID, "store %s: %s", op,
                    key ? "bad argument" : "NULL key");
}

int sc_key_value(fccl_store_t *s, enum store_op op, const char *name,
                 const char *key, const void *val, size_t len)
{
    struct sc_call k;
    int rc = sc_begin(&k, s, name, key);
    if (rc < 0)
        return rc;
    if ((rc = sc_put_op(&k, op)) == FCCL_OK) {
        sc_put_key(&k, key);
        codec_put_str(&k.c->out, val, len);
        rc = sc_flush_write(&k);
    }
    sc_end(&k);
    return rc;
}

static int set_once(fccl_store_t *s, const char *key, const void *val,
                   size_t len)
{
    if (!key || (!val && len))
        return null_key("SET", key);
    return sc_key_value(s, OP_SET, "SET", key, val, len);
}

/* Repeatable (sc_retry); the loop is written out: C has no closures. */
int tcp_store_set(fccl_store_t *s, const char *key, const void *val,
                  size_t len)
{
    uint64_t dl = sc_retry_deadline(s, -1);
    int rc, tries = 0;
    do
        rc = set_once(s, key, val, len);
    while (sc_retry(s, rc, dl, &tries));
    return rc;
}

static int put_wait(struct sc_call *k, const char *const *keys, size_t n)
{
    int rc = sc_put_op(k, OP_WAIT);
    if (rc == FCCL_OK)
        sc_put_keys(k, keys, n);
    return rc;
}

static int put_get(struct sc_call *k, const char *key)
{
    int rc = sc_put_op(k, OP_GET);
    if (rc == FCCL_OK)
        sc_put_key(k, key);
    return rc;
}

/* CHECK and GET in one send, so a key that exists (the common case) costs
 * one round trip.  The GET's reply is only meaningful when the CHECK said
 * READY (a missing key reads as an empty value); only where
 * sc_fetch_pipelined says so: PyTorch's servers close the connection on a
 * GET of a missing key. */
static int get_if_present(struct sc_call *k, const char *key, void **val,
                          size_t *len, int *ready)
{
    const char *keys[1] = {key};
    int rc = sc_put_op(k, OP_CHECK);
    if (rc < 0)
        return rc;
    sc_put_keys(k, keys, 1);
    if ((rc = put_get(k, key)) < 0 || (rc = sc_flush(k)) < 0 ||
        (rc = sc_read_ready(k, ready)) < 0)
        return rc;
    return sc_read_bytes(k, *ready ? val : NULL, len, k->io_deadline);
}

static int get_once(fccl_store_t *s, const char *key, void **val, size_t *len,
                   int64_t timeout_ms)
{
    if (!key || !val)
        return null_key("GET", key);
    *val = NULL;
    if (len)
        *len = 0;
    struct sc_call k;
    int rc = sc_begin(&k, s, "GET", key);
    if (rc < 0)
        return rc;
    uint64_t dl = sc_call_deadline(&k, timeout_ms);
    const char *keys[1] = {key};
    int ready = 0, piped;
    CHECK_GOTO(piped = sc_fetch_pipelined(&k), rc, out);
    if (piped) {
        CHECK_GOTO(get_if_present(&k, key, val, len, &ready), rc, out);
        if (ready)
            goto out;
    }
    /* As PyTorch does: WAIT, then GET once the key exists. */
    CHECK_GOTO(put_wait(&k, keys, 1), rc, out);
    CHECK_GOTO(sc_flush(&k), rc, out);
    CHECK_GOTO(sc_wait_reply(&k, keys, 1, dl), rc, out);
    CHECK_GOTO(put_get(&k, key), rc, out);
    CHECK_GOTO(sc_flush(&k), rc, out);
    rc = sc_read_bytes(&k, val, len, k.io_deadline);
out:
    sc_end(&k);
    return rc;
}

/* Repeatable (sc_retry); the loop is written out: C has no closures. */
int tcp_store_get(fccl_store_t *s, const char *key, void **val, size_t *len,
                  int64_t timeout_ms)
{
    uint64_t dl = sc_retry_deadline(s, timeout_ms);
    int rc, tries = 0;
    do
        rc = get_once(s, key, val, len,
                      sc_retry_timeout(timeout_ms, dl, tries));
    while (sc_retry(s, rc, dl, &tries));
    return rc;
}

int tcp_store_add(fccl_store_t *s, const char *key, int64_t delta,
                  int64_t *out)
{
    if (!key)
        return null_key("ADD", key);
    struct sc_call k;
    int rc = sc_begin(&k, s, "ADD", key);
    if (rc < 0)
        return rc;
    int64_t v = 0;
    CHECK_GOTO(sc_put_op(&k, OP_ADD), rc, done);
    sc_put_key(&k, key);
    codec_put_i64(&k.c->out, delta);
    CHECK_GOTO(sc_flush(&k), rc, done);
    CHECK_GOTO(sc_read_i64(&k, &v, k.io_deadline), rc, done);
    if (out)
        *out = v;
done:
    sc_end(&k);
    return rc;
}

int tcp_store_compare_set(fccl_store_t *s, const char *key,
                          const void *expected, size_t elen,
                          const void *desired, size_t dlen, void **cur,
                          size_t *curlen)
{
    if (!key || (!expected && elen) || (!desired && dlen))
        return null_key("COMPARE_SET", key);
    if (cur)
        *cur = NULL;
    if (curlen)
        *curlen = 0;
    struct sc_call k;
    int rc = sc_begin(&k, s, "COMPARE_SET", key);
    if (rc < 0)
        return rc;
    CHECK_GOTO(sc_put_op(&k, OP_COMPARE_SET), rc, done);
    sc_put_key(&k, key);
    codec_put_str(&k.c->out, expected, elen);
    codec_put_str(&k.c->out, desired, dlen);
    CHECK_GOTO(sc_flush(&k), rc, done);
    rc = sc_read_bytes(&k, cur, curlen, k.io_deadline);
done:
    sc_end(&k);
    return rc;
}

static int check_once(fccl_store_t *s, const char *const *keys, size_t n,
                     int *all_present)
{
    int rc;
    if (!all_present)
        return fccl_err(FCCL_ERR_INVALID, "store CHECK: NULL result");
    *all_present = 0;
    if (n == 0 && s) {
        *all_present = 1;
        return FCCL_OK;
    }
    struct sc_call k;
    if ((rc = sc_begin_keys(&k, s, "CHECK", keys, n)) < 0)
        return rc;
    CHECK_GOTO(sc_put_op(&k, OP_CHECK), rc, done);
    sc_put_keys(&k, keys, n);
    CHECK_GOTO(sc_flush(&k), rc, done);
    rc = sc_read_ready(&k, all_present);
done:
    sc_end(&k);
    return rc;
}

/* Repeatable (sc_retry); the loop is written out: C has no closures. */
int tcp_store_check(fccl_store_t *s, const char *const *keys, size_t n,
                    int *all_present)
{
    uint64_t dl = sc_retry_deadline(s, -1);
    int rc, tries = 0;
    do
        rc = check_once(s, keys, n, all_present);
    while (sc_retry(s, rc, dl, &tries));
    return rc;
}

static int wait_once(fccl_store_t *s, const char *const *keys, size_t n,
                    int64_t timeout_ms)
{
    int rc;
    if (n == 0 && s)
        return FCCL_OK;
    struct sc_call k;
    if ((rc = sc_begin_keys(&k, s, "WAIT", keys, n)) < 0)
        return rc;
    uint64_t dl = sc_call_deadline(&k, timeout_ms);
    CHECK_GOTO(put_wait(&k, keys, n), rc, done);
    CHECK_GOTO(sc_flush(&k), rc, done);
    rc = sc_wait_reply(&k, keys, n, dl);
done:
    sc_end(&k);
    return rc;
}

/* Repeatable (sc_retry); the loop is written out: C has no closures. */
int tcp_store_wait(fccl_store_t *s, const char *const *keys, size_t n,
                   int64_t timeout_ms)
{
    uint64_t dl = sc_retry_deadline(s, timeout_ms);
    int rc, tries = 0;
    do
        rc = wait_once(s, keys, n, sc_retry_timeout(timeout_ms, dl, tries));
    while (sc_retry(s, rc, dl, &tries));
    return rc;
}

static int key_i64_once(fccl_store_t *s, enum store_op op, const char *name,
               const char *key, int64_t *out)
{
    if (!key)
        return null_key(name, key);
    struct sc_call k;
    int rc = sc_begin(&k, s, name, key);
    if (rc < 0)
        return rc;
    int64_t v = 0;
    CHECK_GOTO(sc_put_op(&k, op), rc, done);
    sc_put_key(&k, key);
    CHECK_GOTO(sc_flush(&k), rc, done);
    CHECK_GOTO(sc_read_i64(&k, &v, k.io_deadline), rc, done);
    *out = v;
done:
    sc_end(&k);
    return rc;
}

/* Repeatable (sc_retry); the loop is written out: C has no closures. */
int sc_key_i64(fccl_store_t *s, enum store_op op, const char *name,
               const char *key, int64_t *out)
{
    uint64_t dl = sc_retry_deadline(s, -1);
    int rc, tries = 0;
    do
        rc = key_i64_once(s, op, name, key, out);
    while (sc_retry(s, rc, dl, &tries));
    return rc;
}

int tcp_store_delete(fccl_store_t *s, const char *key, int *deleted)
{
    int64_t v = 0;
    int rc = sc_key_i64(s, OP_DELETE_KEY, "DELETE_KEY", key, &v);
    if (rc >= 0 && deleted)
        *deleted = v > 0;
    return rc;
}

static int num_keys_once(fccl_store_t *s, int64_t *n)
{
    struct sc_call k;
    int rc = sc_begin(&k, s, "GETNUMKEYS", NULL);
    if (rc < 0)
        return rc;
    int64_t v = 0;
    CHECK_GOTO(sc_put_op(&k, OP_GETNUMKEYS), rc, done);
    CHECK_GOTO(sc_flush(&k), rc, done);
    CHECK_GOTO(sc_read_i64(&k, &v, k.io_deadline), rc, done);
    if (n)
        *n = v;
done:
    sc_end(&k);
    return rc;
}

/* Repeatable (sc_retry); the loop is written out: C has no closures. */
int tcp_store_num_keys(fccl_store_t *s, int64_t *n)
{
    uint64_t dl = sc_retry_deadline(s, -1);
    int rc, tries = 0;
    do
        rc = num_keys_once(s, n);
    while (sc_retry(s, rc, dl, &tries));
    return rc;
}

int tcp_store_append(fccl_store_t *s, const char *key, const void *val,
                     size_t len)
{
    if (!key || (!val && len))
        return null_key("APPEND", key);
    return sc_key_value(s, OP_APPEND, "APPEND", key, val, len);
}

static int ping_once(fccl_store_t *s, double *rtt_us)
{
    struct sc_call k;
    int rc = sc_begin(&k, s, "PING", NULL);
    if (rc < 0)
        return rc;
    uint32_t nonce = k.c->nonce++;
    uint8_t echo[4];
    uint64_t t0 = fccl_now_ns();
    CHECK_GOTO(sc_put_op(&k, OP_PING), rc, done);
    codec_put_u32(&k.c->out, nonce);
    CHECK_GOTO(sc_flush(&k), rc, done);
    CHECK_GOTO(sc_read(&k, echo, 4, k.io_deadline), rc, done);
    if (codec_get_u32(echo) != nonce) {
        fccl_err(FCCL_ERR_PROTOCOL, "PING echoed %u, sent %u",
                 codec_get_u32(echo), nonce);
        rc = sc_fail(&k, FCCL_ERR_PROTOCOL);
        goto done;
    }
    if (rtt_us)
        *rtt_us = (double)(fccl_now_ns() - t0) / 1e3;
done:
    sc_end(&k);
    return rc;
}

/* Repeatable (sc_retry); the loop is written out: C has no closures. */
int tcp_store_ping(fccl_store_t *s, double *rtt_us)
{
    uint64_t dl = sc_retry_deadline(s, -1);
    int rc, tries = 0;
    do
        rc = ping_once(s, rtt_us);
    while (sc_retry(s, rc, dl, &tries));
    return rc;
}
