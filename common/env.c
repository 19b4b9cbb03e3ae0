#include "env.h"

#include <ctype.h>
#include <stdlib.h>

int fccl_env_bytes(const char *name, uint64_t *out)
{
    const char *s = getenv(name);
    if (!s || !*s)
        return 0;
    if (!isdigit((unsigned char)*s))
        return -1;
    char *end;
    unsigned long long v = strtoull(s, &end, 10);
    unsigned shift = 0;
    if (*end == 'k' || *end == 'K')
        shift = 10, end++;
    else if (*end == 'm' || *end == 'M')
        shift = 20, end++;
    if (*end || v > (UINT64_MAX >> shift))
        return -1;
    *out = (uint64_t)v << shift;
    return 1;
}
