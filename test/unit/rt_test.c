/* rt: real-time budgets (CPUConfig.realtime), their checks, and the
 * bandwidth ledger over state's real-time claims (restarts included). */
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
#include <json-c/json.h>

#include "core/rt.h"
#include "core/state.h"
#include "lib/errbuf.h"
#include "lib/log.h"

static const struct rt_limits limits = {
	.capacity_milli = 900, .period_min_ns = 100000, .period_max_ns = 4194304000ull
};

static int parse(const char *text, struct rt_budget *b, struct errbuf *err)
{
	struct json_object *o = json_tokener_parse(text);
	int r;

	assert_non_null(o);
	r = rt_budget_parse(o, b, err);
	json_object_put(o);
	return r;
}

static void test_rt_deadline_budget_parses_with_defaults(void **st)
{
	struct rt_budget b;
	struct errbuf err = { "" };

	assert_int_equal(parse("{\"policy\":\"deadline\",\"runtimeNs\":2000000,"
			       "\"periodNs\":10000000}",
			       &b, &err),
			 0);
	assert_int_equal(b.policy, RT_POLICY_DEADLINE);
	assert_int_equal(b.runtime_ns, 2000000);
	assert_int_equal(b.deadline_ns, 10000000); /* defaults to the period */
	assert_int_equal(b.period_ns, 10000000);
	assert_int_equal(b.on_failure, RT_ON_FAILURE_EVICT);
	assert_int_equal(rt_budget_milli(&b), 200);
	assert_int_equal(parse("{\"policy\":\"deadline\",\"runtimeNs\":1024,\"deadlineNs\":1024,"
			       "\"periodNs\":1024,\"onFailure\":\"warn\"}",
			       &b, &err),
			 0);
	assert_int_equal(b.on_failure, RT_ON_FAILURE_WARN);
	assert_int_equal(rt_budget_milli(&b), 1000);
}

static void test_rt_fifo_and_rr_take_a_priority(void **st)
{
	struct rt_budget b;
	struct errbuf err = { "" };

	assert_int_equal(parse("{\"policy\":\"fifo\",\"priority\":99}", &b, &err), 0);
	assert_int_equal(b.policy, RT_POLICY_FIFO);
	assert_int_equal(b.priority, 99);
	assert_int_equal(rt_budget_milli(&b), 0);
	assert_int_equal(parse("{\"priority\":1,\"policy\":\"rr\"}", &b, &err), 0);
	assert_int_equal(b.policy, RT_POLICY_RR);
	assert_int_equal(b.priority, 1);
}

static void test_rt_bad_budgets_say_what_is_wrong(void **st)
{
	static const struct {
		const char *json, *want;
	} cases[] = {
		{ "[]", "must be an object" },
		{ "{}", "policy is required" },
		{ "{\"policy\":\"edf\"}", "policy must be deadline, fifo or rr" },
		{ "{\"policy\":1}", "policy must be deadline, fifo or rr" },
		{ "{\"policy\":\"deadline\",\"periodNs\":10000000}", "needs runtimeNs and periodNs" },
		{ "{\"policy\":\"deadline\",\"runtimeNs\":1000}", "needs runtimeNs and periodNs" },
		{ "{\"policy\":\"deadline\",\"runtimeNs\":1023,\"periodNs\":10000000}",
		  "below the kernel's minimum of 1024 ns" },
		{ "{\"policy\":\"deadline\",\"runtimeNs\":3000000,\"deadlineNs\":2000000,"
		  "\"periodNs\":10000000}",
		  "need runtimeNs <= deadlineNs <= periodNs" },
		{ "{\"policy\":\"deadline\",\"runtimeNs\":2000000,\"deadlineNs\":20000000,"
		  "\"periodNs\":10000000}",
		  "need runtimeNs <= deadlineNs <= periodNs" },
		{ "{\"policy\":\"deadline\",\"runtimeNs\":\"2ms\",\"periodNs\":10000000}",
		  "runtimeNs must be an integer" },
		{ "{\"policy\":\"deadline\",\"runtimeNs\":2.5,\"periodNs\":10000000}",
		  "runtimeNs must be an integer" },
		{ "{\"policy\":\"deadline\",\"runtimeNs\":-5,\"periodNs\":10000000}",
		  "runtimeNs must not be negative" },
		{ "{\"policy\":\"deadline\",\"runtimeNs\":2000000,\"periodNs\":10000000,"
		  "\"priority\":5}",
		  "priority is for fifo and rr" },
		{ "{\"policy\":\"fifo\"}", "fifo needs priority" },
		{ "{\"policy\":\"rr\",\"priority\":0}", "priority must be an integer in 1..99" },
		{ "{\"policy\":\"rr\",\"priority\":100}", "priority must be an integer in 1..99" },
		{ "{\"policy\":\"fifo\",\"priority\":\"5\"}", "priority must be an integer in 1..99" },
		{ "{\"policy\":\"fifo\",\"priority\":5,\"periodNs\":10}",
		  "are for deadline, not fifo" },
		{ "{\"policy\":\"fifo\",\"priority\":5,\"onFailure\":\"kill\"}",
		  "onFailure must be evict or warn" },
		{ "{\"policy\":\"fifo\",\"priority\":5,\"budget\":1}", "unknown field \"budget\"" },
	};

	for (size_t i = 0; i < sizeof(cases) / sizeof(cases[0]); i++) {
		struct rt_budget b = { .policy = RT_POLICY_FIFO, .priority = 42 };
		struct errbuf err = { "" };
		struct json_object *o = json_tokener_parse(cases[i].json);

		assert_non_null(o);
		if (rt_budget_parse(o, &b, &err) != -EINVAL || !strstr(err.s, cases[i].want))
			fail_msg("case %zu %s: '%s', want '%s'", i, cases[i].json, err.s, cases[i].want);
		/* *ret untouched on failure */
		assert_int_equal(b.priority, 42);
		json_object_put(o);
	}
}

static void test_rt_budget_json_round_trips(void **st)
{
	const struct rt_budget in[] = {
		{ .policy = RT_POLICY_DEADLINE, .runtime_ns = 2000000, .deadline_ns = 5000000,
		  .period_ns = 10000000, .on_failure = RT_ON_FAILURE_WARN },
		{ .policy = RT_POLICY_RR, .priority = 7 },
	};

	for (size_t i = 0; i < 2; i++) {
		struct json_object *o = NULL;
		struct rt_budget out;
		struct errbuf err = { "" };

		assert_int_equal(rt_budget_to_json(&in[i], &o), 0);
		assert_int_equal(rt_budget_parse(o, &out, &err), 0);
		assert_true(rt_budget_equal(&in[i], &out));
		json_object_put(o);
	}
}

static void test_rt_period_must_be_in_the_kernel_range(void **st)
{
	struct rt_budget b = { .policy = RT_POLICY_DEADLINE, .runtime_ns = 2000,
			       .deadline_ns = 50000, .period_ns = 50000 };
	struct errbuf err = { "" };

	assert_int_equal(rt_budget_check(&b, &limits, &err), -EINVAL);
	assert_non_null(strstr(err.s, "periodNs 50000 is outside this node's sched_deadline_period "
				    "range 100000..4194304000 ns"));
	b.period_ns = b.deadline_ns = 100000;
	assert_int_equal(rt_budget_check(&b, &limits, &err), 0);
	b.period_ns = 4194304001ull;
	assert_int_equal(rt_budget_check(&b, &limits, &err), -EINVAL);
}

static void test_rt_budget_must_fit_what_the_claim_consumes(void **st)
{
	struct rt_budget b = { .policy = RT_POLICY_DEADLINE, .runtime_ns = 3000000,
			       .deadline_ns = 10000000, .period_ns = 10000000 };
	struct rt_budget fifo = { .policy = RT_POLICY_FIFO, .priority = 10 };
	struct errbuf err = { "" };

	assert_int_equal(rt_budget_fits(&b, 300, &limits, "cpurt001", &err), 0);
	assert_int_equal(rt_budget_fits(&b, 299, &limits, "cpurt001", &err), -EINVAL);
	assert_non_null(strstr(err.s, "device cpurt001: runtime 3000000 ns every 10000000 ns needs "
				    "300m of dra.cpu/rtBandwidth, the claim consumes only 299m"));
	/* exact, not rounded: 1 ns over 300m is over */
	b.runtime_ns = 3000001;
	assert_int_equal(rt_budget_milli(&b), 301);
	assert_int_equal(rt_budget_fits(&b, 300, &limits, "cpurt001", &err), -EINVAL);
	assert_int_equal(rt_budget_fits(&fifo, 900, &limits, "cpurt001", &err), 0);
	assert_int_equal(rt_budget_fits(&fifo, 899, &limits, "cpurt001", &err), -EINVAL);
	assert_non_null(strstr(err.s, "a fifo claim must consume the CPU's whole dra.cpu/rtBandwidth "
				    "(900m), not 899m"));
}

static void test_rt_milli_quantities(void **st)
{
	struct errbuf why = { "" };
	char buf[32];
	int64_t m;

	rt_milli_format(900, buf, sizeof(buf));
	assert_string_equal(buf, "900m");
	rt_milli_format(1000, buf, sizeof(buf));
	assert_string_equal(buf, "1");
	rt_milli_format(1500, buf, sizeof(buf));
	assert_string_equal(buf, "1500m");
	assert_int_equal(rt_milli_parse("300m", &m, &why), 0);
	assert_int_equal(m, 300);
	assert_int_equal(rt_milli_parse("0.3", &m, &why), 0);
	assert_int_equal(m, 300);
	assert_int_equal(rt_milli_parse("1", &m, &why), 0);
	assert_int_equal(m, 1000);
	assert_int_equal(rt_milli_parse("300500u", &m, &why), -EINVAL);
	assert_non_null(strstr(why.s, "finer than 1m"));
	assert_int_equal(rt_milli_parse("0", &m, &why), -EINVAL);
	assert_int_equal(rt_milli_parse("-1m", &m, &why), -EINVAL);
	assert_int_equal(rt_milli_parse("lots", &m, &why), -EINVAL);
	assert_non_null(strstr(why.s, "not a quantity"));
	assert_int_equal(rt_milli_parse(NULL, &m, &why), -EINVAL);
}

/* ---- the ledger over state ---------------------------------------------------------- */

static char root[64], cdi_dir[96], state_dir[96];

static int setup(void **st)
{
	snprintf(root, sizeof(root), "/dev/shm/rt-test.XXXXXX");
	if (!mkdtemp(root))
		return -1;
	snprintf(cdi_dir, sizeof(cdi_dir), "%s/cdi", root);
	snprintf(state_dir, sizeof(state_dir), "%s/state", root);
	log_set_level(LOG_ERROR);
	return 0;
}

static int teardown(void **st)
{
	char cmd[160];

	snprintf(cmd, sizeof(cmd), "rm -rf %s", root);
	return system(cmd) == 0 ? 0 : -1;
}

static struct state *open_state(void)
{
	struct state_opts o = { .cdi_dir = cdi_dir, .state_dir = state_dir };
	struct state *s = NULL;

	assert_int_equal(cpuset_parse("0-1", &o.allocatable, NULL), 0);
	assert_int_equal(cpuset_parse("2-3", &o.rt_cpus, NULL), 0);
	assert_int_equal(state_new(&o, &s), 0);
	assert_int_equal(state_load(s), 0);
	return s;
}

/* A real-time claim of one result on cpu consuming milli. */
static int add_rt(struct state *s, const char *uid, int cpu, int64_t milli, struct errbuf *why)
{
	struct state_result res = { .rt_milli = milli };
	struct state_claim c = { .rt = true, .n_results = 1, .results = &res };
	char name[STATE_NAME_MAX], device[STATE_DEVICE_MAX];
	struct cpuset set;

	snprintf(c.uid, sizeof(c.uid), "%s", uid);
	c.ns = "rt";
	snprintf(name, sizeof(name), "c-%s", uid + 34);
	c.name = name;
	res.request = "rt";
	snprintf(device, sizeof(device), "cpurt%03d", cpu);
	res.device = device;
	cpuset_zero(&set);
	cpuset_set(&set, cpu);
	res.cpus = cpuset_view(&set);
	c.budget = (struct rt_budget){ .policy = RT_POLICY_DEADLINE, .runtime_ns = 3000000,
				       .deadline_ns = 10000000, .period_ns = 10000000 };
	return state_claim_add(s, &c, why);
}

#define UID(n) "6f0c1c4e-0000-4000-8000-00000000000" #n

static void test_rt_claims_share_a_cpu_and_stay_out_of_the_pool(void **st)
{
	struct state *s = open_state();
	struct errbuf why = { "" };
	struct cpuset pool, prepared;

	assert_int_equal(add_rt(s, UID(1), 2, 300, &why), 0);
	assert_int_equal(add_rt(s, UID(2), 2, 300, &why), 0);
	assert_int_equal(add_rt(s, UID(3), 2, 300, &why), 0);
	assert_int_equal(rt_cpu_used_milli(s, 2, &limits), 900);
	assert_int_equal(rt_cpu_used_milli(s, 3, &limits), 0);
	state_shared_pool(s, &pool);
	state_prepared(s, &prepared);
	assert_int_equal(cpuset_count(&pool), 2); /* 0-1 untouched */
	assert_true(cpuset_is_empty(&prepared));
	assert_int_equal(state_claim_count(s), 3);
	/* only on real-time CPUs */
	assert_int_equal(add_rt(s, UID(4), 1, 300, &why), -EINVAL);
	assert_non_null(strstr(why.s, "outside the real-time CPUs"));
	assert_int_equal(state_claim_remove(s, UID(2)), 0);
	assert_int_equal(rt_cpu_used_milli(s, 2, &limits), 600);
	state_free(s);
}

static void test_rt_restart_restores_and_charges_once(void **st)
{
	struct state *s = open_state();
	const struct state_claim *c;
	struct errbuf why = { "" };

	assert_int_equal(add_rt(s, UID(1), 2, 300, &why), 0);
	assert_int_equal(add_rt(s, UID(2), 3, 450, &why), 0);
	state_free(s);
	s = open_state();
	assert_int_equal(state_claim_count(s), 2);
	assert_int_equal(rt_cpu_used_milli(s, 2, &limits), 300);
	assert_int_equal(rt_cpu_used_milli(s, 3, &limits), 450);
	c = state_claim(s, UID(1));
	assert_non_null(c);
	assert_true(c->rt);
	assert_int_equal(c->budget.policy, RT_POLICY_DEADLINE);
	assert_int_equal(c->budget.runtime_ns, 3000000);
	assert_int_equal(c->n_results, 1);
	assert_string_equal(c->results[0].device, "cpurt002");
	assert_int_equal(c->results[0].rt_milli, 300);
	state_free(s);
}

static void test_rt_restart_without_checkpoint_charges_the_whole_cpu(void **st)
{
	struct state *s = open_state();
	struct errbuf why = { "" };
	char path[160];
	const struct state_claim *c;

	assert_int_equal(add_rt(s, UID(1), 2, 300, &why), 0);
	state_free(s);
	snprintf(path, sizeof(path), "%s/checkpoint.json", state_dir);
	assert_int_equal(unlink(path), 0);
	s = open_state();
	c = state_claim(s, UID(1));
	assert_non_null(c);
	assert_true(c->rt);
	assert_int_equal(c->budget.policy, RT_POLICY_NONE);
	assert_int_equal(rt_cpu_used_milli(s, 2, &limits), 900);
	state_free(s);
}

static void test_rt_checkpoint_rejects_malformed_rt_parts(void **st)
{
	static const char *bad[] = {
		"{\"version\":1,\"claims\":[{\"uid\":\"" UID(1) "\",\"namespace\":\"a\",\"name\":"
		"\"b\",\"cpus\":\"2\",\"ownerPod\":\"\",\"ownerContainer\":\"\",\"rt\":1,"
		"\"results\":[]}]}",
		"{\"version\":1,\"claims\":[{\"uid\":\"" UID(1) "\",\"namespace\":\"a\",\"name\":"
		"\"b\",\"cpus\":\"2\",\"ownerPod\":\"\",\"ownerContainer\":\"\",\"rt\":true,"
		"\"realtime\":{\"policy\":\"edf\"},\"results\":[]}]}",
		"{\"version\":1,\"claims\":[{\"uid\":\"" UID(1) "\",\"namespace\":\"a\",\"name\":"
		"\"b\",\"cpus\":\"2\",\"ownerPod\":\"\",\"ownerContainer\":\"\",\"rt\":true,"
		"\"results\":[{\"request\":\"r\",\"device\":\"cpurt002\",\"cpus\":\"2\"}]}]}",
		"{\"version\":1,\"claims\":[{\"uid\":\"" UID(1) "\",\"namespace\":\"a\",\"name\":"
		"\"b\",\"cpus\":\"2\",\"ownerPod\":\"\",\"ownerContainer\":\"\",\"rt\":true,"
		"\"results\":[{\"request\":\"r\",\"device\":\"cpurt002\",\"cpus\":\"2\","
		"\"rtMilli\":0}]}]}",
	};

	for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++) {
		struct errbuf why = { "" };

		if (state_checkpoint_parse(bad[i], strlen(bad[i]), NULL, NULL, &why) != -EPROTO)
			fail_msg("case %zu accepted", i);
		assert_non_null(strstr(why.s, "malformed"));
	}
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_rt_deadline_budget_parses_with_defaults),
		cmocka_unit_test(test_rt_fifo_and_rr_take_a_priority),
		cmocka_unit_test(test_rt_bad_budgets_say_what_is_wrong),
		cmocka_unit_test(test_rt_budget_json_round_trips),
		cmocka_unit_test(test_rt_period_must_be_in_the_kernel_range),
		cmocka_unit_test(test_rt_budget_must_fit_what_the_claim_consumes),
		cmocka_unit_test(test_rt_milli_quantities),
		cmocka_unit_test_setup_teardown(test_rt_claims_share_a_cpu_and_stay_out_of_the_pool,
						setup, teardown),
		cmocka_unit_test_setup_teardown(test_rt_restart_restores_and_charges_once, setup,
						teardown),
		cmocka_unit_test_setup_teardown(test_rt_restart_without_checkpoint_charges_the_whole_cpu,
						setup, teardown),
		cmocka_unit_test(test_rt_checkpoint_rejects_malformed_rt_parts),
	};

	return cmocka_run_group_tests(tests, NULL, NULL);
}
