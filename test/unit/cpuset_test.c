/* cpuset: list format parse/print and set algebra. */
#include <errno.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>

#include "lib/cpuset.h"
#include "lib/errbuf.h"

static struct cpuset parse_ok(const char *s)
{
	struct cpuset c;
	struct errbuf why = { "" };

	if (cpuset_parse(s, &c, &why) != 0)
		fail_msg("'%s' did not parse: %s", s, why.s);
	return c;
}

static void assert_roundtrip(const char *in, const char *canonical)
{
	struct cpuset c = parse_ok(in);
	char *s = cpuset_to_string(&c);

	assert_non_null(s);
	assert_string_equal(s, canonical);
	free(s);
}

static void assert_rejects(const char *in, int err, const char *why_part)
{
	struct cpuset c;
	struct errbuf why = { "" };

	cpuset_zero(&c);
	cpuset_set(&c, 42);
	assert_int_equal(cpuset_parse(in, &c, &why), err);
	if (!strstr(why.s, why_part))
		fail_msg("'%s': error '%s' lacks '%s'", in, why.s, why_part);
	/* *ret untouched on error */
	assert_true(cpuset_has(&c, 42));
	assert_int_equal(cpuset_count(&c), 1);
}

static void test_cpuset_parse_accepts_single_ids_and_ranges(void **st)
{
	assert_roundtrip("0", "0");
	assert_roundtrip("0-3,8,10-11", "0-3,8,10-11");
	assert_roundtrip("5-5", "5");
	assert_roundtrip("0,1,2,3", "0-3");
	assert_roundtrip("3,1,2", "1-3");
	assert_roundtrip("0-3,2-5", "0-5");
	assert_roundtrip("007", "7");
	assert_roundtrip("63,64", "63-64");
	assert_roundtrip("0-8191", "0-8191");
}

static void test_cpuset_parse_accepts_empty_and_sysfs_framing(void **st)
{
	struct cpuset c;

	c = parse_ok("");
	assert_true(cpuset_is_empty(&c));
	c = parse_ok("\n");
	assert_true(cpuset_is_empty(&c));
	assert_roundtrip("0-3\n", "0-3");
	assert_int_equal(cpuset_parse_n("0-3\n\0\0", 6, &c, NULL), 0);
	assert_int_equal(cpuset_count(&c), 4);
	assert_int_equal(cpuset_parse_n("1-2\0", 4, &c, NULL), 0);
	assert_int_equal(cpuset_count(&c), 2);
	/* only the given length counts */
	assert_int_equal(cpuset_parse_n("1-2junk", 3, &c, NULL), 0);
	assert_int_equal(cpuset_count(&c), 2);
}

static void test_cpuset_parse_rejects_reversed_range(void **st)
{
	assert_rejects("7-3", -EINVAL, "reversed range 7-3 at offset 0");
	assert_rejects("0,9-8", -EINVAL, "reversed range 9-8 at offset 2");
}

static void test_cpuset_parse_rejects_junk(void **st)
{
	assert_rejects("abc", -EINVAL, "invalid character 'a' at offset 0");
	assert_rejects("1-3x", -EINVAL, "invalid character 'x' at offset 3");
	assert_rejects("1;2", -EINVAL, "invalid character ';'");
	assert_rejects("-1", -EINVAL, "invalid character '-'");
	assert_rejects("+1", -EINVAL, "invalid character '+'");
	assert_rejects("1-2-3", -EINVAL, "invalid character '-' at offset 3");
	assert_rejects("0x10", -EINVAL, "invalid character 'x'");
	assert_rejects("1\xff", -EINVAL, "invalid byte 0xff at offset 1");
	assert_rejects("1\n\n", -EINVAL, "whitespace at offset 1");
}

static void test_cpuset_parse_rejects_empty_items(void **st)
{
	assert_rejects(",", -EINVAL, "empty item at offset 0");
	assert_rejects(",1", -EINVAL, "empty item at offset 0");
	assert_rejects("1,", -EINVAL, "empty item at offset 2");
	assert_rejects("1,,2", -EINVAL, "empty item at offset 2");
	assert_rejects("1-", -EINVAL, "empty item at offset 2");
	assert_rejects("1-,2", -EINVAL, "empty item at offset 2");
}

static void test_cpuset_parse_rejects_whitespace_inside(void **st)
{
	assert_rejects(" 1", -EINVAL, "whitespace at offset 0");
	assert_rejects("1, 2", -EINVAL, "whitespace at offset 2");
	assert_rejects("1 ", -EINVAL, "whitespace at offset 1");
	assert_rejects("1 -2", -EINVAL, "whitespace at offset 1");
	assert_rejects("1\t", -EINVAL, "whitespace at offset 1");
	assert_rejects("1\r\n", -EINVAL, "whitespace at offset 1");
}

static void test_cpuset_parse_rejects_ids_above_cap_and_overflow(void **st)
{
	assert_rejects("8192", -ERANGE, "exceeds the limit 8191");
	assert_rejects("0-8192", -ERANGE, "offset 2 exceeds");
	assert_rejects("99999999999999999999999", -ERANGE, "exceeds the limit");
	assert_rejects("4294967296", -ERANGE, "exceeds the limit");
}

static void test_cpuset_format_reports_short_buffer(void **st)
{
	struct cpuset c = parse_ok("0-3,8,10-11");
	char buf[6];

	assert_int_equal(cpuset_format(&c, buf, sizeof(buf)), -ENOSPC);
	assert_string_equal(buf, "0-3,8");
	assert_int_equal(cpuset_format(&c, buf, 0), -ENOSPC);
	char big[32];
	assert_int_equal(cpuset_format(&c, big, sizeof(big)), 11);
}

static void test_cpuset_to_string_fits_the_worst_cases(void **st)
{
	struct cpuset c;
	char *s;

	/* every other CPU: one item per id */
	cpuset_zero(&c);
	for (int i = 0; i < CPUSET_MAX; i += 2)
		cpuset_set(&c, i);
	s = cpuset_to_string(&c);
	assert_non_null(s);
	assert_int_equal(strlen(s) > 4096 * 4, 1);
	struct cpuset back = parse_ok(s);
	assert_true(cpuset_equal(&c, &back));
	free(s);
	/* pairs "a-b": the longest text per id */
	cpuset_zero(&c);
	for (int i = 0; i + 1 < CPUSET_MAX; i += 3)
		cpuset_set_range(&c, i, i + 1);
	s = cpuset_to_string(&c);
	assert_non_null(s);
	back = parse_ok(s);
	assert_true(cpuset_equal(&c, &back));
	free(s);
}

static void test_cpuset_algebra(void **st)
{
	struct cpuset a = parse_ok("0-7"), b = parse_ok("4-11"), d;
	char buf[64];

	cpuset_and(&d, &a, &b);
	assert_int_equal(cpuset_format(&d, buf, sizeof(buf)), 3);
	assert_string_equal(buf, "4-7");
	cpuset_or(&d, &a, &b);
	cpuset_format(&d, buf, sizeof(buf));
	assert_string_equal(buf, "0-11");
	cpuset_andnot(&d, &a, &b);
	cpuset_format(&d, buf, sizeof(buf));
	assert_string_equal(buf, "0-3");
	/* aliasing */
	d = a;
	cpuset_andnot(&d, &d, &b);
	assert_int_equal(cpuset_count(&d), 4);

	assert_true(cpuset_intersects(&a, &b));
	assert_false(cpuset_intersects(&d, &b));
	assert_true(cpuset_is_subset(&d, &a));
	assert_false(cpuset_is_subset(&a, &d));
	assert_true(cpuset_is_subset(&d, &d));
	struct cpuset empty;
	cpuset_zero(&empty);
	assert_true(cpuset_is_subset(&empty, &a));
	assert_true(cpuset_is_empty(&empty));
	assert_false(cpuset_equal(&a, &b));
	struct cpuset a2 = parse_ok("0,1-7");
	assert_true(cpuset_equal(&a, &a2));
}

static void test_cpuset_set_clear_has_bounds(void **st)
{
	struct cpuset c;

	cpuset_zero(&c);
	cpuset_set(&c, 0);
	cpuset_set(&c, 63);
	cpuset_set(&c, 64);
	cpuset_set(&c, CPUSET_MAX - 1);
	assert_int_equal(cpuset_count(&c), 4);
	assert_true(cpuset_has(&c, CPUSET_MAX - 1));
	assert_false(cpuset_has(&c, CPUSET_MAX));
	assert_false(cpuset_has(&c, -1));
	cpuset_clear(&c, 63);
	cpuset_clear(&c, CPUSET_MAX + 5); /* ignored */
	cpuset_clear(&c, -3);
	assert_int_equal(cpuset_count(&c), 3);
	assert_false(cpuset_has(&c, 63));
}

static void test_cpuset_set_range_word_boundaries(void **st)
{
	struct cpuset c;
	char buf[64];

	int cases[][2] = { { 0, 0 }, { 0, 63 }, { 0, 64 }, { 63, 64 }, { 1, 190 }, { 64, 127 },
			   { 100, 8191 } };
	for (size_t i = 0; i < sizeof(cases) / sizeof(cases[0]); i++) {
		char want[32];

		cpuset_zero(&c);
		cpuset_set_range(&c, cases[i][0], cases[i][1]);
		assert_int_equal(cpuset_count(&c), cases[i][1] - cases[i][0] + 1);
		cpuset_format(&c, buf, sizeof(buf));
		if (cases[i][0] == cases[i][1])
			snprintf(want, sizeof(want), "%d", cases[i][0]);
		else
			snprintf(want, sizeof(want), "%d-%d", cases[i][0], cases[i][1]);
		assert_string_equal(buf, want);
	}
}

static void test_cpuset_iteration(void **st)
{
	struct cpuset c = parse_ok("3,64-65,200,8191");
	int seen[8], n = 0;

	CPUSET_FOREACH(cpu, &c)
	{
		assert_true(n < 8);
		seen[n++] = cpu;
	}
	assert_int_equal(n, 5);
	assert_int_equal(seen[0], 3);
	assert_int_equal(seen[1], 64);
	assert_int_equal(seen[2], 65);
	assert_int_equal(seen[3], 200);
	assert_int_equal(seen[4], 8191);
	assert_int_equal(cpuset_first(&c), 3);
	assert_int_equal(cpuset_last(&c), 8191);
	assert_int_equal(cpuset_next(&c, 8191), -1);
	assert_int_equal(cpuset_next(&c, 65), 200);
	assert_int_equal(cpuset_nth(&c, 0), 3);
	assert_int_equal(cpuset_nth(&c, 3), 200);
	assert_int_equal(cpuset_nth(&c, 5), -1);
	assert_int_equal(cpuset_nth(&c, -1), -1);

	struct cpuset e;
	cpuset_zero(&e);
	assert_int_equal(cpuset_first(&e), -1);
	assert_int_equal(cpuset_last(&e), -1);
	CPUSET_FOREACH(cpu, &e)
	fail_msg("empty set iterated %d", cpu);
}

/* A view holds only the words from the lowest member's to the highest's. */
static void test_cpuset_view_keeps_only_the_words_in_use(void **st)
{
	static const struct {
		const char *list;
		int off, n;
	} cases[] = {
		{ "", 0, 0 },	     { "0", 0, 1 },	 { "63", 0, 1 },   { "64", 1, 1 },
		{ "1000", 15, 1 },   { "1000,1023", 15, 1 }, { "960-1087", 15, 2 },
		{ "3,1000", 0, 16 }, { "8191", 127, 1 },	 { "0,8191", 0, 128 },
	};

	for (size_t i = 0; i < sizeof(cases) / sizeof(cases[0]); i++) {
		struct cpuset set = parse_ok(cases[i].list), back, acc;
		struct cpuset_view v = cpuset_view(&set);
		char buf[64];

		assert_int_equal(v.off, cases[i].off);
		assert_int_equal(v.n, cases[i].n);
		assert_true(cpuset_equal(cpuset_from_view(&v, &back), &set));
		cpuset_format(&back, buf, sizeof(buf));
		assert_string_equal(buf, cases[i].list);
		/* or_view adds exactly those members, wherever the window is */
		acc = parse_ok("5");
		cpuset_or_view(&acc, &v);
		cpuset_set(&set, 5);
		assert_true(cpuset_equal(&acc, &set));
	}
}

static void test_cpuset_view_has_only_its_members(void **st)
{
	struct cpuset set = parse_ok("1000,1023"), none = parse_ok("");
	struct cpuset_view v = cpuset_view(&set), e = cpuset_view(&none);

	assert_true(cpuset_view_has(&v, 1000));
	assert_true(cpuset_view_has(&v, 1023));
	/* in the window but not members, below it, above it, out of range */
	assert_false(cpuset_view_has(&v, 1001));
	assert_false(cpuset_view_has(&v, 959));
	assert_false(cpuset_view_has(&v, 999));
	assert_false(cpuset_view_has(&v, 1024));
	assert_false(cpuset_view_has(&v, 0));
	assert_false(cpuset_view_has(&v, -1));
	assert_false(cpuset_view_has(&v, CPUSET_MAX));
	assert_false(cpuset_view_has(&e, 0));
	assert_false(cpuset_view_has(&e, -1));
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_cpuset_parse_accepts_single_ids_and_ranges),
		cmocka_unit_test(test_cpuset_parse_accepts_empty_and_sysfs_framing),
		cmocka_unit_test(test_cpuset_parse_rejects_reversed_range),
		cmocka_unit_test(test_cpuset_parse_rejects_junk),
		cmocka_unit_test(test_cpuset_parse_rejects_empty_items),
		cmocka_unit_test(test_cpuset_parse_rejects_whitespace_inside),
		cmocka_unit_test(test_cpuset_parse_rejects_ids_above_cap_and_overflow),
		cmocka_unit_test(test_cpuset_format_reports_short_buffer),
		cmocka_unit_test(test_cpuset_to_string_fits_the_worst_cases),
		cmocka_unit_test(test_cpuset_algebra),
		cmocka_unit_test(test_cpuset_set_clear_has_bounds),
		cmocka_unit_test(test_cpuset_set_range_word_boundaries),
		cmocka_unit_test(test_cpuset_iteration),
		cmocka_unit_test(test_cpuset_view_keeps_only_the_words_in_use),
		cmocka_unit_test(test_cpuset_view_has_only_its_members),
	};

	return cmocka_run_group_tests(tests, NULL, NULL);
}
