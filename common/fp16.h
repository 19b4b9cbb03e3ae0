/*
 * Internal: IEEE half (float16) <-> float32, the library's one
 * conversion (the reduction kernels, coll/reduce/, and the MoE row
 * kernels, moe/, both use it; common/ is the one floor both may see, as
 * for bf16.h).
 *
 * Free of branches (selects are mask arithmetic), so the callers' loops
 * over rows vectorise.  Widening is exact, subnormals included;
 * narrowing rounds to nearest-even, overflow goes to infinity and a NaN
 * stays a quiet NaN.
 */
#ifndef FCCL_FP16_H
#define FCCL_FP16_H

#include <stdint.h>
#include <string.h>

static inline uint32_t fccl_f32_bits(float f)
{
    uint32_t u;
    memcpy(&u, &f, sizeof(u));
    return u;
}

static inline float fccl_f32_of_bits(uint32_t u)
{
    float f;
    memcpy(&f, &u, sizeof(f));
    return f;
}

/* c ? a : b as mask arithmetic: GCC keeps a ternary chain as branches,
 * which stops vectorisation. */
static inline uint32_t fccl_sel32(int c, uint32_t a, uint32_t b)
{
    uint32_t m = 0u - (uint32_t)(c != 0);
    return (a & m) | (b & ~m);
}

/* Shifting the exponent and mantissa into float position and scaling by
 * 2^(127-15) rebiases normals and turns half subnormals into the right
 * float exactly; infinities and NaNs are patched in afterwards. */
static inline float fccl_half_to_float(uint16_t h)
{
    uint32_t sign = (uint32_t)(h & 0x8000u) << 16;
    uint32_t em = h & 0x7fffu;
    uint32_t fin = fccl_f32_bits(fccl_f32_of_bits(em << 13) * 0x1p112f);
    uint32_t inf = (em << 13) | 0x7f800000u;
    return fccl_f32_of_bits(fccl_sel32(em >= 0x7c00u, inf, fin) | sign);
}

/* Three candidate results, selected without branches:
 *  - too big (>= 2^16 before rounding) or NaN: inf or a quiet NaN;
 *  - below the smallest half normal: adding 0.5 lines the half subnormal
 *    bits up with the float mantissa and the FPU rounds to nearest-even;
 *  - normal: rebias and round to nearest-even by adding 0xfff plus the
 *    lowest kept mantissa bit (a carry into the exponent is correct,
 *    including the round-up to infinity). */
static inline uint16_t fccl_float_to_half(float f)
{
    uint32_t u = fccl_f32_bits(f);
    uint32_t sign = (u >> 16) & 0x8000u;
    u &= 0x7fffffffu;
    uint32_t big = fccl_sel32(u > 0x7f800000u, 0x7e00u, 0x7c00u);
    uint32_t sub = fccl_f32_bits(fccl_f32_of_bits(u) + 0.5f) - 0x3f000000u;
    uint32_t odd = (u >> 13) & 1u;
    uint32_t nrm = (u - (112u << 23) + 0xfffu + odd) >> 13;
    uint32_t o = fccl_sel32(u >= 0x47800000u, big,
                            fccl_sel32(u < 0x38800000u, sub, nrm));
    return (uint16_t)(o | sign);
}

#endif
