/*
 * Store client: one connection's life (store_client_conn): the address
 * list, connecting with backoff and to the next server of a list, TLS,
 * VALIDATE with the fccl hello, AUTH; reconnecting after a cut-short
 * setup; the references handles hold.
 */
#include <errno.h>
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

void sc_conn_drop(struct store_client_conn *c)
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
        sc_conn_drop(c);
        return rc;
    }
    if (c->dialect == DIALECT_MODERN) {
        rc = send_validate(c, deadline);
        if (rc == FCCL_OK)
            rc = sc_auth(c, deadline);
        if (rc < 0) {
            sc_conn_drop(c);
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

int sc_conn_open(struct store_client_conn *c, uint64_t deadline)
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
    sc_conn_drop(c);
    sc_tls_free(c);
    sc_auth_free(c);
    codec_buf_free(&c->out);
    pthread_mutex_destroy(&c->mu);
    free(c);
}

void sc_conn_unref(struct store_client_conn *c)
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

int sc_conn_new(const fccl_store_opts_t *o, struct store_client_conn **out)
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
