/*
 * Handles of every kind of store (store_vt.h): made and freed by the
 * kinds, a key with the handle's prefix, and the key lists the calls
 * return (fccl_store_free_keys).
 */
#include <stdlib.h>
#include <string.h>

#include "err.h"
#include "store_vt.h"

int store_handle_new(const struct store_vt *vt, void *be, const char *name,
                     int64_t timeout_ms, const char *pre, size_t prelen,
                     fccl_store_t **out)
{
    fccl_store_t *s = calloc(1, sizeof(*s));
    char *kp = malloc(prelen + 1);
    if (!s || !kp) {
        free(s);
        free(kp);
        return fccl_err(FCCL_ERR_NOMEM, "store %s: out of memory", name);
    }
    memcpy(kp, pre, prelen);
    kp[prelen] = '\0';
    s->vt = vt;
    s->be = be;
    s->name = name;
    s->timeout_ms = timeout_ms;
    s->kpre = kp;
    s->kprelen = prelen;
    *out = s;
    return FCCL_OK;
}

void store_handle_free(fccl_store_t *s)
{
    if (!s)
        return;
    free(s->kpre);
    free(s);
}

char *store_full_key(const fccl_store_t *s, const char *key)
{
    size_t kl = strlen(key);
    char *k = malloc(s->kprelen + kl + 1);
    if (!k)
        return NULL;
    memcpy(k, s->kpre, s->kprelen);
    memcpy(k + s->kprelen, key, kl + 1);
    return k;
}

void fccl_store_free_keys(char **keys, size_t n)
{
    if (!keys)
        return;
    for (size_t i = 0; i < n; i++)
        free(keys[i]);
    free(keys);
}

int store_handle_view(const fccl_store_t *parent, const char *prefix,
                      pthread_mutex_t *mu, int *refs, fccl_store_t **out)
{
    size_t pl = strlen(prefix), n = parent->kprelen + pl;
    char *buf = malloc(n + 1);
    if (!buf)
        return fccl_err(FCCL_ERR_NOMEM, "store %s: prefixed: out of memory",
                        parent->name);
    memcpy(buf, parent->kpre, parent->kprelen);
    memcpy(buf + parent->kprelen, prefix, pl + 1);
    int rc = store_handle_new(parent->vt, parent->be, parent->name,
                              parent->timeout_ms, buf, n, out);
    free(buf);
    if (rc < 0)
        return rc;
    (*out)->c = parent->c;
    pthread_mutex_lock(mu);
    (*refs)++;
    pthread_mutex_unlock(mu);
    return FCCL_OK;
}
