/** @file fccl/store.h
 *
 * fccl store: the TCPStore client (and the etcd client).
 *
 * A TCPStore is a key-value server that the ranks of a job meet at: one
 * rank (or tcpstore-server) serves it, every process connects, and they
 * exchange small values by key, wait for keys to appear, and count with
 * atomic adds.  This client speaks PyTorch's protocol (modern dialect by
 * default, legacy on request) to tcpstore-server or to a PyTorch TCPStore
 * server; fccl_init() uses it for its rendezvous.
 *
 * Handles.  A handle owns one TCP connection (shared with the prefix views
 * made from it) and is safe to use from several threads: calls are
 * serialized on the connection.  Keys are C strings.  Like PyTorch's
 * client, the handle sends every key with the prefix "/" (so a script's
 * `tcpstore set a` and a PyTorch program's store.set("a") meet on the wire
 * key "/a"), unless raw_keys is set.  Values are binary byte strings.
 *
 * Status codes.  Every call returns FCCL_OK or a negative FCCL_ERR_* code
 * and leaves a message (fccl_last_error()) naming the server address, the
 * key and the cause.  timeout_ms < 0 in a call means the handle's default
 * timeout.  Calls that wait (get, wait, multi_get) fail with
 * FCCL_ERR_TIMEOUT after the timeout, cancel their wait on the server, and
 * name the keys still missing.  A handle whose connection broke returns
 * FCCL_ERR_CLOSED (or the first error) from every later call.
 *
 * The common errors: every call on a handle may return these, besides
 * those listed with it:
 *  - FCCL_ERR_INVALID: a NULL handle, key or output pointer, a key over
 *    the limit;
 *  - FCCL_ERR_CLOSED: the server closed the connection;
 *  - FCCL_ERR_IO: a socket call failed;
 *  - FCCL_ERR_TIMEOUT: no reply before the handle's timeout;
 *  - FCCL_ERR_PROTOCOL: the server's bytes break the protocol;
 *  - FCCL_ERR_NOMEM.
 * After CLOSED, IO or PROTOCOL the handle is dead.
 *
 * Confirmed writes.  Writes without a reply of their own (set, append,
 * multi_set, queue_push) are confirmed before the call returns, so a write
 * the server refused (store full, over a limit, not authorized) is
 * returned as an error naming the cause, never as success
 * (docs/PROTOCOL-fccl.md).
 *
 * Memory.  Keys and values passed in are copied before the call returns;
 * values handed out are malloc'd and the caller frees them.
 *
 * Stores on etcd.  An address etcd://HOST:PORT[,HOST:PORT...][/PREFIX]
 * (etcds:// for TLS) gives a handle with the same calls over etcd v3's
 * JSON gateway (etcd >= 3.4).  Store key K is the etcd key PREFIX "/" K
 * (PREFIX K with raw_keys), the same key a TCPStore client's K is at
 * behind tcpstore-server --backend with that address.  Calls go to the
 * first member that answers; one that fails or stops answering is left
 * for the next within the call's timeout, and a write whose reply was
 * lost is repeated only where that cannot count twice (ADD, APPEND,
 * COMPARE_SET and the queue calls keep a receipt in their transaction
 * and read it back instead).  GET, WAIT, MULTI_GET, BARRIER and a
 * blocking QUEUE_POP watch for the key from the revision they read (no
 * polling).  Differences from a TCPStore: ADD of a value that is not a
 * decimal integer returns FCCL_ERR_INVALID and the handle stays usable;
 * a value (or a MULTI_SET) over the cluster's request limit
 * (--max-request-bytes, 1.5 MiB by default) returns FCCL_ERR_LIMIT
 * naming it; MULTI_SET and MULTI_GET are one transaction up to 128 keys
 * (--max-txn-ops) and a MiB of values, and beyond that one transaction
 * per chunk, so not atomic; FCCL_ERR_AUTH names a bad user or password,
 * a refused token or an untrusted certificate; STATS gives the member's
 * figures and the client's request counts.
 */
#ifndef FCCL_STORE_H
#define FCCL_STORE_H

#include <stddef.h>
#include <stdint.h>

#include "fccl/core.h"

#ifdef __cplusplus
extern "C" {
#endif

/** A connection to a store (or a prefix view of one).  Opaque. */
typedef struct fccl_store fccl_store_t;

/** The protocol's two numberings (see PROTOCOL.md). */
typedef enum {
    FCCL_DIALECT_MODERN = 0, /**< PyTorch >= 2.1 and tcpstore-server */
    FCCL_DIALECT_LEGACY = 1, /**< PyTorch <= 2.0 servers */
} fccl_dialect_t;

/** Connection options; fill with fccl_store_opts_init(), then set
 * fields. */
typedef struct fccl_store_opts {
    const char *addr;       /**< "HOST:PORT" or "[V6]:PORT"; required */
    int64_t timeout_ms;     /**< default per-call and connect timeout;
                               <= 0 means FCCL_TIMEOUT or 300 s */
    fccl_dialect_t dialect; /**< default modern */
    int raw_keys;           /**< send keys as given, without "/" */
    /** TLS (tcpstore-server --tls-cert/--tls-key).  TLS is used when `tls`
     * is set or any of the four paths below is given.  The strings are
     * read during fccl_store_connect only (the handle keeps copies). */
    int tls;
    const char *tls_ca;     /**< PEM CA file: verify the server's
                               certificate (chain, dates and name); NULL:
                               encrypt without verifying who answers */
    const char *tls_cert;   /**< PEM client certificate (mutual TLS: the
                               server's --tls-ca) */
    const char *tls_key;    /**< PEM key of tls_cert; refused when its mode
                               gives group or other any access (& 077) */
    const char *tls_server_name; /**< name (or IP literal) the server's
                               certificate must carry; NULL: the host of
                               addr (an IP literal matches an IP
                               subjectAltName) */
    const char *token_file; /**< token (one line, >= 16 bytes, mode 0600 or
                               stricter) proven to tcpstore-server after
                               VALIDATE (AUTH_HELLO/AUTH_PROOF; the token
                               is never sent); NULL: no authentication */
    int reconnect;          /**< 1: ride out a dropped connection (a store
                               restarted with --journal): the next call, or
                               the failed call itself when repeating it is
                               harmless (GET, CHECK, WAIT, MULTI_GET, PING,
                               NUM_KEYS, LIST_KEYS, STATS, SET, MULTI_SET,
                               DELETE, QUEUE_LEN), reconnects (backoff,
                               TLS, token, VALIDATE) within the call's
                               timeout and runs again (at most 4 times); a
                               pending WAIT is re-issued.
                               ADD, APPEND, COMPARE_SET, QUEUE_PUSH/POP and
                               BARRIER are sent again only if the old
                               connection was seen closed before sending:
                               once sent, a lost reply is reported
                               (FCCL_ERR_CLOSED/IO) and the handle stays
                               usable.  0 (default): the first CLOSED/IO
                               error makes the handle unusable. */
    /** @name etcd (etcd:// and etcds:// addresses; see "Stores on etcd")
     * The TLS fields above apply to etcds:// too (the CA, the client
     * certificate and key, the name to verify); token_file, dialect and
     * reconnect do not.  @{ */
    const char *etcd_user;  /**< etcd user to authenticate as
                               (PREFIX_ETCD_USER); NULL: none */
    const char *etcd_password_file; /**< its password, one line, in a file
                               of mode 0600 or stricter
                               (PREFIX_ETCD_PASSWORD_FILE) */
    int64_t lease_ttl_s;    /**< > 0: write every key under a lease of
                               this TTL in seconds, kept alive while the
                               handle is open, so a dead job's keys go
                               away by themselves (PREFIX_LEASE_TTL); the
                               handles of one prefix share one lease (the
                               job's) unless lease_revoke.  0: no lease */
    int64_t lease_id;       /**< > 0: write under this lease, granted and
                               kept alive by someone else (PREFIX_LEASE;
                               fccl-run gives its ranks its own) */
    int lease_revoke;       /**< with lease_ttl_s: grant a lease of this
                               handle's own and revoke it at the close of
                               the last handle (a launcher) */
    /** @} */
} fccl_store_opts_t;

/**
 * Fill opts with the defaults: addr NULL, timeout 0 (the default),
 * modern dialect, prefixed keys.
 *
 * Never blocks, never fails.  Thread-safe.
 *
 * @param opts the options to fill; not NULL.
 */
FCCL_API void fccl_store_opts_init(fccl_store_opts_t *opts);

/**
 * Fill the TLS, token, reconnect and etcd fields of opts from the
 * environment variables PREFIX_TLS_CA, PREFIX_TLS_CERT, PREFIX_TLS_KEY,
 * PREFIX_TLS_SERVER_NAME, PREFIX_TOKEN_FILE, PREFIX_RECONNECT ("1" sets
 * reconnect, "0" clears it), PREFIX_ETCD_USER,
 * PREFIX_ETCD_PASSWORD_FILE, PREFIX_LEASE_TTL (seconds) and PREFIX_LEASE
 * (a lease id).  Unset or empty variables leave the field as it is.
 *
 * Never blocks.  Not thread-safe against setenv.
 *
 * @param opts the options to fill.
 * @param prefix "FCCL_STORE" for fccl_init, "TCPSTORE" for the tools.
 *     The strings stored in opts point into the environment.
 */
FCCL_API void fccl_store_opts_env(fccl_store_opts_t *opts, const char *prefix);

/**
 * Connect to opts->addr and return a handle.
 *
 * Blocks: refused connects are retried with exponential backoff and
 * jitter (from 1 ms, capped at 250 ms) until the timeout, so the server
 * may start after the client.  The modern dialect sends VALIDATE first;
 * with TLS the handshake follows the TCP connect (its failures are not
 * retried), with a token the AUTH exchange follows VALIDATE.
 * Thread-safe.
 *
 * @param opts the options; read during the call only.
 * @param out receives the handle, which the caller closes with
 *     fccl_store_close(); NULL on failure.
 * @return FCCL_OK, or
 *   - FCCL_ERR_INVALID: a NULL argument, a bad or missing addr;
 *   - FCCL_ERR_CONNECT: the retries ran out (the message says whether
 *     anything answered);
 *   - FCCL_ERR_NOMEM;
 *   - FCCL_ERR_AUTH: a TLS or token file does not load or is readable by
 *     others; the server refused the token or has none; its certificate
 *     is not trusted, expired or for another name; it does not speak TLS
 *     or refused our certificate (the message names which).
 */
FCCL_API int fccl_store_connect(const fccl_store_opts_t *opts, fccl_store_t **out);

/**
 * A view of parent that prepends prefix to every key (after the "/" when
 * not raw), sharing its connection.  Views nest.  Close each view; the
 * connection is closed with the last handle using it.
 *
 * Does not block.
 *
 * @param parent a handle or a view.
 * @param prefix prepended to every key of the view.
 * @param out receives the view.
 * @return FCCL_OK; FCCL_ERR_INVALID for a NULL argument; FCCL_ERR_NOMEM.
 */
FCCL_API int fccl_store_prefixed(fccl_store_t *parent, const char *prefix,
                                 fccl_store_t **out);

/**
 * Close the handle (and the connection if it was the last user).
 *
 * The handle must not be in use by another thread.
 *
 * @param store a handle or view; NULL is a no-op.
 */
FCCL_API void fccl_store_close(fccl_store_t *store);

/**
 * The lease an etcd handle writes under (see fccl_store_opts_t), for a
 * launcher to pass to its ranks (FCCL_STORE_LEASE).
 *
 * Never blocks.  Thread-safe.
 *
 * @return the lease id; 0 for a handle without a lease or of another
 *     kind (a TCPStore has none), or a NULL handle.
 */
FCCL_API int64_t fccl_store_lease_id(const fccl_store_t *store);

/** @name Handle queries
 * The server address ("HOST:PORT", owned by the handle) and the handle's
 * effective default timeout in ms.  Never fail on a valid handle.
 * @{ */
FCCL_API const char *fccl_store_addr(const fccl_store_t *store);
FCCL_API int64_t fccl_store_timeout_ms(const fccl_store_t *store);
/** @} */

/**
 * Store len bytes of val under key (replacing any value) and wake every
 * waiter on it.
 *
 * Blocks until the server confirmed the write (one round trip).
 *
 * @return FCCL_OK; the common errors; the server's refusal:
 *     FCCL_ERR_LIMIT (store full, value over its limit), FCCL_ERR_AUTH
 *     (not authorized).
 */
FCCL_API int fccl_store_set(fccl_store_t *s, const char *key, const void *val,
                   size_t len);

/**
 * Wait up to timeout_ms for key, then fetch it.
 *
 * @param val receives the value, malloc'd (with a NUL after the last
 *     byte, not counted in *len); the caller frees it.
 * @param len receives its length; may be NULL.
 * @param timeout_ms how long to wait; < 0: the handle's default.
 * @return FCCL_OK; the common errors; FCCL_ERR_TIMEOUT names the key.
 */
FCCL_API int fccl_store_get(fccl_store_t *s, const char *key, void **val, size_t *len,
                   int64_t timeout_ms);

/**
 * Atomically add delta to the decimal integer stored at key (missing =
 * 0).  One round trip.
 *
 * @param out receives the new value; may be NULL.
 * @return FCCL_OK; the common errors.  A value that is not a decimal
 *     integer makes the server close the connection (FCCL_ERR_CLOSED), as
 *     PyTorch's does.
 */
FCCL_API int fccl_store_add(fccl_store_t *s, const char *key, int64_t delta,
                   int64_t *out);

/**
 * PyTorch's compare_set: if the stored value equals expected (or the key
 * is missing and expected is empty) store desired.  One round trip.
 *
 * @param cur receives the server's reply: the value stored afterwards, or
 *     expected for a missing key with non-empty expected.  May be NULL;
 *     else malloc'd, and the caller frees it.
 * @param curlen receives the length of *cur; may be NULL.
 * @return FCCL_OK; the common errors.
 */
FCCL_API int fccl_store_compare_set(fccl_store_t *s, const char *key,
                           const void *expected, size_t elen,
                           const void *desired, size_t dlen, void **cur,
                           size_t *curlen);

/**
 * Whether every one of the n keys exists now.  One round trip, no
 * waiting.
 *
 * @param n >= 1.
 * @param all_present receives 1 if every key exists, else 0.
 * @return FCCL_OK; the common errors; FCCL_ERR_INVALID for n < 1.
 */
FCCL_API int fccl_store_check(fccl_store_t *s, const char *const *keys, size_t n,
                     int *all_present);

/**
 * Block until every one of the n keys exists, or timeout_ms passes.
 *
 * @return FCCL_OK; the common errors; FCCL_ERR_TIMEOUT naming the keys
 *     still missing (the wait is cancelled on the server first, so the
 *     handle stays usable).
 */
FCCL_API int fccl_store_wait(fccl_store_t *s, const char *const *keys, size_t n,
                    int64_t timeout_ms);

/**
 * Delete key.  One round trip.
 *
 * @param deleted receives 1 if the key existed; may be NULL.
 * @return FCCL_OK; the common errors.
 */
FCCL_API int fccl_store_delete(fccl_store_t *s, const char *key, int *deleted);

/**
 * The number of keys on the server: all keys, not only this view's;
 * queues not counted.  One round trip.
 *
 * @param n receives the count.
 * @return FCCL_OK; the common errors.
 */
FCCL_API int fccl_store_num_keys(fccl_store_t *s, int64_t *n);

/**
 * Append len bytes to the value of key (creating it) and wake its
 * waiters.  Confirmed like fccl_store_set().
 *
 * @return as fccl_store_set(); FCCL_ERR_UNSUPPORTED on the legacy
 *     dialect.
 */
FCCL_API int fccl_store_append(fccl_store_t *s, const char *key, const void *val,
                      size_t len);

/**
 * Wait up to timeout_ms for all n keys, then fetch them in one round
 * trip.
 *
 * @param vals receives n values, each malloc'd (NUL-terminated, the NUL
 *     not counted in lens[i]); the caller frees each.  On failure none is
 *     left allocated.
 * @param lens receives the n lengths.
 * @return FCCL_OK; the common errors; FCCL_ERR_LIMIT or FCCL_ERR_CLOSED
 *     when the server refuses a reply larger than its limits;
 *     FCCL_ERR_UNSUPPORTED on the legacy dialect.
 */
FCCL_API int fccl_store_multi_get(fccl_store_t *s, const char *const *keys, size_t n,
                         void **vals, size_t *lens, int64_t timeout_ms);

/**
 * Store n (key, value) pairs in one request.  Confirmed like
 * fccl_store_set().
 *
 * @return as fccl_store_set(); FCCL_ERR_UNSUPPORTED on the legacy
 *     dialect.
 */
FCCL_API int fccl_store_multi_set(fccl_store_t *s, const char *const *keys,
                         const void *const *vals, const size_t *lens,
                         size_t n);

/**
 * One PING round trip.
 *
 * @param rtt_us receives its time in microseconds; may be NULL.
 * @return FCCL_OK; the common errors; FCCL_ERR_UNSUPPORTED on the legacy
 *     dialect.
 */
FCCL_API int fccl_store_ping(fccl_store_t *s, double *rtt_us);

/**
 * fccl extension (tcpstore-server, modern dialect): the keys that start
 * with prefix, as seen through this view (the view's prefix stripped).
 *
 * @param keys receives a malloc'd array of malloc'd strings; free it with
 *     fccl_store_free_keys().
 * @param n receives the number of keys.
 * @return FCCL_OK; the common errors.
 */
FCCL_API int fccl_store_list_keys(fccl_store_t *s, const char *prefix, char ***keys,
                         size_t *n);
/** Free what fccl_store_list_keys() returned (NULL is a no-op). */
FCCL_API void fccl_store_free_keys(char **keys, size_t n);

/**
 * fccl extension STATS (tcpstore-server, modern dialect): the server's
 * figures as "name value" text lines (connections, keys, bytes held,
 * requests and bytes per type, waiters, longest loop turn; the names are
 * listed in docs/PROTOCOL-fccl.md).
 *
 * Blocks for one round trip.  Thread-safe like every call on the handle.
 *
 * @param text receives the text, malloc'd and NUL-terminated; the caller
 *     frees it.
 * @param len receives its length; may be NULL.
 * @return FCCL_OK; FCCL_ERR_UNSUPPORTED on the legacy dialect;
 *     FCCL_ERR_CLOSED if the server closes on it (a PyTorch server has no
 *     STATS); FCCL_ERR_INVALID (NULL argument); FCCL_ERR_TIMEOUT,
 *     FCCL_ERR_IO, FCCL_ERR_NOMEM.
 */
FCCL_API int fccl_store_stats(fccl_store_t *s, char **text, size_t *len);

/**
 * PyTorch's BARRIER (request 18; tcpstore-server, PyTorch >= 2.11): add
 * 1 to the counter at key (decimal text, as fccl_store_add()) and wait
 * until it reaches world_size.  On a timeout the wait is cancelled on the
 * server and this caller's increment stays.
 *
 * Blocks up to timeout_ms.  Thread-safe like every call on the handle.
 *
 * @param world_size >= 1.
 * @param timeout_ms how long to wait; < 0: the handle's default.
 * @return FCCL_OK; FCCL_ERR_TIMEOUT; FCCL_ERR_INVALID (NULL argument,
 *     world_size < 1); FCCL_ERR_UNSUPPORTED (legacy dialect);
 *     FCCL_ERR_CLOSED (a server without BARRIER closes on it),
 *     FCCL_ERR_IO, FCCL_ERR_NOMEM.
 */
FCCL_API int fccl_store_barrier(fccl_store_t *s, const char *key,
                                int64_t world_size, int64_t timeout_ms);

/** @name Queues
 * Modern dialect only: FCCL_ERR_UNSUPPORTED on legacy.
 *
 * fccl_store_queue_push() appends a value (confirmed like
 * fccl_store_set()).  fccl_store_queue_pop() takes the oldest value into
 * *val (malloc'd, the caller frees it), waiting up to timeout_ms when
 * block is set (then FCCL_ERR_TIMEOUT), else FCCL_ERR_NOTFOUND if the
 * queue is empty.  fccl_store_queue_len() gives the queue's length in *n.
 * Besides these, the common errors.
 * @{ */
FCCL_API int fccl_store_queue_push(fccl_store_t *s, const char *key, const void *val,
                          size_t len);
FCCL_API int fccl_store_queue_pop(fccl_store_t *s, const char *key, int block,
                         void **val, size_t *len, int64_t timeout_ms);
FCCL_API int fccl_store_queue_len(fccl_store_t *s, const char *key, int64_t *n);
/** @} */

/** @name Stores fccl does not own
 * A store of any kind can carry fccl_init() and the calls of this header:
 * fill a table with the operations the store has, and
 * fccl_store_from_ops() makes a handle of it.  fccl's Python layer does
 * this for a torch.distributed Store; the etcd client is a table of its
 * own.
 *
 * Every entry is optional: a NULL entry makes its call return
 * FCCL_ERR_UNSUPPORTED, except that a missing check, wait, multi_get or
 * multi_set is built from the others (check: wait with a 1 ms timeout, or
 * get with one, key by key; wait: get key by key; multi_get: get key by
 * key within the one timeout; multi_set: set key by key, so not atomic).
 * fccl_init() and group creation need only set, get (waiting), add and
 * delete_key.
 *
 * Entries receive the caller's ctx and keys with the view prefixes of
 * fccl_store_prefixed() already prepended (no "/" is added: the store
 * names keys its own way), a timeout_ms >= 0 (the handle's default put in
 * for the caller's < 0), and must follow the contract of the call of the
 * same name below: the same outputs (values malloc'd with malloc(), freed
 * by fccl's caller), FCCL_OK or a negative FCCL_ERR_*, FCCL_ERR_TIMEOUT
 * when a wait runs out.  An entry may describe its failure with
 * fccl_set_error() (fccl/core.h); fccl adds the store's name, the call
 * and the key.  Entries may be called from several threads at once (one
 * handle's calls are not serialized); a store that cannot serve that
 * serializes itself.  close, if not NULL, is called once, when the last
 * handle on the table (the handle and its views) is closed.
 * @{ */
typedef struct fccl_store_ops {
    int (*set)(void *ctx, const char *key, const void *val, size_t len);
    int (*get)(void *ctx, const char *key, void **val, size_t *len,
               int64_t timeout_ms);
    int (*add)(void *ctx, const char *key, int64_t delta, int64_t *out);
    int (*compare_set)(void *ctx, const char *key, const void *expected,
                       size_t elen, const void *desired, size_t dlen,
                       void **cur, size_t *curlen);
    int (*check)(void *ctx, const char *const *keys, size_t n,
                 int *all_present);
    int (*wait)(void *ctx, const char *const *keys, size_t n,
                int64_t timeout_ms);
    int (*delete_key)(void *ctx, const char *key, int *deleted);
    int (*num_keys)(void *ctx, int64_t *n);
    int (*append)(void *ctx, const char *key, const void *val, size_t len);
    int (*multi_get)(void *ctx, const char *const *keys, size_t n,
                     void **vals, size_t *lens, int64_t timeout_ms);
    int (*multi_set)(void *ctx, const char *const *keys,
                     const void *const *vals, const size_t *lens, size_t n);
    int (*ping)(void *ctx, double *rtt_us);
    /** keys that start with prefix (the view's prefix included); fccl
     * strips the view's prefix from what it returns */
    int (*list_keys)(void *ctx, const char *prefix, char ***keys,
                     size_t *n);
    int (*stats)(void *ctx, char **text, size_t *len);
    int (*barrier)(void *ctx, const char *key, int64_t world_size,
                   int64_t timeout_ms);
    int (*queue_push)(void *ctx, const char *key, const void *val,
                      size_t len);
    int (*queue_pop)(void *ctx, const char *key, int block, void **val,
                     size_t *len, int64_t timeout_ms);
    int (*queue_len)(void *ctx, const char *key, int64_t *n);
    void (*close)(void *ctx);
} fccl_store_ops_t;

/**
 * Make a handle on a store given as a table of operations.
 *
 * Does not block and calls no entry.  The table is copied (ops_size lets a
 * program built against an older, shorter table pass it: missing trailing
 * entries count as NULL).
 *
 * @param ops the table; not NULL.
 * @param ops_size sizeof(fccl_store_ops_t) of the caller.
 * @param ctx passed to every entry; owned by the caller until close.
 * @param name the store's name in messages and fccl_store_addr() (copied);
 *     NULL gives "store".
 * @param timeout_ms the default of calls with timeout_ms < 0; <= 0 means
 *     FCCL_TIMEOUT or 300 s.
 * @param out receives the handle; close it with fccl_store_close().
 * @return FCCL_OK; FCCL_ERR_INVALID for a NULL ops or out, or an ops_size
 *     larger than this library's table; FCCL_ERR_NOMEM.
 */
FCCL_API int fccl_store_from_ops(const fccl_store_ops_t *ops, size_t ops_size,
                                 void *ctx, const char *name,
                                 int64_t timeout_ms, fccl_store_t **out);
/** @} */

#ifdef __cplusplus
}
#endif
#endif
