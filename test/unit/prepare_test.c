/* prepare: the Prepare policy driven directly, without the kubelet's socket
 * or the API server: allocations are built as claim_parse() would leave
 * them, state, CDI specs and the checkpoint are real files in a temporary
 * directory.
 *
 * The node: 16 CPUs, 2 NUMA nodes of 4 cores x 2 threads. Grouped devices
 * cpudevnuma000 (CPUs 0-3,8-11) and cpudevnuma001 (4-7,12-15); individual
 * devices cpudev000..; with real-time CPUs 14-15 also cpurt014, cpurt015
 * (900m each).
 */
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

#include "core/claim.h"
#include "core/devices.h"
#include "core/prepare.h"
#include "core/rt.h"
#include "core/state.h"
#include "host/topo.h"
#include "lib/errbuf.h"
#include "lib/log.h"
#include "testutil.h"

#define UID_A "6f0c1c4e-0000-4000-8000-00000000000a"
#define UID_B "6f0c1c4e-0000-4000-8000-00000000000b"
#define UID_C "6f0c1c4e-0000-4000-8000-00000000000c"

static const struct rt_limits rt_limits = { .capacity_milli = 900,
					    .period_min_ns = 100000,
					    .period_max_ns = 4194304000ull };

static struct {
	struct topo *topo;
	struct devices *devices;
	struct state *state;
	struct prepare *prepare;
	char root[64], cdi[96], st[96];
} fx;

static struct cpuset cs(const char *s)
{
	struct cpuset c;

	assert_int_equal(cpuset_parse(s, &c, NULL), 0);
	return c;
}

/* mode: DEVICES_GROUPED or DEVICES_INDIVIDUAL; rt: the real-time CPUs or NULL. */
static void start(int mode, const char *rt)
{
	struct cpuset rt_cpus = rt ? cs(rt) : (struct cpuset){ 0 };
	struct state_opts so = { .cdi_dir = fx.cdi, .state_dir = fx.st };
	struct prepare_opts po = { 0 };

	assert_int_equal(devices_build(fx.topo, rt ? &rt_cpus : NULL, mode, DEVICES_BY_NUMANODE,
				       &fx.devices),
			 0);
	if (rt)
		assert_int_equal(devices_add_rt(fx.devices, fx.topo, &rt_cpus, 900), 0);
	so.allocatable = fx.devices->allocatable;
	so.rt_cpus = rt_cpus;
	assert_int_equal(state_new(&so, &fx.state), 0);
	assert_int_equal(state_load(fx.state), 0);
	po.state = fx.state;
	po.topo = fx.topo;
	po.devices = fx.devices;
	po.rt = rt ? &rt_limits : NULL;
	assert_int_equal(prepare_new(&po, &fx.prepare), 0);
}

static int setup(void **st)
{
	memset(&fx, 0, sizeof(fx));
	log_set_level(LOG_ERROR);
	snprintf(fx.root, sizeof(fx.root), "/dev/shm/prepare-test.XXXXXX");
	if (!mkdtemp(fx.root))
		return -1;
	snprintf(fx.cdi, sizeof(fx.cdi), "%s/cdi", fx.root);
	snprintf(fx.st, sizeof(fx.st), "%s/state", fx.root);
	fx.topo = testutil_topo(1, 2, 4, 2);
	return fx.topo ? 0 : -1;
}

static int teardown(void **st)
{
	char cmd[128];

	prepare_free(fx.prepare);
	state_free(fx.state);
	devices_free(fx.devices);
	topo_free(fx.topo);
	snprintf(cmd, sizeof(cmd), "rm -rf %s", fx.root);
	return system(cmd) == 0 ? 0 : -1;
}

/* An allocation of one result: request "cpu" on dev, consumed "" for an
 * individual device. */
static struct claim_alloc one(const char *dev, const char *consumed)
{
	struct claim_alloc a;

	memset(&a, 0, sizeof(a));
	a.n = 1;
	snprintf(a.results[0].request, sizeof(a.results[0].request), "cpu");
	snprintf(a.results[0].device, sizeof(a.results[0].device), "%s", dev);
	snprintf(a.results[0].consumed, sizeof(a.results[0].consumed), "%s", consumed);
	return a;
}

/* prepare_claim() of uid with allocation a: its return; *res and err filled. */
static int decide(const char *uid, const struct claim_alloc *a, struct prepare_result *res,
		  struct errbuf *err)
{
	struct prepare_request rq = { .ns = "default", .name = "claim", .uid = uid, .alloc = a };

	errbuf_clear(err);
	return prepare_claim(fx.prepare, &rq, res, err);
}

static struct cpuset held(const char *uid)
{
	const struct state_claim *c = state_claim(fx.state, uid);
	struct cpuset cpus;

	assert_non_null(c);
	return *cpuset_from_view(&c->cpus, &cpus);
}

/* Does uid hold exactly the CPUs of list? */
static bool holds(const char *uid, const char *list)
{
	struct cpuset have = held(uid), want = cs(list);

	return cpuset_equal(&have, &want);
}

static void assert_err_has(const struct errbuf *err, const char *want)
{
	if (!strstr(err->s, want))
		fail_msg("error \"%s\" lacks \"%s\"", err->s, want);
}

/* ---- grouped devices ----------------------------------------------------------------------- */

static void test_grouped_claim_gets_cpus_of_its_device_and_is_committed(void **st)
{
	struct claim_alloc a = one("cpudevnuma001", "4");
	struct prepare_result res = { .again = true };
	struct errbuf err = { "" };
	struct cpuset cpus, numa1 = cs("4-7,12-15");

	start(DEVICES_GROUPED, NULL);
	assert_int_equal(decide(UID_A, &a, &res, &err), 0);
	assert_string_equal(err.s, "");
	assert_false(res.again);
	assert_false(res.rt);
	assert_int_equal(res.n_cpus, 4);
	cpus = held(UID_A);
	assert_int_equal(cpuset_count(&cpus), 4);
	assert_true(cpuset_is_subset(&cpus, &numa1));
	assert_int_equal(state_claim(fx.state, UID_A)->n_consumers, 0);
}

static void test_prepared_again_to_the_same_allocation_keeps_its_cpus(void **st)
{
	struct claim_alloc a = one("cpudevnuma000", "2");
	struct prepare_result res;
	struct errbuf err = { "" };
	struct cpuset first, cpus;

	start(DEVICES_GROUPED, NULL);
	assert_int_equal(decide(UID_A, &a, &res, &err), 0);
	first = held(UID_A);
	assert_int_equal(decide(UID_A, &a, &res, &err), 0);
	assert_true(res.again);
	assert_int_equal(res.n_cpus, 0);
	cpus = held(UID_A);
	assert_true(cpuset_equal(&first, &cpus));
	assert_int_equal(state_claim_count(fx.state), 1);
}

static void test_prepared_again_to_another_allocation_is_refused(void **st)
{
	struct claim_alloc a = one("cpudevnuma000", "2"), b = one("cpudevnuma001", "2");
	struct prepare_result res;
	struct errbuf err = { "" };
	struct cpuset first, cpus, numa0 = cs("0-3,8-11");

	start(DEVICES_GROUPED, NULL);
	assert_int_equal(decide(UID_A, &a, &res, &err), 0);
	first = held(UID_A);
	assert_int_equal(decide(UID_A, &b, &res, &err), -EINVAL);
	assert_err_has(&err, "already prepared with another allocation");
	cpus = held(UID_A);
	assert_true(cpuset_equal(&first, &cpus));
	assert_true(cpuset_is_subset(&first, &numa0));
}

static void test_two_claims_never_share_cpus_and_the_third_finds_none(void **st)
{
	struct claim_alloc a = one("cpudevnuma000", "5"), b = one("cpudevnuma000", "3"),
			   c = one("cpudevnuma000", "1");
	struct prepare_result res;
	struct errbuf err = { "" };
	struct cpuset ca, cb, both;

	start(DEVICES_GROUPED, NULL);
	assert_int_equal(decide(UID_A, &a, &res, &err), 0);
	assert_int_equal(decide(UID_B, &b, &res, &err), 0);
	ca = held(UID_A);
	cb = held(UID_B);
	cpuset_and(&both, &ca, &cb);
	assert_true(cpuset_is_empty(&both));
	assert_int_equal(decide("6f0c1c4e-0000-4000-8000-00000000000c", &c, &res, &err), -EINVAL);
	assert_err_has(&err, "is more than the 0 CPUs cpudevnuma000 has free");
	assert_int_equal(state_claim_count(fx.state), 2);
}

static void test_offline_cpus_are_never_picked(void **st)
{
	struct claim_alloc a = one("cpudevnuma001", "6"), b = one("cpudevnuma001", "1");
	struct cpuset online = cs("0-5,8-15"); /* 6 and 7 went offline */
	struct prepare_result res;
	struct errbuf err = { "" };
	struct cpuset cpus, off = cs("6-7"), x;

	start(DEVICES_GROUPED, NULL);
	prepare_set_online(fx.prepare, &online);
	assert_int_equal(decide(UID_A, &a, &res, &err), 0);
	cpus = held(UID_A);
	cpuset_and(&x, &cpus, &off);
	assert_true(cpuset_is_empty(&x));
	/* 4-5,12-15 are all the online CPUs of the device: none left */
	assert_int_equal(decide(UID_B, &b, &res, &err), -EINVAL);
	assert_err_has(&err, "is more than the 0 CPUs");
}

static void test_cpuset_override_is_taken_exactly_or_refused(void **st)
{
	struct claim_alloc a = one("cpudevnuma001", "2"), b = one("cpudevnuma001", "2");
	struct prepare_result res;
	struct errbuf err = { "" };

	start(DEVICES_GROUPED, NULL);
	snprintf(a.results[0].cpuset, sizeof(a.results[0].cpuset), "5,13");
	assert_int_equal(decide(UID_A, &a, &res, &err), 0);
	assert_true(holds(UID_A, "5,13"));
	snprintf(b.results[0].cpuset, sizeof(b.results[0].cpuset), "2-3");
	assert_int_equal(decide(UID_B, &b, &res, &err), -EINVAL);
	assert_err_has(&err, "CPUs 2-3 are not in device cpudevnuma001");
	snprintf(b.results[0].cpuset, sizeof(b.results[0].cpuset), "13-14");
	assert_int_equal(decide(UID_B, &b, &res, &err), -EINVAL);
	assert_err_has(&err, "CPUs 13 are held by another claim");
	assert_null(state_claim(fx.state, UID_B));
}

static void test_grouped_result_without_consumed_capacity_is_refused(void **st)
{
	struct claim_alloc a = one("cpudevnuma001", "");
	struct prepare_result res;
	struct errbuf err = { "" };

	start(DEVICES_GROUPED, NULL);
	assert_int_equal(decide(UID_A, &a, &res, &err), -EINVAL);
	assert_err_has(&err, "needs the DRAConsumableCapacity feature");
	assert_int_equal(state_claim_count(fx.state), 0);
}

/* ---- individual devices -------------------------------------------------------------------- */

static void test_individual_device_is_its_cpu_unless_offline(void **st)
{
	struct claim_alloc a = one("cpudev003", ""), b = one("cpudev006", "");
	struct prepare_result res;
	struct errbuf err = { "" };
	const struct device *d3, *d6;
	struct cpuset online, cpus;
	char want[64];

	start(DEVICES_INDIVIDUAL, NULL);
	d3 = devices_find(fx.devices, "cpudev003");
	d6 = devices_find(fx.devices, "cpudev006");
	assert_non_null(d3);
	assert_non_null(d6);
	assert_int_equal(decide(UID_A, &a, &res, &err), 0);
	assert_int_equal(res.n_cpus, 1);
	cpus = held(UID_A);
	assert_int_equal(cpuset_count(&cpus), 1);
	assert_true(cpuset_has(&cpus, d3->id));
	online = fx.topo->online;
	cpuset_clear(&online, d6->id);
	prepare_set_online(fx.prepare, &online);
	assert_int_equal(decide(UID_B, &b, &res, &err), -EINVAL);
	snprintf(want, sizeof(want), "CPU %d is offline", d6->id);
	assert_err_has(&err, want);
}

/* ---- real-time devices --------------------------------------------------------------------- */

static struct claim_alloc rt_one(const char *dev, const char *milli, bool with_budget)
{
	struct claim_alloc a = one(dev, "");

	snprintf(a.results[0].rt_consumed, sizeof(a.results[0].rt_consumed), "%s", milli);
	if (with_budget) {
		a.results[0].config.rt_set = true;
		a.results[0].config.rt = (struct rt_budget){ .policy = RT_POLICY_DEADLINE,
							     .runtime_ns = 3000000,
							     .deadline_ns = 10000000,
							     .period_ns = 10000000 };
	}
	return a;
}

static void test_rt_claims_fill_a_cpu_up_to_its_capacity(void **st)
{
	struct claim_alloc a = rt_one("cpurt014", "600m", true), b = rt_one("cpurt014", "400m", true);
	struct prepare_result res;
	struct errbuf err = { "" };

	start(DEVICES_INDIVIDUAL, "14-15");
	assert_int_equal(decide(UID_A, &a, &res, &err), 0);
	assert_true(res.rt);
	assert_false(res.again);
	assert_int_equal(rt_cpu_used_milli(fx.state, 14, &rt_limits), 600);
	assert_int_equal(decide(UID_B, &b, &res, &err), -EINVAL);
	assert_err_has(&err, "does not fit on cpurt014");
	assert_int_equal(rt_cpu_used_milli(fx.state, 14, &rt_limits), 600);
	assert_int_equal(decide(UID_A, &a, &res, &err), 0);
	assert_true(res.again);
}

static void test_rt_device_needs_a_budget_and_a_claim_of_one_kind(void **st)
{
	struct claim_alloc a = rt_one("cpurt015", "300m", false), b = rt_one("cpurt015", "300m", true);
	struct prepare_result res;
	struct errbuf err = { "" };

	start(DEVICES_INDIVIDUAL, "14-15");
	assert_int_equal(decide(UID_A, &a, &res, &err), -EINVAL);
	assert_err_has(&err, "needs a CPUConfig with \"realtime\"");
	/* a real-time result beside an ordinary one */
	b.n = 2;
	snprintf(b.results[1].request, sizeof(b.results[1].request), "cpu2");
	snprintf(b.results[1].device, sizeof(b.results[1].device), "cpudev002");
	assert_int_equal(decide(UID_B, &b, &res, &err), -EINVAL);
	assert_err_has(&err, "must all be real-time CPUs or none");
	assert_int_equal(state_claim_count(fx.state), 0);
}

static void test_an_ordinary_claim_cannot_come_back_as_real_time(void **st)
{
	struct claim_alloc a = one("cpudev002", ""), b = rt_one("cpurt014", "300m", true);
	struct prepare_result res;
	struct errbuf err = { "" };

	start(DEVICES_INDIVIDUAL, "14-15");
	assert_int_equal(decide(UID_A, &a, &res, &err), 0);
	assert_int_equal(decide(UID_A, &b, &res, &err), -EINVAL);
	assert_err_has(&err, "already prepared as an ordinary claim");
}

/* The irq choice of a real-time claim is recorded as an ordinary claim's is
 * (core/irqiso acts on it); memory and the shared pool are not: its
 * container gets its CPU alone, whatever the node's --memory-local says. */
static void test_rt_claim_records_its_irq_choice_and_nothing_else(void **st)
{
	struct claim_alloc a = rt_one("cpurt014", "300m", true), b = rt_one("cpurt014", "300m", true),
			   c = rt_one("cpurt015", "300m", true);
	struct prepare_result res;
	struct errbuf err = { "" };

	start(DEVICES_INDIVIDUAL, "14-15");
	a.results[0].config.irq = CLAIM_IRQ_ISOLATE;
	a.results[0].config.memory = CLAIM_MEMORY_LOCAL;
	a.results[0].config.shared_pool = true;
	b.results[0].config.irq = CLAIM_IRQ_KEEP;
	assert_int_equal(decide(UID_A, &a, &res, &err), 0);
	assert_int_equal(state_claim(fx.state, UID_A)->flags, STATE_CLAIM_IRQ_ISOLATE);
	assert_int_equal(decide(UID_B, &b, &res, &err), 0);
	assert_int_equal(state_claim(fx.state, UID_B)->flags, STATE_CLAIM_IRQ_KEEP);
	prepare_free(fx.prepare);
	assert_int_equal(prepare_new(&(struct prepare_opts){ .state = fx.state,
							     .topo = fx.topo,
							     .devices = fx.devices,
							     .rt = &rt_limits,
							     .memory_local = true },
				     &fx.prepare),
			 0);
	assert_int_equal(decide(UID_C, &c, &res, &err), 0); /* says nothing */
	assert_true(res.rt);
	assert_int_equal(state_claim(fx.state, UID_C)->flags, 0);
}

#define T(fn) cmocka_unit_test_setup_teardown(fn, setup, teardown)

int main(void)
{
	const struct CMUnitTest tests[] = {
		T(test_grouped_claim_gets_cpus_of_its_device_and_is_committed),
		T(test_prepared_again_to_the_same_allocation_keeps_its_cpus),
		T(test_prepared_again_to_another_allocation_is_refused),
		T(test_two_claims_never_share_cpus_and_the_third_finds_none),
		T(test_offline_cpus_are_never_picked),
		T(test_cpuset_override_is_taken_exactly_or_refused),
		T(test_grouped_result_without_consumed_capacity_is_refused),
		T(test_individual_device_is_its_cpu_unless_offline),
		T(test_rt_claims_fill_a_cpu_up_to_its_capacity),
		T(test_rt_device_needs_a_budget_and_a_claim_of_one_kind),
		T(test_an_ordinary_claim_cannot_come_back_as_real_time),
		T(test_rt_claim_records_its_irq_choice_and_nothing_else),
	};

	return cmocka_run_group_tests(tests, NULL, NULL);
}
