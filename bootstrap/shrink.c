/*
 * Shrink: the survivors of a group agree on who is gone and make a group
 * of themselves (ULFM's MPIX_Comm_shrink with its agreement, NCCL's
 * ncclCommShrink).
 *
 * The agreement runs through the store, which outlives any rank, in a key
 * space of its own per shrink of a group, "ft/<ctx>/<k>/" (the group's
 * context id and this rank's count of its shrinks):
 *
 * 1. Each survivor posts an entry, "<group rank> <failed group ranks>"
 *    (those it knows of, and the exclude list), under e<v>, where v comes
 *    from ADD on the key "n": the entries form a log every survivor reads
 *    in order, each read a blocking GET of the next key, woken by the
 *    server the moment it is written (no polling of the store).
 * 2. A survivor's view is complete when every member has posted or is
 *    known to have failed (tp_rank_failed: heartbeats, broken
 *    connections, exited local processes; a rank that dies during the
 *    shrink shows up there too), or, after the answer bound (twice
 *    FCCL_PEER_TIMEOUT, else the group timeout), when the silent are
 *    counted as failed.  Excluded ranks are never waited for.
 * 3. A complete survivor proposes the union of every failed set it saw
 *    and a fresh context id: COMPARE_SET on "dec" from missing to its
 *    proposal.  The store orders the proposals, so the first one wins
 *    everywhere; its winner appends "D" to the log so that the others
 *    wake and read it, and anyone who proposes later gets the winner's
 *    value back.  No survivor's death can block it: any complete survivor
 *    can decide.
 * 4. Everyone adopts the decision: the set left out (what
 *    fccl_group_failed_ranks gives from then on, on every survivor), the
 *    transport stops counting those ranks' failures (tp_exclude), and the
 *    group of the rest, in their old order, named by their member set,
 *    with the decided context id, needs no further communication.  A
 *    survivor that finds itself in the decided set (it was too slow for
 *    the bound) fails with FCCL_ERR_PEER.
 *
 * The keys stay on the store (a few bytes per survivor per shrink): a
 * survivor may read the log after all others have returned.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "boot.h"
#include "clock.h"
#include "env.h"
#include "err.h"
#include "log.h"
#include "tp.h"

#define SHRINK_READ_MS 5 /* a log read's wait before local news is checked */

struct shrink {
    struct fccl_group *g;
    char prefix[64];
    unsigned char *state; /* per group rank: 0 unknown, 1 posted, 2 failed */
    int seen;             /* log entries read */
    int decided;
    uint32_t ctx;         /* the decision's */
};

enum { S_UNKNOWN, S_POSTED, S_FAILED };

static void key_of(const struct shrink *s, const char *leaf, char *key,
                   size_t len)
{
    snprintf(key, len, "%s%s", s->prefix, leaf);
}

/* "r1,r2,..." of the ranks in state S_FAILED (empty: "-"). */
static void failed_csv(const struct shrink *s, char *out, size_t len)
{
    size_t off = 0;
    out[0] = '\0';
    for (int r = 0; r < s->g->size && off + 12 < len; r++)
        if (s->state[r] == S_FAILED)
            off += (size_t)snprintf(out + off, len - off, "%s%d",
                                    off ? "," : "", r);
    if (off == 0)
        snprintf(out, len, "-");
}

/* Mark the ranks of a csv list failed; FCCL_ERR_PROTOCOL for junk. */
static int read_csv(struct shrink *s, const char *p)
{
    if (strcmp(p, "-") == 0)
        return FCCL_OK;
    while (*p) {
        char *end;
        long r = strtol(p, &end, 10);
        if (end == p || r < 0 || r >= s->g->size || (*end && *end != ','))
            return fccl_err(FCCL_ERR_PROTOCOL, "shrink %s: bad rank list "
                            "'%s' on the store", s->prefix, p);
        s->state[r] = S_FAILED;
        p = *end ? end + 1 : end;
    }
    return FCCL_OK;
}

/* Append one entry to the log. */
static int post(struct shrink *s, const char *val)
{
    char key[96];
    int64_t v;
    key_of(s, "n", key, sizeof(key));
    int rc = fccl_store_add(boot.store, key, 1, &v);
    if (rc < 0)
        return rc;
    snprintf(key, sizeof(key), "%se%lld", s->prefix, (long long)v);
    return fccl_store_set(boot.store, key, val, strlen(val));
}

/* "<ctx> <csv>": the decision, into s (the set replaces the view). */
static int adopt(struct shrink *s, const char *v)
{
    char *end;
    unsigned long ctx = strtoul(v, &end, 10);
    if (end == v || *end != ' ' || ctx == 0 || ctx >= (1u << 20))
        return fccl_err(FCCL_ERR_PROTOCOL, "shrink %s: bad decision '%s'",
                        s->prefix, v);
    for (int r = 0; r < s->g->size; r++)
        s->state[r] = S_POSTED;
    s->ctx = (uint32_t)ctx;
    s->decided = 1;
    return read_csv(s, end + 1);
}

static int read_decision(struct shrink *s)
{
    char key[96];
    void *v = NULL;
    key_of(s, "dec", key, sizeof(key));
    int rc = fccl_store_get(boot.store, key, &v, NULL, boot.timeout_ms);
    if (rc >= 0)
        rc = adopt(s, v);
    free(v);
    return rc;
}

/* Propose the view; adopt whatever the store holds first. */
static int decide(struct shrink *s)
{
    uint32_t ctx;
    int rc = boot_ctx_reserve(1, &ctx);
    if (rc < 0)
        return rc;
    char val[1200], key[96];
    int len = snprintf(val, sizeof(val), "%u ", ctx);
    failed_csv(s, val + len, sizeof(val) - (size_t)len);
    key_of(s, "dec", key, sizeof(key));
    void *cur = NULL;
    size_t curlen = 0;
    rc = fccl_store_compare_set(boot.store, key, "", 0, val, strlen(val),
                                &cur, &curlen);
    if (rc < 0)
        return rc;
    int won = curlen == strlen(val) && memcmp(cur, val, curlen) == 0;
    char got[sizeof(val)]; /* the reply as a string, whatever it holds */
    snprintf(got, sizeof(got), "%.*s", (int)(curlen < sizeof(got)
                                                 ? curlen : sizeof(got) - 1),
             cur ? (const char *)cur : "");
    free(cur);
    rc = adopt(s, got);
    if (rc >= 0 && won)
        rc = post(s, "D");
    return rc;
}

/* Read the next log entry if it comes within SHRINK_READ_MS: 1 read,
 * 0 none yet, < 0 an error. */
static int read_next(struct shrink *s)
{
    char key[96];
    void *v = NULL;
    snprintf(key, sizeof(key), "%se%d", s->prefix, s->seen + 1);
    int rc = fccl_store_get(boot.store, key, &v, NULL, SHRINK_READ_MS);
    if (rc == FCCL_ERR_TIMEOUT)
        return 0;
    if (rc < 0)
        return rc;
    s->seen++;
    char *sp = strchr(v, ' ');
    long r = strtol(v, NULL, 10);
    if (strcmp(v, "D") == 0)
        rc = read_decision(s);
    else if (!sp || r < 0 || r >= s->g->size)
        rc = fccl_err(FCCL_ERR_PROTOCOL, "shrink %s: bad entry '%s'",
                      s->prefix, (char *)v);
    else if ((rc = read_csv(s, sp + 1)) >= 0 && s->state[r] != S_FAILED)
        s->state[r] = S_POSTED;
    free(v);
    return rc < 0 ? rc : 1;
}

/* Every member posted or failed?  Adds what this rank knows of now. */
static int complete(struct shrink *s, int give_up)
{
    int all = 1;
    for (int r = 0; r < s->g->size; r++) {
        if (s->state[r] != S_UNKNOWN)
            continue;
        if (give_up || tp_rank_failed(boot.tp, s->g->world[r]))
            s->state[r] = S_FAILED;
        else
            all = 0;
    }
    return all;
}

/* How long a member that neither posts nor is known to fail is waited
 * for: twice the heartbeat timeout, within the group's. */
static int64_t answer_ms(const struct fccl_group *g)
{
    const char *e = getenv("FCCL_PEER_TIMEOUT");
    double s = e && *e ? strtod(e, NULL) : 10.0;
    int64_t ms = s > 0 ? (int64_t)(2000 * s) : g->timeout_ms;
    return ms < g->timeout_ms ? ms : g->timeout_ms;
}

static int agree(struct shrink *s)
{
    char entry[1200];
    int len = snprintf(entry, sizeof(entry), "%d ", s->g->rank);
    complete(s, 0);
    failed_csv(s, entry + len, sizeof(entry) - (size_t)len);
    int rc = post(s, entry);
    uint64_t bound = fccl_deadline_ms(answer_ms(s->g));
    uint64_t end = fccl_deadline_ms(s->g->timeout_ms);
    while (rc >= 0 && !s->decided) {
        uint64_t now = fccl_now_ns();
        if (complete(s, now >= bound))
            return decide(s);
        if (now >= end)
            return fccl_err(FCCL_ERR_TIMEOUT, "timed out after %lld ms",
                            (long long)s->g->timeout_ms);
        rc = read_next(s);
    }
    return rc;
}

/* The decided set's consequences: the agreed list, the exclusion. */
static int apply(struct shrink *s, int **members, int *n)
{
    struct fccl_group *g = s->g;
    int *failed = malloc((size_t)g->size * sizeof(int));
    int *left = malloc((size_t)g->size * sizeof(int));
    if (!failed || !left) {
        free(failed);
        free(left);
        return fccl_err(FCCL_ERR_NOMEM, "out of memory");
    }
    int nf = 0, nl = 0;
    for (int r = 0; r < g->size; r++) {
        if (s->state[r] == S_FAILED)
            failed[nf++] = r;
        else
            left[nl++] = g->world[r];
    }
    for (int i = 0; i < nf; i++) /* as world ranks, for the transport */
        left[nl + i] = g->world[failed[i]];
    tp_exclude(boot.tp, left + nl, (size_t)nf);
    free(g->agreed);
    g->agreed = failed;
    g->nagreed = nf;
    g->has_agreed = 1;
    *members = left;
    *n = nl;
    return FCCL_OK;
}

static int cmp_int(const void *a, const void *b)
{
    int x = *(const int *)a, y = *(const int *)b;
    return (x > y) - (x < y);
}

/* The group of the survivors, in their old order, named by their set. */
static int build(struct shrink *s, const int *members, int n,
                 fccl_group_t **out)
{
    int *sorted = malloc((size_t)n * sizeof(int));
    if (!sorted)
        return fccl_err(FCCL_ERR_NOMEM, "out of memory");
    memcpy(sorted, members, (size_t)n * sizeof(int));
    qsort(sorted, (size_t)n, sizeof(int), cmp_int);
    char name[FCCL_GROUP_NAME_MAX];
    int rc = boot_name_of_sorted(sorted, (size_t)n, name, sizeof(name));
    free(sorted);
    if (rc < 0)
        return rc;
    rc = boot_make_group(members, n, name, 0, s->ctx, out);
    if (rc >= 0)
        fccl_group_set_timeout(*out, s->g->timeout_ms);
    return rc;
}

static int check_args(struct fccl_group *g, const int *exclude, int nexclude,
                      unsigned char *state)
{
    if (!exclude && nexclude != 0)
        return fccl_err(FCCL_ERR_INVALID, "nexclude %d with a NULL exclude "
                        "list", nexclude);
    for (int i = 0; exclude && i < nexclude; i++) {
        int r = exclude[i];
        if (r < 0 || r >= g->size)
            return fccl_err(FCCL_ERR_INVALID, "excluded rank %d is not a "
                            "group rank (0..%d)", r, g->size - 1);
        if (r == g->rank)
            return fccl_err(FCCL_ERR_INVALID, "this rank (%d) is in its own "
                            "exclude list: only survivors call shrink", r);
        state[r] = S_FAILED;
    }
    return FCCL_OK;
}

static int shrink(struct fccl_group *g, const int *exclude, int nexclude,
                  fccl_group_t **out)
{
    struct shrink s = {.g = g};
    int *members = NULL, n = 0;
    s.state = calloc((size_t)g->size, 1);
    if (!s.state)
        return fccl_err(FCCL_ERR_NOMEM, "out of memory");
    snprintf(s.prefix, sizeof(s.prefix), "ft/%u/%d/", g->ctx, g->shrinks++);
    int rc = check_args(g, exclude, nexclude, s.state);
    if (rc >= 0)
        rc = agree(&s);
    if (rc >= 0 && s.state[g->rank] == S_FAILED)
        rc = fccl_err(FCCL_ERR_PEER, "the other survivors decided without "
                      "this rank (it was counted as failed)");
    if (rc >= 0)
        rc = apply(&s, &members, &n);
    if (rc >= 0)
        rc = build(&s, members, n, out);
    free(members);
    free(s.state);
    return rc;
}

int fccl_group_shrink(fccl_group_t *g, const int *exclude, int nexclude,
                      fccl_group_t **out)
{
    if (!boot.initialized)
        return fccl_err(FCCL_ERR_STATE, "shrink: fccl_init has not run");
    if (!g || !out)
        return fccl_err(FCCL_ERR_INVALID, "shrink: NULL group or out");
    *out = NULL;
    uint64_t t0 = fccl_now_ns();
    int rc = shrink(g, exclude, nexclude, out);
    if (rc < 0)
        return fccl_err_wrap(rc, "shrink of group %s (rank %d)", g->name,
                             g->rank);
    LOG_INFO("BOOT", "shrink of %s: %s, %d of %d ranks, ctx %u, %.2f ms",
             g->name, (*out)->name, (*out)->size, g->size, (*out)->ctx,
             (double)(fccl_now_ns() - t0) / 1e6);
    return FCCL_OK;
}
