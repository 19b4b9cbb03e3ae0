/*
 * Grow: the members of a group take new processes in (NCCL's
 * ncclCommGrow).  A newcomer is a process that holds a world rank the
 * members left out in a shrink (a respawned rank, or a new machine given
 * that rank); the grown group keeps the members in their order and puts
 * the newcomers after them, in the order they reached the store.
 *
 * Everything meets through the store, which outlives any rank, under
 * "join/" (the job's newcomers are numbered 1, 2, ... by one counter, and
 * every member counts the entries its grows read, boot.joined, a failed
 * grow's too: a newcomer that came late for one is the next one's):
 *
 * 1. A newcomer (fccl_init with FCCL_REJOIN: boot_rejoin) takes number i
 *    by ADD on "join/n" and posts "join/e<i>": its world rank and its
 *    record (host id, endpoint names), as fccl_init publishes it.
 * 2. Members calling fccl_group_grow(g, nnew) read the next nnew entries
 *    (blocking GETs, woken by the server), check each world rank is one
 *    this member left out, and propose the admission: a fresh context id,
 *    the grown member list and every member's record.  COMPARE_SET on
 *    "join/d<first>" keeps the first proposal; every member adopts it and
 *    posts it as "join/a<i>" for each newcomer (the same bytes: any member
 *    that lives to write it lets the newcomers on).
 * 3. Each member takes the newcomers' world ranks back into its transport
 *    (tp_readmit: the new record replaces the old process's) and says so
 *    ("join/k<first>/<group rank>"); each newcomer, once it has the
 *    admission, opens its side (tp_set_local: the members' shm addresses,
 *    heartbeats) and says so ("join/u<i>").  Nobody sends a message before
 *    the other side can place it: a newcomer waits for every member's k,
 *    a member for every newcomer's u (shm matches a message from a sender
 *    it has not inserted against any receive with its tag).
 * 4. All run one barrier on the grown group, which returns it.
 *
 * No wait is unbounded: every one ends at the group's timeout (the
 * newcomer's: fccl_init's), and the waits for a key whose writer is known
 * (a member, a newcomer already admitted) also end as soon as that rank
 * is known to have failed, naming it.  A newcomer that never comes makes
 * the members' grow fail with FCCL_ERR_TIMEOUT naming its number.  On a
 * failure after step 3 a member leaves the newcomers out again, so its
 * old group goes on as before (shrink or grow it again).  The keys stay
 * on the store (a record per member per grow): a late reader may need
 * them.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "boot.h"
#include "clock.h"
#include "err.h"
#include "log.h"
#include "topology.h"
#include "tp.h"

#define GROW_MAGIC 0x57524746u /* "FGRW" */
#define GROW_SLICE_MS 20      /* a wait's slice before failures are checked */
#define GROW_REC_MAX 65536    /* a record in an entry, at most */

/* An admission, parsed: views into the stored value. */
struct admission {
    uint32_t ctx, n, nold, first;
    int64_t timeout_ms;
    const int32_t *world;    /* n world ranks, group rank order */
    const uint8_t **rec;     /* n records */
    uint32_t *rec_len;
};

static void free_admission(struct admission *a)
{
    free(a->rec);
    free(a->rec_len);
    memset(a, 0, sizeof(*a));
}

/* Parse v (len bytes); every length checked before it is used. */
static int parse_admission(const uint8_t *v, size_t len, struct admission *a)
{
    uint32_t h[5];
    memset(a, 0, sizeof(*a));
    if (len < 28)
        goto bad;
    memcpy(h, v, 20);
    if (h[0] != GROW_MAGIC)
        goto bad;
    a->ctx = h[1], a->n = h[2], a->nold = h[3], a->first = h[4];
    memcpy(&a->timeout_ms, v + 20, 8);
    if (a->n == 0 || a->n > (uint32_t)boot.size || a->nold >= a->n ||
        a->ctx == 0 || a->timeout_ms <= 0 ||
        28 + (size_t)a->n * 4 > len)
        goto bad;
    a->world = (const int32_t *)(const void *)(v + 28);
    a->rec = calloc(a->n, sizeof(*a->rec));
    a->rec_len = calloc(a->n, sizeof(*a->rec_len));
    if (!a->rec || !a->rec_len) {
        free_admission(a);
        return fccl_err(FCCL_ERR_NOMEM, "grow: out of memory");
    }
    size_t off = 28 + (size_t)a->n * 4;
    for (uint32_t i = 0; i < a->n; i++) {
        if (a->world[i] < 0 || a->world[i] >= boot.size || off + 4 > len)
            goto bad_free;
        memcpy(&a->rec_len[i], v + off, 4);
        if (a->rec_len[i] > GROW_REC_MAX || off + 4 + a->rec_len[i] > len)
            goto bad_free;
        a->rec[i] = v + off + 4;
        off += 4 + a->rec_len[i];
    }
    return FCCL_OK;
bad_free:
    free_admission(a);
bad:
    return fccl_err(FCCL_ERR_PROTOCOL, "grow: malformed admission (%zu B) "
                    "on the store; is another job using job id '%s'?", len,
                    boot.job);
}

/* The admission's bytes: header, ranks, records. */
static int encode_admission(const struct admission *a, uint8_t **out,
                            size_t *outlen)
{
    size_t len = 28 + (size_t)a->n * 4;
    for (uint32_t i = 0; i < a->n; i++)
        len += 4 + a->rec_len[i];
    uint8_t *v = malloc(len);
    if (!v)
        return fccl_err(FCCL_ERR_NOMEM, "grow: out of memory");
    uint32_t h[5] = {GROW_MAGIC, a->ctx, a->n, a->nold, a->first};
    memcpy(v, h, 20);
    memcpy(v + 20, &a->timeout_ms, 8);
    memcpy(v + 28, a->world, (size_t)a->n * 4);
    size_t off = 28 + (size_t)a->n * 4;
    for (uint32_t i = 0; i < a->n; i++) {
        memcpy(v + off, &a->rec_len[i], 4);
        memcpy(v + off + 4, a->rec[i], a->rec_len[i]);
        off += 4 + a->rec_len[i];
    }
    *out = v;
    *outlen = len;
    return FCCL_OK;
}

/* Wait for the n keys, GROW_SLICE_MS at a time; between slices fail as
 * soon as one of owners[] (world ranks; -1: unknown) is known dead. */
static int wait_keys(const char *const *keys, const int *owners, size_t n,
                     uint64_t deadline, const char *what)
{
    void **vals = calloc(n, sizeof(void *));
    size_t *lens = calloc(n, sizeof(size_t));
    int rc = vals && lens ? FCCL_ERR_TIMEOUT
                          : fccl_err(FCCL_ERR_NOMEM, "grow: out of memory");
    while (rc == FCCL_ERR_TIMEOUT) {
        for (size_t i = 0; i < n; i++)
            if (owners[i] >= 0 && tp_rank_failed(boot.tp, owners[i])) {
                rc = fccl_err(FCCL_ERR_PEER, "grow: rank %d failed before "
                              "%s (key %s)", owners[i], what, keys[i]);
                goto out;
            }
        int left = fccl_ms_left(deadline);
        if (left <= 0) {
            rc = fccl_err(FCCL_ERR_TIMEOUT, "grow: timed out waiting for "
                          "%s (key %s, %zu key(s))", what, keys[0], n);
            break;
        }
        rc = fccl_store_multi_get(boot.store, keys, n, vals, lens,
                                  left < GROW_SLICE_MS ? left : GROW_SLICE_MS);
    }
out:
    for (size_t i = 0; vals && i < n; i++)
        free(vals[i]);
    free(vals);
    free(lens);
    return rc;
}

/* ---- the record table: a newcomer's record replaces the old one ---- */

struct swap {
    int rank;
    void *rec;
    size_t len;
    int node;
};

/* Under the transport's locks (tp_readmit): no allocation can fail here.
 * The old record stays allocated until finalize (boot.retired). */
static void swap_record(void *arg)
{
    struct swap *s = arg;
    boot.retired[boot.nretired++] = boot.recs[s->rank];
    boot.recs[s->rank] = s->rec;
    boot.rec_lens[s->rank] = s->len;
    boot.node_of[s->rank] = s->node;
    s->rec = NULL;
}

/* The node of a host id: that of a rank with the same one, else new. */
static int node_of_host(const char *hostid, int skip)
{
    char other[HOSTID_MAX];
    for (int r = 0; r < boot.size; r++)
        if (r != skip && boot.recs[r] && boot.node_of[r] >= 0 &&
            boot_record_hostid(boot.recs[r], boot.rec_lens[r], other) >= 0 &&
            strcmp(other, hostid) == 0)
            return boot.node_of[r];
    return boot.nnodes++;
}

static int readmit(int rank, const void *rec, size_t len)
{
    char host[HOSTID_MAX];
    int rc = boot_record_hostid(rec, len, host);
    if (rc < 0)
        return rc;
    void **r = realloc(boot.retired, (boot.nretired + 1) * sizeof(void *));
    if (!r)
        return fccl_err(FCCL_ERR_NOMEM, "grow: out of memory");
    boot.retired = r;
    struct swap s = {.rank = rank, .rec = malloc(len ? len : 1), .len = len,
                     .node = node_of_host(host, rank)};
    if (!s.rec)
        return fccl_err(FCCL_ERR_NOMEM, "grow: out of memory");
    memcpy(s.rec, rec, len);
    rc = tp_readmit(boot.tp, rank, swap_record, &s);
    free(s.rec); /* NULL once swapped */
    return rc;
}

/* ---- the members' side ---- */

static int cmp_int(const void *a, const void *b)
{
    int x = *(const int *)a, y = *(const int *)b;
    return (x > y) - (x < y);
}

struct grow {
    struct fccl_group *g;
    int nnew;
    uint32_t first;
    int32_t *world;       /* g's members, then the newcomers */
    uint8_t **rec;        /* the newcomers' records (entries), owned */
    uint32_t *rec_len;
    int nread;            /* entries read so far */
    int readmitted;       /* newcomers tried taking back in so far */
};

static int in_list(const int32_t *l, int n, int x)
{
    for (int i = 0; i < n; i++)
        if (l[i] == x)
            return 1;
    return 0;
}

/* Newcomer k's entry: "<rank>" as 4 bytes, then its record. */
static int read_entry(struct grow *s, int k, uint64_t deadline)
{
    char key[48];
    void *v = NULL;
    size_t len = 0;
    uint32_t num = s->first + (uint32_t)k;
    snprintf(key, sizeof(key), "join/e%u", num);
    int left = fccl_ms_left(deadline);
    int rc = fccl_store_get(boot.store, key, &v, &len, left > 0 ? left : 1);
    if (rc == FCCL_ERR_TIMEOUT)
        return fccl_err(rc, "grow: newcomer %d of %d (number %u) did not "
                        "come within %lld ms", k + 1, s->nnew, num,
                        (long long)s->g->timeout_ms);
    if (rc < 0)
        return rc;
    int32_t w = -1;
    int old = s->g->size;
    if (len >= 4)
        memcpy(&w, v, 4);
    if (len < 4 || len - 4 > GROW_REC_MAX)
        rc = fccl_err(FCCL_ERR_PROTOCOL, "grow: malformed entry %s", key);
    else if (w < 0 || w >= boot.size || in_list(s->world, old + k, w) ||
             !tp_rank_excluded(boot.tp, w))
        rc = fccl_err(FCCL_ERR_INVALID, "grow: newcomer %u claims world "
                      "rank %d, which is not a rank this member left out "
                      "in a shrink (or is taken twice)", num, (int)w);
    if (rc >= 0) {
        s->world[old + k] = w;
        s->rec_len[k] = (uint32_t)(len - 4);
        s->rec[k] = malloc(len);
        if (!s->rec[k])
            rc = fccl_err(FCCL_ERR_NOMEM, "grow: out of memory");
        else
            memcpy(s->rec[k], (uint8_t *)v + 4, len - 4);
    }
    free(v);
    return rc;
}

/* Propose (fresh ctx), adopt the stored admission into *val. */
static int agree(struct grow *s, uint8_t **val, size_t *vlen)
{
    int n = s->g->size + s->nnew;
    struct admission a = {.n = (uint32_t)n, .nold = (uint32_t)s->g->size,
                          .first = s->first, .timeout_ms = s->g->timeout_ms,
                          .world = s->world};
    a.rec = calloc((size_t)n, sizeof(*a.rec));
    a.rec_len = calloc((size_t)n, sizeof(*a.rec_len));
    int rc = a.rec && a.rec_len ? boot_ctx_reserve(1, &a.ctx)
                                : fccl_err(FCCL_ERR_NOMEM, "grow: no memory");
    for (int i = 0; rc >= 0 && i < n; i++) {
        int old = i < s->g->size;
        a.rec[i] = old ? boot.recs[s->world[i]] : s->rec[i - s->g->size];
        a.rec_len[i] = old ? (uint32_t)boot.rec_lens[s->world[i]]
                           : s->rec_len[i - s->g->size];
        if (!a.rec[i])
            rc = fccl_err(FCCL_ERR_STATE, "grow: no record of member %d "
                          "(world rank %d) here", i, (int)s->world[i]);
    }
    uint8_t *mine = NULL;
    size_t mlen = 0;
    if (rc >= 0)
        rc = encode_admission(&a, &mine, &mlen);
    free(a.rec);
    free(a.rec_len);
    char key[48];
    snprintf(key, sizeof(key), "join/d%u", s->first);
    void *cur = NULL;
    size_t clen = 0;
    if (rc >= 0)
        rc = fccl_store_compare_set(boot.store, key, "", 0, mine, mlen, &cur,
                                    &clen);
    free(mine);
    if (rc >= 0) {
        *val = cur;
        *vlen = clen;
    } else {
        free(cur);
    }
    return rc;
}

/* The adopted admission must list what this member read. */
static int check_same(const struct grow *s, const struct admission *a)
{
    int n = s->g->size + s->nnew;
    if ((int)a->n != n || (int)a->nold != s->g->size ||
        memcmp(a->world, s->world, (size_t)n * 4) != 0)
        return fccl_err(FCCL_ERR_PROTOCOL, "grow: the members disagree on "
                        "the grown group (another member grew a different "
                        "group, or with another count, at the same time)");
    return FCCL_OK;
}

static int post_admission(const struct grow *s, const uint8_t *v,
                          size_t len)
{
    int rc = FCCL_OK;
    char key[48];
    for (int k = 0; rc >= 0 && k < s->nnew; k++) {
        snprintf(key, sizeof(key), "join/a%u", s->first + (uint32_t)k);
        rc = fccl_store_set(boot.store, key, v, len);
    }
    return rc;
}

/* Readmit the newcomers, say so, wait for theirs. */
static int open_to(struct grow *s, uint64_t deadline)
{
    int rc = FCCL_OK, old = s->g->size;
    for (int k = 0; rc >= 0 && k < s->nnew; k++) {
        rc = readmit(s->world[old + k], s->rec[k], s->rec_len[k]);
        s->readmitted++; /* even failed: it may be counted in already */
    }
    char key[64], (*keys)[48] = calloc((size_t)s->nnew, 48);
    const char **kp = calloc((size_t)s->nnew, sizeof(char *));
    int *owners = calloc((size_t)s->nnew, sizeof(int));
    if (rc >= 0 && (!keys || !kp || !owners))
        rc = fccl_err(FCCL_ERR_NOMEM, "grow: out of memory");
    snprintf(key, sizeof(key), "join/k%u/%d", s->first, s->g->rank);
    if (rc >= 0)
        rc = fccl_store_set(boot.store, key, "1", 1);
    for (int k = 0; rc >= 0 && k < s->nnew; k++) {
        snprintf(keys[k], 48, "join/u%u", s->first + (uint32_t)k);
        kp[k] = keys[k];
        owners[k] = s->world[old + k];
    }
    if (rc >= 0)
        rc = wait_keys(kp, owners, (size_t)s->nnew, deadline,
                       "the newcomers to open their side");
    free(keys);
    free(kp);
    free(owners);
    return rc;
}

static int make_grown(const int32_t *world, int n, uint32_t ctx,
                      int64_t timeout_ms, int registered,
                      struct fccl_group **out)
{
    int *sorted = malloc((size_t)n * sizeof(int)), *order = malloc(
                                                        (size_t)n * sizeof(int));
    int rc = sorted && order ? FCCL_OK
                             : fccl_err(FCCL_ERR_NOMEM, "grow: out of memory");
    for (int i = 0; rc >= 0 && i < n; i++)
        sorted[i] = order[i] = world[i];
    char name[FCCL_GROUP_NAME_MAX];
    if (rc >= 0) {
        qsort(sorted, (size_t)n, sizeof(int), cmp_int);
        rc = boot_name_of_sorted(sorted, (size_t)n, name, sizeof(name));
    }
    if (rc >= 0 && registered) {
        rc = boot_make_group(order, n, name, 0, ctx, out);
    } else if (rc >= 0) { /* a newcomer's world: not a user group */
        struct fccl_group *g = boot_group_alloc(n);
        rc = g ? FCCL_OK : fccl_err(FCCL_ERR_NOMEM, "grow: out of memory");
        if (rc >= 0) {
            memcpy(g->world, order, (size_t)n * sizeof(int));
            for (int i = 0; i < n; i++)
                if (order[i] == boot.rank)
                    g->rank = i;
            snprintf(g->name, sizeof(g->name), "%s", name);
            g->ctx = ctx;
            if ((rc = boot_group_finish(g)) >= 0)
                *out = g;
        }
    }
    if (rc >= 0)
        fccl_group_set_timeout(*out, timeout_ms);
    free(sorted);
    free(order);
    return rc;
}

static int grow(struct grow *s, fccl_group_t **out)
{
    uint64_t deadline = fccl_deadline_ms(s->g->timeout_ms);
    uint8_t *val = NULL;
    size_t vlen = 0;
    struct admission a = {0};
    int rc = FCCL_OK;
    for (int k = 0; rc >= 0 && k < s->nnew; k++)
        if ((rc = read_entry(s, k, deadline)) >= 0)
            s->nread++;
    if (rc >= 0)
        rc = agree(s, &val, &vlen);
    if (rc >= 0)
        rc = parse_admission(val, vlen, &a);
    if (rc >= 0 && (rc = check_same(s, &a)) >= 0)
        rc = post_admission(s, val, vlen);
    if (rc >= 0)
        rc = open_to(s, deadline);
    if (rc >= 0)
        rc = make_grown(s->world, (int)a.n, a.ctx, s->g->timeout_ms, 1, out);
    if (rc >= 0 && (rc = fccl_barrier(*out, NULL)) < 0) {
        rc = fccl_err_wrap(rc, "grow: first barrier of the grown group");
        fccl_group_destroy(*out);
        *out = NULL;
    }
    free_admission(&a);
    free(val);
    return rc;
}

int fccl_group_grow(fccl_group_t *g, int nnew, fccl_group_t **out)
{
    if (!boot.initialized)
        return fccl_err(FCCL_ERR_STATE, "grow: fccl_init has not run");
    if (!g || !out)
        return fccl_err(FCCL_ERR_INVALID, "grow: NULL group or out");
    *out = NULL;
    if (nnew < 1 || nnew > boot.size - g->size)
        return fccl_err(FCCL_ERR_INVALID, "grow: %d newcomers for a group "
                        "of %d in a world of %d (1..%d)", nnew, g->size,
                        boot.size, boot.size - g->size);
    uint64_t t0 = fccl_now_ns();
    struct grow s = {.g = g, .nnew = nnew, .first = (uint32_t)boot.joined + 1};
    s.world = calloc((size_t)(g->size + nnew), sizeof(int32_t));
    s.rec = calloc((size_t)nnew, sizeof(*s.rec));
    s.rec_len = calloc((size_t)nnew, sizeof(*s.rec_len));
    int rc = s.world && s.rec && s.rec_len
                 ? FCCL_OK : fccl_err(FCCL_ERR_NOMEM, "grow: out of memory");
    for (int i = 0; rc >= 0 && i < g->size; i++)
        s.world[i] = g->world[i];
    if (rc >= 0)
        rc = grow(&s, out);
    /* g goes on without the newcomers, as before */
    for (int k = 0; rc < 0 && k < s.readmitted; k++)
        tp_exclude(boot.tp, &s.world[g->size + k], 1);
    /* An entry read is used up, also by a failed grow (its newcomer's
     * fccl_init fails with it): the next grow reads the ones after. */
    boot.joined += (uint32_t)s.nread;
    boot.regrown |= rc >= 0;
    for (int k = 0; s.rec && k < nnew; k++)
        free(s.rec[k]);
    free(s.rec);
    free(s.rec_len);
    free(s.world);
    if (rc < 0)
        return fccl_err_wrap(rc, "grow of group %s (rank %d) by %d",
                             g->name, g->rank, nnew);
    LOG_INFO("BOOT", "grow of %s: %s, %d ranks (%d new), ctx %u, %.2f ms",
             g->name, (*out)->name, (*out)->size, nnew, (*out)->ctx,
             (double)(fccl_now_ns() - t0) / 1e6);
    return FCCL_OK;
}

/* ---- the newcomer's side (fccl_init with FCCL_REJOIN) ---- */

/* Post my entry; wait for the admission (*val, parsed into *a). */
static int knock(const void *rec, size_t reclen, uint32_t *num,
                 uint8_t **val, struct admission *a)
{
    int64_t v = 0;
    int rc = fccl_store_add(boot.store, "join/n", 1, &v);
    if (rc < 0)
        return rc;
    *num = (uint32_t)v;
    uint8_t *e = malloc(reclen + 4);
    if (!e)
        return fccl_err(FCCL_ERR_NOMEM, "rejoin: out of memory");
    int32_t me = boot.rank;
    memcpy(e, &me, 4);
    memcpy(e + 4, rec, reclen);
    char key[48];
    snprintf(key, sizeof(key), "join/e%u", *num);
    rc = fccl_store_set(boot.store, key, e, reclen + 4);
    free(e);
    snprintf(key, sizeof(key), "join/a%u", *num);
    size_t len = 0;
    void *got = NULL;
    int left = fccl_ms_left(boot.deadline);
    if (rc >= 0)
        rc = fccl_store_get(boot.store, key, &got, &len, left > 0 ? left : 1);
    *val = got;
    if (rc == FCCL_ERR_TIMEOUT)
        return fccl_err(rc, "rejoin: rank %d (newcomer %u) was not taken in "
                        "within %lld ms: no member called fccl_group_grow "
                        "for it", boot.rank, *num, (long long)boot.timeout_ms);
    return rc < 0 ? rc : parse_admission(*val, len, a);
}

/* The records and hosts of the admission's members; the others have
 * none (node -1) and are left out of this transport's failure model. */
static int take_records(const struct admission *a, int *mine)
{
    const char **hp = calloc(a->n, sizeof(char *));
    char (*host)[HOSTID_MAX] = calloc(a->n, HOSTID_MAX);
    int *nodes = calloc(a->n, sizeof(int));
    int rc = hp && host && nodes ? FCCL_OK
                                 : fccl_err(FCCL_ERR_NOMEM, "rejoin: no memory");
    *mine = -1;
    for (uint32_t i = 0; rc >= 0 && i < a->n; i++) {
        int w = a->world[i];
        if (w == boot.rank)
            *mine = (int)i;
        if ((rc = boot_record_hostid(a->rec[i], a->rec_len[i], host[i])) < 0)
            break;
        hp[i] = host[i];
        if (!boot.recs[w] && !(boot.recs[w] = malloc(a->rec_len[i] + 1)))
            rc = fccl_err(FCCL_ERR_NOMEM, "rejoin: out of memory");
        else if (w != boot.rank)
            memcpy(boot.recs[w], a->rec[i], a->rec_len[i]);
        if (w != boot.rank)
            boot.rec_lens[w] = a->rec_len[i];
    }
    if (rc >= 0 && *mine < 0)
        rc = fccl_err(FCCL_ERR_PROTOCOL, "rejoin: the admission does not "
                      "list this rank (%d)", boot.rank);
    if (rc >= 0)
        rc = topo_assign_nodes(hp, (int)a->n, nodes, &boot.nnodes);
    for (int r = 0; rc >= 0 && r < boot.size; r++)
        boot.node_of[r] = -1;
    for (uint32_t i = 0; rc >= 0 && i < a->n; i++)
        boot.node_of[a->world[i]] = nodes[i];
    if (rc >= 0)
        tp_set_machine(boot.tp, topo_machine_size(hp, (int)a->n, *mine));
    free(hp);
    free(host);
    free(nodes);
    return rc;
}

/* Tell the transport who is here and who is not. */
static int open_side(void)
{
    int *local = malloc(sizeof(int) * (size_t)boot.size), k = 0, x = 0;
    int *absent = malloc(sizeof(int) * (size_t)boot.size);
    if (!local || !absent) {
        free(local);
        free(absent);
        return fccl_err(FCCL_ERR_NOMEM, "rejoin: out of memory");
    }
    for (int r = 0; r < boot.size; r++) {
        if (boot.node_of[r] < 0)
            absent[x++] = r;
        else if (boot.node_of[r] == boot.node_of[boot.rank])
            local[k++] = r;
    }
    topo_local(boot.node_of, boot.size, boot.rank, &boot.local_rank,
               &boot.local_size);
    tp_set_local(boot.tp, local, k);
    tp_exclude(boot.tp, absent, (size_t)x);
    free(local);
    free(absent);
    return FCCL_OK;
}

/* Say my side is open; wait for every old member's. */
static int meet(const struct admission *a, uint32_t num)
{
    char key[48];
    snprintf(key, sizeof(key), "join/u%u", num);
    int rc = fccl_store_set(boot.store, key, "1", 1);
    char (*keys)[48] = calloc(a->nold, 48);
    const char **kp = calloc(a->nold, sizeof(char *));
    int *owners = calloc(a->nold, sizeof(int));
    if (rc >= 0 && (!keys || !kp || !owners))
        rc = fccl_err(FCCL_ERR_NOMEM, "rejoin: out of memory");
    for (uint32_t i = 0; rc >= 0 && i < a->nold; i++) {
        snprintf(keys[i], 48, "join/k%u/%u", a->first, i);
        kp[i] = keys[i];
        owners[i] = a->world[i];
    }
    if (rc >= 0)
        rc = wait_keys(kp, owners, a->nold, boot.deadline,
                       "the members to take this rank in");
    free(keys);
    free(kp);
    free(owners);
    return rc;
}

int boot_rejoin(const void *rec, size_t reclen)
{
    struct admission a = {0};
    uint8_t *val = NULL;
    uint32_t num = 0;
    int mine = -1;
    int rc = boot_keep_own_record(rec, reclen);
    boot.node_of = calloc((size_t)boot.size, sizeof(int));
    if (rc >= 0 && !boot.node_of)
        rc = fccl_err(FCCL_ERR_NOMEM, "rejoin: out of memory");
    if (rc >= 0)
        rc = tp_set_peers(boot.tp, boot.size, boot.rank, 0,
                          boot_record_lookup, NULL);
    if (rc >= 0)
        rc = knock(rec, reclen, &num, &val, &a);
    if (rc >= 0)
        rc = take_records(&a, &mine);
    if (rc >= 0)
        rc = open_side();
    if (rc >= 0)
        rc = meet(&a, num);
    if (rc >= 0)
        rc = make_grown(a.world, (int)a.n, a.ctx, a.timeout_ms, 0,
                        &boot.world);
    if (rc >= 0) {
        boot.joined = a.first + (a.n - a.nold) - 1;
        boot.regrown = 1;
        LOG_INFO("BOOT", "rank %d rejoined as newcomer %u: group %s, rank "
                 "%d of %u", boot.rank, num, boot.world->name, mine, a.n);
    }
    free_admission(&a);
    free(val);
    return rc < 0 ? fccl_err_wrap(rc, "rejoin of rank %d", boot.rank) : rc;
}
