/*
 * Pending WAITs (see waiters.h): shared copies of the WAITs' key lists,
 * each wait scanning its lists forward one missing key at a time with a
 * single ref parked on that key.
 */
#include "dlist.h"
#include "waiters.h"

#include <stdlib.h>
#include <string.h>

#include "err.h"

#define LISTS_MIN 64 /* initial buckets of the shared-list table */
#define INLINE_LISTS 4

enum { SCAN_PARKED, SCAN_DONE, SCAN_NOMEM };

struct wait_keys { /* one key list as it came on the wire, shared */
    struct wait_keys *next; /* hash chain */
    uint64_t hash, refs, len;
    uint8_t bytes[];
};

struct waiter {
    struct store_conn *owner;
    struct waiter **slot; /* the owner's pointer to us, cleared at the end */
    struct wait_ref ref;  /* parked on the key being awaited */
    struct wait_keys **lists; /* in arrival order (inl until it grows) */
    struct wait_keys *inl[INLINE_LISTS];
    uint32_t nlists, cap;
    uint32_t cur;   /* list being scanned (nlists: all scanned) */
    uint64_t pos;   /* offset in lists[cur] of the next key to check */
    uint64_t nkeys; /* all lists together, for the limit */
    uint64_t nbytes;
    uint64_t lost_seen; /* kv->lost when the current pass began */
};

/* ---- shared key lists ---- */

int waiters_init(struct waiters *ws, struct kv *kv)
{
    ws->kv = kv;
    ws->lists = calloc(LISTS_MIN, sizeof(*ws->lists));
    if (!ws->lists)
        return fccl_err(FCCL_ERR_NOMEM, "wait table");
    ws->mask = LISTS_MIN - 1;
    ws->nlists = 0;
    ws->bytes = 0;
    return FCCL_OK;
}

void waiters_free(struct waiters *ws)
{
    free(ws->lists); /* empty once every wait is gone */
    ws->lists = NULL;
}

/* Double the buckets; on allocation failure keep the old ones. */
static void lists_grow(struct waiters *ws)
{
    HASH_DOUBLE(struct wait_keys, ws->lists, ws->mask, next, hash);
}

/* The shared copy of `args` (refcount taken), made if new. */
static int list_get(struct waiters *ws, struct codec_slice args,
                    struct wait_keys **out)
{
    uint64_t h = kv_hash(ws->kv, args.p, args.len);
    for (struct wait_keys *l = ws->lists[h & ws->mask]; l; l = l->next) {
        if (l->hash == h && l->len == args.len &&
            memcmp(l->bytes, args.p, args.len) == 0) {
            l->refs++;
            *out = l;
            return FCCL_OK;
        }
    }
    struct kv *kv = ws->kv;
    if (kv->max_bytes && kv->bytes + ws->bytes + args.len > kv->max_bytes)
        return fccl_err(FCCL_ERR_LIMIT, "WAIT: %llu bytes of keys would pass "
                        "the store's %llu-byte limit",
                        (unsigned long long)args.len,
                        (unsigned long long)kv->max_bytes);
    struct wait_keys *l = malloc(sizeof(*l) + args.len);
    if (!l)
        return fccl_err(FCCL_ERR_NOMEM, "WAIT: %llu bytes of keys",
                        (unsigned long long)args.len);
    l->hash = h;
    l->refs = 1;
    l->len = args.len;
    memcpy(l->bytes, args.p, args.len);
    l->next = ws->lists[h & ws->mask];
    ws->lists[h & ws->mask] = l;
    ws->bytes += args.len;
    if (++ws->nlists > ws->mask + 1)
        lists_grow(ws);
    *out = l;
    return FCCL_OK;
}

static void list_put(struct waiters *ws, struct wait_keys *l)
{
    if (--l->refs)
        return;
    struct wait_keys **pp = &ws->lists[l->hash & ws->mask];
    while (*pp != l)
        pp = &(*pp)->next;
    *pp = l->next;
    ws->bytes -= l->len;
    ws->nlists--;
    free(l);
}

/* ---- refs ---- */

static void link_ref(struct wait_ref *r, struct kv_entry *e)
{
    r->entry = e;
    DLIST_APPEND(e->wait_head, e->wait_tail, r, prev, next);
}

static void unlink_ref(struct wait_ref *r)
{
    struct kv_entry *e = r->entry;
    DLIST_UNLINK_TAIL(e->wait_head, e->wait_tail, r, prev, next);
    r->next = r->prev = NULL;
    r->entry = NULL;
}

/* ---- waits ---- */

/* Unpark, drop the key lists, free the wait and clear the owner's slot. */
static void destroy(struct waiters *ws, struct waiter *w)
{
    struct kv_entry *e = w->ref.entry;
    if (e) {
        unlink_ref(&w->ref);
        kv_release(ws->kv, e); /* an entry made only to park on */
    }
    for (uint32_t i = 0; i < w->nlists; i++)
        list_put(ws, w->lists[i]);
    if (w->lists != w->inl)
        free(w->lists);
    *w->slot = NULL;
    free(w);
}

/* Park on the first missing key from (cur, pos) on.  When every key has
 * been seen present in a pass during which none stopped existing, done. */
static int scan(struct waiters *ws, struct waiter *w)
{
    for (;;) {
        for (; w->cur < w->nlists; w->cur++, w->pos = 0) {
            struct wait_keys *l = w->lists[w->cur];
            struct codec_slice rest = {l->bytes + w->pos, l->len - w->pos}, k;
            while (codec_next_slice(&rest, &k)) {
                struct kv_entry *e = kv_find(ws->kv, k.p, k.len);
                if (kv_ready(e))
                    continue;
                if (!e && !(e = kv_lookup_or_add(ws->kv, k.p, k.len)))
                    return SCAN_NOMEM;
                w->pos = (uint64_t)(rest.p - l->bytes);
                link_ref(&w->ref, e);
                return SCAN_PARKED;
            }
        }
        if (w->lost_seen == ws->kv->lost)
            return SCAN_DONE;
        w->lost_seen = ws->kv->lost; /* a key may be gone: check all again */
        w->cur = 0;
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

static int start(struct waiters *ws, struct waiter **slot,
                 struct store_conn *owner, struct codec_slice args,
                 uint64_t nkeys, uint64_t first)
{
    struct waiter *w = calloc(1, sizeof(*w));
    if (!w)
        return fccl_err(FCCL_ERR_NOMEM, "WAIT on %llu keys",
                        (unsigned long long)nkeys);
    int rc = list_get(ws, args, &w->inl[0]);
    if (rc < 0) {
        free(w);
        return rc;
    }
    w->owner = owner;
    w->slot = slot;
    w->ref.w = w;
    w->lists = w->inl;
    w->nlists = 1;
    w->cap = INLINE_LISTS;
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

/* Room for one more list in w.  FCCL_OK or FCCL_ERR_NOMEM. */
static int lists_room(struct waiter *w)
{
    if (w->nlists < w->cap)
        return FCCL_OK;
    struct wait_keys **n = malloc(2 * (size_t)w->cap * sizeof(*n));
    if (!n)
        return fccl_err(FCCL_ERR_NOMEM, "WAIT: merging");
    memcpy(n, w->lists, w->nlists * sizeof(*n));
    if (w->lists != w->inl)
        free(w->lists);
    w->lists = n;
    w->cap *= 2;
    return FCCL_OK;
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
    int rc = lists_room(w);
    if (rc == FCCL_OK)
        rc = list_get(ws, args, &w->lists[w->nlists]);
    if (rc < 0)
        return rc;
    w->nlists++;
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
