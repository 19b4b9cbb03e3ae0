/*
 * Store client, token authentication (docs/PROTOCOL-fccl.md, "AUTH"):
 * right after VALIDATE, AUTH_HELLO fetches the server's nonce and
 * AUTH_PROOF answers with our nonce and HMAC-SHA256 over both with the
 * token, which never crosses the wire.  Done on every (re)connect, so the
 * rights hold for the whole life of the handle.
 */
#include <stdlib.h>
#include <string.h>

#include <openssl/crypto.h>
#include <openssl/rand.h>

#include "client_int.h"
#include "err.h"
#include "token_file.h"

int sc_auth_config(struct store_client_conn *c, const fccl_store_opts_t *o)
{
    if (!o->token_file)
        return FCCL_OK;
    if (c->dialect != DIALECT_MODERN)
        return fccl_err(FCCL_ERR_INVALID, "store %s: a token needs the "
                        "modern dialect (tcpstore-server)", c->addr);
    unsigned char *t = malloc(TOKEN_MAX);
    if (!t)
        return fccl_err(FCCL_ERR_NOMEM, "store %s: out of memory", c->addr);
    size_t n = 0;
    int rc = store_read_token(o->token_file, t, TOKEN_MAX, &n);
    if (rc < 0) {
        OPENSSL_cleanse(t, TOKEN_MAX);
        free(t);
        return fccl_err_wrap(rc, "store %s", c->addr);
    }
    c->token = t;
    c->token_len = n;
    return FCCL_OK;
}

void sc_auth_free(struct store_client_conn *c)
{
    if (!c->token)
        return;
    OPENSSL_cleanse(c->token, TOKEN_MAX);
    free(c->token);
    c->token = NULL;
}

static int auth_read(struct store_client_conn *c, void *p, size_t n,
                     uint64_t deadline, const char *step)
{
    int rc = sc_conn_read(c, p, n, deadline);
    if (rc == FCCL_ERR_CLOSED && c->peer == SC_PEER_FCCL)
        return fccl_err(FCCL_ERR_AUTH, "store %s: tcpstore-server closed "
                        "the connection on %s (too many refused proofs "
                        "from this address? its log says why)", c->addr,
                        step);
    if (rc == FCCL_ERR_CLOSED)
        return fccl_err(FCCL_ERR_AUTH, "store %s: the server closed the "
                        "connection on %s: it does not know token "
                        "authentication (a PyTorch server?)", c->addr, step);
    return rc < 0 ? fccl_err_wrap(rc, "store %s: %s", c->addr, step) : rc;
}

/* Send msg[0..n) and read the one-byte answer of `step` into *res. */
static int auth_ask(struct store_client_conn *c, const void *msg, size_t n,
                    uint8_t *res, uint64_t deadline, const char *step)
{
    int rc = sc_send(c, msg, n, deadline);
    return rc < 0 ? rc : auth_read(c, res, 1, deadline, step);
}

int sc_auth(struct store_client_conn *c, uint64_t deadline)
{
    if (!c->token)
        return FCCL_OK;
    uint8_t op = STORE_EXT_AUTH_HELLO, mode = 0;
    uint8_t snonce[AUTH_NONCE_LEN];
    /* The fccl hello went out with VALIDATE: its answer (a refusal,
     * perhaps) comes first. */
    int rc = sc_hello_reply(c, deadline);
    if (rc < 0)
        return rc;
    if ((rc = auth_ask(c, &op, 1, &mode, deadline, "AUTH_HELLO")) < 0)
        return rc;
    if (mode == AUTH_MODE_NONE)
        return fccl_err(FCCL_ERR_AUTH, "store %s: a token was given but the "
                        "server has none (start it with --token-file)",
                        c->addr);
    if (mode != AUTH_MODE_CHALLENGE)
        return fccl_err(FCCL_ERR_PROTOCOL, "store %s: AUTH_HELLO reply %u",
                        c->addr, mode);
    if ((rc = auth_read(c, snonce, sizeof(snonce), deadline,
                        "AUTH_HELLO")) < 0)
        return rc;
    uint8_t msg[1 + AUTH_NONCE_LEN + AUTH_MAC_LEN];
    msg[0] = STORE_EXT_AUTH_PROOF;
    if (RAND_bytes(msg + 1, AUTH_NONCE_LEN) != 1)
        return fccl_err(FCCL_ERR_NOMEM, "store %s: no random bytes", c->addr);
    rc = store_auth_mac(c->token, c->token_len, snonce, msg + 1,
                        msg + 1 + AUTH_NONCE_LEN);
    uint8_t res = AUTH_REFUSED;
    if (rc == FCCL_OK)
        rc = auth_ask(c, msg, sizeof(msg), &res, deadline, "AUTH_PROOF");
    if (rc < 0)
        return rc;
    if (res == AUTH_REFUSED)
        return fccl_err(FCCL_ERR_AUTH, "store %s: the server refused our "
                        "token (not the token of its --token-file or "
                        "--read-token-file)", c->addr);
    c->read_only = res == AUTH_READ_ONLY;
    return res == AUTH_READ_WRITE || res == AUTH_READ_ONLY
               ? FCCL_OK
               : fccl_err(FCCL_ERR_PROTOCOL, "store %s: AUTH_PROOF reply %u",
                          c->addr, res);
}
