/* caps: the daemon's capability drop, tested in a child process (a drop is
 * for the life of the process). */
#include <errno.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <sys/prctl.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cmocka.h>

#include "lib/caps.h"

static void test_caps_drop_keeps_only_the_listed_ones(void **st)
{
	uint64_t eff;
	pid_t pid;
	int status;

	if (geteuid() != 0)
		skip();
	pid = fork();
	assert_true(pid >= 0);
	if (pid == 0) {
		int n = caps_drop_except(CAPS_KEEP_DAEMON);

		if (n <= 0 || caps_effective(&eff) < 0)
			_exit(10);
		if (eff != CAPS_KEEP_DAEMON)
			_exit(11);
		/* SYS_ADMIN (21) and BPF (39) gone from the bounding set too */
		if (prctl(PR_CAPBSET_READ, 21, 0, 0, 0) != 0 || prctl(PR_CAPBSET_READ, 39, 0, 0, 0) != 0)
			_exit(12);
		/* a second drop finds nothing left to drop */
		if (caps_drop_except(CAPS_KEEP_DAEMON) != 0)
			_exit(13);
		_exit(0);
	}
	assert_int_equal(waitpid(pid, &status, 0), pid);
	assert_true(WIFEXITED(status));
	assert_int_equal(WEXITSTATUS(status), 0);
	/* the parent is untouched */
	assert_int_equal(caps_effective(&eff), 0);
	assert_true(eff >> 21 & 1);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_caps_drop_keeps_only_the_listed_ones),
	};

	return cmocka_run_group_tests(tests, NULL, NULL);
}
