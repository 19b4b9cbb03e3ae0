/*
 * fccl store client: a TCPStore client that speaks PyTorch's protocol
 * (modern dialect by default, legacy on request) to tcpstore-server or to a
 * PyTorch TCPStore server.
 *
 * A handle owns one TCP connection (shared with the prefix views made from
 * it) and is safe to use from several threads: calls are serialized on the
 * connection.  Keys are C strings.  Like PyTorch's client, the handle sends
 * every key with the prefix "/" (so a script's `tcpstore set a` and a
 * PyTorch program's store.set("a") meet on the wire key "/a"), unless
 * raw_keys is set.  Values are binary byte strings.
 *
 * Every call returns FCCL_OK or a negative FCCL_ERR_* code and leaves a
 * message (fccl_last_error()) naming the server address, the key and the
 * cause.  timeout_ms < 0 in a call means the handle's default timeout.
 * Calls that wait (get, wait, multi_get) fail with FCCL_ERR_TIMEOUT after
 * the timeout, cancel their wait on the server, and name the keys still
 * missing.  A handle whose connection broke returns FCCL_ERR_CLOSED (or the
 * first error) from every later call.
 */
#ifndef FCCL_STORE_H
#define FCCL_STORE_H

#include <stddef.h>
#include <stdint.h>

#include "fccl/core.h"

#ifdef __cplusplus
extern "C" {
#endif

typedef struct fccl_store fccl_store_t;

typedef enum {
    FCCL_DIALECT_MODERN = 0, /* PyTorch >= 2.1 and tcpstore-server */
    FCCL_DIALECT_LEGACY = 1, /* PyTorch <= 2.0 servers */
} fccl_dialect_t;

typedef struct fccl_store_opts {
    const char *addr;       /* "HOST:PORT" or "[V6]:PORT"; required */
    int64_t timeout_ms;     /* default per-call and connect timeout;
                               <= 0 means FCCL_TIMEOUT or 300 s */
    fccl_dialect_t dialect; /* default modern */
    int raw_keys;           /* send keys as given, without "/" */
    /* TLS (tcpstore-server --tls-cert/--tls-key).  TLS is used when `tls`
     * is set or any of the four paths below is given.  The strings are
     * read during fccl_store_connect only (the handle keeps copies). */
    int tls;
    const char *tls_ca;     /* PEM CA file: verify the server's certificate
                               (chain, dates and name); NULL: encrypt
                               without verifying who answers */
    const char *tls_cert;   /* PEM client certificate (mutual TLS: the
                               server's --tls-ca) */
    const char *tls_key;    /* PEM key of tls_cert; refused when its mode
                               gives group or other any access (& 077) */
    const char *tls_server_name; /* name (or IP literal) the server's
                               certificate must carry; NULL: the host of
                               addr (an IP literal matches an IP
                               subjectAltName) */
    const char *token_file; /* token (one line, >= 16 bytes, mode 0600 or
                               stricter) proven to tcpstore-server after
                               VALIDATE (AUTH_HELLO/AUTH_PROOF; the token is
                               never sent); NULL: no authentication */
} fccl_store_opts_t;

/* Fill opts with defaults (addr NULL, timeout 0 = default, modern). */
void fccl_store_opts_init(fccl_store_opts_t *opts);

/* Fill the TLS and token fields of opts from the environment variables
 * PREFIX_TLS_CA, PREFIX_TLS_CERT, PREFIX_TLS_KEY, PREFIX_TLS_SERVER_NAME
 * and PREFIX_TOKEN_FILE (prefix "FCCL_STORE" for fccl_init, "TCPSTORE" for the tools); unset or
 * empty variables leave the field as it is.  The strings point into the
 * environment.  Not thread-safe against setenv. */
FCCL_API void fccl_store_opts_env(fccl_store_opts_t *opts, const char *prefix);

/* Connect, retrying refused connects with exponential backoff and jitter
 * (from 1 ms, capped at 250 ms) until the timeout, so the server may start
 * after the client.  Modern dialect sends VALIDATE first.
 * With TLS, the handshake follows the TCP connect; its failures are not
 * retried.
 * Errors: FCCL_ERR_INVALID (bad addr), FCCL_ERR_CONNECT (retries ran out),
 * FCCL_ERR_NOMEM, FCCL_ERR_AUTH (a TLS or token file does not load or is
 * readable by others, the server refused the token or has no tokens, the server's certificate is not trusted, expired or for
 * another name, the server does not speak TLS or refused our certificate;
 * the message names which). */
int fccl_store_connect(const fccl_store_opts_t *opts, fccl_store_t **out);

/* A view of `parent` that prepends `prefix` to every key (after the "/"
 * when not raw), sharing its connection.  Views nest.  Close each view;
 * the connection is closed with the last handle using it. */
int fccl_store_prefixed(fccl_store_t *parent, const char *prefix,
                        fccl_store_t **out);

/* Close the handle (and the connection if it was the last user). NULL ok. */
void fccl_store_close(fccl_store_t *store);

/* The server address and the effective default timeout of the handle. */
const char *fccl_store_addr(const fccl_store_t *store);
int64_t fccl_store_timeout_ms(const fccl_store_t *store);

int fccl_store_set(fccl_store_t *s, const char *key, const void *val,
                   size_t len);

/* Wait up to timeout_ms for `key`, then fetch it.  *val is malloc'd (with a
 * NUL after the last byte, not counted in *len); caller frees. */
int fccl_store_get(fccl_store_t *s, const char *key, void **val, size_t *len,
                   int64_t timeout_ms);

/* Atomically add delta to the decimal integer stored at key (missing = 0);
 * *out (may be NULL) receives the new value. */
int fccl_store_add(fccl_store_t *s, const char *key, int64_t delta,
                   int64_t *out);

/* PyTorch's compare_set: if the stored value equals expected (or the key is
 * missing and expected is empty) store desired.  *cur (may be NULL; else
 * malloc'd, caller frees) receives the server's reply: the value stored
 * afterwards, or `expected` for a missing key with non-empty expected. */
int fccl_store_compare_set(fccl_store_t *s, const char *key,
                           const void *expected, size_t elen,
                           const void *desired, size_t dlen, void **cur,
                           size_t *curlen);

/* *all_present = 1 if every key exists now, else 0. Does not wait. */
int fccl_store_check(fccl_store_t *s, const char *const *keys, size_t n,
                     int *all_present);

/* Block until every key exists or the timeout (FCCL_ERR_TIMEOUT). */
int fccl_store_wait(fccl_store_t *s, const char *const *keys, size_t n,
                    int64_t timeout_ms);

/* *deleted (may be NULL) = 1 if the key existed. */
int fccl_store_delete(fccl_store_t *s, const char *key, int *deleted);

/* Number of keys on the server (all keys, not only this view's). */
int fccl_store_num_keys(fccl_store_t *s, int64_t *n);

/* Append bytes to the value (creating it). Needs modern or PyTorch 2.0. */
int fccl_store_append(fccl_store_t *s, const char *key, const void *val,
                      size_t len);

/* Wait for all n keys, then fetch them in one round trip.  vals[i] are
 * malloc'd (NUL-terminated, not counted in lens[i]); caller frees each. */
int fccl_store_multi_get(fccl_store_t *s, const char *const *keys, size_t n,
                         void **vals, size_t *lens, int64_t timeout_ms);

int fccl_store_multi_set(fccl_store_t *s, const char *const *keys,
                         const void *const *vals, const size_t *lens,
                         size_t n);

/* Round trip; *rtt_us (may be NULL) receives it. Modern dialect only. */
int fccl_store_ping(fccl_store_t *s, double *rtt_us);

/* fccl extension (tcpstore-server, modern dialect): the keys that start
 * with prefix (as seen through this view, view prefix stripped).  *keys is
 * a malloc'd array of malloc'd strings; free with fccl_store_free_keys. */
int fccl_store_list_keys(fccl_store_t *s, const char *prefix, char ***keys,
                         size_t *n);
void fccl_store_free_keys(char **keys, size_t n);

/* fccl extension STATS (tcpstore-server, modern dialect): the server's
 * figures as "name value" text lines (connections, keys, bytes held,
 * requests and bytes per type, waiters, longest loop turn; the names are
 * listed in docs/PROTOCOL-fccl.md).  Blocks for one round trip.  *text is
 * malloc'd and NUL-terminated (caller frees), *len its length (may be
 * NULL).  Thread-safe like every call on the handle.  FCCL_OK;
 * FCCL_ERR_UNSUPPORTED on the legacy dialect; FCCL_ERR_CLOSED if the server
 * closes on it (a PyTorch server has no STATS); FCCL_ERR_INVALID (NULL
 * argument); FCCL_ERR_TIMEOUT, FCCL_ERR_IO, FCCL_ERR_NOMEM. */
FCCL_API int fccl_store_stats(fccl_store_t *s, char **text, size_t *len);

/* PyTorch's BARRIER (request 18; tcpstore-server, PyTorch >= 2.11):
 * add 1 to the counter at key (decimal text, as fccl_store_add) and wait
 * up to timeout_ms (< 0: the handle's default) until it reaches
 * world_size.  On a timeout the wait is cancelled on the server and this
 * caller's increment stays.  Thread-safe like every call on the handle.
 * FCCL_OK; FCCL_ERR_TIMEOUT; FCCL_ERR_INVALID (NULL argument, world_size
 * < 1); FCCL_ERR_UNSUPPORTED (legacy dialect); FCCL_ERR_CLOSED (a server
 * without BARRIER closes on it), FCCL_ERR_IO, FCCL_ERR_NOMEM. */
FCCL_API int fccl_store_barrier(fccl_store_t *s, const char *key,
                                int64_t world_size, int64_t timeout_ms);

/* Queues (modern dialect): push appends; pop returns the oldest value,
 * waiting up to timeout_ms when block is set (FCCL_ERR_NOTFOUND if empty
 * and not blocking); len gives the length. */
int fccl_store_queue_push(fccl_store_t *s, const char *key, const void *val,
                          size_t len);
int fccl_store_queue_pop(fccl_store_t *s, const char *key, int block,
                         void **val, size_t *len, int64_t timeout_ms);
int fccl_store_queue_len(fccl_store_t *s, const char *key, int64_t *n);

#ifdef __cplusplus
}
#endif
#endif
