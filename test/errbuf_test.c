/* errbuf: setting, failing, wrapping, truncation and NULL. */
#include <errno.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
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

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_errbuf_fail_sets_text_and_returns_r),
		cmocka_unit_test(test_errbuf_accepts_null),
		cmocka_unit_test(test_errbuf_wrap_prefixes_existing_text),
		cmocka_unit_test(test_errbuf_wrap_of_empty_text_uses_strerror),
		cmocka_unit_test(test_errbuf_text_prefers_text_over_strerror),
		cmocka_unit_test(test_errbuf_truncates_long_text),
	};

	return cmocka_run_group_tests(tests, NULL, NULL);
}
