/* num: decimal integers with full-input and range checks (lib/num.h). */
#include <errno.h>
#include <limits.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>

#include <cmocka.h>

#include "lib/num.h"

static void test_num_whole_input(void **st)
{
	static const struct {
		const char *in;
		int r;
		long long v;
	} cases[] = {
		{ "0", 0, 0 },
		{ "42", 0, 42 },
		{ "-7", 0, -7 },
		{ "007", 0, 7 },
		{ "-0", 0, 0 },
		{ "9223372036854775807", 0, LLONG_MAX },
		{ "-9223372036854775808", 0, LLONG_MIN },
		{ "9223372036854775808", -ERANGE, 0 },
		{ "-9223372036854775809", -ERANGE, 0 },
		{ "99999999999999999999999", -ERANGE, 0 },
		/* what strtol would take and we refuse */
		{ "", -EINVAL, 0 },
		{ " 1", -EINVAL, 0 },
		{ "+1", -EINVAL, 0 },
		{ "1 ", -EINVAL, 0 },
		{ "1\n", -EINVAL, 0 },
		{ "12abc", -EINVAL, 0 },
		{ "0x10", -EINVAL, 0 },
		{ "-", -EINVAL, 0 },
		{ "--1", -EINVAL, 0 },
		{ "1.5", -EINVAL, 0 },
	};
	for (size_t i = 0; i < sizeof(cases) / sizeof(cases[0]); i++) {
		long long v = -12345;
		int r = num_parse_ll(cases[i].in, NULL, LLONG_MIN, LLONG_MAX, &v);

		if (r != cases[i].r)
			fail_msg("\"%s\": %d, want %d", cases[i].in, r, cases[i].r);
		if (r == 0 && v != cases[i].v)
			fail_msg("\"%s\": %lld, want %lld", cases[i].in, v, cases[i].v);
		if (r < 0 && v != -12345)
			fail_msg("\"%s\": *ret written on an error", cases[i].in);
	}
	assert_int_equal(num_parse_ll(NULL, NULL, 0, 1, &(long long){ 0 }), -EINVAL);
}

static void test_num_range(void **st)
{
	int v = -1;

	assert_int_equal(num_parse_int("65535", NULL, 1, 65535, &v), 0);
	assert_int_equal(v, 65535);
	assert_int_equal(num_parse_int("65536", NULL, 1, 65535, &v), -ERANGE);
	assert_int_equal(num_parse_int("0", NULL, 1, 65535, &v), -ERANGE);
	assert_int_equal(num_parse_int("-1", NULL, 0, INT_MAX, &v), -ERANGE);
	assert_int_equal(num_parse_int("2147483648", NULL, INT_MIN, INT_MAX, &v), -ERANGE);
	assert_int_equal(num_parse_int("-2147483648", NULL, INT_MIN, INT_MAX, &v), 0);
	assert_int_equal(v, INT_MIN);
}

static void test_num_unsigned(void **st)
{
	unsigned long long v = 7;

	assert_int_equal(num_parse_ull("18446744073709551615", NULL, ULLONG_MAX, &v), 0);
	assert_true(v == ULLONG_MAX);
	assert_int_equal(num_parse_ull("18446744073709551616", NULL, ULLONG_MAX, &v), -ERANGE);
	assert_int_equal(num_parse_ull("-1", NULL, ULLONG_MAX, &v), -EINVAL);
	assert_int_equal(num_parse_ull("11", NULL, 10, &v), -ERANGE);
	assert_true(v == ULLONG_MAX);
}

static void test_num_prefix(void **st)
{
	const char *s = "6.1.0-13-amd64", *end = NULL;
	int v = 0;

	assert_int_equal(num_parse_int(s, &end, 0, INT_MAX, &v), 0);
	assert_int_equal(v, 6);
	assert_ptr_equal(end, s + 1);
	assert_int_equal(num_parse_int(end + 1, &end, 0, INT_MAX, &v), 0);
	assert_int_equal(v, 1);
	assert_string_equal(end, ".0-13-amd64");
	/* the prefix is still range-checked, and needs a digit */
	end = NULL;
	assert_int_equal(num_parse_int("70000 1", &end, 0, 65535, &v), -ERANGE);
	assert_int_equal(num_parse_int("x1", &end, 0, 65535, &v), -EINVAL);
	assert_null(end);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_num_whole_input),
		cmocka_unit_test(test_num_range),
		cmocka_unit_test(test_num_unsigned),
		cmocka_unit_test(test_num_prefix),
	};
	return cmocka_run_group_tests(tests, NULL, NULL);
}
