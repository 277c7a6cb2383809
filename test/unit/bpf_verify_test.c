/* verify (the logic of bpf-verify): owners from flags and owners.json, their
 * place in the cgroup hierarchies, the /proc parsers, the static scan over
 * the fixture tree test/data/verify/proc, event bookkeeping, the verdict and
 * both renderings. No privileges needed: the kernel side is exercised by
 * test/integration/test_bpf_verify.py driving the real binary.
 *
 * The fixture tree (exclusive CPUs 2-3 owned by /k/A in v2, /v1/A in v1):
 *   100 owner /k/A 2-3       101 owner-child /k/A/c 2     (owners: fine)
 *   200 "evil) 1 (x" /k/B 3  (pinned: a violation)
 *   201/{201,202} wide /k/B 0-3 (unconfined, 2 threads, 500 ticks)
 *   300 sshd / 0-1 (fine)    400 ksoftirqd/2 kthread 2 (bound kthread)
 *   401 kworker/u8:0 kthread 0-3 (unconfined kthread)
 *   500 host-pinned /other 2 (pinned; outside --scope /k)
 *   501 sibling /k/AB 2 (pinned: /k/AB is not under /k/A)
 *   600 zombie (empty cgroup: skipped)   700 broken status (unreadable)
 */
#include <errno.h>
#include <limits.h>
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

#include "lib/cpuset.h"
#include "lib/errbuf.h"
#include "pinning/owners.h"
#include "pinning/report.h"
#include "pinning/report_json.h"
#include "pinning/report_text.h"
#include "pinning/scan.h"

#define PROC "test/data/verify/proc"

static struct verify_owners *owners_new(void)
{
	struct verify_owners *o = NULL;

	assert_int_equal(verify_owners_new(&o), 0);
	return o;
}

static struct cpuset cpus(const char *list)
{
	struct cpuset s;

	assert_int_equal(cpuset_parse(list, &s, NULL), 0);
	return s;
}

static void assert_cpus(const struct cpuset *s, const char *list)
{
	struct cpuset want = cpus(list);

	assert_true(cpuset_equal(s, &want));
}

/* Owners of the fixture tree without touching the file system: what
 * verify_owners_resolve() would set. */
static struct verify_owners *fixture_owners(enum cgroup_hier mode, const char *scope)
{
	struct verify_owners *o = owners_new();
	struct errbuf why = { "" };

	assert_int_equal(verify_owners_add_flag(o, "2-3=/sys/fs/cgroup/k/A", &why), 0);
	o->mode = mode;
	o->v[0].path = strdup(mode == CGROUP_V1 ? "/v1/A" : "/k/A");
	o->v[0].cgroup_id = 4242;
	if (scope)
		o->scope_path = strdup(scope);
	return o;
}

/* ---- owners --------------------------------------------------------------------------- */

static void test_verify_exclusive_flag_parses_and_merges(void **st)
{
	_cleanup_(verify_owners_freep) struct verify_owners *o = owners_new();
	struct errbuf why = { "" };

	assert_int_equal(verify_owners_add_flag(o, "2-3=/sys/fs/cgroup/a", &why), 0);
	assert_int_equal(verify_owners_add_flag(o, "4=/sys/fs/cgroup/a//", &why), 0);
	assert_int_equal(verify_owners_add_flag(o, "7=/sys/fs/cgroup/b=c", &why), 0);
	assert_int_equal(o->n, 2);
	assert_string_equal(o->v[0].cgroup, "/sys/fs/cgroup/a");
	assert_cpus(&o->v[0].cpus, "2-4");
	assert_string_equal(o->v[1].cgroup, "/sys/fs/cgroup/b=c"); /* split at the first '=' */
	assert_cpus(&o->exclusive, "2-4,7");
	assert_int_equal(verify_owner_of(o, 4), 0);
	assert_int_equal(verify_owner_of(o, 7), 1);
	assert_int_equal(verify_owner_of(o, 5), -1);
}

static void test_verify_exclusive_flag_rejects_bad_syntax(void **st)
{
	static const struct {
		const char *arg, *why;
	} bad[] = {
		{ "", "expected CPUS=CGROUP_PATH" },
		{ "2-3", "expected CPUS=CGROUP_PATH" },
		{ "=/sys/fs/cgroup/a", "expected CPUS=CGROUP_PATH" },
		{ "2-3=", "expected CPUS=CGROUP_PATH" },
		{ "3-2=/a", "reversed range" },
		{ "x=/a", "is not a CPU list" },
		{ "1,,2=/a", "is not a CPU list" },
		{ "9000=/a", "is not a CPU list" },
		{ "2=relative/path", "absolute directory" },
		{ "3=/b", "CPU 3 is exclusive to both /a and /b" },
	};
	_cleanup_(verify_owners_freep) struct verify_owners *o = owners_new();
	struct errbuf why = { "" };

	assert_int_equal(verify_owners_add_flag(o, "2-3=/a", &why), 0);
	for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++) {
		why.s[0] = 0;
		if (verify_owners_add_flag(o, bad[i].arg, &why) != -EINVAL)
			fail_msg("accepted: %s", bad[i].arg);
		if (!strstr(why.s, bad[i].why))
			fail_msg("%s: why is \"%s\"", bad[i].arg, why.s);
	}
	/* Nothing changed on error. */
	assert_int_equal(o->n, 1);
	assert_cpus(&o->exclusive, "2-3");
}

static void test_verify_exclusive_flag_caps_owner_count(void **st)
{
	_cleanup_(verify_owners_freep) struct verify_owners *o = owners_new();
	struct errbuf why = { "" };
	char arg[64];

	for (int i = 0; i < VERIFY_OWNERS_MAX; i++) {
		snprintf(arg, sizeof(arg), "%d=/c/%d", i, i);
		assert_int_equal(verify_owners_add_flag(o, arg, &why), 0);
	}
	snprintf(arg, sizeof(arg), "%d=/c/x", VERIFY_OWNERS_MAX);
	assert_int_equal(verify_owners_add_flag(o, arg, &why), -E2BIG);
	/* Merging into a known owner is not a new one. */
	snprintf(arg, sizeof(arg), "%d=/c/0", VERIFY_OWNERS_MAX);
	assert_int_equal(verify_owners_add_flag(o, arg, &why), 0);
}

/* What user/nri/pools.c writes: one entry per claim, so one container's cgroup
 * may come twice. */
static void test_verify_owners_json_reads_the_daemon_file(void **st)
{
	static const char doc[] =
		"{\"owners\":[{\"cpus\":\"4-5\",\"cgroup\":\"/sys/fs/cgroup/kubepods/pod1/c1\","
		"\"cgroupId\":123,\"claim\":\"ns/a\",\"claimUID\":\"u1\",\"pod\":\"ns/p\","
		"\"container\":\"app\"},"
		"{\"cpus\":\"6\",\"cgroup\":\"/sys/fs/cgroup/kubepods/pod1/c1\",\"cgroupId\":123,"
		"\"claim\":\"ns/b\",\"pod\":\"ns/p\",\"container\":\"app\"},"
		"{\"cpus\":\"7\",\"cgroup\":\"/sys/fs/cgroup/kubepods/pod2/c\",\"future\":[1,2]}]}\n";
	_cleanup_(verify_owners_freep) struct verify_owners *o = owners_new();
	struct errbuf why = { "" };

	assert_int_equal(verify_owners_add_json(o, doc, strlen(doc), &why), 0);
	assert_int_equal(o->n, 2);
	assert_cpus(&o->v[0].cpus, "4-6");
	assert_int_equal(o->v[0].cgroup_id, 123);
	assert_string_equal(o->v[0].claim, "ns/a,ns/b");
	assert_string_equal(o->v[0].pod, "ns/p");
	assert_string_equal(o->v[0].container, "app");
	assert_int_equal(o->v[1].cgroup_id, 0);
	assert_null(o->v[1].claim);
	assert_cpus(&o->exclusive, "4-7");
}

static void test_verify_owners_json_accepts_empty_list(void **st)
{
	_cleanup_(verify_owners_freep) struct verify_owners *o = owners_new();
	struct errbuf why = { "" };

	assert_int_equal(verify_owners_add_json(o, "{\"owners\":[]}", 13, &why), 0);
	assert_int_equal(o->n, 0);
	assert_true(cpuset_is_empty(&o->exclusive));
	/* The length bounds the input: no NUL needed. */
	assert_int_equal(verify_owners_add_json(o, "{\"owners\":[]}XXXX", 13, &why), 0);
}

static void test_verify_owners_json_rejects_malformed(void **st)
{
	static const struct {
		const char *doc, *why;
		int r;
	} bad[] = {
		{ "", "not JSON", -EPROTO },
		{ "{\"owners\":[", "truncated", -EPROTO },
		{ "{\"owners\":[]} x", "data after", -EPROTO },
		{ "[]", "no \"owners\" array", -EPROTO },
		{ "{\"owners\":{}}", "no \"owners\" array", -EPROTO },
		{ "{\"owners\":[1]}", "owners[0]: not an object", -EPROTO },
		{ "{\"owners\":[{\"cgroup\":\"/a\"}]}", "no \"cpus\"", -EPROTO },
		{ "{\"owners\":[{\"cpus\":4,\"cgroup\":\"/a\"}]}", "cpus: not a string", -EPROTO },
		{ "{\"owners\":[{\"cpus\":\"4-\",\"cgroup\":\"/a\"}]}", "not a CPU list", -EPROTO },
		{ "{\"owners\":[{\"cpus\":\"4\"}]}", "no \"cgroup\"", -EPROTO },
		{ "{\"owners\":[{\"cpus\":\"4\",\"cgroup\":\"a\"}]}", "absolute", -EINVAL },
		{ "{\"owners\":[{\"cpus\":\"\",\"cgroup\":\"/a\"}]}", "empty", -EINVAL },
		{ "{\"owners\":[{\"cpus\":\"4\",\"cgroup\":\"/a\\u0000b\"}]}", "NUL", -EPROTO },
		{ "{\"owners\":[{\"cpus\":\"4\",\"cgroup\":\"/a\",\"cgroupId\":-1}]}", "positive",
		  -EPROTO },
		{ "{\"owners\":[{\"cpus\":\"4\",\"cgroup\":\"/a\",\"cgroupId\":0}]}", "positive",
		  -EPROTO },
		{ "{\"owners\":[{\"cpus\":\"4\",\"cgroup\":\"/a\",\"cgroupId\":\"7\"}]}", "positive",
		  -EPROTO },
		{ "{\"owners\":[{\"cpus\":\"4\",\"cgroup\":\"/a\",\"pod\":3}]}", "pod: not a string",
		  -EPROTO },
		{ "{\"owners\":[{\"cpus\":\"4\",\"cgroup\":\"/a\"},{\"cpus\":\"4\",\"cgroup\":\"/b\"}]}",
		  "owners[1]: CPU 4 is exclusive to both", -EINVAL },
		{ "{\"owners\":[{\"cpus\":\"4\",\"cgroup\":\"/a\",\"cgroupId\":1},"
		  "{\"cpus\":\"5\",\"cgroup\":\"/a\",\"cgroupId\":2}]}",
		  "two cgroup ids", -EINVAL },
		{ "{\"owners\":[[[[[[[[[[1]]]]]]]]]]}", "not JSON", -EPROTO }, /* too deep */
	};
	struct errbuf why = { "" };

	for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++) {
		_cleanup_(verify_owners_freep) struct verify_owners *o = owners_new();
		int r;

		why.s[0] = 0;
		r = verify_owners_add_json(o, bad[i].doc, strlen(bad[i].doc), &why);
		if (r != bad[i].r)
			fail_msg("%s: %d, want %d (%s)", bad[i].doc, r, bad[i].r, why.s);
		if (!strstr(why.s, bad[i].why))
			fail_msg("%s: why is \"%s\"", bad[i].doc, why.s);
	}
}

static void test_verify_owners_json_caps_size_and_entries(void **st)
{
	_cleanup_(verify_owners_freep) struct verify_owners *o = owners_new();
	_cleanup_free_ char *doc = NULL;
	struct errbuf why = { "" };
	size_t len = 0;
	FILE *f = open_memstream(&doc, &len);

	assert_non_null(f);
	fputs("{\"owners\":[", f);
	for (int i = 0; i <= VERIFY_OWNERS_MAX; i++)
		fprintf(f, "%s{\"cpus\":\"%d\",\"cgroup\":\"/c/%d\"}", i ? "," : "", i, i);
	fputs("]}", f);
	fclose(f);
	assert_int_equal(verify_owners_add_json(o, doc, len, &why), -E2BIG);
	assert_int_equal(verify_owners_add_json(o, doc, VERIFY_STATE_MAX + 1, &why), -E2BIG);
}

/* ---- resolving against a fake hierarchy ------------------------------------------------ */

struct tree {
	char dir[64];
	char mountinfo[1024];
};

static void mk(const char *base, const char *rel)
{
	char p[PATH_MAX];

	snprintf(p, sizeof(p), "%s/%s", base, rel);
	assert_int_equal(mkdir(p, 0755), 0);
}

/* <tmp>/v2/{k,k/A,k/A/c,k/B} as a cgroup2 mount, <tmp>/v1/{A} as the
 * cpuset v1 mount rooted at /kubepods, <tmp>/plain outside both. */
static int tree_setup(void **st)
{
	struct tree *t = calloc(1, sizeof(*t));

	snprintf(t->dir, sizeof(t->dir), "/tmp/verify-test.XXXXXX");
	assert_non_null(mkdtemp(t->dir));
	mk(t->dir, "v2");
	mk(t->dir, "v2/k");
	mk(t->dir, "v2/k/A");
	mk(t->dir, "v2/k/A/c");
	mk(t->dir, "v2/k/B");
	mk(t->dir, "v1");
	mk(t->dir, "v1/A");
	mk(t->dir, "plain");
	snprintf(t->mountinfo, sizeof(t->mountinfo),
		 "25 1 0:22 / /proc rw - proc proc rw\n"
		 "30 1 0:26 / %s/v2 rw,nosuid - cgroup2 cgroup2 rw\n"
		 "31 1 0:27 /kubepods %s/v1 rw shared:9 - cgroup cgroup rw,cpu,cpuset\n",
		 t->dir, t->dir);
	*st = t;
	return 0;
}

static int tree_teardown(void **st)
{
	struct tree *t = *st;
	static const char *const dirs[] = { "v2/k/A/c", "v2/k/A", "v2/k/B", "v2/k", "v2",
					    "v1/A",	"v1",	  "plain" };
	char p[PATH_MAX];

	for (size_t i = 0; i < sizeof(dirs) / sizeof(dirs[0]); i++) {
		snprintf(p, sizeof(p), "%s/%s", t->dir, dirs[i]);
		rmdir(p);
	}
	rmdir(t->dir);
	free(t);
	return 0;
}

/* verify_owners_resolve() with the tree's mounts. */
static int resolve(struct verify_owners *o, const struct tree *t, struct errbuf *why)
{
	struct cgroup_mounts m;
	int r;

	assert_int_equal(cgroup_mounts_parse(t->mountinfo, strlen(t->mountinfo), &m), 0);
	r = verify_owners_resolve(o, &m, why);
	cgroup_mounts_done(&m);
	return r;
}

static int resolve_flags(struct tree *t, const char *scope, struct errbuf *why, int n, ...)
{
	_cleanup_(verify_owners_freep) struct verify_owners *o = owners_new();
	va_list ap;
	int r;

	va_start(ap, n);
	for (int i = 0; i < n; i++) {
		char arg[PATH_MAX];
		const char *cpu = va_arg(ap, const char *), *rel = va_arg(ap, const char *);

		snprintf(arg, sizeof(arg), "%s=%s/%s", cpu, t->dir, rel);
		assert_int_equal(verify_owners_add_flag(o, arg, why), 0);
	}
	va_end(ap);
	if (scope) {
		char p[PATH_MAX];

		snprintf(p, sizeof(p), "%s/%s", t->dir, scope);
		assert_int_equal(verify_owners_set_scope(o, p, why), 0);
	}
	r = resolve(o, t, why);
	return r;
}

static void test_verify_resolve_places_owners_in_their_hierarchy(void **st)
{
	struct tree *t = *st;
	_cleanup_(verify_owners_freep) struct verify_owners *o = owners_new();
	struct errbuf why = { "" };
	char arg[PATH_MAX], dir[PATH_MAX];
	struct stat sa;

	snprintf(arg, sizeof(arg), "2=%s/v2/k/A/", t->dir);
	assert_int_equal(verify_owners_add_flag(o, arg, &why), 0);
	snprintf(arg, sizeof(arg), "3=%s/v2/k/A/c/../../B", t->dir);
	assert_int_equal(verify_owners_add_flag(o, arg, &why), 0);
	snprintf(dir, sizeof(dir), "%s/v2/k", t->dir);
	assert_int_equal(verify_owners_set_scope(o, dir, &why), 0);
	assert_int_equal(resolve(o, t, &why), 0);
	assert_int_equal(o->mode, CGROUP_V2);
	snprintf(dir, sizeof(dir), "%s/v2", t->dir);
	assert_string_equal(o->mount, dir);
	assert_string_equal(o->v[0].path, "/k/A");
	assert_string_equal(o->v[1].path, "/k/B"); /* symlinks and dots resolved */
	assert_string_equal(o->scope_path, "/k");
	snprintf(dir, sizeof(dir), "%s/v2/k/A", t->dir);
	assert_int_equal(stat(dir, &sa), 0);
	assert_int_equal(o->v[0].cgroup_id, (uint64_t)sa.st_ino);
}

static void test_verify_resolve_v1_joins_the_mount_root(void **st)
{
	struct tree *t = *st;
	_cleanup_(verify_owners_freep) struct verify_owners *o = owners_new();
	struct errbuf why = { "" };
	char arg[PATH_MAX];

	snprintf(arg, sizeof(arg), "1=%s/v1/A", t->dir);
	assert_int_equal(verify_owners_add_flag(o, arg, &why), 0);
	snprintf(arg, sizeof(arg), "2=%s/v1", t->dir);
	assert_int_equal(verify_owners_add_flag(o, arg, &why), 0);
	assert_int_equal(resolve(o, t, &why), 0);
	assert_int_equal(o->mode, CGROUP_V1);
	/* As /proc/<pid>/cgroup names them: the mount shows /kubepods. */
	assert_string_equal(o->v[0].path, "/kubepods/A");
	assert_string_equal(o->v[1].path, "/kubepods");
}

static void test_verify_resolve_rejects_what_it_cannot_place(void **st)
{
	struct tree *t = *st;
	struct errbuf why = { "" };

	assert_int_equal(resolve_flags(t, NULL, &why, 1, "1", "v2/k/gone"), -ENOENT);
	assert_non_null(strstr(why.s, "does not exist"));
	assert_int_equal(resolve_flags(t, NULL, &why, 1, "1", "plain"), -EINVAL);
	assert_non_null(strstr(why.s, "is not a cgroup"));
	assert_int_equal(resolve_flags(t, NULL, &why, 2, "1", "v2/k/A", "2", "v1/A"), -EINVAL);
	assert_non_null(strstr(why.s, "two hierarchies"));
	assert_int_equal(resolve_flags(t, NULL, &why, 2, "1", "v2/k/A", "2", "v2/k/A/c/.."),
			 -EINVAL);
	assert_non_null(strstr(why.s, "the same cgroup"));
	assert_int_equal(resolve_flags(t, "v1", &why, 1, "1", "v2/k/A"), -EINVAL);
	assert_non_null(strstr(why.s, "--scope"));
	assert_int_equal(resolve_flags(t, "v2/nope", &why, 1, "1", "v2/k/A"), -ENOENT);
}

static void test_verify_resolve_detects_a_stale_state_file(void **st)
{
	struct tree *t = *st;
	_cleanup_(verify_owners_freep) struct verify_owners *o = owners_new();
	struct errbuf why = { "" };
	char doc[PATH_MAX + 128];

	snprintf(doc, sizeof(doc),
		 "{\"owners\":[{\"cpus\":\"1\",\"cgroup\":\"%s/v2/k/A\",\"cgroupId\":1}]}", t->dir);
	assert_int_equal(verify_owners_add_json(o, doc, strlen(doc), &why), 0);
	assert_int_equal(resolve(o, t, &why),
			 -ESTALE);
	assert_non_null(strstr(why.s, "stale"));
}

static void test_verify_check_cpus_names_an_impossible_cpu(void **st)
{
	_cleanup_(verify_owners_freep) struct verify_owners *o = owners_new();
	struct cpuset possible = cpus("0-1");
	struct errbuf why = { "" };

	assert_int_equal(verify_owners_add_flag(o, "1=/a", &why), 0);
	assert_int_equal(verify_owners_check_cpus(o, &possible, &why), 0);
	assert_int_equal(verify_owners_add_flag(o, "5-6=/b", &why), 0);
	assert_int_equal(verify_owners_check_cpus(o, &possible, &why), -EINVAL);
	assert_string_equal(why.s, "CPU 5 does not exist on this node (possible: 0-1)");
}

/* ---- classification and the scan -------------------------------------------------------- */

static void test_verify_classify_by_owner_and_allowed_cpus(void **st)
{
	_cleanup_(verify_owners_freep) struct verify_owners *o = owners_new();
	struct errbuf why = { "" };
	struct cpuset f, a23 = cpus("2-3"), a3 = cpus("3"), a03 = cpus("0-3"), a01 = cpus("0-1"),
			 a45 = cpus("4-5");

	assert_int_equal(verify_owners_add_flag(o, "2-3=/c/A", &why), 0);
	assert_int_equal(verify_owners_add_flag(o, "4=/c/A/inner", &why), 0);
	assert_int_equal(verify_owners_add_flag(o, "5=/c/B", &why), 0);
	o->v[0].path = strdup("/k/A");
	o->v[1].path = strdup("/k/A/inner");
	o->v[2].path = strdup("/k/B");
	assert_int_equal(verify_classify(o, "/k/A", &a23, NULL), VERIFY_FINE);
	assert_int_equal(verify_classify(o, "/k/A/deep/er", &a3, NULL), VERIFY_FINE);
	assert_int_equal(verify_classify(o, "/", &a01, NULL), VERIFY_FINE);
	assert_int_equal(verify_classify(o, "/k/B", &a3, &f), VERIFY_PINNED);
	assert_cpus(&f, "3");
	assert_int_equal(verify_classify(o, "/k/AB", &a3, NULL), VERIFY_PINNED);
	assert_int_equal(verify_classify(o, "/", &a03, &f), VERIFY_UNCONFINED);
	assert_cpus(&f, "2-3");
	/* Nested owners: the inner one may use its parent's CPUs too, and
	 * vice versa the parent is foreign to the inner owner's CPU. */
	assert_int_equal(verify_classify(o, "/k/A/inner", &a23, NULL), VERIFY_FINE);
	assert_int_equal(verify_classify(o, "/k/A", &a45, &f), VERIFY_PINNED);
	assert_cpus(&f, "4-5");
	assert_int_equal(verify_classify(o, "/k/B", &a45, &f), VERIFY_UNCONFINED);
	assert_cpus(&f, "4");
}

static const struct verify_pinned *pinned_of(const struct verify_report *r, int tid)
{
	for (int i = 0; i < r->npinned; i++)
		if (r->pinned[i].tid == tid)
			return &r->pinned[i];
	return NULL;
}

static void check_fixture_scan(enum cgroup_hier mode)
{
	_cleanup_(verify_owners_freep) struct verify_owners *o = fixture_owners(mode, NULL);
	_cleanup_(verify_report_freep) struct verify_report *r = NULL;
	struct verify_tally t;

	assert_int_equal(verify_report_new(o, false, &r), 0);
	assert_int_equal(r->ncpus, 2);
	assert_int_equal(verify_report_scan(r, PROC), 10);
	assert_int_equal(r->unreadable, 1);
	assert_int_equal(r->owner_tasks[0], 2);
	assert_int_equal(r->npinned, 4);
	assert_non_null(pinned_of(r, 200));
	assert_string_equal(pinned_of(r, 200)->comm, "evil) 1 (x");
	assert_false(pinned_of(r, 200)->kthread);
	assert_true(pinned_of(r, 400)->kthread);
	assert_non_null(pinned_of(r, 500));
	assert_non_null(pinned_of(r, 501));
	assert_int_equal(r->unconfined_threads, 2);
	assert_int_equal(r->unconfined_procs, 1);
	assert_int_equal(r->unconfined_kthreads, 1);
	assert_int_equal(r->ntop, 1);
	assert_int_equal(r->top[0].pid, 201);
	assert_int_equal(r->top[0].threads, 2);
	assert_int_equal(r->top[0].ticks, 500);
	assert_string_equal(r->top[0].allowed, "0-3");
	verify_report_tally(r, &t);
	assert_int_equal(t.pinned, 3);
	assert_int_equal(t.kthreads_pinned, 1);
	assert_true(t.violation);
	assert_int_equal(t.exit_code, 1);
}

static void test_verify_scan_finds_pinned_and_unconfined_tasks(void **st)
{
	check_fixture_scan(CGROUP_V2);
	check_fixture_scan(CGROUP_V1);
}

static void test_verify_scan_with_scope_counts_outsiders_apart(void **st)
{
	_cleanup_(verify_owners_freep) struct verify_owners *o =
		fixture_owners(CGROUP_V2, "/k");
	_cleanup_(verify_report_freep) struct verify_report *r = NULL;
	struct verify_tally t;

	assert_int_equal(verify_report_new(o, false, &r), 0);
	assert_int_equal(verify_report_scan(r, PROC), 10);
	assert_null(pinned_of(r, 500)); /* /other */
	assert_int_equal(r->outside_pinned, 1);
	assert_non_null(pinned_of(r, 200));
	assert_non_null(pinned_of(r, 400)); /* kernel threads are never scoped out */
	verify_report_tally(r, &t);
	assert_int_equal(t.pinned, 2);
	assert_int_equal(t.outside_pinned, 1);
}

/* The thread feed without /proc: past VERIFY_PINNED_MAX pinned tasks are
 * counted, not listed, and still fail the verdict; an unconfined process
 * is summed over its threads. */
static void test_verify_threads_beyond_the_list_still_count(void **st)
{
	_cleanup_(verify_owners_freep) struct verify_owners *o = fixture_owners(CGROUP_V2, NULL);
	_cleanup_(verify_report_freep) struct verify_report *r = NULL;
	struct verify_task *t = calloc(1, sizeof(*t));
	struct verify_tally tally;

	assert_non_null(t);
	assert_int_equal(verify_report_new(o, false, &r), 0);
	snprintf(t->cgroup, sizeof(t->cgroup), "/k/B");
	t->allowed = cpus("3");
	for (int i = 0; i < VERIFY_PINNED_MAX + 3; i++) {
		t->pid = t->tid = 1000 + i;
		t->flags = i >= VERIFY_PINNED_MAX + 1 ? PROCFS_PF_KTHREAD : 0;
		assert_int_equal(verify_report_add_thread(r, t), 0);
		assert_int_equal(verify_report_end_process(r), 0);
	}
	assert_int_equal(r->npinned, VERIFY_PINNED_MAX);
	assert_int_equal(r->pinned_untracked[0], 1);
	assert_int_equal(r->pinned_untracked[1], 2);
	t->pid = 7;
	t->allowed = cpus("0-3");
	t->flags = 0;
	for (int i = 0; i < 3; i++) {
		t->tid = 7 + i;
		t->ticks = 10;
		assert_int_equal(verify_report_add_thread(r, t), 0);
	}
	assert_int_equal(verify_report_end_process(r), 0);
	assert_int_equal(r->ntop, 1);
	assert_int_equal(r->top[0].threads, 3);
	assert_int_equal(r->top[0].ticks, 30);
	assert_string_equal(r->top[0].allowed, "0-3");
	verify_report_tally(r, &tally);
	assert_int_equal(tally.pinned, VERIFY_PINNED_MAX + 1);
	assert_int_equal(tally.kthreads_pinned, 2);
	assert_int_equal(r->threads, VERIFY_PINNED_MAX + 6);
	free(t);
}

static void test_verify_scan_fails_on_missing_proc(void **st)
{
	_cleanup_(verify_owners_freep) struct verify_owners *o = fixture_owners(CGROUP_V2, NULL);
	_cleanup_(verify_report_freep) struct verify_report *r = NULL;

	assert_int_equal(verify_report_new(o, false, &r), 0);
	assert_int_equal(verify_report_scan(r, "test/data/verify/no-such-proc"), -ENOENT);
	assert_false(r->scanned);
}

/* ---- events and the verdict ------------------------------------------------------------- */

static struct pinning_event ev(uint32_t cpu, uint32_t pid, uint32_t kind, uint64_t ts,
			       const char *comm)
{
	struct pinning_event e = { .ts_ns = ts, .cpu = cpu, .pid = pid, .tgid = pid, .kind = kind };

	snprintf(e.comm, sizeof(e.comm), "%s", comm);
	return e;
}

static void counters(struct verify_report *r, int cpu, uint64_t user, uint64_t kthread)
{
	struct bpfmon_counters before = { .switches = 5, .violations = { 1, 1, 0 } }, after = before;

	after.switches += 100 + user + kthread;
	after.owner_switches += 100;
	after.violations[PINNING_KIND_USER] += user;
	after.violations[PINNING_KIND_KTHREAD] += kthread;
	after.foreign_ns[PINNING_KIND_USER] += user * 1000;
	verify_report_set_counters(r, cpu, &before, &after);
}

static void test_verify_events_are_counted_per_cpu_and_task(void **st)
{
	_cleanup_(verify_owners_freep) struct verify_owners *o = fixture_owners(CGROUP_V2, NULL);
	_cleanup_(verify_report_freep) struct verify_report *r = NULL;
	struct pinning_event e;
	struct verify_tally t;

	assert_int_equal(verify_report_new(o, false, &r), 0);
	r->t0_ns = 1000000000;
	r->watched = true;
	r->events = true;
	r->duration_s = 1;
	r->t1_ns = 2000000000;
	e = ev(2, 77, PINNING_KIND_USER, 999999999, "early");
	assert_int_equal(verify_report_add_event(r, &e, "/x"), 0); /* before the window */
	e = ev(2, 77, PINNING_KIND_USER, 2000000001, "late");
	assert_int_equal(verify_report_add_event(r, &e, "/x"), 0); /* after it */
	e = ev(0, 77, PINNING_KIND_USER, 1100000000, "shared");
	assert_int_equal(verify_report_add_event(r, &e, "/x"), 0); /* not exclusive */
	e = ev(2, 78, PINNING_KIND_KTHREAD, 1100000000, "ksoftirqd/2");
	assert_int_equal(verify_report_add_event(r, &e, "/"), 0); /* never sent */
	assert_int_equal(r->nseen, 0);
	for (int i = 0; i < 3; i++) {
		e = ev(2, 77, PINNING_KIND_USER, 1200000000 + (uint64_t)i * 100000000,
		       i < 2 ? "intruder" : "renamed");
		assert_int_equal(verify_report_add_event(r, &e, "/k/B"), 0);
	}
	e = ev(3, 77, PINNING_KIND_USER, 1300000000, "intruder");
	assert_int_equal(verify_report_add_event(r, &e, NULL), 0);
	e = ev(3, 15, PINNING_KIND_KTHREAD_UNBOUND, 1300000000, "rcu_preempt");
	assert_int_equal(verify_report_add_event(r, &e, "/"), 0);
	assert_int_equal(r->nseen, 3);
	assert_int_equal(r->seen[0].switches, 3);
	assert_int_equal(r->seen[0].first_ns, 200000000);
	assert_int_equal(r->seen[0].last_ns, 400000000);
	assert_string_equal(r->seen[0].comm, "renamed");
	assert_string_equal(r->seen[0].cgroup, "/k/B");
	assert_null(r->seen[1].cgroup);
	counters(r, 2, 3, 10);
	counters(r, 3, 9, 0);
	r->cpus[1].c.events_ratelimited = 8; /* what the kernel did not send */
	verify_report_tally(r, &t);
	assert_int_equal(t.running, 12);
	assert_int_equal(t.running_tasks, 2);
	assert_int_equal(t.unattributed, 8);
	assert_int_equal(t.kthread_switches, 10);
	assert_int_equal(t.kthreads_named, 1);
	assert_false(t.incomplete); /* no scope: the kernel's count decides */
	assert_int_equal(t.exit_code, 1);
}

static void test_verify_kthreads_fail_only_when_strict(void **st)
{
	_cleanup_(verify_owners_freep) struct verify_owners *o = fixture_owners(CGROUP_V2, NULL);
	struct verify_tally t;

	for (int strict = 0; strict < 2; strict++) {
		_cleanup_(verify_report_freep) struct verify_report *r = NULL;
		struct pinning_event e = ev(2, 15, PINNING_KIND_KTHREAD_UNBOUND, 5, "rcu_preempt");

		assert_int_equal(verify_report_new(o, strict, &r), 0);
		r->watched = true;
		counters(r, 2, 0, 40);
		counters(r, 3, 0, 0);
		assert_int_equal(verify_report_add_event(r, &e, "/"), 0);
		verify_report_tally(r, &t);
		assert_int_equal(t.kthread_switches, 40);
		assert_int_equal(t.violation, strict);
		assert_int_equal(t.exit_code, strict);
	}
}

static void test_verify_scope_forgives_outsiders_but_not_unnamed(void **st)
{
	_cleanup_(verify_owners_freep) struct verify_owners *o =
		fixture_owners(CGROUP_V2, "/k");
	_cleanup_(verify_report_freep) struct verify_report *r = NULL;
	struct pinning_event e = ev(2, 300, PINNING_KIND_USER, 10, "sshd");
	struct verify_tally t;

	assert_int_equal(verify_report_new(o, false, &r), 0);
	r->watched = true;
	r->events = true;
	assert_int_equal(verify_report_add_event(r, &e, "/system.slice/sshd"), 0);
	assert_int_equal(verify_report_add_event(r, &e, "/system.slice/sshd"), 0);
	counters(r, 2, 2, 0);
	counters(r, 3, 0, 0);
	verify_report_tally(r, &t);
	assert_true(r->seen[0].outside);
	assert_int_equal(t.outside_switches, 2);
	assert_int_equal(t.outside_tasks, 1);
	assert_int_equal(t.running, 0);
	assert_int_equal(t.exit_code, 0);
	/* A switch-in no event named may have been inside: not clean. */
	counters(r, 3, 1, 0);
	r->cpus[1].c.events_dropped = 1;
	verify_report_tally(r, &t);
	assert_true(t.incomplete);
	assert_false(t.violation);
	assert_int_equal(t.exit_code, 2);
	/* A task seen outside, then inside: inside from then on, with the
	 * cgroup it had inside; back outside changes neither. */
	e = ev(2, 302, PINNING_KIND_USER, 10, "mover");
	assert_int_equal(verify_report_add_event(r, &e, "/"), 0);
	assert_true(r->seen[1].outside);
	assert_int_equal(verify_report_add_event(r, &e, "/k/B"), 0);
	assert_int_equal(verify_report_add_event(r, &e, "/elsewhere"), 0);
	assert_false(r->seen[1].outside);
	assert_string_equal(r->seen[1].cgroup, "/k/B");
	assert_int_equal(r->seen[1].switches, 3);
	counters(r, 2, 5, 0);
	verify_report_tally(r, &t);
	assert_int_equal(t.running_tasks, 1);
	assert_int_equal(t.exit_code, 1);
	counters(r, 2, 2, 0);
	r->cpus[1].c.events_dropped = 1;
	/* An unknown cgroup counts as inside. */
	e = ev(3, 301, PINNING_KIND_USER, 10, "gone");
	assert_int_equal(verify_report_add_event(r, &e, NULL), 0);
	verify_report_tally(r, &t);
	assert_int_equal(t.running_tasks, 2);
	assert_int_equal(t.exit_code, 1);
}

static void test_verify_without_events_scope_is_incomplete(void **st)
{
	_cleanup_(verify_owners_freep) struct verify_owners *o =
		fixture_owners(CGROUP_V2, "/k");
	_cleanup_(verify_report_freep) struct verify_report *r = NULL;
	struct verify_tally t;

	assert_int_equal(verify_report_new(o, false, &r), 0);
	r->watched = true; /* r->events false: a kernel without ring buffers */
	counters(r, 2, 4, 0);
	counters(r, 3, 0, 0);
	verify_report_tally(r, &t);
	assert_int_equal(t.unattributed, 4);
	assert_int_equal(t.exit_code, 2);
	/* Without a scope the counters alone decide. */
	free(o->scope_path);
	o->scope_path = NULL;
	verify_report_tally(r, &t);
	assert_int_equal(t.running, 4);
	assert_int_equal(t.exit_code, 1);
}

static void test_verify_seen_table_full_counts_the_rest(void **st)
{
	_cleanup_(verify_owners_freep) struct verify_owners *o = fixture_owners(CGROUP_V2, NULL);
	_cleanup_(verify_report_freep) struct verify_report *r = NULL;

	assert_int_equal(verify_report_new(o, false, &r), 0);
	for (uint32_t pid = 1; pid <= VERIFY_SEEN_MAX + 10; pid++) {
		struct pinning_event e = ev(2 + pid % 2, pid, PINNING_KIND_USER, 1, "many");

		assert_int_equal(verify_report_add_event(r, &e, "/x"), 0);
	}
	assert_int_equal(r->nseen, VERIFY_SEEN_MAX);
	assert_int_equal(r->seen_untracked, 10);
	/* Known pairs still count once the table is full. */
	{
		struct pinning_event e = ev(3, 1, PINNING_KIND_USER, 2, "many");

		assert_int_equal(verify_report_add_event(r, &e, "/x"), 0);
		assert_int_equal(r->seen[0].switches, 2);
	}
}

/* ---- rendering -------------------------------------------------------------------------- */

static struct verify_report *rendered_fixture(struct verify_owners *o)
{
	struct verify_report *r = NULL;
	struct pinning_event e = ev(3, 4242, PINNING_KIND_USER, 1500, "dra-intruder");

	assert_int_equal(verify_report_new(o, false, &r), 0);
	r->source = "--exclusive";
	r->watched = true;
	r->events = true;
	r->duration_s = 2;
	r->t0_ns = 1000;
	assert_int_equal(verify_report_add_event(r, &e, "/k/B"), 0);
	counters(r, 2, 0, 7);
	counters(r, 3, 1, 0);
	assert_int_equal(verify_report_scan(r, PROC), 10);
	return r;
}

static void test_verify_json_carries_the_verdict_and_the_offenders(void **st)
{
	_cleanup_(verify_owners_freep) struct verify_owners *o = fixture_owners(CGROUP_V2, NULL);
	_cleanup_(verify_report_freep) struct verify_report *r = rendered_fixture(o);
	struct json_object *j = NULL, *back, *v, *cpu, *arr, *x;
	const char *text;

	assert_int_equal(verify_report_json(r, &j), 0);
	text = json_object_to_json_string(j);
	back = json_tokener_parse(text);
	assert_non_null(back);
	assert_true(json_object_object_get_ex(back, "verdict", &v));
	assert_string_equal(json_object_get_string(v), "violation");
	assert_true(json_object_object_get_ex(back, "exitCode", &v));
	assert_int_equal(json_object_get_int(v), 1);
	assert_true(json_object_object_get_ex(back, "exclusiveCpus", &v));
	assert_string_equal(json_object_get_string(v), "2-3");
	assert_true(json_object_object_get_ex(back, "cpus", &arr));
	assert_int_equal(json_object_array_length(arr), 2);
	cpu = json_object_array_get_idx(arr, 1);
	assert_true(json_object_object_get_ex(cpu, "cpu", &v));
	assert_int_equal(json_object_get_int(v), 3);
	assert_true(json_object_object_get_ex(cpu, "ran", &arr));
	assert_int_equal(json_object_array_length(arr), 1);
	x = json_object_array_get_idx(arr, 0);
	assert_true(json_object_object_get_ex(x, "pid", &v));
	assert_int_equal(json_object_get_int(v), 4242);
	assert_true(json_object_object_get_ex(x, "comm", &v));
	assert_string_equal(json_object_get_string(v), "dra-intruder");
	assert_true(json_object_object_get_ex(cpu, "pinned", &arr));
	assert_int_equal(json_object_array_length(arr), 1); /* 200 "evil) 1 (x" on 3 */
	assert_true(json_object_object_get_ex(cpu, "foreign", &v));
	assert_true(json_object_object_get_ex(v, "user", &v));
	assert_true(json_object_object_get_ex(v, "switches", &v));
	assert_int_equal(json_object_get_int(v), 1);
	assert_true(json_object_object_get_ex(back, "unconfined", &v));
	assert_true(json_object_object_get_ex(v, "processes", &v));
	assert_int_equal(json_object_get_int(v), 1);
	json_object_put(back);
	json_object_put(j);
}

static void test_verify_print_ends_with_the_verdict(void **st)
{
	_cleanup_(verify_owners_freep) struct verify_owners *o = fixture_owners(CGROUP_V2, NULL);
	_cleanup_(verify_report_freep) struct verify_report *r = rendered_fixture(o);
	_cleanup_(verify_owners_freep) struct verify_owners *none = owners_new();
	_cleanup_(verify_report_freep) struct verify_report *empty = NULL;
	char *text = NULL, *last;
	size_t len = 0;
	FILE *f = open_memstream(&text, &len);

	assert_non_null(f);
	verify_report_print(r, f);
	fclose(f);
	assert_non_null(strstr(text, "CPU 3: owner /k/A (cgroup id 4242, 2 threads in it)"));
	assert_non_null(strstr(text, "4242     4242     dra-intruder"));
	assert_non_null(strstr(text, "evil) 1 (x"));
	assert_non_null(strstr(text, "kernel threads bound here (not counted): ksoftirqd/2"));
	last = strstr(text, "\nverdict: ");
	assert_non_null(last);
	assert_non_null(strstr(last, "VIOLATION on CPU 2-3: foreign tasks ran there (1 switch-ins, "
				     "1 task named); 3 foreign tasks are pinned there"));
	assert_ptr_equal(strchr(last + 1, '\n'), text + len - 1); /* the last line */
	free(text);

	assert_int_equal(verify_report_new(none, false, &empty), 0);
	text = NULL;
	f = open_memstream(&text, &len);
	verify_report_print(empty, f);
	fclose(f);
	assert_non_null(strstr(text, "verdict: clean: no exclusive CPUs to check\n"));
	free(text);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_verify_exclusive_flag_parses_and_merges),
		cmocka_unit_test(test_verify_exclusive_flag_rejects_bad_syntax),
		cmocka_unit_test(test_verify_exclusive_flag_caps_owner_count),
		cmocka_unit_test(test_verify_owners_json_reads_the_daemon_file),
		cmocka_unit_test(test_verify_owners_json_accepts_empty_list),
		cmocka_unit_test(test_verify_owners_json_rejects_malformed),
		cmocka_unit_test(test_verify_owners_json_caps_size_and_entries),
		cmocka_unit_test_setup_teardown(test_verify_resolve_places_owners_in_their_hierarchy,
						tree_setup, tree_teardown),
		cmocka_unit_test_setup_teardown(test_verify_resolve_v1_joins_the_mount_root,
						tree_setup, tree_teardown),
		cmocka_unit_test_setup_teardown(test_verify_resolve_rejects_what_it_cannot_place,
						tree_setup, tree_teardown),
		cmocka_unit_test_setup_teardown(test_verify_resolve_detects_a_stale_state_file,
						tree_setup, tree_teardown),
		cmocka_unit_test(test_verify_check_cpus_names_an_impossible_cpu),
		cmocka_unit_test(test_verify_classify_by_owner_and_allowed_cpus),
		cmocka_unit_test(test_verify_scan_finds_pinned_and_unconfined_tasks),
		cmocka_unit_test(test_verify_scan_with_scope_counts_outsiders_apart),
		cmocka_unit_test(test_verify_threads_beyond_the_list_still_count),
		cmocka_unit_test(test_verify_scan_fails_on_missing_proc),
		cmocka_unit_test(test_verify_events_are_counted_per_cpu_and_task),
		cmocka_unit_test(test_verify_kthreads_fail_only_when_strict),
		cmocka_unit_test(test_verify_scope_forgives_outsiders_but_not_unnamed),
		cmocka_unit_test(test_verify_without_events_scope_is_incomplete),
		cmocka_unit_test(test_verify_seen_table_full_counts_the_rest),
		cmocka_unit_test(test_verify_json_carries_the_verdict_and_the_offenders),
		cmocka_unit_test(test_verify_print_ends_with_the_verdict),
	};

	return cmocka_run_group_tests(tests, NULL, NULL);
}
