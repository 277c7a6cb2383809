/* log: log_quote() keeps every value on its own line, whatever a peer sent,
 * and a line never carries a raw control byte even where it was forgotten. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>
#include <unistd.h>

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

/* A line's quotes are all intact however many it has (the earlier ring of
 * four buffers silently overwrote the first with the fifth); past the space
 * the value says so; a written or filtered line starts the space over. */
static void test_log_quotes_of_one_line_never_overwrite_each_other(void **state)
{
	static char want[64][LOG_QUOTE_MAX + 4];
	const char *q[64];
	char in[241];
	int n = 0;

	log_set_level(LOG_INFO);
	log_debug("filtered", "x=%s", log_quote("a b")); /* filtered: the space starts over */
	assert_int_equal(log_quote_exhausted(), 0);
	/* Values of 240 bytes, each quoted whole: make them until the space ends. */
	for (; n < 64; n++) {
		memset(in, 'a' + n % 26, 240);
		snprintf(in + 236, 5, " %03d", n);
		snprintf(want[n], sizeof(want[n]), "\"%s\"", in);
		q[n] = log_quote(in);
		if (log_quote_exhausted())
			break;
	}
	assert_true(n >= LOG_QUOTE_SPACE / LOG_QUOTE_MAX); /* the promise: 32 at least */
	assert_string_equal(q[n], "\"(log_quote: no space left in this line)\"");
	for (int i = 0; i < n; i++) /* every earlier one intact */
		assert_string_equal(q[i], want[i]);

	log_debug("filtered", "x=%s", log_quote("a b")); /* still full: refused, counted */
	assert_int_equal(log_quote_exhausted(), 2);
	assert_string_equal(log_quote("c d"), "\"c d\""); /* the line is done: room again */
	assert_int_equal(log_quote_exhausted(), 2);
}

/* What log_emit() writes to stderr for one call, captured through a file. */
static void emit_captured(char *out, size_t size, const char *arg)
{
	FILE *f = tmpfile();
	int saved = dup(STDERR_FILENO);
	size_t n;

	assert_non_null(f);
	assert_true(saved >= 0);
	assert_true(dup2(fileno(f), STDERR_FILENO) >= 0);
	log_emit(LOG_ERROR, "test", "peer_said", "name=%s", arg);
	assert_true(dup2(saved, STDERR_FILENO) >= 0);
	close(saved);
	rewind(f);
	n = fread(out, 1, size - 1, f);
	out[n] = 0;
	fclose(f);
}

/* A peer's string passed with a bare %s (log_quote() forgotten) can make a
 * line ugly, never forge a second one or reach a terminal raw. */
static void test_log_line_never_carries_raw_control_bytes(void **state)
{
	char out[4096];

	(void)state;
	emit_captured(out, sizeof(out),
		      "web\nts=0 level=error event=forged\r\x1b[2J\x7f");
	assert_non_null(strstr(out, " name=web\\nts=0 level=error event=forged\\r\\x1b[2J\\x7f\n"));
	assert_ptr_equal(strchr(out, '\n'), out + strlen(out) - 1);
	for (const char *p = out; *p; p++)
		assert_true(*p == '\n' || ((unsigned char)*p >= 0x20 && *p != 0x7f));
	/* a line full of control bytes is cut, still one line */
	char many[3000];

	memset(many, '\x01', sizeof(many) - 1);
	many[sizeof(many) - 1] = 0;
	emit_captured(out, sizeof(out), many);
	assert_ptr_equal(strchr(out, '\n'), out + strlen(out) - 1);
	assert_true(strlen(out) <= 2048);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_log_quote_leaves_plain_values_alone),
		cmocka_unit_test(test_log_quote_escapes),
		cmocka_unit_test(test_log_quote_cuts_long_values_inside_the_quotes),
		cmocka_unit_test(test_log_quotes_of_one_line_never_overwrite_each_other),
		cmocka_unit_test(test_log_line_never_carries_raw_control_bytes),
	};

	return cmocka_run_group_tests(tests, NULL, NULL);
}
