/*
 * Store client: one call on a connection (struct sc_call): locking and
 * (re)connecting, the sticky failure and its hints, retries after a
 * dropped connection, request encoding, and reading replies.  The WAIT
 * protocol is in client_wait.c, the fence after writes in client_sync.c,
 * the operations in client_ops.c and client_multi.c.
 */
#include <errno.h>
#include <poll.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <time.h>

#include "client_int.h"
#include "clock.h"
#include "err.h"
#include "log.h"

/* ---- calls ---- */

uint64_t sc_call_deadline(const struct sc_call *k, int64_t timeout_ms)
{
    return fccl_deadline_ms(timeout_ms < 0 ? k->c->timeout_ms : timeout_ms);
}

static void quote_key(char *out, size_t outlen, const fccl_store_t *s,
                      const char *key)
{
    snprintf(out, outlen, "'%.*s%.100s'", (int)(s->kprelen > 60 ? 60 : s->kprelen),
             s->kpre, key);
}

void sc_describe_keys(const struct sc_call *k, const char *const *keys,
                      size_t n, char *out, size_t outlen)
{
    size_t used = 0, i;
    out[0] = '\0';
    for (i = 0; i < n && i < 3; i++) {
        char q[180];
        quote_key(q, sizeof(q), k->s, keys[i] ? keys[i] : "(null)");
        int w = snprintf(out + used, outlen - used, "%s%s", i ? ", " : "", q);
        if (w < 0 || (size_t)w >= outlen - used)
            return;
        used += (size_t)w;
    }
    if (i < n)
        snprintf(out + used, outlen - used, " and %zu more", n - i);
}

/* Between calls nothing is owed to us: a readable socket means the server
 * closed it (EOF or reset), found before a request is sent into it. */
static int peer_gone(const struct store_client_conn *c)
{
    if (c->rlen > c->rpos)
        return 0;
    struct pollfd p = {.fd = c->fd, .events = POLLIN};
    if (poll(&p, 1, 0) <= 0)
        return 0;
    if (p.revents & (POLLHUP | POLLERR))
        return 1;
    char b;
    ssize_t r = recv(c->fd, &b, 1, MSG_PEEK | MSG_DONTWAIT);
    return r == 0 || (r < 0 && errno != EAGAIN && errno != EWOULDBLOCK &&
                      errno != EINTR);
}

uint64_t sc_retry_deadline(const fccl_store_t *s, int64_t timeout_ms)
{
    int64_t ms = timeout_ms < 0 && s ? s->c->timeout_ms : timeout_ms;
    return fccl_deadline_ms(ms < 0 ? 0 : ms);
}

int64_t sc_retry_timeout(int64_t timeout_ms, uint64_t dl, int tries)
{
    if (tries == 0)
        return timeout_ms;
    int64_t left = fccl_ms_left(dl);
    return left > 0 ? left : 1;
}

int sc_retry(const fccl_store_t *s, int rc, uint64_t dl, int *tries)
{
    if (!s || !s->c->reconnect ||
        (rc != FCCL_ERR_CLOSED && rc != FCCL_ERR_IO) || fccl_ms_left(dl) <= 0)
        return 0;
    /* A restart costs one retry (the connect backs off while the server is
     * down); a server that keeps closing on this very request (over a size
     * limit, at its connection limit) must not be asked until the timeout. */
    if (*tries >= SC_RETRY_MAX)
        return 0;
    /* A server that accepts and closes at once must not make us spin. */
    if (*tries > 0) {
        struct timespec ts = {0, 20 * 1000000L};
        nanosleep(&ts, NULL);
    }
    (*tries)++;
    LOG_INFO("STORE", "store %s: connection lost (%s); reconnecting and "
                      "repeating (attempt %d)",
             s->c->addr, fccl_last_error(), *tries + 1);
    return 1;
}

static int call_lock(struct sc_call *k)
{
    struct store_client_conn *c = k->c;
    pthread_mutex_lock(&c->mu);
    if (c->broken) {
        int rc = fccl_err(c->broken, "store %s: %s%s%s: connection unusable "
                                     "after an earlier error (%s)",
                          c->addr, k->op, k->what[0] ? " " : "", k->what,
                          c->broken_msg);
        pthread_mutex_unlock(&c->mu);
        return rc;
    }
    k->io_deadline = fccl_deadline_ms(c->timeout_ms);
    if (c->fd >= 0 && c->reconnect && peer_gone(c)) {
        LOG_INFO("STORE", "store %s: connection closed by the server; "
                          "reconnecting", c->addr);
        sc_conn_drop(c);
    }
    if (c->fd >= 0)
        return FCCL_OK;
    int rc = sc_conn_open(c, k->io_deadline);
    if (rc < 0) {
        rc = sc_fail(k, rc);
        pthread_mutex_unlock(&c->mu);
    }
    return rc;
}

static int call_init(struct sc_call *k, fccl_store_t *s, const char *op)
{
    memset(k, 0, sizeof(*k));
    k->op = op;
    k->t0 = fccl_now_ns();
    if (!s)
        return fccl_err(FCCL_ERR_INVALID, "store %s: NULL handle", op);
    k->s = s;
    k->c = s->c;
    return FCCL_OK;
}

int sc_begin(struct sc_call *k, fccl_store_t *s, const char *op,
             const char *key)
{
    int rc = call_init(k, s, op);
    if (rc < 0)
        return rc;
    if (key)
        quote_key(k->what, sizeof(k->what), s, key);
    return call_lock(k);
}

int sc_begin_keys(struct sc_call *k, fccl_store_t *s, const char *op,
                  const char *const *keys, size_t n)
{
    int rc = call_init(k, s, op);
    if (rc < 0)
        return rc;
    sc_describe_keys(k, keys, n, k->what, sizeof(k->what));
    return call_lock(k);
}

void sc_end(struct sc_call *k)
{
    codec_buf_reset(&k->c->out);
    k->c->out.oom = 0;
    pthread_mutex_unlock(&k->c->mu);
}

/* The likely cause of a closed or silent connection, from what the
 * client knows: whether this connection or an earlier one was answered,
 * whether the server said it is tcpstore-server (the hello), the dialect
 * and TLS.  tcpstore-server tells an fccl client why it refuses a
 * connection, so a close without a reason before any reply points away
 * from it; only then is a PyTorch <= 2.0 server the likely cause (it
 * reads VALIDATE as the start of a SET with a huge key: it never answers,
 * or resets). */
#define NEEDS_TOKEN_MSG                                                        \
    "tcpstore-server requires a token (--auth-required; its hello said "   \
    "so) for anything but PING: give the client the token file "           \
    "(--token-file, TCPSTORE_TOKEN_FILE)"

static const char *hint(const struct store_client_conn *c, int rc)
{
    if (rc != FCCL_ERR_CLOSED && rc != FCCL_ERR_TIMEOUT)
        return NULL;
    if (c->needs_token && rc == FCCL_ERR_CLOSED)
        return NEEDS_TOKEN_MSG;
    if (c->answered)
        return rc == FCCL_ERR_CLOSED && c->peer == SC_PEER_FCCL
                   ? "tcpstore-server closed the connection: it was "
                     "stopped, or it refused this request (a size or "
                     "store limit, a right the token lacks); its log says "
                     "which"
                   : NULL;
    if (c->ever_answered)
        return rc == FCCL_ERR_CLOSED
                   ? "the server closed the connection before any reply, "
                     "though it answered before: it was restarted or "
                     "stopped, or it refuses us now (its log says why)"
                   : "no reply on this connection, though the server "
                     "answered before (stopped? overloaded?)";
    if (c->dialect == DIALECT_LEGACY)
        return rc == FCCL_ERR_CLOSED
                   ? "the server closed the connection before any reply: "
                     "tcpstore-server does so on the legacy dialect, "
                     "without saying why, when it requires TLS or a token, "
                     "is at a connection limit or a request is over a "
                     "limit (its log says which)"
                   : NULL;
    if (c->ssl)
        return rc == FCCL_ERR_CLOSED
                   ? "the server closed the TLS connection before any "
                     "reply (its log says why)"
                   : "no reply inside the TLS connection";
    return rc == FCCL_ERR_TIMEOUT
               ? "no reply to VALIDATE and the hello that followed it: a "
                 "PyTorch <= 2.0 server never answers the modern dialect "
                 "(use the legacy dialect: --dialect legacy)"
               : "the server closed the connection before any reply and "
                 "without a reason, which tcpstore-server would have "
                 "given: a PyTorch <= 2.0 server does so on the modern "
                 "dialect (use the legacy dialect: --dialect legacy)";
}

static void hint_first_reply(const struct store_client_conn *c, int rc)
{
    const char *why = c->fd >= 0 ? hint(c, rc) : NULL;
    if (!why)
        return;
    char msg[600];
    snprintf(msg, sizeof(msg), "%s", fccl_last_error());
    fccl_err(rc, "%s (%s)", msg, why);
}

int sc_fail(struct sc_call *k, int rc)
{
    struct store_client_conn *c = k->c;
    hint_first_reply(c, rc);
    if (rc == FCCL_ERR_CLOSED && c->needs_token)
        rc = FCCL_ERR_AUTH; /* the hello said why */
    fccl_err_wrap(rc, "store %s: %s%s%s", c->addr, k->op,
                  k->what[0] ? " " : "", k->what);
    int transient = c->reconnect && (rc == FCCL_ERR_CLOSED ||
                                     rc == FCCL_ERR_IO ||
                                     rc == FCCL_ERR_CONNECT);
    if (rc != FCCL_ERR_TIMEOUT && !transient) {
        c->broken = rc;
        snprintf(c->broken_msg, sizeof(c->broken_msg), "%s",
                 fccl_last_error());
        LOG_WARN("STORE", "%s", fccl_last_error());
    }
    /* Replies may still be in flight after a timeout: the next call starts
     * on a fresh connection rather than read them as its own. */
    sc_conn_drop(c);
    return rc;
}

int sc_soft(struct sc_call *k, int rc, const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    fccl_verr(rc, fmt, ap);
    va_end(ap);
    return fccl_err_wrap(rc, "store %s: %s%s%s", k->c->addr, k->op,
                         k->what[0] ? " " : "", k->what);
}

/* ---- encoding ---- */

/* What this client speaks on the legacy dialect: PyTorch 1.13's set. */
static int legacy_has(enum store_op op)
{
    switch (op) {
    case OP_SET: case OP_COMPARE_SET: case OP_GET: case OP_ADD:
    case OP_CHECK: case OP_WAIT: case OP_GETNUMKEYS: case OP_DELETE_KEY:
        return 1;
    default:
        return 0;
    }
}

/* What a read-only token does not allow and the server could only
 * answer by closing the connection: refused here, like SYNC reports a
 * refused SET (the connection stays usable). */
static int needs_write_right(enum store_op op)
{
    switch (op) {
    case OP_COMPARE_SET: case OP_ADD: case OP_DELETE_KEY:
    case OP_QUEUE_POP: case OP_BARRIER:
        return 1;
    default:
        return 0;
    }
}

int sc_put_op(struct sc_call *k, enum store_op op)
{
    struct store_client_conn *c = k->c;
    if (c->needs_token && op != OP_PING)
        return sc_soft(k, FCCL_ERR_AUTH, "refused: %s", NEEDS_TOKEN_MSG);
    if (c->read_only && needs_write_right(op))
        return sc_soft(k, FCCL_ERR_AUTH, "refused: %s needs the read-write "
                       "token; the client holds the read-only token",
                       codec_op_name(op));
    int wire = codec_op_to_wire(c->dialect, op);
    if (wire < 0 || (c->dialect == DIALECT_LEGACY && !legacy_has(op)))
        return sc_soft(k, FCCL_ERR_UNSUPPORTED,
                       "%s is not part of the legacy dialect (PyTorch <= "
                       "1.13 servers); use the modern dialect",
                       codec_op_name(op));
    codec_put_u8(&c->out, (uint8_t)wire);
    return FCCL_OK;
}

void sc_put_key(struct sc_call *k, const char *key)
{
    struct codec_buf *b = &k->c->out;
    size_t kl = strlen(key);
    codec_put_u64(b, (uint64_t)(k->s->kprelen + kl));
    codec_put_bytes(b, k->s->kpre, k->s->kprelen);
    codec_put_bytes(b, key, kl);
}

void sc_put_keys(struct sc_call *k, const char *const *keys, size_t n)
{
    codec_put_u64(&k->c->out, (uint64_t)n);
    for (size_t i = 0; i < n; i++)
        sc_put_key(k, keys[i]);
}

int sc_flush(struct sc_call *k)
{
    struct store_client_conn *c = k->c;
    if (c->out.oom) {
        codec_buf_reset(&c->out);
        c->out.oom = 0;
        return sc_soft(k, FCCL_ERR_NOMEM, "out of memory encoding request");
    }
    int rc = sc_send(c, c->out.p, c->out.len, k->io_deadline);
    codec_buf_reset(&c->out);
    if (rc < 0)
        return sc_fail(k, rc);
    return FCCL_OK;
}

int sc_try_read(struct sc_call *k, void *p, size_t n, uint64_t deadline)
{
    int rc = sc_read_raw(k->c, p, n, deadline);
    return rc < 0 && rc != FCCL_ERR_TIMEOUT ? sc_fail(k, rc) : rc;
}

int sc_read(struct sc_call *k, void *p, size_t n, uint64_t deadline)
{
    int rc = sc_read_raw(k->c, p, n, deadline);
    return rc < 0 ? sc_fail(k, rc) : FCCL_OK;
}

int sc_read_u8(struct sc_call *k, uint8_t *v, uint64_t deadline)
{
    return sc_read(k, v, 1, deadline);
}

int sc_read_u64(struct sc_call *k, uint64_t *v, uint64_t deadline)
{
    uint8_t b[8];
    int rc = sc_read(k, b, 8, deadline);
    if (rc == FCCL_OK)
        *v = codec_get_u64(b);
    return rc;
}

int sc_read_i64(struct sc_call *k, int64_t *v, uint64_t deadline)
{
    uint64_t u;
    int rc = sc_read_u64(k, &u, deadline);
    if (rc == FCCL_OK)
        *v = (int64_t)u;
    return rc;
}

int sc_read_ready(struct sc_call *k, int *ready)
{
    uint8_t b;
    int rc = sc_read_u8(k, &b, k->io_deadline);
    if (rc < 0)
        return rc;
    if (b != REPLY_READY && b != REPLY_NOT_READY) {
        fccl_err(FCCL_ERR_PROTOCOL, "CHECK reply byte %u", b);
        return sc_fail(k, FCCL_ERR_PROTOCOL);
    }
    *ready = b == REPLY_READY;
    return FCCL_OK;
}

/* Consume len bytes without keeping them. */
static int read_discard(struct sc_call *k, uint64_t len, uint64_t deadline)
{
    uint8_t tmp[4096];
    while (len > 0) {
        size_t m = len < sizeof(tmp) ? (size_t)len : sizeof(tmp);
        int rc = sc_read(k, tmp, m, deadline);
        if (rc < 0)
            return rc;
        len -= m;
    }
    return FCCL_OK;
}

int sc_read_count(struct sc_call *k, uint64_t *n, uint64_t max,
                  const char *what, uint64_t deadline)
{
    int rc = sc_read_u64(k, n, deadline);
    if (rc < 0)
        return rc;
    if (*n > max) {
        fccl_err(FCCL_ERR_PROTOCOL, "%s %llu is beyond any limit", what,
                 (unsigned long long)*n);
        return sc_fail(k, FCCL_ERR_PROTOCOL);
    }
    return FCCL_OK;
}

int sc_read_bytes(struct sc_call *k, void **val, size_t *len,
                  uint64_t deadline)
{
    uint64_t n = 0;
    int rc = sc_read_count(k, &n, SC_MAX_REPLY_LEN, "reply length", deadline);
    if (rc < 0)
        return rc;
    if (!val)
        return read_discard(k, n, deadline);
    char *p = malloc((size_t)n + 1);
    if (!p) {
        rc = read_discard(k, n, deadline);
        return rc < 0 ? rc
                      : sc_soft(k, FCCL_ERR_NOMEM,
                                "out of memory for a %llu-byte value",
                                (unsigned long long)n);
    }
    rc = sc_read(k, p, (size_t)n, deadline);
    if (rc < 0) {
        free(p);
        return rc;
    }
    p[n] = '\0';
    *val = p;
    if (len)
        *len = (size_t)n;
    return FCCL_OK;
}

int sc_fetch_pipelined(struct sc_call *k)
{
    if (k->c->dialect != DIALECT_MODERN)
        return 0;
    int rc = sc_hello_reply(k->c, k->io_deadline);
    if (rc < 0)
        return sc_fail(k, rc);
    return k->c->peer == SC_PEER_FCCL;
}
