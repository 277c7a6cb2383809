/* backoff: growth, cap, jitter bounds, Retry-After floor, reset. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>

#include <cmocka.h>

#include "lib/backoff.h"

static void test_backoff_doubles_within_jitter_bounds(void **st)
{
	struct backoff b;
	uint32_t want = 100;

	backoff_init(&b, 100, 100000);
	for (int i = 0; i < 8; i++, want *= 2) {
		uint32_t d = backoff_next(&b);

		assert_in_range(d, want / 2, want);
	}
	assert_int_equal(b.attempt, 8);
}

static void test_backoff_caps_at_max_and_never_overflows(void **st)
{
	struct backoff b;

	backoff_init(&b, 500, 30000);
	for (int i = 0; i < 1000; i++) {
		uint32_t d = backoff_next(&b);

		assert_in_range(d, 250, 30000);
		if (i > 10)
			assert_in_range(d, 15000, 30000);
	}
	b.attempt = UINT32_MAX;
	assert_in_range(backoff_next(&b), 15000, 30000);
	assert_int_equal(b.attempt, UINT32_MAX);
}

static void test_backoff_jitter_spreads_values(void **st)
{
	struct backoff b;
	uint32_t lo = UINT32_MAX, hi = 0;

	backoff_init(&b, 1000, 1000);
	b.rng = 42;
	for (int i = 0; i < 200; i++) {
		uint32_t d = backoff_next(&b);

		lo = d < lo ? d : lo;
		hi = d > hi ? d : hi;
	}
	/* 200 draws from [500, 1000]: both ends of the range get close. */
	assert_true(lo < 600);
	assert_true(hi > 900);
}

static void test_backoff_floor_wins_even_above_max(void **st)
{
	struct backoff b;

	backoff_init(&b, 100, 1000);
	assert_int_equal(backoff_next_at_least(&b, 5000), 5000);
	assert_in_range(backoff_next_at_least(&b, 0), 100, 200);
}

static void test_backoff_reset_restarts_from_initial(void **st)
{
	struct backoff b;

	backoff_init(&b, 100, 100000);
	for (int i = 0; i < 10; i++)
		(void)backoff_next(&b);
	backoff_reset(&b);
	assert_in_range(backoff_next(&b), 50, 100);
}

static void test_backoff_init_fixes_bad_bounds(void **st)
{
	struct backoff b;

	backoff_init(&b, 0, 0);
	assert_int_equal(b.initial_ms, 1);
	assert_int_equal(b.max_ms, 1);
	assert_in_range(backoff_next(&b), 0, 1);
	backoff_init(&b, 200, 100);
	assert_int_equal(b.max_ms, 200);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_backoff_doubles_within_jitter_bounds),
		cmocka_unit_test(test_backoff_caps_at_max_and_never_overflows),
		cmocka_unit_test(test_backoff_jitter_spreads_values),
		cmocka_unit_test(test_backoff_floor_wins_even_above_max),
		cmocka_unit_test(test_backoff_reset_restarts_from_initial),
		cmocka_unit_test(test_backoff_init_fixes_bad_bounds),
	};

	return cmocka_run_group_tests(tests, NULL, NULL);
}
