/*
 * Reduction kernels against straightforward references.
 *
 * The references are written independently of coll/reduce/kernels.c: integers are
 * combined in uint64/int64 and truncated to the type's width, floats are
 * combined in double and rounded once (exact for one add or multiply),
 * float16 and bfloat16 conversions are the test library's (tests/lib/ref.h:
 * _Float16, and bfloat16 rounding found by comparing the two neighbouring
 * candidates in double).
 */
#include <criterion/criterion.h>
#include <float.h>
#include <math.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "fccl/coll.h"
#include "lib/proc.h"
#include "lib/ref.h"
#include "reduce.h"

#define N 1037 /* not a multiple of any block size: exercises the tails */

/* In long loops, report only failures: one Criterion event per check would
 * flood its runner (millions of passing asserts). */
#define CHECK(cond, ...)                                                       \
    do {                                                                       \
        if (!(cond))                                                           \
            cr_assert_fail(__VA_ARGS__);                                       \
    } while (0)

static uint64_t lcg(uint64_t *s)
{
    *s = *s * 6364136223846793005ull + 1442695040888963407ull;
    return *s >> 11;
}

static uint32_t fbits(float f)
{
    uint32_t u;
    memcpy(&u, &f, 4);
    return u;
}

static float bitsf(uint32_t u)
{
    float f;
    memcpy(&f, &u, 4);
    return f;
}

/* 2,000,000 floats of random bits (NaNs left out) narrowed by the library
 * and by the reference must agree. */
static void random_floats_agree(uint64_t seed, uint16_t (*lib)(float),
                                uint16_t (*ref)(float))
{
    for (int i = 0; i < 2000000; i++) {
        float f = bitsf((uint32_t)lcg(&seed));
        if (isnan(f))
            continue;
        CHECK(lib(f) == ref(f), "random float %a", f);
    }
}

/* ---- references ---- */

/* Reference of one element.  Reads element i of a and b as `dt`, writes
 * the combined element to out (same layout). */
static void ref_elem(fccl_dtype_t dt, fccl_redop_t op, const void *a,
                     const void *b, size_t i, void *out)
{
    int o = op == FCCL_AVG ? FCCL_SUM : (int)op;
#define INTREF(T)                                                              \
    do {                                                                       \
        int64_t x = ((const T *)a)[i], y = ((const T *)b)[i];                  \
        uint64_t r;                                                            \
        if (o == FCCL_SUM)                                                     \
            r = (uint64_t)x + (uint64_t)y;                                     \
        else if (o == FCCL_PROD)                                               \
            r = (uint64_t)x * (uint64_t)y;                                     \
        else if (o == FCCL_MAX)                                                \
            r = (uint64_t)(x > y ? x : y);                                     \
        else if (o == FCCL_BAND)                                               \
            r = (uint64_t)x & (uint64_t)y;                                     \
        else if (o == FCCL_BOR)                                                \
            r = (uint64_t)x | (uint64_t)y;                                     \
        else if (o == FCCL_BXOR)                                               \
            r = (uint64_t)x ^ (uint64_t)y;                                     \
        else                                                                   \
            r = (uint64_t)(x < y ? x : y);                                     \
        *(T *)out = (T)r;                                                      \
    } while (0)
#define DBLREF(x, y)                                                           \
    (o == FCCL_SUM    ? (x) + (y)                                              \
     : o == FCCL_PROD ? (x) * (y)                                              \
     : o == FCCL_MAX  ? ((x) > (y) ? (x) : (y))                                \
                      : ((x) < (y) ? (x) : (y)))
    switch (dt) {
    case FCCL_INT8: INTREF(int8_t); break;
    case FCCL_INT16: INTREF(int16_t); break;
    case FCCL_UINT8: INTREF(uint8_t); break;
    case FCCL_INT32: INTREF(int32_t); break;
    case FCCL_UINT32: INTREF(uint32_t); break;
    case FCCL_INT64: INTREF(int64_t); break;
    case FCCL_UINT64: {
        uint64_t x = ((const uint64_t *)a)[i], y = ((const uint64_t *)b)[i];
        *(uint64_t *)out = o == FCCL_SUM    ? x + y
                           : o == FCCL_PROD ? x * y
                           : o == FCCL_MAX  ? (x > y ? x : y)
                           : o == FCCL_BAND ? x & y
                           : o == FCCL_BOR  ? x | y
                           : o == FCCL_BXOR ? x ^ y
                                            : (x < y ? x : y);
        break;
    }
    case FCCL_FLOAT32: {
        double x = ((const float *)a)[i], y = ((const float *)b)[i];
        *(float *)out = (float)DBLREF(x, y);
        break;
    }
    case FCCL_FLOAT64: {
        /* one IEEE double operation is its own reference */
        double x = ((const double *)a)[i], y = ((const double *)b)[i];
        *(double *)out = DBLREF(x, y);
        break;
    }
    case FCCL_FLOAT16: {
        double x = th_h2f(((const uint16_t *)a)[i]);
        double y = th_h2f(((const uint16_t *)b)[i]);
        *(uint16_t *)out = th_f2h((float)DBLREF(x, y));
        break;
    }
    case FCCL_BFLOAT16: {
        double x = th_bf2f(((const uint16_t *)a)[i]);
        double y = th_bf2f(((const uint16_t *)b)[i]);
        *(uint16_t *)out = th_f2bf((float)DBLREF(x, y));
        break;
    }
    case FCCL_BOOL: {
        int x = ((const uint8_t *)a)[i] != 0, y = ((const uint8_t *)b)[i] != 0;
        int orr = o == FCCL_SUM || o == FCCL_MAX || o == FCCL_BOR;
        *(uint8_t *)out = (uint8_t)(o == FCCL_BXOR ? (x != y)
                                    : orr          ? (x || y)
                                                   : (x && y));
        break;
    }
    default: cr_assert_fail("bad dtype");
    }
#undef INTREF
#undef DBLREF
}

/* Deterministic inputs that are valid for the type (finite floats of
 * moderate size so that products stay finite; bools include bytes > 1). */
static void fill(fccl_dtype_t dt, void *buf, size_t n, uint64_t seed)
{
    uint64_t s = seed;
    for (size_t i = 0; i < n; i++) {
        uint64_t r = lcg(&s);
        double v = (double)(int64_t)(r % 2001) / 64.0 - 15.6;
        switch (dt) {
        case FCCL_FLOAT16: ((uint16_t *)buf)[i] = th_f2h((float)v); break;
        case FCCL_BFLOAT16: ((uint16_t *)buf)[i] = th_f2bf((float)v); break;
        case FCCL_FLOAT32: ((float *)buf)[i] = (float)(v * 1.0000001); break;
        case FCCL_FLOAT64: ((double *)buf)[i] = v * 1.000000000001; break;
        case FCCL_BOOL: ((uint8_t *)buf)[i] = (uint8_t)(r % 3 ? r % 5 : 0); break;
        default: memcpy((char *)buf + i * fccl_dtype_size(dt), &r,
                        fccl_dtype_size(dt));
        }
    }
}

static void check_all(fccl_dtype_t dt, fccl_redop_t op, size_t n)
{
    size_t es = fccl_dtype_size(dt);
    unsigned char *a = malloc(n * es + 1), *b = malloc(n * es + 1),
                  *d = malloc(n * es + 1), *ref = malloc(n * es + 1);
    fill(dt, a, n, 1 + (uint64_t)dt * 31 + (uint64_t)op);
    fill(dt, b, n, 1000 + (uint64_t)dt * 17 + (uint64_t)op);
    for (size_t i = 0; i < n; i++)
        ref_elem(dt, op, a, b, i, ref + i * es);
    /* out of place, then both in-place forms */
    coll_reduce(d, a, b, n, dt, op);
    for (size_t i = 0; i < n; i++)
        CHECK(memcmp(d + i * es, ref + i * es, es) == 0,
                  "%s %s element %zu of %zu differs", fccl_dtype_name(dt),
                  fccl_redop_name(op), i, n);
    unsigned char *a2 = malloc(n * es + 1);
    memcpy(a2, a, n * es);
    coll_reduce(a2, a2, b, n, dt, op);
    CHECK(memcmp(a2, ref, n * es) == 0, "%s %s in-place (dst==a)",
              fccl_dtype_name(dt), fccl_redop_name(op));
    memcpy(a2, b, n * es);
    coll_reduce(a2, a, a2, n, dt, op);
    CHECK(memcmp(a2, ref, n * es) == 0, "%s %s in-place (dst==b)",
              fccl_dtype_name(dt), fccl_redop_name(op));
    free(a);
    free(b);
    free(d);
    free(ref);
    free(a2);
}

Test(reduce, every_dtype_and_op, .timeout = 30)
{
    size_t sizes[] = {0, 1, 15, 16, 17, N};
    for (int dt = 0; dt < FCCL_NUM_DTYPES; dt++)
        for (int op = 0; op < FCCL_NUM_OPS; op++) {
            if (coll_reduce_check((fccl_dtype_t)dt, (fccl_redop_t)op) < 0)
                continue; /* avg on bool, bitwise on floats: refused below */
            for (size_t k = 0; k < sizeof(sizes) / sizeof(sizes[0]); k++)
                check_all((fccl_dtype_t)dt, (fccl_redop_t)op, sizes[k]);
        }
}

Test(reduce, integer_wrap, .timeout = 10)
{
    int8_t a8[2] = {127, -128}, b8[2] = {1, -1}, d8[2];
    coll_reduce(d8, a8, b8, 2, FCCL_INT8, FCCL_SUM);
    cr_expect(d8[0] == -128 && d8[1] == 127, "int8 wrap: %d %d", d8[0], d8[1]);
    uint8_t ua[1] = {255}, ub[1] = {2}, ud[1];
    coll_reduce(ud, ua, ub, 1, FCCL_UINT8, FCCL_SUM);
    cr_expect(ud[0] == 1);
    coll_reduce(ud, ua, ub, 1, FCCL_UINT8, FCCL_PROD);
    cr_expect(ud[0] == 254);
    int32_t a32[1] = {INT32_MAX}, b32[1] = {2}, d32[1];
    coll_reduce(d32, a32, b32, 1, FCCL_INT32, FCCL_PROD);
    cr_expect(d32[0] == -2, "int32 prod wrap: %d", d32[0]);
    int64_t a64[1] = {INT64_MIN}, b64[1] = {-1}, d64[1];
    coll_reduce(d64, a64, b64, 1, FCCL_INT64, FCCL_SUM);
    cr_expect(d64[0] == INT64_MAX);
    coll_reduce(d64, a64, b64, 1, FCCL_INT64, FCCL_PROD);
    cr_expect(d64[0] == INT64_MIN, "INT64_MIN * -1 wraps to itself");
    uint64_t u64a[1] = {UINT64_MAX}, u64b[1] = {UINT64_MAX}, u64d[1];
    coll_reduce(u64d, u64a, u64b, 1, FCCL_UINT64, FCCL_PROD);
    cr_expect(u64d[0] == 1);
    coll_reduce(u64d, u64a, u64b, 1, FCCL_UINT64, FCCL_MIN);
    cr_expect(u64d[0] == UINT64_MAX, "unsigned compare, not signed");
    int8_t m1[1] = {-5}, m2[1] = {3}, md[1];
    coll_reduce(md, m1, m2, 1, FCCL_INT8, FCCL_MAX);
    cr_expect(md[0] == 3, "signed compare");
}

Test(reduce, float_edges, .timeout = 10)
{
    float a[6] = {INFINITY, -0.0f, 0x1p-149f, FLT_MAX, -INFINITY, 0.0f};
    float b[6] = {1.0f, 0.0f, 0x1p-149f, FLT_MAX, 3.0f, -0.0f};
    float d[6];
    coll_reduce(d, a, b, 6, FCCL_FLOAT32, FCCL_SUM);
    cr_expect(isinf(d[0]) && d[0] > 0);
    cr_expect(d[1] == 0.0f && !signbit(d[1]), "-0 + 0 = +0");
    cr_expect(fbits(d[2]) == fbits(0x1p-148f), "denormals add exactly");
    cr_expect(isinf(d[3]), "overflow to inf");
    cr_expect(isinf(d[4]) && d[4] < 0);
    coll_reduce(d, a, b, 6, FCCL_FLOAT32, FCCL_MAX);
    cr_expect(isinf(d[0]) && d[3] == FLT_MAX && d[4] == 3.0f);
    coll_reduce(d, a, b, 6, FCCL_FLOAT32, FCCL_MIN);
    cr_expect(d[0] == 1.0f && isinf(d[4]) && d[4] < 0);
}

Test(reduce, half_conversions_exhaustive, .timeout = 30)
{
    for (uint32_t h = 0; h < 65536; h++) {
        float f = coll_half_to_float((uint16_t)h), r = th_h2f((uint16_t)h);
        if (isnan(r)) {
            CHECK(isnan(f), "half %04x should be NaN", h);
            CHECK(isnan(coll_half_to_float(coll_float_to_half(f))));
            continue;
        }
        CHECK(fbits(f) == fbits(r), "half %04x -> %a, want %a", h, f, r);
        CHECK(coll_float_to_half(f) == h, "round trip of half %04x", h);
        /* the midpoint to the next half up and its float neighbours */
        if ((h & 0x7fff) >= 0x7bff)
            continue;
        float next = th_h2f((uint16_t)(h + 1));
        float mid = (float)(((double)r + (double)next) / 2);
        float probes[3] = {mid, nextafterf(mid, -INFINITY),
                           nextafterf(mid, INFINITY)};
        for (int k = 0; k < 3; k++)
            CHECK(coll_float_to_half(probes[k]) == th_f2h(probes[k]),
                      "float %a -> half %04x, want %04x", probes[k],
                      coll_float_to_half(probes[k]), th_f2h(probes[k]));
    }
    /* overflow to infinity at 65520 (the midpoint above 65504) */
    cr_expect(coll_float_to_half(65519.0f) == 0x7bff);
    cr_expect(coll_float_to_half(65520.0f) == 0x7c00);
    cr_expect(coll_float_to_half(-1e9f) == 0xfc00);
    random_floats_agree(7, coll_float_to_half, th_f2h);
}

Test(reduce, bf16_conversions_exhaustive, .timeout = 30)
{
    for (uint32_t h = 0; h < 65536; h++) {
        float f = coll_bf16_to_float((uint16_t)h);
        CHECK(fbits(f) == h << 16);
        if (isnan(f)) {
            CHECK(isnan(coll_bf16_to_float(coll_float_to_bf16(f))),
                      "NaN %04x must stay NaN", h);
            continue;
        }
        CHECK(coll_float_to_bf16(f) == h, "round trip of bf16 %04x", h);
    }
    random_floats_agree(11, coll_float_to_bf16, th_f2bf);
    /* ties: 1 + 2^-8 is halfway between 1 and 1 + 2^-7: to even (1) */
    cr_expect(coll_float_to_bf16(1.0f + 0x1p-8f) == 0x3f80);
    cr_expect(coll_float_to_bf16(1.0f + 0x1p-7f + 0x1p-8f) == 0x3f82);
}

Test(reduce, half_sum_rounds_in_float, .timeout = 10)
{
    /* 2048 + 1 in float16: 2049 is a tie between 2048 and 2050 -> 2048 */
    uint16_t a[2] = {coll_float_to_half(2048.0f), coll_float_to_half(2048.0f)};
    uint16_t b[2] = {coll_float_to_half(1.0f), coll_float_to_half(3.0f)};
    uint16_t d[2];
    coll_reduce(d, a, b, 2, FCCL_FLOAT16, FCCL_SUM);
    cr_expect(coll_half_to_float(d[0]) == 2048.0f);
    cr_expect(coll_half_to_float(d[1]) == 2052.0f, "2051 ties to 2052");
}

Test(reduce, bool_ops, .timeout = 10)
{
    uint8_t a[4] = {0, 0, 2, 7}, b[4] = {0, 9, 0, 1}, d[4];
    coll_reduce(d, a, b, 4, FCCL_BOOL, FCCL_SUM);
    cr_expect(d[0] == 0 && d[1] == 1 && d[2] == 1 && d[3] == 1, "or");
    coll_reduce(d, a, b, 4, FCCL_BOOL, FCCL_MAX);
    cr_expect(d[0] == 0 && d[1] == 1 && d[2] == 1 && d[3] == 1, "max = or");
    coll_reduce(d, a, b, 4, FCCL_BOOL, FCCL_PROD);
    cr_expect(d[0] == 0 && d[1] == 0 && d[2] == 0 && d[3] == 1, "and");
    coll_reduce(d, a, b, 4, FCCL_BOOL, FCCL_MIN);
    cr_expect(d[0] == 0 && d[1] == 0 && d[2] == 0 && d[3] == 1, "min = and");
}

Test(reduce, avg_finish, .timeout = 10)
{
    int32_t i32[4] = {-7, 7, -1, 9};
    coll_reduce_avg_finish(i32, 4, FCCL_INT32, 2);
    cr_expect(i32[0] == -3 && i32[1] == 3 && i32[2] == 0 && i32[3] == 4,
              "truncation toward zero: %d %d %d %d", i32[0], i32[1], i32[2],
              i32[3]);
    int8_t i8[2] = {-128, 127};
    coll_reduce_avg_finish(i8, 2, FCCL_INT8, 3);
    cr_expect(i8[0] == -42 && i8[1] == 42);
    uint64_t u64[1] = {UINT64_MAX};
    coll_reduce_avg_finish(u64, 1, FCCL_UINT64, 2);
    cr_expect(u64[0] == UINT64_MAX / 2);
    int64_t i64[1] = {-9};
    coll_reduce_avg_finish(i64, 1, FCCL_INT64, 4);
    cr_expect(i64[0] == -2);
    float f[1] = {1.0f};
    coll_reduce_avg_finish(f, 1, FCCL_FLOAT32, 3);
    cr_expect(f[0] == 1.0f / 3.0f);
    uint16_t h[1] = {coll_float_to_half(1.0f)};
    coll_reduce_avg_finish(h, 1, FCCL_FLOAT16, 3);
    cr_expect(h[0] == th_f2h(1.0f / 3.0f));
    uint16_t bf[1] = {coll_float_to_bf16(5.0f)};
    coll_reduce_avg_finish(bf, 1, FCCL_BFLOAT16, 2);
    cr_expect(coll_bf16_to_float(bf[0]) == 2.5f);
}

Test(reduce, check_refuses, .timeout = 10)
{
    cr_expect(coll_reduce_check(FCCL_BOOL, FCCL_AVG) == FCCL_ERR_INVALID);
    cr_expect(strstr(fccl_last_error(), "bool") != NULL);
    cr_expect(coll_reduce_check(FCCL_NUM_DTYPES, FCCL_SUM) == FCCL_ERR_INVALID);
    cr_expect(coll_reduce_check((fccl_dtype_t)-1, FCCL_SUM) == FCCL_ERR_INVALID);
    cr_expect(coll_reduce_check(FCCL_FLOAT32, FCCL_NUM_OPS) == FCCL_ERR_INVALID);
    cr_expect(coll_reduce_check(FCCL_BOOL, FCCL_MAX) == FCCL_OK);
    cr_expect(coll_reduce_check(FCCL_INT8, FCCL_AVG) == FCCL_OK);
    /* bitwise ops: integer types and bool, never floating types */
    fccl_dtype_t fl[] = {FCCL_FLOAT16, FCCL_BFLOAT16, FCCL_FLOAT32,
                         FCCL_FLOAT64};
    fccl_redop_t bw[] = {FCCL_BAND, FCCL_BOR, FCCL_BXOR};
    for (int i = 0; i < 4; i++)
        for (int j = 0; j < 3; j++) {
            cr_expect(coll_reduce_check(fl[i], bw[j]) == FCCL_ERR_INVALID);
            cr_expect(strstr(fccl_last_error(), fccl_dtype_name(fl[i])));
        }
    fccl_dtype_t in[] = {FCCL_INT8, FCCL_UINT8, FCCL_INT16, FCCL_INT32,
                         FCCL_UINT32, FCCL_INT64, FCCL_UINT64, FCCL_BOOL};
    for (int i = 0; i < 8; i++)
        for (int j = 0; j < 3; j++)
            cr_expect(coll_reduce_check(in[i], bw[j]) == FCCL_OK);
}

/* Known values, so a kernel mixed up with another one fails here even if
 * the reference made the same mistake. */
Test(reduce, bitwise_and_int16_values, .timeout = 10)
{
    int16_t a[3] = {0x0f0f, -1, 32767}, b[3] = {0x00ff, 0x1234, 1}, d[3];
    coll_reduce(d, a, b, 3, FCCL_INT16, FCCL_BAND);
    cr_expect(d[0] == 0x000f && d[1] == 0x1234 && d[2] == 1);
    coll_reduce(d, a, b, 3, FCCL_INT16, FCCL_BOR);
    cr_expect(d[0] == 0x0fff && d[1] == -1 && d[2] == 32767);
    coll_reduce(d, a, b, 3, FCCL_INT16, FCCL_BXOR);
    cr_expect(d[0] == 0x0ff0 && d[1] == (int16_t)~0x1234 && d[2] == 32766);
    coll_reduce(d, a, b, 3, FCCL_INT16, FCCL_SUM); /* wraps */
    cr_expect(d[2] == -32768, "int16 wrap: %d", d[2]);
    coll_reduce(d, a, b, 3, FCCL_INT16, FCCL_MIN);
    cr_expect(d[0] == 0x00ff && d[1] == -1 && d[2] == 1);
    int16_t v[2] = {-7, 7};
    coll_reduce_avg_finish(v, 2, FCCL_INT16, 2);
    cr_expect(v[0] == -3 && v[1] == 3, "int16 avg truncates: %d %d", v[0],
              v[1]);
    uint8_t x[4] = {0, 2, 0, 5}, y[4] = {0, 0, 3, 1}, z[4];
    coll_reduce(z, x, y, 4, FCCL_BOOL, FCCL_BXOR);
    cr_expect(z[0] == 0 && z[1] == 1 && z[2] == 1 && z[3] == 0);
    coll_reduce(z, x, y, 4, FCCL_BOOL, FCCL_BAND);
    cr_expect(z[0] == 0 && z[1] == 0 && z[2] == 0 && z[3] == 1);
    uint64_t ua[1] = {0xf0f0f0f0f0f0f0f0ull}, ub[1] = {0xff00ff00ff00ff00ull},
             ud[1];
    coll_reduce(ud, ua, ub, 1, FCCL_UINT64, FCCL_BXOR);
    cr_expect(ud[0] == 0x0ff00ff00ff00ff0ull);
}

Test(dtype, names_sizes_parse, .timeout = 10)
{
    size_t want[FCCL_NUM_DTYPES] = {1, 1, 4, 4, 8, 8, 2, 2, 4, 8, 1, 2};
    for (int dt = 0; dt < FCCL_NUM_DTYPES; dt++) {
        cr_expect(fccl_dtype_size((fccl_dtype_t)dt) == want[dt]);
        cr_expect(fccl_dtype_parse(fccl_dtype_name((fccl_dtype_t)dt)) == dt);
    }
    for (int op = 0; op < FCCL_NUM_OPS; op++)
        cr_expect(fccl_redop_parse(fccl_redop_name((fccl_redop_t)op)) == op);
    cr_expect(fccl_dtype_size(FCCL_NUM_DTYPES) == 0);
    cr_expect_str_eq(fccl_dtype_name(FCCL_NUM_DTYPES), "?");
    cr_expect_str_eq(fccl_redop_name((fccl_redop_t)99), "?");
    cr_expect(fccl_dtype_parse("float") == FCCL_FLOAT32);
    cr_expect(fccl_dtype_parse("half") == FCCL_FLOAT16);
    cr_expect(fccl_dtype_parse("bf16") == FCCL_BFLOAT16);
    cr_expect(fccl_dtype_parse("DOUBLE") == FCCL_FLOAT64);
    cr_expect(fccl_dtype_parse("int") == FCCL_INT32);
    cr_expect(fccl_dtype_parse("nope") == -1);
    cr_expect(fccl_dtype_parse(NULL) == -1);
    cr_expect(fccl_redop_parse("max") == FCCL_MAX);
    cr_expect(fccl_redop_parse("mean") == FCCL_AVG);
    cr_expect(fccl_redop_parse("BXOR") == FCCL_BXOR);
    cr_expect(fccl_redop_parse("or") == FCCL_BOR);
    cr_expect(fccl_dtype_parse("int16") == FCCL_INT16);
    cr_expect(fccl_dtype_parse("short") == FCCL_INT16);
    cr_expect(FCCL_INT16 == 11 && FCCL_BOOL == 10 && FCCL_BAND == 5,
              "existing enum values kept, new ones appended");
    cr_expect(fccl_redop_parse("xor") == FCCL_BXOR);
}

Test(reduce, throughput_not_a_bottleneck, .timeout = 30)
{
    /* A CPU measurement: the quick tier runs suites side by side, and the
     * copy and the kernel, timed a moment apart, then see different
     * neighbours. */
    TH_LONG_CASE("a CPU measurement");
#if defined(__SANITIZE_ADDRESS__)
    cr_skip_test("instrumented build: speed is meaningless");
#endif
    /* 16 MiB of float32 summed in place must run at memory speed: at least
     * a third of what memcpy moves over the same buffers (measured right
     * before, so a loaded machine slows both alike). */
    size_t n = 4u << 20;
    float *a = malloc(n * 4), *b = malloc(n * 4);
    for (size_t i = 0; i < n; i++) {
        a[i] = (float)i;
        b[i] = 1.0f;
    }
    coll_reduce(a, a, b, n, FCCL_FLOAT32, FCCL_SUM); /* warm */
    double best_copy = 1e9, best_red = 1e9;
    for (int rep = 0; rep < 5; rep++) {
        double t0 = th_now();
        memcpy(b, a, n * 4); /* reads 1, writes 1 vector */
        double c = th_now() - t0;
        for (size_t i = 0; i < n; i++)
            b[i] = 1.0f;
        t0 = th_now();
        coll_reduce(a, a, b, n, FCCL_FLOAT32, FCCL_SUM); /* reads 2, writes 1 */
        double r = th_now() - t0;
        best_copy = c < best_copy ? c : best_copy;
        best_red = r < best_red ? r : best_red;
    }
    double copy_gbs = 2.0 * (double)n * 4 / best_copy / 1e9;
    double red_gbs = 3.0 * (double)n * 4 / best_red / 1e9;
    cr_expect(a[5] == 5.0f + 6.0f, "a[5] = %g", a[5]);
    cr_expect(red_gbs > copy_gbs / 3, "sum kernel %.2f GB/s vs memcpy %.2f GB/s",
              red_gbs, copy_gbs);
    free(a);
    free(b);
}
