/*
 * Internals of the etcd store client (etcd_client.c, etcd_ops.c,
 * etcd_wait.c), a kind of store handle (store_vt.h) over etcd v3's JSON
 * gateway.
 *
 * A handle and its views share one `struct etcd_be`: the members, the
 * auth token, a pool of curl easy handles (one per call in flight, so
 * calls from several threads run at once; each keeps its connection to
 * the member it last used), the lease and its keep-alive thread.
 *
 * A call is an `struct ecall`: ec_begin takes a slot of the pool and sets
 * the call's deadline; ec_request sends one JSON request, going on to the
 * next member when one is down (refused, no leader) and, for requests that
 * may be repeated (reads, puts, deletes, watches), also when one stopped
 * answering.  Conditional writes that must not count twice (ADD, APPEND,
 * COMPARE_SET, queue push and pop) also write the slot's receipt key in
 * their transaction; after a lost reply the receipt, read through another
 * member, tells whether the write was applied.
 */
#ifndef FCCL_STORE_ETCD_INT_H
#define FCCL_STORE_ETCD_INT_H

#include <pthread.h>
#include <stdatomic.h>
#include <stdint.h>

#include "etcd_http.h"
#include "etcd_keys.h"
#include "store_vt.h"

#define EC_UNCERTAIN 1 /* ec_request: a write's reply was lost */

struct etcd_slot {
    struct etcd_http h;
    int idx;
    struct etcd_slot *next;
};

struct etcd_be {
    struct etcd_conf conf;
    pthread_mutex_t mu;
    int refs;
    int cur;          /* member asked first */
    char *token;      /* auth token, or NULL (mu) */
    struct etcd_slot *free_slots;
    int nslots;
    int64_t timeout_ms;
    char id[40];      /* this client's name in receipt keys */
    uint64_t seq;     /* receipts' sequence (mu) */
    /* the lease every write is made under (0: none) */
    int64_t lease, lease_ttl_s;
    int lease_revoke; /* granted by this handle, revoked at its close */
    int lease_keep;   /* kept alive by this handle's thread */
    pthread_t ka;
    fccl_store_t *ka_handle; /* the keep-alive thread's own handle: the
                                caller may close the one it connected
                                with while views live on */
    int ka_started, stopping;
    pthread_cond_t ka_cv;
    _Atomic uint64_t nreq, nfail_over, nuncertain, nconflict;
};

struct ecall {
    fccl_store_t *s;
    struct etcd_be *b;
    struct etcd_slot *sl;
    const char *op;
    char what[200];  /* the key, quoted, for messages */
    uint64_t deadline;    /* of the call's wait for keys */
    uint64_t io_deadline; /* of its requests: the later of that and the
                             handle's timeout, so a zero-timeout GET of a
                             present key still gets its round trip */
    int64_t slice_ms; /* > 0: one attempt's limit (watches, which end at
                         `deadline`) */
};

/* ---- etcd_store.c: the kind's table, connecting, the handles ---- */

extern const struct store_vt etcd_store_vt;

int etcd_store_connect(const fccl_store_opts_t *opts, fccl_store_t **out);
int64_t etcd_handle_lease(const fccl_store_t *s);

/* ---- etcd_ops.c: the calls that do not wait (the table's entries) ---- */

int etcd_set(fccl_store_t *s, const char *key, const void *val, size_t len);
int etcd_add(fccl_store_t *s, const char *key, int64_t delta, int64_t *out);
int etcd_compare_set(fccl_store_t *s, const char *key, const void *expected,
                     size_t elen, const void *desired, size_t dlen,
                     void **cur, size_t *curlen);
int etcd_check(fccl_store_t *s, const char *const *keys, size_t n,
               int *all_present);
int etcd_delete(fccl_store_t *s, const char *key, int *deleted);
int etcd_num_keys(fccl_store_t *s, int64_t *n);
int etcd_append(fccl_store_t *s, const char *key, const void *val,
                size_t len);
int etcd_multi_set(fccl_store_t *s, const char *const *keys,
                   const void *const *vals, const size_t *lens, size_t n);
int etcd_ping(fccl_store_t *s, double *rtt_us);
int etcd_list_keys(fccl_store_t *s, const char *prefix, char ***keys,
                   size_t *n);
int etcd_stats(fccl_store_t *s, char **text, size_t *len);
int etcd_queue_push(fccl_store_t *s, const char *key, const void *val,
                    size_t len);
int etcd_queue_len(fccl_store_t *s, const char *key, int64_t *n);

/* ---- etcd_client.c ---- */

int ec_begin(struct ecall *k, fccl_store_t *s, const char *op,
             const char *key, int64_t timeout_ms);
/* ec_begin for a call on the keys (n > 0; keys[0] names it), whose
 * values and lengths (`what` names them in the error) must be given;
 * ec_end may follow either way. */
int ec_begin_multi(struct ecall *k, fccl_store_t *s, const char *op,
                   const char *const *keys, const void *vals,
                   const size_t *lens, const char *what, int64_t timeout_ms);
void ec_end(struct ecall *k);
/* Send req (taken) to path.  FCCL_OK with *out (the caller puts it);
 * EC_UNCERTAIN for a request that must not be repeated whose reply was
 * lost (the message says so); a negative status naming the call. */
int ec_request(struct ecall *k, const char *path, json_object *req,
               int repeatable, json_object **out);
/* Fail the call: "store NAME: OP 'key': " before the current message. */
int ec_fail(struct ecall *k, int rc);
int ec_soft(struct ecall *k, int rc, const char *fmt, ...)
    __attribute__((format(printf, 3, 4)));
/* The etcd key of store key `key` in k's view (PREFIX, view prefix,
 * key). */
struct ek_key ec_key(const struct ecall *k, const char *key);
/* The receipt of k's slot, and the next sequence number to put in it. */
struct ek_key ec_receipt_key(const struct ecall *k);
uint64_t ec_next_seq(struct ecall *k);
/* Was the receipt of k's slot written with seq?  1 yes (its text after
 * the number into *rest, malloc'd, may be NULL), 0 no, or a status. */
int ec_receipt_says(struct ecall *k, uint64_t seq, char **rest);
int64_t ec_lease(const struct ecall *k);
/* Log in (etcd's auth, the handle's user and password): the token every
 * later request carries. */
int ec_authenticate(struct ecall *k);

/* ---- etcd_lease.c ---- */

/* One lease request (grant, keepalive, revoke, timetolive) of id/ttl. */
int ec_lease_call(struct ecall *k, const char *path, int64_t id,
                  int64_t ttl, json_object **out);
/* The lease the handle's writes go under, from the options: the
 * launcher's (o->lease_id), or one granted and then kept alive by a
 * thread, its own (o->lease_revoke) or shared by the job's ranks. */
int ec_lease_setup(fccl_store_t *s, const fccl_store_opts_t *o);

/* ---- etcd_kv.c: key requests ---- */

/* One range of [lo, hi) (hi NULL: the key alone) through k: the reply. */
int ec_range(struct ecall *k, const struct ek_key *lo, const struct ek_key *hi,
             unsigned flags, int64_t limit, json_object **out);

/* A txn of one range per key (values too when `values`), up to
 * ETCD_TXN_OPS keys: the reply. */
int ec_ranges(struct ecall *k, const char *const *keys, size_t n, int values,
              json_object **out);
/* The first of the n keys that is missing (*first = n: none) and the
 * revision of the read. */
int ec_first_missing(struct ecall *k, const char *const *keys, size_t n,
                     size_t *first, int64_t *rev);

/* A queue's items: [q, hi) holds the etcd keys of the items of the
 * queue whose key (the caller's, prefixed: fk) was given. */
struct ec_queue {
    struct ek_key fk, q, hi;
};

/* The range of the items of queue `key` into *r: FCCL_OK, or
 * FCCL_ERR_NOMEM through ec_soft.  Free *r with ec_queue_free either way. */
int ec_queue_range(struct ecall *k, const char *key, struct ec_queue *r);
void ec_queue_free(struct ec_queue *r);

/* ---- etcd_wait.c ---- */

#define EC_AGAIN 2 /* ec_watch_put: look again, then watch again */

/* Wait until a PUT lands in [lo, hi) (hi NULL: lo alone) at revision
 * `from` or later; *ev (may be NULL) receives the first such kv.
 * FCCL_OK; EC_AGAIN when the watch ended without one (its slice of
 * time ran out, the member went away, the revision was compacted):
 * the caller reads again; FCCL_ERR_TIMEOUT at k's deadline (no message:
 * the caller names what it waited for); or a status. */
int ec_watch_put(struct ecall *k, const struct ek_key *lo,
                 const struct ek_key *hi, int64_t from, struct ej_kv *ev);

int etcd_get(fccl_store_t *s, const char *key, void **val, size_t *len,
             int64_t timeout_ms);
int etcd_wait(fccl_store_t *s, const char *const *keys, size_t n,
              int64_t timeout_ms);
int etcd_multi_get(fccl_store_t *s, const char *const *keys, size_t n,
                   void **vals, size_t *lens, int64_t timeout_ms);
int etcd_barrier(fccl_store_t *s, const char *key, int64_t world_size,
                 int64_t timeout_ms);
int etcd_queue_pop(fccl_store_t *s, const char *key, int block, void **val,
                   size_t *len, int64_t timeout_ms);
/* The read-modify-write of ADD (the barrier's count too): *num the new
 * value, *rev the revision of the write (each may be NULL). */
int ec_add(struct ecall *k, const char *key, int64_t delta, int64_t *num,
           int64_t *rev);
/* One read-modify-write of key by `in` (etcd_rmw.h), retried past
 * conflicting writers; free m and o with ec_rmw_free in every case. */
struct rmw {
    struct ek_key key, rk;
    int present, known; /* known: present/cur/mod were read */
    struct ej_kv cur;
    int64_t mod, rev;
};
struct ermw_in;
struct ermw_out;
int ec_rmw_run(struct ecall *k, const char *key, const struct ermw_in *in,
               struct rmw *m, struct ermw_out *o);
void ec_rmw_free(struct rmw *m, struct ermw_out *o);

#endif
