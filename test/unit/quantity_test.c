/* quantity: the Kubernetes grammar, whole CPU counts, canonical output. */
#include <errno.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>

#include <cmocka.h>

#include "lib/quantity.h"
#include "lib/errbuf.h"

static void test_quantity_parse_milli_grammar(void **st)
{
	static const struct {
		const char *in;
		int64_t milli;
		bool exact;
	} ok[] = {
		{ "0", 0, true },	       { "1", 1000, true },	   { "64", 64000, true },
		{ "+2", 2000, true },	       { "-1", -1000, true },	   { "0.5", 500, true },
		{ ".5", 500, true },	       { "1500m", 1500, true },	   { "1k", 1000000, true },
		{ "1Ki", 1024000, true },      { "1e3", 1000000, true },   { "1E3", 1000000, true },
		{ "2e-3", 2, true },	       { "1u", 0, false },	   { "1n", 0, false },
		{ "0.0001", 0, false },	       { "007", 7000, true },	   { "1.000", 1000, true },
		{ "3M", 3000000000, true },    { "0.001", 1, true },
	};
	for (size_t i = 0; i < sizeof(ok) / sizeof(ok[0]); i++) {
		int64_t m = -42;
		bool exact = !ok[i].exact;

		if (quantity_parse_milli(ok[i].in, &m, &exact) != 0)
			fail_msg("'%s' rejected", ok[i].in);
		if (m != ok[i].milli || exact != ok[i].exact)
			fail_msg("'%s': got %lld exact=%d", ok[i].in, (long long)m, exact);
	}
}

static void test_quantity_parse_milli_rejects_junk(void **st)
{
	const char *bad[] = { "", "abc", "1x", "1 ", " 1", "1KiB", "1kk", "--1", "1e", "1e+", "1Ee",
			      ".", "1..2", "0x10", "1,5", "e3", "Ki" };
	for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++) {
		int64_t m;
		bool e;

		if (quantity_parse_milli(bad[i], &m, &e) != -EINVAL)
			fail_msg("'%s' accepted", bad[i]);
	}
	int64_t m;
	bool e;
	assert_int_equal(quantity_parse_milli("99999999999999999999", &m, &e), -ERANGE);
	assert_int_equal(quantity_parse_milli("1Ei", &m, &e), -ERANGE);
	assert_int_equal(quantity_parse_milli("1e2000", &m, &e), -ERANGE);
}

static void test_quantity_parse_count_errors_name_the_value(void **st)
{
	static const struct {
		const char *in;
		int err;
		const char *why;
	} bad[] = {
		{ "0.5", -EINVAL, "\"0.5\" is not a whole number" },
		{ "1500m", -EINVAL, "\"1500m\" is not a whole number" },
		{ "0", -EINVAL, "\"0\" must be at least 1" },
		{ "-1", -EINVAL, "\"-1\" must be at least 1" },
		{ "abc", -EINVAL, "\"abc\" is not a quantity" },
		{ "65", -ERANGE, "\"65\" exceeds 64" },
		{ "1k", -ERANGE, "\"1k\" exceeds 64" },
	};
	for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++) {
		struct errbuf why = { "" };
		int64_t v = 7;

		assert_int_equal(quantity_parse_count(bad[i].in, 64, &v, &why), bad[i].err);
		assert_string_equal(why.s, bad[i].why);
		assert_int_equal(v, 7);
	}
	int64_t v;
	assert_int_equal(quantity_parse_count("10", 64, &v, NULL), 0);
	assert_int_equal(v, 10);
	assert_int_equal(quantity_parse_count("2000m", 64, &v, NULL), 0);
	assert_int_equal(v, 2);
	assert_int_equal(quantity_parse_count("1k", 8192, &v, NULL), 0);
	assert_int_equal(v, 1000);
}

static void test_quantity_format_int_is_canonical_decimal_si(void **st)
{
	static const struct {
		int64_t v;
		const char *s;
	} c[] = { { 0, "0" },	   { 1, "1" },	    { 64, "64" },     { 1000, "1k" },
		  { 1024, "1024" }, { 2000, "2k" }, { 1500, "1500" }, { 1000000, "1M" },
		  { 8000, "8k" },   { 100, "100" } };
	for (size_t i = 0; i < sizeof(c) / sizeof(c[0]); i++) {
		char buf[32];
		int64_t m;
		bool e;

		quantity_format_int(c[i].v, buf, sizeof(buf));
		assert_string_equal(buf, c[i].s);
		assert_int_equal(quantity_parse_milli(buf, &m, &e), 0);
		assert_int_equal(m, c[i].v * 1000);
	}
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_quantity_parse_milli_grammar),
		cmocka_unit_test(test_quantity_parse_milli_rejects_junk),
		cmocka_unit_test(test_quantity_parse_count_errors_name_the_value),
		cmocka_unit_test(test_quantity_format_int_is_canonical_decimal_si),
	};

	return cmocka_run_group_tests(tests, NULL, NULL);
}
