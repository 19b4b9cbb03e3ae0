/*
 * The key-value table (see kv.h): chained hashing with power-of-two buckets,
 * SipHash-1-3 keyed by a random seed, values and queues with byte
 * accounting.
 */
#include "dlist.h"
#include "codec.h"
#include "kv.h"

#include <stdlib.h>
#include <string.h>
#include <sys/random.h>
#include <time.h>
#include <unistd.h>

#include "err.h"

#define KV_MIN_BUCKETS 1024u
#define KV_MIN_VCAP 24u /* room for any int64 in decimal, so ADD is in place */

/* ---- SipHash-1-3 (Aumasson and Bernstein's construction) ---- */

static inline uint64_t rotl(uint64_t x, int b)
{
    return (x << b) | (x >> (64 - b));
}

#define SIPROUND(v0, v1, v2, v3)                                               \
    do {                                                                       \
        v0 += v1; v1 = rotl(v1, 13); v1 ^= v0; v0 = rotl(v0, 32);              \
        v2 += v3; v3 = rotl(v3, 16); v3 ^= v2;                                 \
        v0 += v3; v3 = rotl(v3, 21); v3 ^= v0;                                 \
        v2 += v1; v1 = rotl(v1, 17); v1 ^= v2; v2 = rotl(v2, 32);              \
    } while (0)

static uint64_t load_le(const uint8_t *p, size_t n)
{
    uint64_t w = 0;
    for (size_t i = 0; i < n; i++)
        w |= (uint64_t)p[i] << (8 * i);
    return w;
}

static uint64_t siphash13(const uint64_t seed[2], const uint8_t *p,
                          uint64_t len)
{
    uint64_t v0 = seed[0] ^ 0x736f6d6570736575ull;
    uint64_t v1 = seed[1] ^ 0x646f72616e646f6dull;
    uint64_t v2 = seed[0] ^ 0x6c7967656e657261ull;
    uint64_t v3 = seed[1] ^ 0x7465646279746573ull;
    uint64_t words = len / 8;
    for (uint64_t i = 0; i < words; i++, p += 8) {
        uint64_t m;
        memcpy(&m, p, 8); /* the wire and every host we run on: LE */
        v3 ^= m;
        SIPROUND(v0, v1, v2, v3);
        v0 ^= m;
    }
    uint64_t b = (len << 56) | load_le(p, len & 7);
    v3 ^= b;
    SIPROUND(v0, v1, v2, v3);
    v0 ^= b;
    v2 ^= 0xff;
    SIPROUND(v0, v1, v2, v3);
    SIPROUND(v0, v1, v2, v3);
    SIPROUND(v0, v1, v2, v3);
    return v0 ^ v1 ^ v2 ^ v3;
}

static void seed_init(uint64_t seed[2])
{
    if (getrandom(seed, 2 * sizeof(uint64_t), GRND_NONBLOCK) ==
        (ssize_t)(2 * sizeof(uint64_t)))
        return;
    /* No entropy yet (early boot): still better than a fixed seed. */
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    seed[0] = (uint64_t)ts.tv_nsec * 0x9E3779B97F4A7C15ull ^ (uint64_t)getpid();
    seed[1] = (uint64_t)ts.tv_sec * 0xC2B2AE3D27D4EB4Full ^ (uintptr_t)seed;
}

/* ---- table ---- */

int kv_init(struct kv *kv, uint64_t max_bytes)
{
    memset(kv, 0, sizeof(*kv));
    kv->buckets = calloc(KV_MIN_BUCKETS, sizeof(*kv->buckets));
    if (!kv->buckets)
        return fccl_err(FCCL_ERR_NOMEM, "store table: out of memory");
    kv->mask = KV_MIN_BUCKETS - 1;
    kv->max_bytes = max_bytes;
    seed_init(kv->seed);
    return FCCL_OK;
}

/* Before e->val is changed or freed: a lent buffer stays with its
 * borrowers and e gets a fresh one (a copy of the bytes if keep). */
static int val_unshare(struct kv_entry *e, int keep)
{
    struct kv_share *sh = e->share;
    if (!sh)
        return FCCL_OK;
    if (sh->refs == 0) {
        free(sh);
        e->share = NULL;
        return FCCL_OK;
    }
    uint8_t *copy = NULL;
    if (keep && e->vlen) {
        copy = malloc(e->vlen);
        if (!copy)
            return fccl_err(FCCL_ERR_NOMEM, "store value of %llu bytes",
                            (unsigned long long)e->vlen);
        memcpy(copy, e->val, e->vlen);
    }
    sh->orphan = 1;
    e->share = NULL;
    e->val = copy;
    e->vcap = copy ? e->vlen : 0;
    return FCCL_OK;
}

int kv_value_lend(struct kv_entry *e, const uint8_t **p,
                  struct kv_share **token)
{
    *p = NULL;
    if (!e->share) {
        e->share = calloc(1, sizeof(*e->share));
        if (!e->share)
            return fccl_err(FCCL_ERR_NOMEM, "lending a value");
        e->share->buf = e->val;
    }
    e->share->refs++;
    *p = e->val;
    *token = e->share;
    return FCCL_OK;
}

void kv_value_return(struct kv_share *sh)
{
    if (--sh->refs > 0 || !sh->orphan)
        return;
    free(sh->buf);
    free(sh);
}

static void entry_free(struct kv_entry *e)
{
    val_unshare(e, 0);
    for (struct kv_item *it = e->qhead, *nx; it; it = nx) {
        nx = it->next;
        free(it);
    }
    free(e->val);
    free(e);
}

static void free_chains(struct kv_entry **b, uint64_t from, uint64_t to)
{
    for (uint64_t i = from; i <= to; i++) {
        for (struct kv_entry *e = b[i], *nx; e; e = nx) {
            nx = e->next;
            entry_free(e);
        }
    }
}

void kv_free(struct kv *kv)
{
    if (!kv->buckets)
        return;
    free_chains(kv->buckets, 0, kv->mask);
    if (kv->old) {
        if (kv->moved <= kv->old_mask)
            free_chains(kv->old, kv->moved, kv->old_mask);
        free(kv->old);
    }
    free(kv->buckets);
    memset(kv, 0, sizeof(*kv));
}

uint64_t kv_hash(const struct kv *kv, const uint8_t *p, uint64_t n)
{
    return siphash13(kv->seed, p, n);
}

static int key_eq(const struct kv_entry *e, uint64_t h, const uint8_t *key,
                  uint64_t klen)
{
    return e->hash == h && e->klen == klen && memcmp(e->key, key, klen) == 0;
}

/* The chain an entry of hash h lives in (see kv.h on growing). */
static struct kv_entry **chain_of(const struct kv *kv, uint64_t h)
{
    if (kv->old && (h & kv->old_mask) >= kv->moved)
        return &kv->old[h & kv->old_mask];
    return &kv->buckets[h & kv->mask];
}

#define MIGRATE_STEP 64 /* old buckets moved per lookup while growing */

void kv_migrate(struct kv *kv, uint64_t n)
{
    if (!kv->old || kv->no_grow)
        return;
    for (; n > 0 && kv->moved <= kv->old_mask; n--, kv->moved++) {
        struct kv_entry *e = kv->old[kv->moved], *nx;
        kv->old[kv->moved] = NULL;
        for (; e; e = nx) {
            nx = e->next;
            e->next = kv->buckets[e->hash & kv->mask];
            kv->buckets[e->hash & kv->mask] = e;
        }
    }
    if (kv->moved > kv->old_mask) {
        free(kv->old);
        kv->old = NULL;
        kv->old_mask = kv->moved = 0;
    }
}

struct kv_entry *kv_find(struct kv *kv, const uint8_t *key, uint64_t klen)
{
    uint64_t h = siphash13(kv->seed, key, klen);
    kv_migrate(kv, MIGRATE_STEP);
    for (struct kv_entry *e = *chain_of(kv, h); e; e = e->next)
        if (key_eq(e, h, key, klen))
            return e;
    return NULL;
}

/* Start doubling the bucket array; entries move over a few buckets per
 * lookup (kv_migrate), so no single request pays for rehashing the whole
 * table.  On allocation failure keep the old array (longer chains are
 * slower, not wrong). */
static void grow(struct kv *kv)
{
    uint64_t n = (kv->mask + 1) * 2;
    struct kv_entry **nb = calloc(n, sizeof(*nb));
    if (!nb)
        return;
    kv->old = kv->buckets;
    kv->old_mask = kv->mask;
    kv->moved = 0;
    kv->buckets = nb;
    kv->mask = n - 1;
}

struct kv_entry *kv_lookup_or_add(struct kv *kv, const uint8_t *key,
                                  uint64_t klen)
{
    uint64_t h = siphash13(kv->seed, key, klen);
    kv_migrate(kv, MIGRATE_STEP);
    struct kv_entry **head = chain_of(kv, h);
    for (struct kv_entry *e = *head; e; e = e->next)
        if (key_eq(e, h, key, klen))
            return e;
    struct kv_entry *e = calloc(1, sizeof(*e) + klen);
    if (!e)
        return NULL;
    e->hash = h;
    e->klen = (uint32_t)klen;
    memcpy(e->key, key, klen);
    e->next = *head;
    *head = e;
    if (++kv->nentries > kv->mask + 1 && !kv->no_grow && !kv->old)
        grow(kv);
    return e;
}

void kv_release(struct kv *kv, struct kv_entry *e)
{
    if (!e || e->has_val || e->qlen || e->wait_head)
        return;
    struct kv_entry **pp = chain_of(kv, e->hash);
    while (*pp && *pp != e)
        pp = &(*pp)->next;
    if (*pp)
        *pp = e->next;
    kv->nentries--;
    entry_free(e);
}

/* ---- values ---- */

/* Would replacing `old` stored bytes by `add` exceed the limit? */
static int over_limit(const struct kv *kv, uint64_t old, uint64_t add)
{
    return kv->max_bytes && kv->bytes - old + add > kv->max_bytes;
}

static int limit_err(const struct kv *kv, const struct kv_entry *e)
{
    return fccl_err(FCCL_ERR_LIMIT,
                    "key '%.*s': store would exceed its %llu-byte limit",
                    (int)(e->klen > 64 ? 64 : e->klen), (const char *)e->key,
                    (unsigned long long)kv->max_bytes);
}

/* Make e->val hold at least len bytes.  Keeps a buffer that is not far
 * larger than needed, so a 64 MiB value overwritten by a small one is
 * released. */
static int val_reserve(struct kv_entry *e, uint64_t len, int keep)
{
    int rc = val_unshare(e, keep);
    if (rc < 0)
        return rc;
    if (len <= e->vcap && (keep || e->vcap <= 2 * len + 256))
        return FCCL_OK;
    uint64_t cap = len < KV_MIN_VCAP ? KV_MIN_VCAP : len;
    if (keep && cap < 2 * e->vcap)
        cap = 2 * e->vcap; /* APPEND grows geometrically */
    /* A replaced value need not be copied: allocate fresh, then free. */
    uint8_t *p = keep ? realloc(e->val, cap) : malloc(cap);
    if (!p)
        return fccl_err(FCCL_ERR_NOMEM, "store value of %llu bytes",
                        (unsigned long long)len);
    if (!keep)
        free(e->val);
    e->val = p;
    e->vcap = cap;
    return FCCL_OK;
}

static void account_set(struct kv *kv, struct kv_entry *e, uint64_t newlen)
{
    uint64_t old = e->has_val ? e->klen + e->vlen : 0;
    kv->bytes = kv->bytes - old + e->klen + newlen;
    if (!e->has_val)
        kv->nkeys++;
    e->has_val = 1;
    e->vlen = newlen;
}

int kv_set(struct kv *kv, struct kv_entry *e, const uint8_t *v, uint64_t len)
{
    uint64_t old = e->has_val ? e->klen + e->vlen : 0;
    if (over_limit(kv, old, e->klen + len))
        return limit_err(kv, e);
    int rc = val_reserve(e, len, 0);
    if (rc < 0)
        return rc;
    if (len)
        memcpy(e->val, v, len);
    account_set(kv, e, len);
    return FCCL_OK;
}

int kv_set_take(struct kv *kv, struct kv_entry *e, uint8_t *v, uint64_t len)
{
    uint64_t old = e->has_val ? e->klen + e->vlen : 0;
    if (over_limit(kv, old, e->klen + len))
        return limit_err(kv, e);
    val_unshare(e, 0);
    free(e->val);
    e->val = v;
    e->vcap = len;
    account_set(kv, e, len);
    return FCCL_OK;
}

int kv_append(struct kv *kv, struct kv_entry *e, const uint8_t *v,
              uint64_t len)
{
    uint64_t cur = e->has_val ? e->vlen : 0;
    uint64_t old = e->has_val ? e->klen + e->vlen : 0;
    if (over_limit(kv, old, e->klen + cur + len))
        return limit_err(kv, e);
    int rc = val_reserve(e, cur + len, 1);
    if (rc < 0)
        return rc;
    if (len)
        memcpy(e->val + cur, v, len);
    account_set(kv, e, cur + len);
    return FCCL_OK;
}

static size_t format_i64(int64_t v, char out[24])
{
    char tmp[24];
    size_t n = 0;
    uint64_t u = v < 0 ? 0 - (uint64_t)v : (uint64_t)v;
    do {
        tmp[n++] = (char)('0' + u % 10);
        u /= 10;
    } while (u);
    size_t len = 0;
    if (v < 0)
        out[len++] = '-';
    while (n)
        out[len++] = tmp[--n];
    return len;
}

int kv_add(struct kv *kv, struct kv_entry *e, int64_t delta, int64_t *out)
{
    int64_t cur = 0;
    if (e->has_val && codec_parse_i64(e->val, e->vlen, &cur) < 0)
        return fccl_err(FCCL_ERR_PROTOCOL,
                        "ADD on key '%.*s' whose value is not an integer",
                        (int)(e->klen > 64 ? 64 : e->klen),
                        (const char *)e->key);
    /* Wraps like the int64 counters of two's-complement hosts, without UB. */
    int64_t sum = (int64_t)((uint64_t)cur + (uint64_t)delta);
    char txt[24];
    size_t n = format_i64(sum, txt);
    int rc = kv_set(kv, e, (const uint8_t *)txt, n);
    if (rc == FCCL_OK)
        *out = sum;
    return rc;
}

int kv_del_value(struct kv *kv, struct kv_entry *e)
{
    if (!e || !e->has_val)
        return 0;
    kv->bytes -= e->klen + e->vlen;
    kv->nkeys--;
    if (e->qlen == 0)
        kv->lost++;
    val_unshare(e, 0);
    e->has_val = 0;
    e->vlen = 0;
    free(e->val);
    e->val = NULL;
    e->vcap = 0;
    return 1;
}

/* ---- queues ---- */

int kv_queue_push(struct kv *kv, struct kv_entry *e, const uint8_t *v,
                  uint64_t len)
{
    if (over_limit(kv, 0, len))
        return limit_err(kv, e);
    struct kv_item *it = malloc(sizeof(*it) + len);
    if (!it)
        return fccl_err(FCCL_ERR_NOMEM, "queue item of %llu bytes",
                        (unsigned long long)len);
    it->next = NULL;
    it->len = len;
    if (len)
        memcpy(it->data, v, len);
    QUEUE_APPEND(e->qhead, e->qtail, it, next);
    e->qlen++;
    kv->bytes += len;
    return FCCL_OK;
}

struct kv_item *kv_queue_pop(struct kv *kv, struct kv_entry *e)
{
    struct kv_item *it = e ? e->qhead : NULL;
    if (!it)
        return NULL;
    e->qhead = it->next;
    if (!e->qhead)
        e->qtail = NULL;
    if (--e->qlen == 0 && !e->has_val)
        kv->lost++;
    kv->bytes -= it->len;
    it->next = NULL;
    return it;
}

void kv_item_free(struct kv_item *it) { free(it); }

/* ---- listing ---- */

/* Scan order: the old buckets not moved yet (while growing), then the
 * current ones; stable while no_grow holds migration still. */
uint64_t kv_scan(const struct kv *kv, uint64_t from, uint64_t nbuckets,
                 const uint8_t *prefix, uint64_t plen,
                 void (*fn)(void *arg, const struct kv_entry *e), void *arg)
{
    uint64_t nold = kv->old ? kv->old_mask + 1 - kv->moved : 0;
    uint64_t total = nold + kv->mask + 1;
    uint64_t end = from + nbuckets;
    if (end > total || end < from)
        end = total;
    for (uint64_t i = from; i < end; i++) {
        const struct kv_entry *e = i < nold ? kv->old[kv->moved + i]
                                            : kv->buckets[i - nold];
        for (; e; e = e->next) {
            if (!e->has_val || e->klen < plen ||
                (plen && memcmp(e->key, prefix, plen) != 0))
                continue;
            fn(arg, e);
        }
    }
    return end >= total ? UINT64_MAX : end;
}
