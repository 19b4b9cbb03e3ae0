/*
 * Internal: what a store handle is to the public calls of fccl/store.h.
 *
 * Every fccl_store_t points at a table of the operations of its kind of
 * store (a TCPStore connection, tcp_store.c; a table of the caller's,
 * store_ops.c; etcd's, when it is there) and the public calls
 * (store_api.c) check their arguments, then call through it.  A missing
 * entry is FCCL_ERR_UNSUPPORTED, except where store_api.c can build the
 * call from others (check, wait, multi_get and multi_set from the
 * single-key calls), so a kind needs only set, get, add and delete to run
 * fccl_init and group creation.
 *
 * Entries take the handle itself: a kind keeps what its handles share
 * (a connection, the caller's context) behind it and applies the view's
 * key prefix (kpre) itself, where it is cheapest (the TCPStore client
 * writes it straight into the request).  timeout_ms < 0 means the
 * handle's default, as in the public calls.
 *
 * Module map of store/client, top down:
 *   store_api.c      the public calls: arguments, then the handle's table;
 *                    connect picks the kind by the address
 *   store_ops.c      the kind of a caller's table (fccl_store_from_ops)
 *   tcp_store.c      the TCPStore kind: its table and handles
 *   client_multi.c   TCPStore: multi-key calls, key listing, queues
 *   client_barrier.c TCPStore: PyTorch's BARRIER
 *   client_ops.c     TCPStore: the single-key calls
 *   client_wait.c    TCPStore: the WAIT protocol and its cancelling
 *   client_sync.c    TCPStore: the fence after reply-less writes
 *   client_call.c    TCPStore: one call (lock, failure, retries,
 *                    encoding, reading replies)
 *   client_conn.c    TCPStore: a connection's life (connect, backoff,
 *                    VALIDATE and the hello, reconnect)
 *   client_auth.c    TCPStore: proving the token
 *   client_io.c      TCPStore: a connection's bytes and the hello's reply
 *   client_tls.c     TCPStore: TLS (handshake, send, receive)
 *   client_sock.c    TCPStore: waiting on the socket
 *   etcd_store.c     the etcd kind: its table, connecting, handles
 *   etcd_ops.c       etcd: the calls that do not wait
 *   etcd_wait.c      etcd: the calls that wait (watches)
 *   etcd_kv.c        etcd: key requests, read-modify-write, receipts
 *   etcd_lease.c     etcd: the lease and its keep-alive
 *   etcd_client.c    etcd: one request (the pool, failover, login)
 *   store_handle.c   handles of every kind, key prefixes, key lists
 *   store_opts.c     the options: defaults and FCCL_STORE_* variables
 * Each file calls only files below it in this list (the build checks it
 * on the objects, scripts/check-calls.sh), so the public calls sit on
 * the kinds, each kind on its own layers, and every kind on the handles;
 * the TCPStore and etcd kinds never call each other.
 */
#ifndef FCCL_STORE_VT_H
#define FCCL_STORE_VT_H

#include <pthread.h>
#include <stddef.h>
#include <stdint.h>

#include "fccl/store.h"

struct store_client_conn;

struct store_vt {
    const char *kind; /* "tcpstore", "ops", ... for messages */
    /* A view of parent with `prefix` added to its prefix.  Required. */
    int (*prefixed)(fccl_store_t *parent, const char *prefix,
                    fccl_store_t **out);
    /* Free the handle (and what it shares, with its last user).
     * Required. */
    void (*close)(fccl_store_t *s);
    int (*set)(fccl_store_t *s, const char *key, const void *val,
               size_t len);
    int (*get)(fccl_store_t *s, const char *key, void **val, size_t *len,
               int64_t timeout_ms);
    int (*add)(fccl_store_t *s, const char *key, int64_t delta,
               int64_t *out);
    int (*compare_set)(fccl_store_t *s, const char *key, const void *expected,
                       size_t elen, const void *desired, size_t dlen,
                       void **cur, size_t *curlen);
    int (*check)(fccl_store_t *s, const char *const *keys, size_t n,
                 int *all_present);
    int (*wait)(fccl_store_t *s, const char *const *keys, size_t n,
                int64_t timeout_ms);
    int (*delete_key)(fccl_store_t *s, const char *key, int *deleted);
    int (*num_keys)(fccl_store_t *s, int64_t *n);
    int (*append)(fccl_store_t *s, const char *key, const void *val,
                  size_t len);
    int (*multi_get)(fccl_store_t *s, const char *const *keys, size_t n,
                     void **vals, size_t *lens, int64_t timeout_ms);
    int (*multi_set)(fccl_store_t *s, const char *const *keys,
                     const void *const *vals, const size_t *lens, size_t n);
    int (*ping)(fccl_store_t *s, double *rtt_us);
    int (*list_keys)(fccl_store_t *s, const char *prefix, char ***keys,
                     size_t *n);
    int (*stats)(fccl_store_t *s, char **text, size_t *len);
    int (*barrier)(fccl_store_t *s, const char *key, int64_t world_size,
                   int64_t timeout_ms);
    int (*queue_push)(fccl_store_t *s, const char *key, const void *val,
                      size_t len);
    int (*queue_pop)(fccl_store_t *s, const char *key, int block, void **val,
                     size_t *len, int64_t timeout_ms);
    int (*queue_len)(fccl_store_t *s, const char *key, int64_t *n);
};

struct fccl_store {
    const struct store_vt *vt;
    const char *name;   /* the store's address, for messages; owned by
                           what the handles share */
    int64_t timeout_ms; /* the default of calls with timeout_ms < 0 */
    struct store_client_conn *c; /* a TCPStore's connection (client_conn.c) */
    void *be;           /* what other kinds share between views */
    char *kpre;         /* the view's key prefix (a TCPStore's starts with
                           "/" unless raw_keys) */
    size_t kprelen;
};

/* The TCPStore client (tcp_store.c): connect to opts->addr ("HOST:PORT"). */
int tcp_store_connect(const fccl_store_opts_t *opts, fccl_store_t **out);

/* Allocate a handle of kind vt sharing `be`, its prefix pre[0..prelen)
 * copied; FCCL_ERR_NOMEM naming name. */
int store_handle_new(const struct store_vt *vt, void *be, const char *name,
                     int64_t timeout_ms, const char *pre, size_t prelen,
                     fccl_store_t **out);
/* A view of parent: a handle of its kind sharing its back end (be, c),
 * name and timeout, whose key prefix is parent's followed by prefix; the
 * reference it adds to what is shared is counted in *refs under mu (the
 * kind's count).  FCCL_ERR_NOMEM. */
int store_handle_view(const fccl_store_t *parent, const char *prefix,
                      pthread_mutex_t *mu, int *refs, fccl_store_t **out);
/* Free a handle made by store_handle_new (not what it shares). */
void store_handle_free(fccl_store_t *s);

/* The handle's prefix followed by key, malloc'd (NULL: out of memory). */
char *store_full_key(const fccl_store_t *s, const char *key);

#endif
