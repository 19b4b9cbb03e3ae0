/*
 * fccl-moe-bench: one MoE layer, timed.  Run it under the launcher:
 *
 *   fccl-run -n 4 build/bin/fccl-moe-bench -b 256 -H 4096 -k 8 -E 16
 *
 * Each iteration runs dispatch (fccl_moe_dispatch), a deterministic
 * per-expert function (expert e: y = (e+1) x + e; shared expert i:
 * y = -x/2 + (i+1)/4; with TP, TP rank 0 computes the product and rank 1
 * the constant, and combine's ReduceScatterV adds them), then one of three
 * combines, interleaved iteration by iteration so a noisy machine hits
 * them alike:
 *   fused    fccl_moe_combine_add_rms_norm
 *   unfused  our collectives one by one: (TP: fccl_reduce_scatter_v,)
 *            pack + fccl_all_to_all_v back to the owners, then a weighted
 *            sum pass, an add pass and an RMSNorm pass (float32 math)
 *   combine  fccl_moe_combine, then the add pass and the RMSNorm pass
 * It prints, per path, tokens/s (all ranks' tokens / the slowest rank's
 * mean layer time), the mean time of each phase on the slowest rank, split
 * into check (count exchange), comm and math, and the combine phase alone
 * as tokens/s.  -c 1 checks every output of every iteration against a
 * dense single-process reference in double precision (float32 within 1e-5,
 * bfloat16 within 2^-6 of the magnitude of the terms) and prints
 * "# all results correct" or "# WRONG RESULTS".
 *
 * Exit status: 0; 1 on a wrong result or a failed call; 2 on usage
 * (including one rank, and options the MoE config refuses).
 */
#pragma GCC optimize("O3") /* the expert and the unfused passes vectorise */

#include <getopt.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "bf16.h"
#include "bench_opts.h"
#include "clock.h"
#include "fccl/fccl.h"
#include "moe_int.h"

static struct {
    int bs, k, E, S, tp, iters, warmup, check, csv;
    size_t H;
    fccl_dtype_t dt;
    unsigned paths; /* bit p: run path p (-p) */
    int xbuf;       /* -x: experts write into the config's expert buffer */
} O = {64, -1, -1, 0, 0, 20, 5, 0, 0, 1024, FCCL_BFLOAT16, 7, 1};

static int W, NW, EP, L, NS, SLOTS;
static fccl_group_t *world, *ep, *tp;
static fccl_moe_info_t info;
static void *XBUF; /* the config's expert buffer (-x 1), else NULL */
static int XSHARED; /* combine reads it in place */
static size_t ES, ROWB;

static void usage(int code)
{
    fprintf(code ? stderr : stdout,
            "usage: fccl-run -n N fccl-moe-bench [options]   (N >= 2)\n"
            "  -b BS       tokens per rank, default 64\n"
            "  -H HIDDEN   elements per token, default 1024\n"
            "  -k K        experts per token, default min(8, experts)\n"
            "  -E EXPERTS  routed experts, default 4 per routed-expert rank\n"
            "              (1 with -t 2)\n"
            "  -S RANKS    shared-expert ranks (one shared expert), default 0\n"
            "  -t TP       0 or 2 (TP pairs of world ranks 2i, 2i+1; EP groups\n"
            "              of the even and of the odd ranks), default 0\n"
            "  -d TYPE     float32 or bfloat16, default bfloat16\n"
            "  -n N        timed iterations per path, default 20\n"
            "  -w N        warm-up iterations per path, default 5\n"
            "  -c 0|1      check every output against a reference, default 0\n"
            "  -p PATHS    comma-separated paths to run: fused, unfused,\n"
            "              combine (default all three, interleaved)\n"
            "  -x 0|1      fused and combine: the experts write into the\n"
            "              config's expert buffer, which combine reads in\n"
            "              place on one host (default 1); the unfused path\n"
            "              always uses its own buffer\n"
            "  --csv       comma-separated output\n"
            "  -h, --help  this text\n"
            "  --version   print the version and exit\n");
    exit(code);
}

static int num(const char *s, int lo, int hi)
{
    char *end;
    long v = strtol(s, &end, 10);
    if (*s == '\0' || *end || v < lo || v > hi) {
        fprintf(stderr, "fccl-moe-bench: bad number '%s' (%d..%d)\n", s, lo,
                hi);
        exit(2);
    }
    return (int)v;
}

static const char *const pname[] = {"fused", "unfused", "combine"};

/* -p fused,combine -> a bit per path */
static unsigned parse_paths(const char *arg)
{
    unsigned bits = 0;
    char buf[64];
    snprintf(buf, sizeof(buf), "%s", arg);
    for (char *sv, *w = strtok_r(buf, ",", &sv); w;
         w = strtok_r(NULL, ",", &sv)) {
        unsigned b = 0;
        for (int p = 0; p < 3; p++)
            b |= strcmp(w, pname[p]) == 0 ? 1u << p : 0;
        if (!b) {
            fprintf(stderr, "fccl-moe-bench: -p: unknown path '%s' (fused, "
                            "unfused, combine)\n", w);
            exit(2);
        }
        bits |= b;
    }
    if (!bits)
        usage(2);
    return bits;
}

static void parse(int argc, char **argv)
{
    int c;
    while ((c = getopt_long(argc, argv, "b:H:k:E:S:t:d:n:w:c:p:x:h",
                            bench_long_opts, NULL)) != -1) {
        switch (c) {
        case 'b': O.bs = num(optarg, 1, 1 << 20); break;
        case 'H': O.H = (size_t)num(optarg, 1, 1 << 24); break;
        case 'k': O.k = num(optarg, 1, 1 << 20); break;
        case 'E': O.E = num(optarg, 1, 1 << 20); break;
        case 'S': O.S = num(optarg, 0, 1 << 20); break;
        case 't': O.tp = num(optarg, 0, 2); break;
        case 'n': O.iters = num(optarg, 1, 1 << 24); break;
        case 'w': O.warmup = num(optarg, 0, 1 << 24); break;
        case 'c': O.check = num(optarg, 0, 1); break;
        case 'C': O.csv = 1; break;
        case 'p': O.paths = parse_paths(optarg); break;
        case 'x': O.xbuf = num(optarg, 0, 1); break;
        case 'h': usage(0); break;
        case 'V':
            printf("fccl-moe-bench (fccl) %s\n", fccl_version());
            exit(0);
        case 'd': {
            int d = fccl_dtype_parse(optarg);
            if (d != FCCL_FLOAT32 && d != FCCL_BFLOAT16) {
                fprintf(stderr, "fccl-moe-bench: -d float32 or bfloat16\n");
                exit(2);
            }
            O.dt = (fccl_dtype_t)d;
            break;
        }
        default: usage(2);
        }
    }
    if (optind < argc || O.tp == 1)
        usage(2);
}

static void die(int rc, const char *what)
{
    fprintf(stderr, "fccl-moe-bench: rank %d: %s: %s (%s)\n", W, what,
            fccl_last_error(), fccl_strerror(rc));
    fccl_finalize();
    exit(rc == FCCL_ERR_INVALID ? 2 : 1);
}

/* ---- data ---- */

static uint64_t mix(uint64_t z)
{
    z += 0x9e3779b97f4a7c15ull;
    z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
    z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
    return z ^ (z >> 31);
}

static float get(const void *b, size_t i)
{
    return O.dt == FCCL_BFLOAT16
               ? fccl_bf16_to_float(((const uint16_t *)b)[i])
               : ((const float *)b)[i];
}

static void put(void *b, size_t i, float v)
{
    if (O.dt == FCCL_BFLOAT16)
        ((uint16_t *)b)[i] = fccl_float_to_bf16(v);
    else
        ((float *)b)[i] = v;
}

static void *xalloc(size_t n)
{
    void *p = NULL;
    if (posix_memalign(&p, 64, n ? n : 64) != 0) {
        fprintf(stderr, "fccl-moe-bench: no memory for %zu bytes\n", n);
        exit(1);
    }
    memset(p, 0, n ? n : 64);
    return p;
}

struct data {
    void *x, *res, *gamma;
    int32_t *ids;
    float *scales;
    /* dispatch outputs and the experts' rows */
    fccl_moe_dispatch_out_t d;
    void *eo;
    /* outputs of a combine path */
    void *xo, *yo, *comb;
    float *rstd;
    /* unfused: owner side */
    void *arrive;        /* bs * slots rows, in (rank, expert, token) order */
    int32_t *pos_slot;   /* that order's slots */
    size_t *rcount;      /* elements from each EP rank */
    size_t *scount;      /* elements to each EP rank */
    void *pack, *rsbuf;  /* expert side */
    double *ref_x;       /* reference x before the residual (combine) */
};

static void dest(int32_t e, int j, int *r, int *le)
{
    if (j < O.k) {
        *r = O.S + e / L;
        *le = e % L;
    } else {
        int reps = O.S / NS;
        *r = (j - O.k) * reps + info.ep_rank % reps;
        *le = 0;
    }
}

static void gen(struct data *D)
{
    size_t H = O.H, bs = (size_t)O.bs;
    D->x = xalloc(bs * ROWB);
    D->res = xalloc(bs * ROWB);
    D->gamma = xalloc(ROWB);
    D->ids = xalloc(bs * (size_t)O.k * 4);
    D->scales = xalloc(bs * (size_t)O.k * 4);
    uint64_t s = mix((uint64_t)W + 17);
    for (size_t i = 0; i < bs * H; i++) {
        put(D->x, i, (float)((int)(mix(s + 2 * i) % 1024) - 512) / 256.0f);
        put(D->res, i, (float)((int)(mix(s + 2 * i + 1) % 1024) - 512) / 256.0f);
    }
    for (size_t h = 0; h < H; h++)
        put(D->gamma, h, 0.5f + (float)(mix(h) % 256) / 256.0f);
    for (size_t t = 0; t < bs; t++)
        for (int j = 0; j < O.k; j++) {
            int32_t e;
            for (uint64_t n = 0;; n++) {
                e = (int32_t)(mix(s ^ (t * 64 + (uint64_t)j) ^ (n << 40)) %
                              (uint64_t)O.E);
                int dup = 0;
                for (int i = 0; i < j; i++)
                    dup |= D->ids[t * O.k + i] == e;
                if (!dup)
                    break;
            }
            D->ids[t * O.k + j] = e;
            D->scales[t * O.k + j] =
                0.05f + (float)(mix(s + t * 977 + (uint64_t)j) % 1000) / 1000.f;
        }
}

/* The unfused path's bookkeeping on the owner: the order in which
 * all_to_all_v returns the rows (by EP rank, then local expert, then
 * token), computed from the routing alone. */
static void owner_order(struct data *D)
{
    size_t n = 0, bs = (size_t)O.bs;
    D->pos_slot = xalloc(bs * (size_t)SLOTS * 4);
    D->rcount = xalloc((size_t)EP * sizeof(size_t));
    D->scount = xalloc((size_t)EP * sizeof(size_t));
    for (int r = 0; r < EP; r++) {
        size_t n0 = n;
        for (int le = 0; le < L; le++)
            for (size_t t = 0; t < bs; t++)
                for (int j = 0; j < SLOTS; j++) {
                    int rr, ll;
                    dest(j < O.k ? D->ids[t * O.k + j] : 0, j, &rr, &ll);
                    if (rr == r && ll == le)
                        D->pos_slot[n++] = (int32_t)(t * SLOTS + (size_t)j);
                }
        D->rcount[r] = (n - n0) * O.H;
    }
}

static void alloc_data(struct data *D)
{
    size_t rows = info.expand_rows, bs = (size_t)O.bs;
    D->d.expand_x = xalloc(rows * ROWB);
    D->d.expand_scales = xalloc(rows * 4);
    D->d.expert_token_nums = xalloc((size_t)info.local_expert_num * 8);
    D->d.ep_recv_counts = xalloc((size_t)info.local_expert_num * EP * 8);
    D->d.tp_recv_counts = tp ? xalloc(16) : NULL;
    D->d.assist_info = xalloc(info.assist_len * 4);
    D->eo = xalloc(rows * ROWB);
    D->xo = xalloc(bs * ROWB);
    D->yo = xalloc(bs * ROWB);
    D->comb = xalloc(bs * ROWB);
    D->rstd = xalloc(bs * 4);
    D->arrive = xalloc(bs * (size_t)SLOTS * ROWB);
    D->pack = xalloc(rows * ROWB);
    D->rsbuf = xalloc(rows * ROWB);
    D->ref_x = xalloc(bs * O.H * sizeof(double));
}

static void free_data(struct data *D)
{
    void *p[] = {D->x, D->res, D->gamma, D->ids, D->scales, D->d.expand_x,
                 D->d.expand_scales, D->d.expert_token_nums,
                 D->d.ep_recv_counts, D->d.tp_recv_counts, D->d.assist_info,
                 D->eo, D->xo, D->yo, D->comb, D->rstd, D->arrive,
                 D->pos_slot, D->rcount, D->scount, D->pack, D->rsbuf,
                 D->ref_x};
    for (size_t i = 0; i < sizeof(p) / sizeof(p[0]); i++)
        free(p[i]);
}

/* ---- the reference (dense, one process, double) ---- */

static double mulf(int shared, int e) { return shared ? -0.5 : e + 1.0; }
static double addf(int shared, int e) { return shared ? (e + 1) / 4.0 : e; }

/* The shared expert's weight: the sum of the token's scales (moe.h). */
static double scale_sum(const struct data *D, size_t t)
{
    double s = 0;
    for (int j = 0; j < O.k; j++)
        s += D->scales[t * O.k + j];
    return s;
}

static void reference(struct data *D)
{
    for (size_t t = 0; t < (size_t)O.bs; t++)
        for (size_t h = 0; h < O.H; h++) {
            double x = get(D->x, t * O.H + h), v = 0;
            for (int j = 0; j < O.k; j++) {
                int e = D->ids[t * O.k + j];
                v += D->scales[t * O.k + j] * (mulf(0, e) * x + addf(0, e));
            }
            for (int i = 0; i < NS; i++)
                v += scale_sum(D, t) * (mulf(1, i) * x + addf(1, i));
            D->ref_x[t * O.H + h] = v;
        }
}

/* Magnitude of the terms of element (t, h), for the tolerance. */
static double magnitude(const struct data *D, size_t t, size_t h)
{
    double x = fabs(get(D->x, t * O.H + h)), m = 0;
    for (int j = 0; j < O.k; j++) {
        int e = D->ids[t * O.k + j];
        m += D->scales[t * O.k + j] * (mulf(0, e) * x + addf(0, e));
    }
    return m + scale_sum(D, t) * NS * (0.5 * x + NS);
}

/* Wrong elements of x_out, y_out and rstd (fused = 1: all three). */
static long verify(const struct data *D)
{
    double rtol = O.dt == FCCL_BFLOAT16 ? 1.0 / 64 : 1e-5;
    long wrong = 0;
    for (size_t t = 0; t < (size_t)O.bs; t++) {
        double ss = 0, sm = 0;
        for (size_t h = 0; h < O.H; h++) {
            size_t i = t * O.H + h;
            double xr = D->ref_x[i] + get(D->res, i);
            double m = magnitude(D, t, h) + fabs(get(D->res, i));
            wrong += fabs(get(D->xo, i) - xr) > rtol * m + 1e-6;
            ss += xr * xr;
            sm += m * fabs(xr);
        }
        double rstd = 1.0 / sqrt(ss / (double)O.H + 1e-6);
        double rr = 2 * rtol * sm / (ss + 1e-30) + 1e-5;
        wrong += fabs(D->rstd[t] - rstd) > rr * rstd + 1e-6;
        for (size_t h = 0; h < O.H; h++) {
            size_t i = t * O.H + h;
            double xr = D->ref_x[i] + get(D->res, i);
            double m = magnitude(D, t, h) + fabs(get(D->res, i));
            double g = get(D->gamma, h), want = xr * rstd * g;
            double tol = rtol * m * rstd * fabs(g) +
                         (rr + (O.dt == FCCL_BFLOAT16 ? 1.0 / 128 : 1e-6)) *
                             fabs(want) + 1e-6;
            wrong += fabs(get(D->yo, i) - want) > tol;
        }
    }
    return wrong;
}

/* ---- the layer ---- */

enum path { P_FUSED, P_UNFUSED, P_COMBINE, NPATHS };
enum { T_DISP, T_DCOMM, T_DMATH, T_EXPERT, T_COMB, T_CCHECK, T_CCOMM,
       T_CMATH, T_LAYER, NT };

static void experts(struct data *D, unsigned char *out)
{
    size_t row = 0;
    float *acc = xalloc(O.H * 4);
    for (int le = 0; le < info.local_expert_num; le++) {
        size_t n = (size_t)D->d.expert_token_nums[le];
        int sh = info.is_shared_rank, e = info.first_expert + (sh ? 0 : le);
        float mul = (float)mulf(sh, e), add = (float)addf(sh, e);
        if (tp)
            mul = info.tp_rank == 0 ? mul : 0, add = info.tp_rank == 0 ? 0 : add;
        for (size_t r = row; r < row + n; r++) {
            unsigned char *src = (unsigned char *)D->d.expand_x + r * ROWB;
            moe_row_axpy(acc, src, mul, O.H, O.dt, 1);
            for (size_t h = 0; h < O.H; h++)
                acc[h] += add;
            moe_row_store(out + r * ROWB, acc, O.H, O.dt);
        }
        row += n;
    }
    free(acc);
}

/* x = comb + residual, then y = RMSNorm(x): two passes, as separate ops. */
static void add_then_norm(struct data *D, float *acc)
{
    for (size_t t = 0; t < (size_t)O.bs; t++) {
        moe_row_axpy(acc, (unsigned char *)D->comb + t * ROWB, 1, O.H, O.dt, 1);
        moe_row_axpy(acc, (unsigned char *)D->res + t * ROWB, 1, O.H, O.dt, 0);
        moe_row_store((unsigned char *)D->xo + t * ROWB, acc, O.H, O.dt);
    }
    for (size_t t = 0; t < (size_t)O.bs; t++) {
        moe_row_axpy(acc, (unsigned char *)D->xo + t * ROWB, 1, O.H, O.dt, 1);
        D->rstd[t] = moe_row_rms_norm(acc, D->gamma, 1e-6f,
                                      (unsigned char *)D->yo + t * ROWB, O.H,
                                      O.dt);
    }
}

/* Weighted sum of the arrived rows into comb (one pass). */
static void weighted_sum(struct data *D, float *acc, int32_t *slot_pos)
{
    for (size_t i = 0; i < (size_t)O.bs * SLOTS; i++)
        slot_pos[i] = -1;
    size_t n = 0;
    for (int r = 0; r < EP; r++)
        n += D->rcount[r] / O.H;
    for (size_t p = 0; p < n; p++)
        slot_pos[D->pos_slot[p]] = (int32_t)p;
    const void *rows[64];
    float w[64];
    for (size_t t = 0; t < (size_t)O.bs; t++) {
        float shw = 0; /* the shared expert's weight, as the library sums */
        for (int j = 0; j < O.k; j++)
            shw += D->scales[t * O.k + j];
        for (int j = 0; j < SLOTS; j++) {
            rows[j] = (const unsigned char *)D->arrive +
                      (size_t)slot_pos[t * SLOTS + j] * ROWB;
            w[j] = j < O.k ? D->scales[t * O.k + j] : shw;
        }
        moe_row_wsum(acc, rows, w, SLOTS, O.H, O.dt); /* the same kernel */
        moe_row_store((unsigned char *)D->comb + t * ROWB, acc, O.H, O.dt);
    }
}

/* The unfused combine: (TP reduce-scatter,) pack, all_to_all_v, then the
 * math passes.  t[] gets comm and math. */
static int unfused(struct data *D, double *t)
{
    uint64_t t0 = fccl_now_ns(), math = 0;
    const unsigned char *src = D->eo;
    int rc;
    if (tp) {
        size_t cnt[2] = {(size_t)D->d.tp_recv_counts[0] * O.H,
                         (size_t)D->d.tp_recv_counts[1] * O.H};
        rc = fccl_reduce_scatter_v(D->eo, D->rsbuf, cnt, O.dt, FCCL_SUM, tp,
                                   NULL);
        if (rc < 0)
            return rc;
        src = D->rsbuf;
    }
    /* pack from the [expert][source] layout into [source][expert] */
    uint64_t m0 = fccl_now_ns();
    const int64_t *c = D->d.ep_recv_counts;
    size_t out = 0;
    for (int s = 0; s < EP; s++) {
        size_t n0 = out;
        for (int le = 0; le < info.local_expert_num; le++) {
            size_t at = 0;
            for (size_t i = 0; i < (size_t)le * EP + (size_t)s; i++)
                at += (size_t)c[i];
            size_t n = (size_t)c[(size_t)le * EP + s];
            memcpy((unsigned char *)D->pack + out * ROWB, src + at * ROWB,
                   n * ROWB);
            out += n;
        }
        D->scount[s] = (out - n0) * O.H;
    }
    math += fccl_now_ns() - m0;
    rc = fccl_all_to_all_v(D->pack, D->scount, D->arrive, D->rcount, O.dt, ep,
                           NULL);
    if (rc < 0)
        return rc;
    uint64_t m1 = fccl_now_ns();
    float *acc = xalloc(O.H * 4);
    int32_t *slot_pos = xalloc((size_t)O.bs * SLOTS * 4);
    weighted_sum(D, acc, slot_pos);
    add_then_norm(D, acc);
    free(slot_pos);
    free(acc);
    uint64_t t1 = fccl_now_ns();
    math += t1 - m1;
    t[T_CMATH] += (double)math / 1e3;
    t[T_CCOMM] += (double)(t1 - t0 - math) / 1e3;
    return FCCL_OK;
}

static int combine_path(fccl_moe_t *m, struct data *D, enum path p,
                        const void *eo, double *t)
{
    fccl_moe_combine_in_t in = {eo, D->d.assist_info, D->d.ep_recv_counts,
                                D->d.tp_recv_counts, D->scales, NULL,
                                (size_t)O.bs};
    if (p == P_UNFUSED)
        return unfused(D, t);
    int rc = p == P_FUSED
                 ? fccl_moe_combine_add_rms_norm(m, &in, D->res, D->gamma,
                                                 D->yo, D->rstd, D->xo)
                 : fccl_moe_combine(m, &in, D->comb);
    if (rc < 0)
        return rc;
    fccl_moe_times_t mt;
    fccl_moe_last_times(m, &mt);
    double extra = 0;
    if (p == P_COMBINE) {
        uint64_t a = fccl_now_ns();
        float *acc = xalloc(O.H * 4);
        add_then_norm(D, acc);
        free(acc);
        extra = (double)(fccl_now_ns() - a) / 1e3;
    }
    t[T_CCHECK] += (double)mt.check_ns / 1e3;
    t[T_CCOMM] += (double)mt.comm_ns / 1e3;
    t[T_CMATH] += (double)mt.math_ns / 1e3 + extra;
    return FCCL_OK;
}

/* One layer on path p; adds its times to t (when t != NULL). */
static long layer(fccl_moe_t *m, struct data *D, enum path p, double *t)
{
    double scratch[NT] = {0};
    if (!t)
        t = scratch;
    uint64_t t0 = fccl_now_ns();
    int rc = fccl_moe_dispatch(m, D->x, D->ids, D->scales, NULL,
                               (size_t)O.bs, &D->d);
    if (rc < 0)
        die(rc, "dispatch");
    uint64_t t1 = fccl_now_ns();
    fccl_moe_times_t mt;
    fccl_moe_last_times(m, &mt);
    unsigned char *eo = p != P_UNFUSED && XBUF ? XBUF : D->eo;
    experts(D, eo);
    uint64_t t2 = fccl_now_ns();
    if ((rc = combine_path(m, D, p, eo, t)) < 0)
        die(rc, pname[p]);
    uint64_t t3 = fccl_now_ns();
    t[T_DISP] += (double)(t1 - t0) / 1e3;
    t[T_DCOMM] += (double)(mt.comm_ns + mt.check_ns) / 1e3;
    t[T_DMATH] += (double)mt.math_ns / 1e3;
    t[T_EXPERT] += (double)(t2 - t1) / 1e3;
    t[T_COMB] += (double)(t3 - t2) / 1e3;
    t[T_LAYER] += (double)(t3 - t0) / 1e3;
    return O.check ? verify(D) : 0;
}

/* ---- output ---- */

/* Median of n values (sorts them). */
static double median(double *v, int n)
{
    for (int i = 1; i < n; i++)
        for (int j = i; j > 0 && v[j] < v[j - 1]; j--) {
            double x = v[j];
            v[j] = v[j - 1];
            v[j - 1] = x;
        }
    return n % 2 ? v[n / 2] : (v[n / 2 - 1] + v[n / 2]) / 2;
}

/* med: the median over iterations of the slowest rank's layer and
 * combine times (less sensitive to one preempted iteration than the
 * mean). */
static void report(enum path p, const double *t, const double *med,
                   long wrong, size_t moved)
{
    double tokens = (double)O.bs * NW;
    double tps = tokens / (t[T_LAYER] / 1e6);
    double ctps = tokens / (t[T_COMB] / 1e6);
    if (O.csv) {
        printf("%s,%d,%d,%d,%d,%zu,%d,%d,%d,%s,%.0f,%.0f,%.1f,%.1f,%.1f,%.1f,"
               "%.1f,%.1f,%.1f,%.1f,%.1f,%zu,%ld,%.1f,%.1f\n",
               pname[p], NW, EP, O.tp, O.bs, O.H, O.k, O.E, O.S,
               fccl_dtype_name(O.dt), tps, ctps, t[T_LAYER], t[T_DISP],
               t[T_DCOMM], t[T_DMATH], t[T_EXPERT], t[T_COMB], t[T_CCHECK],
               t[T_CCOMM], t[T_CMATH], moved, wrong, med[0], med[1]);
        return;
    }
    printf("  %-8s %11.0f %10.1f %10.1f %8.1f %8.1f %10.1f %10.1f %8.1f %8.1f "
           "%8.1f %11.0f %10.1f %10.1f\n",
           pname[p], tps, t[T_LAYER], t[T_DISP], t[T_DCOMM], t[T_DMATH],
           t[T_EXPERT], t[T_COMB], t[T_CCHECK], t[T_CCOMM], t[T_CMATH], ctps,
           med[0], med[1]);
}

static void header(size_t moved)
{
    if (O.csv) {
        printf("path,ranks,ep,tp,bs,hidden,k,experts,shared_ranks,dtype,"
               "tokens_per_s,combine_tokens_per_s,layer_us,dispatch_us,"
               "dispatch_comm_us,dispatch_math_us,expert_us,combine_us,"
               "combine_check_us,combine_comm_us,combine_math_us,"
               "bytes_moved_per_layer,wrong,median_layer_us,"
               "median_combine_us\n");
        return;
    }
    printf("# fccl-moe-bench %s: %d ranks (EP %d, TP %d), bs %d per rank, "
           "H %zu, k %d, %d routed experts (%d per rank), %d shared-expert "
           "rank(s), %s, %d iterations (+%d warm-up) per path, interleaved, "
           "check %s\n",
           fccl_version(), NW, EP, O.tp ? 2 : 0, O.bs, O.H, O.k, O.E, L, O.S,
           fccl_dtype_name(O.dt), O.iters, O.warmup, O.check ? "on" : "off");
    printf("# rows moved between ranks per layer (dispatch + combine, all "
           "ranks): %.1f MB\n", (double)moved / 1e6);
    printf("# fused and combine paths: experts write into %s\n",
           !XBUF ? "a buffer of their own (-x 0), rows sent as messages"
           : XSHARED ? "the expert buffer, which combine reads in place"
                     : "the expert buffer, not shared here (rows sent as "
                       "messages)");
    printf("# mean us on the slowest rank; comm includes waiting for peers; "
           "med.*: median over iterations of the slowest rank's time\n");
    printf("# %-8s %11s %10s %10s %8s %8s %10s %10s %8s %8s %8s %11s %10s "
           "%10s\n",
           "path", "tokens/s", "layer", "dispatch", "comm", "math", "expert",
           "combine", "check", "comm", "math", "comb.tok/s", "med.layer",
           "med.comb");
}

/* Bytes of rows that cross between ranks in one layer (both ways). */
static size_t bytes_moved(const struct data *D)
{
    size_t n = 0;
    for (int r = 0; r < EP; r++)
        if (r != info.ep_rank)
            n += D->rcount[r] * ES;
    int64_t v = (int64_t)n * 2;
    fccl_all_reduce(&v, &v, 1, FCCL_INT64, FCCL_SUM, world, NULL);
    return (size_t)v;
}

/* ---- main ---- */

static void groups(void)
{
    if (!O.tp) {
        ep = world;
        EP = NW;
        return;
    }
    if (NW < 4 || NW % 2) {
        if (W == 0)
            fprintf(stderr, "fccl-moe-bench: -t 2 needs an even number of "
                            "ranks >= 4 (EP groups of 2 or more)\n");
        fccl_finalize();
        exit(2);
    }
    int mem[1024], n = 0, rc;
    for (int r = W % 2; r < NW && n < 1024; r += 2)
        mem[n++] = r;
    int pair[2] = {W & ~1, W | 1};
    if ((rc = fccl_group_new(mem, (size_t)n, &ep)) < 0 ||
        (rc = fccl_group_new(pair, 2, &tp)) < 0)
        die(rc, "group_new");
    EP = n;
}

static fccl_moe_t *make_moe(void)
{
    if (O.E < 0)
        O.E = (O.tp ? 1 : 4) * (EP - O.S > 0 ? EP - O.S : 1);
    if (O.k < 0)
        O.k = O.E < 8 ? O.E : 8;
    NS = O.S > 0;
    fccl_moe_opts_t o;
    fccl_moe_opts_init(&o);
    o.ep = ep;
    o.tp = tp;
    o.moe_expert_num = O.E;
    o.shared_expert_num = NS;
    o.shared_expert_rank_num = O.S;
    o.bs = O.bs;
    o.k = O.k;
    o.hidden = O.H;
    o.dtype = O.dt;
    o.token_nums_type = FCCL_MOE_TOKEN_NUMS_COUNT;
    o.expert_buffer = O.xbuf;
    fccl_moe_t *m = NULL;
    int rc = fccl_moe_new(&o, &m);
    if (rc < 0)
        die(rc, "fccl_moe_new");
    if (O.xbuf && (rc = fccl_moe_get_expert_buffer(m, &XBUF, &XSHARED)) < 0)
        die(rc, "fccl_moe_get_expert_buffer");
    fccl_moe_get_info(m, &info);
    L = info.routed_local_expert_num;
    SLOTS = info.slots;
    ES = fccl_dtype_size(O.dt);
    ROWB = O.H * ES;
    return m;
}

/* Join the world (default options: the launcher's environment) or exit:
 * 1 if that fails, 2 with fewer than 2 ranks. */
static void join_world(void)
{
    if (fccl_init(NULL, &world) < 0) {
        fprintf(stderr, "fccl-moe-bench: fccl_init: %s\n", fccl_last_error());
        exit(1);
    }
    W = fccl_get_rank();
    NW = fccl_get_world_size();
    if (NW < 2) {
        fprintf(stderr, "fccl-moe-bench: needs at least 2 ranks (fccl-run "
                        "-n N with N >= 2)\n");
        fccl_finalize();
        exit(2);
    }
}

int main(int argc, char **argv)
{
    parse(argc, argv);
    join_world();
    int rc;
    groups();
    fccl_moe_t *m = make_moe();
    struct data D;
    memset(&D, 0, sizeof(D));
    alloc_data(&D);
    gen(&D);
    owner_order(&D);
    if (O.check)
        reference(&D);
    size_t moved = bytes_moved(&D);
    if (W == 0)
        header(moved);
    long wrong = 0;
    for (int i = 0; i < O.warmup; i++)
        for (int p = 0; p < NPATHS; p++)
            if (O.paths & (1u << p))
                wrong += layer(m, &D, (enum path)p, NULL);
    double t[NPATHS][NT];
    memset(t, 0, sizeof(t));
    /* per iteration: layer and combine time of each path */
    size_t nit = (size_t)O.iters * NPATHS * 2;
    double *it = xalloc(nit * sizeof(double));
    for (int i = 0; i < O.iters; i++)
        for (int p = 0; p < NPATHS; p++) {
            if (!(O.paths & (1u << p)))
                continue;
            double one[NT] = {0};
            wrong += layer(m, &D, (enum path)p, one);
            for (int j = 0; j < NT; j++)
                t[p][j] += one[j];
            it[((size_t)p * O.iters + i) * 2] = one[T_LAYER];
            it[((size_t)p * O.iters + i) * 2 + 1] = one[T_COMB];
        }
    if ((rc = fccl_all_reduce(it, it, nit, FCCL_FLOAT64, FCCL_MAX, world,
                              NULL)) < 0)
        die(rc, "all_reduce");
    double med[NPATHS][2];
    for (int p = 0; p < NPATHS; p++)
        for (int c = 0; c < 2; c++) {
            double *v = xalloc((size_t)O.iters * sizeof(double));
            for (int i = 0; i < O.iters; i++)
                v[i] = it[((size_t)p * O.iters + i) * 2 + c];
            med[p][c] = median(v, O.iters);
            free(v);
        }
    free(it);
    for (int p = 0; p < NPATHS; p++)
        for (int j = 0; j < NT; j++)
            t[p][j] /= O.iters;
    /* the slowest rank's means */
    if ((rc = fccl_all_reduce(t, t, NPATHS * NT, FCCL_FLOAT64, FCCL_MAX,
                              world, NULL)) < 0)
        die(rc, "all_reduce");
    int64_t w = wrong;
    if ((rc = fccl_all_reduce(&w, &w, 1, FCCL_INT64, FCCL_SUM, world, NULL)) < 0)
        die(rc, "all_reduce");
    if (W == 0)
        for (int p = 0; p < NPATHS; p++)
            if (O.paths & (1u << p))
                report((enum path)p, t[p], med[p], (long)w, moved);
    fccl_moe_destroy(m);
    free_data(&D);
    if (tp) {
        fccl_group_destroy(tp);
        fccl_group_destroy(ep);
    }
    fccl_finalize();
    if (W == 0 && O.check && !O.csv)
        printf("# %s\n", w ? "WRONG RESULTS" : "all results correct");
    return w ? 1 : 0;
}
