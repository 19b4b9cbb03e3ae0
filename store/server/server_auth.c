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
 *
 * Failed proofs (issue 25: 12,294 wrong proofs in 2 s on one connection
 * used to be answered and logged one by one):
 *  - the AUTH_CONN_FAILS-th refused proof on a connection is answered and
 *    the connection closed;
 *  - an address with AUTH_ADDR_FAILS refused proofs within
 *    AUTH_ADDR_WINDOW_MS is slowed: its proofs are taken one per
 *    AUTH_SLOW_MS (the connection is not read until its turn), and a proof
 *    whose turn is more than AUTH_SLOW_QUEUE_MS away closes its
 *    connection.  It ends when the window passes without a refusal;
 *  - the warnings are summarised per address (server_quiet.c).
 * The fccl hello (codec.h) is answered here too: it is where the server
 * tells an fccl client why it refuses the connection.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <event2/event.h>
#include <openssl/crypto.h>
#include <openssl/rand.h>

#include "clock.h"
#include "err.h"
#include "log.h"
#include "server_int.h"
#include "token_file.h"

#define AUTH_CONN_FAILS 3
#define AUTH_ADDR_FAILS 10
#define AUTH_ADDR_WINDOW_MS 60000
#define AUTH_SLOW_MS 1000
#define AUTH_SLOW_QUEUE_MS 10000
#define AUTH_ADDRS 256 /* addresses remembered (the least recent goes) */

/* Refused proofs of one client address. */
struct fail_addr {
    char ip[48];
    uint32_t fails;     /* in the window that began at first_ms */
    uint64_t first_ms, last_ms;
    uint64_t next_ms;   /* slowed: when its next proof may run */
};

struct store_auth {
    unsigned char rw[TOKEN_MAX], ro[TOKEN_MAX];
    size_t rwlen, rolen; /* rolen 0: no read-only token */
    struct fail_addr fa[AUTH_ADDRS];
};

static uint64_t now_ms(void) { return fccl_now_ns() / 1000000u; }

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

/* ---- addresses that keep failing ---- */

static struct fail_addr *fail_find(struct store_auth *a, const char *ip,
                                   int add)
{
    struct fail_addr *lru = NULL;
    for (int i = 0; i < AUTH_ADDRS; i++) {
        struct fail_addr *f = &a->fa[i];
        if (f->ip[0] && !strcmp(f->ip, ip))
            return f;
        if (!lru || f->last_ms < lru->last_ms)
            lru = f;
    }
    if (!add)
        return NULL;
    memset(lru, 0, sizeof(*lru));
    snprintf(lru->ip, sizeof(lru->ip), "%s", ip);
    return lru;
}

static int slowed(const struct fail_addr *f, uint64_t now)
{
    return f && f->fails >= AUTH_ADDR_FAILS &&
           now - f->last_ms <= AUTH_ADDR_WINDOW_MS;
}

static void note_failure(struct store_auth *a, const char *ip, uint64_t now)
{
    struct fail_addr *f = fail_find(a, ip, 1);
    if (now - f->first_ms > AUTH_ADDR_WINDOW_MS && !slowed(f, now)) {
        f->fails = 0;
        f->first_ms = now;
    }
    f->fails++;
    f->last_ms = now;
}

static void on_defer(evutil_socket_t fd, short what, void *arg)
{
    struct store_conn *c = arg;
    struct store_server *s = c->s;
    uint64_t t0 = store_turn_begin();
    (void)fd;
    (void)what;
    c->deferred = 0;
    s->life->resume(c); /* runs the proof now; may free c */
    store_turn_end(s, t0);
}

/* A slowed address: the proof waits for its turn.  FCCL_OK when it may
 * run now, STORE_DEFER (c's timer armed), or an error closing c. */
static int wait_turn(struct store_server *s, struct store_conn *c,
                     const char *ip)
{
    uint64_t now = now_ms();
    struct fail_addr *f = fail_find(s->auth, ip, 0);
    if (!c->proof_at_ms) {
        if (!slowed(f, now))
            return FCCL_OK;
        uint64_t at = f->next_ms > now ? f->next_ms : now;
        if (at - now > AUTH_SLOW_QUEUE_MS)
            return fccl_err(FCCL_ERR_AUTH, "AUTH_PROOF refused untried: %s "
                            "keeps failing token proofs and %llu s of them "
                            "are queued (%d a second are taken)", ip,
                            (unsigned long long)((at - now) / 1000),
                            1000 / AUTH_SLOW_MS);
        f->next_ms = at + AUTH_SLOW_MS;
        c->proof_at_ms = at;
    }
    if (now >= c->proof_at_ms) {
        c->proof_at_ms = 0;
        return FCCL_OK;
    }
    if (!c->defer_ev && !(c->defer_ev = evtimer_new(s->base, on_defer, c)))
        return fccl_err(FCCL_ERR_NOMEM, "AUTH_PROOF: timer");
    uint64_t ms = c->proof_at_ms - now;
    struct timeval tv = {(time_t)(ms / 1000), (suseconds_t)(ms % 1000) * 1000};
    if (evtimer_add(c->defer_ev, &tv) < 0)
        return fccl_err(FCCL_ERR_NOMEM, "AUTH_PROOF: timer");
    c->deferred = 1;
    s->st.auth_deferred++;
    return STORE_DEFER;
}

void store_auth_conn_free(struct store_conn *c)
{
    if (c->defer_ev)
        event_free(c->defer_ev);
    c->defer_ev = NULL;
}

static void refused_proof(struct store_server *s, struct store_conn *c,
                          const char *ip)
{
    s->st.auth_refused++;
    c->auth_fails++;
    note_failure(s->auth, ip, now_ms());
    store_quiet_warn(s, QUIET_PROOF, ip, "client %s: token refused (not "
                     "the server's token); %d refused proofs close a "
                     "connection, %d from one address in %d s slow it to "
                     "one proof a second", c->addr, AUTH_CONN_FAILS,
                     AUTH_ADDR_FAILS, AUTH_ADDR_WINDOW_MS / 1000);
    if (c->auth_fails < AUTH_CONN_FAILS)
        return;
    store_quiet_warn(s, QUIET_AUTH_CLOSED, ip, "closing client %s after %d "
                     "refused token proofs", c->addr, (int)c->auth_fails);
    c->close_after = 1; /* once the refusal is sent */
}

static int proof(struct store_server *s, struct store_conn *c,
                 const struct codec_req *r)
{
    if (!s->auth)
        return fccl_err(FCCL_ERR_PROTOCOL, "AUTH_PROOF, but this server "
                        "has no tokens");
    if (!c->nonce_set)
        return fccl_err(FCCL_ERR_PROTOCOL, "AUTH_PROOF without AUTH_HELLO");
    char ip[48];
    store_ip_of(c->addr, ip, sizeof(ip));
    int rc = wait_turn(s, c, ip);
    if (rc != FCCL_OK)
        return rc;
    const uint8_t *cnonce = r->val.p, *mac = r->val.p + AUTH_NONCE_LEN;
    const struct store_auth *a = s->auth;
    uint8_t res = proves(a->rw, a->rwlen, c, cnonce, mac)   ? AUTH_READ_WRITE
                  : proves(a->ro, a->rolen, c, cnonce, mac) ? AUTH_READ_ONLY
                                                            : AUTH_REFUSED;
    c->nonce_set = 0; /* one proof per challenge */
    if (res == AUTH_REFUSED)
        refused_proof(s, c, ip);
    else
        LOG_DEBUG("STORE", "client %s authenticated (%s)", c->addr,
                  res == AUTH_READ_WRITE ? "read-write" : "read-only");
    if (res != AUTH_REFUSED)
        c->auth = res;
    store_conn_reply(c, &res, 1);
    return 1;
}

/* ---- the fccl hello ---- */

/* Tell c why it is refused (~nonce, code, reason), then close it. */
static int tell(struct store_conn *c, uint32_t nonce, uint8_t code,
                const char *msg)
{
    uint8_t h[4 + 1 + 8];
    size_t n = strnlen(msg, SYNC_MSG_MAX);
    codec_set_u32(h, ~nonce);
    h[4] = code;
    codec_set_u64(h + 5, n);
    store_conn_reply(c, h, sizeof(h));
    store_conn_reply(c, msg, n);
    c->close_after = 1;
    return 1;
}

static int fccl_hello(struct store_server *s, struct store_conn *c,
                      uint32_t n)
{
    if (c->refused)
        return tell(c, n, c->refuse_code, c->refuse_msg);
    uint32_t ack = n | STORE_HELLO_ACK;
    /* Without a token only PING is served: say so (the client then
     * explains a close, and refuses the rest itself). */
    if (s->auth && s->cfg.auth_required && !c->auth &&
        !(n & STORE_HELLO_TOKEN))
        ack |= STORE_HELLO_NEEDS_TOKEN;
    /* An fccl client fences its writes with SYNC once it has this ack,
     * even its first: it reports refused writes, as after a SYNC. */
    c->fccl = 1;
    c->sync_aware = 1;
    uint8_t b[4];
    codec_set_u32(b, ack);
    store_conn_reply(c, b, sizeof(b));
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
    int is_hello = r->op == OP_PING && c->dialect == DIALECT_MODERN &&
                   STORE_IS_HELLO(r->u32);
    if (c->refused && r->op != OP_VALIDATE && !is_hello)
        return fccl_err(FCCL_ERR_AUTH, "%s on a refused connection (%s)",
                        codec_op_name(r->op), c->refuse_msg);
    switch (r->op) {
    case OP_VALIDATE:
        if (c->validated)
            return fccl_err(FCCL_ERR_PROTOCOL, "a second VALIDATE");
        c->validated = 1;
        return FCCL_OK;
    case OP_PING:
        return is_hello ? fccl_hello(s, c, r->u32) : FCCL_OK;
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
