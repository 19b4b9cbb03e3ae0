/*
 * What every libFuzzer target of fuzz/ shares: ASSERT, which aborts (the
 * fuzzer records the input) instead of returning an error a target would
 * have to carry back.
 */
#ifndef FCCL_FUZZ_H
#define FCCL_FUZZ_H

#include <stdlib.h>

#define ASSERT(c)                                                              \
    do {                                                                       \
        if (!(c))                                                              \
            abort();                                                           \
    } while (0)

#endif
