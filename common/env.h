/* Sizes in fccl's environment variables. */
#ifndef FCCL_ENV_H
#define FCCL_ENV_H

#include <stdint.h>

/* Read variable `name` as a byte count: decimal digits with an optional
 * k/K (KiB) or m/M (MiB) suffix.  Returns 1 and sets *out when it is set
 * and well formed, 0 when it is unset or empty, -1 when it is malformed
 * (or overflows); *out is untouched unless 1. */
int fccl_env_bytes(const char *name, uint64_t *out);

#endif
