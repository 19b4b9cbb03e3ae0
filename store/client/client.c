/*
 * Store client, part 1: handles, the connection (connect with backoff,
 * reconnect, sticky failure), request encoding and buffered reply reads.
 * The WAIT protocol and the single-key operations are in client_ops.c,
 * the multi-key ones, key listing and queues in client_multi.c.
 */
#include <errno.h>
#include <poll.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/time.h>
#include <time.h>
#include <unistd.h>

#include "client_int.h"
#include "clock.h"
#include "err.h"
#include "log.h"

#define BACKOFF_FIRST_US 1000
#define BACKOFF_CAP_US 250000
/* Longest a blocking recv sleeps before looking at its deadline again. */
#define RECV_SLICE_MS 1000

void fccl_store_opts_init(fccl_store_opts_t *opts)
{
    memset(opts, 0, sizeof(*opts));
    opts->dialect = FCCL_DIALECT_MODERN;
}

/* ---- connection lifecycle ---- */

static void conn_drop_fd(struct store_client_conn *c)
{
    sc_tls_drop(c);
    if (c->fd >= 0)
        close(c->fd);
    c->fd = -1;
    c->rpos = c->rlen = 0;
    c->hello_due = 0;
    codec_buf_reset(&c->out);
    c->out.oom = 0;
}

/* Sleep for `us` microseconds, jittered to 50..150 % so that many ranks
 * started together do not retry in lockstep, never past the deadline. */
static void backoff_sleep(uint64_t us, unsigned *seed, uint64_t deadline)
{
    uint64_t j = us / 2 + (uint64_t)rand_r(seed) % (us + 1);
    uint64_t now = fccl_now_ns();
    if (deadline != UINT64_MAX && now + j * 1000 > deadline)
        j = deadline > now ? (deadline - now) / 1000 : 0;
    struct timespec ts = {.tv_sec = (time_t)(j / 1000000),
                          .tv_nsec = (long)(j % 1000000) * 1000};
    while (nanosleep(&ts, &ts) < 0 && errno == EINTR)
        ;
}

/* VALIDATE, and in the same send the fccl hello (codec.h): a PING whose
 * nonce says "fccl client" (and whether a token follows).  Its reply is
 * read with the first reply the connection needs (sc_hello_reply), so
 * connecting costs no round trip; tcpstore-server answers it with why it
 * refuses the connection, if it does. */
static int send_validate(struct store_client_conn *c, uint64_t deadline)
{
    uint8_t msg[10];
    msg[0] = (uint8_t)codec_op_to_wire(DIALECT_MODERN, OP_VALIDATE);
    codec_set_u32(msg + 1, STORE_VALIDATE_MAGIC);
    msg[5] = (uint8_t)codec_op_to_wire(DIALECT_MODERN, OP_PING);
    c->hello_nonce = STORE_HELLO_BASE | (c->token ? STORE_HELLO_TOKEN : 0);
    codec_set_u32(msg + 6, c->hello_nonce);
    int rc = sc_send(c, msg, sizeof(msg), deadline);
    if (rc < 0)
        return fccl_err_wrap(FCCL_ERR_CONNECT, "store %s: VALIDATE",
                             c->addr);
    c->hello_due = 1;
    return FCCL_OK;
}

static int read_raw(struct store_client_conn *c, void *p, size_t n,
                    uint64_t deadline);

/* A refusal after the hello: u8 code (SYNC_* numbers), the reason. */
static int hello_refused(struct store_client_conn *c, uint64_t deadline)
{
    uint8_t h[9];
    char msg[SYNC_MSG_MAX + 1];
    int rc = read_raw(c, h, sizeof(h), deadline);
    uint64_t n = rc == FCCL_OK ? codec_get_u64(h + 1) : 0;
    if (rc == FCCL_OK && n > SYNC_MSG_MAX)
        return fccl_err(FCCL_ERR_PROTOCOL, "a refusal of %llu bytes",
                        (unsigned long long)n);
    if (rc == FCCL_OK)
        rc = read_raw(c, msg, (size_t)n, deadline);
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
    int rc = read_raw(c, b, sizeof(b), deadline);
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

/* Connect, retrying refused (and unanswered) connects with exponential
 * backoff until the deadline: the server may start after its clients.
 * PyTorch retries once a second, which is what makes its rendezvous slow. */
static int conn_open_once(struct store_client_conn *c, uint64_t deadline)
{
    uint64_t t0 = fccl_now_ns(), backoff = BACKOFF_FIRST_US;
    unsigned seed = (unsigned)(t0 ^ (uintptr_t)c ^ (unsigned)getpid());
    int attempts = 0, refused = 0;
    for (;;) {
        attempts++;
        int fd = fccl_tcp_connect(c->host, c->port, deadline);
        if (fd < 0 && strstr(fccl_last_error(), strerror(ECONNREFUSED)))
            refused = 1;
        if (fd >= 0) {
            struct timeval tv = {RECV_SLICE_MS / 1000,
                                 (RECV_SLICE_MS % 1000) * 1000};
            setsockopt(fd, SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof(tv));
            c->fd = fd;
            c->rpos = c->rlen = 0;
            c->answered = 0;
            LOG_DEBUG("STORE", "connected to %s after %d attempt(s)",
                      c->addr, attempts);
            break;
        }
        if (fd != FCCL_ERR_CONNECT && fd != FCCL_ERR_TIMEOUT)
            return fd;
        if (c->nalt > 1) { /* the next server of the list */
            c->alt = (c->alt + 1) % c->nalt;
            snprintf(c->host, sizeof(c->host), "%s", c->alts[c->alt].host);
            c->port = c->alts[c->alt].port;
            LOG_DEBUG("STORE", "store %s: trying %s:%d", c->addr, c->host,
                      c->port);
        }
        if (fd == FCCL_ERR_TIMEOUT || fccl_ms_left(deadline) == 0)
            return fccl_err_wrap(FCCL_ERR_CONNECT,
                                 "store %s: cannot connect (gave up after "
                                 "%d attempts in %.1f s%s)",
                                 c->addr, attempts,
                                 (double)(fccl_now_ns() - t0) / 1e9,
                                 refused ? "; connection refused: no server "
                                       "is listening there (not started, "
                                       "or another port)"
                                     : "");
        backoff_sleep(backoff, &seed, deadline);
        backoff = backoff * 2 > BACKOFF_CAP_US ? BACKOFF_CAP_US : backoff * 2;
    }
    int rc = sc_tls_start(c, deadline);
    if (rc < 0) {
        conn_drop_fd(c);
        return rc;
    }
    if (c->dialect == DIALECT_MODERN) {
        rc = send_validate(c, deadline);
        if (rc == FCCL_OK)
            rc = sc_auth(c, deadline);
        if (rc < 0) {
            conn_drop_fd(c);
            return rc;
        }
    }
    return FCCL_OK;
}

/* A reconnect can land in the backlog of a server that is dying (its
 * listener closes after the connection we saw drop) or not yet serving:
 * the handshake, VALIDATE or AUTH is then cut short.  Worth another try. */
static int setup_cut_short(const struct store_client_conn *c, int rc)
{
    if (!c->reconnect || !c->was_up)
        return 0;
    return rc == FCCL_ERR_CLOSED || rc == FCCL_ERR_IO ||
           rc == FCCL_ERR_CONNECT ||
           (rc == FCCL_ERR_AUTH &&
            strstr(fccl_last_error(), "closed the connection"));
}

static int conn_open(struct store_client_conn *c, uint64_t deadline)
{
    for (int tries = 1;; tries++) {
        int rc = conn_open_once(c, deadline);
        if (rc == FCCL_OK) {
            c->was_up = 1;
            return rc;
        }
        if (!setup_cut_short(c, rc) || tries >= 50 || fccl_ms_left(deadline) <= 0)
            return rc;
        struct timespec ts = {0, 20 * 1000000L};
        nanosleep(&ts, NULL);
    }
}

static void conn_destroy(struct store_client_conn *c)
{
    conn_drop_fd(c);
    sc_tls_free(c);
    sc_auth_free(c);
    codec_buf_free(&c->out);
    pthread_mutex_destroy(&c->mu);
    free(c);
}

static void conn_unref(struct store_client_conn *c)
{
    pthread_mutex_lock(&c->mu);
    int last = --c->refs == 0;
    pthread_mutex_unlock(&c->mu);
    if (last)
        conn_destroy(c);
}

static int64_t default_timeout(int64_t opt_ms)
{
    if (opt_ms > 0)
        return opt_ms;
    int64_t ms = fccl_env_timeout_ms(FCCL_DEFAULT_TIMEOUT_MS);
    return ms > 0 ? ms : FCCL_DEFAULT_TIMEOUT_MS;
}

/* "H:P" or a list "H:P,H:P,..." of servers of one store. */
static int parse_addrs(struct store_client_conn *c, const char *addr)
{
    if (strlen(addr) >= SC_ADDR_MAX)
        return fccl_err(FCCL_ERR_INVALID, "address list '%.60s...' is over "
                        "%d bytes", addr, SC_ADDR_MAX - 1);
    const char *p = addr;
    while (*p) {
        const char *comma = strchr(p, ',');
        size_t n = comma ? (size_t)(comma - p) : strlen(p);
        char one[FCCL_HOST_MAX + 16];
        if (c->nalt >= SC_ALT_MAX || n == 0 || n >= sizeof(one))
            return fccl_err(FCCL_ERR_INVALID, "address list '%s': %s", addr,
                            n == 0 ? "an empty entry"
                                   : c->nalt >= SC_ALT_MAX
                                         ? "more than 16 addresses"
                                         : "an entry too long");
        memcpy(one, p, n);
        one[n] = '\0';
        struct sc_alt *a = &c->alts[c->nalt];
        int rc = fccl_addr_parse(one, a->host, sizeof(a->host), &a->port);
        if (rc < 0)
            return rc;
        c->nalt++;
        p = comma ? comma + 1 : p + n;
        if (comma && !*p)
            return fccl_err(FCCL_ERR_INVALID, "address list '%s': an empty "
                            "entry", addr);
    }
    if (c->nalt == 0)
        return fccl_err(FCCL_ERR_INVALID, "empty address");
    snprintf(c->host, sizeof(c->host), "%s", c->alts[0].host);
    c->port = c->alts[0].port;
    return FCCL_OK;
}

static int conn_new(const fccl_store_opts_t *o, struct store_client_conn **out)
{
    struct store_client_conn *c = calloc(1, sizeof(*c));
    if (!c)
        return fccl_err(FCCL_ERR_NOMEM, "store %s: out of memory", o->addr);
    int rc = parse_addrs(c, o->addr);
    if (rc < 0) {
        free(c);
        return fccl_err_wrap(rc, "store");
    }
    snprintf(c->addr, sizeof(c->addr), "%s", o->addr);
    pthread_mutex_init(&c->mu, NULL);
    c->refs = 1;
    c->fd = -1;
    c->dialect = o->dialect == FCCL_DIALECT_LEGACY ? DIALECT_LEGACY
                                                   : DIALECT_MODERN;
    c->timeout_ms = default_timeout(o->timeout_ms);
    /* Several servers: moving to the next one is the point. */
    c->reconnect = o->reconnect != 0 || c->nalt > 1;
    c->nonce = (uint32_t)fccl_now_ns() | 1u;
    codec_buf_init(&c->out);
    if ((rc = sc_tls_config(c, o)) < 0 || (rc = sc_auth_config(c, o)) < 0) {
        conn_destroy(c);
        return rc;
    }
    *out = c;
    return FCCL_OK;
}

/* ---- handles ---- */

static int handle_new(struct store_client_conn *c, const char *pre,
                      size_t prelen, fccl_store_t **out)
{
    int rc = store_handle_new(&tcp_store_vt, NULL, c->addr, c->timeout_ms,
                              pre, prelen, out);
    if (rc == FCCL_OK)
        (*out)->c = c;
    return rc;
}

int tcp_store_connect(const fccl_store_opts_t *opts, fccl_store_t **out)
{
    if (!opts || !out || !opts->addr)
        return fccl_err(FCCL_ERR_INVALID, "store connect: no address given");
    *out = NULL;
    struct store_client_conn *c = NULL;
    int rc = conn_new(opts, &c);
    if (rc < 0)
        return rc;
    rc = handle_new(c, "/", opts->raw_keys ? 0 : 1, out);
    if (rc < 0) {
        conn_unref(c);
        return rc;
    }
    rc = conn_open(c, fccl_deadline_ms(c->timeout_ms));
    if (rc < 0) {
        tcp_store_close(*out); /* keeps the thread's message */
        *out = NULL;
        return rc;
    }
    return FCCL_OK;
}

int tcp_store_prefixed(fccl_store_t *parent, const char *prefix,
                       fccl_store_t **out)
{
    if (!parent || !prefix || !out)
        return fccl_err(FCCL_ERR_INVALID, "store prefixed: NULL argument");
    size_t pl = strlen(prefix), n = parent->kprelen + pl;
    char *buf = malloc(n + 1);
    if (!buf)
        return fccl_err(FCCL_ERR_NOMEM, "store prefixed: out of memory");
    memcpy(buf, parent->kpre, parent->kprelen);
    memcpy(buf + parent->kprelen, prefix, pl + 1);
    struct store_client_conn *c = parent->c;
    int rc = handle_new(c, buf, n, out);
    free(buf);
    if (rc < 0)
        return rc;
    pthread_mutex_lock(&c->mu);
    c->refs++;
    pthread_mutex_unlock(&c->mu);
    return FCCL_OK;
}

void tcp_store_close(fccl_store_t *s)
{
    if (!s)
        return;
    conn_unref(s->c);
    store_handle_free(s);
}

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
        conn_drop_fd(c);
    }
    if (c->fd >= 0)
        return FCCL_OK;
    int rc = conn_open(c, k->io_deadline);
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
    conn_drop_fd(c);
    return rc;
}

int sc_soft(struct sc_call *k, int rc, const char *fmt, ...)
{
    char msg[512];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(msg, sizeof(msg), fmt, ap);
    va_end(ap);
    return fccl_err(rc, "store %s: %s%s%s: %s", k->c->addr, k->op,
                    k->what[0] ? " " : "", k->what, msg);
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

/* ---- reading ---- */

int sc_wait_fd(int fd, short events, uint64_t deadline)
{
    for (;;) {
        struct pollfd p = {.fd = fd, .events = events};
        int r = poll(&p, 1, fccl_ms_left(deadline));
        if (r > 0)
            return FCCL_OK;
        if (r == 0)
            return fccl_err(FCCL_ERR_TIMEOUT, "no reply before the deadline");
        if (errno != EINTR)
            return fccl_err_sys(FCCL_ERR_IO, errno, "poll");
    }
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
static int read_raw(struct store_client_conn *c, void *p, size_t n,
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
    return read_raw(c, p, n, deadline);
}

int sc_try_read(struct sc_call *k, void *p, size_t n, uint64_t deadline)
{
    int rc = read_raw(k->c, p, n, deadline);
    return rc < 0 && rc != FCCL_ERR_TIMEOUT ? sc_fail(k, rc) : rc;
}

int sc_read(struct sc_call *k, void *p, size_t n, uint64_t deadline)
{
    int rc = read_raw(k->c, p, n, deadline);
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

int sc_read_bytes(struct sc_call *k, void **val, size_t *len,
                  uint64_t deadline)
{
    uint64_t n = 0;
    int rc = sc_read_u64(k, &n, deadline);
    if (rc < 0)
        return rc;
    if (n > SC_MAX_REPLY_LEN) {
        fccl_err(FCCL_ERR_PROTOCOL, "reply length %llu is beyond any limit",
                 (unsigned long long)n);
        return sc_fail(k, FCCL_ERR_PROTOCOL);
    }
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

/* ---- reply-less writes: SYNC, or a fence ---- */

/* SYNC's reply: u8 status `code` (read), then a message if not OK. */
static int read_sync_reply(struct sc_call *k, uint8_t code)
{
    int rc;
    if (code == SYNC_OK)
        return FCCL_OK;
    void *msg = NULL;
    size_t len = 0;
    if ((rc = sc_read_bytes(k, &msg, &len, k->io_deadline)) < 0)
        return rc;
    int err = code == SYNC_LIMIT    ? FCCL_ERR_LIMIT
              : code == SYNC_NOMEM  ? FCCL_ERR_NOMEM
              : code == SYNC_DENIED ? FCCL_ERR_AUTH
                                    : FCCL_ERR_PROTOCOL;
    rc = sc_soft(k, err, "refused by the server: %.*s",
                 (int)(len > 600 ? 600 : len), (const char *)msg);
    free(msg);
    return rc;
}

/* Learn whether the server has SYNC: a lone SYNC before the first write.
 * A server without it (PyTorch's) closes the connection there, before
 * reading anything behind it; we reconnect and fence with PING instead.
 * c->out is not touched. */
static int probe_sync(struct sc_call *k)
{
    struct store_client_conn *c = k->c;
    uint8_t msg = STORE_EXT_SYNC, code = 0;
    /* The hello's reply is on its way already: a tcpstore-server that
     * acknowledged it has SYNC, no probe needed. */
    int rc = sc_hello_reply(c, k->io_deadline);
    if (rc < 0)
        return sc_fail(k, rc);
    if (c->peer == SC_PEER_FCCL) {
        c->sync = SC_SYNC_YES;
        return FCCL_OK;
    }
    rc = sc_send(c, &msg, 1, k->io_deadline);
    if (rc == FCCL_OK)
        rc = read_raw(c, &code, 1, k->io_deadline);
    if (rc == FCCL_OK) {
        c->sync = SC_SYNC_YES;
        return code == SYNC_OK ? FCCL_OK
                               : sc_read_bytes(k, NULL, NULL, k->io_deadline);
    }
    if (rc != FCCL_ERR_CLOSED)
        return sc_fail(k, rc);
    LOG_DEBUG("STORE", "%s has no SYNC (closed on it): fencing writes with "
              "PING", c->addr);
    c->sync = SC_SYNC_NO;
    struct codec_buf keep = c->out;
    codec_buf_init(&c->out);
    conn_drop_fd(c);
    rc = conn_open(c, k->io_deadline);
    codec_buf_free(&c->out);
    c->out = keep;
    return rc < 0 ? sc_fail(k, rc) : FCCL_OK;
}

/* The fence's reply did not come: the server closed instead. */
static int fence_failed(struct sc_call *k, int rc)
{
    if (rc == FCCL_ERR_CLOSED)
        fccl_err(rc, "the server closed the connection instead of "
                     "confirming the write: it refused it (store full, "
                     "value over its limit, TLS required or not "
                     "authorized; the server's log says which)");
    return sc_fail(k, rc);
}

int sc_flush_write(struct sc_call *k)
{
    struct store_client_conn *c = k->c;
    int rc;
    if (c->dialect == DIALECT_MODERN && c->sync == SC_SYNC_UNKNOWN &&
        (rc = probe_sync(k)) < 0)
        return rc;
    uint32_t nonce = 0;
    if (c->dialect == DIALECT_LEGACY) {
        codec_put_type(&c->out, DIALECT_LEGACY, OP_GETNUMKEYS);
    } else if (c->sync == SC_SYNC_YES) {
        codec_put_u8(&c->out, STORE_EXT_SYNC);
    } else {
        nonce = c->nonce++;
        codec_put_type(&c->out, DIALECT_MODERN, OP_PING);
        codec_put_u32(&c->out, nonce);
    }
    if ((rc = sc_flush(k)) < 0)
        return rc;
    if (c->dialect == DIALECT_MODERN && c->sync == SC_SYNC_YES) {
        uint8_t code;
        rc = read_raw(c, &code, 1, k->io_deadline);
        if (rc < 0)
            return fence_failed(k, rc);
        return read_sync_reply(k, code);
    }
    uint8_t b[8];
    size_t n = c->dialect == DIALECT_LEGACY ? 8 : 4;
    if ((rc = read_raw(c, b, n, k->io_deadline)) < 0)
        return fence_failed(k, rc);
    if (n == 4 && codec_get_u32(b) != nonce) {
        fccl_err(FCCL_ERR_PROTOCOL, "PING after a write echoed %u, sent %u",
                 codec_get_u32(b), nonce);
        return sc_fail(k, FCCL_ERR_PROTOCOL);
    }
    return FCCL_OK;
}

const struct store_vt tcp_store_vt = {
    .kind = "tcpstore",
    .prefixed = tcp_store_prefixed,
    .close = tcp_store_close,
    .set = tcp_store_set,
    .get = tcp_store_get,
    .add = tcp_store_add,
    .compare_set = tcp_store_compare_set,
    .check = tcp_store_check,
    .wait = tcp_store_wait,
    .delete_key = tcp_store_delete,
    .num_keys = tcp_store_num_keys,
    .append = tcp_store_append,
    .multi_get = tcp_store_multi_get,
    .multi_set = tcp_store_multi_set,
    .ping = tcp_store_ping,
    .list_keys = tcp_store_list_keys,
    .stats = tcp_store_stats,
    .barrier = tcp_store_barrier,
    .queue_push = tcp_store_queue_push,
    .queue_pop = tcp_store_queue_pop,
    .queue_len = tcp_store_queue_len,
};
