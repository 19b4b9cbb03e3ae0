/*
 * PyTorch's BARRIER (18): key, i64 world_size.  Each request adds 1 to the
 * decimal counter stored at the key (as ADD does); the reply, STOP_WAITING,
 * goes out once the counter reaches world_size.  Arrivals that find it
 * short are parked here, one per connection, and released by the arrival
 * that reaches their target, or by a plain ADD that does (the spec's
 * "once the counter reaches world_size"; PyTorch's classic server wakes
 * them on any ADD or SET of the key, reached or not).  CANCEL_WAIT drops a parked barrier (its
 * increment stays, as in PyTorch); so does closing the connection.
 *
 * The parked barriers are a plain list: an arrival scans it, which is
 * O(parked) per arrival and fine for barriers of a few thousand ranks.
 */
#include <stdlib.h>
#include <string.h>

#include "dlist.h"
#include "err.h"
#include "log.h"
#include "server_int.h"

struct barrier_wait {
    struct barrier_wait *prev, *next;
    struct store_conn *c;
    int64_t target;
    size_t klen;
    uint8_t key[];
};

static void unlink_wait(struct store_server *s, struct barrier_wait *b)
{
    DLIST_UNLINK(s->barriers, b, prev, next);
    b->c->bar = NULL;
    free(b);
}

/* The counter at key is now v: release the barriers it satisfies. */
static void release(struct store_server *s, const uint8_t *key, size_t klen,
                    int64_t v)
{
    struct barrier_wait *b = s->barriers, *next;
    for (; b; b = next) {
        next = b->next;
        if (b->klen != klen || memcmp(b->key, key, klen) || v < b->target)
            continue;
        struct store_conn *c = b->c;
        unlink_wait(s, b);
        uint8_t r = REPLY_STOP_WAITING;
        store_conn_reply(c, &r, 1);
    }
}

int store_barrier(struct store_server *s, struct store_conn *c,
                  const struct codec_req *r)
{
    if (c->bar || c->wait)
        return fccl_err(FCCL_ERR_PROTOCOL, "BARRIER while a wait is pending");
    if (r->num < 1)
        return fccl_err(FCCL_ERR_PROTOCOL, "BARRIER with world_size %lld",
                        (long long)r->num);
    int rc = store_jrn_add(s, r->key, 1);
    if (rc < 0)
        return rc;
    struct kv_entry *e = kv_lookup_or_add(&s->kv, r->key.p, r->key.len);
    if (!e) {
        store_jrn_undo(s);
        return fccl_err(FCCL_ERR_NOMEM, "BARRIER: out of memory");
    }
    int64_t v;
    rc = kv_add(&s->kv, e, 1, &v);
    if (rc < 0) {
        store_jrn_undo(s);
        kv_release(&s->kv, e);
        return fccl_err_wrap(rc, "BARRIER '%.*s'",
                             (int)(r->key.len > 128 ? 128 : r->key.len),
                             (const char *)r->key.p);
    }
    waiters_wake_all(&s->ws, e);
    release(s, r->key.p, (size_t)r->key.len, v);
    if (v >= r->num) {
        uint8_t b = REPLY_STOP_WAITING;
        store_conn_reply(c, &b, 1);
        return FCCL_OK;
    }
    struct barrier_wait *b = malloc(sizeof(*b) + r->key.len);
    if (!b)
        return fccl_err(FCCL_ERR_NOMEM, "BARRIER: out of memory");
    b->c = c;
    b->target = r->num;
    b->klen = (size_t)r->key.len;
    memcpy(b->key, r->key.p, b->klen);
    DLIST_PUSH(s->barriers, b, prev, next);
    c->bar = b;
    return FCCL_OK;
}

void store_barrier_counted(struct store_server *s, struct codec_slice key,
                           int64_t v)
{
    if (s->barriers)
        release(s, key.p, (size_t)key.len, v);
}

void store_barrier_drop(struct store_server *s, struct store_conn *c)
{
    if (c->bar)
        unlink_wait(s, c->bar);
}

void store_barrier_each(struct store_server *s,
                        void (*fn)(void *arg, const uint8_t *key,
                                   size_t klen, int64_t target),
                        void *arg)
{
    for (const struct barrier_wait *b = s->barriers; b; b = b->next)
        fn(arg, b->key, b->klen, b->target);
}
