/* log: log_quote() keeps every value on its own line, whatever a peer sent. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <string.h>

#include <cmocka.h>

#include "lib/cleanup.h"
#include "lib/log.h"

static void test_log_quote_leaves_plain_values_alone(void **state)
{
	const char *s = "ns/name-0.1";

	assert_ptr_equal(log_quote(s), s);
	assert_string_equal(log_quote(NULL), "\"\"");
	assert_string_equal(log_quote(""), "\"\"");
}

static void test_log_quote_escapes(void **state)
{
	static const struct {
		const char *in, *want;
	} cases[] = {
		{ "a b", "\"a b\"" },
		{ "k=v", "\"k=v\"" },
		{ "say \"hi\"", "\"say \\\"hi\\\"\"" },
		{ "back\\slash", "\"back\\\\slash\"" },
		{ "x\nts=forged level=error", "\"x\\nts=forged level=error\"" },
		{ "cr\rlf", "\"cr\\rlf\"" },
		{ "tab\t", "\"tab\\t\"" },
		{ "esc\x1b[2J", "\"esc\\x1b[2J\"" },
		{ "del\x7f", "\"del\\x7f\"" },
		{ "\x01", "\"\\x01\"" },
	};

	assert_true(ARRAY_SIZE(cases) > 0);
	for (size_t i = 0; i < ARRAY_SIZE(cases); i++) {
		const char *got = log_quote(cases[i].in);

		if (strcmp(got, cases[i].want) != 0)
			fail_msg("case %zu: got %s, want %s", i, got, cases[i].want);
	}
}

static void test_log_quote_cuts_long_values_inside_the_quotes(void **state)
{
	char in[1000];
	const char *got;
	size_t n;

	memset(in, '\n', sizeof(in) - 1);
	in[sizeof(in) - 1] = 0;
	got = log_quote(in);
	n = strlen(got);
	assert_true(n < 256);
	assert_int_equal(got[0], '"');
	assert_int_equal(got[n - 1], '"');
	assert_null(strchr(got, '\n'));
	assert_int_equal((n - 2) % 2, 0); /* whole escapes only */
}

static void test_log_quote_buffers_survive_three_more_calls(void **state)
{
	const char *a = log_quote("a b"), *b = log_quote("c d"), *c = log_quote("e f");
	const char *d = log_quote("g h");

	assert_string_equal(a, "\"a b\"");
	assert_string_equal(b, "\"c d\"");
	assert_string_equal(c, "\"e f\"");
	assert_string_equal(d, "\"g h\"");
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_log_quote_leaves_plain_values_alone),
		cmocka_unit_test(test_log_quote_escapes),
		cmocka_unit_test(test_log_quote_cuts_long_values_inside_the_quotes),
		cmocka_unit_test(test_log_quote_buffers_survive_three_more_calls),
	};

	return cmocka_run_group_tests(tests, NULL, NULL);
}
