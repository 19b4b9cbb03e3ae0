/*
 * The server's TLS context: tls-cert/tls-key (PEM) presented to every TLS
 * client; with tls-ca a client certificate signed by that CA is demanded
 * too (mutual TLS, the authentication of this store).  TLS 1.2 is the
 * minimum.  The connections themselves are conn_tls.c's.  A reload
 * (server_reload.c) builds a whole new context the same way (with the
 * same certificate-date warning); connections
 * made before keep the old one (each SSL holds a reference to its
 * context), so nothing open is disturbed.
 */
#include <openssl/err.h>
#include <openssl/ssl.h>
#include <openssl/x509.h>
#include <time.h>

#include "err.h"
#include "log.h"
#include "private_file.h"
#include "server_int.h"

const char *store_tls_reason(unsigned long e, const char *fallback)
{
    static _Thread_local char buf[256];
    if (!e)
        return fallback;
    ERR_error_string_n(e, buf, sizeof(buf));
    return buf;
}

/* "2026-03-01 12:00:00 UTC" of an ASN1 time. */
static void when(const ASN1_TIME *t, char *out, size_t n)
{
    struct tm tm;
    if (ASN1_TIME_to_tm(t, &tm) != 1 ||
        !strftime(out, n, "%Y-%m-%d %H:%M:%S UTC", &tm))
        snprintf(out, n, "(unreadable date)");
}

int store_tls_warn_validity(struct ssl_ctx_st *ctx, const char *path)
{
    X509 *x = SSL_CTX_get0_certificate(ctx);
    if (!x)
        return 0;
    const ASN1_TIME *nb = X509_get0_notBefore(x), *na = X509_get0_notAfter(x);
    char at[64];
    int days = 0, secs = 0;
    if (X509_cmp_current_time(nb) > 0) {
        when(nb, at, sizeof(at));
        LOG_WARN("STORE", "TLS certificate %s is not valid before %s: "
                 "every client that verifies it refuses the connection "
                 "until then (is this machine's clock right?)", path, at);
        return 1;
    }
    when(na, at, sizeof(at));
    if (X509_cmp_current_time(na) <= 0) {
        LOG_WARN("STORE", "TLS certificate %s expired on %s: every client "
                 "that verifies it refuses the connection; renew it", path,
                 at);
        return 1;
    }
    if (ASN1_TIME_diff(&days, &secs, NULL, na) == 1 &&
        days < STORE_CERT_WARN_DAYS) {
        LOG_WARN("STORE", "TLS certificate %s expires in %d day%s %d h (on "
                 "%s): renew it, or clients that verify it will refuse the "
                 "connection", path, days, days == 1 ? "" : "s",
                 secs / 3600, at);
        return 1;
    }
    return 0;
}

static int ctx_fail(SSL_CTX *ctx, const char *what, const char *path)
{
    unsigned long e = ERR_get_error();
    ERR_clear_error();
    SSL_CTX_free(ctx);
    return fccl_err(FCCL_ERR_AUTH, "TLS %s %s: %s", what, path,
                    store_tls_reason(e, "failed"));
}

int store_tls_load(const struct store_server_config *c, SSL_CTX **out)
{
    *out = NULL;
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
    store_tls_warn_validity(ctx, c->tls_cert);
    if (c->tls_ca[0]) {
        if (SSL_CTX_load_verify_locations(ctx, c->tls_ca, NULL) != 1)
            return ctx_fail(ctx, "CA file", c->tls_ca);
        SSL_CTX_set_verify(ctx,
                           SSL_VERIFY_PEER | SSL_VERIFY_FAIL_IF_NO_PEER_CERT,
                           NULL);
    }
    *out = ctx;
    return FCCL_OK;
}

int store_tls_setup(struct store_server *s)
{
    const struct store_server_config *c = &s->cfg;
    if (!c->tls_cert[0])
        return FCCL_OK;
    int rc = store_tls_load(c, &s->tls); /* warns about its dates */
    if (rc < 0)
        return rc;
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
