/* Exponential backoff with jitter, for anything that retries a peer (the API
 * server, the NRI socket, the kubelet registration).
 *
 * The n-th delay (n = 0 after init or reset) is d = min(max, initial * 2^n)
 * with "equal jitter": uniform in [d/2, d]. Half the delay is guaranteed, so a
 * fleet of nodes restarting together spreads out without ever hammering the
 * server with near-zero delays (AWS architecture blog, "Exponential Backoff
 * And Jitter", 2015). A plain value: embed it, no allocation, no cleanup.
 */
#pragma once

#include <stdint.h>

struct backoff {
	uint32_t initial_ms;
	uint32_t max_ms;
	uint32_t attempt; /* delays handed out since init or the last reset */
	uint64_t rng;	  /* xorshift64* state, never 0; tests may set it */
};

/* initial_ms >= 1 and max_ms >= initial_ms, or they are raised to fit. */
void backoff_init(struct backoff *b, uint32_t initial_ms, uint32_t max_ms);

/* The next delay in milliseconds; advances the attempt count. */
uint32_t backoff_next(struct backoff *b);

/* Like backoff_next(), but never below floor_ms (a server's Retry-After).
 * The floor is honoured even above max_ms: the server knows best. */
uint32_t backoff_next_at_least(struct backoff *b, uint32_t floor_ms);

/* After a success: the next delay starts from initial_ms again. */
void backoff_reset(struct backoff *b);
