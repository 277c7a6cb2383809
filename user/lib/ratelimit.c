/* Fixed-window log rate limit with a held-back count. See ratelimit.h. */
#include "lib/ratelimit.h"

void ratelimit_init(struct ratelimit *rl, int64_t interval_ms, unsigned burst)
{
	*rl = (struct ratelimit)RATELIMIT_INIT(interval_ms, burst ? burst : 1);
}

/* Opens a new window when the current one is over; returns the count held
 * back in the window that ended (0 when none ended). */
static uint64_t roll(struct ratelimit *rl, int64_t now_ms)
{
	uint64_t held;

	if (rl->open && now_ms - rl->window_ms < rl->interval_ms)
		return 0;
	held = rl->held;
	rl->open = true;
	rl->window_ms = now_ms;
	rl->lines = 0;
	rl->held = 0;
	return held;
}

bool ratelimit_pass_at(struct ratelimit *rl, int64_t now_ms, uint64_t *ret_held)
{
	uint64_t held = roll(rl, now_ms);
	unsigned burst = rl->burst ? rl->burst : 1;

	if (ret_held)
		*ret_held = held;
	if (rl->lines >= burst) {
		rl->held++;
		return false;
	}
	rl->lines++;
	return true;
}

void ratelimit_force_at(struct ratelimit *rl, int64_t now_ms, uint64_t *ret_held)
{
	uint64_t held = roll(rl, now_ms);

	if (ret_held)
		*ret_held = held;
	if (rl->lines < rl->burst) /* beyond it, one more changes nothing */
		rl->lines++;
}
