/* claim: results for us, pool check, consumed capacity, opaque CPUConfig. */
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
#include "lib/cleanup.h"
#include "lib/errbuf.h"

#define UID "6f0c1c4e-0000-4000-8000-000000000001"

static int parse(const char *alloc_json, struct claim_alloc *a, struct errbuf *err)
{
	char buf[4096];
	struct json_object *o;
	int r;

	snprintf(buf, sizeof(buf),
		 "{\"apiVersion\":\"resource.k8s.io/v1\",\"kind\":\"ResourceClaim\","
		 "\"metadata\":{\"name\":\"c\",\"namespace\":\"ns\",\"uid\":\"" UID "\"},"
		 "\"status\":{\"allocation\":%s}}",
		 alloc_json);
	o = json_tokener_parse(buf);
	assert_non_null(o);
	r = claim_parse(o, UID, "dra.cpu", "node-1", a, err);
	json_object_put(o);
	return r;
}

#define RES(req, drv, pool, dev) \
	"{\"request\":\"" req "\",\"driver\":\"" drv "\",\"pool\":\"" pool "\",\"device\":\"" dev "\""

static void test_claim_takes_only_our_results(void **st)
{
	struct claim_alloc a;
	struct errbuf err = { "" };

	assert_int_equal(parse("{\"devices\":{\"results\":["
			       RES("gpu", "gpu.example.com", "node-1", "gpu0") "},"
			       RES("cpu", "dra.cpu", "node-1", "cpudevnuma001")
			       ",\"shareID\":\"a1b2\",\"consumedCapacity\":{\"dra.cpu/cpu\":\"10\"}}"
			       "]}}", &a, &err), 0);
	assert_int_equal(a.n, 1);
	assert_string_equal(a.results[0].request, "cpu");
	assert_string_equal(a.results[0].device, "cpudevnuma001");
	assert_string_equal(a.results[0].share_id, "a1b2");
	assert_string_equal(a.results[0].consumed, "10");
	assert_int_equal(a.results[0].config.policy, CLAIM_POLICY_PACKED);
	assert_true(a.results[0].config.align_l3);
	assert_false(a.results[0].config.full_cores);
}

static void test_claim_without_our_results_is_an_error(void **st)
{
	static const char *const allocs[] = {
		"{\"devices\":{\"results\":[" RES("g", "x.example.com", "n", "d") "}]}}",
		"{\"devices\":{\"results\":[]}}",
		"{}",
	};

	for (size_t i = 0; i < ARRAY_SIZE(allocs); i++) {
		struct claim_alloc a;
		struct errbuf err = { "" };

		assert_int_equal(parse(allocs[i], &a, &err), -EINVAL);
		assert_non_null(strstr(err.s, "no results for driver dra.cpu"));
	}
}

static void test_claim_namespace_check(void **st)
{
	static const char *const ok[] = { "default", "a", "kube-system", "0", "a-0",
					  "abcdefghijklmnopqrstuvwxyz0123456789-abcdefghijklmnopqrstuvwxyz" };
	static const char *const bad[] = {
		"",	   "-a",     "a-",	"A",	      "a.b",	  "a_b",      "a b",
		"a\nb", "a\rb",  "\"a\"", "a/b",	      "..",	  "\xc3\xa9",
		"abcdefghijklmnopqrstuvwxyz0123456789-abcdefghijklmnopqrstuvwxyz0",
	};

	assert_int_equal(strlen(ok[ARRAY_SIZE(ok) - 1]), CLAIM_NAMESPACE_MAX);
	for (size_t i = 0; i < ARRAY_SIZE(ok); i++)
		if (claim_namespace_check(ok[i]) != 0)
			fail_msg("namespace \"%s\" refused", ok[i]);
	for (size_t i = 0; i < ARRAY_SIZE(bad); i++)
		if (claim_namespace_check(bad[i]) != -EINVAL)
			fail_msg("namespace case %zu accepted", i);
}

static void test_claim_name_check(void **st)
{
	static const char *const ok[] = { "db", "a.b", "my-claim-0", "0.0.0", "x-1.y-2.z" };
	static const char *const bad[] = { "",	    ".",    "a.",	  ".a",	 "a..b", "a.-b",
					   "a-.b", "A",    "a_b",	  "a b", "a\n",  "a/b",
					   "a\tb", "%2e",  "claim\x1b[2J" };
	char longest[CLAIM_NAME_MAX + 2];

	for (size_t i = 0; i < ARRAY_SIZE(ok); i++)
		if (claim_name_check(ok[i]) != 0)
			fail_msg("name \"%s\" refused", ok[i]);
	for (size_t i = 0; i < ARRAY_SIZE(bad); i++)
		if (claim_name_check(bad[i]) != -EINVAL)
			fail_msg("name case %zu accepted", i);
	/* 253 is the limit, labels included; 254 is one too many */
	memset(longest, 'a', sizeof(longest));
	for (size_t i = 63; i < CLAIM_NAME_MAX; i += 64)
		longest[i] = '.';
	longest[CLAIM_NAME_MAX] = 0;
	assert_int_equal(claim_name_check(longest), 0);
	longest[CLAIM_NAME_MAX] = 'a';
	longest[CLAIM_NAME_MAX + 1] = 0;
	assert_int_equal(claim_name_check(longest), -EINVAL);
}

static void test_claim_errors(void **st)
{
	static const struct {
		const char *alloc, *why;
	} bad[] = {
		{ "{\"devices\":{\"results\":[" RES("c", "dra.cpu", "node-2", "cpudev000") "}]}}",
		  "not this node's pool \"node-1\"" },
		{ "{\"devices\":{\"results\":[{\"driver\":\"dra.cpu\",\"pool\":\"node-1\","
		  "\"device\":\"x\"}]}}",
		  "without request" },
		{ "{\"devices\":{\"results\":{}}}", "results is not a list" },
		{ "{\"devices\":{\"results\":[" RES("c", "dra.cpu", "node-1", "cpudev000")
		  ",\"consumedCapacity\":{\"dra.cpu/cpu\":{}}}]}}",
		  "is not a quantity" },
		{ "{\"devices\":{\"results\":[" RES("c", "dra.cpu", "node-1", "cpudev000")
		  "}],\"config\":[{\"opaque\":{\"driver\":\"dra.cpu\",\"parameters\":{\"apiVersion\":"
		  "\"dra.cpu/v1alpha1\",\"kind\":\"CPUConfig\",\"policy\":\"random\"}}}]}}",
		  "policy must be packed, spread-cores or distributed" },
		{ "{\"devices\":{\"results\":[" RES("c", "dra.cpu", "node-1", "cpudev000")
		  "}],\"config\":[{\"opaque\":{\"driver\":\"dra.cpu\",\"parameters\":{\"apiVersion\":"
		  "\"dra.cpu/v1alpha1\",\"kind\":\"CPUConfig\",\"fullcores\":true}}}]}}",
		  "unknown field \"fullcores\"" },
		{ "{\"devices\":{\"results\":[" RES("c", "dra.cpu", "node-1", "cpudev000")
		  "}],\"config\":[{\"opaque\":{\"driver\":\"dra.cpu\",\"parameters\":{\"apiVersion\":"
		  "\"dra.cpu/v1alpha1\",\"kind\":\"MemConfig\"}}}]}}",
		  "kind must be \"CPUConfig\", got \"MemConfig\"" },
		{ "{\"devices\":{\"results\":[" RES("c", "dra.cpu", "node-1", "cpudev000")
		  "}],\"config\":[{\"opaque\":{\"driver\":\"dra.cpu\",\"parameters\":{\"apiVersion\":"
		  "\"v1alpha1\",\"kind\":\"CPUConfig\"}}}]}}",
		  "apiVersion must be \"dra.cpu/v1alpha1\"" },
		{ "{\"devices\":{\"results\":[" RES("c", "dra.cpu", "node-1", "cpudev000")
		  "}],\"config\":[{\"opaque\":{\"driver\":\"dra.cpu\",\"parameters\":{\"apiVersion\":"
		  "\"dra.cpu/v1alpha1\",\"kind\":\"CPUConfig\",\"alignL3\":\"yes\"}}}]}}",
		  "alignL3 must be true or false" },
		{ "{\"devices\":{\"results\":[" RES("c", "dra.cpu", "node-1", "cpurt003")
		  ",\"consumedCapacity\":{\"dra.cpu/rtBandwidth\":[1]}}]}}",
		  "consumedCapacity[\"dra.cpu/rtBandwidth\"] is not a quantity" },
		{ "{\"devices\":{\"results\":[" RES("c", "dra.cpu", "node-1", "cpurt003")
		  "}],\"config\":[{\"opaque\":{\"driver\":\"dra.cpu\",\"parameters\":{\"apiVersion\":"
		  "\"dra.cpu/v1alpha1\",\"kind\":\"CPUConfig\",\"realtime\":{\"policy\":\"fifo\"}}}}]}}",
		  "CPUConfig.realtime: fifo needs priority" },
		{ "{\"devices\":{\"results\":[" RES("c", "dra.cpu", "node-1", "cpurt003")
		  "}],\"config\":[{\"opaque\":{\"driver\":\"dra.cpu\",\"parameters\":{\"apiVersion\":"
		  "\"dra.cpu/v1alpha1\",\"kind\":\"CPUConfig\",\"realtime\":true}}}]}}",
		  "CPUConfig.realtime must be an object" },
	};

	for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++) {
		struct claim_alloc a;
		struct errbuf err = { "" };

		assert_int_equal(parse(bad[i].alloc, &a, &err), -EINVAL);
		if (!strstr(err.s, bad[i].why))
			fail_msg("case %zu: '%s' lacks '%s'", i, err.s, bad[i].why);
	}
}

static void test_claim_uid_mismatch_and_unallocated(void **st)
{
	struct json_object *o;
	struct claim_alloc a;
	struct errbuf err = { "" };

	o = json_tokener_parse("{\"metadata\":{\"uid\":\"other\"},\"status\":{\"allocation\":{}}}");
	assert_int_equal(claim_parse(o, UID, "dra.cpu", "node-1", &a, &err), -EINVAL);
	assert_non_null(strstr(err.s, "deleted and recreated"));
	json_object_put(o);
	o = json_tokener_parse("{\"metadata\":{\"uid\":\"" UID "\"},\"status\":{}}");
	assert_int_equal(claim_parse(o, UID, "dra.cpu", "node-1", &a, &err), -EINVAL);
	assert_non_null(strstr(err.s, "not allocated"));
	json_object_put(o);
	o = json_tokener_parse("[1,2]");
	assert_int_equal(claim_parse(o, UID, "dra.cpu", "node-1", &a, &err), -EINVAL);
	json_object_put(o);
}

static void test_claim_config_applies_by_request_and_in_order(void **st)
{
	struct claim_alloc a;
	struct errbuf err = { "" };

	assert_int_equal(
		parse("{\"devices\":{\"results\":[" RES("a", "dra.cpu", "node-1", "cpudevnuma000")
		      "}," RES("b/sub", "dra.cpu", "node-1", "cpudevnuma001")
		      "}],\"config\":["
		      "{\"source\":\"FromClass\",\"opaque\":{\"driver\":\"dra.cpu\",\"parameters\":{"
		      "\"apiVersion\":\"dra.cpu/v1alpha1\",\"kind\":\"CPUConfig\",\"fullCores\":true}}},"
		      "{\"source\":\"FromClaim\",\"requests\":[\"b\"],\"opaque\":{\"driver\":\"dra.cpu\","
		      "\"parameters\":{\"apiVersion\":\"dra.cpu/v1alpha1\",\"kind\":\"CPUConfig\","
		      "\"policy\":\"distributed\",\"alignL3\":false}}},"
		      "{\"requests\":[\"a\"],\"opaque\":{\"driver\":\"other.example.com\","
		      "\"parameters\":{\"anything\":1}}}]}}",
		      &a, &err),
		0);
	assert_int_equal(a.n, 2);
	assert_true(a.results[0].config.full_cores);
	assert_int_equal(a.results[0].config.policy, CLAIM_POLICY_PACKED);
	assert_true(a.results[0].config.align_l3);
	assert_true(a.results[1].config.full_cores);
	assert_int_equal(a.results[1].config.policy, CLAIM_POLICY_DISTRIBUTED);
	assert_false(a.results[1].config.align_l3);
}

static void test_claim_isolated_is_asked_for_and_checked(void **st)
{
	struct claim_alloc a;
	struct errbuf err = { "" };

	/* the class says require, the claim says prefer for b: the claim's wins */
	assert_int_equal(
		parse("{\"devices\":{\"results\":[" RES("a", "dra.cpu", "node-1", "cpuisonuma000")
		      "}," RES("b", "dra.cpu", "node-1", "cpudevnuma000")
		      "}," RES("c", "dra.cpu", "node-1", "cpudevnuma001")
		      "}],\"config\":["
		      "{\"source\":\"FromClass\",\"requests\":[\"a\",\"b\"],\"opaque\":{"
		      "\"driver\":\"dra.cpu\",\"parameters\":{\"apiVersion\":\"dra.cpu/v1alpha1\","
		      "\"kind\":\"CPUConfig\",\"isolated\":\"require\"}}},"
		      "{\"source\":\"FromClaim\",\"requests\":[\"b\"],\"opaque\":{\"driver\":"
		      "\"dra.cpu\",\"parameters\":{\"apiVersion\":\"dra.cpu/v1alpha1\",\"kind\":"
		      "\"CPUConfig\",\"isolated\":\"prefer\"}}}]}}",
		      &a, &err),
		0);
	assert_int_equal(a.results[0].config.isolated, CLAIM_ISOLATED_REQUIRE);
	assert_int_equal(a.results[1].config.isolated, CLAIM_ISOLATED_PREFER);
	assert_int_equal(a.results[2].config.isolated, CLAIM_ISOLATED_AVOID); /* default */
	assert_int_equal(claim_isolation_check(&a.results[0], true, &err), 0);
	assert_int_equal(claim_isolation_check(&a.results[0], false, &err), -EINVAL);
	assert_non_null(strstr(err.s, "isolated: require, but device cpuisonuma000"));
	assert_int_equal(claim_isolation_check(&a.results[1], true, &err), 0);
	assert_int_equal(claim_isolation_check(&a.results[1], false, &err), 0);
	assert_int_equal(claim_isolation_check(&a.results[2], false, &err), 0);
	assert_int_equal(claim_isolation_check(&a.results[2], true, &err), -EINVAL);
	assert_non_null(strstr(err.s, "did not ask for them"));
	/* only the three words */
	assert_int_equal(
		parse("{\"devices\":{\"results\":[" RES("a", "dra.cpu", "node-1", "cpudev000")
		      "}],\"config\":[{\"opaque\":{\"driver\":\"dra.cpu\",\"parameters\":{"
		      "\"apiVersion\":\"dra.cpu/v1alpha1\",\"kind\":\"CPUConfig\","
		      "\"isolated\":true}}}]}}",
		      &a, &err),
		-EINVAL);
	assert_non_null(strstr(err.s, "isolated must be require, prefer or avoid"));
}

/* claim_consumers_parse() over a claim whose status.reservedFor is the given
 * JSON text (NULL: absent). */
static int consumers(const char *reserved, struct claim_consumer **ret, struct errbuf *err)
{
	char buf[65536];
	struct json_object *o;
	int r;

	snprintf(buf, sizeof(buf),
		 "{\"metadata\":{\"name\":\"c\",\"namespace\":\"ns\",\"uid\":\"" UID "\"},"
		 "\"status\":{\"allocation\":{}%s%s}}",
		 reserved ? ",\"reservedFor\":" : "", reserved ? reserved : "");
	o = json_tokener_parse(buf);
	assert_non_null(o);
	r = claim_consumers_parse(o, UID, ret, err);
	json_object_put(o);
	return r;
}

#define POD(uid, name) "{\"resource\":\"pods\",\"name\":\"" name "\",\"uid\":\"" uid "\"}"

static void test_claim_consumers_are_the_pods_it_is_reserved_for(void **st)
{
	struct claim_consumer *v = NULL;
	struct errbuf err = { "" };

	assert_int_equal(consumers("[" POD("aaaa-1", "web-0") ","
				   "{\"apiGroup\":\"example.com\",\"resource\":\"pods\","
				   "\"name\":\"x\",\"uid\":\"bbbb-2\"},"
				   "{\"apiGroup\":\"apps\",\"resource\":\"statefulsets\","
				   "\"name\":\"db\",\"uid\":\"cccc-3\"},"
				   "{\"apiGroup\":\"\",\"resource\":\"pods\",\"name\":\"db.x-1\","
				   "\"uid\":\"dddd-4\"}]",
				   &v, &err),
			 2);
	assert_non_null(v);
	assert_string_equal(v[0].uid, "aaaa-1");
	assert_string_equal(v[0].name, "web-0");
	assert_string_equal(v[1].uid, "dddd-4");
	assert_string_equal(v[1].name, "db.x-1");
	free(v);

	/* none: no list, an empty one, only other resources */
	v = (void *)1;
	assert_int_equal(consumers(NULL, &v, &err), 0);
	assert_null(v);
	v = (void *)1;
	assert_int_equal(consumers("[]", &v, &err), 0);
	assert_null(v);
	v = (void *)1;
	assert_int_equal(consumers("[{\"apiGroup\":\"apps\",\"resource\":\"replicasets\","
				   "\"name\":\"r\",\"uid\":\"u-1\"}]",
				   &v, &err),
			 0);
	assert_null(v);
}

static void test_claim_consumers_bad_input(void **st)
{
	static const struct {
		const char *json, *msg;
	} bad[] = {
		{ "{}", "is not a list" },
		{ "\"pods\"", "is not a list" },
		{ "[1]", "reservedFor[0] is not" },
		{ "[" POD("u-1", "a") ",{\"resource\":\"pods\",\"name\":\"b\"}]",
		  "reservedFor[1] is not" },
		{ "[{\"resource\":\"pods\",\"uid\":\"u-1\"}]", "reservedFor[0] is not" },
		{ "[{\"name\":\"a\",\"uid\":\"u-1\"}]", "reservedFor[0] is not" },
		{ "[{\"resource\":7,\"name\":\"a\",\"uid\":\"u-1\"}]", "reservedFor[0] is not" },
		{ "[{\"apiGroup\":5,\"resource\":\"pods\",\"name\":\"a\",\"uid\":\"u-1\"}]",
		  "reservedFor[0] is not" },
		{ "[" POD("u-1", "Upper") "]", "not a pod's uid and name" },
		{ "[" POD("u-1", "a\\nlevel=error") "]", "not a pod's uid and name" },
		{ "[" POD("u 1", "a") "]", "not a pod's uid and name" },
		{ "[" POD("-u1", "a") "]", "not a pod's uid and name" },
		{ "[" POD("", "a") "]", "not a pod's uid and name" },
		{ "[" POD("u-1", "") "]", "not a pod's uid and name" },
		{ "[" POD("u/../1", "a") "]", "not a pod's uid and name" },
		{ "[" POD("0123456789012345678901234567890123456789012345678901234567890123",
			  "a") "]",
		  "not a pod's uid and name" },
	};
	struct claim_consumer *v = NULL;
	struct errbuf err;
	char many[CLAIM_MAX_CONSUMERS * 64 + 256];
	size_t o = 0;

	for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++) {
		errbuf_clear(&err);
		v = (void *)1;
		assert_int_equal(consumers(bad[i].json, &v, &err), -EINVAL);
		assert_null(v);
		if (!strstr(err.s, bad[i].msg))
			fail_msg("%s: \"%s\" does not say \"%s\"", bad[i].json, err.s, bad[i].msg);
	}
	/* the API's cap, and one over */
	o += (size_t)snprintf(many + o, sizeof(many) - o, "[");
	for (int i = 0; i < CLAIM_MAX_CONSUMERS; i++)
		o += (size_t)snprintf(many + o, sizeof(many) - o, "%s" POD("u-%d", "p%d"),
				      i ? "," : "", i, i);
	assert_true(o + 2 < sizeof(many));
	many[o] = ']';
	many[o + 1] = 0;
	assert_int_equal(consumers(many, &v, &err), CLAIM_MAX_CONSUMERS);
	assert_string_equal(v[CLAIM_MAX_CONSUMERS - 1].name, "p255");
	free(v);
	(void)snprintf(many + o, sizeof(many) - o, "," POD("u-x", "x") "]");
	assert_int_equal(consumers(many, &v, &err), -EINVAL);
	assert_non_null(strstr(err.s, "more than the 256 allowed"));
}

static void test_claim_consumers_of_another_claim_are_refused(void **st)
{
	struct json_object *o = json_tokener_parse(
		"{\"metadata\":{\"uid\":\"other\"},\"status\":{\"reservedFor\":[" POD("u-1", "a") "]}}");
	struct claim_consumer *v = NULL;
	struct errbuf err = { "" };

	assert_non_null(o);
	assert_int_equal(claim_consumers_parse(o, UID, &v, &err), -EINVAL);
	assert_null(v);
	assert_non_null(strstr(err.s, "deleted and recreated"));
	assert_int_equal(claim_consumers_parse(o, NULL, &v, &err), 1);
	free(v);
	json_object_put(o);
}

static void test_claim_realtime_config_and_bandwidth(void **st)
{
	struct claim_alloc a;
	struct errbuf err = { "" };

	assert_int_equal(
		parse("{\"devices\":{\"results\":[" RES("rt", "dra.cpu", "node-1", "cpurt003")
		      ",\"shareID\":\"s1\",\"consumedCapacity\":{\"dra.cpu/rtBandwidth\":\"300m\"}},"
		      RES("other", "dra.cpu", "node-1", "cpudev000") "}],\"config\":["
		      "{\"requests\":[\"rt\"],\"opaque\":{\"driver\":\"dra.cpu\",\"parameters\":{"
		      "\"apiVersion\":\"dra.cpu/v1alpha1\",\"kind\":\"CPUConfig\",\"realtime\":{"
		      "\"policy\":\"deadline\",\"runtimeNs\":2000000,\"deadlineNs\":5000000,"
		      "\"periodNs\":10000000,\"onFailure\":\"warn\"}}}}]}}",
		      &a, &err),
		0);
	assert_int_equal(a.n, 2);
	assert_string_equal(a.results[0].rt_consumed, "300m");
	assert_string_equal(a.results[0].consumed, "");
	assert_true(a.results[0].config.rt_set);
	assert_int_equal(a.results[0].config.rt.policy, RT_POLICY_DEADLINE);
	assert_int_equal(a.results[0].config.rt.deadline_ns, 5000000);
	assert_int_equal(a.results[0].config.rt.on_failure, RT_ON_FAILURE_WARN);
	assert_false(a.results[1].config.rt_set);
	assert_string_equal(a.results[1].rt_consumed, "");
}

#define OVERRIDE(src, reqs, set) \
	"{\"source\":\"" src "\"," reqs "\"opaque\":{\"driver\":\"dra.cpu\",\"parameters\":{" \
	"\"apiVersion\":\"v1alpha1\",\"cpuConfig\":{\"cpuset\":" set "}}}}"
#define TWO_RESULTS                                                               \
	"{\"devices\":{\"results\":[" RES("a", "dra.cpu", "node-1", "cpudevmachine") \
	",\"consumedCapacity\":{\"dra.cpu/cpu\":\"4\"}},"                          \
	RES("b", "dra.cpu", "node-1", "cpudevmachine")                             \
	",\"consumedCapacity\":{\"dra.cpu/cpu\":\"2\"}}],\"config\":["

static void test_claim_cpuset_override_per_request(void **st)
{
	struct claim_alloc a;
	struct errbuf err = { "" };

	/* one override for a, none for b; unknown fields are ignored as the
	 * reference driver ignores them; a CPUConfig still applies beside it */
	assert_int_equal(
		parse(TWO_RESULTS OVERRIDE("FromClaim", "\"requests\":[\"a\"],", "\"4-7\",\"x\":1")
		      ",{\"requests\":[\"a\"],\"opaque\":{\"driver\":\"dra.cpu\",\"parameters\":{"
		      "\"apiVersion\":\"dra.cpu/v1alpha1\",\"kind\":\"CPUConfig\",\"fullCores\":true}}}]}}",
		      &a, &err),
		0);
	assert_int_equal(a.n, 2);
	assert_string_equal(a.results[0].cpuset, "4-7");
	assert_true(a.results[0].config.full_cores);
	assert_string_equal(a.results[1].cpuset, "");
	/* no requests list: applies to every request */
	assert_int_equal(parse(TWO_RESULTS OVERRIDE("FromClaim", "", "\"0-1\"") "]}}", &a, &err),
			 0);
	assert_string_equal(a.results[0].cpuset, "0-1");
	assert_string_equal(a.results[1].cpuset, "0-1");
}

static void test_claim_cpuset_override_errors(void **st)
{
	static const struct {
		const char *config, *why;
	} bad[] = {
		{ OVERRIDE("FromClass", "", "\"0-3\""),
		  "request a: configuration from DeviceClass is not supported" },
		{ OVERRIDE("FromClaim", "\"requests\":[\"a\"],", "\"0-3\"") ","
		  OVERRIDE("FromClaim", "", "\"4-7\""),
		  "request a is targeted by 2 cpuset configurations" },
		{ OVERRIDE("FromClaim", "", "\"\""), "needs cpuConfig.cpuset" },
		{ OVERRIDE("FromClaim", "", "4"), "needs cpuConfig.cpuset" },
		{ OVERRIDE("FromClaim", "", "\"3-1\""), "cpuConfig.cpuset \"3-1\": " },
		{ OVERRIDE("FromClaim", "", "\"0-9999\""), "cpuConfig.cpuset \"0-9999\": " },
		{ "{\"opaque\":{\"driver\":\"dra.cpu\",\"parameters\":{\"apiVersion\":\"v1alpha1\"}}}",
		  "needs cpuConfig.cpuset" },
		{ "{\"opaque\":{\"driver\":\"dra.cpu\",\"parameters\":{\"apiVersion\":\"v1alpha1\","
		  "\"cpuConfig\":[1]}}}",
		  "needs cpuConfig.cpuset" },
		{ "{\"opaque\":{\"driver\":\"dra.cpu\",\"parameters\":{\"apiVersion\":\"v2\","
		  "\"cpuConfig\":{\"cpuset\":\"1\"}}}}",
		  "apiVersion must be" },
	};
	struct claim_alloc a;
	struct errbuf err = { "" };
	char buf[2048];

	for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++) {
		snprintf(buf, sizeof(buf), TWO_RESULTS "%s]}}", bad[i].config);
		err.s[0] = 0;
		assert_int_equal(parse(buf, &a, &err), -EINVAL);
		if (!strstr(err.s, bad[i].why))
			fail_msg("case %zu: '%s' lacks '%s'", i, err.s, bad[i].why);
	}
}

static void test_claim_config_memory_and_shared_pool(void **st)
{
	struct claim_config c = { 0 };
	struct errbuf err = { "" };
	struct json_object *o = json_tokener_parse(
		"{\"apiVersion\":\"dra.cpu/v1alpha1\",\"kind\":\"CPUConfig\",\"memory\":\"local\","
		"\"sharedPool\":true}");

	assert_int_equal(claim_config_parse(o, &c, &err), 0);
	assert_int_equal(c.memory, CLAIM_MEMORY_LOCAL);
	assert_true(c.shared_pool);
	json_object_put(o);
	o = json_tokener_parse("{\"apiVersion\":\"dra.cpu/v1alpha1\",\"kind\":\"CPUConfig\","
			       "\"memory\":\"all\"}");
	assert_int_equal(claim_config_parse(o, &c, &err), 0);
	assert_int_equal(c.memory, CLAIM_MEMORY_ALL);
	assert_true(c.shared_pool); /* a later config sets only what it names */
	json_object_put(o);
	o = json_tokener_parse("{\"apiVersion\":\"dra.cpu/v1alpha1\",\"kind\":\"CPUConfig\","
			       "\"memory\":\"near\"}");
	assert_int_equal(claim_config_parse(o, &c, &err), -EINVAL);
	assert_non_null(strstr(err.s, "memory must be local or all"));
	json_object_put(o);
	o = json_tokener_parse("{\"apiVersion\":\"dra.cpu/v1alpha1\",\"kind\":\"CPUConfig\","
			       "\"sharedPool\":\"yes\"}");
	assert_int_equal(claim_config_parse(o, &c, &err), -EINVAL);
	assert_non_null(strstr(err.s, "sharedPool must be true or false"));
	json_object_put(o);
}

static void test_claim_config_irq(void **st)
{
	static const struct {
		const char *json;
		int r;
		enum claim_irq irq;
	} cases[] = {
		{ "\"irq\":\"isolate\"", 0, CLAIM_IRQ_ISOLATE },
		{ "\"irq\":\"keep\"", 0, CLAIM_IRQ_KEEP },
		{ "\"irq\":\"off\"", -EINVAL, 0 },
		{ "\"irq\":true", -EINVAL, 0 },
		{ "\"irq\":null", -EINVAL, 0 },
	};

	for (size_t i = 0; i < sizeof(cases) / sizeof(cases[0]); i++) {
		struct claim_config c = { 0 };
		struct errbuf err = { "" };
		char buf[256];
		struct json_object *o;

		snprintf(buf, sizeof(buf),
			 "{\"apiVersion\":\"dra.cpu/v1alpha1\",\"kind\":\"CPUConfig\",%s}",
			 cases[i].json);
		o = json_tokener_parse(buf);
		assert_non_null(o);
		assert_int_equal(claim_config_parse(o, &c, &err), cases[i].r);
		if (cases[i].r == 0)
			assert_int_equal(c.irq, cases[i].irq);
		else
			assert_non_null(strstr(err.s, "irq must be isolate or keep"));
		json_object_put(o);
	}
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_claim_takes_only_our_results),
		cmocka_unit_test(test_claim_config_irq),
		cmocka_unit_test(test_claim_without_our_results_is_an_error),
		cmocka_unit_test(test_claim_namespace_check),
		cmocka_unit_test(test_claim_name_check),
		cmocka_unit_test(test_claim_errors),
		cmocka_unit_test(test_claim_uid_mismatch_and_unallocated),
		cmocka_unit_test(test_claim_config_applies_by_request_and_in_order),
		cmocka_unit_test(test_claim_isolated_is_asked_for_and_checked),
		cmocka_unit_test(test_claim_consumers_are_the_pods_it_is_reserved_for),
		cmocka_unit_test(test_claim_consumers_bad_input),
		cmocka_unit_test(test_claim_consumers_of_another_claim_are_refused),
		cmocka_unit_test(test_claim_realtime_config_and_bandwidth),
		cmocka_unit_test(test_claim_cpuset_override_per_request),
		cmocka_unit_test(test_claim_cpuset_override_errors),
		cmocka_unit_test(test_claim_config_memory_and_shared_pool),
	};

	return cmocka_run_group_tests(tests, NULL, NULL);
}
