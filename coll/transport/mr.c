/*
 * Memory-registration cache, one per endpoint (domain).
 *
 * Providers with FI_MR_LOCAL (verbs, efa, ...) need a descriptor for every
 * buffer they touch; registering costs a system call and page pinning, so
 * registrations are kept, keyed by address range: a buffer inside a range
 * already registered reuses it.  Ranges are page-aligned.  Entries in use
 * by a pending operation are reference-counted and never evicted; idle ones
 * are evicted least-recently-used beyond TP_MR_MAX entries.  Everything is
 * released at tp_close.  All calls run under the transport lock.
 *
 * Caveat, as for every user-level registration cache without a memory
 * monitor: if the caller frees a buffer and the same virtual range is later
 * mapped to other pages, the cached registration is stale.  Collective
 * buffers are long-lived, and the providers used here do not need
 * registration at all (the cache is then only used when asked to).
 */
#include <stdint.h>
#include <stdlib.h>
#include <unistd.h>

#include "err.h"
#include "log.h"
#include "tp_int.h"

#define TP_MR_MAX 64

struct tp_mr_ent {
    uintptr_t base;
    size_t len;
    struct fid_mr *mr;
    void *desc;
    int refs;
    uint64_t last; /* LRU clock */
};

struct tp_mr_cache {
    struct tp_mr_ent **ents; /* pointers: entries never move */
    size_t n, cap;
    uint64_t clock, hits, misses, next_key;
};

static struct tp_mr_cache *cache_of(struct tp_ep *e)
{
    if (!e->mrc)
        e->mrc = calloc(1, sizeof(*e->mrc));
    return e->mrc;
}

static struct tp_mr_ent *lookup(struct tp_mr_cache *c, uintptr_t lo,
                                uintptr_t hi)
{
    for (size_t i = 0; i < c->n; i++) {
        struct tp_mr_ent *m = c->ents[i];
        if (m->base <= lo && hi <= m->base + m->len)
            return m;
    }
    return NULL;
}

static void drop(struct tp_ep *e, size_t i)
{
    struct tp_mr_cache *c = e->mrc;
    struct tp_mr_ent *m = c->ents[i];
    int rc = fi_close(&m->mr->fid);
    if (rc)
        LOG_WARN("FABRIC", "%s: fi_close(mr): %s", e->prov,
                 tp_fi_strerror(rc));
    free(m);
    c->ents[i] = c->ents[--c->n];
}

/* Make room: evict the least recently used idle entry (if any). */
static void evict_one(struct tp_ep *e)
{
    struct tp_mr_cache *c = e->mrc;
    size_t victim = SIZE_MAX;
    for (size_t i = 0; i < c->n; i++)
        if (c->ents[i]->refs == 0 &&
            (victim == SIZE_MAX || c->ents[i]->last < c->ents[victim]->last))
            victim = i;
    if (victim != SIZE_MAX)
        drop(e, victim);
}

static int reg(struct tp_ep *e, uintptr_t base, size_t len,
               struct tp_mr_ent **out)
{
    struct tp_mr_cache *c = e->mrc;
    struct tp_mr_ent *m = calloc(1, sizeof(*m));
    if (!m)
        return fccl_err(FCCL_ERR_NOMEM, "transport: MR cache entry");
    /* Without FI_MR_PROV_KEY the keys we request must be unique. */
    int rc = fi_mr_reg(e->domain, (void *)base, len, FI_SEND | FI_RECV, 0,
                       ++c->next_key, 0, &m->mr, NULL);
    if (rc == 0 && e->mr_endpoint) {
        rc = fi_mr_bind(m->mr, &e->ep->fid, 0);
        if (rc == 0)
            rc = fi_mr_enable(m->mr);
        if (rc)
            fi_close(&m->mr->fid);
    }
    if (rc) {
        free(m);
        return fccl_err(FCCL_ERR_FABRIC, "transport: %s: fi_mr_reg(%zu B): %s",
                        e->prov, len, tp_fi_strerror(rc));
    }
    m->base = base;
    m->len = len;
    m->desc = fi_mr_desc(m->mr);
    *out = m;
    return FCCL_OK;
}

static int push(struct tp_mr_cache *c, struct tp_mr_ent *m)
{
    if (c->n == c->cap) {
        size_t cap = c->cap ? 2 * c->cap : 16;
        void *p = realloc(c->ents, cap * sizeof(*c->ents));
        if (!p)
            return fccl_err(FCCL_ERR_NOMEM, "transport: MR cache");
        c->ents = p;
        c->cap = cap;
    }
    c->ents[c->n++] = m;
    return FCCL_OK;
}

int tp_mr_get(struct tp_ep *e, const void *buf, size_t len, void **desc,
              void **entry)
{
    *desc = NULL;
    *entry = NULL;
    if (len == 0 || !buf)
        return FCCL_OK;
    struct tp_mr_cache *c = cache_of(e);
    if (!c)
        return fccl_err(FCCL_ERR_NOMEM, "transport: MR cache");
    uintptr_t lo = (uintptr_t)buf, hi = lo + len;
    struct tp_mr_ent *m = lookup(c, lo, hi);
    if (m) {
        c->hits++;
    } else {
        uintptr_t pg = (uintptr_t)sysconf(_SC_PAGESIZE);
        uintptr_t base = lo & ~(pg - 1), top = (hi + pg - 1) & ~(pg - 1);
        if (c->n >= TP_MR_MAX)
            evict_one(e);
        int rc = reg(e, base, top - base, &m);
        if (rc < 0)
            return rc;
        if ((rc = push(c, m)) < 0) {
            fi_close(&m->mr->fid);
            free(m);
            return rc;
        }
        c->misses++;
    }
    m->refs++;
    m->last = ++c->clock;
    *desc = m->desc;
    *entry = m;
    return FCCL_OK;
}

void tp_mr_put(struct tp_ep *e, void *entry)
{
    (void)e;
    struct tp_mr_ent *m = entry;
    if (m && m->refs > 0)
        m->refs--;
}

void *tp_mr_desc(void *entry)
{
    return entry ? ((struct tp_mr_ent *)entry)->desc : NULL;
}

void tp_mr_cache_free(struct tp_ep *e)
{
    struct tp_mr_cache *c = e->mrc;
    if (!c)
        return;
    while (c->n)
        drop(e, c->n - 1);
    free(c->ents);
    free(c);
    e->mrc = NULL;
}

void tp_mr_stats(const struct tp_ep *e, uint64_t *hits, uint64_t *misses,
                 uint64_t *entries)
{
    const struct tp_mr_cache *c = e->mrc;
    *hits += c ? c->hits : 0;
    *misses += c ? c->misses : 0;
    *entries += c ? c->n : 0;
}
