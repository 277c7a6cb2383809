/* rtreport: the owners file (round trip, bad input), quantiles of CPU time
 * per period, and the verdict of a window. */
#include <errno.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>
#include <json-c/json.h>

#include "lib/errbuf.h"
#include "pinning/rtmon.h"
#include "pinning/rtreport.h"

static void owners(struct rt_owners *o)
{
	struct rt_owner a = { .cpu = 3, .cgroup_id = 77, .runtime_ns = 2000000,
			      .period_ns = 10000000 };
	struct rt_owner b = { .cpu = 5, .cgroup_id = 88 };

	memset(o, 0, sizeof(*o));
	cpuset_set(&o->cpus, 3);
	cpuset_set(&o->cpus, 5);
	snprintf(a.cgroup, sizeof(a.cgroup), "/sys/fs/cgroup/kubepods/p/a");
	snprintf(a.claim, sizeof(a.claim), "rt/loop");
	snprintf(a.container, sizeof(a.container), "app");
	snprintf(b.cgroup, sizeof(b.cgroup), "/sys/fs/cgroup/kubepods/p/b");
	snprintf(b.claim, sizeof(b.claim), "rt/fifo");
	snprintf(b.container, sizeof(b.container), "ctl");
	assert_int_equal(rt_owners_add(o, &a), 0);
	assert_int_equal(rt_owners_add(o, &b), 0);
}

static void test_rtreport_owners_file_round_trips(void **st)
{
	struct rt_owners o, back = { 0 };
	struct errbuf eb = { "" };
	char *text = NULL;

	owners(&o);
	assert_int_equal(rt_owners_json(&o, &text), 0);
	assert_int_equal(rt_owners_parse(text, strlen(text), &back, &eb), 0);
	assert_int_equal(back.n, 2);
	assert_true(cpuset_equal(&back.cpus, &o.cpus));
	assert_string_equal(back.v[0].claim, "rt/loop");
	assert_int_equal(back.v[0].runtime_ns, 2000000);
	assert_ptr_equal(rt_owners_find(&back, 88, 5), &back.v[1]);
	assert_null(rt_owners_find(&back, 88, 3));
	assert_null(rt_owners_find(&back, 99, 5));
	free(text);
	rt_owners_done(&o);
	rt_owners_done(&back);
}

static void test_rtreport_owners_file_bad_input(void **st)
{
	static const char *bad[] = {
		"",
		"[]",
		"{\"owners\":[]}",
		"{\"cpus\":\"3-1\",\"owners\":[]}",
		"{\"cpus\":\"3\"}",
		"{\"cpus\":\"3\",\"owners\":{}}",
		"{\"cpus\":\"3\",\"owners\":[1]}",
		/* a CPU that is not a real-time one */
		"{\"cpus\":\"3\",\"owners\":[{\"cpu\":4,\"cgroupId\":1,\"cgroup\":\"/x\",\"claim\":"
		"\"a/b\",\"container\":\"c\",\"runtimeNs\":1,\"periodNs\":2}]}",
		/* cgroup id 0 */
		"{\"cpus\":\"3\",\"owners\":[{\"cpu\":3,\"cgroupId\":0,\"cgroup\":\"/x\",\"claim\":"
		"\"a/b\",\"container\":\"c\",\"runtimeNs\":1,\"periodNs\":2}]}",
		/* runtime over period */
		"{\"cpus\":\"3\",\"owners\":[{\"cpu\":3,\"cgroupId\":1,\"cgroup\":\"/x\",\"claim\":"
		"\"a/b\",\"container\":\"c\",\"runtimeNs\":3,\"periodNs\":2}]}",
		/* a missing field */
		"{\"cpus\":\"3\",\"owners\":[{\"cpu\":3,\"cgroupId\":1,\"cgroup\":\"/x\",\"claim\":"
		"\"a/b\",\"runtimeNs\":1,\"periodNs\":2}]}",
		/* a negative number */
		"{\"cpus\":\"3\",\"owners\":[{\"cpu\":-3,\"cgroupId\":1,\"cgroup\":\"/x\",\"claim\":"
		"\"a/b\",\"container\":\"c\",\"runtimeNs\":1,\"periodNs\":2}]}",
	};

	for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++) {
		struct rt_owners o = { .n = 42 };
		struct errbuf eb = { "" };

		if (rt_owners_parse(bad[i], strlen(bad[i]), &o, &eb) >= 0)
			fail_msg("case %zu accepted", i);
		assert_true(eb.s[0] != 0);
		assert_int_equal(o.n, 42); /* untouched */
	}
}

/* A task of budget 2 ms that used u[i] ns in n periods. */
static struct rt_task task(const uint64_t *u, int n)
{
	struct rt_task t = { .dl_runtime = 2000000, .dl_deadline = 10000000,
			     .dl_period = 10000000 };

	for (int i = 0; i < n; i++) {
		uint64_t slot = u[i] * RT_HIST_PER_BUDGET / t.dl_runtime;

		t.hist[slot < RT_HIST_SLOTS ? slot : RT_HIST_SLOTS - 1]++;
		t.periods++;
		t.used_ns += u[i];
		if (u[i] > t.max_ns)
			t.max_ns = u[i];
	}
	return t;
}

static void test_rtreport_quantiles_are_bucket_edges_bounded_by_the_max(void **st)
{
	uint64_t polite[100], busy[100];
	struct rt_task t;

	for (int i = 0; i < 100; i++) {
		polite[i] = 1010000;		    /* 1.01 ms: slot 4 (1.0-1.25 ms) */
		busy[i] = i < 90 ? 2700000 : 4900000; /* slot 10, then 19 */
	}
	t = task(polite, 100);
	assert_int_equal(rtmon_quantile_ns(&t, 0.5), 1010000); /* the edge 1.25 ms > max */
	t = task(busy, 100);
	assert_int_equal(rtmon_quantile_ns(&t, 0.5), 2750000);
	assert_int_equal(rtmon_quantile_ns(&t, 0.99), 4900000);
	assert_int_equal(rtmon_quantile_ns(&t, 0.9), 2750000);
	memset(&t, 0, sizeof(t));
	assert_int_equal(rtmon_quantile_ns(&t, 0.5), 0);
	/* the open last bucket: the max */
	busy[0] = 30000000;
	t = task(busy, 1);
	assert_int_equal(rtmon_quantile_ns(&t, 0.5), 30000000);
}

static void test_rtreport_verdict(void **st)
{
	struct rt_owners o;
	struct rtmon_task tasks[3] = { 0 };
	struct rtreport_cpu cpus[2] = { { .cpu = 3 }, { .cpu = 5 } };
	struct rtreport r;
	struct json_object *j = NULL, *v;
	uint64_t u = 1000000;

	owners(&o);
	tasks[0].pid = 10;
	tasks[0].s = task(&u, 1);
	tasks[0].s.cgroup_id = 77;
	tasks[0].s.cpu = 3;
	tasks[1] = tasks[0];
	tasks[1].pid = 11;
	tasks[1].s.throttles = 5; /* throttled: the kernel's job, fine */
	assert_int_equal(rtreport_build(&o, tasks, 2, cpus, 2, 1.0, &r), 0);
	assert_int_equal(rtreport_exit_code(&r), 0);
	rtreport_done(&r);
	/* over budget */
	tasks[1].s.overruns = 1;
	/* a deadline task no claim of its CPU owns */
	tasks[2] = tasks[0];
	tasks[2].pid = 12;
	tasks[2].s.cpu = 5;
	/* unconfined foreign tasks are reported, not violations; pinned ones are */
	cpus[0].c.foreign = 9;
	cpus[1].c.foreign = 2;
	cpus[1].c.foreign_pinned = 1;
	assert_int_equal(rtreport_build(&o, tasks, 3, cpus, 2, 1.0, &r), 0);
	assert_int_equal(r.violations, 3);
	assert_int_equal(rtreport_exit_code(&r), 1);
	assert_false(r.tasks[0].violation);
	assert_true(r.tasks[1].violation);
	assert_true(r.tasks[2].violation && !r.tasks[2].owner);
	assert_int_equal(rtreport_to_json(&r, &j), 0);
	assert_true(json_object_object_get_ex(j, "verdict", &v));
	assert_string_equal(json_object_get_string(v), "violation");
	assert_true(json_object_object_get_ex(j, "tasks", &v));
	assert_int_equal(json_object_array_length(v), 3);
	json_object_put(j);
	rtreport_done(&r);
	rt_owners_done(&o);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_rtreport_owners_file_round_trips),
		cmocka_unit_test(test_rtreport_owners_file_bad_input),
		cmocka_unit_test(test_rtreport_quantiles_are_bucket_edges_bounded_by_the_max),
		cmocka_unit_test(test_rtreport_verdict),
	};

	return cmocka_run_group_tests(tests, NULL, NULL);
}
