/*
 * The store's commands: one handler per operation of PROTOCOL.md, run on a
 * request the codec has already validated.  Handlers change the table, wake
 * the waits a write satisfies, and queue the exact reply bytes; a write is
 * recorded in the journal before it is applied (server_journal.c).  A handler
 * returns a negative status (with the reason in fccl_last_error) only when
 * the connection must be closed: a limit, a non-numeric ADD, a legacy GET
 * of a missing key, or memory exhaustion.
 */
#include <stdlib.h>
#include <string.h>

#include "err.h"
#include "backend_etcd.h"
#include "log.h"
#include "server_int.h"

#define SMALL_REPLY 4096 /* strings up to this size go out in one piece */

/* ---- replies ---- */

static void reply_u8(struct store_conn *c, uint8_t v)
{
    store_conn_reply(c, &v, 1);
}

static void reply_u32(struct store_conn *c, uint32_t v)
{
    uint8_t b[4];
    codec_set_u32(b, v);
    store_conn_reply(c, b, sizeof(b));
}

static void reply_i64(struct store_conn *c, int64_t v)
{
    uint8_t b[8];
    codec_set_u64(b, (uint64_t)v);
    store_conn_reply(c, b, sizeof(b));
}

/* A byte string: u64 length then the bytes, as one piece when small (an
 * empty value must never leave a lone header waiting for more). */
static void reply_str(struct store_conn *c, const uint8_t *p, uint64_t n)
{
    uint8_t b[8 + SMALL_REPLY];
    codec_set_u64(b, n);
    if (n <= SMALL_REPLY) {
        if (n)
            memcpy(b + 8, p, n);
        store_conn_reply(c, b, 8 + n);
        return;
    }
    store_conn_reply(c, b, 8);
    store_conn_reply(c, p, n);
}

/* Values of s->lend_min bytes or more are not copied into a reply: the
 * reply refers to the stored bytes (kv_value_lend) or to the popped item
 * until it is sent. */

static void value_returned(const void *p, size_t n, void *arg)
{
    (void)p;
    (void)n;
    kv_value_return(arg);
}

static void item_sent(const void *p, size_t n, void *arg)
{
    (void)p;
    (void)n;
    kv_item_free(arg);
}

static void reply_len(struct store_conn *c, uint64_t n)
{
    uint8_t h[8];
    codec_set_u64(h, n);
    store_conn_reply(c, h, sizeof(h));
}

/* e's value as a byte string, lent rather than copied when large. */
static void reply_entry_value(struct store_conn *c, struct kv_entry *e)
{
    const uint8_t *p;
    struct kv_share *t;
    if (e->vlen < c->s->lend_min || kv_value_lend(e, &p, &t) < 0) {
        reply_str(c, e->val, e->vlen);
        return;
    }
    reply_len(c, e->vlen);
    store_conn_reply_ref(c, p, e->vlen, value_returned, t);
}

/* ---- helpers ---- */

static int key_err(int code, const char *what, struct codec_slice k)
{
    return fccl_err(code, "%s of key '%.*s'", what,
                    (int)(k.len > 128 ? 128 : k.len), (const char *)k.p);
}

/* The entry a journaled write goes to, created if need be; without
 * memory for it the write's record is taken back. */
static struct kv_entry *entry_for_write(struct store_server *s,
                                        struct codec_slice k)
{
    struct kv_entry *e = kv_lookup_or_add(&s->kv, k.p, k.len);
    if (!e)
        store_jrn_undo(s);
    return e;
}

/* A journaled write failed: take its record back; the entry may be an
 * empty husk: drop it. */
static int write_failed(struct store_server *s, struct kv_entry *e, int rc,
                        const char *op, struct codec_slice k)
{
    store_jrn_undo(s);
    kv_release(&s->kv, e);
    return fccl_err_wrap(rc, "%s '%.*s'", op,
                         (int)(k.len > 128 ? 128 : k.len), (const char *)k.p);
}

/* The writes of a whole value at a key: the journal record each makes,
 * how the table takes it, whom it wakes. */
struct value_write {
    const char *name;
    enum journal_rec rec;
    int (*apply)(struct kv *, struct kv_entry *, const uint8_t *, uint64_t);
    /* the same for a malloc'd value the table may keep, or NULL */
    int (*take)(struct kv *, struct kv_entry *, uint8_t *, uint64_t);
    void (*wake)(struct waiters *, struct kv_entry *);
};

static const struct value_write W_SET = {"SET", JREC_SET, kv_set,
                                         kv_set_take, waiters_wake_all};
static const struct value_write W_APPEND = {"APPEND", JREC_APPEND, kv_append,
                                            NULL, waiters_wake_all};
static const struct value_write W_PUSH = {"QUEUE_PUSH", JREC_PUSH,
                                          kv_queue_push, NULL,
                                          waiters_wake_one};

/* Record, then apply the write w of v at k.  With `owned` (*owned the
 * malloc'd v.p), a table that keeps the buffer sets *owned to NULL. */
static int write_value(struct store_server *s, const struct value_write *w,
                       struct codec_slice k, struct codec_slice v,
                       uint8_t **owned)
{
    int rc = store_jrn_record(s, w->rec, k, v.p, v.len);
    if (rc < 0)
        return rc;
    struct kv_entry *e = entry_for_write(s, k);
    if (!e)
        return key_err(FCCL_ERR_NOMEM, w->name, k);
    if (w->take && owned && *owned) {
        rc = w->take(&s->kv, e, *owned, v.len);
        if (rc == FCCL_OK)
            *owned = NULL;
    } else {
        rc = w->apply(&s->kv, e, v.p, v.len);
    }
    if (rc < 0)
        return write_failed(s, e, rc, w->name, k);
    w->wake(&s->ws, e);
    return FCCL_OK;
}

/* ---- handlers ---- */

static int op_compare_set(struct store_server *s, struct store_conn *c,
                          const struct codec_req *r)
{
    struct kv_entry *e = kv_find(&s->kv, r->key.p, r->key.len);
    if (!e || !e->has_val) {
        /* PyTorch: a missing key is created only when expected is empty;
         * otherwise the reply is `expected` and nothing is stored. */
        if (r->val.len != 0) {
            reply_str(c, r->val.p, r->val.len);
            return FCCL_OK;
        }
        int rc = write_value(s, &W_SET, r->key, r->val2, NULL);
        if (rc < 0)
            return rc;
        reply_str(c, r->val2.p, r->val2.len);
        return FCCL_OK;
    }
    if (e->vlen == r->val.len &&
        (r->val.len == 0 || memcmp(e->val, r->val.p, r->val.len) == 0)) {
        int rc = store_jrn_record(s, JREC_SET, r->key, r->val2.p,
                                  r->val2.len);
        if (rc < 0)
            return rc;
        rc = kv_set(&s->kv, e, r->val2.p, r->val2.len);
        if (rc < 0) {
            store_jrn_undo(s);
            return fccl_err_wrap(rc, "COMPARE_SET");
        }
    }
    reply_str(c, e->val, e->vlen);
    return FCCL_OK;
}

/* GET and MULTI_GET of a missing key: empty on modern links (PyTorch's
 * newer server), close on legacy ones (the 1.13 server). */
static int reply_value(struct store_conn *c, struct codec_slice k,
                       struct kv_entry *e)
{
    if (e && e->has_val) {
        reply_entry_value(c, e);
        return FCCL_OK;
    }
    if (c->dialect == DIALECT_LEGACY)
        return key_err(FCCL_ERR_NOTFOUND, "legacy GET", k);
    reply_str(c, NULL, 0);
    return FCCL_OK;
}

static int op_get(struct store_server *s, struct store_conn *c,
                  const struct codec_req *r)
{
    return reply_value(c, r->key, kv_find(&s->kv, r->key.p, r->key.len));
}

static int op_add(struct store_server *s, struct store_conn *c,
                  const struct codec_req *r)
{
    int rc = store_jrn_add(s, r->key, r->num);
    if (rc < 0)
        return rc;
    struct kv_entry *e = entry_for_write(s, r->key);
    if (!e)
        return key_err(FCCL_ERR_NOMEM, "ADD", r->key);
    int64_t v;
    rc = kv_add(&s->kv, e, r->num, &v);
    if (rc < 0)
        return write_failed(s, e, rc, "ADD", r->key);
    reply_i64(c, v);
    waiters_wake_all(&s->ws, e);
    store_barrier_counted(s, r->key, v);
    store_join_counted(s, r->key, v);
    return FCCL_OK;
}

static int op_check(struct store_server *s, struct store_conn *c,
                    const struct codec_req *r)
{
    struct codec_slice args = r->args, k;
    int ready = 1;
    while (ready && codec_next_slice(&args, &k))
        ready = kv_ready(kv_find(&s->kv, k.p, k.len));
    reply_u8(c, ready ? REPLY_READY : REPLY_NOT_READY);
    return FCCL_OK;
}

static int op_wait(struct store_server *s, struct store_conn *c,
                   const struct codec_req *r)
{
    int rc = waiters_wait(&s->ws, &c->wait, c, r->args, r->nkeys);
    if (rc < 0)
        return fccl_err_wrap(rc, "WAIT");
    if (rc == 1)
        reply_u8(c, REPLY_STOP_WAITING);
    return FCCL_OK;
}

static int op_delete(struct store_server *s, struct store_conn *c,
                     const struct codec_req *r)
{
    struct kv_entry *e = kv_find(&s->kv, r->key.p, r->key.len);
    if (e && e->has_val) {
        int rc = store_jrn_record(s, JREC_DEL, r->key, NULL, 0);
        if (rc < 0)
            return rc;
    }
    int n = kv_del_value(&s->kv, e);
    kv_release(&s->kv, e);
    reply_i64(c, n);
    return FCCL_OK;
}

/* Counts a refused reply; the message says which bound it passed. */
static int refuse_reply(struct store_server *s, const char *op,
                        uint64_t bytes, const char *passes, uint64_t bound,
                        const char *what)
{
    s->st.refused_replies++;
    return fccl_err(FCCL_ERR_LIMIT, "%s reply of %llu bytes %s %llu-byte %s",
                    op, (unsigned long long)bytes, passes,
                    (unsigned long long)bound, what);
}

/* A reply that n bytes of request can make huge (MULTI_GET naming one big
 * key many times, a key listing) is sized before it is built: it must fit
 * the per-request budget (the largest request the server accepts) and,
 * with everything stored, held and queued, the store's byte limit. */
static int reply_budget(struct store_server *s, const char *op,
                        uint64_t bytes)
{
    if (bytes > s->lim.max_request)
        return refuse_reply(s, op, bytes, "is over the",
                            s->lim.max_request,
                            "budget of one reply (2 x max-value-bytes + "
                            "2 x max-key-bytes + 4 KiB)");
    if (store_would_overflow(s, bytes))
        return refuse_reply(s, op, bytes, "would pass the store's",
                            s->cfg.max_total_bytes,
                            "limit (stored, held and queued bytes count)");
    return FCCL_OK;
}

static int op_multi_get(struct store_server *s, struct store_conn *c,
                        const struct codec_req *r)
{
    struct codec_slice args = r->args, k;
    uint64_t bytes = 0;
    while (codec_next_slice(&args, &k)) {
        const struct kv_entry *e = kv_find(&s->kv, k.p, k.len);
        bytes += 8 + (e && e->has_val ? e->vlen : 0);
    }
    int rc = reply_budget(s, "MULTI_GET", bytes);
    if (rc < 0)
        return rc;
    args = r->args;
    while (codec_next_slice(&args, &k)) {
        int rc = reply_value(c, k, kv_find(&s->kv, k.p, k.len));
        if (rc < 0)
            return rc;
    }
    return FCCL_OK;
}

static int op_multi_set(struct store_server *s, const struct codec_req *r)
{
    struct codec_slice args = r->args, k, v;
    while (codec_next_slice(&args, &k) && codec_next_slice(&args, &v)) {
        int rc = write_value(s, &W_SET, k, v, NULL);
        if (rc < 0)
            return fccl_err_wrap(rc, "MULTI_SET");
    }
    return FCCL_OK;
}

static int op_cancel_wait(struct store_server *s, struct store_conn *c)
{
    waiters_cancel(&s->ws, &c->wait);
    store_barrier_drop(s, c);
    reply_u8(c, REPLY_WAIT_CANCELED);
    return FCCL_OK;
}


static int op_queue_pop(struct store_server *s, struct store_conn *c,
                        const struct codec_req *r)
{
    struct kv_entry *e = kv_find(&s->kv, r->key.p, r->key.len);
    int64_t before = e ? (int64_t)e->qlen : 0;
    if (before > 0) {
        int rc = store_jrn_record(s, JREC_POP, r->key, NULL, 0);
        if (rc < 0)
            return rc;
    }
    reply_i64(c, before);
    if (before == 0)
        return FCCL_OK;
    struct kv_item *it = kv_queue_pop(&s->kv, e);
    if (it->len >= s->lend_min) {
        reply_len(c, it->len);
        store_conn_reply_ref(c, it->data, it->len, item_sent, it);
    } else {
        reply_str(c, it->data, it->len);
        kv_item_free(it);
    }
    kv_release(&s->kv, e);
    return FCCL_OK;
}

static int op_queue_len(struct store_server *s, struct store_conn *c,
                        const struct codec_req *r)
{
    struct kv_entry *e = kv_find(&s->kv, r->key.p, r->key.len);
    reply_i64(c, e ? (int64_t)e->qlen : 0);
    return FCCL_OK;
}

/* LIST_KEYS (fccl extension 0x80): u64 n, then n keys, produced over
 * several loop turns (server_list.c). */
static int op_list_keys(struct store_server *s, struct store_conn *c,
                        const struct codec_req *r)
{
    return store_list_start(s, c, r);
}

/* SYNC (0x81): the outcome of c's writes since the last SYNC.  From now
 * on c's refused writes are reported here instead of closing c. */
static int op_sync(struct store_conn *c)
{
    c->sync_aware = 1;
    if (!c->sync_code) {
        reply_u8(c, SYNC_OK);
        return FCCL_OK;
    }
    const char *m = c->sync_msg ? c->sync_msg : "write refused";
    uint8_t code = (uint8_t)c->sync_code;
    store_conn_reply(c, &code, 1);
    reply_str(c, (const uint8_t *)m, strlen(m));
    free(c->sync_msg);
    c->sync_msg = NULL;
    c->sync_code = 0;
    return FCCL_OK;
}

/* STATS (0x84): "name value" lines as one byte string. */
static int op_stats(struct store_server *s, struct store_conn *c)
{
    struct codec_buf b;
    codec_buf_init(&b);
    store_stats_text(s, &b);
    if (b.oom) {
        codec_buf_free(&b);
        return fccl_err(FCCL_ERR_NOMEM, "STATS reply");
    }
    reply_str(c, b.p, b.len);
    codec_buf_free(&b);
    return FCCL_OK;
}

static int run_op(struct store_server *s, struct store_conn *c,
                  const struct codec_req *r, uint8_t **owned)
{
    switch (r->op) {
    case OP_VALIDATE: return FCCL_OK; /* the codec checked the magic */
    case OP_PING: reply_u32(c, r->u32); return FCCL_OK;
    case OP_SET: return write_value(s, &W_SET, r->key, r->val, owned);
    case OP_COMPARE_SET: return op_compare_set(s, c, r);
    case OP_GET: return op_get(s, c, r);
    case OP_ADD: return op_add(s, c, r);
    case OP_CHECK: return op_check(s, c, r);
    case OP_WAIT: return op_wait(s, c, r);
    case OP_GETNUMKEYS: reply_i64(c, (int64_t)s->kv.nkeys); return FCCL_OK;
    case OP_DELETE_KEY: return op_delete(s, c, r);
    case OP_APPEND: return write_value(s, &W_APPEND, r->key, r->val, NULL);
    case OP_MULTI_GET: return op_multi_get(s, c, r);
    case OP_MULTI_SET: return op_multi_set(s, r);
    case OP_CANCEL_WAIT: return op_cancel_wait(s, c);
    case OP_QUEUE_PUSH: return write_value(s, &W_PUSH, r->key, r->val, NULL);
    case OP_QUEUE_POP: return op_queue_pop(s, c, r);
    case OP_QUEUE_LEN: return op_queue_len(s, c, r);
    case OP_LIST_KEYS: return op_list_keys(s, c, r);
    case OP_BARRIER: return store_barrier(s, c, r);
    case OP_LIST_ALL: { /* PyTorch's 17: 0x80's reply for the empty prefix */
        struct codec_req all = *r;
        all.key.p = (const uint8_t *)"";
        all.key.len = 0;
        return op_list_keys(s, c, &all);
    }
    case OP_SYNC: return op_sync(c);
    case OP_STATS: return op_stats(s, c);
    case OP_AUTH_HELLO: /* answered by store_auth_gate */
    case OP_AUTH_PROOF:
    case OP_WATCH_KEY:
    case OP__COUNT: break;
    }
    return fccl_err(FCCL_ERR_PROTOCOL, "%s is not served",
                    codec_op_name(r->op));
}

/* Writes without a reply: the ones SYNC reports on. */
static int quiet_write(enum store_op op)
{
    return op == OP_SET || op == OP_APPEND || op == OP_MULTI_SET ||
           op == OP_QUEUE_PUSH;
}

/* Keep the first refusal since the last SYNC for c's next SYNC. */
static void note_refusal(struct store_server *s, struct store_conn *c,
                         int rc)
{
    s->st.refused_writes++;
    s->st.refused[rc == FCCL_ERR_LIMIT   ? STORE_REFUSE_LIMIT
                  : rc == FCCL_ERR_NOMEM ? STORE_REFUSE_NOMEM
                  : c->auth              ? STORE_REFUSE_READ_ONLY
                                         : STORE_REFUSE_AUTH]++;
    LOG_INFO("STORE", "client %s: %s", c->addr, fccl_last_error());
    if (c->sync_code)
        return;
    c->sync_code = rc == FCCL_ERR_LIMIT   ? SYNC_LIMIT
                   : rc == FCCL_ERR_NOMEM ? SYNC_NOMEM
                   : rc == FCCL_ERR_AUTH  ? SYNC_DENIED
                                          : SYNC_OTHER;
    size_t n = strnlen(fccl_last_error(), SYNC_MSG_MAX);
    c->sync_msg = malloc(n + 1);
    if (c->sync_msg) {
        memcpy(c->sync_msg, fccl_last_error(), n);
        c->sync_msg[n] = '\0';
    }
}

int store_dispatch_owned(struct store_server *s, struct store_conn *c,
                         const struct codec_req *r, uint8_t **owned)
{
    int rc = store_auth_gate(s, c, r);
    if (rc == STORE_DEFER)
        return rc; /* not now: the request stays unread */
    if (rc == FCCL_OK && s->be) { /* --backend: the request runs on etcd */
        rc = store_be_dispatch(s, c, r);
        if (rc >= 0)
            store_slots_progress(s, c, r->op);
        return rc;
    }
    if (rc == FCCL_OK)
        rc = run_op(s, c, r, owned);
    else if (rc == 1)
        rc = FCCL_OK; /* answered by the gate */
    if (rc == FCCL_ERR_IO && s->has_journal && s->jrn.failed)
        s->st.refused[STORE_REFUSE_JOURNAL]++; /* closes c */
    if (rc >= 0)
        store_slots_progress(s, c, r->op);
    if (rc >= 0 || !c->sync_aware || !quiet_write(r->op) ||
        (rc != FCCL_ERR_LIMIT && rc != FCCL_ERR_NOMEM && rc != FCCL_ERR_AUTH))
        return rc;
    note_refusal(s, c, rc);
    return FCCL_OK;
}

int store_dispatch(struct store_server *s, struct store_conn *c,
                   const struct codec_req *r)
{
    return store_dispatch_owned(s, c, r, NULL);
}

void store_conn_wait_ready(struct store_conn *c)
{
    reply_u8(c, REPLY_STOP_WAITING);
}

void store_conn_wait_failed(struct store_conn *c)
{
    store_conn_abort(c, "out of memory parking its WAIT");
}
