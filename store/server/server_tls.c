/*
 * TLS on the store's own port (PROTOCOL.md, "Extensions"): a connection
 * whose first byte is 0x16 (a TLS handshake record, no query type of either
 * dialect) is handed to OpenSSL through a bufferevent_openssl on the same
 * socket and then speaks the modern dialect inside TLS.  Plain connections
 * keep working on the same port unless tls-required is set.
 *
 * The server presents tls-cert/tls-key (PEM); with tls-ca it also demands a
 * client certificate signed by that CA (mutual TLS, the authentication of
 * this store).  TLS 1.2 is the minimum.
 *
 * The first byte is looked at with MSG_PEEK, so the handshake bytes stay in
 * the socket for OpenSSL; that is one extra system call per connection, and
 * only when TLS is configured.
 */
#include <errno.h>
#include <string.h>
#include <sys/socket.h>

#include <event2/bufferevent.h>
#include <event2/bufferevent_ssl.h>
#include <openssl/err.h>
#include <openssl/ssl.h>

#include "err.h"
#include "log.h"
#include "private_file.h"
#include "server_int.h"

/* The most recent OpenSSL error as text (or `fallback`). */
static const char *ssl_reason(unsigned long e, const char *fallback)
{
    static _Thread_local char buf[256];
    if (!e)
        return fallback;
    ERR_error_string_n(e, buf, sizeof(buf));
    return buf;
}

static int ctx_fail(SSL_CTX *ctx, const char *what, const char *path)
{
    unsigned long e = ERR_get_error();
    ERR_clear_error();
    SSL_CTX_free(ctx);
    return fccl_err(FCCL_ERR_AUTH, "TLS %s %s: %s", what, path,
                    ssl_reason(e, "failed"));
}

int store_tls_setup(struct store_server *s)
{
    const struct store_server_config *c = &s->cfg;
    if (!c->tls_cert[0])
        return FCCL_OK;
    SSL_CTX *ctx = SSL_CTX_new(TLS_server_method());
    if (!ctx)
        return fccl_err(FCCL_ERR_NOMEM, "SSL_CTX_new");
    SSL_CTX_set_min_proto_version(ctx, TLS1_2_VERSION);
    /* Session tickets would need keys shared between restarts; a store's
     * clients connect once, so simply do without. */
    SSL_CTX_set_options(ctx, SSL_OP_NO_TICKET);
    /* A client that exits without close_notify has simply disconnected. */
    SSL_CTX_set_options(ctx, SSL_OP_IGNORE_UNEXPECTED_EOF);
    if (SSL_CTX_use_certificate_chain_file(ctx, c->tls_cert) != 1)
        return ctx_fail(ctx, "certificate", c->tls_cert);
    if (store_check_private_file(c->tls_key, "TLS key") < 0) {
        SSL_CTX_free(ctx);
        return fccl_err_wrap(FCCL_ERR_AUTH, "TLS");
    }
    if (SSL_CTX_use_PrivateKey_file(ctx, c->tls_key, SSL_FILETYPE_PEM) != 1)
        return ctx_fail(ctx, "private key", c->tls_key);
    if (SSL_CTX_check_private_key(ctx) != 1)
        return ctx_fail(ctx, "key does not match certificate", c->tls_key);
    if (c->tls_ca[0]) {
        if (SSL_CTX_load_verify_locations(ctx, c->tls_ca, NULL) != 1)
            return ctx_fail(ctx, "CA file", c->tls_ca);
        SSL_CTX_set_verify(ctx,
                           SSL_VERIFY_PEER | SSL_VERIFY_FAIL_IF_NO_PEER_CERT,
                           NULL);
    }
    s->tls = ctx;
    LOG_INFO("STORE", "TLS enabled (%s%s)",
             c->tls_ca[0] ? "client certificates required" : "server only",
             c->tls_required ? ", plaintext refused" : "");
    return FCCL_OK;
}

void store_tls_teardown(struct store_server *s)
{
    if (s->tls)
        SSL_CTX_free(s->tls);
    s->tls = NULL;
}

/* 1 if the next byte on the socket is a TLS handshake record, 0 if not,
 * -1 if nothing is there (EAGAIN) or the peer is gone. */
int store_tls_peek(int fd)
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

const char *store_tls_conn_error(struct bufferevent *bev)
{
    unsigned long e = bufferevent_get_openssl_error(bev);
    const char *why = ssl_reason(e, NULL);
    while (bufferevent_get_openssl_error(bev))
        ; /* drop the rest of the queue */
    if (why)
        return why;
    int err = EVUTIL_SOCKET_ERROR();
    return err ? evutil_socket_error_to_string(err) : "connection closed";
}

struct bufferevent *store_tls_bufferevent(struct store_server *s, int fd)
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
