/*
 * ref.h: the scalar pieces the tests' references are built from (part of
 * libtesthelp.a; no Criterion): a bit mixer for inputs that are pure
 * functions of their coordinates, and float16 / bfloat16 conversions.
 *
 * Written independently of coll/reduce/kernels.c, which they check:
 * float16 goes through the compiler's _Float16, and the bfloat16 rounding
 * is found by comparing the two neighbouring candidates in double, not by
 * the kernels' bit trick.
 */
#ifndef FCCL_TESTS_LIB_REF_H
#define FCCL_TESTS_LIB_REF_H

#include <stdint.h>

/* splitmix64's finaliser: every input bit moves every output bit. */
uint64_t th_mix64(uint64_t x);

/* float16 <-> float, rounding to nearest even. */
uint16_t th_f2h(float f);
float th_h2f(uint16_t h);

/* bfloat16 <-> float, rounding to nearest even; NaN stays a (quiet) NaN,
 * values past the largest finite one round to infinity. */
uint16_t th_f2bf(float f);
float th_bf2f(uint16_t h);

#endif
