/*
 * Test-side model of one MoE layer, independent of moe/: inputs as pure
 * functions of (case seed, world rank, token, element), the routing, the
 * experts' functions, and the dense reference in double precision.
 * Header-only, used by tests/moe_check.c alone; the shared scalar pieces
 * are in tests/lib/ref.h.
 */
#ifndef FCCL_TEST_MOE_REF_H
#define FCCL_TEST_MOE_REF_H

#include <math.h>
#include <stdint.h>
#include <string.h>

#include "lib/ref.h"

static inline uint64_t mr_h(uint64_t seed, uint64_t a, uint64_t b, uint64_t c)
{
    return th_mix64(seed ^
                    th_mix64(a * 1000003u ^ th_mix64(b * 7919u ^ th_mix64(c))));
}

/* Value in [-2, 2) with 1/256 steps (exact in bfloat16 up to rounding of
 * the few that need more than 8 bits). */
static inline float mr_val(uint64_t seed, int what, int w, size_t t, size_t h)
{
    return (float)((int)(mr_h(seed, (uint64_t)what, ((uint64_t)w << 32) | t, h) %
                         1024) - 512) / 256.0f;
}

/* Store v as the case's type (half: 0 float32, 1 bfloat16, 2 float16)
 * at element i; read it back; v as that type holds it. */
static inline void mr_put(void *buf, size_t i, float v, int half)
{
    if (half == 1)
        ((uint16_t *)buf)[i] = th_f2bf(v);
    else if (half == 2)
        ((uint16_t *)buf)[i] = th_f2h(v);
    else
        ((float *)buf)[i] = v;
}
static inline float mr_get(const void *buf, size_t i, int half)
{
    const uint16_t *h = buf;
    return half == 1 ? th_bf2f(h[i])
           : half == 2 ? th_h2f(h[i])
                       : ((const float *)buf)[i];
}
static inline float mr_round(float v, int half)
{
    return half == 1 ? th_bf2f(th_f2bf(v)) : half == 2 ? th_h2f(th_f2h(v)) : v;
}

enum { MR_X = 1, MR_SCALE, MR_RES, MR_GAMMA, MR_SHX, MR_MASK, MR_ID };

/* The k distinct experts of token t of world rank w.  Skewed: slot 0 is
 * always expert 0, the rest come from the lower half, so the upper half
 * gets nothing. */
static inline void mr_route(uint64_t seed, int w, size_t t, int k, int E,
                            int skew, int32_t *ids)
{
    int pool = skew ? (E / 2 > k ? E / 2 : k) : E;
    for (int j = 0; j < k; j++) {
        for (uint64_t tries = 0;; tries++) {
            int e = skew && j == 0
                        ? 0
                        : (int)(mr_h(seed, MR_ID, ((uint64_t)w << 32) | t,
                                     (uint64_t)j * 131 + tries) %
                                (uint64_t)pool);
            int dup = 0;
            for (int i = 0; i < j; i++)
                dup |= ids[i] == e;
            if (!dup) {
                ids[j] = e;
                break;
            }
        }
    }
}

static inline float mr_scale(uint64_t seed, int w, size_t t, int j)
{
    return 0.05f + (float)(mr_h(seed, MR_SCALE, ((uint64_t)w << 32) | t,
                                (uint64_t)j) % 1000) / 1000.0f;
}

/* masked: 0 none, 1 the [bs] form (a token on or off), 2 the [bs][k]
 * form (each route on or off). */
static inline int mr_active(uint64_t seed, int w, size_t t, int masked)
{
    return masked != 1 || mr_h(seed, MR_MASK, (uint64_t)w, t) % 5 != 0;
}

/* Is route j of token t on? */
static inline int mr_route_on(uint64_t seed, int w, size_t t, int j,
                              int masked)
{
    if (masked != 2)
        return mr_active(seed, w, t, masked);
    return mr_h(seed, MR_MASK, ((uint64_t)w << 32) | t, (uint64_t)j + 1) % 3 !=
           0;
}

/* A token is sent (and goes to the shared experts) when a route is on. */
static inline int mr_token_on(uint64_t seed, int w, size_t t, int k,
                              int masked)
{
    for (int j = 0; j < k; j++)
        if (mr_route_on(seed, w, t, j, masked))
            return 1;
    return 0;
}

/* Expert functions, split in two parts so a TP pair can each compute one:
 * routed expert e: (e+1) v + e;  shared expert i: -v/2 + (i+1)/4. */
static inline double mr_mul(int shared, int e)
{
    return shared ? -0.5 : (double)(e + 1);
}
static inline double mr_add(int shared, int e)
{
    return shared ? (double)(e + 1) / 4.0 : (double)e;
}

#endif
