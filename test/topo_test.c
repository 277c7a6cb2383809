/* topo: hwloc discovery against the real-machine captures of testdata/topologies
 * (every fact of expected.json) and corrupt captures.
 *
 * The captures are extracted once per run into a temporary directory (group
 * setup); tests that damage one undo it in their teardown. TOPO_DIR locates the
 * testdata (test/run.sh sets it), else ../shared/testdata/topologies. */
#include <errno.h>
#include <ftw.h>
#include <glob.h>
#include <limits.h>
#include <setjmp.h>
#include <spawn.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cmocka.h>
#include <json-c/json.h>

#include "topo.h"

extern char **environ;

/* Extracted captures and expected.json, shared by every test of the group. */
static char base_dir[PATH_MAX];
static struct json_object *expected;

/* snprintf that fails the test instead of truncating. */
static void xsnprintf(char *buf, size_t size, const char *fmt, ...)
	__attribute__((format(printf, 3, 4)));

static void xsnprintf(char *buf, size_t size, const char *fmt, ...)
{
	va_list ap;
	int n;

	va_start(ap, fmt);
	n = vsnprintf(buf, size, fmt, ap);
	va_end(ap);
	assert_true(n >= 0 && (size_t)n < size);
}

static const char *topo_dir(void)
{
	const char *d = getenv("TOPO_DIR");

	return d && *d ? d : "../shared/testdata/topologies";
}

static int run(const char *const argv[])
{
	pid_t pid;
	int st;

	if (posix_spawnp(&pid, argv[0], NULL, NULL, (char *const *)argv, environ) != 0)
		return -1;
	if (waitpid(pid, &st, 0) < 0)
		return -1;
	return WIFEXITED(st) && WEXITSTATUS(st) == 0 ? 0 : -1;
}

static int rm_one(const char *path, const struct stat *st, int flag, struct FTW *ftw)
{
	return remove(path);
}

static void rm_rf(const char *dir)
{
	(void)nftw(dir, rm_one, 16, FTW_DEPTH | FTW_PHYS);
}

static void write_file(const char *path, const char *content, size_t len)
{
	FILE *f = fopen(path, "w");

	if (!f)
		fail_msg("%s: %s", path, strerror(errno));
	assert_int_equal(fwrite(content, 1, len, f), len);
	assert_int_equal(fclose(f), 0);
}

static struct json_object *expected_entry(const char *file)
{
	struct json_object *list, *e, *v;

	assert_true(json_object_object_get_ex(expected, "topologies", &list));
	for (size_t i = 0; i < json_object_array_length(list); i++) {
		e = json_object_array_get_idx(list, i);
		assert_true(json_object_object_get_ex(e, "file", &v));
		if (strcmp(json_object_get_string(v), file) == 0)
			return e;
	}
	fail_msg("%s: not in expected.json", file);
	return NULL;
}

static struct json_object *get(struct json_object *o, const char *key)
{
	struct json_object *v;

	if (!json_object_object_get_ex(o, key, &v))
		fail_msg("expected.json: no \"%s\"", key);
	return v;
}

static const char *get_str(struct json_object *o, const char *key)
{
	return json_object_get_string(get(o, key));
}

/* An int member, -1 for null. */
static int get_int_or_null(struct json_object *o, const char *key)
{
	struct json_object *v = get(o, key);

	return v ? json_object_get_int(v) : -1;
}

static struct cpuset cpus_of(const char *list)
{
	struct cpuset s;
	char why[CPUSET_ERR_MAX];

	if (cpuset_parse(list, &s, why) < 0)
		fail_msg("expected.json: bad cpulist \"%s\": %s", list, why);
	return s;
}

/* Where the capture's top directory landed under base_dir. */
static void capture_root(struct json_object *e, char *buf, size_t size)
{
	xsnprintf(buf, size, "%s/%s", base_dir, get_str(e, "top_dir"));
}

/* Loads a capture the way its format requires, with the extra hwloc environment
 * expected.json was computed with (e.g. HWLOC_KEEP_NVIDIA_GPU_NUMA_NODES); the
 * variables the loaders manage themselves are left to them. */
static int load_capture(struct json_object *e, const char *root, struct topo **ret, char *why)
{
	static const char *const managed[] = {"HWLOC_FSROOT", "HWLOC_COMPONENTS",
					      "HWLOC_CPUID_PATH", "HWLOC_THISSYSTEM",
					      "HWLOC_X86_TOPOEXT_NUMANODES"};
	struct json_object *env = get(e, "hwloc_env");
	const char *format = get_str(e, "format");
	int r = -EINVAL;

	json_object_object_foreach(env, k1, v1)
	{
		bool skip = false;

		for (size_t i = 0; i < ARRAY_SIZE(managed); i++)
			skip |= strcmp(k1, managed[i]) == 0;
		if (!skip)
			assert_int_equal(setenv(k1, json_object_get_string(v1), 1), 0);
	}
	if (strcmp(format, "linux-fsroot") == 0)
		r = topo_load_hwloc(root, ret, why);
	else if (strcmp(format, "x86-cpuid-dump") == 0)
		r = topo_load_cpuid_dump(root, ret, why);
	else
		fail_msg("unknown capture format %s", format);
	json_object_object_foreach(env, k2, v2)
	{
		(void)v2;
		if (strncmp(k2, "HWLOC_", 6) == 0)
			(void)unsetenv(k2);
	}
	return r;
}

/* Equal keys on one side iff equal values on the other: the grouping is the same
 * whatever the numbering. */
static void assert_same_grouping(const int *a, const int *b, int n, const char *what,
				 const int *cpus)
{
	for (int i = 0; i < n; i++)
		for (int j = i + 1; j < n; j++)
			if ((a[i] == a[j]) != (b[i] == b[j]))
				fail_msg("%s: CPUs %d and %d grouped %s by hwloc 2.9 but %s by us", what,
					 cpus[i], cpus[j], a[i] == a[j] ? "together" : "apart",
					 b[i] == b[j] ? "together" : "apart");
}

/* hwloc 2.9 names P/E cores only through CoreType, and only when it sees
 * more than one kind; none of the captures has sysfs cpu_atom. */
static enum topo_core_type expected_type(struct json_object *e, int cpu)
{
	struct json_object *kinds = get(e, "core_kinds");

	if (json_object_array_length(kinds) < 2)
		return TOPO_CORE_STANDARD;
	for (size_t k = 0; k < json_object_array_length(kinds); k++) {
		struct json_object *kind = json_object_array_get_idx(kinds, k);
		struct cpuset s = cpus_of(get_str(kind, "cpus"));
		const char *info = get_str(kind, "info");

		if (!cpuset_has(&s, cpu))
			continue;
		if (strstr(info, "CoreType=IntelAtom"))
			return TOPO_CORE_E;
		if (strstr(info, "CoreType=IntelCore"))
			return TOPO_CORE_P;
	}
	return TOPO_CORE_STANDARD;
}

static void expect_field(int cpu, const char *field, int got, int want)
{
	if (got != want)
		fail_msg("CPU %d: %s %d, expected %d", cpu, field, got, want);
}

static void assert_matches_expected(const struct topo *t, struct json_object *e)
{
	struct json_object *per_cpu = get(e, "per_cpu"), *numa_cpus = get(e, "numa_cpus");
	struct json_object *l3_cpus = get(e, "l3_cpus");
	struct cpuset online = cpus_of(get_str(e, "cpus_online"));
	struct cpuset offline = cpus_of(get_str(e, "cpus_offline_known_to_hwloc"));
	bool core_id_is_os = strcmp(get_str(e, "core_id_source"), "os_index") == 0;
	const char *l3_key = get(e, "l3_key") ? get_str(e, "l3_key") : NULL;
	int n = (int)json_object_array_length(per_cpu);
	int *cpus, *exp_core, *our_core, *exp_l3, *our_l3;
	int numa_with_cpus = 0;

	assert_true(cpuset_equal(&t->online, &online));
	assert_true(cpuset_equal(&t->offline, &offline));
	assert_int_equal(t->n_cpus, json_object_get_int(get(e, "pus")));
	assert_int_equal(n, t->n_cpus);
	assert_int_equal(t->n_sockets, json_object_get_int(get(e, "sockets")));
	assert_int_equal(t->n_cores, json_object_get_int(get(e, "cores")));
	assert_int_equal(t->n_l3, json_object_get_int(get(e, "l3_caches")));
	assert_int_equal(t->smt, json_object_get_int(get(e, "smt_width")) > 1);

	/* NUMA: CPU-less nodes (memory only) are not in our model. */
	assert_int_equal(json_object_object_length(numa_cpus),
			 json_object_get_int(get(e, "numa_nodes")));
	json_object_object_foreach(numa_cpus, node, list)
	{
		struct cpuset s = cpus_of(json_object_get_string(list));

		if (cpuset_is_empty(&s))
			continue;
		numa_with_cpus++;
		CPUSET_FOREACH(cpu, &s)
		{
			if (!topo_cpu(t, cpu))
				fail_msg("CPU %d of node %s missing", cpu, node);
			expect_field(cpu, "numa", topo_cpu(t, cpu)->numa, atoi(node));
		}
	}
	assert_int_equal(t->n_numa, numa_with_cpus);

	cpus = calloc((size_t)n, sizeof(int));
	exp_core = calloc((size_t)n, sizeof(int));
	our_core = calloc((size_t)n, sizeof(int));
	exp_l3 = calloc((size_t)n, sizeof(int));
	our_l3 = calloc((size_t)n, sizeof(int));
	assert_true(cpus && exp_core && our_core && exp_l3 && our_l3);
	for (int i = 0; i < n; i++) {
		struct json_object *row = json_object_array_get_idx(per_cpu, i);
		int cpu = json_object_get_int(get(row, "cpu"));
		const struct topo_cpu *c = topo_cpu(t, cpu);

		if (!c)
			fail_msg("CPU %d missing", cpu);
		cpus[i] = cpu;
		expect_field(cpu, "socket", c->socket, get_int_or_null(row, "socket"));
		expect_field(cpu, "numa", c->numa, get_int_or_null(row, "numa"));
		exp_core[i] = json_object_get_int(get(row, "core_logical"));
		our_core[i] = c->core;
		expect_field(cpu, "core_id", c->core_id,
			     core_id_is_os ? json_object_get_int(get(row, "core")) : c->core);
		exp_l3[i] = get_int_or_null(row, "l3");
		our_l3[i] = c->l3;
		if (exp_l3[i] < 0)
			expect_field(cpu, "l3", c->l3, -1);
		else if (strcmp(l3_key, "os_index") == 0)
			expect_field(cpu, "l3", c->l3, exp_l3[i]);
		if (c->type != expected_type(e, cpu))
			fail_msg("CPU %d: core type %s, expected %s", cpu,
				 topo_core_type_name(c->type),
				 topo_core_type_name(expected_type(e, cpu)));
	}
	assert_same_grouping(exp_core, our_core, n, "core (SMT siblings)", cpus);
	assert_same_grouping(exp_l3, our_l3, n, "L3", cpus);

	/* l3_cpus says the same as per_cpu l3; check it on its own anyway. */
	json_object_object_foreach(l3_cpus, key, list2)
	{
		struct cpuset s = cpus_of(json_object_get_string(list2));
		int first = -2;

		(void)key;
		CPUSET_FOREACH(cpu, &s)
		{
			if (first == -2)
				first = topo_cpu(t, cpu)->l3;
			assert_int_not_equal(first, -1);
			assert_int_equal(topo_cpu(t, cpu)->l3, first);
		}
	}
	free(cpus);
	free(exp_core);
	free(our_core);
	free(exp_l3);
	free(our_l3);
}

/* ---- captures ------------------------------------------------------------------------ */

static void test_topo_load_capture_matches_expected(void **state)
{
	const char *file = *state;
	struct json_object *e = expected_entry(file);
	char root[PATH_MAX], why[TOPO_ERR_MAX] = "";
	struct topo *t = NULL;
	int r;

	capture_root(e, root, sizeof(root));
	r = load_capture(e, root, &t, why);
	if (r < 0)
		fail_msg("%s: %d %s", file, r, why);
	assert_matches_expected(t, e);
	topo_free(t);
}

/* The table below must name every tarball shipped, and expected.json too. */
static const char *const captures[] = {
	"2i386-2c-nohugepage.tar.bz2",
	"32intel64-2p8co2t+8ve.tar.bz2",
	"20em64t-hybrid-1p6c2t+2ca4co1t.tar.bz2",
	"Intel-RaptorLake-Corei7-1370P.tar.bz2",
	"128arm-2pa2n8cluster4co.tar.bz2",
	"64amd64-4s2n4ca2co.tar.bz2",
	"AMD-17h-Zen-2xEpyc-7451.tar.bz2",
	"nvidiagpunumanodes.tar.bz2",
	"16em64t-4s2c2t-offlines.tar.bz2",
	"2ps3-2t.tar.bz2",
	"32amd64-4s2n4c-cgroup2.tar.bz2",
};

static void test_topo_every_capture_is_tested(void **state)
{
	char pattern[PATH_MAX];
	glob_t g;

	xsnprintf(pattern, sizeof(pattern), "%s/*.tar.bz2", topo_dir());
	assert_int_equal(glob(pattern, 0, NULL, &g), 0);
	assert_int_equal(g.gl_pathc, ARRAY_SIZE(captures));
	for (size_t i = 0; i < g.gl_pathc; i++) {
		const char *name = strrchr(g.gl_pathv[i], '/') + 1;
		bool found = false;

		for (size_t j = 0; j < ARRAY_SIZE(captures); j++)
			found |= strcmp(name, captures[j]) == 0;
		if (!found)
			fail_msg("%s has no test", name);
		(void)expected_entry(name);
	}
	globfree(&g);
	assert_int_equal(json_object_array_length(get(expected, "topologies")),
			 ARRAY_SIZE(captures));
}

static void test_topo_load_hwloc_live_machine_has_cpus(void **state)
{
	char why[TOPO_ERR_MAX] = "";
	struct topo *t = NULL;
	long n = sysconf(_SC_NPROCESSORS_ONLN);

	if (topo_load_hwloc(NULL, &t, why) < 0)
		fail_msg("live machine: %s", why);
	assert_true(t->n_cpus >= 1);
	assert_int_equal(t->n_cpus, n);
	assert_int_equal(cpuset_count(&t->online), t->n_cpus);
	topo_free(t);
}

static void test_topo_load_hwloc_restores_environment(void **state)
{
	struct json_object *e = expected_entry("2i386-2c-nohugepage.tar.bz2");
	char root[PATH_MAX], why[TOPO_ERR_MAX] = "";
	struct topo *t = NULL;

	capture_root(e, root, sizeof(root));
	assert_int_equal(setenv("HWLOC_COMPONENTS", "bogus-but-restored", 1), 0);
	(void)unsetenv("HWLOC_FSROOT");
	if (topo_load_hwloc(root, &t, why) < 0)
		fail_msg("%s", why);
	assert_string_equal(getenv("HWLOC_COMPONENTS"), "bogus-but-restored");
	assert_null(getenv("HWLOC_FSROOT"));
	assert_int_equal(t->n_cpus, 2);
	topo_free(t);
	(void)unsetenv("HWLOC_COMPONENTS");
}

/* ---- corrupt captures ---------------------------------------------------------------- */

/* Damage done to the shared extraction by one test, undone by its teardown
 * (which cmocka runs even when the test fails), so no test copies a capture. */
enum mutation_kind { MUT_WROTE, MUT_CREATED, MUT_MOVED, MUT_MKDIR };

static struct mutation {
	enum mutation_kind kind;
	char path[PATH_MAX];
	char *saved; /* MUT_WROTE: the old content */
	size_t len;
} mutations[8];
static int n_mutations;

static struct mutation *mutation_new(enum mutation_kind kind, const char *path)
{
	struct mutation *m;

	assert_true(n_mutations < (int)ARRAY_SIZE(mutations));
	m = &mutations[n_mutations++];
	*m = (struct mutation){.kind = kind};
	xsnprintf(m->path, sizeof(m->path), "%s", path);
	return m;
}

static void root_of(const char *top_dir, char *root, size_t size)
{
	xsnprintf(root, size, "%s/%s", base_dir, top_dir);
}

/* Replaces (or creates) root/rel with content. */
static void mutate_write(const char *root, const char *rel, const char *content)
{
	char path[PATH_MAX];
	struct mutation *m;
	FILE *f;

	xsnprintf(path, sizeof(path), "%s/%s", root, rel);
	f = fopen(path, "r");
	if (f) {
		m = mutation_new(MUT_WROTE, path);
		m->saved = malloc(1 << 16);
		assert_non_null(m->saved);
		m->len = fread(m->saved, 1, 1 << 16, f);
		(void)fclose(f);
	} else {
		(void)mutation_new(MUT_CREATED, path);
	}
	write_file(path, content, strlen(content));
}

/* Moves root/rel (file or directory) out of the way. */
static void mutate_remove(const char *root, const char *rel)
{
	char path[PATH_MAX], moved[PATH_MAX + 8];

	xsnprintf(path, sizeof(path), "%s/%s", root, rel);
	xsnprintf(moved, sizeof(moved), "%s.moved", path);
	assert_int_equal(rename(path, moved), 0);
	(void)mutation_new(MUT_MOVED, path);
}

static void mutate_mkdir(const char *root, const char *rel)
{
	char path[PATH_MAX];

	xsnprintf(path, sizeof(path), "%s/%s", root, rel);
	assert_int_equal(mkdir(path, 0755), 0);
	(void)mutation_new(MUT_MKDIR, path);
}

static int undo_mutations(void **state)
{
	while (n_mutations > 0) {
		struct mutation *m = &mutations[--n_mutations];
		char moved[PATH_MAX + 8];

		switch (m->kind) {
		case MUT_WROTE:
			write_file(m->path, m->saved, m->len);
			break;
		case MUT_CREATED:
			(void)unlink(m->path);
			break;
		case MUT_MOVED:
			xsnprintf(moved, sizeof(moved), "%s.moved", m->path);
			(void)rename(moved, m->path);
			break;
		case MUT_MKDIR:
			(void)rmdir(m->path);
			break;
		}
		free(m->saved);
		m->saved = NULL;
	}
	return 0;
}

/* Loads root and expects err with every part in why. */
static void assert_load_fails(const char *root, int err, const char *part)
{
	char why[TOPO_ERR_MAX] = "";
	struct topo *t = NULL;
	int r = topo_load_hwloc(root, &t, why);

	if (r >= 0) {
		topo_free(t);
		fail_msg("%s loaded, expected error with '%s'", root, part);
	}
	if (!strstr(why, part))
		fail_msg("error '%s' lacks '%s'", why, part);
	assert_int_equal(r, err);
	assert_null(t);
}

#define INTEL "32intel64-2p8co2t+8ve"
#define CPUDIR "sys/devices/system/cpu"

/* Kernels since 5.13 list an Intel hybrid's E-cores in cpu_atom/cpus (the
 * capture predates that: add it). */
static void test_topo_load_hwloc_reads_e_cores_from_cpu_atom(void **state)
{
	char root[PATH_MAX], why[TOPO_ERR_MAX] = "";
	struct topo *t = NULL;

	root_of("20em64t-hybrid-1p6c2t+2ca4co1t", root, sizeof(root));
	mutate_mkdir(root, "sys/devices/cpu_atom");
	mutate_write(root, "sys/devices/cpu_atom/cpus", "12-19\n");
	if (topo_load_hwloc(root, &t, why) < 0)
		fail_msg("%s", why);
	assert_int_equal(t->n_cpus, 20);
	for (int i = 0; i < t->n_cpus; i++)
		assert_int_equal(t->cpus[i].type, t->cpus[i].cpu >= 12 ? TOPO_CORE_E : TOPO_CORE_P);
	topo_free(t);
}

static void test_topo_load_hwloc_rejects_garbage_core_id(void **state)
{
	char root[PATH_MAX];

	root_of(INTEL, root, sizeof(root));
	mutate_write(root, CPUDIR "/cpu3/topology/core_id", "garbage\n");
	assert_load_fails(root, -EINVAL, "/sys/devices/system/cpu/cpu3/topology/core_id: not an");
}

static void test_topo_load_hwloc_rejects_truncated_core_id(void **state)
{
	char root[PATH_MAX];

	root_of(INTEL, root, sizeof(root));
	mutate_write(root, CPUDIR "/cpu17/topology/core_id", "");
	assert_load_fails(root, -EINVAL, "cpu17/topology/core_id: empty");
}

static void test_topo_load_hwloc_rejects_garbage_package_id(void **state)
{
	char root[PATH_MAX];

	root_of(INTEL, root, sizeof(root));
	mutate_write(root, CPUDIR "/cpu9/topology/physical_package_id", "1x\n");
	assert_load_fails(root, -EINVAL, "cpu9/topology/physical_package_id: not an integer");
}

static void test_topo_load_hwloc_rejects_truncated_sibling_mask(void **state)
{
	char root[PATH_MAX];

	root_of(INTEL, root, sizeof(root));
	mutate_write(root, CPUDIR "/cpu5/topology/thread_siblings", "");
	assert_load_fails(root, -EINVAL, "cpu5/topology/thread_siblings: empty");
}

static void test_topo_load_hwloc_rejects_sibling_mask_without_self(void **state)
{
	char root[PATH_MAX];

	root_of(INTEL, root, sizeof(root));
	mutate_write(root, CPUDIR "/cpu0/topology/core_cpus", "00000000,00000002\n");
	assert_load_fails(root, -EINVAL, "cpu0/topology/core_cpus: does not contain CPU 0");
}

static void test_topo_load_hwloc_rejects_missing_cpu_online(void **state)
{
	char root[PATH_MAX];

	root_of(INTEL, root, sizeof(root));
	mutate_remove(root, CPUDIR "/online");
	assert_load_fails(root, -ENOENT, "/sys/devices/system/cpu/online: missing");
}

static void test_topo_load_hwloc_rejects_garbage_cpu_online(void **state)
{
	char root[PATH_MAX];

	root_of(INTEL, root, sizeof(root));
	mutate_write(root, CPUDIR "/online", "0-31x\n");
	assert_load_fails(root, -EINVAL, "/sys/devices/system/cpu/online: ");
	mutate_write(root, CPUDIR "/online", "");
	assert_load_fails(root, -EINVAL, "/sys/devices/system/cpu/online: empty file");
	mutate_write(root, CPUDIR "/online", "\n");
	assert_load_fails(root, -EINVAL, "/sys/devices/system/cpu/online: no CPU online");
}

static void test_topo_load_hwloc_rejects_online_cpu_without_topology(void **state)
{
	char root[PATH_MAX];

	root_of(INTEL, root, sizeof(root));
	mutate_remove(root, CPUDIR "/cpu7/topology");
	assert_load_fails(root, -ENOENT, "cpu7/topology: missing for online CPU 7");
}

static void test_topo_load_hwloc_rejects_online_list_naming_missing_cpu(void **state)
{
	char root[PATH_MAX];

	root_of(INTEL, root, sizeof(root));
	mutate_write(root, CPUDIR "/online", "0-32\n");
	assert_load_fails(root, -ENOENT, "cpu32/topology: missing for online CPU 32");
}

static void test_topo_load_hwloc_rejects_garbage_l3_id(void **state)
{
	char root[PATH_MAX];

	root_of(INTEL, root, sizeof(root));
	mutate_write(root, CPUDIR "/cpu20/cache/index3/id", "one\n");
	assert_load_fails(root, -EINVAL, "cpu20/cache/index3/id: not an integer");
}

static void test_topo_load_hwloc_rejects_garbage_node_cpulist(void **state)
{
	char root[PATH_MAX];

	root_of(INTEL, root, sizeof(root));
	mutate_write(root, "sys/devices/system/node/node1/cpulist", "8-15,24-\n");
	assert_load_fails(root, -EINVAL, "/sys/devices/system/node/node1/cpulist: ");
}

static void test_topo_load_hwloc_rejects_node_cpumap_disagreeing(void **state)
{
	char root[PATH_MAX];

	root_of(INTEL, root, sizeof(root));
	mutate_write(root, "sys/devices/system/node/node0/cpumap", "00000000,00000000,00000000,00000000\n");
	assert_load_fails(root, -EINVAL, "node0/cpumap: disagrees with cpulist");
	mutate_write(root, "sys/devices/system/node/node0/cpumap", "00ff,zz\n");
	assert_load_fails(root, -EINVAL, "node0/cpumap: bad character");
}

static void test_topo_load_hwloc_rejects_garbage_cpu_atom(void **state)
{
	char root[PATH_MAX];

	root_of(INTEL, root, sizeof(root));
	mutate_mkdir(root, "sys/devices/cpu_atom");
	mutate_write(root, "sys/devices/cpu_atom/cpus", "twelve\n");
	assert_load_fails(root, -EINVAL, "/sys/devices/cpu_atom/cpus: ");
}

/* Kernels before 2.6.26 have no cpu/online: hwloc reads cpuN/online with atoi(). */
static void test_topo_load_hwloc_rejects_garbage_per_cpu_online(void **state)
{
	char root[PATH_MAX];

	root_of("16em64t-4s2c2t-offlines", root, sizeof(root));
	mutate_write(root, CPUDIR "/cpu3/online", "yes\n");
	assert_load_fails(root, -EINVAL, "cpu3/online: not an integer");
}

static void test_topo_load_hwloc_rejects_missing_root(void **state)
{
	char root[PATH_MAX];

	xsnprintf(root, sizeof(root), "%s/does-not-exist", base_dir);
	assert_load_fails(root, -ENOENT, "does-not-exist: No such file");
	xsnprintf(root, sizeof(root), "%s/empty-root", base_dir);
	assert_int_equal(mkdir(root, 0755), 0);
	assert_load_fails(root, -ENOENT, "empty-root/sys/devices/system/cpu: No such file");
	assert_int_equal(rmdir(root), 0);
}

static void test_topo_load_cpuid_dump_rejects_missing_dump(void **state)
{
	char why[TOPO_ERR_MAX] = "";
	struct topo *t = NULL;

	assert_int_equal(topo_load_cpuid_dump(base_dir, &t, why), -ENOENT);
	assert_non_null(strstr(why, "/pu0: No such file"));
	assert_null(t);
}

/* ---- setup --------------------------------------------------------------------------- */

static int group_setup(void **state)
{
	char path[PATH_MAX];

	xsnprintf(path, sizeof(path), "%s/expected.json", topo_dir());
	expected = json_object_from_file(path);
	if (!expected) {
		fprintf(stderr, "topo_test: cannot read %s (set TOPO_DIR)\n", path);
		return -1;
	}
	/* The captures are ~25k small files: on tmpfs unless TMPDIR says otherwise. */
	if (getenv("TMPDIR") && *getenv("TMPDIR"))
		xsnprintf(base_dir, sizeof(base_dir), "%s/topo-test.XXXXXX", getenv("TMPDIR"));
	else if (access("/dev/shm", W_OK) == 0)
		xsnprintf(base_dir, sizeof(base_dir), "/dev/shm/topo-test.XXXXXX");
	else
		xsnprintf(base_dir, sizeof(base_dir), "/tmp/topo-test.XXXXXX");
	if (!mkdtemp(base_dir))
		return -1;
	for (size_t i = 0; i < ARRAY_SIZE(captures); i++) {
		xsnprintf(path, sizeof(path), "%s/%s", topo_dir(), captures[i]);
		if (run((const char *const[]){"tar", "-xjf", path, "-C", base_dir, NULL}) < 0) {
			fprintf(stderr, "topo_test: cannot extract %s\n", path);
			return -1;
		}
	}
	return 0;
}

static int group_teardown(void **state)
{
	rm_rf(base_dir);
	(void)json_object_put(expected);
	return 0;
}

int main(void)
{
	static const struct CMUnitTest others[] = {
		cmocka_unit_test(test_topo_every_capture_is_tested),
		cmocka_unit_test_teardown(test_topo_load_hwloc_reads_e_cores_from_cpu_atom, undo_mutations),
		cmocka_unit_test(test_topo_load_hwloc_live_machine_has_cpus),
		cmocka_unit_test(test_topo_load_hwloc_restores_environment),
		cmocka_unit_test_teardown(test_topo_load_hwloc_rejects_garbage_core_id, undo_mutations),
		cmocka_unit_test_teardown(test_topo_load_hwloc_rejects_truncated_core_id, undo_mutations),
		cmocka_unit_test_teardown(test_topo_load_hwloc_rejects_garbage_package_id, undo_mutations),
		cmocka_unit_test_teardown(test_topo_load_hwloc_rejects_truncated_sibling_mask, undo_mutations),
		cmocka_unit_test_teardown(test_topo_load_hwloc_rejects_sibling_mask_without_self, undo_mutations),
		cmocka_unit_test_teardown(test_topo_load_hwloc_rejects_missing_cpu_online, undo_mutations),
		cmocka_unit_test_teardown(test_topo_load_hwloc_rejects_garbage_cpu_online, undo_mutations),
		cmocka_unit_test_teardown(test_topo_load_hwloc_rejects_online_cpu_without_topology, undo_mutations),
		cmocka_unit_test_teardown(test_topo_load_hwloc_rejects_online_list_naming_missing_cpu, undo_mutations),
		cmocka_unit_test_teardown(test_topo_load_hwloc_rejects_garbage_l3_id, undo_mutations),
		cmocka_unit_test_teardown(test_topo_load_hwloc_rejects_garbage_node_cpulist, undo_mutations),
		cmocka_unit_test_teardown(test_topo_load_hwloc_rejects_node_cpumap_disagreeing, undo_mutations),
		cmocka_unit_test_teardown(test_topo_load_hwloc_rejects_garbage_cpu_atom, undo_mutations),
		cmocka_unit_test_teardown(test_topo_load_hwloc_rejects_garbage_per_cpu_online, undo_mutations),
		cmocka_unit_test(test_topo_load_hwloc_rejects_missing_root),
		cmocka_unit_test(test_topo_load_cpuid_dump_rejects_missing_dump),
	};
	enum { N_CAPTURES = ARRAY_SIZE(captures), N = N_CAPTURES + ARRAY_SIZE(others) };
	static char names[N_CAPTURES][96];
	struct CMUnitTest tests[N];

	/* One test per capture, named after it, from the captures[] table. */
	for (size_t i = 0; i < N_CAPTURES; i++) {
		xsnprintf(names[i], sizeof(names[i]), "test_topo_load_capture_matches_expected(%s)",
			 captures[i]);
		tests[i] = (struct CMUnitTest){
			.name = names[i],
			.test_func = test_topo_load_capture_matches_expected,
			.initial_state = (void *)captures[i],
		};
	}
	memcpy(&tests[N_CAPTURES], others, sizeof(others));
	/* cmocka_run_group_tests() only takes arrays of static size. */
	return _cmocka_run_group_tests("topo", tests, N, group_setup, group_teardown);
}
