/* The BPF build chain works end to end on the running kernel: the skeleton
 * built from bpf/baseline.bpf.c opens, loads, attaches to sched_switch and
 * counts real context switches. Skipped without CAP_BPF. */
#include <errno.h>
#include <sched.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>
#include <unistd.h>

#include <cmocka.h>

#include <bpf/libbpf.h>

#include "baseline.skel.h"
#include "testutil.h"

static int quiet(enum libbpf_print_level level, const char *fmt, va_list ap)
{
	return 0;
}

static void test_baseline_program_counts_switches(void **st)
{
	struct baseline_bpf *skel;
	int ncpu = libbpf_num_possible_cpus();
	__u64 *vals;
	__u64 total = 0;
	__u32 zero = 0;
	char why[192];

	if (!testutil_have_bpf_syscall(why, sizeof(why))) {
		print_message("skipped: %s\n", why);
		skip();
	}
	libbpf_set_print(quiet);
	skel = baseline_bpf__open_and_load();
	if (!skel) {
		if (errno == EPERM || geteuid() != 0)
			skip();
		fail_msg("load failed: errno %d", errno);
	}
	assert_int_equal(baseline_bpf__attach(skel), 0);
	for (int i = 0; i < 200; i++) {
		sched_yield();
		usleep(100);
	}
	assert_true(ncpu > 0);
	vals = calloc((size_t)ncpu, sizeof(*vals));
	assert_non_null(vals);
	assert_int_equal(bpf_map__lookup_elem(skel->maps.switches, &zero, sizeof(zero), vals,
					      sizeof(*vals) * (size_t)ncpu, 0),
			 0);
	for (int i = 0; i < ncpu; i++)
		total += vals[i];
	/* 200 sleeps are at least 200 switches away from this task. */
	assert_true(total >= 200);
	free(vals);
	baseline_bpf__destroy(skel);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_baseline_program_counts_switches),
	};

	return cmocka_run_group_tests(tests, NULL, NULL);
}
