/* ratelimit: at most `burst` log lines per window of `interval_ms`, and a
 * count of the lines held back, for warnings a peer or the kernel can make
 * us repeat as fast as it likes.
 *
 * A fixed window opens at the first line asked for after the previous window
 * ran out (not on a timer), so a quiet source costs nothing. Lines past the
 * budget are counted, not written; the count is handed to the first line of
 * the next window, which says how many it stands for ("held_back=N"), so the
 * log never claims a quiet period that was not.
 *
 *	struct ratelimit rl = RATELIMIT_INIT(10000, 10);
 *	uint64_t held;
 *	if (ratelimit_pass(&rl, &held))
 *		log_warn("x_refused", "... held_back=%llu", (unsigned long long)held);
 *
 * Time is the caller's monotonic milliseconds (clock_now_ms(); tests pass
 * their own). A plain value: embed it, no allocation, no cleanup. Not
 * thread-safe: each belongs to one loop.
 */
#pragma once

#include <stdbool.h>
#include <stdint.h>

#include "lib/clock.h"

struct ratelimit {
	int64_t interval_ms; /* window length */
	unsigned burst;	     /* lines per window, >= 1 */
	bool open;	     /* a window has been opened */
	int64_t window_ms;   /* when the current window opened */
	unsigned lines;	     /* lines out in the current window */
	uint64_t held;	     /* lines held back since the last window opened */
};

#define RATELIMIT_INIT(interval, n) { .interval_ms = (interval), .burst = (n) }

/* burst 0 is raised to 1: a limiter that never lets a line out hides faults. */
void ratelimit_init(struct ratelimit *rl, int64_t interval_ms, unsigned burst);

/* True when a line may go out at now_ms (and counts it); false when it is
 * held back (and counts that). On true, *ret_held (ret_held may be NULL) is
 * the number held back before it, which only the first line of a window can
 * see; on false it is 0. */
bool ratelimit_pass_at(struct ratelimit *rl, int64_t now_ms, uint64_t *ret_held);

/* A line that goes out whatever the budget (it reports an action taken): it
 * uses budget like any other and, when it opens a window, takes over the
 * held-back count in *ret_held (0 otherwise; ret_held may be NULL). */
void ratelimit_force_at(struct ratelimit *rl, int64_t now_ms, uint64_t *ret_held);

/* ratelimit_pass_at() on the monotonic clock. */
static inline bool ratelimit_pass(struct ratelimit *rl, uint64_t *ret_held)
{
	return ratelimit_pass_at(rl, clock_now_ms(), ret_held);
}
