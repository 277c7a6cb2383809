/* irqiso: which claims keep interrupts off their CPUs, driven through the
 * state's observer on a fake procfs tree (no real /proc/irq is written).
 *
 * The node: CPUs 0-1 allocatable, 2-3 real-time (--rt-cpus). Interrupts:
 * 24 on 0-3, 38 on 2 alone (never left without a CPU), 40 on 0 (touches no
 * claim), 41 on 1-2, 42 on 2-3; the default affinity every CPU. Real-time
 * claims ask as ordinary claims do (CPUConfig irq, or the node default),
 * several may sit on one CPU, and the guard keeps it isolated until the last
 * of those that asked is unprepared; a restart keeps what is prepared and
 * undoes what was unprepared while the driver was down. */
#include <errno.h>
#include <limits.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <cmocka.h>

#include "core/irqiso.h"
#include "core/rt.h"
#include "core/state.h"
#include "host/irq.h"
#include "lib/cpuset.h"
#include "lib/errbuf.h"
#include "lib/log.h"
#include "obs/metrics.h"
#include "testutil.h"

#define UID(n) "6f0c1c4e-0000-4000-8000-00000000000" #n

static struct {
	char root[64], proc[96], cdi[96], st[96];
	struct metrics *metrics;
	struct state *state;
	struct irqiso *iso;
} fx;

/* What the fake tree holds at start, and what a claim isolating CPU 2 (or 1)
 * leaves. The default affinity is a hex mask: f = 0-3. */
static const char *const irq_files[] = { "default_smp_affinity", "24/smp_affinity_list",
					 "38/smp_affinity_list", "40/smp_affinity_list",
					 "41/smp_affinity_list", "42/smp_affinity_list" };
static const char *const start_affinity[] = { "f", "0-3", "2", "0", "1-2", "2-3" };
static const char *const off_cpu2[] = { "b", "0-1,3", "2", "0", "1", "3" };
static const char *const off_cpu1[] = { "d", "0,2-3", "2", "0", "2", "2-3" };

static int setup(void **st)
{
	memset(&fx, 0, sizeof(fx));
	log_set_level(LOG_ERROR);
	snprintf(fx.root, sizeof(fx.root), "/dev/shm/irqiso-test.XXXXXX");
	if (!mkdtemp(fx.root))
		return -1;
	snprintf(fx.proc, sizeof(fx.proc), "%s/proc", fx.root);
	snprintf(fx.cdi, sizeof(fx.cdi), "%s/cdi", fx.root);
	snprintf(fx.st, sizeof(fx.st), "%s/state", fx.root);
	for (size_t i = 0; i < ARRAY_SIZE(irq_files); i++) {
		char rel[64], text[16];

		snprintf(rel, sizeof(rel), "irq/%s", irq_files[i]);
		snprintf(text, sizeof(text), "%s\n", start_affinity[i]);
		testutil_put(fx.proc, rel, text);
	}
	return metrics_new(&fx.metrics);
}

static int teardown(void **st)
{
	irqiso_free(fx.iso); /* before the state it observes */
	state_free(fx.state);
	metrics_free(fx.metrics);
	testutil_rmtree(fx.root);
	return 0;
}

/* The state as the daemon opens it: the checkpoint loaded. */
static void open_state(void)
{
	struct state_opts so = { .cdi_dir = fx.cdi, .state_dir = fx.st };

	assert_int_equal(cpuset_parse("0-1", &so.allocatable, NULL), 0);
	assert_int_equal(cpuset_parse("2-3", &so.rt_cpus, NULL), 0);
	assert_int_equal(state_new(&so, &fx.state), 0);
	assert_int_equal(state_load(fx.state), 0);
}

/* The driver started: its state, then the irqiso that observes it.
 * isolate: --irq-isolation=isolate. */
static void start(bool isolate)
{
	struct irqiso_opts io = { .isolate = isolate, .procfs_root = fx.proc,
				  .state_dir = fx.st };

	open_state();
	assert_int_equal(irqiso_new(fx.state, &io, fx.metrics, &fx.iso), 0);
}

/* The driver killed: nothing is undone, the files stay as they are. */
static void kill_driver(void)
{
	fx.iso = irqiso_free(fx.iso);
	fx.state = state_free(fx.state);
}

/* A claim of one result on cpu: real-time (a deadline budget of 300m) when
 * rt, with the state flags its CPUConfig gave. */
static void add(const char *uid, int cpu, bool rt, unsigned flags)
{
	struct state_result res = { .request = "cpu" };
	struct state_claim c = { .ns = "default", .rt = rt, .flags = flags, .n_results = 1,
				 .results = &res, .consumers_known = true };
	struct errbuf why = { "" };
	char name[16], device[STATE_DEVICE_MAX];
	struct cpuset set;

	snprintf(c.uid, sizeof(c.uid), "%s", uid);
	snprintf(name, sizeof(name), "c-%s", uid + 35);
	c.name = name;
	snprintf(device, sizeof(device), rt ? "cpurt%03d" : "cpudev%03d", cpu);
	res.device = device;
	cpuset_zero(&set);
	cpuset_set(&set, cpu);
	res.cpus = cpuset_view(&set);
	if (rt) {
		res.rt_milli = 300;
		c.budget = (struct rt_budget){ .policy = RT_POLICY_DEADLINE,
					       .runtime_ns = 3000000,
					       .deadline_ns = 10000000,
					       .period_ns = 10000000 };
	}
	if (state_claim_add(fx.state, &c, &why) < 0)
		fail_msg("state_claim_add %s: %s", uid, why.s);
}

static void unprepare(const char *uid)
{
	assert_int_equal(state_claim_remove(fx.state, uid), 0);
}

/* Every interrupt file holds what want says, or the test fails naming it. */
static void assert_affinities(const char *const *want)
{
	for (size_t i = 0; i < ARRAY_SIZE(irq_files); i++) {
		char path[PATH_MAX], got[64] = "";
		FILE *f;

		snprintf(path, sizeof(path), "%s/irq/%s", fx.proc, irq_files[i]);
		f = fopen(path, "r");
		assert_non_null(f);
		if (!fgets(got, sizeof(got), f))
			got[0] = 0;
		fclose(f);
		got[strcspn(got, "\n")] = 0;
		if (strcmp(got, want[i]) != 0)
			fail_msg("%s: \"%s\", want \"%s\"", irq_files[i], got, want[i]);
	}
}

static bool record_exists(void)
{
	char path[PATH_MAX];

	snprintf(path, sizeof(path), "%s/%s", fx.st, IRQ_RECORD_FILE);
	return access(path, F_OK) == 0;
}

static void test_irqiso_rt_claim_asking_isolate_moves_interrupts_off_its_cpu(void **st)
{
	start(false);
	add(UID(1), 2, true, STATE_CLAIM_IRQ_ISOLATE);
	assert_affinities(off_cpu2);
	assert_true(record_exists());
	unprepare(UID(1));
	assert_affinities(start_affinity);
	assert_false(record_exists());
}

static void test_irqiso_rt_claim_follows_the_node_default_unless_it_says_keep(void **st)
{
	start(true);
	add(UID(1), 2, true, STATE_CLAIM_IRQ_KEEP);
	assert_affinities(start_affinity);
	assert_false(record_exists());
	add(UID(2), 3, true, 0); /* says nothing: the node default */
	assert_affinities((const char *const[]){ "7", "0-2", "2", "0", "1-2", "2" });
	unprepare(UID(2));
	assert_affinities(start_affinity);
	unprepare(UID(1));
	assert_affinities(start_affinity);
}

/* Two deadline claims on CPU 2: the guard holds it under both uids. */
static void test_irqiso_shared_rt_cpu_stays_isolated_until_its_last_claim_goes(void **st)
{
	start(true);
	add(UID(1), 2, true, STATE_CLAIM_IRQ_ISOLATE);
	add(UID(2), 2, true, 0);
	add(UID(3), 2, true, STATE_CLAIM_IRQ_KEEP); /* shares the CPU, asked for nothing */
	assert_affinities(off_cpu2);
	unprepare(UID(1));
	assert_affinities(off_cpu2);
	assert_true(record_exists());
	unprepare(UID(2));
	assert_affinities(start_affinity);
	assert_false(record_exists());
	unprepare(UID(3));
	assert_affinities(start_affinity);
	/* the other order: the last to go restores */
	add(UID(4), 2, true, 0);
	add(UID(5), 2, true, 0);
	unprepare(UID(5));
	assert_affinities(off_cpu2);
	unprepare(UID(4));
	assert_affinities(start_affinity);
}

static void test_irqiso_ordinary_claims_ask_as_they_did(void **st)
{
	start(false);
	add(UID(1), 1, false, 0); /* node default keep */
	assert_affinities(start_affinity);
	add(UID(2), 0, false, STATE_CLAIM_IRQ_KEEP);
	assert_affinities(start_affinity);
	unprepare(UID(1));
	add(UID(3), 1, false, STATE_CLAIM_IRQ_ISOLATE);
	assert_affinities(off_cpu1);
	unprepare(UID(3));
	assert_affinities(start_affinity);
	unprepare(UID(2));
	kill_driver();
	start(true);
	add(UID(4), 1, false, 0); /* node default isolate */
	assert_affinities(off_cpu1);
	add(UID(5), 0, false, STATE_CLAIM_IRQ_KEEP);
	assert_affinities(off_cpu1);
	unprepare(UID(4));
	assert_affinities(start_affinity);
}

/* The checkpoint keeps real-time claims, the guard's record their isolation. */
static void test_irqiso_rt_isolation_survives_a_restart_and_is_undone_when_unprepared_meanwhile(
	void **st)
{
	start(false);
	add(UID(1), 2, true, STATE_CLAIM_IRQ_ISOLATE);
	add(UID(2), 3, true, STATE_CLAIM_IRQ_ISOLATE);
	assert_affinities((const char *const[]){ "3", "0-1", "2", "0", "1", "2-3" });
	kill_driver();
	start(false);
	assert_non_null(state_claim(fx.state, UID(1)));
	assert_true(state_claim(fx.state, UID(1))->rt);
	assert_affinities((const char *const[]){ "3", "0-1", "2", "0", "1", "2-3" });
	unprepare(UID(2));
	assert_affinities(off_cpu2);
	kill_driver();
	/* the kubelet unprepares UID(1) while the driver is down: the claim
	 * leaves the checkpoint, the guard's record still holds its CPU */
	open_state();
	unprepare(UID(1));
	fx.state = state_free(fx.state);
	assert_affinities(off_cpu2);
	assert_true(record_exists());
	start(false);
	assert_affinities(start_affinity);
	assert_false(record_exists());
}

#define T(fn) cmocka_unit_test_setup_teardown(fn, setup, teardown)

int main(void)
{
	const struct CMUnitTest tests[] = {
		T(test_irqiso_rt_claim_asking_isolate_moves_interrupts_off_its_cpu),
		T(test_irqiso_rt_claim_follows_the_node_default_unless_it_says_keep),
		T(test_irqiso_shared_rt_cpu_stays_isolated_until_its_last_claim_goes),
		T(test_irqiso_ordinary_claims_ask_as_they_did),
		T(test_irqiso_rt_isolation_survives_a_restart_and_is_undone_when_unprepared_meanwhile),
	};

	return cmocka_run_group_tests(tests, NULL, NULL);
}
