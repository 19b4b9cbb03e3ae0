/*
 * Internal: the reduction kernels every reducing collective uses.
 *
 * One kernel per (dtype, op), each a loop over contiguous elements written
 * so that -O2 vectorises it.  Semantics (DESIGN.md, "Semantics, decided"):
 * integer sum and prod wrap (computed in unsigned arithmetic); half types
 * (IEEE float16, bfloat16) are widened to float, combined, and rounded back
 * to nearest-even; bool has sum = or, prod = and, max = or, min = and and
 * always yields 0 or 1; max/min on floats assume NaN-free data.  Avg is a
 * sum during the reduction and a division by the group size at the end
 * (coll_reduce_avg_finish); integers truncate toward zero.
 *
 * All calls are pure functions of their arguments: thread-safe, never
 * block, never fail once the (dtype, op) pair passed coll_reduce_check.
 */
#ifndef FCCL_COLL_REDUCE_H
#define FCCL_COLL_REDUCE_H

#include <stddef.h>
#include <stdint.h>

#include "fccl/coll.h"

/* FCCL_OK if `op` on `dtype` is a valid reduction; FCCL_ERR_INVALID with a
 * message otherwise (unknown dtype or op, avg on bool). */
int coll_reduce_check(fccl_dtype_t dtype, fccl_redop_t op);

/* dst[i] = a[i] op b[i] for `count` elements (avg acts as sum).  dst may be
 * the same pointer as a or b (in-place); partial overlap is not allowed.
 * Both operand orders give the same bits (the ops are commutative). */
void coll_reduce(void *dst, const void *a, const void *b, size_t count,
                 fccl_dtype_t dtype, fccl_redop_t op);

/* Finish an avg: buf[i] = buf[i] / n.  Integers truncate toward zero,
 * halves divide in float and round back.  n must be >= 1. */
void coll_reduce_avg_finish(void *buf, size_t count, fccl_dtype_t dtype,
                            int n);

/* Scalar conversions used by the kernels (exposed for tests and fccl-bench):
 * round-to-nearest-even, overflow to infinity, NaN stays NaN. */
float coll_half_to_float(uint16_t h);
uint16_t coll_float_to_half(float f);
float coll_bf16_to_float(uint16_t h);
uint16_t coll_float_to_bf16(float f);

#endif
