/*
 * The etcd store client: its key requests, under the calls of etcd_ops.c
 * and etcd_wait.c: a range, ranges of several keys in one txn, the first
 * missing key, the read-modify-write loop ADD, APPEND and COMPARE_SET
 * share (etcd_rmw.h has the pure part), and reading a receipt.
 */
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "clock.h"
#include "err.h"
#include "etcd_int.h"
#include "etcd_rmw.h"
#include "log.h"

#define CONFLICT_PAUSE_MS 32 /* cap of the pause between conflicts */

int ec_range(struct ecall *k, const struct ek_key *lo, const struct ek_key *hi,
             unsigned flags, int64_t limit, json_object **out)
{
    json_object *r = ej_range(lo->p, lo->n, hi ? hi->p : NULL, hi ? hi->n : 0,
                              flags, limit);
    return ec_request(k, "/v3/kv/range", r, 1, out);
}

/* The state of the key from a range reply. */
static int take_state(struct ecall *k, struct rmw *m, json_object *range)
{
    ej_kv_free(&m->cur);
    m->present = ej_nkvs(range) > 0;
    m->known = 1;
    m->mod = 0;
    if (!m->present)
        return FCCL_OK;
    int rc = ej_kv_at(range, 0, &m->cur);
    if (rc < 0)
        return ec_fail(k, rc);
    m->mod = m->cur.mod_rev;
    return FCCL_OK;
}

static int reread(struct ecall *k, struct rmw *m)
{
    json_object *rep = NULL;
    int rc = ec_range(k, &m->key, NULL, 0, 0, &rep);
    if (rc == FCCL_OK)
        rc = take_state(k, m, rep);
    json_object_put(rep);
    return rc;
}

/* Write nv if the key is still as read (missing: version 0), with the
 * receipt; else read it.  1 applied, 0 conflict (state re-read), or a
 * status. */
static int try_write(struct ecall *k, struct rmw *m, const struct ermw_out *o)
{
    uint64_t seq = ec_next_seq(k);
    char rtxt[24];
    int rn = snprintf(rtxt, sizeof(rtxt), "%" PRIu64, seq);
    json_object *txn = ej_txn(), *rep = NULL;
    int rc = txn ? FCCL_OK : FCCL_ERR_NOMEM;
    if (rc == FCCL_OK)
        rc = ej_txn_add(txn, "compare", NULL,
                        m->present ? ej_cmp(m->key.p, m->key.n, EJ_MOD,
                                            m->mod, NULL, 0)
                                   : ej_cmp(m->key.p, m->key.n, EJ_VERSION,
                                            0, NULL, 0));
    if (rc == FCCL_OK)
        rc = ej_txn_add(txn, "success", "put",
                        ej_put(m->key.p, m->key.n, o->nv, o->nvlen,
                               ec_lease(k)));
    if (rc == FCCL_OK)
        rc = ej_txn_add(txn, "success", "put",
                        ej_put(m->rk.p, m->rk.n, rtxt, (size_t)rn,
                               ec_lease(k)));
    if (rc == FCCL_OK)
        rc = ej_txn_add(txn, "failure", "range",
                        ej_range(m->key.p, m->key.n, NULL, 0, 0, 0));
    if (rc < 0) {
        json_object_put(txn);
        return ec_soft(k, FCCL_ERR_NOMEM, "out of memory");
    }
    rc = ec_request(k, "/v3/kv/txn", txn, 0, &rep);
    if (rc == EC_UNCERTAIN) {
        rc = ec_receipt_says(k, seq, NULL);
        if (rc == 0)
            rc = reread(k, m);
        return rc;
    }
    if (rc < 0)
        return rc;
    m->rev = ej_header_rev(rep);
    if (ej_bool(rep, "succeeded")) {
        json_object_put(rep);
        return 1;
    }
    atomic_fetch_add(&k->b->nconflict, 1);
    rc = take_state(k, m, ej_txn_resp(rep, 0));
    json_object_put(rep);
    return rc;
}

static void conflict_pause(int tries)
{
    if (tries < 2)
        return;
    int cap = 1 << (tries < 6 ? tries : 5);
    if (cap > CONFLICT_PAUSE_MS)
        cap = CONFLICT_PAUSE_MS;
    int64_t us = rand() % (cap * 1000);
    struct timespec ts = {0, (long)us * 1000};
    nanosleep(&ts, NULL);
}

/* Run `in` on key until it is applied.  *o keeps the outcome (the caller
 * frees it); m->rev is the revision of the write. */
int ec_rmw_run(struct ecall *k, const char *key, const struct ermw_in *in,
                   struct rmw *m, struct ermw_out *o)
{
    memset(m, 0, sizeof(*m));
    memset(o, 0, sizeof(*o));
    m->key = ec_key(k, key);
    m->rk = ec_receipt_key(k);
    if (!m->key.p || !m->rk.p)
        return ec_soft(k, FCCL_ERR_NOMEM, "out of memory");
    for (int tries = 0;; tries++) {
        ermw_out_free(o);
        int rc = ermw_apply(in, m->present, m->cur.val, m->cur.vlen, o);
        if (rc < 0)
            return ec_fail(k, rc);
        if (!o->write) {
            if (m->known)
                return FCCL_OK; /* COMPARE_SET that stores nothing */
            if ((rc = reread(k, m)) < 0)
                return rc;
            continue;
        }
        /* The first try guesses "missing" without reading: one round trip
         * for a new key, and the failure branch reads it otherwise. */
        rc = try_write(k, m, o);
        if (rc != 0)
            return rc < 0 ? rc : FCCL_OK;
        if (fccl_ms_left(k->deadline) <= 0)
            return ec_soft(k, FCCL_ERR_TIMEOUT, "gave up after %d "
                           "conflicting writers", tries + 1);
        conflict_pause(tries);
    }
}

void ec_rmw_free(struct rmw *m, struct ermw_out *o)
{
    ek_free(&m->key);
    ek_free(&m->rk);
    ej_kv_free(&m->cur);
    ermw_out_free(o);
}

int ec_add(struct ecall *k, const char *key, int64_t delta, int64_t *num,
           int64_t *rev)
{
    struct ermw_in in = {.kind = ERMW_ADD, .delta = delta};
    struct rmw m;
    struct ermw_out o;
    int rc = ec_rmw_run(k, key, &in, &m, &o);
    if (rc == FCCL_OK) {
        if (num)
            *num = o.num;
        if (rev)
            *rev = m.rev;
    }
    ec_rmw_free(&m, &o);
    return rc;
}

/* A txn of one range per key in keys[0..n) (count only when !vals): the
 * reply, for up to ETCD_TXN_OPS keys. */
int ec_ranges(struct ecall *k, const char *const *keys, size_t n, int values,
              json_object **out)
{
    json_object *txn = ej_txn();
    int rc = txn ? FCCL_OK : FCCL_ERR_NOMEM;
    for (size_t i = 0; i < n && rc == FCCL_OK; i++) {
        struct ek_key ek = ec_key(k, keys[i]);
        rc = ek.p ? ej_txn_add(txn, "success", "range",
                               ej_range(ek.p, ek.n, NULL, 0,
                                        values ? 0 : EJ_COUNT_ONLY, 0))
                  : FCCL_ERR_NOMEM;
        ek_free(&ek);
    }
    if (rc < 0) {
        json_object_put(txn);
        return ec_soft(k, FCCL_ERR_NOMEM, "out of memory");
    }
    return ec_request(k, "/v3/kv/txn", txn, 1, out);
}

/* Which keys are missing: *first the first one (n if none), *rev the
 * revision of the read. */
int ec_first_missing(struct ecall *k, const char *const *keys, size_t n,
                     size_t *first, int64_t *rev)
{
    *first = n;
    for (size_t at = 0; at < n; at += ETCD_TXN_OPS) {
        size_t m = n - at < ETCD_TXN_OPS ? n - at : ETCD_TXN_OPS;
        json_object *rep = NULL;
        int rc = ec_ranges(k, keys + at, m, 0, &rep);
        if (rc < 0)
            return rc;
        if (at == 0)
            *rev = ej_header_rev(rep);
        for (size_t i = 0; i < m && *first == n; i++)
            if (ej_i64(ej_txn_resp(rep, i), "count") == 0)
                *first = at + i;
        json_object_put(rep);
        if (*first < n)
            return FCCL_OK;
    }
    return FCCL_OK;
}

int ec_receipt_says(struct ecall *k, uint64_t seq, char **rest)
{
    struct ek_key rk = ec_receipt_key(k);
    if (!rk.p)
        return ec_soft(k, FCCL_ERR_NOMEM, "out of memory");
    json_object *rep = NULL;
    int rc = ec_range(k, &rk, NULL, 0, 0, &rep);
    ek_free(&rk);
    if (rc < 0)
        return rc;
    struct ej_kv kv;
    int yes = 0;
    if (ej_nkvs(rep) && (rc = ej_kv_at(rep, 0, &kv)) == FCCL_OK) {
        char *end = NULL;
        yes = strtoull((const char *)kv.val, &end, 10) == seq;
        if (yes && rest)
            *rest = *end == ' ' ? strdup(end + 1) : NULL;
        ej_kv_free(&kv);
    }
    json_object_put(rep);
    if (rc < 0)
        return ec_fail(k, rc);
    LOG_INFO("STORE", "store %s: %s %s: reply lost; the receipt says it %s",
             k->b->conf.name, k->op, k->what, yes ? "was applied"
                                                  : "was not applied");
    return yes;
}

int ec_queue_range(struct ecall *k, const char *key, struct ec_queue *r)
{
    const struct etcd_conf *c = &k->b->conf;
    *r = (struct ec_queue){.fk = ec_key(k, key)};
    if (r->fk.p)
        r->q = ek_queue(c->t.prefix, c->t.prefixlen,
                        r->fk.p + c->t.prefixlen, r->fk.n - c->t.prefixlen);
    if (r->q.p && (r->hi.p = malloc(r->q.n)))
        r->hi.n = ek_prefix_end(r->q.p, r->q.n, r->hi.p);
    return r->hi.p ? FCCL_OK : ec_soft(k, FCCL_ERR_NOMEM, "out of memory");
}

void ec_queue_free(struct ec_queue *r)
{
    ek_free(&r->fk);
    ek_free(&r->q);
    ek_free(&r->hi);
}
