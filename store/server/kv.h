/*
 * The store's table (internal to the server): one entry per name, holding
 * the name's value (if set), its queue (QUEUE_PUSH/POP) and the list of
 * waits parked on it.  Lookups are O(1): a chained hash table with a
 * power-of-two bucket count and SipHash-1-3 under a random per-table seed,
 * so clients cannot pick keys that collide.
 *
 * An entry lives while it has a value, a non-empty queue, or waits parked
 * on it; kv_release() frees it once none of these holds.  Stored bytes (keys and values of set
 * keys plus queued values) are counted against max_bytes: a write that would
 * exceed it fails with FCCL_ERR_LIMIT and changes nothing.
 *
 * Single-threaded: the server's event loop is the only user.
 */
#ifndef FCCL_STORE_KV_H
#define FCCL_STORE_KV_H

#include <stddef.h>
#include <stdint.h>

struct wait_ref; /* waiters.h */

struct kv_item { /* one queued value */
    struct kv_item *next;
    uint64_t len;
    uint8_t data[];
};

/* A value buffer lent to queued replies (kv_value_lend): it stays alive,
 * unchanged, until the last reply that refers to it is sent; a write to
 * the entry meanwhile moves the entry to a fresh buffer. */
struct kv_share {
    uint8_t *buf;
    uint64_t refs;
    int orphan; /* the entry has moved on: free buf at the last return */
};

struct kv_entry {
    struct kv_entry *next; /* hash chain */
    struct kv_share *share; /* e->val lent out, or NULL */
    uint64_t hash;
    uint8_t *val; /* value bytes when has_val (may be NULL when vlen 0) */
    uint64_t vlen, vcap;
    struct kv_item *qhead, *qtail;
    uint64_t qlen;
    struct wait_ref *wait_head, *wait_tail; /* owned by waiters.c */
    uint8_t has_val;
    uint32_t klen;
    uint8_t key[];
};

struct kv {
    struct kv_entry **buckets;
    uint64_t mask;     /* bucket count - 1 */
    uint64_t nentries; /* entries of any kind */
    uint64_t nkeys;    /* entries with a value (GETNUMKEYS) */
    uint64_t bytes, max_bytes;
    uint64_t lost; /* times an entry stopped being ready (delete, last pop) */
    uint32_t no_grow; /* scans in progress: entries must not move */
    /* Growing is incremental: while `old` is set, an entry whose old bucket
     * (hash & old_mask) is >= `moved` still lives there, every other entry
     * in `buckets`; each lookup moves a few old buckets over. */
    struct kv_entry **old;
    uint64_t old_mask, moved;
    uint64_t seed[2];
};

/* Set up an empty table; max_bytes 0 means no limit.  FCCL_OK or
 * FCCL_ERR_NOMEM. */
int kv_init(struct kv *kv, uint64_t max_bytes);
/* Free every entry, value and queued item (waiters must be gone). */
void kv_free(struct kv *kv);

/* SipHash-1-3 of p[0..n) under the table's random seed (for other tables
 * of client-chosen bytes that must not be made to collide). */
uint64_t kv_hash(const struct kv *kv, const uint8_t *p, uint64_t n);

/* The entry named key, or NULL. */
struct kv_entry *kv_find(struct kv *kv, const uint8_t *key, uint64_t klen);
/* The entry named key, created empty if missing; NULL when out of memory. */
struct kv_entry *kv_lookup_or_add(struct kv *kv, const uint8_t *key,
                                  uint64_t klen);
/* Free e if nothing holds it any more (no value, queue or waiters). */
void kv_release(struct kv *kv, struct kv_entry *e);

/* A WAIT or CHECK on this name is satisfied: it has a value or a queued
 * item (as PyTorch's checkKeys). */
static inline int kv_ready(const struct kv_entry *e)
{
    return e && (e->has_val || e->qlen > 0);
}

/* Store / extend the value.  FCCL_OK, FCCL_ERR_LIMIT (total bytes) or
 * FCCL_ERR_NOMEM; on error the old value is unchanged. */
int kv_set(struct kv *kv, struct kv_entry *e, const uint8_t *v, uint64_t len);
/* Like kv_set, but the value becomes v itself (malloc'd, len bytes): on
 * FCCL_OK the table owns v; on error the caller still does. */
int kv_set_take(struct kv *kv, struct kv_entry *e, uint8_t *v, uint64_t len);
int kv_append(struct kv *kv, struct kv_entry *e, const uint8_t *v,
              uint64_t len);
/* Add delta to the decimal integer value (missing = 0), store the result as
 * decimal text, *out = it.  FCCL_ERR_PROTOCOL if the value is not a decimal
 * int64 (nothing changes), else as kv_set. */
int kv_add(struct kv *kv, struct kv_entry *e, int64_t delta, int64_t *out);
/* Drop the value; returns 1 if there was one, else 0.  Does not free e. */
int kv_del_value(struct kv *kv, struct kv_entry *e);

/* Append a copy of v to e's queue.  FCCL_OK / FCCL_ERR_LIMIT / NOMEM. */
int kv_queue_push(struct kv *kv, struct kv_entry *e, const uint8_t *v,
                  uint64_t len);
/* Detach the oldest item (NULL if empty); free it with kv_item_free. */
struct kv_item *kv_queue_pop(struct kv *kv, struct kv_entry *e);
void kv_item_free(struct kv_item *it);

/* Lend e's value bytes (e must have a value) to a reply that sends them
 * later without copying: returns the bytes (e->vlen of them) and a token
 * for kv_value_return.  FCCL_ERR_NOMEM leaves *p NULL. */
int kv_value_lend(struct kv_entry *e, const uint8_t **p,
                  struct kv_share **token);
/* The reply is done with the bytes (may be after the entry or the whole
 * table is gone). */
void kv_value_return(struct kv_share *token);

/* Move up to n buckets of an unfinished growth (a timer calls this so a
 * quiet table finishes too). */
void kv_migrate(struct kv *kv, uint64_t n);

/* Call fn on every entry with a value whose key starts with prefix, in
 * buckets [from, from + nbuckets); returns the next bucket to scan, or
 * UINT64_MAX when the table is done.  Between calls the table may change:
 * while kv->no_grow is raised no entry moves between buckets, so an entry
 * present throughout a scan is seen exactly once. */
uint64_t kv_scan(const struct kv *kv, uint64_t from, uint64_t nbuckets,
                 const uint8_t *prefix, uint64_t plen,
                 void (*fn)(void *arg, const struct kv_entry *e), void *arg);

#endif
