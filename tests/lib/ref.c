/* Scalar reference pieces (ref.h). */
#include "ref.h"

#include <math.h>
#include <string.h>

uint64_t th_mix64(uint64_t x)
{
    x += 0x9e3779b97f4a7c15ull;
    x = (x ^ (x >> 30)) * 0xbf58476d1ce4e5b9ull;
    x = (x ^ (x >> 27)) * 0x94d049bb133111ebull;
    return x ^ (x >> 31);
}

uint16_t th_f2h(float f)
{
    _Float16 x = (_Float16)f;
    uint16_t h;
    memcpy(&h, &x, 2);
    return h;
}

float th_h2f(uint16_t h)
{
    _Float16 x;
    memcpy(&x, &h, 2);
    return (float)x;
}

float th_bf2f(uint16_t h)
{
    uint32_t u = (uint32_t)h << 16;
    float f;
    memcpy(&f, &u, 4);
    return f;
}

/* Nearest bfloat16 by comparing the truncated value and the next one up. */
uint16_t th_f2bf(float f)
{
    if (isnan(f))
        return 0x7fc0;
    uint32_t u;
    memcpy(&u, &f, 4);
    uint16_t lo = (uint16_t)(u >> 16);
    if ((u & 0xffff) == 0)
        return lo;
    uint16_t hi = (uint16_t)(lo + 1); /* next magnitude up (sign kept) */
    /* past the largest finite value, infinity counts as 2^128 */
    double vh = isinf(th_bf2f(hi)) ? copysign(0x1p128, f) : th_bf2f(hi);
    double dl = fabs((double)f - (double)th_bf2f(lo));
    double dh = fabs(vh - (double)f);
    if (dl < dh)
        return lo;
    if (dh < dl)
        return hi;
    return (lo & 1) ? hi : lo;
}
