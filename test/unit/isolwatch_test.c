/* wrap: event_add event_del event_pending event_free */
/* isolwatch: the kernel's isolated CPUs followed on a virtual clock over a
 * fake sysfs tree: a cgroup v2 isolated partition made and undone, the boot
 * list changing, a list that turns bad for a while, and what does not
 * change. */
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
#include "host/isolwatch.h"
#include "lib/errbuf.h"
#include "testutil.h"

static char root[128];

struct seen {
	int calls;
	char now[64], before[64];
};

static void on_change(void *ud, const struct isol *now, const struct isol *before)
{
	struct seen *s = ud;

	s->calls++;
	(void)cpuset_format(&now->isolated, s->now, sizeof(s->now));
	(void)cpuset_format(&before->isolated, s->before, sizeof(s->before));
}

static int setup(void **st)
{
	static int n;

	faketimer_reset();
	(void)snprintf(root, sizeof(root), "/tmp/isolwatch-test.%d/%d", (int)getpid(), n++);
	testutil_put(root, "sys/devices/system/cpu/isolated", "\n");
	testutil_put(root, "sys/devices/system/cpu/nohz_full", "(null)\n");
	testutil_put(root, "sys/fs/cgroup/cpuset.cpus.isolated", "\n");
	return 0;
}

static struct isolwatch *start(struct event_base *base, struct seen *s)
{
	struct isolwatch_opts o = { .root = root, .on_change = on_change, .ud = s };
	struct isolwatch *w = NULL;
	struct errbuf eb = { "" };
	struct isol first;

	if (isol_read(root, &first, &eb) < 0)
		fail_msg("isol_read: %s", eb.s);
	assert_int_equal(isolwatch_new(base, &o, &first, &w), 0);
	return w;
}

static void test_isolwatch_follows_a_partition_made_and_undone(void **st)
{
	struct event_base *base = event_base_new();
	struct seen s = { 0 };
	struct isolwatch *w = start(base, &s);

	/* nothing changed: the timer reads, nobody is told */
	faketimer_advance(ISOLWATCH_PERIOD_MS * 2);
	assert_int_equal(s.calls, 0);
	/* an admin makes an isolated partition of 4-5 */
	testutil_put(root, "sys/fs/cgroup/cpuset.cpus.isolated", "4-5\n");
	faketimer_advance(ISOLWATCH_PERIOD_MS);
	assert_int_equal(s.calls, 1);
	assert_string_equal(s.now, "4-5");
	assert_string_equal(s.before, "");
	faketimer_advance(ISOLWATCH_PERIOD_MS);
	assert_int_equal(s.calls, 1); /* told once */
	/* the same CPUs become tickless too: a change of what is published */
	testutil_put(root, "sys/devices/system/cpu/nohz_full", "4-5\n");
	assert_int_equal(isolwatch_poll(w), 1);
	assert_int_equal(s.calls, 2);
	assert_string_equal(s.now, "4-5");
	/* both undone, read by the caller before the timer */
	testutil_put(root, "sys/fs/cgroup/cpuset.cpus.isolated", "\n");
	testutil_put(root, "sys/devices/system/cpu/nohz_full", "(null)\n");
	assert_int_equal(isolwatch_poll(w), 1);
	assert_string_equal(s.now, "");
	assert_string_equal(s.before, "4-5");
	assert_int_equal(isolwatch_changes(w), 3);
	isolwatch_free(w);
	event_base_free(base);
}

static void test_isolwatch_keeps_the_last_lists_while_reads_fail(void **st)
{
	struct event_base *base = event_base_new();
	struct seen s = { 0 };
	struct isolwatch *w = start(base, &s);

	testutil_put(root, "sys/devices/system/cpu/isolated", "2-x\n");
	faketimer_advance(ISOLWATCH_PERIOD_MS * 3);
	assert_int_equal(s.calls, 0);
	assert_int_equal(isolwatch_failures(w), 3);
	assert_true(isolwatch_poll(w) < 0);
	/* readable again, with a CPU isolated: told once */
	testutil_put(root, "sys/devices/system/cpu/isolated", "2\n");
	faketimer_advance(ISOLWATCH_PERIOD_MS);
	assert_int_equal(s.calls, 1);
	assert_string_equal(s.now, "2");
	isolwatch_free(w);
	event_base_free(base);
}

static void test_isolwatch_without_timer_reads_when_asked(void **st)
{
	struct event_base *base = event_base_new();
	struct seen s = { 0 };
	struct isolwatch_opts o = { .root = root, .period_ms = -1, .on_change = on_change, .ud = &s };
	struct isolwatch *w = NULL;
	struct isol none;

	memset(&none, 0, sizeof(none));
	assert_int_equal(isolwatch_new(base, &o, &none, &w), 0);
	testutil_put(root, "sys/fs/cgroup/cpuset.cpus.isolated", "7\n");
	faketimer_advance(ISOLWATCH_PERIOD_MS * 4);
	assert_int_equal(s.calls, 0);
	assert_int_equal(isolwatch_poll(w), 1);
	assert_string_equal(s.now, "7");
	assert_int_equal(isolwatch_poll(w), 0);
	isolwatch_free(w);
	assert_null(isolwatch_free(NULL));
	event_base_free(base);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test_setup(test_isolwatch_follows_a_partition_made_and_undone, setup),
		cmocka_unit_test_setup(test_isolwatch_keeps_the_last_lists_while_reads_fail, setup),
		cmocka_unit_test_setup(test_isolwatch_without_timer_reads_when_asked, setup),
	};
	char dir[64];
	int r = cmocka_run_group_tests(tests, NULL, NULL);

	(void)snprintf(dir, sizeof(dir), "/tmp/isolwatch-test.%d", (int)getpid());
	testutil_rmtree(dir);
	return r;
}
