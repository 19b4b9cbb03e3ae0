/*
 * Groups: hashed names, membership, rank translation, split, and context
 * ids.  A group's name depends only on its member set (so every member
 * computes it alone); its context id is fresh for every creation, so
 * messages of a destroyed group, or of another group with overlapping
 * members, can never match.
 *
 * Names.  fccl_group_new names a group by its member set (fccl_<n>_<sha1>,
 * DESIGN.md "Groups"); fccl_group_new_named takes the user's name
 * (MindSpore's create_group), which must be new on this rank and may not
 * take the library's reserved forms (anything starting with "fccl_").
 * fccl_group_find looks either kind up, newest creation first.
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
#include "tp.h"

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
    free(g->agreed);
    free(g);
}

/* Number the group's hosts densely in order of first appearance; my
 * index among the members on my host and their count. */
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
    g->local_rank = g->local_size = 0;
    for (int r = 0; r < g->size; r++) {
        if (g->node_of[r] != g->node_of[g->rank])
            continue;
        if (r < g->rank)
            g->local_rank++;
        g->local_size++;
    }
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
int boot_name_of_sorted(const int *s, size_t n, char *out, size_t outlen)
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
    rc = boot_name_of_sorted(s, n, out, outlen);
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
int boot_ctx_reserve(int64_t count, uint32_t *first)
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

/* grp/<hashed name>/<n>, or ngrp/<user name>/<n> for a named group (a
 * user name cannot take the reserved fccl_ form, so the two never meet). */
static void ctx_key(const char *name, int named, int n, char *key, size_t len)
{
    snprintf(key, len, "%s/%s/%d", named ? "ngrp" : "grp", name, n);
}

/* The lowest member reserves an id and publishes it under grp/<name>/<n>
 * (n: this name's creations so far); the others read it.  Every request
 * is safe to repeat after a store restart (a repeated reservation only
 * skips an id), so a reconnecting handle rides one out.  The key is
 * removed by release_ctx_key once everyone has read it. */
/* A named group's published value is "<ctx> <hashed name of its
 * members>": a member that was given other ranks under the same name
 * fails with both member sets named instead of joining the wrong group. */
static int parse_named(const char *v, const char *name, const char *members,
                       uint32_t *ctx)
{
    const char *sp = strchr(v, ' ');
    if (!sp)
        return fccl_err(FCCL_ERR_PROTOCOL, "group '%s': bad published value "
                        "'%s'", name, v);
    if (strcmp(sp + 1, members) != 0)
        return fccl_err(FCCL_ERR_INVALID, "group '%s': its lowest member "
                        "created it with the members %s, this rank asked "
                        "for %s (every member must pass the same name and "
                        "ranks)", name, sp + 1, members);
    char id[24];
    snprintf(id, sizeof(id), "%.*s", (int)(sp - v), v);
    return parse_ctx(id, ctx);
}

static int agree_ctx(const char *name, const char *members, int n, int leader,
                     int size, uint32_t *ctx)
{
    int named = strcmp(name, members) != 0;
    char key[160], val[96];
    ctx_key(name, named, n, key, sizeof(key));
    int rc;
    if (size == 1) {
        rc = boot_ctx_reserve(1, ctx);
    } else if (leader) {
        if ((rc = boot_ctx_reserve(1, ctx)) < 0)
            return rc;
        int len = named ? snprintf(val, sizeof(val), "%u %s", *ctx, members)
                        : snprintf(val, sizeof(val), "%u", *ctx);
        /* confirmed (SYNC), and repeated whole after a lost connection */
        rc = fccl_store_set(boot.store, key, val, (size_t)len);
    } else {
        void *v = NULL;
        size_t vl;
        rc = fccl_store_get(boot.store, key, &v, &vl, boot.timeout_ms);
        if (rc >= 0)
            rc = named ? parse_named(v, name, members, ctx) : parse_ctx(v, ctx);
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
        ctx_key(name, g->named, n, key, sizeof(key));
        if (fccl_store_delete(boot.store, key, NULL) < 0)
            LOG_WARN("BOOT", "group %s: could not delete %s: %s", name, key,
                     fccl_last_error());
    }
    if (rc < 0)
        return fccl_err_wrap(rc, "group %s: first barrier of its members",
                             name);
    return FCCL_OK;
}

int boot_make_group(const int *world_order, int size, const char *name,
                    int named, uint32_t ctx, struct fccl_group **out)
{
    struct fccl_group *g = boot_group_alloc(size);
    if (!g)
        return fccl_err(FCCL_ERR_NOMEM, "group: out of memory");
    memcpy(g->world, world_order, (size_t)size * sizeof(int));
    g->rank = group_rank_of_world(g, boot.rank);
    snprintf(g->name, sizeof(g->name), "%s", name);
    g->named = named;
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

/* ---- user names ---- */

int fccl_group_name_check(const char *name)
{
    if (!name || !*name)
        return fccl_err(FCCL_ERR_INVALID, "group: the name is NULL or empty");
    size_t len = strlen(name);
    if (len >= FCCL_GROUP_NAME_MAX)
        return fccl_err(FCCL_ERR_INVALID, "group '%.40s...': the name has %zu "
                        "bytes, at most %d are allowed", name, len,
                        FCCL_GROUP_NAME_MAX - 1);
    for (size_t i = 0; i < len; i++) {
        char c = name[i];
        if ((c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') ||
            (c >= '0' && c <= '9') || strchr("_-.:", c))
            continue;
        return fccl_err(FCCL_ERR_INVALID, "group '%s': character %zu (0x%02x) "
                        "is not allowed (letters, digits, '_', '-', '.', ':')",
                        name, i, (unsigned char)c);
    }
    if (strncmp(name, "fccl_", 5) == 0)
        return fccl_err(FCCL_ERR_INVALID, "group '%s': names starting with "
                        "\"fccl_\" are the library's (the world and the "
                        "hashed names of fccl_group_new)", name);
    return FCCL_OK;
}

fccl_group_t *fccl_group_find(const char *name)
{
    if (!boot.initialized || !name)
        return NULL;
    for (size_t i = boot.ngroups; i-- > 0;) /* newest creation first */
        if (strcmp(boot.groups[i]->name, name) == 0)
            return boot.groups[i];
    return strcmp(name, boot.world->name) == 0 ? boot.world : NULL;
}

/* Create the group of `s` (n sorted world ranks, `hashed` their name)
 * under `name` (the hashed name, or the user's). */
static int create(const int *s, size_t n, const char *name, const char *hashed,
                  fccl_group_t **out)
{
    int rc, me = -1;
    for (size_t i = 0; i < n; i++)
        if (s[i] == boot.rank)
            me = (int)i;
    if (me < 0)
        return fccl_err(FCCL_ERR_INVALID, "group %s: rank %d is not a member "
                        "(only members create it)", name, boot.rank);
    int creation = next_creation(name);
    if (creation < 0)
        return creation;
    uint32_t ctx;
    if ((rc = agree_ctx(name, hashed, creation, me == 0, (int)n, &ctx)) < 0 ||
        (rc = boot_make_group(s, (int)n, name, strcmp(name, hashed) != 0,
                              ctx, out)) < 0)
        return rc;
    if ((rc = release_ctx_key(*out, name, creation)) < 0) {
        char msg[1024];
        snprintf(msg, sizeof(msg), "%s", fccl_last_error());
        fccl_group_destroy(*out);
        *out = NULL;
        rc = fccl_err(rc, "%s", msg);
    }
    return rc;
}

static int new_group(const char *user, const int *ranks, size_t n,
                     fccl_group_t **out)
{
    if (!boot.initialized)
        return fccl_err(FCCL_ERR_STATE, "group: fccl_init has not run");
    if (!out)
        return fccl_err(FCCL_ERR_INVALID, "group: out is NULL");
    *out = NULL;
    if (!user && !ranks && n == 0) { /* new_group(None): the world */
        *out = boot.world;
        return FCCL_OK;
    }
    int rc;
    if (user && (rc = fccl_group_name_check(user)) < 0)
        return rc;
    if (user && fccl_group_find(user))
        return fccl_err(FCCL_ERR_INVALID, "group '%s' exists already on rank "
                        "%d (destroy it first, or choose another name)", user,
                        boot.rank);
    int *s;
    if ((rc = sorted_members(ranks, n, &s)) < 0)
        return rc;
    char hashed[FCCL_GROUP_NAME_MAX];
    if ((rc = boot_name_of_sorted(s, n, hashed, sizeof(hashed))) >= 0)
        rc = create(s, n, user ? user : hashed, hashed, out);
    free(s);
    return rc;
}

int fccl_group_new(const int *ranks, size_t n, fccl_group_t **out)
{
    return new_group(NULL, ranks, n, out);
}

int fccl_group_new_named(const char *name, const int *ranks, size_t n,
                         fccl_group_t **out)
{
    if (!name)
        return fccl_err(FCCL_ERR_INVALID, "group: the name is NULL (use "
                        "fccl_group_new for a hashed name)");
    if (boot.initialized && out && !ranks && n == 0)
        return fccl_err(FCCL_ERR_INVALID, "group '%s': a named group needs "
                        "its ranks (the world is %s)", name, FCCL_WORLD_GROUP);
    return new_group(name, ranks, n, out);
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
        rc = boot_ctx_reserve(ncolors, &first);
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
    CHECK_GOTO(boot_name_of_sorted(sorted, (size_t)count, name,
                                   sizeof(name)), rc, out);
    rc = boot_make_group(members, count, name, 0, (uint32_t)(base + cindex),
                         out);
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
    atomic_fetch_or(&g->stop, GROUP_STOP_ABORT);
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

int fccl_group_topology(const fccl_group_t *g, fccl_topology_t *out)
{
    if (!g || !out)
        return fccl_err(FCCL_ERR_INVALID, "group topology: NULL argument");
    out->node_count = g->nnodes;
    out->node_rank = g->node_of[g->rank];
    out->local_rank = g->local_rank;
    out->local_size = g->local_size;
    return FCCL_OK;
}

/* Append one provider name to out ("a,b"); FCCL_ERR_INVALID when out is
 * too small (*need grows by what it would take). */
static int add_provider(char *out, size_t outlen, size_t *used,
                        const char *prov, size_t *need)
{
    size_t pl = strlen(prov) + (*need ? 1 : 0);
    *need += pl;
    if (*used + pl + 1 > outlen)
        return FCCL_ERR_INVALID;
    snprintf(out + *used, outlen - *used, "%s%s", *used ? "," : "", prov);
    *used += pl;
    return FCCL_OK;
}

int fccl_group_providers(const fccl_group_t *g, char *out, size_t outlen)
{
    if (!g || !out || outlen == 0)
        return fccl_err(FCCL_ERR_INVALID, "group providers: NULL argument or "
                        "empty buffer");
    size_t used = 0, need = 0;
    int rc = FCCL_OK;
    out[0] = '\0';
    const char *prov;
    for (int e = 0; (prov = tp_endpoint_provider(g->tp, e)); e++) {
        int uses = 0;
        for (int r = 0; r < g->size && !uses; r++)
            uses = r != g->rank && tp_peer_endpoint(g->tp, g->world[r]) == e;
        if (uses && add_provider(out, outlen, &used, prov, &need) < 0)
            rc = FCCL_ERR_INVALID;
    }
    if (rc < 0)
        return fccl_err(rc, "group %s: the providers need %zu bytes, got %zu",
                        g->name, need + 1, outlen);
    return FCCL_OK;
}
