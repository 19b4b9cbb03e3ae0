/*
 * coll_check_shaped.h: the shaped collectives of coll_check.c
 * (neighbor_exchange_v2, all_to_all_dims), included once from there; it
 * uses that file's types and helpers.
 *
 * References are computed element by element from the inputs every rank
 * can generate (coll_ref.h): for each output element, which rank's input
 * element lands there, by index arithmetic of its own, never through the
 * library's packing.  Outputs start as a sentinel pattern, so an element
 * nobody wrote fails too.
 */
#ifndef FCCL_TESTS_COLL_CHECK_SHAPED_H
#define FCCL_TESTS_COLL_CHECK_SHAPED_H

/* (coll_check.c and coll_check_cases.h, further down) */
static void run(struct rt *t, struct tc c);
static int expect_invalid(struct rt *t, int rc, const char *what,
                          const char *must_say);
#define STC(o, d, c, a, ...)                                                   \
    ((struct tc){.op = (o), .dt = (d), .rop = FCCL_SUM, .count = (c),         \
                 .algo = (a), __VA_ARGS__})

/* ---- neighbor_exchange_v2: the layouts ---- */

/* One rank's arguments.  rl: as passed (sides without a rank keep their
 * length, the library must ignore it). */
struct nbr_cfg {
    int sid[8], rid[8];
    int64_t sl[4], rl[4];
    size_t dims[4];
};

/* Direction d's step in the grid, clockwise from the top. */
static const int nbr_di[8] = {-1, -1, 0, 1, 1, 1, 0, -1};
static const int nbr_dj[8] = {0, 1, 1, 1, 0, -1, -1, -1};

/* Variants (c->shape of the case):
 *   0 ring: a column of n ranks, top and bottom only, periodic from 3
 *     ranks; one rank sends its top to itself and receives it as its
 *     bottom; per-rank heights;
 *   1 grid: n/2 x 2 (odd n: n x 1), not periodic, with corners, uneven
 *     lengths, heights by grid row and widths by grid column;
 *   2 zero: the grid with zero left, right and top lengths (ranks named,
 *     blocks empty) and lengths on sides without a rank;
 *   3 self: every rank its own left and right neighbour;
 *   4 empty: the grid with N = 0 (nothing moves). */
#define NBR_VARIANTS 5

static void nbr_grid(int variant, int n, int *P, int *Q, int *periodic)
{
    *Q = (variant == 1 || variant == 2 || variant == 4) && n >= 2 &&
                 n % 2 == 0
             ? 2
             : 1;
    *P = n / *Q;
    *periodic = variant == 0 && n >= 3;
}

static int nbr_at(int i, int j, int P, int Q, int periodic)
{
    if (periodic) {
        i = (i + P) % P;
        j = (j + Q) % Q;
    }
    return i < 0 || i >= P || j < 0 || j >= Q ? -1 : i * Q + j;
}

static void nbr_cfg_of(int variant, int n, int r, struct nbr_cfg *c)
{
    int P, Q, per;
    nbr_grid(variant, n, &P, &Q, &per);
    int i = r / Q, j = r % Q;
    memset(c, 0, sizeof(*c));
    for (int d = 0; d < 8; d++)
        c->sid[d] = c->rid[d] = -1;
    if (variant == 3) {
        c->sid[FCCL_NBR_LEFT] = r;
        c->rid[FCCL_NBR_RIGHT] = r;
        c->sl[FCCL_NBR_LEN_LEFT] = 2;
        c->rl[FCCL_NBR_LEN_RIGHT] = 2;
        c->rl[FCCL_NBR_LEN_TOP] = 5; /* no top rank: adds nothing */
        size_t d3[4] = {1, 2, 3, 4};
        memcpy(c->dims, d3, sizeof(d3));
        return;
    }
    /* send lengths, top bottom left right; what I receive from a side is
     * what that neighbour sends the other way */
    int64_t sl[4] = {1, 2, 2, 1};
    if (variant == 0)
        sl[2] = sl[3] = 0;
    if (variant == 2)
        sl[0] = sl[2] = sl[3] = 0;
    memcpy(c->sl, sl, sizeof(sl));
    int64_t rl[4] = {sl[1], sl[0], sl[3], sl[2]};
    memcpy(c->rl, rl, sizeof(rl));
    for (int d = 0; d < 8; d++) {
        if (variant == 0 && d != FCCL_NBR_TOP && d != FCCL_NBR_BOTTOM)
            continue;
        int p = nbr_at(i + nbr_di[d], j + nbr_dj[d], P, Q, per);
        c->sid[d] = c->rid[d] = p; /* what it sends me lands on that side */
    }
    if (variant == 0 && n == 1) { /* my top comes back as my bottom */
        c->sid[FCCL_NBR_TOP] = 0;
        c->rid[FCCL_NBR_BOTTOM] = 0;
    }
    if (variant == 0 && n == 2) /* a length on a side without a rank */
        c->rl[r == 0 ? FCCL_NBR_LEN_TOP : FCCL_NBR_LEN_BOTTOM] = 3;
    c->dims[0] = variant == 4 ? 0 : variant == 1 ? 1 : 2;
    c->dims[1] = variant == 0 ? 3 : 2;
    c->dims[2] = variant == 0 ? 3 + (size_t)(r % 3) : 2 + (size_t)i;
    c->dims[3] = variant == 0 ? 5 : 3 + 2 * (size_t)j;
}

/* A direction's block: first row and column and their counts, in the
 * input (send) or the output (receive). */
struct nbr_blk {
    size_t r0, nr, c0, nc;
};

static size_t side_len(const struct nbr_cfg *c, int recv, int side)
{
    static const int side_dir[4] = {FCCL_NBR_TOP, FCCL_NBR_BOTTOM,
                                    FCCL_NBR_LEFT, FCCL_NBR_RIGHT};
    if (!recv)
        return (size_t)c->sl[side];
    return c->rid[side_dir[side]] == -1 ? 0 : (size_t)c->rl[side];
}

static struct nbr_blk nbr_blk_of(const struct nbr_cfg *c, int d, int recv)
{
    size_t H = c->dims[2], W = c->dims[3];
    size_t t = side_len(c, recv, 0), b = side_len(c, recv, 1);
    size_t l = side_len(c, recv, 2), r = side_len(c, recv, 3);
    struct nbr_blk k;
    int top = nbr_di[d] < 0, bottom = nbr_di[d] > 0;
    int left = nbr_dj[d] < 0, right = nbr_dj[d] > 0;
    k.nr = top ? t : bottom ? b : H;
    k.nc = left ? l : right ? r : W;
    if (recv) {
        k.r0 = top ? 0 : bottom ? t + H : t;
        k.c0 = left ? 0 : right ? l + W : l;
    } else {
        k.r0 = bottom ? H - b : 0;
        k.c0 = right ? W - r : 0;
    }
    return k;
}

/* The expected element of my output at (n, ch, y, x): the value and
 * whether some rank sends it (0 would be a test bug). */
static int nbr_expect(const struct tc *c, int cs, int n, int me,
                      const struct nbr_cfg *mine, size_t e, size_t Ho,
                      size_t Wo, unsigned char *el)
{
    size_t H = mine->dims[2], W = mine->dims[3], C = mine->dims[1];
    size_t x = e % Wo, y = e / Wo % Ho, ch = e / Wo / Ho % C,
           nn = e / Wo / Ho / C;
    size_t t = side_len(mine, 1, 0), l = side_len(mine, 1, 2);
    if (y >= t && y < t + H && x >= l && x < l + W) {
        size_t src = ((nn * C + ch) * H + (y - t)) * W + (x - l);
        ref_gen1(el, src, c->dt, FCCL_SUM, cs, me);
        return 1;
    }
    for (int d = 0; d < 8; d++) {
        struct nbr_blk rb = nbr_blk_of(mine, d, 1);
        if (mine->rid[d] < 0 || y < rb.r0 || y >= rb.r0 + rb.nr ||
            x < rb.c0 || x >= rb.c0 + rb.nc)
            continue;
        int p = mine->rid[d];
        struct nbr_cfg pc;
        nbr_cfg_of(c->shape, n, p, &pc);
        int sd = -1;
        for (int k = 0; k < 8; k++)
            sd = pc.sid[k] == me ? k : sd;
        if (sd < 0)
            return 0;
        /* k-th element of my block = k-th element of p's block */
        size_t k = ((nn * C + ch) * rb.nr + (y - rb.r0)) * rb.nc + (x - rb.c0);
        struct nbr_blk sb = nbr_blk_of(&pc, sd, 0);
        size_t sx = k % sb.nc, sy = k / sb.nc % sb.nr,
               sp = k / sb.nc / sb.nr; /* (n, c) plane of p */
        size_t src = (sp * pc.dims[2] + sb.r0 + sy) * pc.dims[3] + sb.c0 + sx;
        ref_gen1(el, src, c->dt, FCCL_SUM, cs, p);
        return 1;
    }
    return 0;
}

static int op_nbr_v2(struct rt *t, const struct tc *c, int cs, uint64_t *h)
{
    int n = t->n, me = t->rank;
    struct nbr_cfg mine;
    nbr_cfg_of(c->shape, n, me, &mine);
    size_t es = fccl_dtype_size(c->dt), *d = mine.dims;
    size_t Ho = d[2] + side_len(&mine, 1, 0) + side_len(&mine, 1, 1);
    size_t Wo = d[3] + side_len(&mine, 1, 2) + side_len(&mine, 1, 3);
    size_t in_n = d[0] * d[1] * d[2] * d[3], out_n = d[0] * d[1] * Ho * Wo;
    size_t od[4];
    *h = 0;
    if (fccl_neighbor_exchange_v2_shape(d, 4, mine.sid, mine.sl, mine.rid,
                                        mine.rl, od) < 0 ||
        od[0] != d[0] || od[1] != d[1] || od[2] != Ho || od[3] != Wo) {
        FAIL(t, c, "neighbor_exchange_v2_shape: %s", fccl_last_error());
        return 1;
    }
    unsigned char *in = xmalloc(in_n * es), *out = xmalloc(out_n * es);
    ref_fill(in, in_n, c->dt, FCCL_SUM, cs, me, 0);
    memset(out, 0xab, out_n * es);
    fccl_request_t *req = NULL;
    int rc = finish(fccl_neighbor_exchange_v2(in, d, 4, out, mine.sid,
                                              mine.sl, mine.rid, mine.rl,
                                              c->dt, t->g, REQ(c)),
                    &req, c->async);
    int bad = rc < 0 ? -1 : 0;
    unsigned char el[8];
    for (size_t e = 0; bad == 0 && e < out_n; e++) {
        if (!nbr_expect(c, cs, n, me, &mine, e, Ho, Wo, el)) {
            FAIL(t, c, "test bug: no source for output element %zu", e);
            bad = 1;
        } else if (memcmp(out + e * es, el, es) != 0) {
            FAIL(t, c, "output element %zu of %zu (row %zu col %zu of "
                 "%zux%zu) differs", e, out_n, e / Wo % Ho, e % Wo, Ho, Wo);
            bad = 1;
        }
    }
    free(in);
    free(out);
    return bad;
}

/* ---- all_to_all_dims ---- */

/* Shapes (c->count selects one, c->shape packs split * 8 + concat): 3-D
 * and 4-D with every dimension a multiple of n, and one with a zero. */
static int a2a_dims_of(const struct tc *c, int n, size_t *dims)
{
    static const size_t m3[3] = {1, 2, 3}, m4[4] = {2, 1, 3, 1};
    static const size_t z4[4] = {1, 0, 2, 1};
    int nd = c->count == 3 ? 3 : 4;
    const size_t *m = c->count == 3 ? m3 : c->count == 4 ? m4 : z4;
    for (int i = 0; i < nd; i++)
        dims[i] = m[i] * (size_t)n;
    return nd;
}

static int op_a2a_dims(struct rt *t, const struct tc *c, int cs, uint64_t *h)
{
    int n = t->n, me = t->rank;
    size_t dims[4], bd[4], od[4], got_od[4];
    int nd = a2a_dims_of(c, n, dims);
    int sd = c->shape / 8, cd = c->shape % 8; /* as passed: may be negative */
    int s = sd >= nd ? sd - 8 : sd, cc = cd >= nd ? cd - 8 : cd;
    int S = s < 0 ? s + nd : s, CC = cc < 0 ? cc + nd : cc;
    size_t es = fccl_dtype_size(c->dt), total = 1;
    for (int i = 0; i < nd; i++) {
        bd[i] = dims[i] / (i == S ? (size_t)n : 1);
        total *= dims[i];
    }
    for (int i = 0; i < nd; i++)
        od[i] = bd[i] * (i == CC ? (size_t)n : 1);
    *h = 0;
    if (fccl_all_to_all_dims_shape(dims, (size_t)nd, n, s, cc, got_od) < 0 ||
        memcmp(got_od, od, (size_t)nd * sizeof(size_t)) != 0) {
        FAIL(t, c, "all_to_all_dims_shape: %s", fccl_last_error());
        return 1;
    }
    unsigned char *in = xmalloc(total * es);
    unsigned char *out = c->inplace ? in : xmalloc(total * es);
    ref_fill(in, total, c->dt, FCCL_SUM, cs, me, 0);
    if (!c->inplace)
        memset(out, 0xab, total * es);
    fccl_request_t *req = NULL;
    int rc = finish(fccl_all_to_all_dims(in, out, dims, (size_t)nd, n, s, cc,
                                         c->dt, t->g, REQ(c)),
                    &req, c->async);
    int bad = rc < 0 ? -1 : 0;
    unsigned char el[8];
    for (size_t e = 0; bad == 0 && e < total; e++) {
        size_t o[4], rest = e, x = 0;
        for (int i = nd - 1; i >= 0; i--) {
            o[i] = rest % od[i];
            rest /= od[i];
        }
        /* from rank q = o[CC] / bd[CC], its slice `me` along S */
        int q = (int)(o[CC] / bd[CC]);
        o[CC] %= bd[CC];
        o[S] += (size_t)me * bd[S];
        for (int i = 0; i < nd; i++)
            x = x * dims[i] + o[i];
        ref_gen1(el, x, c->dt, FCCL_SUM, cs, q);
        if (memcmp(out + e * es, el, es) != 0) {
            FAIL(t, c, "split_dim %d concat_dim %d: element %zu of %zu "
                 "differs (want rank %d's element %zu)", s, cc, e, total, q,
                 x);
            bad = 1;
        }
    }
    if (out != in)
        free(out);
    free(in);
    return bad;
}

/* ---- the cases ---- */

static void m_shaped(struct rt *t, int smoke)
{
    static const char *algos[] = {NULL, "pairwise", "linear", "shm"};
    int k = 0;
    for (int nd = 3; nd <= 4; nd++)
        for (int s = 0; s < nd; s++)
            for (int cc = 0; cc < nd; cc++, k++) {
                if (smoke && k % 5 != 0)
                    continue;
                /* negative dims (from the end) on every third pair */
                int sp = k % 3 == 1 ? s - nd + 8 : s;
                int cp = k % 3 == 2 ? cc - nd + 8 : cc;
                static const fccl_dtype_t dts[4] = {FCCL_FLOAT32, FCCL_INT8,
                                                    FCCL_BFLOAT16,
                                                    FCCL_INT64};
                run(t, STC("all_to_all_dims", dts[k % 4],
                          (size_t)nd, algos[k % 4], .shape = sp * 8 + cp,
                          .inplace = k % 7 == 3, .async = k % 6 == 5 ? 1 : 0));
            }
    run(t, STC("all_to_all_dims", FCCL_FLOAT32, 0, NULL, .shape = 1 * 8 + 2));
    run(t, STC("all_to_all_dims", FCCL_FLOAT32, 4, "linear", .shape = 2 * 8 + 0,
              .async = 2));
    for (int v = 0; v < NBR_VARIANTS; v++) {
        if (smoke && v > 1)
            break;
        run(t, STC("neighbor_exchange_v2", FCCL_FLOAT32, 0, NULL, .shape = v));
        run(t, STC("neighbor_exchange_v2", v % 2 ? FCCL_INT8 : FCCL_FLOAT64,
                   0, "direct", .shape = v, .async = 1 + v % 2));
    }
}

/* ---- argument errors (args mode) ---- */

static void shaped_args(struct rt *t)
{
    struct fccl_group *g = t->g;
    int n = t->n, me = t->rank;
    float in[64] = {0}, out[256];
    size_t d4[4] = {1, 1, 4, 4}, d3[3] = {(size_t)n, 2, 3}, od[4];
    int none[8] = {-1, -1, -1, -1, -1, -1, -1, -1}, ids[8];
    int64_t lens[4] = {1, 1, 1, 1}, neg[4] = {1, -1, 0, 0}, big[4] = {5, 0, 0, 0};
#define NEV2(sid, sl, rid, rl) \
    fccl_neighbor_exchange_v2(in, d4, 4, out, sid, sl, rid, rl, FCCL_FLOAT32, g, NULL)
#define INV(call, what, say) expect_invalid(t, (call), what, say)
    memcpy(ids, none, sizeof(ids));
    ids[FCCL_NBR_TOP] = -2;
    INV(NEV2(ids, lens, none, lens), "nbr id -2", "send_rank_ids[0]");
    ids[FCCL_NBR_TOP] = n;
    INV(NEV2(none, lens, ids, lens), "nbr id = size", "out of range");
    memcpy(ids, none, sizeof(ids));
    if (n >= 2) {
        ids[FCCL_NBR_TOP] = ids[FCCL_NBR_BOTTOM] = (me + 1) % n;
        INV(NEV2(ids, lens, none, lens), "nbr repeated id", "repeat");
        memcpy(ids, none, sizeof(ids));
    }
    INV(NEV2(none, neg, none, lens), "nbr negative send len", "send_lens[1]");
    INV(NEV2(none, lens, none, neg), "nbr negative recv len", "recv_lens[1]");
    if (n >= 2) {
        ids[FCCL_NBR_TOP] = 0; /* sides without their corner */
        ids[FCCL_NBR_RIGHT] = 1;
        INV(NEV2(none, lens, ids, lens), "nbr corner missing", "corner");
        memcpy(ids, none, sizeof(ids));
    }
    ids[FCCL_NBR_TOP_LEFT] = 0; /* a corner without its sides */
    INV(NEV2(none, lens, ids, lens), "nbr corner alone", "corner");
    INV(NEV2(none, big, none, lens), "nbr send len > H", "send_lens[0]");
    INV(fccl_neighbor_exchange_v2(in, d3, 3, out, none, lens, none, lens, FCCL_FLOAT32,
                                  g, NULL),
        "nbr 3-D input", "NCHW");
    INV(fccl_neighbor_exchange_v2(in, d4, 4, in, none, lens, none, lens, FCCL_FLOAT32,
                                  g, NULL),
        "nbr in place", "overlaps");
    memcpy(ids, none, sizeof(ids));
    ids[FCCL_NBR_LEFT] = me; /* a send to myself, no receive */
    INV(NEV2(ids, lens, none, lens), "nbr self send alone", "own neighbour");
    INV(NEV2(NULL, lens, none, lens), "nbr NULL ids", "NULL");
    INV(fccl_neighbor_exchange_v2_shape(d4, 4, none, big, none, lens, od),
        "nbr shape helper", "send_lens[0]");
    /* all_to_all_dims */
    INV(fccl_all_to_all_dims(in, out, d3, 3, n + 1, 0, 0, FCCL_FLOAT32, g, NULL),
        "a2a split_count", "split_count");
    INV(fccl_all_to_all_dims(in, out, d3, 3, n, 3, 0, FCCL_FLOAT32, g, NULL),
        "a2a split_dim 3 of 3", "split_dim 3");
    INV(fccl_all_to_all_dims(in, out, d3, 3, n, 0, -4, FCCL_FLOAT32, g, NULL),
        "a2a concat_dim -4", "concat_dim -4");
    if (n >= 2)
        INV(fccl_all_to_all_dims(in, out, d3, 3, n, 2 - (n == 3), 0, FCCL_FLOAT32, g,
                                 NULL),
            "a2a not divisible", "divisible");
    INV(fccl_all_to_all_dims(in, out, d3, 0, n, 0, 0, FCCL_FLOAT32, g, NULL),
        "a2a ndim 0", "ndim");
    INV(fccl_all_to_all_dims(NULL, out, d3, 3, n, 0, 0, FCCL_FLOAT32, g, NULL),
        "a2a NULL sendbuf", "NULL");
    INV(fccl_set_algo(g, "all_to_all_dims", "ring"), "a2a dims algo",
        "pairwise, linear, shm");
#undef INV
#undef NEV2
}

#endif
