/*
 * The TLS transport of a server connection (conn_type.h), on the store's
 * own port (PROTOCOL.md, "Extensions"): a connection whose first byte is
 * 0x16 (a TLS handshake record, no query type of either dialect) is handed
 * to OpenSSL through a bufferevent_openssl on the same socket and then
 * speaks the modern dialect inside TLS.  Plain connections keep working on
 * the same port unless tls-required is set.
 *
 * The first byte is looked at with MSG_PEEK, so the handshake bytes stay in
 * the socket for OpenSSL; that is one extra system call per connection, and
 * only when TLS is configured.
 *
 * The bufferevent does all reading and writing: request bytes land in its
 * input buffer, which is c->in, and every reply goes through its output.
 * Its EV_WRITE stays enabled, since OpenSSL writes on its own too (the
 * handshake, alerts), so its output cannot be held back for the journal.
 */
#include <errno.h>
#include <sys/socket.h>

#include <event2/buffer.h>
#include <event2/bufferevent.h>
#include <event2/bufferevent_ssl.h>
#include <openssl/ssl.h>

#include "clock.h"
#include "conn_type.h"
#include "err.h"
#include "log.h"
#include "server_int.h"

static void tls_reads(struct store_conn *c, int on)
{
    if (on)
        bufferevent_enable(c->bev, EV_READ);
    else
        bufferevent_disable(c->bev, EV_READ);
}

/* Everything goes through the bufferevent's output. */
static ssize_t tls_write_now(struct store_conn *c, const uint8_t *p,
                             size_t n)
{
    (void)c, (void)p, (void)n;
    return 0;
}

/* The bufferevent reads on its own. */
static ssize_t tls_read_more(struct store_conn *c, size_t want)
{
    (void)c, (void)want;
    return 0;
}

static int tls_hold(struct store_conn *c)
{
    (void)c;
    return 0;
}

static void tls_drained(struct store_conn *c)
{
    (void)c; /* EV_WRITE stays on: OpenSSL may have more to say */
}

/* Why a TLS connection failed: OpenSSL's queue, else errno. */
static const char *tls_error(struct store_conn *c)
{
    unsigned long e = bufferevent_get_openssl_error(c->bev);
    const char *why = store_tls_reason(e, NULL);
    while (bufferevent_get_openssl_error(c->bev))
        ; /* drop the rest of the queue */
    if (why)
        return why;
    int err = EVUTIL_SOCKET_ERROR();
    return err ? evutil_socket_error_to_string(err) : "connection closed";
}

/* c->in is the bufferevent's own input buffer, freed with it. */
static void tls_release(struct store_conn *c, int keep_socket)
{
    (void)keep_socket; /* a TLS connection never hands its socket on */
    bufferevent_free(c->bev); /* closes the socket, frees the SSL */
    c->bev = NULL;
    c->in = NULL;
}

/* One table per connection kind, the same slots as conn_plain.c's. */
static const struct conn_type conn_tls = {
    .name = "TLS",
    .encrypted = 1,
    .reads = tls_reads,
    .write_now = tls_write_now,
    .read_more = tls_read_more,
    .hold = tls_hold,
    .drained = tls_drained,
    .error = tls_error,
    .release = tls_release,
};

/* ---- reading ---- */

static void on_read(struct bufferevent *bev, void *arg)
{
    struct store_conn *c = arg;
    uint64_t t0 = store_turn_begin();
    if (c->state == CONN_BROKEN || c->state == CONN_CLOSING) {
        struct evbuffer *in = bufferevent_get_input(bev);
        evbuffer_drain(in, evbuffer_get_length(in));
        return;
    }
    struct store_server *s = c->s;
    c->last_ms = fccl_now_ns() / 1000000u;
    c->part_bytes += evbuffer_get_length(c->in); /* approximate */
    store_conn_input(c, NULL, 0);
    store_turn_end(s, t0);
}

/* ---- the sniff ---- */

/* 1 if the next byte on the socket is a TLS handshake record, 0 if not,
 * -1 if nothing is there (EAGAIN) or the peer is gone. */
static int peek_handshake(int fd)
{
    uint8_t b;
    ssize_t r;
    do
        r = recv(fd, &b, 1, MSG_PEEK | MSG_DONTWAIT);
    while (r < 0 && errno == EINTR);
    if (r == 1)
        return b == 0x16;
    return r == 0 ? 0 : -1; /* EOF: let the plain path see and report it */
}

static struct bufferevent *tls_bufferevent(struct store_server *s, int fd)
{
    SSL *ssl = SSL_new(s->tls);
    if (!ssl)
        return NULL;
    /* On failure libevent does not take the SSL; with CLOSE_ON_FREE it
     * frees it (and closes fd) together with the bufferevent. */
    struct bufferevent *bev = bufferevent_openssl_socket_new(
        s->base, fd, ssl, BUFFEREVENT_SSL_ACCEPTING, BEV_OPT_CLOSE_ON_FREE);
    if (!bev)
        SSL_free(ssl);
    return bev;
}

/* The first byte was 0x16: hand the socket to OpenSSL.  The handshake
 * bytes are still in the socket (we only peeked). */
static void take_over(struct store_conn *c)
{
    struct bufferevent *tb = tls_bufferevent(c->s, c->fd);
    if (!tb) {
        LOG_WARN("STORE", "closing client %s: out of memory starting TLS",
                 c->addr);
        store_conn_free(c);
        return;
    }
    store_conn_set_transport(c, &conn_tls, tb, bufferevent_get_input(tb));
    c->dialect = DIALECT_MODERN; /* TLS connections speak modern inside */
    c->state = CONN_HANDSHAKE;   /* until BEV_EVENT_CONNECTED */
    c->part_ms = fccl_now_ns() / 1000000u;
    bufferevent_setcb(tb, on_read, store_conn_on_write, store_conn_on_event,
                      c);
    bufferevent_enable(tb, EV_READ | EV_WRITE);
    LOG_DEBUG("STORE", "client %s starts TLS", c->addr);
}

int conn_tls_sniff(struct store_conn *c)
{
    int t = peek_handshake(c->fd);
    if (t < 0)
        return 1; /* nothing yet: wait for the next event */
    if (t == 1) {
        take_over(c);
        return 1;
    }
    if (c->s->cfg.tls_required) {
        char ip[48];
        store_ip_of(c->addr, ip, sizeof(ip));
        store_quiet_warn(c->s, QUIET_REFUSED, ip, "closing client %s: "
                         "plaintext connection refused (tls-required)",
                         c->addr);
        /* An fccl client is told why when it says its hello. */
        if (!store_slots_refuse(c->s, c, SYNC_DENIED, "tcpstore-server "
                                "requires TLS (--tls-required): connect "
                                "with TLS (--tls-ca CA, or --tls)")) {
            store_conn_free(c);
            return 1;
        }
    }
    c->state = CONN_OPEN;
    return 0;
}
