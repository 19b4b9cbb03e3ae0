/*
 * A store given as the caller's table of operations (fccl_store_from_ops):
 * each entry here prepends the view's prefix to the keys, puts in the
 * handle's default timeout, calls the caller's entry, and names the store,
 * the call and the key in the message of a failure.  The handle and its
 * views share one counted `struct ops_store`; the caller's close runs
 * with the last of them.
 */
#include <pthread.h>
#include <stdlib.h>
#include <string.h>

#include "clock.h"
#include "err.h"
#include "store_vt.h"

struct ops_store {
    struct store_vt vt; /* ops_vt without the entries ops lacks */
    fccl_store_ops_t ops;
    void *ctx;
    char *name;
    int64_t timeout_ms;
    pthread_mutex_t mu;
    int refs;
};

static const struct store_vt ops_vt;

static struct ops_store *be_of(const fccl_store_t *s) { return s->be; }

static int64_t ms_of(const fccl_store_t *s, int64_t timeout_ms)
{
    return timeout_ms < 0 ? s->timeout_ms : timeout_ms;
}

/* The caller's entry failed: keep its code, name where. */
static int failed(const fccl_store_t *s, int rc, const char *op,
                  const char *key)
{
    if (rc >= 0)
        return rc;
    const char *msg = fccl_last_error();
    const char *k = key ? key : "";
    if (!*msg)
        return fccl_err(rc, "store %s: %s%s%s%s: %s", s->name, op,
                        *k ? " '" : "", k, *k ? "'" : "",
                        fccl_strerror(rc));
    return fccl_err_wrap(rc, "store %s: %s%s%s%s", s->name, op,
                         *k ? " '" : "", k, *k ? "'" : "");
}

static int no_key(const fccl_store_t *s, const char *op)
{
    return fccl_err(FCCL_ERR_INVALID, "store %s: %s: NULL key", s->name, op);
}

static int nomem(const fccl_store_t *s, const char *op)
{
    return fccl_err(FCCL_ERR_NOMEM, "store %s: %s: out of memory", s->name,
                    op);
}

/* A single-key call: the full key in `k`, freed by the caller. */
#define WITH_KEY(s, op, key, k)                                                \
    if (!(key))                                                                \
        return no_key(s, op);                                                  \
    char *k = store_full_key(s, key);                                          \
    if (!k)                                                                    \
        return nomem(s, op);                                                   \
    fccl_err_clear()

static int o_set(fccl_store_t *s, const char *key, const void *val,
                 size_t len)
{
    WITH_KEY(s, "SET", key, k);
    int rc = be_of(s)->ops.set(be_of(s)->ctx, k, val, len);
    rc = failed(s, rc, "SET", k);
    free(k);
    return rc;
}

static int o_get(fccl_store_t *s, const char *key, void **val, size_t *len,
                 int64_t timeout_ms)
{
    WITH_KEY(s, "GET", key, k);
    int rc = be_of(s)->ops.get(be_of(s)->ctx, k, val, len,
                               ms_of(s, timeout_ms));
    rc = failed(s, rc, "GET", k);
    free(k);
    return rc;
}

static int o_add(fccl_store_t *s, const char *key, int64_t delta,
                 int64_t *out)
{
    WITH_KEY(s, "ADD", key, k);
    int rc = be_of(s)->ops.add(be_of(s)->ctx, k, delta, out);
    rc = failed(s, rc, "ADD", k);
    free(k);
    return rc;
}

static int o_compare_set(fccl_store_t *s, const char *key,
                         const void *expected, size_t elen,
                         const void *desired, size_t dlen, void **cur,
                         size_t *curlen)
{
    WITH_KEY(s, "COMPARE_SET", key, k);
    int rc = be_of(s)->ops.compare_set(be_of(s)->ctx, k, expected, elen,
                                       desired, dlen, cur, curlen);
    rc = failed(s, rc, "COMPARE_SET", k);
    free(k);
    return rc;
}

static int o_delete(fccl_store_t *s, const char *key, int *deleted)
{
    WITH_KEY(s, "DELETE_KEY", key, k);
    int rc = be_of(s)->ops.delete_key(be_of(s)->ctx, k, deleted);
    rc = failed(s, rc, "DELETE_KEY", k);
    free(k);
    return rc;
}

static int o_append(fccl_store_t *s, const char *key, const void *val,
                    size_t len)
{
    WITH_KEY(s, "APPEND", key, k);
    int rc = be_of(s)->ops.append(be_of(s)->ctx, k, val, len);
    rc = failed(s, rc, "APPEND", k);
    free(k);
    return rc;
}

static int o_barrier(fccl_store_t *s, const char *key, int64_t world_size,
                     int64_t timeout_ms)
{
    WITH_KEY(s, "BARRIER", key, k);
    int rc = be_of(s)->ops.barrier(be_of(s)->ctx, k, world_size,
                                   ms_of(s, timeout_ms));
    rc = failed(s, rc, "BARRIER", k);
    free(k);
    return rc;
}

static int o_queue_push(fccl_store_t *s, const char *key, const void *val,
                        size_t len)
{
    WITH_KEY(s, "QUEUE_PUSH", key, k);
    int rc = be_of(s)->ops.queue_push(be_of(s)->ctx, k, val, len);
    rc = failed(s, rc, "QUEUE_PUSH", k);
    free(k);
    return rc;
}

static int o_queue_pop(fccl_store_t *s, const char *key, int block,
                       void **val, size_t *len, int64_t timeout_ms)
{
    WITH_KEY(s, "QUEUE_POP", key, k);
    int rc = be_of(s)->ops.queue_pop(be_of(s)->ctx, k, block, val, len,
                                     ms_of(s, timeout_ms));
    rc = failed(s, rc, "QUEUE_POP", k);
    free(k);
    return rc;
}

static int o_queue_len(fccl_store_t *s, const char *key, int64_t *n)
{
    WITH_KEY(s, "QUEUE_LEN", key, k);
    int rc = be_of(s)->ops.queue_len(be_of(s)->ctx, k, n);
    rc = failed(s, rc, "QUEUE_LEN", k);
    free(k);
    return rc;
}

static int o_num_keys(fccl_store_t *s, int64_t *n)
{
    fccl_err_clear();
    return failed(s, be_of(s)->ops.num_keys(be_of(s)->ctx, n), "GETNUMKEYS",
                  NULL);
}

static int o_ping(fccl_store_t *s, double *rtt_us)
{
    fccl_err_clear();
    return failed(s, be_of(s)->ops.ping(be_of(s)->ctx, rtt_us), "PING",
                  NULL);
}

static int o_stats(fccl_store_t *s, char **text, size_t *len)
{
    fccl_err_clear();
    return failed(s, be_of(s)->ops.stats(be_of(s)->ctx, text, len), "STATS",
                  NULL);
}

/* ---- several keys: a prefixed copy of the list ---- */

static int full_keys(const fccl_store_t *s, const char *op,
                     const char *const *keys, size_t n, char ***out)
{
    if (n && !keys)
        return no_key(s, op);
    char **k = calloc(n ? n : 1, sizeof(*k));
    if (!k)
        return nomem(s, op);
    for (size_t i = 0; i < n; i++) {
        if (!keys[i]) {
            fccl_store_free_keys(k, i);
            return no_key(s, op);
        }
        if (!(k[i] = store_full_key(s, keys[i]))) {
            fccl_store_free_keys(k, i);
            return nomem(s, op);
        }
    }
    *out = k;
    fccl_err_clear();
    return FCCL_OK;
}

static int o_check(fccl_store_t *s, const char *const *keys, size_t n,
                   int *all_present)
{
    char **k;
    int rc = full_keys(s, "CHECK", keys, n, &k);
    if (rc < 0)
        return rc;
    rc = be_of(s)->ops.check(be_of(s)->ctx, (const char *const *)k, n,
                             all_present);
    rc = failed(s, rc, "CHECK", n ? k[0] : NULL);
    fccl_store_free_keys(k, n);
    return rc;
}

static int o_wait(fccl_store_t *s, const char *const *keys, size_t n,
                  int64_t timeout_ms)
{
    char **k;
    int rc = full_keys(s, "WAIT", keys, n, &k);
    if (rc < 0)
        return rc;
    rc = be_of(s)->ops.wait(be_of(s)->ctx, (const char *const *)k, n,
                            ms_of(s, timeout_ms));
    rc = failed(s, rc, "WAIT", n ? k[0] : NULL);
    fccl_store_free_keys(k, n);
    return rc;
}

static int o_multi_get(fccl_store_t *s, const char *const *keys, size_t n,
                       void **vals, size_t *lens, int64_t timeout_ms)
{
    char **k;
    int rc = full_keys(s, "MULTI_GET", keys, n, &k);
    if (rc < 0)
        return rc;
    rc = be_of(s)->ops.multi_get(be_of(s)->ctx, (const char *const *)k, n,
                                 vals, lens, ms_of(s, timeout_ms));
    rc = failed(s, rc, "MULTI_GET", n ? k[0] : NULL);
    fccl_store_free_keys(k, n);
    return rc;
}

static int o_multi_set(fccl_store_t *s, const char *const *keys,
                       const void *const *vals, const size_t *lens, size_t n)
{
    char **k;
    int rc = full_keys(s, "MULTI_SET", keys, n, &k);
    if (rc < 0)
        return rc;
    rc = be_of(s)->ops.multi_set(be_of(s)->ctx, (const char *const *)k,
                                 vals, lens, n);
    rc = failed(s, rc, "MULTI_SET", n ? k[0] : NULL);
    fccl_store_free_keys(k, n);
    return rc;
}

/* The store lists full keys; the view's caller sees its own. */
static int o_list_keys(fccl_store_t *s, const char *prefix, char ***keys,
                       size_t *n)
{
    if (!keys || !n)
        return fccl_err(FCCL_ERR_INVALID, "store %s: LIST_KEYS: NULL output",
                        s->name);
    char *p = store_full_key(s, prefix ? prefix : "");
    if (!p)
        return nomem(s, "LIST_KEYS");
    fccl_err_clear();
    int rc = be_of(s)->ops.list_keys(be_of(s)->ctx, p, keys, n);
    rc = failed(s, rc, "LIST_KEYS", p);
    free(p);
    if (rc < 0)
        return rc;
    for (size_t i = 0; i < *n; i++)
        if (!strncmp((*keys)[i], s->kpre, s->kprelen))
            memmove((*keys)[i], (*keys)[i] + s->kprelen,
                    strlen((*keys)[i]) - s->kprelen + 1);
    return FCCL_OK;
}

/* ---- handles ---- */

static int o_prefixed(fccl_store_t *parent, const char *prefix,
                      fccl_store_t **out)
{
    struct ops_store *b = be_of(parent);
    return store_handle_view(parent, prefix, &b->mu, &b->refs, out);
}

static void o_close(fccl_store_t *s)
{
    struct ops_store *b = be_of(s);
    store_handle_free(s);
    pthread_mutex_lock(&b->mu);
    int last = --b->refs == 0;
    pthread_mutex_unlock(&b->mu);
    if (!last)
        return;
    if (b->ops.close)
        b->ops.close(b->ctx);
    pthread_mutex_destroy(&b->mu);
    free(b->name);
    free(b);
}

/* The handles' table: ours, but NULL where the caller's table is, so that
 * store_api.c refuses the call or builds it from others. */
static void fill_vt(struct ops_store *b)
{
    const fccl_store_ops_t *o = &b->ops;
    b->vt = ops_vt;
#define KEEP(field)                                                            \
    if (!o->field)                                                             \
        b->vt.field = NULL
    KEEP(set);
    KEEP(get);
    KEEP(add);
    KEEP(compare_set);
    KEEP(check);
    KEEP(wait);
    KEEP(delete_key);
    KEEP(num_keys);
    KEEP(append);
    KEEP(multi_get);
    KEEP(multi_set);
    KEEP(ping);
    KEEP(list_keys);
    KEEP(stats);
    KEEP(barrier);
    KEEP(queue_push);
    KEEP(queue_pop);
    KEEP(queue_len);
#undef KEEP
}

int fccl_store_from_ops(const fccl_store_ops_t *ops, size_t ops_size,
                        void *ctx, const char *name, int64_t timeout_ms,
                        fccl_store_t **out)
{
    if (!ops || !out)
        return fccl_err(FCCL_ERR_INVALID, "store from ops: NULL argument");
    if (ops_size > sizeof(fccl_store_ops_t))
        return fccl_err(FCCL_ERR_INVALID, "store from ops: a table of %zu "
                        "bytes, this library knows %zu", ops_size,
                        sizeof(fccl_store_ops_t));
    *out = NULL;
    struct ops_store *b = calloc(1, sizeof(*b));
    char *nm = strdup(name ? name : "store");
    if (!b || !nm) {
        free(b);
        free(nm);
        return fccl_err(FCCL_ERR_NOMEM, "store from ops: out of memory");
    }
    memcpy(&b->ops, ops, ops_size);
    b->ctx = ctx;
    b->name = nm;
    b->timeout_ms = fccl_env_timeout_ms(300000);
    if (timeout_ms > 0)
        b->timeout_ms = timeout_ms;
    b->refs = 1;
    pthread_mutex_init(&b->mu, NULL);
    fill_vt(b);
    int rc = store_handle_new(&b->vt, b, b->name, b->timeout_ms, "", 0,
                              out);
    if (rc < 0) {
        pthread_mutex_destroy(&b->mu);
        free(nm);
        free(b);
    }
    return rc;
}

/* Every back-end fills the same table (store_vt.h): the rows repeat. */
static const struct store_vt ops_vt = {
    .kind = "a table of operations",
    .prefixed = o_prefixed,
    .close = o_close,
    .set = o_set,
    .get = o_get,
    .add = o_add,
    .compare_set = o_compare_set,
    .check = o_check,
    .wait = o_wait,
    .delete_key = o_delete,
    .num_keys = o_num_keys,
    .append = o_append,
    .multi_get = o_multi_get,
    .multi_set = o_multi_set,
    .ping = o_ping,
    .list_keys = o_list_keys,
    .stats = o_stats,
    .barrier = o_barrier,
    .queue_push = o_queue_push,
    .queue_pop = o_queue_pop,
    .queue_len = o_queue_len,
};
