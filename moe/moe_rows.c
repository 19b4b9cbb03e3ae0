/*
 * MoE row kernels: the weighted sum of expert rows, the residual add and
 * RMSNorm, on one token row at a time in float32.
 *
 * The 16-bit types (bfloat16, float16) are widened exactly and rounded
 * back to nearest-even (NaN stays a quiet NaN, overflow goes to
 * infinity), by the conversions the reduction kernels use too
 * (common/bf16.h, common/fp16.h); each has its own copy of every loop,
 * made by one macro, so the conversion inlines into it.  The loops are plain
 * element loops over contiguous rows so the compiler vectorises them; the
 * file asks for -O3 because -O2's cost model refuses loops whose length is
 * not a known multiple of the vector width.
 */
#pragma GCC optimize("O3")

#include <math.h>

/* The hot loops get an AVX2 clone (8 floats per instruction instead of
 * SSE2's 4), chosen once at load time where the CPU has it.  The ISO C
 * build does not contract a*b+c into FMA, so both clones give the same
 * bits. */
#if defined(__x86_64__) && defined(__GNUC__) && !defined(__clang__)
#define MOE_CLONES __attribute__((target_clones("avx2", "default")))
#else
#define MOE_CLONES
#endif

/* after the pragma, so its inline conversions get O3 here too */
#include "bf16.h"
#include "fp16.h"
#include "moe_int.h"

/* The loops of one 16-bit type: TOF widens an element, TOH narrows. */
#define HALF_ROWS(SFX, TOF, TOH)                                               \
    MOE_CLONES                                                                 \
    static void axpy_##SFX(float *restrict acc, const uint16_t *restrict row, \
                           float w, size_t H, int first)                      \
    {                                                                          \
        if (first) {                                                           \
            for (size_t i = 0; i < H; i++)                                     \
                acc[i] = w * TOF(row[i]);                                      \
            return;                                                            \
        }                                                                      \
        for (size_t i = 0; i < H; i++)                                         \
            acc[i] += w * TOF(row[i]);                                         \
    }                                                                          \
    /* four rows per pass, in the order of four axpys (the same bits) */      \
    MOE_CLONES                                                                 \
    static void axpy4_##SFX(float *restrict acc, const uint16_t *restrict r0, \
                            const uint16_t *restrict r1,                       \
                            const uint16_t *restrict r2,                       \
                            const uint16_t *restrict r3, const float *w,       \
                            size_t H)                                          \
    {                                                                          \
        float w0 = w[0], w1 = w[1], w2 = w[2], w3 = w[3];                      \
        for (size_t i = 0; i < H; i++)                                         \
            acc[i] = (((acc[i] + w0 * TOF(r0[i])) + w1 * TOF(r1[i])) +         \
                      w2 * TOF(r2[i])) +                                       \
                     w3 * TOF(r3[i]);                                          \
    }                                                                          \
    MOE_CLONES                                                                 \
    static void first4_##SFX(float *restrict acc,                             \
                             const uint16_t *restrict r0,                      \
                             const uint16_t *restrict r1,                      \
                             const uint16_t *restrict r2,                      \
                             const uint16_t *restrict r3, const float *w,      \
                             size_t H)                                         \
    {                                                                          \
        float w0 = w[0], w1 = w[1], w2 = w[2], w3 = w[3];                      \
        for (size_t i = 0; i < H; i++)                                         \
            acc[i] = ((w0 * TOF(r0[i]) + w1 * TOF(r1[i])) +                    \
                      w2 * TOF(r2[i])) +                                       \
                     w3 * TOF(r3[i]);                                          \
    }                                                                          \
    MOE_CLONES                                                                 \
    static void store_##SFX(uint16_t *restrict d, const float *restrict acc,  \
                            size_t H)                                          \
    {                                                                          \
        for (size_t i = 0; i < H; i++)                                         \
            d[i] = TOH(acc[i]);                                                \
    }                                                                          \
    /* acc += residual, x_out = round(acc), the sum of squares of acc in    \
     * sumsq's lanes and order; x_out may be residual (read first) */        \
    MOE_CLONES                                                                 \
    static float add_##SFX(float *restrict acc, const uint16_t *res,          \
                           uint16_t *x_out, size_t H)                          \
    {                                                                          \
        float s[8] = {0, 0, 0, 0, 0, 0, 0, 0};                                 \
        size_t i = 0;                                                          \
        for (; i + 8 <= H; i += 8)                                             \
            for (int j = 0; j < 8; j++) {                                      \
                float v = acc[i + j] + TOF(res[i + j]);                        \
                acc[i + j] = v;                                                \
                x_out[i + j] = TOH(v);                                         \
                s[j] += v * v;                                                 \
            }                                                                  \
        for (; i < H; i++) {                                                   \
            float v = acc[i] + TOF(res[i]);                                    \
            acc[i] = v;                                                        \
            x_out[i] = TOH(v);                                                 \
            s[0] += v * v;                                                     \
        }                                                                      \
        return ((s[0] + s[1]) + (s[2] + s[3])) + ((s[4] + s[5]) + (s[6] + s[7])); \
    }                                                                          \
    MOE_CLONES                                                                 \
    static void norm_##SFX(const float *restrict acc,                         \
                           const uint16_t *restrict g, float rstd,             \
                           uint16_t *restrict y, size_t H)                     \
    {                                                                          \
        for (size_t i = 0; i < H; i++)                                         \
            y[i] = TOH(acc[i] * rstd * TOF(g[i]));                             \
    }

HALF_ROWS(bf16, fccl_bf16_to_float, fccl_float_to_bf16)
HALF_ROWS(f16, fccl_half_to_float, fccl_float_to_half)

MOE_CLONES
static void axpy_f32(float *restrict acc, const float *restrict row, float w,
                     size_t H, int first)
{
    if (first) {
        for (size_t i = 0; i < H; i++)
            acc[i] = w * row[i];
        return;
    }
    for (size_t i = 0; i < H; i++)
        acc[i] += w * row[i];
}

/* Four rows per pass over acc, added in the same order as four axpys (so
 * the same bits), with a quarter of the loads and stores of acc. */
MOE_CLONES
static void axpy4_f32(float *restrict acc, const float *restrict r0,
                      const float *restrict r1, const float *restrict r2,
                      const float *restrict r3, const float *w, size_t H)
{
    float w0 = w[0], w1 = w[1], w2 = w[2], w3 = w[3];
    for (size_t i = 0; i < H; i++)
        acc[i] = (((acc[i] + w0 * r0[i]) + w1 * r1[i]) + w2 * r2[i]) +
                 w3 * r3[i];
}

/* The first four rows: acc = ((w0 r0 + w1 r1) + w2 r2) + w3 r3, the same
 * bits as a first axpy and three more, one pass instead of four.  Not
 * axpy4 on a zeroed acc: skipping that pass and the loads of acc is the
 * point (and 0 + -0 would give +0 where a first axpy keeps -0). */
MOE_CLONES
static void first4_f32(float *restrict acc, const float *restrict r0,
                       const float *restrict r1, const float *restrict r2,
                       const float *restrict r3, const float *w, size_t H)
{
    float w0 = w[0], w1 = w[1], w2 = w[2], w3 = w[3];
    for (size_t i = 0; i < H; i++)
        acc[i] = ((w0 * r0[i] + w1 * r1[i]) + w2 * r2[i]) + w3 * r3[i];
}

/* Four rows at once, first (acc = ...) or not (acc += ...). */
static void rows4(float *acc, const void *const *r, const float *w, size_t H,
                  fccl_dtype_t dt, int first)
{
    if (dt == FCCL_BFLOAT16)
        (first ? first4_bf16 : axpy4_bf16)(acc, r[0], r[1], r[2], r[3], w, H);
    else if (dt == FCCL_FLOAT16)
        (first ? first4_f16 : axpy4_f16)(acc, r[0], r[1], r[2], r[3], w, H);
    else
        (first ? first4_f32 : axpy4_f32)(acc, r[0], r[1], r[2], r[3], w, H);
}

void moe_row_wsum(float *acc, const void *const *rows, const float *w,
                  int n, size_t H, fccl_dtype_t dt)
{
    if (n <= 0) {
        memset(acc, 0, H * sizeof(float));
        return;
    }
    int j = 1;
    if (n >= 4) {
        rows4(acc, rows, w, H, dt, 1);
        j = 4;
    } else {
        moe_row_axpy(acc, rows[0], w[0], H, dt, 1);
    }
    for (; j + 4 <= n; j += 4)
        rows4(acc, rows + j, w + j, H, dt, 0);
    for (; j < n; j++)
        moe_row_axpy(acc, rows[j], w[j], H, dt, 0);
}

void moe_row_axpy(float *acc, const void *row, float w, size_t H,
                  fccl_dtype_t dt, int first)
{
    if (dt == FCCL_BFLOAT16)
        axpy_bf16(acc, row, w, H, first);
    else if (dt == FCCL_FLOAT16)
        axpy_f16(acc, row, w, H, first);
    else
        axpy_f32(acc, row, w, H, first);
}

void moe_row_store(void *dst, const float *acc, size_t H, fccl_dtype_t dt)
{
    if (dt == FCCL_BFLOAT16)
        store_bf16(dst, acc, H);
    else if (dt == FCCL_FLOAT16)
        store_f16(dst, acc, H);
    else
        memcpy(dst, acc, H * sizeof(float));
}

/* Sum of squares in eight fixed lanes: vectorisable without reordering
 * freedom (so the bits never depend on the compiler), and more accurate
 * than one running sum. */
MOE_CLONES
static float sumsq(const float *restrict v, size_t H)
{
    float s[8] = {0, 0, 0, 0, 0, 0, 0, 0};
    size_t i = 0;
    for (; i + 8 <= H; i += 8)
        for (int j = 0; j < 8; j++)
            s[j] += v[i + j] * v[i + j];
    for (; i < H; i++)
        s[0] += v[i] * v[i];
    return ((s[0] + s[1]) + (s[2] + s[3])) + ((s[4] + s[5]) + (s[6] + s[7]));
}

MOE_CLONES
static float add_f32(float *restrict acc, const float *res, float *x_out,
                     size_t H)
{
    float s[8] = {0, 0, 0, 0, 0, 0, 0, 0};
    size_t i = 0;
    for (; i + 8 <= H; i += 8)
        for (int j = 0; j < 8; j++) {
            float v = acc[i + j] + res[i + j];
            acc[i + j] = v;
            x_out[i + j] = v;
            s[j] += v * v;
        }
    for (; i < H; i++) {
        float v = acc[i] + res[i];
        acc[i] = v;
        x_out[i] = v;
        s[0] += v * v;
    }
    return ((s[0] + s[1]) + (s[2] + s[3])) + ((s[4] + s[5]) + (s[6] + s[7]));
}

MOE_CLONES
static void norm_f32(const float *restrict acc, const float *restrict g,
                     float rstd, float *restrict y, size_t H)
{
    for (size_t i = 0; i < H; i++)
        y[i] = acc[i] * rstd * g[i];
}

static float norm_with(const float *acc, float ss, const void *gamma,
                       float eps, void *y_out, size_t H, fccl_dtype_t dt)
{
    float rstd = 1.0f / sqrtf(ss / (float)H + eps);
    if (dt == FCCL_BFLOAT16)
        norm_bf16(acc, gamma, rstd, y_out, H);
    else if (dt == FCCL_FLOAT16)
        norm_f16(acc, gamma, rstd, y_out, H);
    else
        norm_f32(acc, gamma, rstd, y_out, H);
    return rstd;
}

float moe_row_rms_norm(const float *acc, const void *gamma, float eps,
                       void *y_out, size_t H, fccl_dtype_t dt)
{
    return norm_with(acc, sumsq(acc, H), gamma, eps, y_out, H, dt);
}

float moe_row_add_rms_norm(float *acc, const void *residual,
                           const void *gamma, float eps, void *x_out,
                           void *y_out, size_t H, fccl_dtype_t dt)
{
    float ss = dt == FCCL_BFLOAT16  ? add_bf16(acc, residual, x_out, H)
               : dt == FCCL_FLOAT16 ? add_f16(acc, residual, x_out, H)
                                    : add_f32(acc, residual, x_out, H);
    return norm_with(acc, ss, gamma, eps, y_out, H, dt);
}
