/*
 * Pending WAITs (see waiters.h): a copy of each WAIT's key list, scanned
 * forward one missing key at a time with a single ref parked on that key.
 */
#include "waiters.h"

#include <stdlib.h>
#include <string.h>

#include "err.h"

enum { SCAN_PARKED, SCAN_DONE, SCAN_NOMEM };

struct wait_keys { /* one WAIT's key list, as it came on the wire */
    struct wait_keys *next;
    uint64_t len;
    uint8_t bytes[];
};

struct waiter {
    struct store_conn *owner;
    struct waiter **slot; /* the owner's pointer to us, cleared at the end */
    struct wait_ref ref;  /* parked on the key being awaited */
    struct wait_keys *lists, *last;
    struct wait_keys *cur; /* list being scanned (NULL: all scanned) */
    uint64_t pos;          /* offset in cur of the next key to check */
    uint64_t nkeys, nbytes;
    uint64_t lost_seen; /* kv->lost when the current pass began */
};

static void link_ref(struct wait_ref *r, struct kv_entry *e)
{
    r->entry = e;
    r->next = NULL;
    r->prev = e->wait_tail;
    if (e->wait_tail)
        e->wait_tail->next = r;
    else
        e->wait_head = r;
    e->wait_tail = r;
}

static void unlink_ref(struct wait_ref *r)
{
    struct kv_entry *e = r->entry;
    if (r->prev)
        r->prev->next = r->next;
    else
        e->wait_head = r->next;
    if (r->next)
        r->next->prev = r->prev;
    else
        e->wait_tail = r->prev;
    r->next = r->prev = NULL;
    r->entry = NULL;
}

/* Unpark, free the key lists and the wait, and clear the owner's slot. */
static void destroy(struct waiters *ws, struct waiter *w)
{
    struct kv_entry *e = w->ref.entry;
    if (e) {
        unlink_ref(&w->ref);
        kv_release(ws->kv, e); /* an entry made only to park on */
    }
    for (struct wait_keys *l = w->lists, *nx; l; l = nx) {
        nx = l->next;
        free(l);
    }
    *w->slot = NULL;
    free(w);
}

/* Park on the first missing key from (cur, pos) on.  When every key has
 * been seen present in a pass during which none stopped existing, done. */
static int scan(struct waiters *ws, struct waiter *w)
{
    for (;;) {
        for (; w->cur; w->cur = w->cur->next, w->pos = 0) {
            struct codec_slice rest = {w->cur->bytes + w->pos,
                                       w->cur->len - w->pos}, k;
            while (codec_next_slice(&rest, &k)) {
                struct kv_entry *e = kv_find(ws->kv, k.p, k.len);
                if (kv_ready(e))
                    continue;
                if (!e && !(e = kv_lookup_or_add(ws->kv, k.p, k.len)))
                    return SCAN_NOMEM;
                w->pos = (uint64_t)(rest.p - w->cur->bytes);
                link_ref(&w->ref, e);
                return SCAN_PARKED;
            }
        }
        if (w->lost_seen == ws->kv->lost)
            return SCAN_DONE;
        w->lost_seen = ws->kv->lost; /* a key may be gone: check all again */
        w->cur = w->lists;
        w->pos = 0;
    }
}

/* Move a wait on after its key showed up.  Returns 1 if it completed. */
static int advance(struct waiters *ws, struct waiter *w)
{
    int r = scan(ws, w);
    if (r == SCAN_PARKED)
        return 0;
    struct store_conn *owner = w->owner;
    destroy(ws, w);
    if (r == SCAN_DONE)
        ws->on_ready(owner);
    else
        ws->on_fail(owner);
    return r == SCAN_DONE;
}

/* Every key of the list exists now (no allocation: the common case).
 * *first gets the offset of the first missing key. */
static int all_ready(struct kv *kv, struct codec_slice args, uint64_t *first)
{
    struct codec_slice rest = args, k;
    const uint8_t *at = rest.p;
    while (codec_next_slice(&rest, &k)) {
        if (!kv_ready(kv_find(kv, k.p, k.len))) {
            *first = (uint64_t)(at - args.p);
            return 0;
        }
        at = rest.p;
    }
    return 1;
}

static struct wait_keys *copy_keys(struct codec_slice args)
{
    struct wait_keys *l = malloc(sizeof(*l) + args.len);
    if (!l)
        return NULL;
    l->next = NULL;
    l->len = args.len;
    memcpy(l->bytes, args.p, args.len);
    return l;
}

static int start(struct waiters *ws, struct waiter **slot,
                 struct store_conn *owner, struct codec_slice args,
                 uint64_t nkeys, uint64_t first)
{
    struct waiter *w = calloc(1, sizeof(*w));
    struct wait_keys *l = copy_keys(args);
    if (!w || !l) {
        free(w);
        free(l);
        return fccl_err(FCCL_ERR_NOMEM, "WAIT on %llu keys",
                        (unsigned long long)nkeys);
    }
    w->owner = owner;
    w->slot = slot;
    w->ref.w = w;
    w->lists = w->last = w->cur = l;
    w->pos = first; /* the keys before were all present just now */
    w->nkeys = nkeys;
    w->nbytes = args.len;
    w->lost_seen = ws->kv->lost;
    *slot = w;
    if (scan(ws, w) != SCAN_PARKED) {
        destroy(ws, w); /* cannot be DONE: key `first` is missing */
        return fccl_err(FCCL_ERR_NOMEM, "WAIT: table entry");
    }
    return 0;
}

/* A WAIT while one is pending: its keys join the pending wait, which is
 * parked, so its scan reaches them in turn. */
static int merge(struct waiters *ws, struct waiter *w, struct codec_slice args,
                 uint64_t nkeys)
{
    if (w->nkeys + nkeys > ws->max_keys ||
        (ws->max_bytes && w->nbytes + args.len > ws->max_bytes))
        return fccl_err(FCCL_ERR_LIMIT,
                        "pending WAIT would name %llu keys in %llu bytes",
                        (unsigned long long)(w->nkeys + nkeys),
                        (unsigned long long)(w->nbytes + args.len));
    struct wait_keys *l = copy_keys(args);
    if (!l)
        return fccl_err(FCCL_ERR_NOMEM, "WAIT on %llu keys",
                        (unsigned long long)nkeys);
    w->last->next = l;
    w->last = l;
    w->nkeys += nkeys;
    w->nbytes += args.len;
    return 0;
}

int waiters_wait(struct waiters *ws, struct waiter **slot,
                 struct store_conn *owner, struct codec_slice args,
                 uint64_t nkeys)
{
    if (*slot)
        return nkeys ? merge(ws, *slot, args, nkeys) : 0;
    uint64_t first = 0;
    if (all_ready(ws->kv, args, &first))
        return 1;
    return start(ws, slot, owner, args, nkeys, first);
}

void waiters_cancel(struct waiters *ws, struct waiter **slot)
{
    if (*slot)
        destroy(ws, *slot);
}

void waiters_wake_all(struct waiters *ws, struct kv_entry *e)
{
    struct wait_ref *r;
    while ((r = e->wait_head) != NULL) {
        unlink_ref(r);
        advance(ws, r->w);
    }
}

void waiters_wake_one(struct waiters *ws, struct kv_entry *e)
{
    struct wait_ref *r;
    while ((r = e->wait_head) != NULL) {
        unlink_ref(r);
        if (advance(ws, r->w))
            return;
    }
}
