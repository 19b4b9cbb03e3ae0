/*
 * The etcd store client: the calls that do not wait (etcd_int.h); their
 * key requests are in etcd_kv.c.
 *
 * Cost in etcd round trips: SET, DELETE, CHECK, NUM_KEYS, LIST_KEYS,
 * QUEUE_PUSH, QUEUE_LEN, PING one; MULTI_SET one per 128 keys (or per
 * MiB of values); ADD, APPEND and COMPARE_SET one on a missing key, two
 * on an existing one, plus one per writer that got in between.
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

#define TXN_VALUE_BYTES (1u << 20) /* value bytes in one MULTI_SET txn */

static int no_key(const fccl_store_t *s, const char *op)
{
    return fccl_err(FCCL_ERR_INVALID, "store %s: %s: NULL key", s->name, op);
}

static int nomem(struct ecall *k)
{
    return ec_soft(k, FCCL_ERR_NOMEM, "out of memory");
}

/* The start of a call on one key (ec_begin), which must be given; ec_end
 * may follow either way. */
static int begin_key(struct ecall *k, fccl_store_t *s, const char *op,
                     const char *key)
{
    if (key)
        return ec_begin(k, s, op, key, -1);
    memset(k, 0, sizeof(*k));
    return no_key(s, op);
}

/* A request whose reply we only need to be a success. */
static int request_ok(struct ecall *k, const char *path, json_object *req,
                      int repeatable)
{
    json_object *rep = NULL;
    int rc = ec_request(k, path, req, repeatable, &rep);
    json_object_put(rep);
    return rc;
}

int etcd_set(fccl_store_t *s, const char *key, const void *val,
                 size_t len)
{
    if (!key)
        return no_key(s, "SET");
    if (!val && len)
        return fccl_err(FCCL_ERR_INVALID, "store %s: SET: NULL value",
                        s->name);
    struct ecall k;
    int rc = ec_begin(&k, s, "SET", key, -1);
    if (rc < 0)
        return rc;
    struct ek_key ek = ec_key(&k, key);
    rc = ek.p ? request_ok(&k, "/v3/kv/put",
                           ej_put(ek.p, ek.n, val ? val : "", len,
                                  ec_lease(&k)), 1)
              : nomem(&k);
    ek_free(&ek);
    ec_end(&k);
    return rc;
}

int etcd_add(fccl_store_t *s, const char *key, int64_t delta,
                 int64_t *out)
{
    struct ecall k;
    int rc = begin_key(&k, s, "ADD", key);
    if (rc == FCCL_OK)
        rc = ec_add(&k, key, delta, out, NULL);
    ec_end(&k);
    return rc;
}

static int copy_out(const uint8_t *p, size_t n, void **cur, size_t *curlen)
{
    if (!cur)
        return FCCL_OK;
    *cur = malloc(n + 1);
    if (!*cur)
        return fccl_err(FCCL_ERR_NOMEM, "out of memory");
    if (n)
        memcpy(*cur, p, n);
    ((char *)*cur)[n] = '\0';
    if (curlen)
        *curlen = n;
    return FCCL_OK;
}

/* One read-modify-write of key (etcd_rmw.h), its reply copied to *cur
 * when cur is given. */
static int rmw(fccl_store_t *s, const char *op, const char *key,
               const struct ermw_in *in, void **cur, size_t *curlen)
{
    struct ecall k;
    struct rmw m;
    struct ermw_out o;
    int rc = begin_key(&k, s, op, key);
    if (rc == FCCL_OK) {
        rc = ec_rmw_run(&k, key, in, &m, &o);
        if (rc == FCCL_OK)
            rc = copy_out(o.reply, o.rlen, cur, curlen);
        ec_rmw_free(&m, &o);
    }
    ec_end(&k);
    return rc;
}

int etcd_append(fccl_store_t *s, const char *key, const void *val,
                    size_t len)
{
    struct ermw_in in = {.kind = ERMW_APPEND, .val = val, .vlen = len};
    return rmw(s, "APPEND", key, &in, NULL, NULL);
}

int etcd_compare_set(fccl_store_t *s, const char *key,
                         const void *expected, size_t elen,
                         const void *desired, size_t dlen, void **cur,
                         size_t *curlen)
{
    struct ermw_in in = {.kind = ERMW_CAS, .val = expected, .vlen = elen,
                         .desired = desired, .dlen = dlen};
    return rmw(s, "COMPARE_SET", key, &in, cur, curlen);
}

/* ---- keys ---- */

int etcd_check(fccl_store_t *s, const char *const *keys, size_t n,
                   int *all_present)
{
    int rc;
    if (!all_present)
        return fccl_err(FCCL_ERR_INVALID, "store %s: CHECK: NULL result",
                        s->name);
    *all_present = 1; /* no keys: all present, as a TCPStore says */
    if (n == 0)
        return FCCL_OK;
    struct ecall k;
    if ((rc = ec_begin(&k, s, "CHECK", keys[0], -1)) == FCCL_OK) {
        size_t first;
        int64_t rev;
        rc = ec_first_missing(&k, keys, n, &first, &rev);
        if (rc == FCCL_OK)
            *all_present = first == n;
    }
    ec_end(&k);
    return rc;
}

int etcd_delete(fccl_store_t *s, const char *key, int *deleted)
{
    struct ecall k;
    int rc = begin_key(&k, s, "DELETE_KEY", key);
    if (rc < 0)
        return rc;
    struct ek_key ek = ec_key(&k, key);
    json_object *rep = NULL;
    rc = ek.p ? ec_request(&k, "/v3/kv/deleterange",
                           ej_delete(ek.p, ek.n, NULL, 0), 1, &rep)
              : nomem(&k);
    if (rc == FCCL_OK && deleted)
        *deleted = ej_i64(rep, "deleted") > 0;
    json_object_put(rep);
    ek_free(&ek);
    ec_end(&k);
    return rc;
}

/* The store's own keys: [PREFIX "\1", end of PREFIX), or those that start
 * with the view's prefix and p. */
static int view_range(struct ecall *k, const char *p, struct ek_key *lo,
                      struct ek_key *hi)
{
    const struct etcd_conf *c = &k->b->conf;
    size_t pl = strlen(p);
    struct ek_key pre = ek_cat(k->s->kpre, k->s->kprelen, p, pl, NULL, 0,
                               NULL, 0);
    if (!pre.p)
        return nomem(k);
    int rc = ek_user_range(c->t.prefix, c->t.prefixlen, pre.p, pre.n, lo, hi);
    ek_free(&pre);
    return rc < 0 ? nomem(k) : FCCL_OK;
}

int etcd_num_keys(fccl_store_t *s, int64_t *n)
{
    struct ecall k;
    int rc = ec_begin(&k, s, "GETNUMKEYS", NULL, -1);
    if (rc < 0)
        return rc;
    /* All keys of the store, as tcpstore-server counts: not the view's. */
    const struct etcd_conf *c = &k.b->conf;
    struct ek_key lo, hi;
    json_object *rep = NULL;
    rc = ek_user_range(c->t.prefix, c->t.prefixlen, NULL, 0, &lo, &hi);
    if (rc == FCCL_OK) {
        rc = ec_range(&k, &lo, &hi, EJ_COUNT_ONLY, 0, &rep);
        ek_free(&lo);
        ek_free(&hi);
    } else {
        rc = nomem(&k);
    }
    if (rc == FCCL_OK && n) /* NULL n: the round trip alone (a fence) */
        *n = ej_i64(rep, "count");
    json_object_put(rep);
    ec_end(&k);
    return rc;
}

/* Up to max_ops puts of pairs [at, at+n) as one txn; *took how many fit
 * the txn's byte budget. */
static int set_chunk(struct ecall *k, const char *const *keys,
                     const void *const *vals, const size_t *lens, size_t n,
                     size_t *took)
{
    json_object *txn = ej_txn();
    int rc = txn ? FCCL_OK : FCCL_ERR_NOMEM;
    size_t i = 0, bytes = 0;
    for (; i < n && rc == FCCL_OK; i++) {
        if (i > 0 && bytes + lens[i] > TXN_VALUE_BYTES)
            break;
        bytes += lens[i];
        struct ek_key ek = ec_key(k, keys[i]);
        rc = ek.p ? ej_txn_add(txn, "success", "put",
                               ej_put(ek.p, ek.n, vals[i] ? vals[i] : "",
                                      lens[i], ec_lease(k)))
                  : FCCL_ERR_NOMEM;
        ek_free(&ek);
    }
    if (rc < 0) {
        json_object_put(txn);
        return nomem(k);
    }
    *took = i;
    return request_ok(k, "/v3/kv/txn", txn, 1);
}

int etcd_multi_set(fccl_store_t *s, const char *const *keys,
                       const void *const *vals, const size_t *lens, size_t n)
{
    if (n == 0)
        return FCCL_OK;
    struct ecall k;
    int rc = ec_begin_multi(&k, s, "MULTI_SET", keys, vals, lens, "values",
                            -1);
    if (rc < 0)
        return rc;
    /* One txn while it fits the cluster's --max-txn-ops (128 by default)
     * and a MiB of values; beyond, one txn per chunk (not atomic).  A
     * cluster with a lower limit halves the chunk. */
    size_t ops = ETCD_TXN_OPS;
    for (size_t at = 0; at < n && rc == FCCL_OK;) {
        size_t m = n - at < ops ? n - at : ops, took = 0;
        rc = set_chunk(&k, keys + at, vals + at, lens + at, m, &took);
        if (rc == FCCL_ERR_LIMIT && ops > 1 &&
            strstr(fccl_last_error(), "too many operations")) {
            ops /= 2;
            rc = FCCL_OK;
            continue;
        }
        at += took;
    }
    ec_end(&k);
    return rc;
}

int etcd_ping(fccl_store_t *s, double *rtt_us)
{
    struct ecall k;
    int rc = ec_begin(&k, s, "PING", NULL, -1);
    if (rc < 0)
        return rc;
    uint64_t t0 = fccl_now_ns();
    rc = request_ok(&k, "/v3/maintenance/status", json_object_new_object(),
                    1);
    if (rc == FCCL_OK && rtt_us)
        *rtt_us = (double)(fccl_now_ns() - t0) / 1e3;
    ec_end(&k);
    return rc;
}

static int list_from(json_object *rep, size_t strip, char ***keys, size_t *n)
{
    size_t cnt = ej_nkvs(rep);
    char **out = calloc(cnt ? cnt : 1, sizeof(char *));
    if (!out)
        return fccl_err(FCCL_ERR_NOMEM, "out of memory");
    for (size_t i = 0; i < cnt; i++) {
        struct ej_kv kv;
        int rc = ej_kv_at(rep, i, &kv);
        if (rc < 0 || kv.klen < strip) {
            if (rc == FCCL_OK)
                ej_kv_free(&kv);
            fccl_store_free_keys(out, i);
            return rc < 0 ? rc : fccl_err(FCCL_ERR_PROTOCOL, "etcd listed "
                                          "a key outside the range");
        }
        out[i] = malloc(kv.klen - strip + 1);
        if (!out[i]) {
            ej_kv_free(&kv);
            fccl_store_free_keys(out, i);
            return fccl_err(FCCL_ERR_NOMEM, "out of memory");
        }
        memcpy(out[i], kv.key + strip, kv.klen - strip);
        out[i][kv.klen - strip] = '\0';
        ej_kv_free(&kv);
    }
    *keys = out;
    *n = cnt;
    return FCCL_OK;
}

int etcd_list_keys(fccl_store_t *s, const char *prefix, char ***keys,
                       size_t *n)
{
    if (!keys || !n)
        return fccl_err(FCCL_ERR_INVALID, "store %s: LIST_KEYS: NULL "
                        "output", s->name);
    struct ecall k;
    int rc = ec_begin(&k, s, "LIST_KEYS", prefix ? prefix : "", -1);
    if (rc < 0)
        return rc;
    struct ek_key lo, hi;
    json_object *rep = NULL;
    if ((rc = view_range(&k, prefix ? prefix : "", &lo, &hi)) == FCCL_OK) {
        rc = ec_range(&k, &lo, &hi, EJ_KEYS_ONLY, 0, &rep);
        ek_free(&lo);
        ek_free(&hi);
    }
    if (rc == FCCL_OK) {
        rc = list_from(rep, k.b->conf.t.prefixlen + s->kprelen, keys, n);
        if (rc < 0)
            rc = ec_fail(&k, rc);
    }
    json_object_put(rep);
    ec_end(&k);
    return rc;
}

int etcd_stats(fccl_store_t *s, char **text, size_t *len)
{
    if (!text)
        return fccl_err(FCCL_ERR_INVALID, "store %s: STATS: NULL output",
                        s->name);
    struct etcd_be *b = s->be;
    struct ecall k;
    int rc = ec_begin(&k, s, "STATS", NULL, -1);
    if (rc < 0)
        return rc;
    json_object *rep = NULL;
    rc = ec_request(&k, "/v3/maintenance/status", json_object_new_object(),
                    1, &rep);
    ec_end(&k);
    if (rc < 0)
        return rc;
    json_object *v = NULL;
    const char *ver = json_object_object_get_ex(rep, "version", &v)
                          ? json_object_get_string(v) : "?";
    char buf[1024];
    int n = snprintf(
        buf, sizeof(buf),
        "backend etcd\netcd_version %s\netcd_members %d\n"
        "etcd_member_now %s\netcd_leader %" PRId64 "\n"
        "etcd_db_bytes %" PRId64 "\netcd_revision %" PRId64 "\n"
        "client_requests %llu\nclient_failovers %llu\n"
        "client_lost_replies %llu\nclient_conflicts %llu\n"
        "client_lease %" PRId64 "\n",
        ver, b->conf.t.n, b->conf.t.ep[b->cur].base, ej_i64(rep, "leader"),
        ej_i64(rep, "dbSize"), ej_header_rev(rep),
        (unsigned long long)atomic_load(&b->nreq),
        (unsigned long long)atomic_load(&b->nfail_over),
        (unsigned long long)atomic_load(&b->nuncertain),
        (unsigned long long)atomic_load(&b->nconflict), b->lease);
    json_object_put(rep);
    *text = strdup(buf);
    if (!*text)
        return fccl_err(FCCL_ERR_NOMEM, "store %s: STATS: out of memory",
                        s->name);
    if (len)
        *len = (size_t)n;
    return FCCL_OK;
}

/* ---- queues ---- */

int etcd_queue_push(fccl_store_t *s, const char *key, const void *val,
                        size_t len)
{
    struct ecall k;
    int rc = begin_key(&k, s, "QUEUE_PUSH", key);
    if (rc < 0)
        return rc;
    const struct etcd_conf *c = &k.b->conf;
    uint64_t seq = ec_next_seq(&k);
    char id[64], rtxt[24];
    int idn = snprintf(id, sizeof(id), "%s/%" PRIu64, k.b->id, seq);
    int rn = snprintf(rtxt, sizeof(rtxt), "%" PRIu64, seq);
    struct ek_key fk = ec_key(&k, key);
    struct ek_key q = fk.p ? ek_queue(c->t.prefix, c->t.prefixlen,
                                      fk.p + c->t.prefixlen,
                                      fk.n - c->t.prefixlen)
                           : fk;
    struct ek_key item = q.p ? ek_cat(q.p, q.n, id, (size_t)idn, NULL, 0,
                                      NULL, 0)
                             : q;
    struct ek_key rk = ec_receipt_key(&k);
    json_object *txn = ej_txn();
    rc = item.p && rk.p && txn ? FCCL_OK : FCCL_ERR_NOMEM;
    if (rc == FCCL_OK)
        rc = ej_txn_add(txn, "success", "put",
                        ej_put(item.p, item.n, val ? val : "", len,
                               ec_lease(&k)));
    if (rc == FCCL_OK)
        rc = ej_txn_add(txn, "success", "put",
                        ej_put(rk.p, rk.n, rtxt, (size_t)rn, ec_lease(&k)));
    if (rc < 0) {
        json_object_put(txn);
        rc = nomem(&k);
    } else {
        rc = request_ok(&k, "/v3/kv/txn", txn, 0);
        if (rc == EC_UNCERTAIN) {
            rc = ec_receipt_says(&k, seq, NULL);
            /* Not applied: it can be sent again, once. */
            if (rc == 0)
                rc = ec_soft(&k, FCCL_ERR_IO, "reply lost and not applied");
            else if (rc == 1)
                rc = FCCL_OK;
        }
    }
    if (q.p != fk.p)
        ek_free(&q);
    if (item.p != q.p)
        ek_free(&item);
    ek_free(&fk);
    ek_free(&rk);
    ec_end(&k);
    return rc;
}

int etcd_queue_len(fccl_store_t *s, const char *key, int64_t *n)
{
    if (!key || !n)
        return key ? fccl_err(FCCL_ERR_INVALID, "store %s: QUEUE_LEN: NULL "
                              "result", s->name)
                   : no_key(s, "QUEUE_LEN");
    struct ecall k;
    int rc = ec_begin(&k, s, "QUEUE_LEN", key, -1);
    if (rc < 0)
        return rc;
    struct ec_queue r;
    json_object *rep = NULL;
    rc = ec_queue_range(&k, key, &r);
    if (rc == FCCL_OK)
        rc = ec_range(&k, &r.q, &r.hi, EJ_COUNT_ONLY, 0, &rep);
    if (rc == FCCL_OK)
        *n = ej_i64(rep, "count");
    json_object_put(rep);
    ec_queue_free(&r);
    ec_end(&k);
    return rc;
}
