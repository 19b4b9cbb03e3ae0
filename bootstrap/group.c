/*
 * Groups: hashed names, membership, rank translation, split, and context
 * ids.  A group's name depends only on its member set (so every member
 * computes it alone); its context id is fresh for every creation, so
 * messages of a destroyed group, or of another group with overlapping
 * members, can never match.
 *
 * Context ids come from one store counter ("ctx") shared by the job:
 * fccl_group_new costs the lowest member an ADD, a SET and a DELETE,
 * every other member a GET: O(1) store operations per rank, each
 * safe to repeat, so a store restarted with its journal (and clients
 * with FCCL_STORE_RECONNECT) does not fail the creation.  The members'
 * first barrier on the new group tells the lowest one that everybody has
 * read the published id.
 */
#include <openssl/evp.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "boot.h"
#include "err.h"
#include "log.h"

#define CTX_LIMIT (1u << 20) /* tag bits reserved for the context id */

struct name_count {
    struct name_count *next;
    char name[FCCL_GROUP_NAME_MAX];
    int n;
};

struct fccl_group *boot_group_alloc(int size)
{
    struct fccl_group *g = calloc(1, sizeof(*g));
    if (!g)
        return NULL;
    g->size = size;
    g->world = calloc((size_t)size, sizeof(int));
    g->node_of = calloc((size_t)size, sizeof(int));
    if (!g->world || !g->node_of) {
        boot_group_free(g);
        return NULL;
    }
    return g;
}

void boot_group_free(struct fccl_group *g)
{
    if (!g)
        return;
    free(g->world);
    free(g->node_of);
    free(g);
}

/* Number the group's hosts densely in order of first appearance. */
static void group_topology(struct fccl_group *g)
{
    int *seen = calloc((size_t)boot.nnodes + 1, sizeof(int));
    int count = 0;
    for (int r = 0; r < g->size; r++) {
        int wn = boot.node_of[g->world[r]];
        if (seen && seen[wn] == 0)
            seen[wn] = ++count;
        g->node_of[r] = seen ? seen[wn] - 1 : 0;
    }
    g->nnodes = seen ? count : 1;
    free(seen);
}

int boot_group_finish(struct fccl_group *g)
{
    g->tp = boot.tp;
    g->world_rank = boot.rank;
    g->timeout_ms = boot.timeout_ms;
    group_topology(g);
    int rc = coll_group_init(g);
    if (rc < 0)
        boot_group_free(g);
    return rc;
}

static int register_group(struct fccl_group *g)
{
    if (boot.ngroups == boot.cap_groups) {
        size_t cap = boot.cap_groups ? boot.cap_groups * 2 : 8;
        void *p = realloc(boot.groups, cap * sizeof(*boot.groups));
        if (!p)
            return fccl_err(FCCL_ERR_NOMEM, "group: out of memory");
        boot.groups = p;
        boot.cap_groups = cap;
    }
    boot.groups[boot.ngroups++] = g;
    return FCCL_OK;
}

static int unregister_group(struct fccl_group *g)
{
    for (size_t i = 0; i < boot.ngroups; i++) {
        if (boot.groups[i] != g)
            continue;
        boot.groups[i] = boot.groups[--boot.ngroups];
        return FCCL_OK;
    }
    return FCCL_ERR_NOTFOUND;
}

void boot_groups_destroy_all(void)
{
    while (boot.ngroups > 0) {
        struct fccl_group *g = boot.groups[--boot.ngroups];
        coll_group_fini(g);
        boot_group_free(g);
    }
    free(boot.groups);
    boot.groups = NULL;
    boot.cap_groups = 0;
    while (boot.counts) {
        struct name_count *next = boot.counts->next;
        free(boot.counts);
        boot.counts = next;
    }
}

/* ---- names ---- */

static int cmp_int(const void *a, const void *b)
{
    int x = *(const int *)a, y = *(const int *)b;
    return (x > y) - (x < y);
}

/* Sorted copy of ranks, refusing empty lists, negatives, out-of-range
 * (when initialized) and duplicates. */
static int sorted_members(const int *ranks, size_t n, int **out)
{
    if (!ranks || n == 0)
        return fccl_err(FCCL_ERR_INVALID, "group: rank list is empty");
    if (boot.initialized && n > (size_t)boot.size)
        return fccl_err(FCCL_ERR_INVALID,
                        "group: %zu ranks but the world has %d", n, boot.size);
    int *s = malloc(n * sizeof(int));
    if (!s)
        return fccl_err(FCCL_ERR_NOMEM, "group: out of memory");
    memcpy(s, ranks, n * sizeof(int));
    qsort(s, n, sizeof(int), cmp_int);
    for (size_t i = 0; i < n; i++) {
        int bad = s[i] < 0 || (boot.initialized && s[i] >= boot.size);
        if (bad || (i > 0 && s[i] == s[i - 1])) {
            int v = s[i];
            free(s);
            if (bad)
                return fccl_err(FCCL_ERR_INVALID,
                                "group: rank %d out of range [0, %d)", v,
                                boot.initialized ? boot.size : 0);
            return fccl_err(FCCL_ERR_INVALID, "group: rank %d listed twice",
                            v);
        }
    }
    *out = s;
    return FCCL_OK;
}

/* fccl_<count>_<sha1 of "r0_r1_..."> of sorted ranks. */
static int name_of_sorted(const int *s, size_t n, char *out, size_t outlen)
{
    unsigned char md[EVP_MAX_MD_SIZE];
    unsigned int mdlen = 0;
    EVP_MD_CTX *ctx = EVP_MD_CTX_new();
    int ok = ctx && EVP_DigestInit_ex(ctx, EVP_sha1(), NULL);
    for (size_t i = 0; ok && i < n; i++) {
        char buf[16];
        int len = snprintf(buf, sizeof(buf), i ? "_%d" : "%d", s[i]);
        ok = EVP_DigestUpdate(ctx, buf, (size_t)len);
    }
    ok = ok && EVP_DigestFinal_ex(ctx, md, &mdlen);
    EVP_MD_CTX_free(ctx);
    if (!ok)
        return fccl_err(FCCL_ERR_NOMEM, "group: SHA-1 failed");
    char hex[2 * EVP_MAX_MD_SIZE + 1];
    for (unsigned int i = 0; i < mdlen; i++)
        snprintf(hex + 2 * i, 3, "%02x", md[i]);
    int w = snprintf(out, outlen, "fccl_%zu_%s", n, hex);
    if (w < 0 || (size_t)w >= outlen)
        return fccl_err(FCCL_ERR_INVALID, "group: name buffer too small "
                                          "(need %d bytes)", w + 1);
    return FCCL_OK;
}

int fccl_group_name_for(const int *ranks, size_t n, char *out, size_t outlen)
{
    if (!out)
        return fccl_err(FCCL_ERR_INVALID, "group: output buffer is NULL");
    int *s, rc = sorted_members(ranks, n, &s);
    if (rc < 0)
        return rc;
    rc = name_of_sorted(s, n, out, outlen);
    free(s);
    return rc;
}

/* ---- context ids ---- */

static int next_creation(const char *name)
{
    struct name_count *c;
    for (c = boot.counts; c; c = c->next)
        if (strcmp(c->name, name) == 0)
            return c->n++;
    c = calloc(1, sizeof(*c));
    if (!c)
        return fccl_err(FCCL_ERR_NOMEM, "group: out of memory");
    snprintf(c->name, sizeof(c->name), "%s", name);
    c->n = 1;
    c->next = boot.counts;
    boot.counts = c;
    return 0;
}

static int parse_ctx(const char *v, uint32_t *ctx)
{
    char *end;
    unsigned long x = strtoul(v, &end, 10);
    if (*end != '\0' || end == v || x == 0 || x >= CTX_LIMIT)
        return fccl_err(FCCL_ERR_PROTOCOL, "group: bad context id '%s'", v);
    *ctx = (uint32_t)x;
    return FCCL_OK;
}

/* Reserve `count` fresh ids; returns the first. */
static int ctx_reserve(int64_t count, uint32_t *first)
{
    int64_t v;
    int rc = fccl_store_add(boot.store, "ctx", count, &v);
    /* Reserving again after a lost reply only skips ids: harmless. */
    for (int i = 0; i < 3 && (rc == FCCL_ERR_CLOSED || rc == FCCL_ERR_IO); i++)
        rc = fccl_store_add(boot.store, "ctx", count, &v);
    if (rc < 0)
        return fccl_err_wrap(rc, "group: allocating a context id");
    if (v - count + 1 < 1 || v >= (int64_t)CTX_LIMIT)
        return fccl_err(FCCL_ERR_LIMIT, "group: context ids exhausted (%lld)",
                        (long long)v);
    *first = (uint32_t)(v - count + 1);
    return FCCL_OK;
}

static void ctx_key(const char *name, int n, char *key, size_t len)
{
    snprintf(key, len, "grp/%s/%d", name, n);
}

/* The lowest member reserves an id and publishes it under grp/<name>/<n>
 * (n: this name's creations so far); the others read it.  Every request
 * is safe to repeat after a store restart (a repeated reservation only
 * skips an id), so a reconnecting handle rides one out.  The key is
 * removed by release_ctx_key once everyone has read it. */
static int agree_ctx(const char *name, int n, int leader, int size,
                     uint32_t *ctx)
{
    char key[160], val[24];
    ctx_key(name, n, key, sizeof(key));
    int rc;
    if (size == 1) {
        rc = ctx_reserve(1, ctx);
    } else if (leader) {
        if ((rc = ctx_reserve(1, ctx)) < 0)
            return rc;
        int len = snprintf(val, sizeof(val), "%u", *ctx);
        /* confirmed (SYNC), and repeated whole after a lost connection */
        rc = fccl_store_set(boot.store, key, val, (size_t)len);
    } else {
        void *v = NULL;
        size_t vl;
        rc = fccl_store_get(boot.store, key, &v, &vl, boot.timeout_ms);
        if (rc >= 0)
            rc = parse_ctx(v, ctx);
        free(v);
    }
    if (rc < 0)
        return fccl_err_wrap(rc, "group %s: agreeing on a context id", name);
    return FCCL_OK;
}

/* Once the new group's first barrier is through every member has read the
 * key, so the lowest one deletes it (DELETE repeats harmlessly across a
 * restart; no acknowledgement counter, whose ADD could not be repeated).
 * On a failed barrier the key goes too: nobody can use the group. */
static int release_ctx_key(struct fccl_group *g, const char *name, int n)
{
    if (g->size == 1)
        return FCCL_OK;
    int rc = fccl_barrier(g, NULL);
    if (g->rank == 0) {
        char key[160];
        ctx_key(name, n, key, sizeof(key));
        if (fccl_store_delete(boot.store, key, NULL) < 0)
            LOG_WARN("BOOT", "group %s: could not delete %s: %s", name, key,
                     fccl_last_error());
    }
    if (rc < 0)
        return fccl_err_wrap(rc, "group %s: first barrier of its members",
                             name);
    return FCCL_OK;
}

static int make_group(const int *world_order, int size, const char *name,
                      uint32_t ctx, struct fccl_group **out)
{
    struct fccl_group *g = boot_group_alloc(size);
    if (!g)
        return fccl_err(FCCL_ERR_NOMEM, "group: out of memory");
    memcpy(g->world, world_order, (size_t)size * sizeof(int));
    g->rank = group_rank_of_world(g, boot.rank);
    snprintf(g->name, sizeof(g->name), "%s", name);
    g->ctx = ctx;
    int rc = boot_group_finish(g);
    if (rc < 0)
        return rc;
    if ((rc = register_group(g)) < 0) {
        coll_group_fini(g);
        boot_group_free(g);
        return rc;
    }
    LOG_DEBUG("BOOT", "group %s: rank %d of %d, ctx %u", name, g->rank, size,
              ctx);
    *out = g;
    return FCCL_OK;
}

int fccl_group_new(const int *ranks, size_t n, fccl_group_t **out)
{
    if (!boot.initialized)
        return fccl_err(FCCL_ERR_STATE, "group: fccl_init has not run");
    if (!out)
        return fccl_err(FCCL_ERR_INVALID, "group: out is NULL");
    *out = NULL;
    int *s, rc = sorted_members(ranks, n, &s);
    if (rc < 0)
        return rc;
    char name[FCCL_GROUP_NAME_MAX];
    int me = -1;
    for (size_t i = 0; i < n; i++)
        if (s[i] == boot.rank)
            me = (int)i;
    CHECK_GOTO(name_of_sorted(s, n, name, sizeof(name)), rc, out);
    if (me < 0) {
        rc = fccl_err(FCCL_ERR_INVALID,
                      "group %s: rank %d is not a member (only members call "
                      "fccl_group_new)",
                      name, boot.rank);
        goto out;
    }
    int creation = next_creation(name);
    if (creation < 0) {
        rc = creation;
        goto out;
    }
    uint32_t ctx;
    CHECK_GOTO(agree_ctx(name, creation, me == 0, (int)n, &ctx), rc, out);
    CHECK_GOTO(make_group(s, (int)n, name, ctx, out), rc, out);
    if ((rc = release_ctx_key(*out, name, creation)) < 0) {
        char msg[1024];
        snprintf(msg, sizeof(msg), "%s", fccl_last_error());
        fccl_group_destroy(*out);
        *out = NULL;
        rc = fccl_err(rc, "%s", msg);
    }
out:
    free(s);
    return rc;
}

/* ---- split ---- */

struct split_entry {
    int64_t color, key, prank;
};

static int cmp_split(const void *a, const void *b)
{
    const struct split_entry *x = a, *y = b;
    if (x->color != y->color)
        return (x->color > y->color) - (x->color < y->color);
    if (x->key != y->key)
        return (x->key > y->key) - (x->key < y->key);
    return (x->prank > y->prank) - (x->prank < y->prank);
}

/* Members of my color in (key, parent rank) order, as world ranks. */
static int split_members(const struct fccl_group *parent,
                         struct split_entry *all, int color, int *members,
                         int *count, int *color_index, int *ncolors)
{
    int p = parent->size;
    qsort(all, (size_t)p, sizeof(*all), cmp_split);
    *count = 0;
    *ncolors = 0;
    *color_index = -1;
    for (int i = 0; i < p; i++) {
        if (all[i].color < 0)
            continue;
        if (i == 0 || all[i].color != all[i - 1].color || all[i - 1].color < 0)
            (*ncolors)++;
        if (all[i].color == color) {
            *color_index = *ncolors - 1;
            members[(*count)++] = parent->world[all[i].prank];
        }
    }
    return FCCL_OK;
}

int fccl_group_split(fccl_group_t *parent, int color, int key,
                     fccl_group_t **out)
{
    if (!boot.initialized)
        return fccl_err(FCCL_ERR_STATE, "split: fccl_init has not run");
    if (!parent || !out)
        return fccl_err(FCCL_ERR_INVALID, "split: NULL parent or out");
    *out = NULL;
    int p = parent->size, rc;
    struct split_entry mine = {color < 0 ? -1 : color, key, parent->rank};
    struct split_entry *all = calloc((size_t)p, sizeof(*all));
    int *members = calloc((size_t)p, sizeof(int)), *sorted = NULL;
    if (!all || !members) {
        rc = fccl_err(FCCL_ERR_NOMEM, "split: out of memory");
        goto out;
    }
    CHECK_GOTO(fccl_all_gather(&mine, all, 3, FCCL_INT64, parent, NULL), rc,
               out);
    int count, cindex, ncolors;
    split_members(parent, all, mine.color, members, &count, &cindex, &ncolors);
    /* Parent rank 0 reserves one id per color; everyone learns the base. */
    int64_t base = 0;
    if (parent->rank == 0 && ncolors > 0) {
        uint32_t first = 0;
        rc = ctx_reserve(ncolors, &first);
        base = rc < 0 ? -1 : (int64_t)first;
    }
    CHECK_GOTO(fccl_broadcast(&base, 1, FCCL_INT64, 0, parent, NULL), rc, out);
    if (base < 0) {
        rc = fccl_err(FCCL_ERR_LIMIT, "split: parent rank 0 could not "
                                      "allocate context ids");
        goto out;
    }
    if (mine.color < 0)
        goto out;
    char name[FCCL_GROUP_NAME_MAX];
    sorted = malloc((size_t)count * sizeof(int));
    if (!sorted) {
        rc = fccl_err(FCCL_ERR_NOMEM, "split: out of memory");
        goto out;
    }
    memcpy(sorted, members, (size_t)count * sizeof(int));
    qsort(sorted, (size_t)count, sizeof(int), cmp_int);
    CHECK_GOTO(name_of_sorted(sorted, (size_t)count, name, sizeof(name)), rc,
               out);
    rc = make_group(members, count, name, (uint32_t)(base + cindex), out);
out:
    free(all);
    free(members);
    free(sorted);
    return rc;
}

/* ---- lifetime and queries ---- */

int fccl_group_abort(fccl_group_t *g)
{
    if (!g)
        return fccl_err(FCCL_ERR_INVALID, "abort: group is NULL");
    atomic_store(&g->aborted, 1);
    return FCCL_OK;
}

int fccl_group_destroy(fccl_group_t *g)
{
    if (!g)
        return FCCL_OK;
    if (g == boot.world)
        return fccl_err(FCCL_ERR_INVALID, "group: the world group is freed by "
                                          "fccl_finalize, not destroyed");
    if (unregister_group(g) < 0)
        return fccl_err(FCCL_ERR_INVALID, "group: unknown or already destroyed");
    coll_group_fini(g);
    boot_group_free(g);
    return FCCL_OK;
}

const char *fccl_group_name(const fccl_group_t *g) { return g ? g->name : ""; }
int fccl_group_rank(const fccl_group_t *g) { return g ? g->rank : -1; }
int fccl_group_size(const fccl_group_t *g) { return g ? g->size : -1; }

int fccl_group_to_world(const fccl_group_t *g, int group_rank, int *world)
{
    if (!g || !world)
        return fccl_err(FCCL_ERR_INVALID, "group: NULL argument");
    if (group_rank < 0 || group_rank >= g->size)
        return fccl_err(FCCL_ERR_INVALID,
                        "group %s: rank %d out of range [0, %d)", g->name,
                        group_rank, g->size);
    *world = g->world[group_rank];
    return FCCL_OK;
}

int fccl_group_from_world(const fccl_group_t *g, int world_rank, int *grank)
{
    if (!g || !grank)
        return fccl_err(FCCL_ERR_INVALID, "group: NULL argument");
    int r = group_rank_of_world(g, world_rank);
    if (r < 0)
        return fccl_err(FCCL_ERR_INVALID, "group %s: world rank %d is not a "
                        "member", g->name, world_rank);
    *grank = r;
    return FCCL_OK;
}

int fccl_group_members(const fccl_group_t *g, int *out, size_t outlen)
{
    if (!g || !out)
        return fccl_err(FCCL_ERR_INVALID, "group: NULL argument");
    if (outlen < (size_t)g->size)
        return fccl_err(FCCL_ERR_INVALID,
                        "group %s: member list needs %d entries, got %zu",
                        g->name, g->size, outlen);
    memcpy(out, g->world, (size_t)g->size * sizeof(int));
    return FCCL_OK;
}

int fccl_group_set_timeout(fccl_group_t *g, int64_t timeout_ms)
{
    if (!g || timeout_ms <= 0)
        return fccl_err(FCCL_ERR_INVALID, "group: timeout must be positive");
    g->timeout_ms = timeout_ms;
    return FCCL_OK;
}

int64_t fccl_group_timeout(const fccl_group_t *g)
{
    return g ? g->timeout_ms : -1;
}
