/* allocator: kubelet's own test cases replayed exactly (test/data/allocator/
 * kubelet_cases.json, written by gen_kubelet_cases.py), then robustness on the
 * real-machine captures and synthetic machines, and a seeded property test. */
#include <errno.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include <cmocka.h>
#include <dirent.h>
#include <json-c/json.h>

#include "core/allocator.h"
#include "lib/cleanup.h"
#include "lib/cpuset.h"
#include "host/topo.h"
#include "lib/errbuf.h"
#include "host/topo_json.h"

#define CASES_FILE "test/data/allocator/kubelet_cases.json"

/* ---- fixtures ------------------------------------------------------------------------------ */

/* A topology of the fixture file: its view and its table (for core/L3 lookups). */
struct named_topo {
	const char *name;
	struct alloc_topo *t;
	struct alloc_cpu *rows;
	int n;
};

static json_object *cases_root;
static struct named_topo named[64];
static int n_named;

static json_object *get(json_object *o, const char *key)
{
	json_object *v = NULL;

	(void)json_object_object_get_ex(o, key, &v);
	return v;
}

static int get_int(json_object *o, const char *key, int dflt)
{
	json_object *v = get(o, key);

	return v ? json_object_get_int(v) : dflt;
}

static bool get_bool(json_object *o, const char *key)
{
	json_object *v = get(o, key);

	return v && json_object_get_boolean(v);
}

static const char *get_str(json_object *o, const char *key)
{
	json_object *v = get(o, key);

	return v ? json_object_get_string(v) : NULL;
}

static struct cpuset set_of(const char *s)
{
	struct cpuset c;
	struct errbuf why = { "" };

	if (cpuset_parse(s, &c, &why) != 0)
		fail_msg("bad cpuset '%s' in fixture: %s", s, why.s);
	return c;
}

static char *fmt_set(const struct cpuset *s, char *buf, size_t size)
{
	if (cpuset_format(s, buf, size) < 0)
		(void)snprintf(buf, size, "(too long)");
	return buf;
}

static const struct named_topo *topo_named(const char *name)
{
	json_object *tj, *hj, *rows;
	struct named_topo *nt;
	struct alloc_header h;
	struct errbuf why = { "" };

	for (int i = 0; i < n_named; i++)
		if (strcmp(named[i].name, name) == 0)
			return &named[i];
	tj = get(get(cases_root, "topologies"), name);
	if (!tj || n_named >= (int)ARRAY_SIZE(named))
		fail_msg("no topology %s in %s", name, CASES_FILE);
	hj = get(tj, "header");
	rows = get(tj, "cpus");
	h = (struct alloc_header){ .cpus = get_int(hj, "cpus", 0),
				   .cores = get_int(hj, "cores", 0),
				   .sockets = get_int(hj, "sockets", 0),
				   .numa = get_int(hj, "numa", 0),
				   .l3 = get_int(hj, "uncore", 0) };
	nt = &named[n_named];
	nt->name = name;
	nt->n = (int)json_object_array_length(rows);
	nt->rows = calloc((size_t)nt->n, sizeof(*nt->rows));
	assert_non_null(nt->rows);
	for (int i = 0; i < nt->n; i++) {
		json_object *r = json_object_array_get_idx(rows, (size_t)i);
		int v[5];

		for (int j = 0; j < 5; j++)
			v[j] = json_object_get_int(json_object_array_get_idx(r, (size_t)j));
		nt->rows[i] = (struct alloc_cpu){
			.cpu = v[0], .core = v[1], .socket = v[2], .numa = v[3], .l3 = v[4]
		};
	}
	if (alloc_topo_new(nt->rows, nt->n, &h, &nt->t, &why) != 0)
		fail_msg("topology %s: %s", name, why.s);
	n_named++;
	return nt;
}

static int setup_cases(void **state)
{
	const char *dir = getenv("ALLOC_DATA_FILE");

	cases_root = json_object_from_file(dir ? dir : CASES_FILE);
	if (!cases_root) {
		fprintf(stderr, "cannot read %s (run from the repository root)\n", CASES_FILE);
		return -1;
	}
	return 0;
}

static int teardown_cases(void **state)
{
	for (int i = 0; i < n_named; i++) {
		alloc_topo_free(named[i].t);
		free(named[i].rows);
	}
	n_named = 0;
	json_object_put(cases_root);
	cases_root = NULL;
	return 0;
}

/* Mismatches are printed as TAP comments and counted; each group test fails
 * once at the end with the count, so one run shows every divergent case. */
static int mismatches;

static void mismatch(const char *test, const char *fmt, ...) __attribute__((format(printf, 2, 3)));

static void mismatch(const char *test, const char *fmt, ...)
{
	va_list ap;

	printf("# MISMATCH %s: ", test);
	va_start(ap, fmt);
	vprintf(fmt, ap);
	va_end(ap);
	printf("\n");
	mismatches++;
}

static void report(const char *group, int total)
{
	printf("# kubelet %s: %d/%d cases exact\n", group, total - mismatches, total);
	assert_true(total > 0); /* a table that loads nothing proves nothing */
	assert_int_equal(mismatches, 0);
}

/* ---- kubelet's accumulator orders ------------------------------------------------------------ */

static int cmp_int(const void *a, const void *b)
{
	return *(const int *)a - *(const int *)b;
}

static void test_kubelet_free_unit_orders(void **st)
{
	json_object *list = get(cases_root, "free_units");
	int total = (int)json_object_array_length(list);

	mismatches = 0;
	for (int i = 0; i < total; i++) {
		json_object *c = json_object_array_get_idx(list, (size_t)i), *e = get(c, "expect");
		const char *lv = get_str(c, "level");
		enum alloc_level level = strcmp(lv, "core") == 0     ? ALLOC_LEVEL_CORE
					 : strcmp(lv, "socket") == 0 ? ALLOC_LEVEL_SOCKET
					 : strcmp(lv, "numa") == 0   ? ALLOC_LEVEL_NUMA
								     : ALLOC_LEVEL_L3;
		struct cpuset avail = set_of(get_str(c, "available"));
		int got[CPUSET_MAX], n, ne = (int)json_object_array_length(e);
		bool same;

		n = alloc_free_units(topo_named(get_str(c, "topo"))->t, &avail, level, got,
				     CPUSET_MAX);
		if (get_bool(c, "sort"))
			qsort(got, (size_t)n, sizeof(int), cmp_int);
		same = n == ne;
		for (int j = 0; same && j < n; j++)
			same = got[j] ==
			       json_object_get_int(json_object_array_get_idx(e, (size_t)j));
		if (!same) {
			char buf[512] = "";

			for (int j = 0; j < n; j++)
				(void)snprintf(buf + strlen(buf), sizeof(buf) - strlen(buf), "%d ",
					       got[j]);
			mismatch(get_str(c, "test"), "got [%s] want %s", buf,
				 json_object_to_json_string(e));
		}
	}
	report("free unit orders", total);
}

static void test_kubelet_cpu_orders(void **st)
{
	json_object *list = get(cases_root, "cpu_order");
	int total = (int)json_object_array_length(list);

	mismatches = 0;
	for (int i = 0; i < total; i++) {
		json_object *c = json_object_array_get_idx(list, (size_t)i), *e = get(c, "expect");
		struct cpuset avail = set_of(get_str(c, "available"));
		int got[CPUSET_MAX], n, ne = (int)json_object_array_length(e);
		bool same;

		n = alloc_cpu_order(topo_named(get_str(c, "topo"))->t, &avail, false, got,
				    CPUSET_MAX);
		same = n == ne;
		for (int j = 0; same && j < n; j++)
			same = got[j] ==
			       json_object_get_int(json_object_array_get_idx(e, (size_t)j));
		if (!same)
			mismatch(get_str(c, "test"), "order differs from %s",
				 json_object_to_json_string(e));
	}
	report("packed CPU orders", total);
}

/* ---- takeByTopology* ------------------------------------------------------------------------ */

/* Runs the take cases whose test name starts with prefix. */
static void run_take_cases(const char *prefix, const char *group)
{
	json_object *list = get(cases_root, "take");
	int total = 0;

	mismatches = 0;
	for (size_t i = 0; i < json_object_array_length(list); i++) {
		json_object *c = json_object_array_get_idx(list, i);
		const char *test = get_str(c, "test"), *pol = get_str(c, "policy");
		const char *want_err = get_str(c, "error");
		struct alloc_opts o = {
			.policy = strcmp(pol, "distributed") == 0    ? ALLOC_DISTRIBUTED
				  : strcmp(pol, "spread-cores") == 0 ? ALLOC_SPREAD_CORES
								     : ALLOC_PACKED,
			.align_l3 = get_bool(c, "align_l3"),
			.group_size = get_int(c, "group_size", 1),
		};
		struct cpuset avail = set_of(get_str(c, "available")), got;
		struct errbuf why = { "" };
		char a[2048], b[2048];
		int r;

		if (strncmp(test, prefix, strlen(prefix)) != 0)
			continue;
		total++;
		r = alloc_take(topo_named(get_str(c, "topo"))->t, &avail, get_int(c, "count", 0),
			       &o, &got, &why);
		if (want_err) {
			if (r >= 0 || strcmp(why.s, want_err) != 0)
				mismatch(test, "r=%d why='%s' want error '%s'", r, why.s, want_err);
			continue;
		}
		if (r < 0) {
			mismatch(test, "failed: %s", why.s);
			continue;
		}
		{
			struct cpuset want = set_of(get_str(c, "expect"));

			if (!cpuset_equal(&got, &want))
				mismatch(test, "got %s want %s", fmt_set(&got, a, sizeof(a)),
					 fmt_set(&want, b, sizeof(b)));
		}
	}
	report(group, total);
}

static void test_kubelet_numa_packed(void **st)
{
	run_take_cases("TestTakeByTopologyNUMAPacked/", "takeByTopologyNUMAPacked (incl. uncore)");
}

static void test_kubelet_spread_cores(void **st)
{
	run_take_cases("TestTakeByTopologyWithSpreadPhysicalCPUsPreferredOption/",
		       "distribute-cpus-across-cores");
}

static void test_kubelet_numa_distributed(void **st)
{
	run_take_cases("TestTakeByTopologyNUMADistributed/", "takeByTopologyNUMADistributed");
}

/* ---- policy_static: reserved CPUs, SMT checks, hints, containers in sequence ---------------- */

static void prefer_for_hint(const struct named_topo *nt, json_object *hint, bool by_socket,
			    struct cpuset *ret)
{
	bool numa[CPUSET_MAX] = { false }, sock[CPUSET_MAX] = { false };

	cpuset_zero(ret);
	for (size_t i = 0; i < json_object_array_length(hint); i++)
		numa[json_object_get_int(json_object_array_get_idx(hint, i))] = true;
	for (int i = 0; i < nt->n; i++)
		if (numa[nt->rows[i].numa])
			sock[nt->rows[i].socket] = true;
	for (int i = 0; i < nt->n; i++)
		if (by_socket ? sock[nt->rows[i].socket] : numa[nt->rows[i].numa])
			cpuset_set(ret, nt->rows[i].cpu);
}

static void test_kubelet_static_policy(void **st)
{
	json_object *list = get(cases_root, "policy");
	int total = (int)json_object_array_length(list);

	mismatches = 0;
	for (int i = 0; i < total; i++) {
		json_object *c = json_object_array_get_idx(list, (size_t)i);
		json_object *reqs = get(c, "requests"), *hint = get(c, "hint_numa"),
			    *want_l3 = get(c, "expect_l3");
		const char *test = get_str(c, "test"), *want_err = get_str(c, "error");
		const char *want = get_str(c, "expect"), *res = get_str(c, "reserved");
		const struct named_topo *nt = topo_named(get_str(c, "topo"));
		struct alloc_opts o = { .policy = ALLOC_PACKED,
					.align_l3 = get_bool(c, "align_l3") };
		struct cpuset all, reserved, avail = set_of(get_str(c, "default")), first, prefer;
		struct errbuf why = { "" };
		char a[2048], b[2048];
		bool l3_seen[CPUSET_MAX] = { false }, failed = false;
		int r;

		/* NewStaticPolicy: an explicit list, else takeByTopology over all CPUs */
		cpuset_zero(&all);
		for (int j = 0; j < nt->n; j++)
			cpuset_set(&all, nt->rows[j].cpu);
		if (res)
			reserved = set_of(res);
		else if (alloc_take(nt->t, &all, get_int(c, "num_reserved", 0), &o, &reserved,
				    &why) < 0)
			fail_msg("%s: reserving: %s", test, why.s);
		cpuset_andnot(&avail, &avail, &reserved);

		o.full_cores = get_bool(c, "full_cores");
		o.reserved = &reserved;
		if (hint) {
			prefer_for_hint(nt, hint, get_bool(c, "align_by_socket"), &prefer);
			o.prefer = &prefer;
		}
		cpuset_zero(&first);
		for (size_t j = 0; j < json_object_array_length(reqs) && !failed; j++) {
			struct cpuset got;

			r = alloc_take(nt->t, &avail,
				       json_object_get_int(json_object_array_get_idx(reqs, j)), &o,
				       &got, &why);
			if (r < 0) {
				failed = true;
				break;
			}
			if (j == 0)
				first = got;
			cpuset_andnot(&avail, &avail, &got);
			for (int k = 0; k < nt->n; k++)
				if (cpuset_has(&got, nt->rows[k].cpu))
					l3_seen[nt->rows[k].l3] = true;
		}
		if (want_err) {
			if (!failed || strcmp(why.s, want_err) != 0)
				mismatch(test, "why='%s' want error '%s'", failed ? why.s : "",
					 want_err);
			continue;
		}
		if (failed) {
			mismatch(test, "failed: %s", why.s);
			continue;
		}
		if (want) {
			struct cpuset w = set_of(want);

			if (!cpuset_equal(&first, &w))
				mismatch(test, "got %s want %s", fmt_set(&first, a, sizeof(a)),
					 fmt_set(&w, b, sizeof(b)));
		}
		if (want_l3) {
			bool wl3[CPUSET_MAX] = { false }, same = true;

			for (size_t j = 0; j < json_object_array_length(want_l3); j++)
				wl3[json_object_get_int(json_object_array_get_idx(want_l3, j))] =
					true;
			for (int j = 0; j < CPUSET_MAX; j++)
				same = same && wl3[j] == l3_seen[j];
			if (!same)
				mismatch(test, "uncore caches differ from %s",
					 json_object_to_json_string(want_l3));
		}
	}
	report("static policy (policy_static_test.go)", total);
}

/* TestStaticPolicyReuseCPUs / DoNotReuseCPUs: init-container CPUs are offered
 * again to the app container unless the init container keeps running. */
static void test_kubelet_init_container_cpu_reuse(void **st)
{
	const struct named_topo *nt = topo_named("topoSingleSocketHT");
	struct cpuset avail = set_of("0-7"), init, app, want, pool;
	struct errbuf why = { "" };

	/* reusable: the app container may take the init container's CPUs */
	assert_int_equal(alloc_take(nt->t, &avail, 4, NULL, &init, &why), 0);
	want = set_of("0,1,4,5");
	assert_true(cpuset_equal(&init, &want));
	cpuset_andnot(&pool, &avail, &init);
	cpuset_or(&avail, &pool, &init);
	assert_int_equal(alloc_take(nt->t, &avail, 2, NULL, &app, &why), 0);
	want = set_of("0,4");
	assert_true(cpuset_equal(&app, &want));
	want = set_of("2,3,6,7"); /* expCSetAfterAlloc: the pool never gave out more */
	assert_true(cpuset_equal(&pool, &want));

	/* restartable init container: its CPUs stay taken */
	avail = set_of("0-7");
	assert_int_equal(alloc_take(nt->t, &avail, 4, NULL, &init, &why), 0);
	cpuset_andnot(&avail, &avail, &init);
	assert_int_equal(alloc_take(nt->t, &avail, 2, NULL, &app, &why), 0);
	want = set_of("2,6");
	assert_true(cpuset_equal(&app, &want));
	cpuset_andnot(&avail, &avail, &app);
	want = set_of("3,7");
	assert_true(cpuset_equal(&avail, &want));
	printf("# kubelet init container reuse: 2/2 cases exact\n");
}

/* ---- API contract ---------------------------------------------------------------------------- */

static void test_alloc_topo_new_rejects_bad_tables(void **st)
{
	struct alloc_cpu rows[] = { { 0, 0, 0, 0, 0 }, { 1, 0, 0, 0, 0 } };
	struct alloc_header bad = { .cpus = -1 };
	struct alloc_topo *t = NULL;
	struct errbuf why = { "" };

	assert_int_equal(alloc_topo_new(rows, 0, NULL, &t, &why), -EINVAL);
	assert_string_equal(why.s, "no CPUs");
	rows[1].cpu = 0;
	assert_int_equal(alloc_topo_new(rows, 2, NULL, &t, &why), -EINVAL);
	assert_string_equal(why.s, "CPU 0 listed twice");
	rows[1].cpu = CPUSET_MAX;
	assert_int_equal(alloc_topo_new(rows, 2, NULL, &t, &why), -EINVAL);
	assert_string_equal(why.s, "CPU id 8192 out of range 0-8191");
	rows[1] = (struct alloc_cpu){ .cpu = 1, .core = -1 };
	assert_int_equal(alloc_topo_new(rows, 2, NULL, &t, &why), -EINVAL);
	assert_string_equal(why.s, "CPU 1: negative core id -1");
	rows[1].core = 0;
	assert_int_equal(alloc_topo_new(rows, 2, &bad, &t, &why), -EINVAL);
	assert_null(t);
	assert_null(alloc_topo_free(NULL));
}

static void test_alloc_take_rejects_bad_requests_and_option_mixes(void **st)
{
	const struct named_topo *nt = topo_named("topoDualSocketHT");
	struct cpuset avail = set_of("0-11"), got, untouched;
	struct alloc_opts o = { .policy = ALLOC_SPREAD_CORES, .full_cores = true };
	struct errbuf why = { "" };

	cpuset_zero(&got);
	cpuset_set(&got, 99);
	untouched = got;
	assert_int_equal(alloc_take(nt->t, &avail, -1, NULL, &got, &why), -EINVAL);
	assert_int_equal(alloc_take(nt->t, &avail, 13, NULL, &got, &why), -ENOSPC);
	assert_string_equal(
		why.s, "not enough cpus available to satisfy request: requested=13, available=12");
	assert_int_equal(alloc_take(nt->t, &avail, 2, &o, &got, &why), -EINVAL);
	assert_string_equal(why.s, "static policy options full-pcpus-only and "
				 "distribute-cpus-across-cores can not be used at the same time");
	o = (struct alloc_opts){ .policy = ALLOC_DISTRIBUTED, .align_l3 = true };
	assert_int_equal(alloc_take(nt->t, &avail, 2, &o, &got, &why), -EINVAL);
	o = (struct alloc_opts){ .policy = ALLOC_SPREAD_CORES, .align_l3 = true };
	assert_int_equal(alloc_take(nt->t, &avail, 2, &o, &got, &why), -EINVAL);
	o = (struct alloc_opts){ .policy = (enum alloc_policy)7 };
	assert_int_equal(alloc_take(nt->t, &avail, 2, &o, &got, &why), -EINVAL);
	o = (struct alloc_opts){ .policy = ALLOC_DISTRIBUTED, .group_size = -2 };
	assert_int_equal(alloc_take(nt->t, &avail, 2, &o, &got, &why), -EINVAL);
	/* *ret written only on success */
	assert_true(cpuset_equal(&got, &untouched));
	/* CPUs outside the table are ignored, but counted in the error text */
	avail = set_of("0-11,100-107");
	assert_int_equal(alloc_take(nt->t, &avail, 14, NULL, &got, &why), -ENOSPC);
	assert_string_equal(
		why.s, "not enough cpus available to satisfy request: requested=14, available=20");
	assert_int_equal(alloc_take(nt->t, &avail, 12, NULL, &got, &why), 0);
	avail = set_of("0-11");
	assert_true(cpuset_equal(&got, &avail));
	assert_int_equal(alloc_take(nt->t, &avail, 0, NULL, &got, &why), 0);
	assert_true(cpuset_is_empty(&got));
}

/* struct topo's conventions: -1 ids, machine-unique cores, no package at all. */
static void test_alloc_topo_from_topo_reads_missing_ids_as_zero(void **st)
{
	struct topo_cpu cpus[] = {
		{ .cpu = 0, .socket = -1, .numa = -1, .core = 0, .l3 = -1 },
		{ .cpu = 1, .socket = -1, .numa = -1, .core = 0, .l3 = -1 },
		{ .cpu = 2, .socket = -1, .numa = -1, .core = 1, .l3 = -1 },
		{ .cpu = 5, .socket = -1, .numa = -1, .core = 2, .l3 = -1 },
	};
	_cleanup_(topo_freep) struct topo *t = NULL;
	struct alloc_topo *at = NULL;
	const struct alloc_header *h;
	struct cpuset avail = set_of("0-2,5"), got, want;
	struct alloc_opts full = { .full_cores = true };
	struct errbuf why = { "" };

	assert_int_equal(topo_build(cpus, 4, NULL, &t, NULL), 0);
	assert_int_equal(alloc_topo_from_topo(t, &at), 0);
	h = alloc_topo_header(at);
	assert_int_equal(h->cpus, 4);
	assert_int_equal(h->cores, 3);
	assert_int_equal(h->sockets, 1);
	assert_int_equal(h->numa, 1);
	assert_int_equal(h->l3, 1);
	assert_int_equal(alloc_topo_cpus_per_core(at), 1);
	/* kubelet's CPUs per core is 4 / 3 = 1: the single-thread cores 1 and 2 are
	 * the "whole" ones, the SMT pair is not (§1.1) */
	assert_int_equal(alloc_take(at, &avail, 2, NULL, &got, &why), 0);
	want = set_of("2,5");
	assert_true(cpuset_equal(&got, &want));
	assert_int_equal(alloc_take(at, &avail, 4, &full, &got, &why), 0);
	alloc_topo_free(at);
}

/* A header of zeros (nothing known) must not divide by zero anywhere. */
static void test_alloc_take_survives_a_header_of_zeros(void **st)
{
	struct alloc_cpu rows[16];
	struct alloc_header zero = { 0 };
	struct alloc_topo *t = NULL;
	struct cpuset avail = set_of("0-15"), got;
	struct errbuf why = { "" };

	for (int i = 0; i < 16; i++)
		rows[i] = (struct alloc_cpu){
			.cpu = i, .core = i / 2, .socket = i / 8, .numa = i / 4, .l3 = i / 4
		};
	assert_int_equal(alloc_topo_new(rows, 16, &zero, &t, &why), 0);
	for (int pol = 0; pol < 3; pol++)
		for (int n = 0; n <= 16; n++)
			for (int f = 0; f < 4; f++) {
				struct alloc_opts o = {
					.policy = (enum alloc_policy)pol,
					.full_cores = (f & 1) && pol != ALLOC_SPREAD_CORES,
					.align_l3 = (f & 2) && pol == ALLOC_PACKED
				};

				assert_int_equal(alloc_take(t, &avail, n, &o, &got, &why), 0);
				assert_int_equal(cpuset_count(&got), n);
			}
	alloc_topo_free(t);
}

/* ---- robustness ------------------------------------------------------------------------------ */

static uint64_t rng_state;

static uint64_t rng(void)
{
	/* xorshift64*: reproducible across libcs, unlike rand() */
	rng_state ^= rng_state >> 12;
	rng_state ^= rng_state << 25;
	rng_state ^= rng_state >> 27;
	return rng_state * 0x2545F4914F6CDD1DULL;
}

/* Checks the contract of one call and returns its result code. whole: every
 * core touched must be fully in the result (rows give the cores). */
static int take_checked(const struct alloc_topo *t, const struct alloc_cpu *rows, int n,
			const struct cpuset *avail, int count, const struct alloc_opts *o,
			bool whole, const char *what)
{
	struct cpuset got;
	struct errbuf why = { "" };
	int r = alloc_take(t, avail, count, o, &got, &why);

	if (r < 0) {
		if (r != -ENOSPC && r != -EINVAL)
			fail_msg("%s: count %d: unexpected error %d (%s)", what, count, r, why.s);
		if (why.s[0] == '\0')
			fail_msg("%s: count %d: error %d without text", what, count, r);
		return r;
	}
	if (!cpuset_is_subset(&got, avail))
		fail_msg("%s: count %d: result not within available", what, count);
	if (cpuset_count(&got) != count)
		fail_msg("%s: count %d: got %d CPUs", what, count, cpuset_count(&got));
	if (whole)
		for (int i = 0; i < n; i++)
			for (int j = 0; j < n; j++)
				if (rows[i].core == rows[j].core &&
				    cpuset_has(&got, rows[i].cpu) != cpuset_has(&got, rows[j].cpu))
					fail_msg("%s: count %d: core %d split (CPUs %d, %d)", what,
						 count, rows[i].core, rows[i].cpu, rows[j].cpu);
	return r;
}

/* Every policy and option mix kubelet allows, over many available sets and counts. */
static int hammer(const struct alloc_topo *t, const struct alloc_cpu *rows, int n, const char *what,
		  int rounds)
{
	static const struct alloc_opts mixes[] = {
		{ .policy = ALLOC_PACKED },
		{ .policy = ALLOC_PACKED, .align_l3 = true },
		{ .policy = ALLOC_PACKED, .full_cores = true },
		{ .policy = ALLOC_PACKED, .full_cores = true, .align_l3 = true },
		{ .policy = ALLOC_SPREAD_CORES },
		{ .policy = ALLOC_DISTRIBUTED },
		{ .policy = ALLOC_DISTRIBUTED, .full_cores = true },
		{ .policy = ALLOC_DISTRIBUTED, .group_size = 3 },
	};
	struct cpuset all, avail;
	int ok = 0;

	cpuset_zero(&all);
	for (int i = 0; i < n; i++)
		cpuset_set(&all, rows[i].cpu);
	for (int round = 0; round < rounds; round++) {
		int density = (int)(rng() % 100);

		avail = all;
		if (round > 0)
			for (int i = 0; i < n; i++)
				if ((int)(rng() % 100) >= density)
					cpuset_clear(&avail, rows[i].cpu);
		for (size_t m = 0; m < ARRAY_SIZE(mixes); m++) {
			int max = cpuset_count(&avail) + 1;
			int counts[] = {
				0, 1, 2, max / 2, max - 1, max, (int)(rng() % (unsigned)max)
			};

			for (size_t c = 0; c < ARRAY_SIZE(counts); c++)
				ok += take_checked(t, rows, n, &avail, counts[c], &mixes[m], false,
						   what) == 0;
		}
	}
	return ok;
}

/* The real machines of test/data/topologies, through expected.json's
 * per-CPU tables: once with hwloc's unique core numbers, once with the raw
 * sysfs core_id (restarting per socket: kubelet's view on such machines). */
static void test_captured_topologies_keep_the_contract(void **st)
{
	const char *dir = getenv("TOPO_DIR");
	char path[4096];
	json_object *root, *tops;
	int machines = 0, ok = 0;

	(void)snprintf(path, sizeof(path), "%s/expected.json",
		       dir && *dir ? dir : "test/data/topologies");
	root = json_object_from_file(path);
	if (!root)
		fail_msg("cannot read %s: the captures are part of the tree", path);
	tops = get(root, "topologies");
	for (size_t i = 0; i < json_object_array_length(tops); i++) {
		json_object *tj = json_object_array_get_idx(tops, i), *pc = get(tj, "per_cpu");
		int n = (int)json_object_array_length(pc);
		_cleanup_free_ struct alloc_cpu *rows = calloc((size_t)n, sizeof(*rows));

		assert_non_null(rows);
		for (int raw = 0; raw < 2; raw++) {
			struct alloc_topo *t = NULL;
			struct errbuf why = { "" };

			for (int j = 0; j < n; j++) {
				json_object *c = json_object_array_get_idx(pc, (size_t)j);

				rows[j] = (struct alloc_cpu){
					.cpu = get_int(c, "cpu", 0),
					.core = get_int(c, raw ? "core" : "core_logical", 0),
					.socket = get(c, "socket") ? get_int(c, "socket", -1) : -1,
					.numa = get(c, "numa") ? get_int(c, "numa", -1) : -1,
					.l3 = get(c, "l3") ? get_int(c, "l3", -1) : -1,
				};
			}
			if (alloc_topo_new(rows, n, NULL, &t, &why) != 0)
				fail_msg("%s: %s", get_str(tj, "file"), why.s);
			rng_state = 0x9e3779b97f4a7c15ULL + i;
			ok += hammer(t, rows, n, get_str(tj, "file"), 12);
			alloc_topo_free(t);
			machines++;
		}
	}
	printf("# %d capture views, %d successful claims checked\n", machines, ok);
	/* Eleven captures, two views each: a table that loads nothing proves nothing. */
	assert_true(machines >= 22);
	assert_true(ok > 0);
	json_object_put(root);
}

/* The topology JSON fixtures of test/data/topo/ through the real parser and
 * alloc_topo_from_topo(); offline CPUs offered as available are never handed out. */
static void test_topology_json_fixtures_keep_the_contract(void **st)
{
	DIR *d = opendir("test/data/topo");
	struct dirent *e;
	int files = 0, ok = 0;

	if (!d) {
		printf("# skipped: no test/data/topo\n");
		skip();
	}
	while ((e = readdir(d))) {
		_cleanup_(topo_freep) struct topo *t = NULL;
		_cleanup_free_ struct alloc_cpu *rows = NULL;
		struct alloc_topo *at = NULL;
		struct cpuset avail, got;
		char path[512];
		size_t len = strlen(e->d_name);

		if (len < 5 || strcmp(e->d_name + len - 5, ".json") != 0)
			continue;
		(void)snprintf(path, sizeof(path), "test/data/topo/%s", e->d_name);
		if (topo_load_json_file(path, &t, NULL) < 0)
			continue; /* not a topology (or a rejection fixture): topo's tests */
		assert_int_equal(alloc_topo_from_topo(t, &at), 0);
		rows = calloc((size_t)t->n_cpus, sizeof(*rows));
		assert_non_null(rows);
		for (int i = 0; i < t->n_cpus; i++)
			rows[i] = (struct alloc_cpu){ .cpu = t->cpus[i].cpu,
						      .core = t->cpus[i].core };
		rng_state = 0xfeed + (uint64_t)files;
		ok += hammer(at, rows, t->n_cpus, e->d_name, 6);
		cpuset_or(&avail, &t->online, &t->offline);
		assert_int_equal(alloc_take(at, &avail, t->n_cpus, NULL, &got, NULL), 0);
		assert_true(cpuset_equal(&got, &t->online));
		alloc_topo_free(at);
		files++;
	}
	closedir(d);
	printf("# %d topology JSON fixtures, %d successful claims checked\n", files, ok);
	assert_true(files > 0);
}

/* rows of a regular machine: sockets x numa-per-socket x cores-per-numa x smt,
 * siblings numbered N and N + cores (Linux x86 style), l3_per_numa caches. */
static int synth(struct alloc_cpu *rows, int sockets, int numa_per_socket, int cores_per_numa,
		 int smt, int l3_per_numa)
{
	int cores = sockets * numa_per_socket * cores_per_numa, n = 0;

	for (int th = 0; th < smt; th++)
		for (int c = 0; c < cores; c++) {
			int numa = c / cores_per_numa;

			rows[n++] = (struct alloc_cpu){
				.cpu = th * cores + c,
				.core = c,
				.socket = numa / numa_per_socket,
				.numa = numa,
				.l3 = numa * l3_per_numa +
				      (c % cores_per_numa) * l3_per_numa / cores_per_numa,
			};
		}
	return n;
}

static void test_synthetic_big_topologies_keep_the_contract(void **st)
{
	static struct alloc_cpu rows[CPUSET_MAX];
	static const int shapes[][5] = {
		{ 2, 4, 64, 2, 4 },   /* 1024 CPUs, 8 NUMA nodes, SMT-2, 4 L3 per node */
		{ 1, 1, 96, 4, 12 },  /* SMT-4, one node, many small caches */
		{ 8, 8, 16, 1, 1 },   /* 64 NUMA nodes: the distributed search budget */
		{ 2, 1, 2048, 2, 8 }, /* 8192 CPUs: the largest cpuset */
		{ 4, 2, 1, 1, 1 },    /* one CPU per NUMA node */
	};
	int ok = 0;

	for (size_t s = 0; s < ARRAY_SIZE(shapes); s++) {
		const int *sh = shapes[s];
		int n = synth(rows, sh[0], sh[1], sh[2], sh[3], sh[4]);
		struct alloc_topo *t = NULL;
		char what[64];

		assert_int_equal(alloc_topo_new(rows, n, NULL, &t, NULL), 0);
		(void)snprintf(what, sizeof(what), "synthetic %dx%dx%dx%d", sh[0], sh[1], sh[2],
			       sh[3]);
		rng_state = 42 + s;
		ok += hammer(t, rows, n, what, n > 2048 ? 1 : 4);
		alloc_topo_free(t);
	}
	/* uneven: NUMA nodes of 1, 7 and 40 CPUs, a socket with mixed nodes, offline holes */
	{
		int n = 0;
		struct alloc_topo *t = NULL;

		for (int c = 0; c < 96; c += 2) {
			int numa = c < 2 ? 0 : c < 16 ? 1 : 2;

			rows[n++] = (struct alloc_cpu){ .cpu = c,
							.core = c / 4,
							.socket = c < 40 ? 0 : 1,
							.numa = numa,
							.l3 = c % 3 ? -1 : c / 32 };
		}
		assert_int_equal(alloc_topo_new(rows, n, NULL, &t, NULL), 0);
		ok += hammer(t, rows, n, "uneven", 8);
		alloc_topo_free(t);
	}
	printf("# synthetic: %d successful claims checked\n", ok);
}

/* 64 NUMA nodes: kubelet would try C(64, k) combinations; we stop at the budget
 * and pack, quickly, with a valid result. */
static void test_distributed_search_budget_falls_back_to_packed(void **st)
{
	static struct alloc_cpu rows[1024];
	int n = synth(rows, 8, 8, 16, 1, 1);
	struct alloc_topo *t = NULL;
	struct alloc_opts dist = { .policy = ALLOC_DISTRIBUTED };
	struct cpuset avail, got, packed;
	struct errbuf why = { "" };
	clock_t t0;

	assert_int_equal(alloc_topo_new(rows, n, NULL, &t, &why), 0);
	cpuset_zero(&avail);
	for (int i = 0; i < n; i += 1 + (i % 3 == 0)) /* uneven nodes */
		cpuset_set(&avail, rows[i].cpu);
	t0 = clock();
	assert_int_equal(alloc_take(t, &avail, 300, &dist, &got, &why), 0);
	assert_true((double)(clock() - t0) / CLOCKS_PER_SEC < 5.0);
	assert_int_equal(cpuset_count(&got), 300);
	assert_true(cpuset_is_subset(&got, &avail));
	assert_int_equal(alloc_take(t, &avail, 300, NULL, &packed, &why), 0);
	assert_true(cpuset_equal(&got, &packed));
	alloc_topo_free(t);
}

/* Seeded property test on a 2-socket SMT-2 machine (2 x 2 NUMA x 16 cores x 2).
 * ALLOC_SEED overrides the seed to replay a failure. */
static void test_random_claims_on_two_socket_smt2_keep_the_contract(void **st)
{
	static struct alloc_cpu rows[128];
	int n = synth(rows, 2, 2, 16, 2, 2), ok = 0, whole_ok = 0;
	struct alloc_topo *t = NULL;
	const char *seed = getenv("ALLOC_SEED");

	rng_state = seed ? strtoull(seed, NULL, 0) : 0x5eed;
	printf("# seed %#llx\n", (unsigned long long)rng_state);
	assert_int_equal(alloc_topo_new(rows, n, NULL, &t, NULL), 0);
	for (int iter = 0; iter < 4000; iter++) {
		struct cpuset avail, reserved;
		struct alloc_opts o = { .policy = (enum alloc_policy)(rng() % 3) };
		bool whole_cores = rng() % 2;
		int density = (int)(rng() % 101), count;

		cpuset_zero(&avail);
		cpuset_zero(&reserved);
		/* a random pool; with whole_cores it is made of whole cores, the way a
		 * full-pcpus-only node's pool is, minus reserved CPUs' cores */
		for (int c = 0; c < 64; c++) {
			int r = (int)(rng() % 100);

			if (whole_cores && r >= density && r < density + 5) {
				cpuset_set(&reserved, c);
				continue;
			}
			for (int th = 0; th < 2; th++)
				if (whole_cores ? r < density : (int)(rng() % 100) < density)
					cpuset_set(&avail, c + 64 * th);
		}
		o.full_cores = whole_cores && o.policy != ALLOC_SPREAD_CORES;
		o.align_l3 = o.policy == ALLOC_PACKED && rng() % 2;
		o.reserved = &reserved;
		if (o.policy == ALLOC_DISTRIBUTED && !o.full_cores)
			o.group_size = (int)(rng() % 3);
		count = (int)(rng() % (unsigned)(cpuset_count(&avail) + 2));
		if (o.full_cores)
			count &= ~1;
		if (take_checked(t, rows, n, &avail, count, &o, o.full_cores, "random") == 0) {
			ok++;
			whole_ok += o.full_cores;
		} else if (count <= cpuset_count(&avail) && (!o.full_cores || count % 2 == 0)) {
			fail_msg("random: iter %d: count %d of %d refused", iter, count,
				 cpuset_count(&avail));
		}
	}
	printf("# random: %d claims satisfied, %d of them whole-core\n", ok, whole_ok);
	assert_true(ok > 3000);
	assert_true(whole_ok > 1000);
	alloc_topo_free(t);
}

/* ---- mixed nodes: strict_cores and spare_cores (allocator.h) --------------------------------- */

/* CPUs of avail whose sibling (SMT-2 synth: CPU c and c + cores) is not in avail. */
static struct cpuset broken_of(const struct cpuset *avail, int cores)
{
	struct cpuset b;

	cpuset_zero(&b);
	CPUSET_FOREACH(cpu, avail)
	{
		if (!cpuset_has(avail, cpu < cores ? cpu + cores : cpu - cores))
			cpuset_set(&b, cpu);
	}
	return b;
}

/* Two free threads whose siblings other claims hold: kubelet's full-pcpus-only
 * (whose node holds whole cores only) hands them out; strict_cores refuses in
 * kubelet's words, and takes only wholly available cores when there are some. */
static void test_strict_cores_never_shares_a_core(void **st)
{
	static struct alloc_cpu rows[16];
	int n = synth(rows, 1, 1, 8, 2, 1);
	struct alloc_topo *t = NULL;
	struct alloc_opts kubelet = { .full_cores = true, .align_l3 = true };
	struct alloc_opts strict = { .full_cores = true, .align_l3 = true, .strict_cores = true };
	struct cpuset avail = set_of("0,1"), got, want;
	struct errbuf why = { "" };

	assert_int_equal(alloc_topo_new(rows, n, NULL, &t, NULL), 0);
	assert_int_equal(alloc_take(t, &avail, 2, &kubelet, &got, &why), 0);
	assert_true(cpuset_equal(&got, &avail)); /* halves of cores 0 and 1 */
	assert_int_equal(alloc_take(t, &avail, 2, &strict, &got, &why), -ENOSPC);
	assert_string_equal(why.s, "SMT Alignment Error: not enough free physical CPUs: available "
				   "physical CPUs = 0, requested CPUs = 2, CPUs per core = 2");
	/* with a whole core free too, that core and nothing else */
	avail = set_of("0,1,5,13");
	assert_int_equal(alloc_take(t, &avail, 2, &kubelet, &got, &why), 0);
	assert_int_equal(alloc_take(t, &avail, 2, &strict, &got, &why), 0);
	want = set_of("5,13");
	assert_true(cpuset_equal(&got, &want));
	assert_int_equal(alloc_take(t, &avail, 4, &strict, &got, &why), -ENOSPC);
	assert_string_equal(why.s, "SMT Alignment Error: not enough free physical CPUs: available "
				   "physical CPUs = 2, requested CPUs = 4, CPUs per core = 2");
	/* the first SMT check keeps its kubelet text */
	assert_int_equal(alloc_take(t, &avail, 3, &strict, &got, &why), -EINVAL);
	assert_string_equal(why.s,
			    "SMT Alignment Error: requested 3 cpus not multiple cpus per core = 2");
	alloc_topo_free(t);
}

/* A claim without full_cores breaks no wholly free core while a broken core's
 * thread is there: kubelet's L3 rule gives an odd claim the lowest core of the
 * cache and drops a thread of it, and its spread sorter walks the socket with
 * fewer free CPUs first; spare_cores takes the broken cores' threads instead. */
static void test_spare_cores_takes_broken_cores_first(void **st)
{
	static struct alloc_cpu rows[32];
	int n = synth(rows, 1, 1, 8, 2, 1);
	struct alloc_topo *t = NULL;
	struct alloc_opts kubelet = { .align_l3 = true };
	struct alloc_opts spare = { .align_l3 = true, .spare_cores = true };
	/* cores 0-7 are CPUs 0-7 and 8-15; 9 is busy, so 1 is a broken core's thread */
	struct cpuset avail = set_of("0-8,10-15"), got, want = set_of("1");
	struct errbuf why = { "" };

	assert_int_equal(alloc_topo_new(rows, n, NULL, &t, NULL), 0);
	assert_int_equal(alloc_take(t, &avail, 1, &kubelet, &got, &why), 0);
	want = set_of("0"); /* kubelet breaks core 0 */
	assert_true(cpuset_equal(&got, &want));
	want = set_of("1");
	assert_int_equal(alloc_take(t, &avail, 1, &spare, &got, &why), 0);
	assert_true(cpuset_equal(&got, &want));
	/* odd: the broken thread and a whole core; even: whole cores, as kubelet */
	assert_int_equal(alloc_take(t, &avail, 3, &spare, &got, &why), 0);
	assert_int_equal(cpuset_count(&got), 3);
	assert_true(cpuset_has(&got, 1));
	assert_int_equal(alloc_take(t, &avail, 4, &spare, &got, &why), 0);
	assert_int_equal(alloc_take(t, &avail, 4, &kubelet, &want, &why), 0);
	assert_true(cpuset_equal(&got, &want));
	/* with full_cores the option changes nothing */
	spare.full_cores = kubelet.full_cores = true;
	assert_int_equal(alloc_take(t, &avail, 4, &spare, &got, &why), 0);
	assert_int_equal(alloc_take(t, &avail, 4, &kubelet, &want, &why), 0);
	assert_true(cpuset_equal(&got, &want));
	alloc_topo_free(t);

	/* spread: socket 0 (cores 0-7: CPUs 0-7, 16-23) has 12 free CPUs in whole
	 * cores, socket 1 (cores 8-15: 8-15, 24-31) 14 with two broken cores */
	n = synth(rows, 2, 1, 8, 2, 1);
	assert_int_equal(alloc_topo_new(rows, n, NULL, &t, NULL), 0);
	avail = set_of("0-5,16-21,8-15,24-29");
	kubelet = (struct alloc_opts){ .policy = ALLOC_SPREAD_CORES };
	spare = (struct alloc_opts){ .policy = ALLOC_SPREAD_CORES, .spare_cores = true };
	assert_int_equal(alloc_take(t, &avail, 2, &kubelet, &got, &why), 0);
	want = set_of("0-1"); /* kubelet breaks cores 0 and 1 */
	assert_true(cpuset_equal(&got, &want));
	assert_int_equal(alloc_take(t, &avail, 2, &spare, &got, &why), 0);
	want = set_of("14-15");
	assert_true(cpuset_equal(&got, &want));
	alloc_topo_free(t);
}

/* Random pools on a 2-socket SMT-2 machine, every policy: strict_cores never
 * touches a core it does not find wholly available, and refuses only when the
 * whole cores are too few; spare_cores takes the broken threads an odd (or a
 * spread-cores) claim would otherwise break whole cores for. */
static void test_random_mixed_pools_keep_strict_and_spare(void **st)
{
	static struct alloc_cpu rows[128];
	int n = synth(rows, 2, 2, 16, 2, 2), whole_ok = 0, refused = 0, spared = 0;
	struct alloc_topo *t = NULL;

	rng_state = 0xc0de5;
	assert_int_equal(alloc_topo_new(rows, n, NULL, &t, NULL), 0);
	for (int iter = 0; iter < 3000; iter++) {
		struct alloc_opts o = { .policy = (enum alloc_policy)(rng() % 3),
					.strict_cores = true, .spare_cores = true };
		int density = (int)(rng() % 101), count, r;
		struct cpuset avail, broken, got, mine;
		struct errbuf why = { "" };

		cpuset_zero(&avail);
		for (int c = 0; c < 128; c++)
			if ((int)(rng() % 100) < density)
				cpuset_set(&avail, c);
		broken = broken_of(&avail, 64);
		o.full_cores = o.policy != ALLOC_SPREAD_CORES && rng() % 2;
		o.align_l3 = o.policy == ALLOC_PACKED && rng() % 2;
		count = (int)(rng() % (unsigned)(cpuset_count(&avail) + 1));
		if (o.full_cores)
			count &= ~1;
		r = alloc_take(t, &avail, count, &o, &got, &why);
		if (o.full_cores) {
			int whole = cpuset_count(&avail) - cpuset_count(&broken);

			if (r < 0) {
				assert_int_equal(r, -ENOSPC);
				assert_true(count > whole);
				refused++;
				continue;
			}
			cpuset_and(&mine, &got, &broken);
			assert_true(cpuset_is_empty(&mine));
			mine = broken_of(&got, 64); /* whole cores only */
			assert_true(cpuset_is_empty(&mine));
			whole_ok++;
		} else {
			int nb = cpuset_count(&broken);

			int want = o.policy == ALLOC_SPREAD_CORES ? count : count % 2;

			assert_int_equal(r, 0);
			cpuset_and(&mine, &got, &broken);
			assert_true(cpuset_count(&mine) >= (want < nb ? want : nb));
			spared += cpuset_count(&mine) > 0;
		}
		assert_int_equal(cpuset_count(&got), count);
		assert_true(cpuset_is_subset(&got, &avail));
	}
	printf("# mixed: %d whole-core claims placed, %d refused, %d took broken threads\n",
	       whole_ok, refused, spared);
	assert_true(whole_ok > 300 && refused > 50 && spared > 300);
	alloc_topo_free(t);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_kubelet_free_unit_orders),
		cmocka_unit_test(test_strict_cores_never_shares_a_core),
		cmocka_unit_test(test_spare_cores_takes_broken_cores_first),
		cmocka_unit_test(test_random_mixed_pools_keep_strict_and_spare),
		cmocka_unit_test(test_kubelet_cpu_orders),
		cmocka_unit_test(test_kubelet_numa_packed),
		cmocka_unit_test(test_kubelet_spread_cores),
		cmocka_unit_test(test_kubelet_numa_distributed),
		cmocka_unit_test(test_kubelet_static_policy),
		cmocka_unit_test(test_kubelet_init_container_cpu_reuse),
		cmocka_unit_test(test_alloc_topo_new_rejects_bad_tables),
		cmocka_unit_test(test_alloc_take_rejects_bad_requests_and_option_mixes),
		cmocka_unit_test(test_alloc_topo_from_topo_reads_missing_ids_as_zero),
		cmocka_unit_test(test_alloc_take_survives_a_header_of_zeros),
		cmocka_unit_test(test_captured_topologies_keep_the_contract),
		cmocka_unit_test(test_topology_json_fixtures_keep_the_contract),
		cmocka_unit_test(test_synthetic_big_topologies_keep_the_contract),
		cmocka_unit_test(test_distributed_search_budget_falls_back_to_packed),
		cmocka_unit_test(test_random_claims_on_two_socket_smt2_keep_the_contract),
	};

	return cmocka_run_group_tests(tests, setup_cases, teardown_cases);
}
