/*
 * Store client: the multi-key operations, key listing and queues.
 * The modern dialect has MULTI_GET/MULTI_SET; on the legacy one (PyTorch
 * 1.13 has neither) multi_get is one WAIT for all keys followed by N GETs
 * in one send, and multi_set is N SETs in one send.  As for get
 * (client_ops.c), multi_get on tcpstore-server first sends CHECK+MULTI_GET
 * in one send, one round trip when every key exists (sc_fetch_pipelined).
 */
#include <errno.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "client_int.h"
#include "clock.h"
#include "err.h"

/* A key listing longer than this is taken as a corrupt reply. */
#define LIST_MAX_KEYS ((uint64_t)1 << 26)

struct values_out {
    void **vals;
    size_t *lens;
    size_t n;
};

static void free_values(struct values_out *v, size_t upto)
{
    for (size_t i = 0; i < upto; i++) {
        free(v->vals[i]);
        v->vals[i] = NULL;
        v->lens[i] = 0;
    }
}

/* Reads n value replies (MULTI_GET's, or n GETs'), kept unless discard. */
static int read_values(struct sc_call *k, struct values_out *v, int discard)
{
    for (size_t i = 0; i < v->n; i++) {
        int rc = sc_read_bytes(k, discard ? NULL : &v->vals[i], &v->lens[i],
                               k->io_deadline);
        if (rc < 0) {
            free_values(v, discard ? 0 : i);
            return rc;
        }
    }
    return FCCL_OK;
}

static int put_fetch(struct sc_call *k, const char *const *keys, size_t n)
{
    int rc;
    if (k->c->dialect == DIALECT_MODERN) {
        if ((rc = sc_put_op(k, OP_MULTI_GET)) == FCCL_OK)
            sc_put_keys(k, keys, n);
        return rc;
    }
    for (size_t i = 0; i < n; i++) {
        if ((rc = sc_put_op(k, OP_GET)) < 0)
            return rc;
        sc_put_key(k, keys[i]);
    }
    return FCCL_OK;
}

/* CHECK(keys)+MULTI_GET(keys) in one send; the values count only when
 * every key existed. */
static int fetch_if_present(struct sc_call *k, const char *const *keys,
                            struct values_out *v, int *ready)
{
    int rc = sc_put_op(k, OP_CHECK);
    if (rc < 0)
        return rc;
    sc_put_keys(k, keys, v->n);
    if ((rc = put_fetch(k, keys, v->n)) < 0 || (rc = sc_flush(k)) < 0 ||
        (rc = sc_read_ready(k, ready)) < 0)
        return rc;
    return read_values(k, v, !*ready);
}

static int multi_get_once(fccl_store_t *s, const char *const *keys, size_t n,
                         void **vals, size_t *lens, int64_t timeout_ms)
{
    int rc;
    if (n && (!vals || !lens))
        return fccl_err(FCCL_ERR_INVALID, "store MULTI_GET: NULL output");
    for (size_t i = 0; i < n; i++) {
        vals[i] = NULL;
        lens[i] = 0;
    }
    if (n == 0 && s)
        return FCCL_OK;
    struct sc_call k;
    if ((rc = sc_begin_keys(&k, s, "MULTI_GET", keys, n)) < 0)
        return rc;
    uint64_t dl = sc_call_deadline(&k, timeout_ms);
    struct values_out v = {vals, lens, n};
    int ready = 0, piped;
    CHECK_GOTO(piped = sc_fetch_pipelined(&k), rc, done);
    if (piped) {
        CHECK_GOTO(fetch_if_present(&k, keys, &v, &ready), rc, done);
        if (ready)
            goto done;
    }
    CHECK_GOTO(sc_put_op(&k, OP_WAIT), rc, done);
    sc_put_keys(&k, keys, n);
    CHECK_GOTO(sc_flush(&k), rc, done);
    CHECK_GOTO(sc_wait_reply(&k, keys, n, dl), rc, done);
    CHECK_GOTO(put_fetch(&k, keys, n), rc, done);
    CHECK_GOTO(sc_flush(&k), rc, done);
    rc = read_values(&k, &v, 0);
done:
    sc_end(&k);
    return rc;
}

/* Repeatable (sc_retry); the loop is written out: C has no closures. */
int tcp_store_multi_get(fccl_store_t *s, const char *const *keys, size_t n,
                        void **vals, size_t *lens, int64_t timeout_ms)
{
    uint64_t dl = sc_retry_deadline(s, timeout_ms);
    int rc, tries = 0;
    do
        rc = multi_get_once(s, keys, n, vals, lens,
                            sc_retry_timeout(timeout_ms, dl, tries));
    while (sc_retry(s, rc, dl, &tries));
    return rc;
}

static int multi_set_once(fccl_store_t *s, const char *const *keys,
                         const void *const *vals, const size_t *lens,
                         size_t n)
{
    int rc;
    if (n && (!vals || !lens))
        return fccl_err(FCCL_ERR_INVALID, "store MULTI_SET: NULL values");
    for (size_t i = 0; i < n; i++)
        if (!vals[i] && lens[i])
            return fccl_err(FCCL_ERR_INVALID,
                            "store MULTI_SET: value %zu is NULL", i);
    if (n == 0 && s)
        return FCCL_OK;
    struct sc_call k;
    if ((rc = sc_begin_keys(&k, s, "MULTI_SET", keys, n)) < 0)
        return rc;
    struct codec_buf *b = &k.c->out;
    if (k.c->dialect == DIALECT_MODERN) {
        CHECK_GOTO(sc_put_op(&k, OP_MULTI_SET), rc, done);
        codec_put_u64(b, (uint64_t)n);
        for (size_t i = 0; i < n; i++) {
            sc_put_key(&k, keys[i]);
            codec_put_str(b, vals[i], lens[i]);
        }
    } else {
        for (size_t i = 0; i < n; i++) {
            CHECK_GOTO(sc_put_op(&k, OP_SET), rc, done);
            sc_put_key(&k, keys[i]);
            codec_put_str(b, vals[i], lens[i]);
        }
    }
    rc = sc_flush_write(&k);
done:
    sc_end(&k);
    return rc;
}

/* Repeatable (sc_retry); the loop is written out: C has no closures. */
int tcp_store_multi_set(fccl_store_t *s, const char *const *keys,
                        const void *const *vals, const size_t *lens, size_t n)
{
    uint64_t dl = sc_retry_deadline(s, -1);
    int rc, tries = 0;
    do
        rc = multi_set_once(s, keys, vals, lens, n);
    while (sc_retry(s, rc, dl, &tries));
    return rc;
}

/* ---- LIST_KEYS (fccl extension) ---- */

/* Read the listing, stripping the view's prefix from each key. */
static int cmp_key(const void *a, const void *b)
{
    return strcmp(*(char *const *)a, *(char *const *)b);
}

/* The server sorts small listings only; the caller always gets them
 * sorted. */
static int read_key_list(struct sc_call *k, char ***out, size_t *nout)
{
    uint64_t n;
    int rc = sc_read_count(k, &n, LIST_MAX_KEYS, "key count of a listing",
                           k->io_deadline);
    if (rc < 0)
        return rc;
    char **keys = calloc(n ? (size_t)n : 1, sizeof(*keys));
    if (!keys)
        return sc_fail(k, fccl_err(FCCL_ERR_NOMEM, "out of memory"));
    size_t pl = k->s->kprelen;
    for (uint64_t i = 0; i < n; i++) {
        void *v;
        size_t len;
        if ((rc = sc_read_bytes(k, &v, &len, k->io_deadline)) < 0) {
            fccl_store_free_keys(keys, (size_t)i);
            return rc;
        }
        char *key = v;
        if (len >= pl && memcmp(key, k->s->kpre, pl) == 0)
            memmove(key, key + pl, len - pl + 1);
        keys[i] = key;
    }
    qsort(keys, (size_t)n, sizeof(*keys), cmp_key);
    *out = keys;
    *nout = (size_t)n;
    return FCCL_OK;
}

static int list_keys_once(fccl_store_t *s, const char *prefix, char ***keys,
                         size_t *n)
{
    if (!keys || !n)
        return fccl_err(FCCL_ERR_INVALID, "store LIST_KEYS: NULL output");
    *keys = NULL;
    *n = 0;
    if (!prefix)
        prefix = "";
    struct sc_call k;
    int rc = sc_begin(&k, s, "LIST_KEYS", prefix);
    if (rc < 0)
        return rc;
    CHECK_GOTO(sc_put_op(&k, OP_LIST_KEYS), rc, done);
    sc_put_key(&k, prefix);
    CHECK_GOTO(sc_flush(&k), rc, done);
    rc = read_key_list(&k, keys, n);
done:
    sc_end(&k);
    return rc;
}

/* Repeatable (sc_retry); the loop is written out: C has no closures. */
int tcp_store_list_keys(fccl_store_t *s, const char *prefix, char ***keys,
                        size_t *n)
{
    uint64_t dl = sc_retry_deadline(s, -1);
    int rc, tries = 0;
    do
        rc = list_keys_once(s, prefix, keys, n);
    while (sc_retry(s, rc, dl, &tries));
    return rc;
}

/* ---- STATS (fccl extension) ---- */

static int stats_once(fccl_store_t *s, char **text, size_t *len)
{
    if (!text)
        return fccl_err(FCCL_ERR_INVALID, "store STATS: NULL output");
    *text = NULL;
    if (len)
        *len = 0;
    struct sc_call k;
    int rc = sc_begin(&k, s, "STATS", NULL);
    if (rc < 0)
        return rc;
    void *v = NULL;
    CHECK_GOTO(sc_put_op(&k, OP_STATS), rc, done);
    CHECK_GOTO(sc_flush(&k), rc, done);
    rc = sc_read_bytes(&k, &v, len, k.io_deadline);
    if (rc == FCCL_OK)
        *text = v;
done:
    sc_end(&k);
    return rc;
}

/* Repeatable (sc_retry); the loop is written out: C has no closures. */
int tcp_store_stats(fccl_store_t *s, char **text, size_t *len)
{
    uint64_t dl = sc_retry_deadline(s, -1);
    int rc, tries = 0;
    do
        rc = stats_once(s, text, len);
    while (sc_retry(s, rc, dl, &tries));
    return rc;
}

/* ---- queues (modern dialect) ---- */

int tcp_store_queue_push(fccl_store_t *s, const char *key, const void *val,
                         size_t len)
{
    if (!key || (!val && len))
        return fccl_err(FCCL_ERR_INVALID, "store QUEUE_PUSH: NULL argument");
    return sc_key_value(s, OP_QUEUE_PUSH, "QUEUE_PUSH", key, val, len);
}

int tcp_store_queue_len(fccl_store_t *s, const char *key, int64_t *n)
{
    int64_t v = 0;
    int rc = sc_key_i64(s, OP_QUEUE_LEN, "QUEUE_LEN", key, &v);
    if (rc >= 0 && n)
        *n = v;
    return rc;
}

struct pop_out {
    void **val;
    size_t *len;
    int got;
};

/* One QUEUE_POP: the length before the pop, then a value if it was > 0. */
static int pop_once(struct sc_call *k, const char *key, struct pop_out *p)
{
    int rc = sc_put_op(k, OP_QUEUE_POP);
    if (rc < 0)
        return rc;
    sc_put_key(k, key);
    int64_t before;
    if ((rc = sc_flush(k)) < 0 ||
        (rc = sc_read_i64(k, &before, k->io_deadline)) < 0 || before <= 0)
        return rc;
    rc = sc_read_bytes(k, p->val, p->len, k->io_deadline);
    if (rc == FCCL_OK)
        p->got = 1;
    return rc;
}

static void pause_ms(int ms, uint64_t deadline)
{
    int left = fccl_ms_left(deadline);
    ms = ms < left ? ms : left;
    struct timespec ts = {0, (long)ms * 1000000L};
    while (nanosleep(&ts, &ts) < 0 && errno == EINTR)
        ;
}

/* A blocking pop is a client-side WAIT on the queue's key (satisfied while
 * the queue is non-empty) then QUEUE_POP; another consumer may take the
 * item in between, so it loops until the deadline. */
int tcp_store_queue_pop(fccl_store_t *s, const char *key, int block,
                        void **val, size_t *len, int64_t timeout_ms)
{
    if (!key || !val)
        return fccl_err(FCCL_ERR_INVALID, "store QUEUE_POP: NULL argument");
    *val = NULL;
    if (len)
        *len = 0;
    struct sc_call k;
    int rc = sc_begin(&k, s, "QUEUE_POP", key);
    if (rc < 0)
        return rc;
    struct pop_out p = {val, len, 0};
    uint64_t dl = sc_call_deadline(&k, timeout_ms);
    const char *keys[1] = {key};
    for (int lost = 0;; lost++) {
        CHECK_GOTO(pop_once(&k, key, &p), rc, done);
        if (p.got)
            break;
        if (!block) {
            rc = sc_soft(&k, FCCL_ERR_NOTFOUND, "queue is empty");
            break;
        }
        /* The wait said "non-empty" but another consumer won (or a plain
         * key of the same name satisfies the WAIT): back off, don't spin. */
        if (lost > 0 && fccl_ms_left(dl) == 0) {
            rc = sc_soft(&k, FCCL_ERR_TIMEOUT,
                         "queue stayed empty until the deadline");
            break;
        }
        if (lost > 0)
            pause_ms(lost < 6 ? 1 << (lost - 1) : 50, dl);
        CHECK_GOTO(sc_put_op(&k, OP_WAIT), rc, done);
        sc_put_keys(&k, keys, 1);
        CHECK_GOTO(sc_flush(&k), rc, done);
        CHECK_GOTO(sc_wait_reply(&k, keys, 1, dl), rc, done);
    }
done:
    sc_end(&k);
    return rc;
}
