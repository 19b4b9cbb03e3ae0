/*
 * tcpstore-server --backend etcd://: one handler per request type
 * (backend_etcd.h).  Each is a chain of etcd requests: a handler sends
 * one with be_send and names the step that takes its reply.  Replies are
 * the bytes tcpstore-server itself would send (server_ops.c).
 */
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "codec.h"
#include "backend_etcd.h"
#include "clock.h"
#include "err.h"
#include "log.h"
#include "server_int.h"

#define CHECK_KEYS_PER_TXN (ETCD_TXN_OPS / 2) /* key + its queue */

static void fail(struct be_op *op, int rc) { be_op_fail(op, rc); }

static void nomem(struct be_op *op)
{
    fail(op, fccl_err(FCCL_ERR_NOMEM, "out of memory"));
}

/* Send txn, built by steps whose last status is rc: a failed one (out
 * of memory) drops txn and fails op. */
static void send_txn(struct be_op *op, json_object *txn, int rc,
                     int repeatable, be_next next)
{
    if (rc < 0) {
        json_object_put(txn);
        return nomem(op);
    }
    be_send(op, 0, "/v3/kv/txn", txn, repeatable, 0, next);
}

static void put_i64(struct be_op *op, int64_t v)
{
    codec_put_i64(&op->out, v);
}

/* A step that only needs its request to have worked. */
static void just_done(struct be_op *op, int rc, json_object *rep)
{
    (void)rep;
    if (rc < 0)
        fail(op, rc);
    else
        be_op_done(op);
}

static json_object *range_of(const struct ek_key *k, unsigned flags)
{
    return ej_range(k->p, k->n, NULL, 0, flags, 0);
}

/* PREFIX "\0q" K "\0" for op->key (PREFIX K), and the end of its range. */
static int queue_range(struct be_op *op, const struct ek_key *key,
                       struct ek_key *lo, struct ek_key *hi)
{
    const struct etcd_conf *c = be_conf(op->s);
    *lo = ek_queue(c->t.prefix, c->t.prefixlen, key->p + c->t.prefixlen,
                   key->n - c->t.prefixlen);
    hi->p = lo->p ? malloc(lo->n) : NULL;
    if (!hi->p) {
        ek_free(lo);
        return FCCL_ERR_NOMEM;
    }
    hi->n = ek_prefix_end(lo->p, lo->n, hi->p);
    return FCCL_OK;
}

/* ---- SET, GET, DELETE, counts ---- */

static void op_set(struct be_op *op)
{
    op->quiet = 1;
    be_send(op, 0, "/v3/kv/put",
            ej_put(op->key.p, op->key.n, op->val, op->vlen, 0), 1, 0,
            just_done);
}

static int put_value(struct be_op *op, json_object *range)
{
    struct ej_kv kv;
    if (!ej_nkvs(range)) {
        if (op->c->dialect == DIALECT_LEGACY)
            return fccl_err(FCCL_ERR_NOTFOUND, "legacy GET of missing key "
                            "'%.*s'", (int)(op->key.n > 128 ? 128 : op->key.n),
                            (const char *)op->key.p);
        codec_put_str(&op->out, NULL, 0);
        return FCCL_OK;
    }
    int rc = ej_kv_at(range, 0, &kv);
    if (rc < 0)
        return rc;
    codec_put_str(&op->out, kv.val, kv.vlen);
    ej_kv_free(&kv);
    return op->out.oom ? FCCL_ERR_NOMEM : FCCL_OK;
}

static void get_done(struct be_op *op, int rc, json_object *rep)
{
    if (rc == FCCL_OK)
        rc = put_value(op, rep);
    if (rc < 0)
        fail(op, rc);
    else
        be_op_done(op);
}

static void op_get(struct be_op *op)
{
    be_send(op, 0, "/v3/kv/range", range_of(&op->key, 0), 1, 0, get_done);
}

static void delete_done(struct be_op *op, int rc, json_object *rep)
{
    if (rc < 0)
        return fail(op, rc);
    put_i64(op, ej_i64(rep, "deleted") > 0);
    be_op_done(op);
}

static void op_delete(struct be_op *op)
{
    be_send(op, 0, "/v3/kv/deleterange",
            ej_delete(op->key.p, op->key.n, NULL, 0), 1, 0, delete_done);
}

static void count_done(struct be_op *op, int rc, json_object *rep)
{
    if (rc < 0)
        return fail(op, rc);
    put_i64(op, ej_i64(rep, "count"));
    be_op_done(op);
}

static void op_num_keys(struct be_op *op)
{
    const struct etcd_conf *c = be_conf(op->s);
    struct ek_key lo, hi;
    if (ek_user_range(c->t.prefix, c->t.prefixlen, NULL, 0, &lo, &hi) < 0)
        return nomem(op);
    be_send(op, 0, "/v3/kv/range",
            ej_range(lo.p, lo.n, hi.p, hi.n, EJ_COUNT_ONLY, 0), 1, 0,
            count_done);
    ek_free(&lo);
    ek_free(&hi);
}

static void op_queue_len(struct be_op *op)
{
    struct ek_key lo, hi;
    if (queue_range(op, &op->key, &lo, &hi) < 0)
        return nomem(op);
    be_send(op, 0, "/v3/kv/range",
            ej_range(lo.p, lo.n, hi.p, hi.n, EJ_COUNT_ONLY, 0), 1, 0,
            count_done);
    ek_free(&lo);
    ek_free(&hi);
}

/* ---- LIST_KEYS ---- */

static void list_done(struct be_op *op, int rc, json_object *rep)
{
    if (rc < 0)
        return fail(op, rc);
    size_t n = ej_nkvs(rep), strip = be_conf(op->s)->t.prefixlen;
    codec_put_u64(&op->out, n);
    for (size_t i = 0; i < n; i++) {
        struct ej_kv kv;
        if ((rc = ej_kv_at(rep, i, &kv)) < 0)
            return fail(op, rc);
        codec_put_str(&op->out, kv.key + strip, kv.klen - strip);
        ej_kv_free(&kv);
    }
    if (op->out.oom)
        return nomem(op);
    be_op_done(op);
}

static void op_list(struct be_op *op)
{
    const struct etcd_conf *c = be_conf(op->s);
    struct ek_key lo, hi;
    size_t pl = c->t.prefixlen;
    if (ek_user_range(c->t.prefix, pl, op->key.p + pl, op->key.n - pl, &lo,
                      &hi) < 0)
        return nomem(op);
    be_send(op, 0, "/v3/kv/range",
            ej_range(lo.p, lo.n, hi.p, hi.n, EJ_KEYS_ONLY, 0), 1, 0,
            list_done);
    ek_free(&lo);
    ek_free(&hi);
}

/* ---- read-modify-write: ADD, APPEND, COMPARE_SET, BARRIER's count ---- */

static void rmw_step(struct be_op *op);

static void rmw_state(struct be_op *op, json_object *range)
{
    ej_kv_free(&op->cur);
    op->present = ej_nkvs(range) > 0;
    op->known = 1;
    if (op->present && ej_kv_at(range, 0, &op->cur) < 0)
        op->present = 0;
}

static void rmw_applied(struct be_op *op);

static void rmw_reread(struct be_op *op, int rc, json_object *rep)
{
    if (rc < 0)
        return fail(op, rc);
    rmw_state(op, rep);
    rmw_step(op);
}

static void receipt_read(struct be_op *op, int rc, json_object *rep)
{
    if (rc < 0)
        return fail(op, rc);
    struct ej_kv kv;
    int yes = 0;
    if (ej_nkvs(rep) && ej_kv_at(rep, 0, &kv) == FCCL_OK) {
        yes = strtoull((const char *)kv.val, NULL, 10) == op->seq;
        ej_kv_free(&kv);
    }
    LOG_INFO("STORE", "%s: reply lost; the receipt says it %s",
             codec_op_name(op->kind), yes ? "was applied" : "was not");
    (yes ? op->r_yes : op->r_no)(op);
}

/* After a lost reply: read our receipt through the next member, then
 * yes(op) if the write was applied, else no(op). */
static void check_receipt(struct be_op *op, void (*yes)(struct be_op *),
                          void (*no)(struct be_op *))
{
    struct ek_key rk = be_receipt_key(op->s);
    if (!rk.p)
        return nomem(op);
    op->r_yes = yes;
    op->r_no = no;
    be_send(op, 0, "/v3/kv/range", range_of(&rk, 0), 1, 0, receipt_read);
    ek_free(&rk);
}

static void rmw_again(struct be_op *op)
{
    be_send(op, 0, "/v3/kv/range", range_of(&op->key, 0), 1, 0, rmw_reread);
}

static void rmw_written(struct be_op *op, int rc, json_object *rep)
{
    if (rc == BE_UNCERTAIN)
        return check_receipt(op, rmw_applied, rmw_again);
    if (rc < 0)
        return fail(op, rc);
    op->rev = ej_header_rev(rep);
    if (ej_bool(rep, "succeeded"))
        return rmw_applied(op);
    rmw_state(op, ej_txn_resp(rep, 0));
    if (++op->tries > 1000)
        return fail(op, fccl_err(FCCL_ERR_TIMEOUT, "%d conflicting writers",
                                 op->tries));
    rmw_step(op);
}

static void rmw_step(struct be_op *op)
{
    ermw_out_free(&op->rout);
    int rc = ermw_apply(&op->rin, op->present, op->cur.val, op->cur.vlen,
                        &op->rout);
    if (rc < 0) /* ADD of a value that is not a number: close, as PyTorch */
        return fail(op, fccl_err_wrap(FCCL_ERR_PROTOCOL, "key '%.*s'",
                                      (int)(op->key.n > 64 ? 64 : op->key.n),
                                      (const char *)op->key.p));
    if (!op->rout.write) {
        if (op->known)
            return rmw_applied(op);
        be_send(op, 0, "/v3/kv/range", range_of(&op->key, 0), 1, 0,
                rmw_reread);
        return;
    }
    op->seq = be_next_seq(op->s);
    char rtxt[24];
    int rn = snprintf(rtxt, sizeof(rtxt), "%" PRIu64, op->seq);
    struct ek_key rk = be_receipt_key(op->s);
    json_object *txn = ej_txn();
    rc = txn && rk.p ? FCCL_OK : FCCL_ERR_NOMEM;
    if (rc == FCCL_OK)
        rc = ej_txn_add(txn, "compare", NULL,
                        op->present ? ej_cmp(op->key.p, op->key.n, EJ_MOD,
                                             op->cur.mod_rev, NULL, 0)
                                    : ej_cmp(op->key.p, op->key.n,
                                             EJ_VERSION, 0, NULL, 0));
    if (rc == FCCL_OK)
        rc = ej_txn_add(txn, "success", "put",
                        ej_put(op->key.p, op->key.n, op->rout.nv,
                               op->rout.nvlen, 0));
    if (rc == FCCL_OK)
        rc = ej_txn_add(txn, "success", "put",
                        ej_put(rk.p, rk.n, rtxt, (size_t)rn, 0));
    if (rc == FCCL_OK)
        rc = ej_txn_add(txn, "failure", "range", range_of(&op->key, 0));
    ek_free(&rk);
    send_txn(op, txn, rc, 0, rmw_written);
}

static void barrier_applied(struct be_op *op);

static void rmw_applied(struct be_op *op)
{
    switch (op->kind) {
    case OP_ADD: put_i64(op, op->rout.num); break;
    case OP_COMPARE_SET:
        codec_put_str(&op->out, op->rout.reply, op->rout.rlen);
        break;
    case OP_BARRIER: return barrier_applied(op);
    default: break; /* APPEND: no reply */
    }
    be_op_done(op);
}

static void op_rmw(struct be_op *op, enum ermw_kind kind)
{
    op->rin.kind = kind;
    op->rin.delta = op->kind == OP_BARRIER ? 1 : op->num;
    op->rin.val = op->val;
    op->rin.vlen = op->vlen;
    op->rin.desired = op->val2;
    op->rin.dlen = op->v2len;
    op->quiet = kind == ERMW_APPEND;
    rmw_step(op);
}

/* ---- CHECK and WAIT ---- */

static void wait_check(struct be_op *op);

/* A txn counting keys [at, at + n) and their queues. */
static json_object *check_txn(struct be_op *op, size_t at, size_t n)
{
    json_object *txn = ej_txn();
    int rc = txn ? FCCL_OK : FCCL_ERR_NOMEM;
    for (size_t i = at; i < at + n && rc == FCCL_OK; i++) {
        struct ek_key lo, hi;
        rc = ej_txn_add(txn, "success", "range",
                        range_of(&op->keys[i], EJ_COUNT_ONLY));
        if (rc == FCCL_OK && (rc = queue_range(op, &op->keys[i], &lo, &hi)) ==
                                 FCCL_OK) {
            rc = ej_txn_add(txn, "success", "range",
                            ej_range(lo.p, lo.n, hi.p, hi.n, EJ_COUNT_ONLY,
                                     0));
            ek_free(&lo);
            ek_free(&hi);
        }
    }
    if (rc < 0) {
        json_object_put(txn);
        return NULL;
    }
    return txn;
}

/* Ready keys from op->at on in this reply: the first not ready, or n. */
static size_t first_not_ready(json_object *rep, size_t n)
{
    for (size_t i = 0; i < n; i++)
        if (ej_i64(ej_txn_resp(rep, 2 * i), "count") == 0 &&
            ej_i64(ej_txn_resp(rep, 2 * i + 1), "count") == 0)
            return i;
    return n;
}

static void check_more(struct be_op *op);

static void check_done(struct be_op *op, int rc, json_object *rep)
{
    if (rc < 0)
        return fail(op, rc);
    size_t n = op->nkeys - op->at;
    if (n > CHECK_KEYS_PER_TXN)
        n = CHECK_KEYS_PER_TXN;
    size_t miss = first_not_ready(rep, n);
    if (op->at == 0)
        op->rev = ej_header_rev(rep);
    if (miss < n) {
        op->at += miss;
        if (op->kind == OP_WAIT)
            return wait_check(op);
        codec_put_u8(&op->out, REPLY_NOT_READY);
        return be_op_done(op);
    }
    op->at += n;
    if (op->at < op->nkeys)
        return check_more(op);
    codec_put_u8(&op->out, op->kind == OP_WAIT ? REPLY_STOP_WAITING
                                               : REPLY_READY);
    be_op_done(op);
}

static void check_more(struct be_op *op)
{
    size_t n = op->nkeys - op->at;
    if (n > CHECK_KEYS_PER_TXN)
        n = CHECK_KEYS_PER_TXN;
    json_object *txn = check_txn(op, op->at, n);
    if (!txn)
        return nomem(op);
    /* A WAIT has no deadline of its own: the client cancels it. */
    if (op->kind == OP_WAIT)
        op->deadline = fccl_deadline_ms(BE_OP_MS);
    be_send(op, 0, "/v3/kv/txn", txn, 1, 0, check_done);
}

static void op_check(struct be_op *op)
{
    if (op->nkeys == 0) {
        codec_put_u8(&op->out, op->kind == OP_WAIT ? REPLY_STOP_WAITING
                                                   : REPLY_READY);
        return be_op_done(op);
    }
    op->at = 0;
    check_more(op);
}

/* Either watch ended (a put, the slice, an error): stop the other and
 * look again from the first key not seen ready. */
static void wait_woken(struct be_op *op, int rc, json_object *rep)
{
    (void)rep;
    be_cancel(op, 0);
    be_cancel(op, 1);
    if (rc < 0 && rc != FCCL_ERR_TIMEOUT && rc != FCCL_ERR_CONNECT &&
        rc != BE_UNCERTAIN)
        return fail(op, rc);
    check_more(op);
}

/* keys[at] is missing at op->rev: watch it and its queue from after. */
static void wait_check(struct be_op *op)
{
    struct ek_key *k = &op->keys[op->at], lo, hi;
    if (queue_range(op, k, &lo, &hi) < 0)
        return nomem(op);
    be_send(op, 0, "/v3/watch", ej_watch(k->p, k->n, NULL, 0, op->rev + 1),
            1, 1, wait_woken);
    if (op->x[0])
        be_send(op, 1, "/v3/watch",
                ej_watch(lo.p, lo.n, hi.p, hi.n, op->rev + 1), 1, 1,
                wait_woken);
    ek_free(&lo);
    ek_free(&hi);
}

void be_cancel_waits(struct store_conn *c)
{
    for (struct be_op *op = c->be_head; op; op = op->next)
        if ((op->kind == OP_WAIT || op->kind == OP_BARRIER) && !op->done) {
            be_cancel(op, 0);
            be_cancel(op, 1);
            codec_buf_reset(&op->out);
            op->done = 1; /* no reply: the cancel answers */
        }
}

/* ---- BARRIER ---- */

static void barrier_watch(struct be_op *op);

static void barrier_seen(struct be_op *op, int rc, json_object *rep)
{
    (void)rep;
    int64_t v = 0;
    if (rc == FCCL_OK && op->w[0].found) {
        codec_parse_i64(op->w[0].kv.val, op->w[0].kv.vlen, &v);
        op->rev = op->w[0].kv.mod_rev;
        if (v >= op->num) {
            codec_put_u8(&op->out, REPLY_STOP_WAITING);
            return be_op_done(op);
        }
        return barrier_watch(op);
    }
    if (rc < 0 && rc != FCCL_ERR_TIMEOUT && rc != FCCL_ERR_CONNECT &&
        rc != BE_UNCERTAIN)
        return fail(op, rc);
    /* The slice ran out or the member went: read the count again. */
    op->rin.delta = 0;
    op->known = 0;
    op->present = 0;
    op->deadline = fccl_deadline_ms(BE_OP_MS);
    rmw_step(op);
}

static void barrier_watch(struct be_op *op)
{
    be_send(op, 0, "/v3/watch",
            ej_watch(op->key.p, op->key.n, NULL, 0, op->rev + 1), 1, 1,
            barrier_seen);
}

static void barrier_applied(struct be_op *op)
{
    if (op->rout.num >= op->num) {
        codec_put_u8(&op->out, REPLY_STOP_WAITING);
        return be_op_done(op);
    }
    barrier_watch(op);
}

/* ---- MULTI_GET, MULTI_SET ---- */

static void mget_more(struct be_op *op);

static void mget_done(struct be_op *op, int rc, json_object *rep)
{
    if (rc < 0)
        return fail(op, rc);
    size_t n = op->nkeys - op->at;
    if (n > ETCD_TXN_OPS)
        n = ETCD_TXN_OPS;
    for (size_t i = 0; i < n; i++)
        if ((rc = put_value(op, ej_txn_resp(rep, i))) < 0)
            return fail(op, rc);
    if (op->out.len > op->s->lim.max_request)
        return fail(op, fccl_err(FCCL_ERR_LIMIT, "MULTI_GET reply over %llu "
                                 "bytes", (unsigned long long)
                                 op->s->lim.max_request));
    op->at += n;
    if (op->at < op->nkeys)
        return mget_more(op);
    be_op_done(op);
}

static void mget_more(struct be_op *op)
{
    size_t n = op->nkeys - op->at;
    if (n > ETCD_TXN_OPS)
        n = ETCD_TXN_OPS;
    json_object *txn = ej_txn();
    int rc = txn ? FCCL_OK : FCCL_ERR_NOMEM;
    for (size_t i = op->at; i < op->at + n && rc == FCCL_OK; i++)
        rc = ej_txn_add(txn, "success", "range", range_of(&op->keys[i], 0));
    send_txn(op, txn, rc, 1, mget_done);
}

static void mset_more(struct be_op *op);

static void mset_done(struct be_op *op, int rc, json_object *rep)
{
    (void)rep;
    if (rc < 0)
        return fail(op, rc);
    if (op->at < op->nkeys)
        return mset_more(op);
    be_op_done(op);
}

/* One txn of up to 128 puts and a MiB of values (not atomic beyond). */
static void mset_more(struct be_op *op)
{
    json_object *txn = ej_txn();
    int rc = txn ? FCCL_OK : FCCL_ERR_NOMEM;
    size_t bytes = 0, i = op->at;
    for (; i < op->nkeys && i - op->at < ETCD_TXN_OPS && rc == FCCL_OK; i++) {
        if (i > op->at && bytes + op->vlens[i] > (1u << 20))
            break;
        bytes += op->vlens[i];
        rc = ej_txn_add(txn, "success", "put",
                        ej_put(op->keys[i].p, op->keys[i].n, op->vals[i],
                               op->vlens[i], 0));
    }
    op->at = i;
    send_txn(op, txn, rc, 1, mset_done);
}

/* ---- queues ---- */

static void push_send(struct be_op *op);

static void push_lost(struct be_op *op)
{
    /* Not applied: safe to send again, once. */
    if (op->tries++ > 0)
        return fail(op, fccl_err(FCCL_ERR_IO, "QUEUE_PUSH reply lost twice"));
    push_send(op);
}

static void push_sent(struct be_op *op, int rc, json_object *rep)
{
    (void)rep;
    if (rc == BE_UNCERTAIN)
        return check_receipt(op, be_op_done, push_lost);
    if (rc < 0)
        return fail(op, rc);
    be_op_done(op);
}

/* A txn putting the item (named by this server's id and a sequence
 * number, so front-ends never collide) and the receipt. */
static void push_send(struct be_op *op)
{
    struct ek_key q, hi;
    if (queue_range(op, &op->key, &q, &hi) < 0)
        return nomem(op);
    ek_free(&hi);
    op->seq = be_next_seq(op->s);
    const struct etcd_conf *c = be_conf(op->s);
    struct ek_key rk = be_receipt_key(op->s);
    char id[40], rtxt[24];
    int idn = snprintf(id, sizeof(id), "/%" PRIu64, op->seq);
    int rn = snprintf(rtxt, sizeof(rtxt), "%" PRIu64, op->seq);
    size_t skip = c->t.prefixlen + 2; /* the receipt key's id part */
    struct ek_key item = rk.p ? ek_cat(q.p, q.n, rk.p + skip, rk.n - skip,
                                       id, (size_t)idn, NULL, 0)
                              : rk;
    json_object *txn = ej_txn();
    int rc = txn && item.p && rk.p ? FCCL_OK : FCCL_ERR_NOMEM;
    if (rc == FCCL_OK)
        rc = ej_txn_add(txn, "success", "put",
                        ej_put(item.p, item.n, op->val, op->vlen, 0));
    if (rc == FCCL_OK)
        rc = ej_txn_add(txn, "success", "put",
                        ej_put(rk.p, rk.n, rtxt, (size_t)rn, 0));
    ek_free(&q);
    if (item.p != rk.p)
        ek_free(&item);
    ek_free(&rk);
    send_txn(op, txn, rc, 0, push_sent);
}

static void op_push(struct be_op *op)
{
    op->quiet = 1;
    op->tries = 0;
    push_send(op);
}

static void pop_look(struct be_op *op);

static void pop_reply(struct be_op *op)
{
    put_i64(op, op->num);
    codec_put_str(&op->out, op->cur.val, op->cur.vlen);
    be_op_done(op);
}

static void pop_taken(struct be_op *op, int rc, json_object *rep)
{
    if (rc == BE_UNCERTAIN)
        return check_receipt(op, pop_reply, pop_look);
    if (rc < 0)
        return fail(op, rc);
    if (!ej_bool(rep, "succeeded"))
        return pop_look(op); /* another consumer took it first */
    pop_reply(op);
}

static void pop_seen(struct be_op *op, int rc, json_object *rep)
{
    if (rc < 0)
        return fail(op, rc);
    op->num = ej_i64(ej_txn_resp(rep, 0), "count");
    json_object *oldest = ej_txn_resp(rep, 1);
    if (op->num == 0 || !ej_nkvs(oldest)) {
        put_i64(op, 0);
        return be_op_done(op);
    }
    ej_kv_free(&op->cur);
    if ((rc = ej_kv_at(oldest, 0, &op->cur)) < 0)
        return fail(op, rc);
    json_object *txn = ej_txn();
    rc = txn ? FCCL_OK : FCCL_ERR_NOMEM;
    if (rc == FCCL_OK)
        rc = ej_txn_add(txn, "compare", NULL,
                        ej_cmp(op->cur.key, op->cur.klen, EJ_CREATE,
                               op->cur.create_rev, NULL, 0));
    if (rc == FCCL_OK)
        rc = ej_txn_add(txn, "success", "delete_range",
                        ej_delete(op->cur.key, op->cur.klen, NULL, 0));
    op->seq = be_next_seq(op->s);
    char rtxt[24];
    int rn = snprintf(rtxt, sizeof(rtxt), "%" PRIu64, op->seq);
    struct ek_key rk = be_receipt_key(op->s);
    if (rc == FCCL_OK)
        rc = rk.p ? ej_txn_add(txn, "success", "put",
                               ej_put(rk.p, rk.n, rtxt, (size_t)rn, 0))
                  : FCCL_ERR_NOMEM;
    ek_free(&rk);
    send_txn(op, txn, rc, 0, pop_taken);
}

static void pop_look(struct be_op *op)
{
    struct ek_key lo, hi;
    if (queue_range(op, &op->key, &lo, &hi) < 0)
        return nomem(op);
    json_object *txn = ej_txn();
    int rc = txn ? FCCL_OK : FCCL_ERR_NOMEM;
    if (rc == FCCL_OK)
        rc = ej_txn_add(txn, "success", "range",
                        ej_range(lo.p, lo.n, hi.p, hi.n, EJ_COUNT_ONLY, 0));
    if (rc == FCCL_OK)
        rc = ej_txn_add(txn, "success", "range",
                        ej_range(lo.p, lo.n, hi.p, hi.n, EJ_SORT_CREATE, 1));
    ek_free(&lo);
    ek_free(&hi);
    send_txn(op, txn, rc, 1, pop_seen);
}

/* ---- the rest ---- */

static void op_stats(struct be_op *op)
{
    struct codec_buf b;
    codec_buf_init(&b);
    store_stats_text(op->s, &b);
    store_be_stats(op->s, &b);
    if (b.oom) {
        codec_buf_free(&b);
        return nomem(op);
    }
    codec_put_str(&op->out, b.p, b.len);
    codec_buf_free(&b);
    be_op_done(op);
}

/* Start op (its fields filled from the request). */
static void be_run(struct be_op *op)
{
    switch (op->kind) {
    case OP_VALIDATE: return be_op_done(op);
    case OP_PING:
        codec_put_u32(&op->out, (uint32_t)op->num);
        return be_op_done(op);
    case OP_SET: return op_set(op);
    case OP_GET: return op_get(op);
    case OP_ADD: return op_rmw(op, ERMW_ADD);
    case OP_APPEND: return op_rmw(op, ERMW_APPEND);
    case OP_COMPARE_SET: return op_rmw(op, ERMW_CAS);
    case OP_BARRIER:
        if (op->num < 1)
            return fail(op, fccl_err(FCCL_ERR_PROTOCOL, "BARRIER with "
                                     "world_size %lld", (long long)op->num));
        return op_rmw(op, ERMW_ADD);
    case OP_CHECK:
    case OP_WAIT: return op_check(op);
    case OP_GETNUMKEYS: return op_num_keys(op);
    case OP_DELETE_KEY: return op_delete(op);
    case OP_MULTI_GET:
        op->at = 0;
        return op->nkeys ? mget_more(op) : be_op_done(op);
    case OP_MULTI_SET:
        op->quiet = 1;
        op->at = 0;
        return op->nkeys ? mset_more(op) : be_op_done(op);
    case OP_CANCEL_WAIT:
        be_cancel_waits(op->c);
        codec_put_u8(&op->out, REPLY_WAIT_CANCELED);
        return be_op_done(op);
    case OP_QUEUE_PUSH: return op_push(op);
    case OP_QUEUE_POP: return pop_look(op);
    case OP_QUEUE_LEN: return op_queue_len(op);
    case OP_LIST_KEYS:
    case OP_LIST_ALL: return op_list(op);
    case OP_SYNC: return be_flush(op->c); /* answered in its turn */
    case OP_STATS: return op_stats(op);
    case OP_AUTH_HELLO:
    case OP_AUTH_PROOF:
    case OP_WATCH_KEY:
    case OP__COUNT: break;
    }
    fail(op, fccl_err(FCCL_ERR_PROTOCOL, "%s is not served",
                      codec_op_name(op->kind)));
}

int store_be_dispatch(struct store_server *s, struct store_conn *c,
                      const struct codec_req *r)
{
    return be_queue(s, c, r, be_run);
}
