/*
 * Internal: bfloat16 <-> float32, the library's one conversion (the
 * reduction kernels, coll/reduce/, and the MoE row kernels, moe/, both
 * use it; common/ is the one floor both may see).
 *
 * bfloat16 is the upper half of a float32: widening is exact (a shift);
 * narrowing rounds to nearest-even, overflow goes to infinity and a NaN
 * stays a quiet NaN.  Static inline and free of branches but the NaN
 * select, so the callers' loops over rows vectorise.
 */
#ifndef FCCL_BF16_H
#define FCCL_BF16_H

#include <stdint.h>
#include <string.h>

/* Bit moves written out as fp16.h writes its own: each header stands alone. */
static inline float fccl_bf16_to_float(uint16_t h)
{
    uint32_t u = (uint32_t)h << 16;
    float f;
    memcpy(&f, &u, sizeof(f));
    return f;
}

static inline uint16_t fccl_float_to_bf16(float f)
{
    uint32_t u;
    memcpy(&u, &f, sizeof(u));
    uint32_t nan = (u >> 16) | 0x40u; /* keep it a (quiet) NaN */
    uint32_t rne = (u + 0x7fffu + ((u >> 16) & 1u)) >> 16;
    return (uint16_t)((u & 0x7fffffffu) > 0x7f800000u ? nan : rne);
}

#endif
