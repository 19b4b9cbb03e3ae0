/*
 * LIST_KEYS (fccl's 0x80, `tcpstore keys PREFIX`) without stalling the
 * server: the table is scanned LIST_BUCKETS buckets per loop turn into a
 * reply buffer owned by the connection, then the whole buffer is handed to
 * the connection's output by reference (no copy).  While a listing runs,
 * its connection reads and runs nothing else, so replies stay in order; the
 * table's bucket array is kept from growing (kv.no_grow), so a key present
 * throughout the listing appears exactly once; keys added or deleted
 * meanwhile may or may not appear.
 *
 * A listing of at most LIST_SORT_MAX keys is sorted by key bytes (cheap);
 * a larger one comes in table order (fccl's client sorts what it gets).
 * The buffer counts as held bytes and must fit the reply budget and the
 * byte limit, or the connection is closed like any over-limit request.
 */
#include <stdlib.h>
#include <string.h>

#include "err.h"
#include "log.h"
#include "server_int.h"

#define LIST_BUCKETS 16384     /* buckets scanned per loop turn */
#define LIST_SORT_MAX 65536    /* keys sorted by the server */

struct list_job {
    struct store_conn *c;
    uint8_t *prefix;
    uint64_t plen;
    uint64_t next; /* next bucket to scan */
    struct codec_buf out;  /* u64 count (filled at the end), then keys */
    uint64_t *offs;        /* offset of each key record in out */
    uint64_t count, cap;
    uint64_t held;         /* bytes of s->held for out and offs */
    int oom;
    struct event *ev;
};

static void on_step(evutil_socket_t fd, short what, void *arg);

static void add_key(void *arg, const struct kv_entry *e)
{
    struct list_job *j = arg;
    if (j->oom)
        return;
    if (j->count == j->cap) {
        uint64_t cap = j->cap ? 2 * j->cap : 1024;
        uint64_t *o = realloc(j->offs, cap * sizeof(*o));
        if (!o) {
            j->oom = 1;
            return;
        }
        j->offs = o;
        j->cap = cap;
    }
    j->offs[j->count++] = j->out.len;
    codec_put_str(&j->out, e->key, e->klen);
    j->oom = j->out.oom;
}

static void job_free(struct store_server *s, struct list_job *j)
{
    if (j->ev)
        event_free(j->ev);
    s->held -= j->held;
    s->kv.no_grow--;
    codec_buf_free(&j->out);
    free(j->offs);
    free(j->prefix);
    free(j);
}

void store_list_free(struct store_conn *c)
{
    if (!c->list)
        return;
    job_free(c->s, c->list);
    c->list = NULL;
}

static const uint8_t *sort_base;

static int cmp_rec(const void *a, const void *b)
{
    const uint8_t *x = sort_base + *(const uint64_t *)a;
    const uint8_t *y = sort_base + *(const uint64_t *)b;
    uint64_t lx = codec_get_u64(x), ly = codec_get_u64(y);
    int r = memcmp(x + 8, y + 8, lx < ly ? lx : ly);
    return r ? r : (lx > ly) - (lx < ly);
}

/* Sort small listings: records rewritten in key order. */
static int sort_small(struct list_job *j)
{
    if (j->count < 2 || j->count > LIST_SORT_MAX)
        return FCCL_OK;
    sort_base = j->out.p;
    qsort(j->offs, j->count, sizeof(*j->offs), cmp_rec);
    struct codec_buf sorted;
    codec_buf_init(&sorted);
    codec_put_u64(&sorted, 0);
    for (uint64_t i = 0; i < j->count; i++) {
        const uint8_t *r = j->out.p + j->offs[i];
        codec_put_bytes(&sorted, r, 8 + codec_get_u64(r));
    }
    if (sorted.oom) {
        codec_buf_free(&sorted);
        return FCCL_ERR_NOMEM;
    }
    codec_buf_free(&j->out);
    j->out = sorted;
    return FCCL_OK;
}

static void free_reply(const void *data, size_t len, void *arg)
{
    (void)data;
    (void)len;
    free(arg);
}

/* Account the buffer's growth; FCCL_ERR_LIMIT if it is over budget. */
static int account(struct store_server *s, struct list_job *j)
{
    uint64_t now = j->out.cap + j->cap * sizeof(*j->offs);
    if (now <= j->held)
        return FCCL_OK;
    if (j->out.len > s->lim.max_request ||
        store_would_overflow(s, now - j->held)) {
        s->st.refused_replies++;
        return fccl_err(FCCL_ERR_LIMIT,
                        "LIST_KEYS reply passed %llu bytes: over the reply "
                        "budget (%llu) or the store's byte limit",
                        (unsigned long long)j->out.len,
                        (unsigned long long)s->lim.max_request);
    }
    s->held += now - j->held;
    j->held = now;
    return FCCL_OK;
}

static void finish(struct store_server *s, struct list_job *j)
{
    struct store_conn *c = j->c;
    if (sort_small(j) < 0) {
        store_list_free(c);
        store_conn_abort(c, "out of memory sorting a key listing");
        return;
    }
    codec_set_u64(j->out.p, j->count);
    uint8_t *p = j->out.p;
    size_t n = j->out.len;
    codec_buf_init(&j->out); /* the reply owns the bytes now */
    store_list_free(c);
    store_conn_reply_ref(c, p, n, free_reply, p);
    s->life->list_done(c);
}

static void step(struct store_server *s, struct list_job *j)
{
    j->next = kv_scan(&s->kv, j->next, LIST_BUCKETS, j->prefix, j->plen,
                      add_key, j);
    if (j->oom) {
        struct store_conn *c = j->c;
        store_list_free(c);
        store_conn_abort(c, "out of memory listing keys");
        return;
    }
    if (account(s, j) < 0) {
        struct store_conn *c = j->c;
        store_list_free(c);
        store_conn_abort(c, fccl_last_error());
        return;
    }
    if (j->next == UINT64_MAX) {
        finish(s, j);
        return;
    }
    struct timeval zero = {0, 0};
    event_add(j->ev, &zero); /* the next slice in the next loop turn */
}

static void on_step(evutil_socket_t fd, short what, void *arg)
{
    struct list_job *j = arg;
    struct store_server *s = j->c->s;
    uint64_t t0 = store_turn_begin();
    (void)fd;
    (void)what;
    step(s, j);
    store_turn_end(s, t0);
}

int store_list_start(struct store_server *s, struct store_conn *c,
                     const struct codec_req *r)
{
    struct list_job *j = calloc(1, sizeof(*j));
    if (!j)
        return fccl_err(FCCL_ERR_NOMEM, "LIST_KEYS");
    j->c = c;
    j->plen = r->key.len;
    j->prefix = malloc(r->key.len ? r->key.len : 1);
    j->ev = evtimer_new(s->base, on_step, j);
    codec_buf_init(&j->out);
    codec_put_u64(&j->out, 0); /* the count, filled in at the end */
    s->kv.no_grow++;
    if (!j->prefix || !j->ev || j->out.oom) {
        job_free(s, j);
        return fccl_err(FCCL_ERR_NOMEM, "LIST_KEYS");
    }
    memcpy(j->prefix, r->key.p, r->key.len);
    c->list = j;
    struct timeval zero = {0, 0};
    event_add(j->ev, &zero);
    return FCCL_OK;
}
