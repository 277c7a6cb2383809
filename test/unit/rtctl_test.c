/* rtctl: which runtimes apply the scheduler themselves, and which
 * containers may hold a real-time claim. The kernel side (sched_setattr,
 * root domains, teardown) runs for real in test_rt_kernel.py. */
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
#include <event2/event.h>

#include "core/rt.h"
#include "core/state.h"
#include "host/rtdomain.h"
#include "lib/errbuf.h"
#include "lib/log.h"
#include "pinning/rtctl.h"
#include "obs/metrics.h"
#include "testutil.h"

static void test_rtctl_runtimes_with_nri_0_11_apply_the_scheduler(void **st)
{
	assert_true(rtctl_runtime_applies_scheduler("containerd", "2.2.1", ""));
	assert_true(rtctl_runtime_applies_scheduler("containerd", "v2.3.0", NULL));
	assert_true(rtctl_runtime_applies_scheduler("containerd", "3.0.0-rc.1", ""));
	assert_false(rtctl_runtime_applies_scheduler("containerd", "2.2.0", ""));
	assert_false(rtctl_runtime_applies_scheduler("containerd", "1.7.28", ""));
	assert_true(rtctl_runtime_applies_scheduler("cri-o", "1.35.0", ""));
	assert_false(rtctl_runtime_applies_scheduler("cri-o", "1.34.9", ""));
	assert_false(rtctl_runtime_applies_scheduler("nrisim", "9.9", ""));
	assert_false(rtctl_runtime_applies_scheduler(NULL, NULL, NULL));
	assert_false(rtctl_runtime_applies_scheduler("containerd", "garbage", ""));
	/* the NRI version, when the runtime says it, decides */
	assert_true(rtctl_runtime_applies_scheduler("anything", "1", "v0.11.0"));
	assert_false(rtctl_runtime_applies_scheduler("containerd", "2.2.1", "v0.10.0"));
}

static char root[64];

static int setup(void **st)
{
	char dir[128];

	snprintf(root, sizeof(root), "/dev/shm/rtctl-test.XXXXXX");
	if (!mkdtemp(root))
		return -1;
	snprintf(dir, sizeof(dir), "%s/cpuset", root);
	mkdir(dir, 0755);
	log_set_level(LOG_ERROR);
	return 0;
}

static int teardown(void **st)
{
	char cmd[160];

	snprintf(cmd, sizeof(cmd), "rm -rf %s", root);
	return system(cmd) == 0 ? 0 : -1;
}

#define UID_RT "6f0c1c4e-0000-4000-8000-0000000000a1"
#define UID_RT2 "6f0c1c4e-0000-4000-8000-0000000000a2"
#define UID_EX "6f0c1c4e-0000-4000-8000-0000000000b1"

static void add(struct state *s, const char *uid, const char *cpus, bool rt)
{
	struct state_result res = { .rt_milli = rt ? 300 : 0 };
	struct state_claim c = { .rt = rt, .n_results = 1, .results = &res };
	struct cpuset set;
	struct errbuf why = { "" };

	snprintf(c.uid, sizeof(c.uid), "%s", uid);
	c.ns = "ns";
	c.name = "n";
	res.request = "r";
	res.device = "d";
	assert_int_equal(cpuset_parse(cpus, &set, NULL), 0);
	res.cpus = cpuset_view(&set);
	c.budget = (struct rt_budget){ .policy = RT_POLICY_DEADLINE, .runtime_ns = 3000000,
				       .deadline_ns = 10000000, .period_ns = 10000000 };
	if (state_claim_add(s, &c, &why) < 0)
		fail_msg("%s", why.s);
}

static void test_rtctl_a_real_time_container_holds_one_claim_alone(void **st)
{
	static const struct rt_limits limits = { 900, 100000, 4194304000ull };
	struct event_base *base = event_base_new();
	struct metrics *m = NULL;
	struct state *s = NULL;
	struct rtctl *rt = NULL;
	struct state_opts so = { 0 };
	char cdi[128], sd[128], cg[128];
	struct errbuf err = { "" };
	struct rtctl_opts o = { .limits = &limits, .cgroup_version = 1 };
	const char uids[2][CDI_UID_MAX] = { UID_RT, UID_EX };
	const char two[2][CDI_UID_MAX] = { UID_RT, UID_RT2 };
	const char one[1][CDI_UID_MAX] = { UID_EX };
	struct rtctl_container c = { .id = "c1", .name = "app", .cgroups_path = "/x/c1" };

	snprintf(cdi, sizeof(cdi), "%s/cdi", root);
	snprintf(sd, sizeof(sd), "%s/state", root);
	snprintf(cg, sizeof(cg), "%s/cpuset", root);
	so.cdi_dir = cdi;
	so.state_dir = sd;
	assert_int_equal(cpuset_parse("0-1", &so.allocatable, NULL), 0);
	assert_int_equal(cpuset_parse("2-3", &so.rt_cpus, NULL), 0);
	assert_int_equal(state_new(&so, &s), 0);
	assert_int_equal(state_load(s), 0);
	assert_int_equal(metrics_new(&m), 0);
	o.cgroup_root = cg;
	o.state_dir = sd;
	assert_int_equal(rtctl_new(base, s, m, &o, &rt), 0);
	add(s, UID_RT, "2", true);
	add(s, UID_RT2, "3", true);
	add(s, UID_EX, "1", false);
	/* NULL adjustment: none of these may get as far as setting one */
	assert_int_equal(rtctl_create(rt, &c, uids, 2, NULL, &err), -EINVAL);
	assert_non_null(strstr(err.s, "shares the container with other dra.cpu claims"));
	assert_int_equal(rtctl_create(rt, &c, two, 2, NULL, &err), -EINVAL);
	assert_non_null(strstr(err.s, "are both real-time: a container holds one"));
	assert_int_equal(rtctl_create(rt, &c, one, 1, NULL, &err), 0); /* not ours */
	rtctl_free(rt);
	state_free(s);
	metrics_free(m);
	event_base_free(base);
}

/* A cgroup v2 file under root/cg2 (directories made as needed). */
static void put2(const char *rel, const char *file, const char *value)
{
	char path[512], line[256];

	snprintf(path, sizeof(path), "cg2%s/%s", rel, file);
	snprintf(line, sizeof(line), "%s\n", value);
	testutil_put(root, path, line);
}

static const char *get2(const char *rel, const char *file)
{
	static char buf[4][128];
	static int next;
	char path[512], *b = buf[next++ % 4];
	FILE *f;

	snprintf(path, sizeof(path), "%s/cg2%s/%s", root, rel, file);
	f = fopen(path, "r");
	assert_non_null(f);
	if (!fgets(b, 128, f))
		b[0] = 0;
	fclose(f);
	b[strcspn(b, "\n")] = 0;
	return b;
}

static void cgroup2(const char *rel)
{
	put2(rel, "cpuset.cpus", "");
	put2(rel, "cpuset.cpus.exclusive", "");
	put2(rel, "cpuset.cpus.partition", "member");
}

#define POD_A "/kubepods.slice/pod-a.slice"
#define POD_B "/kubepods.slice/pod-b.slice"

/* kill -9 with two real-time containers on a cgroup v2 node: at the next
 * start the partition no claim holds any more is put back at once, the
 * other when its claim is unprepared. */
static void test_rtctl_v2_partitions_a_killed_run_left_are_put_back(void **st)
{
	static const struct rt_limits limits = { 900, 100000, 4194304000ull };
	struct event_base *base = event_base_new();
	struct metrics *m = NULL;
	struct state *s = NULL;
	struct rtctl *rt = NULL;
	struct rtdomain *dom = NULL;
	struct state_opts so = { 0 };
	char cdi[128], sd[128], cg[128], dir[256];
	struct errbuf eb = { "" };
	struct rtctl_opts o = { .limits = &limits, .cgroup_version = 2 };
	struct rtdomain_opts dopt = { .version = 2 };
	struct cpuset two, three;

	snprintf(cdi, sizeof(cdi), "%s/cdi", root);
	snprintf(sd, sizeof(sd), "%s/state", root);
	snprintf(cg, sizeof(cg), "%s/cg2", root);
	mkdir(sd, 0700);
	put2("", "cgroup.controllers", "cpuset cpu memory");
	cgroup2("/kubepods.slice");
	cgroup2(POD_A);
	cgroup2(POD_A "/ctr.scope");
	cgroup2(POD_B);
	cgroup2(POD_B "/ctr.scope");
	so.cdi_dir = cdi;
	so.state_dir = sd;
	assert_int_equal(cpuset_parse("0-1", &so.allocatable, NULL), 0);
	assert_int_equal(cpuset_parse("2-3", &so.rt_cpus, NULL), 0);
	assert_int_equal(state_new(&so, &s), 0);
	assert_int_equal(state_load(s), 0);
	assert_int_equal(metrics_new(&m), 0);
	add(s, UID_RT, "2", true);
	/* the killed run: a partition per container, on CPUs 2 and 3 */
	dopt.root = cg;
	dopt.state_dir = sd;
	assert_int_equal(rtdomain_new(&dopt, &dom), 0);
	cpuset_parse("2", &two, NULL);
	cpuset_parse("3", &three, NULL);
	snprintf(dir, sizeof(dir), "%s" POD_A "/ctr.scope", cg);
	assert_int_equal(rtdomain_v2_acquire(dom, dir, &two, &eb), 0);
	snprintf(dir, sizeof(dir), "%s" POD_B "/ctr.scope", cg);
	assert_int_equal(rtdomain_v2_acquire(dom, dir, &three, &eb), 0);
	rtdomain_free(dom);
	assert_string_equal(get2("/kubepods.slice", "cpuset.cpus.exclusive"), "2-3");
	/* started again: CPU 3's claim is gone, CPU 2's is still prepared */
	o.cgroup_root = cg;
	o.state_dir = sd;
	assert_int_equal(rtctl_new(base, s, m, &o, &rt), 0);
	assert_string_equal(get2(POD_B "/ctr.scope", "cpuset.cpus.partition"), "member");
	assert_string_equal(get2(POD_B, "cpuset.cpus.exclusive"), "");
	assert_string_equal(get2(POD_A "/ctr.scope", "cpuset.cpus.partition"), "root");
	assert_string_equal(get2("/kubepods.slice", "cpuset.cpus.exclusive"), "2");
	/* its claim is unprepared (its container never came back) */
	assert_int_equal(state_claim_remove(s, UID_RT), 0);
	assert_string_equal(get2(POD_A "/ctr.scope", "cpuset.cpus.partition"), "member");
	assert_string_equal(get2(POD_A, "cpuset.cpus.exclusive"), "");
	assert_string_equal(get2("/kubepods.slice", "cpuset.cpus.exclusive"), "");
	rtctl_free(rt);
	state_free(s);
	metrics_free(m);
	event_base_free(base);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_rtctl_runtimes_with_nri_0_11_apply_the_scheduler),
		cmocka_unit_test_setup_teardown(test_rtctl_a_real_time_container_holds_one_claim_alone,
						setup, teardown),
		cmocka_unit_test_setup_teardown(
			test_rtctl_v2_partitions_a_killed_run_left_are_put_back, setup, teardown),
	};

	return cmocka_run_group_tests(tests, NULL, NULL);
}
