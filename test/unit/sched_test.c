/* sched: deadline limits from the kernel's files (fixtures under
 * test/data/sched/), /proc/<pid>/stat, and the syscalls on this process. */
#include <errno.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>
#include <unistd.h>

#include <cmocka.h>

#include "host/sched.h"
#include "lib/cpuset.h"
#include "lib/errbuf.h"
#include "testutil.h"

#define DATA "test/data/sched/"

/* A fresh fake root with the sysctls of a stock kernel (950 ms of every
 * second for real-time tasks). */
static const char *fake_root(const char *name)
{
	static char root[256];

	(void)snprintf(root, sizeof(root), "/tmp/sched-test.%d/%s", (int)getpid(), name);
	testutil_put(root, "proc/sys/kernel/sched_rt_runtime_us", "950000\n");
	testutil_put(root, "proc/sys/kernel/sched_rt_period_us", "1000000\n");
	testutil_put(root, "proc/sys/kernel/sched_deadline_period_min_us", "100\n");
	testutil_put(root, "proc/sys/kernel/sched_deadline_period_max_us", "4194304\n");
	return root;
}

/* server/cpuN/{runtime,period} under root's debugfs, in ns. */
static void server(const char *root, const char *name, int cpu, long long runtime,
		   long long period)
{
	char rel[256], v[64];

	(void)snprintf(rel, sizeof(rel), "sys/kernel/debug/sched/%s/cpu%d/runtime", name, cpu);
	(void)snprintf(v, sizeof(v), "%lld\n", runtime);
	testutil_put(root, rel, v);
	(void)snprintf(rel, sizeof(rel), "sys/kernel/debug/sched/%s/cpu%d/period", name, cpu);
	(void)snprintf(v, sizeof(v), "%lld\n", period);
	testutil_put(root, rel, v);
}

static void test_sched_limits_sum_every_server_of_the_worst_cpu(void **st)
{
	const char *root = fake_root("servers");
	struct sched_limits_opts o = { 0 };
	struct cpuset only;
	struct sched_limits l;

	server(root, "fair_server", 0, 50000000, 1000000000);
	server(root, "fair_server", 1, 50000000, 1000000000);
	server(root, "fair_server", 2, 120000000, 1000000000);
	server(root, "ext_server", 0, 50000000, 1000000000);
	server(root, "ext_server", 1, 80000000, 1000000000);
	/* every CPU: cpu1 holds 50m + 80m, more than cpu2's 120m */
	assert_int_equal(sched_limits_read(root, "6.19.0", &l, NULL), 0);
	assert_int_equal(l.servers_milli, 130);
	assert_int_equal(l.fair_milli, 50);
	assert_int_equal(l.ext_milli, 80);
	assert_int_equal(l.n_servers, 2);
	assert_int_equal(l.capacity_milli, 820);
	assert_string_equal(l.servers_note, "");
	/* only the real-time CPUs count, and the headroom comes off */
	assert_int_equal(cpuset_parse("0", &only, NULL), 0);
	o.cpus = &only;
	assert_int_equal(sched_limits_read_opts(root, "6.19.0", &o, &l, NULL), 0);
	assert_int_equal(l.capacity_milli, 850);
	o.headroom_milli = 30;
	assert_int_equal(sched_limits_read_opts(root, "6.19.0", &o, &l, NULL), 0);
	assert_int_equal(l.capacity_milli, 820);
	assert_int_equal(l.headroom_milli, 30);
	assert_int_equal(cpuset_parse("2", &only, NULL), 0);
	o.headroom_milli = 0;
	assert_int_equal(sched_limits_read_opts(root, "6.19.0", &o, &l, NULL), 0);
	assert_int_equal(l.capacity_milli, 830);
	assert_int_equal(l.ext_milli, 0);
	/* a headroom that leaves nothing is refused */
	o.headroom_milli = 830;
	assert_int_equal(sched_limits_read_opts(root, "6.19.0", &o, &l, NULL), -ENOSPC);
}

static void test_sched_limits_say_why_they_assume_the_defaults(void **st)
{
	const char *root = fake_root("nodebugfs");
	struct sched_limits l;

	/* not mounted, no sched_ext: the fair server's default */
	assert_int_equal(sched_limits_read(root, "6.18.0", &l, NULL), 0);
	assert_int_equal(l.capacity_milli, 900);
	assert_non_null(strstr(l.servers_note, "debugfs is not mounted"));
	/* a kernel with sched_ext: its server's default as well */
	testutil_put(root, "sys/kernel/sched_ext/state", "disabled\n");
	assert_int_equal(sched_limits_read(root, "6.18.0", &l, NULL), 0);
	assert_int_equal(l.fair_milli, 50);
	assert_int_equal(l.ext_milli, 50);
	assert_int_equal(l.capacity_milli, 850);
	/* mounted but a file refuses to be read (lockdown, a bad value) */
	root = fake_root("unreadable");
	server(root, "fair_server", 0, 50000000, 1000000000);
	testutil_put(root, "sys/kernel/debug/sched/fair_server/cpu0/runtime", "garbage\n");
	assert_int_equal(sched_limits_read(root, "6.18.0", &l, NULL), 0);
	assert_int_equal(l.capacity_milli, 900);
	assert_non_null(strstr(l.servers_note, "runtime: not an integer"));
	assert_string_equal(l.fair_source, "default");
	/* a runtime longer than its period makes no sense either */
	server(root, "fair_server", 0, 2000000000, 1000000000);
	assert_int_equal(sched_limits_read(root, "6.18.0", &l, NULL), 0);
	assert_non_null(strstr(l.servers_note, "of period"));
}

static void test_sched_limits_assume_the_default_fair_server_from_6_12(void **st)
{
	struct sched_limits l;
	struct errbuf eb = {};

	assert_int_equal(sched_limits_read(DATA "base", "6.18.4-test", &l, &eb), 0);
	assert_int_equal(l.capacity_milli, 900);
	assert_int_equal(l.fair_milli, 50);
	assert_string_equal(l.fair_source, "default");
	assert_int_equal(l.period_min_ns, 100000);
	assert_int_equal(l.period_max_ns, 4194304000ull);
	assert_int_equal(l.rt_runtime_us, 950000);
	assert_int_equal(sched_limits_read(DATA "base", "6.12.0", &l, &eb), 0);
	assert_int_equal(l.capacity_milli, 900);
}

static void test_sched_limits_without_a_fair_server_before_6_12(void **st)
{
	struct sched_limits l;

	assert_int_equal(sched_limits_read(DATA "base", "6.11.9", &l, NULL), 0);
	assert_int_equal(l.capacity_milli, 950);
	assert_int_equal(l.fair_milli, 0);
	assert_string_equal(l.fair_source, "none");
	assert_int_equal(sched_limits_read(DATA "base", "5.15.0-91-generic", &l, NULL), 0);
	assert_int_equal(l.capacity_milli, 950);
}

static void test_sched_limits_read_the_fair_server_from_debugfs(void **st)
{
	struct sched_limits l;

	/* cpu1 reserves 100m: the worst CPU sets everyone's capacity */
	assert_int_equal(sched_limits_read(DATA "debugfs", "6.18.0", &l, NULL), 0);
	assert_string_equal(l.fair_source, "debugfs");
	assert_int_equal(l.fair_milli, 100);
	assert_int_equal(l.capacity_milli, 850);
}

static void test_sched_limits_unlimited_rt_runtime(void **st)
{
	struct sched_limits l;

	assert_int_equal(sched_limits_read(DATA "unlimited", "6.18.0", &l, NULL), 0);
	assert_int_equal(l.rt_runtime_us, -1);
	assert_int_equal(l.capacity_milli, 950);
}

static void test_sched_limits_bad_or_missing_files_are_errors(void **st)
{
	struct sched_limits l = { .capacity_milli = 7 };
	struct errbuf eb = {};

	assert_int_equal(sched_limits_read(DATA "bad", "6.18.0", &l, &eb), -EINVAL);
	assert_non_null(strstr(eb.s, "sched_rt_runtime_us: not an integer"));
	assert_int_equal(sched_limits_read(DATA "nonexistent", "6.18.0", &l, &eb), -ENOENT);
	assert_non_null(strstr(eb.s, "sched_rt_runtime_us"));
	assert_int_equal(l.capacity_milli, 7); /* untouched */
}

static void test_sched_release_comparison(void **st)
{
	assert_true(sched_release_at_least("6.12.0", 6, 12));
	assert_true(sched_release_at_least("7.0", 6, 12));
	assert_true(sched_release_at_least("6.18.44-fc-v669", 6, 12));
	assert_false(sched_release_at_least("6.11.99", 6, 12));
	assert_false(sched_release_at_least("5.19", 6, 12));
	assert_false(sched_release_at_least("garbage", 6, 12));
	assert_false(sched_release_at_least(NULL, 6, 12));
}

static void test_sched_task_cpu_reads_field_39_past_odd_names(void **st)
{
	assert_int_equal(sched_task_cpu(DATA "base", 4242), 3);
	assert_int_equal(sched_task_cpu(DATA "base", 4343), -EPROTO);
	assert_int_equal(sched_task_cpu(DATA "base", 4444), -ESRCH);
	/* this process, for real */
	assert_true(sched_task_cpu("", getpid()) >= 0);
}

static void test_sched_task_start_names_a_task(void **st)
{
	uint64_t start = 0, again = 1;

	assert_int_equal(sched_task_start(DATA "base", 4242, &start), 0);
	assert_int_equal(start, 100);
	assert_int_equal(sched_task_start(DATA "base", 4343, &start), -EPROTO);
	assert_int_equal(sched_task_start(DATA "base", 4444, &start), -ESRCH);
	assert_int_equal(sched_task_start("", getpid(), &start), 0);
	assert_int_equal(sched_task_start("", getpid(), &again), 0);
	assert_true(start > 0 && start == again);
}

static void test_sched_get_and_set_on_this_process(void **st)
{
	struct sched_params p, want = { .policy = SCHED_POLICY_OTHER };

	assert_int_equal(sched_get(0, &p), 0);
	assert_int_equal(p.policy, SCHED_POLICY_OTHER);
	assert_true(sched_params_match(&p, &want));
	assert_int_equal(sched_set(0, &want), 0);
	/* the kernel's own checks come back as -errno */
	want = (struct sched_params){ .policy = SCHED_POLICY_DEADLINE, .runtime_ns = 10,
				      .deadline_ns = 100, .period_ns = 100 };
	assert_int_equal(sched_set(0, &want), -EINVAL);
	assert_false(sched_params_match(&p, &want));
	assert_int_equal(sched_get(-1, &p), -EINVAL);
	assert_string_equal(sched_policy_name(SCHED_POLICY_DEADLINE), "deadline");
	assert_string_equal(sched_policy_name(42), "unknown");
}

static void test_sched_affinity_on_this_process(void **st)
{
	struct cpuset one;
	int cpu = sched_task_cpu("", getpid());

	assert_true(cpu >= 0);
	cpuset_zero(&one);
	cpuset_set(&one, cpu);
	assert_int_equal(sched_set_affinity(0, &one), 0);
	cpuset_zero(&one);
	assert_int_equal(sched_get_affinity(0, &one), 0);
	assert_int_equal(cpuset_count(&one), 1);
	assert_true(cpuset_has(&one, cpu));
	assert_int_equal(sched_set_affinity(0, &one), 0);
	cpuset_zero(&one);
	assert_int_equal(sched_set_affinity(0, &one), -EINVAL);
	assert_int_equal(sched_get_affinity(-1, &one), -ESRCH);
}

struct seen {
	int n, self;
};

static int count_task(void *ud, pid_t pid, pid_t tid)
{
	struct seen *s = ud;

	s->n++;
	s->self += pid == getpid() && tid == getpid();
	return 0;
}

static int stop_at_first(void *ud, pid_t pid, pid_t tid)
{
	return 7;
}

static void test_sched_foreach_task_walks_threads_not_kernel_threads(void **st)
{
	struct seen s = { 0 };

	/* this machine: this process among them, kthreadd (pid 2) not */
	assert_int_equal(sched_foreach_task("", count_task, &s), 0);
	assert_int_equal(s.self, 1);
	assert_true(s.n > 1);
	assert_int_equal(sched_foreach_task("", stop_at_first, NULL), 7);
	assert_int_equal(sched_foreach_task("/nonexistent", count_task, &s), -ENOENT);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_sched_limits_assume_the_default_fair_server_from_6_12),
		cmocka_unit_test(test_sched_limits_without_a_fair_server_before_6_12),
		cmocka_unit_test(test_sched_limits_read_the_fair_server_from_debugfs),
		cmocka_unit_test(test_sched_limits_unlimited_rt_runtime),
		cmocka_unit_test(test_sched_limits_bad_or_missing_files_are_errors),
		cmocka_unit_test(test_sched_limits_sum_every_server_of_the_worst_cpu),
		cmocka_unit_test(test_sched_limits_say_why_they_assume_the_defaults),
		cmocka_unit_test(test_sched_release_comparison),
		cmocka_unit_test(test_sched_task_cpu_reads_field_39_past_odd_names),
		cmocka_unit_test(test_sched_task_start_names_a_task),
		cmocka_unit_test(test_sched_get_and_set_on_this_process),
		cmocka_unit_test(test_sched_affinity_on_this_process),
		cmocka_unit_test(test_sched_foreach_task_walks_threads_not_kernel_threads),
	};

	char dir[64];
	int r = cmocka_run_group_tests(tests, NULL, NULL);

	(void)snprintf(dir, sizeof(dir), "/tmp/sched-test.%d", (int)getpid());
	testutil_rmtree(dir);
	return r;
}
