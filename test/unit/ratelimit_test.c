/* ratelimit: burst per window, held-back counts, window opening, forced
 * lines, on a clock the test drives. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>

#include <cmocka.h>

#include "lib/ratelimit.h"

/* Asks for n lines at time t; returns how many went out, and in *held the
 * held-back count the first of them carried. */
static unsigned ask(struct ratelimit *rl, int64_t t, unsigned n, uint64_t *held)
{
	unsigned out = 0;

	*held = UINT64_MAX;
	for (unsigned i = 0; i < n; i++) {
		uint64_t h;

		if (ratelimit_pass_at(rl, t, &h)) {
			if (!out)
				*held = h;
			out++;
		} else {
			assert_int_equal(h, 0);
		}
	}
	return out;
}

static void test_ratelimit_lets_a_burst_through_then_holds_back(void **st)
{
	struct ratelimit rl = RATELIMIT_INIT(10000, 10);
	uint64_t held;

	assert_int_equal(ask(&rl, 5, 50, &held), 10);
	assert_int_equal(held, 0);
	assert_int_equal(rl.held, 40);
	/* still the same window one millisecond before its end */
	assert_int_equal(ask(&rl, 5 + 9999, 3, &held), 0);
	assert_int_equal(rl.held, 43);
}

static void test_ratelimit_next_window_carries_the_held_count_once(void **st)
{
	struct ratelimit rl = RATELIMIT_INIT(10000, 10);
	uint64_t held;

	assert_int_equal(ask(&rl, 0, 25, &held), 10);
	assert_int_equal(ask(&rl, 10000, 25, &held), 10);
	assert_int_equal(held, 15);
	/* the second window's own held-back lines go to the third */
	assert_int_equal(ask(&rl, 20000, 1, &held), 1);
	assert_int_equal(held, 15);
	assert_int_equal(ask(&rl, 20000, 1, &held), 1);
	assert_int_equal(held, 0);
}

static void test_ratelimit_window_opens_at_the_first_line_not_on_a_grid(void **st)
{
	struct ratelimit rl = RATELIMIT_INIT(1000, 1);
	uint64_t held;

	/* time 0 is a valid first instant (a fresh clock in a container) */
	assert_true(ratelimit_pass_at(&rl, 0, &held));
	assert_false(ratelimit_pass_at(&rl, 999, &held));
	/* a quiet spell: the next window opens at 5000, not at 5000 rounded */
	assert_true(ratelimit_pass_at(&rl, 5000, &held));
	assert_int_equal(held, 1);
	assert_false(ratelimit_pass_at(&rl, 5999, &held));
	assert_true(ratelimit_pass_at(&rl, 6000, NULL));
	assert_int_equal(rl.held, 0);
}

static void test_ratelimit_once_per_interval_with_burst_one(void **st)
{
	struct ratelimit rl;
	unsigned out = 0;

	ratelimit_init(&rl, 10000, 1);
	for (int64_t t = 0; t < 60000; t += 100)
		out += ratelimit_pass_at(&rl, t, NULL);
	assert_int_equal(out, 6);
}

static void test_ratelimit_burst_zero_is_raised_to_one(void **st)
{
	struct ratelimit rl;

	ratelimit_init(&rl, 1000, 0);
	assert_int_equal(rl.burst, 1);
	assert_true(ratelimit_pass_at(&rl, 0, NULL));
	assert_false(ratelimit_pass_at(&rl, 1, NULL));
}

static void test_ratelimit_forced_lines_use_budget_and_keep_the_count(void **st)
{
	struct ratelimit rl = RATELIMIT_INIT(1000, 2);
	uint64_t held;

	ratelimit_force_at(&rl, 0, &held);
	assert_int_equal(held, 0);
	assert_true(ratelimit_pass_at(&rl, 1, &held));
	assert_false(ratelimit_pass_at(&rl, 2, &held));
	/* a forced line inside the window goes out without taking the count */
	ratelimit_force_at(&rl, 3, &held);
	assert_int_equal(held, 0);
	assert_false(ratelimit_pass_at(&rl, 4, &held));
	assert_int_equal(rl.held, 2);
	/* the forced line that opens the next window takes it */
	ratelimit_force_at(&rl, 1000, &held);
	assert_int_equal(held, 2);
	assert_true(ratelimit_pass_at(&rl, 1001, &held));
	assert_int_equal(held, 0);
	assert_false(ratelimit_pass_at(&rl, 1002, &held));
}

static void test_ratelimit_clock_variant_uses_the_monotonic_clock(void **st)
{
	struct ratelimit rl = RATELIMIT_INIT(3600 * 1000, 1);
	uint64_t held;

	assert_true(ratelimit_pass(&rl, &held));
	assert_int_equal(held, 0);
	assert_false(ratelimit_pass(&rl, &held));
	assert_true(rl.window_ms <= clock_now_ms());
	assert_true(ratelimit_pass_at(&rl, rl.window_ms + 3600 * 1000, &held));
	assert_int_equal(held, 1);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_ratelimit_lets_a_burst_through_then_holds_back),
		cmocka_unit_test(test_ratelimit_next_window_carries_the_held_count_once),
		cmocka_unit_test(test_ratelimit_window_opens_at_the_first_line_not_on_a_grid),
		cmocka_unit_test(test_ratelimit_once_per_interval_with_burst_one),
		cmocka_unit_test(test_ratelimit_burst_zero_is_raised_to_one),
		cmocka_unit_test(test_ratelimit_forced_lines_use_budget_and_keep_the_count),
		cmocka_unit_test(test_ratelimit_clock_variant_uses_the_monotonic_clock),
	};

	return cmocka_run_group_tests(tests, NULL, NULL);
}
