/* claimstatus: the status.devices entries a prepared claim gets, and the
 * check that the claim already says them (restart: no second write). */
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

#include "core/claim.h"
#include "core/rt.h"
#include "core/state.h"
#include "host/topo.h"
#include "kube/claimstatus.h"
#include "lib/cpuset.h"
#include "testutil.h"

struct fixture {
	struct topo *topo;
	struct claim_alloc alloc;
	struct cpuset a, b, all;
	struct state_result res[2];
	struct state_claim c;
	struct claimstatus_opts o;
};

/* 2 sockets x 1 NUMA node x 4 cores x 2 threads: CPUs 0-3,8-11 on node 0. */
static void setup(struct fixture *f)
{
	memset(f, 0, sizeof(*f));
	f->topo = testutil_topo(2, 1, 4, 2);
	f->alloc.n = 2;
	strcpy(f->alloc.results[0].request, "cpus");
	strcpy(f->alloc.results[0].device, "cpudevnuma000");
	strcpy(f->alloc.results[0].share_id, "11111111-2222-4333-8444-555555555555");
	strcpy(f->alloc.results[1].request, "more");
	strcpy(f->alloc.results[1].device, "cpudevnuma001");
	f->alloc.results[1].config.policy = CLAIM_POLICY_SPREAD_CORES;
	assert_int_equal(cpuset_parse("1-2", &f->a, NULL), 0);
	assert_int_equal(cpuset_parse("4,12", &f->b, NULL), 0);
	cpuset_or(&f->all, &f->a, &f->b);
	f->res[0] = (struct state_result){ .request = "cpus", .device = "cpudevnuma000",
					   .cpus = cpuset_view(&f->a) };
	f->res[1] = (struct state_result){ .request = "more", .device = "cpudevnuma001",
					   .cpus = cpuset_view(&f->b) };
	strcpy(f->c.uid, "c0ffee00-0000-4000-8000-000000000001");
	f->c.ns = "default";
	f->c.name = "db";
	f->c.cpus = cpuset_view(&f->all);
	f->c.n_results = 2;
	f->c.results = f->res;
	f->o = (struct claimstatus_opts){ .driver = "dra.cpu", .pool = "node-1", .topo = f->topo };
}

static void teardown(struct fixture *f)
{
	topo_free(f->topo);
}

static const char *sget(struct json_object *o, const char *k)
{
	struct json_object *v;

	assert_true(json_object_object_get_ex(o, k, &v));
	return json_object_get_string(v);
}

static void test_claimstatus_entries_say_what_was_decided(void **state)
{
	struct fixture f;
	struct json_object *arr = NULL, *e, *d, *conds, *c;

	(void)state;
	setup(&f);
	assert_int_equal(claimstatus_entries(&f.o, &f.alloc, &f.c, &arr), 0);
	assert_int_equal(json_object_array_length(arr), 2);
	e = json_object_array_get_idx(arr, 0);
	assert_string_equal(sget(e, "driver"), "dra.cpu");
	assert_string_equal(sget(e, "pool"), "node-1");
	assert_string_equal(sget(e, "device"), "cpudevnuma000");
	assert_string_equal(sget(e, "shareID"), f.alloc.results[0].share_id);
	assert_true(json_object_object_get_ex(e, "data", &d));
	assert_string_equal(sget(d, "request"), "cpus");
	assert_string_equal(sget(d, "cpus"), "1-2");
	assert_string_equal(sget(d, "numaNodes"), "0");
	assert_string_equal(sget(d, "sockets"), "0");
	assert_string_equal(sget(d, "policy"), "packed");
	assert_true(json_object_object_get_ex(e, "conditions", &conds));
	assert_int_equal(json_object_array_length(conds), 1);
	c = json_object_array_get_idx(conds, 0);
	assert_string_equal(sget(c, "type"), "Ready");
	assert_string_equal(sget(c, "status"), "True");
	assert_string_equal(sget(c, "reason"), "Prepared");
	/* the second result: its own CPUs, two sockets, no shareID */
	e = json_object_array_get_idx(arr, 1);
	assert_false(json_object_object_get_ex(e, "shareID", NULL));
	assert_true(json_object_object_get_ex(e, "data", &d));
	assert_string_equal(sget(d, "cpus"), "4,12");
	assert_string_equal(sget(d, "numaNodes"), "1");
	assert_string_equal(sget(d, "sockets"), "1");
	assert_string_equal(sget(d, "policy"), "spread-cores");
	json_object_put(arr);
	teardown(&f);
}

static void test_claimstatus_realtime_entries_carry_the_budget(void **state)
{
	struct fixture f;
	struct json_object *arr = NULL, *d, *rt;

	(void)state;
	setup(&f);
	f.c.rt = true;
	f.c.budget = (struct rt_budget){ .policy = RT_POLICY_DEADLINE, .runtime_ns = 1000000,
					 .deadline_ns = 10000000, .period_ns = 10000000 };
	assert_int_equal(claimstatus_entries(&f.o, &f.alloc, &f.c, &arr), 0);
	assert_true(json_object_object_get_ex(json_object_array_get_idx(arr, 0), "data", &d));
	assert_string_equal(sget(d, "policy"), rt_policy_name(RT_POLICY_DEADLINE));
	assert_true(json_object_object_get_ex(d, "realtime", &rt));
	assert_true(json_object_is_type(rt, json_type_object));
	json_object_put(arr);
	teardown(&f);
}

/* The claim as the API server would return it after our write. */
static struct json_object *claim_with(struct json_object *entries, const char *other)
{
	struct json_object *claim = json_object_new_object(), *st = json_object_new_object();
	struct json_object *devs = json_object_new_array();

	json_object_object_add(claim, "status", st);
	json_object_object_add(st, "devices", devs);
	for (size_t i = 0; entries && i < json_object_array_length(entries); i++)
		json_object_array_add(devs, json_object_get(json_object_array_get_idx(entries, i)));
	if (other)
		json_object_array_add(devs, json_tokener_parse(other));
	return claim;
}

static void test_claimstatus_is_current_only_when_everything_matches(void **state)
{
	struct fixture f;
	struct json_object *want = NULL, *claim, *one;

	(void)state;
	setup(&f);
	assert_int_equal(claimstatus_entries(&f.o, &f.alloc, &f.c, &want), 0);
	/* ours, plus another driver's entry: current */
	claim = claim_with(want, "{\"driver\":\"gpu.example.com\",\"pool\":\"p\",\"device\":\"g\"}");
	assert_true(claimstatus_is_current("dra.cpu", claim, want));
	json_object_put(claim);
	/* one of ours missing: not current */
	one = json_object_new_array();
	json_object_array_add(one, json_object_get(json_object_array_get_idx(want, 0)));
	claim = claim_with(one, NULL);
	assert_false(claimstatus_is_current("dra.cpu", claim, want));
	json_object_put(claim);
	json_object_put(one);
	/* different CPUs now: not current */
	claim = claim_with(want, NULL);
	f.a = f.b;
	{
		struct json_object *want2 = NULL;

		f.res[0].cpus = cpuset_view(&f.a);
		assert_int_equal(claimstatus_entries(&f.o, &f.alloc, &f.c, &want2), 0);
		assert_false(claimstatus_is_current("dra.cpu", claim, want2));
		json_object_put(want2);
	}
	json_object_put(claim);
	/* an extra entry of ours (a stale device): not current */
	claim = claim_with(want, "{\"driver\":\"dra.cpu\",\"pool\":\"node-1\",\"device\":\"x\"}");
	assert_false(claimstatus_is_current("dra.cpu", claim, want));
	json_object_put(claim);
	json_object_put(want);
	teardown(&f);
}

static void test_claimstatus_is_current_rejects_malformed_claims(void **state)
{
	static const char *const bad[] = {
		"[]", "{}", "{\"status\":[]}", "{\"status\":{\"devices\":{}}}",
		"{\"status\":{\"devices\":[1,\"x\",null]}}",
		"{\"status\":{\"devices\":[{\"driver\":\"dra.cpu\",\"conditions\":[1]}]}}",
		"{\"status\":{\"devices\":[{\"driver\":7}]}}",
	};
	struct json_object *want = json_tokener_parse(
		"[{\"driver\":\"dra.cpu\",\"pool\":\"n\",\"device\":\"d\",\"data\":{}}]");

	(void)state;
	for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++) {
		struct json_object *c = json_tokener_parse(bad[i]);

		assert_false(claimstatus_is_current("dra.cpu", c, want));
		json_object_put(c);
	}
	assert_false(claimstatus_is_current("dra.cpu", NULL, want));
	json_object_put(want);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_claimstatus_entries_say_what_was_decided),
		cmocka_unit_test(test_claimstatus_realtime_entries_carry_the_budget),
		cmocka_unit_test(test_claimstatus_is_current_only_when_everything_matches),
		cmocka_unit_test(test_claimstatus_is_current_rejects_malformed_claims),
	};

	return cmocka_run_group_tests(tests, NULL, NULL);
}
