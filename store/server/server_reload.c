/*
 * Reloading the server's secrets without a restart (SIGHUP to
 * tcpstore-server, fccl_server_reload() to an embedding program): the TLS
 * certificate, key and client CA and the token files are read again from
 * the paths the server was given.
 *
 * Each part is all or nothing: a new TLS context is built aside and only
 * replaces the old one once the certificate, the key, their match and the
 * CA have loaded; new tokens replace the old ones only when every token
 * file reads.  What fails is logged with its reason and the old material
 * stays in use.  Connections already open keep what they were made with
 * (a TLS session holds a reference to its own context; a proof is
 * checked once), so a reload never drops anyone; new connections and new
 * proofs use the new material.  Runs on the loop's thread.
 */
#include <openssl/ssl.h>

#include "err.h"
#include "log.h"
#include "server_int.h"

/* 0 if the TLS files loaded (or there is no TLS), -1 if the old are kept. */
static int reload_tls(struct store_server *s)
{
    const struct store_server_config *c = &s->cfg;
    if (!c->tls_cert[0])
        return 0;
    SSL_CTX *fresh;
    if (store_tls_load(c, &fresh) < 0) {
        LOG_WARN("STORE", "reload: %s; keeping the TLS certificate and key "
                 "loaded before", fccl_last_error());
        return -1;
    }
    SSL_CTX_free(s->tls); /* open sessions hold their own reference */
    s->tls = fresh;
    LOG_INFO("STORE", "reload: TLS certificate %s, key %s%s%s loaded for new "
             "connections", c->tls_cert, c->tls_key,
             c->tls_ca[0] ? " and client CA " : "", c->tls_ca);
    return 0;
}

static int reload_tokens(struct store_server *s)
{
    if (!s->auth)
        return 0;
    if (store_auth_reload(s) < 0) {
        LOG_WARN("STORE", "reload: %s; keeping the tokens loaded before",
                 fccl_last_error());
        return -1;
    }
    LOG_INFO("STORE", "reload: token%s %s%s%s loaded for new proofs",
             s->cfg.read_token_file[0] ? "s" : "", s->cfg.token_file,
             s->cfg.read_token_file[0] ? " and " : "",
             s->cfg.read_token_file);
    return 0;
}

void store_reload(struct store_server *s)
{
    s->st.reloads++;
    int bad = reload_tls(s) < 0;
    bad |= reload_tokens(s) < 0;
    if (bad)
        s->st.reload_failures++;
    if (!s->cfg.tls_cert[0] && !s->auth)
        LOG_INFO("STORE", "reload: no TLS files or tokens to read again");
}
