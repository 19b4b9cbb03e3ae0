/*
 * Internals of the store client (store/client/), not installed.
 *
 * One store_client_conn per TCP connection, shared by a handle and its prefix
 * views.  Every call runs under the connection's mutex as a `struct sc_call`:
 * sc_begin() locks and (re)connects, the op encodes its requests into
 * c->out and sends them with ONE send (sc_flush), reads the replies through
 * a small userspace buffer (sc_read*), and sc_end() unlocks.
 *
 * Failure policy: an I/O error, EOF or protocol violation breaks the
 * connection for good (sticky: every later call returns the first error
 * at once).  A timeout on a request that is not a WAIT leaves replies in
 * flight, so the socket is closed and the next call reconnects; a timed-out
 * WAIT is cancelled on the modern dialect (client_wait.c) and closed the
 * same way on the legacy one, which has no CANCEL_WAIT.  With
 * opts.reconnect, CLOSED, IO and CONNECT are not sticky: the socket is
 * dropped, the next call reconnects, and harmless calls repeat themselves
 * (sc_retry below).
 */
#ifndef FCCL_STORE_CLIENT_INT_H
#define FCCL_STORE_CLIENT_INT_H

#include <pthread.h>
#include <stddef.h>
#include <stdint.h>
#include <sys/types.h>

#include "codec.h"
#include "net.h"
#include "fccl/store.h"
#include "store_vt.h"

#define SC_ADDR_MAX ((FCCL_HOST_MAX + 16) * 4)
#define SC_ALT_MAX 16 /* addresses in one "H:P,H:P" list */
#define SC_RBUF 16384
/* Reply lengths past this are a protocol error (1 GiB is the largest value
 * a server may be configured to hold). */
#define SC_MAX_REPLY_LEN ((uint64_t)1 << 30)
/* Time allowed to drain a cancelled WAIT once the call's own deadline has
 * passed (capped by the handle's default timeout). */
#define SC_DRAIN_MS 10000
/* Longest a blocking recv sleeps before looking at its deadline again
 * (the socket's SO_RCVTIMEO, client_conn.c; client_io.c). */
#define RECV_SLICE_MS 1000

struct store_client_conn {
    pthread_mutex_t mu;
    int refs;                  /* handles (root + views) using it; under mu */
    int fd;                    /* -1: (re)connect on the next call */
    enum store_dialect dialect;
    char addr[SC_ADDR_MAX];    /* as given, for messages */
    char host[FCCL_HOST_MAX];
    int port;
    /* "H:P,H:P,...": the servers in turn (front-ends of one store, see
     * tcpstore-server --backend); a connect that fails moves to the next
     * (client_conn.c).  nalt 1 for a single address. */
    int nalt, alt;
    struct sc_alt {
        char host[FCCL_HOST_MAX];
        int port;
    } alts[SC_ALT_MAX];
    int64_t timeout_ms;        /* handle default, > 0 */
    int broken;                /* sticky first error, 0 while healthy */
    int reconnect;             /* opts.reconnect: CLOSED/IO not sticky */
    int was_up;                /* a connection was set up once */
    char broken_msg[512];
    uint32_t nonce;            /* next PING nonce */
    int answered;              /* a reply byte arrived on this socket */
    int ever_answered;         /* ... on any socket of this handle */
    int hello_due;             /* the fccl hello's reply is still unread */
    uint32_t hello_nonce;
    int peer;                  /* SC_PEER_*: who answered the hello */
    int read_only;             /* the server granted read-only rights */
    int needs_token;           /* its hello: only PING without a token */
    int sync;                  /* SC_SYNC_*: does the server know SYNC? */
    void *tls_ctx;             /* SSL_CTX when TLS is on (client_tls.c) */
    void *ssl;                 /* SSL of the current socket, or NULL */
    char tls_name[FCCL_HOST_MAX]; /* name/IP the certificate must carry */
    char tls_ca[256];          /* for messages ("" = not verifying) */
    unsigned char *token;      /* AUTH token (client_auth.c), or NULL */
    size_t token_len;
    struct codec_buf out;      /* request encoding buffer, reused */
    size_t rpos, rlen;         /* unread reply bytes: rbuf[rpos..rlen) */
    uint8_t rbuf[SC_RBUF];
};

/* Whether the server answers SYNC (0x81), learnt at the first reply-less
 * write and kept across reconnects (same address, same server kind). */
enum { SC_SYNC_UNKNOWN, SC_SYNC_YES, SC_SYNC_NO };

/* Who answered the fccl hello (codec.h): nobody yet, tcpstore-server
 * (it acknowledged), or another server (it echoed, as PyTorch's do). */
enum { SC_PEER_UNKNOWN, SC_PEER_FCCL, SC_PEER_OTHER };

/* The hello's reply, if it is still due: read it now.  FCCL_OK, the
 * refusal the server gave (FCCL_ERR_LIMIT, FCCL_ERR_AUTH, ... with its
 * reason), or the read's error. */
int sc_hello_reply(struct store_client_conn *c, uint64_t deadline);


/* One library call in progress, for encoding and error messages. */
struct sc_call {
    fccl_store_t *s;
    struct store_client_conn *c;
    const char *op;       /* "GET", ... */
    char what[200];       /* the key(s) involved, quoted, or "" */
    uint64_t io_deadline; /* for replies that do not wait for keys */
    uint64_t t0;          /* when the call started (fccl_now_ns) */
};

/* Lock the connection, fail fast if broken, connect if needed.  On error
 * the mutex is NOT held.  `key` (may be NULL) names the key in messages. */
int sc_begin(struct sc_call *k, fccl_store_t *s, const char *op,
             const char *key);
/* Same, naming several keys ("'/a', '/b' and 3 more"). */
int sc_begin_keys(struct sc_call *k, fccl_store_t *s, const char *op,
                  const char *const *keys, size_t n);
void sc_end(struct sc_call *k);

/* Turn the thread's current message into "store ADDR: OP 'key': msg" and
 * apply the failure policy above (timeouts close, others break). */
int sc_fail(struct sc_call *k, int rc);
/* Report an error that leaves the connection usable (bad argument,
 * unsupported op, key not found, a wait that was cancelled cleanly). */
int sc_soft(struct sc_call *k, int rc, const char *fmt, ...)
    __attribute__((format(printf, 3, 4)));

/* Start a request for `op` in c->out; FCCL_ERR_UNSUPPORTED (with a
 * message) if the connection's dialect lacks it. */
int sc_put_op(struct sc_call *k, enum store_op op);
/* Append a key as a wire string: the handle's prefix, then key. */
void sc_put_key(struct sc_call *k, const char *key);
/* Append "u64 n, n keys". */
void sc_put_keys(struct sc_call *k, const char *const *keys, size_t n);

/* Send everything in c->out with one send() and reset it. */
int sc_flush(struct sc_call *k);

/* May GET or MULTI_GET go out behind a CHECK in one send (one round trip
 * when the keys exist)?  Only where a missing key reads as an empty value:
 * tcpstore-server (it acknowledged the hello; read now if still due).
 * PyTorch's classic server (2.x without libuv, Debian 13's) closes the
 * connection on a GET or MULTI_GET of a missing key, and a legacy
 * connection has no CHECK-then-fetch either.  1 yes, 0 no, or the hello
 * reply's error (already applied to the call, sc_fail). */
int sc_fetch_pipelined(struct sc_call *k);

/*
 * Send the reply-less write(s) in c->out (SET, APPEND, MULTI_SET,
 * QUEUE_PUSH) followed by a fence whose reply tells their outcome:
 * SYNC where the server has it (tcpstore-server, modern dialect), else a
 * PING (modern) or GETNUMKEYS (legacy), whose reply proves the server read
 * the writes without closing the connection.  Whether the server has SYNC
 * is learnt once per connection with a lone SYNC before the first write;
 * a server that closes on it (PyTorch's) is reconnected and fenced with
 * PING from then on.  FCCL_OK; the refusal SYNC reported (FCCL_ERR_LIMIT,
 * FCCL_ERR_NOMEM, FCCL_ERR_AUTH, FCCL_ERR_PROTOCOL; the connection stays
 * usable); or the connection's error (closed, timeout).
 */
int sc_flush_write(struct sc_call *k);

/* Wait until fd has `events` (POLLIN, POLLOUT) before the deadline:
 * FCCL_OK, FCCL_ERR_TIMEOUT ("no reply before the deadline") or
 * FCCL_ERR_IO. */
int sc_wait_fd(int fd, short events, uint64_t deadline);

/* Read exactly n reply bytes before the deadline. */
int sc_read(struct sc_call *k, void *p, size_t n, uint64_t deadline);
int sc_read_u8(struct sc_call *k, uint8_t *v, uint64_t deadline);
/* Like sc_read but a timeout is returned as FCCL_ERR_TIMEOUT without
 * touching the connection (the WAIT path cancels instead). */
int sc_try_read(struct sc_call *k, void *p, size_t n, uint64_t deadline);
int sc_read_u64(struct sc_call *k, uint64_t *v, uint64_t deadline);
int sc_read_i64(struct sc_call *k, int64_t *v, uint64_t deadline);
/* Read a u64 count into *n; above max it is FCCL_ERR_PROTOCOL ("WHAT N is
 * beyond any limit") and the connection is failed. */
int sc_read_count(struct sc_call *k, uint64_t *n, uint64_t max,
                  const char *what, uint64_t deadline);
/* Read a CHECK reply: *ready = 1 for READY, 0 for NOT_READY. */
int sc_read_ready(struct sc_call *k, int *ready);
/* Read a u64-length-prefixed buffer into malloc'd *val (NUL-terminated);
 * val NULL discards it. */
int sc_read_bytes(struct sc_call *k, void **val, size_t *len,
                  uint64_t deadline);

/*
 * The WAIT protocol (client_wait.c).  Call after flushing a WAIT(keys)
 * with nothing behind it.  Waits for STOP_WAITING until `deadline`; on
 * timeout cancels the wait (modern: CANCEL_WAIT, then reads up to
 * WAIT_CANCELED, so the connection is clean) or closes the connection
 * (legacy).  Returns FCCL_OK when the keys exist (also when they arrived
 * as the cancel was on its way), FCCL_ERR_TIMEOUT naming the keys still
 * missing, or another error.
 */
int sc_wait_reply(struct sc_call *k, const char *const *keys, size_t n,
                  uint64_t deadline);
/* The deadline of the WAIT (or BARRIER) in flight passed: CANCEL_WAIT, then
 * read up to WAIT_CANCELED before dl.  1 if it completed as the cancel went
 * out (STOP_WAITING came first), 0 if it was cancelled, or an error. */
int sc_cancel_wait(struct sc_call *k, uint64_t dl);
/* A reply byte that is none of those due: FCCL_ERR_PROTOCOL, applied. */
int sc_bad_byte(struct sc_call *k, const char *what, uint8_t b);
/* Seconds since the call began, for timeout messages. */
double sc_elapsed_s(const struct sc_call *k);

/*
 * Reconnect (opts.reconnect).  A harmless-to-repeat call runs as
 *   dl = sc_retry_deadline(s, timeout_ms);
 *   do rc = once(..., sc_retry_timeout(timeout_ms, dl, tries));
 *   while (sc_retry(s, rc, dl, &tries));
 * sc_retry says whether rc is a dropped connection (CLOSED, IO) on a
 * reconnecting handle with time left; the next attempt's sc_begin opens a
 * new connection (backoff, TLS, VALIDATE, AUTH).  Calls that must not be
 * repeated (ADD, APPEND, ...) do not loop: their error is reported and the
 * next call reconnects.
 */
#define SC_RETRY_MAX 4 /* repeats of one call after dropped connections */
uint64_t sc_retry_deadline(const fccl_store_t *s, int64_t timeout_ms);
int64_t sc_retry_timeout(int64_t timeout_ms, uint64_t dl, int tries);
int sc_retry(const fccl_store_t *s, int rc, uint64_t dl, int *tries);

/* Deadline of a call: timeout_ms < 0 means the handle's default. */
uint64_t sc_call_deadline(const struct sc_call *k, int64_t timeout_ms);

/* Quote up to a few keys (as sent: with the handle's prefix) into out. */
void sc_describe_keys(const struct sc_call *k, const char *const *keys,
                      size_t n, char *out, size_t outlen);

/* One reply-less write of a value at a single key (SET, APPEND,
 * QUEUE_PUSH) with its fence: a whole call, begin to end. */
int sc_key_value(fccl_store_t *s, enum store_op op, const char *name,
                 const char *key, const void *val, size_t len);

/* One request of `op` with a single key whose reply is an i64 (DELETE_KEY,
 * QUEUE_LEN): a whole call, begin to end. */
int sc_key_i64(fccl_store_t *s, enum store_op op, const char *name,
               const char *key, int64_t *out);

/* ---- TLS (client_tls.c) ---- */

/* Build c->tls_ctx from the options when TLS is asked for (FCCL_OK and no
 * context otherwise).  FCCL_ERR_AUTH names a file that does not load or is
 * readable by others. */
int sc_tls_config(struct store_client_conn *c, const fccl_store_opts_t *o);
/* Handshake on the freshly connected c->fd (no-op without TLS); leaves
 * the socket non-blocking.  FCCL_ERR_AUTH (or TIMEOUT) naming the cause. */
int sc_tls_start(struct store_client_conn *c, uint64_t deadline);
/* Free the SSL of the socket (before it is closed). */
void sc_tls_drop(struct store_client_conn *c);
/* Free the context (connection teardown). */
void sc_tls_free(struct store_client_conn *c);
/* Load opts->token_file into c (client_auth.c); FCCL_OK without one. */
int sc_auth_config(struct store_client_conn *c, const fccl_store_opts_t *o);
/* Prove the token after VALIDATE (no-op without one).  FCCL_ERR_AUTH
 * naming the cause (refused, server without tokens or without AUTH). */
int sc_auth(struct store_client_conn *c, uint64_t deadline);
void sc_auth_free(struct store_client_conn *c);
/* Send all of p over TLS before the deadline (SIGPIPE held back). */
int sc_tls_send(struct store_client_conn *c, const void *p, size_t n,
                uint64_t deadline);
/* One TLS read of up to cap bytes: the count, or a status. */
ssize_t sc_tls_recv(struct store_client_conn *c, void *buf, size_t cap,
                    uint64_t deadline);

/* ---- the connection (client_conn.c) ---- */

/* A connection for the options (addresses parsed, TLS and token loaded),
 * not yet connected, with one reference. */
int sc_conn_new(const fccl_store_opts_t *o, struct store_client_conn **out);
/* Connect (backoff, the next server of a list, TLS, VALIDATE, AUTH)
 * before the deadline; a setup cut short on a reconnect is tried again. */
int sc_conn_open(struct store_client_conn *c, uint64_t deadline);
/* Close the socket (the next call reconnects); unread bytes are lost. */
void sc_conn_drop(struct store_client_conn *c);
/* Drop one handle's reference; the last frees the connection. */
void sc_conn_unref(struct store_client_conn *c);

/* ---- the connection's bytes (client_io.c) ---- */

/* Send all of p (TLS or plain) before the deadline. */
int sc_send(struct store_client_conn *c, const void *p, size_t n,
            uint64_t deadline);
/* Read exactly n reply bytes (the hello's reply first, if due); a timeout
 * is returned without a message, so the WAIT path can cancel. */
int sc_read_raw(struct store_client_conn *c, void *p, size_t n,
                uint64_t deadline);
/* Read exactly n reply bytes outside a call (connection setup). */
int sc_conn_read(struct store_client_conn *c, void *p, size_t n,
                 uint64_t deadline);

/* ---- the TCPStore's table (tcp_store.c) and its entries ---- */

extern const struct store_vt tcp_store_vt;

int tcp_store_prefixed(fccl_store_t *parent, const char *prefix,
                       fccl_store_t **out);
void tcp_store_close(fccl_store_t *s);
int tcp_store_set(fccl_store_t *s, const char *key, const void *val,
                  size_t len);
int tcp_store_get(fccl_store_t *s, const char *key, void **val, size_t *len,
                  int64_t timeout_ms);
int tcp_store_add(fccl_store_t *s, const char *key, int64_t delta,
                  int64_t *out);
int tcp_store_compare_set(fccl_store_t *s, const char *key,
                          const void *expected, size_t elen,
                          const void *desired, size_t dlen, void **cur,
                          size_t *curlen);
int tcp_store_check(fccl_store_t *s, const char *const *keys, size_t n,
                    int *all_present);
int tcp_store_wait(fccl_store_t *s, const char *const *keys, size_t n,
                   int64_t timeout_ms);
int tcp_store_delete(fccl_store_t *s, const char *key, int *deleted);
int tcp_store_num_keys(fccl_store_t *s, int64_t *n);
int tcp_store_append(fccl_store_t *s, const char *key, const void *val,
                     size_t len);
int tcp_store_multi_get(fccl_store_t *s, const char *const *keys, size_t n,
                        void **vals, size_t *lens, int64_t timeout_ms);
int tcp_store_multi_set(fccl_store_t *s, const char *const *keys,
                        const void *const *vals, const size_t *lens,
                        size_t n);
int tcp_store_ping(fccl_store_t *s, double *rtt_us);
int tcp_store_list_keys(fccl_store_t *s, const char *prefix, char ***keys,
                        size_t *n);
int tcp_store_stats(fccl_store_t *s, char **text, size_t *len);
int tcp_store_barrier(fccl_store_t *s, const char *key, int64_t world_size,
                      int64_t timeout_ms);
int tcp_store_queue_push(fccl_store_t *s, const char *key, const void *val,
                         size_t len);
int tcp_store_queue_pop(fccl_store_t *s, const char *key, int block,
                        void **val, size_t *len, int64_t timeout_ms);
int tcp_store_queue_len(fccl_store_t *s, const char *key, int64_t *n);

#endif
