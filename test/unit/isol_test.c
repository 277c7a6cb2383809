/* isol: the kernel's isolated, tickless and managed-interrupt CPUs from
 * sysfs and /proc/cmdline, over fake trees and over the capture of
 * test/data/topologies derived with isolated CPUs; what the kernel prints
 * when there are none, on new and old kernels; and the running kernel,
 * which test/run.sh also boots with isolated CPUs. */
#include <errno.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <cmocka.h>

#include "host/isol.h"
#include "lib/errbuf.h"
#include "testfilter.h"
#include "testutil.h"

static char base[64];

static const char *tree(const char *name)
{
	static char root[128];

	(void)snprintf(root, sizeof(root), "%s/%s", base, name);
	testutil_put(root, "sys/devices/system/cpu", NULL);
	return root;
}

static void assert_list(const struct cpuset *s, const char *want)
{
	char got[256];

	(void)cpuset_format(s, got, sizeof(got));
	assert_string_equal(got, want);
}

static void test_isol_cmdline_flags(void **st)
{
	struct cpuset d, n, m;
	struct errbuf eb = { "" };

	/* no flag: domain, as the kernel defaults */
	assert_int_equal(isol_parse_cmdline("ro isolcpus=2-3 quiet", &d, &n, &m, &eb), 0);
	assert_list(&d, "2-3");
	assert_list(&n, "");
	assert_list(&m, "");
	/* flags and nohz_full=; a quoted value; what follows -- is init's */
	assert_int_equal(isol_parse_cmdline("isolcpus=nohz,managed_irq,domain,4-7,20 "
					    "nohz_full=\"8-9\" -- isolcpus=1",
					    &d, &n, &m, &eb),
			 0);
	assert_list(&d, "4-7,20");
	assert_list(&n, "4-9,20");
	assert_list(&m, "4-7,20");
	/* managed_irq alone leaves the domains alone; an unknown flag is skipped */
	assert_int_equal(isol_parse_cmdline("isolcpus=managed_irq,future_flag,3", &d, &n, &m, &eb),
			 0);
	assert_list(&d, "");
	assert_list(&m, "3");
	/* given twice: they add up */
	assert_int_equal(isol_parse_cmdline("isolcpus=1 isolcpus=domain,5", &d, &n, &m, &eb), 0);
	assert_list(&d, "1,5");
	/* a name that only starts like ours is not ours */
	assert_int_equal(isol_parse_cmdline("xisolcpus=3 nohz_fullx=2", &d, &n, &m, &eb), 0);
	assert_list(&d, "");
	assert_list(&n, "");
}

static void test_isol_cmdline_bad_lists_are_errors(void **st)
{
	struct cpuset d, n, m;
	struct errbuf eb = { "" };

	cpuset_zero(&d);
	cpuset_set(&d, 63);
	assert_int_equal(isol_parse_cmdline("isolcpus=domain,", &d, &n, &m, &eb), -EINVAL);
	assert_non_null(strstr(eb.s, "no CPU list"));
	assert_int_equal(isol_parse_cmdline("isolcpus=7-3", &d, &n, &m, &eb), -EINVAL);
	assert_non_null(strstr(eb.s, "isolcpus=7-3"));
	assert_int_equal(isol_parse_cmdline("nohz_full=x", &d, &n, &m, &eb), -EINVAL);
	assert_true(cpuset_has(&d, 63)); /* untouched */
}

static void test_isol_read_sysfs_over_the_command_line(void **st)
{
	const char *root = tree("new");
	struct isol s;
	struct errbuf eb = { "" };

	testutil_put(root, "sys/devices/system/cpu/isolated", "2-3\n");
	testutil_put(root, "sys/devices/system/cpu/nohz_full", "2-5\n");
	/* the command line asks for more than the kernel did: sysfs wins */
	testutil_put(root, "proc/cmdline", "isolcpus=managed_irq,domain,2-7 nohz_full=2-5\n");
	assert_int_equal(isol_read(root, &s, &eb), 0);
	assert_list(&s.domain, "2-3");
	assert_list(&s.nohz_full, "2-5");
	assert_list(&s.managed_irq, "2-7");
	assert_list(&s.isolated, "2-5");
	assert_string_equal(s.domain_source, "sysfs");
	assert_string_equal(s.note, "");
}

static void test_isol_read_what_kernels_print_for_none(void **st)
{
	static const char *const none[] = { "", "\n", "(null)\n", "(null)" };
	const char *root = tree("none");
	struct isol s;
	struct errbuf eb = { "" };
	char text[8] = { 0, '\n' };

	for (size_t i = 0; i < sizeof(none) / sizeof(none[0]); i++) {
		testutil_put(root, "sys/devices/system/cpu/isolated", none[i]);
		testutil_put(root, "sys/devices/system/cpu/nohz_full", none[i]);
		assert_int_equal(isol_read(root, &s, &eb), 0);
		assert_list(&s.isolated, "");
		assert_string_equal(s.domain_source, "sysfs");
	}
	/* a NUL before the newline (a RHEL 7 capture's nohz_full) */
	{
		char path[256];
		FILE *f;

		(void)snprintf(path, sizeof(path), "%s/sys/devices/system/cpu/nohz_full", root);
		f = fopen(path, "w");
		assert_non_null(f);
		assert_int_equal(fwrite(text, 1, 2, f), 2);
		fclose(f);
	}
	assert_int_equal(isol_read(root, &s, &eb), 0);
	assert_list(&s.nohz_full, "");
}

static void test_isol_read_old_kernels_and_bad_files(void **st)
{
	const char *root = tree("old");
	struct isol s = { .domain_source = "untouched" };
	struct errbuf eb = { "" };

	/* no isolated file (before 4.2), no nohz_full (no CONFIG_NO_HZ_FULL) */
	testutil_put(root, "proc/cmdline", "isolcpus=1,3 nohz_full=1\n");
	assert_int_equal(isol_read(root, &s, &eb), 0);
	assert_list(&s.domain, "1,3");
	assert_string_equal(s.domain_source, "cmdline");
	assert_list(&s.nohz_full, ""); /* the kernel cannot do it */
	assert_list(&s.isolated, "1,3");
	/* a command line the kernel refuses too: left out and said */
	testutil_put(root, "proc/cmdline", "isolcpus=3-1\n");
	assert_int_equal(isol_read(root, &s, &eb), 0);
	assert_list(&s.isolated, "");
	assert_non_null(strstr(s.note, "isolcpus=3-1"));
	/* nothing at all: a bare capture */
	assert_int_equal(isol_read(tree("bare"), &s, &eb), 0);
	assert_string_equal(s.domain_source, "none");
	/* a sysfs list that is not one is an error, never a guess */
	testutil_put(root, "sys/devices/system/cpu/isolated", "two\n");
	s.domain_source = "untouched";
	assert_int_equal(isol_read(root, &s, &eb), -EINVAL);
	assert_non_null(strstr(eb.s, "cpu/isolated"));
	assert_string_equal(s.domain_source, "untouched");
}

/* cgroup v2 isolated partitions (the root cgroup's cpuset.cpus.isolated)
 * are domain-isolated too, with the boot options or on their own, and
 * isol_same() tells every change the driver must publish. */
static void test_isol_read_partitions_and_same(void **st)
{
	const char *root = tree("partitions");
	struct isol a, b;
	struct errbuf eb = { "" };

	testutil_put(root, "sys/devices/system/cpu/isolated", "2-3\n");
	assert_int_equal(isol_read(root, &a, &eb), 0);
	assert_list(&a.partition, "");
	testutil_put(root, "sys/fs/cgroup/cpuset.cpus.isolated", "6-7\n");
	assert_int_equal(isol_read(root, &b, &eb), 0);
	assert_list(&b.partition, "6-7");
	assert_list(&b.domain, "2-3,6-7");
	assert_list(&b.isolated, "2-3,6-7");
	assert_false(isol_same(&a, &b));
	assert_true(isol_same(&b, &b));
	/* partitions only, on a kernel where the boot file says none; on an
	 * old kernel the command line's domain and the partitions add up */
	testutil_put(root, "sys/devices/system/cpu/isolated", "\n");
	assert_int_equal(isol_read(root, &a, &eb), 0);
	assert_list(&a.isolated, "6-7");
	{
		char path[256];

		(void)snprintf(path, sizeof(path), "%s/sys/devices/system/cpu/isolated", root);
		assert_int_equal(unlink(path), 0);
	}
	testutil_put(root, "proc/cmdline", "isolcpus=1\n");
	assert_int_equal(isol_read(root, &a, &eb), 0);
	assert_list(&a.domain, "1,6-7");
	assert_string_equal(a.domain_source, "cmdline");
	/* the same CPUs, tickless instead of not balanced: a change too */
	b = a;
	cpuset_zero(&b.domain);
	cpuset_or(&b.nohz_full, &a.domain, &a.nohz_full);
	assert_false(isol_same(&a, &b));
	/* a partition list that is not one: an error naming the file */
	testutil_put(root, "sys/fs/cgroup/cpuset.cpus.isolated", "6-x\n");
	assert_int_equal(isol_read(root, &a, &eb), -EINVAL);
	assert_non_null(strstr(eb.s, "cpuset.cpus.isolated"));
}

static void test_isol_read_the_capture_with_isolated_cpus(void **st)
{
	char cmd[512], root[256];
	struct isol s;
	struct errbuf eb = { "" };

	(void)snprintf(cmd, sizeof(cmd),
		       "tar -xjf test/data/topologies/32intel64-2p8co2t+8ve-isolated.tar.bz2 -C %s",
		       base);
	assert_int_equal(system(cmd), 0);
	(void)snprintf(root, sizeof(root), "%s/32intel64-2p8co2t+8ve-isolated", base);
	assert_int_equal(isol_read(root, &s, &eb), 0);
	assert_list(&s.domain, "4-7,20-23");
	assert_list(&s.nohz_full, "4-7,12-15,20-23,28-31");
	assert_list(&s.managed_irq, "4-7,20-23");
	assert_list(&s.isolated, "4-7,12-15,20-23,28-31");
	/* the capture it comes from has none (and a NUL in nohz_full) */
	(void)snprintf(cmd, sizeof(cmd),
		       "tar -xjf test/data/topologies/32intel64-2p8co2t+8ve.tar.bz2 -C %s", base);
	assert_int_equal(system(cmd), 0);
	(void)snprintf(root, sizeof(root), "%s/32intel64-2p8co2t+8ve", base);
	assert_int_equal(isol_read(root, &s, &eb), 0);
	assert_list(&s.isolated, "");
	assert_list(&s.managed_irq, "");
}

/* The running kernel, as the node reads it: whatever it isolated, the lists
 * isol_read() gives are the ones its own files print. When the test runs on
 * a kernel booted with isolated CPUs (test/run.sh boots Debian's kernel with
 * "isolcpus=managed_irq,domain,1 nohz_full=1" in tools/vm.sh and says so in
 * DRA_CPU_TEST_BOOT_ISOLATED), they are also the CPUs the boot asked for. */
static void test_isol_read_the_running_kernel(void **st)
{
	const char *want = getenv("DRA_CPU_TEST_BOOT_ISOLATED");
	struct cpuset files;
	struct errbuf eb = { "" };
	char text[256] = "";
	struct isol s;
	FILE *f;

	assert_int_equal(isol_read("", &s, &eb), 0);
	f = fopen("/sys/devices/system/cpu/isolated", "r");
	if (f) { /* "" or "\n" when none */
		if (!fgets(text, sizeof(text), f))
			text[0] = 0;
		fclose(f);
		text[strcspn(text, "\n")] = 0;
		assert_int_equal(cpuset_parse(text, &files, &eb), 0);
		/* the domain holds isolated cgroup v2 partitions too */
		cpuset_or(&files, &files, &s.partition);
		assert_true(cpuset_equal(&s.domain, &files));
	}
	if (want) {
		struct cpuset w;

		print_message("booted with CPUs %s isolated\n", want);
		assert_int_equal(cpuset_parse(want, &w, &eb), 0);
		assert_true(cpuset_equal(&s.domain, &w));
		assert_true(cpuset_equal(&s.nohz_full, &w));
		assert_true(cpuset_equal(&s.managed_irq, &w));
		assert_true(cpuset_equal(&s.isolated, &w));
		assert_string_equal(s.domain_source, "sysfs");
	}
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_isol_cmdline_flags),
		cmocka_unit_test(test_isol_cmdline_bad_lists_are_errors),
		cmocka_unit_test(test_isol_read_sysfs_over_the_command_line),
		cmocka_unit_test(test_isol_read_what_kernels_print_for_none),
		cmocka_unit_test(test_isol_read_old_kernels_and_bad_files),
		cmocka_unit_test(test_isol_read_the_capture_with_isolated_cpus),
		cmocka_unit_test(test_isol_read_partitions_and_same),
		cmocka_unit_test(test_isol_read_the_running_kernel),
	};
	int r;

	testfilter_from_env();
	(void)snprintf(base, sizeof(base), "/tmp/isol-test.%d", (int)getpid());
	testutil_put(base, "x", NULL);
	r = cmocka_run_group_tests(tests, NULL, NULL);
	testutil_rmtree(base);
	return r;
}
