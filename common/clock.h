/* Monotonic time and deadlines.  Every blocking wait in fccl takes a
 * deadline computed here, never a wall-clock time. */
#ifndef FCCL_CLOCK_H
#define FCCL_CLOCK_H

#include <stdint.h>
#include <time.h>

#define FCCL_DEFAULT_TIMEOUT_MS 300000 /* PyTorch's and MindSpore's 300 s */

/* Nanoseconds on CLOCK_MONOTONIC. */
uint64_t fccl_now_ns(void);

/* Deadline `timeout_ms` from now; a negative timeout means "none"
 * (UINT64_MAX). */
uint64_t fccl_deadline_ms(int64_t timeout_ms);

/* Milliseconds left until `deadline` (0 if passed, INT_MAX-ish if none),
 * suitable for poll(). */
int fccl_ms_left(uint64_t deadline);

/* CLOCK_REALTIME `ms` (>= 0) from now: the time pthread_cond_timedwait
 * takes on a condition variable with the default clock. */
struct timespec fccl_realtime_after_ms(int64_t ms);

/* Timeout in ms from FCCL_TIMEOUT (seconds, may be fractional) if set and
 * valid, else `fallback_ms`. */
int64_t fccl_env_timeout_ms(int64_t fallback_ms);

/* Parse seconds ("2", "0.5") into ms; -1 if malformed or negative. */
int64_t fccl_parse_seconds_ms(const char *s);

#endif
