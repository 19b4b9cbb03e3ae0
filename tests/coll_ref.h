/*
 * coll_ref.h: deterministic inputs and independent references for the
 * collective matrix (tests/coll_check.c), its only user, so header-only;
 * the shared scalar pieces are in tests/lib/ref.h.
 *
 * Element i of rank r's input in case c is a pure function of (c, r, i),
 * so every rank can compute the expected result of a whole collective on
 * its own, with plain loops in uint64 / double arithmetic.  Nothing here
 * uses coll/reduce/kernels.c: the float16 and bfloat16 conversions are the
 * test library's (tests/lib/ref.h).
 */
#ifndef FCCL_TESTS_COLL_REF_H
#define FCCL_TESTS_COLL_REF_H

#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>

#include "fccl/coll.h"
#include "lib/ref.h"

static inline uint64_t ref_raw(int cs, int rank, size_t i)
{
    return th_mix64(((uint64_t)(unsigned)cs << 44) ^
                    ((uint64_t)rank << 36) ^ (uint64_t)i);
}

static inline int ref_is_float(fccl_dtype_t dt)
{
    return dt == FCCL_FLOAT16 || dt == FCCL_BFLOAT16 || dt == FCCL_FLOAT32 ||
           dt == FCCL_FLOAT64;
}

static inline int ref_is_signed(fccl_dtype_t dt)
{
    return dt == FCCL_INT8 || dt == FCCL_INT16 || dt == FCCL_INT32 ||
           dt == FCCL_INT64;
}

/* Is op a reduction of dt?  avg is not one on bool, nor the bitwise ops
 * on floating types. */
static inline int op_defined(fccl_dtype_t dt, fccl_redop_t op)
{
    if (dt == FCCL_BOOL && op == FCCL_AVG)
        return 0;
    return !(ref_is_float(dt) && op >= FCCL_BAND);
}

/* Write input element i of rank `rank` in case cs to `out` (one element).
 * Products use values near 1 so that n of them stay finite. */
static inline void ref_gen1(void *out, size_t i, fccl_dtype_t dt,
                            fccl_redop_t rop, int cs, int rank)
{
    static const double prod_vals[8] = {0.5, 0.75, 1.0, 1.25,
                                        1.5, 2.0,  -1.0, -0.5};
    uint64_t raw = ref_raw(cs, rank, i);
    unsigned char *p = out;
    double v = rop == FCCL_PROD ? prod_vals[raw % 8]
                                : (double)((int64_t)(raw % 2001) - 1000) / 64.0;
    switch (dt) {
    case FCCL_FLOAT16: { uint16_t h = th_f2h((float)v); memcpy(p, &h, 2); break; }
    case FCCL_BFLOAT16: { uint16_t h = th_f2bf((float)v); memcpy(p, &h, 2); break; }
    case FCCL_FLOAT32: { float f = (float)v; memcpy(p, &f, 4); break; }
    case FCCL_FLOAT64: memcpy(p, &v, 8); break;
    case FCCL_BOOL: *p = (unsigned char)((raw >> 7) & 1u); break;
    default: memcpy(p, &raw, fccl_dtype_size(dt)); break; /* low bytes (LE) */
    }
}

/* Rank `rank`'s inputs for global elements first..first+count-1. */
static inline void ref_fill(void *buf, size_t count, fccl_dtype_t dt,
                            fccl_redop_t rop, int cs, int rank, size_t first)
{
    size_t es = fccl_dtype_size(dt);
    for (size_t k = 0; k < count; k++)
        ref_gen1((unsigned char *)buf + k * es, first + k, dt, rop, cs, rank);
}

static inline double ref_getd(const void *buf, size_t i, fccl_dtype_t dt)
{
    const unsigned char *p = (const unsigned char *)buf + i * fccl_dtype_size(dt);
    uint16_t h;
    float f;
    double d;
    switch (dt) {
    case FCCL_FLOAT16: memcpy(&h, p, 2); return (double)th_h2f(h);
    case FCCL_BFLOAT16: memcpy(&h, p, 2); return (double)th_bf2f(h);
    case FCCL_FLOAT32: memcpy(&f, p, 4); return f;
    default: memcpy(&d, p, 8); return d;
    }
}

/* Integer element as uint64: sign-extended for signed types. */
static inline uint64_t ref_getu(const void *buf, size_t i, fccl_dtype_t dt)
{
    const unsigned char *p = (const unsigned char *)buf + i * fccl_dtype_size(dt);
    switch (dt) {
    case FCCL_INT8: return (uint64_t)(int64_t) * (const int8_t *)p;
    case FCCL_INT16: { int16_t v; memcpy(&v, p, 2); return (uint64_t)(int64_t)v; }
    case FCCL_UINT8: case FCCL_BOOL: return *p;
    case FCCL_INT32: { int32_t v; memcpy(&v, p, 4); return (uint64_t)(int64_t)v; }
    case FCCL_UINT32: { uint32_t v; memcpy(&v, p, 4); return v; }
    default: { uint64_t v; memcpy(&v, p, 8); return v; }
    }
}

/* Truncate/sign-extend a uint64 to the type's width, as ref_getu reads. */
static inline uint64_t ref_wrap(uint64_t v, fccl_dtype_t dt)
{
    switch (dt) {
    case FCCL_INT8: return (uint64_t)(int64_t)(int8_t)(uint8_t)v;
    case FCCL_INT16: return (uint64_t)(int64_t)(int16_t)(uint16_t)v;
    case FCCL_UINT8: return (uint8_t)v;
    case FCCL_INT32: return (uint64_t)(int64_t)(int32_t)(uint32_t)v;
    case FCCL_UINT32: return (uint32_t)v;
    default: return v;
    }
}

static inline double ref_eps(fccl_dtype_t dt)
{
    switch (dt) {
    case FCCL_FLOAT16: return 0x1p-10;
    case FCCL_BFLOAT16: return 0x1p-7;
    case FCCL_FLOAT32: return 0x1p-23;
    default: return 0x1p-52;
    }
}

/* Compare `count` elements of a reduction result (global elements
 * first..first+count-1) over ranks 0..n-1 of case cs.  Returns the index of
 * the first wrong element or -1; *why describes it. */
static inline long ref_check_reduce(const void *got, size_t count, size_t first,
                                    fccl_dtype_t dt, fccl_redop_t rop, int cs,
                                    int n, char *why, size_t wlen)
{
    unsigned char el[8];
    for (size_t k = 0; k < count; k++) {
        size_t gi = first + k;
        if (ref_is_float(dt)) {
            double acc = 0, scale = 0;
            for (int r = 0; r < n; r++) {
                ref_gen1(el, gi, dt, rop, cs, r);
                double x = ref_getd(el, 0, dt);
                if (r == 0)
                    acc = x;
                else if (rop == FCCL_SUM || rop == FCCL_AVG)
                    acc += x;
                else if (rop == FCCL_PROD)
                    acc *= x;
                else if (rop == FCCL_MAX)
                    acc = x > acc ? x : acc;
                else
                    acc = x < acc ? x : acc;
                scale += fabs(x);
            }
            if (rop == FCCL_AVG)
                acc /= n, scale /= n;
            if (rop == FCCL_PROD)
                scale = fabs(acc);
            double g = ref_getd(got, k, dt);
            double tol = (rop == FCCL_MAX || rop == FCCL_MIN)
                             ? 0
                             : (double)(n + 2) * ref_eps(dt) * (scale + 1e-30);
            if (!(fabs(g - acc) <= tol)) {
                snprintf(why, wlen, "element %zu: got %.9g, want %.9g (tol %g)",
                         gi, g, acc, tol);
                return (long)k;
            }
            continue;
        }
        uint64_t acc = 0;
        for (int r = 0; r < n; r++) {
            ref_gen1(el, gi, dt, rop, cs, r);
            uint64_t x = ref_getu(el, 0, dt);
            if (dt == FCCL_BOOL) {
                int orr = rop == FCCL_SUM || rop == FCCL_MAX || rop == FCCL_BOR;
                acc = r == 0 ? x : rop == FCCL_BXOR ? (acc ^ x)
                                 : orr ? (acc | x) : (acc & x);
                continue;
            }
            if (r == 0)
                acc = x;
            else if (rop == FCCL_BAND)
                acc &= x;
            else if (rop == FCCL_BOR)
                acc |= x;
            else if (rop == FCCL_BXOR)
                acc = ref_wrap(acc ^ x, dt);
            else if (rop == FCCL_SUM || rop == FCCL_AVG)
                acc = ref_wrap(acc + x, dt);
            else if (rop == FCCL_PROD)
                acc = ref_wrap(acc * x, dt);
            else if (ref_is_signed(dt))
                acc = (rop == FCCL_MAX) == ((int64_t)x > (int64_t)acc) ? x : acc;
            else
                acc = (rop == FCCL_MAX) == (x > acc) ? x : acc;
        }
        if (rop == FCCL_AVG)
            acc = ref_is_signed(dt) ? (uint64_t)((int64_t)acc / n) : acc / (uint64_t)n;
        acc = ref_wrap(acc, dt);
        uint64_t g = ref_getu(got, k, dt);
        if (g != acc) {
            snprintf(why, wlen, "element %zu: got %llu (0x%llx), want %llu (0x%llx)",
                     gi, (unsigned long long)g, (unsigned long long)g,
                     (unsigned long long)acc, (unsigned long long)acc);
            return (long)k;
        }
    }
    return -1;
}

/* FNV-1a over the bytes: equal results hash equal on every rank. */
static inline uint64_t ref_hash(const void *buf, size_t len)
{
    const unsigned char *p = buf;
    uint64_t h = 0xcbf29ce484222325ull;
    for (size_t i = 0; i < len; i++)
        h = (h ^ p[i]) * 0x100000001b3ull;
    return h;
}

#endif
