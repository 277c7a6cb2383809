/* Exponential backoff with equal jitter. See backoff.h for the contract. */
#include "lib/backoff.h"

#include <stdint.h>
#include <sys/random.h>
#include <time.h>

static uint64_t backoff_seed(const void *salt)
{
	uint64_t s = 0;
	struct timespec ts;

	/* Non-blocking: early boot must not stall the loop for entropy. */
	if (getrandom(&s, sizeof(s), GRND_NONBLOCK) != (ssize_t)sizeof(s) || s == 0) {
		(void)clock_gettime(CLOCK_MONOTONIC, &ts);
		s = (uint64_t)ts.tv_nsec * 0x9e3779b97f4a7c15ULL ^ (uint64_t)ts.tv_sec ^
		    (uint64_t)(uintptr_t)salt;
	}
	return s ? s : 0x2545f4914f6cdd1dULL;
}

/* xorshift64* (Vigna 2014): plenty for jitter, not for secrets. */
static uint64_t backoff_rand(struct backoff *b)
{
	uint64_t x = b->rng ? b->rng : 0x2545f4914f6cdd1dULL;

	x ^= x >> 12;
	x ^= x << 25;
	x ^= x >> 27;
	b->rng = x;
	return x * 0x2545f4914f6cdd1dULL;
}

void backoff_init(struct backoff *b, uint32_t initial_ms, uint32_t max_ms)
{
	b->initial_ms = initial_ms ? initial_ms : 1;
	b->max_ms = max_ms >= b->initial_ms ? max_ms : b->initial_ms;
	b->attempt = 0;
	b->rng = backoff_seed(b);
}

uint32_t backoff_next(struct backoff *b)
{
	uint64_t d = b->initial_ms;
	uint32_t half;

	/* Shift only while it can matter: 2^32 ms is already above any max. */
	for (uint32_t i = 0; i < b->attempt && d < b->max_ms; i++)
		d <<= 1;
	if (d > b->max_ms)
		d = b->max_ms;
	if (b->attempt < UINT32_MAX)
		b->attempt++;
	half = (uint32_t)(d / 2);
	return (uint32_t)d - (uint32_t)(backoff_rand(b) % ((uint64_t)(d - half) + 1));
}

uint32_t backoff_next_at_least(struct backoff *b, uint32_t floor_ms)
{
	uint32_t d = backoff_next(b);

	return d > floor_ms ? d : floor_ms;
}

void backoff_reset(struct backoff *b)
{
	b->attempt = 0;
}
