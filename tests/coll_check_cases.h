/*
 * coll_check_cases.h: the case lists and special modes of coll_check.c
 * (included once from there; it uses that file's types and helpers).
 *
 * Every rank walks the same list in the same order, so case numbers and
 * sequence numbers agree everywhere.
 */
#ifndef FCCL_TESTS_COLL_CHECK_CASES_H
#define FCCL_TESTS_COLL_CHECK_CASES_H

#include <unistd.h>

#define F32 FCCL_FLOAT32
/* A case: op, dtype, redop, count, forced algorithm, then any of
 * .inplace, .async, .root, .uneven, .hier. */
#define TC(o, d, r, c, a, ...)                                                 \
    ((struct tc){.op = (o), .dt = (d), .rop = (r), .count = (c), .algo = (a), \
                 __VA_ARGS__})

/* ---- the matrix ---- */

static void m_all_reduce(struct rt *t, const size_t *counts, int nc, int smoke)
{
    /* the hier family on the two fake hosts: even n gives equal hosts
     * (hier2d runs), odd n unequal ones (hier2d falls back to leaders) */
    static const char *algos[] = {NULL,   "rd",     "ring",        "rabenseifner",
                                  "hier", "shm",    "hier2d",      "hier_leaders"};
#define ON_HOSTS(a) ((a) == 4 || (a) >= 6)
    for (int i = 0; i < nc; i++)
        for (int a = 0; a < 8; a++)
            run(t, TC("all_reduce", F32, FCCL_SUM, counts[i], algos[a],
                               .hier = ON_HOSTS(a)));
    /* shm on a group spread over (fake) hosts runs the ring instead */
    run(t, TC("all_reduce", F32, FCCL_SUM, 1025, "shm", .hier = 1));
    for (int a = 0; a < 8; a++) {
        run(t, TC("all_reduce", F32, FCCL_SUM, 1025, algos[a],
                           .inplace = 1, .hier = ON_HOSTS(a)));
        run(t, TC("all_reduce", F32, FCCL_AVG, 7, algos[a],
                           .async = 1, .hier = ON_HOSTS(a)));
    }
#undef ON_HOSTS
    run(t, TC("all_reduce", F32, FCCL_MAX, counts[nc - 1], NULL,
                       .async = 2));
    if (smoke)
        return;
    /* every dtype and op: auto (rd here), ring, rabenseifner, shm */
    for (int dt = 0; dt < FCCL_NUM_DTYPES; dt++)
        for (int op = 0; op < FCCL_NUM_OPS; op++) {
            if (!op_defined((fccl_dtype_t)dt, (fccl_redop_t)op))
                continue;
            run(t, TC("all_reduce", (fccl_dtype_t)dt, (fccl_redop_t)op,
                               1025, NULL));
            if (op >= FCCL_BAND)
                continue; /* the kernels are shared: one algorithm is enough */
            run(t, TC("all_reduce", (fccl_dtype_t)dt, (fccl_redop_t)op,
                               1025, "ring"));
            run(t, TC("all_reduce", (fccl_dtype_t)dt, (fccl_redop_t)op,
                               7, "rabenseifner", .inplace = 1));
            run(t, TC("all_reduce", (fccl_dtype_t)dt, (fccl_redop_t)op,
                               1025, "shm"));
        }
    run(t, TC("all_reduce", FCCL_FLOAT16, FCCL_SUM, 70001, "hier",
                       .hier = 1));
    run(t, TC("all_reduce", FCCL_BFLOAT16, FCCL_PROD, 70001, "hier2d",
                       .hier = 1, .inplace = 1));
    run(t, TC("all_reduce", FCCL_INT64, FCCL_MAX, BIG, "hier2d", .hier = 1));
    run(t, TC("all_reduce", FCCL_BFLOAT16, FCCL_SUM, 70001, "ring"));
}

static void m_rooted(struct rt *t, const size_t *counts, int nc)
{
    int last = t->n - 1;
    for (int i = 0; i < nc; i++)
        for (int root = 0; root <= last; root += last > 0 ? last : 1) {
            run(t, TC("broadcast", F32, FCCL_SUM, counts[i], "binomial",
                               .root = root));
            run(t, TC("broadcast", FCCL_INT8, FCCL_SUM, counts[i],
                               "scatter_ag", .root = root));
            run(t, TC("broadcast", FCCL_INT32, FCCL_SUM, counts[i], "shm",
                               .root = root));
            run(t, TC("reduce", F32, FCCL_SUM, counts[i], NULL,
                               .root = root));
            run(t, TC("reduce", F32, FCCL_SUM, counts[i], "binomial",
                               .root = root));
            run(t, TC("reduce", FCCL_INT64, FCCL_MAX, counts[i], "shm",
                               .root = root));
            run(t, TC("gather", FCCL_UINT8, FCCL_SUM, counts[i], NULL,
                               .root = root));
            run(t, TC("gather", F32, FCCL_SUM,
                               counts[i], "linear", .root = root));
            run(t, TC("gather", FCCL_INT32, FCCL_SUM,
                               counts[i], "shm", .root = root));
            run(t, TC("scatter", F32, FCCL_SUM, counts[i], "linear",
                               .root = root));
            run(t, TC("scatter", FCCL_INT8, FCCL_SUM, counts[i], "shm",
                               .root = root));
            run(t, TC("scatter", FCCL_FLOAT64, FCCL_SUM, counts[i],
                               NULL, .root = root));
        }
    for (int op = 0; op < FCCL_NUM_OPS; op++) {
        run(t, TC("reduce", FCCL_INT32, (fccl_redop_t)op, 1025, NULL,
                           .root = 1));
        if (op_defined(FCCL_BFLOAT16, (fccl_redop_t)op))
            run(t, TC("reduce", FCCL_BFLOAT16, (fccl_redop_t)op, 7, NULL,
                               .root = 0, .async = 1));
    }
    run(t, TC("broadcast", FCCL_FLOAT16, FCCL_SUM, 1025, NULL,
                       .root = 1, .async = 1));
    /* more than one 2 MiB slot: several rounds */
    run(t, TC("broadcast", F32, FCCL_SUM, 600001, "shm", .root = last));
    run(t, TC("reduce", F32, FCCL_SUM, 1025, NULL, .root = 1,
                       .inplace = 1));
    run(t, TC("reduce", F32, FCCL_SUM, 1025, "shm", .root = 1, .inplace = 1));
    /* more than a slot: several rounds */
    run(t, TC("reduce", F32, FCCL_SUM, 600001, "shm", .root = last));
    run(t, TC("gather", F32, FCCL_SUM, 1025, NULL, .root = 1,
                       .inplace = 1));
    run(t, TC("scatter", F32, FCCL_SUM, 1025, NULL, .root = 1,
                       .inplace = 1));
    run(t, TC("gather", F32, FCCL_SUM, 1025, "shm", .root = 1, .inplace = 1));
    run(t, TC("scatter", F32, FCCL_SUM, 1025, "shm", .root = 1, .inplace = 1));
    run(t, TC("gather", F32, FCCL_SUM, 7, NULL, .root = 0, .async = 2));
    run(t, TC("scatter", F32, FCCL_SUM, 7, NULL, .root = 1, .async = 1));
}

/* Small broadcasts back to back (one-way through the segment on shm, up
 * to COLL_SHM_TINY bytes), eight from each root in turn, the rank after
 * the root late at the first of them: the root runs ahead of it past the
 * flow control's limit (4 calls) and must wait there, and every rank must
 * still get each call's bytes; all_reduces in between share the segment. */
static void m_bcast_burst(struct rt *t)
{
    for (int k = 0; k < 32; k++) {
        int root = (k / 8) % t->n;
        if (t->n > 1 && t->rank == (root + 1) % t->n && k % 8 == 0)
            usleep(20000);
        run(t, TC("broadcast", FCCL_UINT8, FCCL_SUM, (size_t)(k * 37) % 449,
                  k % 3 ? NULL : "shm", .root = root));
        if (k % 8 == 7)
            run(t, TC("all_reduce", F32, FCCL_SUM, 7, NULL));
    }
}

/* Per-rank counts for the block operations: the big case splits ~BIG
 * over the ranks (an odd number per rank). */
static size_t per_rank(size_t count, int n)
{
    return count == BIG ? (BIG / (size_t)n) | 1 : count;
}

static void m_blocks(struct rt *t, const size_t *counts, int nc, int smoke)
{
    for (int i = 0; i < nc; i++) {
        size_t c = per_rank(counts[i], t->n);
        for (int v = 0; v < 2; v++) {
            run(t, TC("all_gather", F32, FCCL_SUM, c, "ring", .uneven = v));
            run(t, TC("all_gather", FCCL_INT64, FCCL_SUM, c, "bruck",
                               .uneven = v));
            run(t, TC("all_gather", FCCL_INT8, FCCL_SUM, c, "shm",
                               .uneven = v));
            run(t, TC("reduce_scatter", F32, FCCL_SUM, c, NULL,
                               .uneven = v));
            run(t, TC("reduce_scatter", F32, FCCL_SUM, c, "ring",
                               .uneven = v));
            run(t, TC("reduce_scatter", FCCL_INT32, FCCL_PROD, c, "shm",
                               .uneven = v));
        }
        for (int v = 0; v < 3; v++) {
            run(t, TC("all_to_all", F32, FCCL_SUM, c, "pairwise",
                               .uneven = v));
            run(t, TC("all_to_all", FCCL_UINT32, FCCL_SUM, c, "linear",
                               .uneven = v));
            /* shm: even blocks (small ones in the slots' halves, larger
             * by single copy); _v runs pairwise */
            run(t, TC("all_to_all", FCCL_UINT8, FCCL_SUM, c, "shm",
                               .uneven = v));
        }
        if (counts[i] != BIG)
            run(t, TC("neighbor_exchange", F32, FCCL_SUM, counts[i], NULL));
    }
    for (int s = 1; s <= 2; s++) {
        run(t, TC("all_gather", F32, FCCL_SUM, 1025, "ring", .inplace = s));
        run(t, TC("all_gather", F32, FCCL_SUM, 7, "bruck", .inplace = s));
        run(t, TC("all_gather", F32, FCCL_SUM, 1025, "shm", .inplace = s));
        /* blocks in the signalling lines (up to 448 B) */
        run(t, TC("all_gather", F32, FCCL_SUM, 7, "shm", .inplace = s,
                  .uneven = s - 1));
        /* blocks for the single copy beyond two ranks (up to 512 KiB) */
        run(t, TC("all_gather", F32, FCCL_SUM, 40001, "shm", .inplace = s,
                  .uneven = s - 1));
        /* blocks larger than a slot (2 MiB): several rounds, in place */
        if (!smoke)
            run(t, TC("all_gather", F32, FCCL_SUM, 600001, "shm",
                      .inplace = s, .uneven = s - 1));
    }
    /* blocks beyond 512 KiB go through the slots in rounds (a piece
     * that is not a whole number of lines last), out of place my own
     * block copied to its place piece by piece */
    if (!smoke) {
        run(t, TC("all_gather", F32, FCCL_SUM, 600001, "shm"));
        run(t, TC("all_gather", F32, FCCL_SUM, 600001, "shm", .uneven = 1));
        run(t, TC("all_to_all", F32, FCCL_SUM, 150001, "shm"));
        run(t, TC("all_to_all", F32, FCCL_SUM, 150001, "shm", .inplace = 1));
    }
    run(t, TC("reduce_scatter", F32, FCCL_SUM, 1025, NULL, .inplace = 1));
    run(t, TC("reduce_scatter", F32, FCCL_SUM, 1025, "ring", .inplace = 1));
    run(t, TC("reduce_scatter", F32, FCCL_SUM, 1025, "shm", .inplace = 1));
    run(t, TC("all_to_all", F32, FCCL_SUM, 1025, "shm", .inplace = 1));
    run(t, TC("all_to_all", F32, FCCL_SUM, 7, "shm", .inplace = 1));
    /* blocks of more than a slot's share: several rounds, in place */
    if (!smoke)
        run(t, TC("reduce_scatter", F32, FCCL_SUM, 300001, "shm",
                  .inplace = 1, .uneven = 1));
    run(t, TC("reduce_scatter", F32, FCCL_SUM, 33, NULL, .inplace = 1,
                       .uneven = 1));
    run(t, TC("all_to_all", F32, FCCL_SUM, 1025, "pairwise", .inplace = 1));
    run(t, TC("all_to_all", F32, FCCL_SUM, 9, "linear", .inplace = 1,
                       .uneven = 1));
    run(t, TC("all_gather", F32, FCCL_SUM, 7, NULL, .async = 1, .uneven = 1));
    run(t, TC("reduce_scatter", F32, FCCL_SUM, 7, NULL, .async = 1));
    run(t, TC("all_to_all", F32, FCCL_SUM, 7, NULL, .async = 2,
                       .uneven = 2));
    run(t, TC("neighbor_exchange", FCCL_INT8, FCCL_SUM, 5, NULL, .async = 1));
    if (smoke)
        return;
    for (int op = 0; op < FCCL_NUM_OPS; op++)
        for (int dt = 0; dt < FCCL_NUM_DTYPES; dt += 3)
            if (op_defined((fccl_dtype_t)dt, (fccl_redop_t)op))
                run(t, TC("reduce_scatter", (fccl_dtype_t)dt,
                                   (fccl_redop_t)op, 7, NULL, .uneven = op % 2));
}

static void m_sync(struct rt *t, const size_t *counts, int nc)
{
    run(t, TC("barrier", FCCL_UINT8, FCCL_SUM, 0, NULL));
    run(t, TC("barrier", FCCL_UINT8, FCCL_SUM, 0, "dissemination"));
    run(t, TC("barrier", FCCL_UINT8, FCCL_SUM, 0, "shm"));
    run(t, TC("barrier", FCCL_UINT8, FCCL_SUM, 0, NULL, .async = 1));
    /* count: rounds of barrier then broadcast */
    run(t, TC("barrier_bcast", FCCL_UINT64, FCCL_SUM, 60, NULL));
    run(t, TC("barrier_bcast", FCCL_UINT64, FCCL_SUM, 20, NULL, .async = 1));
    /* count: calls; shape: words a call (8 B go in records, 16 in sets) */
    run(t, TC("bcast_run", FCCL_UINT64, FCCL_SUM, 2400, NULL, .shape = 1));
    run(t, TC("bcast_run", FCCL_UINT64, FCCL_SUM, 200, NULL, .shape = 2));
    for (int i = 0; i < nc; i++) {
        size_t c = per_rank(counts[i], t->n);
        run(t, TC("p2p", F32, FCCL_SUM, c, NULL));
        run(t, TC("p2p", FCCL_INT64, FCCL_SUM, c, NULL, .async = 1));
        run(t, TC("p2p", FCCL_UINT8, FCCL_SUM, c, NULL, .uneven = 1));
    }
}

/* Several asynchronous collectives in flight, a blocking one queued behind
 * them, handles finished out of order: results must match call order. */
static void m_async_chain(struct rt *t)
{
    enum { K = 4 };
    int cs[K];
    size_t cnt = 4099;
    float *in[K], *out[K];
    fccl_request_t *req[K];
    int rc = FCCL_OK;
    for (int k = 0; k < K; k++) {
        cs[k] = ++t->cs;
        if ((t->rank == 0 || O.env) && cs[k] < MAX_CASES) {
            snprintf(SH->name[cs[k]], sizeof(SH->name[0]),
                     "async chain %d of %d (all_reduce float32 n=%zu)", k, K, cnt);
            SH->same[cs[k]] = 1;
            SH->ncases = cs[k];
        }
        in[k] = xmalloc(cnt * 4);
        out[k] = xmalloc(cnt * 4);
        ref_fill(in[k], cnt, F32, FCCL_SUM, cs[k], t->rank, 0);
        if (rc >= 0 && !t->dead)
            rc = fccl_all_reduce(in[k], out[k], cnt, F32, FCCL_SUM, t->g, &req[k]);
        else
            req[k] = NULL;
    }
    struct tc c = TC("all_reduce", F32, FCCL_SUM, cnt, NULL, .root = 0);
    if (rc >= 0 && !t->dead)
        rc = fccl_barrier(t->g, NULL); /* queues behind the four */
    for (int k = K - 1; k >= 0; k--) {
        int w = req[k] ? fccl_wait(req[k], -1) : FCCL_OK;
        if (w < 0 && rc >= 0)
            rc = w;
        SH->hash[cs[k]][t->rank] = ref_hash(out[k], cnt * 4);
        SH->ran[t->rank]++;
        if (rc >= 0 && !t->dead && check_red(t, &c, out[k], cnt, 0, cs[k]))
            t->fails++;
        free(in[k]);
        free(out[k]);
    }
    if (rc < 0) {
        fprintf(stderr, "[rank %d] async chain failed: %s\n", t->rank,
                fccl_last_error());
        t->fails++;
        t->dead = 1;
    }
}

/* A group's first barrier (fccl_init's) goes by tokens: a segment is not
 * worth making for it.  From the second on, a group whose members all
 * share this host waits in the segment (2 ranks: 0.44-0.51 us a barrier
 * against 1.29-1.34), even if nothing else has made one.  Run first, on
 * the untouched group. */
static void m_first_barriers(struct rt *t)
{
    int local = t->n > 1;
    for (int q = 0; q < t->n; q++)
        if (q != t->rank && !tp_peer_is_local(t->tp, q))
            local = 0;
    const char *want[2] = {"dissemination", local ? "shm" : "dissemination"};
    for (int i = 0; i < 2; i++) {
        const char *got = coll_algo_for(t->g, "barrier", 0, FCCL_UINT8, 0);
        if (strcmp(got, want[i]) != 0) {
            fprintf(stderr, "[rank %d] barrier %d of a new group: %s, want "
                            "%s\n", t->rank, i + 1, got, want[i]);
            t->fails++;
        }
        if (fccl_barrier(t->g, NULL) < 0) {
            fprintf(stderr, "[rank %d] barrier %d: %s\n", t->rank, i + 1,
                    fccl_last_error());
            t->fails++;
            t->dead = 1;
            return;
        }
    }
}

static int matrix(struct rt *t, int smoke)
{
    static const size_t counts[] = {0, 1, 7, 1025, BIG};
    int nc = O.reduced || smoke ? 4 : 5;
    m_first_barriers(t);
    m_all_reduce(t, counts, nc, smoke);
    m_rooted(t, counts, nc);
    m_bcast_burst(t);
    m_blocks(t, counts, nc, smoke);
    m_sync(t, counts, nc);
    m_shaped(t, smoke);
    m_async_chain(t);
    return 0;
}

/* ---- argument errors: refused locally, nothing sent ---- */

static int expect_invalid(struct rt *t, int rc, const char *what,
                          const char *must_say)
{
    const char *msg = fccl_last_error();
    if (rc == FCCL_ERR_INVALID && (!must_say || strstr(msg, must_say)))
        return 0;
    fprintf(stderr, "[rank %d] %s: got %d (%s), message '%s'%s%s\n", t->rank,
            what, rc, fccl_strerror(rc), msg, must_say ? ", should say " : "",
            must_say ? must_say : "");
    t->fails++;
    return 1;
}

static int args_mode(struct rt *t)
{
    struct fccl_group *g = t->g;
    int n = t->n, me = t->rank;
    uint32_t seq0 = g->seq;
    float buf[64] = {0}, out[64 * TPH_MAX_RANKS];
    size_t cnt[TPH_MAX_RANKS], cnt2[TPH_MAX_RANKS];
    for (int r = 0; r < n; r++)
        cnt[r] = cnt2[r] = 2;
    fccl_request_t *req = NULL;
#define INV(call, what, say) expect_invalid(t, (call), what, say)
    INV(fccl_all_reduce(buf, out, 4, FCCL_NUM_DTYPES, FCCL_SUM, g, NULL),
        "bad dtype", "dtype");
    INV(fccl_all_reduce(buf, out, 4, F32, FCCL_NUM_OPS, g, NULL), "bad op", "op");
    INV(fccl_all_reduce(buf, out, 4, FCCL_BOOL, FCCL_AVG, g, NULL),
        "avg on bool", "bool");
    INV(fccl_reduce_scatter(buf, out, 1, FCCL_BOOL, FCCL_AVG, g, &req),
        "async avg on bool", "bool");
    INV(fccl_all_reduce(NULL, out, 4, F32, FCCL_SUM, g, NULL), "NULL buffer",
        "NULL");
    INV(fccl_all_reduce(buf, out, SIZE_MAX / 2, F32, FCCL_SUM, g, NULL),
        "count overflow", "overflow");
    INV(fccl_all_reduce(buf, out, 4, F32, FCCL_SUM, NULL, NULL), "NULL group",
        "group");
    INV(fccl_reduce(buf, out, 4, F32, FCCL_SUM, n, g, NULL), "root n", "root");
    INV(fccl_broadcast(buf, 4, F32, -1, g, NULL), "root -1", "root");
    INV(fccl_gather(buf, out, 1, F32, n + 3, g, NULL), "gather root", "root");
    INV(fccl_scatter(buf, out, 1, F32, n, g, NULL), "scatter root", "root");
    INV(fccl_send(buf, 1, F32, n, 0, g), "send peer n", "peer");
    INV(fccl_recv(buf, 1, F32, -1, 0, g), "recv peer -1", "peer");
    INV(fccl_send(buf, 1, F32, me, 0, g), "send to myself", "itself");
    INV(fccl_isend(buf, 1, F32, (me + 1) % n, -4, g, &req), "negative tag", "tag");
    INV(fccl_irecv(buf, 1, FCCL_NUM_DTYPES, (me + 1) % n, 0, g, &req),
        "irecv dtype", "dtype");
    fccl_p2p_op_t bad_op = {1, buf, 1, F32, n, 0};
    INV(fccl_batch_isend_irecv(&bad_op, 1, g, &req), "batch peer", "peer");
    cnt2[me] = 3;
    INV(fccl_all_gather_v(buf, 2, out, cnt2, F32, g, NULL),
        "all_gather_v counts don't add up", "recvcounts");
    INV(fccl_all_to_all_v(buf, cnt, out, cnt2, F32, g, NULL),
        "all_to_all_v self counts differ", "recvcounts");
    cnt2[me] = 2;
    cnt2[0] = SIZE_MAX - 1;
    INV(fccl_reduce_scatter_v(buf, out, cnt2, F32, FCCL_SUM, g, NULL),
        "reduce_scatter_v overflow", "overflow");
    INV(fccl_all_gather_v(buf, 2, out, NULL, F32, g, NULL), "NULL counts",
        "NULL");
    int peers[2] = {me, me};
    const void *sb[2] = {buf, buf};
    void *rb[2] = {out, out};
    size_t nc[2] = {1, 1};
    INV(fccl_neighbor_exchange(peers, sb, nc, 2, peers, rb, nc, 2, F32, g, NULL),
        "neighbor duplicate peer", "twice");
    int far = n;
    INV(fccl_neighbor_exchange(&far, sb, nc, 1, NULL, NULL, NULL, 0, F32, g,
                               NULL),
        "neighbor peer range", "range");
    shaped_args(t);
    INV(fccl_set_algo(g, "all_reduce", "bogus"), "unknown algorithm",
        "rabenseifner");
    INV(fccl_set_algo(g, "all_reduce_x", "ring"), "unknown op", "unknown");
    INV(fccl_wait(NULL, 0), "wait NULL", "NULL");
    INV(fccl_cancel(NULL), "cancel NULL", "NULL");
    if (fccl_group_timeout(g) != g->timeout_ms ||
        fccl_group_timeout(NULL) != -1) {
        fprintf(stderr, "[rank %d] fccl_group_timeout: %lld, want %lld\n", me,
                (long long)fccl_group_timeout(g), (long long)g->timeout_ms);
        t->fails++;
    }
    /* a receive nobody will match, cancelled: freed, nothing sticks (the
     * cases below run on g) */
    fccl_request_t *lone = NULL;
    if (n > 1 && (fccl_irecv(buf, 1, F32, (me + 1) % n, 777, g, &lone) < 0 ||
                  fccl_cancel(lone) != FCCL_OK)) {
        fprintf(stderr, "[rank %d] cancel of a lone irecv: %s\n", me,
                fccl_last_error());
        t->fails++;
    }
    /* FCCL_ALGO_<OP> with an unknown name */
    setenv("FCCL_ALGO_ALL_REDUCE", "bogus", 1);
    struct fccl_group *g3 = make_group(t->tp, me, n, NULL, 3, NULL, 60000, "g3");
    unsetenv("FCCL_ALGO_ALL_REDUCE");
    if (g3) {
        INV(fccl_all_reduce(buf, out, 4, F32, FCCL_SUM, g3, NULL),
            "FCCL_ALGO_ALL_REDUCE=bogus", "FCCL_ALGO_ALL_REDUCE=bogus");
        INV(fccl_all_reduce(buf, out, 4, F32, FCCL_SUM, g3, NULL),
            "FCCL_ALGO choices", "rd, ring, rabenseifner, hier");
        if (g3->seq != 0) {
            fprintf(stderr, "[rank %d] refused call took a sequence number\n",
                    me);
            t->fails++;
        }
        free_group(g3);
    }
#undef INV
    if (g->seq != seq0) {
        fprintf(stderr, "[rank %d] an invalid call took a sequence number "
                "(%u -> %u)\n", me, seq0, g->seq);
        t->fails++;
    }
    /* a collective's handle cannot be cancelled; it is still waited for */
    fccl_request_t *coll_req = NULL;
    if (fccl_barrier(g, &coll_req) == FCCL_OK) {
        expect_invalid(t, fccl_cancel(coll_req), "cancel a collective",
                       "collective");
        if (fccl_wait(coll_req, -1) < 0)
            t->fails++;
    }
    /* nothing was sent: the group still works, with valid forced names */
    setenv("FCCL_ALGO_ALL_REDUCE", "RING", 1);
    struct fccl_group *g4 = make_group(t->tp, me, n, NULL, 4, NULL, 60000, "g4");
    unsetenv("FCCL_ALGO_ALL_REDUCE");
    run(t, TC("all_reduce", F32, FCCL_SUM, 1025, NULL));
    run(t, TC("all_gather", F32, FCCL_SUM, 3, NULL));
    if (g4) {
        float v = 1.0f, sum = 0;
        int rc = fccl_all_reduce(&v, &sum, 1, F32, FCCL_SUM, g4, NULL);
        if (rc < 0 || sum != (float)n) {
            fprintf(stderr, "[rank %d] env-forced ring: rc %d sum %g\n", me, rc,
                    sum);
            t->fails++;
        }
        free_group(g4);
    }
    return 0;
}

/* ---- two overlapping groups from two threads ---- */

struct thr {
    struct rt *t;
    struct fccl_group *g;
    int id, iters, fails;
};

static void *thr_main(void *arg)
{
    struct thr *th = arg;
    struct fccl_group *g = th->g;
    for (int it = 0; it < th->iters && !th->fails; it++) {
        size_t cnt = 1 + (size_t)(it * 37 % 3000);
        int cs = 100000 + th->id * 1000 + it;
        int64_t *in = xmalloc(cnt * 8), *out = xmalloc(cnt * 8);
        ref_fill(in, cnt, FCCL_INT64, FCCL_SUM, cs, g->rank, 0);
        int rc = fccl_all_reduce(in, out, cnt, FCCL_INT64, FCCL_SUM, g, NULL);
        char why[200];
        if (rc < 0) {
            fprintf(stderr, "[rank %d] group %s iteration %d: %s\n",
                    th->t->rank, g->name, it, fccl_last_error());
            th->fails++;
        } else if (ref_check_reduce(out, cnt, 0, FCCL_INT64, FCCL_SUM, cs,
                                    g->size, why, sizeof(why)) >= 0) {
            fprintf(stderr, "[rank %d] group %s iteration %d: %s\n",
                    th->t->rank, g->name, it, why);
            th->fails++;
        }
        if (rc >= 0 && it % 5 == 0 && fccl_barrier(g, NULL) < 0)
            th->fails++;
        free(in);
        free(out);
    }
    return NULL;
}

static int groups_mode(struct rt *t)
{
    int n = t->n, me = t->rank, rev[TPH_MAX_RANKS], even[TPH_MAX_RANKS], ne = 0;
    for (int r = 0; r < n; r++) {
        rev[r] = n - 1 - r;
        if (r % 2 == 0)
            even[ne++] = r;
    }
    struct fccl_group *ga = make_group(t->tp, me, n, NULL, 5, NULL, 20000, "ga");
    struct fccl_group *gb = make_group(t->tp, me, n, rev, 6, NULL, 20000, "gb");
    struct fccl_group *gc = me % 2 == 0 ? make_group(t->tp, me, ne, even, 7, NULL,
                                                     20000, "gc_even")
                                        : NULL;
    struct thr th[3] = {{t, ga, 0, 40, 0}, {t, gb, 1, 40, 0}, {t, gc, 2, 40, 0}};
    pthread_t tid[3];
    int nt = gc ? 3 : 2;
    for (int i = 0; i < nt; i++)
        pthread_create(&tid[i], NULL, thr_main, &th[i]);
    for (int i = 0; i < nt; i++) {
        pthread_join(tid[i], NULL);
        t->fails += th[i].fails;
    }
    SH->ran[me] += nt * 40;
    free_group(gc);
    free_group(gb);
    free_group(ga);
    return 0;
}

/* ---- a rank dies ---- */

static void record(int rank, int rc, double secs)
{
    SH->code[rank] = rc;
    SH->secs[rank] = secs;
    snprintf(SH->msg[rank], sizeof(SH->msg[rank]), "%s", fccl_last_error());
}

/* The timeout is long on purpose: survivors must learn of the death from
 * the dead process itself (FCCL_ERR_PEER), not from the deadline.  With 3
 * ranks the ring all-reduce runs: in a ring of 4, rank 1 neither sends to
 * nor receives from the victim (3) in the first step, it waits on rank 0
 * and must still hear of it.  With 4, the shared-memory one: survivors
 * wait in a barrier of the segment, with no message pending at all. */
#define KILL_TIMEOUT_MS 60000

static int kill_mode(struct rt *t)
{
    int n = t->n, me = t->rank, victim = n - 1;
    struct fccl_group *gk = make_group(t->tp, me, n, NULL, 8, NULL,
                                       KILL_TIMEOUT_MS, "gk");
    static float in[4096], out[4096];
    memset(in, 0, sizeof(in));
    if (!gk)
        return 1;
    fccl_set_algo(gk, "all_reduce", n == 4 ? "shm" : "ring");
    /* a first all-reduce sets the segment up while everyone is alive */
    if (fccl_all_reduce(in, out, 4, F32, FCCL_SUM, gk, NULL) < 0 ||
        fccl_barrier(gk, NULL) < 0)
        return 1;
    if (me == victim) {
        fflush(NULL);
        _exit(0); /* gone without closing anything */
    }
    double t0 = th_now();
    int rc = fccl_all_reduce(in, out, 4096, F32, FCCL_SUM, gk, NULL);
    record(me, rc, th_now() - t0);
    t0 = th_now();
    SH->later[me] = fccl_all_reduce(in, out, 4, F32, FCCL_SUM, gk, NULL);
    SH->later_secs[me] = th_now() - t0;
    SH->ran[me] += 2;
    /* stay alive a while: a survivor that exits is a dead peer too, and
     * the others should be judged on the victim alone */
    th_sleep_ms(1500);
    free_group(gk);
    return 0;
}

/* ---- fccl_group_abort from another thread ---- */

static void *aborter(void *arg)
{
    th_sleep_ms(300);
    fccl_group_abort(arg);
    return NULL;
}

static int abort_mode(struct rt *t)
{
    int n = t->n, me = t->rank;
    struct fccl_group *ga = make_group(t->tp, me, n, NULL, 9, NULL, 30000, "ga");
    if (!ga || fccl_barrier(ga, NULL) < 0)
        return 1;
    pthread_t tid;
    pthread_create(&tid, NULL, aborter, ga);
    float buf[64] = {0}, out[64];
    double t0 = th_now();
    int rc;
    if (me != n - 1) /* the last rank never joins: the others stay pending */
        rc = fccl_all_reduce(buf, out, 64, F32, FCCL_SUM, ga, NULL);
    else
        rc = fccl_recv(buf, 1, F32, 0, 77, ga); /* nobody sends it */
    record(me, rc, th_now() - t0);
    pthread_join(tid, NULL);
    t0 = th_now();
    fccl_request_t *req = NULL;
    int later = fccl_all_reduce(buf, out, 4, F32, FCCL_SUM, ga, &req);
    if (later == FCCL_OK)
        later = fccl_wait(req, -1);
    SH->later[me] = later;
    SH->later_secs[me] = th_now() - t0;
    SH->ran[me] += 2;
    free_group(ga);
    return 0;
}

static int mode_run(struct rt *t)
{
    const char *m = O.mode;
    if (strcmp(m, "matrix") == 0)
        return matrix(t, 0);
    if (strcmp(m, "smoke") == 0)
        return matrix(t, 1);
    if (strcmp(m, "args") == 0)
        return args_mode(t);
    if (strcmp(m, "groups") == 0)
        return groups_mode(t);
    if (strcmp(m, "kill") == 0)
        return t->n < 2 ? 1 : kill_mode(t);
    if (strcmp(m, "abort") == 0)
        return t->n < 2 ? 1 : abort_mode(t);
    fprintf(stderr, "unknown mode %s\n", m);
    return 1;
}

/* Parent side of kill / abort: judge every survivor's outcome. */
static int judge_failures(int n)
{
    int bad = 0, kill = strcmp(O.mode, "kill") == 0;
    int ranks = kill ? n - 1 : n;
    char victim[32];
    snprintf(victim, sizeof(victim), "rank %d", n - 1);
    int named = 0;
    for (int r = 0; r < ranks; r++) {
        int rc = SH->code[r], ok;
        if (kill) /* PEER well before the 60 s deadline */
            ok = rc == FCCL_ERR_PEER && SH->secs[r] < 30.0;
        else
            ok = rc == FCCL_ERR_ABORTED && SH->secs[r] < 0.3 + 4.0;
        named += strstr(SH->msg[r], victim) != NULL;
        int sticky = SH->later[r] == (kill ? rc : FCCL_ERR_ABORTED) &&
                     SH->later_secs[r] < 0.5;
        printf("rank %d: %s after %.2f s: %s; next call: %s after %.3f s\n", r,
               fccl_strerror(rc), SH->secs[r], SH->msg[r],
               fccl_strerror(SH->later[r]), SH->later_secs[r]);
        if (!ok || !sticky) {
            fprintf(stderr, "rank %d: unexpected outcome\n", r);
            bad++;
        }
    }
    if (kill && named < ranks) {
        fprintf(stderr, "only %d of %d survivors named the dead %s\n", named,
                ranks, victim);
        bad++;
    }
    return bad;
}

#endif
