/*
 * The key space of a store in etcd (etcd_keys.h).
 */
#include <stdlib.h>
#include <string.h>

#include "err.h"
#include "etcd_keys.h"

size_t ek_prefix_end(const uint8_t *p, size_t n, uint8_t *out)
{
    while (n > 0 && p[n - 1] == 0xff)
        n--;
    if (n == 0)
        return 0;
    memcpy(out, p, n);
    out[n - 1]++;
    return n;
}

struct ek_key ek_cat(const void *a, size_t an, const void *b, size_t bn,
                     const void *c, size_t cn, const void *d, size_t dn)
{
    struct ek_key k = {NULL, 0};
    size_t n = an + bn + cn + dn;
    k.p = malloc(n + 1);
    if (!k.p)
        return k;
    uint8_t *w = k.p;
    const void *part[4] = {a, b, c, d};
    size_t len[4] = {an, bn, cn, dn};
    for (int i = 0; i < 4; i++)
        if (part[i] && len[i]) {
            memcpy(w, part[i], len[i]);
            w += len[i];
        }
    *w = '\0';
    k.n = n;
    return k;
}

int ek_user_range(const char *prefix, size_t plen, const void *p, size_t n,
                  struct ek_key *lo, struct ek_key *hi)
{
    /* Every key of the store starts with PREFIX and a byte above NUL. */
    *lo = n ? ek_cat(prefix, plen, p, n, NULL, 0, NULL, 0)
            : ek_cat(prefix, plen, "\1", 1, NULL, 0, NULL, 0);
    *hi = ek_cat(prefix, plen, p, n, NULL, 0, NULL, 0);
    if (!lo->p || !hi->p) {
        ek_free(lo);
        ek_free(hi);
        return fccl_err(FCCL_ERR_NOMEM, "out of memory");
    }
    hi->n = ek_prefix_end(hi->p, hi->n, hi->p);
    return FCCL_OK;
}

struct ek_key ek_queue(const char *prefix, size_t plen, const void *k,
                       size_t kl)
{
    return ek_cat(prefix, plen, "\0q", 2, k, kl, "", 1);
}

void ek_free(struct ek_key *k)
{
    free(k->p);
    k->p = NULL;
    k->n = 0;
}
