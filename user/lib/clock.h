/* clock: the monotonic millisecond clock deadlines are kept in, the
 * nanosecond one BPF timestamps are in, and the struct timeval libevent
 * timers take. Header-only. */
#pragma once

#include <stdint.h>
#include <sys/time.h>
#include <time.h>

/* CLOCK_MONOTONIC in ms (libevent's own clock may be the coarse one). */
static inline int64_t clock_now_ms(void)
{
	struct timespec ts;

	(void)clock_gettime(CLOCK_MONOTONIC, &ts);
	return (int64_t)ts.tv_sec * 1000 + ts.tv_nsec / 1000000;
}

/* CLOCK_MONOTONIC in ns: the clock of bpf_ktime_get_ns(), so that BPF
 * event timestamps compare with it. */
static inline uint64_t clock_now_ns(void)
{
	struct timespec ts;

	(void)clock_gettime(CLOCK_MONOTONIC, &ts);
	return (uint64_t)ts.tv_sec * 1000000000ull + (uint64_t)ts.tv_nsec;
}

static inline struct timeval clock_tv_ms(int64_t ms)
{
	return (struct timeval){ .tv_sec = (time_t)(ms / 1000),
				 .tv_usec = (suseconds_t)(ms % 1000) * 1000 };
}
