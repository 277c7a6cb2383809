/* Which of a unit test program's tests run, from its environment (test code
 * only): test/run.sh runs some programs again on a kernel it boots in
 * tools/vm.sh, with the tests that mean something there.
 *
 *   DRA_CPU_TEST_FILTER  run only the tests whose names match this glob
 *   DRA_CPU_TEST_SKIP    leave out the tests whose names match this glob
 *
 * Both are cmocka's own filters; a test left out is not run, not counted and
 * not reported as skipped. */
#pragma once

#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdlib.h>

#include <cmocka.h>

static inline void testfilter_from_env(void)
{
	const char *only = getenv("DRA_CPU_TEST_FILTER");
	const char *skip = getenv("DRA_CPU_TEST_SKIP");

	if (only && *only)
		cmocka_set_test_filter(only);
	if (skip && *skip)
		cmocka_set_skip_filter(skip);
}
