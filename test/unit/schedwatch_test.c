/* wrap: event_add event_del event_pending event_free */
/* schedwatch: the real-time capacity followed on a virtual clock over a fake
 * debugfs tree: an admin's write to a server, a sched_ext server coming and
 * going, reads that fail for a while, and what does not change. */
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
#include <event2/event.h>

#include "faketimer.h"
#include "host/schedwatch.h"
#include "lib/errbuf.h"
#include "testutil.h"

static char root[128];

struct seen {
	int calls;
	int64_t now, before;
};

static void on_change(void *ud, const struct sched_limits *now, const struct sched_limits *before)
{
	struct seen *s = ud;

	s->calls++;
	s->now = now->capacity_milli;
	s->before = before->capacity_milli;
}

static void server(const char *name, int cpu, long long runtime_ns)
{
	char rel[256], v[64];

	(void)snprintf(rel, sizeof(rel), "sys/kernel/debug/sched/%s/cpu%d/runtime", name, cpu);
	(void)snprintf(v, sizeof(v), "%lld\n", runtime_ns);
	testutil_put(root, rel, v);
	(void)snprintf(rel, sizeof(rel), "sys/kernel/debug/sched/%s/cpu%d/period", name, cpu);
	testutil_put(root, rel, "1000000000\n");
}

static int setup(void **st)
{
	static int n;

	faketimer_reset();
	(void)snprintf(root, sizeof(root), "/tmp/schedwatch-test.%d/%d", (int)getpid(), n++);
	testutil_put(root, "proc/sys/kernel/sched_rt_runtime_us", "950000\n");
	testutil_put(root, "proc/sys/kernel/sched_rt_period_us", "1000000\n");
	testutil_put(root, "proc/sys/kernel/sched_deadline_period_min_us", "100\n");
	testutil_put(root, "proc/sys/kernel/sched_deadline_period_max_us", "4194304\n");
	server("fair_server", 0, 50000000);
	server("fair_server", 1, 50000000);
	return 0;
}

static struct schedwatch *start(struct event_base *base, struct seen *s, int64_t headroom)
{
	struct schedwatch_opts o = { .root = root, .release = "6.19.0", .headroom_milli = headroom,
				     .on_change = on_change, .ud = s };
	struct schedwatch *w = NULL;
	struct errbuf eb = { "" };

	assert_int_equal(cpuset_parse("1", &o.cpus, NULL), 0);
	if (schedwatch_new(base, &o, &w, &eb) < 0)
		fail_msg("schedwatch_new: %s", eb.s);
	return w;
}

static void test_schedwatch_follows_a_server_written_at_run_time(void **st)
{
	struct event_base *base = event_base_new();
	struct seen s = { 0 };
	struct schedwatch *w = start(base, &s, 0);

	assert_int_equal(schedwatch_limits(w)->capacity_milli, 900);
	/* nothing changed: the timer reads, nobody is told */
	faketimer_advance(SCHEDWATCH_PERIOD_MS);
	assert_int_equal(s.calls, 0);
	/* a BPF scheduler brings the ext server on the real-time CPU */
	server("ext_server", 1, 50000000);
	faketimer_advance(SCHEDWATCH_PERIOD_MS);
	assert_int_equal(s.calls, 1);
	assert_int_equal(s.now, 850);
	assert_int_equal(s.before, 900);
	assert_int_equal(schedwatch_limits(w)->ext_milli, 50);
	/* a change on a CPU that is not real-time does not count */
	server("fair_server", 0, 300000000);
	faketimer_advance(SCHEDWATCH_PERIOD_MS);
	assert_int_equal(s.calls, 1);
	/* an admin gives the fair server of CPU 1 less; the scheduler goes away */
	server("fair_server", 1, 20000000);
	server("ext_server", 1, 0);
	assert_int_equal(schedwatch_poll(w), 1);
	assert_int_equal(s.calls, 2);
	assert_int_equal(s.now, 930);
	assert_int_equal(schedwatch_changes(w), 2);
	schedwatch_free(w);
	event_base_free(base);
}

static void test_schedwatch_keeps_the_last_limits_while_reads_fail(void **st)
{
	struct event_base *base = event_base_new();
	struct seen s = { 0 };
	struct schedwatch *w = start(base, &s, 25);

	assert_int_equal(schedwatch_limits(w)->capacity_milli, 875);
	testutil_put(root, "proc/sys/kernel/sched_rt_runtime_us", "oops\n");
	faketimer_advance(SCHEDWATCH_PERIOD_MS * 3);
	assert_int_equal(s.calls, 0);
	assert_int_equal(schedwatch_failures(w), 3);
	assert_int_equal(schedwatch_limits(w)->capacity_milli, 875);
	/* the admin lowers the real-time share: read again, told once */
	testutil_put(root, "proc/sys/kernel/sched_rt_runtime_us", "800000\n");
	faketimer_advance(SCHEDWATCH_PERIOD_MS);
	assert_int_equal(s.calls, 1);
	assert_int_equal(s.now, 725);
	/* nothing left: refused, the last limits stay */
	testutil_put(root, "proc/sys/kernel/sched_rt_runtime_us", "60000\n");
	assert_true(schedwatch_poll(w) < 0);
	assert_int_equal(schedwatch_limits(w)->capacity_milli, 725);
	assert_int_equal(s.calls, 1);
	schedwatch_free(w);
	event_base_free(base);
}

static void test_schedwatch_without_debugfs_assumes_the_defaults(void **st)
{
	struct event_base *base = event_base_new();
	struct seen s = { 0 };
	struct schedwatch *w;
	char dbg[256];

	(void)snprintf(dbg, sizeof(dbg), "%s/sys/kernel/debug", root);
	testutil_rmtree(dbg);
	testutil_put(root, "sys/kernel/sched_ext/state", "enabled\n");
	w = start(base, &s, 0);
	assert_int_equal(schedwatch_limits(w)->capacity_milli, 850);
	assert_non_null(strstr(schedwatch_limits(w)->servers_note, "not mounted"));
	/* debugfs mounted later: the values in effect replace the guess */
	server("fair_server", 1, 50000000);
	faketimer_advance(SCHEDWATCH_PERIOD_MS);
	assert_int_equal(s.calls, 1);
	assert_int_equal(s.now, 900);
	assert_string_equal(schedwatch_limits(w)->servers_note, "");
	schedwatch_free(w);
	event_base_free(base);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test_setup(test_schedwatch_follows_a_server_written_at_run_time, setup),
		cmocka_unit_test_setup(test_schedwatch_keeps_the_last_limits_while_reads_fail, setup),
		cmocka_unit_test_setup(test_schedwatch_without_debugfs_assumes_the_defaults, setup),
	};
	char dir[64];
	int r = cmocka_run_group_tests(tests, NULL, NULL);

	(void)snprintf(dir, sizeof(dir), "/tmp/schedwatch-test.%d", (int)getpid());
	testutil_rmtree(dir);
	return r;
}
