/*
 * The etcd store client: the calls that wait (etcd_int.h).
 *
 * A wait reads first, then watches from the revision after the read, so
 * a write between the two is never missed and nothing polls.  A watch
 * runs in slices of WATCH_SLICE_MS: a member that stopped answering is
 * found at the next read (ETCD_ATTEMPT_MS), not at the call's timeout.
 *
 * Cost in etcd round trips: GET, WAIT and MULTI_GET of present keys one
 * (a MULTI_GET one per 128 keys, two when it had to wait), one more per
 * key waited for; BARRIER an ADD, then one watch; QUEUE_POP two (read the
 * oldest item, take it).
 */
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "codec.h"
#include "clock.h"
#include "err.h"
#include "etcd_int.h"
#include "etcd_rmw.h"
#include "etcd_watch.h"

#define WATCH_SLICE_MS 5000

int ec_watch_put(struct ecall *k, const struct ek_key *lo,
                 const struct ek_key *hi, int64_t from, struct ej_kv *ev)
{
    int64_t left = fccl_ms_left(k->deadline);
    if (left <= 0)
        return FCCL_ERR_TIMEOUT;
    struct etcd_watch w;
    memset(&w, 0, sizeof(w));
    json_object *req = ej_watch(lo->p, lo->n, hi ? hi->p : NULL,
                                hi ? hi->n : 0, from);
    k->slice_ms = left < WATCH_SLICE_MS ? left : WATCH_SLICE_MS;
    k->sl->h.reply.stream = etcd_watch_feed;
    k->sl->h.reply.arg = &w;
    json_object *rep = NULL;
    int rc = ec_request(k, "/v3/watch", req, 1, &rep);
    json_object_put(rep);
    k->sl->h.reply.stream = NULL;
    k->sl->h.reply.arg = NULL;
    k->slice_ms = 0;
    if (w.found) {
        if (ev)
            *ev = w.kv;
        else
            ej_kv_free(&w.kv);
        return FCCL_OK;
    }
    if (rc == FCCL_ERR_TIMEOUT || rc == FCCL_OK || w.canceled ||
        rc == EC_UNCERTAIN || rc == FCCL_ERR_CONNECT)
        return fccl_ms_left(k->deadline) > 0 ? EC_AGAIN : FCCL_ERR_TIMEOUT;
    return rc;
}

static double elapsed_s(const struct ecall *k, int64_t timeout_ms)
{
    (void)k;
    return (double)timeout_ms / 1e3;
}

static int copy_value(const uint8_t *p, size_t n, void **val, size_t *len)
{
    *val = malloc(n + 1);
    if (!*val)
        return fccl_err(FCCL_ERR_NOMEM, "out of memory for a value of %zu "
                        "bytes", n);
    if (n)
        memcpy(*val, p, n);
    ((char *)*val)[n] = '\0';
    if (len)
        *len = n;
    return FCCL_OK;
}

static int64_t call_ms(const fccl_store_t *s, int64_t timeout_ms)
{
    return timeout_ms < 0 ? s->timeout_ms : timeout_ms;
}

/* The end of one watch of a waiting loop: a timeout says what it waited
 * for, EC_AGAIN (the watch ended early) goes round again as FCCL_OK. */
static int watch_end(struct ecall *k, int rc, const char *what, int64_t ms)
{
    if (rc == FCCL_ERR_TIMEOUT)
        return ec_soft(k, FCCL_ERR_TIMEOUT, "timed out after %.3f s waiting "
                       "for %s", elapsed_s(k, ms), what);
    return rc == EC_AGAIN ? FCCL_OK : rc;
}

int etcd_get(fccl_store_t *s, const char *key, void **val, size_t *len,
             int64_t timeout_ms)
{
    if (!key || !val)
        return fccl_err(FCCL_ERR_INVALID, "store %s: GET: NULL %s", s->name,
                        key ? "output" : "key");
    *val = NULL;
    struct ecall k;
    int rc = ec_begin(&k, s, "GET", key, timeout_ms);
    if (rc < 0)
        return rc;
    struct ek_key ek = ec_key(&k, key);
    while (rc == FCCL_OK && ek.p) {
        json_object *rep = NULL;
        if ((rc = ec_range(&k, &ek, NULL, 0, 0, &rep)) < 0)
            break;
        struct ej_kv kv;
        if (ej_nkvs(rep)) {
            rc = ej_kv_at(rep, 0, &kv);
            json_object_put(rep);
            if (rc == FCCL_OK) {
                rc = copy_value(kv.val, kv.vlen, val, len);
                ej_kv_free(&kv);
            }
            rc = rc < 0 ? ec_fail(&k, rc) : FCCL_OK;
            break;
        }
        int64_t rev = ej_header_rev(rep);
        json_object_put(rep);
        rc = ec_watch_put(&k, &ek, NULL, rev + 1, &kv);
        if (rc == FCCL_OK) {
            rc = copy_value(kv.val, kv.vlen, val, len);
            ej_kv_free(&kv);
            rc = rc < 0 ? ec_fail(&k, rc) : FCCL_OK;
            break;
        }
        rc = watch_end(&k, rc, "the key", call_ms(s, timeout_ms));
    }
    if (!ek.p)
        rc = ec_soft(&k, FCCL_ERR_NOMEM, "out of memory");
    ek_free(&ek);
    ec_end(&k);
    return rc;
}

/* Wait until all n keys exist. */
static int wait_all(struct ecall *k, const char *const *keys, size_t n,
                    int64_t timeout_ms)
{
    for (;;) {
        size_t first;
        int64_t rev = 0;
        int rc = ec_first_missing(k, keys, n, &first, &rev);
        if (rc < 0 || first == n)
            return rc;
        struct ek_key ek = ec_key(k, keys[first]);
        if (!ek.p)
            return ec_soft(k, FCCL_ERR_NOMEM, "out of memory");
        rc = ec_watch_put(k, &ek, NULL, rev + 1, NULL);
        ek_free(&ek);
        if (rc == FCCL_ERR_TIMEOUT) {
            char miss[300];
            int w = snprintf(miss, sizeof(miss), "'%.*s%.100s'",
                             (int)(k->s->kprelen > 60 ? 60 : k->s->kprelen),
                             k->s->kpre, keys[first]);
            if (first + 1 < n && w > 0 && (size_t)w < sizeof(miss))
                snprintf(miss + w, sizeof(miss) - (size_t)w,
                         " (and maybe later ones of the %zu)", n);
            return ec_soft(k, FCCL_ERR_TIMEOUT, "timed out after %.3f s; "
                           "still missing: %s",
                           elapsed_s(k, timeout_ms), miss);
        }
        if (rc < 0)
            return rc;
    }
}

int etcd_wait(fccl_store_t *s, const char *const *keys, size_t n,
              int64_t timeout_ms)
{
    if (n == 0)
        return FCCL_OK;
    int rc;
    struct ecall k;
    if ((rc = ec_begin(&k, s, "WAIT", NULL, timeout_ms)) == FCCL_OK)
        rc = wait_all(&k, keys, n, call_ms(s, timeout_ms));
    ec_end(&k);
    return rc;
}

/* Fetch keys[0..n) (n <= ETCD_TXN_OPS) into vals: 1 if one had gone. */
static int fetch_chunk(struct ecall *k, const char *const *keys, size_t n,
                       void **vals, size_t *lens)
{
    json_object *rep = NULL;
    int rc = ec_ranges(k, keys, n, 1, &rep);
    for (size_t i = 0; i < n && rc == FCCL_OK; i++) {
        json_object *r = ej_txn_resp(rep, i);
        struct ej_kv kv;
        if (!ej_nkvs(r)) {
            rc = 1;
            break;
        }
        if ((rc = ej_kv_at(r, 0, &kv)) == FCCL_OK) {
            vals[i] = kv.val; /* NUL-terminated, malloc'd */
            lens[i] = kv.vlen;
            kv.val = NULL;
            ej_kv_free(&kv);
        } else {
            rc = ec_fail(k, rc);
        }
    }
    json_object_put(rep);
    return rc;
}

int etcd_multi_get(fccl_store_t *s, const char *const *keys, size_t n,
                   void **vals, size_t *lens, int64_t timeout_ms)
{
    if (n == 0)
        return FCCL_OK;
    for (size_t i = 0; vals && i < n; i++)
        vals[i] = NULL;
    struct ecall k;
    int rc = ec_begin_multi(&k, s, "MULTI_GET", keys, vals, lens, "output",
                            timeout_ms);
    if (rc < 0)
        return rc;
    /* Read first: a job's records are usually there, and one txn per 128
     * keys fetches them; only missing keys make it wait. */
    size_t at = 0;
    while (rc == FCCL_OK && at < n) {
        size_t m = n - at < ETCD_TXN_OPS ? n - at : ETCD_TXN_OPS;
        rc = fetch_chunk(&k, keys + at, m, vals + at, lens + at);
        if (rc == 1) {
            for (size_t i = at; i < at + m; i++) {
                free(vals[i]);
                vals[i] = NULL;
            }
            rc = wait_all(&k, keys + at, m, call_ms(s, timeout_ms));
            continue;
        }
        at += m;
    }
    if (rc < 0)
        for (size_t i = 0; i < n; i++) {
            free(vals[i]);
            vals[i] = NULL;
        }
    ec_end(&k);
    return rc;
}

static int counter_of(const struct ej_kv *kv, int64_t *v)
{
    return codec_parse_i64(kv->val, kv->vlen, v);
}

int etcd_barrier(fccl_store_t *s, const char *key, int64_t world_size,
                 int64_t timeout_ms)
{
    struct ecall k;
    int rc = ec_begin(&k, s, "BARRIER", key, timeout_ms);
    if (rc < 0)
        return rc;
    int64_t v = 0, rev = 0;
    rc = ec_add(&k, key, 1, &v, &rev);
    struct ek_key ek = ec_key(&k, key);
    while (rc == FCCL_OK && v < world_size && ek.p) {
        struct ej_kv kv;
        rc = ec_watch_put(&k, &ek, NULL, rev + 1, &kv);
        if (rc == FCCL_OK) {
            if (counter_of(&kv, &v) < 0)
                v = 0;
            rev = kv.mod_rev;
            ej_kv_free(&kv);
        } else if (rc == EC_AGAIN) {
            json_object *rep = NULL;
            if ((rc = ec_range(&k, &ek, NULL, 0, 0, &rep)) == FCCL_OK) {
                rev = ej_header_rev(rep);
                if (ej_nkvs(rep) && ej_kv_at(rep, 0, &kv) == FCCL_OK) {
                    if (counter_of(&kv, &v) < 0)
                        v = 0;
                    ej_kv_free(&kv);
                }
            }
            json_object_put(rep);
        } else if (rc == FCCL_ERR_TIMEOUT) {
            rc = ec_soft(&k, FCCL_ERR_TIMEOUT, "timed out after %.3f s "
                         "before %lld arrivals (this one counted)",
                         elapsed_s(&k, call_ms(s, timeout_ms)),
                         (long long)world_size);
        }
    }
    if (rc == FCCL_OK && !ek.p)
        rc = ec_soft(&k, FCCL_ERR_NOMEM, "out of memory");
    ek_free(&ek);
    ec_end(&k);
    return rc;
}

/* ---- QUEUE_POP ---- */

/* Take item kv (the oldest of the queue) if nobody else took it: 1
 * taken, 0 someone else did, or a status. */
static int take_item(struct ecall *k, const struct ej_kv *kv)
{
    uint64_t seq = ec_next_seq(k);
    char rtxt[24];
    int rn = snprintf(rtxt, sizeof(rtxt), "%" PRIu64, seq);
    struct ek_key rk = ec_receipt_key(k);
    json_object *txn = ej_txn(), *rep = NULL;
    int rc = txn && rk.p ? FCCL_OK : FCCL_ERR_NOMEM;
    if (rc == FCCL_OK)
        rc = ej_txn_add(txn, "compare", NULL,
                        ej_cmp(kv->key, kv->klen, EJ_CREATE, kv->create_rev,
                               NULL, 0));
    if (rc == FCCL_OK)
        rc = ej_txn_add(txn, "success", "delete_range",
                        ej_delete(kv->key, kv->klen, NULL, 0));
    if (rc == FCCL_OK)
        rc = ej_txn_add(txn, "success", "put",
                        ej_put(rk.p, rk.n, rtxt, (size_t)rn, ec_lease(k)));
    ek_free(&rk);
    if (rc < 0) {
        json_object_put(txn);
        return ec_soft(k, FCCL_ERR_NOMEM, "out of memory");
    }
    rc = ec_request(k, "/v3/kv/txn", txn, 0, &rep);
    if (rc == EC_UNCERTAIN)
        return ec_receipt_says(k, seq, NULL);
    if (rc < 0)
        return rc;
    rc = ej_bool(rep, "succeeded");
    json_object_put(rep);
    return rc;
}

/* One try: the oldest item into *val, 0 if the queue was empty (*rev the
 * read's revision), 2 if another consumer took it first. */
static int pop_once(struct ecall *k, const struct ek_key *q,
                    const struct ek_key *hi, void **val, size_t *len,
                    int64_t *rev)
{
    json_object *rep = NULL;
    int rc = ec_range(k, q, hi, EJ_SORT_CREATE, 1, &rep);
    if (rc < 0)
        return rc;
    *rev = ej_header_rev(rep);
    struct ej_kv kv;
    if (!ej_nkvs(rep)) {
        json_object_put(rep);
        return 0;
    }
    rc = ej_kv_at(rep, 0, &kv);
    json_object_put(rep);
    if (rc < 0)
        return ec_fail(k, rc);
    rc = take_item(k, &kv);
    if (rc == 1) {
        *val = kv.val;
        if (len)
            *len = kv.vlen;
        kv.val = NULL;
    }
    ej_kv_free(&kv);
    return rc == 1 ? 1 : rc == 0 ? 2 : rc;
}

int etcd_queue_pop(fccl_store_t *s, const char *key, int block, void **val,
                   size_t *len, int64_t timeout_ms)
{
    if (!key || !val)
        return fccl_err(FCCL_ERR_INVALID, "store %s: QUEUE_POP: NULL %s",
                        s->name, key ? "output" : "key");
    *val = NULL;
    struct ecall k;
    int rc = ec_begin(&k, s, "QUEUE_POP", key, timeout_ms);
    if (rc < 0)
        return rc;
    struct ec_queue r;
    rc = ec_queue_range(&k, key, &r);
    while (rc == FCCL_OK) {
        int64_t rev = 0;
        rc = pop_once(&k, &r.q, &r.hi, val, len, &rev);
        if (rc == 1) {
            rc = FCCL_OK;
            break;
        }
        if (rc == 2) { /* lost the race for it: the next one */
            rc = FCCL_OK;
            continue;
        }
        if (rc < 0)
            break;
        if (!block) {
            rc = ec_soft(&k, FCCL_ERR_NOTFOUND, "the queue is empty");
            break;
        }
        rc = ec_watch_put(&k, &r.q, &r.hi, rev + 1, NULL);
        rc = watch_end(&k, rc, "an item", call_ms(s, timeout_ms));
    }
    ec_queue_free(&r);
    ec_end(&k);
    return rc;
}
