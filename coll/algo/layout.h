/*
 * Internal: how a vector splits into n blocks, and a walk over the chunks
 * of a sequence of blocks (ring algorithms).  Pure arithmetic, all inline:
 * the algorithms call it per chunk.
 */
#ifndef FCCL_COLL_LAYOUT_H
#define FCCL_COLL_LAYOUT_H

#include <stddef.h>

#include "args.h"

enum lay_mode { LAY_EVEN, LAY_SPLIT, LAY_V };

/* LAY_EVEN: every block has `count` elements; LAY_SPLIT: `count` elements
 * in total split as evenly as possible (the first count % n blocks one
 * longer); LAY_V: counts[i] elements at element offset displs[i]. */
struct coll_layout {
    enum lay_mode mode;
    int n;
    size_t esize;
    size_t count;
    const size_t *counts, *displs;
};

static inline size_t lay_count(const struct coll_layout *l, int i)
{
    switch (l->mode) {
    case LAY_EVEN: return l->count;
    case LAY_SPLIT:
        return l->count / (size_t)l->n + ((size_t)i < l->count % (size_t)l->n);
    default: return l->counts[i];
    }
}

static inline size_t lay_off(const struct coll_layout *l, int i)
{
    switch (l->mode) {
    case LAY_EVEN: return l->count * (size_t)i;
    case LAY_SPLIT: {
        size_t q = l->count / (size_t)l->n, rem = l->count % (size_t)l->n;
        return q * (size_t)i + ((size_t)i < rem ? (size_t)i : rem);
    }
    default: return l->displs[i];
    }
}

/* Bytes of block i and its byte offset. */
static inline size_t lay_bytes(const struct coll_layout *l, int i)
{
    return lay_count(l, i) * l->esize;
}
static inline size_t lay_boff(const struct coll_layout *l, int i)
{
    return lay_off(l, i) * l->esize;
}

/* Largest block, in elements. */
static inline size_t lay_max_count(const struct coll_layout *l)
{
    size_t m = 0;
    for (int q = 0; q < l->n; q++)
        m = lay_count(l, q) > m ? lay_count(l, q) : m;
    return m;
}

/* The blocks of an even or _v call (all_gather, reduce_scatter) as the
 * call's arguments describe them, over n ranks. */
static inline struct coll_layout lay_of_args(const struct coll_args *a, int n)
{
    struct coll_layout l = {a->counts ? LAY_V : LAY_EVEN, n,
                            fccl_dtype_size(a->dtype), a->count, a->counts,
                            a->displs};
    return l;
}
/* Total bytes of blocks [first, first+k) in ring order (mod n). */
static inline size_t lay_range_bytes(const struct coll_layout *l, int first,
                                     int k)
{
    size_t b = 0;
    for (int i = 0; i < k; i++)
        b += lay_bytes(l, (first + i) % l->n);
    return b;
}

/* Walks the chunks of a sequence of blocks, block (base - s) mod n for
 * s = 0..nsteps-1, each cut into pieces of at most `chunk` bytes; empty
 * blocks yield nothing.  Ring algorithms enumerate what crosses a link
 * with it, identically on both ends. */
struct chunk_it {
    const struct coll_layout *l;
    int base, nsteps, s;
    size_t pos, chunk;
};

struct chunk_item {
    int step, blk;
    size_t off, len; /* byte offset in the vector, bytes */
};

static inline struct chunk_it chunk_it_make(const struct coll_layout *l,
                                            int base, int nsteps, size_t chunk)
{
    struct chunk_it it = {l, base, nsteps, 0, 0, chunk};
    return it;
}

static inline int chunk_it_next(struct chunk_it *it, struct chunk_item *out)
{
    int n = it->l->n;
    while (it->s < it->nsteps) {
        int b = ((it->base - it->s) % n + n) % n;
        size_t bl = lay_bytes(it->l, b);
        if (it->pos < bl) {
            size_t len = bl - it->pos < it->chunk ? bl - it->pos : it->chunk;
            out->step = it->s;
            out->blk = b;
            out->off = lay_boff(it->l, b) + it->pos;
            out->len = len;
            it->pos += len;
            return 1;
        }
        it->s++;
        it->pos = 0;
    }
    return 0;
}

#endif
