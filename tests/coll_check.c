/*
 * coll_check: the collective test matrix for one (provider, rank count),
 * in one launch (starting a libfabric process costs ~0.4 s, so every case
 * of the launch shares the processes).
 *
 *   coll_check -p PROVIDER -n RANKS [-m MODE] [-r] [-t SEC] [-v]
 *
 * MODE: matrix (default; every operation, size, dtype/op and forced
 * algorithm), smoke (small matrix for the slower providers), args
 * (argument errors), groups (two overlapping groups driven from two
 * threads), kill (a rank dies; the others must fail in time, naming it),
 * abort (fccl_group_abort from another thread).  -r: reduced matrix (no
 * multi-MiB cases), also set by FCCL_TEST_REDUCED=1.
 *
 * The group is built by hand on top of tests/lib/tp_harness.h (no store,
 * no bootstrap).  -e (env mode, for jobs across hosts): this process is one
 * rank of a job started by a launcher (fccl-run --nnodes, ...); it joins
 * through fccl_init(env://), builds the same groups on the world's
 * transport with the real host topology, runs matrix or smoke, and
 * compares the result hashes and failure counts with all_reduce; rank 0
 * prints the summary line.  Inputs are a pure function of (case, rank, index)
 * (coll_ref.h), so each rank checks the whole result itself; each rank
 * also records a hash of every result that must be identical on all
 * ranks, and the parent compares them.  Exit 0 only if every case passed;
 * the last line says how many cases ran.
 */
#include <getopt.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <unistd.h>

#include "coll_group.h"
#include "group.h"
#include "coll_ref.h"
#include "select.h"
#include "fccl/pg.h"
#include "lib/proc.h"
#include "lib/tp_harness.h"

#define MAX_CASES 4096
#define BIG 786431 /* ~3 MiB of float32, divisible by none of 2,3,4,5,8 */

struct shared {
    int ncases;
    /* kill / abort modes: each rank's outcome for the parent to judge */
    int code[TPH_MAX_RANKS], later[TPH_MAX_RANKS];
    double secs[TPH_MAX_RANKS], later_secs[TPH_MAX_RANKS];
    char msg[TPH_MAX_RANKS][400];
    int fails[TPH_MAX_RANKS];
    int ran[TPH_MAX_RANKS];
    unsigned char same[MAX_CASES];
    char name[MAX_CASES][96];
    uint64_t hash[MAX_CASES][TPH_MAX_RANKS];
    _Atomic long entered[MAX_CASES]; /* barrier_bcast: barriers entered */
};

static struct {
    const char *provider, *mode;
    int n, reduced, verbose, timeout_s, env, provider_given;
} O = {"shm", "matrix", 2, 0, 0, 0, 0, 0};

static struct shared *SH;
static int t_rank_env; /* -e: this process's rank */

/* per-rank state */
struct rt {
    struct fccl_tp *tp;
    struct fccl_group *g;  /* all ranks, ctx 1 */
    struct fccl_group *g2; /* same ranks, ctx 2, faked two hosts (hier) */
    int rank, n, cs, fails, dead;
};

struct tc {
    const char *op;       /* API name */
    fccl_dtype_t dt;
    fccl_redop_t rop;
    size_t count;
    const char *algo;     /* forced algorithm or NULL */
    int inplace;          /* 1: in place (2: the other in-place style) */
    int async;            /* 1: wait, 2: poll with fccl_test */
    int root;
    int uneven;           /* v-variant */
    int hier;             /* run on g2 */
    int shape;            /* shaped ops: layout (coll_check_shaped.h) */
};

/* ---- groups by hand ---- */

static struct fccl_group *make_group(struct fccl_tp *tp, int wrank, int n,
                                     const int *world, uint32_t ctx,
                                     const int *node_of, int64_t timeout_ms,
                                     const char *name)
{
    struct fccl_group *g = calloc(1, sizeof(*g));
    g->world = malloc((size_t)n * sizeof(int));
    g->node_of = calloc((size_t)n, sizeof(int));
    snprintf(g->name, sizeof(g->name), "%s", name);
    g->tp = tp;
    g->size = n;
    g->world_rank = wrank;
    g->nnodes = 1;
    g->rank = -1;
    for (int r = 0; r < n; r++) {
        g->world[r] = world ? world[r] : r;
        if (g->world[r] == wrank)
            g->rank = r;
        g->node_of[r] = node_of ? node_of[r] : 0;
        if (g->node_of[r] + 1 > g->nnodes)
            g->nnodes = g->node_of[r] + 1;
    }
    g->ctx = ctx;
    g->timeout_ms = timeout_ms;
    if (coll_group_init(g) < 0) {
        fprintf(stderr, "[rank %d] coll_group_init: %s\n", wrank,
                fccl_last_error());
        free(g->world);
        free(g->node_of);
        free(g);
        return NULL;
    }
    return g;
}

static void free_group(struct fccl_group *g)
{
    if (!g)
        return;
    coll_group_fini(g);
    free(g->world);
    free(g->node_of);
    free(g);
}

/* ---- helpers ---- */

#define FAIL(t, c, ...)                                                        \
    do {                                                                       \
        fprintf(stderr, "[rank %d] case %d %s: ", (t)->rank, (t)->cs,          \
                SH->name[(t)->cs]);                                            \
        fprintf(stderr, __VA_ARGS__);                                          \
        fprintf(stderr, "\n");                                                 \
        (void)(c);                                                             \
    } while (0)

static void *xmalloc(size_t n)
{
    void *p = malloc(n ? n : 1);
    if (!p) {
        fprintf(stderr, "out of memory (%zu bytes)\n", n);
        _exit(3);
    }
    return p;
}

/* Finish an asynchronous call: wait, or poll with fccl_test. */
static int finish_async(fccl_request_t *req, int async)
{
    if (async == 1)
        return fccl_wait(req, -1);
    double end = th_now() + 120;
    for (;;) {
        int done = 0;
        int rc = fccl_test(req, &done);
        if (done || rc < 0)
            return rc;
        if (th_ms_left(end) == 0)
            return fccl_wait(req, -1);
    }
}

static int last_rc; /* status of the last failed call, for messages */

static int finish(int rc, fccl_request_t **reqp, int async)
{
    if (rc >= 0 && async)
        rc = finish_async(*reqp, async); /* read after the call filled it */
    if (rc < 0)
        last_rc = rc;
    return rc;
}

#define REQ(c) ((c)->async ? &req : NULL)

static struct fccl_group *grp(struct rt *t, const struct tc *c)
{
    return c->hier ? t->g2 : t->g;
}

/* Uneven count of rank r (some ranks contribute nothing). */
static size_t vcount(size_t base, int r)
{
    return r % 3 == 1 ? 0 : base + (size_t)r * 3;
}

/* all_to_all_v count from rank s to rank d. */
static size_t a2a_count(size_t base, int s, int d)
{
    return ((size_t)(s * 3 + d * 5) % 4) * (base / 2 + 1);
}

static int check_bytes(struct rt *t, const struct tc *c, const void *got,
                       const void *want, size_t len, const char *what)
{
    if (len == 0 || memcmp(got, want, len) == 0)
        return 0;
    const unsigned char *a = got, *b = want;
    size_t i = 0;
    while (a[i] == b[i])
        i++;
    FAIL(t, c, "%s: byte %zu of %zu differs (got 0x%02x want 0x%02x)", what, i,
         len, a[i], b[i]);
    return 1;
}

static int check_red(struct rt *t, const struct tc *c, const void *got,
                     size_t count, size_t first, int cs)
{
    char why[200];
    if (ref_check_reduce(got, count, first, c->dt, c->rop, cs, t->n, why,
                         sizeof(why)) < 0)
        return 0;
    FAIL(t, c, "%s", why);
    return 1;
}

/* ---- the operations ---- */

static int op_all_reduce(struct rt *t, const struct tc *c, int cs,
                         uint64_t *h)
{
    size_t es = fccl_dtype_size(c->dt), len = c->count * es;
    unsigned char *in = xmalloc(len), *out = c->inplace ? in : xmalloc(len);
    ref_fill(in, c->count, c->dt, c->rop, cs, t->rank, 0);
    if (!c->inplace)
        memset(out, 0xab, len);
    fccl_request_t *req = NULL;
    int rc = finish(fccl_all_reduce(in, out, c->count, c->dt, c->rop,
                                    grp(t, c), REQ(c)),
                    &req, c->async);
    int bad = rc < 0 ? -1 : check_red(t, c, out, c->count, 0, cs);
    *h = ref_hash(out, len);
    if (bad == 0 && !c->inplace && c->count > 0) {
        /* the same inputs and algorithm give the same bits on a rerun */
        rc = fccl_all_reduce(in, out, c->count, c->dt, c->rop, grp(t, c), NULL);
        if (rc < 0)
            bad = -1;
        else if (ref_hash(out, len) != *h) {
            FAIL(t, c, "rerun gave different bits");
            bad = 1;
        }
    }
    if (out != in)
        free(out);
    free(in);
    return bad;
}

static int op_broadcast(struct rt *t, const struct tc *c, int cs, uint64_t *h)
{
    size_t es = fccl_dtype_size(c->dt), len = c->count * es;
    unsigned char *buf = xmalloc(len), *want = xmalloc(len);
    ref_fill(want, c->count, c->dt, FCCL_SUM, cs, c->root, 0);
    if (t->rank == c->root)
        memcpy(buf, want, len);
    else
        memset(buf, 0xcd, len);
    fccl_request_t *req = NULL;
    int rc = finish(fccl_broadcast(buf, c->count, c->dt, c->root, t->g,
                                   REQ(c)),
                    &req, c->async);
    int bad = rc < 0 ? -1 : check_bytes(t, c, buf, want, len, "broadcast");
    *h = ref_hash(buf, len);
    free(buf);
    free(want);
    return bad;
}

static int op_reduce(struct rt *t, const struct tc *c, int cs, uint64_t *h)
{
    size_t es = fccl_dtype_size(c->dt), len = c->count * es;
    int root = t->rank == c->root;
    unsigned char *in = xmalloc(len);
    unsigned char *out = !root ? NULL : c->inplace ? in : xmalloc(len);
    ref_fill(in, c->count, c->dt, c->rop, cs, t->rank, 0);
    fccl_request_t *req = NULL;
    int rc = finish(fccl_reduce(in, out, c->count, c->dt, c->rop, c->root,
                                t->g, REQ(c)),
                    &req, c->async);
    int bad = rc < 0 ? -1 : root ? check_red(t, c, out, c->count, 0, cs) : 0;
    *h = 0;
    if (out && out != in)
        free(out);
    free(in);
    return bad;
}

static void counts_of(const struct tc *c, int n, size_t *counts,
                      size_t *displs, size_t *total)
{
    size_t tot = 0;
    for (int r = 0; r < n; r++) {
        counts[r] = c->uneven ? vcount(c->count, r) : c->count;
        displs[r] = tot;
        tot += counts[r];
    }
    *total = tot;
}

static int op_all_gather(struct rt *t, const struct tc *c, int cs,
                         uint64_t *h)
{
    int n = t->n, me = t->rank;
    size_t es = fccl_dtype_size(c->dt), total;
    size_t *cnt = xmalloc((size_t)n * sizeof(size_t));
    size_t *dsp = xmalloc((size_t)n * sizeof(size_t));
    counts_of(c, n, cnt, dsp, &total);
    unsigned char *out = xmalloc(total * es), *want = xmalloc(total * es);
    for (int r = 0; r < n; r++)
        ref_fill(want + dsp[r] * es, cnt[r], c->dt, FCCL_SUM, cs, r, 0);
    memset(out, 0xee, total * es);
    /* in place: 1 = my block already in its slot, 2 = at the start */
    unsigned char *in = c->inplace == 1 ? out + dsp[me] * es
                        : c->inplace == 2 ? out
                                          : xmalloc(cnt[me] * es);
    ref_fill(in, cnt[me], c->dt, FCCL_SUM, cs, me, 0);
    fccl_request_t *req = NULL;
    int rc = c->uneven ? fccl_all_gather_v(in, cnt[me], out, cnt, c->dt, t->g,
                                           REQ(c))
                       : fccl_all_gather(in, out, c->count, c->dt, t->g,
                                         REQ(c));
    rc = finish(rc, &req, c->async);
    int bad = rc < 0 ? -1 : check_bytes(t, c, out, want, total * es, "gather");
    *h = ref_hash(out, total * es);
    if (!c->inplace)
        free(in);
    free(out);
    free(want);
    free(cnt);
    free(dsp);
    return bad;
}

static int op_reduce_scatter(struct rt *t, const struct tc *c, int cs,
                             uint64_t *h)
{
    int n = t->n, me = t->rank;
    size_t es = fccl_dtype_size(c->dt), total;
    size_t *cnt = xmalloc((size_t)n * sizeof(size_t));
    size_t *dsp = xmalloc((size_t)n * sizeof(size_t));
    counts_of(c, n, cnt, dsp, &total);
    unsigned char *in = xmalloc(total * es);
    unsigned char *out = c->inplace ? in : xmalloc(cnt[me] * es);
    ref_fill(in, total, c->dt, c->rop, cs, me, 0);
    fccl_request_t *req = NULL;
    int rc = c->uneven ? fccl_reduce_scatter_v(in, out, cnt, c->dt, c->rop,
                                               t->g, REQ(c))
                       : fccl_reduce_scatter(in, out, c->count, c->dt, c->rop,
                                             t->g, REQ(c));
    rc = finish(rc, &req, c->async);
    int bad = rc < 0 ? -1 : check_red(t, c, out, cnt[me], dsp[me], cs);
    *h = 0;
    if (out != in)
        free(out);
    free(in);
    free(cnt);
    free(dsp);
    return bad;
}

static int op_gather(struct rt *t, const struct tc *c, int cs, uint64_t *h)
{
    int n = t->n, me = t->rank, root = me == c->root;
    size_t es = fccl_dtype_size(c->dt), len = c->count * es;
    unsigned char *out = root ? xmalloc(len * (size_t)n) : NULL;
    unsigned char *in = root && c->inplace ? out : xmalloc(len);
    ref_fill(in, c->count, c->dt, FCCL_SUM, cs, me, 0);
    fccl_request_t *req = NULL;
    int rc = finish(fccl_gather(in, out, c->count, c->dt, c->root, t->g,
                                REQ(c)),
                    &req, c->async);
    int bad = rc < 0 ? -1 : 0;
    if (bad == 0 && root) {
        unsigned char *want = xmalloc(len * (size_t)n);
        for (int r = 0; r < n; r++)
            ref_fill(want + (size_t)r * len, c->count, c->dt, FCCL_SUM, cs, r, 0);
        bad = check_bytes(t, c, out, want, len * (size_t)n, "gather");
        free(want);
    }
    *h = 0;
    if (in != out)
        free(in);
    free(out);
    return bad;
}

static int op_scatter(struct rt *t, const struct tc *c, int cs, uint64_t *h)
{
    int n = t->n, me = t->rank, root = me == c->root;
    size_t es = fccl_dtype_size(c->dt), len = c->count * es;
    unsigned char *in = root ? xmalloc(len * (size_t)n) : NULL;
    unsigned char *out = root && c->inplace ? in : xmalloc(len);
    if (root)
        ref_fill(in, c->count * (size_t)n, c->dt, FCCL_SUM, cs, me, 0);
    fccl_request_t *req = NULL;
    int rc = finish(fccl_scatter(in, out, c->count, c->dt, c->root, t->g,
                                 REQ(c)),
                    &req, c->async);
    int bad = rc < 0 ? -1 : 0;
    if (bad == 0) {
        unsigned char *want = xmalloc(len);
        ref_fill(want, c->count, c->dt, FCCL_SUM, cs, c->root,
                 c->count * (size_t)me);
        bad = check_bytes(t, c, out, want, len, "scatter");
        free(want);
    }
    *h = 0;
    if (out != in)
        free(out);
    free(in);
    return bad;
}

/* all_to_all, _v (uneven = 1) and _v_c (uneven = 2). */
static int op_all_to_all(struct rt *t, const struct tc *c, int cs,
                         uint64_t *h)
{
    int n = t->n, me = t->rank;
    size_t es = fccl_dtype_size(c->dt), z = sizeof(size_t);
    size_t *sc = xmalloc((size_t)n * z), *rc_ = xmalloc((size_t)n * z);
    size_t *mat = xmalloc((size_t)n * (size_t)n * z);
    size_t stot = 0, rtot = 0;
    for (int s = 0; s < n; s++)
        for (int d = 0; d < n; d++)
            mat[s * n + d] = c->uneven ? a2a_count(c->count, s, d) : c->count;
    for (int p = 0; p < n; p++) {
        sc[p] = mat[me * n + p];
        rc_[p] = mat[p * n + me];
        stot += sc[p];
        rtot += rc_[p];
    }
    size_t cap = (stot > rtot ? stot : rtot) * es;
    unsigned char *in = xmalloc(cap), *out = c->inplace ? in : xmalloc(cap);
    ref_fill(in, stot, c->dt, FCCL_SUM, cs, me, 0);
    fccl_request_t *req = NULL;
    int rc = c->uneven == 2 ? fccl_all_to_all_v_c(in, out, mat, c->dt, t->g, REQ(c))
             : c->uneven   ? fccl_all_to_all_v(in, sc, out, rc_, c->dt, t->g, REQ(c))
                           : fccl_all_to_all(in, out, c->count, c->dt, t->g, REQ(c));
    rc = finish(rc, &req, c->async);
    int bad = rc < 0 ? -1 : 0;
    unsigned char *want = xmalloc(cap);
    size_t off = 0;
    for (int s = 0; s < n; s++) {
        size_t first = 0; /* where sender s's block for me starts */
        for (int d = 0; d < me; d++)
            first += mat[s * n + d];
        ref_fill(want + off * es, rc_[s], c->dt, FCCL_SUM, cs, s, first);
        off += rc_[s];
    }
    if (bad == 0)
        bad = check_bytes(t, c, out, want, rtot * es, "all_to_all");
    *h = 0;
    free(want);
    if (out != in)
        free(out);
    free(in);
    free(sc);
    free(rc_);
    free(mat);
    return bad;
}

/* Each rank exchanges with itself and its ring neighbours. */
static int op_neighbor(struct rt *t, const struct tc *c, int cs, uint64_t *h)
{
    int n = t->n, me = t->rank, peers[3], np = 0;
    int cand[3] = {me, (me + 1) % n, (me - 1 + n) % n};
    for (int i = 0; i < 3; i++) {
        int dup = 0;
        for (int j = 0; j < np; j++)
            dup |= peers[j] == cand[i];
        if (!dup)
            peers[np++] = cand[i];
    }
    size_t es = fccl_dtype_size(c->dt), stride = c->count + 3;
    size_t scnt[3], rcnt[3];
    void *sb[3], *rb[3];
    for (int i = 0; i < np; i++) {
        int p = peers[i];
        scnt[i] = c->count + (size_t)((me + 2 * p) % 3);
        rcnt[i] = c->count + (size_t)((p + 2 * me) % 3);
        sb[i] = xmalloc(scnt[i] * es);
        rb[i] = xmalloc(rcnt[i] * es);
        ref_fill(sb[i], scnt[i], c->dt, FCCL_SUM, cs, me, stride * (size_t)p);
    }
    fccl_request_t *req = NULL;
    int rc = finish(fccl_neighbor_exchange(peers, (const void *const *)sb, scnt,
                                           (size_t)np, peers, rb, rcnt,
                                           (size_t)np, c->dt, t->g, REQ(c)),
                    &req, c->async);
    int bad = rc < 0 ? -1 : 0;
    for (int i = 0; i < np; i++) {
        if (bad == 0) {
            unsigned char *want = xmalloc(rcnt[i] * es);
            ref_fill(want, rcnt[i], c->dt, FCCL_SUM, cs, peers[i],
                     stride * (size_t)me);
            bad = check_bytes(t, c, rb[i], want, rcnt[i] * es, "neighbor");
            free(want);
        }
        free(sb[i]);
        free(rb[i]);
    }
    *h = 0;
    return bad;
}

static int op_barrier(struct rt *t, const struct tc *c, int cs, uint64_t *h)
{
    (void)cs;
    fccl_request_t *req = NULL;
    *h = 0;
    return finish(fccl_barrier(t->g, REQ(c)), &req, c->async) < 0 ? -1 : 0;
}

/* Barriers alternating with one-way broadcasts from every root in turn
 * (with more ranks than CPUs the barrier is led by rank 0,
 * algo/barrier_shm.c).  Nobody may leave barrier k before every rank has
 * entered it, nor pass barrier k + 1 before I enter it: a count of
 * entries in the shared page shows both (not with -e, whose ranks do not
 * share it).  Each broadcast's word is checked too. */
static int op_barrier_bcast(struct rt *t, const struct tc *c, int cs,
                            uint64_t *h)
{
    long n = t->n;
    *h = 0;
    for (long k = 1; k <= (long)c->count; k++) {
        if (!O.env)
            atomic_fetch_add(&SH->entered[cs], 1);
        fccl_request_t *req = NULL;
        if (finish(fccl_barrier(t->g, REQ(c)), &req, c->async) < 0)
            return -1;
        long seen = O.env ? n * k : atomic_load(&SH->entered[cs]);
        if (seen < n * k || seen > n * (k + 1) - 1) {
            FAIL(t, c, "after barrier %ld: %ld entries, want %ld to %ld", k,
                 seen, n * k, n * (k + 1) - 1);
            return 1;
        }
        int root = (int)(k % n);
        uint64_t want = (uint64_t)cs * 1000003u + (uint64_t)k, got = 0;
        if (t->rank == root)
            got = want;
        if (finish(fccl_broadcast(&got, 1, FCCL_UINT64, root, t->g, REQ(c)),
                   &req, c->async) < 0)
            return -1;
        if (got != want) {
            FAIL(t, c, "broadcast %ld from rank %d: got %llu, want %llu", k,
                 root, (unsigned long long)got, (unsigned long long)want);
            return 1;
        }
    }
    return 0;
}

/* Small broadcasts back to back, the root changing halfway and the
 * others pausing every 23rd call: a one-way root (coll/shm/oneway.c) runs
 * as far ahead of a slow member as it may, wrapping its records or sets
 * many times, and every member must still get each call's own words.
 * count calls of `c->shape` uint64 words each (8 B: records; 16 B: sets). */
static int op_bcast_run(struct rt *t, const struct tc *c, int cs, uint64_t *h)
{
    *h = 0;
    long half = (long)c->count / 2;
    for (long k = 1; k <= (long)c->count; k++) {
        int root = k <= half ? 0 : t->n - 1, words = c->shape;
        uint64_t want[2], got[2] = {0, 0};
        for (int i = 0; i < words; i++)
            want[i] = (uint64_t)cs * 1000003u + (uint64_t)k * 2 + (uint64_t)i;
        if (t->rank == root)
            memcpy(got, want, sizeof(want));
        else if (k % 23 == 0)
            usleep(100); /* lets the root get ahead */
        fccl_request_t *req = NULL;
        if (finish(fccl_broadcast(got, (size_t)words, FCCL_UINT64, root,
                                  t->g, REQ(c)), &req, c->async) < 0)
            return -1;
        for (int i = 0; i < words; i++)
            if (got[i] != want[i]) {
                FAIL(t, c, "broadcast %ld of a run, from rank %d, word %d: "
                     "got %llu, want %llu", k, root, i,
                     (unsigned long long)got[i], (unsigned long long)want[i]);
                return 1;
            }
    }
    return 0;
}

/* Ring shift with isend/irecv (async = 1), blocking send/recv ordered by
 * parity (async = 0), or one batch to and from every rank (uneven = 1). */
static int op_p2p(struct rt *t, const struct tc *c, int cs, uint64_t *h)
{
    int n = t->n, me = t->rank, right = (me + 1) % n, left = (me - 1 + n) % n;
    size_t es = fccl_dtype_size(c->dt), len = c->count * es;
    *h = 0;
    if (n == 1)
        return 0;
    unsigned char *out = xmalloc(len * (size_t)n), *in = xmalloc(len * (size_t)n);
    int rc, bad = 0;
    if (c->uneven) {
        fccl_p2p_op_t ops[2 * TPH_MAX_RANKS];
        size_t k = 0;
        for (int p = 0; p < n; p++) {
            if (p == me)
                continue;
            ref_fill(out + (size_t)p * len, c->count, c->dt, FCCL_SUM, cs, me,
                     c->count * (size_t)p);
            ops[k++] = (fccl_p2p_op_t){0, in + (size_t)p * len, c->count, c->dt,
                                       p, 11};
            ops[k++] = (fccl_p2p_op_t){1, out + (size_t)p * len, c->count,
                                       c->dt, p, 11};
        }
        fccl_request_t *req = NULL;
        rc = finish(fccl_batch_isend_irecv(ops, k, t->g, &req), &req, 1);
        for (int p = 0; rc >= 0 && !bad && p < n; p++) {
            if (p == me)
                continue;
            unsigned char *want = xmalloc(len);
            ref_fill(want, c->count, c->dt, FCCL_SUM, cs, p, c->count * (size_t)me);
            bad = check_bytes(t, c, in + (size_t)p * len, want, len, "batch");
            free(want);
        }
    } else {
        ref_fill(out, c->count, c->dt, FCCL_SUM, cs, me, 0);
        if (c->async) {
            fccl_request_t *rs = NULL, *rr = NULL;
            rc = fccl_irecv(in, c->count, c->dt, left, 5, t->g, &rr);
            if (rc >= 0)
                rc = fccl_isend(out, c->count, c->dt, right, 5, t->g, &rs);
            if (rc >= 0)
                rc = finish(FCCL_OK, &rs, c->async);
            if (rc >= 0)
                rc = finish(FCCL_OK, &rr, c->async);
        } else if (me % 2 == 0) {
            rc = fccl_send(out, c->count, c->dt, right, 6, t->g);
            if (rc >= 0)
                rc = fccl_recv(in, c->count, c->dt, left, 6, t->g);
        } else {
            rc = fccl_recv(in, c->count, c->dt, left, 6, t->g);
            if (rc >= 0)
                rc = fccl_send(out, c->count, c->dt, right, 6, t->g);
        }
        if (rc >= 0) {
            unsigned char *want = xmalloc(len);
            ref_fill(want, c->count, c->dt, FCCL_SUM, cs, left, 0);
            bad = check_bytes(t, c, in, want, len, "p2p");
            free(want);
        }
    }
    free(in);
    free(out);
    return rc < 0 ? -1 : bad;
}

#include "coll_check_shaped.h"

/* ---- the case runner ---- */

typedef int (*op_fn)(struct rt *, const struct tc *, int, uint64_t *);

static const struct {
    const char *op;
    op_fn fn;
    int same; /* result identical on every rank */
} ops[] = {
    {"all_reduce", op_all_reduce, 1},   {"broadcast", op_broadcast, 1},
    {"reduce", op_reduce, 0},           {"all_gather", op_all_gather, 1},
    {"reduce_scatter", op_reduce_scatter, 0},
    {"gather", op_gather, 0},           {"scatter", op_scatter, 0},
    {"all_to_all", op_all_to_all, 0},   {"neighbor_exchange", op_neighbor, 0},
    {"barrier", op_barrier, 0},         {"p2p", op_p2p, 0},
    {"barrier_bcast", op_barrier_bcast, 0},
    {"bcast_run", op_bcast_run, 0},
    {"neighbor_exchange_v2", op_nbr_v2, 0},
    {"all_to_all_dims", op_a2a_dims, 0},
};

static void describe(const struct tc *c, char *buf, size_t len)
{
    if (strstr(c->op, "_v2") || strstr(c->op, "_dims")) {
        snprintf(buf, len, "%s %s shape=%d n=%zu%s%s%s%s", c->op,
                 fccl_dtype_name(c->dt), c->shape, c->count,
                 c->algo ? " algo=" : "", c->algo ? c->algo : "",
                 c->inplace ? " inplace" : "",
                 c->async == 1 ? " async" : c->async == 2 ? " poll" : "");
        return;
    }
    snprintf(buf, len, "%s%s %s %s n=%zu%s%s%s%s%s root=%d", c->op,
             c->uneven ? "_v" : "", fccl_dtype_name(c->dt),
             fccl_redop_name(c->rop), c->count, c->algo ? " algo=" : "",
             c->algo ? c->algo : "", c->inplace ? " inplace" : "",
             c->async == 1 ? " async" : c->async == 2 ? " poll" : "",
             c->hier ? " 2hosts" : "", c->root);
}

static void run(struct rt *t, struct tc c)
{
    int cs = ++t->cs;
    if (cs >= MAX_CASES || t->dead)
        return;
    size_t k = 0;
    while (strcmp(ops[k].op, c.op) != 0)
        k++;
    if (c.root >= t->n)
        c.root = t->n - 1;
    if (t->rank == 0 || O.env) {
        describe(&c, SH->name[cs], sizeof(SH->name[cs]));
        SH->same[cs] = (unsigned char)ops[k].same;
        SH->ncases = cs;
    }
    if (O.verbose && t->rank == 0)
        fprintf(stderr, "case %d: %s\n", cs, SH->name[cs]);
    struct fccl_group *g = grp(t, &c);
    if (c.algo && fccl_set_algo(g, c.op, c.algo) < 0) {
        FAIL(t, &c, "set_algo: %s", fccl_last_error());
        t->fails++;
        return;
    }
    uint64_t h = 0;
    int bad = ops[k].fn(t, &c, cs, &h);
    if (c.algo)
        fccl_set_algo(g, c.op, "auto");
    SH->hash[cs][t->rank] = h;
    SH->ran[t->rank]++;
    if (bad < 0) {
        FAIL(t, &c, "failed: %s (%s)", fccl_last_error(),
             fccl_strerror(last_rc));
        t->dead = 1;
    }
    if (bad)
        SH->fails[t->rank] = ++t->fails; /* visible even if we hang later */
}

#include "coll_check_cases.h"

/* ---- the harness body and main ---- */

static int body(struct fccl_tp *tp, int rank, int n, void *arg)
{
    (void)arg;
    struct rt t = {.tp = tp, .rank = rank, .n = n};
    int hosts[TPH_MAX_RANKS];
    for (int r = 0; r < n; r++) /* two fake hosts, the second smaller */
        hosts[r] = n > 1 && r >= (n + 1) / 2;
    t.g = make_group(tp, rank, n, NULL, 1, NULL, 60000, "fccl_world_group");
    t.g2 = make_group(tp, rank, n, NULL, 2, hosts, 60000, "two_hosts");
    if (!t.g || !t.g2)
        return 1;
    int rc = mode_run(&t);
    free_group(t.g2);
    free_group(t.g);
    SH->fails[rank] = t.fails;
    return rc || t.fails ? 1 : 0;
}

/* Results every rank must share: compare the recorded hashes. */
static int compare_hashes(int n)
{
    int bad = 0;
    for (int cs = 1; cs <= SH->ncases; cs++) {
        if (!SH->same[cs])
            continue;
        for (int r = 1; r < n; r++)
            if (SH->hash[cs][r] != SH->hash[cs][0]) {
                fprintf(stderr, "case %d %s: rank %d's result differs from "
                        "rank 0's\n", cs, SH->name[cs], r);
                bad++;
                break;
            }
    }
    return bad;
}

static void usage(void)
{
    fprintf(stderr, "usage: coll_check -p PROVIDER -n RANKS [-m matrix|smoke|"
                    "args|groups|kill|abort] [-r] [-t SEC] [-v]\n"
                    "       coll_check -e [-p PROVIDER] [-m matrix|smoke] "
                    "[-r] [-t SEC] [-v]   (one rank, env://)\n");
    exit(2);
}

/* All ranks agree on a result hash iff its max equals its min. */
static int env_compare(fccl_group_t *w, int ncases, int *fails)
{
    int n = (ncases < MAX_CASES - 1 ? ncases : MAX_CASES - 1) + 1, bad = 0;
    uint64_t *mx = calloc((size_t)n, 8), *mn = calloc((size_t)n, 8);
    uint64_t *mine = calloc((size_t)n, 8);
    int64_t f = *fails, fsum = 0;
    for (int cs = 0; cs < n; cs++)
        mine[cs] = SH->hash[cs][t_rank_env];
    if (fccl_all_reduce(mine, mx, (size_t)n, FCCL_UINT64, FCCL_MAX, w, NULL) < 0 ||
        fccl_all_reduce(mine, mn, (size_t)n, FCCL_UINT64, FCCL_MIN, w, NULL) < 0 ||
        fccl_all_reduce(&f, &fsum, 1, FCCL_INT64, FCCL_SUM, w, NULL) < 0) {
        fprintf(stderr, "coll_check: comparing results: %s\n",
                fccl_last_error());
        bad = 1;
    }
    for (int cs = 1; cs < n && !bad; cs++)
        if (SH->same[cs] && mx[cs] != mn[cs]) {
            if (t_rank_env == 0)
                fprintf(stderr, "case %d %s: the ranks' results differ\n", cs,
                        SH->name[cs]);
            bad++;
        }
    *fails = (int)fsum;
    free(mx);
    free(mn);
    free(mine);
    return bad;
}

/* -e: one rank of a launched job. */
static int env_main(void)
{
    if (strcmp(O.mode, "matrix") != 0 && strcmp(O.mode, "smoke") != 0) {
        fprintf(stderr, "coll_check -e: only matrix and smoke\n");
        return 2;
    }
    fccl_init_opts_t o;
    fccl_init_opts_init(&o);
    o.provider = O.provider_given ? O.provider : NULL;
    fccl_group_t *w;
    if (fccl_init(&o, &w) < 0) {
        fprintf(stderr, "coll_check: fccl_init: %s\n", fccl_last_error());
        return 1;
    }
    int rank = fccl_get_rank(), n = fccl_get_world_size();
    t_rank_env = rank;
    if (n > TPH_MAX_RANKS) {
        fprintf(stderr, "coll_check: at most %d ranks\n", TPH_MAX_RANKS);
        return 2;
    }
    int node_of[TPH_MAX_RANKS];
    for (int r = 0; r < n; r++)
        node_of[r] = fccl_node_of(r);
    int64_t to = (O.timeout_s ? O.timeout_s : 300) * 1000;
    struct rt t = {.tp = w->tp, .rank = rank, .n = n};
    t.g = make_group(w->tp, rank, n, NULL, 1, node_of, to, "fccl_world_group");
    t.g2 = make_group(w->tp, rank, n, NULL, 2, node_of, to, "real_hosts");
    if (!t.g || !t.g2)
        return 1;
    fccl_topology_t topo;
    fccl_get_topology(&topo);
    double t0 = th_now();
    int rc = mode_run(&t);
    double secs = th_now() - t0;
    free_group(t.g2);
    free_group(t.g);
    int fails = t.fails, ran = SH->ran[rank];
    int bad = env_compare(w, t.cs, &fails);
    if (rank == 0)
        printf("coll_check: provider=%s (env, %d hosts) ranks=%d mode=%s%s: "
               "%d cases, %d failed, %d hash mismatches, %.1f s\n",
               O.provider_given ? O.provider : "auto", topo.node_count, n,
               O.mode, O.reduced ? " reduced" : "", ran, fails, bad, secs);
    fccl_finalize();
    return rc == 0 && bad == 0 && fails == 0 ? 0 : 1;
}

int main(int argc, char **argv)
{
    int c;
    while ((c = getopt(argc, argv, "p:n:m:rt:ve")) != -1) {
        switch (c) {
        case 'p': O.provider = optarg; O.provider_given = 1; break;
        case 'e': O.env = 1; break;
        case 'n': O.n = atoi(optarg); break;
        case 'm': O.mode = optarg; break;
        case 'r': O.reduced = 1; break;
        case 't': O.timeout_s = atoi(optarg); break;
        case 'v': O.verbose = 1; break;
        default: usage();
        }
    }
    if (O.n < 1 || O.n > TPH_MAX_RANKS)
        usage();
    if (th_reduced())
        O.reduced = 1;
    if (O.env) {
        SH = calloc(1, sizeof(*SH));
        int rc = SH ? env_main() : 3;
        free(SH);
        return rc;
    }
    SH = mmap(NULL, sizeof(*SH), PROT_READ | PROT_WRITE,
              MAP_SHARED | MAP_ANONYMOUS, -1, 0);
    if (SH == MAP_FAILED)
        return 3;
    memset(SH, 0, sizeof(*SH));
    struct tp_harness h = {.provider = O.provider, .nranks = O.n,
                           .timeout_ms = (O.timeout_s ? O.timeout_s : 300) * 1000};
    double t0 = th_now();
    int rc = tp_harness_run(&h, body, NULL);
    double secs = th_now() - t0;
    int bad = compare_hashes(O.n), fails = 0, ran = SH->ran[0];
    if (strcmp(O.mode, "kill") == 0 || strcmp(O.mode, "abort") == 0)
        fails += judge_failures(O.n);
    for (int r = 0; r < O.n; r++)
        fails += SH->fails[r];
    printf("coll_check: provider=%s (%s) ranks=%d mode=%s%s: %d cases, "
           "%d failed, %d hash mismatches, %.1f s\n",
           O.provider, h.desc, O.n, O.mode, O.reduced ? " reduced" : "", ran,
           fails, bad, secs);
    return rc == 0 && bad == 0 && fails == 0 ? 0 : 1;
}
