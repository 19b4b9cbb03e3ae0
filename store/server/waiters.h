/*
 * Wait bookkeeping of the store server (internal).
 *
 * A connection has at most one pending wait (PyTorch's servers keep one per
 * socket): a WAIT that arrives while one is pending adds its keys to it, and
 * one STOP_WAITING goes out when every key of both exists.
 *
 * A pending wait keeps its key lists and scans them in order: it is parked
 * (one ref, linked on the table entry of that key) on the first key that is
 * missing, and when a write makes that key present it scans on from there.
 * So a wait costs O(its keys) over its whole life and holds O(1) table
 * references, whatever the number of keys (a 1024-rank rendezvous waiting
 * on all ranks' keys holds 1024 refs, not a million).  When the scan
 * reaches the end it completes, unless a key stopped existing meanwhile (a
 * DELETE, or a queue popped empty): then it scans again from the start, so
 * STOP_WAITING is only sent when all keys exist at that moment.
 *
 * Key lists are copied once and shared: waits on the same list (every rank
 * of a rendezvous waits on the same keys) hold one refcounted copy, found
 * through a table keyed by the table's seeded hash of the list's bytes.
 * The bytes of distinct lists count against the store's byte limit.
 *
 * Single-threaded, like the table it works on.
 */
#ifndef FCCL_STORE_WAITERS_H
#define FCCL_STORE_WAITERS_H

#include <stdint.h>

#include "codec.h"
#include "kv.h"

struct store_conn; /* the owner of a wait (server_int.h) */
struct waiter;

struct wait_ref {
    struct wait_ref *next, *prev; /* on entry's list while linked */
    struct kv_entry *entry;       /* NULL when not linked */
    struct waiter *w;
};

struct wait_keys;

struct waiters {
    struct kv *kv;
    uint64_t max_keys;  /* keys one pending wait may name in total */
    uint64_t max_bytes; /* bytes its key lists may take in total */
    struct wait_keys **lists; /* shared key lists by hash (chained) */
    uint64_t mask, nlists;
    uint64_t bytes; /* of all shared lists */
    /* The owner's wait completed (it was freed and its slot cleared
     * before): send STOP_WAITING. */
    void (*on_ready)(struct store_conn *owner);
    /* The wait could not be parked (out of memory) and was dropped: the
     * owner must be disconnected, as it will never get its answer. */
    void (*on_fail)(struct store_conn *owner);
};

/* Set up the shared-list table (the callbacks and limits are set by the
 * caller).  FCCL_OK or FCCL_ERR_NOMEM. */
int waiters_init(struct waiters *ws, struct kv *kv);
/* Free the table; every wait must have been cancelled. */
void waiters_free(struct waiters *ws);

/*
 * WAIT for the nkeys keys in `args` (a validated key list).  *slot is the
 * owner's pending wait (NULL if none) and is updated.
 * Returns 1 when there was no pending wait and every key exists now (reply
 * STOP_WAITING at once), 0 when the wait is parked (or merged), or
 * FCCL_ERR_LIMIT (too many keys, or no room under the store's byte limit)
 * / FCCL_ERR_NOMEM (the caller closes the connection, which cancels the
 * wait).
 */
int waiters_wait(struct waiters *ws, struct waiter **slot,
                 struct store_conn *owner, struct codec_slice args,
                 uint64_t nkeys);

/* Drop the pending wait in *slot (no-op if NULL); *slot becomes NULL. */
void waiters_cancel(struct waiters *ws, struct waiter **slot);

/* e just got a value: every wait parked on it moves on. */
void waiters_wake_all(struct waiters *ws, struct kv_entry *e);
/* e's queue got an item: waits parked on it move on, in arrival order,
 * until one completes (QUEUE_PUSH wakes one connection). */
void waiters_wake_one(struct waiters *ws, struct kv_entry *e);

#endif
