/* nodemap: the document the daemon builds parses back to what it said (a real
 * state on disk, real claims: an ordinary one, two real-time ones sharing a
 * CPU, one on a CPU gone offline), the picture draws every CPU once with its
 * mark, and every malformed document is refused with a reason. */
#include <errno.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <cmocka.h>
#include <json-c/json.h>

#include "core/nodemap.h"
#include "core/state.h"
#include "host/topo.h"
#include "lib/cpuset.h"
#include "lib/errbuf.h"
#include "testutil.h"

static char root[] = "/tmp/nodemap-test.XXXXXX";

static struct cpuset cs(const char *s)
{
	struct cpuset c;

	assert_int_equal(cpuset_parse(s, &c, NULL), 0);
	return c;
}

static void add(struct state *s, const char *uid, const char *name, const char *cpus, bool rt,
		int64_t rt_milli)
{
	struct cpuset set = cs(cpus);
	struct state_result res = { .request = "cpu", .device = "cpudev", .rt_milli = rt_milli };
	struct state_consumer pod = { .name = "web-0" };
	struct state_claim c = { .ns = "default", .name = name, .rt = rt, .results = &res,
				 .n_results = 1, .consumers = &pod, .n_consumers = 1,
				 .consumers_known = true };
	struct errbuf why = { "" };

	snprintf(c.uid, sizeof(c.uid), "%s", uid);
	snprintf(pod.uid, sizeof(pod.uid), "%s-pod", uid);
	res.cpus = cpuset_view(&set);
	if (rt) {
		c.budget.policy = RT_POLICY_DEADLINE;
		c.budget.runtime_ns = 1000000;
		c.budget.deadline_ns = c.budget.period_ns = 10000000;
	}
	if (state_claim_add(s, &c, &why) < 0)
		fail_msg("%s: %s", uid, why.s);
}

static char *draw(const struct nodemap *m, bool colour)
{
	char *buf = NULL;
	size_t len = 0;
	FILE *f = open_memstream(&buf, &len);

	assert_non_null(f);
	assert_int_equal(nodemap_draw(m, colour, f), 0);
	assert_int_equal(fclose(f), 0);
	return buf;
}

static void test_built_document_parses_back_and_draws_every_cpu(void **st)
{
	/* 2 sockets x 1 NUMA x 4 cores x 2 threads: CPU c and c+8 are siblings. */
	struct topo *t = testutil_topo(2, 1, 4, 2);
	char cdi[300], state[300];
	struct state_opts o = { .cdi_dir = cdi, .state_dir = state, .allocatable = cs("1-7,9-15"),
				.rt_cpus = cs("7,15") };
	struct cpuset online = cs("0-5,7-15"), reserved = cs("0,8");
	struct nodemap_input in = { .node = "worker-1", .topo = t, .online = &online,
				    .reserved = &reserved, .rt_cpus = &o.rt_cpus };
	struct json_object *doc = NULL;
	struct nodemap *m = NULL;
	struct errbuf eb = { "" };
	struct state *s = NULL;
	const char *text;
	char *pic;

	snprintf(cdi, sizeof(cdi), "%s/cdi", root);
	snprintf(state, sizeof(state), "%s/state", root);
	assert_int_equal(state_new(&o, &s), 0);
	assert_int_equal(state_load(s), 0);
	add(s, "u-db", "db", "1,9", false, 0);
	add(s, "u-gone", "gone", "6", false, 0); /* CPU 6 is offline now */
	add(s, "u-rt1", "rt1", "7", true, 300);
	add(s, "u-rt2", "rt2", "7", true, 200);
	in.state = s;

	assert_int_equal(nodemap_build(&in, &doc), 0);
	text = json_object_to_json_string_ext(doc, JSON_C_TO_STRING_PLAIN);
	assert_int_equal(nodemap_parse(text, strlen(text), &m, &eb), 0);
	assert_string_equal(m->node, "worker-1");
	assert_int_equal(m->n_cpus, 16);
	assert_int_equal(m->n_claims, 4);
	for (int i = 0; i < m->n_cpus; i++) {
		const struct nodemap_cpu *c = &m->cpus[i];
		enum nodemap_use want = c->cpu == 0 || c->cpu == 8   ? NODEMAP_RESERVED
					: c->cpu == 1 || c->cpu == 9 ? NODEMAP_CLAIMED
					: c->cpu == 6		     ? NODEMAP_CLAIMED
					: c->cpu == 7 || c->cpu == 15 ? NODEMAP_REALTIME
								     : NODEMAP_SHARED;

		assert_int_equal(c->cpu, i);
		assert_int_equal(c->use, want);
		assert_int_equal(c->online, c->cpu != 6);
		assert_int_equal(c->socket, c->cpu % 8 >= 4);
		assert_int_equal(c->n_claims, c->cpu == 7 ? 2 : (c->cpu == 1 || c->cpu == 9 ||
								  c->cpu == 6));
	}
	for (int i = 0; i < m->n_claims; i++) {
		const struct nodemap_claim *c = &m->claims[i];

		assert_int_equal(c->n_pods, 1);
		assert_string_equal(c->pods[0], "web-0");
		assert_int_equal(c->realtime, !strncmp(c->name, "default/rt", 10));
	}

	pic = draw(m, false);
	/* Held but offline is drawn as such; the real-time CPU with claims gets
	 * the first claim's tag; a bracket per core: 1 and 9 together. */
	assert_non_null(strstr(pic, "node worker-1: 16 CPUs, 15 online · 4 claims · 9 shared · 3 held · 2 reserved · 2 real-time"));
	assert_non_null(strstr(pic, "   6!"));
	assert_non_null(strstr(pic, "[   7c  15~]")); /* rt1 first, then rt2 */
	assert_non_null(strstr(pic, "[   0r   8r]"));
	assert_null(strstr(pic, "\033["));
	for (int cpu = 0; cpu < 16; cpu++) {
		char cell[8];
		const char *p;

		snprintf(cell, sizeof(cell), "%4d", cpu);
		p = strstr(pic, cell);
		assert_non_null(p);
		assert_null(strstr(p + 1, cell)); /* once */
	}
	assert_non_null(strstr(pic, "CPUs 7 (real-time)"));
	free(pic);
	pic = draw(m, true);
	assert_non_null(strstr(pic, "\033["));
	free(pic);

	nodemap_free(m);
	json_object_put(doc);
	state_free(s);
	topo_free(t);
}

static void test_isolated_cpus_are_drawn_apart_from_the_shared_pool(void **st)
{
	struct topo *t = testutil_topo(1, 1, 4, 1);
	char cdi[300], state[300];
	struct state_opts o = { .cdi_dir = cdi, .state_dir = state, .allocatable = cs("0-3"),
				.isolated = cs("2-3") };
	struct cpuset online = cs("0-3");
	struct nodemap_input in = { .node = "worker-2", .topo = t, .online = &online };
	struct json_object *doc = NULL;
	struct nodemap *m = NULL;
	struct errbuf eb = { "" };
	struct state *s = NULL;
	const char *text;
	char *pic;

	snprintf(cdi, sizeof(cdi), "%s/cdi-iso", root);
	snprintf(state, sizeof(state), "%s/state-iso", root);
	assert_int_equal(state_new(&o, &s), 0);
	assert_int_equal(state_load(s), 0);
	add(s, "u-quiet", "quiet", "3", false, 0); /* a claim that asked for one */
	in.state = s;
	assert_int_equal(nodemap_build(&in, &doc), 0);
	text = json_object_to_json_string_ext(doc, JSON_C_TO_STRING_PLAIN);
	assert_int_equal(nodemap_parse(text, strlen(text), &m, &eb), 0);
	assert_int_equal(m->cpus[0].use, NODEMAP_SHARED);
	assert_int_equal(m->cpus[2].use, NODEMAP_ISOLATED);
	assert_int_equal(m->cpus[3].use, NODEMAP_CLAIMED);
	pic = draw(m, false);
	assert_non_null(strstr(pic, "2 shared · 1 held · 1 isolated"));
	assert_non_null(strstr(pic, "   2i"));
	assert_non_null(strstr(pic, "i  isolated, unclaimed"));
	free(pic);
	nodemap_free(m);
	json_object_put(doc);
	state_free(s);
	topo_free(t);
}

static void test_malformed_documents_are_refused_with_a_reason(void **st)
{
	static const struct {
		const char *doc, *why;
	} bad[] = {
		{ "", "JSON ends early" },
		{ "[]", "not a JSON object" },
		{ "{\"kind\":\"Pod\"}", "kind: not NodeMap" },
		{ "{\"kind\":\"NodeMap\",\"claims\":[],\"cpus\":[]}", "nodemap.node: missing" },
		{ "{\"kind\":\"NodeMap\",\"node\":\"n\\u001b[2J\",\"claims\":[],\"cpus\":[]}",
		  "control character" },
		{ "{\"kind\":\"NodeMap\",\"node\":\"n\",\"claims\":{},\"cpus\":[]}",
		  "claims: missing or not an array" },
		{ "{\"kind\":\"NodeMap\",\"node\":\"n\",\"claims\":[1],\"cpus\":[]}",
		  "claims[0]: claim: not an object" },
		{ "{\"kind\":\"NodeMap\",\"node\":\"n\",\"claims\":[{\"name\":\"a\",\"realtime\":"
		  "false,\"pods\":[7]}],\"cpus\":[]}",
		  "claim.pods[]: not a string" },
		{ "{\"kind\":\"NodeMap\",\"node\":\"n\",\"claims\":[],\"cpus\":[{\"cpu\":-1}]}",
		  "cpu.cpu: -1 out of range" },
		{ "{\"kind\":\"NodeMap\",\"node\":\"n\",\"claims\":[],\"cpus\":[{\"cpu\":1,\"socket\""
		  ":0,\"numa\":0,\"l3\":0,\"core\":0,\"online\":true,\"use\":\"mine\",\"claims\":[]}]}",
		  "cpu.use: missing or not one of" },
		{ "{\"kind\":\"NodeMap\",\"node\":\"n\",\"claims\":[],\"cpus\":[{\"cpu\":1,\"socket\""
		  ":0,\"numa\":0,\"l3\":0,\"core\":0,\"online\":true,\"use\":\"claimed\",\"claims\":"
		  "[0]}]}",
		  "cpu 1: claims[0] names no claim" },
		{ "{\"kind\":\"NodeMap\",\"node\":\"n\",\"claims\":[],\"cpus\":[{\"cpu\":1,\"socket\""
		  ":0,\"numa\":0,\"l3\":0,\"core\":0,\"online\":true,\"use\":\"shared\",\"claims\":"
		  "[]},{\"cpu\":1,\"socket\":0,\"numa\":0,\"l3\":0,\"core\":0,\"online\":true,\"use\""
		  ":\"shared\",\"claims\":[]}]}",
		  "CPU 1 listed twice" },
		{ "{\"kind\":\"NodeMap\",\"node\":\"n\",\"claims\":[],\"cpus\":[]} x",
		  "JSON syntax error at offset 52" },
		{ "{\"kind\":\"NodeMap\",\"node\":\"n\",\"claims\":[],\"cpus\":[[[[[[[[]]]]]]]]}",
		  "nested deeper" },
	};

	for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++) {
		struct nodemap *m = (struct nodemap *)0x1;
		struct errbuf eb = { "" };
		int r = nodemap_parse(bad[i].doc, strlen(bad[i].doc), &m, &eb);

		if (r >= 0 || !strstr(eb.s, bad[i].why))
			fail_msg("case %zu: r=%d error '%s', wanted '%s'", i, r, eb.s, bad[i].why);
		assert_ptr_equal(m, (struct nodemap *)0x1); /* *ret untouched */
	}
	/* A NUL inside the bytes. */
	{
		struct nodemap *m = NULL;
		struct errbuf eb = { "" };

		assert_int_equal(nodemap_parse("{\"kind\"\0:1}", 11, &m, &eb), -EINVAL);
		assert_non_null(strstr(eb.s, "NUL byte at offset 7"));
	}
}

static int group_setup(void **state)
{
	return mkdtemp(root) ? 0 : -1;
}

static int group_teardown(void **state)
{
	char cmd[100];

	snprintf(cmd, sizeof(cmd), "rm -rf %s", root);
	return system(cmd) == 0 ? 0 : -1;
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_built_document_parses_back_and_draws_every_cpu),
		cmocka_unit_test(test_isolated_cpus_are_drawn_apart_from_the_shared_pool),
		cmocka_unit_test(test_malformed_documents_are_refused_with_a_reason),
	};

	return cmocka_run_group_tests(tests, group_setup, group_teardown);
}
