#include "clock.h"

#include <limits.h>
#include <math.h>
#include <stdlib.h>
#include <time.h>

uint64_t fccl_now_ns(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (uint64_t)ts.tv_sec * 1000000000ull + (uint64_t)ts.tv_nsec;
}

uint64_t fccl_deadline_ms(int64_t timeout_ms)
{
    if (timeout_ms < 0)
        return UINT64_MAX;
    return fccl_now_ns() + (uint64_t)timeout_ms * 1000000ull;
}

struct timespec fccl_realtime_after_ms(int64_t ms)
{
    struct timespec ts;
    clock_gettime(CLOCK_REALTIME, &ts);
    ts.tv_sec += ms / 1000;
    ts.tv_nsec += (ms % 1000) * 1000000L;
    if (ts.tv_nsec >= 1000000000L) {
        ts.tv_sec++;
        ts.tv_nsec -= 1000000000L;
    }
    return ts;
}

int fccl_ms_left(uint64_t deadline)
{
    if (deadline == UINT64_MAX)
        return INT_MAX;
    uint64_t now = fccl_now_ns();
    if (now >= deadline)
        return 0;
    uint64_t ms = (deadline - now + 999999) / 1000000;
    return ms > INT_MAX ? INT_MAX : (int)ms;
}

int64_t fccl_parse_seconds_ms(const char *s)
{
    if (!s || !*s)
        return -1;
    char *end;
    double v = strtod(s, &end);
    if (*end != '\0' || !isfinite(v) || v < 0 || v > 1e9)
        return -1;
    return (int64_t)(v * 1000.0 + 0.5);
}

int64_t fccl_env_timeout_ms(int64_t fallback_ms)
{
    int64_t ms = fccl_parse_seconds_ms(getenv("FCCL_TIMEOUT"));
    return ms > 0 ? ms : fallback_ms; /* 0 would fail every wait at once */
}
