/*
 * Store client over TLS (tcpstore-server --tls-cert/--tls-key: a first
 * byte 0x16 starts TLS on the store's own port).
 *
 * The socket is made non-blocking for TLS and every SSL_connect, SSL_read
 * and SSL_write is retried after a poll bounded by the call's deadline, so
 * nothing waits past it.  When a CA file is given, the server's chain,
 * dates and name are verified: the name is opts.tls_server_name or the
 * host of the address, and an IP literal is matched against the
 * certificate's IP subjectAltNames.  Handshake failures are reported as
 * FCCL_ERR_AUTH with the cause in words and are not retried (a wrong CA
 * does not get better by trying again).
 */
#include <arpa/inet.h>
#include <errno.h>
#include <fcntl.h>
#include <poll.h>
#include <pthread.h>
#include <signal.h>
#include <time.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <openssl/err.h>
#include <openssl/ssl.h>
#include <openssl/x509v3.h>

#include "client_int.h"
#include "err.h"
#include "private_file.h"

static const char *ssl_reason(unsigned long e)
{
    static _Thread_local char buf[256];
    if (!e)
        return "failed";
    ERR_error_string_n(e, buf, sizeof(buf));
    return buf;
}

static int ctx_fail(SSL_CTX *ctx, const char *addr, const char *what,
                    const char *path)
{
    unsigned long e = ERR_get_error();
    ERR_clear_error();
    SSL_CTX_free(ctx);
    return fccl_err(FCCL_ERR_AUTH, "store %s: TLS %s %s does not load: %s",
                    addr, what, path, ssl_reason(e));
}

static int load_files(SSL_CTX *ctx, const fccl_store_opts_t *o,
                      const char *addr)
{
    if (o->tls_ca && SSL_CTX_load_verify_locations(ctx, o->tls_ca, NULL) != 1)
        return ctx_fail(ctx, addr, "CA file", o->tls_ca);
    if (!o->tls_cert)
        return FCCL_OK;
    int rc = store_check_private_file(o->tls_key, "TLS key");
    if (rc < 0) {
        SSL_CTX_free(ctx);
        return fccl_err_wrap(rc, "store %s", addr);
    }
    if (SSL_CTX_use_certificate_chain_file(ctx, o->tls_cert) != 1)
        return ctx_fail(ctx, addr, "certificate", o->tls_cert);
    if (SSL_CTX_use_PrivateKey_file(ctx, o->tls_key, SSL_FILETYPE_PEM) != 1)
        return ctx_fail(ctx, addr, "key", o->tls_key);
    if (SSL_CTX_check_private_key(ctx) != 1)
        return ctx_fail(ctx, addr, "key (it does not match the certificate)",
                        o->tls_key);
    return FCCL_OK;
}

int sc_tls_config(struct store_client_conn *c, const fccl_store_opts_t *o)
{
    if (!o->tls && !o->tls_ca && !o->tls_cert && !o->tls_key &&
        !o->tls_server_name)
        return FCCL_OK;
    if (!o->tls_cert != !o->tls_key)
        return fccl_err(FCCL_ERR_INVALID, "store %s: a TLS client "
                        "certificate and its key go together", c->addr);
    if (c->dialect != DIALECT_MODERN)
        return fccl_err(FCCL_ERR_INVALID, "store %s: TLS needs the modern "
                        "dialect (tcpstore-server)", c->addr);
    SSL_CTX *ctx = SSL_CTX_new(TLS_client_method());
    if (!ctx)
        return fccl_err(FCCL_ERR_NOMEM, "store %s: SSL_CTX_new", c->addr);
    SSL_CTX_set_min_proto_version(ctx, TLS1_2_VERSION);
    int rc = load_files(ctx, o, c->addr);
    if (rc < 0)
        return rc;
    if (o->tls_ca)
        SSL_CTX_set_verify(ctx, SSL_VERIFY_PEER, NULL);
    snprintf(c->tls_ca, sizeof(c->tls_ca), "%s", o->tls_ca ? o->tls_ca : "");
    snprintf(c->tls_name, sizeof(c->tls_name), "%s",
             o->tls_server_name ? o->tls_server_name : c->host);
    c->tls_ctx = ctx;
    return FCCL_OK;
}

void sc_tls_drop(struct store_client_conn *c)
{
    if (c->ssl)
        SSL_free(c->ssl);
    c->ssl = NULL;
}

void sc_tls_free(struct store_client_conn *c)
{
    sc_tls_drop(c);
    if (c->tls_ctx)
        SSL_CTX_free(c->tls_ctx);
    c->tls_ctx = NULL;
}

static int is_ip_literal(const char *s)
{
    unsigned char b[16];
    return inet_pton(AF_INET, s, b) == 1 || inet_pton(AF_INET6, s, b) == 1;
}

/* Poll for what OpenSSL wants (err is SSL_get_error's answer). */
static int wait_ssl(struct store_client_conn *c, int err, uint64_t deadline)
{
    return sc_wait_fd(c->fd, err == SSL_ERROR_WANT_WRITE ? POLLOUT : POLLIN,
                      deadline);
}

/* The peer closed without close_notify (OpenSSL 3 reports it as an
 * error). */
static int is_eof(unsigned long e)
{
#ifdef SSL_R_UNEXPECTED_EOF_WHILE_READING
    return ERR_GET_REASON(e) == SSL_R_UNEXPECTED_EOF_WHILE_READING;
#else
    (void)e;
    return 0;
#endif
}

/* Why the handshake failed, in words a user can act on. */
static int handshake_error(struct store_client_conn *c, int err)
{
    long vr = SSL_get_verify_result(c->ssl);
    unsigned long e = ERR_peek_last_error();
    ERR_clear_error();
    if (c->tls_ca[0] && vr != X509_V_OK)
        return fccl_err(FCCL_ERR_AUTH,
                        "TLS: the server's certificate is not accepted: %s "
                        "(CA file %s, name checked '%s'%s)",
                        X509_verify_cert_error_string(vr), c->tls_ca,
                        c->tls_name,
                        vr == X509_V_ERR_HOSTNAME_MISMATCH ||
                                vr == X509_V_ERR_IP_ADDRESS_MISMATCH
                            ? "; --tls-server-name sets the name to check"
                            : "");
    if (e && ERR_GET_REASON(e) == SSL_R_WRONG_VERSION_NUMBER)
        return fccl_err(FCCL_ERR_AUTH, "TLS handshake failed: the server "
                        "answered in plain text (it does not serve TLS: "
                        "start tcpstore-server with --tls-cert and "
                        "--tls-key)");
    if (e && !is_eof(e))
        return fccl_err(FCCL_ERR_AUTH, "TLS handshake failed: %s%s",
                        ssl_reason(e),
                        strstr(ssl_reason(e), "alert")
                            ? " (the server refused us: a client "
                              "certificate signed by its --tls-ca is "
                              "needed; its log says why)"
                            : "");
    (void)err;
    return fccl_err(FCCL_ERR_AUTH, "TLS handshake failed: the server closed "
                    "the connection (it does not serve TLS: start "
                    "tcpstore-server with --tls-cert and --tls-key; or it "
                    "refused us, its log says why)");
}

static int set_peer_name(struct store_client_conn *c)
{
    const char *name = c->tls_name;
    int ip = is_ip_literal(name);
    if (!ip && SSL_set_tlsext_host_name(c->ssl, name) != 1)
        return fccl_err(FCCL_ERR_INVALID, "TLS server name '%s'", name);
    if (!c->tls_ca[0])
        return FCCL_OK;
    X509_VERIFY_PARAM *vp = SSL_get0_param(c->ssl);
    int ok = ip ? X509_VERIFY_PARAM_set1_ip_asc(vp, name)
                : SSL_set1_host(c->ssl, name);
    return ok == 1 ? FCCL_OK
                   : fccl_err(FCCL_ERR_INVALID, "TLS server name '%s'", name);
}

/* SSL_write writes with write(2), which raises SIGPIPE on a connection
 * the server closed; the library must not kill its host process for
 * that (plain sends use MSG_NOSIGNAL).  SIGPIPE is blocked in this thread
 * around the write, and one raised meanwhile is consumed unless it was
 * already pending before. */
struct pipe_guard {
    sigset_t old;
    int was_pending;
};

static void pipe_block(struct pipe_guard *g)
{
    sigset_t pipe_only, pend;
    sigemptyset(&pipe_only);
    sigaddset(&pipe_only, SIGPIPE);
    sigpending(&pend);
    g->was_pending = sigismember(&pend, SIGPIPE);
    pthread_sigmask(SIG_BLOCK, &pipe_only, &g->old);
}

static void pipe_restore(struct pipe_guard *g)
{
    sigset_t pipe_only, pend;
    sigemptyset(&pipe_only);
    sigaddset(&pipe_only, SIGPIPE);
    if (!g->was_pending && sigpending(&pend) == 0 &&
        sigismember(&pend, SIGPIPE)) {
        struct timespec zero = {0, 0};
        while (sigtimedwait(&pipe_only, NULL, &zero) < 0 && errno == EINTR)
            ;
    }
    pthread_sigmask(SIG_SETMASK, &g->old, NULL);
}

int sc_tls_start(struct store_client_conn *c, uint64_t deadline)
{
    if (!c->tls_ctx)
        return FCCL_OK;
    int fl = fcntl(c->fd, F_GETFL);
    if (fl < 0 || fcntl(c->fd, F_SETFL, fl | O_NONBLOCK) < 0)
        return fccl_err_sys(FCCL_ERR_IO, errno, "store %s: fcntl", c->addr);
    c->ssl = SSL_new(c->tls_ctx);
    if (!c->ssl || SSL_set_fd(c->ssl, c->fd) != 1)
        return fccl_err(FCCL_ERR_NOMEM, "store %s: SSL_new", c->addr);
    int rc = set_peer_name(c);
    struct pipe_guard g;
    pipe_block(&g);
    while (rc == FCCL_OK) {
        ERR_clear_error();
        int r = SSL_connect(c->ssl);
        if (r == 1) {
            pipe_restore(&g);
            return FCCL_OK;
        }
        int err = SSL_get_error(c->ssl, r);
        if (err != SSL_ERROR_WANT_READ && err != SSL_ERROR_WANT_WRITE)
            rc = handshake_error(c, err);
        else
            rc = wait_ssl(c, err, deadline);
    }
    pipe_restore(&g);
    sc_tls_drop(c);
    return fccl_err_wrap(rc, "store %s", c->addr);
}

/* After a failed write: an alert the server sent before closing (a
 * refused client certificate, with TLS 1.3 only seen after the handshake)
 * may still be unread. */
static unsigned long pending_alert(struct store_client_conn *c)
{
    char b[64];
    ERR_clear_error();
    int r = SSL_read(c->ssl, b, sizeof(b));
    unsigned long e = r <= 0 ? ERR_peek_last_error() : 0;
    return e && strstr(ssl_reason(e), "alert") ? e : 0;
}

/* A system call's failure as OpenSSL 3.x queues it ("system library::
 * Connection reset by peer"): OpenSSL 3.5 does so where 3.0 left only
 * errno. */
static int is_sys(unsigned long e)
{
    return ERR_GET_LIB(e) == ERR_LIB_SYS;
}

/* An error from SSL_read/SSL_write after the handshake. */
static int io_error(struct store_client_conn *c, int err, const char *op)
{
    unsigned long e = ERR_peek_last_error();
    ERR_clear_error();
    if (!strcmp(op, "send") && (!e || is_eof(e) || is_sys(e))) {
        unsigned long a = pending_alert(c);
        if (a)
            e = a;
    }
    if (err == SSL_ERROR_ZERO_RETURN || (e && is_eof(e)) ||
        (err == SSL_ERROR_SYSCALL && !e && (errno == 0 || errno == ECONNRESET
                                            || errno == EPIPE)))
        return fccl_err(FCCL_ERR_CLOSED, "server closed the connection");
    if (e && strstr(ssl_reason(e), "alert"))
        return fccl_err(FCCL_ERR_AUTH, "TLS: the server refused us: %s "
                        "(a client certificate signed by its --tls-ca is "
                        "needed; its log says why)", ssl_reason(e));
    if (e)
        return fccl_err(FCCL_ERR_IO, "TLS %s: %s", op, ssl_reason(e));
    (void)c;
    return fccl_err_sys(FCCL_ERR_IO, errno, "TLS %s", op);
}

static int tls_send(struct store_client_conn *c, const void *p, size_t n,
                    uint64_t deadline);

int sc_tls_send(struct store_client_conn *c, const void *p, size_t n,
                uint64_t deadline)
{
    struct pipe_guard g;
    pipe_block(&g);
    int rc = tls_send(c, p, n, deadline);
    pipe_restore(&g);
    return rc;
}

static int tls_send(struct store_client_conn *c, const void *p, size_t n,
                    uint64_t deadline)
{
    const char *b = p;
    while (n > 0) {
        ERR_clear_error();
        errno = 0;
        int chunk = n > (1u << 30) ? 1 << 30 : (int)n;
        int r = SSL_write(c->ssl, b, chunk);
        if (r > 0) {
            b += r;
            n -= (size_t)r;
            continue;
        }
        int err = SSL_get_error(c->ssl, r);
        if (err != SSL_ERROR_WANT_READ && err != SSL_ERROR_WANT_WRITE)
            return io_error(c, err, "send");
        int rc = wait_ssl(c, err, deadline);
        if (rc < 0)
            return rc == FCCL_ERR_TIMEOUT ? fccl_err(rc, "send timed out")
                                          : rc;
    }
    return FCCL_OK;
}

static ssize_t tls_recv(struct store_client_conn *c, void *buf, size_t cap,
                        uint64_t deadline);

ssize_t sc_tls_recv(struct store_client_conn *c, void *buf, size_t cap,
                    uint64_t deadline)
{
    struct pipe_guard g;
    pipe_block(&g);
    ssize_t n = tls_recv(c, buf, cap, deadline);
    pipe_restore(&g);
    return n;
}

static ssize_t tls_recv(struct store_client_conn *c, void *buf, size_t cap,
                        uint64_t deadline)
{
    int want = cap > (1u << 30) ? 1 << 30 : (int)cap;
    for (;;) {
        ERR_clear_error();
        errno = 0;
        int r = SSL_read(c->ssl, buf, want);
        if (r > 0)
            return r;
        int err = SSL_get_error(c->ssl, r);
        if (err != SSL_ERROR_WANT_READ && err != SSL_ERROR_WANT_WRITE)
            return io_error(c, err, "recv");
        int rc = wait_ssl(c, err, deadline);
        if (rc < 0)
            return rc;
    }
}
