/*
 * Store client: the bytes of one connection: sending (plain or TLS),
 * receiving through the connection's small buffer, and the hello's reply
 * (which comes before any other).
 */
#include <errno.h>
#include <poll.h>
#include <string.h>
#include <sys/socket.h>

#include "client_int.h"
#include "clock.h"
#include "err.h"

int sc_send(struct store_client_conn *c, const void *p, size_t n,
            uint64_t deadline)
{
    if (!c->ssl)
        return fccl_write_full(c->fd, p, n, deadline);
    return sc_tls_send(c, p, n, deadline);
}

/* A refusal after the hello: u8 code (SYNC_* numbers), the reason. */
static int hello_refused(struct store_client_conn *c, uint64_t deadline)
{
    uint8_t h[9];
    char msg[SYNC_MSG_MAX + 1];
    int rc = sc_read_raw(c, h, sizeof(h), deadline);
    uint64_t n = rc == FCCL_OK ? codec_get_u64(h + 1) : 0;
    if (rc == FCCL_OK && n > SYNC_MSG_MAX)
        return fccl_err(FCCL_ERR_PROTOCOL, "a refusal of %llu bytes",
                        (unsigned long long)n);
    if (rc == FCCL_OK)
        rc = sc_read_raw(c, msg, (size_t)n, deadline);
    if (rc < 0)
        return rc;
    msg[n] = '\0';
    int err = h[0] == SYNC_LIMIT    ? FCCL_ERR_LIMIT
              : h[0] == SYNC_NOMEM  ? FCCL_ERR_NOMEM
              : h[0] == SYNC_DENIED ? FCCL_ERR_AUTH
                                    : FCCL_ERR_PROTOCOL;
    return fccl_err(err, "%s", msg);
}

int sc_hello_reply(struct store_client_conn *c, uint64_t deadline)
{
    if (!c->hello_due)
        return FCCL_OK;
    c->hello_due = 0;
    uint8_t b[4];
    int rc = sc_read_raw(c, b, sizeof(b), deadline);
    if (rc < 0)
        return rc;
    uint32_t v = codec_get_u32(b), n = c->hello_nonce;
    if ((v & ~STORE_HELLO_NEEDS_TOKEN) == (n | STORE_HELLO_ACK)) {
        c->peer = SC_PEER_FCCL;
        c->needs_token = (v & STORE_HELLO_NEEDS_TOKEN) != 0;
        return FCCL_OK;
    }
    if (v == n) {
        c->peer = SC_PEER_OTHER; /* a PyTorch server echoes a PING */
        return FCCL_OK;
    }
    if (v == (uint32_t)~n) {
        c->peer = SC_PEER_FCCL;
        return hello_refused(c, deadline);
    }
    return fccl_err(FCCL_ERR_PROTOCOL, "reply %08x to the hello %08x", v, n);
}

/* One recv of up to cap bytes, waiting for data until the deadline.
 * Returns the byte count (> 0) or a status (the caller applies sc_fail).
 *
 * While more than RECV_SLICE_MS remain, a plain blocking recv waits (the
 * socket's SO_RCVTIMEO is that slice, so it wakes up to look at the
 * deadline): one system call per reply.  Closer to the deadline, poll
 * bounds the wait exactly. */
static ssize_t recv_some(struct store_client_conn *c, void *buf, size_t cap,
                         uint64_t deadline)
{
    if (c->ssl) {
        ssize_t n = sc_tls_recv(c, buf, cap, deadline);
        if (n > 0)
            c->answered = c->ever_answered = 1;
        return n;
    }
    for (;;) {
        int block = fccl_ms_left(deadline) > RECV_SLICE_MS;
        ssize_t n = recv(c->fd, buf, cap, block ? 0 : MSG_DONTWAIT);
        if (n > 0) {
            c->answered = c->ever_answered = 1;
            return n;
        }
        if (n == 0)
            return fccl_err(FCCL_ERR_CLOSED, "server closed the connection");
        if (errno == EINTR)
            continue;
        if (errno == EAGAIN || errno == EWOULDBLOCK) {
            if (block)
                continue; /* a slice passed; look at the deadline again */
            int rc = sc_wait_fd(c->fd, POLLIN, deadline);
            if (rc < 0)
                return rc;
            continue;
        }
        return fccl_err_sys(errno == ECONNRESET ? FCCL_ERR_CLOSED
                                                : FCCL_ERR_IO,
                            errno, "recv");
    }
}

/* Raw read: timeouts are returned unreported so that the WAIT path can
 * cancel instead of closing. */
int sc_read_raw(struct store_client_conn *c, void *p, size_t n,
                    uint64_t deadline)
{
    uint8_t *dst = p;
    if (c->hello_due) { /* its reply comes before any other */
        int rc = sc_hello_reply(c, deadline);
        if (rc < 0)
            return rc;
    }
    while (n > 0) {
        size_t have = c->rlen - c->rpos;
        if (have > 0) {
            size_t m = have < n ? have : n;
            memcpy(dst, c->rbuf + c->rpos, m);
            c->rpos += m;
            dst += m;
            n -= m;
            continue;
        }
        c->rpos = c->rlen = 0;
        /* Big payloads go straight to the caller's memory. */
        if (n >= SC_RBUF / 2) {
            ssize_t r = recv_some(c, dst, n, deadline);
            if (r < 0)
                return (int)r;
            dst += r;
            n -= (size_t)r;
            continue;
        }
        ssize_t r = recv_some(c, c->rbuf, SC_RBUF, deadline);
        if (r < 0)
            return (int)r;
        c->rlen = (size_t)r;
    }
    return FCCL_OK;
}

int sc_conn_read(struct store_client_conn *c, void *p, size_t n,
                 uint64_t deadline)
{
    return sc_read_raw(c, p, n, deadline);
}
