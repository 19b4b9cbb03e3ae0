/*
 * Token authentication on tcpstore-server (docs/PROTOCOL-fccl.md, "AUTH"):
 * AUTH_HELLO hands out a fresh 32-byte server nonce; AUTH_PROOF carries the
 * client's nonce and HMAC-SHA256(token, "fccl-auth-v1" | server nonce |
 * client nonce), so the token never crosses the wire and a recorded proof
 * is worth nothing on another connection.  A proof made with the
 * --token-file token gives read-write rights, one made with
 * --read-token-file read-only rights (get, check, wait, list, ping, stats).
 *
 * Without --auth-required, connections that never authenticate keep full
 * access (PyTorch's clients cannot authenticate).  With it, anything but
 * VALIDATE, PING and the AUTH pair before a successful proof closes the
 * connection.  The gate also closes a connection on a second VALIDATE, as
 * PyTorch's servers do.
 */
#include <stdlib.h>
#include <string.h>

#include <openssl/crypto.h>
#include <openssl/rand.h>

#include "err.h"
#include "log.h"
#include "server_int.h"
#include "token_file.h"

struct store_auth {
    unsigned char rw[TOKEN_MAX], ro[TOKEN_MAX];
    size_t rwlen, rolen; /* rolen 0: no read-only token */
};

int store_auth_setup(struct store_server *s)
{
    const struct store_server_config *c = &s->cfg;
    if (!c->token_file[0])
        return FCCL_OK;
    struct store_auth *a = calloc(1, sizeof(*a));
    if (!a)
        return fccl_err(FCCL_ERR_NOMEM, "auth: out of memory");
    int rc = store_read_token(c->token_file, a->rw, sizeof(a->rw), &a->rwlen);
    if (rc == FCCL_OK && c->read_token_file[0])
        rc = store_read_token(c->read_token_file, a->ro, sizeof(a->ro),
                              &a->rolen);
    if (rc == FCCL_OK && a->rolen == a->rwlen &&
        !memcmp(a->rw, a->ro, a->rwlen))
        rc = fccl_err(FCCL_ERR_INVALID, "the read-only token is the "
                      "read-write token");
    if (rc < 0) {
        OPENSSL_cleanse(a, sizeof(*a));
        free(a);
        return rc;
    }
    s->auth = a;
    LOG_INFO("STORE", "token authentication enabled (%s%s)",
             a->rolen ? "read-write and read-only tokens" : "one token",
             c->auth_required ? ", required" : ", optional");
    return FCCL_OK;
}

void store_auth_teardown(struct store_server *s)
{
    if (!s->auth)
        return;
    OPENSSL_cleanse(s->auth, sizeof(*s->auth));
    free(s->auth);
    s->auth = NULL;
}

static int hello(struct store_server *s, struct store_conn *c)
{
    uint8_t reply[1 + AUTH_NONCE_LEN];
    if (!s->auth) {
        reply[0] = AUTH_MODE_NONE;
        store_conn_reply(c, reply, 1);
        return 1;
    }
    if (RAND_bytes(c->nonce, AUTH_NONCE_LEN) != 1)
        return fccl_err(FCCL_ERR_NOMEM, "AUTH_HELLO: no random bytes");
    c->nonce_set = 1;
    reply[0] = AUTH_MODE_CHALLENGE;
    memcpy(reply + 1, c->nonce, AUTH_NONCE_LEN);
    store_conn_reply(c, reply, sizeof(reply));
    return 1;
}

/* 1 if mac is the proof for token t over this connection's nonces. */
static int proves(const unsigned char *t, size_t tlen,
                  const struct store_conn *c, const uint8_t *cnonce,
                  const uint8_t *mac)
{
    unsigned char want[AUTH_MAC_LEN];
    if (!tlen || store_auth_mac(t, tlen, c->nonce, cnonce, want) < 0)
        return 0;
    return CRYPTO_memcmp(want, mac, AUTH_MAC_LEN) == 0;
}

static int proof(struct store_server *s, struct store_conn *c,
                 const struct codec_req *r)
{
    if (!s->auth)
        return fccl_err(FCCL_ERR_PROTOCOL, "AUTH_PROOF, but this server "
                        "has no tokens");
    if (!c->nonce_set)
        return fccl_err(FCCL_ERR_PROTOCOL, "AUTH_PROOF without AUTH_HELLO");
    const uint8_t *cnonce = r->val.p, *mac = r->val.p + AUTH_NONCE_LEN;
    const struct store_auth *a = s->auth;
    uint8_t res = proves(a->rw, a->rwlen, c, cnonce, mac)   ? AUTH_READ_WRITE
                  : proves(a->ro, a->rolen, c, cnonce, mac) ? AUTH_READ_ONLY
                                                            : AUTH_REFUSED;
    c->nonce_set = 0; /* one proof per challenge */
    if (res == AUTH_REFUSED)
        LOG_WARN("STORE", "client %s: token refused (not the server's "
                 "token)", c->addr);
    else
        LOG_DEBUG("STORE", "client %s authenticated (%s)", c->addr,
                  res == AUTH_READ_WRITE ? "read-write" : "read-only");
    if (res != AUTH_REFUSED)
        c->auth = res;
    store_conn_reply(c, &res, 1);
    return 1;
}

/* What a read-only token allows. */
static int read_only_op(enum store_op op)
{
    switch (op) {
    case OP_GET: case OP_CHECK: case OP_WAIT: case OP_MULTI_GET:
    case OP_GETNUMKEYS: case OP_CANCEL_WAIT: case OP_PING:
    case OP_LIST_KEYS: case OP_LIST_ALL: case OP_STATS: case OP_SYNC: case OP_QUEUE_LEN:
        return 1;
    default:
        return 0;
    }
}

int store_auth_gate(struct store_server *s, struct store_conn *c,
                    const struct codec_req *r)
{
    switch (r->op) {
    case OP_VALIDATE:
        if (c->validated)
            return fccl_err(FCCL_ERR_PROTOCOL, "a second VALIDATE");
        c->validated = 1;
        return FCCL_OK;
    case OP_PING:
        return FCCL_OK;
    case OP_AUTH_HELLO:
        return hello(s, c);
    case OP_AUTH_PROOF:
        return proof(s, c, r);
    default:
        break;
    }
    if (c->auth == AUTH_READ_ONLY && !read_only_op(r->op))
        return fccl_err(FCCL_ERR_AUTH, "%s refused: the client holds the "
                        "read-only token", codec_op_name(r->op));
    if (!c->auth && s->auth && s->cfg.auth_required)
        return fccl_err(FCCL_ERR_AUTH, "%s before authentication "
                        "(auth-required: a token is needed)",
                        codec_op_name(r->op));
    return FCCL_OK;
}

/* ---- reload (SIGHUP) and the status port ---- */

int store_auth_reload(struct store_server *s)
{
    const struct store_server_config *c = &s->cfg;
    if (!s->auth)
        return FCCL_OK;
    struct store_auth n;
    memset(&n, 0, sizeof(n));
    int rc = store_read_token(c->token_file, n.rw, sizeof(n.rw), &n.rwlen);
    if (rc == FCCL_OK && c->read_token_file[0])
        rc = store_read_token(c->read_token_file, n.ro, sizeof(n.ro),
                              &n.rolen);
    if (rc == FCCL_OK && n.rolen == n.rwlen && !memcmp(n.rw, n.ro, n.rwlen))
        rc = fccl_err(FCCL_ERR_INVALID, "the read-only token is the "
                      "read-write token");
    if (rc == FCCL_OK) {
        /* Only the tokens change: whatever else the table keeps stays. */
        memcpy(s->auth->rw, n.rw, sizeof(n.rw));
        memcpy(s->auth->ro, n.ro, sizeof(n.ro));
        s->auth->rwlen = n.rwlen;
        s->auth->rolen = n.rolen;
    }
    OPENSSL_cleanse(&n, sizeof(n));
    return rc;
}

/* Constant-time equality of a[0..n) and t[0..tlen). */
static int same_token(const unsigned char *t, size_t tlen, const void *a,
                      size_t n)
{
    return tlen && tlen == n && CRYPTO_memcmp(t, a, n) == 0;
}

int store_auth_token_match(const struct store_server *s, const void *tok,
                           size_t n)
{
    const struct store_auth *a = s->auth;
    if (!a)
        return 0;
    if (same_token(a->rw, a->rwlen, tok, n))
        return 2;
    return same_token(a->ro, a->rolen, tok, n) ? 1 : 0;
}
