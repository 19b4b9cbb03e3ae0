/*
 * fccl-bench: measure collectives the way nccl-tests does.  Run it under
 * the launcher:
 *
 *   fccl-run -n 2 build/bin/fccl-bench -b 8 -e 64M -f 2 -o all_reduce
 *
 * For each size from -b to -e (times -f) it prints the size, element
 * count, type, reduction op and two timings, each with algbw and busbw:
 *   (a) per iteration: a barrier, then the operation alone; the slowest
 *       rank's time, median over the -n iterations;
 *   (b) nccl-tests style: -n operations back to back, average time (the
 *       slowest rank's).
 * busbw = algbw x the nccl-tests factor (all_reduce 2(n-1)/n; all_gather,
 * reduce_scatter, all_to_all, gather, scatter (n-1)/n; broadcast, reduce,
 * sendrecv 1).  With -c 1 every result of the per-iteration loop is checked
 * against a reference computed on each rank (#wrong: wrong elements, summed
 * over ranks).  Sizes follow nccl-tests: the buffer of all_reduce,
 * broadcast and reduce; the gathered total of all_gather, gather and
 * scatter; the total input of reduce_scatter and all_to_all.
 *
 * The operations nccl-tests lacks (their layouts at "shaped operations"
 * below): all_to_all_v (per-peer blocks of 0, 1 or 2 times the even
 * block; size as all_to_all), neighbor_exchange (a block to and from each
 * ring neighbour; size: what a rank sends), neighbor_exchange_v2 (an
 * S x S tensor with a one-element halo on a grid of ranks; size: the
 * input tensor) and all_to_all_dims (an n x rn x n tensor, -s split and
 * -t concat dimension; size: the tensor); busbw factor (n-1)/n for the
 * all-to-alls, 1 for the neighbour exchanges.
 *
 * Exit status: 0, 1 if a result was wrong or a call failed, 2 on usage.
 */
#include <getopt.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

#include "bench_opts.h"
#include "clock.h"
#include "fccl/fccl.h"
#include "reduce.h"
#include "select.h"

enum bop { B_ALLREDUCE, B_BCAST, B_REDUCE, B_ALLGATHER, B_REDUCESCATTER,
           B_ALLTOALL, B_GATHER, B_SCATTER, B_BARRIER, B_SENDRECV,
           B_ALLTOALLV, B_NEIGHBOR, B_NEIGHBOR_V2, B_ALLTOALL_DIMS };

static const struct {
    const char *name;
    int reducing;
} bops[] = {
    [B_ALLREDUCE] = {"all_reduce", 1},     [B_BCAST] = {"broadcast", 0},
    [B_REDUCE] = {"reduce", 1},            [B_ALLGATHER] = {"all_gather", 0},
    [B_REDUCESCATTER] = {"reduce_scatter", 1},
    [B_ALLTOALL] = {"all_to_all", 0},      [B_GATHER] = {"gather", 0},
    [B_SCATTER] = {"scatter", 0},          [B_BARRIER] = {"barrier", 0},
    [B_SENDRECV] = {"sendrecv", 0},
    [B_ALLTOALLV] = {"all_to_all_v", 0},   [B_NEIGHBOR] = {"neighbor_exchange", 0},
    [B_NEIGHBOR_V2] = {"neighbor_exchange_v2", 0},
    [B_ALLTOALL_DIMS] = {"all_to_all_dims", 0},
};
#define NBOPS (sizeof(bops) / sizeof(bops[0]))

static struct {
    size_t minb, maxb;
    double factor;
    int iters, warmup, check, root, csv, inplace;
    int split_dim, concat_dim; /* all_to_all_dims */
    enum bop op;
    fccl_dtype_t dt;
    fccl_redop_t rop;
    const char *algo;
} O = {8, 64u << 20, 2.0, 20, 5, 0, 0, 0, 0, 1, 2, B_ALLREDUCE,
       FCCL_FLOAT32, FCCL_SUM, NULL};

static int rank, nranks;
static fccl_group_t *world;

static void die(int rc, const char *what)
{
    fprintf(stderr, "fccl-bench: rank %d: %s: %s (%s)\n", rank, what,
            fccl_last_error(), fccl_strerror(rc));
    fccl_finalize();
    exit(1);
}

/* ---- options ---- */

static size_t parse_size(const char *s)
{
    char *end;
    double v = strtod(s, &end);
    double mul = 1;
    switch (*end) {
    case 'k': case 'K': mul = 1024.0; end++; break;
    case 'm': case 'M': mul = 1024.0 * 1024; end++; break;
    case 'g': case 'G': mul = 1024.0 * 1024 * 1024; end++; break;
    }
    if ((*end == 'b' || *end == 'B') && end[1] == '\0')
        end++;
    if (*end || v < 0 || !isfinite(v)) {
        fprintf(stderr, "fccl-bench: bad size '%s'\n", s);
        exit(2);
    }
    return (size_t)(v * mul);
}

static void usage(int code);

/* A parsed dtype or reduction (negative: not one), or the usage text. */
static int known(int v)
{
    if (v < 0)
        usage(2);
    return v;
}

static void usage(int code)
{
    fprintf(code ? stderr : stdout,
            "usage: fccl-run -n N fccl-bench [options]\n"
            "  -b SIZE   smallest size in bytes (K/M/G suffixes), default 8\n"
            "  -e SIZE   largest size, default 64M\n"
            "  -f X      factor between sizes, default 2\n"
            "  -n N      timed iterations per size, default 20\n"
            "  -w N      warm-up iterations per size, default 5\n"
            "  -c 0|1    check every result against a reference, default 0\n"
            "  -o OP     all_reduce, broadcast, reduce, all_gather,\n"
            "            reduce_scatter, all_to_all, all_to_all_v, gather,\n"
            "            scatter, barrier, sendrecv, neighbor_exchange,\n"
            "            neighbor_exchange_v2, all_to_all_dims (default\n"
            "            all_reduce)\n"
            "  -s DIM    all_to_all_dims: split dimension 0..2 (1)\n"
            "  -t DIM    all_to_all_dims: concat dimension 0..2 (2)\n"
            "  -d TYPE   float32, float16, bfloat16, int32, ... (float32)\n"
            "  -r OP     sum, prod, max, min, avg (sum)\n"
            "  -a ALGO   force the algorithm (as FCCL_ALGO_<OP>)\n"
            "  -R ROOT   root of rooted operations (0)\n"
            "  -i        in place\n"
            "  --csv     comma-separated output\n"
            "  -h, --help  this text\n"
            "  --version   print the version and exit\n");
    exit(code);
}

static void parse(int argc, char **argv)
{
    int c;
    while ((c = getopt_long(argc, argv, "b:e:f:n:w:c:o:d:r:a:R:s:t:ih",
                            bench_long_opts, NULL)) != -1) {
        switch (c) {
        case 'b': O.minb = parse_size(optarg); break;
        case 'e': O.maxb = parse_size(optarg); break;
        case 'f': O.factor = atof(optarg); break;
        case 'n': O.iters = atoi(optarg); break;
        case 'w': O.warmup = atoi(optarg); break;
        case 'c': O.check = atoi(optarg); break;
        case 'a': O.algo = optarg; break;
        case 'R': O.root = atoi(optarg); break;
        case 's': O.split_dim = atoi(optarg); break;
        case 't': O.concat_dim = atoi(optarg); break;
        case 'i': O.inplace = 1; break;
        case 'C': O.csv = 1; break;
        case 'h': usage(0); break;
        case 'V':
            printf("fccl-bench (fccl) %s\n", fccl_version());
            exit(0);
        case 'o': {
            size_t k = 0;
            while (k < NBOPS && strcasecmp(optarg, bops[k].name) != 0)
                k++;
            if (k == NBOPS)
                usage(2);
            O.op = (enum bop)k;
            break;
        }
        case 'd': O.dt = (fccl_dtype_t)known(fccl_dtype_parse(optarg)); break;
        case 'r': O.rop = (fccl_redop_t)known(fccl_redop_parse(optarg)); break;
        default: usage(2);
        }
    }
    if (O.iters < 1 || O.warmup < 0 || O.factor <= 1.0 || O.minb > O.maxb ||
        O.split_dim < 0 || O.split_dim > 2 || O.concat_dim < 0 ||
        O.concat_dim > 2)
        usage(2);
    if (O.inplace && (O.op == B_NEIGHBOR || O.op == B_NEIGHBOR_V2)) {
        fprintf(stderr, "fccl-bench: -i: %s has no in-place form\n",
                bops[O.op].name);
        exit(2);
    }
}

/* ---- sizes, buffers, factors ---- */

/* Elements per rank-block for a nominal size, nccl-tests style. */
static size_t count_for(size_t bytes)
{
    size_t es = fccl_dtype_size(O.dt), n = (size_t)nranks;
    switch (O.op) {
    case B_ALLGATHER: case B_REDUCESCATTER: case B_ALLTOALL: case B_GATHER:
    case B_SCATTER: case B_ALLTOALLV:
        return bytes / es / n;
    case B_NEIGHBOR: return bytes / es / (nranks > 2 ? 2 : 1);
    case B_NEIGHBOR_V2: {
        size_t c = bytes / es, s = (size_t)sqrt((double)c);
        while (s > 0 && s * s > c)
            s--;
        return s * s;
    }
    case B_ALLTOALL_DIMS: return bytes / es / (n * n * n) * (n * n * n);
    default: return bytes / es;
    }
}

/* The bytes the size column reports for a count (what moved). */
static size_t bytes_for(size_t count)
{
    size_t es = fccl_dtype_size(O.dt), n = (size_t)nranks;
    switch (O.op) {
    case B_ALLGATHER: case B_REDUCESCATTER: case B_ALLTOALL: case B_GATHER:
    case B_SCATTER: case B_ALLTOALLV:
        return count * es * n;
    case B_NEIGHBOR: return count * es * (nranks > 2 ? 2 : 1);
    case B_BARRIER: return 0;
    default: return count * es;
    }
}

static double bus_factor(void)
{
    double n = nranks;
    switch (O.op) {
    case B_ALLREDUCE: return 2.0 * (n - 1) / n;
    case B_ALLGATHER: case B_REDUCESCATTER: case B_ALLTOALL: case B_GATHER:
    case B_SCATTER: case B_ALLTOALLV: case B_ALLTOALL_DIMS:
        return (n - 1) / n;
    case B_BARRIER: return 0;
    default: return 1;
    }
}

/* Input element i of a rank: small integers, so float sums and products
 * over the ranks are exact in every type (including float16). */
static double input_value(int r, size_t i)
{
    if (O.dt == FCCL_BOOL)
        return (double)((r + (int)(i % 5)) % 2);
    int unsig = O.dt == FCCL_UINT8 || O.dt == FCCL_UINT32 || O.dt == FCCL_UINT64;
    if (O.rop == FCCL_PROD && bops[O.op].reducing)
        return (r + i) % 3 == 0 ? 2.0 : (i % 7 == 0 && !unsig ? -1.0 : 1.0);
    int v = (int)((i * 7 + (size_t)r * 3) % 9);
    return (double)(unsig ? v : v - 4);
}

static void put(void *buf, size_t i, double v)
{
    unsigned char *p = (unsigned char *)buf + i * fccl_dtype_size(O.dt);
    switch (O.dt) {
    case FCCL_INT8: { int8_t x = (int8_t)v; memcpy(p, &x, 1); break; }
    case FCCL_INT16: { int16_t x = (int16_t)v; memcpy(p, &x, 2); break; }
    case FCCL_UINT8: case FCCL_BOOL: { uint8_t x = (uint8_t)(int)v; memcpy(p, &x, 1); break; }
    case FCCL_INT32: { int32_t x = (int32_t)v; memcpy(p, &x, 4); break; }
    case FCCL_UINT32: { uint32_t x = (uint32_t)(int64_t)v; memcpy(p, &x, 4); break; }
    case FCCL_INT64: { int64_t x = (int64_t)v; memcpy(p, &x, 8); break; }
    case FCCL_UINT64: { uint64_t x = (uint64_t)(int64_t)v; memcpy(p, &x, 8); break; }
    case FCCL_FLOAT16: { uint16_t x = coll_float_to_half((float)v); memcpy(p, &x, 2); break; }
    case FCCL_BFLOAT16: { uint16_t x = coll_float_to_bf16((float)v); memcpy(p, &x, 2); break; }
    case FCCL_FLOAT32: { float x = (float)v; memcpy(p, &x, 4); break; }
    default: memcpy(p, &v, 8); break;
    }
}

/* The value as the type holds it (so expected values wrap like results). */
static double get(const void *buf, size_t i)
{
    const unsigned char *p = (const unsigned char *)buf + i * fccl_dtype_size(O.dt);
    switch (O.dt) {
    case FCCL_INT8: return *(const int8_t *)p;
    case FCCL_INT16: { int16_t x; memcpy(&x, p, 2); return x; }
    case FCCL_UINT8: case FCCL_BOOL: return *p;
    case FCCL_INT32: { int32_t x; memcpy(&x, p, 4); return x; }
    case FCCL_UINT32: { uint32_t x; memcpy(&x, p, 4); return x; }
    case FCCL_INT64: { int64_t x; memcpy(&x, p, 8); return (double)x; }
    case FCCL_UINT64: { uint64_t x; memcpy(&x, p, 8); return (double)x; }
    case FCCL_FLOAT16: { uint16_t x; memcpy(&x, p, 2); return coll_half_to_float(x); }
    case FCCL_BFLOAT16: { uint16_t x; memcpy(&x, p, 2); return coll_bf16_to_float(x); }
    case FCCL_FLOAT32: { float x; memcpy(&x, p, 4); return x; }
    default: { double x; memcpy(&x, p, 8); return x; }
    }
}

/* Reduction of element i over all ranks, in the type's arithmetic. */
static double reduced_value(size_t i)
{
    unsigned char tmp[8];
    double acc = 0;
    for (int r = 0; r < nranks; r++) {
        put(tmp, 0, input_value(r, i));
        double x = get(tmp, 0);
        if (r == 0)
            acc = x;
        else if (O.rop == FCCL_BAND || O.rop == FCCL_BOR || O.rop == FCCL_BXOR) {
            /* integer types only: the values are whole and fit int64 */
            int64_t p = (int64_t)acc, q = (int64_t)x;
            if (O.dt == FCCL_BOOL)
                p = p != 0, q = q != 0;
            acc = (double)(O.rop == FCCL_BAND ? (p & q)
                           : O.rop == FCCL_BOR ? (p | q) : (p ^ q));
        } else if (O.dt == FCCL_BOOL)
            acc = (O.rop == FCCL_SUM || O.rop == FCCL_MAX) ? (acc || x) : (acc && x);
        else if (O.rop == FCCL_SUM || O.rop == FCCL_AVG)
            acc += x;
        else if (O.rop == FCCL_PROD)
            acc *= x;
        else if (O.rop == FCCL_MAX)
            acc = x > acc ? x : acc;
        else
            acc = x < acc ? x : acc;
    }
    if (O.rop == FCCL_AVG)
        acc = O.dt >= FCCL_FLOAT16 && O.dt <= FCCL_FLOAT64 ? acc / nranks
                                                           : trunc(acc / nranks);
    put(tmp, 0, acc); /* wrap to the type like the library does */
    return get(tmp, 0);
}

struct bufs {
    unsigned char *send, *recv, *ref;
    size_t cap;
};

/* ---- the operations nccl-tests lacks ----
 *
 * all_to_all_v: rank s sends rank d vcount(s, d) = ((s + 2d) mod 3) even
 *   blocks (0, 1 or 2: zero-length pairs included).
 * neighbor_exchange: a block to and from each ring neighbour (the one
 *   other rank with 2 ranks, the rank itself with 1).
 * neighbor_exchange_v2: the ranks on a P x Q grid (Q the largest divisor
 *   of n up to sqrt(n)), not periodic; each holds an S x S tensor (N = C
 *   = 1) and gets a one-element halo on every side and corner that has a
 *   neighbour.
 * all_to_all_dims: an n x rn x n tensor, split along -s, joined along -t.
 * Each rank's input element i is input_value(rank, i), as for the
 * others; the checks compute where each output element came from.
 */
static struct {
    size_t *sc, *rc;          /* all_to_all_v: counts, n each */
    int peers[2], npeers;     /* neighbor_exchange */
    int sid[8], rid[8];       /* neighbor_exchange_v2 */
    int64_t lens[4];
    size_t dims[4], odims[4]; /* v2: (1, 1, S, S); dims: (n, rn, n) */
} SH;

static const int DI[8] = {-1, -1, 0, 1, 1, 1, 0, -1};
static const int DJ[8] = {0, 1, 1, 1, 0, -1, -1, -1};

static size_t vcount(int s, int d, size_t count)
{
    return (size_t)((s + 2 * d) % 3) * count;
}

static size_t vdispl(int s, int d, size_t count)
{
    size_t o = 0;
    for (int e = 0; e < d; e++)
        o += vcount(s, e, count);
    return o;
}

static void ring_peers(int r, int *p, int *np)
{
    int l = (r - 1 + nranks) % nranks, rt = (r + 1) % nranks;
    *np = 0;
    p[(*np)++] = l;
    if (rt != l)
        p[(*np)++] = rt;
}

static int grid_q(void)
{
    int q = 1;
    for (int d = 1; d * d <= nranks; d++)
        if (nranks % d == 0)
            q = d;
    return q;
}

/* The grid rank at (i, j), -1 outside the grid. */
static int grid_rank(int i, int j)
{
    int Q = grid_q(), P = nranks / Q;
    return i < 0 || i >= P || j < 0 || j >= Q ? -1 : i * Q + j;
}

static size_t isqrt(size_t x)
{
    size_t s = (size_t)sqrt((double)x);
    while (s > 0 && s * s > x)
        s--;
    while ((s + 1) * (s + 1) <= x)
        s++;
    return s;
}

/* The layout of a shaped operation for `count` (from count_for). */
static void shaped_setup(size_t count)
{
    int n = nranks, Q = grid_q();
    switch (O.op) {
    case B_ALLTOALLV:
        for (int p = 0; p < n; p++) {
            SH.sc[p] = vcount(rank, p, count);
            SH.rc[p] = vcount(p, rank, count);
        }
        break;
    case B_NEIGHBOR: ring_peers(rank, SH.peers, &SH.npeers); break;
    case B_NEIGHBOR_V2: {
        size_t S = isqrt(count);
        size_t d[4] = {1, 1, S, S};
        memcpy(SH.dims, d, sizeof(d));
        for (int k = 0; k < 4; k++)
            SH.lens[k] = S ? 1 : 0;
        for (int k = 0; k < 8; k++)
            SH.sid[k] = SH.rid[k] = grid_rank(rank / Q + DI[k],
                                              rank % Q + DJ[k]);
        int rc = fccl_neighbor_exchange_v2_shape(SH.dims, 4, SH.sid, SH.lens,
                                                 SH.rid, SH.lens, SH.odims);
        if (rc < 0)
            die(rc, "neighbor_exchange_v2_shape");
        break;
    }
    case B_ALLTOALL_DIMS: {
        size_t d[3] = {(size_t)n, count / ((size_t)n * (size_t)n), (size_t)n};
        memcpy(SH.dims, d, sizeof(d));
        break;
    }
    default: break;
    }
}

static int run_shaped(struct bufs *b, size_t count, const void *s, void *r)
{
    size_t es = fccl_dtype_size(O.dt);
    switch (O.op) {
    case B_ALLTOALLV:
        return fccl_all_to_all_v(s, SH.sc, r, SH.rc, O.dt, world, NULL);
    case B_NEIGHBOR: {
        const void *sb[2];
        void *rb[2];
        size_t cn[2] = {count, count};
        for (int j = 0; j < SH.npeers; j++) {
            sb[j] = b->send + (size_t)j * count * es;
            rb[j] = b->recv + (size_t)j * count * es;
        }
        return fccl_neighbor_exchange(SH.peers, sb, cn, (size_t)SH.npeers,
                                      SH.peers, rb, cn, (size_t)SH.npeers,
                                      O.dt, world, NULL);
    }
    case B_NEIGHBOR_V2:
        return fccl_neighbor_exchange_v2(b->send, SH.dims, 4, r, SH.sid,
                                         SH.lens, SH.rid, SH.lens, O.dt,
                                         world, NULL);
    case B_ALLTOALL_DIMS:
        return fccl_all_to_all_dims(s, r, SH.dims, 3, nranks, O.split_dim,
                                    O.concat_dim, O.dt, world, NULL);
    default: return FCCL_ERR_INVALID;
    }
}

/* Elements of this rank's input. */
static size_t shaped_inputs(size_t count)
{
    size_t t = 0;
    switch (O.op) {
    case B_ALLTOALLV:
        for (int p = 0; p < nranks; p++)
            t += SH.sc[p];
        return t;
    case B_NEIGHBOR: return (size_t)SH.npeers * count;
    default: return count;
    }
}

static int differs(const void *buf, size_t i, double want)
{
    unsigned char tmp[8];
    put(tmp, 0, want);
    return get(buf, i) != get(tmp, 0);
}

/* The halo: where output element (y, x) of a v2 output came from. */
static long verify_halo(const void *out)
{
    size_t S = SH.dims[2], Wo = SH.odims[3], Ho = SH.odims[2];
    size_t t = SH.rid[0] >= 0 ? (size_t)SH.lens[0] : 0;
    size_t l = SH.rid[6] >= 0 ? (size_t)SH.lens[2] : 0;
    int Q = grid_q();
    long bad = 0;
    for (size_t y = 0; y < Ho; y++)
        for (size_t x = 0; x < Wo; x++) {
            int dy = y < t ? -1 : y >= t + S ? 1 : 0;
            int dx = x < l ? -1 : x >= l + S ? 1 : 0;
            int src = grid_rank(rank / Q + dy, rank % Q + dx);
            size_t sy = dy < 0 ? S - 1 : dy > 0 ? 0 : y - t;
            size_t sx = dx < 0 ? S - 1 : dx > 0 ? 0 : x - l;
            bad += src < 0 || differs(out, y * Wo + x,
                                      input_value(src, sy * S + sx));
        }
    return bad;
}

/* all_to_all_dims: output element e came from rank q's slice for me. */
static long verify_dims(const void *out, size_t count)
{
    size_t n = (size_t)nranks, bd[3], od[3];
    int S = O.split_dim, C = O.concat_dim;
    for (int i = 0; i < 3; i++)
        bd[i] = SH.dims[i] / (i == S ? n : 1);
    for (int i = 0; i < 3; i++)
        od[i] = bd[i] * (i == C ? n : 1);
    long bad = 0;
    for (size_t e = 0; e < count; e++) {
        size_t o[3] = {e / (od[1] * od[2]), e / od[2] % od[1], e % od[2]};
        int q = (int)(o[C] / bd[C]);
        o[C] %= bd[C];
        o[S] += (size_t)rank * bd[S];
        size_t x = (o[0] * SH.dims[1] + o[1]) * SH.dims[2] + o[2];
        bad += differs(out, e, input_value(q, x));
    }
    return bad;
}

static long verify_shaped(const struct bufs *b, size_t count)
{
    long bad = 0;
    switch (O.op) {
    case B_ALLTOALLV: {
        size_t off = 0;
        for (int s = 0; s < nranks; s++) {
            size_t first = vdispl(s, rank, count);
            for (size_t i = 0; i < SH.rc[s]; i++)
                bad += differs(b->recv, off + i, input_value(s, first + i));
            off += SH.rc[s];
        }
        return bad;
    }
    case B_NEIGHBOR:
        for (int j = 0; j < SH.npeers; j++) {
            int p = SH.peers[j], pp[2], np, at = 0;
            ring_peers(p, pp, &np);
            for (int k = 0; k < np; k++)
                at = pp[k] == rank ? k : at;
            for (size_t i = 0; i < count; i++)
                bad += differs(b->recv, (size_t)j * count + i,
                               input_value(p, (size_t)at * count + i));
        }
        return bad;
    case B_NEIGHBOR_V2: return verify_halo(b->recv);
    case B_ALLTOALL_DIMS: return verify_dims(b->recv, count);
    default: return 0;
    }
}

static int is_shaped(void) { return O.op >= B_ALLTOALLV; }

/* ---- one operation ---- */

static int run_op(struct bufs *b, size_t count)
{
    const void *s = O.inplace ? b->recv : b->send;
    void *r = b->recv;
    int n = nranks;
    if (is_shaped())
        return run_shaped(b, count, s, r);
    switch (O.op) {
    case B_ALLREDUCE: return fccl_all_reduce(s, r, count, O.dt, O.rop, world, NULL);
    case B_BCAST: return fccl_broadcast(r, count, O.dt, O.root, world, NULL);
    case B_REDUCE:
        return fccl_reduce(s, r, count, O.dt, O.rop, O.root, world, NULL);
    case B_ALLGATHER:
        return fccl_all_gather(O.inplace ? b->recv + (size_t)rank * count *
                                               fccl_dtype_size(O.dt)
                                         : b->send,
                               r, count, O.dt, world, NULL);
    case B_REDUCESCATTER:
        return fccl_reduce_scatter(s, r, count, O.dt, O.rop, world, NULL);
    case B_ALLTOALL: return fccl_all_to_all(s, r, count, O.dt, world, NULL);
    case B_GATHER: return fccl_gather(b->send, r, count, O.dt, O.root, world, NULL);
    case B_SCATTER: return fccl_scatter(b->send, r, count, O.dt, O.root, world, NULL);
    case B_BARRIER: return fccl_barrier(world, NULL);
    default: break;
    case B_SENDRECV: {
        if (n == 1)
            return FCCL_OK;
        fccl_p2p_op_t ops[2] = {{0, r, count, O.dt, (rank - 1 + n) % n, 1},
                                {1, b->send, count, O.dt, (rank + 1) % n, 1}};
        fccl_request_t *req;
        int rc = fccl_batch_isend_irecv(ops, 2, world, &req);
        return rc < 0 ? rc : fccl_wait(req, -1);
    }
    }
    return FCCL_ERR_INVALID;
}

/* Inputs for this rank (and, in place, the buffer the op overwrites). */
static void prepare(struct bufs *b, size_t count)
{
    size_t es = fccl_dtype_size(O.dt), n = (size_t)nranks, total = count * n;
    if (is_shaped()) {
        int own = O.inplace && O.op != B_NEIGHBOR && O.op != B_NEIGHBOR_V2;
        for (size_t i = 0; i < shaped_inputs(count); i++)
            put(own ? b->recv : b->send, i, input_value(rank, i));
        return;
    }
    switch (O.op) {
    case B_ALLREDUCE: case B_REDUCE:
        for (size_t i = 0; i < count; i++)
            put(O.inplace ? b->recv : b->send, i, input_value(rank, i));
        break;
    case B_BCAST:
        for (size_t i = 0; i < count; i++)
            put(b->recv, i, rank == O.root ? input_value(O.root, i) : 0);
        break;
    case B_ALLGATHER:
        for (size_t i = 0; i < count; i++)
            put(O.inplace ? b->recv + (size_t)rank * count * es : b->send, i,
                input_value(rank, i));
        break;
    case B_REDUCESCATTER: case B_ALLTOALL: case B_SCATTER:
        for (size_t i = 0; i < total; i++)
            put(O.inplace && O.op != B_SCATTER ? b->recv : b->send, i,
                input_value(rank, i));
        break;
    case B_GATHER: case B_SENDRECV:
        for (size_t i = 0; i < count; i++)
            put(b->send, i, input_value(rank, i));
        break;
    default: break;
    }
}

/* Count wrong elements of the result on this rank. */
static long verify(const struct bufs *b, size_t count)
{
    size_t n = (size_t)nranks, me = (size_t)rank, bad = 0;
    const void *r = b->recv;
    if (is_shaped())
        return verify_shaped(b, count);
    if (O.op == B_GATHER && rank != O.root)
        return 0; /* only the root receives */
    for (size_t i = 0; i < count * (O.op == B_ALLGATHER || O.op == B_ALLTOALL ||
                                             (O.op == B_GATHER && rank == O.root)
                                         ? n
                                         : 1);
         i++) {
        double want, got = get(r, i);
        switch (O.op) {
        case B_ALLREDUCE: want = reduced_value(i); break;
        case B_REDUCE:
            if (rank != O.root)
                return 0;
            want = reduced_value(i);
            break;
        case B_REDUCESCATTER: want = reduced_value(me * count + i); break;
        case B_BCAST: want = input_value(O.root, i); break;
        case B_ALLGATHER: case B_GATHER:
            want = input_value((int)(i / count), i % count);
            break;
        case B_ALLTOALL:
            want = input_value((int)(i / count), me * count + i % count);
            break;
        case B_SCATTER: want = input_value(O.root, me * count + i); break;
        case B_SENDRECV:
            want = n == 1 ? got : input_value((rank - 1 + nranks) % nranks, i);
            break;
        default: return 0;
        }
        unsigned char tmp[8];
        put(tmp, 0, want);
        want = get(tmp, 0);
        double tol = O.dt >= FCCL_FLOAT16 && O.dt <= FCCL_FLOAT64 && O.rop == FCCL_AVG
                         ? 1e-2 * fabs(want) + 1e-3
                         : 0;
        bad += fabs(got - want) > tol;
    }
    return (long)bad;
}

/* ---- timing ---- */

static int cmp_double(const void *a, const void *b)
{
    double x = *(const double *)a, y = *(const double *)b;
    return x < y ? -1 : x > y;
}

/* Slowest rank's value of each of k entries (in place). */
static void slowest(double *v, size_t k)
{
    int rc = fccl_all_reduce(v, v, k, FCCL_FLOAT64, FCCL_MAX, world, NULL);
    if (rc < 0)
        die(rc, "all_reduce of timings");
}

struct result {
    double t_iter_us, t_b2b_us;
    long wrong;
};

static struct result measure(struct bufs *b, size_t count)
{
    struct result res = {0, 0, 0};
    double *t = malloc((size_t)O.iters * sizeof(double));
    prepare(b, count);
    for (int i = 0; i < O.warmup; i++) {
        int rc = run_op(b, count);
        if (rc < 0)
            die(rc, "warm-up");
        if (O.inplace)
            prepare(b, count);
    }
    for (int i = 0; i < O.iters; i++) {
        int rc = fccl_barrier(world, NULL);
        if (rc < 0)
            die(rc, "barrier");
        uint64_t t0 = fccl_now_ns();
        rc = run_op(b, count);
        t[i] = (double)(fccl_now_ns() - t0) / 1e3;
        if (rc < 0)
            die(rc, bops[O.op].name);
        if (O.check)
            res.wrong += verify(b, count);
        if (O.inplace || O.check)
            prepare(b, count);
    }
    slowest(t, (size_t)O.iters);
    qsort(t, (size_t)O.iters, sizeof(double), cmp_double);
    res.t_iter_us = O.iters % 2 ? t[O.iters / 2]
                                : (t[O.iters / 2 - 1] + t[O.iters / 2]) / 2;
    /* back to back, nccl-tests style */
    int rc = fccl_barrier(world, NULL);
    if (rc < 0)
        die(rc, "barrier");
    uint64_t t0 = fccl_now_ns();
    for (int i = 0; i < O.iters; i++)
        if ((rc = run_op(b, count)) < 0)
            die(rc, bops[O.op].name);
    double avg = (double)(fccl_now_ns() - t0) / 1e3 / O.iters;
    slowest(&avg, 1);
    res.t_b2b_us = avg;
    int64_t w = res.wrong;
    if ((rc = fccl_all_reduce(&w, &w, 1, FCCL_INT64, FCCL_SUM, world, NULL)) < 0)
        die(rc, "all_reduce of #wrong");
    res.wrong = (long)w;
    free(t);
    return res;
}

/* ---- output ---- */

static void header(void)
{
    if (rank != 0)
        return;
    fccl_topology_t topo;
    fccl_get_topology(&topo);
    if (O.csv) {
        printf("op,ranks,size,count,type,redop,root,time_us,algbw_GBs,busbw_GBs,"
               "b2b_time_us,b2b_algbw_GBs,b2b_busbw_GBs,wrong,algo\n");
        return;
    }
    printf("# fccl-bench %s: %d ranks on %d node(s), op %s%s%s, %d iterations "
           "(+%d warm-up), check %s%s\n",
           fccl_version(), nranks, topo.node_count, bops[O.op].name,
           O.algo ? ", algo " : "", O.algo ? O.algo : "", O.iters, O.warmup,
           O.check ? "on" : "off", O.inplace ? ", in place" : "");
    printf("#                                                   per iteration "
           "(median)       back to back (avg)\n");
    printf("# %12s %12s %8s %6s %5s %10s %8s %8s %10s %8s %8s %6s  %s\n",
           "size", "count", "type", "redop", "root", "time", "algbw", "busbw",
           "time", "algbw", "busbw", "#wrong", "algo");
    printf("# %12s %12s %8s %6s %5s %10s %8s %8s %10s %8s %8s %6s\n", "(B)",
           "(elements)", "", "", "", "(us)", "(GB/s)", "(GB/s)", "(us)",
           "(GB/s)", "(GB/s)", "");
}

static void row(size_t count, const struct result *r)
{
    if (rank != 0)
        return;
    size_t bytes = bytes_for(count);
    double a1 = r->t_iter_us > 0 ? (double)bytes / r->t_iter_us / 1e3 : 0;
    double a2 = r->t_b2b_us > 0 ? (double)bytes / r->t_b2b_us / 1e3 : 0;
    double f = bus_factor();
    const char *ty = fccl_dtype_name(O.dt);
    const char *ro = bops[O.op].reducing ? fccl_redop_name(O.rop) : "none";
    int root = O.op == B_BCAST || O.op == B_REDUCE || O.op == B_GATHER ||
                       O.op == B_SCATTER
                   ? O.root
                   : -1;
    /* what the selector picks for this call (as it ran: same group, same
     * arguments; sendrecv has none) */
    const char *algo = coll_algo_for(
        world, bops[O.op].name,
        O.op == B_ALLTOALL_DIMS ? count / (size_t)nranks : count, O.dt,
        O.root);
    if (O.csv)
        printf("%s,%d,%zu,%zu,%s,%s,%d,%.2f,%.4f,%.4f,%.2f,%.4f,%.4f,%ld,%s\n",
               bops[O.op].name, nranks, bytes, count, ty, ro, root,
               r->t_iter_us, a1, a1 * f, r->t_b2b_us, a2, a2 * f, r->wrong,
               algo);
    else
        printf("  %12zu %12zu %8s %6s %5d %10.2f %8.3f %8.3f %10.2f %8.3f %8.3f "
               "%6ld  %s\n",
               bytes, count, ty, ro, root, r->t_iter_us, a1, a1 * f,
               r->t_b2b_us, a2, a2 * f, r->wrong, algo);
    fflush(stdout);
}

/* ---- main ---- */

static void alloc_bufs(struct bufs *b)
{
    size_t es = fccl_dtype_size(O.dt);
    size_t cap = O.maxb + (size_t)nranks * es + 64;
    if (O.op == B_ALLTOALLV || O.op == B_NEIGHBOR_V2)
        cap += O.maxb + 64; /* up to twice the even blocks; the halo */
    b->cap = cap;
    b->send = calloc(1, cap);
    b->recv = calloc(1, cap);
    if (!b->send || !b->recv) {
        fprintf(stderr, "fccl-bench: no memory for 2 x %zu bytes\n", cap);
        exit(1);
    }
}

int main(int argc, char **argv)
{
    parse(argc, argv);
    int rc = fccl_init(NULL, &world); /* NULL: the default options */
    if (rc < 0) {
        fprintf(stderr, "fccl-bench: fccl_init: %s\n", fccl_last_error());
        return 1;
    }
    rank = fccl_get_rank();
    nranks = fccl_get_world_size();
    if (O.root < 0 || O.root >= nranks)
        O.root = 0;
    /* all_to_all_v shares all_to_all's choice */
    const char *kind = O.op == B_ALLTOALLV ? "all_to_all" : bops[O.op].name;
    if (O.algo && (rc = fccl_set_algo(world, kind, O.algo)) < 0)
        die(rc, "-a");
    SH.sc = calloc((size_t)nranks, sizeof(size_t));
    SH.rc = calloc((size_t)nranks, sizeof(size_t));
    if (!SH.sc || !SH.rc) {
        fprintf(stderr, "fccl-bench: no memory\n");
        return 1;
    }
    if (bops[O.op].reducing && (rc = coll_reduce_check(O.dt, O.rop)) < 0)
        die(rc, "-d/-r");
    struct bufs b;
    alloc_bufs(&b);
    header();
    long wrong = 0;
    size_t last = (size_t)-1;
    for (double sz = (double)O.minb; sz <= (double)O.maxb * 1.0000001;
         sz *= O.factor) {
        size_t count = O.op == B_BARRIER ? 0 : count_for((size_t)sz);
        if (count == last)
            continue; /* sizes that round to the same count */
        last = count;
        shaped_setup(count);
        struct result r = measure(&b, count);
        wrong += r.wrong;
        row(count, &r);
        if (O.op == B_BARRIER)
            break;
    }
    free(b.send);
    free(b.recv);
    free(SH.sc);
    free(SH.rc);
    fccl_finalize();
    if (rank == 0 && !O.csv)
        printf("# %s\n", wrong ? "WRONG RESULTS" : "all results correct");
    return wrong ? 1 : 0;
}
