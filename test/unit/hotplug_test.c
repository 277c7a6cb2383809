/* hotplug: the online CPUs from the global list and, under a capture root,
 * the per-CPU files; bad files. */
#include <errno.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cmocka.h>

#include "host/hotplug.h"
#include "lib/errbuf.h"

static char root[] = "/tmp/hotplug-test.XXXXXX";

static void put(const char *rel, const char *text)
{
	char path[512], dir[512];
	FILE *f;

	(void)snprintf(path, sizeof(path), "%s/sys/devices/system/cpu/%s", root, rel);
	(void)snprintf(dir, sizeof(dir), "%s", path);
	for (char *p = dir + strlen(root) + 1; *p; p++)
		if (*p == '/') {
			*p = 0;
			(void)mkdir(dir, 0755);
			*p = '/';
		}
	f = fopen(path, "w");
	assert_non_null(f);
	fputs(text, f);
	fclose(f);
}

static struct cpuset cs(const char *s)
{
	struct cpuset c;

	assert_int_equal(cpuset_parse(s, &c, NULL), 0);
	return c;
}

static void assert_online(const struct cpuset *known, const char *want)
{
	struct cpuset got, w = cs(want);
	struct errbuf eb = { "" };
	char list[128];

	assert_int_equal(hotplug_online(root, known, &got, &eb), 0);
	(void)cpuset_format(&got, list, sizeof(list));
	if (!cpuset_equal(&got, &w))
		fail_msg("online %s, want %s", list, want);
}

static int setup(void **st)
{
	char path[512];

	if (!mkdtemp(root))
		return -1;
	(void)snprintf(path, sizeof(path), "rm -rf %s/sys", root);
	return system(path) == 0 ? 0 : -1;
}

static int teardown(void **st)
{
	char cmd[300];

	(void)snprintf(cmd, sizeof(cmd), "rm -rf %s", root);
	return system(cmd) == 0 ? 0 : -1;
}

static void test_hotplug_per_cpu_files_win_under_a_capture(void **st)
{
	struct cpuset known = cs("0-7");

	put("online", "0-7\n");
	for (int cpu = 1; cpu < 8; cpu++) {
		char rel[32];

		(void)snprintf(rel, sizeof(rel), "cpu%d/online", cpu);
		put(rel, "1\n");
	}
	assert_online(&known, "0-7");
	put("cpu5/online", "0\n");
	assert_online(&known, "0-4,6-7");
	/* the kernel's own global list says it too: same answer */
	put("online", "0-4,6-7\n");
	assert_online(&known, "0-4,6-7");
	/* back online, global list not yet updated: the CPU's file wins */
	put("cpu5/online", "1\n");
	assert_online(&known, "0-7");
	/* CPUs not asked about keep the global answer; cpu0 has no file */
	assert_online(&(struct cpuset){ 0 }, "0-4,6-7");
	/* a per-CPU file with something else in it says nothing */
	put("online", "0-7\n");
	put("cpu6/online", "maybe\n");
	put("cpu7/online", "\n");
	assert_online(&known, "0-7");
}

/* An old kernel's capture: no global list; offline CPUs have only their
 * online file, online ones a topology and (but CPU 0) a file, maybe empty. */
static void test_hotplug_old_capture_without_a_global_list(void **st)
{
	struct cpuset known = cs("0-5");
	char path[600];

	(void)snprintf(path, sizeof(path), "rm -rf %s/sys", root);
	assert_int_equal(system(path), 0);
	for (int cpu = 0; cpu < 6; cpu++) {
		char rel[32];

		if (cpu == 2 || cpu == 5) {
			(void)snprintf(rel, sizeof(rel), "cpu%d/online", cpu);
			put(rel, "0\n");
			continue;
		}
		(void)snprintf(rel, sizeof(rel), "cpu%d/topology/core_id", cpu);
		put(rel, "0\n");
	}
	put("cpu3/online", "");	 /* empty: says nothing */
	put("cpu4/online", "1\n");
	assert_online(&known, "0-1,3-4");
	put("cpu5/online", "");	 /* emptied offline CPU: still offline */
	assert_online(&known, "0-1,3-4");
	put("cpu4/online", "0\n");
	assert_online(&known, "0-1,3");
}

static void test_hotplug_live_machine_reads_the_global_list_only(void **st)
{
	struct cpuset got;

	/* NULL root = the live /sys: whatever it says, it says some CPU */
	assert_int_equal(hotplug_online(NULL, NULL, &got, NULL), 0);
	assert_true(cpuset_count(&got) >= 1);
}

static void test_hotplug_bad_global_list_is_an_error(void **st)
{
	static const char *const bad[] = { "0-3x\n", "3-1\n", "\n", "0-9999\n" };
	struct cpuset known = cs("0"), got = cs("1");
	struct errbuf eb = { "" };
	char path[512];

	for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++) {
		put("online", bad[i]);
		eb.s[0] = 0;
		assert_true(hotplug_online(root, NULL, &got, &eb) < 0);
		assert_non_null(strstr(eb.s, "cpu/online"));
		assert_int_equal(cpuset_count(&got), 1); /* untouched */
	}
	(void)snprintf(path, sizeof(path), "%s/sys/devices/system/cpu/online", root);
	assert_int_equal(unlink(path), 0);
	assert_int_equal(hotplug_online(root, NULL, &got, &eb), -ENOENT);
	/* an old capture's way, with nothing online in it: refused */
	(void)snprintf(path, sizeof(path), "rm -rf %s/sys/devices/system/cpu/cpu0", root);
	assert_int_equal(system(path), 0);
	assert_int_equal(hotplug_online(root, &known, &got, &eb), -EINVAL);
	/* every CPU offline by its own file: refused, not an empty machine */
	put("online", "0\n");
	put("cpu0/online", "0\n");
	assert_int_equal(hotplug_online(root, &known, &got, &eb), -EINVAL);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test_setup_teardown(test_hotplug_per_cpu_files_win_under_a_capture,
						NULL, NULL),
		cmocka_unit_test(test_hotplug_old_capture_without_a_global_list),
		cmocka_unit_test(test_hotplug_live_machine_reads_the_global_list_only),
		cmocka_unit_test(test_hotplug_bad_global_list_is_an_error),
	};

	return cmocka_run_group_tests(tests, setup, teardown);
}
