/*
 * moe_check: one MoE test job, one process per rank, run under fccl-run
 * (by tests/test_moe.c):
 *
 *   fccl-run -n N moe_check [-m layer|args] [-r] [-v]
 *
 * layer: full MoE layers (dispatch, a deterministic per-expert function,
 * combine or combine_add_rms_norm) over a matrix of layouts: with and
 * without shared-expert ranks (one or two shared experts, replicas), with
 * and without a TP group of 2 (even N >= 4: EP groups of the even and of
 * the odd world ranks), float32, bfloat16 and float16, random and skewed
 * routing (expert 0 in every token, the upper half of the experts idle,
 * so some ranks receive nothing), masks of both forms ([bs] and [bs][k]),
 * uneven bs (global_bs, one rank with no tokens), shared_expert_x (the
 * shared expert weighted by the sum of the token's active scales).  Every rank checks dispatch's outputs
 * bitwise against the routing it recomputes for every source
 * (tests/moe_ref.h), and the combined rows against a dense reference in
 * double precision (float32 within 1e-5, bfloat16 within 2^-6, float16
 * within 2^-9 of the magnitude of the terms).
 *
 * args: every argument error of fccl_moe_new, dispatch and combine, on one
 * rank or on all: every rank must get FCCL_ERR_INVALID, quickly (no
 * timeout), the bad rank with a message naming the problem; a clean layer
 * on the same config must then still pass.
 *
 * kill: the last rank starts a fused combine and exits; the others must
 * fail (FCCL_ERR_PEER, or the group's sticky error) naming it within 30 s
 * (one line each).
 *
 * The last line (rank 0): "moe_check: ranks=N mode=M: C cases, F failed".
 * Exit 0 only if nothing failed.
 */
#include <getopt.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "fccl/fccl.h"
#include "lib/proc.h"
#include "moe_ref.h"

static struct {
    const char *mode;
    int reduced, verbose;
} O = {"layer", 0, 0};

static int W, NW;           /* world rank, size */
static fccl_group_t *world; /* EP group without TP */
static fccl_group_t *ep2;   /* with TP: the ranks of my parity */
static fccl_group_t *tp2;   /* with TP: {2i, 2i+1} */
static int fails, cases;
static char cname[200];

#define FAILF(...)                                                             \
    do {                                                                       \
        fprintf(stderr, "[moe_check] rank %d case %d %s: ", W, cases, cname);  \
        fprintf(stderr, __VA_ARGS__);                                          \
        fprintf(stderr, "\n");                                                 \
        fails++;                                                               \
    } while (0)

static void *xcalloc(size_t n, size_t sz)
{
    void *p = calloc(n ? n : 1, sz ? sz : 1);
    if (!p) {
        fprintf(stderr, "moe_check: out of memory\n");
        exit(3);
    }
    return p;
}

/* ---- one case ---- */

struct mc {
    int tp, S, NS, L, k, half, skew, masked, uneven, fused, shx, nums_count;
    int inplace; /* fused: x_out is the residual buffer */
    int async;   /* 1: *_start + fccl_moe_wait, 2: *_start + fccl_moe_test */
    int dasync;  /* the same for dispatch */
    int xbuf;    /* experts write into the config's expert buffer: 1 on
                    every rank (combine reads it in place), 2 on world
                    rank 0 only (rows go as messages) */
    size_t H;
    int bs;
    uint64_t seed;
};

static int ep_size(const struct mc *c) { return c->tp ? NW / 2 : NW; }
static int my_ep(const struct mc *c) { return c->tp ? W / 2 : W; }
static int experts(const struct mc *c) { return c->L * (ep_size(c) - c->S); }
static int src_world(const struct mc *c, int s, int b)
{
    return c->tp ? 2 * s + b : s;
}
static int cfg_bs(const struct mc *c, int w)
{
    return c->uneven ? c->bs - w % 3 : c->bs;
}
static int call_bs(const struct mc *c, int w)
{
    return c->uneven && w == 1 ? 0 : cfg_bs(c, w);
}

static void describe(const struct mc *c)
{
    snprintf(cname, sizeof(cname),
             "tp=%d ep=%d shared_ranks=%d shared=%d E=%d k=%d %s %s%s%s%s%s "
             "H=%zu bs=%d%s%s%s%s%s",
             c->tp ? 2 : 0, ep_size(c), c->S, c->NS, experts(c), c->k,
             c->half == 1 ? "bf16" : c->half == 2 ? "f16" : "f32",
             c->skew ? "skewed" : "random",
             c->masked == 1 ? " mask" : c->masked == 2 ? " mask[bs][k]" : "",
             c->uneven ? " uneven" : "",
             c->fused ? " fused" : " combine", c->shx ? " shared_x" : "",
             c->H, c->bs, c->nums_count ? " counts" : "",
             c->inplace ? " in-place" : "",
             c->async == 1 ? " start+wait" : c->async == 2 ? " start+test" : "",
             c->dasync == 1 ? " dispatch_start+wait"
             : c->dasync == 2 ? " dispatch_start+test" : "",
             c->xbuf == 1 ? " expert-buffer" : c->xbuf == 2 ? " expert-buffer(rank 0)" : "");
}

static void fill_opts(const struct mc *c, fccl_moe_opts_t *o)
{
    fccl_moe_opts_init(o);
    o->ep = c->tp ? ep2 : world;
    o->tp = c->tp ? tp2 : NULL;
    o->moe_expert_num = experts(c);
    o->shared_expert_num = c->NS;
    o->shared_expert_rank_num = c->S;
    o->bs = cfg_bs(c, W);
    o->global_bs = c->uneven ? c->bs * ep_size(c) : 0;
    o->k = c->k;
    o->hidden = c->H;
    o->dtype = c->half == 1 ? FCCL_BFLOAT16
               : c->half == 2 ? FCCL_FLOAT16
                              : FCCL_FLOAT32;
    o->norm_eps = 1e-6f;
    o->token_nums_type = c->nums_count ? FCCL_MOE_TOKEN_NUMS_COUNT
                                       : FCCL_MOE_TOKEN_NUMS_CUMSUM;
    o->expert_buffer = c->xbuf != 0;
}

/* Inputs of one rank for one case. */
struct inp {
    size_t bs;
    void *x, *res, *gamma, *shx;
    int32_t *ids;
    float *scales;
    uint8_t *mask;
};

static void gen(const struct mc *c, int w, struct inp *in)
{
    size_t H = c->H, es = c->half ? 2 : 4;
    in->bs = (size_t)call_bs(c, w);
    size_t bs = in->bs ? in->bs : 1;
    in->x = xcalloc(bs * H, es);
    in->res = xcalloc(bs * H, es);
    in->shx = xcalloc(bs * H, es);
    in->gamma = xcalloc(H, es);
    in->ids = xcalloc(bs * (size_t)c->k, sizeof(int32_t));
    in->scales = xcalloc(bs * (size_t)c->k, sizeof(float));
    in->mask = xcalloc(bs * (size_t)c->k, 1); /* either form */
    for (size_t h = 0; h < H; h++)
        mr_put(in->gamma, h, 0.5f + mr_val(c->seed, MR_GAMMA, 0, 0, h) / 4,
               c->half);
    for (size_t t = 0; t < in->bs; t++) {
        for (size_t h = 0; h < H; h++) {
            mr_put(in->x, t * H + h, mr_val(c->seed, MR_X, w, t, h), c->half);
            mr_put(in->res, t * H + h, mr_val(c->seed, MR_RES, w, t, h),
                   c->half);
            mr_put(in->shx, t * H + h, mr_val(c->seed, MR_SHX, w, t, h) / 8,
                   c->half);
        }
        mr_route(c->seed, w, t, c->k, experts(c), c->skew,
                 in->ids + t * (size_t)c->k);
        for (int j = 0; j < c->k; j++)
            in->scales[t * (size_t)c->k + (size_t)j] = mr_scale(c->seed, w, t, j);
        if (c->masked == 2)
            for (int j = 0; j < c->k; j++)
                in->mask[t * (size_t)c->k + (size_t)j] =
                    (uint8_t)mr_route_on(c->seed, w, t, j, 2);
        else
            in->mask[t] = (uint8_t)mr_active(c->seed, w, t, c->masked);
    }
}

static void free_inp(struct inp *in)
{
    free(in->x);
    free(in->res);
    free(in->shx);
    free(in->gamma);
    free(in->ids);
    free(in->scales);
    free(in->mask);
}

struct outs {
    fccl_moe_dispatch_out_t d;
    void *eo, *x, *y;
    float *rstd;
};

static void alloc_outs(const struct mc *c, const fccl_moe_info_t *info,
                       size_t bs, struct outs *o)
{
    size_t es = c->half ? 2 : 4, rows = info->expand_rows;
    memset(o, 0, sizeof(*o));
    o->d.expand_x = xcalloc(rows * c->H, es);
    o->d.expand_scales = xcalloc(rows, sizeof(float));
    o->d.expert_token_nums = xcalloc((size_t)info->local_expert_num, 8);
    o->d.ep_recv_counts =
        xcalloc((size_t)info->local_expert_num * (size_t)info->ep_size, 8);
    o->d.tp_recv_counts = c->tp ? xcalloc(2, 8) : NULL;
    o->d.assist_info = xcalloc(info->assist_len, sizeof(int32_t));
    o->eo = xcalloc(rows * c->H, es);
    o->x = xcalloc((bs ? bs : 1) * c->H, es);
    o->y = xcalloc((bs ? bs : 1) * c->H, es);
    o->rstd = xcalloc(bs ? bs : 1, sizeof(float));
}

static void free_outs(struct outs *o)
{
    free(o->d.expand_x);
    free(o->d.expand_scales);
    free(o->d.expert_token_nums);
    free(o->d.ep_recv_counts);
    free(o->d.tp_recv_counts);
    free(o->d.assist_info);
    free(o->eo);
    free(o->x);
    free(o->y);
    free(o->rstd);
}

/* Destination (EP rank, local expert) of slot j of a token of EP rank s. */
static void dest(const struct mc *c, int s, const int32_t *ids, int j, int *r,
                 int *le)
{
    if (j < c->k) {
        *r = c->S + ids[j] / c->L;
        *le = ids[j] % c->L;
    } else {
        int reps = c->S / c->NS;
        *r = (j - c->k) * reps + s % reps;
        *le = 0;
    }
}

/* Dispatch's outputs, recomputed from every source's routing. */
static void check_dispatch(const struct mc *c, const fccl_moe_info_t *info,
                           const struct outs *o)
{
    size_t H = c->H, row = 0;
    int me = my_ep(c), slots = c->k + c->NS, bad = 0;
    int64_t run = 0;
    int32_t ids[32];
    for (int le = 0; le < info->local_expert_num; le++) {
        int64_t n_le = 0;
        for (int b = 0; b < (c->tp ? 2 : 1); b++) {
            int64_t n_b = 0;
            for (int s = 0; s < ep_size(c); s++) {
                int w = src_world(c, s, b);
                int64_t n_s = 0;
                for (size_t t = 0; t < (size_t)call_bs(c, w); t++) {
                    if (!mr_token_on(c->seed, w, t, c->k, c->masked))
                        continue;
                    mr_route(c->seed, w, t, c->k, experts(c), c->skew, ids);
                    float shw = 0; /* the shared rows' weight, slot order */
                    for (int j = 0; j < c->k; j++)
                        if (mr_route_on(c->seed, w, t, j, c->masked))
                            shw += mr_scale(c->seed, w, t, j);
                    for (int j = 0; j < slots; j++) {
                        int r, l;
                        if (j < c->k &&
                            !mr_route_on(c->seed, w, t, j, c->masked))
                            continue; /* a route masked off: not sent */
                        dest(c, s, ids, j, &r, &l);
                        if (r != me || l != le)
                            continue;
                        for (size_t h = 0; h < H && !bad; h++) {
                            float v = mr_val(c->seed, MR_X, w, t, h);
                            float want = mr_round(v, c->half);
                            float got = mr_get(o->d.expand_x, row * H + h, c->half);
                            if (got != want) {
                                FAILF("dispatch: expand_x row %zu (src %d token "
                                      "%zu) [%zu] = %g, want %g", row, w, t, h,
                                      got, want);
                                bad = 1;
                            }
                        }
                        float sc = j < c->k ? mr_scale(c->seed, w, t, j) : shw;
                        if (!bad && o->d.expand_scales[row] != sc) {
                            FAILF("dispatch: expand_scales[%zu] = %g, want %g",
                                  row, o->d.expand_scales[row], sc);
                            bad = 1;
                        }
                        row++;
                        n_s++;
                    }
                }
                if (b == info->tp_rank && !bad &&
                    o->d.ep_recv_counts[(size_t)le * ep_size(c) + s] != n_s) {
                    FAILF("dispatch: ep_recv_counts[%d][%d] = %lld, want %lld",
                          le, s, (long long)o->d.ep_recv_counts[(size_t)le * ep_size(c) + s],
                          (long long)n_s);
                    bad = 1;
                }
                n_b += n_s;
            }
            if (c->tp && !bad && o->d.tp_recv_counts[b] != n_b) {
                FAILF("dispatch: tp_recv_counts[%d] = %lld, want %lld", b,
                      (long long)o->d.tp_recv_counts[b], (long long)n_b);
                bad = 1;
            }
            n_le += n_b;
        }
        run += n_le;
        int64_t want = c->nums_count ? n_le : run;
        if (!bad && o->d.expert_token_nums[le] != want) {
            FAILF("dispatch: expert_token_nums[%d] = %lld, want %lld", le,
                  (long long)o->d.expert_token_nums[le], (long long)want);
            bad = 1;
        }
    }
    if (!bad && o->d.rows != row)
        FAILF("dispatch: rows = %zu, want %zu", o->d.rows, row);
}

/* The experts: rows of local expert le are a contiguous range (from
 * expert_token_nums); with TP, TP rank 0 computes the multiplicative part,
 * rank 1 the additive part, and combine's ReduceScatterV adds them. */
static void run_experts(const struct mc *c, const fccl_moe_info_t *info,
                        struct outs *o)
{
    size_t row = 0;
    for (int le = 0; le < info->local_expert_num; le++) {
        int64_t v = o->d.expert_token_nums[le];
        size_t n = (size_t)(c->nums_count ? v : v - (int64_t)row);
        int e = info->first_expert + (info->is_shared_rank ? 0 : le);
        double mul = mr_mul(info->is_shared_rank, e);
        double add = mr_add(info->is_shared_rank, e);
        for (size_t i = row * c->H; i < (row + n) * c->H; i++) {
            double x = mr_get(o->d.expand_x, i, c->half);
            double y = !c->tp ? mul * x + add
                       : info->tp_rank == 0 ? mul * x : add;
            mr_put(o->eo, i, (float)y, c->half);
        }
        row += n;
    }
}

/* The dense reference for my token t, element h: value and magnitude. */
static void ref_elem(const struct mc *c, const struct inp *in, size_t t,
                     size_t h, double *val, double *mag)
{
    *val = 0;
    *mag = 0;
    int w = W; /* my own tokens */
    if (!mr_token_on(c->seed, w, t, c->k, c->masked))
        return;
    double x = mr_get(in->x, t * c->H + h, c->half), ss = 0;
    for (int j = 0; j < c->k; j++) {
        if (!mr_route_on(c->seed, w, t, j, c->masked))
            continue;
        int e = in->ids[t * (size_t)c->k + (size_t)j];
        double s = in->scales[t * (size_t)c->k + (size_t)j];
        ss += s;
        *val += s * (mr_mul(0, e) * x + mr_add(0, e));
        *mag += fabs(s) * (fabs(mr_mul(0, e) * x) + fabs(mr_add(0, e)));
    }
    /* the shared expert, weighted by the sum of the active scales */
    for (int i = 0; i < c->NS; i++) {
        *val += ss * (mr_mul(1, i) * x + mr_add(1, i));
        *mag += fabs(ss) * (fabs(mr_mul(1, i) * x) + fabs(mr_add(1, i)));
    }
    if (c->shx) {
        double v = mr_get(in->shx, t * c->H + h, c->half);
        *val += ss * v;
        *mag += fabs(ss * v);
    }
}

static void check_combine(const struct mc *c, const struct inp *in,
                          const struct outs *o)
{
    double rtol = c->half == 1 ? 1.0 / 64 : c->half == 2 ? 1.0 / 512 : 1e-5;
    size_t H = c->H;
    double *xr = xcalloc(H, sizeof(double)), *mg = xcalloc(H, sizeof(double));
    for (size_t t = 0; t < in->bs; t++) {
        double ss = 0, sm = 0;
        for (size_t h = 0; h < H; h++) {
            ref_elem(c, in, t, h, &xr[h], &mg[h]);
            if (c->fused) {
                double r = mr_get(in->res, t * H + h, c->half);
                xr[h] += r;
                mg[h] += fabs(r);
            }
            double got = mr_get(o->x, t * H + h, c->half);
            if (fabs(got - xr[h]) > rtol * mg[h] + 1e-6) {
                FAILF("%s: token %zu [%zu] = %.7g, want %.7g (+-%.3g)",
                      c->fused ? "x_out" : "combine", t, h, got, xr[h],
                      rtol * mg[h]);
                goto out;
            }
            ss += xr[h] * xr[h];
            sm += mg[h] * fabs(xr[h]);
        }
        if (!c->fused)
            continue;
        double rstd = 1.0 / sqrt(ss / (double)H + 1e-6);
        double rr = 2 * rtol * sm / (ss + 1e-30) + 1e-5;
        if (fabs(o->rstd[t] - rstd) > rr * rstd + 1e-6) {
            FAILF("rstd[%zu] = %.7g, want %.7g", t, o->rstd[t], rstd);
            goto out;
        }
        for (size_t h = 0; h < H; h++) {
            double g = mr_get(in->gamma, h, c->half);
            double want = xr[h] * rstd * g;
            double got = mr_get(o->y, t * H + h, c->half);
            double tol = rtol * mg[h] * rstd * fabs(g) +
                         (rr + (c->half == 1   ? 1.0 / 128
                               : c->half == 2 ? 1.0 / 1024
                                              : 1e-6)) *
                             fabs(want) +
                         1e-6;
            if (fabs(got - want) > tol) {
                FAILF("y_out: token %zu [%zu] = %.7g, want %.7g (+-%.3g)", t,
                      h, got, want, tol);
                goto out;
            }
        }
    }
out:
    free(xr);
    free(mg);
}

/* Argument sabotage, on rank `who` (-1: all). */
enum tamper { T_NONE, T_ID_RANGE, T_ID_DUP, T_BS, T_MASK, T_DNULL, T_COUNTS,
              T_ASSIST, T_TPCOUNTS, T_GAMMA };

struct verdict {
    int drc, crc;
};

/* Finish an asynchronous MoE request: fccl_moe_wait, or poll
 * fccl_moe_test for up to 60 s (then wait); check_done also checks that a
 * finished handle is refused. */
static int finish(fccl_moe_request_t *req, int wait, const char *what,
                  int check_done)
{
    if (wait)
        return fccl_moe_wait(req);
    double t0 = th_now();
    for (long polls = 0;; polls++) {
        int done = 0;
        int rc = fccl_moe_test(req, &done);
        if (done) {
            if (check_done && fccl_moe_test(req, &done) != FCCL_ERR_INVALID)
                FAILF("fccl_moe_test on a finished handle is not refused");
            return rc;
        }
        if (th_now() - t0 > 60) {
            FAILF("fccl_moe_test: %s not done after 60 s (%ld polls)", what,
                  polls);
            return fccl_moe_wait(req);
        }
    }
}

/* The asynchronous forms: start (its struct copied, so ours goes out of
 * scope at once), check that the config refuses another operation
 * meanwhile, then wait or poll. */
static int combine_async(const struct mc *c, fccl_moe_t *m,
                         const fccl_moe_combine_in_t *ci, const void *res,
                         const void *gamma, struct outs *o)
{
    fccl_moe_request_t *req = NULL;
    fccl_moe_combine_in_t copy = *ci;
    int rc = c->fused ? fccl_moe_combine_add_rms_norm_start(
                            m, &copy, res, gamma, o->y, o->rstd, o->x, &req)
                      : fccl_moe_combine_start(m, &copy, o->x, &req);
    memset(&copy, 0, sizeof(copy));
    if (rc < 0)
        return rc;
    if (!req) {
        FAILF("combine_start: OK but no handle");
        return FCCL_ERR_INVALID;
    }
    int32_t id = 0;
    float sc = 1;
    fccl_moe_dispatch_out_t d = o->d;
    int st = fccl_moe_dispatch(m, o->x, &id, &sc, NULL, 0, &d);
    if (st != FCCL_ERR_STATE)
        FAILF("dispatch during an async combine: %s, want FCCL_ERR_STATE",
              fccl_strerror(st));
    return finish(req, c->async == 1, "combine", 0);
}

/* fccl_moe_dispatch_start, a refused combine meanwhile, then wait or
 * poll. */
static int dispatch_async(const struct mc *c, fccl_moe_t *m, const void *x,
                          const int32_t *ids, const float *scales,
                          const uint8_t *mask, size_t bs,
                          fccl_moe_dispatch_out_t *d)
{
    fccl_moe_request_t *req = NULL;
    int rc = c->masked == 2
                 ? fccl_moe_dispatch_mask_start(m, x, ids, scales, mask,
                                                FCCL_MOE_MASK_ROUTES, bs, d,
                                                &req)
                 : fccl_moe_dispatch_start(m, x, ids, scales, mask, bs, d,
                                           &req);
    if (rc < 0)
        return rc;
    if (!req) {
        FAILF("dispatch_start: OK but no handle");
        return FCCL_ERR_INVALID;
    }
    fccl_moe_combine_in_t ci = {0};
    int st = fccl_moe_combine(m, &ci, NULL);
    if (st != FCCL_ERR_STATE)
        FAILF("combine during an async dispatch: %s, want FCCL_ERR_STATE",
              fccl_strerror(st));
    return finish(req, c->dasync == 1, "dispatch", 1);
}

/* The expert buffer of the config when this rank should use it, else
 * NULL; checks that it is shared when it should be. */
static void *expert_buffer(const struct mc *c, fccl_moe_t *m)
{
    if (!c->xbuf || (c->xbuf == 2 && W != 0))
        return NULL;
    void *buf = NULL;
    int shared = -1;
    int rc = fccl_moe_get_expert_buffer(m, &buf, &shared);
    if (rc < 0 || !buf) {
        FAILF("get_expert_buffer: %s", fccl_last_error());
        return NULL;
    }
    const char *env = getenv("FCCL_MOE_SHARED");
    int want = !c->tp && !(env && strcmp(env, "0") == 0);
    if (shared != want)
        FAILF("get_expert_buffer: shared = %d, want %d (one host, %s)",
              shared, want, c->tp ? "TP" : "no TP");
    return buf;
}

/* One layer on an existing config; checks results when untampered. */
static struct verdict layer(const struct mc *c, fccl_moe_t *m,
                            enum tamper tm, int who)
{
    struct verdict v = {0, 0};
    fccl_moe_info_t info;
    fccl_moe_get_info(m, &info);
    struct inp in;
    gen(c, W, &in);
    struct outs o;
    alloc_outs(c, &info, in.bs + 1, &o);
    int me = who < 0 || who == W;
    size_t bs = in.bs;
    if (me && tm == T_ID_RANGE && bs)
        in.ids[0] = experts(c);
    if (me && tm == T_ID_DUP && bs)
        in.ids[1] = in.ids[0];
    if (me && tm == T_BS)
        bs = (size_t)cfg_bs(c, W) + 1;
    if (me && tm == T_MASK && bs)
        in.mask[0] = 2;
    void *ex = o.d.expand_x;
    if (me && tm == T_DNULL)
        o.d.expand_x = NULL;
    const uint8_t *mask = c->masked || tm == T_MASK ? in.mask : NULL;
    v.drc = c->dasync ? dispatch_async(c, m, in.x, in.ids, in.scales, mask,
                                       bs, &o.d)
                      : c->masked == 2
                          ? fccl_moe_dispatch_mask(m, in.x, in.ids, in.scales,
                                                   mask, FCCL_MOE_MASK_ROUTES,
                                                   bs, &o.d)
                          : fccl_moe_dispatch(m, in.x, in.ids, in.scales, mask,
                                              bs, &o.d);
    o.d.expand_x = ex;
    if (v.drc < 0)
        goto out;
    if (tm == T_NONE)
        check_dispatch(c, &info, &o);
    void *own_eo = o.eo, *xb = expert_buffer(c, m);
    if (xb) /* the experts' rows go to the expert buffer instead */
        o.eo = xb;
    run_experts(c, &info, &o);
    if (me && tm == T_COUNTS)
        o.d.ep_recv_counts[0] += 1;
    if (me && tm == T_ASSIST)
        o.d.assist_info[4] = -7;
    if (me && tm == T_TPCOUNTS && c->tp)
        o.d.tp_recv_counts[info.tp_rank] += 1;
    fccl_moe_combine_in_t ci = {o.eo, o.d.assist_info, o.d.ep_recv_counts,
                                o.d.tp_recv_counts, in.scales,
                                c->shx ? in.shx : NULL, in.bs};
    if (c->fused && c->inplace) /* x_out over a copy of the residual */
        memcpy(o.x, in.res, in.bs * c->H * (c->half ? 2 : 4));
    const void *res = c->inplace ? o.x : in.res;
    const void *gamma = me && tm == T_GAMMA ? NULL : in.gamma;
    if (c->async)
        v.crc = combine_async(c, m, &ci, res, gamma, &o);
    else if (c->fused)
        v.crc = fccl_moe_combine_add_rms_norm(m, &ci, res, gamma, o.y,
                                              o.rstd, o.x);
    else
        v.crc = fccl_moe_combine(m, &ci, o.x);
    if (v.crc == FCCL_OK && tm == T_NONE)
        check_combine(c, &in, &o);
    o.eo = own_eo;
out:
    free_outs(&o);
    free_inp(&in);
    return v;
}

static void run_case(struct mc *c)
{
    cases++;
    c->seed = th_mix64((uint64_t)cases * 77 + 5);
    describe(c);
    if (O.verbose && W == 0)
        fprintf(stderr, "case %d: %s\n", cases, cname);
    fccl_moe_opts_t o;
    fill_opts(c, &o);
    fccl_moe_t *m = NULL;
    int rc = fccl_moe_new(&o, &m);
    if (rc < 0) {
        FAILF("moe_new: %s (%s)", fccl_strerror(rc), fccl_last_error());
        return;
    }
    struct verdict v = layer(c, m, T_NONE, -1);
    if (v.drc < 0 || v.crc < 0)
        FAILF("%s: %s (%s)", v.drc < 0 ? "dispatch" : "combine",
              fccl_strerror(v.drc < 0 ? v.drc : v.crc), fccl_last_error());
    fccl_moe_destroy(m);
}

/* ---- layer mode: the matrix ---- */

static void layer_mode(void)
{
    int tps = NW >= 4 && NW % 2 == 0 ? 2 : 1;
    int idx = 0;
    for (int tp = 0; tp < tps; tp++) {
        int ep = tp ? NW / 2 : NW;
        /* (shared ranks, shared experts, experts per rank) */
        int lays[][3] = {{0, 0, 2}, {1, 1, 2}, {0, 0, 3}, {2, 2, 1},
                         {2, 1, 1}};
        for (size_t li = 0; li < sizeof(lays) / sizeof(lays[0]); li++) {
            int S = lays[li][0], NS = lays[li][1], L = tp ? 1 : lays[li][2];
            if (S >= ep || (li >= 2 && (O.reduced || (li >= 3 && ep < 4))))
                continue;
            if (tp && li == 2)
                continue; /* L = 3 is TP-incompatible: same as li 0 */
            int E = L * (ep - S);
            for (int bf = 0; bf < 2; bf++)
                for (int skew = 0; skew < 2; skew++)
                    for (int fused = 0; fused < 2; fused++, idx++) {
                        if (O.reduced && (idx % 3) != 0)
                            continue;
                        struct mc c = {
                            .tp = tp, .S = S, .NS = NS, .L = L,
                            .k = E < 4 ? E : (li == 2 ? 4 : 3 + idx % 2),
                            .half = bf ? 1 + (idx / 2) % 2 : 0, /* bf16, f16 */
                            .skew = skew,
                            .masked = idx % 3 != 1 ? 0 : idx % 2 ? 1 : 2,
                            .uneven = idx % 4 == 2, .fused = fused,
                            .shx = idx % 5 == 3, .nums_count = idx % 2,
                            .inplace = fused && idx % 3 == 2,
                            .async = idx % 5 == 1 ? 1 : idx % 5 == 4 ? 2 : 0,
                            .dasync = idx % 4 == 3 ? 1 : idx % 6 == 1 ? 2 : 0,
                            .xbuf = idx % 3 == 0 ? 1 : idx % 7 == 2 ? 2 : 0,
                            .H = idx % 4 == 1 ? 1031
                                 : bf ? 40 + (size_t)(idx % 3) * 13 : 33,
                            .bs = 6 + idx % 7};
                        run_case(&c);
                    }
        }
        /* rows big enough that combine sends each piece in several
         * chunks (MOE_CHUNK_BYTES), and pieces of many rows */
        for (int bf = 0; bf < 2 && !O.reduced; bf++) {
            int L = tp ? 1 : 2, E = L * ep;
            struct mc c = {.tp = tp, .L = L, .k = E < 3 ? E : 3,
                           .half = bf ? 1 + tp : 0,
                           .skew = 1, .fused = bf, .H = bf ? 8200 : 4100,
                           .bs = 48, .masked = 1, .xbuf = bf};
            run_case(&c);
        }
    }
}

/* ---- args mode ---- */

static const char *const tname[] = {"none", "expert id out of range",
                                    "expert id twice", "bs too large",
                                    "x_active_mask not 0/1", "expand_x NULL", "ep_send_counts off by one",
                                    "assist_info damaged",
                                    "tp_send_counts off by one", "gamma NULL"};

static void expect_invalid(int rc, double secs, const char *what, int me,
                           const char *needle)
{
    if (rc != FCCL_ERR_INVALID)
        FAILF("%s: got %s (%s), want FCCL_ERR_INVALID", what,
              fccl_strerror(rc), fccl_last_error());
    else if (me && needle && !strstr(fccl_last_error(), needle))
        FAILF("%s: message '%s' does not mention '%s'", what,
              fccl_last_error(), needle);
    else if (secs > 20)
        FAILF("%s: took %.1f s to fail", what, secs);
    else if (O.verbose)
        fprintf(stderr, "[rank %d] %s: ok: %s\n", W, what, fccl_last_error());
}

/* A config with one option spoiled on rank `who` (-1: all). */
static void bad_new(struct mc c, int who, const char *what,
                    void (*spoil)(fccl_moe_opts_t *), const char *needle)
{
    cases++;
    describe(&c);
    fccl_moe_opts_t o;
    fill_opts(&c, &o);
    if (who < 0 || who == W)
        spoil(&o);
    fccl_moe_t *m = NULL;
    double t0 = th_now();
    int rc = fccl_moe_new(&o, &m);
    expect_invalid(rc, th_now() - t0, what, who < 0 || who == W, needle);
    if (m) {
        FAILF("%s: moe_new returned a config on failure", what);
        fccl_moe_destroy(m);
    }
}

/* A local check that fails on rank `who` alone: every other rank's error
 * must name it (its EP rank; across TP "EP rank N of the other EP
 * group"). */
static void bad_new_named(struct mc c, int who, const char *what,
                          void (*spoil)(fccl_moe_opts_t *), const char *needle)
{
    bad_new(c, who, what, spoil, needle);
    char name[48];
    snprintf(name, sizeof(name), "EP rank %d", c.tp ? who / 2 : who);
    if (W != who && !strstr(fccl_last_error(), name))
        FAILF("%s: rank %d's error '%s' does not name %s", what, W,
              fccl_last_error(), name);
}

static void sp_k0(fccl_moe_opts_t *o) { o->k = 0; }
static void sp_k17(fccl_moe_opts_t *o) { o->k = 17; }
static void sp_kE(fccl_moe_opts_t *o) { o->k = o->moe_expert_num + 1; }
static void sp_div(fccl_moe_opts_t *o) { o->moe_expert_num += 1; }
static void sp_tpL(fccl_moe_opts_t *o) { o->moe_expert_num *= 2; }
static void sp_H(fccl_moe_opts_t *o) { o->hidden += 1; }
static void sp_dt(fccl_moe_opts_t *o) { o->dtype = FCCL_FLOAT32; }
static void sp_eps(fccl_moe_opts_t *o) { o->norm_eps = 1e-5f; }
static void sp_sh(fccl_moe_opts_t *o) { o->shared_expert_rank_num = o->ep ? fccl_group_size(o->ep) : 0; o->shared_expert_num = 1; }
static void sp_gbs(fccl_moe_opts_t *o) { o->global_bs = 1; }
static void sp_bs0(fccl_moe_opts_t *o) { o->bs = 0; }
static void sp_dti(fccl_moe_opts_t *o) { o->dtype = FCCL_INT32; }

static void bad_call(struct mc c, enum tamper tm, int who, const char *needle)
{
    cases++;
    c.seed = th_mix64((uint64_t)cases * 31 + 1);
    describe(&c);
    char what[160];
    snprintf(what, sizeof(what), "%s on %s", tname[tm],
             who < 0 ? "every rank" : "one rank");
    fccl_moe_opts_t o;
    fill_opts(&c, &o);
    fccl_moe_t *m = NULL;
    int rc = fccl_moe_new(&o, &m);
    if (rc < 0) {
        FAILF("moe_new: %s", fccl_last_error());
        return;
    }
    int in_dispatch = tm <= T_DNULL;
    double t0 = th_now();
    struct verdict v = layer(&c, m, tm, who);
    int got = in_dispatch ? v.drc : v.crc;
    if (!in_dispatch && v.drc < 0)
        FAILF("%s: dispatch failed first: %s", what, fccl_last_error());
    else
        expect_invalid(got, th_now() - t0, what, who < 0 || who == W, needle);
    /* the config and the groups still work */
    v = layer(&c, m, T_NONE, -1);
    if (v.drc < 0 || v.crc < 0)
        FAILF("%s: the clean layer after it failed: %s", what,
              fccl_last_error());
    fccl_moe_destroy(m);
}

/* TP partners that disagree about the TP group: every rank of both EP
 * groups must fail fast (no waiting for the group timeout). */
static void tp_bad_new(struct mc t, int who, int kind, const char *what,
                       const char *needle)
{
    cases++;
    describe(&t);
    fccl_moe_opts_t o;
    fill_opts(&t, &o);
    fccl_group_t *own = NULL;
    if (kind == 2) { /* every rank of who's EP group makes that group
                      * again (group_new is collective over its members) */
        int mem[1024], n = 0;
        for (int r = W % 2; r < NW && n < 1024; r += 2)
            mem[n++] = r;
        if (W % 2 == who % 2 && fccl_group_new(mem, (size_t)n, &own) < 0) {
            FAILF("%s: group_new: %s", what, fccl_last_error());
            return;
        }
    }
    if (W == who)
        o.tp = kind == 0 ? NULL : kind == 1 ? world : own;
    fccl_moe_t *m = NULL;
    double t0 = th_now();
    int rc = fccl_moe_new(&o, &m);
    expect_invalid(rc, th_now() - t0, what, W == who, needle);
    if (m) {
        FAILF("%s: moe_new returned a config on failure", what);
        fccl_moe_destroy(m);
    }
    if (own)
        fccl_group_destroy(own);
}

static void tp_mismatch(struct mc c)
{
    struct mc t = c;
    t.tp = 1;
    t.L = 1;
    t.k = 1;
    int last = NW - 1;
    tp_bad_new(t, last, 0, "no TP group on one rank, its partner has one",
               "TP group or none differs");
    tp_bad_new(t, 0, 0, "no TP group on rank 0, its partner has one",
               "TP group or none differs");
    if (NW > 2)
        tp_bad_new(t, last, 1, "a TP group of the world size on one rank",
                   "TP group has");
    /* a group of 2 that is not a TP pair: the two ranks of the EP group
     * (4 ranks) or more (then the size is wrong anyway) */
    tp_bad_new(t, last, 2, "the own EP group passed as the TP group",
               NW == 4 ? "own EP group" : "TP group has");
}

static void args_mode(void)
{
    struct mc c = {.L = 2, .k = 2, .half = 1, .H = 16, .bs = 5};
    int last = NW - 1;
    /* options: on every rank (each finds it alone) and on one rank */
    bad_new(c, -1, "k = 0", sp_k0, "k 0");
    bad_new(c, -1, "k = 17", sp_k17, "k 17");
    bad_new_named(c, last, "k > experts on one rank", sp_kE, "out of range");
    bad_new(c, -1, "experts not a multiple of the ranks", sp_div, "multiple");
    bad_new_named(c, last, "experts not a multiple, one rank", sp_div,
                  "multiple");
    bad_new_named(c, 0, "int32 on rank 0", sp_dti, "unsupported");
    bad_new(c, -1, "no routed-expert rank", sp_sh, "shared_expert_rank_num");
    bad_new(c, last, "hidden differs on one rank", sp_H, "hidden differs");
    bad_new(c, 0, "dtype differs on one rank", sp_dt, "dtype differs");
    bad_new(c, last, "eps differs on one rank", sp_eps, "norm_eps differs");
    bad_new(c, -1, "bs = 0", sp_bs0, "bs 0");
    bad_new(c, -1, "int32", sp_dti, "unsupported");
    struct mc u = c;
    u.uneven = 1;
    u.bs = 6;
    bad_new(u, -1, "global_bs too small", sp_gbs, "global_bs");
    {   /* an EP group of one rank */
        cases++;
        fccl_group_t *solo = NULL;
        int rc = fccl_group_new(&W, 1, &solo);
        if (rc < 0) {
            FAILF("group_new(solo): %s", fccl_last_error());
        } else {
            fccl_moe_opts_t o;
            fill_opts(&c, &o);
            o.ep = solo;
            o.moe_expert_num = 2;
            fccl_moe_t *m = NULL;
            double t0 = th_now();
            expect_invalid(fccl_moe_new(&o, &m), th_now() - t0,
                           "EP group of one rank", 1, "at least 2");
            fccl_group_destroy(solo);
        }
    }
    if (NW >= 4 && NW % 2 == 0) {
        struct mc t = c;
        t.tp = 1;
        t.L = 1;
        t.k = 1;
        bad_new(t, -1, "TP with two experts per rank", sp_tpL,
                "one expert per rank");
        bad_new(t, last, "hidden differs on one TP rank", sp_H, "differs");
        bad_new_named(t, last, "k 0 on one TP rank", sp_k0, "k 0");
    }
    if (NW >= 4 && NW % 2 == 0)
        tp_mismatch(c);
    /* calls */
    for (int who = -1; who <= last; who += last + 1) {
        bad_call(c, T_ID_RANGE, who, "out of range");
        bad_call(c, T_ID_DUP, who, "twice");
        bad_call(c, T_BS, who, "bs");
        bad_call(c, T_MASK, who, "x_active_mask");
        struct mc mk = c; /* the [bs][k] form */
        mk.masked = 2;
        bad_call(mk, T_MASK, who, "x_active_mask[0][0]");
        bad_call(c, T_DNULL, who, "NULL");
        bad_call(c, T_COUNTS, who, NULL);
        bad_call(c, T_ASSIST, who, "assist_info");
        struct mc f = c;
        f.fused = 1;
        bad_call(f, T_GAMMA, who, "NULL");
        f.async = 2; /* the same errors from the asynchronous start */
        bad_call(f, T_GAMMA, who, "NULL");
        bad_call(f, T_COUNTS, who, NULL);
        f.xbuf = 1; /* and with the rows read in place */
        bad_call(f, T_COUNTS, who, NULL);
        bad_call(f, T_ASSIST, who, "assist_info");
        struct mc da = c; /* dispatch errors from dispatch_start */
        da.dasync = 2;
        bad_call(da, T_ID_RANGE, who, "out of range");
        bad_call(da, T_DNULL, who, "NULL");
        if (NW >= 4 && NW % 2 == 0) {
            struct mc t = c;
            t.tp = 1;
            t.L = 1;
            t.k = 1;
            bad_call(t, T_ID_RANGE, who, "out of range");
            bad_call(t, T_TPCOUNTS, who, "tp_send_counts");
            bad_call(t, T_COUNTS, who, NULL);
        }
    }
}

/* ---- kill mode: a rank dies in the middle of a combine ---- */

/* The last rank starts a fused combine (its sends posted, its rows not yet
 * read by anyone) and exits at once.  Every other rank must come back from
 * its combine with an error naming the failure, well within the group
 * timeout, not hang in the arrival loop.  Prints one line per survivor;
 * exit 0 when the survivor got a failure (not an argument error) naming
 * the dead rank within 30 s. */
static int kill_mode(void)
{
    struct mc c = {.L = 2, .k = 2, .half = 1, .H = 8192, .bs = 64,
                   .fused = 1, .seed = 99};
    describe(&c);
    fccl_moe_opts_t o;
    fill_opts(&c, &o);
    fccl_moe_t *m = NULL;
    if (fccl_moe_new(&o, &m) < 0) {
        fprintf(stderr, "moe_check: moe_new: %s\n", fccl_last_error());
        return 1;
    }
    fccl_moe_info_t info;
    fccl_moe_get_info(m, &info);
    struct inp in;
    gen(&c, W, &in);
    struct outs ou;
    alloc_outs(&c, &info, in.bs, &ou);
    int rc = fccl_moe_dispatch(m, in.x, in.ids, in.scales, NULL, in.bs, &ou.d);
    if (rc < 0) {
        fprintf(stderr, "moe_check: dispatch: %s\n", fccl_last_error());
        return 1;
    }
    run_experts(&c, &info, &ou);
    fccl_moe_combine_in_t ci = {ou.eo, ou.d.assist_info, ou.d.ep_recv_counts,
                                NULL, in.scales, NULL, in.bs};
    if (W == NW - 1) {
        fccl_moe_request_t *req;
        fccl_moe_combine_add_rms_norm_start(m, &ci, in.res, in.gamma, ou.y,
                                            ou.rstd, ou.x, &req);
        _exit(0); /* gone with its rows still unread */
    }
    double t0 = th_now();
    rc = fccl_moe_combine_add_rms_norm(m, &ci, in.res, in.gamma, ou.y,
                                       ou.rstd, ou.x);
    double secs = th_now() - t0;
    char who[32];
    snprintf(who, sizeof(who), "rank %d", NW - 1);
    int ok = rc < 0 && rc != FCCL_ERR_INVALID && secs < 30 &&
             strstr(fccl_last_error(), who) != NULL;
    printf("moe_check kill: rank %d: %s after %.2f s: %s -> %s\n", W,
           fccl_strerror(rc), secs, fccl_last_error(), ok ? "ok" : "WRONG");
    fflush(stdout);
    _exit(ok ? 0 : 1); /* the world is broken: no orderly shutdown */
}

/* ---- main ---- */

static int setup_groups(void)
{
    if (NW < 4 || NW % 2 != 0)
        return 0;
    int mem[64], n = 0;
    for (int r = W % 2; r < NW; r += 2)
        mem[n++] = r;
    int rc = fccl_group_new(mem, (size_t)n, &ep2);
    int pair[2] = {W & ~1, W | 1};
    if (rc == FCCL_OK)
        rc = fccl_group_new(pair, 2, &tp2);
    if (rc < 0)
        fprintf(stderr, "moe_check: groups: %s\n", fccl_last_error());
    return rc;
}

int main(int argc, char **argv)
{
    int ch;
    while ((ch = getopt(argc, argv, "m:rv")) != -1) {
        switch (ch) {
        case 'm': O.mode = optarg; break;
        case 'r': O.reduced = 1; break;
        case 'v': O.verbose = 1; break;
        default:
            fprintf(stderr, "usage: fccl-run -n N moe_check [-m layer|args|kill] "
                            "[-r] [-v]\n");
            return 2;
        }
    }
    if (th_reduced())
        O.reduced = 1;
    fccl_init_opts_t io;
    fccl_init_opts_init(&io);
    int rc = fccl_init(&io, &world);
    if (rc < 0) {
        fprintf(stderr, "moe_check: init: %s\n", fccl_last_error());
        return 1;
    }
    W = fccl_get_rank();
    NW = fccl_get_world_size();
    if (NW < 2 || NW > 64 || setup_groups() < 0) {
        fprintf(stderr, "moe_check: needs 2..64 ranks\n");
        fccl_finalize();
        return 2;
    }
    if (strcmp(O.mode, "kill") == 0)
        return kill_mode();
    double t0 = th_now();
    if (strcmp(O.mode, "args") == 0)
        args_mode();
    else
        layer_mode();
    int64_t tot[2] = {fails, cases};
    rc = fccl_all_reduce(tot, tot, 2, FCCL_INT64, FCCL_SUM, world, NULL);
    if (rc < 0)
        fprintf(stderr, "moe_check: final all_reduce: %s\n", fccl_last_error());
    if (W == 0)
        printf("moe_check: ranks=%d mode=%s%s: %d cases, %lld failed, %.1f s\n",
               NW, O.mode, O.reduced ? " reduced" : "", cases,
               (long long)tot[0], th_now() - t0);
    if (tp2)
        fccl_group_destroy(tp2);
    if (ep2)
        fccl_group_destroy(ep2);
    fccl_finalize();
    return rc == 0 && tot[0] == 0 ? 0 : 1;
}
