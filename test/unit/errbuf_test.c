/* errbuf: setting, failing, wrapping, truncation and NULL. */
#include <errno.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>

#include <cmocka.h>

#include "lib/errbuf.h"

static void test_errbuf_fail_sets_text_and_returns_r(void **st)
{
	struct errbuf eb = { "" };

	assert_int_equal(errbuf_fail(&eb, -EINVAL, "bad %s at %d", "range", 3), -EINVAL);
	assert_string_equal(eb.s, "bad range at 3");
	errbuf_set(&eb, "again");
	assert_string_equal(eb.s, "again");
}

static void test_errbuf_accepts_null(void **st)
{
	errbuf_set(NULL, "ignored %d", 1);
	errbuf_clear(NULL);
	assert_int_equal(errbuf_fail(NULL, -E2BIG, "x"), -E2BIG);
	assert_int_equal(errbuf_wrap(NULL, -ENOENT, "y"), -ENOENT);
	assert_string_equal(errbuf_text(NULL, -ENOENT), strerror(ENOENT));
}

static void test_errbuf_wrap_prefixes_existing_text(void **st)
{
	struct errbuf eb = { "" };

	(void)errbuf_fail(&eb, -EINVAL, "reversed range 7-3");
	assert_int_equal(errbuf_wrap(&eb, -EINVAL, "--%s", "cpus"), -EINVAL);
	assert_string_equal(eb.s, "--cpus: reversed range 7-3");
	(void)errbuf_wrap(&eb, -EINVAL, "config");
	assert_string_equal(eb.s, "config: --cpus: reversed range 7-3");
}

static void test_errbuf_wrap_of_empty_text_uses_strerror(void **st)
{
	struct errbuf eb = { "" };

	(void)errbuf_wrap(&eb, -ENOENT, "/etc/x");
	assert_string_equal(eb.s, "/etc/x: No such file or directory");
}

static void test_errbuf_text_prefers_text_over_strerror(void **st)
{
	struct errbuf eb = { "" };

	assert_string_equal(errbuf_text(&eb, -EACCES), strerror(EACCES));
	errbuf_set(&eb, "why");
	assert_string_equal(errbuf_text(&eb, -EACCES), "why");
	errbuf_clear(&eb);
	assert_string_equal(eb.s, "");
}

static void test_errbuf_truncates_long_text(void **st)
{
	char big[2 * ERRBUF_MAX];
	struct errbuf eb;

	memset(big, 'a', sizeof(big) - 1);
	big[sizeof(big) - 1] = 0;
	memset(&eb, 'x', sizeof(eb));
	errbuf_set(&eb, "%s", big);
	assert_int_equal(strlen(eb.s), ERRBUF_MAX - 1);
	/* a long prefix crowds out the old text but stays terminated */
	(void)errbuf_wrap(&eb, -EINVAL, "%s", big);
	assert_int_equal(strlen(eb.s), ERRBUF_MAX - 1);
	/* a long old text keeps the prefix and is cut */
	errbuf_set(&eb, "%s", big);
	(void)errbuf_wrap(&eb, -EINVAL, "ctx");
	assert_int_equal(strlen(eb.s), ERRBUF_MAX - 1);
	assert_memory_equal(eb.s, "ctx: aaa", 8);
}

/* Text of ERRBUF_MAX - 1 - pad 'a's followed by ch, cut by errbuf_set(). */
static size_t cut_len(size_t pad, const char *ch)
{
	char big[ERRBUF_MAX + 8];
	struct errbuf eb;

	memset(big, 'a', ERRBUF_MAX - 1 - pad);
	(void)snprintf(big + ERRBUF_MAX - 1 - pad, sizeof(big) - (ERRBUF_MAX - 1 - pad), "%s%s",
		       ch, "zz");
	errbuf_set(&eb, "%s", big);
	return strlen(eb.s);
}

static void test_errbuf_cut_never_splits_a_utf8_character(void **st)
{
	static const struct {
		const char *ch;
		size_t pad, want; /* pad: bytes of ch that fit */
	} cases[] = {
		{ "\xc3\xa9", 1, ERRBUF_MAX - 2 },		/* e-acute, 1 of 2 fits */
		{ "\xc3\xa9", 2, ERRBUF_MAX - 1 },		/* whole */
		{ "\xe2\x82\xac", 1, ERRBUF_MAX - 2 },		/* euro, 1 of 3 */
		{ "\xe2\x82\xac", 2, ERRBUF_MAX - 3 },		/* 2 of 3 */
		{ "\xe2\x82\xac", 3, ERRBUF_MAX - 1 },		/* whole */
		{ "\xf0\x9f\x98\x80", 3, ERRBUF_MAX - 4 }, /* emoji, 3 of 4 */
		{ "\xf0\x9f\x98\x80", 4, ERRBUF_MAX - 1 }, /* whole */
		{ "b", 1, ERRBUF_MAX - 1 },		/* ASCII */
	};

	for (size_t i = 0; i < sizeof(cases) / sizeof(cases[0]); i++)
		assert_int_equal(cut_len(cases[i].pad, cases[i].ch), cases[i].want);
}

static void test_errbuf_wrap_cut_never_splits_a_utf8_character(void **st)
{
	char old[ERRBUF_MAX];
	struct errbuf eb;
	size_t n;

	/* "ctx: " then the old text, whose euro signs are cut at 511 bytes */
	for (n = 0; n + 3 < sizeof(old); n += 3)
		memcpy(old + n, "\xe2\x82\xac", 3);
	old[n] = 0;
	errbuf_set(&eb, "%s", old);
	(void)errbuf_wrap(&eb, -EINVAL, "ctx");
	n = strlen(eb.s);
	assert_true(n < ERRBUF_MAX - 1);
	assert_int_equal((n - 5) % 3, 0);
	assert_int_equal((unsigned char)eb.s[n - 1], 0xac);
	/* a prefix over the size is cut the same way (2 + 169 euros of its
	 * 2 + 170), and ": " still fits after it */
	(void)errbuf_wrap(&eb, -EINVAL, "xx%s", old);
	assert_int_equal(strlen(eb.s), 2 + 169 * 3 + 2);
	assert_memory_equal(eb.s + 2 + 168 * 3, "\xe2\x82\xac: ", 5);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_errbuf_fail_sets_text_and_returns_r),
		cmocka_unit_test(test_errbuf_accepts_null),
		cmocka_unit_test(test_errbuf_wrap_prefixes_existing_text),
		cmocka_unit_test(test_errbuf_wrap_of_empty_text_uses_strerror),
		cmocka_unit_test(test_errbuf_text_prefers_text_over_strerror),
		cmocka_unit_test(test_errbuf_truncates_long_text),
		cmocka_unit_test(test_errbuf_cut_never_splits_a_utf8_character),
		cmocka_unit_test(test_errbuf_wrap_cut_never_splits_a_utf8_character),
	};

	return cmocka_run_group_tests(tests, NULL, NULL);
}
