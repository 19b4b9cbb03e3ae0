/*
 * The public calls of fccl/store.h: check the handle, then call its
 * kind's entry (store_vt.h).  A kind without check, wait, multi_get or
 * multi_set gets them built here from its single-key calls, so a table of
 * set/get/add/delete (a torch Store, say) runs everything fccl_init needs.
 */
#include <stdlib.h>
#include <string.h>

#include "clock.h"
#include "err.h"
#include "etcd_addr.h"
#include "etcd_int.h"
#include "store_vt.h"

#define CHECK_PROBE_MS 1 /* how long an emulated check waits for a key */

static int no_handle(const char *op)
{
    return fccl_err(FCCL_ERR_INVALID, "store %s: NULL handle", op);
}

static int unsupported(const fccl_store_t *s, const char *op)
{
    return fccl_err(FCCL_ERR_UNSUPPORTED, "store %s: %s: not supported by "
                    "this store (%s)", s->name, op, s->vt->kind);
}

/* Resolve and refuse in one line per call. */
#define ENTRY(s, op, field)                                                    \
    do {                                                                       \
        if (!(s))                                                              \
            return no_handle(op);                                              \
        if (!(s)->vt->field)                                                   \
            return unsupported(s, op);                                         \
    } while (0)

int fccl_store_connect(const fccl_store_opts_t *opts, fccl_store_t **out)
{
    if (opts && out && etcd_is_addr(opts->addr))
        return etcd_store_connect(opts, out);
    return tcp_store_connect(opts, out);
}

int64_t fccl_store_lease_id(const fccl_store_t *s)
{
    return s && s->vt == &etcd_store_vt ? etcd_handle_lease(s) : 0;
}

int fccl_store_prefixed(fccl_store_t *parent, const char *prefix,
                        fccl_store_t **out)
{
    if (!parent || !prefix || !out)
        return fccl_err(FCCL_ERR_INVALID, "store prefixed: NULL argument");
    return parent->vt->prefixed(parent, prefix, out);
}

void fccl_store_close(fccl_store_t *s)
{
    if (s)
        s->vt->close(s);
}

const char *fccl_store_addr(const fccl_store_t *s)
{
    return s ? s->name : "";
}

int64_t fccl_store_timeout_ms(const fccl_store_t *s)
{
    return s ? s->timeout_ms : 0;
}

/* ---- single-key calls ---- */

int fccl_store_set(fccl_store_t *s, const char *key, const void *val,
                   size_t len)
{
    ENTRY(s, "SET", set);
    return s->vt->set(s, key, val, len);
}

int fccl_store_get(fccl_store_t *s, const char *key, void **val, size_t *len,
                   int64_t timeout_ms)
{
    ENTRY(s, "GET", get);
    return s->vt->get(s, key, val, len, timeout_ms);
}

int fccl_store_add(fccl_store_t *s, const char *key, int64_t delta,
                   int64_t *out)
{
    ENTRY(s, "ADD", add);
    return s->vt->add(s, key, delta, out);
}

int fccl_store_compare_set(fccl_store_t *s, const char *key,
                           const void *expected, size_t elen,
                           const void *desired, size_t dlen, void **cur,
                           size_t *curlen)
{
    ENTRY(s, "COMPARE_SET", compare_set);
    return s->vt->compare_set(s, key, expected, elen, desired, dlen, cur,
                              curlen);
}

int fccl_store_delete(fccl_store_t *s, const char *key, int *deleted)
{
    ENTRY(s, "DELETE_KEY", delete_key);
    return s->vt->delete_key(s, key, deleted);
}

int fccl_store_num_keys(fccl_store_t *s, int64_t *n)
{
    ENTRY(s, "GETNUMKEYS", num_keys);
    return s->vt->num_keys(s, n);
}

int fccl_store_append(fccl_store_t *s, const char *key, const void *val,
                      size_t len)
{
    ENTRY(s, "APPEND", append);
    return s->vt->append(s, key, val, len);
}

int fccl_store_ping(fccl_store_t *s, double *rtt_us)
{
    ENTRY(s, "PING", ping);
    return s->vt->ping(s, rtt_us);
}

int fccl_store_list_keys(fccl_store_t *s, const char *prefix, char ***keys,
                         size_t *n)
{
    ENTRY(s, "LIST_KEYS", list_keys);
    return s->vt->list_keys(s, prefix, keys, n);
}

int fccl_store_stats(fccl_store_t *s, char **text, size_t *len)
{
    ENTRY(s, "STATS", stats);
    return s->vt->stats(s, text, len);
}

int fccl_store_barrier(fccl_store_t *s, const char *key, int64_t world_size,
                       int64_t timeout_ms)
{
    ENTRY(s, "BARRIER", barrier);
    /* Checked here for every store (and view) alike. */
    if (!key || world_size < 1)
        return fccl_err(FCCL_ERR_INVALID, "store BARRIER: %s",
                        !key ? "NULL key" : "world_size must be >= 1");
    return s->vt->barrier(s, key, world_size, timeout_ms);
}

int fccl_store_queue_push(fccl_store_t *s, const char *key, const void *val,
                          size_t len)
{
    ENTRY(s, "QUEUE_PUSH", queue_push);
    return s->vt->queue_push(s, key, val, len);
}

int fccl_store_queue_pop(fccl_store_t *s, const char *key, int block,
                         void **val, size_t *len, int64_t timeout_ms)
{
    ENTRY(s, "QUEUE_POP", queue_pop);
    return s->vt->queue_pop(s, key, block, val, len, timeout_ms);
}

int fccl_store_queue_len(fccl_store_t *s, const char *key, int64_t *n)
{
    ENTRY(s, "QUEUE_LEN", queue_len);
    return s->vt->queue_len(s, key, n);
}

/* ---- multi-key calls, built from single keys where a kind lacks them ---- */

/* Every multi-key call's list is checked here, once, before any kind of
 * store sees it. */
static int check_keys(const fccl_store_t *s, const char *op,
                      const char *const *keys, size_t n)
{
    if (n && !keys)
        return fccl_err(FCCL_ERR_INVALID, "store %s: %s: NULL key list",
                        s->name, op);
    for (size_t i = 0; i < n; i++)
        if (!keys[i])
            return fccl_err(FCCL_ERR_INVALID, "store %s: %s: key %zu is NULL",
                            s->name, op, i);
    return FCCL_OK;
}

static int64_t resolve_ms(const fccl_store_t *s, int64_t timeout_ms)
{
    return timeout_ms < 0 ? s->timeout_ms : timeout_ms;
}

/* Get every key before one deadline; vals may be NULL (wait). */
static int get_each(fccl_store_t *s, const char *const *keys, size_t n,
                    void **vals, size_t *lens, int64_t timeout_ms)
{
    uint64_t dl = fccl_deadline_ms(resolve_ms(s, timeout_ms));
    for (size_t i = 0; i < n; i++) {
        int64_t left = fccl_ms_left(dl);
        void *v = NULL;
        size_t l = 0;
        int rc = s->vt->get(s, keys[i], &v, &l, left > 0 ? left : 0);
        if (rc < 0) {
            for (size_t j = 0; vals && j < i; j++) {
                free(vals[j]);
                vals[j] = NULL;
            }
            return rc;
        }
        if (vals) {
            vals[i] = v;
            lens[i] = l;
        } else {
            free(v);
        }
    }
    return FCCL_OK;
}

int fccl_store_wait(fccl_store_t *s, const char *const *keys, size_t n,
                    int64_t timeout_ms)
{
    if (!s)
        return no_handle("WAIT");
    int rc = check_keys(s, "WAIT", keys, n);
    if (rc < 0)
        return rc;
    if (s->vt->wait)
        return s->vt->wait(s, keys, n, timeout_ms);
    if (!s->vt->get)
        return unsupported(s, "WAIT");
    return get_each(s, keys, n, NULL, NULL, timeout_ms);
}

int fccl_store_check(fccl_store_t *s, const char *const *keys, size_t n,
                     int *all_present)
{
    if (!s)
        return no_handle("CHECK");
    int rc = check_keys(s, "CHECK", keys, n);
    if (rc < 0)
        return rc;
    if (s->vt->check)
        return s->vt->check(s, keys, n, all_present);
    if (!all_present)
        return fccl_err(FCCL_ERR_INVALID, "store CHECK: NULL result");
    if (!s->vt->wait && !s->vt->get)
        return unsupported(s, "CHECK");
    /* A probe that waits a moment: a store with neither CHECK nor a
     * non-blocking read can tell presence only by a wait that ends. */
    rc = s->vt->wait ? s->vt->wait(s, keys, n, CHECK_PROBE_MS)
                     : get_each(s, keys, n, NULL, NULL, CHECK_PROBE_MS);
    if (rc == FCCL_ERR_TIMEOUT) {
        *all_present = 0;
        return FCCL_OK;
    }
    *all_present = rc == FCCL_OK;
    return rc;
}

int fccl_store_multi_get(fccl_store_t *s, const char *const *keys, size_t n,
                         void **vals, size_t *lens, int64_t timeout_ms)
{
    if (!s)
        return no_handle("MULTI_GET");
    int rc = check_keys(s, "MULTI_GET", keys, n);
    if (rc < 0)
        return rc;
    if (s->vt->multi_get)
        return s->vt->multi_get(s, keys, n, vals, lens, timeout_ms);
    if (!s->vt->get)
        return unsupported(s, "MULTI_GET");
    if (n && (!vals || !lens))
        return fccl_err(FCCL_ERR_INVALID, "store MULTI_GET: NULL output");
    return get_each(s, keys, n, vals, lens, timeout_ms);
}

int fccl_store_multi_set(fccl_store_t *s, const char *const *keys,
                         const void *const *vals, const size_t *lens,
                         size_t n)
{
    if (!s)
        return no_handle("MULTI_SET");
    int rc = check_keys(s, "MULTI_SET", keys, n);
    if (rc < 0)
        return rc;
    if (s->vt->multi_set)
        return s->vt->multi_set(s, keys, vals, lens, n);
    if (!s->vt->set)
        return unsupported(s, "MULTI_SET");
    if (n && (!vals || !lens))
        return fccl_err(FCCL_ERR_INVALID, "store MULTI_SET: NULL values");
    for (size_t i = 0; i < n && rc == FCCL_OK; i++)
        rc = s->vt->set(s, keys[i], vals[i], lens[i]);
    return rc;
}
